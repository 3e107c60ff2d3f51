/* Replayed steps (framework/runtime/executor_replay.c): a graph run again
 * with the same plan, only its params updated, runs from the nodes the
 * executor bound the step before.  Decode steps of the real SmolLM2 on a
 * kept, updated graph give the logits and caches of graphs built afresh
 * and run in full, to the bit, also after a step run in full in between;
 * the graph's tensors point at their host data after every run; new host
 * data, a new plan and turning node timing on each make the next run a
 * full one, and a step after it replays again.  The CPU plugin gets the
 * replays through execute_keyed and runs them from the program it kept at
 * the first (cpu_program.c): the same bits as with that off. */
#include <criterion/criterion.h>
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "kv_cache.h"
#include "model_internal.h"
#include "sched_test_util.h"
#include "session_graph.h"

static uint64_t replayed(const sy_executor *x, uint64_t *out_steps)
{
    sy_step_stats st;
    sy_step_stats_init(&st);
    cr_assert_eq(sy_executor_query_stats(x, &st), SY_OK);
    if (out_steps)
        *out_steps = st.steps;
    return st.replayed;
}

/* Every tensor points at its host data again and holds no device buffer. */
static void assert_restored(const sy_graph *g)
{
    for (uint32_t i = 0; i < sy_graph_tensor_count(g); i++) {
        const sy_tensor *t = sy_graph_tensor(g, i);
        cr_assert_eq(t->data, sy_graph_host_data(g, t), "tensor '%s'", t->name);
        cr_assert_null(t->buffer, "tensor '%s'", t->name);
        cr_assert_eq(t->offset, 0, "tensor '%s'", t->name);
    }
}

/* What the CPU plugin said about its kept programs (cpu_program.c). */
typedef struct program_log {
    int recorded, refused;
} program_log;

static void count_program_lines(void *user, sy_log_level level, const char *msg)
{
    program_log *pl = user;
    (void)level;
    if (strstr(msg, "kept program: ") && strstr(msg, " matmul jobs"))
        pl->recorded++;
    if (strstr(msg, "no longer runs as recorded"))
        pl->refused++;
}

/* The decode steps below, with the CPU plugin keeping the program of
 * each replayed step's nodes (|keep|) or not. */
