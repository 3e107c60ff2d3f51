/* Host side of the probe: hwloc topology and memory bandwidth measured with
 * 1..N threads, each pinned to its own core, over a buffer well past the
 * last-level cache (4 x L3, at least 64 MiB, at most 512 MiB and a quarter
 * of the available memory), in short timed segments (see BW_SEG_BYTES),
 * within a time budget. The read loop is probe_read.c's. */
#include <hwloc.h>
#include <pthread.h>
#include <stdlib.h>
#include <string.h>
#include <sys/mman.h>

#include "probe.h"
#include "runtime_internal.h"

#define MIB (1024ull * 1024ull)

uint64_t sy__probe_memory_available(void)
{
    FILE *f = fopen("/proc/meminfo", "r");
    if (!f)
        return 0;
    char line[256];
    unsigned long long kib = 0;
    while (fgets(line, sizeof line, f))
        if (sscanf(line, "MemAvailable: %llu kB", &kib) == 1)
            break;
    fclose(f);
    return (uint64_t)kib * 1024u;
}

static void host_cpu_model(char *out, size_t size)
{
    snprintf(out, size, "unknown");
    FILE *f = fopen("/proc/cpuinfo", "r");
    if (!f)
        return;
    char line[512];
    while (fgets(line, sizeof line, f)) {
        if (strncmp(line, "model name", 10) != 0)
            continue;
        const char *v = strchr(line, ':');
        if (!v)
            break;
        v++;
        while (*v == ' ' || *v == '\t')
            v++;
        size_t n = strcspn(v, "\n");
        snprintf(out, size, "%.*s", (int)n, v);
        break;
    }
    fclose(f);
}

static uint64_t host_cache_size(hwloc_topology_t topo, hwloc_obj_type_t type)
{
    hwloc_obj_t o = hwloc_get_obj_by_type(topo, type, 0);
    return o && o->attr ? o->attr->cache.size : 0;
}

sy_status sy__probe_host_topology(sy_runtime *rt, sy_probe *p)
{
    host_cpu_model(p->cpu_model, sizeof p->cpu_model);
    sy_runtime_query_topology(rt, p->topology, sizeof p->topology);
    hwloc_topology_t topo;
    if (hwloc_topology_init(&topo) != 0)
        return SY_E_NO_MEMORY;
    if (hwloc_topology_load(topo) != 0) {
        hwloc_topology_destroy(topo);
        sy__runtime_set_error(rt, "probe: hwloc cannot load the topology");
        return SY_E_DEVICE;
    }
    p->packages = (uint32_t)hwloc_get_nbobjs_by_type(topo, HWLOC_OBJ_PACKAGE);
    p->cores = (uint32_t)hwloc_get_nbobjs_by_type(topo, HWLOC_OBJ_CORE);
    p->pus = (uint32_t)hwloc_get_nbobjs_by_type(topo, HWLOC_OBJ_PU);
    p->numa_nodes = (uint32_t)hwloc_get_nbobjs_by_type(topo, HWLOC_OBJ_NUMANODE);
    p->l1d_bytes = host_cache_size(topo, HWLOC_OBJ_L1CACHE);
    p->l2_bytes = host_cache_size(topo, HWLOC_OBJ_L2CACHE);
    p->l3_bytes = host_cache_size(topo, HWLOC_OBJ_L3CACHE);
    p->memory_total = hwloc_get_root_obj(topo)->total_memory;
    /* hwloc restricts the topology to this process's cpuset by default, so
     * every core listed is usable. */
    p->cores_allowed = p->cores ? p->cores : 1;
    hwloc_topology_destroy(topo);
    p->memory_available = sy__probe_memory_available();
    return SY_OK;
}

/* ----------------------------------------------------------- bandwidth */

/* A run times short segments rather than whole passes: on a shared
 * machine a 50 ms pass over the buffer is nearly always preempted, while
 * most 1 ms segments are not, so the fast end of the segments' times is
 * the memory's and not the scheduler's. The segments still walk the whole
 * buffer in turn, so each one comes from memory, not from the cache. */
#define BW_SEG_BYTES (16 * MIB) /* per thread */
/* Segments a run times at least, whatever its budget, and at most. */
#define BW_MIN_SEGS 8u
#define BW_MAX_SEGS 256u

