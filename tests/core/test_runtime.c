/* Runtime: options, logging, queries, topology, and the single-device
 * executor run against the fake devices of tests/core/broken_plugins
 * (testdev: unified memory with zero-copy import; opaquedev: buffers the
 * host cannot map; fault_alloc / fault_execute: injected failures;
 * unmapped: zero-copy import but no host pointers). */
#include <criterion/criterion.h>
#include <criterion/redirect.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "switchyard/switchyard.h"

#define PLUGIN(file) SY_TEST_PLUGIN_DIR "/" file

/* Under AddressSanitizer, fails a test that leaks.  Each test calls it
 * last: Criterion ignores both the worker's exit-time leak report and
 * assertions in a .fini hook. */
#if defined(__SANITIZE_ADDRESS__)
#define SY_TEST_LEAK_CHECK 1
#elif defined(__has_feature)
#if __has_feature(address_sanitizer)
#define SY_TEST_LEAK_CHECK 1
#endif
#endif
#ifdef SY_TEST_LEAK_CHECK
#include <sanitizer/lsan_interface.h>
static void check_leaks(void)
{
    cr_assert_eq(__lsan_do_recoverable_leak_check(), 0, "memory leaked (report on stderr)");
}
#else
static void check_leaks(void)
{
}
#endif

/* Device indices in the order the test runtime loads them. */
enum { DEV_TESTDEV, DEV_OPAQUE, DEV_FAULT_ALLOC, DEV_FAULT_EXECUTE, DEV_UNMAPPED, DEV_COUNT };

typedef struct log_capture {
    char text[32768];
    size_t len;
} log_capture;

static const char *const level_names[] = {"error", "warn", "info", "debug"};

static void capture_log(void *user, sy_log_level level, const char *msg)
{
    log_capture *cap = user;
    int n = snprintf(cap->text + cap->len, sizeof cap->text - cap->len, "%s: %s\n",
                     (unsigned)level <= SY_LOG_DEBUG ? level_names[level] : "?", msg);
    if (n > 0)
        cap->len += (size_t)n < sizeof cap->text - cap->len ? (size_t)n
                                                            : sizeof cap->text - cap->len - 1;
}

static void clear_log(log_capture *cap)
{
    cap->len = 0;
    cap->text[0] = '\0';
}

static unsigned count_lines(const char *text, const char *line)
{
    unsigned n = 0;
    for (const char *at = strstr(text, line); at; at = strstr(at + 1, line))
        n++;
    return n;
}

/* A runtime with the fake devices, logging into |cap|. */
static sy_runtime *fake_runtime(log_capture *cap)
{
    sy_runtime_options o;
    sy_runtime_options_init(&o);
    o.plugin_path = PLUGIN("testdev.so") ":" PLUGIN("opaquedev.so") ":" PLUGIN(
        "fault_alloc.so") ":" PLUGIN("fault_execute.so") ":" PLUGIN("unmapped.so");
    o.no_default_paths = true;
    o.log_fn = capture_log;
    o.log_user = cap;
    sy_runtime *rt = NULL;
    cr_assert_eq(sy_runtime_create(&o, &rt), SY_OK);
    cr_assert_eq(sy_runtime_device_count(rt), DEV_COUNT, "log:\n%s", cap->text);
    return rt;
}

/* A runtime with no plugin at all and the default stderr logger. */
static sy_runtime *bare_runtime(void)
{
    sy_runtime_options o;
    sy_runtime_options_init(&o);
    o.plugin_path = "";
    o.no_default_paths = true;
    sy_runtime *rt = NULL;
    cr_assert_eq(sy_runtime_create(&o, &rt), SY_OK);
    return rt;
}

/* Reads what is left of |f| into |buf|, terminated. */
static const char *read_all(FILE *f, char *buf, size_t size)
{
    size_t n = fread(buf, 1, size - 1, f);
    buf[n] = '\0';
    return buf;
}

/* ------------------------------------------------------------ runtime */

Test(runtime, options_init_sets_the_struct_size_and_the_warn_level)
{
    sy_runtime_options o;
    memset(&o, 0xff, sizeof o);
    sy_runtime_options_init(&o);
    cr_assert_eq(o.struct_size, sizeof o);
    cr_assert_null(o.plugin_path);
    cr_assert_not(o.no_default_paths);
    cr_assert_null(o.log_fn);
    cr_assert_eq(o.log_level, SY_LOG_WARN);
    check_leaks();
}

