/* Probe: the cache is reused while the fingerprint matches, measured again
 * when it changes, replaced with a warning when corrupt or foreign; JSON
 * round trip; auto-configuration rules.  Every test probes with the quick
 * sizes, with the cache in a fresh directory, on the CPU plugin. */
#include <criterion/criterion.h>
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include "probe.h"

typedef struct log_capture {
    int warnings;
    char last[512];
} log_capture;

static void capture(void *user, sy_log_level level, const char *msg)
{
    log_capture *c = user;
    if (level == SY_LOG_WARN) {
        c->warnings++;
        snprintf(c->last, sizeof c->last, "%s", msg);
    }
}

static char cache_dir[256];
static char cache_file[300];

static void make_cache_dir(void)
{
    snprintf(cache_dir, sizeof cache_dir, "/tmp/sy-probe-test-XXXXXX");
    cr_assert_not_null(mkdtemp(cache_dir));
    setenv("XDG_CACHE_HOME", cache_dir, 1);
    snprintf(cache_file, sizeof cache_file, "%s/switchyard/probe.json", cache_dir);
}

static void remove_cache_dir(void)
{
    char sw[300];
    unlink(cache_file);
    snprintf(sw, sizeof sw, "%s/switchyard", cache_dir);
    rmdir(sw);
    rmdir(cache_dir);
}

static sy_runtime *runtime(log_capture *c)
{
    sy_runtime_options o;
    sy_runtime_options_init(&o);
    o.log_fn = capture;
    o.log_user = c;
    o.plugins = "cpu";
    sy_runtime *rt = NULL;
    cr_assert_eq(sy_runtime_create(&o, &rt), SY_OK);
    cr_assert_geq(sy_runtime_device_count(rt), 1u, "the CPU plugin was not found");
    return rt;
}

static sy_probe_options quick(const char *extra)
{
    sy_probe_options o;
    sy_probe_options_init(&o);
    o.quick = true;
    o.fingerprint_extra = extra;
    return o;
}

TestSuite(probe, .init = make_cache_dir, .fini = remove_cache_dir);

Test(probe, measures_once_and_then_reuses_the_cache)
{
    log_capture c = {0};
    sy_runtime *rt = runtime(&c);
    sy_probe_options o = quick(NULL);
    sy_probe *a = calloc(1, sizeof *a), *b = calloc(1, sizeof *b);
    cr_assert_eq(sy_runtime_probe(rt, &o, a), SY_OK, "%s", sy_runtime_last_error(rt));
    cr_expect_not(a->from_cache);
    cr_expect_eq(access(cache_file, R_OK), 0, "no cache file at %s", cache_file);
    cr_expect_gt(a->n_host_bw, 0u);
    cr_expect_gt(a->host_bw[0].read_bps, 0.0);
    cr_expect_eq(a->n_devices, sy_runtime_device_count(rt));
    cr_expect_gt(a->devices[0].bandwidth_bps, 0.0, "%s", a->devices[0].error);
    cr_expect_gt(a->devices[0].flops, 0.0, "%s", a->devices[0].error);
    cr_assert_eq(sy_runtime_probe(rt, &o, b), SY_OK);
    cr_expect(b->from_cache, "the second probe measured again");
    cr_expect_str_eq(a->fingerprint, b->fingerprint);
    cr_expect_eq(a->host_bw[0].read_bps, b->host_bw[0].read_bps);
    cr_expect_eq(c.warnings, 0, "unexpected warning: %s", c.last);
    free(a);
    free(b);
    sy_runtime_destroy(rt);
}

Test(probe, measures_again_when_the_fingerprint_changes)
{
    log_capture c = {0};
    sy_runtime *rt = runtime(&c);
    sy_probe_options o1 = quick("driver 1"), o2 = quick("driver 2");
    sy_probe *a = calloc(1, sizeof *a), *b = calloc(1, sizeof *b);
    cr_assert_eq(sy_runtime_probe(rt, &o1, a), SY_OK);
    cr_assert_eq(sy_runtime_probe(rt, &o2, b), SY_OK);
    cr_expect_not(b->from_cache, "a changed fingerprint reused the old cache");
    cr_expect_str_neq(a->fingerprint, b->fingerprint);
    /* The file now holds the new machine's results. */
    cr_assert_eq(sy_runtime_probe(rt, &o2, a), SY_OK);
    cr_expect(a->from_cache);
    cr_expect_eq(c.warnings, 0, "a foreign fingerprint is not corruption: %s", c.last);
    free(a);
    free(b);
    sy_runtime_destroy(rt);
}

