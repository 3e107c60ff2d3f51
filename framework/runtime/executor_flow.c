/* Running a plan's steps across devices (executor_internal.h).
 *
 * Segments on a device with events (ABI 1.1) are launched and not waited
 * for, with a marker after each; such a plugin reads its nodes before
 * execute() returns.  A device without events is synchronized after each
 * segment, as ABI 1.0 promised its plugins (the nodes stay valid until
 * synchronize() returns); the cpu plugin runs on the calling thread
 * anyway.  The host waits only where a result must be there:
 *
 *  - read after write: a transfer reads a value on its source device only
 *    after the step that wrote it there is done (its event; on a device
 *    without events, synchronize());
 *  - write after read, across devices: a device that shares host memory
 *    reads another device's bytes in place (a mapped transfer; the memory
 *    plan keeps them alive until the last reader in plan order).  Before a
 *    segment or a host copy writes bytes such a mapping covers, the
 *    reading device's work launched so far is waited for;
 *  - write after read, on one device: a copy the host makes into a
 *    device's mapped memory first waits for that device's work, which may
 *    still read the bytes the arena reuses.
 *
 * Work on one device needs no waits: its queue runs in order, and copies
 * through the plugin's copy_in/copy_out come after the work queued before
 * them (plugin.h).  Leaves that wrap host data (inputs, KV caches) are not
 * tracked as mappings: within one step a node reads such a leaf only
 * after the writes the graph orders before it.  At the end every device
 * that ran is synchronized (that also surfaces errors a device reports
 * only there), and events are released.
 *
 * A device error at launch, at a wait or at the end is named with its
 * device, then narrowed to a node by running the device's unconfirmed
 * segments again one node at a time (after every device has stopped), so
 * that a session can re-plan around that (node, device) pair. */
#include <stdlib.h>
#include <string.h>
#include <time.h>

#include "executor_internal.h"

/* Bytes of one slot's memory another slot reads in place. */
typedef struct xp_map {
    const char *lo, *hi;
    uint8_t reader;
} xp_map;

struct xp_flow {
    uint32_t *producer; /* [root * D + slot]: step that last wrote it there, SY__NONE done */
    void **ev;          /* per step: event recorded after it, or NULL */
    xp_map *maps;
    uint32_t n_maps;
    size_t cap_producer, cap_ev, cap_maps;
};

/* One run's view of the devices' queues. */
typedef struct xp_flowrun {
    xp_run *r;
    struct xp_flow *f;
    int64_t last[SY__MAX_PLAN_DEVICES]; /* last step launched on the slot, -1 none */
    int64_t done[SY__MAX_PLAN_DEVICES]; /* steps up to here are known done */
    bool events[SY__MAX_PLAN_DEVICES];  /* the slot's plugin has events */
    bool failed;                        /* an error was recorded: keep its message */
} xp_flowrun;

void sy__xp_flow_free(sy_executor *x)
{
    if (!x->flow)
        return;
    free(x->flow->producer);
    free(x->flow->ev);
    free(x->flow->maps);
    free(x->flow);
    x->flow = NULL;
}

static sy_status xp_point(xp_run *r, sy_tensor *t, uint32_t d, const sy_node *user)
{
    const sy_tensor *root = t->view_src ? t->view_src : t;
    const xp_bind *b = sy__xp_at(r, root->id, d);
    if (!b->buf && sy_tensor_nbytes(root) > 0) {
        sy__runtime_set_error(r->rt,
                              "execute_plan: node '%s' on '%s' reads '%s', which the plan never "
                              "brings there",
                              user->name, r->dev[d]->desc.name, root->name);
        return SY_E_INTERNAL;
    }
    uint64_t off = t->view_src ? t->view_offset : 0;
    t->buffer = b->buf;
    t->offset = b->off + off;
    t->data = b->host ? b->host + off : NULL;
    return SY_OK;
}

/* Points the inputs and output of |n| at their storage on slot |d|. */
static sy_status xp_point_node(xp_run *r, sy_node *n, uint32_t d)
{
    for (uint32_t j = 0; j < n->n_inputs; j++) {
        sy_status st = xp_point(r, n->inputs[j], d, n);
        if (st != SY_OK)
            return st;
    }
    return xp_point(r, n->output, d, n);
}

/* ------------------------------------------------------------- failures */

/* Stops every device but |except| (SY__NO_DEVICE: all), errors ignored:
 * the run already failed and says why. */
