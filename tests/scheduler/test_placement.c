/* The placement algorithms on synthetic problems (random costs, random
 * capability holes, no devices): the DP against the exhaustive oracle, the
 * list scheduler's quality, and the single-device baseline.  Each test
 * draws a fresh seed per run and prints it on failure; SY_TEST_SEED=N
 * replays one. */
#include <criterion/criterion.h>
#include <math.h>
#include <stdlib.h>
#include <string.h>

#include "sched_test_util.h"

static int cmp_double(const void *a, const void *b)
{
    double x = *(const double *)a, y = *(const double *)b;
    return x < y ? -1 : x > y;
}

static bool same_cost(double a, double b)
{
    return fabs(a - b) <= 1e-9 * fmax(1.0, fmax(fabs(a), fabs(b)));
}

static bool assignment_allowed(const sy__sched_problem *pb, const uint8_t *asg)
{
    for (uint32_t i = 0; i < pb->n; i++)
        if (asg[i] >= pb->n_dev || !isfinite(sy__sched_cost(pb, i, asg[i])))
            return false;
    return true;
}

Test(placement, dp_equals_the_exhaustive_optimum_on_random_chains)
{
    uint64_t seed = st_fresh_seed();
    for (uint32_t trial = 0; trial < 3000; trial++) {
        uint64_t rng = seed + trial * 0x9e37ull;
        uint32_t n = st_range(&rng, 1, 16), D = st_range(&rng, 1, 3);
        sy__sched_problem pb;
        st_random_problem(&pb, n, D, trial % 2 ? ST_CHAIN : ST_CHAIN_SKIP, 0.25, &rng);
        uint8_t dp[16], opt[16];
        sy__dp_stats stats;
        cr_assert_eq(sy__sched_dp(&pb, true, dp, &stats), SY_OK, "seed %llu trial %u",
                     (unsigned long long)seed, trial);
        cr_assert_eq(sy__sched_exhaustive(&pb, opt), SY_OK);
        cr_assert(assignment_allowed(&pb, dp), "seed %llu trial %u", (unsigned long long)seed,
                  trial);
        double a = sy__sched_evaluate(&pb, dp), b = sy__sched_evaluate(&pb, opt);
        cr_assert(same_cost(a, b), "seed %llu trial %u (n %u, D %u): dp %.12g, optimum %.12g",
                  (unsigned long long)seed, trial, n, D, a, b);
        sy__sched_problem_deinit(&pb);
    }
}

Test(placement, dp_equals_the_exhaustive_optimum_on_random_small_dags_it_accepts)
{
    uint64_t seed = st_fresh_seed();
    uint32_t accepted = 0;
    for (uint32_t trial = 0; trial < 1000; trial++) {
        uint64_t rng = seed + trial * 0x51ull;
        uint32_t n = st_range(&rng, 2, 12);
        sy__sched_problem pb;
        st_random_problem(&pb, n, 3, ST_DAG, 0.2, &rng);
        uint8_t dp[16], opt[16];
        sy_status st = sy__sched_dp(&pb, true, dp, NULL);
        if (st == SY_OK) {
            accepted++;
            cr_assert_eq(sy__sched_exhaustive(&pb, opt), SY_OK);
            double a = sy__sched_evaluate(&pb, dp), b = sy__sched_evaluate(&pb, opt);
            cr_assert(same_cost(a, b), "seed %llu trial %u: dp %.12g, optimum %.12g",
                      (unsigned long long)seed, trial, a, b);
        } else {
            cr_assert_eq(st, SY_E_LIMIT, "seed %llu trial %u", (unsigned long long)seed, trial);
        }
        sy__sched_problem_deinit(&pb);
    }
    cr_assert_gt(accepted, 900u, "the DP took only %u of 1000 small DAGs", accepted);
}

