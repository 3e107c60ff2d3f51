/* Predicting node and transfer times from profiles, or from the roofline
 * default where a device has no measurement for an op. */
#include <math.h>
#include <stdlib.h>
#include <string.h>

#include "cost_model.h"

/* Reference rates of the interpolation axis; only their ratio matters. */
#define WORK_REF_FLOPS 1e11
#define WORK_REF_BYTES 1e10

double sy__cost_work(double flops, double bytes)
{
    double a = flops / WORK_REF_FLOPS, b = bytes / WORK_REF_BYTES;
    return a > b ? a : b;
}

static double pick(double profile_value, double desc_value, double fallback)
{
    if (!isnan(profile_value) && profile_value > 0)
        return profile_value;
    if (desc_value > 0)
        return desc_value;
    return fallback;
}

void sy__device_model_init(sy__device_model *m, uint32_t rt_index, const sy_device_desc *desc,
                           const sy__profile *profile)
{
    memset(m, 0, sizeof *m);
    m->rt_index = rt_index;
    m->desc = *desc;
    m->profile = profile;
    double flops = SY__DEFAULT_CPU_FLOPS, bw = SY__DEFAULT_CPU_BANDWIDTH;
    double launch = SY__DEFAULT_CPU_LAUNCH_S;
    double active_w = SY__DEFAULT_CPU_ACTIVE_W, idle_w = SY__DEFAULT_CPU_IDLE_W;
    if (desc->kind == SY_DEVICE_GPU) {
        flops = SY__DEFAULT_GPU_FLOPS;
        bw = SY__DEFAULT_GPU_BANDWIDTH;
        launch = SY__DEFAULT_GPU_LAUNCH_S;
        active_w = SY__DEFAULT_GPU_ACTIVE_W;
        idle_w = SY__DEFAULT_GPU_IDLE_W;
    } else if (desc->kind == SY_DEVICE_NPU) {
        flops = SY__DEFAULT_NPU_FLOPS;
        bw = SY__DEFAULT_NPU_BANDWIDTH;
        launch = SY__DEFAULT_NPU_LAUNCH_S;
        active_w = SY__DEFAULT_NPU_ACTIVE_W;
        idle_w = SY__DEFAULT_NPU_IDLE_W;
    }
    m->peak_flops = pick(profile ? profile->peak_flops : NAN, desc->peak_flops, flops);
    m->peak_bandwidth = pick(profile ? profile->peak_bandwidth : NAN, desc->peak_bandwidth, bw);
    m->launch_s =
        profile && !isnan(profile->launch_overhead_s) ? profile->launch_overhead_s : launch;
    m->active_w = profile && !isnan(profile->active_w) ? profile->active_w : active_w;
    m->idle_w = profile && !isnan(profile->idle_w) ? profile->idle_w : idle_w;
    m->power_measured = profile && !isnan(profile->active_w) && !isnan(profile->idle_w);
    m->segment_s = profile && profile->launch_sync_s > 0 ? profile->launch_sync_s : 0.0;
    if (!profile)
        return;
    /* Most specific entry wins; among equals the later one (a profile
     * refining itself). */
    for (uint32_t i = 0; i < profile->n_ops; i++) {
        const sy__op_entry *e = &profile->ops[i];
        for (uint32_t op = 1; op < SY_OP_COUNT; op++) {
            if (e->op != op && e->op != SY_OP_COUNT)
                continue;
            for (uint32_t t = 0; t < SY_DTYPE_COUNT; t++) {
                if (e->dtype >= 0 && (uint32_t)e->dtype != t)
                    continue;
                int rank_new = (e->op == op ? 2 : 0) + (e->dtype >= 0 ? 1 : 0);
                const sy__op_entry *old = m->entry[op][t];
                int rank_old = old ? (old->op == op ? 2 : 0) + (old->dtype >= 0 ? 1 : 0) : -1;
                if (e->has_time && rank_new >= rank_old)
                    m->entry[op][t] = e;
                old = m->power[op][t];
                rank_old = old ? (old->op == op ? 2 : 0) + (old->dtype >= 0 ? 1 : 0) : -1;
                if (!isnan(e->active_w) && rank_new >= rank_old)
                    m->power[op][t] = e;
            }
        }
    }
}

