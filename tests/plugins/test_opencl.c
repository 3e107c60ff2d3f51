/* Conformance of the OpenCL plugin: every op on every dtype it takes, run
 * through the runtime on every OpenCL device (PoCL's CPU device here, real
 * GPUs elsewhere), as the device describes its memory and with it forced
 * discrete, compared with the reference kernels (the ground truth).  Inputs
 * are random from a fresh seed per test, printed in every failure.
 *
 * Tolerances: data movement (copy, get_rows, kv_write) and argmax are
 * bit-exact; the kernels accumulate in float where the reference
 * accumulates in double, so sums carry a relative error of a few float
 * epsilons times the square root of their length. */
#include <criterion/criterion.h>
#include <math.h>
#include <stdio.h>
#include <string.h>

#include "test_opencl_case.h"

/* ---------------------------------------------------------------- matmul */

/* Float sums of K products against double ones; quantized weights have
 * scales that make the products larger than the sum, so the error is
 * relative to the largest output. */
static otol matmul_tol(sy_dtype wtype, int64_t k)
{
    const double scale = sqrt((double)k / 256.0);
    if (wtype == SY_DTYPE_F32 || wtype == SY_DTYPE_F16 || wtype == SY_DTYPE_BF16)
        return (otol){2e-5, 2e-5 * scale};
    return (otol){2e-5, 4e-5 * scale};
}

static void check_matmul(sy_dtype wtype, sy_dtype xtype, int64_t k, int64_t n, int64_t m,
                         int64_t b2, int64_t b3, int64_t c2, int64_t c3)
{
    ocase tc;
    oc_begin(&tc, "matmul w=%s x=%s K=%lld N=%lld M=%lld batch [%lld,%lld]x[%lld,%lld]",
             sy_dtype_name(wtype), sy_dtype_name(xtype), (long long)k, (long long)n, (long long)m,
             (long long)b2, (long long)b3, (long long)c2, (long long)c3);
    const int64_t wne[4] = {k, n, b2, b3};
    sy_tensor *w = oc_leaf(&tc, "w", wtype, wne, SY_ROLE_WEIGHT, NULL);
    sy_tensor *x = oc_input(&tc, "x", xtype, k, m, c2, c3);
    sy_tensor *in[2] = {w, x};
    oc_output(&tc, oc_node(&tc, SY_OP_MATMUL, "mm", in, 2, NULL));
    tc.both_matvec = true;
    oc_run(&tc, matmul_tol(wtype, k));
    oc_end(&tc);
}

static void check_matmul_all_shapes(sy_dtype wtype)
{
    const int64_t k = o_row_for(wtype) == 256 ? 256 : 96;
    /* The single-token kernel: one column, a few columns, F16 columns. */
    check_matmul(wtype, SY_DTYPE_F32, k, 19, 1, 1, 1, 1, 1);
    check_matmul(wtype, SY_DTYPE_F32, k, 19, 7, 1, 1, 1, 1);
    check_matmul(wtype, SY_DTYPE_F16, k, 19, 1, 1, 1, 1, 1);
    check_matmul(wtype, SY_DTYPE_F16, k, 5, 6, 1, 1, 1, 1);
    /* Broadcast batches. */
    check_matmul(wtype, SY_DTYPE_F32, k, 5, 3, 2, 1, 4, 3);
    check_matmul(wtype, SY_DTYPE_F16, k, 3, 2, 1, 3, 2, 3);
    /* The batch (tiled) kernel: partial tiles, several tiles, batches. */
    check_matmul(wtype, SY_DTYPE_F32, k, 19, 9, 1, 1, 1, 1);
    check_matmul(wtype, SY_DTYPE_F32, 512, 70, 67, 1, 1, 1, 1);
    check_matmul(wtype, SY_DTYPE_F16, k, 33, 20, 2, 1, 2, 1);
}

