/* A weight of the CPU plugin opened as a module, for the repacking and
 * pack cache tests: one matmul on a wrapped Q4_0 weight (repack_case), or
 * a group of two on weights of other types (rp_group_run). */
#ifndef SY_TEST_REPACK_CASE_H
#define SY_TEST_REPACK_CASE_H

#include <sys/stat.h>

#include "cpu_direct.h"

typedef struct repack_case {
    const sy_plugin_desc *d;
    void *state;
    direct_host h;
    void *wbuf, *xbuf, *ybuf;
    sy_tensor w, x, y;
    sy_node node;
} repack_case;

#define RP_K 256
#define RP_N 64 /* two whole 4 KiB pages of Q4_0 */
#define RP_M 16

static inline uint64_t rp_in_use(const repack_case *c)
{
    uint64_t in_use = 0;
    cr_assert_eq(c->d->memory_usage(c->state, 0, false, &in_use, NULL), SY_OK);
    return in_use;
}

/* A new instance of the module |so| on two threads, SWITCHYARD_CPU_REPACK
 * set to |repack|, logging into |h|. */
static inline const sy_plugin_desc *rp_instance(void *so, const char *repack, direct_host *h,
                                                void **out_state)
{
    setenv("SWITCHYARD_CPU_REPACK", repack, 1);
    setenv("SWITCHYARD_THREADS", "2", 1);
    const sy_plugin_desc *d = query_module(so, SY_PLUGIN_ABI_VERSION);
    direct_host_init(h);
    cr_assert_eq(d->init(&h->host, out_state), SY_OK, "init: %s", h->log);
    return d;
}

/* Ends a test on the module |so|: the environment the cases set goes. */
static inline void rp_done(void *so)
{
    unsetenv("SWITCHYARD_CPU_PACK_CACHE");
    unsetenv("SWITCHYARD_CPU_REPACK");
    unsetenv("SWITCHYARD_THREADS");
    dlclose(so);
}

/* A Q4_0 weight of RP_N rows at |wmem| (wrapped, as the runtime wraps the
 * mmap'd file) times |m| F32 columns. */
static inline void rp_open(repack_case *c, void *so, const char *repack, uint8_t *wmem, int64_t m)
{
    memset(c, 0, sizeof *c);
    c->d = rp_instance(so, repack, &c->h, &c->state);
    c->w = (sy_tensor){.dtype = SY_DTYPE_Q4_0, .role = SY_ROLE_WEIGHT, .n_dims = 2,
                       .ne = {RP_K, RP_N, 1, 1}};
    c->x = (sy_tensor){.dtype = SY_DTYPE_F32, .role = SY_ROLE_INPUT, .n_dims = 2, .ne = {RP_K, m, 1, 1}};
    c->y = (sy_tensor){.dtype = SY_DTYPE_F32, .role = SY_ROLE_ACTIVATION, .n_dims = 2,
                       .ne = {RP_N, m, 1, 1}};
    sy_tensor_set_contiguous_strides(&c->w);
    sy_tensor_set_contiguous_strides(&c->x);
    sy_tensor_set_contiguous_strides(&c->y);
    cr_assert_eq(c->d->buffer_import_host(c->state, 0, wmem, sy_tensor_nbytes(&c->w), &c->wbuf), SY_OK);
    cr_assert_eq(c->d->buffer_alloc(c->state, 0, sy_tensor_nbytes(&c->x), &c->xbuf), SY_OK);
    cr_assert_eq(c->d->buffer_alloc(c->state, 0, sy_tensor_nbytes(&c->y), &c->ybuf), SY_OK);
    float x[RP_K * RP_M];
    for (int i = 0; i < RP_K * m; i++)
        x[i] = (float)((i * 37) % 19) / 9.0f - 1.0f;
    cr_assert_eq(c->d->copy_in(c->state, 0, c->xbuf, 0, x, sy_tensor_nbytes(&c->x)), SY_OK);
    c->w.buffer = c->wbuf;
    c->w.data = wmem;
    c->x.buffer = c->xbuf;
    c->x.data = c->d->buffer_host_ptr(c->state, 0, c->xbuf);
    c->y.buffer = c->ybuf;
    c->y.data = c->d->buffer_host_ptr(c->state, 0, c->ybuf);
    c->node = (sy_node){.op = SY_OP_MATMUL, .n_inputs = 2, .inputs = {&c->w, &c->x}, .output = &c->y};
    snprintf(c->w.name, sizeof c->w.name, "w");
}

static inline void rp_run(repack_case *c, float *out)
{
    sy_node *nodes[1] = {&c->node};
    cr_assert_eq(c->d->execute(c->state, 0, nodes, 1), SY_OK, "execute: %s", c->h.log);
    cr_assert_eq(c->d->copy_out(c->state, 0, c->ybuf, 0, out, sy_tensor_nbytes(&c->y)), SY_OK);
}

static inline void rp_close(repack_case *c)
{
    c->d->buffer_free(c->state, 0, c->wbuf);
    c->d->buffer_free(c->state, 0, c->xbuf);
    c->d->buffer_free(c->state, 0, c->ybuf);
    c->d->deinit(c->state);
}

static inline void rp_fill(uint8_t *w, unsigned seed)
{
    for (int i = 0; i < RP_N * RP_K / 32 * 18; i++)
        w[i] = (uint8_t)((i * 131u + seed * 7u) >> 1);
    for (int b = 0; b < RP_N * RP_K / 32; b++) {
        const uint16_t d = (uint16_t)(0x2000 + (b * 97 + seed) % 1024); /* small positive f16 */
        memcpy(w + 18 * b, &d, sizeof d);
    }
}


