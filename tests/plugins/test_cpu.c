/* Conformance tests of the CPU plugin: every op on every dtype it takes,
 * run through the runtime on the "cpu" device with both inner-kernel
 * tables (SWITCHYARD_CPU_ISA=scalar and the best the machine has) and 1, 2
 * and 3 threads, compared with the reference kernels (the ground truth).
 * Inputs are random from a fresh seed per test, printed in every failure.
 * The last suite opens the module directly to check its ABI surface. */
#include <criterion/criterion.h>
#include <dlfcn.h>
#include <math.h>
#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>
#include <unistd.h>

#include "switchyard/switchyard.h"

/* ------------------------------------------------------------ randomness */

typedef struct trng {
    uint64_t seed;
    uint64_t s;
} trng;

static void trng_init(trng *r)
{
    struct timespec ts;
    clock_gettime(CLOCK_REALTIME, &ts);
    r->seed = ((uint64_t)ts.tv_sec * 1000000007u) ^ (uint64_t)ts.tv_nsec ^
              ((uint64_t)getpid() << 32);
    r->s = r->seed ? r->seed : 0x9e3779b97f4a7c15u;
}

static uint64_t trng_next(trng *r)
{
    /* xorshift64* */
    r->s ^= r->s >> 12;
    r->s ^= r->s << 25;
    r->s ^= r->s >> 27;
    return r->s * 2685821657736338717u;
}

static uint32_t trng_below(trng *r, uint32_t n)
{
    return (uint32_t)(trng_next(r) >> 33) % n;
}

/* Uniform in [-1, 1). */
static float trng_unit(trng *r)
{
    return (float)((double)(trng_next(r) >> 40) / (double)(1u << 23) - 1.0);
}

/* An f16 bit pattern of magnitude in [2^(lo-15), 2^(hi-14)), random sign. */
static uint16_t trng_f16(trng *r, unsigned lo, unsigned hi, bool allow_negative)
{
    unsigned e = lo + trng_below(r, hi - lo + 1);
    unsigned sign = allow_negative ? trng_below(r, 2) : 0;
    return (uint16_t)((sign << 15) | (e << 10) | trng_below(r, 1024));
}

static void put16(uint8_t *p, uint16_t v)
{
    memcpy(p, &v, sizeof v);
}

/* Fills |n| elements of |dtype| at |dst| with values of magnitude <= ~2
 * and no NaN or infinity.  Block types get random quants and sane
 * f16 scales, so every bit of the block formats is exercised. */
static void fill_random(trng *r, sy_dtype dtype, void *dst, int64_t n)
{
    uint8_t *b = dst;
    const uint32_t ts = sy_dtype_type_size(dtype);
    const int64_t blocks = n / sy_dtype_block_size(dtype);
    switch (dtype) {
    case SY_DTYPE_F32:
        for (int64_t i = 0; i < n; i++)
            ((float *)dst)[i] = trng_unit(r);
        return;
    case SY_DTYPE_F16:
        for (int64_t i = 0; i < n; i++)
            put16(b + 2 * i, trng_f16(r, 11, 15, true));
        return;
    case SY_DTYPE_BF16:
        for (int64_t i = 0; i < n; i++) {
            uint16_t v = (uint16_t)((trng_below(r, 2) << 15) | ((123 + trng_below(r, 5)) << 7) |
                                    trng_below(r, 128));
            put16(b + 2 * i, v);
        }
        return;
    case SY_DTYPE_I32:
        for (int64_t i = 0; i < n; i++)
            ((int32_t *)dst)[i] = (int32_t)trng_below(r, 201) - 100;
        return;
    default:
        break;
    }
    for (int64_t i = 0; i < blocks * ts; i++)
        b[i] = (uint8_t)trng_next(r);
    for (int64_t k = 0; k < blocks; k++) {
        uint8_t *blk = b + k * ts;
        switch (dtype) {
        case SY_DTYPE_Q8_0:
            put16(blk, trng_f16(r, 6, 7, true));
            break;
        case SY_DTYPE_Q4_0:
            put16(blk, trng_f16(r, 10, 11, true));
            break;
        case SY_DTYPE_Q4_1:
            put16(blk, trng_f16(r, 9, 10, false));
            put16(blk + 2, trng_f16(r, 12, 13, true));
            break;
        case SY_DTYPE_Q4_K:
        case SY_DTYPE_Q5_K:
            put16(blk, trng_f16(r, 3, 4, false));
            put16(blk + 2, trng_f16(r, 3, 4, false));
            break;
        case SY_DTYPE_Q6_K:
            put16(blk + 208, trng_f16(r, 2, 3, true));
            break;
        default:
            break;
        }
    }
}

/* ------------------------------------------------------------- test case */

typedef struct tol {
    double rel; /* of |want| */
    double abs; /* of max |want| over the tensor */
} tol;

static const tol TOL_EXACT = {0.0, 0.0};

typedef struct run_cfg {
    const char *isa;
    const char *threads;
} run_cfg;

static const run_cfg run_cfgs[] = {
    {"scalar", "1"}, {"scalar", "2"}, {"scalar", "3"}, {"auto", "1"}, {"auto", "2"}, {"auto", "3"},
};
#define N_RUN_CFGS (sizeof run_cfgs / sizeof run_cfgs[0])

#define TC_MAX_BUFS 64
#define TC_MAX_OUTS 4

typedef struct tcase {
    trng rng;
    sy_graph *g;
    void *bufs[TC_MAX_BUFS];
    uint32_t n_bufs;
    sy_tensor *outs[TC_MAX_OUTS];
    void *want[TC_MAX_OUTS];
    void *got[TC_MAX_OUTS];
    uint32_t n_outs;
    /* Leaves a node writes in place (KV caches): initial and expected bytes. */
    sy_tensor *state[TC_MAX_OUTS];
    void *state_init[TC_MAX_OUTS];
    void *state_want[TC_MAX_OUTS];
    uint32_t n_state;
    char what[192];
    char log[8192]; /* messages of the last runtime */
    size_t log_used;
    bool allow_fallback; /* the case exercises the reference fallback */
} tcase;

static void tc_begin(tcase *tc, const char *fmt, ...) __attribute__((format(printf, 2, 3)));

static void tc_begin(tcase *tc, const char *fmt, ...)
{
    memset(tc, 0, sizeof *tc);
    trng_init(&tc->rng);
    va_list ap;
    va_start(ap, fmt);
    vsnprintf(tc->what, sizeof tc->what, fmt, ap);
    va_end(ap);
    cr_assert_eq(sy_graph_create(&tc->g), SY_OK);
}

