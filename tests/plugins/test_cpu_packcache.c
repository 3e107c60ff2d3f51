/* The CPU plugin's pack cache (SWITCHYARD_CPU_PACK_CACHE), on the module
 * opened directly: later instances read what an earlier one packed, and
 * damage, links and overlapping weights never give a wrong result. */
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

/* One plugin instance on the weight at |map| with the pack cache in
 * SWITCHYARD_CPU_PACK_CACHE: its matmul gives |want| bit for bit, and its
 * log names |said| (where the avx512 tables pack; NULL: nothing to find). */
static void rp_cache_run(void *so, const uint8_t *map, const float *want, const char *said,
                         const char *not_said)
{
    repack_case c;
    float got[RP_N];
    rp_open(&c, so, "1", (uint8_t *)map, 1);
    sy_device_desc desc = {.struct_size = sizeof desc};
    cr_assert_eq(c.d->describe(c.state, 0, &desc), SY_OK);
    const bool packs = strstr(desc.driver, "(avx512") != NULL;
    const uint64_t before = rp_in_use(&c);
    rp_run(&c, got);
    cr_assert_eq(rp_in_use(&c) - before, packs ? (uint64_t)RP_N * RP_K / 32 * 18 : 0u,
                 "a cached copy is counted as a packed one");
    for (int i = 0; i < RP_N; i++)
        cr_assert_eq(got[i], want[i], "y[%d]: %.9g through the pack cache, %.9g as stored", i,
                     got[i], want[i]);
    if (packs && said)
        cr_assert(strstr(c.h.log, said), "the log does not say '%s':\n%s", said, c.h.log);
    if (packs && not_said)
        cr_assert(!strstr(c.h.log, not_said), "the log says '%s':\n%s", not_said, c.h.log);
    rp_close(&c);
}

/* Writes |n| bytes of |bytes| to a new file |model| and maps it read-only
 * and private, as the runtime maps a GGUF; the file stays open in *out_fd. */
static uint8_t *pc_map_model(const char *model, const uint8_t *bytes, size_t n, int *out_fd)
{
    const int fd = open(model, O_RDWR | O_CREAT | O_TRUNC, 0644);
    cr_assert_geq(fd, 0);
    cr_assert_eq(write(fd, bytes, n), (ssize_t)n);
    uint8_t *map = mmap(NULL, n, PROT_READ, MAP_PRIVATE, fd, 0);
    cr_assert_neq(map, MAP_FAILED);
    *out_fd = fd;
    return map;
}

/* The Q4_0 matmul of the weight at |map| with repacking off, into |want|. */
static void pc_as_stored(void *so, uint8_t *map, float *want)
{
    repack_case c;
    rp_open(&c, so, "0", map, 1);
    rp_run(&c, want);
    rp_close(&c);
}

/* The paths of the .bin and the .idx in the folder |cache| (the only
 * files there); false when there is no folder (no table packs here). */
static bool pc_cache_files(const char *cache, char bin[600], char idx[600])
{
    bin[0] = idx[0] = '\0';
    DIR *d = opendir(cache);
    if (!d)
        return false;
    for (struct dirent *e; (e = readdir(d));) {
        if (strstr(e->d_name, ".bin"))
            snprintf(bin, 600, "%s/%s", cache, e->d_name);
        if (strstr(e->d_name, ".idx"))
            snprintf(idx, 600, "%s/%s", cache, e->d_name);
    }
    closedir(d);
    cr_assert(bin[0] && idx[0], "the cache folder holds a .bin and an .idx");
    return true;
}

/* SWITCHYARD_CPU_PACK_CACHE: the first instance packs the weight into a
 * file in the folder (made for it) and records it; a later one reads it
 * from there; a damaged copy or a torn record costs a new pack, not a
 * wrong result; a folder that cannot be made leaves packing in memory.
 * Every result is the weight's as stored, bit for bit. */
Test(cpu_module, the_pack_cache_serves_later_instances_and_survives_damage)
{
    void *so = open_module();
    static uint8_t wmem[RP_N * RP_K / 32 * 18];
    rp_fill(wmem, 5);
    char dir[] = "/tmp/sy-packcache-XXXXXX";
    cr_assert_not_null(mkdtemp(dir));
    char model[256], cache[256], bad[300];
    snprintf(model, sizeof model, "%s/model.gguf", dir);
    snprintf(cache, sizeof cache, "%s/packs", dir);
    snprintf(bad, sizeof bad, "%s/sub", model); /* under a regular file */
    int fd;
    uint8_t *map = pc_map_model(model, wmem, sizeof wmem, &fd);
    float want[RP_N];
    pc_as_stored(so, map, want);

    setenv("SWITCHYARD_CPU_PACK_CACHE", cache, 1);
    rp_cache_run(so, map, want, "packed into the pack cache", "read from the pack cache");
    char bin[600], idx[600];
    const bool packs = pc_cache_files(cache, bin, idx);
    if (packs) {
        cr_assert_eq(rp_file_size(bin), (long long)sizeof wmem, "the .bin is as long as the model");
        const long long rec = rp_file_size(idx);
        cr_assert_gt(rec, 0, "the weight is recorded");

        rp_cache_run(so, map, want, "read from the pack cache", "packed into");
        cr_assert_eq(rp_file_size(idx), rec, "reading records nothing");

        /* A damaged copy: packed again, and recorded again. */
        const int bfd = open(bin, O_RDWR);
        cr_assert_geq(bfd, 0);
        static const uint8_t junk[16] = {1, 2, 3, 4, 5, 6, 7, 8, 9, 10, 11, 12, 13, 14, 15, 16};
        cr_assert_eq(pwrite(bfd, junk, sizeof junk, 100), (ssize_t)sizeof junk);
        close(bfd);
        rp_cache_run(so, map, want, "does not match its record", NULL);
        cr_assert_eq(rp_file_size(idx), 2 * rec, "the new pack is recorded");
        rp_cache_run(so, map, want, "read from the pack cache", "packed into");

        /* A torn record: the weight is packed again. */
        cr_assert_eq(truncate(idx, rec / 2), 0);
        rp_cache_run(so, map, want, "packed into the pack cache", "read from the pack cache");
        cr_assert_eq(rp_file_size(idx), rec / 2 + rec);
    }
    /* Where no avx512 table packs, nothing is made. */
    cr_assert(packs || rp_file_size(cache) < 0, "no cache folder without packed kernels");

    setenv("SWITCHYARD_CPU_PACK_CACHE", bad, 1);
    rp_cache_run(so, map, want, "not used for a model file", "packed into the pack cache");
    rp_cache_run(so, map, want, "repacked weight", NULL);

    munmap(map, sizeof wmem);
    close(fd);
    if (bin[0])
        unlink(bin);
    if (idx[0])
        unlink(idx);
    rmdir(cache);
    unlink(model);
    rmdir(dir);
    rp_done(so);
}

