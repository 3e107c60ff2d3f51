/* Running a session's step through the scheduler, re-planning when a
 * device fails at run time (docs/scheduler.md, "Device failures").
 * Internal to libswitchyard. */
#ifndef SY_LLM_SESSION_REPLAN_H
#define SY_LLM_SESSION_REPLAN_H

#include <stddef.h>
#include <stdint.h>

#include "switchyard/switchyard.h"

/* Re-plans one step may take before its failure is returned: every one
 * takes a (node, device) pair, an op or a whole device off the table, so
 * the bound only caps the time spent on a device that fails everything. */
#define SY__MAX_REPLANS_PER_STEP 32u

typedef struct sy__failure_rec {
    char device[SY_NAME_MAX];
    char node[SY_NAME_MAX];         /* "" when no single node was to blame */
    char excluded[SY_NAME_MAX * 2]; /* the pattern taken off the device */
    char text[512];
    sy_status status;
    uint32_t op; /* sy_op of the node, SY_OP_NONE without one */
    uint32_t position;
} sy__failure_rec;

/* A session's device failures so far. */
typedef struct sy__replan {
    sy__failure_rec *recs;
    uint32_t n, cap;
} sy__replan;

/* Plans |g| with |pl| and |opts| and runs it with |x| (NULL: a one-shot
 * executor, sy_runtime_execute_plan) on |rt|.  When the run fails
 * on a device (sy_runtime_query_device_failure), logs a warning, records
 * the failure, marks the pair unsupported in |pl| (the node by name; its
 * op once the op failed there before; the device for every node when no
 * node was to blame) and plans and runs the step again.  |position| names
 * the step in messages.  Errors are written to |err|.
 * |inout_plan| (optional): a plan of |pl| for |g| made since the last
 * failure recorded in |rp| (the caller checks both), run without asking
 * the planner; on return it holds a reference to the plan the step ran
 * with, or NULL.  The caller owns that reference. */
sy_status sy__replan_run_step(sy__replan *rp, sy_runtime *rt, sy_planner *pl, sy_executor *x,
                              const sy_plan_options *opts, sy_graph *g, uint32_t position,
                              sy_plan **inout_plan, char *err, size_t err_size);

void sy__replan_deinit(sy__replan *rp);

/* Fills |out| with failure |i| of |rp|; strings are owned by |rp|. */
sy_status sy__replan_query(const sy__replan *rp, uint32_t i, sy_session_failure *out);

#endif
