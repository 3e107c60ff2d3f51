/* MATMUL: out[n, m] = sum_k W[k, n] * X[k, m] for every weight dtype.
 *
 * Output rows N (of every batch) are cut into blocks of a few weight rows;
 * lanes take contiguous runs of blocks.  A lane dequantizes its block of
 * weight rows once into its scratch (F32 weights are read in place) and
 * dots it against every input column, so a prefill batch of M columns
 * pays for the dequantization once.  F16 inputs are converted to F32 once,
 * in parallel, into the shared scratch before the main pass. */
#include <string.h>

#include "cpu_kernels.h"

/* Weight rows dequantized per block: enough to reuse each input column
 * several times, few enough that the block stays in L2. */
#define CPU_MATMUL_MAX_BLOCK_ROWS 16
#define CPU_MATMUL_BLOCK_BYTES (128 * 1024)

typedef struct cpu_matmul_ctx {
    const cpu_state *s;
    const sy_tensor *w;
    const sy_tensor *x; /* F32 with packed rows */
    const sy_tensor *y;
    const float *x_data; /* x's data, or the converted copy */
    uint64_t x_nb[SY_MAX_DIMS];
    int64_t block_rows;
    int64_t blocks_per_batch;
    int64_t n_items;
} cpu_matmul_ctx;

typedef struct cpu_convert_ctx {
    const cpu_state *s;
    const sy_tensor *src; /* F16 rows, any strides */
    float *dst;           /* packed F32 [K, rows] */
} cpu_convert_ctx;

static void cpu_matmul_convert_task(void *arg, uint32_t ith, uint32_t nth, uint32_t lane)
{
    const cpu_convert_ctx *c = arg;
    const int64_t k = c->src->ne[0];
    int64_t lo, hi;
    cpu_split(cpu_nrows(c->src), ith, nth, &lo, &hi);
    for (int64_t r = lo; r < hi; r++)
        c->s->isa->dequant[SY_DTYPE_F16](cpu_row_flat(c->src, r), c->dst + r * k, k);
}

static void cpu_matmul_task(void *arg, uint32_t ith, uint32_t nth, uint32_t lane)
{
    const cpu_matmul_ctx *c = arg;
    const cpu_state *s = c->s;
    const sy_tensor *w = c->w, *x = c->x, *y = c->y;
    const int64_t k = w->ne[0], n_rows = w->ne[1], m_cols = x->ne[1];
    const int64_t r2 = x->ne[2] / w->ne[2], r3 = x->ne[3] / w->ne[3];
    const bool in_place = w->dtype == SY_DTYPE_F32;
    const cpu_dequant_fn dequant = s->isa->dequant[w->dtype];
    float *scratch = s->lanes[lane].scratch;
    const float *rows[CPU_MATMUL_MAX_BLOCK_ROWS];

    int64_t lo, hi;
    cpu_split(c->n_items, ith, nth, &lo, &hi);
    for (int64_t item = lo; item < hi; item++) {
        const int64_t batch = item / c->blocks_per_batch;
        const int64_t n0 = (item % c->blocks_per_batch) * c->block_rows;
        const int64_t n1 = n0 + c->block_rows < n_rows ? n0 + c->block_rows : n_rows;
        const int64_t i2 = batch % x->ne[2], i3 = batch / x->ne[2];

        for (int64_t n = n0; n < n1; n++) {
            const void *src = cpu_row(w, n, i2 / r2, i3 / r3);
            if (in_place) {
                rows[n - n0] = src;
            } else {
                float *dst = scratch + (n - n0) * k;
                dequant(src, dst, k);
                rows[n - n0] = dst;
            }
        }
        for (int64_t m = 0; m < m_cols; m++) {
            const float *xc = (const float *)((const char *)c->x_data + m * (int64_t)c->x_nb[1] +
                                              i2 * (int64_t)c->x_nb[2] + i3 * (int64_t)c->x_nb[3]);
            float *yc = (float *)cpu_row(y, m, i2, i3);
            for (int64_t n = n0; n < n1; n++)
                yc[n] = s->isa->dot_f32(rows[n - n0], xc, k);
        }
    }
}

sy_status cpu_kernel_matmul(cpu_state *s, const sy_node *node, const char **out_why)
{
    const sy_tensor *w = node->inputs[0], *x = node->inputs[1], *y = node->output;
    if (!cpu_rows_dense(w) || !s->isa->dequant[w->dtype]) {
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
    const int64_t k = w->ne[0], n_rows = w->ne[1];
    if (k % (int64_t)sy_dtype_block_size(w->dtype) != 0 || x->ne[0] != k ||
        x->ne[2] % w->ne[2] != 0 || x->ne[3] % w->ne[3] != 0) {
        *out_why = "shapes outside the matmul rules";
        return SY_E_UNSUPPORTED;
    }

    cpu_matmul_ctx c = {.s = s, .w = w, .x = x, .y = y, .x_data = x->data};
    for (int d = 0; d < SY_MAX_DIMS; d++)
        c.x_nb[d] = x->nb[d];

    sy_status st;
    if (x->dtype == SY_DTYPE_F16) {
        const int64_t x_rows = cpu_nrows(x);
        st = cpu_shared_reserve(s, (size_t)(x_rows * k) * sizeof(float));
        if (st != SY_OK)
            return st;
        cpu_convert_ctx cc = {.s = s, .src = x, .dst = s->shared};
        cpu_pool_run(s->pool, cpu_matmul_convert_task, &cc, cpu_lanes_for(s, x_rows * k, 16384));
        c.x_data = s->shared;
        c.x_nb[0] = sizeof(float);
        c.x_nb[1] = (uint64_t)k * sizeof(float);
        c.x_nb[2] = c.x_nb[1] * (uint64_t)x->ne[1];
        c.x_nb[3] = c.x_nb[2] * (uint64_t)x->ne[2];
    }

    int64_t block_rows = CPU_MATMUL_BLOCK_BYTES / (k * (int64_t)sizeof(float));
    if (block_rows > CPU_MATMUL_MAX_BLOCK_ROWS)
        block_rows = CPU_MATMUL_MAX_BLOCK_ROWS;
    /* Small N: shrink blocks so that every lane gets some rows. */
    const int64_t per_lane = (n_rows + s->n_threads - 1) / s->n_threads;
    if (block_rows > per_lane)
        block_rows = per_lane;
    if (block_rows < 1)
        block_rows = 1;
    c.block_rows = block_rows;
    c.blocks_per_batch = (n_rows + block_rows - 1) / block_rows;
    c.n_items = c.blocks_per_batch * x->ne[2] * x->ne[3];

    if (w->dtype != SY_DTYPE_F32) {
        st = cpu_scratch_reserve(s, (size_t)(block_rows * k) * sizeof(float));
        if (st != SY_OK)
            return st;
    }
    const int64_t flops = 2 * k * n_rows * x->ne[1] * x->ne[2] * x->ne[3];
    uint32_t nth = cpu_lanes_for(s, flops, 32768);
    if ((int64_t)nth > c.n_items)
        nth = (uint32_t)c.n_items;
    cpu_pool_run(s->pool, cpu_matmul_task, &c, nth);
    return SY_OK;
}
