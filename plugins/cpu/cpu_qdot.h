/* Kernels of the quantized matmul (see the Q8 column layout in
 * cpu_isa.h), one set per ISA level.  The tables of cpu_kernels_scalar.c
 * and cpu_kernels_avx2.c point at them; the x86 sets are built from one
 * template (cpu_qdot_x86.inc) with a different 8-bit dot primitive.
 *
 * Every qdot kernel computes, per weight block, the exact integer dot of
 * the block's quants with the column's quants and scales it in F32, so
 * kernels of one dtype differ only by F32 rounding; the scalar ones are
 * the reference the unit tests hold the others to. */
#ifndef SY_CPU_QDOT_H
#define SY_CPU_QDOT_H

#include <stddef.h>
#include <stdint.h>

/* The 6-bit scale and min of sub-block |j| (0..7) of a Q4_K/Q5_K block's
 * packed scales |q|. */
static inline void cpu_k4_scale_min(const uint8_t *q, int j, int *out_scale, int *out_min)
{
    if (j < 4) {
        *out_scale = q[j] & 63;
        *out_min = q[j + 4] & 63;
    } else {
        *out_scale = (q[j + 4] & 0x0F) | ((q[j - 4] >> 6) << 4);
        *out_min = (q[j + 4] >> 4) | ((q[j] >> 6) << 4);
    }
}

#define CPU_QDOT_ARGS \
    const void *w, const void *x, size_t x_stride, int nc, int64_t k, int planes, float *out

/* Declares the quantizer and the eight qdot kernels of one set. */
#define CPU_QDOT_DECLARE_SET(prefix)                                  \
    void prefix##_quantize_q8(const float *src, void *dst, int64_t k, int planes); \
    void prefix##_qdot_q8_0(CPU_QDOT_ARGS);                           \
    void prefix##_qdot_q4_0(CPU_QDOT_ARGS);                           \
    void prefix##_qdot_q4_1(CPU_QDOT_ARGS);                           \
    void prefix##_qdot_q5_0(CPU_QDOT_ARGS);                           \
    void prefix##_qdot_q5_1(CPU_QDOT_ARGS);                           \
    void prefix##_qdot_q4_k(CPU_QDOT_ARGS);                           \
    void prefix##_qdot_q5_k(CPU_QDOT_ARGS);                           \
    void prefix##_qdot_q6_k(CPU_QDOT_ARGS);

#define CPU_QGEMM_ARGS                                                                          \
    const void *w, size_t w_stride, int64_t rows, const void *panels, int n_panels, int64_t k, \
        int planes, float *y, size_t y_stride, int ncols, void *scratch

/* Declares the panel packer and the prefill GEMM kernels of one set. */
#define CPU_QGEMM_DECLARE_SET(prefix)                                                         \
    void prefix##_pack_panel(const void *cols, size_t col_stride, int nc, int64_t k, int planes, \
                             void *panel);                                                    \
    void prefix##_qgemm_q8_0(CPU_QGEMM_ARGS);                                                 \
    void prefix##_qgemm_q4_0(CPU_QGEMM_ARGS);                                                 \
    void prefix##_qgemm_q4_1(CPU_QGEMM_ARGS);                                                 \
    void prefix##_qgemm_q5_0(CPU_QGEMM_ARGS);                                                 \
    void prefix##_qgemm_q5_1(CPU_QGEMM_ARGS);                                                 \
    void prefix##_qgemm_q4_k(CPU_QGEMM_ARGS);                                                 \
    void prefix##_qgemm_q5_k(CPU_QGEMM_ARGS);                                                 \
    void prefix##_qgemm_q6_k(CPU_QGEMM_ARGS);

CPU_QDOT_DECLARE_SET(cpu_scalar)
#if defined(__x86_64__) || defined(__i386__)
CPU_QDOT_DECLARE_SET(cpu_avx2)
CPU_QDOT_DECLARE_SET(cpu_avxvnni)
CPU_QDOT_DECLARE_SET(cpu_avx512)
CPU_QGEMM_DECLARE_SET(cpu_avx2)
CPU_QGEMM_DECLARE_SET(cpu_avxvnni)
CPU_QGEMM_DECLARE_SET(cpu_avx512)
/* The 512-bit decode kernels of the avx512 set (one column; others go to
 * the 256-bit ones). */
void cpu_avx512z_qdot_q4_0(CPU_QDOT_ARGS);
void cpu_avx512z_qdot_q4_1(CPU_QDOT_ARGS);
void cpu_avx512z_qdot_q5_0(CPU_QDOT_ARGS);
void cpu_avx512z_qdot_q5_1(CPU_QDOT_ARGS);
void cpu_avx512z_qdot_q8_0(CPU_QDOT_ARGS);
void cpu_avx512z_qdot_rows_q4_0(CPU_QDOT_ROWS_ARGS);
void cpu_avx512z_qdot_rows_q4_1(CPU_QDOT_ROWS_ARGS);
/* The same on rows in the packed layout of cpu_repack.c. */
void cpu_avx512z_qdot_rows_q4_0_packed(CPU_QDOT_ROWS_ARGS);
void cpu_avx512z_qdot_rows_q4_1_packed(CPU_QDOT_ROWS_ARGS);
void cpu_avx512z_qdot_rows_q8_0(CPU_QDOT_ROWS_ARGS);
/* The Q4 ones again, built with GFNI (the avx512gfni set). */
void cpu_avx512g_qdot_rows_q4_0(CPU_QDOT_ROWS_ARGS);
void cpu_avx512g_qdot_rows_q4_1(CPU_QDOT_ROWS_ARGS);
void cpu_avx512g_qdot_rows_q4_0_packed(CPU_QDOT_ROWS_ARGS);
void cpu_avx512g_qdot_rows_q4_1_packed(CPU_QDOT_ROWS_ARGS);
/* The 512-bit GEMM of the avx512 set: panels of 16 columns. */
void cpu_avx512_pack_panel16(const void *cols, size_t col_stride, int nc, int64_t k, int planes,
                             void *panel);
