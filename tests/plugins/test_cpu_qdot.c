/* Unit tests of the quantized-matmul kernels, compiled straight into the
 * test (the plugin exports nothing but its query symbol): the Q8 column
 * quantizer of every table against the scalar one (bit for bit), the
 * scalar dot kernels against the dequantized weights (the reference
 * dequantizers are ground truth), and every SIMD dot and GEMM kernel
 * against the scalar one on random blocks, for 1..CPU_QDOT_MAX_COLS
 * columns, with one activation plane (q8) and two (q16).  Seeds are fresh
 * per run and printed in every failure. */
#include <criterion/criterion.h>
#include <math.h>
#include <stdlib.h>
#include <string.h>

#include "cpu_case.h"
#include "cpu_isa.h"
#include "cpu_repack.h"
#include "quants_internal.h"

static const sy_dtype qtypes[] = {SY_DTYPE_Q8_0, SY_DTYPE_Q4_0, SY_DTYPE_Q4_1, SY_DTYPE_Q5_0,
                                  SY_DTYPE_Q5_1, SY_DTYPE_Q4_K, SY_DTYPE_Q5_K, SY_DTYPE_Q6_K};
#define N_QTYPES (sizeof qtypes / sizeof qtypes[0])

/* Fills |k| floats with blocks of very different magnitudes, an all-zero
 * block and exact ties of the rounding among them. */
static void fill_activations(trng *r, float *x, int64_t k)
{
    for (int64_t b = 0; b < k / 32; b++) {
        const uint32_t kind = trng_below(r, 6);
        const float scale = kind == 0 ? 0.0f : kind == 1 ? 1e-4f : kind == 2 ? 30.0f : 1.0f;
        for (int j = 0; j < 32; j++)
            x[b * 32 + j] = scale * trng_unit(r);
        if (kind == 5) {
            /* max 127 units: every integer and half-integer is exact. */
            for (int j = 0; j < 32; j++)
                x[b * 32 + j] = (float)((int)trng_below(r, 255) - 127) * 0.5f;
            x[b * 32] = 127.0f;
        }
    }
}

Test(cpu_qdot, quantizes_columns_alike_on_every_table)
{
    trng r;
    trng_init(&r);
    const int64_t k = 1024;
    float *x = tc_xalloc(sizeof(float) * k);
    for (int planes = 1; planes <= 2; planes++) {
        const size_t bytes = cpu_q8_col_bytes(k, planes);
        const int top = planes == 2 ? 127 * 128 : 127;
        uint8_t *want = tc_xalloc(bytes), *got = tc_xalloc(bytes);
        for (int round = 0; round < 20; round++) {
            fill_activations(&r, x, k);
            memset(want, 0, bytes);
            cpu_isa_scalar_table()->quantize_q8(x, want, k, planes);
            const float *sc = cpu_q8_scales(want, k, planes);
            for (int64_t b = 0; b < k / 32; b++) {
                int sum = 0;
                for (int j = 0; j < 32; j++) {
                    const int8_t hi = (int8_t)want[b * 32 + j];
                    const int8_t lo = planes == 2 ? (int8_t)want[k + b * 32 + j] : 0;
                    const int q = planes == 2 ? 128 * hi + lo : hi;
                    cr_assert(hi >= -127 && lo >= -64 && lo <= 63 && q >= -top && q <= top,
                              "seed %llu: %d planes: quants %d %d", (unsigned long long)r.seed,
                              planes, hi, lo);
                    /* Half a step, plus the rounding of x * (1 / d): two
                     * ulp of a value up to |top|. */
                    cr_assert(fabs(x[b * 32 + j] - (double)q * sc[2 * b]) <=
                                  (0.5 + top * 0x1p-22) * sc[2 * b],
                              "seed %llu: %d planes: x = %g quantized to %d * %g",
                              (unsigned long long)r.seed, planes, (double)x[b * 32 + j], q,
                              (double)sc[2 * b]);
                    sum += q;
                }
                cr_assert_eq(sc[2 * b + 1], sc[2 * b] * (float)sum, "seed %llu: block %lld",
                             (unsigned long long)r.seed, (long long)b);
            }
            for (size_t t = 0; t < TC_SIMD_TABLES; t++) {
                const cpu_isa_table *isa = tc_simd_table(t);
                if (!isa)
                    continue;
                memset(got, 0, bytes);
                isa->quantize_q8(x, got, k, planes);
                for (size_t i = 0; i < bytes; i++)
                    cr_assert_eq(got[i], want[i], "seed %llu: %s quantizer (%d planes) differs at byte %zu",
                                 (unsigned long long)r.seed, isa->name, planes, i);
            }
        }
        free(got);
        free(want);
    }
    free(x);
}

