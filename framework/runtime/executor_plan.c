/* Multi-device executor: runs a frozen graph by a scheduler plan.
 *
 * Storage: one buffer per (root tensor, device) that needs it.  Leaves go
 * to their home device (imported zero-copy where the device shares host
 * memory, else copied in; zeros without host data); activations are
 * allocated on the device that makes them; a transfer step gives the
 * destination its own buffer of the root and fills the span the value
 * covers: mapped without a copy where the source's memory is host memory
 * the destination can import, else by the plugin's copy_device within a
 * plugin, else through copy_out/copy_in (straight into or out of mapped
 * memory where one side is mapped, through a staging buffer otherwise).
 * Segments run in plan order, each followed by synchronize().  Marked
 * outputs, and leaves written through views, are copied back from the
 * device that wrote them.
 *
 * The binding, import and copy-back rules are those of executor_single.c,
 * written again here over (tensor, device) pairs rather than shared: its
 * helpers are static and one-device-shaped, and reshaping them would
 * change the runtime engineer's file. */
#include <stdlib.h>
#include <string.h>

#include "plan_internal.h"
#include "runtime_internal.h"

typedef struct xp_run {
    sy_runtime *rt;
    sy_graph *g;
    const sy_plan *plan;
    uint32_t n_tensors, D;
    const sy__device *dev[SY__MAX_PLAN_DEVICES];
    void **buf;         /* n_tensors * D: buffer of a root tensor on a device slot */
    uint8_t *from_host; /* n_tensors * D: the buffer wraps the tensor's own host data */
    uint8_t *writer;    /* per root leaf: slot that last wrote it through a view */
    sy_node **nodes;    /* scratch list for execute() */
} xp_run;

static void **xp_buf(xp_run *r, uint32_t t, uint32_t d)
{
    return &r->buf[(size_t)t * r->D + d];
}

static void *xp_host_ptr(const xp_run *r, uint32_t d, void *buffer)
{
    const sy__plugin *p = r->dev[d]->plugin;
    if (!buffer || !p->desc.buffer_host_ptr)
        return NULL;
    return p->desc.buffer_host_ptr(p->state, r->dev[d]->index, buffer);
}

static sy_status xp_fail(xp_run *r, sy_status st, uint32_t d, const char *what, const char *name,
                         uint64_t bytes)
{
    sy__runtime_set_error(r->rt, "device '%s': %s of %llu bytes for tensor '%s' failed: %s",
                          r->dev[d]->desc.name, what, (unsigned long long)bytes, name,
                          sy_status_name(st));
    return st;
}

/* Checks the plan against the graph before anything is allocated. */
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
        if (plan->dev_index[d] >= r->rt->device_count) {
            sy__runtime_set_error(r->rt,
                                  "execute_plan: the plan names device %u, the runtime "
                                  "has %u",
                                  plan->dev_index[d], r->rt->device_count);
            return SY_E_NOT_FOUND;
        }
        r->dev[d] = &r->rt->devices[plan->dev_index[d]];
    }
    for (uint32_t i = 0; i < plan->n_nodes; i++) {
        const sy_node *n = sy_graph_node(r->g, i);
        const sy__plan_node *pn = &plan->nodes[i];
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
            return SY_E_UNSUPPORTED;
        }
    }
    for (uint32_t i = 0; i < r->n_tensors; i++) {
        const sy_tensor *t = sy_graph_tensor(r->g, i);
        if (t->view_src && t->view_src->view_src) {
            sy__runtime_set_error(r->rt,
                                  "tensor '%s' is a view of '%s', which is itself a view; "
                                  "view_src must be the root storage tensor",
                                  t->name, t->view_src->name);
            return SY_E_GRAPH;
        }
        if (sy_graph_is_output(r->g, t) && sy_graph_host_data(r->g, t) &&
            !sy_tensor_is_contiguous(t)) {
            sy__runtime_set_error(r->rt,
                                  "output '%s' is not contiguous; only contiguous outputs are "
                                  "copied to host data (add a copy node)",
                                  t->name);
            return SY_E_UNSUPPORTED;
        }
    }
    return SY_OK;
}

