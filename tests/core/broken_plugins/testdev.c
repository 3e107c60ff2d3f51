/* A minimal, valid plugin for the loader and executor tests: one CPU-kind
 * device whose buffers are host memory and whose kernels are the host's
 * reference kernels.  Built several times with different defines:
 *
 *   TESTDEV_NAME          plugin and device name (default "testdev")
 *   TESTDEV_UNIFIED=0     an "opaque" device: no zero-copy import, buffers
 *                         not mappable, so the core must copy in and out
 *                         and hand execute() tensors with data == NULL
 *   TESTDEV_HOST_PTR=0    unified and importing, but without
 *                         buffer_host_ptr: imported storage is the host data
 *                         even though the core gets no pointer to it
 *   TESTDEV_FAIL_ALLOC_AT=N   the Nth buffer_alloc fails (fault injection)
 *   TESTDEV_FAIL_EXECUTE=1    execute() fails after running the first node
 *   TESTDEV_FAIL_OP=OP        execute() fails (SY_E_DEVICE) on every node of
 *                             op OP, which supports() accepts: a kernel that
 *                             breaks at run time
 *   TESTDEV_FAIL_DESCRIBE=1   describe() fails
 *   TESTDEV_DESCRIBE_OVERRUN=1  describe() ignores the struct_size it is
 *                         given and writes a description 64 bytes longer
 *                         than this header's (a plugin built against a
 *                         later header that forgot the rule); built apart,
 *                         in overrun/, where no directory load finds it
 *   TESTDEV_ABI_MINOR=N   claims ABI 1.N with a table longer than 1.0's
 *   TESTDEV_ASYNC=1       an asynchronous device with events (ABI 1.1):
 *                         execute() only queues copies of the nodes, and
 *                         the work runs when the core waits for an event
 *                         after it or synchronizes, so a result read before
 *                         its wait is stale every time, not by chance; a
 *                         failing kernel (TESTDEV_FAIL_OP) reports at the
 *                         wait, as a real device's asynchronous error does
 *   TESTDEV_LAZY_WAIT=1   (with TESTDEV_ASYNC) event_wait() returns without
 *                         running the work: the bug plugin-check's event
 *                         check exists for; built apart, in overrun/
 *
 * It logs what it does at debug level through host->log so that tests can
 * see which buffers the core asked for, and reports leaked buffers at
 * deinit as an error. */
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <stdio.h>
#include <string.h>

#include "switchyard/plugin.h"

#ifndef TESTDEV_NAME
#define TESTDEV_NAME "testdev"
#endif
#ifndef TESTDEV_UNIFIED
#define TESTDEV_UNIFIED 1
#endif
#ifndef TESTDEV_HOST_PTR
#define TESTDEV_HOST_PTR TESTDEV_UNIFIED
#endif
#ifndef TESTDEV_FAIL_ALLOC_AT
#define TESTDEV_FAIL_ALLOC_AT 0
#endif
#ifndef TESTDEV_FAIL_EXECUTE
#define TESTDEV_FAIL_EXECUTE 0
#endif
#ifndef TESTDEV_FAIL_DESCRIBE
#define TESTDEV_FAIL_DESCRIBE 0
#endif
#ifndef TESTDEV_FAIL_OP
#define TESTDEV_FAIL_OP SY_OP_NONE
#endif
#ifndef TESTDEV_DESCRIBE_OVERRUN
#define TESTDEV_DESCRIBE_OVERRUN 0
#endif
#ifndef TESTDEV_ASYNC
#define TESTDEV_ASYNC 0
#endif
#ifndef TESTDEV_LAZY_WAIT
#define TESTDEV_LAZY_WAIT 0
#endif
#ifndef TESTDEV_ABI_MINOR
#define TESTDEV_ABI_MINOR SY_PLUGIN_ABI_MINOR
#endif

/* What the device claims; buffers and nodes beyond it are refused. */
#define TESTDEV_MEMORY ((uint64_t)1 << 30)