static double fit_time(const sy__op_entry *e, double flops, double bytes)
{
    return e->overhead_s + e->s_per_flop * flops + e->s_per_byte * bytes;
}

/* Appends "AxBxC" (dims of |t| up to its last one above 1, at least one)
 * at out[*used]. */
static void label_dims(const sy_tensor *t, uint32_t n_max, char *out, size_t size, size_t *used)
{
    uint32_t n = 1;
    for (uint32_t d = 1; d < 4 && d < n_max; d++)
        if (t->ne[d] != 1)
            n = d + 1;
    for (uint32_t d = 0; d < n && *used < size; d++) {
        int w = snprintf(out + *used, size - *used, "%s%lld", d ? "x" : "", (long long)t->ne[d]);
        *used = w > 0 ? *used + (size_t)w : size;
    }
}

void sy__cost_shape_label(const sy_node *node, char *out, size_t size)
{
    size_t used = 0;
    out[0] = '\0';
    for (uint32_t k = 0; k < node->n_inputs && k < SY_MAX_INPUTS && used < size; k++) {
        const sy_tensor *t = node->inputs[k];
        if (!t)
            break;
        if (k > 0) {
            int w = snprintf(out + used, size - used, " %s:", sy_dtype_name(t->dtype));
            used = w > 0 ? used + (size_t)w : size;
        }
        label_dims(t, 4, out, size, &used);
    }
    if (used >= size && size > 0)
        out[size - 1] = '\0';
}

void sy__cost_shape_group(const sy_node *node, char *out, size_t size)
{
    size_t used = 0;
    out[0] = '\0';
    const sy_tensor *a = node->n_inputs > 0 ? node->inputs[0] : NULL;
    if (!a)
        return;
    /* What stays when only tokens or context change: weights whole; the
     * head size and head count of per-head ops; else the row length. */
    uint32_t keep = 1;
    if (node->op == SY_OP_MATMUL || node->op == SY_OP_GET_ROWS)
        keep = 4;
    else if (node->op == SY_OP_ATTENTION || node->op == SY_OP_ROPE || node->op == SY_OP_KV_WRITE)
        keep = 2;
    label_dims(a, keep, out, size, &used);
    /* Attention and KV writes of one token (decode) apart from those of
     * many: decode grows with the context at a fixed token, prefill with
     * the tokens, and on one work axis their points interleave (PoCL:
     * decode over 301 rows read 29% over the line between 129 and 513,
     * bent by prefill points of 16 and 24 tokens in between). */
    const sy_tensor *tok = node->op == SY_OP_KV_WRITE && node->n_inputs > 1 ? node->inputs[1] : a;
    if ((node->op == SY_OP_ATTENTION || node->op == SY_OP_KV_WRITE) && tok && tok->ne[2] == 1 &&
        tok->ne[3] == 1 && used < size) {
        int w = snprintf(out + used, size - used, " t1");
        used = w > 0 ? used + (size_t)w : size;
    }
    if (used >= size && size > 0)
        out[size - 1] = '\0';
}

static double log_interp(const sy__cost_point *a, const sy__cost_point *b, double w)
{
    if (b->work == a->work || w <= a->work)
        return a->seconds;
    double f = log(w / a->work) / log(b->work / a->work);
    return exp(log(a->seconds) + f * (log(b->seconds) - log(a->seconds)));
}

/* Time of work |w| among the points of one group, |pt|[0..n) in
 * ascending work.  Within a group only tokens or context change, and
 * time grows about linearly with them (a fixed part plus a part per token
 * or per cached row), so between two points it is interpolated linearly
 * and past the last two it follows their line.  Below the smallest point
 * the line is floored by proportional scaling, and a lone point scales as
 * the entry's fitted model does (or proportionally without one). */
