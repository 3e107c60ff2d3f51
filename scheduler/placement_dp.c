/* Exact placement by dynamic programming over the topological order.
 *
 * After node i the values still to be read form the frontier F_i.  The
 * future cost depends only on where each of them lives and which devices
 * already hold a copy, so the state is that pair per frontier value,
 * packed into 64 bits; states are merged by key after each node, keeping
 * the cheapest.  For a decoder the frontier stays at a handful of values
 * (the residual stream, q/k/v), so this is exact and small.
 *
 * Where the frontier shrinks to one value just produced (the residual
 * stream between two layer halves) the order is cut into blocks.  A block
 * becomes a matrix M[a][e]: the cheapest cost from its input living on a
 * to its output living on e.  Blocks whose costs and structure are
 * bit-identical (every layer of a model) share one matrix, so a 30-layer
 * model costs two solved blocks plus a chain of small min-plus steps. */
#include <math.h>
#include <stdlib.h>
#include <string.h>

#include "sched_problem.h"

/* States per step past which the graph does not count as chain-like. */
#define DP_MAX_STATES (1u << 16)
#define DP_NONE UINT32_MAX

typedef struct dp_state {
    uint64_t key;
    double cost;
    uint32_t parent; /* index of the state it came from, in the previous step */
    uint8_t dev;     /* device chosen for this step's node */
} dp_state;

/* A solved block (or a class of identical ones). */
typedef struct dp_class {
    uint64_t hash;
    uint64_t *words; /* canonical description, compared on a hash match */
    uint32_t n_words;
    uint32_t len, n_start, n_end;
    double *m;    /* n_start * n_end, INFINITY where unreachable */
    uint8_t *asg; /* n_start * n_end * len devices */
    uint32_t max_states; /* widest step while solving it */
    uint32_t used;       /* the last solve (memo->solves) that used it */
} dp_class;

/* Solved classes kept between solves of problems with the same devices
 * (sy__dp_memo_create): a block whose description matches is not solved
 * again. */
struct sy__dp_memo {
    dp_class *classes;
    uint32_t n_classes, cap_classes;
    uint32_t n_dev;
    uint32_t solves;
};

typedef struct dp_ctx {
    const sy__sched_problem *pb;
    uint32_t n, D, dev_bits, slot_bits, max_slots;
    uint32_t *last_use;         /* n: last consumer, or the node itself */
    uint32_t *f_start, *f_list; /* frontier after each node (CSR, n + 1) */
    dp_state *st;               /* states of the block being solved, by step */
    uint32_t st_n, st_cap;
    uint32_t *step_off;  /* len + 1 offsets into st */
    uint32_t cur_states; /* widest step of the class being solved */
    uint32_t *table;     /* hash table of the step being built */
    uint32_t table_cap;  /* allocated entries */
    uint32_t table_mask; /* entries in use - 1 */
    sy__dp_memo *memo; /* classes: this solve's, or kept between solves */
    uint32_t n_used;   /* distinct classes this solve used */
    uint64_t *words;   /* scratch canonical description */
    uint32_t words_cap;
    sy__dp_stats stats;
} dp_ctx;

static uint32_t frontier_size(const dp_ctx *c, uint32_t i)
{
    return c->f_start[i + 1] - c->f_start[i];
}

static const uint32_t *frontier(const dp_ctx *c, uint32_t i)
{
    return &c->f_list[c->f_start[i]];
}

/* Computes last uses and every frontier; SY_E_LIMIT when one is wider
 * than a 64-bit key holds. */
