/* Cost model: token tiles (docs/profiles.md, "Token tiles").  A matmul
 * entry with token_tile predicts a node of T tokens as one of T rounded
 * up to a whole tile, the points of its group likewise; without the
 * field predictions stay on the line through the measured token counts. */
#include <criterion/criterion.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "cost_model.h"
#include "sched_test_util.h"

#define HEAD "\"schema\": \"switchyard-profile\", \"format_version\": 1, \"version\": \"t\", "

/* A matmul node of Q4_0 weights [K, N] times F32 X [K, M]. */
typedef struct mm_node {
    sy_tensor w, x, out;
    sy_node node;
} mm_node;

static void make_matmul(mm_node *m, int64_t K, int64_t N, int64_t M)
{
    memset(m, 0, sizeof *m);
    m->w = (sy_tensor){.dtype = SY_DTYPE_Q4_0, .ne = {K, N, 1, 1}};
    m->x = (sy_tensor){.dtype = SY_DTYPE_F32, .ne = {K, M, 1, 1}};
    m->out = (sy_tensor){.dtype = SY_DTYPE_F32, .ne = {N, M, 1, 1}};
    sy_tensor_set_contiguous_strides(&m->w);
    sy_tensor_set_contiguous_strides(&m->x);
    sy_tensor_set_contiguous_strides(&m->out);
    m->node =
        (sy_node){.op = SY_OP_MATMUL, .n_inputs = 2, .inputs = {&m->w, &m->x}, .output = &m->out};
}

/* Appends the point of a 512x512 matmul of |M| tokens taking |seconds|,
 * labelled and grouped as the cost model names it. */
static void add_point(char *json, size_t size, int64_t M, double seconds)
{
    mm_node mm;
    make_matmul(&mm, 512, 512, M);
    char label[SY__COST_SHAPE_MAX], group[SY__COST_GROUP_MAX];
    sy__cost_shape_label(&mm.node, label, sizeof label);
    sy__cost_shape_group(&mm.node, group, sizeof group);
    uint64_t flops = 0, bytes = 0;
    sy_op_cost(&mm.node, &flops, &bytes);
    size_t used = strlen(json);
    snprintf(json + used, size - used,
             "%s{\"shape\": \"%s\", \"group\": \"%s\", \"flops\": %llu, \"bytes\": %llu,"
             " \"seconds\": %g}",
             json[used - 1] == '[' ? "" : ", ", label, group, (unsigned long long)flops,
             (unsigned long long)bytes, seconds);
}

/* A profile of one q4_0 matmul group measured at 1, 8 and 32 tokens (as a
 * quick tune measures), with |tile| ("" for none) in its entry. */
static sy__profile *tiled_profile(const char *tile)
{
    char json[4096];
    snprintf(json, sizeof json,
             "{" HEAD "\"device\": \"cpu\", \"ops\": [{\"op\": \"matmul\", \"dtype\": \"q4_0\", "
             "%s\"points\": [",
             tile);
    add_point(json, sizeof json, 1, 2.0e-5);
    add_point(json, sizeof json, 8, 1.0e-4);
    add_point(json, sizeof json, 32, 2.5e-4);
    size_t used = strlen(json);
    snprintf(json + used, sizeof json - used, "]}]}");
    char err[512] = "";
    sy__profile *p = NULL;
    cr_assert_eq(sy__profile_parse(json, strlen(json), "tiles.json", &p, err, sizeof err), SY_OK,
                 "%s", err);
    return p;
}

static double predict(const sy__profile *p, int64_t M)
{
    sy_device_desc d;
    memset(&d, 0, sizeof d);
    d.kind = SY_DEVICE_CPU;
    snprintf(d.name, sizeof d.name, "cpu");
    sy__device_model *m = calloc(1, sizeof *m);
    cr_assert_not_null(m);
    sy__device_model_init(m, 0, &d, p);
    mm_node mm;
    make_matmul(&mm, 512, 512, M);
    bool unmeasured = true;
    double s = sy__cost_node(m, &mm.node, &unmeasured);
    cr_expect_not(unmeasured);
    free(m);
    return s;
}

#define TILE_16_FROM_8 "\"token_tile\": 16, \"token_tile_from\": 8, "

Test(cost_tiles, a_tiled_matmul_of_40_tokens_costs_what_one_of_48_does)
{
    sy__profile *p = tiled_profile(TILE_16_FROM_8);
    cr_assert_eq(p->ops[0].token_tile, 16);
    cr_assert_eq(p->ops[0].token_tile_from, 8);
    double t40 = predict(p, 40), t48 = predict(p, 48);
    cr_expect_eq(t40, t48, "40 tokens %g s, 48 tokens %g s", t40, t48);
    /* The 8-token point stands for a whole tile of 16, so the line runs
     * through (16, 1e-4) and (32, 2.5e-4): 48 tokens 4e-4 s (work is
     * proportional to the tokens here: the FLOPs dominate). */
    cr_expect_float_eq(t48, 4.0e-4, 4e-9, "predicted %g s", t48);
    cr_expect_eq(predict(p, 33), t48);
    sy__profile_destroy(p);
    st_check_leaks();
}