static double group_time(const sy__op_entry *e, const sy__cost_point *const *pt, uint32_t n,
                         double flops, double bytes, double w)
{
    if (n == 1) {
        const sy__cost_point *p = pt[0];
        double at = e->has_fit ? fit_time(e, p->flops, p->bytes) : 0;
        if (at > 0)
            return p->seconds * fit_time(e, flops, bytes) / at;
        return w > p->work ? p->seconds * (w / p->work) : p->seconds;
    }
    uint32_t k = 0; /* the pair (k, k + 1) around w, or the nearest pair */
    while (k + 2 < n && pt[k + 1]->work < w)
        k++;
    const sy__cost_point *a = pt[k], *b = pt[k + 1];
    if (b->work <= a->work)
        return w <= a->work ? a->seconds : b->seconds;
    double slope = (b->seconds - a->seconds) / (b->work - a->work);
    if (w > b->work && slope < 0)
        slope = 0;
    double t = a->seconds + slope * (w - a->work);
    if (w < pt[0]->work) {
        double floor = pt[0]->seconds * (w / pt[0]->work);
        t = t > floor ? t : floor;
    }
    return t;
}

/* ------------------------------------------------------------ token tiles */

/* |T| rounded up to a whole tile of |e| when |e| tiles it, else |T|. */
static int64_t tile_tokens(const sy__op_entry *e, int64_t T)
{
    if (!e->token_tile || T < (int64_t)e->token_tile_from)
        return T;
    return (T + e->token_tile - 1) / e->token_tile * e->token_tile;
}

/* The tokens (columns) of a matmul point from its label: the second
 * dimension of its second input ("576x1536 f32:576x32": 32; "... f32:576":
 * 1), 0 when the label says nothing. */
static int64_t label_tokens(const char *shape)
{
    const char *c = strchr(shape, ':');
    if (!c)
        return 0;
    char *end = NULL;
    long long k = strtoll(c + 1, &end, 10);
    if (end == c + 1 || k <= 0)
        return 0;
    if (*end != 'x')
        return *end == '\0' || *end == ' ' ? 1 : 0;
    long long t = strtoll(end + 1, &end, 10);
    return t > 0 ? t : 0;
}

/* A copy of matmul |node| with |T| tokens: its own tensors (stored in
 * |x| and |y|) and counts. */
typedef struct tiled_node {
    sy_node node;
    sy_tensor x, y;
    double flops, bytes;
} tiled_node;

static void tiled_node_init(tiled_node *t, const sy_node *node, int64_t T)
{
    t->node = *node;
    t->x = *node->inputs[1];
    t->y = *node->output;
    sy_tensor *v[2] = {&t->x, &t->y};
    for (int i = 0; i < 2; i++) {
        v[i]->ne[1] = T;
        v[i]->nb[2] = v[i]->nb[1] * (uint64_t)T;
        v[i]->nb[3] = v[i]->nb[2] * (uint64_t)v[i]->ne[2];
    }
    t->node.inputs[1] = &t->x;
    t->node.output = &t->y;
    uint64_t flops = 0, bytes = 0;
    sy_op_cost(&t->node, &flops, &bytes);
    t->flops = (double)flops;
    t->bytes = (double)bytes;
}

static int point_ptr_cmp(const void *a, const void *b)
{
    double x = (*(const sy__cost_point *const *)a)->work;
    double y = (*(const sy__cost_point *const *)b)->work;
    return x < y ? -1 : x > y;
}

/* Time of matmul |node| among the points |pt|[0..n) of its group when
 * |e| is tiled: the node and every point move to their token counts
 * rounded up to whole tiles (a point of 8 tokens under tiles of 16 from 8
 * on stands for 16, where it is measured as cheap as 8 would be), and the
 * line is drawn through those.  Of points landing on one count the one
 * measured nearest it is kept.  *out_ok is false when a point's label
 * gives no token count (then nothing is predicted here). */
