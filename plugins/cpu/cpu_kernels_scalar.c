/* Scalar inner kernels: portable C, always available, and the table that
 * $SWITCHYARD_CPU_ISA=scalar selects.  The row dequantizers follow the
 * GGUF block layouts of ops/quants_internal.h element for element. */
#include <math.h>
#include <string.h>

#include "cpu_isa.h"
#include "cpu_qdot.h"
#include "quants_internal.h"

static float cpu_scalar_dot_f32(const float *a, const float *b, int64_t n)
{
    float sum = 0.0f;
    for (int64_t i = 0; i < n; i++)
        sum += a[i] * b[i];
    return sum;
}

static float cpu_scalar_dot_f16(const uint16_t *a, const float *b, int64_t n)
{
    float sum = 0.0f;
    for (int64_t i = 0; i < n; i++)
        sum += sy__fp16_to_f32(a[i]) * b[i];
    return sum;
}

static void cpu_scalar_axpy_f32(float *y, float a, const float *x, int64_t n)
{
    for (int64_t i = 0; i < n; i++)
        y[i] += a * x[i];
}

static void cpu_scalar_axpy_f16(float *y, float a, const uint16_t *x, int64_t n)
{
    for (int64_t i = 0; i < n; i++)
        y[i] += a * sy__fp16_to_f32(x[i]);
}

static void cpu_scalar_add_f32(float *y, const float *a, const float *b, int64_t n)
{
    for (int64_t i = 0; i < n; i++)
        y[i] = a[i] + b[i];
}

static void cpu_scalar_mul_f32(float *y, const float *a, const float *b, int64_t n)
{
    for (int64_t i = 0; i < n; i++)
        y[i] = a[i] * b[i];
}

static void cpu_scalar_scale_f32(float *y, const float *a, float s, float bias, int64_t n)
{
    if (bias == 0.0f) {
        for (int64_t i = 0; i < n; i++)
            y[i] = a[i] * s;
    } else {
        for (int64_t i = 0; i < n; i++)
            y[i] = fmaf(a[i], s, bias);
    }
}

static void cpu_scalar_f32_to_f16(const float *src, uint16_t *dst, int64_t n)
{
    for (int64_t i = 0; i < n; i++)
        dst[i] = sy__f32_to_fp16(src[i]);
}

static void cpu_scalar_silu_f32(float *y, const float *a, const float *b, int64_t n)
{
    for (int64_t i = 0; i < n; i++) {
        const float v = a[i] / (1.0f + expf(-a[i]));
        y[i] = b ? v * b[i] : v;
    }
}

static void cpu_scalar_gelu_f32(float *y, const float *a, const float *b, int64_t n)
{
    const float sqrt_2_over_pi = 0.79788456080286535588f;
    for (int64_t i = 0; i < n; i++) {
        const float x = a[i];
        const float v = 0.5f * x * (1.0f + tanhf(sqrt_2_over_pi * (x + 0.044715f * x * x * x)));
        y[i] = b ? v * b[i] : v;
    }
}

static float cpu_scalar_row_elem(const void *row, bool f16, int64_t i)
{
    return f16 ? sy__fp16_to_f32(((const uint16_t *)row)[i]) : ((const float *)row)[i];
}

static void cpu_scalar_dot_rows(const void *rows, size_t stride, bool f16, int64_t n, const float *q,
                                int64_t q_stride, int64_t nh, int64_t d, float scale, float *out,
                                int64_t out_stride)
{
    for (int64_t h = 0; h < nh; h++)
        for (int64_t j = 0; j < n; j++) {
            const void *r = (const char *)rows + j * (int64_t)stride;
            float sum = 0.0f;
            for (int64_t i = 0; i < d; i++)
                sum += cpu_scalar_row_elem(r, f16, i) * q[h * q_stride + i];
            out[h * out_stride + j] = sum * scale;
        }
}

