/* Element conversions and GGUF block (de)quantization: hand-built blocks
 * with hand-computed values (bit exact), rounding edge cases, and
 * quantize -> dequantize error bounds on random data. */
#include <float.h>

#include "ops_test_util.h"

static uint32_t bits_of(float f)
{
    uint32_t u;
    memcpy(&u, &f, sizeof u);
    return u;
}

static float from_bits(uint32_t u)
{
    float f;
    memcpy(&f, &u, sizeof f);
    return f;
}

/* ------------------------------------------------------------ fp16 / bf16 */

Test(quants, fp16_converts_exact_values_both_ways)
{
    static const struct {
        float f;
        uint16_t h;
    } cases[] = {
        {0.0f, 0x0000},     {1.0f, 0x3c00},         {-2.0f, 0xc000},    {0.5f, 0x3800},
        {65504.0f, 0x7bff}, {-65504.0f, 0xfbff},    {0x1p-14f, 0x0400}, {0x1p-24f, 0x0001},
        {1023 * 0x1p-24f, 0x03ff}, {0.333251953125f, 0x3555},
    };
    for (size_t i = 0; i < sizeof cases / sizeof cases[0]; i++) {
        cr_assert_eq(sy__f32_to_fp16(cases[i].f), cases[i].h, "f32 %g -> 0x%04x, want 0x%04x",
                     (double)cases[i].f, sy__f32_to_fp16(cases[i].f), cases[i].h);
        cr_assert_eq(bits_of(sy__fp16_to_f32(cases[i].h)), bits_of(cases[i].f), "0x%04x -> %g, want %g",
                     cases[i].h, (double)sy__fp16_to_f32(cases[i].h), (double)cases[i].f);
    }
    cr_assert_eq(sy__f32_to_fp16(-0.0f), 0x8000);
    cr_assert_eq(bits_of(sy__fp16_to_f32(0x8000)), 0x80000000u);
}

Test(quants, fp16_rounds_to_nearest_even)
{
    /* 1 + 2^-11 is exactly halfway between 1 and the next half (1 + 2^-10):
     * ties go to the even mantissa, 0x3c00. */
    cr_assert_eq(sy__f32_to_fp16(1.0f + 0x1p-11f), 0x3c00);
    /* 1 + 3*2^-11 is halfway between 0x3c01 and 0x3c02: even is 0x3c02. */
    cr_assert_eq(sy__f32_to_fp16(1.0f + 3 * 0x1p-11f), 0x3c02);
    /* Just above the halfway point rounds up. */
    cr_assert_eq(sy__f32_to_fp16(1.0f + 0x1p-11f + 0x1p-20f), 0x3c01);
    /* Just below 1 + 2^-10 * 0.5 of the negative side mirrors. */
    cr_assert_eq(sy__f32_to_fp16(-(1.0f + 3 * 0x1p-11f)), 0xbc02);
    /* Mantissa carry bumps the exponent: 2 - 2^-12 rounds up to 2.0. */
    cr_assert_eq(sy__f32_to_fp16(2.0f - 0x1p-12f), 0x4000);
}

Test(quants, fp16_rounds_subnormals_to_nearest_even)
{
    cr_assert_eq(sy__f32_to_fp16(0x1p-25f), 0x0000, "2^-25 is a tie between 0 and 2^-24: even is 0");
    cr_assert_eq(sy__f32_to_fp16(0x1.8p-25f), 0x0001, "0.75 * 2^-24 rounds up");
    cr_assert_eq(sy__f32_to_fp16(3 * 0x1p-25f), 0x0002, "1.5 * 2^-24 ties to 2");
    cr_assert_eq(sy__f32_to_fp16(5 * 0x1p-25f), 0x0002, "2.5 * 2^-24 ties to 2");
    cr_assert_eq(sy__f32_to_fp16(0x1p-26f), 0x0000);
    cr_assert_eq(sy__f32_to_fp16(FLT_MIN), 0x0000, "f32 normals far below 2^-24 flush to zero");
    cr_assert_eq(sy__f32_to_fp16(-0x1p-149f), 0x8000, "f32 subnormals keep their sign");
    /* Largest subnormal plus half an ulp ties to the smallest normal. */
    cr_assert_eq(sy__f32_to_fp16(1023.5f * 0x1p-24f), 0x0400);
}

