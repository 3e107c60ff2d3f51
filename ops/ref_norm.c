/* Reference RMS_NORM: each ne[0] row becomes x / sqrt(mean(x^2) + eps),
 * with the sum of squares and the scale computed in double. */
#include <math.h>
#include <stdlib.h>

#include "ops_internal.h"

sy_status sy__ref_rms_norm(const sy_node *node)
{
    const sy_tensor *x = node->inputs[0];
    sy_tensor *out = node->output;
    if (x->dtype != SY_DTYPE_F32 || out->dtype != SY_DTYPE_F32)
        return SY_E_DTYPE;
    float *row = malloc((size_t)x->ne[0] * sizeof *row);
    if (row == NULL)
        return SY_E_NO_MEMORY;

    const double eps = node->params.f[0];
    sy_status st = SY_OK;
    for (int64_t r = 0; r < sy__nrows(x) && st == SY_OK; r++) {
        int64_t i1, i2, i3;
        sy__row_index(x, r, &i1, &i2, &i3);
        st = sy__row_load_f32(x, i1, i2, i3, row);
        if (st != SY_OK)
            break;
        double ss = 0.0;
        for (int64_t i0 = 0; i0 < x->ne[0]; i0++)
            ss += (double)row[i0] * (double)row[i0];
        /* An all-zero row with eps = 0 would divide by zero; its result is
         * zero either way, so scale by zero instead of producing NaN. */
        const double ms = ss / (double)x->ne[0] + eps;
        const double scale = ms > 0.0 ? 1.0 / sqrt(ms) : 0.0;
        for (int64_t i0 = 0; i0 < x->ne[0]; i0++)
            row[i0] = (float)((double)row[i0] * scale);
        st = sy__row_store_f32(out, i1, i2, i3, row);
    }
    free(row);
    return st;
}
