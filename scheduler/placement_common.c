/* The placement problem's storage, its objective, the single-device
 * baseline and the local search that the list scheduler finishes with. */
#include <math.h>
#include <stdlib.h>
#include <string.h>

#include "sched_problem.h"

sy_status sy__sched_problem_init(sy__sched_problem *pb, uint32_t n, uint32_t n_dev,
                                 uint32_t n_edges)
{
    memset(pb, 0, sizeof *pb);
    if (n_dev == 0 || n_dev > SY__SCHED_MAX_DEVICES)
        return SY_E_INVALID_ARG;
    pb->n = n;
    pb->n_dev = n_dev;
    pb->cost = calloc((size_t)n * n_dev + 1, sizeof *pb->cost);
    pb->xfer = calloc((size_t)n * n_dev * n_dev + 1, sizeof *pb->xfer);
    pb->in_start = calloc((size_t)n + 1, sizeof *pb->in_start);
    pb->in_list = calloc((size_t)n_edges + 1, sizeof *pb->in_list);
    if (!pb->cost || !pb->xfer || !pb->in_start || !pb->in_list) {
        sy__sched_problem_deinit(pb);
        return SY_E_NO_MEMORY;
    }
    return SY_OK;
}

void sy__sched_problem_deinit(sy__sched_problem *pb)
{
    free(pb->cost);
    free(pb->xfer);
    free(pb->in_start);
    free(pb->in_list);
    memset(pb, 0, sizeof *pb);
}

double sy__sched_evaluate(const sy__sched_problem *pb, const uint8_t *assign)
{
    /* seen[p] holds the devices p's value already went to. */
    uint8_t *seen = calloc((size_t)pb->n + 1, 1);
    if (!seen)
        return INFINITY;
    double total = 0.0;
    for (uint32_t i = 0; i < pb->n; i++) {
        uint32_t d = assign[i];
        if (d >= pb->n_dev) {
            total = INFINITY;
            break;
        }
        total += sy__sched_cost(pb, i, d);
        for (uint32_t e = pb->in_start[i]; e < pb->in_start[i + 1]; e++) {
            uint32_t p = pb->in_list[e];
            if (assign[p] == d || (seen[p] >> d & 1u))
                continue;
            seen[p] |= (uint8_t)(1u << d);
            total += sy__sched_xfer(pb, p, assign[p], d);
        }
    }
    free(seen);
    return total;
}

static uint32_t cheapest_device(const sy__sched_problem *pb, uint32_t n)
{
    uint32_t best = 0;
    for (uint32_t d = 1; d < pb->n_dev; d++)
        if (sy__sched_cost(pb, n, d) < sy__sched_cost(pb, n, best))
            best = d;
    return best;
}

double sy__sched_best_single(const sy__sched_problem *pb, uint8_t *out_assign)
{
    uint8_t *try = malloc((size_t)pb->n + 1);
    if (!try)
        return INFINITY;
    double best = INFINITY;
    for (uint32_t d = 0; d < pb->n_dev; d++) {
        for (uint32_t i = 0; i < pb->n; i++)
            try[i] = (uint8_t)(isfinite(sy__sched_cost(pb, i, d)) ? d : cheapest_device(pb, i));
        double t = sy__sched_evaluate(pb, try);
        if (t < best || d == 0) {
            best = t;
            memcpy(out_assign, try, pb->n);
        }
    }
    free(try);
    return best;
}

/* ----------------------------------------------------------- local search */

/* A move counts as a gain below this relative change (rounding). */
#define LS_EPS 1e-15

/* Incremental objective: per value and device, how many of its consumers
 * sit there, so that a move's change costs O(degree). */
typedef struct ls_state {
    const sy__sched_problem *pb;
    uint8_t *assign;
    uint32_t *out_start, *out_list; /* consumers of each node */
    uint32_t *count;                /* n * n_dev: consumers of p on device d */
} ls_state;

