/* The activation memory planner: no two buffers live at the same tick
 * share a byte (checked over every pair), every use of an activation lies
 * within its buffer's lifetime (derived again here from the plan's steps),
 * and arenas lie between the most bytes live at once (a lower bound for
 * any packing) and the sum of the sizes (no reuse). */
#include <criterion/criterion.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include "memplan.h"
#include "model_internal.h"
#include "sched_test_util.h"

static uint64_t up(uint64_t v, uint64_t a)
{
    return (v + a - 1) / a * a;
}

/* Every pair of items of one slot whose lifetimes meet is disjoint in
 * bytes; offsets are aligned and inside the arena. */
static void assert_no_overlap(const sy__mp_item *it, uint32_t n, const uint64_t *arena,
                              uint64_t align, const char *what)
{
    for (uint32_t i = 0; i < n; i++) {
        cr_assert_eq(it[i].offset % align, 0u, "%s: item %u at offset %llu", what, i,
                     (unsigned long long)it[i].offset);
        cr_assert_leq(it[i].offset + it[i].size, arena[it[i].slot], "%s: item %u past the arena",
                      what, i);
        for (uint32_t j = i + 1; j < n; j++) {
            if (it[i].slot != it[j].slot || it[i].last < it[j].first || it[j].last < it[i].first)
                continue;
            bool apart = it[i].offset + it[i].size <= it[j].offset ||
                         it[j].offset + it[j].size <= it[i].offset;
            cr_assert(apart,
                      "%s: items %u [%u,%u] %llu+%llu and %u [%u,%u] %llu+%llu overlap on slot %u",
                      what, i, it[i].first, it[i].last, (unsigned long long)it[i].offset,
                      (unsigned long long)it[i].size, j, it[j].first, it[j].last,
                      (unsigned long long)it[j].offset, (unsigned long long)it[j].size,
                      it[i].slot);
        }
    }
}

/* The lower bound recomputed by brute force: most aligned bytes live at
 * one tick. */
static uint64_t live_peak(const sy__mp_item *it, uint32_t n, uint32_t slot, uint32_t n_ticks,
                          uint64_t align)
{
    uint64_t best = 0;
    for (uint32_t t = 0; t < n_ticks; t++) {
        uint64_t live = 0;
        for (uint32_t i = 0; i < n; i++)
            if (it[i].slot == slot && it[i].first <= t && t <= it[i].last)
                live += up(it[i].size, align);
        if (live > best)
            best = live;
    }
    return best;
}

Test(memplan, random_lifetimes_never_share_bytes_while_both_live)
{
    uint64_t seed = st_fresh_seed();
    for (uint32_t trial = 0; trial < 300; trial++) {
        uint64_t rng = seed + trial;
        uint32_t n = st_range(&rng, 0, 120), ticks = st_range(&rng, 1, 200);
        uint64_t align = 1ull << st_range(&rng, 0, 9);
        sy__mp_item *it = calloc(n + 1, sizeof *it);
        for (uint32_t i = 0; i < n; i++) {
            uint32_t a = st_range(&rng, 0, ticks - 1), len = st_range(&rng, 0, 12);
            if (st_range(&rng, 0, 9) == 0)
                len = st_range(&rng, 0, ticks); /* now and then a long-lived one */
            it[i].slot = st_range(&rng, 0, 2);
            it[i].first = a;
            it[i].last = a + len < ticks ? a + len : ticks - 1;
            it[i].size = st_range(&rng, 0, 3) == 0 ? st_range(&rng, 0, 64)
                                                   : st_range(&rng, 1, 1u << 20);
        }
        uint64_t arena[SY__MAX_PLAN_DEVICES];
        cr_assert_eq(sy__memplan_pack(it, n, ticks, align, arena), SY_OK);
        char what[64];
        snprintf(what, sizeof what, "seed %llu trial %u", (unsigned long long)seed, trial);
        assert_no_overlap(it, n, arena, align, what);
        for (uint32_t s = 0; s < 3; s++) {
            uint64_t total = 0;
            for (uint32_t i = 0; i < n; i++)
                total += it[i].slot == s ? up(it[i].size, align) : 0;
            cr_assert_geq(arena[s], live_peak(it, n, s, ticks, align), "%s", what);
            cr_assert_leq(arena[s], total, "%s", what);
        }
        free(it);
    }
}

