/* Multi-device executor: runs frozen graphs by scheduler plans, keeping
 * between runs what can be kept.
 *
 * Storage.  Activations live in one arena per device, laid out by the
 * memory planner (scheduler/memplan.c) from the graph's own sizes: each
 * activation a device makes or receives has an offset there, and bytes
 * are reused between activations whose lifetimes in the plan's run order
 * do not overlap.  The arena is allocated once and grown when a run needs
 * more; layouts of the last few (plan, shapes) are cached.  Weights (role
 * WEIGHT, with host data) are kept: wrapped zero-copy on a device that
 * shares host memory, else uploaded once; both are reused by every later
 * run (weights must not change while the executor lives).  Other leaves
 * (KV caches, inputs) are wrapped or copied in on every run, as their
 * host contents change between runs; so are zeros for leaves without host
 * data.
 *
 * Transfers fill the destination's copy of the span a value covers: a
 * device sharing host memory maps the source's host memory (the memory
 * plan keeps the source's bytes alive while the mapping is read), else
 * the plugin's copy_device within a plugin, else copy_out/copy_in
 * straight into or out of mapped memory, else through a staging buffer.
 * A weight moving to another device is the kept copy of that weight
 * there.  Steps run as executor_flow.c says: segments are launched
 * without waiting, and the host waits only for the work a step needs.
 * Marked outputs, and leaves written through views, are copied back from
 * the device that wrote them.
 *
 * The binding, import and copy-back rules are those of executor_single.c,
 * written again here over (tensor, device) pairs rather than shared: its
 * helpers are static and one-device-shaped. */
#include <stddef.h>
#include <stdlib.h>
#include <string.h>

#include "executor_internal.h"
#include "graph_internal.h"

void *sy__xp_host_ptr(const sy__device *dev, void *buffer)
{
    const sy__plugin *p = dev->plugin;
    if (!buffer || !p->desc.buffer_host_ptr)
        return NULL;
    return p->desc.buffer_host_ptr(p->state, dev->index, buffer);
}

sy_status sy__xp_fail(xp_run *r, sy_status st, uint32_t d, const char *what, const char *name,
                         uint64_t bytes)
{
    sy__runtime_set_error(r->rt, "device '%s': %s of %llu bytes for tensor '%s' failed: %s",
                          r->dev[d]->desc.name, what, (unsigned long long)bytes, name,
                          sy_status_name(st));
    sy__runtime_note_failure(r->rt, r->plan->dev_index[d], NULL, st);
    return st;
}

/* Allocates |size| bytes on runtime device |di|, counting them. */
sy_status sy__xp_dev_alloc(sy_executor *x, uint32_t di, uint64_t size, void **out)
{
    const sy__device *dev = &x->rt->devices[di];
    sy_status st = dev->plugin->desc.buffer_alloc(dev->plugin->state, dev->index,
                                                  size ? size : 1, out);
    if (st != SY_OK) {
        *out = NULL;
        return st;
    }
    xp_device *ds = &x->dev[di];
    ds->now += size;
    if (ds->now > ds->peak)
        ds->peak = ds->now;
    return SY_OK;
}

void sy__xp_dev_free(sy_executor *x, uint32_t di, void *buf, uint64_t size)
{
    if (!buf)
        return;
    const sy__device *dev = &x->rt->devices[di];
    dev->plugin->desc.buffer_free(dev->plugin->state, dev->index, buf);
    x->dev[di].now -= size;
}

/* Counts |size| bytes copied to or from runtime device |di|. */
void sy__xp_moved(sy_executor *x, uint32_t di, uint64_t size)
{
    x->dev[di].moved += size;
}

/* -------------------------------------------------------------- layouts */

