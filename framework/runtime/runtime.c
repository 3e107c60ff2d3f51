/* The runtime object: options, logger, the services table handed to
 * plugins, and queries over the plugins, devices and refusals that the
 * loader recorded. */
#include <errno.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <strings.h>

#include <hwloc.h>

#include "runtime_internal.h"

static const char *const runtime_level_names[] = {
    [SY_LOG_ERROR] = "error",
    [SY_LOG_WARN] = "warn",
    [SY_LOG_INFO] = "info",
    [SY_LOG_DEBUG] = "debug",
};

static const char *runtime_level_name(sy_log_level level)
{
    return (unsigned)level <= SY_LOG_DEBUG ? runtime_level_names[level] : "debug";
}

/* ------------------------------------------------------------- helpers */

char *sy__strdup_vprintf(const char *fmt, va_list ap)
{
    va_list again;
    va_copy(again, ap);
    int n = vsnprintf(NULL, 0, fmt, ap);
    char *s = NULL;
    if (n >= 0) {
        s = malloc((size_t)n + 1);
        if (s)
            vsnprintf(s, (size_t)n + 1, fmt, again);
    }
    va_end(again);
    return s;
}

char *sy__strdup_printf(const char *fmt, ...)
{
    va_list ap;
    va_start(ap, fmt);
    char *s = sy__strdup_vprintf(fmt, ap);
    va_end(ap);
    return s;
}

void *sy__array_grow(void *items, uint32_t need, size_t elem_size, uint32_t *inout_cap)
{
    if (need <= *inout_cap)
        return items;
    uint32_t cap = *inout_cap ? *inout_cap : 8;
    while (cap < need) {
        if (cap > UINT32_MAX / 2)
            return NULL;
        cap *= 2;
    }
    if ((size_t)cap > SIZE_MAX / elem_size)
        return NULL;
    void *grown = realloc(items, (size_t)cap * elem_size);
    if (!grown)
        return NULL;
    *inout_cap = cap;
    return grown;
}

/* ------------------------------------------------------------- failures */

void sy__runtime_note_failure(sy_runtime *rt, uint32_t device, const sy_node *node,
                              sy_status status)
{
    sy_device_failure *f = &rt->failure;
    memset(f, 0, sizeof *f);
    f->device = device;
    f->node = node ? node->id : UINT32_MAX;
    f->status = status;
    if (node)
        snprintf(f->node_name, sizeof f->node_name, "%s", node->name);
    snprintf(f->text, sizeof f->text, "%.*s", (int)sizeof f->text - 1, rt->last_error);
    rt->has_failure = true;
}

void sy__runtime_clear_failure(sy_runtime *rt)
{
    rt->has_failure = false;
}

sy_status sy_runtime_query_device_failure(const sy_runtime *rt, sy_device_failure *out_failure)
{
    if (!out_failure)
        return SY_E_INVALID_ARG;
    memset(out_failure, 0, sizeof *out_failure);
    out_failure->node = UINT32_MAX;
    if (!rt)
        return SY_E_INVALID_ARG;
    if (!rt->has_failure)
        return SY_E_NOT_FOUND;
    *out_failure = rt->failure;
    return SY_OK;
}

sy_status sy_runtime_query_device_memory(sy_runtime *rt, uint32_t device, bool reset_peak,
                                         uint64_t *out_in_use, uint64_t *out_peak)
{
    if (out_in_use)
        *out_in_use = 0;
    if (out_peak)
        *out_peak = 0;
    if (!rt)
        return SY_E_INVALID_ARG;
    if (device >= rt->device_count)
        return SY_E_NOT_FOUND;
    const sy__device *d = &rt->devices[device];
    if (!d->plugin->desc.memory_usage)
        return SY_E_UNSUPPORTED;
    return d->plugin->desc.memory_usage(d->plugin->state, d->index, reset_peak, out_in_use,
                                        out_peak);
}

/* ------------------------------------------------------------- logging */

