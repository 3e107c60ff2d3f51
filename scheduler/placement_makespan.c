/* The overlapped step time of a placement, as plan_order.c predicts it
 * for a built plan, on the bare placement problem: the issue order
 * (plan_order.c's list schedule), the segments and transfers plan.c
 * makes of it, and the simulation of the executor (work on a device with
 * events holds only that device; work on another device, and every
 * transfer, holds the host).  The search algorithms call it thousands of
 * times per problem, so a workspace keeps its arrays.
 *
 * Differences from a built plan: leaves are not in the problem (their
 * moves are folded into node costs), nor are the ordering edges between
 * the readers and writer of a KV cache.  The planner therefore compares
 * its final candidates on built plans (planner.c). */
#include <math.h>
#include <stdlib.h>
#include <string.h>

#include "sched_problem.h"

sy_status sy__makespan_ws_init(sy__makespan_ws *ws, const sy__sched_problem *pb,
                               uint32_t async_mask)
{
    memset(ws, 0, sizeof *ws);
    uint32_t n = pb->n, D = pb->n_dev, edges = pb->in_start[n];
    ws->pb = pb;
    ws->async = async_mask & ((1u << D) - 1u);
    ws->out_start = calloc((size_t)n + 2, sizeof *ws->out_start);
    ws->out_list = malloc(((size_t)edges + 1) * sizeof *ws->out_list);
    ws->npred = malloc(((size_t)n + 1) * sizeof *ws->npred);
    ws->heap = malloc(((size_t)n * D + 1) * sizeof *ws->heap);
    ws->order = malloc(((size_t)n + 1) * sizeof *ws->order);
    ws->done = malloc(((size_t)n + 1) * sizeof *ws->done);
    ws->sent = malloc((size_t)n + 1);
    ws->stamp = malloc(((size_t)n + 1) * sizeof *ws->stamp);
    if (!ws->out_start || !ws->out_list || !ws->npred || !ws->heap || !ws->order || !ws->done ||
        !ws->sent || !ws->stamp) {
        sy__makespan_ws_deinit(ws);
        return SY_E_NO_MEMORY;
    }
    for (uint32_t e = 0; e < edges; e++)
        ws->out_start[pb->in_list[e] + 1]++;
    for (uint32_t v = 0; v < n; v++)
        ws->out_start[v + 1] += ws->out_start[v];
    uint32_t *fill = calloc((size_t)n + 1, sizeof *fill);
    if (!fill) {
        sy__makespan_ws_deinit(ws);
        return SY_E_NO_MEMORY;
    }
    for (uint32_t v = 0; v < n; v++)
        for (uint32_t e = pb->in_start[v]; e < pb->in_start[v + 1]; e++) {
            uint32_t p = pb->in_list[e];
            ws->out_list[ws->out_start[p] + fill[p]++] = v;
        }
    free(fill);
    return SY_OK;
}

void sy__makespan_ws_deinit(sy__makespan_ws *ws)
{
    free(ws->out_start);
    free(ws->out_list);
    free(ws->npred);
    free(ws->heap);
    free(ws->order);
    free(ws->done);
    free(ws->sent);
    free(ws->stamp);
    memset(ws, 0, sizeof *ws);
}

/* Min-heaps of node numbers (graph order), one of n slots per device. */
static void mk_push(uint32_t *h, uint32_t *len, uint32_t x)
{
    uint32_t i = (*len)++;
    while (i > 0 && h[(i - 1) / 2] > x) {
        h[i] = h[(i - 1) / 2];
        i = (i - 1) / 2;
    }
    h[i] = x;
}

static uint32_t mk_pop(uint32_t *h, uint32_t *len)
{
    uint32_t top = h[0], x = h[--*len], i = 0;
    for (;;) {
        uint32_t l = 2 * i + 1, r = l + 1, s = i;
        uint32_t best = x;
        if (l < *len && h[l] < best) {
            s = l;
            best = h[l];
        }
        if (r < *len && h[r] < best)
            s = r;
        if (s == i)
            break;
        h[i] = h[s];
        i = s;
    }
    if (*len)
        h[i] = x;
    return top;
}

/* plan_order.c's issue order: stay on the last device while it has ready
 * work unless it is synchronous and a device with events has work ready;
 * else the device with events whose ready work comes first in graph
 * order; else the synchronous one. */
