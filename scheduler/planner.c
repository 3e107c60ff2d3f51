/* The planner object (profiles, plan cache) and one planning run:
 * capability, costs, placement with leaf homes, memory budgets, plan. */
#include <errno.h>
#include <math.h>
#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

#include "plan_internal.h"
#include "plan_order.h"

#define MIB (1024.0 * 1024.0)
/* Rounds of moving nodes off over-full devices before giving up. */
#define MEMORY_ROUNDS 16u

double sy__now(void)
{
    struct timespec ts;
    clock_gettime(CLOCK_MONOTONIC, &ts);
    return (double)ts.tv_sec + (double)ts.tv_nsec * 1e-9;
}

sy_status sy__planner_fail(sy_planner *pl, sy_status st, const char *fmt, ...)
{
    va_list ap;
    va_start(ap, fmt);
    vsnprintf(pl->last_error, sizeof pl->last_error, fmt, ap);
    va_end(ap);
    return st;
}

sy_status sy_planner_create(sy_runtime *rt, sy_planner **out_planner)
{
    if (!out_planner)
        return SY_E_INVALID_ARG;
    *out_planner = NULL;
    if (!rt)
        return SY_E_INVALID_ARG;
    sy_planner *pl = calloc(1, sizeof *pl);
    if (!pl)
        return SY_E_NO_MEMORY;
    pl->rt = rt;
    *out_planner = pl;
    return SY_OK;
}

void sy_planner_destroy(sy_planner *pl)
{
    if (!pl)
        return;
    sy__cache_clear(pl);
    for (uint32_t i = 0; i < pl->n_profiles; i++)
        sy__profile_destroy(pl->profiles[i]);
    free(pl->profiles);
    free(pl->exclusions);
    free(pl);
}

const char *sy_planner_last_error(const sy_planner *pl)
{
    return pl ? pl->last_error : "";
}

sy_status sy_planner_query_stats(const sy_planner *pl, sy_planner_stats *out_stats)
{
    if (!out_stats)
        return SY_E_INVALID_ARG;
    memset(out_stats, 0, sizeof *out_stats);
    if (!pl)
        return SY_E_INVALID_ARG;
    out_stats->hits = pl->hits;
    out_stats->misses = pl->misses;
    out_stats->entries = pl->n_cache;
    return SY_OK;
}

static sy_status read_file(sy_planner *pl, const char *path, char **out, size_t *out_len)
{
    *out = NULL;
    FILE *f = fopen(path, "rb");
    if (!f)
        return sy__planner_fail(pl, SY_E_IO, "cannot open profile '%s': %s", path, strerror(errno));
    size_t cap = 4096, len = 0;
    char *buf = malloc(cap);
    sy_status st = buf ? SY_OK : SY_E_NO_MEMORY;
    while (st == SY_OK) {
        if (len == cap) {
            char *grown = cap < ((size_t)64 << 20) ? realloc(buf, cap * 2) : NULL;
            if (!grown) {
                st = sy__planner_fail(pl, SY_E_LIMIT, "profile '%s' is larger than 64 MiB", path);
                break;
            }
            buf = grown;
            cap *= 2;
        }
        size_t n = fread(buf + len, 1, cap - len, f);
        len += n;
        if (n == 0) {
            if (ferror(f))
                st = sy__planner_fail(pl, SY_E_IO, "cannot read profile '%s'", path);
            break;
        }
    }
    fclose(f);
    if (st != SY_OK) {
        free(buf);
        return st;
    }
    *out = buf;
    *out_len = len;
    return SY_OK;
}

sy_status sy_planner_load_profile(sy_planner *pl, const char *path)
{
    if (!pl)
        return SY_E_INVALID_ARG;
    if (!path)
        return sy__planner_fail(pl, SY_E_INVALID_ARG, "load_profile: no path given");
    return sy__planner_load_profile_for(pl, path, NULL);
}

