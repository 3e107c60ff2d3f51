/* Quantized-matmul kernels for AVX-512 F/BW/VL/VNNI (Ice Lake server and
 * later, Zen 4/5): the x86 template with the EVEX vpdpbusd on 256-bit
 * vectors as the 8-bit dot primitive, and a prefill GEMM of its own on
 * 512-bit vectors: panels of 16 columns, one vpdpbusd per group for all 16
 * (the template's row decoders feed it). */
#if defined(__x86_64__) || defined(__i386__)

#include <immintrin.h>

#define CPU_QD_TARGET "avx2,fma,f16c,avx512f,avx512bw,avx512vl,avx512vnni"
#define CPU_QD_FN(name) cpu_avx512_##name

static inline __attribute__((target(CPU_QD_TARGET), always_inline)) __m256i
cpu_qd_dot(__m256i u, __m256i s)
{
    return _mm256_dpbusd_epi32(_mm256_setzero_si256(), u, s);
}

static inline __attribute__((target(CPU_QD_TARGET), always_inline)) __m256i
cpu_qd_dot2(__m256i u1, __m256i s1, __m256i u2, __m256i s2)
{
    return _mm256_dpbusd_epi32(_mm256_dpbusd_epi32(_mm256_setzero_si256(), u1, s1), u2, s2);
}

#include "cpu_qdot_x86.inc"
#include "cpu_qgemm_x86.inc"

CPU_QD __m512i cpu_z_load(const void *p)
{
    return _mm512_loadu_si512(p);
}

CPU_QD uint64_t cpu_qd_u64(const void *p)
{
    uint64_t v;
    memcpy(&v, p, sizeof v);
    return v;
}

/* ----------------------------------------------- 512-bit decode kernels */

/* One column (decode) of the 32-element formats, four blocks per 512-bit
 * register: the low nibbles of blocks i..i+3 meet the low halves of their
 * Q8 blocks (gathered by one 128-bit-lane shuffle) and the high nibbles
 * the high halves; int32 lanes 4b..4b+3 belong to block i + b.  Scales go
 * four at a time: W = (d, m) of the four blocks times the column's (dx, ds)
 * pairs.  Q8_0 takes two blocks per register.  Other column counts use the
 * 256-bit template. */
CPU_QD __m512i cpu_z_quants4(enum cpu_qd_kind kind, const uint8_t *wb, size_t bytes,
                             __m512i *out_hi)
{
    const size_t qs_at = kind == CPU_QD_Q4_0 ? 2 : kind == CPU_QD_Q4_1 ? 4 : kind == CPU_QD_Q5_0 ? 6 : 8;
    __m512i v = _mm512_castsi128_si512(_mm_loadu_si128((const __m128i *)(wb + qs_at)));
    v = _mm512_inserti32x4(v, _mm_loadu_si128((const __m128i *)(wb + bytes + qs_at)), 1);
    v = _mm512_inserti32x4(v, _mm_loadu_si128((const __m128i *)(wb + 2 * bytes + qs_at)), 2);
    v = _mm512_inserti32x4(v, _mm_loadu_si128((const __m128i *)(wb + 3 * bytes + qs_at)), 3);
    const __m512i low = _mm512_set1_epi8(0x0F);
    __m512i lo = _mm512_and_si512(v, low);
    __m512i hi = _mm512_and_si512(_mm512_srli_epi16(v, 4), low);
    if (kind == CPU_QD_Q5_0 || kind == CPU_QD_Q5_1) {
        uint64_t mlo = 0, mhi = 0;
        for (int b = 0; b < 4; b++) {
            const uint32_t qh = cpu_qd_u32(wb + b * bytes + qs_at - 4);
            mlo |= (uint64_t)(qh & 0xFFFFu) << (16 * b);
            mhi |= (uint64_t)(qh >> 16) << (16 * b);
        }
        const __m512i bit = _mm512_set1_epi8(0x10);
        lo = _mm512_or_si512(lo, _mm512_maskz_mov_epi8(mlo, bit));
        hi = _mm512_or_si512(hi, _mm512_maskz_mov_epi8(mhi, bit));
    }
    *out_hi = hi;
    return lo;
}

/* The dot of four blocks' nibbles with one plane of the column at |q8|. */
CPU_QD __m512i cpu_z_dot4blocks(__m512i lo, __m512i hi, const int8_t *q8)
{
    const __m512i a = cpu_z_load(q8), b = cpu_z_load(q8 + 64);
    const __m512i xl = _mm512_shuffle_i64x2(a, b, 0x88), xh = _mm512_shuffle_i64x2(a, b, 0xDD);
    return _mm512_dpbusd_epi32(_mm512_dpbusd_epi32(_mm512_setzero_si512(), lo, xl), hi, xh);
}

/* The dot of two Q8_0 blocks (|q|, signed) with one plane at |q8|. */
CPU_QD __m512i cpu_z_dot2q8(__m512i q, const int8_t *q8)
{
    const __m512i x = cpu_z_load(q8);
    const __m512i sx = _mm512_mask_sub_epi8(x, _mm512_movepi8_mask(q), _mm512_setzero_si512(), x);
    return _mm512_dpbusd_epi32(_mm512_setzero_si512(), _mm512_abs_epi8(q), sx);
}

CPU_QD __m512i cpu_z_join(__m512i hi, __m512i lo)
{
    return _mm512_add_epi32(_mm512_slli_epi32(hi, 7), lo);
}

