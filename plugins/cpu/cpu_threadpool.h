/* Thread pool of the CPU plugin: one lane per physical core, the calling
 * thread being lane 0 and lanes 1..n-1 worker threads pinned to their core.
 * A dispatch bumps a generation counter; idle workers spin on it for a
 * bounded time (CPU_POOL_SPIN_NS, settable) and then sleep on it (a futex;
 * a condition variable where there are none), so back-to-back dispatches
 * within the spin cost a cache-line handoff, later ones one wake-up, and an
 * idle pool uses no CPU.
 *
 * A dispatch is cut into |nth| chunks that lanes claim from an atomic
 * counter (an item job's chunk i is lane i's: its home range, below).
 * The caller claims chunks too and, once none is left, closes the job and
 * waits only for lanes that are inside it: a worker the OS has not
 * scheduled yet (a busy core, a pinned thread behind another process) costs
 * its share of the work, never a scheduling quantum of waiting.  The
 * caller's first chunk (of an item job, its first claim) is its own before
 * the job is published, by plain stores that reach the workers while it
 * runs that share (cpu_pool_publish_job in cpu_threadpool.c).
 *
 * Where workers are pinned, the thread that dispatches is kept off their
 * cores: at its first dispatch of two or more lanes the pool narrows that
 * thread's binding to the cores of its binding no worker is pinned to
 * (left as it is where there are none), and destroying the pool from that
 * thread gives it its binding back.  Unbound, the scheduler moved the
 * caller onto the worker's core now and then (SmolLM2 tg128 -t 2 on the
 * 2-vCPU VM: 130-762 of 93267 dispatches a run), where the two lanes
 * shared one core and each such dispatch spent 34-165 us on average in
 * the worker's wake-up. */
#ifndef SY_CPU_THREADPOOL_H
#define SY_CPU_THREADPOOL_H

#include <hwloc.h>
#include <stdbool.h>
#include <stdint.h>

#include "switchyard/plugin.h"

/* Runs chunk |ith| of |nth| chunks of one parallel-for on lane |lane|
 * (the executing thread: index of its scratch memory, < pool size). */
typedef void (*cpu_task_fn)(void *ctx, uint32_t ith, uint32_t nth, uint32_t lane);

/* Runs work items [first, end) in order on lane |lane| (cpu_pool_run_items):
 * one call per claim, so a claim of many small items costs one call. */
typedef void (*cpu_item_fn)(void *ctx, int64_t first, int64_t end, uint32_t lane);

typedef struct cpu_pool cpu_pool;

/* Time an idle worker spins for the next dispatch before it sleeps while
 * other processes compete for the cores (and until the pool has seen they
 * do not).  Short: on the 2-vCPU VM this was measured on, at load 10-18,
 * spinning cost the step more than the wake-up it saves (SmolLM2 tg64 -t
 * 2, 4-6 interleaved rounds, median t/s: spin 0 67.7, 5 us 67.2, 20 us
 * 59.5, 50 us 34.3 against 20 us 73.8, 2 ms 26.8 against 20 us 50.9). */
#define CPU_POOL_SPIN_NS UINT64_C(5000)
/* Time an idle worker spins while the cores are the pool's own (the
 * caller is not being preempted; cpu_threadpool.c): on the same VM, quiet,
 * 200 us against 5 us won 4 rounds of 4, SmolLM2 tg -t 2 230.8 against
 * 208.6 t/s, synth 1B Q4_0 53.4 against 51.6. */
#define CPU_POOL_SPIN_QUIET_NS UINT64_C(200000)

/* Creates a pool of |n_threads| lanes (>= 1): n_threads - 1 worker threads,
 * pinned (when |pin|) to cores 1..n-1 of |topo| when there are enough
 * cores, else to PUs, else not at all; the dispatching thread is then kept
 * off those cores (above).  Pinning failures are logged, not fatal.
 * Ownership: caller owns *out_pool; free with cpu_pool_destroy().
 * Borrowed: |host| and |topo| must outlive the pool.
 * Thread-safety: create/destroy/run from one thread at a time. */
