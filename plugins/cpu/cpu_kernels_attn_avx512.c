/* Attention's row kernels (cpu_isa.h: dot_rows, mix_rows) on 512-bit
 * vectors, for the avx512 table.  The AVX2 ones hold at most two heads'
 * scores of four rows in their 16 registers, so a kv head's group of
 * three (SmolLM2) or eight (1B llama) query heads reads and converts each
 * F16 row two or four times; 32 registers hold four heads of four rows,
 * and a row of 64 elements is four vectors, not eight.  Rows of any
 * length: the last partial vector is a masked load. */
#if defined(__x86_64__) || defined(__i386__)

#include <immintrin.h>
#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

#include "cpu_avx2.h"

#define CPU_Z __attribute__((target("avx2,fma,f16c,avx512f,avx512bw,avx512vl")))
#define CPU_Z_INLINE CPU_Z static inline __attribute__((always_inline))

/* Elements [i, i + 16) of a row as F32, lanes outside |m| zero. */
CPU_Z_INLINE __m512 cpu_z_row16(const char *row, bool f16, int64_t i, __mmask16 m)
{
    if (f16)
        return _mm512_cvtph_ps(_mm256_maskz_loadu_epi16(m, (const uint16_t *)row + i));
    return _mm512_maskz_loadu_ps(m, (const float *)row + i);
}

CPU_Z_INLINE __m256 cpu_z_hi256(__m512 a)
{
    return _mm256_castpd_ps(_mm512_extractf64x4_pd(_mm512_castps_pd(a), 1));
}

/* The four sums of a0..a3's lanes, in order. */
CPU_Z_INLINE __m128 cpu_z_sum4(__m512 a0, __m512 a1, __m512 a2, __m512 a3)
{
    const __m256 y0 = _mm256_add_ps(_mm512_castps512_ps256(a0), cpu_z_hi256(a0));
    const __m256 y1 = _mm256_add_ps(_mm512_castps512_ps256(a1), cpu_z_hi256(a1));
    const __m256 y2 = _mm256_add_ps(_mm512_castps512_ps256(a2), cpu_z_hi256(a2));
    const __m256 y3 = _mm256_add_ps(_mm512_castps512_ps256(a3), cpu_z_hi256(a3));
    const __m256 t = _mm256_hadd_ps(_mm256_hadd_ps(y0, y1), _mm256_hadd_ps(y2, y3));
    return _mm_add_ps(_mm256_castps256_ps128(t), _mm256_extractf128_ps(t, 1));
}

/* Scores of |nr| (1..4) rows for |hb| (1..4) heads: each row's vectors are
 * loaded once for all heads.  Constant |nr|, |hb| and |f16|. */
CPU_Z_INLINE void cpu_z_dot_block(const char *r0, size_t stride, bool f16, int nr, const float *q,
                                  int64_t qs, int hb, int64_t d, float scale, float *out,
                                  int64_t os)
{
    __m512 a[4][4];
#pragma GCC unroll 4
    for (int h = 0; h < hb; h++)
#pragma GCC unroll 4
        for (int k = 0; k < 4; k++)
            a[h][k] = _mm512_setzero_ps();
    for (int64_t i = 0; i < d; i += 16) {
        const __mmask16 m = d - i >= 16 ? (__mmask16)0xFFFF : (__mmask16)((1u << (d - i)) - 1);
        __m512 x[4];
#pragma GCC unroll 4
        for (int k = 0; k < nr; k++)
            x[k] = cpu_z_row16(r0 + k * stride, f16, i, m);
#pragma GCC unroll 4
        for (int h = 0; h < hb; h++) {
            const __m512 qv = _mm512_maskz_loadu_ps(m, q + h * qs + i);
#pragma GCC unroll 4
            for (int k = 0; k < nr; k++)
                a[h][k] = _mm512_fmadd_ps(x[k], qv, a[h][k]);
        }
    }
    const __m128 vs = _mm_set1_ps(scale);
#pragma GCC unroll 4
    for (int h = 0; h < hb; h++) {
        const __m128 s = _mm_mul_ps(cpu_z_sum4(a[h][0], a[h][1], a[h][2], a[h][3]), vs);
        if (nr == 4) {
            _mm_storeu_ps(out + h * os, s);
        } else {
            float t[4];
            _mm_storeu_ps(t, s);
            for (int k = 0; k < nr; k++)
                out[h * os + k] = t[k];
        }
    }
}

/* Heads four at a time (|hb| constant), rows four at a time. */
CPU_Z_INLINE void cpu_z_dot_heads(const char *rows, size_t stride, bool f16, int64_t n,
                                  const float *q, int64_t qs, int hb, int64_t d, float scale,
                                  float *out, int64_t os)
{
    int64_t j = 0;
    for (; j + 4 <= n; j += 4)
        cpu_z_dot_block(rows + j * (int64_t)stride, stride, f16, 4, q, qs, hb, d, scale, out + j,
                        os);
    const char *r = rows + j * (int64_t)stride;
    if (n - j == 3)
        cpu_z_dot_block(r, stride, f16, 3, q, qs, hb, d, scale, out + j, os);
    else if (n - j == 2)
        cpu_z_dot_block(r, stride, f16, 2, q, qs, hb, d, scale, out + j, os);
    else if (n - j == 1)
        cpu_z_dot_block(r, stride, f16, 1, q, qs, hb, d, scale, out + j, os);
}