static void xp_drain(xp_flowrun *fr, uint32_t except)
{
    xp_run *r = fr->r;
    for (uint32_t d = 0; d < r->D; d++) {
        if (d == except || fr->last[d] <= fr->done[d])
            continue;
        const sy__plugin *p = r->dev[d]->plugin;
        p->desc.synchronize(p->state, r->dev[d]->index);
        fr->done[d] = fr->last[d];
    }
}

/* Device slot |d| failed with |st| on work of steps (lo, hi]: stops the
 * other devices, then runs the segments of those steps on |d| again one
 * node at a time to find the node it fails on, and records the failure
 * with it (with the device alone when each node runs by itself). */
static void xp_blame(xp_flowrun *fr, uint32_t d, int64_t lo, int64_t hi, sy_status st)
{
    xp_run *r = fr->r;
    xp_drain(fr, d);
    const sy__plugin *p = r->dev[d]->plugin;
    uint32_t di = r->dev[d]->index;
    p->desc.synchronize(p->state, di); /* whatever it still has queued */
    const sy_node *culprit = NULL;
    uint32_t candidates = 0;
    sy_node *only = NULL;
    for (int64_t k = lo + 1; k <= hi && !culprit; k++) {
        const sy__plan_step *s = &r->plan->steps[k];
        if (s->kind != SY_PLAN_STEP_SEGMENT || s->dev != d)
            continue;
        for (uint32_t q = 0; q < s->count && !culprit; q++) {
            sy_node *n = sy_graph_node(r->g, r->plan->order[s->first + q]);
            if (sy_op_is_view(n->op))
                continue;
            candidates++;
            only = n;
            if (xp_point_node(r, n, d) != SY_OK)
                break;
            sy_status one = p->desc.execute(p->state, di, &n, 1);
            sy_status sync = p->desc.synchronize(p->state, di);
            if (one != SY_OK || sync != SY_OK)
                culprit = n;
        }
    }
    if (!culprit && candidates == 1)
        culprit = only;
    if (culprit)
        sy__runtime_set_error(r->rt, "device '%s' failed on node '%s' (%s): %s (%s)",
                              r->dev[d]->desc.name, culprit->name,
                              sy_op_name((sy_op)culprit->op), sy_status_name(st),
                              sy_status_str(st));
    sy__runtime_note_failure(r->rt, r->plan->dev_index[d], culprit, st);
    fr->done[d] = fr->last[d];
    fr->failed = true;
}

/* --------------------------------------------------------------- waits */

/* Makes sure step |k| on slot |d| is done: waits for its event, or
 * synchronizes the device when it has none. */
static sy_status xp_need(xp_flowrun *fr, uint32_t d, int64_t k)
{
    if (k <= fr->done[d])
        return SY_OK;
    xp_run *r = fr->r;
    const sy__plugin *p = r->dev[d]->plugin;
    void *ev = fr->events[d] ? fr->f->ev[k] : NULL;
    int64_t upto = ev ? k : fr->last[d];
    sy_status st = ev ? p->desc.event_wait(p->state, r->dev[d]->index, ev)
                      : p->desc.synchronize(p->state, r->dev[d]->index);
    if (st != SY_OK) {
        sy__runtime_set_error(r->rt,
                              "device '%s': work launched before step %lld failed when waited "
                              "for: %s (%s)",
                              r->dev[d]->desc.name, (long long)upto + 1, sy_status_name(st),
                              sy_status_str(st));
        xp_blame(fr, d, fr->done[d], upto, st);
        return st;
    }
    fr->done[d] = upto;
    return SY_OK;
}

/* Before slot |w| (or the host for it) writes [lo, lo + size): waits for
 * every other slot that reads those bytes in place. */
static sy_status xp_before_write(xp_flowrun *fr, uint32_t w, const char *lo, uint64_t size)
{
    struct xp_flow *f = fr->f;
    if (!lo || !size)
        return SY_OK;
    const char *hi = lo + size;
    for (uint32_t m = 0; m < f->n_maps;) {
        const xp_map *e = &f->maps[m];
        if (e->reader == w || e->hi <= lo || hi <= e->lo) {
            m++;
            continue;
        }
        sy_status st = xp_need(fr, e->reader, fr->last[e->reader]);
        if (st != SY_OK)
            return st;
        f->maps[m] = f->maps[--f->n_maps]; /* its reads are done */
    }
    return SY_OK;
}

