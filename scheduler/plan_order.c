/* The order a plan's steps are issued in, and the step time that order
 * predicts when devices with events (ABI 1.1) run their work while the
 * host goes on issuing.
 *
 * Order.  The executor issues steps in plan order and waits only where a
 * step needs another device's result, so independent work overlaps only if
 * the asynchronous device's work is issued first: a synchronous device
 * (the cpu plugin runs on the issuing thread) holds the host until its
 * segment is done.  The order is therefore a list schedule over the graph:
 * of the nodes whose inputs are issued, the next is one on the device of
 * the last (fewer, longer segments) unless that device is synchronous and
 * a device with events has work ready; else the earliest in graph order
 * among the devices with events, else among the others.  On a chain, or
 * with no device with events, that is the graph's own order.  Nodes touching a leaf that some
 * node writes (a KV cache) keep their graph order among themselves.
 *
 * Makespan.  Steps are simulated as the executor runs them: a segment on a
 * device with events starts when the host issues it and the device is
 * free, and holds neither; a segment on another device, and every
 * transfer, holds the host (a transfer first waits for the segment that
 * made its value).  The step time is when the last device is done; on a
 * plan without independent branches on asynchronous devices it is compute
 * plus transfers, as before. */
#include <stdlib.h>
#include <string.h>

#include "plan_order.h"
#include "runtime_internal.h"

bool sy__plan_slot_has_events(const sy__plan_ctx *c, uint32_t slot)
{
    const sy__device *dev = &c->rt->devices[c->dm[slot].rt_index];
    return sy__device_has_events(dev);
}

/* A binary min-heap of decision indices (graph order: decisions are made
 * in graph order, so a smaller index is earlier). */
typedef struct po_heap {
    uint32_t *v;
    uint32_t n;
} po_heap;

static void heap_push(po_heap *h, uint32_t x)
{
    uint32_t i = h->n++;
    while (i > 0 && h->v[(i - 1) / 2] > x) {
        h->v[i] = h->v[(i - 1) / 2];
        i = (i - 1) / 2;
    }
    h->v[i] = x;
}

static uint32_t heap_pop(po_heap *h)
{
    uint32_t top = h->v[0], x = h->v[--h->n], i = 0;
    for (;;) {
        uint32_t l = 2 * i + 1, m = l + 1, s = i;
        uint32_t best = x;
        if (l < h->n && h->v[l] < best) {
            s = l;
            best = h->v[l];
        }
        if (m < h->n && h->v[m] < best)
            s = m;
        if (s == i)
            break;
        h->v[i] = h->v[s];
        i = s;
    }
    if (h->n)
        h->v[i] = x;
    return top;
}

/* Root tensor id of |t|. */
static uint32_t root_id(const sy_tensor *t)
{
    return t->view_src ? t->view_src->id : t->id;
}