static void tc_end(tcase *tc)
{
    sy_graph_destroy(tc->g);
    for (uint32_t i = 0; i < tc->n_bufs; i++)
        free(tc->bufs[i]);
    tc->n_bufs = 0;
}

static void *tc_alloc(tcase *tc, size_t size)
{
    cr_assert_lt(tc->n_bufs, TC_MAX_BUFS, "test uses too many buffers");
    size_t rounded = (size + 63) / 64 * 64;
    void *p = aligned_alloc(64, rounded ? rounded : 64);
    cr_assert_not_null(p);
    memset(p, 0, rounded ? rounded : 64);
    tc->bufs[tc->n_bufs++] = p;
    return p;
}

static size_t tc_bytes(sy_dtype dtype, const int64_t ne[4])
{
    return (size_t)(ne[0] / sy_dtype_block_size(dtype) * sy_dtype_type_size(dtype) * ne[1] *
                    ne[2] * ne[3]);
}

/* Adds a leaf of |dtype| and shape |ne| with |data|, or random data when
 * |data| is NULL. */
static sy_tensor *tc_leaf(tcase *tc, const char *name, sy_dtype dtype, const int64_t ne[4],
                          sy_tensor_role role, void *data)
{
    uint32_t nd = 1;
    for (uint32_t d = 1; d < 4; d++)
        if (ne[d] != 1)
            nd = d + 1;
    if (!data) {
        data = tc_alloc(tc, tc_bytes(dtype, ne));
        fill_random(&tc->rng, dtype, data, ne[0] * ne[1] * ne[2] * ne[3]);
    }
    sy_tensor *t = NULL;
    sy_status st = sy_graph_add_tensor(tc->g, name, dtype, nd, ne, role, data, &t);
    cr_assert_eq(st, SY_OK, "%s: add_tensor %s: %s", tc->what, name, sy_graph_last_error(tc->g));
    return t;
}

static sy_tensor *tc_input(tcase *tc, const char *name, sy_dtype dtype, int64_t ne0, int64_t ne1,
                           int64_t ne2, int64_t ne3)
{
    const int64_t ne[4] = {ne0, ne1, ne2, ne3};
    return tc_leaf(tc, name, dtype, ne, SY_ROLE_INPUT, NULL);
}

static sy_tensor *tc_node(tcase *tc, sy_op op, const char *name, sy_tensor *const *in, uint32_t n,
                          const sy_op_params *p)
{
    sy_tensor *out = NULL;
    sy_status st = sy_graph_add_node(tc->g, op, name, in, n, p, &out);
    cr_assert_eq(st, SY_OK, "%s: add_node %s: %s", tc->what, name, sy_graph_last_error(tc->g));
    return out;
}

/* Compares the result of |t| after the run. */
static void tc_output(tcase *tc, sy_tensor *t)
{
    cr_assert_lt(tc->n_outs, TC_MAX_OUTS);
    cr_assert_eq(sy_graph_mark_output(tc->g, t), SY_OK);
    size_t size = sy_tensor_nbytes(t);
    tc->outs[tc->n_outs] = t;
    tc->want[tc->n_outs] = tc_alloc(tc, size);
    tc->got[tc->n_outs] = tc_alloc(tc, size);
    tc->n_outs++;
}

/* Compares leaf |t| (written in place by a node) after the run. */
static void tc_state(tcase *tc, sy_tensor *t)
{
    cr_assert_lt(tc->n_state, TC_MAX_OUTS);
    size_t size = sy_tensor_nbytes(t);
    void *host = sy_graph_host_data(tc->g, t);
    tc->state[tc->n_state] = t;
    tc->state_init[tc->n_state] = tc_alloc(tc, size);
    tc->state_want[tc->n_state] = tc_alloc(tc, size);
    memcpy(tc->state_init[tc->n_state], host, size);
    tc->n_state++;
}

static void tc_restore_state(tcase *tc)
{
    for (uint32_t i = 0; i < tc->n_state; i++)
        memcpy(sy_graph_host_data(tc->g, tc->state[i]), tc->state_init[i],
               sy_tensor_nbytes(tc->state[i]));
}

static void tc_log(void *user, sy_log_level level, const char *msg)
{
    tcase *tc = user;
    int n = snprintf(tc->log + tc->log_used, sizeof tc->log - tc->log_used, "%s\n", msg);
    if (n > 0 && (size_t)n < sizeof tc->log - tc->log_used)
        tc->log_used += (size_t)n;
}

static void tc_compare(const tcase *tc, const run_cfg *cfg, const char *what, const sy_tensor *t,
                       const void *got, const void *want, size_t size, tol tl)
{
    if (t->dtype != SY_DTYPE_F32 || (tl.rel == 0.0 && tl.abs == 0.0)) {
        const uint8_t *g = got, *w = want;
        for (size_t i = 0; i < size; i++) {
            if (g[i] == w[i])
                continue;
            if (t->dtype == SY_DTYPE_F32) {
                float gf, wf;
                memcpy(&gf, g + i / 4 * 4, 4);
                memcpy(&wf, w + i / 4 * 4, 4);
                if (isnan(gf) && isnan(wf))
                    continue;
            }
            cr_assert_fail("%s [%s isa, %s threads, seed %llu]: %s '%s' differs at byte %zu "
                           "(got 0x%02x, want 0x%02x)",
                           tc->what, cfg->isa, cfg->threads, (unsigned long long)tc->rng.seed,
                           what, t->name, i, g[i], w[i]);
        }
        return;
    }
    const float *g = got, *w = want;
    const size_t n = size / sizeof(float);
    double max = 0.0;
    for (size_t i = 0; i < n; i++)
        if (isfinite(w[i]) && fabs(w[i]) > max)
            max = fabs(w[i]);
    for (size_t i = 0; i < n; i++) {
        if (isnan(w[i]) && isnan(g[i]))
            continue;
        const double err = fabs((double)g[i] - (double)w[i]);
        const double lim = tl.rel * fabs(w[i]) + tl.abs * max;
        cr_assert(err <= lim,
                  "%s [%s isa, %s threads, seed %llu]: %s '%s'[%zu] = %.9g, reference %.9g "
                  "(error %.3g > %.3g)",
                  tc->what, cfg->isa, cfg->threads, (unsigned long long)tc->rng.seed, what, t->name,
                  i, (double)g[i], (double)w[i], err, lim);
    }
}