static sy_status xp_layout_get(xp_run *r)
{
    sy_executor *x = r->x;
    /* The layout depends on the plan and the sizes of the roots, which
     * the graph digested once at freeze (views' extents are not in it). */
    uint64_t sig = sy__graph_layout(r->g);
    xp_layout *slot = &x->layouts[0];
    for (uint32_t k = 0; k < XP_LAYOUTS; k++) {
        xp_layout *l = &x->layouts[k];
        if (l->plan == r->plan && l->sig == sig) {
            l->last_use = ++x->tick;
            r->mp = &l->mp;
            return SY_OK;
        }
        if (!l->plan || (slot->plan && l->last_use < slot->last_use))
            slot = l;
    }
    sy__memplan mp;
    uint8_t alias_to[SY__MAX_PLAN_DEVICES];
    sy__memplan_alias_masks(r->rt, r->plan, alias_to);
    char err[256];
    sy_status st = sy__memplan_build(r->g, r->plan, alias_to, SY__MEMPLAN_ALIGN, &mp, err,
                                     sizeof err);
    if (st != SY_OK) {
        sy__runtime_set_error(r->rt, "execute_plan: %s", err);
        return st;
    }
    if (slot->plan) {
        sy__memplan_free(&slot->mp);
        sy_plan_release(slot->plan);
    }
    sy_plan_retain((sy_plan *)r->plan);
    *slot = (xp_layout){.plan = (sy_plan *)r->plan, .sig = sig, .last_use = ++x->tick, .mp = mp};
    r->mp = &slot->mp;
    return SY_OK;
}

/* Gives slot |d|'s device an arena of at least |need| bytes. */
static sy_status xp_arena(xp_run *r, uint32_t d, uint64_t need)
{
    xp_device *ds = r->ds[d];
    if (need <= ds->arena_size)
        return SY_OK;
    uint32_t di = r->plan->dev_index[d];
    sy__xp_dev_free(r->x, di, ds->arena, ds->arena_size);
    ds->arena = NULL;
    ds->arena_size = 0;
    ds->arena_host = NULL;
    sy_status st = sy__xp_dev_alloc(r->x, di, need, &ds->arena);
    if (st != SY_OK) {
        sy__runtime_set_error(r->rt,
                              "device '%s': the activation arena of %llu bytes could not be "
                              "allocated: %s",
                              r->dev[d]->desc.name, (unsigned long long)need, sy_status_name(st));
        return st;
    }
    ds->arena_size = need;
    ds->arena_host = sy__xp_host_ptr(r->dev[d], ds->arena);
    return SY_OK;
}

/* ---------------------------------------------------------------- a run */

/* Checks the plan against the graph before anything is allocated. */
/* Node |i| is the op the plan says and its device accepts it. */
static sy_status xp_check_node(xp_run *r, uint32_t i)
{
    const sy_node *n = sy_graph_node(r->g, i);
    const sy__plan_node *pn = &r->plan->nodes[i];
    if (n->op != pn->op) {
        sy__runtime_set_error(r->rt, "execute_plan: node %u is '%s' (%s), the plan has %s", i,
                              n->name, sy_op_name((sy_op)n->op), sy_op_name((sy_op)pn->op));
        return SY_E_INVALID_ARG;
    }
    sy_support why;
    /* A cached plan may come from another graph of the same class. */
    if (!sy__device_supports(r->dev[pn->dev], n, &why)) {
        sy__runtime_set_error(r->rt, "device '%s' cannot run node '%s' (%s): %s: %s",
                              r->dev[pn->dev]->desc.name, n->name, sy_op_name((sy_op)n->op),
                              sy__support_reason_name(why.reason), why.text);
        sy__runtime_note_failure(r->rt, r->plan->dev_index[pn->dev], n, SY_E_UNSUPPORTED);
        return SY_E_UNSUPPORTED;
    }
    return SY_OK;
}

static sy_status xp_check_tensor(xp_run *r, const sy_tensor *t)
{
    if (t->view_src && t->view_src->view_src) {
        sy__runtime_set_error(r->rt,
                              "tensor '%s' is a view of '%s', which is itself a view; "
                              "view_src must be the root storage tensor",
                              t->name, t->view_src->name);
        return SY_E_GRAPH;
    }
    /* Contiguity first: it reads |t| alone, where the graph's output and
     * host tables are two more cache misses per tensor a decode step
     * checks again. */
    if (!sy_tensor_is_contiguous(t) && sy__graph_is_output_of(r->g, t) &&
        sy__graph_host_of(r->g, t)) {
        sy__runtime_set_error(r->rt,
                              "output '%s' is not contiguous; only contiguous outputs are "
                              "copied to host data (add a copy node)",
                              t->name);
        return SY_E_UNSUPPORTED;
    }
    return SY_OK;
}

