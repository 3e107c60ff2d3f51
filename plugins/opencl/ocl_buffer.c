/* Buffers of the OpenCL devices: cl_mem objects.
 *
 * On a device that shares memory with the host (CL_DEVICE_HOST_UNIFIED_MEMORY)
 * a buffer is allocated with CL_MEM_ALLOC_HOST_PTR and mapped once, for its
 * whole life, so buffer_host_ptr() can hand the runtime its host address
 * (zero copy); host memory the caller keeps alive (mmap'd weights, KV caches)
 * is wrapped with CL_MEM_USE_HOST_PTR.  On a discrete device buffers are
 * device memory, never mapped, and every transfer is an explicit copy.
 *
 * Ordering: the queue is in order, so a blocking read or write waits for
 * every kernel queued before it; host access through a mapping is preceded
 * by clFinish for the same reason. */
#include <string.h>

#include "ocl_internal.h"

/* Smallest host alignment we wrap: enough for every load the kernels do. */
#define OCL_IMPORT_ALIGN 16

static ocl_dev *ocl_dev_at(ocl_state *s, uint32_t dev)
{
    return s && dev < s->n_devs ? &s->devs[dev] : NULL;
}

static void ocl_mem_add(ocl_dev *d, uint64_t bytes)
{
    d->mem_in_use += bytes;
    if (d->mem_in_use > d->mem_peak)
        d->mem_peak = d->mem_in_use;
}

static bool ocl_covers(const ocl_buffer *b, uint64_t offset, uint64_t size)
{
    return b && offset <= b->size && size <= b->size - offset;
}

sy_status ocl_buffer_alloc(void *state, uint32_t dev, uint64_t size, void **out_buffer)
{
    ocl_state *s = state;
    if (!out_buffer)
        return SY_E_INVALID_ARG;
    *out_buffer = NULL;
    ocl_dev *d = ocl_dev_at(s, dev);
    if (!d)
        return SY_E_INVALID_ARG;
    if (d->max_alloc && size > d->max_alloc) {
        ocl_log(s, SY_LOG_ERROR, "%s: a buffer of %llu bytes exceeds the device's largest "
                "allocation (%llu bytes)", d->desc.name, (unsigned long long)size,
                (unsigned long long)d->max_alloc);
        return SY_E_NO_MEMORY;
    }
    ocl_buffer *b = s->host->alloc(s->host->ctx, sizeof *b, 16);
    if (!b)
        return SY_E_NO_MEMORY;
    memset(b, 0, sizeof *b);
    b->size = size;
    b->dev = dev;
    /* OpenCL has no empty buffers; a zero-byte one still gets storage. */
    const size_t bytes = size ? (size_t)size : 16;
    cl_int err = CL_SUCCESS;
    const cl_mem_flags flags = CL_MEM_READ_WRITE | (d->unified ? CL_MEM_ALLOC_HOST_PTR : 0);
    b->mem = clCreateBuffer(d->ctx, flags, bytes, NULL, &err);
    if (!b->mem || err != CL_SUCCESS) {
        ocl_log(s, SY_LOG_ERROR, "%s: clCreateBuffer(%zu bytes) failed: %s", d->desc.name, bytes,
                ocl_error_name(err));
        s->host->free(s->host->ctx, b);
        return SY_E_NO_MEMORY;
    }
    if (d->unified) {
        b->host = clEnqueueMapBuffer(d->queue, b->mem, CL_TRUE, CL_MAP_READ | CL_MAP_WRITE, 0,
                                     bytes, 0, NULL, NULL, &err);
        if (!b->host || err != CL_SUCCESS) {
            /* Still a valid buffer: the runtime copies instead. */
            ocl_log(s, SY_LOG_DEBUG, "%s: mapping a buffer failed (%s); it stays unmapped",
                    d->desc.name, ocl_error_name(err));
            b->host = NULL;
        } else {
            b->mapped = true;
        }
    }
    b->counted = bytes;
    ocl_mem_add(d, bytes);
    *out_buffer = b;
    return SY_OK;
}