static sy_runtime *tc_runtime(tcase *tc, const run_cfg *cfg, uint32_t *out_dev)
{
    setenv("SWITCHYARD_CPU_ISA", cfg->isa, 1);
    setenv("SWITCHYARD_THREADS", cfg->threads, 1);
    sy_runtime_options opts;
    sy_runtime_options_init(&opts);
    opts.no_default_paths = true;
    opts.log_fn = tc_log;
    opts.log_user = tc;
    opts.log_level = SY_LOG_DEBUG;
    tc->log_used = 0;
    tc->log[0] = '\0';
    sy_runtime *rt = NULL;
    sy_status st = sy_runtime_create(&opts, &rt);
    cr_assert_eq(st, SY_OK, "runtime create failed: %s", sy_status_name(st));
    st = sy_runtime_find_device(rt, "cpu", out_dev);
    cr_assert_eq(st, SY_OK, "no cpu device (SWITCHYARD_PLUGIN_PATH=%s): %s",
                 getenv("SWITCHYARD_PLUGIN_PATH") ? getenv("SWITCHYARD_PLUGIN_PATH") : "(unset)",
                 tc->log);
    return rt;
}

/* Freezes the graph, runs the reference, then the cpu device under every
 * configuration, and compares outputs and in-place leaves. */
static void tc_run_expect(tcase *tc, tol tl, sy_status expect)
{
    sy_status st = sy_graph_freeze(tc->g);
    cr_assert_eq(st, SY_OK, "%s: freeze: %s", tc->what, sy_graph_last_error(tc->g));

    for (uint32_t i = 0; i < tc->n_outs; i++)
        sy_graph_set_host_data(tc->g, tc->outs[i], tc->want[i]);
    sy_status ref_st = sy_graph_run_reference(tc->g);
    cr_assert_eq(ref_st, expect, "%s: reference run gave %s", tc->what, sy_status_name(ref_st));
    for (uint32_t i = 0; i < tc->n_state; i++)
        memcpy(tc->state_want[i], sy_graph_host_data(tc->g, tc->state[i]),
               sy_tensor_nbytes(tc->state[i]));
    tc_restore_state(tc);

    for (size_t c = 0; c < N_RUN_CFGS; c++) {
        const run_cfg *cfg = &run_cfgs[c];
        uint32_t dev = 0;
        sy_runtime *rt = tc_runtime(tc, cfg, &dev);
        for (uint32_t i = 0; i < tc->n_outs; i++) {
            memset(tc->got[i], 0xA5, sy_tensor_nbytes(tc->outs[i]));
            sy_graph_set_host_data(tc->g, tc->outs[i], tc->got[i]);
        }
        st = sy_runtime_execute_on(rt, tc->g, dev);
        cr_assert_eq(st, expect, "%s [%s isa, %s threads, seed %llu]: execute_on gave %s: %s",
                     tc->what, cfg->isa, cfg->threads, (unsigned long long)tc->rng.seed,
                     sy_status_name(st), sy_runtime_last_error(rt));
        if (expect == SY_OK) {
            /* Threaded kernels must cover these layouts: a silent detour
             * through the reference would pass every comparison. */
            cr_assert(tc->allow_fallback || !strstr(tc->log, "runs the reference kernel"),
                      "%s [%s isa, %s threads]: a node fell back to the reference:\n%s", tc->what,
                      cfg->isa, cfg->threads, tc->log);
            for (uint32_t i = 0; i < tc->n_outs; i++)
                tc_compare(tc, cfg, "output", tc->outs[i], tc->got[i], tc->want[i],
                           sy_tensor_nbytes(tc->outs[i]), tl);
            for (uint32_t i = 0; i < tc->n_state; i++)
                tc_compare(tc, cfg, "in-place leaf", tc->state[i],
                           sy_graph_host_data(tc->g, tc->state[i]), tc->state_want[i],
                           sy_tensor_nbytes(tc->state[i]), tl);
        }
        tc_restore_state(tc);
        sy_runtime_destroy(rt);
    }
}

static void tc_run(tcase *tc, tol tl)
{
    tc_run_expect(tc, tl, SY_OK);
}

static const sy_dtype all_dtypes[] = {
    SY_DTYPE_F32,  SY_DTYPE_F16,  SY_DTYPE_BF16, SY_DTYPE_I32,  SY_DTYPE_Q8_0,
    SY_DTYPE_Q4_0, SY_DTYPE_Q4_1, SY_DTYPE_Q4_K, SY_DTYPE_Q5_K, SY_DTYPE_Q6_K,
};
#define N_ALL_DTYPES (sizeof all_dtypes / sizeof all_dtypes[0])

/* Row length that suits every block size. */
static int64_t row_for(sy_dtype t)
{
    return sy_dtype_block_size(t) > 32 ? 256 : 64;
}

/* ---------------------------------------------------------------- matmul */

static const tol TOL_MATMUL = {1e-5, 2e-5};

static void check_matmul(sy_dtype wtype, sy_dtype xtype, int64_t k, int64_t n, int64_t m,
                         int64_t b2, int64_t b3, int64_t c2, int64_t c3)
{
    tcase tc;
    tc_begin(&tc, "matmul w=%s x=%s K=%lld N=%lld M=%lld batch [%lld,%lld]x[%lld,%lld]",
             sy_dtype_name(wtype), sy_dtype_name(xtype), (long long)k, (long long)n, (long long)m,
             (long long)b2, (long long)b3, (long long)c2, (long long)c3);
    const int64_t wne[4] = {k, n, b2, b3};
    sy_tensor *w = tc_leaf(&tc, "w", wtype, wne, SY_ROLE_WEIGHT, NULL);
    sy_tensor *x = tc_input(&tc, "x", xtype, k, m, c2, c3);
    sy_tensor *in[2] = {w, x};
    tc_output(&tc, tc_node(&tc, SY_OP_MATMUL, "mm", in, 2, NULL));
    tc_run(&tc, TOL_MATMUL);
    tc_end(&tc);
}

static void check_matmul_all_shapes(sy_dtype wtype)
{
    const int64_t k = row_for(wtype) == 256 ? 256 : 96;
    check_matmul(wtype, SY_DTYPE_F32, k, 19, 1, 1, 1, 1, 1);
    check_matmul(wtype, SY_DTYPE_F32, k, 19, 7, 1, 1, 1, 1);
    check_matmul(wtype, SY_DTYPE_F16, k, 19, 1, 1, 1, 1, 1);
    check_matmul(wtype, SY_DTYPE_F16, k, 5, 6, 1, 1, 1, 1);
    check_matmul(wtype, SY_DTYPE_F32, k, 5, 3, 2, 1, 4, 3);
    check_matmul(wtype, SY_DTYPE_F16, k, 3, 2, 1, 3, 2, 3);
    /* Big enough that the kernel wakes three lanes. */
    check_matmul(wtype, SY_DTYPE_F32, 256, 200, 1, 1, 1, 1, 1);
    check_matmul(wtype, SY_DTYPE_F16, 256, 67, 3, 1, 1, 1, 1);
}

