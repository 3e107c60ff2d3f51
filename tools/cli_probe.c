/* The probe as the commands that run or plan models use it: the first
 * time one of them needs device information on a machine, the probe runs
 * (a few seconds, one line on stderr) and is cached; after that it is
 * read from the cache.  Auto-configuration (docs/probe.md) picks the CPU
 * thread count, the context and the KV precision wherever the user left
 * them open. */
#include <errno.h>
#include <fcntl.h>
#include <spawn.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <sys/wait.h>
#include <unistd.h>

#include "cli.h"
#include "probe.h"
#include "runtime_internal.h"
#include "tune.h"

extern char **environ;

/* "cpu,opencl:0": the devices of |rt|, as --devices takes them. */
static void device_list(const sy_runtime *rt, char *out, size_t size)
{
    size_t used = 0;
    out[0] = '\0';
    for (uint32_t i = 0; i < sy_runtime_device_count(rt); i++) {
        sy_device_desc d;
        if (sy_runtime_query_device(rt, i, &d) != SY_OK)
            continue;
        int w = snprintf(out + used, size - used, "%s%s", used ? "," : "", d.name);
        if (w < 0 || (size_t)w >= size - used)
            break;
        used += (size_t)w;
    }
}

/* Runs `switchyard probe --devices LIST` as a child process, so that the
 * probe's buffers (half a GiB for host bandwidth) never count in this
 * process's peak memory, nor its threads in its timings.  False when the
 * child could not run or failed. */
static bool probe_in_child(const sy_runtime *rt)
{
    char list[1024];
    device_list(rt, list, sizeof list);
    char *argv[] = {"switchyard", "probe", "--devices", list, NULL};
    posix_spawn_file_actions_t fa;
    if (posix_spawn_file_actions_init(&fa) != 0)
        return false;
    posix_spawn_file_actions_addopen(&fa, STDOUT_FILENO, "/dev/null", O_WRONLY, 0);
    pid_t pid;
    int err = posix_spawn(&pid, "/proc/self/exe", &fa, NULL, argv, environ);
    posix_spawn_file_actions_destroy(&fa);
    if (err != 0)
        return false;
    int status = 0;
    while (waitpid(pid, &status, 0) < 0)
        if (errno != EINTR)
            return false;
    return WIFEXITED(status) && WEXITSTATUS(status) == 0;
}

sy_status sy_cli_ensure_probe(sy_runtime *rt, const char *cmd, sy_probe *out_probe)
{
    sy_probe_options o;
    sy_probe_options_init(&o);
    o.cache_only = true;
    sy_status st = sy_runtime_probe(rt, &o, out_probe);
    if (st != SY_E_NOT_FOUND)
        return st;
    char path[1024];
    if (sy_probe_default_cache_path(path, sizeof path) != SY_OK)
        snprintf(path, sizeof path, "nowhere (no home directory)");
    fprintf(stderr,
            "switchyard %s: measuring this machine's devices once (about %.0f s, more where a "
            "driver first builds its kernels; cached in %s)\n",
            cmd, SY_PROBE_DEFAULT_BUDGET_S, path);
    double t0 = sy__probe_now();
    /* In a child when it can write the cache; in this process otherwise
     * (then the measurement is still used, just not kept). */
    if (!probe_in_child(rt) || sy_runtime_probe(rt, &o, out_probe) != SY_OK) {
        o.cache_only = false;
        st = sy_runtime_probe(rt, &o, out_probe);
        if (st != SY_OK) {
            fprintf(stderr, "switchyard %s: the probe failed (%s: %s); going on without it\n",
                    cmd, sy_status_str(st), sy_runtime_last_error(rt));
            return st;
        }
    }
    double first = 0;
    for (uint32_t i = 0; i < out_probe->n_devices; i++)
        first += out_probe->devices[i].first_use_s;
    double took = sy__probe_now() - t0;
    fprintf(stderr, "switchyard %s: probed in %.1f s%s ('switchyard probe' shows the results)\n",
            cmd, took - first, first > 0.5 ? " plus first-use kernel builds" : "");
    return SY_OK;
}

/* What auto-configuration needs from a model file before it is opened: the
 * file's size stands in for the weight bytes (the rest is a few MiB of
 * metadata and vocabulary). */
static sy_autoconfig_model model_from_file(const char *path)
{
    sy_autoconfig_model m = {0};
    struct stat sb;
    if (path && stat(path, &sb) == 0 && sb.st_size > 0)
        m.weight_bytes = (uint64_t)sb.st_size;
    return m;
}

/* The CPU thread count `switchyard tune` measured best, from the first cpu
 * profile along the profile search path (the one planners load), or 0. */
static uint32_t tuned_threads(const sy_runtime *rt)
{
    const char *path = sy__runtime_profile_path(rt);
    for (const char *at = path; at && *at;) {
        size_t len = strcspn(at, ":");
        char file[1100];
        int n = snprintf(file, sizeof file, "%.*s/cpu.json", (int)len, at);
        if (len > 0 && n > 0 && (size_t)n < sizeof file && access(file, R_OK) == 0)
            return tune_profile_threads(file);
        at += len + (at[len] == ':');
    }
    return 0;
}

