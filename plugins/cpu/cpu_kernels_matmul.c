/* MATMUL: out[n, m] = sum_k W[k, n] * X[k, m] for every weight dtype.
 *
 * Quantized weights (Q8_0, Q4_0, Q4_1, Q5_0, Q5_1, Q4_K, Q5_K, Q6_K): the
 * columns of X are quantized once per matmul into Q8 columns (layout in
 * cpu_isa.h) and every output is an integer dot product of a weight row
 * with a Q8 column (isa->qdot), so weights are never expanded to F32.
 * Float weights (F32, F16, BF16, I32) dot F32 columns in place
 * (isa->fdot); F16 columns are converted to F32 first.  Quantized columns
 * have one int8 plane (q8) or two (q16, the default: see cpu_isa.h).  With
 * SWITCHYARD_CPU_ACTIVATIONS=f32 quantized weights take a float path too:
 * each row is dequantized into lane scratch and dotted with F32 columns
 * (as exact as the reference, several times slower).
 *
 * Prefill (many columns) with a table that has a GEMM for the dtype: the
 * Q8 columns are packed into panels (isa->q8_panel columns side by side,
 * cpu_qgemm_x86.inc) and isa->qgemm decodes each weight row once per tile
 * and multiplies it with the tile's panels.
 *
 * Work items are tiles of (weight rows) x (columns) of one batch, claimed
 * from per-lane ranges with stealing (cpu_pool_run_items), so a lane slowed
 * by another process simply takes fewer.  Decode (one column): tiles are
 * a few output rows, claimed many at once and run in one call where the
 * range is full.  Prefill: a tile's columns stay in L2 while its weight
 * rows stream through. */
#include <stddef.h>
#include <string.h>

#include "cpu_kernels.h"

/* Floating-point work that earns a lane: below it the dispatch and the
 * barrier cost more than the lane saves. */
#define CPU_MATMUL_MIN_FLOPS_PER_LANE (256 * 1024)
/* Weight bytes a prefill tile keeps in L1 while its columns stream by. */
#define CPU_MATMUL_TILE_WEIGHT_BYTES (24 * 1024)
/* Columns per prefill tile: the Q8 columns of a tile stay in L2. */
#define CPU_MATMUL_TILE_COLS 64
/* Decode (one column) work is planned in units of whole cache lines of
 * F32 output rows, CPU_MATMUL_UNITS_PER_LANE per lane and at most
 * CPU_MATMUL_UNIT_MAX_BYTES of weights each, and cut into tiles of
 * CPU_MATMUL_DECODE_TILE_ROWS rows, the work items.  A claim takes at most
 * CPU_MATMUL_CLAIM_UNITS units' worth of tiles, run in one call of the
 * rows kernel, and claims shrink to single tiles at the end of a range
 * (cpu_pool_run_items), so the lanes end within a few rows of each other.
 * With units as the items (16 rows on SmolLM2) the caller waited about
 * half a unit at the end of every job: 1030-1130 TSC cycles a job on
 * average, against 600-650 with 4-row tiles (SmolLM2 tg128 -t 2, 3 runs
 * each).  4-row tiles each a call of their own made the same decode 10%
 * slower. */
#define CPU_MATMUL_ROW_QUANTUM 16
/* Units per lane a decode aims for (with 8 per lane, on a 2-core VM the
 * caller waited 1-16 us in the barrier at about a tenth of the dispatches). */
#define CPU_MATMUL_UNITS_PER_LANE 32
/* Weight bytes of a decode unit at most (a few microseconds of memory
 * time): with units/lane alone a big matmul's units grew with it (SmolLM2's
 * output matmul, 30 MB in 64 units: the caller waited 7-10 us on average at
 * its end for the other lane's last one, against 0.2-0.6 us elsewhere). */
#define CPU_MATMUL_UNIT_MAX_BYTES (48 * 1024)
#define CPU_MATMUL_DECODE_TILE_ROWS 4
/* Decode units, or prefill tiles, a claim takes at most. */
#define CPU_MATMUL_CLAIM_UNITS 4
/* Weight bytes of decode tiles at the end of each lane's range that the
 * worker lanes leave to the calling lane (at least one tile), so that the
 * caller runs a job's last tiles and seldom waits for a worker's
 * (cpu_pool_run_items_tail): a few hundred cycles of the caller's wait
 * for the line that says a worker is done.  On SmolLM2 (Q4_1, 576
 * columns) 2 tiles of 4 rows. */
#define CPU_MATMUL_KEEP_BYTES 3072
/* Column elements below which the caller quantizes alone. */
#define CPU_MATMUL_SERIAL_QUANTIZE 16384
/* Columns from which a prefill takes the GEMM (where the table has one). */
#define CPU_MATMUL_GEMM_MIN_COLS 8

