/* OpenCL devices: plugin state, enumeration of every platform's devices,
 * their description from the OpenCL queries, and the self-test.
 * Environment variables are read once, here, at init:
 *   XDG_CACHE_HOME, HOME          where the program cache lives
 *                                 ($XDG_CACHE_HOME/switchyard/opencl, else
 *                                 ~/.cache/switchyard/opencl)
 *   SWITCHYARD_OPENCL_CACHE=0     no program cache
 *   SWITCHYARD_OPENCL_DISCRETE=1  treat every device as discrete: no host
 *                                 mapping, no import (tests the copy paths
 *                                 a discrete GPU takes, on any device)
 *   SWITCHYARD_OPENCL_MATVEC=rows|groups  single-token matmul kernel: one
 *                                 row per work-item (default on CPU devices)
 *                                 or a work-group reduction per row (default
 *                                 on GPUs)
 *   SWITCHYARD_OPENCL_MATVEC_WG=auto|N  work-group size of that kernel: a
 *                                 power of two up to 256 (capped by what the
 *                                 kernel allows), or the runtime's choice
 *                                 (rows) and the row length's (groups)
 *   SWITCHYARD_OPENCL_PROFILE=1   time every kernel (events on the queue) and
 *                                 log the totals per kernel at exit
 *   SWITCHYARD_OPENCL_BREAK=<family>  test hook: that program fails to build
 *   SWITCHYARD_OPENCL_FAIL_KERNEL=<kernel>  test hook: the device refuses
 *                                 every launch of that kernel */
#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "ocl_internal.h"

/* OpenCL 2.0 query, asked only of devices that report 2.0 or later. */
#define OCL_DEVICE_SVM_CAPABILITIES 0x1053
#define OCL_SVM_COARSE 1u
#define OCL_SVM_FINE 2u

void ocl_log(const ocl_state *s, sy_log_level level, const char *fmt, ...)
{
    if (!s->host->log)
        return;
    char msg[1024];
    va_list ap;
    va_start(ap, fmt);
    vsnprintf(msg, sizeof msg, fmt, ap);
    va_end(ap);
    s->host->log(s->host->ctx, level, msg);
}

const char *ocl_op_name(const ocl_state *s, uint32_t op)
{
    const char *name = s->host->op_name ? s->host->op_name(s->host->ctx, op) : NULL;
    return name ? name : "op";
}

const char *ocl_error_name(cl_int err)
{
    switch (err) {
#define OCL_ERR_(e) \
    case e:         \
        return #e;
        OCL_ERR_(CL_SUCCESS)
        OCL_ERR_(CL_DEVICE_NOT_FOUND)
        OCL_ERR_(CL_DEVICE_NOT_AVAILABLE)
        OCL_ERR_(CL_COMPILER_NOT_AVAILABLE)
        OCL_ERR_(CL_MEM_OBJECT_ALLOCATION_FAILURE)
        OCL_ERR_(CL_OUT_OF_RESOURCES)
        OCL_ERR_(CL_OUT_OF_HOST_MEMORY)
        OCL_ERR_(CL_MEM_COPY_OVERLAP)
        OCL_ERR_(CL_BUILD_PROGRAM_FAILURE)
        OCL_ERR_(CL_MAP_FAILURE)
        OCL_ERR_(CL_MISALIGNED_SUB_BUFFER_OFFSET)
        OCL_ERR_(CL_EXEC_STATUS_ERROR_FOR_EVENTS_IN_WAIT_LIST)
        OCL_ERR_(CL_INVALID_VALUE)
        OCL_ERR_(CL_INVALID_DEVICE_TYPE)
        OCL_ERR_(CL_INVALID_PLATFORM)
        OCL_ERR_(CL_INVALID_DEVICE)
        OCL_ERR_(CL_INVALID_CONTEXT)
        OCL_ERR_(CL_INVALID_QUEUE_PROPERTIES)
        OCL_ERR_(CL_INVALID_COMMAND_QUEUE)
        OCL_ERR_(CL_INVALID_HOST_PTR)
        OCL_ERR_(CL_INVALID_MEM_OBJECT)
        OCL_ERR_(CL_INVALID_BINARY)
        OCL_ERR_(CL_INVALID_BUILD_OPTIONS)
        OCL_ERR_(CL_INVALID_PROGRAM)
        OCL_ERR_(CL_INVALID_PROGRAM_EXECUTABLE)
        OCL_ERR_(CL_INVALID_KERNEL_NAME)
        OCL_ERR_(CL_INVALID_KERNEL)
        OCL_ERR_(CL_INVALID_ARG_INDEX)
        OCL_ERR_(CL_INVALID_ARG_VALUE)
        OCL_ERR_(CL_INVALID_ARG_SIZE)
        OCL_ERR_(CL_INVALID_KERNEL_ARGS)
        OCL_ERR_(CL_INVALID_WORK_DIMENSION)
        OCL_ERR_(CL_INVALID_WORK_GROUP_SIZE)
        OCL_ERR_(CL_INVALID_WORK_ITEM_SIZE)
        OCL_ERR_(CL_INVALID_GLOBAL_OFFSET)
        OCL_ERR_(CL_INVALID_EVENT_WAIT_LIST)
        OCL_ERR_(CL_INVALID_OPERATION)
        OCL_ERR_(CL_INVALID_BUFFER_SIZE)
        OCL_ERR_(CL_INVALID_GLOBAL_WORK_SIZE)
#undef OCL_ERR_
    case -1001:
        return "CL_PLATFORM_NOT_FOUND_KHR";
    default:
        return "CL_UNKNOWN_ERROR";
    }
}

