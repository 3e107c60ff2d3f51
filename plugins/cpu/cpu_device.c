/* The CPU device: plugin state, topology (hwloc), description and the
 * self-test.  Environment variables are read once, here, at init:
 *   SWITCHYARD_THREADS   lanes of the thread pool (default: physical cores)
 *   SWITCHYARD_CPU_ISA   inner-kernel table: auto (default), scalar, avx2,
 *                        avxvnni, avx512, avx512gfni
 *   SWITCHYARD_CPU_PIN   0: leave worker threads unpinned (default: pinned, and
 *                        the calling thread kept off their cores)
 *   SWITCHYARD_CPU_SPIN_US  microseconds an idle worker spins for the next
 *                        dispatch before it sleeps (0..1000000); unset,
 *                        the pool picks 200 while no other process
 *                        preempts the caller, else 5 (cpu_threadpool.h)
 *   SWITCHYARD_CPU_MATMUL_ROWS  weight rows per prefill GEMM tile (4..128,
 *                        a power of two; default 32), chosen by tune
 *   SWITCHYARD_CPU_ACTIVATIONS  how quantized matmuls take activations:
 *                        q16 (default) as 16-bit integers in two int8
 *                        planes (integer dot products, within the logits
 *                        oracle of tests/reference); q8 as 8-bit integers
 *                        as llama.cpp does (fastest, but rel. L2 3.7e-2 on
 *                        SmolLM2 against the oracle's 2e-2); f32 as floats
 *                        (weights dequantized row by row, slowest)
 *   SWITCHYARD_CPU_REPACK  1 (default): Q4_0/Q4_1 weights repacked at
 *                        first use where the ISA has packed kernels
 *                        (cpu_repack.c: faster decode; the copy, made on
 *                        the first step, replaces the file's pages of the
 *                        weight in memory); 0: read as the file stores them
 *   SWITCHYARD_CPU_PACK_CACHE  a folder: the packed copies are kept there in
 *                        a file per model file, and later processes map
 *                        them instead of packing again (cpu_packcache.c);
 *                        unset or empty (default): packed in memory */
#include <errno.h>
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include "cpu_internal.h"
#include "cpu_program.h"
#include "cpu_kernels.h"
#include "quants_internal.h"

#define CPU_MAX_THREADS 1024

/* --------------------------------------------------------------- topology */

/* Formats |bytes| as "48 KiB" / "2 MiB" / "1.5 GiB". */
static void cpu_format_size(uint64_t bytes, char *out, size_t size)
{
    static const char *const units[] = {"B", "KiB", "MiB", "GiB", "TiB"};
    double v = (double)bytes;
    int u = 0;
    while (v >= 1024.0 && u < 4) {
        v /= 1024.0;
        u++;
    }
    if (v == floor(v))
        snprintf(out, size, "%.0f %s", v, units[u]);
    else
        snprintf(out, size, "%.1f %s", v, units[u]);
}

static void cpu_append(char *buf, size_t size, const char *fmt, const char *a, const char *b)
{
    size_t used = strlen(buf);
    if (used < size)
        snprintf(buf + used, size - used, fmt, a, b);
}