void sy__runtime_logv(sy_runtime *rt, sy_log_level level, const char *fmt, va_list ap)
{
    if (!rt || !fmt)
        return;
    /* A caller-installed logger receives everything (docs/embedding.md);
     * only the stderr logger filters, and filtering first skips the
     * formatting of debug chatter nobody reads. */
    if (!rt->log_fn && level > rt->log_level)
        return;
    char stack[1024];
    char *heap = NULL;
    const char *msg = stack;
    va_list again;
    va_copy(again, ap);
    int n = vsnprintf(stack, sizeof stack, fmt, ap);
    if (n < 0) {
        msg = "(unformattable log message)";
    } else if ((size_t)n >= sizeof stack) {
        /* Long paths make long messages; when the heap is short too, the
         * truncated text on the stack is still worth printing. */
        heap = malloc((size_t)n + 1);
        if (heap) {
            vsnprintf(heap, (size_t)n + 1, fmt, again);
            msg = heap;
        }
    }
    va_end(again);
    if (rt->log_fn)
        rt->log_fn(rt->log_user, level, msg);
    else
        fprintf(stderr, "switchyard: %s: %s\n", runtime_level_name(level), msg);
    free(heap);
}

void sy_runtime_log(sy_runtime *rt, sy_log_level level, const char *fmt, ...)
{
    va_list ap;
    va_start(ap, fmt);
    sy__runtime_logv(rt, level, fmt, ap);
    va_end(ap);
}

void sy__runtime_set_error(sy_runtime *rt, const char *fmt, ...)
{
    va_list ap;
    va_start(ap, fmt);
    vsnprintf(rt->last_error, sizeof rt->last_error, fmt, ap);
    va_end(ap);
}

const char *sy_runtime_last_error(const sy_runtime *rt)
{
    return rt ? rt->last_error : "";
}

/* ------------------------------------------------------- host services */

static void host_log(void *ctx, sy_log_level level, const char *msg)
{
    sy__plugin *p = ctx;
    /* Plugins are outside our control: an unknown level is treated as the
     * least important rather than trusted as an array index. */
    if ((unsigned)level > SY_LOG_DEBUG)
        level = SY_LOG_DEBUG;
    sy_runtime_log(p->rt, level, "%s: %s", p->desc.name, msg ? msg : "(null)");
}

static void *host_alloc(void *ctx, size_t size, size_t align)
{
    (void)ctx;
    if (align < 16)
        align = 16;
    if ((align & (align - 1)) != 0)
        return NULL;
    void *ptr = NULL;
    /* posix_memalign rather than aligned_alloc: C11 lets the latter refuse
     * sizes that are not a multiple of the alignment.  Zero-byte requests
     * get a real block so that NULL always means failure. */
    if (posix_memalign(&ptr, align, size ? size : 1) != 0)
        return NULL;
    return ptr;
}

static void host_free(void *ctx, void *ptr)
{
    (void)ctx;
    free(ptr);
}

static const char *host_op_name(void *ctx, uint32_t op)
{
    (void)ctx;
    return op < SY_OP_COUNT ? sy_op_name((sy_op)op) : "invalid";
}

static sy_status host_reference_execute(void *ctx, const sy_node *node)
{
    (void)ctx;
    if (!node)
        return SY_E_INVALID_ARG;
    return sy_op_reference_execute(node);
}

static void host_op_cost(void *ctx, const sy_node *node, uint64_t *out_flops,
                         uint64_t *out_bytes)
{
    (void)ctx;
    uint64_t flops = 0, bytes = 0;
    if (node)
        sy_op_cost(node, &flops, &bytes);
    if (out_flops)
        *out_flops = flops;
    if (out_bytes)
        *out_bytes = bytes;
}

