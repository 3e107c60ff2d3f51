/* Planning on real devices: the cpu plugin, testdev (unified, refuses
 * argmax) and opaquedev (not unified).  Capability errors, policies, pins,
 * memory budgets, and the plan invariants on random graphs and decoders. */
#include <criterion/criterion.h>
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <unistd.h>

#include "plan_internal.h"
#include "probe.h"
#include "sched_test_util.h"

static sy_planner *planner_with_profiles(sy_runtime *rt)
{
    sy_planner *pl = NULL;
    cr_assert_eq(sy_planner_create(rt, &pl), SY_OK);
    char path[512];
    cr_assert_eq(
        sy_planner_load_profile(pl, st_fixture("testdev_fast_matmul.json", path, sizeof path)),
        SY_OK, "%s", sy_planner_last_error(pl));
    cr_assert_eq(sy_planner_load_profile(
                     pl, st_fixture("opaquedev_fast_elementwise.json", path, sizeof path)),
                 SY_OK, "%s", sy_planner_last_error(pl));
    return pl;
}

static const st_decoder_shape small_decoder = {
    .n_layer = 3,
    .n_embd = 64,
    .n_head = 4,
    .n_head_kv = 2,
    .n_ff = 128,
    .n_vocab = 256,
    .n_ctx = 32,
    .n_tokens = 1,
    .n_past = 5,
    .kv_type = SY_DTYPE_F16,
    .with_data = false,
};

static uint32_t node_index(const sy_graph *g, const char *name)
{
    for (uint32_t i = 0; i < sy_graph_node_count(g); i++)
        if (strcmp(sy_graph_node(g, i)->name, name) == 0)
            return i;
    cr_assert_fail("no node '%s'", name);
    return 0;
}

Test(planner, create_rejects_a_missing_runtime_or_out_pointer)
{
    sy_planner *pl = (sy_planner *)1;
    cr_assert_eq(sy_planner_create(NULL, &pl), SY_E_INVALID_ARG);
    cr_assert_null(pl);
    cr_assert_eq(sy_planner_create(NULL, NULL), SY_E_INVALID_ARG);
    sy_planner_destroy(NULL);
    cr_assert_str_eq(sy_planner_last_error(NULL), "");
    st_check_leaks();
}

Test(planner, refuses_a_graph_that_is_not_frozen_and_bad_options)
{
    sy_runtime *rt = st_runtime();
    sy_planner *pl;
    cr_assert_eq(sy_planner_create(rt, &pl), SY_OK);
    sy_graph *g;
    cr_assert_eq(sy_graph_create(&g), SY_OK);
    sy_plan *plan = (sy_plan *)1;
    cr_assert_eq(sy_planner_plan(pl, g, NULL, &plan), SY_E_STATE);
    cr_assert_null(plan);
    cr_assert(strstr(sy_planner_last_error(pl), "not frozen"));
    cr_assert_eq(sy_graph_freeze(g), SY_OK);
    sy_plan_options o;
    sy_plan_options_init(&o);
    o.struct_size = 4;
    cr_assert_eq(sy_planner_plan(pl, g, &o, &plan), SY_E_INVALID_ARG);
    sy_plan_options_init(&o);
    o.policy = "fastest";
    cr_assert_eq(sy_planner_plan(pl, g, &o, &plan), SY_E_INVALID_ARG);
    cr_assert(strstr(sy_planner_last_error(pl), "unknown policy 'fastest'"));
    o.policy = "prefer:nope";
    cr_assert_eq(sy_planner_plan(pl, g, &o, &plan), SY_E_NOT_FOUND);
    cr_assert(strstr(sy_planner_last_error(pl), "no device 'nope'"));
    sy_plan_options_init(&o);
    o.devices = "cpu,nope";
    cr_assert_eq(sy_planner_plan(pl, g, &o, &plan), SY_E_NOT_FOUND);
    cr_assert(strstr(sy_planner_last_error(pl), "there are: cpu, testdev, opaquedev"), "%s",
              sy_planner_last_error(pl));
    o.devices = "cpu,cpu";
    cr_assert_eq(sy_planner_plan(pl, g, &o, &plan), SY_E_INVALID_ARG);
    sy_plan_options_init(&o);
    const char *pins[] = {"blk.*=nope"};
    o.pins = pins;
    o.n_pins = 1;
    cr_assert_eq(sy_planner_plan(pl, g, &o, &plan), SY_E_NOT_FOUND);
    const char *bad_pin[] = {"no-equals-sign"};
    o.pins = bad_pin;
    cr_assert_eq(sy_planner_plan(pl, g, &o, &plan), SY_E_INVALID_ARG);
    sy_plan_options_init(&o);
    const char *mem[] = {"cpu=lots"};
    o.mem = mem;
    o.n_mem = 1;
    cr_assert_eq(sy_planner_plan(pl, g, &o, &plan), SY_E_INVALID_ARG);
    cr_assert(strstr(sy_planner_last_error(pl), "'lots' is not a size"));
    cr_assert_null(plan);
    sy_graph_destroy(g);
    sy_planner_destroy(pl);
    sy_runtime_destroy(rt);
    st_check_leaks();
}

