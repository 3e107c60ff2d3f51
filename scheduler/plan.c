/* The plan object: rewriting a placement into ordered steps (segments of
 * nodes per device and one transfer per value per destination), the
 * reason behind every node's device, memory per device, and the queries. */
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "memplan.h"
#include "plan_order.h"

static uint32_t plan_pool_add(sy_plan *p, const char *text)
{
    size_t n = strlen(text) + 1;
    if (p->pool_len + n > p->pool_cap) {
        size_t cap = p->pool_cap ? p->pool_cap : 1024;
        while (p->pool_len + n > cap)
            cap *= 2;
        char *grown = realloc(p->pool, cap);
        if (!grown)
            return SY__NONE;
        p->pool = grown;
        p->pool_cap = cap;
    }
    memcpy(p->pool + p->pool_len, text, n);
    uint32_t at = (uint32_t)p->pool_len;
    p->pool_len += n;
    return at;
}

/* Device holding |value| (a decision or a leaf) under the placement. */
static uint32_t value_device(const sy__plan_ctx *c, uint32_t v)
{
    if (v & SY__LEAF_BIT) {
        uint8_t h = c->leaf_home[v & ~SY__LEAF_BIT];
        return h == SY__NO_DEVICE ? 0 : h;
    }
    return c->assign[v];
}

/* Node k and the transfers adjacent to it, were it on device |e| with
 * every neighbour where it is: what the reasons compare (seconds, or
 * joules under the energy policy). */
static double local_cost(const sy__plan_ctx *c, uint32_t k, uint32_t e)
{
    const sy_node *n = sy_graph_node(c->g, c->dec[k]);
    double t = sy__ctx_node_obj(c, k, e);
    for (uint32_t j = 0; j < n->n_inputs; j++) {
        uint32_t v = c->value_of[n->inputs[j]->id];
        if ((v & SY__LEAF_BIT) && c->leaf_writer[v & ~SY__LEAF_BIT] == k)
            continue;
        uint32_t src = value_device(c, v);
        if (src != e)
            t += sy__ctx_move_obj(c, src, e, sy__value_bytes(c, v));
    }
    uint8_t dests = 0;
    for (uint32_t q = c->cons_start[k]; q < c->cons_start[k + 1]; q++)
        dests |= (uint8_t)(1u << c->assign[c->cons_list[q]]);
    uint64_t bytes = sy__value_bytes(c, k);
    for (uint32_t d = 0; d < c->D; d++)
        if (d != e && (dests >> d & 1u))
            t += sy__ctx_move_obj(c, e, d, bytes);
    return t;
}

static uint8_t first_refusal(const sy__plan_ctx *c, uint32_t i)
{
    for (uint32_t d = 0; d < c->D; d++)
        if (!(c->supported[i] >> d & 1u))
            return (uint8_t)d;
    return SY__NO_DEVICE;
}

static void quote_refusal(sy_plan *p, const sy__plan_ctx *c, uint32_t i, uint8_t d)
{
    sy__plan_node *pn = &p->nodes[i];
    pn->refusing_dev = d;
    if (d == SY__NO_DEVICE)
        return;
    pn->refusal_code = c->why_code[(size_t)i * c->D + d];
    uint32_t t = c->why_text[(size_t)i * c->D + d];
    pn->refusal = plan_pool_add(p, t == SY__NONE ? "" : c->pool + t);
}