static void cpu_scalar_mix_rows(float *acc, int64_t acc_stride, const void *rows, size_t stride,
                                bool f16, int64_t n, const float *p, int64_t p_stride, int64_t nh,
                                int64_t d)
{
    for (int64_t h = 0; h < nh; h++)
        for (int64_t j = 0; j < n; j++) {
            const void *r = (const char *)rows + j * (int64_t)stride;
            for (int64_t i = 0; i < d; i++)
                acc[h * acc_stride + i] += p[h * p_stride + j] * cpu_scalar_row_elem(r, f16, i);
        }
}

static float cpu_scalar_exp_sum_f32(float *y, const float *x, float scale, float shift, int64_t n)
{
    double sum = 0.0;
    for (int64_t i = 0; i < n; i++) {
        y[i] = expf(x[i] * scale - shift);
        sum += y[i];
    }
    return (float)sum;
}

static void cpu_scalar_dequant_f32(const void *src, float *dst, int64_t n)
{
    memcpy(dst, src, (size_t)n * sizeof(float));
}

static void cpu_scalar_dequant_f16(const void *src, float *dst, int64_t n)
{
    const uint16_t *x = src;
    for (int64_t i = 0; i < n; i++)
        dst[i] = sy__fp16_to_f32(x[i]);
}

static void cpu_scalar_dequant_bf16(const void *src, float *dst, int64_t n)
{
    const uint16_t *x = src;
    for (int64_t i = 0; i < n; i++)
        dst[i] = sy__bf16_to_f32(x[i]);
}

static void cpu_scalar_dequant_i32(const void *src, float *dst, int64_t n)
{
    const int32_t *x = src;
    for (int64_t i = 0; i < n; i++)
        dst[i] = (float)x[i];
}

static void cpu_scalar_dequant_q8_0(const void *src, float *dst, int64_t n)
{
    const sy_block_q8_0 *b = src;
    for (int64_t i = 0; i < n / SY_QK; i++, dst += SY_QK) {
        float d = sy__fp16_to_f32(b[i].d);
        for (int j = 0; j < SY_QK; j++)
            dst[j] = (float)b[i].qs[j] * d;
    }
}

static void cpu_scalar_dequant_q4_0(const void *src, float *dst, int64_t n)
{
    const sy_block_q4_0 *b = src;
    for (int64_t i = 0; i < n / SY_QK; i++, dst += SY_QK) {
        float d = sy__fp16_to_f32(b[i].d);
        for (int j = 0; j < SY_QK / 2; j++) {
            dst[j] = (float)((int)(b[i].qs[j] & 0x0F) - 8) * d;
            dst[j + SY_QK / 2] = (float)((int)(b[i].qs[j] >> 4) - 8) * d;
        }
    }
}

static void cpu_scalar_dequant_q4_1(const void *src, float *dst, int64_t n)
{
    const sy_block_q4_1 *b = src;
    for (int64_t i = 0; i < n / SY_QK; i++, dst += SY_QK) {
        float d = sy__fp16_to_f32(b[i].d);
        float m = sy__fp16_to_f32(b[i].m);
        for (int j = 0; j < SY_QK / 2; j++) {
            dst[j] = (float)(b[i].qs[j] & 0x0F) * d + m;
            dst[j + SY_QK / 2] = (float)(b[i].qs[j] >> 4) * d + m;
        }
    }
}

/* Q5_0/Q5_1 are rare in hot paths (a few tensors of some K-quant mixes):
 * the shared reference dequantizer serves them. */
static void cpu_scalar_dequant_q5_0(const void *src, float *dst, int64_t n)
{
    sy__dequantize_row(SY_DTYPE_Q5_0, src, dst, n);
}

static void cpu_scalar_dequant_q5_1(const void *src, float *dst, int64_t n)
{
    sy__dequantize_row(SY_DTYPE_Q5_1, src, dst, n);
}

