/* Weight repacking (layout: cpu_repack.h): a weight whose dtype the ISA table has packed kernels
 * for (qdot_rows_packed and qgemm_packed: the avx512 tables' Q4_0, Q4_1
 * and Q8_0) is copied once, at its first matmul, into a layout those
 * kernels read with plain vector loads, and every matmul on it reads the
 * copy.  Q8_0's copy keeps the file's layout (cpu_pack_keeps_layout): its
 * kernels read it as stored, and what the copy gives is its huge pages.
 * A file's mapping gets them only where the page cache holds the file in
 * large folios (a file read in afresh on ext4 with Linux 6.16+; one just
 * written, e.g. fetched or made by `switchyard synth`, is in 4 KiB pages),
 * and a decode streams every weight once per token: a 4 KiB page costs a
 * TLB walk and stops the hardware prefetchers at its end.  Measured with
 * the synth 1B Q8_0 file (tg64, 1 thread, 3 interleaved runs): 18.0-18.7
 * t/s from a written file on ext4, 19.2-20.7 from a copy on a tmpfs
 * mounted huge=always (the mapping in 2 MiB pages).
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
 * (copy_in, copy_device) drops it.  The copy is anonymous memory, counted
 * in memory_usage, carved from chunks mapped at 2 MiB boundaries so that
 * huge pages back nearly all of it (a mapping per copy, at the address
 * mmap picks, got them for ~60% of the bytes: decode then ran no faster
 * than from the file).  Where the weight lies in a read-only private
 * mapping of a file (the mmap'd GGUF) with no written pages, the pages
 * under the copy are released from that mapping (MADV_DONTNEED: the page
 * cache keeps them, a later read faults them back in) slice by slice as
 * the rows are copied, so the copy replaces the file's pages in the
 * process's memory instead of doubling it, even while it is made.
 *
 * With a pack cache (SWITCHYARD_CPU_PACK_CACHE, cpu_packcache.c) a weight
 * that lies in such a mapping (but a Q8_0 one, whose copy would be the
 * file's bytes again) is packed through a bounce buffer into the cache's
 * file for its model file instead, and the copy is that file's
 * mapped pages; a later process finds it recorded there and packs nothing. */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/mman.h>
#include <sys/sysmacros.h>
#include <unistd.h>

#include "cpu_internal.h"
#include "cpu_kernels.h"
#include "cpu_repack.h"
#include "cpu_threadpool.h"

typedef struct cpu_repack_ctx {
    const uint8_t *src;
    uint8_t *dst;
    int64_t rows, k;
    size_t row_bytes;
    uint32_t dtype;
} cpu_repack_ctx;

static void cpu_repack_task(void *arg, uint32_t ith, uint32_t nth, uint32_t lane)
{
    (void)lane;
    const cpu_repack_ctx *c = arg;
    int64_t r0, r1;
    cpu_split(c->rows, ith, nth, &r0, &r1);
    cpu_pack_rows_as(c->dtype, c->src + (size_t)r0 * c->row_bytes,
                     c->dst + (size_t)r0 * c->row_bytes, r1 - r0, c->row_bytes, c->k);
}

/* Chunks are mapped at a CPU_PACK_HUGE boundary, CPU_PACK_CHUNK bytes
 * (or a larger copy's size in whole huge pages); copies are taken from the
 * newest chunk in order, and a chunk is unmapped when its last copy goes. */
#define CPU_PACK_HUGE ((size_t)2 << 20)
#define CPU_PACK_CHUNK ((size_t)64 << 20)

typedef struct cpu_pack_chunk {
    struct cpu_pack_chunk *next;
    size_t size, used; /* bytes mapped; bytes handed out (this header first) */
    uint32_t live;     /* copies in the chunk */
} cpu_pack_chunk;

/* |bytes| (a multiple of CPU_PACK_HUGE) of anonymous memory at a
 * CPU_PACK_HUGE boundary, or NULL. */
static void *cpu_pack_map(size_t bytes)
{
    uint8_t *m = mmap(NULL, bytes + CPU_PACK_HUGE, PROT_READ | PROT_WRITE, MAP_PRIVATE | MAP_ANONYMOUS,
                      -1, 0);
    if (m == MAP_FAILED)
        return NULL;
    const size_t lead = (CPU_PACK_HUGE - ((uintptr_t)m & (CPU_PACK_HUGE - 1))) & (CPU_PACK_HUGE - 1);
    if (lead)
        munmap(m, lead);
    if (lead < CPU_PACK_HUGE)
        munmap(m + lead + bytes, CPU_PACK_HUGE - lead);
#ifdef MADV_HUGEPAGE
    madvise(m + lead, bytes, MADV_HUGEPAGE);
#endif
    return m + lead;
}