static sy_status dp_frontiers(dp_ctx *c)
{
    const sy__sched_problem *pb = c->pb;
    uint32_t n = c->n;
    for (uint32_t i = 0; i < n; i++)
        c->last_use[i] = i;
    for (uint32_t i = 0; i < n; i++)
        for (uint32_t e = pb->in_start[i]; e < pb->in_start[i + 1]; e++)
            c->last_use[pb->in_list[e]] = i; /* i only grows */
    uint32_t cap = 64, total = 0;
    c->f_list = malloc(cap * sizeof *c->f_list);
    if (!c->f_list)
        return SY_E_NO_MEMORY;
    uint32_t prev_lo = 0, prev_n = 0;
    for (uint32_t i = 0; i < n; i++) {
        if (total + prev_n + 1 > cap) {
            while (total + prev_n + 1 > cap)
                cap *= 2;
            uint32_t *grown = realloc(c->f_list, cap * sizeof *grown);
            if (!grown)
                return SY_E_NO_MEMORY;
            c->f_list = grown;
        }
        c->f_start[i] = total;
        for (uint32_t k = 0; k < prev_n; k++) {
            uint32_t v = c->f_list[prev_lo + k];
            if (c->last_use[v] > i)
                c->f_list[total++] = v;
        }
        if (c->last_use[i] > i)
            c->f_list[total++] = i;
        prev_lo = c->f_start[i];
        prev_n = total - prev_lo;
        if (prev_n > c->stats.max_frontier)
            c->stats.max_frontier = prev_n;
        if (prev_n > c->max_slots)
            return SY_E_LIMIT;
    }
    c->f_start[n] = total;
    return SY_OK;
}

/* True when the order may be cut after node i. */
static bool dp_is_cut(const dp_ctx *c, uint32_t i)
{
    uint32_t k = frontier_size(c, i);
    return k == 0 || (k == 1 && frontier(c, i)[0] == i);
}

static uint64_t slot_get(const dp_ctx *c, uint64_t key, uint32_t k)
{
    return (key >> (k * c->slot_bits)) & ((1ull << c->slot_bits) - 1);
}

static uint64_t slot_make(const dp_ctx *c, uint32_t dev, uint32_t avail)
{
    return (uint64_t)dev | (uint64_t)avail << c->dev_bits;
}

static sy_status dp_reserve(dp_ctx *c, uint32_t need)
{
    if (need <= c->st_cap)
        return SY_OK;
    uint32_t cap = c->st_cap ? c->st_cap : 1024;
    while (cap < need)
        cap *= 2;
    dp_state *grown = realloc(c->st, cap * sizeof *grown);
    if (!grown)
        return SY_E_NO_MEMORY;
    c->st = grown;
    c->st_cap = cap;
    return SY_OK;
}

/* Prepares an empty hash table for up to |n| keys. */
static sy_status dp_table_reset(dp_ctx *c, uint32_t n)
{
    uint32_t cap = 16;
    while (cap < 2 * n)
        cap *= 2;
    if (cap > c->table_cap) {
        free(c->table);
        c->table = malloc(cap * sizeof *c->table);
        if (!c->table) {
            c->table_cap = 0;
            return SY_E_NO_MEMORY;
        }
        c->table_cap = cap;
    }
    memset(c->table, 0xff, cap * sizeof *c->table);
    c->table_mask = cap - 1;
    return SY_OK;
}

/* Keeps the cheaper of the new candidate and any state with its key. */
static void dp_relax(dp_ctx *c, uint32_t mask, uint64_t key, double cost, uint32_t parent,
                     uint8_t dev)
{
    uint32_t h = (uint32_t)((key * 0x9e3779b97f4a7c15ull) >> 32) & mask;
    for (;;) {
        uint32_t at = c->table[h];
        if (at == DP_NONE) {
            c->table[h] = c->st_n;
            c->st[c->st_n++] = (dp_state){key, cost, parent, dev};
            return;
        }
        dp_state *s = &c->st[at];
        if (s->key == key) {
            if (cost < s->cost) {
                s->cost = cost;
                s->parent = parent;
                s->dev = dev;
            }
            return;
        }
        h = (h + 1) & mask;
    }
}

