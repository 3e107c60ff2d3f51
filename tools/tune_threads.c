/* The per-device choices `switchyard tune` makes by measurement.  The
 * CPU's thread count: the model's decode and prefill steps are timed as
 * one launch each with 1, 2, 4, ... up to every core (the plugin reads
 * SWITCHYARD_THREADS when it starts, so each count gets its own runtime),
 * and the count that serves a prompt plus a reply fastest is stored in the
 * cpu profile ("threads", docs/profiles.md), where `run` and `bench` find
 * it (cli_probe.c).  Plugin settings (the cpu plugin's GEMM tile rows,
 * the OpenCL plugin's single-token matmul kernel) go the same way, as the
 * environment variables the plugins read at init: one runtime per value,
 * all alive at once, timed in alternating rounds; the fastest value is
 * stored in the profile's "options". */
#include <cjson/cJSON.h>
#include <ctype.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "probe.h"
#include "tune.h"

/* Times |m|'s step of |T| tokens after |past| on device |dev| of |rt| as
 * one launch: sy__timing_estimate over |reps| launches after a warm one. */
static sy_status tt_step_on(sy_runtime *rt, uint32_t dev, const sy_model *m, uint32_t T,
                            uint32_t past, uint32_t reps, double *out_s)
{
    sy_graph *g = NULL;
    void *scratch = NULL;
    sy_status st = tune_build_step(m, T, past, &g, &scratch);
    if (st != SY_OK)
        return st;
    sy_bench *b = NULL;
    st = sy_bench_create(rt, g, dev, &b);
    if (st == SY_OK)
        st = sy_bench_time(b, 0, sy_graph_node_count(g), 1, reps, 10.0, out_s);
    sy_bench_destroy(b);
    sy_graph_destroy(g);
    free(scratch);
    return st;
}

sy_status tune_cpu_threads(const char *model_path, uint32_t cores, const tune_opts *o,
                           tune_threads *out)
{
    memset(out, 0, sizeof *out);
    out->prefill_tokens = o->prefill_tokens ? o->prefill_tokens : 1;
    out->decode_steps = TUNE_THREADS_DECODE_STEPS;
    const char *env = getenv("SWITCHYARD_THREADS");
    char saved[32] = "";
    if (env)
        snprintf(saved, sizeof saved, "%s", env);
    sy_status st = SY_OK;
    for (uint32_t t = 1; t <= cores && out->n < TUNE_MAX_THREAD_COUNTS && st == SY_OK;
         t = t < cores && t * 2 > cores ? cores : t * 2) {
        char n[16];
        snprintf(n, sizeof n, "%u", t);
        setenv("SWITCHYARD_THREADS", n, 1);
        sy_runtime_options ro;
        sy_runtime_options_init(&ro);
        ro.plugins = "cpu";
        sy_runtime *rt = NULL;
        sy_model *m = NULL;
        st = sy_runtime_create(&ro, &rt);
        if (st == SY_OK && sy_runtime_device_count(rt) == 0)
            st = SY_E_NOT_FOUND;
        if (st == SY_OK)
            st = sy_model_open(rt, model_path, &m);
        uint32_t i = out->n;
        out->threads[i] = t;
        if (st == SY_OK)
            st = tt_step_on(rt, 0, m, 1, o->decode_past, tune_reps(o), &out->decode_s[i]);
        if (st == SY_OK)
            st = tt_step_on(rt, 0, m, out->prefill_tokens, 0, tune_reps(o), &out->prefill_s[i]);
        if (st == SY_OK)
            out->n++;
        else if (rt)
            fprintf(stderr, "switchyard tune: %u threads: %s\n", t, sy_runtime_last_error(rt));
        sy_model_close(m);
        sy_runtime_destroy(rt);
        if (t == cores)
            break;
    }
    if (saved[0])
        setenv("SWITCHYARD_THREADS", saved, 1);
    else
        unsetenv("SWITCHYARD_THREADS");
    double best = 0;
    for (uint32_t i = 0; i < out->n; i++) {
        double cost = out->prefill_s[i] + out->decode_s[i] * out->decode_steps;
        if (i == 0 || cost < best) {
            best = cost;
            out->best = out->threads[i];
        }
    }
    return out->n > 0 ? SY_OK : st;
}

