/* npusim's capability reporting: every refusal with its reason code and
 * text, the capability file changing what is supported, and the handling
 * of broken capability files (init fails, the reason logged with the file
 * and the field; see docs/plugin-guide.md for why it does not fall back),
 * and two capability files giving two different, valid plans. */
#include <criterion/criterion.h>
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "test_npusim_util.h"

/* A graph with one node of |op| on freshly added leaves without data. */
typedef struct shape_graph {
    sy_graph *g;
    sy_node *node;
} shape_graph;

static sy_tensor *leaf(shape_graph *s, const char *name, sy_dtype t, int64_t n0, int64_t n1,
                       int64_t n2)
{
    const int64_t ne[3] = {n0, n1, n2};
    sy_tensor *out = NULL;
    cr_assert_eq(sy_graph_add_tensor(s->g, name, t, 3, ne, SY_ROLE_INPUT, NULL, &out), SY_OK,
                 "%s", sy_graph_last_error(s->g));
    return out;
}

static void node(shape_graph *s, sy_op op, sy_tensor **in, uint32_t n, const sy_op_params *p)
{
    sy_tensor *out = NULL;
    cr_assert_eq(sy_graph_add_node(s->g, op, "n", in, n, p, &out), SY_OK, "%s",
                 sy_graph_last_error(s->g));
    cr_assert_eq(sy_graph_freeze(s->g), SY_OK, "%s", sy_graph_last_error(s->g));
    s->node = sy_graph_node(s->g, sy_graph_node_count(s->g) - 1);
}

static void matmul(shape_graph *s, sy_dtype wt, sy_dtype xt, int64_t k, int64_t n, int64_t m)
{
    cr_assert_eq(sy_graph_create(&s->g), SY_OK);
    sy_tensor *in[2] = {leaf(s, "w", wt, k, n, 1), leaf(s, "x", xt, k, m, 1)};
    node(s, SY_OP_MATMUL, in, 2, NULL);
}

static void expect_refusal(nt_rt *t, const sy_node *n, sy_support_reason reason,
                           const char *text)
{
    sy_support why;
    cr_assert_not(nt_supports(t, n, &why), "npusim accepted a node it should refuse (%s)", text);
    cr_assert_eq(why.reason, (uint32_t)reason, "reason %u, want %u; text: %s", why.reason,
                 (unsigned)reason, why.text);
    cr_assert(strstr(why.text, text) != NULL, "reason text '%s' lacks '%s'", why.text, text);
}

static void expect_supported(nt_rt *t, const sy_node *n)
{
    sy_support why;
    cr_assert(nt_supports(t, n, &why), "refused: %s", why.text);
}

Test(npusim_supports, refuses_rope_as_an_op_it_does_not_run)
{
    nt_rt t;
    nt_open(&t, NULL, false);
    cr_assert_neq(t.npu, UINT32_MAX, "npusim was not loaded; log:\n%s", t.log);
    shape_graph s;
    cr_assert_eq(sy_graph_create(&s.g), SY_OK);
    sy_tensor *in[2] = {leaf(&s, "x", SY_DTYPE_F32, 64, 4, 3), NULL};
    const int64_t ne[1] = {3};
    cr_assert_eq(sy_graph_add_tensor(s.g, "pos", SY_DTYPE_I32, 1, ne, SY_ROLE_INPUT, NULL, &in[1]),
                 SY_OK);
    const sy_op_params p = {.i = {SY_ROPE_NEOX, 64}, .f = {10000.0f}};
    node(&s, SY_OP_ROPE, in, 2, &p);
    sy_support why;
    cr_assert_not(nt_supports(&t, s.node, &why));
    cr_assert_eq(why.reason, SY_UNSUPPORTED_OP);
    cr_assert_str_eq(why.text, "rope: op not supported by npusim");
    sy_graph_destroy(s.g);
    nt_close(&t);
}

