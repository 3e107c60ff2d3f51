/* Conformance of the CPU plugin's attention and KV writes, as test_cpu.c
 * does for the other ops: every K/V cache dtype, GQA, windows, prefill
 * blocks, key chunks of a long decode, and the forms that read their
 * position at run time (types.h), run through the runtime on the "cpu"
 * device under every inner-kernel table and thread count of cpu_case.c
 * and compared with the reference kernels. */
#include <criterion/criterion.h>
#include <math.h>
#include <stdint.h>

#include "cpu_case.h"

/* ------------------------------------------------------------ attention */

static void check_attention_gqa(sy_dtype kt, sy_dtype vt, int64_t hq, int64_t hkv, int64_t d,
                                int64_t t, int64_t s, int64_t n_past, int64_t window)
{
    tcase tc;
    tc_begin(&tc, "attention k=%s v=%s Hq=%lld Hkv=%lld D=%lld T=%lld S=%lld n_past=%lld window=%lld",
             sy_dtype_name(kt), sy_dtype_name(vt), (long long)hq, (long long)hkv, (long long)d,
             (long long)t, (long long)s, (long long)n_past, (long long)window);
    sy_tensor *in[3] = {tc_input(&tc, "q", SY_DTYPE_F32, d, hq, t, 1),
                        tc_input(&tc, "k", kt, d, hkv, s, 1), tc_input(&tc, "v", vt, d, hkv, s, 1)};
    sy_op_params p = {.i = {n_past, window}, .f = {0.125f * 3.0f}};
    tc_output(&tc, tc_node(&tc, SY_OP_ATTENTION, "o", in, 3, &p));
    tc_run(&tc, (tol){2e-5, 2e-5});
    tc_end(&tc);
}

static void check_attention_d(sy_dtype kt, sy_dtype vt, int64_t d, int64_t t, int64_t s,
                              int64_t n_past, int64_t window)
{
    check_attention_gqa(kt, vt, 8, 2, d, t, s, n_past, window);
}

static void check_attention(sy_dtype kt, sy_dtype vt, int64_t t, int64_t s, int64_t n_past,
                            int64_t window)
{
    check_attention_d(kt, vt, 64, t, s, n_past, window);
}

static void check_attention_all(sy_dtype kt, sy_dtype vt)
{
    /* A head size off the vector width, key counts off the 4-row blocks. */
    check_attention_d(kt, vt, 20, 1, 7, 6, 0);
    check_attention_d(kt, vt, 20, 3, 11, 8, 0);
    check_attention(kt, vt, 1, 300, 299, 0);  /* decode against a long cache */
    check_attention(kt, vt, 1, 300, 150, 0);  /* cache rows past the query masked */
    check_attention(kt, vt, 6, 6, 0, 0);      /* causal prefill */
    check_attention(kt, vt, 4, 40, 36, 16);   /* sliding window */
    check_attention(kt, vt, 3, 10, 20, 2);    /* window past the end of the cache */
}

Test(cpu_attention, matches_the_reference_with_f32_kv) { check_attention_all(SY_DTYPE_F32, SY_DTYPE_F32); }
Test(cpu_attention, matches_the_reference_with_f16_kv) { check_attention_all(SY_DTYPE_F16, SY_DTYPE_F16); }
Test(cpu_attention, matches_the_reference_with_mixed_kv)
{
    check_attention_all(SY_DTYPE_F16, SY_DTYPE_F32);
    check_attention_all(SY_DTYPE_F32, SY_DTYPE_F16);
}

/* Quantised caches: head sizes are whole 32-blocks; key ranges cross the
 * kernel's 32-row dequantisation tiles and end off them. */
static void check_attention_quantized(sy_dtype kt, sy_dtype vt)
{
    check_attention(kt, vt, 1, 300, 299, 0);  /* decode: ten tiles, the last one partial */
    check_attention(kt, vt, 1, 300, 150, 0);  /* rows past the query masked */
    check_attention(kt, vt, 6, 6, 0, 0);      /* causal prefill inside one tile */
    check_attention(kt, vt, 4, 80, 70, 33);   /* sliding window starting mid-tile */
    check_attention(kt, vt, 3, 10, 20, 2);    /* window past the end of the cache */
    check_attention_d(kt, vt, 256, 2, 70, 68, 0); /* Gemma 3's head size */
    check_attention_d(kt, vt, 32, 5, 40, 35, 0);  /* one block per row */
}

Test(cpu_attention, matches_the_reference_with_q8_0_kv) { check_attention_quantized(SY_DTYPE_Q8_0, SY_DTYPE_Q8_0); }
Test(cpu_attention, matches_the_reference_with_q4_0_kv) { check_attention_quantized(SY_DTYPE_Q4_0, SY_DTYPE_Q4_0); }
/* A tile of the cache (dequantised once when quantised) serves every query
 * head of every kv head: groups of 1, 3 and 18 heads. */
