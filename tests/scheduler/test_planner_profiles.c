/* The profiles a planner loads by default: $SWITCHYARD_PROFILE_DIR, then
 * the tune output dir, then the shipped profiles/, and the probe's
 * measured roofline for a device without a profile file. */
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
    st_decoder_graph(&sg, &st_small_decoder, 13);
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
    st_decoder_graph(&sg, &st_small_decoder, 14);
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

