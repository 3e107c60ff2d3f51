/* From a graph to the placement problem: which node's value each tensor
 * holds (views resolved to the node or leaf they alias), the cost of every
 * node on every device, transfer costs per value and device pair, leaf
 * homes, and the exact objective and memory of a placement.
 *
 * Leaves (weights, KV, inputs) are placed once, each on one home device.
 * A node reading a leaf homed elsewhere pays its transfer every step; in
 * the DP that cost is shared among the leaf's readers (exact when they sit
 * together, which is the common case), while the objective and the plan
 * charge it once per destination.  A leaf written through a view (a KV
 * cache under KV_WRITE) is homed with its writer. */
#include <math.h>
#include <stdlib.h>
#include <string.h>

#include "plan_internal.h"

static uint32_t root_id(const sy_tensor *t)
{
    return t->view_src ? t->view_src->id : t->id;
}

static bool is_leaf_value(uint32_t v)
{
    return (v & SY__LEAF_BIT) != 0;
}

uint64_t sy__value_bytes(const sy__plan_ctx *c, uint32_t value)
{
    if (is_leaf_value(value))
        return sy_tensor_nbytes(sy_graph_tensor(c->g, value & ~SY__LEAF_BIT));
    return c->dec_bytes[value];
}

uint64_t sy__value_storage(const sy__plan_ctx *c, uint32_t value)
{
    if (is_leaf_value(value))
        return sy_tensor_nbytes(sy_graph_tensor(c->g, value & ~SY__LEAF_BIT));
    const sy_tensor *o = sy_graph_node(c->g, c->dec[value])->output;
    return sy_tensor_nbytes(o->view_src ? o->view_src : o);
}

sy_status sy__ctx_structure(sy__plan_ctx *c)
{
    const sy_graph *g = c->g;
    for (uint32_t t = 0; t < c->n_tensors; t++) {
        const sy_tensor *x = sy_graph_tensor(g, t);
        c->value_of[t] = SY__LEAF_BIT | root_id(x);
        c->leaf_writer[t] = SY__NONE;
        c->leaf_home[t] = SY__NO_DEVICE;
    }
    c->n_dec = 0;
    for (uint32_t i = 0; i < c->n_nodes; i++) {
        const sy_node *n = sy_graph_node(g, i);
        if (sy_op_is_view(n->op)) {
            c->dec_of[i] = SY__NONE;
            c->value_of[n->output->id] = c->value_of[n->inputs[0]->id];
            continue;
        }
        c->dec_of[i] = c->n_dec;
        c->dec[c->n_dec] = i;
        c->dec_bytes[c->n_dec] = sy_tensor_nbytes(n->output);
        c->value_of[n->output->id] = c->n_dec;
        const sy_tensor *o = n->output;
        if (o->view_src && !sy_graph_producer(g, o->view_src))
            c->leaf_writer[o->view_src->id] = c->n_dec;
        c->n_dec++;
    }
    /* Consumers of each decision and readers of each leaf, inputs deduplicated. */
    uint32_t edges = 0;
    for (uint32_t k = 0; k < c->n_dec; k++) {
        const sy_node *n = sy_graph_node(g, c->dec[k]);
        for (uint32_t j = 0; j < n->n_inputs; j++) {
            uint32_t v = c->value_of[n->inputs[j]->id];
            bool dup = false;
            for (uint32_t q = 0; q < j; q++)
                dup = dup || c->value_of[n->inputs[q]->id] == v;
            if (dup)
                continue;
            if (is_leaf_value(v)) {
                c->leaf_readers[v & ~SY__LEAF_BIT]++;
            } else {
                c->cons_start[v + 1]++;
                edges++;
            }
        }
    }
    for (uint32_t k = 0; k < c->n_dec; k++)
        c->cons_start[k + 1] += c->cons_start[k];
    c->cons_list = malloc(((size_t)edges + 1) * sizeof *c->cons_list);
    uint32_t *fill = calloc((size_t)c->n_dec + 1, sizeof *fill);
    if (!c->cons_list || !fill) {
        free(fill);
        return sy__planner_fail(c->pl, SY_E_NO_MEMORY, "out of memory indexing %u nodes",
                                c->n_nodes);
    }
    for (uint32_t k = 0; k < c->n_dec; k++) {
        const sy_node *n = sy_graph_node(g, c->dec[k]);
        for (uint32_t j = 0; j < n->n_inputs; j++) {
            uint32_t v = c->value_of[n->inputs[j]->id];
            bool dup = false;
            for (uint32_t q = 0; q < j; q++)
                dup = dup || c->value_of[n->inputs[q]->id] == v;
            if (!dup && !is_leaf_value(v))
                c->cons_list[c->cons_start[v] + fill[v]++] = k;
        }
    }
    free(fill);
    return SY_OK;
}

