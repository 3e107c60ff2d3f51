/* Tuner: how lone launches are split from a node's share of a step (the
 * profile's launch_sync_s), and the plugin settings tune chooses: written
 * to the profile's "options", read back, and applied by `switchyard run`
 * before the plugin starts (unless the user set them). */
#include <criterion/criterion.h>
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <unistd.h>

#include "cost_model.h"
#include "tune.h"

Test(tune_split, a_decode_step_gives_the_launch_saving_per_node)
{
    /* 574 nodes alone 80 ms, one launch 56 ms: each lone launch paid
     * 24 ms / 573 more than its share of the step. */
    tune_step_note n = {.tokens = 1, .past = 128, .launch_s = 56e-3, .nodes_s = 80e-3};
    tune_step_split(&n, 574, -1.0);
    cr_assert(n.applied);
    cr_expect_float_eq(n.sync_s, 24e-3 / 573, 1e-12);
    /* The rest adds up to the step as one launch, which pays one wait. */
    cr_expect_float_eq((n.nodes_s - 574 * n.sync_s) * n.scale + n.sync_s, n.launch_s, 1e-12);
    cr_expect_float_eq(tune_node_in_step(&n, 100e-6), (100e-6 - n.sync_s) * n.scale, 1e-15);
    /* A node shorter than the wait keeps a quarter of its lone time. */
    cr_expect_float_eq(tune_node_in_step(&n, 20e-6), 5e-6, 1e-15);
}

Test(tune_split, a_longer_step_takes_the_devices_figure_and_scales_the_rest)
{
    tune_step_note n = {.tokens = 32, .launch_s = 380e-3, .nodes_s = 390e-3};
    tune_step_split(&n, 574, 40e-6);
    cr_assert(n.applied);
    cr_expect_float_eq(n.sync_s, 40e-6, 1e-15);
    cr_expect_float_eq(n.scale, (380e-3 - 40e-6) / (390e-3 - 574 * 40e-6), 1e-12);
}

Test(tune_split, a_step_slower_than_its_nodes_saves_nothing_per_launch)
{
    /* The CPU: one launch runs a little slower than its nodes alone. */
    tune_step_note n = {.tokens = 1, .launch_s = 7.6e-3, .nodes_s = 7.27e-3};
    tune_step_split(&n, 574, -1.0);
    cr_assert(n.applied);
    cr_expect_eq(n.sync_s, 0.0);
    cr_expect_float_eq(n.scale, 7.6 / 7.27, 1e-12);
    /* Preempted launches (3x the nodes) are not taken for the device. */
    tune_step_note p = {.tokens = 1, .launch_s = 21e-3, .nodes_s = 7e-3};
    tune_step_split(&p, 574, -1.0);
    cr_expect_not(p.applied);
    cr_expect_eq(p.sync_s, 0.0);
    cr_expect_eq(p.scale, 1.0);
}

Test(tune_split, the_price_per_launch_is_capped_by_the_fastest_launches)
{
    /* The CPU's decode: 574 nodes alone 5.8 ms, one launch 5.3 ms, yet a
     * tenth of its nodes take 0.2 us or less alone: the 0.9 us saved per
     * node is no price every launch pays, so at most 0.2 us is taken for
     * it and the scale carries the rest. */
    tune_step_note n = {.tokens = 1, .launch_s = 5.3e-3, .nodes_s = 5.8e-3, .alone_low_s = 0.2e-6};
    tune_step_split(&n, 574, -1.0);
    cr_assert(n.applied);
    cr_expect_float_eq(n.sync_s, 0.2e-6, 1e-15);
    cr_expect_float_eq((n.nodes_s - 574 * n.sync_s) * n.scale + n.sync_s, n.launch_s, 1e-12);
    /* PoCL's: every launch takes 45 us or more, the 48 us wait stands. */
    tune_step_note p = {.tokens = 1, .launch_s = 52.7e-3, .nodes_s = 80.6e-3, .alone_low_s = 56e-6};
    tune_step_split(&p, 574, -1.0);
    cr_expect_float_eq(p.sync_s, 27.9e-3 / 573, 1e-12);
    /* The lower decile of the positive lone times. */
    double t[12] = {0, 5, 1, 2, 3, 4, 6, 7, 8, 9, 10, 0};
    cr_expect_float_eq(tune_alone_low(t, 12), 1.9, 1e-12);
}