Test(planner, a_node_no_device_supports_fails_naming_the_node_and_each_reason)
{
    sy_runtime *rt = st_runtime();
    sy_planner *pl;
    cr_assert_eq(sy_planner_create(rt, &pl), SY_OK);
    uint64_t rng = st_fresh_seed();
    st_graph sg;
    st_random_graph(&sg, 4, true, &rng);
    sy_plan_options o;
    sy_plan_options_init(&o);
    o.devices = "testdev";
    sy_plan *plan = NULL;
    cr_assert_eq(sy_planner_plan(pl, sg.g, &o, &plan), SY_E_UNSUPPORTED);
    const char *err = sy_planner_last_error(pl);
    cr_assert(strstr(err, "no device can run node 'argmax' (argmax)"), "%s", err);
    cr_assert(strstr(err, "testdev: op unsupported: testdev has no argmax kernel"), "%s", err);
    st_graph_free(&sg);
    sy_planner_destroy(pl);
    sy_runtime_destroy(rt);
    st_check_leaks();
}

Test(planner, plans_of_random_graphs_keep_every_invariant)
{
    sy_runtime *rt = st_runtime();
    sy_planner *pl = planner_with_profiles(rt);
    uint64_t seed = st_fresh_seed();
    for (uint32_t trial = 0; trial < 60; trial++) {
        uint64_t rng = seed + trial;
        st_graph sg;
        st_random_graph(&sg, st_range(&rng, 1, 24), trial % 2 == 0, &rng);
        sy_plan_options o;
        sy_plan_options_init(&o);
        o.algorithm = (sy_plan_algorithm)(trial % 3); /* auto, dp, list */
        o.no_cache = trial % 4 == 0;
        sy_plan *plan = NULL;
        sy_status st = sy_planner_plan(pl, sg.g, &o, &plan);
        if (st == SY_E_LIMIT && o.algorithm == SY_PLAN_DP) {
            st_graph_free(&sg);
            continue; /* not chain-like: the DP alone may decline */
        }
        cr_assert_eq(st, SY_OK, "seed %llu trial %u: %s", (unsigned long long)seed, trial,
                     sy_planner_last_error(pl));
        char why[256];
        cr_assert(st_check_plan(rt, sg.g, plan, why, sizeof why), "seed %llu trial %u: %s",
                  (unsigned long long)seed, trial, why);
        sy_plan_release(plan);
        st_graph_free(&sg);
    }
    sy_planner_destroy(pl);
    sy_runtime_destroy(rt);
    st_check_leaks();
}

Test(planner, decoder_plans_use_the_dp_solve_few_blocks_and_mix_devices_when_cheaper)
{
    sy_runtime *rt = st_runtime();
    sy_planner *pl = planner_with_profiles(rt);
    st_graph sg;
    st_decoder_graph(&sg, &small_decoder, 1);
    sy_plan *plan = st_plan(pl, sg.g, NULL);
    char why[256];
    cr_assert(st_check_plan(rt, sg.g, plan, why, sizeof why), "%s", why);
    sy_plan_summary s;
    cr_assert_eq(sy_plan_query_summary(plan, &s), SY_OK);
    cr_assert(strncmp(s.algorithm, "dp (", 4) == 0, "%s", s.algorithm);
    unsigned blocks = 0, solved = 0;
    cr_assert_eq(sscanf(s.algorithm, "dp (%u blocks, %u solved", &blocks, &solved), 2);
    cr_assert_lt(solved, blocks, "%s", s.algorithm);
    cr_assert_geq(st_devices_used(plan), 2u, "matmuls are cheaper on testdev");
    cr_assert_gt(s.n_transfers, 0u);
    cr_assert_float_eq(s.predicted_s, s.compute_s + s.transfer_s, 1e-15);
    sy_plan_node_info ni;
    cr_assert_eq(sy_plan_query_node(plan, node_index(sg.g, "blk.1.ffn_up"), &ni), SY_OK);
    cr_assert_str_eq(ni.device_name, "testdev");
    cr_assert(strncmp(ni.reason, "cheapest: ", 10) == 0, "%s", ni.reason);
    cr_assert_not(ni.unmeasured);
    cr_assert_eq(sy_plan_query_node(plan, node_index(sg.g, "blk.1.attn_q.heads"), &ni), SY_OK);
    cr_assert(ni.is_view);
    cr_assert_str_eq(ni.reason, "view: follows its input");
    sy_plan_release(plan);
    st_graph_free(&sg);
    sy_planner_destroy(pl);
    sy_runtime_destroy(rt);
    st_check_leaks();
}

Test(planner, policy_cpu_only_puts_every_node_on_the_cpu)
{
    sy_runtime *rt = st_runtime();
    sy_planner *pl = planner_with_profiles(rt);
    st_graph sg;
    st_decoder_graph(&sg, &small_decoder, 2);
    sy_plan_options o;
    sy_plan_options_init(&o);
    o.policy = "cpu-only";
    sy_plan *plan = st_plan(pl, sg.g, &o);
    for (uint32_t i = 0; i < sy_graph_node_count(sg.g); i++) {
        sy_plan_node_info ni;
        cr_assert_eq(sy_plan_query_node(plan, i, &ni), SY_OK);
        cr_assert_eq(ni.device, (uint32_t)ST_CPU);
        if (!ni.is_view)
            cr_assert_str_eq(ni.reason, "policy cpu-only");
    }
    cr_assert_eq(sy_plan_step_count(plan), 1u);
    sy_plan_release(plan);
    st_graph_free(&sg);
    sy_planner_destroy(pl);
    sy_runtime_destroy(rt);
    st_check_leaks();
}