/* Random weights of |t|: |rows| rows of |k| elements. */
static void *random_rows(trng *r, sy_dtype t, int64_t k, int64_t rows, size_t *out_row_bytes)
{
    const size_t row = (size_t)(k / sy_dtype_block_size(t)) * sy_dtype_type_size(t);
    void *w = tc_xalloc(row * (size_t)rows);
    fill_random(r, t, w, k * rows);
    *out_row_bytes = row;
    return w;
}

/* sum_i w[i] * x^[i] in double from the dequantized row, and the
 * magnitude sum_i |w[i] * x^[i]| the F32 rounding of a kernel scales with. */
/* |rows| rows of |t| laid out as cpu_repack.c packs them. */
static void *pack_rows(const void *w, sy_dtype t, int64_t k, int64_t rows, size_t row)
{
    void *p = tc_xalloc(row * (size_t)rows);
    cpu_pack_rows_as(t, w, p, rows, row, k);
    return p;
}

static void exact_dot(sy_dtype t, const void *w, const uint8_t *col, int64_t k, int planes,
                      double *out_dot, double *out_mag)
{
    float *wf = tc_xalloc(sizeof(float) * k);
    cr_assert_eq(sy__dequantize_row(t, w, wf, k), SY_OK);
    const int8_t *hi = (const int8_t *)col, *lo = hi + k;
    const float *sc = cpu_q8_scales(col, k, planes);
    double dot = 0.0, mag = 0.0;
    for (int64_t i = 0; i < k; i++) {
        const double q = planes == 2 ? 128.0 * hi[i] + lo[i] : hi[i];
        const double v = (double)wf[i] * (q * (double)sc[2 * (i / 32)]);
        dot += v;
        mag += fabs(v);
    }
    free(wf);
    *out_dot = dot;
    *out_mag = mag;
}

/* Row lengths worth testing for |t|: one block, odd counts of blocks
 * around the kernels' pairs and quads (3, 7), and a long row. */
#define N_ROW_LENGTHS 4
static void row_lengths(sy_dtype t, int64_t out[N_ROW_LENGTHS])
{
    const int64_t bs = sy_dtype_block_size(t);
    out[0] = bs;
    out[1] = bs * 3;
    out[2] = bs * 7;
    out[3] = bs == 32 ? 1536 : 2048;
}

Test(cpu_qdot, scalar_kernels_match_the_dequantized_dot)
{
    trng r;
    trng_init(&r);
    const cpu_isa_table *ref = cpu_isa_scalar_table();
    for (int planes = 1; planes <= 2; planes++) {
        for (size_t ti = 0; ti < N_QTYPES; ti++) {
            const sy_dtype t = qtypes[ti];
            int64_t ks[N_ROW_LENGTHS];
            row_lengths(t, ks);
            for (int ki = 0; ki < N_ROW_LENGTHS; ki++) {
                const int64_t k = ks[ki];
                const size_t stride = cpu_q8_col_bytes(k, planes);
                size_t row;
                void *w = random_rows(&r, t, k, 1, &row);
                float *x = tc_xalloc(sizeof(float) * k);
                fill_activations(&r, x, k);
                uint8_t *col = tc_xalloc(stride);
                ref->quantize_q8(x, col, k, planes);
                float got;
                ref->qdot[t](w, col, stride, 1, k, planes, &got);
                double want, mag;
                exact_dot(t, w, col, k, planes, &want, &mag);
                /* Each block's product of F32 scales and its sum: a few ulp
                 * of the magnitude. */
                cr_assert(fabs(got - want) <= 1e-5 * mag + 1e-30,
                          "seed %llu: scalar %s K=%lld, %d planes: %.9g, dequantized %.9g "
                          "(magnitude %.3g)",
                          (unsigned long long)r.seed, sy_dtype_name(t), (long long)k, planes,
                          (double)got, want, mag);
                free(col);
                free(x);
                free(w);
            }
        }
    }
}