Test(runtime, create_rejects_bad_arguments_and_leaves_the_out_pointer_null)
{
    cr_assert_eq(sy_runtime_create(NULL, NULL), SY_E_INVALID_ARG);
    sy_runtime_options o;
    sy_runtime_options_init(&o);
    o.struct_size = 0;
    sy_runtime *rt = (sy_runtime *)&o;
    cr_assert_eq(sy_runtime_create(&o, &rt), SY_E_INVALID_ARG);
    cr_assert_null(rt);
    sy_runtime_options_init(&o);
    o.log_level = (sy_log_level)7;
    cr_assert_eq(sy_runtime_create(&o, &rt), SY_E_INVALID_ARG);
    cr_assert_null(rt);
    check_leaks();
}

Test(runtime, create_with_null_options_uses_the_defaults)
{
    unsetenv("SWITCHYARD_PLUGIN_PATH");
    sy_runtime *rt = NULL;
    cr_assert_eq(sy_runtime_create(NULL, &rt), SY_OK);
    cr_assert_not_null(rt);
    cr_assert_str_eq(sy_runtime_last_error(rt), "");
    sy_runtime_destroy(rt);
    sy_runtime_destroy(NULL);
    cr_assert_str_eq(sy_runtime_last_error(NULL), "");
    check_leaks();
}

Test(runtime, default_logger_prints_warnings_and_above_to_stderr_with_a_prefix,
     .init = cr_redirect_stderr)
{
    unsetenv("SWITCHYARD_LOG");
    sy_runtime *rt = bare_runtime();
    sy_runtime_log(rt, SY_LOG_WARN, "disk %d is slow", 3);
    sy_runtime_log(rt, SY_LOG_ERROR, "gone");
    sy_runtime_log(rt, SY_LOG_INFO, "not shown");
    sy_runtime_log(rt, SY_LOG_DEBUG, "not shown either");
    sy_runtime_destroy(rt);
    fflush(stderr);
    cr_assert_stderr_eq_str("switchyard: warn: disk 3 is slow\nswitchyard: error: gone\n");
    check_leaks();
}

Test(runtime, switchyard_log_environment_variable_overrides_the_level,
     .init = cr_redirect_stderr)
{
    setenv("SWITCHYARD_LOG", "debug", 1);
    sy_runtime *rt = bare_runtime();
    /* Read once at create: later changes do not apply. */
    setenv("SWITCHYARD_LOG", "error", 1);
    sy_runtime_log(rt, SY_LOG_DEBUG, "fine detail");
    sy_runtime_destroy(rt);
    fflush(stderr);
    char buf[8192];
    const char *err = read_all(cr_get_redirected_stderr(), buf, sizeof buf);
    cr_assert_not_null(strstr(err, "switchyard: debug: fine detail\n"), "stderr:\n%s", err);
    check_leaks();
}

Test(runtime, an_unknown_switchyard_log_value_is_reported_and_ignored,
     .init = cr_redirect_stderr)
{
    setenv("SWITCHYARD_LOG", "chatty", 1);
    sy_runtime *rt = bare_runtime();
    sy_runtime_log(rt, SY_LOG_INFO, "hidden");
    sy_runtime_destroy(rt);
    fflush(stderr);
    cr_assert_stderr_eq_str("switchyard: warn: ignoring SWITCHYARD_LOG='chatty': expected error, "
                            "warn, info or debug\n");
    check_leaks();
}

Test(runtime, a_caller_logger_receives_every_level)
{
    log_capture cap = {0};
    sy_runtime_options o;
    sy_runtime_options_init(&o);
    o.plugin_path = "";
    o.no_default_paths = true;
    o.log_fn = capture_log;
    o.log_user = &cap;
    sy_runtime *rt = NULL;
    cr_assert_eq(sy_runtime_create(&o, &rt), SY_OK);
    clear_log(&cap);
    sy_runtime_log(rt, SY_LOG_DEBUG, "d%d", 1);
    sy_runtime_log(rt, SY_LOG_ERROR, "e");
    cr_assert_str_eq(cap.text, "debug: d1\nerror: e\n");
    sy_runtime_destroy(rt);
    check_leaks();
}

