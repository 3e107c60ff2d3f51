/* Unit tests of the CPU plugin's thread pool, compiled straight into the
 * test (the plugin exports nothing but its query symbol). */
#include <criterion/criterion.h>
#include <hwloc.h>
#include <pthread.h>
#include <stdatomic.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>
#include <unistd.h>

#include "cpu_threadpool.h"

static void *pool_alloc(void *ctx, size_t size, size_t align)
{
    void *p = NULL;
    return posix_memalign(&p, align < sizeof(void *) ? sizeof(void *) : align, size ? size : 1) == 0
               ? p
               : NULL;
}

static void pool_free(void *ctx, void *ptr)
{
    free(ptr);
}

static void pool_host_init(sy_host *h)
{
    memset(h, 0, sizeof *h);
    h->abi_version = SY_PLUGIN_ABI_VERSION;
    h->struct_size = sizeof *h;
    h->alloc = pool_alloc;
    h->free = pool_free;
}

#define POOL_MAX_CHUNKS 16

/* Lives on the dispatching thread's stack, one per dispatch: a worker that
 * touched it after cpu_pool_run() returned would corrupt the next one. */
typedef struct pool_job {
    atomic_uint runs[POOL_MAX_CHUNKS];
    atomic_uint bad;
    uint32_t n_threads;
    uint32_t want_nth;
} pool_job;

static void pool_count_task(void *ctx, uint32_t ith, uint32_t nth, uint32_t lane)
{
    pool_job *job = ctx;
    if (nth != job->want_nth || ith >= nth || lane >= job->n_threads)
        atomic_fetch_add(&job->bad, 1);
    else
        atomic_fetch_add(&job->runs[ith], 1);
}

/* The next state of a xorshift generator (the tests' random choices). */
static uint64_t pool_rand(uint64_t s)
{
    s ^= s << 13;
    s ^= s >> 7;
    s ^= s << 17;
    return s;
}

/* |spin_ns|: the workers' spin time, or UINT64_MAX to keep the default. */
static void run_dispatches(uint32_t n_threads, bool pin, uint32_t n_dispatches, uint64_t seed,
                           uint64_t spin_ns)
{
    sy_host host;
    pool_host_init(&host);
    hwloc_topology_t topo;
    cr_assert_eq(hwloc_topology_init(&topo), 0);
    cr_assert_eq(hwloc_topology_load(topo), 0);
    cpu_pool *pool = NULL;
    cr_assert_eq(cpu_pool_create(&host, topo, n_threads, pin, &pool), SY_OK);
    cr_assert_eq(cpu_pool_size(pool), n_threads);
    if (spin_ns != UINT64_MAX)
        cpu_pool_set_spin(pool, spin_ns);

    uint64_t s = seed | 1;
    for (uint32_t d = 0; d < n_dispatches; d++) {
        s = pool_rand(s);
        const uint32_t nth = 1 + (uint32_t)(s % POOL_MAX_CHUNKS);
        const uint32_t eff = nth < n_threads ? nth : n_threads;
        pool_job job;
        memset(&job, 0, sizeof job);
        job.n_threads = n_threads;
        job.want_nth = eff;
        cpu_pool_run(pool, pool_count_task, &job, nth);
        cr_assert_eq(atomic_load(&job.bad), 0, "dispatch %u (seed %llu): wrong chunk arguments", d,
                     (unsigned long long)seed);
        for (uint32_t i = 0; i < POOL_MAX_CHUNKS; i++)
            cr_assert_eq(atomic_load(&job.runs[i]), i < eff ? 1u : 0u,
                         "dispatch %u of %u threads (seed %llu): chunk %u of %u ran %u times", d,
                         n_threads, (unsigned long long)seed, i, eff, atomic_load(&job.runs[i]));
        /* Now and then let the workers fall asleep, to cover the wake path. */
        if (d % 500 == 499)
            usleep(3000);
    }
    cpu_pool_destroy(pool);
    hwloc_topology_destroy(topo);
}

