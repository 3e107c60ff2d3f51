/* MATMUL as a W8A8 NPU computes it: out[n, m] = sum_k W[k, n] * X[k, m].
 *
 * The arithmetic, exactly (the emulation is bit-reproducible across
 * machines; see npusim_isa.c):
 *   1. Each activation row X[:, m] (K floats) is quantised dynamically to
 *      integers of B = 8 bits (or 16: the file's activation dtype, or a
 *      node named in matmul.activations.int16_nodes), x ~ s_m * (q - z_m):
 *      - asymmetric (the default, as NPUs encode activations: unsigned
 *        integers with an offset): lo = min(0, min x), hi = max(0, max x),
 *        R = 2^B - 1, s_m = float(double(hi - lo) / R), inv =
 *        float(R / double(hi - lo)), z_m = round_half_even(-2^(B-1) -
 *        lo * inv) and q = round_half_even(x * inv) + z_m, clamped to
 *        [-2^(B-1), 2^(B-1) - 1];
 *      - symmetric: s_m = max|x| / Q with Q = 2^(B-1) - 1, z_m = 0 and
 *        q = round_half_even(x * (Q / max|x|)) clamped to [-Q, Q].
 *   2. Each weight row is unpacked block by block (32 elements) into
 *      integers w_q with a float32 block scale d_b and, for Q4_1/Q5_1, a
 *      block minimum m_b (a zero point: w = d_b * w_q + m_b); the block's
 *      integer sum ws_b = sum w_q is what an NPU precomputes at weight
 *      load to take activation zero points out of its accumulators.
 *   3. Per block, an exact int32 dot product i_b = sum w_q * q, corrected
 *      to c_b = i_b - z_m * ws_b (= sum w_q * (q - z_m)); for blocks with
 *      a minimum also the int32 activation block sum a_b = sum q - 32 z_m.
 *   4. v_b = d_b * float(c_b) [+ m_b * float(a_b)] in float32, accumulated
 *      into eight float32 partial sums (block b into sum b mod 8), which
 *      are added pairwise ((0+1)+(2+3))+((4+5)+(6+7)) and multiplied by
 *      s_m.
 * With matmul.activations.granularity "per_block" (block-scaled integers,
 * as in microscaling formats) each 32-element block of a row gets its own
 * scale s_mb and zero point z_mb in step 1, v_b is multiplied by s_mb in
 * step 4, and the final multiplication by s_m is dropped.
 * The error against the float reference is the activation rounding only:
 * |out - ref| <= 0.5 * s_m * sum_k |W[k, n]| plus float32 summation noise;
 * s_m = (hi - lo) / 255 is at most 2 max|x| / 255, below the symmetric
 * max|x| / 127, and half of that where a row's values lean to one side. */
#include <fnmatch.h>
#include <math.h>
#include <string.h>

#include "npusim_internal.h"
#include "quants_internal.h"

/* binary16 to float32, exact for every value (normals and subnormals
 * through one multiplication by 2^112); inline because it runs once per
 * weight block. */
static inline float npu_f16_to_f32(uint16_t h)
{
    const uint32_t sign = (uint32_t)(h & 0x8000u) << 16;
    const uint32_t em = h & 0x7fffu;
    uint32_t bits;
    float f;
    if (em >= 0x7c00u) {
        bits = sign | 0x7f800000u | ((em & 0x3ffu) << 13);
        memcpy(&f, &bits, sizeof f);
        return f;
    }
    bits = em << 13;
    memcpy(&f, &bits, sizeof f);
    f *= 0x1p112f;
    memcpy(&bits, &f, sizeof bits);
    bits |= sign;
    memcpy(&f, &bits, sizeof f);
    return f;
}

/* Sums each block's integer weights (step 2's ws_b). */
static void npu_weight_block_sums(const int16_t *restrict q, int64_t nblocks,
                                  int32_t *restrict out)
{
    for (int64_t b = 0; b < nblocks; b++) {
        int32_t sum = 0;
        for (int j = 0; j < NPU_QK; j++)
            sum += q[b * NPU_QK + j];
        out[b] = sum;
    }
}

