/* The activation memory planner (memplan.h): lifetimes from a plan's run
 * order, then offsets by best fit, largest first.
 *
 * Packing is the offline dynamic storage allocation problem (NP-hard in
 * general).  Largest-first best fit is what TFLite's and ONNX Runtime's
 * arena planners do; on decoder graphs it reaches the lower bound (the
 * most bytes live at one tick) or comes within a few per cent of it (the
 * numbers are in docs/scheduler.md and tests/scheduler/test_memplan.c). */
#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "memplan.h"
#include "runtime_internal.h"

static uint64_t align_up(uint64_t v, uint64_t a)
{
    return (v + a - 1) & ~(a - 1);
}

typedef struct mp_key {
    uint32_t slot;
    uint32_t first;
    uint64_t pressure; /* 0, or the most bytes live at a tick the item spans */
    uint64_t size;
    uint32_t index;
} mp_key;

/* Slot, then higher pressure, larger, earlier first: a total order. */
static inline bool key_less(const mp_key *x, const mp_key *y)
{
    if (x->slot != y->slot)
        return x->slot < y->slot;
    if (x->pressure != y->pressure)
        return x->pressure > y->pressure;
    if (x->size != y->size)
        return x->size > y->size;
    if (x->first != y->first)
        return x->first < y->first;
    return x->index < y->index;
}

/* Sorts keys[0..n) by key_less: a bottom-up merge sort with the comparison
 * inlined (qsort's calls through a pointer cost a planning run more than
 * the packing).  The order is total, so the result is qsort's. */
static sy_status sort_keys(mp_key *keys, uint32_t n)
{
    for (uint32_t lo = 0; lo < n; lo += 8) { /* runs of 8 by insertion */
        uint32_t hi = lo + 8 < n ? lo + 8 : n;
        for (uint32_t a = lo + 1; a < hi; a++) {
            mp_key v = keys[a];
            uint32_t b = a;
            for (; b > lo && key_less(&v, &keys[b - 1]); b--)
                keys[b] = keys[b - 1];
            keys[b] = v;
        }
    }
    if (n <= 8)
        return SY_OK;
    mp_key *tmp = malloc((size_t)n * sizeof *tmp);
    if (!tmp)
        return SY_E_NO_MEMORY;
    mp_key *src = keys, *dst = tmp;
    for (uint32_t w = 8; w < n; w *= 2) {
        for (uint32_t lo = 0; lo < n; lo += 2 * w) {
            uint32_t mid = lo + w < n ? lo + w : n, hi = lo + 2 * w < n ? lo + 2 * w : n;
            uint32_t i = lo, j = mid, o = lo;
            while (i < mid && j < hi)
                dst[o++] = key_less(&src[j], &src[i]) ? src[j++] : src[i++];
            while (i < mid)
                dst[o++] = src[i++];
            while (j < hi)
                dst[o++] = src[j++];
        }
        mp_key *t = src;
        src = dst;
        dst = t;
    }
    if (src != keys)
        memcpy(keys, src, (size_t)n * sizeof *keys);
    free(tmp);
    return SY_OK;
}

typedef struct mp_span {
    uint64_t lo, hi;
} mp_span;

static int span_cmp(const void *a, const void *b)
{
    const mp_span *x = a, *y = b;
    return (x->lo > y->lo) - (x->lo < y->lo);
}

/* Live lists: the items of one slot live at each tick (CSR). */
typedef struct mp_live {
    uint32_t *start; /* n_ticks + 1 */
    uint32_t *list;
} mp_live;