static uint64_t pool_seed(void)
{
    struct timespec ts;
    clock_gettime(CLOCK_REALTIME, &ts);
    return (uint64_t)ts.tv_nsec ^ ((uint64_t)ts.tv_sec << 20) ^ (uint64_t)getpid();
}

Test(cpu_pool, runs_every_chunk_exactly_once_per_dispatch)
{
    const uint64_t seed = pool_seed();
    for (uint32_t n = 1; n <= 4; n++)
        run_dispatches(n, true, 3000, seed + n, UINT64_MAX);
}

Test(cpu_pool, runs_every_chunk_exactly_once_with_more_threads_than_cores)
{
    const uint64_t seed = pool_seed();
    run_dispatches(9, true, 2000, seed, UINT64_MAX);
    run_dispatches(5, false, 2000, seed + 1, UINT64_MAX);
}

/* Workers that never spin sleep after every job: each dispatch goes
 * through the sleep and wake-up path. */
Test(cpu_pool, runs_every_chunk_exactly_once_when_workers_sleep_after_every_job)
{
    const uint64_t seed = pool_seed();
    for (uint32_t n = 2; n <= 4; n++)
        run_dispatches(n, true, 2000, seed + n, 0);
}

Test(cpu_pool, stops_workers_that_are_asleep)
{
    sy_host host;
    pool_host_init(&host);
    cpu_pool *pool = NULL;
    cr_assert_eq(cpu_pool_create(&host, NULL, 4, false, &pool), SY_OK);
    usleep(50000); /* past the spin phase: every worker sleeps */
    pool_job job;
    memset(&job, 0, sizeof job);
    job.n_threads = 4;
    job.want_nth = 4;
    cpu_pool_run(pool, pool_count_task, &job, 4);
    for (uint32_t i = 0; i < 4; i++)
        cr_assert_eq(atomic_load(&job.runs[i]), 1u);
    usleep(50000);
    cpu_pool_destroy(pool);
}

#define POOL_MAX_ITEMS 200

typedef struct pool_items_job {
    atomic_uint runs[POOL_MAX_ITEMS];
    atomic_uint bad;
    uint32_t n_threads;
    int64_t max_claim; /* most items per call where more than one lane runs */
} pool_items_job;

static void pool_count_item(void *ctx, int64_t first, int64_t end, uint32_t lane)
{
    pool_items_job *job = ctx;
    if (first < 0 || end > POOL_MAX_ITEMS || first >= end || end - first > job->max_claim ||
        lane >= job->n_threads) {
        atomic_fetch_add(&job->bad, 1);
        return;
    }
    for (int64_t item = first; item < end; item++)
        atomic_fetch_add(&job->runs[item], 1);
}

/* Sets up |job| for a dispatch of |n_items| with at most |max_claim| per
 * claim on |nth| lanes of a pool of |n_threads|: on one lane (after the
 * clamps) every item comes in one call. */
static void pool_items_init(pool_items_job *job, uint32_t n_threads, int64_t n_items,
                            int64_t max_claim, uint32_t nth)
{
    memset(job, 0, sizeof *job);
    job->n_threads = n_threads;
    uint32_t lanes = nth < n_threads ? nth : n_threads;
    lanes = (int64_t)lanes < n_items ? lanes : (uint32_t)(n_items > 0 ? n_items : 1);
    job->max_claim = lanes <= 1 ? POOL_MAX_ITEMS : max_claim < 1 ? 1 : max_claim;
}

/* Item counts from none to many per lane, fewer items than lanes included,
 * with spinning and with sleeping workers. */