static void decide_reason(sy_plan *p, const sy__plan_ctx *c, uint32_t i, uint32_t k)
{
    sy__plan_node *pn = &p->nodes[i];
    uint32_t dev = pn->dev, n_allowed = 0;
    for (uint32_t d = 0; d < c->D; d++)
        n_allowed += c->allowed[i] >> d & 1u;
    pn->alt_dev = SY__NO_DEVICE;
    if (n_allowed > 1) {
        pn->local_s = local_cost(c, k, dev);
        pn->alt_s = INFINITY;
        for (uint32_t e = 0; e < c->D; e++) {
            if (e == dev || !(c->allowed[i] >> e & 1u))
                continue;
            double t = local_cost(c, k, e);
            if (t < pn->alt_s) {
                pn->alt_s = t;
                pn->alt_dev = (uint8_t)e;
            }
        }
    }
    if (c->pin_of[i] >= 0) {
        pn->reason = SY__REASON_PINNED;
        pn->pin = c->pin_of[i];
    } else if (c->req->policy == SY__POLICY_CPU_ONLY) {
        pn->reason = SY__REASON_CPU_ONLY;
    } else if (c->req->policy == SY__POLICY_PREFER && dev == c->req->policy_slot) {
        pn->reason = SY__REASON_PREFERRED;
    } else if (c->req->policy == SY__POLICY_PREFER &&
               !(c->supported[i] >> c->req->policy_slot & 1u)) {
        pn->reason = SY__REASON_FALLBACK;
        quote_refusal(p, c, i, (uint8_t)c->req->policy_slot);
    } else if (c->D == 1) {
        pn->reason = SY__REASON_SINGLE;
    } else if (n_allowed == 1) {
        pn->reason = SY__REASON_ONLY_DEVICE;
        quote_refusal(p, c, i, first_refusal(c, i));
    } else {
        pn->reason = SY__REASON_CHEAPEST;
        quote_refusal(p, c, i, first_refusal(c, i));
    }
}

static sy_status plan_nodes(sy_plan *p, const sy__plan_ctx *c)
{
    for (uint32_t i = 0; i < c->n_nodes; i++) {
        const sy_node *n = sy_graph_node(c->g, i);
        sy__plan_node *pn = &p->nodes[i];
        memcpy(pn->name, n->name, sizeof pn->name);
        pn->op = (uint16_t)n->op;
        pn->pin = -1;
        pn->refusal = SY__NONE;
        pn->refusing_dev = SY__NO_DEVICE;
        pn->alt_dev = SY__NO_DEVICE;
        pn->n_in = n->n_inputs;
        for (uint32_t j = 0; j < n->n_inputs; j++) {
            const sy_node *prod = sy_graph_producer(c->g, n->inputs[j]);
            pn->in[j] = prod ? prod->id : SY__NONE;
        }
        uint32_t k = c->dec_of[i];
        if (k == SY__NONE) {
            pn->dev = (uint8_t)value_device(c, c->value_of[n->inputs[0]->id]);
            pn->reason = SY__REASON_VIEW;
            pn->flags = SY__PN_VIEW;
            continue;
        }
        pn->dev = c->assign[k];
        pn->predicted_s = c->node_s[(size_t)k * c->D + pn->dev];
        pn->predicted_j = c->node_j[(size_t)k * c->D + pn->dev];
        if (c->unmeasured[k] >> pn->dev & 1u) {
            pn->flags |= SY__PN_UNMEASURED;
            p->n_unmeasured++;
        }
        if (c->evicted[i])
            pn->flags |= SY__PN_EVICTED;
        p->compute_s += pn->predicted_s;
        p->compute_j += pn->predicted_j;
        decide_reason(p, c, i, k);
    }
    return SY_OK;
}

static sy_status push_step(sy_plan *p, uint32_t *cap, const sy__plan_step *s)
{
    if (p->n_steps == *cap) {
        uint32_t grown_cap = *cap ? *cap * 2 : 64;
        sy__plan_step *grown = realloc(p->steps, grown_cap * sizeof *grown);
        if (!grown)
            return SY_E_NO_MEMORY;
        p->steps = grown;
        *cap = grown_cap;
    }
    p->steps[p->n_steps++] = *s;
    return SY_OK;
}

/* Whether value |v|, an input of decision |k|, must still be sent to
 * |dev|: it lives elsewhere (*out_src), is not |k|'s own leaf write, and
 * no transfer to |dev| has been emitted for it yet. */
