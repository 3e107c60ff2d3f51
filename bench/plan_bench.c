/* plan-bench: how long the scheduler takes to plan a model's step graph
 * and to find it again in the plan cache.  Graphs are built here with the
 * llama builder's structure and names (framework/llm/arch.c) and no data,
 * so no model file is needed: a 30-layer SmolLM2-135M decode step and a
 * 32-layer 7B-shaped one, on every device the runtime loads (by default
 * the cpu plugin and the test suite's testdev and opaquedev: 3 devices).
 *
 *   plan-bench [--plugins PATHS] [--profile FILE]... [--runs N] [--hits N]
 *
 * Prints medians: building and freezing a graph, planning it afresh, and
 * finding its plan in the cache.  Without --profile it also loads the test fixtures that
 * make matmuls cheap on testdev, so that plans mix devices (and the 7B
 * graph meets testdev's 1 GiB budget, which costs extra placement rounds). */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

#include "switchyard/switchyard.h"

typedef struct shape {
    const char *name;
    uint32_t n_layer, n_embd, n_head, n_head_kv, n_ff, n_vocab, n_ctx, n_tokens, n_past;
    sy_dtype wtype;
} shape;

static const shape shapes[] = {
    {"smollm2-135m decode", 30, 576, 9, 3, 1536, 49152, 8192, 1, 100, SY_DTYPE_Q4_1},
    {"7b decode", 32, 4096, 32, 32, 11008, 32000, 4096, 1, 100, SY_DTYPE_Q4_0},
    {"smollm2-135m prefill 64", 30, 576, 9, 3, 1536, 49152, 8192, 64, 0, SY_DTYPE_Q4_1},
};

static double now_s(void)
{
    struct timespec ts;
    clock_gettime(CLOCK_MONOTONIC, &ts);
    return (double)ts.tv_sec + (double)ts.tv_nsec * 1e-9;
}

static int cmp_double(const void *a, const void *b)
{
    double x = *(const double *)a, y = *(const double *)b;
    return x < y ? -1 : x > y;
}

static double median(double *v, int n)
{
    qsort(v, (size_t)n, sizeof *v, cmp_double);
    return n % 2 ? v[n / 2] : 0.5 * (v[n / 2 - 1] + v[n / 2]);
}

/* A graph under construction; the first error sticks. */
typedef struct gb {
    sy_graph *g;
    sy_status st;
} gb;

static sy_tensor *leaf(gb *b, const char *name, sy_dtype dt, uint32_t nd, int64_t a, int64_t c,
                       int64_t d, sy_tensor_role role)
{
    int64_t ne[3] = {a, c, d};
    sy_tensor *t = NULL;
    if (b->st == SY_OK)
        b->st = sy_graph_add_tensor(b->g, name, dt, nd, ne, role, NULL, &t);
    return t;
}

static sy_tensor *op(gb *b, sy_op o, const char *name, sy_tensor *x, sy_tensor *y, sy_tensor *z,
                     const sy_op_params *p)
{
    sy_tensor *in[3] = {x, y, z}, *out = NULL;
    if (b->st == SY_OK)
        b->st = sy_graph_add_node(b->g, o, name, in, z ? 3 : y ? 2 : 1, p, &out);
    return out;
}

static const char *nm(char *buf, uint32_t il, const char *what)
{
    snprintf(buf, SY_NAME_MAX, "blk.%u.%s", il, what);
    return buf;
}

static sy_tensor *wt(gb *b, uint32_t il, const char *what, sy_dtype dt, int64_t k, int64_t n)
{
    char name[SY_NAME_MAX];
    snprintf(name, sizeof name, "blk.%u.%s.weight", il, what);
    return leaf(b, name, dt, n > 1 ? 2 : 1, k, n, 1, SY_ROLE_WEIGHT);
}