sy_status cpu_pool_create(const sy_host *host, hwloc_topology_t topo, uint32_t n_threads, bool pin,
                          cpu_pool **out_pool);

/* Stops and joins the workers and frees |pool|.  NULL is a no-op. */
void cpu_pool_destroy(cpu_pool *pool);

/* Sets how long an idle worker spins before sleeping; 0 sleeps at once.
 * Without it the pool picks CPU_POOL_SPIN_QUIET_NS or CPU_POOL_SPIN_NS by
 * whether other processes preempt the caller.  Workers read it when they
 * start waiting.
 * Thread-safety: from the thread that runs the pool's dispatches. */
void cpu_pool_set_spin(cpu_pool *pool, uint64_t spin_ns);

/* How long an idle worker spins now, in nanoseconds. */
uint64_t cpu_pool_spin(const cpu_pool *pool);

/* One look of the adaptive spin: |nivcsw| is the caller's count of
 * involuntary context switches now (getrusage).  Changed since the
 * previous look at 3 or more of the last 8 looks (a new pool counts as
 * busy): spin CPU_POOL_SPIN_NS; otherwise CPU_POOL_SPIN_QUIET_NS.  No
 * effect once cpu_pool_set_spin was called.  cpu_pool_run looks every 64
 * dispatches; exposed for tests.
 * Thread-safety: from the thread that runs the pool's dispatches. */
void cpu_pool_spin_look(cpu_pool *pool, long nivcsw);

/* Returns the number of lanes, the calling thread included. */
uint32_t cpu_pool_size(const cpu_pool *pool);

/* Runs fn(ctx, i, nth, lane) for every chunk i in [0, nth) (nth is clamped
 * to the pool size) and returns when all chunks are done.
 * Thread-safety: one dispatch at a time, from the thread that owns |pool|. */
void cpu_pool_run(cpu_pool *pool, cpu_task_fn fn, void *ctx, uint32_t nth);

/* Runs every item in [0, n_items) on up to |nth| lanes, as calls
 * fn(ctx, first, end, lane) over claimed runs of items, and returns when
 * all are done.  Each lane owns a contiguous home range of the items and
 * claims them in order from a counter on a cache line of its own (an
 * atomic there costs no transfer between cores); a lane done with its
 * range takes what is left of the others.  Every claim, at home or away,
 * takes half of what is left of the range, at most |max_claim| items
 * (values below 1 count as 1), so claims shrink to single items at the
 * end of each range.  The lanes then end within about one item of each
 * other, where one shared counter moves its line on every claim and items
 * must stay large, which leaves the caller waiting up to one large item in
 * the barrier for the last lane.  Items can be small (a few rows of a
 * matmul) as long as |max_claim| keeps the calls large where the ranges
 * are full.  On one lane every item comes in one call.
 * Thread-safety: as cpu_pool_run. */
void cpu_pool_run_items(cpu_pool *pool, cpu_item_fn fn, void *ctx, int64_t n_items,
                        int64_t max_claim, uint32_t nth);
/* As cpu_pool_run_items, and:
 * - worker lanes leave the last |keep| items of every range (at most a
 *   range's size; 0: none) to the calling lane, which so runs the job's
 *   last items itself and finds the workers gone, instead of waiting for
 *   the end of the item a worker took last and the line that says so.
 *   Worth it where an item is short next to that wait: SmolLM2 decode at
 *   2 threads (4-row tiles), keeping 1-2 tiles cut the caller's average
 *   wait at the end of a job from 350-430 to 75-146 TSC cycles, tokens/s
 *   alike (4 interleaved rounds);
 * - the calling lane runs |tail|(|tail_ctx|) (when not NULL) once it is
 *   out of items, before it waits for the other lanes to leave the job:
 *   work for after the job that needs none of its results (prefetching
 *   what the next step reads), done in time the caller would otherwise
 *   spend waiting.  On one lane it runs after the items. */
void cpu_pool_run_items_tail(cpu_pool *pool, cpu_item_fn fn, void *ctx, int64_t n_items,
                             int64_t max_claim, int64_t keep, uint32_t nth,
                             void (*tail)(void *), void *tail_ctx);

#endif
