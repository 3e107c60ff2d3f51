/* overlap: the step time of a graph with two independent heavy branches,
 * one pinned to each of two devices, joined at the end; run by
 * bench/overlap.sh against two builds (the serial executor before issue
 * 4's events, and the overlapped one), interleaved.  Not a test: its
 * figures depend on the machine.
 *
 * usage: overlap DEV_A DEV_B [K] [M] [LAYERS] [RUNS] [auto]
 *   branch "left" (LAYERS matmuls of [K,K] F32 weights on [K,M]) on DEV_A,
 *   branch "right" (the same shape) on DEV_B, "join" = left + right on
 *   DEV_A; with "auto", nothing is pinned and the planner places every
 *   node on DEV_A or DEV_B itself.  Prints the median seconds of one step over RUNS steps, after
 *   two warm-up steps.  Uses only the public API, so it builds against an
 *   older library too. */
#define _POSIX_C_SOURCE 200809L
#include <stdbool.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

#include "switchyard/switchyard.h"

static double now_s(void)
{
    struct timespec t;
    clock_gettime(CLOCK_MONOTONIC, &t);
    return (double)t.tv_sec + (double)t.tv_nsec * 1e-9;
}

static int cmp_double(const void *a, const void *b)
{
    double x = *(const double *)a, y = *(const double *)b;
    return (x > y) - (x < y);
}

static float *random_floats(size_t n, uint64_t *s)
{
    float *v = malloc(n * sizeof *v);
    for (size_t i = 0; v && i < n; i++) {
        *s ^= *s << 13;
        *s ^= *s >> 7;
        *s ^= *s << 17;
        v[i] = (float)((double)(*s >> 11) / 9007199254740992.0 - 0.5) * 0.05f;
    }
    return v;
}

/* Prints what failed; true when |st| is an error. */
static bool failed(sy_status st, const char *what)
{
    if (st != SY_OK)
        fprintf(stderr, "overlap: %s failed: %s\n", what, sy_status_name(st));
    return st != SY_OK;
}

int main(int argc, char **argv)
{
    if (argc < 3) {
        fprintf(stderr, "usage: overlap DEV_A DEV_B [K] [M] [LAYERS] [RUNS] [auto]\n");
        return 2;
    }
    const char *dev_a = argv[1], *dev_b = argv[2];
    int64_t K = argc > 3 ? atoll(argv[3]) : 1024, M = argc > 4 ? atoll(argv[4]) : 32;
    int layers = argc > 5 ? atoi(argv[5]) : 4, runs = argc > 6 ? atoi(argv[6]) : 9;
    bool automatic = argc > 7 && strcmp(argv[7], "auto") == 0;
    sy_runtime_options o;
    sy_runtime_options_init(&o);
    sy_runtime *rt = NULL;
    if (failed(sy_runtime_create(&o, &rt), "runtime"))
        return 1;
    sy_graph *g = NULL;
    if (failed(sy_graph_create(&g), "graph"))
        return 1;
    uint64_t seed = 0x9e3779b97f4a7c15ull;
    int64_t xne[2] = {K, M}, wne[2] = {K, K};
    sy_tensor *x = NULL, *br[2];
    float *xd = random_floats((size_t)(K * M), &seed);
    if (failed(sy_graph_add_tensor(g, "x", SY_DTYPE_F32, 2, xne, SY_ROLE_INPUT, xd, &x), "x"))
        return 1;
    const char *side[2] = {"left", "right"};
    float **wd = calloc((size_t)layers * 2, sizeof *wd);
    for (int b = 0; b < 2; b++) {
        br[b] = x;
        for (int l = 0; l < layers; l++) {
            char name[64];
            snprintf(name, sizeof name, "%s.w%d", side[b], l);
            sy_tensor *w = NULL;
            wd[b * layers + l] = random_floats((size_t)(K * K), &seed);
            if (failed(sy_graph_add_tensor(g, name, SY_DTYPE_F32, 2, wne, SY_ROLE_WEIGHT,
                                      wd[b * layers + l], &w), "weight"))
        return 1;
            snprintf(name, sizeof name, "%s.mm%d", side[b], l);
            sy_tensor *in[2] = {w, br[b]};
            if (failed(sy_graph_add_node(g, SY_OP_MATMUL, name, in, 2, NULL, &br[b]), "matmul"))
        return 1;
        }
    }
    sy_tensor *out = NULL, *jin[2] = {br[0], br[1]};
    if (failed(sy_graph_add_node(g, SY_OP_ADD, "join", jin, 2, NULL, &out), "join"))
        return 1;
    float *od = calloc((size_t)(K * M), sizeof *od);
    if (failed(sy_graph_mark_output(g, out), "output"))
        return 1;
    if (failed(sy_graph_set_host_data(g, out, od), "output data"))
        return 1;
    if (failed(sy_graph_freeze(g), "freeze"))
        return 1;

    sy_planner *pl = NULL;
    if (failed(sy_planner_create(rt, &pl), "planner"))
        return 1;
    char pa[64], pb[64], pj[64];
    snprintf(pa, sizeof pa, "left.*=%s", dev_a);
    snprintf(pb, sizeof pb, "right.*=%s", dev_b);
    snprintf(pj, sizeof pj, "join=%s", dev_a);
    const char *pins[3] = {pa, pb, pj};
    sy_plan_options po;
    sy_plan_options_init(&po);
    char devs[128];
    snprintf(devs, sizeof devs, "%s,%s", dev_a, dev_b);
    if (automatic) {
        po.devices = devs;
    } else {
        po.pins = pins;
        po.n_pins = 3;
    }
    sy_plan *plan = NULL;
    if (sy_planner_plan(pl, g, &po, &plan) != SY_OK) {
        fprintf(stderr, "overlap: planning failed: %s\n", sy_planner_last_error(pl));
        return 1;
    }
    sy_plan_summary s;
    sy_plan_query_summary(plan, &s);
    sy_executor *ex = NULL;
    if (failed(sy_executor_create(rt, &ex), "executor"))
        return 1;
    double *t = calloc((size_t)runs, sizeof *t);
    for (int r = -2; r < runs; r++) {
        double t0 = now_s();
        if (sy_executor_run(ex, g, plan) != SY_OK) {
            fprintf(stderr, "overlap: run failed: %s\n", sy_runtime_last_error(rt));
            return 1;
        }
        if (r >= 0)
            t[r] = now_s() - t0;
    }
    qsort(t, (size_t)runs, sizeof *t, cmp_double);
    double check = 0;
    for (int64_t i = 0; i < K * M; i++)
        check += od[i];
    char alg[160];
    snprintf(alg, sizeof alg, "%s", s.algorithm ? s.algorithm : "");
    for (char *q = alg; *q; q++)
        if (*q == '"' || *q == '\\')
            *q = '\'';
    printf("{\"algorithm\": \"%s\", \"median_s\": %.6f, \"predicted_s\": %.6f, \"serial_predicted_s\": %.6f, "
           "\"segments\": %u, \"checksum\": %.6f}\n",
           alg, t[runs / 2], s.predicted_s, s.compute_s + s.transfer_s, s.n_segments, check);
    sy_executor_destroy(ex);
    sy_plan_release(plan);
    sy_planner_destroy(pl);
    sy_graph_destroy(g);
    sy_runtime_destroy(rt);
    for (int k = 0; k < layers * 2; k++)
        free(wd[k]);
    free(wd);
    free(xd);
    free(od);
    free(t);
    return 0;
}
