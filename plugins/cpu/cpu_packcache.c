/* The pack cache (SWITCHYARD_CPU_PACK_CACHE=DIR): the packed copies of
 * cpu_repack.c kept in a file per model file, so that a later process maps
 * them instead of packing again.
 *
 * Why: a packed copy made in anonymous memory costs the first step the
 * first touch of that memory, and in a VM whose host takes idle memory
 * back (a balloon's free page reporting) a fresh page costs ~40 us: the
 * 555 MiB of synth 1B Q4_0 took 3-6 s, where the same step read from the
 * GGUF's mapping (pages the page cache holds) took 0.45 s.  Pages of a
 * cache file that one process wrote stay in the page cache for the next.
 *
 * Files in DIR, per model file, named by a hash of its device, inode, size
 * and modification time and of the packed layout's version:
 *   sy-pack-<hash>.bin  as long as the model file; a weight's packed copy
 *                       lies at the offset where the model file stores the
 *                       weight, the rest is a hole;
 *   sy-pack-<hash>.idx  one record per weight written: offset, bytes, row
 *                       bytes, dtype, a sum of the packed bytes, and a
 *                       check of the record.
 * A record is appended only after the .bin is synced (at the end of the
 * execute call that packed the weight), so a crash loses at worst weights
 * that are packed again.  A record's sum is checked against the bytes at
 * the weight's first use in each process, so a damaged file costs a new
 * pack, never a wrong result.  Processes packing the same model at once
 * write the same bytes at the same offsets; a record twice is harmless.
 * Nothing here ever removes a file: deleting the folder is the way to
 * reclaim its space.
 *
 * The files are written in place, so each must be a regular file of its
 * own: a symbolic link or a second hard link at a cache file's name (in a
 * folder others can write) would have packed weights written into the
 * file it names, the model itself included; such a cache is not used.  A
 * weight whose bytes overlap another weight's in the model file (legal
 * GGUF) is packed in memory: their packed copies would share the .bin's
 * bytes at those offsets. */
#include <errno.h>
#include <fcntl.h>
#include <limits.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/mman.h>
#include <sys/stat.h>
#include <sys/types.h>
#include <unistd.h>

#include "cpu_internal.h"

/* Largest .idx read: 2^18 records, far more than a model's weights
 * written a few times over (a sparse .idx of a terabyte held the first
 * step for minutes). */
#define CPU_PACK_IDX_MAX (UINT64_C(1) << 18)

/* The layout (cpu_repack.h) and record format; change it with either. */
#define CPU_PACK_LAYOUT UINT64_C(0x53595041434b0001) /* "SYPACK" 1 */

typedef struct cpu_pack_record {
    uint64_t layout; /* CPU_PACK_LAYOUT */
    uint64_t off;    /* of the weight in the model file and of its copy in the .bin */
    uint64_t bytes, row_bytes, dtype;
    uint64_t sum[2]; /* cpu_pack_sum_add over the packed bytes */
    uint64_t check;  /* cpu_pack_fnv of the fields above */
} cpu_pack_record;

typedef struct cpu_pack_list {
    cpu_pack_record *r;
    size_t n, cap;
} cpu_pack_list;

struct cpu_pack_file {
    struct cpu_pack_file *next;
    uint64_t dev, ino; /* the model file's */
    bool usable;       /* false: not opened, or a write failed; not tried again */
    int fd, idx_fd;    /* the .bin and the .idx */
    const uint8_t *map; /* the .bin, read-only, |size| bytes */
    size_t size;
    char name[64];         /* sy-pack-<hash>, for messages */
    cpu_pack_list recs;    /* recorded in the .idx */
    cpu_pack_list pending; /* written, not yet synced and recorded */
};

static uint64_t cpu_pack_fnv(const void *p, size_t n, uint64_t h)
{
    const uint8_t *b = p;
    for (size_t i = 0; i < n; i++)
        h = (h ^ b[i]) * UINT64_C(0x100000001b3);
    return h;
}

#define CPU_PACK_FNV_BASIS UINT64_C(0xcbf29ce484222325)

static uint64_t cpu_pack_record_check(const cpu_pack_record *r)
{
    return cpu_pack_fnv(r, offsetof(cpu_pack_record, check), CPU_PACK_FNV_BASIS);
}

