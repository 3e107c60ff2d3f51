/* Runtime ISA dispatch of the CPU plugin's inner kernels.
 *
 * The outer kernels (cpu_kernels_*.c) are plain C; everything that touches
 * vector registers goes through a cpu_isa_table chosen once at init.  The
 * scalar table always exists; on x86 there are four more, each used when
 * the CPU has its features (every function carries its own target
 * attribute, so the plugin builds with the project's default flags):
 *   avx2     AVX2 + FMA + F16C (cpu_kernels_avx2.c, cpu_kernels_qdot_avx2.c)
 *   avxvnni  avx2 with the VEX vpdpbusd in the quantized dot products
 *   avx512   avx2 with AVX-512 F/BW/VL/VNNI in the quantized dot products
 *   avx512gfni  avx512 with GFNI in the Q4_0/Q4_1 decode rows
 *            (cpu_kernels_qrows_gfni.c)
 * On AArch64 (cpu_kernels_neon.c):
 *   neon     Advanced SIMD float kernels and Q8_0/Q4_0/Q4_1 dot products
 *   dotprod  neon with SDOT in those dot products (Armv8.2 dotprod)
 * $SWITCHYARD_CPU_ISA names a table (scalar, avx2, avxvnni, avx512,
 * avx512gfni, neon, dotprod) to
 * force a lower level for testing; auto (the default) takes the best. */
#ifndef SY_CPU_ISA_H
#define SY_CPU_ISA_H

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

#include "switchyard/plugin.h"

/* Converts |n| elements (a multiple of the dtype's block size) of one row
 * at |src| to F32 at |dst|. */
typedef void (*cpu_dequant_fn)(const void *src, float *dst, int64_t n);

/* Q8 columns: the quantized matmul quantizes each activation column of K
 * elements (K a multiple of 32) once, with one or two planes of int8:
 *   1 plane (q8):   q = round(x / d), d = max |x| / 127 per 32-element block
 *   2 planes (q16): q = round(x / d), d = max |x| / (127 * 128), split as
 *                   q = 128 * hi + lo with hi in [-127, 127], lo in [-64, 63]
 * The layout of one column:
 *   int8_t hi[K]           (the only plane of q8)
 *   int8_t lo[K]           (q16 only)
 *   float  sc[2 * K / 32]  per block: d, then ds = d * the sum of its q
 * padded to 64 bytes.  The integer dot products multiply weight quants with
 * each plane and combine the int32 sums as 128 * hi + lo, so q16 costs two
 * 8-bit dot instructions where q8 costs one, and keeps the error of the
 * activations 128 times smaller (within the logits oracle of issue 3,
 * where q8 is not).  ds serves formats with a min or an offset (Q4_0/Q5_0
 * centre their quants, Q4_1/Q5_1/Q4_K/Q5_K subtract a min); keeping it next
 * to d lets one vector multiply scale a weight block's (d, min) pair. */
#define CPU_Q8_BLOCK 32
/* Columns one qdot call handles; a prefill reuses each unpacked weight
 * block for this many columns. */
#define CPU_QDOT_MAX_COLS 4

/* Bytes of one Q8 column of |k| elements with |planes| (1 or 2) planes. */
static inline size_t cpu_q8_col_bytes(int64_t k, int planes)
{
    return ((size_t)k * (size_t)planes + 2 * sizeof(float) * (size_t)(k / CPU_Q8_BLOCK) + 63) &
           ~(size_t)63;
}

/* The (d, ds) pairs of the Q8 column at |col|. */
static inline const float *cpu_q8_scales(const void *col, int64_t k, int planes)
{
    return (const float *)((const int8_t *)col + k * planes);
}

/* Quantizes |k| floats (a multiple of 32) into the Q8 column at |out|. */
typedef void (*cpu_quantize_q8_fn)(const float *x, void *out, int64_t k, int planes);

/* out[c] = sum_i w[i] * x_c[i] over |k| elements for the |nc| (1 ..
 * CPU_QDOT_MAX_COLS) Q8 columns x_c at x + c * x_stride, where w is one
 * dense weight row of the table slot's dtype. */
typedef void (*cpu_qdot_fn)(const void *w, const void *x, size_t x_stride, int nc, int64_t k,
                            int planes, float *out);

