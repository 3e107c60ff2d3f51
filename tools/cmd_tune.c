/* switchyard tune [--device D] [-m MODEL] [--quick] [--validate]: times
 * every (op, dtype, shape class) on every device, fits the cost model per
 * op family and dtype, and writes one profile per device to the user
 * profile directory (docs/probe.md); --validate compares the scheduler's
 * predictions from those profiles with per-node timings of the model's
 * decode and prefill steps. */
#include <errno.h>
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <time.h>
#include <unistd.h>

#include "cli.h"
#include "cost_model.h"
#include "probe.h"
#include "tune.h"

typedef struct tune_args {
    const char *device, *model, *out_dir;
    bool quick, validate, verbose, no_tune;
    uint32_t tokens, past;
} tune_args;

static void usage(FILE *f)
{
    fprintf(f,
            "usage: switchyard tune [--device D] [-m MODEL] [--quick] [--validate] [--out DIR]\n"
            "  --device D     tune only device D (default: every device)\n"
            "  -m MODEL       time the nodes of MODEL's decode and prefill steps (default: a\n"
            "                 standard set of shape classes)\n"
            "  --quick        fewer repetitions and shapes (under a minute)\n"
            "  --validate     predicted vs measured per node and per step of MODEL's decode and\n"
            "                 prefill (needs -m; uses the profiles just written, or the\n"
            "                 existing ones with --no-tune)\n"
            "  --no-tune      only validate\n"
            "  --tokens N     prefill tokens (default 64, 32 with --quick)\n"
            "  --past N       context before the decode token (default 128)\n"
            "  --out DIR      profile directory (default $SWITCHYARD_PROFILE_DIR, else\n"
            "                 $XDG_DATA_HOME/switchyard/profiles or ~/.local/share/...)\n"
            "  --verbose      print every timing\n");
}

static int parse(int argc, char **argv, tune_args *a)
{
    for (int i = 1; i < argc; i++) {
        const char *o = argv[i];
        bool has = i + 1 < argc;
        if (strcmp(o, "--help") == 0 || strcmp(o, "-h") == 0) {
            usage(stdout);
            return -1;
        } else if (strcmp(o, "--device") == 0 && has) {
            a->device = argv[++i];
        } else if ((strcmp(o, "-m") == 0 || strcmp(o, "--model") == 0) && has) {
            a->model = argv[++i];
        } else if (strcmp(o, "--out") == 0 && has) {
            a->out_dir = argv[++i];
        } else if (strcmp(o, "--tokens") == 0 && has) {
            a->tokens = (uint32_t)strtoul(argv[++i], NULL, 10);
        } else if (strcmp(o, "--past") == 0 && has) {
            a->past = (uint32_t)strtoul(argv[++i], NULL, 10);
        } else if (strcmp(o, "--quick") == 0) {
            a->quick = true;
        } else if (strcmp(o, "--validate") == 0) {
            a->validate = true;
        } else if (strcmp(o, "--no-tune") == 0) {
            a->no_tune = true;
        } else if (strcmp(o, "--verbose") == 0) {
            a->verbose = true;
        } else {
            fprintf(stderr, "switchyard tune: unknown option '%s'\n", o);
            usage(stderr);
            return 2;
        }
    }
    if (a->validate && !a->model) {
        fprintf(stderr, "switchyard tune: --validate needs -m MODEL\n");
        return 2;
    }
    return 0;
}

/* The user profile directory (docs/probe.md). */
static int profile_dir(const char *given, char *out, size_t size)
{
    const char *env = getenv("SWITCHYARD_PROFILE_DIR");
    const char *xdg = getenv("XDG_DATA_HOME");
    const char *home = getenv("HOME");
    int n;
    if (given)
        n = snprintf(out, size, "%s", given);
    else if (env && env[0])
        n = snprintf(out, size, "%s", env);
    else if (xdg && xdg[0] == '/')
        n = snprintf(out, size, "%s/switchyard/profiles", xdg);
    else if (home && home[0])
        n = snprintf(out, size, "%s/.local/share/switchyard/profiles", home);
    else
        return -1;
    return n > 0 && (size_t)n < size ? 0 : -1;
}