static sy_status live_build(const sy__mp_item *items, const mp_key *keys, uint32_t n,
                            uint32_t n_ticks, mp_live *lv)
{
    lv->start = calloc((size_t)n_ticks + 2, sizeof *lv->start);
    if (!lv->start)
        return SY_E_NO_MEMORY;
    uint64_t total = 0;
    for (uint32_t q = 0; q < n; q++) {
        const sy__mp_item *it = &items[keys[q].index];
        for (uint32_t t = it->first; t <= it->last; t++)
            lv->start[t + 1]++;
        total += (uint64_t)it->last - it->first + 1;
    }
    if (total > UINT32_MAX)
        return SY_E_LIMIT;
    for (uint32_t t = 0; t < n_ticks; t++)
        lv->start[t + 1] += lv->start[t];
    lv->list = malloc((size_t)(total ? total : 1) * sizeof *lv->list);
    uint32_t *fill = malloc(((size_t)n_ticks + 1) * sizeof *fill);
    if (!lv->list || !fill) {
        free(fill);
        return SY_E_NO_MEMORY;
    }
    memcpy(fill, lv->start, (size_t)n_ticks * sizeof *fill);
    for (uint32_t q = 0; q < n; q++) {
        const sy__mp_item *it = &items[keys[q].index];
        for (uint32_t t = it->first; t <= it->last; t++)
            lv->list[fill[t]++] = q;
    }
    free(fill);
    return SY_OK;
}

/* Packs the items keys[0..n) of one slot; returns the arena size. */
static sy_status pack_slot(sy__mp_item *items, const mp_key *keys, uint32_t n, uint32_t n_ticks,
                           uint64_t align, uint64_t *out_arena)
{
    mp_live lv = {0};
    uint32_t *stamp = malloc(((size_t)n + 1) * sizeof *stamp);
    uint8_t *placed = calloc((size_t)n + 1, 1);
    mp_span *near = malloc(((size_t)n + 1) * sizeof *near);
    sy_status st = stamp && placed && near ? live_build(items, keys, n, n_ticks, &lv)
                                           : SY_E_NO_MEMORY;
    uint64_t arena = 0;
    for (uint32_t q = 0; st == SY_OK && q < n; q++)
        stamp[q] = UINT32_MAX;
    for (uint32_t q = 0; st == SY_OK && q < n; q++) {
        sy__mp_item *it = &items[keys[q].index];
        uint64_t need = align_up(it->size, align);
        uint32_t k = 0;
        for (uint32_t t = it->first; t <= it->last; t++) {
            for (uint32_t e = lv.start[t]; e < lv.start[t + 1]; e++) {
                uint32_t o = lv.list[e];
                if (!placed[o] || stamp[o] == q)
                    continue;
                stamp[o] = q;
                const sy__mp_item *other = &items[keys[o].index];
                near[k++] = (mp_span){other->offset, other->offset + align_up(other->size, align)};
            }
        }
        if (k > 24) {
            qsort(near, k, sizeof *near, span_cmp);
        } else {
            for (uint32_t a = 1; a < k; a++) { /* usually a handful: qsort costs more */
                mp_span v = near[a];
                uint32_t b = a;
                for (; b > 0 && near[b - 1].lo > v.lo; b--)
                    near[b] = near[b - 1];
                near[b] = v;
            }
        }
        uint64_t cur = 0, best = UINT64_MAX, best_gap = UINT64_MAX;
        for (uint32_t j = 0; j < k; j++) {
            if (near[j].lo > cur) {
                uint64_t gap = near[j].lo - cur;
                if (gap >= need && gap < best_gap) {
                    best_gap = gap;
                    best = cur;
                }
            }
            if (near[j].hi > cur)
                cur = near[j].hi;
        }
        it->offset = best != UINT64_MAX ? best : cur;
        placed[q] = 1;
        if (it->offset + need > arena)
            arena = it->offset + need;
    }
    free(lv.start);
    free(lv.list);
    free(stamp);
    free(placed);
    free(near);
    *out_arena = arena;
    return st;
}