/* Notes that step |k| queued work on slot |d|, with an event after it. */
static sy_status xp_launched(xp_flowrun *fr, uint32_t d, int64_t k)
{
    xp_run *r = fr->r;
    fr->last[d] = k;
    if (!fr->events[d] || r->D < 2)
        return SY_OK;
    const sy__plugin *p = r->dev[d]->plugin;
    sy_status st = p->desc.event_record(p->state, r->dev[d]->index, &fr->f->ev[k]);
    if (st != SY_OK) {
        fr->f->ev[k] = NULL;
        sy__runtime_set_error(r->rt, "device '%s': recording an event failed: %s",
                              r->dev[d]->desc.name, sy_status_name(st));
        sy__runtime_note_failure(r->rt, r->plan->dev_index[d], NULL, st);
        fr->failed = true;
    }
    return st;
}

/* ------------------------------------------------------------ segments */

static sy_status xp_segment(xp_flowrun *fr, int64_t k)
{
    xp_run *r = fr->r;
    const sy__plan_step *s = &r->plan->steps[k];
    uint32_t d = s->dev;
    const sy__plugin *p = r->dev[d]->plugin;
    sy_node **nodes = r->x->nodes;
    for (uint32_t q = 0; q < s->count; q++) {
        sy_node *n = sy__graph_node_at(r->g, r->plan->order[s->first + q]);
        sy_tensor *root = n->output->view_src ? n->output->view_src : n->output;
        if (!sy__graph_producer_of(r->g, root))
            r->x->writer[root->id] = (uint8_t)d;
        sy_status st = xp_point_node(r, n, d);
        if (st == SY_OK && !sy_op_is_view(n->op))
            st = xp_before_write(fr, d, n->output->data, sy_tensor_nbytes(n->output));
        if (st != SY_OK)
            return st;
        fr->f->producer[(size_t)root->id * r->D + d] = (uint32_t)k;
        nodes[q] = n;
    }
    sy_status st = SY_OK;
    if (r->x->time_nodes) {
        /* One launch per node, synchronised, so each node's wall time is
         * its own (the step takes longer for it). */
        for (uint32_t q = 0; q < s->count && st == SY_OK; q++) {
            struct timespec t0, t1;
            clock_gettime(CLOCK_MONOTONIC, &t0);
            st = p->desc.execute(p->state, r->dev[d]->index, &nodes[q], 1);
            sy_status st_sync = p->desc.synchronize(p->state, r->dev[d]->index);
            clock_gettime(CLOCK_MONOTONIC, &t1);
            if (st == SY_OK)
                st = st_sync;
            uint32_t i = r->plan->order[s->first + q];
            r->x->node_s[i] = sy_op_is_view(nodes[q]->op)
                                  ? 0.0
                                  : (double)(t1.tv_sec - t0.tv_sec) +
                                        (double)(t1.tv_nsec - t0.tv_nsec) * 1e-9;
            r->x->node_dev[i] = r->plan->dev_index[d];
        }
        fr->last[d] = k;
        if (st == SY_OK)
            fr->done[d] = k;
    } else {
        st = p->desc.execute(p->state, r->dev[d]->index, nodes, s->count);
        fr->last[d] = k;
        if (st == SY_OK && fr->events[d])
            return xp_launched(fr, d, k);
        /* Without events (ABI 1.0) the nodes stay valid until synchronize()
         * returns, which the next segment's repointing would break. */
        sy_status st_sync = p->desc.synchronize(p->state, r->dev[d]->index);
        if (st == SY_OK)
            st = st_sync;
        if (st == SY_OK)
            fr->done[d] = k;
    }
    if (st != SY_OK) {
        sy__runtime_set_error(r->rt, "device '%s': executing %u nodes from '%s' failed: %s (%s)",
                              r->dev[d]->desc.name, s->count, nodes[0]->name, sy_status_name(st),
                              sy_status_str(st));
        xp_blame(fr, d, fr->done[d], k, st);
    }
    return st;
}

/* ----------------------------------------------------------- transfers */