static void mk_issue_order(sy__makespan_ws *ws, const uint8_t *assign)
{
    const sy__sched_problem *pb = ws->pb;
    uint32_t n = pb->n, D = pb->n_dev;
    if (!ws->async || D < 2 || n < 2) {
        for (uint32_t v = 0; v < n; v++)
            ws->order[v] = v;
        return;
    }
    uint32_t len[SY__SCHED_MAX_DEVICES] = {0};
    for (uint32_t v = 0; v < n; v++) {
        ws->npred[v] = pb->in_start[v + 1] - pb->in_start[v];
        if (ws->npred[v] == 0)
            mk_push(&ws->heap[(size_t)assign[v] * n], &len[assign[v]], v);
    }
    uint32_t out = 0, last = UINT32_MAX;
    for (;;) {
        bool async_ready = false;
        for (uint32_t d = 0; d < D; d++)
            async_ready |= (ws->async >> d & 1u) && len[d];
        uint32_t pick = UINT32_MAX;
        if (last != UINT32_MAX && len[last] && ((ws->async >> last & 1u) || !async_ready))
            pick = last;
        if (pick == UINT32_MAX) {
            for (uint32_t d = 0; d < D; d++) {
                if (!len[d] || (async_ready && !(ws->async >> d & 1u)))
                    continue;
                if (pick == UINT32_MAX ||
                    ws->heap[(size_t)d * n] < ws->heap[(size_t)pick * n])
                    pick = d;
            }
        }
        if (pick == UINT32_MAX)
            break;
        uint32_t v = mk_pop(&ws->heap[(size_t)pick * n], &len[pick]);
        last = pick;
        ws->order[out++] = v;
        for (uint32_t e = ws->out_start[v]; e < ws->out_start[v + 1]; e++) {
            uint32_t s = ws->out_list[e];
            if (--ws->npred[s] == 0)
                mk_push(&ws->heap[(size_t)assign[s] * n], &len[assign[s]], s);
        }
    }
}

double sy__makespan_eval(sy__makespan_ws *ws, const uint8_t *assign)
{
    const sy__sched_problem *pb = ws->pb;
    uint32_t n = pb->n, D = pb->n_dev;
    for (uint32_t v = 0; v < n; v++)
        if (assign[v] >= D || !isfinite(sy__sched_cost(pb, v, assign[v])))
            return INFINITY;
    mk_issue_order(ws, assign);
    memset(ws->sent, 0, n);
    memset(ws->stamp, 0xff, sizeof *ws->stamp * n);
    double host = 0, free_at[SY__SCHED_MAX_DEVICES] = {0};
    uint32_t seg = 0;
    for (uint32_t lo = 0; lo < n; seg++) {
        uint32_t dev = assign[ws->order[lo]], hi = lo;
        /* Extend the segment as plan.c does: a node reading a value from
         * a device with events that no earlier node of the segment reads
         * starts a new one (its transfer waits for that device). */
        while (hi < n && assign[ws->order[hi]] == dev) {
            uint32_t v = ws->order[hi];
            bool split = false;
            for (uint32_t e = pb->in_start[v]; hi > lo && e < pb->in_start[v + 1]; e++) {
                uint32_t p = pb->in_list[e], src = assign[p];
                if (src != dev && !(ws->sent[p] >> dev & 1u) && (ws->async >> src & 1u) &&
                    ws->stamp[p] != seg)
                    split = true;
            }
            if (split)
                break;
            for (uint32_t e = pb->in_start[v]; e < pb->in_start[v + 1]; e++)
                ws->stamp[pb->in_list[e]] = seg;
            hi++;
        }
        /* The segment's transfers, in its nodes' order, each holding the
         * host from when its value is made. */
        double work = 0;
        for (uint32_t o = lo; o < hi; o++) {
            uint32_t v = ws->order[o];
            work += sy__sched_cost(pb, v, dev);
            for (uint32_t e = pb->in_start[v]; e < pb->in_start[v + 1]; e++) {
                uint32_t p = pb->in_list[e], src = assign[p];
                if (src == dev || (ws->sent[p] >> dev & 1u))
                    continue;
                ws->sent[p] |= (uint8_t)(1u << dev);
                double ready = ws->done[p];
                host = (host > ready ? host : ready) + sy__sched_xfer(pb, p, src, dev);
            }
        }
        double begin = host > free_at[dev] ? host : free_at[dev];
        double end = begin + work;
        free_at[dev] = end;
        if (!(ws->async >> dev & 1u))
            host = end;
        for (uint32_t o = lo; o < hi; o++)
            ws->done[ws->order[o]] = end;
        lo = hi;
    }
    double span = host;
    for (uint32_t d = 0; d < D; d++)
        span = free_at[d] > span ? free_at[d] : span;
    return span;
}

double sy__sched_makespan(const sy__sched_problem *pb, uint32_t async_mask, const uint8_t *assign)
{
    sy__makespan_ws ws;
    if (sy__makespan_ws_init(&ws, pb, async_mask) != SY_OK)
        return INFINITY;
    double t = sy__makespan_eval(&ws, assign);
    sy__makespan_ws_deinit(&ws);
    return t;
}

bool sy__sched_has_branches(const sy__sched_problem *pb)
{
    /* A topological order is the only one exactly when each node reads
     * the one before it; anywhere else two nodes are unordered. */
    for (uint32_t v = 1; v < pb->n; v++) {
        bool reads_prev = false;
        for (uint32_t e = pb->in_start[v]; e < pb->in_start[v + 1] && !reads_prev; e++)
            reads_prev = pb->in_list[e] == v - 1;
        if (!reads_prev)
            return true;
    }
    return false;
}