static sy_status xp_check(xp_run *r)
{
    const sy_plan *plan = r->plan;
    if (plan->n_nodes != sy_graph_node_count(r->g) || plan->n_tensors != r->n_tensors) {
        sy__runtime_set_error(r->rt,
                              "execute_plan: the plan is for %u nodes and %u tensors, the graph "
                              "has %u and %u",
                              plan->n_nodes, plan->n_tensors, sy_graph_node_count(r->g),
                              r->n_tensors);
        return SY_E_INVALID_ARG;
    }
    for (uint32_t d = 0; d < r->D; d++) {
        if (plan->dev_index[d] >= r->rt->device_count ||
            plan->dev_index[d] >= r->x->n_dev) {
            sy__runtime_set_error(r->rt,
                                  "execute_plan: the plan names device %u, the runtime "
                                  "has %u",
                                  plan->dev_index[d], r->rt->device_count);
            return SY_E_NOT_FOUND;
        }
        r->dev[d] = &r->rt->devices[plan->dev_index[d]];
        r->ds[d] = &r->x->dev[plan->dev_index[d]];
    }
    /* The checks depend on the graph, the plan and the runtime's devices:
     * a graph run again with the same plan (a session's kept decode graph)
     * needs only the nodes its updates touched checked again.  A plan made
     * without the cache has no key to tell it from another at its address. */
    uint64_t memo[4] = {(uint64_t)(uintptr_t)plan, (uint64_t)(uintptr_t)r->rt, plan->key[0],
                        plan->key[1]};
    bool keyed = plan->key[0] || plan->key[1];
    const uint32_t *dirty;
    uint32_t n_dirty;
    sy_status st = SY_OK;
    if (keyed && sy__graph_memo_holds(r->g, memo, &dirty, &n_dirty)) {
        /* (memo_set keeps the list's entries for a replay to read) */
        r->dirty = dirty;
        r->n_dirty = n_dirty;
        r->memo_held = true;
        for (uint32_t k = 0; k < n_dirty; k++) /* all their misses at once */
            __builtin_prefetch(&plan->nodes[dirty[k]]);
        for (uint32_t k = 0; st == SY_OK && k < n_dirty; k++) {
            st = xp_check_node(r, dirty[k]);
            if (st == SY_OK)
                st = xp_check_tensor(r, sy_graph_node(r->g, dirty[k])->output);
        }
    } else {
        for (uint32_t i = 0; st == SY_OK && i < plan->n_nodes; i++)
            st = xp_check_node(r, i);
        for (uint32_t i = 0; st == SY_OK && i < r->n_tensors; i++)
            st = xp_check_tensor(r, sy_graph_tensor(r->g, i));
    }
    if (st == SY_OK && keyed)
        sy__graph_memo_set(r->g, memo);
    return st;
}

/* Gives root |t| a buffer of its own on slot |d| for this run. */
sy_status sy__xp_private(xp_run *r, const sy_tensor *t, uint32_t d)
{
    xp_bind *b = sy__xp_at(r, t->id, d);
    uint64_t size = sy_tensor_nbytes(t);
    sy_status st = sy__xp_dev_alloc(r->x, r->plan->dev_index[d], size, &b->buf);
    if (st != SY_OK)
        return sy__xp_fail(r, st, d, "buffer_alloc", t->name, size);
    b->off = 0;
    b->host = sy__xp_host_ptr(r->dev[d], b->buf);
    b->flags = XP_PRIVATE;
    return SY_OK;
}

/* Wraps host memory |host| holding root |t| on slot |d| for this run;
 * false when the device cannot. */
bool sy__xp_wrap(xp_run *r, const sy_tensor *t, uint32_t d, char *host, uint8_t flags)
{
    const sy__plugin *p = r->dev[d]->plugin;
    if (!host || !r->dev[d]->desc.unified_memory || !p->desc.buffer_import_host)
        return false;
    xp_bind *b = sy__xp_at(r, t->id, d);
    if (p->desc.buffer_import_host(p->state, r->dev[d]->index, host, sy_tensor_nbytes(t),
                                   &b->buf) != SY_OK) {
        b->buf = NULL; /* refused (alignment, pinning): copying is always correct */
        return false;
    }
    b->off = 0;
    b->host = host;
    b->flags = (uint8_t)(XP_PRIVATE | XP_WRAPPED | flags);
    return true;
}

/* Puts a leaf on its home device: kept (weights), wrapped, copied in, or
 * zeroed. */
