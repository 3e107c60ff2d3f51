/* AVX2 + FMA + F16C inner kernels and the three x86 tables built on them
 * (avx2, avxvnni, avx512: they differ only in the quantized-matmul kernels
 * of cpu_kernels_qdot_*.c).  Every function carries its own target
 * attribute, so this file builds with the project's default flags and runs
 * only where cpu_isa_select() found the features.  The tables' row
 * dequantizers live in cpu_kernels_dequant_avx2.c. */
#include "cpu_isa.h"

#if defined(__x86_64__) || defined(__i386__)

#include <math.h>
#include <string.h>

#include "cpu_avx2.h"
#include "cpu_qdot.h"
#include "quants_internal.h"

CPU_AVX2 static float cpu_avx2_dot_f32(const float *a, const float *b, int64_t n)
{
    __m256 acc0 = _mm256_setzero_ps(), acc1 = _mm256_setzero_ps();
    __m256 acc2 = _mm256_setzero_ps(), acc3 = _mm256_setzero_ps();
    int64_t i = 0;
    for (; i + 32 <= n; i += 32) {
        acc0 = _mm256_fmadd_ps(_mm256_loadu_ps(a + i), _mm256_loadu_ps(b + i), acc0);
        acc1 = _mm256_fmadd_ps(_mm256_loadu_ps(a + i + 8), _mm256_loadu_ps(b + i + 8), acc1);
        acc2 = _mm256_fmadd_ps(_mm256_loadu_ps(a + i + 16), _mm256_loadu_ps(b + i + 16), acc2);
        acc3 = _mm256_fmadd_ps(_mm256_loadu_ps(a + i + 24), _mm256_loadu_ps(b + i + 24), acc3);
    }
    for (; i + 8 <= n; i += 8)
        acc0 = _mm256_fmadd_ps(_mm256_loadu_ps(a + i), _mm256_loadu_ps(b + i), acc0);
    float sum = cpu_avx2_hsum(_mm256_add_ps(_mm256_add_ps(acc0, acc1), _mm256_add_ps(acc2, acc3)));
    for (; i < n; i++)
        sum += a[i] * b[i];
    return sum;
}

CPU_AVX2 static float cpu_avx2_dot_f16(const uint16_t *a, const float *b, int64_t n)
{
    __m256 acc0 = _mm256_setzero_ps(), acc1 = _mm256_setzero_ps();
    int64_t i = 0;
    for (; i + 16 <= n; i += 16) {
        acc0 = _mm256_fmadd_ps(cpu_avx2_load_f16(a + i), _mm256_loadu_ps(b + i), acc0);
        acc1 = _mm256_fmadd_ps(cpu_avx2_load_f16(a + i + 8), _mm256_loadu_ps(b + i + 8), acc1);
    }
    for (; i + 8 <= n; i += 8)
        acc0 = _mm256_fmadd_ps(cpu_avx2_load_f16(a + i), _mm256_loadu_ps(b + i), acc0);
    float sum = cpu_avx2_hsum(_mm256_add_ps(acc0, acc1));
    for (; i < n; i++)
        sum += cpu_avx2_h2f(a[i]) * b[i];
    return sum;
}

CPU_AVX2 static void cpu_avx2_axpy_f32(float *y, float a, const float *x, int64_t n)
{
    __m256 va = _mm256_set1_ps(a);
    int64_t i = 0;
    for (; i + 8 <= n; i += 8)
        _mm256_storeu_ps(y + i, _mm256_fmadd_ps(va, _mm256_loadu_ps(x + i), _mm256_loadu_ps(y + i)));
    for (; i < n; i++)
        y[i] += a * x[i];
}

CPU_AVX2 static void cpu_avx2_axpy_f16(float *y, float a, const uint16_t *x, int64_t n)
{
    __m256 va = _mm256_set1_ps(a);
    int64_t i = 0;
    for (; i + 8 <= n; i += 8)
        _mm256_storeu_ps(y + i, _mm256_fmadd_ps(va, cpu_avx2_load_f16(x + i), _mm256_loadu_ps(y + i)));
    for (; i < n; i++)
        y[i] += a * cpu_avx2_h2f(x[i]);
}

