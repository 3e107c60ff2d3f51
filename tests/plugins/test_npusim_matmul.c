/* npusim's arithmetic: W8A8 matmul within its quantisation bound of the
 * float reference, bit-exact against an independent model of the
 * documented integer arithmetic, identical across its inner loops; the
 * f16 and int8 elementwise units.  Inputs are random from a fresh seed per
 * run, printed in every failure. */
#include <criterion/criterion.h>
#include <math.h>
#include <stdlib.h>
#include <string.h>

#include "test_npusim_util.h"

/* Checks |got| against the reference within the activation-quantisation
 * bound for activations of |qmax| levels; returns the largest error seen
 * relative to sum |w x| (to show that quantisation really happened). */
static double check_w8a8_bound(const nt_graph *ng, sy_dtype wt, int64_t k, int64_t n, int64_t m,
                               const float *got, const float *want, float qmax, uint64_t seed)
{
    float *w = malloc((size_t)(k * n) * sizeof *w);
    cr_assert(w != NULL);
    nt_to_f32(wt, ng->in0, k * n, w);
    const float *x = ng->in1;
    double worst_rel = 0;
    for (int64_t mm = 0; mm < m; mm++) {
        double xmax = 0;
        for (int64_t i = 0; i < k; i++)
            xmax = fmax(xmax, fabs(x[mm * k + i]));
        for (int64_t nn = 0; nn < n; nn++) {
            double s = 0, sw = 0;
            for (int64_t i = 0; i < k; i++) {
                s += fabs((double)w[nn * k + i] * x[mm * k + i]);
                sw += fabs(w[nn * k + i]);
            }
            const double bound = 0.5 * xmax / qmax * sw + 2e-6 * s + 1e-7;
            const int64_t o = mm * n + nn;
            const double err = fabs((double)got[o] - want[o]);
            cr_assert(err <= bound,
                      "%s K=%lld N=%lld M=%lld: out[%lld,%lld] = %.9g, reference %.9g, error %.3g "
                      "over the bound %.3g [seed 0x%016llx]",
                      sy_dtype_name(wt), (long long)k, (long long)n, (long long)m, (long long)nn,
                      (long long)mm, (double)got[o], (double)want[o], err, bound,
                      (unsigned long long)seed);
            if (s > 0)
                worst_rel = fmax(worst_rel, err / s);
        }
    }
    free(w);
    return worst_rel;
}

static void check_matmul_bound(nt_rt *t, sy_dtype wt, int64_t k, int64_t n, int64_t m,
                               float qmax)
{
    const uint64_t seed = nt_fresh_seed();
    uint64_t s = seed;
    nt_graph ng;
    nt_matmul_graph(&ng, &s, wt, k, n, m);
    float *want = nt_reference(&ng);
    sy_status st = nt_run(t, &ng, t->npu);
    cr_assert_eq(st, SY_OK, "%s; %s", sy_status_name(st), sy_runtime_last_error(t->rt));
    const double worst = check_w8a8_bound(&ng, wt, k, n, m, ng.out_data, want, qmax, seed);
    /* Real quantisation leaves errors far above float32 rounding. */
    if (qmax < 200)
        cr_assert(worst > 1e-5, "%s: the results are as exact as float arithmetic (worst %.3g "
                  "of sum |w x|); is the NPU quantising? [seed 0x%016llx]",
                  sy_dtype_name(wt), worst, (unsigned long long)seed);
    free(want);
    nt_graph_free(&ng);
}

Test(npusim_matmul, stays_within_the_w8a8_bound_of_the_float_reference_on_random_inputs)
{
    nt_rt t;
    nt_open(&t, NULL, false);
    const sy_dtype types[] = {SY_DTYPE_Q8_0, SY_DTYPE_Q4_0};
    for (int i = 0; i < 2; i++) {
        check_matmul_bound(&t, types[i], 64, 24, 1, 127.0f);
        check_matmul_bound(&t, types[i], 576, 96, 9, 127.0f);
        check_matmul_bound(&t, types[i], 1536, 40, 3, 127.0f);
        check_matmul_bound(&t, types[i], 288, 17, 2, 127.0f); /* 9 blocks: a partial group of 8 */
    }
    nt_close(&t);
}

