/* The token tile of a device's matmul (docs/profiles.md, "Token tiles"):
 * kernels that work in tiles of tokens (the CPU's prefill GEMM packs 16
 * columns per panel with AVX-512) cost the same for every token count
 * within one tile, so time rises in steps that a line through a few
 * measured token counts misses (here a 40-token prefill, which costs like
 * 48, read -13..-19% on the line through 8 and 32).  Measured rather than
 * asked for: the plugin ABI has no such field, and what matters is what
 * the device's time does, whichever kernel the plugin picks.
 *
 * One matmul of TUNE_TILE_K x TUNE_TILE_K weights is timed at 2, 4, 8,
 * 16, 32, 33 and 64 tokens, in alternating rounds, each count's fastest
 * round kept (other processes only ever add time: with the median of 3
 * rounds, on a machine loaded 5 over its 2 cores, 33 tokens once read
 * faster than 32 and the tile was lost).  With time a + b * ceil(T / c) * c the step from 32 to 33 tokens
 * is c times the slope between 32 and 64, which gives c (to the nearest
 * power of two up to 32); the tile applies from the smallest power of two
 * that already costs TUNE_TILE_FROM_SHARE of a whole tile (below it the
 * kernel is another one: the CPU's one-column dots). */
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "probe.h"
#include "tune.h"

#define TUNE_TILE_K 1024
#define TUNE_TILE_ROUNDS 5u
#define TUNE_TILE_FROM_SHARE 0.8
/* Below this rise from 32 to 64 tokens time does not follow the tokens
 * (launch- or memory-bound): no tile is read from it. */
#define TUNE_TILE_MIN_RISE 1.2

static const uint32_t tile_tokens[TUNE_TILE_COUNTS] = {2, 4, 8, 16, 32, 33, 64};

/* A one-matmul graph: |dtype| weights, |T| F32 tokens. */
static sy_status tile_graph(sy_dtype dtype, int64_t T, sy_graph **out_g)
{
    const sy_tensor w = {.dtype = dtype, .role = SY_ROLE_WEIGHT, .n_dims = 2,
                         .ne = {TUNE_TILE_K, TUNE_TILE_K, 1, 1}};
    const sy_tensor x = {.dtype = SY_DTYPE_F32, .role = SY_ROLE_INPUT, .n_dims = 2,
                         .ne = {TUNE_TILE_K, T, 1, 1}};
    const sy_tensor *in[2] = {&w, &x};
    return tune_node_graph(SY_OP_MATMUL, in, NULL, 2, NULL, out_g);
}

static int tile_cmp(const void *a, const void *b)
{
    double x = *(const double *)a, y = *(const double *)b;
    return x < y ? -1 : x > y;
}

uint32_t tune_tile_from_times(const double *t, uint32_t *out_from)
{
    *out_from = 0;
    const double t32 = t[4], t33 = t[5], t64 = t[6];
    if (!(t32 > 0 && t64 >= TUNE_TILE_MIN_RISE * t32))
        return 0;
    const double c_hat = (t33 - t32) / ((t64 - t32) / 32.0);
    uint32_t c = 1;
    /* Nearest power of two on a log scale: 2^(i + 1/2) separates. */
    while (c < 32 && c_hat >= c * M_SQRT2)
        c *= 2;
    if (c < 2)
        return 0;
    /* t[0..4] are 2, 4, 8, 16, 32 tokens: t[log2(c) - 1] is a whole tile. */
    uint32_t whole = 0;
    while ((2u << whole) < c)
        whole++;
    uint32_t from = c;
    for (uint32_t i = 0; i < whole; i++)
        if (t[i] >= TUNE_TILE_FROM_SHARE * t[whole]) {
            from = tile_tokens[i];
            break;
        }
    *out_from = from;
    return c;
}

sy_status tune_token_tile(sy_runtime *rt, uint32_t dev, sy_dtype dtype, const tune_opts *o,
                          tune_tile *out)
{
    memset(out, 0, sizeof *out);
    out->dtype = (int32_t)dtype;
    sy_graph *g[TUNE_TILE_COUNTS] = {0};
    sy_bench *b[TUNE_TILE_COUNTS] = {0};
    double runs[TUNE_TILE_COUNTS][TUNE_TILE_ROUNDS];
    sy_status st = SY_OK;
    for (uint32_t i = 0; i < TUNE_TILE_COUNTS && st == SY_OK; i++) {
        st = tile_graph(dtype, tile_tokens[i], &g[i]);
        sy_support why;
        if (st == SY_OK && !sy_runtime_device_supports(rt, dev, sy_graph_node(g[i], 0), &why))
            st = SY_E_UNSUPPORTED;
        if (st == SY_OK)
            st = sy_bench_create(rt, g[i], dev, &b[i]);
    }
    /* Rounds alternate between the counts, so that a burst of other work
     * falls on all of them rather than on one. */
    for (uint32_t r = 0; r < TUNE_TILE_ROUNDS && st == SY_OK; r++)
        for (uint32_t i = 0; i < TUNE_TILE_COUNTS && st == SY_OK; i++)
            st = sy_bench_time(b[i], 0, 1, 1, tune_reps(o), 0.05, &runs[i][r]);
    for (uint32_t i = 0; i < TUNE_TILE_COUNTS && st == SY_OK; i++) {
        qsort(runs[i], TUNE_TILE_ROUNDS, sizeof runs[i][0], tile_cmp);
        out->seconds[i] = runs[i][0];
    }
    if (st == SY_OK)
        out->tokens = tune_tile_from_times(out->seconds, &out->from);
    for (uint32_t i = 0; i < TUNE_TILE_COUNTS; i++) {
        sy_bench_destroy(b[i]);
        sy_graph_destroy(g[i]);
    }
    return st;
}

sy_status tune_token_tiles(sy_runtime *rt, uint32_t dev, const tune_opts *o, tune_samples *s)
{
    for (uint32_t i = 0; i < s->n; i++) {
        const tune_sample *x = &s->v[i];
        if (x->op != SY_OP_MATMUL || x->dtype < 0)
            continue;
        bool seen = false;
        for (uint32_t k = 0; k < s->n_tiles && !seen; k++)
            seen = s->tiles[k].dtype == x->dtype;
        if (seen || s->n_tiles >= TUNE_MAX_TILES)
            continue;
        tune_tile *t = &s->tiles[s->n_tiles];
        /* A dtype the device cannot multiply at this size keeps no tile. */
        if (tune_token_tile(rt, dev, (sy_dtype)x->dtype, o, t) != SY_OK)
            continue;
        s->n_tiles++;
        if (o->verbose)
            fprintf(stderr, "  matmul %-5s tile %u from %u (32/33/64 tokens: %.1f/%.1f/%.1f us)\n",
                    sy_dtype_name((uint32_t)x->dtype), t->tokens, t->from, t->seconds[4] * 1e6,
                    t->seconds[5] * 1e6, t->seconds[6] * 1e6);
    }
    return SY_OK;
}
