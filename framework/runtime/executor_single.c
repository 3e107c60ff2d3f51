/* Single-device executor: runs a whole frozen graph on one device.
 *
 * Storage: one device buffer per root (non-view) tensor.  Leaves with host
 * data are imported zero-copy where the device shares host memory and can
 * wrap it, and otherwise copied in; leaves without host data start as
 * zeros, as in sy_graph_run_reference(); everything else is allocated.
 * Views alias their root.  After the run, marked outputs and leaves that a
 * node wrote through a view (a KV cache under KV_WRITE) are copied back to
 * their host data, every buffer is freed and the tensors point at their
 * host data again.  The memory planner will replace one-buffer-per-tensor;
 * the scheduler will replace one-device-per-graph. */
#include <stdlib.h>
#include <string.h>

#include "runtime_internal.h"

typedef struct exec_slot {
    void *buffer;  /* buffer this run owns for the root tensor, or NULL */
    bool imported; /* |buffer| wraps the tensor's own host data */
    bool written;  /* a leaf that some node writes through a view */
} exec_slot;

typedef struct exec_run {
    sy_runtime *rt;
    sy_graph *g;
    const sy__device *dev;
    const sy__plugin *p;
    exec_slot *slots; /* one per tensor of |g|, by tensor id */
    uint32_t n_tensors;
} exec_run;

/* Checks, before anything is allocated, that the device can run every
 * node and that the graph's tensors have the shape this executor needs. */
static sy_status exec_check(exec_run *run)
{
    const char *dname = run->dev->desc.name;
    uint32_t n_nodes = sy_graph_node_count(run->g);
    for (uint32_t i = 0; i < n_nodes; i++) {
        const sy_node *node = sy_graph_node(run->g, i);
        sy_support why;
        if (!sy__device_supports(run->dev, node, &why)) {
            sy__runtime_set_error(run->rt, "device '%s' cannot run node '%s' (%s): %s: %s", dname,
                                  node->name, sy_op_name((sy_op)node->op),
                                  sy__support_reason_name(why.reason), why.text);
            return SY_E_UNSUPPORTED;
        }
    }
    for (uint32_t i = 0; i < run->n_tensors; i++) {
        const sy_tensor *t = sy_graph_tensor(run->g, i);
        if (t->view_src && t->view_src->view_src) {
            sy__runtime_set_error(run->rt,
                                  "tensor '%s' is a view of '%s', which is itself a view; "
                                  "view_src must be the root storage tensor",
                                  t->name, t->view_src->name);
            return SY_E_GRAPH;
        }
        /* Same rule as the reference runner, so both agree on what lands
         * in the caller's memory. */
        if (sy_graph_is_output(run->g, t) && sy_graph_host_data(run->g, t) &&
            !sy_tensor_is_contiguous(t)) {
            sy__runtime_set_error(run->rt,
                                  "output '%s' is not contiguous; only contiguous outputs are "
                                  "copied to host data (add a copy node)",
                                  t->name);
            return SY_E_UNSUPPORTED;
        }
    }
    return SY_OK;
}

/* Marks the leaves that a node writes into through a view of them. */
static void exec_find_written_leaves(exec_run *run)
{
    uint32_t n_nodes = sy_graph_node_count(run->g);
    for (uint32_t i = 0; i < n_nodes; i++) {
        const sy_node *node = sy_graph_node(run->g, i);
        if (sy_op_is_view(node->op) || !node->output)
            continue;
        const sy_tensor *root = node->output->view_src ? node->output->view_src : node->output;
        if (!sy_graph_producer(run->g, root))
            run->slots[root->id].written = true;
    }
}

/* Sets the residency fields of |t| from |buffer| at byte |offset|. */
static void exec_bind(const exec_run *run, sy_tensor *t, void *buffer, uint64_t offset)
{
    const sy__plugin *p = run->p;
    t->buffer = buffer;
    t->offset = offset;
    t->data = NULL;
    if (buffer && p->desc.buffer_host_ptr) {
        char *base = p->desc.buffer_host_ptr(p->state, run->dev->index, buffer);
        if (base)
            t->data = base + offset;
    }
}

