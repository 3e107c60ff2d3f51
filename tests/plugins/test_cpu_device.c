/* The CPU plugin as a device (description, overrides, refusals) and as a
 * module opened directly (exported symbols, ABI check, buffers,
 * self-test). */
#include <criterion/criterion.h>
#include <dlfcn.h>
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/mman.h>
#include <unistd.h>

#include "cpu_case.h"
#include "cpu_direct.h"

/* -------------------------------------------------------- device facts */

Test(cpu_device, describes_one_cpu_device_with_unified_memory)
{
    tcase tc;
    memset(&tc, 0, sizeof tc);
    uint32_t dev = 0;
    sy_runtime *rt = tc_runtime(&tc, &run_cfgs[0], &dev);
    sy_device_desc d;
    memset(&d, 0, sizeof d);
    cr_assert_eq(sy_runtime_query_device(rt, dev, &d), SY_OK);
    cr_assert_str_eq(d.name, "cpu");
    cr_assert_eq(d.kind, SY_DEVICE_CPU);
    cr_assert_eq(d.unified_memory, 1);
    cr_assert_gt(d.memory_bytes, 0);
    cr_assert_gt(d.compute_units, 0);
    cr_assert_neq(d.model[0], '\0');
    cr_assert(strstr(d.topology, "core") != NULL, "topology: %s", d.topology);
    cr_assert(d.peak_flops == 0.0 && d.peak_bandwidth == 0.0, "peaks are left to the probe");
    sy_runtime_destroy(rt);
}

Test(cpu_device, honours_the_isa_and_thread_overrides)
{
    tcase tc;
    memset(&tc, 0, sizeof tc);
    const run_cfg cfg = {"scalar", "3"};
    uint32_t dev = 0;
    sy_runtime *rt = tc_runtime(&tc, &cfg, &dev);
    sy_device_desc d;
    memset(&d, 0, sizeof d);
    cr_assert_eq(sy_runtime_query_device(rt, dev, &d), SY_OK);
    cr_assert(strstr(d.driver, "scalar kernels") != NULL, "driver: %s", d.driver);
    cr_assert(strstr(d.driver, "3 threads") != NULL, "driver: %s", d.driver);
    sy_runtime_destroy(rt);
}

Test(cpu_device, warns_about_an_unknown_isa_and_keeps_going)
{
    tcase tc;
    memset(&tc, 0, sizeof tc);
    const run_cfg cfg = {"sse9000", "1"};
    uint32_t dev = 0;
    sy_runtime *rt = tc_runtime(&tc, &cfg, &dev);
    cr_assert(strstr(tc.log, "SWITCHYARD_CPU_ISA='sse9000'") != NULL, "log:\n%s", tc.log);
    sy_runtime_destroy(rt);
}

/* A node built by hand, outside any graph. */
static void hand_node(sy_node *node, sy_tensor *in, sy_tensor *out, uint32_t op, sy_dtype in_type)
{
    memset(node, 0, sizeof *node);
    memset(in, 0, sizeof *in);
    memset(out, 0, sizeof *out);
    in->dtype = in_type;
    in->ne[0] = 256;
    in->ne[1] = in->ne[2] = in->ne[3] = 1;
    sy_tensor_set_contiguous_strides(in);
    *out = *in;
    out->dtype = SY_DTYPE_F32;
    sy_tensor_set_contiguous_strides(out);
    node->op = op;
    node->n_inputs = 1;
    node->inputs[0] = in;
    node->output = out;
}