Test(npusim_supports, refuses_every_op_outside_its_capability_file_by_name)
{
    nt_rt t;
    nt_open(&t, NULL, false);
    const sy_op ops[] = {SY_OP_SCALE, SY_OP_RMS_NORM, SY_OP_SILU, SY_OP_GELU, SY_OP_SOFTMAX};
    for (size_t i = 0; i < sizeof ops / sizeof ops[0]; i++) {
        shape_graph s;
        cr_assert_eq(sy_graph_create(&s.g), SY_OK);
        sy_tensor *x = leaf(&s, "x", SY_DTYPE_F32, 64, 4, 1);
        const sy_op_params p = {.f = {0.5f, 0.0f}};
        node(&s, ops[i], &x, 1, &p);
        char want[96];
        snprintf(want, sizeof want, "%s: op not supported by npusim", sy_op_name(ops[i]));
        sy_support why;
        cr_assert_not(nt_supports(&t, s.node, &why));
        cr_assert_eq(why.reason, SY_UNSUPPORTED_OP);
        cr_assert_str_eq(why.text, want);
        sy_graph_destroy(s.g);
    }
    nt_close(&t);
}

Test(npusim_supports, refuses_matmul_whose_k_is_not_a_multiple_of_32)
{
    nt_rt t;
    nt_open(&t, NULL, false);
    shape_graph s;
    matmul(&s, SY_DTYPE_F32, SY_DTYPE_F32, 100, 8, 2);
    sy_support why;
    cr_assert_not(nt_supports(&t, s.node, &why));
    cr_assert_eq(why.reason, SY_UNSUPPORTED_SHAPE);
    cr_assert_str_eq(why.text, "matmul: K=100 is not a multiple of 32");
    sy_graph_destroy(s.g);
    nt_close(&t);
}

Test(npusim_supports, refuses_q4_k_weights_naming_the_dtype)
{
    nt_rt t;
    nt_open(&t, NULL, false);
    shape_graph s;
    matmul(&s, SY_DTYPE_Q4_K, SY_DTYPE_F32, 256, 8, 2);
    expect_refusal(&t, s.node, SY_UNSUPPORTED_DTYPE, "weight dtype q4_k not supported");
    sy_graph_destroy(s.g);
    matmul(&s, SY_DTYPE_Q4_1, SY_DTYPE_F32, 576, 8, 2);
    expect_refusal(&t, s.node, SY_UNSUPPORTED_DTYPE,
                   "matmul: weight dtype q4_1 not supported (npusim takes q8_0, q4_0)");
    sy_graph_destroy(s.g);
    nt_close(&t);
}

Test(npusim_supports, refuses_f16_activations_and_f32_weights_as_dtypes)
{
    nt_rt t;
    nt_open(&t, NULL, false);
    shape_graph s;
    matmul(&s, SY_DTYPE_Q8_0, SY_DTYPE_F16, 64, 8, 2);
    expect_refusal(&t, s.node, SY_UNSUPPORTED_DTYPE, "activation dtype f16 not supported");
    sy_graph_destroy(s.g);
    matmul(&s, SY_DTYPE_F32, SY_DTYPE_F32, 64, 8, 2);
    expect_refusal(&t, s.node, SY_UNSUPPORTED_DTYPE, "weight dtype f32 not supported");
    sy_graph_destroy(s.g);
    nt_close(&t);
}

Test(npusim_supports, refuses_a_tensor_larger_than_the_arena_with_its_size)
{
    nt_rt t;
    nt_open(&t, NULL, false);
    /* K=2048 Q8_0 rows take 2176 bytes; 1036240 of them are 2.1 GiB. */
    shape_graph s;
    matmul(&s, SY_DTYPE_Q8_0, SY_DTYPE_F32, 2048, 1036240, 1);
    expect_refusal(&t, s.node, SY_UNSUPPORTED_SIZE, "tensor of 2.1 GiB exceeds the 1 GiB arena");
    sy_graph_destroy(s.g);
    nt_close(&t);
}

Test(npusim_supports, refuses_a_node_whose_tensors_together_overflow_the_arena)
{
    nt_rt t;
    nt_open(&t, NULL, false);
    /* Two inputs and an output of 400 MiB each: each fits, all three do not. */
    shape_graph s;
    cr_assert_eq(sy_graph_create(&s.g), SY_OK);
    sy_tensor *in[2] = {leaf(&s, "a", SY_DTYPE_F32, 1 << 20, 100, 1),
                        leaf(&s, "b", SY_DTYPE_F32, 1 << 20, 100, 1)};
    node(&s, SY_OP_ADD, in, 2, NULL);
    expect_refusal(&t, s.node, SY_UNSUPPORTED_MEMORY, "more than the 1 GiB arena");
    sy_graph_destroy(s.g);
    nt_close(&t);
}