void sy__host_init(sy__plugin *p)
{
    memset(&p->host, 0, sizeof p->host);
    p->host.abi_version = SY_PLUGIN_ABI_VERSION;
    p->host.struct_size = (uint32_t)sizeof p->host;
    p->host.ctx = p;
    p->host.log = host_log;
    p->host.alloc = host_alloc;
    p->host.free = host_free;
    p->host.op_name = host_op_name;
    p->host.reference_execute = host_reference_execute;
    p->host.op_cost = host_op_cost;
}

/* ------------------------------------------------------ create/destroy */

void sy_runtime_options_init(sy_runtime_options *opts)
{
    if (!opts)
        return;
    memset(opts, 0, sizeof *opts);
    opts->struct_size = (uint32_t)sizeof *opts;
    opts->log_level = SY_LOG_WARN;
}

/* Copies the fields of |opts| that its struct_size covers over defaults,
 * so that a caller compiled against an older, shorter struct still works. */
static sy_status runtime_resolve_options(const sy_runtime_options *opts,
                                         sy_runtime_options *out_opts)
{
    sy_runtime_options_init(out_opts);
    if (!opts)
        return SY_OK;
    if (opts->struct_size < sizeof opts->struct_size)
        return SY_E_INVALID_ARG;
    size_t n = opts->struct_size < sizeof *out_opts ? opts->struct_size : sizeof *out_opts;
    memcpy(out_opts, opts, n);
    out_opts->struct_size = (uint32_t)sizeof *out_opts;
    if ((unsigned)out_opts->log_level > SY_LOG_DEBUG)
        return SY_E_INVALID_ARG;
    return SY_OK;
}

static void runtime_read_log_env(sy_runtime *rt)
{
    const char *env = getenv("SWITCHYARD_LOG");
    if (!env || !env[0])
        return;
    for (unsigned l = SY_LOG_ERROR; l <= SY_LOG_DEBUG; l++) {
        if (strcasecmp(env, runtime_level_names[l]) == 0) {
            rt->log_level = (sy_log_level)l;
            return;
        }
    }
    sy_runtime_log(rt, SY_LOG_WARN,
                   "ignoring SWITCHYARD_LOG='%s': expected error, warn, info or debug", env);
}

#ifndef SY_PROFILE_SOURCE_DIR
#error "SY_PROFILE_SOURCE_DIR must be defined by the build"
#endif
#ifndef SY_PROFILE_INSTALL_DIR
#error "SY_PROFILE_INSTALL_DIR must be defined by the build"
#endif

/* Appends ":"|dir| (or |dir| first) to *path; false when out of memory. */
static bool runtime_path_append(char **path, const char *dir, const char *suffix)
{
    char *grown = sy__strdup_printf("%s%s%s%s", *path ? *path : "", *path ? ":" : "", dir, suffix);
    if (!grown)
        return false;
    free(*path);
    *path = grown;
    return true;
}

/* The profile search path (sy__runtime_profile_path): where `switchyard
 * tune` writes (docs/probe.md) first, the shipped profiles last. */
static sy_status runtime_resolve_profile_path(sy_runtime *rt)
{
    const char *env = getenv("SWITCHYARD_PROFILE_DIR");
    bool ok = true;
    if (env && env[0])
        ok = runtime_path_append(&rt->profile_path, env, "");
    if (!rt->no_default_paths) {
        const char *xdg = getenv("XDG_DATA_HOME");
        const char *home = getenv("HOME");
        if (ok && xdg && xdg[0] == '/')
            ok = runtime_path_append(&rt->profile_path, xdg, "/switchyard/profiles");
        else if (ok && home && home[0])
            ok = runtime_path_append(&rt->profile_path, home, "/.local/share/switchyard/profiles");
        if (ok && sy__runs_from_build_tree())
            ok = runtime_path_append(&rt->profile_path, SY_PROFILE_SOURCE_DIR, "");
        if (ok)
            ok = runtime_path_append(&rt->profile_path, SY_PROFILE_INSTALL_DIR, "");
    }
    return ok ? SY_OK : SY_E_NO_MEMORY;
}

