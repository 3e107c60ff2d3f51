/* Quantized-matmul kernels for AVX-512 F/BW/VL/VNNI (Ice Lake server and
 * later, Zen 4/5): the x86 template with the EVEX vpdpbusd on 256-bit
 * vectors as the 8-bit dot primitive, and a prefill GEMM of its own on
 * 512-bit vectors: panels of 16 columns, one vpdpbusd per group for all 16
 * (the template's row decoders feed it). */
#if defined(__x86_64__) || defined(__i386__)

#include <immintrin.h>

#define CPU_QD_TARGET "avx2,fma,f16c,avx512f,avx512bw,avx512vl,avx512vnni"
#define CPU_QD_FN(name) cpu_avx512_##name

#include "cpu_qdot_vnni512.inc"

#include "cpu_qdot_x86.inc"
#include "cpu_qgemm_x86.inc"

#define CPU_Z_FN(name) cpu_avx512z_##name
#include "cpu_qrows_avx512.inc"

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
