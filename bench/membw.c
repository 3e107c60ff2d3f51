/* membw: how fast one or more cores of this machine read memory, measured
 * with several load kernels side by side, to check what `switchyard probe`
 * reports (issue 7) and what the decode roofline (issue 8) divides by.
 *
 *   membw [--mib 64,256,1024] [--threads 1,2] [--kernels probe,scalar,avx2,avx512]
 *         [--streams 1,2,4] [--huge 0,1,2] [--prefetch 0,1] [--passes N] [--rounds R]
 *         [--seg MIB] [--file PATH]
 *
 * Every combination of the lists is one configuration. A configuration's
 * buffer is allocated, optionally madvise(MADV_HUGEPAGE)d, and first touched
 * by the thread that will read each part of it (so no page fault falls in a
 * timed pass); the threads are started, pinned with hwloc to one core each
 * and then synchronised with a barrier before every timed pass; a pass is
 * the wall time from the barrier every thread left to the barrier every
 * thread reached, read by thread 0. Rounds go over every configuration in
 * turn (interleaved, so a burst of load from other processes hits all of
 * them alike) and the report gives, per configuration, the median and the
 * best pass in GB/s (1e9 bytes/s) over all rounds.
 *
 * Kernels: "probe" is the probe's own loop (four 64-bit sums) compiled
 * with this file's flags; "scalar" is that loop with vectorisation off;
 * "avx2"/"avx512" load 256/512-bit vectors into four independent XOR
 * accumulators per stream. Streams split a thread's part into S
 * contiguous pieces read in lockstep (more prefetch streams in flight).
 * Prefetch 1 adds a software prefetch 2 KiB ahead of each stream.
 * "avx2"/"avx512" exist on x86 only and run where the CPU has them; a kernel
 * this machine cannot run is left out of the lists with a note.
 * --huge 2 reads the first --mib of --file instead, mapped as the model
 * loader maps a GGUF file (read-only, MAP_PRIVATE: page-cache pages) and
 * read once before timing.
 * Not a test: its figures depend on the machine and its load. */
#ifndef _GNU_SOURCE
#define _GNU_SOURCE
#endif
#include <fcntl.h>
#include <hwloc.h>
#include <pthread.h>
#include <stdbool.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/mman.h>
#include <sys/stat.h>
#include <time.h>
#include <unistd.h>

#if defined(__x86_64__) || defined(__i386__)
#define MEMBW_X86 1
#include <immintrin.h>
#endif

#define MIB (1024ull * 1024ull)
#define MAX_LIST 8
#define MAX_THREADS 64
#define PF_AHEAD 2048

enum { K_PROBE, K_SCALAR, K_AVX2, K_AVX512, K_COUNT };
static const char *const kernel_names[K_COUNT] = {"probe", "scalar", "avx2", "avx512"};

typedef struct config {
    size_t bytes;
    unsigned threads, kernel, streams, huge, prefetch;
    double *gbps; /* rounds * passes */
    unsigned n;
} config;

typedef struct shared {
    hwloc_topology_t topo;
    pthread_barrier_t barrier;
    const config *c;
    unsigned char *buf;
    unsigned passes;
    size_t seg; /* bytes per thread in one timed segment */
    double *out; /* segments, written by thread 0 */
    unsigned n_out;
    volatile uint64_t sink;
} shared;

typedef struct worker {
    shared *s;
    unsigned index;
    pthread_t tid;
} worker;

static double now(void)
{
    struct timespec ts;
    clock_gettime(CLOCK_MONOTONIC, &ts);
    return (double)ts.tv_sec + (double)ts.tv_nsec * 1e-9;
}

/* The probe's loop as framework/runtime/probe_host.c has it. */
static uint64_t read_probe(const unsigned char *b, size_t bytes, unsigned streams, unsigned pf)
{
    (void)streams;
    (void)pf;
    const uint64_t *p = (const uint64_t *)b;
    size_t n = bytes / 8;
    uint64_t a = 0, c = 0, d = 0, e = 0;
    size_t i = 0;
    for (; i + 4 <= n; i += 4) {
        a += p[i];
        c += p[i + 1];
        d += p[i + 2];
        e += p[i + 3];
    }
    return a + c + d + e;
}

__attribute__((optimize("no-tree-vectorize")))
static uint64_t read_scalar(const unsigned char *b, size_t bytes, unsigned streams, unsigned pf)
{
    size_t piece = bytes / streams / 64 * 64;
    uint64_t acc[4][4] = {{0}};
    for (size_t o = 0; o < piece; o += 64)
        for (unsigned k = 0; k < streams; k++) {
            const uint64_t *p = (const uint64_t *)(b + k * piece + o);
            if (pf)
                __builtin_prefetch((const char *)p + PF_AHEAD);
            acc[k][0] += p[0] + p[4];
            acc[k][1] += p[1] + p[5];
            acc[k][2] += p[2] + p[6];
            acc[k][3] += p[3] + p[7];
        }
    uint64_t r = 0;
    for (unsigned k = 0; k < 4; k++)
        r += acc[k][0] ^ acc[k][1] ^ acc[k][2] ^ acc[k][3];
    return r;
}