CPU_Z_INLINE void cpu_z_dot_rows_as(const char *rows, size_t stride, bool f16, int64_t n,
                                    const float *q, int64_t qs, int64_t nh, int64_t d,
                                    float scale, float *out, int64_t os)
{
    for (int64_t h = 0; h < nh; h += 4) {
        const int64_t hb = nh - h < 4 ? nh - h : 4;
        const float *qh = q + h * qs;
        float *oh = out + h * os;
        if (hb == 4)
            cpu_z_dot_heads(rows, stride, f16, n, qh, qs, 4, d, scale, oh, os);
        else if (hb == 3)
            cpu_z_dot_heads(rows, stride, f16, n, qh, qs, 3, d, scale, oh, os);
        else if (hb == 2)
            cpu_z_dot_heads(rows, stride, f16, n, qh, qs, 2, d, scale, oh, os);
        else
            cpu_z_dot_heads(rows, stride, f16, n, qh, qs, 1, d, scale, oh, os);
    }
}

CPU_Z void cpu_avx512_dot_rows(const void *rows, size_t stride, bool f16, int64_t n,
                               const float *q, int64_t q_stride, int64_t nh, int64_t d,
                               float scale, float *out, int64_t out_stride)
{
    if (f16)
        cpu_z_dot_rows_as(rows, stride, true, n, q, q_stride, nh, d, scale, out, out_stride);
    else
        cpu_z_dot_rows_as(rows, stride, false, n, q, q_stride, nh, d, scale, out, out_stride);
}

/* acc_h[i, i + 16 * w) += sum_j p_h[j] * row_j[i, ...) for |hb| (1..4)
 * heads and |w| (1..4) vectors, the last one masked by |m|: the hb x w
 * accumulators stay in registers over all n rows, and each row's vectors
 * are loaded once for all heads.  Constant |hb|, |w| and |f16|. */
CPU_Z_INLINE void cpu_z_mix_block(float *acc, int64_t as, const char *rows, size_t stride,
                                  bool f16, int64_t n, const float *p, int64_t ps, int hb, int w,
                                  int64_t i, __mmask16 m)
{
    __m512 a[4][4];
#pragma GCC unroll 4
    for (int h = 0; h < hb; h++)
#pragma GCC unroll 4
        for (int k = 0; k < w; k++)
            a[h][k] = _mm512_maskz_loadu_ps(k == w - 1 ? m : (__mmask16)0xFFFF,
                                            acc + h * as + i + 16 * k);
    for (int64_t j = 0; j < n; j++) {
        const char *r = rows + j * (int64_t)stride;
        __m512 x[4];
#pragma GCC unroll 4
        for (int k = 0; k < w; k++)
            x[k] = cpu_z_row16(r, f16, i + 16 * k, k == w - 1 ? m : (__mmask16)0xFFFF);
#pragma GCC unroll 4
        for (int h = 0; h < hb; h++) {
            const __m512 pv = _mm512_set1_ps(p[h * ps + j]);
#pragma GCC unroll 4
            for (int k = 0; k < w; k++)
                a[h][k] = _mm512_fmadd_ps(pv, x[k], a[h][k]);
        }
    }
#pragma GCC unroll 4
    for (int h = 0; h < hb; h++)
#pragma GCC unroll 4
        for (int k = 0; k < w; k++)
            _mm512_mask_storeu_ps(acc + h * as + i + 16 * k, k == w - 1 ? m : (__mmask16)0xFFFF,
                                  a[h][k]);
}

/* A row's elements 64 at a time, then 16 at a time, the last 1..15
 * masked. */
CPU_Z_INLINE void cpu_z_mix_heads(float *acc, int64_t as, const char *rows, size_t stride,
                                  bool f16, int64_t n, const float *p, int64_t ps, int hb,
                                  int64_t d)
{
    const __mmask16 all = 0xFFFF;
    int64_t i = 0;
    for (; i + 64 <= d; i += 64)
        cpu_z_mix_block(acc, as, rows, stride, f16, n, p, ps, hb, 4, i, all);
    for (; i + 16 <= d; i += 16)
        cpu_z_mix_block(acc, as, rows, stride, f16, n, p, ps, hb, 1, i, all);
    if (i < d)
        cpu_z_mix_block(acc, as, rows, stride, f16, n, p, ps, hb, 1, i,
                        (__mmask16)((1u << (d - i)) - 1));
}

CPU_Z_INLINE void cpu_z_mix_rows_as(float *acc, int64_t as, const char *rows, size_t stride,
                                    bool f16, int64_t n, const float *p, int64_t ps, int64_t nh,
                                    int64_t d)
{
    for (int64_t h = 0; h < nh; h += 4) {
        const int64_t hb = nh - h < 4 ? nh - h : 4;
        float *ah = acc + h * as;
        const float *ph = p + h * ps;
        if (hb == 4)
            cpu_z_mix_heads(ah, as, rows, stride, f16, n, ph, ps, 4, d);
        else if (hb == 3)
            cpu_z_mix_heads(ah, as, rows, stride, f16, n, ph, ps, 3, d);
        else if (hb == 2)
            cpu_z_mix_heads(ah, as, rows, stride, f16, n, ph, ps, 2, d);
        else
            cpu_z_mix_heads(ah, as, rows, stride, f16, n, ph, ps, 1, d);
    }
}

CPU_Z void cpu_avx512_mix_rows(float *acc, int64_t acc_stride, const void *rows, size_t stride,
                               bool f16, int64_t n, const float *p, int64_t p_stride, int64_t nh,
                               int64_t d)
{
    if (f16)
        cpu_z_mix_rows_as(acc, acc_stride, rows, stride, true, n, p, p_stride, nh, d);
    else
        cpu_z_mix_rows_as(acc, acc_stride, rows, stride, false, n, p, p_stride, nh, d);
}

#endif