/* Unpacks |nblocks| weight blocks of |dtype| into int16 values, block
 * scales and block minimums.  Returns whether the dtype has minimums. */
static bool npu_unpack_weights(uint32_t dtype, const unsigned char *src, int64_t nblocks,
                               int16_t *restrict q, float *restrict d, float *restrict mins)
{
    switch (dtype) {
    case SY_DTYPE_Q8_0:
        for (int64_t b = 0; b < nblocks; b++) {
            const unsigned char *blk = src + b * (int64_t)sizeof(sy_block_q8_0);
            uint16_t h;
            memcpy(&h, blk, sizeof h);
            d[b] = npu_f16_to_f32(h);
            const int8_t *restrict qs = (const int8_t *)(blk + offsetof(sy_block_q8_0, qs));
            int16_t *restrict out = q + b * NPU_QK;
            for (int j = 0; j < NPU_QK; j++)
                out[j] = qs[j];
        }
        return false;
    case SY_DTYPE_Q4_0:
    case SY_DTYPE_Q4_1: {
        const bool asym = dtype == SY_DTYPE_Q4_1;
        const size_t bsz = asym ? sizeof(sy_block_q4_1) : sizeof(sy_block_q4_0);
        const int off = asym ? 0 : 8;
        for (int64_t b = 0; b < nblocks; b++) {
            const unsigned char *blk = src + b * (int64_t)bsz;
            uint16_t h;
            memcpy(&h, blk, sizeof h);
            d[b] = npu_f16_to_f32(h);
            if (asym) {
                memcpy(&h, blk + offsetof(sy_block_q4_1, m), sizeof h);
                mins[b] = npu_f16_to_f32(h);
            }
            const unsigned char *restrict qs =
                blk + (asym ? offsetof(sy_block_q4_1, qs) : offsetof(sy_block_q4_0, qs));
            int16_t *restrict out = q + b * NPU_QK;
            for (int j = 0; j < NPU_QK / 2; j++) {
                out[j] = (int16_t)((qs[j] & 0x0f) - off);
                out[j + NPU_QK / 2] = (int16_t)((qs[j] >> 4) - off);
            }
        }
        return asym;
    }
    case SY_DTYPE_Q5_0:
    case SY_DTYPE_Q5_1: {
        const bool asym = dtype == SY_DTYPE_Q5_1;
        const size_t bsz = asym ? sizeof(sy_block_q5_1) : sizeof(sy_block_q5_0);
        const size_t qh_at = asym ? offsetof(sy_block_q5_1, qh) : offsetof(sy_block_q5_0, qh);
        const size_t qs_at = asym ? offsetof(sy_block_q5_1, qs) : offsetof(sy_block_q5_0, qs);
        const int off = asym ? 0 : 16;
        for (int64_t b = 0; b < nblocks; b++) {
            const unsigned char *blk = src + b * (int64_t)bsz;
            uint16_t h;
            memcpy(&h, blk, sizeof h);
            d[b] = npu_f16_to_f32(h);
            if (asym) {
                memcpy(&h, blk + offsetof(sy_block_q5_1, m), sizeof h);
                mins[b] = npu_f16_to_f32(h);
            }
            uint32_t qh;
            memcpy(&qh, blk + qh_at, sizeof qh);
            const unsigned char *restrict qs = blk + qs_at;
            int16_t *restrict out = q + b * NPU_QK;
            for (int j = 0; j < NPU_QK / 2; j++) {
                const int lo = (qs[j] & 0x0f) | (int)(((qh >> j) & 1u) << 4);
                const int hi = (qs[j] >> 4) | (int)(((qh >> (j + 16)) & 1u) << 4);
                out[j] = (int16_t)(lo - off);
                out[j + NPU_QK / 2] = (int16_t)(hi - off);
            }
        }
        return asym;
    }
    default:
        return false;
    }
}

