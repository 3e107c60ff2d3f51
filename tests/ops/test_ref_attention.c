/* Reference SOFTMAX (scale, causal and window masks) against hand values,
 * and ATTENTION (GQA, causal, window, F16 K/V, strided K/V views) against a
 * naive softmax(QK^T * scale) V computed here. */
#include "ops_test_util.h"

#define EPS 1e-6f

Test(ref_softmax, normalises_a_scaled_row)
{
    float x[4] = {1, 2, 3, 4};
    sy_tensor t = tu_tensor(SY_DTYPE_F32, 4, 1, 1, 1, x);
    sy_tensor out, *in[1] = {&t};
    const sy_op_params p = {.f = {0.5f}};
    cr_assert_eq(tu_run(SY_OP_SOFTMAX, in, 1, &p, &out), SY_OK);
    const double s = exp(0.5) + exp(1.0) + exp(1.5) + exp(2.0);
    const float *y = out.data;
    cr_assert_float_eq(y[0], (float)(exp(0.5) / s), EPS);
    cr_assert_float_eq(y[1], (float)(exp(1.0) / s), EPS);
    cr_assert_float_eq(y[3], (float)(exp(2.0) / s), EPS);
    cr_assert_float_eq(y[0] + y[1] + y[2] + y[3], 1.0f, EPS);
    free(out.data);
}

Test(ref_softmax, causal_mask_hides_keys_after_n_past_plus_row)
{
    float x[8] = {1, 2, 3, 4, 1, 2, 3, 4}; /* [4,2]: rows m=0,1 */
    sy_tensor t = tu_tensor(SY_DTYPE_F32, 4, 2, 1, 1, x);
    sy_tensor out, *in[1] = {&t};
    const sy_op_params p = {.i = {1, 1, 0}, .f = {1.0f}};
    cr_assert_eq(tu_run(SY_OP_SOFTMAX, in, 1, &p, &out), SY_OK);
    const float *y = out.data;
    /* row 0 at position 1 sees keys 0..1; row 1 at position 2 sees 0..2 */
    const double s0 = exp(1.0) + exp(2.0), s1 = exp(1.0) + exp(2.0) + exp(3.0);
    cr_assert_float_eq(y[0], (float)(exp(1.0) / s0), EPS);
    cr_assert_float_eq(y[1], (float)(exp(2.0) / s0), EPS);
    cr_assert_eq(y[2], 0.0f);
    cr_assert_eq(y[3], 0.0f);
    cr_assert_float_eq(y[4], (float)(exp(1.0) / s1), EPS);
    cr_assert_float_eq(y[6], (float)(exp(3.0) / s1), EPS);
    cr_assert_eq(y[7], 0.0f);
    free(out.data);
}

Test(ref_softmax, window_mask_hides_keys_window_or_more_behind)
{
    float x[8] = {1, 2, 3, 4, 1, 2, 3, 4};
    sy_tensor t = tu_tensor(SY_DTYPE_F32, 4, 2, 1, 1, x);
    sy_tensor out, *in[1] = {&t};
    const sy_op_params p = {.i = {1, 1, 2}, .f = {1.0f}};
    cr_assert_eq(tu_run(SY_OP_SOFTMAX, in, 1, &p, &out), SY_OK);
    const float *y = out.data;
    /* row 0 at position 1: keys 0 (distance 1) and 1 live.
     * row 1 at position 2: key 0 at distance 2 >= window is masked; 1, 2 live. */
    const double s0 = exp(1.0) + exp(2.0), s1 = exp(2.0) + exp(3.0);
    cr_assert_float_eq(y[0], (float)(exp(1.0) / s0), EPS);
    cr_assert_eq(y[4], 0.0f);
    cr_assert_float_eq(y[5], (float)(exp(2.0) / s1), EPS);
    cr_assert_float_eq(y[6], (float)(exp(3.0) / s1), EPS);
    cr_assert_eq(y[7], 0.0f);
    free(out.data);
}

