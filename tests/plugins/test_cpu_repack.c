/* The CPU plugin's weight repacking, on the module opened directly: the
 * packed copy's results, its memory accounting, and what it does to the
 * file pages the weight lies in. */
#include <criterion/criterion.h>
#include <dirent.h>
#include <fcntl.h>
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/mman.h>
#include <sys/stat.h>
#include <unistd.h>


#include "repack_case.h"

/* Decode (1 column), a short prompt (3 columns) and prefill (RP_M
 * columns, the GEMM): with repacking on, the first matmul makes the packed
 * copy (memory_usage grows by the weight's bytes where the kernels pack
 * Q4_0: the avx512 tables), the results are those read as stored, bit for
 * bit, a write into the weight's buffer
 * drops the copy, and the next matmul packs the new bytes. */
Test(cpu_module, repacks_a_wrapped_weight_at_first_use_and_counts_it)
{
    void *so = open_module();
    static uint8_t wmem[RP_N * RP_K / 32 * 18] __attribute__((aligned(64)));
    const uint64_t wbytes = sizeof wmem;
    static const int64_t ms[] = {1, 3, RP_M}; /* rows kernel, 4-column dots, GEMM */
    for (size_t mi = 0; mi < sizeof ms / sizeof ms[0]; mi++) {
        const int64_t m = ms[mi];
        float want[RP_N * RP_M], got[RP_N * RP_M];
        repack_case c;
        rp_fill(wmem, 1);
        rp_open(&c, so, "0", wmem, m);
        rp_run(&c, want);
        rp_close(&c);

        rp_open(&c, so, "1", wmem, m);
        sy_device_desc desc = {.struct_size = sizeof desc};
        cr_assert_eq(c.d->describe(c.state, 0, &desc), SY_OK);
        /* Only the avx512 tables (avx512, avx512gfni) have packed kernels
         * (Q4_0, Q4_1). */
        const uint64_t grew_want = strstr(desc.driver, "(avx512") ? wbytes : 0;
        const uint64_t before = rp_in_use(&c);
        rp_run(&c, got);
        const uint64_t grew = rp_in_use(&c) - before;
        cr_assert_eq(grew, grew_want, "%s: memory_usage grew by %llu, not %llu", desc.driver,
                     (unsigned long long)grew, (unsigned long long)grew_want);
        /* The same arithmetic: the same bits (a greedy decode must not
         * depend on packing). */
        for (int i = 0; i < RP_N * m; i++)
            cr_assert_eq(got[i], want[i], "m=%lld y[%d]: %.9g repacked, %.9g as stored",
                         (long long)m, i, got[i], want[i]);
        rp_run(&c, got);
        cr_assert_eq(rp_in_use(&c) - before, grew, "the second matmul packs nothing more");
        /* Writable memory (not a file's) keeps its bytes. */
        static uint8_t kept[sizeof wmem];
        rp_fill(kept, 1);
        cr_assert_eq(memcmp(wmem, kept, sizeof kept), 0, "packing changed the caller's memory");

        /* New weights through copy_in: the old packed copy must go. */
        static uint8_t next[sizeof wmem];
        memcpy(next, wmem, sizeof next);
        rp_fill(next, 2);
        cr_assert_eq(c.d->copy_in(c.state, 0, c.wbuf, 0, next, wbytes), SY_OK);
        cr_assert_eq(rp_in_use(&c), before, "copy_in drops the packed copy");
        rp_run(&c, got);
        cr_assert_eq(rp_in_use(&c) - before, grew);
        rp_close(&c);

        float want2[RP_N * RP_M];
        rp_open(&c, so, "0", wmem, m); /* wmem now holds |next| */
        rp_run(&c, want2);
        cr_assert_eq(rp_in_use(&c), sy_tensor_nbytes(&c.x) + sy_tensor_nbytes(&c.y),
                     "SWITCHYARD_CPU_REPACK=0 packs nothing");
        rp_close(&c);
        for (int i = 0; i < RP_N * m; i++)
            cr_assert_float_eq(got[i], want2[i], 1e-5f * (fabsf(want2[i]) + 1.0f),
                               "m=%lld after copy_in y[%d]: %g repacked, %g as stored", (long long)m,
                               i, got[i], want2[i]);
    }
    rp_done(so);
}

