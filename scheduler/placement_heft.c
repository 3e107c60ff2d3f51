/* HEFT with insertion (Topcuoglu, Hariri and Wu's list scheduler) for the
 * overlapped step time: nodes by decreasing upward rank over mean node
 * and transfer costs, each put on the device where it finishes earliest,
 * allowed to start in an idle gap of that device's timeline.
 *
 * Resources follow the executor (plan_order.c): every device has a
 * timeline, and so has the host; a transfer holds the host (it is issued
 * and waited for by the issuing thread), and so does a node on a device
 * without events, which runs on the issuing thread.  Only nodes on
 * devices with events run beside the host.  A value moves to a device
 * once, and the move carries the per-switch synchronisation cost that the
 * problem's transfer costs include.
 *
 * HEFT's own schedule is a guess at the executor's: the executor issues
 * in plan_order's order, not HEFT's.  So the result is judged by
 * sy__makespan_eval() (the executor's order and timing), against the
 * single-device plans and the caller's hint (the DP's plan), and the best
 * is improved by local search (placement_heft_search.c) while the
 * makespan drops; a problem with a few thousand plans or fewer gets the
 * optimum from the makespan oracle (placement_exhaustive.c) instead. */
#include <math.h>
#include <stdlib.h>
#include <string.h>

#include "placement_heft_internal.h"

/* Local search runs when the problem is at most this many nodes: each
 * move is judged by a full simulation. */
#define HEFT_SEARCH_MAX_NODES 96u
/* Kicks of the iterated local search (small problems only): the moves
 * of sy__heft_search() end in local minima that two branches trading devices with a
 * third node moving as well escape only together. */
#define HEFT_KICKS 640u
#define HEFT_KICKS_STALE 240u
/* ... and at most this many per node without gain: a problem of a few
 * nodes has few plans to find. */
#define HEFT_KICKS_STALE_PER_NODE 24u
/* A problem with at most this many plans (allowed devices per node,
 * multiplied) gets the optimum from the oracle's branch and bound: fewer
 * simulations than the iterated search makes, and the optimum, whose
 * basin the kicks can miss (a 4-node DAG on 3 devices came out 45% above
 * it). */
#define HEFT_EXACT_MAX_PLANS 4096u
/* Transfers one node may need on one device (its distinct producers). */
#define HEFT_MAX_XFERS 64u

typedef struct tl {
    double *s, *e; /* busy intervals, sorted, disjoint */
    uint32_t n, cap;
} tl;

typedef struct span {
    double s, e;
} span;

typedef struct heft {
    const sy__sched_problem *pb;
    uint32_t async;
    uint32_t *out_start, *out_list;
    double *rank, *finish, *arrive; /* arrive: n * n_dev, when a value reached a device */
    uint8_t *moved;                 /* devices each value was moved to */
    uint32_t *heap, heap_n;
    tl dev[SY__SCHED_MAX_DEVICES], host;
} heft;

/* End of the first busy interval of |a| that overlaps [t, t + len), or
 * -1 when none does. */
static double tl_conflict(const tl *a, double t, double len)
{
    uint32_t lo = 0, hi = a->n;
    while (lo < hi) { /* first interval ending after t */
        uint32_t mid = (lo + hi) / 2;
        if (a->e[mid] <= t)
            lo = mid + 1;
        else
            hi = mid;
    }
    if (lo < a->n && a->s[lo] < t + len && len > 0)
        return a->e[lo];
    return -1;
}

/* Earliest start at or after |ready| of |len| seconds free on |a|, on |b|
 * (may be NULL) and clear of the |nx| tentative spans |x|. */
static double tl_fit(const tl *a, const tl *b, const span *x, uint32_t nx, double ready, double len)
{
    double t = ready;
    for (bool moved = true; moved;) {
        moved = false;
        double c = tl_conflict(a, t, len);
        if (c >= 0) {
            t = c;
            moved = true;
        }
        if (b && (c = tl_conflict(b, t, len)) >= 0) {
            t = c;
            moved = true;
        }
        for (uint32_t k = 0; k < nx && len > 0; k++)
            if (x[k].s < t + len && x[k].e > t) {
                t = x[k].e;
                moved = true;
            }
    }
    return t;
}