Test(memplan, refuses_bad_items_and_alignments)
{
    sy__mp_item it = {.slot = 0, .first = 3, .last = 2, .size = 8};
    uint64_t arena[SY__MAX_PLAN_DEVICES];
    cr_assert_eq(sy__memplan_pack(&it, 1, 10, 64, arena), SY_E_INVALID_ARG);
    it.last = 10;
    cr_assert_eq(sy__memplan_pack(&it, 1, 10, 64, arena), SY_E_INVALID_ARG);
    it.last = 4;
    cr_assert_eq(sy__memplan_pack(&it, 1, 10, 48, arena), SY_E_INVALID_ARG);
    cr_assert_eq(sy__memplan_pack(&it, 1, 10, 64, arena), SY_OK);
    cr_assert_eq(arena[0], 64u);
}

/* Root storage of |t| if the arena holds it (an activation). */
static const sy_tensor *act_root(const sy_graph *g, const sy_tensor *t)
{
    const sy_tensor *r = t->view_src ? t->view_src : t;
    return sy_graph_producer(g, r) && sy_tensor_nbytes(r) > 0 ? r : NULL;
}

/* Checks that the item holding |r| as seen from |slot| covers |tick|. */
static void assert_covered(const sy__memplan *mp, const sy_tensor *r, uint32_t slot, uint32_t tick,
                           const char *what)
{
    uint32_t i = mp->item_of[(size_t)r->id * mp->D + slot];
    cr_assert_neq(i, SY__NONE, "%s: '%s' used on slot %u at tick %u has no storage", what, r->name,
                  slot, tick);
    const sy__mp_item *it = &mp->items[i];
    cr_assert(it->first <= tick && tick <= it->last,
              "%s: '%s' used on slot %u at tick %u, its buffer lives [%u, %u]", what, r->name,
              slot, tick, it->first, it->last);
    cr_assert_eq(it->tensor, r->id);
}

/* The last position in |si| of the window that starts at |q|: two or more
 * matmuls of one input and the ropes, KV writes and views right after
 * them, which a device may run as one (plugins/cpu/cpu_kernels_fused.c);
 * |q| when none starts there. */
static uint32_t fused_window_end(const sy_graph *g, const sy_plan_step_info *si, uint32_t q)
{
    const sy_node *n = sy_graph_node(g, si->nodes[q]);
    uint32_t end = q;
    while (n->op == SY_OP_MATMUL && end + 1 < si->n_nodes) {
        const sy_node *m = sy_graph_node(g, si->nodes[end + 1]);
        if (m->op != SY_OP_MATMUL || m->inputs[1] != n->inputs[1])
            break;
        end++;
    }
    if (end == q)
        return q;
    while (end + 1 < si->n_nodes) {
        const sy_node *m = sy_graph_node(g, si->nodes[end + 1]);
        if (!sy_op_is_view(m->op) && m->op != SY_OP_ROPE && m->op != SY_OP_KV_WRITE)
            break;
        end++;
    }
    return end;
}

/* Plans |g|'s arenas under |plan| and checks every use against them, with
 * the ticks counted again from the public step list; inside a fused
 * window, every buffer a node of it touches lives to the window's end
 * (so none takes bytes another node of it still reads or writes). */
