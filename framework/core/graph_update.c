/* Parameter updates of a frozen graph (graph_internal.h).
 *
 * A session's decode step differs from the one before only in where the
 * KV write lands (its parameters, and the extent of the cache prefix it
 * exposes, a view).  Updating those in place keeps the graph, its order,
 * its digests and whatever was cached under them, where building a new
 * graph every token cost about 3% of SmolLM2's decode step (building,
 * shape inference, freezing, hashing, and the allocations and names of
 * ~1000 tensors; bench/overhead.sh). */
#include <stdarg.h>
#include <stddef.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "graph_internal.h"

static sy_status update_fail(sy_graph *g, sy_status st, const char *fmt, ...)
    __attribute__((format(printf, 3, 4)));

static sy_status update_fail(sy_graph *g, sy_status st, const char *fmt, ...)
{
    va_list ap;
    va_start(ap, fmt);
    vsnprintf(g->err, sizeof g->err, fmt, ap);
    va_end(ap);
    return st;
}

void sy__graph_update_free(sy_graph *g)
{
    free(g->cons_off);
    free(g->cons);
    free(g->pending);
    g->cons_off = g->cons = NULL;
    g->pending = NULL;
    free(g->undo);
    free(g->kv_fast);
    g->kv_fast = NULL;
    g->kv_fast_stale = false;
    free(g->node_dirty);
    free(g->dirty);
    g->undo = NULL;
    g->node_dirty = NULL;
    g->dirty = NULL;
    g->n_dirty = 0;
    g->n_undo = g->cap_undo = 0;
}

/* The next undo record, its fields unset: the caller sets t and n (one of
 * them NULL) and what they need.  Not zeroed: a record is ~180 bytes and a
 * decode step pushes ~150 of them. */
static sy__graph_undo *undo_push(sy_graph *g)
{
    if (g->n_undo == g->cap_undo) {
        uint32_t cap = g->cap_undo ? g->cap_undo * 2 : 64;
        sy__graph_undo *grown = realloc(g->undo, (size_t)cap * sizeof *grown);
        if (!grown)
            return NULL;
        g->undo = grown;
        g->cap_undo = cap;
    }
    return &g->undo[g->n_undo++];
}

/* Lists node |id| as updated since the last memo (once). */
static void mark_dirty(sy_graph *g, uint32_t id)
{
    if (!g->node_dirty[id]) {
        g->node_dirty[id] = true;
        g->dirty[g->n_dirty++] = id;
    }
}

/* Re-infers node |n| from its (possibly new) params and inputs and applies
 * a changed extent to its output when that output is a view.  Sets
 * *out_changed when the output's shape changed. */
static sy_status reinfer(sy_graph *g, sy_node *n, bool *out_changed)
{
    *out_changed = false;
    mark_dirty(g, n->id);
    /* Neither is zero-filled (that cost more than inferring the node):
     * sy_op_infer sets every field of |want| read below, and a message. */
    sy_tensor want;
    char why[384];
    why[0] = '\0';
    sy_status st = sy_op_infer(n->op, n->inputs, n->n_inputs, &n->params, &want, why, sizeof why);
    if (st != SY_OK)
        return update_fail(g, st, "node '%s': %s", n->name, why);
    sy_tensor *o = n->output;
    if (want.dtype != o->dtype)
        return update_fail(g, SY_E_DTYPE, "node '%s' (%s): the update would change its output "
                           "from %s to %s", n->name, sy_op_name(n->op), sy_dtype_name(o->dtype),
                           sy_dtype_name(want.dtype));
    bool same = memcmp(want.ne, o->ne, sizeof o->ne) == 0 &&
                memcmp(want.nb, o->nb, sizeof o->nb) == 0 && want.view_src == o->view_src &&
                want.view_offset == o->view_offset;
    if (same)
        return SY_OK;
    if (!o->view_src || want.view_src != o->view_src)
        return update_fail(g, SY_E_SHAPE, "node '%s' (%s): the update would change the shape "
                           "of '%s', which owns storage; build the graph again",
                           n->name, sy_op_name(n->op), o->name);
    sy__graph_undo *u = undo_push(g);
    if (!u)
        return update_fail(g, SY_E_NO_MEMORY, "out of memory updating node '%s'", n->name);
    u->t = o;
    u->n = NULL;
    memcpy(u->ne, o->ne, sizeof u->ne);
    memcpy(u->nb, o->nb, sizeof u->nb);
    u->view_offset = o->view_offset;
    memcpy(o->ne, want.ne, sizeof o->ne);
    memcpy(o->nb, want.nb, sizeof o->nb);
    o->view_offset = want.view_offset;
    *out_changed = true;
    return SY_OK;
}

