/* plugin-check: device buffers (allocation, copies at odd offsets and
 * sizes, bounds, mapping, import, device-to-device copies, allocation past
 * the device's memory) and the threads check (two plugin states used from
 * two threads at once: the ABI lets distinct devices, and so distinct
 * states, be driven concurrently, which catches hidden globals). */
#include <stdlib.h>
#include <string.h>

#include "plugin_check_internal.h"

#define PCHECK_MANY_BUFFERS 48

typedef struct pcheck_buf {
    void *handle;
    uint64_t size;
    unsigned char *model; /* what the buffer should hold */
} pcheck_buf;

static void pcheck_fill(uint64_t *rng, unsigned char *p, size_t n)
{
    for (size_t i = 0; i < n; i++)
        p[i] = (unsigned char)(pcheck_rand(rng) >> 56);
}

/* Copies the whole buffer out and compares it with its model; fills |why|. */
static bool pcheck_buf_matches(pcheck_run *run, void *state, uint32_t dev, const pcheck_buf *b,
                               char *why, size_t size)
{
    unsigned char *got = malloc(b->size ? (size_t)b->size : 1);
    if (!got) {
        snprintf(why, size, "out of host memory");
        return false;
    }
    sy_status st = run->table.copy_out(state, dev, b->handle, 0, got, b->size);
    bool ok = st == SY_OK;
    if (!ok)
        snprintf(why, size, "copy_out of %llu bytes failed: %s", (unsigned long long)b->size,
                 sy_status_name(st));
    for (uint64_t i = 0; ok && i < b->size; i++) {
        if (got[i] != b->model[i]) {
            snprintf(why, size, "byte %llu is 0x%02x, expected 0x%02x", (unsigned long long)i,
                     got[i], b->model[i]);
            ok = false;
        }
    }
    free(got);
    return ok;
}

static bool pcheck_buf_alloc(pcheck_run *run, void *state, uint32_t dev, uint64_t size,
                             pcheck_buf *b, char *why, size_t why_size)
{
    memset(b, 0, sizeof *b);
    b->size = size;
    b->model = calloc(1, size ? (size_t)size : 1);
    if (!b->model) {
        snprintf(why, why_size, "out of host memory");
        return false;
    }
    sy_status st = run->table.buffer_alloc(state, dev, size, &b->handle);
    if (st != SY_OK || !b->handle) {
        snprintf(why, why_size, "buffer_alloc(%llu) returned %s%s", (unsigned long long)size,
                 sy_status_name(st), st == SY_OK ? " and a NULL buffer" : "");
        free(b->model);
        b->model = NULL;
        b->handle = NULL;
        return false;
    }
    return true;
}

static void pcheck_buf_free(pcheck_run *run, void *state, uint32_t dev, pcheck_buf *b)
{
    if (b->handle)
        run->table.buffer_free(state, dev, b->handle);
    free(b->model);
    memset(b, 0, sizeof *b);
}

/* Writes |n| random bytes at |off| through copy_in and into the model. */
static bool pcheck_buf_write(pcheck_run *run, void *state, uint32_t dev, pcheck_buf *b,
                             uint64_t off, size_t n, uint64_t *rng, char *why, size_t size)
{
    unsigned char *src = malloc(n ? n : 1);
    if (!src) {
        snprintf(why, size, "out of host memory");
        return false;
    }
    pcheck_fill(rng, src, n);
    sy_status st = run->table.copy_in(state, dev, b->handle, off, src, n);
    if (st == SY_OK)
        memcpy(b->model + off, src, n);
    else
        snprintf(why, size, "copy_in of %zu bytes at offset %llu failed: %s", n,
                 (unsigned long long)off, sy_status_name(st));
    free(src);
    return st == SY_OK;
}

static void pcheck_bounds(pcheck_run *run, uint32_t dev, pcheck_buf *b)
{
    const int32_t d = (int32_t)dev;
    unsigned char junk[64];
    memset(junk, 0x5a, sizeof junk);
    const uint64_t off = b->size - 10;
    sy_status in = run->table.copy_in(run->state, dev, b->handle, off, junk, 20);
    sy_status out = run->table.copy_out(run->state, dev, b->handle, off, junk, 20);
    sy_status far = run->table.copy_in(run->state, dev, b->handle, UINT64_MAX - 8, junk, 16);
    char why[160] = "";
    if (in == SY_OK || out == SY_OK || far == SY_OK) {
        pcheck_add(run, "buffers", d, SY_PCHECK_FAIL, "copies past the end are refused",
                   "copy_in %s, copy_out %s, copy_in at offset 2^64-8 %s", sy_status_name(in),
                   sy_status_name(out), sy_status_name(far));
    } else if (!pcheck_buf_matches(run, run->state, dev, b, why, sizeof why)) {
        pcheck_add(run, "buffers", d, SY_PCHECK_FAIL, "copies past the end are refused",
                   "refused, but the buffer changed: %s", why);
    } else {
        pcheck_pass(run, "buffers", d, "copies past the end are refused");
    }
}