static sy_status tl_insert(tl *a, double s, double e)
{
    if (!(e > s))
        return SY_OK;
    if (a->n == a->cap) {
        uint32_t cap = a->cap ? a->cap * 2 : 64;
        double *ns = realloc(a->s, cap * sizeof *ns);
        if (!ns)
            return SY_E_NO_MEMORY;
        a->s = ns;
        double *ne = realloc(a->e, cap * sizeof *ne);
        if (!ne)
            return SY_E_NO_MEMORY;
        a->e = ne;
        a->cap = cap;
    }
    uint32_t at = a->n;
    while (at > 0 && a->s[at - 1] > s)
        at--;
    memmove(&a->s[at + 1], &a->s[at], (a->n - at) * sizeof *a->s);
    memmove(&a->e[at + 1], &a->e[at], (a->n - at) * sizeof *a->e);
    a->s[at] = s;
    a->e[at] = e;
    a->n++;
    return SY_OK;
}

static bool before(const heft *h, uint32_t a, uint32_t b)
{
    return h->rank[a] > h->rank[b] || (h->rank[a] == h->rank[b] && a < b);
}

static void hp_push(heft *h, uint32_t v)
{
    uint32_t i = h->heap_n++;
    while (i > 0 && before(h, v, h->heap[(i - 1) / 2])) {
        h->heap[i] = h->heap[(i - 1) / 2];
        i = (i - 1) / 2;
    }
    h->heap[i] = v;
}

static uint32_t hp_pop(heft *h)
{
    uint32_t top = h->heap[0], x = h->heap[--h->heap_n], i = 0;
    for (;;) {
        uint32_t l = 2 * i + 1, r = l + 1, s = i;
        uint32_t best = x;
        if (l < h->heap_n && before(h, h->heap[l], best)) {
            s = l;
            best = h->heap[l];
        }
        if (r < h->heap_n && before(h, h->heap[r], best))
            s = r;
        if (s == i)
            break;
        h->heap[i] = h->heap[s];
        i = s;
    }
    if (h->heap_n)
        h->heap[i] = x;
    return top;
}

/* Upward ranks: mean time over the devices a node may use, plus the
 * largest of (mean transfer + rank) over its consumers. */
static void heft_ranks(heft *h)
{
    const sy__sched_problem *pb = h->pb;
    uint32_t D = pb->n_dev;
    for (uint32_t v = pb->n; v-- > 0;) {
        double sum = 0;
        uint32_t k = 0;
        for (uint32_t d = 0; d < D; d++)
            if (isfinite(sy__sched_cost(pb, v, d))) {
                sum += sy__sched_cost(pb, v, d);
                k++;
            }
        double comm = 0;
        for (uint32_t s = 0; D > 1 && s < D; s++)
            for (uint32_t d = 0; d < D; d++)
                comm += s != d ? sy__sched_xfer(pb, v, s, d) : 0;
        comm = D > 1 ? comm / (double)(D * (D - 1)) : 0;
        double tail = 0;
        for (uint32_t e = h->out_start[v]; e < h->out_start[v + 1]; e++)
            tail = fmax(tail, comm + h->rank[h->out_list[e]]);
        h->rank[v] = (k ? sum / k : 0) + tail;
    }
}

/* Earliest finish of |v| on |d| given the nodes placed so far; fills the
 * transfers it needs into |x| (*nx of them), and commits them and the
 * node to the timelines when |commit|. */