static sy_status ls_init(ls_state *s, const sy__sched_problem *pb, uint8_t *assign)
{
    memset(s, 0, sizeof *s);
    s->pb = pb;
    s->assign = assign;
    uint32_t n = pb->n, edges = pb->in_start[n];
    s->out_start = calloc((size_t)n + 1, sizeof *s->out_start);
    s->out_list = malloc(((size_t)edges + 1) * sizeof *s->out_list);
    s->count = calloc((size_t)n * pb->n_dev + 1, sizeof *s->count);
    if (!s->out_start || !s->out_list || !s->count)
        return SY_E_NO_MEMORY;
    for (uint32_t e = 0; e < edges; e++)
        s->out_start[pb->in_list[e] + 1]++;
    for (uint32_t i = 0; i < n; i++)
        s->out_start[i + 1] += s->out_start[i];
    uint32_t *fill = calloc((size_t)n + 1, sizeof *fill);
    if (!fill)
        return SY_E_NO_MEMORY;
    for (uint32_t i = 0; i < n; i++) {
        for (uint32_t e = pb->in_start[i]; e < pb->in_start[i + 1]; e++) {
            uint32_t p = pb->in_list[e];
            s->out_list[s->out_start[p] + fill[p]++] = i;
            s->count[(size_t)p * pb->n_dev + assign[i]]++;
        }
    }
    free(fill);
    return SY_OK;
}

static void ls_deinit(ls_state *s)
{
    free(s->out_start);
    free(s->out_list);
    free(s->count);
}

/* What node |v|'s value costs to ship from its device |from| to every
 * device its consumers sit on. */
static double ls_out_cost(const ls_state *s, uint32_t v, uint32_t from)
{
    const sy__sched_problem *pb = s->pb;
    double c = 0.0;
    for (uint32_t d = 0; d < pb->n_dev; d++)
        if (d != from && s->count[(size_t)v * pb->n_dev + d] > 0)
            c += sy__sched_xfer(pb, v, from, d);
    return c;
}

/* Moves node |v| to device |to| and returns the change of the objective. */
static double ls_move(ls_state *s, uint32_t v, uint32_t to)
{
    const sy__sched_problem *pb = s->pb;
    uint32_t from = s->assign[v], D = pb->n_dev;
    if (from == to)
        return 0.0;
    double delta = sy__sched_cost(pb, v, to) - sy__sched_cost(pb, v, from);
    delta += ls_out_cost(s, v, to) - ls_out_cost(s, v, from);
    for (uint32_t e = pb->in_start[v]; e < pb->in_start[v + 1]; e++) {
        uint32_t p = pb->in_list[e], dp = s->assign[p];
        uint32_t *cnt = &s->count[(size_t)p * D];
        if (dp != from && cnt[from] == 1)
            delta -= sy__sched_xfer(pb, p, dp, from);
        if (dp != to && cnt[to] == 0)
            delta += sy__sched_xfer(pb, p, dp, to);
        cnt[from]--;
        cnt[to]++;
    }
    s->assign[v] = (uint8_t)to;
    return delta;
}

/* Moves node |v| and every node next to it on one side (its consumers
 * when |consumers|, else its producers) that may run on |d| to |d|; keeps
 * the moves when they lower the objective, undoes them otherwise.  This
 * escapes the minimum where a value read on two devices could only leave
 * one of them if all its readers (or all its inputs) moved at once. */
static bool ls_try_star(ls_state *s, uint32_t v, uint32_t d, bool consumers, uint8_t *saved,
                        uint32_t *moved)
{
    const sy__sched_problem *pb = s->pb;
    uint32_t lo = consumers ? s->out_start[v] : pb->in_start[v];
    uint32_t hi = consumers ? s->out_start[v + 1] : pb->in_start[v + 1];
    const uint32_t *list = consumers ? s->out_list : pb->in_list;
    uint32_t n_moved = 0;
    double delta = 0.0;
    if (s->assign[v] != d) {
        saved[n_moved] = s->assign[v];
        moved[n_moved++] = v;
        delta += ls_move(s, v, d);
    }
    for (uint32_t e = lo; e < hi; e++) {
        uint32_t u = list[e];
        if (s->assign[u] == d || !isfinite(sy__sched_cost(pb, u, d)))
            continue;
        saved[n_moved] = s->assign[u];
        moved[n_moved++] = u;
        delta += ls_move(s, u, d);
    }
    if (n_moved < 2 || !(delta < -LS_EPS * (1.0 + fabs(delta)))) {
        while (n_moved-- > 0)
            ls_move(s, moved[n_moved], saved[n_moved]);
        return false;
    }
    return true;
}

/* Readers of one value past which sibling moves skip it. */
#define LS_SIBLING_MAX 32u

