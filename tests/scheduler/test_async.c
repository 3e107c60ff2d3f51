/* Asynchrony between devices: the executor launches independent segments
 * without waiting, waits for just the producer's event where a value
 * crosses devices, and still names the node a device fails on when the
 * failure only shows at a wait.
 *
 * The devices are testdev built asynchronous (asyncdev, asyncdev_b,
 * async_fault_matmul): execute() only queues copies of the nodes and the
 * work runs when the core waits for an event after it or synchronizes.
 * A missing wait therefore reads stale bytes on every run, and the order
 * of launches and waits is visible in the plugins' debug log. */
#include <criterion/criterion.h>
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include "sched_test_util.h"

static sy_runtime *runtime_with(const char *plugins, st_log *cap, uint32_t n_devices)
{
    sy_runtime *rt = st_runtime_logging(plugins, st_log_append, cap);
    cr_assert_eq(sy_runtime_device_count(rt), n_devices, "%s", cap->text);
    return rt;
}

static sy_tensor *op(sy_graph *g, sy_op o, const char *name, sy_tensor *a, sy_tensor *b)
{
    sy_tensor *in[2] = {a, b}, *out = NULL;
    cr_assert_eq(sy_graph_add_node(g, o, name, in, b ? 2 : 1, NULL, &out), SY_OK, "%s: %s", name,
                 sy_graph_last_error(g));
    return out;
}

/* x -> branch p (p1..p3) and branch q (q1..q3), independent, -> join = p3 + q3.
 * (Pins match op names too, so the names avoid "add", "mul", "silu".) */
static sy_graph *two_branches(float *x, float *out)
{
    sy_graph *g = NULL;
    cr_assert_eq(sy_graph_create(&g), SY_OK);
    int64_t ne[2] = {64, 8};
    sy_tensor *tx = NULL;
    cr_assert_eq(sy_graph_add_tensor(g, "x", SY_DTYPE_F32, 2, ne, SY_ROLE_INPUT, x, &tx), SY_OK);
    sy_tensor *a1 = op(g, SY_OP_SILU, "p1", tx, NULL);
    sy_tensor *a2 = op(g, SY_OP_MUL, "p2", a1, tx);
    sy_tensor *a3 = op(g, SY_OP_ADD, "p3", a2, a1);
    sy_tensor *b1 = op(g, SY_OP_MUL, "q1", tx, tx);
    sy_tensor *b2 = op(g, SY_OP_SILU, "q2", b1, NULL);
    sy_tensor *b3 = op(g, SY_OP_ADD, "q3", b2, tx);
    sy_tensor *j = op(g, SY_OP_ADD, "join", a3, b3);
    cr_assert_eq(sy_graph_mark_output(g, j), SY_OK);
    cr_assert_eq(sy_graph_set_host_data(g, j, out), SY_OK);
    cr_assert_eq(sy_graph_freeze(g), SY_OK, "%s", sy_graph_last_error(g));
    return g;
}

static sy_plan *plan_pinned(sy_planner *pl, const sy_graph *g, const char *const *pins,
                            uint32_t n_pins)
{
    sy_plan_options o;
    sy_plan_options_init(&o);
    o.pins = pins;
    o.n_pins = n_pins;
    return st_plan(pl, g, &o);
}

/* Position of the first |needle| in |text| at or after |from|, or -1. */
static long find_from(const char *text, const char *needle, long from)
{
    const char *p = strstr(text + from, needle);
    return p ? (long)(p - text) : -1;
}

