/* Plugin loader: search path, every refusal path with its reason, and the
 * good plugins loading alongside the broken ones.  The plugins come from
 * tests/core/broken_plugins, built by this test suite. */
#include <criterion/criterion.h>
#include <limits.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

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

/* Creates a runtime searching only |path|, logging into |cap|. */
static sy_runtime *load(const char *path, log_capture *cap)
{
    sy_runtime_options o;
    sy_runtime_options_init(&o);
    o.plugin_path = path;
    o.no_default_paths = true;
    o.log_fn = capture_log;
    o.log_user = cap;
    sy_runtime *rt = NULL;
    cr_assert_eq(sy_runtime_create(&o, &rt), SY_OK);
    cr_assert_not_null(rt);
    return rt;
}

/* The realpath of a plugin file of the test dir, as the loader records it. */
static void real(const char *file, char out[PATH_MAX])
{
    cr_assert_not_null(realpath(file, out), "%s is missing: were the test plugins built?", file);
}

/* Finds the refusal of |file|; fails the test when there is none. */
static sy_plugin_refusal refusal_of(const sy_runtime *rt, const char *file)
{
    char want[PATH_MAX];
    real(file, want);
    for (uint32_t i = 0; i < sy_runtime_refusal_count(rt); i++) {
        sy_plugin_refusal r;
        cr_assert_eq(sy_runtime_query_refusal(rt, i, &r), SY_OK);
        if (strcmp(r.path, want) == 0)
            return r;
    }
    cr_assert_fail("no refusal recorded for %s", want);
    return (sy_plugin_refusal){0};
}

/* Asserts that loading |file| alone is refused with |status| and exactly
 * |reason|, logged as a warning, and that nothing was loaded. */
static void assert_refused(const char *file, sy_status status, const char *reason)
{
    log_capture cap = {0};
    sy_runtime *rt = load(file, &cap);
    cr_assert_eq(sy_runtime_plugin_count(rt), 0);
    cr_assert_eq(sy_runtime_device_count(rt), 0);
    cr_assert_eq(sy_runtime_refusal_count(rt), 1);
    sy_plugin_refusal r = refusal_of(rt, file);
    cr_assert_str_eq(r.reason, reason);
    cr_assert_eq(r.status, status, "status %s", sy_status_name(r.status));
    char line[PATH_MAX + 512];
    snprintf(line, sizeof line, "warn: refused plugin %s: %s\n", r.path, reason);
    cr_assert_not_null(strstr(cap.text, line), "log was:\n%s", cap.text);
    sy_runtime_destroy(rt);
}

Test(loader, loads_the_good_test_plugin_and_describes_its_device)
{
    log_capture cap = {0};
    sy_runtime *rt = load(PLUGIN("testdev.so"), &cap);
    cr_assert_eq(sy_runtime_refusal_count(rt), 0, "log:\n%s", cap.text);
    cr_assert_eq(sy_runtime_plugin_count(rt), 1);
    sy_plugin_info pi;
    cr_assert_eq(sy_runtime_query_plugin(rt, 0, &pi), SY_OK);
    char want[PATH_MAX];
    real(PLUGIN("testdev.so"), want);
    cr_assert_str_eq(pi.name, "testdev");
    cr_assert_str_eq(pi.version, "1.2.3");
    cr_assert_str_eq(pi.vendor, "switchyard tests");
    cr_assert_str_eq(pi.path, want);
    cr_assert_eq(pi.abi_version, SY_PLUGIN_ABI_VERSION);
    cr_assert_eq(pi.device_count, 1);

    cr_assert_eq(sy_runtime_device_count(rt), 1);
    sy_device_desc d;
    cr_assert_eq(sy_runtime_query_device(rt, 0, &d), SY_OK);
    cr_assert_eq(d.struct_size, sizeof d);
    cr_assert_str_eq(d.name, "testdev");
    cr_assert_eq(d.kind, SY_DEVICE_CPU);
    cr_assert_str_eq(d.model, "fake device for tests");
    cr_assert_eq(d.memory_bytes, (uint64_t)1 << 30);
    cr_assert_eq(d.unified_memory, 1);
    sy_runtime_destroy(rt);
    check_leaks();
}

