/* Graph IR: a builder that checks every node against the op catalogue as it
 * is added, and a freeze step that validates the whole graph and orders it
 * topologically. */
#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "graph_internal.h"
#include "switchyard/switchyard.h"

static sy_status graph_fail(sy_graph *g, sy_status st, const char *fmt, ...)
    __attribute__((format(printf, 3, 4)));

static sy_status graph_fail(sy_graph *g, sy_status st, const char *fmt, ...)
{
    va_list ap;
    va_start(ap, fmt);
    vsnprintf(g->err, sizeof g->err, fmt, ap);
    va_end(ap);
    return st;
}

/* Copies |src| truncated to SY_NAME_MAX - 1 bytes (a session names some
 * 1000 tensors a decode step: snprintf was 1% of SmolLM2's step). */
static void copy_name(char *dst, const char *src)
{
    size_t n = src ? strnlen(src, SY_NAME_MAX - 1) : 0;
    memcpy(dst, src ? src : "", n);
    dst[n] = '\0';
}

sy_status sy_graph_create(sy_graph **out_graph)
{
    if (!out_graph)
        return SY_E_INVALID_ARG;
    *out_graph = NULL;
    sy_graph *g = calloc(1, sizeof *g);
    if (!g)
        return SY_E_NO_MEMORY;
    static uint64_t serials;
    g->serial = __atomic_add_fetch(&serials, 1, __ATOMIC_RELAXED);
    *out_graph = g;
    return SY_OK;
}

void sy_graph_destroy(sy_graph *g)
{
    if (!g)
        return;
    for (uint32_t i = 0; i < g->n_tensors; i++)
        free(g->tensors[i]);
    for (uint32_t i = 0; i < g->n_nodes; i++)
        free(g->nodes[i]);
    free(g->tensors);
    free(g->host_data);
    free(g->producer);
    free(g->is_output);
    free(g->nodes);
    sy__graph_update_free(g);
    free(g);
}

const char *sy_graph_last_error(const sy_graph *g)
{
    return g ? g->err : "";
}

static bool graph_owns(const sy_graph *g, const sy_tensor *t)
{
    return t && t->id < g->n_tensors && g->tensors[t->id] == t;
}

static sy_status grow_tensors(sy_graph *g)
{
    if (g->n_tensors < g->cap_tensors)
        return SY_OK;
    uint32_t cap = g->cap_tensors ? g->cap_tensors * 2 : 64;
    sy_tensor **t = realloc(g->tensors, cap * sizeof *t);
    if (!t)
        return SY_E_NO_MEMORY;
    g->tensors = t;
    void **h = realloc(g->host_data, cap * sizeof *h);
    if (!h)
        return SY_E_NO_MEMORY;
    g->host_data = h;
    sy_node **p = realloc(g->producer, cap * sizeof *p);
    if (!p)
        return SY_E_NO_MEMORY;
    g->producer = p;
    bool *o = realloc(g->is_output, cap * sizeof *o);
    if (!o)
        return SY_E_NO_MEMORY;
    g->is_output = o;
    g->cap_tensors = cap;
    return SY_OK;
}

static sy_status grow_nodes(sy_graph *g)
{
    if (g->n_nodes < g->cap_nodes)
        return SY_OK;
    uint32_t cap = g->cap_nodes ? g->cap_nodes * 2 : 64;
    sy_node **n = realloc(g->nodes, cap * sizeof *n);
    if (!n)
        return SY_E_NO_MEMORY;
    g->nodes = n;
    g->cap_nodes = cap;
    return SY_OK;
}

/* Appends |t| (heap-allocated, owned from now on) to the tensor table. */
static sy_status push_tensor(sy_graph *g, sy_tensor *t, void *host)
{
    sy_status st = grow_tensors(g);
    if (st != SY_OK)
        return graph_fail(g, st, "out of memory adding tensor '%s'", t->name);
    t->id = g->n_tensors;
    g->tensors[t->id] = t;
    g->host_data[t->id] = host;
    g->producer[t->id] = NULL;
    g->is_output[t->id] = false;
    g->n_tensors++;
    return SY_OK;
}

