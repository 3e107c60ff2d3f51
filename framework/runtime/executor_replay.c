/* Replaying a step (executor_internal.h).
 *
 * A session runs its kept decode graph once per token with the same plan;
 * between two runs only the nodes sy__graph_update_params() touched
 * change (their params, and the extent and offset of the views they
 * write).  A full run binds every tensor, points every node's tensors at
 * their storage, copies back, and points every tensor at its host data
 * again: walks over ~1000 tensor structs that the weights streamed
 * through the caches in between have evicted, a cache miss per tensor
 * each time.
 *
 * After a full run of a plan of one segment, the executor keeps a copy of
 * the graph's nodes and tensors (the shadow) with the storage the run
 * bound them to, and the wrapped host buffers that storage uses.  The next
 * run of the same graph and plan, when only parameters changed, copies the
 * updated nodes' params and output extents into the shadow and hands the
 * device the shadow's nodes: the graph's own tensors stay pointed at their
 * host data, and nothing walks the whole graph.
 *
 * What the shadow holds stays true while: the graph is the same one (its
 * serial) and no host data was set since (its host generation); the plan
 * is the same (kept referenced); the device's arena is where it was
 * (weights kept by the executor never move); the kept KV caches place as
 * they did (placed again each run, so their copies in and the staleness
 * bookkeeping happen as in a full run); the graph's check memo held, so
 * that its list of updated nodes is complete.  Runs that use buffers of
 * their own (copies of leaves into device memory) are not replayed.
 *
 * A device whose plugin has execute_keyed (ABI 1.2) gets the shadow's
 * nodes under a key taken when the shadow is made, with the updated
 * nodes' shadows as the changed ones: the plugin may keep what it
 * derived from the nodes (its grouping of them, kernel setup) from one
 * replay to the next and redo only what the update touched. */
#include <stdatomic.h>
#include <stddef.h>
#include <stdlib.h>
#include <string.h>

#include "executor_internal.h"

/* A copy back to host data, as the recorded run made it. */
typedef struct xp_copyback {
    uint32_t tensor;
    void *buf;
    uint64_t off;
    void *host;
    uint64_t size;
} xp_copyback;

/* A KV cache leaf kept on the device (executor_state.c). */
typedef struct xp_stateleaf {
    uint32_t tensor;
    void *buf;
} xp_stateleaf;

/* Shadow structs sit on cache-line boundaries, one every |STRIDE| bytes:
 * the fields a device reads (shape, strides, storage; op, inputs, params)
 * then span the fewest lines, and the name the rest. */
#define XP_T_STRIDE 192
#define XP_N_STRIDE 256
_Static_assert(sizeof(sy_tensor) <= XP_T_STRIDE, "a shadow tensor fits its stride");
_Static_assert(sizeof(sy_node) <= XP_N_STRIDE, "a shadow node fits its stride");

struct xp_replay {
    uint64_t serial, host_gen; /* the graph's */
    sy_plan *plan;             /* referenced */
    uint64_t key[2];
    uint32_t dev; /* runtime device index of the one slot */
    void *arena;
    char *arena_host;
    uint32_t n_tensors, n_nodes, count;
    char *t;        /* shadow tensors, by id (shadow_t) */
    char *n;        /* shadow nodes, by id (shadow_n) */
    sy_node **list; /* the segment's nodes, in plan order */
    xp_bind *bind;  /* per root: its storage on the slot */
    uint8_t *writer;
    void **wraps; /* host memory wrapped for the run, freed with the shadow */
    uint32_t n_wraps;
    xp_stateleaf *state;
    uint32_t n_state;
    xp_copyback *copies;
    uint32_t n_copies;
    uint64_t exec_key; /* for execute_keyed: new with every shadow */
    sy_node **changed; /* the updated nodes' shadows, at a replay */
    bool broken; /* the recording failed (out of memory) */
    bool valid;  /* a run is kept; else only the arrays, for the next one */
    /* The arrays' capacities: a decode step records again whenever its
     * plan changes, and fresh memory costs page faults. */
    size_t cap_t, cap_n, cap_list, cap_bind, cap_writer, cap_wraps, cap_state, cap_copies,
        cap_changed;
};

static sy_tensor *shadow_t(const struct xp_replay *p, uint32_t id)
{
    return (sy_tensor *)(p->t + (size_t)id * XP_T_STRIDE);
}