Test(npusim_matmul, handles_asymmetric_and_five_bit_weights_when_the_file_allows_them)
{
    nt_rt t;
    nt_open(&t, "{ \"matmul\": { \"weight_dtypes\": [\"q4_1\", \"q5_0\", \"q5_1\"] } }", false);
    cr_assert_neq(t.npu, UINT32_MAX, "log:\n%s", t.log);
    const sy_dtype types[] = {SY_DTYPE_Q4_1, SY_DTYPE_Q5_0, SY_DTYPE_Q5_1};
    for (int i = 0; i < 3; i++) {
        check_matmul_bound(&t, types[i], 576, 48, 5, 127.0f);
        check_matmul_bound(&t, types[i], 64, 8, 1, 127.0f);
    }
    nt_close(&t);
}

Test(npusim_matmul, per_block_activation_scales_stay_within_the_per_row_bound)
{
    /* A block's scale never exceeds its row's, so the per-row bound holds. */
    nt_rt t;
    nt_open(&t, "{ \"matmul\": { \"activations\": { \"granularity\": \"per_block\" } } }",
            false);
    cr_assert_neq(t.npu, UINT32_MAX, "log:\n%s", t.log);
    check_matmul_bound(&t, SY_DTYPE_Q8_0, 576, 64, 4, 127.0f);
    check_matmul_bound(&t, SY_DTYPE_Q4_0, 288, 17, 3, 127.0f);
    nt_close(&t);
}

Test(npusim_matmul, int16_activations_shrink_the_error_to_their_own_bound)
{
    nt_rt t;
    nt_open(&t, "{ \"matmul\": { \"activations\": { \"dtype\": \"int16\" } } }", false);
    cr_assert_neq(t.npu, UINT32_MAX, "log:\n%s", t.log);
    check_matmul_bound(&t, SY_DTYPE_Q8_0, 576, 64, 4, 32767.0f);
    check_matmul_bound(&t, SY_DTYPE_Q4_0, 1536, 32, 2, 32767.0f);
    nt_close(&t);
}

/* ------------------------------------------------ the documented arithmetic */

/* Quantises one row of |k| activations to int8 as npusim documents
 * (npusim_kernels_matmul.c, step 1): q[i] and the zero point such that
 * x ~ scale * (q - zp).  Returns the scale. */
static float model_quantize(const float *xr, int64_t k, bool asymmetric, int32_t *q, int32_t *zp)
{
    *zp = 0;
    if (!asymmetric) {
        float amax = 0;
        for (int64_t i = 0; i < k; i++)
            amax = fabsf(xr[i]) > amax ? fabsf(xr[i]) : amax;
        const float inv = 127.0f / amax;
        for (int64_t i = 0; i < k; i++) {
            float v = nearbyintf(xr[i] * inv);
            q[i] = (int32_t)(v > 127 ? 127 : v < -127 ? -127 : v);
        }
        return amax / 127.0f;
    }
    float lo = 0, hi = 0;
    for (int64_t i = 0; i < k; i++) {
        lo = fminf(lo, xr[i]);
        hi = fmaxf(hi, xr[i]);
    }
    const double range = (double)hi - (double)lo;
    const float inv = (float)(255.0 / range);
    const float z = nearbyintf(-128.0f - lo * inv);
    cr_assert(z >= -128.0f && z <= 127.0f, "zero point %g", (double)z);
    *zp = (int32_t)z;
    for (int64_t i = 0; i < k; i++) {
        const float v = nearbyintf(xr[i] * inv) + z;
        q[i] = (int32_t)(v > 127 ? 127 : v < -128 ? -128 : v);
    }
    return (float)(range / 255.0);
}

/* The integer arithmetic npusim documents (npusim_kernels_matmul.c),
 * written again from the description for Q8_0, Q4_0 and Q4_1 weights and
 * int8 activations, symmetric or with zero points.  The zero point is
 * taken out by multiplying with (q - zp) directly, where npusim subtracts
 * zp times the weight block sum: both are exact integers. */
