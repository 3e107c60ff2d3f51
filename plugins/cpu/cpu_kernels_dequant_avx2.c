/* AVX2 + F16C row dequantizers of the x86 tables (declared in cpu_avx2.h).
 * They multiply and add in the same order as the scalar ones (no fused
 * multiply-add), so every table gives the same weights bit for bit. */
#include "cpu_isa.h"

#if defined(__x86_64__) || defined(__i386__)

#include <string.h>

#include "cpu_avx2.h"
#include "cpu_qdot.h"
#include "quants_internal.h"

CPU_AVX2 void cpu_avx2_dequant_f32(const void *src, float *dst, int64_t n)
{
    memcpy(dst, src, (size_t)n * sizeof(float));
}

CPU_AVX2 void cpu_avx2_dequant_f16(const void *src, float *dst, int64_t n)
{
    const uint16_t *x = src;
    int64_t i = 0;
    for (; i + 8 <= n; i += 8)
        _mm256_storeu_ps(dst + i, cpu_avx2_load_f16(x + i));
    for (; i < n; i++)
        dst[i] = cpu_avx2_h2f(x[i]);
}

CPU_AVX2 void cpu_avx2_dequant_bf16(const void *src, float *dst, int64_t n)
{
    const uint16_t *x = src;
    int64_t i = 0;
    for (; i + 8 <= n; i += 8) {
        __m256i w = _mm256_cvtepu16_epi32(_mm_loadu_si128((const __m128i *)(x + i)));
        _mm256_storeu_ps(dst + i, _mm256_castsi256_ps(_mm256_slli_epi32(w, 16)));
    }
    for (; i < n; i++)
        dst[i] = sy__bf16_to_f32(x[i]);
}

CPU_AVX2 void cpu_avx2_dequant_i32(const void *src, float *dst, int64_t n)
{
    const int32_t *x = src;
    int64_t i = 0;
    for (; i + 8 <= n; i += 8)
        _mm256_storeu_ps(dst + i, _mm256_cvtepi32_ps(_mm256_loadu_si256((const __m256i *)(x + i))));
    for (; i < n; i++)
        dst[i] = (float)x[i];
}

CPU_AVX2 void cpu_avx2_dequant_q8_0(const void *src, float *dst, int64_t n)
{
    const sy_block_q8_0 *b = src;
    for (int64_t i = 0; i < n / SY_QK; i++, dst += SY_QK) {
        __m256 d = _mm256_set1_ps(cpu_avx2_h2f(b[i].d));
        for (int j = 0; j < SY_QK; j += 8) {
            __m256i q = _mm256_cvtepi8_epi32(_mm_loadl_epi64((const __m128i *)(b[i].qs + j)));
            _mm256_storeu_ps(dst + j, _mm256_mul_ps(_mm256_cvtepi32_ps(q), d));
        }
    }
}

CPU_AVX2 void cpu_avx2_dequant_q4_0(const void *src, float *dst, int64_t n)
{
    const sy_block_q4_0 *b = src;
    const __m256i low = _mm256_set1_epi32(0x0F);
    const __m256i eight = _mm256_set1_epi32(8);
    for (int64_t i = 0; i < n / SY_QK; i++, dst += SY_QK) {
        __m256 d = _mm256_set1_ps(cpu_avx2_h2f(b[i].d));
        for (int j = 0; j < SY_QK / 2; j += 8) {
            __m256i q = cpu_avx2_load_u8x8(b[i].qs + j);
            __m256i lo = _mm256_sub_epi32(_mm256_and_si256(q, low), eight);
            __m256i hi = _mm256_sub_epi32(_mm256_srli_epi32(q, 4), eight);
            _mm256_storeu_ps(dst + j, _mm256_mul_ps(_mm256_cvtepi32_ps(lo), d));
            _mm256_storeu_ps(dst + j + SY_QK / 2, _mm256_mul_ps(_mm256_cvtepi32_ps(hi), d));
        }
    }
}

CPU_AVX2 void cpu_avx2_dequant_q4_1(const void *src, float *dst, int64_t n)
{
    const sy_block_q4_1 *b = src;
    const __m256i low = _mm256_set1_epi32(0x0F);
    for (int64_t i = 0; i < n / SY_QK; i++, dst += SY_QK) {
        __m256 d = _mm256_set1_ps(cpu_avx2_h2f(b[i].d));
        __m256 m = _mm256_set1_ps(cpu_avx2_h2f(b[i].m));
        for (int j = 0; j < SY_QK / 2; j += 8) {
            __m256i q = cpu_avx2_load_u8x8(b[i].qs + j);
            __m256 lo = _mm256_cvtepi32_ps(_mm256_and_si256(q, low));
            __m256 hi = _mm256_cvtepi32_ps(_mm256_srli_epi32(q, 4));
            _mm256_storeu_ps(dst + j, _mm256_add_ps(_mm256_mul_ps(lo, d), m));
            _mm256_storeu_ps(dst + j + SY_QK / 2, _mm256_add_ps(_mm256_mul_ps(hi, d), m));
        }
    }
}

