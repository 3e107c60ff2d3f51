/* Thread pool: generation-counter wake-up with spin-then-sleep workers and
 * chunks claimed from an atomic counter (see cpu_threadpool.h). */
#include "cpu_threadpool.h"

#include <limits.h>
#include <pthread.h>
#include <sched.h>
#include <stdalign.h>
#include <stdatomic.h>
#include <stddef.h>
#include <stdio.h>
#include <string.h>
#include <sys/resource.h>
#include <time.h>
#if defined(__linux__)
#include <linux/futex.h>
#include <sys/syscall.h>
#include <unistd.h>
#endif

#define CPU_POOL_LINE 64
/* Pause iterations between two looks at the clock while a worker spins
 * (some microseconds). */
#define CPU_POOL_CLOCK_EVERY 64u
/* After this long a spinning worker yields its core at every look at the
 * clock: on a quiet machine sched_yield() returns at once, on a busy one
 * the core goes to another process instead of to the spin (a pure spinner
 * there gathers CPU time that the scheduler makes it pay back, late, when
 * the next job comes). */
#define CPU_POOL_PURE_SPIN_NS UINT64_C(50000)
/* Pause iterations the caller spins for lanes still inside a closed job
 * before it starts yielding its core to them. */
#define CPU_POOL_CALLER_SPINS (1u << 12)
/* Adaptive spin (unless cpu_pool_set_spin fixed it): every this many
 * dispatches the caller looks at whether the OS has preempted it
 * (involuntary context switches) since the last look.  In at most
 * CPU_POOL_BUSY_LOOKS - 1 of the last CPU_POOL_LOOK_WINDOW looks: the
 * cores are ours, and workers spin CPU_POOL_SPIN_QUIET_NS, so that the
 * next dispatch of a step costs a cache-line handoff instead of a futex
 * wake-up.  In more: other processes want these cores; workers spin
 * CPU_POOL_SPIN_NS (a spinning worker there takes CPU time from the step's
 * own lanes and from the other processes).  On the 2-vCPU VM, SmolLM2 tg
 * -t 2: quiet, 6% of looks saw a preemption (kernel threads waking, in
 * clusters); with a CPU hog on the caller's core, 94%.  The earlier rule,
 * short at any preempted look until 4 quiet ones, kept the quiet machine
 * in short spins a good part of the time, its workers asleep between
 * dispatches and the caller paying futex wake-ups. */
#define CPU_POOL_LOOK_EVERY 64u
#define CPU_POOL_LOOK_WINDOW 8u
#define CPU_POOL_BUSY_LOOKS 3u
/* A claim of an item job takes this share of what is left of a range
 * (and at most the job's max_claim items; cpu_pool_items_task): a lane
 * slowed down in the middle of a claim holds only a part of its range
 * from thieves.  Each claim is a locked add that waits for the lane's
 * stores before it: SmolLM2 tg128 -t 2 took 15-16 claims per lane and
 * job with a quarter, 10-11 with half, and with the caller running the
 * last tiles (keep, cpu_pool_run_items_tail) half won, 10 interleaved
 * rounds: outside kernels (main lane) median 2.75% against 2.96%, pool
 * 1.98% against 2.26%, tokens/s pairwise ratio medians 1.009 (SmolLM2)
 * and 1.016 (synth 1B Q4_0).  Without keep the larger last claims had
 * made the caller wait longer at the end, as much as they saved. */
#define CPU_POOL_CLAIM_SHARE 2

/* Entering and leaving a job.  A worker woken for generation g records
 * g in |entered| on its own line, then (seq_cst, a Dekker pairing with
 * the caller) looks at |closed| and at the generation: it runs the job
 * only if the caller has not closed it and not moved on.  Either way it
 * then records g in |left|.  At the end of job g the caller reads each
 * worker's line: |left| == g, done; |entered| == g, wait for |left|;
 * neither, close the job (|closed| = g, seq_cst) and look at |entered|
 * again: still not g, the worker will see the close and touch nothing of
 * the job.  Workers write only their own lines, the caller only the
 * publication line, so a job costs the caller one transfer of each
 * worker's line at its end.  With one job word that both sides changed
 * (workers counted themselves in and out with locked adds, the caller
 * closed it with a compare-exchange) the caller paid for the line at the
 * close, again at the wait, and once more reading the job's fields after
 * a worker had counted itself in (SmolLM2 tg -t 2: a third of the main
 * lane's pool samples). */