Test(cpu_matmul, matches_the_reference_with_f32_weights) { check_matmul_all_shapes(SY_DTYPE_F32); }
Test(cpu_matmul, matches_the_reference_with_f16_weights) { check_matmul_all_shapes(SY_DTYPE_F16); }
Test(cpu_matmul, matches_the_reference_with_bf16_weights) { check_matmul_all_shapes(SY_DTYPE_BF16); }
Test(cpu_matmul, matches_the_reference_with_i32_weights) { check_matmul_all_shapes(SY_DTYPE_I32); }
Test(cpu_matmul, matches_the_reference_with_q8_0_weights) { check_matmul_all_shapes(SY_DTYPE_Q8_0); }
Test(cpu_matmul, matches_the_reference_with_q4_0_weights) { check_matmul_all_shapes(SY_DTYPE_Q4_0); }
Test(cpu_matmul, matches_the_reference_with_q4_1_weights) { check_matmul_all_shapes(SY_DTYPE_Q4_1); }
Test(cpu_matmul, matches_the_reference_with_q4_k_weights) { check_matmul_all_shapes(SY_DTYPE_Q4_K); }
Test(cpu_matmul, matches_the_reference_with_q5_k_weights) { check_matmul_all_shapes(SY_DTYPE_Q5_K); }
Test(cpu_matmul, matches_the_reference_with_q6_k_weights) { check_matmul_all_shapes(SY_DTYPE_Q6_K); }

Test(cpu_matmul, handles_many_output_rows_split_across_threads)
{
    check_matmul(SY_DTYPE_Q4_0, SY_DTYPE_F32, 512, 301, 3, 1, 1, 1, 1);
    check_matmul(SY_DTYPE_F32, SY_DTYPE_F32, 128, 257, 1, 1, 1, 1, 1);
}

Test(cpu_matmul, falls_back_to_the_reference_for_a_transposed_input)
{
    tcase tc;
    tc_begin(&tc, "matmul with a transposed input");
    tc.allow_fallback = true;
    sy_tensor *w = tc_input(&tc, "w", SY_DTYPE_F32, 16, 9, 1, 1);
    sy_tensor *xt = tc_input(&tc, "xt", SY_DTYPE_F32, 5, 16, 1, 1);
    sy_tensor *x = tc_node(&tc, SY_OP_TRANSPOSE, "x", &xt, 1, NULL);
    sy_tensor *in[2] = {w, x};
    tc_output(&tc, tc_node(&tc, SY_OP_MATMUL, "mm", in, 2, NULL));
    tc_run(&tc, TOL_MATMUL);
    cr_assert(strstr(tc.log, "runs the reference kernel") != NULL,
              "the fallback was not logged; log:\n%s", tc.log);
    tc_end(&tc);
}

/* -------------------------------------------------------------- get_rows */

static void check_get_rows(sy_dtype table_type)
{
    tcase tc;
    tc_begin(&tc, "get_rows table=%s", sy_dtype_name(table_type));
    const int64_t k = 256, rows = 9, m = 200;
    const int64_t tne[4] = {k, rows, 1, 1};
    sy_tensor *table = tc_leaf(&tc, "table", table_type, tne, SY_ROLE_WEIGHT, NULL);
    int32_t *ids = tc_alloc(&tc, m * sizeof(int32_t));
    for (int64_t i = 0; i < m; i++)
        ids[i] = (int32_t)trng_below(&tc.rng, (uint32_t)rows);
    ids[m - 1] = ids[0]; /* a repeated id */
    const int64_t ine[4] = {m, 1, 1, 1};
    sy_tensor *tid = tc_leaf(&tc, "ids", SY_DTYPE_I32, ine, SY_ROLE_INPUT, ids);
    sy_tensor *in[2] = {table, tid};
    tc_output(&tc, tc_node(&tc, SY_OP_GET_ROWS, "rows", in, 2, NULL));
    tc_run(&tc, TOL_EXACT);
    tc_end(&tc);
}

Test(cpu_get_rows, matches_the_reference_for_every_table_dtype)
{
    for (size_t i = 0; i < N_ALL_DTYPES; i++)
        check_get_rows(all_dtypes[i]);
}

Test(cpu_get_rows, rejects_an_id_out_of_range)
{
    tcase tc;
    tc_begin(&tc, "get_rows with a bad id");
    sy_tensor *table = tc_input(&tc, "table", SY_DTYPE_F32, 8, 4, 1, 1);
    int32_t *ids = tc_alloc(&tc, 2 * sizeof(int32_t));
    ids[0] = 1;
    ids[1] = 4;
    const int64_t ine[4] = {2, 1, 1, 1};
    sy_tensor *in[2] = {table, tc_leaf(&tc, "ids", SY_DTYPE_I32, ine, SY_ROLE_INPUT, ids)};
    tc_output(&tc, tc_node(&tc, SY_OP_GET_ROWS, "rows", in, 2, NULL));
    tc_run_expect(&tc, TOL_EXACT, SY_E_INVALID_ARG);
    tc_end(&tc);
}

/* ------------------------------------------------------------ add and mul */

static const tol TOL_ELEMENTWISE = {1e-6, 1e-6};

static void check_binary(sy_op op, const int64_t b_ne[4])
{
    tcase tc;
    tc_begin(&tc, "%s with in1 [%lld,%lld,%lld,%lld]", sy_op_name(op), (long long)b_ne[0],
             (long long)b_ne[1], (long long)b_ne[2], (long long)b_ne[3]);
    sy_tensor *in[2] = {tc_input(&tc, "a", SY_DTYPE_F32, 256, 12, 4, 2),
                        tc_leaf(&tc, "b", SY_DTYPE_F32, b_ne, SY_ROLE_INPUT, NULL)};
    tc_output(&tc, tc_node(&tc, op, "y", in, 2, NULL));
    tc_run(&tc, TOL_ELEMENTWISE);
    tc_end(&tc);
}

