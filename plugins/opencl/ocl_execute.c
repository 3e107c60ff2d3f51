/* Graph-segment execution on an OpenCL device: every node is enqueued on
 * the device's in-order queue and execute() returns without waiting;
 * synchronize() waits (clFinish), makes imported host memory that kernels
 * wrote current, and reports an out-of-range GET_ROWS id.
 *
 * A node whose program failed to build, or whose launch the device
 * refused, runs on the host through the reference kernel instead (after
 * the queue drains), with a warning that names the node and the reason:
 * the run continues, slower, and says so.  supports() refuses such ops
 * from then on, so the next plan places them elsewhere. */
#include <stdio.h>
#include <string.h>

#include "ocl_internal.h"

sy_status ocl_note_written(ocl_state *s, ocl_dev *d, ocl_buffer *b)
{
    if (b->pending_sync)
        return SY_OK;
    if (d->n_pending == d->cap_pending) {
        uint32_t cap = d->cap_pending ? d->cap_pending * 2 : 16;
        ocl_buffer **p = s->host->alloc(s->host->ctx, sizeof *p * cap, 16);
        if (!p)
            return SY_E_NO_MEMORY;
        if (d->pending) {
            memcpy(p, d->pending, sizeof *p * d->n_pending);
            s->host->free(s->host->ctx, d->pending);
        }
        d->pending = p;
        d->cap_pending = cap;
    }
    d->pending[d->n_pending++] = b;
    b->pending_sync = true;
    return SY_OK;
}

/* -------------------------------------------------------------- profiling */

void ocl_profile_keep(ocl_state *s, ocl_dev *d, ocl_kernel_id k, cl_event ev)
{
    if (d->n_events == d->cap_events) {
        uint32_t cap = d->cap_events ? d->cap_events * 2 : 256;
        cl_event *e = s->host->alloc(s->host->ctx, sizeof *e * cap, 16);
        ocl_kernel_id *ids = s->host->alloc(s->host->ctx, sizeof *ids * cap, 16);
        if (!e || !ids) {
            if (e)
                s->host->free(s->host->ctx, e);
            if (ids)
                s->host->free(s->host->ctx, ids);
            clReleaseEvent(ev);
            return;
        }
        if (d->events) {
            memcpy(e, d->events, sizeof *e * d->n_events);
            memcpy(ids, d->event_kernel, sizeof *ids * d->n_events);
            s->host->free(s->host->ctx, d->events);
            s->host->free(s->host->ctx, d->event_kernel);
        }
        d->events = e;
        d->event_kernel = ids;
        d->cap_events = cap;
    }
    d->events[d->n_events] = ev;
    d->event_kernel[d->n_events] = k;
    d->n_events++;
}

void ocl_profile_collect(ocl_dev *d)
{
    for (uint32_t i = 0; i < d->n_events; i++) {
        cl_ulong t0 = 0, t1 = 0;
        if (clGetEventProfilingInfo(d->events[i], CL_PROFILING_COMMAND_START, sizeof t0, &t0,
                                    NULL) == CL_SUCCESS &&
            clGetEventProfilingInfo(d->events[i], CL_PROFILING_COMMAND_END, sizeof t1, &t1,
                                    NULL) == CL_SUCCESS &&
            t1 >= t0) {
            d->prof_ns[d->event_kernel[i]] += t1 - t0;
            d->prof_calls[d->event_kernel[i]]++;
        }
        clReleaseEvent(d->events[i]);
    }
    d->n_events = 0;
}

void ocl_profile_report(const ocl_state *s, const ocl_dev *d)
{
    uint64_t total = 0;
    for (int k = 0; k < OCL_K_COUNT; k++)
        total += d->prof_ns[k];
    if (total == 0)
        return;
    ocl_log(s, SY_LOG_INFO, "%s: kernel time %.3f ms in all (SWITCHYARD_OPENCL_PROFILE)",
            d->desc.name, (double)total / 1e6);
    for (int k = 0; k < OCL_K_COUNT; k++) {
        if (!d->prof_calls[k])
            continue;
        ocl_log(s, SY_LOG_INFO, "%s:   %-16s %8llu calls %10.3f ms %9.1f us/call %5.1f%%",
                d->desc.name, ocl_kernel_name((ocl_kernel_id)k),
                (unsigned long long)d->prof_calls[k], (double)d->prof_ns[k] / 1e6,
                (double)d->prof_ns[k] / 1e3 / (double)d->prof_calls[k],
                100.0 * (double)d->prof_ns[k] / (double)total);
    }
}