/* One node queued on the asynchronous variant, its tensors resolved. */
typedef struct testdev_job {
    sy_node node;
    sy_tensor ins[SY_MAX_INPUTS];
    sy_tensor out;
} testdev_job;

typedef struct testdev_state {
    const sy_host *host;
    uint32_t alloc_calls; /* buffer_alloc calls so far, for fault injection */
    int32_t live_buffers;
    /* TESTDEV_ASYNC: jobs[0, n_jobs) are numbers [done, done + n_jobs) */
    testdev_job *jobs;
    uint32_t n_jobs, cap_jobs;
    uint64_t done;
    int32_t live_events;
} testdev_state;

typedef struct testdev_buffer {
    void *ptr;
    uint64_t size;
    int imported; /* ptr belongs to the caller */
} testdev_buffer;

static void testdev_logf(testdev_state *s, sy_log_level level, const char *fmt, ...)
    __attribute__((format(printf, 3, 4)));
#if TESTDEV_ASYNC
static sy_status testdev_run_until(testdev_state *s, uint64_t until);
#endif

static void testdev_logf(testdev_state *s, sy_log_level level, const char *fmt, ...)
{
    char msg[256];
    va_list ap;
    va_start(ap, fmt);
    vsnprintf(msg, sizeof msg, fmt, ap);
    va_end(ap);
    s->host->log(s->host->ctx, level, msg);
}

/* Exercises each host service once, so that every test loading this plugin
 * also checks the table the core hands out. */
static sy_status testdev_check_host(const sy_host *host, char *why, size_t size)
{
    if (host->abi_version != SY_PLUGIN_ABI_VERSION || host->struct_size < sizeof(sy_host)) {
        snprintf(why, size, "host ABI %#x, struct_size %u", host->abi_version,
                 host->struct_size);
        return SY_E_PLUGIN_ABI;
    }
    void *p = host->alloc(host->ctx, 100, 64);
    if (!p || ((uintptr_t)p & 63u) != 0) {
        snprintf(why, size, "alloc(100, 64) returned %p", p);
        host->free(host->ctx, p);
        return SY_E_NO_MEMORY;
    }
    memset(p, 0xab, 100);
    host->free(host->ctx, p);
    if (host->alloc(host->ctx, 16, 48) != NULL) {
        snprintf(why, size, "alloc accepted an alignment that is not a power of two");
        return SY_E_INTERNAL;
    }
    const char *name = host->op_name(host->ctx, SY_OP_MATMUL);
    if (!name || strcmp(name, "matmul") != 0) {
        snprintf(why, size, "op_name(MATMUL) is '%s'", name ? name : "(null)");
        return SY_E_INTERNAL;
    }
    sy_tensor a = {.dtype = SY_DTYPE_F32, .ne = {8, 1, 1, 1}};
    sy_tensor_set_contiguous_strides(&a);
    sy_tensor b = a, out = a;
    float av[8] = {1, 2, 3, 4, 5, 6, 7, 8}, bv[8] = {8, 7, 6, 5, 4, 3, 2, 1}, ov[8] = {0};
    a.data = av;
    b.data = bv;
    out.data = ov;
    sy_node add = {.op = SY_OP_ADD, .n_inputs = 2, .inputs = {&a, &b}, .output = &out};
    uint64_t flops = 0, bytes = 0;
    host->op_cost(host->ctx, &add, &flops, &bytes);
    if (flops == 0 || bytes == 0) {
        snprintf(why, size, "op_cost(add of 8) gave %llu flops, %llu bytes",
                 (unsigned long long)flops, (unsigned long long)bytes);
        return SY_E_INTERNAL;
    }
    sy_status st = host->reference_execute(host->ctx, &add);
    if (st != SY_OK || ov[0] != 9.0f || ov[7] != 9.0f) {
        snprintf(why, size, "reference_execute(add) gave status %d, out[0] %g", (int)st,
                 (double)ov[0]);
        return SY_E_INTERNAL;
    }
    return SY_OK;
}

