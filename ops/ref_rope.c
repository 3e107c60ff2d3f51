/* Reference ROPE on x [D,H,T] with positions [T]: rotates pairs of the
 * first n_rot dims of every head by theta_j = pos * freq_scale *
 * base^(-2j/n_rot), j = 0 .. n_rot/2 - 1.  SY_ROPE_NORMAL pairs dims
 * (2j, 2j+1) (GPT-J / LLaMA GGUF layout), SY_ROPE_NEOX pairs (j, j+n_rot/2)
 * (GPT-NeoX layout).  Dims past n_rot pass through.  Angles, cos and sin
 * are computed in double. */
#include <math.h>
#include <stdlib.h>

#include "ops_internal.h"

sy_status sy__ref_rope(const sy_node *node)
{
    const sy_tensor *x = node->inputs[0], *pos = node->inputs[1];
    sy_tensor *out = node->output;
    if (x->dtype != SY_DTYPE_F32 || pos->dtype != SY_DTYPE_I32 || out->dtype != SY_DTYPE_F32)
        return SY_E_DTYPE;
    const int64_t mode = node->params.i[0], n_rot = node->params.i[1];
    if ((mode != SY_ROPE_NORMAL && mode != SY_ROPE_NEOX) || n_rot < 2 || n_rot > x->ne[0] || n_rot % 2)
        return SY_E_INVALID_ARG;
    const double base = node->params.f[0];
    const double freq_scale = node->params.f[1] != 0.0f ? node->params.f[1] : 1.0;
    const int64_t half = n_rot / 2;

    float *row = malloc((size_t)x->ne[0] * sizeof *row);
    double *inv_freq = malloc((size_t)half * sizeof *inv_freq);
    sy_status st = SY_E_NO_MEMORY;
    if (row == NULL || inv_freq == NULL)
        goto out_free;
    for (int64_t j = 0; j < half; j++)
        inv_freq[j] = pow(base, -2.0 * (double)j / (double)n_rot);

    st = SY_OK;
    for (int64_t t = 0; t < x->ne[2] && st == SY_OK; t++) {
        const double p = (double)sy__load_i32(pos, t, 0, 0, 0) * freq_scale;
        for (int64_t h = 0; h < x->ne[1] && st == SY_OK; h++) {
            st = sy__row_load_f32(x, h, t, 0, row);
            if (st != SY_OK)
                break;
            for (int64_t j = 0; j < half; j++) {
                const int64_t a = mode == SY_ROPE_NORMAL ? 2 * j : j;
                const int64_t b = mode == SY_ROPE_NORMAL ? 2 * j + 1 : j + half;
                const double theta = p * inv_freq[j];
                const double c = cos(theta), s = sin(theta);
                const double x0 = row[a], x1 = row[b];
                row[a] = (float)(x0 * c - x1 * s);
                row[b] = (float)(x0 * s + x1 * c);
            }
            st = sy__row_store_f32(out, h, t, 0, row);
        }
    }

out_free:
    free(row);
    free(inv_freq);
    return st;
}