CPU_AVX2 static void cpu_avx2_add_f32(float *y, const float *a, const float *b, int64_t n)
{
    int64_t i = 0;
    for (; i + 8 <= n; i += 8)
        _mm256_storeu_ps(y + i, _mm256_add_ps(_mm256_loadu_ps(a + i), _mm256_loadu_ps(b + i)));
    for (; i < n; i++)
        y[i] = a[i] + b[i];
}

CPU_AVX2 static void cpu_avx2_mul_f32(float *y, const float *a, const float *b, int64_t n)
{
    int64_t i = 0;
    for (; i + 8 <= n; i += 8)
        _mm256_storeu_ps(y + i, _mm256_mul_ps(_mm256_loadu_ps(a + i), _mm256_loadu_ps(b + i)));
    for (; i < n; i++)
        y[i] = a[i] * b[i];
}

CPU_AVX2 static void cpu_avx2_scale_f32(float *y, const float *a, float s, float bias, int64_t n)
{
    const __m256 vs = _mm256_set1_ps(s);
    int64_t i = 0;
    if (bias == 0.0f) {
        for (; i + 8 <= n; i += 8)
            _mm256_storeu_ps(y + i, _mm256_mul_ps(_mm256_loadu_ps(a + i), vs));
        for (; i < n; i++)
            y[i] = a[i] * s;
        return;
    }
    const __m256 vb = _mm256_set1_ps(bias);
    for (; i + 8 <= n; i += 8)
        _mm256_storeu_ps(y + i, _mm256_fmadd_ps(_mm256_loadu_ps(a + i), vs, vb));
    for (; i < n; i++)
        y[i] = fmaf(a[i], s, bias);
}

CPU_AVX2 static void cpu_avx2_f32_to_f16(const float *src, uint16_t *dst, int64_t n)
{
    int64_t i = 0;
    for (; i + 8 <= n; i += 8) {
        __m128i h = _mm256_cvtps_ph(_mm256_loadu_ps(src + i), _MM_FROUND_TO_NEAREST_INT);
        _mm_storeu_si128((__m128i *)(dst + i), h);
    }
    for (; i < n; i++)
        dst[i] = sy__f32_to_fp16(src[i]);
}

/* exp(x) for 8 lanes: x = n ln2 + r with |r| <= ln2 / 2, a degree-6
 * polynomial for exp(r) (the Cephes expf coefficients, ~1 ulp) and 2^n put
 * into the exponent.  x is clamped to [-87.3, 88.3] first, so results
 * below FLT_MIN come out as about FLT_MIN and none overflow. */
CPU_AVX2 static inline __m256 cpu_avx2_exp(__m256 x)
{
    x = _mm256_min_ps(_mm256_max_ps(x, _mm256_set1_ps(-87.3f)), _mm256_set1_ps(88.3f));
    const __m256 n = _mm256_round_ps(_mm256_mul_ps(x, _mm256_set1_ps(1.44269504088896341f)),
                                     _MM_FROUND_TO_NEAREST_INT | _MM_FROUND_NO_EXC);
    /* ln2 split in two so that n * ln2_hi is exact. */
    __m256 r = _mm256_fnmadd_ps(n, _mm256_set1_ps(0.693359375f), x);
    r = _mm256_fnmadd_ps(n, _mm256_set1_ps(-2.12194440e-4f), r);
    __m256 p = _mm256_set1_ps(1.9875691500e-4f);
    p = _mm256_fmadd_ps(p, r, _mm256_set1_ps(1.3981999507e-3f));
    p = _mm256_fmadd_ps(p, r, _mm256_set1_ps(8.3334519073e-3f));
    p = _mm256_fmadd_ps(p, r, _mm256_set1_ps(4.1665795894e-2f));
    p = _mm256_fmadd_ps(p, r, _mm256_set1_ps(1.6666665459e-1f));
    p = _mm256_fmadd_ps(p, r, _mm256_set1_ps(5.0000001201e-1f));
    p = _mm256_fmadd_ps(p, _mm256_mul_ps(r, r), _mm256_add_ps(r, _mm256_set1_ps(1.0f)));
    const __m256i e = _mm256_slli_epi32(_mm256_add_epi32(_mm256_cvtps_epi32(n), _mm256_set1_epi32(127)), 23);
    return _mm256_mul_ps(p, _mm256_castsi256_ps(e));
}