Test(cpu_pool, runs_every_item_exactly_once_per_dispatch)
{
    const uint64_t seed = pool_seed();
    sy_host host;
    pool_host_init(&host);
    for (uint32_t n_threads = 1; n_threads <= 4; n_threads++) {
        for (int spin = 0; spin < 2; spin++) {
            cpu_pool *pool = NULL;
            cr_assert_eq(cpu_pool_create(&host, NULL, n_threads, false, &pool), SY_OK);
            if (spin == 0)
                cpu_pool_set_spin(pool, 0);
            uint64_t s = (seed + n_threads) | 1;
            for (uint32_t d = 0; d < 1000; d++) {
                s = pool_rand(s);
                const int64_t n_items = (int64_t)(s % (POOL_MAX_ITEMS + 1));
                const uint32_t nth = 1 + (uint32_t)((s >> 16) % 8);
                const int64_t claim = (int64_t)((s >> 24) % 18); /* 0 and 1 both mean 1 */
                pool_items_job job;
                pool_items_init(&job, n_threads, n_items, claim, nth);
                cpu_pool_run_items(pool, pool_count_item, &job, n_items, claim, nth);
                cr_assert_eq(atomic_load(&job.bad), 0, "dispatch %u (seed %llu): bad item or lane",
                             d, (unsigned long long)seed);
                for (int64_t i = 0; i < POOL_MAX_ITEMS; i++)
                    cr_assert_eq(atomic_load(&job.runs[i]), i < n_items ? 1u : 0u,
                                 "dispatch %u, %u threads, %lld items on %u lanes (seed %llu): "
                                 "item %lld ran %u times",
                                 d, n_threads, (long long)n_items, nth, (unsigned long long)seed,
                                 (long long)i, atomic_load(&job.runs[i]));
            }
            cpu_pool_destroy(pool);
        }
    }
}

/* A lane stalled inside an item job (preempted, or a slow core) holds only
 * the items it has claimed; the other lane takes all the rest.  Lane 1's
 * first item waits for lane 0 to have run every item but
 * POOL_MAX_HELD (or gives up after two seconds): a lane that claimed more
 * of its home range at once leaves lane 0 short.  (Lane 0 counts an item
 * as it starts it.) */
#define POOL_STALL_ITEMS 40
#define POOL_MAX_HELD 4

typedef struct pool_stall_job {
    atomic_uint runs[POOL_STALL_ITEMS];
    atomic_uint lane0_runs;
    atomic_bool stalled;
} pool_stall_job;

static double pool_now_s(void)
{
    struct timespec ts;
    clock_gettime(CLOCK_MONOTONIC, &ts);
    return (double)ts.tv_sec + 1e-9 * (double)ts.tv_nsec;
}

static void pool_stall_one(pool_stall_job *job, int64_t item, uint32_t lane)
{
    if (lane == 0) {
        /* Lane 0's first item waits for lane 1 to have come (or 50 ms):
         * alone, it ran all 40 tiny items before the worker woke up. */
        if (atomic_fetch_add(&job->lane0_runs, 1) == 0) {
            const double give_up = pool_now_s() + 0.05;
            while (!atomic_load(&job->stalled) && pool_now_s() < give_up)
                ;
        }
    } else if (!atomic_exchange(&job->stalled, true)) {
        const double give_up = pool_now_s() + 2.0;
        while (atomic_load(&job->lane0_runs) < POOL_STALL_ITEMS - POOL_MAX_HELD &&
               pool_now_s() < give_up)
            ;
    }
    atomic_fetch_add(&job->runs[item], 1);
}

static void pool_stall_item(void *ctx, int64_t first, int64_t end, uint32_t lane)
{
    for (int64_t item = first; item < end; item++)
        pool_stall_one(ctx, item, lane);
}

typedef struct pool_tail {
    pool_items_job *job;
    pthread_t caller;
    int64_t n_items;
    bool one_lane;
    unsigned calls, off_caller, early;
} pool_tail;

static void pool_count_tail(void *ctx)
{
    pool_tail *t = ctx;
    t->calls++;
    if (!pthread_equal(pthread_self(), t->caller))
        t->off_caller++;
    /* On one lane every item ran before the tail. */
    for (int64_t i = 0; t->one_lane && i < t->n_items; i++)
        if (atomic_load(&t->job->runs[i]) != 1)
            t->early++;
}

/* The tail of an item job runs once per dispatch, on the calling thread,
 * on one lane after every item, and the items still run exactly once. */