static void corrupt_cache_is_replaced(const char *content)
{
    log_capture c = {0};
    sy_runtime *rt = runtime(&c);
    sy_probe_options o = quick(NULL);
    sy_probe *p = calloc(1, sizeof *p);
    cr_assert_eq(sy_runtime_probe(rt, &o, p), SY_OK);
    FILE *f = fopen(cache_file, "w");
    cr_assert_not_null(f);
    fputs(content, f);
    fclose(f);
    cr_assert_eq(sy_runtime_probe(rt, &o, p), SY_OK);
    cr_expect_not(p->from_cache);
    cr_expect_eq(c.warnings, 1, "expected one warning, got %d", c.warnings);
    cr_expect(strstr(c.last, "corrupt") != NULL, "warning: %s", c.last);
    cr_assert_eq(sy_runtime_probe(rt, &o, p), SY_OK);
    cr_expect(p->from_cache, "the corrupt file was not replaced");
    free(p);
    sy_runtime_destroy(rt);
}

Test(probe, replaces_a_corrupt_cache_with_a_warning)
{
    corrupt_cache_is_replaced("{\"schema\": \"switchyard-probe\", \"format_ver");
}

Test(probe, replaces_a_foreign_json_file_with_a_warning)
{
    corrupt_cache_is_replaced("{\"schema\": \"something-else\", \"fingerprint\": \"x\"}\n");
}

Test(probe, json_round_trips)
{
    log_capture c = {0};
    sy_runtime *rt = runtime(&c);
    sy_probe_options o = quick(NULL);
    o.no_cache = true;
    sy_probe *a = calloc(1, sizeof *a), *b = calloc(1, sizeof *b);
    cr_assert_eq(sy_runtime_probe(rt, &o, a), SY_OK);
    char *json = NULL;
    cr_assert_eq(sy_probe_to_json(a, &json), SY_OK);
    char err[256];
    cr_assert_eq(sy_probe_from_json(json, strlen(json), b, err, sizeof err), SY_OK, "%s", err);
    cr_expect_str_eq(a->fingerprint, b->fingerprint);
    cr_expect_eq(a->n_devices, b->n_devices);
    /* cJSON prints 15 significant digits when they read back within an
     * epsilon, so the last bit may differ. */
    cr_expect_float_eq(a->devices[0].flops, b->devices[0].flops, a->devices[0].flops * 1e-12);
    cr_expect_eq(a->l3_bytes, b->l3_bytes);
    free(json);
    free(a);
    free(b);
    sy_runtime_destroy(rt);
}