Test(planner, policy_prefer_falls_back_where_the_device_refuses_with_its_reason)
{
    sy_runtime *rt = st_runtime();
    sy_planner *pl;
    cr_assert_eq(sy_planner_create(rt, &pl), SY_OK);
    uint64_t rng = st_fresh_seed();
    st_graph sg;
    st_random_graph(&sg, 6, true, &rng);
    sy_plan_options o;
    sy_plan_options_init(&o);
    o.policy = "prefer:testdev";
    sy_plan *plan = st_plan(pl, sg.g, &o);
    uint32_t n = sy_graph_node_count(sg.g);
    for (uint32_t i = 0; i < n; i++) {
        sy_plan_node_info ni;
        cr_assert_eq(sy_plan_query_node(plan, i, &ni), SY_OK);
        const sy_node *node = sy_graph_node(sg.g, i);
        if (node->op == SY_OP_ARGMAX) {
            cr_assert_neq(ni.device, (uint32_t)ST_TESTDEV);
            cr_assert_str_eq(ni.reason, "fallback: testdev refuses argmax (op unsupported: "
                                        "testdev has no argmax kernel)");
        } else if (!ni.is_view) {
            cr_assert_eq(ni.device, (uint32_t)ST_TESTDEV, "node '%s'", node->name);
            cr_assert_str_eq(ni.reason, "preferred device");
        }
    }
    sy_plan_release(plan);
    st_graph_free(&sg);
    sy_planner_destroy(pl);
    sy_runtime_destroy(rt);
    st_check_leaks();
}

Test(planner, pins_by_node_name_glob_or_op_name_are_constraints)
{
    sy_runtime *rt = st_runtime();
    sy_planner *pl = planner_with_profiles(rt);
    st_graph sg;
    st_decoder_graph(&sg, &small_decoder, 3);
    sy_plan_options o;
    sy_plan_options_init(&o);
    const char *pins[] = {"blk.*.ffn_*=opaquedev", "rope=cpu"};
    o.pins = pins;
    o.n_pins = 2;
    sy_plan *plan = st_plan(pl, sg.g, &o);
    char why[256];
    cr_assert(st_check_plan(rt, sg.g, plan, why, sizeof why), "%s", why);
    for (uint32_t i = 0; i < sy_graph_node_count(sg.g); i++) {
        const sy_node *n = sy_graph_node(sg.g, i);
        sy_plan_node_info ni;
        cr_assert_eq(sy_plan_query_node(plan, i, &ni), SY_OK);
        if (strstr(n->name, ".ffn_") && !ni.is_view) {
            cr_assert_str_eq(ni.device_name, "opaquedev", "%s", n->name);
            cr_assert_str_eq(ni.reason, "pinned by 'blk.*.ffn_*=opaquedev'");
        }
        if (n->op == SY_OP_ROPE) {
            cr_assert_str_eq(ni.device_name, "cpu", "%s", n->name);
            cr_assert_str_eq(ni.reason, "pinned by 'rope=cpu'");
        }
    }
    sy_plan_release(plan);
    const char *bad[] = {"argmax=testdev"};
    o.pins = bad;
    o.n_pins = 1;
    uint64_t rng = st_fresh_seed();
    st_graph rg;
    st_random_graph(&rg, 3, true, &rng);
    cr_assert_eq(sy_planner_plan(pl, rg.g, &o, &plan), SY_E_UNSUPPORTED);
    cr_assert(strstr(sy_planner_last_error(pl),
                     "pin 'argmax=testdev' puts node 'argmax' (argmax) on 'testdev', which "
                     "refuses it"),
              "%s", sy_planner_last_error(pl));
    st_graph_free(&rg);
    st_graph_free(&sg);
    sy_planner_destroy(pl);
    sy_runtime_destroy(rt);
    st_check_leaks();
}

Test(planner, a_full_device_sheds_nodes_to_stay_within_its_budget)
{
    sy_runtime *rt = st_runtime();
    sy_planner *pl = planner_with_profiles(rt);
    st_graph sg;
    st_decoder_graph(&sg, &small_decoder, 4);
    sy_plan *free_plan = st_plan(pl, sg.g, NULL);
    sy_plan_memory m;
    cr_assert_eq(sy_plan_query_memory(free_plan, ST_TESTDEV, &m), SY_OK);
    uint64_t used = m.weight_bytes + m.kv_bytes + m.activation_bytes;
    cr_assert_gt(used, 4096u);
    char budget[64];
    snprintf(budget, sizeof budget, "testdev=%llu", (unsigned long long)(used / 2));
    const char *mem[] = {budget};
    sy_plan_options o;
    sy_plan_options_init(&o);
    o.mem = mem;
    o.n_mem = 1;
    sy_plan *plan = st_plan(pl, sg.g, &o);
    char why[256];
    cr_assert(st_check_plan(rt, sg.g, plan, why, sizeof why), "%s", why);
    cr_assert_eq(sy_plan_query_memory(plan, ST_TESTDEV, &m), SY_OK);
    cr_assert_eq(m.budget_bytes, used / 2);
    cr_assert_leq(m.weight_bytes + m.kv_bytes + m.activation_bytes, used / 2);
    sy_plan_summary a, b;
    sy_plan_query_summary(free_plan, &a);
    sy_plan_query_summary(plan, &b);
    cr_assert_geq(b.predicted_s, a.predicted_s * (1 - 1e-12));
    sy_plan_release(plan);
    sy_plan_release(free_plan);
    st_graph_free(&sg);
    sy_planner_destroy(pl);
    sy_runtime_destroy(rt);
    st_check_leaks();
}

