/* Test harness of the OpenCL plugin suites: random inputs from a fresh
 * seed, graphs run on the reference kernels (the ground truth) and on every
 * OpenCL device, both as the device describes itself and with its memory
 * forced discrete (no host mapping, no zero-copy import: the paths a
 * discrete GPU takes), and comparisons that print the seed on failure.
 *
 * The meson test points XDG_CACHE_HOME at a directory of the build tree, so
 * program binaries (and PoCL's own kernel cache) are shared by the suites
 * but never by the user's cache. */
#include "test_opencl_case.h"

#include <criterion/criterion.h>
#include <math.h>
#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>
#include <unistd.h>

/* ------------------------------------------------------------ randomness */

static void orng_init(orng *r)
{
    struct timespec ts;
    clock_gettime(CLOCK_REALTIME, &ts);
    r->seed = ((uint64_t)ts.tv_sec * 1000000007u) ^ (uint64_t)ts.tv_nsec ^
              ((uint64_t)getpid() << 32);
    const char *fixed = getenv("SY_TEST_SEED");
    if (fixed && *fixed)
        r->seed = strtoull(fixed, NULL, 10);
    r->s = r->seed ? r->seed : 0x9e3779b97f4a7c15u;
}

static uint64_t orng_next(orng *r)
{
    /* xorshift64* */
    r->s ^= r->s >> 12;
    r->s ^= r->s << 25;
    r->s ^= r->s >> 27;
    return r->s * 2685821657736338717u;
}

uint32_t orng_below(orng *r, uint32_t n)
{
    return (uint32_t)(orng_next(r) >> 33) % n;
}

float orng_unit(orng *r)
{
    return (float)((double)(orng_next(r) >> 40) / (double)(1u << 23) - 1.0);
}

/* An f16 bit pattern with exponent field in [lo, hi], random sign when
 * |allow_negative|. */
static uint16_t orng_f16(orng *r, unsigned lo, unsigned hi, bool allow_negative)
{
    unsigned e = lo + orng_below(r, hi - lo + 1);
    unsigned sign = allow_negative ? orng_below(r, 2) : 0;
    return (uint16_t)((sign << 15) | (e << 10) | orng_below(r, 1024));
}

static void put16(uint8_t *p, uint16_t v)
{
    memcpy(p, &v, sizeof v);
}

void oc_fill_random(orng *r, sy_dtype dtype, void *dst, int64_t n)
{
    uint8_t *b = dst;
    switch (dtype) {
    case SY_DTYPE_F32:
        for (int64_t i = 0; i < n; i++)
            ((float *)dst)[i] = orng_unit(r);
        return;
    case SY_DTYPE_F16:
        for (int64_t i = 0; i < n; i++)
            put16(b + 2 * i, orng_f16(r, 11, 15, true));
        return;
    case SY_DTYPE_BF16:
        for (int64_t i = 0; i < n; i++)
            put16(b + 2 * i, (uint16_t)((orng_below(r, 2) << 15) |
                                        ((123 + orng_below(r, 5)) << 7) | orng_below(r, 128)));
        return;
    case SY_DTYPE_I32:
        for (int64_t i = 0; i < n; i++)
            ((int32_t *)dst)[i] = (int32_t)orng_below(r, 201) - 100;
        return;
    default:
        break;
    }
    const uint32_t ts = sy_dtype_type_size(dtype);
    const int64_t blocks = n / sy_dtype_block_size(dtype);
    for (int64_t i = 0; i < blocks * ts; i++)
        b[i] = (uint8_t)orng_next(r);
    for (int64_t k = 0; k < blocks; k++) {
        uint8_t *blk = b + k * ts;
        switch (dtype) {
        case SY_DTYPE_Q8_0:
            put16(blk, orng_f16(r, 6, 7, true));
            break;
        case SY_DTYPE_Q4_0:
        case SY_DTYPE_Q5_0:
            put16(blk, orng_f16(r, 10, 11, true));
            break;
        case SY_DTYPE_Q4_1:
        case SY_DTYPE_Q5_1:
            put16(blk, orng_f16(r, 9, 10, false));
            put16(blk + 2, orng_f16(r, 12, 13, true));
            break;
        case SY_DTYPE_Q4_K:
        case SY_DTYPE_Q5_K:
            put16(blk, orng_f16(r, 3, 4, false));
            put16(blk + 2, orng_f16(r, 3, 4, false));
            break;
        case SY_DTYPE_Q6_K:
            put16(blk + 208, orng_f16(r, 2, 3, true));
            break;
        default:
            break;
        }
    }
}

