/* The integer inner loop of the emulated NPU: exact int32 dot products of
 * 32-element blocks of int16 values.  Integer sums are exact, so the
 * portable loop and the AVX2 one give bit-identical results and the choice
 * never changes what the NPU computes, only how fast the emulation runs.
 * SWITCHYARD_NPUSIM_ISA=scalar (read once at init) forces the portable one. */
#include <string.h>

#include "npusim_internal.h"

#if defined(__x86_64__) || defined(__i386__)
#include <immintrin.h>
#define NPU_HAVE_X86 1
#else
#define NPU_HAVE_X86 0
#endif

static void npu_block_dots_scalar(const int16_t *a, const int16_t *b, int64_t nblocks,
                                  int32_t *out)
{
    for (int64_t blk = 0; blk < nblocks; blk++) {
        const int16_t *pa = a + blk * NPU_QK, *pb = b + blk * NPU_QK;
        int32_t sum = 0;
        for (int i = 0; i < NPU_QK; i++)
            sum += (int32_t)pa[i] * (int32_t)pb[i];
        out[blk] = sum;
    }
}

static const npu_isa npu_isa_scalar = {"scalar", npu_block_dots_scalar};

#if NPU_HAVE_X86
/* Eight lanes of int32 partial sums of one block. */
__attribute__((target("avx2"))) static inline __m256i npu_block_lanes_avx2(const int16_t *a,
                                                                          const int16_t *b)
{
    const __m256i a0 = _mm256_loadu_si256((const __m256i *)a);
    const __m256i a1 = _mm256_loadu_si256((const __m256i *)(a + 16));
    const __m256i b0 = _mm256_loadu_si256((const __m256i *)b);
    const __m256i b1 = _mm256_loadu_si256((const __m256i *)(b + 16));
    return _mm256_add_epi32(_mm256_madd_epi16(a0, b0), _mm256_madd_epi16(a1, b1));
}

__attribute__((target("avx2"))) static void npu_block_dots_avx2(const int16_t *a,
                                                                const int16_t *b,
                                                                int64_t nblocks, int32_t *out)
{
    int64_t blk = 0;
    /* Eight blocks at a time: three rounds of horizontal adds turn eight
     * vectors of lane sums into one vector of eight block sums. */
    for (; blk + 8 <= nblocks; blk += 8) {
        __m256i v[8];
        for (int j = 0; j < 8; j++)
            v[j] = npu_block_lanes_avx2(a + (blk + j) * NPU_QK, b + (blk + j) * NPU_QK);
        const __m256i s01 = _mm256_hadd_epi32(v[0], v[1]);
        const __m256i s23 = _mm256_hadd_epi32(v[2], v[3]);
        const __m256i s45 = _mm256_hadd_epi32(v[4], v[5]);
        const __m256i s67 = _mm256_hadd_epi32(v[6], v[7]);
        const __m256i s0123 = _mm256_hadd_epi32(s01, s23);
        const __m256i s4567 = _mm256_hadd_epi32(s45, s67);
        const __m256i lo = _mm256_permute2x128_si256(s0123, s4567, 0x20);
        const __m256i hi = _mm256_permute2x128_si256(s0123, s4567, 0x31);
        _mm256_storeu_si256((__m256i *)(out + blk), _mm256_add_epi32(lo, hi));
    }
    for (; blk < nblocks; blk++) {
        const __m256i v = npu_block_lanes_avx2(a + blk * NPU_QK, b + blk * NPU_QK);
        __m128i s = _mm_add_epi32(_mm256_castsi256_si128(v), _mm256_extracti128_si256(v, 1));
        s = _mm_add_epi32(s, _mm_shuffle_epi32(s, _MM_SHUFFLE(1, 0, 3, 2)));
        s = _mm_add_epi32(s, _mm_shuffle_epi32(s, _MM_SHUFFLE(2, 3, 0, 1)));
        out[blk] = _mm_cvtsi128_si32(s);
    }
}

static const npu_isa npu_isa_avx2 = {"avx2", npu_block_dots_avx2};
#endif

const npu_isa *npu_isa_select(const char *request)
{
    if (request && strcmp(request, "scalar") == 0)
        return &npu_isa_scalar;
#if NPU_HAVE_X86
    __builtin_cpu_init();
    if (__builtin_cpu_supports("avx2"))
        return &npu_isa_avx2;
#endif
    return &npu_isa_scalar;
}