/* Puts back everything the failed update changed, newest first. */
static void undo_all(sy_graph *g)
{
    for (uint32_t k = g->n_undo; k-- > 0;) {
        sy__graph_undo *u = &g->undo[k];
        if (u->t) {
            memcpy(u->t->ne, u->ne, sizeof u->ne);
            memcpy(u->t->nb, u->nb, sizeof u->nb);
            u->t->view_offset = u->view_offset;
        }
        if (u->n)
            u->n->params = u->params;
    }
}

/* Lists each tensor's readers, so that an update visits only the nodes
 * downstream of what it changed: a walk over every node after the first
 * change loaded ~700 node and tensor structs per decode step, evicted by
 * the weights streamed since the last one. */
static bool index_consumers(sy_graph *g)
{
    g->cons_off = calloc((size_t)g->n_tensors + 2, sizeof *g->cons_off);
    g->pending = calloc((size_t)g->n_nodes + 1, sizeof *g->pending);
    if (!g->cons_off || !g->pending)
        return false;
    for (uint32_t i = 0; i < g->n_nodes; i++)
        for (uint32_t k = 0; k < g->nodes[i]->n_inputs; k++)
            g->cons_off[g->nodes[i]->inputs[k]->id + 2]++;
    for (uint32_t t = 0; t < g->n_tensors; t++)
        g->cons_off[t + 2] += g->cons_off[t + 1];
    g->cons = malloc(((size_t)g->cons_off[g->n_tensors + 1] + 1) * sizeof *g->cons);
    if (!g->cons)
        return false;
    for (uint32_t i = 0; i < g->n_nodes; i++)
        for (uint32_t k = 0; k < g->nodes[i]->n_inputs; k++)
            g->cons[g->cons_off[g->nodes[i]->inputs[k]->id + 1]++] = i;
    return true;
}

/* Marks the readers of |n|'s output for re-inference. */
static void mark_consumers(sy_graph *g, const sy_node *n)
{
    uint32_t t = n->output->id;
    for (uint32_t k = g->cons_off[t]; k < g->cons_off[t + 1]; k++)
        g->pending[g->cons[k]] = true;
}

/* ---------------------------------------------------------- fast path
 *
 * A session's decode step changes the start row of each layer's K and V
 * writes and the n_past of the attention that reads them, all by the same
 * amount, and nothing else.  The general path re-infers every such node
 * and the attention after it from their inputs, and keeps an undo record
 * of each change: after a step has streamed the weights through every
 * cache, each node, tensor and record it touches is a miss (SmolLM2, 30
 * layers: ~60k TSC cycles a step, 0.7% of it at 2 threads).  The fast
 * path touches the nodes' params and the writes' outputs only, from facts
 * worked out once per graph (kv_fast): a KV write whose output only its
 * attention reads, as K or V, beside another such write of as many rows
 * (its partner).  It checks every update before changing anything and
 * leaves any other update list to the general path, which then says what
 * is wrong with it. */

/* Works out kv_fast (needs the consumer index); leaves it NULL when out
 * of memory (the general path then serves, and the next update tries
 * again). */
