/* Kernel programs: one per family (common.cl + <family>.cl), built for a
 * device on first use and kept for the life of the plugin state.
 *
 * Binaries are cached on disk, one file per device and family:
 *   <cache dir>/<family>-<key>.bin
 * where <key> hashes everything that could change the binary: the plugin
 * version, platform name and version, device name and version, driver
 * version, build options and the source text.  A file starts with a header
 * (magic, key, payload size, payload hash) that is checked before the
 * payload reaches clCreateProgramWithBinary; an entry that fails any check,
 * or that the driver refuses, is rebuilt from source and rewritten, never
 * trusted.  Files are written to a temporary name and renamed, so a reader
 * never sees half a file. */
#include <errno.h>
#include <stdio.h>
#include <string.h>
#include <sys/stat.h>
#include <time.h>
#include <unistd.h>

#include "ocl_internal.h"

#define OCL_CACHE_MAGIC "SYOCLBN1"
#define OCL_CACHE_MAX_BYTES (256u << 20)

static const struct {
    const char *name;
    ocl_family family;
} ocl_kernel_table[OCL_K_COUNT] = {
    [OCL_K_MV_F32] = {"mv_f32", OCL_FAM_MATMUL},
    [OCL_K_MV_F16] = {"mv_f16", OCL_FAM_MATMUL},
    [OCL_K_MV_BF16] = {"mv_bf16", OCL_FAM_MATMUL},
    [OCL_K_MV_Q8_0] = {"mv_q8_0", OCL_FAM_MATMUL},
    [OCL_K_MV_Q4_0] = {"mv_q4_0", OCL_FAM_MATMUL},
    [OCL_K_MV_Q4_1] = {"mv_q4_1", OCL_FAM_MATMUL},
    [OCL_K_MV_Q5_0] = {"mv_q5_0", OCL_FAM_MATMUL},
    [OCL_K_MV_Q5_1] = {"mv_q5_1", OCL_FAM_MATMUL},
    [OCL_K_MV_Q4_K] = {"mv_q4_k", OCL_FAM_MATMUL},
    [OCL_K_MV_Q5_K] = {"mv_q5_k", OCL_FAM_MATMUL},
    [OCL_K_MV_Q6_K] = {"mv_q6_k", OCL_FAM_MATMUL},
    [OCL_K_MVR_F32] = {"mvr_f32", OCL_FAM_MATMUL},
    [OCL_K_MVR_F16] = {"mvr_f16", OCL_FAM_MATMUL},
    [OCL_K_MVR_BF16] = {"mvr_bf16", OCL_FAM_MATMUL},
    [OCL_K_MVR_Q8_0] = {"mvr_q8_0", OCL_FAM_MATMUL},
    [OCL_K_MVR_Q4_0] = {"mvr_q4_0", OCL_FAM_MATMUL},
    [OCL_K_MVR_Q4_1] = {"mvr_q4_1", OCL_FAM_MATMUL},
    [OCL_K_MVR_Q5_0] = {"mvr_q5_0", OCL_FAM_MATMUL},
    [OCL_K_MVR_Q5_1] = {"mvr_q5_1", OCL_FAM_MATMUL},
    [OCL_K_MVR_Q4_K] = {"mvr_q4_k", OCL_FAM_MATMUL},
    [OCL_K_MVR_Q5_K] = {"mvr_q5_k", OCL_FAM_MATMUL},
    [OCL_K_MVR_Q6_K] = {"mvr_q6_k", OCL_FAM_MATMUL},
    [OCL_K_MM_F32] = {"mm_f32", OCL_FAM_MATMUL},
    [OCL_K_MM_F16] = {"mm_f16", OCL_FAM_MATMUL},
    [OCL_K_MM_BF16] = {"mm_bf16", OCL_FAM_MATMUL},
    [OCL_K_MM_Q8_0] = {"mm_q8_0", OCL_FAM_MATMUL},
    [OCL_K_MM_Q4_0] = {"mm_q4_0", OCL_FAM_MATMUL},
    [OCL_K_MM_Q4_1] = {"mm_q4_1", OCL_FAM_MATMUL},
    [OCL_K_MM_Q5_0] = {"mm_q5_0", OCL_FAM_MATMUL},
    [OCL_K_MM_Q5_1] = {"mm_q5_1", OCL_FAM_MATMUL},
    [OCL_K_MM_Q4_K] = {"mm_q4_k", OCL_FAM_MATMUL},
    [OCL_K_MM_Q5_K] = {"mm_q5_k", OCL_FAM_MATMUL},
    [OCL_K_MM_Q6_K] = {"mm_q6_k", OCL_FAM_MATMUL},
    [OCL_K_RMS_NORM] = {"rms_norm", OCL_FAM_ROWS},
    [OCL_K_SOFTMAX] = {"softmax", OCL_FAM_ROWS},
    [OCL_K_ARGMAX] = {"argmax", OCL_FAM_ROWS},
    [OCL_K_ROPE] = {"rope", OCL_FAM_ROWS},
    [OCL_K_ATTENTION] = {"attention", OCL_FAM_ATTENTION},
    [OCL_K_BINARY] = {"binary", OCL_FAM_ELEMENTWISE},
    [OCL_K_UNARY] = {"unary", OCL_FAM_ELEMENTWISE},
    [OCL_K_GLU] = {"glu", OCL_FAM_ELEMENTWISE},
    [OCL_K_COPY_ELEMS] = {"copy_elems", OCL_FAM_MEMORY},
    [OCL_K_COPY_DEQ] = {"copy_deq", OCL_FAM_MEMORY},
    [OCL_K_COPY_ROWS_RAW] = {"copy_rows_raw", OCL_FAM_MEMORY},
    [OCL_K_COPY_QUANT] = {"copy_quant", OCL_FAM_MEMORY},
    [OCL_K_GET_ROWS_ELEMS] = {"get_rows_elems", OCL_FAM_MEMORY},
    [OCL_K_GET_ROWS_DEQ] = {"get_rows_deq", OCL_FAM_MEMORY},
};