/* Gives root tensor |t| device storage and its initial contents. */
static sy_status exec_place_root(exec_run *run, sy_tensor *t)
{
    const sy__plugin *p = run->p;
    uint32_t di = run->dev->index;
    exec_slot *slot = &run->slots[t->id];
    uint64_t size = sy_tensor_nbytes(t);
    if (size == 0)
        return SY_OK;
    bool leaf = !sy_graph_producer(run->g, t);
    void *host = sy_graph_host_data(run->g, t);
    sy_status st;
    if (leaf && host && run->dev->desc.unified_memory && p->desc.buffer_import_host) {
        st = p->desc.buffer_import_host(p->state, di, host, size, &slot->buffer);
        if (st == SY_OK) {
            slot->imported = true;
            exec_bind(run, t, slot->buffer, 0);
            return SY_OK;
        }
        /* A device may refuse memory it cannot map (alignment, pinning
         * limits); copying is always correct, only slower. */
        slot->buffer = NULL;
        sy_runtime_log(run->rt, SY_LOG_DEBUG,
                       "device '%s' did not import tensor '%s' (%s); copying it in",
                       run->dev->desc.name, t->name, sy_status_name(st));
    }
    st = p->desc.buffer_alloc(p->state, di, size, &slot->buffer);
    if (st != SY_OK) {
        slot->buffer = NULL;
        sy__runtime_set_error(run->rt,
                              "device '%s': buffer_alloc of %llu bytes for tensor '%s' failed: "
                              "%s",
                              run->dev->desc.name, (unsigned long long)size, t->name,
                              sy_status_name(st));
        return st;
    }
    exec_bind(run, t, slot->buffer, 0);
    if (!leaf)
        return SY_OK;
    void *zeros = NULL;
    if (!host) {
        zeros = calloc(1, (size_t)size);
        if (!zeros) {
            sy__runtime_set_error(run->rt, "out of memory zeroing tensor '%s' (%llu bytes)",
                                  t->name, (unsigned long long)size);
            return SY_E_NO_MEMORY;
        }
    }
    st = p->desc.copy_in(p->state, di, slot->buffer, 0, host ? host : zeros, size);
    free(zeros);
    if (st != SY_OK) {
        sy__runtime_set_error(run->rt,
                              "device '%s': copy_in of %llu bytes for tensor '%s' failed: %s",
                              run->dev->desc.name, (unsigned long long)size, t->name,
                              sy_status_name(st));
        return st;
    }
    return SY_OK;
}

static sy_status exec_place_all(exec_run *run)
{
    for (uint32_t i = 0; i < run->n_tensors; i++) {
        sy_tensor *t = sy_graph_tensor(run->g, i);
        if (t->view_src)
            continue;
        sy_status st = exec_place_root(run, t);
        if (st != SY_OK)
            return st;
    }
    /* Views after all roots: a view may precede its root in tensor order. */
    for (uint32_t i = 0; i < run->n_tensors; i++) {
        sy_tensor *t = sy_graph_tensor(run->g, i);
        const sy_tensor *root = t->view_src;
        if (!root)
            continue;
        t->buffer = root->buffer;
        t->offset = root->offset + t->view_offset;
        t->data = root->data ? (char *)root->data + t->view_offset : NULL;
    }
    return SY_OK;
}

static sy_status exec_launch(exec_run *run)
{
    const sy__plugin *p = run->p;
    uint32_t di = run->dev->index;
    uint32_t n = sy_graph_node_count(run->g);
    if (n == 0)
        return SY_OK;
    sy_node **nodes = malloc(n * sizeof *nodes);
    if (!nodes) {
        sy__runtime_set_error(run->rt, "out of memory listing %u nodes", n);
        return SY_E_NO_MEMORY;
    }
    /* View nodes go along: plugins treat them as no-ops (plugin guide), and
     * a list with gaps would hide the graph's order from the plugin. */
    for (uint32_t i = 0; i < n; i++)
        nodes[i] = sy_graph_node(run->g, i);
    sy_status st = p->desc.execute(p->state, di, nodes, n);
    free(nodes);
    if (st != SY_OK) {
        /* Work already queued may still touch the buffers about to be
         * freed: drain it first, whatever it reports. */
        p->desc.synchronize(p->state, di);
        sy__runtime_set_error(run->rt, "device '%s': execute failed: %s (%s)",
                              run->dev->desc.name, sy_status_name(st), sy_status_str(st));
        return st;
    }
    st = p->desc.synchronize(p->state, di);
    if (st != SY_OK) {
        sy__runtime_set_error(run->rt, "device '%s': synchronize failed: %s (%s)",
                              run->dev->desc.name, sy_status_name(st), sy_status_str(st));
        return st;
    }
    return SY_OK;
}

