/* Runtime ISA dispatch of the CPU plugin's inner kernels.
 *
 * The outer kernels (cpu_kernels_*.c) are plain C; everything that touches
 * vector registers goes through a cpu_isa_table chosen once at init: the
 * scalar table always exists, the AVX2 table (cpu_kernels_avx2.c, compiled
 * with target("avx2,fma,f16c")) is used when the CPU has those features.
 * $SWITCHYARD_CPU_ISA=scalar forces the scalar table for testing. */
#ifndef SY_CPU_ISA_H
#define SY_CPU_ISA_H

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

#include "switchyard/plugin.h"

/* Converts |n| elements (a multiple of the dtype's block size) of one row
 * at |src| to F32 at |dst|. */
typedef void (*cpu_dequant_fn)(const void *src, float *dst, int64_t n);

typedef struct cpu_isa_table {
    const char *name; /* "scalar", "avx2" */
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
    /* Row dequantizers for every dtype (F32 copies, I32 converts by value). */
    cpu_dequant_fn dequant[SY_DTYPE_COUNT];
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
} cpu_isa_features;

/* Fills |out| with the features of the CPU running the caller. */
void cpu_isa_detect(cpu_isa_features *out);

/* Writes the detected features as one line ("avx2 fma f16c avx512f"). */
void cpu_isa_format(const cpu_isa_features *f, char *out_text, size_t size);

/* Picks the inner-kernel table for |request| (NULL, "" or "auto": the best
 * table |f| allows; "scalar"; "avx2").  A table the CPU cannot run or an
 * unknown name gives SY_E_UNSUPPORTED / SY_E_INVALID_ARG and the scalar
 * table in *out_table, so the caller can warn and go on. */
sy_status cpu_isa_select(const cpu_isa_features *f, const char *request,
                         const cpu_isa_table **out_table);

/* The tables, defined by their kernel files. */
const cpu_isa_table *cpu_isa_scalar_table(void);
/* NULL when the plugin was built for a CPU family without AVX2. */
const cpu_isa_table *cpu_isa_avx2_table(void);

#endif