const char *sy__runtime_profile_path(const sy_runtime *rt)
{
    return rt && rt->profile_path ? rt->profile_path : "";
}

sy_status sy_runtime_create(const sy_runtime_options *opts, sy_runtime **out_rt)
{
    if (!out_rt)
        return SY_E_INVALID_ARG;
    *out_rt = NULL;
    sy_runtime_options o;
    sy_status st = runtime_resolve_options(opts, &o);
    if (st != SY_OK)
        return st;
    sy_runtime *rt = calloc(1, sizeof *rt);
    if (!rt)
        return SY_E_NO_MEMORY;
    rt->log_fn = o.log_fn;
    rt->log_user = o.log_user;
    rt->log_level = o.log_level;
    rt->no_default_paths = o.no_default_paths;
    runtime_read_log_env(rt);
    const char *allow = o.plugins ? o.plugins : getenv("SWITCHYARD_PLUGINS");
    if (allow && *allow) {
        rt->plugin_allow = strdup(allow);
        if (!rt->plugin_allow) {
            st = SY_E_NO_MEMORY;
            goto out_destroy;
        }
    }
    const char *path = o.plugin_path ? o.plugin_path : getenv("SWITCHYARD_PLUGIN_PATH");
    if (path) {
        rt->plugin_path = strdup(path);
        if (!rt->plugin_path) {
            st = SY_E_NO_MEMORY;
            goto out_destroy;
        }
    }
    st = runtime_resolve_profile_path(rt);
    if (st != SY_OK)
        goto out_destroy;
    st = sy__loader_load_all(rt);
    if (st != SY_OK)
        goto out_destroy;
    *out_rt = rt;
    return SY_OK;

out_destroy:
    sy_runtime_destroy(rt);
    return st;
}

void sy_runtime_destroy(sy_runtime *rt)
{
    if (!rt)
        return;
    sy__loader_unload_all(rt);
    free(rt->plugin_path);
    free(rt->plugin_allow);
    free(rt->profile_path);
    free(rt);
}

/* ------------------------------------------------------------- queries */

uint32_t sy_runtime_plugin_count(const sy_runtime *rt)
{
    return rt ? rt->plugin_count : 0;
}

sy_status sy_runtime_query_plugin(const sy_runtime *rt, uint32_t i, sy_plugin_info *out_info)
{
    if (!out_info)
        return SY_E_INVALID_ARG;
    memset(out_info, 0, sizeof *out_info);
    if (!rt)
        return SY_E_INVALID_ARG;
    if (i >= rt->plugin_count)
        return SY_E_NOT_FOUND;
    const sy__plugin *p = rt->plugins[i];
    out_info->name = p->desc.name;
    out_info->version = p->desc.version ? p->desc.version : "";
    out_info->vendor = p->desc.vendor ? p->desc.vendor : "";
    out_info->path = p->path;
    out_info->abi_version = p->desc.abi_version;
    out_info->device_count = p->device_count;
    return SY_OK;
}

uint32_t sy_runtime_refusal_count(const sy_runtime *rt)
{
    return rt ? rt->refusal_count : 0;
}

sy_status sy_runtime_query_refusal(const sy_runtime *rt, uint32_t i,
                                   sy_plugin_refusal *out_refusal)
{
    if (!out_refusal)
        return SY_E_INVALID_ARG;
    memset(out_refusal, 0, sizeof *out_refusal);
    if (!rt)
        return SY_E_INVALID_ARG;
    if (i >= rt->refusal_count)
        return SY_E_NOT_FOUND;
    out_refusal->path = rt->refusals[i].path;
    out_refusal->reason = rt->refusals[i].reason;
    out_refusal->status = rt->refusals[i].status;
    return SY_OK;
}

uint32_t sy_runtime_device_count(const sy_runtime *rt)
{
    return rt ? rt->device_count : 0;
}