/* ---------------------------------------------------------------- queries */

/* snprintf that truncates quietly: description fields are bounded and a
 * cut-off driver string is fine. */
static void ocl_fmt(char *out, size_t size, const char *fmt, ...) __attribute__((format(printf, 3, 4)));

static void ocl_fmt(char *out, size_t size, const char *fmt, ...)
{
    va_list ap;
    va_start(ap, fmt);
    vsnprintf(out, size, fmt, ap);
    va_end(ap);
}

static void ocl_query_str(cl_device_id id, cl_device_info what, char *out, size_t size)
{
    out[0] = '\0';
    if (clGetDeviceInfo(id, what, size, out, NULL) != CL_SUCCESS)
        out[0] = '\0';
    out[size - 1] = '\0';
}

static uint64_t ocl_query_u64(cl_device_id id, cl_device_info what)
{
    cl_ulong v = 0;
    return clGetDeviceInfo(id, what, sizeof v, &v, NULL) == CL_SUCCESS ? v : 0;
}

static uint32_t ocl_query_u32(cl_device_id id, cl_device_info what)
{
    cl_uint v = 0;
    return clGetDeviceInfo(id, what, sizeof v, &v, NULL) == CL_SUCCESS ? v : 0;
}

static size_t ocl_query_size(cl_device_id id, cl_device_info what)
{
    size_t v = 0;
    return clGetDeviceInfo(id, what, sizeof v, &v, NULL) == CL_SUCCESS ? v : 0;
}

/* Parses "OpenCL C 1.2 ..." / "OpenCL 3.0 ..." into major * 10 + minor. */
static int ocl_parse_version(const char *s, const char *prefix)
{
    size_t n = strlen(prefix);
    int major = 0, minor = 0;
    if (strncmp(s, prefix, n) != 0 || sscanf(s + n, "%d.%d", &major, &minor) != 2)
        return 0;
    return major * 10 + minor;
}

static void ocl_format_size(uint64_t bytes, char *out, size_t size)
{
    static const char *const units[] = {"B", "KiB", "MiB", "GiB", "TiB"};
    double v = (double)bytes;
    int u = 0;
    while (v >= 1024.0 && u < 4) {
        v /= 1024.0;
        u++;
    }
    if (v == (double)(uint64_t)v)
        snprintf(out, size, "%.0f %s", v, units[u]);
    else
        snprintf(out, size, "%.1f %s", v, units[u]);
}