Test(cpu_attention, shares_dequantized_tiles_across_query_heads)
{
    check_attention_gqa(SY_DTYPE_Q8_0, SY_DTYPE_Q8_0, 18, 1, 64, 1, 100, 99, 0);
    check_attention_gqa(SY_DTYPE_Q4_0, SY_DTYPE_Q4_0, 9, 3, 64, 3, 70, 67, 0);
    check_attention_gqa(SY_DTYPE_Q8_0, SY_DTYPE_F16, 4, 4, 32, 2, 40, 38, 0);
    check_attention_gqa(SY_DTYPE_F16, SY_DTYPE_Q4_0, 18, 1, 256, 2, 50, 48, 20);
}

Test(cpu_attention, matches_the_reference_with_quantized_k_or_v_only)
{
    check_attention_quantized(SY_DTYPE_Q8_0, SY_DTYPE_F16);
    check_attention_quantized(SY_DTYPE_F32, SY_DTYPE_Q4_0);
}

/* With fewer query tokens than lanes want, the key range is cut into
 * chunks of 128 positions or more whose partial softmaxes are merged
 * (2 and 3 threads): chunks that the causal mask or the window leaves
 * empty or cuts mid-tile, two tokens whose ranges end apart, and every
 * K/V dtype. */
Test(cpu_attention, merges_the_key_chunks_of_a_long_decode)
{
    check_attention_gqa(SY_DTYPE_F16, SY_DTYPE_F16, 9, 3, 64, 1, 700, 699, 0);
    check_attention_gqa(SY_DTYPE_F32, SY_DTYPE_F32, 8, 2, 64, 1, 600, 400, 0);
    check_attention_gqa(SY_DTYPE_F16, SY_DTYPE_F16, 8, 2, 64, 1, 650, 649, 301);
    check_attention_gqa(SY_DTYPE_F16, SY_DTYPE_F32, 32, 4, 64, 2, 530, 518, 0);
    check_attention_gqa(SY_DTYPE_Q8_0, SY_DTYPE_Q4_0, 9, 3, 64, 1, 520, 519, 0);
    check_attention_gqa(SY_DTYPE_F16, SY_DTYPE_Q8_0, 4, 1, 256, 1, 300, 299, 0);
    check_attention_gqa(SY_DTYPE_F16, SY_DTYPE_F16, 8, 2, 20, 1, 400, 399, 0);
}

/* Prefill runs blocks of up to 4 tokens against each tile: blocks that end
 * short, tokens of one block with different causal and window ranges. */
Test(cpu_attention, runs_blocks_of_prefill_tokens_against_shared_tiles)
{
    check_attention_gqa(SY_DTYPE_F16, SY_DTYPE_F16, 9, 3, 64, 40, 40, 0, 0);
    check_attention_gqa(SY_DTYPE_F16, SY_DTYPE_F16, 8, 2, 64, 37, 100, 63, 20);
    check_attention_gqa(SY_DTYPE_Q4_0, SY_DTYPE_F32, 8, 2, 32, 33, 90, 50, 7);
}

/* n_past from an input (types.h): the whole cache is given and its rows
 * past the last query hold NaN, which neither side may read. */
static void check_attention_run_time(sy_dtype kvt, int64_t t, int64_t s, int64_t n_past,
                                     int64_t window)
{
    tcase tc;
    tc_begin(&tc, "attention with n_past %lld at run time, k=v=%s T=%lld S=%lld window=%lld",
             (long long)n_past, sy_dtype_name(kvt), (long long)t, (long long)s,
             (long long)window);
    const int64_t d = 64, hkv = 2;
    sy_tensor *k = tc_input(&tc, "k", kvt, d, hkv, s, 1), *v = tc_input(&tc, "v", kvt, d, hkv, s, 1);
    for (int64_t r = n_past + t; r < s; r++)
        for (int64_t i = 0; i < d * hkv; i++) {
            if (kvt == SY_DTYPE_F32) {
                ((float *)k->data)[r * d * hkv + i] = NAN;
                ((float *)v->data)[r * d * hkv + i] = NAN;
            } else {
                ((uint16_t *)k->data)[r * d * hkv + i] = 0x7e00; /* f16 NaN */
                ((uint16_t *)v->data)[r * d * hkv + i] = 0x7e00;
            }
        }
    int32_t *np = tc_alloc(&tc, sizeof *np);
    *np = (int32_t)n_past;
    const int64_t one[4] = {1, 1, 1, 1};
    sy_tensor *in[4] = {tc_input(&tc, "q", SY_DTYPE_F32, d, 8, t, 1), k, v,
                        tc_leaf(&tc, "n_past", SY_DTYPE_I32, one, SY_ROLE_INPUT, np)};
    sy_op_params p = {.i = {0, window}, .f = {0.375f}};
    tc_output(&tc, tc_node(&tc, SY_OP_ATTENTION, "o", in, 4, &p));
    tc_run(&tc, (tol){2e-5, 2e-5});
    tc_end(&tc);
}

Test(cpu_attention, reads_n_past_at_run_time_and_no_row_after_the_queries)
{
    check_attention_run_time(SY_DTYPE_F32, 1, 64, 0, 0);
    check_attention_run_time(SY_DTYPE_F16, 1, 600, 300, 0); /* key chunks on 2 lanes */
    check_attention_run_time(SY_DTYPE_F16, 1, 600, 599, 100);
    check_attention_run_time(SY_DTYPE_F32, 5, 40, 17, 0);
}

