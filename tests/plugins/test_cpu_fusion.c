/* The CPU plugin's rope and KV writes inside the q/k/v matmul group
 * (cpu_kernels_fused.c): a decode step's attention inputs, built as the
 * model builds them (three matmuls of one input, reshapes into heads,
 * rope of q and k, KV writes of k and v), give within tolerance what the
 * reference gives, and bit for bit what the plugin gives with the fusion
 * off (SWITCHYARD_CPU_FUSE=0), under every ISA table and thread count
 * of cpu_case.c; the plugin says it fused them exactly where it may.  The
 * FFN's gate and up matmuls and their SWIGLU or GEGLU give the reference's
 * results within tolerance, the GLU run as a node either way. */
#include <criterion/criterion.h>
#include <stdlib.h>
#include <string.h>

#include "cpu_case.h"

#define QKV_FUSED "run in its tiles"
/* What the plugin said when it ran a GLU in the gate/up group's tiles
 * (no longer: two weight streams per lane slowed the 1.1B decode). */
#define GLU_FUSED "runs in their matmul group's tiles"

typedef struct qkv_shape {
    int64_t k, d, heads, kv_heads, tokens, ctx;
    sy_dtype wtype, cache;
    int64_t mode, n_rot;
    bool run_time_start; /* the KV writes' start from an input (types.h) */
} qkv_shape;

static sy_tensor *reshape(tcase *tc, const char *name, sy_tensor *x, int64_t d, int64_t h,
                          int64_t t)
{
    const sy_op_params p = {.i = {d, h, t, 1}};
    return tc_node(tc, SY_OP_RESHAPE, name, &x, 1, &p);
}

/* Runs the case on the cpu device under |cfg| with the fusion |fuse| ("0"
 * or "1") and copies every output, then every in-place leaf, into |dst|.
 * False when the ISA table is not available here. */
static bool run_with_fusion(tcase *tc, const run_cfg *cfg, const char *fuse, const char *msg,
                            bool want_fused, void **dst)
{
    setenv("SWITCHYARD_CPU_FUSE", fuse, 1);
    uint32_t dev = 0;
    sy_runtime *rt = tc_runtime(tc, cfg, &dev);
    unsetenv("SWITCHYARD_CPU_FUSE");
    if (strstr(tc->log, "' is not available here")) {
        sy_runtime_destroy(rt);
        return false;
    }
    /* Twice: the second run finds the plugin's head counters as the
     * first left them. */
    for (int run = 0; run < 2; run++) {
        for (uint32_t i = 0; i < tc->n_outs; i++) {
            memset(tc->got[i], 0xA5, sy_tensor_nbytes(tc->outs[i]));
            cr_assert_eq(sy_graph_set_host_data(tc->g, tc->outs[i], tc->got[i]), SY_OK);
        }
        for (uint32_t i = 0; i < tc->n_state; i++)
            memcpy(sy_graph_host_data(tc->g, tc->state[i]), tc->state_init[i],
                   sy_tensor_nbytes(tc->state[i]));
        cr_assert_eq(sy_runtime_execute_on(rt, tc->g, dev), SY_OK, "%s [%s isa, %s threads]: %s",
                     tc->what, cfg->isa, cfg->threads, sy_runtime_last_error(rt));
    }
    const bool fused = strstr(tc->log, msg) != NULL;
    cr_assert_eq(fused, want_fused, "%s [%s isa, %s threads, fusion %s]: fused %d, want %d:\n%s",
                 tc->what, cfg->isa, cfg->threads, fuse, fused, want_fused, tc->log);
    cr_assert(!strstr(tc->log, "runs the reference kernel"), "%s: a node fell back:\n%s",
              tc->what, tc->log);
    uint32_t k = 0;
    for (uint32_t i = 0; i < tc->n_outs; i++, k++)
        memcpy(dst[k], tc->got[i], sy_tensor_nbytes(tc->outs[i]));
    for (uint32_t i = 0; i < tc->n_state; i++, k++)
        memcpy(dst[k], sy_graph_host_data(tc->g, tc->state[i]), sy_tensor_nbytes(tc->state[i]));
    sy_runtime_destroy(rt);
    return true;
}

/* Runs the case with the fusion off and on under every configuration and
 * expects every output and in-place leaf the same bit for bit, and the
 * plugin's message |msg| exactly when |want_fused|. */