CPU_QD float cpu_z_qdot1(enum cpu_qd_kind kind, const uint8_t *wb, const int8_t *q, const float *sc,
                         int64_t k, const int planes)
{
    const size_t bytes = cpu_qd_block_bytes(kind);
    const int64_t nb = k / SY_QK;
    __m512 acc = _mm512_setzero_ps();
    __m256 mins = _mm256_setzero_ps();
    int64_t i = 0;
    for (; i + 4 <= nb; i += 4, wb += 4 * bytes) {
        if (CPU_QD_PREFETCH > 0) {
            _mm_prefetch((const char *)wb + CPU_QD_PREFETCH, _MM_HINT_T0);
            _mm_prefetch((const char *)wb + CPU_QD_PREFETCH + 64, _MM_HINT_T0);
        }
        const __m128i h = _mm_setr_epi32((int)cpu_qd_dm(kind, wb), (int)cpu_qd_dm(kind, wb + bytes),
                                         (int)cpu_qd_dm(kind, wb + 2 * bytes),
                                         (int)cpu_qd_dm(kind, wb + 3 * bytes));
        const __m256 s = _mm256_mul_ps(_mm256_cvtph_ps(h), _mm256_loadu_ps(sc + 2 * i));
        const __m512 s5 = _mm512_castps256_ps512(s);
        const int8_t *q8 = q + i * SY_QK;
        if (kind == CPU_QD_Q8_0) {
            const __m512i a = _mm512_inserti64x4(_mm512_castsi256_si512(cpu_qd_load(wb + 2)),
                                                 cpu_qd_load(wb + bytes + 2), 1);
            const __m512i b = _mm512_inserti64x4(_mm512_castsi256_si512(cpu_qd_load(wb + 2 * bytes + 2)),
                                                 cpu_qd_load(wb + 3 * bytes + 2), 1);
            __m512i pa = cpu_z_dot2q8(a, q8), pb = cpu_z_dot2q8(b, q8 + 64);
            if (planes == 2) {
                pa = cpu_z_join(pa, cpu_z_dot2q8(a, q8 + k));
                pb = cpu_z_join(pb, cpu_z_dot2q8(b, q8 + k + 64));
            }
            const __m512i ia = _mm512_setr_epi32(0, 0, 0, 0, 0, 0, 0, 0, 2, 2, 2, 2, 2, 2, 2, 2);
            const __m512i ib = _mm512_setr_epi32(4, 4, 4, 4, 4, 4, 4, 4, 6, 6, 6, 6, 6, 6, 6, 6);
            acc = _mm512_fmadd_ps(_mm512_cvtepi32_ps(pa), _mm512_permutexvar_ps(ia, s5), acc);
            acc = _mm512_fmadd_ps(_mm512_cvtepi32_ps(pb), _mm512_permutexvar_ps(ib, s5), acc);
            continue;
        }
        __m512i hi;
        const __m512i lo = cpu_z_quants4(kind, wb, bytes, &hi);
        __m512i p = cpu_z_dot4blocks(lo, hi, q8);
        if (planes == 2)
            p = cpu_z_join(p, cpu_z_dot4blocks(lo, hi, q8 + k));
        mins = _mm256_add_ps(mins, s);
        const __m512i idx = _mm512_setr_epi32(0, 0, 0, 0, 2, 2, 2, 2, 4, 4, 4, 4, 6, 6, 6, 6);
        acc = _mm512_fmadd_ps(_mm512_cvtepi32_ps(p), _mm512_permutexvar_ps(idx, s5), acc);
    }
    float sum = _mm512_reduce_add_ps(acc);
    if (kind != CPU_QD_Q8_0) {
        /* Odd lanes of |mins| hold the min terms. */
        const __m256 m = _mm256_permutevar8x32_ps(mins, _mm256_setr_epi32(1, 3, 5, 7, 1, 3, 5, 7));
        sum += cpu_qd_min_factor(kind) * cpu_qd_hsum(_mm256_blend_ps(m, _mm256_setzero_ps(), 0xF0));
    }
    /* Up to three blocks left: one pair, then one block. */
    if (i + 2 <= nb) {
        const __m128 ws = cpu_qd_pair_scales(kind, wb, bytes);
        const __m128 s = _mm_mul_ps(ws, _mm_loadu_ps(sc + 2 * i));
        if (kind == CPU_QD_Q8_0) {
            sum += cpu_qd_tail_block(kind, wb, q + i * SY_QK, sc + 2 * i, planes, k) +
                   cpu_qd_tail_block(kind, wb + bytes, q + (i + 1) * SY_QK, sc + 2 * (i + 1), planes, k);
        } else {
            __m256i lo, hi;
            cpu_qd_pair_quants(kind, wb, bytes, &lo, &hi);
            const __m256i p = cpu_qd_pair_dot(lo, hi, q + i * SY_QK, planes, k);
            const __m128 m = _mm_shuffle_ps(s, s, 0x0D);
            sum += cpu_qd_hsum(_mm256_mul_ps(_mm256_cvtepi32_ps(p), cpu_qd_pair_spread(s))) +
                   cpu_qd_min_factor(kind) * _mm_cvtss_f32(_mm_add_ss(m, _mm_movehdup_ps(m)));
        }
        i += 2;
        wb += 2 * bytes;
    }
    if (i < nb)
        sum += cpu_qd_tail_block(kind, wb, q + i * SY_QK, sc + 2 * i, planes, k);
    return sum;
}

#define CPU_Z_QDOT(name, kind)                                                                \
    CPU_QD_EXPORT void cpu_avx512z_##name(CPU_QDOT_ARGS)                                      \
    {                                                                                         \
        if (nc != 1) {                                                                        \
            cpu_avx512_##name(w, x, x_stride, nc, k, planes, out);                            \
            return;                                                                           \
        }                                                                                     \
        const float *sc = cpu_q8_scales(x, k, planes);                                        \
        out[0] = planes == 2 ? cpu_z_qdot1(kind, w, x, sc, k, 2) : cpu_z_qdot1(kind, w, x, sc, k, 1); \
    }

CPU_Z_QDOT(qdot_q4_0, CPU_QD_Q4_0)
CPU_Z_QDOT(qdot_q4_1, CPU_QD_Q4_1)
CPU_Z_QDOT(qdot_q5_0, CPU_QD_Q5_0)
CPU_Z_QDOT(qdot_q5_1, CPU_QD_Q5_1)
CPU_Z_QDOT(qdot_q8_0, CPU_QD_Q8_0)

/* Decode of Q4_0, Q4_1 and Q8_0 rows against one column, CPU_Z_ROWS rows
 * per pass: the rows share the column's loads (and the 4-bit formats the
 * shuffles of its halves) and the weight streams of the pass are read side
 * by side (more streams for the prefetchers).  Q8_0 takes its quants as
 * unsigned bytes q + 128 (one xor instead of the sign tricks), and the
 * offset comes off as Q4_0's -8 does: a min term of -128 * d * ds per
 * block (Q4_1's is + m * ds).  The planes of q16 combine as (hi << 7) + lo
 * in the same accumulator. */
#define CPU_Z_ROWS 4

/* Weights are prefetched into L2 this many passes ahead.  Into L1
 * (prefetcht0) one pass ahead, decode streamed weights at 9-11 GB/s on
 * one Zen 4 core whose plain read runs at 29-32 GB/s (the L1 miss
 * buffers fill up); into L2 two passes ahead, at 19-29 GB/s (Q4_0 is then
 * bound by its arithmetic, Q8_0 by memory; /tmp rows bench, K = 2048,
 * 256 MiB of rows). */
#ifndef CPU_Z_PF_PASSES
#define CPU_Z_PF_PASSES 2
#endif

/* Q4_0 and Q4_1 as 16-bit words.  Four Q4_0 blocks (b = 0..3) are 72
 * bytes: word 9b is the scale d, words 9b + 1 .. 9b + 8 the quants; four
 * Q4_1 blocks 80 bytes: words 10b, 10b + 1 are (d, m), words 10b + 2 ..
 * 10b + 9 the quants.  Per format, the first 32 indices gather the quants
 * of the four blocks from the first 64 bytes and the rest, the next 8 the
 * (d, d) or (d, m) pair of each block. */