/* Unpacks the 6-bit scale and min of sub-block |j| of a Q4_K/Q5_K block. */
static void cpu_scalar_scale_min_k4(int j, const uint8_t *q, uint8_t *out_scale, uint8_t *out_min)
{
    if (j < 4) {
        *out_scale = q[j] & 63;
        *out_min = q[j + 4] & 63;
    } else {
        *out_scale = (uint8_t)((q[j + 4] & 0x0F) | ((q[j - 4] >> 6) << 4));
        *out_min = (uint8_t)((q[j + 4] >> 4) | ((q[j] >> 6) << 4));
    }
}

static void cpu_scalar_dequant_q4_k(const void *src, float *dst, int64_t n)
{
    const sy_block_q4_k *b = src;
    for (int64_t i = 0; i < n / SY_QK_K; i++) {
        float d = sy__fp16_to_f32(b[i].d);
        float dmin = sy__fp16_to_f32(b[i].dmin);
        const uint8_t *q = b[i].qs;
        for (int j = 0; j < SY_QK_K / 64; j++, q += 32) {
            uint8_t sc, m;
            cpu_scalar_scale_min_k4(2 * j, b[i].scales, &sc, &m);
            float d1 = d * sc, m1 = dmin * m;
            cpu_scalar_scale_min_k4(2 * j + 1, b[i].scales, &sc, &m);
            float d2 = d * sc, m2 = dmin * m;
            for (int l = 0; l < 32; l++)
                *dst++ = d1 * (float)(q[l] & 0x0F) - m1;
            for (int l = 0; l < 32; l++)
                *dst++ = d2 * (float)(q[l] >> 4) - m2;
        }
    }
}

static void cpu_scalar_dequant_q5_k(const void *src, float *dst, int64_t n)
{
    const sy_block_q5_k *b = src;
    for (int64_t i = 0; i < n / SY_QK_K; i++) {
        float d = sy__fp16_to_f32(b[i].d);
        float dmin = sy__fp16_to_f32(b[i].dmin);
        const uint8_t *ql = b[i].qs;
        const uint8_t *qh = b[i].qh;
        uint8_t u1 = 1, u2 = 2;
        for (int j = 0; j < SY_QK_K / 64; j++, ql += 32) {
            uint8_t sc, m;
            cpu_scalar_scale_min_k4(2 * j, b[i].scales, &sc, &m);
            float d1 = d * sc, m1 = dmin * m;
            cpu_scalar_scale_min_k4(2 * j + 1, b[i].scales, &sc, &m);
            float d2 = d * sc, m2 = dmin * m;
            for (int l = 0; l < 32; l++)
                *dst++ = d1 * (float)((ql[l] & 0x0F) + ((qh[l] & u1) ? 16 : 0)) - m1;
            for (int l = 0; l < 32; l++)
                *dst++ = d2 * (float)((ql[l] >> 4) + ((qh[l] & u2) ? 16 : 0)) - m2;
            u1 = (uint8_t)(u1 << 2);
            u2 = (uint8_t)(u2 << 2);
        }
    }
}

static void cpu_scalar_dequant_q6_k(const void *src, float *dst, int64_t n)
{
    const sy_block_q6_k *b = src;
    for (int64_t i = 0; i < n / SY_QK_K; i++) {
        float d = sy__fp16_to_f32(b[i].d);
        const uint8_t *ql = b[i].ql;
        const uint8_t *qh = b[i].qh;
        const int8_t *sc = b[i].scales;
        for (int half = 0; half < SY_QK_K / 128; half++, ql += 64, qh += 32, sc += 8, dst += 128) {
            for (int l = 0; l < 32; l++) {
                int is = l / 16;
                int q1 = (int)((ql[l] & 0x0F) | (((qh[l] >> 0) & 3) << 4)) - 32;
                int q2 = (int)((ql[l + 32] & 0x0F) | (((qh[l] >> 2) & 3) << 4)) - 32;
                int q3 = (int)((ql[l] >> 4) | (((qh[l] >> 4) & 3) << 4)) - 32;
                int q4 = (int)((ql[l + 32] >> 4) | (((qh[l] >> 6) & 3) << 4)) - 32;
                dst[l] = d * (float)sc[is + 0] * (float)q1;
                dst[l + 32] = d * (float)sc[is + 2] * (float)q2;
                dst[l + 64] = d * (float)sc[is + 4] * (float)q3;
                dst[l + 96] = d * (float)sc[is + 6] * (float)q4;
            }
        }
    }
}