Test(runtime, a_log_message_longer_than_the_stack_buffer_arrives_whole)
{
    log_capture cap = {0};
    sy_runtime_options o;
    sy_runtime_options_init(&o);
    o.plugin_path = "";
    o.no_default_paths = true;
    o.log_fn = capture_log;
    o.log_user = &cap;
    sy_runtime *rt = NULL;
    cr_assert_eq(sy_runtime_create(&o, &rt), SY_OK);
    clear_log(&cap);
    char big[3000];
    memset(big, 'a', sizeof big - 1);
    big[sizeof big - 1] = '\0';
    sy_runtime_log(rt, SY_LOG_WARN, "%s!", big);
    cr_assert_eq(cap.len, strlen("warn: ") + strlen(big) + 2);
    cr_assert_eq(cap.text[cap.len - 2], '!');
    sy_runtime_destroy(rt);
    check_leaks();
}

Test(runtime, topology_is_one_line_with_cores_and_memory)
{
    sy_runtime *rt = bare_runtime();
    char line[512];
    cr_assert_eq(sy_runtime_query_topology(rt, line, sizeof line), SY_OK);
    cr_assert_null(strchr(line, '\n'));
    cr_assert_not_null(strstr(line, " core"), "%s", line);
    cr_assert_not_null(strstr(line, " PU"), "%s", line);
    cr_assert_not_null(strstr(line, "NUMA node"), "%s", line);
    cr_assert_not_null(strstr(line, "memory"), "%s", line);
    char tiny[8] = "junk";
    cr_assert_eq(sy_runtime_query_topology(rt, tiny, sizeof tiny), SY_E_LIMIT);
    cr_assert_str_eq(tiny, "");
    cr_assert_eq(sy_runtime_query_topology(rt, NULL, 4), SY_E_INVALID_ARG);
    sy_runtime_destroy(rt);
    check_leaks();
}

/* ---------------------------------------------------------- execution */

typedef struct ew_graph {
    sy_graph *g;
    sy_tensor *x, *w, *y, *z, *s;
    float xs[32], ws[32], out[32];
} ew_graph;

/* s = ((x + w) * x) * 2 + 1 over [8,4]; x an input, w a weight. */
static void build_elementwise(ew_graph *e)
{
    memset(e, 0, sizeof *e);
    for (int i = 0; i < 32; i++) {
        e->xs[i] = (float)(i % 7) - 3.0f;
        e->ws[i] = 0.5f * (float)(i % 5);
        e->out[i] = -999.0f;
    }
    int64_t ne[2] = {8, 4};
    cr_assert_eq(sy_graph_create(&e->g), SY_OK);
    cr_assert_eq(sy_graph_add_tensor(e->g, "x", SY_DTYPE_F32, 2, ne, SY_ROLE_INPUT, e->xs, &e->x),
                 SY_OK);
    cr_assert_eq(sy_graph_add_tensor(e->g, "w", SY_DTYPE_F32, 2, ne, SY_ROLE_WEIGHT, e->ws, &e->w),
                 SY_OK);
    sy_tensor *xw[2] = {e->x, e->w};
    cr_assert_eq(sy_graph_add_node(e->g, SY_OP_ADD, "y", xw, 2, NULL, &e->y), SY_OK, "%s",
                 sy_graph_last_error(e->g));
    sy_tensor *yx[2] = {e->y, e->x};
    cr_assert_eq(sy_graph_add_node(e->g, SY_OP_MUL, "z", yx, 2, NULL, &e->z), SY_OK);
    sy_op_params p = {.f = {2.0f, 1.0f}};
    cr_assert_eq(sy_graph_add_node(e->g, SY_OP_SCALE, "s", &e->z, 1, &p, &e->s), SY_OK);
    cr_assert_eq(sy_graph_mark_output(e->g, e->s), SY_OK);
    cr_assert_eq(sy_graph_set_host_data(e->g, e->s, e->out), SY_OK);
    cr_assert_eq(sy_graph_freeze(e->g), SY_OK, "%s", sy_graph_last_error(e->g));
}