static const char *const ocl_family_names[OCL_FAM_COUNT] = {
    [OCL_FAM_MATMUL] = "matmul",
    [OCL_FAM_ROWS] = "rows",
    [OCL_FAM_ATTENTION] = "attention",
    [OCL_FAM_ELEMENTWISE] = "elementwise",
    [OCL_FAM_MEMORY] = "memory",
};

ocl_family ocl_kernel_family(ocl_kernel_id k)
{
    return ocl_kernel_table[k].family;
}

const char *ocl_kernel_name(ocl_kernel_id k)
{
    return k < OCL_K_COUNT ? ocl_kernel_table[k].name : "none";
}

const char *ocl_family_name(ocl_family f)
{
    return f < OCL_FAM_COUNT ? ocl_family_names[f] : "none";
}

/* Appended to the broken family's source by the SWITCHYARD_OPENCL_BREAK
 * test hook. */
static const char ocl_broken_source[] =
    "\n#error \"switchyard test hook: this program is broken on purpose\"\n";

static const ocl_source *ocl_find_source(const char *name)
{
    uint32_t n = 0;
    const ocl_source *src = ocl_kernel_sources(&n);
    for (uint32_t i = 0; i < n; i++)
        if (strcmp(src[i].name, name) == 0)
            return &src[i];
    return NULL;
}

/* 64-bit FNV-1a, continued from |h|. */
static uint64_t ocl_fnv(uint64_t h, const void *data, size_t size)
{
    const unsigned char *p = data;
    for (size_t i = 0; i < size; i++) {
        h ^= p[i];
        h *= 0x100000001b3ull;
    }
    return h;
}

static uint64_t ocl_fnv_str(uint64_t h, const char *s)
{
    /* The NUL separates fields, so "ab"+"c" and "a"+"bc" differ. */
    return ocl_fnv(h, s, strlen(s) + 1);
}

/* The sources of family |f| as handed to the compiler. */
typedef struct ocl_texts {
    const char *text[3];
    size_t size[3];
    cl_uint count;
} ocl_texts;

static sy_status ocl_family_texts(const ocl_state *s, ocl_family f, ocl_texts *out)
{
    const ocl_source *common = ocl_find_source("common");
    const ocl_source *body = ocl_find_source(ocl_family_names[f]);
    if (!common || !body)
        return SY_E_INTERNAL;
    out->text[0] = common->text;
    out->size[0] = common->size;
    out->text[1] = body->text;
    out->size[1] = body->size;
    out->count = 2;
    if (s->broken_family == (int)f) {
        out->text[2] = ocl_broken_source;
        out->size[2] = sizeof ocl_broken_source - 1;
        out->count = 3;
    }
    return SY_OK;
}