static sy_status testdev_init(const sy_host *host, void **out_state)
{
    *out_state = NULL;
    char why[192] = "";
    sy_status st = testdev_check_host(host, why, sizeof why);
    if (st != SY_OK) {
        host->log(host->ctx, SY_LOG_ERROR, why);
        return st;
    }
    testdev_state *s = host->alloc(host->ctx, sizeof *s, 16);
    if (!s)
        return SY_E_NO_MEMORY;
    memset(s, 0, sizeof *s);
    s->host = host;
    testdev_logf(s, SY_LOG_DEBUG, "host services ok");
    *out_state = s;
    return SY_OK;
}

static void testdev_deinit(void *state)
{
    testdev_state *s = state;
    if (s->live_buffers != 0)
        testdev_logf(s, SY_LOG_ERROR, "%d buffers leaked", (int)s->live_buffers);
    if (s->live_events != 0)
        testdev_logf(s, SY_LOG_ERROR, "%d events leaked", (int)s->live_events);
    if (s->n_jobs != 0)
        testdev_logf(s, SY_LOG_ERROR, "%u queued nodes never ran", s->n_jobs);
    if (s->jobs)
        s->host->free(s->host->ctx, s->jobs);
    s->host->free(s->host->ctx, s);
}

static uint32_t testdev_device_count(void *state)
{
    (void)state;
    return 1;
}

static sy_status testdev_describe(void *state, uint32_t dev, sy_device_desc *out_desc)
{
    (void)state;
    if (dev != 0 || TESTDEV_FAIL_DESCRIBE || !out_desc)
        return SY_E_DEVICE;
    /* Filled in full here, then copied as far as the caller's struct_size
     * reaches: an older core's struct is shorter than this header's. */
    sy_device_desc d;
    memset(&d, 0, sizeof d);
    d.kind = SY_DEVICE_CPU;
    snprintf(d.name, sizeof d.name, "%s", TESTDEV_NAME);
    snprintf(d.model, sizeof d.model, "fake device for tests");
    snprintf(d.vendor, sizeof d.vendor, "switchyard tests");
    d.memory_bytes = TESTDEV_MEMORY;
    d.unified_memory = TESTDEV_UNIFIED;
    d.compute_units = 1;
#if TESTDEV_DESCRIBE_OVERRUN
    struct {
        sy_device_desc desc;
        unsigned char fields_of_a_later_header[64];
    } later;
    memset(&later, 0, sizeof later);
    later.desc = d;
    later.desc.struct_size = (uint32_t)sizeof later;
    memcpy(out_desc, &later, sizeof later); /* the bug this variant exists for */
    return SY_OK;
#else
    uint32_t size = out_desc->struct_size;
    if (size < sizeof d.struct_size)
        return SY_E_INVALID_ARG;
    if (size > sizeof d) /* a later core: fill what this header knows */
        size = sizeof d;
    d.struct_size = size;
    memcpy(out_desc, &d, size);
    return SY_OK;
#endif
}

/* Bytes of every distinct tensor |node| touches. */
static uint64_t testdev_node_bytes(const sy_node *node)
{
    uint64_t total = sy_tensor_nbytes(node->output);
    for (uint32_t i = 0; i < node->n_inputs; i++)
        if (node->inputs[i] && node->inputs[i] != node->output)
            total += sy_tensor_nbytes(node->inputs[i]);
    return total;
}

static bool testdev_supports(void *state, uint32_t dev, const sy_node *node, sy_support *out_why)
{
    (void)state;
    (void)dev;
    /* One gap on purpose, so that tests can see a refusal travel. */
    if (node->op == SY_OP_ARGMAX) {
        out_why->reason = SY_UNSUPPORTED_OP;
        snprintf(out_why->text, sizeof out_why->text, "%s has no argmax kernel", TESTDEV_NAME);
        return false;
    }
    const uint64_t bytes = testdev_node_bytes(node);
    if (bytes > TESTDEV_MEMORY) {
        out_why->reason = SY_UNSUPPORTED_MEMORY;
        snprintf(out_why->text, sizeof out_why->text,
                 "its tensors need %llu bytes, more than the %llu of %s",
                 (unsigned long long)bytes, (unsigned long long)TESTDEV_MEMORY, TESTDEV_NAME);
        return false;
    }
    return true;
}