sy_status sy__planner_load_profile_for(sy_planner *pl, const char *path, const char *device)
{
    char *json = NULL;
    size_t len = 0;
    sy_status st = read_file(pl, path, &json, &len);
    if (st != SY_OK)
        return st;
    sy__profile *p = NULL;
    st = sy__profile_parse(json, len, path, &p, pl->last_error, sizeof pl->last_error);
    free(json);
    if (st != SY_OK)
        return st;
    if (device && strcmp(p->device, device) != 0) {
        st = sy__planner_fail(pl, SY_E_NOT_FOUND, "profile '%s' describes device '%s', not '%s'",
                              path, p->device, device);
        sy__profile_destroy(p);
        return st;
    }
    uint32_t dev;
    if (sy_runtime_find_device(pl->rt, p->device, &dev) != SY_OK) {
        st = sy__planner_fail(pl, SY_E_NOT_FOUND,
                              "profile '%s' describes device '%s', which this runtime lacks", path,
                              p->device);
        sy__profile_destroy(p);
        return st;
    }
    return sy__planner_install_profile(pl, p);
}

sy_status sy__planner_install_profile(sy_planner *pl, sy__profile *p)
{
    uint32_t at = 0;
    while (at < pl->n_profiles && strcmp(pl->profiles[at]->device, p->device) != 0)
        at++;
    if (at == pl->cap_profiles) {
        uint32_t cap = pl->cap_profiles ? pl->cap_profiles * 2 : 4;
        sy__profile **grown = realloc(pl->profiles, cap * sizeof *grown);
        if (!grown) {
            sy_status st = sy__planner_fail(pl, SY_E_NO_MEMORY, "out of memory keeping profile '%s'",
                                            p->origin);
            sy__profile_destroy(p);
            return st;
        }
        pl->profiles = grown;
        pl->cap_profiles = cap;
    }
    if (at < pl->n_profiles)
        sy__profile_destroy(pl->profiles[at]);
    else
        pl->n_profiles++;
    pl->profiles[at] = p;
    pl->profile_hash = 0;
    for (uint32_t i = 0; i < pl->n_profiles; i++)
        pl->profile_hash = (pl->profile_hash ^ pl->profiles[i]->hash) * 0x100000001b3ull + i;
    /* Cached plans were costed with the old figures. */
    sy__cache_clear(pl);
    return SY_OK;
}

sy_status sy_planner_exclude(sy_planner *pl, const char *pattern, uint32_t device,
                             const char *reason)
{
    if (!pl)
        return SY_E_INVALID_ARG;
    if (!pattern || !pattern[0] || strlen(pattern) >= SY_NAME_MAX * 2)
        return sy__planner_fail(pl, SY_E_INVALID_ARG, "exclude: pattern is empty or too long");
    if (device >= sy_runtime_device_count(pl->rt))
        return sy__planner_fail(pl, SY_E_NOT_FOUND, "exclude: no device %u (the runtime has %u)",
                                device, sy_runtime_device_count(pl->rt));
    if (pl->n_exclusions == SY__MAX_EXCLUSIONS)
        return sy__planner_fail(pl, SY_E_LIMIT, "exclude: at most %u exclusions",
                                SY__MAX_EXCLUSIONS);
    if (!pl->exclusions) {
        pl->exclusions = calloc(SY__MAX_EXCLUSIONS, sizeof *pl->exclusions);
        if (!pl->exclusions)
            return sy__planner_fail(pl, SY_E_NO_MEMORY, "exclude: out of memory");
    }
    sy__exclusion *e = &pl->exclusions[pl->n_exclusions++];
    snprintf(e->glob, sizeof e->glob, "%s", pattern);
    e->device = device;
    snprintf(e->reason, sizeof e->reason, "%s", reason ? reason : "");
    uint64_t h = pl->exclusion_hash ^ 0x2545f4914f6cdd1dull;
    for (const char *p = pattern; *p; p++)
        h = (h ^ (uint8_t)*p) * 0x100000001b3ull;
    pl->exclusion_hash = (h ^ device) * 0x9e3779b97f4a7c15ull;
    /* Cached plans may use the pair. */
    sy__cache_clear(pl);
    return SY_OK;
}

static const sy__profile *profile_for(const sy_planner *pl, const char *device)
{
    for (uint32_t i = 0; i < pl->n_profiles; i++)
        if (strcmp(pl->profiles[i]->device, device) == 0)
            return pl->profiles[i];
    return NULL;
}