static void cpu_describe_topology(cpu_state *s)
{
    sy_device_desc *d = &s->desc;
    const int packages = hwloc_get_nbobjs_by_type(s->topo, HWLOC_OBJ_PACKAGE);
    const int cores = hwloc_get_nbobjs_by_type(s->topo, HWLOC_OBJ_CORE);
    const int pus = hwloc_get_nbobjs_by_type(s->topo, HWLOC_OBJ_PU);
    snprintf(d->topology, sizeof d->topology, "%d package%s, %d core%s, %d PU%s",
             packages > 0 ? packages : 1, packages > 1 ? "s" : "", cores, cores == 1 ? "" : "s",
             pus, pus == 1 ? "" : "s");
    static const struct {
        hwloc_obj_type_t type;
        const char *name;
    } caches[] = {
        {HWLOC_OBJ_L1CACHE, "L1d"},
        {HWLOC_OBJ_L2CACHE, "L2"},
        {HWLOC_OBJ_L3CACHE, "L3"},
    };
    for (size_t i = 0; i < sizeof caches / sizeof caches[0]; i++) {
        hwloc_obj_t c = hwloc_get_obj_by_type(s->topo, caches[i].type, 0);
        if (!c || !c->attr || c->attr->cache.size == 0)
            continue;
        char sz[32];
        cpu_format_size(c->attr->cache.size, sz, sizeof sz);
        cpu_append(d->topology, sizeof d->topology, ", %s %s", caches[i].name, sz);
    }
    char isa[96];
    cpu_isa_format(&s->features, isa, sizeof isa);
    cpu_append(d->topology, sizeof d->topology, ", %s%s", "isa ", isa);

    hwloc_obj_t pkg = hwloc_get_obj_by_type(s->topo, HWLOC_OBJ_PACKAGE, 0);
    const char *model = pkg ? hwloc_obj_get_info_by_name(pkg, "CPUModel") : NULL;
    const char *vendor = pkg ? hwloc_obj_get_info_by_name(pkg, "CPUVendor") : NULL;
    if (model)
        snprintf(d->model, sizeof d->model, "%s", model);
    if (vendor)
        snprintf(d->vendor, sizeof d->vendor, "%s", vendor);
}

/* Reads "model name" (x86) or "Hardware"/"CPU part" lines of /proc/cpuinfo
 * when hwloc had no model string. */
static void cpu_model_from_cpuinfo(sy_device_desc *d)
{
    FILE *f = fopen("/proc/cpuinfo", "r");
    if (!f)
        return;
    char line[512];
    while (fgets(line, sizeof line, f)) {
        if (strncmp(line, "model name", 10) != 0 && strncmp(line, "Hardware", 8) != 0)
            continue;
        const char *v = strchr(line, ':');
        if (!v)
            continue;
        v++;
        while (*v == ' ' || *v == '\t')
            v++;
        snprintf(d->model, sizeof d->model, "%s", v);
        d->model[strcspn(d->model, "\n")] = '\0';
        break;
    }
    fclose(f);
}

static uint64_t cpu_physical_memory(void)
{
    long pages = sysconf(_SC_PHYS_PAGES);
    long page = sysconf(_SC_PAGE_SIZE);
    return pages > 0 && page > 0 ? (uint64_t)pages * (uint64_t)page : 0;
}

/* Reads the decimal integer in $|name|: 0 when unset or empty, 1 with it
 * in *|out| when it lies in [lo, hi], -1 when it is anything else (the
 * caller warns in its own words). */
static int cpu_env_long(const char *name, long lo, long hi, long *out)
{
    const char *env = getenv(name);
    if (!env || !*env)
        return 0;
    char *end = NULL;
    errno = 0;
    long v = strtol(env, &end, 10);
    if (errno != 0 || !end || *end != '\0' || v < lo || v > hi)
        return -1;
    *out = v;
    return 1;
}

/* Lanes of the pool: $SWITCHYARD_THREADS, else one per physical core. */
static uint32_t cpu_thread_count(cpu_state *s)
{
    int cores = s->topo ? hwloc_get_nbobjs_by_type(s->topo, HWLOC_OBJ_CORE) : 0;
    if (cores <= 0) {
        long online = sysconf(_SC_NPROCESSORS_ONLN);
        cores = online > 0 ? (int)online : 1;
    }
    uint32_t n = (uint32_t)cores;
    long v;
    int got = cpu_env_long("SWITCHYARD_THREADS", 1, CPU_MAX_THREADS, &v);
    if (got > 0)
        n = (uint32_t)v;
    else if (got < 0)
        cpu_log(s, SY_LOG_WARN, "ignoring SWITCHYARD_THREADS='%s' (want 1..%d); using %u threads",
                getenv("SWITCHYARD_THREADS"), CPU_MAX_THREADS, n);
    return n > CPU_MAX_THREADS ? CPU_MAX_THREADS : n;
}

