/* The NPU's own memory: one arena of caps.memory_bytes, reserved from the
 * host on the first allocation and carved into buffers first-fit, with
 * neighbouring free blocks merged on free.  Buffers are not mappable
 * (buffer_host_ptr returns NULL) and host memory cannot be imported, so the
 * core moves every byte through copy_in / copy_out, as it must for a real
 * NPU behind a DMA engine.  Running out of arena is SY_E_NO_MEMORY with the
 * sizes logged, never a crash. */
#include <string.h>

#include "npusim_internal.h"

static uint64_t npu_round_up(uint64_t v, uint64_t align)
{
    return (v + align - 1) / align * align;
}

static npu_block *npu_block_new(npu_state *s, uint64_t offset, uint64_t size)
{
    npu_block *b = s->host->alloc(s->host->ctx, sizeof *b, 16);
    if (!b)
        return NULL;
    memset(b, 0, sizeof *b);
    b->offset = offset;
    b->size = size;
    return b;
}

/* Reserves the arena's host memory and its single free block. */
static sy_status npu_arena_reserve(npu_state *s)
{
    npu_arena *a = &s->arena;
    if (a->base)
        return SY_OK;
    const uint64_t size = s->caps.memory_bytes;
    if (size > (uint64_t)SIZE_MAX)
        return SY_E_NO_MEMORY;
    npu_block *whole = npu_block_new(s, 0, size);
    if (!whole)
        return SY_E_NO_MEMORY;
    /* The host's allocator hands out large blocks as untouched pages, so an
     * idle 1 GiB arena costs address space, not memory. */
    a->base = s->host->alloc(s->host->ctx, (size_t)size, 4096);
    if (!a->base) {
        s->host->free(s->host->ctx, whole);
        char sz[32];
        npu_format_size(size, sz, sizeof sz);
        npu_log(s, SY_LOG_ERROR, "cannot reserve the %s arena from host memory", sz);
        return SY_E_NO_MEMORY;
    }
    a->size = size;
    a->head = whole;
    return SY_OK;
}

void npu_arena_release(npu_state *s)
{
    npu_arena *a = &s->arena;
    if (a->live)
        npu_log(s, SY_LOG_WARN, "%u buffer(s) still allocated at deinit; freeing them",
                a->live);
    for (npu_block *b = a->head; b;) {
        npu_block *next = b->next;
        b->magic = 0;
        s->host->free(s->host->ctx, b);
        b = next;
    }
    if (a->base)
        s->host->free(s->host->ctx, a->base);
    memset(a, 0, sizeof *a);
}

sy_status npu_buffer_alloc(void *state, uint32_t dev, uint64_t size, void **out_buffer)
{
    npu_state *s = state;
    if (!out_buffer)
        return SY_E_INVALID_ARG;
    *out_buffer = NULL;
    if (dev != 0)
        return SY_E_INVALID_ARG;
    npu_arena *a = &s->arena;
    /* A zero-byte buffer still takes one granule, so that every handle is
     * a distinct block. */
    const uint64_t want = size == 0 ? NPU_ARENA_ALIGN : npu_round_up(size, NPU_ARENA_ALIGN);
    if (size > s->caps.memory_bytes || want > s->caps.memory_bytes) {
        char a_sz[32], m_sz[32];
        npu_format_size(size, a_sz, sizeof a_sz);
        npu_format_size(s->caps.memory_bytes, m_sz, sizeof m_sz);
        npu_log(s, SY_LOG_DEBUG, "buffer of %s refused: the arena holds %s", a_sz, m_sz);
        return SY_E_NO_MEMORY;
    }
    sy_status st = npu_arena_reserve(s);
    if (st != SY_OK)
        return st;

    npu_block *fit = NULL;
    for (npu_block *b = a->head; b && !fit; b = b->next)
        if (!b->used && b->size >= want)
            fit = b;
    if (!fit) {
        char w_sz[32], f_sz[32], m_sz[32];
        npu_format_size(want, w_sz, sizeof w_sz);
        npu_format_size(a->size - a->used, f_sz, sizeof f_sz);
        npu_format_size(a->size, m_sz, sizeof m_sz);
        npu_log(s, SY_LOG_DEBUG,
                "arena exhausted: buffer of %s does not fit (%s free of %s in %u buffers, "
                "fragmented)",
                w_sz, f_sz, m_sz, a->live);
        return SY_E_NO_MEMORY;
    }
    if (fit->size > want) {
        /* Split: the tail stays free. */
        npu_block *rest = npu_block_new(s, fit->offset + want, fit->size - want);
        if (!rest)
            return SY_E_NO_MEMORY;
        rest->prev = fit;
        rest->next = fit->next;
        if (fit->next)
            fit->next->prev = rest;
        fit->next = rest;
        fit->size = want;
    }
    fit->used = true;
    fit->magic = NPU_BLOCK_MAGIC;
    fit->req_size = size;
    a->used += fit->size;
    if (a->used > a->peak)
        a->peak = a->used;
    a->live++;
    *out_buffer = fit;
    return SY_OK;
}