static double heft_try(heft *h, const uint8_t *assign, uint32_t v, uint32_t d, span *x,
                       uint32_t *nx, bool commit, sy_status *st)
{
    const sy__sched_problem *pb = h->pb;
    uint32_t D = pb->n_dev;
    double ready = 0;
    *nx = 0;
    for (uint32_t e = pb->in_start[v]; e < pb->in_start[v + 1]; e++) {
        uint32_t p = pb->in_list[e], src = assign[p];
        if (src == d) {
            ready = fmax(ready, h->finish[p]);
            continue;
        }
        if (h->moved[p] >> d & 1u) {
            ready = fmax(ready, h->arrive[(size_t)p * D + d]);
            continue;
        }
        double len = sy__sched_xfer(pb, p, src, d);
        double t = tl_fit(&h->host, NULL, x, *nx, h->finish[p], len);
        if (*nx < HEFT_MAX_XFERS)
            x[(*nx)++] = (span){t, t + len};
        ready = fmax(ready, t + len);
        if (commit) {
            h->moved[p] |= (uint8_t)(1u << d);
            h->arrive[(size_t)p * D + d] = t + len;
        }
    }
    bool sync = !(h->async >> d & 1u);
    double len = sy__sched_cost(pb, v, d);
    double t = tl_fit(&h->dev[d], sync ? &h->host : NULL, sync ? x : NULL, sync ? *nx : 0, ready,
                      len);
    if (commit) {
        for (uint32_t k = 0; k < *nx && *st == SY_OK; k++)
            *st = tl_insert(&h->host, x[k].s, x[k].e);
        if (*st == SY_OK)
            *st = tl_insert(&h->dev[d], t, t + len);
        if (*st == SY_OK && sync)
            *st = tl_insert(&h->host, t, t + len);
        h->finish[v] = t + len;
    }
    return t + len;
}

/* Empties the timelines for another construction. */
static void heft_reset(heft *h)
{
    for (uint32_t d = 0; d < h->pb->n_dev; d++)
        h->dev[d].n = 0;
    h->host.n = 0;
    memset(h->moved, 0, h->pb->n);
}

static sy_status heft_place(heft *h, uint8_t *assign)
{
    const sy__sched_problem *pb = h->pb;
    uint32_t n = pb->n, D = pb->n_dev;
    uint32_t *missing = malloc(((size_t)n + 1) * sizeof *missing);
    if (!missing)
        return SY_E_NO_MEMORY;
    h->heap_n = 0;
    for (uint32_t v = 0; v < n; v++) {
        missing[v] = pb->in_start[v + 1] - pb->in_start[v];
        if (!missing[v])
            hp_push(h, v);
    }
    span x[HEFT_MAX_XFERS];
    uint32_t nx;
    sy_status st = SY_OK;
    while (h->heap_n && st == SY_OK) {
        uint32_t v = hp_pop(h), best_d = 0;
        double best = INFINITY;
        for (uint32_t d = 0; d < D; d++) {
            double c = sy__sched_cost(pb, v, d);
            if (!isfinite(c))
                continue;
            double f = heft_try(h, assign, v, d, x, &nx, false, &st);
            if (f < best || (f == best && c < sy__sched_cost(pb, v, best_d))) {
                best = f;
                best_d = d;
            }
        }
        assign[v] = (uint8_t)best_d;
        heft_try(h, assign, v, best_d, x, &nx, true, &st);
        for (uint32_t e = h->out_start[v]; e < h->out_start[v + 1]; e++)
            if (--missing[h->out_list[e]] == 0)
                hp_push(h, h->out_list[e]);
    }
    free(missing);
    return st;
}

/* Keeps |cand| in |best| when its makespan is lower. */
static void keep_better(sy__makespan_ws *ws, const uint8_t *cand, uint8_t *best, double *best_t)
{
    double t = sy__makespan_eval(ws, cand);
    if (t < *best_t) {
        *best_t = t;
        memcpy(best, cand, ws->pb->n);
    }
}

/* The number of plans of |pb|, or |cap| + 1 when there are more. */
static uint32_t plan_count(const sy__sched_problem *pb, uint32_t cap)
{
    uint64_t plans = 1;
    for (uint32_t v = 0; v < pb->n && plans <= cap; v++) {
        uint32_t k = 0;
        for (uint32_t d = 0; d < pb->n_dev; d++)
            k += isfinite(sy__sched_cost(pb, v, d));
        plans *= k;
    }
    return plans <= cap ? (uint32_t)plans : cap + 1;
}

