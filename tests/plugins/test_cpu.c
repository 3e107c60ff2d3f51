/* Conformance of the CPU plugin: every op on every dtype it takes, run
 * through the runtime on the "cpu" device with every inner-kernel table
 * the machine runs (SWITCHYARD_CPU_ISA=scalar, avx2, avxvnni, avx512,
 * avx512gfni and auto) and 1, 2 and 3 threads (cpu_case.c: run_cfgs), compared with the
 * reference kernels (the ground truth).  Inputs
 * are random from a fresh seed per test, printed in every failure. */
#include <criterion/criterion.h>
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "cpu_case.h"
#include "quants_internal.h"

/* ---------------------------------------------------------------- matmul */

static const tol TOL_MATMUL = {1e-5, 2e-5};

/* Error the quantized activations of the quantized matmul may add to each
 * output.  A column is quantized in blocks of 32 with step d = max|x| / top
 * (top = 127 * 128 for q16, the default; 127 for q8), and rounding moves
 * each x[k] by at most d / 2 (plus two ulp of x * (1 / d), up to top), so
 * out[n, m] may move by sum_k |w[k, n]| * d_k * (1/2 + top * 2^-22).  On
 * top of that both kernels round in F32 in a different order: K * 2^-23
 * of sum_k |w x| covers the two sums (a worst case, not an estimate). */
static float *matmul_bound(tcase *tc, const sy_tensor *w, const sy_tensor *x)
{
    const int64_t k = w->ne[0], n_rows = w->ne[1], m_cols = x->ne[1];
    const int64_t c2 = x->ne[2], c3 = x->ne[3];
    const int64_t r2 = c2 / w->ne[2], r3 = x->ne[3] / w->ne[3];
    float *bound = tc_alloc(tc, sizeof(float) * (size_t)(n_rows * m_cols * c2 * c3));
    float *wrow = tc_alloc(tc, sizeof(float) * (size_t)k);
    float *xcol = tc_alloc(tc, sizeof(float) * (size_t)k);
    float *step = tc_alloc(tc, sizeof(float) * (size_t)k);
    const char *wd = sy_graph_host_data(tc->g, w), *xd = sy_graph_host_data(tc->g, x);
    const char *act = getenv("SWITCHYARD_CPU_ACTIVATIONS");
    const bool quantized = sy_dtype_is_quantized(w->dtype) && !(act && strcmp(act, "f32") == 0);
    const double top = act && strcmp(act, "q8") == 0 ? 127.0 : 127.0 * 128.0;
    for (int64_t i3 = 0; i3 < c3; i3++) {
        for (int64_t i2 = 0; i2 < c2; i2++) {
            for (int64_t m = 0; m < m_cols; m++) {
                const char *xc = xd + m * (int64_t)x->nb[1] + i2 * (int64_t)x->nb[2] +
                                 i3 * (int64_t)x->nb[3];
                cr_assert_eq(sy__dequantize_row(x->dtype, xc, xcol, k), SY_OK);
                for (int64_t b = 0; b < k; b += 32) {
                    float amax = 0.0f;
                    for (int j = 0; j < 32; j++)
                        amax = fmaxf(amax, fabsf(xcol[b + j]));
                    for (int j = 0; j < 32; j++)
                        step[b + j] = (float)(amax / top);
                }
                for (int64_t n = 0; n < n_rows; n++) {
                    const char *wr = wd + n * (int64_t)w->nb[1] + i2 / r2 * (int64_t)w->nb[2] +
                                     i3 / r3 * (int64_t)w->nb[3];
                    cr_assert_eq(sy__dequantize_row(w->dtype, wr, wrow, k), SY_OK);
                    double q = 0.0, mag = 0.0;
                    for (int64_t i = 0; i < k; i++) {
                        q += fabs(wrow[i]) * step[i] * (0.5 + top * 0x1p-22);
                        mag += fabs((double)wrow[i] * xcol[i]);
                    }
                    const double b = (quantized ? q : 0.0) + (double)k * 0x1p-23 * mag;
                    bound[((i3 * c2 + i2) * m_cols + m) * n_rows + n] = (float)b;
                }
            }
        }
    }
    return bound;
}