static bool input_unsent(const sy__plan_ctx *c, uint32_t k, uint32_t v, uint32_t dev,
                         const uint8_t *sent_v, const uint8_t *sent_l, uint32_t *out_src)
{
    bool leaf = (v & SY__LEAF_BIT) != 0;
    uint32_t root = v & ~SY__LEAF_BIT;
    if (leaf && c->leaf_writer[root] == k)
        return false;
    uint32_t src = value_device(c, v);
    uint8_t sent = leaf ? sent_l[root] : sent_v[v];
    *out_src = src;
    return src != dev && !(sent >> dev & 1u);
}

/* Emits the transfers the nodes order[lo..hi) on |dev| need first. */
static sy_status plan_transfers(sy_plan *p, const sy__plan_ctx *c, uint32_t lo, uint32_t hi,
                                uint32_t dev, uint8_t *sent_v, uint8_t *sent_l, uint32_t *cap)
{
    for (uint32_t o = lo; o < hi; o++) {
        uint32_t i = p->order[o], k = c->dec_of[i];
        const sy_node *n = sy_graph_node(c->g, i);
        for (uint32_t j = 0; j < n->n_inputs; j++) {
            uint32_t v = c->value_of[n->inputs[j]->id], src;
            if (!input_unsent(c, k, v, dev, sent_v, sent_l, &src))
                continue;
            bool leaf = (v & SY__LEAF_BIT) != 0;
            uint32_t root = v & ~SY__LEAF_BIT;
            uint8_t *sent = leaf ? &sent_l[root] : &sent_v[v];
            *sent |= (uint8_t)(1u << dev);
            sy__plan_step s;
            memset(&s, 0, sizeof s);
            s.kind = SY_PLAN_STEP_TRANSFER;
            s.dev = (uint8_t)dev;
            s.src = (uint8_t)src;
            s.zero_copy = c->link[src][dev].zero_copy;
            s.bytes = sy__value_bytes(c, v);
            s.predicted_s = sy__cost_transfer(&c->link[src][dev], s.bytes);
            s.predicted_j = sy__ctx_move_j(c, src, dev, s.bytes);
            const sy_tensor *t;
            if (leaf) {
                t = sy_graph_tensor(c->g, root);
                s.value_node = SY__NONE;
            } else {
                s.value_node = c->dec[v];
                const sy_tensor *out = sy_graph_node(c->g, c->dec[v])->output;
                s.offset = out->view_src ? out->view_offset : 0;
                t = out->view_src ? out->view_src : out;
            }
            s.tensor = t->id;
            memcpy(s.tensor_name, t->name, sizeof s.tensor_name);
            p->transfer_s += s.predicted_s;
            p->transfer_j += s.predicted_j;
            p->transfer_bytes += s.bytes;
            p->n_transfers++;
            sy_status st = push_step(p, cap, &s);
            if (st != SY_OK)
                return st;
        }
    }
    return SY_OK;
}

/* True when node order[o] on |dev| reads a value not yet sent there from
 * a device with events: issuing its transfer waits for that device, so it
 * goes just before the node, not before the nodes ahead of it that can
 * run meanwhile. */
static bool reads_value(const sy__plan_ctx *c, uint32_t node, uint32_t v)
{
    const sy_node *n = sy_graph_node(c->g, node);
    for (uint32_t j = 0; j < n->n_inputs; j++)
        if (c->value_of[n->inputs[j]->id] == v)
            return true;
    return false;
}