/* Room for a copy of |bytes|, or NULL; |*out_chunk| is the chunk it is in. */
static uint8_t *cpu_pack_alloc(cpu_state *s, size_t bytes, cpu_pack_chunk **out_chunk)
{
    const size_t need = (bytes + CPU_ALIGN - 1) & ~(size_t)(CPU_ALIGN - 1);
    const size_t head = (sizeof(cpu_pack_chunk) + CPU_ALIGN - 1) & ~(size_t)(CPU_ALIGN - 1);
    cpu_pack_chunk *c = s->pack_chunks;
    if (!c || c->size - c->used < need) {
        size_t size = CPU_PACK_CHUNK;
        if (need > size - head)
            size = (need + head + CPU_PACK_HUGE - 1) & ~(CPU_PACK_HUGE - 1);
        c = cpu_pack_map(size);
        if (!c)
            return NULL;
        *c = (cpu_pack_chunk){.next = s->pack_chunks, .size = size, .used = head};
        s->pack_chunks = c;
    }
    uint8_t *p = (uint8_t *)c + c->used;
    c->used += need;
    c->live++;
    *out_chunk = c;
    return p;
}

void cpu_buffer_drop_packed(cpu_state *s, cpu_buffer *b)
{
    if (!b->packed)
        return;
    cpu_pack_chunk *c = b->packed_chunk;
    const uintptr_t addr = (uintptr_t)b->packed;
    b->packed = NULL;
    b->packed_chunk = NULL;
    s->mem_in_use -= b->size;
    if (!c) {
        /* In the pack cache: its whole pages leave this process (the page
         * cache keeps them for the next). */
        const long page = sysconf(_SC_PAGESIZE);
        const uintptr_t mask = page > 0 ? (uintptr_t)page - 1 : 0;
        const uintptr_t lo = (addr + mask) & ~mask, hi = (addr + (uintptr_t)b->size) & ~mask;
        if (page > 0 && hi > lo)
            madvise((void *)lo, hi - lo, MADV_DONTNEED);
        return;
    }
    if (--c->live > 0)
        return;
    for (cpu_pack_chunk **at = &s->pack_chunks; *at; at = &(*at)->next)
        if (*at == c) {
            *at = c->next;
            break;
        }
    munmap(c, c->size);
}

void cpu_repack_free(cpu_state *s)
{
    cpu_pack_cache_free(s);
    while (s->pack_chunks) {
        cpu_pack_chunk *c = s->pack_chunks;
        s->pack_chunks = c->next;
        munmap(c, c->size);
    }
    if (s->file_maps.maps)
        s->host->free(s->host->ctx, s->file_maps.maps);
    memset(&s->file_maps, 0, sizeof s->file_maps);
}

/* Appends |m| to s->file_maps, merged with the last mapping where it
 * continues it in the same file; false without memory. */
static bool cpu_file_maps_add(cpu_state *s, const cpu_file_map *m)
{
    if (s->file_maps.n > 0) {
        cpu_file_map *last = &s->file_maps.maps[s->file_maps.n - 1];
        if (last->hi == m->lo && last->dev == m->dev && last->ino == m->ino &&
            last->off + (last->hi - last->lo) == m->off) {
            last->hi = m->hi;
            return true;
        }
    }
    if (s->file_maps.n == s->file_maps.cap) {
        const size_t cap = s->file_maps.cap ? 2 * s->file_maps.cap : 64;
        cpu_file_map *p = s->host->alloc(s->host->ctx, cap * sizeof *p, sizeof(uint64_t));
        if (!p)
            return false;
        if (s->file_maps.n)
            memcpy(p, s->file_maps.maps, s->file_maps.n * sizeof *p);
        if (s->file_maps.maps)
            s->host->free(s->host->ctx, s->file_maps.maps);
        s->file_maps.maps = p;
        s->file_maps.cap = cap;
    }
    s->file_maps.maps[s->file_maps.n++] = *m;
    return true;
}