static void pcheck_map(pcheck_run *run, uint32_t dev, pcheck_buf *b, uint64_t *rng)
{
    const int32_t d = (int32_t)dev;
    const char *name = "host pointer maps the buffer";
    if (!run->table.buffer_host_ptr) {
        pcheck_add(run, "buffers", d, SY_PCHECK_SKIP, name, "no buffer_host_ptr entry");
        return;
    }
    unsigned char *p = run->table.buffer_host_ptr(run->state, dev, b->handle);
    if (!p) {
        pcheck_add(run, "buffers", d, SY_PCHECK_PASS, name, "not mappable (NULL)");
        return;
    }
    if (memcmp(p, b->model, (size_t)b->size) != 0) {
        pcheck_add(run, "buffers", d, SY_PCHECK_FAIL, name,
                   "the mapped bytes differ from what copy_in wrote");
        return;
    }
    pcheck_fill(rng, p + 7, 300);
    memcpy(b->model + 7, p + 7, 300);
    char why[160];
    if (!pcheck_buf_matches(run, run->state, dev, b, why, sizeof why))
        pcheck_add(run, "buffers", d, SY_PCHECK_FAIL, name, "written through the map: %s", why);
    else
        pcheck_pass(run, "buffers", d, name);
}

static void pcheck_copy_device(pcheck_run *run, uint32_t dev, pcheck_buf *b, uint64_t *rng)
{
    const int32_t d = (int32_t)dev;
    const char *name = "copy_device between two buffers";
    if (!run->table.copy_device) {
        pcheck_add(run, "buffers", d, SY_PCHECK_SKIP, name, "no copy_device entry");
        return;
    }
    pcheck_buf dst;
    char why[160];
    if (!pcheck_buf_alloc(run, run->state, dev, 4096 + 7, &dst, why, sizeof why)) {
        pcheck_add(run, "buffers", d, SY_PCHECK_FAIL, name, "%s", why);
        return;
    }
    bool ok = pcheck_buf_write(run, run->state, dev, &dst, 0, 4096 + 7, rng, why, sizeof why);
    if (ok) {
        sy_status st = run->table.copy_device(run->state, dev, dst.handle, 33, dev, b->handle, 5,
                                              777);
        if (st == SY_OK) {
            memcpy(dst.model + 33, b->model + 5, 777);
            ok = pcheck_buf_matches(run, run->state, dev, &dst, why, sizeof why);
        } else {
            snprintf(why, sizeof why, "copy_device of 777 bytes failed: %s", sy_status_name(st));
            ok = false;
        }
    }
    pcheck_buf_free(run, run->state, dev, &dst);
    if (ok)
        pcheck_pass(run, "buffers", d, name);
    else
        pcheck_add(run, "buffers", d, SY_PCHECK_FAIL, name, "%s", why);
}

static void pcheck_import(pcheck_run *run, uint32_t dev, const sy_device_desc *desc,
                          uint64_t *rng)
{
    const int32_t d = (int32_t)dev;
    const char *name = "import_host wraps host memory";
    if (!run->table.buffer_import_host) {
        pcheck_add(run, "buffers", d, SY_PCHECK_SKIP, name, "no buffer_import_host entry");
        return;
    }
    if (!desc->unified_memory) {
        pcheck_add(run, "buffers", d, SY_PCHECK_SKIP, name,
                   "only asked of unified-memory devices");
        return;
    }
    enum { SIZE = 8192 + 5 };
    unsigned char *host = NULL, *copy = malloc(SIZE);
    if (posix_memalign((void **)&host, 64, SIZE) != 0 || !copy) {
        free(host);
        free(copy);
        pcheck_add(run, "buffers", d, SY_PCHECK_FAIL, name, "out of host memory");
        return;
    }
    pcheck_fill(rng, host, SIZE);
    memcpy(copy, host, SIZE);
    void *buf = NULL;
    sy_status st = run->table.buffer_import_host(run->state, dev, host, SIZE, &buf);
    if (st != SY_OK) {
        pcheck_add(run, "buffers", d, SY_PCHECK_PASS, name,
                   "refused with %s (allowed: the core copies instead)", sy_status_name(st));
    } else {
        unsigned char got[100];
        st = run->table.copy_out(run->state, dev, buf, 17, got, sizeof got);
        run->table.buffer_free(run->state, dev, buf);
        if (st != SY_OK || memcmp(got, host + 17, sizeof got) != 0)
            pcheck_add(run, "buffers", d, SY_PCHECK_FAIL, name,
                       "copy_out from the imported buffer %s",
                       st != SY_OK ? sy_status_name(st) : "returned other bytes");
        else if (memcmp(host, copy, SIZE) != 0)
            pcheck_add(run, "buffers", d, SY_PCHECK_FAIL, name,
                       "freeing the imported buffer changed the host memory");
        else
            pcheck_pass(run, "buffers", d, name);
    }
    free(host);
    free(copy);
}