static void check_graph_plan(const sy_graph *g, const sy_plan *plan, const uint8_t *alias_to,
                             const char *what, uint64_t *out_arena, uint64_t *out_peak)
{
    sy__memplan mp;
    char err[256];
    cr_assert_eq(sy__memplan_build(g, plan, alias_to, SY__MEMPLAN_ALIGN, &mp, err, sizeof err),
                 SY_OK, "%s: %s", what, err);
    assert_no_overlap(mp.items, mp.n_items, mp.arena, SY__MEMPLAN_ALIGN, what);
    /* Own storage starts with a write: a node's output or a transfer in. */
    uint8_t *written = calloc(mp.n_items + 1, 1);
    uint32_t tick = 0, D = mp.D;
    for (uint32_t k = 0; k < sy_plan_step_count(plan); k++) {
        sy_plan_step_info si;
        cr_assert_eq(sy_plan_query_step(plan, k, &si), SY_OK);
        uint32_t slot = 0;
        while (slot < D && plan->dev_index[slot] != si.device)
            slot++;
        if (si.kind == SY_PLAN_STEP_TRANSFER) {
            const sy_tensor *r = act_root(g, sy_graph_tensor(g, si.tensor));
            if (r) {
                uint32_t src = 0;
                while (src < D && plan->dev_index[src] != si.src_device)
                    src++;
                assert_covered(&mp, r, src, tick, what);
                assert_covered(&mp, r, slot, tick, what);
                uint32_t i = mp.item_of[(size_t)r->id * D + slot];
                if (mp.items[i].slot != slot)
                    cr_assert(alias_to[src] >> slot & 1u, "%s: '%s' mapped where it may not be",
                              what, r->name);
                written[i] = 1;
            }
            tick++;
            continue;
        }
        uint32_t window_last = 0; /* its tick; 0: none */
        for (uint32_t q = 0; q < si.n_nodes; q++, tick++) {
            if (tick > window_last || window_last == 0) {
                const uint32_t end = fused_window_end(g, &si, q);
                window_last = end > q ? tick + (end - q) : 0;
            }
            const sy_node *n = sy_graph_node(g, si.nodes[q]);
            for (uint32_t j = 0; j <= n->n_inputs && window_last; j++) {
                const sy_tensor *r = act_root(g, j < n->n_inputs ? n->inputs[j] : n->output);
                if (r)
                    assert_covered(&mp, r, slot, window_last, what);
            }
            for (uint32_t j = 0; j < n->n_inputs; j++) {
                const sy_tensor *r = act_root(g, n->inputs[j]);
                if (!r)
                    continue;
                assert_covered(&mp, r, slot, tick, what);
                cr_assert(written[mp.item_of[(size_t)r->id * D + slot]],
                          "%s: '%s' read on slot %u before anything wrote it", what, r->name,
                          slot);
            }
            const sy_tensor *r = act_root(g, n->output);
            if (r) {
                assert_covered(&mp, r, slot, tick, what);
                written[mp.item_of[(size_t)r->id * D + slot]] = 1;
            }
        }
    }
    for (uint32_t i = 0; i < sy_graph_tensor_count(g); i++) {
        const sy_tensor *t = sy_graph_tensor(g, i);
        const sy_node *prod = sy_graph_producer(g, t);
        const sy_tensor *r = act_root(g, t);
        if (r && prod && sy_graph_is_output(g, t))
            assert_covered(&mp, r, plan->nodes[prod->id].dev, tick, what);
    }
    for (uint32_t d = 0; d < D; d++) {
        cr_assert_eq(mp.live_peak[d],
                     live_peak(mp.items, mp.n_items, d, mp.n_ticks, SY__MEMPLAN_ALIGN), "%s",
                     what);
        cr_assert_geq(mp.arena[d], mp.live_peak[d], "%s", what);
        cr_assert_leq(mp.arena[d], mp.total[d], "%s", what);
        if (out_arena)
            out_arena[d] = mp.arena[d];
        if (out_peak)
            out_peak[d] = mp.live_peak[d];
    }
    free(written);
    sy__memplan_free(&mp);
}

