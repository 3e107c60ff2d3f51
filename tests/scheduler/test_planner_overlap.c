/* The planner with devices that overlap work (asyncdev and asyncdev_b:
 * testdev built with events): where the graph has independent branches
 * it also plans by HEFT for the overlapped step time, keeps whichever of
 * that plan and the DP's plan_order.c predicts faster and says which in
 * the algorithm line; a chain, devices without events, or one device
 * with events beside synchronous ones, plan as before. */
#include <criterion/criterion.h>
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "sched_test_util.h"

static sy_runtime *runtime_of(const char *plugins, uint32_t n_devices)
{
    sy_runtime_options o;
    sy_runtime_options_init(&o);
    o.plugin_path = plugins;
    o.no_default_paths = true;
    sy_runtime *rt = NULL;
    cr_assert_eq(sy_runtime_create(&o, &rt), SY_OK);
    cr_assert_eq(sy_runtime_device_count(rt), n_devices);
    return rt;
}

/* x [K, M] -> |layers| matmuls with [K, K] weights in branch "left" and
 * in branch "right", joined by an add; |branches| false chains them
 * instead (right reads left's end). */
typedef struct two_branch {
    sy_graph *g;
    float *x, *w, *out;
    uint64_t out_count;
} two_branch;

static void two_branch_build(two_branch *t, int64_t K, int64_t M, int layers, bool branches)
{
    cr_assert_eq(sy_graph_create(&t->g), SY_OK);
    t->x = malloc(sizeof *t->x * (size_t)(K * M));
    t->w = malloc(sizeof *t->w * (size_t)(K * K * 2 * layers));
    t->out_count = (uint64_t)(K * M);
    t->out = calloc(t->out_count, sizeof *t->out);
    uint64_t s = st_fresh_seed();
    for (int64_t i = 0; i < K * M; i++)
        t->x[i] = (float)(st_uniform(&s) - 0.5);
    for (int64_t i = 0; i < K * K * 2 * layers; i++)
        t->w[i] = (float)(st_uniform(&s) - 0.5) * 0.1f;
    int64_t xne[2] = {K, M}, wne[2] = {K, K};
    sy_tensor *x = NULL, *br[2];
    cr_assert_eq(sy_graph_add_tensor(t->g, "x", SY_DTYPE_F32, 2, xne, SY_ROLE_INPUT, t->x, &x),
                 SY_OK);
    const char *side[2] = {"left", "right"};
    for (int b = 0; b < 2; b++) {
        br[b] = b == 0 || branches ? x : br[0];
        for (int l = 0; l < layers; l++) {
            char name[32];
            snprintf(name, sizeof name, "%s.w%d", side[b], l);
            sy_tensor *w = NULL, *in[2];
            cr_assert_eq(sy_graph_add_tensor(t->g, name, SY_DTYPE_F32, 2, wne, SY_ROLE_WEIGHT,
                                             t->w + (size_t)(K * K) * (size_t)(b * layers + l),
                                             &w),
                         SY_OK);
            snprintf(name, sizeof name, "%s.mm%d", side[b], l);
            in[0] = w;
            in[1] = br[b];
            cr_assert_eq(sy_graph_add_node(t->g, SY_OP_MATMUL, name, in, 2, NULL, &br[b]), SY_OK);
        }
    }
    sy_tensor *out = NULL, *jin[2] = {br[0], br[1]};
    cr_assert_eq(sy_graph_add_node(t->g, SY_OP_ADD, "join", jin, 2, NULL, &out), SY_OK);
    cr_assert_eq(sy_graph_mark_output(t->g, out), SY_OK);
    cr_assert_eq(sy_graph_set_host_data(t->g, out, t->out), SY_OK);
    cr_assert_eq(sy_graph_freeze(t->g), SY_OK, "%s", sy_graph_last_error(t->g));
}

static void two_branch_free(two_branch *t)
{
    sy_graph_destroy(t->g);
    free(t->x);
    free(t->w);
    free(t->out);
}

/* Device slot of node |name| in |plan|. */
static uint32_t device_of(const sy_plan *plan, const sy_graph *g, const char *name)
{
    for (uint32_t i = 0; i < sy_graph_node_count(g); i++) {
        sy_plan_node_info info;
        cr_assert_eq(sy_plan_query_node(plan, i, &info), SY_OK);
        if (strcmp(sy_graph_node(g, i)->name, name) == 0)
            return info.device;
    }
    cr_assert_fail("no node %s", name);
    return UINT32_MAX;
}

