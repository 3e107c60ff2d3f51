/* Element conversions and GGUF block (de)quantization.
 *
 * Depends on nothing but the C library and the public headers, because the
 * CPU plugin compiles this file into itself and plugins never link against
 * libswitchyard.
 *
 * Blocks are read and written byte by byte at the offsets of the structs in
 * quants_internal.h rather than through struct pointers: a block inside a
 * GGUF row may sit at any byte address (a Q6_K block is 210 bytes), and
 * dereferencing a misaligned uint16_t is undefined behaviour.  The block
 * math itself follows ggml's reference (de)quantizers operation for
 * operation, in float, so that results are bit-exact with files produced by
 * llama.cpp / ggml. */
#include <float.h>
#include <math.h>
#include <stddef.h>
#include <string.h>

#include "quants_internal.h"

_Static_assert(sizeof(sy_block_q8_0) == 34, "q8_0 block must match GGUF");
_Static_assert(sizeof(sy_block_q4_0) == 18, "q4_0 block must match GGUF");
_Static_assert(sizeof(sy_block_q4_1) == 20, "q4_1 block must match GGUF");
_Static_assert(sizeof(sy_block_q4_k) == 144, "q4_k block must match GGUF");
_Static_assert(sizeof(sy_block_q5_k) == 176, "q5_k block must match GGUF");
_Static_assert(sizeof(sy_block_q6_k) == 210, "q6_k block must match GGUF");
_Static_assert(sizeof(sy_block_q5_0) == 22, "q5_0 block must match GGUF");
_Static_assert(sizeof(sy_block_q5_1) == 24, "q5_1 block must match GGUF");

/* ------------------------------------------------------------ bit access */

static uint32_t f32_bits(float f)
{
    uint32_t u;
    memcpy(&u, &f, sizeof u);
    return u;
}

static float f32_from_bits(uint32_t u)
{
    float f;
    memcpy(&f, &u, sizeof f);
    return f;
}

/* GGUF is little endian; reading bytes keeps us independent of the host. */
static uint16_t rd16(const uint8_t *p)
{
    return (uint16_t)(p[0] | (p[1] << 8));
}

static void wr16(uint8_t *p, uint16_t v)
{
    p[0] = (uint8_t)(v & 0xff);
    p[1] = (uint8_t)(v >> 8);
}

static float rdf16(const uint8_t *p)
{
    return sy__fp16_to_f32(rd16(p));
}

/* Float to int8 the way ggml's reference quantizers cast, minus the
 * undefined behaviour: truncation toward zero for finite in-range values
 * (bit-identical to a plain cast there), saturation outside, NaN -> 0.  Only
 * non-finite inputs ever reach the guarded paths. */
static int8_t trunc_i8(float v)
{
    if (v != v)
        return 0;
    if (v >= 127.0f)
        return 127;
    if (v <= -128.0f)
        return -128;
    return (int8_t)v;
}

/* ------------------------------------------------------------- fp16/bf16 */

float sy__fp16_to_f32(uint16_t h)
{
    uint32_t sign = (uint32_t)(h & 0x8000u) << 16;
    uint32_t exp = (h >> 10) & 0x1fu;
    uint32_t mant = h & 0x3ffu;

    if (exp == 0x1f) /* infinity or NaN: keep the payload, it stays a NaN */
        return f32_from_bits(sign | 0x7f800000u | (mant << 13));
    if (exp == 0) {
        /* Zero or subnormal: mant * 2^-24.  Both factors are exact in
         * float and the product needs at most 11 significant bits, so the
         * multiplication is exact. */
        float v = (float)mant * (1.0f / 16777216.0f);
        return sign ? -v : v;
    }
    /* Rebias the exponent from 15 to 127. */
    return f32_from_bits(sign | ((exp + 112u) << 23) | (mant << 13));
}