Test(probe, measures_positive_host_bandwidth_for_rising_thread_counts_up_to_every_core)
{
    log_capture c = {0};
    sy_runtime *rt = runtime(&c);
    sy_probe_options o = quick(NULL);
    o.no_cache = true;
    sy_probe *a = calloc(1, sizeof *a), *b = calloc(1, sizeof *b);
    cr_assert_eq(sy_runtime_probe(rt, &o, a), SY_OK, "%s", sy_runtime_last_error(rt));
    cr_assert_gt(a->n_host_bw, 0u);
    cr_expect_eq(a->host_bw[0].threads, 1u);
    cr_expect_eq(a->host_bw[a->n_host_bw - 1].threads, a->cores_allowed,
                 "the last count is not every core");
    for (uint32_t i = 0; i < a->n_host_bw; i++) {
        const sy_probe_host_bw *e = &a->host_bw[i];
        if (i)
            cr_expect_gt(e->threads, a->host_bw[i - 1].threads, "counts do not rise at %u", i);
        cr_expect(isfinite(e->read_bps) && e->read_bps > 0, "%u threads: read %g", e->threads,
                  e->read_bps);
        cr_expect(isfinite(e->copy_bps) && e->copy_bps > 0, "%u threads: copy %g", e->threads,
                  e->copy_bps);
    }
    /* The JSON gives back the same table. */
    char *json = NULL, err[256];
    cr_assert_eq(sy_probe_to_json(a, &json), SY_OK);
    cr_assert_eq(sy_probe_from_json(json, strlen(json), b, err, sizeof err), SY_OK, "%s", err);
    cr_assert_eq(b->n_host_bw, a->n_host_bw);
    for (uint32_t i = 0; i < a->n_host_bw; i++) {
        cr_expect_eq(b->host_bw[i].threads, a->host_bw[i].threads);
        cr_expect_float_eq(b->host_bw[i].read_bps, a->host_bw[i].read_bps, a->host_bw[i].read_bps * 1e-12);
    }
    free(json);
    free(a);
    free(b);
    sy_runtime_destroy(rt);
}

/* |edit| spoils the host bandwidth table of a valid probe; the reader
 * must refuse the JSON written from it, naming the table. */
static void rejects_host_table(void (*edit)(sy_probe *))
{
    sy_probe *a = calloc(1, sizeof *a), *b = calloc(1, sizeof *b);
    a->cores = a->cores_allowed = 4;
    a->n_host_bw = 3;
    static const uint32_t th[3] = {1, 2, 4};
    for (int i = 0; i < 3; i++)
        a->host_bw[i] = (sy_probe_host_bw){.threads = th[i], .read_bps = 1e10 * (i + 1), .copy_bps = 2e10};
    char *json = NULL, err[256] = "";
    cr_assert_eq(sy_probe_to_json(a, &json), SY_OK);
    cr_assert_eq(sy_probe_from_json(json, strlen(json), b, err, sizeof err), SY_OK,
                 "the unspoilt table was refused: %s", err);
    free(json);
    edit(a);
    cr_assert_eq(sy_probe_to_json(a, &json), SY_OK);
    cr_expect_neq(sy_probe_from_json(json, strlen(json), b, err, sizeof err), SY_OK);
    cr_expect(strstr(err, "host_memory.bandwidth") != NULL, "error: %s", err);
    free(json);
    free(a);
    free(b);
}

static void repeat_a_count(sy_probe *p) { p->host_bw[2].threads = 2; }
static void fall_back_a_count(sy_probe *p) { p->host_bw[1].threads = 8; }
static void zero_a_read(sy_probe *p) { p->host_bw[1].read_bps = 0; }
static void zero_a_copy(sy_probe *p) { p->host_bw[0].copy_bps = 0; }
static void start_past_one_thread(sy_probe *p) { p->host_bw[0].threads = 0; }

Test(probe, refuses_a_host_table_whose_thread_counts_do_not_rise)
{
    rejects_host_table(repeat_a_count);
    rejects_host_table(fall_back_a_count);
    rejects_host_table(start_past_one_thread);
}

Test(probe, refuses_a_host_table_with_an_unmeasured_bandwidth)
{
    rejects_host_table(zero_a_read);
    rejects_host_table(zero_a_copy);
}

Test(probe, read_loop_reads_every_byte_of_any_length)
{
    /* A change to any byte changes the sum, whichever loop (AVX-512,
     * AVX2, portable) this CPU runs; lengths cover the vector loop and
     * each kind of tail. */
    static const size_t lengths[] = {0, 1, 31, 32, 127, 128, 255, 256, 4096 + 200};
    unsigned char *buf = malloc(4096 + 256);
    cr_assert_not_null(buf);
    for (size_t i = 0; i < 4096 + 256; i++)
        buf[i] = (unsigned char)(i * 131u + 7u);
    for (size_t k = 0; k < sizeof lengths / sizeof lengths[0]; k++) {
        size_t n = lengths[k];
        uint64_t base = sy__probe_read(buf, n);
        for (size_t at = 0; at < n; at++) {
            buf[at] ^= 0x5A;
            uint64_t changed = sy__probe_read(buf, n);
            buf[at] ^= 0x5A;
            cr_expect_neq(changed, base, "%s loop: byte %zu of %zu not read", sy__probe_read_isa(),
                          at, n);
            if (changed == base)
                break;
        }
        /* Bytes past the end are not read. */
        buf[n] ^= 0x5A;
        cr_expect_eq(sy__probe_read(buf, n), base, "%s loop read past %zu bytes", sy__probe_read_isa(), n);
        buf[n] ^= 0x5A;
    }
    free(buf);
}