/* The items of one home range of cpu_pool_run_items, on its own line: its
 * owner claims them one at a time without moving the line between cores
 * until another lane, out of items of its own, comes to steal. */
typedef struct cpu_pool_range {
    alignas(CPU_POOL_LINE) _Atomic int64_t next;
    int64_t end;
} cpu_pool_range;

/* One worker thread, on its own cache lines. */
typedef struct cpu_worker {
    /* The last generation the worker entered and left (above); written
     * by the worker only. */
    alignas(CPU_POOL_LINE) atomic_uint entered;
    atomic_uint left;
    struct cpu_pool *pool;
    pthread_t thread;
    hwloc_cpuset_t cpuset; /* NULL: not pinned */
    uint32_t lane;         /* >= 1 */
    bool started;
} cpu_worker;

struct cpu_pool {
    /* One cache line holds everything a worker reads to take a job, all
     * of it written by the caller only: the worker's wait brings it over
     * in one transfer.  On four lines of their own (the generation, the
     * job word, the chunk counter, the job) each worker waited for each
     * in turn: 744-1056 TSC cycles from the caller's publication to the
     * worker's first item (SmolLM2 tg128 -t 2, 3 runs). */
    /* Bumped by the caller once per dispatch; workers wait on it. */
    alignas(CPU_POOL_LINE) atomic_uint generation;
    uint32_t n_chunks;
    /* The last job the caller closed to workers that had not entered it
     * (see "Entering and leaving a job" above). */
    atomic_uint closed;
    /* Items at the end of every range that only the calling lane takes
     * (cpu_pool_run_items_tail). */
    uint32_t item_keep;
    /* The job; published by the release store of |generation|. */
    cpu_task_fn fn;
    void *ctx;
    /* The item job of cpu_pool_run_items, or unused. */
    cpu_item_fn item_fn;
    void *item_ctx;
    int64_t item_claim;
    /* Next chunk to claim (cpu_pool_run jobs), on a line of its own: the
     * claims of the workers would otherwise take the publication line
     * from the caller. */
    alignas(CPU_POOL_LINE) atomic_uint next_chunk;
    /* Sleep path, touched only when a worker gives up spinning. */
    alignas(CPU_POOL_LINE) atomic_uint sleepers;
    pthread_mutex_t mutex; /* without futexes only */
    pthread_cond_t cond;
    /* How long an idle worker spins before sleeping (cpu_pool_set_spin,
     * or the adaptive choice). */
    alignas(CPU_POOL_LINE) _Atomic uint64_t spin_ns;
    /* The caller's side of the adaptive spin: off once set_spin fixed it;
     * dispatches until the next look; the involuntary context switches
     * seen at the last look; one bit per look of the last
     * CPU_POOL_LOOK_WINDOW, set where it saw a preemption (the newest in
     * bit 0).  On a line of its own: the caller writes |look_in| at
     * every dispatch, and every wait of a worker reads |spin_ns|. */
    alignas(CPU_POOL_LINE) bool spin_adaptive;
    uint32_t look_in;
    long last_nivcsw;
    uint32_t preempted_looks;
    /* Constant after create, but for |stop| (set once, at destroy). */
    alignas(CPU_POOL_LINE) atomic_bool stop;
    const sy_host *host;
    hwloc_topology_t topo;
    uint32_t n_threads;
    cpu_worker *workers; /* n_threads - 1 entries, lanes 1..n-1 */
    /* The cores the workers are pinned to, or NULL where none is. */
    hwloc_cpuset_t worker_cores;
    /* The thread whose binding the pool narrowed (cpu_pool_keep_caller)
     * and the binding it had before, restored at destroy. */
    bool caller_kept;
    pthread_t caller;
    hwloc_cpuset_t caller_before;
    cpu_pool_range *ranges; /* n_threads entries (cpu_pool_run_items) */
};
_Static_assert(offsetof(struct cpu_pool, item_claim) + sizeof(int64_t) <= CPU_POOL_LINE,
               "a job's publication fits one cache line");

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