static sy_status ctx_alloc(sy__plan_ctx *c)
{
    size_t nn = (size_t)c->n_nodes + 1, nt = (size_t)c->n_tensors + 1, D = c->D;
    c->value_of = malloc(nt * sizeof *c->value_of);
    c->dec = malloc(nn * sizeof *c->dec);
    c->dec_of = malloc(nn * sizeof *c->dec_of);
    c->leaf_readers = calloc(nt, sizeof *c->leaf_readers);
    c->leaf_writer = malloc(nt * sizeof *c->leaf_writer);
    c->cons_start = calloc(nn + 1, sizeof *c->cons_start);
    c->supported = calloc(nn, 1);
    c->allowed = calloc(nn, 1);
    c->evicted = calloc(nn, 1);
    c->pin_of = malloc(nn * sizeof *c->pin_of);
    c->why_code = calloc(nn * D, 1);
    c->why_text = malloc(nn * D * sizeof *c->why_text);
    c->node_s = malloc(nn * D * sizeof *c->node_s);
    c->node_j = malloc(nn * D * sizeof *c->node_j);
    c->unmeasured = calloc(nn, 1);
    c->leaf_home = malloc(nt);
    c->dec_bytes = malloc(nn * sizeof *c->dec_bytes);
    c->assign = calloc(nn, 1);
    if (!c->value_of || !c->dec || !c->dec_of || !c->leaf_readers || !c->leaf_writer ||
        !c->cons_start || !c->supported || !c->allowed || !c->evicted || !c->pin_of ||
        !c->why_code || !c->why_text || !c->node_s || !c->node_j || !c->unmeasured ||
        !c->leaf_home || !c->assign || !c->dec_bytes)
        return sy__planner_fail(c->pl, SY_E_NO_MEMORY, "out of memory planning %u nodes",
                                c->n_nodes);
    return SY_OK;
}

/* Solves c->pb into c->assign with the requested algorithm. */
static sy_status planner_solve(sy__plan_ctx *c)
{
    sy_plan_algorithm a = c->req->algorithm;
    sy_status st;
    if (a == SY_PLAN_AUTO || a == SY_PLAN_DP) {
        sy__dp_stats ds;
        st = c->memo ? SY_OK : sy__dp_memo_create(&c->memo);
        if (st == SY_OK)
            st = sy__sched_dp_memo(&c->pb, true, c->memo, c->assign, &ds);
        if (st == SY_OK) {
            snprintf(c->algorithm, sizeof c->algorithm,
                     "dp (%u blocks, %u solved, frontier %u, %u states)", ds.blocks, ds.classes,
                     ds.max_frontier, ds.max_states);
            return SY_OK;
        }
        if (st != SY_E_LIMIT)
            return sy__planner_fail(c->pl, st, "dynamic programme failed: %s", sy_status_str(st));
        if (a == SY_PLAN_DP)
            return sy__planner_fail(c->pl, SY_E_LIMIT,
                                    "the graph is not chain-like enough for the DP (%u live "
                                    "values at once, %u states); use the list scheduler",
                                    ds.max_frontier, ds.max_states);
        st = sy__sched_list(&c->pb, c->assign);
        snprintf(c->algorithm, sizeof c->algorithm, "list (dp declined: %u live values)",
                 ds.max_frontier);
    } else if (a == SY_PLAN_LIST) {
        st = sy__sched_list(&c->pb, c->assign);
        snprintf(c->algorithm, sizeof c->algorithm, "list");
    } else {
        st = sy__sched_exhaustive(&c->pb, c->assign);
        if (st == SY_E_LIMIT)
            return sy__planner_fail(c->pl, st,
                                    "exhaustive search takes at most %u nodes; this graph has %u",
                                    SY__SCHED_EXHAUSTIVE_MAX, c->n_dec);
        snprintf(c->algorithm, sizeof c->algorithm, "exhaustive");
    }
    if (st != SY_OK)
        return sy__planner_fail(c->pl, st, "placement failed: %s", sy_status_str(st));
    return SY_OK;
}

/* Counts leaf transfers the current placement needs. */
static uint32_t leaf_moves(const sy__plan_ctx *c)
{
    uint32_t moves = 0;
    for (uint32_t k = 0; k < c->n_dec; k++) {
        const sy_node *n = sy_graph_node(c->g, c->dec[k]);
        for (uint32_t j = 0; j < n->n_inputs; j++) {
            uint32_t v = c->value_of[n->inputs[j]->id];
            if ((v & SY__LEAF_BIT) && c->leaf_writer[v & ~SY__LEAF_BIT] != k &&
                c->leaf_home[v & ~SY__LEAF_BIT] != c->assign[k])
                moves++;
        }
    }
    return moves;
}