Test(cpu_device, says_why_it_refuses_a_node)
{
    tcase tc;
    memset(&tc, 0, sizeof tc);
    uint32_t dev = 0;
    sy_runtime *rt = tc_runtime(&tc, &run_cfgs[0], &dev);
    sy_node node;
    sy_tensor in, out;
    sy_support why;

    hand_node(&node, &in, &out, SY_OP_COPY, SY_DTYPE_F32);
    node.params.i[0] = SY_DTYPE_Q4_K;
    cr_assert_not(sy_runtime_device_supports(rt, dev, &node, &why));
    cr_assert_eq(why.reason, SY_UNSUPPORTED_DTYPE);
    cr_assert(strstr(why.text, "q4_k") != NULL, "reason: %s", why.text);

    hand_node(&node, &in, &out, SY_OP_COUNT + 7, SY_DTYPE_F32);
    cr_assert_not(sy_runtime_device_supports(rt, dev, &node, &why));
    cr_assert_eq(why.reason, SY_UNSUPPORTED_OP);

    hand_node(&node, &in, &out, SY_OP_SILU, SY_DTYPE_Q8_0);
    cr_assert_not(sy_runtime_device_supports(rt, dev, &node, &why));
    cr_assert_eq(why.reason, SY_UNSUPPORTED_DTYPE);

    hand_node(&node, &in, &out, SY_OP_SILU, SY_DTYPE_F32);
    cr_assert(sy_runtime_device_supports(rt, dev, &node, &why), "refused silu: %s", why.text);
    sy_runtime_destroy(rt);
}

/* ------------------------------------------------- the module, directly */

Test(cpu_module, exports_only_its_query_symbol)
{
    void *so = open_module();
    cr_assert_not_null(dlsym(so, SY_PLUGIN_ENTRY_SYMBOL));
    cr_assert_null(dlsym(so, "cpu_device_init"));
    cr_assert_null(dlsym(so, "cpu_pool_run"));
    cr_assert_null(dlsym(so, "sy__dequantize_row"));
    dlclose(so);
}

Test(cpu_module, refuses_a_host_of_another_abi_major)
{
    void *so = open_module();
    cr_assert_null(query_module(so, (SY_PLUGIN_ABI_MAJOR + 1) << 16));
    const sy_plugin_desc *d = query_module(so, SY_PLUGIN_ABI_VERSION);
    cr_assert_not_null(d);
    cr_assert_eq(d->abi_version, SY_PLUGIN_ABI_VERSION);
    cr_assert_eq(d->struct_size, sizeof(sy_plugin_desc));
    cr_assert_str_eq(d->name, "cpu");
    dlclose(so);
}

Test(cpu_module, moves_bytes_through_its_buffers)
{
    void *so = open_module();
    const sy_plugin_desc *d = query_module(so, SY_PLUGIN_ABI_VERSION);
    direct_host h;
    direct_host_init(&h);
    void *state = NULL;
    cr_assert_eq(d->init(&h.host, &state), SY_OK, "init: %s", h.log);
    cr_assert_eq(d->device_count(state), 1);

    uint8_t src[1000], dst[1000];
    for (int i = 0; i < 1000; i++)
        src[i] = (uint8_t)(i * 7);
    void *a = NULL, *b = NULL;
    cr_assert_eq(d->buffer_alloc(state, 0, 1000, &a), SY_OK);
    cr_assert_eq(d->buffer_alloc(state, 0, 1000, &b), SY_OK);
    cr_assert_eq((uintptr_t)d->buffer_host_ptr(state, 0, a) % 64, 0, "buffers are 64-byte aligned");
    cr_assert_eq(d->copy_in(state, 0, a, 0, src, 1000), SY_OK);
    cr_assert_eq(d->copy_device(state, 0, b, 10, 0, a, 0, 990), SY_OK);
    cr_assert_eq(d->copy_out(state, 0, b, 10, dst, 990), SY_OK);
    cr_assert_eq(memcmp(src, dst, 990), 0);
    cr_assert_neq(d->copy_in(state, 0, a, 900, src, 101), SY_OK, "copy past the end refused");
    cr_assert_neq(d->copy_out(state, 0, a, 1001, dst, 0), SY_OK, "offset past the end refused");

    void *imported = NULL;
    cr_assert_eq(d->buffer_import_host(state, 0, src, sizeof src, &imported), SY_OK);
    cr_assert_eq(d->buffer_host_ptr(state, 0, imported), (void *)src, "import does not copy");
    d->buffer_free(state, 0, imported);
    d->buffer_free(state, 0, a);
    d->buffer_free(state, 0, b);
    cr_assert_eq(d->synchronize(state, 0), SY_OK);
    d->deinit(state);
    dlclose(so);
}