static uint64_t cpu_pool_now_ns(void)
{
    struct timespec ts;
    clock_gettime(CLOCK_MONOTONIC, &ts);
    return (uint64_t)ts.tv_sec * 1000000000u + (uint64_t)ts.tv_nsec;
}

/* Sleeps until the generation differs from |seen| and returns the new one.
 * Dekker pairing with cpu_pool_publish(): we publish |sleepers| before
 * re-reading |generation|, the dispatcher publishes |generation| before
 * reading |sleepers|; seq_cst guarantees one of us sees the other.  The
 * futex re-checks the word in the kernel (the mutex does it without
 * futexes), so a bump between our look and the wait is never lost. */
static unsigned cpu_pool_sleep(cpu_pool *pool, unsigned seen)
{
    unsigned g;
#if defined(__linux__)
    atomic_fetch_add_explicit(&pool->sleepers, 1, memory_order_seq_cst);
    while ((g = atomic_load_explicit(&pool->generation, memory_order_seq_cst)) == seen)
        syscall(SYS_futex, (unsigned *)&pool->generation, FUTEX_WAIT_PRIVATE, seen, NULL, NULL,
                0);
    atomic_fetch_sub_explicit(&pool->sleepers, 1, memory_order_relaxed);
#else
    pthread_mutex_lock(&pool->mutex);
    atomic_fetch_add_explicit(&pool->sleepers, 1, memory_order_seq_cst);
    while ((g = atomic_load_explicit(&pool->generation, memory_order_seq_cst)) == seen)
        pthread_cond_wait(&pool->cond, &pool->mutex);
    atomic_fetch_sub_explicit(&pool->sleepers, 1, memory_order_relaxed);
    pthread_mutex_unlock(&pool->mutex);
#endif
    return g;
}

/* Waits until the generation differs from |seen| and returns the new one:
 * spins for up to the pool's spin time (a spinning worker joins the next
 * job with a cache-line handoff instead of a wake-up syscall and a
 * reschedule), then sleeps, so an idle pool costs no CPU once the spin
 * time has passed. */
static unsigned cpu_pool_wait_generation(cpu_pool *pool, unsigned seen)
{
    const uint64_t spin_ns = atomic_load_explicit(&pool->spin_ns, memory_order_relaxed);
    uint64_t start = 0;
    for (unsigned i = 1; spin_ns > 0; i++) {
        unsigned g = atomic_load_explicit(&pool->generation, memory_order_acquire);
        if (g != seen)
            return g;
        cpu_pool_relax();
        if (i % CPU_POOL_CLOCK_EVERY == 0) {
            uint64_t now = cpu_pool_now_ns();
            if (start == 0)
                start = now;
            else if (now - start >= spin_ns)
                break;
            else if (now - start >= CPU_POOL_PURE_SPIN_NS)
                sched_yield();
        }
    }
    return cpu_pool_sleep(pool, seen);
}

static void cpu_pool_items_task(void *arg, uint32_t ith, uint32_t nth, uint32_t lane);

/* Claims and runs chunks until none is left (cpu_pool_run jobs). */
static void cpu_pool_drain(cpu_pool *pool, uint32_t lane)
{
    const uint32_t n = pool->n_chunks;
    for (;;) {
        unsigned c = atomic_fetch_add_explicit(&pool->next_chunk, 1, memory_order_relaxed);
        if (c >= n)
            break;
        pool->fn(pool->ctx, c, n, lane);
    }
}

/* A worker's part of job |g| (see "Entering and leaving a job"): an item
 * job's chunk of its lane (which takes what is left of every range, so it
 * claims no other chunk), or chunks claimed until none is left. */
