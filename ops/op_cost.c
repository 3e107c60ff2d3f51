/* FLOP and byte counts per node: the inputs of the roofline default of the
 * cost model (max(FLOPs / peak, bytes / bandwidth)).
 *
 * FLOPs count a multiply-add as two and every other arithmetic step,
 * exp/tanh included, as one.  The counts are deliberately simple and
 * stable, since measured profiles correct them per device:
 *   MATMUL     2*K*N*M*batch
 *   ATTENTION  4*D*T*S*Hq (QK^T and PV), softmax not counted
 *   ROPE       3 per rotated element (2 mul + 1 add), pass-through dims free
 *   RMS_NORM   3 per element (square-add, scale), SOFTMAX 4 (scale, max,
 *              exp, normalise)
 *   other compute ops one per output element (conversion for COPY,
 *   GET_ROWS and KV_WRITE; comparison for ARGMAX)
 *   view ops   nothing: they move no data.
 * Bytes are what the kernel reads plus what it writes, weights at their
 * stored (quantized) size, views at the span of their strides. */
#include "ops_internal.h"

static uint64_t bytes_of(const sy_tensor *t)
{
    return t != NULL ? sy_tensor_nbytes(t) : 0;
}

static uint64_t elems_of(const sy_tensor *t)
{
    return t != NULL ? (uint64_t)sy_tensor_nelements(t) : 0;
}

static const sy_tensor *input(const sy_node *n, uint32_t i)
{
    return i < n->n_inputs && i < SY_MAX_INPUTS ? n->inputs[i] : NULL;
}

void sy_op_cost(const sy_node *node, uint64_t *out_flops, uint64_t *out_bytes)
{
    uint64_t flops = 0, bytes = 0;
    if (node == NULL || node->output == NULL)
        goto out_store;

    const sy_tensor *out = node->output;
    const sy_tensor *a = input(node, 0), *b = input(node, 1), *c = input(node, 2);
    const uint64_t n_out = elems_of(out);

    switch ((sy_op)node->op) {
    case SY_OP_MATMUL:
        if (a == NULL || b == NULL)
            break;
        flops = 2ull * (uint64_t)a->ne[0] * (uint64_t)a->ne[1] * (uint64_t)b->ne[1] *
                (uint64_t)b->ne[2] * (uint64_t)b->ne[3];
        bytes = bytes_of(a) + bytes_of(b) + bytes_of(out);
        break;
    case SY_OP_ATTENTION:
        if (a == NULL || b == NULL)
            break;
        flops = 4ull * (uint64_t)a->ne[0] * (uint64_t)a->ne[2] * (uint64_t)b->ne[2] * (uint64_t)a->ne[1];
        bytes = bytes_of(a) + bytes_of(b) + bytes_of(c) + bytes_of(out);
        break;
    case SY_OP_ROPE:
        if (a == NULL || node->params.i[1] < 0)
            break;
        flops = 3ull * (uint64_t)node->params.i[1] * (uint64_t)(a->ne[1] * a->ne[2] * a->ne[3]);
        bytes = bytes_of(a) + bytes_of(b) + bytes_of(out);
        break;
    case SY_OP_RMS_NORM:
        flops = 3ull * n_out;
        bytes = bytes_of(a) + bytes_of(out);
        break;
    case SY_OP_SOFTMAX:
        flops = 4ull * n_out;
        bytes = bytes_of(a) + bytes_of(out);
        break;
    case SY_OP_GET_ROWS:
        /* Only the selected rows of the table are read. */
        flops = n_out;
        if (a != NULL && b != NULL)
            bytes = sy_tensor_row_size(a) * (uint64_t)b->ne[0] + bytes_of(b) + bytes_of(out);
        break;
    case SY_OP_KV_WRITE:
        /* Reads the new rows and writes only them, not the whole prefix the
         * output exposes. */
        if (a == NULL || b == NULL)
            break;
        flops = elems_of(b);
        bytes = bytes_of(b) + sy_tensor_row_size(a) * (uint64_t)(b->ne[1] * b->ne[2]);
        break;
    case SY_OP_ADD:
    case SY_OP_MUL:
    case SY_OP_SWIGLU:
    case SY_OP_GEGLU:
        flops = n_out;
        bytes = bytes_of(a) + bytes_of(b) + bytes_of(out);
        break;
    case SY_OP_SCALE:
    case SY_OP_SILU:
    case SY_OP_GELU:
    case SY_OP_COPY:
        flops = n_out;
        bytes = bytes_of(a) + bytes_of(out);
        break;
    case SY_OP_ARGMAX:
        flops = elems_of(a);
        bytes = bytes_of(a) + bytes_of(out);
        break;
    case SY_OP_VIEW:
    case SY_OP_RESHAPE:
    case SY_OP_PERMUTE:
    case SY_OP_TRANSPOSE:
    case SY_OP_NONE:
    case SY_OP_COUNT:
        break;
    }

out_store:
    if (out_flops != NULL)
        *out_flops = flops;
    if (out_bytes != NULL)
        *out_bytes = bytes;
}