Test(ref_softmax, fully_masked_row_gives_zeros_not_nan)
{
    float x[4] = {1, 2, 3, 4};
    sy_tensor t = tu_tensor(SY_DTYPE_F32, 4, 1, 1, 1, x);
    sy_tensor out, *in[1] = {&t};
    const sy_op_params p = {.i = {0, 10, 1}, .f = {1.0f}};
    cr_assert_eq(tu_run(SY_OP_SOFTMAX, in, 1, &p, &out), SY_OK);
    for (int i = 0; i < 4; i++)
        cr_assert_eq(((float *)out.data)[i], 0.0f);
    free(out.data);
}

/* Naive attention over F32 copies of Q [D,Hq,T], K and V [D,Hkv,S] (dense),
 * the mask rule written out afresh. */
static void naive_attention(const float *q, const float *k, const float *v, float *o, int D, int Hq,
                            int Hkv, int T, int S, double scale, int n_past, int window)
{
    for (int t = 0; t < T; t++) {
        for (int h = 0; h < Hq; h++) {
            const int hk = h / (Hq / Hkv);
            double sc[64], mx = -INFINITY, sum = 0;
            for (int s = 0; s < S; s++) {
                const int qp = n_past + t;
                const bool masked = s > qp || (window > 0 && qp - s >= window);
                if (masked) {
                    sc[s] = -INFINITY;
                    continue;
                }
                double d = 0;
                for (int i = 0; i < D; i++)
                    d += (double)q[(t * Hq + h) * D + i] * k[(s * Hkv + hk) * D + i];
                sc[s] = d * scale;
                mx = fmax(mx, sc[s]);
            }
            for (int s = 0; s < S; s++) {
                sc[s] = sc[s] == -INFINITY ? 0 : exp(sc[s] - mx);
                sum += sc[s];
            }
            for (int i = 0; i < D; i++) {
                double acc = 0;
                for (int s = 0; s < S; s++)
                    acc += sc[s] / sum * v[(s * Hkv + hk) * D + i];
                o[(t * Hq + h) * D + i] = (float)acc;
            }
        }
    }
}

static void check_attention(sy_dtype kv_type, int window)
{
    enum { D = 8, HQ = 4, HKV = 2, T = 3, S = 6, NPAST = 3 };
    tu_rng rng = tu_rng_fresh();
    float q[D * HQ * T], kf[D * HKV * S], vf[D * HKV * S], want[D * HQ * T];
    uint8_t kb[sizeof kf], vb[sizeof vf];
    tu_fill(&rng, q, D * HQ * T, -1, 1);
    tu_fill(&rng, kf, D * HKV * S, -1, 1);
    tu_fill(&rng, vf, D * HKV * S, -1, 1);
    /* Round K and V to the stored type so the naive side sees the same values. */
    cr_assert_eq(sy__quantize_row(kv_type, kf, kb, D * HKV * S), SY_OK);
    cr_assert_eq(sy__quantize_row(kv_type, vf, vb, D * HKV * S), SY_OK);
    cr_assert_eq(sy__dequantize_row(kv_type, kb, kf, D * HKV * S), SY_OK);
    cr_assert_eq(sy__dequantize_row(kv_type, vb, vf, D * HKV * S), SY_OK);

    sy_tensor tq = tu_tensor(SY_DTYPE_F32, D, HQ, T, 1, q);
    sy_tensor tk = tu_tensor(kv_type, D, HKV, S, 1, kb);
    sy_tensor tv = tu_tensor(kv_type, D, HKV, S, 1, vb);
    sy_tensor out, *in[3] = {&tq, &tk, &tv};
    const float scale = 1.0f / sqrtf((float)D);
    const sy_op_params p = {.i = {NPAST, window}, .f = {scale}};
    cr_assert_eq(tu_run(SY_OP_ATTENTION, in, 3, &p, &out), SY_OK);
    naive_attention(q, kf, vf, want, D, HQ, HKV, T, S, scale, NPAST, window);
    for (int i = 0; i < D * HQ * T; i++)
        cr_assert_float_eq(((float *)out.data)[i], want[i], 1e-6f, "%s window %d seed %llu: out[%d] = %g, want %g",
                           sy_dtype_name(kv_type), window, (unsigned long long)rng.seed, i,
                           (double)((float *)out.data)[i], (double)want[i]);
    free(out.data);
}