static void cpu_pool_work(cpu_pool *pool, cpu_worker *w, unsigned g)
{
    atomic_store_explicit(&w->entered, g, memory_order_seq_cst);
    if (atomic_load_explicit(&pool->closed, memory_order_seq_cst) != g &&
        atomic_load_explicit(&pool->generation, memory_order_acquire) == g) {
        /* An item job has per-lane ranges: worker lane i runs chunk i,
         * without claiming chunks. */
        if (pool->fn != cpu_pool_items_task)
            cpu_pool_drain(pool, w->lane);
        else if (w->lane < pool->n_chunks)
            pool->fn(pool->ctx, w->lane, pool->n_chunks, w->lane);
    }
    atomic_store_explicit(&w->left, g, memory_order_release);
}

static void *cpu_worker_main(void *arg)
{
    cpu_worker *w = arg;
    cpu_pool *pool = w->pool;
    if (w->cpuset && hwloc_set_cpubind(pool->topo, w->cpuset, HWLOC_CPUBIND_THREAD) != 0) {
        char msg[96];
        snprintf(msg, sizeof msg, "could not pin worker %u to its core; running unpinned",
                 w->lane);
        cpu_pool_log(pool, SY_LOG_DEBUG, msg);
    }
    unsigned seen = 0;
    for (;;) {
        seen = cpu_pool_wait_generation(pool, seen);
        if (atomic_load_explicit(&pool->stop, memory_order_acquire))
            break;
        cpu_pool_work(pool, w, seen);
    }
    return NULL;
}

/* The items a claim takes from a range with |left| of them: a share of
 * what is left (CPU_POOL_CLAIM_SHARE), at most |most|. */
static inline int64_t cpu_pool_claim_size(int64_t left, int64_t most)
{
    const int64_t take = (left + CPU_POOL_CLAIM_SHARE - 1) / CPU_POOL_CLAIM_SHARE;
    return take < most ? take : most;
}

/* Wakes sleeping workers (a futex wake, or the condition variable). */
static void cpu_pool_wake(cpu_pool *pool)
{
#if defined(__linux__)
    syscall(SYS_futex, (unsigned *)&pool->generation, FUTEX_WAKE_PRIVATE, INT_MAX, NULL, NULL, 0);
#else
    pthread_mutex_lock(&pool->mutex);
    pthread_cond_broadcast(&pool->cond);
    pthread_mutex_unlock(&pool->mutex);
#endif
}

/* A job's publication: the generation moved to |g| (the current one plus
 * one) by a plain release store.  A locked add there (or a fence) waits
 * until every store before it is seen by the other cores: the ranges,
 * lines the workers touched in the last job, each fetched back first.
 * On the 2-vCPU VM that wait was half of the caller's time in
 * cpu_pool_run_items (SmolLM2 decode, -t 2).  Here the stores drain while
 * the caller runs the first share of the job it took before publishing.
 * Without the fence the caller's look at |sleepers| may come before its
 * store is seen: a worker going to sleep in that instant, whose futex
 * looks at the generation before the store lands, sleeps through this
 * job (the caller and the other lanes run its share) and wakes at the
 * next one that sees it asleep.  Stopping uses cpu_pool_publish, which
 * never misses a sleeper. */
static void cpu_pool_publish_job(cpu_pool *pool, unsigned g)
{
    atomic_store_explicit(&pool->generation, g, memory_order_release);
    if (atomic_load_explicit(&pool->sleepers, memory_order_relaxed) > 0)
        cpu_pool_wake(pool);
}

/* Wakes every worker: spinning ones see the generation change, sleeping
 * ones get a wake-up. */
static void cpu_pool_publish(cpu_pool *pool)
{
    atomic_fetch_add_explicit(&pool->generation, 1, memory_order_seq_cst);
    if (atomic_load_explicit(&pool->sleepers, memory_order_seq_cst) > 0)
        cpu_pool_wake(pool);
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
    if (pool->ranges)
        host->free(host->ctx, pool->ranges);
    if (pool->worker_cores)
        hwloc_bitmap_free(pool->worker_cores);
    if (pool->caller_before)
        hwloc_bitmap_free(pool->caller_before);
    pthread_cond_destroy(&pool->cond);
    pthread_mutex_destroy(&pool->mutex);
    host->free(host->ctx, pool);
}