static const uint16_t cpu_z_q4_words[2][64] __attribute__((aligned(64))) = {
    {1,  2,  3,  4,  5,  6,  7,  8,  10, 11, 12, 13, 14, 15, 16, 17, 19, 20, 21, 22,
     23, 24, 25, 26, 28, 29, 30, 31, 32, 33, 34, 35, 0,  0,  9,  9,  18, 18, 27, 27},
    {2,  3,  4,  5,  6,  7,  8,  9,  12, 13, 14, 15, 16, 17, 18, 19, 22, 23, 24, 25,
     26, 27, 28, 29, 32, 33, 34, 35, 36, 37, 38, 39, 0,  1,  10, 11, 20, 21, 30, 31}};

/* |packed|: Q4_0/Q4_1 rows as cpu_repack.c lays them out, each group of
 * four blocks its four scale headers and then its 64 quant bytes. */
CPU_QD void cpu_z_rows1(enum cpu_qd_kind kind, const int nr, const uint8_t *w, size_t w_stride,
                        const int8_t *q, const float *sc, int64_t k, const int planes, float *out,
                        const bool packed)
{
    const size_t bytes = cpu_qd_block_bytes(kind);
    const int64_t nb = k / SY_QK;
    const size_t pf_ahead = CPU_Z_PF_PASSES * (size_t)nr * w_stride;
    const __m512i flip = _mm512_set1_epi8((char)0x80);
    const __m512i i4 = _mm512_setr_epi32(0, 0, 0, 0, 2, 2, 2, 2, 4, 4, 4, 4, 6, 6, 6, 6);
    const __m512i ia = _mm512_setr_epi32(0, 0, 0, 0, 0, 0, 0, 0, 2, 2, 2, 2, 2, 2, 2, 2);
    const __m512i ib = _mm512_setr_epi32(4, 4, 4, 4, 4, 4, 4, 4, 6, 6, 6, 6, 6, 6, 6, 6);
    const uint16_t *q4_words = cpu_z_q4_words[kind == CPU_QD_Q4_1];
    const __m512i q4_quants = cpu_z_load(q4_words), q4_scales = cpu_z_load(q4_words + 32);
    const __m512i low4 = _mm512_set1_epi8(0x0F);
    __m512 acc[CPU_Z_ROWS];
    __m256 mins[CPU_Z_ROWS];
    const uint8_t *wr[CPU_Z_ROWS];
#pragma GCC unroll 4
    for (int r = 0; r < nr; r++) {
        acc[r] = _mm512_setzero_ps();
        mins[r] = _mm256_setzero_ps();
        wr[r] = w + (size_t)r * w_stride;
    }
    int64_t i = 0;
    for (; i + 4 <= nb; i += 4) {
        const int8_t *q8 = q + i * SY_QK;
        const __m256 xs = _mm256_loadu_ps(sc + 2 * i);
        __m512i xa[2], xb[2];
#pragma GCC unroll 2
        for (int pl = 0; pl < planes; pl++) {
            const __m512i a = cpu_z_load(q8 + pl * k), b = cpu_z_load(q8 + pl * k + 64);
            if (kind != CPU_QD_Q8_0) {
                xa[pl] = _mm512_shuffle_i64x2(a, b, 0x88);
                xb[pl] = _mm512_shuffle_i64x2(a, b, 0xDD);
            } else {
                xa[pl] = a;
                xb[pl] = b;
            }
        }
#pragma GCC unroll 4
        for (int r = 0; r < nr; r++) {
            const uint8_t *wb = wr[r];
            wr[r] += 4 * bytes;
            if (CPU_QD_PREFETCH > 0) {
                /* The same place in a later pass's row, into L2. */
                const char *pf = (const char *)wb + pf_ahead;
                _mm_prefetch(pf, _MM_HINT_T1);
                _mm_prefetch(pf + 64, _MM_HINT_T1);
                if (kind == CPU_QD_Q8_0)
                    _mm_prefetch(pf + 128, _MM_HINT_T1);
            }
            __m512i ua, ub;
            __m128i h;
            if (kind != CPU_QD_Q8_0 && packed) {
                const size_t head = 4 * (bytes - 16);
                const __m512i v = cpu_z_load(wb + head);
                h = kind == CPU_QD_Q4_0 ? _mm_loadl_epi64((const __m128i *)wb) : _mm_loadu_si128((const __m128i *)wb);
                if (kind == CPU_QD_Q4_0)
                    h = _mm_unpacklo_epi16(h, h);
                ua = _mm512_and_si512(v, low4);
                ub = _mm512_and_si512(_mm512_srli_epi16(v, 4), low4);
            } else if (kind != CPU_QD_Q8_0) {
                /* Two word permutes take the quants and the scale pairs
                 * out of the four blocks. */
                const __m512i a = cpu_z_load(wb);
                const __m512i b = _mm512_castsi128_si512(
                    kind == CPU_QD_Q4_0 ? _mm_loadl_epi64((const __m128i *)(wb + 64))
                                        : _mm_loadu_si128((const __m128i *)(wb + 64)));
                const __m512i v = _mm512_permutex2var_epi16(a, q4_quants, b);
                h = _mm512_castsi512_si128(_mm512_permutexvar_epi16(q4_scales, a));
                ua = _mm512_and_si512(v, low4);
                ub = _mm512_and_si512(_mm512_srli_epi16(v, 4), low4);
            } else {
                h = _mm_setr_epi32((int)cpu_qd_dm(kind, wb), (int)cpu_qd_dm(kind, wb + bytes),
                                   (int)cpu_qd_dm(kind, wb + 2 * bytes), (int)cpu_qd_dm(kind, wb + 3 * bytes));
                ua = _mm512_xor_si512(_mm512_inserti64x4(_mm512_castsi256_si512(cpu_qd_load(wb + 2)),
                                                         cpu_qd_load(wb + bytes + 2), 1),
                                      flip);
                ub = _mm512_xor_si512(_mm512_inserti64x4(_mm512_castsi256_si512(cpu_qd_load(wb + 2 * bytes + 2)),
                                                         cpu_qd_load(wb + 3 * bytes + 2), 1),
                                      flip);
            }
            const __m256 s = _mm256_mul_ps(_mm256_cvtph_ps(h), xs);
            const __m512 s5 = _mm512_castps256_ps512(s);
            mins[r] = _mm256_add_ps(mins[r], s);
            __m512i pa = _mm512_dpbusd_epi32(_mm512_setzero_si512(), ua, xa[0]), pb = pa;
            if (kind != CPU_QD_Q8_0)
                pa = _mm512_dpbusd_epi32(pa, ub, xb[0]);
            else
                pb = _mm512_dpbusd_epi32(_mm512_setzero_si512(), ub, xb[0]);
            if (planes == 2) {
                pa = _mm512_dpbusd_epi32(_mm512_slli_epi32(pa, 7), ua, xa[1]);
                if (kind != CPU_QD_Q8_0)
                    pa = _mm512_dpbusd_epi32(pa, ub, xb[1]);
                else
                    pb = _mm512_dpbusd_epi32(_mm512_slli_epi32(pb, 7), ub, xb[1]);
            }
            if (kind != CPU_QD_Q8_0) {
                acc[r] = _mm512_fmadd_ps(_mm512_cvtepi32_ps(pa), _mm512_permutexvar_ps(i4, s5), acc[r]);
            } else {
                acc[r] = _mm512_fmadd_ps(_mm512_cvtepi32_ps(pa), _mm512_permutexvar_ps(ia, s5), acc[r]);
                acc[r] = _mm512_fmadd_ps(_mm512_cvtepi32_ps(pb), _mm512_permutexvar_ps(ib, s5), acc[r]);
            }
        }
    }
    const float mf = kind == CPU_QD_Q8_0 ? -128.0f : cpu_qd_min_factor(kind);
#pragma GCC unroll 4
    for (int r = 0; r < nr; r++) {
        /* Odd lanes of |mins| hold the min terms. */
        const __m256 m = _mm256_permutevar8x32_ps(mins[r], _mm256_setr_epi32(1, 3, 5, 7, 1, 3, 5, 7));
        float sum = _mm512_reduce_add_ps(acc[r]) +
                    mf * cpu_qd_hsum(_mm256_blend_ps(m, _mm256_setzero_ps(), 0xF0));
        for (int64_t j = i; j < nb; j++)
            sum += cpu_qd_tail_block(kind, wr[r] + (size_t)(j - i) * bytes, q + j * SY_QK, sc + 2 * j,
                                     planes, k);
        out[r] = sum;
    }
}