/* Copies marked outputs, and leaves written through views, back to their
 * host data. */
static sy_status exec_copy_back(exec_run *run)
{
    const sy__plugin *p = run->p;
    for (uint32_t i = 0; i < run->n_tensors; i++) {
        sy_tensor *t = sy_graph_tensor(run->g, i);
        void *host = sy_graph_host_data(run->g, t);
        if (!host || !t->buffer)
            continue;
        bool wanted = sy_graph_is_output(run->g, t) || (!t->view_src && run->slots[i].written);
        /* Zero-copy storage already is the host data (even when the
         * device does not map it for us, so that t->data is NULL). */
        bool in_place = t->data == host || (!t->view_src && run->slots[i].imported);
        if (!wanted || in_place)
            continue;
        uint64_t size = sy_tensor_nbytes(t);
        sy_status st = p->desc.copy_out(p->state, run->dev->index, t->buffer, t->offset, host, size);
        if (st != SY_OK) {
            sy__runtime_set_error(run->rt,
                                  "device '%s': copy_out of %llu bytes for tensor '%s' failed: "
                                  "%s",
                                  run->dev->desc.name, (unsigned long long)size, t->name,
                                  sy_status_name(st));
            return st;
        }
    }
    return SY_OK;
}

/* Frees every buffer of the run and points each tensor at its host data
 * again, as it was before the run. */
static void exec_release(exec_run *run)
{
    const sy__plugin *p = run->p;
    for (uint32_t i = run->n_tensors; i-- > 0;) {
        if (run->slots[i].buffer)
            p->desc.buffer_free(p->state, run->dev->index, run->slots[i].buffer);
        sy_tensor *t = sy_graph_tensor(run->g, i);
        t->data = sy_graph_host_data(run->g, t);
        t->buffer = NULL;
        t->offset = 0;
    }
}

sy_status sy_runtime_execute_on(sy_runtime *rt, sy_graph *g, uint32_t dev)
{
    if (!rt)
        return SY_E_INVALID_ARG;
    if (!g) {
        sy__runtime_set_error(rt, "execute_on: no graph given");
        return SY_E_INVALID_ARG;
    }
    if (!sy_graph_is_frozen(g)) {
        sy__runtime_set_error(rt, "execute_on: the graph is not frozen; call sy_graph_freeze()");
        return SY_E_STATE;
    }
    if (dev >= rt->device_count) {
        sy__runtime_set_error(rt, "execute_on: no device %u (the runtime has %u)", dev,
                              rt->device_count);
        return SY_E_NOT_FOUND;
    }
    exec_run run = {
        .rt = rt,
        .g = g,
        .dev = &rt->devices[dev],
        .p = rt->devices[dev].plugin,
        .n_tensors = sy_graph_tensor_count(g),
    };
    sy_status st = exec_check(&run);
    if (st != SY_OK)
        return st;
    run.slots = calloc(run.n_tensors ? run.n_tensors : 1, sizeof *run.slots);
    if (!run.slots) {
        sy__runtime_set_error(rt, "out of memory preparing %u tensors", run.n_tensors);
        return SY_E_NO_MEMORY;
    }
    exec_find_written_leaves(&run);
    st = exec_place_all(&run);
    if (st != SY_OK)
        goto out_release;
    st = exec_launch(&run);
    if (st != SY_OK)
        goto out_release;
    st = exec_copy_back(&run);

out_release:
    exec_release(&run);
    free(run.slots);
    return st;
}