/* ------------------------------------------------------------- test case */

const otol OTOL_EXACT = {0.0, 0.0};

const sy_dtype o_all_dtypes[O_N_DTYPES] = {
    SY_DTYPE_F32,  SY_DTYPE_F16,  SY_DTYPE_BF16, SY_DTYPE_I32,  SY_DTYPE_Q8_0, SY_DTYPE_Q4_0,
    SY_DTYPE_Q4_1, SY_DTYPE_Q5_0, SY_DTYPE_Q5_1, SY_DTYPE_Q4_K, SY_DTYPE_Q5_K, SY_DTYPE_Q6_K,
};

int64_t o_row_for(sy_dtype t)
{
    return sy_dtype_block_size(t) > 32 ? 256 : 64;
}

void oc_begin(ocase *tc, const char *fmt, ...)
{
    memset(tc, 0, sizeof *tc);
    orng_init(&tc->rng);
    va_list ap;
    va_start(ap, fmt);
    vsnprintf(tc->what, sizeof tc->what, fmt, ap);
    va_end(ap);
    cr_assert_eq(sy_graph_create(&tc->g), SY_OK);
}

void oc_end(ocase *tc)
{
    sy_graph_destroy(tc->g);
    tc->g = NULL;
    for (uint32_t i = 0; i < tc->n_bufs; i++)
        free(tc->bufs[i]);
    tc->n_bufs = 0;
}

void *oc_alloc(ocase *tc, size_t size)
{
    cr_assert_lt(tc->n_bufs, OC_MAX_BUFS, "test uses too many buffers");
    size_t rounded = (size + 63) / 64 * 64;
    void *p = aligned_alloc(64, rounded ? rounded : 64);
    cr_assert_not_null(p);
    memset(p, 0, rounded ? rounded : 64);
    tc->bufs[tc->n_bufs++] = p;
    return p;
}

static size_t oc_bytes(sy_dtype dtype, const int64_t ne[4])
{
    return (size_t)(ne[0] / sy_dtype_block_size(dtype) * sy_dtype_type_size(dtype) * ne[1] *
                    ne[2] * ne[3]);
}

sy_tensor *oc_leaf(ocase *tc, const char *name, sy_dtype dtype, const int64_t ne[4],
                   sy_tensor_role role, void *data)
{
    uint32_t nd = 1;
    for (uint32_t d = 1; d < 4; d++)
        if (ne[d] != 1)
            nd = d + 1;
    if (!data) {
        data = oc_alloc(tc, oc_bytes(dtype, ne));
        oc_fill_random(&tc->rng, dtype, data, ne[0] * ne[1] * ne[2] * ne[3]);
    }
    sy_tensor *t = NULL;
    sy_status st = sy_graph_add_tensor(tc->g, name, dtype, nd, ne, role, data, &t);
    cr_assert_eq(st, SY_OK, "%s: add_tensor %s: %s", tc->what, name, sy_graph_last_error(tc->g));
    return t;
}

sy_tensor *oc_input(ocase *tc, const char *name, sy_dtype dtype, int64_t ne0, int64_t ne1,
                    int64_t ne2, int64_t ne3)
{
    const int64_t ne[4] = {ne0, ne1, ne2, ne3};
    return oc_leaf(tc, name, dtype, ne, SY_ROLE_INPUT, NULL);
}

sy_tensor *oc_node(ocase *tc, sy_op op, const char *name, sy_tensor *const *in, uint32_t n,
                   const sy_op_params *p)
{
    sy_tensor *out = NULL;
    sy_status st = sy_graph_add_node(tc->g, op, name, in, n, p, &out);
    cr_assert_eq(st, SY_OK, "%s: add_node %s: %s", tc->what, name, sy_graph_last_error(tc->g));
    return out;
}