#define RP_ROWS 3

/* GET_ROWS of rows 0, 5 and RP_N - 1 of |c|'s weight (as the token
 * embedding is read when it is also the output head) into |out|. */
static void rp_get_rows(repack_case *c, float *out)
{
    const int32_t ids[RP_ROWS] = {0, 5, RP_N - 1};
    sy_tensor it = {.dtype = SY_DTYPE_I32, .role = SY_ROLE_INPUT, .n_dims = 1, .ne = {RP_ROWS, 1, 1, 1}};
    sy_tensor ot = {.dtype = SY_DTYPE_F32, .role = SY_ROLE_ACTIVATION, .n_dims = 2,
                    .ne = {RP_K, RP_ROWS, 1, 1}};
    sy_tensor_set_contiguous_strides(&it);
    sy_tensor_set_contiguous_strides(&ot);
    void *ib = NULL, *ob = NULL;
    cr_assert_eq(c->d->buffer_alloc(c->state, 0, sizeof ids, &ib), SY_OK);
    cr_assert_eq(c->d->buffer_alloc(c->state, 0, sy_tensor_nbytes(&ot), &ob), SY_OK);
    cr_assert_eq(c->d->copy_in(c->state, 0, ib, 0, ids, sizeof ids), SY_OK);
    it.buffer = ib;
    it.data = c->d->buffer_host_ptr(c->state, 0, ib);
    ot.buffer = ob;
    ot.data = c->d->buffer_host_ptr(c->state, 0, ob);
    sy_node n = {.op = SY_OP_GET_ROWS, .n_inputs = 2, .inputs = {&c->w, &it}, .output = &ot};
    snprintf(n.name, sizeof n.name, "rows");
    sy_node *nodes[1] = {&n};
    cr_assert_eq(c->d->execute(c->state, 0, nodes, 1), SY_OK, "get_rows: %s", c->h.log);
    cr_assert_eq(c->d->copy_out(c->state, 0, ob, 0, out, sy_tensor_nbytes(&ot)), SY_OK);
    c->d->buffer_free(c->state, 0, ib);
    c->d->buffer_free(c->state, 0, ob);
}

/* True when the page holding |p| is mapped in this process (bit 63 of its
 * /proc/self/pagemap entry). */
static bool rp_page_mapped(const void *p)
{
    const uintptr_t page = (uintptr_t)sysconf(_SC_PAGESIZE);
    FILE *f = fopen("/proc/self/pagemap", "rb");
    cr_assert_not_null(f);
    uint64_t e = 0;
    cr_assert_eq(fseeko(f, (off_t)((uintptr_t)p / page * sizeof e), SEEK_SET), 0);
    cr_assert_eq(fread(&e, sizeof e, 1, f), 1u);
    fclose(f);
    return (e >> 63) & 1u;
}

/* A weight in a read-only private mapping of a file, as the runtime maps a
 * GGUF: once packed, its whole pages leave the mapping (the process keeps
 * one copy of the weight, not two), the results stay those of the weight
 * as stored, and the mapping still reads as the file.  One that was
 * written keeps its pages. */