static void check_decode_steps(bool keep)
{
    const char *path = st_smollm2();
    program_log plog = {0};
    setenv("SWITCHYARD_CPU_PROGRAM", keep ? "1" : "0", 1);
    sy_runtime *rt = st_runtime_logging(SY_TEST_CPU_PLUGIN, count_program_lines, &plog);
    unsetenv("SWITCHYARD_CPU_PROGRAM");
    sy_model *m = NULL;
    cr_assert_eq(sy_model_open(rt, path, &m), SY_OK, "%s", sy_runtime_last_error(rt));
    sy_planner *pl = NULL;
    cr_assert_eq(sy_planner_create(rt, &pl), SY_OK);
    const sy_hparams *hp = &m->hp;
    const uint32_t L = hp->n_layer, n_ctx = 16, steps = 8;
    size_t per = (size_t)hp->head_dim * hp->n_head_kv * n_ctx * sizeof(float);
    /* side 0: a graph built and run in full per step; side 1: the kept one */
    sy_kv_layer *kv[2];
    float *logits[2];
    for (int side = 0; side < 2; side++) {
        kv[side] = calloc(L, sizeof *kv[side]);
        for (uint32_t il = 0; il < L; il++)
            kv[side][il] = (sy_kv_layer){.k = calloc(1, per), .v = calloc(1, per), .rows = n_ctx};
        logits[side] = malloc(hp->n_vocab * sizeof(float));
    }
    int32_t tok[2][1], pos[2][1];
    sy__step_graphs kept = {0};
    sy_executor *x = NULL;
    cr_assert_eq(sy_executor_create(rt, &x), SY_OK);
    sy_plan_options o;
    sy_plan_options_init(&o);
    o.devices = "cpu";
    const int32_t ids[12] = {1, 504, 3327, 28, 4730, 30, 279, 1167, 314, 253, 2418, 30};
    uint64_t full_runs = 0;
    for (uint32_t p = 0; p < steps; p++) {
        char err[256];
        for (int side = 0; side < 2; side++) {
            tok[side][0] = ids[p];
            pos[side][0] = (int32_t)p;
        }
        sy_step_desc sd[2];
        for (int side = 0; side < 2; side++)
            sd[side] = (sy_step_desc){.n_tokens = 1, .n_past = p, .tokens = tok[side],
                                      .positions = pos[side], .logits = logits[side],
                                      .kv_type = SY_DTYPE_F32, .kv_layers = kv[side]};
        sy_graph *g = NULL;
        cr_assert_eq(sy__model_build_graph(m, &sd[0], &g, err, sizeof err), SY_OK, "%s", err);
        cr_assert_eq(sy_runtime_execute_on(rt, g, ST_CPU), SY_OK, "%s", sy_runtime_last_error(rt));
        sy_graph_destroy(g);

        sy__step_graph *e = NULL;
        cr_assert_eq(sy__step_graph_get(&kept, m, &sd[1], &e, err, sizeof err), SY_OK, "%s", err);
        sy_plan *plan = st_plan(pl, e->g, &o);
        uint64_t before = replayed(x, NULL);
        /* One step timed node by node: a full run, after which the shadow
         * must not miss the updates it consumed. */
        cr_assert_eq(sy_executor_set_node_timing(x, p == 3), SY_OK);
        cr_assert_eq(sy_executor_run(x, e->g, plan), SY_OK, "%s", sy_runtime_last_error(rt));
        sy_plan_release(plan);
        full_runs += replayed(x, NULL) == before;
        assert_restored(e->g);

        cr_assert_eq(memcmp(logits[1], logits[0], hp->n_vocab * sizeof(float)), 0,
                     "step %u: the kept graph's logits differ from a graph built afresh", p);
        for (uint32_t il = 0; il < L; il++) {
            cr_assert_eq(memcmp(kv[1][il].k, kv[0][il].k, per), 0, "step %u layer %u K", p, il);
            cr_assert_eq(memcmp(kv[1][il].v, kv[0][il].v, per), 0, "step %u layer %u V", p, il);
        }
    }
    uint64_t n_steps = 0;
    uint64_t n_replayed = replayed(x, &n_steps);
    cr_assert_eq(n_steps, steps);
    /* A step runs in full when its plan is new: the first, and when the
     * context crosses a power of two (the graph's shape class changes);
     * and the timed step and the one after it. */
    cr_assert_eq(n_replayed + full_runs, steps);
    cr_assert_geq(n_replayed, 3, "only %llu of %u steps replayed",
                  (unsigned long long)n_replayed, steps);
    cr_assert_leq(full_runs, 5);
    /* A shadow made by a full run is recorded at its first replay, and
     * run as recorded at the replays after it. */
    if (keep) {
        cr_assert_geq(plog.recorded, 1, "no program was kept");
        cr_assert_lt((uint64_t)plog.recorded, n_replayed,
                     "%d programs recorded for %llu replays: none ran as kept", plog.recorded,
                     (unsigned long long)n_replayed);
    } else {
        cr_assert_eq(plog.recorded, 0);
    }
    cr_assert_eq(plog.refused, 0, "a kept program was refused %d times", plog.refused);

    sy_executor_destroy(x);
    sy__step_graphs_deinit(&kept);
    for (int side = 0; side < 2; side++) {
        for (uint32_t il = 0; il < L; il++) {
            free(kv[side][il].k);
            free(kv[side][il].v);
        }
        free(kv[side]);
        free(logits[side]);
    }
    sy_planner_destroy(pl);
    sy_model_close(m);
    sy_runtime_destroy(rt);
    st_check_leaks();
}

Test(executor_replay, decode_steps_on_a_kept_graph_are_replayed_and_equal_full_runs)
{
    check_decode_steps(true);
}