/* The kicks' generator (xorshift64). */
static uint64_t heft_rand(uint64_t *state)
{
    uint64_t x = *state;
    x ^= x << 13;
    x ^= x >> 7;
    x ^= x << 17;
    return *state = x;
}

/* Kick |kick| of the iterated search: writes into |cand| a plan to search
 * from, by the kick's turn: a random plan (a start far from every
 * construction); HEFT again with its ranks jittered (another
 * construction); the best plan with a whole chain on another device and
 * the best single move after it (the branch the chain displaces); the
 * best plan with a few random nodes on random allowed devices.  Returns
 * false when HEFT fails. */
static bool heft_kick(heft *h, sy__makespan_ws *ws, uint32_t kick, const uint8_t *best,
                      const double *base_rank, uint64_t *rng, uint8_t *cand)
{
    const sy__sched_problem *pb = ws->pb;
    const uint32_t n = pb->n, D = pb->n_dev;
    if (kick % 8 == 6) {
        for (uint32_t v = 0; v < n; v++) {
            uint32_t d = (uint32_t)(heft_rand(rng) % D);
            for (uint32_t q = 0; !isfinite(sy__sched_cost(pb, v, d)) && q < D; q++)
                d = q;
            cand[v] = (uint8_t)d;
        }
        return true;
    }
    if (kick % 2) {
        for (uint32_t v = 0; v < n; v++)
            h->rank[v] = base_rank[v] * (0.6 + 0.8 * (double)(heft_rand(rng) >> 11) * 0x1p-53);
        heft_reset(h);
        return heft_place(h, cand) == SY_OK;
    }
    memcpy(cand, best, n);
    if (kick % 4 == 2) {
        uint64_t r = heft_rand(rng);
        if (sy__heft_put_chain(ws, cand, (uint32_t)(r % n), (uint32_t)((r >> 32) % D)))
            sy__heft_best_single_move(ws, cand);
        else
            memcpy(cand, best, n);
        return true;
    }
    for (uint32_t j = 0; j < 1 + kick % 5; j++) {
        uint64_t r = heft_rand(rng);
        uint32_t v = (uint32_t)(r % n), d = (uint32_t)((r >> 32) % D);
        if (isfinite(sy__sched_cost(pb, v, d)))
            cand[v] = (uint8_t)d;
    }
    return true;
}

