/* The probe's memory-read loop: the widest vector loads the CPU has.
 *
 * A core's read bandwidth depends on how wide its loads are: on this
 * machine (Xeon, KVM; bench/membw.c) one core read 9 GB/s with 64-bit
 * loads, 11-12 GB/s with the SSE2 loop the compiler makes of them, 15 GB/s
 * with AVX2 and 17 GB/s with AVX-512 (two cores: 18, 22, 30, 34 GB/s). The
 * decode kernels read their weights with AVX-512/AVX2, so the probe must
 * too, or its "bandwidth" is a property of its own loop. The library is
 * built for baseline x86-64, so the wide loops are compiled per function
 * and chosen at run time. */
#include <stdint.h>
#include <string.h>

#include "probe.h"

#if defined(__x86_64__) && defined(__GNUC__)
#include <immintrin.h>
#define PROBE_X86 1
#endif

/* Four independent sums: the loop is bound by memory, not by one chain.
 * Every byte of the buffer changes the result (tests rely on it). */
static uint64_t read_portable(const unsigned char *b, size_t bytes)
{
    uint64_t a = 0, c = 0, d = 0, e = 0, w[4];
    size_t i = 0;
    for (; i + 32 <= bytes; i += 32) {
        memcpy(w, b + i, 32);
        a += w[0];
        c += w[1];
        d += w[2];
        e += w[3];
    }
    /* The last bytes, so a buffer of any length is read whole. */
    for (; i < bytes; i++)
        a += (uint64_t)b[i] << (8 * (i % 8));
    return a + c + d + e;
}

#ifdef PROBE_X86
/* 256 bytes (four cache lines) per step into four accumulators. */
__attribute__((target("avx512f"))) static uint64_t read_avx512(const unsigned char *b, size_t bytes)
{
    __m512i a0 = _mm512_setzero_si512(), a1 = a0, a2 = a0, a3 = a0;
    size_t i = 0;
    for (; i + 256 <= bytes; i += 256) {
        a0 = _mm512_xor_si512(a0, _mm512_loadu_si512((const void *)(b + i)));
        a1 = _mm512_xor_si512(a1, _mm512_loadu_si512((const void *)(b + i + 64)));
        a2 = _mm512_xor_si512(a2, _mm512_loadu_si512((const void *)(b + i + 128)));
        a3 = _mm512_xor_si512(a3, _mm512_loadu_si512((const void *)(b + i + 192)));
    }
    __m512i x = _mm512_xor_si512(_mm512_xor_si512(a0, a1), _mm512_xor_si512(a2, a3));
    return (uint64_t)_mm512_reduce_add_epi64(x) + read_portable(b + i, bytes - i);
}

/* 128 bytes (two cache lines) per step into four accumulators. */
__attribute__((target("avx2"))) static uint64_t read_avx2(const unsigned char *b, size_t bytes)
{
    __m256i a0 = _mm256_setzero_si256(), a1 = a0, a2 = a0, a3 = a0;
    size_t i = 0;
    for (; i + 128 <= bytes; i += 128) {
        a0 = _mm256_xor_si256(a0, _mm256_loadu_si256((const __m256i *)(b + i)));
        a1 = _mm256_xor_si256(a1, _mm256_loadu_si256((const __m256i *)(b + i + 32)));
        a2 = _mm256_xor_si256(a2, _mm256_loadu_si256((const __m256i *)(b + i + 64)));
        a3 = _mm256_xor_si256(a3, _mm256_loadu_si256((const __m256i *)(b + i + 96)));
    }
    __m256i x = _mm256_xor_si256(_mm256_xor_si256(a0, a1), _mm256_xor_si256(a2, a3));
    return (uint64_t)_mm256_extract_epi64(x, 0) + (uint64_t)_mm256_extract_epi64(x, 3) +
           read_portable(b + i, bytes - i);
}
#endif

const char *sy__probe_read_isa(void)
{
#ifdef PROBE_X86
    if (__builtin_cpu_supports("avx512f"))
        return "avx512";
    if (__builtin_cpu_supports("avx2"))
        return "avx2";
#endif
    return "portable";
}

uint64_t sy__probe_read(const void *buf, size_t bytes)
{
    const unsigned char *b = buf;
#ifdef PROBE_X86
    if (__builtin_cpu_supports("avx512f"))
        return read_avx512(b, bytes);
    if (__builtin_cpu_supports("avx2"))
        return read_avx2(b, bytes);
#endif
    return read_portable(b, bytes);
}