static void check_matmul(sy_dtype wtype, sy_dtype xtype, int64_t k, int64_t n, int64_t m,
                         int64_t b2, int64_t b3, int64_t c2, int64_t c3)
{
    tcase tc;
    tc_begin(&tc, "matmul w=%s x=%s K=%lld N=%lld M=%lld batch [%lld,%lld]x[%lld,%lld]",
             sy_dtype_name(wtype), sy_dtype_name(xtype), (long long)k, (long long)n, (long long)m,
             (long long)b2, (long long)b3, (long long)c2, (long long)c3);
    const int64_t wne[4] = {k, n, b2, b3};
    sy_tensor *w = tc_leaf(&tc, "w", wtype, wne, SY_ROLE_WEIGHT, NULL);
    sy_tensor *x = tc_input(&tc, "x", xtype, k, m, c2, c3);
    sy_tensor *in[2] = {w, x};
    tc_output(&tc, tc_node(&tc, SY_OP_MATMUL, "mm", in, 2, NULL));
    tc.bound[0] = matmul_bound(&tc, w, x);
    tc_run(&tc, TOL_MATMUL);
    tc_end(&tc);
}

static void check_matmul_all_shapes(sy_dtype wtype)
{
    const int64_t k = row_for(wtype) == 256 ? 256 : 96;
    check_matmul(wtype, SY_DTYPE_F32, k, 19, 1, 1, 1, 1, 1);
    check_matmul(wtype, SY_DTYPE_F32, k, 19, 7, 1, 1, 1, 1);
    check_matmul(wtype, SY_DTYPE_F16, k, 19, 1, 1, 1, 1, 1);
    check_matmul(wtype, SY_DTYPE_F16, k, 5, 6, 1, 1, 1, 1);
    check_matmul(wtype, SY_DTYPE_F32, k, 5, 3, 2, 1, 4, 3);
    check_matmul(wtype, SY_DTYPE_F16, k, 3, 2, 1, 3, 2, 3);
    /* Big enough that the kernel wakes three lanes: one column (decode
     * tiles) and a batch of columns (prefill tiles, with a remainder of
     * the column groups). */
    check_matmul(wtype, SY_DTYPE_F32, 256, 1700, 1, 1, 1, 1, 1);
    check_matmul(wtype, SY_DTYPE_F16, 256, 67, 71, 1, 1, 1, 1);
    /* Prefill batches broadcast over weight batches (the GEMM's panels
     * per batch). */
    check_matmul(wtype, SY_DTYPE_F32, k, 9, 12, 2, 1, 4, 3);
}

Test(cpu_matmul, matches_the_reference_with_f32_weights) { check_matmul_all_shapes(SY_DTYPE_F32); }
Test(cpu_matmul, matches_the_reference_with_f16_weights) { check_matmul_all_shapes(SY_DTYPE_F16); }
Test(cpu_matmul, matches_the_reference_with_bf16_weights) { check_matmul_all_shapes(SY_DTYPE_BF16); }
Test(cpu_matmul, matches_the_reference_with_i32_weights) { check_matmul_all_shapes(SY_DTYPE_I32); }
Test(cpu_matmul, matches_the_reference_with_q8_0_weights) { check_matmul_all_shapes(SY_DTYPE_Q8_0); }
Test(cpu_matmul, matches_the_reference_with_q4_0_weights) { check_matmul_all_shapes(SY_DTYPE_Q4_0); }
Test(cpu_matmul, matches_the_reference_with_q4_1_weights) { check_matmul_all_shapes(SY_DTYPE_Q4_1); }
Test(cpu_matmul, matches_the_reference_with_q5_0_weights) { check_matmul_all_shapes(SY_DTYPE_Q5_0); }
Test(cpu_matmul, matches_the_reference_with_q5_1_weights) { check_matmul_all_shapes(SY_DTYPE_Q5_1); }
Test(cpu_matmul, matches_the_reference_with_q4_k_weights) { check_matmul_all_shapes(SY_DTYPE_Q4_K); }
Test(cpu_matmul, matches_the_reference_with_q5_k_weights) { check_matmul_all_shapes(SY_DTYPE_Q5_K); }
Test(cpu_matmul, matches_the_reference_with_q6_k_weights) { check_matmul_all_shapes(SY_DTYPE_Q6_K); }