static sy_status build(const shape *s, sy_graph **out)
{
    gb b = {0};
    b.st = sy_graph_create(&b.g);
    int64_t E = s->n_embd, Dh = E / s->n_head, Hk = s->n_head_kv, T = s->n_tokens, F = s->n_ff;
    char n[SY_NAME_MAX];
    sy_tensor *tok = leaf(&b, "tokens", SY_DTYPE_I32, 1, T, 1, 1, SY_ROLE_INPUT);
    sy_tensor *pos = leaf(&b, "positions", SY_DTYPE_I32, 1, T, 1, 1, SY_ROLE_INPUT);
    sy_tensor *emb = leaf(&b, "token_embd.weight", s->wtype, 2, E, s->n_vocab, 1, SY_ROLE_WEIGHT);
    sy_tensor *x = op(&b, SY_OP_GET_ROWS, "token_embd", emb, tok, NULL, NULL);
    sy_op_params eps = {.f = {1e-5f}};
    for (uint32_t il = 0; il < s->n_layer; il++) {
        char kn[32], vn[32];
        snprintf(kn, sizeof kn, "cache_k.%u", il);
        snprintf(vn, sizeof vn, "cache_v.%u", il);
        sy_tensor *kc = leaf(&b, kn, SY_DTYPE_F16, 3, Dh, Hk, s->n_ctx, SY_ROLE_KV);
        sy_tensor *vc = leaf(&b, vn, SY_DTYPE_F16, 3, Dh, Hk, s->n_ctx, SY_ROLE_KV);
        sy_tensor *h = op(&b, SY_OP_RMS_NORM, nm(n, il, "attn_norm.rms"), x, NULL, NULL, &eps);
        h = op(&b, SY_OP_MUL, nm(n, il, "attn_norm"), h,
               wt(&b, il, "attn_norm", SY_DTYPE_F32, E, 1), NULL, NULL);
        sy_tensor *q = op(&b, SY_OP_MATMUL, nm(n, il, "attn_q"),
                          wt(&b, il, "attn_q", s->wtype, E, E), h, NULL, NULL);
        sy_tensor *k = op(&b, SY_OP_MATMUL, nm(n, il, "attn_k"),
                          wt(&b, il, "attn_k", s->wtype, E, Dh * Hk), h, NULL, NULL);
        sy_tensor *v = op(&b, SY_OP_MATMUL, nm(n, il, "attn_v"),
                          wt(&b, il, "attn_v", s->wtype, E, Dh * Hk), h, NULL, NULL);
        sy_op_params qh = {.i = {Dh, s->n_head, T, 1}}, kh = {.i = {Dh, Hk, T, 1}};
        q = op(&b, SY_OP_RESHAPE, nm(n, il, "attn_q.heads"), q, NULL, NULL, &qh);
        k = op(&b, SY_OP_RESHAPE, nm(n, il, "attn_k.heads"), k, NULL, NULL, &kh);
        v = op(&b, SY_OP_RESHAPE, nm(n, il, "attn_v.heads"), v, NULL, NULL, &kh);
        sy_op_params rope = {.i = {SY_ROPE_NEOX, Dh}, .f = {10000.0f, 1.0f}};
        q = op(&b, SY_OP_ROPE, nm(n, il, "attn_q.rope"), q, pos, NULL, &rope);
        k = op(&b, SY_OP_ROPE, nm(n, il, "attn_k.rope"), k, pos, NULL, &rope);
        sy_op_params at = {.i = {s->n_past}};
        k = op(&b, SY_OP_KV_WRITE, nm(n, il, "cache_k.write"), kc, k, NULL, &at);
        v = op(&b, SY_OP_KV_WRITE, nm(n, il, "cache_v.write"), vc, v, NULL, &at);
        sy_op_params ap = {.i = {s->n_past, 0}, .f = {0.125f}};
        sy_tensor *a = op(&b, SY_OP_ATTENTION, nm(n, il, "attn"), q, k, v, &ap);
        sy_op_params flat = {.i = {E, T, 1, 1}};
        a = op(&b, SY_OP_RESHAPE, nm(n, il, "attn.flat"), a, NULL, NULL, &flat);
        a = op(&b, SY_OP_MATMUL, nm(n, il, "attn_output"),
               wt(&b, il, "attn_output", s->wtype, E, E), a, NULL, NULL);
        x = op(&b, SY_OP_ADD, nm(n, il, "attn.residual"), x, a, NULL, NULL);
        h = op(&b, SY_OP_RMS_NORM, nm(n, il, "ffn_norm.rms"), x, NULL, NULL, &eps);
        h = op(&b, SY_OP_MUL, nm(n, il, "ffn_norm"), h, wt(&b, il, "ffn_norm", SY_DTYPE_F32, E, 1),
               NULL, NULL);
        sy_tensor *g = op(&b, SY_OP_MATMUL, nm(n, il, "ffn_gate"),
                          wt(&b, il, "ffn_gate", s->wtype, E, F), h, NULL, NULL);
        sy_tensor *u = op(&b, SY_OP_MATMUL, nm(n, il, "ffn_up"),
                          wt(&b, il, "ffn_up", s->wtype, E, F), h, NULL, NULL);
        h = op(&b, SY_OP_SWIGLU, nm(n, il, "ffn_glu"), g, u, NULL, NULL);
        h = op(&b, SY_OP_MATMUL, nm(n, il, "ffn_down"), wt(&b, il, "ffn_down", s->wtype, F, E), h,
               NULL, NULL);
        x = op(&b, SY_OP_ADD, nm(n, il, "ffn.residual"), x, h, NULL, NULL);
    }
    if (T > 1) {
        sy_op_params p = {.i = {E, 1, 1, 1, E * 4, E * 4, E * 4, (T - 1) * E * 4}};
        x = op(&b, SY_OP_VIEW, "last_token", x, NULL, NULL, &p);
    }
    sy_tensor *h = op(&b, SY_OP_RMS_NORM, "output_norm.rms", x, NULL, NULL, &eps);
    h = op(&b, SY_OP_MUL, "output_norm", h,
           leaf(&b, "output_norm.weight", SY_DTYPE_F32, 1, E, 1, 1, SY_ROLE_WEIGHT), NULL, NULL);
    sy_tensor *logits = op(&b, SY_OP_MATMUL, "output", emb, h, NULL, NULL);
    if (b.st == SY_OK)
        b.st = sy_graph_mark_output(b.g, logits);
    if (b.st == SY_OK)
        b.st = sy_graph_freeze(b.g);
    if (b.st != SY_OK) {
        fprintf(stderr, "plan-bench: building %s: %s\n", s->name, sy_graph_last_error(b.g));
        sy_graph_destroy(b.g);
        return b.st;
    }
    *out = b.g;
    return SY_OK;
}

