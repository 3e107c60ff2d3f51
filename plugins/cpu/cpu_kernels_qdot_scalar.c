/* Scalar kernels of the quantized matmul: the Q8 quantizer and one dot
 * product per quantized weight dtype, written as plainly as the block
 * layouts of ops/quants_internal.h allow.  They are the reference the
 * SIMD sets are tested against: each weight block's quants are unpacked to
 * their signed integer values, dotted exactly in int32 with the column's
 * quants (both planes joined into one integer), and scaled once per block
 * (per sub-block for K-quants). */
#include <math.h>
#include <string.h>

#include "cpu_isa.h"
#include "cpu_qdot.h"
#include "quants_internal.h"

void cpu_scalar_quantize_q8(const float *src, void *dst, int64_t k, int planes)
{
    int8_t *hi = dst, *lo = hi + k;
    float *sc = (float *)(hi + k * planes);
    const float top = planes == 2 ? 127.0f * 128.0f : 127.0f;
    for (int64_t b = 0; b < k / CPU_Q8_BLOCK; b++) {
        const float *x = src + b * CPU_Q8_BLOCK;
        float amax = 0.0f;
        for (int j = 0; j < CPU_Q8_BLOCK; j++)
            amax = fmaxf(amax, fabsf(x[j]));
        const float db = amax / top;
        const float id = db != 0.0f ? 1.0f / db : 0.0f;
        int sum = 0;
        for (int j = 0; j < CPU_Q8_BLOCK; j++) {
            /* Round to nearest even, as the SIMD quantizers' conversion. */
            float v = nearbyintf(x[j] * id);
            v = fminf(fmaxf(v, -top), top);
            const int q = (int)v;
            const int64_t at = b * CPU_Q8_BLOCK + j;
            if (planes == 2) {
                /* hi = floor((q + 64) / 128), lo = q - 128 * hi in [-64, 63]. */
                const int h = (q + 64 + 128 * 128) / 128 - 128;
                hi[at] = (int8_t)h;
                lo[at] = (int8_t)(q - 128 * h);
            } else {
                hi[at] = (int8_t)q;
            }
            sum += q;
        }
        sc[2 * b] = db;
        sc[2 * b + 1] = db * (float)sum;
    }
}

/* The quants of one column: value i is 128 * hi[i] + lo[i] with two
 * planes, hi[i] with one. */
typedef struct cpu_scalar_q {
    const int8_t *hi, *lo; /* lo NULL: one plane */
} cpu_scalar_q;

static int32_t cpu_scalar_qat(cpu_scalar_q q, int64_t i)
{
    return q.lo ? 128 * (int32_t)q.hi[i] + q.lo[i] : q.hi[i];
}

/* Sum of a[j] * q[j] over |n| signed integers from element |at|. */
static int32_t cpu_scalar_idot(const int8_t *a, cpu_scalar_q q, int64_t at, int n)
{
    int32_t sum = 0;
    for (int j = 0; j < n; j++)
        sum += (int32_t)a[j] * cpu_scalar_qat(q, at + j);
    return sum;
}

/* Sum of q[j] over |n| elements from |at|. */
static int32_t cpu_scalar_qsum(cpu_scalar_q q, int64_t at, int n)
{
    int32_t sum = 0;
    for (int j = 0; j < n; j++)
        sum += cpu_scalar_qat(q, at + j);
    return sum;
}

/* The column loop shared by every kernel below: |col_dot| computes one
 * column's dot from the weight row, the column's quants and its (d, ds)
 * pairs (only d is read: the reference sums the quants itself). */
typedef float (*cpu_scalar_col_fn)(const void *w, cpu_scalar_q qs, const float *sc, int64_t k);

static void cpu_scalar_cols(cpu_scalar_col_fn col_dot, const void *w, const void *x,
                            size_t x_stride, int nc, int64_t k, int planes, float *out)
{
    for (int c = 0; c < nc; c++) {
        const uint8_t *col = (const uint8_t *)x + (size_t)c * x_stride;
        const cpu_scalar_q q = {(const int8_t *)col, planes == 2 ? (const int8_t *)col + k : NULL};
        out[c] = col_dot(w, q, cpu_q8_scales(col, k, planes), k);
    }
}

static float cpu_scalar_col_q8_0(const void *w, cpu_scalar_q qs, const float *sc, int64_t k)
{
    const sy_block_q8_0 *b = w;
    float acc = 0.0f;
    for (int64_t i = 0; i < k / SY_QK; i++)
        acc += sy__fp16_to_f32(b[i].d) * sc[2 * i] * (float)cpu_scalar_idot(b[i].qs, qs, i * SY_QK, SY_QK);
    return acc;
}