/* Packs every slot's items in the order of |keys| (sorted); arenas out. */
static sy_status pack_all(sy__mp_item *items, mp_key *keys, uint32_t n, uint32_t n_ticks,
                          uint64_t align, uint64_t *out_arena)
{
    sy_status st = sort_keys(keys, n);
    for (uint32_t lo = 0; st == SY_OK && lo < n;) {
        uint32_t hi = lo + 1;
        while (hi < n && keys[hi].slot == keys[lo].slot)
            hi++;
        st = pack_slot(items, keys + lo, hi - lo, n_ticks, align, &out_arena[keys[lo].slot]);
        lo = hi;
    }
    return st;
}

/* Sets each key's pressure, the most aligned bytes of its slot live at a
 * tick it spans, and each slot's most bytes live at once (out_peak). */
static sy_status set_pressure(const sy__mp_item *items, mp_key *keys, uint32_t n,
                              uint32_t n_ticks, uint64_t align, uint64_t *out_peak)
{
    uint64_t *live = malloc(((size_t)n_ticks + 1) * SY__MAX_PLAN_DEVICES * sizeof *live);
    if (!live)
        return SY_E_NO_MEMORY;
    memset(live, 0, ((size_t)n_ticks + 1) * SY__MAX_PLAN_DEVICES * sizeof *live);
    for (uint32_t i = 0; i < n; i++) {
        uint64_t *row = live + (size_t)items[i].slot * (n_ticks + 1);
        row[items[i].first] += align_up(items[i].size, align);
        row[items[i].last + 1] -= align_up(items[i].size, align);
    }
    for (uint32_t d = 0; d < SY__MAX_PLAN_DEVICES; d++) {
        uint64_t *row = live + (size_t)d * (n_ticks + 1);
        out_peak[d] = row[0];
        for (uint32_t t = 1; t <= n_ticks; t++) {
            row[t] += row[t - 1];
            out_peak[d] = row[t] > out_peak[d] ? row[t] : out_peak[d];
        }
    }
    for (uint32_t q = 0; q < n; q++) {
        const sy__mp_item *it = &items[keys[q].index];
        const uint64_t *row = live + (size_t)it->slot * (n_ticks + 1);
        uint64_t p = 0;
        for (uint32_t t = it->first; t <= it->last; t++)
            p = row[t] > p ? row[t] : p;
        keys[q].pressure = p;
    }
    free(live);
    return SY_OK;
}

/* Two orders, the better kept per slot: largest first, and "breadth
 * first" (items spanning the fullest ticks first, largest first among
 * equals; TFLite's other strategy), which wins where a tick far above the
 * rest decides the arena.  The second runs only where the first missed
 * the lower bound (decoders rarely do). */
sy_status sy__memplan_pack(sy__mp_item *items, uint32_t n, uint32_t n_ticks, uint64_t align,
                           uint64_t *out_arena)
{
    memset(out_arena, 0, SY__MAX_PLAN_DEVICES * sizeof *out_arena);
    if (align == 0 || (align & (align - 1)) != 0)
        return SY_E_INVALID_ARG;
    for (uint32_t i = 0; i < n; i++)
        if (items[i].slot >= SY__MAX_PLAN_DEVICES || items[i].first > items[i].last ||
            items[i].last >= n_ticks)
            return SY_E_INVALID_ARG;
    mp_key *keys = malloc(((size_t)n + 1) * sizeof *keys);
    uint64_t *first_offset = malloc(((size_t)n + 1) * sizeof *first_offset);
    sy_status st = keys && first_offset ? SY_OK : SY_E_NO_MEMORY;
    for (uint32_t i = 0; st == SY_OK && i < n; i++)
        keys[i] = (mp_key){items[i].slot, items[i].first, 0, align_up(items[i].size, align), i};
    if (st == SY_OK)
        st = pack_all(items, keys, n, n_ticks, align, out_arena);
    uint64_t peak[SY__MAX_PLAN_DEVICES] = {0}, breadth[SY__MAX_PLAN_DEVICES] = {0};
    if (st == SY_OK)
        st = set_pressure(items, keys, n, n_ticks, align, peak);
    uint32_t m = 0;
    for (uint32_t q = 0; st == SY_OK && q < n; q++) {
        uint32_t i = keys[q].index;
        first_offset[i] = items[i].offset;
        if (out_arena[items[i].slot] > peak[items[i].slot])
            keys[m++] = keys[q];
    }
    if (st == SY_OK && m > 0)
        st = pack_all(items, keys, m, n_ticks, align, breadth);
    if (st == SY_OK) {
        for (uint32_t i = 0; i < n; i++) {
            uint32_t d = items[i].slot;
            if (out_arena[d] == peak[d] || breadth[d] >= out_arena[d])
                items[i].offset = first_offset[i];
        }
        for (uint32_t d = 0; d < SY__MAX_PLAN_DEVICES; d++)
            if (out_arena[d] > peak[d] && breadth[d] < out_arena[d])
                out_arena[d] = breadth[d];
    }
    free(keys);
    free(first_offset);
    return st;
}