Test(opencl_matmul, matches_the_reference_with_f32_weights) { check_matmul_all_shapes(SY_DTYPE_F32); }
Test(opencl_matmul, matches_the_reference_with_f16_weights) { check_matmul_all_shapes(SY_DTYPE_F16); }
Test(opencl_matmul, matches_the_reference_with_bf16_weights) { check_matmul_all_shapes(SY_DTYPE_BF16); }
Test(opencl_matmul, matches_the_reference_with_q8_0_weights) { check_matmul_all_shapes(SY_DTYPE_Q8_0); }
Test(opencl_matmul, matches_the_reference_with_q4_0_weights) { check_matmul_all_shapes(SY_DTYPE_Q4_0); }
Test(opencl_matmul, matches_the_reference_with_q4_1_weights) { check_matmul_all_shapes(SY_DTYPE_Q4_1); }
Test(opencl_matmul, matches_the_reference_with_q5_0_weights) { check_matmul_all_shapes(SY_DTYPE_Q5_0); }
Test(opencl_matmul, matches_the_reference_with_q5_1_weights) { check_matmul_all_shapes(SY_DTYPE_Q5_1); }
Test(opencl_matmul, matches_the_reference_with_q4_k_weights) { check_matmul_all_shapes(SY_DTYPE_Q4_K); }
Test(opencl_matmul, matches_the_reference_with_q5_k_weights) { check_matmul_all_shapes(SY_DTYPE_Q5_K); }
Test(opencl_matmul, matches_the_reference_with_q6_k_weights) { check_matmul_all_shapes(SY_DTYPE_Q6_K); }

Test(opencl_matmul, handles_rows_that_are_not_a_multiple_of_eight)
{
    check_matmul(SY_DTYPE_F32, SY_DTYPE_F32, 100, 13, 1, 1, 1, 1, 1);
    check_matmul(SY_DTYPE_F16, SY_DTYPE_F32, 37, 13, 12, 1, 1, 1, 1);
    check_matmul(SY_DTYPE_BF16, SY_DTYPE_F16, 5, 3, 2, 1, 1, 1, 1);
}

Test(opencl_matmul, handles_a_long_row_and_a_wide_output)
{
    check_matmul(SY_DTYPE_Q4_0, SY_DTYPE_F32, 4096, 301, 1, 1, 1, 1, 1);
    check_matmul(SY_DTYPE_Q6_K, SY_DTYPE_F32, 2048, 1000, 2, 1, 1, 1, 1);
}

Test(opencl_matmul, converts_a_transposed_input_on_the_device)
{
    ocase tc;
    oc_begin(&tc, "matmul with a transposed input");
    sy_tensor *w = oc_input(&tc, "w", SY_DTYPE_Q8_0, 64, 9, 1, 1);
    sy_tensor *xt = oc_input(&tc, "xt", SY_DTYPE_F32, 5, 64, 1, 1);
    sy_tensor *x = oc_node(&tc, SY_OP_TRANSPOSE, "x", &xt, 1, NULL);
    sy_tensor *in[2] = {w, x};
    oc_output(&tc, oc_node(&tc, SY_OP_MATMUL, "mm", in, 2, NULL));
    oc_run(&tc, matmul_tol(SY_DTYPE_Q8_0, 64));
    oc_end(&tc);
}

/* -------------------------------------------------------------- get_rows */

static void check_get_rows(sy_dtype table_type)
{
    ocase tc;
    oc_begin(&tc, "get_rows table=%s", sy_dtype_name(table_type));
    const int64_t k = 256, rows = 9, m = 200;
    const int64_t tne[4] = {k, rows, 1, 1};
    sy_tensor *table = oc_leaf(&tc, "table", table_type, tne, SY_ROLE_WEIGHT, NULL);
    int32_t *ids = oc_alloc(&tc, m * sizeof(int32_t));
    for (int64_t i = 0; i < m; i++)
        ids[i] = (int32_t)orng_below(&tc.rng, (uint32_t)rows);
    ids[m - 1] = ids[0];
    const int64_t ine[4] = {m, 1, 1, 1};
    sy_tensor *tid = oc_leaf(&tc, "ids", SY_DTYPE_I32, ine, SY_ROLE_INPUT, ids);
    sy_tensor *in[2] = {table, tid};
    oc_output(&tc, oc_node(&tc, SY_OP_GET_ROWS, "rows", in, 2, NULL));
    oc_run(&tc, OTOL_EXACT);
    oc_end(&tc);
}

Test(opencl_get_rows, matches_the_reference_bit_for_bit_for_every_table_dtype)
{
    for (size_t i = 0; i < O_N_DTYPES; i++)
        check_get_rows(o_all_dtypes[i]);
}

Test(opencl_get_rows, rejects_an_id_out_of_range)
{
    ocase tc;
    oc_begin(&tc, "get_rows with a bad id");
    sy_tensor *table = oc_input(&tc, "table", SY_DTYPE_F32, 8, 4, 1, 1);
    int32_t *ids = oc_alloc(&tc, 2 * sizeof(int32_t));
    ids[0] = 1;
    ids[1] = 4;
    const int64_t ine[4] = {2, 1, 1, 1};
    sy_tensor *in[2] = {table, oc_leaf(&tc, "ids", SY_DTYPE_I32, ine, SY_ROLE_INPUT, ids)};
    oc_output(&tc, oc_node(&tc, SY_OP_GET_ROWS, "rows", in, 2, NULL));
    oc_run_expect(&tc, OTOL_EXACT, SY_E_INVALID_ARG);
    cr_assert(strstr(tc.log, "out of range") != NULL, "log:\n%s", tc.log);
    oc_end(&tc);
}

