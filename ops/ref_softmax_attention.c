/* Reference SOFTMAX and ATTENTION, which share one masking rule: for a
 * query at position q_pos (n_past + row), key j is masked when causal and
 * j > q_pos, or when window > 0 and q_pos - j >= window.
 *
 * Scores, exponentials and sums run in double.  A row whose keys are all
 * masked has no distribution; it produces zeros (rather than NaN from
 * 0/0) so that one degenerate row cannot poison later layers. */
#include <math.h>
#include <stdlib.h>

#include "ops_internal.h"

static bool is_masked(int64_t j, int64_t q_pos, bool causal, int64_t window)
{
    if (causal && j > q_pos)
        return true;
    return window > 0 && q_pos - j >= window;
}

/* Turns scores[0..n) into probabilities in place; masked entries hold
 * -inf and become exactly 0.  A NaN score is left to propagate: it means
 * the inputs were broken, and hiding that would mislead a comparison. */
static void softmax_inplace(double *scores, int64_t n)
{
    double max = -INFINITY;
    for (int64_t j = 0; j < n; j++)
        if (scores[j] > max)
            max = scores[j];
    if (max == -INFINITY) {
        /* All masked: no distribution. */
        for (int64_t j = 0; j < n; j++)
            scores[j] = 0.0;
        return;
    }
    double sum = 0.0;
    for (int64_t j = 0; j < n; j++) {
        scores[j] = exp(scores[j] - max);
        sum += scores[j];
    }
    for (int64_t j = 0; j < n; j++)
        scores[j] /= sum;
}

sy_status sy__ref_softmax(const sy_node *node)
{
    const sy_tensor *x = node->inputs[0];
    sy_tensor *out = node->output;
    if (x->dtype != SY_DTYPE_F32 || out->dtype != SY_DTYPE_F32)
        return SY_E_DTYPE;
    const double scale = node->params.f[0];
    const bool causal = node->params.i[0] != 0;
    const int64_t n_past = node->params.i[1], window = node->params.i[2];
    const int64_t N = x->ne[0];

    float *row = malloc((size_t)N * sizeof *row);
    double *p = malloc((size_t)N * sizeof *p);
    sy_status st = SY_E_NO_MEMORY;
    if (row == NULL || p == NULL)
        goto out_free;

    st = SY_OK;
    for (int64_t r = 0; r < sy__nrows(x) && st == SY_OK; r++) {
        int64_t i1, i2, i3;
        sy__row_index(x, r, &i1, &i2, &i3);
        st = sy__row_load_f32(x, i1, i2, i3, row);
        if (st != SY_OK)
            break;
        /* Row m of every matrix is the query at position n_past + m. */
        const int64_t q_pos = n_past + i1;
        for (int64_t j = 0; j < N; j++)
            p[j] = is_masked(j, q_pos, causal, window) ? -INFINITY : (double)row[j] * scale;
        softmax_inplace(p, N);
        for (int64_t j = 0; j < N; j++)
            row[j] = (float)p[j];
        st = sy__row_store_f32(out, i1, i2, i3, row);
    }

out_free:
    free(row);
    free(p);
    return st;
}

/* Loads the first |n| rows of kv head |h| of |t| ([D,Hkv,S]) as F32 into
 * dst[n][D]. */
static sy_status load_head(const sy_tensor *t, int64_t h, int64_t n, float *dst)
{
    for (int64_t s = 0; s < n; s++) {
        sy_status st = sy__row_load_f32(t, h, s, 0, dst + s * t->ne[0]);
        if (st != SY_OK)
            return st;
    }
    return SY_OK;
}

sy_status sy__ref_attention(const sy_node *node)
{
    const sy_tensor *q = node->inputs[0], *k = node->inputs[1], *v = node->inputs[2];
    sy_tensor *out = node->output;
    if (q->dtype != SY_DTYPE_F32 || out->dtype != SY_DTYPE_F32)
        return SY_E_DTYPE;
    /* Quantised caches (Q8_0, Q4_0) are dequantised row by row on load,
     * with the same block arithmetic as every other reader. */
    for (int i = 1; i < 3; i++) {
        const uint32_t t = node->inputs[i]->dtype;
        if (t != SY_DTYPE_F32 && t != SY_DTYPE_F16 && t != SY_DTYPE_Q8_0 && t != SY_DTYPE_Q4_0)
            return SY_E_DTYPE;
    }
    const int64_t D = q->ne[0], Hq = q->ne[1], T = q->ne[2];
    const int64_t Hkv = k->ne[1];
    const int64_t group = Hq / Hkv;
    const double scale = node->params.f[0];
    int64_t n_past = node->params.i[0], S = k->ne[2];
    const int64_t window = node->params.i[1];
    if (node->n_inputs > 3) {
        /* n_past at run time: rows from n_past + T on are never read. */
        if (sy__run_time_position(node->inputs[3], &n_past) != SY_OK || n_past < 0 ||
            n_past + T > S)
            return SY_E_INVALID_ARG;
        S = n_past + T;
    }

    float *kh = malloc((size_t)(S * D) * sizeof *kh);
    float *vh = malloc((size_t)(S * D) * sizeof *vh);
    float *qrow = malloc((size_t)D * sizeof *qrow);
    double *p = malloc((size_t)S * sizeof *p);
    double *acc = malloc((size_t)D * sizeof *acc);
    float *orow = malloc((size_t)D * sizeof *orow);
    sy_status st = SY_E_NO_MEMORY;
    if (kh == NULL || vh == NULL || qrow == NULL || p == NULL || acc == NULL || orow == NULL)
        goto out_free;

    st = SY_OK;
    for (int64_t hk = 0; hk < Hkv && st == SY_OK; hk++) {
        st = load_head(k, hk, S, kh);
        if (st == SY_OK)
            st = load_head(v, hk, S, vh);
        /* GQA: query heads hk*group .. hk*group+group-1 share kv head hk. */
        for (int64_t h = hk * group; h < (hk + 1) * group && st == SY_OK; h++) {
            for (int64_t t = 0; t < T && st == SY_OK; t++) {
                st = sy__row_load_f32(q, h, t, 0, qrow);
                if (st != SY_OK)
                    break;
                const int64_t q_pos = n_past + t;
                for (int64_t s = 0; s < S; s++) {
                    if (is_masked(s, q_pos, true, window)) {
                        p[s] = -INFINITY;
                        continue;
                    }
                    double d = 0.0;
                    for (int64_t i = 0; i < D; i++)
                        d += (double)qrow[i] * (double)kh[s * D + i];
                    p[s] = d * scale;
                }
                softmax_inplace(p, S);
                for (int64_t i = 0; i < D; i++)
                    acc[i] = 0.0;
                for (int64_t s = 0; s < S; s++) {
                    /* Masked rows of a KV cache may hold stale or
                     * uninitialised values: never touch them. */
                    if (p[s] == 0.0)
                        continue;
                    for (int64_t i = 0; i < D; i++)
                        acc[i] += p[s] * (double)vh[s * D + i];
                }
                for (int64_t i = 0; i < D; i++)
                    orow[i] = (float)acc[i];
                st = sy__row_store_f32(out, h, t, 0, orow);
            }
        }
    }

out_free:
    free(kh);
    free(vh);
    free(qrow);
    free(p);
    free(acc);
    free(orow);
    return st;
}
