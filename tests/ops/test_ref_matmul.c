/* Reference MATMUL: a hand-computed product, then every weight dtype and
 * both activation dtypes against dequantize-then-naive-dot. */
#include "ops_test_util.h"

Test(ref_matmul, multiplies_a_hand_built_f32_product)
{
    float w[6] = {1, 2, 3, 4, 5, 6}; /* [K=2,N=3]: rows (1,2) (3,4) (5,6) */
    float x[4] = {1, 1, 2, -1};      /* [K=2,M=2]: columns (1,1) (2,-1) */
    sy_tensor tw = tu_tensor(SY_DTYPE_F32, 2, 3, 1, 1, w);
    sy_tensor tx = tu_tensor(SY_DTYPE_F32, 2, 2, 1, 1, x);
    sy_tensor out, *in[2] = {&tw, &tx};
    cr_assert_eq(tu_run(SY_OP_MATMUL, in, 2, NULL, &out), SY_OK);
    const float want[6] = {3, 7, 11, 0, 2, 4}; /* out[n + 3m] */
    for (int i = 0; i < 6; i++)
        cr_assert_eq(((float *)out.data)[i], want[i], "out[%d] = %g", i, (double)((float *)out.data)[i]);
    free(out.data);
}

/* Builds a [K,N,b2,1] weight of dtype |t|: quantized from random floats
 * where a quantizer exists, else random blocks (K-quants, Q5_0, Q5_1) with
 * sane scales. */
static void *make_weight(sy_dtype t, int64_t K, int64_t rows, tu_rng *rng)
{
    const uint64_t row_bytes = (uint64_t)K / sy_dtype_block_size(t) * sy_dtype_type_size(t);
    uint8_t *buf = malloc(row_bytes * (uint64_t)rows);
    cr_assert_not_null(buf);
    if (t == SY_DTYPE_Q4_K || t == SY_DTYPE_Q5_K || t == SY_DTYPE_Q6_K || t == SY_DTYPE_Q5_0 ||
        t == SY_DTYPE_Q5_1) {
        for (uint64_t i = 0; i < row_bytes * (uint64_t)rows; i++)
            buf[i] = (uint8_t)tu_next(rng);
        const uint32_t ts = sy_dtype_type_size(t);
        for (uint64_t b = 0; b < row_bytes * (uint64_t)rows / ts; b++) {
            uint8_t *blk = buf + b * ts;
            /* Random bytes would make d and dmin NaN now and then. */
            uint16_t d = tu_h(tu_uniform(rng, 0.001f, 0.02f));
            uint16_t dmin = tu_h(tu_uniform(rng, 0.0f, 0.01f));
            uint8_t *dp = t == SY_DTYPE_Q6_K ? blk + 208 : blk;
            dp[0] = (uint8_t)d;
            dp[1] = (uint8_t)(d >> 8);
            if (t != SY_DTYPE_Q6_K && t != SY_DTYPE_Q5_0) {
                blk[2] = (uint8_t)dmin;
                blk[3] = (uint8_t)(dmin >> 8);
            }
        }
        return buf;
    }
    float *src = malloc((size_t)(K * rows) * sizeof *src);
    cr_assert_not_null(src);
    tu_fill(rng, src, K * rows, -2.0f, 2.0f);
    if (t == SY_DTYPE_I32)
        for (int64_t i = 0; i < K * rows; i++)
            src[i] = roundf(src[i] * 10.0f);
    cr_assert_eq(sy__quantize_row(t, src, buf, K * rows), SY_OK);
    free(src);
    return buf;
}

/* out[n,m,i2] against a double dot of the dequantized weight row and the
 * (F16-rounded when |xt| is F16) input column. */
static void check_matmul(sy_dtype wt, sy_dtype xt, int64_t K, int64_t N, int64_t M, int64_t b2,
                         int64_t c2)
{
    tu_rng rng = tu_rng_fresh();
    void *w = make_weight(wt, K, N * b2, &rng);
    float *xf = malloc((size_t)(K * M * c2) * sizeof *xf);
    void *x = malloc((size_t)(K * M * c2) * 4);
    cr_assert(xf && x);
    tu_fill(&rng, xf, K * M * c2, -1.0f, 1.0f);
    cr_assert_eq(sy__quantize_row(xt, xf, x, K * M * c2), SY_OK);
    cr_assert_eq(sy__dequantize_row(xt, x, xf, K * M * c2), SY_OK); /* values as stored */

    sy_tensor tw = tu_tensor(wt, K, N, b2, 1, w);
    sy_tensor tx = tu_tensor(xt, K, M, c2, 1, x);
    sy_tensor out, *in[2] = {&tw, &tx};
    cr_assert_eq(tu_run(SY_OP_MATMUL, in, 2, NULL, &out), SY_OK, "%s x %s", sy_dtype_name(wt),
                 sy_dtype_name(xt));

    float *wrow = malloc((size_t)K * sizeof *wrow);
    cr_assert_not_null(wrow);
    for (int64_t i2 = 0; i2 < c2; i2++) {
        const int64_t wb = i2 / (c2 / b2);
        for (int64_t n = 0; n < N; n++) {
            const uint8_t *wr = (const uint8_t *)w + (uint64_t)(wb * N + n) * tw.nb[1];
            cr_assert_eq(sy__dequantize_row(wt, wr, wrow, K), SY_OK);
            for (int64_t m = 0; m < M; m++) {
                double want = 0, mag = 0;
                for (int64_t k = 0; k < K; k++) {
                    const double p = (double)wrow[k] * xf[(i2 * M + m) * K + k];
                    want += p;
                    mag += fabs(p);
                }
                const float got = tu_f32_at(&out, n, m, i2, 0);
                cr_assert(fabs(got - want) <= 1e-6 * mag + 1e-30,
                          "%s x %s seed %llu: out[%lld,%lld,%lld] = %.9g, want %.9g", sy_dtype_name(wt),
                          sy_dtype_name(xt), (unsigned long long)rng.seed, (long long)n, (long long)m,
                          (long long)i2, (double)got, want);
            }
        }
    }
    free(wrow);
    free(out.data);
    free(w);
    free(x);
    free(xf);
}