Test(planner, a_budget_nothing_can_meet_fails_saying_what_is_needed)
{
    sy_runtime *rt = st_runtime();
    sy_planner *pl;
    cr_assert_eq(sy_planner_create(rt, &pl), SY_OK);
    st_graph sg;
    st_decoder_graph(&sg, &small_decoder, 5);
    const char *pins[] = {"*=testdev"};
    const char *mem[] = {"testdev=64K"};
    sy_plan_options o;
    sy_plan_options_init(&o);
    o.pins = pins;
    o.n_pins = 1;
    o.mem = mem;
    o.n_mem = 1;
    sy_plan *plan = NULL;
    cr_assert_eq(sy_planner_plan(pl, sg.g, &o, &plan), SY_E_LIMIT);
    const char *err = sy_planner_last_error(pl);
    cr_assert(strstr(err, "model needs ") && strstr(err, " MiB on testdev, budget 0.1 MiB"), "%s",
              err);
    cr_assert_null(plan);
    st_graph_free(&sg);
    sy_planner_destroy(pl);
    sy_runtime_destroy(rt);
    st_check_leaks();
}

Test(planner, a_device_switch_costs_the_synchronisation_even_when_nothing_is_copied)
{
    sy_runtime *rt = st_runtime();
    sy_planner *pl;
    cr_assert_eq(sy_planner_create(rt, &pl), SY_OK);
    st_graph sg;
    st_decoder_graph(&sg, &small_decoder, 6);
    const char *pins[] = {"blk.0.*=cpu", "blk.1.*=testdev"};
    sy_plan_options o;
    sy_plan_options_init(&o);
    o.pins = pins;
    o.n_pins = 2;
    sy_plan *plan = st_plan(pl, sg.g, &o);
    uint32_t zero_copy = 0;
    for (uint32_t k = 0; k < sy_plan_step_count(plan); k++) {
        sy_plan_step_info si;
        cr_assert_eq(sy_plan_query_step(plan, k, &si), SY_OK);
        if (si.kind != SY_PLAN_STEP_TRANSFER)
            continue;
        /* cpu and testdev both map host memory: no bytes move. */
        cr_assert(si.zero_copy, "%s", si.tensor_name);
        cr_assert_float_eq(si.predicted_s, SY__DEFAULT_SYNC_S + SY__DEFAULT_MAP_S, 1e-15);
        zero_copy++;
    }
    cr_assert_gt(zero_copy, 0u);
    sy_plan_release(plan);
    st_graph_free(&sg);
    sy_planner_destroy(pl);
    sy_runtime_destroy(rt);
    st_check_leaks();
}

Test(planner, without_profiles_every_cost_is_the_roofline_default_flagged_unmeasured)
{
    sy_runtime *rt = st_runtime();
    sy_planner *pl;
    cr_assert_eq(sy_planner_create(rt, &pl), SY_OK);
    st_graph sg;
    st_decoder_graph(&sg, &small_decoder, 7);
    sy_plan *plan = st_plan(pl, sg.g, NULL);
    sy_plan_summary s;
    sy_plan_query_summary(plan, &s);
    uint32_t compute = 0;
    for (uint32_t i = 0; i < sy_graph_node_count(sg.g); i++)
        compute += !sy_op_is_view(sy_graph_node(sg.g, i)->op);
    cr_assert_eq(s.n_unmeasured, compute);
    /* Equal defaults on three CPU-kind devices: nothing is worth a switch. */
    cr_assert_eq(st_devices_used(plan), 1u);
    cr_assert_eq(s.n_transfers, 0u);
    sy_plan_release(plan);
    st_graph_free(&sg);
    sy_planner_destroy(pl);
    sy_runtime_destroy(rt);
    st_check_leaks();
}

Test(planner, exhaustive_and_list_options_plan_small_graphs_and_refuse_large_ones)
{
    sy_runtime *rt = st_runtime();
    sy_planner *pl = planner_with_profiles(rt);
    uint64_t rng = st_fresh_seed();
    st_graph small;
    st_random_graph(&small, 8, false, &rng);
    sy_plan_options o;
    sy_plan_options_init(&o);
    o.algorithm = SY_PLAN_EXHAUSTIVE;
    sy_plan *ex = st_plan(pl, small.g, &o);
    o.algorithm = SY_PLAN_DP;
    sy_plan *dp = NULL;
    sy_status st = sy_planner_plan(pl, small.g, &o, &dp);
    if (st == SY_OK) {
        sy_plan_summary a, b;
        sy_plan_query_summary(ex, &a);
        sy_plan_query_summary(dp, &b);
        cr_assert_float_eq(a.predicted_s, b.predicted_s, 1e-9 * a.predicted_s);
        sy_plan_release(dp);
    }
    sy_plan_release(ex);
    st_graph big;
    st_decoder_graph(&big, &small_decoder, 8);
    o.algorithm = SY_PLAN_EXHAUSTIVE;
    sy_plan *plan = NULL;
    cr_assert_eq(sy_planner_plan(pl, big.g, &o, &plan), SY_E_LIMIT);
    cr_assert(strstr(sy_planner_last_error(pl), "at most 16 nodes"));
    o.algorithm = SY_PLAN_LIST;
    plan = st_plan(pl, big.g, &o);
    char why[256];
    cr_assert(st_check_plan(rt, big.g, plan, why, sizeof why), "%s", why);
    sy_plan_release(plan);
    st_graph_free(&small);
    st_graph_free(&big);
    sy_planner_destroy(pl);
    sy_runtime_destroy(rt);
    st_check_leaks();
}

/* ------------------------------------------------------------- energy */

/* Writes |json| to a fresh file in |dir| and loads it into |pl|. */
static void load_profile_text(sy_planner *pl, const char *dir, const char *name, const char *json)
{
    char path[512];
    snprintf(path, sizeof path, "%s/%s", dir, name);
    FILE *f = fopen(path, "w");
    cr_assert_not_null(f, "%s", path);
    fputs(json, f);
    fclose(f);
    cr_assert_eq(sy_planner_load_profile(pl, path), SY_OK, "%s", sy_planner_last_error(pl));
    unlink(path);
}