/* ------------------------------------------------------------ add and mul */

static const otol TOL_ELEMENTWISE = {1e-6, 1e-6};

static void check_binary(sy_op op, const int64_t b_ne[4])
{
    ocase tc;
    oc_begin(&tc, "%s with in1 [%lld,%lld,%lld,%lld]", sy_op_name(op), (long long)b_ne[0],
             (long long)b_ne[1], (long long)b_ne[2], (long long)b_ne[3]);
    sy_tensor *in[2] = {oc_input(&tc, "a", SY_DTYPE_F32, 256, 12, 4, 2),
                        oc_leaf(&tc, "b", SY_DTYPE_F32, b_ne, SY_ROLE_INPUT, NULL)};
    oc_output(&tc, oc_node(&tc, op, "y", in, 2, NULL));
    oc_run(&tc, TOL_ELEMENTWISE);
    oc_end(&tc);
}

static void check_binary_all(sy_op op)
{
    static const int64_t shapes[][4] = {
        {256, 12, 4, 2}, {256, 1, 4, 1}, {1, 12, 1, 2}, {8, 3, 2, 1}, {1, 1, 1, 1}, {256, 12, 1, 1},
    };
    for (size_t i = 0; i < sizeof shapes / sizeof shapes[0]; i++)
        check_binary(op, shapes[i]);
}

Test(opencl_elementwise, adds_with_every_broadcast_shape) { check_binary_all(SY_OP_ADD); }
Test(opencl_elementwise, multiplies_with_every_broadcast_shape) { check_binary_all(SY_OP_MUL); }

Test(opencl_elementwise, adds_a_transposed_view_on_the_device)
{
    ocase tc;
    oc_begin(&tc, "add on a transposed view");
    sy_tensor *at = oc_input(&tc, "at", SY_DTYPE_F32, 6, 32, 1, 1);
    sy_tensor *in[2] = {oc_node(&tc, SY_OP_TRANSPOSE, "a", &at, 1, NULL),
                        oc_input(&tc, "b", SY_DTYPE_F32, 32, 6, 1, 1)};
    oc_output(&tc, oc_node(&tc, SY_OP_ADD, "y", in, 2, NULL));
    oc_run(&tc, TOL_ELEMENTWISE);
    oc_end(&tc);
}

static void check_unary(sy_op op, const sy_op_params *p, otol tl)
{
    ocase tc;
    oc_begin(&tc, "%s", sy_op_name(op));
    sy_tensor *x = oc_input(&tc, "x", SY_DTYPE_F32, 300, 40, 3, 1);
    float *data = sy_graph_host_data(tc.g, x);
    for (int i = 0; i < 300 * 120; i++)
        data[i] *= 8.0f; /* reach the tails of the activations */
    oc_output(&tc, oc_node(&tc, op, "y", &x, 1, p));
    oc_run(&tc, tl);
    oc_end(&tc);
}

Test(opencl_elementwise, scales_and_shifts)
{
    sy_op_params p = {.f = {0.75f, -0.25f}};
    check_unary(SY_OP_SCALE, &p, TOL_ELEMENTWISE);
}

Test(opencl_elementwise, applies_silu) { check_unary(SY_OP_SILU, NULL, (otol){4e-6, 1e-6}); }
Test(opencl_elementwise, applies_gelu) { check_unary(SY_OP_GELU, NULL, (otol){4e-6, 1e-6}); }

static void check_glu(sy_op op)
{
    ocase tc;
    oc_begin(&tc, "%s", sy_op_name(op));
    sy_tensor *in[2] = {oc_input(&tc, "gate", SY_DTYPE_F32, 96, 100, 3, 1),
                        oc_input(&tc, "up", SY_DTYPE_F32, 96, 100, 3, 1)};
    float *gate = sy_graph_host_data(tc.g, in[0]);
    for (int i = 0; i < 96 * 300; i++)
        gate[i] *= 6.0f;
    oc_output(&tc, oc_node(&tc, op, "y", in, 2, NULL));
    oc_run(&tc, (otol){4e-6, 1e-6});
    oc_end(&tc);
}

Test(opencl_elementwise, applies_swiglu) { check_glu(SY_OP_SWIGLU); }
Test(opencl_elementwise, applies_geglu) { check_glu(SY_OP_GEGLU); }