/* x * sigmoid(k * x') for silu (k = 1, x' = x) and gelu (k = 2,
 * x' = sqrt(2/pi) (x + 0.044715 x^3): 0.5 (1 + tanh(z)) = sigmoid(2z)). */
CPU_AVX2 static inline __m256 cpu_avx2_silu(__m256 x)
{
    const __m256 e = cpu_avx2_exp(_mm256_sub_ps(_mm256_setzero_ps(), x));
    return _mm256_div_ps(x, _mm256_add_ps(_mm256_set1_ps(1.0f), e));
}

CPU_AVX2 static inline __m256 cpu_avx2_gelu(__m256 x)
{
    const __m256 x3 = _mm256_mul_ps(_mm256_mul_ps(x, x), x);
    const __m256 z = _mm256_mul_ps(_mm256_set1_ps(-2.0f * 0.79788456080286535588f),
                                   _mm256_fmadd_ps(x3, _mm256_set1_ps(0.044715f), x));
    return _mm256_div_ps(x, _mm256_add_ps(_mm256_set1_ps(1.0f), cpu_avx2_exp(z)));
}

CPU_AVX2 static void cpu_avx2_silu_f32(float *y, const float *a, const float *b, int64_t n)
{
    int64_t i = 0;
    for (; i + 8 <= n; i += 8) {
        __m256 v = cpu_avx2_silu(_mm256_loadu_ps(a + i));
        if (b)
            v = _mm256_mul_ps(v, _mm256_loadu_ps(b + i));
        _mm256_storeu_ps(y + i, v);
    }
    for (; i < n; i++) {
        const float v = a[i] / (1.0f + expf(-a[i]));
        y[i] = b ? v * b[i] : v;
    }
}

CPU_AVX2 static void cpu_avx2_gelu_f32(float *y, const float *a, const float *b, int64_t n)
{
    const float sqrt_2_over_pi = 0.79788456080286535588f;
    int64_t i = 0;
    for (; i + 8 <= n; i += 8) {
        __m256 v = cpu_avx2_gelu(_mm256_loadu_ps(a + i));
        if (b)
            v = _mm256_mul_ps(v, _mm256_loadu_ps(b + i));
        _mm256_storeu_ps(y + i, v);
    }
    for (; i < n; i++) {
        const float x = a[i];
        const float v = 0.5f * x * (1.0f + tanhf(sqrt_2_over_pi * (x + 0.044715f * x * x * x)));
        y[i] = b ? v * b[i] : v;
    }
}

CPU_AVX2 static float cpu_avx2_exp_sum_f32(float *y, const float *x, float scale, float shift,
                                           int64_t n)
{
    const __m256 vs = _mm256_set1_ps(scale), vm = _mm256_set1_ps(shift);
    __m256 acc = _mm256_setzero_ps();
    int64_t i = 0;
    for (; i + 8 <= n; i += 8) {
        const __m256 e = cpu_avx2_exp(_mm256_fmsub_ps(_mm256_loadu_ps(x + i), vs, vm));
        _mm256_storeu_ps(y + i, e);
        acc = _mm256_add_ps(acc, e);
    }
    float sum = cpu_avx2_hsum(acc);
    for (; i < n; i++) {
        y[i] = expf(x[i] * scale - shift);
        sum += y[i];
    }
    return sum;
}

/* 8 elements of a row at |i| as F32. */
CPU_AVX2 static inline __m256 cpu_avx2_row8(const void *row, bool f16, int64_t i)
{
    return f16 ? cpu_avx2_load_f16((const uint16_t *)row + i) : _mm256_loadu_ps((const float *)row + i);
}

#define CPU_AVX2_INLINE CPU_AVX2 static inline __attribute__((always_inline))
/* The avx512 table's variants of AVX2 kernels that want more than 16
 * vector registers (EVEX encodings reach ymm16-31). */
#define CPU_AVX512VL __attribute__((target("avx2,fma,f16c,avx512f,avx512vl")))

/* Scores of four rows for |hb| (1 to 4) heads: each row's 8 elements are
 * loaded (and converted) once for all of them, q_h once per 4 rows, and the
 * 4 x hb sums reduced in one horizontal pass per head.  |hb| and |f16| are
 * constants at every call, so the loops unroll into registers.  AVX2 has
 * 16: three heads' 12 sums spill (measured slower on the 1B shape), so it
 * takes two heads at a time; AVX-512VL's 32 take four
 * (cpu_avx512_dot_rows).  Each sum's order is the same either way. */
