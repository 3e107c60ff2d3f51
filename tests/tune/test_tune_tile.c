/* Tuner: the token tile of a device's matmul (tune_tile.c), read from
 * times at 2, 4, 8, 16, 32, 33 and 64 tokens (given here, not measured),
 * and written to the profile's matmul entries where the cost model reads
 * it back. */
#include <criterion/criterion.h>
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "cost_model.h"
#include "tune.h"

static const double counts[TUNE_TILE_COUNTS] = {2, 4, 8, 16, 32, 33, 64};

/* Times of a kernel costing |a| + |b| per token in whole tiles of |c|
 * from |from| tokens on, and |small| per token below. */
static void tiled_times(double a, double b, uint32_t c, uint32_t from, double small, double *t)
{
    for (uint32_t i = 0; i < TUNE_TILE_COUNTS; i++) {
        double T = counts[i];
        t[i] = T >= from ? a + b * ceil(T / c) * c : a + small * T;
    }
}

Test(tune_tile, reads_a_tile_of_16_from_8_tokens_off_a_gemm_of_panels)
{
    double t[TUNE_TILE_COUNTS];
    /* The CPU's shape: 16-column panels from 8 tokens, one-column dots
     * below that cost 3x a GEMM column. */
    tiled_times(10e-6, 12e-6, 16, 8, 36e-6, t);
    uint32_t from = 0;
    cr_expect_eq(tune_tile_from_times(t, &from), 16);
    cr_expect_eq(from, 8);
    tiled_times(10e-6, 12e-6, 8, 2, 0, t);
    cr_expect_eq(tune_tile_from_times(t, &from), 8);
    cr_expect_eq(from, 2);
    tiled_times(10e-6, 12e-6, 32, 16, 12e-6, t);
    cr_expect_eq(tune_tile_from_times(t, &from), 32);
    cr_expect_eq(from, 16);
}

Test(tune_tile, tolerates_a_few_percent_of_noise)
{
    double t[TUNE_TILE_COUNTS];
    tiled_times(10e-6, 12e-6, 16, 8, 36e-6, t);
    t[4] *= 1.04; /* 32 tokens slow, 33 fast */
    t[5] *= 0.96;
    uint32_t from = 0;
    cr_expect_eq(tune_tile_from_times(t, &from), 16);
}

Test(tune_tile, finds_no_tile_where_time_follows_every_token_or_none)
{
    double t[TUNE_TILE_COUNTS];
    uint32_t from = 99;
    tiled_times(10e-6, 12e-6, 1, 1, 0, t);
    cr_expect_eq(tune_tile_from_times(t, &from), 0);
    cr_expect_eq(from, 0);
    /* Launch-bound: 64 tokens cost hardly more than 32. */
    tiled_times(500e-6, 0.1e-6, 16, 8, 0.1e-6, t);
    cr_expect_eq(tune_tile_from_times(t, &from), 0);
}

Test(tune_tile, the_profile_carries_the_tile_of_each_matmul_dtype_to_the_cost_model)
{
    tune_samples s = {0};
    tune_sample q = {.op = SY_OP_MATMUL, .dtype = SY_DTYPE_Q4_0, .flops = 4194304,
                     .bytes = 180224, .seconds = 1e-4};
    snprintf(q.shape, sizeof q.shape, "512x512 f32:512x8");
    snprintf(q.group, sizeof q.group, "512x512");
    tune_sample f = q;
    f.dtype = SY_DTYPE_F32;
    tune_sample add = {.op = SY_OP_ADD, .dtype = SY_DTYPE_F32, .flops = 1e3, .bytes = 1.2e4,
                       .seconds = 1e-6};
    cr_assert_eq(tune_samples_add(&s, &q), SY_OK);
    cr_assert_eq(tune_samples_add(&s, &f), SY_OK);
    cr_assert_eq(tune_samples_add(&s, &add), SY_OK);
    s.tiles[s.n_tiles++] = (tune_tile){.dtype = SY_DTYPE_Q4_0, .tokens = 16, .from = 8};
    s.tiles[s.n_tiles++] = (tune_tile){.dtype = SY_DTYPE_F32, .tokens = 0};
    tune_device_info info = {.device = "cpu", .version = "test"};
    char *json = NULL;
    cr_assert_eq(tune_profile_json(&info, &s, &json), SY_OK);
    char err[512] = "";
    sy__profile *p = NULL;
    cr_assert_eq(sy__profile_parse(json, strlen(json), "tuned", &p, err, sizeof err), SY_OK, "%s",
                 err);
    uint32_t tiled = 0;
    for (uint32_t i = 0; i < p->n_ops; i++) {
        const sy__op_entry *e = &p->ops[i];
        if (e->op == SY_OP_MATMUL && e->dtype == SY_DTYPE_Q4_0) {
            cr_expect_eq(e->token_tile, 16);
            cr_expect_eq(e->token_tile_from, 8);
            tiled++;
        } else {
            cr_expect_eq(e->token_tile, 0, "ops[%u] (%s)", i, sy_op_name((sy_op)e->op));
        }
    }
    cr_expect_eq(tiled, 1);
    sy__profile_destroy(p);
    free(json);
    tune_samples_free(&s);
}