/* Matmuls of one input (q, k, v; gate, up) run as one group in the plugin:
 * every member within its bound under every configuration, a float
 * member ending the group, and the first member equal bit for bit to the
 * same matmul run alone after a node that breaks the group. */
static void check_matmul_group(int64_t m)
{
    static const sy_dtype types[] = {SY_DTYPE_Q4_0, SY_DTYPE_Q8_0, SY_DTYPE_Q4_1, SY_DTYPE_F16};
    static const int64_t rows[] = {70, 33, 129, 17};
    tcase tc;
    tc_begin(&tc, "matmul group of 3 quantized + 1 f16, K=128 M=%lld", (long long)m);
    sy_tensor *x = tc_input(&tc, "x", SY_DTYPE_F32, 128, m, 1, 1);
    sy_tensor *w[4], *y[4];
    for (int i = 0; i < 4; i++) {
        const int64_t wne[4] = {128, rows[i], 1, 1};
        w[i] = tc_leaf(&tc, "w", types[i], wne, SY_ROLE_WEIGHT, NULL);
        sy_tensor *in[2] = {w[i], x};
        y[i] = tc_node(&tc, SY_OP_MATMUL, "mm", in, 2, NULL);
    }
    sy_op_params one = {.f = {1.0f, 0.0f}};
    sy_tensor *xs = tc_node(&tc, SY_OP_SCALE, "x.same", &x, 1, &one);
    sy_tensor *in[2] = {w[0], xs};
    sy_tensor *solo = tc_node(&tc, SY_OP_MATMUL, "mm.alone", in, 2, NULL);
    for (int i = 0; i < 3; i++) {
        tc_output(&tc, y[i]);
        tc.bound[i] = matmul_bound(&tc, w[i], x);
    }
    tc_output(&tc, solo);
    tc.bound[3] = matmul_bound(&tc, w[0], x);
    tc_run(&tc, TOL_MATMUL);

    for (size_t c = 0; c < N_RUN_CFGS; c++) {
        uint32_t dev = 0;
        sy_runtime *rt = tc_runtime(&tc, &run_cfgs[c], &dev);
        if (strstr(tc.log, "' is not available here")) {
            sy_runtime_destroy(rt);
            continue;
        }
        cr_assert_eq(sy_runtime_execute_on(rt, tc.g, dev), SY_OK, "%s", sy_runtime_last_error(rt));
        cr_assert(memcmp(tc.got[0], tc.got[3], sy_tensor_nbytes(solo)) == 0,
                  "%s [%s isa, %s threads]: grouped and lone matmul differ", tc.what,
                  run_cfgs[c].isa, run_cfgs[c].threads);
        sy_runtime_destroy(rt);
    }
    tc_end(&tc);
}

Test(cpu_matmul, groups_matmuls_of_one_input)
{
    check_matmul_group(1);
    check_matmul_group(9);
}

Test(cpu_matmul, handles_many_output_rows_split_across_threads)
{
    check_matmul(SY_DTYPE_Q4_0, SY_DTYPE_F32, 512, 301, 3, 1, 1, 1, 1);
    check_matmul(SY_DTYPE_F32, SY_DTYPE_F32, 128, 257, 1, 1, 1, 1, 1);
    /* Decode over batches that broadcast weight batches: a lane's claim of
     * tiles runs across a batch's end into the next. */
    check_matmul(SY_DTYPE_Q4_1, SY_DTYPE_F32, 256, 150, 1, 2, 1, 4, 3);
}

/* SWITCHYARD_CPU_MATMUL_ROWS (the GEMM tile rows `switchyard tune`
 * chooses): the smallest and largest counts it takes, over row counts
 * that leave a remainder, give the reference's results. */
