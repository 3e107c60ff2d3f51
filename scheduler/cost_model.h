/* Cost model: device profiles (measured data, profiles/schema.json) and
 * the predicted time of a node on a device and of a transfer between two
 * devices.  Without a profile a node costs the roofline default
 * max(FLOPs / peak FLOP/s, bytes / peak bandwidth) + launch overhead from
 * the device's description, and is flagged unmeasured.
 *
 * Energy (docs/profiles.md, "Power and energy"): every device of a plan
 * draws its idle power for the whole step, and the device running a node
 * draws its active power (per op family where the profile says) instead;
 * a copy adds its bytes times the link's joules per byte. */
#ifndef SY_SCHEDULER_COST_MODEL_H
#define SY_SCHEDULER_COST_MODEL_H

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

#include "switchyard/switchyard.h"

/* The profile format this code reads. */
#define SY__PROFILE_FORMAT_VERSION 1u

/* Conservative figures for devices that report 0 (unknown). */
#define SY__DEFAULT_CPU_FLOPS 50e9
#define SY__DEFAULT_CPU_BANDWIDTH 20e9
#define SY__DEFAULT_CPU_LAUNCH_S 1e-6
#define SY__DEFAULT_GPU_FLOPS 200e9
#define SY__DEFAULT_GPU_BANDWIDTH 50e9
#define SY__DEFAULT_GPU_LAUNCH_S 10e-6
#define SY__DEFAULT_NPU_FLOPS 100e9
#define SY__DEFAULT_NPU_BANDWIDTH 20e9
#define SY__DEFAULT_NPU_LAUNCH_S 20e-6
/* Links without a profile entry. */
#define SY__DEFAULT_LINK_BANDWIDTH 8e9
#define SY__DEFAULT_LINK_LATENCY_S 10e-6
#define SY__DEFAULT_SYNC_S 5e-6
#define SY__DEFAULT_MAP_S 1e-6
/* Power of devices whose profile gives none (watts): guesses on the high
 * side for a phone-to-laptop class part, flagged unmeasured in plans. */
#define SY__DEFAULT_CPU_ACTIVE_W 15.0
#define SY__DEFAULT_CPU_IDLE_W 2.0
#define SY__DEFAULT_GPU_ACTIVE_W 30.0
#define SY__DEFAULT_GPU_IDLE_W 3.0
#define SY__DEFAULT_NPU_ACTIVE_W 5.0
#define SY__DEFAULT_NPU_IDLE_W 0.5
/* Energy of a copy per byte moved (a DRAM read and write), J/B. */
#define SY__DEFAULT_LINK_J_PER_BYTE 1e-10

/* Longest shape and group labels (sy__cost_shape_label). */
#define SY__COST_SHAPE_MAX 96
#define SY__COST_GROUP_MAX 48

/* One measured shape class: what the node counted and how long it took. */
typedef struct sy__cost_point {
    double flops, bytes, seconds;
    double work; /* interpolation coordinate, see sy__cost_work() */
    char shape[SY__COST_SHAPE_MAX]; /* "" when the profile names none */
    char group[SY__COST_GROUP_MAX]; /* "" when the profile names none */
} sy__cost_point;

/* Measurements of one op family on one dtype. */
typedef struct sy__op_entry {
    uint32_t op;   /* sy_op, or SY_OP_COUNT for "*" */
    int32_t dtype; /* sy_dtype, or -1 for any */
    bool has_fit;
    double overhead_s, s_per_flop, s_per_byte;
    bool has_time; /* a fit or points: false for a power-only entry */
    double active_w; /* watts while this op runs; NAN: the device's figure */
    /* Matmul: the kernel works in tiles of token_tile tokens (columns)
     * from token_tile_from tokens on, so a node of T >= token_tile_from
     * tokens costs what one of T rounded up to a whole tile does; 0: not
     * tiled (docs/profiles.md, "Token tiles"). */
    uint32_t token_tile, token_tile_from;
    uint32_t n_points;
    sy__cost_point *points; /* ascending work */
} sy__op_entry;

typedef struct sy__link_entry {
    char to[SY_NAME_MAX];
    /* NAN where the profile leaves the figure out. */
    double bandwidth, latency_s, sync_s, map_s;
    double j_per_byte; /* energy of a copy per byte */
    int zero_copy;     /* -1 unset, 0 or 1 */
} sy__link_entry;

