/* The placement problem the scheduler's algorithms solve, stripped of
 * graphs and devices: decision nodes in topological order, a time per
 * (node, device), and a transfer cost per (value, source, destination).
 * The planner builds one from a graph (planner_build.c); the tests fill
 * one with random numbers and compare the algorithms with the oracle.
 *
 * Objective: the predicted time of one step when the plan's steps run one
 * after another (as sy_runtime_execute_plan() runs them):
 *
 *   sum over nodes n of cost[n][dev(n)]
 * + sum over (value p, destination d != dev(p)) read there of xfer[p][dev(p)][d]
 *
 * A value moves to a device once however many nodes read it there, and
 * every move includes the synchronisation of a device switch, so the sum
 * does not depend on the order the nodes run in.
 *
 * With devices that have events the executor overlaps independent work,
 * and the step time is the makespan of sy__makespan_eval(); HEFT
 * (sy__sched_heft) and its oracle minimise that. */
#ifndef SY_SCHEDULER_SCHED_PROBLEM_H
#define SY_SCHEDULER_SCHED_PROBLEM_H

#include <stdbool.h>
#include <stdint.h>

#include "switchyard/status.h"

/* Devices one problem may have: the DP packs a device number and a device
 * mask per live value into 64 bits. */
#define SY__SCHED_MAX_DEVICES 8u

/* The exhaustive oracle refuses problems past this many nodes. */
#define SY__SCHED_EXHAUSTIVE_MAX 16u

typedef struct sy__sched_problem {
    uint32_t n;         /* decision nodes, in topological order */
    uint32_t n_dev;     /* 1..SY__SCHED_MAX_DEVICES */
    double *cost;       /* n * n_dev: seconds; INFINITY where the node may not run */
    double *xfer;       /* n * n_dev * n_dev: moving node p's value from s to d */
    uint32_t *in_start; /* n + 1 offsets into in_list */
    uint32_t *in_list;  /* distinct producers of each node, each < the node */
} sy__sched_problem;

static inline double sy__sched_cost(const sy__sched_problem *pb, uint32_t n, uint32_t d)
{
    return pb->cost[(uint64_t)n * pb->n_dev + d];
}

static inline double sy__sched_xfer(const sy__sched_problem *pb, uint32_t p, uint32_t s, uint32_t d)
{
    return pb->xfer[((uint64_t)p * pb->n_dev + s) * pb->n_dev + d];
}

/* Allocates the arrays of a problem of |n| nodes, |n_dev| devices and
 * |n_edges| input entries, all zero (in_start all 0).
 * Ownership: free with sy__sched_problem_deinit(). */
sy_status sy__sched_problem_init(sy__sched_problem *pb, uint32_t n, uint32_t n_dev,
                                 uint32_t n_edges);
void sy__sched_problem_deinit(sy__sched_problem *pb);

/* Returns the objective of |assign| (n device numbers), INFINITY when a
 * node sits where it may not run. */
double sy__sched_evaluate(const sy__sched_problem *pb, const uint8_t *assign);

/* Best plan that keeps every node on one device where it may run there,
 * and on its cheapest allowed device otherwise (the "single-device plan"
 * that every placement is compared with).  Fills |out_assign| (n) and
 * returns its objective; INFINITY when some node may run nowhere. */
double sy__sched_best_single(const sy__sched_problem *pb, uint8_t *out_assign);

typedef struct sy__dp_stats {
    uint32_t blocks;       /* pieces between single-value cuts */
    uint32_t classes;      /* distinct pieces actually solved */
    uint32_t max_frontier; /* live values at the widest point */
    uint32_t max_states;   /* DP states at the widest step */
} sy__dp_stats;

/* Exact dynamic programme over the topological order.  The state after
 * each node is the device and the set of devices holding a copy of every
 * value still to be read, so the result is optimal for any graph whose
 * frontier fits (chains, decoders, series-parallel pieces).  The order is
 * cut wherever a single fresh value is live; pieces with identical costs
 * and structure (the layers of a model) are solved once and chained by a
 * min-plus product, so planning cost grows with distinct layer classes,
 * not layers.  |reuse_classes| false solves every piece (tests).
 * SY_E_LIMIT when the frontier is too wide or states exceed the cap: the
 * graph is not chain-like, use the list scheduler.  |stats| may be NULL. */
sy_status sy__sched_dp(const sy__sched_problem *pb, bool reuse_classes, uint8_t *out_assign,
                       sy__dp_stats *stats);