/* A runtime on the CPU plugin and, with |testdev|, the test device too
 * (reference kernels, host-mapped buffers). */
static sy_runtime *runtime_of(log_capture *c, bool testdev)
{
    sy_runtime_options o;
    sy_runtime_options_init(&o);
    o.log_fn = capture;
    o.log_user = c;
    o.plugin_path = testdev ? SY_TEST_CPU_PLUGIN ":" SY_TEST_PLUGIN_DIR "/testdev.so"
                            : SY_TEST_CPU_PLUGIN;
    o.no_default_paths = true;
    sy_runtime *rt = NULL;
    cr_assert_eq(sy_runtime_create(&o, &rt), SY_OK);
    cr_assert_eq(sy_runtime_device_count(rt), testdev ? 2u : 1u);
    return rt;
}

Test(probe, keeps_each_devices_entry_across_runtimes_with_other_devices)
{
    log_capture c = {0};
    sy_runtime *cpu = runtime_of(&c, false), *both = runtime_of(&c, true);
    sy_probe_options o = quick(NULL);
    sy_probe *p = calloc(1, sizeof *p);
    cr_assert_eq(sy_runtime_probe(cpu, &o, p), SY_OK, "%s", sy_runtime_last_error(cpu));
    cr_expect_not(p->from_cache);
    /* The CPU and the host come from the cache; only testdev and the two
     * links are measured. */
    cr_assert_eq(sy_runtime_probe(both, &o, p), SY_OK, "%s", sy_runtime_last_error(both));
    cr_expect_not(p->from_cache);
    cr_assert_eq(p->n_devices, 2u);
    cr_expect_not(p->devices[0].measured_now, "the cpu was measured again");
    cr_expect(p->devices[1].measured_now);
    cr_expect_str_eq(p->devices[1].name, "testdev");
    cr_expect_gt(p->devices[1].flops, 0.0, "%s", p->devices[1].error);
    /* Neither runtime measures again: the file holds both. */
    cr_assert_eq(sy_runtime_probe(cpu, &o, p), SY_OK);
    cr_expect(p->from_cache, "the cpu-only runtime measured again");
    cr_expect_eq(p->n_devices, 1u);
    cr_expect_eq(p->n_links, 0u);
    cr_assert_eq(sy_runtime_probe(both, &o, p), SY_OK);
    cr_expect(p->from_cache, "the two-device runtime measured again");
    cr_expect_eq(c.warnings, 0, "unexpected warning: %s", c.last);
    free(p);
    sy_runtime_destroy(both);
    sy_runtime_destroy(cpu);
}

