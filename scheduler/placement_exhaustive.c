/* The oracle: every placement, by branch and bound over the topological
 * order.  The partial objective only grows as nodes are placed, so the
 * placed part plus the cheapest time of every node still to place bounds
 * any completion from below.  Used by the tests, never by the planner's
 * AUTO mode. */
#include <math.h>
#include <stdlib.h>
#include <string.h>

#include "sched_problem.h"

/* Producers per node the search keeps undo state for on its stack. */
#define BNB_MAX_INPUTS 16u

typedef struct bnb {
    const sy__sched_problem *pb;
    uint8_t *assign, *best;
    uint8_t *seen;      /* seen[p]: devices p's value went to so far */
    double *suffix_min; /* n + 1: sum of the cheapest costs of nodes i.. */
    uint8_t *order;     /* n * n_dev: devices of node i, cheapest first */
    double best_cost;
} bnb;

static void bnb_visit(bnb *b, uint32_t i, double partial)
{
    const sy__sched_problem *pb = b->pb;
    if (partial + b->suffix_min[i] >= b->best_cost)
        return;
    if (i == pb->n) {
        b->best_cost = partial;
        memcpy(b->best, b->assign, pb->n);
        return;
    }
    for (uint32_t k = 0; k < pb->n_dev; k++) {
        uint32_t d = b->order[(size_t)i * pb->n_dev + k];
        double c = sy__sched_cost(pb, i, d);
        if (!isfinite(c))
            break; /* sorted: the rest are forbidden too */
        double add = c;
        uint8_t saved[BNB_MAX_INPUTS];
        uint32_t e0 = pb->in_start[i], e1 = pb->in_start[i + 1];
        for (uint32_t e = e0; e < e1; e++) {
            uint32_t p = pb->in_list[e];
            saved[e - e0] = b->seen[p];
        }
        for (uint32_t e = e0; e < e1; e++) {
            uint32_t p = pb->in_list[e];
            if (b->assign[p] == d || (b->seen[p] >> d & 1u))
                continue;
            b->seen[p] |= (uint8_t)(1u << d);
            add += sy__sched_xfer(pb, p, b->assign[p], d);
        }
        b->assign[i] = (uint8_t)d;
        bnb_visit(b, i + 1, partial + add);
        for (uint32_t e = e0; e < e1; e++)
            b->seen[pb->in_list[e]] = saved[e - e0];
    }
}

sy_status sy__sched_exhaustive(const sy__sched_problem *pb, uint8_t *out_assign)
{
    if (pb->n > SY__SCHED_EXHAUSTIVE_MAX)
        return SY_E_LIMIT;
    for (uint32_t i = 0; i < pb->n; i++)
        if (pb->in_start[i + 1] - pb->in_start[i] > BNB_MAX_INPUTS)
            return SY_E_LIMIT;
    uint32_t n = pb->n, D = pb->n_dev;
    bnb b = {.pb = pb};
    b.assign = calloc((size_t)n + 1, 1);
    b.best = calloc((size_t)n + 1, 1);
    b.seen = calloc((size_t)n + 1, 1);
    b.suffix_min = calloc((size_t)n + 1, sizeof *b.suffix_min);
    b.order = malloc((size_t)n * D + 1);
    sy_status st = SY_OK;
    if (!b.assign || !b.best || !b.seen || !b.suffix_min || !b.order) {
        st = SY_E_NO_MEMORY;
        goto out_free;
    }
    for (uint32_t i = n; i-- > 0;) {
        double m = INFINITY;
        uint8_t *o = &b.order[(size_t)i * D];
        for (uint32_t d = 0; d < D; d++) {
            o[d] = (uint8_t)d;
            if (sy__sched_cost(pb, i, d) < m)
                m = sy__sched_cost(pb, i, d);
        }
        /* Insertion sort, cheapest first, forbidden (infinite) last. */
        for (uint32_t a = 1; a < D; a++)
            for (uint32_t k = a;
                 k > 0 && sy__sched_cost(pb, i, o[k]) < sy__sched_cost(pb, i, o[k - 1]); k--) {
                uint8_t t = o[k];
                o[k] = o[k - 1];
                o[k - 1] = t;
            }
        if (!isfinite(m)) {
            st = SY_E_UNSUPPORTED;
            goto out_free;
        }
        b.suffix_min[i] = b.suffix_min[i + 1] + m;
    }
    /* Start from the single-device baseline so that pruning bites early;
     * the search still proves (or beats) it. */
    b.best_cost = sy__sched_best_single(pb, b.best);
    b.best_cost = nextafter(b.best_cost, INFINITY);
    bnb_visit(&b, 0, 0.0);
    memcpy(out_assign, b.best, n);
out_free:
    free(b.assign);
    free(b.best);
    free(b.seen);
    free(b.suffix_min);
    free(b.order);
    return st;
}

/* ------------------------------------------------ overlapped makespan */

/* The same search for the overlapped step time (sy__makespan_eval).  A
 * placed prefix bounds every completion from below by: each device with
 * events busy for its nodes; the host busy for the nodes of devices
 * without events and for every transfer; all of that plus the cheapest
 * time of the nodes still to place spread over the host and the devices
 * with events; and the longest path through a placed node (its earliest
 * finish plus the cheapest path after it). */
typedef struct mk_bnb {
    const sy__sched_problem *pb;
    sy__makespan_ws *ws;
    uint32_t async, n_async;
    uint8_t *assign, *best, *seen, *order;
    double *suffix_min, *tail, *ef;
    double load[SY__SCHED_MAX_DEVICES];
    double host, best_cost;
} mk_bnb;

