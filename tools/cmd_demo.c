/* switchyard demo: the main job until a model runs.  Builds one small
 * decoder block (norm, attention with rope and GQA, SwiGLU MLP) with
 * quantized weights, runs it on every device that supports it, and checks
 * each result against the reference kernels. */
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "cli.h"

enum { D_MODEL = 128, N_HEAD = 4, N_KV_HEAD = 2, HEAD_DIM = 32, D_FF = 256, N_TOK = 8 };

typedef struct demo_graph {
    sy_graph *g;
    sy_tensor *out;
    float *out_host;
    void *blobs[16];
    int n_blobs;
} demo_graph;

static uint64_t rng_next(uint64_t *s)
{
    *s ^= *s << 13;
    *s ^= *s >> 7;
    *s ^= *s << 17;
    return *s;
}

static float rng_uniform(uint64_t *s)
{
    return (float)((rng_next(s) >> 11) * (1.0 / 9007199254740992.0)) * 2.0f - 1.0f;
}

/* Adds a leaf filled with random values in [-scale, scale], stored as |dt|
 * (quantized through a COPY-free path: the reference quantizer is reached
 * by running a one-node graph). */
static sy_status add_leaf(demo_graph *d, const char *name, sy_dtype dt, int64_t ne0, int64_t ne1,
                          float scale, uint64_t *seed, sy_tensor **out)
{
    int64_t ne[2] = {ne0, ne1};
    size_t n = (size_t)(ne0 * ne1);
    float *f = malloc(n * sizeof *f);
    if (!f)
        return SY_E_NO_MEMORY;
    for (size_t i = 0; i < n; i++)
        f[i] = rng_uniform(seed) * scale;
    void *blob = f;
    if (dt != SY_DTYPE_F32) {
        /* Quantize with a tiny graph: F32 input -> COPY to |dt|. */
        sy_graph *q = NULL;
        sy_tensor *src, *dst;
        sy_op_params p = {.i = {dt}};
        size_t bytes = (size_t)(ne1 * (ne0 / sy_dtype_block_size(dt)) * sy_dtype_type_size(dt));
        blob = malloc(bytes);
        sy_status st = blob ? sy_graph_create(&q) : SY_E_NO_MEMORY;
        if (st == SY_OK)
            st = sy_graph_add_tensor(q, "src", SY_DTYPE_F32, 2, ne, SY_ROLE_INPUT, f, &src);
        if (st == SY_OK)
            st = sy_graph_add_node(q, SY_OP_COPY, "quantize", &src, 1, &p, &dst);
        if (st == SY_OK)
            st = sy_graph_mark_output(q, dst);
        if (st == SY_OK)
            st = sy_graph_set_host_data(q, dst, blob);
        if (st == SY_OK)
            st = sy_graph_freeze(q);
        if (st == SY_OK)
            st = sy_graph_run_reference(q);
        sy_graph_destroy(q);
        free(f);
        if (st != SY_OK) {
            free(blob);
            return st;
        }
    }
    d->blobs[d->n_blobs++] = blob;
    return sy_graph_add_tensor(d->g, name, dt, 2, ne,
                               dt == SY_DTYPE_I32 ? SY_ROLE_INPUT : SY_ROLE_WEIGHT, blob, out);
}

static sy_status node(demo_graph *d, sy_op op, const char *name, sy_tensor *a, sy_tensor *b,
                      sy_tensor *c, const sy_op_params *p, sy_tensor **out)
{
    sy_tensor *in[3] = {a, b, c};
    uint32_t n = c ? 3 : b ? 2 : 1;
    return sy_graph_add_node(d->g, op, name, in, n, p, out);
}

static sy_status reshape3(demo_graph *d, const char *name, sy_tensor *t, int64_t a, int64_t b,
                          int64_t c, sy_tensor **out)
{
    sy_op_params p = {.i = {a, b, c, 1}};
    return node(d, SY_OP_RESHAPE, name, t, NULL, NULL, &p, out);
}

