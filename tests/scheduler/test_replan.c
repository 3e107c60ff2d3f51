/* Device failures at run time: the executor names the (node, device)
 * pair a device failed on, the planner takes the pair off, and a session
 * re-plans and goes on generating the tokens the cpu alone gives.  The
 * failing device is fault_matmul, a testdev whose matmul kernel fails at
 * run time although supports() accepts it. */
#include <criterion/criterion.h>
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include "sched_test_util.h"

typedef struct log_capture {
    char text[8192];
} log_capture;

static void capture_log(void *user, sy_log_level level, const char *msg)
{
    log_capture *c = user;
    if (level <= SY_LOG_WARN) {
        size_t len = strlen(c->text);
        snprintf(c->text + len, sizeof c->text - len, "%s\n", msg);
    }
}

static sy_runtime *fault_runtime(log_capture *cap)
{
    sy_runtime_options o;
    sy_runtime_options_init(&o);
    o.plugin_path = SY_TEST_CPU_PLUGIN ":" PLUGIN("fault_matmul.so");
    o.no_default_paths = true;
    o.log_fn = capture_log;
    o.log_user = cap;
    sy_runtime *rt = NULL;
    cr_assert_eq(sy_runtime_create(&o, &rt), SY_OK);
    cr_assert_eq(sy_runtime_device_count(rt), 2u);
    return rt;
}

/* A profile that makes fault_matmul the place for every matmul (and
 * nothing else), written into |dir| as the device's default profile. */
static void write_fault_profile(const char *dir)
{
    char path[256];
    snprintf(path, sizeof path, "%s/fault_matmul.json", dir);
    FILE *f = fopen(path, "w");
    cr_assert_not_null(f);
    fputs("{\"schema\": \"switchyard-profile\", \"format_version\": 1, \"version\": \"t\", "
          "\"device\": \"fault_matmul\", \"ops\": ["
          "{\"op\": \"matmul\", \"overhead_s\": 1e-9, \"s_per_byte\": 1e-15},"
          "{\"op\": \"*\", \"overhead_s\": 1e-3}],"
          "\"links\": [{\"to\": \"cpu\", \"sync_s\": 1e-9, \"map_s\": 1e-9, \"zero_copy\": true}]}",
          f);
    fclose(f);
}

static void remove_profile_dir(const char *dir)
{
    char path[256];
    snprintf(path, sizeof path, "%s/fault_matmul.json", dir);
    unlink(path);
    rmdir(dir);
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
    .n_past = 0,
    .kv_type = SY_DTYPE_F32,
    .with_data = true,
};

Test(replan, a_kernel_failing_at_run_time_names_its_node_and_a_plan_without_the_pair_runs)
{
    char dir[] = "/tmp/sy-replan-XXXXXX";
    cr_assert_not_null(mkdtemp(dir));
    write_fault_profile(dir);
    cr_assert_eq(setenv("SWITCHYARD_PROFILE_DIR", dir, 1), 0);
    log_capture cap = {""};
    sy_runtime *rt = fault_runtime(&cap);
    uint32_t fdev;
    cr_assert_eq(sy_runtime_find_device(rt, "fault_matmul", &fdev), SY_OK);
    st_graph sg;
    st_decoder_graph(&sg, &decoder, 21);
    float *want = malloc(sg.out_count * sizeof *want);
    cr_assert_eq(sy_runtime_execute_on(rt, sg.g, ST_CPU), SY_OK, "%s", sy_runtime_last_error(rt));
    memcpy(want, sg.out, sg.out_count * sizeof *want);

    sy_planner *pl;
    cr_assert_eq(sy_planner_create(rt, &pl), SY_OK);
    uint32_t loaded = 0;
    cr_assert_eq(sy_planner_load_default_profiles(pl, &loaded), SY_OK);
    cr_assert_eq(loaded, 1u);
    sy_plan *plan = st_plan(pl, sg.g, NULL);
    cr_assert_eq(st_devices_used(plan), 2u, "matmuls go to fault_matmul");
    sy_device_failure f;
    cr_assert_eq(sy_runtime_execute_plan(rt, sg.g, plan), SY_E_DEVICE);
    sy_plan_release(plan);
    cr_assert_eq(sy_runtime_query_device_failure(rt, &f), SY_OK);
    cr_assert_eq(f.device, fdev);
    cr_assert_eq(f.status, SY_E_DEVICE);
    cr_assert_neq(f.node, UINT32_MAX);
    cr_assert_eq(sy_graph_node(sg.g, f.node)->op, SY_OP_MATMUL);
    cr_assert_str_eq(f.node_name, sy_graph_node(sg.g, f.node)->name);
    cr_assert(strstr(f.text, "fault_matmul") && strstr(f.text, f.node_name), "%s", f.text);
    cr_assert(strstr(cap.text, "kernel failed (fault injection)"), "%s", cap.text);

    /* Taking the op off the device: the plan keeps matmuls on the cpu and
     * says why, and the run gives the cpu's output. */
    cr_assert_eq(sy_planner_exclude(pl, "matmul", fdev, f.text), SY_OK);
    plan = st_plan(pl, sg.g, NULL);
    sy_plan_node_info ni;
    cr_assert_eq(sy_plan_query_node(plan, f.node, &ni), SY_OK);
    cr_assert_str_eq(ni.device_name, "cpu");
    cr_assert(strstr(ni.reason, "fault_matmul refuses matmul (failed at run time: "), "%s",
              ni.reason);
    cr_assert_eq(sy_runtime_execute_plan(rt, sg.g, plan), SY_OK, "%s", sy_runtime_last_error(rt));
    cr_assert_eq(sy_runtime_query_device_failure(rt, &f), SY_E_NOT_FOUND, "a good run clears it");
    for (uint64_t i = 0; i < sg.out_count; i++)
        cr_assert(fabsf(sg.out[i] - want[i]) <= 1e-4f + 1e-4f * fabsf(want[i]), "%llu: %g vs %g",
                  (unsigned long long)i, (double)sg.out[i], (double)want[i]);
    sy_plan_release(plan);

    /* Bad arguments are refused without a change. */
    cr_assert_eq(sy_planner_exclude(pl, "", fdev, NULL), SY_E_INVALID_ARG);
    cr_assert_eq(sy_planner_exclude(pl, "rope", 99, NULL), SY_E_NOT_FOUND);
    /* Excluding every node from every device leaves nothing to run. */
    cr_assert_eq(sy_planner_exclude(pl, "*", ST_CPU, "broken"), SY_OK);
    cr_assert_eq(sy_planner_exclude(pl, "*", fdev, "broken"), SY_OK);
    plan = NULL;
    cr_assert_eq(sy_planner_plan(pl, sg.g, NULL, &plan), SY_E_UNSUPPORTED);
    cr_assert(strstr(sy_planner_last_error(pl), "failed at run time: broken"), "%s",
              sy_planner_last_error(pl));
    free(want);
    st_graph_free(&sg);
    sy_planner_destroy(pl);
    sy_runtime_destroy(rt);
    remove_profile_dir(dir);
    st_check_leaks();
}