/* Element j of a Q4_0/Q4_1/Q5_0/Q5_1 block: low nibble of qs[j] for
 * j < 16, high nibble of qs[j - 16] above, plus bit j of |qh| << 4. */
static int cpu_scalar_q4_elem(const uint8_t *qs, uint32_t qh, int j)
{
    const int nib = j < SY_QK / 2 ? qs[j] & 0x0F : qs[j - SY_QK / 2] >> 4;
    return nib | (int)(((qh >> j) & 1u) << 4);
}

/* Dot of one 32-element block of Q4/Q5 quants (minus |offset|) with the
 * column's quants from element |at|; qh = 0 for the 4-bit formats. */
static int32_t cpu_scalar_idot_q4(const uint8_t *qs, uint32_t qh, int offset, cpu_scalar_q q8,
                                  int64_t at)
{
    int32_t sum = 0;
    for (int j = 0; j < SY_QK; j++)
        sum += (cpu_scalar_q4_elem(qs, qh, j) - offset) * cpu_scalar_qat(q8, at + j);
    return sum;
}

static uint32_t cpu_scalar_qh(const uint8_t qh[4])
{
    uint32_t v;
    memcpy(&v, qh, sizeof v);
    return v;
}

static float cpu_scalar_col_q4_0(const void *w, cpu_scalar_q qs, const float *sc, int64_t k)
{
    const sy_block_q4_0 *b = w;
    float acc = 0.0f;
    for (int64_t i = 0; i < k / SY_QK; i++)
        acc += sy__fp16_to_f32(b[i].d) * sc[2 * i] *
               (float)cpu_scalar_idot_q4(b[i].qs, 0, 8, qs, i * SY_QK);
    return acc;
}

static float cpu_scalar_col_q5_0(const void *w, cpu_scalar_q qs, const float *sc, int64_t k)
{
    const sy_block_q5_0 *b = w;
    float acc = 0.0f;
    for (int64_t i = 0; i < k / SY_QK; i++)
        acc += sy__fp16_to_f32(b[i].d) * sc[2 * i] *
               (float)cpu_scalar_idot_q4(b[i].qs, cpu_scalar_qh(b[i].qh), 16, qs, i * SY_QK);
    return acc;
}

/* Q4_1/Q5_1: value = q * dw + m, so a block contributes
 * dw * dx * sum(q * q8) + m * dx * sum(q8). */
static float cpu_scalar_col_q4_1(const void *w, cpu_scalar_q qs, const float *sc, int64_t k)
{
    const sy_block_q4_1 *b = w;
    float acc = 0.0f;
    for (int64_t i = 0; i < k / SY_QK; i++) {
        const int32_t s8 = cpu_scalar_qsum(qs, i * SY_QK, SY_QK);
        acc += sc[2 * i] *
               (sy__fp16_to_f32(b[i].d) * (float)cpu_scalar_idot_q4(b[i].qs, 0, 0, qs, i * SY_QK) +
                sy__fp16_to_f32(b[i].m) * (float)s8);
    }
    return acc;
}

static float cpu_scalar_col_q5_1(const void *w, cpu_scalar_q qs, const float *sc, int64_t k)
{
    const sy_block_q5_1 *b = w;
    float acc = 0.0f;
    for (int64_t i = 0; i < k / SY_QK; i++) {
        const int32_t s8 = cpu_scalar_qsum(qs, i * SY_QK, SY_QK);
        const int32_t dot = cpu_scalar_idot_q4(b[i].qs, cpu_scalar_qh(b[i].qh), 0, qs, i * SY_QK);
        acc += sc[2 * i] * (sy__fp16_to_f32(b[i].d) * (float)dot + sy__fp16_to_f32(b[i].m) * (float)s8);
    }
    return acc;
}

/* Q4_K/Q5_K: sub-block j (32 elements) holds the low (j even) or high
 * (j odd) nibbles of qs[32 * (j / 2) ..], plus bit j of each qh[l] for
 * Q5_K; value = d * scale_j * q - dmin * min_j. */
static float cpu_scalar_col_k(const uint16_t *dd, const uint16_t *dmin, const uint8_t *scales,
                              const uint8_t *qs4, const uint8_t *qh, cpu_scalar_q q8,
                              int64_t at, const float *sc8)
{
    const float d = sy__fp16_to_f32(*dd), m = sy__fp16_to_f32(*dmin);
    float acc = 0.0f;
    for (int j = 0; j < SY_QK_K / 32; j++) {
        const uint8_t *q = qs4 + 32 * (j / 2);
        int32_t dot = 0, s8 = 0;
        for (int l = 0; l < 32; l++) {
            int v = j % 2 ? q[l] >> 4 : q[l] & 0x0F;
            if (qh)
                v |= ((qh[l] >> j) & 1) << 4;
            dot += v * cpu_scalar_qat(q8, at + 32 * j + l);
            s8 += cpu_scalar_qat(q8, at + 32 * j + l);
        }
        int sc, mn;
        cpu_k4_scale_min(scales, j, &sc, &mn);
        acc += sc8[2 * j] * (d * (float)sc * (float)dot - m * (float)mn * (float)s8);
    }
    return acc;
}

