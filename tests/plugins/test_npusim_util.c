/* Helpers shared by the npusim suites. */
#include <criterion/criterion.h>
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>
#include <unistd.h>

#include "test_npusim_util.h"

#ifndef SY_TEST_PLUGIN_BUILD_DIR
#error "SY_TEST_PLUGIN_BUILD_DIR must name the build's plugins/ directory"
#endif

const char *nt_plugin_path(const char *rel, char *out, size_t size)
{
    snprintf(out, size, "%s/%s", SY_TEST_PLUGIN_BUILD_DIR, rel);
    return out;
}

static void nt_log(void *user, sy_log_level level, const char *msg)
{
    nt_rt *t = user;
    static const char *const names[] = {"error", "warn", "info", "debug"};
    if (t->log_used >= sizeof t->log - 1)
        return;
    int n = snprintf(t->log + t->log_used, sizeof t->log - t->log_used, "%s: %s\n",
                     (unsigned)level <= SY_LOG_DEBUG ? names[level] : "?", msg);
    if (n > 0)
        t->log_used += (size_t)n < sizeof t->log - t->log_used ? (size_t)n
                                                                 : sizeof t->log - 1 - t->log_used;
}

void nt_open(nt_rt *t, const char *json, bool with_cpu)
{
    memset(t, 0, sizeof *t);
    if (json) {
        snprintf(t->config, sizeof t->config, "/tmp/npusim-test-XXXXXX.json");
        int fd = mkstemps(t->config, 5);
        cr_assert(fd >= 0, "cannot create a temporary capability file");
        FILE *f = fdopen(fd, "w");
        cr_assert(f != NULL);
        fputs(json, f);
        fclose(f);
        setenv("SWITCHYARD_NPUSIM_CONFIG", t->config, 1);
    } else {
        unsetenv("SWITCHYARD_NPUSIM_CONFIG");
    }
    nt_open_env(t, with_cpu);
}

void nt_open_env(nt_rt *t, bool with_cpu)
{
    char npu[512], cpu[512], path[1100];
    nt_plugin_path("npusim/sy-npusim.so", npu, sizeof npu);
    nt_plugin_path("cpu/sy-cpu.so", cpu, sizeof cpu);
    snprintf(path, sizeof path, "%s%s%s", npu, with_cpu ? ":" : "", with_cpu ? cpu : "");
    sy_runtime_options o;
    sy_runtime_options_init(&o);
    o.plugin_path = path;
    o.no_default_paths = true;
    o.log_fn = nt_log;
    o.log_user = t;
    o.log_level = SY_LOG_DEBUG;
    sy_status st = sy_runtime_create(&o, &t->rt);
    cr_assert_eq(st, SY_OK, "runtime: %s", sy_status_name(st));
    if (sy_runtime_find_device(t->rt, "npusim", &t->npu) != SY_OK)
        t->npu = UINT32_MAX;
    if (sy_runtime_find_device(t->rt, "cpu", &t->cpu) != SY_OK)
        t->cpu = UINT32_MAX;
}

void nt_close(nt_rt *t)
{
    sy_runtime_destroy(t->rt);
    t->rt = NULL;
    if (t->config[0])
        unlink(t->config);
    unsetenv("SWITCHYARD_NPUSIM_CONFIG");
}

uint64_t nt_fresh_seed(void)
{
    struct timespec ts;
    clock_gettime(CLOCK_REALTIME, &ts);
    uint64_t s = (uint64_t)ts.tv_nsec * 0x9e3779b97f4a7c15ull ^ (uint64_t)ts.tv_sec ^
                 ((uint64_t)getpid() << 32);
    return s ? s : 1;
}

uint64_t nt_rand(uint64_t *s)
{
    uint64_t x = *s;
    x ^= x >> 12;
    x ^= x << 25;
    x ^= x >> 27;
    *s = x;
    return x * 0x2545f4914f6cdd1dull;
}

float nt_uniform(uint64_t *s, float lo, float hi)
{
    return lo + (hi - lo) * (float)(nt_rand(s) >> 40) / (float)(1u << 24);
}

/* A random binary16 with exponent field in [emin, emax]. */
static uint16_t nt_rand_f16(uint64_t *s, unsigned emin, unsigned emax)
{
    const uint64_t r = nt_rand(s);
    const unsigned e = emin + (unsigned)((r >> 20) % (emax - emin + 1));
    return (uint16_t)((e << 10) | (unsigned)((r >> 32) & 0x3ff));
}