static sy_status xp_alloc(xp_run *r, const sy_tensor *root, uint32_t d)
{
    void **b = xp_buf(r, root->id, d);
    if (*b)
        return SY_OK;
    const sy__plugin *p = r->dev[d]->plugin;
    uint64_t size = sy_tensor_nbytes(root);
    sy_status st = p->desc.buffer_alloc(p->state, r->dev[d]->index, size ? size : 1, b);
    if (st != SY_OK) {
        *b = NULL;
        return xp_fail(r, st, d, "buffer_alloc", root->name, size);
    }
    return SY_OK;
}

/* Puts a leaf on its home device: imported, copied in, or zeroed. */
static sy_status xp_place_leaf(xp_run *r, sy_tensor *t, uint32_t d)
{
    const sy__plugin *p = r->dev[d]->plugin;
    uint32_t di = r->dev[d]->index;
    uint64_t size = sy_tensor_nbytes(t);
    void *host = sy_graph_host_data(r->g, t);
    void **b = xp_buf(r, t->id, d);
    if (size == 0)
        return SY_OK;
    if (host && r->dev[d]->desc.unified_memory && p->desc.buffer_import_host) {
        if (p->desc.buffer_import_host(p->state, di, host, size, b) == SY_OK) {
            r->from_host[(size_t)t->id * r->D + d] = 1;
            return SY_OK;
        }
        *b = NULL; /* refused (alignment, pinning): copying is always correct */
    }
    sy_status st = xp_alloc(r, t, d);
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
    st = p->desc.copy_in(p->state, di, *b, 0, host ? host : zeros, size);
    free(zeros);
    return st == SY_OK ? SY_OK : xp_fail(r, st, d, "copy_in", t->name, size);
}

/* Points |t| at its storage on slot |d|. */
static sy_status xp_bind(xp_run *r, sy_tensor *t, uint32_t d, const sy_node *user)
{
    const sy_tensor *root = t->view_src ? t->view_src : t;
    void *b = *xp_buf(r, root->id, d);
    if (!b && sy_tensor_nbytes(root) > 0) {
        sy__runtime_set_error(r->rt,
                              "execute_plan: node '%s' on '%s' reads '%s', which the plan never "
                              "brings there",
                              user->name, r->dev[d]->desc.name, root->name);
        return SY_E_INTERNAL;
    }
    uint64_t off = t->view_src ? t->view_offset : 0;
    char *base = xp_host_ptr(r, d, b);
    t->buffer = b;
    t->offset = off;
    t->data = base ? base + off : NULL;
    return SY_OK;
}

static sy_status xp_segment(xp_run *r, const sy__plan_step *s)
{
    uint32_t d = s->dev;
    const sy__plugin *p = r->dev[d]->plugin;
    for (uint32_t q = 0; q < s->count; q++) {
        sy_node *n = sy_graph_node(r->g, r->plan->order[s->first + q]);
        sy_tensor *root = n->output->view_src ? n->output->view_src : n->output;
        if (sy_graph_producer(r->g, root)) {
            sy_status st = xp_alloc(r, root, d);
            if (st != SY_OK)
                return st;
        } else {
            r->writer[root->id] = (uint8_t)d;
        }
        for (uint32_t j = 0; j < n->n_inputs; j++) {
            sy_status st = xp_bind(r, n->inputs[j], d, n);
            if (st != SY_OK)
                return st;
        }
        sy_status st = xp_bind(r, n->output, d, n);
        if (st != SY_OK)
            return st;
        r->nodes[q] = n;
    }
    sy_status st = p->desc.execute(p->state, r->dev[d]->index, r->nodes, s->count);
    sy_status st_sync = p->desc.synchronize(p->state, r->dev[d]->index);
    if (st == SY_OK)
        st = st_sync;
    if (st != SY_OK)
        sy__runtime_set_error(r->rt, "device '%s': executing %u nodes from '%s' failed: %s (%s)",
                              r->dev[d]->desc.name, s->count, r->nodes[0]->name, sy_status_name(st),
                              sy_status_str(st));
    return st;
}