Test(cpu_pool, runs_the_tail_once_on_the_caller)
{
    sy_host host;
    pool_host_init(&host);
    const int64_t counts[] = {0, 1, 3, 37, POOL_MAX_ITEMS};
    for (uint32_t n_threads = 1; n_threads <= 3; n_threads++) {
        cpu_pool *pool = NULL;
        cr_assert_eq(cpu_pool_create(&host, NULL, n_threads, false, &pool), SY_OK);
        for (uint32_t d = 0; d < 200; d++) {
            const int64_t n_items = counts[d % 5];
            const uint32_t nth = 1 + d % 3;
            pool_items_job job;
            pool_items_init(&job, n_threads, n_items, 4, nth);
            pool_tail t = {.job = &job, .caller = pthread_self(), .n_items = n_items,
                           .one_lane = job.max_claim == POOL_MAX_ITEMS};
            cpu_pool_run_items_tail(pool, pool_count_item, &job, n_items, 4, 0, nth,
                                    pool_count_tail, &t);
            cr_assert_eq(t.calls, 1, "%u threads, %lld items on %u lanes: the tail ran %u times",
                         n_threads, (long long)n_items, nth, t.calls);
            cr_assert_eq(t.off_caller, 0, "the tail ran off the calling thread");
            cr_assert_eq(t.early, 0, "on one lane the tail ran before %u items", t.early);
            cr_assert_eq(atomic_load(&job.bad), 0);
            for (int64_t i = 0; i < n_items; i++)
                cr_assert_eq(atomic_load(&job.runs[i]), 1u, "item %lld ran %u times",
                             (long long)i, atomic_load(&job.runs[i]));
        }
        cpu_pool_destroy(pool);
    }
}

typedef struct pool_keep_job {
    pool_items_job count;
    atomic_uint lane[POOL_MAX_ITEMS];
} pool_keep_job;

/* Items of about a microsecond each, so that workers come in time to
 * take some. */
static void pool_keep_item(void *ctx, int64_t first, int64_t end, uint32_t lane)
{
    pool_keep_job *job = ctx;
    pool_count_item(&job->count, first, end, lane);
    for (int64_t item = first; item < end && item < POOL_MAX_ITEMS; item++) {
        atomic_store(&job->lane[item], lane);
        const double until = pool_now_s() + 1e-6;
        while (pool_now_s() < until)
            ;
    }
}

/* With |keep|, the last items of every lane's range run on the calling
 * lane (lane 0), the others anywhere, each exactly once; and the workers
 * still take their share. */
Test(cpu_pool, leaves_the_last_items_of_every_range_to_the_caller)
{
    const uint64_t seed = pool_seed();
    sy_host host;
    pool_host_init(&host);
    for (uint32_t n_threads = 2; n_threads <= 4; n_threads++) {
        cpu_pool *pool = NULL;
        cr_assert_eq(cpu_pool_create(&host, NULL, n_threads, false, &pool), SY_OK);
        uint64_t s = (seed + n_threads) | 1;
        uint64_t by_workers = 0;
        for (uint32_t d = 0; d < 1000; d++) {
            s = pool_rand(s);
            const int64_t n_items = 1 + (int64_t)(s % POOL_MAX_ITEMS);
            const uint32_t nth = 2 + (uint32_t)((s >> 16) % (n_threads - 1));
            const int64_t claim = 1 + (int64_t)((s >> 24) % 16);
            const int64_t keep = (int64_t)((s >> 32) % 5);
            pool_keep_job job;
            memset(&job, 0, sizeof job);
            pool_items_init(&job.count, n_threads, n_items, claim, nth);
            cpu_pool_run_items_tail(pool, pool_keep_item, &job, n_items, claim, keep, nth, NULL,
                                    NULL);
            cr_assert_eq(atomic_load(&job.count.bad), 0, "dispatch %u (seed %llu)", d,
                         (unsigned long long)seed);
            const uint32_t lanes = (int64_t)nth < n_items ? nth : (uint32_t)n_items;
            const int64_t smallest = n_items / lanes;
            const int64_t kept = keep < smallest ? keep : smallest;
            for (uint32_t r = 0; r < lanes && lanes > 1; r++) {
                const int64_t end = n_items * (r + 1) / lanes;
                for (int64_t i = end - kept; i < end; i++)
                    cr_assert_eq(atomic_load(&job.lane[i]), 0u,
                                 "dispatch %u (seed %llu), %lld items on %u lanes, keep %lld: "
                                 "item %lld of range %u ran on lane %u",
                                 d, (unsigned long long)seed, (long long)n_items, lanes,
                                 (long long)keep, (long long)i, r, atomic_load(&job.lane[i]));
            }
            for (int64_t i = 0; i < n_items; i++) {
                cr_assert_eq(atomic_load(&job.count.runs[i]), 1u, "item %lld ran %u times",
                             (long long)i, atomic_load(&job.count.runs[i]));
                by_workers += atomic_load(&job.lane[i]) != 0;
            }
        }
        cr_assert_gt(by_workers, 0, "%u threads: the workers ran no item in 1000 dispatches",
                     n_threads);
        cpu_pool_destroy(pool);
    }
}