#define PROFILE_HEAD                                                                               \
    "{\"schema\": \"switchyard-profile\", \"format_version\": 1, \"version\": \"e\", "

Test(planner, energy_policy_keeps_matmuls_off_a_fast_power_hungry_device)
{
    sy_runtime *rt = st_runtime();
    sy_planner *pl;
    cr_assert_eq(sy_planner_create(rt, &pl), SY_OK);
    char dir[] = "/tmp/sy-energy-XXXXXX";
    cr_assert_not_null(mkdtemp(dir));
    /* testdev runs matmuls 20x faster than the cpu at 40x its power. */
    load_profile_text(pl, dir, "cpu.json",
                      PROFILE_HEAD "\"device\": \"cpu\", \"power\": {\"idle_w\": 0.5, "
                                   "\"active_w\": 5},"
                                   "\"ops\": [{\"op\": \"*\", \"overhead_s\": 2e-6}]}");
    load_profile_text(pl, dir, "testdev.json",
                      PROFILE_HEAD "\"device\": \"testdev\", \"power\": {\"idle_w\": 1, "
                                   "\"active_w\": 8},"
                                   "\"ops\": [{\"op\": \"matmul\", \"overhead_s\": 1e-7, "
                                   "\"active_w\": 200},"
                                   "{\"op\": \"*\", \"overhead_s\": 5e-6}],"
                                   "\"links\": [{\"to\": \"cpu\", \"sync_s\": 1e-8, \"map_s\": "
                                   "1e-8, \"zero_copy\": true}]}");
    rmdir(dir);
    st_graph sg;
    st_decoder_graph(&sg, &small_decoder, 11);
    sy_plan_options o;
    sy_plan_options_init(&o);
    o.devices = "cpu,testdev";
    sy_plan *lat = st_plan(pl, sg.g, &o);
    o.policy = "energy";
    sy_plan *en = st_plan(pl, sg.g, &o);
    char why[256];
    cr_assert(st_check_plan(rt, sg.g, en, why, sizeof why), "%s", why);
    uint32_t matmuls = 0;
    for (uint32_t i = 0; i < sy_graph_node_count(sg.g); i++) {
        if (sy_graph_node(sg.g, i)->op != SY_OP_MATMUL)
            continue;
        sy_plan_node_info a, b;
        sy_plan_query_node(lat, i, &a);
        sy_plan_query_node(en, i, &b);
        cr_assert_str_eq(a.device_name, "testdev", "latency: %s", a.reason);
        cr_assert_str_eq(b.device_name, "cpu", "energy: %s", b.reason);
        /* The cpu: 2 us at 5 W, testdev idling at 1 W. */
        cr_assert_float_eq(b.predicted_j, 2e-6 * (5.0 + 1.0), 1e-15);
        cr_assert(strstr(b.reason, "uJ vs ") && strstr(b.reason, "on testdev"), "%s", b.reason);
        matmuls++;
    }
    cr_assert_gt(matmuls, 0u);
    sy_plan_summary sl, se;
    sy_plan_query_summary(lat, &sl);
    sy_plan_query_summary(en, &se);
    cr_assert(se.energy_measured && sl.energy_measured);
    cr_assert_lt(se.predicted_j, sl.predicted_j);
    cr_assert_lt(sl.predicted_s, se.predicted_s);
    cr_assert_float_eq(se.predicted_j, se.compute_j + se.transfer_j, 1e-12 * se.predicted_j);
    cr_assert_str_eq(se.policy, "energy");
    char text[1 << 16];
    size_t len;
    cr_assert_eq(sy_plan_explain_to_buffer(en, SY_PLAN_FORMAT_TABLE, text, sizeof text, &len),
                 SY_OK);
    cr_assert(strstr(text, "predicted energy: ") && strstr(text, "power from the profiles"), "%s",
              text);
    sy_plan_release(lat);
    sy_plan_release(en);
    st_graph_free(&sg);
    sy_planner_destroy(pl);
    sy_runtime_destroy(rt);
    st_check_leaks();
}

Test(planner, energy_policy_without_power_figures_uses_the_defaults_and_says_so)
{
    sy_runtime *rt = st_runtime();
    sy_planner *pl = planner_with_profiles(rt);
    st_graph sg;
    st_decoder_graph(&sg, &small_decoder, 12);
    sy_plan_options o;
    sy_plan_options_init(&o);
    o.policy = "energy";
    sy_plan *plan = st_plan(pl, sg.g, &o);
    sy_plan_summary s;
    sy_plan_query_summary(plan, &s);
    cr_assert_not(s.energy_measured);
    cr_assert_gt(s.predicted_j, 0.0);
    char text[1 << 16];
    size_t len;
    cr_assert_eq(sy_plan_explain_to_buffer(plan, SY_PLAN_FORMAT_TABLE, text, sizeof text, &len),
                 SY_OK);
    cr_assert(strstr(text, "default power figures"), "%s", text);
    o.policy = "joules";
    sy_plan *bad = NULL;
    cr_assert_eq(sy_planner_plan(pl, sg.g, &o, &bad), SY_E_INVALID_ARG);
    cr_assert(strstr(sy_planner_last_error(pl), "energy"), "%s", sy_planner_last_error(pl));
    sy_plan_release(plan);
    st_graph_free(&sg);
    sy_planner_destroy(pl);
    sy_runtime_destroy(rt);
    st_check_leaks();
}

