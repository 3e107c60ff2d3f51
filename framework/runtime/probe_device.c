/* Device side of the probe: small graphs timed on each device with the
 * bench helper (execute + synchronize, no transfers inside the timing):
 * a large F32 add for bandwidth, an F32 matmul for FLOP/s, a 16-element
 * add for the per-launch overhead; the plugin's copy_in / copy_out for
 * host<->device transfers, and copies between two devices' buffers the
 * way the executor makes them, at three sizes. */
#include <stdlib.h>
#include <string.h>

#include "probe.h"
#include "runtime_internal.h"

/* Seconds one measurement may take before it stops repeating, at most. */
#define DEV_BUDGET_S 0.6

static const uint64_t xfer_sizes[SY_PROBE_N_XFER_SIZES] = {4096, 1u << 20, 16u << 20};

static void dev_fail(sy_probe_device *out, const char *what, sy_runtime *rt, sy_status st)
{
    if (out->error[0])
        return;
    const char *detail = sy_runtime_last_error(rt);
    snprintf(out->error, sizeof out->error, "%s: %s%s%s", what, sy_status_name(st),
             detail[0] ? ": " : "", detail);
}

/* Builds a graph of one node |op| on F32 inputs of the given shapes. */
static sy_status dev_graph(sy_op op, sy_dtype a_type, const int64_t *a_ne, const int64_t *b_ne,
                           sy_graph **out_g)
{
    sy_graph *g = NULL;
    sy_status st = sy_graph_create(&g);
    if (st != SY_OK)
        return st;
    sy_tensor *a = NULL, *b = NULL, *c = NULL;
    st = sy_graph_add_tensor(g, "a", a_type, 2, a_ne, SY_ROLE_WEIGHT, NULL, &a);
    if (st == SY_OK)
        st = sy_graph_add_tensor(g, "b", SY_DTYPE_F32, 2, b_ne, SY_ROLE_INPUT, NULL, &b);
    sy_tensor *in[2] = {a, b};
    if (st == SY_OK)
        st = sy_graph_add_node(g, op, "probe", in, 2, NULL, &c);
    if (st == SY_OK)
        st = sy_graph_freeze(g);
    if (st != SY_OK) {
        sy_graph_destroy(g);
        return st;
    }
    *out_g = g;
    return SY_OK;
}

/* Seconds of the single node of a dev_graph() on |dev|
 * (sy__timing_estimate of |reps| runs).  The first launch is timed apart:
 * what it takes beyond the steady time (kernel builds, first-touch page
 * faults) is added to *inout_first_s. */
static sy_status dev_time(sy_runtime *rt, uint32_t dev, sy_op op, sy_dtype a_type,
                          const int64_t *a_ne, const int64_t *b_ne, uint32_t reps, double budget_s,
                          double *out_s, uint64_t *out_flops, uint64_t *out_bytes,
                          double *inout_first_s)
{
    sy_graph *g = NULL;
    sy_status st = dev_graph(op, a_type, a_ne, b_ne, &g);
    if (st != SY_OK)
        return st;
    sy_op_cost(sy_graph_node(g, 0), out_flops, out_bytes);
    sy_bench *b = NULL;
    double first = 0;
    st = sy_bench_create(rt, g, dev, &b);
    if (st == SY_OK)
        st = sy_bench_run(b, 0, 1, &first);
    if (st == SY_OK)
        st = sy_bench_time(b, 0, 1, 1, reps, budget_s, out_s);
    if (st == SY_OK && first > *out_s)
        *inout_first_s += first - *out_s;
    sy_bench_destroy(b);
    sy_graph_destroy(g);
    return st;
}

