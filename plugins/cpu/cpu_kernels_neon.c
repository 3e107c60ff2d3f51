/* ARM kernels: NEON (every AArch64 CPU) and NEON with the Armv8.2 dot
 * product extension (SDOT), for the "neon" and "dotprod" tables that
 * cpu_kernels_scalar.c assembles (every slot these files do not fill keeps
 * its scalar kernel).  Vectorized here: the F32 dot, axpy, add, mul and
 * scale, and the quantized dot products of Q8_0, Q4_0 and Q4_1 against Q8
 * columns of one or two planes (cpu_isa.h) — the decode path of the
 * common GGUF types.  Integer sums are exact as in the scalar reference;
 * only the F32 accumulation order differs.  Compiled to nothing
 * elsewhere. */
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

/* One column's dot for each format; |idot| is the 32-element integer dot.
 * The scale arithmetic is the scalar reference's. */
#define CPU_NEON_COLS(prefix, idot)                                                           \
    static float prefix##_col_q8_0(const void *w, const int8_t *q, const float *sc, int64_t k, \
                                   int planes)                                                 \
    {                                                                                          \
        const sy_block_q8_0 *b = w;                                                            \
        float acc = 0.0f;                                                                      \
        for (int64_t i = 0; i < k / SY_QK; i++) {                                              \
            cpu_neon_w32 wq;                                                                   \
            wq.val[0] = vld1q_s8(b[i].qs);                                                     \
            wq.val[1] = vld1q_s8(b[i].qs + 16);                                                \
            const int32_t d = CPU_NEON_PDOT(idot, wq, q + i * SY_QK, planes, k);               \
            acc += cpu_neon_f16(b[i].d) * sc[2 * i] * (float)d;                                \
        }                                                                                      \
        return acc;                                                                            \
    }                                                                                          \
    static float prefix##_col_q4_0(const void *w, const int8_t *q, const float *sc, int64_t k, \
                                   int planes)                                                 \
    {                                                                                          \
        const sy_block_q4_0 *b = w;                                                            \
        float acc = 0.0f;                                                                      \
        for (int64_t i = 0; i < k / SY_QK; i++) {                                              \
            const cpu_neon_w32 wq = cpu_neon_nibbles(b[i].qs, 8);                              \
            const int32_t d = CPU_NEON_PDOT(idot, wq, q + i * SY_QK, planes, k);               \
            acc += cpu_neon_f16(b[i].d) * sc[2 * i] * (float)d;                                \
        }                                                                                      \
        return acc;                                                                            \
    }                                                                                          \
    static float prefix##_col_q4_1(const void *w, const int8_t *q, const float *sc, int64_t k, \
                                   int planes)                                                 \
    {                                                                                          \
        const sy_block_q4_1 *b = w;                                                            \
        float acc = 0.0f;                                                                      \
        for (int64_t i = 0; i < k / SY_QK; i++) {                                              \
            const cpu_neon_w32 wq = cpu_neon_nibbles(b[i].qs, 0);                              \
            const int32_t d = CPU_NEON_PDOT(idot, wq, q + i * SY_QK, planes, k);               \
            acc += sc[2 * i] * cpu_neon_f16(b[i].d) * (float)d +                               \
                   cpu_neon_f16(b[i].m) * sc[2 * i + 1];                                       \
        }                                                                                      \
        return acc;                                                                            \
    }

CPU_NEON_COLS(cpu_neon, cpu_neon_idot)

#pragma GCC push_options
#pragma GCC target("arch=armv8.2-a+dotprod")
CPU_NEON_COLS(cpu_dotprod, cpu_dotprod_idot)
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
CPU_NEON_QDOT(cpu_dotprod, q8_0)
CPU_NEON_QDOT(cpu_dotprod, q4_0)
CPU_NEON_QDOT(cpu_dotprod, q4_1)

#else
/* ISO C wants at least one declaration in a translation unit. */
typedef int cpu_kernels_neon_unused;
#endif