/* A chain of |n| ops over [32, 4]: each reads the one before (and, for
 * matmuls and adds, a weight of its own). */
static void energy_chain(sy_graph **out, uint32_t n, uint64_t *rng)
{
    sy_graph *g;
    cr_assert_eq(sy_graph_create(&g), SY_OK);
    int64_t ne[2] = {32, 4}, wne[2] = {32, 32};
    sy_tensor *x;
    cr_assert_eq(sy_graph_add_tensor(g, "x", SY_DTYPE_F32, 2, ne, SY_ROLE_INPUT, NULL, &x), SY_OK);
    for (uint32_t k = 0; k < n; k++) {
        char name[32], wname[32];
        snprintf(name, sizeof name, "op%u", k);
        snprintf(wname, sizeof wname, "w%u", k);
        sy_op_params p;
        memset(&p, 0, sizeof p);
        sy_tensor *in[2] = {x, NULL}, *w;
        uint32_t n_in = 1;
        sy_op op;
        switch (st_range(rng, 0, 4)) {
        case 0:
            op = SY_OP_MATMUL;
            cr_assert_eq(sy_graph_add_tensor(g, wname, SY_DTYPE_F32, 2, wne, SY_ROLE_WEIGHT, NULL,
                                             &w),
                         SY_OK);
            in[0] = w;
            in[1] = x;
            n_in = 2;
            break;
        case 1:
            op = SY_OP_ADD;
            cr_assert_eq(sy_graph_add_tensor(g, wname, SY_DTYPE_F32, 2, ne, SY_ROLE_WEIGHT, NULL,
                                             &w),
                         SY_OK);
            in[1] = w;
            n_in = 2;
            break;
        case 2:
            op = SY_OP_SILU;
            break;
        case 3:
            op = SY_OP_RMS_NORM;
            p.f[0] = 1e-5f;
            break;
        default:
            op = SY_OP_SCALE;
            p.f[0] = 0.5f;
            break;
        }
        cr_assert_eq(sy_graph_add_node(g, op, name, in, n_in, &p, &x), SY_OK, "%s",
                     sy_graph_last_error(g));
    }
    cr_assert_eq(sy_graph_mark_output(g, x), SY_OK);
    cr_assert_eq(sy_graph_freeze(g), SY_OK, "%s", sy_graph_last_error(g));
    *out = g;
}

/* A profile for |device| with random op times and power figures. */
static void random_power_profile(char *out, size_t size, const char *device, uint64_t *rng)
{
    static const char *const ops[] = {"matmul", "add", "silu", "rms_norm", "scale"};
    int len = snprintf(out, size,
                       PROFILE_HEAD "\"device\": \"%s\", \"power\": {\"idle_w\": %.4g, "
                                    "\"active_w\": %.4g}, \"ops\": [",
                       device, 0.1 + 3.0 * st_uniform(rng), 1.0 + 40.0 * st_uniform(rng));
    for (uint32_t k = 0; k < 5; k++)
        len += snprintf(out + len, size - (size_t)len,
                        "%s{\"op\": \"%s\", \"overhead_s\": %.4g, \"active_w\": %.4g}",
                        k ? "," : "", ops[k], 1e-6 + 50e-6 * st_uniform(rng),
                        1.0 + 60.0 * st_uniform(rng));
    len += snprintf(out + len, size - (size_t)len, "], \"links\": [");
    static const char *const devs[] = {"cpu", "testdev", "opaquedev"};
    uint32_t n_links = 0;
    for (uint32_t k = 0; k < 3; k++) {
        if (strcmp(devs[k], device) == 0)
            continue;
        len += snprintf(out + len, size - (size_t)len,
                        "%s{\"to\": \"%s\", \"sync_s\": %.4g, \"latency_s\": %.4g, "
                        "\"bandwidth\": %.4g, \"j_per_byte\": %.4g, \"zero_copy\": false}",
                        n_links++ ? "," : "", devs[k], 20e-6 * st_uniform(rng),
                        10e-6 * st_uniform(rng), 1e9 + 1e10 * st_uniform(rng),
                        1e-9 * st_uniform(rng));
    }
    snprintf(out + len, size - (size_t)len, "]}");
}