static bool needs_async_value(const sy_plan *p, const sy__plan_ctx *c, uint32_t lo, uint32_t o,
                              uint32_t dev, const uint8_t *sent_v, const uint8_t *sent_l)
{
    uint32_t i = p->order[o], k = c->dec_of[i];
    const sy_node *n = sy_graph_node(c->g, i);
    for (uint32_t j = 0; j < n->n_inputs; j++) {
        uint32_t v = c->value_of[n->inputs[j]->id], src;
        if (!input_unsent(c, k, v, dev, sent_v, sent_l, &src) ||
            !sy__plan_slot_has_events(c, src))
            continue;
        bool earlier = false; /* sent before the segment for a node ahead */
        for (uint32_t q = lo; q < o && !earlier; q++)
            earlier = reads_value(c, p->order[q], v);
        if (!earlier)
            return true;
    }
    return false;
}

static sy_status plan_steps(sy_plan *p, const sy__plan_ctx *c)
{
    uint32_t n = 0, cap = 0;
    for (uint32_t i = 0; i < c->n_nodes; i++)
        if (c->dec_of[i] != SY__NONE)
            p->order[n++] = i;
    p->n_order = n;
    sy_status ost = sy__plan_issue_order(c, p, p->order, n);
    if (ost == SY_E_NO_MEMORY)
        return ost;
    uint8_t *sent_v = calloc((size_t)c->n_dec + 1, 1);
    uint8_t *sent_l = calloc((size_t)c->n_tensors + 1, 1);
    sy_status st = sent_v && sent_l ? SY_OK : SY_E_NO_MEMORY;
    for (uint32_t lo = 0; st == SY_OK && lo < n;) {
        uint32_t dev = p->nodes[p->order[lo]].dev, hi = lo + 1;
        while (hi < n && p->nodes[p->order[hi]].dev == dev &&
               !needs_async_value(p, c, lo, hi, dev, sent_v, sent_l))
            hi++;
        st = plan_transfers(p, c, lo, hi, dev, sent_v, sent_l, &cap);
        if (st != SY_OK)
            break;
        sy__plan_step s;
        memset(&s, 0, sizeof s);
        s.kind = SY_PLAN_STEP_SEGMENT;
        s.dev = (uint8_t)dev;
        s.first = lo;
        s.count = hi - lo;
        s.value_node = SY__NONE;
        for (uint32_t o = lo; o < hi; o++) {
            s.predicted_s += p->nodes[p->order[o]].predicted_s;
            s.predicted_j += p->nodes[p->order[o]].predicted_j;
        }
        /* Node costs are shares of a step; each launch waited for pays the
         * device's launch_sync_s once on top (docs/profiles.md). */
        s.predicted_s += c->dm[dev].segment_s;
        p->compute_s += c->dm[dev].segment_s;
        p->n_segments++;
        st = push_step(p, &cap, &s);
        lo = hi;
    }
    free(sent_v);
    free(sent_l);
    return st;
}