sy_status sy_graph_add_tensor(sy_graph *g, const char *name, sy_dtype dtype, uint32_t n_dims,
                              const int64_t *ne, sy_tensor_role role, void *data,
                              sy_tensor **out_tensor)
{
    if (out_tensor)
        *out_tensor = NULL;
    if (!g || !ne || !out_tensor)
        return SY_E_INVALID_ARG;
    const char *nm = name ? name : "";
    if (g->frozen)
        return graph_fail(g, SY_E_STATE, "tensor '%s': graph is frozen", nm);
    if (!sy_dtype_is_valid(dtype))
        return graph_fail(g, SY_E_DTYPE, "tensor '%s': invalid dtype %d", nm, (int)dtype);
    if (n_dims < 1 || n_dims > SY_MAX_DIMS)
        return graph_fail(g, SY_E_SHAPE, "tensor '%s': %u dims, must be 1..%d", nm, n_dims,
                          SY_MAX_DIMS);
    if (role > SY_ROLE_OUTPUT)
        return graph_fail(g, SY_E_INVALID_ARG, "tensor '%s': invalid role %d", nm, (int)role);
    sy_tensor *t = calloc(1, sizeof *t);
    if (!t)
        return graph_fail(g, SY_E_NO_MEMORY, "out of memory adding tensor '%s'", nm);
    copy_name(t->name, nm);
    t->dtype = dtype;
    t->role = role;
    t->n_dims = n_dims;
    for (uint32_t d = 0; d < SY_MAX_DIMS; d++) {
        int64_t v = d < n_dims ? ne[d] : 1;
        /* 2^40 elements per dim is far past any device; it keeps products
         * of four dims from overflowing int64. */
        if (v < 1 || v > ((int64_t)1 << 40)) {
            free(t);
            return graph_fail(g, SY_E_SHAPE, "tensor '%s': dim %u is %lld", nm, d, (long long)v);
        }
        t->ne[d] = v;
    }
    if (t->ne[0] % sy_dtype_block_size(dtype) != 0) {
        free(t);
        return graph_fail(g, SY_E_SHAPE, "tensor '%s': ne[0]=%lld is not a multiple of the %s block size %u",
                          nm, (long long)ne[0], sy_dtype_name(dtype), sy_dtype_block_size(dtype));
    }
    sy_tensor_set_contiguous_strides(t);
    t->data = data;
    sy_status st = push_tensor(g, t, data);
    if (st != SY_OK) {
        free(t);
        return st;
    }
    *out_tensor = t;
    return SY_OK;
}

static sy_status check_inputs(sy_graph *g, const char *name, sy_op op, sy_tensor *const *inputs,
                              uint32_t n_inputs)
{
    if (op <= SY_OP_NONE || op >= SY_OP_COUNT)
        return graph_fail(g, SY_E_INVALID_ARG, "node '%s': invalid op %d", name, (int)op);
    if (n_inputs > SY_MAX_INPUTS || (n_inputs && !inputs))
        return graph_fail(g, SY_E_INVALID_ARG, "node '%s' (%s): %u inputs, at most %d", name,
                          sy_op_name(op), n_inputs, SY_MAX_INPUTS);
    for (uint32_t i = 0; i < n_inputs; i++) {
        if (!inputs[i])
            return graph_fail(g, SY_E_INVALID_ARG, "node '%s' (%s): input %u is NULL", name,
                              sy_op_name(op), i);
        if (!graph_owns(g, inputs[i]))
            return graph_fail(g, SY_E_GRAPH,
                              "node '%s' (%s): input %u ('%s') is dangling: it belongs to no "
                              "tensor of this graph",
                              name, sy_op_name(op), i, inputs[i]->name);
    }
    return SY_OK;
}