/* Leaves tried at another home after the re-homing rounds, at most. */
#define SY__HOME_TRIES 8u

/* The re-homing rounds stop at a local optimum: with a leaf's readers
 * posed for its home, the solver has no reason to gather them elsewhere (a
 * tie in the relaxed first solve decides where).  So each leaf still read
 * on several devices (the first SY__HOME_TRIES) is tried at its other
 * reader devices: posed, solved, re-homed; a better placement is kept. */
static sy_status planner_try_homes(sy__plan_ctx *c, uint8_t *best_assign, uint8_t *best_home,
                                   double *best)
{
    uint8_t *mask = malloc(c->n_tensors + 1);
    if (!mask)
        return sy__planner_fail(c->pl, SY_E_NO_MEMORY, "out of memory placing leaves");
    memcpy(c->assign, best_assign, c->n_dec);
    sy__ctx_leaf_masks(c, mask);
    sy_status st = SY_OK;
    uint32_t tries = 0;
    for (uint32_t t = 0; t < c->n_tensors && tries < SY__HOME_TRIES && st == SY_OK; t++) {
        if (c->leaf_writer[t] != SY__NONE || (mask[t] & (mask[t] - 1u)) == 0)
            continue;
        tries++;
        for (uint32_t h = 0; h < c->D && st == SY_OK; h++) {
            if (!(mask[t] >> h & 1u) || h == best_home[t])
                continue;
            memcpy(c->leaf_home, best_home, c->n_tensors);
            c->leaf_home[t] = (uint8_t)h;
            st = sy__ctx_problem(c);
            if (st == SY_OK)
                st = planner_solve(c);
            for (int pass = 0; pass < 2 && st == SY_OK; pass++) {
                double obj = sy__ctx_objective(c);
                if (obj < *best * (1.0 - 1e-12)) {
                    *best = obj;
                    memcpy(best_assign, c->assign, c->n_dec);
                    memcpy(best_home, c->leaf_home, c->n_tensors);
                }
                sy__ctx_home_leaves(c);
            }
        }
    }
    free(mask);
    return st;
}

/* Places nodes and leaves.  First with leaves free to follow their
 * readers (a relaxation: if that placement moves no leaf it is optimal
 * outright), then with leaves fixed at their homes, re-homing after each
 * solve while the objective improves, then with leaves read on several
 * devices tried at their other homes. */
static sy_status planner_place(sy__plan_ctx *c)
{
    memset(c->leaf_home, SY__NO_DEVICE, c->n_tensors);
    sy_status st = sy__ctx_problem(c);
    if (st == SY_OK)
        st = planner_solve(c);
    if (st != SY_OK)
        return st;
    sy__ctx_home_leaves(c);
    if (leaf_moves(c) == 0)
        return SY_OK;
    uint8_t *best_assign = malloc(c->n_dec + 1), *best_home = malloc(c->n_tensors + 1);
    if (!best_assign || !best_home) {
        free(best_assign);
        free(best_home);
        return sy__planner_fail(c->pl, SY_E_NO_MEMORY, "out of memory placing leaves");
    }
    double best = sy__ctx_objective(c);
    memcpy(best_assign, c->assign, c->n_dec);
    memcpy(best_home, c->leaf_home, c->n_tensors);
    for (uint32_t round = 0; round < 3 && st == SY_OK; round++) {
        st = sy__ctx_problem(c);
        if (st == SY_OK)
            st = planner_solve(c);
        if (st != SY_OK)
            break;
        sy__ctx_home_leaves(c);
        double obj = sy__ctx_objective(c);
        if (!(obj < best * (1.0 - 1e-12)))
            break;
        best = obj;
        memcpy(best_assign, c->assign, c->n_dec);
        memcpy(best_home, c->leaf_home, c->n_tensors);
    }
    if (st == SY_OK)
        st = planner_try_homes(c, best_assign, best_home, &best);
    memcpy(c->assign, best_assign, c->n_dec);
    memcpy(c->leaf_home, best_home, c->n_tensors);
    free(best_assign);
    free(best_home);
    return st;
}