static uint64_t ocl_cache_key(const ocl_dev *d, const ocl_texts *t)
{
    char name[256], driver[256];
    name[0] = driver[0] = '\0';
    clGetDeviceInfo(d->id, CL_DEVICE_NAME, sizeof name, name, NULL);
    clGetDeviceInfo(d->id, CL_DRIVER_VERSION, sizeof driver, driver, NULL);
    name[sizeof name - 1] = driver[sizeof driver - 1] = '\0';
    uint64_t h = 0xcbf29ce484222325ull;
    h = ocl_fnv_str(h, OCL_PLUGIN_VERSION);
    h = ocl_fnv_str(h, d->platform_name);
    h = ocl_fnv_str(h, d->platform_version);
    h = ocl_fnv_str(h, name);
    h = ocl_fnv_str(h, d->device_version);
    h = ocl_fnv_str(h, driver);
    h = ocl_fnv_str(h, d->build_options);
    for (cl_uint i = 0; i < t->count; i++)
        h = ocl_fnv(h, t->text[i], t->size[i]);
    return h;
}

static double ocl_now_ms(void)
{
    struct timespec ts;
    clock_gettime(CLOCK_MONOTONIC, &ts);
    return (double)ts.tv_sec * 1e3 + (double)ts.tv_nsec / 1e6;
}

/* ------------------------------------------------------------ disk cache */

typedef struct ocl_cache_header {
    char magic[8];
    uint64_t key;
    uint64_t size;
    uint64_t hash;
} ocl_cache_header;

static int ocl_cache_path(const ocl_state *s, ocl_family f, uint64_t key, char *out, size_t size)
{
    return snprintf(out, size, "%s/%s-%016llx.bin", s->cache_dir, ocl_family_names[f],
                    (unsigned long long)key);
}

/* Creates |dir| and its parents (mode 0700 for new ones). */
static bool ocl_mkdirs(const char *dir)
{
    char path[1024];
    size_t n = strlen(dir);
    if (n == 0 || n >= sizeof path)
        return false;
    memcpy(path, dir, n + 1);
    for (size_t i = 1; i <= n; i++) {
        if (path[i] != '/' && path[i] != '\0')
            continue;
        char saved = path[i];
        path[i] = '\0';
        if (mkdir(path, 0700) != 0 && errno != EEXIST)
            return false;
        path[i] = saved;
    }
    return true;
}

/* Reads and checks the cache entry at |path|.  Returns the payload in host
 * memory the caller frees, or NULL with |why| set ("" when there is no
 * entry at all). */
static unsigned char *ocl_cache_read(const ocl_state *s, const char *path, uint64_t key,
                                     size_t *out_size, const char **why)
{
    *why = "";
    *out_size = 0;
    FILE *f = fopen(path, "rb");
    if (!f)
        return NULL;
    ocl_cache_header h;
    unsigned char *payload = NULL;
    if (fread(&h, sizeof h, 1, f) != 1) {
        *why = "truncated header";
        goto out_close;
    }
    if (memcmp(h.magic, OCL_CACHE_MAGIC, sizeof h.magic) != 0) {
        *why = "bad magic";
        goto out_close;
    }
    if (h.key != key) {
        *why = "key mismatch";
        goto out_close;
    }
    if (h.size == 0 || h.size > OCL_CACHE_MAX_BYTES) {
        *why = "implausible size";
        goto out_close;
    }
    payload = s->host->alloc(s->host->ctx, (size_t)h.size, 16);
    if (!payload) {
        *why = "out of memory";
        goto out_close;
    }
    if (fread(payload, 1, (size_t)h.size, f) != (size_t)h.size) {
        *why = "truncated payload";
        goto out_free;
    }
    if (fgetc(f) != EOF) {
        *why = "trailing bytes";
        goto out_free;
    }
    if (ocl_fnv(0xcbf29ce484222325ull, payload, (size_t)h.size) != h.hash) {
        *why = "payload checksum mismatch";
        goto out_free;
    }
    fclose(f);
    *out_size = (size_t)h.size;
    return payload;

out_free:
    s->host->free(s->host->ctx, payload);
out_close:
    fclose(f);
    return NULL;
}

/* Writes the binary of |prog| to |path| (best effort: a cache that cannot
 * be written only costs a rebuild next time). */