typedef struct cpu_matmul_ctx {
    const cpu_state *s;
    const sy_tensor *w, *y;
    int64_t k, n_rows, m_cols;
    int64_t x_ne2, r2, r3; /* batches of x; broadcast ratios of w */
    cpu_qdot_fn qdot;      /* quantized weights: Q8 columns at xq */
    cpu_qdot_rows_fn qdot_rows; /* one column over many rows, or NULL */
    const uint8_t *w_packed;    /* the weight's packed copy (cpu_repack.c), or NULL */
    int planes;
    const uint8_t *xq;
    size_t xq_stride;
    cpu_fdot_fn fdot;      /* float weights: F32 columns at xf */
    cpu_dequant_fn dequant; /* F32 activations: rows expanded before fdot */
    cpu_qgemm_fn qgemm;     /* prefill GEMM: panels at xq */
    uint32_t panel_cols;
    size_t panel_bytes;
    int64_t panels_per_batch;
    const float *xf;
    uint64_t xf_nb[SY_MAX_DIMS];
    int64_t tile_rows, tile_cols, row_tiles, col_tiles, n_items;
    int64_t claim; /* tiles a lane claims at once at most (cpu_pool_run_items) */
    int64_t keep;  /* tiles at each range's end left to the calling lane (likewise) */
} cpu_matmul_ctx;

/* ----------------------------------------------------- column preparation */

typedef struct cpu_prepare_ctx {
    const cpu_state *s;
    int planes;
    const sy_tensor *x; /* F32 or F16 with dense rows */
    uint8_t *xq;        /* Q8 columns (quantize) */
    size_t xq_stride;
    float *xf;          /* packed F32 columns (convert) */
} cpu_prepare_ctx;

/* Quantizes flat column |r| of x into its Q8 column. */
static void cpu_matmul_quantize_col(const cpu_prepare_ctx *c, int64_t r, float *tmp)
{
    const int64_t k = c->x->ne[0];
    const void *src = cpu_row_flat(c->x, r);
    if (c->x->dtype == SY_DTYPE_F16) {
        c->s->isa->dequant[SY_DTYPE_F16](src, tmp, k);
        src = tmp;
    }
    c->s->isa->quantize_q8(src, c->xq + (size_t)r * c->xq_stride, k, c->planes);
}

static void cpu_matmul_quantize_task(void *arg, uint32_t ith, uint32_t nth, uint32_t lane)
{
    const cpu_prepare_ctx *c = arg;
    int64_t lo, hi;
    cpu_split(cpu_nrows(c->x), ith, nth, &lo, &hi);
    for (int64_t r = lo; r < hi; r++)
        cpu_matmul_quantize_col(c, r, c->s->lanes[lane].scratch);
}

static void cpu_matmul_convert_task(void *arg, uint32_t ith, uint32_t nth, uint32_t lane)
{
    const cpu_prepare_ctx *c = arg;
    const int64_t k = c->x->ne[0];
    int64_t lo, hi;
    cpu_split(cpu_nrows(c->x), ith, nth, &lo, &hi);
    for (int64_t r = lo; r < hi; r++)
        c->s->isa->dequant[SY_DTYPE_F16](cpu_row_flat(c->x, r), c->xf + r * k, k);
}

/* Quantizes the columns of panel |p| into lane scratch and packs them. */
static void cpu_matmul_panel_task(void *arg, uint32_t ith, uint32_t nth, uint32_t lane)
{
    const cpu_prepare_ctx *c = arg;
    const cpu_isa_table *isa = c->s->isa;
    const int64_t k = c->x->ne[0], m_cols = c->x->ne[1];
    const uint32_t g = isa->q8_panel;
    const int64_t ppb = (m_cols + g - 1) / g, batches = c->x->ne[2] * c->x->ne[3];
    const size_t col_bytes = cpu_q8_col_bytes(k, c->planes);
    uint8_t *cols = c->s->lanes[lane].scratch;
    float *tmp = (float *)(cols + (size_t)g * col_bytes);
    int64_t lo, hi;
    cpu_split(ppb * batches, ith, nth, &lo, &hi);
    for (int64_t p = lo; p < hi; p++) {
        const int64_t batch = p / ppb, m0 = p % ppb * g;
        const int nc = m_cols - m0 < g ? (int)(m_cols - m0) : (int)g;
        for (int j = 0; j < nc; j++) {
            /* Quantize flat column (m0 + j) of this batch into slot j. */
            const int64_t r = batch * m_cols + m0 + j;
            const void *src = cpu_row_flat(c->x, r);
            if (c->x->dtype == SY_DTYPE_F16) {
                isa->dequant[SY_DTYPE_F16](src, tmp, k);
                src = tmp;
            }
            isa->quantize_q8(src, cols + (size_t)j * col_bytes, k, c->planes);
        }
        isa->pack_q8_panel(cols, col_bytes, nc, k, c->planes, c->xq + (size_t)p * c->xq_stride);
    }
}

/* Quantizes and packs every column of x into panels in the shared
 * scratch, a panel per work item. */