static sy_node *shadow_n(const struct xp_replay *p, uint32_t id)
{
    return (sy_node *)(p->n + (size_t)id * XP_N_STRIDE);
}

/* Forgets the kept run (its wrapped buffers and plan reference go); the
 * arrays stay for the next. */
static void replay_forget(sy_runtime *rt, struct xp_replay *p)
{
    const sy__device *dev = &rt->devices[p->dev];
    for (uint32_t k = 0; k < p->n_wraps; k++)
        dev->plugin->desc.buffer_free(dev->plugin->state, dev->index, p->wraps[k]);
    if (p->plan)
        sy_plan_release(p->plan);
    p->plan = NULL;
    p->n_wraps = p->n_state = p->n_copies = 0;
    p->broken = p->valid = false;
}

void sy__xp_replay_drop(sy_executor *x)
{
    if (x->replay)
        replay_forget(x->rt, x->replay);
}

void sy__xp_replay_free(sy_executor *x)
{
    struct xp_replay *p = x->replay;
    if (!p)
        return;
    replay_forget(x->rt, p);
    free(p->t);
    free(p->n);
    free(p->list);
    free(p->bind);
    free(p->writer);
    free(p->wraps);
    free(p->state);
    free(p->copies);
    free(p->changed);
    free(p);
    x->replay = NULL;
}

/* Makes room for |n| elements of |elem| bytes in |*a|, whose contents need
 * not survive; |aligned|: on a cache-line boundary. */
static bool room(void **a, size_t *cap, size_t n, size_t elem, bool aligned)
{
    if (n <= *cap)
        return true;
    free(*a);
    *a = aligned ? aligned_alloc(64, n * elem) : malloc(n * elem);
    *cap = *a ? n : 0;
    return *a != NULL;
}

/* Points shadow tensor |t| (a node's input or output) at its storage, as
 * xp_point does for the graph's own. */
static void shadow_point(struct xp_replay *p, sy_tensor *t)
{
    const sy_tensor *root = t->view_src ? t->view_src : t;
    const xp_bind *b = &p->bind[root->id];
    uint64_t off = t->view_src ? t->view_offset : 0;
    t->buffer = b->buf;
    t->offset = b->off + off;
    t->data = b->host ? b->host + off : NULL;
}

void sy__xp_replay_begin(xp_run *r)
{
    r->rec = NULL;
    const sy_plan *plan = r->plan;
    if (r->x->time_nodes || r->D != 1 || plan->n_steps != 1 ||
        plan->steps[0].kind != SY_PLAN_STEP_SEGMENT || !(plan->key[0] || plan->key[1]))
        return;
    struct xp_replay *p = r->x->replay;
    if (p)
        replay_forget(r->rt, p);
    else if (!(p = r->x->replay = calloc(1, sizeof *p)))
        return;
    p->dev = plan->dev_index[0];
    r->rec = p;
}

void sy__xp_replay_copy(xp_run *r, uint32_t tensor, void *buf, uint64_t off, void *host,
                        uint64_t size)
{
    struct xp_replay *p = r->rec;
    if (!p || p->broken)
        return;
    if (p->n_copies == p->cap_copies &&
        !sy__xp_grow((void **)&p->copies, &p->cap_copies, 2 * (size_t)p->n_copies + 4,
                     sizeof *p->copies)) {
        p->broken = true;
        return;
    }
    p->copies[p->n_copies++] = (xp_copyback){tensor, buf, off, host, size};
}

/* Fills the shadow from the graph and this run's bindings; false when out
 * of memory. */