uint16_t sy__f32_to_fp16(float f)
{
    uint32_t x = f32_bits(f);
    uint16_t sign = (uint16_t)((x >> 16) & 0x8000u);
    uint32_t a = x & 0x7fffffffu;

    if (a > 0x7f800000u) {
        /* NaN: keep the top payload bits and force the quiet bit so a
         * payload living only in the low bits cannot turn into infinity. */
        return (uint16_t)(sign | 0x7e00u | ((a >> 13) & 0x3ffu));
    }
    /* 65520 is halfway between 65504 (largest half, odd mantissa) and
     * 65536; ties go to even, which is the overflow, so everything from
     * 65520 up (including infinity) becomes infinity. */
    if (a >= 0x477ff000u)
        return (uint16_t)(sign | 0x7c00u);
    if (a < 0x38800000u) {
        /* Below the smallest normal half (2^-14): the result is the
         * subnormal mant * 2^-24 with the f32 value scaled and rounded to
         * an integer, ties to even. */
        uint32_t e = a >> 23;
        if (e < 102) /* below 2^-25: rounds to zero (2^-25 itself ties to 0) */
            return sign;
        uint32_t m = (a & 0x7fffffu) | 0x800000u;
        uint32_t shift = 126u - e; /* 14..24 */
        uint32_t q = m >> shift;
        uint32_t rem = m & ((1u << shift) - 1u);
        uint32_t half = 1u << (shift - 1u);
        if (rem > half || (rem == half && (q & 1u)))
            q++; /* a carry into 0x400 is exactly the smallest normal */
        return (uint16_t)(sign | q);
    }
    uint32_t h = (a >> 13) - (112u << 10);
    uint32_t rem = a & 0x1fffu;
    if (rem > 0x1000u || (rem == 0x1000u && (h & 1u)))
        h++; /* a mantissa carry correctly bumps the exponent */
    return (uint16_t)(sign | h);
}

float sy__bf16_to_f32(uint16_t h)
{
    return f32_from_bits((uint32_t)h << 16);
}

uint16_t sy__f32_to_bf16(float f)
{
    uint32_t x = f32_bits(f);
    if ((x & 0x7fffffffu) > 0x7f800000u) {
        /* NaN: truncating could drop every payload bit and produce
         * infinity, so force the quiet bit. */
        return (uint16_t)((x >> 16) | 0x40u);
    }
    /* Adding 0x7fff plus the lowest kept bit rounds to nearest, ties to
     * even; an overflow carries into the exponent and yields infinity,
     * which is the correctly rounded result. */
    x += 0x7fffu + ((x >> 16) & 1u);
    return (uint16_t)(x >> 16);
}

/* ------------------------------------------------------- dequantization */

static void dequant_q8_0(const uint8_t *src, float *dst, int64_t nblocks)
{
    for (int64_t b = 0; b < nblocks; b++) {
        const uint8_t *blk = src + b * (int64_t)sizeof(sy_block_q8_0);
        const float d = rdf16(blk + offsetof(sy_block_q8_0, d));
        const int8_t *qs = (const int8_t *)(blk + offsetof(sy_block_q8_0, qs));
        for (int j = 0; j < SY_QK; j++)
            dst[b * SY_QK + j] = (float)qs[j] * d;
    }
}

static void dequant_q4_0(const uint8_t *src, float *dst, int64_t nblocks)
{
    for (int64_t b = 0; b < nblocks; b++) {
        const uint8_t *blk = src + b * (int64_t)sizeof(sy_block_q4_0);
        const float d = rdf16(blk + offsetof(sy_block_q4_0, d));
        const uint8_t *qs = blk + offsetof(sy_block_q4_0, qs);
        float *y = dst + b * SY_QK;
        for (int j = 0; j < SY_QK / 2; j++) {
            const int x0 = (qs[j] & 0x0f) - 8;
            const int x1 = (qs[j] >> 4) - 8;
            y[j] = (float)x0 * d;
            y[j + SY_QK / 2] = (float)x1 * d;
        }
    }
}

static void dequant_q4_1(const uint8_t *src, float *dst, int64_t nblocks)
{
    for (int64_t b = 0; b < nblocks; b++) {
        const uint8_t *blk = src + b * (int64_t)sizeof(sy_block_q4_1);
        const float d = rdf16(blk + offsetof(sy_block_q4_1, d));
        const float m = rdf16(blk + offsetof(sy_block_q4_1, m));
        const uint8_t *qs = blk + offsetof(sy_block_q4_1, qs);
        float *y = dst + b * SY_QK;
        for (int j = 0; j < SY_QK / 2; j++) {
            y[j] = (float)(qs[j] & 0x0f) * d + m;
            y[j + SY_QK / 2] = (float)(qs[j] >> 4) * d + m;
        }
    }
}

