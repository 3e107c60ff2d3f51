/* Executing plans across the real cpu device and the fake test devices
 * (testdev: unified, reference kernels; opaquedev: copies only) gives the
 * outputs, and the KV caches, of running the graph on the cpu alone. */
#include <criterion/criterion.h>
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "memplan.h"
#include "model_internal.h"
#include "plan_internal.h"
#include "sched_test_util.h"

static const st_decoder_shape decoder = {
    .n_layer = 3,
    .n_embd = 64,
    .n_head = 4,
    .n_head_kv = 2,
    .n_ff = 128,
    .n_vocab = 256,
    .n_ctx = 16,
    .n_tokens = 3,
    .n_past = 4,
    /* F32 caches: nodes of one layer run here on the cpu's kernels and on
     * the reference ones (double sums), and with F16 caches a value on a
     * rounding boundary became neighbouring halves (5e-4 apart); at seed
     * 18008259979509398207 that moved a logit by 1.9e-3 relative, past the
     * float bound below (about 1 seed in 200).  The SmolLM2 tests below
     * run F16 caches over two devices. */
    .kv_type = SY_DTYPE_F32,
    .with_data = true,
};

/* Kernels differ (threaded AVX2 sums vs the double-accumulating
 * reference), so compare within a float tolerance. */
static void assert_close(const float *got, const float *want, uint64_t n, const char *what)
{
    for (uint64_t i = 0; i < n; i++)
        cr_assert(fabsf(got[i] - want[i]) <= 1e-4f + 1e-4f * fabsf(want[i]),
                  "%s[%llu]: %g, cpu alone gives %g", what, (unsigned long long)i, (double)got[i],
                  (double)want[i]);
}

typedef struct kv_snapshot {
    void *data[8];
    uint64_t bytes[8];
    void *saved[8];
    uint32_t n;
} kv_snapshot;

/* Saves the KV leaves' host contents and zeroes them for the next run. */
static void kv_take(const sy_graph *g, kv_snapshot *kv)
{
    kv->n = 0;
    for (uint32_t i = 0; i < sy_graph_tensor_count(g) && kv->n < 8; i++) {
        const sy_tensor *t = sy_graph_tensor(g, i);
        if (t->role != SY_ROLE_KV)
            continue;
        kv->data[kv->n] = sy_graph_host_data(g, t);
        kv->bytes[kv->n] = sy_tensor_nbytes(t);
        kv->saved[kv->n] = malloc(kv->bytes[kv->n]);
        memcpy(kv->saved[kv->n], kv->data[kv->n], kv->bytes[kv->n]);
        memset(kv->data[kv->n], 0, kv->bytes[kv->n]);
        kv->n++;
    }
}

static void kv_assert_same(kv_snapshot *kv)
{
    for (uint32_t k = 0; k < kv->n; k++) {
        /* F32 caches: the float bound of the outputs. */
        const float *a = kv->data[k], *b = kv->saved[k];
        for (uint64_t i = 0; i < kv->bytes[k] / sizeof(float); i++)
            cr_assert(fabsf(a[i] - b[i]) <= 1e-4f + 1e-4f * fabsf(b[i]),
                      "cache %u element %llu: %g, cpu alone gives %g", k, (unsigned long long)i,
                      (double)a[i], (double)b[i]);
        free(kv->saved[k]);
    }
}

static sy_planner *planner_with_profiles(sy_runtime *rt)
{
    sy_planner *pl = NULL;
    cr_assert_eq(sy_planner_create(rt, &pl), SY_OK);
    char path[512];
    cr_assert_eq(
        sy_planner_load_profile(pl, st_fixture("testdev_fast_matmul.json", path, sizeof path)),
        SY_OK);
    cr_assert_eq(sy_planner_load_profile(
                     pl, st_fixture("opaquedev_fast_elementwise.json", path, sizeof path)),
                 SY_OK);
    return pl;
}