sy_status sy__ctx_costs(sy__plan_ctx *c)
{
    uint32_t D = c->D;
    c->idle_w = 0.0;
    for (uint32_t d = 0; d < D; d++)
        c->idle_w += c->dm[d].idle_w;
    for (uint32_t k = 0; k < c->n_dec; k++) {
        uint32_t i = c->dec[k];
        const sy_node *n = sy_graph_node(c->g, i);
        c->unmeasured[k] = 0;
        for (uint32_t d = 0; d < D; d++) {
            if (!(c->supported[i] >> d & 1u)) {
                c->node_s[(size_t)k * D + d] = INFINITY;
                c->node_j[(size_t)k * D + d] = INFINITY;
                continue;
            }
            bool unm = false;
            double t = sy__cost_node(&c->dm[d], n, &unm);
            c->node_s[(size_t)k * D + d] = t;
            /* This device at its power for the op, the others idling. */
            c->node_j[(size_t)k * D + d] =
                t * (sy__power_node(&c->dm[d], n) + c->idle_w - c->dm[d].idle_w);
            if (unm)
                c->unmeasured[k] |= (uint8_t)(1u << d);
        }
    }
    for (uint32_t s = 0; s < D; s++)
        for (uint32_t d = 0; d < D; d++)
            if (s != d)
                sy__cost_link(&c->dm[s], &c->dm[d], &c->link[s][d]);
    return SY_OK;
}

double sy__ctx_move_j(const sy__plan_ctx *c, uint32_t s, uint32_t d, uint64_t bytes)
{
    const sy__link_model *l = &c->link[s][d];
    return sy__cost_transfer(l, bytes) * c->idle_w + sy__cost_transfer_j(l, bytes);
}

double sy__ctx_node_obj(const sy__plan_ctx *c, uint32_t k, uint32_t d)
{
    size_t at = (size_t)k * c->D + d;
    if (c->req->policy != SY__POLICY_ENERGY)
        return c->node_s[at];
    return c->node_j[at] + SY__ENERGY_TIME_WEIGHT * c->node_s[at];
}

double sy__ctx_move_obj(const sy__plan_ctx *c, uint32_t s, uint32_t d, uint64_t bytes)
{
    double t = sy__cost_transfer(&c->link[s][d], bytes);
    if (c->req->policy != SY__POLICY_ENERGY)
        return t;
    return sy__ctx_move_j(c, s, d, bytes) + SY__ENERGY_TIME_WEIGHT * t;
}

static double leaf_move(const sy__plan_ctx *c, uint32_t root, uint32_t from, uint32_t to)
{
    return sy__ctx_move_obj(c, from, to, sy__value_bytes(c, SY__LEAF_BIT | root));
}