void cpu_pack_sum_add(uint64_t sum[2], const uint8_t *p, size_t n)
{
    uint64_t a = sum[0], b = sum[1];
    size_t i = 0;
    for (; i + 8 <= n; i += 8) {
        uint64_t w;
        memcpy(&w, p + i, sizeof w);
        a += w;
        b += a;
    }
    if (i < n) {
        uint64_t w = 0;
        memcpy(&w, p + i, n - i);
        a += w;
        b += a;
    }
    sum[0] = a;
    sum[1] = b;
}

static bool cpu_pack_list_push(cpu_state *s, cpu_pack_list *l, const cpu_pack_record *r)
{
    if (l->n == l->cap) {
        const size_t cap = l->cap ? 2 * l->cap : 64;
        cpu_pack_record *p = s->host->alloc(s->host->ctx, cap * sizeof *p, sizeof(uint64_t));
        if (!p)
            return false;
        if (l->n)
            memcpy(p, l->r, l->n * sizeof *p);
        if (l->r)
            s->host->free(s->host->ctx, l->r);
        l->r = p;
        l->cap = cap;
    }
    l->r[l->n++] = *r;
    return true;
}

/* The path of the file mapped at |at|, from /proc/self/maps; false where
 * there is none or the file was deleted. */
static bool cpu_mapped_path(uintptr_t at, char *out, size_t size)
{
    FILE *f = fopen("/proc/self/maps", "r");
    if (!f)
        return false;
    char *line = NULL;
    size_t cap = 0;
    bool found = false;
    while (!found && getline(&line, &cap, f) > 0) {
        unsigned long lo, hi;
        int at_path = 0;
        if (sscanf(line, "%lx-%lx %*s %*x %*x:%*x %*u%n", &lo, &hi, &at_path) != 2 ||
            at_path == 0 || at < lo || at >= hi)
            continue;
        const char *p = line + at_path;
        while (*p == ' ')
            p++;
        size_t n = strcspn(p, "\n");
        static const char deleted[] = " (deleted)";
        const size_t nd = sizeof deleted - 1;
        if (*p != '/' || n >= size || (n >= nd && strncmp(p + n - nd, deleted, nd) == 0))
            break;
        memcpy(out, p, n);
        out[n] = '\0';
        found = true;
    }
    free(line);
    fclose(f);
    return found;
}

/* Reads the .idx's whole records; a torn or foreign one is skipped. */
static void cpu_pack_read_records(cpu_state *s, cpu_pack_file *f)
{
    cpu_pack_record buf[64];
    off_t at = 0;
    for (;;) {
        const ssize_t got = pread(f->idx_fd, buf, sizeof buf, at);
        if (got <= 0)
            return;
        const size_t n = (size_t)got / sizeof buf[0];
        if (n == 0)
            return;
        for (size_t i = 0; i < n; i++) {
            const cpu_pack_record *r = &buf[i];
            if (r->layout == CPU_PACK_LAYOUT && r->check == cpu_pack_record_check(r) &&
                r->off <= f->size && r->bytes <= f->size - r->off &&
                !cpu_pack_list_push(s, &f->recs, r))
                return;
        }
        at += (off_t)(n * sizeof buf[0]);
    }
}

/* Opens |f|'s files for the model file at |path|; NULL or why not. */
static const char *cpu_pack_open(cpu_state *s, cpu_pack_file *f, const char *path)
{
    struct stat st;
    if (stat(path, &st) != 0 || (uint64_t)st.st_dev != f->dev || (uint64_t)st.st_ino != f->ino)
        return "the mapped file is no longer at its path";
    if (st.st_size <= 0)
        return "the model file is empty";
    const uint64_t key_in[6] = {f->dev, f->ino, (uint64_t)st.st_size, (uint64_t)st.st_mtim.tv_sec,
                                (uint64_t)st.st_mtim.tv_nsec, CPU_PACK_LAYOUT};
    snprintf(f->name, sizeof f->name, "sy-pack-%016llx",
             (unsigned long long)cpu_pack_fnv(key_in, sizeof key_in, CPU_PACK_FNV_BASIS));
    if (mkdir(s->pack_dir, 0755) != 0 && errno != EEXIST)
        return "its folder cannot be made";
    char file[PATH_MAX];
    if (snprintf(file, sizeof file, "%s/%s.bin", s->pack_dir, f->name) >= (int)sizeof file)
        return "its path is too long";
    f->fd = open(file, O_RDWR | O_CREAT | O_CLOEXEC | O_NOFOLLOW, 0644);
    struct stat bin;
    if (f->fd < 0 || fstat(f->fd, &bin) != 0)
        return "its .bin file cannot be opened for writing (a symbolic link is not followed)";
    if (!S_ISREG(bin.st_mode) || bin.st_nlink != 1)
        return "its .bin file is not a regular file of its own (a second hard link)";
    if (bin.st_size > st.st_size)
        return "its .bin file is longer than the model file";
    if (bin.st_size < st.st_size && ftruncate(f->fd, st.st_size) != 0)
        return "its .bin file cannot be sized";
    f->size = (size_t)st.st_size;
    void *map = mmap(NULL, f->size, PROT_READ, MAP_SHARED, f->fd, 0);
    if (map == MAP_FAILED)
        return "its .bin file cannot be mapped";
    f->map = map;
    snprintf(file, sizeof file, "%s/%s.idx", s->pack_dir, f->name);
    f->idx_fd = open(file, O_RDWR | O_CREAT | O_APPEND | O_CLOEXEC | O_NOFOLLOW, 0644);
    struct stat idx;
    if (f->idx_fd < 0 || fstat(f->idx_fd, &idx) != 0)
        return "its .idx file cannot be opened for writing (a symbolic link is not followed)";
    if (!S_ISREG(idx.st_mode) || idx.st_nlink != 1)
        return "its .idx file is not a regular file of its own (a second hard link)";
    if ((uint64_t)idx.st_size > CPU_PACK_IDX_MAX * sizeof(cpu_pack_record))
        return "its .idx file is larger than any model's records (delete the folder)";
    cpu_pack_read_records(s, f);
    return NULL;
}