CPU_AVX2_INLINE void cpu_avx2_dot4(const char *r0, size_t stride, bool f16, const float *q,
                                   int64_t qs, int hb, int64_t d, float scale, float *out,
                                   int64_t os)
{
    const char *r[4] = {r0, r0 + stride, r0 + 2 * stride, r0 + 3 * stride};
    const int64_t d8 = d / 8 * 8;
    __m256 a[4][4];
#pragma GCC unroll 4
    for (int h = 0; h < hb; h++)
#pragma GCC unroll 4
        for (int k = 0; k < 4; k++)
            a[h][k] = _mm256_setzero_ps();
    for (int64_t i = 0; i < d8; i += 8) {
        __m256 x[4];
#pragma GCC unroll 4
        for (int k = 0; k < 4; k++)
            x[k] = cpu_avx2_row8(r[k], f16, i);
#pragma GCC unroll 4
        for (int h = 0; h < hb; h++) {
            const __m256 qv = _mm256_loadu_ps(q + h * qs + i);
#pragma GCC unroll 4
            for (int k = 0; k < 4; k++)
                a[h][k] = _mm256_fmadd_ps(x[k], qv, a[h][k]);
        }
    }
#pragma GCC unroll 4
    for (int h = 0; h < hb; h++) {
        const __m256 t = _mm256_hadd_ps(_mm256_hadd_ps(a[h][0], a[h][1]),
                                        _mm256_hadd_ps(a[h][2], a[h][3]));
        float sums[4];
        _mm_storeu_ps(sums, _mm_add_ps(_mm256_castps256_ps128(t), _mm256_extractf128_ps(t, 1)));
        for (int k = 0; k < 4; k++) {
            for (int64_t i = d8; i < d; i++)
                sums[k] += (f16 ? cpu_avx2_h2f(((const uint16_t *)r[k])[i])
                                : ((const float *)r[k])[i]) *
                           q[h * qs + i];
            out[h * os + k] = sums[k] * scale;
        }
    }
}

/* Rows four at a time, heads |hmax| (2 or 4) at a time; the last rows one
 * by one. */
CPU_AVX2_INLINE void cpu_avx2_dot_rows_as(const char *rows, size_t stride, bool f16, int64_t n,
                                          const float *q, int64_t qs, int64_t nh, int64_t d,
                                          float scale, float *out, int64_t os, int hmax)
{
    for (int64_t h = 0; h < nh; h += hmax) {
        const int64_t hb = nh - h < hmax ? nh - h : hmax;
        const float *qh = q + h * qs;
        float *oh = out + h * os;
        int64_t j = 0;
        for (; j + 4 <= n; j += 4) {
            const char *r = rows + j * (int64_t)stride;
            if (hb == 4)
                cpu_avx2_dot4(r, stride, f16, qh, qs, 4, d, scale, oh + j, os);
            else if (hb == 3)
                cpu_avx2_dot4(r, stride, f16, qh, qs, 3, d, scale, oh + j, os);
            else if (hb == 2)
                cpu_avx2_dot4(r, stride, f16, qh, qs, 2, d, scale, oh + j, os);
            else
                cpu_avx2_dot4(r, stride, f16, qh, qs, 1, d, scale, oh + j, os);
        }
        for (; j < n; j++) {
            const void *row = rows + j * (int64_t)stride;
            for (int64_t k = 0; k < hb; k++)
                oh[k * os + j] = (f16 ? cpu_avx2_dot_f16(row, qh + k * qs, d)
                                      : cpu_avx2_dot_f32(row, qh + k * qs, d)) *
                                 scale;
        }
    }
}

CPU_AVX2 static void cpu_avx2_dot_rows(const void *rows, size_t stride, bool f16, int64_t n,
                                       const float *q, int64_t q_stride, int64_t nh, int64_t d,
                                       float scale, float *out, int64_t out_stride)
{
    if (f16)
        cpu_avx2_dot_rows_as(rows, stride, true, n, q, q_stride, nh, d, scale, out, out_stride, 2);
    else
        cpu_avx2_dot_rows_as(rows, stride, false, n, q, q_stride, nh, d, scale, out, out_stride,
                             2);
}