/* ------------------------------------------------------------- rms_norm */

Test(opencl_rows, normalizes_rows_by_their_rms)
{
    ocase tc;
    oc_begin(&tc, "rms_norm");
    sy_tensor *x = oc_input(&tc, "x", SY_DTYPE_F32, 576, 40, 3, 1);
    sy_op_params p = {.f = {1e-5f}};
    oc_output(&tc, oc_node(&tc, SY_OP_RMS_NORM, "y", &x, 1, &p));
    oc_run(&tc, (otol){2e-6, 1e-6});
    oc_end(&tc);
}

Test(opencl_rows, normalizes_an_all_zero_row_to_zeros)
{
    ocase tc;
    oc_begin(&tc, "rms_norm of a zero row, eps 0");
    sy_tensor *x = oc_input(&tc, "x", SY_DTYPE_F32, 64, 3, 1, 1);
    memset((float *)sy_graph_host_data(tc.g, x) + 64, 0, 64 * sizeof(float));
    sy_op_params p = {.f = {0.0f}};
    oc_output(&tc, oc_node(&tc, SY_OP_RMS_NORM, "y", &x, 1, &p));
    oc_run(&tc, (otol){2e-6, 1e-6});
    oc_end(&tc);
}

Test(opencl_rows, normalizes_a_permuted_view)
{
    ocase tc;
    oc_begin(&tc, "rms_norm of a permuted view");
    sy_tensor *x = oc_input(&tc, "x", SY_DTYPE_F32, 64, 5, 7, 1);
    sy_op_params perm = {.i = {0, 2, 1, 3}};
    sy_tensor *v = oc_node(&tc, SY_OP_PERMUTE, "xp", &x, 1, &perm);
    sy_op_params p = {.f = {1e-6f}};
    oc_output(&tc, oc_node(&tc, SY_OP_RMS_NORM, "y", &v, 1, &p));
    oc_run(&tc, (otol){2e-6, 1e-6});
    oc_end(&tc);
}

/* -------------------------------------------------------------- softmax */

static void check_softmax(float scale, int64_t causal, int64_t n_past, int64_t window)
{
    ocase tc;
    oc_begin(&tc, "softmax scale %g causal %lld n_past %lld window %lld", (double)scale,
             (long long)causal, (long long)n_past, (long long)window);
    sy_tensor *x = oc_input(&tc, "x", SY_DTYPE_F32, 37, 24, 30, 1);
    sy_op_params p = {.i = {causal, n_past, window}, .f = {scale}};
    oc_output(&tc, oc_node(&tc, SY_OP_SOFTMAX, "y", &x, 1, &p));
    oc_run(&tc, (otol){4e-6, 1e-6});
    oc_end(&tc);
}

Test(opencl_rows, applies_softmax_without_masks) { check_softmax(2.5f, 0, 0, 0); }
Test(opencl_rows, applies_softmax_with_a_causal_mask) { check_softmax(0.5f, 1, 20, 0); }
Test(opencl_rows, applies_softmax_with_a_causal_window) { check_softmax(1.0f, 1, 30, 8); }
Test(opencl_rows, zeroes_softmax_rows_whose_keys_are_all_masked) { check_softmax(1.0f, 0, 50, 4); }

/* ----------------------------------------------------------------- rope */

static void check_rope(int64_t mode, int64_t n_rot, float base, float freq_scale)
{
    ocase tc;
    oc_begin(&tc, "rope mode %lld n_rot %lld base %g scale %g", (long long)mode, (long long)n_rot,
             (double)base, (double)freq_scale);
    const int64_t d = 64, h = 8, t = 50;
    sy_tensor *x = oc_input(&tc, "x", SY_DTYPE_F32, d, h, t, 1);
    int32_t *pos = oc_alloc(&tc, t * sizeof(int32_t));
    for (int64_t i = 0; i < t; i++)
        pos[i] = (int32_t)orng_below(&tc.rng, 4096);
    const int64_t pne[4] = {t, 1, 1, 1};
    sy_tensor *in[2] = {x, oc_leaf(&tc, "pos", SY_DTYPE_I32, pne, SY_ROLE_INPUT, pos)};
    sy_op_params p = {.i = {mode, n_rot}, .f = {base, freq_scale}};
    oc_output(&tc, oc_node(&tc, SY_OP_ROPE, "y", in, 2, &p));
    oc_run(&tc, (otol){2e-6, 2e-6});
    oc_end(&tc);
}