Test(placement, dp_reuses_identical_layers_without_changing_the_result)
{
    uint64_t seed = st_fresh_seed();
    for (uint32_t trial = 0; trial < 200; trial++) {
        uint64_t rng = seed + trial * 0x77ull;
        uint32_t block = st_range(&rng, 2, 6), repeat = st_range(&rng, 3, 30);
        sy__sched_problem pb;
        st_layered_problem(&pb, block, repeat, 3, &rng);
        uint8_t *with = malloc(pb.n), *without = malloc(pb.n);
        sy__dp_stats sw, so;
        cr_assert_eq(sy__sched_dp(&pb, true, with, &sw), SY_OK);
        cr_assert_eq(sy__sched_dp(&pb, false, without, &so), SY_OK);
        double a = sy__sched_evaluate(&pb, with), b = sy__sched_evaluate(&pb, without);
        cr_assert(same_cost(a, b), "seed %llu trial %u: reused %.12g, solved each %.12g",
                  (unsigned long long)seed, trial, a, b);
        cr_assert_lt(sw.classes, so.classes, "seed %llu trial %u: %u classes for %u blocks",
                     (unsigned long long)seed, trial, sw.classes, sw.blocks);
        if (pb.n <= SY__SCHED_EXHAUSTIVE_MAX) {
            uint8_t opt[16];
            cr_assert_eq(sy__sched_exhaustive(&pb, opt), SY_OK);
            cr_assert(same_cost(a, sy__sched_evaluate(&pb, opt)));
        }
        free(with);
        free(without);
        sy__sched_problem_deinit(&pb);
    }
}

Test(placement, dp_declines_a_graph_whose_frontier_is_too_wide)
{
    /* 20 independent values all read by one last node. */
    uint64_t rng = st_fresh_seed();
    sy__sched_problem pb;
    cr_assert_eq(sy__sched_problem_init(&pb, 21, 3, 20), SY_OK);
    for (uint32_t i = 0; i < 21; i++)
        for (uint32_t d = 0; d < 3; d++)
            pb.cost[i * 3 + d] = 1.0 + st_uniform(&rng);
    for (uint32_t i = 0; i < 20; i++)
        pb.in_list[i] = i;
    for (uint32_t i = 0; i < 21; i++)
        pb.in_start[i] = 0;
    pb.in_start[21] = 20;
    uint8_t asg[21];
    sy__dp_stats stats;
    cr_assert_eq(sy__sched_dp(&pb, true, asg, &stats), SY_E_LIMIT);
    cr_assert_gt(stats.max_frontier, 12u);
    cr_assert_eq(sy__sched_list(&pb, asg), SY_OK);
    cr_assert(assignment_allowed(&pb, asg));
    sy__sched_problem_deinit(&pb);
}

Test(placement, list_scheduler_stays_within_5_percent_median_and_15_percent_worst_of_optimum)
{
    uint64_t seed = st_fresh_seed();
    enum { TRIALS = 600 };
    double ratio[TRIALS];
    for (uint32_t trial = 0; trial < TRIALS; trial++) {
        uint64_t rng = seed + trial * 0x3131ull;
        uint32_t n = st_range(&rng, 4, 16);
        sy__sched_problem pb;
        st_random_problem(&pb, n, 3, ST_DAG, 0.2, &rng);
        uint8_t ls[16], opt[16];
        cr_assert_eq(sy__sched_list(&pb, ls), SY_OK);
        cr_assert_eq(sy__sched_exhaustive(&pb, opt), SY_OK);
        cr_assert(assignment_allowed(&pb, ls));
        ratio[trial] = sy__sched_evaluate(&pb, ls) / sy__sched_evaluate(&pb, opt);
        cr_assert_geq(ratio[trial], 1.0 - 1e-9, "seed %llu trial %u beats the optimum",
                      (unsigned long long)seed, trial);
        cr_assert_leq(ratio[trial], 1.15, "seed %llu trial %u: list %.4f x optimum",
                      (unsigned long long)seed, trial, ratio[trial]);
        sy__sched_problem_deinit(&pb);
    }
    qsort(ratio, TRIALS, sizeof ratio[0], cmp_double);
    cr_assert_leq(ratio[TRIALS / 2], 1.05, "seed %llu: median ratio %.4f", (unsigned long long)seed,
                  ratio[TRIALS / 2]);
}