sy_status sy__sched_heft(const sy__sched_problem *pb, uint32_t async_mask, const uint8_t *hint,
                         uint8_t *out_assign, double *out_makespan)
{
    uint32_t n = pb->n, D = pb->n_dev, edges = pb->in_start[n];
    for (uint32_t v = 0; v < n; v++) {
        bool ok = false;
        for (uint32_t d = 0; d < D; d++)
            ok = ok || isfinite(sy__sched_cost(pb, v, d));
        if (!ok)
            return SY_E_UNSUPPORTED;
    }
    heft h = {.pb = pb, .async = async_mask};
    sy__makespan_ws ws;
    sy_status st = sy__makespan_ws_init(&ws, pb, async_mask);
    if (st != SY_OK)
        return st;
    h.out_start = ws.out_start; /* the same consumer lists */
    h.out_list = ws.out_list;
    (void)edges;
    h.rank = calloc((size_t)n + 1, sizeof *h.rank);
    h.finish = calloc((size_t)n + 1, sizeof *h.finish);
    h.arrive = calloc((size_t)n * D + 1, sizeof *h.arrive);
    h.moved = calloc((size_t)n + 1, 1);
    h.heap = malloc(((size_t)n + 1) * sizeof *h.heap);
    uint8_t *cand = calloc((size_t)n + 1, 1), *best = calloc((size_t)n + 1, 1);
    uint8_t *saved = calloc((size_t)n + 1, 1);
    uint32_t *stack = malloc(((size_t)n + 1) * sizeof *stack);
    double *base_rank = malloc(((size_t)n + 1) * sizeof *base_rank);
    if (!h.rank || !h.finish || !h.arrive || !h.moved || !h.heap || !cand || !best || !saved ||
        !stack || !base_rank) {
        st = SY_E_NO_MEMORY;
        goto out_free;
    }
    heft_ranks(&h);
    memcpy(base_rank, h.rank, sizeof *base_rank * n);
    st = heft_place(&h, cand);
    if (st != SY_OK)
        goto out_free;
    /* Candidates: HEFT's plan, the hint, each single-device plan; on a
     * small problem each is improved by local search (they end in
     * different local minima), on a large one only compared; on one
     * with few plans the oracle's optimum (in |saved|) is taken after
     * them, unless one of the oracle's limits refuses the problem. */
    bool exact = plan_count(pb, HEFT_EXACT_MAX_PLANS) <= HEFT_EXACT_MAX_PLANS &&
                 sy__sched_exhaustive_makespan(pb, async_mask, saved) == SY_OK;
    bool search = !exact && n <= HEFT_SEARCH_MAX_NODES;
    double best_t = INFINITY;
    for (uint32_t k = 0; k < D + 2; k++) {
        if (k == 1) {
            if (!hint)
                continue;
            memcpy(cand, hint, n);
        } else if (k >= 2) {
            uint32_t d = k - 2;
            for (uint32_t v = 0; v < n; v++) {
                uint32_t pick = d;
                for (uint32_t q = 0; !isfinite(sy__sched_cost(pb, v, pick)) && q < D; q++)
                    pick = q;
                for (uint32_t q = 0; pick != d && q < D; q++)
                    if (sy__sched_cost(pb, v, q) < sy__sched_cost(pb, v, pick))
                        pick = q;
                cand[v] = (uint8_t)pick;
            }
        }
        if (k == 0 || search) {
            double t = sy__makespan_eval(&ws, cand);
            if (search && isfinite(t))
                t = sy__heft_search(&ws, cand, t, stack, saved, true);
            if (t < best_t) {
                best_t = t;
                memcpy(best, cand, n);
            }
        } else {
            keep_better(&ws, cand, best, &best_t);
        }
    }
    if (exact)
        keep_better(&ws, saved, best, &best_t);
    /* Iterated local search: kick the best plan, search again, keep what
     * improves.  A fixed generator seeded from the problem's size keeps
     * plans reproducible. */
    uint64_t rng = 0x9e3779b97f4a7c15ull ^ ((uint64_t)n << 8 | D);
    uint32_t stale = 0, stale_max = HEFT_KICKS_STALE_PER_NODE * n;
    if (stale_max > HEFT_KICKS_STALE)
        stale_max = HEFT_KICKS_STALE;
    for (uint32_t kick = 0; search && n <= SY__HEFT_SWAP_MAX_NODES && kick < HEFT_KICKS &&
                            stale < stale_max;
         kick++) {
        if (!heft_kick(&h, &ws, kick, best, base_rank, &rng, cand))
            break;
        double t = sy__makespan_eval(&ws, cand);
        if (isfinite(t))
            t = sy__heft_search(&ws, cand, t, stack, saved, false);
        stale++;
        /* Equal plans are taken too: the makespan has wide plateaus
         * (a node off the critical path moves it not at all). */
        if (t <= best_t) {
            if (t < best_t * (1.0 - 1e-12))
                stale = 0;
            best_t = t;
            memcpy(best, cand, n);
        }
    }
    /* The kicks rarely hit two given nodes on two given devices (two
     * siblings that must leave a shared device, each to its own); the
     * n^2 D^2 pair moves, too costly after every kick, run on the best. */
    if (search && n <= SY__HEFT_SWAP_MAX_NODES && isfinite(best_t))
        best_t = sy__heft_pair_search(&ws, best, best_t, stack, saved);
    memcpy(out_assign, best, n);
    if (out_makespan)
        *out_makespan = best_t;
out_free:
    for (uint32_t d = 0; d < D; d++) {
        free(h.dev[d].s);
        free(h.dev[d].e);
    }
    free(h.host.s);
    free(h.host.e);
    free(h.rank);
    free(h.finish);
    free(h.arrive);
    free(h.moved);
    free(h.heap);
    free(cand);
    free(best);
    free(saved);
    free(stack);
    free(base_rank);
    sy__makespan_ws_deinit(&ws);
    return st;
}