Test(async, independent_branches_are_both_launched_before_either_is_waited_for)
{
    st_log *cap = calloc(1, sizeof *cap);
    sy_runtime *rt = runtime_with(SY_TEST_CPU_PLUGIN ":" PLUGIN("asyncdev.so") ":"
                                  PLUGIN("asyncdev_b.so"),
                                  cap, 3);
    float x[64 * 8], want[64 * 8], got[64 * 8];
    uint64_t seed = st_fresh_seed();
    for (uint32_t i = 0; i < 64 * 8; i++)
        x[i] = (float)(2.0 * st_uniform(&seed) - 1.0);
    sy_graph *g = two_branches(x, want);
    cr_assert_eq(sy_runtime_execute_on(rt, g, ST_CPU), SY_OK, "%s", sy_runtime_last_error(rt));
    sy_graph_destroy(g);
    g = two_branches(x, got);

    sy_planner *pl;
    cr_assert_eq(sy_planner_create(rt, &pl), SY_OK);
    const char *pins[] = {"p?=asyncdev", "q?=asyncdev_b", "join=cpu"};
    sy_plan *plan = plan_pinned(pl, g, pins, 3);
    sy_plan_summary s;
    cr_assert_eq(sy_plan_query_summary(plan, &s), SY_OK);
    cr_assert_eq(s.n_segments, 3u, "%u segments", s.n_segments);
    /* Both branches run at once: the step is predicted shorter than its
     * parts in a row. */
    cr_assert_lt(s.predicted_s, (s.compute_s + s.transfer_s) * (1 - 1e-9), "%g vs %g + %g",
                 s.predicted_s, s.compute_s, s.transfer_s);

    cap->text[0] = '\0';
    memset(got, 0, sizeof got);
    cr_assert_eq(sy_runtime_execute_plan(rt, g, plan), SY_OK, "%s", sy_runtime_last_error(rt));
    for (uint32_t i = 0; i < 64 * 8; i++)
        cr_assert(fabsf(got[i] - want[i]) <= 1e-5f + 1e-5f * fabsf(want[i]), "%u: %g vs %g", i,
                  (double)got[i], (double)want[i]);
    const char *t = cap->text;
    long a_exec = find_from(t, "asyncdev: execute 3 nodes", 0);
    long b_exec = find_from(t, "asyncdev_b: execute 3 nodes", 0);
    cr_assert(a_exec >= 0 && b_exec >= 0, "log:\n%s", t);
    /* Nothing of asyncdev was waited for before asyncdev_b's branch was
     * launched (the serial executor synchronized after each segment). */
    long a_wait = find_from(t, "asyncdev: event_wait", a_exec);
    long a_sync = find_from(t, "asyncdev: synchronize", a_exec);
    cr_assert(a_wait >= 0, "asyncdev's value is waited for by its event:\n%s", t);
    cr_assert_lt(b_exec, a_wait, "log:\n%s", t);
    cr_assert(a_sync < 0 || b_exec < a_sync, "log:\n%s", t);
    /* The consumer waited for exactly the producer's event: the one each
     * device recorded right after its branch. */
    long a_rec = find_from(t, "asyncdev: event_record ", a_exec);
    long b_rec = find_from(t, "asyncdev_b: event_record ", b_exec);
    cr_assert(a_rec >= 0 && b_rec >= 0, "log:\n%s", t);
    unsigned long long a_ev = 0, b_ev = 0, a_waited = 0, b_waited = 0;
    cr_assert_eq(sscanf(t + a_rec, "asyncdev: event_record %llu", &a_ev), 1);
    cr_assert_eq(sscanf(t + b_rec, "asyncdev_b: event_record %llu", &b_ev), 1);
    cr_assert_eq(sscanf(t + a_wait, "asyncdev: event_wait %llu", &a_waited), 1);
    long b_wait = find_from(t, "asyncdev_b: event_wait", b_exec);
    cr_assert(b_wait >= 0, "log:\n%s", t);
    cr_assert_eq(sscanf(t + b_wait, "asyncdev_b: event_wait %llu", &b_waited), 1);
    cr_assert_eq(a_waited, a_ev);
    cr_assert_eq(b_waited, b_ev);
    cr_assert_null(strstr(t, "leaked"), "%s", t);

    sy_plan_release(plan);
    sy_planner_destroy(pl);
    sy_graph_destroy(g);
    sy_runtime_destroy(rt);
    cr_assert_null(strstr(cap->text, "leaked"), "%s", cap->text);
    cr_assert_null(strstr(cap->text, "never ran"), "%s", cap->text);
    free(cap);
    st_check_leaks();
}