Test(ref_matmul, f32_weights_match_a_naive_dot)
{
    check_matmul(SY_DTYPE_F32, SY_DTYPE_F32, 64, 5, 3, 1, 1);
}

Test(ref_matmul, f16_weights_match_a_naive_dot)
{
    check_matmul(SY_DTYPE_F16, SY_DTYPE_F32, 64, 5, 3, 1, 1);
}

Test(ref_matmul, bf16_weights_match_a_naive_dot)
{
    check_matmul(SY_DTYPE_BF16, SY_DTYPE_F16, 64, 5, 3, 1, 1);
}

Test(ref_matmul, i32_weights_match_a_naive_dot)
{
    check_matmul(SY_DTYPE_I32, SY_DTYPE_F32, 16, 3, 2, 1, 1);
}

Test(ref_matmul, q8_0_weights_match_dequantize_then_dot)
{
    check_matmul(SY_DTYPE_Q8_0, SY_DTYPE_F32, 96, 7, 4, 1, 1);
}

Test(ref_matmul, q4_0_weights_match_dequantize_then_dot)
{
    check_matmul(SY_DTYPE_Q4_0, SY_DTYPE_F16, 96, 7, 4, 1, 1);
}

Test(ref_matmul, q4_1_weights_match_dequantize_then_dot)
{
    check_matmul(SY_DTYPE_Q4_1, SY_DTYPE_F32, 64, 7, 4, 1, 1);
}

Test(ref_matmul, q4_k_weights_match_dequantize_then_dot)
{
    check_matmul(SY_DTYPE_Q4_K, SY_DTYPE_F32, 512, 3, 2, 1, 1);
}

Test(ref_matmul, q5_k_weights_match_dequantize_then_dot)
{
    check_matmul(SY_DTYPE_Q5_K, SY_DTYPE_F16, 256, 3, 2, 1, 1);
}

Test(ref_matmul, q6_k_weights_match_dequantize_then_dot)
{
    check_matmul(SY_DTYPE_Q6_K, SY_DTYPE_F32, 256, 3, 2, 1, 1);
}

Test(ref_matmul, q5_0_weights_match_dequantize_then_dot)
{
    check_matmul(SY_DTYPE_Q5_0, SY_DTYPE_F32, 64, 5, 3, 1, 1);
}

Test(ref_matmul, q5_1_weights_match_dequantize_then_dot)
{
    check_matmul(SY_DTYPE_Q5_1, SY_DTYPE_F16, 96, 5, 3, 1, 1);
}

Test(ref_matmul, broadcasts_weight_batches_over_input_batches)
{
    /* Input batches 0,1 read weight batch 0; 2,3 read weight batch 1. */
    check_matmul(SY_DTYPE_F32, SY_DTYPE_F32, 32, 3, 2, 2, 4);
    check_matmul(SY_DTYPE_Q8_0, SY_DTYPE_F32, 32, 3, 2, 1, 3);
}

Test(ref_matmul, reads_a_strided_input_view)
{
    /* X^T stored as [M=3, K=4]; its transposed view is X [K=4, M=3] with
     * nb0 = 12 (elements of a column are a row apart). */
    float xt[12] = {1, 2, 3, 4, 5, 6, 7, 8, 9, 10, 11, 12};
    sy_tensor base = tu_tensor(SY_DTYPE_F32, 3, 4, 1, 1, xt);
    sy_tensor *tin[1] = {&base};
    sy_tensor x;
    memset(&x, 0, sizeof x);
    cr_assert_eq(sy_op_infer(SY_OP_TRANSPOSE, tin, 1, NULL, &x, NULL, 0), SY_OK);
    x.data = xt;
    float w[4] = {1, 0, -1, 2}; /* [K=4, N=1] */
    sy_tensor tw = tu_tensor(SY_DTYPE_F32, 4, 1, 1, 1, w);
    sy_tensor out, *in[2] = {&tw, &x};
    cr_assert_eq(tu_run(SY_OP_MATMUL, in, 2, NULL, &out), SY_OK);
    /* column m of X = (xt[m], xt[3+m], xt[6+m], xt[9+m]) */
    for (int m = 0; m < 3; m++) {
        const float want = xt[m] - xt[6 + m] + 2 * xt[9 + m];
        cr_assert_eq(((float *)out.data)[m], want, "out[%d] = %g, want %g", m,
                     (double)((float *)out.data)[m], (double)want);
    }
    free(out.data);
}
