/* Scheduler internals shared by the planner's files and the plan executor
 * (framework/runtime/executor_plan.c).  Not part of the public API.
 *
 * One planning run: resolve the options (planner.c), look the signature up
 * in the cache (plan_cache.c), find what each device can run
 * (capability.c), cost every node and edge and pose the placement problem
 * (planner_build.c), solve it with the DP / list scheduler while placing
 * leaves under memory budgets (planner.c), and rewrite the result into
 * steps with reasons (plan.c). */
#ifndef SY_SCHEDULER_PLAN_INTERNAL_H
#define SY_SCHEDULER_PLAN_INTERNAL_H

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

#include "cost_model.h"
#include "sched_problem.h"
#include "switchyard/switchyard.h"

#define SY__MAX_PLAN_DEVICES SY__SCHED_MAX_DEVICES
#define SY__NO_DEVICE 0xffu
#define SY__NONE UINT32_MAX
/* value_of[] of a tensor whose contents are a leaf: this bit | root id. */
#define SY__LEAF_BIT 0x80000000u
/* Plans the cache keeps before dropping the least recently used. */
#define SY__PLAN_CACHE_CAP 64u
/* Joules one second is worth under the energy policy: a microwatt, so
 * that time only decides between placements of equal energy. */
#define SY__ENERGY_TIME_WEIGHT 1e-6

typedef enum sy__policy {
    SY__POLICY_LATENCY = 0,
    SY__POLICY_CPU_ONLY = 1,
    SY__POLICY_PREFER = 2,
    SY__POLICY_ENERGY = 3 /* least predicted joules, time breaking ties */
} sy__policy;

typedef struct sy__pin {
    char glob[SY_NAME_MAX * 2];
    uint32_t slot;              /* plan device slot */
    char text[SY_NAME_MAX * 3]; /* as the caller wrote it */
} sy__pin;

/* The options, checked and resolved against the runtime's devices. */
typedef struct sy__plan_request {
    uint32_t n_dev;
    uint32_t dev_index[SY__MAX_PLAN_DEVICES]; /* runtime index of each plan slot */
    sy__policy policy;
    uint32_t policy_slot; /* cpu-only / prefer target */
    char policy_text[SY_NAME_MAX + 16];
    sy__pin *pins;
    uint32_t n_pins;
    uint64_t budget[SY__MAX_PLAN_DEVICES]; /* 0: unlimited */
    bool budget_given[SY__MAX_PLAN_DEVICES];
    sy_plan_algorithm algorithm;
    bool no_cache;
    uint64_t hash; /* of everything above */
} sy__plan_request;

/* A (node pattern, device) pair marked unsupported after a run-time
 * failure (sy_planner_exclude). */
typedef struct sy__exclusion {
    char glob[SY_NAME_MAX * 2];
    uint32_t device; /* runtime index */
    char reason[384];
} sy__exclusion;

/* Refusal code of an excluded pair, beside the plugins' sy_support_reason. */
#define SY__UNSUPPORTED_FAILED 64u
/* Exclusions a planner keeps. */
#define SY__MAX_EXCLUSIONS 256u

typedef struct sy__cache_entry {
    uint64_t key[2];
    sy_plan *plan;
    uint64_t last_use;
} sy__cache_entry;

struct sy_planner {
    sy_runtime *rt;
    sy__profile **profiles; /* at most one per device name */
    uint32_t n_profiles, cap_profiles;
    uint64_t profile_hash; /* of every loaded profile: part of plan keys */
    sy__exclusion *exclusions;
    uint32_t n_exclusions;
    uint64_t exclusion_hash; /* part of plan keys */
    sy__cache_entry cache[SY__PLAN_CACHE_CAP];
    uint32_t n_cache;
    uint64_t tick, hits, misses;
    char last_error[1024];
};

/* Why a node went where it went. */
typedef enum sy__reason {
    SY__REASON_VIEW = 0,
    SY__REASON_PINNED,
    SY__REASON_CPU_ONLY,
    SY__REASON_PREFERRED,
    SY__REASON_FALLBACK, /* the preferred device refuses it */
    SY__REASON_ONLY_DEVICE,
    SY__REASON_SINGLE, /* only one device considered */
    SY__REASON_CHEAPEST
} sy__reason;

enum {
    SY__PN_VIEW = 1u << 0,
    SY__PN_UNMEASURED = 1u << 1,
    SY__PN_EVICTED = 1u << 2 /* kept off a device to meet its memory budget */
};