static void assert_elementwise_result(const ew_graph *e)
{
    for (int i = 0; i < 32; i++) {
        float want = ((e->xs[i] + e->ws[i]) * e->xs[i]) * 2.0f + 1.0f;
        cr_assert_float_eq(e->out[i], want, 1e-6f, "out[%d] = %g, want %g", i, (double)e->out[i],
                           (double)want);
    }
}

/* Every tensor points at its host data again and holds no device buffer. */
static void assert_restored(const sy_graph *g)
{
    for (uint32_t i = 0; i < sy_graph_tensor_count(g); i++) {
        const sy_tensor *t = sy_graph_tensor(g, i);
        cr_assert_eq(t->data, sy_graph_host_data(g, t), "tensor '%s'", t->name);
        cr_assert_null(t->buffer, "tensor '%s'", t->name);
        cr_assert_eq(t->offset, 0, "tensor '%s'", t->name);
    }
}

Test(execute, runs_a_graph_on_a_unified_device_and_writes_the_output_to_host_data)
{
    log_capture cap = {0};
    sy_runtime *rt = fake_runtime(&cap);
    ew_graph e;
    build_elementwise(&e);
    cr_assert_eq(sy_runtime_execute_on(rt, e.g, DEV_TESTDEV), SY_OK, "%s",
                 sy_runtime_last_error(rt));
    assert_elementwise_result(&e);
    assert_restored(e.g);
    sy_graph_destroy(e.g);
    sy_runtime_destroy(rt);
    cr_assert_null(strstr(cap.text, "leaked"), "log:\n%s", cap.text);
    check_leaks();
}

Test(execute, runs_the_same_graph_on_an_opaque_device_by_copying_in_and_out)
{
    log_capture cap = {0};
    sy_runtime *rt = fake_runtime(&cap);
    ew_graph e;
    build_elementwise(&e);
    cr_assert_eq(sy_runtime_execute_on(rt, e.g, DEV_OPAQUE), SY_OK, "%s\nlog:\n%s",
                 sy_runtime_last_error(rt), cap.text);
    assert_elementwise_result(&e);
    assert_restored(e.g);
    sy_graph_destroy(e.g);
    sy_runtime_destroy(rt);
    cr_assert_null(strstr(cap.text, "leaked"), "log:\n%s", cap.text);
    check_leaks();
}

Test(execute, imports_host_leaves_zero_copy_only_where_memory_is_unified)
{
    log_capture cap = {0};
    sy_runtime *rt = fake_runtime(&cap);
    ew_graph e;
    build_elementwise(&e);
    clear_log(&cap);
    cr_assert_eq(sy_runtime_execute_on(rt, e.g, DEV_TESTDEV), SY_OK);
    /* x and w are imported; y, z and s get buffers of 8 * 4 floats. */
    cr_assert_eq(count_lines(cap.text, "debug: testdev: import 128\n"), 2, "log:\n%s", cap.text);
    cr_assert_eq(count_lines(cap.text, "debug: testdev: alloc 128\n"), 3, "log:\n%s", cap.text);
    /* View nodes and all go to execute as one list. */
    cr_assert_eq(count_lines(cap.text, "debug: testdev: execute 3 nodes\n"), 1);
    clear_log(&cap);
    cr_assert_eq(sy_runtime_execute_on(rt, e.g, DEV_OPAQUE), SY_OK);
    cr_assert_eq(count_lines(cap.text, "import"), 0, "log:\n%s", cap.text);
    cr_assert_eq(count_lines(cap.text, "debug: opaquedev: alloc 128\n"), 5, "log:\n%s", cap.text);
    sy_graph_destroy(e.g);
    sy_runtime_destroy(rt);
    check_leaks();
}

/* Runs |g| on |dev| and checks its output |out| (n floats, host data of a
 * marked output) equals what the reference runner writes there. */
static void assert_matches_reference(sy_runtime *rt, sy_graph *g, uint32_t dev, float *out,
                                     size_t n)
{
    cr_assert_eq(sy_graph_run_reference(g), SY_OK);
    float *want = malloc(n * sizeof *want);
    cr_assert_not_null(want);
    memcpy(want, out, n * sizeof *want);
    for (size_t i = 0; i < n; i++)
        out[i] = -12345.0f;
    cr_assert_eq(sy_runtime_execute_on(rt, g, dev), SY_OK, "%s", sy_runtime_last_error(rt));
    for (size_t i = 0; i < n; i++)
        cr_assert_eq(out[i], want[i], "device %u: out[%zu] = %g, reference %g", dev, i,
                     (double)out[i], (double)want[i]);
    free(want);
    assert_restored(g);
}

