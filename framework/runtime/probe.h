/* Capability probe: what this machine is (hwloc topology, every plugin's
 * devices) and what it measurably does (host memory bandwidth per thread
 * count, each device's bandwidth, arithmetic rate, launch overhead,
 * host<->device and device<->device transfers).  Results are cached in
 * $XDG_CACHE_HOME/switchyard/probe.json (or ~/.cache/switchyard/probe.json)
 * under a fingerprint of the hardware and one per device (driver and
 * plugin versions), and reused until they change.  See docs/probe.md.
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
#define SY_PROBE_FORMAT_VERSION 2u
/* How the host bandwidth is measured; part of the host fingerprint, so a
 * cache measured another way is measured again (3: vector loads, short
 * segments, huge pages). */
#define SY_PROBE_HOST_METHOD 3u
#define SY_PROBE_MAX_THREAD_COUNTS 16u
#define SY_PROBE_MAX_DEVICES 16u
#define SY_PROBE_MAX_LINKS 64u
#define SY_PROBE_N_XFER_SIZES 3u
/* What a probe may take by default, first-use kernel builds aside. */
#define SY_PROBE_DEFAULT_BUDGET_S 10.0

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
    char fingerprint[24]; /* of the plugin, its version and this description */
    double measure_s;     /* seconds measuring it took */
    double first_use_s;   /* of which first launches took beyond their steady time
                           * (kernel compilation and the like) */
    bool measured_now;    /* by this query, not read from the cache */
} sy_probe_device;

/* Copies of a buffer on device |from| into one on device |to| the way the
 * executor moves a tensor between them (same plugin: its copy_device;
 * else straight into or out of whichever side maps host memory; else
 * through a host staging buffer), synchronize included. */
typedef struct sy_probe_link {
    char from[SY_NAME_MAX], to[SY_NAME_MAX];
    char from_fingerprint[24], to_fingerprint[24];
    char method[16];  /* "copy_device", "copy_out", "copy_in" or "staged" */
    bool zero_copy;   /* the executor may map the source instead of copying */
    uint64_t bytes[SY_PROBE_N_XFER_SIZES];
    double seconds[SY_PROBE_N_XFER_SIZES]; /* one copy of bytes[k] */
    double bps, latency_s; /* slope between the smallest and largest size; smallest */
    char error[128];
    bool measured_now;
} sy_probe_link;

typedef struct sy_probe {
    char fingerprint[24];      /* 16 hex digits: the host's and every device's */
    char host_fingerprint[24]; /* hardware, switchyard and probe format versions */
    char switchyard_version[32];
    bool from_cache; /* nothing was measured by this query */
    bool quick;      /* measured with the small quick sizes */
    double probe_s;  /* seconds the measurements took (this query's, or the cached ones') */
    double created;  /* Unix time of the host measurement */
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
    /* Devices, in runtime order (the cache file may hold more). */
    uint32_t n_devices;
    sy_probe_device devices[SY_PROBE_MAX_DEVICES];
    /* Every ordered pair of distinct devices above. */
    uint32_t n_links;
    sy_probe_link links[SY_PROBE_MAX_LINKS];
} sy_probe;

typedef struct sy_probe_options {
    uint32_t struct_size; /* sizeof(sy_probe_options) */
    bool refresh;         /* measure even when the cache matches */
    bool quick;           /* small buffers and few repetitions (tests) */
    bool no_cache;        /* neither read nor write the cache file */
    const char *cache_path;        /* NULL: $XDG_CACHE_HOME/switchyard/probe.json */
    const char *fingerprint_extra; /* mixed into the host fingerprint (tests) */
    double budget_s;               /* seconds the measurements may take; 0: the default */
    bool cache_only;               /* SY_E_NOT_FOUND instead of measuring anything */
} sy_probe_options;

/* Fills |opts| with defaults: cached, full sizes. */
void sy_probe_options_init(sy_probe_options *opts);