static sy_status xp_place_leaf(xp_run *r, sy_tensor *t, uint32_t d)
{
    uint64_t size = sy_tensor_nbytes(t);
    if (size == 0)
        return SY_OK;
    sy_status st = sy__xp_keep_weight(r, t, d);
    if (st != SY_E_UNSUPPORTED)
        return st;
    void *host = sy__graph_host_of(r->g, t);
    /* --- kept KV caches (executor_state.c) --- */
    if (t->role == SY_ROLE_KV) {
        xp_bind *b = sy__xp_at(r, t->id, d);
        st = sy__xstate_place(&r->x->state, r->x, r->rt, r->plan->dev_index[d], host, size,
                              t->name, t->id, d, &b->buf);
        if (st != SY_E_UNSUPPORTED) {
            b->off = 0;
            b->host = st == SY_OK ? sy__xp_host_ptr(r->dev[d], b->buf) : NULL;
            b->flags = XP_STATE;
            return st;
        }
    }
    /* --- */
    if (sy__xp_wrap(r, t, d, host, XP_FROM_HOST))
        return SY_OK;
    st = sy__xp_private(r, t, d);
    if (st != SY_OK)
        return st;
    void *zeros = NULL;
    if (!host) {
        zeros = calloc(1, (size_t)size);
        if (!zeros) {
            sy__runtime_set_error(r->rt, "out of memory zeroing tensor '%s' (%llu bytes)", t->name,
                                  (unsigned long long)size);
            return SY_E_NO_MEMORY;
        }
    }
    const sy__plugin *p = r->dev[d]->plugin;
    xp_bind *b = sy__xp_at(r, t->id, d);
    st = p->desc.copy_in(p->state, r->dev[d]->index, b->buf, 0, host ? host : zeros, size);
    sy__xp_moved(r->x, r->plan->dev_index[d], size);
    free(zeros);
    return st == SY_OK ? SY_OK : sy__xp_fail(r, st, d, "copy_in", t->name, size);
}

/* True when no other tensor's host data overlaps |t|'s, |n| bytes at |host|
 * (an output may share its host memory with an input of the graph).  Run
 * after the leaves are placed: the tensors with host data are then in
 * cache. */
static bool xp_host_alone(const xp_run *r, const sy_tensor *t, const char *host, uint64_t n)
{
    for (uint32_t i = 0; i < r->n_tensors; i++) {
        const char *h = sy__graph_host_at(r->g, i);
        if (!h || i == t->id)
            continue;
        if (h < host + n && host < h + sy_tensor_nbytes(sy__graph_tensor_at(r->g, i)))
            return false;
    }
    return true;
}

/* Binds each marked output with host data of its own, made on a device
 * that shares host memory, to that host memory instead of its arena bytes,
 * so that its producer writes it there and nothing is copied back (a
 * session's logits).  One whose host memory overlaps another tensor's
 * stays in the arena. */
static void xp_outputs_in_host(xp_run *r)
{
    const sy__memplan *mp = r->mp;
    for (uint32_t i = 0; i < mp->n_items; i++) {
        const sy__mp_item *it = &mp->items[i];
        /* Most activations have no host data: pass them by id. */
        char *host = sy__graph_host_at(r->g, it->tensor);
        if (!host)
            continue;
        const sy_tensor *t = sy__graph_tensor_at(r->g, it->tensor);
        const sy_node *prod = sy__graph_producer_of(r->g, t);
        if (t->view_src || !prod || !sy__graph_is_output_of(r->g, t) ||
            r->plan->nodes[prod->id].dev != it->slot || !r->dev[it->slot]->desc.unified_memory ||
            !sy_tensor_is_contiguous(t) || !xp_host_alone(r, t, host, sy_tensor_nbytes(t)))
            continue;
        /* Refused: the arena binding stays. */
        xp_bind keep = *sy__xp_at(r, it->tensor, it->slot);
        if (!sy__xp_wrap(r, t, it->slot, host, XP_FROM_HOST))
            *sy__xp_at(r, it->tensor, it->slot) = keep;
    }
}