static void model_w8a8(sy_dtype wt, const unsigned char *wraw, const float *x, int64_t k,
                       int64_t n, int64_t m, bool asymmetric, float *out)
{
    const int64_t nb = k / 32;
    const size_t bsz = sy_dtype_type_size(wt);
    const bool has_min = wt == SY_DTYPE_Q4_1;
    uint16_t *dh = malloc((size_t)(2 * n * nb) * sizeof *dh);
    float *d = malloc((size_t)(2 * n * nb) * sizeof *d);
    cr_assert(dh && d);
    for (int64_t b = 0; b < n * nb; b++) {
        memcpy(&dh[b], wraw + b * bsz, 2);
        if (has_min)
            memcpy(&dh[n * nb + b], wraw + b * bsz + 2, 2);
    }
    nt_to_f32(SY_DTYPE_F16, dh, 2 * n * nb, d);
    const float *dmin = d + n * nb;
    int32_t q[4096];
    cr_assert(k <= 4096);
    for (int64_t mm = 0; mm < m; mm++) {
        int32_t zp;
        const float scale = model_quantize(x + mm * k, k, asymmetric, q, &zp);
        for (int64_t nn = 0; nn < n; nn++) {
            float acc[8] = {0};
            for (int64_t b = 0; b < nb; b++) {
                const unsigned char *blk = wraw + (nn * nb + b) * bsz;
                const unsigned char *qs = blk + (has_min ? 4 : 2);
                int64_t isum = 0, asum = 0;
                for (int j = 0; j < 32; j++) {
                    int32_t wq;
                    if (wt == SY_DTYPE_Q8_0)
                        wq = ((const int8_t *)qs)[j];
                    else
                        wq = (j < 16 ? (qs[j] & 15) : (qs[j - 16] >> 4)) - (has_min ? 0 : 8);
                    isum += (int64_t)wq * (q[b * 32 + j] - zp);
                    asum += q[b * 32 + j] - zp;
                }
                float v = d[nn * nb + b] * (float)isum;
                if (has_min)
                    v += dmin[nn * nb + b] * (float)asum;
                acc[b % 8] += v;
            }
            const float sum =
                ((acc[0] + acc[1]) + (acc[2] + acc[3])) + ((acc[4] + acc[5]) + (acc[6] + acc[7]));
            out[mm * n + nn] = sum * scale;
        }
    }
    free(dh);
    free(d);
}

static void check_against_model(const char *json, bool asymmetric)
{
    nt_rt t;
    nt_open(&t, json, false);
    cr_assert_neq(t.npu, UINT32_MAX, "log:\n%s", t.log);
    const uint64_t seed = nt_fresh_seed();
    uint64_t s = seed;
    const sy_dtype types[] = {SY_DTYPE_Q8_0, SY_DTYPE_Q4_0, SY_DTYPE_Q4_1};
    const int64_t shapes[][3] = {{64, 5, 1}, {576, 33, 4}, {800, 9, 2}};
    for (int i = 0; i < 3; i++) {
        for (int j = 0; j < 3; j++) {
            const int64_t k = shapes[j][0], n = shapes[j][1], m = shapes[j][2];
            nt_graph ng;
            nt_matmul_graph(&ng, &s, types[i], k, n, m);
            if (j == 2) {
                /* One row of non-negative values (as after a ReLU): the
                 * zero point sits at the bottom of the range. */
                float *x = ng.in1;
                for (int64_t e = 0; e < k; e++)
                    x[e] = fabsf(x[e]);
            }
            cr_assert_eq(nt_run(&t, &ng, t.npu), SY_OK, "%s", sy_runtime_last_error(t.rt));
            float *model = malloc((size_t)(n * m) * sizeof *model);
            cr_assert(model != NULL);
            model_w8a8(types[i], ng.in0, ng.in1, k, n, m, asymmetric, model);
            for (int64_t o = 0; o < n * m; o++)
                cr_assert(memcmp(&model[o], &ng.out_data[o], sizeof(float)) == 0,
                          "%s %s K=%lld: out[%lld] = %.9g, the model says %.9g [seed 0x%016llx]",
                          asymmetric ? "asymmetric" : "symmetric", sy_dtype_name(types[i]),
                          (long long)k, (long long)o, (double)ng.out_data[o], (double)model[o],
                          (unsigned long long)seed);
            free(model);
            nt_graph_free(&ng);
        }
    }
    nt_close(&t);
}

Test(npusim_matmul, matches_the_documented_integer_arithmetic_bit_for_bit)
{
    /* The defaults (asymmetric int8 per row) plus q4_1, whose block
     * minimum meets the activation zero point. */
    check_against_model("{ \"matmul\": { \"weight_dtypes\": [\"q8_0\", \"q4_0\", \"q4_1\"] } }",
                        true);
}

Test(npusim_matmul, matches_the_documented_arithmetic_with_symmetric_activations)
{
    check_against_model("{ \"matmul\": { \"weight_dtypes\": [\"q8_0\", \"q4_0\", \"q4_1\"],\n"
                        "  \"activations\": { \"scheme\": \"symmetric\" } } }",
                        false);
}

