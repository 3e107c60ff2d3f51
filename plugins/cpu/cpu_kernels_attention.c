/* ATTENTION: out[:, h, t] = softmax(q[:, h, t] . K[:, g, :] * scale) . V[:, g, :]
 * with g = h / (Hq / Hkv) (grouped-query attention), query t at position
 * n_past + t, a causal mask and an optional sliding window.  K and V are
 * F32 or F16 and read in place.  Lanes take (head, token) pairs; one pair
 * scores its whole unmasked key range into lane scratch (one query against
 * a long cache is the decode case) four keys at a time (isa->dot_rows),
 * then mixes V rows into an F32 accumulator, also four at a time
 * (isa->mix_rows). */
#include <math.h>
#include <string.h>

#include "cpu_kernels.h"

typedef struct cpu_attention_ctx {
    const cpu_state *s;
    const sy_tensor *q, *k, *v, *y;
    float scale;
    int64_t n_past, window;
} cpu_attention_ctx;

static void cpu_attention_task(void *arg, uint32_t ith, uint32_t nth, uint32_t lane)
{
    const cpu_attention_ctx *c = arg;
    const cpu_isa_table *isa = c->s->isa;
    const int64_t d = c->q->ne[0], hq = c->q->ne[1], tokens = c->q->ne[2];
    const int64_t hkv = c->k->ne[1], keys = c->k->ne[2];
    const int64_t group = hq / hkv;
    const bool k_f16 = c->k->dtype == SY_DTYPE_F16, v_f16 = c->v->dtype == SY_DTYPE_F16;
    float *scores = c->s->lanes[lane].scratch;
    float *acc = scores + keys;

    int64_t lo, hi;
    cpu_split(hq * tokens, ith, nth, &lo, &hi);
    for (int64_t item = lo; item < hi; item++) {
        const int64_t h = item % hq, t = item / hq, g = h / group;
        const int64_t pos = c->n_past + t;
        const int64_t j1 = pos + 1 < keys ? pos + 1 : keys;
        int64_t j0 = c->window > 0 ? pos - c->window + 1 : 0;
        if (j0 < 0)
            j0 = 0;
        const float *q = (const float *)cpu_row(c->q, h, t, 0);
        float *y = (float *)cpu_row(c->y, h, t, 0);
        if (j0 >= j1) {
            memset(y, 0, (size_t)d * sizeof(float));
            continue;
        }

        isa->dot_rows(cpu_row(c->k, g, j0, 0), c->k->nb[2], k_f16, j1 - j0, q, d, c->scale,
                      scores + j0);
        float max = -INFINITY;
        for (int64_t j = j0; j < j1; j++)
            max = scores[j] > max ? scores[j] : max;
        const double sum = isa->exp_sum_f32(scores + j0, scores + j0, 1.0f, max, j1 - j0);
        memset(acc, 0, (size_t)d * sizeof(float));
        isa->mix_rows(acc, cpu_row(c->v, g, j0, 0), c->v->nb[2], v_f16, j1 - j0, scores + j0, d);
        const float inv = (float)(1.0 / sum);
        for (int64_t i = 0; i < d; i++)
            y[i] = acc[i] * inv;
    }
}

sy_status cpu_kernel_attention(cpu_state *s, const sy_node *node, const char **out_why)
{
    const sy_tensor *q = node->inputs[0], *k = node->inputs[1], *v = node->inputs[2];
    const sy_tensor *y = node->output;
    const bool kv_ok = (k->dtype == SY_DTYPE_F32 || k->dtype == SY_DTYPE_F16) &&
                       (v->dtype == SY_DTYPE_F32 || v->dtype == SY_DTYPE_F16) &&
                       cpu_rows_dense(k) && cpu_rows_dense(v);
    if (!cpu_is_f32_rows(q) || !cpu_is_f32_rows(y) || !kv_ok) {
        *out_why = "q/out not f32 or k/v not f32/f16 with dense rows";
        return SY_E_UNSUPPORTED;
    }
    if (q->ne[3] != 1 || k->ne[3] != 1 || v->ne[3] != 1 || k->ne[0] != q->ne[0] ||
        v->ne[0] != q->ne[0] || v->ne[1] != k->ne[1] || v->ne[2] != k->ne[2] ||
        q->ne[1] % k->ne[1] != 0 || y->ne[0] != q->ne[0] || y->ne[1] != q->ne[1] ||
        y->ne[2] != q->ne[2] || node->params.i[0] < 0 || node->params.i[1] < 0) {
        *out_why = "shapes or mask parameters outside the attention rules";
        return SY_E_UNSUPPORTED;
    }
    cpu_attention_ctx c = {.s = s, .q = q, .k = k, .v = v, .y = y, .scale = node->params.f[0],
                           .n_past = node->params.i[0], .window = node->params.i[1]};
    sy_status st = cpu_scratch_reserve(s, (size_t)(k->ne[2] + q->ne[0]) * sizeof(float));
    if (st != SY_OK)
        return st;
    const int64_t items = q->ne[1] * q->ne[2];
    uint32_t nth = cpu_lanes_for(s, items * k->ne[2] * q->ne[0], 16384);
    if ((int64_t)nth > items)
        nth = (uint32_t)items;
    cpu_pool_run(s->pool, cpu_attention_task, &c, nth);
    return SY_OK;
}