static void check_binary_all(sy_op op)
{
    static const int64_t shapes[][4] = {
        {256, 12, 4, 2}, {256, 1, 4, 1}, {1, 12, 1, 2}, {8, 3, 2, 1}, {1, 1, 1, 1}, {256, 12, 1, 1},
    };
    for (size_t i = 0; i < sizeof shapes / sizeof shapes[0]; i++)
        check_binary(op, shapes[i]);
}

Test(cpu_elementwise, adds_with_every_broadcast_shape) { check_binary_all(SY_OP_ADD); }
Test(cpu_elementwise, multiplies_with_every_broadcast_shape) { check_binary_all(SY_OP_MUL); }

Test(cpu_elementwise, adds_a_transposed_view_through_the_fallback)
{
    tcase tc;
    tc_begin(&tc, "add on a transposed view");
    tc.allow_fallback = true;
    sy_tensor *at = tc_input(&tc, "at", SY_DTYPE_F32, 6, 32, 1, 1);
    sy_tensor *in[2] = {tc_node(&tc, SY_OP_TRANSPOSE, "a", &at, 1, NULL),
                        tc_input(&tc, "b", SY_DTYPE_F32, 32, 6, 1, 1)};
    tc_output(&tc, tc_node(&tc, SY_OP_ADD, "y", in, 2, NULL));
    tc_run(&tc, TOL_ELEMENTWISE);
    tc_end(&tc);
}

static void check_unary(sy_op op, const sy_op_params *p, tol tl)
{
    tcase tc;
    tc_begin(&tc, "%s", sy_op_name(op));
    sy_tensor *x = tc_input(&tc, "x", SY_DTYPE_F32, 300, 40, 3, 1);
    float *data = sy_graph_host_data(tc.g, x);
    for (int i = 0; i < 300 * 120; i++)
        data[i] *= 8.0f; /* reach the tails of the activations */
    tc_output(&tc, tc_node(&tc, op, "y", &x, 1, p));
    tc_run(&tc, tl);
    tc_end(&tc);
}

Test(cpu_elementwise, scales_and_shifts)
{
    sy_op_params p = {.f = {0.75f, -0.25f}};
    check_unary(SY_OP_SCALE, &p, TOL_ELEMENTWISE);
}

Test(cpu_elementwise, applies_silu) { check_unary(SY_OP_SILU, NULL, (tol){4e-6, 1e-6}); }
Test(cpu_elementwise, applies_gelu) { check_unary(SY_OP_GELU, NULL, (tol){4e-6, 1e-6}); }

static void check_glu(sy_op op)
{
    tcase tc;
    tc_begin(&tc, "%s", sy_op_name(op));
    sy_tensor *in[2] = {tc_input(&tc, "gate", SY_DTYPE_F32, 96, 100, 3, 1),
                        tc_input(&tc, "up", SY_DTYPE_F32, 96, 100, 3, 1)};
    float *gate = sy_graph_host_data(tc.g, in[0]);
    for (int i = 0; i < 96 * 300; i++)
        gate[i] *= 6.0f;
    tc_output(&tc, tc_node(&tc, op, "y", in, 2, NULL));
    tc_run(&tc, (tol){4e-6, 1e-6});
    tc_end(&tc);
}

Test(cpu_elementwise, applies_swiglu) { check_glu(SY_OP_SWIGLU); }
Test(cpu_elementwise, applies_geglu) { check_glu(SY_OP_GEGLU); }

/* ------------------------------------------------------------- rms_norm */

Test(cpu_rows, normalizes_rows_by_their_rms)
{
    tcase tc;
    tc_begin(&tc, "rms_norm");
    sy_tensor *x = tc_input(&tc, "x", SY_DTYPE_F32, 256, 40, 3, 1);
    sy_op_params p = {.f = {1e-5f}};
    tc_output(&tc, tc_node(&tc, SY_OP_RMS_NORM, "y", &x, 1, &p));
    tc_run(&tc, (tol){2e-6, 1e-6});
    tc_end(&tc);
}

Test(cpu_rows, normalizes_an_all_zero_row_to_zeros)
{
    tcase tc;
    tc_begin(&tc, "rms_norm of a zero row, eps 0");
    sy_tensor *x = tc_input(&tc, "x", SY_DTYPE_F32, 64, 3, 1, 1);
    memset((float *)sy_graph_host_data(tc.g, x) + 64, 0, 64 * sizeof(float));
    sy_op_params p = {.f = {0.0f}};
    tc_output(&tc, tc_node(&tc, SY_OP_RMS_NORM, "y", &x, 1, &p));
    tc_run(&tc, (tol){2e-6, 1e-6});
    tc_end(&tc);
}

/* -------------------------------------------------------------- softmax */

static void check_softmax(float scale, int64_t causal, int64_t n_past, int64_t window)
{
    tcase tc;
    tc_begin(&tc, "softmax scale %g causal %lld n_past %lld window %lld", (double)scale,
             (long long)causal, (long long)n_past, (long long)window);
    sy_tensor *x = tc_input(&tc, "x", SY_DTYPE_F32, 37, 24, 30, 1);
    sy_op_params p = {.i = {causal, n_past, window}, .f = {scale}};
    tc_output(&tc, tc_node(&tc, SY_OP_SOFTMAX, "y", &x, 1, &p));
    tc_run(&tc, (tol){4e-6, 1e-6});
    tc_end(&tc);
}

Test(cpu_rows, applies_softmax_without_masks) { check_softmax(2.5f, 0, 0, 0); }
Test(cpu_rows, applies_softmax_with_a_causal_mask) { check_softmax(0.5f, 1, 20, 0); }
Test(cpu_rows, applies_softmax_with_a_causal_window) { check_softmax(1.0f, 1, 30, 8); }
Test(cpu_rows, zeroes_softmax_rows_whose_keys_are_all_masked) { check_softmax(1.0f, 0, 50, 4); }

/* ----------------------------------------------------------------- rope */

static void check_rope(int64_t mode, int64_t n_rot, float base, float freq_scale)
{
    tcase tc;
    tc_begin(&tc, "rope mode %lld n_rot %lld base %g scale %g", (long long)mode, (long long)n_rot,
             (double)base, (double)freq_scale);
    const int64_t d = 64, h = 8, t = 50;
    sy_tensor *x = tc_input(&tc, "x", SY_DTYPE_F32, d, h, t, 1);
    int32_t *pos = tc_alloc(&tc, t * sizeof(int32_t));
    for (int64_t i = 0; i < t; i++)
        pos[i] = (int32_t)trng_below(&tc.rng, 4096);
    const int64_t pne[4] = {t, 1, 1, 1};
    sy_tensor *in[2] = {x, tc_leaf(&tc, "pos", SY_DTYPE_I32, pne, SY_ROLE_INPUT, pos)};
    sy_op_params p = {.i = {mode, n_rot}, .f = {base, freq_scale}};
    tc_output(&tc, tc_node(&tc, SY_OP_ROPE, "y", in, 2, &p));
    tc_run(&tc, (tol){2e-6, 2e-6});
    tc_end(&tc);
}

