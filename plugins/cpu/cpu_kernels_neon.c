/* ARM kernels: NEON (every AArch64 CPU) and NEON with the Armv8.2 dot
 * product extension (SDOT), for the "neon" and "dotprod" tables that
 * cpu_kernels_scalar.c assembles (every slot these files do not fill keeps
 * its scalar kernel).  Vectorized here: the F32 dot, axpy, add, mul and
 * scale, and the quantized dot products of every GGUF weight type the
 * plugin reads (Q8_0, Q4_0, Q4_1, Q5_0, Q5_1, Q4_K, Q5_K, Q6_K) against
 * Q8 columns of one or two planes (cpu_isa.h): the decode path (Gemma 3
 * 270M's Q4_K_M file holds Q5_0, Q4_K, Q6_K and Q8_0 weights).  Integer
 * sums are exact as in the scalar reference; only the F32 accumulation
 * order differs.  Compiled to nothing elsewhere. */
#if defined(__aarch64__)

#include <arm_neon.h>
#include <string.h>

#include "cpu_isa.h"
#include "cpu_qdot.h"
#include "quants_internal.h"

/* ---------------------------------------------------------------- float */

float cpu_neon_dot_f32(const float *a, const float *b, int64_t n)
{
    float32x4_t s0 = vdupq_n_f32(0.0f), s1 = vdupq_n_f32(0.0f);
    int64_t i = 0;
    for (; i + 8 <= n; i += 8) {
        s0 = vfmaq_f32(s0, vld1q_f32(a + i), vld1q_f32(b + i));
        s1 = vfmaq_f32(s1, vld1q_f32(a + i + 4), vld1q_f32(b + i + 4));
    }
    float sum = vaddvq_f32(vaddq_f32(s0, s1));
    for (; i < n; i++)
        sum += a[i] * b[i];
    return sum;
}

void cpu_neon_axpy_f32(float *y, float a, const float *x, int64_t n)
{
    const float32x4_t va = vdupq_n_f32(a);
    int64_t i = 0;
    for (; i + 4 <= n; i += 4)
        vst1q_f32(y + i, vfmaq_f32(vld1q_f32(y + i), va, vld1q_f32(x + i)));
    for (; i < n; i++)
        y[i] += a * x[i];
}

void cpu_neon_add_f32(float *y, const float *a, const float *b, int64_t n)
{
    int64_t i = 0;
    for (; i + 4 <= n; i += 4)
        vst1q_f32(y + i, vaddq_f32(vld1q_f32(a + i), vld1q_f32(b + i)));
    for (; i < n; i++)
        y[i] = a[i] + b[i];
}

void cpu_neon_mul_f32(float *y, const float *a, const float *b, int64_t n)
{
    int64_t i = 0;
    for (; i + 4 <= n; i += 4)
        vst1q_f32(y + i, vmulq_f32(vld1q_f32(a + i), vld1q_f32(b + i)));
    for (; i < n; i++)
        y[i] = a[i] * b[i];
}

void cpu_neon_scale_f32(float *y, const float *a, float s, float bias, int64_t n)
{
    const float32x4_t vs = vdupq_n_f32(s), vb = vdupq_n_f32(bias);
    int64_t i = 0;
    if (bias == 0.0f) {
        for (; i + 4 <= n; i += 4)
            vst1q_f32(y + i, vmulq_f32(vld1q_f32(a + i), vs));
        for (; i < n; i++)
            y[i] = a[i] * s;
    } else {
        for (; i + 4 <= n; i += 4)
            vst1q_f32(y + i, vfmaq_f32(vb, vld1q_f32(a + i), vs));
        for (; i < n; i++)
            y[i] = __builtin_fmaf(a[i], s, bias);
    }
}

/* ------------------------------------------------------------ quantized */

/* 32 signed weight quants of one block (elements 0..15 in w.val[0]). */
typedef int8x16x2_t cpu_neon_w32;

static inline float cpu_neon_f16(uint16_t h)
{
    __fp16 v;
    memcpy(&v, &h, sizeof v);
    return (float)v;
}

/* Sum of w[j] * q[j] over one block of 32, NEON only: widening multiplies
 * (|w q| <= 127 * 127, two per int16 lane) summed pairwise into int32. */