Test(executor_replay, decode_steps_equal_full_runs_without_the_cpu_plugins_kept_program)
{
    check_decode_steps(false);
}

/* y = x + w over 32 floats, x an input and y an output with host data. */
typedef struct small_graph {
    sy_graph *g;
    sy_tensor *x, *w, *y;
    float xs[32], ws[32], out[2][32];
} small_graph;

static void small_build(small_graph *s)
{
    memset(s, 0, sizeof *s);
    for (int i = 0; i < 32; i++) {
        s->xs[i] = (float)i;
        s->ws[i] = 0.25f * (float)(i % 3);
    }
    int64_t ne[1] = {32};
    cr_assert_eq(sy_graph_create(&s->g), SY_OK);
    cr_assert_eq(sy_graph_add_tensor(s->g, "x", SY_DTYPE_F32, 1, ne, SY_ROLE_INPUT, s->xs, &s->x),
                 SY_OK);
    cr_assert_eq(sy_graph_add_tensor(s->g, "w", SY_DTYPE_F32, 1, ne, SY_ROLE_WEIGHT, s->ws, &s->w),
                 SY_OK);
    sy_tensor *xw[2] = {s->x, s->w};
    cr_assert_eq(sy_graph_add_node(s->g, SY_OP_ADD, "y", xw, 2, NULL, &s->y), SY_OK);
    cr_assert_eq(sy_graph_mark_output(s->g, s->y), SY_OK);
    cr_assert_eq(sy_graph_set_host_data(s->g, s->y, s->out[0]), SY_OK);
    cr_assert_eq(sy_graph_freeze(s->g), SY_OK, "%s", sy_graph_last_error(s->g));
}

static void small_check(const small_graph *s, int out, float shift)
{
    for (int i = 0; i < 32; i++) {
        float want = (float)i + shift + 0.25f * (float)(i % 3);
        cr_assert_float_eq(s->out[out][i], want, 1e-6f, "out[%d][%d] = %g, want %g", out, i,
                           (double)s->out[out][i], (double)want);
    }
}

static void small_run(sy_executor *x, small_graph *s, const sy_plan *plan, bool want_replay)
{
    uint64_t before = replayed(x, NULL);
    cr_assert_eq(sy_executor_run(x, s->g, plan), SY_OK);
    cr_assert_eq(replayed(x, NULL) - before, want_replay ? 1u : 0u, "%s",
                 want_replay ? "the run was not replayed" : "the run was replayed");
    assert_restored(s->g);
}

Test(executor_replay, new_host_data_a_new_plan_or_node_timing_run_in_full)
{
    sy_runtime *rt = st_runtime();
    sy_planner *pl = NULL;
    cr_assert_eq(sy_planner_create(rt, &pl), SY_OK);
    sy_plan_options o;
    sy_plan_options_init(&o);
    o.devices = "cpu";
    small_graph s;
    small_build(&s);
    sy_plan *plan = st_plan(pl, s.g, &o);
    sy_executor *x = NULL;
    cr_assert_eq(sy_executor_create(rt, &x), SY_OK);

    small_run(x, &s, plan, false);
    small_check(&s, 0, 0.0f);
    /* New input values in the same host memory: read in place. */
    for (int i = 0; i < 32; i++)
        s.xs[i] += 1.0f;
    memset(s.out[0], 0, sizeof s.out[0]);
    small_run(x, &s, plan, true);
    small_check(&s, 0, 1.0f);

    /* New host memory for the output: a full run writes there. */
    cr_assert_eq(sy_graph_set_host_data(s.g, s.y, s.out[1]), SY_OK);
    memset(s.out[0], 0, sizeof s.out[0]);
    small_run(x, &s, plan, false);
    small_check(&s, 1, 1.0f);
    for (int i = 0; i < 32; i++)
        cr_assert_eq(s.out[0][i], 0.0f, "the old output memory was written");
    small_run(x, &s, plan, true);
    small_check(&s, 1, 1.0f);

    /* Another plan of the same graph (planned afresh, another object). */
    sy_plan_options fresh = o;
    fresh.no_cache = true;
    sy_plan *other = st_plan(pl, s.g, &fresh);
    cr_assert_neq(other, plan);
    uint64_t before = replayed(x, NULL);
    cr_assert_eq(sy_executor_run(x, s.g, other), SY_OK);
    cr_assert_eq(replayed(x, NULL), before, "a plan made without the cache has no key to "
                                             "replay under");
    small_run(x, &s, plan, false);
    small_run(x, &s, plan, true);

    /* Node timing times each node on its own: runs are full. */
    cr_assert_eq(sy_executor_set_node_timing(x, true), SY_OK);
    small_run(x, &s, plan, false);
    double sec = -1.0;
    cr_assert_eq(sy_executor_query_node_time(x, 0, &sec, NULL), SY_OK);
    cr_assert_geq(sec, 0.0);
    cr_assert_eq(sy_executor_set_node_timing(x, false), SY_OK);
    small_run(x, &s, plan, false);
    small_run(x, &s, plan, true);
    small_check(&s, 1, 1.0f);

    sy_plan_release(other);
    sy_plan_release(plan);
    sy_executor_destroy(x);
    sy_graph_destroy(s.g);
    sy_planner_destroy(pl);
    sy_runtime_destroy(rt);
    st_check_leaks();
}

