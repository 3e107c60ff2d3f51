/* Data-movement ops, threaded over rows: GET_ROWS (embedding lookup from a
 * table of any dtype), KV_WRITE (store F32 rows into an F32/F16/Q8_0/Q4_0
 * cache) and COPY (strided views to contiguous, with dtype conversion).
 * Quantization goes through sy__quantize_row, the same code the reference
 * uses, so quantized results match it bit for bit. */
#include <string.h>

#include "cpu_kernels.h"
#include "quants_internal.h"

#define CPU_MEMORY_MIN_PER_LANE 16384

/* ------------------------------------------------------------ get_rows */

typedef struct cpu_get_rows_ctx {
    const cpu_state *s;
    const sy_tensor *table, *ids, *y;
    /* The table's packed copy (a tied output head the matmul packed), read
     * instead of the file's pages, which were released (cpu_repack.c): a
     * row read from those would map its whole page-cache folio back. */
    const uint8_t *packed;
} cpu_get_rows_ctx;

static int32_t cpu_get_rows_id(const sy_tensor *ids, int64_t m)
{
    return *(const int32_t *)((const char *)ids->data + m * (int64_t)ids->nb[0]);
}

static void cpu_get_rows_task(void *arg, uint32_t ith, uint32_t nth, uint32_t lane)
{
    const cpu_get_rows_ctx *c = arg;
    const cpu_dequant_fn dequant = c->s->isa->dequant[c->table->dtype];
    int64_t lo, hi;
    cpu_split(c->ids->ne[0], ith, nth, &lo, &hi);
    for (int64_t m = lo; m < hi; m++) {
        const char *row = cpu_row(c->table, cpu_get_rows_id(c->ids, m), 0, 0);
        if (c->packed)
            row = (const char *)cpu_packed_row_as_stored(
                c->table, c->packed + (row - (const char *)c->table->data), c->s->lanes[lane].scratch);
        dequant(row, (float *)cpu_row(c->y, m, 0, 0), c->table->ne[0]);
    }
}

sy_status cpu_kernel_get_rows(cpu_state *s, const sy_node *node, const char **out_why)
{
    cpu_get_rows_ctx c = {.s = s, .table = node->inputs[0], .ids = node->inputs[1],
                          .y = node->output};
    if (!cpu_rows_dense(c.table) || !s->isa->dequant[c.table->dtype] ||
        c.ids->dtype != SY_DTYPE_I32 || !cpu_is_f32_rows(c.y) || c.y->ne[0] != c.table->ne[0] ||
        c.y->ne[1] != c.ids->ne[0]) {
        *out_why = "table rows not dense, ids not i32 or output not f32 [K,M]";
        return SY_E_UNSUPPORTED;
    }
    for (int64_t m = 0; m < c.ids->ne[0]; m++) {
        const int32_t id = cpu_get_rows_id(c.ids, m);
        if (id < 0 || id >= c.table->ne[1]) {
            /* The reference kernel reports the bad id in its own words. */
            *out_why = "an id is out of range";
            return SY_E_UNSUPPORTED;
        }
    }
    c.packed = cpu_weight_packed_made(s, c.table);
    if (c.packed) {
        sy_status st = cpu_scratch_reserve(s, (size_t)c.table->nb[1]);
        if (st != SY_OK)
            return st;
    }
    const int64_t rows = c.ids->ne[0];
    uint32_t nth = cpu_lanes_for(s, rows * c.table->ne[0], CPU_MEMORY_MIN_PER_LANE);
    if ((int64_t)nth > rows)
        nth = (uint32_t)rows;
    cpu_pool_run(s->pool, cpu_get_rows_task, &c, nth);
    return SY_OK;
}

void cpu_store_row(const cpu_state *s, uint32_t dtype, const float *src, void *dst, int64_t n)
{
    switch (dtype) {
    case SY_DTYPE_F32:
        if (src != dst)
            memcpy(dst, src, (size_t)n * sizeof(float));
        break;
    case SY_DTYPE_F16:
        s->isa->f32_to_f16(src, dst, n);
        break;
    default:
        /* Every other dtype the callers admit (BF16, I32, Q8_0, Q4_0, Q4_1)
         * has a reference quantizer; the callers checked n. */
        (void)sy__quantize_row((sy_dtype)dtype, src, dst, n);
        break;
    }
}