Test(npusim_matmul, asymmetric_activations_halve_the_step_on_one_sided_rows)
{
    /* Non-negative rows (after a ReLU, or SwiGLU's positive side) use all
     * 255 steps over [0, max]: half the symmetric bound holds. */
    nt_rt t;
    nt_open(&t, NULL, false);
    const uint64_t seed = nt_fresh_seed();
    uint64_t s = seed;
    nt_graph ng;
    const int64_t k = 576, n = 40, m = 3;
    nt_matmul_graph(&ng, &s, SY_DTYPE_Q8_0, k, n, m);
    float *x = ng.in1;
    for (int64_t e = 0; e < k * m; e++)
        x[e] = fabsf(x[e]);
    float *want = nt_reference(&ng);
    cr_assert_eq(nt_run(&t, &ng, t.npu), SY_OK, "%s", sy_runtime_last_error(t.rt));
    check_w8a8_bound(&ng, SY_DTYPE_Q8_0, k, n, m, ng.out_data, want, 255.0f, seed);
    free(want);
    nt_graph_free(&ng);
    nt_close(&t);
}

Test(npusim_matmul, widens_the_activations_of_matmuls_named_in_int16_nodes)
{
    /* The same graph with the node widened by name must come out closer to
     * the float reference, within the int16 bound. */
    nt_rt t;
    nt_open(&t, "{ \"matmul\": { \"activations\": { \"int16_nodes\": [\"m?\"] } } }", false);
    cr_assert_neq(t.npu, UINT32_MAX, "log:\n%s", t.log);
    sy_device_desc d;
    cr_assert_eq(sy_runtime_query_device(t.rt, t.npu, &d), SY_OK);
    cr_assert(strstr(d.topology, "W8A8 (A16 on 1 pattern)") != NULL, "%s", d.topology);
    check_matmul_bound(&t, SY_DTYPE_Q8_0, 576, 40, 3, 32767.0f); /* the node is named "mm" */
    nt_close(&t);
}

Test(npusim_matmul, gives_the_same_bits_with_the_portable_and_the_simd_loop)
{
    const uint64_t seed = nt_fresh_seed();
    float *results[2] = {NULL, NULL};
    int64_t n_out = 0;
    for (int pass = 0; pass < 2; pass++) {
        if (pass == 0)
            setenv("SWITCHYARD_NPUSIM_ISA", "scalar", 1);
        else
            unsetenv("SWITCHYARD_NPUSIM_ISA");
        nt_rt t;
        nt_open(&t, NULL, false);
        uint64_t s = seed;
        nt_graph ng;
        nt_matmul_graph(&ng, &s, SY_DTYPE_Q4_0, 1536, 70, 5);
        cr_assert_eq(nt_run(&t, &ng, t.npu), SY_OK);
        n_out = ng.n_out;
        results[pass] = malloc((size_t)n_out * sizeof(float));
        memcpy(results[pass], ng.out_data, (size_t)n_out * sizeof(float));
        nt_graph_free(&ng);
        nt_close(&t);
    }
    cr_assert(memcmp(results[0], results[1], (size_t)n_out * sizeof(float)) == 0,
              "the scalar and SIMD loops disagree [seed 0x%016llx]", (unsigned long long)seed);
    free(results[0]);
    free(results[1]);
}

Test(npusim_matmul, turns_a_row_holding_nan_into_nan_and_leaves_other_rows_alone)
{
    nt_rt t;
    nt_open(&t, NULL, false);
    uint64_t s = nt_fresh_seed();
    nt_graph ng;
    nt_matmul_graph(&ng, &s, SY_DTYPE_Q8_0, 64, 4, 3);
    float *x = ng.in1;
    x[64 + 5] = NAN;             /* row 1 */
    memset(x + 128, 0, 64 * 4);  /* row 2: all zeros */
    cr_assert_eq(nt_run(&t, &ng, t.npu), SY_OK);
    for (int n = 0; n < 4; n++) {
        cr_assert(isfinite(ng.out_data[n]), "row 0 out[%d] = %g", n, (double)ng.out_data[n]);
        cr_assert(isnan(ng.out_data[4 + n]), "row 1 out[%d] = %g", n, (double)ng.out_data[4 + n]);
        cr_assert_eq(ng.out_data[8 + n], 0.0f);
    }
    nt_graph_free(&ng);
    nt_close(&t);
}

/* ------------------------------------------------------------ elementwise */