/* y = x[off .. off + 16) + w: an update that moves the view's offset is
 * replayed, reading the slice at the new offset (the replay moves the
 * shadow view by the change instead of binding it again). */
Test(executor_replay, an_update_moving_a_view_is_replayed_at_its_new_offset)
{
    sy_runtime *rt = st_runtime();
    sy_planner *pl = NULL;
    cr_assert_eq(sy_planner_create(rt, &pl), SY_OK);
    sy_plan_options o;
    sy_plan_options_init(&o);
    o.devices = "cpu";
    float xs[64], ws[16], out[16];
    for (int i = 0; i < 64; i++)
        xs[i] = (float)i;
    for (int i = 0; i < 16; i++)
        ws[i] = 0.5f * (float)(i % 4);
    int64_t nx[1] = {64}, nw[1] = {16};
    sy_graph *g = NULL;
    sy_tensor *x, *w, *slice, *y;
    cr_assert_eq(sy_graph_create(&g), SY_OK);
    cr_assert_eq(sy_graph_add_tensor(g, "x", SY_DTYPE_F32, 1, nx, SY_ROLE_INPUT, xs, &x), SY_OK);
    cr_assert_eq(sy_graph_add_tensor(g, "w", SY_DTYPE_F32, 1, nw, SY_ROLE_WEIGHT, ws, &w), SY_OK);
    sy_op_params vp = {.i = {16, 1, 1, 1, 64, 64, 64, 4 * 8}};
    cr_assert_eq(sy_graph_add_node(g, SY_OP_VIEW, "slice", &x, 1, &vp, &slice), SY_OK);
    sy_tensor *sw[2] = {slice, w};
    cr_assert_eq(sy_graph_add_node(g, SY_OP_ADD, "y", sw, 2, NULL, &y), SY_OK);
    cr_assert_eq(sy_graph_mark_output(g, y), SY_OK);
    cr_assert_eq(sy_graph_set_host_data(g, y, out), SY_OK);
    cr_assert_eq(sy_graph_freeze(g), SY_OK, "%s", sy_graph_last_error(g));
    sy_plan *plan = st_plan(pl, g, &o);
    sy_executor *ex = NULL;
    cr_assert_eq(sy_executor_create(rt, &ex), SY_OK);
    const sy_node *view = sy_graph_producer(g, slice);
    cr_assert_not_null(view);
    const uint32_t offs[4] = {8, 8, 40, 3};
    for (uint32_t k = 0; k < 4; k++) {
        sy__node_update up = {.node = view->id, .params = vp};
        up.params.i[7] = 4 * (int64_t)offs[k];
        cr_assert_eq(sy__graph_update_params(g, &up, 1), SY_OK, "%s", sy_graph_last_error(g));
        uint64_t before = replayed(ex, NULL);
        memset(out, 0, sizeof out);
        cr_assert_eq(sy_executor_run(ex, g, plan), SY_OK, "%s", sy_runtime_last_error(rt));
        if (k > 0)
            cr_assert_eq(replayed(ex, NULL) - before, 1u, "run %u was not replayed", k);
        assert_restored(g);
        for (int i = 0; i < 16; i++) {
            float want = (float)(offs[k] + (uint32_t)i) + 0.5f * (float)(i % 4);
            cr_assert_float_eq(out[i], want, 1e-6f, "run %u: out[%d] = %g, want %g", k, i,
                               (double)out[i], (double)want);
        }
    }
    sy_executor_destroy(ex);
    sy_plan_release(plan);
    sy_graph_destroy(g);
    sy_planner_destroy(pl);
    sy_runtime_destroy(rt);
    st_check_leaks();
}