/* Copies bytes [off, off + size) of a root from slot |sd| to slot |dd|. */
static sy_status xp_copy(xp_flowrun *fr, int64_t k, const sy_tensor *root, uint32_t sd,
                         uint32_t dd, uint64_t off, uint64_t size)
{
    xp_run *r = fr->r;
    const xp_bind *sb = sy__xp_at(r, root->id, sd), *db = sy__xp_at(r, root->id, dd);
    const sy__plugin *sp = r->dev[sd]->plugin, *dp = r->dev[dd]->plugin;
    uint32_t si = r->dev[sd]->index, di = r->dev[dd]->index;
    sy__xp_moved(r->x, r->plan->dev_index[sd], size);
    if (r->plan->dev_index[dd] != r->plan->dev_index[sd])
        sy__xp_moved(r->x, r->plan->dev_index[dd], size);
    /* The host (or the destination's queue) writes the destination's bytes. */
    sy_status st = xp_before_write(fr, dd, db->host ? db->host + off : NULL, size);
    if (st != SY_OK)
        return st;
    if (sp == dp && sp->desc.copy_device) {
        st = sp->desc.copy_device(sp->state, di, db->buf, db->off + off, si, sb->buf,
                                  sb->off + off, size);
        if (st != SY_OK)
            return sy__xp_fail(r, st, dd, "copy_device", root->name, size);
        fr->f->producer[(size_t)root->id * r->D + dd] = (uint32_t)k;
        return xp_launched(fr, dd, k);
    }
    if (db->host) {
        /* Written by the host, not through the destination's queue, which
         * may still be reading these bytes of its arena. */
        st = xp_need(fr, dd, fr->last[dd]);
        if (st != SY_OK)
            return st;
        st = sp->desc.copy_out(sp->state, si, sb->buf, sb->off + off, db->host + off, size);
        return st == SY_OK ? SY_OK : sy__xp_fail(r, st, sd, "copy_out", root->name, size);
    }
    if (sb->host) {
        st = dp->desc.copy_in(dp->state, di, db->buf, db->off + off, sb->host + off, size);
        return st == SY_OK ? SY_OK : sy__xp_fail(r, st, dd, "copy_in", root->name, size);
    }
    void *stage = malloc((size_t)size);
    if (!stage) {
        sy__runtime_set_error(r->rt, "out of memory staging %llu bytes of '%s'",
                              (unsigned long long)size, root->name);
        return SY_E_NO_MEMORY;
    }
    st = sp->desc.copy_out(sp->state, si, sb->buf, sb->off + off, stage, size);
    if (st != SY_OK)
        st = sy__xp_fail(r, st, sd, "copy_out", root->name, size);
    else if ((st = dp->desc.copy_in(dp->state, di, db->buf, db->off + off, stage, size)) != SY_OK)
        st = sy__xp_fail(r, st, dd, "copy_in", root->name, size);
    free(stage);
    return st;
}

static sy_status xp_transfer(xp_flowrun *fr, int64_t k)
{
    xp_run *r = fr->r;
    const sy__plan_step *s = &r->plan->steps[k];
    sy_tensor *root = sy_graph_tensor(r->g, s->tensor);
    uint64_t off = 0, size = sy_tensor_nbytes(root);
    if (s->value_node != SY__NONE) {
        const sy_tensor *out = sy_graph_node(r->g, s->value_node)->output;
        off = out->view_src ? out->view_offset : 0;
        size = sy_tensor_nbytes(out); /* the graph's, not the plan's: classes share plans */
    }
    uint32_t sd = s->src, dd = s->dev;
    if (size == 0)
        return SY_OK;
    const xp_bind *sb = sy__xp_at(r, root->id, sd);
    xp_bind *db = sy__xp_at(r, root->id, dd);
    if (!sb->buf) {
        sy__runtime_set_error(r->rt,
                              "execute_plan: transfer of '%s' from '%s' before it exists "
                              "there",
                              root->name, r->dev[sd]->desc.name);
        return SY_E_INTERNAL;
    }
    /* The value must be complete on its source before anyone reads it. */
    uint32_t made = fr->f->producer[(size_t)root->id * r->D + sd];
    if (made != SY__NONE) {
        sy_status st = xp_need(fr, sd, made);
        if (st != SY_OK)
            return st;
    }
    if (db->buf)
        return xp_copy(fr, k, root, sd, dd, off, size);
    bool leaf = s->value_node == SY__NONE && !sy_graph_producer(r->g, root);
    if (leaf) {
        sy_status st = sy__xp_keep_weight(r, root, dd);
        if (st != SY_E_UNSUPPORTED)
            return st;
    }
    /* No bytes of its own here: the memory plan lets it map the source's
     * (an arena keeps them alive long enough), else a buffer for the run. */
    if (sy__xp_wrap(r, root, dd, sb->host, sb->flags & XP_FROM_HOST)) {
        if (!(sb->flags & XP_FROM_HOST)) {
            struct xp_flow *f = fr->f;
            if (!sy__xp_grow((void **)&f->maps, &f->cap_maps, (size_t)f->n_maps + 1,
                           sizeof *f->maps)) {
                sy__runtime_set_error(r->rt, "out of memory tracking mapped tensors");
                return SY_E_NO_MEMORY;
            }
            f->maps[f->n_maps++] = (xp_map){.lo = sb->host,
                                            .hi = sb->host + sy_tensor_nbytes(root),
                                            .reader = (uint8_t)dd};
        }
        return SY_OK;
    }
    sy_status st = sy__xp_private(r, root, dd);
    return st == SY_OK ? xp_copy(fr, k, root, sd, dd, off, size) : st;
}

