/* KV caches kept on the device that runs their layer (sy_executor_keep_state):
 * steps of the real SmolLM2 with layer 1 on opaquedev (memory of its own,
 * reference kernels) give the cpu's logits while that layer's cache stays
 * on opaquedev, the bytes a decode step moves do not grow with the
 * context and leave the cache out, the host bytes are stale until fetched,
 * and a re-plan that moves the layer back to the cpu carries its cache. */
#include <criterion/criterion.h>
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "model_internal.h"
#include "sched_test_util.h"

static float half_to_float(uint16_t h)
{
    int exp = h >> 10 & 0x1f, mant = h & 0x3ff;
    float v = exp == 0 ? ldexpf((float)mant, -24) : ldexpf((float)(mant | 0x400), exp - 25);
    return h & 0x8000 ? -v : v;
}

static uint64_t moved(sy_executor *x, uint32_t dev)
{
    sy_executor_memory mo;
    cr_assert_eq(sy_executor_query_memory(x, dev, &mo), SY_OK);
    return mo.moved_bytes;
}

typedef struct kv_run {
    sy_runtime *rt;
    sy_model *m;
    sy_planner *pl;
    void **kv; /* per side: L K caches, then L V caches */
    float *want, *got;
    int32_t ids[12], pos[12];
    uint32_t n_ctx;
} kv_run;

/* One step: the cpu alone (side 0), then |x| by a plan with |opts|.
 * opaquedev runs layer 1 with the reference kernels (double sums): twelve
 * steps drift a few 1e-3 from the cpu; a stale or lost cache misses by
 * far more. */
static void step(kv_run *k, sy_executor *x, const sy_plan_options *opts, uint32_t T,
                 uint32_t past)
{
    uint32_t L = k->m->hp.n_layer;
    for (uint32_t side = 0; side < 2; side++) {
        sy_step_desc sd = {
            .n_tokens = T, .n_past = past, .tokens = k->ids + past, .positions = k->pos + past,
            .logits = side ? k->got : k->want, .kv_k = k->kv + 2 * side * L,
            .kv_v = k->kv + 2 * side * L + L, .kv_type = SY_DTYPE_F16, .n_ctx = k->n_ctx,
        };
        char err[256];
        sy_graph *g = NULL;
        cr_assert_eq(sy__model_build_graph(k->m, &sd, &g, err, sizeof err), SY_OK, "%s", err);
        if (side == 0) {
            cr_assert_eq(sy_runtime_execute_on(k->rt, g, ST_CPU), SY_OK, "%s",
                         sy_runtime_last_error(k->rt));
        } else {
            sy_plan *plan = st_plan(k->pl, g, opts);
            cr_assert_eq(sy_executor_run(x, g, plan), SY_OK, "%s", sy_runtime_last_error(k->rt));
            sy_plan_release(plan);
        }
        sy_graph_destroy(g);
    }
    for (uint32_t i = 0; i < k->m->hp.n_vocab; i++)
        cr_assert(fabsf(k->got[i] - k->want[i]) <= 5e-3f + 2e-3f * fabsf(k->want[i]),
                  "position %u logit %u: %g, cpu alone %g", past, i, (double)k->got[i],
                  (double)k->want[i]);
}

/* The plan side's cache of layer 1 against the cpu's (F16 rounding of
 * values that differ as the logits do); |rows| positions written. */
static void assert_layer1_close(kv_run *k, uint32_t rows)
{
    uint32_t L = k->m->hp.n_layer;
    size_t n = (size_t)k->m->hp.head_dim * k->m->hp.n_head_kv * rows;
    for (uint32_t kv = 0; kv < 2; kv++) {
        const uint16_t *want = k->kv[kv * L + 1], *got = k->kv[2 * L + kv * L + 1];
        for (size_t i = 0; i < n; i++) {
            float a = half_to_float(got[i]), b = half_to_float(want[i]);
            cr_assert(fabsf(a - b) <= 2e-3f * fabsf(b) + 2e-3f, "%s cache element %zu: %g, cpu %g",
                      kv ? "V" : "K", i, (double)a, (double)b);
        }
    }
}

static bool all_zero(const void *p, size_t n)
{
    const unsigned char *c = p;
    for (size_t i = 0; i < n; i++)
        if (c[i])
            return false;
    return true;
}