static sy_status push_node(sy_graph *g, sy_op op, const char *name, sy_tensor *const *inputs,
                           uint32_t n_inputs, const sy_op_params *params, sy_tensor *output)
{
    sy_status st = grow_nodes(g);
    if (st != SY_OK)
        return graph_fail(g, st, "out of memory adding node '%s'", name);
    sy_node *n = calloc(1, sizeof *n);
    if (!n)
        return graph_fail(g, SY_E_NO_MEMORY, "out of memory adding node '%s'", name);
    n->id = g->n_nodes;
    n->op = op;
    n->n_inputs = n_inputs;
    for (uint32_t i = 0; i < n_inputs; i++)
        n->inputs[i] = inputs[i];
    n->output = output;
    if (params)
        n->params = *params;
    copy_name(n->name, name);
    g->nodes[g->n_nodes++] = n;
    g->producer[output->id] = n;
    return SY_OK;
}

sy_status sy_graph_add_node(sy_graph *g, sy_op op, const char *name, sy_tensor *const *inputs,
                            uint32_t n_inputs, const sy_op_params *params,
                            sy_tensor **out_output)
{
    if (out_output)
        *out_output = NULL;
    if (!g || !out_output)
        return SY_E_INVALID_ARG;
    const char *nm = name ? name : "";
    if (g->frozen)
        return graph_fail(g, SY_E_STATE, "node '%s': graph is frozen", nm);
    sy_status st = check_inputs(g, nm, op, inputs, n_inputs);
    if (st != SY_OK)
        return st;
    sy_op_params zero = {0};
    sy_tensor *out = calloc(1, sizeof *out);
    if (!out)
        return graph_fail(g, SY_E_NO_MEMORY, "out of memory adding node '%s'", nm);
    char why[384] = "";
    st = sy_op_infer(op, inputs, n_inputs, params ? params : &zero, out, why, sizeof why);
    if (st != SY_OK) {
        free(out);
        return graph_fail(g, st, "node '%s': %s", nm, why);
    }
    copy_name(out->name, nm);
    out->role = SY_ROLE_ACTIVATION;
    st = push_tensor(g, out, NULL);
    if (st != SY_OK) {
        free(out);
        return st;
    }
    st = push_node(g, op, nm, inputs, n_inputs, params, out);
    if (st != SY_OK) {
        /* The tensor is the last one pushed: drop it again. */
        g->n_tensors--;
        free(out);
        return st;
    }
    *out_output = out;
    return SY_OK;
}

sy_status sy_graph_add_node_into(sy_graph *g, sy_op op, const char *name,
                                 sy_tensor *const *inputs, uint32_t n_inputs,
                                 const sy_op_params *params, sy_tensor *output)
{
    if (!g || !output)
        return SY_E_INVALID_ARG;
    const char *nm = name ? name : "";
    if (g->frozen)
        return graph_fail(g, SY_E_STATE, "node '%s': graph is frozen", nm);
    sy_status st = check_inputs(g, nm, op, inputs, n_inputs);
    if (st != SY_OK)
        return st;
    if (!graph_owns(g, output))
        return graph_fail(g, SY_E_GRAPH, "node '%s' (%s): output '%s' belongs to no tensor of this graph",
                          nm, sy_op_name(op), output->name);
    sy_node *prev = g->producer[output->id];
    if (prev)
        return graph_fail(g, SY_E_GRAPH, "node '%s' (%s): output '%s' is already written by node '%s'",
                          nm, sy_op_name(op), output->name, prev->name);
    if (output->role == SY_ROLE_WEIGHT || output->role == SY_ROLE_INPUT)
        return graph_fail(g, SY_E_GRAPH, "node '%s' (%s): output '%s' is an input or weight",
                          nm, sy_op_name(op), output->name);
    return push_node(g, op, nm, inputs, n_inputs, params, output);
}

sy_status sy_graph_mark_output(sy_graph *g, sy_tensor *t)
{
    if (!g || !graph_owns(g, t))
        return g ? graph_fail(g, SY_E_INVALID_ARG, "mark_output: tensor is not in this graph")
                 : SY_E_INVALID_ARG;
    g->is_output[t->id] = true;
    return SY_OK;
}

sy_status sy_graph_set_host_data(sy_graph *g, sy_tensor *t, void *data)
{
    if (!g || !graph_owns(g, t))
        return g ? graph_fail(g, SY_E_INVALID_ARG, "set_host_data: tensor is not in this graph")
                 : SY_E_INVALID_ARG;
    g->host_data[t->id] = data;
    g->host_gen++;
    t->data = data;
    return SY_OK;
}