static sy_status cpu_matmul_panels(cpu_state *s, const sy_tensor *x, cpu_matmul_ctx *mc)
{
    const int64_t k = x->ne[0], m_cols = x->ne[1], batches = x->ne[2] * x->ne[3];
    const uint32_t g = s->isa->q8_panel;
    mc->panel_cols = g;
    mc->panel_bytes = cpu_q8_panel_bytes(k, g, mc->planes);
    mc->panels_per_batch = (m_cols + g - 1) / g;
    const int64_t n_panels = mc->panels_per_batch * batches;
    size_t scratch = (size_t)g * cpu_q8_col_bytes(k, mc->planes) + (size_t)k * sizeof(float);
    if (scratch < cpu_qgemm_scratch_bytes(k))
        scratch = cpu_qgemm_scratch_bytes(k);
    sy_status st = cpu_shared_reserve(s, (size_t)n_panels * mc->panel_bytes);
    if (st == SY_OK)
        st = cpu_scratch_reserve(s, scratch);
    if (st != SY_OK)
        return st;
    mc->xq = s->shared;
    mc->xq_stride = mc->panel_bytes;
    cpu_prepare_ctx pc = {.s = s, .planes = mc->planes, .x = x, .xq = s->shared,
                          .xq_stride = mc->panel_bytes};
    uint32_t nth = cpu_lanes_for(s, n_panels * g * k, CPU_MATMUL_SERIAL_QUANTIZE);
    if ((int64_t)nth > n_panels)
        nth = (uint32_t)n_panels;
    cpu_pool_run(s->pool, cpu_matmul_panel_task, &pc, nth);
    return SY_OK;
}

/* Quantizes every column of x into the shared scratch: on the caller
 * alone when that is cheaper than waking lanes. */
static sy_status cpu_matmul_quantize(cpu_state *s, const sy_tensor *x, cpu_matmul_ctx *mc)
{
    const int64_t k = x->ne[0], cols = cpu_nrows(x);
    const size_t stride = cpu_q8_col_bytes(k, mc->planes);
    if (mc->xq_stride != stride)
        mc->xq_stride = stride;
    sy_status st = cpu_shared_reserve(s, (size_t)cols * mc->xq_stride);
    if (st == SY_OK && x->dtype == SY_DTYPE_F16)
        st = cpu_scratch_reserve(s, (size_t)k * sizeof(float));
    if (st != SY_OK)
        return st;
    cpu_prepare_ctx pc = {.s = s, .planes = mc->planes, .x = x, .xq = s->shared,
                          .xq_stride = mc->xq_stride};
    if (mc->xq != s->shared)
        mc->xq = s->shared;
    if (cols * k <= CPU_MATMUL_SERIAL_QUANTIZE) {
        for (int64_t r = 0; r < cols; r++)
            cpu_matmul_quantize_col(&pc, r, s->lanes[0].scratch);
        return SY_OK;
    }
    uint32_t nth = cpu_lanes_for(s, cols * k, CPU_MATMUL_SERIAL_QUANTIZE);
    if ((int64_t)nth > cols)
        nth = (uint32_t)cols;
    cpu_pool_run(s->pool, cpu_matmul_quantize_task, &pc, nth);
    return SY_OK;
}

/* Points mc at F32 columns: x itself, or a packed F32 copy of F16 x. */
static sy_status cpu_matmul_float_cols(cpu_state *s, const sy_tensor *x, cpu_matmul_ctx *mc)
{
    mc->xf = x->data;
    for (int d = 0; d < SY_MAX_DIMS; d++)
        mc->xf_nb[d] = x->nb[d];
    if (x->dtype != SY_DTYPE_F16)
        return SY_OK;
    const int64_t k = x->ne[0], cols = cpu_nrows(x);
    sy_status st = cpu_shared_reserve(s, (size_t)(cols * k) * sizeof(float));
    if (st != SY_OK)
        return st;
    cpu_prepare_ctx pc = {.s = s, .x = x, .xf = s->shared};
    cpu_pool_run(s->pool, cpu_matmul_convert_task, &pc, cpu_lanes_for(s, cols * k, 16384));
    mc->xf = s->shared;
    mc->xf_nb[0] = sizeof(float);
    mc->xf_nb[1] = (uint64_t)k * sizeof(float);
    mc->xf_nb[2] = mc->xf_nb[1] * (uint64_t)x->ne[1];
    mc->xf_nb[3] = mc->xf_nb[2] * (uint64_t)x->ne[2];
    return SY_OK;
}

/* ------------------------------------------------------------------ tiles */

/* The first weight row that batch (i2, i3) of the columns multiplies: in
 * the packed copy where the weight has one. */
static const char *cpu_matmul_w_rows(const cpu_matmul_ctx *c, int64_t i2, int64_t i3)
{
    const char *rows = cpu_row(c->w, 0, i2 / c->r2, i3 / c->r3);
    return c->w_packed ? (const char *)c->w_packed + (rows - (const char *)c->w->data) : rows;
}

