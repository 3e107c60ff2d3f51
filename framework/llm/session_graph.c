/* Step graphs kept between a session's steps (session_graph.h). */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "session_graph.h"

void sy__step_graph_drop(sy__step_graph *e)
{
    sy_graph_destroy(e->g);
    sy_plan_release(e->plan);
    free(e->kv);
    free(e->ups);
    memset(e, 0, sizeof *e);
}

void sy__step_graphs_deinit(sy__step_graphs *c)
{
    for (uint32_t i = 0; i < SY__STEP_GRAPHS; i++)
        sy__step_graph_drop(&c->e[i]);
    c->tick = 0;
}

/* True when |e| was built for a step like |step| but for its position. */
static bool same_step(const sy__step_graph *e, const sy_model *m, const sy_step_desc *step)
{
    if (!e->g || e->n_tokens != step->n_tokens || e->all_logits != step->all_logits ||
        e->tokens != step->tokens || e->positions != step->positions ||
        e->kv_starts != step->kv_starts ||
        e->logits != step->logits || e->kv_type != step->kv_type)
        return false;
    for (uint32_t il = 0; il < m->hp.n_layer; il++) {
        const sy_kv_layer *a = &e->kv[il], *b = &step->kv_layers[il];
        if (a->k != b->k || a->v != b->v || a->rows != b->rows)
            return false;
    }
    return true;
}

/* The params |step| gives each layer's KV writes and attention. */
static void fill_params(sy__step_graph *e, const sy_model *m, const sy_step_desc *step)
{
    for (uint32_t il = 0; il < m->hp.n_layer; il++) {
        sy__node_update *u = &e->ups[3 * il];
        sy__model_step_params(m, step, il, &u[0].params, &u[2].params);
        u[1].params = u[0].params;
    }
}

/* The layer whose cache buffer |data| is, or UINT32_MAX. */
static uint32_t layer_of(const sy__step_graph *e, uint32_t n_layer, const void *data, bool *is_v)
{
    for (uint32_t il = 0; il < n_layer; il++) {
        if (data == e->kv[il].k || data == e->kv[il].v) {
            *is_v = data == e->kv[il].v;
            return il;
        }
    }
    return UINT32_MAX;
}

/* Finds the KV write and attention nodes of every layer by the cache
 * buffer they write or read. */
static sy_status find_nodes(sy__step_graph *e, uint32_t n_layer, char *err, size_t err_size)
{
    for (uint32_t k = 0; k < 3 * n_layer; k++)
        e->ups[k].node = UINT32_MAX;
    uint32_t nn = sy_graph_node_count(e->g);
    for (uint32_t i = 0; i < nn; i++) {
        const sy_node *n = sy_graph_node(e->g, i);
        const sy_tensor *cache;
        if (n->op == SY_OP_KV_WRITE)
            cache = n->inputs[0];
        else if (n->op == SY_OP_ATTENTION)
            cache = n->inputs[1]->view_src ? n->inputs[1]->view_src : n->inputs[1];
        else
            continue;
        bool is_v = false;
        uint32_t il = layer_of(e, n_layer, sy_graph_host_data(e->g, cache), &is_v);
        if (il == UINT32_MAX)
            break;
        uint32_t slot = 3 * il + (n->op == SY_OP_ATTENTION ? 2 : is_v);
        if (e->ups[slot].node != UINT32_MAX)
            break;
        e->ups[slot].node = i;
    }
    for (uint32_t k = 0; k < 3 * n_layer; k++)
        if (e->ups[k].node == UINT32_MAX) {
            snprintf(err, err_size, "the step graph's KV writes and attentions do not map one to "
                     "one onto the %u layers' caches", n_layer);
            return SY_E_GRAPH;
        }
    return SY_OK;
}

static sy_status build(sy__step_graph *e, const sy_model *m, const sy_step_desc *step, char *err,
                       size_t err_size)
{
    uint32_t L = m->hp.n_layer;
    sy_status st = sy__model_build_graph(m, step, &e->g, err, err_size);
    if (st != SY_OK)
        return st;
    e->kv = malloc((size_t)(L ? L : 1) * sizeof *e->kv);
    e->ups = malloc((size_t)(L ? 3 * L : 1) * sizeof *e->ups);
    if (!e->kv || !e->ups) {
        snprintf(err, err_size, "out of memory keeping the step graph");
        return SY_E_NO_MEMORY;
    }
    memcpy(e->kv, step->kv_layers, (size_t)L * sizeof *e->kv);
    e->n_tokens = step->n_tokens;
    e->all_logits = step->all_logits;
    e->tokens = step->tokens;
    e->positions = step->positions;
    e->kv_starts = step->kv_starts;
    e->logits = step->logits;
    e->kv_type = step->kv_type;
    return find_nodes(e, L, err, err_size);
}