Test(ref_attention, gqa_with_causal_mask_matches_naive_softmax_qk_v)
{
    check_attention(SY_DTYPE_F32, 0);
}

Test(ref_attention, f16_kv_matches_naive_softmax_qk_v)
{
    check_attention(SY_DTYPE_F16, 0);
}

Test(ref_attention, sliding_window_matches_naive_softmax_qk_v)
{
    check_attention(SY_DTYPE_F32, 2);
}

/* Quantised caches: the kernel must see exactly the dequantised values, so
 * the naive side reads the same blocks through sy__dequantize_row. */
static void check_attention_quantized(sy_dtype kv_type, int window)
{
    enum { D = 64, HQ = 4, HKV = 2, T = 3, S = 9, NPAST = 6 };
    tu_rng rng = tu_rng_fresh();
    float q[D * HQ * T], kf[D * HKV * S], vf[D * HKV * S], want[D * HQ * T];
    uint8_t kb[sizeof kf], vb[sizeof vf];
    tu_fill(&rng, q, D * HQ * T, -1, 1);
    tu_fill(&rng, kf, D * HKV * S, -1, 1);
    tu_fill(&rng, vf, D * HKV * S, -1, 1);
    cr_assert_eq(sy__quantize_row(kv_type, kf, kb, D * HKV * S), SY_OK);
    cr_assert_eq(sy__quantize_row(kv_type, vf, vb, D * HKV * S), SY_OK);
    cr_assert_eq(sy__dequantize_row(kv_type, kb, kf, D * HKV * S), SY_OK);
    cr_assert_eq(sy__dequantize_row(kv_type, vb, vf, D * HKV * S), SY_OK);

    sy_tensor tq = tu_tensor(SY_DTYPE_F32, D, HQ, T, 1, q);
    sy_tensor tk = tu_tensor(kv_type, D, HKV, S, 1, kb);
    sy_tensor tv = tu_tensor(kv_type, D, HKV, S, 1, vb);
    sy_tensor out, *in[3] = {&tq, &tk, &tv};
    const float scale = 1.0f / sqrtf((float)D);
    const sy_op_params p = {.i = {NPAST, window}, .f = {scale}};
    cr_assert_eq(tu_run(SY_OP_ATTENTION, in, 3, &p, &out), SY_OK);
    naive_attention(q, kf, vf, want, D, HQ, HKV, T, S, scale, NPAST, window);
    for (int i = 0; i < D * HQ * T; i++)
        cr_assert_float_eq(((float *)out.data)[i], want[i], 1e-6f, "%s window %d seed %llu: out[%d] = %g, want %g",
                           sy_dtype_name(kv_type), window, (unsigned long long)rng.seed, i,
                           (double)((float *)out.data)[i], (double)want[i]);
    free(out.data);
}

Test(ref_attention, q8_0_kv_reads_the_dequantized_cache)
{
    check_attention_quantized(SY_DTYPE_Q8_0, 0);
    check_attention_quantized(SY_DTYPE_Q8_0, 4);
}

Test(ref_attention, q4_0_kv_reads_the_dequantized_cache)
{
    check_attention_quantized(SY_DTYPE_Q4_0, 0);
    check_attention_quantized(SY_DTYPE_Q4_0, 4);
}