/* Rows of packed Q4_0/Q4_1 (cpu_repack.c) against one column, 4 * |nq|
 * rows per pass.  cpu_z_rows1 scales each row's int32 dot sums apart (a
 * conversion, a scale permute and an FMA per row and group of four
 * blocks); here the sums of four rows are first reduced to one int32 per
 * (row, block) and those 16 go through one conversion and one FMA, their
 * scales made from the four rows' headers by one f16 conversion.  Lane
 * 4r + b of |acc| and |mins| holds row r's block b.  The high nibbles come
 * out by one GF(2) affine byte shift where the CPU has GFNI
 * (CPU_Z_GFNI), else by a shift and a mask. */
#ifndef CPU_Z_GFNI
#define CPU_Z_GFNI 0
#endif

CPU_QD void cpu_z_rows4(enum cpu_qd_kind kind, const int nq, const uint8_t *w, size_t w_stride,
                        const int8_t *q, const float *sc, int64_t k, const int planes, float *out,
                        const bool packed)
{
    const size_t bytes = cpu_qd_block_bytes(kind);
    const size_t head = 4 * (bytes - 16), group = head + 64;
    const int64_t nb = k / SY_QK;
    const size_t pf_ahead = CPU_Z_PF_PASSES * 4 * (size_t)nq * w_stride;
    const __m512i low4 = _mm512_set1_epi8(0x0F);
    /* (lane 4b + r) -> (lane 4r + b) */
    const __m512i to_rb = _mm512_setr_epi32(0, 4, 8, 12, 1, 5, 9, 13, 2, 6, 10, 14, 3, 7, 11, 15);
    const __m512i i_dx = _mm512_setr_epi32(0, 2, 4, 6, 0, 2, 4, 6, 0, 2, 4, 6, 0, 2, 4, 6);
    const __m512i i_ds = _mm512_setr_epi32(1, 3, 5, 7, 1, 3, 5, 7, 1, 3, 5, 7, 1, 3, 5, 7);
    /* Unpacked rows: the quants as cpu_z_rows1 gathers them, and the
     * header words (Q4_0: words 0, 9, 18, 27; Q4_1: those of its table). */
    const uint16_t *q4_words = cpu_z_q4_words[kind == CPU_QD_Q4_1];
    const __m512i q4_quants = cpu_z_load(q4_words);
    const __m512i q4_heads = kind == CPU_QD_Q4_0
                                 ? _mm512_castsi128_si512(_mm_setr_epi16(0, 9, 18, 27, 0, 0, 0, 0))
                                 : cpu_z_load(q4_words + 32);
    __m512 acc[2], mins[2];
#pragma GCC unroll 2
    for (int h = 0; h < nq; h++) {
        acc[h] = _mm512_setzero_ps();
        mins[h] = _mm512_setzero_ps();
    }
    int64_t i = 0;
    for (; i + 4 <= nb; i += 4) {
        const int8_t *q8 = q + i * SY_QK;
        const __m512 xs = _mm512_castps256_ps512(_mm256_loadu_ps(sc + 2 * i));
        const __m512 dx = _mm512_permutexvar_ps(i_dx, xs), ds = _mm512_permutexvar_ps(i_ds, xs);
        __m512i xa[2], xb[2];
        /* Plane 1 (q16's low bits) is read only when there is one. */
#pragma GCC unroll 2
        for (int pl = 0; pl < 2; pl++) {
            if (pl == 0 || planes == 2) {
                const __m512i a = cpu_z_load(q8 + pl * k), b = cpu_z_load(q8 + pl * k + 64);
                xa[pl] = _mm512_shuffle_i64x2(a, b, 0x88);
                xb[pl] = _mm512_shuffle_i64x2(a, b, 0xDD);
            } else {
                xa[pl] = xb[pl] = _mm512_setzero_si512();
            }
        }
        const size_t at = (size_t)(i / 4) * group;
#pragma GCC unroll 2
        for (int h = 0; h < nq; h++) {
            const uint8_t *wq = w + (size_t)(4 * h) * w_stride + at;
            __m512i p[4];
            __m128i hr[4];
#pragma GCC unroll 4
            for (int r = 0; r < 4; r++) {
                const uint8_t *wb = wq + (size_t)r * w_stride;
                if (CPU_QD_PREFETCH > 0) {
                    _mm_prefetch((const char *)wb + pf_ahead, _MM_HINT_T1);
                    _mm_prefetch((const char *)wb + pf_ahead + 64, _MM_HINT_T1);
                }
                __m512i v;
                if (packed) {
                    v = cpu_z_load(wb + head);
                } else {
                    /* The quants of the four blocks in the packed order, and
                     * the headers (Q4_0: d of each; Q4_1: its (d, m) pair). */
                    const __m512i a = cpu_z_load(wb);
                    const __m512i b = _mm512_castsi128_si512(
                        kind == CPU_QD_Q4_0 ? _mm_loadl_epi64((const __m128i *)(wb + 64))
                                            : _mm_loadu_si128((const __m128i *)(wb + 64)));
                    v = _mm512_permutex2var_epi16(a, q4_quants, b);
                    hr[r] = _mm512_castsi512_si128(_mm512_permutexvar_epi16(q4_heads, a));
                }
                const __m512i ua = _mm512_and_si512(v, low4);
#if CPU_Z_GFNI
                /* Each byte shifted right by 4: output bit j is input bit j + 4. */
                const __m512i ub = _mm512_gf2p8affine_epi64_epi8(
                    v, _mm512_set1_epi64((long long)0x1020408000000000ull), 0);
#else
                const __m512i ub = _mm512_and_si512(_mm512_srli_epi16(v, 4), low4);
#endif
                __m512i s = _mm512_dpbusd_epi32(_mm512_setzero_si512(), ua, xa[0]);
                s = _mm512_dpbusd_epi32(s, ub, xb[0]);
                if (planes == 2) {
                    s = _mm512_dpbusd_epi32(_mm512_slli_epi32(s, 7), ua, xa[1]);
                    s = _mm512_dpbusd_epi32(s, ub, xb[1]);
                }
                p[r] = s;
            }
            /* Each 128-bit lane b: the sums of rows 0..3 over block b. */
            const __m512i t01 = _mm512_add_epi32(_mm512_unpacklo_epi32(p[0], p[1]),
                                                 _mm512_unpackhi_epi32(p[0], p[1]));
            const __m512i t23 = _mm512_add_epi32(_mm512_unpacklo_epi32(p[2], p[3]),
                                                 _mm512_unpackhi_epi32(p[2], p[3]));
            const __m512i u = _mm512_add_epi32(_mm512_unpacklo_epi64(t01, t23),
                                               _mm512_unpackhi_epi64(t01, t23));
            const __m512 f = _mm512_cvtepi32_ps(_mm512_permutexvar_epi32(to_rb, u));
            __m512 d, m;
            if (packed) {
#pragma GCC unroll 4
                for (int r = 0; r < 4; r++)
                    hr[r] = kind == CPU_QD_Q4_0
                                ? _mm_loadl_epi64((const __m128i *)(wq + (size_t)r * w_stride))
                                : _mm_loadu_si128((const __m128i *)(wq + (size_t)r * w_stride));
            }
            if (kind == CPU_QD_Q4_0) {
                const __m256i hd = _mm256_inserti128_si256(
                    _mm256_castsi128_si256(_mm_unpacklo_epi64(hr[0], hr[1])),
                    _mm_unpacklo_epi64(hr[2], hr[3]), 1);
                d = m = _mm512_cvtph_ps(hd);
            } else {
                /* Four (d, m) pairs a row: d the low half of each 32-bit word. */
                __m512i hdm = _mm512_castsi128_si512(hr[0]);
                hdm = _mm512_inserti32x4(hdm, hr[1], 1);
                hdm = _mm512_inserti32x4(hdm, hr[2], 2);
                hdm = _mm512_inserti32x4(hdm, hr[3], 3);
                d = _mm512_cvtph_ps(_mm512_cvtepi32_epi16(hdm));
                m = _mm512_cvtph_ps(_mm512_cvtepi32_epi16(_mm512_srli_epi32(hdm, 16)));
            }
            acc[h] = _mm512_fmadd_ps(f, _mm512_mul_ps(d, dx), acc[h]);
            mins[h] = _mm512_fmadd_ps(m, ds, mins[h]);
        }
    }
    const __m512 mf = _mm512_set1_ps(cpu_qd_min_factor(kind));
#pragma GCC unroll 2
    for (int h = 0; h < nq; h++) {
        const __m512 a = _mm512_fmadd_ps(mins[h], mf, acc[h]);
        __m128 r0 = _mm512_extractf32x4_ps(a, 0), r1 = _mm512_extractf32x4_ps(a, 1);
        __m128 r2 = _mm512_extractf32x4_ps(a, 2), r3 = _mm512_extractf32x4_ps(a, 3);
        _MM_TRANSPOSE4_PS(r0, r1, r2, r3);
        __m128 sum = _mm_add_ps(_mm_add_ps(r0, r1), _mm_add_ps(r2, r3));
        float o[4];
        _mm_storeu_ps(o, sum);
        /* Blocks past the last group of four keep the plain layout. */
        const uint8_t *wt = w + (size_t)(4 * h) * w_stride + (size_t)(i / 4) * group;
        for (int r = 0; r < 4; r++) {
            for (int64_t j = i; j < nb; j++)
                o[r] += cpu_qd_tail_block(kind, wt + (size_t)r * w_stride + (size_t)(j - i) * bytes,
                                          q + j * SY_QK, sc + 2 * j, planes, k);
            out[4 * h + r] = o[r];
        }
    }
}