Test(cost_tiles, counts_within_one_tile_cost_the_same_and_measured_points_still_win)
{
    sy__profile *p = tiled_profile(TILE_16_FROM_8);
    cr_expect_float_eq(predict(p, 8), 1.0e-4, 1e-12, "its own measured point");
    cr_expect_float_eq(predict(p, 32), 2.5e-4, 1e-12, "its own measured point");
    cr_expect_float_eq(predict(p, 16), 1.0e-4, 1e-9, "8 tokens measured a whole tile of 16");
    cr_expect_eq(predict(p, 12), predict(p, 16));
    cr_expect_float_eq(predict(p, 17), 2.5e-4, 1e-9, "17 tokens take a second tile");
    cr_expect_float_eq(predict(p, 1), 2.0e-5, 1e-12, "one token (decode) is never rounded");
    /* Below token_tile_from another kernel runs: not rounded up. */
    double t4 = predict(p, 4);
    cr_expect_gt(t4, 2.0e-5);
    cr_expect_lt(t4, 1.0e-4);
    cr_expect_neq(predict(p, 4), predict(p, 5));
    sy__profile_destroy(p);
    st_check_leaks();
}

Test(cost_tiles, without_a_tile_predictions_stay_on_the_line_through_the_points)
{
    sy__profile *p = tiled_profile("");
    cr_assert_eq(p->ops[0].token_tile, 0);
    double t40 = predict(p, 40), t48 = predict(p, 48);
    cr_expect_neq(t40, t48);
    /* The line through (8, 1e-4) and (32, 2.5e-4). */
    cr_expect_float_eq(t40, 3.0e-4, 3e-9, "predicted %g s", t40);
    cr_expect_float_eq(t48, 3.5e-4, 3e-9, "predicted %g s", t48);
    sy__profile_destroy(p);
    /* A tile of 1 is no tile. */
    p = tiled_profile("\"token_tile\": 1, ");
    cr_expect_eq(p->ops[0].token_tile, 0);
    cr_expect_float_eq(predict(p, 40), 3.0e-4, 3e-9);
    sy__profile_destroy(p);
    st_check_leaks();
}

Test(cost_tiles, a_tiled_fit_without_points_is_rounded_too)
{
    const char *json = "{" HEAD "\"device\": \"cpu\", \"ops\": [{\"op\": \"matmul\", "
                       "\"token_tile\": 16, \"overhead_s\": 1e-5, \"s_per_flop\": 1e-11}]}";
    char err[512] = "";
    sy__profile *p = NULL;
    cr_assert_eq(sy__profile_parse(json, strlen(json), "fit.json", &p, err, sizeof err), SY_OK,
                 "%s", err);
    cr_expect_eq(p->ops[0].token_tile_from, 2, "absent token_tile_from: 2");
    cr_expect_eq(predict(p, 40), predict(p, 48));
    cr_expect_neq(predict(p, 1), predict(p, 2));
    sy__profile_destroy(p);
    st_check_leaks();
}

static void refuses(const char *entry, const char *want)
{
    char json[1024], err[512] = "";
    snprintf(json, sizeof json, "{" HEAD "\"device\": \"cpu\", \"ops\": [%s]}", entry);
    sy__profile *p = (sy__profile *)1;
    cr_assert_eq(sy__profile_parse(json, strlen(json), "bad.json", &p, err, sizeof err),
                 SY_E_FORMAT, "accepted: %s", json);
    cr_assert_null(p);
    cr_assert(strstr(err, want), "error '%s' lacks '%s'", err, want);
}

Test(cost_tiles, refuses_tiles_that_are_not_whole_numbers_or_not_on_a_matmul)
{
    refuses("{\"op\": \"matmul\", \"overhead_s\": 1, \"token_tile\": 0}",
            "ops[0].token_tile: expected a whole number from 1 to 65536");
    refuses("{\"op\": \"matmul\", \"overhead_s\": 1, \"token_tile\": 16.5}",
            "ops[0].token_tile: expected a whole number");
    refuses("{\"op\": \"matmul\", \"overhead_s\": 1, \"token_tile\": \"16\"}",
            "ops[0].token_tile: expected a whole number");
    refuses("{\"op\": \"matmul\", \"overhead_s\": 1, \"token_tile_from\": 8}",
            "ops[0].token_tile_from: given without token_tile");
    refuses("{\"op\": \"add\", \"overhead_s\": 1, \"token_tile\": 16}",
            "ops[0].token_tile: only matmul entries are tiled");
    st_check_leaks();
}

Test(cost_tiles, the_shipped_profiles_load_and_have_no_tile)
{
    static const char *const names[] = {"cpu.json", "opencl.json", "npusim.json"};
    for (size_t i = 0; i < sizeof names / sizeof names[0]; i++) {
        char path[1024];
        snprintf(path, sizeof path, "%s/profiles/%s", SY_TEST_SOURCE_DIR, names[i]);
        FILE *f = fopen(path, "rb");
        cr_assert_not_null(f, "%s", path);
        cr_assert_eq(fseek(f, 0, SEEK_END), 0);
        long len = ftell(f);
        cr_assert_gt(len, 0);
        rewind(f);
        char *json = malloc((size_t)len);
        cr_assert_not_null(json);
        cr_assert_eq(fread(json, 1, (size_t)len, f), (size_t)len);
        fclose(f);
        char err[512] = "";
        sy__profile *p = NULL;
        cr_expect_eq(sy__profile_parse(json, (size_t)len, path, &p, err, sizeof err), SY_OK,
                     "%s", err);
        for (uint32_t k = 0; p && k < p->n_ops; k++)
            cr_expect_eq(p->ops[k].token_tile, 0, "%s ops[%u]", names[i], k);
        sy__profile_destroy(p);
        free(json);
    }
}