/* Reads the mappings of files that are private and not writable, and
 * hold no anonymous (copied-on-write) pages, from /proc/self/smaps
 * (mappings in address order) into s->file_maps: their pages hold what the
 * files hold, so dropping them loses nothing.  A mapping written before it
 * was made read-only holds its writes in anonymous pages and is left out.
 * Once per execute call: a weight release splits the mapping it is in,
 * and reading the file again for every weight cost O(weights^2) (~1% of
 * SmolLM2's first step with /proc/self/maps). */
static bool cpu_file_maps_load(cpu_state *s)
{
    s->file_maps.n = 0;
    FILE *f = fopen("/proc/self/smaps", "r");
    if (!f)
        return false;
    char *line = NULL;
    size_t cap = 0;
    bool ok = true, cand = false, clean = false;
    cpu_file_map cur = {0};
    for (;;) {
        const bool more = getline(&line, &cap, f) > 0;
        unsigned long a, b, off, inode, kb;
        unsigned dev_major, dev_minor;
        char perms[5];
        const bool head = more && sscanf(line, "%lx-%lx %4s %lx %x:%x %lu", &a, &b, perms, &off,
                                         &dev_major, &dev_minor, &inode) == 7;
        if (!more || head) {
            /* The mapping before this one is complete. */
            if (cand && clean)
                ok = cpu_file_maps_add(s, &cur);
            if (!more || !ok)
                break;
            cand = inode != 0 && perms[1] == '-' && perms[3] == 'p';
            clean = false;
            cur = (cpu_file_map){.lo = a, .hi = b, .off = off,
                                 .dev = makedev(dev_major, dev_minor), .ino = inode};
        } else if (cand && sscanf(line, "Anonymous: %lu kB", &kb) == 1) {
            clean = kb == 0;
        } else if (cand && sscanf(line, "Swap: %lu kB", &kb) == 1 && kb != 0) {
            clean = false;
        }
    }
    free(line);
    fclose(f);
    s->file_maps.valid = ok;
    return ok;
}

const cpu_file_map *cpu_file_map_of(cpu_state *s, uintptr_t lo, uintptr_t hi)
{
    if (!s->file_maps.valid && !cpu_file_maps_load(s))
        return NULL;
    size_t a = 0, b = s->file_maps.n;
    while (a < b) { /* the first mapping that ends after lo */
        const size_t m = a + (b - a) / 2;
        if (s->file_maps.maps[m].hi <= lo)
            a = m + 1;
        else
            b = m;
    }
    const cpu_file_map *m = a < s->file_maps.n ? &s->file_maps.maps[a] : NULL;
    return m && m->lo <= lo && hi <= m->hi ? m : NULL;
}

/* Rows are packed in slices of about this many bytes; after each slice
 * the file pages under the rows copied so far are released: the process
 * holds a weight twice for a slice at most.  (Packed whole and released at
 * the end, the 1B model's 35 MiB output table raised the first step's
 * peak resident set by 35 MiB.) */
#define CPU_PACK_SLICE ((size_t)4 << 20)

/* The whole pages of a weight's file mapping that a pack may release
 * (cpu_file_map_of), in the order its rows are copied. */
typedef struct cpu_file_release {
    uintptr_t mask; /* page size - 1 */
    uintptr_t next; /* first page not yet released */
    uintptr_t end;  /* end of the last whole page */
} cpu_file_release;

/* Prepares to release the whole pages of [p, p + n) where they are a
 * file's pages and keeps them from being mapped back as huge pages (a read
 * of a neighbouring tensor would map back its whole 2 MiB); elsewhere
 * releases nothing. */
static cpu_file_release cpu_release_begin(cpu_state *s, const void *p, size_t n)
{
    cpu_file_release r = {0};
    const long page = sysconf(_SC_PAGESIZE);
    if (page <= 0)
        return r;
    r.mask = (uintptr_t)page - 1;
    const uintptr_t lo = ((uintptr_t)p + r.mask) & ~r.mask, hi = ((uintptr_t)p + n) & ~r.mask;
    if (hi <= lo || !cpu_file_map_of(s, lo, hi))
        return r;
#ifdef MADV_NOHUGEPAGE
    madvise((void *)lo, hi - lo, MADV_NOHUGEPAGE);
#endif
    r.next = lo;
    r.end = hi;
    return r;
}