/* Arena bytes in buffers (granule-rounded), now and at most; the arena's
 * reservation itself is address space until buffers touch it. */
sy_status npu_buffer_memory_usage(void *state, uint32_t dev, bool reset_peak,
                                  uint64_t *out_in_use, uint64_t *out_peak)
{
    npu_state *s = state;
    if (dev != 0)
        return SY_E_INVALID_ARG;
    if (out_in_use)
        *out_in_use = s->arena.used;
    if (out_peak)
        *out_peak = s->arena.peak;
    if (reset_peak)
        s->arena.peak = s->arena.used;
    return SY_OK;
}

/* Returns |buffer| as a live block of |s|'s arena, or NULL. */
static npu_block *npu_live_block(const npu_state *s, const void *buffer)
{
    npu_block *b = (npu_block *)buffer;
    if (!b || !s->arena.base || b->magic != NPU_BLOCK_MAGIC || !b->used)
        return NULL;
    return b;
}

/* Merges free block |b| into its free successor, if any. */
static void npu_merge_next(npu_state *s, npu_block *b)
{
    npu_block *n = b->next;
    if (!n || n->used)
        return;
    b->size += n->size;
    b->next = n->next;
    if (n->next)
        n->next->prev = b;
    n->magic = 0;
    s->host->free(s->host->ctx, n);
}

void npu_buffer_free(void *state, uint32_t dev, void *buffer)
{
    npu_state *s = state;
    if (!buffer)
        return;
    npu_block *b = npu_live_block(s, buffer);
    if (dev != 0 || !b) {
        npu_log(s, SY_LOG_ERROR, "buffer_free of %p: not a live npusim buffer", buffer);
        return;
    }
    b->used = false;
    b->magic = 0;
    b->req_size = 0;
    s->arena.used -= b->size;
    s->arena.live--;
    npu_merge_next(s, b);
    if (b->prev && !b->prev->used)
        npu_merge_next(s, b->prev);
}

void *npu_buffer_host_ptr(void *state, uint32_t dev, void *buffer)
{
    /* The host cannot see NPU memory: every transfer is a copy. */
    return NULL;
}

unsigned char *npu_buffer_address(const npu_state *s, const void *buffer, uint64_t offset,
                                  uint64_t size)
{
    const npu_block *b = npu_live_block(s, buffer);
    if (!b || offset > b->req_size || size > b->req_size - offset)
        return NULL;
    return s->arena.base + b->offset + offset;
}

sy_status npu_buffer_copy_in(void *state, uint32_t dev, void *buffer, uint64_t offset,
                             const void *src, uint64_t size)
{
    npu_state *s = state;
    unsigned char *dst = npu_buffer_address(s, buffer, offset, size);
    if (dev != 0 || !dst || (!src && size)) {
        npu_log(s, SY_LOG_ERROR, "copy_in of %llu bytes at offset %llu: outside the buffer",
                (unsigned long long)size, (unsigned long long)offset);
        return SY_E_INVALID_ARG;
    }
    if (size)
        memcpy(dst, src, (size_t)size);
    return SY_OK;
}

sy_status npu_buffer_copy_out(void *state, uint32_t dev, void *buffer, uint64_t offset,
                              void *dst, uint64_t size)
{
    npu_state *s = state;
    const unsigned char *src = npu_buffer_address(s, buffer, offset, size);
    if (dev != 0 || !src || (!dst && size)) {
        npu_log(s, SY_LOG_ERROR, "copy_out of %llu bytes at offset %llu: outside the buffer",
                (unsigned long long)size, (unsigned long long)offset);
        return SY_E_INVALID_ARG;
    }
    if (size)
        memcpy(dst, src, (size_t)size);
    return SY_OK;
}

sy_status npu_buffer_copy_device(void *state, uint32_t dst_dev, void *dst, uint64_t dst_offset,
                                 uint32_t src_dev, void *src, uint64_t src_offset, uint64_t size)
{
    npu_state *s = state;
    unsigned char *d = npu_buffer_address(s, dst, dst_offset, size);
    const unsigned char *sp = npu_buffer_address(s, src, src_offset, size);
    if (dst_dev != 0 || src_dev != 0 || !d || !sp) {
        npu_log(s, SY_LOG_ERROR, "copy_device of %llu bytes: outside a buffer",
                (unsigned long long)size);
        return SY_E_INVALID_ARG;
    }
    /* memmove: the runtime may copy between overlapping ranges of one buffer. */
    if (size)
        memmove(d, sp, (size_t)size);
    return SY_OK;
}
