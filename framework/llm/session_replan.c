/* A session step through the scheduler, and what happens when a device
 * fails while running it: the failure is logged and kept (never
 * swallowed), the (node, device) pair it failed on is marked unsupported
 * in the session's planner, and the step is planned and run again.
 *
 * Re-running a step is safe: a step writes its KV rows at its own
 * positions and reads only positions before them or its own, so a second
 * run computes and writes the same values as a run that had not failed. */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "session_replan.h"

void sy__replan_deinit(sy__replan *rp)
{
    free(rp->recs);
    memset(rp, 0, sizeof *rp);
}

/* Earlier failures of |op| on |device|. */
static uint32_t op_failures(const sy__replan *rp, const char *device, uint32_t op)
{
    uint32_t n = 0;
    for (uint32_t i = 0; i < rp->n; i++)
        n += rp->recs[i].op == op && strcmp(rp->recs[i].device, device) == 0;
    return n;
}

/* Records failure |f| of a run of |g| and takes the pair off |pl|. */
static sy_status replan_exclude(sy__replan *rp, sy_runtime *rt, sy_planner *pl, const sy_graph *g,
                                const sy_device_failure *f, uint32_t position, char *err,
                                size_t err_size)
{
    if (rp->n == rp->cap) {
        uint32_t cap = rp->cap ? rp->cap * 2 : 8;
        sy__failure_rec *grown = realloc(rp->recs, cap * sizeof *grown);
        if (!grown) {
            snprintf(err, err_size, "out of memory recording a device failure: %s", f->text);
            return SY_E_NO_MEMORY;
        }
        rp->recs = grown;
        rp->cap = cap;
    }
    sy__failure_rec *r = &rp->recs[rp->n];
    memset(r, 0, sizeof *r);
    sy_device_desc desc;
    if (sy_runtime_query_device(rt, f->device, &desc) != SY_OK)
        snprintf(desc.name, sizeof desc.name, "device %u", f->device);
    snprintf(r->device, sizeof r->device, "%s", desc.name);
    const sy_node *node = f->node != UINT32_MAX ? sy_graph_node(g, f->node) : NULL;
    r->op = node ? node->op : SY_OP_NONE;
    r->status = f->status;
    r->position = position;
    snprintf(r->text, sizeof r->text, "%s", f->text);
    if (!node)
        snprintf(r->excluded, sizeof r->excluded, "*");
    else if (op_failures(rp, r->device, r->op) > 0)
        /* The same op failing on a second node: a kernel the device cannot
         * run, not one node's bad luck; saves a re-plan per layer. */
        snprintf(r->excluded, sizeof r->excluded, "%s", sy_op_name((sy_op)node->op));
    else
        snprintf(r->excluded, sizeof r->excluded, "%s", node->name);
    if (node)
        snprintf(r->node, sizeof r->node, "%s", node->name);
    sy_status st = sy_planner_exclude(pl, r->excluded, f->device, f->text);
    if (st != SY_OK) {
        snprintf(err, err_size, "after device '%s' failed (%s): %s", r->device, f->text,
                 sy_planner_last_error(pl));
        return st;
    }
    rp->n++;
    if (node)
        sy_runtime_log(rt, SY_LOG_WARN,
                       "device '%s' failed at position %u: %s; re-planning without %s on it",
                       r->device, position, f->text, r->excluded);
    else
        sy_runtime_log(rt, SY_LOG_WARN,
                       "device '%s' failed at position %u: %s; re-planning without the device",
                       r->device, position, f->text);
    return SY_OK;
}

sy_status sy__replan_run_step(sy__replan *rp, sy_runtime *rt, sy_planner *pl, sy_executor *x,
                              const sy_plan_options *opts, sy_graph *g, uint32_t position,
                              sy_plan **inout_plan, char *err, size_t err_size)
{
    sy_plan *plan = inout_plan ? *inout_plan : NULL;
    if (inout_plan)
        *inout_plan = NULL;
    for (uint32_t attempt = 0;; attempt++) {
        sy_status st = SY_OK;
        if (!plan)
            st = sy_planner_plan(pl, g, opts, &plan);
        if (st != SY_OK) {
            snprintf(err, err_size, "planning step at position %u: %s", position,
                     sy_planner_last_error(pl));
            return st;
        }
        st = x ? sy_executor_run(x, g, plan) : sy_runtime_execute_plan(rt, g, plan);
        if (st == SY_OK) {
            if (inout_plan)
                *inout_plan = plan;
            else
                sy_plan_release(plan);
            return SY_OK;
        }
        sy_plan_release(plan);
        plan = NULL;
        sy_device_failure f;
        if (attempt == SY__MAX_REPLANS_PER_STEP ||
            sy_runtime_query_device_failure(rt, &f) != SY_OK) {
            snprintf(err, err_size, "executing step at position %u: %s%s", position,
                     sy_runtime_last_error(rt),
                     attempt ? " (after re-planning around failed devices)" : "");
            return st;
        }
        st = replan_exclude(rp, rt, pl, g, &f, position, err, err_size);
        if (st != SY_OK)
            return st;
    }
}

sy_status sy__replan_query(const sy__replan *rp, uint32_t i, sy_session_failure *out)
{
    memset(out, 0, sizeof *out);
    if (i >= rp->n)
        return SY_E_NOT_FOUND;
    const sy__failure_rec *r = &rp->recs[i];
    out->device = r->device;
    out->node = r->node;
    out->excluded = r->excluded;
    out->status = r->status;
    out->text = r->text;
    out->position = r->position;
    return SY_OK;
}