Test(quants, fp16_overflows_to_infinity_and_keeps_nan)
{
    cr_assert_eq(sy__f32_to_fp16(65519.99f), 0x7bff, "below the tie stays finite");
    cr_assert_eq(sy__f32_to_fp16(65520.0f), 0x7c00, "65520 ties to even, which is infinity");
    cr_assert_eq(sy__f32_to_fp16(1e10f), 0x7c00);
    cr_assert_eq(sy__f32_to_fp16(-1e10f), 0xfc00);
    cr_assert_eq(sy__f32_to_fp16(INFINITY), 0x7c00);
    cr_assert_eq(sy__f32_to_fp16(-INFINITY), 0xfc00);
    cr_assert(isinf(sy__fp16_to_f32(0x7c00)) && sy__fp16_to_f32(0x7c00) > 0);
    cr_assert(isinf(sy__fp16_to_f32(0xfc00)) && sy__fp16_to_f32(0xfc00) < 0);

    uint16_t h = sy__f32_to_fp16(NAN);
    cr_assert((h & 0x7c00) == 0x7c00 && (h & 0x03ff) != 0, "NaN -> 0x%04x is not a NaN", h);
    /* A payload only in the low 13 bits must not collapse to infinity. */
    h = sy__f32_to_fp16(from_bits(0x7f800001u));
    cr_assert((h & 0x7c00) == 0x7c00 && (h & 0x03ff) != 0, "low-payload NaN -> 0x%04x", h);
    cr_assert(isnan(sy__fp16_to_f32(0x7e00)));
    cr_assert(isnan(sy__fp16_to_f32(0xfc01)));
}

Test(quants, fp16_round_trips_every_half_value)
{
    for (uint32_t h = 0; h < 0x10000; h++) {
        const float f = sy__fp16_to_f32((uint16_t)h);
        const uint16_t back = sy__f32_to_fp16(f);
        if ((h & 0x7c00) == 0x7c00 && (h & 0x3ff) != 0) {
            cr_assert(isnan(f), "0x%04x should decode to NaN", h);
            cr_assert((back & 0x7c00) == 0x7c00 && (back & 0x3ff) != 0, "NaN 0x%04x -> 0x%04x", h, back);
            continue;
        }
        cr_assert_eq(back, h, "0x%04x -> %g -> 0x%04x", h, (double)f, back);
    }
}

Test(quants, bf16_converts_and_rounds_to_nearest_even)
{
    cr_assert_eq(sy__f32_to_bf16(1.0f), 0x3f80);
    cr_assert_eq(sy__f32_to_bf16(-2.0f), 0xc000);
    cr_assert_eq(sy__f32_to_bf16(1.0f + 0x1p-8f), 0x3f80, "tie goes to even");
    cr_assert_eq(sy__f32_to_bf16(1.0f + 3 * 0x1p-8f), 0x3f82, "tie goes to even");
    cr_assert_eq(sy__f32_to_bf16(1.0f + 0x1p-8f + 0x1p-20f), 0x3f81, "above the tie rounds up");
    cr_assert_eq(sy__f32_to_bf16(FLT_MAX), 0x7f80, "FLT_MAX rounds past the largest bf16 to infinity");
    cr_assert_eq(sy__f32_to_bf16(INFINITY), 0x7f80);
    cr_assert_eq(sy__f32_to_bf16(-INFINITY), 0xff80);
    cr_assert_eq(bits_of(sy__bf16_to_f32(0x3f80)), bits_of(1.0f));
    cr_assert_eq(bits_of(sy__bf16_to_f32(0x8000)), 0x80000000u);

    uint16_t h = sy__f32_to_bf16(from_bits(0x7f800001u));
    cr_assert((h & 0x7f80) == 0x7f80 && (h & 0x7f) != 0, "low-payload NaN -> 0x%04x is not NaN", h);
    cr_assert(isnan(sy__bf16_to_f32(sy__f32_to_bf16(NAN))));
}

