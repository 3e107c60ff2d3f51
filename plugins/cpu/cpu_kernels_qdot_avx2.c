/* Quantized-matmul kernels for AVX2 + FMA + F16C: the x86 template with
 * maddubs + madd as the 8-bit dot primitive. */
#if defined(__x86_64__) || defined(__i386__)

#include <immintrin.h>

#define CPU_QD_TARGET "avx2,fma,f16c"
#define CPU_QD_FN(name) cpu_avx2_##name

/* Sums of 4 adjacent u8 x s8 products: maddubs pairs them into int16
 * (at most 2 * 255 * 127, within range for the quants used here: weights
 * below 64 or |w| <= 128 against |x| <= 127), madd adds the pairs. */
static inline __attribute__((target(CPU_QD_TARGET), always_inline)) __m256i
cpu_qd_dot(__m256i u, __m256i s)
{
    return _mm256_madd_epi16(_mm256_maddubs_epi16(u, s), _mm256_set1_epi16(1));
}

/* Sum of two such dots: the int16 pair sums of both maddubs fit int16
 * (each below 2 * 31 * 127), so they are added before one madd. */
static inline __attribute__((target(CPU_QD_TARGET), always_inline)) __m256i
cpu_qd_dot2(__m256i u1, __m256i s1, __m256i u2, __m256i s2)
{
    return _mm256_madd_epi16(_mm256_add_epi16(_mm256_maddubs_epi16(u1, s1), _mm256_maddubs_epi16(u2, s2)),
                             _mm256_set1_epi16(1));
}

#define CPU_QD_MADDUBS 1
#include "cpu_qdot_x86.inc"
#include "cpu_qgemm_x86.inc"

#endif