static void pcheck_huge(pcheck_run *run, uint32_t dev, const sy_device_desc *desc)
{
    const int32_t d = (int32_t)dev;
    const uint64_t mem = desc->memory_bytes;
    const uint64_t size = mem && mem < ((uint64_t)1 << 61) ? mem * 2 + 4096 : UINT64_MAX / 2;
    void *buf = (void *)&buf; /* not NULL, so that a plugin leaving it alone is seen */
    sy_status st = run->table.buffer_alloc(run->state, dev, size, &buf);
    if (st == SY_OK) {
        if (buf)
            run->table.buffer_free(run->state, dev, buf);
        pcheck_add(run, "buffers", d, SY_PCHECK_FAIL, "allocation beyond memory fails cleanly",
                   "buffer_alloc(%llu) succeeded on a device of %llu bytes",
                   (unsigned long long)size, (unsigned long long)mem);
    } else if (buf != NULL) {
        pcheck_add(run, "buffers", d, SY_PCHECK_FAIL, "allocation beyond memory fails cleanly",
                   "buffer_alloc failed (%s) but left *out_buffer non-NULL", sy_status_name(st));
    } else {
        pcheck_add(run, "buffers", d, SY_PCHECK_PASS, "allocation beyond memory fails cleanly",
                   "%llu bytes: %s", (unsigned long long)size, sy_status_name(st));
    }
}

static void pcheck_zero_size(pcheck_run *run, uint32_t dev)
{
    const int32_t d = (int32_t)dev;
    void *buf = NULL;
    sy_status st = run->table.buffer_alloc(run->state, dev, 0, &buf);
    if (st != SY_OK) {
        pcheck_add(run, "buffers", d, SY_PCHECK_PASS, "zero-size buffer",
                   "refused with %s (allowed)", sy_status_name(st));
        return;
    }
    unsigned char byte = 0;
    sy_status in = run->table.copy_in(run->state, dev, buf, 0, &byte, 0);
    sy_status out = run->table.copy_out(run->state, dev, buf, 0, &byte, 0);
    run->table.buffer_free(run->state, dev, buf);
    if (in != SY_OK || out != SY_OK)
        pcheck_add(run, "buffers", d, SY_PCHECK_FAIL, "zero-size buffer",
                   "copies of 0 bytes failed: copy_in %s, copy_out %s", sy_status_name(in),
                   sy_status_name(out));
    else
        pcheck_add(run, "buffers", d, SY_PCHECK_PASS, "zero-size buffer",
                   "allocated, 0-byte copies, freed");
}