sy_status sy__ctx_problem(sy__plan_ctx *c)
{
    uint32_t D = c->D;
    /* The structure and the transfer costs stay from one posing to the
     * next within a planning run; only the node costs change (leaf homes,
     * devices taken away for memory). */
    bool fresh = !c->pb.cost || c->pb.n != c->n_dec || c->pb.n_dev != D;
    if (fresh) {
        sy__sched_problem_deinit(&c->pb);
        sy_status st = sy__sched_problem_init(&c->pb, c->n_dec, D, c->cons_start[c->n_dec]);
        if (st != SY_OK)
            return sy__planner_fail(c->pl, st, "out of memory posing the placement of %u nodes",
                                    c->n_dec);
    }
    sy__sched_problem *pb = &c->pb;
    uint32_t e = 0;
    for (uint32_t k = 0; k < c->n_dec; k++) {
        uint32_t i = c->dec[k];
        const sy_node *n = sy_graph_node(c->g, i);
        if (fresh)
            pb->in_start[k] = e;
        double leaf_cost[SY__MAX_PLAN_DEVICES] = {0};
        for (uint32_t j = 0; j < n->n_inputs; j++) {
            uint32_t v = c->value_of[n->inputs[j]->id];
            bool dup = false;
            for (uint32_t q = 0; q < j; q++)
                dup = dup || c->value_of[n->inputs[q]->id] == v;
            if (dup)
                continue;
            if (!is_leaf_value(v)) {
                if (fresh)
                    pb->in_list[e++] = v;
                continue;
            }
            uint32_t root = v & ~SY__LEAF_BIT;
            uint32_t home = c->leaf_home[root];
            if (home == SY__NO_DEVICE || c->leaf_writer[root] == k)
                continue;
            for (uint32_t d = 0; d < D; d++)
                if (d != home)
                    leaf_cost[d] += leaf_move(c, root, home, d) / c->leaf_readers[root];
        }
        for (uint32_t d = 0; d < D; d++)
            pb->cost[(size_t)k * D + d] =
                (c->allowed[i] >> d & 1u) ? sy__ctx_node_obj(c, k, d) + leaf_cost[d] : INFINITY;
        if (!fresh)
            continue;
        uint64_t bytes = sy__value_bytes(c, k);
        for (uint32_t s = 0; s < D; s++)
            for (uint32_t d = 0; d < D; d++)
                pb->xfer[((size_t)k * D + s) * D + d] =
                    s == d ? 0.0 : sy__ctx_move_obj(c, s, d, bytes);
    }
    if (fresh)
        pb->in_start[c->n_dec] = e;
    return SY_OK;
}

/* Calls |visit| once per (value, destination) a placement moves. */
typedef void (*move_fn)(const sy__plan_ctx *c, uint32_t value, uint32_t src, uint32_t dst,
                        void *user);

static sy_status for_each_move(const sy__plan_ctx *c, move_fn visit, void *user)
{
    uint8_t *sent_v = calloc((size_t)c->n_dec + 1, 1);
    uint8_t *sent_l = calloc((size_t)c->n_tensors + 1, 1);
    if (!sent_v || !sent_l) {
        free(sent_v);
        free(sent_l);
        return SY_E_NO_MEMORY;
    }
    for (uint32_t k = 0; k < c->n_dec; k++) {
        const sy_node *n = sy_graph_node(c->g, c->dec[k]);
        uint32_t d = c->assign[k];
        for (uint32_t j = 0; j < n->n_inputs; j++) {
            uint32_t v = c->value_of[n->inputs[j]->id];
            uint32_t src;
            uint8_t *sent;
            if (is_leaf_value(v)) {
                uint32_t root = v & ~SY__LEAF_BIT;
                if (c->leaf_writer[root] == k)
                    continue;
                src = c->leaf_home[root];
                sent = &sent_l[root];
            } else {
                src = c->assign[v];
                sent = &sent_v[v];
            }
            if (src == d || src == SY__NO_DEVICE || (*sent >> d & 1u))
                continue;
            *sent |= (uint8_t)(1u << d);
            visit(c, v, src, d, user);
        }
    }
    free(sent_v);
    free(sent_l);
    return SY_OK;
}

static void add_move_cost(const sy__plan_ctx *c, uint32_t value, uint32_t src, uint32_t dst,
                          void *user)
{
    *(double *)user += sy__ctx_move_obj(c, src, dst, sy__value_bytes(c, value));
}

double sy__ctx_objective(const sy__plan_ctx *c)
{
    double total = 0.0;
    for (uint32_t k = 0; k < c->n_dec; k++)
        total += sy__ctx_node_obj(c, k, c->assign[k]);
    if (for_each_move(c, add_move_cost, &total) != SY_OK)
        return INFINITY;
    return total;
}

