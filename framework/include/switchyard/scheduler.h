/* Switchyard embedding API, scheduler and plans (scheduler/,
 * docs/scheduler.md); switchyard.h includes this header.  A planner decides which device runs each node of a frozen graph from
 * measured (or default) costs, a plan records those decisions with their
 * reasons, and sy_runtime_execute_plan() runs a graph by its plan. */
#ifndef SWITCHYARD_SCHEDULER_H
#define SWITCHYARD_SCHEDULER_H

#include <stdio.h> /* FILE for the explain functions */

#include "switchyard/switchyard.h"

#ifdef __cplusplus
extern "C" {
#endif

typedef struct sy_planner sy_planner;
typedef struct sy_plan sy_plan;

/* How the planner searches.  AUTO: the exact dynamic programme where the
 * graph is chain-like (a decoder is), else the list scheduler.
 * EXHAUSTIVE tries every placement and refuses graphs past 16 nodes. */
typedef enum sy_plan_algorithm {
    SY_PLAN_AUTO = 0,
    SY_PLAN_DP = 1,
    SY_PLAN_LIST = 2,
    SY_PLAN_EXHAUSTIVE = 3
} sy_plan_algorithm;

typedef struct sy_plan_options {
    uint32_t struct_size;     /* sizeof(sy_plan_options) */
    const char *devices;      /* comma list of device names to use; NULL: every device */
    const char *policy;       /* "latency" (NULL), "energy" (least predicted joules from the
                               * profiles' power figures, time breaking ties), "cpu-only"
                               * or "prefer:DEVICE" */
    const char *const *pins;  /* n_pins "GLOB=DEVICE": nodes whose name or op name
                               * matches GLOB (fnmatch) run on DEVICE; first match wins */
    uint32_t n_pins;
    const char *const *mem;   /* n_mem "DEVICE=SIZE" budgets; SIZE in bytes or with a
                               * K, M or G suffix (powers of 1024) */
    uint32_t n_mem;
    sy_plan_algorithm algorithm;
    bool no_cache;            /* plan afresh and leave the cache alone */
} sy_plan_options;

/* Fills |opts| with defaults: every device, latency policy, no pins, budgets
 * from the devices (reported memory minus a reserve), AUTO, cache on. */
void sy_plan_options_init(sy_plan_options *opts);

/* Creates a planner for the devices of |rt|: it holds the loaded profiles
 * and the plan cache.
 * Ownership: caller owns *out_planner; free with sy_planner_destroy().
 * Borrowed: |rt| must outlive the planner.
 * Thread-safety: a planner is used from one thread at a time. */
sy_status sy_planner_create(sy_runtime *rt, sy_planner **out_planner);

/* Destroys |pl| and drops its references to cached plans.  NULL is a no-op. */
void sy_planner_destroy(sy_planner *pl);

/* Returns detail for the last failed call on |pl|, or "".
 * Ownership: owned by |pl|, valid until the next call on |pl|. */
const char *sy_planner_last_error(const sy_planner *pl);

/* Loads the device profile at |path| (JSON, profiles/schema.json) and
 * applies it to the device it names; a later profile for the same device
 * replaces the earlier one.  Empties the plan cache.
 * SY_E_FORMAT names the file and the field on malformed input. */
sy_status sy_planner_load_profile(sy_planner *pl, const char *path);

/* Loads, for every device of the planner's runtime, the first profile
 * found along the profile search path, read when the runtime was created:
 * $SWITCHYARD_PROFILE_DIR (a ':' list), then $XDG_DATA_HOME/switchyard/
 * profiles (else ~/.local/share/switchyard/profiles), where `switchyard
 * tune` writes, then the shipped profiles (the source tree's profiles/
 * when running from the build tree, then the installed ones).  With the
 * runtime option no_default_paths only $SWITCHYARD_PROFILE_DIR is searched.
 * In each directory the device's file (named after it with ':' as '_':
 * cpu.json, opencl_0.json) is tried, then its plugin's (opencl.json) if
 * that describes this device.  A file that does not load is skipped with a warning
 * naming it and why, and the search goes on.  Sessions call this.
 * *out_loaded (may be NULL): devices that got a profile. */
sy_status sy_planner_load_default_profiles(sy_planner *pl, uint32_t *out_loaded);

/* Marks the nodes whose name or op name matches |pattern| (fnmatch, as
 * pins: "blk.3.attn_q", "rope", "*") unsupported on runtime device
 * |device| for every later plan of |pl|; plans quote |reason| (may be
 * NULL) as the refusal ("failed at run time: ...").  Sessions call it when
 * a device fails at run time.  Empties the plan cache.  SY_E_LIMIT past
 * 256 exclusions. */
sy_status sy_planner_exclude(sy_planner *pl, const char *pattern, uint32_t device,
                             const char *reason);

/* Plans the frozen graph |g|: capability, costs, placement, transfers.
 * Returns the cached plan when a graph of the same signature (topology,
 * ops, dtypes, shape classes, options, devices, profiles) was planned.
 * On SY_E_UNSUPPORTED (a node no allowed device runs), SY_E_LIMIT (memory
 * budgets) or a bad option, sy_planner_last_error() says which node,
 * device or option.
 * Ownership: caller owns a reference in *out_plan; sy_plan_release() it.
 * Borrowed: |g| only during the call.
 * Thread-safety: not safe on the same planner concurrently. */
sy_status sy_planner_plan(sy_planner *pl, const sy_graph *g, const sy_plan_options *opts,
                          sy_plan **out_plan);

typedef struct sy_planner_stats {
    uint64_t hits, misses; /* plan cache lookups */
    uint32_t entries;      /* plans held by the cache */
} sy_planner_stats;

/* Fills |out_stats| with the plan cache's counters. */
sy_status sy_planner_query_stats(const sy_planner *pl, sy_planner_stats *out_stats);

/* Adds a reference to |plan|.  Thread-safety: not atomic. */
void sy_plan_retain(sy_plan *plan);
/* Drops a reference; the last one frees the plan.  NULL is a no-op. */
void sy_plan_release(sy_plan *plan);

typedef struct sy_plan_summary {
    double predicted_s;       /* one step: compute plus transfers */
    double compute_s;
    double transfer_s;
    uint64_t transfer_bytes;
    uint32_t n_nodes;
    uint32_t n_segments;
    uint32_t n_transfers;
    uint32_t n_devices;       /* devices the planner considered */
    uint32_t n_unmeasured;    /* nodes costed by the roofline default */
    double planning_s;        /* time the plan took to make (not to look up) */
    const char *algorithm;    /* "dp", "list", "exhaustive" and how it went */
    const char *policy;
    double predicted_j;       /* one step's energy: every device's idle power over the step,
                               * active power while running, copies (docs/profiles.md) */
    double compute_j;
    double transfer_j;
    bool energy_measured;     /* every device's power came from its profile (else defaults) */
} sy_plan_summary;

/* Fills |out_summary|.  Strings are owned by |plan|. */
sy_status sy_plan_query_summary(const sy_plan *plan, sy_plan_summary *out_summary);

typedef struct sy_plan_node_info {
    uint32_t device;          /* runtime device index */
    const char *device_name;  /* owned by the plan */
    double predicted_s;       /* the node alone on its device; 0 for views */
    double predicted_j;       /* its energy, the other devices' idle power included */
    bool is_view;             /* follows its input, computes nothing */
    bool unmeasured;          /* costed by the roofline default */
    char reason[192];         /* "cheapest: 1.20 ms vs 3.40 ms on npusim", "pinned by ..." */
} sy_plan_node_info;

/* Describes node |node| (graph topological index) of |plan|; device_name
 * is owned by |plan|. */
sy_status sy_plan_query_node(const sy_plan *plan, uint32_t node, sy_plan_node_info *out_info);

typedef enum sy_plan_step_kind {
    SY_PLAN_STEP_SEGMENT = 0, /* nodes run in order on one device */
    SY_PLAN_STEP_TRANSFER = 1 /* one tensor copied (or mapped) to another device */
} sy_plan_step_kind;

typedef struct sy_plan_step_info {
    sy_plan_step_kind kind;
    uint32_t device;          /* segment: its device; transfer: the destination */
    uint32_t src_device;      /* transfer: the source */
    uint32_t n_nodes;         /* segment: node count ... */
    const uint32_t *nodes;    /* ... and their graph indices, owned by the plan */
    uint32_t tensor;          /* transfer: id of the storage tensor moved */
    const char *tensor_name;  /* transfer: owned by the plan */
    uint64_t bytes;           /* transfer: bytes predicted to move */
    bool zero_copy;           /* transfer: both devices map host memory */
    double predicted_s;
    double predicted_j;
} sy_plan_step_info;

/* Returns the number of steps (segments and transfers) in run order. */
uint32_t sy_plan_step_count(const sy_plan *plan);
/* Describes step |i|.  Pointers in |out_info| are owned by |plan|. */
sy_status sy_plan_query_step(const sy_plan *plan, uint32_t i, sy_plan_step_info *out_info);

typedef struct sy_plan_memory {
    uint64_t weight_bytes;     /* weights and inputs placed on the device */
    uint64_t kv_bytes;         /* KV state placed on the device */
    uint64_t activation_bytes; /* the activation arena there: activations made or received
                                * there at offsets reused by lifetime (memory planner) */
    uint64_t budget_bytes;     /* 0: unlimited */
} sy_plan_memory;

/* Memory |plan| puts on runtime device |device| (zeros for unused ones). */
sy_status sy_plan_query_memory(const sy_plan *plan, uint32_t device, sy_plan_memory *out_memory);

typedef enum sy_plan_format {
    SY_PLAN_FORMAT_TABLE = 0, /* human-readable: summary, nodes, steps, memory */
    SY_PLAN_FORMAT_JSON = 1,
    SY_PLAN_FORMAT_DOT = 2    /* Graphviz: clusters per device, transfer edges */
} sy_plan_format;

/* Writes |plan| as |format| to |f|. */
sy_status sy_plan_explain(const sy_plan *plan, sy_plan_format format, FILE *f);

/* Writes |plan| as |format| into |out| (|cap| bytes, NUL-terminated).
 * SY_E_LIMIT when |cap| is too small, with *out_len set to the length
 * needed (without the NUL); |out| may be NULL when |cap| is 0. */
sy_status sy_plan_explain_to_buffer(const sy_plan *plan, sy_plan_format format, char *out,
                                    size_t cap, size_t *out_len);

/* Runs the frozen graph |g| by |plan| (made for |g|'s signature) once:
 * as sy_executor_run() on an executor made for this call and destroyed
 * after it, so nothing is kept between calls.
 * Thread-safety: as sy_runtime_execute_on(). */
sy_status sy_runtime_execute_plan(sy_runtime *rt, sy_graph *g, const sy_plan *plan);

typedef struct sy_executor sy_executor;

/* Creates an executor: it runs graphs by plans and keeps between runs one
 * activation arena per device (laid out by the memory planner, grown when
 * a run needs more), the weights it placed on each device (wrapped where
 * the device shares host memory, else uploaded once) and the arena
 * layouts of recent (plan, shapes).
 * Ownership: caller owns *out_executor; free with sy_executor_destroy().
 * Borrowed: |rt| must outlive it; the host data of weights (role WEIGHT)
 * it has run must stay alive and unchanged until it is destroyed.
 * Thread-safety: one thread at a time. */
sy_status sy_executor_create(sy_runtime *rt, sy_executor **out_executor);
/* Frees the arenas and kept weights.  NULL is a no-op. */
void sy_executor_destroy(sy_executor *x);

/* Runs |g| by |plan|: activations at their arena offsets, leaves on their
 * home devices (kept weights, else wrapped or copied in), segments in
 * order, transfers through the plugins' copy functions (or mapped where
 * both devices share host memory), marked outputs and leaves written
 * through views copied back to host data.  Errors in
 * sy_runtime_last_error() of the executor's runtime. */
sy_status sy_executor_run(sy_executor *x, sy_graph *g, const sy_plan *plan);

/* Turns per-node timing on or off for later runs of |x|: each node of a
 * segment then runs as a launch of its own followed by a synchronize, and
 * its wall time is kept until the next run (runs take longer for it: one
 * launch and wait per node instead of per segment). */
sy_status sy_executor_set_node_timing(sy_executor *x, bool on);

/* The wall time of node |node| (graph topological index) in |x|'s last run
 * with timing on, and the runtime device that ran it (|out_device| may be
 * NULL).  0 seconds for views and nodes the run did not reach.
 * SY_E_NOT_FOUND when timing is off or |node| is past the last run's graph. */
sy_status sy_executor_query_node_time(const sy_executor *x, uint32_t node, double *out_seconds,
                                      uint32_t *out_device);

/* Keeps KV caches (leaves of role KV with host data) on the devices the
 * plans home them on, between runs, when |on| (off by default).  On a
 * device with memory of its own (unified_memory 0) such a leaf gets a
 * buffer the first time, filled from its host bytes, and later runs use it
 * in place: nothing is copied in before a run nor back after it, so the
 * host bytes go stale while the device copy is the current one.  A run
 * that homes the leaf on another device (a re-plan) moves it there once,
 * through the host; one that homes it in host memory fetches it back.
 * Whoever reads or changes the host bytes outside a run first calls
 * sy_executor_sync_state().  Turning it off while copies are kept is
 * SY_E_STATE; destroying the executor drops them unfetched. */
sy_status sy_executor_keep_state(sy_executor *x, bool on);

/* Makes the host bytes [host, host + size) current, copying kept device
 * copies that overlap them out; with |will_write| the caller is about to
 * change them, and those copies are reloaded from the host before their
 * next use.  Errors (a failed copy) in sy_runtime_last_error(). */
sy_status sy_executor_sync_state(sy_executor *x, const void *host, uint64_t size,
                                 bool will_write);

typedef struct sy_executor_memory {
    uint64_t arena_bytes;   /* the device's activation arena */
    uint64_t weight_bytes;  /* weights uploaded and kept there (wrapped ones take none) */
    uint64_t current_bytes; /* all buffers the executor holds there now */
    uint64_t peak_bytes;    /* the most it held there at once */
    uint64_t kv_bytes;      /* KV caches kept there (sy_executor_keep_state), in current */
    uint64_t moved_bytes;   /* bytes copied to or from it by the plugins' copy functions in
                             * every run so far (uploads, transfers, copies back, KV loads
                             * and fetches) */
} sy_executor_memory;

/* Fills |out_stats| (struct_size set first) with what |x|'s runs did:
 * steps, segments, device switches and transfers (sy_step_stats), summed
 * over every run since it was created.  Thread-safety: not during a run. */
sy_status sy_executor_query_stats(const sy_executor *x, sy_step_stats *out_stats);

/* Device memory |x| allocated on runtime device |device|, as counted by
 * the executor (buffers it asked the plugin for; the plugin's own
 * internal allocations are not seen). */
sy_status sy_executor_query_memory(const sy_executor *x, uint32_t device,
                                   sy_executor_memory *out_memory);

#ifdef __cplusplus
}
#endif
#endif