/* ---------------------------------------------------------------- state */

static void cpu_state_free(cpu_state *s)
{
    const sy_host *host = s->host;
    cpu_pool_destroy(s->pool);
    cpu_repack_free(s);
    cpu_program_free(s);
    if (s->lanes) {
        for (uint32_t i = 0; i < s->n_threads; i++)
            if (s->lanes[i].scratch)
                host->free(host->ctx, s->lanes[i].scratch);
        host->free(host->ctx, s->lanes);
    }
    if (s->shared)
        host->free(host->ctx, s->shared);
    if (s->rope.inv_freq)
        host->free(host->ctx, s->rope.inv_freq);
    if (s->qkv_done)
        host->free(host->ctx, s->qkv_done);
    if (s->topo)
        hwloc_topology_destroy(s->topo);
    host->free(host->ctx, s);
}

sy_status cpu_device_init(const sy_host *host, void **out_state)
{
    if (!out_state)
        return SY_E_INVALID_ARG;
    *out_state = NULL;
    if (!host)
        return SY_E_INVALID_ARG;
    if (SY_PLUGIN_ABI_MAJOR_OF(host->abi_version) != SY_PLUGIN_ABI_MAJOR ||
        host->struct_size < offsetof(sy_host, op_cost) + sizeof host->op_cost)
        return SY_E_PLUGIN_ABI;
    if (!host->alloc || !host->free)
        return SY_E_INVALID_ARG;

    cpu_state *s = host->alloc(host->ctx, sizeof *s, CPU_ALIGN);
    if (!s)
        return SY_E_NO_MEMORY;
    memset(s, 0, sizeof *s);
    s->host = host;

    sy_status st = SY_OK;
    if (hwloc_topology_init(&s->topo) != 0) {
        s->topo = NULL;
    } else if (hwloc_topology_load(s->topo) != 0) {
        hwloc_topology_destroy(s->topo);
        s->topo = NULL;
    }
    if (!s->topo)
        cpu_log(s, SY_LOG_WARN, "hwloc could not load the topology; threads stay unpinned");

    cpu_isa_detect(&s->features);
    const char *isa_request = getenv("SWITCHYARD_CPU_ISA");
    st = cpu_isa_select(&s->features, isa_request, &s->isa);
    if (st != SY_OK)
        cpu_log(s, SY_LOG_WARN, "SWITCHYARD_CPU_ISA='%s' is %s here; using the %s kernels",
                isa_request, st == SY_E_UNSUPPORTED ? "not available" : "unknown", s->isa->name);

    const char *act = getenv("SWITCHYARD_CPU_ACTIVATIONS");
    s->act_planes = 2;
    if (act && strcmp(act, "f32") == 0)
        s->act_planes = 0;
    else if (act && strcmp(act, "q8") == 0)
        s->act_planes = 1;
    else if (act && *act && strcmp(act, "q16") != 0)
        cpu_log(s, SY_LOG_WARN, "ignoring SWITCHYARD_CPU_ACTIVATIONS='%s' (want q16, q8 or f32)",
                act);

    const char *repack = getenv("SWITCHYARD_CPU_REPACK");
    s->repack = !(repack && strcmp(repack, "0") == 0);
    if (repack && *repack && strcmp(repack, "0") != 0 && strcmp(repack, "1") != 0)
        cpu_log(s, SY_LOG_WARN, "SWITCHYARD_CPU_REPACK='%s' is not 0 or 1; repacking stays on",
                repack);

    const char *keep = getenv("SWITCHYARD_CPU_PROGRAM");
    s->keep_program = !(keep && strcmp(keep, "0") == 0);
    if (keep && *keep && strcmp(keep, "0") != 0 && strcmp(keep, "1") != 0)
        cpu_log(s, SY_LOG_WARN, "SWITCHYARD_CPU_PROGRAM='%s' is not 0 or 1; programs are kept",
                keep);
    const char *fuse = getenv("SWITCHYARD_CPU_FUSE");
    s->fuse = !(fuse && strcmp(fuse, "0") == 0);
    if (fuse && *fuse && strcmp(fuse, "0") != 0 && strcmp(fuse, "1") != 0)
        cpu_log(s, SY_LOG_WARN, "SWITCHYARD_CPU_FUSE='%s' is not 0 or 1; fusion stays on",
                fuse);

    const char *pack_dir = getenv("SWITCHYARD_CPU_PACK_CACHE");
    if (s->repack && pack_dir && *pack_dir) {
        const size_t n = strlen(pack_dir) + 1;
        s->pack_dir = host->alloc(host->ctx, n, 1);
        if (s->pack_dir)
            memcpy(s->pack_dir, pack_dir, n);
        else
            cpu_log(s, SY_LOG_WARN,
                    "no memory for SWITCHYARD_CPU_PACK_CACHE; weights are packed in memory");
    }

    s->gemm_tile_rows = CPU_MATMUL_GEMM_TILE_ROWS;
    long rows;
    int got = cpu_env_long("SWITCHYARD_CPU_MATMUL_ROWS", 4, 128, &rows);
    if (got > 0 && (rows & (rows - 1)) == 0)
        s->gemm_tile_rows = rows;
    else if (got != 0)
        cpu_log(s, SY_LOG_WARN,
                "ignoring SWITCHYARD_CPU_MATMUL_ROWS='%s' (want 4, 8, 16, 32, 64 or 128)",
                getenv("SWITCHYARD_CPU_MATMUL_ROWS"));

    s->n_threads = cpu_thread_count(s);
    s->lanes = host->alloc(host->ctx, sizeof(cpu_lane) * s->n_threads, CPU_ALIGN);
    if (!s->lanes) {
        st = SY_E_NO_MEMORY;
        goto out_free_state;
    }
    memset(s->lanes, 0, sizeof(cpu_lane) * s->n_threads);
    /* Pinning keeps a worker's cache warm on a quiet machine; on a shared
     * one a pinned worker can be starved behind another process, so it can
     * be switched off. */
    const char *pin_env = getenv("SWITCHYARD_CPU_PIN");
    const bool pin = !(pin_env && strcmp(pin_env, "0") == 0);
    st = cpu_pool_create(host, s->topo, s->n_threads, pin, &s->pool);
    if (st != SY_OK)
        goto out_free_state;
    long spin_us;
    got = cpu_env_long("SWITCHYARD_CPU_SPIN_US", 0, 1000000, &spin_us);
    if (got > 0)
        cpu_pool_set_spin(s->pool, (uint64_t)spin_us * 1000u);
    else if (got < 0)
        cpu_log(s, SY_LOG_WARN, "ignoring SWITCHYARD_CPU_SPIN_US='%s' (want 0 to 1000000)",
                getenv("SWITCHYARD_CPU_SPIN_US"));

    sy_device_desc *d = &s->desc;
    d->struct_size = sizeof *d;
    d->kind = SY_DEVICE_CPU;
    snprintf(d->name, sizeof d->name, "cpu");
    snprintf(d->driver, sizeof d->driver, "switchyard-cpu %s (%s kernels, %s acts, %u threads)",
             CPU_PLUGIN_VERSION, s->isa->name, s->act_planes == 0 ? "f32" : s->act_planes == 1 ? "q8" : "q16", s->n_threads);
    d->memory_bytes = cpu_physical_memory();
    d->unified_memory = 1;
    if (s->topo) {
        cpu_describe_topology(s);
        int cores = hwloc_get_nbobjs_by_type(s->topo, HWLOC_OBJ_CORE);
        d->compute_units = cores > 0 ? (uint32_t)cores : 1;
    } else {
        long online = sysconf(_SC_NPROCESSORS_ONLN);
        d->compute_units = online > 0 ? (uint32_t)online : 1;
        snprintf(d->topology, sizeof d->topology, "%u cores (no hwloc topology)",
                 d->compute_units);
    }
    if (!d->model[0])
        cpu_model_from_cpuinfo(d);
    if (!d->model[0])
        snprintf(d->model, sizeof d->model, "unknown cpu");
    if (!d->vendor[0])
        snprintf(d->vendor, sizeof d->vendor, "unknown");
    /* peak_flops and peak_bandwidth stay 0: the probe measures them. */

    *out_state = s;
    return SY_OK;

out_free_state:
    cpu_state_free(s);
    return st;
}