typedef struct bw_shared {
    hwloc_topology_t topo;
    pthread_barrier_t barrier;
    uint32_t n_threads, max_segs;
    bool copy;
    unsigned char *src, *dst;
    size_t chunk, seg; /* bytes per thread: its part, one segment of it */
    double *times;     /* max_segs, written by thread 0 */
    double t0[SY_PROBE_MAX_THREAD_COUNTS * 16], t1[SY_PROBE_MAX_THREAD_COUNTS * 16];
    double run_budget_s; /* a run stops timing past this, after BW_MIN_SEGS */
    uint32_t done;       /* segments timed, written by thread 0 */
    bool stop;           /* set by thread 0 between segments */
    volatile uint64_t sink;
} bw_shared;

typedef struct bw_thread {
    bw_shared *s;
    uint32_t index;
    pthread_t tid;
} bw_thread;

static uint64_t bw_segment(bw_shared *s, size_t off)
{
    if (s->copy) {
        memcpy(s->dst + off, s->src + off, s->seg);
        return 0;
    }
    return sy__probe_read(s->src + off, s->seg);
}

static void *bw_main(void *arg)
{
    bw_thread *t = arg;
    bw_shared *s = t->s;
    hwloc_obj_t core = hwloc_get_obj_by_type(s->topo, HWLOC_OBJ_CORE, t->index);
    if (core && core->cpuset) {
        hwloc_bitmap_t set = hwloc_bitmap_dup(core->cpuset);
        if (set) {
            hwloc_bitmap_singlify(set);
            hwloc_set_cpubind(s->topo, set, HWLOC_CPUBIND_THREAD);
            hwloc_bitmap_free(set);
        }
    }
    size_t base = s->chunk * t->index, n_seg = s->chunk / s->seg;
    /* One untimed segment: the thread is running on its core and its
     * first TLB misses are behind it before anything counts. */
    uint64_t acc = bw_segment(s, base + (n_seg - 1) * s->seg);
    double start = sy__probe_now();
    for (uint32_t r = 0; r < s->max_segs; r++) {
        pthread_barrier_wait(&s->barrier);
        s->t0[t->index] = sy__probe_now();
        acc += bw_segment(s, base + (r % n_seg) * s->seg);
        s->t1[t->index] = sy__probe_now();
        pthread_barrier_wait(&s->barrier);
        if (t->index == 0) {
            /* From the first thread's start to the last one's end: a
             * thread that started late does not shorten the segment. */
            double lo = s->t0[0], hi = s->t1[0];
            for (uint32_t i = 1; i < s->n_threads; i++) {
                lo = s->t0[i] < lo ? s->t0[i] : lo;
                hi = s->t1[i] > hi ? s->t1[i] : hi;
            }
            s->times[r] = hi - lo;
            s->done = r + 1;
            s->stop = r + 1 >= BW_MIN_SEGS && sy__probe_now() - start > s->run_budget_s;
        }
        /* Everyone sees thread 0's verdict before the next segment. */
        pthread_barrier_wait(&s->barrier);
        if (s->stop)
            break;
    }
    s->sink += acc;
    return NULL;
}

/* Seconds of one segment (|s->seg| bytes on each of |n| threads): the
 * lower decile of the segments timed. Not sy__timing_estimate's quartile:
 * a segment of n threads is clean only when all n ran through it, and on a
 * loaded machine (load 11 on these 2 cores) that is a minority of them;
 * a decile of a hundred segments is still ten of them, not one lucky run
 * (and a segment cannot read faster than the memory lets it). */
static sy_status bw_run(bw_shared *s, uint32_t n, bool copy, size_t bytes, double *out_s)
{
    *out_s = 0;
    s->n_threads = n;
    s->copy = copy;
    s->done = 0;
    s->stop = false;
    s->chunk = (bytes / n) & ~(size_t)4095;
    s->seg = s->chunk < BW_SEG_BYTES ? s->chunk : BW_SEG_BYTES;
    s->chunk -= s->chunk % s->seg;
    bw_thread th[SY_PROBE_MAX_THREAD_COUNTS * 16];
    if (n > sizeof th / sizeof th[0] || s->seg == 0 ||
        pthread_barrier_init(&s->barrier, NULL, n) != 0)
        return SY_E_LIMIT;
    uint32_t started = 0;
    for (; started < n; started++) {
        th[started] = (bw_thread){.s = s, .index = started};
        if (pthread_create(&th[started].tid, NULL, bw_main, &th[started]) != 0)
            break;
    }
    if (started < n) {
        /* The started threads wait at the barrier forever otherwise; there is
         * no clean way out, so this only happens when threads are exhausted. */
        pthread_barrier_destroy(&s->barrier);
        return SY_E_NO_MEMORY;
    }
    for (uint32_t i = 0; i < n; i++)
        pthread_join(th[i].tid, NULL);
    pthread_barrier_destroy(&s->barrier);
    *out_s = sy__quantile(s->times, s->done, 0.1);
    return SY_OK;
}