static bool shadow_build(xp_run *r, struct xp_replay *p)
{
    const sy__plan_step *s = &r->plan->steps[0];
    p->n_tensors = r->n_tensors;
    p->n_nodes = sy_graph_node_count(r->g);
    p->count = s->count;
    const size_t nt = (size_t)p->n_tensors + 1;
    if (!room((void **)&p->t, &p->cap_t, nt, XP_T_STRIDE, true) ||
        !room((void **)&p->n, &p->cap_n, (size_t)p->n_nodes + 1, XP_N_STRIDE, true) ||
        !room((void **)&p->list, &p->cap_list, (size_t)p->count + 1, sizeof *p->list, false) ||
        !room((void **)&p->bind, &p->cap_bind, nt, sizeof *p->bind, false) ||
        !room((void **)&p->writer, &p->cap_writer, nt, 1, false))
        return false;
    memcpy(p->bind, r->x->bind, (size_t)p->n_tensors * sizeof *p->bind);
    memcpy(p->writer, r->x->writer, p->n_tensors);
    for (uint32_t i = 0; i < p->n_tensors; i++) {
        const sy_tensor *t = sy__graph_tensor_at(r->g, i);
        sy_tensor *c = shadow_t(p, i);
        *c = *t;
        if (t->view_src)
            c->view_src = shadow_t(p, t->view_src->id);
    }
    for (uint32_t i = 0; i < p->n_nodes; i++) {
        const sy_node *n = sy__graph_node_at(r->g, i);
        sy_node *c = shadow_n(p, i);
        *c = *n;
        for (uint32_t j = 0; j < n->n_inputs; j++)
            c->inputs[j] = shadow_t(p, n->inputs[j]->id);
        c->output = shadow_t(p, n->output->id);
    }
    /* Views compute nothing (every device skips them): their shadows are
     * pointed here, and the device is handed the other nodes only. */
    p->count = 0;
    for (uint32_t q = 0; q < s->count; q++) {
        sy_node *c = shadow_n(p, r->plan->order[s->first + q]);
        for (uint32_t j = 0; j < c->n_inputs; j++)
            shadow_point(p, c->inputs[j]);
        shadow_point(p, c->output);
        if (!sy_op_is_view(c->op))
            p->list[p->count++] = c;
    }
    return true;
}

void sy__xp_replay_keep(xp_run *r, bool ran)
{
    struct xp_replay *p = r->rec;
    r->rec = NULL;
    if (!p)
        return;
    if (!ran) {
        replay_forget(r->rt, p);
        return;
    }
    /* A buffer of this run's own (a leaf copied in, or zeroed) is not kept:
     * such a run is not replayed. */
    uint32_t wraps = 0, state = 0;
    bool ok = !p->broken;
    for (uint32_t i = 0; ok && i < r->n_tensors; i++) {
        const xp_bind *b = sy__xp_at(r, i, 0);
        if ((b->flags & XP_PRIVATE) && b->buf && !(b->flags & XP_WRAPPED))
            ok = false;
        wraps += (b->flags & XP_PRIVATE) && b->buf ? 1 : 0;
        state += (b->flags & XP_STATE) && b->buf ? 1 : 0;
    }
    if (ok)
        ok = room((void **)&p->wraps, &p->cap_wraps, (size_t)wraps + 1, sizeof *p->wraps, false) &&
             room((void **)&p->state, &p->cap_state, (size_t)state + 1, sizeof *p->state, false) &&
             shadow_build(r, p);
    if (!ok) {
        replay_forget(r->rt, p);
        return;
    }
    /* The wrapped buffers are the shadow's now: the run's release leaves
     * them. */
    for (uint32_t i = 0; i < r->n_tensors; i++) {
        xp_bind *b = sy__xp_at(r, i, 0);
        if ((b->flags & XP_PRIVATE) && b->buf) {
            p->wraps[p->n_wraps++] = b->buf;
            b->flags &= (uint8_t)~XP_PRIVATE;
        }
        if ((b->flags & XP_STATE) && b->buf)
            p->state[p->n_state++] = (xp_stateleaf){i, b->buf};
    }
    p->serial = sy__graph_serial(r->g);
    p->host_gen = sy__graph_host_gen(r->g);
    sy_plan_retain((sy_plan *)r->plan);
    p->plan = (sy_plan *)r->plan;
    memcpy(p->key, r->plan->key, sizeof p->key);
    p->arena = r->ds[0]->arena;
    p->arena_host = r->ds[0]->arena_host;
    p->exec_key = atomic_fetch_add_explicit(&r->rt->replay_key, 1, memory_order_relaxed) + 1;
    p->valid = true;
}

/* Places the kept KV caches again; false when one is not where the shadow
 * has it. */
static bool replay_state(xp_run *r, struct xp_replay *p)
{
    for (uint32_t k = 0; k < p->n_state; k++) {
        const sy_tensor *t = shadow_t(p, p->state[k].tensor);
        void *buf = NULL;
        sy_status st = sy__xstate_place(&r->x->state, r->x, r->rt, p->dev,
                                        sy__graph_host_at(r->g, t->id), sy_tensor_nbytes(t),
                                        t->name, t->id, 0, &buf);
        if (st != SY_OK || buf != p->state[k].buf)
            return false;
    }
    return true;
}