static void check_simd_dots(trng *r, const cpu_isa_table *isa, sy_dtype t, int64_t k, int planes)
{
    const cpu_isa_table *ref = cpu_isa_scalar_table();
    const size_t stride = cpu_q8_col_bytes(k, planes);
    size_t row;
    void *w = random_rows(r, t, k, 4, &row);
    float *x = tc_xalloc(sizeof(float) * k);
    uint8_t *cols = tc_xalloc(stride * CPU_QDOT_MAX_COLS);
    for (int c = 0; c < CPU_QDOT_MAX_COLS; c++) {
        fill_activations(r, x, k);
        ref->quantize_q8(x, cols + c * stride, k, planes);
    }
    for (int n = 0; n < 4; n++) {
        const void *wr = (const uint8_t *)w + n * row;
        for (int nc = 1; nc <= CPU_QDOT_MAX_COLS; nc++) {
            float want[CPU_QDOT_MAX_COLS], got[CPU_QDOT_MAX_COLS];
            ref->qdot[t](wr, cols, stride, nc, k, planes, want);
            isa->qdot[t](wr, cols, stride, nc, k, planes, got);
            for (int c = 0; c < nc; c++) {
                double exact, mag;
                exact_dot(t, wr, cols + c * stride, k, planes, &exact, &mag);
                cr_assert(fabs((double)got[c] - want[c]) <= 2e-5 * mag + 1e-30,
                          "seed %llu: %s %s K=%lld, %d planes, row %d, column %d of %d: %.9g, "
                          "scalar %.9g (magnitude %.3g)",
                          (unsigned long long)r->seed, isa->name, sy_dtype_name(t), (long long)k,
                          planes, n, c, nc, (double)got[c], (double)want[c], mag);
            }
        }
    }
    free(cols);
    free(x);
    free(w);
}

Test(cpu_qdot, simd_kernels_match_the_scalar_kernels)
{
    trng r;
    trng_init(&r);
    for (size_t tb = 0; tb < TC_SIMD_TABLES; tb++) {
        const cpu_isa_table *isa = tc_simd_table(tb);
        if (!isa)
            continue;
        for (size_t ti = 0; ti < N_QTYPES; ti++) {
            int64_t ks[N_ROW_LENGTHS];
            row_lengths(qtypes[ti], ks);
            for (int ki = 0; ki < N_ROW_LENGTHS; ki++)
                for (int planes = 1; planes <= 2; planes++)
                    check_simd_dots(&r, isa, qtypes[ti], ks[ki], planes);
        }
    }
}

/* The one-column row kernel (decode) over 1..7 rows against the scalar
 * qdot row by row (passes of several rows and the rows left over). */