Test(loader, hands_the_plugin_working_host_services_and_prefixes_its_log_lines)
{
    log_capture cap = {0};
    sy_runtime *rt = load(PLUGIN("testdev.so"), &cap);
    /* testdev's init exercises alloc, free, op_name, op_cost and
     * reference_execute, and fails with the reason when one misbehaves. */
    cr_assert_eq(sy_runtime_plugin_count(rt), 1, "log:\n%s", cap.text);
    cr_assert_not_null(strstr(cap.text, "debug: testdev: host services ok\n"), "log:\n%s",
                       cap.text);
    sy_runtime_destroy(rt);
    cr_assert_null(strstr(cap.text, "leaked"), "log:\n%s", cap.text);
    check_leaks();
}

Test(loader, refuses_a_plugin_built_for_abi_99)
{
    assert_refused(PLUGIN("abi99.so"), SY_E_PLUGIN_ABI, "built for ABI 99.0, host is 1.3");
    check_leaks();
}

Test(loader, refuses_a_library_without_the_entry_symbol)
{
    assert_refused(PLUGIN("no_entry.so"), SY_E_PLUGIN_ABI,
                   "no 'sy_plugin_query' symbol: not a Switchyard plugin, or the symbol is not "
                   "exported");
    check_leaks();
}

Test(loader, refuses_a_plugin_whose_query_returns_null)
{
    assert_refused(PLUGIN("query_null.so"), SY_E_PLUGIN_ABI,
                   "sy_plugin_query() returned NULL: the plugin cannot serve a host of ABI 1.3");
    check_leaks();
}

Test(loader, refuses_a_table_smaller_than_the_abi_1_0_fields)
{
    char reason[128];
    snprintf(reason, sizeof reason,
             "descriptor struct_size %zu is smaller than the %zu bytes of ABI 1.0",
             offsetof(sy_plugin_desc, init), offsetof(sy_plugin_desc, event_record));
    assert_refused(PLUGIN("small_table.so"), SY_E_PLUGIN_ABI, reason);
    check_leaks();
}

Test(loader, refuses_a_plugin_missing_a_required_function)
{
    assert_refused(PLUGIN("null_execute.so"), SY_E_PLUGIN_ABI,
                   "required function 'execute' is NULL");
    check_leaks();
}

Test(loader, refuses_a_plugin_whose_init_fails_and_passes_on_its_log_message)
{
    assert_refused(PLUGIN("init_fails.so"), SY_E_DEVICE, "init failed: SY_E_DEVICE (device error)");
    log_capture cap = {0};
    sy_runtime *rt = load(PLUGIN("init_fails.so"), &cap);
    cr_assert_not_null(strstr(cap.text, "error: init_fails: no such hardware here\n"), "log:\n%s",
                       cap.text);
    sy_runtime_destroy(rt);
    check_leaks();
}

Test(loader, refuses_a_plugin_whose_describe_fails)
{
    assert_refused(PLUGIN("fault_describe.so"), SY_E_DEVICE,
                   "describe(device 0) failed: SY_E_DEVICE (device error)");
    check_leaks();
}

Test(loader, refuses_a_file_that_is_not_a_shared_object_with_the_dlopen_reason)
{
    log_capture cap = {0};
    sy_runtime *rt = load(PLUGIN("x.so"), &cap);
    cr_assert_eq(sy_runtime_plugin_count(rt), 0);
    sy_plugin_refusal r = refusal_of(rt, PLUGIN("x.so"));
    cr_assert_eq(r.status, SY_E_FORMAT);
    const char *prefix = "not a loadable shared object: ";
    cr_assert_eq(strncmp(r.reason, prefix, strlen(prefix)), 0, "reason: %s", r.reason);
    /* dlerror's own text names the file and what is wrong with it. */
    cr_assert_not_null(strstr(r.reason, "x.so"), "reason: %s", r.reason);
    cr_assert_gt(strlen(r.reason), strlen(prefix) + strlen(r.path));
    sy_runtime_destroy(rt);
    check_leaks();
}