Test(npusim_supports, refuses_a_transposed_activation_as_a_strided_layout)
{
    nt_rt t;
    nt_open(&t, NULL, false);
    shape_graph s;
    cr_assert_eq(sy_graph_create(&s.g), SY_OK);
    sy_tensor *w = leaf(&s, "w", SY_DTYPE_Q8_0, 64, 8, 1);
    sy_tensor *xt = leaf(&s, "xt", SY_DTYPE_F32, 5, 64, 1);
    sy_tensor *x = NULL;
    cr_assert_eq(sy_graph_add_node(s.g, SY_OP_TRANSPOSE, "x", &xt, 1, NULL, &x), SY_OK);
    sy_tensor *in[2] = {w, x};
    node(&s, SY_OP_MATMUL, in, 2, NULL);
    expect_refusal(&t, s.node, SY_UNSUPPORTED_SHAPE, "strided");
    sy_graph_destroy(s.g);
    nt_close(&t);
}

Test(npusim_supports, accepts_q8_0_and_q4_0_matmuls_and_f32_add_and_mul)
{
    nt_rt t;
    nt_open(&t, NULL, false);
    shape_graph s;
    matmul(&s, SY_DTYPE_Q8_0, SY_DTYPE_F32, 576, 1536, 7);
    expect_supported(&t, s.node);
    sy_graph_destroy(s.g);
    matmul(&s, SY_DTYPE_Q4_0, SY_DTYPE_F32, 576, 49152, 1);
    expect_supported(&t, s.node);
    sy_graph_destroy(s.g);
    const sy_op ops[] = {SY_OP_ADD, SY_OP_MUL};
    for (int i = 0; i < 2; i++) {
        cr_assert_eq(sy_graph_create(&s.g), SY_OK);
        sy_tensor *in[2] = {leaf(&s, "a", SY_DTYPE_F32, 576, 9, 1),
                            leaf(&s, "b", SY_DTYPE_F32, 576, 1, 1)};
        node(&s, ops[i], in, 2, NULL);
        expect_supported(&t, s.node);
        sy_graph_destroy(s.g);
    }
    nt_close(&t);
}

Test(npusim_supports, describes_an_npu_with_its_own_memory_and_capability_summary)
{
    nt_rt t;
    nt_open(&t, NULL, false);
    sy_device_desc d;
    cr_assert_eq(sy_runtime_query_device(t.rt, t.npu, &d), SY_OK);
    cr_assert_eq(d.kind, SY_DEVICE_NPU);
    cr_assert_str_eq(d.name, "npusim");
    cr_assert_eq(d.memory_bytes, (uint64_t)1 << 30);
    cr_assert_eq(d.unified_memory, 0);
    cr_assert(strstr(d.topology, "ops matmul,add,mul; weights q8_0,q4_0; W8A8 per-row "
                                 "asymmetric dynamic") != NULL,
              "%s", d.topology);
    /* The default file beside the module was read, not the built-in copy. */
    cr_assert(strstr(t.log, "capabilities from ") != NULL && strstr(t.log, "npusim.json"),
              "log:\n%s", t.log);
    nt_close(&t);
}

/* ------------------------------------------------------ capability files */