Test(execute, places_views_on_their_root_storage_and_matches_the_reference_runner)
{
    log_capture cap = {0};
    sy_runtime *rt = fake_runtime(&cap);
    float xs[32], ws[48], bs[24], out[12];
    for (int i = 0; i < 32; i++)
        xs[i] = 0.25f * (float)(i % 9) - 1.0f;
    for (int i = 0; i < 48; i++)
        ws[i] = 0.125f * (float)(i % 11) - 0.5f;
    for (int i = 0; i < 24; i++)
        bs[i] = (float)i;
    sy_graph *g;
    cr_assert_eq(sy_graph_create(&g), SY_OK);
    int64_t xne[2] = {8, 4}, wne[2] = {8, 6}, bne[1] = {24};
    sy_tensor *x, *w, *b, *m, *r, *o, *v, *s;
    cr_assert_eq(sy_graph_add_tensor(g, "x", SY_DTYPE_F32, 2, xne, SY_ROLE_INPUT, xs, &x), SY_OK);
    cr_assert_eq(sy_graph_add_tensor(g, "w", SY_DTYPE_F32, 2, wne, SY_ROLE_WEIGHT, ws, &w), SY_OK);
    cr_assert_eq(sy_graph_add_tensor(g, "b", SY_DTYPE_F32, 1, bne, SY_ROLE_WEIGHT, bs, &b), SY_OK);
    sy_tensor *wx[2] = {w, x};
    cr_assert_eq(sy_graph_add_node(g, SY_OP_MATMUL, "m", wx, 2, NULL, &m), SY_OK, "%s",
                 sy_graph_last_error(g));
    sy_op_params flat = {.i = {24, 1, 1, 1}};
    cr_assert_eq(sy_graph_add_node(g, SY_OP_RESHAPE, "r", &m, 1, &flat, &r), SY_OK, "%s",
                 sy_graph_last_error(g));
    sy_tensor *rb[2] = {r, b};
    cr_assert_eq(sy_graph_add_node(g, SY_OP_ADD, "o", rb, 2, NULL, &o), SY_OK);
    /* The second half of o: a view at byte 48. */
    sy_op_params half = {.i = {12, 1, 1, 1, 48, 48, 48, 48}};
    cr_assert_eq(sy_graph_add_node(g, SY_OP_VIEW, "v", &o, 1, &half, &v), SY_OK, "%s",
                 sy_graph_last_error(g));
    cr_assert_eq(v->view_src, o);
    sy_op_params p = {.f = {3.0f, 0.0f}};
    cr_assert_eq(sy_graph_add_node(g, SY_OP_SCALE, "s", &v, 1, &p, &s), SY_OK);
    cr_assert_eq(sy_graph_mark_output(g, s), SY_OK);
    cr_assert_eq(sy_graph_set_host_data(g, s, out), SY_OK);
    cr_assert_eq(sy_graph_freeze(g), SY_OK, "%s", sy_graph_last_error(g));
    assert_matches_reference(rt, g, DEV_TESTDEV, out, 12);
    assert_matches_reference(rt, g, DEV_OPAQUE, out, 12);
    sy_graph_destroy(g);
    sy_runtime_destroy(rt);
    cr_assert_null(strstr(cap.text, "leaked"), "log:\n%s", cap.text);
    check_leaks();
}