Test(loader, refuses_a_second_plugin_with_a_name_already_loaded_naming_the_first_file)
{
    log_capture cap = {0};
    sy_runtime *rt = load(PLUGIN("dup_a.so") ":" PLUGIN("dup_b.so"), &cap);
    cr_assert_eq(sy_runtime_plugin_count(rt), 1);
    sy_plugin_info pi;
    cr_assert_eq(sy_runtime_query_plugin(rt, 0, &pi), SY_OK);
    char first[PATH_MAX];
    real(PLUGIN("dup_a.so"), first);
    cr_assert_str_eq(pi.path, first);
    sy_plugin_refusal r = refusal_of(rt, PLUGIN("dup_b.so"));
    char want[PATH_MAX + 64];
    snprintf(want, sizeof want, "plugin 'dup' already loaded from %s", first);
    cr_assert_str_eq(r.reason, want);
    cr_assert_eq(r.status, SY_E_PLUGIN);
    sy_runtime_destroy(rt);
    check_leaks();
}

Test(loader, accepts_a_newer_minor_abi_and_reads_only_the_fields_it_knows)
{
    log_capture cap = {0};
    sy_runtime *rt = load(PLUGIN("future_minor.so"), &cap);
    cr_assert_eq(sy_runtime_refusal_count(rt), 0, "log:\n%s", cap.text);
    cr_assert_eq(sy_runtime_plugin_count(rt), 1);
    sy_plugin_info pi;
    cr_assert_eq(sy_runtime_query_plugin(rt, 0, &pi), SY_OK);
    cr_assert_eq(pi.abi_version, (SY_PLUGIN_ABI_MAJOR << 16) | 5u);
    cr_assert_eq(pi.device_count, 1);
    sy_runtime_destroy(rt);
    check_leaks();
}

/* A plugin built for ABI 1.2 reads a KV write's start from its params:
 * the core never asks it about the forms with a run-time position. */
Test(loader, keeps_run_time_kv_positions_from_a_plugin_older_than_abi_1_3)
{
    log_capture cap = {0};
    sy_runtime *rt = load(PLUGIN("older_minor.so") ":" PLUGIN("testdev.so"), &cap);
    cr_assert_eq(sy_runtime_device_count(rt), 2, "log:\n%s", cap.text);
    int32_t at = 3;
    uint16_t cache[8 * 2 * 16] = {0};
    float rows[8 * 2];
    sy_tensor c = {.dtype = SY_DTYPE_F16, .role = SY_ROLE_KV, .n_dims = 3,
                   .ne = {8, 2, 16, 1}, .nb = {2, 16, 32, 512}, .data = cache};
    sy_tensor r = {.dtype = SY_DTYPE_F32, .n_dims = 3, .ne = {8, 2, 1, 1},
                   .nb = {4, 32, 64, 64}, .data = rows};
    sy_tensor s = {.dtype = SY_DTYPE_I32, .n_dims = 1, .ne = {1, 1, 1, 1},
                   .nb = {4, 4, 4, 4}, .data = &at};
    sy_tensor out = c;
    out.view_src = &c;
    sy_node n = {.op = SY_OP_KV_WRITE, .n_inputs = 3, .inputs = {&c, &r, &s}, .output = &out};
    for (uint32_t d = 0; d < 2; d++) {
        sy_plugin_info di; /* one device per plugin: device d is plugin d's */
        cr_assert_eq(sy_runtime_query_plugin(rt, d, &di), SY_OK);
        const bool older = strcmp(di.name, "older_minor") == 0;
        sy_support why;
        n.n_inputs = 3;
        cr_assert_eq(sy_runtime_device_supports(rt, d, &n, &why), !older, "%s", di.name);
        if (older) {
            cr_assert_eq(why.reason, SY_UNSUPPORTED_OP);
            cr_assert_str_eq(why.text, "plugin 'older_minor' is built for ABI 1.2, before KV "
                                       "positions read at run time (1.3)");
        }
        n.n_inputs = 2;
        n.params.i[0] = 3;
        out.ne[2] = 4;
        cr_assert(sy_runtime_device_supports(rt, d, &n, &why), "%s: %s", di.name, why.text);
        n.params.i[0] = 0;
        out.ne[2] = 16;
    }
    sy_runtime_destroy(rt);
    check_leaks();
}