Test(cpu_matmul, matches_the_reference_with_any_gemm_tile_rows)
{
    const char *rows[] = {"4", "128"};
    for (int i = 0; i < 2; i++) {
        setenv("SWITCHYARD_CPU_MATMUL_ROWS", rows[i], 1);
        check_matmul(SY_DTYPE_Q4_0, SY_DTYPE_F32, 256, 301, 40, 1, 1, 1, 1);
        check_matmul(SY_DTYPE_Q4_K, SY_DTYPE_F16, 256, 67, 71, 1, 1, 1, 1);
        check_matmul(SY_DTYPE_Q8_0, SY_DTYPE_F32, 96, 9, 12, 2, 1, 4, 3);
    }
    unsetenv("SWITCHYARD_CPU_MATMUL_ROWS");
}

Test(cpu_matmul, falls_back_to_the_reference_for_a_transposed_input)
{
    tcase tc;
    tc_begin(&tc, "matmul with a transposed input");
    tc.allow_fallback = true;
    sy_tensor *w = tc_input(&tc, "w", SY_DTYPE_F32, 16, 9, 1, 1);
    sy_tensor *xt = tc_input(&tc, "xt", SY_DTYPE_F32, 5, 16, 1, 1);
    sy_tensor *x = tc_node(&tc, SY_OP_TRANSPOSE, "x", &xt, 1, NULL);
    sy_tensor *in[2] = {w, x};
    tc_output(&tc, tc_node(&tc, SY_OP_MATMUL, "mm", in, 2, NULL));
    tc_run(&tc, TOL_MATMUL);
    cr_assert(strstr(tc.log, "runs the reference kernel") != NULL,
              "the fallback was not logged; log:\n%s", tc.log);
    tc_end(&tc);
}

/* -------------------------------------------------------------- get_rows */

static void check_get_rows(sy_dtype table_type)
{
    tcase tc;
    tc_begin(&tc, "get_rows table=%s", sy_dtype_name(table_type));
    const int64_t k = 256, rows = 9, m = 200;
    const int64_t tne[4] = {k, rows, 1, 1};
    sy_tensor *table = tc_leaf(&tc, "table", table_type, tne, SY_ROLE_WEIGHT, NULL);
    int32_t *ids = tc_alloc(&tc, m * sizeof(int32_t));
    for (int64_t i = 0; i < m; i++)
        ids[i] = (int32_t)trng_below(&tc.rng, (uint32_t)rows);
    ids[m - 1] = ids[0]; /* a repeated id */
    const int64_t ine[4] = {m, 1, 1, 1};
    sy_tensor *tid = tc_leaf(&tc, "ids", SY_DTYPE_I32, ine, SY_ROLE_INPUT, ids);
    sy_tensor *in[2] = {table, tid};
    tc_output(&tc, tc_node(&tc, SY_OP_GET_ROWS, "rows", in, 2, NULL));
    tc_run(&tc, TOL_EXACT);
    tc_end(&tc);
}

Test(cpu_get_rows, matches_the_reference_for_every_table_dtype)
{
    for (size_t i = 0; i < N_ALL_DTYPES; i++)
        check_get_rows(all_dtypes[i]);
}

Test(cpu_get_rows, rejects_an_id_out_of_range)
{
    tcase tc;
    tc_begin(&tc, "get_rows with a bad id");
    sy_tensor *table = tc_input(&tc, "table", SY_DTYPE_F32, 8, 4, 1, 1);
    int32_t *ids = tc_alloc(&tc, 2 * sizeof(int32_t));
    ids[0] = 1;
    ids[1] = 4;
    const int64_t ine[4] = {2, 1, 1, 1};
    sy_tensor *in[2] = {table, tc_leaf(&tc, "ids", SY_DTYPE_I32, ine, SY_ROLE_INPUT, ids)};
    tc_output(&tc, tc_node(&tc, SY_OP_GET_ROWS, "rows", in, 2, NULL));
    tc_run_expect(&tc, TOL_EXACT, SY_E_INVALID_ARG);
    tc_end(&tc);
}

/* ------------------------------------------------------------ add and mul */

static const tol TOL_ELEMENTWISE = {1e-6, 1e-6};