sy_status sy__plan_build(sy__plan_ctx *c, sy_plan **out_plan)
{
    *out_plan = NULL;
    sy_plan *p = calloc(1, sizeof *p);
    if (!p)
        return sy__planner_fail(c->pl, SY_E_NO_MEMORY, "out of memory making the plan");
    p->refs = 1;
    p->n_nodes = c->n_nodes;
    p->n_tensors = c->n_tensors;
    p->n_dev = c->D;
    for (uint32_t d = 0; d < c->D; d++) {
        p->dev_index[d] = c->dm[d].rt_index;
        memcpy(p->dev_name[d], c->dm[d].desc.name, SY_NAME_MAX);
        const sy__profile *pf = c->dm[d].profile;
        if (pf)
            snprintf(p->dev_profile[d], sizeof p->dev_profile[d], "%.180s (%.60s)", pf->origin,
                     pf->version);
    }
    p->nodes = calloc((size_t)c->n_nodes + 1, sizeof *p->nodes);
    p->order = malloc(((size_t)c->n_nodes + 1) * sizeof *p->order);
    p->leaf_home = malloc((size_t)c->n_tensors + 1);
    p->pins = calloc((size_t)c->req->n_pins + 1, sizeof *p->pins);
    sy_status st = p->nodes && p->order && p->leaf_home && p->pins ? SY_OK : SY_E_NO_MEMORY;
    for (uint32_t k = 0; st == SY_OK && k < c->req->n_pins; k++) {
        p->pins[k] = strdup(c->req->pins[k].text);
        st = p->pins[k] ? SY_OK : SY_E_NO_MEMORY;
        p->n_pins += st == SY_OK;
    }
    if (st == SY_OK)
        st = plan_nodes(p, c);
    if (st == SY_OK)
        st = plan_steps(p, c);
    if (st != SY_OK) {
        sy_plan_release(p);
        return sy__planner_fail(c->pl, st, "out of memory making the plan");
    }
    memcpy(p->leaf_home, c->leaf_home, c->n_tensors);
    sy__ctx_memory(c, p->mem);
    /* Activations as the executor holds them: in arenas, reused by lifetime. */
    uint8_t alias_to[SY__MAX_PLAN_DEVICES];
    sy__memplan_alias_masks(c->rt, p, alias_to);
    sy__memplan mp;
    char err[256];
    st = sy__memplan_build(c->g, p, alias_to, SY__MEMPLAN_ALIGN, &mp, err, sizeof err);
    if (st != SY_OK) {
        sy_plan_release(p);
        return sy__planner_fail(c->pl, st, "memory plan: %s", err);
    }
    for (uint32_t d = 0; d < c->D; d++)
        p->mem[d].activation_bytes = mp.arena[d];
    sy__memplan_free(&mp);
    p->predicted_s = sy__plan_makespan(c, p);
    p->predicted_j = p->compute_j + p->transfer_j;
    p->energy_measured = true;
    for (uint32_t d = 0; d < c->D; d++)
        p->energy_measured = p->energy_measured && c->dm[d].power_measured;
    snprintf(p->algorithm, sizeof p->algorithm, "%s", c->algorithm);
    snprintf(p->policy, sizeof p->policy, "%s", c->req->policy_text);
    p->planning_s = sy__now() - c->t_start;
    *out_plan = p;
    return SY_OK;
}

bool sy__plan_same_run(const sy_plan *a, const sy_plan *b)
{
    if (a == b)
        return true;
    if (!a || !b || a->n_nodes != b->n_nodes || a->n_tensors != b->n_tensors ||
        a->n_dev != b->n_dev || a->n_order != b->n_order || a->n_steps != b->n_steps ||
        memcmp(a->dev_index, b->dev_index, a->n_dev * sizeof *a->dev_index) != 0 ||
        memcmp(a->order, b->order, a->n_order * sizeof *a->order) != 0 ||
        (a->leaf_home == NULL) != (b->leaf_home == NULL) ||
        (a->leaf_home && memcmp(a->leaf_home, b->leaf_home, a->n_tensors) != 0))
        return false;
    for (uint32_t i = 0; i < a->n_nodes; i++)
        if (a->nodes[i].dev != b->nodes[i].dev || a->nodes[i].op != b->nodes[i].op)
            return false;
    for (uint32_t k = 0; k < a->n_steps; k++) {
        const sy__plan_step *x = &a->steps[k], *y = &b->steps[k];
        if (x->kind != y->kind || x->dev != y->dev || x->src != y->src ||
            x->zero_copy != y->zero_copy || x->first != y->first || x->count != y->count ||
            x->tensor != y->tensor || x->value_node != y->value_node || x->offset != y->offset ||
            x->bytes != y->bytes)
            return false;
    }
    return true;
}

void sy_plan_retain(sy_plan *plan)
{
    if (plan)
        plan->refs++;
}

void sy_plan_release(sy_plan *plan)
{
    if (!plan || --plan->refs > 0)
        return;
    for (uint32_t k = 0; k < plan->n_pins; k++)
        free(plan->pins[k]);
    free(plan->pins);
    free(plan->nodes);
    free(plan->order);
    free(plan->steps);
    free(plan->leaf_home);
    free(plan->pool);
    free(plan);
}

