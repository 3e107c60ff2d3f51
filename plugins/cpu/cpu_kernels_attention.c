/* ATTENTION: out[:, h, t] = softmax(q[:, h, t] . K[:, g, :] * scale) . V[:, g, :]
 * with g = h / (Hq / Hkv) (grouped-query attention), query t at position
 * n_past + t, a causal mask and an optional sliding window.  K and V are
 * F32 or F16, read in place, or Q8_0 or Q4_0, dequantised a tile of
 * positions at a time into lane scratch (ops/quants.c's values exactly;
 * only the float sums are ordered differently).
 *
 * The cache is [head dim, kv heads, positions]: one position's rows of
 * every kv head lie together, and the rows of one kv head are a stride
 * apart.  Memory serves a strided read of one head at the cost of all of
 * them (whole DRAM bursts and prefetched lines), so a work item walks a
 * tile of positions of every kv head at once and runs every query head of
 * every one of its tokens against it, the query heads of one kv head
 * together (isa->dot_rows and mix_rows read each row once for the group):
 * the cache is read once per work item, not once per query head.  The
 * next tile is prefetched in slices between the groups.  Each (token,
 * head) keeps a running softmax over the tiles (max, sum, accumulator,
 * rescaled when the max grows), so scores never outlive their tile.
 *
 * Work items are (block of query tokens, key chunk).  Prefill has blocks
 * enough for the lanes, and one chunk: a block's outputs are written at
 * its end.  Decode has one token, so its key range is cut into chunks,
 * two per lane; each chunk leaves its max, sum and accumulator in shared
 * scratch, and the calling lane merges them after the dispatch.  Items
 * are claimed (cpu_pool_run_items), so lanes end within one item of each
 * other. */
#include <math.h>
#include <string.h>

#include "cpu_kernels.h"

/* F32 elements of one dequantised K or V tile: 32 KiB, so a K and a V
 * tile (or as many F16 positions, 16 KiB) stay in L1/L2 while every query
 * head reads them. */
#define CPU_ATT_TILE_FLOATS 8192
/* Positions per tile at most (fewer when kv heads x head dim is large). */
#define CPU_ATT_TILE_MAX 32
/* Query tokens per work item at most: they share each tile they read. */
#define CPU_ATT_TOKENS 4
/* Items a lane claims at once at most (cpu_pool_run_items): a lane
 * slowed down by another process holds only a few from the other lanes. */
#define CPU_ATT_CLAIM 4
/* Fewest positions per key chunk worth a chunk of its own. */
#define CPU_ATT_CHUNK_MIN 128

typedef struct cpu_attention_ctx {
    const cpu_state *s;
    const sy_tensor *q, *k, *v, *y;
    cpu_dequant_fn k_deq, v_deq; /* NULL: F32 rows read in place */
    float scale;
    int64_t n_past, window;
    int64_t keys;      /* rows of K and V */
    int64_t tile;      /* positions per tile */
    int64_t per_item;  /* query tokens per work item */
    int64_t chunks;    /* key chunks per block of tokens */
    int64_t chunk_lo;  /* first position of chunk 0 */
    int64_t chunk_len; /* positions per chunk */
    /* chunks > 1: per (token, head, chunk) the max, the sum and the
     * accumulator of d floats (cpu_attention_merge reads them). */
    float *part_max, *part_sum, *part_acc;
} cpu_attention_ctx;

/* Positions [*j0, *j1) that query token |t| attends to. */
static void cpu_attention_range(const cpu_attention_ctx *c, int64_t t, int64_t *j0, int64_t *j1)
{
    const int64_t keys = c->keys, pos = c->n_past + t;
    *j1 = pos + 1 < keys ? pos + 1 : keys;
    *j0 = c->window > 0 && pos - c->window + 1 > 0 ? pos - c->window + 1 : 0;
}

/* Positions [j, j + n) of |t| (every kv head) as the row kernels take them:
 * in place (F32) or converted into |tile| ([n][kv heads][d] floats) by
 * |deq|.  Sets the stride between positions and between heads in bytes. */