static sy_status xp_transfer(xp_run *r, const sy__plan_step *s)
{
    sy_tensor *root = sy_graph_tensor(r->g, s->tensor);
    uint64_t off = 0, size = sy_tensor_nbytes(root);
    if (s->value_node != SY__NONE) {
        const sy_tensor *out = sy_graph_node(r->g, s->value_node)->output;
        off = out->view_src ? out->view_offset : 0;
        size = sy_tensor_nbytes(out); /* the graph's, not the plan's: classes share plans */
    }
    uint32_t sd = s->src, dd = s->dev;
    void *sb = *xp_buf(r, root->id, sd);
    void **db = xp_buf(r, root->id, dd);
    if (size == 0)
        return SY_OK;
    if (!sb) {
        sy__runtime_set_error(r->rt,
                              "execute_plan: transfer of '%s' from '%s' before it exists "
                              "there",
                              root->name, r->dev[sd]->desc.name);
        return SY_E_INTERNAL;
    }
    const sy__plugin *sp = r->dev[sd]->plugin, *dp = r->dev[dd]->plugin;
    uint32_t si = r->dev[sd]->index, di = r->dev[dd]->index;
    char *src_host = xp_host_ptr(r, sd, sb);
    if (!*db && src_host && r->dev[dd]->desc.unified_memory && dp->desc.buffer_import_host &&
        dp->desc.buffer_import_host(dp->state, di, src_host, sy_tensor_nbytes(root), db) == SY_OK) {
        r->from_host[(size_t)root->id * r->D + dd] = r->from_host[(size_t)root->id * r->D + sd];
        return SY_OK;
    }
    sy_status st = xp_alloc(r, root, dd);
    if (st != SY_OK)
        return st;
    if (sp == dp && sp->desc.copy_device) {
        st = sp->desc.copy_device(sp->state, di, *db, off, si, sb, off, size);
        return st == SY_OK ? SY_OK : xp_fail(r, st, dd, "copy_device", root->name, size);
    }
    char *dst_host = xp_host_ptr(r, dd, *db);
    if (dst_host) {
        st = sp->desc.copy_out(sp->state, si, sb, off, dst_host + off, size);
        return st == SY_OK ? SY_OK : xp_fail(r, st, sd, "copy_out", root->name, size);
    }
    if (src_host) {
        st = dp->desc.copy_in(dp->state, di, *db, off, src_host + off, size);
        return st == SY_OK ? SY_OK : xp_fail(r, st, dd, "copy_in", root->name, size);
    }
    void *stage = malloc((size_t)size);
    if (!stage) {
        sy__runtime_set_error(r->rt, "out of memory staging %llu bytes of '%s'",
                              (unsigned long long)size, root->name);
        return SY_E_NO_MEMORY;
    }
    st = sp->desc.copy_out(sp->state, si, sb, off, stage, size);
    if (st != SY_OK)
        st = xp_fail(r, st, sd, "copy_out", root->name, size);
    else if ((st = dp->desc.copy_in(dp->state, di, *db, off, stage, size)) != SY_OK)
        st = xp_fail(r, st, dd, "copy_in", root->name, size);
    free(stage);
    return st;
}

/* Copies marked outputs and leaves written through views back to their
 * host data, from the device that holds the final contents. */