static void pcheck_many(pcheck_run *run, uint32_t dev, uint64_t *rng)
{
    const int32_t d = (int32_t)dev;
    const char *name = "many buffers freed in random order";
    pcheck_buf bufs[PCHECK_MANY_BUFFERS];
    memset(bufs, 0, sizeof bufs);
    char why[160] = "";
    bool ok = true;
    for (int i = 0; i < PCHECK_MANY_BUFFERS && ok; i++) {
        const uint64_t size = 1 + pcheck_rand(rng) % 65536;
        ok = pcheck_buf_alloc(run, run->state, dev, size, &bufs[i], why, sizeof why) &&
             pcheck_buf_write(run, run->state, dev, &bufs[i], 0, (size_t)size, rng, why,
                              sizeof why);
    }
    /* Free every other one in shuffled order, allocate them again. */
    int order[PCHECK_MANY_BUFFERS];
    for (int i = 0; i < PCHECK_MANY_BUFFERS; i++)
        order[i] = i;
    for (int i = PCHECK_MANY_BUFFERS - 1; i > 0; i--) {
        int j = (int)(pcheck_rand(rng) % (uint64_t)(i + 1));
        int t = order[i];
        order[i] = order[j];
        order[j] = t;
    }
    for (int k = 0; k < PCHECK_MANY_BUFFERS / 2 && ok; k++)
        pcheck_buf_free(run, run->state, dev, &bufs[order[k]]);
    for (int k = 0; k < PCHECK_MANY_BUFFERS / 2 && ok; k++) {
        pcheck_buf *b = &bufs[order[k]];
        const uint64_t size = 1 + pcheck_rand(rng) % 131072;
        ok = pcheck_buf_alloc(run, run->state, dev, size, b, why, sizeof why) &&
             pcheck_buf_write(run, run->state, dev, b, 0, (size_t)size, rng, why, sizeof why);
    }
    for (int i = 0; i < PCHECK_MANY_BUFFERS && ok; i++)
        ok = pcheck_buf_matches(run, run->state, dev, &bufs[i], why, sizeof why);
    for (int i = 0; i < PCHECK_MANY_BUFFERS; i++)
        pcheck_buf_free(run, run->state, dev, &bufs[i]);
    if (ok)
        pcheck_add(run, "buffers", d, SY_PCHECK_PASS, name, "%d buffers, contents intact",
                   PCHECK_MANY_BUFFERS);
    else
        pcheck_add(run, "buffers", d, SY_PCHECK_FAIL, name, "%s", why);
}

/* memory_usage (optional) follows buffer_alloc and buffer_free: every
 * buffer adds at least its size (at most a page more, for rounding), a
 * freed one takes it back, an imported one adds nothing, and the peak
 * holds the most until a reset restarts it from the bytes in use. */
static void pcheck_memory_usage(pcheck_run *run, uint32_t dev, const sy_device_desc *desc,
                                uint64_t *rng)
{
    const int32_t d = (int32_t)dev;
    const char *name = "memory_usage counts buffer_alloc and buffer_free";
    if (!run->table.memory_usage) {
        pcheck_add(run, "buffers", d, SY_PCHECK_SKIP, name, "no memory_usage entry (optional)");
        return;
    }
    enum { N = 3, SLACK = 4096 };
    const uint64_t sizes[N] = {(1u << 20) + 3, 65536 + 1 + pcheck_rand(rng) % 4096, 5};
    pcheck_buf bufs[N];
    memset(bufs, 0, sizeof bufs);
    char why[200] = "";
    uint64_t base = 0, peak = 0, now = 0, total = 0;
    sy_status st = run->table.memory_usage(run->state, dev, true, &base, &peak);
    bool ok = st == SY_OK;
    if (!ok)
        snprintf(why, sizeof why, "memory_usage returned %s", sy_status_name(st));
    for (int i = 0; i < N && ok; i++) {
        ok = pcheck_buf_alloc(run, run->state, dev, sizes[i], &bufs[i], why, sizeof why);
        total += sizes[i];
    }
    if (ok && (st = run->table.memory_usage(run->state, dev, false, &now, &peak)) != SY_OK) {
        snprintf(why, sizeof why, "memory_usage returned %s", sy_status_name(st));
        ok = false;
    }
    if (ok && (now < base + total || now > base + total + N * SLACK || peak < now)) {
        snprintf(why, sizeof why, "%llu bytes in use and peak %llu after allocating %llu more "
                 "than %llu", (unsigned long long)now, (unsigned long long)peak,
                 (unsigned long long)total, (unsigned long long)base);
        ok = false;
    }
    const uint64_t high = now;
    if (ok) {
        pcheck_buf_free(run, run->state, dev, &bufs[0]);
        run->table.memory_usage(run->state, dev, false, &now, &peak);
        if (now > high - sizes[0] || peak < high) {
            snprintf(why, sizeof why, "after freeing %llu bytes: %llu in use (was %llu), peak "
                     "%llu", (unsigned long long)sizes[0], (unsigned long long)now,
                     (unsigned long long)high, (unsigned long long)peak);
            ok = false;
        }
    }
    if (ok && desc->unified_memory && run->table.buffer_import_host) {
        static unsigned char host[4096] __attribute__((aligned(64)));
        void *imp = NULL;
        uint64_t before = now;
        if (run->table.buffer_import_host(run->state, dev, host, sizeof host, &imp) == SY_OK) {
            run->table.memory_usage(run->state, dev, false, &now, NULL);
            run->table.buffer_free(run->state, dev, imp);
            if (now != before) {
                snprintf(why, sizeof why, "importing 4096 host bytes changed the bytes in use "
                         "from %llu to %llu", (unsigned long long)before,
                         (unsigned long long)now);
                ok = false;
            }
        }
    }
    for (int i = 0; i < N; i++)
        pcheck_buf_free(run, run->state, dev, &bufs[i]);
    if (ok) {
        run->table.memory_usage(run->state, dev, true, &now, &peak);
        uint64_t after_reset = 0;
        run->table.memory_usage(run->state, dev, false, NULL, &after_reset);
        if (now != base || peak < high || after_reset != now) {
            snprintf(why, sizeof why, "after freeing everything: %llu in use (%llu before), "
                     "peak %llu (%llu expected at least), %llu after a reset",
                     (unsigned long long)now, (unsigned long long)base,
                     (unsigned long long)peak, (unsigned long long)high,
                     (unsigned long long)after_reset);
            ok = false;
        }
    }
    if (ok)
        pcheck_add(run, "buffers", d, SY_PCHECK_PASS, name,
                   "%llu bytes in 3 buffers counted as %llu, returned on free, peak kept and "
                   "reset", (unsigned long long)total, (unsigned long long)(high - base));
    else
        pcheck_add(run, "buffers", d, SY_PCHECK_FAIL, name, "%s", why);
}