static double tiled_group_time(const sy__op_entry *e, const sy_node *node,
                               const sy__cost_point *const *pt, uint32_t n, bool *out_ok)
{
    enum { MAX = 64 };
    sy__cost_point moved[MAX];
    const sy__cost_point *sel[MAX];
    int64_t measured[MAX];
    uint32_t m = 0;
    *out_ok = false;
    for (uint32_t i = 0; i < n && i < MAX; i++) {
        int64_t T = label_tokens(pt[i]->shape);
        if (T <= 0)
            return 0.0;
        int64_t E = tile_tokens(e, T);
        tiled_node tn;
        tiled_node_init(&tn, node, E);
        double w = sy__cost_work(tn.flops, tn.bytes);
        uint32_t k = 0;
        while (k < m && moved[k].work != w)
            k++;
        if (k < m && E - T >= E - measured[k])
            continue; /* one measured nearer the tile is there already */
        moved[k] = *pt[i];
        moved[k].flops = tn.flops;
        moved[k].bytes = tn.bytes;
        moved[k].work = w;
        measured[k] = T;
        if (k == m)
            sel[m++] = &moved[k];
    }
    qsort(sel, m, sizeof *sel, point_ptr_cmp);
    tiled_node q;
    tiled_node_init(&q, node, tile_tokens(e, node->inputs[1]->ne[1]));
    *out_ok = true;
    return group_time(e, sel, m, q.flops, q.bytes, sy__cost_work(q.flops, q.bytes));
}

/* Whether |e| tiles |node|'s tokens: a matmul with a tiled entry. */
static bool is_tiled(const sy__op_entry *e, const sy_node *node)
{
    return e->token_tile && node->op == SY_OP_MATMUL && node->n_inputs >= 2 && node->inputs[1] &&
           node->output;
}

/* Predicted seconds of |node| from entry |e|, most specific first: a
 * point measured on the node's own shape class; else interpolation
 * among the points of its group (the same weights, or heads, or row
 * length: only tokens or context differ); else among all of the entry's
 * points; else the fitted model alone. */
static double entry_time(const sy__op_entry *e, const sy_node *node, double flops, double bytes)
{
    const bool tiled = is_tiled(e, node);
    if (e->n_points == 0 && tiled) {
        tiled_node q;
        tiled_node_init(&q, node, tile_tokens(e, node->inputs[1]->ne[1]));
        return fit_time(e, q.flops, q.bytes);
    }
    if (e->n_points == 0)
        return fit_time(e, flops, bytes);
    char label[SY__COST_SHAPE_MAX], group[SY__COST_GROUP_MAX];
    sy__cost_shape_label(node, label, sizeof label);
    for (uint32_t i = 0; i < e->n_points; i++)
        if (strcmp(e->points[i].shape, label) == 0)
            return e->points[i].seconds;
    double w = sy__cost_work(flops, bytes);
    const sy__cost_point *sel[64];
    uint32_t n = 0;
    sy__cost_shape_group(node, group, sizeof group);
    for (uint32_t i = 0; i < e->n_points && n < 64; i++)
        if (e->points[i].group[0] && strcmp(e->points[i].group, group) == 0)
            sel[n++] = &e->points[i];
    bool ok = false;
    double t = n > 0 && tiled ? tiled_group_time(e, node, sel, n, &ok) : 0.0;
    if (ok)
        return t;
    if (n > 0)
        return group_time(e, sel, n, flops, bytes, w);
    /* No point of the group: the entry's own axis, as if it were one. */
    const sy__cost_point *pt = e->points;
    uint32_t np = e->n_points;
    if (w > pt[np - 1].work)
        return e->has_fit ? fit_time(e, flops, bytes) : pt[np - 1].seconds * (w / pt[np - 1].work);
    if (w < pt[0].work)
        return e->has_fit ? fit_time(e, flops, bytes) : pt[0].seconds;
    uint32_t k = 0;
    while (k + 1 < np && pt[k + 1].work < w)
        k++;
    return k + 1 < np ? log_interp(&pt[k], &pt[k + 1], w) : pt[k].seconds;
}