static void index_kv_fast(sy_graph *g)
{
    free(g->kv_fast);
    g->kv_fast = malloc(((size_t)g->n_nodes + 1) * sizeof *g->kv_fast);
    g->kv_fast_stale = false;
    if (!g->kv_fast)
        return;
    for (uint32_t i = 0; i < g->n_nodes; i++)
        g->kv_fast[i] = (sy__kv_fast){-1, UINT32_MAX, UINT32_MAX};
    for (uint32_t i = 0; i < g->n_nodes; i++) {
        const sy_node *w = g->nodes[i];
        if (w->op != SY_OP_KV_WRITE || w->n_inputs != 2 || !w->output->view_src)
            continue;
        const uint32_t t = w->output->id;
        if (g->cons_off[t + 1] - g->cons_off[t] != 1)
            continue;
        const sy_node *a = g->nodes[g->cons[g->cons_off[t]]];
        if (a->op != SY_OP_ATTENTION || a->n_inputs != 3 || a->inputs[0] == w->output ||
            (a->inputs[1] == w->output) == (a->inputs[2] == w->output))
            continue;
        const sy_tensor *other = a->inputs[1] == w->output ? a->inputs[2] : a->inputs[1];
        const sy_node *p = g->producer[other->id];
        const int64_t room = w->inputs[0]->ne[2] - w->inputs[1]->ne[2];
        if (!p || p->op != SY_OP_KV_WRITE || p->n_inputs != 2 ||
            p->inputs[1]->ne[2] != w->inputs[1]->ne[2] || room < 0)
            continue;
        g->kv_fast[i] = (sy__kv_fast){room, p->id, a->id};
    }
    for (uint32_t i = 0; i < g->n_nodes; i++) {
        const sy_node *a = g->nodes[i];
        if (a->op != SY_OP_ATTENTION || a->n_inputs != 3)
            continue;
        const sy_node *k = g->producer[a->inputs[1]->id], *v = g->producer[a->inputs[2]->id];
        if (k && v && g->kv_fast[k->id].attention == i && g->kv_fast[v->id].attention == i &&
            g->kv_fast[k->id].partner == v->id && g->kv_fast[v->id].partner == k->id)
            g->kv_fast[i].max_start = 0;
    }
}

/* True when update |k| of |ups| moves a KV write whose partner the update
 * before or after it moves to the same row. */
static bool kv_paired(const sy__node_update *ups, uint32_t n, uint32_t k, uint32_t partner)
{
    const int64_t to = ups[k].params.i[0];
    return (k > 0 && ups[k - 1].node == partner && ups[k - 1].params.i[0] == to) ||
           (k + 1 < n && ups[k + 1].node == partner && ups[k + 1].params.i[0] == to);
}

/* Checks update |k| for the fast path: nothing changes, or only p.i[0],
 * of a node that moves fast, to a row that fits. */
static bool fast_ok(const sy_graph *g, const sy__node_update *ups, uint32_t n, uint32_t k)
{
    const sy_node *nd = g->nodes[ups[k].node];
    sy_op_params p = ups[k].params;
    const int64_t to = p.i[0];
    p.i[0] = nd->params.i[0];
    if (memcmp(&p, &nd->params, sizeof p) != 0)
        return false;
    if (to == nd->params.i[0])
        return true;
    const sy__kv_fast *f = &g->kv_fast[nd->id];
    if (f->max_start < 0 || to < 0)
        return false;
    return nd->op != SY_OP_KV_WRITE || (to <= f->max_start && kv_paired(ups, n, k, f->partner));
}

/* The fast path: true when it made the update (*out_rehash set when a
 * write's output changed shape class), false when it changed nothing and
 * the general path is to run. */