Test(memplan, plans_of_random_graphs_under_random_pins_keep_every_use_in_its_buffer)
{
    sy_runtime *rt = st_runtime();
    sy_planner *pl;
    cr_assert_eq(sy_planner_create(rt, &pl), SY_OK);
    uint64_t seed = st_fresh_seed();
    static const char *const devs[] = {"cpu", "testdev", "opaquedev"};
    for (uint32_t trial = 0; trial < 60; trial++) {
        uint64_t rng = seed + trial;
        st_graph sg;
        st_random_graph(&sg, st_range(&rng, 1, 24), trial % 2 == 1, &rng);
        char texts[64][SY_NAME_MAX + 16];
        const char *pins[64];
        uint32_t n_pins = 0;
        for (uint32_t i = 0; i < sy_graph_node_count(sg.g) && n_pins < 64; i++) {
            const sy_node *n = sy_graph_node(sg.g, i);
            if (sy_op_is_view(n->op))
                continue;
            uint32_t d = n->op == SY_OP_ARGMAX ? 0 : st_range(&rng, 0, 2);
            snprintf(texts[n_pins], sizeof texts[n_pins], "%s=%s", n->name, devs[d]);
            pins[n_pins] = texts[n_pins];
            n_pins++;
        }
        sy_plan_options o;
        sy_plan_options_init(&o);
        o.pins = pins;
        o.n_pins = n_pins;
        sy_plan *plan = st_plan(pl, sg.g, &o);
        /* Either mapping rule: cpu and testdev share host memory. */
        uint8_t copy_all[SY__MAX_PLAN_DEVICES] = {0}, map_shared[SY__MAX_PLAN_DEVICES] = {0};
        map_shared[ST_CPU] = 1u << ST_TESTDEV;
        map_shared[ST_TESTDEV] = 1u << ST_CPU;
        char what[96];
        snprintf(what, sizeof what, "seed %llu trial %u", (unsigned long long)seed, trial);
        check_graph_plan(sg.g, plan, copy_all, what, NULL, NULL);
        check_graph_plan(sg.g, plan, map_shared, what, NULL, NULL);
        sy_plan_release(plan);
        st_graph_free(&sg);
    }
    sy_planner_destroy(pl);
    sy_runtime_destroy(rt);
    st_check_leaks();
}

/* How far above the most bytes live at once a decoder's arena may be.
 * Greedy packing does not always reach that bound: in Gemma 3's 512-token
 * prefill with its elementwise ops on opaquedev, the 2 MiB buffers q,
 * q_norm.rms, q_norm and q.rope overlap pairwise in a chain and the 0.5
 * MiB k buffers interleave with them; both greedy orders put the 2 MiB
 * chain at 0 and 2 MiB and leave gaps the k buffers cannot use, 6.25 MiB
 * where 5.75 MiB are live at once (8.7% above).  The optimum of those nine
 * buffers is the bound itself (exhaustive search over placement orders,
 * staggered offsets), so the slack is the heuristic's, measured: every
 * other real and synthetic decoder step here packs at the bound. */
#define ARENA_SLACK 1.10

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

Test(memplan, decoder_steps_pack_close_to_the_bytes_live_at_once)
{
    sy_runtime *rt = st_runtime();
    sy_planner *pl = planner_with_profiles(rt);
    uint8_t alias_to[SY__MAX_PLAN_DEVICES] = {0};
    alias_to[ST_CPU] = 1u << ST_TESTDEV;
    alias_to[ST_TESTDEV] = 1u << ST_CPU;
    for (uint32_t k = 0; k < 4; k++) {
        st_decoder_shape sh = {.n_layer = 30, .n_embd = 576, .n_head = 9, .n_head_kv = 3,
                               .n_ff = 1536, .n_vocab = 49152, .n_ctx = 1024,
                               .n_tokens = k % 2 ? 1 : 64, .n_past = k % 2 ? 100 : 0,
                               .kv_type = SY_DTYPE_F16, .with_data = false};
        st_graph sg;
        st_decoder_graph(&sg, &sh, 1);
        sy_plan_options o;
        sy_plan_options_init(&o);
        o.devices = k < 2 ? "cpu" : NULL;
        sy_plan *plan = st_plan(pl, sg.g, &o);
        uint64_t arena[SY__MAX_PLAN_DEVICES] = {0}, peak[SY__MAX_PLAN_DEVICES] = {0};
        check_graph_plan(sg.g, plan, alias_to, o.devices ? "cpu" : "three devices", arena, peak);
        /* Measured: every slot at the bound exactly (ARENA_SLACK). */
        for (uint32_t d = 0; d < plan->n_dev; d++)
            cr_assert_leq((double)arena[d], ARENA_SLACK * (double)peak[d],
                          "T=%u slot %u: arena %llu, %llu bytes live at once", sh.n_tokens, d,
                          (unsigned long long)arena[d], (unsigned long long)peak[d]);
        sy_plan_release(plan);
        st_graph_free(&sg);
    }
    sy_planner_destroy(pl);
    sy_runtime_destroy(rt);
    st_check_leaks();
}

