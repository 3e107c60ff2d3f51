/* plugin-check, the conformance suite (tools/plugin_check*.c, linked in):
 * it passes on the cpu and npusim plugins (and opencl where it was built),
 * and it fails the broken plugins the core tests build, naming the check
 * that each one breaks. */
#include <criterion/criterion.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include "plugin_check.h"
#include "test_npusim_util.h"

#ifndef SY_TEST_PLUGIN_DIR
#error "SY_TEST_PLUGIN_DIR must name the directory of the broken test plugins"
#endif

static sy_pcheck_report *run_check(const char *path, sy_pcheck_tolerance tol)
{
    sy_pcheck_options o;
    sy_pcheck_options_init(&o);
    o.path = path;
    o.tolerance = tol;
    sy_pcheck_report *r = NULL;
    cr_assert_eq(sy_pcheck_run(&o, &r), SY_OK);
    cr_assert(r != NULL);
    return r;
}

/* Fails with every failed check listed. */
static void expect_all_pass(const sy_pcheck_report *r)
{
    char failures[4096] = "";
    for (uint32_t i = 0; i < r->n_results; i++) {
        const sy_pcheck_result *res = &r->results[i];
        if (res->outcome != SY_PCHECK_FAIL)
            continue;
        size_t used = strlen(failures);
        snprintf(failures + used, sizeof failures - used, "  %s: %s\n", res->name, res->detail);
    }
    cr_assert_eq(r->failed, 0, "plugin-check of %s (seed 0x%016llx): %u failed\n%s", r->path,
                 (unsigned long long)r->seed, r->failed, failures);
    cr_assert_gt(r->passed, 40, "only %u checks ran", r->passed);
}

static void expect_outcome(const sy_pcheck_report *r, const char *name, sy_pcheck_outcome want)
{
    const sy_pcheck_result *res = sy_pcheck_find(r, name);
    cr_assert(res != NULL, "no check named '%s' in the report of %s", name, r->path);
    cr_assert_eq(res->outcome, want, "%s: %s (%s), want %s", name,
                 sy_pcheck_outcome_name(res->outcome), res->detail, sy_pcheck_outcome_name(want));
}

Test(plugin_check, passes_on_the_cpu_plugin)
{
    char path[512];
    sy_pcheck_report *r = run_check(nt_plugin_path("cpu/sy-cpu.so", path, sizeof path),
                                    SY_PCHECK_TOL_AUTO);
    expect_all_pass(r);
    cr_assert_str_eq(r->plugin, "cpu");
    expect_outcome(r, "matmul q4_k x f32 K=256 N=24 M=7", SY_PCHECK_PASS);
    expect_outcome(r, "two states on two threads at once", SY_PCHECK_PASS);
    expect_outcome(r, "describe writes nothing for struct_size 0", SY_PCHECK_PASS);
    sy_pcheck_report_destroy(r);
}

/* The same suite with each kernel table forced: a level this CPU cannot run
 * falls back to the scalar table (with a warning), which must pass too. */
Test(plugin_check, passes_on_the_cpu_plugin_at_every_isa_level)
{
    static const char *const levels[] = {"scalar", "avx2", "avxvnni", "avx512", "avx512gfni"};
    char path[512];
    nt_plugin_path("cpu/sy-cpu.so", path, sizeof path);
    for (size_t i = 0; i < sizeof levels / sizeof levels[0]; i++) {
        setenv("SWITCHYARD_CPU_ISA", levels[i], 1);
        sy_pcheck_report *r = run_check(path, SY_PCHECK_TOL_AUTO);
        cr_log_info("plugin-check cpu with SWITCHYARD_CPU_ISA=%s: %u passed", levels[i],
                    r->passed);
        expect_all_pass(r);
        sy_pcheck_report_destroy(r);
    }
    unsetenv("SWITCHYARD_CPU_ISA");
}

Test(plugin_check, passes_on_npusim_with_its_refusals_reasoned)
{
    unsetenv("SWITCHYARD_NPUSIM_CONFIG");
    char path[512];
    sy_pcheck_report *r = run_check(nt_plugin_path("npusim/sy-npusim.so", path, sizeof path),
                                    SY_PCHECK_TOL_AUTO);
    expect_all_pass(r);
    cr_assert_str_eq(r->plugin, "npusim");
    expect_outcome(r, "matmul q8_0 x f32 K=64 N=24 M=7", SY_PCHECK_PASS);
    expect_outcome(r, "matmul q4_0 x f32 K=512 N=96 M=9", SY_PCHECK_PASS);
    expect_outcome(r, "add f32 [64,6,2] by [64,1,1]", SY_PCHECK_PASS);
    expect_outcome(r, "rope f32 [16,3,4] neox n_rot=16", SY_PCHECK_REFUSED);
    expect_outcome(r, "matmul f32 x f32 K=100 N=12 M=3", SY_PCHECK_REFUSED);
    expect_outcome(r, "add larger than the device's memory", SY_PCHECK_PASS);
    expect_outcome(r, "host pointer maps the buffer", SY_PCHECK_PASS);
    expect_outcome(r, "import_host wraps host memory", SY_PCHECK_SKIP);
    /* Nothing of npusim ran on the host's reference kernels. */
    for (uint32_t i = 0; i < r->n_results; i++)
        cr_assert(strstr(r->results[i].detail, "reference kernels") == NULL, "%s: %s",
                  r->results[i].name, r->results[i].detail);
    cr_assert_gt(r->refused, 50);
    sy_pcheck_report_destroy(r);
}