float npu_quantize_row(const float *x, int64_t n, uint32_t bits, bool zero_point, int16_t *out_q,
                       int32_t *out_zp)
{
    float lo = 0.0f, hi = 0.0f;
    bool finite = true;
    for (int64_t i = 0; i < n; i++) {
        finite = finite && isfinite(x[i]);
        lo = x[i] < lo ? x[i] : lo;
        hi = x[i] > hi ? x[i] : hi;
    }
    *out_zp = 0;
    if (!finite) {
        /* An NPU has no encoding for NaN or infinity: the row's results are
         * made NaN so that the damage shows instead of hiding. */
        memset(out_q, 0, (size_t)n * sizeof *out_q);
        return NAN;
    }
    if (lo == 0.0f && hi == 0.0f) {
        memset(out_q, 0, (size_t)n * sizeof *out_q);
        return 0.0f;
    }
    if (zero_point) {
        const float qmin = bits == 16 ? -32768.0f : -128.0f;
        const float qmax = bits == 16 ? 32767.0f : 127.0f;
        const double levels = bits == 16 ? 65535.0 : 255.0;
        /* In double: hi - lo overflows float32 for values near its limit. */
        const double range = (double)hi - (double)lo;
        const float scale = (float)(range / levels);
        const float inv = (float)(levels / range);
        /* 0 is an exact level (lo <= 0 <= hi), so zero padding and
         * all-zero columns stay exact, as in NPU encodings. */
        float zp = nearbyintf(qmin - lo * inv);
        zp = zp > qmax ? qmax : (zp < qmin ? qmin : zp);
        for (int64_t i = 0; i < n; i++) {
            float v = nearbyintf(x[i] * inv) + zp;
            v = v > qmax ? qmax : (v < qmin ? qmin : v);
            out_q[i] = (int16_t)v;
        }
        *out_zp = (int32_t)zp;
        return scale;
    }
    const float qmax = bits == 16 ? 32767.0f : 127.0f;
    const float amax = hi > -lo ? hi : -lo;
    const float scale = amax / qmax;
    const float inv = qmax / amax;
    for (int64_t i = 0; i < n; i++) {
        float v = nearbyintf(x[i] * inv);
        v = v > qmax ? qmax : (v < -qmax ? -qmax : v);
        out_q[i] = (int16_t)v;
    }
    return scale;
}

/* Takes the zero points out of the block dot products and sums the
 * blocks' values into eight interleaved float32 partial sums, reduced in
 * a fixed order (steps 3 and 4 above).  |zp| holds one activation zero
 * point per block, or is NULL for symmetric activations; |xs| holds one
 * activation scale per block (per-block granularity) or is NULL. */
static float npu_accumulate(const int32_t *isum, const int32_t *wsum, const int32_t *zp,
                            const float *d, const float *mins, const int32_t *asum,
                            const float *xs, int64_t nblocks)
{
    float acc[8] = {0};
    for (int64_t b = 0; b < nblocks; b++) {
        /* Exact in int32: |i_b| and |z * ws_b| are each below 2^28 even
         * for int16 activations against int8 weights. */
        const int32_t c = zp ? isum[b] - zp[b] * wsum[b] : isum[b];
        float v = d[b] * (float)c;
        if (mins)
            v += mins[b] * (float)asum[b];
        if (xs)
            v *= xs[b];
        acc[b & 7] += v;
    }
    return ((acc[0] + acc[1]) + (acc[2] + acc[3])) + ((acc[4] + acc[5]) + (acc[6] + acc[7]));
}

uint32_t npu_matmul_act_bits(const npu_caps *caps, const char *name)
{
    for (uint32_t i = 0; i < caps->n_wide; i++)
        if (fnmatch(caps->wide[i], name, 0) == 0)
            return 16;
    return caps->act_bits;
}

