/* Shape inference for the ops whose output aliases their first input's
 * storage: VIEW, RESHAPE, PERMUTE, TRANSPOSE (compute nothing) and
 * KV_WRITE (writes into the cache, then exposes its filled prefix).
 *
 * An alias always points at the ROOT storage tensor (one with no
 * view_src) plus a byte offset, never at another view: the memory planner
 * and the runtime then only ever follow one hop to find the bytes. */
#include <string.h>

#include "ops_internal.h"

/* Deeper chains can only come from a corrupted or cyclic graph. */
#define ALIAS_MAX_HOPS 64

/* Finds the root storage of |t| and t's byte offset inside it. */
static sy_status find_root(sy_op op, const sy_tensor *t, sy_tensor **out_root, uint64_t *out_offset,
                           char *err, size_t es)
{
    uint64_t off = 0;
    const sy_tensor *cur = t;
    for (int hops = 0; cur->view_src != NULL; hops++) {
        if (hops == ALIAS_MAX_HOPS)
            return sy__op_fail(err, es, SY_E_GRAPH, op, "input's view chain is longer than %d hops (cycle?)",
                               ALIAS_MAX_HOPS);
        off += cur->view_offset;
        cur = cur->view_src;
    }
    *out_root = (sy_tensor *)cur;
    *out_offset = off;
    return SY_OK;
}

static sy_status infer_view(const sy_tensor *x, const sy_op_params *p, sy_tensor *o, char *err,
                            size_t es)
{
    const uint32_t ts = sy_dtype_type_size(x->dtype);
    const uint32_t bs = sy_dtype_block_size(x->dtype);
    o->dtype = x->dtype;
    for (int d = 0; d < SY_MAX_DIMS; d++) {
        if (p->i[d] < 1)
            return sy__op_fail(err, es, SY_E_SHAPE, SY_OP_VIEW, "ne[%d] (p.i[%d]) must be >= 1, got %lld", d,
                               d, (long long)p->i[d]);
        o->ne[d] = p->i[d];
    }
    if (o->ne[0] % bs != 0)
        return sy__op_fail(err, es, SY_E_SHAPE, SY_OP_VIEW,
                           "ne[0]=%lld is not a multiple of the %s block size %u", (long long)o->ne[0],
                           sy_dtype_name(x->dtype), bs);
    o->nb[0] = ts;
    for (int d = 1; d < SY_MAX_DIMS; d++) {
        const int64_t nb = p->i[3 + d];
        if (nb < 0 || (nb == 0 && o->ne[d] > 1))
            return sy__op_fail(err, es, SY_E_SHAPE, SY_OP_VIEW,
                               "nb%d (p.i[%d]) must be > 0 for a dim of %lld elements, got %lld", d, 3 + d,
                               (long long)o->ne[d], (long long)nb);
        if (nb % ts != 0)
            return sy__op_fail(err, es, SY_E_SHAPE, SY_OP_VIEW,
                               "nb%d (p.i[%d]) = %lld is not a multiple of the %s element/block size %u", d,
                               3 + d, (long long)nb, sy_dtype_name(x->dtype), ts);
        o->nb[d] = (uint64_t)nb;
    }
    if (p->i[7] < 0 || p->i[7] % ts != 0)
        return sy__op_fail(err, es, SY_E_SHAPE, SY_OP_VIEW,
                           "offset (p.i[7]) = %lld must be >= 0 and a multiple of %u", (long long)p->i[7], ts);
    o->n_dims = sy__dims_of(o->ne);

    sy_tensor *root = NULL;
    uint64_t base = 0;
    sy_status st = find_root(SY_OP_VIEW, x, &root, &base, err, es);
    if (st != SY_OK)
        return st;
    const uint64_t off = base + (uint64_t)p->i[7];
    const uint64_t span = sy_tensor_nbytes(o);
    const uint64_t have = sy_tensor_nbytes(root);
    if (off > have || span > have - off)
        return sy__op_fail(err, es, SY_E_SHAPE, SY_OP_VIEW,
                           "view of %llu bytes at offset %llu does not fit in its source of %llu bytes",
                           (unsigned long long)span, (unsigned long long)off, (unsigned long long)have);
    o->view_src = root;
    o->view_offset = off;
    return SY_OK;
}