/* dst[0..32) = d * q - m for 32 int32-convertible lanes built by |load|. */
CPU_AVX2 static inline void cpu_avx2_store_dm(float *dst, __m256i q, __m256 d, __m256 m)
{
    _mm256_storeu_ps(dst, _mm256_sub_ps(_mm256_mul_ps(d, _mm256_cvtepi32_ps(q)), m));
}

CPU_AVX2 void cpu_avx2_dequant_q4_k(const void *src, float *dst, int64_t n)
{
    const sy_block_q4_k *b = src;
    const __m256i low = _mm256_set1_epi32(0x0F);
    for (int64_t i = 0; i < n / SY_QK_K; i++) {
        float d = cpu_avx2_h2f(b[i].d);
        float dmin = cpu_avx2_h2f(b[i].dmin);
        const uint8_t *q = b[i].qs;
        for (int j = 0; j < SY_QK_K / 64; j++, q += 32, dst += 64) {
            int sc, m;
            cpu_k4_scale_min(b[i].scales, 2 * j, &sc, &m);
            __m256 d1 = _mm256_set1_ps(d * sc), m1 = _mm256_set1_ps(dmin * m);
            cpu_k4_scale_min(b[i].scales, 2 * j + 1, &sc, &m);
            __m256 d2 = _mm256_set1_ps(d * sc), m2 = _mm256_set1_ps(dmin * m);
            for (int l = 0; l < 32; l += 8) {
                __m256i v = cpu_avx2_load_u8x8(q + l);
                cpu_avx2_store_dm(dst + l, _mm256_and_si256(v, low), d1, m1);
                cpu_avx2_store_dm(dst + 32 + l, _mm256_srli_epi32(v, 4), d2, m2);
            }
        }
    }
}

CPU_AVX2 void cpu_avx2_dequant_q5_k(const void *src, float *dst, int64_t n)
{
    const sy_block_q5_k *b = src;
    const __m256i low = _mm256_set1_epi32(0x0F);
    const __m256i zero = _mm256_setzero_si256();
    const __m256i sixteen = _mm256_set1_epi32(16);
    for (int64_t i = 0; i < n / SY_QK_K; i++) {
        float d = cpu_avx2_h2f(b[i].d);
        float dmin = cpu_avx2_h2f(b[i].dmin);
        const uint8_t *ql = b[i].qs;
        const uint8_t *qh = b[i].qh;
        for (int j = 0; j < SY_QK_K / 64; j++, ql += 32, dst += 64) {
            int sc, m;
            cpu_k4_scale_min(b[i].scales, 2 * j, &sc, &m);
            __m256 d1 = _mm256_set1_ps(d * sc), m1 = _mm256_set1_ps(dmin * m);
            cpu_k4_scale_min(b[i].scales, 2 * j + 1, &sc, &m);
            __m256 d2 = _mm256_set1_ps(d * sc), m2 = _mm256_set1_ps(dmin * m);
            __m256i u1 = _mm256_set1_epi32(1 << (2 * j));
            __m256i u2 = _mm256_set1_epi32(2 << (2 * j));
            for (int l = 0; l < 32; l += 8) {
                __m256i v = cpu_avx2_load_u8x8(ql + l);
                __m256i h = cpu_avx2_load_u8x8(qh + l);
                __m256i h1 = _mm256_andnot_si256(_mm256_cmpeq_epi32(_mm256_and_si256(h, u1), zero),
                                                 sixteen);
                __m256i h2 = _mm256_andnot_si256(_mm256_cmpeq_epi32(_mm256_and_si256(h, u2), zero),
                                                 sixteen);
                cpu_avx2_store_dm(dst + l, _mm256_add_epi32(_mm256_and_si256(v, low), h1), d1, m1);
                cpu_avx2_store_dm(dst + 32 + l, _mm256_add_epi32(_mm256_srli_epi32(v, 4), h2), d2,
                                  m2);
            }
        }
    }
}