sy_status sy__probe_host_bandwidth(sy_runtime *rt, sy_probe *p, bool quick, double budget_s)
{
    double start = sy__probe_now();
    uint64_t bytes = p->l3_bytes * 4;
    if (bytes < 64 * MIB)
        bytes = 64 * MIB;
    if (bytes > 512 * MIB)
        bytes = 512 * MIB;
    if (p->memory_available && bytes > p->memory_available / 4)
        bytes = p->memory_available / 4;
    if (quick)
        bytes = 32 * MIB;
    bytes &= ~(uint64_t)(MIB - 1);
    if (bytes < MIB)
        return SY_E_NO_MEMORY;
    p->host_buffer_bytes = bytes;
    bw_shared s = {.max_segs = quick ? BW_MIN_SEGS : BW_MAX_SEGS};
    double times[BW_MAX_SEGS];
    s.times = times;
    if (hwloc_topology_init(&s.topo) != 0)
        return SY_E_NO_MEMORY;
    sy_status st = SY_OK;
    if (hwloc_topology_load(s.topo) != 0) {
        st = SY_E_DEVICE;
        goto out_topology;
    }
    /* The copy uses two halves of the same allocation so that both runs
     * touch the same pages. Huge pages where the kernel gives them on
     * request (THP "madvise"): with 4 KiB pages every 4 KiB read also
     * walks the page table, which is the TLB's cost, not the memory's. */
    void *map = mmap(NULL, (size_t)bytes, PROT_READ | PROT_WRITE, MAP_PRIVATE | MAP_ANONYMOUS, -1, 0);
    if (map == MAP_FAILED) {
        st = SY_E_NO_MEMORY;
        goto out_topology;
    }
    s.src = map;
#ifdef MADV_HUGEPAGE
    madvise(map, (size_t)bytes, MADV_HUGEPAGE);
#endif
    /* Every page faulted in here, before anything is timed. */
    memset(s.src, 1, (size_t)bytes);
    uint32_t cores = p->cores_allowed ? p->cores_allowed : 1;
    uint32_t counts[SY_PROBE_MAX_THREAD_COUNTS], n_counts = 0;
    for (uint32_t t = 1; t <= cores && n_counts < SY_PROBE_MAX_THREAD_COUNTS;
         t = t < 4 || t == cores ? t + 1 : (t * 2 > cores ? cores : t * 2))
        counts[n_counts++] = t;
    p->n_host_bw = 0;
    for (uint32_t k = 0; k < n_counts; k++) {
        /* Each run (read, copy) gets an equal share of what is left, and
         * times BW_MIN_SEGS segments (milliseconds) even past the budget. */
        double left = budget_s - (sy__probe_now() - start);
        s.run_budget_s = left > 0 ? left / (2.0 * (double)(n_counts - k)) : 0;
        double rs, cs;
        st = bw_run(&s, counts[k], false, (size_t)bytes, &rs);
        if (st != SY_OK)
            break;
        size_t rbytes = s.seg * counts[k];
        s.dst = s.src + bytes / 2;
        st = bw_run(&s, counts[k], true, (size_t)bytes / 2, &cs);
        if (st != SY_OK)
            break;
        size_t cbytes = s.seg * counts[k];
        sy_probe_host_bw *b = &p->host_bw[p->n_host_bw++];
        b->threads = counts[k];
        b->read_bps = rs > 0 ? (double)rbytes / rs : 0;
        b->copy_bps = cs > 0 ? 2.0 * (double)cbytes / cs : 0;
    }
    munmap(map, (size_t)bytes);
    if (st != SY_OK)
        sy__runtime_set_error(rt, "probe: host bandwidth run failed: %s", sy_status_name(st));
out_topology:
    hwloc_topology_destroy(s.topo);
    return st;
}