typedef struct evict_cand {
    uint32_t k;
    double score; /* seconds lost per byte freed */
    uint64_t bytes;
} evict_cand;

static int cand_cmp(const void *a, const void *b)
{
    const evict_cand *x = a, *y = b;
    return x->score < y->score ? -1 : x->score > y->score ? 1 : (x->k > y->k) - (x->k < y->k);
}

/* Forbids device |d| to the nodes whose move costs least per byte freed
 * until about |excess| bytes are freed; returns the bytes freed. */
static uint64_t evict(sy__plan_ctx *c, uint32_t d, uint64_t excess)
{
    evict_cand *cand = malloc(((size_t)c->n_dec + 1) * sizeof *cand);
    if (!cand)
        return 0;
    uint32_t n = 0;
    for (uint32_t k = 0; k < c->n_dec; k++) {
        uint32_t i = c->dec[k];
        if (c->assign[k] != d || !(c->allowed[i] & ~(1u << d)))
            continue;
        const sy_node *node = sy_graph_node(c->g, i);
        uint64_t bytes = sy__value_storage(c, k);
        for (uint32_t j = 0; j < node->n_inputs; j++) {
            uint32_t v = c->value_of[node->inputs[j]->id];
            if ((v & SY__LEAF_BIT) && c->leaf_home[v & ~SY__LEAF_BIT] == d)
                bytes += sy__value_storage(c, v) / c->leaf_readers[v & ~SY__LEAF_BIT];
        }
        double alt = INFINITY;
        for (uint32_t e = 0; e < c->D; e++)
            if (e != d && (c->allowed[i] >> e & 1u) && sy__ctx_node_obj(c, k, e) < alt)
                alt = sy__ctx_node_obj(c, k, e);
        double loss = alt - sy__ctx_node_obj(c, k, d);
        cand[n++] = (evict_cand){k, (loss > 0 ? loss : 0) / (double)(bytes ? bytes : 1), bytes};
    }
    qsort(cand, n, sizeof *cand, cand_cmp);
    uint64_t freed = 0;
    for (uint32_t q = 0; q < n && freed < excess; q++) {
        uint32_t i = c->dec[cand[q].k];
        c->allowed[i] &= (uint8_t) ~(1u << d);
        c->evicted[i] |= (uint8_t)(1u << d);
        freed += cand[q].bytes ? cand[q].bytes : 1;
    }
    free(cand);
    return freed;
}

static uint64_t mem_total(const sy_plan_memory *m)
{
    return m->weight_bytes + m->kv_bytes + m->activation_bytes;
}

/* The device most over its budget in |mem| (by ratio), or SY__NONE. */
static uint32_t over_budget(const sy__plan_ctx *c, const sy_plan_memory *mem, bool with_act)
{
    uint32_t worst = SY__NONE;
    double worst_ratio = 1.0;
    for (uint32_t d = 0; d < c->D; d++) {
        if (!mem[d].budget_bytes)
            continue;
        uint64_t need = mem[d].weight_bytes + mem[d].kv_bytes;
        if (with_act)
            need += mem[d].activation_bytes;
        double ratio = (double)need / (double)mem[d].budget_bytes;
        if (ratio > worst_ratio) {
            worst_ratio = ratio;
            worst = d;
        }
    }
    return worst;
}

/* Devices of |c| with events (bit per slot) when the planner looks for
 * overlap: the latency policy left to the planner, at least two devices
 * with events, and independent branches in the graph.  0 otherwise.
 * One device with events beside synchronous ones is not enough although
 * plan_order.c predicts overlap there too: on this kind of machine that
 * device is PoCL on the cores the cpu plugin uses, and bench/overlap.sh
 * measured such a HEFT plan (cpu + opencl:0, 5.4 ms predicted vs 10.8 ms)
 * 1.77x slower than the DP's single-device plan.  The cost model does not
 * know which devices share compute units. */
static uint32_t overlap_devices(const sy__plan_ctx *c)
{
    if (c->req->algorithm != SY_PLAN_AUTO || c->req->policy != SY__POLICY_LATENCY || c->D < 2)
        return 0;
    uint32_t async = 0;
    for (uint32_t d = 0; d < c->D; d++)
        if (sy__plan_slot_has_events(c, d))
            async |= 1u << d;
    if ((async & (async - 1u)) == 0) /* fewer than two */
        return 0;
    return sy__sched_has_branches(&c->pb) ? async : 0;
}