/* The real models (tools/fetch-models.sh), when present: a 512-token
 * prefill chunk and a decode step, on the cpu and on three devices. */
Test(memplan, real_model_steps_pack_close_to_the_bytes_live_at_once)
{
    static const char *const models[] = {"SmolLM2-135M-Instruct.Q4_1.gguf",
                                         "gemma-3-270m-q4_k_m.gguf"};
    sy_runtime *rt = st_runtime();
    sy_planner *pl = planner_with_profiles(rt);
    uint8_t alias_to[SY__MAX_PLAN_DEVICES] = {0};
    alias_to[ST_CPU] = 1u << ST_TESTDEV;
    alias_to[ST_TESTDEV] = 1u << ST_CPU;
    uint32_t tested = 0;
    for (uint32_t mi = 0; mi < 2; mi++) {
        char path[512];
        snprintf(path, sizeof path, "%s/models/%s", SY_TEST_SOURCE_DIR, models[mi]);
        if (access(path, R_OK) != 0)
            continue;
        sy_model *m = NULL;
        cr_assert_eq(sy_model_open(rt, path, &m), SY_OK, "%s", sy_runtime_last_error(rt));
        uint32_t L = m->hp.n_layer, T = 512;
        void **kv = calloc(2 * L, sizeof *kv);
        int32_t *ids = calloc(T, sizeof *ids), *pos = calloc(T, sizeof *pos);
        for (uint32_t k = 0; k < 4; k++) {
            sy_step_desc step = {.n_tokens = k % 2 ? 1 : T, .n_past = k % 2 ? T : 0,
                                 .tokens = ids, .positions = pos, .kv_k = kv, .kv_v = kv + L,
                                 .kv_type = SY_DTYPE_F16, .n_ctx = 2 * T};
            sy_graph *g = NULL;
            char err[256];
            cr_assert_eq(sy__model_build_graph(m, &step, &g, err, sizeof err), SY_OK, "%s", err);
            sy_plan_options o;
            sy_plan_options_init(&o);
            o.devices = k < 2 ? "cpu" : NULL;
            sy_plan *plan = st_plan(pl, g, &o);
            uint64_t arena[SY__MAX_PLAN_DEVICES] = {0}, peak[SY__MAX_PLAN_DEVICES] = {0};
            char what[128];
            snprintf(what, sizeof what, "%s T=%u on %s", models[mi], step.n_tokens,
                     o.devices ? o.devices : "three devices");
            check_graph_plan(g, plan, alias_to, what, arena, peak);
            for (uint32_t d = 0; d < plan->n_dev; d++)
                cr_assert_leq((double)arena[d], ARENA_SLACK * (double)peak[d],
                              "%s slot %u: arena %llu, %llu bytes live at once", what, d,
                              (unsigned long long)arena[d], (unsigned long long)peak[d]);
            sy_plan_release(plan);
            sy_graph_destroy(g);
        }
        free(kv);
        free(ids);
        free(pos);
        sy_model_close(m);
        tested++;
    }
    sy_planner_destroy(pl);
    sy_runtime_destroy(rt);
    st_check_leaks();
    if (tested == 0)
        cr_skip_test("no model fetched (tools/fetch-models.sh)");
}