Test(opencl_rows, rotates_adjacent_pairs_in_normal_mode)
{
    check_rope(SY_ROPE_NORMAL, 64, 10000.0f, 0.0f);
    check_rope(SY_ROPE_NORMAL, 32, 500000.0f, 0.25f);
}

Test(opencl_rows, rotates_split_halves_in_neox_mode)
{
    check_rope(SY_ROPE_NEOX, 64, 10000.0f, 1.0f);
    check_rope(SY_ROPE_NEOX, 16, 10000.0f, 0.5f);
}

/* --------------------------------------------------------------- argmax */

static void check_argmax(int64_t n, int64_t m)
{
    ocase tc;
    oc_begin(&tc, "argmax [%lld,%lld]", (long long)n, (long long)m);
    sy_tensor *x = oc_input(&tc, "x", SY_DTYPE_F32, n, m, 1, 1);
    float *data = sy_graph_host_data(tc.g, x);
    /* Two equal maxima per row: the first one wins. */
    for (int64_t r = 0; r < m; r++) {
        int64_t a = orng_below(&tc.rng, (uint32_t)(n / 2));
        int64_t b = n / 2 + orng_below(&tc.rng, (uint32_t)(n / 2));
        data[r * n + a] = 5.0f;
        data[r * n + b] = 5.0f;
    }
    data[1] = NAN; /* a NaN logit is no candidate */
    oc_output(&tc, oc_node(&tc, SY_OP_ARGMAX, "ids", &x, 1, NULL));
    oc_run(&tc, OTOL_EXACT);
    oc_end(&tc);
}

Test(opencl_rows, finds_the_first_maximum_of_one_long_row) { check_argmax(50000, 1); }
Test(opencl_rows, finds_the_first_maximum_of_each_row)
{
    check_argmax(300, 4);
    check_argmax(9000, 4);
}

/* ------------------------------------------------------------ attention */

static void check_attention(sy_dtype kt, sy_dtype vt, int64_t d, int64_t hq, int64_t hkv,
                            int64_t t, int64_t s, int64_t n_past, int64_t window)
{
    ocase tc;
    oc_begin(&tc, "attention k=%s v=%s D=%lld Hq=%lld Hkv=%lld T=%lld S=%lld n_past=%lld "
             "window=%lld", sy_dtype_name(kt), sy_dtype_name(vt), (long long)d, (long long)hq,
             (long long)hkv, (long long)t, (long long)s, (long long)n_past, (long long)window);
    sy_tensor *in[3] = {oc_input(&tc, "q", SY_DTYPE_F32, d, hq, t, 1),
                        oc_input(&tc, "k", kt, d, hkv, s, 1), oc_input(&tc, "v", vt, d, hkv, s, 1)};
    sy_op_params p = {.i = {n_past, window}, .f = {0.125f * 3.0f}};
    oc_output(&tc, oc_node(&tc, SY_OP_ATTENTION, "o", in, 3, &p));
    oc_run(&tc, (otol){2e-5, 2e-5});
    oc_end(&tc);
}

static void check_attention_all(sy_dtype kt, sy_dtype vt)
{
    check_attention(kt, vt, 64, 8, 2, 1, 300, 299, 0); /* decode against a long cache */
    check_attention(kt, vt, 64, 8, 2, 1, 300, 150, 0); /* cache rows past the query masked */
    check_attention(kt, vt, 64, 8, 2, 6, 6, 0, 0);     /* causal prefill */
    check_attention(kt, vt, 64, 8, 2, 4, 40, 36, 16);  /* sliding window */
    check_attention(kt, vt, 64, 8, 2, 3, 10, 20, 2);   /* window past the end of the cache */
}

Test(opencl_attention, matches_the_reference_with_f32_kv) { check_attention_all(SY_DTYPE_F32, SY_DTYPE_F32); }
Test(opencl_attention, matches_the_reference_with_f16_kv) { check_attention_all(SY_DTYPE_F16, SY_DTYPE_F16); }
Test(opencl_attention, matches_the_reference_with_mixed_kv)
{
    check_attention_all(SY_DTYPE_F16, SY_DTYPE_F32);
    check_attention_all(SY_DTYPE_F32, SY_DTYPE_F16);
}

Test(opencl_attention, matches_the_reference_with_quantized_kv)
{
    check_attention_all(SY_DTYPE_Q8_0, SY_DTYPE_Q8_0);
    check_attention_all(SY_DTYPE_Q4_0, SY_DTYPE_Q4_0);
    check_attention(SY_DTYPE_Q8_0, SY_DTYPE_F16, 256, 4, 1, 2, 70, 68, 0);
    check_attention(SY_DTYPE_F32, SY_DTYPE_Q4_0, 32, 6, 3, 5, 40, 35, 16);
}