static float cpu_scalar_fdot_f32(const void *w, const float *x, int64_t n)
{
    return cpu_scalar_dot_f32(w, x, n);
}

static float cpu_scalar_fdot_f16(const void *w, const float *x, int64_t n)
{
    return cpu_scalar_dot_f16(w, x, n);
}

static float cpu_scalar_fdot_bf16(const void *w, const float *x, int64_t n)
{
    const uint16_t *a = w;
    float sum = 0.0f;
    for (int64_t i = 0; i < n; i++)
        sum += sy__bf16_to_f32(a[i]) * x[i];
    return sum;
}

static float cpu_scalar_fdot_i32(const void *w, const float *x, int64_t n)
{
    const int32_t *a = w;
    float sum = 0.0f;
    for (int64_t i = 0; i < n; i++)
        sum += (float)a[i] * x[i];
    return sum;
}

static const cpu_isa_table cpu_scalar_table = {
    .name = "scalar",
    .dot_f32 = cpu_scalar_dot_f32,
    .dot_f16 = cpu_scalar_dot_f16,
    .axpy_f32 = cpu_scalar_axpy_f32,
    .axpy_f16 = cpu_scalar_axpy_f16,
    .add_f32 = cpu_scalar_add_f32,
    .mul_f32 = cpu_scalar_mul_f32,
    .scale_f32 = cpu_scalar_scale_f32,
    .f32_to_f16 = cpu_scalar_f32_to_f16,
    .silu_f32 = cpu_scalar_silu_f32,
    .gelu_f32 = cpu_scalar_gelu_f32,
    .exp_sum_f32 = cpu_scalar_exp_sum_f32,
    .dot_rows = cpu_scalar_dot_rows,
    .mix_rows = cpu_scalar_mix_rows,
    .dequant =
        {
            [SY_DTYPE_F32] = cpu_scalar_dequant_f32,
            [SY_DTYPE_F16] = cpu_scalar_dequant_f16,
            [SY_DTYPE_BF16] = cpu_scalar_dequant_bf16,
            [SY_DTYPE_I32] = cpu_scalar_dequant_i32,
            [SY_DTYPE_Q8_0] = cpu_scalar_dequant_q8_0,
            [SY_DTYPE_Q4_0] = cpu_scalar_dequant_q4_0,
            [SY_DTYPE_Q4_1] = cpu_scalar_dequant_q4_1,
            [SY_DTYPE_Q5_0] = cpu_scalar_dequant_q5_0,
            [SY_DTYPE_Q5_1] = cpu_scalar_dequant_q5_1,
            [SY_DTYPE_Q4_K] = cpu_scalar_dequant_q4_k,
            [SY_DTYPE_Q5_K] = cpu_scalar_dequant_q5_k,
            [SY_DTYPE_Q6_K] = cpu_scalar_dequant_q6_k,
        },
    .fdot =
        {
            [SY_DTYPE_F32] = cpu_scalar_fdot_f32,
            [SY_DTYPE_F16] = cpu_scalar_fdot_f16,
            [SY_DTYPE_BF16] = cpu_scalar_fdot_bf16,
            [SY_DTYPE_I32] = cpu_scalar_fdot_i32,
        },
    CPU_QDOT_TABLE_ENTRIES(cpu_scalar),
};

const cpu_isa_table *cpu_isa_scalar_table(void)
{
    return &cpu_scalar_table;
}

#if defined(__aarch64__)
/* The ARM tables: the scalar table with the slots cpu_kernels_neon.c
 * vectorizes replaced (defined here, where the scalar kernels are in
 * scope). */