/* Releases the whole pages before |upto| not released yet. */
static void cpu_release_upto(cpu_file_release *r, uintptr_t upto)
{
    upto &= ~r->mask;
    if (upto > r->end)
        upto = r->end;
    if (upto <= r->next)
        return;
    madvise((void *)r->next, upto - r->next, MADV_DONTNEED);
    r->next = upto;
}

/* True when |w| is a whole, dense weight in a borrowed buffer of its own. */
static bool cpu_repack_candidate(const sy_tensor *w, const cpu_buffer *b)
{
    const uint64_t row = sy_tensor_row_size(w);
    return w->role == SY_ROLE_WEIGHT && !w->view_src && b && !b->owned && b->ptr == w->data &&
           w->offset == 0 && w->nb[1] == row && w->nb[2] == row * (uint64_t)w->ne[1] &&
           w->nb[3] == w->nb[2] * (uint64_t)w->ne[2] && b->size == w->nb[3] * (uint64_t)w->ne[3];
}

const uint8_t *cpu_weight_packed_made(const cpu_state *s, const sy_tensor *w)
{
    const cpu_buffer *b = w->buffer;
    return s->repack && b && b->packed && b->packed_dtype == w->dtype && cpu_repack_candidate(w, b)
               ? b->packed
               : NULL;
}

const uint8_t *cpu_packed_row_as_stored(const sy_tensor *w, const uint8_t *packed_row,
                                        uint8_t *scratch)
{
    if (cpu_pack_keeps_layout(w->dtype))
        return packed_row;
    cpu_unpack_row(packed_row, scratch, w->ne[0] / (int64_t)sy_dtype_block_size(w->dtype),
                   sy_dtype_type_size(w->dtype));
    return scratch;
}

/* Where cpu_pack_rows puts the packed rows: |p| (the whole copy), or the
 * pack cache file |f| at |off| through s->pack_bounce. */
typedef struct cpu_pack_sink {
    uint8_t *p;
    cpu_pack_file *f;
    uint64_t off;
    uint64_t sum[2]; /* of the bytes written to |f| */
} cpu_pack_sink;

/* Packs |w|'s rows from its buffer into |k| in slices, releasing the file
 * pages under each slice once it is copied; false when writing to the
 * cache failed. */
static bool cpu_pack_rows(cpu_state *s, const sy_tensor *w, const cpu_buffer *b, int64_t slice,
                          cpu_pack_sink *k)
{
    const int64_t rows = w->ne[1] * w->ne[2] * w->ne[3];
    const size_t row_bytes = (size_t)w->nb[1];
    cpu_file_release rel = cpu_release_begin(s, b->ptr, (size_t)b->size);
    for (int64_t r0 = 0; r0 < rows; r0 += slice) {
        const int64_t n = rows - r0 < slice ? rows - r0 : slice;
        uint8_t *dst = k->f ? s->pack_bounce : k->p + (size_t)r0 * row_bytes;
        cpu_repack_ctx c = {.src = (const uint8_t *)b->ptr + (size_t)r0 * row_bytes, .dst = dst,
                            .rows = n, .k = w->ne[0], .row_bytes = row_bytes,
                            .dtype = w->dtype};
        const uint32_t nth = n < (int64_t)s->n_threads ? (uint32_t)n : s->n_threads;
        cpu_pool_run(s->pool, cpu_repack_task, &c, nth ? nth : 1);
        if (k->f) {
            cpu_pack_sum_add(k->sum, dst, (size_t)n * row_bytes);
            if (!cpu_pack_file_write(s, k->f, k->off + (uint64_t)r0 * row_bytes, dst,
                                     (size_t)n * row_bytes))
                return false;
        }
        cpu_release_upto(&rel, (uintptr_t)b->ptr + (size_t)(r0 + n) * row_bytes);
    }
    return true;
}

/* The pack cache's file for |b|'s weight and the weight's offset in the
 * model file, where the cache is on and the weight's pages are a file's
 * as it stores them (a clean mapping in s->file_maps: a write into the
 * buffer would have left anonymous pages there); NULL otherwise. */
static cpu_pack_file *cpu_pack_cache_of(cpu_state *s, const cpu_buffer *b, uint64_t *out_off)
{
    const long page = sysconf(_SC_PAGESIZE);
    if (!s->pack_dir || page <= 0)
        return NULL;
    const uintptr_t mask = (uintptr_t)page - 1, at = (uintptr_t)b->ptr;
    const uintptr_t end = (at + (uintptr_t)b->size + mask) & ~mask;
    const cpu_file_map *m = cpu_file_map_of(s, at & ~mask, end);
    if (!m)
        return NULL;
    *out_off = m->off + (at - m->lo);
    return cpu_pack_file_for(s, m, at);
}