static void ocl_cache_write(const ocl_state *s, const ocl_dev *d, cl_program prog,
                            const char *path, uint64_t key)
{
    size_t size = 0;
    if (clGetProgramInfo(prog, CL_PROGRAM_BINARY_SIZES, sizeof size, &size, NULL) != CL_SUCCESS ||
        size == 0 || size > OCL_CACHE_MAX_BYTES)
        return;
    unsigned char *bin = s->host->alloc(s->host->ctx, size, 16);
    if (!bin)
        return;
    unsigned char *bins[1] = {bin};
    char tmp[1200];
    FILE *f = NULL;
    if (clGetProgramInfo(prog, CL_PROGRAM_BINARIES, sizeof bins, bins, NULL) != CL_SUCCESS)
        goto out_free;
    if (!ocl_mkdirs(s->cache_dir)) {
        ocl_log(s, SY_LOG_DEBUG, "cannot create the program cache %s: %s", s->cache_dir,
                strerror(errno));
        goto out_free;
    }
    int n = snprintf(tmp, sizeof tmp, "%s.%ld.tmp", path, (long)getpid());
    if (n < 0 || (size_t)n >= sizeof tmp)
        goto out_free;
    f = fopen(tmp, "wb");
    if (!f)
        goto out_free;
    ocl_cache_header h;
    memcpy(h.magic, OCL_CACHE_MAGIC, sizeof h.magic);
    h.key = key;
    h.size = size;
    h.hash = ocl_fnv(0xcbf29ce484222325ull, bin, size);
    bool ok = fwrite(&h, sizeof h, 1, f) == 1 && fwrite(bin, 1, size, f) == size;
    ok = fclose(f) == 0 && ok;
    if (ok && rename(tmp, path) == 0)
        ocl_log(s, SY_LOG_DEBUG, "%s: cached program binary %s (%zu bytes)", d->desc.name, path,
                size);
    else
        remove(tmp);

out_free:
    s->host->free(s->host->ctx, bin);
}

/* ---------------------------------------------------------------- build */

/* Copies the build log of |prog| (trimmed) into |out|. */
static void ocl_build_log(const ocl_dev *d, cl_program prog, char *out, size_t size)
{
    size_t n = 0;
    out[0] = '\0';
    if (clGetProgramBuildInfo(prog, d->id, CL_PROGRAM_BUILD_LOG, size, out, &n) != CL_SUCCESS)
        out[0] = '\0';
    out[size - 1] = '\0';
    size_t len = strlen(out);
    while (len > 0 && (out[len - 1] == '\n' || out[len - 1] == ' '))
        out[--len] = '\0';
}

/* Creates every kernel of family |f| from its built program. */
static sy_status ocl_create_kernels(ocl_state *s, ocl_dev *d, ocl_family f)
{
    ocl_program *p = &d->progs[f];
    for (int k = 0; k < OCL_K_COUNT; k++) {
        if (ocl_kernel_table[k].family != f)
            continue;
        cl_int err = CL_SUCCESS;
        cl_kernel kern = clCreateKernel(p->prog, ocl_kernel_table[k].name, &err);
        if (!kern || err != CL_SUCCESS) {
            snprintf(p->log, sizeof p->log, "clCreateKernel(%s) failed: %s",
                     ocl_kernel_table[k].name, ocl_error_name(err));
            return SY_E_DEVICE;
        }
        d->kernels[k] = kern;
        size_t wg = 0;
        if (clGetKernelWorkGroupInfo(kern, d->id, CL_KERNEL_WORK_GROUP_SIZE, sizeof wg, &wg, NULL) !=
                CL_SUCCESS ||
            wg == 0)
            wg = d->max_wg ? d->max_wg : 1;
        d->kernel_wg[k] = wg;
    }
    return SY_OK;
}

static void ocl_drop_kernels(ocl_dev *d, ocl_family f)
{
    for (int k = 0; k < OCL_K_COUNT; k++) {
        if (ocl_kernel_table[k].family == f && d->kernels[k]) {
            clReleaseKernel(d->kernels[k]);
            d->kernels[k] = NULL;
        }
    }
}

/* Tries the cached binary at |path|.  True when |p| is built from it. */
static bool ocl_build_from_cache(ocl_state *s, ocl_dev *d, ocl_family f, const char *path,
                                 uint64_t key)
{
    ocl_program *p = &d->progs[f];
    const char *why = "";
    size_t size = 0;
    unsigned char *bin = ocl_cache_read(s, path, key, &size, &why);
    if (!bin) {
        if (why[0])
            ocl_log(s, SY_LOG_INFO, "%s: program cache entry %s is unusable (%s); rebuilding",
                    d->desc.name, path, why);
        return false;
    }
    const unsigned char *bins[1] = {bin};
    cl_int bin_status = CL_SUCCESS, err = CL_SUCCESS;
    p->prog = clCreateProgramWithBinary(d->ctx, 1, &d->id, &size, bins, &bin_status, &err);
    s->host->free(s->host->ctx, bin);
    if (!p->prog || err != CL_SUCCESS || bin_status != CL_SUCCESS) {
        why = "the driver refused the binary";
        if (err == CL_SUCCESS)
            err = bin_status;
        goto out_refused;
    }
    err = clBuildProgram(p->prog, 1, &d->id, d->build_options, NULL, NULL);
    if (err != CL_SUCCESS) {
        why = "the binary did not build";
        goto out_refused;
    }
    if (ocl_create_kernels(s, d, f) != SY_OK) {
        why = "a kernel was missing from the binary";
        goto out_refused;
    }
    return true;

out_refused:
    ocl_log(s, SY_LOG_INFO, "%s: program cache entry %s is unusable (%s: %s); rebuilding",
            d->desc.name, path, why, ocl_error_name(err));
    ocl_drop_kernels(d, f);
    if (p->prog)
        clReleaseProgram(p->prog);
    p->prog = NULL;
    p->log[0] = '\0';
    return false;
}