static int bench_shape(sy_planner *pl, const shape *s, int runs, int hits)
{
    sy_graph *g = NULL;
    double *t = malloc((size_t)(runs > hits ? runs : hits) * sizeof *t);
    /* Building and freezing, which a session pays every step before its
     * lookup (freeze also hashes the structure the cache key needs). */
    for (int r = 0; r < runs; r++) {
        double t0 = now_s();
        if (build(s, &g) != SY_OK) {
            free(t);
            return 1;
        }
        t[r] = now_s() - t0;
        if (r + 1 < runs)
            sy_graph_destroy(g);
    }
    double build_ms = median(t, runs) * 1e3;
    sy_plan_options fresh;
    sy_plan_options_init(&fresh);
    fresh.no_cache = true;
    sy_plan *plan = NULL;
    sy_plan_summary sum;
    for (int r = 0; r < runs; r++) {
        double t0 = now_s();
        sy_status st = sy_planner_plan(pl, g, &fresh, &plan);
        t[r] = now_s() - t0;
        if (st != SY_OK) {
            fprintf(stderr, "plan-bench: %s: %s\n", s->name, sy_planner_last_error(pl));
            free(t);
            sy_graph_destroy(g);
            return 1;
        }
        sy_plan_query_summary(plan, &sum);
        if (r + 1 < runs)
            sy_plan_release(plan);
    }
    double plan_ms = median(t, runs) * 1e3;
    sy_plan *cached = NULL;
    sy_planner_plan(pl, g, NULL, &cached); /* fills the cache */
    sy_plan_release(cached);
    /* Batches of lookups: one is too short for the clock to see. */
    enum { BATCH = 100 };
    int batches = hits / BATCH > 5 ? hits / BATCH : 5;
    for (int r = 0; r < batches; r++) {
        double t0 = now_s();
        for (int k = 0; k < BATCH; k++) {
            sy_planner_plan(pl, g, NULL, &cached);
            sy_plan_release(cached);
        }
        t[r] = (now_s() - t0) / BATCH;
    }
    double hit_min_us = 1e30;
    for (int r = 0; r < batches; r++)
        hit_min_us = t[r] * 1e6 < hit_min_us ? t[r] * 1e6 : hit_min_us;
    double hit_us = median(t, batches) * 1e6;
    printf("%-26s %6u %8.3f ms %9.3f ms %8.2f us (%5.2f)  %8.3f ms  %3u / %-3u  %s\n", s->name,
           sum.n_nodes, build_ms, plan_ms, hit_us, hit_min_us, sum.predicted_s * 1e3,
           sum.n_segments, sum.n_transfers, sum.algorithm);
    sy_plan_release(plan);
    free(t);
    sy_graph_destroy(g);
    return 0;
}