void sy__ctx_leaf_masks(const sy__plan_ctx *c, uint8_t *seen)
{
    for (uint32_t t = 0; t < c->n_tensors; t++)
        seen[t] = 0;
    for (uint32_t k = 0; k < c->n_dec; k++) {
        const sy_node *n = sy_graph_node(c->g, c->dec[k]);
        for (uint32_t j = 0; j < n->n_inputs; j++) {
            uint32_t v = c->value_of[n->inputs[j]->id];
            if (is_leaf_value(v))
                seen[v & ~SY__LEAF_BIT] |= (uint8_t)(1u << c->assign[k]);
        }
    }
    /* An output that only views a leaf is read by the caller: the leaf
     * needs a home even though no node reads it. */
    for (uint32_t t = 0; t < c->n_tensors; t++) {
        uint32_t v = c->value_of[t];
        if ((v & SY__LEAF_BIT) && !seen[v & ~SY__LEAF_BIT] &&
            sy_graph_is_output(c->g, sy_graph_tensor(c->g, t)))
            seen[v & ~SY__LEAF_BIT] = 1;
    }
}

void sy__ctx_home_leaves(sy__plan_ctx *c)
{
    uint8_t *seen = c->leaf_home; /* reused: reader device masks first */
    sy__ctx_leaf_masks(c, seen);
    for (uint32_t t = 0; t < c->n_tensors; t++) {
        uint8_t mask = seen[t];
        if (mask == 0) {
            c->leaf_home[t] = SY__NO_DEVICE;
            continue;
        }
        if (c->leaf_writer[t] != SY__NONE) {
            c->leaf_home[t] = c->assign[c->leaf_writer[t]];
            continue;
        }
        /* The reader device from which shipping to the others is cheapest. */
        double best = INFINITY;
        uint8_t home = 0;
        for (uint32_t h = 0; h < c->D; h++) {
            if (!(mask >> h & 1u))
                continue;
            double cost = 0.0;
            for (uint32_t d = 0; d < c->D; d++)
                if (d != h && (mask >> d & 1u))
                    cost += leaf_move(c, t, h, d);
            if (cost < best) {
                best = cost;
                home = (uint8_t)h;
            }
        }
        c->leaf_home[t] = home;
    }
}

/* A leaf's bytes on a device, for counting each once: two leaves over the
 * same host data (a tied embedding read as token_embd and as output) are
 * one buffer there, as the executor keeps them. */
typedef struct leaf_use {
    uintptr_t key; /* host data, else the tensor */
    uint64_t bytes;
    uint8_t dev;
    bool kv;
} leaf_use;

typedef struct mem_acc {
    sy_plan_memory *mem;
    leaf_use *leaves;
    uint32_t n_leaves;
} mem_acc;

static int leaf_use_cmp(const void *a, const void *b)
{
    const leaf_use *x = a, *y = b;
    if (x->dev != y->dev)
        return x->dev < y->dev ? -1 : 1;
    return (x->key > y->key) - (x->key < y->key);
}

static void add_leaf_use(const sy__plan_ctx *c, mem_acc *acc, uint32_t root, uint32_t dev)
{
    const sy_tensor *x = sy_graph_tensor(c->g, root);
    const void *host = sy_graph_host_data(c->g, x);
    if (acc->leaves)
        acc->leaves[acc->n_leaves++] =
            (leaf_use){host ? (uintptr_t)host : (uintptr_t)x, sy_tensor_nbytes(x), (uint8_t)dev,
                       x->role == SY_ROLE_KV};
    else if (x->role == SY_ROLE_KV)
        acc->mem[dev].kv_bytes += sy_tensor_nbytes(x);
    else
        acc->mem[dev].weight_bytes += sy_tensor_nbytes(x);
}

static void add_move_memory(const sy__plan_ctx *c, uint32_t value, uint32_t src, uint32_t dst,
                            void *user)
{
    mem_acc *acc = user;
    (void)src;
    if (is_leaf_value(value))
        add_leaf_use(c, acc, value & ~SY__LEAF_BIT, dst); /* a copy of a leaf there */
    else
        acc->mem[dst].activation_bytes += sy__value_storage(c, value);
}

/* Copies the last answer when the placement is the one it was for (a
 * planning round asks before it builds its plan, which asks again). */