void cpu_avx512_qgemm16_q8_0(CPU_QGEMM_ARGS);
void cpu_avx512_qgemm16_q4_0(CPU_QGEMM_ARGS);
void cpu_avx512_qgemm16_q4_1(CPU_QGEMM_ARGS);
void cpu_avx512_qgemm16_q4_0_packed(CPU_QGEMM_ARGS);
void cpu_avx512_qgemm16_q4_1_packed(CPU_QGEMM_ARGS);
void cpu_avx512_qgemm16_q5_0(CPU_QGEMM_ARGS);
void cpu_avx512_qgemm16_q5_1(CPU_QGEMM_ARGS);
void cpu_avx512_qgemm16_q4_k(CPU_QGEMM_ARGS);
void cpu_avx512_qgemm16_q5_k(CPU_QGEMM_ARGS);
void cpu_avx512_qgemm16_q6_k(CPU_QGEMM_ARGS);
#endif
#if defined(__aarch64__)
/* cpu_kernels_neon.c: NEON and dot-product kernels of the ARM tables. */
float cpu_neon_dot_f32(const float *a, const float *b, int64_t n);
void cpu_neon_axpy_f32(float *y, float a, const float *x, int64_t n);
void cpu_neon_add_f32(float *y, const float *a, const float *b, int64_t n);
void cpu_neon_mul_f32(float *y, const float *a, const float *b, int64_t n);
void cpu_neon_scale_f32(float *y, const float *a, float s, float bias, int64_t n);
void cpu_neon_qdot_q8_0(CPU_QDOT_ARGS);
void cpu_neon_qdot_q4_0(CPU_QDOT_ARGS);
void cpu_neon_qdot_q4_1(CPU_QDOT_ARGS);
void cpu_neon_qdot_q5_0(CPU_QDOT_ARGS);
void cpu_neon_qdot_q5_1(CPU_QDOT_ARGS);
void cpu_neon_qdot_q4_k(CPU_QDOT_ARGS);
void cpu_neon_qdot_q5_k(CPU_QDOT_ARGS);
void cpu_neon_qdot_q6_k(CPU_QDOT_ARGS);
void cpu_dotprod_qdot_q8_0(CPU_QDOT_ARGS);
void cpu_dotprod_qdot_q4_0(CPU_QDOT_ARGS);
void cpu_dotprod_qdot_q4_1(CPU_QDOT_ARGS);
void cpu_dotprod_qdot_q5_0(CPU_QDOT_ARGS);
void cpu_dotprod_qdot_q5_1(CPU_QDOT_ARGS);
void cpu_dotprod_qdot_q4_k(CPU_QDOT_ARGS);
void cpu_dotprod_qdot_q5_k(CPU_QDOT_ARGS);
void cpu_dotprod_qdot_q6_k(CPU_QDOT_ARGS);
#endif

/* Fills the qdot slots of a table initializer with the set |prefix|. */
#define CPU_QDOT_TABLE_ENTRIES(prefix)                \
    .quantize_q8 = prefix##_quantize_q8,              \
    .qdot = {                                         \
        [SY_DTYPE_Q8_0] = prefix##_qdot_q8_0,         \
        [SY_DTYPE_Q4_0] = prefix##_qdot_q4_0,         \
        [SY_DTYPE_Q4_1] = prefix##_qdot_q4_1,         \
        [SY_DTYPE_Q5_0] = prefix##_qdot_q5_0,         \
        [SY_DTYPE_Q5_1] = prefix##_qdot_q5_1,         \
        [SY_DTYPE_Q4_K] = prefix##_qdot_q4_k,         \
        [SY_DTYPE_Q5_K] = prefix##_qdot_q5_k,         \
        [SY_DTYPE_Q6_K] = prefix##_qdot_q6_k,         \
    }

/* Fills the prefill-GEMM slots of a table initializer with the set
 * |prefix| (panels of 8 columns); |q8_0| is its Q8_0 kernel or NULL. */
#define CPU_QGEMM_TABLE_ENTRIES(prefix, q8_0)           \
    .q8_panel = 8, .pack_q8_panel = prefix##_pack_panel, \
    .qgemm = {                                         \
        [SY_DTYPE_Q8_0] = q8_0,                        \
        [SY_DTYPE_Q4_0] = prefix##_qgemm_q4_0,         \
        [SY_DTYPE_Q4_1] = prefix##_qgemm_q4_1,         \
        [SY_DTYPE_Q5_0] = prefix##_qgemm_q5_0,         \
        [SY_DTYPE_Q5_1] = prefix##_qgemm_q5_1,         \
        [SY_DTYPE_Q4_K] = prefix##_qgemm_q4_k,         \
        [SY_DTYPE_Q5_K] = prefix##_qgemm_q5_k,         \
        [SY_DTYPE_Q6_K] = prefix##_qgemm_q6_k,         \
    }

#endif