static inline int32_t cpu_neon_idot(cpu_neon_w32 w, const int8_t *q)
{
    const int8x16_t q0 = vld1q_s8(q), q1 = vld1q_s8(q + 16);
    int16x8_t p0 = vmull_s8(vget_low_s8(w.val[0]), vget_low_s8(q0));
    p0 = vmlal_high_s8(p0, w.val[0], q0);
    int16x8_t p1 = vmull_s8(vget_low_s8(w.val[1]), vget_low_s8(q1));
    p1 = vmlal_high_s8(p1, w.val[1], q1);
    return vaddvq_s32(vpadalq_s16(vpaddlq_s16(p0), p1));
}

__attribute__((target("arch=armv8.2-a+dotprod"))) static inline int32_t
cpu_dotprod_idot(cpu_neon_w32 w, const int8_t *q)
{
    int32x4_t acc = vdotq_s32(vdupq_n_s32(0), w.val[0], vld1q_s8(q));
    acc = vdotq_s32(acc, w.val[1], vld1q_s8(q + 16));
    return vaddvq_s32(acc);
}

/* The block's dot with a column of |planes| planes (|k| apart). */
#define CPU_NEON_PDOT(idot, w, q, planes, k) \
    ((planes) == 2 ? 128 * idot(w, q) + idot(w, (q) + (k)) : idot(w, q))

/* Unpacks 16 bytes of nibbles: low nibbles are elements 0..15, high ones
 * 16..31, minus |offset|. */
static inline cpu_neon_w32 cpu_neon_nibbles(const uint8_t *qs, int offset)
{
    const uint8x16_t v = vld1q_u8(qs);
    const int8x16_t off = vdupq_n_s8((int8_t)offset);
    cpu_neon_w32 w;
    w.val[0] = vsubq_s8(vreinterpretq_s8_u8(vandq_u8(v, vdupq_n_u8(0x0F))), off);
    w.val[1] = vsubq_s8(vreinterpretq_s8_u8(vshrq_n_u8(v, 4)), off);
    return w;
}

/* A Q5_0/Q5_1 block's 32 quants minus |offset|: the nibbles as
 * cpu_neon_nibbles unpacks them, with bit j of |qh| as element j's fifth
 * bit (elements 0..15 take qh's bytes 0 and 1, 16..31 bytes 2 and 3). */
static inline cpu_neon_w32 cpu_neon_q5(const uint8_t *qs, const uint8_t qh[4], int offset)
{
    static const uint8_t lo_idx[16] = {0, 0, 0, 0, 0, 0, 0, 0, 1, 1, 1, 1, 1, 1, 1, 1};
    static const uint8_t hi_idx[16] = {2, 2, 2, 2, 2, 2, 2, 2, 3, 3, 3, 3, 3, 3, 3, 3};
    static const uint8_t bit[16] = {1, 2, 4, 8, 16, 32, 64, 128, 1, 2, 4, 8, 16, 32, 64, 128};
    uint32_t bits;
    memcpy(&bits, qh, sizeof bits);
    const uint8x16_t src = vreinterpretq_u8_u32(vdupq_n_u32(bits));
    const uint8x16_t sel = vld1q_u8(bit), five = vdupq_n_u8(0x10);
    const uint8x16_t h0 = vandq_u8(vtstq_u8(vqtbl1q_u8(src, vld1q_u8(lo_idx)), sel), five);
    const uint8x16_t h1 = vandq_u8(vtstq_u8(vqtbl1q_u8(src, vld1q_u8(hi_idx)), sel), five);
    const cpu_neon_w32 n = cpu_neon_nibbles(qs, 0);
    const int8x16_t off = vdupq_n_s8((int8_t)offset);
    cpu_neon_w32 w;
    w.val[0] = vsubq_s8(vorrq_s8(n.val[0], vreinterpretq_s8_u8(h0)), off);
    w.val[1] = vsubq_s8(vorrq_s8(n.val[1], vreinterpretq_s8_u8(h1)), off);
    return w;
}

/* A Q8_0 block's 32 quants. */
static inline cpu_neon_w32 cpu_neon_q8(const int8_t *qs)
{
    cpu_neon_w32 w;
    w.val[0] = vld1q_s8(qs);
    w.val[1] = vld1q_s8(qs + 16);
    return w;
}