sy_status npu_kernel_matmul(npu_state *s, const npu_view *wv, const npu_view *xv,
                            const npu_view *yv, uint32_t act_bits)
{
    const sy_tensor *w = wv->t, *x = xv->t, *y = yv->t;
    const int64_t K = w->ne[0], N = w->ne[1], M = x->ne[1];
    const int64_t nblocks = K / NPU_QK;
    const int64_t r2 = x->ne[2] / w->ne[2], r3 = x->ne[3] / w->ne[3];

    /* Activation scratch: q [M*K] int16, then per (row, block): scales
     * (per row: the first M), block sums and zero points. */
    const bool per_block = s->caps.act_per_block;
    const bool zero_point = s->caps.act_zero_point;
    const size_t q_bytes = (size_t)(M * K) * sizeof(int16_t);
    const size_t act_bytes =
        q_bytes + (size_t)(M * nblocks) * (sizeof(float) + 2 * sizeof(int32_t)) + 64;
    /* Weight scratch: q [K] int16, d and mins [nblocks] float, isum and
     * wsum [nblocks] int32. */
    const size_t wq_bytes = (size_t)K * sizeof(int16_t);
    const size_t weight_bytes =
        wq_bytes + (size_t)nblocks * (2 * sizeof(float) + 2 * sizeof(int32_t)) + 64;
    sy_status st = npu_scratch_reserve(s, &s->act, act_bytes);
    if (st == SY_OK)
        st = npu_scratch_reserve(s, &s->weight, weight_bytes);
    if (st != SY_OK)
        return st;
    int16_t *xq = s->act.ptr;
    float *xs = (float *)((char *)s->act.ptr + q_bytes);
    int32_t *xsum = (int32_t *)(xs + M * nblocks);
    int32_t *xzp = xsum + M * nblocks;
    int16_t *wq = s->weight.ptr;
    float *wd = (float *)((char *)s->weight.ptr + wq_bytes);
    float *wm = wd + nblocks;
    int32_t *isum = (int32_t *)(wm + nblocks);
    int32_t *wsum = isum + nblocks;

    for (int64_t i3 = 0; i3 < x->ne[3]; i3++) {
        for (int64_t i2 = 0; i2 < x->ne[2]; i2++) {
            const unsigned char *xb = xv->data + i2 * x->nb[2] + i3 * x->nb[3];
            for (int64_t m = 0; m < M; m++) {
                int16_t *q = xq + m * K;
                int32_t *zp = xzp + m * nblocks;
                const float *row = (const float *)(xb + m * x->nb[1]);
                if (per_block) {
                    for (int64_t b = 0; b < nblocks; b++)
                        xs[m * nblocks + b] =
                            npu_quantize_row(row + b * NPU_QK, NPU_QK, act_bits, zero_point,
                                             q + b * NPU_QK, &zp[b]);
                } else {
                    xs[m] = npu_quantize_row(row, K, act_bits, zero_point, q, &zp[0]);
                    for (int64_t b = 1; b < nblocks; b++)
                        zp[b] = zp[0];
                }
                for (int64_t b = 0; b < nblocks; b++) {
                    int32_t a = 0;
                    for (int j = 0; j < NPU_QK; j++)
                        a += q[b * NPU_QK + j];
                    xsum[m * nblocks + b] = a - NPU_QK * zp[b];
                }
            }
            const unsigned char *wb = wv->data + (i2 / r2) * w->nb[2] + (i3 / r3) * w->nb[3];
            unsigned char *yb = yv->data + i2 * y->nb[2] + i3 * y->nb[3];
            for (int64_t n = 0; n < N; n++) {
                const bool asym = npu_unpack_weights(w->dtype, wb + n * w->nb[1], nblocks, wq, wd, wm);
                if (zero_point)
                    npu_weight_block_sums(wq, nblocks, wsum);
                for (int64_t m = 0; m < M; m++) {
                    s->isa->block_dots(wq, xq + m * K, nblocks, isum);
                    const float acc = npu_accumulate(
                        isum, wsum, zero_point ? xzp + m * nblocks : NULL, wd, asym ? wm : NULL,
                        xsum + m * nblocks, per_block ? xs + m * nblocks : NULL, nblocks);
                    float *out = (float *)(yb + m * y->nb[1]);
                    out[n] = per_block ? acc : acc * xs[m];
                }
            }
        }
    }
    return SY_OK;
}