double sy__cost_node(const sy__device_model *m, const sy_node *node, bool *out_unmeasured)
{
    *out_unmeasured = false;
    if (sy_op_is_view(node->op))
        return 0.0;
    uint64_t flops = 0, bytes = 0;
    sy_op_cost(node, &flops, &bytes);
    uint32_t dt = node->n_inputs > 0 && node->inputs[0] ? node->inputs[0]->dtype : SY_DTYPE_F32;
    const sy__op_entry *e =
        node->op < SY_OP_COUNT && dt < SY_DTYPE_COUNT ? m->entry[node->op][dt] : NULL;
    if (e)
        return entry_time(e, node, (double)flops, (double)bytes);
    *out_unmeasured = true;
    double tf = (double)flops / m->peak_flops, tb = (double)bytes / m->peak_bandwidth;
    return (tf > tb ? tf : tb) + m->launch_s;
}

double sy__power_node(const sy__device_model *m, const sy_node *node)
{
    if (sy_op_is_view(node->op))
        return m->idle_w;
    uint32_t dt = node->n_inputs > 0 && node->inputs[0] ? node->inputs[0]->dtype : SY_DTYPE_F32;
    const sy__op_entry *e =
        node->op < SY_OP_COUNT && dt < SY_DTYPE_COUNT ? m->power[node->op][dt] : NULL;
    return e ? e->active_w : m->active_w;
}

static const sy__link_entry *find_link(const sy__device_model *from, const char *to)
{
    if (!from->profile)
        return NULL;
    for (uint32_t i = 0; i < from->profile->n_links; i++)
        if (strcmp(from->profile->links[i].to, to) == 0)
            return &from->profile->links[i];
    return NULL;
}

void sy__cost_link(const sy__device_model *src, const sy__device_model *dst,
                   sy__link_model *out_link)
{
    sy__link_model *l = out_link;
    l->zero_copy = src->desc.unified_memory && dst->desc.unified_memory;
    l->bandwidth = SY__DEFAULT_LINK_BANDWIDTH;
    l->latency_s = SY__DEFAULT_LINK_LATENCY_S;
    l->sync_s = SY__DEFAULT_SYNC_S;
    l->map_s = SY__DEFAULT_MAP_S;
    l->j_per_byte = SY__DEFAULT_LINK_J_PER_BYTE;
    l->measured = false;
    /* The source's own measurement first, else the destination's entry
     * for the reverse direction (links are usually symmetric). */
    const sy__link_entry *e = find_link(src, dst->desc.name);
    if (!e)
        e = find_link(dst, src->desc.name);
    if (!e)
        return;
    l->measured = true;
    if (!isnan(e->bandwidth))
        l->bandwidth = e->bandwidth;
    if (!isnan(e->latency_s))
        l->latency_s = e->latency_s;
    if (!isnan(e->sync_s))
        l->sync_s = e->sync_s;
    if (!isnan(e->map_s))
        l->map_s = e->map_s;
    if (!isnan(e->j_per_byte))
        l->j_per_byte = e->j_per_byte;
    if (e->zero_copy >= 0)
        l->zero_copy = e->zero_copy == 1;
}

double sy__cost_transfer(const sy__link_model *link, uint64_t bytes)
{
    if (link->zero_copy)
        return link->sync_s + link->map_s;
    return link->sync_s + link->latency_s + (double)bytes / link->bandwidth;
}

double sy__cost_transfer_j(const sy__link_model *link, uint64_t bytes)
{
    return link->zero_copy ? 0.0 : (double)bytes * link->j_per_byte;
}