/* The pack cache writes in place, so it keeps off what is not its own: a
 * symbolic link or a second hard link at the .bin's name (the file it
 * names is left as it was), and an .idx too large to be records (a sparse
 * terabyte held the first step for minutes).  Two weights over the same
 * model-file bytes (legal GGUF) would share the .bin's bytes there: the
 * second is packed in memory, and both give their results as stored. */
Test(cpu_module, the_pack_cache_keeps_out_links_huge_indexes_and_overlapping_weights)
{
    void *so = open_module();
    enum { BYTES = RP_N * RP_K / 32 * 20 }; /* the Q4_1 weight's; the Q4_0's is shorter */
    static uint8_t wmem[BYTES];
    /* Every byte below 0x3c: any two read as an f16 scale are finite. */
    for (int i = 0; i < BYTES; i++)
        wmem[i] = (uint8_t)(((unsigned)i * 131u >> 1) % 0x3cu);
    char dir[] = "/tmp/sy-packlinks-XXXXXX";
    cr_assert_not_null(mkdtemp(dir));
    char model[256], cache[256], victim[256];
    snprintf(model, sizeof model, "%s/model.gguf", dir);
    snprintf(cache, sizeof cache, "%s/packs", dir);
    snprintf(victim, sizeof victim, "%s/victim.txt", dir);
    int fd;
    uint8_t *map = pc_map_model(model, wmem, sizeof wmem, &fd);

    /* One weight: its files, then links in their place. */
    float want[RP_N];
    pc_as_stored(so, map, want);
    setenv("SWITCHYARD_CPU_PACK_CACHE", cache, 1);
    rp_cache_run(so, map, want, NULL, NULL);
    char bin[600], idx[600];
    if (pc_cache_files(cache, bin, idx)) { /* where an avx512 table packs */
        static const char text[] = "not a pack cache file\n";
        for (int k = 0; k < 2; k++) {
            FILE *v = fopen(victim, "w");
            cr_assert_not_null(v);
            fputs(text, v);
            fclose(v);
            unlink(bin); /* the cache's (k = 0), or the link left below */
            unlink(idx);
            cr_assert_eq(k == 0 ? symlink(victim, bin) : link(victim, bin), 0);
            rp_cache_run(so, map, want, "not used for a model file", "packed into the pack cache");
            cr_assert_eq(rp_file_size(victim), (long long)strlen(text),
                         "the file a %s names was written", k == 0 ? "symlink" : "hard link");
            cr_assert_eq(unlink(bin), 0);
            unlink(idx);
        }
        rp_cache_run(so, map, want, "packed into the pack cache", NULL);
        cr_assert_eq(truncate(idx, 1ll << 40), 0); /* sparse */
        rp_cache_run(so, map, want, "larger than any model's records", "read from the pack cache");
        cr_assert_eq(unlink(bin), 0);
        cr_assert_eq(unlink(idx), 0);
    }

    /* Two weights over the same bytes, as one group: Q4_0 and Q4_1. */
    static const sy_dtype pair[2] = {SY_DTYPE_Q4_0, SY_DTYPE_Q4_1};
    uint8_t *const both[2] = {map, map};
    float want0[RP_N], want1[RP_N], got0[RP_N], got1[RP_N];
    unsetenv("SWITCHYARD_CPU_PACK_CACHE");
    rp_group_run(so, "0", pair, both, 1, want0, want1);
    setenv("SWITCHYARD_CPU_PACK_CACHE", cache, 1);
    for (int run = 0; run < 2; run++) { /* writing the cache, then reading it */
        rp_group_run(so, "1", pair, both, 1, got0, got1);
        for (int i = 0; i < RP_N; i++) {
            cr_assert_eq(got0[i], want0[i], "run %d y0[%d]", run, i);
            cr_assert_eq(got1[i], want1[i], "run %d y1[%d]", run, i);
        }
    }

    munmap(map, sizeof wmem);
    close(fd);
    DIR *d = opendir(cache);
    if (d) {
        for (struct dirent *e; (e = readdir(d));) {
            char p[600];
            snprintf(p, sizeof p, "%s/%s", cache, e->d_name);
            if (e->d_name[0] != '.')
                unlink(p);
        }
        closedir(d);
    }
    rmdir(cache);
    unlink(victim);
    unlink(model);
    rmdir(dir);
    rp_done(so);
}