void *sy_graph_host_data(const sy_graph *g, const sy_tensor *t)
{
    return g && graph_owns(g, t) ? g->host_data[t->id] : NULL;
}

bool sy_graph_is_output(const sy_graph *g, const sy_tensor *t)
{
    return g && graph_owns(g, t) && g->is_output[t->id];
}

sy_node *sy_graph_producer(const sy_graph *g, const sy_tensor *t)
{
    return g && graph_owns(g, t) ? g->producer[t->id] : NULL;
}

static bool is_leaf_role(uint32_t role)
{
    return role == SY_ROLE_INPUT || role == SY_ROLE_WEIGHT || role == SY_ROLE_KV;
}

/* Checks each node's inputs are produced or leaves, and that nodes added
 * with add_node_into agree with the catalogue's inference. */
static sy_status validate_nodes(sy_graph *g)
{
    for (uint32_t i = 0; i < g->n_nodes; i++) {
        sy_node *n = g->nodes[i];
        for (uint32_t k = 0; k < n->n_inputs; k++) {
            const sy_tensor *in = n->inputs[k];
            if (!g->producer[in->id] && !is_leaf_role(in->role))
                return graph_fail(g, SY_E_GRAPH,
                                  "node '%s' (%s): input %u ('%s') is dangling: no node "
                                  "produces it and it is not an input, weight or KV tensor",
                                  n->name, sy_op_name(n->op), k, in->name);
        }
        sy_tensor want;
        memset(&want, 0, sizeof want);
        char why[384] = "";
        sy_status st = sy_op_infer(n->op, n->inputs, n->n_inputs, &n->params, &want, why,
                                   sizeof why);
        if (st != SY_OK)
            return graph_fail(g, st, "node '%s': %s", n->name, why);
        const sy_tensor *o = n->output;
        if (want.dtype != o->dtype || memcmp(want.ne, o->ne, sizeof want.ne) != 0)
            return graph_fail(g, SY_E_SHAPE,
                              "node '%s' (%s): output '%s' is %s [%lld,%lld,%lld,%lld], the op "
                              "produces %s [%lld,%lld,%lld,%lld]",
                              n->name, sy_op_name(n->op), o->name, sy_dtype_name(o->dtype),
                              (long long)o->ne[0], (long long)o->ne[1], (long long)o->ne[2],
                              (long long)o->ne[3], sy_dtype_name(want.dtype),
                              (long long)want.ne[0], (long long)want.ne[1],
                              (long long)want.ne[2], (long long)want.ne[3]);
    }
    return SY_OK;
}

/* Kahn's algorithm with a FIFO seeded in insertion order, so builders get
 * the order they wrote whenever it is already valid.  O(nodes + edges). */