static void check_binary(sy_op op, const int64_t b_ne[4])
{
    tcase tc;
    tc_begin(&tc, "%s with in1 [%lld,%lld,%lld,%lld]", sy_op_name(op), (long long)b_ne[0],
             (long long)b_ne[1], (long long)b_ne[2], (long long)b_ne[3]);
    sy_tensor *in[2] = {tc_input(&tc, "a", SY_DTYPE_F32, 256, 12, 4, 2),
                        tc_leaf(&tc, "b", SY_DTYPE_F32, b_ne, SY_ROLE_INPUT, NULL)};
    tc_output(&tc, tc_node(&tc, op, "y", in, 2, NULL));
    tc_run(&tc, TOL_ELEMENTWISE);
    tc_end(&tc);
}

static void check_binary_all(sy_op op)
{
    static const int64_t shapes[][4] = {
        {256, 12, 4, 2}, {256, 1, 4, 1}, {1, 12, 1, 2}, {8, 3, 2, 1}, {1, 1, 1, 1}, {256, 12, 1, 1},
    };
    for (size_t i = 0; i < sizeof shapes / sizeof shapes[0]; i++)
        check_binary(op, shapes[i]);
}

Test(cpu_elementwise, adds_with_every_broadcast_shape) { check_binary_all(SY_OP_ADD); }
Test(cpu_elementwise, multiplies_with_every_broadcast_shape) { check_binary_all(SY_OP_MUL); }

Test(cpu_elementwise, adds_a_transposed_view_through_the_fallback)
{
    tcase tc;
    tc_begin(&tc, "add on a transposed view");
    tc.allow_fallback = true;
    sy_tensor *at = tc_input(&tc, "at", SY_DTYPE_F32, 6, 32, 1, 1);
    sy_tensor *in[2] = {tc_node(&tc, SY_OP_TRANSPOSE, "a", &at, 1, NULL),
                        tc_input(&tc, "b", SY_DTYPE_F32, 32, 6, 1, 1)};
    tc_output(&tc, tc_node(&tc, SY_OP_ADD, "y", in, 2, NULL));
    tc_run(&tc, TOL_ELEMENTWISE);
    tc_end(&tc);
}

static void check_unary(sy_op op, const sy_op_params *p, tol tl)
{
    tcase tc;
    tc_begin(&tc, "%s", sy_op_name(op));
    sy_tensor *x = tc_input(&tc, "x", SY_DTYPE_F32, 300, 40, 3, 1);
    float *data = sy_graph_host_data(tc.g, x);
    for (int i = 0; i < 300 * 120; i++)
        data[i] *= 8.0f; /* reach the tails of the activations */
    tc_output(&tc, tc_node(&tc, op, "y", &x, 1, p));
    tc_run(&tc, tl);
    tc_end(&tc);
}

Test(cpu_elementwise, scales_and_shifts)
{
    sy_op_params p = {.f = {0.75f, -0.25f}};
    check_unary(SY_OP_SCALE, &p, TOL_ELEMENTWISE);
}

Test(cpu_elementwise, applies_silu) { check_unary(SY_OP_SILU, NULL, (tol){4e-6, 1e-6}); }
Test(cpu_elementwise, applies_gelu) { check_unary(SY_OP_GELU, NULL, (tol){4e-6, 1e-6}); }

static void check_glu(sy_op op)
{
    tcase tc;
    tc_begin(&tc, "%s", sy_op_name(op));
    sy_tensor *in[2] = {tc_input(&tc, "gate", SY_DTYPE_F32, 96, 100, 3, 1),
                        tc_input(&tc, "up", SY_DTYPE_F32, 96, 100, 3, 1)};
    float *gate = sy_graph_host_data(tc.g, in[0]);
    for (int i = 0; i < 96 * 300; i++)
        gate[i] *= 6.0f;
    tc_output(&tc, tc_node(&tc, op, "y", in, 2, NULL));
    tc_run(&tc, (tol){4e-6, 1e-6});
    tc_end(&tc);
}