static void check_self_test(const char *isa, const char *threads)
{
    setenv("SWITCHYARD_CPU_ISA", isa, 1);
    setenv("SWITCHYARD_THREADS", threads, 1);
    void *so = open_module();
    const sy_plugin_desc *d = query_module(so, SY_PLUGIN_ABI_VERSION);
    direct_host h;
    direct_host_init(&h);
    void *state = NULL;
    cr_assert_eq(d->init(&h.host, &state), SY_OK, "init: %s", h.log);
    char msg[256] = "";
    sy_status st = d->self_test(state, 0, msg, sizeof msg);
    cr_assert_eq(st, SY_OK, "self-test (%s, %s threads): %s", isa, threads, msg);
    d->deinit(state);
    dlclose(so);
}

Test(cpu_module, passes_its_self_test_with_every_kernel_table)
{
    check_self_test("scalar", "1");
    check_self_test("scalar", "3");
    check_self_test("auto", "2");
}

Test(cpu_module, logs_and_never_fails_on_a_bad_thread_count)
{
    setenv("SWITCHYARD_THREADS", "lots", 1);
    void *so = open_module();
    const sy_plugin_desc *d = query_module(so, SY_PLUGIN_ABI_VERSION);
    direct_host h;
    direct_host_init(&h);
    void *state = NULL;
    cr_assert_eq(d->init(&h.host, &state), SY_OK);
    cr_assert(strstr(h.log, "SWITCHYARD_THREADS='lots'") != NULL, "log: %s", h.log);
    d->deinit(state);
    dlclose(so);
}

/* ------------------------------------------ add -> rms_norm -> mul chains */

enum { CH_E = 200, CH_ROWS_MAX = 96 };

/* Six f32 tensors [CH_E, rows] (the weight [CH_E]) in buffers of their
 * own, or sharing one (|in_place|: the sum over the add's first operand,
 * the product over the norm's output, as the memory planner may place
 * them). */
typedef struct chain_case {
    const sy_plugin_desc *d;
    void *state;
    direct_host h;
    void *buf[6];
    sy_tensor a, b, x, y, w, z;
    sy_node add, norm, mul;
} chain_case;

static void ch_tensor(chain_case *c, sy_tensor *t, int64_t rows, int k, sy_tensor *share)
{
    *t = (sy_tensor){.dtype = SY_DTYPE_F32, .role = SY_ROLE_ACTIVATION, .n_dims = 2,
                     .ne = {CH_E, rows, 1, 1}};
    sy_tensor_set_contiguous_strides(t);
    if (share) {
        t->buffer = share->buffer;
        t->data = share->data;
        return;
    }
    cr_assert_eq(c->d->buffer_alloc(c->state, 0, sy_tensor_nbytes(t), &c->buf[k]), SY_OK);
    t->buffer = c->buf[k];
    t->data = c->d->buffer_host_ptr(c->state, 0, c->buf[k]);
    memset(t->data, 0, sy_tensor_nbytes(t)); /* outputs a case leaves unwritten compare equal */
}

static void ch_open(chain_case *c, void *so, int64_t rows, bool in_place)
{
    memset(c, 0, sizeof *c);
    c->d = query_module(so, SY_PLUGIN_ABI_VERSION);
    direct_host_init(&c->h);
    cr_assert_eq(c->d->init(&c->h.host, &c->state), SY_OK, "init: %s", c->h.log);
    ch_tensor(c, &c->a, rows, 0, NULL);
    ch_tensor(c, &c->b, rows, 1, NULL);
    ch_tensor(c, &c->x, rows, 2, in_place ? &c->a : NULL);
    ch_tensor(c, &c->y, rows, 3, NULL);
    ch_tensor(c, &c->w, 1, 4, NULL);
    ch_tensor(c, &c->z, rows, 5, in_place ? &c->y : NULL);
    c->w.role = SY_ROLE_WEIGHT;
    float *a = c->a.data, *b = c->b.data, *w = c->w.data;
    for (int64_t i = 0; i < CH_E * rows; i++) {
        a[i] = sinf(0.37f * (float)i) * 3.0f;
        b[i] = cosf(0.11f * (float)i) - 0.25f;
    }
    for (int i = 0; i < CH_E; i++)
        w[i] = 0.5f + (float)(i % 7) / 8.0f;
    c->add = (sy_node){.op = SY_OP_ADD, .n_inputs = 2, .inputs = {&c->a, &c->b}, .output = &c->x};
    c->norm = (sy_node){.op = SY_OP_RMS_NORM, .n_inputs = 1, .inputs = {&c->x}, .output = &c->y};
    c->norm.params.f[0] = 1e-5f;
    c->mul = (sy_node){.op = SY_OP_MUL, .n_inputs = 2, .inputs = {&c->y, &c->w}, .output = &c->z};
}

