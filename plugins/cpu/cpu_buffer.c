/* Buffers of the CPU device: plain host memory, so every copy is memcpy and
 * every buffer is mapped for its whole life. */
#include <string.h>

#include "cpu_internal.h"

sy_status cpu_buffer_alloc(void *state, uint32_t dev, uint64_t size, void **out_buffer)
{
    cpu_state *s = state;
    *out_buffer = NULL;
    if (dev != 0)
        return SY_E_INVALID_ARG;
    if (size > SIZE_MAX - CPU_ALIGN)
        return SY_E_NO_MEMORY;
    cpu_buffer *b = s->host->alloc(s->host->ctx, sizeof *b, 16);
    if (!b)
        return SY_E_NO_MEMORY;
    /* A zero-byte buffer still gets a distinct, valid pointer. */
    *b = (cpu_buffer){.ptr = s->host->alloc(s->host->ctx, size ? (size_t)size : 1, CPU_ALIGN),
                      .size = size, .owned = true};
    if (!b->ptr) {
        s->host->free(s->host->ctx, b);
        return SY_E_NO_MEMORY;
    }
    s->mem_in_use += size;
    if (s->mem_in_use > s->mem_peak)
        s->mem_peak = s->mem_in_use;
    *out_buffer = b;
    return SY_OK;
}

sy_status cpu_buffer_import_host(void *state, uint32_t dev, void *ptr, uint64_t size,
                                 void **out_buffer)
{
    cpu_state *s = state;
    *out_buffer = NULL;
    if (dev != 0 || (!ptr && size))
        return SY_E_INVALID_ARG;
    cpu_buffer *b = s->host->alloc(s->host->ctx, sizeof *b, 16);
    if (!b)
        return SY_E_NO_MEMORY;
    *b = (cpu_buffer){.ptr = ptr, .size = size};
    *out_buffer = b;
    return SY_OK;
}

void cpu_buffer_free(void *state, uint32_t dev, void *buffer)
{
    cpu_state *s = state;
    cpu_buffer *b = buffer;
    if (!b)
        return;
    if (b->owned) {
        s->host->free(s->host->ctx, b->ptr);
        s->mem_in_use -= b->size;
    }
    cpu_buffer_drop_packed(s, b);
    s->host->free(s->host->ctx, b);
}

/* Buffers from buffer_alloc only: imported ones are the caller's memory,
 * and the lanes' scratch is the process's, as the host's RSS shows. */
sy_status cpu_buffer_memory_usage(void *state, uint32_t dev, bool reset_peak,
                                  uint64_t *out_in_use, uint64_t *out_peak)
{
    cpu_state *s = state;
    if (dev != 0)
        return SY_E_INVALID_ARG;
    if (out_in_use)
        *out_in_use = s->mem_in_use;
    if (out_peak)
        *out_peak = s->mem_peak;
    if (reset_peak)
        s->mem_peak = s->mem_in_use;
    return SY_OK;
}

void *cpu_buffer_host_ptr(void *state, uint32_t dev, void *buffer)
{
    cpu_buffer *b = buffer;
    return b ? b->ptr : NULL;
}

/* True when [offset, offset + size) lies inside |b|. */
static bool cpu_buffer_covers(const cpu_buffer *b, uint64_t offset, uint64_t size)
{
    return b && offset <= b->size && size <= b->size - offset;
}

/* Bytes of |b| were written: a packed copy of them is stale (counted for
 * the kept program, cpu_program.c). */
static void cpu_buffer_written(cpu_state *s, cpu_buffer *b)
{
    if (!b->packed)
        return;
    s->packs_rewritten++;
    cpu_buffer_drop_packed(s, b);
}

sy_status cpu_buffer_copy_in(void *state, uint32_t dev, void *buffer, uint64_t offset,
                             const void *src, uint64_t size)
{
    cpu_buffer *b = buffer;
    if (dev != 0 || !cpu_buffer_covers(b, offset, size) || (!src && size))
        return SY_E_INVALID_ARG;
    if (size) {
        memcpy((char *)b->ptr + offset, src, (size_t)size);
        cpu_buffer_written(state, b);
    }
    return SY_OK;
}

sy_status cpu_buffer_copy_out(void *state, uint32_t dev, void *buffer, uint64_t offset, void *dst,
                              uint64_t size)
{
    cpu_buffer *b = buffer;
    if (dev != 0 || !cpu_buffer_covers(b, offset, size) || (!dst && size))
        return SY_E_INVALID_ARG;
    if (size)
        memcpy(dst, (const char *)b->ptr + offset, (size_t)size);
    return SY_OK;
}

sy_status cpu_buffer_copy_device(void *state, uint32_t dst_dev, void *dst, uint64_t dst_offset,
                                 uint32_t src_dev, void *src, uint64_t src_offset, uint64_t size)
{
    cpu_buffer *d = dst, *sb = src;
    if (dst_dev != 0 || src_dev != 0 || !cpu_buffer_covers(d, dst_offset, size) ||
        !cpu_buffer_covers(sb, src_offset, size))
        return SY_E_INVALID_ARG;
    /* memmove: the runtime may copy between overlapping ranges of one buffer. */
    if (size) {
        memmove((char *)d->ptr + dst_offset, (const char *)sb->ptr + src_offset, (size_t)size);
        cpu_buffer_written(state, d);
    }
    return SY_OK;
}