Test(cpu_elementwise, applies_swiglu) { check_glu(SY_OP_SWIGLU); }
Test(cpu_elementwise, applies_geglu) { check_glu(SY_OP_GEGLU); }

/* ------------------------------------------------------------- rms_norm */

Test(cpu_rows, normalizes_rows_by_their_rms)
{
    tcase tc;
    tc_begin(&tc, "rms_norm");
    sy_tensor *x = tc_input(&tc, "x", SY_DTYPE_F32, 256, 40, 3, 1);
    sy_op_params p = {.f = {1e-5f}};
    tc_output(&tc, tc_node(&tc, SY_OP_RMS_NORM, "y", &x, 1, &p));
    tc_run(&tc, (tol){2e-6, 1e-6});
    tc_end(&tc);
}

Test(cpu_rows, normalizes_an_all_zero_row_to_zeros)
{
    tcase tc;
    tc_begin(&tc, "rms_norm of a zero row, eps 0");
    sy_tensor *x = tc_input(&tc, "x", SY_DTYPE_F32, 64, 3, 1, 1);
    memset((float *)sy_graph_host_data(tc.g, x) + 64, 0, 64 * sizeof(float));
    sy_op_params p = {.f = {0.0f}};
    tc_output(&tc, tc_node(&tc, SY_OP_RMS_NORM, "y", &x, 1, &p));
    tc_run(&tc, (tol){2e-6, 1e-6});
    tc_end(&tc);
}

/* -------------------------------------------------------------- softmax */

static void check_softmax(float scale, int64_t causal, int64_t n_past, int64_t window)
{
    tcase tc;
    tc_begin(&tc, "softmax scale %g causal %lld n_past %lld window %lld", (double)scale,
             (long long)causal, (long long)n_past, (long long)window);
    sy_tensor *x = tc_input(&tc, "x", SY_DTYPE_F32, 37, 24, 30, 1);
    sy_op_params p = {.i = {causal, n_past, window}, .f = {scale}};
    tc_output(&tc, tc_node(&tc, SY_OP_SOFTMAX, "y", &x, 1, &p));
    tc_run(&tc, (tol){4e-6, 1e-6});
    tc_end(&tc);
}

Test(cpu_rows, applies_softmax_without_masks) { check_softmax(2.5f, 0, 0, 0); }
Test(cpu_rows, applies_softmax_with_a_causal_mask) { check_softmax(0.5f, 1, 20, 0); }
Test(cpu_rows, applies_softmax_with_a_causal_window) { check_softmax(1.0f, 1, 30, 8); }
Test(cpu_rows, zeroes_softmax_rows_whose_keys_are_all_masked) { check_softmax(1.0f, 0, 50, 4); }

/* ----------------------------------------------------------------- rope */

static void check_rope(int64_t mode, int64_t n_rot, float base, float freq_scale)
{
    tcase tc;
    tc_begin(&tc, "rope mode %lld n_rot %lld base %g scale %g", (long long)mode, (long long)n_rot,
             (double)base, (double)freq_scale);
    const int64_t d = 64, h = 8, t = 50;
    sy_tensor *x = tc_input(&tc, "x", SY_DTYPE_F32, d, h, t, 1);
    int32_t *pos = tc_alloc(&tc, t * sizeof(int32_t));
    for (int64_t i = 0; i < t; i++)
        pos[i] = (int32_t)trng_below(&tc.rng, 4096);
    const int64_t pne[4] = {t, 1, 1, 1};
    sy_tensor *in[2] = {x, tc_leaf(&tc, "pos", SY_DTYPE_I32, pne, SY_ROLE_INPUT, pos)};
    sy_op_params p = {.i = {mode, n_rot}, .f = {base, freq_scale}};
    tc_output(&tc, tc_node(&tc, SY_OP_ROPE, "y", in, 2, &p));
    tc_run(&tc, (tol){2e-6, 2e-6});
    tc_end(&tc);
}

Test(cpu_rows, rotates_adjacent_pairs_in_normal_mode)
{
    check_rope(SY_ROPE_NORMAL, 64, 10000.0f, 0.0f);
    check_rope(SY_ROPE_NORMAL, 32, 500000.0f, 0.25f);
}