/* Counts plan step |s| that ran: a segment, and a device switch when the
 * segment before it in this run (*last_dev) was on another device; or a
 * transfer with its bytes as this graph holds them and as the plan lists
 * them. */
static void xp_count(xp_run *r, const sy__plan_step *s, uint32_t *last_dev)
{
    sy_step_stats *c = &r->x->stats;
    if (s->kind == SY_PLAN_STEP_SEGMENT) {
        c->segments++;
        if (*last_dev != SY__NO_DEVICE && *last_dev != s->dev)
            c->switches++;
        *last_dev = s->dev;
        return;
    }
    const sy_tensor *t = s->value_node != SY__NONE ? sy_graph_node(r->g, s->value_node)->output
                                                    : sy_graph_tensor(r->g, s->tensor);
    c->transfers++;
    c->transfer_bytes += sy_tensor_nbytes(t);
    c->planned_bytes += s->bytes;
}

/* Synchronizes every slot that ran work (errors named and narrowed like a
 * wait's), then releases the events. */
static sy_status xp_finish(xp_flowrun *fr, sy_status st)
{
    xp_run *r = fr->r;
    if (st != SY_OK)
        xp_drain(fr, SY__NO_DEVICE);
    for (uint32_t d = 0; st == SY_OK && d < r->D; d++) {
        if (fr->last[d] < 0)
            continue;
        const sy__plugin *p = r->dev[d]->plugin;
        sy_status sync = p->desc.synchronize(p->state, r->dev[d]->index);
        if (sync != SY_OK) {
            sy__runtime_set_error(r->rt,
                                  "device '%s': synchronize at the end of the step failed: %s "
                                  "(%s)",
                                  r->dev[d]->desc.name, sy_status_name(sync),
                                  sy_status_str(sync));
            xp_blame(fr, d, fr->done[d], fr->last[d], sync);
            xp_drain(fr, SY__NO_DEVICE);
            st = sync;
        }
        fr->done[d] = fr->last[d];
    }
    for (uint32_t k = 0; k < r->plan->n_steps; k++) {
        void *ev = fr->f->ev[k];
        if (!ev)
            continue;
        const sy__device *dev = r->dev[r->plan->steps[k].dev];
        dev->plugin->desc.event_release(dev->plugin->state, dev->index, ev);
        fr->f->ev[k] = NULL;
    }
    return st;
}

sy_status sy__xp_run_steps(xp_run *r)
{
    sy_executor *x = r->x;
    if (!x->flow && !(x->flow = calloc(1, sizeof *x->flow))) {
        sy__runtime_set_error(r->rt, "out of memory preparing the step runner");
        return SY_E_NO_MEMORY;
    }
    struct xp_flow *f = x->flow;
    size_t np = ((size_t)r->n_tensors + 1) * r->D, ns = (size_t)r->plan->n_steps + 1;
    if (!sy__xp_grow((void **)&f->producer, &f->cap_producer, np, sizeof *f->producer) ||
        !sy__xp_grow((void **)&f->ev, &f->cap_ev, ns, sizeof *f->ev)) {
        sy__runtime_set_error(r->rt, "out of memory preparing %u steps", r->plan->n_steps);
        return SY_E_NO_MEMORY;
    }
    memset(f->producer, 0xff, np * sizeof *f->producer);
    memset(f->ev, 0, ns * sizeof *f->ev);
    f->n_maps = 0;
    xp_flowrun fr = {.r = r, .f = f};
    for (uint32_t d = 0; d < r->D; d++) {
        fr.last[d] = fr.done[d] = -1;
        fr.events[d] = sy__device_has_events(r->dev[d]);
    }
    sy_status st = SY_OK;
    uint32_t last_dev = SY__NO_DEVICE;
    for (uint32_t k = 0; st == SY_OK && k < r->plan->n_steps; k++) {
        const sy__plan_step *s = &r->plan->steps[k];
        st = s->kind == SY_PLAN_STEP_SEGMENT ? xp_segment(&fr, k) : xp_transfer(&fr, k);
        if (st == SY_OK)
            xp_count(r, s, &last_dev);
    }
    return xp_finish(&fr, st);
}