/* Runs |g| on the cpu alone, then by |plan|, and compares. */
static void run_both_and_compare(sy_runtime *rt, st_graph *sg, const sy_plan *plan)
{
    cr_assert_eq(sy_runtime_execute_on(rt, sg->g, ST_CPU), SY_OK, "%s", sy_runtime_last_error(rt));
    float *want = malloc(sg->out_count * sizeof *want);
    memcpy(want, sg->out, sg->out_count * sizeof *want);
    memset(sg->out, 0, sg->out_count * sizeof *want);
    kv_snapshot kv;
    kv_take(sg->g, &kv);
    cr_assert_eq(sy_runtime_execute_plan(rt, sg->g, plan), SY_OK, "%s", sy_runtime_last_error(rt));
    assert_close(sg->out, want, sg->out_count, "output");
    kv_assert_same(&kv);
    free(want);
}

Test(execute_plan, a_three_device_decoder_plan_matches_the_cpu_alone)
{
    sy_runtime *rt = st_runtime();
    sy_planner *pl = planner_with_profiles(rt);
    st_graph sg;
    st_decoder_graph(&sg, &decoder, st_fresh_seed());
    sy_plan *plan = st_plan(pl, sg.g, NULL);
    cr_assert_eq(st_devices_used(plan), 3u);
    sy_plan_summary s;
    sy_plan_query_summary(plan, &s);
    cr_assert_gt(s.n_transfers, 4u);
    run_both_and_compare(rt, &sg, plan);
    /* Again: buffers of the first run are gone, tensors point at host data. */
    run_both_and_compare(rt, &sg, plan);
    sy_plan_release(plan);
    st_graph_free(&sg);
    sy_planner_destroy(pl);
    sy_runtime_destroy(rt);
    st_check_leaks();
}

Test(execute_plan, weights_and_caches_shared_across_devices_move_and_come_back)
{
    sy_runtime *rt = st_runtime();
    sy_planner *pl;
    cr_assert_eq(sy_planner_create(rt, &pl), SY_OK);
    st_graph sg;
    st_decoder_graph(&sg, &decoder, st_fresh_seed());
    /* The tied embedding is read on two devices; layer 1 writes its cache
     * on the device whose buffers the host cannot see. */
    const char *pins[] = {"token_embd=opaquedev", "output=testdev", "blk.1.*=opaquedev",
                          "blk.2.attn=testdev"};
    sy_plan_options o;
    sy_plan_options_init(&o);
    o.pins = pins;
    o.n_pins = 4;
    sy_plan *plan = st_plan(pl, sg.g, &o);
    char why[256];
    cr_assert(st_check_plan(rt, sg.g, plan, why, sizeof why), "%s", why);
    uint32_t leaf_moves = 0;
    for (uint32_t k = 0; k < plan->n_steps; k++)
        leaf_moves +=
            plan->steps[k].kind == SY_PLAN_STEP_TRANSFER && plan->steps[k].value_node == SY__NONE;
    cr_assert_gt(leaf_moves, 0u, "token_embd.weight must move");
    run_both_and_compare(rt, &sg, plan);
    sy_plan_release(plan);
    st_graph_free(&sg);
    sy_planner_destroy(pl);
    sy_runtime_destroy(rt);
    st_check_leaks();
}