/* ---------------------------------------------------------- host fallback */

/* Host copies of the tensors of one node run on the host. */
typedef struct ocl_host_node {
    sy_node node;
    sy_tensor tensors[SY_MAX_INPUTS + 1];
    void *temp[SY_MAX_INPUTS + 1]; /* host memory we allocated, or NULL */
} ocl_host_node;

/* Gives host tensor |h| (a copy of |t|) host memory holding t's bytes. */
static sy_status ocl_host_view(ocl_state *s, ocl_dev *d, const sy_tensor *t, sy_tensor *h,
                               void **out_temp)
{
    *h = *t;
    *out_temp = NULL;
    const ocl_buffer *b = t->buffer;
    if (!b)
        return t->data ? SY_OK : SY_E_INVALID_ARG;
    const uint64_t span = sy_tensor_nbytes(t);
    if (t->offset > b->size || span > b->size - t->offset)
        return SY_E_INVALID_ARG;
    if (b->mapped) {
        h->data = (char *)b->host + t->offset;
        return SY_OK;
    }
    void *tmp = s->host->alloc(s->host->ctx, span ? (size_t)span : 1, 64);
    if (!tmp)
        return SY_E_NO_MEMORY;
    if (span) {
        cl_int err = clEnqueueReadBuffer(d->queue, b->mem, CL_TRUE, (size_t)t->offset,
                                         (size_t)span, tmp, 0, NULL, NULL);
        if (err != CL_SUCCESS) {
            s->host->free(s->host->ctx, tmp);
            return SY_E_DEVICE;
        }
    }
    h->data = tmp;
    *out_temp = tmp;
    return SY_OK;
}

static sy_status ocl_run_on_host(ocl_state *s, ocl_dev *d, const sy_node *node)
{
    if (!s->host->reference_execute)
        return SY_E_UNSUPPORTED;
    if (clFinish(d->queue) != CL_SUCCESS)
        return SY_E_DEVICE;
    ocl_host_node *hn = s->host->alloc(s->host->ctx, sizeof *hn, 16);
    if (!hn)
        return SY_E_NO_MEMORY;
    memset(hn, 0, sizeof *hn);
    hn->node = *node;
    sy_status st = SY_OK;
    const uint32_t n_in = node->n_inputs <= SY_MAX_INPUTS ? node->n_inputs : SY_MAX_INPUTS;
    for (uint32_t i = 0; i < n_in && st == SY_OK; i++) {
        st = ocl_host_view(s, d, node->inputs[i], &hn->tensors[i], &hn->temp[i]);
        hn->node.inputs[i] = &hn->tensors[i];
    }
    if (st == SY_OK) {
        st = ocl_host_view(s, d, node->output, &hn->tensors[SY_MAX_INPUTS],
                           &hn->temp[SY_MAX_INPUTS]);
        hn->node.output = &hn->tensors[SY_MAX_INPUTS];
    }
    if (st == SY_OK)
        st = s->host->reference_execute(s->host->ctx, &hn->node);
    if (st == SY_OK && hn->temp[SY_MAX_INPUTS]) {
        const sy_tensor *out = node->output;
        const ocl_buffer *b = out->buffer;
        const uint64_t span = sy_tensor_nbytes(out);
        cl_int err = span ? clEnqueueWriteBuffer(d->queue, b->mem, CL_TRUE, (size_t)out->offset,
                                                 (size_t)span, hn->temp[SY_MAX_INPUTS], 0, NULL,
                                                 NULL)
                          : CL_SUCCESS;
        if (err != CL_SUCCESS)
            st = SY_E_DEVICE;
    }
    for (uint32_t i = 0; i <= SY_MAX_INPUTS; i++)
        if (hn->temp[i])
            s->host->free(s->host->ctx, hn->temp[i]);
    s->host->free(s->host->ctx, hn);
    return st;
}

