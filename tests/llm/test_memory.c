/* A session's memory: the plan made before anything is allocated
 * (weights, the KV cache at the whole context for every KV type, the
 * activation arena, the overhead), budgets refused with the numbers,
 * --fit's choice of context and KV type, and what a running session
 * reports.  Models come from `switchyard synth`. */
#include <criterion/criterion.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include "switchyard/switchyard.h"

#define MIB (1024.0 * 1024.0)

typedef struct synth_model {
    sy_runtime *rt;
    sy_model *m;
    char dir[64];
    char path[128];
} synth_model;

/* Writes a random llama with `switchyard synth` and opens it on the cpu. */
static void open_synth(synth_model *o, const char *dims, const char *type, unsigned ctx)
{
    memset(o, 0, sizeof *o);
    snprintf(o->dir, sizeof o->dir, "/tmp/sy-memory-XXXXXX");
    cr_assert_not_null(mkdtemp(o->dir));
    snprintf(o->path, sizeof o->path, "%s/m.gguf", o->dir);
    char cmd[1024];
    snprintf(cmd, sizeof cmd,
             "'%s' synth --arch llama --dims %s --type %s --ctx %u --seed 7 -o '%s' >/dev/null",
             SY_SWITCHYARD_BIN, dims, type, ctx, o->path);
    cr_assert_eq(system(cmd), 0, "%s failed", cmd);
    sy_runtime_options ro;
    sy_runtime_options_init(&ro);
    ro.plugins = "cpu";
    cr_assert_eq(sy_runtime_create(&ro, &o->rt), SY_OK);
    cr_assert_eq(sy_model_open(o->rt, o->path, &o->m), SY_OK, "%s",
                 sy_runtime_last_error(o->rt));
}

static void close_synth(synth_model *o)
{
    sy_model_close(o->m);
    sy_runtime_destroy(o->rt);
    unlink(o->path);
    rmdir(o->dir);
}

static sy_session_options options(uint32_t n_ctx, sy_dtype kv_type)
{
    sy_session_options so;
    sy_session_options_init(&so);
    so.n_ctx = n_ctx;
    so.kv_type = kv_type;
    so.devices = "cpu";
    return so;
}

static sy_memory_plan plan_of(synth_model *o, const sy_session_options *so)
{
    sy_memory_plan mp;
    sy_memory_plan_init(&mp);
    cr_assert_eq(sy_model_plan_memory(o->m, so, &mp), SY_OK, "%s", sy_runtime_last_error(o->rt));
    cr_assert_geq(mp.n_devices, 1u);
    cr_assert_str_eq(mp.devices[0].name, "cpu");
    return mp;
}

Test(memory, a_plan_counts_weights_the_whole_kv_cache_the_arena_and_overhead)
{
    synth_model o;
    open_synth(&o, "2,64,128,2,2,512", "f32", 2048);
    sy_model_info info;
    cr_assert_eq(sy_model_query_info(o.m, &info), SY_OK);
    static const sy_dtype types[] = {SY_DTYPE_F32, SY_DTYPE_F16, SY_DTYPE_Q8_0, SY_DTYPE_Q4_0};
    for (uint32_t k = 0; k < 4; k++) {
        sy_session_options so = options(1024, types[k]);
        sy_memory_plan mp = plan_of(&o, &so);
        const sy_memory_device *cpu = &mp.devices[0];
        cr_assert_eq(mp.n_ctx, 1024u);
        cr_assert_eq(mp.kv_type, types[k]);
        cr_assert_eq(mp.n_batch, 512u);
        cr_assert_eq(cpu->weight_bytes, info.weight_bytes);
        /* K and V of 2 layers, 1024 positions of 2 heads of 32: whole
         * blocks of the type's block size. */
        uint64_t row = 2 * 32 / sy_dtype_block_size(types[k]) * sy_dtype_type_size(types[k]);
        cr_assert_eq(cpu->kv_bytes, 2ull * 2 * 1024 * row, "%s", sy_dtype_name(types[k]));
        uint64_t kv = 0;
        cr_assert_eq(sy_model_query_kv_bytes(o.m, &so, &kv), SY_OK);
        cr_assert_eq(cpu->kv_bytes, kv);
        cr_assert_gt(cpu->arena_bytes, 0u);
        cr_assert_gt(cpu->overhead_bytes, 0u);
        cr_assert_eq(cpu->peak_bytes,
                     cpu->weight_bytes + cpu->kv_bytes + cpu->arena_bytes + cpu->overhead_bytes);
        cr_assert_eq(cpu->budget_bytes, 0u);
        cr_assert_not(mp.fitted);
    }
    close_synth(&o);
}

