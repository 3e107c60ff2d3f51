/* Internals shared by the multi-device executor's files: executor_plan.c
 * (storage: arenas, leaves, copy-back, the public calls), executor_kept.c
 * (weights kept between runs) and executor_flow.c (running the plan's
 * steps: segments, transfers, events between devices).  Internal to
 * framework/runtime. */
#ifndef SY_EXECUTOR_INTERNAL_H
#define SY_EXECUTOR_INTERNAL_H

#include "executor_state.h"
#include "graph_internal.h"
#include "memplan.h"
#include "plan_internal.h"
#include "runtime_internal.h"

/* Arena layouts an executor keeps: a session uses one per prefill chunk
 * length and one per decode shape class. */
#define XP_LAYOUTS 8u

enum {
    XP_PRIVATE = 1u << 0,   /* this run's own buffer, freed after it */
    XP_WRAPPED = 1u << 1,   /* wraps host memory: no device bytes of its own */
    XP_FROM_HOST = 1u << 2, /* wraps the tensor's own host data */
    XP_STATE = 1u << 3      /* a KV cache kept on the device (executor_state.c) */
};

/* Where a root tensor's bytes are on one device slot during a run. */
typedef struct xp_bind {
    void *buf;    /* plugin buffer, NULL when none */
    uint64_t off; /* byte 0 of the root in |buf| */
    char *host;   /* host address of byte 0, or NULL when not mapped */
    uint8_t flags;
} xp_bind;

/* A weight kept on a device between runs. */
typedef struct xp_kept {
    const void *host;
    uint64_t size;
    uint32_t dev; /* runtime device index */
    bool imported;
    void *buf;
} xp_kept;

typedef struct xp_device {
    void *arena;
    uint64_t arena_size;
    char *arena_host;
    uint64_t now, peak, weights; /* bytes held: all, most at once, kept weights */
    uint64_t moved;              /* bytes copied to or from it by the plugin's copies */
} xp_device;

typedef struct xp_layout {
    sy_plan *plan; /* a reference, so the pointer stays this plan's */
    uint64_t sig;
    uint64_t last_use;
    sy__memplan mp;
} xp_layout;

struct sy_executor {
    sy_runtime *rt;
    uint32_t n_dev; /* the runtime's devices */
    xp_device *dev;
    xp_kept *kept;
    uint32_t n_kept, cap_kept;
    uint32_t *kept_index; /* open addressing over kept[], SY__NONE empty */
    uint32_t index_cap;   /* power of two */
    xp_layout layouts[XP_LAYOUTS];
    uint64_t tick;
    sy__xstate state; /* KV caches kept on devices (sy_executor_keep_state) */
    /* scratch of one run, kept to spare the allocations */
    xp_bind *bind;
    uint8_t *writer;
    sy_node **nodes;
    size_t cap_bind, cap_writer, cap_nodes;
    /* per-node timing (sy_executor_set_node_timing): the last run's */
    bool time_nodes;
    double *node_s;     /* per graph node, 0 for views and nodes not run */
    uint32_t *node_dev; /* runtime device index */
    uint32_t n_timed;   /* nodes of the last timed run's graph */
    size_t cap_node_s, cap_node_dev;
    sy_step_stats stats; /* what the runs did (sy_executor_query_stats) */
    struct xp_flow *flow; /* scratch of the step runner (executor_flow.c) */
    struct xp_replay *replay; /* the last single-segment run, kept (executor_replay.c) */
};

/* One run of a graph. */
typedef struct xp_run {
    sy_executor *x;
    sy_runtime *rt;
    sy_graph *g;
    const sy_plan *plan;
    const sy__memplan *mp;
    uint32_t n_tensors, D;
    const sy__device *dev[SY__MAX_PLAN_DEVICES];
    xp_device *ds[SY__MAX_PLAN_DEVICES];
    /* the graph's nodes updated since this plan's last run, when the check
     * memo held (memo_held); else every node is as good as updated */
    const uint32_t *dirty;
    uint32_t n_dirty;
    bool memo_held;
    struct xp_replay *rec; /* this run is being recorded for replay */
} xp_run;