Test(planner, under_the_energy_policy_the_dp_equals_the_exhaustive_optimum_on_random_chains)
{
    sy_runtime *rt = st_runtime();
    uint64_t seed = st_fresh_seed(), rng = seed;
    char dir[] = "/tmp/sy-energy-XXXXXX";
    cr_assert_not_null(mkdtemp(dir));
    uint32_t differ = 0;
    for (uint32_t trial = 0; trial < 60; trial++) {
        sy_planner *pl;
        cr_assert_eq(sy_planner_create(rt, &pl), SY_OK);
        static const char *const devs[] = {"cpu", "testdev", "opaquedev"};
        for (uint32_t d = 0; d < 3; d++) {
            char json[4096], file[64];
            random_power_profile(json, sizeof json, devs[d], &rng);
            snprintf(file, sizeof file, "%s.json", devs[d]);
            load_profile_text(pl, dir, file, json);
        }
        sy_graph *g;
        energy_chain(&g, st_range(&rng, 2, 16), &rng);
        sy_plan_options o;
        sy_plan_options_init(&o);
        o.policy = "energy";
        o.algorithm = SY_PLAN_DP;
        sy_plan *dp = st_plan(pl, g, &o);
        o.algorithm = SY_PLAN_EXHAUSTIVE;
        sy_plan *ex = st_plan(pl, g, &o);
        o.policy = "latency";
        o.algorithm = SY_PLAN_AUTO;
        sy_plan *lat = st_plan(pl, g, &o);
        sy_plan_summary a, b, l;
        sy_plan_query_summary(dp, &a);
        sy_plan_query_summary(ex, &b);
        sy_plan_query_summary(lat, &l);
        double oa = a.predicted_j + SY__ENERGY_TIME_WEIGHT * a.predicted_s;
        double ob = b.predicted_j + SY__ENERGY_TIME_WEIGHT * b.predicted_s;
        cr_assert_float_eq(oa, ob, 1e-9 * ob, "seed %llu trial %u: dp %.9g J, optimum %.9g J",
                           (unsigned long long)seed, trial, oa, ob);
        /* Each objective's plan is at least as good as the other's at it. */
        cr_assert_leq(a.predicted_j, l.predicted_j * (1 + 1e-9), "seed %llu trial %u",
                      (unsigned long long)seed, trial);
        cr_assert_leq(l.predicted_s, a.predicted_s * (1 + 1e-9), "seed %llu trial %u",
                      (unsigned long long)seed, trial);
        differ += a.predicted_j < l.predicted_j * (1 - 1e-6);
        sy_plan_release(dp);
        sy_plan_release(ex);
        sy_plan_release(lat);
        sy_graph_destroy(g);
        sy_planner_destroy(pl);
    }
    rmdir(dir);
    /* Random power makes the two objectives disagree now and then. */
    cr_assert_gt(differ, 0u, "seed %llu", (unsigned long long)seed);
    sy_runtime_destroy(rt);
    st_check_leaks();
}

/* ------------------------------------------------------- default profiles */

typedef struct log_capture {
    char text[4096];
} log_capture;

static void capture_log(void *user, sy_log_level level, const char *msg)
{
    log_capture *c = user;
    if (level <= SY_LOG_WARN) {
        size_t len = strlen(c->text);
        snprintf(c->text + len, sizeof c->text - len, "%s\n", msg);
    }
}

/* A runtime with the cpu plugin found the default way (build tree), so
 * that the profile search path is the full default one. */
static sy_runtime *default_path_runtime(log_capture *cap, bool no_default_paths)
{
    sy_runtime_options o;
    sy_runtime_options_init(&o);
    o.plugins = "cpu";
    o.log_fn = capture_log;
    o.log_user = cap;
    o.no_default_paths = no_default_paths;
    if (no_default_paths)
        o.plugin_path = SY_TEST_CPU_PLUGIN;
    sy_runtime *rt = NULL;
    cr_assert_eq(sy_runtime_create(&o, &rt), SY_OK);
    uint32_t idx;
    cr_assert_eq(sy_runtime_find_device(rt, "cpu", &idx), SY_OK);
    return rt;
}

/* The profile the cpu got by default, as the plan's JSON reports it. */
static void default_cpu_profile(sy_runtime *rt, char *out, size_t size)
{
    sy_planner *pl;
    cr_assert_eq(sy_planner_create(rt, &pl), SY_OK);
    uint32_t loaded = 99;
    cr_assert_eq(sy_planner_load_default_profiles(pl, &loaded), SY_OK);
    st_graph sg;
    st_decoder_graph(&sg, &small_decoder, 13);
    sy_plan *plan = st_plan(pl, sg.g, NULL);
    char *json = malloc(1 << 20);
    size_t len;
    cr_assert_eq(sy_plan_explain_to_buffer(plan, SY_PLAN_FORMAT_JSON, json, 1 << 20, &len), SY_OK);
    const char *at = strstr(json, "\"profile\":");
    cr_assert_not_null(at);
    snprintf(out, size, "%.*s", (int)strcspn(at, "\n"), at);
    cr_assert_eq(loaded, strstr(out, "null") ? 0u : 1u, "%u: %s", loaded, out);
    free(json);
    sy_plan_release(plan);
    st_graph_free(&sg);
    sy_planner_destroy(pl);
}

static void write_text(const char *path, const char *text)
{
    FILE *f = fopen(path, "w");
    cr_assert_not_null(f, "%s", path);
    fputs(text, f);
    fclose(f);
}