static sy_status topo_sort(sy_graph *g)
{
    uint32_t n = g->n_nodes;
    if (n == 0)
        return SY_OK;
    uint32_t *indeg = calloc(n, sizeof *indeg);
    uint32_t *first = calloc((size_t)n + 1, sizeof *first); /* CSR of consumers */
    uint32_t *cons = malloc((size_t)n * SY_MAX_INPUTS * sizeof *cons);
    uint32_t *queue = malloc(n * sizeof *queue);
    sy_node **order = malloc(n * sizeof *order);
    sy_status st = SY_OK;
    if (!indeg || !first || !cons || !queue || !order) {
        st = graph_fail(g, SY_E_NO_MEMORY, "out of memory ordering the graph");
        goto out_free;
    }
    /* Node ids are insertion indices until the graph is frozen. */
    for (uint32_t i = 0; i < n; i++)
        g->nodes[i]->id = i;
    for (uint32_t i = 0; i < n; i++) {
        const sy_node *nd = g->nodes[i];
        for (uint32_t k = 0; k < nd->n_inputs; k++) {
            const sy_node *p = g->producer[nd->inputs[k]->id];
            if (p) {
                indeg[i]++;
                first[p->id + 1]++;
            }
        }
    }
    for (uint32_t i = 0; i < n; i++)
        first[i + 1] += first[i];
    uint32_t *fill = queue; /* reused as per-producer cursor before the sort */
    memcpy(fill, first, n * sizeof *fill);
    for (uint32_t i = 0; i < n; i++) {
        const sy_node *nd = g->nodes[i];
        for (uint32_t k = 0; k < nd->n_inputs; k++) {
            const sy_node *p = g->producer[nd->inputs[k]->id];
            if (p)
                cons[fill[p->id]++] = i;
        }
    }
    uint32_t head = 0, tail = 0;
    for (uint32_t i = 0; i < n; i++)
        if (indeg[i] == 0)
            queue[tail++] = i;
    while (head < tail) {
        uint32_t i = queue[head++];
        order[head - 1] = g->nodes[i];
        for (uint32_t e = first[i]; e < first[i + 1]; e++)
            if (--indeg[cons[e]] == 0)
                queue[tail++] = cons[e];
    }
    if (head < n) {
        /* Unordered nodes lie on a cycle or downstream of one.  Walking n
         * steps up through unordered producers from any of them is sure to
         * end on the cycle itself, so the message names a node on it. */
        uint32_t at = 0;
        while (indeg[at] == 0)
            at++;
        for (uint32_t step = 0; step < n; step++) {
            const sy_node *c = g->nodes[at];
            for (uint32_t k = 0; k < c->n_inputs; k++) {
                const sy_node *p = g->producer[c->inputs[k]->id];
                if (p && indeg[p->id] != 0) {
                    at = p->id;
                    break;
                }
            }
        }
        const sy_node *c = g->nodes[at];
        st = graph_fail(g, SY_E_GRAPH, "node '%s' (%s) is part of a cycle", c->name,
                        sy_op_name(c->op));
        goto out_free;
    }
    for (uint32_t i = 0; i < n; i++) {
        g->nodes[i] = order[i];
        g->nodes[i]->id = i;
    }
out_free:
    free(indeg);
    free(first);
    free(cons);
    free(queue);
    free(order);
    return st;
}

sy_status sy_graph_freeze(sy_graph *g)
{
    if (!g)
        return SY_E_INVALID_ARG;
    if (g->frozen)
        return SY_OK;
    g->err[0] = '\0';
    sy_status st = validate_nodes(g);
    if (st != SY_OK)
        return st;
    st = topo_sort(g);
    if (st != SY_OK)
        return st;
    sy__graph_hash_structure(g->nodes, g->n_nodes, g->n_tensors, g->is_output, g->sig);
    g->layout = sy__graph_hash_layout(g);
    g->frozen = true;
    return SY_OK;
}

void sy__graph_signature(const sy_graph *g, uint64_t out_sig[2])
{
    bool ok = g && g->frozen;
    out_sig[0] = ok ? g->sig[0] : 0;
    out_sig[1] = ok ? g->sig[1] : 0;
}

uint64_t sy__graph_layout(const sy_graph *g)
{
    return g && g->frozen ? g->layout : 0;
}

bool sy_graph_is_frozen(const sy_graph *g)
{
    return g && g->frozen;
}

uint32_t sy_graph_node_count(const sy_graph *g)
{
    return g ? g->n_nodes : 0;
}

uint32_t sy_graph_tensor_count(const sy_graph *g)
{
    return g ? g->n_tensors : 0;
}

sy_node *sy_graph_node(const sy_graph *g, uint32_t i)
{
    return g && i < g->n_nodes ? g->nodes[i] : NULL;
}

sy_tensor *sy_graph_tensor(const sy_graph *g, uint32_t i)
{
    return g && i < g->n_tensors ? g->tensors[i] : NULL;
}

sy_tensor *sy_graph_find_tensor(const sy_graph *g, const char *name)
{
    if (!g || !name)
        return NULL;
    for (uint32_t i = 0; i < g->n_tensors; i++)
        if (strcmp(g->tensors[i]->name, name) == 0)
            return g->tensors[i];
    return NULL;
}