static void expect_fusion_exact(tcase *tc, const char *msg, bool want_fused)
{
    enum { MAX = TC_MAX_OUTS * 2 };
    const uint32_t n = tc->n_outs + tc->n_state;
    void *off[MAX], *on[MAX];
    size_t sizes[MAX];
    const char *names[MAX];
    for (uint32_t i = 0; i < n; i++) {
        const sy_tensor *o = i < tc->n_outs ? tc->outs[i] : tc->state[i - tc->n_outs];
        sizes[i] = sy_tensor_nbytes(o);
        names[i] = o->name;
        off[i] = tc_alloc(tc, sizes[i]);
        on[i] = tc_alloc(tc, sizes[i]);
    }
    for (size_t c = 0; c < N_RUN_CFGS; c++) {
        if (!run_with_fusion(tc, &run_cfgs[c], "0", msg, false, off))
            continue;
        run_with_fusion(tc, &run_cfgs[c], "1", msg, want_fused, on);
        for (uint32_t i = 0; i < n; i++)
            cr_assert(memcmp(off[i], on[i], sizes[i]) == 0,
                      "%s [%s isa, %s threads, seed %llu]: %s differs with the fusion on",
                      tc->what, run_cfgs[c].isa, run_cfgs[c].threads,
                      (unsigned long long)tc->rng.seed, names[i]);
    }
}

static void check_qkv(const qkv_shape *sh)
{
    tcase tc;
    tc_begin(&tc, "q/k/v group w=%s K=%lld D=%lld heads %lld/%lld T=%lld cache=%s rope %lld/%lld",
             sy_dtype_name(sh->wtype), (long long)sh->k, (long long)sh->d, (long long)sh->heads,
             (long long)sh->kv_heads, (long long)sh->tokens, sy_dtype_name(sh->cache),
             (long long)sh->mode, (long long)sh->n_rot);
    const int64_t t = sh->tokens, d = sh->d;
    sy_tensor *x = tc_input(&tc, "x", SY_DTYPE_F32, sh->k, t, 1, 1);
    const int64_t rows[3] = {d * sh->heads, d * sh->kv_heads, d * sh->kv_heads};
    const char *names[3] = {"attn_q", "attn_k", "attn_v"};
    sy_tensor *y[3];
    for (int i = 0; i < 3; i++) {
        const int64_t wne[4] = {sh->k, rows[i], 1, 1};
        sy_tensor *in[2] = {tc_leaf(&tc, "w", sh->wtype, wne, SY_ROLE_WEIGHT, NULL), x};
        y[i] = tc_node(&tc, SY_OP_MATMUL, names[i], in, 2, NULL);
    }
    sy_tensor *q = reshape(&tc, "q.heads", y[0], d, sh->heads, t);
    sy_tensor *k = reshape(&tc, "k.heads", y[1], d, sh->kv_heads, t);
    sy_tensor *v = reshape(&tc, "v.heads", y[2], d, sh->kv_heads, t);
    int32_t *pos = tc_alloc(&tc, (size_t)t * sizeof(int32_t));
    for (int64_t i = 0; i < t; i++)
        pos[i] = (int32_t)trng_below(&tc.rng, 4096);
    const int64_t pne[4] = {t, 1, 1, 1};
    sy_tensor *pt = tc_leaf(&tc, "pos", SY_DTYPE_I32, pne, SY_ROLE_INPUT, pos);
    const sy_op_params rp = {.i = {sh->mode, sh->n_rot}, .f = {10000.0f, 1.0f}};
    sy_tensor *in[2] = {q, pt};
    sy_tensor *rq = tc_node(&tc, SY_OP_ROPE, "q.rope", in, 2, &rp);
    in[0] = k;
    sy_tensor *rk = tc_node(&tc, SY_OP_ROPE, "k.rope", in, 2, &rp);
    const int64_t cne[4] = {d, sh->kv_heads, sh->ctx, 1};
    sy_tensor *kc = tc_leaf(&tc, "cache_k", sh->cache, cne, SY_ROLE_KV, NULL);
    sy_tensor *vc = tc_leaf(&tc, "cache_v", sh->cache, cne, SY_ROLE_KV, NULL);
    sy_op_params at = {.i = {(int64_t)trng_below(&tc.rng, (uint32_t)(sh->ctx - t + 1))}};
    sy_tensor *kin[3] = {kc, rk, NULL}, *vin[3] = {vc, v, NULL};
    uint32_t n_kv_in = 2;
    if (sh->run_time_start) {
        int32_t *start = tc_alloc(&tc, sizeof *start);
        *start = (int32_t)at.i[0];
        at.i[0] = 0;
        const int64_t one[4] = {1, 1, 1, 1};
        kin[2] = vin[2] = tc_leaf(&tc, "kv_start", SY_DTYPE_I32, one, SY_ROLE_INPUT, start);
        n_kv_in = 3;
    }
    sy_tensor *kw = tc_node(&tc, SY_OP_KV_WRITE, "cache_k.write", kin, n_kv_in, &at);
    sy_tensor *vw = tc_node(&tc, SY_OP_KV_WRITE, "cache_v.write", vin, n_kv_in, &at);
    tc_output(&tc, rq);
    tc_output(&tc, kw);
    tc_output(&tc, vw);
    tc_state(&tc, kc);
    tc_state(&tc, vc);
    if (sh->cache == SY_DTYPE_F32) {
        /* Against the reference: the quantized activations move each
         * output by ~2e-4 of the largest here; a wrong head, pair or
         * position moves it by the whole magnitude. */
        tc_run(&tc, (tol){2e-3, 2e-3});
    } else {
        cr_assert_eq(sy_graph_freeze(tc.g), SY_OK, "%s", sy_graph_last_error(tc.g));
    }

    /* Fused against the nodes alone, bit for bit. */
    expect_fusion_exact(&tc, QKV_FUSED, t == 1);
    tc_end(&tc);
}