sy_status ocl_buffer_import_host(void *state, uint32_t dev, void *ptr, uint64_t size,
                                 void **out_buffer)
{
    ocl_state *s = state;
    if (!out_buffer)
        return SY_E_INVALID_ARG;
    *out_buffer = NULL;
    ocl_dev *d = ocl_dev_at(s, dev);
    if (!d || (!ptr && size))
        return SY_E_INVALID_ARG;
    /* Wrapping host memory is zero copy only where the device reads host
     * memory; elsewhere the runtime's copy is as good and honest. */
    if (!d->unified || size == 0 || ((uintptr_t)ptr % OCL_IMPORT_ALIGN) != 0)
        return SY_E_UNSUPPORTED;
    if (d->max_alloc && size > d->max_alloc)
        return SY_E_UNSUPPORTED;
    ocl_buffer *b = s->host->alloc(s->host->ctx, sizeof *b, 16);
    if (!b)
        return SY_E_NO_MEMORY;
    memset(b, 0, sizeof *b);
    cl_int err = CL_SUCCESS;
    b->mem = clCreateBuffer(d->ctx, CL_MEM_READ_WRITE | CL_MEM_USE_HOST_PTR, (size_t)size, ptr,
                            &err);
    if (!b->mem || err != CL_SUCCESS) {
        ocl_log(s, SY_LOG_DEBUG, "%s: wrapping %llu bytes of host memory failed: %s",
                d->desc.name, (unsigned long long)size, ocl_error_name(err));
        s->host->free(s->host->ctx, b);
        return SY_E_UNSUPPORTED;
    }
    b->size = size;
    b->dev = dev;
    b->host = ptr;
    b->imported = true;
    *out_buffer = b;
    return SY_OK;
}

void ocl_buffer_free(void *state, uint32_t dev, void *buffer)
{
    ocl_state *s = state;
    ocl_buffer *b = buffer;
    ocl_dev *d = ocl_dev_at(s, dev);
    if (!b || !d)
        return;
    for (uint32_t i = 0; i < d->n_pending; i++) {
        if (d->pending[i] == b) {
            d->pending[i] = d->pending[--d->n_pending];
            break;
        }
    }
    if (b->mapped)
        clEnqueueUnmapMemObject(d->queue, b->mem, b->host, 0, NULL, NULL);
    /* Released once every queued command that uses it has completed. */
    clReleaseMemObject(b->mem);
    d->mem_in_use -= b->counted;
    s->host->free(s->host->ctx, b);
}

sy_status ocl_buffer_memory_usage(void *state, uint32_t dev, bool reset_peak,
                                  uint64_t *out_in_use, uint64_t *out_peak)
{
    ocl_dev *d = ocl_dev_at(state, dev);
    if (!d)
        return SY_E_INVALID_ARG;
    if (out_in_use)
        *out_in_use = d->mem_in_use;
    if (out_peak)
        *out_peak = d->mem_peak;
    if (reset_peak)
        d->mem_peak = d->mem_in_use;
    return SY_OK;
}

void *ocl_buffer_host_ptr(void *state, uint32_t dev, void *buffer)
{
    const ocl_buffer *b = buffer;
    return b ? b->host : NULL;
}

sy_status ocl_buffer_copy_in(void *state, uint32_t dev, void *buffer, uint64_t offset,
                             const void *src, uint64_t size)
{
    ocl_state *s = state;
    ocl_buffer *b = buffer;
    ocl_dev *d = ocl_dev_at(s, dev);
    if (!d || !ocl_covers(b, offset, size) || (!src && size))
        return SY_E_INVALID_ARG;
    if (size == 0)
        return SY_OK;
    cl_int err;
    if (b->mapped) {
        err = clFinish(d->queue);
        if (err == CL_SUCCESS)
            memcpy((char *)b->host + offset, src, (size_t)size);
    } else {
        err = clEnqueueWriteBuffer(d->queue, b->mem, CL_TRUE, (size_t)offset, (size_t)size, src, 0,
                                   NULL, NULL);
    }
    if (err != CL_SUCCESS) {
        ocl_log(s, SY_LOG_ERROR, "%s: copy_in of %llu bytes failed: %s", d->desc.name,
                (unsigned long long)size, ocl_error_name(err));
        return SY_E_DEVICE;
    }
    return SY_OK;
}

