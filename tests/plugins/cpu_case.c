/* Test harness of the CPU plugin suites: random inputs from a fresh seed,
 * graphs run on the reference and on the cpu device under every
 * configuration, and comparisons that print the seed on failure. */
#include "cpu_case.h"
#include "cpu_isa.h"

#include <criterion/criterion.h>
#include <math.h>
#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>
#include <unistd.h>

/* ------------------------------------------------------------ randomness */

void trng_init(trng *r)
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

uint32_t trng_below(trng *r, uint32_t n)
{
    return (uint32_t)(trng_next(r) >> 33) % n;
}

float trng_unit(trng *r)
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

void fill_random(trng *r, sy_dtype dtype, void *dst, int64_t n)
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
        case SY_DTYPE_Q5_0:
            put16(blk, trng_f16(r, 9, 10, true));
            break;
        case SY_DTYPE_Q5_1:
            put16(blk, trng_f16(r, 8, 9, false));
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

const tol TOL_EXACT = {0.0, 0.0};

/* Every ISA level is forced once at least (auto is the best this CPU
 * has); a level the CPU cannot run is skipped (tc_run_expect). */
const run_cfg run_cfgs[N_RUN_CFGS] = {
    {"scalar", "1"}, {"scalar", "2"},  {"scalar", "3"}, {"avx2", "1"},
    {"avx2", "2"},   {"avx2", "3"},    {"avxvnni", "2"}, {"avx512", "2"},
    {"avx512gfni", "2"}, {"neon", "2"}, {"dotprod", "2"}, {"auto", "1"},
    {"auto", "2"},   {"auto", "3"},
};

void tc_begin(tcase *tc, const char *fmt, ...)
{
    memset(tc, 0, sizeof *tc);
    trng_init(&tc->rng);
    va_list ap;
    va_start(ap, fmt);
    vsnprintf(tc->what, sizeof tc->what, fmt, ap);
    va_end(ap);
    cr_assert_eq(sy_graph_create(&tc->g), SY_OK);
}

void tc_end(tcase *tc)
{
    sy_graph_destroy(tc->g);
    for (uint32_t i = 0; i < tc->n_bufs; i++)
        free(tc->bufs[i]);
    tc->n_bufs = 0;
}

void *tc_alloc(tcase *tc, size_t size)
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
sy_tensor *tc_leaf(tcase *tc, const char *name, sy_dtype dtype, const int64_t ne[4],
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

sy_tensor *tc_input(tcase *tc, const char *name, sy_dtype dtype, int64_t ne0, int64_t ne1,
                           int64_t ne2, int64_t ne3)
{
    const int64_t ne[4] = {ne0, ne1, ne2, ne3};
    return tc_leaf(tc, name, dtype, ne, SY_ROLE_INPUT, NULL);
}

sy_tensor *tc_node(tcase *tc, sy_op op, const char *name, sy_tensor *const *in, uint32_t n,
                          const sy_op_params *p)
{
    sy_tensor *out = NULL;
    sy_status st = sy_graph_add_node(tc->g, op, name, in, n, p, &out);
    cr_assert_eq(st, SY_OK, "%s: add_node %s: %s", tc->what, name, sy_graph_last_error(tc->g));
    return out;
}

/* Compares the result of |t| after the run. */
void tc_output(tcase *tc, sy_tensor *t)
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
void tc_state(tcase *tc, sy_tensor *t)
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
                       const void *got, const void *want, size_t size, tol tl, const float *bound)
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
        const double lim = tl.rel * fabs(w[i]) + tl.abs * max + (bound ? bound[i] : 0.0);
        cr_assert(err <= lim,
                  "%s [%s isa, %s threads, seed %llu]: %s '%s'[%zu] = %.9g, reference %.9g "
                  "(error %.3g > %.3g)",
                  tc->what, cfg->isa, cfg->threads, (unsigned long long)tc->rng.seed, what, t->name,
                  i, (double)g[i], (double)w[i], err, lim);
    }
}

sy_runtime *tc_runtime(tcase *tc, const run_cfg *cfg, uint32_t *out_dev)
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
void tc_run_expect(tcase *tc, tol tl, sy_status expect)
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
        if (strstr(tc->log, "' is not available here")) {
            sy_runtime_destroy(rt);
            continue;
        }
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
                           sy_tensor_nbytes(tc->outs[i]), tl, tc->bound[i]);
            for (uint32_t i = 0; i < tc->n_state; i++)
                tc_compare(tc, cfg, "in-place leaf", tc->state[i],
                           sy_graph_host_data(tc->g, tc->state[i]), tc->state_want[i],
                           sy_tensor_nbytes(tc->state[i]), tl, NULL);
        }
        tc_restore_state(tc);
        sy_runtime_destroy(rt);
    }
}

void tc_run(tcase *tc, tol tl)
{
    tc_run_expect(tc, tl, SY_OK);
}

const sy_dtype all_dtypes[N_ALL_DTYPES] = {
    SY_DTYPE_F32,  SY_DTYPE_F16,  SY_DTYPE_BF16, SY_DTYPE_I32,  SY_DTYPE_Q8_0,
    SY_DTYPE_Q4_0, SY_DTYPE_Q4_1, SY_DTYPE_Q4_K, SY_DTYPE_Q5_K, SY_DTYPE_Q6_K,
};

/* Row length that suits every block size. */
int64_t row_for(sy_dtype t)
{
    return sy_dtype_block_size(t) > 32 ? 256 : 64;
}

const cpu_isa_table *tc_simd_table(size_t i)
{
    static const char *const names[TC_SIMD_TABLES] = {"avx2", "avxvnni",    "avx512",
                                                      "avx512gfni", "neon", "dotprod"};
    cpu_isa_features f;
    cpu_isa_detect(&f);
    const cpu_isa_table *t = NULL;
    return i < TC_SIMD_TABLES && cpu_isa_select(&f, names[i], &t) == SY_OK ? t : NULL;
}

void *tc_xalloc(size_t size)
{
    void *p = aligned_alloc(64, (size + 63) / 64 * 64);
    cr_assert_not_null(p);
    return p;
}