/* Builds family |f| from source; on failure records the build log. */
static sy_status ocl_build_from_source(ocl_state *s, ocl_dev *d, ocl_family f,
                                       const ocl_texts *t)
{
    ocl_program *p = &d->progs[f];
    cl_int err = CL_SUCCESS;
    /* The 1.2 prototype lacks the inner const; the strings are not written. */
    p->prog = clCreateProgramWithSource(d->ctx, t->count, (const char **)(uintptr_t)t->text,
                                        t->size, &err);
    if (!p->prog || err != CL_SUCCESS) {
        snprintf(p->log, sizeof p->log, "clCreateProgramWithSource failed: %s",
                 ocl_error_name(err));
        return SY_E_DEVICE;
    }
    err = clBuildProgram(p->prog, 1, &d->id, d->build_options, NULL, NULL);
    if (err != CL_SUCCESS) {
        char log[OCL_LOG_MAX - 64];
        ocl_build_log(d, p->prog, log, sizeof log);
        snprintf(p->log, sizeof p->log, "%s: %s", ocl_error_name(err),
                 log[0] ? log : "(empty build log)");
        return SY_E_UNSUPPORTED;
    }
    return ocl_create_kernels(s, d, f);
}

sy_status ocl_program_ensure(ocl_state *s, ocl_dev *d, ocl_family f)
{
    ocl_program *p = &d->progs[f];
    if (p->state == OCL_PROG_READY)
        return SY_OK;
    if (p->state == OCL_PROG_FAILED)
        return SY_E_UNSUPPORTED;
    ocl_texts t;
    if (ocl_family_texts(s, f, &t) != SY_OK) {
        snprintf(p->log, sizeof p->log, "no embedded source for program '%s'",
                 ocl_family_names[f]);
        p->state = OCL_PROG_FAILED;
        return SY_E_UNSUPPORTED;
    }
    const double t0 = ocl_now_ms();
    const uint64_t key = ocl_cache_key(d, &t);
    char path[1200];
    const bool cache = s->cache_dir[0] != '\0' &&
                       ocl_cache_path(s, f, key, path, sizeof path) < (int)sizeof path;
    if (cache && ocl_build_from_cache(s, d, f, path, key)) {
        p->state = OCL_PROG_READY;
        ocl_log(s, SY_LOG_DEBUG, "%s: program '%s' loaded from the cache (%s) in %.0f ms",
                d->desc.name, ocl_family_names[f], path, ocl_now_ms() - t0);
        return SY_OK;
    }
    sy_status st = ocl_build_from_source(s, d, f, &t);
    if (st != SY_OK) {
        ocl_drop_kernels(d, f);
        if (p->prog)
            clReleaseProgram(p->prog);
        p->prog = NULL;
        p->state = OCL_PROG_FAILED;
        ocl_log(s, SY_LOG_ERROR, "%s: program '%s' failed to build; its ops are unsupported "
                "on this device: %s", d->desc.name, ocl_family_names[f], p->log);
        return SY_E_UNSUPPORTED;
    }
    p->state = OCL_PROG_READY;
    ocl_log(s, SY_LOG_DEBUG, "%s: program '%s' built from source in %.0f ms", d->desc.name,
            ocl_family_names[f], ocl_now_ms() - t0);
    if (cache)
        ocl_cache_write(s, d, p->prog, path, key);
    return SY_OK;
}

void ocl_program_build_all(ocl_state *s, ocl_dev *d)
{
    for (int f = 0; f < OCL_FAM_COUNT; f++)
        ocl_program_ensure(s, d, (ocl_family)f);
}

void ocl_program_release(ocl_dev *d)
{
    for (int k = 0; k < OCL_K_COUNT; k++) {
        if (d->kernels[k])
            clReleaseKernel(d->kernels[k]);
        d->kernels[k] = NULL;
    }
    for (int f = 0; f < OCL_FAM_COUNT; f++) {
        if (d->progs[f].prog)
            clReleaseProgram(d->progs[f].prog);
        d->progs[f].prog = NULL;
        d->progs[f].state = OCL_PROG_UNBUILT;
    }
}