sy_status sy_runtime_query_device(const sy_runtime *rt, uint32_t i, sy_device_desc *out_desc)
{
    if (!out_desc)
        return SY_E_INVALID_ARG;
    memset(out_desc, 0, sizeof *out_desc);
    if (!rt)
        return SY_E_INVALID_ARG;
    if (i >= rt->device_count)
        return SY_E_NOT_FOUND;
    *out_desc = rt->devices[i].desc;
    return SY_OK;
}

sy_status sy_runtime_find_device(const sy_runtime *rt, const char *name, uint32_t *out_index)
{
    if (!out_index)
        return SY_E_INVALID_ARG;
    *out_index = 0;
    if (!rt || !name)
        return SY_E_INVALID_ARG;
    for (uint32_t i = 0; i < rt->device_count; i++) {
        if (strcmp(rt->devices[i].desc.name, name) == 0) {
            *out_index = i;
            return SY_OK;
        }
    }
    return SY_E_NOT_FOUND;
}

const char *sy__support_reason_name(uint32_t reason)
{
    switch (reason) {
    case SY_SUPPORT_YES:
        return "supported";
    case SY_UNSUPPORTED_OP:
        return "unsupported op";
    case SY_UNSUPPORTED_DTYPE:
        return "unsupported dtype";
    case SY_UNSUPPORTED_SHAPE:
        return "unsupported shape";
    case SY_UNSUPPORTED_SIZE:
        return "size limit";
    case SY_UNSUPPORTED_MEMORY:
        return "not enough memory";
    }
    return "unknown reason";
}

bool sy__device_supports(const sy__device *dev, const sy_node *node, sy_support *out_why)
{
    /* The reason and an empty text, not all 196 bytes: planning and the
     * executor's checks ask about every node, and zeroing the struct twice
     * per node cost more than the plugin's answer. */
    out_why->reason = SY_SUPPORT_YES;
    out_why->text[0] = '\0';
    /* View nodes compute nothing: every device "runs" them by aliasing, so
     * the scheduler never moves data just to satisfy one. */
    if (sy_op_is_view(node->op))
        return true;
    const sy__plugin *p = dev->plugin;
    /* A plugin built before the run-time KV position inputs (ABI 1.3)
     * would read the start or n_past from the params. */
    const uint32_t minor = SY_PLUGIN_ABI_MINOR_OF(p->desc.abi_version);
    if (sy_op_has_run_time_position(node) && minor < SY_PLUGIN_ABI_MINOR_RUN_TIME_POSITION) {
        out_why->reason = SY_UNSUPPORTED_OP;
        snprintf(out_why->text, sizeof out_why->text,
                 "plugin '%s' is built for ABI 1.%u, before KV positions read at run time (1.3)",
                 p->desc.name, minor);
        return false;
    }
    bool ok = p->desc.supports(p->state, dev->index, node, out_why);
    if (ok) {
        out_why->reason = SY_SUPPORT_YES;
        out_why->text[0] = '\0';
        return true;
    }
    out_why->text[sizeof out_why->text - 1] = '\0';
    /* A "no" must carry a reason the scheduler can record. */
    if (out_why->reason == SY_SUPPORT_YES)
        out_why->reason = SY_UNSUPPORTED_OP;
    if (!out_why->text[0])
        snprintf(out_why->text, sizeof out_why->text, "plugin '%s' gave no detail",
                 p->desc.name);
    return false;
}

bool sy_runtime_device_supports(const sy_runtime *rt, uint32_t i, const sy_node *node,
                                sy_support *out_why)
{
    sy_support scratch;
    sy_support *why = out_why ? out_why : &scratch;
    if (!rt || !node || i >= rt->device_count) {
        why->reason = SY_UNSUPPORTED_OP;
        snprintf(why->text, sizeof why->text, "%s",
                 !rt || !node ? "no runtime or node given" : "no such device");
        return false;
    }
    return sy__device_supports(&rt->devices[i], node, why);
}

/* ------------------------------------------------------------ topology */