/* out[n] = w_n . x for |rows| dense weight rows w_n of the table slot's
 * dtype, |w_stride| bytes apart, and the one Q8 column at |x| (decode: the
 * rows of one pass share the column's loads). */
#define CPU_QDOT_ROWS_ARGS                                                                    \
    const void *w, size_t w_stride, int64_t rows, const void *x, int64_t k, int planes,       \
        float *out
typedef void (*cpu_qdot_rows_fn)(CPU_QDOT_ROWS_ARGS);

/* Packs |nc| (<= the table's q8_panel) Q8 columns at |cols| + c * col_stride
 * into one panel at |panel| (layout in cpu_qgemm_x86.inc); missing columns
 * are zero. */
typedef void (*cpu_pack_panel_fn)(const void *cols, size_t col_stride, int nc, int64_t k,
                                  int planes, void *panel);

/* Multiplies |rows| weight rows (|w_stride| bytes apart) of the table
 * slot's dtype with |n_panels| consecutive panels: y[c * y_stride + n] for
 * row n and the panels' first |ncols| columns c.  |scratch| holds
 * cpu_qgemm_scratch_bytes(k). */
typedef void (*cpu_qgemm_fn)(const void *w, size_t w_stride, int64_t rows, const void *panels,
                             int n_panels, int64_t k, int planes, float *y, size_t y_stride,
                             int ncols, void *scratch);

/* Bytes of one panel of |cols| columns of |k| elements. */
static inline size_t cpu_q8_panel_bytes(int64_t k, uint32_t cols, int planes)
{
    return (size_t)(k / CPU_Q8_BLOCK) * (32 * (size_t)planes + 3 * sizeof(float)) * cols;
}

/* Weight rows a qgemm kernel decodes at once (the avx512 micro-kernel
 * multiplies this many rows with each panel load). */
#define CPU_QGEMM_ROWS 4

/* Bytes of one decoded weight row in qgemm scratch (quants, then a scale
 * and a min per 16 elements), a multiple of 64. */
static inline size_t cpu_qgemm_row_bytes(int64_t k)
{
    return ((size_t)k + 2 * sizeof(float) * (size_t)(k / 16) + 63) & ~(size_t)63;
}

/* Scratch a qgemm call needs: CPU_QGEMM_ROWS decoded weight rows. */
static inline size_t cpu_qgemm_scratch_bytes(int64_t k)
{
    return CPU_QGEMM_ROWS * cpu_qgemm_row_bytes(k) + 64;
}

/* Returns sum w[i] * x[i] for one dense weight row of a float dtype. */
typedef float (*cpu_fdot_fn)(const void *w, const float *x, int64_t n);