/* The AVX2 kernel with AVX-512VL's 32 vector registers: four heads at a
 * time, so a kv head's group of three query heads (SmolLM2) converts each
 * F16 row once, not twice, and a group of eight (the 1B llama) twice, not
 * four times.  The same sums in the same order: bit for bit the AVX2
 * scores. */
CPU_AVX512VL static void cpu_avx512_dot_rows(const void *rows, size_t stride, bool f16,
                                             int64_t n, const float *q, int64_t q_stride,
                                             int64_t nh, int64_t d, float scale, float *out,
                                             int64_t out_stride)
{
    if (f16)
        cpu_avx2_dot_rows_as(rows, stride, true, n, q, q_stride, nh, d, scale, out, out_stride, 4);
    else
        cpu_avx2_dot_rows_as(rows, stride, false, n, q, q_stride, nh, d, scale, out, out_stride,
                             4);
}

/* acc_h[i, i + 8 * w) += sum_j p_h[j] * row_j[i, ...) for |hb| (1..4; 1..8
 * with AVX-512VL's 32 registers) heads and |w| (1 or 2) vectors: the
 * accumulators stay in registers over all n rows, each row's vectors are
 * loaded once for all heads, and the hb x w chains hide the FMA latency.
 * Constant |hb|, |w|, |f16|. */
CPU_AVX2_INLINE void cpu_avx2_mix_block(float *acc, int64_t as, const char *rows, size_t stride,
                                        bool f16, int64_t n, const float *p, int64_t ps, int hb,
                                        int w, int64_t i)
{
    __m256 a[8][2];
#pragma GCC unroll 8
    for (int h = 0; h < hb; h++)
#pragma GCC unroll 2
        for (int k = 0; k < w; k++)
            a[h][k] = _mm256_loadu_ps(acc + h * as + i + 8 * k);
    for (int64_t j = 0; j < n; j++) {
        const char *r = rows + j * (int64_t)stride;
        __m256 x[2];
#pragma GCC unroll 2
        for (int k = 0; k < w; k++)
            x[k] = cpu_avx2_row8(r, f16, i + 8 * k);
#pragma GCC unroll 8
        for (int h = 0; h < hb; h++) {
            const __m256 pv = _mm256_broadcast_ss(p + h * ps + j);
#pragma GCC unroll 2
            for (int k = 0; k < w; k++)
                a[h][k] = _mm256_fmadd_ps(pv, x[k], a[h][k]);
        }
    }
#pragma GCC unroll 8
    for (int h = 0; h < hb; h++)
#pragma GCC unroll 2
        for (int k = 0; k < w; k++)
            _mm256_storeu_ps(acc + h * as + i + 8 * k, a[h][k]);
}

CPU_AVX2_INLINE void cpu_avx2_mix_heads(float *acc, int64_t as, const char *rows, size_t stride,
                                        bool f16, int64_t n, const float *p, int64_t ps, int hb,
                                        int64_t d)
{
    int64_t i = 0;
    for (; i + 16 <= d; i += 16)
        cpu_avx2_mix_block(acc, as, rows, stride, f16, n, p, ps, hb, 2, i);
    for (; i + 8 <= d; i += 8)
        cpu_avx2_mix_block(acc, as, rows, stride, f16, n, p, ps, hb, 1, i);
    for (; i < d; i++)
        for (int h = 0; h < hb; h++)
            for (int64_t j = 0; j < n; j++) {
                const char *r = rows + j * (int64_t)stride;
                acc[h * as + i] += p[h * ps + j] * (f16 ? cpu_avx2_h2f(((const uint16_t *)r)[i])
                                                        : ((const float *)r)[i]);
            }
}

/* Heads |hmax| (4, or 8 with AVX-512VL's registers) at a time; every
 * accumulator takes its rows in the same order either way. */