Test(async, a_cpu_branch_is_issued_after_the_asynchronous_branch_it_does_not_need)
{
    /* In graph order the cpu branch (p) comes first; the plan issues the
     * asynchronous branch (q) before it so both run at once. */
    st_log *cap = calloc(1, sizeof *cap);
    sy_runtime *rt = runtime_with(SY_TEST_CPU_PLUGIN ":" PLUGIN("asyncdev.so"), cap, 2);
    float x[64 * 8] = {0}, out[64 * 8];
    sy_graph *g = two_branches(x, out);
    sy_planner *pl;
    cr_assert_eq(sy_planner_create(rt, &pl), SY_OK);
    const char *pins[] = {"p?=cpu", "q?=asyncdev", "join=cpu"};
    sy_plan *plan = plan_pinned(pl, g, pins, 3);
    sy_plan_step_info si;
    uint32_t first_segment = UINT32_MAX;
    for (uint32_t k = 0; first_segment == UINT32_MAX; k++) {
        cr_assert_eq(sy_plan_query_step(plan, k, &si), SY_OK);
        if (si.kind == SY_PLAN_STEP_SEGMENT)
            first_segment = si.device;
    }
    uint32_t adev;
    cr_assert_eq(sy_runtime_find_device(rt, "asyncdev", &adev), SY_OK);
    cr_assert_eq(first_segment, adev);
    char why[256];
    cr_assert(st_check_plan(rt, g, plan, why, sizeof why), "%s", why);
    sy_plan_summary s;
    sy_plan_query_summary(plan, &s);
    cr_assert_lt(s.predicted_s, (s.compute_s + s.transfer_s) * (1 - 1e-9));
    sy_plan_release(plan);
    sy_planner_destroy(pl);
    sy_graph_destroy(g);
    sy_runtime_destroy(rt);
    free(cap);
    st_check_leaks();
}

static const st_decoder_shape decoder = {
    .n_layer = 2,
    .n_embd = 64,
    .n_head = 4,
    .n_head_kv = 2,
    .n_ff = 128,
    .n_vocab = 256,
    .n_ctx = 16,
    .n_tokens = 3,
    .n_past = 2,
    .kv_type = SY_DTYPE_F32,
    .with_data = true,
};

Test(async, a_decoder_spread_over_two_asynchronous_devices_gives_the_cpus_output)
{
    st_log *cap = calloc(1, sizeof *cap);
    sy_runtime *rt = runtime_with(SY_TEST_CPU_PLUGIN ":" PLUGIN("asyncdev.so") ":"
                                  PLUGIN("asyncdev_b.so"),
                                  cap, 3);
    st_graph sg;
    st_decoder_graph(&sg, &decoder, st_fresh_seed());
    float *want = malloc(sg.out_count * sizeof *want);
    cr_assert_eq(sy_runtime_execute_on(rt, sg.g, ST_CPU), SY_OK, "%s", sy_runtime_last_error(rt));
    memcpy(want, sg.out, sg.out_count * sizeof *want);
    sy_planner *pl;
    cr_assert_eq(sy_planner_create(rt, &pl), SY_OK);
    const char *pins[] = {"blk.0.*=asyncdev", "blk.1.attn*=asyncdev_b", "blk.1.ffn*=asyncdev",
                          "*=cpu"};
    sy_plan *plan = plan_pinned(pl, sg.g, pins, 4);
    cr_assert_eq(st_devices_used(plan), 3u);
    sy_executor *x;
    cr_assert_eq(sy_executor_create(rt, &x), SY_OK);
    for (int run = 0; run < 2; run++) {
        memset(sg.out, 0, sg.out_count * sizeof *want);
        cr_assert_eq(sy_executor_run(x, sg.g, plan), SY_OK, "%s", sy_runtime_last_error(rt));
        for (uint64_t i = 0; i < sg.out_count; i++)
            cr_assert(fabsf(sg.out[i] - want[i]) <= 1e-4f + 1e-4f * fabsf(want[i]),
                      "run %d, %llu: %g vs %g", run, (unsigned long long)i, (double)sg.out[i],
                      (double)want[i]);
    }
    sy_executor_destroy(x);
    sy_plan_release(plan);
    sy_planner_destroy(pl);
    free(want);
    st_graph_free(&sg);
    sy_runtime_destroy(rt);
    cr_assert_null(strstr(cap->text, "leaked"), "%s", cap->text);
    cr_assert_null(strstr(cap->text, "never ran"), "%s", cap->text);
    free(cap);
    st_check_leaks();
}