#define CPU_Z_QDOT_ROWS4(name, kind, packed)                                                  \
    CPU_QD_EXPORT void cpu_avx512z_##name(CPU_QDOT_ROWS_ARGS)                                 \
    {                                                                                         \
        const float *sc = cpu_q8_scales(x, k, planes);                                        \
        const uint8_t *wn = w;                                                                \
        int64_t n = 0;                                                                        \
        for (; n + 8 <= rows; n += 8) {                                                       \
            if (planes == 2)                                                                  \
                cpu_z_rows4(kind, 2, wn + (size_t)n * w_stride, w_stride, x, sc, k, 2,        \
                            out + n, packed);                                                 \
            else                                                                              \
                cpu_z_rows4(kind, 2, wn + (size_t)n * w_stride, w_stride, x, sc, k, 1,        \
                            out + n, packed);                                                 \
        }                                                                                     \
        if (n + 4 <= rows) {                                                                  \
            if (planes == 2)                                                                  \
                cpu_z_rows4(kind, 1, wn + (size_t)n * w_stride, w_stride, x, sc, k, 2,        \
                            out + n, packed);                                                 \
            else                                                                              \
                cpu_z_rows4(kind, 1, wn + (size_t)n * w_stride, w_stride, x, sc, k, 1,        \
                            out + n, packed);                                                 \
            n += 4;                                                                           \
        }                                                                                     \
        for (; n < rows; n++) {                                                               \
            if (planes == 2)                                                                  \
                cpu_z_rows1(kind, 1, wn + (size_t)n * w_stride, w_stride, x, sc, k, 2,        \
                            out + n, packed);                                                 \
            else                                                                              \
                cpu_z_rows1(kind, 1, wn + (size_t)n * w_stride, w_stride, x, sc, k, 1,        \
                            out + n, packed);                                                 \
        }                                                                                     \
    }