#define CPU_NEON_TABLE(tname, prefix)                                          \
    {                                                                          \
        .name = tname, .dot_f32 = cpu_neon_dot_f32, .dot_f16 = cpu_scalar_dot_f16, \
        .axpy_f32 = cpu_neon_axpy_f32, .axpy_f16 = cpu_scalar_axpy_f16,        \
        .add_f32 = cpu_neon_add_f32, .mul_f32 = cpu_neon_mul_f32,              \
        .scale_f32 = cpu_neon_scale_f32, .f32_to_f16 = cpu_scalar_f32_to_f16,  \
        .silu_f32 = cpu_scalar_silu_f32, .gelu_f32 = cpu_scalar_gelu_f32,      \
        .exp_sum_f32 = cpu_scalar_exp_sum_f32, .dot_rows = cpu_scalar_dot_rows, \
        .mix_rows = cpu_scalar_mix_rows,                                       \
        .dequant =                                                             \
            {                                                                  \
                [SY_DTYPE_F32] = cpu_scalar_dequant_f32,                       \
                [SY_DTYPE_F16] = cpu_scalar_dequant_f16,                       \
                [SY_DTYPE_BF16] = cpu_scalar_dequant_bf16,                     \
                [SY_DTYPE_I32] = cpu_scalar_dequant_i32,                       \
                [SY_DTYPE_Q8_0] = cpu_scalar_dequant_q8_0,                     \
                [SY_DTYPE_Q4_0] = cpu_scalar_dequant_q4_0,                     \
                [SY_DTYPE_Q4_1] = cpu_scalar_dequant_q4_1,                     \
                [SY_DTYPE_Q5_0] = cpu_scalar_dequant_q5_0,                     \
                [SY_DTYPE_Q5_1] = cpu_scalar_dequant_q5_1,                     \
                [SY_DTYPE_Q4_K] = cpu_scalar_dequant_q4_k,                     \
                [SY_DTYPE_Q5_K] = cpu_scalar_dequant_q5_k,                     \
                [SY_DTYPE_Q6_K] = cpu_scalar_dequant_q6_k,                     \
            },                                                                 \
        .fdot =                                                                \
            {                                                                  \
                [SY_DTYPE_F32] = cpu_neon_fdot_f32,                            \
                [SY_DTYPE_F16] = cpu_scalar_fdot_f16,                          \
                [SY_DTYPE_BF16] = cpu_scalar_fdot_bf16,                        \
                [SY_DTYPE_I32] = cpu_scalar_fdot_i32,                          \
            },                                                                 \
        .quantize_q8 = cpu_scalar_quantize_q8,                                 \
        .qdot = {                                                              \
            [SY_DTYPE_Q8_0] = prefix##_qdot_q8_0,                              \
            [SY_DTYPE_Q4_0] = prefix##_qdot_q4_0,                              \
            [SY_DTYPE_Q4_1] = prefix##_qdot_q4_1,                              \
            [SY_DTYPE_Q5_0] = prefix##_qdot_q5_0,                              \
            [SY_DTYPE_Q5_1] = prefix##_qdot_q5_1,                              \
            [SY_DTYPE_Q4_K] = prefix##_qdot_q4_k,                              \
            [SY_DTYPE_Q5_K] = prefix##_qdot_q5_k,                              \
            [SY_DTYPE_Q6_K] = prefix##_qdot_q6_k,                              \
        },                                                                     \
    }

static float cpu_neon_fdot_f32(const void *w, const float *x, int64_t n)
{
    return cpu_neon_dot_f32(w, x, n);
}

static const cpu_isa_table cpu_neon_table = CPU_NEON_TABLE("neon", cpu_neon);
static const cpu_isa_table cpu_dotprod_table = CPU_NEON_TABLE("dotprod", cpu_dotprod);

const cpu_isa_table *cpu_isa_neon_table(void)
{
    return &cpu_neon_table;
}

const cpu_isa_table *cpu_isa_dotprod_table(void)
{
    return &cpu_dotprod_table;
}
#else
const cpu_isa_table *cpu_isa_neon_table(void)
{
    return NULL;
}

const cpu_isa_table *cpu_isa_dotprod_table(void)
{
    return NULL;
}
#endif