Test(loader, loads_a_directory_in_sorted_order_and_refuses_each_broken_file_there)
{
    log_capture cap = {0};
    sy_runtime *rt = load(SY_TEST_PLUGIN_DIR, &cap);
    static const char *const loaded[] = {"async_fault_matmul", "asyncdev",     "asyncdev_b",
                                         "dup",                "fault_alloc",  "fault_execute",
                                         "fault_matmul",       "future_minor", "older_minor",
                                         "opaquedev",          "testdev",      "unmapped"};
    static const char *const refused[] = {"abi99.so",        "dup_b.so",        "fault_describe.so",
                                          "init_fails.so",   "no_entry.so",     "null_execute.so",
                                          "query_null.so",   "small_table.so",  "x.so"};
    uint32_t n_loaded = sizeof loaded / sizeof loaded[0];
    uint32_t n_refused = sizeof refused / sizeof refused[0];
    cr_assert_eq(sy_runtime_plugin_count(rt), n_loaded, "log:\n%s", cap.text);
    cr_assert_eq(sy_runtime_device_count(rt), n_loaded);
    for (uint32_t i = 0; i < n_loaded; i++) {
        sy_plugin_info pi;
        cr_assert_eq(sy_runtime_query_plugin(rt, i, &pi), SY_OK);
        cr_assert_str_eq(pi.name, loaded[i]);
    }
    cr_assert_eq(sy_runtime_refusal_count(rt), n_refused, "log:\n%s", cap.text);
    for (uint32_t i = 0; i < n_refused; i++) {
        sy_plugin_refusal r;
        cr_assert_eq(sy_runtime_query_refusal(rt, i, &r), SY_OK);
        const char *base = strrchr(r.path, '/');
        cr_assert_str_eq(base ? base + 1 : r.path, refused[i]);
        cr_assert_neq(r.status, SY_OK);
        cr_assert_gt(strlen(r.reason), 0);
    }
    sy_runtime_destroy(rt);
    check_leaks();
}

Test(loader, loads_the_same_file_once_when_two_path_entries_reach_it)
{
    log_capture cap = {0};
    sy_runtime *rt =
        load(PLUGIN("testdev.so") ":" SY_TEST_PLUGIN_DIR "/../broken_plugins/testdev.so", &cap);
    cr_assert_eq(sy_runtime_plugin_count(rt), 1);
    cr_assert_eq(sy_runtime_refusal_count(rt), 0, "log:\n%s", cap.text);
    sy_runtime_destroy(rt);
    check_leaks();
}

Test(loader, loads_the_same_file_once_when_a_symlink_also_reaches_it)
{
    char dir[] = "/tmp/sy-loader-XXXXXX";
    cr_assert_not_null(mkdtemp(dir));
    char link[sizeof dir + 32], target[PATH_MAX];
    real(PLUGIN("testdev.so"), target);
    snprintf(link, sizeof link, "%s/alias.so", dir);
    cr_assert_eq(symlink(target, link), 0);
    char path[2 * PATH_MAX];
    snprintf(path, sizeof path, "%s:%s", dir, target);
    log_capture cap = {0};
    sy_runtime *rt = load(path, &cap);
    cr_assert_eq(sy_runtime_plugin_count(rt), 1);
    cr_assert_eq(sy_runtime_refusal_count(rt), 0, "log:\n%s", cap.text);
    sy_plugin_info pi;
    cr_assert_eq(sy_runtime_query_plugin(rt, 0, &pi), SY_OK);
    cr_assert_str_eq(pi.path, target);
    sy_runtime_destroy(rt);
    unlink(link);
    rmdir(dir);
    check_leaks();
}