Test(cpu_attention, fails_an_n_past_past_the_cache_at_run_time)
{
    tcase tc;
    tc_begin(&tc, "attention with n_past past the cache");
    int32_t *np = tc_alloc(&tc, sizeof *np);
    *np = 15; /* 15 + 2 queries > 16 rows */
    const int64_t one[4] = {1, 1, 1, 1};
    sy_tensor *in[4] = {tc_input(&tc, "q", SY_DTYPE_F32, 32, 4, 2, 1),
                        tc_input(&tc, "k", SY_DTYPE_F16, 32, 2, 16, 1),
                        tc_input(&tc, "v", SY_DTYPE_F16, 32, 2, 16, 1),
                        tc_leaf(&tc, "n_past", SY_DTYPE_I32, one, SY_ROLE_INPUT, np)};
    sy_op_params p = {.i = {0, 0}, .f = {0.25f}};
    tc_output(&tc, tc_node(&tc, SY_OP_ATTENTION, "o", in, 4, &p));
    tc_run_expect(&tc, TOL_EXACT, SY_E_INVALID_ARG);
    tc_end(&tc);
}

/* ------------------------------------------------------------- kv_write */

static void check_kv_write(sy_dtype cache_type, int64_t d, int64_t h, int64_t c, int64_t start,
                           int64_t t)
{
    tcase tc;
    tc_begin(&tc, "kv_write cache=%s [%lld,%lld,%lld] start=%lld T=%lld", sy_dtype_name(cache_type),
             (long long)d, (long long)h, (long long)c, (long long)start, (long long)t);
    const int64_t cne[4] = {d, h, c, 1};
    sy_tensor *cache = tc_leaf(&tc, "cache", cache_type, cne, SY_ROLE_KV, NULL);
    sy_tensor *in[2] = {cache, tc_input(&tc, "rows", SY_DTYPE_F32, d, h, t, 1)};
    sy_op_params p = {.i = {start}};
    tc_output(&tc, tc_node(&tc, SY_OP_KV_WRITE, "kv", in, 2, &p));
    tc_state(&tc, cache);
    tc_run(&tc, TOL_EXACT);
    tc_end(&tc);
}

static void check_kv_write_run_time(sy_dtype cache_type, int64_t c, int32_t start, int64_t t,
                                    sy_status expect)
{
    tcase tc;
    tc_begin(&tc, "kv_write cache=%s C=%lld start %d at run time T=%lld",
             sy_dtype_name(cache_type), (long long)c, start, (long long)t);
    const int64_t cne[4] = {64, 4, c, 1}, one[4] = {1, 1, 1, 1};
    int32_t *at = tc_alloc(&tc, sizeof *at);
    *at = start;
    sy_tensor *cache = tc_leaf(&tc, "cache", cache_type, cne, SY_ROLE_KV, NULL);
    sy_tensor *in[3] = {cache, tc_input(&tc, "rows", SY_DTYPE_F32, 64, 4, t, 1),
                        tc_leaf(&tc, "start", SY_DTYPE_I32, one, SY_ROLE_INPUT, at)};
    sy_op_params p = {.i = {0}};
    tc_output(&tc, tc_node(&tc, SY_OP_KV_WRITE, "kv", in, 3, &p));
    tc_state(&tc, cache);
    tc_run_expect(&tc, TOL_EXACT, expect);
    tc_end(&tc);
}

Test(cpu_memory, writes_kv_rows_at_a_run_time_start)
{
    static const sy_dtype types[] = {SY_DTYPE_F32, SY_DTYPE_F16, SY_DTYPE_Q8_0, SY_DTYPE_Q4_0};
    for (size_t i = 0; i < sizeof types / sizeof types[0]; i++) {
        check_kv_write_run_time(types[i], 32, 29, 3, SY_OK);
        check_kv_write_run_time(types[i], 32, 0, 1, SY_OK);
        check_kv_write_run_time(types[i], 32, 7, 12, SY_OK);
    }
    check_kv_write_run_time(SY_DTYPE_F16, 32, 30, 3, SY_E_INVALID_ARG);
    check_kv_write_run_time(SY_DTYPE_F16, 32, -1, 1, SY_E_INVALID_ARG);
}

Test(cpu_memory, writes_kv_rows_into_every_cache_dtype)
{
    static const sy_dtype types[] = {SY_DTYPE_F32, SY_DTYPE_F16, SY_DTYPE_Q8_0, SY_DTYPE_Q4_0};
    for (size_t i = 0; i < sizeof types / sizeof types[0]; i++) {
        check_kv_write(types[i], 64, 4, 32, 5, 3);
        check_kv_write(types[i], 64, 4, 32, 29, 3);
        check_kv_write(types[i], 64, 4, 32, 0, 1);
        check_kv_write(types[i], 128, 8, 64, 10, 48);
    }
}