static void check_qdot_rows(trng *r, const cpu_isa_table *isa, sy_dtype t, int64_t k, int planes,
                            bool packed)
{
    const cpu_isa_table *ref = cpu_isa_scalar_table();
    const size_t stride = cpu_q8_col_bytes(k, planes);
    size_t row;
    void *w = random_rows(r, t, k, 7, &row);
    float *x = tc_xalloc(sizeof(float) * k);
    uint8_t *col = tc_xalloc(stride);
    fill_activations(r, x, k);
    ref->quantize_q8(x, col, k, planes);
    void *wp = packed ? pack_rows(w, t, k, 7, row) : NULL;
    for (int64_t rows = 1; rows <= 7; rows++) {
        float got[7];
        if (packed)
            isa->qdot_rows_packed[t](wp, row, rows, col, k, planes, got);
        else
            isa->qdot_rows[t](w, row, rows, col, k, planes, got);
        for (int64_t n = 0; n < rows; n++) {
            const void *wr = (const uint8_t *)w + n * row;
            float want;
            double exact, mag;
            ref->qdot[t](wr, col, stride, 1, k, planes, &want);
            exact_dot(t, wr, col, k, planes, &exact, &mag);
            cr_assert(fabs((double)got[n] - want) <= 2e-5 * mag + 1e-30,
                      "seed %llu: %s qdot_rows%s %s K=%lld, %d planes, row %lld of %lld: %.9g, "
                      "scalar %.9g (magnitude %.3g)",
                      (unsigned long long)r->seed, isa->name, packed ? "_packed" : "",
                      sy_dtype_name(t), (long long)k, planes,
                      (long long)n, (long long)rows, (double)got[n], (double)want, mag);
        }
    }
    free(wp);
    free(col);
    free(x);
    free(w);
}

Test(cpu_qdot, row_kernels_match_the_scalar_kernels)
{
    trng r;
    trng_init(&r);
    int checked = 0;
    for (size_t tb = 0; tb < TC_SIMD_TABLES; tb++) {
        const cpu_isa_table *isa = tc_simd_table(tb);
        if (!isa)
            continue;
        for (size_t ti = 0; ti < N_QTYPES; ti++) {
            if (!isa->qdot_rows[qtypes[ti]])
                continue;
            int64_t ks[N_ROW_LENGTHS];
            row_lengths(qtypes[ti], ks);
            for (int ki = 0; ki < N_ROW_LENGTHS; ki++)
                for (int planes = 1; planes <= 2; planes++, checked++)
                    check_qdot_rows(&r, isa, qtypes[ti], ks[ki], planes, false);
        }
    }
    if (!checked)
        cr_log_info("no table here has row kernels");
}

static void check_gemm(trng *r, const cpu_isa_table *isa, sy_dtype t, int64_t k, int planes,
                       int64_t rows, bool packed)
{
    const cpu_isa_table *ref = cpu_isa_scalar_table();
    /* Three panels, the last one part full. */
    const int g = (int)isa->q8_panel, ncols = 2 * g + 3, np = (ncols + g - 1) / g;
    const size_t stride = cpu_q8_col_bytes(k, planes);
    const size_t pbytes = cpu_q8_panel_bytes(k, isa->q8_panel, planes);
    size_t row;
    void *w = random_rows(r, t, k, rows, &row);
    float *x = tc_xalloc(sizeof(float) * k);
    uint8_t *cols = tc_xalloc(stride * ncols), *panels = tc_xalloc(pbytes * np);
    for (int c = 0; c < ncols; c++) {
        fill_activations(r, x, k);
        ref->quantize_q8(x, cols + c * stride, k, planes);
    }
    for (int p = 0; p < np; p++) {
        const int nc = ncols - p * g < g ? ncols - p * g : g;
        isa->pack_q8_panel(cols + p * g * stride, stride, nc, k, planes, panels + p * pbytes);
    }
    /* y[c][n] with a padded column stride; the pad must stay. */
    const size_t ys = rows + 3;
    float *y = tc_xalloc(sizeof(float) * ys * ncols);
    for (size_t i = 0; i < ys * ncols; i++)
        y[i] = 12345.0f;
    void *scratch = tc_xalloc(cpu_qgemm_scratch_bytes(k));
    void *wp = packed ? pack_rows(w, t, k, rows, row) : NULL;
    if (packed)
        isa->qgemm_packed[t](wp, row, rows, panels, np, k, planes, y, ys, ncols, scratch);
    else
        isa->qgemm[t](w, row, rows, panels, np, k, planes, y, ys, ncols, scratch);
    for (int c = 0; c < ncols; c++) {
        for (int64_t n = 0; n < rows; n++) {
            const void *wr = (const uint8_t *)w + n * row;
            float want;
            ref->qdot[t](wr, cols + c * stride, stride, 1, k, planes, &want);
            double exact, mag;
            exact_dot(t, wr, cols + c * stride, k, planes, &exact, &mag);
            const float got = y[c * ys + n];
            cr_assert(fabs((double)got - want) <= 2e-5 * mag + 1e-30,
                      "seed %llu: %s gemm%s %s K=%lld, %d planes, row %lld column %d: %.9g, "
                      "scalar %.9g (magnitude %.3g)",
                      (unsigned long long)r->seed, isa->name, packed ? "_packed" : "",
                      sy_dtype_name(t), (long long)k, planes, (long long)n, c, (double)got, (double)want, mag);
        }
        for (size_t n = rows; n < ys; n++)
            cr_assert_eq(y[c * ys + n], 12345.0f, "%s gemm %s wrote past its rows", isa->name,
                         sy_dtype_name(t));
    }
    free(wp);
    free(scratch);
    free(y);
    free(panels);
    free(cols);
    free(x);
    free(w);
}