Test(cpu_module, a_packed_weight_gives_its_file_pages_back)
{
    void *so = open_module();
    const size_t page = (size_t)sysconf(_SC_PAGESIZE);
    static uint8_t wmem[RP_N * RP_K / 32 * 18];
    rp_fill(wmem, 3);
    cr_assert_geq(sizeof wmem, 2 * page);
    char path[] = "/tmp/sy-repack-XXXXXX";
    const int fd = mkstemp(path);
    cr_assert_geq(fd, 0);
    unlink(path);
    cr_assert_eq(write(fd, wmem, sizeof wmem), (ssize_t)sizeof wmem);
    uint8_t *map = mmap(NULL, sizeof wmem, PROT_READ, MAP_PRIVATE, fd, 0);
    cr_assert_neq(map, MAP_FAILED);
    float want[RP_N], got[RP_N], want_rows[RP_K * RP_ROWS], got_rows[RP_K * RP_ROWS];
    repack_case c;
    rp_open(&c, so, "0", map, 1);
    rp_run(&c, want);
    rp_get_rows(&c, want_rows);
    rp_close(&c);
    cr_assert(rp_page_mapped(map) && rp_page_mapped(map + page), "the matmul read the mapping");

    /* A second plugin instance (a second session) packs the weight again
     * from the pages the first one released and read back. */
    for (int instance = 0; instance < 2; instance++) {
        rp_open(&c, so, "1", map, 1);
        sy_device_desc desc = {.struct_size = sizeof desc};
        cr_assert_eq(c.d->describe(c.state, 0, &desc), SY_OK);
        const bool packs = strstr(desc.driver, "(avx512") != NULL;
        for (int run = 0; run < 2; run++) {
            rp_run(&c, got);
            for (int i = 0; i < RP_N; i++)
                cr_assert_float_eq(got[i], want[i], 1e-5f * (fabsf(want[i]) + 1.0f),
                                   "run %d y[%d]: %g repacked, %g as stored", run, i, got[i], want[i]);
            for (size_t p = 0; p + page <= sizeof wmem; p += page)
                cr_assert_eq(rp_page_mapped(map + p), !packs,
                             "%s, instance %d run %d: page %zu is %s", desc.driver, instance, run,
                             p / page, packs ? "still mapped" : "no longer mapped");
        }
        /* Rows of a packed table come from the copy: the same values, and
         * the released pages stay released. */
        rp_get_rows(&c, got_rows);
        cr_assert_eq(memcmp(got_rows, want_rows, sizeof got_rows), 0, "get_rows differs when packed");
        for (size_t p = 0; p + page <= sizeof wmem; p += page)
            cr_assert_eq(rp_page_mapped(map + p), !packs, "after get_rows, page %zu is %s", p / page,
                         packs ? "mapped again" : "no longer mapped");
        rp_close(&c);
        cr_assert_eq(memcmp(map, wmem, sizeof wmem), 0, "the mapping reads as the file");
    }
    munmap(map, sizeof wmem);

    /* A private mapping written before it was made read-only holds its
     * writes in anonymous pages: they stay, and so do the bytes. */
    uint8_t *wrote = mmap(NULL, sizeof wmem, PROT_READ | PROT_WRITE, MAP_PRIVATE, fd, 0);
    cr_assert_neq(wrote, MAP_FAILED);
    rp_fill(wrote, 4);
    cr_assert_eq(mprotect(wrote, sizeof wmem, PROT_READ), 0);
    rp_open(&c, so, "1", wrote, 1);
    rp_run(&c, got);
    rp_close(&c);
    uint8_t want_bytes[sizeof wmem];
    rp_fill(want_bytes, 4);
    cr_assert_eq(memcmp(wrote, want_bytes, sizeof wmem), 0, "packing dropped written pages");
    munmap(wrote, sizeof wmem);
    close(fd);
    rp_done(so);
}

/* kB of |key| ("VmHWM:") in /proc/self/status. */
static uint64_t rp_status_kb(const char *key)
{
    FILE *f = fopen("/proc/self/status", "r");
    cr_assert_not_null(f);
    char line[256];
    uint64_t kb = 0;
    while (fgets(line, sizeof line, f))
        if (strncmp(line, key, strlen(key)) == 0)
            kb = strtoull(line + strlen(key), NULL, 10);
    fclose(f);
    cr_assert_gt(kb, 0u, "%s not in /proc/self/status", key);
    return kb;
}

/* A one-column matmul of the first |n| Q4_0 rows of |k| at |map| (the
 * weight's buffer imported, as the runtime imports a model mapping) on a
 * plugin instance; x = ((i * 37) % 19) / 9 - 1. */
typedef struct gemv_case {
    sy_tensor w, x, y;
    void *wb, *xb, *yb;
    sy_node node;
    sy_node *nodes[1];
} gemv_case;