Test(opencl_attention, runs_many_key_chunks_and_large_heads)
{
    check_attention(SY_DTYPE_F16, SY_DTYPE_F16, 128, 4, 4, 2, 1500, 1498, 0);
    check_attention(SY_DTYPE_F32, SY_DTYPE_F32, 256, 2, 1, 1, 700, 699, 0);
    check_attention(SY_DTYPE_F16, SY_DTYPE_F16, 64, 9, 3, 20, 620, 600, 512);
}

Test(opencl_attention, never_reads_masked_cache_rows)
{
    ocase tc;
    oc_begin(&tc, "attention with NaN in the masked rows of the cache");
    const int64_t d = 64, s = 40, n_past = 10, t = 3;
    sy_tensor *q = oc_input(&tc, "q", SY_DTYPE_F32, d, 4, t, 1);
    sy_tensor *k = oc_input(&tc, "k", SY_DTYPE_F32, d, 2, s, 1);
    sy_tensor *v = oc_input(&tc, "v", SY_DTYPE_F32, d, 2, s, 1);
    float *kd = sy_graph_host_data(tc.g, k), *vd = sy_graph_host_data(tc.g, v);
    for (int64_t i = (n_past + t) * d * 2; i < s * d * 2; i++)
        kd[i] = vd[i] = NAN;
    sy_tensor *in[3] = {q, k, v};
    sy_op_params p = {.i = {n_past, 0}, .f = {0.125f}};
    oc_output(&tc, oc_node(&tc, SY_OP_ATTENTION, "o", in, 3, &p));
    oc_run(&tc, (otol){2e-5, 2e-5});
    oc_end(&tc);
}

/* ------------------------------------------------------------- kv_write */

static void check_kv_write(sy_dtype cache_type, int64_t d, int64_t h, int64_t c, int64_t start,
                           int64_t t)
{
    ocase tc;
    oc_begin(&tc, "kv_write cache=%s [%lld,%lld,%lld] start=%lld T=%lld",
             sy_dtype_name(cache_type), (long long)d, (long long)h, (long long)c,
             (long long)start, (long long)t);
    const int64_t cne[4] = {d, h, c, 1};
    sy_tensor *cache = oc_leaf(&tc, "cache", cache_type, cne, SY_ROLE_KV, NULL);
    sy_tensor *in[2] = {cache, oc_input(&tc, "rows", SY_DTYPE_F32, d, h, t, 1)};
    sy_op_params p = {.i = {start}};
    oc_output(&tc, oc_node(&tc, SY_OP_KV_WRITE, "kv", in, 2, &p));
    oc_state(&tc, cache);
    oc_run(&tc, OTOL_EXACT);
    oc_end(&tc);
}

Test(opencl_memory, writes_kv_rows_into_every_cache_dtype)
{
    static const sy_dtype types[] = {SY_DTYPE_F32, SY_DTYPE_F16, SY_DTYPE_Q8_0, SY_DTYPE_Q4_0};
    for (size_t i = 0; i < sizeof types / sizeof types[0]; i++) {
        check_kv_write(types[i], 64, 4, 32, 5, 3);
        check_kv_write(types[i], 64, 4, 32, 29, 3);
        check_kv_write(types[i], 64, 4, 32, 0, 1);
        check_kv_write(types[i], 128, 8, 64, 10, 48);
    }
}

Test(opencl_memory, refuses_kv_rows_past_the_end_of_the_cache)
{
    ocase tc;
    oc_begin(&tc, "kv_write past the end");
    const int64_t cne[4] = {64, 2, 8, 1};
    sy_tensor *cache = oc_leaf(&tc, "cache", SY_DTYPE_F16, cne, SY_ROLE_KV, NULL);
    sy_tensor *in[2] = {cache, oc_input(&tc, "rows", SY_DTYPE_F32, 64, 2, 3, 1)};
    sy_op_params p = {.i = {6}};
    sy_tensor *out = NULL;
    sy_status st = sy_graph_add_node(tc.g, SY_OP_KV_WRITE, "kv", in, 2, &p, &out);
    cr_assert_neq(st, SY_OK, "the catalogue refuses the node before any device sees it");
    oc_end(&tc);
}

/* ----------------------------------------- positions read at run time */

/* An I32 leaf of one element holding |v|. */
static sy_tensor *rt_position(ocase *tc, int32_t v)
{
    int32_t *at = oc_alloc(tc, sizeof *at);
    *at = v;
    const int64_t ne[4] = {1, 1, 1, 1};
    return oc_leaf(tc, "position", SY_DTYPE_I32, ne, SY_ROLE_INPUT, at);
}