int main(int argc, char **argv)
{
    const char *plugins = SY_BENCH_PLUGINS;
    const char *profiles[8];
    int n_profiles = 0, runs = 31, hits = 10000;
    for (int i = 1; i < argc; i++) {
        if (strcmp(argv[i], "--plugins") == 0 && i + 1 < argc)
            plugins = argv[++i];
        else if (strcmp(argv[i], "--profile") == 0 && i + 1 < argc && n_profiles < 8)
            profiles[n_profiles++] = argv[++i];
        else if (strcmp(argv[i], "--runs") == 0 && i + 1 < argc)
            runs = atoi(argv[++i]);
        else if (strcmp(argv[i], "--hits") == 0 && i + 1 < argc)
            hits = atoi(argv[++i]);
        else {
            fprintf(stderr, "usage: plan-bench [--plugins PATHS] [--profile FILE]... [--runs N] "
                            "[--hits N]\n");
            return 2;
        }
    }
    if (runs < 1)
        runs = 1;
    sy_runtime_options o;
    sy_runtime_options_init(&o);
    o.plugin_path = plugins;
    o.no_default_paths = true;
    sy_runtime *rt = NULL;
    if (sy_runtime_create(&o, &rt) != SY_OK) {
        fprintf(stderr, "plan-bench: cannot create a runtime\n");
        return 1;
    }
    sy_planner *pl = NULL;
    sy_planner_create(rt, &pl);
    if (n_profiles == 0) {
        profiles[n_profiles++] = SY_BENCH_FIXTURES "/testdev_fast_matmul.json";
        profiles[n_profiles++] = SY_BENCH_FIXTURES "/opaquedev_fast_elementwise.json";
    }
    printf("devices:");
    for (uint32_t d = 0; d < sy_runtime_device_count(rt); d++) {
        sy_device_desc desc;
        sy_runtime_query_device(rt, d, &desc);
        printf(" %s", desc.name);
    }
    printf("\nprofiles:");
    for (int k = 0; k < n_profiles; k++) {
        if (sy_planner_load_profile(pl, profiles[k]) != SY_OK)
            printf(" (%s)", sy_planner_last_error(pl));
        else
            printf(" %s", profiles[k]);
    }
    printf("\nmedians of %d plans and %d cache hits\n\n", runs, hits);
    printf("%-26s %6s %11s %12s %20s %11s  %-9s  %s\n", "graph", "nodes", "build", "plan",
           "cache hit (min)", "predicted", "seg / xfer", "algorithm");
    int rc = 0;
    for (size_t k = 0; k < sizeof shapes / sizeof shapes[0]; k++)
        rc |= bench_shape(pl, &shapes[k], runs, hits);
    sy_planner_destroy(pl);
    sy_runtime_destroy(rt);
    return rc;
}