CPU_AVX2_INLINE void cpu_avx2_mix_rows_as(float *acc, int64_t as, const char *rows,
                                          size_t stride, bool f16, int64_t n, const float *p,
                                          int64_t ps, int64_t nh, int64_t d, int hmax)
{
    for (int64_t h = 0; h < nh; h += hmax) {
        const int64_t hb = nh - h < hmax ? nh - h : hmax;
        float *ah = acc + h * as;
        const float *ph = p + h * ps;
        switch (hb) {
        case 8: cpu_avx2_mix_heads(ah, as, rows, stride, f16, n, ph, ps, 8, d); break;
        case 7: cpu_avx2_mix_heads(ah, as, rows, stride, f16, n, ph, ps, 7, d); break;
        case 6: cpu_avx2_mix_heads(ah, as, rows, stride, f16, n, ph, ps, 6, d); break;
        case 5: cpu_avx2_mix_heads(ah, as, rows, stride, f16, n, ph, ps, 5, d); break;
        case 4: cpu_avx2_mix_heads(ah, as, rows, stride, f16, n, ph, ps, 4, d); break;
        case 3: cpu_avx2_mix_heads(ah, as, rows, stride, f16, n, ph, ps, 3, d); break;
        case 2: cpu_avx2_mix_heads(ah, as, rows, stride, f16, n, ph, ps, 2, d); break;
        default: cpu_avx2_mix_heads(ah, as, rows, stride, f16, n, ph, ps, 1, d); break;
        }
    }
}

CPU_AVX2 static void cpu_avx2_mix_rows(float *acc, int64_t acc_stride, const void *rows,
                                       size_t stride, bool f16, int64_t n, const float *p,
                                       int64_t p_stride, int64_t nh, int64_t d)
{
    if (f16)
        cpu_avx2_mix_rows_as(acc, acc_stride, rows, stride, true, n, p, p_stride, nh, d, 4);
    else
        cpu_avx2_mix_rows_as(acc, acc_stride, rows, stride, false, n, p, p_stride, nh, d, 4);
}

/* Eight heads at a time: a group of eight query heads (the 1B llama)
 * reads and converts each F16 row once, not twice.  Bit for bit the AVX2
 * mix. */
CPU_AVX512VL static void cpu_avx512_mix_rows(float *acc, int64_t acc_stride, const void *rows,
                                             size_t stride, bool f16, int64_t n, const float *p,
                                             int64_t p_stride, int64_t nh, int64_t d)
{
    if (f16)
        cpu_avx2_mix_rows_as(acc, acc_stride, rows, stride, true, n, p, p_stride, nh, d, 8);
    else
        cpu_avx2_mix_rows_as(acc, acc_stride, rows, stride, false, n, p, p_stride, nh, d, 8);
}


CPU_AVX2 static float cpu_avx2_fdot_f32(const void *w, const float *x, int64_t n)
{
    return cpu_avx2_dot_f32(w, x, n);
}

CPU_AVX2 static float cpu_avx2_fdot_f16(const void *w, const float *x, int64_t n)
{
    return cpu_avx2_dot_f16(w, x, n);
}

CPU_AVX2 static float cpu_avx2_fdot_bf16(const void *w, const float *x, int64_t n)
{
    const uint16_t *a = w;
    __m256 acc0 = _mm256_setzero_ps(), acc1 = _mm256_setzero_ps();
    int64_t i = 0;
    for (; i + 16 <= n; i += 16) {
        __m256i lo = _mm256_cvtepu16_epi32(_mm_loadu_si128((const __m128i *)(a + i)));
        __m256i hi = _mm256_cvtepu16_epi32(_mm_loadu_si128((const __m128i *)(a + i + 8)));
        acc0 = _mm256_fmadd_ps(_mm256_castsi256_ps(_mm256_slli_epi32(lo, 16)),
                               _mm256_loadu_ps(x + i), acc0);
        acc1 = _mm256_fmadd_ps(_mm256_castsi256_ps(_mm256_slli_epi32(hi, 16)),
                               _mm256_loadu_ps(x + i + 8), acc1);
    }
    float sum = cpu_avx2_hsum(_mm256_add_ps(acc0, acc1));
    for (; i < n; i++)
        sum += sy__bf16_to_f32(a[i]) * x[i];
    return sum;
}