Test(execute_plan, random_graphs_under_random_pins_match_the_cpu_alone)
{
    sy_runtime *rt = st_runtime();
    sy_planner *pl;
    cr_assert_eq(sy_planner_create(rt, &pl), SY_OK);
    uint64_t seed = st_fresh_seed();
    static const char *const devs[] = {"cpu", "testdev", "opaquedev"};
    for (uint32_t trial = 0; trial < 40; trial++) {
        uint64_t rng = seed + trial;
        st_graph sg;
        st_random_graph(&sg, st_range(&rng, 1, 20), trial % 2 == 1, &rng);
        char texts[64][SY_NAME_MAX + 16];
        const char *pins[64];
        uint32_t n_pins = 0;
        for (uint32_t i = 0; i < sy_graph_node_count(sg.g) && n_pins < 64; i++) {
            const sy_node *n = sy_graph_node(sg.g, i);
            if (sy_op_is_view(n->op))
                continue;
            uint32_t d = st_range(&rng, 0, 2);
            if (n->op == SY_OP_ARGMAX)
                d = 0; /* both fake devices refuse it */
            snprintf(texts[n_pins], sizeof texts[n_pins], "%s=%s", n->name, devs[d]);
            pins[n_pins] = texts[n_pins];
            n_pins++;
        }
        sy_plan_options o;
        sy_plan_options_init(&o);
        o.pins = pins;
        o.n_pins = n_pins;
        sy_plan *plan = st_plan(pl, sg.g, &o);
        char why[256];
        cr_assert(st_check_plan(rt, sg.g, plan, why, sizeof why), "seed %llu trial %u: %s",
                  (unsigned long long)seed, trial, why);
        cr_assert_eq(sy_runtime_execute_on(rt, sg.g, ST_CPU), SY_OK, "%s",
                     sy_runtime_last_error(rt));
        float *want = malloc(sg.out_count * sizeof *want);
        memcpy(want, sg.out, sg.out_count * sizeof *want);
        memset(sg.out, 0, sg.out_count * sizeof *want);
        cr_assert_eq(sy_runtime_execute_plan(rt, sg.g, plan), SY_OK, "seed %llu trial %u: %s",
                     (unsigned long long)seed, trial, sy_runtime_last_error(rt));
        for (uint64_t i = 0; i < sg.out_count; i++)
            cr_assert(fabsf(sg.out[i] - want[i]) <= 1e-4f + 1e-4f * fabsf(want[i]),
                      "seed %llu trial %u: output[%llu] %g, cpu alone %g", (unsigned long long)seed,
                      trial, (unsigned long long)i, (double)sg.out[i], (double)want[i]);
        free(want);
        sy_plan_release(plan);
        st_graph_free(&sg);
    }
    sy_planner_destroy(pl);
    sy_runtime_destroy(rt);
    st_check_leaks();
}

Test(execute_plan, refuses_a_plan_made_for_another_graph)
{
    sy_runtime *rt = st_runtime();
    sy_planner *pl;
    cr_assert_eq(sy_planner_create(rt, &pl), SY_OK);
    uint64_t rng = st_fresh_seed();
    st_graph a, b;
    st_random_graph(&a, 5, false, &rng);
    st_random_graph(&b, 9, false, &rng);
    sy_plan *plan = st_plan(pl, a.g, NULL);
    cr_assert_eq(sy_runtime_execute_plan(rt, b.g, plan), SY_E_INVALID_ARG);
    cr_assert(strstr(sy_runtime_last_error(rt), "the plan is for"), "%s",
              sy_runtime_last_error(rt));
    cr_assert_eq(sy_runtime_execute_plan(rt, a.g, NULL), SY_E_INVALID_ARG);
    cr_assert_eq(sy_runtime_execute_plan(NULL, a.g, plan), SY_E_INVALID_ARG);
    sy_plan_release(plan);
    st_graph_free(&a);
    st_graph_free(&b);
    sy_planner_destroy(pl);
    sy_runtime_destroy(rt);
    st_check_leaks();
}

/* The real SmolLM2-135M model (tools/fetch-models.sh), when present: a
 * prefill and a decode step planned over cpu and testdev (matmuls cheap
 * there) give the logits of the cpu alone. testdev multiplies in float, so
 * the cpu does too (SWITCHYARD_CPU_ACTIVATIONS=f32): this checks the
 * executor, not the quantisation error of the cpu's q16 activations (about
 * 4e-3 on a logit, which the logits oracle bounds). */