static sy_status infer_reshape(const sy_tensor *x, const sy_op_params *p, sy_tensor *o, char *err,
                               size_t es)
{
    if (!sy_tensor_is_contiguous(x))
        return sy__op_fail(err, es, SY_E_SHAPE, SY_OP_RESHAPE,
                           "input must be contiguous (copy a permuted or strided view first)");
    int64_t n = 1;
    for (int d = 0; d < SY_MAX_DIMS; d++) {
        if (p->i[d] < 1)
            return sy__op_fail(err, es, SY_E_SHAPE, SY_OP_RESHAPE, "ne[%d] (p.i[%d]) must be >= 1, got %lld",
                               d, d, (long long)p->i[d]);
        o->ne[d] = p->i[d];
        /* Dividing first keeps the running product from overflowing. */
        if (n > 0 && o->ne[d] > sy_tensor_nelements(x) / n)
            n = -1;
        else if (n > 0)
            n *= o->ne[d];
    }
    if (n != sy_tensor_nelements(x)) {
        char a[SY__SHAPE_STR_MAX], b[SY__SHAPE_STR_MAX];
        const int64_t want[SY_MAX_DIMS] = {p->i[0], p->i[1], p->i[2], p->i[3]};
        return sy__op_fail(err, es, SY_E_SHAPE, SY_OP_RESHAPE,
                           "element count differs: input %s has %lld, new shape %s", sy__shape_str(x->ne, a),
                           (long long)sy_tensor_nelements(x), sy__shape_str(want, b));
    }
    const uint32_t bs = sy_dtype_block_size(x->dtype);
    if (o->ne[0] % bs != 0)
        return sy__op_fail(err, es, SY_E_SHAPE, SY_OP_RESHAPE,
                           "ne[0]=%lld is not a multiple of the %s block size %u", (long long)o->ne[0],
                           sy_dtype_name(x->dtype), bs);
    o->dtype = x->dtype;
    o->n_dims = sy__dims_of(o->ne);
    sy_tensor_set_contiguous_strides(o);
    return find_root(SY_OP_RESHAPE, x, &o->view_src, &o->view_offset, err, es);
}

/* PERMUTE with axes p.i[0..3]; TRANSPOSE is the permutation (1,0,2,3). */
static sy_status infer_permute(sy_op op, const sy_tensor *x, const int64_t axes[SY_MAX_DIMS],
                               sy_tensor *o, char *err, size_t es)
{
    bool seen[SY_MAX_DIMS] = {false, false, false, false};
    for (int k = 0; k < SY_MAX_DIMS; k++) {
        if (axes[k] < 0 || axes[k] >= SY_MAX_DIMS || seen[axes[k]])
            return sy__op_fail(err, es, SY_E_INVALID_ARG, op,
                               "axes (p.i[0..3]) = (%lld,%lld,%lld,%lld) are not a permutation of 0..3",
                               (long long)axes[0], (long long)axes[1], (long long)axes[2], (long long)axes[3]);
        seen[axes[k]] = true;
    }
    if (sy_dtype_is_quantized(x->dtype) && axes[0] != 0)
        return sy__op_fail(err, es, SY_E_DTYPE, op,
                           "cannot move dim 0 of a %s tensor: its blocks span dim 0", sy_dtype_name(x->dtype));
    o->dtype = x->dtype;
    for (int k = 0; k < SY_MAX_DIMS; k++) {
        o->ne[axes[k]] = x->ne[k];
        o->nb[axes[k]] = x->nb[k];
    }
    uint32_t nd = sy__dims_of(o->ne);
    o->n_dims = x->n_dims > nd && x->n_dims <= SY_MAX_DIMS ? x->n_dims : nd;
    return find_root(op, x, &o->view_src, &o->view_offset, err, es);
}