static bool cpu_can_store(uint32_t dtype)
{
    switch (dtype) {
    case SY_DTYPE_F32:
    case SY_DTYPE_F16:
    case SY_DTYPE_BF16:
    case SY_DTYPE_I32:
    case SY_DTYPE_Q8_0:
    case SY_DTYPE_Q4_0:
    case SY_DTYPE_Q4_1:
        return true;
    default:
        return false;
    }
}

/* ------------------------------------------------------------ kv_write */

typedef struct cpu_kv_write_ctx {
    const cpu_state *s;
    const sy_tensor *cache; /* the node's output: the cache's alias */
    const sy_tensor *rows;
    int64_t start;
} cpu_kv_write_ctx;

static void cpu_kv_write_task(void *arg, uint32_t ith, uint32_t nth, uint32_t lane)
{
    const cpu_kv_write_ctx *c = arg;
    const int64_t heads = c->rows->ne[1];
    int64_t lo, hi;
    cpu_split(heads * c->rows->ne[2], ith, nth, &lo, &hi);
    for (int64_t r = lo; r < hi; r++) {
        const int64_t h = r % heads, t = r / heads;
        cpu_store_row(c->s, c->cache->dtype, (const float *)cpu_row(c->rows, h, t, 0),
                      cpu_row(c->cache, h, c->start + t, 0), c->rows->ne[0]);
    }
}

const int32_t *cpu_kv_run_time_position(const sy_node *node)
{
    const uint32_t at = node->op == SY_OP_KV_WRITE ? 2 : 3;
    if (!sy_op_has_run_time_position(node) || node->inputs[at]->dtype != SY_DTYPE_I32)
        return NULL;
    return node->inputs[at]->data;
}

/* The first row KV_WRITE |node| writes: p.i[0], or its run-time input's
 * value, checked against the cache then. */
static sy_status cpu_kv_write_start(const sy_node *node, int64_t *out, const char **out_why)
{
    if (!sy_op_has_run_time_position(node)) {
        *out = node->params.i[0];
        return SY_OK;
    }
    const int32_t *at = cpu_kv_run_time_position(node);
    if (!at) {
        *out_why = "the run-time position is not an i32 in host memory";
        return SY_E_UNSUPPORTED;
    }
    *out = *at;
    if (*out < 0 || *out > node->inputs[0]->ne[2] - node->inputs[1]->ne[2]) {
        *out_why = "the run-time start puts the rows outside the cache";
        return SY_E_INVALID_ARG;
    }
    return SY_OK;
}

sy_status cpu_kv_write_check(const sy_node *node, const char **out_why)
{
    /* Rows are written through the output, which aliases the cache from
     * its row 0 with the cache's dtype and strides (as the reference does).
     * A run-time start is checked where it is read. */
    const sy_tensor *cache = node->output, *rows = node->inputs[1];
    const int64_t start = sy_op_has_run_time_position(node) ? 0 : node->params.i[0];
    const uint32_t ct = cache->dtype;
    if ((ct != SY_DTYPE_F32 && ct != SY_DTYPE_F16 && ct != SY_DTYPE_Q8_0 && ct != SY_DTYPE_Q4_0) ||
        ct != node->inputs[0]->dtype || !cpu_rows_dense(cache) || !cpu_is_f32_rows(rows)) {
        *out_why = "cache not f32/f16/q8_0/q4_0 or rows not dense";
        return SY_E_UNSUPPORTED;
    }
    if (cache->ne[0] != rows->ne[0] || cache->ne[1] != rows->ne[1] || cache->ne[3] != 1 ||
        rows->ne[3] != 1 || cache->ne[0] % (int64_t)sy_dtype_block_size(ct) != 0 || start < 0 ||
        start > cache->ne[2] - rows->ne[2]) {
        *out_why = "shapes or start outside the kv_write rules";
        return SY_E_UNSUPPORTED;
    }
    return SY_OK;
}

sy_status cpu_kernel_kv_write(cpu_state *s, const sy_node *node, const char **out_why)
{
    cpu_kv_write_ctx c = {.s = s, .cache = node->output, .rows = node->inputs[1]};
    sy_status st = cpu_kv_write_check(node, out_why);
    if (st == SY_OK)
        st = cpu_kv_write_start(node, &c.start, out_why);
    if (st != SY_OK)
        return st;
    const int64_t rows = c.rows->ne[1] * c.rows->ne[2];
    uint32_t nth = cpu_lanes_for(s, rows * c.rows->ne[0], CPU_MEMORY_MIN_PER_LANE);
    if ((int64_t)nth > rows)
        nth = (uint32_t)rows;
    cpu_pool_run(s->pool, cpu_kv_write_task, &c, nth);
    return SY_OK;
}