Test(cpu_pool, a_stalled_lane_holds_only_a_few_items)
{
    sy_host host;
    pool_host_init(&host);
    cpu_pool *pool = NULL;
    cr_assert_eq(cpu_pool_create(&host, NULL, 2, false, &pool), SY_OK);
    bool stalled_once = false;
    for (int d = 0; d < 200; d++) {
        pool_stall_job job;
        memset(&job, 0, sizeof job);
        cpu_pool_run_items(pool, pool_stall_item, &job, POOL_STALL_ITEMS, POOL_MAX_HELD, 2);
        for (int i = 0; i < POOL_STALL_ITEMS; i++)
            cr_assert_eq(atomic_load(&job.runs[i]), 1u, "dispatch %d: item %d ran %u times", d,
                         i, atomic_load(&job.runs[i]));
        if (!atomic_load(&job.stalled))
            continue; /* lane 1 came too late to run any item */
        stalled_once = true;
        cr_assert_geq(atomic_load(&job.lane0_runs), POOL_STALL_ITEMS - POOL_MAX_HELD,
                      "dispatch %d: lane 0 ran %u of %d items while lane 1 stalled", d,
                      atomic_load(&job.lane0_runs), POOL_STALL_ITEMS);
    }
    cr_assert(stalled_once, "lane 1 never ran an item in 200 dispatches");
    cpu_pool_destroy(pool);
}

/* Item jobs and chunk jobs of random widths back to back, and destroy
 * right after an item job: each dispatch runs its own work exactly once
 * and no worker reaches into a job that has returned. */
Test(cpu_pool, dispatches_of_both_kinds_follow_an_item_job)
{
    const uint64_t seed = pool_seed();
    sy_host host;
    pool_host_init(&host);
    for (uint32_t n_threads = 2; n_threads <= 4; n_threads++) {
        cpu_pool *pool = NULL;
        cr_assert_eq(cpu_pool_create(&host, NULL, n_threads, false, &pool), SY_OK);
        uint64_t s = (seed + n_threads) | 1;
        for (uint32_t d = 0; d < 2000; d++) {
            s = pool_rand(s);
            const uint32_t nth = 1 + (uint32_t)((s >> 8) % n_threads);
            if (s % 3 == 0) {
                pool_job job;
                memset(&job, 0, sizeof job);
                job.n_threads = n_threads;
                job.want_nth = nth;
                cpu_pool_run(pool, pool_count_task, &job, nth);
                for (uint32_t c = 0; c < nth; c++)
                    cr_assert_eq(atomic_load(&job.runs[c]), 1u, "dispatch %u: chunk %u", d, c);
                cr_assert_eq(atomic_load(&job.bad), 0, "dispatch %u (seed %llu)", d,
                             (unsigned long long)seed);
            } else {
                const int64_t n_items = (int64_t)((s >> 20) % (POOL_MAX_ITEMS + 1));
                const int64_t claim = 1 + (int64_t)((s >> 32) % 16);
                pool_items_job job;
                pool_items_init(&job, n_threads, n_items, claim, nth);
                cpu_pool_run_items(pool, pool_count_item, &job, n_items, claim, nth);
                for (int64_t i = 0; i < POOL_MAX_ITEMS; i++)
                    cr_assert_eq(atomic_load(&job.runs[i]), i < n_items ? 1u : 0u,
                                 "dispatch %u (seed %llu): item %lld of %lld ran %u times", d,
                                 (unsigned long long)seed, (long long)i, (long long)n_items,
                                 atomic_load(&job.runs[i]));
                cr_assert_eq(atomic_load(&job.bad), 0);
                /* The job struct dies here: a worker calling the item
                 * function late would count into the next one. */
            }
        }
        pool_items_job last;
        pool_items_init(&last, n_threads, POOL_MAX_ITEMS, 4, n_threads);
        cpu_pool_run_items(pool, pool_count_item, &last, POOL_MAX_ITEMS, 4, n_threads);
        cpu_pool_destroy(pool);
        for (int64_t i = 0; i < POOL_MAX_ITEMS; i++)
            cr_assert_eq(atomic_load(&last.runs[i]), 1u, "last job: item %lld", (long long)i);
    }
}