Test(npusim_config, a_custom_capability_file_changes_what_is_supported)
{
    nt_rt t;
    nt_open(&t,
            "{ \"model\": \"tiny test NPU\", \"memory_bytes\": \"256 MiB\",\n"
            "  \"ops\": [\"matmul\"],\n"
            "  \"matmul\": { \"weight_dtypes\": [\"q8_0\", \"q4_1\"] },\n"
            "  \"shape_rules\": { \"k_multiple\": 64, \"max_rows\": 16 } }\n",
            false);
    cr_assert_neq(t.npu, UINT32_MAX, "npusim was refused; log:\n%s", t.log);
    sy_device_desc d;
    cr_assert_eq(sy_runtime_query_device(t.rt, t.npu, &d), SY_OK);
    cr_assert_str_eq(d.model, "tiny test NPU");
    cr_assert_eq(d.memory_bytes, (uint64_t)256 << 20);

    shape_graph s;
    matmul(&s, SY_DTYPE_Q8_0, SY_DTYPE_F32, 128, 8, 4);
    expect_supported(&t, s.node);
    sy_graph_destroy(s.g);
    matmul(&s, SY_DTYPE_Q4_1, SY_DTYPE_F32, 128, 8, 4); /* now allowed */
    expect_supported(&t, s.node);
    sy_graph_destroy(s.g);
    matmul(&s, SY_DTYPE_Q4_0, SY_DTYPE_F32, 128, 8, 4); /* no longer */
    expect_refusal(&t, s.node, SY_UNSUPPORTED_DTYPE, "weight dtype q4_0 not supported");
    sy_graph_destroy(s.g);
    matmul(&s, SY_DTYPE_Q8_0, SY_DTYPE_F32, 96, 8, 4);
    expect_refusal(&t, s.node, SY_UNSUPPORTED_SHAPE, "matmul: K=96 is not a multiple of 64");
    sy_graph_destroy(s.g);
    matmul(&s, SY_DTYPE_Q8_0, SY_DTYPE_F32, 128, 8, 17);
    expect_refusal(&t, s.node, SY_UNSUPPORTED_SHAPE, "M=17 activation rows exceed the 16");
    sy_graph_destroy(s.g);
    matmul(&s, SY_DTYPE_Q8_0, SY_DTYPE_F32, 4096, 80000, 1); /* 340 MiB of weights */
    expect_refusal(&t, s.node, SY_UNSUPPORTED_SIZE, "exceeds the 256 MiB arena");
    sy_graph_destroy(s.g);

    cr_assert_eq(sy_graph_create(&s.g), SY_OK);
    sy_tensor *in[2] = {leaf(&s, "a", SY_DTYPE_F32, 64, 2, 1), leaf(&s, "b", SY_DTYPE_F32, 64, 2, 1)};
    node(&s, SY_OP_ADD, in, 2, NULL);
    expect_refusal(&t, s.node, SY_UNSUPPORTED_OP, "add: op not supported by npusim");
    sy_graph_destroy(s.g);
    nt_close(&t);
}

/* Expects npusim to be refused at init with |status| and |fragment| logged. */
static void expect_init_failure(const char *json, const char *status, const char *fragment)
{
    nt_rt t;
    nt_open(&t, json, false);
    cr_assert_eq(t.npu, UINT32_MAX, "npusim loaded from a broken file; log:\n%s", t.log);
    cr_assert_eq(sy_runtime_refusal_count(t.rt), 1);
    sy_plugin_refusal r;
    cr_assert_eq(sy_runtime_query_refusal(t.rt, 0, &r), SY_OK);
    cr_assert(strstr(r.reason, status) != NULL, "refusal '%s' lacks %s", r.reason, status);
    cr_assert(strstr(t.log, fragment) != NULL, "log lacks '%s':\n%s", fragment, t.log);
    cr_assert(strstr(t.log, t.config) != NULL, "the log does not name the file:\n%s", t.log);
    nt_close(&t);
}

Test(npusim_config, corrupt_json_fails_init_with_the_position_logged)
{
    expect_init_failure("{\n  \"ops\": [\"matmul\",\n}\n", "init failed: SY_E_FORMAT",
                        "not valid JSON (error near line 3");
}

Test(npusim_config, an_unknown_key_fails_init_naming_the_field)
{
    expect_init_failure("{ \"shape_rules\": { \"k_multiplr\": 64 } }", "SY_E_FORMAT",
                        "field 'shape_rules.k_multiplr': unknown key");
}

Test(npusim_config, a_weight_dtype_it_cannot_hold_as_integers_fails_init)
{
    expect_init_failure("{ \"matmul\": { \"weight_dtypes\": [\"q8_0\", \"q4_k\"] } }",
                        "SY_E_FORMAT", "q4_k weights cannot be held as integers");
}

Test(npusim_config, an_op_without_an_npusim_kernel_fails_init)
{
    expect_init_failure("{ \"ops\": [\"matmul\", \"rope\"] }", "SY_E_FORMAT",
                        "op 'rope' is not emulated");
}

Test(npusim_config, a_per_tensor_activation_scale_is_refused_not_emulated_as_per_row)
{
    expect_init_failure("{ \"matmul\": { \"activations\": { \"granularity\": \"per_tensor\" } } }",
                        "SY_E_FORMAT", "'per_tensor' is not emulated");
}

Test(npusim_config, an_activation_scheme_it_does_not_emulate_fails_init)
{
    expect_init_failure("{ \"matmul\": { \"activations\": { \"scheme\": \"affine\" } } }",
                        "SY_E_FORMAT",
                        "field 'matmul.activations.scheme': 'affine' is not emulated");
}