sy_status cpu_pool_create(const sy_host *host, hwloc_topology_t topo, uint32_t n_threads, bool pin,
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
    atomic_init(&pool->closed, 0);
    atomic_init(&pool->next_chunk, 0);
    atomic_init(&pool->sleepers, 0);
    atomic_init(&pool->stop, false);
    atomic_init(&pool->spin_ns, CPU_POOL_SPIN_NS);
    pool->spin_adaptive = true;
    pool->look_in = 1;
    pool->last_nivcsw = -1;
    /* Until looks show otherwise the cores are taken to be busy. */
    pool->preempted_looks = (1u << CPU_POOL_LOOK_WINDOW) - 1;
    pool->host = host;
    pool->topo = topo;
    pool->n_threads = n_threads;
    pthread_mutex_init(&pool->mutex, NULL);
    pthread_cond_init(&pool->cond, NULL);
    pool->ranges = host->alloc(host->ctx, sizeof(cpu_pool_range) * n_threads, CPU_POOL_LINE);
    if (!pool->ranges) {
        cpu_pool_free(pool);
        return SY_E_NO_MEMORY;
    }
    memset(pool->ranges, 0, sizeof(cpu_pool_range) * n_threads);
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
        atomic_init(&w->entered, 0);
        atomic_init(&w->left, 0);
        w->pool = pool;
        w->lane = i + 1;
        w->cpuset = pin && topo ? cpu_pool_lane_cpuset(topo, w->lane, n_threads) : NULL;
        if (!w->cpuset)
            continue;
        if (!pool->worker_cores && !(pool->worker_cores = hwloc_bitmap_alloc())) {
            cpu_pool_free(pool);
            return SY_E_NO_MEMORY;
        }
        hwloc_bitmap_or(pool->worker_cores, pool->worker_cores, w->cpuset);
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
    if (pool->caller_kept && pool->caller_before && pthread_equal(pool->caller, pthread_self()))
        hwloc_set_cpubind(pool->topo, pool->caller_before, HWLOC_CPUBIND_THREAD);
    cpu_pool_stop_workers(pool);
    cpu_pool_free(pool);
}

void cpu_pool_set_spin(cpu_pool *pool, uint64_t spin_ns)
{
    pool->spin_adaptive = false;
    atomic_store_explicit(&pool->spin_ns, spin_ns, memory_order_relaxed);
}

uint64_t cpu_pool_spin(const cpu_pool *pool)
{
    return atomic_load_explicit(&pool->spin_ns, memory_order_relaxed);
}

void cpu_pool_spin_look(cpu_pool *pool, long nivcsw)
{
    if (!pool->spin_adaptive)
        return;
    const long last = pool->last_nivcsw;
    pool->last_nivcsw = nivcsw;
    if (last < 0)
        return;
    pool->preempted_looks = ((pool->preempted_looks << 1) | (nivcsw != last)) &
                            ((1u << CPU_POOL_LOOK_WINDOW) - 1);
    const uint64_t spin = (unsigned)__builtin_popcount(pool->preempted_looks) < CPU_POOL_BUSY_LOOKS
                              ? CPU_POOL_SPIN_QUIET_NS
                              : CPU_POOL_SPIN_NS;
    if (spin != atomic_load_explicit(&pool->spin_ns, memory_order_relaxed))
        atomic_store_explicit(&pool->spin_ns, spin, memory_order_relaxed);
}

/* The caller's periodic look for the adaptive spin (CPU_POOL_LOOK_EVERY). */
static void cpu_pool_adapt_spin(cpu_pool *pool)
{
    if (!pool->spin_adaptive || --pool->look_in > 0)
        return;
    pool->look_in = CPU_POOL_LOOK_EVERY;
#if defined(RUSAGE_THREAD)
    struct rusage ru;
    if (getrusage(RUSAGE_THREAD, &ru) == 0)
        cpu_pool_spin_look(pool, ru.ru_nivcsw);
#endif
}

uint32_t cpu_pool_size(const cpu_pool *pool)
{
    return pool->n_threads;
}

/* Keeps the calling thread off the workers' cores (cpu_threadpool.h), at its
 * first dispatch: after that a pointer compare. */