static bool has_cpu_device(const sy_runtime *rt)
{
    uint32_t i;
    return sy_runtime_find_device(rt, "cpu", &i) == SY_OK;
}

/* Environment variables set here for one runtime's plugins. */
typedef struct cli_env {
    char names[8][64];
    uint32_t n;
} cli_env;

static void cli_env_set(const char *name, const char *value, void *ctx)
{
    cli_env *e = ctx;
    const char *cur = getenv(name);
    if ((cur && cur[0]) || e->n >= 8)
        return;
    setenv(name, value, 1);
    snprintf(e->names[e->n++], sizeof e->names[0], "%s", name);
}

/* The plugin settings `switchyard tune` chose for every device of |rt|
 * ("options" of each device's profile, the first found along the profile
 * search path the way the planner finds it: the device's own file, else
 * its plugin's when that describes this device), set in the environment
 * where the user has not set them. */
static void tuned_options(const sy_runtime *rt, cli_env *env)
{
    const char *path = sy__runtime_profile_path(rt);
    for (uint32_t i = 0; i < sy_runtime_device_count(rt); i++) {
        sy_device_desc d;
        if (sy_runtime_query_device(rt, i, &d) != SY_OK)
            continue;
        char own[SY_NAME_MAX], plugin[SY_NAME_MAX];
        snprintf(own, sizeof own, "%s", d.name);
        for (char *p = own; *p; p++)
            if (*p == ':' || *p == '/')
                *p = '_';
        snprintf(plugin, sizeof plugin, "%.*s", (int)strcspn(d.name, ":"), d.name);
        bool found = false;
        for (const char *at = path; at && *at && !found;) {
            size_t len = strcspn(at, ":");
            const char *names[2] = {own, plugin};
            for (int k = 0; k < 2 && !found && len > 0; k++) {
                char file[1100];
                int n = snprintf(file, sizeof file, "%.*s/%s.json", (int)len, at, names[k]);
                if (n > 0 && (size_t)n < sizeof file && access(file, R_OK) == 0)
                    found = tune_profile_options(file, d.name, cli_env_set, env) >= 0;
            }
            at += len + (at[len] == ':');
        }
    }
}

sy_runtime *sy_cli_runtime_probed(const char *cmd, const char *devices, const char *model_path,
                                  sy_probe *out_probe)
{
    sy_runtime *rt = sy_cli_runtime_for(devices);
    if (!rt)
        return NULL;
    memset(out_probe, 0, sizeof *out_probe);
    if (sy_cli_ensure_probe(rt, cmd, out_probe) != SY_OK) {
        memset(out_probe, 0, sizeof *out_probe);
        return rt;
    }
    /* Settings a plugin reads when it starts mean a new runtime: the
     * thread count and the options tune chose. */
    cli_env env = {.n = 0};
    tuned_options(rt, &env);
    const char *user = getenv("SWITCHYARD_THREADS");
    if (!(user && user[0]) && has_cpu_device(rt)) {
        /* The CPU plugin starts one lane per physical core unless told
         * otherwise (and, once, the probe measures the CPU with that many
         * threads, which the cache keeps beside the other).  A count tune
         * measured wins over the probe's rule. */
        uint32_t threads = tuned_threads(rt);
        sy_autoconfig_model am = model_from_file(model_path);
        sy_autoconfig ac;
        if (threads == 0 && sy_probe_autoconfig(out_probe, &am, &ac) == SY_OK)
            threads = ac.n_threads;
        if (threads != 0 && threads != out_probe->cores) {
            char n[16];
            snprintf(n, sizeof n, "%u", threads);
            cli_env_set("SWITCHYARD_THREADS", n, &env);
        }
    }
    if (env.n == 0)
        return rt;
    sy_runtime_destroy(rt);
    rt = sy_cli_runtime_for(devices);
    if (rt && sy_cli_ensure_probe(rt, cmd, out_probe) != SY_OK)
        memset(out_probe, 0, sizeof *out_probe);
    /* The plugins have read them; the next runtime (bench's next model) is
     * configured afresh. */
    for (uint32_t k = 0; k < env.n; k++)
        unsetenv(env.names[k]);
    return rt;
}

void sy_cli_autoconfig_session(const sy_probe *p, const sy_model *m, bool ctx_given, bool kv_given,
                               sy_session_options *so)
{
    if (!p || p->n_devices == 0 || (ctx_given && kv_given))
        return;
    sy_model_info mi;
    if (sy_model_query_info(m, &mi) != SY_OK)
        return;
    sy_autoconfig_model am = {.weight_bytes = mi.weight_bytes,
                              .n_layer = mi.n_layer,
                              .n_head_kv = mi.n_head_kv,
                              .head_dim = mi.head_dim,
                              .n_ctx_train = mi.n_ctx_train};
    sy_autoconfig ac;
    if (sy_probe_autoconfig(p, &am, &ac) != SY_OK)
        return;
    if (!ctx_given)
        so->n_ctx = ac.n_ctx;
    if (!kv_given)
        so->kv_type = ac.kv_type;
}