/* A decode step's attention inputs (K = 128, heads of 32 rows, 4 query
 * and 2 KV heads, Q8_0 weights): three matmuls of one input, ropes of q
 * and k, and KV writes of k and v into f32 caches of 8 positions at
 * |at|.  The ropes' outputs are graph outputs, so no arena slot of one
 * aliases a matmul's output, and the CPU plugin runs the ropes and writes
 * in the matmul group's tiles (cpu_kernels_fused.c). */
#define QKV_K 128
#define QKV_D 32
#define QKV_CTX 8
typedef struct qkv_graph {
    sy_graph *g;
    sy_tensor *pos_t;
    uint32_t write[2]; /* the KV writes' node ids */
    float x[QKV_K];
    uint8_t w[3][4 * QKV_D * (QKV_K / 32) * 34];
    int32_t pos;
    float kc[QKV_CTX * 2 * QKV_D], vc[QKV_CTX * 2 * QKV_D];
    float rq[4 * QKV_D], rk[2 * QKV_D];
} qkv_graph;

static void qkv_build(qkv_graph *q, int64_t at, bool kv)
{
    cr_assert_eq(sy_graph_create(&q->g), SY_OK);
    const int64_t xne[2] = {QKV_K, 1}, pne[1] = {1}, cne[3] = {QKV_D, 2, QKV_CTX};
    const int64_t heads[3] = {4, 2, 2};
    sy_tensor *x, *heads_t[3], *kc, *vc;
    cr_assert_eq(sy_graph_add_tensor(q->g, "x", SY_DTYPE_F32, 2, xne, SY_ROLE_INPUT, q->x, &x),
                 SY_OK);
    cr_assert_eq(sy_graph_add_tensor(q->g, "pos", SY_DTYPE_I32, 1, pne, SY_ROLE_INPUT, &q->pos,
                                     &q->pos_t),
                 SY_OK);
    for (int i = 0; i < 3; i++) {
        const int64_t wne[2] = {QKV_K, heads[i] * QKV_D};
        char name[16];
        sy_tensor *w, *y;
        snprintf(name, sizeof name, "w%d", i);
        cr_assert_eq(sy_graph_add_tensor(q->g, name, SY_DTYPE_Q8_0, 2, wne, SY_ROLE_WEIGHT,
                                         q->w[i], &w),
                     SY_OK);
        sy_tensor *in[2] = {w, x};
        snprintf(name, sizeof name, "mm%d", i);
        cr_assert_eq(sy_graph_add_node(q->g, SY_OP_MATMUL, name, in, 2, NULL, &y), SY_OK);
        const sy_op_params rp = {.i = {QKV_D, heads[i], 1, 1}};
        snprintf(name, sizeof name, "heads%d", i);
        cr_assert_eq(sy_graph_add_node(q->g, SY_OP_RESHAPE, name, &y, 1, &rp, &heads_t[i]),
                     SY_OK);
    }
    const sy_op_params rope = {.i = {SY_ROPE_NEOX, QKV_D}, .f = {10000.0f, 1.0f}};
    sy_tensor *rq, *rk, *kw, *vw;
    sy_tensor *in[2] = {heads_t[0], q->pos_t};
    cr_assert_eq(sy_graph_add_node(q->g, SY_OP_ROPE, "q.rope", in, 2, &rope, &rq), SY_OK);
    in[0] = heads_t[1];
    cr_assert_eq(sy_graph_add_node(q->g, SY_OP_ROPE, "k.rope", in, 2, &rope, &rk), SY_OK);
    cr_assert_eq(sy_graph_add_tensor(q->g, "cache_k", SY_DTYPE_F32, 3, cne, SY_ROLE_KV, q->kc, &kc),
                 SY_OK);
    cr_assert_eq(sy_graph_add_tensor(q->g, "cache_v", SY_DTYPE_F32, 3, cne, SY_ROLE_KV, q->vc, &vc),
                 SY_OK);
    sy_tensor *outs[4] = {rq, rk};
    if (kv) {
        const sy_op_params wp = {.i = {at}};
        sy_tensor *kin[2] = {kc, rk}, *vin[2] = {vc, heads_t[2]};
        cr_assert_eq(sy_graph_add_node(q->g, SY_OP_KV_WRITE, "k.write", kin, 2, &wp, &kw),
                     SY_OK);
        cr_assert_eq(sy_graph_add_node(q->g, SY_OP_KV_WRITE, "v.write", vin, 2, &wp, &vw),
                     SY_OK);
        q->write[0] = sy_graph_producer(q->g, kw)->id;
        q->write[1] = sy_graph_producer(q->g, vw)->id;
        outs[2] = kw;
        outs[3] = vw;
    } else {
        /* v's heads an output of their own: the group keeps three members. */
        outs[2] = heads_t[2];
    }
    for (int i = 0; i < (kv ? 4 : 3); i++)
        cr_assert_eq(sy_graph_mark_output(q->g, outs[i]), SY_OK);
    cr_assert_eq(sy_graph_set_host_data(q->g, rq, q->rq), SY_OK);
    cr_assert_eq(sy_graph_set_host_data(q->g, rk, q->rk), SY_OK);
    cr_assert_eq(sy_graph_freeze(q->g), SY_OK, "%s", sy_graph_last_error(q->g));
}