static const char *cpu_attention_tile(const sy_tensor *t, cpu_dequant_fn deq, int64_t j,
                                      int64_t n, float *tile, size_t *pos_stride,
                                      size_t *head_stride, bool *f16)
{
    if (!deq) {
        *pos_stride = t->nb[2];
        *head_stride = t->nb[1];
        *f16 = t->dtype == SY_DTYPE_F16;
        return cpu_row(t, 0, j, 0);
    }
    *f16 = false;
    const int64_t d = t->ne[0], heads = t->ne[1];
    const bool dense = t->nb[1] == sy_tensor_row_size(t); /* one run per position */
    for (int64_t r = 0; r < n; r++) {
        float *dst = tile + r * heads * d;
        if (dense)
            deq(cpu_row(t, 0, j + r, 0), dst, heads * d);
        else
            for (int64_t g = 0; g < heads; g++)
                deq(cpu_row(t, g, j + r, 0), dst + g * d, d);
    }
    *pos_stride = (size_t)(heads * d) * sizeof(float);
    *head_stride = (size_t)d * sizeof(float);
    return (const char *)tile;
}

/* The next tile's bytes of K or V, asked for (prefetcht1) a slice at a
 * time between the current tile's query heads: one burst of a tile's
 * lines would stall on the core's miss buffers instead of overlapping the
 * work, and the hardware prefetcher stops at every 4 KiB page. */
typedef struct cpu_attention_ahead {
    const char *p;
    size_t bytes, slice, done;
} cpu_attention_ahead;

static void cpu_attention_ahead_init(cpu_attention_ahead *a, const sy_tensor *t, int64_t j,
                                     int64_t n, int64_t slices)
{
    *a = (cpu_attention_ahead){0};
    if (n <= 0)
        return;
    a->p = cpu_row(t, 0, j, 0);
    a->bytes = (size_t)(n - 1) * t->nb[2] + (size_t)(t->ne[1] - 1) * t->nb[1] +
               (size_t)sy_tensor_row_size(t);
    /* Whole lines, one at least (a slice of 0 would never move on). */
    a->slice = (a->bytes / (size_t)slices + 63) / 64 * 64;
    a->slice = a->slice ? a->slice : 64;
}

/* One slice of each of the next K and V tiles. */
static inline void cpu_attention_ahead_step(cpu_attention_ahead next[2])
{
    for (int i = 0; i < 2; i++) {
        cpu_attention_ahead *a = &next[i];
        const size_t end = a->done + a->slice < a->bytes ? a->done + a->slice : a->bytes;
        for (; a->done < end; a->done += 64)
            __builtin_prefetch(a->p + a->done, 0, 2);
    }
}

/* The largest of |m| and x[0 .. n): four running maxima, so that the
 * compares do not wait for each other in one chain (a tile's 32 scores
 * were 32 dependent compares a head).  The order does not change the
 * result: every chain skips a NaN, as one chain did. */
static inline float cpu_attention_max(const float *x, int64_t n, float m)
{
    float m1 = m, m2 = m, m3 = m;
    int64_t r = 0;
    for (; r + 4 <= n; r += 4) {
        m = x[r] > m ? x[r] : m;
        m1 = x[r + 1] > m1 ? x[r + 1] : m1;
        m2 = x[r + 2] > m2 ? x[r + 2] : m2;
        m3 = x[r + 3] > m3 ? x[r + 3] : m3;
    }
    for (; r < n; r++)
        m = x[r] > m ? x[r] : m;
    m = m1 > m ? m1 : m;
    m2 = m3 > m2 ? m3 : m2;
    return m2 > m ? m2 : m;
}