static void cpu_matmul_tile(const cpu_matmul_ctx *c, int64_t item, float *scratch)
{
    const sy_tensor *w = c->w, *y = c->y;
    const int64_t per_batch = c->row_tiles * c->col_tiles;
    const int64_t batch = item / per_batch, rem = item % per_batch;
    const int64_t n0 = rem / c->col_tiles * c->tile_rows;
    const int64_t m0 = rem % c->col_tiles * c->tile_cols;
    const int64_t n1 = n0 + c->tile_rows < c->n_rows ? n0 + c->tile_rows : c->n_rows;
    const int64_t m1 = m0 + c->tile_cols < c->m_cols ? m0 + c->tile_cols : c->m_cols;
    const int64_t i2 = batch % c->x_ne2, i3 = batch / c->x_ne2;
    const uint64_t w_nb1 = w->nb[1];
    const char *w_base = cpu_matmul_w_rows(c, i2, i3);

    if (c->qgemm) {
        /* Tile columns are whole panels: m0, m1 count panels here. */
        const int64_t p0 = rem % c->col_tiles * c->tile_cols;
        const int64_t p1 = p0 + c->tile_cols < c->panels_per_batch ? p0 + c->tile_cols
                                                                   : c->panels_per_batch;
        const int64_t c0 = p0 * c->panel_cols;
        const int64_t ncols = c->m_cols - c0 < (p1 - p0) * (int64_t)c->panel_cols
                                  ? c->m_cols - c0
                                  : (p1 - p0) * (int64_t)c->panel_cols;
        float *yb = (float *)cpu_row(y, c0, i2, i3) + n0;
        c->qgemm(w_base + n0 * (int64_t)w_nb1, w_nb1, n1 - n0,
                 c->xq + (size_t)(batch * c->panels_per_batch + p0) * c->panel_bytes, (int)(p1 - p0),
                 c->k, c->planes, yb, y->nb[1] / sizeof(float), (int)ncols, scratch);
        return;
    }
    if (c->qdot) {
        /* Flat column index of (m, i2, i3) is m + m_cols * batch. */
        const uint8_t *xb = c->xq + (size_t)(c->m_cols * batch) * c->xq_stride;
        if (c->qdot_rows && m1 - m0 == 1) {
            c->qdot_rows(w_base + n0 * (int64_t)w_nb1, w_nb1, n1 - n0, xb + (size_t)m0 * c->xq_stride,
                         c->k, c->planes, (float *)cpu_row(y, m0, i2, i3) + n0);
            return;
        }
        if (c->w_packed) {
            /* Each packed row back in the file's layout, for the same
             * kernel, so the results do not depend on packing. */
            for (int64_t n = n0; n < n1; n++) {
                const uint8_t *row = cpu_packed_row_as_stored(
                    w, (const uint8_t *)w_base + n * (int64_t)w_nb1, (uint8_t *)scratch);
                for (int64_t m = m0; m < m1; m += CPU_QDOT_MAX_COLS) {
                    const int nc = m1 - m < CPU_QDOT_MAX_COLS ? (int)(m1 - m) : CPU_QDOT_MAX_COLS;
                    float out[CPU_QDOT_MAX_COLS];
                    c->qdot(row, xb + (size_t)m * c->xq_stride, c->xq_stride, nc, c->k, c->planes,
                            out);
                    for (int j = 0; j < nc; j++)
                        ((float *)cpu_row(y, m + j, i2, i3))[n] = out[j];
                }
            }
            return;
        }
        for (int64_t m = m0; m < m1; m += CPU_QDOT_MAX_COLS) {
            const int nc = m1 - m < CPU_QDOT_MAX_COLS ? (int)(m1 - m) : CPU_QDOT_MAX_COLS;
            float *yc[CPU_QDOT_MAX_COLS];
            for (int j = 0; j < nc; j++)
                yc[j] = (float *)cpu_row(y, m + j, i2, i3);
            const uint8_t *xc = xb + (size_t)m * c->xq_stride;
            for (int64_t n = n0; n < n1; n++) {
                float out[CPU_QDOT_MAX_COLS];
                c->qdot(w_base + n * (int64_t)w_nb1, xc, c->xq_stride, nc, c->k, c->planes, out);
                for (int j = 0; j < nc; j++)
                    yc[j][n] = out[j];
            }
        }
        return;
    }
    const char *xf = (const char *)c->xf + i2 * (int64_t)c->xf_nb[2] + i3 * (int64_t)c->xf_nb[3];
    if (c->dequant) {
        for (int64_t n = n0; n < n1; n++) {
            c->dequant(w_base + n * (int64_t)w_nb1, scratch, c->k);
            for (int64_t m = m0; m < m1; m++)
                ((float *)cpu_row(y, m, i2, i3))[n] =
                    c->fdot(scratch, (const float *)(xf + m * (int64_t)c->xf_nb[1]), c->k);
        }
        return;
    }
    for (int64_t m = m0; m < m1; m++) {
        const float *xc = (const float *)(xf + m * (int64_t)c->xf_nb[1]);
        float *yc = (float *)cpu_row(y, m, i2, i3);
        for (int64_t n = n0; n < n1; n++)
            yc[n] = c->fdot(w_base + n * (int64_t)w_nb1, xc, c->k);
    }
}