/* Sets |p| as |b|'s packed copy of |w| and counts it. */
static const uint8_t *cpu_pack_set(cpu_state *s, const sy_tensor *w, cpu_buffer *b,
                                   const uint8_t *p, cpu_pack_chunk *chunk, const char *how)
{
    b->packed = (void *)p;
    b->packed_chunk = chunk;
    b->packed_dtype = w->dtype;
    s->mem_in_use += b->size;
    if (s->mem_in_use > s->mem_peak)
        s->mem_peak = s->mem_in_use;
    cpu_log(s, SY_LOG_DEBUG, "%s weight '%s' (%s, %llu bytes) for the %s kernels", how, w->name,
            sy_dtype_name(w->dtype), (unsigned long long)b->size, s->isa->name);
    return p;
}

const uint8_t *cpu_weight_packed(cpu_state *s, const sy_tensor *w)
{
    const uint8_t *made = cpu_weight_packed_made(s, w);
    if (made)
        return made;
    cpu_buffer *b = w->buffer;
    if (!s->repack || s->act_planes == 0 || w->dtype >= SY_DTYPE_COUNT ||
        !s->isa->qdot_rows_packed[w->dtype] || !s->isa->qgemm_packed[w->dtype] ||
        !cpu_repack_candidate(w, b) || b->pack_failed || b->packed)
        return NULL;
    const size_t row_bytes = (size_t)w->nb[1];
    /* Whole multiples of 8 rows but the last slice: the cache's sum takes
     * 8 bytes at a time. */
    int64_t slice = (int64_t)(CPU_PACK_SLICE / (row_bytes ? row_bytes : 1)) & ~(int64_t)7;
    if (slice < 8)
        slice = 8;
    cpu_pack_sink k = {0};
    /* A copy in the file's layout would be the file's bytes again, read
     * back through a file's pages: it goes in memory only. */
    k.f = cpu_pack_keeps_layout(w->dtype) ? NULL : cpu_pack_cache_of(s, b, &k.off);
    if (k.f) {
        const uint8_t *hit = cpu_pack_file_find(s, k.f, k.off, b->size, row_bytes, w->dtype);
        if (hit) {
            cpu_file_release rel = cpu_release_begin(s, b->ptr, (size_t)b->size);
            cpu_release_upto(&rel, (uintptr_t)b->ptr + (size_t)b->size);
            return cpu_pack_set(s, w, b, hit, NULL, "read from the pack cache");
        }
        if (cpu_pack_file_clashes(k.f, k.off, b->size, row_bytes, w->dtype)) {
            cpu_log(s, SY_LOG_DEBUG, "weight '%s' shares model-file bytes with another weight; "
                    "packed in memory, not in the pack cache", w->name);
            k.f = NULL;
        }
    }
    if (k.f) {
        const size_t need = (size_t)slice * row_bytes;
        if (s->pack_bounce_size < need) {
            if (s->pack_bounce)
                s->host->free(s->host->ctx, s->pack_bounce);
            s->pack_bounce = s->host->alloc(s->host->ctx, need, CPU_ALIGN);
            s->pack_bounce_size = s->pack_bounce ? need : 0;
        }
        if (s->pack_bounce && cpu_pack_rows(s, w, b, slice, &k)) {
            const uint8_t *p =
                cpu_pack_file_add(s, k.f, k.off, b->size, row_bytes, w->dtype, k.sum);
            if (p)
                return cpu_pack_set(s, w, b, p, NULL, "packed into the pack cache");
        }
        k.f = NULL; /* packed in memory instead */
    }
    cpu_pack_chunk *chunk = NULL;
    k.p = cpu_pack_alloc(s, (size_t)b->size, &chunk);
    if (!k.p) {
        b->pack_failed = true;
        cpu_log(s, SY_LOG_WARN, "no memory to repack weight '%s' (%llu bytes); it is read as stored",
                w->name, (unsigned long long)b->size);
        return NULL;
    }
    cpu_pack_rows(s, w, b, slice, &k);
    return cpu_pack_set(s, w, b, k.p, chunk, "repacked");
}