Test(loader, skips_path_entries_that_do_not_exist_without_refusing_them)
{
    log_capture cap = {0};
    sy_runtime *rt = load("/nonexistent/sy-plugins::" PLUGIN("testdev.so") ":", &cap);
    cr_assert_eq(sy_runtime_plugin_count(rt), 1);
    cr_assert_eq(sy_runtime_refusal_count(rt), 0, "log:\n%s", cap.text);
    sy_runtime_destroy(rt);
    check_leaks();
}

Test(loader, reads_the_plugin_path_from_the_environment_when_the_options_give_none)
{
    setenv("SWITCHYARD_PLUGIN_PATH", PLUGIN("opaquedev.so"), 1);
    log_capture cap = {0};
    sy_runtime *rt = load(NULL, &cap);
    cr_assert_eq(sy_runtime_plugin_count(rt), 1, "log:\n%s", cap.text);
    sy_plugin_info pi;
    cr_assert_eq(sy_runtime_query_plugin(rt, 0, &pi), SY_OK);
    cr_assert_str_eq(pi.name, "opaquedev");
    sy_runtime_destroy(rt);
    check_leaks();
}

Test(loader, prefers_the_options_plugin_path_over_the_environment)
{
    setenv("SWITCHYARD_PLUGIN_PATH", PLUGIN("opaquedev.so"), 1);
    log_capture cap = {0};
    sy_runtime *rt = load(PLUGIN("testdev.so"), &cap);
    cr_assert_eq(sy_runtime_plugin_count(rt), 1);
    sy_plugin_info pi;
    cr_assert_eq(sy_runtime_query_plugin(rt, 0, &pi), SY_OK);
    cr_assert_str_eq(pi.name, "testdev");
    sy_runtime_destroy(rt);
    check_leaks();
}

Test(loader, searches_nothing_else_with_no_default_paths_and_an_empty_path)
{
    log_capture cap = {0};
    sy_runtime *rt = load("", &cap);
    cr_assert_eq(sy_runtime_plugin_count(rt), 0);
    cr_assert_eq(sy_runtime_refusal_count(rt), 0);
    cr_assert_null(strstr(cap.text, "looking for plugins in"), "log:\n%s", cap.text);
    sy_runtime_destroy(rt);
    check_leaks();
}

Test(loader, searches_the_build_tree_before_the_install_dir_when_run_uninstalled)
{
    sy_runtime_options o;
    sy_runtime_options_init(&o);
    o.plugin_path = "";
    log_capture cap = {0};
    o.log_fn = capture_log;
    o.log_user = &cap;
    sy_runtime *rt = NULL;
    cr_assert_eq(sy_runtime_create(&o, &rt), SY_OK);
    /* This test binary links the libswitchyard of the build tree. */
    const char *build = strstr(cap.text, "looking for plugins in " SY_TEST_PLUGIN_BUILD_DIR "\n");
    const char *install =
        strstr(cap.text, "looking for plugins in " SY_TEST_PLUGIN_INSTALL_DIR "\n");
    cr_assert_not_null(build, "log:\n%s", cap.text);
    cr_assert_not_null(install, "log:\n%s", cap.text);
    cr_assert_lt(build, install, "log:\n%s", cap.text);
    /* Whatever it found there is the build's own. */
    for (uint32_t i = 0; i < sy_runtime_plugin_count(rt); i++) {
        sy_plugin_info pi;
        cr_assert_eq(sy_runtime_query_plugin(rt, i, &pi), SY_OK);
        char bdir[PATH_MAX];
        real(SY_TEST_PLUGIN_BUILD_DIR, bdir);
        cr_assert_eq(strncmp(pi.path, bdir, strlen(bdir)), 0, "%s", pi.path);
    }
    sy_runtime_destroy(rt);
    check_leaks();
}