sy_status ocl_buffer_copy_out(void *state, uint32_t dev, void *buffer, uint64_t offset, void *dst,
                              uint64_t size)
{
    ocl_state *s = state;
    ocl_buffer *b = buffer;
    ocl_dev *d = ocl_dev_at(s, dev);
    if (!d || !ocl_covers(b, offset, size) || (!dst && size))
        return SY_E_INVALID_ARG;
    if (size == 0)
        return SY_OK;
    cl_int err;
    if (b->mapped) {
        err = clFinish(d->queue);
        if (err == CL_SUCCESS)
            memcpy(dst, (const char *)b->host + offset, (size_t)size);
    } else {
        err = clEnqueueReadBuffer(d->queue, b->mem, CL_TRUE, (size_t)offset, (size_t)size, dst, 0,
                                  NULL, NULL);
    }
    if (err != CL_SUCCESS) {
        ocl_log(s, SY_LOG_ERROR, "%s: copy_out of %llu bytes failed: %s", d->desc.name,
                (unsigned long long)size, ocl_error_name(err));
        return SY_E_DEVICE;
    }
    return SY_OK;
}

sy_status ocl_scratch_reserve(ocl_state *s, ocl_dev *d, uint64_t bytes)
{
    if (d->scratch_size >= bytes)
        return SY_OK;
    uint64_t want = d->scratch_size * 2 > bytes ? d->scratch_size * 2 : bytes;
    if (d->max_alloc && want > d->max_alloc)
        want = bytes;
    cl_int err = CL_SUCCESS;
    cl_mem m = clCreateBuffer(d->ctx, CL_MEM_READ_WRITE, (size_t)want, NULL, &err);
    if (!m || err != CL_SUCCESS) {
        ocl_log(s, SY_LOG_ERROR, "%s: scratch buffer of %llu bytes failed: %s", d->desc.name,
                (unsigned long long)want, ocl_error_name(err));
        return SY_E_NO_MEMORY;
    }
    /* Commands already queued keep the old one alive until they finish. */
    if (d->scratch)
        clReleaseMemObject(d->scratch);
    d->mem_in_use -= d->scratch_size;
    ocl_mem_add(d, want);
    d->scratch = m;
    d->scratch_size = want;
    return SY_OK;
}

/* Copies through host memory (buffers of distinct devices, or an
 * overlapping copy inside one buffer). */
static sy_status ocl_copy_via_host(ocl_state *s, uint32_t dst_dev, ocl_buffer *dst,
                                   uint64_t dst_offset, uint32_t src_dev, ocl_buffer *src,
                                   uint64_t src_offset, uint64_t size)
{
    void *tmp = s->host->alloc(s->host->ctx, (size_t)size, 64);
    if (!tmp)
        return SY_E_NO_MEMORY;
    sy_status st = ocl_buffer_copy_out(s, src_dev, src, src_offset, tmp, size);
    if (st == SY_OK)
        st = ocl_buffer_copy_in(s, dst_dev, dst, dst_offset, tmp, size);
    s->host->free(s->host->ctx, tmp);
    return st;
}

sy_status ocl_buffer_copy_device(void *state, uint32_t dst_dev, void *dst, uint64_t dst_offset,
                                 uint32_t src_dev, void *src, uint64_t src_offset, uint64_t size)
{
    ocl_state *s = state;
    ocl_buffer *db = dst, *sb = src;
    ocl_dev *dd = ocl_dev_at(s, dst_dev), *sd = ocl_dev_at(s, src_dev);
    if (!dd || !sd || !ocl_covers(db, dst_offset, size) || !ocl_covers(sb, src_offset, size))
        return SY_E_INVALID_ARG;
    if (size == 0)
        return SY_OK;
    if (dst_dev != src_dev)
        return ocl_copy_via_host(s, dst_dev, db, dst_offset, src_dev, sb, src_offset, size);
    cl_int err;
    if (db->mapped && sb->mapped) {
        err = clFinish(dd->queue);
        if (err == CL_SUCCESS)
            memmove((char *)db->host + dst_offset, (const char *)sb->host + src_offset,
                    (size_t)size);
    } else if (db == sb && dst_offset < src_offset + size && src_offset < dst_offset + size) {
        /* clEnqueueCopyBuffer refuses overlapping ranges. */
        return ocl_copy_via_host(s, dst_dev, db, dst_offset, src_dev, sb, src_offset, size);
    } else {
        err = clEnqueueCopyBuffer(dd->queue, sb->mem, db->mem, (size_t)src_offset,
                                  (size_t)dst_offset, (size_t)size, 0, NULL, NULL);
    }
    if (err != CL_SUCCESS) {
        ocl_log(s, SY_LOG_ERROR, "%s: copy_device of %llu bytes failed: %s", dd->desc.name,
                (unsigned long long)size, ocl_error_name(err));
        return SY_E_DEVICE;
    }
    return SY_OK;
}