/* Binds every activation that has bytes of its own in an arena. */
static void xp_bind_arenas(xp_run *r)
{
    const sy__memplan *mp = r->mp;
    for (uint32_t i = 0; i < mp->n_items; i++) {
        const sy__mp_item *it = &mp->items[i];
        xp_bind *b = sy__xp_at(r, it->tensor, it->slot);
        const xp_device *ds = r->ds[it->slot];
        b->buf = ds->arena;
        b->off = it->offset;
        b->host = ds->arena_host ? ds->arena_host + it->offset : NULL;
        b->flags = 0;
    }
}

/* Copies marked outputs and leaves written through views back to their
 * host data, from the device that holds the final contents. */
static sy_status xp_copy_back(xp_run *r)
{
    for (uint32_t i = 0; i < r->n_tensors; i++) {
        sy_tensor *t = sy__graph_tensor_at(r->g, i);
        void *host = sy__graph_host_of(r->g, t);
        const sy_tensor *root = t->view_src ? t->view_src : t;
        const sy_node *prod = sy__graph_producer_of(r->g, t);
        uint32_t d;
        if (sy__graph_is_output_of(r->g, t) && prod)
            d = r->plan->nodes[prod->id].dev;
        else if (!t->view_src && r->x->writer[i] != SY__NO_DEVICE)
            d = r->x->writer[i];
        else
            continue;
        const xp_bind *b = sy__xp_at(r, root->id, d);
        if (!host || !b->buf || (b->flags & XP_STATE))
            continue;
        uint64_t off = t->view_src ? t->view_offset : 0;
        bool in_place = (b->host && b->host + off == (char *)host) ||
                        (!t->view_src && (b->flags & XP_FROM_HOST));
        if (in_place)
            continue;
        const sy__plugin *p = r->dev[d]->plugin;
        uint64_t size = sy_tensor_nbytes(t);
        sy__xp_moved(r->x, r->plan->dev_index[d], sy_tensor_nbytes(t));
        sy__xp_replay_copy(r, i, b->buf, b->off + off, host, size);
        sy_status st = p->desc.copy_out(p->state, r->dev[d]->index, b->buf, b->off + off, host,
                                        size);
        if (st != SY_OK)
            return sy__xp_fail(r, st, d, "copy_out", t->name, size);
    }
    return SY_OK;
}

/* Frees this run's own buffers and points tensors back at host data. */
static void xp_release(xp_run *r)
{
    for (uint32_t i = r->n_tensors; i-- > 0;) {
        for (uint32_t d = 0; d < r->D; d++) {
            xp_bind *b = sy__xp_at(r, i, d);
            if (!(b->flags & XP_PRIVATE) || !b->buf)
                continue;
            if (b->flags & XP_WRAPPED)
                r->dev[d]->plugin->desc.buffer_free(r->dev[d]->plugin->state,
                                                    r->dev[d]->index, b->buf);
            else
                sy__xp_dev_free(r->x, r->plan->dev_index[d], b->buf,
                            sy_tensor_nbytes(sy__graph_tensor_at(r->g, i)));
        }
        sy_tensor *t = sy__graph_tensor_at(r->g, i);
        t->data = sy__graph_host_of(r->g, t);
        t->buffer = NULL;
        t->offset = 0;
    }
}

bool sy__xp_grow(void **p, size_t *cap, size_t need, size_t elem)
{
    if (need <= *cap)
        return true;
    void *grown = realloc(*p, need * elem);
    if (!grown)
        return false;
    *p = grown;
    *cap = need;
    return true;
}

sy_status sy_executor_create(sy_runtime *rt, sy_executor **out_executor)
{
    if (!out_executor)
        return SY_E_INVALID_ARG;
    *out_executor = NULL;
    if (!rt)
        return SY_E_INVALID_ARG;
    sy_executor *x = calloc(1, sizeof *x);
    if (!x)
        return SY_E_NO_MEMORY;
    x->rt = rt;
    x->n_dev = rt->device_count;
    x->dev = calloc((size_t)x->n_dev + 1, sizeof *x->dev);
    if (!x->dev) {
        free(x);
        return SY_E_NO_MEMORY;
    }
    *out_executor = x;
    return SY_OK;
}

