/* Reference ARGMAX: index of the first maximum of each ne[0] row (greedy
 * sampling).  NaN entries are skipped, since a NaN logit is no candidate;
 * a row of nothing but NaN yields index 0. */
#include <stdlib.h>
#include <string.h>

#include "ops_internal.h"

sy_status sy__ref_argmax(const sy_node *node)
{
    const sy_tensor *x = node->inputs[0];
    sy_tensor *out = node->output;
    if (x->dtype != SY_DTYPE_F32 || out->dtype != SY_DTYPE_I32)
        return SY_E_DTYPE;
    if (x->ne[0] > INT32_MAX)
        return SY_E_LIMIT;
    float *row = malloc((size_t)x->ne[0] * sizeof *row);
    if (row == NULL)
        return SY_E_NO_MEMORY;
    sy_status st = SY_OK;
    for (int64_t m = 0; m < x->ne[1] && st == SY_OK; m++) {
        st = sy__row_load_f32(x, m, 0, 0, row);
        if (st != SY_OK)
            break;
        int64_t best = -1;
        for (int64_t j = 0; j < x->ne[0]; j++)
            if (row[j] == row[j] && (best < 0 || row[j] > row[best]))
                best = j;
        const int32_t v = best < 0 ? 0 : (int32_t)best;
        memcpy((uint8_t *)out->data + (uint64_t)m * out->nb[0], &v, sizeof v);
    }
    free(row);
    return st;
}