static int mkdirs(const char *dir)
{
    char buf[1024];
    snprintf(buf, sizeof buf, "%s", dir);
    for (char *p = buf + 1; *p; p++) {
        if (*p != '/')
            continue;
        *p = '\0';
        if (mkdir(buf, 0755) != 0 && errno != EEXIST)
            return -1;
        *p = '/';
    }
    return mkdir(buf, 0755) != 0 && errno != EEXIST ? -1 : 0;
}

/* "opencl:0" -> "<dir>/opencl_0.json". */
static void profile_path(const char *dir, const char *device, char *out, size_t size)
{
    char name[SY_NAME_MAX];
    snprintf(name, sizeof name, "%s", device);
    for (char *p = name; *p; p++)
        if (*p == ':' || *p == '/')
            *p = '_';
    snprintf(out, size, "%s/%s.json", dir, name);
}

/* What tune chose for one device before timing its ops. */
typedef struct tune_choices {
    char device[SY_NAME_MAX];
    bool has_threads;
    tune_threads threads;
    tune_option options[TUNE_MAX_OPTIONS];
    uint32_t n_options;
} tune_choices;

/* The settings tune measures per plugin: the environment variable, its
 * values (the plugin's default first). */
static const char *const cpu_rows[] = {"32", "16", "64"};
static const char *const ocl_matvec_cpu[] = {"rows", "groups"};
static const char *const ocl_matvec_gpu[] = {"groups", "rows"};

static const char *const ocl_matvec_wg[] = {"auto", "16", "64", "8", "256"};

static void print_option(const tune_option *t)
{
    printf("%s (prefill %u tokens + %u decode steps, medians of alternating rounds):", t->name,
           t->prefill_tokens, t->decode_steps);
    for (uint32_t k = 0; k < t->n; k++)
        printf(" %s: %.1f ms + %u x %.2f ms%s", t->values[k], t->prefill_s[k] * 1e3,
               t->decode_steps, t->decode_s[k] * 1e3, k + 1 < t->n ? ";" : "");
    printf(" -> %s\n", t->values[t->best]);
}

/* Tunes plugin setting |name| over |values| unless the user set it;
 * appends it to |out| and returns it, or NULL. */
static const tune_option *choose_option(const char *model, const char *plugin, const char *device,
                                        const char *name, const char *const *values,
                                        uint32_t n_values, const tune_opts *o, tune_choices *out)
{
    if (getenv(name) && getenv(name)[0]) {
        printf("%s: %s set by the environment, not tuned\n", device, name);
        return NULL;
    }
    if (out->n_options >= TUNE_MAX_OPTIONS)
        return NULL;
    tune_option *t = &out->options[out->n_options];
    if (tune_plugin_option(model, plugin, device, name, values, n_values, o, t) != SY_OK)
        return NULL;
    out->n_options++;
    print_option(t);
    return t;
}

/* Chooses device |dev|'s settings with the model (threads, plugin
 * options); the caller applies them before timing the ops. */