static sy_status infer_kv_write(sy_tensor *const *in, uint32_t n_in, const sy_op_params *p,
                                sy_tensor *o, char *err, size_t es)
{
    const sy_tensor *cache = in[0], *rows = in[1];
    switch (cache->dtype) {
    case SY_DTYPE_F32:
    case SY_DTYPE_F16:
    case SY_DTYPE_Q8_0:
    case SY_DTYPE_Q4_0:
        break;
    default:
        return sy__op_fail(err, es, SY_E_DTYPE, SY_OP_KV_WRITE, "cache must be f32, f16, q8_0 or q4_0, got %s",
                           sy_dtype_name(cache->dtype));
    }
    if (rows->dtype != SY_DTYPE_F32)
        return sy__op_fail(err, es, SY_E_DTYPE, SY_OP_KV_WRITE, "rows must be f32, got %s",
                           sy_dtype_name(rows->dtype));
    if (cache->ne[3] != 1 || rows->ne[3] != 1 || cache->ne[0] != rows->ne[0] ||
        cache->ne[1] != rows->ne[1]) {
        char a[SY__SHAPE_STR_MAX], b[SY__SHAPE_STR_MAX];
        return sy__op_fail(err, es, SY_E_SHAPE, SY_OP_KV_WRITE,
                           "cache %s must be [D,H,C] and rows %s [D,H,T] with the same D and H",
                           sy__shape_str(cache->ne, a), sy__shape_str(rows->ne, b));
    }
    const int64_t start = p->i[0];
    if (n_in > 2) {
        /* The start comes when the node runs: the output is the whole
         * cache, and only the rows must fit it. */
        sy_status st = sy__want_run_time_position(SY_OP_KV_WRITE, 2, in[2], start, err, es);
        if (st != SY_OK)
            return st;
        if (rows->ne[2] > cache->ne[2])
            return sy__op_fail(err, es, SY_E_SHAPE, SY_OP_KV_WRITE,
                               "writing %lld rows overflows the cache of %lld rows",
                               (long long)rows->ne[2], (long long)cache->ne[2]);
    } else if (start < 0 || start > cache->ne[2] - rows->ne[2])
        return sy__op_fail(err, es, SY_E_SHAPE, SY_OP_KV_WRITE,
                           "writing %lld rows at start %lld (p.i[0]) overflows the cache of %lld rows",
                           (long long)rows->ne[2], (long long)start, (long long)cache->ne[2]);
    o->dtype = cache->dtype;
    o->ne[0] = cache->ne[0];
    o->ne[1] = cache->ne[1];
    o->ne[2] = n_in > 2 ? cache->ne[2] : start + rows->ne[2];
    o->ne[3] = 1;
    for (int d = 0; d < SY_MAX_DIMS; d++)
        o->nb[d] = cache->nb[d];
    o->n_dims = 3;
    return find_root(SY_OP_KV_WRITE, cache, &o->view_src, &o->view_offset, err, es);
}

sy_status sy__infer_alias(sy_op op, sy_tensor *const *in, uint32_t n_in, const sy_op_params *p,
                          sy_tensor *out, char *err, size_t err_size)
{
    static const int64_t transpose_axes[SY_MAX_DIMS] = {1, 0, 2, 3};
    switch (op) {
    case SY_OP_VIEW:
        return infer_view(in[0], p, out, err, err_size);
    case SY_OP_RESHAPE:
        return infer_reshape(in[0], p, out, err, err_size);
    case SY_OP_PERMUTE:
        return infer_permute(op, in[0], p->i, out, err, err_size);
    case SY_OP_TRANSPOSE:
        return infer_permute(op, in[0], transpose_axes, out, err, err_size);
    case SY_OP_KV_WRITE:
        return infer_kv_write(in, n_in, p, out, err, err_size);
    default:
        return sy__op_fail(err, err_size, SY_E_INTERNAL, op, "is not an alias op");
    }
}