Test(executor_state, a_kept_cache_stays_on_its_device_and_decode_moves_only_activations)
{
    const char *path = st_smollm2();
    cr_assert_eq(setenv("SWITCHYARD_CPU_ACTIVATIONS", "f32", 1), 0);
    kv_run k = {.rt = st_runtime(), .n_ctx = 64};
    cr_assert_eq(sy_model_open(k.rt, path, &k.m), SY_OK, "%s", sy_runtime_last_error(k.rt));
    cr_assert_eq(sy_planner_create(k.rt, &k.pl), SY_OK);
    const sy_hparams *hp = &k.m->hp;
    uint32_t L = hp->n_layer;
    size_t per = (size_t)hp->head_dim * hp->n_head_kv * k.n_ctx * 2;
    k.kv = calloc(4 * L, sizeof *k.kv);
    for (uint32_t i = 0; i < 4 * L; i++)
        k.kv[i] = calloc(1, per);
    k.want = malloc(hp->n_vocab * sizeof *k.want);
    k.got = malloc(hp->n_vocab * sizeof *k.got);
    const int32_t ids[12] = {1, 504, 3327, 28, 4730, 30, 279, 1167, 314, 253, 2418, 30};
    for (uint32_t i = 0; i < 12; i++) {
        k.ids[i] = ids[i];
        k.pos[i] = (int32_t)i;
    }
    /* Layer 1 on opaquedev, everything else on the cpu. */
    const char *pins[] = {"blk.1.*=opaquedev", "*=cpu"};
    sy_plan_options o;
    sy_plan_options_init(&o);
    o.pins = pins;
    o.n_pins = 2;
    o.devices = "cpu,opaquedev";

    /* Without keeping, for comparison: every step copies the cache in and out. */
    sy_executor *plain = NULL;
    cr_assert_eq(sy_executor_create(k.rt, &plain), SY_OK);
    step(&k, plain, &o, 4, 0);
    uint64_t m0 = moved(plain, ST_OPAQUE);
    step(&k, plain, &o, 1, 4);
    uint64_t plain_step = moved(plain, ST_OPAQUE) - m0;
    cr_assert_geq(plain_step, 4 * per, "a step without keeping moves the cache in and out");
    sy_executor_destroy(plain);
    for (uint32_t i = 0; i < 4 * L; i++)
        memset(k.kv[i], 0, per);

    sy_executor *x = NULL;
    cr_assert_eq(sy_executor_create(k.rt, &x), SY_OK);
    cr_assert_eq(sy_executor_keep_state(x, true), SY_OK);
    step(&k, x, &o, 4, 0);
    sy_executor_memory mo;
    cr_assert_eq(sy_executor_query_memory(x, ST_OPAQUE, &mo), SY_OK);
    cr_assert_eq(mo.kv_bytes, 2 * per, "layer 1's K and V are kept on opaquedev");
    cr_assert_geq(mo.current_bytes, mo.kv_bytes + mo.arena_bytes);
    uint64_t per_step[6];
    for (uint32_t s = 0; s < 6; s++) {
        uint64_t before = moved(x, ST_OPAQUE);
        step(&k, x, &o, 1, 4 + s);
        per_step[s] = moved(x, ST_OPAQUE) - before;
        cr_assert_eq(per_step[s], per_step[0], "decode at position %u moved %llu bytes, at 4 %llu",
                     4 + s, (unsigned long long)per_step[s], (unsigned long long)per_step[0]);
    }
    cr_assert_lt(per_step[0], per / 4, "a kept-cache decode step moved %llu bytes (cache %zu)",
                 (unsigned long long)per_step[0], per);
    cr_assert_lt(per_step[0] + 2 * per, plain_step);
    /* The host bytes of the kept caches were never copied back... */
    cr_assert(all_zero(k.kv[2 * L + 1], per) && all_zero(k.kv[3 * L + 1], per));
    cr_assert(!all_zero(k.kv[2 * L + 2], per), "layer 2 runs on the cpu, in host memory");
    /* ...until fetched. */
    uint64_t before = moved(x, ST_OPAQUE);
    cr_assert_eq(sy_executor_sync_state(x, k.kv[2 * L + 1], per, false), SY_OK);
    cr_assert_eq(sy_executor_sync_state(x, k.kv[3 * L + 1], per, false), SY_OK);
    cr_assert_eq(moved(x, ST_OPAQUE) - before, 2 * per);
    assert_layer1_close(&k, 10);
    /* Fetched again with nothing new: no copy. */
    cr_assert_eq(sy_executor_sync_state(x, k.kv[2 * L + 1], per, false), SY_OK);
    cr_assert_eq(moved(x, ST_OPAQUE) - before, 2 * per);
    /* A caller that changes the host bytes (a window slide) gets them reloaded once. */
    cr_assert_eq(sy_executor_sync_state(x, k.kv[2 * L + 1], per, true), SY_OK);
    before = moved(x, ST_OPAQUE);
    step(&k, x, &o, 1, 10);
    cr_assert_eq(moved(x, ST_OPAQUE) - before, per_step[0] + per);
    /* A re-plan that moves layer 1 to the cpu carries its cache there. */
    sy_plan_options cpu_only;
    sy_plan_options_init(&cpu_only);
    cpu_only.devices = "cpu";
    step(&k, x, &cpu_only, 1, 11);
    cr_assert_eq(sy_executor_query_memory(x, ST_OPAQUE, &mo), SY_OK);
    cr_assert_eq(mo.kv_bytes, 0u);
    assert_layer1_close(&k, 12);

    for (uint32_t i = 0; i < 4 * L; i++)
        free(k.kv[i]);
    free(k.kv);
    free(k.want);
    free(k.got);
    sy_executor_destroy(x);
    sy_planner_destroy(k.pl);
    sy_model_close(k.m);
    sy_runtime_destroy(k.rt);
    st_check_leaks();
}

Test(executor_state, keeping_cannot_be_turned_off_while_caches_are_kept)
{
    sy_runtime *rt = st_runtime();
    sy_executor *x = NULL;
    cr_assert_eq(sy_executor_create(rt, &x), SY_OK);
    cr_assert_eq(sy_executor_keep_state(NULL, true), SY_E_INVALID_ARG);
    cr_assert_eq(sy_executor_sync_state(NULL, NULL, 0, false), SY_E_INVALID_ARG);
    cr_assert_eq(sy_executor_sync_state(x, NULL, 16, false), SY_E_INVALID_ARG);
    /* Nothing kept yet: both ways succeed, and syncing unknown bytes is a no-op. */
    cr_assert_eq(sy_executor_keep_state(x, true), SY_OK);
    cr_assert_eq(sy_executor_keep_state(x, false), SY_OK);
    char bytes[16] = {0};
    cr_assert_eq(sy_executor_sync_state(x, bytes, sizeof bytes, true), SY_OK);
    sy_executor_destroy(x);
    sy_runtime_destroy(rt);
}