/* Fills the description and capabilities of |d| from the queries. */
static void ocl_describe_device(ocl_state *s, ocl_dev *d, uint32_t index)
{
    sy_device_desc *desc = &d->desc;
    char name[128], vendor[128], driver[128], cversion[128];
    char *ext = NULL;
    size_t ext_size = 0;

    desc->struct_size = sizeof *desc;
    ocl_query_str(d->id, CL_DEVICE_NAME, name, sizeof name);
    ocl_query_str(d->id, CL_DEVICE_VENDOR, vendor, sizeof vendor);
    ocl_query_str(d->id, CL_DRIVER_VERSION, driver, sizeof driver);
    ocl_query_str(d->id, CL_DEVICE_VERSION, d->device_version, sizeof d->device_version);
    ocl_query_str(d->id, CL_DEVICE_OPENCL_C_VERSION, cversion, sizeof cversion);
    if (clGetPlatformInfo(d->platform, CL_PLATFORM_NAME, sizeof d->platform_name,
                          d->platform_name, NULL) != CL_SUCCESS)
        d->platform_name[0] = '\0';
    if (clGetPlatformInfo(d->platform, CL_PLATFORM_VERSION, sizeof d->platform_version,
                          d->platform_version, NULL) != CL_SUCCESS)
        d->platform_version[0] = '\0';
    d->platform_name[sizeof d->platform_name - 1] = '\0';
    d->platform_version[sizeof d->platform_version - 1] = '\0';

    if (clGetDeviceInfo(d->id, CL_DEVICE_EXTENSIONS, 0, NULL, &ext_size) == CL_SUCCESS &&
        ext_size > 0) {
        ext = s->host->alloc(s->host->ctx, ext_size + 1, 16);
        if (ext && clGetDeviceInfo(d->id, CL_DEVICE_EXTENSIONS, ext_size, ext, NULL) == CL_SUCCESS)
            ext[ext_size] = '\0';
        else if (ext)
            ext[0] = '\0';
    }
    const char *exts = ext ? ext : "";

    cl_device_type type = 0;
    clGetDeviceInfo(d->id, CL_DEVICE_TYPE, sizeof type, &type, NULL);
    const char *kind_word;
    if (type & CL_DEVICE_TYPE_GPU) {
        desc->kind = SY_DEVICE_GPU;
        kind_word = "GPU";
    } else if (type & CL_DEVICE_TYPE_CPU) {
        /* PoCL and other CPU runtimes: a CPU, reported as one so that the
         * scheduler does not mistake it for an accelerator. */
        desc->kind = SY_DEVICE_CPU;
        kind_word = "CPU device";
    } else {
        desc->kind = SY_DEVICE_NPU;
        kind_word = "accelerator";
    }
    snprintf(desc->name, sizeof desc->name, "opencl:%u", index);
    ocl_fmt(desc->model, sizeof desc->model, "%s (OpenCL %s)", name[0] ? name : "unknown",
             kind_word);
    ocl_fmt(desc->vendor, sizeof desc->vendor, "%s", vendor[0] ? vendor : "unknown");
    ocl_fmt(desc->driver, sizeof desc->driver, "%s %s", d->platform_name, driver);

    cl_bool unified = CL_FALSE;
    clGetDeviceInfo(d->id, CL_DEVICE_HOST_UNIFIED_MEMORY, sizeof unified, &unified, NULL);
    d->unified = unified == CL_TRUE && !s->force_discrete;
    desc->unified_memory = d->unified ? 1 : 0;
    desc->memory_bytes = ocl_query_u64(d->id, CL_DEVICE_GLOBAL_MEM_SIZE);
    desc->compute_units = ocl_query_u32(d->id, CL_DEVICE_MAX_COMPUTE_UNITS);
    /* peak_flops and peak_bandwidth stay 0: the probe measures them. */

    d->max_alloc = ocl_query_u64(d->id, CL_DEVICE_MAX_MEM_ALLOC_SIZE);
    d->local_mem = ocl_query_u64(d->id, CL_DEVICE_LOCAL_MEM_SIZE);
    d->max_wg = ocl_query_size(d->id, CL_DEVICE_MAX_WORK_GROUP_SIZE);
    d->base_align = ocl_query_u32(d->id, CL_DEVICE_MEM_BASE_ADDR_ALIGN) / 8;
    d->fp64 = strstr(exts, "cl_khr_fp64") != NULL;
    d->fp16 = strstr(exts, "cl_khr_fp16") != NULL;
    cl_device_fp_config fp = 0;
    clGetDeviceInfo(d->id, CL_DEVICE_SINGLE_FP_CONFIG, sizeof fp, &fp, NULL);
    d->correct_div_sqrt = (fp & CL_FP_CORRECTLY_ROUNDED_DIVIDE_SQRT) != 0;
    const int cver = ocl_parse_version(cversion, "OpenCL C ");
    d->cl12 = cver >= 12;
    const int dver = ocl_parse_version(d->device_version, "OpenCL ");
    uint64_t svm = 0;
    if (dver >= 20)
        svm = ocl_query_u64(d->id, OCL_DEVICE_SVM_CAPABILITIES);
    const bool subgroups = strstr(exts, "subgroups") != NULL;

    char local_s[32], alloc_s[32];
    ocl_format_size(d->local_mem, local_s, sizeof local_s);
    ocl_format_size(d->max_alloc, alloc_s, sizeof alloc_s);
    ocl_fmt(desc->topology, sizeof desc->topology,
             "%u CUs @ %u MHz, local %s, max alloc %s, work-group %zu, fp16 %s, fp64 %s, "
             "subgroups %s, SVM %s, %s",
             desc->compute_units, ocl_query_u32(d->id, CL_DEVICE_MAX_CLOCK_FREQUENCY), local_s,
             alloc_s, d->max_wg, d->fp16 ? "yes" : "no", d->fp64 ? "yes" : "no",
             subgroups ? "yes" : "no",
             (svm & OCL_SVM_FINE) ? "fine" : (svm & OCL_SVM_COARSE) ? "coarse" : "none",
             cversion[0] ? cversion : d->device_version);

    /* CPU runtimes run a work-group as a loop over its work-items: a
     * reduction across them costs more than it saves.
     * SWITCHYARD_OPENCL_MATVEC=rows|groups overrides the choice. */
    d->row_matvec = desc->kind == SY_DEVICE_CPU;
    if (s->matvec_override == 1)
        d->row_matvec = true;
    else if (s->matvec_override == 2)
        d->row_matvec = false;
    if (s->matvec_wg)
        ocl_log(s, SY_LOG_DEBUG, "%s: single-token matmul by %s, work-group %u", desc->name,
                d->row_matvec ? "rows" : "groups", s->matvec_wg);
    ocl_fmt(d->build_options, sizeof d->build_options, "%s%s%s",
             d->cl12 ? "-cl-std=CL1.2 " : "", d->fp64 ? "-DSY_FP64=1 " : "",
             d->correct_div_sqrt ? "-cl-fp32-correctly-rounded-divide-sqrt" : "");
    if (ext)
        s->host->free(s->host->ctx, ext);
}