Test(probe, measures_copies_between_every_pair_of_devices)
{
    log_capture c = {0};
    sy_runtime *rt = runtime_of(&c, true);
    sy_probe_options o = quick(NULL);
    o.no_cache = true;
    sy_probe *p = calloc(1, sizeof *p);
    cr_assert_eq(sy_runtime_probe(rt, &o, p), SY_OK, "%s", sy_runtime_last_error(rt));
    cr_assert_eq(p->n_links, 2u);
    for (uint32_t i = 0; i < p->n_links; i++) {
        const sy_probe_link *l = &p->links[i];
        cr_expect_str_eq(l->error, "");
        cr_expect_str_neq(l->from, l->to);
        /* Both sides map host memory: the executor copies straight into
         * the destination. */
        cr_expect_str_eq(l->method, "copy_out", "%s->%s by %s", l->from, l->to, l->method);
        for (uint32_t k = 0; k < SY_PROBE_N_XFER_SIZES; k++) {
            cr_expect_gt(l->bytes[k], 0u);
            cr_expect_gt(l->seconds[k], 0.0);
        }
        cr_expect_gt(l->bps, 0.0);
        cr_expect_str_eq(l->from_fingerprint, p->devices[strcmp(l->from, "cpu") ? 1 : 0].fingerprint);
    }
    /* And they survive the JSON round trip. */
    char *json = NULL;
    cr_assert_eq(sy_probe_to_json(p, &json), SY_OK);
    sy_probe *q = calloc(1, sizeof *q);
    char err[256];
    cr_assert_eq(sy_probe_from_json(json, strlen(json), q, err, sizeof err), SY_OK, "%s", err);
    cr_expect_eq(q->n_links, 2u);
    cr_expect_str_eq(q->links[1].method, p->links[1].method);
    cr_expect_float_eq(q->links[0].bps, p->links[0].bps, p->links[0].bps * 1e-12);
    free(json);
    free(q);
    free(p);
    sy_runtime_destroy(rt);
}

Test(probe, cache_only_says_not_found_until_the_first_probe)
{
    log_capture c = {0};
    sy_runtime *rt = runtime(&c);
    sy_probe_options o = quick(NULL);
    o.cache_only = true;
    sy_probe *p = calloc(1, sizeof *p);
    cr_expect_eq(sy_runtime_probe(rt, &o, p), SY_E_NOT_FOUND);
    cr_expect_neq(access(cache_file, F_OK), 0, "a cache-only query wrote %s", cache_file);
    o.cache_only = false;
    cr_assert_eq(sy_runtime_probe(rt, &o, p), SY_OK);
    o.cache_only = true;
    cr_expect_eq(sy_runtime_probe(rt, &o, p), SY_OK);
    cr_expect(p->from_cache);
    free(p);
    sy_runtime_destroy(rt);
}

Test(probe, resolves_the_cache_path_from_the_environment_on_every_call)
{
    char path[1024];
    setenv("XDG_CACHE_HOME", "/xdg/cache", 1);
    setenv("HOME", "/home/someone", 1);
    cr_assert_eq(sy_probe_default_cache_path(path, sizeof path), SY_OK);
    cr_expect_str_eq(path, "/xdg/cache/switchyard/probe.json");
    /* A relative XDG_CACHE_HOME is invalid by the XDG rules: ignored. */
    setenv("XDG_CACHE_HOME", "relative/cache", 1);
    cr_assert_eq(sy_probe_default_cache_path(path, sizeof path), SY_OK);
    cr_expect_str_eq(path, "/home/someone/.cache/switchyard/probe.json");
    setenv("XDG_CACHE_HOME", "", 1);
    cr_assert_eq(sy_probe_default_cache_path(path, sizeof path), SY_OK);
    cr_expect_str_eq(path, "/home/someone/.cache/switchyard/probe.json");
    /* Without HOME the password database still names a home. */
    unsetenv("HOME");
    unsetenv("XDG_CACHE_HOME");
    sy_status st = sy_probe_default_cache_path(path, sizeof path);
    cr_expect(st == SY_OK || st == SY_E_NOT_FOUND);
    if (st == SY_OK)
        cr_expect(strstr(path, "/.cache/switchyard/probe.json") != NULL, "%s", path);
    char tiny[8];
    setenv("XDG_CACHE_HOME", "/xdg/cache", 1);
    cr_expect_eq(sy_probe_default_cache_path(tiny, sizeof tiny), SY_E_LIMIT);
}

static sy_probe *fake_probe(uint64_t avail)
{
    sy_probe *p = calloc(1, sizeof *p);
    p->cores = p->cores_allowed = 8;
    p->memory_total = avail * 2;
    p->memory_available = avail;
    p->n_host_bw = 4;
    static const double bw[4] = {10e9, 18e9, 20e9, 20.5e9};
    static const uint32_t th[4] = {1, 2, 4, 8};
    for (int i = 0; i < 4; i++)
        p->host_bw[i] = (sy_probe_host_bw){.threads = th[i], .read_bps = bw[i], .copy_bps = bw[i]};
    return p;
}