Test(memory, a_budget_below_the_predicted_peak_is_refused_with_the_numbers)
{
    synth_model o;
    open_synth(&o, "2,64,128,2,2,512", "f32", 2048);
    sy_session_options so = options(2048, SY_DTYPE_F16);
    sy_memory_plan mp = plan_of(&o, &so);
    uint64_t budget = mp.devices[0].peak_bytes - (1u << 20);
    char mem[64];
    snprintf(mem, sizeof mem, "cpu=%llu", (unsigned long long)budget);
    const char *mems[] = {mem};
    so.mem = mems;
    so.n_mem = 1;
    sy_session *s = NULL;
    cr_assert_eq(sy_session_create(o.m, &so, &s), SY_E_LIMIT);
    cr_assert_null(s);
    const char *err = sy_runtime_last_error(o.rt);
    char want[96];
    snprintf(want, sizeof want, " MiB on cpu, budget %.1f MiB (weights %.1f MiB, KV %.1f MiB, ",
             budget / MIB, mp.devices[0].weight_bytes / MIB, mp.devices[0].kv_bytes / MIB);
    cr_assert(strncmp(err, "model needs ", 12) == 0 && strstr(err, want), "%s", err);
    /* The overhead is measured afresh (the resident set moves between
     * calls, by megabytes under AddressSanitizer's quarantine): the total
     * is over the budget, not necessarily the first plan's. */
    double needs = strtod(err + 12, NULL);
    cr_assert(needs > budget / MIB, "%s", err);
    sy_memory_plan refused;
    sy_memory_plan_init(&refused);
    cr_assert_eq(sy_model_plan_memory(o.m, &so, &refused), SY_E_LIMIT);
    cr_assert_eq(refused.devices[0].budget_bytes, budget);
    /* A budget that holds the peak starts the session. */
    snprintf(mem, sizeof mem, "cpu=%llu", (unsigned long long)mp.devices[0].peak_bytes * 2);
    cr_assert_eq(sy_session_create(o.m, &so, &s), SY_OK, "%s", sy_runtime_last_error(o.rt));
    sy_session_destroy(s);
    close_synth(&o);
}

/* A model whose KV cache dominates its memory: 32 layers of 8 KV heads of
 * 64, 64 KiB per position in f16, and 21 MiB of Q4_0 weights. */
#define KV_HEAVY "32,512,128,8,8,512"
#define KV_HEAVY_TYPE "q4_0"

Test(memory, fit_picks_the_largest_context_that_fits_the_budget)
{
    synth_model o;
    open_synth(&o, KV_HEAVY, KV_HEAVY_TYPE, 8192);
    sy_session_options so = options(4096, SY_DTYPE_F16);
    sy_memory_plan full = plan_of(&o, &so);
    so.n_ctx = 1024;
    sy_memory_plan small = plan_of(&o, &so);
    /* Halfway between the peaks at 1024 and 4096 positions: about 2560. */
    uint64_t budget = (full.devices[0].peak_bytes + small.devices[0].peak_bytes) / 2;
    char mem[64];
    snprintf(mem, sizeof mem, "cpu=%llu", (unsigned long long)budget);
    const char *mems[] = {mem};
    so = options(4096, SY_DTYPE_F16);
    so.mem = mems;
    so.n_mem = 1;
    so.fit = true;
    sy_memory_plan mp;
    sy_memory_plan_init(&mp);
    cr_assert_eq(sy_model_plan_memory(o.m, &so, &mp), SY_OK, "%s", sy_runtime_last_error(o.rt));
    cr_assert(mp.fitted);
    cr_assert_eq(mp.kv_type, SY_DTYPE_F16, "the KV type is kept while a context fits");
    cr_assert(mp.n_ctx > 1024 && mp.n_ctx < 4096 && mp.n_ctx % 256 == 0, "n_ctx %u", mp.n_ctx);
    cr_assert_leq(mp.devices[0].peak_bytes, budget);
    /* 256 more positions would not have fitted (same overhead measure). */
    uint64_t step = mp.devices[0].kv_bytes / mp.n_ctx * 256;
    cr_assert_gt(mp.devices[0].peak_bytes + step, budget);
    cr_assert(strstr(mp.note, "context 4096 -> ") && strstr(mp.note, "KV f16 -> f16"), "%s",
              mp.note);
    /* The session starts with that context. */
    sy_session *s = NULL;
    cr_assert_eq(sy_session_create(o.m, &so, &s), SY_OK, "%s", sy_runtime_last_error(o.rt));
    sy_memory_plan got;
    sy_memory_plan_init(&got);
    cr_assert_eq(sy_session_query_memory(s, &got, NULL), SY_OK);
    cr_assert(got.fitted);
    cr_assert_leq(got.devices[0].peak_bytes, budget);
    int32_t tok = 1;
    for (uint32_t i = 0; i < got.n_ctx; i += 64)
        cr_assert_eq(sy_session_eval(s, &tok, 1, false, NULL), SY_OK);
    sy_session_destroy(s);
    close_synth(&o);
}