typedef struct sy__plan_node {
    uint8_t dev;          /* plan device slot */
    uint8_t reason;       /* sy__reason */
    uint8_t alt_dev;      /* device compared with, or SY__NO_DEVICE */
    uint8_t flags;        /* SY__PN_* */
    uint8_t refusing_dev; /* device whose refusal is quoted, or SY__NO_DEVICE */
    uint8_t refusal_code; /* sy_support_reason of that refusal */
    uint16_t op;
    int32_t pin;                /* index into plan->pins, or -1 */
    uint32_t refusal;           /* offset of the refusal text in plan->pool, or SY__NONE */
    double predicted_s;         /* the node alone on its device */
    double predicted_j;         /* its energy (docs/profiles.md) */
    double local_s;             /* node plus adjacent transfers on its device ... */
    double alt_s;               /* ... and on alt_dev (joules under the energy policy) */
    uint32_t in[SY_MAX_INPUTS]; /* producing node of each input, SY__NONE for leaves */
    uint32_t n_in;
    char name[SY_NAME_MAX];
} sy__plan_node;

typedef struct sy__plan_step {
    uint8_t kind; /* sy_plan_step_kind */
    uint8_t dev;  /* segment device / transfer destination (slot) */
    uint8_t src;  /* transfer source (slot) */
    bool zero_copy;
    uint32_t first, count; /* segment: range of plan->order */
    uint32_t tensor;       /* transfer: root storage tensor id */
    uint32_t value_node;   /* transfer: node whose output moves; SY__NONE for a leaf */
    uint64_t offset;       /* transfer: first byte of the root it covers */
    uint64_t bytes;
    double predicted_s, predicted_j;
    char tensor_name[SY_NAME_MAX];
} sy__plan_step;

struct sy_plan {
    uint32_t refs;
    uint64_t key[2];
    uint32_t n_nodes, n_tensors, n_dev;
    uint32_t dev_index[SY__MAX_PLAN_DEVICES];
    char dev_name[SY__MAX_PLAN_DEVICES][SY_NAME_MAX];
    char dev_profile[SY__MAX_PLAN_DEVICES][256]; /* "path (version)", "" without one */
    sy__plan_node *nodes;
    uint32_t *order; /* nodes of every segment, concatenated */
    uint32_t n_order;
    sy__plan_step *steps;
    uint32_t n_steps;
    uint8_t *leaf_home; /* per tensor id: slot of a used leaf root, else SY__NO_DEVICE */
    sy_plan_memory mem[SY__MAX_PLAN_DEVICES];
    double predicted_s, compute_s, transfer_s, planning_s;
    double predicted_j, compute_j, transfer_j;
    bool energy_measured; /* every device's power came from its profile */
    uint64_t transfer_bytes;
    uint32_t n_segments, n_transfers, n_unmeasured;
    char algorithm[128];
    char policy[SY_NAME_MAX + 16];
    char **pins; /* pin texts quoted by reasons */
    uint32_t n_pins;
    char *pool; /* refusal texts */
    size_t pool_len, pool_cap;
};

/* Everything one planning run works on. */
typedef struct sy__plan_ctx {
    sy_planner *pl;
    sy_runtime *rt;
    const sy_graph *g;
    const sy__plan_request *req;
    uint32_t n_nodes, n_tensors, D;
    sy__device_model dm[SY__MAX_PLAN_DEVICES];
    sy__link_model link[SY__MAX_PLAN_DEVICES][SY__MAX_PLAN_DEVICES];
    /* structure */
    uint32_t *value_of; /* per tensor: producing decision, or SY__LEAF_BIT | root */
    uint32_t *dec;      /* decision -> graph node */
    uint32_t *dec_of;   /* graph node -> decision, SY__NONE for views */
    uint32_t n_dec;
    uint32_t *leaf_readers; /* per tensor (leaf roots): decision nodes reading it */
    uint32_t *leaf_writer;  /* per tensor (leaf roots): decision writing it, or SY__NONE */
    uint32_t *cons_start, *cons_list; /* consumers of each decision (CSR) */
    uint64_t *dec_bytes; /* per decision: its output's bytes (sy__value_bytes) */
    /* capability: per graph node */
    uint8_t *supported; /* device mask */
    uint8_t *allowed;   /* after policy, pins and memory evictions */
    uint8_t *evicted;   /* devices a node was moved off for memory */
    int32_t *pin_of;    /* pin index or -1 */
    uint8_t *why_code;  /* n_nodes * D: sy_support_reason of refusals */
    uint32_t *why_text; /* n_nodes * D: offset into pool, SY__NONE if none */
    char *pool;
    size_t pool_len, pool_cap;
    /* costs: per decision */
    double *node_s;      /* n_dec * D: predicted node time (all devices) */
    double *node_j;      /* n_dec * D: predicted node energy */
    double idle_w;       /* idle power of all D devices together */
    uint8_t *unmeasured; /* n_dec: device mask costed by the roofline */
    /* placement */
    uint8_t *leaf_home; /* per tensor (leaf roots): slot, or SY__NO_DEVICE floating */
    sy__sched_problem pb;
    sy__dp_memo *memo; /* DP blocks solved in this planning run's earlier solves */
    /* sy__ctx_memory()'s last answer and the placement it was for */
    uint8_t *mem_assign, *mem_home;
    sy_plan_memory mem_last[SY__MAX_PLAN_DEVICES];
    uint8_t *assign; /* n_dec */
    char algorithm[128];
    double t_start;
} sy__plan_ctx;