Test(placement, no_plan_is_worse_than_the_best_single_device_plan)
{
    uint64_t seed = st_fresh_seed();
    for (uint32_t trial = 0; trial < 1000; trial++) {
        uint64_t rng = seed + trial * 0x1234ull;
        uint32_t n = st_range(&rng, 1, 40);
        st_shape shape = (st_shape)(trial % 3);
        sy__sched_problem pb;
        st_random_problem(&pb, n, 3, shape, 0.15, &rng);
        uint8_t single[40], out[40];
        double base = sy__sched_best_single(&pb, single);
        cr_assert_eq(sy__sched_list(&pb, out), SY_OK);
        cr_assert_leq(sy__sched_evaluate(&pb, out), base * (1 + 1e-12), "seed %llu trial %u: list",
                      (unsigned long long)seed, trial);
        if (sy__sched_dp(&pb, true, out, NULL) == SY_OK)
            cr_assert_leq(sy__sched_evaluate(&pb, out), base * (1 + 1e-12),
                          "seed %llu trial %u: dp", (unsigned long long)seed, trial);
        sy__sched_problem_deinit(&pb);
    }
}

Test(placement, exhaustive_search_refuses_more_than_16_nodes)
{
    uint64_t rng = st_fresh_seed();
    sy__sched_problem pb;
    st_random_problem(&pb, 17, 2, ST_CHAIN, 0.0, &rng);
    uint8_t asg[17];
    cr_assert_eq(sy__sched_exhaustive(&pb, asg), SY_E_LIMIT);
    sy__sched_problem_deinit(&pb);
}

Test(placement, a_transfer_is_paid_once_per_value_and_destination)
{
    /* Node 0 on device 0 feeds nodes 1 and 2, both cheapest on device 1. */
    sy__sched_problem pb;
    cr_assert_eq(sy__sched_problem_init(&pb, 3, 2, 2), SY_OK);
    double cost[6] = {1, 100, 10, 1, 10, 1};
    memcpy(pb.cost, cost, sizeof cost);
    for (uint32_t i = 0; i < 3; i++) {
        pb.xfer[i * 4 + 1] = 5.0; /* 0 -> 1 */
        pb.xfer[i * 4 + 2] = 5.0; /* 1 -> 0 */
    }
    pb.in_start[0] = 0;
    pb.in_start[1] = 0;
    pb.in_list[0] = 0;
    pb.in_start[2] = 1;
    pb.in_list[1] = 0;
    pb.in_start[3] = 2;
    uint8_t asg[3] = {0, 1, 1};
    cr_assert_float_eq(sy__sched_evaluate(&pb, asg), 1 + 1 + 1 + 5, 1e-12);
    uint8_t dp[3];
    cr_assert_eq(sy__sched_dp(&pb, true, dp, NULL), SY_OK);
    cr_assert_float_eq(sy__sched_evaluate(&pb, dp), 8.0, 1e-12);
    sy__sched_problem_deinit(&pb);
}

/* A graph of views only poses no decision node: every algorithm returns an
 * empty plan (the list scheduler's kicks once divided by the node count). */
Test(placement, an_empty_problem_gets_an_empty_plan)
{
    sy__sched_problem pb;
    cr_assert_eq(sy__sched_problem_init(&pb, 0, 3, 0), SY_OK);
    uint8_t asg[1] = {0xee};
    cr_assert_eq(sy__sched_list(&pb, asg), SY_OK);
    cr_assert_eq(sy__sched_exhaustive(&pb, asg), SY_OK);
    cr_assert_eq(asg[0], 0xee);
    sy__sched_problem_deinit(&pb);
}
