/* sy_op_reference_execute(): validates a node and dispatches it to its
 * portable reference kernel; plus the strided row access every kernel
 * shares.
 *
 * The node is re-inferred before anything runs, so a kernel only ever sees
 * shapes and dtypes the catalogue accepts and an output whose dtype and
 * extents match; a malformed node is refused instead of read out of
 * bounds.  Memory sizes cannot be checked here: the caller guarantees that
 * each data pointer covers its tensor's nbytes. */
#include <string.h>

#include "ops_internal.h"

/* -------------------------------------------------------------- elements */

static float load_elem(uint32_t dtype, const uint8_t *p)
{
    switch (dtype) {
    case SY_DTYPE_F32: {
        float v;
        memcpy(&v, p, sizeof v);
        return v;
    }
    case SY_DTYPE_F16:
        return sy__fp16_to_f32((uint16_t)(p[0] | (p[1] << 8)));
    case SY_DTYPE_BF16:
        return sy__bf16_to_f32((uint16_t)(p[0] | (p[1] << 8)));
    case SY_DTYPE_I32: {
        int32_t v;
        memcpy(&v, p, sizeof v);
        return (float)v;
    }
    default:
        return 0.0f; /* block types never reach here: callers check */
    }
}

sy_status sy__row_load_f32(const sy_tensor *t, int64_t i1, int64_t i2, int64_t i3, float *dst)
{
    const uint8_t *row = sy__row_ptr(t, i1, i2, i3);
    const uint32_t ts = sy_dtype_type_size(t->dtype);
    if (!sy_dtype_is_valid(t->dtype))
        return SY_E_DTYPE;
    if (t->nb[0] == ts)
        return sy__dequantize_row((sy_dtype)t->dtype, row, dst, t->ne[0]);
    if (sy_dtype_is_quantized(t->dtype))
        return SY_E_UNSUPPORTED;
    for (int64_t i0 = 0; i0 < t->ne[0]; i0++)
        dst[i0] = load_elem(t->dtype, row + (uint64_t)i0 * t->nb[0]);
    return SY_OK;
}

sy_status sy__row_store_f32(sy_tensor *t, int64_t i1, int64_t i2, int64_t i3, const float *src)
{
    uint8_t *row = sy__row_ptr(t, i1, i2, i3);
    const uint32_t ts = sy_dtype_type_size(t->dtype);
    if (!sy_dtype_is_valid(t->dtype))
        return SY_E_DTYPE;
    if (t->nb[0] == ts)
        return sy__quantize_row((sy_dtype)t->dtype, src, row, t->ne[0]);
    if (sy_dtype_is_quantized(t->dtype))
        return SY_E_UNSUPPORTED;
    /* Strided row: convert each element through a one-element row so the
     * rounding is exactly that of the dense path. */
    for (int64_t i0 = 0; i0 < t->ne[0]; i0++) {
        uint8_t tmp[4];
        sy_status st = sy__quantize_row((sy_dtype)t->dtype, &src[i0], tmp, 1);
        if (st != SY_OK)
            return st;
        memcpy(row + (uint64_t)i0 * t->nb[0], tmp, ts);
    }
    return SY_OK;
}

int32_t sy__load_i32(const sy_tensor *t, int64_t i0, int64_t i1, int64_t i2, int64_t i3)
{
    int32_t v;
    memcpy(&v, sy__row_ptr(t, i1, i2, i3) + (uint64_t)i0 * t->nb[0], sizeof v);
    return v;
}

sy_status sy__run_time_position(const sy_tensor *t, int64_t *out)
{
    if (t->dtype != SY_DTYPE_I32 || sy_tensor_nelements(t) != 1 || !t->data)
        return SY_E_INVALID_ARG;
    *out = sy__load_i32(t, 0, 0, 0, 0);
    return SY_OK;
}

void sy__store_f32(sy_tensor *t, int64_t i0, int64_t i1, int64_t i2, int64_t i3, float v)
{
    memcpy(sy__row_ptr(t, i1, i2, i3) + (uint64_t)i0 * t->nb[0], &v, sizeof v);
}

/* -------------------------------------------------------------- dispatch */

sy_status sy_op_reference_execute(const sy_node *node)
{
    if (node == NULL || node->output == NULL)
        return SY_E_INVALID_ARG;
    if (node->op == SY_OP_NONE || node->op >= SY_OP_COUNT)
        return SY_E_UNSUPPORTED;
    /* Views compute nothing: the runtime already pointed their data at the
     * aliased bytes. */
    if (sy_op_is_view(node->op))
        return SY_OK;
    if (node->n_inputs > SY_MAX_INPUTS)
        return SY_E_INVALID_ARG;

    sy_tensor want;
    memset(&want, 0, sizeof want);
    sy_status st = sy_op_infer((sy_op)node->op, node->inputs, node->n_inputs, &node->params, &want,
                               NULL, 0);
    if (st != SY_OK)
        return st;
    const sy_tensor *out = node->output;
    if (want.dtype != out->dtype)
        return SY_E_DTYPE;
    if (memcmp(want.ne, out->ne, sizeof want.ne) != 0)
        return SY_E_SHAPE;
    /* Output rows are always produced whole, so block outputs must be
     * dense; F32/I32 outputs may be strided. */
    if (sy_dtype_is_quantized(out->dtype) && out->nb[0] != sy_dtype_type_size(out->dtype))
        return SY_E_UNSUPPORTED;
    for (uint32_t i = 0; i < node->n_inputs; i++)
        if (node->inputs[i]->data == NULL)
            return SY_E_INVALID_ARG;
    if (out->data == NULL)
        return SY_E_INVALID_ARG;

    switch ((sy_op)node->op) {
    case SY_OP_GET_ROWS:
        return sy__ref_get_rows(node);
    case SY_OP_ADD:
    case SY_OP_MUL:
        return sy__ref_binary(node);
    case SY_OP_SCALE:
    case SY_OP_SILU:
    case SY_OP_GELU:
        return sy__ref_unary(node);
    case SY_OP_RMS_NORM:
        return sy__ref_rms_norm(node);
    case SY_OP_MATMUL:
        return sy__ref_matmul(node);
    case SY_OP_ROPE:
        return sy__ref_rope(node);
    case SY_OP_SOFTMAX:
        return sy__ref_softmax(node);
    case SY_OP_ATTENTION:
        return sy__ref_attention(node);
    case SY_OP_SWIGLU:
    case SY_OP_GEGLU:
        return sy__ref_glu(node);
    case SY_OP_COPY:
        return sy__ref_copy(node);
    case SY_OP_KV_WRITE:
        return sy__ref_kv_write(node);
    case SY_OP_ARGMAX:
        return sy__ref_argmax(node);
    case SY_OP_VIEW:
    case SY_OP_RESHAPE:
    case SY_OP_PERMUTE:
    case SY_OP_TRANSPOSE:
    case SY_OP_NONE:
    case SY_OP_COUNT:
        break;
    }
    return SY_E_UNSUPPORTED;
}
