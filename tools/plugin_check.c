/* plugin-check: the run, the host services it hands the plugin, and the
 * report (table and JSON).  The checks live in plugin_check_abi.c,
 * plugin_check_buffers.c and plugin_check_ops.c. */
#include <dlfcn.h>
#include <stdarg.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>
#include <unistd.h>

#include <cjson/cJSON.h>

#include "plugin_check_internal.h"

void sy_pcheck_options_init(sy_pcheck_options *opts)
{
    memset(opts, 0, sizeof *opts);
    opts->device = -1;
}

const char *sy_pcheck_outcome_name(sy_pcheck_outcome outcome)
{
    switch (outcome) {
    case SY_PCHECK_PASS:
        return "pass";
    case SY_PCHECK_FAIL:
        return "FAIL";
    case SY_PCHECK_SKIP:
        return "skip";
    case SY_PCHECK_REFUSED:
        return "refused";
    }
    return "?";
}

/* ------------------------------------------------------------- random */

uint64_t pcheck_rand(uint64_t *state)
{
    uint64_t x = *state;
    x ^= x >> 12;
    x ^= x << 25;
    x ^= x >> 27;
    *state = x;
    return x * 0x2545f4914f6cdd1dull;
}

float pcheck_uniform(uint64_t *state, float lo, float hi)
{
    const float u = (float)(pcheck_rand(state) >> 40) / (float)(1u << 24);
    return lo + (hi - lo) * u;
}

static uint64_t pcheck_fresh_seed(void)
{
    struct timespec ts;
    clock_gettime(CLOCK_REALTIME, &ts);
    uint64_t s = (uint64_t)ts.tv_nsec ^ ((uint64_t)ts.tv_sec << 20) ^ ((uint64_t)getpid() << 40);
    return s ? s : 0x9e3779b97f4a7c15ull;
}

/* -------------------------------------------------------- host services */

static void pcheck_host_log(void *ctx, sy_log_level level, const char *msg)
{
    pcheck_host *h = ctx;
    pthread_mutex_lock(&h->lock);
    if (level <= SY_LOG_WARN)
        snprintf(h->last_error, sizeof h->last_error, "%s", msg ? msg : "(null)");
    const bool verbose = h->verbose;
    pthread_mutex_unlock(&h->lock);
    if (verbose) {
        static const char *const names[] = {"error", "warn", "info", "debug"};
        fprintf(stderr, "  [%s %s] %s\n", h->plugin[0] ? h->plugin : "plugin",
                (unsigned)level <= SY_LOG_DEBUG ? names[level] : "?", msg ? msg : "(null)");
    }
}

static void *pcheck_host_alloc(void *ctx, size_t size, size_t align)
{
    pcheck_host *h = ctx;
    if (align < 16)
        align = 16;
    if ((align & (align - 1)) != 0 || size > h->alloc_limit)
        return NULL;
    void *p = NULL;
    if (posix_memalign(&p, align, size ? size : 1) != 0)
        return NULL;
    pthread_mutex_lock(&h->lock);
    h->live_allocs++;
    pthread_mutex_unlock(&h->lock);
    return p;
}

static void pcheck_host_free(void *ctx, void *ptr)
{
    pcheck_host *h = ctx;
    if (!ptr)
        return;
    free(ptr);
    pthread_mutex_lock(&h->lock);
    h->live_allocs--;
    pthread_mutex_unlock(&h->lock);
}

static const char *pcheck_host_op_name(void *ctx, uint32_t op)
{
    return op < SY_OP_COUNT ? sy_op_name((sy_op)op) : "invalid";
}

static sy_status pcheck_host_reference(void *ctx, const sy_node *node)
{
    pcheck_host *h = ctx;
    pthread_mutex_lock(&h->lock);
    h->reference_calls++;
    pthread_mutex_unlock(&h->lock);
    return node ? sy_op_reference_execute(node) : SY_E_INVALID_ARG;
}

static void pcheck_host_op_cost(void *ctx, const sy_node *node, uint64_t *out_flops,
                                uint64_t *out_bytes)
{
    uint64_t flops = 0, bytes = 0;
    if (node)
        sy_op_cost(node, &flops, &bytes);
    if (out_flops)
        *out_flops = flops;
    if (out_bytes)
        *out_bytes = bytes;
}