void oc_output(ocase *tc, sy_tensor *t)
{
    cr_assert_lt(tc->n_outs, OC_MAX_OUTS);
    cr_assert_eq(sy_graph_mark_output(tc->g, t), SY_OK);
    size_t size = sy_tensor_nbytes(t);
    tc->outs[tc->n_outs] = t;
    tc->want[tc->n_outs] = oc_alloc(tc, size);
    tc->got[tc->n_outs] = oc_alloc(tc, size);
    tc->n_outs++;
}

void oc_state(ocase *tc, sy_tensor *t)
{
    cr_assert_lt(tc->n_state, OC_MAX_OUTS);
    size_t size = sy_tensor_nbytes(t);
    void *host = sy_graph_host_data(tc->g, t);
    tc->state[tc->n_state] = t;
    tc->state_init[tc->n_state] = oc_alloc(tc, size);
    tc->state_want[tc->n_state] = oc_alloc(tc, size);
    memcpy(tc->state_init[tc->n_state], host, size);
    tc->n_state++;
}

static void oc_restore_state(ocase *tc)
{
    for (uint32_t i = 0; i < tc->n_state; i++)
        memcpy(sy_graph_host_data(tc->g, tc->state[i]), tc->state_init[i],
               sy_tensor_nbytes(tc->state[i]));
}

static void oc_log(void *user, sy_log_level level, const char *msg)
{
    ocase *tc = user;
    int n = snprintf(tc->log + tc->log_used, sizeof tc->log - tc->log_used, "%s\n", msg);
    if (n > 0 && (size_t)n < sizeof tc->log - tc->log_used)
        tc->log_used += (size_t)n;
}

sy_runtime *oc_runtime(ocase *tc, bool discrete)
{
    return oc_runtime_cfg(tc, discrete, NULL, NULL);
}

sy_runtime *oc_runtime_cfg(ocase *tc, bool discrete, const char *matvec, const char *wg)
{
    if (wg)
        setenv("SWITCHYARD_OPENCL_MATVEC_WG", wg, 1);
    else
        unsetenv("SWITCHYARD_OPENCL_MATVEC_WG");
    if (discrete)
        setenv("SWITCHYARD_OPENCL_DISCRETE", "1", 1);
    else
        unsetenv("SWITCHYARD_OPENCL_DISCRETE");
    if (matvec)
        setenv("SWITCHYARD_OPENCL_MATVEC", matvec, 1);
    else
        unsetenv("SWITCHYARD_OPENCL_MATVEC");
    sy_runtime_options opts;
    sy_runtime_options_init(&opts);
    opts.no_default_paths = true;
    opts.log_fn = oc_log;
    opts.log_user = tc;
    opts.log_level = SY_LOG_DEBUG;
    tc->log_used = 0;
    tc->log[0] = '\0';
    sy_runtime *rt = NULL;
    sy_status st = sy_runtime_create(&opts, &rt);
    unsetenv("SWITCHYARD_OPENCL_DISCRETE");
    unsetenv("SWITCHYARD_OPENCL_MATVEC");
    unsetenv("SWITCHYARD_OPENCL_MATVEC_WG");
    cr_assert_eq(st, SY_OK, "runtime create failed: %s", sy_status_name(st));
    return rt;
}

uint32_t oc_devices(const sy_runtime *rt, uint32_t out[16])
{
    uint32_t n = 0;
    for (uint32_t i = 0; i < sy_runtime_device_count(rt) && n < 16; i++) {
        sy_device_desc d;
        memset(&d, 0, sizeof d);
        if (sy_runtime_query_device(rt, i, &d) == SY_OK && strncmp(d.name, "opencl:", 7) == 0)
            out[n++] = i;
    }
    return n;
}

static void oc_compare(const ocase *tc, const char *where, const char *what, const sy_tensor *t,
                       const void *got, const void *want, size_t size, otol tl)
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
            cr_assert_fail("%s [%s, seed %llu]: %s '%s' differs at byte %zu "
                           "(got 0x%02x, want 0x%02x)",
                           tc->what, where, (unsigned long long)tc->rng.seed, what, t->name, i,
                           g[i], w[i]);
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
                  "%s [%s, seed %llu]: %s '%s'[%zu] = %.9g, reference %.9g (error %.3g > %.3g)",
                  tc->what, where, (unsigned long long)tc->rng.seed, what, t->name, i,
                  (double)g[i], (double)w[i], err, lim);
    }
}