static void dev_transfers(sy_runtime *rt, const sy__device *d, bool quick, sy_probe_device *out)
{
    const sy__plugin *p = d->plugin;
    uint64_t max = quick ? (4u << 20) : xfer_sizes[SY_PROBE_N_XFER_SIZES - 1];
    void *buf = NULL;
    unsigned char *host = malloc((size_t)max);
    sy_status st = host ? p->desc.buffer_alloc(p->state, d->index, max, &buf) : SY_E_NO_MEMORY;
    if (st != SY_OK) {
        free(host);
        dev_fail(out, "transfer buffer", rt, st);
        return;
    }
    memset(host, 3, (size_t)max);
    for (uint32_t k = 0; k < SY_PROBE_N_XFER_SIZES && st == SY_OK; k++) {
        uint64_t n = xfer_sizes[k] < max ? xfer_sizes[k] : max;
        double t_in[9], t_out[9];
        uint32_t reps = n <= (1u << 20) ? 9 : 5;
        for (uint32_t r = 0; r < reps && st == SY_OK; r++) {
            double t0 = sy__probe_now();
            st = p->desc.copy_in(p->state, d->index, buf, 0, host, n);
            if (st == SY_OK)
                st = p->desc.synchronize(p->state, d->index);
            double t1 = sy__probe_now();
            if (st == SY_OK)
                st = p->desc.copy_out(p->state, d->index, buf, 0, host, n);
            if (st == SY_OK)
                st = p->desc.synchronize(p->state, d->index);
            t_in[r] = t1 - t0;
            t_out[r] = sy__probe_now() - t1;
        }
        if (st != SY_OK)
            break;
        out->xfer[k] = (sy_probe_xfer){.bytes = n, .h2d_s = sy__timing_estimate(t_in, reps),
                                       .d2h_s = sy__timing_estimate(t_out, reps)};
    }
    p->desc.buffer_free(p->state, d->index, buf);
    free(host);
    if (st != SY_OK) {
        dev_fail(out, "transfer", rt, st);
        return;
    }
    /* Latency: the smallest copy.  Bandwidth: the slope between the
     * smallest and the largest, so the fixed cost does not dilute it. */
    const sy_probe_xfer *lo = &out->xfer[0], *hi = &out->xfer[SY_PROBE_N_XFER_SIZES - 1];
    out->h2d_latency_s = lo->h2d_s;
    out->d2h_latency_s = lo->d2h_s;
    double db = (double)(hi->bytes - lo->bytes);
    out->h2d_bps = hi->h2d_s > lo->h2d_s ? db / (hi->h2d_s - lo->h2d_s) : db / hi->h2d_s;
    out->d2h_bps = hi->d2h_s > lo->d2h_s ? db / (hi->d2h_s - lo->d2h_s) : db / hi->d2h_s;
}

