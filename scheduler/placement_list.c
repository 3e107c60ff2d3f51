/* List scheduling for graphs the DP cannot take (wide frontiers): HEFT's
 * ordering by upward rank, each node on the device that completes it
 * earliest in the sequential cost model (its time plus the transfers its
 * placed producers need), then local search.  Restarts from every
 * single-device plan keep the result at or below the best of them. */
#include <math.h>
#include <stdlib.h>
#include <string.h>

#include "sched_problem.h"

typedef struct list_ctx {
    const sy__sched_problem *pb;
    uint32_t *out_start, *out_list; /* consumers */
    double *rank;
    uint32_t *heap;
    uint32_t heap_n;
} list_ctx;

static bool list_before(const list_ctx *c, uint32_t a, uint32_t b)
{
    return c->rank[a] > c->rank[b] || (c->rank[a] == c->rank[b] && a < b);
}

static void heap_push(list_ctx *c, uint32_t v)
{
    uint32_t i = c->heap_n++;
    c->heap[i] = v;
    while (i > 0) {
        uint32_t up = (i - 1) / 2;
        if (!list_before(c, c->heap[i], c->heap[up]))
            break;
        uint32_t t = c->heap[i];
        c->heap[i] = c->heap[up];
        c->heap[up] = t;
        i = up;
    }
}

static uint32_t heap_pop(list_ctx *c)
{
    uint32_t top = c->heap[0];
    c->heap[0] = c->heap[--c->heap_n];
    uint32_t i = 0;
    for (;;) {
        uint32_t l = 2 * i + 1, r = l + 1, m = i;
        if (l < c->heap_n && list_before(c, c->heap[l], c->heap[m]))
            m = l;
        if (r < c->heap_n && list_before(c, c->heap[r], c->heap[m]))
            m = r;
        if (m == i)
            break;
        uint32_t t = c->heap[i];
        c->heap[i] = c->heap[m];
        c->heap[m] = t;
        i = m;
    }
    return top;
}

/* Upward ranks over mean costs, as HEFT defines them. */
static void list_ranks(list_ctx *c)
{
    const sy__sched_problem *pb = c->pb;
    uint32_t D = pb->n_dev;
    for (uint32_t v = pb->n; v-- > 0;) {
        double sum = 0.0;
        uint32_t k = 0;
        for (uint32_t d = 0; d < D; d++) {
            double x = sy__sched_cost(pb, v, d);
            if (isfinite(x)) {
                sum += x;
                k++;
            }
        }
        double comm = 0.0;
        if (D > 1) {
            for (uint32_t s = 0; s < D; s++)
                for (uint32_t d = 0; d < D; d++)
                    if (s != d)
                        comm += sy__sched_xfer(pb, v, s, d);
            comm /= (double)(D * (D - 1));
        }
        double tail = 0.0;
        for (uint32_t e = c->out_start[v]; e < c->out_start[v + 1]; e++) {
            double r = comm + c->rank[c->out_list[e]];
            if (r > tail)
                tail = r;
        }
        c->rank[v] = (k ? sum / k : 0.0) + tail;
    }
}

/* Places every node greedily in rank order into |assign|. */
static sy_status list_greedy(list_ctx *c, uint8_t *assign)
{
    const sy__sched_problem *pb = c->pb;
    uint32_t n = pb->n, D = pb->n_dev;
    uint32_t *missing = calloc((size_t)n + 1, sizeof *missing);
    uint8_t *seen = calloc((size_t)n + 1, 1);
    if (!missing || !seen) {
        free(missing);
        free(seen);
        return SY_E_NO_MEMORY;
    }
    c->heap_n = 0;
    for (uint32_t v = 0; v < n; v++) {
        missing[v] = pb->in_start[v + 1] - pb->in_start[v];
        if (missing[v] == 0)
            heap_push(c, v);
    }
    while (c->heap_n > 0) {
        uint32_t v = heap_pop(c);
        double best = INFINITY;
        uint32_t best_d = 0;
        for (uint32_t d = 0; d < D; d++) {
            double t = sy__sched_cost(pb, v, d);
            if (!isfinite(t))
                continue;
            for (uint32_t e = pb->in_start[v]; e < pb->in_start[v + 1]; e++) {
                uint32_t p = pb->in_list[e];
                if (assign[p] != d && !(seen[p] >> d & 1u))
                    t += sy__sched_xfer(pb, p, assign[p], d);
            }
            if (t < best) {
                best = t;
                best_d = d;
            }
        }
        assign[v] = (uint8_t)best_d;
        for (uint32_t e = pb->in_start[v]; e < pb->in_start[v + 1]; e++) {
            uint32_t p = pb->in_list[e];
            if (assign[p] != best_d)
                seen[p] |= (uint8_t)(1u << best_d);
        }
        for (uint32_t e = c->out_start[v]; e < c->out_start[v + 1]; e++)
            if (--missing[c->out_list[e]] == 0)
                heap_push(c, c->out_list[e]);
    }
    free(missing);
    free(seen);
    return SY_OK;
}