Test(execute, writes_kv_cache_updates_back_to_host_memory_on_every_device_kind)
{
    log_capture cap = {0};
    sy_runtime *rt = fake_runtime(&cap);
    static const uint32_t devs[] = {DEV_TESTDEV, DEV_OPAQUE, DEV_UNMAPPED};
    for (size_t k = 0; k < sizeof devs / sizeof devs[0]; k++) {
        uint32_t dev = devs[k];
        float cache[4 * 2 * 3] = {0}, rows[4 * 2], out[4 * 2 * 2];
        for (int i = 0; i < 8; i++)
            rows[i] = (float)(i + 1);
        sy_graph *g;
        cr_assert_eq(sy_graph_create(&g), SY_OK);
        int64_t cne[3] = {4, 2, 3}, rne[3] = {4, 2, 1};
        sy_tensor *c, *r, *kv, *s;
        cr_assert_eq(sy_graph_add_tensor(g, "cache", SY_DTYPE_F32, 3, cne, SY_ROLE_KV, cache, &c),
                     SY_OK);
        cr_assert_eq(sy_graph_add_tensor(g, "rows", SY_DTYPE_F32, 3, rne, SY_ROLE_INPUT, rows, &r),
                     SY_OK);
        sy_tensor *kv_in[2] = {c, r};
        sy_op_params at1 = {.i = {1}};
        cr_assert_eq(sy_graph_add_node(g, SY_OP_KV_WRITE, "kv", kv_in, 2, &at1, &kv), SY_OK, "%s",
                     sy_graph_last_error(g));
        sy_op_params twice = {.f = {2.0f, 0.0f}};
        cr_assert_eq(sy_graph_add_node(g, SY_OP_SCALE, "s", &kv, 1, &twice, &s), SY_OK, "%s",
                     sy_graph_last_error(g));
        cr_assert_eq(sy_graph_mark_output(g, s), SY_OK);
        cr_assert_eq(sy_graph_set_host_data(g, s, out), SY_OK);
        cr_assert_eq(sy_graph_freeze(g), SY_OK, "%s", sy_graph_last_error(g));
        clear_log(&cap);
        cr_assert_eq(sy_runtime_execute_on(rt, g, dev), SY_OK, "%s", sy_runtime_last_error(rt));
        /* The cache (96 bytes) comes back by copy only from the device
         * that could not import it; the output (64 bytes) always does. */
        cr_assert_eq(count_lines(cap.text, ": copy_out 96\n"), dev == DEV_OPAQUE ? 1 : 0,
                     "device %u, log:\n%s", dev, cap.text);
        cr_assert_eq(count_lines(cap.text, ": copy_out 64\n"), 1, "device %u, log:\n%s", dev,
                     cap.text);
        /* Position 1 of the cache now holds the rows; 0 and 2 stay zero. */
        for (int i = 0; i < 8; i++) {
            cr_assert_eq(cache[i], 0.0f, "device %u: cache[%d]", dev, i);
            cr_assert_eq(cache[8 + i], rows[i], "device %u: cache[%d]", dev, 8 + i);
            cr_assert_eq(cache[16 + i], 0.0f, "device %u: cache[%d]", dev, 16 + i);
            cr_assert_eq(out[8 + i], 2.0f * rows[i], "device %u: out[%d]", dev, 8 + i);
        }
        assert_restored(g);
        sy_graph_destroy(g);
    }
    sy_runtime_destroy(rt);
    check_leaks();
}

Test(execute, starts_leaves_without_host_data_as_zeros)
{
    log_capture cap = {0};
    sy_runtime *rt = fake_runtime(&cap);
    for (uint32_t dev = DEV_TESTDEV; dev <= DEV_OPAQUE; dev++) {
        float xs[16], out[16];
        for (int i = 0; i < 16; i++)
            xs[i] = (float)i;
        sy_graph *g;
        cr_assert_eq(sy_graph_create(&g), SY_OK);
        int64_t ne[1] = {16};
        sy_tensor *state, *x, *y;
        cr_assert_eq(sy_graph_add_tensor(g, "state", SY_DTYPE_F32, 1, ne, SY_ROLE_KV, NULL, &state),
                     SY_OK);
        cr_assert_eq(sy_graph_add_tensor(g, "x", SY_DTYPE_F32, 1, ne, SY_ROLE_INPUT, xs, &x), SY_OK);
        sy_tensor *in[2] = {state, x};
        cr_assert_eq(sy_graph_add_node(g, SY_OP_ADD, "y", in, 2, NULL, &y), SY_OK);
        cr_assert_eq(sy_graph_mark_output(g, y), SY_OK);
        cr_assert_eq(sy_graph_set_host_data(g, y, out), SY_OK);
        cr_assert_eq(sy_graph_freeze(g), SY_OK);
        cr_assert_eq(sy_runtime_execute_on(rt, g, dev), SY_OK, "%s", sy_runtime_last_error(rt));
        for (int i = 0; i < 16; i++)
            cr_assert_eq(out[i], xs[i], "device %u: out[%d]", dev, i);
        sy_graph_destroy(g);
    }
    sy_runtime_destroy(rt);
    check_leaks();
}