static void cpu_pool_keep_caller(cpu_pool *pool)
{
    if (!pool->worker_cores || (pool->caller_kept && pthread_equal(pool->caller, pthread_self())))
        return;
    pool->caller_kept = true;
    pool->caller = pthread_self();
    if (pool->caller_before)
        hwloc_bitmap_free(pool->caller_before);
    pool->caller_before = NULL;
    hwloc_cpuset_t now = hwloc_bitmap_alloc(), kept = hwloc_bitmap_alloc();
    if (now && kept && hwloc_get_cpubind(pool->topo, now, HWLOC_CPUBIND_THREAD) == 0) {
        hwloc_bitmap_andnot(kept, now, pool->worker_cores);
        if (hwloc_bitmap_iszero(kept)) {
            cpu_pool_log(pool, SY_LOG_DEBUG, "the calling thread is bound to the workers' cores "
                                             "only; its binding is left as it is");
        } else if (!hwloc_bitmap_isequal(kept, now) &&
                   hwloc_set_cpubind(pool->topo, kept, HWLOC_CPUBIND_THREAD) == 0) {
            pool->caller_before = now;
            now = NULL;
        }
    }
    if (now)
        hwloc_bitmap_free(now);
    if (kept)
        hwloc_bitmap_free(kept);
}

/* Waits until no worker is inside job |g| and none can enter it (see
 * "Entering and leaving a job"). */
static void cpu_pool_finish(cpu_pool *pool, unsigned g)
{
    bool closed = false;
    for (uint32_t i = 0; i + 1 < pool->n_threads; i++) {
        cpu_worker *w = &pool->workers[i];
        if (atomic_load_explicit(&w->left, memory_order_acquire) == g)
            continue;
        if (atomic_load_explicit(&w->entered, memory_order_relaxed) != g) {
            if (!closed) {
                atomic_store_explicit(&pool->closed, g, memory_order_seq_cst);
                closed = true;
            }
            if (atomic_load_explicit(&w->entered, memory_order_seq_cst) != g)
                continue;
        }
        unsigned spins = 0;
        while (atomic_load_explicit(&w->left, memory_order_acquire) != g) {
            if (spins < CPU_POOL_CALLER_SPINS) {
                spins++;
                cpu_pool_relax();
            } else {
                sched_yield();
            }
        }
    }
}

/* Runs a job of |nth| chunks (2 or more) and returns once every lane is
 * out of it.  The caller's chunk 0 is its own from the start and, where
 * |pre| is set, so are the items [pre[0], pre[1]) of an item job: it runs
 * them first, while the stores publishing the job reach the workers. */
static void cpu_pool_go(cpu_pool *pool, cpu_task_fn fn, void *ctx, uint32_t nth,
                        const int64_t *pre, void (*tail)(void *), void *tail_ctx)
{
    cpu_pool_keep_caller(pool);
    cpu_pool_adapt_spin(pool);
    const bool items = fn == cpu_pool_items_task;
    pool->fn = fn;
    pool->ctx = ctx;
    pool->n_chunks = nth;
    if (!items)
        atomic_store_explicit(&pool->next_chunk, 1, memory_order_relaxed);
    const unsigned g = atomic_load_explicit(&pool->generation, memory_order_relaxed) + 1;
    cpu_pool_publish_job(pool, g);

    if (pre)
        pool->item_fn(pool->item_ctx, pre[0], pre[1], 0);
    fn(ctx, 0, nth, 0);
    /* An item job's chunk 0 took what was left of every range. */
    if (!items)
        cpu_pool_drain(pool, 0);
    if (tail)
        tail(tail_ctx);
    cpu_pool_finish(pool, g);
}

void cpu_pool_run(cpu_pool *pool, cpu_task_fn fn, void *ctx, uint32_t nth)
{
    if (nth > pool->n_threads)
        nth = pool->n_threads;
    if (nth <= 1) {
        fn(ctx, 0, 1, 0);
        return;
    }
    cpu_pool_go(pool, fn, ctx, nth, NULL, NULL, NULL);
}