Test(execute_plan, smollm2_steps_planned_over_two_devices_give_the_cpus_logits)
{
    const char *path = st_smollm2();
    cr_assert_eq(setenv("SWITCHYARD_CPU_ACTIVATIONS", "f32", 1), 0);
    sy_runtime *rt = st_runtime();
    sy_model *m = NULL;
    cr_assert_eq(sy_model_open(rt, path, &m), SY_OK, "%s", sy_runtime_last_error(rt));
    sy_planner *pl;
    cr_assert_eq(sy_planner_create(rt, &pl), SY_OK);
    char prof[512];
    cr_assert_eq(
        sy_planner_load_profile(pl, st_fixture("testdev_fast_matmul.json", prof, sizeof prof)),
        SY_OK);
    const sy_hparams *hp = &m->hp;
    uint32_t n_ctx = 16, L = hp->n_layer;
    size_t per = (size_t)hp->head_dim * hp->n_head_kv * n_ctx * 2;
    void **kv = calloc(2 * L, sizeof *kv);
    for (uint32_t k = 0; k < 2 * L; k++)
        kv[k] = calloc(1, per);
    float *want = malloc(hp->n_vocab * sizeof *want), *got = malloc(hp->n_vocab * sizeof *got);
    int32_t ids[4] = {1, 504, 3327, 28}, pos[4] = {0, 1, 2, 3};
    sy_plan_options o;
    sy_plan_options_init(&o);
    o.devices = "cpu,testdev";
    for (uint32_t phase = 0; phase < 2; phase++) {
        sy_step_desc step = {
            .n_tokens = phase ? 1 : 3,
            .n_past = phase ? 3 : 0,
            .tokens = phase ? ids + 3 : ids,
            .positions = phase ? pos + 3 : pos,
            .kv_k = kv,
            .kv_v = kv + L,
            .kv_type = SY_DTYPE_F16,
            .n_ctx = n_ctx,
        };
        char err[256];
        sy_graph *g = NULL;
        step.logits = want;
        cr_assert_eq(sy__model_build_graph(m, &step, &g, err, sizeof err), SY_OK, "%s", err);
        cr_assert_eq(sy_runtime_execute_on(rt, g, ST_CPU), SY_OK, "%s", sy_runtime_last_error(rt));
        sy_plan *plan = st_plan(pl, g, &o);
        cr_assert_eq(st_devices_used(plan), 2u);
        cr_assert_eq(
            sy_graph_set_host_data(g, sy_graph_node(g, sy_graph_node_count(g) - 1)->output, got),
            SY_OK);
        cr_assert_eq(sy_runtime_execute_plan(rt, g, plan), SY_OK, "%s", sy_runtime_last_error(rt));
        for (uint32_t i = 0; i < hp->n_vocab; i++)
            cr_assert(fabsf(got[i] - want[i]) <= 2e-3f + 1e-3f * fabsf(want[i]),
                      "phase %u logit %u: %g, cpu alone %g", phase, i, (double)got[i],
                      (double)want[i]);
        sy_plan_release(plan);
        sy_graph_destroy(g);
    }
    for (uint32_t k = 0; k < 2 * L; k++)
        free(kv[k]);
    free(kv);
    free(want);
    free(got);
    sy_planner_destroy(pl);
    sy_model_close(m);
    sy_runtime_destroy(rt);
    st_check_leaks();
}

/* Bytes of the weights a plan places on, or moves to, slot |d|. */
static uint64_t plan_weight_bytes_on(const sy_graph *g, const sy_plan *plan, uint32_t d)
{
    uint64_t bytes = 0;
    for (uint32_t i = 0; i < plan->n_tensors; i++) {
        const sy_tensor *t = sy_graph_tensor(g, i);
        if (t->role == SY_ROLE_WEIGHT && plan->leaf_home[i] == d)
            bytes += sy_tensor_nbytes(t);
    }
    for (uint32_t k = 0; k < plan->n_steps; k++) {
        const sy__plan_step *s = &plan->steps[k];
        const sy_tensor *t = sy_graph_tensor(g, s->tensor);
        if (s->kind == SY_PLAN_STEP_TRANSFER && s->dev == d && s->value_node == SY__NONE &&
            t->role == SY_ROLE_WEIGHT)
            bytes += sy_tensor_nbytes(t);
    }
    return bytes;
}