Test(execute, refuses_a_node_the_device_cannot_run_naming_the_node_and_the_reason)
{
    log_capture cap = {0};
    sy_runtime *rt = fake_runtime(&cap);
    float xs[32] = {0};
    int32_t out[4] = {0};
    sy_graph *g;
    cr_assert_eq(sy_graph_create(&g), SY_OK);
    int64_t ne[2] = {8, 4};
    sy_tensor *x, *am;
    cr_assert_eq(sy_graph_add_tensor(g, "x", SY_DTYPE_F32, 2, ne, SY_ROLE_INPUT, xs, &x), SY_OK);
    cr_assert_eq(sy_graph_add_node(g, SY_OP_ARGMAX, "pick", &x, 1, NULL, &am), SY_OK, "%s",
                 sy_graph_last_error(g));
    cr_assert_eq(sy_graph_mark_output(g, am), SY_OK);
    cr_assert_eq(sy_graph_set_host_data(g, am, out), SY_OK);
    cr_assert_eq(sy_graph_freeze(g), SY_OK);
    clear_log(&cap);
    cr_assert_eq(sy_runtime_execute_on(rt, g, DEV_TESTDEV), SY_E_UNSUPPORTED);
    cr_assert_str_eq(sy_runtime_last_error(rt),
                     "device 'testdev' cannot run node 'pick' (argmax): unsupported op: testdev "
                     "has no argmax kernel");
    /* Checked before anything was allocated. */
    cr_assert_null(strstr(cap.text, "alloc"), "log:\n%s", cap.text);
    assert_restored(g);
    sy_graph_destroy(g);
    sy_runtime_destroy(rt);
    check_leaks();
}

Test(execute, device_supports_answers_yes_for_views_and_says_why_not_otherwise)
{
    log_capture cap = {0};
    sy_runtime *rt = fake_runtime(&cap);
    sy_tensor x = {.dtype = SY_DTYPE_F32, .ne = {8, 4, 1, 1}}, y = x;
    sy_tensor_set_contiguous_strides(&x);
    sy_node view = {.op = SY_OP_TRANSPOSE, .n_inputs = 1, .inputs = {&x}, .output = &y};
    sy_node pick = {.op = SY_OP_ARGMAX, .n_inputs = 1, .inputs = {&x}, .output = &y};
    sy_support why;
    cr_assert(sy_runtime_device_supports(rt, DEV_TESTDEV, &view, &why));
    cr_assert_eq(why.reason, SY_SUPPORT_YES);
    cr_assert_not(sy_runtime_device_supports(rt, DEV_TESTDEV, &pick, &why));
    cr_assert_eq(why.reason, SY_UNSUPPORTED_OP);
    cr_assert_str_eq(why.text, "testdev has no argmax kernel");
    cr_assert_not(sy_runtime_device_supports(rt, 99, &view, &why));
    cr_assert_str_eq(why.text, "no such device");
    cr_assert_not(sy_runtime_device_supports(rt, DEV_TESTDEV, &pick, NULL));
    sy_runtime_destroy(rt);
    check_leaks();
}

Test(execute, rejects_a_graph_that_is_not_frozen_an_unknown_device_and_no_graph)
{
    log_capture cap = {0};
    sy_runtime *rt = fake_runtime(&cap);
    sy_graph *g;
    cr_assert_eq(sy_graph_create(&g), SY_OK);
    int64_t ne[1] = {4};
    sy_tensor *x;
    cr_assert_eq(sy_graph_add_tensor(g, "x", SY_DTYPE_F32, 1, ne, SY_ROLE_INPUT, NULL, &x), SY_OK);
    cr_assert_eq(sy_runtime_execute_on(rt, g, DEV_TESTDEV), SY_E_STATE);
    cr_assert_not_null(strstr(sy_runtime_last_error(rt), "not frozen"));
    cr_assert_eq(sy_graph_freeze(g), SY_OK);
    cr_assert_eq(sy_runtime_execute_on(rt, g, 42), SY_E_NOT_FOUND);
    cr_assert_str_eq(sy_runtime_last_error(rt), "execute_on: no device 42 (the runtime has 5)");
    cr_assert_eq(sy_runtime_execute_on(rt, NULL, DEV_TESTDEV), SY_E_INVALID_ARG);
    cr_assert_eq(sy_runtime_execute_on(NULL, g, DEV_TESTDEV), SY_E_INVALID_ARG);
    /* A graph of leaves only has nothing to run, which is not an error. */
    cr_assert_eq(sy_runtime_execute_on(rt, g, DEV_TESTDEV), SY_OK, "%s",
                 sy_runtime_last_error(rt));
    sy_graph_destroy(g);
    sy_runtime_destroy(rt);
    check_leaks();
}

