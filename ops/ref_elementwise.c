/* Reference kernels of the elementwise family: ADD, MUL (with broadcast),
 * SCALE, SILU, GELU, SWIGLU, GEGLU.
 *
 * Every kernel works a row at a time through float buffers: the whole
 * input row is read before the output row is written, so the runtime may
 * run these ops in place (output aliasing an input of the same layout). */
#include <math.h>
#include <stdlib.h>

#include "ops_internal.h"

double sy__silu(double x)
{
    return x / (1.0 + exp(-x));
}

double sy__gelu_tanh(double x)
{
    /* sqrt(2 / pi), the constant of the tanh approximation. */
    const double k = 0.79788456080286535588;
    return 0.5 * x * (1.0 + tanh(k * (x + 0.044715 * x * x * x)));
}

sy_status sy__ref_binary(const sy_node *node)
{
    const sy_tensor *a = node->inputs[0], *b = node->inputs[1];
    sy_tensor *out = node->output;
    if (a->dtype != SY_DTYPE_F32 || b->dtype != SY_DTYPE_F32 || out->dtype != SY_DTYPE_F32)
        return SY_E_DTYPE;
    float *ra = malloc((size_t)a->ne[0] * sizeof *ra);
    float *rb = malloc((size_t)b->ne[0] * sizeof *rb);
    sy_status st = SY_E_NO_MEMORY;
    if (ra == NULL || rb == NULL)
        goto out_free;

    const bool is_add = node->op == SY_OP_ADD;
    st = SY_OK;
    for (int64_t r = 0; r < sy__nrows(a) && st == SY_OK; r++) {
        int64_t i1, i2, i3;
        sy__row_index(a, r, &i1, &i2, &i3);
        st = sy__row_load_f32(a, i1, i2, i3, ra);
        if (st == SY_OK)
            st = sy__row_load_f32(b, i1 % b->ne[1], i2 % b->ne[2], i3 % b->ne[3], rb);
        if (st != SY_OK)
            break;
        for (int64_t i0 = 0; i0 < a->ne[0]; i0++) {
            const float y = rb[i0 % b->ne[0]];
            ra[i0] = is_add ? ra[i0] + y : ra[i0] * y;
        }
        st = sy__row_store_f32(out, i1, i2, i3, ra);
    }

out_free:
    free(ra);
    free(rb);
    return st;
}

sy_status sy__ref_unary(const sy_node *node)
{
    const sy_tensor *x = node->inputs[0];
    sy_tensor *out = node->output;
    if (x->dtype != SY_DTYPE_F32 || out->dtype != SY_DTYPE_F32)
        return SY_E_DTYPE;
    float *row = malloc((size_t)x->ne[0] * sizeof *row);
    if (row == NULL)
        return SY_E_NO_MEMORY;

    const float scale = node->params.f[0], bias = node->params.f[1];
    sy_status st = SY_OK;
    for (int64_t r = 0; r < sy__nrows(x) && st == SY_OK; r++) {
        int64_t i1, i2, i3;
        sy__row_index(x, r, &i1, &i2, &i3);
        st = sy__row_load_f32(x, i1, i2, i3, row);
        if (st != SY_OK)
            break;
        for (int64_t i0 = 0; i0 < x->ne[0]; i0++) {
            switch (node->op) {
            case SY_OP_SCALE:
                row[i0] = (float)((double)row[i0] * scale + bias);
                break;
            case SY_OP_SILU:
                row[i0] = (float)sy__silu(row[i0]);
                break;
            case SY_OP_GELU:
                row[i0] = (float)sy__gelu_tanh(row[i0]);
                break;
            default:
                st = SY_E_UNSUPPORTED;
                break;
            }
        }
        if (st == SY_OK)
            st = sy__row_store_f32(out, i1, i2, i3, row);
    }
    free(row);
    return st;
}

sy_status sy__ref_glu(const sy_node *node)
{
    const sy_tensor *gate = node->inputs[0], *up = node->inputs[1];
    sy_tensor *out = node->output;
    if (gate->dtype != SY_DTYPE_F32 || up->dtype != SY_DTYPE_F32 || out->dtype != SY_DTYPE_F32)
        return SY_E_DTYPE;
    if (node->op != SY_OP_SWIGLU && node->op != SY_OP_GEGLU)
        return SY_E_UNSUPPORTED;
    float *rg = malloc((size_t)gate->ne[0] * sizeof *rg);
    float *ru = malloc((size_t)up->ne[0] * sizeof *ru);
    sy_status st = SY_E_NO_MEMORY;
    if (rg == NULL || ru == NULL)
        goto out_free;

    const bool swish = node->op == SY_OP_SWIGLU;
    st = SY_OK;
    for (int64_t r = 0; r < sy__nrows(gate) && st == SY_OK; r++) {
        int64_t i1, i2, i3;
        sy__row_index(gate, r, &i1, &i2, &i3);
        st = sy__row_load_f32(gate, i1, i2, i3, rg);
        if (st == SY_OK)
            st = sy__row_load_f32(up, i1, i2, i3, ru);
        if (st != SY_OK)
            break;
        for (int64_t i0 = 0; i0 < gate->ne[0]; i0++) {
            const double g = swish ? sy__silu(rg[i0]) : sy__gelu_tanh(rg[i0]);
            rg[i0] = (float)(g * (double)ru[i0]);
        }
        st = sy__row_store_f32(out, i1, i2, i3, rg);
    }

out_free:
    free(rg);
    free(ru);
    return st;
}