static sy_status build(demo_graph *d, uint64_t seed)
{
    sy_status st = sy_graph_create(&d->g);
    if (st != SY_OK)
        return st;
    sy_tensor *x, *pos, *wn, *wq, *wk, *wv, *wo, *wn2, *wg, *wu, *wd;
    st = add_leaf(d, "x", SY_DTYPE_F32, D_MODEL, N_TOK, 1.0f, &seed, &x);
    if (st == SY_OK) {
        static int32_t positions[N_TOK];
        for (int i = 0; i < N_TOK; i++)
            positions[i] = i;
        int64_t ne = N_TOK;
        st = sy_graph_add_tensor(d->g, "pos", SY_DTYPE_I32, 1, &ne, SY_ROLE_INPUT, positions, &pos);
    }
    if (st == SY_OK) st = add_leaf(d, "attn_norm", SY_DTYPE_F32, D_MODEL, 1, 1.0f, &seed, &wn);
    if (st == SY_OK) st = add_leaf(d, "wq", SY_DTYPE_Q8_0, D_MODEL, N_HEAD * HEAD_DIM, 0.1f, &seed, &wq);
    if (st == SY_OK) st = add_leaf(d, "wk", SY_DTYPE_Q4_0, D_MODEL, N_KV_HEAD * HEAD_DIM, 0.1f, &seed, &wk);
    if (st == SY_OK) st = add_leaf(d, "wv", SY_DTYPE_Q4_1, D_MODEL, N_KV_HEAD * HEAD_DIM, 0.1f, &seed, &wv);
    if (st == SY_OK) st = add_leaf(d, "wo", SY_DTYPE_F16, N_HEAD * HEAD_DIM, D_MODEL, 0.1f, &seed, &wo);
    if (st == SY_OK) st = add_leaf(d, "ffn_norm", SY_DTYPE_F32, D_MODEL, 1, 1.0f, &seed, &wn2);
    if (st == SY_OK) st = add_leaf(d, "w_gate", SY_DTYPE_Q8_0, D_MODEL, D_FF, 0.1f, &seed, &wg);
    if (st == SY_OK) st = add_leaf(d, "w_up", SY_DTYPE_Q4_0, D_MODEL, D_FF, 0.1f, &seed, &wu);
    if (st == SY_OK) st = add_leaf(d, "w_down", SY_DTYPE_BF16, D_FF, D_MODEL, 0.1f, &seed, &wd);
    if (st != SY_OK)
        return st;

    sy_tensor *h, *q, *k, *v, *a, *t;
    sy_op_params eps = {.f = {1e-5f}};
    sy_op_params rope = {.i = {SY_ROPE_NEOX, HEAD_DIM}, .f = {10000.0f, 1.0f}};
    sy_op_params attn = {.i = {0, 0}, .f = {1.0f / sqrtf((float)HEAD_DIM)}};
    st = node(d, SY_OP_RMS_NORM, "attn_norm", x, NULL, NULL, &eps, &h);
    if (st == SY_OK) st = node(d, SY_OP_MUL, "attn_norm_w", h, wn, NULL, NULL, &h);
    if (st == SY_OK) st = node(d, SY_OP_MATMUL, "q", wq, h, NULL, NULL, &q);
    if (st == SY_OK) st = node(d, SY_OP_MATMUL, "k", wk, h, NULL, NULL, &k);
    if (st == SY_OK) st = node(d, SY_OP_MATMUL, "v", wv, h, NULL, NULL, &v);
    if (st == SY_OK) st = reshape3(d, "q_heads", q, HEAD_DIM, N_HEAD, N_TOK, &q);
    if (st == SY_OK) st = reshape3(d, "k_heads", k, HEAD_DIM, N_KV_HEAD, N_TOK, &k);
    if (st == SY_OK) st = reshape3(d, "v_heads", v, HEAD_DIM, N_KV_HEAD, N_TOK, &v);
    if (st == SY_OK) st = node(d, SY_OP_ROPE, "q_rope", q, pos, NULL, &rope, &q);
    if (st == SY_OK) st = node(d, SY_OP_ROPE, "k_rope", k, pos, NULL, &rope, &k);
    if (st == SY_OK) st = node(d, SY_OP_ATTENTION, "attn", q, k, v, &attn, &a);
    if (st == SY_OK) st = reshape3(d, "attn_flat", a, N_HEAD * HEAD_DIM, N_TOK, 1, &a);
    if (st == SY_OK) st = node(d, SY_OP_MATMUL, "attn_out", wo, a, NULL, NULL, &a);
    if (st == SY_OK) st = node(d, SY_OP_ADD, "resid1", x, a, NULL, NULL, &x);
    if (st == SY_OK) st = node(d, SY_OP_RMS_NORM, "ffn_norm", x, NULL, NULL, &eps, &h);
    if (st == SY_OK) st = node(d, SY_OP_MUL, "ffn_norm_w", h, wn2, NULL, NULL, &h);
    if (st == SY_OK) st = node(d, SY_OP_MATMUL, "gate", wg, h, NULL, NULL, &t);
    if (st == SY_OK) st = node(d, SY_OP_MATMUL, "up", wu, h, NULL, NULL, &h);
    if (st == SY_OK) st = node(d, SY_OP_SWIGLU, "swiglu", t, h, NULL, NULL, &t);
    if (st == SY_OK) st = node(d, SY_OP_MATMUL, "down", wd, t, NULL, NULL, &t);
    if (st == SY_OK) st = node(d, SY_OP_ADD, "resid2", x, t, NULL, NULL, &d->out);
    if (st == SY_OK) st = sy_graph_mark_output(d->g, d->out);
    if (st == SY_OK) {
        d->out_host = calloc((size_t)sy_tensor_nelements(d->out), sizeof(float));
        st = d->out_host ? sy_graph_set_host_data(d->g, d->out, d->out_host) : SY_E_NO_MEMORY;
    }
    if (st == SY_OK)
        st = sy_graph_freeze(d->g);
    return st;
}