static void choose(sy_runtime *rt, uint32_t dev, const sy_probe *probe, const tune_args *a,
                   tune_choices *out)
{
    sy_device_desc d;
    sy_runtime_query_device(rt, dev, &d);
    memset(out, 0, sizeof *out);
    snprintf(out->device, sizeof out->device, "%s", d.name);
    tune_opts o = {.quick = a->quick, .verbose = a->verbose, .prefill_tokens = a->tokens,
                   .decode_past = a->past};
    const sy_probe_device *pd = dev < probe->n_devices ? &probe->devices[dev] : NULL;
    const bool cpu = strcmp(d.name, "cpu") == 0;
    /* The CPU's thread count first: the other settings are measured with
     * the count chosen. */
    const char *user_env = getenv("SWITCHYARD_THREADS");
    const bool user_threads = user_env && user_env[0];
    if (cpu && probe->cores_allowed > 1 &&
        tune_cpu_threads(a->model, probe->cores_allowed, &o, &out->threads) == SY_OK) {
        tune_threads *tt = &out->threads;
        out->has_threads = true;
        printf("cpu threads (prefill %u tokens + %u decode steps):", tt->prefill_tokens,
               tt->decode_steps);
        for (uint32_t k = 0; k < tt->n; k++)
            printf(" %u: %.1f ms + %u x %.2f ms%s", tt->threads[k], tt->prefill_s[k] * 1e3,
                   tt->decode_steps, tt->decode_s[k] * 1e3, k + 1 < tt->n ? ";" : "");
        printf(" -> %u\n", tt->best);
    }
    char threads[16];
    bool set_threads = cpu && out->has_threads && !user_threads;
    if (set_threads) {
        snprintf(threads, sizeof threads, "%u", out->threads.best);
        setenv("SWITCHYARD_THREADS", threads, 1);
    }
    if (cpu) {
        choose_option(a->model, "cpu", d.name, "SWITCHYARD_CPU_MATMUL_ROWS", cpu_rows,
                      sizeof cpu_rows / sizeof cpu_rows[0], &o, out);
    } else if (pd && strcmp(pd->plugin, "opencl") == 0) {
        /* The kernel first (the plugin's default first: rows on CPU
         * runtimes, groups else), then its work-group with the kernel
         * chosen. */
        const tune_option *mv = choose_option(
            a->model, "opencl", d.name, "SWITCHYARD_OPENCL_MATVEC",
            d.kind == SY_DEVICE_CPU ? ocl_matvec_cpu : ocl_matvec_gpu, 2, &o, out);
        const char *user_mv = getenv("SWITCHYARD_OPENCL_MATVEC");
        const bool set_mv = mv && !(user_mv && user_mv[0]);
        if (set_mv)
            setenv("SWITCHYARD_OPENCL_MATVEC", mv->values[mv->best], 1);
        choose_option(a->model, "opencl", d.name, "SWITCHYARD_OPENCL_MATVEC_WG", ocl_matvec_wg,
                      a->quick ? 3u : sizeof ocl_matvec_wg / sizeof ocl_matvec_wg[0], &o, out);
        if (set_mv)
            unsetenv("SWITCHYARD_OPENCL_MATVEC");
    }
    if (set_threads)
        unsetenv("SWITCHYARD_THREADS");
}