/* Heads of 64 rows, 16-row tiles: four tiles complete each head, on any
 * lane; an f16 cache, as models use. */
Test(cpu_fusion, ropes_and_writes_heads_in_the_qkv_tiles_with_an_f16_cache)
{
    const qkv_shape sh = {.k = 512, .d = 64, .heads = 8, .kv_heads = 4, .tokens = 1, .ctx = 16,
                          .wtype = SY_DTYPE_Q4_0, .cache = SY_DTYPE_F16, .mode = SY_ROPE_NEOX,
                          .n_rot = 64};
    check_qkv(&sh);
}

/* Heads of 40 rows: tiles straddle heads; part of each head rotated. */
Test(cpu_fusion, ropes_and_writes_heads_that_tiles_straddle)
{
    const qkv_shape sh = {.k = 1024, .d = 40, .heads = 6, .kv_heads = 2, .tokens = 1, .ctx = 9,
                          .wtype = SY_DTYPE_Q4_1, .cache = SY_DTYPE_F32, .mode = SY_ROPE_NORMAL,
                          .n_rot = 32};
    check_qkv(&sh);
}

/* KV writes whose start is read when they run (types.h), as a session's
 * decode graph has them: the tiles write the row the input names. */
Test(cpu_fusion, writes_heads_at_a_run_time_start)
{
    const qkv_shape sh = {.k = 1024, .d = 40, .heads = 6, .kv_heads = 2, .tokens = 1, .ctx = 9,
                          .wtype = SY_DTYPE_Q4_1, .cache = SY_DTYPE_F32, .mode = SY_ROPE_NORMAL,
                          .n_rot = 32, .run_time_start = true};
    for (int i = 0; i < 3; i++)
        check_qkv(&sh);
}

/* A prompt (several tokens) runs the nodes alone. */
Test(cpu_fusion, leaves_a_prompts_nodes_alone)
{
    const qkv_shape sh = {.k = 256, .d = 32, .heads = 4, .kv_heads = 2, .tokens = 5, .ctx = 12,
                          .wtype = SY_DTYPE_Q8_0, .cache = SY_DTYPE_F32, .mode = SY_ROPE_NEOX,
                          .n_rot = 32};
    check_qkv(&sh);
}

/* ------------------------------------------------------------------ glu */

static void check_glu(sy_op op, sy_dtype wtype, int64_t k, int64_t f, int64_t tokens)
{
    tcase tc;
    tc_begin(&tc, "gate/up group w=%s K=%lld F=%lld T=%lld then %s", sy_dtype_name(wtype),
             (long long)k, (long long)f, (long long)tokens, op == SY_OP_SWIGLU ? "swiglu" : "geglu");
    sy_tensor *x = tc_input(&tc, "x", SY_DTYPE_F32, k, tokens, 1, 1);
    const int64_t wne[4] = {k, f, 1, 1};
    sy_tensor *in[2] = {tc_leaf(&tc, "w_gate", wtype, wne, SY_ROLE_WEIGHT, NULL), x};
    sy_tensor *gate = tc_node(&tc, SY_OP_MATMUL, "ffn_gate", in, 2, NULL);
    in[0] = tc_leaf(&tc, "w_up", wtype, wne, SY_ROLE_WEIGHT, NULL);
    sy_tensor *up = tc_node(&tc, SY_OP_MATMUL, "ffn_up", in, 2, NULL);
    sy_tensor *gu[2] = {gate, up};
    sy_tensor *y = tc_node(&tc, op, "ffn_glu", gu, 2, NULL);
    tc_output(&tc, y);
    tc_run(&tc, (tol){2e-3, 2e-3});

    expect_fusion_exact(&tc, GLU_FUSED, false);
    tc_end(&tc);
}

/* Rows that are not a multiple of the tiles: the last tile is short. */
Test(cpu_fusion, runs_swiglu_after_the_gate_up_group_as_a_node)
{
    check_glu(SY_OP_SWIGLU, SY_DTYPE_Q4_0, 256, 1000, 1);
    check_glu(SY_OP_SWIGLU, SY_DTYPE_Q8_0, 512, 1536, 1);
    check_glu(SY_OP_SWIGLU, SY_DTYPE_Q4_0, 256, 200, 4);
}

Test(cpu_fusion, runs_geglu_after_the_gate_up_group_as_a_node)
{
    check_glu(SY_OP_GEGLU, SY_DTYPE_Q4_1, 256, 776, 1);
}