Test(async, a_kernel_failing_only_at_the_wait_is_named_with_its_node_and_device)
{
    st_log *cap = calloc(1, sizeof *cap);
    sy_runtime *rt =
        runtime_with(SY_TEST_CPU_PLUGIN ":" PLUGIN("async_fault_matmul.so"), cap, 2);
    uint32_t fdev;
    cr_assert_eq(sy_runtime_find_device(rt, "async_fault_matmul", &fdev), SY_OK);
    st_graph sg;
    st_decoder_graph(&sg, &decoder, 21);
    float *want = malloc(sg.out_count * sizeof *want);
    cr_assert_eq(sy_runtime_execute_on(rt, sg.g, ST_CPU), SY_OK, "%s", sy_runtime_last_error(rt));
    memcpy(want, sg.out, sg.out_count * sizeof *want);
    sy_planner *pl;
    cr_assert_eq(sy_planner_create(rt, &pl), SY_OK);
    const char *pins[] = {"blk.1.ffn*=async_fault_matmul", "*=cpu"};
    sy_plan *plan = plan_pinned(pl, sg.g, pins, 2);
    cr_assert_eq(st_devices_used(plan), 2u);
    cr_assert_eq(sy_runtime_execute_plan(rt, sg.g, plan), SY_E_DEVICE);
    sy_plan_release(plan);
    sy_device_failure f;
    cr_assert_eq(sy_runtime_query_device_failure(rt, &f), SY_OK);
    cr_assert_eq(f.device, fdev);
    cr_assert_eq(f.status, SY_E_DEVICE);
    cr_assert_neq(f.node, UINT32_MAX, "%s", f.text);
    cr_assert_eq(sy_graph_node(sg.g, f.node)->op, SY_OP_MATMUL, "%s", f.text);
    cr_assert(strstr(f.text, "async_fault_matmul") && strstr(f.text, f.node_name), "%s", f.text);
    cr_assert(strstr(cap->text, "kernel failed (fault injection)"), "%s", cap->text);
    /* The launch itself succeeded: the failure surfaced at a wait. */
    cr_assert(strstr(cap->text, "async_fault_matmul: event_wait") ||
                  strstr(cap->text, "async_fault_matmul: synchronize"),
              "%s", cap->text);

    /* Taking matmul off the device, a new plan gives the cpu's output. */
    cr_assert_eq(sy_planner_exclude(pl, "matmul", fdev, f.text), SY_OK);
    plan = st_plan(pl, sg.g, NULL);
    memset(sg.out, 0, sg.out_count * sizeof *want);
    cr_assert_eq(sy_runtime_execute_plan(rt, sg.g, plan), SY_OK, "%s", sy_runtime_last_error(rt));
    for (uint64_t i = 0; i < sg.out_count; i++)
        cr_assert(fabsf(sg.out[i] - want[i]) <= 1e-4f + 1e-4f * fabsf(want[i]), "%llu: %g vs %g",
                  (unsigned long long)i, (double)sg.out[i], (double)want[i]);
    sy_plan_release(plan);
    free(want);
    st_graph_free(&sg);
    sy_planner_destroy(pl);
    sy_runtime_destroy(rt);
    cr_assert_null(strstr(cap->text, "leaked"), "%s", cap->text);
    free(cap);
    st_check_leaks();
}

/* The real OpenCL plugin (PoCL here) beside the cpu: unified, and with
 * SWITCHYARD_OPENCL_DISCRETE=1 as a device with its own memory (every
 * transfer a copy).  Skipped where the plugin was not built or finds no
 * device. */
static sy_runtime *opencl_runtime(bool discrete, st_log *cap)
{
    if (access(SY_TEST_OPENCL_PLUGIN, F_OK) != 0)
        return NULL;
    if (discrete)
        setenv("SWITCHYARD_OPENCL_DISCRETE", "1", 1);
    else
        unsetenv("SWITCHYARD_OPENCL_DISCRETE");
    sy_runtime *rt =
        st_runtime_logging(SY_TEST_CPU_PLUGIN ":" SY_TEST_OPENCL_PLUGIN, st_log_append, cap);
    uint32_t dev;
    if (sy_runtime_find_device(rt, "opencl:0", &dev) != SY_OK) {
        sy_runtime_destroy(rt);
        return NULL;
    }
    return rt;
}