void sy__probe_device(sy_runtime *rt, uint32_t dev, bool quick, double budget_s,
                      sy_probe_device *out)
{
    memset(out, 0, sizeof *out);
    const sy__device *d = &rt->devices[dev];
    snprintf(out->name, sizeof out->name, "%s", d->desc.name);
    snprintf(out->plugin, sizeof out->plugin, "%s", d->plugin->desc.name);
    snprintf(out->plugin_version, sizeof out->plugin_version, "%s",
             d->plugin->desc.version ? d->plugin->desc.version : "");
    snprintf(out->model, sizeof out->model, "%s", d->desc.model);
    snprintf(out->driver, sizeof out->driver, "%s", d->desc.driver);
    out->kind = d->desc.kind;
    out->memory_bytes = d->desc.memory_bytes;
    out->unified_memory = d->desc.unified_memory != 0;
    out->compute_units = d->desc.compute_units;

    /* Three kernels and the transfers share the budget.  Bandwidth and
     * arithmetic start with the quick sizes and move to the full ones
     * only when six full-size runs fit in the kernel's share (an emulated
     * NPU takes a second for the full matmul). */
    double each = budget_s / 4 < DEV_BUDGET_S ? budget_s / 4 : DEV_BUDGET_S;
    uint64_t flops, bytes;
    double s = 0, first = 0;
    /* Bandwidth: c = a + b over 1 Mi floats (12 MiB moved), then 4 Mi. */
    int64_t vec[2] = {1 << 20, 1};
    sy_status st = dev_time(rt, dev, SY_OP_ADD, SY_DTYPE_F32, vec, vec, 3, each, &s, &flops,
                            &bytes, &first);
    if (st == SY_OK && !quick && s > 0 && s * 4 * 6 < each) {
        vec[0] = 4 << 20;
        st = dev_time(rt, dev, SY_OP_ADD, SY_DTYPE_F32, vec, vec, 5, each, &s, &flops, &bytes,
                      &first);
    }
    if (st == SY_OK && s > 0)
        out->bandwidth_bps = (double)bytes / s;
    else
        dev_fail(out, "bandwidth (add)", rt, st);
    /* Arithmetic: W[256 x 256] x X[256 x 64] (8.4 MFLOP), then W[1024 x
     * 1024] x X[1024 x 128] (268 MFLOP); F32 weights, else Q8_0 where the
     * device refuses F32 (NPUs take quantised weights only). */
    sy_dtype wt = SY_DTYPE_F32;
    int64_t w_ne[2] = {256, 256}, x_ne[2] = {256, 64};
    st = dev_time(rt, dev, SY_OP_MATMUL, wt, w_ne, x_ne, 3, each, &s, &flops, &bytes, &first);
    if (st == SY_E_UNSUPPORTED) {
        wt = SY_DTYPE_Q8_0;
        st = dev_time(rt, dev, SY_OP_MATMUL, wt, w_ne, x_ne, 3, each, &s, &flops, &bytes, &first);
    }
    if (st == SY_OK && !quick && s > 0 && s * 32 * 6 < each) {
        w_ne[0] = w_ne[1] = x_ne[0] = 1024;
        x_ne[1] = 128;
        st = dev_time(rt, dev, SY_OP_MATMUL, wt, w_ne, x_ne, 5, each, &s, &flops, &bytes, &first);
    }
    if (st == SY_OK && s > 0)
        out->flops = (double)flops / s;
    else
        dev_fail(out, "arithmetic (matmul)", rt, st);
    int64_t tiny[2] = {16, 1};
    st = dev_time(rt, dev, SY_OP_ADD, SY_DTYPE_F32, tiny, tiny, quick ? 11 : 31, each, &s, &flops,
                  &bytes, &first);
    if (st == SY_OK)
        out->launch_s = s;
    else
        dev_fail(out, "launch (tiny add)", rt, st);
    out->first_use_s = first;
    dev_transfers(rt, d, quick, out);
}

/* ------------------------------------------------------------ links */

typedef enum link_method { LINK_COPY_DEVICE, LINK_COPY_OUT, LINK_COPY_IN, LINK_STAGED } link_method;

static const char *const link_method_names[] = {"copy_device", "copy_out", "copy_in", "staged"};

typedef struct link_ends {
    const sy__device *s, *d;
    void *sb, *db;           /* the two buffers */
    void *src_host, *dst_host; /* their host addresses where mapped */
    unsigned char *stage;
} link_ends;

/* One copy of |n| bytes from the source buffer to the destination's, both
 * sides synchronised. */
static sy_status link_copy(const link_ends *e, link_method method, uint64_t n)
{
    const sy__plugin *sp = e->s->plugin, *dp = e->d->plugin;
    uint32_t si = e->s->index, di = e->d->index;
    sy_status st;
    switch (method) {
    case LINK_COPY_DEVICE:
        st = sp->desc.copy_device(sp->state, di, e->db, 0, si, e->sb, 0, n);
        break;
    case LINK_COPY_OUT:
        st = sp->desc.copy_out(sp->state, si, e->sb, 0, e->dst_host, n);
        break;
    case LINK_COPY_IN:
        st = dp->desc.copy_in(dp->state, di, e->db, 0, e->src_host, n);
        break;
    default:
        st = sp->desc.copy_out(sp->state, si, e->sb, 0, e->stage, n);
        if (st == SY_OK)
            st = dp->desc.copy_in(dp->state, di, e->db, 0, e->stage, n);
        break;
    }
    if (st == SY_OK)
        st = sp->desc.synchronize(sp->state, si);
    if (st == SY_OK && (dp != sp || di != si))
        st = dp->desc.synchronize(dp->state, di);
    return st;
}