void cpu_device_deinit(void *state)
{
    if (state)
        cpu_state_free(state);
}

uint32_t cpu_device_count(void *state)
{
    return 1;
}

sy_status cpu_device_describe(void *state, uint32_t dev, sy_device_desc *out_desc)
{
    const cpu_state *s = state;
    if (dev != 0 || !out_desc)
        return SY_E_INVALID_ARG;
    /* Fill only as much as the core's struct holds (an older core's is
     * shorter; one without even a struct_size gets nothing); a later
     * core's longer struct gets the fields this header knows. */
    uint32_t size = out_desc->struct_size;
    if (size < sizeof out_desc->struct_size)
        return SY_E_INVALID_ARG;
    if (size > sizeof *out_desc)
        size = sizeof *out_desc;
    memcpy(out_desc, &s->desc, size);
    out_desc->struct_size = size;
    return SY_OK;
}

/* ------------------------------------------------------------- self-test */

/* A deterministic stream in [-1, 1). */
static float cpu_selftest_rand(uint32_t *state)
{
    *state = *state * 1664525u + 1013904223u;
    return (float)(*state >> 8) / (float)(1u << 23) - 1.0f;
}

static void cpu_selftest_tensor(sy_tensor *t, const char *name, sy_dtype dtype, int64_t ne0,
                                int64_t ne1, void *data)
{
    memset(t, 0, sizeof *t);
    t->dtype = dtype;
    t->n_dims = 2;
    t->ne[0] = ne0;
    t->ne[1] = ne1;
    t->ne[2] = t->ne[3] = 1;
    sy_tensor_set_contiguous_strides(t);
    t->data = data;
    snprintf(t->name, sizeof t->name, "%s", name);
}