/* Q5_0 / Q5_1: the low nibbles are laid out as in Q4_0/Q4_1; bit j of the
 * little-endian 32-bit qh word is the fifth bit of element j.  Q5_0 has no
 * min term at all (adding +0.0 would turn a -0.0 into +0.0 and break bit
 * equality with ggml), hence two loops rather than one with m = 0. */
static uint32_t rd32(const uint8_t *p)
{
    return (uint32_t)p[0] | ((uint32_t)p[1] << 8) | ((uint32_t)p[2] << 16) | ((uint32_t)p[3] << 24);
}

static void dequant_q5_0(const uint8_t *src, float *dst, int64_t nblocks)
{
    for (int64_t b = 0; b < nblocks; b++) {
        const uint8_t *blk = src + b * (int64_t)sizeof(sy_block_q5_0);
        const float d = rdf16(blk + offsetof(sy_block_q5_0, d));
        const uint32_t qh = rd32(blk + offsetof(sy_block_q5_0, qh));
        const uint8_t *qs = blk + offsetof(sy_block_q5_0, qs);
        float *y = dst + b * SY_QK;
        for (int j = 0; j < SY_QK / 2; j++) {
            const int x0 = ((qs[j] & 0x0f) | (int)(((qh >> j) & 1u) << 4)) - 16;
            const int x1 = ((qs[j] >> 4) | (int)(((qh >> (j + 16)) & 1u) << 4)) - 16;
            y[j] = (float)x0 * d;
            y[j + SY_QK / 2] = (float)x1 * d;
        }
    }
}

static void dequant_q5_1(const uint8_t *src, float *dst, int64_t nblocks)
{
    for (int64_t b = 0; b < nblocks; b++) {
        const uint8_t *blk = src + b * (int64_t)sizeof(sy_block_q5_1);
        const float d = rdf16(blk + offsetof(sy_block_q5_1, d));
        const float m = rdf16(blk + offsetof(sy_block_q5_1, m));
        const uint32_t qh = rd32(blk + offsetof(sy_block_q5_1, qh));
        const uint8_t *qs = blk + offsetof(sy_block_q5_1, qs);
        float *y = dst + b * SY_QK;
        for (int j = 0; j < SY_QK / 2; j++) {
            const int x0 = (qs[j] & 0x0f) | (int)(((qh >> j) & 1u) << 4);
            const int x1 = (qs[j] >> 4) | (int)(((qh >> (j + 16)) & 1u) << 4);
            y[j] = (float)x0 * d + m;
            y[j + SY_QK / 2] = (float)x1 * d + m;
        }
    }
}

/* Unpacks the 6-bit scale and min of sub-block |j| (0..7) of a Q4_K/Q5_K
 * super-block.  Sub-blocks 0..3 keep their 6 bits in the low bits of bytes
 * 0..3 (scales) and 4..7 (mins); sub-blocks 4..7 keep their low 4 bits in
 * the nibbles of bytes 8..11 and their top 2 bits in the spare top bits of
 * bytes 0..7. */
static void k_scale_min(int j, const uint8_t *q, uint8_t *out_sc, uint8_t *out_m)
{
    if (j < 4) {
        *out_sc = q[j] & 63;
        *out_m = q[j + 4] & 63;
    } else {
        *out_sc = (uint8_t)((q[j + 4] & 0x0f) | ((q[j - 4] >> 6) << 4));
        *out_m = (uint8_t)((q[j + 4] >> 4) | ((q[j] >> 6) << 4));
    }
}

static void dequant_q4_k(const uint8_t *src, float *y, int64_t nblocks)
{
    for (int64_t b = 0; b < nblocks; b++) {
        const uint8_t *blk = src + b * (int64_t)sizeof(sy_block_q4_k);
        const float d = rdf16(blk + offsetof(sy_block_q4_k, d));
        const float dmin = rdf16(blk + offsetof(sy_block_q4_k, dmin));
        const uint8_t *scales = blk + offsetof(sy_block_q4_k, scales);
        const uint8_t *q = blk + offsetof(sy_block_q4_k, qs);
        int is = 0;
        /* Each 32 bytes of qs hold two 32-element sub-blocks: the low
         * nibbles the first, the high nibbles the second. */
        for (int j = 0; j < SY_QK_K; j += 64) {
            uint8_t sc, m;
            k_scale_min(is + 0, scales, &sc, &m);
            const float d1 = d * sc, m1 = dmin * m;
            k_scale_min(is + 1, scales, &sc, &m);
            const float d2 = d * sc, m2 = dmin * m;
            for (int l = 0; l < 32; l++)
                *y++ = d1 * (float)(q[l] & 0x0f) - m1;
            for (int l = 0; l < 32; l++)
                *y++ = d2 * (float)(q[l] >> 4) - m2;
            q += 32;
            is += 2;
        }
    }
}