void sy_executor_destroy(sy_executor *x)
{
    if (!x)
        return;
    sy__xp_replay_free(x);
    for (uint32_t k = 0; k < XP_LAYOUTS; k++) {
        if (x->layouts[k].plan) {
            sy__memplan_free(&x->layouts[k].mp);
            sy_plan_release(x->layouts[k].plan);
        }
    }
    for (uint32_t k = x->n_kept; k-- > 0;) {
        const xp_kept *e = &x->kept[k];
        const sy__device *dev = &x->rt->devices[e->dev];
        if (e->imported)
            dev->plugin->desc.buffer_free(dev->plugin->state, dev->index, e->buf);
        else
            sy__xp_dev_free(x, e->dev, e->buf, e->size);
    }
    sy__xstate_free(&x->state, x);
    sy__xp_flow_free(x);
    for (uint32_t d = 0; d < x->n_dev; d++)
        sy__xp_dev_free(x, d, x->dev[d].arena, x->dev[d].arena_size);
    free(x->kept);
    free(x->kept_index);
    free(x->dev);
    free(x->bind);
    free(x->writer);
    free(x->nodes);
    free(x->node_s);
    free(x->node_dev);
    free(x);
}

sy_status sy_executor_set_node_timing(sy_executor *x, bool on)
{
    if (!x)
        return SY_E_INVALID_ARG;
    x->time_nodes = on;
    x->n_timed = 0;
    return SY_OK;
}

sy_status sy_executor_query_node_time(const sy_executor *x, uint32_t node, double *out_seconds,
                                      uint32_t *out_device)
{
    if (out_seconds)
        *out_seconds = 0;
    if (out_device)
        *out_device = 0;
    if (!x || !out_seconds)
        return SY_E_INVALID_ARG;
    if (!x->time_nodes || node >= x->n_timed)
        return SY_E_NOT_FOUND;
    *out_seconds = x->node_s[node];
    if (out_device)
        *out_device = x->node_dev[node];
    return SY_OK;
}

sy_status sy_executor_run(sy_executor *x, sy_graph *g, const sy_plan *plan)
{
    if (!x)
        return SY_E_INVALID_ARG;
    sy_runtime *rt = x->rt;
    if (!g || !plan) {
        sy__runtime_set_error(rt, "execute_plan: no %s given", g ? "plan" : "graph");
        return SY_E_INVALID_ARG;
    }
    if (!sy_graph_is_frozen(g)) {
        sy__runtime_set_error(rt, "execute_plan: the graph is not frozen; call sy_graph_freeze()");
        return SY_E_STATE;
    }
    sy__runtime_clear_failure(rt);
    xp_run r = {.x = x, .rt = rt, .g = g, .plan = plan, .n_tensors = sy_graph_tensor_count(g),
                .D = plan->n_dev};
    sy_status st = xp_check(&r);
    if (st != SY_OK)
        return st;
    if (sy__xp_replay_run(&r, &st)) {
        if (st == SY_OK)
            x->stats.steps++;
        return st;
    }
    size_t nt = (size_t)r.n_tensors + 1;
    if (!sy__xp_grow((void **)&x->bind, &x->cap_bind, nt * r.D, sizeof *x->bind) ||
        !sy__xp_grow((void **)&x->writer, &x->cap_writer, nt, 1) ||
        !sy__xp_grow((void **)&x->nodes, &x->cap_nodes, (size_t)plan->n_nodes + 1,
                 sizeof *x->nodes)) {
        sy__runtime_set_error(rt, "out of memory preparing %u tensors", r.n_tensors);
        return SY_E_NO_MEMORY;
    }
    memset(x->bind, 0, nt * r.D * sizeof *x->bind);
    memset(x->writer, SY__NO_DEVICE, nt);
    if (x->time_nodes) {
        size_t nn = (size_t)sy_graph_node_count(g) + 1;
        if (!sy__xp_grow((void **)&x->node_s, &x->cap_node_s, nn, sizeof *x->node_s) ||
            !sy__xp_grow((void **)&x->node_dev, &x->cap_node_dev, nn, sizeof *x->node_dev)) {
            sy__runtime_set_error(rt, "out of memory preparing node timing");
            return SY_E_NO_MEMORY;
        }
        memset(x->node_s, 0, nn * sizeof *x->node_s);
        memset(x->node_dev, 0, nn * sizeof *x->node_dev);
        x->n_timed = sy_graph_node_count(g);
    }
    st = xp_layout_get(&r);
    for (uint32_t d = 0; st == SY_OK && d < r.D; d++)
        st = xp_arena(&r, d, r.mp->arena[d]);
    if (st != SY_OK)
        return st;
    xp_bind_arenas(&r);
    for (uint32_t i = 0; st == SY_OK && i < r.n_tensors; i++) {
        sy_tensor *t = sy__graph_tensor_at(g, i);
        if (!t->view_src && !sy__graph_producer_of(g, t) && plan->leaf_home[i] != SY__NO_DEVICE)
            st = xp_place_leaf(&r, t, plan->leaf_home[i]);
    }
    if (st == SY_OK)
        xp_outputs_in_host(&r);
    if (st == SY_OK) {
        sy__xp_replay_begin(&r);
        st = sy__xp_run_steps(&r);
    }
    if (st == SY_OK)
        x->stats.steps++;
    if (st == SY_OK)
        st = xp_copy_back(&r);
    sy__xp_replay_keep(&r, st == SY_OK);
    sy__xstate_after_run(&x->state, x->writer, SY__NO_DEVICE);
    xp_release(&r);
    return st;
}

