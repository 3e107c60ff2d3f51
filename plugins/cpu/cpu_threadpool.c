/* Thread pool: generation-counter barrier with spin-then-sleep workers. */
#include "cpu_threadpool.h"

#include <pthread.h>
#include <sched.h>
#include <stdalign.h>
#include <stdatomic.h>
#include <stdbool.h>
#include <stdio.h>
#include <string.h>

#define CPU_POOL_LINE 64
/* Pause iterations a worker spins before sleeping: a few hundred
 * microseconds, longer than the gap between two kernels of one token and
 * much shorter than the gap between two tokens of a slow caller. */
#define CPU_POOL_WORKER_SPINS (1u << 14)
/* Pause iterations the caller spins waiting for stragglers before it
 * starts yielding its core to them. */
#define CPU_POOL_CALLER_SPINS (1u << 12)

/* One worker thread.  Each sits on its own cache lines so that a worker
 * touching its bookkeeping never invalidates another's. */
typedef struct cpu_worker {
    alignas(CPU_POOL_LINE) struct cpu_pool *pool;
    pthread_t thread;
    hwloc_cpuset_t cpuset; /* NULL: not pinned */
    uint32_t index;        /* lane number, >= 1 */
    bool started;
} cpu_worker;

struct cpu_pool {
    /* Written by the caller once per dispatch, read by every worker. */
    alignas(CPU_POOL_LINE) atomic_uint generation;
    /* Written by every worker once per dispatch, read by the caller. */
    alignas(CPU_POOL_LINE) atomic_uint done;
    /* The job; published by the release increment of |generation|. */
    alignas(CPU_POOL_LINE) cpu_task_fn fn;
    void *ctx;
    uint32_t nth;
    atomic_bool stop;
    /* Sleep path, touched only when a worker gives up spinning. */
    alignas(CPU_POOL_LINE) atomic_uint sleepers;
    pthread_mutex_t mutex;
    pthread_cond_t cond;
    /* Constant after create. */
    alignas(CPU_POOL_LINE) const sy_host *host;
    hwloc_topology_t topo;
    uint32_t n_threads;
    cpu_worker *workers; /* n_threads - 1 entries, lanes 1..n-1 */
};

static inline void cpu_pool_relax(void)
{
#if defined(__x86_64__) || defined(__i386__)
    __builtin_ia32_pause();
#elif defined(__aarch64__)
    __asm__ __volatile__("yield");
#endif
}

static void cpu_pool_log(const cpu_pool *pool, sy_log_level level, const char *msg)
{
    if (pool->host->log)
        pool->host->log(pool->host->ctx, level, msg);
}

/* Waits until the generation differs from |seen| and returns the new one. */
static unsigned cpu_pool_wait_generation(cpu_pool *pool, unsigned seen)
{
    for (unsigned i = 0; i < CPU_POOL_WORKER_SPINS; i++) {
        unsigned g = atomic_load_explicit(&pool->generation, memory_order_acquire);
        if (g != seen)
            return g;
        cpu_pool_relax();
    }
    /* Dekker pairing with cpu_pool_run(): we publish |sleepers| before
     * re-reading |generation|, the dispatcher publishes |generation| before
     * reading |sleepers|; seq_cst guarantees one of us sees the other, and
     * the mutex makes the broadcast land after our wait has begun. */
    pthread_mutex_lock(&pool->mutex);
    atomic_fetch_add_explicit(&pool->sleepers, 1, memory_order_seq_cst);
    unsigned g;
    while ((g = atomic_load_explicit(&pool->generation, memory_order_seq_cst)) == seen)
        pthread_cond_wait(&pool->cond, &pool->mutex);
    atomic_fetch_sub_explicit(&pool->sleepers, 1, memory_order_relaxed);
    pthread_mutex_unlock(&pool->mutex);
    return g;
}

static void *cpu_worker_main(void *arg)
{
    cpu_worker *w = arg;
    cpu_pool *pool = w->pool;
    if (w->cpuset && hwloc_set_cpubind(pool->topo, w->cpuset, HWLOC_CPUBIND_THREAD) != 0) {
        char msg[96];
        snprintf(msg, sizeof msg, "could not pin worker %u to its core; running unpinned",
                 w->index);
        cpu_pool_log(pool, SY_LOG_DEBUG, msg);
    }
    unsigned seen = 0;
    for (;;) {
        seen = cpu_pool_wait_generation(pool, seen);
        if (atomic_load_explicit(&pool->stop, memory_order_acquire))
            break;
        if (w->index < pool->nth)
            pool->fn(pool->ctx, w->index, pool->nth);
        atomic_fetch_add_explicit(&pool->done, 1, memory_order_release);
    }
    return NULL;
}

/* Wakes every worker for the job already stored in |pool|. */
static void cpu_pool_publish(cpu_pool *pool)
{
    atomic_fetch_add_explicit(&pool->generation, 1, memory_order_seq_cst);
    if (atomic_load_explicit(&pool->sleepers, memory_order_seq_cst) > 0) {
        pthread_mutex_lock(&pool->mutex);
        pthread_cond_broadcast(&pool->cond);
        pthread_mutex_unlock(&pool->mutex);
    }
}