Test(cpu_rows, rotates_adjacent_pairs_in_normal_mode)
{
    check_rope(SY_ROPE_NORMAL, 64, 10000.0f, 0.0f);
    check_rope(SY_ROPE_NORMAL, 32, 500000.0f, 0.25f);
}

Test(cpu_rows, rotates_split_halves_in_neox_mode)
{
    check_rope(SY_ROPE_NEOX, 64, 10000.0f, 1.0f);
    check_rope(SY_ROPE_NEOX, 16, 10000.0f, 0.5f);
}

/* --------------------------------------------------------------- argmax */

static void check_argmax(int64_t n, int64_t m)
{
    tcase tc;
    tc_begin(&tc, "argmax [%lld,%lld]", (long long)n, (long long)m);
    sy_tensor *x = tc_input(&tc, "x", SY_DTYPE_F32, n, m, 1, 1);
    float *data = sy_graph_host_data(tc.g, x);
    /* Two equal maxima per row: the first one wins. */
    for (int64_t r = 0; r < m; r++) {
        int64_t a = trng_below(&tc.rng, (uint32_t)(n / 2));
        int64_t b = n / 2 + trng_below(&tc.rng, (uint32_t)(n / 2));
        data[r * n + a] = 5.0f;
        data[r * n + b] = 5.0f;
    }
    data[1] = NAN; /* a NaN logit is no candidate */
    tc_output(&tc, tc_node(&tc, SY_OP_ARGMAX, "ids", &x, 1, NULL));
    tc_run(&tc, TOL_EXACT);
    tc_end(&tc);
}

Test(cpu_rows, finds_the_first_maximum_of_one_long_row) { check_argmax(50000, 1); }
Test(cpu_rows, finds_the_first_maximum_of_each_row)
{
    check_argmax(300, 4);
    check_argmax(9000, 4);
}

/* ------------------------------------------------------------ attention */

static void check_attention(sy_dtype kt, sy_dtype vt, int64_t t, int64_t s, int64_t n_past,
                            int64_t window)
{
    tcase tc;
    tc_begin(&tc, "attention k=%s v=%s T=%lld S=%lld n_past=%lld window=%lld", sy_dtype_name(kt),
             sy_dtype_name(vt), (long long)t, (long long)s, (long long)n_past, (long long)window);
    const int64_t d = 64, hq = 8, hkv = 2;
    sy_tensor *in[3] = {tc_input(&tc, "q", SY_DTYPE_F32, d, hq, t, 1),
                        tc_input(&tc, "k", kt, d, hkv, s, 1), tc_input(&tc, "v", vt, d, hkv, s, 1)};
    sy_op_params p = {.i = {n_past, window}, .f = {0.125f * 3.0f}};
    tc_output(&tc, tc_node(&tc, SY_OP_ATTENTION, "o", in, 3, &p));
    tc_run(&tc, (tol){2e-5, 2e-5});
    tc_end(&tc);
}