static void gemv_open(gemv_case *g, const sy_plugin_desc *d, void *state, uint8_t *map, int k,
                      int n)
{
    memset(g, 0, sizeof *g);
    g->w = (sy_tensor){.dtype = SY_DTYPE_Q4_0, .role = SY_ROLE_WEIGHT, .n_dims = 2,
                       .ne = {k, n, 1, 1}};
    g->x = (sy_tensor){.dtype = SY_DTYPE_F32, .role = SY_ROLE_INPUT, .n_dims = 2,
                       .ne = {k, 1, 1, 1}};
    g->y = (sy_tensor){.dtype = SY_DTYPE_F32, .role = SY_ROLE_ACTIVATION, .n_dims = 2,
                       .ne = {n, 1, 1, 1}};
    sy_tensor_set_contiguous_strides(&g->w);
    sy_tensor_set_contiguous_strides(&g->x);
    sy_tensor_set_contiguous_strides(&g->y);
    cr_assert_eq(d->buffer_import_host(state, 0, map, sy_tensor_nbytes(&g->w), &g->wb), SY_OK);
    cr_assert_eq(d->buffer_alloc(state, 0, sy_tensor_nbytes(&g->x), &g->xb), SY_OK);
    cr_assert_eq(d->buffer_alloc(state, 0, sy_tensor_nbytes(&g->y), &g->yb), SY_OK);
    g->w.buffer = g->wb;
    g->w.data = map;
    g->x.buffer = g->xb;
    g->x.data = d->buffer_host_ptr(state, 0, g->xb);
    g->y.buffer = g->yb;
    g->y.data = d->buffer_host_ptr(state, 0, g->yb);
    for (int i = 0; i < k; i++)
        ((float *)g->x.data)[i] = (float)((i * 37) % 19) / 9.0f - 1.0f;
    snprintf(g->w.name, sizeof g->w.name, "big");
    g->node = (sy_node){.op = SY_OP_MATMUL, .n_inputs = 2, .inputs = {&g->w, &g->x},
                        .output = &g->y};
    snprintf(g->node.name, sizeof g->node.name, "big_matmul");
    g->nodes[0] = &g->node;
}

static void gemv_close(gemv_case *g, const sy_plugin_desc *d, void *state)
{
    d->buffer_free(state, 0, g->wb);
    d->buffer_free(state, 0, g->xb);
    d->buffer_free(state, 0, g->yb);
}

/* Packing a large weight that lies in a file mapping raises the process's
 * peak by about one copy of it, not two: the file pages under the rows
 * already copied leave while the rest is packed.  (Packed whole and
 * released at the end, the 1B model's 35 MiB output table had raised the
 * first step's peak resident set by 35 MiB.)  The results are those of the
 * weight as stored, and the mapping still reads as the file. */