static bool update_fast(sy_graph *g, const sy__node_update *ups, uint32_t n, bool *out_rehash)
{
    for (uint32_t k = 0; k < n; k++)
        if (ups[k].node < g->n_nodes) {
            const char *c = (const char *)g->nodes[ups[k].node];
            __builtin_prefetch(c);
            __builtin_prefetch(c + 64);
            __builtin_prefetch(c + 128);
            __builtin_prefetch(&g->kv_fast[ups[k].node]);
        }
    /* Every update checked, each node once (pending marks the seen ones;
     * a node listed twice goes the general way). */
    bool ok = true;
    uint32_t k = 0;
    for (; k < n && ok; k++) {
        ok = ups[k].node < g->n_nodes && !g->pending[ups[k].node] && fast_ok(g, ups, n, k);
        if (ok)
            g->pending[ups[k].node] = true;
    }
    while (k-- > 0)
        if (ups[k].node < g->n_nodes)
            g->pending[ups[k].node] = false;
    if (!ok)
        return false;
    /* The writes' outputs, whose extents move: the checks above read
     * every node, so their addresses are at hand, and all their misses
     * overlap here, where the loop below would wait for each in turn. */
    for (k = 0; k < n; k++) {
        const sy_node *nd = g->nodes[ups[k].node];
        if (nd->op == SY_OP_KV_WRITE && ups[k].params.i[0] != nd->params.i[0])
            __builtin_prefetch(nd->output->ne, 1);
    }
    for (k = 0; k < n; k++) {
        sy_node *nd = g->nodes[ups[k].node];
        const int64_t to = ups[k].params.i[0], from = nd->params.i[0];
        if (to == from)
            continue;
        if (nd->op == SY_OP_KV_WRITE) {
            /* Its output is the cache's rows [0, start + rows). */
            sy_tensor *o = nd->output;
            int64_t was[SY_MAX_DIMS];
            memcpy(was, o->ne, sizeof was);
            o->ne[2] += to - from;
            if (!sy__graph_same_class(was, o->ne))
                *out_rehash = true;
            mark_dirty(g, g->kv_fast[nd->id].attention);
        }
        if (!sy__graph_same_params(nd->op, &nd->params, &ups[k].params))
            *out_rehash = true;
        nd->params.i[0] = to;
        mark_dirty(g, nd->id);
    }
    return true;
}

/* True when the general update just made changed a shape kv_fast was
 * worked out from: any but a fast KV write's output. */
static bool kv_fast_touched(const sy_graph *g)
{
    for (uint32_t k = 0; k < g->n_undo; k++) {
        const sy_tensor *t = g->undo[k].t;
        const sy_node *p = t ? g->producer[t->id] : NULL;
        if (t && (!p || p->op != SY_OP_KV_WRITE || g->kv_fast[p->id].max_start < 0))
            return true;
    }
    return false;
}

/* Applies the updates and re-infers the nodes downstream of a changed
 * shape; *out_rehash is set when the structural digest must be redone. */
static sy_status apply(sy_graph *g, const sy__node_update *ups, uint32_t n, bool *out_rehash)
{
    uint32_t first = UINT32_MAX;
    for (uint32_t k = 0; k < n; k++) {
        if (ups[k].node >= g->n_nodes)
            return update_fail(g, SY_E_INVALID_ARG, "update %u names node %u, the graph has %u",
                               k, ups[k].node, g->n_nodes);
        sy_node *nd = g->nodes[ups[k].node];
        if (memcmp(&nd->params, &ups[k].params, sizeof nd->params) == 0)
            continue;
        sy__graph_undo *u = undo_push(g);
        if (!u)
            return update_fail(g, SY_E_NO_MEMORY, "out of memory updating node '%s'", nd->name);
        u->t = NULL;
        u->n = nd;
        u->params = nd->params;
        if (!sy__graph_same_params(nd->op, &nd->params, &ups[k].params))
            *out_rehash = true;
        nd->params = ups[k].params;
        /* Inferred now from its inputs as they are: an earlier update's
         * mark (a session's attention after its KV writes) is served. */
        g->pending[nd->id] = false;
        bool changed;
        sy_status st = reinfer(g, nd, &changed);
        if (st != SY_OK)
            return st;
        if (changed) {
            mark_consumers(g, nd);
            if (nd->id < first)
                first = nd->id;
        }
    }
    /* Nodes are in topological order: one pass reaches every consumer. */
    for (uint32_t i = first == UINT32_MAX ? g->n_nodes : first + 1; i < g->n_nodes; i++) {
        if (!g->pending[i])
            continue;
        g->pending[i] = false;
        sy_node *nd = g->nodes[i];
        bool changed;
        sy_status st = reinfer(g, nd, &changed);
        if (st != SY_OK)
            return st;
        if (changed)
            mark_consumers(g, nd);
    }
    for (uint32_t k = 0; k < g->n_undo; k++) {
        const sy__graph_undo *u = &g->undo[k];
        if (u->t && !sy__graph_same_class(u->ne, u->t->ne))
            *out_rehash = true;
    }
    return SY_OK;
}