static sy_status testdev_buffer_alloc(void *state, uint32_t dev, uint64_t size,
                                      void **out_buffer)
{
    testdev_state *s = state;
    *out_buffer = NULL;
    s->alloc_calls++;
    if (size > TESTDEV_MEMORY) {
        testdev_logf(s, SY_LOG_DEBUG, "alloc %llu refused: the device has %llu bytes",
                     (unsigned long long)size, (unsigned long long)TESTDEV_MEMORY);
        return SY_E_NO_MEMORY;
    }
    if (TESTDEV_FAIL_ALLOC_AT != 0 && s->alloc_calls == (uint32_t)TESTDEV_FAIL_ALLOC_AT) {
        testdev_logf(s, SY_LOG_DEBUG, "alloc %llu refused (fault injection)",
                     (unsigned long long)size);
        return SY_E_NO_MEMORY;
    }
    testdev_buffer *b = s->host->alloc(s->host->ctx, sizeof *b, 16);
    if (!b)
        return SY_E_NO_MEMORY;
    b->ptr = s->host->alloc(s->host->ctx, (size_t)size, 64);
    if (!b->ptr) {
        s->host->free(s->host->ctx, b);
        return SY_E_NO_MEMORY;
    }
    b->size = size;
    b->imported = 0;
    s->live_buffers++;
    testdev_logf(s, SY_LOG_DEBUG, "alloc %llu", (unsigned long long)size);
    *out_buffer = b;
    return SY_OK;
}

static sy_status testdev_buffer_import_host(void *state, uint32_t dev, void *ptr, uint64_t size,
                                            void **out_buffer)
{
    testdev_state *s = state;
    *out_buffer = NULL;
    testdev_buffer *b = s->host->alloc(s->host->ctx, sizeof *b, 16);
    if (!b)
        return SY_E_NO_MEMORY;
    b->ptr = ptr;
    b->size = size;
    b->imported = 1;
    s->live_buffers++;
    testdev_logf(s, SY_LOG_DEBUG, "import %llu", (unsigned long long)size);
    *out_buffer = b;
    return SY_OK;
}

static void testdev_buffer_free(void *state, uint32_t dev, void *buffer)
{
    testdev_state *s = state;
    testdev_buffer *b = buffer;
    if (!b)
        return;
    if (!b->imported)
        s->host->free(s->host->ctx, b->ptr);
    s->host->free(s->host->ctx, b);
    s->live_buffers--;
}

static void *testdev_buffer_host_ptr(void *state, uint32_t dev, void *buffer)
{
    (void)state;
    return ((testdev_buffer *)buffer)->ptr;
}

static sy_status testdev_copy_in(void *state, uint32_t dev, void *buffer, uint64_t offset,
                                 const void *src, uint64_t size)
{
    testdev_state *s = state;
    testdev_buffer *b = buffer;
    if (offset > b->size || size > b->size - offset)
        return SY_E_INVALID_ARG;
    testdev_logf(s, SY_LOG_DEBUG, "copy_in %llu", (unsigned long long)size);
#if TESTDEV_ASYNC
    sy_status st = testdev_run_until(s, UINT64_MAX); /* copies come after queued work */
    if (st != SY_OK)
        return st;
#endif
    memcpy((char *)b->ptr + offset, src, (size_t)size);
    return SY_OK;
}

static sy_status testdev_copy_out(void *state, uint32_t dev, void *buffer, uint64_t offset,
                                  void *dst, uint64_t size)
{
    testdev_state *s = state;
    testdev_buffer *b = buffer;
    if (offset > b->size || size > b->size - offset)
        return SY_E_INVALID_ARG;
    testdev_logf(s, SY_LOG_DEBUG, "copy_out %llu", (unsigned long long)size);
#if TESTDEV_ASYNC
    sy_status st = testdev_run_until(s, UINT64_MAX);
    if (st != SY_OK)
        return st;
#endif
    memcpy(dst, (char *)b->ptr + offset, (size_t)size);
    return SY_OK;
}