static bool memory_known(const sy__plan_ctx *c, sy_plan_memory out[SY__MAX_PLAN_DEVICES])
{
    if (!c->mem_assign || memcmp(c->mem_assign, c->assign, c->n_dec) != 0 ||
        memcmp(c->mem_home, c->leaf_home, c->n_tensors) != 0)
        return false;
    memcpy(out, c->mem_last, SY__MAX_PLAN_DEVICES * sizeof *out);
    return true;
}

static void memory_keep(sy__plan_ctx *c, const sy_plan_memory out[SY__MAX_PLAN_DEVICES])
{
    if (!c->mem_assign) {
        c->mem_assign = malloc((size_t)c->n_dec + 1);
        c->mem_home = malloc((size_t)c->n_tensors + 1);
        if (!c->mem_assign || !c->mem_home) {
            free(c->mem_assign);
            free(c->mem_home);
            c->mem_assign = c->mem_home = NULL;
            return;
        }
    }
    memcpy(c->mem_assign, c->assign, c->n_dec);
    memcpy(c->mem_home, c->leaf_home, c->n_tensors);
    memcpy(c->mem_last, out, SY__MAX_PLAN_DEVICES * sizeof *out);
}

void sy__ctx_memory(sy__plan_ctx *c, sy_plan_memory out[SY__MAX_PLAN_DEVICES])
{
    if (memory_known(c, out))
        return;
    memset(out, 0, SY__MAX_PLAN_DEVICES * sizeof *out);
    for (uint32_t d = 0; d < c->D; d++)
        out[d].budget_bytes = c->req->budget[d];
    /* Leaves homed or copied on each device, each buffer once (without the
     * list, out of memory, every leaf is counted). */
    mem_acc acc = {.mem = out, .leaves = malloc(((size_t)c->n_tensors * c->D + 1) *
                                                 sizeof *acc.leaves)};
    for (uint32_t t = 0; t < c->n_tensors; t++)
        if (c->leaf_home[t] != SY__NO_DEVICE)
            add_leaf_use(c, &acc, t, c->leaf_home[t]);
    for (uint32_t k = 0; k < c->n_dec; k++) {
        const sy_tensor *o = sy_graph_node(c->g, c->dec[k])->output;
        if (o->view_src && !sy_graph_producer(c->g, o->view_src))
            continue; /* writes into a leaf, counted with the leaf */
        out[c->assign[k]].activation_bytes += sy__value_storage(c, k);
    }
    for_each_move(c, add_move_memory, &acc);
    if (!acc.leaves)
        return; /* every leaf counted: not kept */
    qsort(acc.leaves, acc.n_leaves, sizeof *acc.leaves, leaf_use_cmp);
    for (uint32_t i = 0; i < acc.n_leaves;) {
        uint32_t j = i + 1;
        uint64_t bytes = acc.leaves[i].bytes;
        while (j < acc.n_leaves && acc.leaves[j].dev == acc.leaves[i].dev &&
               acc.leaves[j].key == acc.leaves[i].key) {
            if (acc.leaves[j].bytes > bytes)
                bytes = acc.leaves[j].bytes;
            j++;
        }
        if (acc.leaves[i].kv)
            out[acc.leaves[i].dev].kv_bytes += bytes;
        else
            out[acc.leaves[i].dev].weight_bytes += bytes;
        i = j;
    }
    free(acc.leaves);
    memory_keep(c, out);
}

void sy__ctx_free(sy__plan_ctx *c)
{
    free(c->value_of);
    free(c->dec);
    free(c->dec_of);
    free(c->leaf_readers);
    free(c->leaf_writer);
    free(c->cons_start);
    free(c->cons_list);
    free(c->supported);
    free(c->allowed);
    free(c->evicted);
    free(c->pin_of);
    free(c->why_code);
    free(c->why_text);
    free(c->pool);
    free(c->node_s);
    free(c->node_j);
    free(c->unmeasured);
    free(c->leaf_home);
    free(c->assign);
    sy__sched_problem_deinit(&c->pb);
    sy__dp_memo_destroy(c->memo);
    free(c->dec_bytes);
    free(c->mem_assign);
    free(c->mem_home);
}