void pcheck_buffers(pcheck_run *run, uint32_t dev, const sy_device_desc *desc)
{
    const int32_t d = (int32_t)dev;
    uint64_t *rng = &run->rng;
    const int64_t live_before = pcheck_host_live_allocs(&run->host);
    uint64_t size = (1u << 20) + 3;
    if (desc->memory_bytes && size > desc->memory_bytes / 4)
        size = desc->memory_bytes / 4 + 3;

    pcheck_buf b;
    char why[160] = "";
    bool ok = pcheck_buf_alloc(run, run->state, dev, size, &b, why, sizeof why) &&
              pcheck_buf_write(run, run->state, dev, &b, 0, (size_t)size, rng, why, sizeof why) &&
              pcheck_buf_matches(run, run->state, dev, &b, why, sizeof why);
    if (!ok) {
        pcheck_add(run, "buffers", d, SY_PCHECK_FAIL, "alloc and copy round trip", "%s", why);
        pcheck_buf_free(run, run->state, dev, &b);
        return;
    }
    pcheck_add(run, "buffers", d, SY_PCHECK_PASS, "alloc and copy round trip", "%llu bytes",
               (unsigned long long)size);

    ok = pcheck_buf_write(run, run->state, dev, &b, 13, 1001, rng, why, sizeof why) &&
         pcheck_buf_write(run, run->state, dev, &b, size - 3, 3, rng, why, sizeof why);
    if (ok) {
        unsigned char got[517];
        sy_status st = run->table.copy_out(run->state, dev, b.handle, 101, got, sizeof got);
        if (st != SY_OK) {
            snprintf(why, sizeof why, "copy_out of 517 bytes at offset 101 failed: %s",
                     sy_status_name(st));
            ok = false;
        } else if (memcmp(got, b.model + 101, sizeof got) != 0) {
            snprintf(why, sizeof why, "copy_out of 517 bytes at offset 101 returned other bytes");
            ok = false;
        }
    }
    if (ok)
        pcheck_pass(run, "buffers", d, "copies at odd offsets and sizes");
    else
        pcheck_add(run, "buffers", d, SY_PCHECK_FAIL, "copies at odd offsets and sizes", "%s",
                   why);

    pcheck_bounds(run, dev, &b);
    pcheck_map(run, dev, &b, rng);
    pcheck_copy_device(run, dev, &b, rng);
    pcheck_buf_free(run, run->state, dev, &b);
    pcheck_import(run, dev, desc, rng);
    pcheck_zero_size(run, dev);
    pcheck_huge(run, dev, desc);
    pcheck_many(run, dev, rng);
    pcheck_memory_usage(run, dev, desc, rng);

    const int64_t live_after = pcheck_host_live_allocs(&run->host);
    if (live_after > live_before)
        pcheck_add(run, "buffers", d, SY_PCHECK_FAIL, "freed buffers return their host memory",
                   "%lld host allocation(s) more than before the buffer checks",
                   (long long)(live_after - live_before));
    else
        pcheck_pass(run, "buffers", d, "freed buffers return their host memory");
}