/* One DP step: node i from the states of the previous step. */
static sy_status dp_step(dp_ctx *c, uint32_t i, uint32_t prev_lo, uint32_t prev_n)
{
    const sy__sched_problem *pb = c->pb;
    uint32_t D = c->D;
    const uint32_t *P = i > 0 ? frontier(c, i - 1) : NULL;
    uint32_t np = i > 0 ? frontier_size(c, i - 1) : 0;
    const uint32_t *Q = frontier(c, i);
    uint32_t nq = frontier_size(c, i);
    int32_t src[64];
    uint32_t in_pos[64], n_in = 0;
    for (uint32_t q = 0, k = 0; q < nq; q++) {
        while (k < np && P[k] < Q[q])
            k++;
        src[q] = (k < np && P[k] == Q[q]) ? (int32_t)k : -1;
    }
    for (uint32_t e = pb->in_start[i]; e < pb->in_start[i + 1]; e++) {
        uint32_t p = pb->in_list[e], k = 0;
        while (k < np && P[k] != p)
            k++;
        if (k == np || n_in == 64)
            return SY_E_INTERNAL; /* a producer outside the frontier */
        in_pos[n_in++] = k;
    }
    uint64_t budget = (uint64_t)prev_n * D;
    if (budget > DP_MAX_STATES * 4ull)
        budget = DP_MAX_STATES * 4ull;
    sy_status st = dp_table_reset(c, (uint32_t)budget);
    if (st == SY_OK)
        st = dp_reserve(c, c->st_n + (uint32_t)budget);
    if (st != SY_OK)
        return st;
    uint32_t lo = c->st_n, mask = c->table_mask;
    /* Where each input's avail bits sit in the new key (it may die here),
     * and the new value's slot: the key of a successor is the previous
     * slots moved to their new places, plus those bits and that slot. */
    uint32_t bit_at[64], sb = c->slot_bits, new_at = UINT32_MAX;
    for (uint32_t j = 0; j < n_in; j++)
        bit_at[j] = UINT32_MAX;
    for (uint32_t q = 0; q < nq; q++) {
        if (src[q] < 0) {
            new_at = q * sb;
            continue;
        }
        for (uint32_t j = 0; j < n_in; j++)
            if (in_pos[j] == (uint32_t)src[q])
                bit_at[j] = q * sb + c->dev_bits;
    }
    double node_cost[SY__SCHED_MAX_DEVICES];
    for (uint32_t d = 0; d < D; d++)
        node_cost[d] = sy__sched_cost(pb, i, d);
    for (uint32_t s = 0; s < prev_n; s++) {
        const dp_state prev = c->st[prev_lo + s];
        uint64_t moved = 0;
        for (uint32_t q = 0; q < nq; q++)
            if (src[q] >= 0)
                moved |= slot_get(c, prev.key, (uint32_t)src[q]) << (q * sb);
        uint32_t dev[64], avail[64];
        for (uint32_t j = 0; j < n_in; j++) {
            uint64_t v = slot_get(c, prev.key, in_pos[j]);
            dev[j] = (uint32_t)(v & ((1u << c->dev_bits) - 1));
            avail[j] = (uint32_t)(v >> c->dev_bits);
        }
        for (uint32_t d = 0; d < D; d++) {
            double cost = node_cost[d];
            if (!isfinite(cost))
                continue;
            cost += prev.cost;
            uint64_t key = moved;
            for (uint32_t j = 0; j < n_in; j++) {
                if (avail[j] >> d & 1u)
                    continue;
                if (bit_at[j] != UINT32_MAX)
                    key |= (uint64_t)1 << (bit_at[j] + d);
                cost += sy__sched_xfer(pb, P[in_pos[j]], dev[j], d);
            }
            if (new_at != UINT32_MAX)
                key |= slot_make(c, d, 1u << d) << new_at;
            if (c->st_n - lo >= budget)
                return SY_E_LIMIT;
            dp_relax(c, mask, key, cost, s, (uint8_t)d);
        }
    }
    uint32_t made = c->st_n - lo;
    if (made > c->cur_states)
        c->cur_states = made;
    if (made > DP_MAX_STATES)
        return SY_E_LIMIT;
    return SY_OK;
}