Test(cpu_module, packing_a_large_mapped_weight_holds_it_once)
{
    enum { K = 4096, N = 8192 }; /* Q4_0: 18 MiB */
    const size_t bytes = (size_t)N * (K / 32) * 18;
    uint8_t *wmem = malloc(bytes);
    cr_assert_not_null(wmem);
    for (size_t i = 0; i < bytes; i++)
        wmem[i] = (uint8_t)((i * 131u) >> 3);
    for (size_t b = 0; b < bytes / 18; b++) {
        const uint16_t d = (uint16_t)(0x2000 + (b * 97) % 1024); /* small positive f16 */
        memcpy(wmem + 18 * b, &d, sizeof d);
    }
    char path[] = "/tmp/sy-repack-big-XXXXXX";
    const int fd = mkstemp(path);
    cr_assert_geq(fd, 0);
    unlink(path);
    cr_assert_eq(write(fd, wmem, bytes), (ssize_t)bytes);
    uint8_t *map = mmap(NULL, bytes, PROT_READ, MAP_PRIVATE, fd, 0);
    cr_assert_neq(map, MAP_FAILED);
    /* The page cache holds the file; the process has mapped none of it. */
    uint64_t sum = 0;
    for (size_t i = 0; i < bytes; i++)
        sum += wmem[i];
    cr_assert_gt(sum, 0u);

    void *so = open_module();
    direct_host h;
    void *state = NULL;
    /* The plugin's code pages are file pages of the process too: an
     * instance of its own packs and runs the first 64 rows first, so that
     * the pages of the code the measured pack runs are in before the peak
     * is reset (an AddressSanitizer build's pack and matmul code, first
     * run inside the window, raised it 2 MiB more after the attention
     * kernels grew the plugin's text by 0.9 MiB). */
    const sy_plugin_desc *d = rp_instance(so, "1", &h, &state);
    gemv_case g;
    gemv_open(&g, d, state, map, K, 64);
    cr_assert_eq(d->execute(state, 0, g.nodes, 1), SY_OK, "warm-up execute: %s", h.log);
    gemv_close(&g, d, state);
    d->deinit(state);
    cr_assert_eq(d->init(&h.host, &state), SY_OK, "init: %s", h.log);
    gemv_open(&g, d, state, map, K, N);
    cr_assert_eq(sy_tensor_nbytes(&g.w), bytes);

    /* Reset the peak to the resident set now (clear_refs 5), then pack. */
    FILE *cr = fopen("/proc/self/clear_refs", "w");
    cr_assert_not_null(cr);
    cr_assert_eq(fputs("5", cr) >= 0, true);
    cr_assert_eq(fclose(cr), 0);
    const uint64_t rss0 = rp_status_kb("VmRSS:");
    cr_assert_eq(d->execute(state, 0, g.nodes, 1), SY_OK, "execute: %s", h.log);
    const uint64_t rise = rp_status_kb("VmHWM:") - rss0;
    sy_device_desc desc = {.struct_size = sizeof desc};
    cr_assert_eq(d->describe(state, 0, &desc), SY_OK);
    uint64_t in_use = 0;
    cr_assert_eq(d->memory_usage(state, 0, false, &in_use, NULL), SY_OK);
    cr_log_info("%s: peak rose %llu KiB for a %zu KiB weight (plugin memory %llu KiB)", desc.driver,
                (unsigned long long)rise, bytes / 1024, (unsigned long long)in_use / 1024);
    cr_assert_leq(rise * 1024, bytes + bytes / 4,
                  "%s: packing a %zu KiB weight raised the peak by %llu KiB", desc.driver,
                  bytes / 1024, (unsigned long long)rise);

    /* Against the weight as stored: the plugin without packing, on the
     * same mapping (read back from the page cache). */
    float *got = malloc(N * sizeof *got), *want = malloc(N * sizeof *want);
    cr_assert(got && want);
    memcpy(got, g.y.data, N * sizeof *got);
    gemv_close(&g, d, state);
    d->deinit(state);
    setenv("SWITCHYARD_CPU_REPACK", "0", 1);
    cr_assert_eq(d->init(&h.host, &state), SY_OK, "init: %s", h.log);
    gemv_open(&g, d, state, map, K, N);
    cr_assert_eq(d->execute(state, 0, g.nodes, 1), SY_OK, "execute: %s", h.log);
    memcpy(want, g.y.data, N * sizeof *want);
    for (int i = 0; i < N; i++)
        cr_assert_float_eq(got[i], want[i], 1e-5f * (fabsf(want[i]) + 1.0f),
                           "y[%d]: %g packed, %g as stored", i, got[i], want[i]);
    cr_assert_eq(memcmp(map, wmem, bytes), 0, "the mapping reads as the file");
    gemv_close(&g, d, state);
    d->deinit(state);
    free(got);
    free(want);
    munmap(map, bytes);
    close(fd);
    free(wmem);
    rp_done(so);
}

/* Q8_0 weights are copied as stored (their kernels read that layout), for
 * the copy's huge pages: on the avx512 tables the first matmul grows
 * memory_usage by both weights' bytes, and the results are those read
 * from the file's bytes, bit for bit, for decode, a few columns and the
 * GEMM. */
