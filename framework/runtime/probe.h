/* Capability probe: what this machine is (hwloc topology, every plugin's
 * devices) and what it measurably does (host memory bandwidth per thread
 * count, each device's bandwidth, arithmetic rate, launch overhead and
 * host<->device transfers).  Results are cached in
 * $XDG_CACHE_HOME/switchyard/probe.json (or ~/.cache/switchyard/probe.json)
 * under a fingerprint of the hardware, drivers and plugin versions, and
 * reused until the fingerprint changes.  See docs/probe.md.
 *
 * Library-internal for now (not in switchyard.h): the CLI and the tuner use
 * it; embedders get it once the API settles. */
#ifndef SY_RUNTIME_PROBE_H
#define SY_RUNTIME_PROBE_H

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>
#include <stdio.h>

#include "switchyard/switchyard.h"

/* Version of the cache file's layout; part of the fingerprint. */
#define SY_PROBE_FORMAT_VERSION 1u
#define SY_PROBE_MAX_THREAD_COUNTS 16u
#define SY_PROBE_MAX_DEVICES 16u
#define SY_PROBE_N_XFER_SIZES 3u

/* Host memory bandwidth with |threads| pinned threads (bytes/s). */
typedef struct sy_probe_host_bw {
    uint32_t threads;
    double read_bps; /* bytes read per second */
    double copy_bps; /* bytes read + written per second by memcpy */
} sy_probe_host_bw;

/* One transfer size: median seconds of one copy in each direction. */
typedef struct sy_probe_xfer {
    uint64_t bytes;
    double h2d_s, d2h_s;
} sy_probe_xfer;

typedef struct sy_probe_device {
    char name[SY_NAME_MAX];
    char plugin[SY_NAME_MAX];
    char plugin_version[SY_NAME_MAX];
    char model[128];
    char driver[SY_NAME_MAX];
    uint32_t kind; /* sy_device_kind */
    uint64_t memory_bytes;
    bool unified_memory;
    uint32_t compute_units;
    /* Measured; 0 where the measurement failed (see |error|). */
    double bandwidth_bps;   /* F32 add: bytes read + written per second */
    double flops;           /* F32 matmul FLOP/s */
    double launch_s;        /* one tiny node, execute + synchronize */
    double h2d_bps, h2d_latency_s;
    double d2h_bps, d2h_latency_s;
    sy_probe_xfer xfer[SY_PROBE_N_XFER_SIZES];
    char error[192]; /* the first measurement that failed, or "" */
} sy_probe_device;

typedef struct sy_probe {
    char fingerprint[24]; /* 16 hex digits */
    char switchyard_version[32];
    bool from_cache; /* true when read from the cache file, not measured now */
    bool quick;      /* measured with the small quick sizes */
    double probe_s;  /* seconds the measurement took */
    double created;  /* Unix time of the measurement */
    /* Topology. */
    char cpu_model[128];
    char topology[256]; /* sy_runtime_query_topology()'s line */
    uint32_t packages, cores, pus, numa_nodes;
    uint32_t cores_allowed; /* cores with a PU in this process's cpuset */
    uint64_t l1d_bytes, l2_bytes, l3_bytes; /* one instance of each level, 0: absent */
    uint64_t memory_total;     /* hwloc's total memory */
    uint64_t memory_available; /* MemAvailable now (refreshed on every query, not cached) */
    /* Host memory. */
    uint64_t host_buffer_bytes; /* size of the read buffer */
    uint32_t n_host_bw;
    sy_probe_host_bw host_bw[SY_PROBE_MAX_THREAD_COUNTS];
    /* Devices, in runtime order. */
    uint32_t n_devices;
    sy_probe_device devices[SY_PROBE_MAX_DEVICES];
} sy_probe;

typedef struct sy_probe_options {
    uint32_t struct_size; /* sizeof(sy_probe_options) */
    bool refresh;         /* measure even when the cache matches */
    bool quick;           /* small buffers and few repetitions (tests) */
    bool no_cache;        /* neither read nor write the cache file */
    const char *cache_path;        /* NULL: $XDG_CACHE_HOME/switchyard/probe.json */
    const char *fingerprint_extra; /* mixed into the fingerprint (tests) */
} sy_probe_options;

/* Fills |opts| with defaults: cached, full sizes. */
void sy_probe_options_init(sy_probe_options *opts);