Test(loader, queries_out_of_range_fail_with_zeroed_results)
{
    log_capture cap = {0};
    sy_runtime *rt = load(PLUGIN("testdev.so") ":" PLUGIN("abi99.so"), &cap);
    sy_plugin_info pi;
    memset(&pi, 0xff, sizeof pi);
    cr_assert_eq(sy_runtime_query_plugin(rt, 1, &pi), SY_E_NOT_FOUND);
    cr_assert_null(pi.name);
    cr_assert_null(pi.path);
    sy_plugin_refusal r;
    memset(&r, 0xff, sizeof r);
    cr_assert_eq(sy_runtime_query_refusal(rt, 1, &r), SY_E_NOT_FOUND);
    cr_assert_null(r.path);
    cr_assert_null(r.reason);
    sy_device_desc d;
    memset(&d, 0xff, sizeof d);
    cr_assert_eq(sy_runtime_query_device(rt, 1, &d), SY_E_NOT_FOUND);
    cr_assert_eq(d.name[0], '\0');
    cr_assert_eq(sy_runtime_query_plugin(rt, 0, NULL), SY_E_INVALID_ARG);
    cr_assert_eq(sy_runtime_plugin_count(NULL), 0);
    cr_assert_eq(sy_runtime_device_count(NULL), 0);
    cr_assert_eq(sy_runtime_refusal_count(NULL), 0);
    sy_runtime_destroy(rt);
    check_leaks();
}

Test(loader, finds_devices_by_name)
{
    log_capture cap = {0};
    sy_runtime *rt = load(PLUGIN("testdev.so") ":" PLUGIN("opaquedev.so"), &cap);
    uint32_t i = 99;
    cr_assert_eq(sy_runtime_find_device(rt, "opaquedev", &i), SY_OK);
    cr_assert_eq(i, 1);
    cr_assert_eq(sy_runtime_find_device(rt, "testdev", &i), SY_OK);
    cr_assert_eq(i, 0);
    cr_assert_eq(sy_runtime_find_device(rt, "npu", &i), SY_E_NOT_FOUND);
    cr_assert_eq(i, 0);
    cr_assert_eq(sy_runtime_find_device(rt, NULL, &i), SY_E_INVALID_ARG);
    sy_runtime_destroy(rt);
    check_leaks();
}

Test(loader, loads_only_the_plugins_the_allow_list_names)
{
    sy_runtime_options o;
    sy_runtime_options_init(&o);
    o.plugin_path = PLUGIN("testdev.so") ":" PLUGIN("future_minor.so") ":" SY_TEST_PLUGIN_BUILD_DIR "/cpu";
    o.no_default_paths = true;
    o.plugins = "testdev,cpu";
    sy_runtime *rt = NULL;
    cr_assert_eq(sy_runtime_create(&o, &rt), SY_OK);
    cr_assert_eq(sy_runtime_plugin_count(rt), 2, "testdev and cpu, not future_minor");
    uint32_t idx;
    cr_assert_eq(sy_runtime_find_device(rt, "cpu", &idx), SY_OK);
    cr_assert_eq(sy_runtime_refusal_count(rt), 0, "skipped plugins are not refusals");
    sy_runtime_destroy(rt);

    o.plugins = "testdev";
    cr_assert_eq(sy_runtime_create(&o, &rt), SY_OK);
    cr_assert_eq(sy_runtime_plugin_count(rt), 1);
    cr_assert_eq(sy_runtime_find_device(rt, "cpu", &idx), SY_E_NOT_FOUND,
                 "sy-cpu.so must not even be opened");
    sy_runtime_destroy(rt);
}