Test(quants, bf16_round_trips_every_value)
{
    for (uint32_t h = 0; h < 0x10000; h++) {
        const float f = sy__bf16_to_f32((uint16_t)h);
        const uint16_t back = sy__f32_to_bf16(f);
        if (isnan(f)) {
            cr_assert(isnan(sy__bf16_to_f32(back)), "NaN 0x%04x -> 0x%04x", h, back);
            continue;
        }
        cr_assert_eq(back, h, "0x%04x -> %g -> 0x%04x", h, (double)f, back);
    }
}

/* ------------------------------------------------------ hand-built blocks */

Test(quants, q8_0_dequantizes_hand_built_block)
{
    uint8_t blk[34];
    blk[0] = 0x00; /* d = 0.5 = 0x3800, little endian */
    blk[1] = 0x38;
    for (int j = 0; j < 32; j++)
        blk[2 + j] = (uint8_t)(int8_t)(j - 16);
    float y[32];
    cr_assert_eq(sy__dequantize_row(SY_DTYPE_Q8_0, blk, y, 32), SY_OK);
    for (int j = 0; j < 32; j++)
        cr_assert_eq(y[j], (float)(j - 16) * 0.5f, "y[%d] = %g", j, (double)y[j]);
    cr_assert_eq(y[0], -8.0f);
    cr_assert_eq(y[31], 7.5f);
}

Test(quants, q4_0_dequantizes_hand_built_block)
{
    uint8_t blk[2 * 18];
    /* Two blocks: d = 2.0 (0x4000) and d = -0.25 (0xb400). Byte j holds
     * element j (low nibble) and element j + 16 (high nibble). */
    blk[0] = 0x00;
    blk[1] = 0x40;
    for (int j = 0; j < 16; j++)
        blk[2 + j] = (uint8_t)(j | ((15 - j) << 4));
    blk[18] = 0x00;
    blk[19] = 0xb4;
    for (int j = 0; j < 16; j++)
        blk[20 + j] = 0x9f; /* low 15 -> 7 * d, high 9 -> 1 * d */
    float y[64];
    cr_assert_eq(sy__dequantize_row(SY_DTYPE_Q4_0, blk, y, 64), SY_OK);
    for (int j = 0; j < 16; j++) {
        cr_assert_eq(y[j], (float)(j - 8) * 2.0f, "y[%d] = %g", j, (double)y[j]);
        cr_assert_eq(y[j + 16], (float)(7 - j) * 2.0f, "y[%d] = %g", j + 16, (double)y[j + 16]);
        cr_assert_eq(y[32 + j], -1.75f);
        cr_assert_eq(y[48 + j], -0.25f);
    }
    cr_assert_eq(y[0], -16.0f);
    cr_assert_eq(y[16], 14.0f);
}

Test(quants, q4_1_dequantizes_hand_built_block)
{
    uint8_t blk[20];
    blk[0] = 0x00; /* d = 0.25 = 0x3400 */
    blk[1] = 0x34;
    blk[2] = 0x00; /* m = -1.0 = 0xbc00 */
    blk[3] = 0xbc;
    for (int j = 0; j < 16; j++)
        blk[4 + j] = (uint8_t)(j | ((15 - j) << 4));
    float y[32];
    cr_assert_eq(sy__dequantize_row(SY_DTYPE_Q4_1, blk, y, 32), SY_OK);
    for (int j = 0; j < 16; j++) {
        cr_assert_eq(y[j], (float)j * 0.25f - 1.0f, "y[%d] = %g", j, (double)y[j]);
        cr_assert_eq(y[j + 16], (float)(15 - j) * 0.25f - 1.0f, "y[%d] = %g", j + 16, (double)y[j + 16]);
    }
    cr_assert_eq(y[0], -1.0f);
    cr_assert_eq(y[15], 2.75f);
}