Test(ref_attention, single_key_returns_its_value_exactly)
{
    /* One visible key: the softmax weight is exactly 1 whatever the score. */
    float q[2] = {3, -1}, k[2] = {0.5f, 2}, v[2] = {7, -9};
    sy_tensor tq = tu_tensor(SY_DTYPE_F32, 2, 1, 1, 1, q);
    sy_tensor tk = tu_tensor(SY_DTYPE_F32, 2, 1, 1, 1, k);
    sy_tensor tv = tu_tensor(SY_DTYPE_F32, 2, 1, 1, 1, v);
    sy_tensor out, *in[3] = {&tq, &tk, &tv};
    const sy_op_params p = {.f = {1.0f}};
    cr_assert_eq(tu_run(SY_OP_ATTENTION, in, 3, &p, &out), SY_OK);
    cr_assert_eq(((float *)out.data)[0], 7.0f);
    cr_assert_eq(((float *)out.data)[1], -9.0f);
    free(out.data);
}

Test(ref_attention, ignores_masked_cache_rows_even_when_they_hold_nan)
{
    /* Keys 2.. are past the query position: a stale cache may hold
     * anything there, and it must not leak into the result. */
    float q[2] = {1, 0}, k[6] = {1, 0, 0, 1, NAN, NAN}, v[6] = {1, 2, 3, 4, NAN, INFINITY};
    sy_tensor tq = tu_tensor(SY_DTYPE_F32, 2, 1, 1, 1, q);
    sy_tensor tk = tu_tensor(SY_DTYPE_F32, 2, 1, 3, 1, k);
    sy_tensor tv = tu_tensor(SY_DTYPE_F32, 2, 1, 3, 1, v);
    sy_tensor out, *in[3] = {&tq, &tk, &tv};
    const sy_op_params p = {.i = {1, 0}, .f = {1.0f}};
    cr_assert_eq(tu_run(SY_OP_ATTENTION, in, 3, &p, &out), SY_OK);
    const double e = exp(1.0), w0 = e / (e + 1), w1 = 1 / (e + 1);
    cr_assert_float_eq(((float *)out.data)[0], (float)(w0 * 1 + w1 * 3), EPS);
    cr_assert_float_eq(((float *)out.data)[1], (float)(w0 * 2 + w1 * 4), EPS);
    free(out.data);
}

/* n_past from the run-time input (in3): the same result as the params'
 * n_past on the rows up to the last query, whatever the rows after them
 * hold (NaN here); an n_past past the cache fails. */
Test(ref_attention, takes_n_past_from_the_run_time_input)
{
    enum { D = 8, HQ = 4, HKV = 2, T = 2, S = 9 };
    tu_rng rng = tu_rng_fresh();
    float q[D * HQ * T], k[D * HKV * S], v[D * HKV * S];
    tu_fill(&rng, q, D * HQ * T, -1, 1);
    tu_fill(&rng, k, D * HKV * S, -1, 1);
    tu_fill(&rng, v, D * HKV * S, -1, 1);
    for (int32_t n_past = 0; n_past + T <= S; n_past++) {
        float kn[D * HKV * S], vn[D * HKV * S];
        memcpy(kn, k, sizeof k);
        memcpy(vn, v, sizeof v);
        for (int i = (n_past + T) * D * HKV; i < D * HKV * S; i++)
            kn[i] = vn[i] = NAN;
        for (int window = 0; window < 3; window += 2) {
            sy_tensor tq = tu_tensor(SY_DTYPE_F32, D, HQ, T, 1, q);
            sy_tensor tk = tu_tensor(SY_DTYPE_F32, D, HKV, n_past + T, 1, k);
            sy_tensor tv = tu_tensor(SY_DTYPE_F32, D, HKV, n_past + T, 1, v);
            sy_tensor want, *in3[3] = {&tq, &tk, &tv};
            const sy_op_params p = {.i = {n_past, window}, .f = {0.3f}};
            cr_assert_eq(tu_run(SY_OP_ATTENTION, in3, 3, &p, &want), SY_OK);
            sy_tensor tkn = tu_tensor(SY_DTYPE_F32, D, HKV, S, 1, kn);
            sy_tensor tvn = tu_tensor(SY_DTYPE_F32, D, HKV, S, 1, vn);
            sy_tensor tn = tu_tensor(SY_DTYPE_I32, 1, 1, 1, 1, &n_past);
            sy_tensor got, *in4[4] = {&tq, &tkn, &tvn, &tn};
            const sy_op_params pr = {.i = {0, window}, .f = {0.3f}};
            cr_assert_eq(tu_run(SY_OP_ATTENTION, in4, 4, &pr, &got), SY_OK);
            cr_assert(memcmp(got.data, want.data, sizeof(float) * D * HQ * T) == 0,
                      "n_past %d window %d seed %llu", n_past, window,
                      (unsigned long long)rng.seed);
            free(want.data);
            free(got.data);
        }
    }
    int32_t past_end = S - T + 1;
    sy_tensor tq = tu_tensor(SY_DTYPE_F32, D, HQ, T, 1, q);
    sy_tensor tk = tu_tensor(SY_DTYPE_F32, D, HKV, S, 1, k);
    sy_tensor tv = tu_tensor(SY_DTYPE_F32, D, HKV, S, 1, v);
    sy_tensor tn = tu_tensor(SY_DTYPE_I32, 1, 1, 1, 1, &past_end);
    sy_tensor out, *in4[4] = {&tq, &tk, &tv, &tn};
    const sy_op_params p = {.i = {0, 0}, .f = {0.3f}};
    cr_assert_eq(tu_run(SY_OP_ATTENTION, in4, 4, &p, &out), SY_E_INVALID_ARG);
    free(out.data);
}