Test(cpu_rows, rotates_split_halves_in_neox_mode)
{
    check_rope(SY_ROPE_NEOX, 64, 10000.0f, 1.0f);
    check_rope(SY_ROPE_NEOX, 16, 10000.0f, 0.5f);
}

/* --------------------------------------------------------------- argmax */

static void check_argmax(int64_t n, int64_t m)
{
    tcase tc;
    tc_begin(&tc, "argmax [%lld,%lld]", (long long)n, (long long)m);
    sy_tensor *x = tc_input(&tc, "x", SY_DTYPE_F32, n, m, 1, 1);
    float *data = sy_graph_host_data(tc.g, x);
    /* Two equal maxima per row: the first one wins. */
    for (int64_t r = 0; r < m; r++) {
        int64_t a = trng_below(&tc.rng, (uint32_t)(n / 2));
        int64_t b = n / 2 + trng_below(&tc.rng, (uint32_t)(n / 2));
        data[r * n + a] = 5.0f;
        data[r * n + b] = 5.0f;
    }
    data[1] = NAN; /* a NaN logit is no candidate */
    tc_output(&tc, tc_node(&tc, SY_OP_ARGMAX, "ids", &x, 1, NULL));
    tc_run(&tc, TOL_EXACT);
    tc_end(&tc);
}

Test(cpu_rows, finds_the_first_maximum_of_one_long_row) { check_argmax(50000, 1); }
Test(cpu_rows, finds_the_first_maximum_of_each_row)
{
    check_argmax(300, 4);
    check_argmax(9000, 4);
}

/* ----------------------------------------------------------------- copy */

static bool copy_writable(sy_dtype dst, sy_dtype src)
{
    return dst == src || !(dst == SY_DTYPE_Q4_K || dst == SY_DTYPE_Q5_K || dst == SY_DTYPE_Q6_K);
}

static void check_copy(sy_dtype src, sy_dtype dst, int64_t rows)
{
    tcase tc;
    tc_begin(&tc, "copy %s -> %s, %lld rows", sy_dtype_name(src), sy_dtype_name(dst),
             (long long)rows);
    sy_tensor *x = tc_input(&tc, "x", src, row_for(src), rows, 2, 1);
    sy_op_params p = {.i = {dst}};
    tc_output(&tc, tc_node(&tc, SY_OP_COPY, "y", &x, 1, &p));
    tc_run(&tc, TOL_EXACT);
    tc_end(&tc);
}

Test(cpu_memory, copies_between_every_pair_of_dtypes)
{
    for (size_t i = 0; i < N_ALL_DTYPES; i++)
        for (size_t j = 0; j < N_ALL_DTYPES; j++)
            if (copy_writable(all_dtypes[j], all_dtypes[i]))
                check_copy(all_dtypes[i], all_dtypes[j], 3);
}

Test(cpu_memory, copies_large_tensors_on_every_lane)
{
    for (size_t i = 0; i < N_ALL_DTYPES; i++) {
        check_copy(all_dtypes[i], SY_DTYPE_F32, 100);
        check_copy(all_dtypes[i], all_dtypes[i], 100);
        check_copy(all_dtypes[i], SY_DTYPE_Q8_0, 100);
    }
}

static void check_copy_view(sy_dtype src, sy_dtype dst, bool transpose)
{
    tcase tc;
    tc_begin(&tc, "copy %s view %s -> %s", transpose ? "transposed" : "permuted",
             sy_dtype_name(src), sy_dtype_name(dst));
    sy_tensor *x = tc_input(&tc, "x", src, row_for(src), 300, 3, 1);
    sy_tensor *v;
    if (transpose) {
        v = tc_node(&tc, SY_OP_TRANSPOSE, "xt", &x, 1, NULL);
    } else {
        sy_op_params perm = {.i = {0, 2, 1, 3}};
        v = tc_node(&tc, SY_OP_PERMUTE, "xp", &x, 1, &perm);
    }
    sy_op_params p = {.i = {dst}};
    tc_output(&tc, tc_node(&tc, SY_OP_COPY, "y", &v, 1, &p));
    tc_run(&tc, TOL_EXACT);
    tc_end(&tc);
}