/* ------------------------------------------------------------- execution */

static const char *ocl_status_name(sy_status st)
{
    switch (st) {
#define OCL_STATUS_NAME_(name, value, msg) \
    case name:                             \
        return #name;
        SY_STATUS_TABLE(OCL_STATUS_NAME_)
#undef OCL_STATUS_NAME_
    }
    return "SY_E_UNKNOWN";
}

sy_status ocl_device_execute(void *state, uint32_t dev, sy_node *const *nodes, uint32_t n)
{
    ocl_state *s = state;
    if (!s || dev >= s->n_devs || (!nodes && n))
        return SY_E_INVALID_ARG;
    ocl_dev *d = &s->devs[dev];
    for (uint32_t i = 0; i < n; i++) {
        const sy_node *node = nodes[i];
        if (!node || node->op >= SY_OP_COUNT || !node->output ||
            node->n_inputs > SY_MAX_INPUTS)
            return SY_E_INVALID_ARG;
        if (sy_op_is_view(node->op))
            continue;
        const char *why = "";
        sy_status st = ocl_launch_node(s, d, node, &why);
        if (st == SY_E_UNSUPPORTED) {
            const ocl_family f = ocl_node_family(node);
            const bool build_failed = f < OCL_FAM_COUNT && d->progs[f].state == OCL_PROG_FAILED;
            const char *detail = build_failed ? d->progs[f].log : "";
            if (strcmp(why, OCL_WHY_LAUNCH_REFUSED) == 0 && !d->op_failed[node->op][0])
                snprintf(d->op_failed[node->op], sizeof d->op_failed[node->op],
                         "%s failed at run time on this device: %s", ocl_op_name(s, node->op),
                         why);
            ocl_log(s, SY_LOG_WARN, "%s: node '%s' (%s) runs on the host: %s%s%.200s",
                    d->desc.name, node->name, ocl_op_name(s, node->op), why,
                    detail[0] ? ": " : "", detail);
            st = ocl_run_on_host(s, d, node);
        }
        const ocl_buffer *ob = node->output->buffer;
        if (st == SY_OK && ob && ob->imported)
            st = ocl_note_written(s, d, node->output->buffer);
        if (st != SY_OK) {
            ocl_log(s, SY_LOG_ERROR, "%s: node '%s' (%s) failed: %s%s%s", d->desc.name,
                    node->name, ocl_op_name(s, node->op), ocl_status_name(st),
                    why[0] ? ": " : "", why);
            return st;
        }
    }
    /* Start the work now; synchronize() waits for it. */
    cl_int err = clFlush(d->queue);
    if (err != CL_SUCCESS) {
        ocl_log(s, SY_LOG_ERROR, "%s: clFlush failed: %s", d->desc.name, ocl_error_name(err));
        return SY_E_DEVICE;
    }
    return SY_OK;
}