/* ------------------------------------------------------------ from plans */

typedef struct mp_builder {
    const sy_graph *g;
    const sy_plan *plan;
    sy__memplan *mp;
    uint32_t cap;
    char *err;
    size_t err_size;
} mp_builder;

static sy_status mp_fail(mp_builder *b, sy_status st, const char *fmt, ...)
    __attribute__((format(printf, 3, 4)));

static sy_status mp_fail(mp_builder *b, sy_status st, const char *fmt, ...)
{
    va_list ap;
    va_start(ap, fmt);
    vsnprintf(b->err, b->err_size, fmt, ap);
    va_end(ap);
    return st;
}

/* The root storage of |t| when it is an activation the arena holds. */
static const sy_tensor *arena_root(const sy_graph *g, const sy_tensor *t)
{
    const sy_tensor *root = t->view_src ? t->view_src : t;
    if (!sy_graph_producer(g, root) || sy_tensor_nbytes(root) == 0)
        return NULL;
    return root;
}

static uint32_t *item_at(mp_builder *b, uint32_t tensor, uint32_t slot)
{
    return &b->mp->item_of[(size_t)tensor * b->mp->D + slot];
}

static void extend(sy__mp_item *it, uint32_t tick)
{
    if (tick < it->first)
        it->first = tick;
    if (tick > it->last)
        it->last = tick;
}

/* Gives root |t| storage of its own on |slot| from |tick|. */
static sy_status add_item(mp_builder *b, const sy_tensor *t, uint32_t slot, uint32_t tick)
{
    sy__memplan *mp = b->mp;
    if (mp->n_items == b->cap) {
        uint32_t cap = b->cap ? b->cap * 2 : 256;
        sy__mp_item *grown = realloc(mp->items, (size_t)cap * sizeof *grown);
        if (!grown)
            return mp_fail(b, SY_E_NO_MEMORY, "out of memory planning the activation arenas");
        mp->items = grown;
        b->cap = cap;
    }
    mp->items[mp->n_items] = (sy__mp_item){.tensor = t->id, .slot = slot, .first = tick,
                                           .last = tick, .size = sy_tensor_nbytes(t)};
    *item_at(b, t->id, slot) = mp->n_items++;
    return SY_OK;
}

/* The last position, in segment |s|, of the window that starts at |q|:
 * consecutive matmuls of one input (at least two) and the ropes and KV
 * writes right after them, views aside.  A device may run such a window
 * as one (the CPU plugin's matmul group, with the ropes and writes in its
 * tiles: plugins/cpu/cpu_kernels_fused.c), so every buffer a node of it
 * reads or writes lives through the whole window: none takes bytes
 * another node of it still reads or writes.  |q| itself when no window
 * starts there. */