Test(npusim_eltwise, adds_and_multiplies_in_binary16_with_broadcasting)
{
    nt_rt t;
    nt_open(&t, NULL, false);
    const uint64_t seed = nt_fresh_seed();
    uint64_t s = seed;
    const sy_op ops[] = {SY_OP_ADD, SY_OP_MUL};
    for (int i = 0; i < 2; i++) {
        nt_graph ng;
        nt_binary_graph(&ng, &s, ops[i], 48, 3, 48, 1);
        cr_assert_eq(nt_run(&t, &ng, t.npu), SY_OK, "%s", sy_runtime_last_error(t.rt));
        const float *a = ng.in0, *b = ng.in1;
        for (int64_t r = 0; r < 3; r++) {
            for (int64_t j = 0; j < 48; j++) {
                const float av = nt_round_f16(a[r * 48 + j]), bv = nt_round_f16(b[j]);
                const float want = nt_round_f16(ops[i] == SY_OP_ADD ? av + bv : av * bv);
                cr_assert_eq(ng.out_data[r * 48 + j], want,
                             "%s [%lld,%lld]: %.9g, want %.9g [seed 0x%016llx]",
                             sy_op_name(ops[i]), (long long)j, (long long)r,
                             (double)ng.out_data[r * 48 + j], (double)want,
                             (unsigned long long)seed);
            }
        }
        nt_graph_free(&ng);
    }
    nt_close(&t);
}

Test(npusim_eltwise, int8_precision_stays_within_half_a_step_of_each_row)
{
    nt_rt t;
    nt_open(&t, "{ \"elementwise\": { \"precision\": \"int8\" } }", false);
    cr_assert_neq(t.npu, UINT32_MAX, "log:\n%s", t.log);
    const uint64_t seed = nt_fresh_seed();
    uint64_t s = seed;
    const sy_op ops[] = {SY_OP_ADD, SY_OP_MUL};
    for (int i = 0; i < 2; i++) {
        nt_graph ng;
        nt_binary_graph(&ng, &s, ops[i], 64, 4, 64, 4);
        float *want = nt_reference(&ng);
        cr_assert_eq(nt_run(&t, &ng, t.npu), SY_OK);
        const float *a = ng.in0, *b = ng.in1;
        double worst = 0;
        for (int64_t r = 0; r < 4; r++) {
            /* A compare, not fmax: aarch64 gcc 12 -O2 stops with an internal
             * error vectorising the two fmax reductions of this loop. */
            double sa = 0, sb = 0;
            for (int j = 0; j < 64; j++) {
                const double va = fabs(a[r * 64 + j]) / 254.0, vb = fabs(b[r * 64 + j]) / 254.0;
                sa = va > sa ? va : sa;
                sb = vb > sb ? vb : sb;
            }
            for (int j = 0; j < 64; j++) {
                const int64_t o = r * 64 + j;
                const double bound = ops[i] == SY_OP_ADD
                                         ? sa + sb
                                         : fabs(a[o]) * sb + fabs(b[o]) * sa + sa * sb;
                const double err = fabs((double)ng.out_data[o] - want[o]);
                cr_assert(err <= bound * 1.0001 + 1e-6,
                          "%s [%d,%lld]: %.9g, reference %.9g, error %.3g over %.3g [seed "
                          "0x%016llx]",
                          sy_op_name(ops[i]), j, (long long)r, (double)ng.out_data[o],
                          (double)want[o], err, bound, (unsigned long long)seed);
                worst = fmax(worst, err);
            }
        }
        cr_assert(worst > 1e-5, "no quantisation error at all [seed 0x%016llx]",
                  (unsigned long long)seed);
        free(want);
        nt_graph_free(&ng);
    }
    nt_close(&t);
}

Test(npusim_eltwise, f32_precision_matches_the_reference_exactly)
{
    nt_rt t;
    nt_open(&t, "{ \"elementwise\": { \"precision\": \"f32\" } }", false);
    cr_assert_neq(t.npu, UINT32_MAX, "log:\n%s", t.log);
    uint64_t s = nt_fresh_seed();
    const sy_op ops[] = {SY_OP_ADD, SY_OP_MUL};
    for (int i = 0; i < 2; i++) {
        nt_graph ng;
        nt_binary_graph(&ng, &s, ops[i], 40, 3, 1, 3);
        float *want = nt_reference(&ng);
        cr_assert_eq(nt_run(&t, &ng, t.npu), SY_OK);
        cr_assert_arr_eq(ng.out_data, want, (size_t)ng.n_out * sizeof(float), "%s",
                         sy_op_name(ops[i]));
        free(want);
        nt_graph_free(&ng);
    }
    nt_close(&t);
}