static void dequant_q5_k(const uint8_t *src, float *y, int64_t nblocks)
{
    for (int64_t b = 0; b < nblocks; b++) {
        const uint8_t *blk = src + b * (int64_t)sizeof(sy_block_q5_k);
        const float d = rdf16(blk + offsetof(sy_block_q5_k, d));
        const float dmin = rdf16(blk + offsetof(sy_block_q5_k, dmin));
        const uint8_t *scales = blk + offsetof(sy_block_q5_k, scales);
        const uint8_t *qh = blk + offsetof(sy_block_q5_k, qh);
        const uint8_t *ql = blk + offsetof(sy_block_q5_k, qs);
        int is = 0;
        /* Bit 2i of qh[l] is the fifth bit of element l of sub-block 2i,
         * bit 2i+1 that of sub-block 2i+1. */
        uint8_t u1 = 1, u2 = 2;
        for (int j = 0; j < SY_QK_K; j += 64) {
            uint8_t sc, m;
            k_scale_min(is + 0, scales, &sc, &m);
            const float d1 = d * sc, m1 = dmin * m;
            k_scale_min(is + 1, scales, &sc, &m);
            const float d2 = d * sc, m2 = dmin * m;
            for (int l = 0; l < 32; l++)
                *y++ = d1 * (float)((ql[l] & 0x0f) + ((qh[l] & u1) ? 16 : 0)) - m1;
            for (int l = 0; l < 32; l++)
                *y++ = d2 * (float)((ql[l] >> 4) + ((qh[l] & u2) ? 16 : 0)) - m2;
            ql += 32;
            is += 2;
            u1 = (uint8_t)(u1 << 2);
            u2 = (uint8_t)(u2 << 2);
        }
    }
}

static void dequant_q6_k(const uint8_t *src, float *y, int64_t nblocks)
{
    for (int64_t b = 0; b < nblocks; b++) {
        const uint8_t *blk = src + b * (int64_t)sizeof(sy_block_q6_k);
        const float d = rdf16(blk + offsetof(sy_block_q6_k, d));
        const uint8_t *ql = blk + offsetof(sy_block_q6_k, ql);
        const uint8_t *qh = blk + offsetof(sy_block_q6_k, qh);
        const int8_t *sc = (const int8_t *)(blk + offsetof(sy_block_q6_k, scales));
        /* Each half of 128 elements uses 64 bytes of ql (low nibbles for
         * elements 0..63, high nibbles for 64..127), 32 bytes of qh (2 bits
         * per element, four groups of 32) and 8 scales of 16 elements. */
        for (int n = 0; n < SY_QK_K; n += 128) {
            for (int l = 0; l < 32; l++) {
                const int is = l / 16;
                const int q1 = ((ql[l] & 0x0f) | (((qh[l] >> 0) & 3) << 4)) - 32;
                const int q2 = ((ql[l + 32] & 0x0f) | (((qh[l] >> 2) & 3) << 4)) - 32;
                const int q3 = ((ql[l] >> 4) | (((qh[l] >> 4) & 3) << 4)) - 32;
                const int q4 = ((ql[l + 32] >> 4) | (((qh[l] >> 6) & 3) << 4)) - 32;
                y[l + 0] = d * (float)sc[is + 0] * (float)q1;
                y[l + 32] = d * (float)sc[is + 2] * (float)q2;
                y[l + 64] = d * (float)sc[is + 4] * (float)q3;
                y[l + 96] = d * (float)sc[is + 6] * (float)q4;
            }
            y += 128;
            ql += 64;
            qh += 32;
            sc += 8;
        }
    }
}