/* ---------------------------------------------------------------- copy */

typedef struct cpu_copy_ctx {
    const cpu_state *s;
    const sy_tensor *x, *y;
} cpu_copy_ctx;

/* Reads element |i| of a non-block row as F32. */
static float cpu_load_elem(const sy_tensor *t, const char *row, int64_t i)
{
    const char *p = row + i * (int64_t)t->nb[0];
    switch (t->dtype) {
    case SY_DTYPE_F32:
        return *(const float *)p;
    case SY_DTYPE_F16:
        return sy__fp16_to_f32(*(const uint16_t *)p);
    case SY_DTYPE_BF16:
        return sy__bf16_to_f32(*(const uint16_t *)p);
    default:
        return (float)*(const int32_t *)p;
    }
}

static void cpu_copy_task(void *arg, uint32_t ith, uint32_t nth, uint32_t lane)
{
    const cpu_copy_ctx *c = arg;
    const sy_tensor *x = c->x, *y = c->y;
    const int64_t n = x->ne[0];
    const bool dense = cpu_rows_dense(x);
    const size_t es = sy_dtype_type_size(x->dtype);
    float *tmp = c->s->lanes[lane].scratch;
    int64_t lo, hi;
    cpu_split(cpu_nrows(x), ith, nth, &lo, &hi);
    for (int64_t r = lo; r < hi; r++) {
        const int64_t i1 = r % x->ne[1], i2 = (r / x->ne[1]) % x->ne[2],
                      i3 = r / (x->ne[1] * x->ne[2]);
        const char *src = cpu_row(x, i1, i2, i3);
        char *dst = cpu_row(y, i1, i2, i3);
        if (x->dtype == y->dtype) {
            if (dense)
                memcpy(dst, src, (size_t)sy_tensor_row_size(x));
            else
                for (int64_t i = 0; i < n; i++)
                    memcpy(dst + (size_t)i * es, src + i * (int64_t)x->nb[0], es);
            continue;
        }
        float *f = y->dtype == SY_DTYPE_F32 ? (float *)dst : tmp;
        if (dense)
            c->s->isa->dequant[x->dtype](src, f, n);
        else
            for (int64_t i = 0; i < n; i++)
                f[i] = cpu_load_elem(x, src, i);
        cpu_store_row(c->s, y->dtype, f, dst, n);
    }
}

sy_status cpu_kernel_copy(cpu_state *s, const sy_node *node, const char **out_why)
{
    cpu_copy_ctx c = {.s = s, .x = node->inputs[0], .y = node->output};
    const sy_tensor *x = c.x, *y = c.y;
    if (y->dtype != (uint32_t)node->params.i[0] || !sy_tensor_is_contiguous(y)) {
        *out_why = "output is not contiguous in the requested dtype";
        return SY_E_UNSUPPORTED;
    }
    for (int d = 0; d < SY_MAX_DIMS; d++) {
        if (x->ne[d] != y->ne[d]) {
            *out_why = "input and output shapes differ";
            return SY_E_UNSUPPORTED;
        }
    }
    if (x->dtype != y->dtype) {
        if (!cpu_can_store(y->dtype) || !s->isa->dequant[x->dtype] ||
            x->ne[0] % (int64_t)sy_dtype_block_size(y->dtype) != 0) {
            *out_why = "no converter for this dtype pair";
            return SY_E_UNSUPPORTED;
        }
    }
    if (sy_dtype_is_quantized(x->dtype) && !cpu_rows_dense(x)) {
        *out_why = "block rows of the input are not dense";
        return SY_E_UNSUPPORTED;
    }
    sy_status st = cpu_scratch_reserve(s, (size_t)x->ne[0] * sizeof(float));
    if (st != SY_OK)
        return st;
    const int64_t rows = cpu_nrows(x);
    uint32_t nth = cpu_lanes_for(s, rows * x->ne[0], CPU_MEMORY_MIN_PER_LANE);
    if ((int64_t)nth > rows)
        nth = (uint32_t)rows;
    cpu_pool_run(s->pool, cpu_copy_task, &c, nth);
    return SY_OK;
}