/* ATTENTION with n_past as a fourth input; cache rows from n_past + T on
 * hold NaN (never read).  |expect|: SY_E_INVALID_ARG where n_past is out
 * of range. */
static void check_attention_rt(sy_dtype kt, int64_t t, int64_t s, int64_t n_past,
                               int64_t window, sy_status expect)
{
    ocase tc;
    oc_begin(&tc, "attention k=v=%s T=%lld S=%lld n_past=%lld (at run time) window=%lld",
             sy_dtype_name(kt), (long long)t, (long long)s, (long long)n_past, (long long)window);
    const int64_t d = 64;
    sy_tensor *k = oc_input(&tc, "k", kt, d, 2, s, 1), *v = oc_input(&tc, "v", kt, d, 2, s, 1);
    if (kt == SY_DTYPE_F32 && n_past >= 0)
        for (int64_t i = (n_past + t) * d * 2; i < s * d * 2; i++)
            ((float *)sy_graph_host_data(tc.g, k))[i] = ((float *)sy_graph_host_data(tc.g, v))[i] =
                NAN;
    sy_tensor *in[4] = {oc_input(&tc, "q", SY_DTYPE_F32, d, 8, t, 1), k, v,
                        rt_position(&tc, (int32_t)n_past)};
    sy_op_params p = {.i = {0, window}, .f = {0.125f}};
    oc_output(&tc, oc_node(&tc, SY_OP_ATTENTION, "o", in, 4, &p));
    oc_run_expect(&tc, (otol){2e-5, 2e-5}, expect);
    oc_end(&tc);
}

Test(opencl_attention, reads_n_past_at_run_time)
{
    check_attention_rt(SY_DTYPE_F32, 1, 300, 150, 0, SY_OK); /* decode, later rows NaN */
    check_attention_rt(SY_DTYPE_F32, 4, 40, 36, 0, SY_OK);   /* the last rows of the cache */
    check_attention_rt(SY_DTYPE_F32, 4, 40, 20, 16, SY_OK);  /* sliding window */
    check_attention_rt(SY_DTYPE_F16, 6, 64, 0, 0, SY_OK);    /* causal prefill */
    check_attention_rt(SY_DTYPE_Q8_0, 1, 96, 70, 0, SY_OK);
    check_attention_rt(SY_DTYPE_Q4_0, 2, 96, 60, 32, SY_OK);
}

Test(opencl_attention, fails_a_run_time_n_past_out_of_range)
{
    check_attention_rt(SY_DTYPE_F32, 4, 40, 37, 0, SY_E_INVALID_ARG); /* n_past + T > S */
    check_attention_rt(SY_DTYPE_F16, 1, 40, -1, 0, SY_E_INVALID_ARG);
}

/* KV_WRITE with its start as a third input. */
static void check_kv_write_rt(sy_dtype cache_type, int64_t c, int64_t start, int64_t t,
                              sy_status expect)
{
    ocase tc;
    oc_begin(&tc, "kv_write cache=%s rows=%lld start=%lld (at run time) T=%lld",
             sy_dtype_name(cache_type), (long long)c, (long long)start, (long long)t);
    const int64_t cne[4] = {64, 4, c, 1};
    sy_tensor *cache = oc_leaf(&tc, "cache", cache_type, cne, SY_ROLE_KV, NULL);
    sy_tensor *in[3] = {cache, oc_input(&tc, "rows", SY_DTYPE_F32, 64, 4, t, 1),
                        rt_position(&tc, (int32_t)start)};
    sy_op_params p = {.i = {0}};
    oc_output(&tc, oc_node(&tc, SY_OP_KV_WRITE, "kv", in, 3, &p));
    oc_state(&tc, cache);
    oc_run_expect(&tc, OTOL_EXACT, expect);
    oc_end(&tc);
}

Test(opencl_memory, writes_kv_rows_at_a_run_time_start)
{
    static const sy_dtype types[] = {SY_DTYPE_F32, SY_DTYPE_F16, SY_DTYPE_Q8_0, SY_DTYPE_Q4_0};
    for (size_t i = 0; i < sizeof types / sizeof types[0]; i++) {
        check_kv_write_rt(types[i], 32, 5, 3, SY_OK);
        check_kv_write_rt(types[i], 32, 29, 3, SY_OK); /* the last rows */
        check_kv_write_rt(types[i], 32, 0, 1, SY_OK);
    }
    check_kv_write_rt(SY_DTYPE_F16, 32, 30, 3, SY_E_INVALID_ARG); /* past the end */
    check_kv_write_rt(SY_DTYPE_Q8_0, 32, -1, 1, SY_E_INVALID_ARG);
}