#define CPU_Z_QDOT_ROWS(name, kind, packed)                                                   \
    CPU_QD_EXPORT void cpu_avx512z_##name(CPU_QDOT_ROWS_ARGS)                                 \
    {                                                                                         \
        const float *sc = cpu_q8_scales(x, k, planes);                                        \
        int64_t n = 0;                                                                        \
        for (; n + CPU_Z_ROWS <= rows; n += CPU_Z_ROWS) {                                     \
            const uint8_t *wn = (const uint8_t *)w + (size_t)n * w_stride;                    \
            if (planes == 2)                                                                  \
                cpu_z_rows1(kind, CPU_Z_ROWS, wn, w_stride, x, sc, k, 2, out + n, packed);    \
            else                                                                              \
                cpu_z_rows1(kind, CPU_Z_ROWS, wn, w_stride, x, sc, k, 1, out + n, packed);    \
        }                                                                                     \
        for (; n < rows; n++) {                                                               \
            const uint8_t *wn = (const uint8_t *)w + (size_t)n * w_stride;                    \
            if (planes == 2)                                                                  \
                cpu_z_rows1(kind, 1, wn, w_stride, x, sc, k, 2, out + n, packed);             \
            else                                                                              \
                cpu_z_rows1(kind, 1, wn, w_stride, x, sc, k, 1, out + n, packed);             \
        }                                                                                     \
    }

CPU_Z_QDOT_ROWS4(qdot_rows_q4_0, CPU_QD_Q4_0, false)
CPU_Z_QDOT_ROWS4(qdot_rows_q4_1, CPU_QD_Q4_1, false)
CPU_Z_QDOT_ROWS(qdot_rows_q8_0, CPU_QD_Q8_0, false)
CPU_Z_QDOT_ROWS4(qdot_rows_q4_0_packed, CPU_QD_Q4_0, true)
CPU_Z_QDOT_ROWS4(qdot_rows_q4_1_packed, CPU_QD_Q4_1, true)

/* ------------------------------------------------ 512-bit prefill GEMM */

/* Panels of 16 columns, laid out as the template's panels of 8: per block
 * and plane int8 qs[8][16][4], then float d[16], ds[16], ds_lo[16]. */
#define CPU_Z_COLS 16
#define CPU_Z_PLANE_BYTES (32 * CPU_Z_COLS)

CPU_QD size_t cpu_z_block_bytes(int planes)
{
    return (size_t)planes * CPU_Z_PLANE_BYTES + 3 * sizeof(float) * CPU_Z_COLS;
}

CPU_QD_EXPORT void cpu_avx512_pack_panel16(const void *cols, size_t col_stride, int nc, int64_t k,
                                           int planes, void *panel)
{
    uint8_t *p = panel;
    const size_t block_bytes = cpu_z_block_bytes(planes);
    for (int64_t b = 0; b < k / 32; b++, p += block_bytes) {
        float *d = (float *)(p + planes * CPU_Z_PLANE_BYTES);
        for (int c = 0; c < CPU_Z_COLS; c++) {
            if (c >= nc) {
                for (int pl = 0; pl < planes; pl++)
                    for (int g = 0; g < 8; g++)
                        memset(p + pl * CPU_Z_PLANE_BYTES + (g * CPU_Z_COLS + c) * 4, 0, 4);
                d[c] = d[CPU_Z_COLS + c] = d[2 * CPU_Z_COLS + c] = 0.0f;
                continue;
            }
            const uint8_t *col = (const uint8_t *)cols + (size_t)c * col_stride;
            int lo16 = 0;
            for (int pl = 0; pl < planes; pl++) {
                const int8_t *q = (const int8_t *)col + pl * k + 32 * b;
                for (int g = 0; g < 8; g++)
                    memcpy(p + pl * CPU_Z_PLANE_BYTES + (g * CPU_Z_COLS + c) * 4, q + 4 * g, 4);
                int sum = 0;
                for (int j = 0; j < 16; j++)
                    sum += q[j];
                lo16 += planes == 2 && pl == 0 ? 128 * sum : sum;
            }
            const float *sc = cpu_q8_scales(col, k, planes) + 2 * b;
            d[c] = sc[0];
            d[CPU_Z_COLS + c] = sc[1];
            d[2 * CPU_Z_COLS + c] = sc[0] * (float)lo16;
        }
    }
}

/* The dot of weight groups g0..g0+3 (broadcast in |wg|) with the panel's
 * groups, per column, over the planes. */
CPU_QD __m512i cpu_z_dot4(const __m512i *wg, const uint8_t *pq)
{
    const __m512i z = _mm512_setzero_si512();
    const __m512i a = _mm512_dpbusd_epi32(_mm512_dpbusd_epi32(z, wg[0], cpu_z_load(pq)), wg[1],
                                          cpu_z_load(pq + 64));
    const __m512i b = _mm512_dpbusd_epi32(_mm512_dpbusd_epi32(z, wg[2], cpu_z_load(pq + 128)),
                                          wg[3], cpu_z_load(pq + 192));
    return _mm512_add_epi32(a, b);
}

CPU_QD __m512i cpu_z_dot4p(const __m512i *wg, const uint8_t *pq, int planes)
{
    const __m512i hi = cpu_z_dot4(wg, pq);
    if (planes == 1)
        return hi;
    return _mm512_add_epi32(_mm512_slli_epi32(hi, 7), cpu_z_dot4(wg, pq + CPU_Z_PLANE_BYTES));
}

/* out[0..32) = one decoded row against two panels of 16. */
CPU_QD void cpu_z_row_panels2(int sixteen, const int planes, const cpu_qg_row *r,
                              const uint8_t *p0, const uint8_t *p1, int64_t nb, float *out)
{
    const size_t block_bytes = cpu_z_block_bytes(planes);
    __m512 acc[2] = {_mm512_setzero_ps(), _mm512_setzero_ps()};
    __m512 accm[2] = {_mm512_setzero_ps(), _mm512_setzero_ps()};
    const uint8_t *pan[2] = {p0, p1};
    for (int64_t b = 0; b < nb; b++) {
        __m512i wg[8];
        for (int g = 0; g < 8; g++)
            wg[g] = _mm512_set1_epi32((int)cpu_qd_u32(r->q + 32 * b + 4 * g));
        for (int j = 0; j < 2; j++) {
            const uint8_t *pb = pan[j] + b * block_bytes;
            const __m512i sa = cpu_z_dot4p(wg, pb, planes);
            const __m512i sb = cpu_z_dot4p(wg + 4, pb + 4 * 64, planes);
            const float *pf = (const float *)(pb + planes * CPU_Z_PLANE_BYTES);
            const __m512 d = _mm512_loadu_ps(pf), ds = _mm512_loadu_ps(pf + CPU_Z_COLS);
            if (sixteen) {
                const __m512 dlo = _mm512_loadu_ps(pf + 2 * CPU_Z_COLS);
                acc[j] = _mm512_fmadd_ps(_mm512_cvtepi32_ps(sa),
                                         _mm512_mul_ps(d, _mm512_set1_ps(r->scale[2 * b])), acc[j]);
                acc[j] = _mm512_fmadd_ps(_mm512_cvtepi32_ps(sb),
                                         _mm512_mul_ps(d, _mm512_set1_ps(r->scale[2 * b + 1])), acc[j]);
                accm[j] = _mm512_fmadd_ps(_mm512_set1_ps(r->min[2 * b]), dlo, accm[j]);
                accm[j] = _mm512_fmadd_ps(_mm512_set1_ps(r->min[2 * b + 1]), _mm512_sub_ps(ds, dlo),
                                          accm[j]);
            } else {
                acc[j] = _mm512_fmadd_ps(_mm512_cvtepi32_ps(_mm512_add_epi32(sa, sb)),
                                         _mm512_mul_ps(d, _mm512_set1_ps(r->scale[b])), acc[j]);
                accm[j] = _mm512_fmadd_ps(_mm512_set1_ps(r->min[b]), ds, accm[j]);
            }
        }
    }
    _mm512_storeu_ps(out, _mm512_add_ps(acc[0], accm[0]));
    _mm512_storeu_ps(out + CPU_Z_COLS, _mm512_add_ps(acc[1], accm[1]));
}