/* Chooses the cpuset lane |lane| is pinned to, or NULL. */
static hwloc_cpuset_t cpu_pool_lane_cpuset(hwloc_topology_t topo, uint32_t lane,
                                           uint32_t n_threads)
{
    int n_cores = hwloc_get_nbobjs_by_type(topo, HWLOC_OBJ_CORE);
    int n_pus = hwloc_get_nbobjs_by_type(topo, HWLOC_OBJ_PU);
    hwloc_obj_t obj = NULL;
    if (n_cores > 0 && n_threads <= (uint32_t)n_cores)
        obj = hwloc_get_obj_by_type(topo, HWLOC_OBJ_CORE, lane);
    else if (n_pus > 0 && n_threads <= (uint32_t)n_pus)
        obj = hwloc_get_obj_by_type(topo, HWLOC_OBJ_PU, lane);
    if (!obj || !obj->cpuset)
        return NULL;
    return hwloc_bitmap_dup(obj->cpuset);
}

static void cpu_pool_stop_workers(cpu_pool *pool)
{
    atomic_store_explicit(&pool->stop, true, memory_order_release);
    cpu_pool_publish(pool);
    for (uint32_t i = 0; i + 1 < pool->n_threads; i++) {
        if (pool->workers[i].started)
            pthread_join(pool->workers[i].thread, NULL);
        pool->workers[i].started = false;
    }
}

static void cpu_pool_free(cpu_pool *pool)
{
    const sy_host *host = pool->host;
    if (pool->workers) {
        for (uint32_t i = 0; i + 1 < pool->n_threads; i++)
            if (pool->workers[i].cpuset)
                hwloc_bitmap_free(pool->workers[i].cpuset);
        host->free(host->ctx, pool->workers);
    }
    pthread_cond_destroy(&pool->cond);
    pthread_mutex_destroy(&pool->mutex);
    host->free(host->ctx, pool);
}

sy_status cpu_pool_create(const sy_host *host, hwloc_topology_t topo, uint32_t n_threads,
                          cpu_pool **out_pool)
{
    *out_pool = NULL;
    if (n_threads == 0)
        return SY_E_INVALID_ARG;
    cpu_pool *pool = host->alloc(host->ctx, sizeof *pool, CPU_POOL_LINE);
    if (!pool)
        return SY_E_NO_MEMORY;
    memset(pool, 0, sizeof *pool);
    atomic_init(&pool->generation, 0);
    atomic_init(&pool->done, 0);
    atomic_init(&pool->sleepers, 0);
    atomic_init(&pool->stop, false);
    pool->host = host;
    pool->topo = topo;
    pool->n_threads = n_threads;
    pthread_mutex_init(&pool->mutex, NULL);
    pthread_cond_init(&pool->cond, NULL);
    if (n_threads == 1) {
        *out_pool = pool;
        return SY_OK;
    }

    size_t bytes = sizeof(cpu_worker) * (n_threads - 1);
    pool->workers = host->alloc(host->ctx, bytes, CPU_POOL_LINE);
    if (!pool->workers) {
        cpu_pool_free(pool);
        return SY_E_NO_MEMORY;
    }
    memset(pool->workers, 0, bytes);
    for (uint32_t i = 0; i + 1 < n_threads; i++) {
        cpu_worker *w = &pool->workers[i];
        w->pool = pool;
        w->index = i + 1;
        w->cpuset = topo ? cpu_pool_lane_cpuset(topo, w->index, n_threads) : NULL;
    }
    for (uint32_t i = 0; i + 1 < n_threads; i++) {
        cpu_worker *w = &pool->workers[i];
        if (pthread_create(&w->thread, NULL, cpu_worker_main, w) != 0) {
            cpu_pool_stop_workers(pool);
            cpu_pool_free(pool);
            return SY_E_DEVICE;
        }
        w->started = true;
    }
    *out_pool = pool;
    return SY_OK;
}

void cpu_pool_destroy(cpu_pool *pool)
{
    if (!pool)
        return;
    cpu_pool_stop_workers(pool);
    cpu_pool_free(pool);
}

uint32_t cpu_pool_size(const cpu_pool *pool)
{
    return pool->n_threads;
}

void cpu_pool_run(cpu_pool *pool, cpu_task_fn fn, void *ctx, uint32_t nth)
{
    if (nth > pool->n_threads)
        nth = pool->n_threads;
    if (nth <= 1) {
        fn(ctx, 0, 1);
        return;
    }
    pool->fn = fn;
    pool->ctx = ctx;
    pool->nth = nth;
    atomic_store_explicit(&pool->done, 0, memory_order_relaxed);
    cpu_pool_publish(pool);

    fn(ctx, 0, nth);

    unsigned want = pool->n_threads - 1;
    unsigned spins = 0;
    while (atomic_load_explicit(&pool->done, memory_order_acquire) != want) {
        if (spins < CPU_POOL_CALLER_SPINS) {
            spins++;
            cpu_pool_relax();
        } else {
            sched_yield();
        }
    }
}