/* One work item: query tokens [t0, t0 + nt) against key chunk |chunk|. */
static void cpu_attention_item(const cpu_attention_ctx *c, int64_t item, uint32_t lane)
{
    const cpu_isa_table *isa = c->s->isa;
    const int64_t d = c->q->ne[0], hq = c->q->ne[1], tokens = c->q->ne[2];
    const int64_t hkv = c->k->ne[1], group = hq / hkv;
    const int64_t q_stride = (int64_t)(c->q->nb[1] / sizeof(float));
    const int64_t chunk = item % c->chunks, t0 = item / c->chunks * c->per_item;
    const int64_t nt = tokens - t0 < c->per_item ? tokens - t0 : c->per_item;
    /* Dequantised tiles only for a quantised K or V. */
    const int64_t k_floats = c->k_deq ? c->tile * hkv * d : 0;
    const int64_t v_floats = c->v_deq ? c->tile * hkv * d : 0;

    float *k_tile = c->s->lanes[lane].scratch, *v_tile = k_tile + k_floats;
    float *scores = v_tile + v_floats, *run_max = scores + group * c->tile;
    float *run_sum = run_max + nt * hq, *acc = run_sum + nt * hq;
    for (int64_t i = 0; i < nt * hq; i++)
        run_max[i] = -INFINITY, run_sum[i] = 0.0f;
    memset(acc, 0, (size_t)(nt * hq * d) * sizeof(float));

    /* The block's positions (its tokens' ranges only move right) within
     * the chunk's. */
    int64_t lo, hi, unused;
    cpu_attention_range(c, t0, &lo, &unused);
    cpu_attention_range(c, t0 + nt - 1, &unused, &hi);
    const int64_t chunk_lo = c->chunk_lo + chunk * c->chunk_len;
    lo = lo > chunk_lo ? lo : chunk_lo;
    hi = hi < chunk_lo + c->chunk_len ? hi : chunk_lo + c->chunk_len;

    for (int64_t j = lo; j < hi; j += c->tile) {
        const int64_t n = hi - j < c->tile ? hi - j : c->tile;
        cpu_attention_ahead next[2]; /* K, V */
        const int64_t next_n = hi - j - n < c->tile ? hi - j - n : c->tile;
        cpu_attention_ahead_init(&next[0], c->k, j + n, next_n, nt * (hq + 2 * hkv));
        cpu_attention_ahead_init(&next[1], c->v, j + n, next_n, nt * (hq + 2 * hkv));
        size_t kps, khs, vps, vhs;
        bool kf16, vf16;
        const char *kr = cpu_attention_tile(c->k, c->k_deq, j, n, k_tile, &kps, &khs, &kf16);
        const char *vr = cpu_attention_tile(c->v, c->v_deq, j, n, v_tile, &vps, &vhs, &vf16);
        for (int64_t i = 0; i < nt; i++) {
            int64_t a, b;
            cpu_attention_range(c, t0 + i, &a, &b);
            a = a > j ? a : j;
            b = b < j + n ? b : j + n;
            if (a >= b)
                continue;
            for (int64_t g = 0; g < hkv; g++) {
                /* The group's query heads h0 .. h0 + group - 1 together. */
                const int64_t h0 = g * group, st0 = i * hq + h0;
                cpu_attention_ahead_step(next);
                isa->dot_rows(kr + (a - j) * kps + g * khs, kps, kf16, b - a,
                              (const float *)cpu_row(c->q, h0, t0 + i, 0), q_stride, group, d,
                              c->scale, scores, c->tile);
                for (int64_t e = 0; e < group; e++) {
                    cpu_attention_ahead_step(next);
                    float *sc = scores + e * c->tile;
                    const float m = cpu_attention_max(sc, b - a, run_max[st0 + e]);
                    if (m > run_max[st0 + e]) {
                        /* The running max grew: what was summed so far
                         * shrinks by e^(old - new) (0 for the first tile:
                         * -inf). */
                        const float f = expf(run_max[st0 + e] - m);
                        isa->scale_f32(acc + (st0 + e) * d, acc + (st0 + e) * d, f, 0.0f, d);
                        run_sum[st0 + e] *= f;
                        run_max[st0 + e] = m;
                    }
                    run_sum[st0 + e] += isa->exp_sum_f32(sc, sc, 1.0f, m, b - a);
                }
                cpu_attention_ahead_step(next);
                isa->mix_rows(acc + st0 * d, d, vr + (a - j) * vps + g * vhs, vps, vf16, b - a,
                              scores, c->tile, group, d);
            }
        }
    }

    for (int64_t i = 0; i < nt; i++)
        for (int64_t h = 0; h < hq; h++) {
            const int64_t st = i * hq + h;
            if (c->chunks > 1) {
                const int64_t p = ((t0 + i) * hq + h) * c->chunks + chunk;
                c->part_max[p] = run_max[st];
                c->part_sum[p] = run_sum[st];
                memcpy(c->part_acc + p * d, acc + st * d, (size_t)d * sizeof(float));
                continue;
            }
            float *y = (float *)cpu_row(c->y, h, t0 + i, 0);
            const float inv = run_sum[st] > 0.0f ? 1.0f / run_sum[st] : 0.0f;
            for (int64_t e = 0; e < d; e++)
                y[e] = acc[st * d + e] * inv;
        }
}