Test(autoconfig, uses_the_trained_context_up_to_the_cap_when_memory_allows)
{
    sy_probe *p = fake_probe(64ull << 30);
    sy_autoconfig_model m = {.weight_bytes = 100u << 20, .n_layer = 30, .n_head_kv = 3,
                             .head_dim = 64, .n_ctx_train = 8192};
    sy_autoconfig c;
    cr_assert_eq(sy_probe_autoconfig(p, &m, &c), SY_OK);
    cr_expect_eq(c.n_ctx, 4096u, "%s", c.why_ctx);
    /* 4 of 8 cores reach 97% of the best bandwidth: trimmed to 4. */
    cr_expect_eq(c.n_threads, 4u, "%s", c.why_threads);
    free(p);
}

Test(autoconfig, shrinks_the_context_when_memory_is_short)
{
    /* 2 GiB available, 1.2 GiB of weights, KV 256 KiB per token (f16). */
    sy_probe *p = fake_probe(2ull << 30);
    sy_autoconfig_model m = {.weight_bytes = 1200ull << 20, .n_layer = 32, .n_head_kv = 8,
                             .head_dim = 128, .n_ctx_train = 32768};
    sy_autoconfig c;
    cr_assert_eq(sy_probe_autoconfig(p, &m, &c), SY_OK);
    cr_expect_lt(c.n_ctx, 4096u, "%s", c.why_ctx);
    cr_expect_geq(c.n_ctx, 256u);
    cr_expect_eq(c.kv_type, SY_DTYPE_F16, "%s", c.why_kv);
    free(p);
}

Test(autoconfig, keeps_f32_kv_only_when_it_is_cheap)
{
    sy_probe *p = fake_probe(64ull << 30);
    /* Tiny KV against large weights: f32 costs little. */
    sy_autoconfig_model m = {.weight_bytes = 4ull << 30, .n_layer = 4, .n_head_kv = 1,
                             .head_dim = 64, .n_ctx_train = 2048};
    sy_autoconfig c;
    cr_assert_eq(sy_probe_autoconfig(p, &m, &c), SY_OK);
    cr_expect_eq(c.kv_type, SY_DTYPE_F32, "%s", c.why_kv);
    free(p);
}

Test(autoconfig, keeps_every_core_when_the_weights_fit_in_the_last_level_cache)
{
    sy_probe *p = fake_probe(64ull << 30);
    p->l3_bytes = 256ull << 20;
    /* Decode reads the weights from the cache, not memory: the bandwidth
     * that saturates at 4 threads does not bound it. */
    sy_autoconfig_model m = {.weight_bytes = 100u << 20, .n_layer = 30, .n_head_kv = 3,
                             .head_dim = 64, .n_ctx_train = 8192};
    sy_autoconfig c;
    cr_assert_eq(sy_probe_autoconfig(p, &m, &c), SY_OK);
    cr_expect_eq(c.n_threads, 8u, "%s", c.why_threads);
    free(p);
}

Test(autoconfig, never_trims_a_small_machine_below_four_threads)
{
    /* Two cores where one already reaches 95% of the bandwidth: prefill
     * still needs both. */
    sy_probe *p = fake_probe(64ull << 30);
    p->cores = p->cores_allowed = 2;
    p->n_host_bw = 2;
    p->host_bw[0] = (sy_probe_host_bw){.threads = 1, .read_bps = 3.8e9, .copy_bps = 7e9};
    p->host_bw[1] = (sy_probe_host_bw){.threads = 2, .read_bps = 4.0e9, .copy_bps = 8e9};
    sy_autoconfig_model m = {.weight_bytes = 4ull << 30, .n_layer = 32, .n_head_kv = 8,
                             .head_dim = 128, .n_ctx_train = 4096};
    sy_autoconfig c;
    cr_assert_eq(sy_probe_autoconfig(p, &m, &c), SY_OK);
    cr_expect_eq(c.n_threads, 2u, "%s", c.why_threads);
    free(p);
}