/* Solves block [lo, hi) from each start state into |cls|. */
static sy_status dp_solve_block(dp_ctx *c, uint32_t lo, uint32_t hi, dp_class *cls)
{
    uint32_t len = hi - lo;
    bool has_in = lo > 0 && frontier_size(c, lo - 1) == 1;
    for (uint32_t k = 0; k < cls->n_start * cls->n_end; k++)
        cls->m[k] = INFINITY;
    for (uint32_t a = 0; a < cls->n_start; a++) {
        c->st_n = 0;
        sy_status st = dp_reserve(c, 1);
        if (st != SY_OK)
            return st;
        uint64_t key0 = has_in ? slot_make(c, a, 1u << a) : 0;
        c->st[c->st_n++] = (dp_state){key0, 0.0, DP_NONE, (uint8_t)a};
        c->step_off[0] = 0;
        for (uint32_t i = lo; i < hi; i++) {
            uint32_t prev_lo = c->step_off[i - lo];
            uint32_t prev_n = c->st_n - prev_lo;
            c->step_off[i - lo + 1] = c->st_n;
            st = dp_step(c, i, prev_lo, prev_n);
            if (st != SY_OK)
                return st;
        }
        uint32_t end_lo = c->step_off[len];
        for (uint32_t s = end_lo; s < c->st_n; s++) {
            uint32_t e = cls->n_end > 1 ? c->st[s].dev : 0;
            double *m = &cls->m[a * cls->n_end + e];
            if (!(c->st[s].cost < *m))
                continue;
            *m = c->st[s].cost;
            uint8_t *asg = &cls->asg[((size_t)a * cls->n_end + e) * len];
            uint32_t at = s;
            for (uint32_t k = len; k-- > 0;) {
                asg[k] = c->st[at].dev;
                at = c->st[at].parent + c->step_off[k];
            }
        }
    }
    return SY_OK;
}

static uint64_t dbits(double x)
{
    uint64_t u;
    memcpy(&u, &x, sizeof u);
    return u;
}

/* Writes block [lo, hi)'s canonical description into c->words. */
static sy_status dp_describe(dp_ctx *c, uint32_t lo, uint32_t hi, uint32_t *out_n,
                             uint64_t *out_hash)
{
    const sy__sched_problem *pb = c->pb;
    uint32_t D = c->D, len = hi - lo;
    uint64_t need = 4 + (uint64_t)D * D + (uint64_t)len * (D + D * D + 1 + SY__SCHED_MAX_DEVICES);
    need += pb->in_start[hi] - pb->in_start[lo];
    if (need > c->words_cap) {
        uint64_t *grown = realloc(c->words, need * sizeof *grown);
        if (!grown)
            return SY_E_NO_MEMORY;
        c->words = grown;
        c->words_cap = (uint32_t)need;
    }
    uint32_t w = 0;
    bool has_in = lo > 0 && frontier_size(c, lo - 1) == 1;
    c->words[w++] = len;
    c->words[w++] = has_in;
    c->words[w++] = frontier_size(c, hi - 1);
    if (has_in)
        for (uint32_t k = 0; k < D * D; k++)
            c->words[w++] = dbits(pb->xfer[(size_t)(lo - 1) * D * D + k]);
    for (uint32_t i = lo; i < hi; i++) {
        for (uint32_t d = 0; d < D; d++)
            c->words[w++] = dbits(sy__sched_cost(pb, i, d));
        for (uint32_t k = 0; k < D * D; k++)
            c->words[w++] = dbits(pb->xfer[(size_t)i * D * D + k]);
        c->words[w++] = pb->in_start[i + 1] - pb->in_start[i];
        for (uint32_t e = pb->in_start[i]; e < pb->in_start[i + 1]; e++)
            c->words[w++] = pb->in_list[e] + 1 - lo; /* 0: the block's input */
        c->words[w++] = c->last_use[i] >= hi ? UINT32_MAX : c->last_use[i] - lo;
    }
    uint64_t h = 0x243f6a8885a308d3ull;
    for (uint32_t k = 0; k < w; k++)
        h = (h ^ c->words[k]) * 0x100000001b3ull + (h >> 29);
    *out_n = w;
    *out_hash = h;
    return SY_OK;
}

/* Counts class |k| as used by this solve, its widest step included. */
static void dp_use_class(dp_ctx *c, uint32_t k)
{
    dp_class *cl = &c->memo->classes[k];
    if (cl->used != c->memo->solves) {
        cl->used = c->memo->solves;
        c->n_used++;
    }
    if (cl->max_states > c->stats.max_states)
        c->stats.max_states = cl->max_states;
}