/* planner.c */
sy_status sy__planner_fail(sy_planner *pl, sy_status st, const char *fmt, ...)
    __attribute__((format(printf, 3, 4)));
double sy__now(void);

/* Loads the profile at |path| as sy_planner_load_profile() does, but only
 * when it describes |device| (NULL: any); SY_E_NOT_FOUND otherwise. */
sy_status sy__planner_load_profile_for(sy_planner *pl, const char *path, const char *device);
/* Applies |p| (owned from now on, also on failure) to its device,
 * replacing an earlier profile for it; empties the plan cache. */
sy_status sy__planner_install_profile(sy_planner *pl, sy__profile *p);

/* planner_options.c: checks |o| against the runtime's devices into |req|.
 * Ownership: free req->pins. */
sy_status sy__plan_request_resolve(sy_planner *pl, const sy_plan_options *o, sy__plan_request *req);
/* Parses a size: bytes, or with a K, M, G or T suffix (powers of 1024,
 * "iB"/"B" allowed after it), "1.5G"; false when |s| is not one. */
bool sy__parse_size(const char *s, uint64_t *out);

/* capability.c: fills supported/allowed/pin_of/why_* for every node, and
 * fails naming the node when nothing allowed can run it. */
sy_status sy__capability_run(sy__plan_ctx *c);
/* Returns a short phrase for a sy_support_reason ("op unsupported"). */
const char *sy__support_short(uint32_t code);
/* Adds |text| to the context's pool; returns its offset or SY__NONE. */
uint32_t sy__ctx_pool_add(sy__plan_ctx *c, const char *text);

/* planner_build.c */
sy_status sy__ctx_structure(sy__plan_ctx *c);
sy_status sy__ctx_costs(sy__plan_ctx *c);
/* (Re)builds c->pb from the current allowed masks and leaf homes. */
sy_status sy__ctx_problem(sy__plan_ctx *c);
/* Exact objective of c->assign with c->leaf_home, leaves moved once per
 * destination. */
double sy__ctx_objective(const sy__plan_ctx *c);
/* What the policy minimises for decision |k| on device |d|, and for
 * moving |bytes| from |s| to |d|: seconds, or joules under the energy
 * policy with seconds weighted by SY__ENERGY_TIME_WEIGHT to break ties. */
double sy__ctx_node_obj(const sy__plan_ctx *c, uint32_t k, uint32_t d);
double sy__ctx_move_obj(const sy__plan_ctx *c, uint32_t s, uint32_t d, uint64_t bytes);
/* Joules of moving |bytes| from |s| to |d|: every device idling over the
 * copy's time, plus the copy's own energy per byte. */
double sy__ctx_move_j(const sy__plan_ctx *c, uint32_t s, uint32_t d, uint64_t bytes);
/* Fills |mask| (n_tensors) with, per leaf root, the devices of the
 * decision nodes reading it under c->assign (bit 0 for a leaf only an
 * output views), 0 for everything else. */
void sy__ctx_leaf_masks(const sy__plan_ctx *c, uint8_t *mask);
/* Homes every leaf with the device of its readers (or writer). */
void sy__ctx_home_leaves(sy__plan_ctx *c);
/* Bytes a transfer of |value| (a decision, or SY__LEAF_BIT | root) moves,
 * and bytes its storage takes on a device. */
uint64_t sy__value_bytes(const sy__plan_ctx *c, uint32_t value);
uint64_t sy__value_storage(const sy__plan_ctx *c, uint32_t value);
/* Memory c->assign and c->leaf_home put on each device (budgets included);
 * asked again for the same placement, a copy of the last answer. */
void sy__ctx_memory(sy__plan_ctx *c, sy_plan_memory out[SY__MAX_PLAN_DEVICES]);
void sy__ctx_free(sy__plan_ctx *c);

/* plan.c */
sy_status sy__plan_build(sy__plan_ctx *c, sy_plan **out_plan);

/* True when the executor runs a graph under |a| exactly as under |b|: the
 * same devices, nodes on the same ones, the same segments, order and
 * transfers (their bytes too), leaves homed alike.  Costs, reasons and
 * keys may differ (plans of one graph in two shape classes). */
bool sy__plan_same_run(const sy_plan *a, const sy_plan *b);
/* Formats node |i|'s reason into |out|. */
void sy__plan_format_reason(const sy_plan *p, uint32_t i, char *out, size_t size);
const char *sy__reason_name(uint32_t reason);

/* plan_cache.c */
void sy__plan_signature(const sy_graph *g, const sy__plan_request *req, uint64_t salt,
                        uint64_t out_key[2]);
sy_plan *sy__cache_lookup(sy_planner *pl, const uint64_t key[2]);
void sy__cache_insert(sy_planner *pl, const uint64_t key[2], sy_plan *plan);
void sy__cache_clear(sy_planner *pl);

#endif