/* One column's dot over blocks of |type|, whose quants the expression
 * |unpack| gives from block b[i]; |idot| is the 32-element integer dot.
 * CPU_NEON_COL_D: value = d * q; CPU_NEON_COL_DM: value = d * q + m, the
 * min times the column's block sum sc[2i + 1].  The scale arithmetic is
 * the scalar reference's. */
#define CPU_NEON_COL_D(prefix, idot, fmt, type, unpack)                                       \
    static float prefix##_col_##fmt(const void *w, const int8_t *q, const float *sc, int64_t k, \
                                    int planes)                                                \
    {                                                                                          \
        const type *b = w;                                                                     \
        float acc = 0.0f;                                                                      \
        for (int64_t i = 0; i < k / SY_QK; i++) {                                              \
            const cpu_neon_w32 wq = unpack;                                                    \
            const int32_t d = CPU_NEON_PDOT(idot, wq, q + i * SY_QK, planes, k);               \
            acc += cpu_neon_f16(b[i].d) * sc[2 * i] * (float)d;                                \
        }                                                                                      \
        return acc;                                                                            \
    }
#define CPU_NEON_COL_DM(prefix, idot, fmt, type, unpack)                                      \
    static float prefix##_col_##fmt(const void *w, const int8_t *q, const float *sc, int64_t k, \
                                    int planes)                                                \
    {                                                                                          \
        const type *b = w;                                                                     \
        float acc = 0.0f;                                                                      \
        for (int64_t i = 0; i < k / SY_QK; i++) {                                              \
            const cpu_neon_w32 wq = unpack;                                                    \
            const int32_t d = CPU_NEON_PDOT(idot, wq, q + i * SY_QK, planes, k);               \
            acc += sc[2 * i] * cpu_neon_f16(b[i].d) * (float)d +                               \
                   cpu_neon_f16(b[i].m) * sc[2 * i + 1];                                       \
        }                                                                                      \
        return acc;                                                                            \
    }

/* The 32-element block formats' columns of one set. */
#define CPU_NEON_COLS(prefix, idot)                                                      \
    CPU_NEON_COL_D(prefix, idot, q8_0, sy_block_q8_0, cpu_neon_q8(b[i].qs))              \
    CPU_NEON_COL_D(prefix, idot, q4_0, sy_block_q4_0, cpu_neon_nibbles(b[i].qs, 8))      \
    CPU_NEON_COL_D(prefix, idot, q5_0, sy_block_q5_0, cpu_neon_q5(b[i].qs, b[i].qh, 16)) \
    CPU_NEON_COL_DM(prefix, idot, q4_1, sy_block_q4_1, cpu_neon_nibbles(b[i].qs, 0))     \
    CPU_NEON_COL_DM(prefix, idot, q5_1, sy_block_q5_1, cpu_neon_q5(b[i].qs, b[i].qh, 0))

/* Sum of w[j] * q[j] over 16 elements (|w q| <= 32 * 127 for Q6_K, two
 * per int16 lane). */
static inline int32_t cpu_neon_idot16(int8x16_t w, const int8_t *q)
{
    const int8x16_t q0 = vld1q_s8(q);
    int16x8_t p = vmull_s8(vget_low_s8(w), vget_low_s8(q0));
    p = vmlal_high_s8(p, w, q0);
    return vaddlvq_s16(p);
}

__attribute__((target("arch=armv8.2-a+dotprod"))) static inline int32_t
cpu_dotprod_idot16(int8x16_t w, const int8_t *q)
{
    return vaddvq_s32(vdotq_s32(vdupq_n_s32(0), w, vld1q_s8(q)));
}

/* The same with a column of |planes| planes (|k| apart), in 64 bits: a
 * two-plane quant reaches 127 * 128 + 63, times a Q6_K quant and scale. */
#define CPU_NEON_PDOT16(idot16, w, q, planes, k)                                  \
    ((planes) == 2 ? 128 * (int64_t)idot16(w, q) + (int64_t)idot16(w, (q) + (k)) \
                   : (int64_t)idot16(w, q))