/* Creates the context and in-order queue of |d|. */
static sy_status ocl_open_device(ocl_state *s, ocl_dev *d, uint32_t index)
{
    cl_int err = CL_SUCCESS;
    const cl_context_properties props[] = {CL_CONTEXT_PLATFORM, (cl_context_properties)d->platform,
                                           0};
    d->ctx = clCreateContext(props, 1, &d->id, NULL, NULL, &err);
    if (!d->ctx || err != CL_SUCCESS) {
        d->ctx = NULL;
        ocl_log(s, SY_LOG_WARN, "skipping an OpenCL device: clCreateContext failed: %s",
                ocl_error_name(err));
        return SY_E_DEVICE;
    }
    d->profile = s->profile;
    d->queue = clCreateCommandQueue(d->ctx, d->id, d->profile ? CL_QUEUE_PROFILING_ENABLE : 0, &err);
    if (!d->queue || err != CL_SUCCESS) {
        d->queue = NULL;
        ocl_log(s, SY_LOG_WARN, "skipping an OpenCL device: clCreateCommandQueue failed: %s",
                ocl_error_name(err));
        return SY_E_DEVICE;
    }
    d->flag = clCreateBuffer(d->ctx, CL_MEM_READ_WRITE, sizeof(cl_int), NULL, &err);
    if (!d->flag || err != CL_SUCCESS) {
        d->flag = NULL;
        ocl_log(s, SY_LOG_WARN, "skipping an OpenCL device: a 4-byte buffer failed: %s",
                ocl_error_name(err));
        return SY_E_DEVICE;
    }
    const cl_int zero = 0;
    err = clEnqueueWriteBuffer(d->queue, d->flag, CL_TRUE, 0, sizeof zero, &zero, 0, NULL, NULL);
    if (err != CL_SUCCESS)
        return SY_E_DEVICE;
    ocl_describe_device(s, d, index);
    return SY_OK;
}