sy_status sy_plan_query_summary(const sy_plan *plan, sy_plan_summary *out_summary)
{
    if (!out_summary)
        return SY_E_INVALID_ARG;
    memset(out_summary, 0, sizeof *out_summary);
    if (!plan)
        return SY_E_INVALID_ARG;
    sy_plan_summary *s = out_summary;
    s->predicted_s = plan->predicted_s;
    s->compute_s = plan->compute_s;
    s->transfer_s = plan->transfer_s;
    s->transfer_bytes = plan->transfer_bytes;
    s->n_nodes = plan->n_nodes;
    s->n_segments = plan->n_segments;
    s->n_transfers = plan->n_transfers;
    s->n_devices = plan->n_dev;
    s->n_unmeasured = plan->n_unmeasured;
    s->planning_s = plan->planning_s;
    s->algorithm = plan->algorithm;
    s->policy = plan->policy;
    s->predicted_j = plan->predicted_j;
    s->compute_j = plan->compute_j;
    s->transfer_j = plan->transfer_j;
    s->energy_measured = plan->energy_measured;
    return SY_OK;
}

sy_status sy_plan_query_node(const sy_plan *plan, uint32_t node, sy_plan_node_info *out_info)
{
    if (!out_info)
        return SY_E_INVALID_ARG;
    memset(out_info, 0, sizeof *out_info);
    if (!plan)
        return SY_E_INVALID_ARG;
    if (node >= plan->n_nodes)
        return SY_E_NOT_FOUND;
    const sy__plan_node *pn = &plan->nodes[node];
    out_info->device = plan->dev_index[pn->dev];
    out_info->device_name = plan->dev_name[pn->dev];
    out_info->predicted_s = pn->predicted_s;
    out_info->predicted_j = pn->predicted_j;
    out_info->is_view = (pn->flags & SY__PN_VIEW) != 0;
    out_info->unmeasured = (pn->flags & SY__PN_UNMEASURED) != 0;
    sy__plan_format_reason(plan, node, out_info->reason, sizeof out_info->reason);
    return SY_OK;
}

uint32_t sy_plan_step_count(const sy_plan *plan)
{
    return plan ? plan->n_steps : 0;
}

sy_status sy_plan_query_step(const sy_plan *plan, uint32_t i, sy_plan_step_info *out_info)
{
    if (!out_info)
        return SY_E_INVALID_ARG;
    memset(out_info, 0, sizeof *out_info);
    if (!plan)
        return SY_E_INVALID_ARG;
    if (i >= plan->n_steps)
        return SY_E_NOT_FOUND;
    const sy__plan_step *s = &plan->steps[i];
    out_info->kind = (sy_plan_step_kind)s->kind;
    out_info->device = plan->dev_index[s->dev];
    out_info->predicted_s = s->predicted_s;
    out_info->predicted_j = s->predicted_j;
    if (s->kind == SY_PLAN_STEP_SEGMENT) {
        out_info->n_nodes = s->count;
        out_info->nodes = &plan->order[s->first];
        return SY_OK;
    }
    out_info->src_device = plan->dev_index[s->src];
    out_info->tensor = s->tensor;
    out_info->tensor_name = s->tensor_name;
    out_info->bytes = s->bytes;
    out_info->zero_copy = s->zero_copy;
    return SY_OK;
}

sy_status sy_plan_query_memory(const sy_plan *plan, uint32_t device, sy_plan_memory *out_memory)
{
    if (!out_memory)
        return SY_E_INVALID_ARG;
    memset(out_memory, 0, sizeof *out_memory);
    if (!plan)
        return SY_E_INVALID_ARG;
    for (uint32_t d = 0; d < plan->n_dev; d++)
        if (plan->dev_index[d] == device)
            *out_memory = plan->mem[d];
    return SY_OK;
}