void sy__probe_link(sy_runtime *rt, uint32_t from, uint32_t to, bool quick, sy_probe_link *out)
{
    memset(out, 0, sizeof *out);
    link_ends e = {.s = &rt->devices[from], .d = &rt->devices[to]};
    const sy__plugin *sp = e.s->plugin, *dp = e.d->plugin;
    snprintf(out->from, sizeof out->from, "%s", e.s->desc.name);
    snprintf(out->to, sizeof out->to, "%s", e.d->desc.name);
    uint64_t max = quick ? (4u << 20) : xfer_sizes[SY_PROBE_N_XFER_SIZES - 1];
    e.stage = malloc((size_t)max);
    sy_status st = e.stage ? sp->desc.buffer_alloc(sp->state, e.s->index, max, &e.sb)
                           : SY_E_NO_MEMORY;
    if (st == SY_OK)
        st = dp->desc.buffer_alloc(dp->state, e.d->index, max, &e.db);
    if (st == SY_OK) {
        memset(e.stage, 5, (size_t)max);
        st = sp->desc.copy_in(sp->state, e.s->index, e.sb, 0, e.stage, max);
    }
    if (st != SY_OK) {
        snprintf(out->error, sizeof out->error, "buffers: %s", sy_status_name(st));
        goto out_free;
    }
    /* The executor's choice, in its order (executor_plan.c): the plugin's
     * own device copy, else into or out of whichever side maps host memory,
     * else through a staging buffer. */
    if (sp->desc.buffer_host_ptr)
        e.src_host = sp->desc.buffer_host_ptr(sp->state, e.s->index, e.sb);
    if (dp->desc.buffer_host_ptr)
        e.dst_host = dp->desc.buffer_host_ptr(dp->state, e.d->index, e.db);
    out->zero_copy = e.src_host && e.d->desc.unified_memory && dp->desc.buffer_import_host;
    link_method method = sp == dp && sp->desc.copy_device ? LINK_COPY_DEVICE
                         : e.dst_host                     ? LINK_COPY_OUT
                         : e.src_host                     ? LINK_COPY_IN
                                                          : LINK_STAGED;
    snprintf(out->method, sizeof out->method, "%s", link_method_names[method]);
    double t[9];
    for (uint32_t k = 0; k < SY_PROBE_N_XFER_SIZES && st == SY_OK; k++) {
        uint64_t n = xfer_sizes[k] < max ? xfer_sizes[k] : max;
        uint32_t reps = n <= (1u << 20) ? 9 : 5;
        st = link_copy(&e, method, n); /* warm-up */
        for (uint32_t r = 0; r < reps && st == SY_OK; r++) {
            double t0 = sy__probe_now();
            st = link_copy(&e, method, n);
            t[r] = sy__probe_now() - t0;
        }
        out->bytes[k] = n;
        out->seconds[k] = st == SY_OK ? sy__timing_estimate(t, reps) : 0;
    }
    if (st != SY_OK) {
        snprintf(out->error, sizeof out->error, "%s: %s", out->method, sy_status_name(st));
        goto out_free;
    }
    /* As for host transfers: latency the smallest copy, bandwidth the
     * slope up to the largest. */
    uint32_t hi = SY_PROBE_N_XFER_SIZES - 1;
    double span = (double)(out->bytes[hi] - out->bytes[0]), dt = out->seconds[hi] - out->seconds[0];
    out->latency_s = out->seconds[0];
    if (dt > 0)
        out->bps = span / dt;
    else if (out->seconds[hi] > 0)
        out->bps = (double)out->bytes[hi] / out->seconds[hi];
out_free:
    if (e.db)
        dp->desc.buffer_free(dp->state, e.d->index, e.db);
    if (e.sb)
        sp->desc.buffer_free(sp->state, e.s->index, e.sb);
    free(e.stage);
}