Test(planner, default_profiles_come_from_the_env_dir_then_the_tune_dir_then_the_shipped_ones)
{
    char env_dir[] = "/tmp/sy-prof-env-XXXXXX", xdg[] = "/tmp/sy-prof-xdg-XXXXXX";
    cr_assert_not_null(mkdtemp(env_dir));
    cr_assert_not_null(mkdtemp(xdg));
    char xdg_dir[256], env_cpu[300], xdg_cpu[300], seen[512];
    snprintf(xdg_dir, sizeof xdg_dir, "%s/switchyard", xdg);
    cr_assert_eq(mkdir(xdg_dir, 0755), 0);
    snprintf(xdg_dir, sizeof xdg_dir, "%s/switchyard/profiles", xdg);
    cr_assert_eq(mkdir(xdg_dir, 0755), 0);
    snprintf(env_cpu, sizeof env_cpu, "%s/cpu.json", env_dir);
    snprintf(xdg_cpu, sizeof xdg_cpu, "%s/cpu.json", xdg_dir);
    /* What `switchyard tune` leaves in the user directory. */
    write_text(xdg_cpu, "{\"schema\": \"switchyard-profile\", \"format_version\": 1, "
                        "\"version\": \"tuned-here\", \"device\": \"cpu\", "
                        "\"ops\": [{\"op\": \"*\", \"overhead_s\": 1e-6}]}");
    setenv("XDG_DATA_HOME", xdg, 1);
    unsetenv("SWITCHYARD_PROFILE_DIR");
    log_capture cap = {""};
    sy_runtime *rt = default_path_runtime(&cap, false);
    default_cpu_profile(rt, seen, sizeof seen);
    cr_assert(strstr(seen, xdg_cpu) && strstr(seen, "tuned-here"), "%s", seen);
    sy_runtime_destroy(rt);

    /* $SWITCHYARD_PROFILE_DIR comes first. */
    write_text(env_cpu, "{\"schema\": \"switchyard-profile\", \"format_version\": 1, "
                        "\"version\": \"from-env\", \"device\": \"cpu\", "
                        "\"ops\": [{\"op\": \"*\", \"overhead_s\": 2e-6}]}");
    setenv("SWITCHYARD_PROFILE_DIR", env_dir, 1);
    rt = default_path_runtime(&cap, false);
    default_cpu_profile(rt, seen, sizeof seen);
    cr_assert(strstr(seen, env_cpu) && strstr(seen, "from-env"), "%s", seen);
    sy_runtime_destroy(rt);

    /* A broken file is skipped, loudly, for the next directory's. */
    write_text(env_cpu, "{\"schema\": \"switchyard-profile\", \"format_vers");
    rt = default_path_runtime(&cap, false);
    default_cpu_profile(rt, seen, sizeof seen);
    cr_assert(strstr(seen, "tuned-here"), "%s", seen);
    cr_assert(strstr(cap.text, "skipping profile") && strstr(cap.text, env_cpu), "%s", cap.text);
    sy_runtime_destroy(rt);

    /* Without user profiles: the shipped one of the source tree. */
    unlink(env_cpu);
    unlink(xdg_cpu);
    rt = default_path_runtime(&cap, false);
    default_cpu_profile(rt, seen, sizeof seen);
    cr_assert(strstr(seen, SY_TEST_SOURCE_DIR "/profiles/cpu.json"), "%s", seen);
    sy_runtime_destroy(rt);

    /* no_default_paths: $SWITCHYARD_PROFILE_DIR alone, here empty. */
    rt = default_path_runtime(&cap, true);
    default_cpu_profile(rt, seen, sizeof seen);
    cr_assert(strstr(seen, "null"), "%s", seen);
    sy_runtime_destroy(rt);
    rmdir(env_dir);
    rmdir(xdg_dir);
    snprintf(xdg_dir, sizeof xdg_dir, "%s/switchyard", xdg);
    rmdir(xdg_dir);
    rmdir(xdg);
    st_check_leaks();
}

/* A device no profile file describes is costed from what the probe
 * measured of it (peaks, launch, links), not from its own claims. */
Test(planner, a_device_without_a_profile_file_gets_the_probes_measured_roofline)
{
    char xdg[] = "/tmp/sy-prof-xdg-XXXXXX", cache[] = "/tmp/sy-prof-cache-XXXXXX";
    cr_assert_not_null(mkdtemp(xdg));
    cr_assert_not_null(mkdtemp(cache));
    setenv("XDG_DATA_HOME", xdg, 1);
    setenv("XDG_CACHE_HOME", cache, 1);
    unsetenv("SWITCHYARD_PROFILE_DIR");
    log_capture cap = {""};
    sy_runtime_options o;
    sy_runtime_options_init(&o);
    o.plugin_path = PLUGIN("testdev.so");
    o.plugins = "testdev";
    o.log_fn = capture_log;
    o.log_user = &cap;
    sy_runtime *rt = NULL;
    cr_assert_eq(sy_runtime_create(&o, &rt), SY_OK);
    cr_assert_eq(sy_runtime_device_count(rt), 1u);
    sy_planner *pl;
    cr_assert_eq(sy_planner_create(rt, &pl), SY_OK);
    uint32_t loaded = 9;
    /* Nothing cached yet: nothing to go on but the claims. */
    cr_assert_eq(sy_planner_load_default_profiles(pl, &loaded), SY_OK);
    cr_assert_eq(loaded, 0u);
    sy_probe_options po;
    sy_probe_options_init(&po);
    po.quick = true;
    sy_probe *pr = calloc(1, sizeof *pr);
    cr_assert_eq(sy_runtime_probe(rt, &po, pr), SY_OK, "%s", sy_runtime_last_error(rt));
    cr_assert_gt(pr->devices[0].bandwidth_bps, 0.0);
    cr_assert_eq(sy_planner_load_default_profiles(pl, &loaded), SY_OK);
    cr_assert_eq(loaded, 1u);
    st_graph sg;
    st_decoder_graph(&sg, &small_decoder, 14);
    sy_plan_options opt;
    sy_plan_options_init(&opt);
    sy_plan *plan = st_plan(pl, sg.g, &opt);
    char text[1 << 16];
    size_t len;
    cr_assert_eq(sy_plan_explain_to_buffer(plan, SY_PLAN_FORMAT_TABLE, text, sizeof text, &len),
                 SY_OK);
    char want[128];
    snprintf(want, sizeof want, "the probe cache (no profile file) (probe %s)",
             pr->devices[0].fingerprint);
    cr_assert(strstr(text, want), "%s", text);
    sy_plan_release(plan);
    st_graph_free(&sg);
    free(pr);
    sy_planner_destroy(pl);
    sy_runtime_destroy(rt);
    char path[512];
    snprintf(path, sizeof path, "%s/switchyard/probe.json", cache);
    unlink(path);
    snprintf(path, sizeof path, "%s/switchyard", cache);
    rmdir(path);
    rmdir(cache);
    rmdir(xdg);
    st_check_leaks();
}
