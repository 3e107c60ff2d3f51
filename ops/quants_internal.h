/* Element conversions and GGUF block (de)quantization.
 * Pure C, no dependency on the rest of the core: plugins may compile
 * quants.c into themselves (they never link libswitchyard). */
#ifndef SY_OPS_QUANTS_INTERNAL_H
#define SY_OPS_QUANTS_INTERNAL_H

#include <stdint.h>

#include "switchyard/status.h"
#include "switchyard/types.h"

#define SY_QK 32    /* elements per Q8_0 / Q4_0 / Q4_1 block */
#define SY_QK_K 256 /* elements per K-quant super-block */

/* Block layouts exactly as GGUF stores them (little endian, packed). */
typedef struct {
    uint16_t d;          /* f16 scale */
    int8_t qs[SY_QK];
} sy_block_q8_0;

typedef struct {
    uint16_t d;          /* f16 scale */
    uint8_t qs[SY_QK / 2]; /* element j in low nibble of qs[j], element j+16 in high nibble */
} sy_block_q4_0;

typedef struct {
    uint16_t d;          /* f16 scale */
    uint16_t m;          /* f16 min */
    uint8_t qs[SY_QK / 2];
} sy_block_q4_1;

typedef struct {
    uint16_t d;          /* f16 scale */
    uint8_t qh[4];       /* fifth bit of element j at bit j (little-endian uint32) */
    uint8_t qs[SY_QK / 2]; /* low nibbles as in Q4_0; value = (q - 16) * d */
} sy_block_q5_0;

typedef struct {
    uint16_t d;          /* f16 scale */
    uint16_t m;          /* f16 min; value = q * d + m */
    uint8_t qh[4];
    uint8_t qs[SY_QK / 2];
} sy_block_q5_1;

typedef struct {
    uint16_t d;          /* f16 super-block scale for the 6-bit scales */
    uint16_t dmin;       /* f16 super-block scale for the 6-bit mins */
    uint8_t scales[12];  /* 8 scales and 8 mins, 6 bits each, packed */
    uint8_t qs[SY_QK_K / 2];
} sy_block_q4_k;

typedef struct {
    uint16_t d;
    uint16_t dmin;
    uint8_t scales[12];
    uint8_t qh[SY_QK_K / 8]; /* fifth bit of each element */
    uint8_t qs[SY_QK_K / 2];
} sy_block_q5_k;

typedef struct {
    uint8_t ql[SY_QK_K / 2];     /* low 4 bits */
    uint8_t qh[SY_QK_K / 4];     /* high 2 bits */
    int8_t scales[SY_QK_K / 16]; /* 8-bit scales of 16-element groups */
    uint16_t d;                  /* f16 super-block scale */
} sy_block_q6_k;

float sy__fp16_to_f32(uint16_t h);
/* Rounds to nearest even; overflow gives infinity; NaN stays NaN. */
uint16_t sy__f32_to_fp16(float f);
float sy__bf16_to_f32(uint16_t h);
/* Rounds to nearest even; NaN stays NaN. */
uint16_t sy__f32_to_bf16(float f);

/* Converts |n| elements (a multiple of the block size of |t|) of dtype |t|
 * at |src| to F32 at |dst|.  Every dtype; I32 converts by value.
 * Returns SY_E_INVALID_ARG when |n| is not a multiple of the block size. */
sy_status sy__dequantize_row(sy_dtype t, const void *src, float *dst, int64_t n);

/* Converts |n| F32 elements to dtype |t|: F32, F16, BF16, I32 (rounded
 * half away from zero, saturated, NaN -> 0), Q8_0, Q4_0, Q4_1 (ggml's
 * reference quantizers, bit-exact); SY_E_DTYPE for the K-quants, Q5_0 and
 * Q5_1, which are dequantize-only. */
sy_status sy__quantize_row(sy_dtype t, const float *src, void *dst, int64_t n);

#endif