Test(cpu_pool, refuses_zero_threads)
{
    sy_host host;
    pool_host_init(&host);
    cpu_pool *pool = (cpu_pool *)&host;
    cr_assert_eq(cpu_pool_create(&host, NULL, 0, false, &pool), SY_E_INVALID_ARG);
    cr_assert_null(pool);
}

/* The adaptive spin: short while 3 or more of the last 8 looks saw an
 * involuntary context switch of the caller (a new pool counts as busy),
 * long otherwise, so a preemption now and then (kernel threads) leaves it
 * long; cpu_pool_set_spin turns it off.  Real dispatches (which look at
 * getrusage every 64) leave it at one of the two values. */
Test(cpu_pool, spins_long_unless_the_caller_is_often_preempted)
{
    sy_host host;
    pool_host_init(&host);
    cpu_pool *pool = NULL;
    cr_assert_eq(cpu_pool_create(&host, NULL, 2, false, &pool), SY_OK);
    cr_assert_eq(cpu_pool_spin(pool), CPU_POOL_SPIN_NS);
    for (int i = 0; i < 4000; i++) {
        pool_job job;
        memset(&job, 0, sizeof job);
        job.n_threads = 2;
        job.want_nth = 2;
        cpu_pool_run(pool, pool_count_task, &job, 2);
    }
    const uint64_t now = cpu_pool_spin(pool);
    cr_assert(now == CPU_POOL_SPIN_NS || now == CPU_POOL_SPIN_QUIET_NS, "spin %llu ns",
              (unsigned long long)now);

    long n = 1000000;
    cpu_pool_spin_look(pool, ++n); /* a switch since the dispatches' last look */
    for (int quiet = 1; quiet <= 8; quiet++)
        cpu_pool_spin_look(pool, n);
    cr_assert_eq(cpu_pool_spin(pool), CPU_POOL_SPIN_QUIET_NS, "after 8 quiet looks");
    /* preempted, quiet, preempted: 2 of 8, still long */
    cpu_pool_spin_look(pool, ++n);
    cpu_pool_spin_look(pool, n);
    cpu_pool_spin_look(pool, n += 3);
    cr_assert_eq(cpu_pool_spin(pool), CPU_POOL_SPIN_QUIET_NS, "2 preempted looks of 8");
    cpu_pool_spin_look(pool, ++n);
    cr_assert_eq(cpu_pool_spin(pool), CPU_POOL_SPIN_NS, "3 preempted looks of 8");
    /* the oldest of the three leaves the window at the fifth quiet look */
    for (int quiet = 1; quiet <= 5; quiet++) {
        cpu_pool_spin_look(pool, n);
        cr_assert_eq(cpu_pool_spin(pool), quiet >= 5 ? CPU_POOL_SPIN_QUIET_NS : CPU_POOL_SPIN_NS,
                     "after %d quiet looks", quiet);
    }
    cpu_pool_set_spin(pool, 1234);
    for (int i = 0; i < 8; i++)
        cpu_pool_spin_look(pool, i < 4 ? n : ++n);
    cr_assert_eq(cpu_pool_spin(pool), 1234u, "a fixed spin stays");
    cpu_pool_destroy(pool);
}