/* Points a copy of |t| at its storage in this device's buffers, which is
 * how a device that cannot hand the core host pointers reaches its data. */
static sy_status testdev_resolve(testdev_state *s, const sy_tensor *t, sy_tensor *out)
{
    *out = *t;
    if (!t->buffer) {
        testdev_logf(s, SY_LOG_ERROR, "tensor '%s' has no buffer", t->name);
        return SY_E_INVALID_ARG;
    }
    if (!TESTDEV_HOST_PTR && t->data) {
        testdev_logf(s, SY_LOG_ERROR, "tensor '%s' has a host pointer on an unmappable device",
                     t->name);
        return SY_E_INVALID_ARG;
    }
    out->data = (char *)((testdev_buffer *)t->buffer)->ptr + t->offset;
    return SY_OK;
}

/* Copies |node| into |job| with its tensors pointed at their storage. */
static sy_status testdev_resolve_node(testdev_state *s, const sy_node *node, testdev_job *job)
{
    job->node = *node;
    for (uint32_t k = 0; k < node->n_inputs; k++) {
        sy_status st = testdev_resolve(s, node->inputs[k], &job->ins[k]);
        if (st != SY_OK)
            return st;
        job->node.inputs[k] = &job->ins[k];
    }
    job->node.output = &job->out;
    return testdev_resolve(s, node->output, &job->out);
}

static sy_status testdev_run_job(testdev_state *s, testdev_job *job)
{
    if (TESTDEV_FAIL_OP != SY_OP_NONE && job->node.op == (uint32_t)TESTDEV_FAIL_OP) {
        testdev_logf(s, SY_LOG_ERROR, "node '%s': kernel failed (fault injection)",
                     job->node.name);
        return SY_E_DEVICE;
    }
    return s->host->reference_execute(s->host->ctx, &job->node);
}

#if TESTDEV_ASYNC
static sy_status testdev_queue(testdev_state *s, sy_node *const *nodes, uint32_t n)
{
    for (uint32_t i = 0; i < n; i++) {
        if (sy_op_is_view(nodes[i]->op))
            continue;
        if (s->n_jobs == s->cap_jobs) {
            uint32_t cap = s->cap_jobs ? s->cap_jobs * 2 : 64;
            testdev_job *grown = s->host->alloc(s->host->ctx, sizeof *grown * cap, 16);
            if (!grown)
                return SY_E_NO_MEMORY;
            if (s->jobs) {
                memcpy(grown, s->jobs, sizeof *grown * s->n_jobs);
                s->host->free(s->host->ctx, s->jobs);
            }
            s->jobs = grown;
            s->cap_jobs = cap;
        }
        sy_status st = testdev_resolve_node(s, nodes[i], &s->jobs[s->n_jobs]);
        if (st != SY_OK)
            return st;
        s->n_jobs++;
    }
    return SY_OK;
}

/* Runs the queued jobs numbered below |until|.  After a failure the rest
 * of the queue is dropped, as a device drops work after a fault. */
static sy_status testdev_run_until(testdev_state *s, uint64_t until)
{
    uint32_t k = 0;
    sy_status st = SY_OK;
    while (k < s->n_jobs && s->done + k < until && st == SY_OK)
        st = testdev_run_job(s, &s->jobs[k++]);
    if (st != SY_OK)
        k = s->n_jobs;
    if (k < s->n_jobs)
        memmove(s->jobs, s->jobs + k, sizeof *s->jobs * (s->n_jobs - k));
    s->n_jobs -= k;
    s->done += k;
    return st;
}