Test(tune_split, the_device_figure_is_the_median_of_its_decode_steps)
{
    tune_samples s = {0};
    s.steps[0] = (tune_step_note){.tokens = 1, .sync_s = 40e-6, .applied = true};
    s.steps[1] = (tune_step_note){.tokens = 1, .sync_s = 44e-6, .applied = true};
    s.steps[2] = (tune_step_note){.tokens = 1, .sync_s = 90e-6, .applied = false};
    s.steps[3] = (tune_step_note){.tokens = 32, .sync_s = 70e-6, .applied = true};
    s.n_steps = 4;
    cr_expect_float_eq(tune_launch_sync(&s), 42e-6, 1e-15);
    s.n_steps = 0;
    cr_expect_eq(tune_launch_sync(&s), 0.0);
}

/* A profile of |device| with |launch_sync_s| and one option. */
static char *write_profile(const char *device, double launch_sync_s, const char *name,
                           const char *value)
{
    tune_sample x = {.op = SY_OP_ADD, .dtype = SY_DTYPE_F32, .flops = 1e3, .bytes = 1.2e4,
                     .seconds = 1e-6};
    tune_samples s = {0};
    cr_assert_eq(tune_samples_add(&s, &x), SY_OK);
    tune_option opt = {.n = 2, .values = {"32", "64"}, .decode_s = {1e-3, 1e-3},
                       .prefill_s = {2e-2, 1.8e-2}, .best = 1, .prefill_tokens = 32,
                       .decode_steps = TUNE_THREADS_DECODE_STEPS};
    snprintf(opt.name, sizeof opt.name, "%s", name);
    snprintf(opt.values[1], sizeof opt.values[1], "%s", value);
    tune_device_info info = {.device = device, .version = "test", .launch_sync_s = launch_sync_s,
                             .options = &opt, .n_options = 1};
    char *json = NULL;
    cr_assert_eq(tune_profile_json(&info, &s, &json), SY_OK);
    tune_samples_free(&s);
    return json;
}

static void save(const char *path, const char *text)
{
    FILE *f = fopen(path, "w");
    cr_assert_not_null(f, "%s", path);
    cr_assert_geq(fputs(text, f), 0);
    cr_assert_eq(fclose(f), 0);
}

typedef struct seen {
    char names[4][64], values[4][64];
    int n;
} seen;

static void record(const char *name, const char *value, void *ctx)
{
    seen *s = ctx;
    if (s->n < 4) {
        snprintf(s->names[s->n], sizeof s->names[0], "%s", name);
        snprintf(s->values[s->n], sizeof s->values[0], "%s", value);
        s->n++;
    }
}

Test(tune_options, round_trip_through_the_profile_and_the_scheduler_loader)
{
    char *json = write_profile("opencl:0", 41e-6, "SWITCHYARD_OPENCL_MATVEC", "groups");
    char err[512] = "";
    sy__profile *prof = NULL;
    cr_assert_eq(sy__profile_parse(json, strlen(json), "t", &prof, err, sizeof err), SY_OK, "%s",
                 err);
    cr_expect_float_eq(prof->launch_sync_s, 41e-6, 1e-15);
    sy__profile_destroy(prof);
    char path[] = "/tmp/sy-tune-options-XXXXXX";
    int fd = mkstemp(path);
    cr_assert_geq(fd, 0);
    close(fd);
    save(path, json);
    seen s = {.n = 0};
    cr_expect_eq(tune_profile_options(path, "opencl:0", record, &s), 1);
    cr_assert_eq(s.n, 1);
    cr_expect_str_eq(s.names[0], "SWITCHYARD_OPENCL_MATVEC");
    cr_expect_str_eq(s.values[0], "groups", "the best value, not the first");
    s.n = 0;
    cr_expect_eq(tune_profile_options(path, "opencl:1", record, &s), -1,
                 "another device's profile");
    cr_expect_eq(s.n, 0);
    free(json);
    /* The OpenCL work-group tune chooses reads back the same way (the
     * plugin's side: opencl_device.takes_the_matvec_work_group_from_the_environment). */
    json = write_profile("opencl:0", 41e-6, "SWITCHYARD_OPENCL_MATVEC_WG", "64");
    save(path, json);
    s.n = 0;
    cr_expect_eq(tune_profile_options(path, "opencl:0", record, &s), 1);
    cr_assert_eq(s.n, 1);
    cr_expect_str_eq(s.names[0], "SWITCHYARD_OPENCL_MATVEC_WG");
    cr_expect_str_eq(s.values[0], "64");
    unlink(path);
    cr_expect_eq(tune_profile_options(path, NULL, record, &s), -1, "a missing file");
    free(json);
}