/* Chooses the tiles of |c| for |nth| lanes. */
static void cpu_matmul_plan_tiles(cpu_matmul_ctx *c, uint32_t nth, int64_t batches)
{
    const int64_t row_bytes = (int64_t)c->w->nb[1];
    c->claim = CPU_MATMUL_CLAIM_UNITS;
    c->keep = 0;
    if (c->qgemm) {
        /* Columns counted in panels. */
        c->tile_rows = c->s->gemm_tile_rows;
        c->tile_cols = CPU_MATMUL_TILE_COLS / c->panel_cols;
        while (c->tile_rows > 4 &&
               ((c->n_rows + c->tile_rows - 1) / c->tile_rows) *
                       ((c->panels_per_batch + c->tile_cols - 1) / c->tile_cols) * batches <
                   (int64_t)nth * 4)
            c->tile_rows /= 2;
        if (c->tile_rows > c->n_rows)
            c->tile_rows = c->n_rows;
        c->row_tiles = (c->n_rows + c->tile_rows - 1) / c->tile_rows;
        c->col_tiles = (c->panels_per_batch + c->tile_cols - 1) / c->tile_cols;
        c->n_items = c->row_tiles * c->col_tiles * batches;
        return;
    }
    if (c->m_cols == 1) {
        int64_t unit = c->n_rows / ((int64_t)nth * CPU_MATMUL_UNITS_PER_LANE);
        unit = (unit + CPU_MATMUL_ROW_QUANTUM - 1) / CPU_MATMUL_ROW_QUANTUM * CPU_MATMUL_ROW_QUANTUM;
        int64_t cap = CPU_MATMUL_UNIT_MAX_BYTES / (row_bytes > 0 ? row_bytes : 1);
        cap = cap / CPU_MATMUL_ROW_QUANTUM * CPU_MATMUL_ROW_QUANTUM;
        if (unit > cap)
            unit = cap;
        unit = unit < CPU_MATMUL_ROW_QUANTUM ? CPU_MATMUL_ROW_QUANTUM : unit;
        c->tile_rows = nth == 1 ? c->n_rows : CPU_MATMUL_DECODE_TILE_ROWS;
        c->claim = CPU_MATMUL_CLAIM_UNITS * unit / CPU_MATMUL_DECODE_TILE_ROWS;
        const int64_t tile_bytes = c->tile_rows * (row_bytes > 0 ? row_bytes : 1);
        if (nth > 1)
            c->keep = tile_bytes >= CPU_MATMUL_KEEP_BYTES ? 1 : CPU_MATMUL_KEEP_BYTES / tile_bytes;
        c->tile_cols = 1;
    } else {
        int64_t rows = CPU_MATMUL_TILE_WEIGHT_BYTES / (row_bytes > 0 ? row_bytes : 1);
        rows = rows < 4 ? 4 : rows > 64 ? 64 : rows;
        c->tile_rows = rows;
        c->tile_cols = c->m_cols < CPU_MATMUL_TILE_COLS ? c->m_cols : CPU_MATMUL_TILE_COLS;
        /* Few tiles for many lanes: split the rows further. */
        while (c->tile_rows > 4 &&
               ((c->n_rows + c->tile_rows - 1) / c->tile_rows) *
                       ((c->m_cols + c->tile_cols - 1) / c->tile_cols) * batches <
                   (int64_t)nth * 4)
            c->tile_rows /= 2;
    }
    if (c->tile_rows > c->n_rows)
        c->tile_rows = c->n_rows;
    c->row_tiles = (c->n_rows + c->tile_rows - 1) / c->tile_rows;
    c->col_tiles = (c->m_cols + c->tile_cols - 1) / c->tile_cols;
    c->n_items = c->row_tiles * c->col_tiles * batches;
}

/* Checks |node| against the kernel's rules and fills |c| for it; touches
 * no memory (scratch is reserved by the callers). */
static sy_status cpu_matmul_setup(cpu_state *s, const sy_node *node, cpu_matmul_ctx *c,
                                  const char **out_why)
{
    const sy_tensor *w = node->inputs[0], *x = node->inputs[1], *y = node->output;
    const cpu_qdot_fn qdot = s->isa->qdot[w->dtype];
    const cpu_fdot_fn fdot = s->isa->fdot[w->dtype];
    if (!cpu_rows_dense(w) || (!qdot && !fdot)) {
        *out_why = "weight rows are not dense";
        return SY_E_UNSUPPORTED;
    }
    if ((x->dtype != SY_DTYPE_F32 && x->dtype != SY_DTYPE_F16) || !cpu_rows_dense(x)) {
        *out_why = "input is not f32/f16 with dense rows";
        return SY_E_UNSUPPORTED;
    }
    if (!cpu_is_f32_rows(y)) {
        *out_why = "output is not f32 with dense rows";
        return SY_E_UNSUPPORTED;
    }
    const int64_t k = w->ne[0];
    if (k % (int64_t)sy_dtype_block_size(w->dtype) != 0 || x->ne[0] != k ||
        x->ne[2] % w->ne[2] != 0 || x->ne[3] % w->ne[3] != 0 ||
        (qdot && k % CPU_Q8_BLOCK != 0)) {
        *out_why = "shapes outside the matmul rules";
        return SY_E_UNSUPPORTED;
    }
    *c = (cpu_matmul_ctx){.s = s, .w = w, .y = y, .k = k, .n_rows = w->ne[1], .m_cols = x->ne[1],
                          .x_ne2 = x->ne[2], .r2 = x->ne[2] / w->ne[2], .r3 = x->ne[3] / w->ne[3],
                          .qdot = qdot, .fdot = qdot ? NULL : fdot, .planes = s->act_planes,
                          .qdot_rows = qdot ? s->isa->qdot_rows[w->dtype] : NULL};
    if (qdot && s->act_planes == 0) {
        c->qdot = NULL;
        c->dequant = s->isa->dequant[w->dtype];
        c->fdot = s->isa->fdot[SY_DTYPE_F32];
    }
    if (c->qdot && s->isa->qgemm[w->dtype] && c->m_cols >= CPU_MATMUL_GEMM_MIN_COLS)
        c->qgemm = s->isa->qgemm[w->dtype];
    return SY_OK;
}