CPU_AVX2 static float cpu_avx2_fdot_i32(const void *w, const float *x, int64_t n)
{
    const int32_t *a = w;
    __m256 acc = _mm256_setzero_ps();
    int64_t i = 0;
    for (; i + 8 <= n; i += 8)
        acc = _mm256_fmadd_ps(_mm256_cvtepi32_ps(_mm256_loadu_si256((const __m256i *)(a + i))),
                              _mm256_loadu_ps(x + i), acc);
    float sum = cpu_avx2_hsum(acc);
    for (; i < n; i++)
        sum += (float)a[i] * x[i];
    return sum;
}

/* The entries every x86 table shares; the tables differ in the kernels
 * of the quantized matmul. */
#define CPU_AVX2_COMMON_ENTRIES                              \
    .dot_f32 = cpu_avx2_dot_f32, .dot_f16 = cpu_avx2_dot_f16, \
    .axpy_f32 = cpu_avx2_axpy_f32, .axpy_f16 = cpu_avx2_axpy_f16, \
    .add_f32 = cpu_avx2_add_f32, .mul_f32 = cpu_avx2_mul_f32, \
    .scale_f32 = cpu_avx2_scale_f32, .f32_to_f16 = cpu_avx2_f32_to_f16, \
    .silu_f32 = cpu_avx2_silu_f32, .gelu_f32 = cpu_avx2_gelu_f32,     \
    .exp_sum_f32 = cpu_avx2_exp_sum_f32,                              \
    .dequant =                                              \
        {                                                   \
            [SY_DTYPE_F32] = cpu_avx2_dequant_f32,          \
            [SY_DTYPE_F16] = cpu_avx2_dequant_f16,          \
            [SY_DTYPE_BF16] = cpu_avx2_dequant_bf16,        \
            [SY_DTYPE_I32] = cpu_avx2_dequant_i32,          \
            [SY_DTYPE_Q8_0] = cpu_avx2_dequant_q8_0,        \
            [SY_DTYPE_Q4_0] = cpu_avx2_dequant_q4_0,        \
            [SY_DTYPE_Q4_1] = cpu_avx2_dequant_q4_1,        \
            [SY_DTYPE_Q4_K] = cpu_avx2_dequant_q4_k,        \
            [SY_DTYPE_Q5_K] = cpu_avx2_dequant_q5_k,        \
            [SY_DTYPE_Q6_K] = cpu_avx2_dequant_q6_k,        \
            [SY_DTYPE_Q5_0] = cpu_avx2_dequant_q5_0,        \
            [SY_DTYPE_Q5_1] = cpu_avx2_dequant_q5_1,        \
        },                                                  \
    .fdot = {                                               \
        [SY_DTYPE_F32] = cpu_avx2_fdot_f32,                 \
        [SY_DTYPE_F16] = cpu_avx2_fdot_f16,                 \
        [SY_DTYPE_BF16] = cpu_avx2_fdot_bf16,               \
        [SY_DTYPE_I32] = cpu_avx2_fdot_i32,                 \
    }

static const cpu_isa_table cpu_avx2_table = {
    .name = "avx2",
    CPU_AVX2_COMMON_ENTRIES,
    .dot_rows = cpu_avx2_dot_rows,
    .mix_rows = cpu_avx2_mix_rows,
    CPU_QDOT_TABLE_ENTRIES(cpu_avx2),
    CPU_QGEMM_TABLE_ENTRIES(cpu_avx2, NULL),
};

static const cpu_isa_table cpu_avxvnni_table = {
    .name = "avxvnni",
    CPU_AVX2_COMMON_ENTRIES,
    .dot_rows = cpu_avx2_dot_rows,
    .mix_rows = cpu_avx2_mix_rows,
    CPU_QDOT_TABLE_ENTRIES(cpu_avxvnni),
    CPU_QGEMM_TABLE_ENTRIES(cpu_avxvnni, cpu_avxvnni_qgemm_q8_0),
};

/* The avx512 tables: |q4rows| names the set of Q4_0/Q4_1 decode-row
 * kernels (the GFNI build in avx512gfni). */