/* Returns the class of block [lo, hi), solving it when it is new. */
static sy_status dp_block_class(dp_ctx *c, uint32_t lo, uint32_t hi, bool reuse,
                                uint32_t *out_class)
{
    sy__dp_memo *mo = c->memo;
    uint32_t n_words = 0;
    uint64_t hash = 0;
    sy_status st = SY_OK;
    if (reuse) {
        st = dp_describe(c, lo, hi, &n_words, &hash);
        if (st != SY_OK)
            return st;
        for (uint32_t k = mo->n_classes; k-- > 0;) {
            const dp_class *cl = &mo->classes[k];
            if (cl->hash == hash && cl->n_words == n_words &&
                memcmp(cl->words, c->words, n_words * sizeof *c->words) == 0) {
                dp_use_class(c, k);
                *out_class = k;
                return SY_OK;
            }
        }
    }
    if (mo->n_classes == mo->cap_classes) {
        uint32_t cap = mo->cap_classes ? mo->cap_classes * 2 : 16;
        dp_class *grown = realloc(mo->classes, cap * sizeof *grown);
        if (!grown)
            return SY_E_NO_MEMORY;
        mo->classes = grown;
        mo->cap_classes = cap;
    }
    dp_class *cl = &mo->classes[mo->n_classes];
    memset(cl, 0, sizeof *cl);
    cl->hash = hash;
    cl->n_words = n_words;
    cl->len = hi - lo;
    cl->n_start = lo > 0 && frontier_size(c, lo - 1) == 1 ? c->D : 1;
    cl->n_end = frontier_size(c, hi - 1) == 1 ? c->D : 1;
    cl->words = malloc((n_words + 1) * sizeof *cl->words);
    cl->m = malloc((size_t)cl->n_start * cl->n_end * sizeof *cl->m);
    cl->asg = calloc((size_t)cl->n_start * cl->n_end * cl->len + 1, 1);
    cl->used = mo->solves - 1; /* not yet: dp_use_class counts it */
    mo->n_classes++; /* counted now so that cleanup frees a half-made class */
    if (!cl->words || !cl->m || !cl->asg)
        return SY_E_NO_MEMORY;
    if (n_words)
        memcpy(cl->words, c->words, n_words * sizeof *cl->words);
    c->cur_states = 0;
    st = dp_solve_block(c, lo, hi, cl);
    cl->max_states = c->cur_states;
    if (c->cur_states > c->stats.max_states)
        c->stats.max_states = c->cur_states;
    *out_class = mo->n_classes - 1;
    if (st != SY_OK) {
        /* A half-solved class must not be found again. */
        cl->hash = ~hash;
        cl->n_words = UINT32_MAX;
        return st;
    }
    dp_use_class(c, mo->n_classes - 1);
    return SY_OK;
}

/* Chains the blocks with a min-plus Viterbi pass and writes the result. */
static sy_status dp_chain(dp_ctx *c, const uint32_t *block_lo, const uint32_t *block_cls,
                          uint32_t n_blocks, uint8_t *out_assign)
{
    double cur[SY__SCHED_MAX_DEVICES], next[SY__SCHED_MAX_DEVICES];
    uint8_t *choice = malloc((size_t)n_blocks * SY__SCHED_MAX_DEVICES + 1);
    if (!choice)
        return SY_E_NO_MEMORY;
    cur[0] = 0.0;
    for (uint32_t b = 0; b < n_blocks; b++) {
        const dp_class *cl = &c->memo->classes[block_cls[b]];
        for (uint32_t e = 0; e < cl->n_end; e++) {
            next[e] = INFINITY;
            choice[b * SY__SCHED_MAX_DEVICES + e] = 0;
            for (uint32_t a = 0; a < cl->n_start; a++) {
                double t = cur[a] + cl->m[a * cl->n_end + e];
                if (t < next[e]) {
                    next[e] = t;
                    choice[b * SY__SCHED_MAX_DEVICES + e] = (uint8_t)a;
                }
            }
        }
        memcpy(cur, next, cl->n_end * sizeof *cur);
    }
    sy_status st = isfinite(cur[0]) ? SY_OK : SY_E_UNSUPPORTED;
    uint32_t e = 0;
    for (uint32_t b = n_blocks; st == SY_OK && b-- > 0;) {
        const dp_class *cl = &c->memo->classes[block_cls[b]];
        uint32_t a = choice[b * SY__SCHED_MAX_DEVICES + e];
        memcpy(&out_assign[block_lo[b]], &cl->asg[((size_t)a * cl->n_end + e) * cl->len], cl->len);
        e = a;
    }
    free(choice);
    return st;
}

