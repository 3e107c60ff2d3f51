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
    sy_planner *pl = st_planner_with_profiles(rt);
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
    sy_planner *pl = st_planner_with_profiles(rt);
    st_graph sg;
    st_decoder_graph(&sg, &st_small_decoder, 1);
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
    cr_assert_eq(sy_plan_query_node(plan, st_node_index(sg.g, "blk.1.ffn_up"), &ni), SY_OK);
    cr_assert_str_eq(ni.device_name, "testdev");
    cr_assert(strncmp(ni.reason, "cheapest: ", 10) == 0, "%s", ni.reason);
    cr_assert_not(ni.unmeasured);
    cr_assert_eq(sy_plan_query_node(plan, st_node_index(sg.g, "blk.1.attn_q.heads"), &ni), SY_OK);
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
    sy_planner *pl = st_planner_with_profiles(rt);
    st_graph sg;
    st_decoder_graph(&sg, &st_small_decoder, 2);
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
    sy_planner *pl = st_planner_with_profiles(rt);
    st_graph sg;
    st_decoder_graph(&sg, &st_small_decoder, 3);
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
    sy_planner *pl = st_planner_with_profiles(rt);
    st_graph sg;
    st_decoder_graph(&sg, &st_small_decoder, 4);
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
    st_decoder_graph(&sg, &st_small_decoder, 5);
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
    st_decoder_graph(&sg, &st_small_decoder, 6);
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
    st_decoder_graph(&sg, &st_small_decoder, 7);
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

/* Plans |g| exhaustively and by the DP and asserts the same predicted
 * step; false when the DP declined the graph (nothing compared). */
static bool dp_matches_exhaustive(sy_planner *pl, sy_graph *g, uint64_t seed)
{
    sy_plan_options o;
    sy_plan_options_init(&o);
    o.algorithm = SY_PLAN_EXHAUSTIVE;
    sy_plan *ex = st_plan(pl, g, &o);
    o.algorithm = SY_PLAN_DP;
    sy_plan *dp = NULL;
    bool compared = sy_planner_plan(pl, g, &o, &dp) == SY_OK;
    if (compared) {
        sy_plan_summary a, b;
        sy_plan_query_summary(ex, &a);
        sy_plan_query_summary(dp, &b);
        cr_assert_float_eq(a.predicted_s, b.predicted_s, 1e-9 * a.predicted_s,
                           "seed %llu: exhaustive %.9g s, dp %.9g s", (unsigned long long)seed,
                           a.predicted_s, b.predicted_s);
        sy_plan_release(dp);
    }
    sy_plan_release(ex);
    return compared;
}

/* Seeds 1..200 fixed: before leaves read on two devices were tried at
 * their other home, 7 of them (4, 24, 58, 60, 69, 108, 138) left the DP's
 * plan one 512-byte input transfer above the exhaustive one (a tie in the
 * relaxed first solve homed the input on the cpu). */
Test(planner, dp_and_exhaustive_agree_on_fixed_random_graphs)
{
    sy_runtime *rt = st_runtime();
    sy_planner *pl = st_planner_with_profiles(rt);
    uint32_t compared = 0;
    for (uint64_t seed = 1; seed <= 200; seed++) {
        uint64_t rng = seed;
        st_graph sg;
        st_random_graph(&sg, 8, false, &rng);
        compared += dp_matches_exhaustive(pl, sg.g, seed);
        st_graph_free(&sg);
    }
    cr_assert_gt(compared, 150u);
    sy_planner_destroy(pl);
    sy_runtime_destroy(rt);
    st_check_leaks();
}

Test(planner, exhaustive_and_list_options_plan_small_graphs_and_refuse_large_ones)
{
    sy_runtime *rt = st_runtime();
    sy_planner *pl = st_planner_with_profiles(rt);
    uint64_t seed = st_fresh_seed(), rng = seed;
    st_graph small;
    st_random_graph(&small, 8, false, &rng);
    dp_matches_exhaustive(pl, small.g, seed);
    sy_plan_options o;
    sy_plan_options_init(&o);
    st_graph big;
    st_decoder_graph(&big, &st_small_decoder, 8);
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