Test(execute_plan, an_executor_keeps_weights_and_its_arenas_between_runs)
{
    sy_runtime *rt = st_runtime();
    sy_planner *pl;
    cr_assert_eq(sy_planner_create(rt, &pl), SY_OK);
    st_graph sg;
    uint64_t seed = st_fresh_seed();
    st_decoder_graph(&sg, &decoder, seed);
    /* opaquedev shares no memory with the host: its weights are uploaded. */
    const char *pins[] = {"token_embd=opaquedev", "output=testdev", "blk.1.*=opaquedev",
                          "blk.2.attn=testdev"};
    sy_plan_options o;
    sy_plan_options_init(&o);
    o.pins = pins;
    o.n_pins = 4;
    sy_plan *plan = st_plan(pl, sg.g, &o);
    cr_assert_eq(sy_runtime_execute_on(rt, sg.g, ST_CPU), SY_OK, "%s", sy_runtime_last_error(rt));
    float *want = malloc(sg.out_count * sizeof *want);
    memcpy(want, sg.out, sg.out_count * sizeof *want);
    sy_executor *x = NULL;
    cr_assert_eq(sy_executor_create(rt, &x), SY_OK);
    sy__memplan mp;
    uint8_t alias_to[SY__MAX_PLAN_DEVICES] = {0};
    alias_to[ST_CPU] = 1u << ST_TESTDEV;
    alias_to[ST_TESTDEV] = 1u << ST_CPU;
    char err[256];
    cr_assert_eq(sy__memplan_build(sg.g, plan, alias_to, SY__MEMPLAN_ALIGN, &mp, err, sizeof err),
                 SY_OK, "%s", err);
    sy_executor_memory first[ST_N_DEVICES];
    for (uint32_t run = 0; run < 3; run++) {
        memset(sg.out, 0, sg.out_count * sizeof *sg.out);
        cr_assert_eq(sy_executor_run(x, sg.g, plan), SY_OK, "run %u: %s", run,
                     sy_runtime_last_error(rt));
        char what[64];
        snprintf(what, sizeof what, "seed %llu run %u output", (unsigned long long)seed, run);
        assert_close(sg.out, want, sg.out_count, what);
        for (uint32_t d = 0; d < ST_N_DEVICES; d++) {
            sy_executor_memory m;
            cr_assert_eq(sy_executor_query_memory(x, d, &m), SY_OK);
            cr_assert_eq(m.arena_bytes, mp.arena[d], "device %u", d);
            /* Only uploads count: the unified devices wrap host memory. */
            cr_assert_eq(m.weight_bytes, d == ST_OPAQUE ? plan_weight_bytes_on(sg.g, plan, d) : 0,
                         "device %u", d);
            cr_assert_eq(m.current_bytes, m.arena_bytes + m.weight_bytes, "device %u", d);
            if (run == 0) {
                first[d] = m;
                continue;
            }
            /* Nothing uploaded again, nothing left behind, no new peak. */
            cr_assert_eq(m.weight_bytes, first[d].weight_bytes);
            cr_assert_eq(m.current_bytes, first[d].current_bytes);
            cr_assert_eq(m.peak_bytes, first[d].peak_bytes);
        }
    }
    cr_assert_gt(first[ST_OPAQUE].weight_bytes, 0u);
    cr_assert_eq(sy_executor_query_memory(x, ST_N_DEVICES, &first[0]), SY_E_NOT_FOUND);
    sy__memplan_free(&mp);
    sy_executor_destroy(x);
    free(want);
    sy_plan_release(plan);
    st_graph_free(&sg);
    sy_planner_destroy(pl);
    sy_runtime_destroy(rt);
    st_check_leaks();
}

Test(execute_plan, an_arena_grows_for_a_larger_step_and_serves_smaller_ones_after)
{
    sy_runtime *rt = st_runtime();
    sy_planner *pl = planner_with_profiles(rt);
    sy_executor *x = NULL;
    cr_assert_eq(sy_executor_create(rt, &x), SY_OK);
    uint64_t seed = st_fresh_seed();
    uint64_t arena_after[3];
    static const uint32_t tokens[3] = {1, 8, 1};
    for (uint32_t k = 0; k < 3; k++) {
        st_decoder_shape sh = decoder;
        sh.n_tokens = tokens[k];
        sh.n_past = 4;
        st_graph sg;
        st_decoder_graph(&sg, &sh, seed + k);
        sy_plan_options o;
        sy_plan_options_init(&o);
        o.devices = "cpu";
        sy_plan *plan = st_plan(pl, sg.g, &o);
        cr_assert_eq(sy_runtime_execute_on(rt, sg.g, ST_CPU), SY_OK, "%s",
                     sy_runtime_last_error(rt));
        float *want = malloc(sg.out_count * sizeof *want);
        memcpy(want, sg.out, sg.out_count * sizeof *want);
        memset(sg.out, 0, sg.out_count * sizeof *sg.out);
        cr_assert_eq(sy_executor_run(x, sg.g, plan), SY_OK, "%s", sy_runtime_last_error(rt));
        assert_close(sg.out, want, sg.out_count, "output");
        sy_executor_memory m;
        cr_assert_eq(sy_executor_query_memory(x, ST_CPU, &m), SY_OK);
        arena_after[k] = m.arena_bytes;
        cr_assert_eq(m.current_bytes, m.arena_bytes);
        free(want);
        sy_plan_release(plan);
        st_graph_free(&sg);
    }
    cr_assert_gt(arena_after[1], arena_after[0]);
    cr_assert_eq(arena_after[2], arena_after[1]);
    sy_executor_destroy(x);
    sy_planner_destroy(pl);
    sy_runtime_destroy(rt);
    st_check_leaks();
}