#ifdef MEMBW_X86
__attribute__((target("avx2")))
static uint64_t read_avx2(const unsigned char *b, size_t bytes, unsigned streams, unsigned pf)
{
    size_t piece = bytes / streams / 128 * 128;
    __m256i a0 = _mm256_setzero_si256(), a1 = a0, a2 = a0, a3 = a0;
    for (size_t o = 0; o < piece; o += 128)
        for (unsigned k = 0; k < streams; k++) {
            const unsigned char *p = b + k * piece + o;
            if (pf) {
                _mm_prefetch((const char *)p + PF_AHEAD, _MM_HINT_T0);
                _mm_prefetch((const char *)p + PF_AHEAD + 64, _MM_HINT_T0);
            }
            a0 = _mm256_xor_si256(a0, _mm256_load_si256((const __m256i *)p));
            a1 = _mm256_xor_si256(a1, _mm256_load_si256((const __m256i *)(p + 32)));
            a2 = _mm256_xor_si256(a2, _mm256_load_si256((const __m256i *)(p + 64)));
            a3 = _mm256_xor_si256(a3, _mm256_load_si256((const __m256i *)(p + 96)));
        }
    __m256i x = _mm256_xor_si256(_mm256_xor_si256(a0, a1), _mm256_xor_si256(a2, a3));
    return (uint64_t)_mm256_extract_epi64(x, 0) ^ (uint64_t)_mm256_extract_epi64(x, 3);
}

__attribute__((target("avx512f")))
static uint64_t read_avx512(const unsigned char *b, size_t bytes, unsigned streams, unsigned pf)
{
    size_t piece = bytes / streams / 256 * 256;
    __m512i a0 = _mm512_setzero_si512(), a1 = a0, a2 = a0, a3 = a0;
    for (size_t o = 0; o < piece; o += 256)
        for (unsigned k = 0; k < streams; k++) {
            const unsigned char *p = b + k * piece + o;
            if (pf) {
                _mm_prefetch((const char *)p + PF_AHEAD, _MM_HINT_T0);
                _mm_prefetch((const char *)p + PF_AHEAD + 64, _MM_HINT_T0);
                _mm_prefetch((const char *)p + PF_AHEAD + 128, _MM_HINT_T0);
                _mm_prefetch((const char *)p + PF_AHEAD + 192, _MM_HINT_T0);
            }
            a0 = _mm512_xor_si512(a0, _mm512_load_si512((const void *)p));
            a1 = _mm512_xor_si512(a1, _mm512_load_si512((const void *)(p + 64)));
            a2 = _mm512_xor_si512(a2, _mm512_load_si512((const void *)(p + 128)));
            a3 = _mm512_xor_si512(a3, _mm512_load_si512((const void *)(p + 192)));
        }
    __m512i x = _mm512_xor_si512(_mm512_xor_si512(a0, a1), _mm512_xor_si512(a2, a3));
    return (uint64_t)_mm512_reduce_add_epi64(x);
}
#endif

typedef uint64_t (*read_fn)(const unsigned char *, size_t, unsigned, unsigned);
#ifdef MEMBW_X86
static const read_fn kernels[K_COUNT] = {read_probe, read_scalar, read_avx2, read_avx512};
#else
static const read_fn kernels[K_COUNT] = {read_probe, read_scalar, NULL, NULL};
#endif

static bool kernel_runs(unsigned k)
{
#ifdef MEMBW_X86
    if (k == K_AVX2)
        return __builtin_cpu_supports("avx2");
    if (k == K_AVX512)
        return __builtin_cpu_supports("avx512f");
#endif
    return kernels[k] != NULL;
}

/* Drops the kernels this machine cannot run from |ker| (with a note). */
static unsigned runnable_kernels(unsigned *ker, unsigned n)
{
    unsigned kept = 0;
    for (unsigned i = 0; i < n; i++) {
        if (kernel_runs(ker[i]))
            ker[kept++] = ker[i];
        else
            fprintf(stderr, "membw: kernel %s does not run on this machine: left out\n",
                    kernel_names[ker[i]]);
    }
    return kept;
}

static void pin(hwloc_topology_t topo, unsigned index)
{
    hwloc_obj_t core = hwloc_get_obj_by_type(topo, HWLOC_OBJ_CORE, index);
    if (!core || !core->cpuset)
        return;
    hwloc_bitmap_t set = hwloc_bitmap_dup(core->cpuset);
    if (!set)
        return;
    hwloc_bitmap_singlify(set);
    hwloc_set_cpubind(topo, set, HWLOC_CPUBIND_THREAD);
    hwloc_bitmap_free(set);
}