static sy_status testdev_event_record(void *state, uint32_t dev, void **out_event)
{
    testdev_state *s = state;
    (void)dev;
    uint64_t *ev = s->host->alloc(s->host->ctx, sizeof *ev, 16);
    *out_event = ev;
    if (!ev)
        return SY_E_NO_MEMORY;
    *ev = s->done + s->n_jobs;
    s->live_events++;
    testdev_logf(s, SY_LOG_DEBUG, "event_record %llu", (unsigned long long)*ev);
    return SY_OK;
}

static sy_status testdev_event_wait(void *state, uint32_t dev, void *event)
{
    testdev_state *s = state;
    (void)dev;
    const uint64_t until = *(const uint64_t *)event;
    testdev_logf(s, SY_LOG_DEBUG, "event_wait %llu", (unsigned long long)until);
    if (TESTDEV_LAZY_WAIT)
        return SY_OK;
    return testdev_run_until(s, until);
}

static void testdev_event_release(void *state, uint32_t dev, void *event)
{
    testdev_state *s = state;
    (void)dev;
    if (!event)
        return;
    s->host->free(s->host->ctx, event);
    s->live_events--;
}
#endif

static sy_status testdev_execute(void *state, uint32_t dev, sy_node *const *nodes, uint32_t n)
{
    testdev_state *s = state;
    testdev_logf(s, SY_LOG_DEBUG, "execute %u nodes", n);
#if TESTDEV_ASYNC
    return testdev_queue(s, nodes, n);
#else
    for (uint32_t i = 0; i < n; i++) {
        const sy_node *node = nodes[i];
        if (sy_op_is_view(node->op))
            continue;
        testdev_job job;
        sy_status st = testdev_resolve_node(s, node, &job);
        if (st == SY_OK)
            st = testdev_run_job(s, &job);
        if (st != SY_OK)
            return st;
        if (TESTDEV_FAIL_EXECUTE) {
            testdev_logf(s, SY_LOG_ERROR, "node '%s' failed (fault injection)", node->name);
            return SY_E_DEVICE;
        }
    }
    return SY_OK;
#endif
}

static sy_status testdev_synchronize(void *state, uint32_t dev)
{
    (void)dev;
#if TESTDEV_ASYNC
    testdev_state *s = state;
    testdev_logf(s, SY_LOG_DEBUG, "synchronize");
    return testdev_run_until(s, UINT64_MAX);
#else
    (void)state;
    return SY_OK;
#endif
}

/* A newer minor appends fields; the core must read only the 1.0 part. */
typedef struct testdev_table {
    sy_plugin_desc desc;
#if TESTDEV_ABI_MINOR != SY_PLUGIN_ABI_MINOR
    void *fields_of_a_later_minor[4];
#endif
} testdev_table;

static const testdev_table testdev_table_v = {
    .desc =
        {
            .abi_version = (SY_PLUGIN_ABI_MAJOR << 16) | TESTDEV_ABI_MINOR,
            .struct_size = sizeof(testdev_table),
            .name = TESTDEV_NAME,
            .version = "1.2.3",
            .vendor = "switchyard tests",
            .init = testdev_init,
            .deinit = testdev_deinit,
            .device_count = testdev_device_count,
            .describe = testdev_describe,
            .supports = testdev_supports,
            .buffer_alloc = testdev_buffer_alloc,
            .buffer_import_host = TESTDEV_UNIFIED ? testdev_buffer_import_host : NULL,
            .buffer_free = testdev_buffer_free,
            .buffer_host_ptr = TESTDEV_HOST_PTR ? testdev_buffer_host_ptr : NULL,
            .copy_in = testdev_copy_in,
            .copy_out = testdev_copy_out,
            .execute = testdev_execute,
            .synchronize = testdev_synchronize,
#if TESTDEV_ASYNC
            .event_record = testdev_event_record,
            .event_wait = testdev_event_wait,
            .event_release = testdev_event_release,
#endif
        },
};

SY_PLUGIN_EXPORT const sy_plugin_desc *sy_plugin_query(uint32_t host_abi)
{
    if (SY_PLUGIN_ABI_MAJOR_OF(host_abi) != SY_PLUGIN_ABI_MAJOR)
        return NULL;
    return &testdev_table_v.desc;
}