static int tune_one(sy_runtime *rt, uint32_t dev, sy_model *m, const sy_probe *probe,
                    const tune_args *a, const char *dir, const tune_choices *ch)
{
    sy_device_desc d;
    sy_runtime_query_device(rt, dev, &d);
    tune_opts o = {.quick = a->quick, .verbose = a->verbose, .prefill_tokens = a->tokens,
                   .decode_past = a->past};
    tune_samples s = {0};
    uint32_t skipped = 0;
    double t0 = sy__probe_now();
    sy_status st = tune_device(rt, dev, m, &o, &s, &skipped);
    if (st != SY_OK || s.n == 0) {
        fprintf(stderr, "switchyard tune: %s: nothing timed (%s)\n", d.name,
                st != SY_OK ? sy_runtime_last_error(rt) : "no supported op");
        tune_samples_free(&s);
        return st != SY_OK ? 1 : 0;
    }
    const sy_probe_device *pd = dev < probe->n_devices ? &probe->devices[dev] : NULL;
    char version[64];
    time_t now = time(NULL);
    struct tm tm;
    gmtime_r(&now, &tm);
    strftime(version, sizeof version, "tune %Y-%m-%dT%H:%M:%SZ", &tm);
    if (a->quick)
        snprintf(version + strlen(version), sizeof version - strlen(version), " quick");
    tune_device_info info = {
        .device = d.name,
        .plugin = pd ? pd->plugin : NULL,
        .plugin_version = pd ? pd->plugin_version : NULL,
        .version = version,
        .peak_flops = pd ? pd->flops : 0,
        .peak_bandwidth = pd ? pd->bandwidth_bps : 0,
        .launch_overhead_s = pd ? pd->launch_s : 0,
        .launch_sync_s = s.launch_sync_s,
    };
    /* Every measured copy from this device to another, one link each
     * (the cost model looks the reverse direction up in the other
     * device's profile); sync_s is this device's launch overhead, the
     * price of handing work over. */
    for (uint32_t i = 0; i < probe->n_links && info.n_links < TUNE_MAX_LINKS && pd; i++) {
        const sy_probe_link *l = &probe->links[i];
        if (strcmp(l->from, d.name) != 0 || l->error[0] || l->bps <= 0)
            continue;
        info.links[info.n_links++] = (tune_link){.to = l->to, .bandwidth = l->bps,
                                                 .latency_s = l->latency_s, .sync_s = pd->launch_s};
    }
    if (ch && ch->has_threads)
        info.threads = &ch->threads;
    info.options = ch ? ch->options : NULL;
    info.n_options = ch ? ch->n_options : 0;
    char *json = NULL;
    st = tune_profile_json(&info, &s, &json);
    int rc = 1;
    if (st != SY_OK)
        goto out_samples;
    /* The scheduler's own loader must accept what we write. */
    char err[512] = "";
    sy__profile *prof = NULL;
    st = sy__profile_parse(json, strlen(json), d.name, &prof, err, sizeof err);
    if (st != SY_OK) {
        fprintf(stderr, "switchyard tune: internal error, profile refused: %s\n", err);
        goto out_json;
    }
    uint32_t n_entries = prof->n_ops;
    sy__profile_destroy(prof);
    char path[1200];
    profile_path(dir, d.name, path, sizeof path);
    FILE *f = fopen(path, "w");
    if (!f || fputs(json, f) < 0 || fclose(f) != 0) {
        fprintf(stderr, "switchyard tune: cannot write '%s': %s\n", path, strerror(errno));
        goto out_json;
    }
    printf("%-10s %3u shape classes, %2u op/dtype entries, %u skipped, %.1f s -> %s\n", d.name,
           s.n, n_entries, skipped, sy__probe_now() - t0, path);
    for (uint32_t k = 0; k < s.n_steps; k++) {
        const tune_step_note *sn = &s.steps[k];
        printf("  %-7s %3u token%s after %4u: one launch %8.3f ms, nodes alone %8.3f ms: "
               "node = (alone - %.1f us) x %.3f %s\n",
               sn->tokens == 1 ? "decode" : "prefill", sn->tokens, sn->tokens == 1 ? " " : "s",
               sn->past, sn->launch_s * 1e3, sn->nodes_s * 1e3, sn->sync_s * 1e6, sn->scale,
               sn->applied ? "applied" : "not applied (other processes preempt the launch)");
    }
    for (uint32_t k = 0; k < s.n_tiles; k++) {
        const tune_tile *t = &s.tiles[k];
        printf("  matmul %-5s token tile: ", sy_dtype_name((uint32_t)t->dtype));
        if (t->tokens > 1)
            printf("%u from %u tokens", t->tokens, t->from);
        else
            printf("none");
        printf(" (%u x %u weights at 16/32/33/64 tokens: %.1f/%.1f/%.1f/%.1f us)\n", 1024u, 1024u,
               t->seconds[3] * 1e6, t->seconds[4] * 1e6, t->seconds[5] * 1e6,
               t->seconds[6] * 1e6);
    }
    rc = 0;
out_json:
    free(json);
out_samples:
    tune_samples_free(&s);
    return rc;
}