/* Points |c| at the weight's packed copy and the kernels for it, where
 * the weight is packed (made now on its first use). */
static void cpu_matmul_use_packed(cpu_state *s, cpu_matmul_ctx *c)
{
    if (!c->qdot || c->dequant)
        return;
    const uint8_t *packed = cpu_weight_packed(s, c->w);
    if (!packed)
        return;
    c->w_packed = packed;
    c->qdot_rows = s->isa->qdot_rows_packed[c->w->dtype];
    if (c->qgemm)
        c->qgemm = s->isa->qgemm_packed[c->w->dtype];
}

/* Reserves the lane scratch the tiles of |c| use (cpu_matmul_tile). */
static sy_status cpu_matmul_scratch(cpu_state *s, const cpu_matmul_ctx *c)
{
    if (c->dequant) {
        sy_status st = cpu_scratch_reserve(s, (size_t)c->k * sizeof(float));
        if (st != SY_OK)
            return st;
    }
    /* A packed row put back in the file's layout. */
    if (!c->qgemm && c->w_packed && c->m_cols > 1)
        return cpu_scratch_reserve(s, (size_t)c->w->nb[1]);
    return SY_OK;
}

/* Prepares the columns of x for |c|: Q8 columns or panels, or F32 ones. */
static sy_status cpu_matmul_prepare(cpu_state *s, const sy_tensor *x, cpu_matmul_ctx *c)
{
    sy_status st = cpu_matmul_scratch(s, c);
    if (st != SY_OK)
        return st;
    if (c->qgemm)
        return cpu_matmul_panels(s, x, c);
    return c->qdot ? cpu_matmul_quantize(s, x, c) : cpu_matmul_float_cols(s, x, c);
}

static int64_t cpu_matmul_flops(const cpu_matmul_ctx *c, const sy_tensor *x)
{
    return 2 * c->k * c->n_rows * c->m_cols * x->ne[2] * x->ne[3];
}

/* ------------------------------------------------------------ groups */

/* Matmuls of one input run as one job: the tiles of every member form one
 * item space; item i belongs to the member whose range holds it. */
typedef struct cpu_matmul_group {
    cpu_matmul_ctx c[CPU_MATMUL_GROUP_MAX];
    int64_t end[CPU_MATMUL_GROUP_MAX]; /* one past each member's last item */
    uint32_t n;
    cpu_epilogue *epi; /* or NULL */
    /* Bytes the calling lane prefetches once the job is out
     * (cpu_matmul_job_prefetch); n_pf of them, for one run. */
    struct cpu_matmul_pf {
        const char *at;
        size_t bytes;
        bool write;
    } pf[CPU_MATMUL_PF_MAX];
    uint32_t n_pf;
} cpu_matmul_group;

/* Asks for the lines of the group's prefetch list: on the calling lane,
 * in its first claim, after the job's publication, so the other lanes
 * start their share while these load (a burst before it kept them waiting
 * for the bytes to arrive). */
static void cpu_matmul_group_prefetch(const cpu_matmul_group *g)
{
    for (uint32_t i = 0; i < g->n_pf; i++)
        cpu_prefetch_range(g->pf[i].at, g->pf[i].bytes, g->pf[i].write);
}

/* Tiles [first, end) of member |c|: one call of the rows kernel where
 * they are the rows of one column (a decode), else tile by tile. */
static void cpu_matmul_tiles(const cpu_matmul_ctx *c, int64_t first, int64_t end, float *scratch)
{
    if (c->m_cols == 1 && c->qdot && c->qdot_rows) {
        while (first < end) {
            /* Rows of one batch at a time. */
            const int64_t batch = first / c->row_tiles, base = batch * c->row_tiles;
            const int64_t stop = end < base + c->row_tiles ? end : base + c->row_tiles;
            const int64_t n0 = (first - base) * c->tile_rows;
            const int64_t n1 = (stop - base) * c->tile_rows < c->n_rows
                                   ? (stop - base) * c->tile_rows
                                   : c->n_rows;
            const int64_t i2 = batch % c->x_ne2, i3 = batch / c->x_ne2;
            const uint64_t w_nb1 = c->w->nb[1];
            c->qdot_rows(cpu_matmul_w_rows(c, i2, i3) + n0 * (int64_t)w_nb1, w_nb1, n1 - n0,
                         c->xq + (size_t)batch * c->xq_stride, c->k, c->planes,
                         (float *)cpu_row(c->y, 0, i2, i3) + n0);
            first = stop;
        }
        return;
    }
    for (int64_t item = first; item < end; item++)
        cpu_matmul_tile(c, item, scratch);
}