/* Runs one K x N x M matmul with weights of |wtype| on the threaded
 * kernel and on the reference, and compares. */
static sy_status cpu_selftest_matmul(cpu_state *s, sy_dtype wtype, char *out_msg,
                                     uint32_t msg_size)
{
    enum { K = 256, N = 7, M = 3 };
    const sy_host *h = s->host;
    const size_t w_bytes = (size_t)N * K / sy_dtype_block_size(wtype) * sy_dtype_type_size(wtype);
    float *wf = h->alloc(h->ctx, sizeof(float) * K * N, CPU_ALIGN);
    void *w = h->alloc(h->ctx, w_bytes, CPU_ALIGN);
    float *x = h->alloc(h->ctx, sizeof(float) * K * M, CPU_ALIGN);
    float *got = h->alloc(h->ctx, sizeof(float) * N * M, CPU_ALIGN);
    float *want = h->alloc(h->ctx, sizeof(float) * N * M, CPU_ALIGN);
    sy_status st = SY_E_NO_MEMORY;
    if (!wf || !w || !x || !got || !want)
        goto out_free;

    uint32_t seed = 12345u + (uint32_t)wtype;
    for (int i = 0; i < K * N; i++)
        wf[i] = cpu_selftest_rand(&seed);
    for (int i = 0; i < K * M; i++)
        x[i] = cpu_selftest_rand(&seed);
    for (int n = 0; n < N; n++) {
        void *row = (char *)w + (size_t)n * w_bytes / N;
        st = sy__quantize_row(wtype, wf + (size_t)n * K, row, K);
        if (st != SY_OK)
            goto out_free;
    }

    sy_tensor tw, tx, ty;
    cpu_selftest_tensor(&tw, "selftest.w", wtype, K, N, w);
    cpu_selftest_tensor(&tx, "selftest.x", SY_DTYPE_F32, K, M, x);
    cpu_selftest_tensor(&ty, "selftest.y", SY_DTYPE_F32, N, M, got);
    sy_node node;
    memset(&node, 0, sizeof node);
    node.op = SY_OP_MATMUL;
    node.n_inputs = 2;
    node.inputs[0] = &tw;
    node.inputs[1] = &tx;
    node.output = &ty;
    snprintf(node.name, sizeof node.name, "selftest.matmul");

    const char *why = "";
    s->file_maps.valid = false; /* as cpu_device_execute does */
    st = cpu_kernel_matmul(s, &node, &why);
    if (st != SY_OK) {
        snprintf(out_msg, msg_size, "matmul %s: threaded kernel refused (%s)",
                 sy_dtype_name(wtype), st == SY_E_UNSUPPORTED ? why : "error");
        goto out_free;
    }
    ty.data = want;
    st = h->reference_execute(h->ctx, &node);
    if (st != SY_OK) {
        snprintf(out_msg, msg_size, "matmul %s: reference kernel failed (%d)",
                 sy_dtype_name(wtype), (int)st);
        goto out_free;
    }
    /* Quantized weights meet Q8 activations: each x[k] moves by at most
     * half its block's step d = max|x| / 127, so out[n, m] may move by
     * sum_k |w[k, n]| * d / 2; F32 rounding adds a little on top. */
    float wrow[K];
    for (int n = 0; n < N; n++) {
        st = sy__dequantize_row(wtype, (char *)w + (size_t)n * w_bytes / N, wrow, K);
        if (st != SY_OK)
            goto out_free;
        for (int m = 0; m < M; m++) {
            const float *xc = x + (size_t)m * K;
            double bound = 0.0, mag = 0.0;
            for (int b = 0; b < K; b += 32) {
                float amax = 0.0f;
                for (int j = 0; j < 32; j++)
                    amax = fmaxf(amax, fabsf(xc[b + j]));
                for (int j = 0; j < 32; j++) {
                    if (sy_dtype_is_quantized(wtype))
                        bound += fabs(wrow[b + j]) * amax / 127.0 * 0.5001;
                    mag += fabs(wrow[b + j] * xc[b + j]);
                }
            }
            const int i = m * N + n;
            const double tol = bound + 1e-5 * mag + 1e-6;
            if (!(fabs((double)got[i] - (double)want[i]) <= tol)) {
                snprintf(out_msg, msg_size,
                         "matmul %s (%s kernels, %u threads): out[%d] = %g, reference %g",
                         sy_dtype_name(wtype), s->isa->name, s->n_threads, i, (double)got[i],
                         (double)want[i]);
                st = SY_E_DEVICE;
                goto out_free;
            }
        }
    }
    st = SY_OK;

out_free:
    if (st == SY_E_NO_MEMORY)
        snprintf(out_msg, msg_size, "self-test: out of memory");
    void *const blocks[] = {want, got, x, w, wf};
    for (size_t i = 0; i < sizeof blocks / sizeof blocks[0]; i++)
        if (blocks[i])
            h->free(h->ctx, blocks[i]);
    return st;
}

sy_status cpu_device_self_test(void *state, uint32_t dev, char *out_msg, uint32_t msg_size)
{
    cpu_state *s = state;
    char scratch[8];
    if (!out_msg || msg_size == 0) {
        out_msg = scratch;
        msg_size = sizeof scratch;
    }
    out_msg[0] = '\0';
    if (dev != 0)
        return SY_E_INVALID_ARG;
    if (!s->host->reference_execute) {
        snprintf(out_msg, msg_size, "self-test needs the host's reference kernels");
        return SY_E_UNSUPPORTED;
    }
    static const sy_dtype types[] = {SY_DTYPE_F32, SY_DTYPE_F16, SY_DTYPE_Q8_0, SY_DTYPE_Q4_0,
                                     SY_DTYPE_Q4_1};
    for (size_t i = 0; i < sizeof types / sizeof types[0]; i++) {
        sy_status st = cpu_selftest_matmul(s, types[i], out_msg, msg_size);
        if (st != SY_OK)
            return st;
    }
    return SY_OK;
}