Test(tune_options, a_profile_sets_only_switchyard_variables_with_plain_values)
{
    const char *text =
        "{\"schema\": \"switchyard-profile\", \"format_version\": 1, \"version\": \"t\","
        " \"device\": \"cpu\", \"ops\": [{\"op\": \"*\", \"overhead_s\": 1e-6}],"
        " \"options\": {\"LD_PRELOAD\": \"x.so\", \"SWITCHYARD_A\": \"1; rm\","
        " \"SWITCHYARD_B\": 3, \"SWITCHYARD_CPU_MATMUL_ROWS\": \"64\"}}";
    char err[512] = "";
    sy__profile *prof = NULL;
    cr_assert_eq(sy__profile_parse(text, strlen(text), "t", &prof, err, sizeof err), SY_OK, "%s",
                 err);
    cr_expect_eq(prof->launch_sync_s, 0.0, "no launch_sync_s reads as 0");
    sy__profile_destroy(prof);
    char path[] = "/tmp/sy-tune-options-XXXXXX";
    int fd = mkstemp(path);
    cr_assert_geq(fd, 0);
    close(fd);
    save(path, text);
    seen s = {.n = 0};
    cr_expect_eq(tune_profile_options(path, "cpu", record, &s), 1);
    cr_assert_eq(s.n, 1);
    cr_expect_str_eq(s.names[0], "SWITCHYARD_CPU_MATMUL_ROWS");
    cr_expect_str_eq(s.values[0], "64");
    unlink(path);
}

/* Runs `switchyard run` on |model| with the profiles in |dir|; returns
 * its stderr (caller frees). */
static char *run_stderr(const char *dir, const char *model, const char *env)
{
    char log[512], cmd[2048];
    snprintf(log, sizeof log, "%s/run.log", dir);
    snprintf(cmd, sizeof cmd,
             "%s SWITCHYARD_PROFILE_DIR='%s' XDG_CACHE_HOME='%s/cache' '%s' run -m '%s' "
             "--devices cpu -p hi -n 2 >/dev/null 2>'%s'",
             env, dir, dir, SY_SWITCHYARD_BIN, model, log);
    cr_assert_eq(system(cmd), 0, "%s failed", cmd);
    FILE *f = fopen(log, "r");
    cr_assert_not_null(f);
    char *buf = calloc(1, 1 << 16);
    size_t n = fread(buf, 1, (1 << 16) - 1, f);
    buf[n] = '\0';
    fclose(f);
    return buf;
}

Test(tune_options, run_hands_the_profiles_options_to_the_plugin_unless_the_user_set_them)
{
    char dir[] = "/tmp/sy-tune-apply-XXXXXX", model[256], path[300], cmd[1024];
    cr_assert_not_null(mkdtemp(dir));
    snprintf(model, sizeof model, "%s/m.gguf", dir);
    snprintf(cmd, sizeof cmd,
             "'%s' synth --arch llama --dims 2,64,128,4,2,512 --type q4_0 --ctx 64 --seed 3 "
             "-o '%s' >/dev/null",
             SY_SWITCHYARD_BIN, model);
    cr_assert_eq(system(cmd), 0, "%s failed", cmd);
    /* A value the plugin refuses shows that the plugin read it: it warns
     * with the value it was given. */
    char *json = write_profile("cpu", 0, "SWITCHYARD_CPU_MATMUL_ROWS", "3");
    snprintf(path, sizeof path, "%s/cpu.json", dir);
    save(path, json);
    free(json);
    char *out = run_stderr(dir, model, "env -u SWITCHYARD_CPU_MATMUL_ROWS");
    cr_expect(strstr(out, "SWITCHYARD_CPU_MATMUL_ROWS='3'") != NULL, "stderr: %s", out);
    free(out);
    out = run_stderr(dir, model, "SWITCHYARD_CPU_MATMUL_ROWS=16");
    cr_expect(strstr(out, "SWITCHYARD_CPU_MATMUL_ROWS") == NULL, "the user's value wins: %s",
              out);
    free(out);
    snprintf(cmd, sizeof cmd, "rm -rf '%s'", dir);
    cr_expect_eq(system(cmd), 0);
}