static void cpu_matmul_group_items(void *arg, int64_t first, int64_t end, uint32_t lane)
{
    const cpu_matmul_group *g = arg;
    /* Item 0 is the calling lane's first claim, taken once per run. */
    if (first == 0 && lane == 0)
        cpu_matmul_group_prefetch(g);
    uint32_t m = 0;
    while (first >= g->end[m])
        m++;
    while (first < end) {
        const int64_t base = m ? g->end[m - 1] : 0;
        const int64_t stop = end < g->end[m] ? end : g->end[m];
        const cpu_matmul_ctx *c = &g->c[m];
        cpu_matmul_tiles(c, first - base, stop - base, c->s->lanes[lane].scratch);
        if (g->epi) {
            /* A decode: the member's tile i is its rows from i * tile_rows. */
            const int64_t n0 = (first - base) * c->tile_rows;
            const int64_t n1 = (stop - base) * c->tile_rows;
            cpu_epilogue_tile_done(g->epi, m, n0, n1 < c->n_rows ? n1 : c->n_rows);
        }
        first = stop;
        m++;
    }
}

bool cpu_matmul_can_group(const cpu_state *s, const sy_node *a, const sy_node *b)
{
    const sy_tensor *xa = a->inputs[1], *xb = b->inputs[1];
    if (a->op != SY_OP_MATMUL || b->op != SY_OP_MATMUL || a->n_inputs < 2 || b->n_inputs < 2)
        return false;
    if (xa != xb && (xa->data != xb->data || xa->dtype != xb->dtype ||
                     memcmp(xa->ne, xb->ne, sizeof xa->ne) != 0 ||
                     memcmp(xa->nb, xb->nb, sizeof xa->nb) != 0))
        return false;
    /* Both take Q8 columns the same way (both GEMM or both dot). */
    const sy_dtype da = a->inputs[0]->dtype, db = b->inputs[0]->dtype;
    if (s->act_planes == 0 || !s->isa->qdot[da] || !s->isa->qdot[db])
        return false;
    return (s->isa->qgemm[da] != NULL) == (s->isa->qgemm[db] != NULL);
}

/* A matmul or a group, set up (cpu_kernels.h).  |g.epi| is pointed at
 * |epi| by each run, so a job may move between runs. */
struct cpu_matmul_job {
    cpu_matmul_group g;
    cpu_epilogue epi;
    const sy_tensor *x; /* the members' input */
    uint32_t nth;
    bool has_epi;
    /* The members' tiles are planned (at the first run after a build: they
     * depend on the nodes alone) and their claim size. */
    bool planned;
    int64_t claim, keep;
    /* What the calling lane runs once out of items, for the next run only
     * (cpu_matmul_job_tail), or NULL. */
    void (*tail)(void *);
    void *tail_ctx;
};

size_t cpu_matmul_job_size(void)
{
    return sizeof(cpu_matmul_job);
}

sy_status cpu_matmul_job_build(cpu_state *s, const sy_node *const *nodes, uint32_t n,
                               const cpu_epilogue *epi, cpu_matmul_job *j, const char **out_why)
{
    if (n < 1 || n > CPU_MATMUL_GROUP_MAX) {
        *out_why = "group size outside 1..CPU_MATMUL_GROUP_MAX";
        return SY_E_UNSUPPORTED;
    }
    j->g.n = n;
    j->g.n_pf = 0;
    j->tail = NULL;
    j->planned = false;
    int64_t flops = 0;
    for (uint32_t i = 0; i < n; i++) {
        sy_status st = cpu_matmul_setup(s, nodes[i], &j->g.c[i], out_why);
        if (st != SY_OK)
            return st;
        cpu_matmul_use_packed(s, &j->g.c[i]);
        if (n > 1 && (!j->g.c[i].qdot || (j->g.c[i].qgemm != NULL) != (j->g.c[0].qgemm != NULL))) {
            *out_why = "members do not share quantized columns";
            return SY_E_UNSUPPORTED;
        }
        if (epi && (j->g.c[i].m_cols != 1 || j->g.c[i].qgemm || nodes[i]->inputs[1]->ne[2] != 1 ||
                    nodes[i]->inputs[1]->ne[3] != 1)) {
            *out_why = "a group with rope and kv_write in its tiles must be a decode";
            return SY_E_UNSUPPORTED;
        }
        flops += cpu_matmul_flops(&j->g.c[i], nodes[i]->inputs[1]);
    }
    j->x = nodes[0]->inputs[1];
    j->nth = cpu_lanes_for(s, flops, CPU_MATMUL_MIN_FLOPS_PER_LANE);
    j->has_epi = epi != NULL;
    if (epi)
        j->epi = *epi;
    return SY_OK;
}

