/* The issue order of a plan's steps and the step time it predicts with
 * devices that run work asynchronously (plan_order.c).  Internal to
 * scheduler/. */
#ifndef SY_SCHEDULER_PLAN_ORDER_H
#define SY_SCHEDULER_PLAN_ORDER_H

#include "plan_internal.h"

/* True when plan slot |slot|'s device has events (runs work asynchronously). */
bool sy__plan_slot_has_events(const sy__plan_ctx *c, uint32_t slot);
/* Reorders |order| (|n| graph nodes in graph order, devices in p->nodes)
 * so that work on devices with events is issued as soon as its inputs
 * are; unchanged without such a device. */
sy_status sy__plan_issue_order(const sy__plan_ctx *c, const sy_plan *p, uint32_t *order,
                               uint32_t n);
/* Predicted step time of |p|'s steps run as the executor runs them: work
 * on devices with events overlaps with what the host issues next. */
double sy__plan_makespan(const sy__plan_ctx *c, const sy_plan *p);

#endif