/* Fills |q|'s weights and input from |seed|: Q8_0 blocks of scale 1/64. */
static void qkv_fill(qkv_graph *q, uint32_t seed)
{
    memset(q, 0, sizeof *q);
    for (int i = 0; i < 3; i++)
        for (size_t b = 0; b < sizeof q->w[i] / 34; b++) {
            uint8_t *blk = q->w[i] + b * 34;
            blk[0] = 0x00; /* f16 1/64 = 0x2400 */
            blk[1] = 0x24;
            for (int j = 0; j < 32; j++) {
                seed = seed * 1664525u + 1013904223u;
                blk[2 + j] = (uint8_t)(seed >> 24);
            }
        }
    for (int i = 0; i < QKV_K; i++) {
        seed = seed * 1664525u + 1013904223u;
        q->x[i] = (float)(seed >> 8) / (float)(1u << 24) - 0.5f;
    }
}

/* The graph above kept and replayed on the cpu, beside one built afresh
 * for each step and run in full. */
typedef struct qkv_run {
    sy_runtime *rt;
    sy_planner *pl;
    sy_plan *plan;
    sy_executor *x;
    qkv_graph *kept, *fresh;
    bool kv;
} qkv_run;

/* Builds |kept| (with its KV writes where |kv|) at position 0 from |seed|,
 * plans it on the cpu of |rt|, and fills |fresh| alike. */
static void qkv_start(qkv_run *r, sy_runtime *rt, qkv_graph *kept, qkv_graph *fresh,
                      uint32_t seed, bool kv)
{
    *r = (qkv_run){.rt = rt, .kept = kept, .fresh = fresh, .kv = kv};
    cr_assert_eq(sy_planner_create(rt, &r->pl), SY_OK);
    sy_plan_options o;
    sy_plan_options_init(&o);
    o.devices = "cpu";
    qkv_fill(kept, seed);
    qkv_build(kept, 0, kv);
    r->plan = st_plan(r->pl, kept->g, &o);
    cr_assert_eq(sy_executor_create(rt, &r->x), SY_OK);
    qkv_fill(fresh, seed);
}