Test(plugin_check, fails_npusim_held_to_float_tolerances)
{
    /* The int8 tolerance is what lets a W8A8 NPU pass; without it the
     * quantisation error shows on matmul, so the check has teeth. */
    unsetenv("SWITCHYARD_NPUSIM_CONFIG");
    char path[512];
    sy_pcheck_report *r = run_check(nt_plugin_path("npusim/sy-npusim.so", path, sizeof path),
                                    SY_PCHECK_TOL_FLOAT);
    expect_outcome(r, "matmul q8_0 x f32 K=512 N=96 M=9", SY_PCHECK_FAIL);
    sy_pcheck_report_destroy(r);
}

Test(plugin_check, passes_on_the_opencl_plugin_where_it_was_built)
{
    char path[512];
    nt_plugin_path("opencl/sy-opencl.so", path, sizeof path);
    if (access(path, F_OK) != 0)
        cr_skip_test("the opencl plugin was not built");
    sy_pcheck_report *r = run_check(path, SY_PCHECK_TOL_AUTO);
    const sy_pcheck_result *init = sy_pcheck_find(r, "init succeeds");
    if (init && init->outcome == SY_PCHECK_FAIL)
        cr_skip_test("no OpenCL platform here: %s", init->detail);
    expect_all_pass(r);
    expect_outcome(r, "describe writes nothing for struct_size 0", SY_PCHECK_PASS);
    expect_outcome(r, "event_wait completes queued work", SY_PCHECK_PASS);
    sy_pcheck_report_destroy(r);
}

Test(plugin_check, passes_on_the_test_devices_the_core_tests_build)
{
    /* testdev is the smallest complete plugin in the tree (the guide points
     * vendors at it): it must pass what it teaches, mapped or opaque. */
    static const char *const files[] = {"testdev.so", "opaquedev.so", "unmapped.so",
                                        "asyncdev.so", "asyncdev_b.so"};
    for (size_t i = 0; i < sizeof files / sizeof files[0]; i++) {
        char path[512];
        snprintf(path, sizeof path, "%s/%s", SY_TEST_PLUGIN_DIR, files[i]);
        sy_pcheck_report *r = run_check(path, SY_PCHECK_TOL_AUTO);
        expect_all_pass(r);
        expect_outcome(r, "describe honours a smaller struct_size", SY_PCHECK_PASS);
        expect_outcome(r, "describe writes nothing for struct_size 0", SY_PCHECK_PASS);
        expect_outcome(r, "allocation beyond memory fails cleanly", SY_PCHECK_PASS);
        expect_outcome(r, "event_wait completes queued work",
                       strncmp(files[i], "async", 5) == 0 ? SY_PCHECK_PASS : SY_PCHECK_SKIP);
        sy_pcheck_report_destroy(r);
    }
}

static void expect_broken(const char *file, const char *check)
{
    char path[512];
    snprintf(path, sizeof path, "%s/%s", SY_TEST_PLUGIN_DIR, file);
    sy_pcheck_report *r = run_check(path, SY_PCHECK_TOL_AUTO);
    cr_assert_gt(r->failed, 0, "plugin-check passed %s", file);
    expect_outcome(r, check, SY_PCHECK_FAIL);
    sy_pcheck_report_destroy(r);
}

Test(plugin_check, fails_each_broken_plugin_naming_the_check_it_breaks)
{
    expect_broken("x.so", "loads as a shared object");
    expect_broken("no_entry.so", "exports sy_plugin_query");
    expect_broken("query_null.so", "serves a host of ABI 1.0");
    expect_broken("abi99.so", "table ABI major matches");
    expect_broken("small_table.so", "table struct_size covers ABI 1.0");
    expect_broken("null_execute.so", "required functions are present");
    expect_broken("init_fails.so", "init succeeds");
    expect_broken("fault_describe.so", "describe succeeds");
    expect_broken("fault_execute.so", "add f32 [64,6,2] by [64,6,2]");
    expect_broken("overrun/overrun.so", "describe stays within struct_size");
    expect_broken("overrun/overrun.so", "describe honours a smaller struct_size");
    expect_broken("overrun/lazy_wait.so", "event_wait completes queued work");
}

Test(plugin_check, reports_the_reason_a_broken_init_gave)
{
    char path[512];
    snprintf(path, sizeof path, "%s/init_fails.so", SY_TEST_PLUGIN_DIR);
    sy_pcheck_report *r = run_check(path, SY_PCHECK_TOL_AUTO);
    const sy_pcheck_result *res = sy_pcheck_find(r, "init succeeds");
    cr_assert(res != NULL);
    cr_assert(strstr(res->detail, "init failed: SY_E_DEVICE") != NULL, "%s", res->detail);
    cr_assert(strstr(res->detail, "plugin said:") != NULL, "%s", res->detail);
    sy_pcheck_report_destroy(r);
}

Test(plugin_check, repeats_its_inputs_from_a_given_seed)
{
    char path[512];
    nt_plugin_path("npusim/sy-npusim.so", path, sizeof path);
    unsetenv("SWITCHYARD_NPUSIM_CONFIG");
    char detail[2][320];
    for (int i = 0; i < 2; i++) {
        sy_pcheck_options o;
        sy_pcheck_options_init(&o);
        o.path = path;
        o.seed = 0x1234567;
        sy_pcheck_report *r = NULL;
        cr_assert_eq(sy_pcheck_run(&o, &r), SY_OK);
        cr_assert_eq(r->seed, 0x1234567u);
        const sy_pcheck_result *res = sy_pcheck_find(r, "matmul q4_0 x f32 K=512 N=96 M=9");
        cr_assert(res != NULL);
        snprintf(detail[i], sizeof detail[i], "%s", res->detail);
        sy_pcheck_report_destroy(r);
    }
    cr_assert_str_eq(detail[0], detail[1]);
}