Test(npusim_config, symmetric_activations_show_in_the_capability_summary)
{
    nt_rt t;
    nt_open(&t, "{ \"matmul\": { \"activations\": { \"scheme\": \"symmetric\" } } }", false);
    cr_assert_neq(t.npu, UINT32_MAX, "log:\n%s", t.log);
    sy_device_desc d;
    cr_assert_eq(sy_runtime_query_device(t.rt, t.npu, &d), SY_OK);
    cr_assert(strstr(d.topology, "W8A8 per-row symmetric dynamic") != NULL, "%s", d.topology);
    nt_close(&t);
}

Test(npusim_config, a_missing_file_named_by_the_environment_fails_init)
{
    nt_rt t;
    memset(&t, 0, sizeof t);
    setenv("SWITCHYARD_NPUSIM_CONFIG", "/nonexistent/npusim-caps.json", 1);
    nt_open_env(&t, false);
    cr_assert_eq(t.npu, UINT32_MAX);
    sy_plugin_refusal r;
    cr_assert_eq(sy_runtime_query_refusal(t.rt, 0, &r), SY_OK);
    cr_assert(strstr(r.reason, "init failed: SY_E_IO") != NULL, "%s", r.reason);
    cr_assert(strstr(t.log, "cannot open capability file /nonexistent/npusim-caps.json") != NULL,
              "log:\n%s", t.log);
    cr_assert(strstr(t.log, "(named by SWITCHYARD_NPUSIM_CONFIG)") != NULL, "log:\n%s", t.log);
    nt_close(&t);
}

Test(npusim_config, sizes_read_as_bytes_or_with_binary_units)
{
    nt_rt t;
    nt_open(&t, "{ \"memory_bytes\": 134217728, \"max_tensor_bytes\": \"32MiB\" }", false);
    sy_device_desc d;
    cr_assert_eq(sy_runtime_query_device(t.rt, t.npu, &d), SY_OK, "log:\n%s", t.log);
    cr_assert_eq(d.memory_bytes, (uint64_t)128 << 20);
    cr_assert(strstr(d.topology, "tensor <= 32 MiB") != NULL, "%s", d.topology);
    shape_graph s;
    matmul(&s, SY_DTYPE_Q8_0, SY_DTYPE_F32, 4096, 9000, 1); /* 37 MiB */
    expect_refusal(&t, s.node, SY_UNSUPPORTED_SIZE, "exceeds the NPU's 32 MiB limit per tensor");
    sy_graph_destroy(s.g);
    nt_close(&t);
}

/* ------------------------------------------------------------- plans */

/* Plans a small decoder-like chain (q8_0 matmul, q4_0 matmul, add, rms_norm,
 * mul) over cpu and npusim with every node npusim runs preferred there,
 * and returns a string of the devices: "n" for npusim, "c" for cpu. */