sy_status ocl_device_synchronize(void *state, uint32_t dev)
{
    ocl_state *s = state;
    if (!s || dev >= s->n_devs)
        return SY_E_INVALID_ARG;
    ocl_dev *d = &s->devs[dev];
    cl_int err = clFinish(d->queue);
    sy_status st = SY_OK;
    if (err != CL_SUCCESS) {
        ocl_log(s, SY_LOG_ERROR, "%s: clFinish failed: %s", d->desc.name, ocl_error_name(err));
        st = SY_E_DEVICE;
    }
    /* Mapping an imported buffer is what makes the host copy current where
     * the driver keeps a device copy of it (a no-op on zero-copy devices). */
    for (uint32_t i = 0; i < d->n_pending; i++) {
        ocl_buffer *b = d->pending[i];
        b->pending_sync = false;
        cl_int merr = CL_SUCCESS;
        void *p = clEnqueueMapBuffer(d->queue, b->mem, CL_TRUE, CL_MAP_READ, 0, (size_t)b->size, 0,
                                     NULL, NULL, &merr);
        if (!p || merr != CL_SUCCESS) {
            ocl_log(s, SY_LOG_ERROR, "%s: mapping a written host buffer failed: %s", d->desc.name,
                    ocl_error_name(merr));
            st = SY_E_DEVICE;
            continue;
        }
        clEnqueueUnmapMemObject(d->queue, b->mem, p, 0, NULL, NULL);
    }
    d->n_pending = 0;
    if (clFinish(d->queue) != CL_SUCCESS)
        st = SY_E_DEVICE;
    if (d->profile)
        ocl_profile_collect(d);
    if (d->flag_armed) {
        d->flag_armed = false;
        cl_int flag = 0;
        err = clEnqueueReadBuffer(d->queue, d->flag, CL_TRUE, 0, sizeof flag, &flag, 0, NULL, NULL);
        if (err != CL_SUCCESS)
            return SY_E_DEVICE;
        if (flag) {
            const cl_int zero = 0;
            clEnqueueWriteBuffer(d->queue, d->flag, CL_TRUE, 0, sizeof zero, &zero, 0, NULL, NULL);
            ocl_log(s, SY_LOG_ERROR, "%s: %s", d->desc.name,
                    flag == OCL_FLAG_KV_START ? "kv_write: the run-time start puts the rows "
                                                "outside the cache"
                    : flag == OCL_FLAG_N_PAST ? "attention: the run-time n_past puts the "
                                                "queries outside the cache"
                                              : "get_rows: a row id was out of range of the table");
            if (st == SY_OK)
                st = SY_E_INVALID_ARG;
        }
    }
    return st;
}

/* ----------------------------------------------------------------- events */

/* A marker after the work queued so far.  |sync| when kernels had written
 * imported host memory by then: the wait maps it (synchronize()) so the
 * host copy is current where the driver keeps a device copy. */
typedef struct ocl_event {
    cl_event ev;
    bool sync;
} ocl_event;

sy_status ocl_device_event_record(void *state, uint32_t dev, void **out_event)
{
    ocl_state *s = state;
    if (!out_event)
        return SY_E_INVALID_ARG;
    *out_event = NULL;
    if (!s || dev >= s->n_devs)
        return SY_E_INVALID_ARG;
    ocl_dev *d = &s->devs[dev];
    ocl_event *e = s->host->alloc(s->host->ctx, sizeof *e, 16);
    if (!e)
        return SY_E_NO_MEMORY;
    cl_int err = clEnqueueMarkerWithWaitList(d->queue, 0, NULL, &e->ev);
    if (err == CL_SUCCESS)
        err = clFlush(d->queue);
    if (err != CL_SUCCESS) {
        ocl_log(s, SY_LOG_ERROR, "%s: recording an event failed: %s", d->desc.name,
                ocl_error_name(err));
        s->host->free(s->host->ctx, e);
        return SY_E_DEVICE;
    }
    e->sync = d->n_pending > 0;
    *out_event = e;
    return SY_OK;
}

sy_status ocl_device_event_wait(void *state, uint32_t dev, void *event)
{
    ocl_state *s = state;
    ocl_event *e = event;
    if (!s || dev >= s->n_devs || !e)
        return SY_E_INVALID_ARG;
    ocl_dev *d = &s->devs[dev];
    cl_int err = clWaitForEvents(1, &e->ev);
    if (err != CL_SUCCESS) {
        ocl_log(s, SY_LOG_ERROR, "%s: waiting for an event failed: %s", d->desc.name,
                ocl_error_name(err));
        return SY_E_DEVICE;
    }
    if (e->sync && d->n_pending > 0)
        return ocl_device_synchronize(state, dev);
    return SY_OK;
}

void ocl_device_event_release(void *state, uint32_t dev, void *event)
{
    ocl_state *s = state;
    ocl_event *e = event;
    (void)dev;
    if (!s || !e)
        return;
    clReleaseEvent(e->ev);
    s->host->free(s->host->ctx, e);
}