/* Step |s|: runs the kept graph, and a graph built with its KV writes at
 * |at| in full; their rope outputs (and caches) must agree bit for bit. */
static void qkv_step(const qkv_run *r, uint32_t s, int64_t at)
{
    qkv_graph *kept = r->kept, *fresh = r->fresh;
    cr_assert_eq(sy_executor_run(r->x, kept->g, r->plan), SY_OK, "%s",
                 sy_runtime_last_error(r->rt));
    qkv_build(fresh, at, r->kv);
    cr_assert_eq(sy_runtime_execute_on(r->rt, fresh->g, 0), SY_OK, "%s",
                 sy_runtime_last_error(r->rt));
    sy_graph_destroy(fresh->g);
    const int32_t pos = kept->pos;
    cr_assert_eq(memcmp(kept->rq, fresh->rq, sizeof kept->rq), 0, "step %u (position %d): q rope",
                 s, pos);
    cr_assert_eq(memcmp(kept->rk, fresh->rk, sizeof kept->rk), 0, "step %u (position %d): k rope",
                 s, pos);
    if (r->kv) {
        cr_assert_eq(memcmp(kept->kc, fresh->kc, sizeof kept->kc), 0, "step %u: K cache", s);
        cr_assert_eq(memcmp(kept->vc, fresh->vc, sizeof kept->vc), 0, "step %u: V cache", s);
    }
}

static void qkv_finish(qkv_run *r)
{
    sy_executor_destroy(r->x);
    sy_plan_release(r->plan);
    sy_graph_destroy(r->kept->g);
    sy_planner_destroy(r->pl);
}

/* Replayed steps of the graph above, the KV writes' position updated and
 * the input changed at each: the plugin's kept program moves the writes
 * in its tiles at every replay, and the caches and rope outputs equal,
 * bit for bit, those of a graph built for each position and run in full. */
Test(executor_replay, kept_programs_move_the_kv_writes_fused_in_matmul_tiles)
{
    st_log *log = calloc(1, sizeof *log);
    sy_runtime *rt = st_runtime_logging(SY_TEST_CPU_PLUGIN, st_log_append, log);
    static qkv_graph kept, fresh;
    qkv_run r;
    qkv_start(&r, rt, &kept, &fresh, 7, true);
    const uint32_t order[6] = {0, 1, 2, 5, 3, 7};
    for (uint32_t s = 0; s < 6; s++) {
        const int64_t at = order[s];
        for (int i = 0; i < QKV_K; i++)
            kept.x[i] = fresh.x[i] = fresh.x[i] * 0.9f + 0.01f * (float)s;
        kept.pos = fresh.pos = 100 + (int32_t)at;
        if (s > 0) {
            sy__node_update up[2];
            for (int k = 0; k < 2; k++) {
                up[k] = (sy__node_update){.node = kept.write[k]};
                up[k].params.i[0] = at;
            }
            cr_assert_eq(sy__graph_update_params(kept.g, up, 2), SY_OK, "%s",
                         sy_graph_last_error(kept.g));
        }
        qkv_step(&r, s, at);
    }
    uint64_t steps = 0;
    cr_assert_geq(replayed(r.x, &steps), 4, "of %llu steps", (unsigned long long)steps);
    /* Everything in one job: 7 nodes (the views are not passed), once. */
    const char *rec = strstr(log->text, "kept program: 7 nodes in 1 steps, 1 of them matmul jobs");
    cr_assert_not_null(rec, "the plugin did not keep one job for the whole step:\n%s", log->text);
    cr_assert_null(strstr(rec + 1, "kept program:"), "recorded more than once:\n%s", log->text);
    cr_assert_null(strstr(log->text, "no longer runs as recorded"), "%s", log->text);
    /* The caches hold every position written, from a non-zero input. */
    for (uint32_t s = 0; s < 6; s++) {
        float sum = 0.0f;
        for (int i = 0; i < 2 * QKV_D; i++)
            sum += fabsf(kept.kc[order[s] * 2 * QKV_D + i]);
        cr_assert_gt(sum, 0.0f, "position %u of the K cache was not written", order[s]);
    }
    qkv_finish(&r);
    sy_runtime_destroy(rt);
    free(log);
    st_check_leaks();
}

