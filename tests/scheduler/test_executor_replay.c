/* Replayed steps (framework/runtime/executor_replay.c): a graph run again
 * with the same plan, only its params updated, runs from the nodes the
 * executor bound the step before.  Decode steps of the real SmolLM2 on a
 * kept, updated graph give the logits and caches of graphs built afresh
 * and run in full, to the bit, also after a step run in full in between;
 * the graph's tensors point at their host data after every run; new host
 * data, a new plan and turning node timing on each make the next run a
 * full one, and a step after it replays again. */
#include <criterion/criterion.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

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

Test(executor_replay, decode_steps_on_a_kept_graph_are_replayed_and_equal_full_runs)
{
    const char *path = SY_TEST_SOURCE_DIR "/models/SmolLM2-135M-Instruct.Q4_1.gguf";
    if (access(path, R_OK) != 0)
        cr_skip_test("%s not fetched (tools/fetch-models.sh)", path);
    sy_runtime *rt = st_runtime();
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