static inline xp_bind *sy__xp_at(xp_run *r, uint32_t t, uint32_t d)
{
    return &r->x->bind[(size_t)t * r->D + d];
}

/* executor_plan.c */
/* Host address of |buffer|'s byte 0 on |dev|, or NULL when not mapped. */
void *sy__xp_host_ptr(const sy__device *dev, void *buffer);

/* Grows |*p| (elements of |elem|, |*cap| of them) to hold |need|; false
 * when out of memory, leaving |*p| as it was. */
bool sy__xp_grow(void **p, size_t *cap, size_t need, size_t elem);

/* Sets the error of |what| failing for tensor |name| on slot |d|, notes
 * the device failure, and returns |st|. */
sy_status sy__xp_fail(xp_run *r, sy_status st, uint32_t d, const char *what, const char *name,
                      uint64_t bytes);
/* Allocates |size| bytes on runtime device |di|, counting them. */
sy_status sy__xp_dev_alloc(sy_executor *x, uint32_t di, uint64_t size, void **out);
/* Frees |buf| (of |size| counted bytes) on runtime device |di|; NULL is a no-op. */
void sy__xp_dev_free(sy_executor *x, uint32_t di, void *buf, uint64_t size);
/* Counts |size| bytes copied to or from runtime device |di|. */
void sy__xp_moved(sy_executor *x, uint32_t di, uint64_t size);
/* Gives root |t| a buffer of its own on slot |d| for this run. */
sy_status sy__xp_private(xp_run *r, const sy_tensor *t, uint32_t d);
/* Wraps host memory |host| holding root |t| on slot |d| for this run;
 * false when the device cannot. */
bool sy__xp_wrap(xp_run *r, const sy_tensor *t, uint32_t d, char *host, uint8_t flags);

/* executor_kept.c */
/* Binds weight |t| on slot |d| to its kept copy there, wrapping or
 * uploading it the first time; SY_E_UNSUPPORTED when |t| is not a weight
 * that can be kept (the caller then handles it per run). */
sy_status sy__xp_keep_weight(xp_run *r, const sy_tensor *t, uint32_t d);

/* executor_replay.c: a run of the same graph and plan again, when only
 * parameters changed, from the nodes and tensors the last run bound.
 * sy__xp_replay_run: true when it ran the step (*out_st its status); false
 * when the full run must (nothing of this step is lost: a replay that
 * failed on its device is run again in full, which narrows the failure). */
bool sy__xp_replay_run(xp_run *r, sy_status *out_st);
/* Before a full run's steps: starts recording it when it may be replayed. */
void sy__xp_replay_begin(xp_run *r);
/* A copy back to host data the recorded run made. */
void sy__xp_replay_copy(xp_run *r, uint32_t tensor, void *buf, uint64_t off, void *host,
                        uint64_t size);
/* After a recorded run's copies back, before its buffers are released:
 * keeps what a replay needs (and the wrapped buffers it binds), or drops
 * the recording when the run failed (|ran| false) or cannot be replayed. */
void sy__xp_replay_keep(xp_run *r, bool ran);
/* Forgets the kept run and frees the buffers it holds (its arrays stay
 * for the next recording). */
void sy__xp_replay_drop(sy_executor *x);
/* Drops the kept run and frees everything (the executor's destruction). */
void sy__xp_replay_free(sy_executor *x);

/* executor_flow.c */
/* Runs the plan's steps: each segment is launched without waiting; a
 * transfer, or a write over bytes another device may still read, waits
 * for just the work it needs (the producer's event, or synchronize() on a
 * device without events); every device that ran is synchronized at the
 * end, errors or not, so nothing is in flight when the run's buffers go.
 * A failure is named with its device and, where it can be found by
 * running the device's unconfirmed nodes one at a time, its node. */
sy_status sy__xp_run_steps(xp_run *r);
/* Frees the executor's scratch of the step runner. */
void sy__xp_flow_free(sy_executor *x);

#endif
