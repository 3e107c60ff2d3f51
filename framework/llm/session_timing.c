/* Totals of per-node times over a session's steps (session_timing.h). */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "runtime_internal.h"
#include "session_timing.h"

/* "blk.12.ffn_down" -> "ffn_down": a layer's nodes share their names past
 * the prefix, and the totals are per kind of node, not per layer. */
static const char *timing_name(const char *name)
{
    if (strncmp(name, "blk.", 4) != 0)
        return name;
    const char *p = name + 4;
    while (*p >= '0' && *p <= '9')
        p++;
    return *p == '.' && p > name + 4 ? p + 1 : name;
}

static int timing_cmp(const void *a, const void *b)
{
    double x = ((const sy__timing_entry *)a)->seconds, y = ((const sy__timing_entry *)b)->seconds;
    return x > y ? -1 : x < y;
}

sy_status sy__timing_add(sy__timing *t, const sy_graph *g, const sy_executor *x)
{
    uint32_t nn = sy_graph_node_count(g);
    for (uint32_t i = 0; i < nn; i++) {
        const sy_node *n = sy_graph_node(g, i);
        double s = 0;
        uint32_t dev = 0;
        if (sy_op_is_view(n->op) || sy_executor_query_node_time(x, i, &s, &dev) != SY_OK)
            continue;
        const char *name = timing_name(n->name);
        uint32_t k = 0;
        while (k < t->n && (t->v[k].op != n->op || t->v[k].device != dev ||
                            strncmp(t->v[k].name, name, sizeof t->v[k].name - 1) != 0))
            k++;
        if (k == t->n) {
            if (t->n == t->cap) {
                uint32_t cap = t->cap ? t->cap * 2 : 32;
                sy__timing_entry *v = realloc(t->v, cap * sizeof *v);
                if (!v)
                    return SY_E_NO_MEMORY;
                t->v = v;
                t->cap = cap;
            }
            memset(&t->v[k], 0, sizeof t->v[k]);
            snprintf(t->v[k].name, sizeof t->v[k].name, "%s", name);
            t->v[k].op = n->op;
            t->v[k].device = dev;
            t->n++;
        }
        t->v[k].count++;
        t->v[k].seconds += s;
    }
    qsort(t->v, t->n, sizeof *t->v, timing_cmp);
    return SY_OK;
}

sy_status sy__timing_query(const sy__timing *t, const sy_runtime *rt, uint32_t i,
                           sy_node_timing *out)
{
    if (i >= t->n)
        return SY_E_NOT_FOUND;
    const sy__timing_entry *e = &t->v[i];
    out->name = e->name;
    out->op = sy_op_name((sy_op)e->op);
    out->device = e->device;
    /* The runtime's own copy: it lives as long as the runtime. */
    out->device_name = e->device < rt->device_count ? rt->devices[e->device].desc.name : "";
    out->count = e->count;
    out->seconds = e->seconds;
    return SY_OK;
}

void sy__timing_deinit(sy__timing *t)
{
    free(t->v);
    memset(t, 0, sizeof *t);
}