/* Solved blocks kept between DP solves: a planner re-solves a problem
 * whose costs changed in a few places (leaf homes, memory evictions), and
 * a block whose costs and structure match one solved before reuses its
 * matrix (the same numbers, so the same placement).
 * Ownership: free with sy__dp_memo_destroy(). */
typedef struct sy__dp_memo sy__dp_memo;
sy_status sy__dp_memo_create(sy__dp_memo **out_memo);
void sy__dp_memo_destroy(sy__dp_memo *memo);

/* sy__sched_dp() looking blocks up in, and adding them to, |memo| (may be
 * NULL: a memo for this call only).  |stats| counts the classes this
 * solve used, solved now or found in the memo. */
sy_status sy__sched_dp_memo(const sy__sched_problem *pb, bool reuse_classes, sy__dp_memo *memo,
                            uint8_t *out_assign, sy__dp_stats *stats);

/* List scheduling for general DAGs: nodes in HEFT order (decreasing upward
 * rank over mean costs), each put on the device that finishes it earliest
 * given its placed producers, then improved by local search
 * (sy__sched_local_search); restarted from every single-device plan and
 * the best result kept, so it is never worse than the best single-device
 * plan; on graphs of up to 256 nodes, then kicked (a few nodes moved at
 * random) and descended again, the best kept. */
sy_status sy__sched_list(const sy__sched_problem *pb, uint8_t *out_assign);

/* Branch and bound over every placement: the optimum, for tests.
 * SY_E_LIMIT past SY__SCHED_EXHAUSTIVE_MAX nodes. */
sy_status sy__sched_exhaustive(const sy__sched_problem *pb, uint8_t *out_assign);

/* Improves |assign| in place until no move helps: single nodes; a
 * producer and a consumer, each to any device; two readers of one value to
 * one device; a node with all its consumers or all its producers.
 * Returns the new objective. */
double sy__sched_local_search(const sy__sched_problem *pb, uint8_t *assign);

/* ------------------------------------------------ overlapped makespan */

/* Arrays sy__makespan_eval() reuses from call to call. */
typedef struct sy__makespan_ws {
    const sy__sched_problem *pb;
    uint32_t async;                 /* bit d: device d has events */
    uint32_t *out_start, *out_list; /* consumers of each node */
    uint32_t *npred, *heap, *order, *stamp;
    double *done;
    uint8_t *sent;
} sy__makespan_ws;

/* Prepares a workspace for |pb| (borrowed: must outlive it) with the
 * devices in |async_mask| running asynchronously (they have events).
 * Ownership: free with sy__makespan_ws_deinit(). */
sy_status sy__makespan_ws_init(sy__makespan_ws *ws, const sy__sched_problem *pb,
                               uint32_t async_mask);
void sy__makespan_ws_deinit(sy__makespan_ws *ws);

/* Returns the step time of |assign| as plan_order.c predicts it for a
 * built plan: issued in its order, in segments with their transfers,
 * work on devices with events overlapping what the host issues next.
 * With no device with events it equals sy__sched_evaluate().  INFINITY
 * when a node sits where it may not run. */
double sy__makespan_eval(sy__makespan_ws *ws, const uint8_t *assign);
/* sy__makespan_eval() with a workspace for this call only. */
double sy__sched_makespan(const sy__sched_problem *pb, uint32_t async_mask, const uint8_t *assign);

/* True when two nodes of |pb| are unordered (the graph has independent
 * branches that could overlap). */
bool sy__sched_has_branches(const sy__sched_problem *pb);

/* HEFT with insertion for the overlapped step time (placement_heft.c),
 * then the best of its plan, |hint| (n devices, may be NULL: the DP's
 * plan) and the single-device plans by sy__makespan_eval(), improved by
 * single-node moves on small problems; on a problem with at most 4096
 * plans, sy__sched_exhaustive_makespan's optimum.  Never worse than any
 * of them.
 * |out_makespan| (may be NULL) receives its makespan. */
sy_status sy__sched_heft(const sy__sched_problem *pb, uint32_t async_mask, const uint8_t *hint,
                         uint8_t *out_assign, double *out_makespan);

/* Branch and bound over every placement for the least
 * sy__makespan_eval(): the optimum, for tests and for sy__sched_heft on
 * problems with few plans.  SY_E_LIMIT past SY__SCHED_EXHAUSTIVE_MAX
 * nodes. */
sy_status sy__sched_exhaustive_makespan(const sy__sched_problem *pb, uint32_t async_mask,
                                        uint8_t *out_assign);

#endif