/* The profile at |path| parsed, or NULL when it cannot be read (missing,
 * empty, over 16 MiB) or is not JSON. */
static cJSON *profile_parse(const char *path)
{
    FILE *f = fopen(path, "rb");
    if (!f)
        return NULL;
    char *buf = NULL;
    long size = fseek(f, 0, SEEK_END) == 0 ? ftell(f) : -1;
    if (size > 0 && size < (16l << 20) && fseek(f, 0, SEEK_SET) == 0)
        buf = malloc((size_t)size + 1);
    size_t n = buf ? fread(buf, 1, (size_t)size, f) : 0;
    fclose(f);
    cJSON *root = buf ? cJSON_ParseWithLength(buf, n) : NULL;
    free(buf);
    return root;
}

uint32_t tune_profile_threads(const char *path)
{
    cJSON *root = profile_parse(path);
    const cJSON *th = cJSON_GetObjectItemCaseSensitive(root, "threads");
    const cJSON *best = cJSON_GetObjectItemCaseSensitive(th, "best");
    uint32_t v = cJSON_IsNumber(best) && best->valuedouble >= 1 && best->valuedouble <= 1024
                     ? (uint32_t)best->valuedouble
                     : 0;
    cJSON_Delete(root);
    return v;
}

/* ------------------------------------------------------ plugin options */

static int to_cmp(const void *a, const void *b)
{
    double x = *(const double *)a, y = *(const double *)b;
    return x < y ? -1 : x > y;
}