/* Decodes a packed Q4_0/Q4_1 row (cpu_repack.c) into |r|: the groups of
 * four blocks here, the blocks after the last group as they were. */
CPU_QD void cpu_z_decode_packed(enum cpu_qd_kind kind, const uint8_t *w, int64_t k, cpu_qg_row *r)
{
    const size_t bytes = cpu_qd_block_bytes(kind), head = bytes - 16;
    const int64_t nb = k / SY_QK;
    int64_t b = 0;
    for (; b + 4 <= nb; b += 4, w += 4 * bytes) {
        for (int j = 0; j < 4; j++) {
            cpu_qg_store(r->q + 32 * (b + j), cpu_qd_nibbles(w + 4 * head + 16 * j));
            const __m128 dm = _mm_cvtph_ps(_mm_cvtsi32_si128((int)cpu_qd_dm(kind, w + head * j)));
            r->scale[b + j] = _mm_cvtss_f32(dm);
            r->min[b + j] = kind == CPU_QD_Q4_1 ? _mm_cvtss_f32(_mm_movehdup_ps(dm))
                                                : cpu_qd_min_factor(kind) * _mm_cvtss_f32(dm);
        }
    }
    if (b < nb) {
        cpu_qg_row tail = {.q = r->q + 32 * b, .scale = r->scale + b, .min = r->min + b};
        cpu_qg_decode32(kind, w, (nb - b) * SY_QK, &tail);
    }
}

/* Decodes weight row |w| of |kind| into |r|; a negative |kind| is the
 * packed layout of -kind. */
CPU_QD void cpu_z_decode(int kind, const uint8_t *w, int64_t k, cpu_qg_row *r)
{
    if (kind < 0) {
        cpu_z_decode_packed(kind == -SY_DTYPE_Q4_1 ? CPU_QD_Q4_1 : CPU_QD_Q4_0, w, k, r);
        return;
    }
    switch (kind) {
    case SY_DTYPE_Q4_K:
    case SY_DTYPE_Q5_K:
        cpu_qg_decode_k45(kind == SY_DTYPE_Q5_K, w, k, r);
        break;
    case SY_DTYPE_Q6_K:
        cpu_qg_decode_q6k(w, k, r);
        break;
    default:
        cpu_qg_decode32(kind == SY_DTYPE_Q4_0   ? CPU_QD_Q4_0
                        : kind == SY_DTYPE_Q4_1 ? CPU_QD_Q4_1
                        : kind == SY_DTYPE_Q5_0 ? CPU_QD_Q5_0
                        : kind == SY_DTYPE_Q5_1 ? CPU_QD_Q5_1
                                                : CPU_QD_Q8_0,
                        w, k, r);
        break;
    }
}

/* The micro-kernel of the formats with one (scale, min) per 32 elements:
 * |nr| (1..CPU_QGEMM_ROWS) decoded rows against |npan| (1 or 2) panels of
 * 16 at |pan|, so a panel load serves every row and a weight broadcast
 * every panel.  Per block the int32 sums of the hi plane are kept in one
 * register per row and panel, shifted by 7 and then take the lo plane's
 * products (q16: 128 * hi + lo, as cpu_z_join); then sum * d is scaled by
 * the row's scale and the min term added.  out[r][16 * j + c]. */
CPU_QD void cpu_z_rows_panels(const int nr, const int npan, const int planes, const cpu_qg_row *rows,
                              const uint8_t *const *pan, int64_t nb, float out[][2 * CPU_Z_COLS])
{
    const size_t block_bytes = cpu_z_block_bytes(planes);
    __m512 acc[CPU_QGEMM_ROWS][2];
#pragma GCC unroll 8
    for (int r = 0; r < nr; r++)
        acc[r][0] = acc[r][1] = _mm512_setzero_ps();
    for (int64_t b = 0; b < nb; b++) {
        const uint8_t *pb[2] = {pan[0] + b * block_bytes, pan[npan - 1] + b * block_bytes};
        __m512i s[CPU_QGEMM_ROWS][2];
#pragma GCC unroll 8
        for (int r = 0; r < nr; r++)
            s[r][0] = s[r][1] = _mm512_setzero_si512();
#pragma GCC unroll 8
        for (int pl = 0; pl < planes; pl++) {
            if (pl == 1) {
                /* Broadcast the weights again rather than keep 32
                 * registers of them across the planes (spills). */
                __asm__ volatile("" ::: "memory");
#pragma GCC unroll 8
                for (int r = 0; r < nr; r++)
#pragma GCC unroll 2
                    for (int j = 0; j < npan; j++)
                        s[r][j] = _mm512_slli_epi32(s[r][j], 7);
            }
#pragma GCC unroll 8
            for (int g = 0; g < 8; g++) {
                const size_t at = (size_t)pl * CPU_Z_PLANE_BYTES + 64 * (size_t)g;
                __m512i x[2];
#pragma GCC unroll 2
                for (int j = 0; j < npan; j++)
                    x[j] = cpu_z_load(pb[j] + at);
#pragma GCC unroll 8
                for (int r = 0; r < nr; r++) {
                    const __m512i wg = _mm512_set1_epi32((int)cpu_qd_u32(rows[r].q + 32 * b + 4 * g));
#pragma GCC unroll 2
                    for (int j = 0; j < npan; j++)
                        s[r][j] = _mm512_dpbusd_epi32(s[r][j], wg, x[j]);
                }
            }
        }
        __m512 d[2], ds[2];
#pragma GCC unroll 2
        for (int j = 0; j < npan; j++) {
            const float *f = (const float *)(pb[j] + planes * CPU_Z_PLANE_BYTES);
            d[j] = _mm512_loadu_ps(f);
            ds[j] = _mm512_loadu_ps(f + CPU_Z_COLS);
        }
#pragma GCC unroll 8
        for (int r = 0; r < nr; r++) {
            const __m512 sc = _mm512_set1_ps(rows[r].scale[b]), mn = _mm512_set1_ps(rows[r].min[b]);
#pragma GCC unroll 2
            for (int j = 0; j < npan; j++) {
                acc[r][j] = _mm512_fmadd_ps(_mm512_mul_ps(_mm512_cvtepi32_ps(s[r][j]), d[j]), sc, acc[r][j]);
                acc[r][j] = _mm512_fmadd_ps(ds[j], mn, acc[r][j]);
            }
        }
    }
#pragma GCC unroll 8
    for (int r = 0; r < nr; r++)
#pragma GCC unroll 2
        for (int j = 0; j < npan; j++)
            _mm512_storeu_ps(out[r] + CPU_Z_COLS * j, acc[r][j]);
}