static void ocl_close_device(ocl_state *s, ocl_dev *d)
{
    if (d->queue)
        clFinish(d->queue);
    if (d->profile) {
        ocl_profile_collect(d);
        ocl_profile_report(s, d);
    }
    if (d->events)
        s->host->free(s->host->ctx, d->events);
    if (d->event_kernel)
        s->host->free(s->host->ctx, d->event_kernel);
    ocl_program_release(d);
    if (d->scratch)
        clReleaseMemObject(d->scratch);
    if (d->flag)
        clReleaseMemObject(d->flag);
    if (d->queue)
        clReleaseCommandQueue(d->queue);
    if (d->ctx)
        clReleaseContext(d->ctx);
    if (d->pending)
        s->host->free(s->host->ctx, d->pending);
    memset(d, 0, sizeof *d);
}

/* Opens every device of every platform, in platform order. */
static sy_status ocl_enumerate(ocl_state *s)
{
    cl_uint n_plat = 0;
    cl_int err = clGetPlatformIDs(0, NULL, &n_plat);
    if (err != CL_SUCCESS || n_plat == 0) {
        ocl_log(s, SY_LOG_INFO, "no OpenCL platform found (%s); the plugin has no devices",
                err != CL_SUCCESS ? ocl_error_name(err) : "none installed");
        return SY_OK;
    }
    cl_platform_id plats[16];
    if (n_plat > 16)
        n_plat = 16;
    if (clGetPlatformIDs(n_plat, plats, NULL) != CL_SUCCESS)
        return SY_OK;
    s->devs = s->host->alloc(s->host->ctx, sizeof(ocl_dev) * OCL_MAX_DEVICES, 16);
    if (!s->devs)
        return SY_E_NO_MEMORY;
    memset(s->devs, 0, sizeof(ocl_dev) * OCL_MAX_DEVICES);
    for (cl_uint p = 0; p < n_plat && s->n_devs < OCL_MAX_DEVICES; p++) {
        cl_device_id ids[OCL_MAX_DEVICES];
        cl_uint n_ids = 0;
        err = clGetDeviceIDs(plats[p], CL_DEVICE_TYPE_ALL, OCL_MAX_DEVICES, ids, &n_ids);
        if (err != CL_SUCCESS)
            continue;
        if (n_ids > OCL_MAX_DEVICES)
            n_ids = OCL_MAX_DEVICES;
        for (cl_uint i = 0; i < n_ids && s->n_devs < OCL_MAX_DEVICES; i++) {
            cl_bool compiler = CL_FALSE;
            clGetDeviceInfo(ids[i], CL_DEVICE_COMPILER_AVAILABLE, sizeof compiler, &compiler, NULL);
            if (!compiler) {
                ocl_log(s, SY_LOG_WARN, "skipping an OpenCL device without a compiler");
                continue;
            }
            ocl_dev *d = &s->devs[s->n_devs];
            d->platform = plats[p];
            d->id = ids[i];
            for (int k = 0; k < OCL_K_COUNT; k++)
                d->kernels[k] = NULL;
            if (ocl_open_device(s, d, s->n_devs) != SY_OK) {
                ocl_close_device(s, d);
                continue;
            }
            ocl_log(s, SY_LOG_DEBUG, "%s: %s, %s, %s", d->desc.name, d->desc.model,
                    d->desc.driver, d->desc.topology);
            s->n_devs++;
        }
    }
    return SY_OK;
}

/* Where program binaries are cached, or "" when caching is off. */
static void ocl_cache_dir(ocl_state *s)
{
    s->cache_dir[0] = '\0';
    const char *off = getenv("SWITCHYARD_OPENCL_CACHE");
    if (off && strcmp(off, "0") == 0)
        return;
    const char *xdg = getenv("XDG_CACHE_HOME");
    const char *home = getenv("HOME");
    int n = -1;
    if (xdg && xdg[0] == '/')
        n = snprintf(s->cache_dir, sizeof s->cache_dir, "%s/switchyard/opencl", xdg);
    else if (home && home[0])
        n = snprintf(s->cache_dir, sizeof s->cache_dir, "%s/.cache/switchyard/opencl", home);
    if (n < 0 || (size_t)n >= sizeof s->cache_dir)
        s->cache_dir[0] = '\0';
}