sy_status sy__dequantize_row(sy_dtype t, const void *src, float *dst, int64_t n)
{
    if (!sy_dtype_is_valid(t))
        return SY_E_DTYPE;
    const int64_t bs = sy_dtype_block_size(t);
    if (n < 0 || n % bs != 0)
        return SY_E_INVALID_ARG;
    if (n == 0)
        return SY_OK;
    if (src == NULL || dst == NULL)
        return SY_E_INVALID_ARG;

    const uint8_t *s = src;
    switch (t) {
    case SY_DTYPE_F32:
        memcpy(dst, s, (size_t)n * sizeof(float));
        return SY_OK;
    case SY_DTYPE_F16:
        for (int64_t i = 0; i < n; i++)
            dst[i] = sy__fp16_to_f32(rd16(s + 2 * i));
        return SY_OK;
    case SY_DTYPE_BF16:
        for (int64_t i = 0; i < n; i++)
            dst[i] = sy__bf16_to_f32(rd16(s + 2 * i));
        return SY_OK;
    case SY_DTYPE_I32:
        for (int64_t i = 0; i < n; i++) {
            int32_t v;
            memcpy(&v, s + 4 * i, sizeof v);
            dst[i] = (float)v;
        }
        return SY_OK;
    case SY_DTYPE_Q8_0:
        dequant_q8_0(s, dst, n / bs);
        return SY_OK;
    case SY_DTYPE_Q4_0:
        dequant_q4_0(s, dst, n / bs);
        return SY_OK;
    case SY_DTYPE_Q4_1:
        dequant_q4_1(s, dst, n / bs);
        return SY_OK;
    case SY_DTYPE_Q4_K:
        dequant_q4_k(s, dst, n / bs);
        return SY_OK;
    case SY_DTYPE_Q5_K:
        dequant_q5_k(s, dst, n / bs);
        return SY_OK;
    case SY_DTYPE_Q6_K:
        dequant_q6_k(s, dst, n / bs);
        return SY_OK;
    case SY_DTYPE_Q5_0:
        dequant_q5_0(s, dst, n / bs);
        return SY_OK;
    case SY_DTYPE_Q5_1:
        dequant_q5_1(s, dst, n / bs);
        return SY_OK;
    case SY_DTYPE_COUNT:
        break;
    }
    return SY_E_DTYPE;
}

/* --------------------------------------------------------- quantization */

static void quant_q8_0(const float *x, uint8_t *dst, int64_t nblocks)
{
    for (int64_t b = 0; b < nblocks; b++, x += SY_QK) {
        uint8_t *blk = dst + b * (int64_t)sizeof(sy_block_q8_0);
        float amax = 0.0f;
        for (int j = 0; j < SY_QK; j++) {
            const float v = fabsf(x[j]);
            amax = v > amax ? v : amax;
        }
        const float d = amax / 127.0f;
        const float id = d != 0.0f ? 1.0f / d : 0.0f;
        wr16(blk + offsetof(sy_block_q8_0, d), sy__f32_to_fp16(d));
        int8_t *qs = (int8_t *)(blk + offsetof(sy_block_q8_0, qs));
        for (int j = 0; j < SY_QK; j++)
            qs[j] = trunc_i8(roundf(x[j] * id));
    }
}

static void quant_q4_0(const float *x, uint8_t *dst, int64_t nblocks)
{
    for (int64_t b = 0; b < nblocks; b++, x += SY_QK) {
        uint8_t *blk = dst + b * (int64_t)sizeof(sy_block_q4_0);
        /* The scale comes from the signed value of largest magnitude, so
         * that value lands exactly on -8 (the code with no positive twin)
         * and the other side keeps the full 0..15 range. */
        float amax = 0.0f, max = 0.0f;
        for (int j = 0; j < SY_QK; j++) {
            if (amax < fabsf(x[j])) {
                amax = fabsf(x[j]);
                max = x[j];
            }
        }
        const float d = max / -8.0f;
        const float id = d != 0.0f ? 1.0f / d : 0.0f;
        wr16(blk + offsetof(sy_block_q4_0, d), sy__f32_to_fp16(d));
        uint8_t *qs = blk + offsetof(sy_block_q4_0, qs);
        for (int j = 0; j < SY_QK / 2; j++) {
            /* +8.5 then truncation rounds to nearest after the offset. */
            int x0 = trunc_i8(x[j] * id + 8.5f);
            int x1 = trunc_i8(x[j + SY_QK / 2] * id + 8.5f);
            x0 = x0 < 0 ? 0 : (x0 < 15 ? x0 : 15);
            x1 = x1 < 0 ? 0 : (x1 < 15 ? x1 : 15);
            qs[j] = (uint8_t)(x0 | (x1 << 4));
        }
    }
}