#define CPU_AVX512_ENTRIES(q4rows)                                                               \
    CPU_AVX2_COMMON_ENTRIES,                                                                     \
    .dot_rows = cpu_avx512_dot_rows, /* the AVX2 kernels, more registers */                      \
    .mix_rows = cpu_avx512_mix_rows,                                                             \
    .quantize_q8 = cpu_avx512_quantize_q8,                                                       \
    .qdot =                                                                                      \
        {                                                                                        \
            [SY_DTYPE_Q8_0] = cpu_avx512z_qdot_q8_0,                                             \
            [SY_DTYPE_Q4_0] = cpu_avx512z_qdot_q4_0,                                             \
            [SY_DTYPE_Q4_1] = cpu_avx512z_qdot_q4_1,                                             \
            [SY_DTYPE_Q5_0] = cpu_avx512z_qdot_q5_0,                                             \
            [SY_DTYPE_Q5_1] = cpu_avx512z_qdot_q5_1,                                             \
            [SY_DTYPE_Q4_K] = cpu_avx512_qdot_q4_k,                                              \
            [SY_DTYPE_Q5_K] = cpu_avx512_qdot_q5_k,                                              \
            [SY_DTYPE_Q6_K] = cpu_avx512_qdot_q6_k,                                              \
        },                                                                                       \
    .qdot_rows = {[SY_DTYPE_Q8_0] = cpu_avx512z_qdot_rows_q8_0, [SY_DTYPE_Q4_0] = q4rows##_q4_0, \
                  [SY_DTYPE_Q4_1] = q4rows##_q4_1},                                              \
    /* Q8_0's copy keeps the file's layout (cpu_pack_keeps_layout). */                          \
    .qdot_rows_packed = {[SY_DTYPE_Q8_0] = cpu_avx512z_qdot_rows_q8_0,                           \
                         [SY_DTYPE_Q4_0] = q4rows##_q4_0_packed,                                 \
                         [SY_DTYPE_Q4_1] = q4rows##_q4_1_packed},                                \
    .qgemm_packed = {[SY_DTYPE_Q8_0] = cpu_avx512_qgemm16_q8_0,                                  \
                     [SY_DTYPE_Q4_0] = cpu_avx512_qgemm16_q4_0_packed,                           \
                     [SY_DTYPE_Q4_1] = cpu_avx512_qgemm16_q4_1_packed},                          \
    .q8_panel = 16,                                                                              \
    .pack_q8_panel = cpu_avx512_pack_panel16,                                                    \
    .qgemm =                                                                                     \
        {                                                                                        \
            [SY_DTYPE_Q8_0] = cpu_avx512_qgemm16_q8_0,                                           \
            [SY_DTYPE_Q4_0] = cpu_avx512_qgemm16_q4_0,                                           \
            [SY_DTYPE_Q4_1] = cpu_avx512_qgemm16_q4_1,                                           \
            [SY_DTYPE_Q5_0] = cpu_avx512_qgemm16_q5_0,                                           \
            [SY_DTYPE_Q5_1] = cpu_avx512_qgemm16_q5_1,                                           \
            [SY_DTYPE_Q4_K] = cpu_avx512_qgemm16_q4_k,                                           \
            [SY_DTYPE_Q5_K] = cpu_avx512_qgemm16_q5_k,                                           \
            [SY_DTYPE_Q6_K] = cpu_avx512_qgemm16_q6_k,                                           \
        },

static const cpu_isa_table cpu_avx512_table = {
    .name = "avx512",
    CPU_AVX512_ENTRIES(cpu_avx512z_qdot_rows)
};

static const cpu_isa_table cpu_avx512gfni_table = {
    .name = "avx512gfni",
    CPU_AVX512_ENTRIES(cpu_avx512g_qdot_rows)
};

const cpu_isa_table *cpu_isa_avx2_table(void)
{
    return &cpu_avx2_table;
}

const cpu_isa_table *cpu_isa_avxvnni_table(void)
{
    return &cpu_avxvnni_table;
}

const cpu_isa_table *cpu_isa_avx512_table(void)
{
    return &cpu_avx512_table;
}

const cpu_isa_table *cpu_isa_avx512gfni_table(void)
{
    return &cpu_avx512gfni_table;
}

#else

const cpu_isa_table *cpu_isa_avx2_table(void)
{
    return NULL;
}

const cpu_isa_table *cpu_isa_avxvnni_table(void)
{
    return NULL;
}

const cpu_isa_table *cpu_isa_avx512_table(void)
{
    return NULL;
}

const cpu_isa_table *cpu_isa_avx512gfni_table(void)
{
    return NULL;
}

#endif