typedef struct sy__profile {
    char device[SY_NAME_MAX]; /* the device it describes */
    char plugin[SY_NAME_MAX]; /* "" when not given */
    char plugin_version[SY_NAME_MAX];
    char version[64];                                     /* the data's own version */
    char origin[256];                                     /* file it came from */
    uint64_t hash;                                        /* of the JSON text: part of plan keys */
    double peak_flops, peak_bandwidth, launch_overhead_s; /* NAN: not given */
    /* What a launch waited for costs beyond the shares of the nodes in it
     * (0 when not given): paid once per segment of a plan, and by a node
     * launched alone. */
    double launch_sync_s;
    double idle_w, active_w;                              /* NAN: not given */
    sy__op_entry *ops;
    uint32_t n_ops;
    sy__link_entry *links;
    uint32_t n_links;
} sy__profile;

/* Parses a profile from |json| (|len| bytes); |origin| names it in errors.
 * Ownership: caller owns *out_profile; free with sy__profile_destroy(). */
sy_status sy__profile_parse(const char *json, size_t len, const char *origin,
                            sy__profile **out_profile, char *err, size_t err_size);
void sy__profile_destroy(sy__profile *p);

/* The interpolation coordinate of a node's counts: a roofline time at
 * fixed reference rates, so that compute- and memory-bound shapes order
 * sensibly on one axis. */
double sy__cost_work(double flops, double bytes);

/* Writes the shape class of |node| as profile points name it: the first
 * input's dimensions, then "dtype:dimensions" of every other input, each
 * dimension list without trailing 1s ("576x1536 f32:576x32" for a matmul
 * of 576x1536 weights with 32 tokens).  A point with this label is the
 * node's own measurement. */
void sy__cost_shape_label(const sy_node *node, char *out, size_t size);

/* Writes the group of |node|: what its shape classes share when only the
 * token count or the context length changes — a matmul's or get_rows'
 * weights ("576x1536"), the head size and head count of attention, rope
 * and kv_write ("64x9"), else the row length ("576").  Points of the
 * node's group are the ones interpolated between. */
void sy__cost_shape_group(const sy_node *node, char *out, size_t size);

/* What the planner knows about one device when costing. */
typedef struct sy__device_model {
    uint32_t rt_index; /* runtime device index */
    sy_device_desc desc;
    const sy__profile *profile;                  /* borrowed, may be NULL */
    double peak_flops, peak_bandwidth, launch_s; /* effective roofline figures */
    double segment_s; /* a segment's own price on top of its nodes: launch_sync_s */
    double idle_w, active_w;                     /* effective power figures */
    bool power_measured;                         /* both came from the profile */
    /* Best profile entry per op and dtype (exact dtype, then any dtype,
     * then op "*"), NULL where only the roofline applies. */
    const sy__op_entry *entry[SY_OP_COUNT][SY_DTYPE_COUNT];
    /* Best entry with an active_w of its own, same order; NULL: active_w. */
    const sy__op_entry *power[SY_OP_COUNT][SY_DTYPE_COUNT];
} sy__device_model;

/* Fills |m| for device |rt_index| described by |desc| with |profile| (may
 * be NULL). */
void sy__device_model_init(sy__device_model *m, uint32_t rt_index, const sy_device_desc *desc,
                           const sy__profile *profile);

/* Predicted seconds of |node| on |m|; *out_unmeasured tells whether the
 * roofline default gave it.  View nodes cost nothing. */
double sy__cost_node(const sy__device_model *m, const sy_node *node, bool *out_unmeasured);

/* Watts |m| draws while it runs |node| (views: its idle power). */
double sy__power_node(const sy__device_model *m, const sy_node *node);

typedef struct sy__link_model {
    double bandwidth, latency_s, sync_s, map_s;
    double j_per_byte; /* energy per byte copied (0 when zero-copy) */
    bool zero_copy;    /* both sides map the same host memory */
    bool measured;  /* a profile gave the figures */
} sy__link_model;

/* The link from |src| to |dst| (distinct devices). */
void sy__cost_link(const sy__device_model *src, const sy__device_model *dst,
                   sy__link_model *out_link);

/* Seconds to make |bytes| written on the link's source readable on its
 * destination, synchronisation included (charged even for 0 bytes). */
double sy__cost_transfer(const sy__link_model *link, uint64_t bytes);

/* Joules the copy itself takes beyond the devices' idle power over its
 * time: bytes times the link's energy per byte (0 when zero-copy). */
double sy__cost_transfer_j(const sy__link_model *link, uint64_t bytes);

#endif