static void quant_q4_1(const float *x, uint8_t *dst, int64_t nblocks)
{
    for (int64_t b = 0; b < nblocks; b++, x += SY_QK) {
        uint8_t *blk = dst + b * (int64_t)sizeof(sy_block_q4_1);
        float min = FLT_MAX, max = -FLT_MAX;
        for (int j = 0; j < SY_QK; j++) {
            min = x[j] < min ? x[j] : min;
            max = x[j] > max ? x[j] : max;
        }
        const float d = (max - min) / 15.0f;
        const float id = d != 0.0f ? 1.0f / d : 0.0f;
        wr16(blk + offsetof(sy_block_q4_1, d), sy__f32_to_fp16(d));
        wr16(blk + offsetof(sy_block_q4_1, m), sy__f32_to_fp16(min));
        uint8_t *qs = blk + offsetof(sy_block_q4_1, qs);
        for (int j = 0; j < SY_QK / 2; j++) {
            int x0 = trunc_i8((x[j] - min) * id + 0.5f);
            int x1 = trunc_i8((x[j + SY_QK / 2] - min) * id + 0.5f);
            x0 = x0 < 0 ? 0 : (x0 < 15 ? x0 : 15);
            x1 = x1 < 0 ? 0 : (x1 < 15 ? x1 : 15);
            qs[j] = (uint8_t)(x0 | (x1 << 4));
        }
    }
}

/* Rounds half away from zero (like roundf) and saturates, with NaN -> 0,
 * because an out-of-range float-to-int conversion is undefined in C. */
static int32_t f32_to_i32(float v)
{
    if (v != v)
        return 0;
    const float r = roundf(v);
    if (r >= 2147483648.0f)
        return INT32_MAX;
    if (r < -2147483648.0f)
        return INT32_MIN;
    return (int32_t)r;
}

sy_status sy__quantize_row(sy_dtype t, const float *src, void *dst, int64_t n)
{
    if (!sy_dtype_is_valid(t))
        return SY_E_DTYPE;
    if (t == SY_DTYPE_Q4_K || t == SY_DTYPE_Q5_K || t == SY_DTYPE_Q6_K || t == SY_DTYPE_Q5_0 ||
        t == SY_DTYPE_Q5_1)
        return SY_E_DTYPE; /* dequantize only: no reference quantizer here */
    const int64_t bs = sy_dtype_block_size(t);
    if (n < 0 || n % bs != 0)
        return SY_E_INVALID_ARG;
    if (n == 0)
        return SY_OK;
    if (src == NULL || dst == NULL)
        return SY_E_INVALID_ARG;

    uint8_t *d = dst;
    switch (t) {
    case SY_DTYPE_F32:
        memcpy(d, src, (size_t)n * sizeof(float));
        return SY_OK;
    case SY_DTYPE_F16:
        for (int64_t i = 0; i < n; i++)
            wr16(d + 2 * i, sy__f32_to_fp16(src[i]));
        return SY_OK;
    case SY_DTYPE_BF16:
        for (int64_t i = 0; i < n; i++)
            wr16(d + 2 * i, sy__f32_to_bf16(src[i]));
        return SY_OK;
    case SY_DTYPE_I32:
        for (int64_t i = 0; i < n; i++) {
            const int32_t v = f32_to_i32(src[i]);
            memcpy(d + 4 * i, &v, sizeof v);
        }
        return SY_OK;
    case SY_DTYPE_Q8_0:
        quant_q8_0(src, d, n / bs);
        return SY_OK;
    case SY_DTYPE_Q4_0:
        quant_q4_0(src, d, n / bs);
        return SY_OK;
    case SY_DTYPE_Q4_1:
        quant_q4_1(src, d, n / bs);
        return SY_OK;
    default:
        break;
    }
    return SY_E_DTYPE;
}