Test(execute, rejects_an_output_that_is_not_contiguous_before_running)
{
    log_capture cap = {0};
    sy_runtime *rt = fake_runtime(&cap);
    float xs[32] = {0}, out[32];
    sy_graph *g;
    cr_assert_eq(sy_graph_create(&g), SY_OK);
    int64_t ne[2] = {8, 4};
    sy_tensor *x, *t;
    cr_assert_eq(sy_graph_add_tensor(g, "x", SY_DTYPE_F32, 2, ne, SY_ROLE_INPUT, xs, &x), SY_OK);
    cr_assert_eq(sy_graph_add_node(g, SY_OP_TRANSPOSE, "t", &x, 1, NULL, &t), SY_OK);
    cr_assert_eq(sy_graph_mark_output(g, t), SY_OK);
    cr_assert_eq(sy_graph_set_host_data(g, t, out), SY_OK);
    cr_assert_eq(sy_graph_freeze(g), SY_OK);
    cr_assert_eq(sy_runtime_execute_on(rt, g, DEV_OPAQUE), SY_E_UNSUPPORTED);
    cr_assert_not_null(strstr(sy_runtime_last_error(rt), "output 't' is not contiguous"), "%s",
                       sy_runtime_last_error(rt));
    sy_graph_destroy(g);
    sy_runtime_destroy(rt);
    check_leaks();
}

Test(execute, frees_everything_when_an_allocation_fails_and_the_next_run_succeeds)
{
    log_capture cap = {0};
    sy_runtime *rt = fake_runtime(&cap);
    ew_graph e;
    build_elementwise(&e);
    /* fault_alloc refuses its third allocation: x and w got theirs. */
    cr_assert_eq(sy_runtime_execute_on(rt, e.g, DEV_FAULT_ALLOC), SY_E_NO_MEMORY);
    cr_assert_str_eq(sy_runtime_last_error(rt),
                     "device 'fault_alloc': buffer_alloc of 128 bytes for tensor 'y' failed: "
                     "SY_E_NO_MEMORY");
    cr_assert_eq(e.out[0], -999.0f, "the output must be untouched");
    assert_restored(e.g);
    cr_assert_eq(sy_runtime_execute_on(rt, e.g, DEV_FAULT_ALLOC), SY_OK, "%s",
                 sy_runtime_last_error(rt));
    assert_elementwise_result(&e);
    sy_graph_destroy(e.g);
    sy_runtime_destroy(rt);
    cr_assert_null(strstr(cap.text, "leaked"), "log:\n%s", cap.text);
    check_leaks();
}

Test(execute, frees_everything_when_execute_fails)
{
    log_capture cap = {0};
    sy_runtime *rt = fake_runtime(&cap);
    ew_graph e;
    build_elementwise(&e);
    cr_assert_eq(sy_runtime_execute_on(rt, e.g, DEV_FAULT_EXECUTE), SY_E_DEVICE);
    cr_assert_str_eq(sy_runtime_last_error(rt),
                     "device 'fault_execute': execute failed: SY_E_DEVICE (device error)");
    cr_assert_not_null(strstr(cap.text, "error: fault_execute: node 'y' failed (fault injection)\n"),
                       "log:\n%s", cap.text);
    cr_assert_eq(e.out[0], -999.0f, "the output must be untouched");
    assert_restored(e.g);
    sy_graph_destroy(e.g);
    sy_runtime_destroy(rt);
    cr_assert_null(strstr(cap.text, "leaked"), "log:\n%s", cap.text);
    check_leaks();
}