static uint32_t fused_window_end(const mp_builder *b, const sy__plan_step *s, uint32_t q)
{
    const sy_node *n = sy_graph_node(b->g, b->plan->order[s->first + q]);
    if (n->op != SY_OP_MATMUL || n->n_inputs < 2)
        return q;
    uint32_t end = q;
    while (end + 1 < s->count) {
        const sy_node *m = sy_graph_node(b->g, b->plan->order[s->first + end + 1]);
        if (m->op != SY_OP_MATMUL || m->n_inputs < 2 || m->inputs[1] != n->inputs[1])
            break;
        end++;
    }
    if (end == q)
        return q;
    while (end + 1 < s->count) {
        const sy_node *m = sy_graph_node(b->g, b->plan->order[s->first + end + 1]);
        if (!sy_op_is_view(m->op) && m->op != SY_OP_ROPE && m->op != SY_OP_KV_WRITE)
            break;
        end++;
    }
    return end;
}

static sy_status run_segment(mp_builder *b, const sy__plan_step *s, uint32_t *tick)
{
    uint32_t window_end = 0; /* the last tick of the current or last fused window */
    for (uint32_t q = 0; q < s->count; q++, (*tick)++) {
        if (*tick >= window_end) {
            const uint32_t end = fused_window_end(b, s, q);
            if (end > q)
                window_end = *tick + (end - q);
        }
        /* Inside a fused window, what a node touches lives to its end. */
        const uint32_t until = *tick > window_end ? *tick : window_end;
        const sy_node *n = sy_graph_node(b->g, b->plan->order[s->first + q]);
        for (uint32_t j = 0; j < n->n_inputs; j++) {
            const sy_tensor *root = arena_root(b->g, n->inputs[j]);
            if (!root)
                continue;
            uint32_t it = *item_at(b, root->id, s->dev);
            if (it == SY__NONE)
                return mp_fail(b, SY_E_INTERNAL,
                               "node '%s' on '%s' reads '%s', which the plan never brings there",
                               n->name, b->plan->dev_name[s->dev], root->name);
            extend(&b->mp->items[it], until);
        }
        const sy_tensor *root = arena_root(b->g, n->output);
        if (!root)
            continue;
        uint32_t it = *item_at(b, root->id, s->dev);
        if (it == SY__NONE) {
            if (add_item(b, root, s->dev, *tick) != SY_OK)
                return SY_E_NO_MEMORY;
            it = *item_at(b, root->id, s->dev);
        }
        extend(&b->mp->items[it], *tick);
        extend(&b->mp->items[it], until);
    }
    return SY_OK;
}

static sy_status run_transfer(mp_builder *b, const sy__plan_step *s,
                              const uint8_t alias_to[SY__MAX_PLAN_DEVICES], uint32_t tick)
{
    const sy_tensor *root = arena_root(b->g, sy_graph_tensor(b->g, s->tensor));
    if (!root)
        return SY_OK; /* a leaf: not the arena's */
    uint32_t src = *item_at(b, root->id, s->src);
    if (src == SY__NONE)
        return mp_fail(b, SY_E_INTERNAL, "transfer of '%s' from '%s' before it exists there",
                       root->name, b->plan->dev_name[s->src]);
    extend(&b->mp->items[src], tick);
    uint32_t *dst = item_at(b, root->id, s->dev);
    if (*dst != SY__NONE)
        extend(&b->mp->items[*dst], tick);
    else if (alias_to[s->src] >> s->dev & 1u)
        *dst = src;
    else if (add_item(b, root, s->dev, tick) != SY_OK)
        return SY_E_NO_MEMORY;
    return SY_OK;
}

void sy__memplan_alias_masks(const sy_runtime *rt, const sy_plan *plan,
                             uint8_t out_alias_to[SY__MAX_PLAN_DEVICES])
{
    memset(out_alias_to, 0, SY__MAX_PLAN_DEVICES);
    for (uint32_t s = 0; s < plan->n_dev; s++) {
        const sy__device *src = &rt->devices[plan->dev_index[s]];
        for (uint32_t d = 0; d < plan->n_dev; d++) {
            const sy__device *dst = &rt->devices[plan->dev_index[d]];
            if (s != d && src->desc.unified_memory && dst->desc.unified_memory &&
                dst->plugin->desc.buffer_import_host)
                out_alias_to[s] |= (uint8_t)(1u << d);
        }
    }
}

