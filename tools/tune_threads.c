/* The CPU's thread count, the per-device choice `switchyard tune` makes
 * for the cpu plugin: the model's decode and prefill steps are timed as
 * one launch each with 1, 2, 4, ... up to every core (the plugin reads
 * SWITCHYARD_THREADS when it starts, so each count gets its own runtime),
 * and the count that serves a prompt plus a reply fastest is stored in the
 * cpu profile ("threads", docs/profiles.md), where `run` and `bench` find
 * it (cli_probe.c). */
#include <cjson/cJSON.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "probe.h"
#include "tune.h"

/* Times |m|'s step of |T| tokens after |past| on device 0 of |rt| as one
 * launch: sy__timing_estimate over |reps| launches after a warm one. */
static sy_status tt_step(sy_runtime *rt, const sy_model *m, uint32_t T, uint32_t past,
                         uint32_t reps, double *out_s)
{
    sy_graph *g = NULL;
    void *scratch = NULL;
    sy_status st = tune_build_step(m, T, past, &g, &scratch);
    if (st != SY_OK)
        return st;
    sy_bench *b = NULL;
    st = sy_bench_create(rt, g, 0, &b);
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
            st = tt_step(rt, m, 1, o->decode_past, tune_reps(o), &out->decode_s[i]);
        if (st == SY_OK)
            st = tt_step(rt, m, out->prefill_tokens, 0, tune_reps(o), &out->prefill_s[i]);
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

uint32_t tune_profile_threads(const char *path)
{
    FILE *f = fopen(path, "rb");
    if (!f)
        return 0;
    char *buf = NULL;
    long size = fseek(f, 0, SEEK_END) == 0 ? ftell(f) : -1;
    if (size > 0 && size < (16l << 20) && fseek(f, 0, SEEK_SET) == 0)
        buf = malloc((size_t)size + 1);
    size_t n = buf ? fread(buf, 1, (size_t)size, f) : 0;
    fclose(f);
    cJSON *root = buf ? cJSON_ParseWithLength(buf, n) : NULL;
    free(buf);
    const cJSON *th = cJSON_GetObjectItemCaseSensitive(root, "threads");
    const cJSON *best = cJSON_GetObjectItemCaseSensitive(th, "best");
    uint32_t v = cJSON_IsNumber(best) && best->valuedouble >= 1 && best->valuedouble <= 1024
                     ? (uint32_t)best->valuedouble
                     : 0;
    cJSON_Delete(root);
    return v;
}