cpu_pack_file *cpu_pack_file_for(cpu_state *s, const cpu_file_map *m, uintptr_t at)
{
    for (cpu_pack_file *f = s->pack_files; f; f = f->next)
        if (f->dev == m->dev && f->ino == m->ino)
            return f->usable ? f : NULL;
    cpu_pack_file *f = s->host->alloc(s->host->ctx, sizeof *f, sizeof(uint64_t));
    if (!f)
        return NULL;
    memset(f, 0, sizeof *f);
    f->dev = m->dev;
    f->ino = m->ino;
    f->fd = f->idx_fd = -1;
    f->next = s->pack_files;
    s->pack_files = f; /* listed even when unusable: not tried again */
    char path[PATH_MAX];
    errno = 0;
    const char *why = cpu_mapped_path(at, path, sizeof path) ? cpu_pack_open(s, f, path)
                                                             : "the model file's path is not known";
    if (why) {
        cpu_log(s, SY_LOG_WARN,
                "pack cache in '%s' not used for a model file: %s (%s); weights are packed in memory",
                s->pack_dir, why, errno ? strerror(errno) : "no error code");
        return NULL;
    }
    f->usable = true;
    cpu_log(s, SY_LOG_INFO, "pack cache %s/%s for %s: %zu packed weights recorded", s->pack_dir,
            f->name, path, f->recs.n);
    return f;
}

/* True when |a| and |b| record the same weight (offset, bytes, layout). */
static bool cpu_pack_same(const cpu_pack_record *a, const cpu_pack_record *b)
{
    return a->off == b->off && a->bytes == b->bytes && a->row_bytes == b->row_bytes &&
           a->dtype == b->dtype;
}

/* True when a live record of |l| covers bytes of |want|'s range but is not
 * |want|'s weight. */
static bool cpu_pack_list_clashes(const cpu_pack_list *l, const cpu_pack_record *want)
{
    for (size_t i = 0; i < l->n; i++) {
        const cpu_pack_record *r = &l->r[i];
        if (r->bytes > 0 && !cpu_pack_same(r, want) && r->off < want->off + want->bytes &&
            want->off < r->off + r->bytes)
            return true;
    }
    return false;
}

bool cpu_pack_file_clashes(const cpu_pack_file *f, uint64_t off, uint64_t bytes,
                           uint64_t row_bytes, uint32_t dtype)
{
    const cpu_pack_record want = {.off = off, .bytes = bytes, .row_bytes = row_bytes,
                                  .dtype = dtype};
    return cpu_pack_list_clashes(&f->pending, &want) || cpu_pack_list_clashes(&f->recs, &want);
}

/* The record of |want|'s weight in |l|, or NULL. */
static cpu_pack_record *cpu_pack_list_find(cpu_pack_list *l, const cpu_pack_record *want)
{
    for (size_t i = 0; i < l->n; i++)
        if (cpu_pack_same(&l->r[i], want))
            return &l->r[i];
    return NULL;
}