Test(planner_overlap, branches_go_to_two_asynchronous_devices_by_heft_and_run_correctly)
{
    sy_runtime *rt =
        runtime_of(SY_TEST_CPU_PLUGIN ":" PLUGIN("asyncdev.so") ":" PLUGIN("asyncdev_b.so"), 3);
    two_branch t;
    two_branch_build(&t, 512, 64, 3, true);
    sy_planner *pl;
    cr_assert_eq(sy_planner_create(rt, &pl), SY_OK);
    sy_plan_options o;
    sy_plan_options_init(&o);
    o.devices = "asyncdev,asyncdev_b";
    sy_plan *plan = st_plan(pl, t.g, &o);
    sy_plan_summary s;
    cr_assert_eq(sy_plan_query_summary(plan, &s), SY_OK);
    cr_assert(strncmp(s.algorithm, "heft with insertion", 19) == 0, "%s", s.algorithm);
    cr_assert_lt(s.predicted_s, (s.compute_s + s.transfer_s) * 0.9, "%s: %g vs %g + %g",
                 s.algorithm, s.predicted_s, s.compute_s, s.transfer_s);
    cr_assert_neq(device_of(plan, t.g, "left.mm1"), device_of(plan, t.g, "right.mm1"), "%s",
                  s.algorithm);
    /* The DP's plan is the planner's other candidate: it is slower. */
    sy_plan_options_init(&o);
    o.devices = "asyncdev,asyncdev_b";
    o.algorithm = SY_PLAN_DP;
    sy_plan *dp = st_plan(pl, t.g, &o);
    sy_plan_summary sd;
    cr_assert_eq(sy_plan_query_summary(dp, &sd), SY_OK);
    cr_assert_lt(s.predicted_s, sd.predicted_s, "heft %g, dp %g", s.predicted_s, sd.predicted_s);
    /* Run: the same outputs as the cpu alone. */
    float *got = malloc(t.out_count * sizeof *got);
    cr_assert_eq(sy_runtime_execute_plan(rt, t.g, plan), SY_OK, "%s", sy_runtime_last_error(rt));
    memcpy(got, t.out, t.out_count * sizeof *got);
    cr_assert_eq(sy_runtime_execute_on(rt, t.g, ST_CPU), SY_OK, "%s", sy_runtime_last_error(rt));
    for (uint64_t i = 0; i < t.out_count; i++)
        cr_assert(fabsf(got[i] - t.out[i]) <= 1e-4f + 1e-4f * fabsf(t.out[i]), "%llu: %g vs %g",
                  (unsigned long long)i, (double)got[i], (double)t.out[i]);
    free(got);
    sy_plan_release(dp);
    sy_plan_release(plan);
    sy_planner_destroy(pl);
    two_branch_free(&t);
    sy_runtime_destroy(rt);
}

Test(planner_overlap, a_chain_or_devices_without_events_keep_the_dps_plan)
{
    sy_runtime *rt = runtime_of(SY_TEST_CPU_PLUGIN ":" PLUGIN("asyncdev.so") ":"
                                PLUGIN("asyncdev_b.so") ":" PLUGIN("testdev.so"),
                                4);
    sy_planner *pl;
    cr_assert_eq(sy_planner_create(rt, &pl), SY_OK);
    sy_plan_options o;
    sy_plan_summary s;
    /* A chain: nothing to overlap, HEFT is not asked. */
    two_branch chain;
    two_branch_build(&chain, 128, 8, 2, false);
    sy_plan_options_init(&o);
    o.devices = "asyncdev,asyncdev_b";
    sy_plan *plan = st_plan(pl, chain.g, &o);
    cr_assert_eq(sy_plan_query_summary(plan, &s), SY_OK);
    cr_assert(strncmp(s.algorithm, "dp", 2) == 0 && !strstr(s.algorithm, "heft"), "%s",
              s.algorithm);
    sy_plan_release(plan);
    two_branch_free(&chain);
    /* Branches over devices that all run on the host: no overlap. */
    two_branch t;
    two_branch_build(&t, 128, 8, 2, true);
    sy_plan_options_init(&o);
    o.devices = "cpu,testdev";
    plan = st_plan(pl, t.g, &o);
    cr_assert_eq(sy_plan_query_summary(plan, &s), SY_OK);
    cr_assert_null(strstr(s.algorithm, "heft"), "%s", s.algorithm);
    cr_assert(fabs(s.predicted_s - (s.compute_s + s.transfer_s)) <= 1e-12 + 1e-9 * s.predicted_s);
    sy_plan_release(plan);
    /* One device with events beside the cpu: not asked either (it may
     * share the cpu's cores; see planner.c). */
    sy_plan_options_init(&o);
    o.devices = "cpu,asyncdev";
    plan = st_plan(pl, t.g, &o);
    cr_assert_eq(sy_plan_query_summary(plan, &s), SY_OK);
    cr_assert_null(strstr(s.algorithm, "heft"), "%s", s.algorithm);
    sy_plan_release(plan);
    two_branch_free(&t);
    sy_planner_destroy(pl);
    sy_runtime_destroy(rt);
}