static int validate(sy_runtime *rt, uint32_t first, uint32_t last, sy_model *m, const tune_args *a,
                    const char *dir)
{
    printf("\nvalidation: profiles in %s, load average %.1f on %ld CPUs%s\n", dir,
           tune_load_average(), sysconf(_SC_NPROCESSORS_ONLN),
           tune_load_average() > (double)sysconf(_SC_NPROCESSORS_ONLN)
               ? " (loaded: other processes preempt long launches, so the one-launch step "
                 "reads slow)"
               : "");
    tune_opts o = {.quick = a->quick, .verbose = a->verbose, .prefill_tokens = a->tokens,
                   .decode_past = a->past};
    int rc = 0;
    for (uint32_t dev = first; dev < last; dev++) {
        sy_device_desc d;
        sy_runtime_query_device(rt, dev, &d);
        char path[1200];
        profile_path(dir, d.name, path, sizeof path);
        if (access(path, R_OK) != 0) {
            printf("  %s: no profile at %s\n", d.name, path);
            continue;
        }
        sy_planner *pl = NULL;
        sy_status st = sy_planner_create(rt, &pl);
        if (st == SY_OK)
            st = sy_planner_load_profile(pl, path);
        if (st != SY_OK) {
            printf("  %s: %s\n", d.name, pl ? sy_planner_last_error(pl) : sy_status_str(st));
            sy_planner_destroy(pl);
            rc = 1;
            continue;
        }
        uint32_t steps[2][2] = {{1, a->past}, {a->tokens, 0}};
        for (uint32_t k = 0; k < 2; k++) {
            tune_step_report r;
            if (tune_validate_step(rt, dev, pl, m, steps[k][0], steps[k][1], &o, stdout, &r) !=
                SY_OK) {
                printf("  %s: validation failed: %s\n", d.name, sy_runtime_last_error(rt));
                rc = 1;
            }
        }
        sy_planner_destroy(pl);
    }
    return rc;
}

/* Environment variables tune set for its own runtime (the chosen
 * settings), unset again at the end. */
typedef struct tune_env {
    char names[TUNE_MAX_OPTIONS + 1][48];
    uint32_t n;
} tune_env;

/* Sets |name| to |value| unless the user already set it. */
static void env_apply(const char *name, const char *value, void *ctx)
{
    tune_env *e = ctx;
    const char *cur = getenv(name);
    if ((cur && cur[0]) || e->n >= TUNE_MAX_OPTIONS + 1)
        return;
    setenv(name, value, 1);
    snprintf(e->names[e->n++], sizeof e->names[0], "%s", name);
}

/* Applies what |ch| chose (or, without choices, what the profiles in
 * |dir| of devices |first|..|last| say) to the environment; true when
 * anything was set, so that the runtime must be created again for the
 * plugins to read it. */
static bool apply_choices(sy_runtime *rt, uint32_t first, uint32_t last, const tune_choices *ch,
                          const char *dir, tune_env *env)
{
    uint32_t before = env->n;
    for (uint32_t dev = first; dev < last; dev++) {
        sy_device_desc d;
        sy_runtime_query_device(rt, dev, &d);
        if (ch) {
            const tune_choices *c = &ch[dev - first];
            char v[16];
            if (c->has_threads) {
                snprintf(v, sizeof v, "%u", c->threads.best);
                env_apply("SWITCHYARD_THREADS", v, env);
            }
            for (uint32_t k = 0; k < c->n_options; k++)
                env_apply(c->options[k].name, c->options[k].values[c->options[k].best], env);
            continue;
        }
        char path[1200];
        profile_path(dir, d.name, path, sizeof path);
        uint32_t t = strcmp(d.name, "cpu") == 0 ? tune_profile_threads(path) : 0;
        if (t) {
            char v[16];
            snprintf(v, sizeof v, "%u", t);
            env_apply("SWITCHYARD_THREADS", v, env);
        }
        tune_profile_options(path, NULL, env_apply, env);
    }
    return env->n > before;
}

/* Creates the runtime, probe and model afresh (plugins read the settings
 * when they start). */