/* Steps of the real SmolLM2 model through one executor over the three
 * devices (layer 1 and its KV cache on opaquedev, which shares no memory
 * with the host; the rest where the profiles put it) give the logits of the cpu alone at every step, with
 * each KV cache carried between steps in host memory. */
Test(execute_plan, smollm2_steps_through_one_executor_give_the_cpus_logits)
{
    const char *path = st_smollm2();
    cr_assert_eq(setenv("SWITCHYARD_CPU_ACTIVATIONS", "f32", 1), 0);
    sy_runtime *rt = st_runtime();
    sy_model *m = NULL;
    cr_assert_eq(sy_model_open(rt, path, &m), SY_OK, "%s", sy_runtime_last_error(rt));
    sy_planner *pl = planner_with_profiles(rt);
    sy_executor *x = NULL;
    cr_assert_eq(sy_executor_create(rt, &x), SY_OK);
    const sy_hparams *hp = &m->hp;
    uint32_t n_ctx = 16, L = hp->n_layer;
    size_t per = (size_t)hp->head_dim * hp->n_head_kv * n_ctx * 2;
    void **kv = calloc(4 * L, sizeof *kv); /* the cpu's caches, then the plan's */
    for (uint32_t k = 0; k < 4 * L; k++)
        kv[k] = calloc(1, per);
    float *want = malloc(hp->n_vocab * sizeof *want), *got = malloc(hp->n_vocab * sizeof *got);
    int32_t ids[6] = {1, 504, 3327, 28, 4730, 30}, pos[6] = {0, 1, 2, 3, 4, 5};
    const char *pins[] = {"blk.1.*=opaquedev"};
    sy_plan_options o;
    sy_plan_options_init(&o);
    o.pins = pins;
    o.n_pins = 1;
    for (uint32_t step = 0; step < 4; step++) {
        uint32_t T = step ? 1 : 3, past = step ? 2 + step : 0;
        for (uint32_t side = 0; side < 2; side++) {
            sy_step_desc sd = {
                .n_tokens = T, .n_past = past, .tokens = ids + past, .positions = pos + past,
                .logits = side ? got : want, .kv_k = kv + 2 * side * L,
                .kv_v = kv + 2 * side * L + L, .kv_type = SY_DTYPE_F16, .n_ctx = n_ctx,
            };
            char err[256];
            sy_graph *g = NULL;
            cr_assert_eq(sy__model_build_graph(m, &sd, &g, err, sizeof err), SY_OK, "%s", err);
            if (side == 0) {
                cr_assert_eq(sy_runtime_execute_on(rt, g, ST_CPU), SY_OK, "%s",
                             sy_runtime_last_error(rt));
            } else {
                sy_plan *plan = st_plan(pl, g, &o);
                cr_assert_geq(st_devices_used(plan), 2u);
                cr_assert_eq(sy_executor_run(x, g, plan), SY_OK, "%s", sy_runtime_last_error(rt));
                sy_plan_release(plan);
            }
            sy_graph_destroy(g);
        }
        for (uint32_t i = 0; i < hp->n_vocab; i++)
            cr_assert(fabsf(got[i] - want[i]) <= 2e-3f + 1e-3f * fabsf(want[i]),
                      "step %u logit %u: %g, cpu alone %g", step, i, (double)got[i],
                      (double)want[i]);
    }
    sy_executor_memory mo;
    cr_assert_eq(sy_executor_query_memory(x, ST_OPAQUE, &mo), SY_OK);
    cr_assert_gt(mo.weight_bytes, 0u);
    for (uint32_t k = 0; k < 4 * L; k++)
        free(kv[k]);
    free(kv);
    free(want);
    free(got);
    sy_executor_destroy(x);
    sy_planner_destroy(pl);
    sy_model_close(m);
    sy_runtime_destroy(rt);
    st_check_leaks();
}

