/* Thread pool of the CPU plugin: one lane per physical core, the calling
 * thread being lane 0 and lanes 1..n-1 worker threads pinned to their core.
 * A dispatch bumps a generation counter; idle workers spin on it briefly and
 * then sleep on a condition variable, so back-to-back dispatches (hundreds
 * per token) cost a cache-line handoff, not a syscall. */
#ifndef SY_CPU_THREADPOOL_H
#define SY_CPU_THREADPOOL_H

#include <hwloc.h>
#include <stdint.h>

#include "switchyard/plugin.h"

/* Runs lane |ith| of |nth| lanes of one parallel-for. */
typedef void (*cpu_task_fn)(void *ctx, uint32_t ith, uint32_t nth);

typedef struct cpu_pool cpu_pool;

/* Creates a pool of |n_threads| lanes (>= 1): n_threads - 1 worker threads,
 * pinned to cores 1..n-1 of |topo| when there are enough cores (else to
 * PUs, else not pinned).  Pinning failures are logged, not fatal.
 * Ownership: caller owns *out_pool; free with cpu_pool_destroy().
 * Borrowed: |host| and |topo| must outlive the pool.
 * Thread-safety: create/destroy/run from one thread at a time. */
sy_status cpu_pool_create(const sy_host *host, hwloc_topology_t topo, uint32_t n_threads,
                          cpu_pool **out_pool);

/* Stops and joins the workers and frees |pool|.  NULL is a no-op. */
void cpu_pool_destroy(cpu_pool *pool);

/* Returns the number of lanes, the calling thread included. */
uint32_t cpu_pool_size(const cpu_pool *pool);

/* Runs fn(ctx, i, nth) for every i in [0, nth) (nth is clamped to the pool
 * size) and returns when all lanes are done; lane 0 runs on the caller.
 * Thread-safety: one dispatch at a time, from the thread that owns |pool|. */
void cpu_pool_run(cpu_pool *pool, cpu_task_fn fn, void *ctx, uint32_t nth);

#endif
