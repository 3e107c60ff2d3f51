/* Predicting node and transfer times from profiles, or from the roofline
 * default where a device has no measurement for an op. */
#include <math.h>
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

/* Measured points: log-log interpolation between the two shape classes
 * around |work|; outside them the fitted model where there is one, else
 * proportional scaling above the range and the smallest time below it
 * (small ops are overhead-bound, so guessing lower would flatter them). */
static double entry_time(const sy__op_entry *e, double flops, double bytes)
{
    if (e->n_points == 0)
        return fit_time(e, flops, bytes);
    double w = sy__cost_work(flops, bytes);
    const sy__cost_point *pt = e->points;
    uint32_t n = e->n_points;
    if (w > pt[n - 1].work)
        return e->has_fit ? fit_time(e, flops, bytes) : pt[n - 1].seconds * (w / pt[n - 1].work);
    if (w < pt[0].work)
        return e->has_fit ? fit_time(e, flops, bytes) : pt[0].seconds;
    uint32_t k = 0;
    while (k + 1 < n && pt[k + 1].work < w)
        k++;
    if (k + 1 == n || pt[k + 1].work == pt[k].work || w <= pt[k].work)
        return pt[k].seconds;
    const sy__cost_point *a = &pt[k], *b = &pt[k + 1];
    double f = log(w / a->work) / log(b->work / a->work);
    return exp(log(a->seconds) + f * (log(b->seconds) - log(a->seconds)));
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
        return entry_time(e, (double)flops, (double)bytes);
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