void nt_fill_blocks(uint64_t *s, sy_dtype t, void *dst, int64_t n)
{
    const int64_t nb = n / 32;
    const uint32_t bsz = sy_dtype_type_size(t);
    unsigned char *p = dst;
    for (int64_t i = 0; i < nb * bsz; i++)
        p[i] = (unsigned char)(nt_rand(s) >> 56);
    for (int64_t b = 0; b < nb; b++) {
        uint16_t d = nt_rand_f16(s, t == SY_DTYPE_Q8_0 ? 4 : 6, t == SY_DTYPE_Q8_0 ? 7 : 9);
        memcpy(p + b * bsz, &d, 2);
        if (t == SY_DTYPE_Q4_1 || t == SY_DTYPE_Q5_1) {
            uint16_t m = (uint16_t)(nt_rand_f16(s, 8, 11) | ((nt_rand(s) >> 63) << 15));
            memcpy(p + b * bsz + 2, &m, 2);
        }
    }
}

void nt_to_f32(sy_dtype t, const void *src, int64_t n, float *dst)
{
    sy_graph *g = NULL;
    cr_assert_eq(sy_graph_create(&g), SY_OK);
    const int64_t ne[1] = {n};
    sy_tensor *in = NULL, *out = NULL;
    const sy_op_params p = {.i = {SY_DTYPE_F32}};
    cr_assert_eq(sy_graph_add_tensor(g, "src", t, 1, ne, SY_ROLE_INPUT, (void *)src, &in), SY_OK);
    cr_assert_eq(sy_graph_add_node(g, SY_OP_COPY, "to_f32", &in, 1, &p, &out), SY_OK);
    cr_assert_eq(sy_graph_mark_output(g, out), SY_OK);
    cr_assert_eq(sy_graph_set_host_data(g, out, dst), SY_OK);
    cr_assert_eq(sy_graph_freeze(g), SY_OK);
    cr_assert_eq(sy_graph_run_reference(g), SY_OK);
    sy_graph_destroy(g);
}

float nt_round_f16(float v)
{
    /* Through the reference COPY kernels: f32 -> f16 -> f32. */
    uint16_t h = 0;
    sy_graph *g = NULL;
    cr_assert_eq(sy_graph_create(&g), SY_OK);
    const int64_t ne[1] = {1};
    sy_tensor *in = NULL, *out = NULL;
    const sy_op_params p = {.i = {SY_DTYPE_F16}};
    cr_assert_eq(sy_graph_add_tensor(g, "v", SY_DTYPE_F32, 1, ne, SY_ROLE_INPUT, &v, &in), SY_OK);
    cr_assert_eq(sy_graph_add_node(g, SY_OP_COPY, "to_f16", &in, 1, &p, &out), SY_OK);
    cr_assert_eq(sy_graph_mark_output(g, out), SY_OK);
    cr_assert_eq(sy_graph_set_host_data(g, out, &h), SY_OK);
    cr_assert_eq(sy_graph_freeze(g), SY_OK);
    cr_assert_eq(sy_graph_run_reference(g), SY_OK);
    sy_graph_destroy(g);
    float r = 0;
    nt_to_f32(SY_DTYPE_F16, &h, 1, &r);
    return r;
}

static void *nt_alloc(size_t bytes)
{
    void *p = NULL;
    cr_assert_eq(posix_memalign(&p, 64, bytes ? bytes : 1), 0);
    memset(p, 0, bytes ? bytes : 1);
    return p;
}

static void nt_finish(nt_graph *ng, sy_tensor *out)
{
    ng->out = out;
    ng->n_out = sy_tensor_nelements(out);
    ng->out_data = nt_alloc((size_t)ng->n_out * sizeof(float));
    cr_assert_eq(sy_graph_set_host_data(ng->g, out, ng->out_data), SY_OK);
    cr_assert_eq(sy_graph_mark_output(ng->g, out), SY_OK);
    cr_assert_eq(sy_graph_freeze(ng->g), SY_OK, "%s", sy_graph_last_error(ng->g));
    ng->node = sy_graph_node(ng->g, sy_graph_node_count(ng->g) - 1);
}