/* Runs the graph on device |dev| of |rt| and compares. */
static void oc_run_device(ocase *tc, sy_runtime *rt, uint32_t dev, const char *where, otol tl,
                          sy_status expect)
{
    for (uint32_t i = 0; i < tc->n_outs; i++) {
        memset(tc->got[i], 0xA5, sy_tensor_nbytes(tc->outs[i]));
        sy_graph_set_host_data(tc->g, tc->outs[i], tc->got[i]);
    }
    sy_status st = sy_runtime_execute_on(rt, tc->g, dev);
    cr_assert_eq(st, expect, "%s [%s, seed %llu]: execute_on gave %s: %s\nlog:\n%s", tc->what,
                 where, (unsigned long long)tc->rng.seed, sy_status_name(st),
                 sy_runtime_last_error(rt), tc->log);
    if (expect == SY_OK) {
        /* Every node must run on the device: a silent detour through the
         * host's reference would pass every comparison. */
        cr_assert(tc->allow_host || !strstr(tc->log, "runs on the host"),
                  "%s [%s]: a node ran on the host:\n%s", tc->what, where, tc->log);
        for (uint32_t i = 0; i < tc->n_outs; i++)
            oc_compare(tc, where, "output", tc->outs[i], tc->got[i], tc->want[i],
                       sy_tensor_nbytes(tc->outs[i]), tl);
        for (uint32_t i = 0; i < tc->n_state; i++)
            oc_compare(tc, where, "in-place leaf", tc->state[i],
                       sy_graph_host_data(tc->g, tc->state[i]), tc->state_want[i],
                       sy_tensor_nbytes(tc->state[i]), tl);
    }
    oc_restore_state(tc);
}

void oc_run_expect(ocase *tc, otol tl, sy_status expect)
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
    oc_restore_state(tc);

    static const struct {
        bool discrete;
        const char *matvec, *wg;
    } cfgs[] = {{false, NULL, NULL},   {true, NULL, NULL},     {false, "rows", NULL},
                {false, "groups", NULL}, {false, "rows", "16"}, {false, "groups", "16"}};
    /* Matmuls also run with each kernel forced, and with a set work-group
     * (16: rows not a multiple of it are padded to whole groups). */
    const size_t n_cfgs = tc->only_unified ? 1 : tc->both_matvec ? 6 : 2;
    for (size_t c = 0; c < n_cfgs; c++) {
        const bool discrete = cfgs[c].discrete;
        sy_runtime *rt = oc_runtime_cfg(tc, discrete, cfgs[c].matvec, cfgs[c].wg);
        uint32_t devs[16];
        const uint32_t n = oc_devices(rt, devs);
        cr_assert_gt(n, 0, "no OpenCL device (SWITCHYARD_PLUGIN_PATH=%s); log:\n%s",
                     getenv("SWITCHYARD_PLUGIN_PATH") ? getenv("SWITCHYARD_PLUGIN_PATH")
                                                      : "(unset)",
                     tc->log);
        for (uint32_t i = 0; i < n; i++) {
            sy_device_desc d;
            memset(&d, 0, sizeof d);
            sy_runtime_query_device(rt, devs[i], &d);
            char where[96];
            snprintf(where, sizeof where, "%s%s%s%s%s%s", d.name, discrete ? ", discrete" : "",
                     cfgs[c].matvec ? ", matvec " : "", cfgs[c].matvec ? cfgs[c].matvec : "",
                     cfgs[c].wg ? ", work-group " : "", cfgs[c].wg ? cfgs[c].wg : "");
            oc_run_device(tc, rt, devs[i], where, tl, expect);
        }
        sy_runtime_destroy(rt);
    }
}

void oc_run(ocase *tc, otol tl)
{
    oc_run_expect(tc, tl, SY_OK);
}