const uint8_t *cpu_pack_file_find(cpu_state *s, cpu_pack_file *f, uint64_t off, uint64_t bytes,
                                  uint64_t row_bytes, uint32_t dtype)
{
    const cpu_pack_record want = {.off = off, .bytes = bytes, .row_bytes = row_bytes,
                                  .dtype = dtype};
    cpu_pack_record *r = cpu_pack_list_find(&f->pending, &want);
    if (r)
        return f->map + off; /* written by this process since the last sync */
    r = cpu_pack_list_find(&f->recs, &want);
    if (!r)
        return NULL;
    uint64_t sum[2] = {0, 0};
    cpu_pack_sum_add(sum, f->map + off, (size_t)bytes);
    if (sum[0] == r->sum[0] && sum[1] == r->sum[1])
        return f->map + off;
    cpu_log(s, SY_LOG_WARN,
            "pack cache %s/%s: the weight at offset %llu does not match its record; packing it again",
            s->pack_dir, f->name, (unsigned long long)off);
    r->bytes = 0; /* matches nothing from now on */
    return NULL;
}

/* Gives up |f| for the rest of the process after |what| failed. */
static void cpu_pack_fail(cpu_state *s, cpu_pack_file *f, const char *what, int err)
{
    cpu_log(s, SY_LOG_WARN, "pack cache %s/%s: %s failed (%s); weights are packed in memory",
            s->pack_dir, f->name, what, strerror(err));
    f->usable = false;
    f->pending.n = 0;
}

bool cpu_pack_file_write(cpu_state *s, cpu_pack_file *f, uint64_t off, const uint8_t *src,
                         size_t n)
{
    if (!f->usable)
        return false;
    while (n > 0) {
        const ssize_t put = pwrite(f->fd, src, n, (off_t)off);
        if (put < 0 && errno == EINTR)
            continue;
        if (put <= 0) {
            cpu_pack_fail(s, f, "writing the .bin", put < 0 ? errno : EIO);
            return false;
        }
        src += put;
        off += (uint64_t)put;
        n -= (size_t)put;
    }
    return true;
}

const uint8_t *cpu_pack_file_add(cpu_state *s, cpu_pack_file *f, uint64_t off, uint64_t bytes,
                                 uint64_t row_bytes, uint32_t dtype, const uint64_t sum[2])
{
    cpu_pack_record r = {.layout = CPU_PACK_LAYOUT, .off = off, .bytes = bytes,
                         .row_bytes = row_bytes, .dtype = dtype, .sum = {sum[0], sum[1]}};
    r.check = cpu_pack_record_check(&r);
    if (!f->usable || !cpu_pack_list_push(s, &f->pending, &r))
        return NULL;
    s->pack_pending = true;
    return f->map + off;
}

void cpu_pack_cache_commit(cpu_state *s)
{
    s->pack_pending = false;
    for (cpu_pack_file *f = s->pack_files; f; f = f->next) {
        if (!f->usable || f->pending.n == 0)
            continue;
        if (fdatasync(f->fd) != 0) {
            cpu_pack_fail(s, f, "syncing the .bin", errno);
            continue;
        }
        const size_t n = f->pending.n * sizeof f->pending.r[0];
        const ssize_t put = write(f->idx_fd, f->pending.r, n);
        if (put != (ssize_t)n) {
            cpu_pack_fail(s, f, "appending to the .idx", put < 0 ? errno : EIO);
            continue;
        }
        for (size_t i = 0; i < f->pending.n; i++)
            if (!cpu_pack_list_push(s, &f->recs, &f->pending.r[i]))
                break; /* no memory: the copies stay mapped, only the lookup misses */
        f->pending.n = 0;
    }
}

void cpu_pack_cache_free(cpu_state *s)
{
    if (s->pack_pending)
        cpu_pack_cache_commit(s);
    while (s->pack_files) {
        cpu_pack_file *f = s->pack_files;
        s->pack_files = f->next;
        if (f->map)
            munmap((void *)f->map, f->size);
        if (f->fd >= 0)
            close(f->fd);
        if (f->idx_fd >= 0)
            close(f->idx_fd);
        if (f->recs.r)
            s->host->free(s->host->ctx, f->recs.r);
        if (f->pending.r)
            s->host->free(s->host->ctx, f->pending.r);
        s->host->free(s->host->ctx, f);
    }
    if (s->pack_bounce)
        s->host->free(s->host->ctx, s->pack_bounce);
    s->pack_bounce = NULL;
    s->pack_bounce_size = 0;
    if (s->pack_dir)
        s->host->free(s->host->ctx, s->pack_dir);
    s->pack_dir = NULL;
}