void nt_matmul_graph(nt_graph *ng, uint64_t *seed, sy_dtype wtype, int64_t k, int64_t n,
                     int64_t m)
{
    memset(ng, 0, sizeof *ng);
    cr_assert_eq(sy_graph_create(&ng->g), SY_OK);
    const int64_t wne[2] = {k, n}, xne[2] = {k, m};
    const size_t wbytes = (size_t)(k * n / sy_dtype_block_size(wtype) * sy_dtype_type_size(wtype));
    ng->in0 = nt_alloc(wbytes);
    ng->in1 = nt_alloc((size_t)(k * m) * sizeof(float));
    if (sy_dtype_block_size(wtype) == 32) {
        nt_fill_blocks(seed, wtype, ng->in0, k * n);
    } else {
        for (int64_t i = 0; i < k * n; i++)
            ((float *)ng->in0)[i] = nt_uniform(seed, -1.0f, 1.0f);
    }
    float *x = ng->in1;
    for (int64_t i = 0; i < k * m; i++)
        x[i] = nt_uniform(seed, -1.0f, 1.0f);
    /* An outlier in one row, as real activations have: the row's scale
     * follows it and the rest of the row loses precision. */
    if (m > 1)
        x[k + 3] = 9.5f;
    sy_tensor *w = NULL, *xt = NULL, *out = NULL;
    cr_assert_eq(sy_graph_add_tensor(ng->g, "w", wtype, 2, wne, SY_ROLE_WEIGHT, ng->in0, &w),
                 SY_OK);
    cr_assert_eq(sy_graph_add_tensor(ng->g, "x", SY_DTYPE_F32, 2, xne, SY_ROLE_INPUT, ng->in1, &xt),
                 SY_OK);
    sy_tensor *in[2] = {w, xt};
    cr_assert_eq(sy_graph_add_node(ng->g, SY_OP_MATMUL, "mm", in, 2, NULL, &out), SY_OK);
    nt_finish(ng, out);
}

void nt_binary_graph(nt_graph *ng, uint64_t *seed, sy_op op, int64_t ne0, int64_t rows,
                     int64_t bne0, int64_t brows)
{
    memset(ng, 0, sizeof *ng);
    cr_assert_eq(sy_graph_create(&ng->g), SY_OK);
    const int64_t ane[2] = {ne0, rows}, bne[2] = {bne0, brows};
    ng->in0 = nt_alloc((size_t)(ne0 * rows) * sizeof(float));
    ng->in1 = nt_alloc((size_t)(bne0 * brows) * sizeof(float));
    for (int64_t i = 0; i < ne0 * rows; i++)
        ((float *)ng->in0)[i] = nt_uniform(seed, -4.0f, 4.0f);
    for (int64_t i = 0; i < bne0 * brows; i++)
        ((float *)ng->in1)[i] = nt_uniform(seed, -4.0f, 4.0f);
    sy_tensor *a = NULL, *b = NULL, *out = NULL;
    cr_assert_eq(sy_graph_add_tensor(ng->g, "a", SY_DTYPE_F32, 2, ane, SY_ROLE_INPUT, ng->in0, &a),
                 SY_OK);
    cr_assert_eq(sy_graph_add_tensor(ng->g, "b", SY_DTYPE_F32, 2, bne, SY_ROLE_INPUT, ng->in1, &b),
                 SY_OK);
    sy_tensor *in[2] = {a, b};
    cr_assert_eq(sy_graph_add_node(ng->g, op, "ew", in, 2, NULL, &out), SY_OK);
    nt_finish(ng, out);
}

void nt_graph_free(nt_graph *ng)
{
    sy_graph_destroy(ng->g);
    free(ng->in0);
    free(ng->in1);
    free(ng->out_data);
    memset(ng, 0, sizeof *ng);
}

sy_status nt_run(nt_rt *t, nt_graph *ng, uint32_t dev)
{
    memset(ng->out_data, 0, (size_t)ng->n_out * sizeof(float));
    return sy_runtime_execute_on(t->rt, ng->g, dev);
}

float *nt_reference(nt_graph *ng)
{
    cr_assert_eq(sy_graph_run_reference(ng->g), SY_OK);
    float *want = malloc((size_t)ng->n_out * sizeof *want);
    cr_assert(want != NULL);
    memcpy(want, ng->out_data, (size_t)ng->n_out * sizeof *want);
    return want;
}

bool nt_supports(nt_rt *t, const sy_node *node, sy_support *why)
{
    memset(why, 0, sizeof *why);
    return sy_runtime_device_supports(t->rt, t->npu, node, why);
}
