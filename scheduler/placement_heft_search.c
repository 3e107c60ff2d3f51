/* HEFT's local search (placement_heft.c's candidates and iterated search
 * use it): moves of single nodes, producer-consumer pairs, runs, chains,
 * swaps of two runs and any two nodes at once, each judged by a full
 * simulation (sy__makespan_eval) and kept when the makespan drops. */
#include <math.h>
#include <string.h>

#include "placement_heft_internal.h"

/* Tries |v| on |d| (and, when |p| is a node, its producer |p| with it);
 * keeps the move when the simulated makespan drops below *|best|. */
static bool try_move(sy__makespan_ws *ws, uint8_t *assign, uint32_t v, uint32_t p, uint32_t d,
                     double *best)
{
    const sy__sched_problem *pb = ws->pb;
    uint8_t fv = assign[v], fp = p != UINT32_MAX ? assign[p] : 0;
    if (!isfinite(sy__sched_cost(pb, v, d)) ||
        (p != UINT32_MAX && !isfinite(sy__sched_cost(pb, p, d))))
        return false;
    if (fv == d && (p == UINT32_MAX || fp == d))
        return false;
    assign[v] = (uint8_t)d;
    if (p != UINT32_MAX)
        assign[p] = (uint8_t)d;
    double t = sy__makespan_eval(ws, assign);
    if (t < *best * (1.0 - 1e-12)) {
        *best = t;
        return true;
    }
    assign[v] = fv;
    if (p != UINT32_MAX)
        assign[p] = fp;
    return false;
}

/* Moves to |d| node |v| and every node reachable from it along edges
 * that stay on v's device (the rest of its run there), keeping the move
 * when the simulated makespan drops below *|best|.  |stack| and |saved|
 * hold n entries. */
static bool try_run_move(sy__makespan_ws *ws, uint8_t *assign, uint32_t v, uint32_t d,
                         uint32_t *stack, uint8_t *saved, double *best)
{
    const sy__sched_problem *pb = ws->pb;
    uint8_t from = assign[v];
    if (from == d)
        return false;
    memcpy(saved, assign, pb->n);
    uint32_t top = 0;
    stack[top++] = v;
    assign[v] = (uint8_t)d;
    bool ok = isfinite(sy__sched_cost(pb, v, d));
    while (top && ok) {
        uint32_t u = stack[--top];
        for (uint32_t e = ws->out_start[u]; e < ws->out_start[u + 1]; e++) {
            uint32_t s = ws->out_list[e];
            if (assign[s] != from)
                continue;
            if (!isfinite(sy__sched_cost(pb, s, d))) {
                ok = false;
                break;
            }
            assign[s] = (uint8_t)d;
            stack[top++] = s;
        }
    }
    double t = ok ? sy__makespan_eval(ws, assign) : INFINITY;
    if (t < *best * (1.0 - 1e-12)) {
        *best = t;
        return true;
    }
    memcpy(assign, saved, pb->n);
    return false;
}

/* Puts on |d| the chain through |v|: v and its neighbours linked by
 * edges that are a producer's only consumer and a consumer's only input,
 * on whatever devices they are (a branch of a fork/join changing device
 * as a whole, where moving one run at a time only adds transfers).
 * Returns false, with |assign| partly changed, when d cannot run one of
 * them. */
bool sy__heft_put_chain(const sy__makespan_ws *ws, uint8_t *assign, uint32_t v, uint32_t d)
{
    const sy__sched_problem *pb = ws->pb;
    bool ok = true;
    uint32_t u = v;
    for (;;) { /* up: while u has one input whose only consumer is u */
        ok = ok && isfinite(sy__sched_cost(pb, u, d));
        assign[u] = (uint8_t)d;
        if (pb->in_start[u + 1] - pb->in_start[u] != 1)
            break;
        uint32_t p = pb->in_list[pb->in_start[u]];
        if (ws->out_start[p + 1] - ws->out_start[p] != 1)
            break;
        u = p;
    }
    for (u = v; ok && ws->out_start[u + 1] - ws->out_start[u] == 1;) { /* down */
        uint32_t c = ws->out_list[ws->out_start[u]];
        if (pb->in_start[c + 1] - pb->in_start[c] != 1)
            break;
        u = c;
        ok = isfinite(sy__sched_cost(pb, u, d));
        assign[u] = (uint8_t)d;
    }
    return ok;
}

/* Makes the single-node move that gives the lowest makespan, better or
 * not than |assign|'s own: after a chain moved, the node it displaced. */
void sy__heft_best_single_move(sy__makespan_ws *ws, uint8_t *assign)
{
    const sy__sched_problem *pb = ws->pb;
    double best = INFINITY;
    uint32_t bv = UINT32_MAX, bd = 0;
    for (uint32_t v = 0; v < pb->n; v++) {
        uint8_t from = assign[v];
        for (uint32_t d = 0; d < pb->n_dev; d++) {
            if (d == from || !isfinite(sy__sched_cost(pb, v, d)))
                continue;
            assign[v] = (uint8_t)d;
            double t = sy__makespan_eval(ws, assign);
            if (t < best) {
                best = t;
                bv = v;
                bd = d;
            }
        }
        assign[v] = from;
    }
    if (bv != UINT32_MAX)
        assign[bv] = (uint8_t)bd;
}

/* put_chain(), kept when the makespan drops below *|best|. */
static bool try_chain_move(sy__makespan_ws *ws, uint8_t *assign, uint32_t v, uint32_t d,
                           uint8_t *saved, double *best)
{
    memcpy(saved, assign, ws->pb->n);
    bool ok = sy__heft_put_chain(ws, assign, v, d) && memcmp(saved, assign, ws->pb->n) != 0;
    double t = ok ? sy__makespan_eval(ws, assign) : INFINITY;
    if (t < *best * (1.0 - 1e-12)) {
        *best = t;
        return true;
    }
    memcpy(assign, saved, ws->pb->n);
    return false;
}