static void cpu_attention_items(void *arg, int64_t first, int64_t end, uint32_t lane)
{
    for (int64_t item = first; item < end; item++)
        cpu_attention_item(arg, item, lane);
}

/* Merges the chunks' partial softmaxes of every (token, head) into out. */
static void cpu_attention_merge(const cpu_attention_ctx *c)
{
    const int64_t d = c->q->ne[0], hq = c->q->ne[1], tokens = c->q->ne[2];
    for (int64_t t = 0; t < tokens; t++)
        for (int64_t h = 0; h < hq; h++) {
            const int64_t p0 = (t * hq + h) * c->chunks;
            float *y = (float *)cpu_row(c->y, h, t, 0);
            float m = -INFINITY;
            for (int64_t ch = 0; ch < c->chunks; ch++)
                m = c->part_max[p0 + ch] > m ? c->part_max[p0 + ch] : m;
            memset(y, 0, (size_t)d * sizeof(float));
            if (m == -INFINITY)
                continue; /* nothing unmasked */
            float sum = 0.0f;
            for (int64_t ch = 0; ch < c->chunks; ch++) {
                if (c->part_sum[p0 + ch] == 0.0f)
                    continue;
                const float f = expf(c->part_max[p0 + ch] - m);
                sum += f * c->part_sum[p0 + ch];
                c->s->isa->axpy_f32(y, f, c->part_acc + (p0 + ch) * d, d);
            }
            c->s->isa->scale_f32(y, y, 1.0f / sum, 0.0f, d);
        }
}

/* True for the K/V dtypes the kernel reads: F32 in place, F16, Q8_0 and
 * Q4_0 through the table's converter, whole blocks per row. */
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

sy_status cpu_attention_prepare(cpu_state *s, const sy_node *node, cpu_attention_kept *out,
                                const char **out_why)
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
        k->ne[1] < 1 || q->ne[1] % k->ne[1] != 0 || y->ne[0] != q->ne[0] || y->ne[1] != q->ne[1] ||
        y->ne[2] != q->ne[2] || node->params.i[0] < 0 || node->params.i[1] < 0) {
        *out_why = "shapes or mask parameters outside the attention rules";
        return SY_E_UNSUPPORTED;
    }
    const int32_t *at = cpu_kv_run_time_position(node);
    if (sy_op_has_run_time_position(node) && !at) {
        *out_why = "the run-time position is not an i32 in host memory";
        return SY_E_UNSUPPORTED;
    }
    *out = (cpu_attention_kept){
        .q = q, .k = k, .v = v, .y = y, .n_past_at = at, .n_past = node->params.i[0],
        .window = node->params.i[1], .keys = k->ne[2], .d = q->ne[0], .hq = q->ne[1],
        .hkv = k->ne[1], .tokens = q->ne[2], .scale = node->params.f[0],
    };
    if (sy_dtype_is_quantized(k->dtype))
        out->k_deq = s->isa->dequant[k->dtype];
    if (sy_dtype_is_quantized(v->dtype))
        out->v_deq = s->isa->dequant[v->dtype];
    if (out->d > 0) {
        const int64_t tile = CPU_ATT_TILE_FLOATS / (out->hkv * out->d);
        out->tile = tile < 1 ? 1 : tile > CPU_ATT_TILE_MAX ? CPU_ATT_TILE_MAX : tile;
    }
    return SY_OK;
}

