/* Planning under the energy policy: power figures from profiles (or the
 * defaults, said so), matmuls kept off a fast power-hungry device, and the
 * DP against the exhaustive optimum on random chains with random power. */
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
    st_decoder_graph(&sg, &st_small_decoder, 11);
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
    sy_planner *pl = st_planner_with_profiles(rt);
    st_graph sg;
    st_decoder_graph(&sg, &st_small_decoder, 12);
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