/* ----------------------------------------------------------------- copy */

static bool copy_writable(sy_dtype dst, sy_dtype src)
{
    return dst == src || !(dst == SY_DTYPE_Q4_K || dst == SY_DTYPE_Q5_K || dst == SY_DTYPE_Q6_K ||
                           dst == SY_DTYPE_Q5_0 || dst == SY_DTYPE_Q5_1);
}

static void check_copy(sy_dtype src, sy_dtype dst, int64_t rows)
{
    ocase tc;
    oc_begin(&tc, "copy %s -> %s, %lld rows", sy_dtype_name(src), sy_dtype_name(dst),
             (long long)rows);
    sy_tensor *x = oc_input(&tc, "x", src, o_row_for(src), rows, 2, 1);
    sy_op_params p = {.i = {dst}};
    oc_output(&tc, oc_node(&tc, SY_OP_COPY, "y", &x, 1, &p));
    oc_run(&tc, OTOL_EXACT);
    oc_end(&tc);
}

Test(opencl_memory, copies_between_every_pair_of_dtypes_bit_for_bit)
{
    for (size_t i = 0; i < O_N_DTYPES; i++)
        for (size_t j = 0; j < O_N_DTYPES; j++)
            if (copy_writable(o_all_dtypes[j], o_all_dtypes[i]))
                check_copy(o_all_dtypes[i], o_all_dtypes[j], 3);
}

static void check_copy_view(sy_dtype src, sy_dtype dst, bool transpose)
{
    ocase tc;
    oc_begin(&tc, "copy %s view %s -> %s", transpose ? "transposed" : "permuted",
             sy_dtype_name(src), sy_dtype_name(dst));
    sy_tensor *x = oc_input(&tc, "x", src, o_row_for(src), 30, 3, 1);
    sy_tensor *v;
    if (transpose) {
        v = oc_node(&tc, SY_OP_TRANSPOSE, "xt", &x, 1, NULL);
    } else {
        sy_op_params perm = {.i = {0, 2, 1, 3}};
        v = oc_node(&tc, SY_OP_PERMUTE, "xp", &x, 1, &perm);
    }
    sy_op_params p = {.i = {dst}};
    oc_output(&tc, oc_node(&tc, SY_OP_COPY, "y", &v, 1, &p));
    oc_run(&tc, OTOL_EXACT);
    oc_end(&tc);
}

Test(opencl_memory, copies_transposed_and_permuted_views_to_contiguous)
{
    static const sy_dtype plain[] = {SY_DTYPE_F32, SY_DTYPE_F16, SY_DTYPE_BF16, SY_DTYPE_I32};
    for (size_t i = 0; i < sizeof plain / sizeof plain[0]; i++) {
        check_copy_view(plain[i], SY_DTYPE_F32, true);
        check_copy_view(plain[i], SY_DTYPE_F16, true);
        check_copy_view(plain[i], plain[i], true);
    }
    for (size_t i = 0; i < O_N_DTYPES; i++) {
        check_copy_view(o_all_dtypes[i], SY_DTYPE_F32, false);
        check_copy_view(o_all_dtypes[i], o_all_dtypes[i], false);
        check_copy_view(o_all_dtypes[i], SY_DTYPE_Q8_0, false);
    }
}

/* --------------------------------------------------------- long graphs */

Test(opencl_graph, runs_hundreds_of_kernels_in_one_execute)
{
    ocase tc;
    oc_begin(&tc, "chain of 600 nodes");
    sy_tensor *x = oc_input(&tc, "x", SY_DTYPE_F32, 8192, 3, 1, 1);
    sy_tensor *w = oc_input(&tc, "w", SY_DTYPE_F32, 8192, 1, 1, 1);
    sy_op_params eps = {.f = {1e-6f}};
    char name[32];
    for (int i = 0; i < 300; i++) {
        snprintf(name, sizeof name, "norm%d", i);
        x = oc_node(&tc, SY_OP_RMS_NORM, name, &x, 1, &eps);
        sy_tensor *in[2] = {x, w};
        snprintf(name, sizeof name, "mul%d", i);
        x = oc_node(&tc, SY_OP_MUL, name, in, 2, NULL);
    }
    oc_output(&tc, x);
    oc_run(&tc, (otol){1e-4, 1e-5});
    oc_end(&tc);
}