sy_status cpu_attention_run(cpu_state *s, const cpu_attention_kept *a, const char **out_why)
{
    const int64_t d = a->d, hq = a->hq, tokens = a->tokens, hkv = a->hkv;
    cpu_attention_ctx c = {.s = s, .q = a->q, .k = a->k, .v = a->v, .y = a->y,
                           .k_deq = a->k_deq, .v_deq = a->v_deq, .scale = a->scale,
                           .n_past = a->n_past_at ? *a->n_past_at : a->n_past,
                           .window = a->window, .keys = a->keys, .tile = a->tile};
    if (a->n_past_at && (c.n_past < 0 || c.n_past > a->keys - tokens)) {
        *out_why = "the run-time n_past puts the queries past the cache's rows";
        return SY_E_INVALID_ARG;
    }
    if (tokens == 0 || d == 0 || hq == 0)
        return SY_OK; /* nothing to write */

    /* The positions any token attends to: tokens' ranges only move right. */
    int64_t lo, hi, unused;
    cpu_attention_range(&c, 0, &lo, &unused);
    cpu_attention_range(&c, tokens - 1, &unused, &hi);
    const int64_t span = hi > lo ? hi - lo : 0;
    const uint32_t nth = cpu_lanes_for(s, hq * tokens * (span > 1 ? span : 1) * d, 16384);

    /* Blocks of tokens, four lanes' worth of them at least; key chunks when
     * the blocks are too few for the lanes (decode). */
    c.per_item = tokens / (4 * (int64_t)nth);
    c.per_item = c.per_item < 1 ? 1 : c.per_item > CPU_ATT_TOKENS ? CPU_ATT_TOKENS : c.per_item;
    const int64_t blocks = (tokens + c.per_item - 1) / c.per_item;
    c.chunks = 1;
    if (nth > 1 && blocks < 2 * (int64_t)nth) {
        const int64_t want = (2 * (int64_t)nth + blocks - 1) / blocks;
        const int64_t most = span / CPU_ATT_CHUNK_MIN;
        c.chunks = want < most ? want : most > 1 ? most : 1;
    }
    c.chunk_lo = lo;
    c.chunk_len = c.chunks > 1 ? ((span + c.chunks - 1) / c.chunks + c.tile - 1) / c.tile * c.tile
                               : (span > 1 ? span : 1);

    const int64_t tile_floats = ((c.k_deq != NULL) + (c.v_deq != NULL)) * c.tile * hkv * d;
    sy_status st = cpu_scratch_reserve(
        s, (size_t)(tile_floats + hq / hkv * c.tile + c.per_item * hq * (d + 2)) *
               sizeof(float));
    if (st == SY_OK && c.chunks > 1) {
        const int64_t parts = tokens * hq * c.chunks;
        st = cpu_shared_reserve(s, (size_t)(parts * (d + 2)) * sizeof(float));
        c.part_max = s->shared;
        c.part_sum = c.part_max + parts;
        c.part_acc = c.part_sum + parts;
    }
    if (st != SY_OK)
        return st;
    const int64_t items = blocks * c.chunks;
    cpu_pool_run_items(s->pool, cpu_attention_items, &c, items, CPU_ATT_CLAIM,
                       items < (int64_t)nth ? (uint32_t)items : nth);
    if (c.chunks > 1)
        cpu_attention_merge(&c);
    return SY_OK;
}

sy_status cpu_kernel_attention(cpu_state *s, const sy_node *node, const char **out_why)
{
    cpu_attention_kept a;
    sy_status st = cpu_attention_prepare(s, node, &a, out_why);
    return st == SY_OK ? cpu_attention_run(s, &a, out_why) : st;
}