static void *worker_main(void *arg)
{
    worker *w = arg;
    shared *s = w->s;
    const config *c = s->c;
    pin(s->topo, w->index);
    size_t part = c->bytes / c->threads / s->seg * s->seg;
    unsigned char *mine = s->buf + part * w->index;
    uint64_t acc = kernels[c->kernel](mine, part, c->streams, c->prefetch); /* warm-up */
    unsigned n = 0;
    for (unsigned r = 0; r < s->passes; r++)
        for (size_t o = 0; o < part; o += s->seg) {
            pthread_barrier_wait(&s->barrier);
            double t0 = now();
            acc += kernels[c->kernel](mine + o, s->seg, c->streams, c->prefetch);
            pthread_barrier_wait(&s->barrier);
            if (w->index == 0)
                s->out[n++] = (double)(s->seg * c->threads) / (now() - t0) * 1e-9;
        }
    if (w->index == 0)
        s->n_out = n;
    s->sink += acc;
    return NULL;
}

/* One buffer per page kind, shared by every configuration and touched
 * (faulted in) once, before anything is timed. */
static unsigned char *map_buffer(size_t bytes, unsigned huge)
{
    unsigned char *buf = mmap(NULL, bytes, PROT_READ | PROT_WRITE, MAP_PRIVATE | MAP_ANONYMOUS, -1, 0);
    if (buf == MAP_FAILED)
        return NULL;
    madvise(buf, bytes, huge ? MADV_HUGEPAGE : MADV_NOHUGEPAGE);
    for (size_t i = 0; i < bytes; i += 8)
        *(uint64_t *)(buf + i) = i * 0x9E3779B97F4A7C15ull;
    return buf;
}

static unsigned long anon_huge_kib(void)
{
    FILE *f = fopen("/proc/self/smaps_rollup", "r");
    char line[256];
    unsigned long kib = 0;
    while (f && fgets(line, sizeof line, f))
        if (sscanf(line, "AnonHugePages: %lu kB", &kib) == 1)
            break;
    if (f)
        fclose(f);
    return kib;
}

static int run_config(hwloc_topology_t topo, config *c, unsigned char *buf, size_t seg, unsigned passes)
{
    shared s = {.topo = topo, .c = c, .buf = buf, .passes = passes, .seg = seg, .out = c->gbps + c->n};
    worker w[MAX_THREADS];
    pthread_barrier_init(&s.barrier, NULL, c->threads);
    for (unsigned i = 0; i < c->threads; i++) {
        w[i] = (worker){.s = &s, .index = i};
        pthread_create(&w[i].tid, NULL, worker_main, &w[i]);
    }
    for (unsigned i = 0; i < c->threads; i++)
        pthread_join(w[i].tid, NULL);
    pthread_barrier_destroy(&s.barrier);
    c->n += s.n_out;
    return 0;
}

static int cmp_double(const void *a, const void *b)
{
    double x = *(const double *)a, y = *(const double *)b;
    return (x > y) - (x < y);
}

static unsigned parse_list(const char *arg, unsigned *out)
{
    unsigned n = 0;
    char *end;
    while (*arg && n < MAX_LIST) {
        out[n++] = (unsigned)strtoul(arg, &end, 10);
        arg = *end == ',' ? end + 1 : end;
        if (end == arg && *end != ',')
            break;
    }
    return n;
}

static unsigned parse_kernels(const char *arg, unsigned *out)
{
    unsigned n = 0;
    char tmp[256];
    snprintf(tmp, sizeof tmp, "%s", arg);
    for (char *tok = strtok(tmp, ","); tok && n < MAX_LIST; tok = strtok(NULL, ","))
        for (unsigned k = 0; k < K_COUNT; k++)
            if (strcmp(tok, kernel_names[k]) == 0)
                out[n++] = k;
    return n;
}