Test(cpu_qdot, gemm_kernels_match_the_scalar_dot_products)
{
    trng r;
    trng_init(&r);
    for (size_t tb = 0; tb < TC_SIMD_TABLES; tb++) {
        const cpu_isa_table *isa = tc_simd_table(tb);
        if (!isa || isa->q8_panel == 0)
            continue;
        for (size_t ti = 0; ti < N_QTYPES; ti++) {
            if (!isa->qgemm[qtypes[ti]])
                continue;
            int64_t ks[N_ROW_LENGTHS];
            row_lengths(qtypes[ti], ks);
            /* Row counts around the kernels' groups of CPU_QGEMM_ROWS. */
            for (int ki = 0; ki < N_ROW_LENGTHS; ki++)
                for (int planes = 1; planes <= 2; planes++)
                    for (int64_t rows = 1; rows <= 2 * CPU_QGEMM_ROWS + 1; rows++)
                        check_gemm(&r, isa, qtypes[ti], ks[ki], planes, rows, false);
        }
    }
}

/* Weights repacked at first use (cpu_repack.c): the packed kernels on
 * packed rows against the scalar kernels on the rows as stored, at row
 * lengths with no whole group of four blocks, one and a tail, and many. */
Test(cpu_qdot, packed_kernels_match_the_scalar_kernels)
{
    trng r;
    trng_init(&r);
    int checked = 0;
    for (size_t tb = 0; tb < TC_SIMD_TABLES; tb++) {
        const cpu_isa_table *isa = tc_simd_table(tb);
        if (!isa)
            continue;
        for (size_t ti = 0; ti < N_QTYPES; ti++) {
            const sy_dtype t = qtypes[ti];
            cr_assert(!isa->qdot_rows_packed[t] == !isa->qgemm_packed[t],
                      "%s packs %s for one kernel but not the other", isa->name, sy_dtype_name(t));
            if (!isa->qdot_rows_packed[t])
                continue;
            int64_t ks[N_ROW_LENGTHS];
            row_lengths(t, ks);
            for (int ki = 0; ki < N_ROW_LENGTHS; ki++)
                for (int planes = 1; planes <= 2; planes++, checked++) {
                    check_qdot_rows(&r, isa, t, ks[ki], planes, true);
                    for (int64_t rows = 1; rows <= CPU_QGEMM_ROWS + 1; rows++)
                        check_gemm(&r, isa, t, ks[ki], planes, rows, true);
                }
        }
    }
    if (!checked)
        cr_log_info("no table here packs weights");
}