static void demo_free(demo_graph *d)
{
    sy_graph_destroy(d->g);
    for (int i = 0; i < d->n_blobs; i++)
        free(d->blobs[i]);
    free(d->out_host);
}

int sy_cli_demo(int argc, char **argv)
{
    if (argc > 1 && strcmp(argv[1], "--help") == 0) {
        printf("usage: switchyard demo\nRuns a small built-in decoder block on every device and "
               "checks it against the reference kernels.\n");
        return 0;
    }
    sy_runtime *rt = sy_cli_runtime();
    if (!rt)
        return 1;
    int rc = 0;
    demo_graph d = {0};
    sy_status st = build(&d, 0x5eed5eedULL);
    if (st != SY_OK) {
        fprintf(stderr, "switchyard demo: building the graph failed: %s: %s\n",
                sy_status_str(st), d.g ? sy_graph_last_error(d.g) : "");
        rc = 1;
        goto out_free;
    }
    size_t n = (size_t)sy_tensor_nelements(d.out);
    float *want = malloc(n * sizeof *want);
    if (!want) {
        rc = 1;
        goto out_free;
    }
    st = sy_graph_run_reference(d.g);
    memcpy(want, d.out_host, n * sizeof *want);
    if (st != SY_OK) {
        fprintf(stderr, "switchyard demo: reference run failed: %s\n", sy_status_str(st));
        rc = 1;
        goto out_want;
    }
    printf("graph: one decoder block, %u nodes, %d tokens, weights q8_0/q4_0/q4_1/f16/bf16\n",
           sy_graph_node_count(d.g), N_TOK);
    uint32_t nd = sy_runtime_device_count(rt);
    if (nd == 0) {
        fprintf(stderr, "switchyard demo: no device found (see 'switchyard devices')\n");
        rc = 1;
    }
    for (uint32_t dev = 0; dev < nd; dev++) {
        sy_device_desc desc;
        sy_runtime_query_device(rt, dev, &desc);
        memset(d.out_host, 0, n * sizeof *want);
        st = sy_runtime_execute_on(rt, d.g, dev);
        if (st != SY_OK) {
            printf("  %-10s skipped: %s\n", desc.name, sy_runtime_last_error(rt));
            /* Accelerators may lack ops; the CPU device must run everything. */
            if (desc.kind == SY_DEVICE_CPU)
                rc = 1;
            continue;
        }
        double max_err = 0, max_ref = 0;
        for (size_t i = 0; i < n; i++) {
            double e = fabs((double)d.out_host[i] - want[i]);
            max_err = e > max_err ? e : max_err;
            max_ref = fabs(want[i]) > max_ref ? fabs(want[i]) : max_ref;
        }
        bool ok = max_err <= 1e-3 * (max_ref > 1 ? max_ref : 1);
        printf("  %-10s %s: max |error| %.3g vs reference (max |value| %.3g)\n", desc.name,
               ok ? "ok" : "MISMATCH", max_err, max_ref);
        if (!ok)
            rc = 1;
    }
out_want:
    free(want);
out_free:
    demo_free(&d);
    sy_runtime_destroy(rt);
    return rc;
}