sy_status tune_plugin_option(const char *model_path, const char *plugin, const char *device,
                             const char *name, const char *const *values, uint32_t n_values,
                             const tune_opts *o, tune_option *out)
{
    memset(out, 0, sizeof *out);
    if (n_values == 0 || n_values > TUNE_MAX_OPTION_VALUES)
        return SY_E_INVALID_ARG;
    snprintf(out->name, sizeof out->name, "%s", name);
    out->prefill_tokens = o->prefill_tokens ? o->prefill_tokens : 1;
    out->decode_steps = TUNE_THREADS_DECODE_STEPS;
    const char *env = getenv(name);
    char saved[64] = "";
    if (env)
        snprintf(saved, sizeof saved, "%s", env);
    sy_runtime *rt[TUNE_MAX_OPTION_VALUES] = {0};
    sy_model *m[TUNE_MAX_OPTION_VALUES] = {0};
    uint32_t dev[TUNE_MAX_OPTION_VALUES] = {0};
    sy_status st = SY_OK;
    for (uint32_t v = 0; v < n_values && st == SY_OK; v++) {
        snprintf(out->values[v], sizeof out->values[v], "%s", values[v]);
        setenv(name, values[v], 1);
        sy_runtime_options ro;
        sy_runtime_options_init(&ro);
        ro.plugins = plugin;
        st = sy_runtime_create(&ro, &rt[v]);
        if (st == SY_OK)
            st = sy_runtime_find_device(rt[v], device, &dev[v]);
        if (st == SY_OK)
            st = sy_model_open(rt[v], model_path, &m[v]);
        if (st != SY_OK && rt[v])
            fprintf(stderr, "switchyard tune: %s=%s: %s\n", name, values[v],
                    sy_runtime_last_error(rt[v]));
    }
    if (saved[0])
        setenv(name, saved, 1);
    else
        unsetenv(name);
    /* Rounds alternate between the values, so that a minute of load hits
     * every value alike; each figure is the median over the rounds.  A
     * value that served TUNE_OPTION_DROP times slower than the best in the
     * first round cannot win and is not timed again (PoCL's work-group
     * matvec is 4x slower than its row kernel: most of the setting's time). */
    const uint32_t rounds = o->quick ? 3 : 5, reps = o->quick ? 2 : 3;
    double dec[TUNE_MAX_OPTION_VALUES][8], pre[TUNE_MAX_OPTION_VALUES][8];
    uint32_t done[TUNE_MAX_OPTION_VALUES] = {0};
    double first_best = 0;
    for (uint32_t r = 0; r < rounds && st == SY_OK; r++) {
        for (uint32_t v = 0; v < n_values && st == SY_OK; v++) {
            uint32_t k = (v + r) % n_values;
            if (r > 0 && done[k] &&
                pre[k][0] + dec[k][0] * out->decode_steps > first_best * TUNE_OPTION_DROP)
                continue;
            st = tt_step_on(rt[k], dev[k], m[k], 1, o->decode_past, reps, &dec[k][done[k]]);
            if (st == SY_OK)
                st = tt_step_on(rt[k], dev[k], m[k], out->prefill_tokens, 0, reps,
                                &pre[k][done[k]]);
            if (st == SY_OK)
                done[k]++;
            else
                fprintf(stderr, "switchyard tune: %s=%s: %s\n", name, values[k],
                        sy_runtime_last_error(rt[k]));
        }
        for (uint32_t v = 0; v < n_values && r == 0 && st == SY_OK; v++) {
            double cost = pre[v][0] + dec[v][0] * out->decode_steps;
            first_best = v == 0 || cost < first_best ? cost : first_best;
        }
    }
    /* The first value is the plugin's default; another replaces it only
     * when it serves TUNE_OPTION_MARGIN faster, so that noise between
     * equal values never moves a setting. */
    double best = 0, dflt = 0;
    for (uint32_t v = 0; v < n_values && st == SY_OK; v++) {
        qsort(dec[v], done[v], sizeof dec[v][0], to_cmp);
        qsort(pre[v], done[v], sizeof pre[v][0], to_cmp);
        out->decode_s[v] = dec[v][done[v] / 2];
        out->prefill_s[v] = pre[v][done[v] / 2];
        double cost = out->prefill_s[v] + out->decode_s[v] * out->decode_steps;
        if (v == 0)
            best = dflt = cost;
        else if (cost < best && cost < dflt * (1.0 - TUNE_OPTION_MARGIN)) {
            best = cost;
            out->best = v;
        }
    }
    if (st == SY_OK)
        out->n = n_values;
    for (uint32_t v = 0; v < n_values; v++) {
        sy_model_close(m[v]);
        sy_runtime_destroy(rt[v]);
    }
    return st;
}

static bool to_plain(const char *v)
{
    size_t n = strlen(v);
    if (n == 0 || n >= 64)
        return false;
    for (size_t i = 0; i < n; i++)
        if (!isalnum((unsigned char)v[i]) && v[i] != '_' && v[i] != '.' && v[i] != '-')
            return false;
    return true;
}

int tune_profile_options(const char *path, const char *device,
                         void (*apply)(const char *name, const char *value, void *ctx), void *ctx)
{
    cJSON *root = profile_parse(path);
    const cJSON *dev = cJSON_GetObjectItemCaseSensitive(root, "device");
    if (!root || (device && (!cJSON_IsString(dev) || strcmp(dev->valuestring, device) != 0))) {
        cJSON_Delete(root);
        return -1;
    }
    const cJSON *opts = cJSON_GetObjectItemCaseSensitive(root, "options");
    int count = 0;
    const cJSON *it = NULL;
    if (cJSON_IsObject(opts))
        cJSON_ArrayForEach(it, opts)
        {
            if (!it->string || strncmp(it->string, "SWITCHYARD_", 11) != 0 ||
                !to_plain(it->string) || !cJSON_IsString(it) || !to_plain(it->valuestring))
                continue;
            apply(it->string, it->valuestring, ctx);
            count++;
        }
    cJSON_Delete(root);
    return count;
}
