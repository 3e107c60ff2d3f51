/* ATTENTION: out[:, h, t] = softmax(q[:, h, t] . K[:, g, :] * scale) . V[:, g, :]
 * with g = h / (Hq / Hkv) (grouped-query attention), query t at position
 * n_past + t, a causal mask and an optional sliding window.  K and V are
 * F32 or F16, read in place, or Q8_0 or Q4_0 (a quantised KV cache),
 * dequantised a tile of CPU_ATT_TILE rows at a time into lane scratch and
 * then read as F32 rows: the values are exactly the reference's
 * (ops/quants.c dequantisation), only the float sums are ordered
 * differently.  Lanes take (head, token) pairs; one pair scores its whole
 * unmasked key range into lane scratch (one query against a long cache is
 * the decode case) four keys at a time (isa->dot_rows), then mixes V rows
 * into an F32 accumulator, also four at a time (isa->mix_rows). */
#include <math.h>
#include <string.h>

#include "cpu_kernels.h"

/* Rows of a quantised K or V dequantised at once: 32 rows of a 256-wide
 * head are 32 KiB of scratch, within L1/L2 while they are scored or mixed. */
#define CPU_ATT_TILE 32

typedef struct cpu_attention_ctx {
    const cpu_state *s;
    const sy_tensor *q, *k, *v, *y;
    cpu_dequant_fn k_deq, v_deq; /* NULL: F32/F16 rows read in place */
    float scale;
    int64_t n_past, window;
} cpu_attention_ctx;

/* out[j - j0] = scale * (K row j . q) for keys [j0, j1) of kv head |g|. */
static void cpu_attention_scores(const cpu_attention_ctx *c, int64_t g, int64_t j0, int64_t j1,
                                 const float *q, float *tile, float *out)
{
    const cpu_isa_table *isa = c->s->isa;
    const int64_t d = c->q->ne[0];
    if (!c->k_deq) {
        isa->dot_rows(cpu_row(c->k, g, j0, 0), c->k->nb[2], c->k->dtype == SY_DTYPE_F16, j1 - j0,
                      q, d, c->scale, out);
        return;
    }
    for (int64_t j = j0; j < j1; j += CPU_ATT_TILE) {
        const int64_t n = j1 - j < CPU_ATT_TILE ? j1 - j : CPU_ATT_TILE;
        for (int64_t r = 0; r < n; r++)
            c->k_deq(cpu_row(c->k, g, j + r, 0), tile + r * d, d);
        isa->dot_rows(tile, (size_t)d * sizeof(float), false, n, q, d, c->scale, out + (j - j0));
    }
}

/* acc[i] += sum_j p[j - j0] * V row j [i] for keys [j0, j1) of kv head |g|. */
static void cpu_attention_mix(const cpu_attention_ctx *c, int64_t g, int64_t j0, int64_t j1,
                              const float *p, float *tile, float *acc)
{
    const cpu_isa_table *isa = c->s->isa;
    const int64_t d = c->q->ne[0];
    if (!c->v_deq) {
        isa->mix_rows(acc, cpu_row(c->v, g, j0, 0), c->v->nb[2], c->v->dtype == SY_DTYPE_F16,
                      j1 - j0, p, d);
        return;
    }
    for (int64_t j = j0; j < j1; j += CPU_ATT_TILE) {
        const int64_t n = j1 - j < CPU_ATT_TILE ? j1 - j : CPU_ATT_TILE;
        for (int64_t r = 0; r < n; r++)
            c->v_deq(cpu_row(c->v, g, j + r, 0), tile + r * d, d);
        isa->mix_rows(acc, tile, (size_t)d * sizeof(float), false, n, p + (j - j0), d);
    }
}

static void cpu_attention_task(void *arg, uint32_t ith, uint32_t nth, uint32_t lane)
{
    const cpu_attention_ctx *c = arg;
    const cpu_isa_table *isa = c->s->isa;
    const int64_t d = c->q->ne[0], hq = c->q->ne[1], tokens = c->q->ne[2];
    const int64_t hkv = c->k->ne[1], keys = c->k->ne[2];
    const int64_t group = hq / hkv;
    float *scores = c->s->lanes[lane].scratch;
    float *acc = scores + keys;
    float *tile = acc + d;

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

        cpu_attention_scores(c, g, j0, j1, q, tile, scores + j0);
        float max = -INFINITY;
        for (int64_t j = j0; j < j1; j++)
            max = scores[j] > max ? scores[j] : max;
        const double sum = isa->exp_sum_f32(scores + j0, scores + j0, 1.0f, max, j1 - j0);
        memset(acc, 0, (size_t)d * sizeof(float));
        cpu_attention_mix(c, g, j0, j1, scores + j0, tile, acc);
        const float inv = (float)(1.0 / sum);
        for (int64_t i = 0; i < d; i++)
            y[i] = acc[i] * inv;
    }
}

/* True for the K/V dtypes the kernel reads: F32 and F16 in place, Q8_0 and
 * Q4_0 through the table's dequantiser, whole blocks per row. */
static bool cpu_attention_kv_ok(const cpu_state *s, const sy_tensor *t)
{
    switch (t->dtype) {
    case SY_DTYPE_F32:
    case SY_DTYPE_F16:
        return true;
    case SY_DTYPE_Q8_0:
    case SY_DTYPE_Q4_0:
        return s->isa->dequant[t->dtype] != NULL && t->ne[0] % 32 == 0;
    default:
        return false;
    }
}

sy_status cpu_kernel_attention(cpu_state *s, const sy_node *node, const char **out_why)
{
    const sy_tensor *q = node->inputs[0], *k = node->inputs[1], *v = node->inputs[2];
    const sy_tensor *y = node->output;
    const bool kv_ok = cpu_attention_kv_ok(s, k) && cpu_attention_kv_ok(s, v) &&
                       cpu_rows_dense(k) && cpu_rows_dense(v);
    if (!cpu_is_f32_rows(q) || !cpu_is_f32_rows(y) || !kv_ok) {
        *out_why = "q/out not f32 or k/v not f32/f16/q8_0/q4_0 with dense rows";
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
    if (sy_dtype_is_quantized(k->dtype))
        c.k_deq = s->isa->dequant[k->dtype];
    if (sy_dtype_is_quantized(v->dtype))
        c.v_deq = s->isa->dequant[v->dtype];
    const int64_t tile = c.k_deq || c.v_deq ? CPU_ATT_TILE * q->ne[0] : 0;
    sy_status st = cpu_scratch_reserve(s, (size_t)(k->ne[2] + q->ne[0] + tile) * sizeof(float));
    if (st != SY_OK)
        return st;
    const int64_t items = q->ne[1] * q->ne[2];
    uint32_t nth = cpu_lanes_for(s, items * k->ne[2] * q->ne[0], 16384);
    if ((int64_t)nth > items)
        nth = (uint32_t)items;
    cpu_pool_run(s->pool, cpu_attention_task, &c, nth);
    return SY_OK;
}
