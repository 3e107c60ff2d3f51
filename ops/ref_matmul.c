/* Reference MATMUL: out[n,m] = sum_k W[k,n] * X[k,m] for every weight
 * dtype.
 *
 * Each weight row is dequantized once (exactly, to F32) and dotted against
 * every input column, which is a row of X converted to F32 beforehand for
 * the whole batch slice; products and sums run in double.  Batch dims
 * broadcast the way grouped weights do: input batch i2 reads weight batch
 * i2 / (c2 / b2), likewise for dim 3. */
#include <stdint.h>
#include <stdlib.h>

#include "ops_internal.h"

static double dot(const float *a, const float *b, int64_t n)
{
    double s = 0.0;
    for (int64_t i = 0; i < n; i++)
        s += (double)a[i] * (double)b[i];
    return s;
}

sy_status sy__ref_matmul(const sy_node *node)
{
    const sy_tensor *w = node->inputs[0], *x = node->inputs[1];
    sy_tensor *out = node->output;
    if (out->dtype != SY_DTYPE_F32 || (x->dtype != SY_DTYPE_F32 && x->dtype != SY_DTYPE_F16))
        return SY_E_DTYPE;
    const int64_t K = w->ne[0], N = w->ne[1], M = x->ne[1];
    if ((uint64_t)M * (uint64_t)K > SIZE_MAX / sizeof(float))
        return SY_E_NO_MEMORY;

    float *wrow = malloc((size_t)K * sizeof *wrow);
    float *xs = malloc((size_t)(M * K) * sizeof *xs);
    sy_status st = SY_E_NO_MEMORY;
    if (wrow == NULL || xs == NULL)
        goto out_free;

    const int64_t r2 = x->ne[2] / w->ne[2], r3 = x->ne[3] / w->ne[3];
    st = SY_OK;
    for (int64_t i3 = 0; i3 < x->ne[3] && st == SY_OK; i3++) {
        for (int64_t i2 = 0; i2 < x->ne[2] && st == SY_OK; i2++) {
            for (int64_t m = 0; m < M && st == SY_OK; m++)
                st = sy__row_load_f32(x, m, i2, i3, xs + m * K);
            for (int64_t n = 0; n < N && st == SY_OK; n++) {
                st = sy__row_load_f32(w, n, i2 / r2, i3 / r3, wrow);
                if (st != SY_OK)
                    break;
                for (int64_t m = 0; m < M; m++)
                    sy__store_f32(out, n, m, i2, i3, (float)dot(wrow, xs + m * K, K));
            }
        }
    }

out_free:
    free(wrow);
    free(xs);
    return st;
}