static void memo_clear(sy__dp_memo *mo)
{
    for (uint32_t k = 0; k < mo->n_classes; k++) {
        free(mo->classes[k].words);
        free(mo->classes[k].m);
        free(mo->classes[k].asg);
    }
    free(mo->classes);
    mo->classes = NULL;
    mo->n_classes = mo->cap_classes = 0;
}

sy_status sy__dp_memo_create(sy__dp_memo **out_memo)
{
    *out_memo = calloc(1, sizeof **out_memo);
    return *out_memo ? SY_OK : SY_E_NO_MEMORY;
}

void sy__dp_memo_destroy(sy__dp_memo *memo)
{
    if (!memo)
        return;
    memo_clear(memo);
    free(memo);
}

static void dp_free(dp_ctx *c)
{
    free(c->last_use);
    free(c->f_start);
    free(c->f_list);
    free(c->st);
    free(c->step_off);
    free(c->table);
    free(c->words);
}

sy_status sy__sched_dp(const sy__sched_problem *pb, bool reuse_classes, uint8_t *out_assign,
                       sy__dp_stats *stats)
{
    return sy__sched_dp_memo(pb, reuse_classes, NULL, out_assign, stats);
}

sy_status sy__sched_dp_memo(const sy__sched_problem *pb, bool reuse_classes, sy__dp_memo *memo,
                            uint8_t *out_assign, sy__dp_stats *stats)
{
    sy__dp_memo local = {0};
    dp_ctx c = {.pb = pb, .n = pb->n, .D = pb->n_dev, .memo = memo ? memo : &local};
    if (stats)
        memset(stats, 0, sizeof *stats);
    if (pb->n == 0)
        return SY_OK;
    if (c.memo->n_dev != c.D) {
        memo_clear(c.memo); /* descriptions are per device count */
        c.memo->n_dev = c.D;
    }
    c.memo->solves++;
    while ((1u << c.dev_bits) < c.D)
        c.dev_bits++;
    c.slot_bits = c.dev_bits + c.D;
    c.max_slots = 64 / c.slot_bits;
    uint32_t *block_lo = NULL, *block_cls = NULL;
    sy_status st = SY_E_NO_MEMORY;
    c.last_use = malloc((size_t)c.n * sizeof *c.last_use);
    c.f_start = calloc((size_t)c.n + 1, sizeof *c.f_start);
    c.step_off = malloc(((size_t)c.n + 1) * sizeof *c.step_off);
    block_lo = malloc(((size_t)c.n + 1) * sizeof *block_lo);
    block_cls = malloc(((size_t)c.n + 1) * sizeof *block_cls);
    if (!c.last_use || !c.f_start || !c.step_off || !block_lo || !block_cls)
        goto out_free;
    st = dp_frontiers(&c);
    if (st != SY_OK)
        goto out_free;
    uint32_t n_blocks = 0, lo = 0;
    for (uint32_t i = 0; i < c.n; i++) {
        if (i + 1 < c.n && !dp_is_cut(&c, i))
            continue;
        block_lo[n_blocks] = lo;
        st = dp_block_class(&c, lo, i + 1, reuse_classes, &block_cls[n_blocks]);
        if (st != SY_OK)
            goto out_free;
        n_blocks++;
        lo = i + 1;
    }
    c.stats.blocks = n_blocks;
    c.stats.classes = c.n_used;
    st = dp_chain(&c, block_lo, block_cls, n_blocks, out_assign);
out_free:
    if (stats)
        *stats = c.stats;
    dp_free(&c);
    if (!memo)
        memo_clear(&local);
    free(block_lo);
    free(block_cls);
    return st;
}