void cpu_matmul_job_prefetch(cpu_matmul_job *j, const void *at, size_t bytes, bool write)
{
    cpu_matmul_group *g = &j->g;
    if (!at || !bytes || g->n_pf == CPU_MATMUL_PF_MAX)
        return;
    g->pf[g->n_pf++] = (struct cpu_matmul_pf){.at = at, .bytes = bytes, .write = write};
}

void cpu_matmul_job_fetch(const cpu_matmul_job *j, uint32_t members, bool epi)
{
    const cpu_matmul_group *g = &j->g;
    if (members > CPU_MATMUL_GROUP_MAX)
        members = CPU_MATMUL_GROUP_MAX;
    cpu_prefetch_range(g->c, members * sizeof g->c[0], false);
    cpu_prefetch_range(g->end, sizeof *g - offsetof(cpu_matmul_group, end), false);
    if (epi)
        cpu_prefetch_range(&j->epi, sizeof j->epi, false);
    cpu_prefetch_range(&j->x, sizeof *j - offsetof(cpu_matmul_job, x), false);
}

void cpu_matmul_job_tail(cpu_matmul_job *j, void (*fn)(void *), void *ctx)
{
    j->tail = fn;
    j->tail_ctx = ctx;
}

cpu_epilogue *cpu_matmul_job_epilogue(cpu_matmul_job *j)
{
    return j->has_epi ? &j->epi : NULL;
}

static sy_status cpu_matmul_job_go(cpu_state *s, cpu_matmul_job *j);

sy_status cpu_matmul_job_run(cpu_state *s, cpu_matmul_job *j)
{
    sy_status st = cpu_matmul_job_go(s, j);
    /* Each run empties the prefetch list and drops the tail, whatever it
     * did. */
    j->g.n_pf = 0;
    j->tail = NULL;
    return st;
}

static sy_status cpu_matmul_job_go(cpu_state *s, cpu_matmul_job *j)
{
    cpu_matmul_group *g = &j->g;
    const uint32_t n = g->n;
    /* Each member's own scratch (its weight may be packed where the first
     * member's is not, or have longer rows); the columns are the first's. */
    for (uint32_t i = 1; i < n; i++) {
        sy_status st = cpu_matmul_scratch(s, &g->c[i]);
        if (st != SY_OK)
            return st;
    }
    const sy_tensor *x = j->x;
    sy_status st = cpu_matmul_prepare(s, x, &g->c[0]);
    if (st != SY_OK)
        return st;
    /* A kept job runs with what it had the run before: the lanes read
     * these lines in every item, and a store of the same value takes each
     * of them away from the other lanes' caches all the same.  So only
     * what moved is stored (the first's columns, where the shared buffer
     * grew), and the tiles are planned once. */
    const cpu_matmul_ctx *c0 = &g->c[0];
    for (uint32_t i = 1; i < n; i++) { /* members are quantized: the first's columns */
        cpu_matmul_ctx *c = &g->c[i];
        if (c->xq != c0->xq || c->xq_stride != c0->xq_stride || c->panel_cols != c0->panel_cols ||
            c->panel_bytes != c0->panel_bytes || c->panels_per_batch != c0->panels_per_batch) {
            c->xq = c0->xq;
            c->xq_stride = c0->xq_stride;
            c->panel_cols = c0->panel_cols;
            c->panel_bytes = c0->panel_bytes;
            c->panels_per_batch = c0->panels_per_batch;
        }
    }
    if (!j->planned) {
        /* The members' least claim and keep (one item space). */
        int64_t claim = 0, keep = 0;
        for (uint32_t i = 0; i < n; i++) {
            cpu_matmul_ctx *c = &g->c[i];
            cpu_matmul_plan_tiles(c, j->nth, x->ne[2] * x->ne[3]);
            g->end[i] = (i ? g->end[i - 1] : 0) + c->n_items;
            claim = i == 0 || c->claim < claim ? c->claim : claim;
            keep = i == 0 || c->keep < keep ? c->keep : keep;
        }
        j->claim = claim;
        j->keep = keep;
        j->planned = true;
    }
    const int64_t claim = j->claim;
    cpu_epilogue *epi = j->has_epi ? &j->epi : NULL;
    if (g->epi != epi)
        g->epi = epi;
    if (g->epi) {
        st = cpu_epilogue_ready(g->epi);
        if (st != SY_OK)
            return st;
        cpu_epilogue_prefetch(g->epi, j);
    }
    cpu_pool_run_items_tail(s->pool, cpu_matmul_group_items, g, g->end[n - 1], claim, j->keep,
                            j->nth, j->tail, j->tail_ctx);
    return SY_OK;
}

sy_status cpu_kernel_matmul(cpu_state *s, const sy_node *node, const char **out_why)
{
    cpu_matmul_job j;
    sy_status st = cpu_matmul_job_build(s, &node, 1, NULL, &j, out_why);
    return st == SY_OK ? cpu_matmul_job_run(s, &j) : st;
}