static void ch_close(chain_case *c)
{
    for (int k = 0; k < 6; k++)
        if (c->buf[k])
            c->d->buffer_free(c->state, 0, c->buf[k]);
    c->d->deinit(c->state);
}

/* Runs |nodes| in one execute call, or one call per node (|one_by_one|:
 * nothing to fuse), and copies out the sum, the norm and the product. */
static void ch_run(chain_case *c, sy_node **nodes, uint32_t n, bool one_by_one, float *out)
{
    if (one_by_one) {
        for (uint32_t i = 0; i < n; i++)
            cr_assert_eq(c->d->execute(c->state, 0, nodes + i, 1), SY_OK, "%s", c->h.log);
    } else {
        cr_assert_eq(c->d->execute(c->state, 0, nodes, n), SY_OK, "%s", c->h.log);
    }
    const size_t bytes = sy_tensor_nbytes(&c->x);
    memcpy(out, c->x.data, bytes);
    memcpy(out + bytes / sizeof *out, c->y.data, bytes);
    memcpy(out + 2 * (bytes / sizeof *out), c->z.data, bytes);
}

/* A residual add, the rms_norm of its sum and the multiply by the norm's
 * weight, run in one execute call (where the plugin runs them as one
 * pass), give every output bit for bit as the three kernels one call at a
 * time do: one row (decode) and many (prefill, several lanes), in separate
 * buffers and in place, with the add or the multiply left out, and with a
 * multiply that reads something else than the norm. */
Test(cpu_module, an_add_norm_multiply_chain_equals_its_nodes_run_one_by_one)
{
    void *so = open_module();
    static float want[3 * CH_E * CH_ROWS_MAX], got[3 * CH_E * CH_ROWS_MAX];
    const int64_t rows[] = {1, CH_ROWS_MAX};
    for (int t = 0; t < 2; t++) {
        setenv("SWITCHYARD_THREADS", t ? "2" : "1", 1);
        for (int r = 0; r < 2; r++) {
            for (int in_place = 0; in_place < 2; in_place++) {
                for (int shape = 0; shape < 4; shape++) {
                    chain_case c;
                    ch_open(&c, so, rows[r], in_place);
                    sy_node *all[3] = {&c.add, &c.norm, &c.mul};
                    sy_node **nodes = all;
                    uint32_t n = 3;
                    if (shape == 1) /* no add: the norm reads a */
                        c.norm.inputs[0] = &c.a, nodes = all + 1, n = 2;
                    if (shape == 2) /* no multiply */
                        n = 2;
                    if (shape == 3) /* the multiply reads the sum, not the norm */
                        c.mul.inputs[0] = &c.x;
                    const size_t len = 3 * (size_t)CH_E * (size_t)rows[r];
                    /* The inputs are overwritten in place: fresh for each run. */
                    ch_run(&c, nodes, n, true, want);
                    ch_close(&c);
                    ch_open(&c, so, rows[r], in_place);
                    if (shape == 1)
                        c.norm.inputs[0] = &c.a;
                    if (shape == 3)
                        c.mul.inputs[0] = &c.x;
                    ch_run(&c, nodes, n, false, got);
                    ch_close(&c);
                    for (size_t i = 0; i < len; i++)
                        cr_assert(memcmp(&got[i], &want[i], sizeof got[i]) == 0,
                                  "threads %d rows %lld in place %d shape %d: output %zu is %.9g "
                                  "in one call, %.9g one by one",
                                  t + 1, (long long)rows[r], in_place, shape, i, got[i], want[i]);
                }
            }
        }
    }
    unsetenv("SWITCHYARD_THREADS");
    dlclose(so);
}