/* Copies the params and output extents of the nodes updated since the
 * last run into the shadow. */
static void replay_update(xp_run *r, struct xp_replay *p)
{
    /* The graph's updated nodes are in cache (the update just wrote
     * them), their shadows are not: fetch those all at once first. */
    for (uint32_t k = 0; k < r->n_dirty; k++) {
        const sy_node *n = sy__graph_node_at(r->g, r->dirty[k]);
        const char *c = (const char *)shadow_n(p, n->id);
        const char *t = (const char *)shadow_t(p, n->output->id);
        __builtin_prefetch(c + offsetof(sy_node, params), 1);
        __builtin_prefetch(c + offsetof(sy_node, name) - 1, 1);
        __builtin_prefetch(t, 1);
        __builtin_prefetch(t + 64, 1);
    }
    for (uint32_t k = 0; k < r->n_dirty; k++) {
        const sy_node *n = sy__graph_node_at(r->g, r->dirty[k]);
        const sy_tensor *o = n->output;
        sy_tensor *c = shadow_t(p, o->id);
        sy_node *sn = shadow_n(p, n->id);
        sn->params = n->params;
        p->changed[k] = sn;
        memcpy(c->ne, o->ne, sizeof c->ne);
        memcpy(c->nb, o->nb, sizeof c->nb);
        /* Its root is bound where the recorded run bound it (an update
         * changes a view's extent and offset, never its root): moving the
         * pointers by the change in offset spares looking the root and its
         * binding up again, two cache misses per node (shadow_point). */
        uint64_t delta = o->view_offset - c->view_offset;
        c->view_offset = o->view_offset;
        c->offset += delta;
        if (c->data)
            c->data = (char *)c->data + delta;
    }
}

bool sy__xp_replay_run(xp_run *r, sy_status *out_st)
{
    sy_executor *x = r->x;
    struct xp_replay *p = x->replay;
    *out_st = SY_OK;
    if (!p || !p->valid || p->serial != sy__graph_serial(r->g))
        return false; /* another graph's runs leave this one's updates listed */
    /* A full run of this graph consumes the list of nodes updated since
     * the shadow was made: the shadow goes with it. */
    const xp_device *ds = &x->dev[p->dev];
    if (x->time_nodes || p->plan != r->plan || r->D != 1 ||
        memcmp(p->key, r->plan->key, sizeof p->key) != 0 || !r->memo_held ||
        p->host_gen != sy__graph_host_gen(r->g) || ds->arena != p->arena ||
        ds->arena_host != p->arena_host || !replay_state(r, p)) {
        sy__xp_replay_drop(x);
        return false;
    }
    const sy__device *dev = &r->rt->devices[p->dev];
    const sy__plugin *pl = dev->plugin;
    if (!room((void **)&p->changed, &p->cap_changed, (size_t)r->n_dirty + 1, sizeof *p->changed,
              false)) {
        sy__xp_replay_drop(x);
        return false;
    }
    replay_update(r, p);
    sy_status st = pl->desc.execute_keyed
                       ? pl->desc.execute_keyed(pl->state, dev->index, p->list, p->count, p->exec_key,
                                                p->changed, r->n_dirty)
                       : pl->desc.execute(pl->state, dev->index, p->list, p->count);
    sy_status st_sync = pl->desc.synchronize(pl->state, dev->index);
    if (st != SY_OK || st_sync != SY_OK) {
        /* Run it again in full: that names the node that fails. */
        sy__xp_replay_drop(x);
        return false;
    }
    x->stats.segments++;
    x->stats.replayed++;
    for (uint32_t k = 0; k < p->n_copies; k++) {
        const xp_copyback *c = &p->copies[k];
        sy__xp_moved(x, p->dev, c->size);
        st = pl->desc.copy_out(pl->state, dev->index, c->buf, c->off, c->host, c->size);
        if (st != SY_OK) {
            *out_st = sy__xp_fail(r, st, 0, "copy_out", shadow_t(p, c->tensor)->name, c->size);
            sy__xp_replay_drop(x);
            return true;
        }
    }
    sy__xstate_after_run(&x->state, p->writer, SY__NO_DEVICE);
    return true;
}