/* The predicted step of |g| on the cpu alone with a profile whose
 * launch_sync_s is |sync_s|; *out_segments gets the plan's segments. */
static double planned_step(sy_runtime *rt, const sy_graph *g, double sync_s,
                           uint32_t *out_segments)
{
    char *json = write_profile("cpu", sync_s, "SWITCHYARD_CPU_MATMUL_ROWS", "64");
    char path[] = "/tmp/sy-tune-sync-XXXXXX";
    int fd = mkstemp(path);
    cr_assert_geq(fd, 0);
    close(fd);
    save(path, json);
    free(json);
    sy_planner *pl = NULL;
    cr_assert_eq(sy_planner_create(rt, &pl), SY_OK);
    cr_assert_eq(sy_planner_load_profile(pl, path), SY_OK, "%s", sy_planner_last_error(pl));
    unlink(path);
    sy_plan_options po;
    sy_plan_options_init(&po);
    po.devices = "cpu";
    po.no_cache = true;
    sy_plan *plan = NULL;
    cr_assert_eq(sy_planner_plan(pl, g, &po, &plan), SY_OK, "%s", sy_planner_last_error(pl));
    sy_plan_summary sum;
    cr_assert_eq(sy_plan_query_summary(plan, &sum), SY_OK);
    *out_segments = sum.n_segments;
    sy_plan_release(plan);
    sy_planner_destroy(pl);
    return sum.predicted_s;
}

Test(tune_sync, the_planner_charges_the_profiles_launch_sync_once_per_segment)
{
    sy_runtime_options ro;
    sy_runtime_options_init(&ro);
    ro.plugin_path = SY_TEST_CPU_PLUGIN;
    ro.no_default_paths = true;
    sy_runtime *rt = NULL;
    cr_assert_eq(sy_runtime_create(&ro, &rt), SY_OK);
    sy_graph *g = NULL;
    cr_assert_eq(sy_graph_create(&g), SY_OK);
    const int64_t ne[4] = {1000, 1, 1, 1}; /* the profile's one point */
    sy_tensor *a = NULL, *b = NULL, *x = NULL, *y = NULL;
    cr_assert_eq(sy_graph_add_tensor(g, "a", SY_DTYPE_F32, 1, ne, SY_ROLE_INPUT, NULL, &a), SY_OK);
    cr_assert_eq(sy_graph_add_tensor(g, "b", SY_DTYPE_F32, 1, ne, SY_ROLE_INPUT, NULL, &b), SY_OK);
    sy_tensor *in[2] = {a, b};
    cr_assert_eq(sy_graph_add_node(g, SY_OP_ADD, "x", in, 2, NULL, &x), SY_OK);
    in[0] = x;
    cr_assert_eq(sy_graph_add_node(g, SY_OP_ADD, "y", in, 2, NULL, &y), SY_OK);
    cr_assert_eq(sy_graph_freeze(g), SY_OK);
    uint32_t seg0 = 0, seg1 = 0;
    double without = planned_step(rt, g, 0, &seg0);
    double with = planned_step(rt, g, 40e-6, &seg1);
    cr_assert_eq(seg0, 1u, "one device, one segment");
    cr_assert_eq(seg1, 1u);
    /* Two adds of one measured point each (1 us) and the launch once. */
    cr_expect_float_eq(without, 2e-6, 1e-9, "%g", without);
    cr_expect_float_eq(with - without, 40e-6, 1e-9, "%g - %g", with, without);
    sy_graph_destroy(g);
    sy_runtime_destroy(rt);
}