static float cpu_scalar_col_q4_k(const void *w, cpu_scalar_q qs, const float *sc, int64_t k)
{
    const sy_block_q4_k *b = w;
    float acc = 0.0f;
    for (int64_t i = 0; i < k / SY_QK_K; i++)
        acc += cpu_scalar_col_k(&b[i].d, &b[i].dmin, b[i].scales, b[i].qs, NULL, qs, i * SY_QK_K,
                                sc + 2 * i * (SY_QK_K / 32));
    return acc;
}

static float cpu_scalar_col_q5_k(const void *w, cpu_scalar_q qs, const float *sc, int64_t k)
{
    const sy_block_q5_k *b = w;
    float acc = 0.0f;
    for (int64_t i = 0; i < k / SY_QK_K; i++)
        acc += cpu_scalar_col_k(&b[i].d, &b[i].dmin, b[i].scales, b[i].qs, b[i].qh, qs, i * SY_QK_K,
                                sc + 2 * i * (SY_QK_K / 32));
    return acc;
}

/* Q6_K: in each half of 128 elements, element 32 * g + l (g = 0..3)
 * takes 4 bits from ql[l + 32 * (g & 1)] (low nibble for g < 2, high
 * above) and 2 bits from qh[l] at bit 2g; value = d * scale * (q - 32)
 * with one int8 scale per 16 elements. */
static float cpu_scalar_col_q6_k(const void *w, cpu_scalar_q qs, const float *sc, int64_t k)
{
    const sy_block_q6_k *b = w;
    float acc = 0.0f;
    for (int64_t i = 0; i < k / SY_QK_K; i++) {
        const float dw = sy__fp16_to_f32(b[i].d);
        for (int s = 0; s < SY_QK_K / 32; s++) {
            const int half = s / 4, g = s % 4;
            const uint8_t *ql = b[i].ql + 64 * half + 32 * (g & 1);
            const uint8_t *qh = b[i].qh + 32 * half;
            const int64_t at = i * SY_QK_K + 32 * s;
            /* 64 bits: scale * (q - 32) * a 16-bit quant, summed over 32. */
            int64_t dot = 0;
            for (int l = 0; l < 32; l++) {
                const int lo = g < 2 ? ql[l] & 0x0F : ql[l] >> 4;
                const int v = (lo | (((qh[l] >> (2 * g)) & 3) << 4)) - 32;
                dot += (int64_t)(b[i].scales[8 * half + 2 * g + l / 16] * v) * cpu_scalar_qat(qs, at + l);
            }
            acc += dw * sc[2 * (i * (SY_QK_K / 32) + s)] * (float)dot;
        }
    }
    return acc;
}

void cpu_scalar_qdot_q8_0(CPU_QDOT_ARGS)
{
    cpu_scalar_cols(cpu_scalar_col_q8_0, w, x, x_stride, nc, k, planes, out);
}

void cpu_scalar_qdot_q4_0(CPU_QDOT_ARGS)
{
    cpu_scalar_cols(cpu_scalar_col_q4_0, w, x, x_stride, nc, k, planes, out);
}

void cpu_scalar_qdot_q4_1(CPU_QDOT_ARGS)
{
    cpu_scalar_cols(cpu_scalar_col_q4_1, w, x, x_stride, nc, k, planes, out);
}

void cpu_scalar_qdot_q5_0(CPU_QDOT_ARGS)
{
    cpu_scalar_cols(cpu_scalar_col_q5_0, w, x, x_stride, nc, k, planes, out);
}

void cpu_scalar_qdot_q5_1(CPU_QDOT_ARGS)
{
    cpu_scalar_cols(cpu_scalar_col_q5_1, w, x, x_stride, nc, k, planes, out);
}

void cpu_scalar_qdot_q4_k(CPU_QDOT_ARGS)
{
    cpu_scalar_cols(cpu_scalar_col_q4_k, w, x, x_stride, nc, k, planes, out);
}

void cpu_scalar_qdot_q5_k(CPU_QDOT_ARGS)
{
    cpu_scalar_cols(cpu_scalar_col_q5_k, w, x, x_stride, nc, k, planes, out);
}

void cpu_scalar_qdot_q6_k(CPU_QDOT_ARGS)
{
    cpu_scalar_cols(cpu_scalar_col_q6_k, w, x, x_stride, nc, k, planes, out);
}