/* ---------------------------------------------------------------- state */

sy_status ocl_device_init(const sy_host *host, void **out_state)
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
    ocl_state *s = host->alloc(host->ctx, sizeof *s, 16);
    if (!s)
        return SY_E_NO_MEMORY;
    memset(s, 0, sizeof *s);
    s->host = host;
    s->broken_family = -1;
    s->failing_kernel = -1;
    ocl_cache_dir(s);
    const char *discrete = getenv("SWITCHYARD_OPENCL_DISCRETE");
    s->force_discrete = discrete && strcmp(discrete, "1") == 0;
    const char *matvec = getenv("SWITCHYARD_OPENCL_MATVEC");
    if (matvec && strcmp(matvec, "rows") == 0)
        s->matvec_override = 1;
    else if (matvec && strcmp(matvec, "groups") == 0)
        s->matvec_override = 2;
    else if (matvec && *matvec)
        ocl_log(s, SY_LOG_WARN, "ignoring SWITCHYARD_OPENCL_MATVEC='%s' (rows or groups)", matvec);
    const char *wg = getenv("SWITCHYARD_OPENCL_MATVEC_WG");
    if (wg && *wg && strcmp(wg, "auto") != 0) {
        char *end = NULL;
        unsigned long v = strtoul(wg, &end, 10);
        if (end && *end == '\0' && v >= 1 && v <= OCL_MAX_WG && (v & (v - 1)) == 0)
            s->matvec_wg = (uint32_t)v;
        else
            ocl_log(s, SY_LOG_WARN,
                    "ignoring SWITCHYARD_OPENCL_MATVEC_WG='%s' (auto or a power of two up to %d)",
                    wg, OCL_MAX_WG);
    }
    const char *profile = getenv("SWITCHYARD_OPENCL_PROFILE");
    s->profile = profile && strcmp(profile, "1") == 0;
    const char *broken = getenv("SWITCHYARD_OPENCL_BREAK");
    if (broken && broken[0]) {
        for (int f = 0; f < OCL_FAM_COUNT; f++)
            if (strcmp(broken, ocl_family_name((ocl_family)f)) == 0)
                s->broken_family = f;
        if (s->broken_family < 0)
            ocl_log(s, SY_LOG_WARN, "SWITCHYARD_OPENCL_BREAK='%s' names no kernel program", broken);
    }
    const char *failing = getenv("SWITCHYARD_OPENCL_FAIL_KERNEL");
    if (failing && failing[0]) {
        for (int k = 0; k < OCL_K_COUNT; k++)
            if (strcmp(failing, ocl_kernel_name((ocl_kernel_id)k)) == 0)
                s->failing_kernel = k;
        if (s->failing_kernel < 0)
            ocl_log(s, SY_LOG_WARN, "SWITCHYARD_OPENCL_FAIL_KERNEL='%s' names no kernel", failing);
    }
    sy_status st = ocl_enumerate(s);
    if (st != SY_OK) {
        ocl_device_deinit(s);
        return st;
    }
    *out_state = s;
    return SY_OK;
}

void ocl_device_deinit(void *state)
{
    ocl_state *s = state;
    if (!s)
        return;
    for (uint32_t i = 0; i < s->n_devs; i++)
        ocl_close_device(s, &s->devs[i]);
    if (s->devs)
        s->host->free(s->host->ctx, s->devs);
    s->host->free(s->host->ctx, s);
}

uint32_t ocl_device_count(void *state)
{
    const ocl_state *s = state;
    return s ? s->n_devs : 0;
}

sy_status ocl_device_describe(void *state, uint32_t dev, sy_device_desc *out_desc)
{
    const ocl_state *s = state;
    if (!s || dev >= s->n_devs || !out_desc)
        return SY_E_INVALID_ARG;
    /* Fill only as much as the core's struct holds (an older core's is
     * shorter; one without even a struct_size gets nothing); a later
     * core's longer struct gets the fields this header knows. */
    uint32_t size = out_desc->struct_size;
    if (size < sizeof out_desc->struct_size)
        return SY_E_INVALID_ARG;
    if (size > sizeof *out_desc)
        size = sizeof *out_desc;
    memcpy(out_desc, &s->devs[dev].desc, size);
    out_desc->struct_size = size;
    return SY_OK;
}