static void mk_visit(mk_bnb *b, uint32_t i, double bound_cp)
{
    const sy__sched_problem *pb = b->pb;
    double work = b->host, lb = fmax(b->host, bound_cp);
    for (uint32_t d = 0; d < pb->n_dev; d++)
        if (b->async >> d & 1u) {
            lb = fmax(lb, b->load[d]);
            work += b->load[d];
        }
    lb = fmax(lb, (work + b->suffix_min[i]) / (double)(1 + b->n_async));
    if (lb >= b->best_cost)
        return;
    if (i == pb->n) {
        double t = sy__makespan_eval(b->ws, b->assign);
        if (t < b->best_cost) {
            b->best_cost = t;
            memcpy(b->best, b->assign, pb->n);
        }
        return;
    }
    uint32_t e0 = pb->in_start[i], e1 = pb->in_start[i + 1];
    for (uint32_t k = 0; k < pb->n_dev; k++) {
        uint32_t d = b->order[(size_t)i * pb->n_dev + k];
        double c = sy__sched_cost(pb, i, d);
        if (!isfinite(c))
            break;
        uint8_t saved[BNB_MAX_INPUTS];
        double host0 = b->host, load0 = b->load[d], ready = 0;
        for (uint32_t e = e0; e < e1; e++) {
            uint32_t p = pb->in_list[e];
            saved[e - e0] = b->seen[p];
            if (b->assign[p] == d) {
                ready = fmax(ready, b->ef[p]);
                continue;
            }
            double x = sy__sched_xfer(pb, p, b->assign[p], d);
            ready = fmax(ready, b->ef[p] + x);
            if (!(b->seen[p] >> d & 1u)) {
                b->seen[p] |= (uint8_t)(1u << d);
                b->host += x;
            }
        }
        if (b->async >> d & 1u)
            b->load[d] += c;
        else
            b->host += c;
        b->ef[i] = ready + c;
        b->assign[i] = (uint8_t)d;
        mk_visit(b, i + 1, fmax(bound_cp, b->ef[i] + b->tail[i]));
        for (uint32_t e = e0; e < e1; e++)
            b->seen[pb->in_list[e]] = saved[e - e0];
        b->host = host0;
        b->load[d] = load0;
    }
}

sy_status sy__sched_exhaustive_makespan(const sy__sched_problem *pb, uint32_t async_mask,
                                        uint8_t *out_assign)
{
    if (pb->n > SY__SCHED_EXHAUSTIVE_MAX)
        return SY_E_LIMIT;
    for (uint32_t i = 0; i < pb->n; i++)
        if (pb->in_start[i + 1] - pb->in_start[i] > BNB_MAX_INPUTS)
            return SY_E_LIMIT;
    uint32_t n = pb->n, D = pb->n_dev;
    sy__makespan_ws ws;
    sy_status st = sy__makespan_ws_init(&ws, pb, async_mask);
    if (st != SY_OK)
        return st;
    mk_bnb b = {.pb = pb, .ws = &ws, .async = ws.async};
    for (uint32_t d = 0; d < D; d++)
        b.n_async += ws.async >> d & 1u;
    b.assign = calloc((size_t)n + 1, 1);
    b.best = calloc((size_t)n + 1, 1);
    b.seen = calloc((size_t)n + 1, 1);
    b.order = malloc((size_t)n * D + 1);
    b.suffix_min = calloc((size_t)n + 1, sizeof *b.suffix_min);
    b.tail = calloc((size_t)n + 1, sizeof *b.tail);
    b.ef = calloc((size_t)n + 1, sizeof *b.ef);
    double *min_cost = calloc((size_t)n + 1, sizeof *min_cost);
    if (!b.assign || !b.best || !b.seen || !b.order || !b.suffix_min || !b.tail || !b.ef ||
        !min_cost) {
        st = SY_E_NO_MEMORY;
        goto out_free;
    }
    for (uint32_t i = n; i-- > 0;) {
        uint8_t *o = &b.order[(size_t)i * D];
        min_cost[i] = INFINITY;
        for (uint32_t d = 0; d < D; d++) {
            o[d] = (uint8_t)d;
            min_cost[i] = fmin(min_cost[i], sy__sched_cost(pb, i, d));
        }
        for (uint32_t a = 1; a < D; a++)
            for (uint32_t k = a;
                 k > 0 && sy__sched_cost(pb, i, o[k]) < sy__sched_cost(pb, i, o[k - 1]); k--) {
                uint8_t t = o[k];
                o[k] = o[k - 1];
                o[k - 1] = t;
            }
        if (!isfinite(min_cost[i])) {
            st = SY_E_UNSUPPORTED;
            goto out_free;
        }
        b.suffix_min[i] = b.suffix_min[i + 1] + min_cost[i];
        for (uint32_t e = ws.out_start[i]; e < ws.out_start[i + 1]; e++) {
            uint32_t s = ws.out_list[e];
            b.tail[i] = fmax(b.tail[i], min_cost[s] + b.tail[s]);
        }
    }
    /* The best single-device plan bounds the search from the start: not
     * HEFT's, which calls this on a problem with few plans and is close
     * to the optimum on most others, leaving the pruning nothing to find
     * and the test against plain enumeration nothing to check (pruning
     * 15% too eagerly passed it). */
    sy__sched_best_single(pb, b.best);
    b.best_cost = sy__makespan_eval(&ws, b.best);
    b.best_cost = nextafter(b.best_cost, INFINITY);
    mk_visit(&b, 0, 0.0);
    memcpy(out_assign, b.best, n);
out_free:
    free(b.assign);
    free(b.best);
    free(b.seen);
    free(b.order);
    free(b.suffix_min);
    free(b.tail);
    free(b.ef);
    free(min_cost);
    sy__makespan_ws_deinit(&ws);
    return st;
}