/* With devices that overlap work, also plans by HEFT for the overlapped
 * step time and keeps whichever of that plan and *|p| (the DP's or the
 * list scheduler's) plan_order.c predicts faster; a HEFT plan must fit
 * the budgets too.  Says which won in the plan's algorithm line. */
static sy_status planner_try_heft(sy__plan_ctx *c, sy_plan **p)
{
    uint32_t async = overlap_devices(c);
    if (!async)
        return SY_OK;
    /* Node costs for the leaf homes the placement ended with. */
    sy_status st = sy__ctx_problem(c);
    uint8_t *kept = malloc(c->n_dec + 1);
    if (st != SY_OK || !kept) {
        free(kept);
        return st != SY_OK ? st : sy__planner_fail(c->pl, SY_E_NO_MEMORY, "out of memory");
    }
    memcpy(kept, c->assign, c->n_dec);
    const double first_s = (*p)->predicted_s;
    const char *first = c->algorithm;
    st = sy__sched_heft(&c->pb, async, kept, c->assign, NULL);
    if (st != SY_OK) {
        memcpy(c->assign, kept, c->n_dec);
        free(kept);
        return sy__planner_fail(c->pl, st, "heft failed: %s", sy_status_str(st));
    }
    sy_plan *q = NULL;
    bool same = memcmp(kept, c->assign, c->n_dec) == 0;
    if (!same) {
        st = sy__plan_build(c, &q);
        if (st != SY_OK) {
            free(kept);
            return st;
        }
    }
    if (q && q->predicted_s < first_s * (1.0 - 1e-9) && over_budget(c, q->mem, true) == SY__NONE) {
        snprintf(q->algorithm, sizeof q->algorithm,
                 "heft with insertion: overlapped %.4g ms vs %.4g ms by %.60s", q->predicted_s * 1e3,
                 first_s * 1e3, first);
        sy_plan_release(*p);
        *p = q;
    } else {
        size_t len = strlen((*p)->algorithm);
        if (q)
            snprintf((*p)->algorithm + len, sizeof (*p)->algorithm - len,
                     "; kept over heft's plan (%.4g ms)", q->predicted_s * 1e3);
        else
            snprintf((*p)->algorithm + len, sizeof (*p)->algorithm - len,
                     "; heft found none faster");
        sy_plan_release(q);
        memcpy(c->assign, kept, c->n_dec);
        (*p)->planning_s = sy__now() - c->t_start;
    }
    free(kept);
    return SY_OK;
}

/* Places and builds the plan, and while a device is over its budget moves
 * nodes off it and tries again.  Activations count as the arena the
 * executor will hold, which only a built plan knows; the sum of their
 * sizes (no reuse) bounds it from above.  So a round where leaves alone
 * overflow a device evicts by that bound without building a plan, a round
 * where even the bound fits builds the plan and returns it, and only in
 * between is the plan built to see its arena. */
static sy_status planner_fit_memory(sy__plan_ctx *c, sy_plan **out_plan)
{
    for (uint32_t round = 0; round < MEMORY_ROUNDS; round++) {
        sy_status st = planner_place(c);
        if (st != SY_OK)
            return st;
        sy_plan_memory bound[SY__MAX_PLAN_DEVICES];
        sy__ctx_memory(c, bound);
        sy_plan *p = NULL;
        uint32_t worst = over_budget(c, bound, false);
        sy_plan_memory m;
        if (worst == SY__NONE) {
            bool surely_fits = over_budget(c, bound, true) == SY__NONE;
            st = sy__plan_build(c, &p);
            if (st != SY_OK)
                return st;
            worst = surely_fits ? SY__NONE : over_budget(c, p->mem, true);
            if (worst == SY__NONE && (st = planner_try_heft(c, &p)) != SY_OK) {
                sy_plan_release(p);
                return st;
            }
            if (worst == SY__NONE) {
                if (round > 0) {
                    size_t len = strlen(p->algorithm);
                    snprintf(p->algorithm + len, sizeof p->algorithm - len,
                             "; %u rounds to fit memory budgets", round + 1);
                }
                *out_plan = p;
                return SY_OK;
            }
            m = p->mem[worst];
            sy_plan_release(p);
        } else {
            m = bound[worst];
        }
        uint64_t excess = mem_total(&m) - m.budget_bytes;
        if (evict(c, worst, excess) > 0)
            continue;
        if (!p && sy__plan_build(c, &p) == SY_OK) {
            m = p->mem[worst]; /* say what the arena needs, not the bound */
            sy_plan_release(p);
        }
        return sy__planner_fail(
            c->pl, SY_E_LIMIT,
            "model needs %.1f MiB on %s, budget %.1f MiB (weights %.1f MiB, KV %.1f MiB, "
            "activations %.1f MiB); nothing left there can run elsewhere",
            (double)mem_total(&m) / MIB, c->dm[worst].desc.name, (double)m.budget_bytes / MIB,
            (double)m.weight_bytes / MIB, (double)m.kv_bytes / MIB,
            (double)m.activation_bytes / MIB);
    }
    return sy__planner_fail(c->pl, SY_E_LIMIT,
                            "could not fit the plan in the memory budgets after %u rounds",
                            MEMORY_ROUNDS);
}