static sy_status xp_copy_back(xp_run *r)
{
    for (uint32_t i = 0; i < r->n_tensors; i++) {
        sy_tensor *t = sy_graph_tensor(r->g, i);
        void *host = sy_graph_host_data(r->g, t);
        const sy_tensor *root = t->view_src ? t->view_src : t;
        const sy_node *prod = sy_graph_producer(r->g, t);
        uint32_t d;
        if (sy_graph_is_output(r->g, t) && prod)
            d = r->plan->nodes[prod->id].dev;
        else if (!t->view_src && r->writer[i] != SY__NO_DEVICE)
            d = r->writer[i];
        else
            continue;
        void *b = *xp_buf(r, root->id, d);
        if (!host || !b)
            continue;
        uint64_t off = t->view_src ? t->view_offset : 0;
        char *base = xp_host_ptr(r, d, b);
        bool in_place = (base && base + off == (char *)host) ||
                        (!t->view_src && r->from_host[(size_t)i * r->D + d]);
        if (in_place)
            continue;
        const sy__plugin *p = r->dev[d]->plugin;
        uint64_t size = sy_tensor_nbytes(t);
        sy_status st = p->desc.copy_out(p->state, r->dev[d]->index, b, off, host, size);
        if (st != SY_OK)
            return xp_fail(r, st, d, "copy_out", t->name, size);
    }
    return SY_OK;
}

static void xp_release(xp_run *r)
{
    for (uint32_t i = r->n_tensors; i-- > 0;) {
        for (uint32_t d = 0; d < r->D; d++) {
            void *b = *xp_buf(r, i, d);
            if (b)
                r->dev[d]->plugin->desc.buffer_free(r->dev[d]->plugin->state, r->dev[d]->index, b);
        }
        sy_tensor *t = sy_graph_tensor(r->g, i);
        t->data = sy_graph_host_data(r->g, t);
        t->buffer = NULL;
        t->offset = 0;
    }
}

sy_status sy_runtime_execute_plan(sy_runtime *rt, sy_graph *g, const sy_plan *plan)
{
    if (!rt)
        return SY_E_INVALID_ARG;
    if (!g || !plan) {
        sy__runtime_set_error(rt, "execute_plan: no %s given", g ? "plan" : "graph");
        return SY_E_INVALID_ARG;
    }
    if (!sy_graph_is_frozen(g)) {
        sy__runtime_set_error(rt, "execute_plan: the graph is not frozen; call sy_graph_freeze()");
        return SY_E_STATE;
    }
    xp_run r = {
        .rt = rt, .g = g, .plan = plan, .n_tensors = sy_graph_tensor_count(g), .D = plan->n_dev};
    sy_status st = xp_check(&r);
    if (st != SY_OK)
        return st;
    size_t nt = (size_t)r.n_tensors + 1;
    r.buf = calloc(nt * r.D, sizeof *r.buf);
    r.from_host = calloc(nt * r.D, 1);
    r.writer = malloc(nt);
    r.nodes = malloc(((size_t)plan->n_nodes + 1) * sizeof *r.nodes);
    if (!r.buf || !r.from_host || !r.writer || !r.nodes) {
        sy__runtime_set_error(rt, "out of memory preparing %u tensors", r.n_tensors);
        st = SY_E_NO_MEMORY;
        goto out_free;
    }
    memset(r.writer, SY__NO_DEVICE, nt);
    for (uint32_t i = 0; st == SY_OK && i < r.n_tensors; i++) {
        sy_tensor *t = sy_graph_tensor(g, i);
        if (!t->view_src && !sy_graph_producer(g, t) && plan->leaf_home[i] != SY__NO_DEVICE)
            st = xp_place_leaf(&r, t, plan->leaf_home[i]);
    }
    for (uint32_t k = 0; st == SY_OK && k < plan->n_steps; k++) {
        const sy__plan_step *s = &plan->steps[k];
        st = s->kind == SY_PLAN_STEP_SEGMENT ? xp_segment(&r, s) : xp_transfer(&r, s);
    }
    if (st == SY_OK)
        st = xp_copy_back(&r);
    xp_release(&r);
out_free:
    free(r.buf);
    free(r.from_host);
    free(r.writer);
    free(r.nodes);
    return st;
}
