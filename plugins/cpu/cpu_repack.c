/* Weight repacking (layout: cpu_repack.h): a weight whose dtype the ISA table has packed kernels
 * for (qdot_rows_packed and qgemm_packed: the avx512 table's Q4_0 and
 * Q4_1) is copied once, at its first matmul, into a layout those kernels
 * read with plain vector loads, and every matmul on it reads the copy.
 *
 * The layout keeps each row's bytes and stride; within a row every group
 * of four blocks puts the four blocks' scale headers first (Q4_0: d, 2
 * bytes each; Q4_1: d, m, 4 bytes each) and then their 4 x 16 quant bytes,
 * the blocks after the last whole group staying as they were.  A decode
 * step then takes a group's quants in one 64-byte load and its scales in
 * one 8- or 16-byte load, where the file's layout needs two word permutes
 * (cpu_kernels_qdot_avx512.c).
 *
 * Only weights wrapped from host memory (buffer_import_host: the mmap'd
 * GGUF) whose buffer is exactly the tensor are packed; the copy hangs off
 * the buffer, so it lives and dies with it, and a write into the buffer
 * (copy_in, copy_device) drops it.  The copy is anonymous memory (huge
 * pages where the kernel gives them), counted in memory_usage; the file's
 * pages of a packed weight are no longer read by matmuls. */
#include <string.h>
#include <sys/mman.h>

#include "cpu_internal.h"
#include "cpu_kernels.h"
#include "cpu_repack.h"
#include "cpu_threadpool.h"

typedef struct cpu_repack_ctx {
    const uint8_t *src;
    uint8_t *dst;
    int64_t rows, nb;
    size_t row_bytes, block_bytes;
} cpu_repack_ctx;

static void cpu_repack_task(void *arg, uint32_t ith, uint32_t nth, uint32_t lane)
{
    (void)lane;
    const cpu_repack_ctx *c = arg;
    int64_t r0, r1;
    cpu_split(c->rows, ith, nth, &r0, &r1);
    cpu_repack_rows(c->src + (size_t)r0 * c->row_bytes, c->dst + (size_t)r0 * c->row_bytes, r1 - r0,
                    c->row_bytes, c->nb, c->block_bytes);
}

void cpu_buffer_drop_packed(cpu_state *s, cpu_buffer *b)
{
    if (!b->packed)
        return;
    munmap(b->packed, (size_t)b->size);
    b->packed = NULL;
    s->mem_in_use -= b->size;
}

/* True when |w| is a whole, dense weight in a borrowed buffer of its own. */
static bool cpu_repack_candidate(const sy_tensor *w, const cpu_buffer *b)
{
    const uint64_t row = sy_tensor_row_size(w);
    return w->role == SY_ROLE_WEIGHT && !w->view_src && b && !b->owned && b->ptr == w->data &&
           w->offset == 0 && w->nb[1] == row && w->nb[2] == row * (uint64_t)w->ne[1] &&
           w->nb[3] == w->nb[2] * (uint64_t)w->ne[2] && b->size == w->nb[3] * (uint64_t)w->ne[3];
}

const uint8_t *cpu_weight_packed(cpu_state *s, const sy_tensor *w)
{
    cpu_buffer *b = w->buffer;
    if (!s->repack || s->act_planes == 0 || w->dtype >= SY_DTYPE_COUNT ||
        !s->isa->qdot_rows_packed[w->dtype] || !s->isa->qgemm_packed[w->dtype] ||
        !cpu_repack_candidate(w, b))
        return NULL;
    if (b->packed && b->packed_dtype == w->dtype)
        return b->packed;
    if (b->pack_failed || b->packed)
        return NULL;
    void *p = mmap(NULL, (size_t)b->size, PROT_READ | PROT_WRITE, MAP_PRIVATE | MAP_ANONYMOUS, -1, 0);
    if (p == MAP_FAILED) {
        b->pack_failed = true;
        cpu_log(s, SY_LOG_WARN, "no memory to repack weight '%s' (%llu bytes); it is read as stored",
                w->name, (unsigned long long)b->size);
        return NULL;
    }
#ifdef MADV_HUGEPAGE
    madvise(p, (size_t)b->size, MADV_HUGEPAGE);
#endif
    cpu_repack_ctx c = {.src = b->ptr, .dst = p, .rows = w->ne[1] * w->ne[2] * w->ne[3],
                        .nb = w->ne[0] / (int64_t)sy_dtype_block_size(w->dtype),
                        .row_bytes = (size_t)w->nb[1], .block_bytes = sy_dtype_type_size(w->dtype)};
    const uint32_t nth = c.rows < (int64_t)s->n_threads ? (uint32_t)c.rows : s->n_threads;
    cpu_pool_run(s->pool, cpu_repack_task, &c, nth ? nth : 1);
    b->packed = p;
    b->packed_dtype = w->dtype;
    s->mem_in_use += b->size;
    if (s->mem_in_use > s->mem_peak)
        s->mem_peak = s->mem_in_use;
    cpu_log(s, SY_LOG_DEBUG, "repacked weight '%s' (%s, %llu bytes) for the %s kernels", w->name,
            sy_dtype_name(w->dtype), (unsigned long long)b->size, s->isa->name);
    return p;
}