/* The K-quant columns: Q4_K and Q5_K (sub-block j of 32 takes the low
 * nibbles of qs[32 * (j / 2) ..] for even j, the high ones for odd j, and
 * for Q5_K bit j of qh[0..31] as the fifth bit; value = d * scale_j * q -
 * dmin * min_j, the min times the column's block sum sc[2j + 1]) and Q6_K (see cpu_scalar_col_q6_k: 4 low bits from ql, 2
 * high bits from qh, minus 32, one int8 scale per 16 elements). */
#define CPU_NEON_KCOLS(prefix, idot, idot16)                                                  \
    /* One Q4_K/Q5_K super-block (|qh| NULL for Q4_K). */                                      \
    static float prefix##_k4_block(uint16_t dd, uint16_t dm, const uint8_t *scales,            \
                                   const uint8_t *qs, const uint8_t *qh, const int8_t *qi,     \
                                   const float *s8, int64_t k, int planes)                     \
    {                                                                                          \
        const float d = cpu_neon_f16(dd), dmin = cpu_neon_f16(dm);                             \
        const uint8x16_t m4 = vdupq_n_u8(0x0F), one = vdupq_n_u8(1);                           \
        float acc = 0.0f;                                                                      \
        for (int j = 0; j < SY_QK_K / 32; j++) {                                               \
            const uint8x16_t v0 = vld1q_u8(qs + 32 * (j / 2));                                 \
            const uint8x16_t v1 = vld1q_u8(qs + 32 * (j / 2) + 16);                            \
            uint8x16_t n0 = j % 2 ? vshrq_n_u8(v0, 4) : vandq_u8(v0, m4);                      \
            uint8x16_t n1 = j % 2 ? vshrq_n_u8(v1, 4) : vandq_u8(v1, m4);                      \
            if (qh) {                                                                          \
                const int8x16_t shift = vdupq_n_s8((int8_t)-j);                                \
                const uint8x16_t h0 = vandq_u8(vshlq_u8(vld1q_u8(qh), shift), one);            \
                const uint8x16_t h1 = vandq_u8(vshlq_u8(vld1q_u8(qh + 16), shift), one);       \
                n0 = vorrq_u8(n0, vshlq_n_u8(h0, 4));                                          \
                n1 = vorrq_u8(n1, vshlq_n_u8(h1, 4));                                          \
            }                                                                                  \
            cpu_neon_w32 wq;                                                                   \
            wq.val[0] = vreinterpretq_s8_u8(n0);                                               \
            wq.val[1] = vreinterpretq_s8_u8(n1);                                               \
            int scale, min;                                                                    \
            cpu_k4_scale_min(scales, j, &scale, &min);                                         \
            const int32_t dot = CPU_NEON_PDOT(idot, wq, qi + 32 * j, planes, k);               \
            acc += s8[2 * j] * (d * (float)scale * (float)dot) - dmin * (float)min * s8[2 * j + 1]; \
        }                                                                                      \
        return acc;                                                                            \
    }                                                                                          \
    static float prefix##_col_q4_k(const void *w, const int8_t *q, const float *sc, int64_t k, \
                                   int planes)                                                 \
    {                                                                                          \
        const sy_block_q4_k *b = w;                                                            \
        float acc = 0.0f;                                                                      \
        for (int64_t i = 0; i < k / SY_QK_K; i++)                                              \
            acc += prefix##_k4_block(b[i].d, b[i].dmin, b[i].scales, b[i].qs, NULL,            \
                                     q + i * SY_QK_K, sc + 2 * i * (SY_QK_K / 32), k, planes); \
        return acc;                                                                            \
    }                                                                                          \
    static float prefix##_col_q5_k(const void *w, const int8_t *q, const float *sc, int64_t k, \
                                   int planes)                                                 \
    {                                                                                          \
        const sy_block_q5_k *b = w;                                                            \
        float acc = 0.0f;                                                                      \
        for (int64_t i = 0; i < k / SY_QK_K; i++)                                              \
            acc += prefix##_k4_block(b[i].d, b[i].dmin, b[i].scales, b[i].qs, b[i].qh,         \
                                     q + i * SY_QK_K, sc + 2 * i * (SY_QK_K / 32), k, planes); \
        return acc;                                                                            \
    }                                                                                          \
    static float prefix##_col_q6_k(const void *w, const int8_t *q, const float *sc, int64_t k, \
                                   int planes)                                                 \
    {                                                                                          \
        const sy_block_q6_k *b = w;                                                            \
        const uint8x16_t m4 = vdupq_n_u8(0x0F), m2 = vdupq_n_u8(3);                            \
        const int8x16_t bias = vdupq_n_s8(32);                                                 \
        float acc = 0.0f;                                                                      \
        for (int64_t i = 0; i < k / SY_QK_K; i++) {                                            \
            const float dw = cpu_neon_f16(b[i].d);                                             \
            for (int s = 0; s < SY_QK_K / 32; s++) {                                           \
                const int half = s / 4, g = s % 4;                                             \
                const uint8_t *ql = b[i].ql + 64 * half + 32 * (g & 1);                        \
                const uint8_t *qh = b[i].qh + 32 * half;                                       \
                const int8x16_t shift = vdupq_n_s8((int8_t)(-2 * g));                          \
                int8x16_t v[2];                                                                \
                for (int h = 0; h < 2; h++) {                                                  \
                    const uint8x16_t l = vld1q_u8(ql + 16 * h);                                \
                    const uint8x16_t lo = g < 2 ? vandq_u8(l, m4) : vshrq_n_u8(l, 4);          \
                    const uint8x16_t hi = vandq_u8(vshlq_u8(vld1q_u8(qh + 16 * h), shift), m2); \
                    v[h] = vsubq_s8(vreinterpretq_s8_u8(vorrq_u8(lo, vshlq_n_u8(hi, 4))), bias); \
                }                                                                              \
                const int8_t *qs8 = q + i * SY_QK_K + 32 * s;                                  \
                const int8_t *scales = b[i].scales + 8 * half + 2 * g;                         \
                const int64_t dot = scales[0] * CPU_NEON_PDOT16(idot16, v[0], qs8, planes, k) + \
                                    scales[1] * CPU_NEON_PDOT16(idot16, v[1], qs8 + 16, planes, k); \
                acc += dw * sc[2 * (i * (SY_QK_K / 32) + s)] * (float)dot;                     \
            }                                                                                  \
        }                                                                                      \
        return acc;                                                                            \
    }