/* Writes |bytes| as "512 KiB", "1.5 MiB", "32 GiB". */
static void runtime_format_bytes(uint64_t bytes, char *out, size_t size)
{
    static const char *const units[] = {"B", "KiB", "MiB", "GiB", "TiB"};
    double v = (double)bytes;
    unsigned u = 0;
    while (v >= 1024.0 && u + 1 < sizeof units / sizeof units[0]) {
        v /= 1024.0;
        u++;
    }
    if (v == (double)(uint64_t)v)
        snprintf(out, size, "%llu %s", (unsigned long long)v, units[u]);
    else
        snprintf(out, size, "%.1f %s", v, units[u]);
}

/* Appends ", L2 8 x 1 MiB" (or "L3 32 MiB" for one instance, or the total
 * when instances differ in size, as on hybrid cores); nothing when the
 * level is absent. */
static void runtime_append_cache(hwloc_topology_t topo, hwloc_obj_type_t type, const char *label,
                                 char *line, size_t size)
{
    int n = hwloc_get_nbobjs_by_type(topo, type);
    if (n <= 0)
        return;
    uint64_t first = 0, total = 0;
    bool uniform = true;
    for (int i = 0; i < n; i++) {
        hwloc_obj_t o = hwloc_get_obj_by_type(topo, type, (unsigned)i);
        uint64_t s = o && o->attr ? o->attr->cache.size : 0;
        if (i == 0)
            first = s;
        else if (s != first)
            uniform = false;
        total += s;
    }
    char sz[32];
    size_t len = strlen(line);
    if (uniform) {
        runtime_format_bytes(first, sz, sizeof sz);
        if (n == 1)
            snprintf(line + len, size - len, ", %s %s", label, sz);
        else
            snprintf(line + len, size - len, ", %s %d x %s", label, n, sz);
    } else {
        runtime_format_bytes(total, sz, sizeof sz);
        snprintf(line + len, size - len, ", %s %s in %d", label, sz, n);
    }
}

sy_status sy_runtime_query_topology(const sy_runtime *rt, char *out_text, size_t size)
{
    if (!out_text || size == 0)
        return SY_E_INVALID_ARG;
    out_text[0] = '\0';
    if (!rt)
        return SY_E_INVALID_ARG;
    hwloc_topology_t topo;
    if (hwloc_topology_init(&topo) != 0)
        return SY_E_NO_MEMORY;
    sy_status st = SY_OK;
    if (hwloc_topology_load(topo) != 0) {
        st = SY_E_DEVICE;
        goto out_destroy;
    }
    int packages = hwloc_get_nbobjs_by_type(topo, HWLOC_OBJ_PACKAGE);
    int cores = hwloc_get_nbobjs_by_type(topo, HWLOC_OBJ_CORE);
    int pus = hwloc_get_nbobjs_by_type(topo, HWLOC_OBJ_PU);
    int numa = hwloc_get_nbobjs_by_type(topo, HWLOC_OBJ_NUMANODE);
    char line[512];
    snprintf(line, sizeof line, "%d package%s, %d core%s, %d PU%s, %d NUMA node%s", packages,
             packages == 1 ? "" : "s", cores, cores == 1 ? "" : "s", pus, pus == 1 ? "" : "s",
             numa, numa == 1 ? "" : "s");
    runtime_append_cache(topo, HWLOC_OBJ_L2CACHE, "L2", line, sizeof line);
    runtime_append_cache(topo, HWLOC_OBJ_L3CACHE, "L3", line, sizeof line);
    uint64_t mem = hwloc_get_root_obj(topo)->total_memory;
    if (mem) {
        char sz[32];
        runtime_format_bytes(mem, sz, sizeof sz);
        size_t len = strlen(line);
        snprintf(line + len, sizeof line - len, ", %s memory", sz);
    }
    if (strlen(line) >= size) {
        st = SY_E_LIMIT;
        goto out_destroy;
    }
    memcpy(out_text, line, strlen(line) + 1);

out_destroy:
    hwloc_topology_destroy(topo);
    return st;
}