static void pcheck_host_init(pcheck_host *h, bool verbose)
{
    memset(h, 0, sizeof *h);
    pthread_mutex_init(&h->lock, NULL);
    h->verbose = verbose;
    long pages = sysconf(_SC_PHYS_PAGES), page = sysconf(_SC_PAGE_SIZE);
    h->alloc_limit = pages > 0 && page > 0 ? (uint64_t)pages * (uint64_t)page : (uint64_t)1 << 36;
    h->host.abi_version = SY_PLUGIN_ABI_VERSION;
    h->host.struct_size = (uint32_t)sizeof h->host;
    h->host.ctx = h;
    h->host.log = pcheck_host_log;
    h->host.alloc = pcheck_host_alloc;
    h->host.free = pcheck_host_free;
    h->host.op_name = pcheck_host_op_name;
    h->host.reference_execute = pcheck_host_reference;
    h->host.op_cost = pcheck_host_op_cost;
}

void pcheck_host_take_error(pcheck_host *h, char *out, size_t size)
{
    pthread_mutex_lock(&h->lock);
    snprintf(out, size, "%s", h->last_error);
    h->last_error[0] = '\0';
    pthread_mutex_unlock(&h->lock);
}

uint64_t pcheck_host_reference_calls(pcheck_host *h)
{
    pthread_mutex_lock(&h->lock);
    uint64_t n = h->reference_calls;
    pthread_mutex_unlock(&h->lock);
    return n;
}

int64_t pcheck_host_live_allocs(pcheck_host *h)
{
    pthread_mutex_lock(&h->lock);
    int64_t n = h->live_allocs;
    pthread_mutex_unlock(&h->lock);
    return n;
}

/* ---------------------------------------------------------------- report */

bool pcheck_add(pcheck_run *run, const char *group, int32_t dev, sy_pcheck_outcome outcome,
                const char *name, const char *fmt, ...)
{
    sy_pcheck_report *r = run->report;
    sy_pcheck_result res;
    memset(&res, 0, sizeof res);
    snprintf(res.group, sizeof res.group, "%s", group);
    snprintf(res.name, sizeof res.name, "%s", name);
    res.device = dev;
    res.outcome = outcome;
    if (fmt) {
        va_list ap;
        va_start(ap, fmt);
        vsnprintf(res.detail, sizeof res.detail, fmt, ap);
        va_end(ap);
    }
    if (r->n_results == r->cap_results) {
        uint32_t cap = r->cap_results ? r->cap_results * 2 : 64;
        sy_pcheck_result *grown = realloc(r->results, cap * sizeof *grown);
        if (grown) {
            r->results = grown;
            r->cap_results = cap;
        }
    }
    /* Out of memory for the list: the counts and the callback still see it. */
    if (r->n_results < r->cap_results)
        r->results[r->n_results++] = res;
    switch (outcome) {
    case SY_PCHECK_PASS:
        r->passed++;
        break;
    case SY_PCHECK_FAIL:
        r->failed++;
        break;
    case SY_PCHECK_SKIP:
        r->skipped++;
        break;
    case SY_PCHECK_REFUSED:
        r->refused++;
        break;
    }
    if (run->opts->on_result)
        run->opts->on_result(run->opts->user, &res);
    return outcome != SY_PCHECK_FAIL;
}

bool pcheck_pass(pcheck_run *run, const char *group, int32_t dev, const char *name)
{
    return pcheck_add(run, group, dev, SY_PCHECK_PASS, name, "%s", "");
}

void sy_pcheck_report_destroy(sy_pcheck_report *report)
{
    if (!report)
        return;
    free(report->results);
    free(report);
}

const sy_pcheck_result *sy_pcheck_find(const sy_pcheck_report *report, const char *name)
{
    for (uint32_t i = 0; report && i < report->n_results; i++)
        if (strcmp(report->results[i].name, name) == 0)
            return &report->results[i];
    return NULL;
}

void sy_pcheck_print_result(FILE *f, const sy_pcheck_result *r)
{
    char dev[16] = "-";
    if (r->device >= 0)
        snprintf(dev, sizeof dev, "%d", r->device);
    fprintf(f, "  %-9s %-3s %-48s %-7s %s\n", r->group, dev, r->name,
            sy_pcheck_outcome_name(r->outcome), r->detail);
}

void sy_pcheck_print_summary(FILE *f, const sy_pcheck_report *r)
{
    fprintf(f, "\n%u case(s) refused by supports() with a reason, %u check(s) skipped\n",
            r->refused, r->skipped);
    fprintf(f, "%u passed, %u failed\n", r->passed, r->failed);
}