Test(quants, q5_0_dequantizes_hand_built_block)
{
    uint8_t blk[22];
    blk[0] = 0x00; /* d = -0.5 = 0xb800 */
    blk[1] = 0xb8;
    /* qh = 0x80000001: fifth bit set for element 0 and element 31 */
    blk[2] = 0x01;
    blk[3] = 0x00;
    blk[4] = 0x00;
    blk[5] = 0x80;
    for (int j = 0; j < 16; j++)
        blk[6 + j] = (uint8_t)(j | ((15 - j) << 4));
    float y[32];
    cr_assert_eq(sy__dequantize_row(SY_DTYPE_Q5_0, blk, y, 32), SY_OK);
    /* element 0: (0 | 16) - 16 = 0 -> 0 * -0.5 = -0.0 (sign kept, as ggml) */
    cr_assert_eq(y[0], 0.0f);
    cr_assert(signbit(y[0]), "q5_0 has no min term: 0 * negative d is -0.0");
    cr_assert_eq(y[1], (1.0f - 16.0f) * -0.5f);
    cr_assert_eq(y[15], (15.0f - 16.0f) * -0.5f);
    cr_assert_eq(y[16], (15.0f - 16.0f) * -0.5f, "element 16: high nibble of byte 0, no fifth bit");
    cr_assert_eq(y[31], (16.0f + 0.0f - 16.0f) * -0.5f, "element 31: high nibble 0 plus bit 31 of qh");
    cr_assert_eq(y[30], (1.0f - 16.0f) * -0.5f);
}

Test(quants, q5_1_dequantizes_hand_built_block)
{
    uint8_t blk[24];
    blk[0] = 0x00; /* d = 0.25 */
    blk[1] = 0x34;
    blk[2] = 0x00; /* m = 2.0 */
    blk[3] = 0x40;
    /* qh = 0x00010002: fifth bit for element 1 and element 16 */
    blk[4] = 0x02;
    blk[5] = 0x00;
    blk[6] = 0x01;
    blk[7] = 0x00;
    for (int j = 0; j < 16; j++)
        blk[8 + j] = (uint8_t)(j | (j << 4));
    float y[32];
    cr_assert_eq(sy__dequantize_row(SY_DTYPE_Q5_1, blk, y, 32), SY_OK);
    cr_assert_eq(y[0], 2.0f);
    cr_assert_eq(y[1], 17.0f * 0.25f + 2.0f);
    cr_assert_eq(y[2], 2.0f * 0.25f + 2.0f);
    cr_assert_eq(y[16], 16.0f * 0.25f + 2.0f);
    cr_assert_eq(y[17], 1.0f * 0.25f + 2.0f);
    cr_assert_eq(y[31], 15.0f * 0.25f + 2.0f);
}

/* 6-bit scales {1,2,3,4,17,33,50,63} and mins {0,1,5,10,16,20,40,63} of
 * the eight sub-blocks, packed by hand the K-quant way: bytes 0..3 hold
 * scales 0..3 with the top two bits of scales 4..7 in bits 6..7, bytes
 * 4..7 the same for the mins, bytes 8..11 the low nibbles of scale j+4
 * (low) and min j+4 (high). */
static const uint8_t k_scales_packed[12] = {0x41, 0x82, 0xc3, 0xc4, 0x40, 0x41,
                                            0x85, 0xca, 0x01, 0x41, 0x82, 0xff};
static const int k_sc[8] = {1, 2, 3, 4, 17, 33, 50, 63};
static const int k_mn[8] = {0, 1, 5, 10, 16, 20, 40, 63};