/* Fills |out_probe| for |rt|'s machine and devices: each part from the
 * cache when its fingerprint matches (unless opts->refresh), else by
 * measuring (a few seconds in all) and rewriting the cache, which keeps
 * the entries of devices this runtime did not load.  A cache file that is
 * not valid probe JSON is replaced with a warning through |rt|'s logger;
 * one made on other hardware is replaced with an info message.  |opts| may
 * be NULL.  Failing to write the cache is a warning, not an error.
 * Ownership: caller's storage.  Thread-safety: as the runtime. */
sy_status sy_runtime_probe(sy_runtime *rt, const sy_probe_options *opts, sy_probe *out_probe);

/* Writes the fingerprint of |rt|'s hardware, drivers and plugins (with
 * |extra|, may be NULL, mixed in) as 16 hex digits into |out| (>= 17 bytes). */
sy_status sy_probe_fingerprint(sy_runtime *rt, const char *extra, char *out, size_t size);

/* Writes the default cache path into |out|, resolved on every call from
 * the environment as it is then: $XDG_CACHE_HOME/switchyard/probe.json
 * when XDG_CACHE_HOME is an absolute path (the XDG rule: a relative one is
 * ignored), else ~/.cache/switchyard/probe.json with ~ from $HOME or, when
 * HOME is unset or empty, the password database.  SY_E_NOT_FOUND when no
 * home directory is known. */
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
/* MemAvailable from /proc/meminfo, or 0. */
uint64_t sy__probe_memory_available(void);

/* Measures host bandwidth within about |budget_s| seconds. */
sy_status sy__probe_host_bandwidth(sy_runtime *rt, sy_probe *p, bool quick, double budget_s);

/* Reads |bytes| at |buf| with the widest loads the CPU has (AVX-512,
 * AVX2, else 64-bit words) and returns a sum of them, so the loads are
 * not optimised away (probe_read.c). Thread-safety: safe. */
uint64_t sy__probe_read(const void *buf, size_t bytes);

/* Names the loop sy__probe_read uses here: "avx512", "avx2", "portable". */
const char *sy__probe_read_isa(void);

/* Fingerprint of device |dev| of |rt| (probe.c). */
void sy__probe_device_fingerprint(sy_runtime *rt, uint32_t dev, char *out, size_t size);

/* Measures device |dev| into |out| within about |budget_s| seconds, first
 * launches aside (probe_device.c). */
void sy__probe_device(sy_runtime *rt, uint32_t dev, bool quick, double budget_s,
                      sy_probe_device *out);

/* Measures copies from device |from| to device |to| into |out|
 * (probe_device.c); a failure is recorded in out->error. */
void sy__probe_link(sy_runtime *rt, uint32_t from, uint32_t to, bool quick, sy_probe_link *out);

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

/* Times |reps| runs of node range [first, first + n) after |warmup| runs
 * into out_times[0 .. *out_count); stops early once |budget_s| seconds
 * have been spent (at least one timed run). */
sy_status sy_bench_sample(sy_bench *b, uint32_t first, uint32_t n, uint32_t warmup, uint32_t reps,
                          double budget_s, double *out_times, uint32_t *out_count);

/* sy_bench_sample() reduced to one figure by sy__timing_estimate(). */
sy_status sy_bench_time(sy_bench *b, uint32_t first, uint32_t n, uint32_t warmup, uint32_t reps,
                        double budget_s, double *out_s);

/* The one figure every probe and tune timing reports: the lower quartile
 * of the |n| repetitions (linear interpolation between order statistics).
 * Other processes only ever add time to a run (preemption, cache
 * pollution), so the fast end of the distribution is the device's own
 * cost; the quartile rather than the minimum keeps one lucky run from
 * deciding it.  Sorts |times|.  0 when n == 0. */
double sy__timing_estimate(double *times, uint32_t n);

/* The |q| quantile (0..1) of |v| (sorts it, linear interpolation). */
double sy__quantile(double *v, uint32_t n, double q);

/* Monotonic seconds. */
double sy__probe_now(void);

#endif