/* Bytes of the file at |path|, -1 where there is none. */
static inline long long rp_file_size(const char *path)
{
    struct stat st;
    return stat(path, &st) == 0 ? (long long)st.st_size : -1;
}

/* Bytes of one RP_K-wide row of |t| (Q8_0: 34 per block, Q4_1: 20, Q4_0: 18). */
static inline size_t rp_row_bytes(sy_dtype t)
{
    return RP_K / 32 * (t == SY_DTYPE_Q8_0 ? 34 : t == SY_DTYPE_Q4_1 ? 20 : 18);
}

/* Runs the matmuls of |dtypes[0]| and |dtypes[1]| weights of one F32 input
 * of |m| columns, as one execute call (the plugin groups them: the same
 * input), on a fresh instance; the outputs go to |out0| and |out1|, and
 * how much the call grew the plugin's memory_usage to |out_grew| (or
 * NULL), and its driver line (the ISA table's name) to |out_driver| (or
 * NULL, SY_NAME_MAX bytes). */
static inline void rp_group_run_counted(void *so, const char *repack, const sy_dtype dtypes[2],
                                        uint8_t *const wmem[2], int64_t m, float *out0,
                                        float *out1, uint64_t *out_grew, char *out_driver)
{
    direct_host h;
    void *state = NULL;
    const sy_plugin_desc *d = rp_instance(so, repack, &h, &state);
    sy_tensor w[2], y[2], x = {.dtype = SY_DTYPE_F32, .role = SY_ROLE_INPUT, .n_dims = 2,
                               .ne = {RP_K, m, 1, 1}};
    void *wbuf[2], *ybuf[2], *xbuf;
    sy_node node[2];
    sy_tensor_set_contiguous_strides(&x);
    cr_assert_eq(d->buffer_alloc(state, 0, sy_tensor_nbytes(&x), &xbuf), SY_OK);
    float xv[RP_K * RP_M];
    for (int i = 0; i < RP_K * m; i++)
        xv[i] = (float)((i * 37) % 19) / 9.0f - 1.0f;
    cr_assert_eq(d->copy_in(state, 0, xbuf, 0, xv, sy_tensor_nbytes(&x)), SY_OK);
    x.buffer = xbuf;
    x.data = d->buffer_host_ptr(state, 0, xbuf);
    for (int k = 0; k < 2; k++) {
        w[k] = (sy_tensor){.dtype = dtypes[k], .role = SY_ROLE_WEIGHT, .n_dims = 2,
                           .ne = {RP_K, RP_N, 1, 1}};
        y[k] = (sy_tensor){.dtype = SY_DTYPE_F32, .role = SY_ROLE_ACTIVATION, .n_dims = 2,
                           .ne = {RP_N, m, 1, 1}};
        sy_tensor_set_contiguous_strides(&w[k]);
        sy_tensor_set_contiguous_strides(&y[k]);
        snprintf(w[k].name, sizeof w[k].name, "w%d", k);
        cr_assert_eq(d->buffer_import_host(state, 0, wmem[k], sy_tensor_nbytes(&w[k]), &wbuf[k]),
                     SY_OK);
        cr_assert_eq(d->buffer_alloc(state, 0, sy_tensor_nbytes(&y[k]), &ybuf[k]), SY_OK);
        w[k].buffer = wbuf[k];
        w[k].data = wmem[k];
        y[k].buffer = ybuf[k];
        y[k].data = d->buffer_host_ptr(state, 0, ybuf[k]);
        node[k] = (sy_node){.op = SY_OP_MATMUL, .n_inputs = 2, .inputs = {&w[k], &x},
                            .output = &y[k]};
    }
    sy_node *nodes[2] = {&node[0], &node[1]};
    uint64_t before = 0, after = 0;
    cr_assert_eq(d->memory_usage(state, 0, false, &before, NULL), SY_OK);
    cr_assert_eq(d->execute(state, 0, nodes, 2), SY_OK, "execute: %s", h.log);
    cr_assert_eq(d->memory_usage(state, 0, false, &after, NULL), SY_OK);
    if (out_grew)
        *out_grew = after - before;
    if (out_driver) {
        sy_device_desc desc = {.struct_size = sizeof desc};
        cr_assert_eq(d->describe(state, 0, &desc), SY_OK);
        memcpy(out_driver, desc.driver, SY_NAME_MAX);
    }
    cr_assert_eq(d->copy_out(state, 0, ybuf[0], 0, out0, sy_tensor_nbytes(&y[0])), SY_OK);
    cr_assert_eq(d->copy_out(state, 0, ybuf[1], 0, out1, sy_tensor_nbytes(&y[1])), SY_OK);
    for (int k = 0; k < 2; k++) {
        d->buffer_free(state, 0, wbuf[k]);
        d->buffer_free(state, 0, ybuf[k]);
    }
    d->buffer_free(state, 0, xbuf);
    d->deinit(state);
}

static inline void rp_group_run(void *so, const char *repack, const sy_dtype dtypes[2],
                                uint8_t *const wmem[2], int64_t m, float *out0, float *out1)
{
    rp_group_run_counted(so, repack, dtypes, wmem, m, out0, out1, NULL, NULL);
}


#endif