Test(quants, q4_k_dequantizes_hand_built_block)
{
    uint8_t blk[144];
    blk[0] = 0x00; /* d = 0.5 */
    blk[1] = 0x38;
    blk[2] = 0x00; /* dmin = 0.25 */
    blk[3] = 0x34;
    memcpy(blk + 4, k_scales_packed, 12);
    uint8_t *qs = blk + 16;
    for (int i = 0; i < 128; i++)
        qs[i] = (uint8_t)(i * 7 + 3);
    float y[256];
    cr_assert_eq(sy__dequantize_row(SY_DTYPE_Q4_K, blk, y, 256), SY_OK);
    /* Element e: 64-element chunk g = e / 64 reads qs[32g .. 32g+31]; its
     * first 32 elements take the low nibbles (sub-block 2g), the next 32
     * the high nibbles (sub-block 2g+1). */
    for (int e = 0; e < 256; e++) {
        const int g = e / 64, w = e % 64, sb = 2 * g + (w >= 32);
        const uint8_t byte = qs[32 * g + w % 32];
        const int q = w < 32 ? (byte & 15) : (byte >> 4);
        const float want = 0.5f * (float)k_sc[sb] * (float)q - 0.25f * (float)k_mn[sb];
        cr_assert_eq(y[e], want, "y[%d] = %g, want %g", e, (double)y[e], (double)want);
    }
    /* Spot values worked out by hand: e=0: qs[0]=3, sub-block 0 (sc 1, m 0)
     * -> 0.5*1*3 - 0 = 1.5.  e=40: qs[8]=59=0x3b, high nibble 3,
     * sub-block 1 (sc 2, m 1) -> 0.5*2*3 - 0.25 = 2.75.  e=255: qs[127] =
     * (127*7+3)&255 = 124 = 0x7c, high nibble 7, sub-block 7 (sc 63, m 63)
     * -> 0.5*63*7 - 0.25*63 = 204.75. */
    cr_assert_eq(y[0], 1.5f);
    cr_assert_eq(y[40], 2.75f);
    cr_assert_eq(y[255], 204.75f);
}

Test(quants, q5_k_dequantizes_hand_built_block)
{
    uint8_t blk[176];
    blk[0] = 0x00; /* d = 0.5 */
    blk[1] = 0x38;
    blk[2] = 0x00; /* dmin = 0.25 */
    blk[3] = 0x34;
    memcpy(blk + 4, k_scales_packed, 12);
    uint8_t *qh = blk + 16, *qs = blk + 48;
    for (int i = 0; i < 32; i++)
        qh[i] = (uint8_t)(i * 37 + 11);
    for (int i = 0; i < 128; i++)
        qs[i] = (uint8_t)(i * 13 + 5);
    float y[256];
    cr_assert_eq(sy__dequantize_row(SY_DTYPE_Q5_K, blk, y, 256), SY_OK);
    /* As Q4_K, plus bit sb of qh[e % 32] as the fifth bit (16). */
    for (int e = 0; e < 256; e++) {
        const int g = e / 64, w = e % 64, sb = 2 * g + (w >= 32), l = w % 32;
        const uint8_t byte = qs[32 * g + l];
        const int q = (w < 32 ? (byte & 15) : (byte >> 4)) + (((qh[l] >> sb) & 1) ? 16 : 0);
        const float want = 0.5f * (float)k_sc[sb] * (float)q - 0.25f * (float)k_mn[sb];
        cr_assert_eq(y[e], want, "y[%d] = %g, want %g", e, (double)y[e], (double)want);
    }
    /* By hand: e=0: qs[0]=5, qh[0]=11=0b1011 bit 0 set -> q=21, sub-block 0
     * -> 0.5*1*21 - 0 = 10.5.  e=33: qs[1]=18=0x12 high nibble 1, qh[1]=48
     * =0b110000 bit 1 clear -> q=1, sub-block 1 -> 0.5*2*1 - 0.25 = 0.75. */
    cr_assert_eq(y[0], 10.5f);
    cr_assert_eq(y[33], 0.75f);
}

Test(quants, q6_k_dequantizes_hand_built_block)
{
    uint8_t blk[210];
    uint8_t *ql = blk, *qh = blk + 128;
    int8_t *sc = (int8_t *)(blk + 192);
    for (int i = 0; i < 128; i++)
        ql[i] = (uint8_t)(i * 29 + 7);
    for (int i = 0; i < 64; i++)
        qh[i] = (uint8_t)(i * 53 + 1);
    for (int i = 0; i < 16; i++)
        sc[i] = (int8_t)(i * 9 - 70);
    blk[208] = 0x00; /* d = 0.125 = 0x3000 */
    blk[209] = 0x30;
    float y[256];
    cr_assert_eq(sy__dequantize_row(SY_DTYPE_Q6_K, blk, y, 256), SY_OK);
    /* Element e: half n = e / 128 uses ql[64n..], qh[32n..], scales[8n..];
     * inside it, quarter k = (e % 128) / 32 and l = e % 32 read the low
     * (k < 2) or high (k >= 2) nibble of ql[64n + l + 32*(k%2)] and bits
     * 2k..2k+1 of qh[32n + l]; the scale is scales[8n + l/16 + 2k]. */
    for (int e = 0; e < 256; e++) {
        const int n = e / 128, k = (e % 128) / 32, l = e % 32;
        const uint8_t lb = ql[64 * n + l + 32 * (k % 2)];
        const int lo = k < 2 ? (lb & 15) : (lb >> 4);
        const int hi = (qh[32 * n + l] >> (2 * k)) & 3;
        const int q = (lo | (hi << 4)) - 32;
        const float want = 0.125f * (float)sc[8 * n + l / 16 + 2 * k] * (float)q;
        cr_assert_eq(y[e], want, "y[%d] = %g, want %g", e, (double)y[e], (double)want);
    }
    /* By hand: e=0: ql[0]=7, qh[0]=1 -> bits 0..1 = 1 -> q = 7|16 - 32 = -9,
     * scale sc[0] = -70 -> 0.125 * -70 * -9 = 78.75. */
    cr_assert_eq(y[0], 78.75f);
}