Test(ref_attention, reads_k_and_v_through_permuted_views)
{
    /* K stored as [D=2, S=3, Hkv=2] and permuted to [D, Hkv, S]. */
    enum { D = 2, S = 3, H = 2 };
    float ks[D * S * H], vs[D * S * H], kd[D * H * S], vd[D * H * S];
    for (int i = 0; i < D * S * H; i++) {
        ks[i] = (float)((i * 7) % 5) * 0.25f - 0.5f;
        vs[i] = (float)i;
    }
    /* dense [D,H,S] copies for the naive side: (i, h, s) <- stored (i, s, h) */
    for (int s = 0; s < S; s++)
        for (int h = 0; h < H; h++)
            for (int i = 0; i < D; i++) {
                kd[(s * H + h) * D + i] = ks[(h * S + s) * D + i];
                vd[(s * H + h) * D + i] = vs[(h * S + s) * D + i];
            }
    sy_tensor kbase = tu_tensor(SY_DTYPE_F32, D, S, H, 1, ks);
    sy_tensor vbase = tu_tensor(SY_DTYPE_F32, D, S, H, 1, vs);
    const sy_op_params perm = {.i = {0, 2, 1, 3}};
    sy_tensor kv, vv, *pin[1] = {&kbase};
    cr_assert_eq(sy_op_infer(SY_OP_PERMUTE, pin, 1, &perm, &kv, NULL, 0), SY_OK);
    pin[0] = &vbase;
    cr_assert_eq(sy_op_infer(SY_OP_PERMUTE, pin, 1, &perm, &vv, NULL, 0), SY_OK);
    kv.data = ks;
    vv.data = vs;

    float q[D * H * 2] = {1, 0, 0, 1, 0.5f, 0.5f, -1, 1};
    sy_tensor tq = tu_tensor(SY_DTYPE_F32, D, H, 2, 1, q);
    sy_tensor out, *in[3] = {&tq, &kv, &vv};
    const sy_op_params p = {.i = {1, 0}, .f = {1.0f}};
    cr_assert_eq(tu_run(SY_OP_ATTENTION, in, 3, &p, &out), SY_OK);
    float want[D * H * 2];
    naive_attention(q, kd, vd, want, D, H, H, 2, S, 1.0, 1, 0);
    for (int i = 0; i < D * H * 2; i++)
        cr_assert_float_eq(((float *)out.data)[i], want[i], 1e-6f, "out[%d]", i);
    free(out.data);
}