CPU_NEON_COLS(cpu_neon, cpu_neon_idot)
CPU_NEON_KCOLS(cpu_neon, cpu_neon_idot, cpu_neon_idot16)

#pragma GCC push_options
#pragma GCC target("arch=armv8.2-a+dotprod")
CPU_NEON_COLS(cpu_dotprod, cpu_dotprod_idot)
CPU_NEON_KCOLS(cpu_dotprod, cpu_dotprod_idot, cpu_dotprod_idot16)
#pragma GCC pop_options

#define CPU_NEON_QDOT(prefix, fmt)                                                            \
    void prefix##_qdot_##fmt(CPU_QDOT_ARGS)                                                   \
    {                                                                                         \
        for (int c = 0; c < nc; c++) {                                                        \
            const int8_t *col = (const int8_t *)x + (size_t)c * x_stride;                     \
            out[c] = prefix##_col_##fmt(w, col, cpu_q8_scales(col, k, planes), k, planes);    \
        }                                                                                     \
    }

CPU_NEON_QDOT(cpu_neon, q8_0)
CPU_NEON_QDOT(cpu_neon, q4_0)
CPU_NEON_QDOT(cpu_neon, q4_1)
CPU_NEON_QDOT(cpu_neon, q5_0)
CPU_NEON_QDOT(cpu_neon, q5_1)
CPU_NEON_QDOT(cpu_neon, q4_k)
CPU_NEON_QDOT(cpu_neon, q5_k)
CPU_NEON_QDOT(cpu_neon, q6_k)
CPU_NEON_QDOT(cpu_dotprod, q8_0)
CPU_NEON_QDOT(cpu_dotprod, q4_0)
CPU_NEON_QDOT(cpu_dotprod, q4_1)
CPU_NEON_QDOT(cpu_dotprod, q5_0)
CPU_NEON_QDOT(cpu_dotprod, q5_1)
CPU_NEON_QDOT(cpu_dotprod, q4_k)
CPU_NEON_QDOT(cpu_dotprod, q5_k)
CPU_NEON_QDOT(cpu_dotprod, q6_k)

#else
/* ISO C wants at least one declaration in a translation unit. */
typedef int cpu_kernels_neon_unused;
#endif