/* Whether device |d| runs |n| (the form with a run-time start, and its
 * fixed-position form at position 0): *run, *fixed. */
static void probe_node(sy_runtime *rt, uint32_t d, const sy_node *n, bool *run, bool *fixed)
{
    sy_support why;
    *run = sy_runtime_device_supports(rt, d, n, &why);
    sy_node f = *n;
    f.n_inputs--;
    f.inputs[f.n_inputs] = NULL;
    f.params.i[0] = 0;
    sy_tensor out = *n->output, k, v;
    if (n->op == SY_OP_KV_WRITE) {
        out.ne[2] = n->inputs[1]->ne[2]; /* rows 0..T-1 */
        f.output = &out;
    } else {
        k = *n->inputs[1];
        v = *n->inputs[2];
        k.ne[2] = v.ne[2] = n->inputs[0]->ne[2]; /* keys 0..T-1 */
        f.inputs[1] = &k;
        f.inputs[2] = &v;
    }
    *fixed = sy_runtime_device_supports(rt, d, &f, &why);
}

static bool device_run_time_kv_ok(sy_runtime *rt, uint32_t d, const sy_graph *g,
                                  const sy__node_update *ups)
{
    for (uint32_t k = 1; k < 3; k++) { /* layer 0's v write and attention */
        bool run, fixed;
        probe_node(rt, d, sy_graph_node(g, ups[k].node), &run, &fixed);
        if (fixed && !run)
            return false;
    }
    return true;
}

bool sy__step_graph_run_time_kv_ok(const sy__step_graph *e, sy_runtime *rt, const char *devices)
{
    if (!devices) {
        for (uint32_t d = 0; d < sy_runtime_device_count(rt); d++)
            if (!device_run_time_kv_ok(rt, d, e->g, e->ups))
                return false;
        return true;
    }
    for (const char *p = devices; *p;) {
        size_t n = strcspn(p, ",");
        char name[SY_NAME_MAX];
        snprintf(name, sizeof name, "%.*s", (int)n, p);
        uint32_t d;
        if (sy_runtime_find_device(rt, name, &d) == SY_OK &&
            !device_run_time_kv_ok(rt, d, e->g, e->ups))
            return false;
        p += n + (p[n] == ',');
    }
    return true;
}

sy_status sy__step_graph_get(sy__step_graphs *c, const sy_model *m, const sy_step_desc *step,
                             sy__step_graph **out, char *err, size_t err_size)
{
    *out = NULL;
    if (!step->kv_layers)
        return SY_E_INVALID_ARG;
    sy__step_graph *slot = &c->e[0];
    for (uint32_t i = 0; i < SY__STEP_GRAPHS; i++) {
        sy__step_graph *e = &c->e[i];
        if (same_step(e, m, step) && e->kv_starts) {
            /* Its KV writes and attentions read the position when they
             * run: the graph is the step's as it is. */
            e->last_use = ++c->tick;
            *out = e;
            return SY_OK;
        }
        if (same_step(e, m, step)) {
            fill_params(e, m, step);
            sy_status st = sy__graph_update_params(e->g, e->ups, 3 * m->hp.n_layer);
            if (st == SY_OK) {
                e->last_use = ++c->tick;
                *out = e;
                return SY_OK;
            }
            /* Not expected (the builder gives the same params); a graph
             * built afresh says what is wrong, if anything. */
            sy__step_graph_drop(e);
            slot = e;
            break;
        }
        if (!e->g || (slot->g && e->last_use < slot->last_use))
            slot = e;
    }
    sy__step_graph_drop(slot);
    sy_status st = build(slot, m, step, err, err_size);
    if (st != SY_OK) {
        sy__step_graph_drop(slot);
        return st;
    }
    fill_params(slot, m, step);
    slot->last_use = ++c->tick;
    *out = slot;
    return SY_OK;
}