/* Fills |out_probe| for |rt|'s machine and devices: from the cache when
 * its fingerprint matches (unless opts->refresh), else by measuring (a few
 * seconds) and rewriting the cache.  A cache file that is not valid probe
 * JSON is replaced with a warning through |rt|'s logger; one with another
 * fingerprint is replaced with an info message.  |opts| may be NULL.
 * Failing to write the cache is a warning, not an error.
 * Ownership: caller's storage.  Thread-safety: as the runtime. */
sy_status sy_runtime_probe(sy_runtime *rt, const sy_probe_options *opts, sy_probe *out_probe);

/* Writes the fingerprint of |rt|'s hardware, drivers and plugins (with
 * |extra|, may be NULL, mixed in) as 16 hex digits into |out| (>= 17 bytes). */
sy_status sy_probe_fingerprint(sy_runtime *rt, const char *extra, char *out, size_t size);

/* Writes the default cache path into |out|.  SY_E_NOT_FOUND when neither
 * $XDG_CACHE_HOME nor $HOME is set. */
sy_status sy_probe_default_cache_path(char *out, size_t size);

/* Serialises |p| as JSON (docs/probe.md).
 * Ownership: caller frees *out_json with free(). */
sy_status sy_probe_to_json(const sy_probe *p, char **out_json);

/* Parses probe JSON.  SY_E_FORMAT with |err| filled when it is not. */
sy_status sy_probe_from_json(const char *json, size_t len, sy_probe *out_probe, char *err,
                             size_t err_size);

/* Prints |p| as readable tables. */
void sy_probe_print(const sy_probe *p, FILE *f);

/* Best measured host read bandwidth over all thread counts (bytes/s), or 0. */
double sy_probe_host_read_bps(const sy_probe *p);

/* ------------------------------------------------- auto-configuration */

/* What auto-configuration needs to know about a model (sy_model_info). */
typedef struct sy_autoconfig_model {
    uint64_t weight_bytes;
    uint32_t n_layer, n_head_kv, head_dim, n_ctx_train;
} sy_autoconfig_model;

typedef struct sy_autoconfig {
    uint32_t n_threads;
    uint32_t n_ctx;
    sy_dtype kv_type;
    char why_threads[160], why_ctx[192], why_kv[192];
} sy_autoconfig;

/* Chooses thread count, context size and KV precision from |p| and the
 * model |m| by the rules of docs/probe.md.  Callers apply their own
 * overrides on top.  Thread-safety: pure. */
sy_status sy_probe_autoconfig(const sy_probe *p, const sy_autoconfig_model *m,
                              sy_autoconfig *out_config);

/* ------------------------------------------ library-internal helpers */

/* Fills the topology fields and measures host bandwidth (probe_host.c). */
sy_status sy__probe_host_topology(sy_runtime *rt, sy_probe *p);
sy_status sy__probe_host_bandwidth(sy_runtime *rt, sy_probe *p, bool quick);
/* MemAvailable from /proc/meminfo, or 0. */
uint64_t sy__probe_memory_available(void);

/* Measures device |dev| into |out| (probe_device.c). */
void sy__probe_device(sy_runtime *rt, uint32_t dev, bool quick, sy_probe_device *out);

/* A frozen graph bound to one device's buffers so that single nodes can be
 * executed and timed again and again without transfers (probe_bench.c). */
typedef struct sy_bench sy_bench;

/* Allocates device storage for every tensor of |g| on |dev| and copies
 * leaves in (zeros where they have no host data).
 * Ownership: caller owns *out_bench; free with sy_bench_destroy(), before
 * |g|.  Borrowed: |g| is bound to device buffers until then. */
sy_status sy_bench_create(sy_runtime *rt, sy_graph *g, uint32_t dev, sy_bench **out_bench);
void sy_bench_destroy(sy_bench *b);

/* Executes nodes [first, first + n) of the graph and waits for them;
 * *out_s is the wall time in seconds. */
sy_status sy_bench_run(sy_bench *b, uint32_t first, uint32_t n, double *out_s);

/* Median seconds of |reps| runs of node range [first, first + n) after
 * |warmup| runs; stops early once |budget_s| seconds have been spent (at
 * least one timed run). */
sy_status sy_bench_time(sy_bench *b, uint32_t first, uint32_t n, uint32_t warmup, uint32_t reps,
                        double budget_s, double *out_median_s);

/* Monotonic seconds. */
double sy__probe_now(void);

#endif