/* ---------------------------------------------------------------- threads */

typedef struct pcheck_worker {
    pcheck_run *run;
    void *state;
    uint32_t dev;
    const sy_device_desc *desc;
    int32_t case_index; /* a case the device supports, or -1 */
    uint64_t rng;
    bool ok;
    char why[512];
} pcheck_worker;

static void *pcheck_worker_main(void *arg)
{
    pcheck_worker *w = arg;
    w->ok = true;
    for (int i = 0; i < 40 && w->ok; i++) {
        pcheck_buf b;
        const uint64_t size = 1 + pcheck_rand(&w->rng) % 200000;
        w->ok = pcheck_buf_alloc(w->run, w->state, w->dev, size, &b, w->why, sizeof w->why) &&
                pcheck_buf_write(w->run, w->state, w->dev, &b, 0, (size_t)size, &w->rng, w->why,
                                 sizeof w->why) &&
                pcheck_buf_matches(w->run, w->state, w->dev, &b, w->why, sizeof w->why);
        if (b.handle)
            pcheck_buf_free(w->run, w->state, w->dev, &b);
    }
    for (int i = 0; i < 3 && w->ok && w->case_index >= 0; i++) {
        pcheck_case c;
        char err[160];
        if (!pcheck_case_build((uint32_t)w->case_index, &w->rng, w->desc->memory_bytes, &c, err,
                               sizeof err)) {
            snprintf(w->why, sizeof w->why, "building the case failed: %s", err);
            w->ok = false;
            break;
        }
        char detail[320];
        if (pcheck_case_run(w->run, w->state, w->dev, w->desc, &c, detail, sizeof detail) !=
            SY_PCHECK_PASS) {
            snprintf(w->why, sizeof w->why, "%s: %s", c.name, detail);
            w->ok = false;
        }
        pcheck_case_free(&c);
    }
    return NULL;
}

/* Index of the first case (not a supports-only one) the device runs. */
static int32_t pcheck_find_supported_case(pcheck_run *run, uint32_t dev,
                                          const sy_device_desc *desc)
{
    uint64_t rng = run->rng ^ 0x5eed;
    for (uint32_t i = 0; i < pcheck_case_count(); i++) {
        pcheck_case c;
        char err[160];
        if (!pcheck_case_build(i, &rng, desc->memory_bytes, &c, err, sizeof err))
            continue;
        sy_support why;
        memset(&why, 0, sizeof why);
        const bool yes = !c.supports_only && c.node->op == SY_OP_MATMUL &&
                         run->table.supports(run->state, dev, c.node, &why);
        pcheck_case_free(&c);
        if (yes)
            return (int32_t)i;
    }
    return -1;
}

void pcheck_threads(pcheck_run *run, uint32_t dev, const sy_device_desc *desc)
{
    const int32_t d = (int32_t)dev;
    const char *name = "two states on two threads at once";
    pcheck_worker w[2];
    memset(w, 0, sizeof w);
    const int32_t case_index = pcheck_find_supported_case(run, dev, desc);
    for (int i = 0; i < 2; i++) {
        w[i].run = run;
        w[i].dev = dev;
        w[i].desc = desc;
        w[i].case_index = case_index;
        w[i].rng = pcheck_rand(&run->rng) | 1;
        sy_status st = run->table.init(&run->host.host, &w[i].state);
        if (st != SY_OK) {
            pcheck_add(run, "threads", d, SY_PCHECK_FAIL, name, "init of state %d failed: %s",
                       i + 1, sy_status_name(st));
            if (i == 1)
                run->table.deinit(w[0].state);
            return;
        }
    }
    pthread_t tid[2];
    bool started[2] = {false, false};
    for (int i = 0; i < 2; i++)
        started[i] = pthread_create(&tid[i], NULL, pcheck_worker_main, &w[i]) == 0;
    for (int i = 0; i < 2; i++) {
        if (started[i])
            pthread_join(tid[i], NULL);
        else
            pcheck_worker_main(&w[i]);
    }
    for (int i = 0; i < 2; i++)
        run->table.deinit(w[i].state);
    if (!w[0].ok || !w[1].ok)
        pcheck_add(run, "threads", d, SY_PCHECK_FAIL, name, "thread %d: %s", w[0].ok ? 2 : 1,
                   w[0].ok ? w[1].why : w[0].why);
    else
        pcheck_add(run, "threads", d, SY_PCHECK_PASS, name,
                   "40 buffer round trips each%s", case_index >= 0 ? " and 3 matmuls" : "");
}