Test(quants, dequantizes_plain_types_by_value)
{
    const uint16_t h[3] = {0x3c00, 0xc000, 0x7bff};
    const uint16_t b[2] = {0x3f80, 0xc040};
    const int32_t i[3] = {-5, 16777217, 7};
    float y[3];
    cr_assert_eq(sy__dequantize_row(SY_DTYPE_F16, h, y, 3), SY_OK);
    cr_assert(y[0] == 1.0f && y[1] == -2.0f && y[2] == 65504.0f);
    cr_assert_eq(sy__dequantize_row(SY_DTYPE_BF16, b, y, 2), SY_OK);
    cr_assert(y[0] == 1.0f && y[1] == -3.0f);
    cr_assert_eq(sy__dequantize_row(SY_DTYPE_I32, i, y, 3), SY_OK);
    cr_assert(y[0] == -5.0f && y[1] == 16777216.0f && y[2] == 7.0f);
}

Test(quants, rejects_lengths_that_are_not_whole_blocks)
{
    uint8_t blk[210] = {0};
    float y[256];
    cr_assert_eq(sy__dequantize_row(SY_DTYPE_Q8_0, blk, y, 31), SY_E_INVALID_ARG);
    cr_assert_eq(sy__dequantize_row(SY_DTYPE_Q6_K, blk, y, 128), SY_E_INVALID_ARG);
    cr_assert_eq(sy__dequantize_row((sy_dtype)99, blk, y, 32), SY_E_DTYPE);
    cr_assert_eq(sy__quantize_row(SY_DTYPE_Q4_0, y, blk, 16), SY_E_INVALID_ARG);
    cr_assert_eq(sy__dequantize_row(SY_DTYPE_Q4_0, blk, y, 0), SY_OK, "an empty row is fine");
}

Test(quants, refuses_to_quantize_k_quants)
{
    float x[256] = {0};
    uint8_t out[210];
    cr_assert_eq(sy__quantize_row(SY_DTYPE_Q4_K, x, out, 256), SY_E_DTYPE);
    cr_assert_eq(sy__quantize_row(SY_DTYPE_Q5_K, x, out, 256), SY_E_DTYPE);
    cr_assert_eq(sy__quantize_row(SY_DTYPE_Q6_K, x, out, 256), SY_E_DTYPE);
}

/* --------------------------------------------------------- quantizers */

Test(quants, q8_0_quantizes_with_amax_over_127)
{
    float x[32];
    for (int j = 0; j < 32; j++)
        x[j] = (float)(j - 16); /* amax 16 */
    uint8_t blk[34];
    cr_assert_eq(sy__quantize_row(SY_DTYPE_Q8_0, x, blk, 32), SY_OK);
    const uint16_t d = (uint16_t)(blk[0] | (blk[1] << 8));
    cr_assert_eq(d, sy__f32_to_fp16(16.0f / 127.0f));
    const int8_t *qs = (const int8_t *)(blk + 2);
    cr_assert_eq(qs[0], -127, "the largest magnitude maps to -127");
    cr_assert_eq(qs[16], 0);
    cr_assert_eq(qs[17], 8, "1 * 127/16 = 7.94 rounds to 8");
    cr_assert_eq(qs[31], 119, "15 * 127/16 = 119.06 rounds to 119");
}