static sy_status planner_run(sy_planner *pl, const sy_graph *g, const sy__plan_request *req,
                             double t0, sy_plan **out_plan)
{
    sy__plan_ctx c = {
        .pl = pl,
        .rt = pl->rt,
        .g = g,
        .req = req,
        .n_nodes = sy_graph_node_count(g),
        .n_tensors = sy_graph_tensor_count(g),
        .D = req->n_dev,
        .t_start = t0,
    };
    sy_status st = ctx_alloc(&c);
    for (uint32_t d = 0; st == SY_OK && d < c.D; d++) {
        sy_device_desc desc;
        st = sy_runtime_query_device(pl->rt, req->dev_index[d], &desc);
        if (st == SY_OK)
            sy__device_model_init(&c.dm[d], req->dev_index[d], &desc, profile_for(pl, desc.name));
    }
    if (st == SY_OK)
        st = sy__capability_run(&c);
    if (st == SY_OK)
        st = sy__ctx_structure(&c);
    if (st == SY_OK)
        st = sy__ctx_costs(&c);
    if (st == SY_OK)
        st = planner_fit_memory(&c, out_plan);
    sy__ctx_free(&c);
    return st;
}

sy_status sy_planner_plan(sy_planner *pl, const sy_graph *g, const sy_plan_options *opts,
                          sy_plan **out_plan)
{
    if (!pl)
        return SY_E_INVALID_ARG;
    if (!out_plan)
        return sy__planner_fail(pl, SY_E_INVALID_ARG, "plan: out_plan is NULL");
    *out_plan = NULL;
    double t0 = sy__now();
    if (!g)
        return sy__planner_fail(pl, SY_E_INVALID_ARG, "plan: no graph given");
    if (!sy_graph_is_frozen(g))
        return sy__planner_fail(pl, SY_E_STATE,
                                "plan: the graph is not frozen; call sy_graph_freeze()");
    sy_plan_options defaults;
    sy_plan_options_init(&defaults);
    if (!opts)
        opts = &defaults;
    if (opts->struct_size < sizeof *opts)
        return sy__planner_fail(pl, SY_E_INVALID_ARG,
                                "plan: options struct_size %u; call sy_plan_options_init()",
                                opts->struct_size);
    sy__plan_request req;
    sy_status st = sy__plan_request_resolve(pl, opts, &req);
    uint64_t key[2] = {0, 0};
    if (st == SY_OK && !req.no_cache) {
        sy__plan_signature(g, &req, pl->profile_hash ^ pl->exclusion_hash, key);
        sy_plan *hit = sy__cache_lookup(pl, key);
        if (hit) {
            sy_plan_retain(hit);
            *out_plan = hit;
            free(req.pins);
            return SY_OK;
        }
    }
    sy_plan *plan = NULL;
    if (st == SY_OK)
        st = planner_run(pl, g, &req, t0, &plan);
    free(req.pins);
    if (st != SY_OK)
        return st;
    if (!req.no_cache) {
        plan->key[0] = key[0];
        plan->key[1] = key[1];
        sy__cache_insert(pl, key, plan);
    }
    pl->last_error[0] = '\0';
    *out_plan = plan;
    return SY_OK;
}