static void plan_chain(nt_rt *t, char *out)
{
    sy_graph *g = NULL;
    cr_assert_eq(sy_graph_create(&g), SY_OK);
    uint64_t s = nt_fresh_seed();
    const int64_t k = 128, m = 4;
    void *w8 = calloc(1, 128 * 64 / 32 * 34), *w4 = calloc(1, 64 * 128 / 32 * 18);
    float *x = calloc(k * m, sizeof *x), *nw = calloc(128, sizeof *nw);
    cr_assert(w8 && w4 && x && nw);
    nt_fill_blocks(&s, SY_DTYPE_Q8_0, w8, 128 * 64);
    nt_fill_blocks(&s, SY_DTYPE_Q4_0, w4, 64 * 128);
    for (int64_t i = 0; i < k * m; i++)
        x[i] = nt_uniform(&s, -1, 1);
    for (int i = 0; i < 128; i++)
        nw[i] = 1.0f;
    const int64_t ne_w8[2] = {128, 64}, ne_w4[2] = {64, 128}, ne_x[2] = {k, m}, ne_n[1] = {128};
    sy_tensor *tw8, *tw4, *tx, *tn, *h, *o, *r, *n, *y;
    cr_assert_eq(sy_graph_add_tensor(g, "w8", SY_DTYPE_Q8_0, 2, ne_w8, SY_ROLE_WEIGHT, w8, &tw8), SY_OK);
    cr_assert_eq(sy_graph_add_tensor(g, "w4", SY_DTYPE_Q4_0, 2, ne_w4, SY_ROLE_WEIGHT, w4, &tw4), SY_OK);
    cr_assert_eq(sy_graph_add_tensor(g, "x", SY_DTYPE_F32, 2, ne_x, SY_ROLE_INPUT, x, &tx), SY_OK);
    cr_assert_eq(sy_graph_add_tensor(g, "norm.w", SY_DTYPE_F32, 1, ne_n, SY_ROLE_WEIGHT, nw, &tn), SY_OK);
    sy_tensor *in[2] = {tw8, tx};
    cr_assert_eq(sy_graph_add_node(g, SY_OP_MATMUL, "up", in, 2, NULL, &h), SY_OK);
    in[0] = tw4;
    in[1] = h;
    cr_assert_eq(sy_graph_add_node(g, SY_OP_MATMUL, "down", in, 2, NULL, &o), SY_OK);
    in[0] = o;
    in[1] = tx;
    cr_assert_eq(sy_graph_add_node(g, SY_OP_ADD, "residual", in, 2, NULL, &r), SY_OK);
    const sy_op_params eps = {.f = {1e-5f}};
    cr_assert_eq(sy_graph_add_node(g, SY_OP_RMS_NORM, "norm", &r, 1, &eps, &n), SY_OK);
    in[0] = n;
    in[1] = tn;
    cr_assert_eq(sy_graph_add_node(g, SY_OP_MUL, "scaled", in, 2, NULL, &y), SY_OK);
    float *out_data = calloc(k * m, sizeof *out_data);
    cr_assert_eq(sy_graph_set_host_data(g, y, out_data), SY_OK);
    cr_assert_eq(sy_graph_mark_output(g, y), SY_OK);
    cr_assert_eq(sy_graph_freeze(g), SY_OK, "%s", sy_graph_last_error(g));

    sy_planner *pl = NULL;
    cr_assert_eq(sy_planner_create(t->rt, &pl), SY_OK);
    sy_plan_options o_;
    sy_plan_options_init(&o_);
    o_.devices = "cpu,npusim";
    o_.policy = "prefer:npusim";
    sy_plan *plan = NULL;
    cr_assert_eq(sy_planner_plan(pl, g, &o_, &plan), SY_OK, "%s", sy_planner_last_error(pl));
    uint32_t len = 0;
    for (uint32_t i = 0; i < sy_graph_node_count(g); i++) {
        sy_plan_node_info info;
        cr_assert_eq(sy_plan_query_node(plan, i, &info), SY_OK);
        out[len++] = info.device == t->npu ? 'n' : 'c';
    }
    out[len] = '\0';
    /* The plan is valid: it runs, and matches the reference within W8A8 error. */
    cr_assert_eq(sy_runtime_execute_plan(t->rt, g, plan), SY_OK, "%s",
                 sy_runtime_last_error(t->rt));
    float *got = malloc(k * m * sizeof *got);
    memcpy(got, out_data, k * m * sizeof *got);
    cr_assert_eq(sy_graph_run_reference(g), SY_OK);
    for (int64_t i = 0; i < k * m; i++)
        cr_assert(fabsf(got[i] - out_data[i]) <= 0.05f + 0.05f * fabsf(out_data[i]),
                  "plan %s: out[%lld] = %g, reference %g", out, (long long)i, (double)got[i],
                  (double)out_data[i]);
    sy_plan_release(plan);
    sy_planner_destroy(pl);
    sy_graph_destroy(g);
    free(w8);
    free(w4);
    free(x);
    free(nw);
    free(out_data);
    free(got);
}

Test(npusim_config, two_capability_files_give_two_different_valid_plans)
{
    char a[16], b[16];
    nt_rt t;
    nt_open(&t, NULL, true); /* the default: matmul q8_0/q4_0, add, mul */
    plan_chain(&t, a);
    nt_close(&t);
    nt_open(&t, "{ \"ops\": [\"matmul\"], \"matmul\": { \"weight_dtypes\": [\"q8_0\"] } }", true);
    plan_chain(&t, b);
    nt_close(&t);
    /* up, down, residual, norm, scaled */
    cr_assert_str_eq(a, "nnncn", "default NPU: %s", a);
    cr_assert_str_eq(b, "ncccc", "matmul/q8_0-only NPU: %s", b);
}
