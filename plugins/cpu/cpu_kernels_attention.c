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
 * into an F32 accumulator, also four at a time (isa->mix_rows).  With a
 * quantised cache a work item is the consecutive pairs that share a kv head
 * and a token (up to CPU_ATT_HEADS query heads), so each tile is
 * dequantised once for all of them rather than once per query head.  Items
 * are claimed (cpu_pool_run_items), so lanes end within one item of each
 * other instead of one lane taking a whole extra head at decode. */
#include <math.h>
#include <string.h>

#include "cpu_kernels.h"

/* Rows of a quantised K or V dequantised at once: 32 rows of a 256-wide
 * head are 32 KiB of scratch, within L1/L2 while they are scored or mixed. */
#define CPU_ATT_TILE 32
/* Query heads of one kv head that share a dequantised tile. */
#define CPU_ATT_HEADS 8

typedef struct cpu_attention_ctx {
    const cpu_state *s;
    const sy_tensor *q, *k, *v, *y;
    cpu_dequant_fn k_deq, v_deq; /* NULL: F32/F16 rows read in place */
    float scale;
    int64_t n_past, window;
    int64_t per_item; /* query heads per work item */
} cpu_attention_ctx;

/* Rows [j, j + n) of kv head |g| of |t| as the row kernels take them: in
 * place (F32/F16), or dequantised into |tile| when |deq| is set. */
static const void *cpu_attention_rows(const sy_tensor *t, cpu_dequant_fn deq, int64_t g,
                                      int64_t j, int64_t n, float *tile, size_t *out_stride,
                                      bool *out_f16)
{
    if (!deq) {
        *out_stride = t->nb[2];
        *out_f16 = t->dtype == SY_DTYPE_F16;
        return cpu_row(t, g, j, 0);
    }
    const int64_t d = t->ne[0];
    for (int64_t r = 0; r < n; r++)
        deq(cpu_row(t, g, j + r, 0), tile + r * d, d);
    *out_stride = (size_t)d * sizeof(float);
    *out_f16 = false;
    return tile;
}

/* Query heads h0 .. h0+nh-1 (one kv head g) of token t.  |scratch| holds
 * nh score rows of K->ne[2] floats, nh accumulators of d floats and, for
 * a quantised cache, a tile of CPU_ATT_TILE rows of d floats. */
static void cpu_attention_heads(const cpu_attention_ctx *c, int64_t h0, int64_t nh, int64_t t,
                                float *scratch)
{
    const cpu_isa_table *isa = c->s->isa;
    const int64_t d = c->q->ne[0], hq = c->q->ne[1], keys = c->k->ne[2];
    const int64_t g = h0 / (hq / c->k->ne[1]);
    const int64_t pos = c->n_past + t;
    const int64_t j1 = pos + 1 < keys ? pos + 1 : keys;
    int64_t j0 = c->window > 0 ? pos - c->window + 1 : 0;
    if (j0 < 0)
        j0 = 0;
    if (j0 >= j1) {
        for (int64_t i = 0; i < nh; i++)
            memset(cpu_row(c->y, h0 + i, t, 0), 0, (size_t)d * sizeof(float));
        return;
    }
    float *scores = scratch, *acc = scores + nh * keys, *tile = acc + nh * d;
    /* In place, one call covers the whole range; a tile at a time otherwise. */
    const int64_t k_step = c->k_deq ? CPU_ATT_TILE : j1 - j0;
    const int64_t v_step = c->v_deq ? CPU_ATT_TILE : j1 - j0;
    size_t stride;
    bool f16;

    for (int64_t j = j0; j < j1; j += k_step) {
        const int64_t n = j1 - j < k_step ? j1 - j : k_step;
        const void *rows = cpu_attention_rows(c->k, c->k_deq, g, j, n, tile, &stride, &f16);
        for (int64_t i = 0; i < nh; i++)
            isa->dot_rows(rows, stride, f16, n, (const float *)cpu_row(c->q, h0 + i, t, 0), d,
                          c->scale, scores + i * keys + j);
    }
    float inv[CPU_ATT_HEADS];
    for (int64_t i = 0; i < nh; i++) {
        float *sc = scores + i * keys;
        float max = -INFINITY;
        for (int64_t j = j0; j < j1; j++)
            max = sc[j] > max ? sc[j] : max;
        inv[i] = (float)(1.0 / isa->exp_sum_f32(sc + j0, sc + j0, 1.0f, max, j1 - j0));
    }
    memset(acc, 0, (size_t)(nh * d) * sizeof(float));
    for (int64_t j = j0; j < j1; j += v_step) {
        const int64_t n = j1 - j < v_step ? j1 - j : v_step;
        const void *rows = cpu_attention_rows(c->v, c->v_deq, g, j, n, tile, &stride, &f16);
        for (int64_t i = 0; i < nh; i++)
            isa->mix_rows(acc + i * d, rows, stride, f16, n, scores + i * keys + j, d);
    }
    for (int64_t i = 0; i < nh; i++) {
        float *y = (float *)cpu_row(c->y, h0 + i, t, 0);
        for (int64_t e = 0; e < d; e++)
            y[e] = acc[i * d + e] * inv[i];
    }
}

/* One work item: up to |per_item| consecutive query heads of one kv head
 * and one token (one head when the cache is read in place). */
static void cpu_attention_item(void *arg, int64_t item, uint32_t lane)
{
    const cpu_attention_ctx *c = arg;
    const int64_t group = c->q->ne[1] / c->k->ne[1];
    const int64_t subs = (group + c->per_item - 1) / c->per_item; /* items per kv head */
    const int64_t per_token = c->k->ne[1] * subs;
    const int64_t t = item / per_token, rem = item % per_token;
    const int64_t sub = rem % subs, h = rem / subs * group + sub * c->per_item;
    const int64_t nh = group - sub * c->per_item < c->per_item ? group - sub * c->per_item
                                                                 : c->per_item;
    cpu_attention_heads(c, h, nh, t, c->s->lanes[lane].scratch);
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
    const bool quantized = c.k_deq || c.v_deq;
    const int64_t heads = quantized ? CPU_ATT_HEADS : 1;
    const int64_t tile = quantized ? CPU_ATT_TILE * q->ne[0] : 0;
    sy_status st = cpu_scratch_reserve(
        s, (size_t)(heads * (k->ne[2] + q->ne[0]) + tile) * sizeof(float));
    if (st != SY_OK)
        return st;
    const int64_t group = q->ne[1] / k->ne[1];
    c.per_item = heads < group ? heads : group;
    const int64_t items = k->ne[1] * ((group + c.per_item - 1) / c.per_item) * q->ne[2];
    uint32_t nth = cpu_lanes_for(s, q->ne[1] * q->ne[2] * k->ne[2] * q->ne[0], 16384);
    cpu_pool_run_items(s->pool, cpu_attention_item, &c, items, nth);
    return SY_OK;
}