/* z = x * x and w = z + x, both marked outputs, on the cpu.  z's host
 * memory is x's when |shared|: z must then not be written there before w
 * has read x.  Otherwise z and w are written straight into their host
 * memory: a unified device's run moves no bytes at all. */
static void run_square_then_add(bool shared)
{
    sy_runtime *rt = st_runtime();
    sy_planner *pl;
    cr_assert_eq(sy_planner_create(rt, &pl), SY_OK);
    enum { N = 64 };
    float xs[N], zs[N], ws[N];
    for (int i = 0; i < N; i++)
        xs[i] = (float)(i + 1);
    sy_graph *g;
    cr_assert_eq(sy_graph_create(&g), SY_OK);
    const int64_t ne[1] = {N};
    sy_tensor *x, *z, *w;
    cr_assert_eq(sy_graph_add_tensor(g, "x", SY_DTYPE_F32, 1, ne, SY_ROLE_INPUT, xs, &x), SY_OK);
    sy_tensor *in[2] = {x, x};
    cr_assert_eq(sy_graph_add_node(g, SY_OP_MUL, "z", in, 2, NULL, &z), SY_OK);
    in[0] = z;
    cr_assert_eq(sy_graph_add_node(g, SY_OP_ADD, "w", in, 2, NULL, &w), SY_OK);
    cr_assert_eq(sy_graph_set_host_data(g, z, shared ? xs : zs), SY_OK);
    cr_assert_eq(sy_graph_set_host_data(g, w, ws), SY_OK);
    cr_assert_eq(sy_graph_mark_output(g, z), SY_OK);
    cr_assert_eq(sy_graph_mark_output(g, w), SY_OK);
    cr_assert_eq(sy_graph_freeze(g), SY_OK, "%s", sy_graph_last_error(g));
    const char *pins[] = {"*=cpu"};
    sy_plan_options o;
    sy_plan_options_init(&o);
    o.pins = pins;
    o.n_pins = 1;
    sy_plan *plan = st_plan(pl, g, &o);
    sy_executor *x_ = NULL;
    cr_assert_eq(sy_executor_create(rt, &x_), SY_OK);
    cr_assert_eq(sy_executor_run(x_, g, plan), SY_OK, "%s", sy_runtime_last_error(rt));
    const float *zr = shared ? xs : zs;
    for (int i = 0; i < N; i++) {
        const float v = (float)(i + 1);
        cr_assert_eq(zr[i], v * v, "z[%d]: %g", i, (double)zr[i]);
        cr_assert_eq(ws[i], v * v + v, "w[%d]: %g, want %g", i, (double)ws[i], (double)(v * v + v));
    }
    sy_executor_memory m;
    cr_assert_eq(sy_executor_query_memory(x_, ST_CPU, &m), SY_OK);
    if (!shared)
        cr_assert_eq(m.moved_bytes, 0u, "%llu bytes moved", (unsigned long long)m.moved_bytes);
    sy_executor_destroy(x_);
    sy_plan_release(plan);
    sy_graph_destroy(g);
    sy_planner_destroy(pl);
    sy_runtime_destroy(rt);
    st_check_leaks();
}

Test(execute_plan, outputs_are_written_in_their_host_memory_on_a_unified_device)
{
    run_square_then_add(false);
}

Test(execute_plan, an_output_sharing_host_memory_with_an_input_waits_for_the_copy_back)
{
    run_square_then_add(true);
}
