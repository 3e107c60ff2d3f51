/* Helpers shared by the AVX2 kernel files (cpu_kernels_avx2.c and
 * cpu_kernels_dequant_avx2.c) and the AVX2 dequantizers the x86 tables
 * point at.  Include only from x86 builds: every function carries its own
 * target attribute. */
#ifndef SY_CPU_AVX2_H
#define SY_CPU_AVX2_H

#include <immintrin.h>
#include <stdint.h>

#define CPU_AVX2 __attribute__((target("avx2,fma,f16c")))

/* One f16 to f32 with the F16C instruction: the portable bit-twiddling
 * converter costs more than the rest of a block's dequantization. */
CPU_AVX2 static inline float cpu_avx2_h2f(uint16_t h)
{
    return _cvtsh_ss(h);
}

CPU_AVX2 static inline float cpu_avx2_hsum(__m256 v)
{
    __m128 lo = _mm256_castps256_ps128(v);
    __m128 hi = _mm256_extractf128_ps(v, 1);
    lo = _mm_add_ps(lo, hi);
    __m128 shuf = _mm_movehdup_ps(lo);
    __m128 sums = _mm_add_ps(lo, shuf);
    shuf = _mm_movehl_ps(shuf, sums);
    sums = _mm_add_ss(sums, shuf);
    return _mm_cvtss_f32(sums);
}

CPU_AVX2 static inline __m256 cpu_avx2_load_f16(const uint16_t *p)
{
    return _mm256_cvtph_ps(_mm_loadu_si128((const __m128i *)p));
}

/* Loads 8 bytes and widens them to 8 int32 lanes, unsigned. */
CPU_AVX2 static inline __m256i cpu_avx2_load_u8x8(const uint8_t *p)
{
    return _mm256_cvtepu8_epi32(_mm_loadl_epi64((const __m128i *)p));
}

/* cpu_kernels_dequant_avx2.c: row dequantizers, the same arithmetic order
 * as the scalar ones (every table gives the same weights bit for bit). */
void cpu_avx2_dequant_f32(const void *src, float *dst, int64_t n);
void cpu_avx2_dequant_f16(const void *src, float *dst, int64_t n);
void cpu_avx2_dequant_bf16(const void *src, float *dst, int64_t n);
void cpu_avx2_dequant_i32(const void *src, float *dst, int64_t n);
void cpu_avx2_dequant_q8_0(const void *src, float *dst, int64_t n);
void cpu_avx2_dequant_q4_0(const void *src, float *dst, int64_t n);
void cpu_avx2_dequant_q4_1(const void *src, float *dst, int64_t n);
void cpu_avx2_dequant_q4_k(const void *src, float *dst, int64_t n);
void cpu_avx2_dequant_q5_k(const void *src, float *dst, int64_t n);
void cpu_avx2_dequant_q6_k(const void *src, float *dst, int64_t n);
void cpu_avx2_dequant_q5_0(const void *src, float *dst, int64_t n);
void cpu_avx2_dequant_q5_1(const void *src, float *dst, int64_t n);

#endif