static int reopen(sy_runtime **rt, sy_model **m, sy_probe *probe, const char *devices,
                  const char *model)
{
    sy_model_close(*m);
    *m = NULL;
    sy_runtime_destroy(*rt);
    *rt = sy_cli_runtime_for(devices);
    if (!*rt)
        return 1;
    if (sy_runtime_probe(*rt, NULL, probe) != SY_OK) {
        fprintf(stderr, "switchyard tune: probe failed: %s\n", sy_runtime_last_error(*rt));
        return 1;
    }
    if (model && sy_model_open(*rt, model, m) != SY_OK) {
        fprintf(stderr, "switchyard tune: %s\n", sy_runtime_last_error(*rt));
        return 1;
    }
    return 0;
}

int sy_cli_tune(int argc, char **argv)
{
    tune_args a = {.past = 128};
    int rc = parse(argc, argv, &a);
    if (rc != 0)
        return rc < 0 ? 0 : rc;
    if (!a.tokens)
        a.tokens = a.quick ? 32 : 64;
    char dir[1024];
    if (profile_dir(a.out_dir, dir, sizeof dir) != 0 || mkdirs(dir) != 0) {
        fprintf(stderr, "switchyard tune: no usable profile directory (set --out)\n");
        return 1;
    }
    /* One device still loads the CPU, whose links to it the profile needs. */
    char devices[SY_NAME_MAX + 8];
    if (a.device)
        snprintf(devices, sizeof devices, "%s,cpu", a.device);
    sy_runtime *rt = sy_cli_runtime_for(a.device ? devices : NULL);
    if (!rt)
        return 1;
    rc = 1;
    sy_model *m = NULL;
    sy_probe *probe = calloc(1, sizeof *probe);
    if (!probe)
        goto out_runtime;
    double t0 = sy__probe_now();
    if (sy_runtime_probe(rt, NULL, probe) != SY_OK) {
        fprintf(stderr, "switchyard tune: probe failed: %s\n", sy_runtime_last_error(rt));
        goto out_probe;
    }
    if (a.model && sy_model_open(rt, a.model, &m) != SY_OK) {
        fprintf(stderr, "switchyard tune: %s\n", sy_runtime_last_error(rt));
        goto out_probe;
    }
    uint32_t first = 0, last = sy_runtime_device_count(rt);
    if (a.device) {
        if (sy_runtime_find_device(rt, a.device, &first) != SY_OK) {
            fprintf(stderr, "switchyard tune: no device '%s'\n", a.device);
            goto out_model;
        }
        last = first + 1;
    }
    rc = 0;
    tune_env env = {.n = 0};
    tune_choices *ch = a.model && !a.no_tune ? calloc(last - first, sizeof *ch) : NULL;
    if (ch) {
        /* Settings first (threads, plugin options), each measured in
         * runtimes of its own; then the ops are timed, and validated, in a
         * runtime that runs with the settings chosen, as `run` will. */
        for (uint32_t dev = first; dev < last; dev++)
            choose(rt, dev, probe, &a, &ch[dev - first]);
    }
    if (a.model && apply_choices(rt, first, last, ch, dir, &env)) {
        if (reopen(&rt, &m, probe, a.device ? devices : NULL, a.model) != 0) {
            rc = 1;
            goto out_env;
        }
        for (uint32_t k = 0; k < env.n; k++)
            printf("%s=%s for the runtime that times the ops\n", env.names[k],
                   getenv(env.names[k]));
    }
    if (!a.no_tune) {
        printf("tuning %s on %u device(s)%s\n", a.model ? a.model : "the standard set",
               last - first, a.quick ? " (quick)" : "");
        for (uint32_t dev = first; dev < last; dev++)
            rc |= tune_one(rt, dev, m, probe, &a, dir, ch ? &ch[dev - first] : NULL);
        printf("tuned in %.1f s\n", sy__probe_now() - t0);
    }
    if (a.validate && rc == 0)
        rc = validate(rt, first, last, m, &a, dir);
out_env:
    for (uint32_t k = 0; k < env.n; k++)
        unsetenv(env.names[k]);
    free(ch);
out_model:
    sy_model_close(m);
out_probe:
    free(probe);
out_runtime:
    sy_runtime_destroy(rt);
    return rc;
}