/* Moves |a| to |da| and |b| to |db| at once, each off its own device and
 * where it may run; keeps the moves when they lower the objective, undoes
 * them otherwise. */
static bool ls_try_two(ls_state *s, uint32_t a, uint32_t da, uint32_t b, uint32_t db)
{
    const sy__sched_problem *pb = s->pb;
    uint32_t fa = s->assign[a], fb = s->assign[b];
    if (fa == da || fb == db || !isfinite(sy__sched_cost(pb, a, da)) ||
        !isfinite(sy__sched_cost(pb, b, db)))
        return false;
    double delta = ls_move(s, a, da) + ls_move(s, b, db);
    if (delta < -LS_EPS * (1.0 + fabs(delta)))
        return true;
    ls_move(s, b, fb);
    ls_move(s, a, fa);
    return false;
}

double sy__sched_local_search(const sy__sched_problem *pb, uint8_t *assign)
{
    ls_state s;
    if (ls_init(&s, pb, assign) != SY_OK) {
        ls_deinit(&s);
        return sy__sched_evaluate(pb, assign);
    }
    /* A star is a node and its neighbours on one side: at most the larger
     * of its in- and out-degree plus one nodes. */
    uint32_t max_deg = 0;
    for (uint32_t v = 0; v < pb->n; v++) {
        uint32_t din = pb->in_start[v + 1] - pb->in_start[v];
        uint32_t dout = s.out_start[v + 1] - s.out_start[v];
        max_deg = din > max_deg ? din : max_deg;
        max_deg = dout > max_deg ? dout : max_deg;
    }
    uint8_t *saved = malloc((size_t)max_deg + 1);
    uint32_t *moved = malloc(((size_t)max_deg + 1) * sizeof *moved);
    if (!saved || !moved) {
        free(saved);
        free(moved);
        saved = NULL;
        moved = NULL;
    }
    bool improved = true;
    for (uint32_t round = 0; improved && round < 64; round++) {
        improved = false;
        for (uint32_t v = 0; v < pb->n; v++) {
            for (uint32_t d = 0; d < pb->n_dev; d++) {
                uint32_t from = assign[v];
                if (d == from || !isfinite(sy__sched_cost(pb, v, d)))
                    continue;
                double delta = ls_move(&s, v, d);
                if (delta < -LS_EPS * (1.0 + fabs(delta))) {
                    improved = true;
                    continue;
                }
                ls_move(&s, v, from);
            }
        }
        /* Pairs: a producer and one consumer moving together, each to any
         * device (the same one, or two: a value leaving the device its
         * readers share while one reader moves on), escape the local
         * minimum where either alone would add a transfer. */
        for (uint32_t v = 0; v < pb->n; v++) {
            for (uint32_t e = pb->in_start[v]; e < pb->in_start[v + 1]; e++) {
                uint32_t p = pb->in_list[e];
                for (uint32_t dp = 0; dp < pb->n_dev; dp++)
                    for (uint32_t dv = 0; dv < pb->n_dev; dv++)
                        improved |= ls_try_two(&s, p, dp, v, dv);
            }
        }
        /* Siblings: two readers of one value moving to one device share
         * its transfer there, which neither pays back alone (values with
         * at most LS_SIBLING_MAX readers: the pairs grow as its square). */
        for (uint32_t p = 0; p < pb->n; p++) {
            uint32_t lo = s.out_start[p], hi = s.out_start[p + 1];
            if (hi - lo > LS_SIBLING_MAX)
                continue;
            for (uint32_t a = lo; a < hi; a++)
                for (uint32_t b = a + 1; b < hi; b++)
                    for (uint32_t d = 0; d < pb->n_dev; d++)
                        improved |= ls_try_two(&s, s.out_list[a], d, s.out_list[b], d);
        }
        /* Stars: a node with all its consumers, or with all its producers. */
        for (uint32_t v = 0; v < pb->n && saved; v++) {
            for (uint32_t d = 0; d < pb->n_dev; d++) {
                if (!isfinite(sy__sched_cost(pb, v, d)))
                    continue;
                improved |= ls_try_star(&s, v, d, true, saved, moved);
                improved |= ls_try_star(&s, v, d, false, saved, moved);
            }
        }
    }
    free(saved);
    free(moved);
    ls_deinit(&s);
    return sy__sched_evaluate(pb, assign);
}