static void check_attention_all(sy_dtype kt, sy_dtype vt)
{
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

/* ----------------------------------------------------------------- copy */

static bool copy_writable(sy_dtype dst, sy_dtype src)
{
    return dst == src || !(dst == SY_DTYPE_Q4_K || dst == SY_DTYPE_Q5_K || dst == SY_DTYPE_Q6_K);
}

static void check_copy(sy_dtype src, sy_dtype dst, int64_t rows)
{
    tcase tc;
    tc_begin(&tc, "copy %s -> %s, %lld rows", sy_dtype_name(src), sy_dtype_name(dst),
             (long long)rows);
    sy_tensor *x = tc_input(&tc, "x", src, row_for(src), rows, 2, 1);
    sy_op_params p = {.i = {dst}};
    tc_output(&tc, tc_node(&tc, SY_OP_COPY, "y", &x, 1, &p));
    tc_run(&tc, TOL_EXACT);
    tc_end(&tc);
}

Test(cpu_memory, copies_between_every_pair_of_dtypes)
{
    for (size_t i = 0; i < N_ALL_DTYPES; i++)
        for (size_t j = 0; j < N_ALL_DTYPES; j++)
            if (copy_writable(all_dtypes[j], all_dtypes[i]))
                check_copy(all_dtypes[i], all_dtypes[j], 3);
}

Test(cpu_memory, copies_large_tensors_on_every_lane)
{
    for (size_t i = 0; i < N_ALL_DTYPES; i++) {
        check_copy(all_dtypes[i], SY_DTYPE_F32, 100);
        check_copy(all_dtypes[i], all_dtypes[i], 100);
        check_copy(all_dtypes[i], SY_DTYPE_Q8_0, 100);
    }
}

static void check_copy_view(sy_dtype src, sy_dtype dst, bool transpose)
{
    tcase tc;
    tc_begin(&tc, "copy %s view %s -> %s", transpose ? "transposed" : "permuted",
             sy_dtype_name(src), sy_dtype_name(dst));
    sy_tensor *x = tc_input(&tc, "x", src, row_for(src), 300, 3, 1);
    sy_tensor *v;
    if (transpose) {
        v = tc_node(&tc, SY_OP_TRANSPOSE, "xt", &x, 1, NULL);
    } else {
        sy_op_params perm = {.i = {0, 2, 1, 3}};
        v = tc_node(&tc, SY_OP_PERMUTE, "xp", &x, 1, &perm);
    }
    sy_op_params p = {.i = {dst}};
    tc_output(&tc, tc_node(&tc, SY_OP_COPY, "y", &v, 1, &p));
    tc_run(&tc, TOL_EXACT);
    tc_end(&tc);
}

Test(cpu_memory, copies_transposed_and_permuted_views_to_contiguous)
{
    static const sy_dtype plain[] = {SY_DTYPE_F32, SY_DTYPE_F16, SY_DTYPE_BF16, SY_DTYPE_I32};
    for (size_t i = 0; i < sizeof plain / sizeof plain[0]; i++) {
        check_copy_view(plain[i], SY_DTYPE_F32, true);
        check_copy_view(plain[i], SY_DTYPE_F16, true);
        check_copy_view(plain[i], plain[i], true);
    }
    for (size_t i = 0; i < N_ALL_DTYPES; i++) {
        check_copy_view(all_dtypes[i], SY_DTYPE_F32, false);
        check_copy_view(all_dtypes[i], all_dtypes[i], false);
    }
}

/* --------------------------------------------------------- long graphs */

Test(cpu_graph, runs_hundreds_of_dispatches_in_one_execute)
{
    tcase tc;
    tc_begin(&tc, "chain of 600 nodes");
    sy_tensor *x = tc_input(&tc, "x", SY_DTYPE_F32, 8192, 3, 1, 1);
    sy_tensor *w = tc_input(&tc, "w", SY_DTYPE_F32, 8192, 1, 1, 1);
    sy_op_params eps = {.f = {1e-6f}};
    char name[32];
    for (int i = 0; i < 300; i++) {
        snprintf(name, sizeof name, "norm%d", i);
        x = tc_node(&tc, SY_OP_RMS_NORM, name, &x, 1, &eps);
        sy_tensor *in[2] = {x, w};
        snprintf(name, sizeof name, "mul%d", i);
        x = tc_node(&tc, SY_OP_MUL, name, in, 2, NULL);
    }
    tc_output(&tc, x);
    tc_run(&tc, (tol){1e-4, 1e-5});
    tc_end(&tc);
}

/* -------------------------------------------------------- device facts */

Test(cpu_device, describes_one_cpu_device_with_unified_memory)
{
    tcase tc;
    memset(&tc, 0, sizeof tc);
    uint32_t dev = 0;
    sy_runtime *rt = tc_runtime(&tc, &run_cfgs[0], &dev);
    sy_device_desc d;
    memset(&d, 0, sizeof d);
    cr_assert_eq(sy_runtime_query_device(rt, dev, &d), SY_OK);
    cr_assert_str_eq(d.name, "cpu");
    cr_assert_eq(d.kind, SY_DEVICE_CPU);
    cr_assert_eq(d.unified_memory, 1);
    cr_assert_gt(d.memory_bytes, 0);
    cr_assert_gt(d.compute_units, 0);
    cr_assert_neq(d.model[0], '\0');
    cr_assert(strstr(d.topology, "core") != NULL, "topology: %s", d.topology);
    cr_assert(d.peak_flops == 0.0 && d.peak_bandwidth == 0.0, "peaks are left to the probe");
    sy_runtime_destroy(rt);
}

Test(cpu_device, honours_the_isa_and_thread_overrides)
{
    tcase tc;
    memset(&tc, 0, sizeof tc);
    const run_cfg cfg = {"scalar", "3"};
    uint32_t dev = 0;
    sy_runtime *rt = tc_runtime(&tc, &cfg, &dev);
    sy_device_desc d;
    memset(&d, 0, sizeof d);
    cr_assert_eq(sy_runtime_query_device(rt, dev, &d), SY_OK);
    cr_assert(strstr(d.driver, "scalar kernels") != NULL, "driver: %s", d.driver);
    cr_assert(strstr(d.driver, "3 threads") != NULL, "driver: %s", d.driver);
    sy_runtime_destroy(rt);
}

Test(cpu_device, warns_about_an_unknown_isa_and_keeps_going)
{
    tcase tc;
    memset(&tc, 0, sizeof tc);
    const run_cfg cfg = {"sse9000", "1"};
    uint32_t dev = 0;
    sy_runtime *rt = tc_runtime(&tc, &cfg, &dev);
    cr_assert(strstr(tc.log, "SWITCHYARD_CPU_ISA='sse9000'") != NULL, "log:\n%s", tc.log);
    sy_runtime_destroy(rt);
}

/* A node built by hand, outside any graph. */
static void hand_node(sy_node *node, sy_tensor *in, sy_tensor *out, uint32_t op, sy_dtype in_type)
{
    memset(node, 0, sizeof *node);
    memset(in, 0, sizeof *in);
    memset(out, 0, sizeof *out);
    in->dtype = in_type;
    in->ne[0] = 256;
    in->ne[1] = in->ne[2] = in->ne[3] = 1;
    sy_tensor_set_contiguous_strides(in);
    *out = *in;
    out->dtype = SY_DTYPE_F32;
    sy_tensor_set_contiguous_strides(out);
    node->op = op;
    node->n_inputs = 1;
    node->inputs[0] = in;
    node->output = out;
}

Test(cpu_device, says_why_it_refuses_a_node)
{
    tcase tc;
    memset(&tc, 0, sizeof tc);
    uint32_t dev = 0;
    sy_runtime *rt = tc_runtime(&tc, &run_cfgs[0], &dev);
    sy_node node;
    sy_tensor in, out;
    sy_support why;

    hand_node(&node, &in, &out, SY_OP_COPY, SY_DTYPE_F32);
    node.params.i[0] = SY_DTYPE_Q4_K;
    cr_assert_not(sy_runtime_device_supports(rt, dev, &node, &why));
    cr_assert_eq(why.reason, SY_UNSUPPORTED_DTYPE);
    cr_assert(strstr(why.text, "q4_k") != NULL, "reason: %s", why.text);

    hand_node(&node, &in, &out, SY_OP_COUNT + 7, SY_DTYPE_F32);
    cr_assert_not(sy_runtime_device_supports(rt, dev, &node, &why));
    cr_assert_eq(why.reason, SY_UNSUPPORTED_OP);

    hand_node(&node, &in, &out, SY_OP_SILU, SY_DTYPE_Q8_0);
    cr_assert_not(sy_runtime_device_supports(rt, dev, &node, &why));
    cr_assert_eq(why.reason, SY_UNSUPPORTED_DTYPE);

    hand_node(&node, &in, &out, SY_OP_SILU, SY_DTYPE_F32);
    cr_assert(sy_runtime_device_supports(rt, dev, &node, &why), "refused silu: %s", why.text);
    sy_runtime_destroy(rt);
}

/* ------------------------------------------------- the module, directly */

typedef struct direct_host {
    sy_host host;
    char log[4096];
    size_t log_used;
} direct_host;

static void direct_log(void *ctx, sy_log_level level, const char *msg)
{
    direct_host *h = ctx;
    int n = snprintf(h->log + h->log_used, sizeof h->log - h->log_used, "%s\n", msg);
    if (n > 0 && (size_t)n < sizeof h->log - h->log_used)
        h->log_used += (size_t)n;
}

static void *direct_alloc(void *ctx, size_t size, size_t align)
{
    void *p = NULL;
    return posix_memalign(&p, align < sizeof(void *) ? sizeof(void *) : align, size ? size : 1) == 0
               ? p
               : NULL;
}

static void direct_free(void *ctx, void *ptr)
{
    free(ptr);
}

static const char *direct_op_name(void *ctx, uint32_t op)
{
    return sy_op_name((sy_op)op);
}

static sy_status direct_reference(void *ctx, const sy_node *node)
{
    return sy_op_reference_execute(node);
}

static void direct_cost(void *ctx, const sy_node *node, uint64_t *out_flops, uint64_t *out_bytes)
{
    sy_op_cost(node, out_flops, out_bytes);
}

static void direct_host_init(direct_host *h)
{
    memset(h, 0, sizeof *h);
    h->host.abi_version = SY_PLUGIN_ABI_VERSION;
    h->host.struct_size = sizeof h->host;
    h->host.ctx = h;
    h->host.log = direct_log;
    h->host.alloc = direct_alloc;
    h->host.free = direct_free;
    h->host.op_name = direct_op_name;
    h->host.reference_execute = direct_reference;
    h->host.op_cost = direct_cost;
}

static void *open_module(void)
{
    const char *dir = getenv("SWITCHYARD_PLUGIN_PATH");
    cr_assert_not_null(dir, "SWITCHYARD_PLUGIN_PATH is not set");
    char path[4096];
    snprintf(path, sizeof path, "%s/sy-cpu.so", dir);
    void *so = dlopen(path, RTLD_NOW | RTLD_LOCAL);
    cr_assert_not_null(so, "dlopen %s: %s", path, dlerror());
    return so;
}

static const sy_plugin_desc *query_module(void *so, uint32_t abi)
{
    sy_plugin_query_fn q;
    void *sym = dlsym(so, SY_PLUGIN_ENTRY_SYMBOL);
    cr_assert_not_null(sym, "no %s", SY_PLUGIN_ENTRY_SYMBOL);
    memcpy(&q, &sym, sizeof q);
    return q(abi);
}

Test(cpu_module, exports_only_its_query_symbol)
{
    void *so = open_module();
    cr_assert_not_null(dlsym(so, SY_PLUGIN_ENTRY_SYMBOL));
    cr_assert_null(dlsym(so, "cpu_device_init"));
    cr_assert_null(dlsym(so, "cpu_pool_run"));
    cr_assert_null(dlsym(so, "sy__dequantize_row"));
    dlclose(so);
}

Test(cpu_module, refuses_a_host_of_another_abi_major)
{
    void *so = open_module();
    cr_assert_null(query_module(so, (SY_PLUGIN_ABI_MAJOR + 1) << 16));
    const sy_plugin_desc *d = query_module(so, SY_PLUGIN_ABI_VERSION);
    cr_assert_not_null(d);
    cr_assert_eq(d->abi_version, SY_PLUGIN_ABI_VERSION);
    cr_assert_eq(d->struct_size, sizeof(sy_plugin_desc));
    cr_assert_str_eq(d->name, "cpu");
    dlclose(so);
}

Test(cpu_module, moves_bytes_through_its_buffers)
{
    void *so = open_module();
    const sy_plugin_desc *d = query_module(so, SY_PLUGIN_ABI_VERSION);
    direct_host h;
    direct_host_init(&h);
    void *state = NULL;
    cr_assert_eq(d->init(&h.host, &state), SY_OK, "init: %s", h.log);
    cr_assert_eq(d->device_count(state), 1);

    uint8_t src[1000], dst[1000];
    for (int i = 0; i < 1000; i++)
        src[i] = (uint8_t)(i * 7);
    void *a = NULL, *b = NULL;
    cr_assert_eq(d->buffer_alloc(state, 0, 1000, &a), SY_OK);
    cr_assert_eq(d->buffer_alloc(state, 0, 1000, &b), SY_OK);
    cr_assert_eq((uintptr_t)d->buffer_host_ptr(state, 0, a) % 64, 0, "buffers are 64-byte aligned");
    cr_assert_eq(d->copy_in(state, 0, a, 0, src, 1000), SY_OK);
    cr_assert_eq(d->copy_device(state, 0, b, 10, 0, a, 0, 990), SY_OK);
    cr_assert_eq(d->copy_out(state, 0, b, 10, dst, 990), SY_OK);
    cr_assert_eq(memcmp(src, dst, 990), 0);
    cr_assert_neq(d->copy_in(state, 0, a, 900, src, 101), SY_OK, "copy past the end refused");
    cr_assert_neq(d->copy_out(state, 0, a, 1001, dst, 0), SY_OK, "offset past the end refused");

    void *imported = NULL;
    cr_assert_eq(d->buffer_import_host(state, 0, src, sizeof src, &imported), SY_OK);
    cr_assert_eq(d->buffer_host_ptr(state, 0, imported), (void *)src, "import does not copy");
    d->buffer_free(state, 0, imported);
    d->buffer_free(state, 0, a);
    d->buffer_free(state, 0, b);
    cr_assert_eq(d->synchronize(state, 0), SY_OK);
    d->deinit(state);
    dlclose(so);
}

static void check_self_test(const char *isa, const char *threads)
{
    setenv("SWITCHYARD_CPU_ISA", isa, 1);
    setenv("SWITCHYARD_THREADS", threads, 1);
    void *so = open_module();
    const sy_plugin_desc *d = query_module(so, SY_PLUGIN_ABI_VERSION);
    direct_host h;
    direct_host_init(&h);
    void *state = NULL;
    cr_assert_eq(d->init(&h.host, &state), SY_OK, "init: %s", h.log);
    char msg[256] = "";
    sy_status st = d->self_test(state, 0, msg, sizeof msg);
    cr_assert_eq(st, SY_OK, "self-test (%s, %s threads): %s", isa, threads, msg);
    d->deinit(state);
    dlclose(so);
}

Test(cpu_module, passes_its_self_test_with_every_kernel_table)
{
    check_self_test("scalar", "1");
    check_self_test("scalar", "3");
    check_self_test("auto", "2");
}

Test(cpu_module, logs_and_never_fails_on_a_bad_thread_count)
{
    setenv("SWITCHYARD_THREADS", "lots", 1);
    void *so = open_module();
    const sy_plugin_desc *d = query_module(so, SY_PLUGIN_ABI_VERSION);
    direct_host h;
    direct_host_init(&h);
    void *state = NULL;
    cr_assert_eq(d->init(&h.host, &state), SY_OK);
    cr_assert(strstr(h.log, "SWITCHYARD_THREADS='lots'") != NULL, "log: %s", h.log);
    d->deinit(state);
    dlclose(so);
}