/* Appends to |list| (from *len on) node |v| and every node reachable from
 * it along edges staying on its device; returns the new length. */
static uint32_t collect_run(const sy__makespan_ws *ws, const uint8_t *assign, uint32_t v,
                            uint32_t *list, uint32_t len, uint8_t *mark)
{
    uint32_t from = assign[v], at = len;
    list[len++] = v;
    mark[v] = 1;
    while (at < len) {
        uint32_t u = list[at++];
        for (uint32_t e = ws->out_start[u]; e < ws->out_start[u + 1]; e++) {
            uint32_t s = ws->out_list[e];
            if (assign[s] == from && !mark[s]) {
                mark[s] = 1;
                list[len++] = s;
            }
        }
    }
    return len;
}

/* Swaps the devices of v's run and w's run (two branches trading
 * places), keeping the swap when the makespan drops below *|best|. */
static bool try_swap_runs(sy__makespan_ws *ws, uint8_t *assign, uint32_t v, uint32_t w,
                          uint32_t *list, uint8_t *saved, double *best)
{
    const sy__sched_problem *pb = ws->pb;
    uint8_t dv = assign[v], dw = assign[w];
    if (dv == dw)
        return false;
    memset(saved, 0, pb->n);
    uint32_t na = collect_run(ws, assign, v, list, 0, saved);
    uint32_t nb = collect_run(ws, assign, w, list, na, saved);
    memcpy(saved, assign, pb->n);
    bool ok = true;
    for (uint32_t k = 0; k < nb && ok; k++) {
        uint32_t u = list[k];
        uint8_t to = k < na ? dw : dv;
        ok = isfinite(sy__sched_cost(pb, u, to));
        assign[u] = to;
    }
    double t = ok ? sy__makespan_eval(ws, assign) : INFINITY;
    if (t < *best * (1.0 - 1e-12)) {
        *best = t;
        return true;
    }
    memcpy(assign, saved, pb->n);
    return false;
}

/* Moves single nodes, producer-consumer pairs together (a move of either
 * alone would add a transfer), a node with the rest of its run on its
 * device and a node with its chain (a branch changing device), while the
 * simulated makespan drops; returns it. */
double sy__heft_search(sy__makespan_ws *ws, uint8_t *assign, double best, uint32_t *stack,
                       uint8_t *saved, bool swaps)
{
    const sy__sched_problem *pb = ws->pb;
    bool improved = true;
    for (uint32_t round = 0; improved && round < SY__HEFT_SEARCH_ROUNDS; round++) {
        improved = false;
        for (uint32_t v = 0; v < pb->n; v++)
            for (uint32_t d = 0; d < pb->n_dev; d++)
                improved |= try_move(ws, assign, v, UINT32_MAX, d, &best);
        for (uint32_t v = 0; v < pb->n; v++)
            for (uint32_t e = pb->in_start[v]; e < pb->in_start[v + 1]; e++)
                for (uint32_t d = 0; d < pb->n_dev; d++)
                    improved |= try_move(ws, assign, v, pb->in_list[e], d, &best);
        for (uint32_t v = 0; v < pb->n; v++)
            for (uint32_t d = 0; d < pb->n_dev; d++)
                improved |= try_run_move(ws, assign, v, d, stack, saved, &best);
        for (uint32_t v = 0; v < pb->n; v++)
            for (uint32_t d = 0; d < pb->n_dev; d++)
                improved |= try_chain_move(ws, assign, v, d, saved, &best);
        for (uint32_t v = 0; swaps && pb->n <= SY__HEFT_SWAP_MAX_NODES && v < pb->n; v++)
            for (uint32_t w = v + 1; w < pb->n; w++)
                improved |= try_swap_runs(ws, assign, v, w, stack, saved, &best);
    }
    return best;
}

/* Moves any two nodes at once, each to another allowed device (two
 * branches that must change device together, each to its own device),
 * taking the first move that lowers the makespan below |best| and
 * searching again after it; returns the makespan. */
double sy__heft_pair_search(sy__makespan_ws *ws, uint8_t *assign, double best, uint32_t *stack,
                            uint8_t *saved)
{
    const sy__sched_problem *pb = ws->pb;
    const uint32_t n = pb->n, D = pb->n_dev;
    for (bool improved = true; improved;) {
        improved = false;
        for (uint32_t v = 0; v < n && !improved; v++) {
            uint8_t fv = assign[v];
            for (uint32_t dv = 0; dv < D && !improved; dv++) {
                if (dv == fv || !isfinite(sy__sched_cost(pb, v, dv)))
                    continue;
                assign[v] = (uint8_t)dv;
                for (uint32_t w = v + 1; w < n && !improved; w++) {
                    uint8_t fw = assign[w];
                    for (uint32_t dw = 0; dw < D && !improved; dw++) {
                        if (dw == fw || !isfinite(sy__sched_cost(pb, w, dw)))
                            continue;
                        assign[w] = (uint8_t)dw;
                        double t = sy__makespan_eval(ws, assign);
                        if (t < best * (1.0 - 1e-12)) {
                            best = sy__heft_search(ws, assign, t, stack, saved, false);
                            improved = true;
                        } else {
                            assign[w] = fw;
                        }
                    }
                }
                if (!improved)
                    assign[v] = fv;
            }
        }
    }
    return best;
}
