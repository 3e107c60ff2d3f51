/* Quantized-matmul kernels for AVX2 with AVX-VNNI (VEX vpdpbusd; Alder
 * Lake and later, Zen 5): the x86 template with one vpdpbusd as the 8-bit
 * dot primitive. */
#if defined(__x86_64__) || defined(__i386__)

#include <immintrin.h>

#define CPU_QD_TARGET "avx2,fma,f16c,avxvnni"
#define CPU_QD_FN(name) cpu_avxvnni_##name

static inline __attribute__((target(CPU_QD_TARGET), always_inline)) __m256i
cpu_qd_dot(__m256i u, __m256i s)
{
    return _mm256_dpbusd_avx_epi32(_mm256_setzero_si256(), u, s);
}

static inline __attribute__((target(CPU_QD_TARGET), always_inline)) __m256i
cpu_qd_dot2(__m256i u1, __m256i s1, __m256i u2, __m256i s2)
{
    return _mm256_dpbusd_avx_epi32(_mm256_dpbusd_avx_epi32(_mm256_setzero_si256(), u1, s1), u2, s2);
}

#include "cpu_qdot_x86.inc"
#include "cpu_qgemm_x86.inc"

#endif