Test(cpu_module, copies_q8_0_weights_as_stored)
{
    void *so = open_module();
    static uint8_t wa[RP_N * RP_K / 32 * 34] __attribute__((aligned(64)));
    static uint8_t wb[RP_N * RP_K / 32 * 34] __attribute__((aligned(64)));
    uint8_t *const wmem[2] = {wa, wb};
    const sy_dtype types[2] = {SY_DTYPE_Q8_0, SY_DTYPE_Q8_0};
    for (int k = 0; k < 2; k++)
        for (size_t i = 0; i < sizeof wa; i++)
            wmem[k][i] = (uint8_t)((i * 151u + 11u * (unsigned)k) >> 2);
    for (size_t b = 0; b < sizeof wa / 34; b++) /* small positive f16 scales */
        for (int k = 0; k < 2; k++) {
            const uint16_t f = (uint16_t)(0x2000 + (b * 89 + (size_t)k) % 1024);
            memcpy(wmem[k] + b * 34, &f, sizeof f);
        }
    static const int64_t ms[] = {1, 3, RP_M}; /* rows kernel, few-column dots, GEMM */
    for (size_t mi = 0; mi < sizeof ms / sizeof ms[0]; mi++) {
        const int64_t m = ms[mi];
        float want0[RP_N * RP_M], want1[RP_N * RP_M], got0[RP_N * RP_M], got1[RP_N * RP_M];
        uint64_t grew_off = 0, grew_on = 0;
        char driver[SY_NAME_MAX];
        rp_group_run_counted(so, "0", types, wmem, m, want0, want1, &grew_off, NULL);
        rp_group_run_counted(so, "1", types, wmem, m, got0, got1, &grew_on, driver);
        cr_assert_eq(grew_off, 0, "m=%lld: memory_usage grew by %llu with repacking off",
                     (long long)m, (unsigned long long)grew_off);
        const uint64_t want_grew = strstr(driver, "(avx512") ? 2 * sizeof wa : 0;
        cr_assert_eq(grew_on, want_grew, "%s, m=%lld: memory_usage grew by %llu, not %llu", driver,
                     (long long)m, (unsigned long long)grew_on, (unsigned long long)want_grew);
        for (int i = 0; i < RP_N * m; i++) {
            cr_assert_eq(got0[i], want0[i], "m=%lld y0[%d]", (long long)m, i);
            cr_assert_eq(got1[i], want1[i], "m=%lld y1[%d]", (long long)m, i);
        }
    }
    rp_done(so);
}

/* A matmul group whose members' weights differ in type (legal in GGUF:
 * e.g. attn_k in Q4_1 beside attn_q in Q4_0): with a few columns each
 * packed member's rows go back to the file's layout in lane scratch, which
 * must be reserved for that member, not only for the first (an unpacked
 * Q8_0 first member left none: a write through NULL; a Q4_0 one, too few
 * bytes for Q4_1 rows).  Results bit for bit as with repacking off. */
Test(cpu_module, a_matmul_group_of_mixed_weight_types_runs_as_its_members_alone)
{
    void *so = open_module();
    static uint8_t wa[RP_N * RP_K / 32 * 34] __attribute__((aligned(64)));
    static uint8_t wb[RP_N * RP_K / 32 * 34] __attribute__((aligned(64)));
    static const sy_dtype pairs[][2] = {{SY_DTYPE_Q8_0, SY_DTYPE_Q4_1},
                                        {SY_DTYPE_Q4_0, SY_DTYPE_Q4_1},
                                        {SY_DTYPE_Q8_0, SY_DTYPE_Q4_0}};
    for (size_t p = 0; p < sizeof pairs / sizeof pairs[0]; p++) {
        uint8_t *const wmem[2] = {wa, wb};
        for (int k = 0; k < 2; k++) {
            const size_t bytes = RP_N * rp_row_bytes(pairs[p][k]);
            const size_t block = rp_row_bytes(pairs[p][k]) / (RP_K / 32);
            for (size_t i = 0; i < bytes; i++)
                wmem[k][i] = (uint8_t)((i * 131u + 7u * (unsigned)k) >> 1);
            for (size_t b = 0; b < bytes / block; b++) { /* small positive f16 scales */
                const uint16_t f = (uint16_t)(0x2000 + (b * 97 + (size_t)k) % 1024);
                memcpy(wmem[k] + b * block, &f, sizeof f);
                if (pairs[p][k] == SY_DTYPE_Q4_1)
                    memcpy(wmem[k] + b * block + 2, &f, sizeof f);
            }
        }
        for (int64_t m = 2; m <= 3; m++) { /* the few-column dot path, not the GEMM */
            float want0[RP_N * RP_M], want1[RP_N * RP_M], got0[RP_N * RP_M], got1[RP_N * RP_M];
            rp_group_run(so, "0", pairs[p], wmem, m, want0, want1);
            rp_group_run(so, "1", pairs[p], wmem, m, got0, got1);
            for (int i = 0; i < RP_N * m; i++) {
                cr_assert_eq(got0[i], want0[i], "pair %zu m=%lld y0[%d]", p, (long long)m, i);
                cr_assert_eq(got1[i], want1[i], "pair %zu m=%lld y1[%d]", p, (long long)m, i);
            }
        }
    }
    rp_done(so);
}