Test(cpu_memory, copies_transposed_and_permuted_views_to_contiguous)
{
    static const sy_dtype plain[] = {SY_DTYPE_F32, SY_DTYPE_F16, SY_DTYPE_BF16, SY_DTYPE_I32};
    for (size_t i = 0; i < sizeof plain / sizeof plain[0]; i++) {
        check_copy_view(plain[i], SY_DTYPE_F32, true);
        check_copy_view(plain[i], SY_DTYPE_F16, true);
        check_copy_view(plain[i], plain[i], true);
    }
    for (size_t i = 0; i < N_ALL_DTYPES; i++) {
        check_copy_view(all_dtypes[i], SY_DTYPE_F32, false);
        check_copy_view(all_dtypes[i], all_dtypes[i], false);
    }
}

/* --------------------------------------------------------- long graphs */

Test(cpu_graph, runs_hundreds_of_dispatches_in_one_execute)
{
    tcase tc;
    tc_begin(&tc, "chain of 600 nodes");
    sy_tensor *x = tc_input(&tc, "x", SY_DTYPE_F32, 8192, 3, 1, 1);
    sy_tensor *w = tc_input(&tc, "w", SY_DTYPE_F32, 8192, 1, 1, 1);
    sy_op_params eps = {.f = {1e-6f}};
    char name[32];
    for (int i = 0; i < 300; i++) {
        snprintf(name, sizeof name, "norm%d", i);
        x = tc_node(&tc, SY_OP_RMS_NORM, name, &x, 1, &eps);
        sy_tensor *in[2] = {x, w};
        snprintf(name, sizeof name, "mul%d", i);
        x = tc_node(&tc, SY_OP_MUL, name, in, 2, NULL);
    }
    tc_output(&tc, x);
    tc_run(&tc, (tol){1e-4, 1e-5});
    tc_end(&tc);
}

/* The opt-in Q8-activation kernels, held to the analytic Q8 bound. */
static void check_matmul_q8(sy_dtype wtype)
{
    setenv("SWITCHYARD_CPU_ACTIVATIONS", "q8", 1);
    check_matmul_all_shapes(wtype);
    unsetenv("SWITCHYARD_CPU_ACTIVATIONS");
}

Test(cpu_matmul_q8, matches_the_reference_with_q8_0_weights) { check_matmul_q8(SY_DTYPE_Q8_0); }
Test(cpu_matmul_q8, matches_the_reference_with_q4_0_weights) { check_matmul_q8(SY_DTYPE_Q4_0); }
Test(cpu_matmul_q8, matches_the_reference_with_q4_1_weights) { check_matmul_q8(SY_DTYPE_Q4_1); }
Test(cpu_matmul_q8, matches_the_reference_with_q5_0_weights) { check_matmul_q8(SY_DTYPE_Q5_0); }
Test(cpu_matmul_q8, matches_the_reference_with_q5_1_weights) { check_matmul_q8(SY_DTYPE_Q5_1); }
Test(cpu_matmul_q8, matches_the_reference_with_q4_k_weights) { check_matmul_q8(SY_DTYPE_Q4_K); }
Test(cpu_matmul_q8, matches_the_reference_with_q5_k_weights) { check_matmul_q8(SY_DTYPE_Q5_K); }
Test(cpu_matmul_q8, matches_the_reference_with_q6_k_weights) { check_matmul_q8(SY_DTYPE_Q6_K); }

Test(cpu_matmul, keeps_f32_activations_when_asked)
{
    setenv("SWITCHYARD_CPU_ACTIVATIONS", "f32", 1);
    check_matmul(SY_DTYPE_Q4_1, SY_DTYPE_F32, 256, 1700, 1, 1, 1, 1, 1);
    check_matmul(SY_DTYPE_Q6_K, SY_DTYPE_F16, 256, 67, 9, 1, 1, 1, 1);
    unsetenv("SWITCHYARD_CPU_ACTIVATIONS");
}