sy_status sy_pcheck_write_json(FILE *f, const sy_pcheck_report *r)
{
    cJSON *root = cJSON_CreateObject();
    if (!root)
        return SY_E_NO_MEMORY;
    char seed[32];
    snprintf(seed, sizeof seed, "0x%016llx", (unsigned long long)r->seed);
    cJSON_AddStringToObject(root, "path", r->path);
    cJSON_AddStringToObject(root, "plugin", r->plugin);
    cJSON_AddStringToObject(root, "version", r->version);
    cJSON_AddStringToObject(root, "seed", seed);
    cJSON_AddNumberToObject(root, "passed", r->passed);
    cJSON_AddNumberToObject(root, "failed", r->failed);
    cJSON_AddNumberToObject(root, "refused", r->refused);
    cJSON_AddNumberToObject(root, "skipped", r->skipped);
    cJSON *checks = cJSON_AddArrayToObject(root, "checks");
    for (uint32_t i = 0; checks && i < r->n_results; i++) {
        const sy_pcheck_result *res = &r->results[i];
        cJSON *c = cJSON_CreateObject();
        if (!c)
            break;
        cJSON_AddStringToObject(c, "group", res->group);
        cJSON_AddStringToObject(c, "name", res->name);
        if (res->device >= 0)
            cJSON_AddNumberToObject(c, "device", res->device);
        cJSON_AddStringToObject(c, "result", sy_pcheck_outcome_name(res->outcome));
        cJSON_AddStringToObject(c, "detail", res->detail);
        cJSON_AddItemToArray(checks, c);
    }
    char *text = cJSON_Print(root);
    cJSON_Delete(root);
    if (!text)
        return SY_E_NO_MEMORY;
    fprintf(f, "%s\n", text);
    cJSON_free(text);
    return SY_OK;
}

/* --------------------------------------------------------------- the run */

static void pcheck_devices(pcheck_run *run)
{
    const int32_t only = run->opts->device;
    if (only >= 0 && (uint32_t)only >= run->device_count) {
        pcheck_add(run, "describe", only, SY_PCHECK_FAIL, "device exists",
                   "--device %d, but the plugin has %u device(s)", only, run->device_count);
        return;
    }
    for (uint32_t dev = 0; dev < run->device_count; dev++) {
        if (only >= 0 && (uint32_t)only != dev)
            continue;
        sy_device_desc desc;
        if (!pcheck_describe(run, dev, &desc))
            continue;
        pcheck_buffers(run, dev, &desc);
        pcheck_ops(run, dev, &desc);
        pcheck_events(run, dev, &desc);
        pcheck_threads(run, dev, &desc);
    }
}

sy_status sy_pcheck_run(const sy_pcheck_options *opts, sy_pcheck_report **out_report)
{
    if (!out_report)
        return SY_E_INVALID_ARG;
    *out_report = NULL;
    if (!opts || !opts->path)
        return SY_E_INVALID_ARG;
    sy_pcheck_report *report = calloc(1, sizeof *report);
    if (!report)
        return SY_E_NO_MEMORY;
    snprintf(report->path, sizeof report->path, "%s", opts->path);
    report->seed = opts->seed ? opts->seed : pcheck_fresh_seed();

    pcheck_run run;
    memset(&run, 0, sizeof run);
    run.opts = opts;
    run.report = report;
    run.rng = report->seed;
    pcheck_host_init(&run.host, opts->verbose);

    if (pcheck_abi(&run)) {
        snprintf(run.host.plugin, sizeof run.host.plugin, "%s", report->plugin);
        if (pcheck_lifecycle(&run)) {
            pcheck_devices(&run);
            run.table.deinit(run.state);
            const int64_t live = pcheck_host_live_allocs(&run.host);
            if (live == 0)
                pcheck_pass(&run, "lifecycle", -1, "deinit frees every host allocation");
            else
                pcheck_add(&run, "lifecycle", -1, SY_PCHECK_FAIL,
                           "deinit frees every host allocation",
                           "%lld host allocation(s) not freed after deinit", (long long)live);
        }
    }
    /* The plugin's table and strings are gone after dlclose. */
    if (run.dl)
        dlclose(run.dl);
    pthread_mutex_destroy(&run.host.lock);
    *out_report = report;
    return SY_OK;
}