sy_status sy__graph_update_params(sy_graph *g, const sy__node_update *ups, uint32_t n)
{
    if (!g || (!ups && n))
        return SY_E_INVALID_ARG;
    if (!g->frozen)
        return update_fail(g, SY_E_STATE, "update: the graph is not frozen");
    if (!g->pending) {
        g->node_dirty = calloc((size_t)g->n_nodes + 1, sizeof *g->node_dirty);
        g->dirty = malloc(((size_t)g->n_nodes + 1) * sizeof *g->dirty);
        if (!g->node_dirty || !g->dirty || !index_consumers(g)) {
            sy__graph_update_free(g);
            return update_fail(g, SY_E_NO_MEMORY, "out of memory preparing a graph update");
        }
    }
    g->n_undo = 0;
    if (!g->kv_fast || g->kv_fast_stale)
        index_kv_fast(g);
    bool fast_rehash = false;
    if (g->kv_fast && update_fast(g, ups, n, &fast_rehash)) {
        if (fast_rehash)
            sy__graph_hash_structure(g->nodes, g->n_nodes, g->n_tensors, g->is_output, g->sig);
        return SY_OK;
    }
    /* The nodes to update and the tensors they read are out of cache after
     * a decode step (the weights streamed through it): fetch them all
     * before the updates wait on each in turn.  The tensors are loaded, not
     * prefetched: prefetches of them left most to miss again inside
     * sy_op_infer (bench/overhead.sh, SmolLM2 decode), where a loop of
     * independent loads overlaps the misses (about 5 us less per step). */
    for (uint32_t k = 0; k < n; k++) {
        if (ups[k].node >= g->n_nodes)
            continue;
        const char *c = (const char *)g->nodes[ups[k].node];
        for (size_t b = 0; b < offsetof(sy_node, name); b += 64)
            __builtin_prefetch(c + b, 1);
    }
    uint64_t touched = 0;
    for (uint32_t k = 0; k < n; k++) {
        if (ups[k].node >= g->n_nodes)
            continue;
        const sy_node *nd = g->nodes[ups[k].node];
        touched += nd->output->dtype + nd->output->view_offset;
        for (uint32_t j = 0; j < nd->n_inputs && j < SY_MAX_INPUTS; j++)
            touched += nd->inputs[j]->dtype + nd->inputs[j]->view_offset;
    }
    __asm__ volatile("" : : "r"(touched)); /* keeps the loads */
    uint32_t n_dirty = g->n_dirty;
    bool rehash = false;
    sy_status st = apply(g, ups, n, &rehash);
    if (st == SY_OK && g->kv_fast && kv_fast_touched(g))
        g->kv_fast_stale = true;
    if (st != SY_OK) {
        undo_all(g);
        /* Nothing changed after all: what this update marked is clean. */
        while (g->n_dirty > n_dirty)
            g->node_dirty[g->dirty[--g->n_dirty]] = false;
    }
    g->n_undo = 0;
    if (st != SY_OK) /* a failure leaves marks past the node it stopped at */
        memset(g->pending, 0, (size_t)g->n_nodes * sizeof *g->pending);
    if (st == SY_OK && rehash)
        sy__graph_hash_structure(g->nodes, g->n_nodes, g->n_tensors, g->is_output, g->sig);
    return st;
}

bool sy__graph_memo_holds(const sy_graph *g, const uint64_t key[4], const uint32_t **out_dirty,
                          uint32_t *out_n)
{
    *out_dirty = g->dirty;
    *out_n = g->n_dirty;
    return g->frozen && g->has_memo && memcmp(g->memo, key, sizeof g->memo) == 0;
}

void sy__graph_memo_set(sy_graph *g, const uint64_t key[4])
{
    memcpy(g->memo, key, sizeof g->memo);
    g->has_memo = g->frozen;
    for (uint32_t k = 0; k < g->n_dirty; k++)
        g->node_dirty[g->dirty[k]] = false;
    g->n_dirty = 0;
}