Test(quants, q4_0_quantizes_with_signed_max_over_minus_8)
{
    float x[32] = {0};
    x[0] = -4.0f; /* largest magnitude, negative: d = -4 / -8 = 0.5 */
    x[1] = 4.0f;  /* same magnitude but later: 4 * 2 + 8.5 = 16.5 -> clamps to 15 */
    x[2] = 1.0f;  /* 1 * 2 + 8.5 = 10.5 -> 10 */
    x[17] = -0.3f; /* -0.6 + 8.5 = 7.9 -> 7 */
    uint8_t blk[18];
    cr_assert_eq(sy__quantize_row(SY_DTYPE_Q4_0, x, blk, 32), SY_OK);
    cr_assert_eq(blk[0] | (blk[1] << 8), 0x3800, "d = 0.5");
    const uint8_t *qs = blk + 2;
    cr_assert_eq(qs[0] & 15, 0, "the signed max lands on code 0 (-8)");
    cr_assert_eq(qs[1] & 15, 15, "the opposite extreme clamps at 15");
    cr_assert_eq(qs[2] & 15, 10);
    cr_assert_eq(qs[1] >> 4, 7, "element 17 in the high nibble of byte 1");
    cr_assert_eq(qs[3], 0x88, "zeros map to code 8");
    float y[32];
    cr_assert_eq(sy__dequantize_row(SY_DTYPE_Q4_0, blk, y, 32), SY_OK);
    cr_assert_eq(y[0], -4.0f);
    cr_assert_eq(y[1], 3.5f);
    cr_assert_eq(y[2], 1.0f);
}

Test(quants, q4_1_quantizes_with_range_over_15)
{
    float x[32];
    for (int j = 0; j < 32; j++)
        x[j] = 1.0f + (float)j * 0.5f; /* min 1, max 16.5, d = 15.5/15 */
    uint8_t blk[20];
    cr_assert_eq(sy__quantize_row(SY_DTYPE_Q4_1, x, blk, 32), SY_OK);
    cr_assert_eq(blk[0] | (blk[1] << 8), sy__f32_to_fp16(15.5f / 15.0f));
    cr_assert_eq(blk[2] | (blk[3] << 8), 0x3c00, "m = min = 1.0");
    cr_assert_eq(blk[4] & 15, 0, "the min maps to 0");
    cr_assert_eq(blk[4 + 15] >> 4, 15, "the max maps to 15");
}

Test(quants, quantizes_i32_rounding_half_away_and_saturating)
{
    const float x[6] = {2.5f, -2.5f, 1.49f, NAN, 1e10f, -1e10f};
    int32_t y[6];
    cr_assert_eq(sy__quantize_row(SY_DTYPE_I32, x, y, 6), SY_OK);
    cr_assert_eq(y[0], 3);
    cr_assert_eq(y[1], -3);
    cr_assert_eq(y[2], 1);
    cr_assert_eq(y[3], 0, "NaN becomes 0");
    cr_assert_eq(y[4], INT32_MAX);
    cr_assert_eq(y[5], INT32_MIN);
}

Test(quants, quantizes_non_finite_input_without_undefined_behaviour)
{
    float x[32];
    for (int j = 0; j < 32; j++)
        x[j] = (float)j;
    x[3] = NAN;
    x[5] = INFINITY;
    uint8_t out[34];
    /* Any bytes are acceptable; the point is no trap under UBSan. */
    cr_assert_eq(sy__quantize_row(SY_DTYPE_Q8_0, x, out, 32), SY_OK);
    cr_assert_eq(sy__quantize_row(SY_DTYPE_Q4_0, x, out, 32), SY_OK);
    cr_assert_eq(sy__quantize_row(SY_DTYPE_Q4_1, x, out, 32), SY_OK);
}

/* Quantizes random data and checks every element against the rounding
 * error the format allows: half a step (a full step at Q4_0's clamped
 * edge), plus the error of storing d (and m) as fp16. */