/* The graph above without its KV writes: the ropes alone run in the
 * group's tiles, and only the positions' data changes between steps (no
 * node is updated).  Each replay ropes at the position the tensor holds
 * now, bit for bit as a graph built and run in full. */
Test(executor_replay, kept_programs_rope_at_the_position_of_each_step)
{
    sy_runtime *rt = st_runtime();
    static qkv_graph kept, fresh;
    qkv_run r;
    qkv_start(&r, rt, &kept, &fresh, 11, false);
    const int32_t pos[5] = {3, 4, 5, 900, 6};
    for (uint32_t s = 0; s < 5; s++) {
        kept.pos = fresh.pos = pos[s];
        qkv_step(&r, s, 0);
    }
    uint64_t steps = 0;
    cr_assert_geq(replayed(r.x, &steps), 3, "of %llu steps", (unsigned long long)steps);
    qkv_finish(&r);
    sy_runtime_destroy(rt);
    st_check_leaks();
}

/* A session's decode crosses a power of two of its context every few
 * steps at first (the graph's shape class changes, and with it the plan
 * the planner makes).  On the cpu alone each of those plans runs the step
 * as the one before, so the session keeps its plan and the executor goes
 * on replaying: every step after the first is a replay.  The logits equal,
 * bit for bit, those of a session that times its nodes (a full run, node
 * by node, at every step). */
Test(executor_replay, a_session_replays_across_shape_classes)
{
    const char *path = st_smollm2();
    sy_runtime *rt = st_runtime();
    sy_model *m = NULL;
    cr_assert_eq(sy_model_open(rt, path, &m), SY_OK, "%s", sy_runtime_last_error(rt));
    const uint32_t n_vocab = m->hp.n_vocab, steps = 40;
    sy_session *s[2];
    for (int side = 0; side < 2; side++) {
        sy_session_options o;
        sy_session_options_init(&o);
        o.devices = "cpu";
        o.n_ctx = 64;
        o.time_nodes = side == 1;
        cr_assert_eq(sy_session_create(m, &o, &s[side]), SY_OK, "%s", sy_runtime_last_error(rt));
    }
    float *logits[2] = {malloc(n_vocab * sizeof(float)), malloc(n_vocab * sizeof(float))};
    int32_t tok = 1;
    for (uint32_t p = 0; p < steps; p++) {
        for (int side = 0; side < 2; side++)
            cr_assert_eq(sy_session_eval(s[side], &tok, 1, false, logits[side]), SY_OK, "%s",
                         sy_runtime_last_error(rt));
        cr_assert_eq(memcmp(logits[0], logits[1], n_vocab * sizeof(float)), 0,
                     "step %u: the replayed session's logits differ from a full run's", p);
        uint32_t best = 0;
        for (uint32_t v = 1; v < n_vocab; v++)
            best = logits[0][v] > logits[0][best] ? v : best;
        tok = (int32_t)best;
    }
    sy_step_stats st;
    sy_step_stats_init(&st);
    cr_assert_eq(sy_session_query_step_stats(s[0], &st), SY_OK);
    cr_assert_eq(st.steps, steps);
    cr_assert_eq(st.replayed, steps - 1, "%llu of %u steps replayed (the context crossed 2, 4, "
                 "8, 16 and 32)", (unsigned long long)st.replayed, steps);
    for (int side = 0; side < 2; side++) {
        sy_session_destroy(s[side]);
        free(logits[side]);
    }
    sy_model_close(m);
    sy_runtime_destroy(rt);
    st_check_leaks();
}