int main(int argc, char **argv)
{
    unsigned mib[MAX_LIST] = {1024}, thr[MAX_LIST] = {1, 2}, ker[MAX_LIST] = {K_PROBE, K_AVX512};
    unsigned str[MAX_LIST] = {1}, huge[MAX_LIST] = {0, 1}, pf[MAX_LIST] = {0};
    const char *file = NULL;
    unsigned nm = 1, nt = 2, nk = 2, ns = 1, nh = 2, np = 1, passes = 2, rounds = 3, seg_mib = 16;
    for (int i = 1; i + 1 < argc; i += 2) {
        const char *o = argv[i], *v = argv[i + 1];
        if (!strcmp(o, "--mib")) nm = parse_list(v, mib);
        else if (!strcmp(o, "--threads")) nt = parse_list(v, thr);
        else if (!strcmp(o, "--kernels")) nk = parse_kernels(v, ker);
        else if (!strcmp(o, "--streams")) ns = parse_list(v, str);
        else if (!strcmp(o, "--huge")) nh = parse_list(v, huge);
        else if (!strcmp(o, "--prefetch")) np = parse_list(v, pf);
        else if (!strcmp(o, "--passes")) passes = (unsigned)atoi(v);
        else if (!strcmp(o, "--rounds")) rounds = (unsigned)atoi(v);
        else if (!strcmp(o, "--seg")) seg_mib = (unsigned)atoi(v);
        else if (!strcmp(o, "--file")) file = v;
        else {
            fprintf(stderr, "membw: unknown option %s\n", o);
            return 2;
        }
    }
    nk = runnable_kernels(ker, nk);
    if (!nm || !nt || !nk || !ns || !nh || !np || !passes || !rounds) {
        fprintf(stderr, "membw: empty list or zero passes/rounds\n");
        return 2;
    }
    hwloc_topology_t topo;
    hwloc_topology_init(&topo);
    hwloc_topology_load(topo);
    unsigned n_cfg = nm * nt * nk * ns * nh * np, max_mib = 0;
    for (unsigned a = 0; a < nm; a++)
        max_mib = mib[a] > max_mib ? mib[a] : max_mib;
    if (!seg_mib || seg_mib > max_mib)
        return fprintf(stderr, "membw: --seg must be 1..largest --mib\n"), 2;
    unsigned char *bufs[3] = {NULL, NULL, NULL};
    for (unsigned e = 0; e < nh; e++) {
        unsigned h = huge[e] > 2 ? 1 : huge[e];
        if (h == 2 && !bufs[2]) {
            /* Reading past the end of the file would fault (SIGBUS). */
            int fd = file ? open(file, O_RDONLY) : -1;
            struct stat st;
            void *m = fd >= 0 && fstat(fd, &st) == 0 && (uint64_t)st.st_size >= max_mib * MIB
                          ? mmap(NULL, max_mib * MIB, PROT_READ, MAP_PRIVATE, fd, 0)
                          : MAP_FAILED;
            if (fd >= 0)
                close(fd);
            if (m == MAP_FAILED)
                return fprintf(stderr, "membw: --huge 2 needs a --file of at least %u MiB\n", max_mib), 1;
            bufs[2] = m;
            read_probe(m, max_mib * MIB, 1, 0);
            continue;
        }
        if (!bufs[h] && !(bufs[h] = map_buffer(max_mib * MIB, h)))
            return fprintf(stderr, "membw: cannot map %u MiB\n", max_mib), 1;
    }
    printf("buffers touched; AnonHugePages %lu kB\n", anon_huge_kib());
    config *cfg = calloc(n_cfg, sizeof *cfg);
    unsigned c = 0;
    for (unsigned a = 0; a < nm; a++)
        for (unsigned b = 0; b < nt; b++)
            for (unsigned k = 0; k < nk; k++)
                for (unsigned d = 0; d < ns; d++)
                    for (unsigned e = 0; e < nh; e++)
                        for (unsigned f = 0; f < np; f++) {
                            cfg[c] = (config){.bytes = mib[a] * MIB, .threads = thr[b], .kernel = ker[k],
                                              .streams = str[d], .huge = huge[e], .prefetch = pf[f]};
                            cfg[c].gbps = calloc((size_t)rounds * passes * (mib[a] / seg_mib + 1), sizeof(double));
                            if (thr[b] > MAX_THREADS || str[d] > 4 || !str[d])
                                return fprintf(stderr, "membw: threads <= 64, streams 1..4\n"), 2;
                            c++;
                        }
    for (unsigned r = 0; r < rounds; r++)
        for (unsigned i = 0; i < n_cfg; i++)
            run_config(topo, &cfg[i], bufs[cfg[i].huge > 2 ? 1 : cfg[i].huge], seg_mib * MIB / cfg[i].threads, passes);
    printf("%6s %3s %-7s %3s %4s %3s %8s %8s %8s\n", "MiB", "thr", "kernel", "str", "huge", "pf",
           "median", "p90", "best");
    for (unsigned i = 0; i < n_cfg; i++) {
        config *x = &cfg[i];
        qsort(x->gbps, x->n, sizeof(double), cmp_double);
        printf("%6zu %3u %-7s %3u %4u %3u %8.2f %8.2f %8.2f\n", (size_t)(x->bytes / MIB), x->threads,
               kernel_names[x->kernel], x->streams, x->huge, x->prefetch, x->gbps[x->n / 2],
               x->gbps[x->n * 9 / 10], x->gbps[x->n - 1]);
    }
    hwloc_topology_destroy(topo);
    return 0;
}
