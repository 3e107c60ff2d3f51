/* The scheduler options of `switchyard run`, `bench` and `plan` (--devices,
 * --policy, --pin, --mem), bench's device switches and transfer bytes
 * per step and its depth (-d), on a tiny synth model over the cpu and opaquedev (the test
 * plugin without shared memory: every transfer is a real copy). */
#include <criterion/criterion.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/wait.h>
#include <unistd.h>

#define PIN_FFN "--devices cpu,opaquedev --policy prefer:opaquedev --pin 'blk.*.ffn_*=cpu'"

typedef struct cli_model {
    char dir[64];
    char path[128];
} cli_model;

static void make_model(cli_model *m)
{
    snprintf(m->dir, sizeof m->dir, "/tmp/sy-cli-XXXXXX");
    cr_assert_not_null(mkdtemp(m->dir));
    snprintf(m->path, sizeof m->path, "%s/tiny.gguf", m->dir);
    char cmd[512];
    snprintf(cmd, sizeof cmd, "'%s' synth --preset tiny --seed 3 -o '%s' >/dev/null",
             SY_SWITCHYARD_BIN, m->path);
    cr_assert_eq(system(cmd), 0, "%s failed", cmd);
}

static void drop_model(cli_model *m)
{
    unlink(m->path);
    rmdir(m->dir);
}

/* Runs `switchyard CMD -m MODEL ARGS` with opaquedev loadable beside the
 * cpu; returns its exit status with stdout (and stderr when |err|) in
 * |out|. */
static int cli(const char *cmd, const cli_model *m, const char *args, bool err, char *out,
               size_t size)
{
    const char *env = getenv("SWITCHYARD_PLUGIN_PATH");
    /* The first command on a device set probes the machine: into the build
     * tree, never the user's own cache (as test_chat.c). */
    const char *build = getenv("SWITCHYARD_TEST_BUILD_DIR");
    char line[4096];
    snprintf(line, sizeof line,
             "XDG_CACHE_HOME='%s/xdg-cache' SWITCHYARD_PLUGIN_PATH='%s%s%s' '%s' %s -m '%s' %s %s",
             build && *build ? build : "/tmp", SY_TEST_PLUGIN_DIR "/opaquedev.so",
             env && env[0] ? ":" : "", env ? env : "", SY_SWITCHYARD_BIN, cmd, m->path, args,
             err ? "2>&1" : "2>/dev/null");
    FILE *p = popen(line, "r");
    cr_assert_not_null(p);
    size_t n = fread(out, 1, size - 1, p);
    out[n] = '\0';
    int rc = pclose(p);
    return WIFEXITED(rc) ? WEXITSTATUS(rc) : -1;
}

/* The number after "KEY": in the JSON object of |json| that has "test":
 * "TEST"; fails the test when there is none. */
static double json_num(const char *json, const char *test, const char *key)
{
    char want[64];
    snprintf(want, sizeof want, "\"test\": \"%s\"", test);
    const char *row = strstr(json, want);
    cr_assert_not_null(row, "no test %s in:\n%s", test, json);
    char k[96];
    snprintf(k, sizeof k, "\"%s\": ", key);
    const char *at = strstr(row, k);
    cr_assert_not_null(at, "no %s for %s in:\n%s", key, test, json);
    return strtod(at + strlen(k), NULL);
}

/* Runs `switchyard CMD ARGS`, which must exit with |rc| and print |msg|. */
static void refused(const char *cmd, const cli_model *m, const char *args, int rc,
                    const char *msg)
{
    static char out[65536];
    int got = cli(cmd, m, args, true, out, sizeof out);
    cr_assert_eq(got, rc, "%s", out);
    cr_assert(strstr(out, msg), "%s", out);
}

/* Where the node timing of run --profile lists |node| under |device|:
 * the device's block starts at "  DEVICE: " and ends at the next block. */
static bool profiled_on(const char *out, const char *device, const char *node)
{
    char head[64], row[64];
    snprintf(head, sizeof head, "\n  %s: ", device);
    snprintf(row, sizeof row, "\n    %s ", node);
    const char *block = strstr(out, head);
    if (!block)
        return false;
    const char *end = strstr(block + 1, "\n  ");
    while (end && end[3] == ' ') /* a row of this block, not the next device */
        end = strstr(end + 1, "\n  ");
    const char *hit = strstr(block, row);
    return hit && (!end || hit < end);
}

Test(cli, run_pins_move_the_named_nodes_and_bad_pins_are_refused_by_name)
{
    cli_model m;
    make_model(&m);
    static char out[65536];
    int rc = cli("run", &m, "-n 3 --devices cpu,opaquedev --policy prefer:opaquedev --profile",
                 true, out, sizeof out);
    cr_assert_eq(rc, 0, "%s", out);
    cr_assert(profiled_on(out, "opaquedev", "ffn_up"), "%s", out);
    cr_assert(!profiled_on(out, "cpu", "ffn_up"), "%s", out);
    rc = cli("run", &m, "-n 3 " PIN_FFN " --profile", true, out, sizeof out);
    cr_assert_eq(rc, 0, "%s", out);
    const char *ffn[] = {"ffn_up", "ffn_gate", "ffn_down", "ffn_glu"};
    for (int k = 0; k < 4; k++) {
        cr_assert(profiled_on(out, "cpu", ffn[k]), "%s not on the cpu:\n%s", ffn[k], out);
        cr_assert(!profiled_on(out, "opaquedev", ffn[k]), "%s", out);
    }
    cr_assert(profiled_on(out, "opaquedev", "attn_q"), "%s", out);

    const char *no_dev = "pin 'blk.*=nodev': no device 'nodev' among cpu";
    refused("run", &m, "-n 1 --pin ffn_up", 2, "--pin takes PATTERN=DEVICE, got 'ffn_up'");
    refused("bench", &m, "-p 4 -n 0 -r 1 --pin '=cpu'", 2,
            "--pin takes PATTERN=DEVICE, got '=cpu'");
    refused("run", &m, "-n 1 --devices cpu --pin 'blk.*=nodev'", 1, no_dev);
    refused("plan", &m, "--devices cpu --pin 'blk.*=nodev'", 1, no_dev);
    refused("plan", &m, "--mem cpu", 2, "--mem takes DEVICE=SIZE, got 'cpu'");
    drop_model(&m);
}

