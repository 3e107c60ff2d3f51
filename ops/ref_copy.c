/* Reference kernels that move rows between dtypes: COPY (any layout to a
 * contiguous tensor of any writable dtype), KV_WRITE (new rows into a KV
 * cache) and GET_ROWS (table lookup, e.g. token embeddings).
 *
 * Rows of the same dtype are moved as bytes, never through F32: that keeps
 * K-quant blocks (which have no quantizer), NaN payloads and I32 values
 * above 2^24 bit-exact. */
#include <stdlib.h>
#include <string.h>

#include "ops_internal.h"

/* Copies row (si1, si2, si3) of |src| to row (di1, di2, di3) of |dst|,
 * converting through |tmp| (ne[0] floats) when the dtypes differ. */
static sy_status move_row(const sy_tensor *src, int64_t si1, int64_t si2, int64_t si3, sy_tensor *dst,
                          int64_t di1, int64_t di2, int64_t di3, float *tmp)
{
    if (src->dtype == dst->dtype) {
        const uint8_t *s = sy__row_ptr(src, si1, si2, si3);
        uint8_t *d = sy__row_ptr(dst, di1, di2, di3);
        const uint32_t ts = sy_dtype_type_size(src->dtype);
        if (src->nb[0] == ts && dst->nb[0] == ts) {
            /* memmove: an in-place copy may hand us the same row. */
            memmove(d, s, sy_tensor_row_size(src));
            return SY_OK;
        }
        if (sy_dtype_is_quantized(src->dtype))
            return SY_E_UNSUPPORTED;
        const int64_t n = src->ne[0] / (int64_t)sy_dtype_block_size(src->dtype);
        for (int64_t i = 0; i < n; i++)
            memmove(d + (uint64_t)i * dst->nb[0], s + (uint64_t)i * src->nb[0], ts);
        return SY_OK;
    }
    sy_status st = sy__row_load_f32(src, si1, si2, si3, tmp);
    if (st != SY_OK)
        return st;
    return sy__row_store_f32(dst, di1, di2, di3, tmp);
}

sy_status sy__ref_copy(const sy_node *node)
{
    const sy_tensor *x = node->inputs[0];
    sy_tensor *out = node->output;
    float *tmp = malloc((size_t)x->ne[0] * sizeof *tmp);
    if (tmp == NULL)
        return SY_E_NO_MEMORY;
    sy_status st = SY_OK;
    for (int64_t r = 0; r < sy__nrows(x) && st == SY_OK; r++) {
        int64_t i1, i2, i3;
        sy__row_index(x, r, &i1, &i2, &i3);
        st = move_row(x, i1, i2, i3, out, i1, i2, i3, tmp);
    }
    free(tmp);
    return st;
}

sy_status sy__ref_kv_write(const sy_node *node)
{
    const sy_tensor *rows = node->inputs[1];
    /* node->output aliases the cache: same dtype and strides, data at the
     * cache's row 0, extent P+T rows. */
    sy_tensor *cache = node->output;
    if (rows->dtype != SY_DTYPE_F32)
        return SY_E_DTYPE;
    int64_t start = node->params.i[0];
    if (node->n_inputs > 2 && sy__run_time_position(node->inputs[2], &start) != SY_OK)
        return SY_E_INVALID_ARG;
    if (start < 0 || start + rows->ne[2] > cache->ne[2])
        return node->n_inputs > 2 ? SY_E_INVALID_ARG : SY_E_SHAPE;
    float *tmp = malloc((size_t)rows->ne[0] * sizeof *tmp);
    if (tmp == NULL)
        return SY_E_NO_MEMORY;
    sy_status st = SY_OK;
    for (int64_t t = 0; t < rows->ne[2] && st == SY_OK; t++)
        for (int64_t h = 0; h < rows->ne[1] && st == SY_OK; h++)
            st = move_row(rows, h, t, 0, cache, h, start + t, 0, tmp);
    free(tmp);
    return st;
}

sy_status sy__ref_get_rows(const sy_node *node)
{
    const sy_tensor *table = node->inputs[0], *ids = node->inputs[1];
    sy_tensor *out = node->output;
    if (ids->dtype != SY_DTYPE_I32 || out->dtype != SY_DTYPE_F32)
        return SY_E_DTYPE;
    float *tmp = malloc((size_t)table->ne[0] * sizeof *tmp);
    if (tmp == NULL)
        return SY_E_NO_MEMORY;
    sy_status st = SY_OK;
    for (int64_t m = 0; m < ids->ne[0] && st == SY_OK; m++) {
        const int32_t id = sy__load_i32(ids, m, 0, 0, 0);
        /* Ids are data (token ids from a tokenizer or a caller): an out of
         * range one is an argument error, not a crash. */
        if (id < 0 || id >= table->ne[1]) {
            st = SY_E_INVALID_ARG;
            break;
        }
        st = move_row(table, id, 0, 0, out, m, 0, 0, tmp);
    }
    free(tmp);
    return st;
}