/* The binding of the calling thread, newly allocated. */
static hwloc_cpuset_t pool_thread_binding(hwloc_topology_t topo)
{
    hwloc_cpuset_t set = hwloc_bitmap_alloc();
    cr_assert_not_null(set);
    cr_assert_eq(hwloc_get_cpubind(topo, set, HWLOC_CPUBIND_THREAD), 0);
    return set;
}

/* Runs one dispatch of two chunks on |pool|, both of which must run. */
static void run_two_chunks(cpu_pool *pool)
{
    pool_job job = {.n_threads = 2, .want_nth = 2};
    cpu_pool_run(pool, pool_count_task, &job, 2);
    cr_assert_eq(atomic_load(&job.runs[0]) + atomic_load(&job.runs[1]), 2u);
}

/* A pinned pool keeps the thread that dispatches off its workers' cores
 * and gives it its binding back when destroyed; an unpinned one leaves
 * the binding alone.  On one core there is no worker core to keep off. */
Test(cpu_pool, keeps_the_caller_off_the_workers_cores)
{
    sy_host host;
    pool_host_init(&host);
    hwloc_topology_t topo;
    cr_assert_eq(hwloc_topology_init(&topo), 0);
    cr_assert_eq(hwloc_topology_load(topo), 0);
    if (hwloc_get_nbobjs_by_type(topo, HWLOC_OBJ_CORE) < 2) {
        hwloc_topology_destroy(topo);
        cr_skip_test("one core: no worker is pinned apart from the caller");
    }
    const hwloc_cpuset_t worker_core = hwloc_get_obj_by_type(topo, HWLOC_OBJ_CORE, 1)->cpuset;
    hwloc_cpuset_t before = pool_thread_binding(topo);
    cr_assert(hwloc_bitmap_intersects(before, worker_core), "the test thread starts unbound");

    for (int pin = 0; pin < 2; pin++) {
        cpu_pool *pool = NULL;
        cr_assert_eq(cpu_pool_create(&host, topo, 2, pin, &pool), SY_OK);
        run_two_chunks(pool);
        hwloc_cpuset_t during = pool_thread_binding(topo);
        if (pin) {
            cr_assert(!hwloc_bitmap_intersects(during, worker_core), "pinned: caller kept off");
            cr_assert(hwloc_bitmap_isincluded(during, before), "within its old binding");
        } else {
            cr_assert(hwloc_bitmap_isequal(during, before), "unpinned: binding unchanged");
        }
        cpu_pool_destroy(pool);
        hwloc_cpuset_t after = pool_thread_binding(topo);
        cr_assert(hwloc_bitmap_isequal(after, before), "binding given back (pin %d)", pin);
        hwloc_bitmap_free(during);
        hwloc_bitmap_free(after);
    }

    /* A caller bound to the worker's core alone stays there, and runs. */
    cr_assert_eq(hwloc_set_cpubind(topo, worker_core, HWLOC_CPUBIND_THREAD), 0);
    cpu_pool *pool = NULL;
    cr_assert_eq(cpu_pool_create(&host, topo, 2, true, &pool), SY_OK);
    run_two_chunks(pool);
    hwloc_cpuset_t during = pool_thread_binding(topo);
    cr_assert(hwloc_bitmap_isequal(during, worker_core), "a binding with no other core is kept");
    cpu_pool_destroy(pool);
    cr_assert_eq(hwloc_set_cpubind(topo, before, HWLOC_CPUBIND_THREAD), 0);
    hwloc_bitmap_free(during);
    hwloc_bitmap_free(before);
    hwloc_topology_destroy(topo);
}