Test(memory, fit_takes_a_smaller_kv_type_when_no_context_fits)
{
    synth_model o;
    open_synth(&o, KV_HEAVY, KV_HEAVY_TYPE, 8192);
    sy_session_options so = options(256, SY_DTYPE_F16);
    sy_memory_plan least = plan_of(&o, &so);
    /* f16 at 256 positions is 16 MiB of KV, q8_0 8.5 and q4_0 4.5: a budget
     * 4 MiB under the f16 peak leaves room for a smaller type only (q8_0
     * unless the overhead grew by more than 3.5 MiB since, as it can under
     * the sanitizers). */
    uint64_t budget = least.devices[0].peak_bytes - (4u << 20);
    char mem[64];
    snprintf(mem, sizeof mem, "cpu=%llu", (unsigned long long)budget);
    const char *mems[] = {mem};
    so = options(4096, SY_DTYPE_F16);
    so.mem = mems;
    so.n_mem = 1;
    so.fit = true;
    sy_memory_plan mp;
    sy_memory_plan_init(&mp);
    cr_assert_eq(sy_model_plan_memory(o.m, &so, &mp), SY_OK, "%s", sy_runtime_last_error(o.rt));
    cr_assert(mp.fitted);
    cr_assert(mp.kv_type == SY_DTYPE_Q8_0 || mp.kv_type == SY_DTYPE_Q4_0, "%s", mp.note);
    cr_assert_geq(mp.n_ctx, 256u);
    cr_assert_leq(mp.devices[0].peak_bytes, budget);
    /* With the same overhead, f16 at 256 positions would not have fitted. */
    const sy_memory_device *r = &mp.devices[0];
    uint64_t f16_at_256 = r->peak_bytes - r->kv_bytes + 2ull * 32 * 256 * 8 * 64 * 2;
    cr_assert_gt(f16_at_256, budget, "%s", mp.note);
    /* Nothing fits a budget below the weights: refused, saying so. */
    snprintf(mem, sizeof mem, "cpu=%llu", (unsigned long long)mp.devices[0].weight_bytes / 2);
    cr_assert_eq(sy_model_plan_memory(o.m, &so, &mp), SY_E_LIMIT);
    const char *err = sy_runtime_last_error(o.rt);
    cr_assert(strstr(err, "model needs ") && strstr(err, "--fit found nothing smaller that fits") &&
                  strstr(err, "q4_0 KV"),
              "%s", err);
    close_synth(&o);
}

Test(memory, a_running_session_reports_its_arena_and_the_process_peak)
{
    synth_model o;
    open_synth(&o, "2,64,128,2,2,512", "f32", 2048);
    sy_session_options so = options(512, SY_DTYPE_F16);
    sy_session *s = NULL;
    cr_assert_eq(sy_session_create(o.m, &so, &s), SY_OK, "%s", sy_runtime_last_error(o.rt));
    int32_t ids[64];
    for (uint32_t i = 0; i < 64; i++)
        ids[i] = (int32_t)(i * 7 % 512);
    cr_assert_eq(sy_session_eval(s, ids, 64, false, NULL), SY_OK);
    cr_assert_eq(sy_session_eval(s, ids, 1, false, NULL), SY_OK);
    sy_memory_plan mp;
    sy_memory_usage use;
    sy_memory_plan_init(&mp);
    sy_memory_usage_init(&use);
    cr_assert_eq(sy_session_query_memory(s, &mp, &use), SY_OK);
    cr_assert_gt(mp.devices[0].peak_bytes, 0u);
    cr_assert_gt(use.host_rss_bytes, 0u);
    cr_assert_geq(use.host_peak_bytes, use.host_rss_bytes);
    cr_assert_eq(use.n_devices, 1u);
    cr_assert_str_eq(use.devices[0].name, "cpu");
    /* The cpu's arena, grown by the 64-token step and kept: no more than
     * the plan's, which is for a full 512-token chunk. */
    cr_assert_gt(use.devices[0].current_bytes, 0u);
    cr_assert_eq(use.devices[0].peak_bytes, use.devices[0].current_bytes);
    cr_assert_leq(use.devices[0].peak_bytes, mp.devices[0].arena_bytes);
    sy_memory_usage bad;
    memset(&bad, 0, sizeof bad);
    cr_assert_eq(sy_session_query_memory(s, NULL, &bad), SY_E_INVALID_ARG);
    sy_session_destroy(s);
    close_synth(&o);
}