typedef struct cpu_isa_table {
    const char *name; /* "scalar", "avx2", "avxvnni", "avx512", "avx512gfni", ... */
    /* Returns sum a[i] * b[i]. */
    float (*dot_f32)(const float *a, const float *b, int64_t n);
    /* Returns sum f16(a[i]) * b[i]. */
    float (*dot_f16)(const uint16_t *a, const float *b, int64_t n);
    /* y[i] += a * x[i]. */
    void (*axpy_f32)(float *y, float a, const float *x, int64_t n);
    /* y[i] += a * f16(x[i]). */
    void (*axpy_f16)(float *y, float a, const uint16_t *x, int64_t n);
    /* y[i] = a[i] + b[i]; y may be a. */
    void (*add_f32)(float *y, const float *a, const float *b, int64_t n);
    /* y[i] = a[i] * b[i]; y may be a. */
    void (*mul_f32)(float *y, const float *a, const float *b, int64_t n);
    /* y[i] = a[i] * s + bias rounded once (fused), or a[i] * s when bias
     * is 0; y may be a. */
    void (*scale_f32)(float *y, const float *a, float s, float bias, int64_t n);
    /* Rounds to nearest even, as sy__f32_to_fp16. */
    void (*f32_to_f16)(const float *src, uint16_t *dst, int64_t n);
    /* y[i] = silu(a[i]) (times b[i] when b is not NULL: SwiGLU); y may be a. */
    void (*silu_f32)(float *y, const float *a, const float *b, int64_t n);
    /* y[i] = gelu(a[i]) (tanh approximation; times b[i] when b is not NULL:
     * GeGLU); y may be a. */
    void (*gelu_f32)(float *y, const float *a, const float *b, int64_t n);
    /* Attention's scores for the |nh| query heads that share one kv head:
     * out[h * out_stride + j] = scale * (row j . q_h), q_h = q + h * q_stride,
     * for |n| F16 (|f16|) or F32 rows of |d| elements, |stride| bytes
     * apart.  Each row is read once for all the heads. */
    void (*dot_rows)(const void *rows, size_t stride, bool f16, int64_t n, const float *q,
                     int64_t q_stride, int64_t nh, int64_t d, float scale, float *out,
                     int64_t out_stride);
    /* Attention's mix of values for the same heads:
     * acc_h[i] += sum_j p_h[j] * row_j[i] with acc_h = acc + h * acc_stride,
     * p_h = p + h * p_stride, over the same kind of rows. */
    void (*mix_rows)(float *acc, int64_t acc_stride, const void *rows, size_t stride, bool f16,
                     int64_t n, const float *p, int64_t p_stride, int64_t nh, int64_t d);
    /* y[i] = exp(x[i] * scale - shift); returns the sum of y.  y may be x. */
    float (*exp_sum_f32)(float *y, const float *x, float scale, float shift, int64_t n);
    /* Row dequantizers for every dtype (F32 copies, I32 converts by value). */
    cpu_dequant_fn dequant[SY_DTYPE_COUNT];
    /* Matmul inner products: F32, F16, BF16 and I32 weights dot F32
     * activations (fdot); every quantized dtype dots Q8 columns (qdot). */
    cpu_fdot_fn fdot[SY_DTYPE_COUNT];
    cpu_quantize_q8_fn quantize_q8;
    cpu_qdot_fn qdot[SY_DTYPE_COUNT];
    /* One-column qdot over many rows (NULL: qdot row by row). */
    cpu_qdot_rows_fn qdot_rows[SY_DTYPE_COUNT];
    /* Prefill GEMM of quantized weights against panels of q8_panel Q8
     * columns (0 and NULLs where the table has none). */
    uint32_t q8_panel;
    cpu_pack_panel_fn pack_q8_panel;
    cpu_qgemm_fn qgemm[SY_DTYPE_COUNT];
    /* Weights repacked at first use (cpu_repack.c) where this table has
     * both kernels for their layout: decode and prefill GEMM. */
    cpu_qdot_rows_fn qdot_rows_packed[SY_DTYPE_COUNT];
    cpu_qgemm_fn qgemm_packed[SY_DTYPE_COUNT];
} cpu_isa_table;

typedef struct cpu_isa_features {
    bool sse42;
    bool avx;
    bool avx2;
    bool fma;
    bool f16c;
    bool avx512f;
    bool avx512bw;
    bool avx512vl;
    bool avx512vnni;
    bool gfni; /* Galois-field byte affine (Ice Lake and later, Zen 4/5) */
    bool avxvnni;
    bool neon;    /* AArch64 Advanced SIMD */
    bool dotprod; /* Armv8.2 SDOT/UDOT */
} cpu_isa_features;

/* Fills |out| with the features of the CPU running the caller. */
void cpu_isa_detect(cpu_isa_features *out);

/* Writes the detected features as one line ("avx2 fma f16c avx512f"). */
void cpu_isa_format(const cpu_isa_features *f, char *out_text, size_t size);

/* Picks the inner-kernel table for |request| (NULL, "" or "auto": the best
 * table |f| allows; "scalar", "avx2", "avxvnni", "avx512", "avx512gfni",
 * "neon", "dotprod").  A table the CPU cannot run or an
 * unknown name gives SY_E_UNSUPPORTED / SY_E_INVALID_ARG and the scalar
 * table in *out_table, so the caller can warn and go on. */
sy_status cpu_isa_select(const cpu_isa_features *f, const char *request,
                         const cpu_isa_table **out_table);

/* The tables, defined by their kernel files. */
const cpu_isa_table *cpu_isa_scalar_table(void);
/* NULL when the plugin was built for a CPU family without AVX2. */
const cpu_isa_table *cpu_isa_avx2_table(void);
const cpu_isa_table *cpu_isa_avxvnni_table(void);
const cpu_isa_table *cpu_isa_avx512_table(void);
const cpu_isa_table *cpu_isa_avx512gfni_table(void);
/* NULL unless the plugin was built for AArch64. */
const cpu_isa_table *cpu_isa_neon_table(void);
const cpu_isa_table *cpu_isa_dotprod_table(void);

#endif