static void check_round_trip(sy_dtype t, tu_rng *rng, float lo, float hi)
{
    enum { N = 32 * 64 };
    static float x[N], y[N];
    static uint8_t q[N * 2];
    tu_fill(rng, x, N, lo, hi);
    cr_assert_eq(sy__quantize_row(t, x, q, N), SY_OK);
    cr_assert_eq(sy__dequantize_row(t, q, y, N), SY_OK);
    for (int b = 0; b < N / 32; b++) {
        float mn = FLT_MAX, mx = -FLT_MAX, amax = 0;
        for (int j = 0; j < 32; j++) {
            const float v = x[b * 32 + j];
            mn = fminf(mn, v);
            mx = fmaxf(mx, v);
            amax = fmaxf(amax, fabsf(v));
        }
        float bound;
        switch (t) {
        case SY_DTYPE_Q8_0:
            bound = 0.5f * amax / 127.0f + amax * 0x1p-10f;
            break;
        case SY_DTYPE_Q4_0:
            bound = amax / 8.0f + amax * 0x1p-10f;
            break;
        case SY_DTYPE_Q4_1:
            bound = 0.5f * (mx - mn) / 15.0f + (mx - mn) * 0x1p-10f + fabsf(mn) * 0x1p-11f;
            break;
        default:
            bound = 0.0f;
            break;
        }
        for (int j = 0; j < 32; j++) {
            const float err = fabsf(x[b * 32 + j] - y[b * 32 + j]);
            cr_assert(err <= bound, "%s seed %llu: element %d: %g -> %g, error %g > bound %g",
                      sy_dtype_name(t), (unsigned long long)rng->seed, b * 32 + j,
                      (double)x[b * 32 + j], (double)y[b * 32 + j], (double)err, (double)bound);
        }
    }
}

Test(quants, q8_0_round_trip_stays_within_half_a_step)
{
    tu_rng rng = tu_rng_fresh();
    check_round_trip(SY_DTYPE_Q8_0, &rng, -3.0f, 3.0f);
    check_round_trip(SY_DTYPE_Q8_0, &rng, 0.0f, 0.01f);
}

Test(quants, q4_0_round_trip_stays_within_one_step)
{
    tu_rng rng = tu_rng_fresh();
    check_round_trip(SY_DTYPE_Q4_0, &rng, -3.0f, 3.0f);
    check_round_trip(SY_DTYPE_Q4_0, &rng, -1.0f, 5.0f);
}

Test(quants, q4_1_round_trip_stays_within_half_a_step)
{
    tu_rng rng = tu_rng_fresh();
    check_round_trip(SY_DTYPE_Q4_1, &rng, -3.0f, 3.0f);
    check_round_trip(SY_DTYPE_Q4_1, &rng, 10.0f, 12.0f);
}

Test(quants, all_zero_block_quantizes_to_zero)
{
    float x[32] = {0}, y[32];
    uint8_t q[34];
    const sy_dtype types[3] = {SY_DTYPE_Q8_0, SY_DTYPE_Q4_0, SY_DTYPE_Q4_1};
    for (int i = 0; i < 3; i++) {
        for (int j = 0; j < 32; j++)
            y[j] = 1.0f;
        cr_assert_eq(sy__quantize_row(types[i], x, q, 32), SY_OK);
        cr_assert_eq(sy__dequantize_row(types[i], q, y, 32), SY_OK);
        for (int j = 0; j < 32; j++)
            cr_assert_eq(y[j], 0.0f, "%s: y[%d] = %g", sy_dtype_name(types[i]), j, (double)y[j]);
    }
}

Test(quants, f16_and_bf16_rows_round_like_the_scalar_conversions)
{
    const float x[4] = {1.0f + 0x1p-11f, 65520.0f, -0.1f, 3.0f};
    uint16_t h[4], b[4];
    cr_assert_eq(sy__quantize_row(SY_DTYPE_F16, x, h, 4), SY_OK);
    cr_assert_eq(sy__quantize_row(SY_DTYPE_BF16, x, b, 4), SY_OK);
    for (int i = 0; i < 4; i++) {
        cr_assert_eq(h[i], sy__f32_to_fp16(x[i]));
        cr_assert_eq(b[i], sy__f32_to_bf16(x[i]));
    }
    cr_assert_eq(h[1], 0x7c00);
}