/* Kicks of the iterated local search by problem size: each descent costs
 * a pass over the graph, and on a model's step (750 nodes, where a kick of
 * a few nodes rarely finds anything) 8 kicks made list planning 4x slower
 * (1.3 -> 5 ms) for the same plans. */
static uint32_t list_kicks(uint32_t n)
{
    return n == 0 ? 0 : n <= 64 ? 64 : n <= 256 ? 16 : 0;
}

/* xorshift64* step. */
static uint64_t list_rand(uint64_t *state)
{
    uint64_t x = *state;
    x ^= x >> 12;
    x ^= x << 25;
    x ^= x >> 27;
    *state = x;
    return x * 0x2545f4914f6cdd1dull;
}

sy_status sy__sched_list(const sy__sched_problem *pb, uint8_t *out_assign)
{
    uint32_t n = pb->n, D = pb->n_dev, edges = pb->in_start[n];
    list_ctx c = {.pb = pb};
    c.out_start = calloc((size_t)n + 2, sizeof *c.out_start);
    c.out_list = malloc(((size_t)edges + 1) * sizeof *c.out_list);
    c.rank = calloc((size_t)n + 1, sizeof *c.rank);
    c.heap = malloc(((size_t)n + 1) * sizeof *c.heap);
    uint32_t *fill = calloc((size_t)n + 1, sizeof *fill);
    uint8_t *try = calloc((size_t)n + 1, 1);
    sy_status st = SY_OK;
    if (!c.out_start || !c.out_list || !c.rank || !c.heap || !fill || !try) {
        st = SY_E_NO_MEMORY;
        goto out_free;
    }
    for (uint32_t v = 0; v < n; v++) {
        bool ok = false;
        for (uint32_t d = 0; d < D; d++)
            ok = ok || isfinite(sy__sched_cost(pb, v, d));
        if (!ok) {
            st = SY_E_UNSUPPORTED;
            goto out_free;
        }
    }
    for (uint32_t e = 0; e < edges; e++)
        c.out_start[pb->in_list[e] + 1]++;
    for (uint32_t v = 0; v < n; v++)
        c.out_start[v + 1] += c.out_start[v];
    for (uint32_t v = 0; v < n; v++)
        for (uint32_t e = pb->in_start[v]; e < pb->in_start[v + 1]; e++) {
            uint32_t p = pb->in_list[e];
            c.out_list[c.out_start[p] + fill[p]++] = v;
        }
    list_ranks(&c);
    st = list_greedy(&c, out_assign);
    if (st != SY_OK)
        goto out_free;
    double best = sy__sched_local_search(pb, out_assign);
    /* Restarts from each device's single-device plan: the greedy pass can
     * strand a chain on a device whose first node is cheap. */
    for (uint32_t d = 0; d < D; d++) {
        for (uint32_t v = 0; v < n; v++) {
            uint32_t pick = d;
            if (!isfinite(sy__sched_cost(pb, v, d))) {
                pick = 0;
                for (uint32_t k = 1; k < D; k++)
                    if (sy__sched_cost(pb, v, k) < sy__sched_cost(pb, v, pick))
                        pick = k;
            }
            try[v] = (uint8_t)pick;
        }
        double t = sy__sched_local_search(pb, try);
        if (t < best) {
            best = t;
            memcpy(out_assign, try, n);
        }
    }
    /* Iterated local search: the best plan with two to four nodes sent to
     * random devices, descended again, kept when better.  The moves above
     * change at most a node and its neighbours on one side; three nodes
     * that must move at once (seen on 5-node DAGs, 1.25x the optimum)
     * need a kick.  Deterministic: the generator starts from the size. */
    uint64_t rng = 0x9e3779b97f4a7c15ull ^ ((uint64_t)n << 8 | D);
    uint32_t kicks = list_kicks(n);
    for (uint32_t k = 0; k < kicks; k++) {
        memcpy(try, out_assign, n);
        for (uint32_t m = 0; m < 2 + k % 3; m++) {
            uint32_t v = (uint32_t)(list_rand(&rng) % n);
            uint32_t d = (uint32_t)(list_rand(&rng) % D);
            if (isfinite(sy__sched_cost(pb, v, d)))
                try[v] = (uint8_t)d;
        }
        double t = sy__sched_local_search(pb, try);
        if (t < best * (1.0 - 1e-12)) {
            best = t;
            memcpy(out_assign, try, n);
        }
    }
out_free:
    free(c.out_start);
    free(c.out_list);
    free(c.rank);
    free(c.heap);
    free(fill);
    free(try);
    return st;
}