sy_status sy_executor_query_stats(const sy_executor *x, sy_step_stats *out_stats)
{
    /* A caller built before |replayed| was added gets the fields it has. */
    if (!out_stats || out_stats->struct_size < offsetof(sy_step_stats, replayed))
        return SY_E_INVALID_ARG;
    size_t n = out_stats->struct_size < sizeof *out_stats ? out_stats->struct_size
                                                          : sizeof *out_stats;
    sy_step_stats v = {0};
    if (x)
        v = x->stats;
    v.struct_size = (uint32_t)n;
    memcpy(out_stats, &v, n);
    return x ? SY_OK : SY_E_INVALID_ARG;
}

sy_status sy_executor_query_memory(const sy_executor *x, uint32_t device,
                                   sy_executor_memory *out_memory)
{
    if (!out_memory)
        return SY_E_INVALID_ARG;
    memset(out_memory, 0, sizeof *out_memory);
    if (!x)
        return SY_E_INVALID_ARG;
    if (device >= x->n_dev)
        return SY_E_NOT_FOUND;
    const xp_device *ds = &x->dev[device];
    out_memory->arena_bytes = ds->arena_size;
    out_memory->weight_bytes = ds->weights;
    out_memory->current_bytes = ds->now;
    out_memory->peak_bytes = ds->peak;
    out_memory->moved_bytes = ds->moved;
    for (uint32_t k = 0; k < x->state.n; k++)
        if (x->state.e[k].dev == device)
            out_memory->kv_bytes += x->state.e[k].size;
    return SY_OK;
}

/* --- kept KV caches (executor_state.h) --- */

sy_status sy__executor_alloc(sy_executor *x, uint32_t di, uint64_t size, void **out_buffer)
{
    return sy__xp_dev_alloc(x, di, size, out_buffer);
}

void sy__executor_free(sy_executor *x, uint32_t di, void *buffer, uint64_t size)
{
    sy__xp_dev_free(x, di, buffer, size);
}

void sy__executor_moved(sy_executor *x, uint32_t di, uint64_t size)
{
    sy__xp_moved(x, di, size);
}

sy_status sy_executor_keep_state(sy_executor *x, bool on)
{
    if (!x)
        return SY_E_INVALID_ARG;
    if (!on && x->state.n) {
        sy__runtime_set_error(x->rt, "executor: %u KV caches are kept on devices; synchronise "
                              "and destroy the executor instead of turning keeping off",
                              x->state.n);
        return SY_E_STATE;
    }
    x->state.on = on;
    return SY_OK;
}

sy_status sy_executor_sync_state(sy_executor *x, const void *host, uint64_t size,
                                 bool will_write)
{
    if (!x || (!host && size))
        return SY_E_INVALID_ARG;
    return sy__xstate_sync(&x->state, x, x->rt, host, size, will_write);
}

sy_status sy_runtime_execute_plan(sy_runtime *rt, sy_graph *g, const sy_plan *plan)
{
    if (!rt)
        return SY_E_INVALID_ARG;
    sy_executor *x = NULL;
    sy_status st = sy_executor_create(rt, &x);
    if (st != SY_OK) {
        sy__runtime_set_error(rt, "execute_plan: out of memory creating an executor");
        return st;
    }
    st = sy_executor_run(x, g, plan);
    sy_executor_destroy(x);
    return st;
}