CPU_AVX2 void cpu_avx2_dequant_q6_k(const void *src, float *dst, int64_t n)
{
    const sy_block_q6_k *b = src;
    const __m256i low = _mm256_set1_epi32(0x0F);
    const __m256i three = _mm256_set1_epi32(3);
    const __m256i bias = _mm256_set1_epi32(32);
    for (int64_t i = 0; i < n / SY_QK_K; i++) {
        float d = cpu_avx2_h2f(b[i].d);
        const uint8_t *ql = b[i].ql;
        const uint8_t *qh = b[i].qh;
        const int8_t *sc = b[i].scales;
        for (int half = 0; half < SY_QK_K / 128; half++, ql += 64, qh += 32, sc += 8, dst += 128) {
            for (int l = 0; l < 32; l += 8) {
                int is = l / 16;
                __m256i a = cpu_avx2_load_u8x8(ql + l);
                __m256i c = cpu_avx2_load_u8x8(ql + l + 32);
                __m256i h = cpu_avx2_load_u8x8(qh + l);
                __m256i q1 = _mm256_or_si256(_mm256_and_si256(a, low),
                                             _mm256_slli_epi32(_mm256_and_si256(h, three), 4));
                __m256i q2 = _mm256_or_si256(
                    _mm256_and_si256(c, low),
                    _mm256_slli_epi32(_mm256_and_si256(_mm256_srli_epi32(h, 2), three), 4));
                __m256i q3 = _mm256_or_si256(
                    _mm256_srli_epi32(a, 4),
                    _mm256_slli_epi32(_mm256_and_si256(_mm256_srli_epi32(h, 4), three), 4));
                __m256i q4 = _mm256_or_si256(
                    _mm256_srli_epi32(c, 4),
                    _mm256_slli_epi32(_mm256_and_si256(_mm256_srli_epi32(h, 6), three), 4));
                __m256 s1 = _mm256_set1_ps(d * (float)sc[is + 0]);
                __m256 s2 = _mm256_set1_ps(d * (float)sc[is + 2]);
                __m256 s3 = _mm256_set1_ps(d * (float)sc[is + 4]);
                __m256 s4 = _mm256_set1_ps(d * (float)sc[is + 6]);
                _mm256_storeu_ps(dst + l, _mm256_mul_ps(s1, _mm256_cvtepi32_ps(_mm256_sub_epi32(q1, bias))));
                _mm256_storeu_ps(dst + l + 32,
                                 _mm256_mul_ps(s2, _mm256_cvtepi32_ps(_mm256_sub_epi32(q2, bias))));
                _mm256_storeu_ps(dst + l + 64,
                                 _mm256_mul_ps(s3, _mm256_cvtepi32_ps(_mm256_sub_epi32(q3, bias))));
                _mm256_storeu_ps(dst + l + 96,
                                 _mm256_mul_ps(s4, _mm256_cvtepi32_ps(_mm256_sub_epi32(q4, bias))));
            }
        }
    }
}

/* Q5_0 / Q5_1: Q4 nibbles plus a fifth bit per element from the 32-bit
 * qh word (bit j for element j); Q5_0 is centred on 16, Q5_1 has a min. */
CPU_AVX2 static inline void cpu_avx2_q5_block(const uint8_t *qs, uint32_t qh, __m256 d, __m256 m,
                                              __m256i off, float *dst)
{
    const __m256i low = _mm256_set1_epi32(0x0F);
    const __m256i one = _mm256_set1_epi32(1);
    const __m256i lanes = _mm256_setr_epi32(0, 1, 2, 3, 4, 5, 6, 7);
    const __m256i bits = _mm256_set1_epi32((int)qh);
    for (int j = 0; j < SY_QK / 2; j += 8) {
        __m256i q = cpu_avx2_load_u8x8(qs + j);
        __m256i sh = _mm256_add_epi32(lanes, _mm256_set1_epi32(j));
        __m256i h0 = _mm256_slli_epi32(_mm256_and_si256(_mm256_srlv_epi32(bits, sh), one), 4);
        __m256i h1 = _mm256_slli_epi32(
            _mm256_and_si256(_mm256_srlv_epi32(bits, _mm256_add_epi32(sh, _mm256_set1_epi32(16))),
                             one),
            4);
        __m256i lo = _mm256_sub_epi32(_mm256_or_si256(_mm256_and_si256(q, low), h0), off);
        __m256i hi = _mm256_sub_epi32(_mm256_or_si256(_mm256_srli_epi32(q, 4), h1), off);
        _mm256_storeu_ps(dst + j, _mm256_fmadd_ps(_mm256_cvtepi32_ps(lo), d, m));
        _mm256_storeu_ps(dst + j + SY_QK / 2, _mm256_fmadd_ps(_mm256_cvtepi32_ps(hi), d, m));
    }
}

CPU_AVX2 void cpu_avx2_dequant_q5_0(const void *src, float *dst, int64_t n)
{
    const sy_block_q5_0 *b = src;
    for (int64_t i = 0; i < n / SY_QK; i++, dst += SY_QK) {
        uint32_t qh;
        memcpy(&qh, b[i].qh, sizeof qh);
        cpu_avx2_q5_block(b[i].qs, qh, _mm256_set1_ps(cpu_avx2_h2f(b[i].d)),
                          _mm256_setzero_ps(), _mm256_set1_epi32(16), dst);
    }
}

CPU_AVX2 void cpu_avx2_dequant_q5_1(const void *src, float *dst, int64_t n)
{
    const sy_block_q5_1 *b = src;
    for (int64_t i = 0; i < n / SY_QK; i++, dst += SY_QK) {
        uint32_t qh;
        memcpy(&qh, b[i].qh, sizeof qh);
        cpu_avx2_q5_block(b[i].qs, qh, _mm256_set1_ps(cpu_avx2_h2f(b[i].d)),
                          _mm256_set1_ps(cpu_avx2_h2f(b[i].m)), _mm256_setzero_si256(), dst);
    }
}

#endif