sy_status sy__plan_issue_order(const sy__plan_ctx *c, const sy_plan *p, uint32_t *order,
                               uint32_t n)
{
    bool any_async = false;
    uint8_t async[SY__MAX_PLAN_DEVICES] = {0};
    for (uint32_t d = 0; d < c->D; d++)
        any_async |= (async[d] = sy__plan_slot_has_events(c, d)) != 0;
    if (!any_async || c->D < 2 || n < 2)
        return SY_OK;
    /* Edges: producer decision -> consumer decision, as (from, to) pairs,
     * then CSR by |from|.  At most SY_MAX_INPUTS + 1 edges per decision. */
    const uint32_t per = SY_MAX_INPUTS + 2;
    uint32_t *from = malloc(sizeof *from * (size_t)n * per);
    uint32_t *to = malloc(sizeof *to * (size_t)n * per);
    uint32_t *npred = calloc(n, sizeof *npred);
    uint32_t *start = calloc((size_t)n + 1, sizeof *start);
    uint32_t *succ = malloc(sizeof *succ * (size_t)n * per);
    uint32_t *last_touch = malloc(sizeof *last_touch * ((size_t)c->n_tensors + 1));
    uint32_t *dec_of_order = malloc(sizeof *dec_of_order * n);
    po_heap heap[SY__MAX_PLAN_DEVICES] = {{0}};
    bool heaps_ok = true;
    for (uint32_t d = 0; d < c->D; d++)
        heaps_ok &= (heap[d].v = malloc(sizeof(uint32_t) * n)) != NULL;
    sy_status st = SY_OK;
    if (!from || !to || !npred || !start || !succ || !last_touch || !dec_of_order ||
        !heaps_ok) {
        st = SY_E_NO_MEMORY;
        goto out_free;
    }
    memset(last_touch, 0xff, sizeof *last_touch * ((size_t)c->n_tensors + 1));
    uint32_t ne = 0;
    for (uint32_t o = 0; o < n; o++) {
        const uint32_t k = c->dec_of[order[o]];
        dec_of_order[o] = k;
        const sy_node *node = sy_graph_node(c->g, order[o]);
        for (uint32_t j = 0; j <= node->n_inputs; j++) {
            const sy_tensor *t = j < node->n_inputs ? node->inputs[j] : node->output;
            uint32_t pred = SY__NONE;
            if (j < node->n_inputs) {
                const uint32_t v = c->value_of[t->id];
                if (!(v & SY__LEAF_BIT))
                    pred = v;
            }
            const uint32_t r = root_id(t);
            if (!sy_graph_producer(c->g, sy_graph_tensor(c->g, r)) &&
                c->leaf_writer[r] != SY__NONE) {
                if (last_touch[r] != SY__NONE && last_touch[r] != k) {
                    from[ne] = last_touch[r];
                    to[ne++] = k;
                }
                last_touch[r] = k;
            }
            if (pred != SY__NONE && pred != k) {
                from[ne] = pred;
                to[ne++] = k;
            }
        }
    }
    /* Decision index -> position in |order|: decisions are in graph order
     * but views are not decisions, so map through a table. */
    uint32_t *pos = calloc((size_t)c->n_dec + 1, sizeof *pos);
    if (!pos) {
        st = SY_E_NO_MEMORY;
        goto out_free;
    }
    for (uint32_t o = 0; o < n; o++)
        pos[dec_of_order[o]] = o;
    for (uint32_t e = 0; e < ne; e++) {
        start[pos[from[e]] + 1]++;
        npred[pos[to[e]]]++;
    }
    for (uint32_t o = 0; o < n; o++)
        start[o + 1] += start[o];
    uint32_t *fill = calloc((size_t)n + 1, sizeof *fill);
    if (!fill) {
        free(pos);
        st = SY_E_NO_MEMORY;
        goto out_free;
    }
    for (uint32_t e = 0; e < ne; e++) {
        const uint32_t f = pos[from[e]];
        succ[start[f] + fill[f]++] = pos[to[e]];
    }
    free(fill);
    /* Kahn's algorithm over positions; the heaps hold positions, so the
     * smallest is the earliest in graph order. */
    uint32_t *graph_order = malloc(sizeof *graph_order * n);
    if (!graph_order) {
        free(pos);
        st = SY_E_NO_MEMORY;
        goto out_free;
    }
    memcpy(graph_order, order, sizeof *order * n);
    for (uint32_t o = 0; o < n; o++)
        if (npred[o] == 0)
            heap_push(&heap[p->nodes[graph_order[o]].dev], o);
    uint32_t out = 0, last = SY__NONE;
    for (;;) {
        /* Stay on the last device while it has ready work (fewer, longer
         * segments) unless it is synchronous and an asynchronous device
         * has work ready; else the asynchronous device whose ready work
         * comes first in graph order; else the synchronous one. */
        uint32_t pick = SY__NONE;
        bool async_ready = false;
        for (uint32_t d = 0; d < c->D; d++)
            async_ready |= async[d] && heap[d].n;
        if (last != SY__NONE && heap[last].n && (async[last] || !async_ready))
            pick = last;
        if (pick == SY__NONE) {
            for (uint32_t d = 0; d < c->D; d++) {
                if (!heap[d].n || (async_ready && !async[d]))
                    continue;
                if (pick == SY__NONE || heap[d].v[0] < heap[pick].v[0])
                    pick = d;
            }
        }
        if (pick == SY__NONE)
            break;
        const uint32_t o = heap_pop(&heap[pick]);
        last = pick;
        order[out++] = graph_order[o];
        for (uint32_t e = start[o]; e < start[o + 1]; e++) {
            const uint32_t s = succ[e];
            if (--npred[s] == 0)
                heap_push(&heap[p->nodes[graph_order[s]].dev], s);
        }
    }
    if (out != n) { /* a cycle cannot happen in a frozen graph; keep its order */
        memcpy(order, graph_order, sizeof *order * n);
        st = SY_E_INTERNAL;
    }
    free(graph_order);
    free(pos);
out_free:
    free(from);
    free(to);
    free(npred);
    free(start);
    free(succ);
    free(last_touch);
    free(dec_of_order);
    for (uint32_t d = 0; d < c->D; d++)
        free(heap[d].v);
    return st;
}

double sy__plan_makespan(const sy__plan_ctx *c, const sy_plan *p)
{
    double host = 0, free_at[SY__MAX_PLAN_DEVICES] = {0};
    uint8_t async[SY__MAX_PLAN_DEVICES] = {0};
    for (uint32_t d = 0; d < c->D; d++)
        async[d] = sy__plan_slot_has_events(c, d);
    /* When each node's segment ends: a transfer of its value waits for it. */
    double *done = calloc((size_t)c->n_nodes + 1, sizeof *done);
    if (!done)
        return p->compute_s + p->transfer_s;
    for (uint32_t k = 0; k < p->n_steps; k++) {
        const sy__plan_step *s = &p->steps[k];
        if (s->kind == SY_PLAN_STEP_TRANSFER) {
            double ready = s->value_node != SY__NONE ? done[s->value_node] : 0;
            host = (host > ready ? host : ready) + s->predicted_s;
            continue;
        }
        double begin = host > free_at[s->dev] ? host : free_at[s->dev];
        double end = begin + s->predicted_s;
        free_at[s->dev] = end;
        if (!async[s->dev])
            host = end;
        for (uint32_t o = s->first; o < s->first + s->count; o++)
            done[p->order[o]] = end;
    }
    double span = host;
    for (uint32_t d = 0; d < c->D; d++)
        span = free_at[d] > span ? free_at[d] : span;
    free(done);
    return span;
}