/* cpu_z_rows_panels with |nr| and |npan| constants in every call. */
CPU_QD void cpu_z_rows_panels_n(int nr, int npan, const int planes, const cpu_qg_row *rows,
                                const uint8_t *const *pan, int64_t nb, float out[][2 * CPU_Z_COLS])
{
    switch (nr * 2 + npan - 1) {
    case 9:
        cpu_z_rows_panels(4, 2, planes, rows, pan, nb, out);
        break;
    case 8:
        cpu_z_rows_panels(4, 1, planes, rows, pan, nb, out);
        break;
    case 7:
        cpu_z_rows_panels(3, 2, planes, rows, pan, nb, out);
        break;
    case 6:
        cpu_z_rows_panels(3, 1, planes, rows, pan, nb, out);
        break;
    case 5:
        cpu_z_rows_panels(2, 2, planes, rows, pan, nb, out);
        break;
    case 4:
        cpu_z_rows_panels(2, 1, planes, rows, pan, nb, out);
        break;
    case 3:
        cpu_z_rows_panels(1, 2, planes, rows, pan, nb, out);
        break;
    default:
        cpu_z_rows_panels(1, 1, planes, rows, pan, nb, out);
        break;
    }
}

CPU_QD void cpu_z_gemm(int kind, const uint8_t *w, size_t w_stride, int64_t rows,
                       const uint8_t *panels, int np, int64_t k, const int planes, float *y,
                       size_t y_stride, int ncols, void *scratch)
{
    const size_t panel_bytes = (size_t)(k / 32) * cpu_z_block_bytes(planes);
    if (kind == SY_DTYPE_Q6_K) {
        /* Scales per 16 elements: one row at a time. */
        cpu_qg_row r;
        cpu_qg_row_init(&r, scratch, k);
        for (int64_t n = 0; n < rows; n++, w += w_stride) {
            cpu_qg_decode_q6k(w, k, &r);
            for (int p = 0; p < np; p += 2) {
                float out[2 * CPU_Z_COLS];
                const uint8_t *p0 = panels + (size_t)p * panel_bytes;
                const uint8_t *p1 = p + 1 < np ? p0 + panel_bytes : p0;
                cpu_z_row_panels2(1, planes, &r, p0, p1, k / 32, out);
                const int c1 = (p + 2) * CPU_Z_COLS < ncols ? (p + 2) * CPU_Z_COLS : ncols;
                for (int c = p * CPU_Z_COLS; c < c1; c++)
                    y[(size_t)c * y_stride + (size_t)n] = out[c - p * CPU_Z_COLS];
            }
        }
        return;
    }
    cpu_qg_row r[CPU_QGEMM_ROWS];
    for (int i = 0; i < CPU_QGEMM_ROWS; i++)
        cpu_qg_row_init(&r[i], (uint8_t *)scratch + (size_t)i * cpu_qgemm_row_bytes(k), k);
    for (int64_t n = 0; n < rows; n += CPU_QGEMM_ROWS) {
        const int nr = rows - n < CPU_QGEMM_ROWS ? (int)(rows - n) : CPU_QGEMM_ROWS;
        for (int i = 0; i < nr; i++)
            cpu_z_decode(kind, w + (size_t)(n + i) * w_stride, k, &r[i]);
        for (int p = 0; p < np; p += 2) {
            float out[CPU_QGEMM_ROWS][2 * CPU_Z_COLS];
            const uint8_t *pan[2] = {panels + (size_t)p * panel_bytes,
                                     panels + (size_t)(p + 1) * panel_bytes};
            cpu_z_rows_panels_n(nr, p + 1 < np ? 2 : 1, planes, r, pan, k / 32, out);
            const int c1 = (p + 2) * CPU_Z_COLS < ncols ? (p + 2) * CPU_Z_COLS : ncols;
            for (int c = p * CPU_Z_COLS; c < c1; c++)
                for (int i = 0; i < nr; i++)
                    y[(size_t)c * y_stride + (size_t)(n + i)] = out[i][c - p * CPU_Z_COLS];
        }
    }
}

#define CPU_Z_DEFINE(name, dtype)                                                             \
    CPU_QD_EXPORT void cpu_avx512_##name(CPU_QGEMM_ARGS)                                      \
    {                                                                                         \
        if (planes == 2)                                                                      \
            cpu_z_gemm(dtype, w, w_stride, rows, panels, n_panels, k, 2, y, y_stride, ncols,  \
                       scratch);                                                              \
        else                                                                                  \
            cpu_z_gemm(dtype, w, w_stride, rows, panels, n_panels, k, 1, y, y_stride, ncols,  \
                       scratch);                                                              \
    }

CPU_Z_DEFINE(qgemm16_q8_0, SY_DTYPE_Q8_0)
CPU_Z_DEFINE(qgemm16_q4_0, SY_DTYPE_Q4_0)
CPU_Z_DEFINE(qgemm16_q4_0_packed, -SY_DTYPE_Q4_0)
CPU_Z_DEFINE(qgemm16_q4_1_packed, -SY_DTYPE_Q4_1)
CPU_Z_DEFINE(qgemm16_q4_1, SY_DTYPE_Q4_1)
CPU_Z_DEFINE(qgemm16_q5_0, SY_DTYPE_Q5_0)
CPU_Z_DEFINE(qgemm16_q5_1, SY_DTYPE_Q5_1)
CPU_Z_DEFINE(qgemm16_q4_k, SY_DTYPE_Q4_K)
CPU_Z_DEFINE(qgemm16_q5_k, SY_DTYPE_Q5_K)
CPU_Z_DEFINE(qgemm16_q6_k, SY_DTYPE_Q6_K)

#endif