sy_status sy__memplan_build(const sy_graph *g, const sy_plan *plan,
                            const uint8_t alias_to[SY__MAX_PLAN_DEVICES], uint64_t align,
                            sy__memplan *out, char *err, size_t err_size)
{
    memset(out, 0, sizeof *out);
    if (err_size)
        err[0] = '\0';
    mp_builder b = {.g = g, .plan = plan, .mp = out, .err = err, .err_size = err_size};
    uint32_t nt = sy_graph_tensor_count(g), D = plan->n_dev;
    if (nt != plan->n_tensors)
        return mp_fail(&b, SY_E_INVALID_ARG, "the plan is for %u tensors, the graph has %u",
                       plan->n_tensors, nt);
    out->n_tensors = nt;
    out->D = D;
    out->align = align;
    out->item_of = malloc(((size_t)nt * D + 1) * sizeof *out->item_of);
    if (!out->item_of)
        return mp_fail(&b, SY_E_NO_MEMORY, "out of memory planning the activation arenas");
    memset(out->item_of, 0xff, ((size_t)nt * D) * sizeof *out->item_of);
    uint32_t tick = 0;
    sy_status st = SY_OK;
    for (uint32_t k = 0; st == SY_OK && k < plan->n_steps; k++) {
        const sy__plan_step *s = &plan->steps[k];
        if (s->kind == SY_PLAN_STEP_SEGMENT)
            st = run_segment(&b, s, &tick);
        else
            st = run_transfer(&b, s, alias_to, tick++);
    }
    /* Marked outputs are copied back from their producer's device last. */
    for (uint32_t i = 0; st == SY_OK && i < nt; i++) {
        const sy_tensor *t = sy_graph_tensor(g, i);
        const sy_node *prod = sy_graph_producer(g, t);
        const sy_tensor *root = arena_root(g, t);
        if (!root || !prod || !sy_graph_is_output(g, t))
            continue;
        uint32_t it = *item_at(&b, root->id, plan->nodes[prod->id].dev);
        if (it != SY__NONE)
            extend(&out->items[it], tick);
    }
    out->n_ticks = tick + 1;
    if (st == SY_OK) {
        st = sy__memplan_pack(out->items, out->n_items, out->n_ticks, align, out->arena);
        if (st != SY_OK)
            mp_fail(&b, st, "packing %u activations failed: %s", out->n_items, sy_status_str(st));
    }
    if (st == SY_OK) {
        /* The bounds, for reports and tests: one sweep over ticks per slot. */
        int64_t *delta = calloc((size_t)out->n_ticks + 1, sizeof *delta);
        if (!delta)
            st = mp_fail(&b, SY_E_NO_MEMORY, "out of memory planning the activation arenas");
        for (uint32_t d = 0; st == SY_OK && d < D; d++) {
            memset(delta, 0, ((size_t)out->n_ticks + 1) * sizeof *delta);
            for (uint32_t i = 0; i < out->n_items; i++) {
                const sy__mp_item *it = &out->items[i];
                if (it->slot != d)
                    continue;
                uint64_t a = align_up(it->size, align);
                out->total[d] += a;
                delta[it->first] += (int64_t)a;
                delta[it->last + 1] -= (int64_t)a;
            }
            int64_t live = 0;
            for (uint32_t t = 0; t < out->n_ticks; t++) {
                live += delta[t];
                if ((uint64_t)live > out->live_peak[d])
                    out->live_peak[d] = (uint64_t)live;
            }
        }
        free(delta);
    }
    if (st != SY_OK) {
        sy__memplan_free(out);
        memset(out, 0, sizeof *out);
    }
    return st;
}

void sy__memplan_free(sy__memplan *mp)
{
    if (!mp)
        return;
    free(mp->items);
    free(mp->item_of);
    mp->items = NULL;
    mp->item_of = NULL;
    mp->n_items = 0;
}