Test(async, plans_over_the_cpu_and_opencl_give_the_cpus_outputs)
{
    for (int discrete = 0; discrete < 2; discrete++) {
        st_log *cap = calloc(1, sizeof *cap);
        sy_runtime *rt = opencl_runtime(discrete, cap);
        if (!rt) {
            free(cap);
            cr_skip_test("no opencl:0 here (plugin not built or no OpenCL device)");
        }
        /* Two branches, the opencl one launched while the cpu's runs. */
        float x[64 * 8], want[64 * 8], got[64 * 8];
        uint64_t seed = st_fresh_seed();
        for (uint32_t i = 0; i < 64 * 8; i++)
            x[i] = (float)(2.0 * st_uniform(&seed) - 1.0);
        sy_graph *g = two_branches(x, want);
        cr_assert_eq(sy_runtime_execute_on(rt, g, ST_CPU), SY_OK, "%s",
                     sy_runtime_last_error(rt));
        sy_graph_destroy(g);
        g = two_branches(x, got);
        sy_planner *pl;
        cr_assert_eq(sy_planner_create(rt, &pl), SY_OK);
        const char *pins[] = {"p?=cpu", "q?=opencl:0", "join=cpu"};
        sy_plan *plan = plan_pinned(pl, g, pins, 3);
        sy_plan_summary s;
        sy_plan_query_summary(plan, &s);
        cr_assert_lt(s.predicted_s, (s.compute_s + s.transfer_s) * (1 - 1e-9));
        cr_assert_eq(sy_runtime_execute_plan(rt, g, plan), SY_OK, "%s",
                     sy_runtime_last_error(rt));
        for (uint32_t i = 0; i < 64 * 8; i++)
            cr_assert(fabsf(got[i] - want[i]) <= 1e-5f + 1e-5f * fabsf(want[i]),
                      "discrete %d, %u: %g vs %g", discrete, i, (double)got[i], (double)want[i]);
        sy_plan_release(plan);
        sy_graph_destroy(g);

        /* A decoder step with its layers split between the devices, twice
         * through one executor (kept weights, arenas reused). */
        st_graph sg;
        st_decoder_graph(&sg, &decoder, st_fresh_seed());
        float *dwant = malloc(sg.out_count * sizeof *dwant);
        cr_assert_eq(sy_runtime_execute_on(rt, sg.g, ST_CPU), SY_OK, "%s",
                     sy_runtime_last_error(rt));
        memcpy(dwant, sg.out, sg.out_count * sizeof *dwant);
        const char *dpins[] = {"blk.0.*=opencl:0", "blk.1.ffn*=opencl:0", "*=cpu"};
        plan = plan_pinned(pl, sg.g, dpins, 3);
        cr_assert_eq(st_devices_used(plan), 2u);
        sy_executor *x_ = NULL;
        cr_assert_eq(sy_executor_create(rt, &x_), SY_OK);
        for (int run = 0; run < 2; run++) {
            memset(sg.out, 0, sg.out_count * sizeof *dwant);
            cr_assert_eq(sy_executor_run(x_, sg.g, plan), SY_OK, "%s",
                         sy_runtime_last_error(rt));
            for (uint64_t i = 0; i < sg.out_count; i++)
                cr_assert(fabsf(sg.out[i] - dwant[i]) <= 1e-4f + 1e-4f * fabsf(dwant[i]),
                          "discrete %d run %d, %llu: %g vs %g", discrete, run,
                          (unsigned long long)i, (double)sg.out[i], (double)dwant[i]);
        }
        sy_executor_destroy(x_);
        sy_plan_release(plan);
        free(dwant);
        st_graph_free(&sg);
        sy_planner_destroy(pl);
        sy_runtime_destroy(rt);
        free(cap);
    }
    unsetenv("SWITCHYARD_OPENCL_DISCRETE");
}