/* Chunk |ith| of an item job: the items of home range |ith|, then those
 * left in the other ranges, from the next one on.  A claim is a locked add
 * (~5 ns; one per small item made them 0.3-0.5% of SmolLM2's decode step
 * at 2 threads) and takes a share of what is left, at most the job's
 * max_claim, so claims shrink to one item as a range runs out and the
 * lanes end within about one item of each other.  A worker lane stops
 * |item_keep| items short of each range's end (cpu_pool_run_items_tail),
 * claiming by compare-exchange so that it never takes one of them. */
static void cpu_pool_items_task(void *arg, uint32_t ith, uint32_t nth, uint32_t lane)
{
    cpu_pool *pool = arg;
    const int64_t most = pool->item_claim;
    const int64_t keep = lane == 0 ? 0 : (int64_t)pool->item_keep;
    for (uint32_t i = 0; i < nth; i++) {
        cpu_pool_range *r = &pool->ranges[(ith + i) % nth];
        const int64_t end = r->end, stop_at = end - keep;
        /* A drained range stays drained: look once before claiming, so
         * thieves do not pull its line back and forth once it is empty.
         * Then each claim's result says what is left: a look before every
         * claim cost a steal two transfers of the line instead of one. */
        int64_t next = atomic_load_explicit(&r->next, memory_order_relaxed);
        while (next < stop_at) {
            const int64_t take = cpu_pool_claim_size(stop_at - next, most);
            int64_t item, stop;
            if (keep == 0) {
                item = atomic_fetch_add_explicit(&r->next, take, memory_order_relaxed);
                if (item >= end)
                    break;
                stop = item + take < end ? item + take : end;
            } else {
                /* On failure |next| is what the range holds now. */
                if (!atomic_compare_exchange_weak_explicit(&r->next, &next, next + take,
                                                           memory_order_relaxed,
                                                           memory_order_relaxed))
                    continue;
                item = next;
                stop = next + take;
            }
            /* The lane's last claim here: fetch the next range's line
             * while the claim runs, for the look that follows it. */
            if (stop >= stop_at && i + 1 < nth)
                __builtin_prefetch(&pool->ranges[(ith + i + 1) % nth].next, 0);
            pool->item_fn(pool->item_ctx, item, stop, lane);
            next = stop;
        }
    }
}

void cpu_pool_run_items(cpu_pool *pool, cpu_item_fn fn, void *ctx, int64_t n_items,
                        int64_t max_claim, uint32_t nth)
{
    cpu_pool_run_items_tail(pool, fn, ctx, n_items, max_claim, 0, nth, NULL, NULL);
}

void cpu_pool_run_items_tail(cpu_pool *pool, cpu_item_fn fn, void *ctx, int64_t n_items,
                             int64_t max_claim, int64_t keep, uint32_t nth,
                             void (*tail)(void *), void *tail_ctx)
{
    if (nth > pool->n_threads)
        nth = pool->n_threads;
    if ((int64_t)nth > n_items)
        nth = n_items > 0 ? (uint32_t)n_items : 1;
    if (nth <= 1) {
        if (n_items > 0)
            fn(ctx, 0, n_items, 0);
        if (tail)
            tail(tail_ctx);
        return;
    }
    for (uint32_t i = 0; i < nth; i++) {
        atomic_store_explicit(&pool->ranges[i].next, n_items * i / nth, memory_order_relaxed);
        pool->ranges[i].end = n_items * (i + 1) / nth;
    }
    pool->item_fn = fn;
    pool->item_ctx = ctx;
    pool->item_claim = max_claim > 1 ? max_claim : 1;
    const int64_t range = n_items / nth; /* the smallest range */
    keep = keep < range ? keep : range;
    pool->item_keep = keep <= 0 ? 0 : keep < UINT32_MAX ? (uint32_t)keep : UINT32_MAX;
    /* The caller's first claim of its home range, taken before any other
     * lane can see the range (a plain store, as the claims' rule sizes
     * it). */
    const int64_t take = cpu_pool_claim_size(pool->ranges[0].end, pool->item_claim);
    const int64_t pre[2] = {0, take};
    atomic_store_explicit(&pool->ranges[0].next, take, memory_order_relaxed);
    /* The release store of the job publishes the ranges. */
    cpu_pool_go(pool, cpu_pool_items_task, pool, nth, take > 0 ? pre : NULL, tail, tail_ctx);
}