Test(cli, bench_counts_device_switches_and_transfer_bytes_per_step_as_the_plan_lists_them)
{
    cli_model m;
    make_model(&m);
    static char out[65536], plan[65536];
    int rc = cli("bench", &m, "-p 8 -n 4 -r 2 -o json", false, out, sizeof out);
    cr_assert_eq(rc, 0, "%s", out);
    cr_assert(strstr(out, "\"devices\": \"cpu\", \"policy\": \"latency\", \"pins\": []"), "%s",
              out);
    const char *tests[] = {"pp8", "tg4"};
    for (int k = 0; k < 2; k++) {
        cr_assert_eq(json_num(out, tests[k], "steps"), k == 0 ? 2 : 8, "%s", out);
        cr_assert_eq(json_num(out, tests[k], "segments_per_step"), 1.0, "%s", out);
        cr_assert_eq(json_num(out, tests[k], "switches_per_step"), 0.0, "%s", out);
        cr_assert_eq(json_num(out, tests[k], "transfers_per_step"), 0.0, "%s", out);
        cr_assert_eq(json_num(out, tests[k], "transfer_bytes_per_step"), 0.0, "%s", out);
    }

    rc = cli("bench", &m, "-p 8 -n 4 -r 2 -o json " PIN_FFN, false, out, sizeof out);
    cr_assert_eq(rc, 0, "%s", out);
    cr_assert(strstr(out, "\"devices\": \"cpu,opaquedev\", \"policy\": \"prefer:opaquedev\", "
                          "\"pins\": [\"blk.*.ffn_*=cpu\"]"),
              "%s", out);
    /* Each test's step against the plan of the same step: pp8 a prefill of
     * 8 tokens, tg4 decode steps (one plan serves them all: the values that
     * move are the residual stream's, whatever the position). */
    const char *phase[] = {"--phase prefill --tokens 8", "--phase decode --tokens 2"};
    for (int k = 0; k < 2; k++) {
        char args[256];
        snprintf(args, sizeof args, "%s %s", PIN_FFN, phase[k]);
        cr_assert_eq(cli("plan", &m, args, false, plan, sizeof plan), 0, "%s", plan);
        unsigned nodes = 0, segments = 0, transfers = 0;
        cr_assert_eq(sscanf(plan, "%u nodes, %u segments, %u transfers", &nodes, &segments,
                            &transfers),
                     3, "%s", plan);
        cr_assert_gt(transfers, 0);
        cr_assert_eq(json_num(out, tests[k], "segments_per_step"), segments, "%s\n%s", out, plan);
        cr_assert_eq(json_num(out, tests[k], "switches_per_step"), segments - 1, "%s", out);
        cr_assert_eq(json_num(out, tests[k], "transfers_per_step"), transfers, "%s", out);
        snprintf(args, sizeof args, "%s %s --json", PIN_FFN, phase[k]);
        cr_assert_eq(cli("plan", &m, args, false, plan, sizeof plan), 0, "%s", plan);
        const char *tb = strstr(plan, "\"transfer_bytes\":");
        cr_assert_not_null(tb, "%s", plan);
        double bytes = strtod(tb + strlen("\"transfer_bytes\":"), NULL);
        cr_assert_gt(bytes, 0);
        cr_assert_eq(json_num(out, tests[k], "transfer_bytes_per_step"), bytes, "%s", out);
        cr_assert_eq(json_num(out, tests[k], "planned_transfer_bytes_per_step"), bytes, "%s",
                     out);
    }
    drop_model(&m);
}

Test(cli, bench_runs_each_test_at_each_depth_and_counts_only_the_timed_steps)
{
    cli_model m;
    make_model(&m);
    static char out[65536];
    int rc = cli("bench", &m, "-p 8 -n 4 -d 0,24 -r 2 -o json", false, out, sizeof out);
    cr_assert_eq(rc, 0, "%s", out);
    const char *tests[] = {"pp8", "tg4", "pp8 @ d24", "tg4 @ d24"};
    const double depth[] = {0, 0, 24, 24}, steps[] = {2, 8, 2, 8}, tokens[] = {8, 4, 8, 4};
    for (int k = 0; k < 4; k++) {
        cr_assert_eq(json_num(out, tests[k], "n_depth"), depth[k], "%s", out);
        /* The depth's filling runs before the clock starts, and its steps
         * are not the test's. */
        cr_assert_eq(json_num(out, tests[k], "steps"), steps[k], "%s", out);
        cr_assert_gt(json_num(out, tests[k], "avg_ts"), 0.0, "%s", out);
        /* The cache holds the depth and the test's tokens. */
        const double kv = json_num(out, tests[k], "kv_bytes");
        const double kv0 = json_num(out, tests[k % 2], "kv_bytes");
        cr_assert_gt(kv0, 0.0, "%s", out);
        cr_assert_eq(kv * tokens[k], kv0 * (depth[k] + tokens[k]), "%s", out);
    }
    refused("bench", &m, "-d x", 2, "-d needs an integer in [0, 1048576], got 'x'");
    drop_model(&m);
}