typedef struct tokens {
    int32_t ids[16];
    uint32_t n;
} tokens;

static bool keep_token(void *user, int32_t token, const char *text, size_t len)
{
    (void)text;
    (void)len;
    tokens *t = user;
    if (t->n < 16)
        t->ids[t->n++] = token;
    return true;
}

static void generate(sy_model *m, const char *devices, tokens *out, sy_session **out_session)
{
    sy_session_options so;
    sy_session_options_init(&so);
    so.n_ctx = 64;
    so.devices = devices;
    sy_session *s = NULL;
    cr_assert_eq(sy_session_create(m, &so, &s), SY_OK);
    sy_generate_params gp;
    sy_generate_params_init(&gp);
    gp.n_predict = 8;
    gp.temperature = 0.0f;
    const int32_t prompt[] = {1, 504, 3327, 28, 3205, 314};
    memset(out, 0, sizeof *out);
    cr_assert_eq(sy_session_generate(s, prompt, 6, &gp, keep_token, out), SY_OK, "%s",
                 sy_session_last_error(s));
    *out_session = s;
}

/* The real SmolLM2-135M (tools/fetch-models.sh), when present. */
Test(replan, a_session_re_plans_around_a_failing_device_and_generates_the_cpus_tokens)
{
    const char *path = st_smollm2();
    char dir[] = "/tmp/sy-replan-XXXXXX";
    cr_assert_not_null(mkdtemp(dir));
    write_fault_profile(dir);
    /* The session finds the profile by itself (sy_planner_load_default_profiles). */
    cr_assert_eq(setenv("SWITCHYARD_PROFILE_DIR", dir, 1), 0);
    log_capture cap = {""};
    sy_runtime *rt = fault_runtime(&cap);
    sy_model *m = NULL;
    cr_assert_eq(sy_model_open(rt, path, &m), SY_OK, "%s", sy_runtime_last_error(rt));
    tokens alone, mixed;
    sy_session *s_alone, *s_mixed;
    generate(m, "cpu", &alone, &s_alone);
    cr_assert_eq(sy_session_failure_count(s_alone), 0u);
    generate(m, "cpu,fault_matmul", &mixed, &s_mixed);
    cr_assert_eq(mixed.n, alone.n);
    for (uint32_t i = 0; i < alone.n; i++)
        cr_assert_eq(mixed.ids[i], alone.ids[i], "token %u: %d, the cpu alone %d", i,
                     mixed.ids[i], alone.ids[i]);
    /* Reported, not swallowed: a first matmul node, then the op. */
    cr_assert_eq(sy_session_failure_count(s_mixed), 2u, "%s", cap.text);
    sy_session_failure f0, f1;
    cr_assert_eq(sy_session_query_failure(s_mixed, 0, &f0), SY_OK);
    cr_assert_eq(sy_session_query_failure(s_mixed, 1, &f1), SY_OK);
    cr_assert_str_eq(f0.device, "fault_matmul");
    cr_assert_eq(f0.status, SY_E_DEVICE);
    cr_assert_eq(f0.position, 0u);
    cr_assert(f0.node[0] && strcmp(f0.excluded, f0.node) == 0, "%s / %s", f0.node, f0.excluded);
    cr_assert_str_eq(f1.excluded, "matmul");
    cr_assert(strstr(cap.text, "device 'fault_matmul' failed at position 0") &&
                  strstr(cap.text, "re-planning without matmul on it"),
              "%s", cap.text);
    sy_session_failure none;
    cr_assert_eq(sy_session_query_failure(s_mixed, 2, &none), SY_E_NOT_FOUND);
    sy_session_destroy(s_alone);
    sy_session_destroy(s_mixed);
    sy_model_close(m);
    sy_runtime_destroy(rt);
    remove_profile_dir(dir);
    st_check_leaks();
}
