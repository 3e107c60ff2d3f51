/* Helpers shared by the sampler tests (test_sampler.c,
 * test_sampler_edges.c). */
#ifndef SY_TEST_SAMPLER_UTIL_H
#define SY_TEST_SAMPLER_UTIL_H

#include <criterion/criterion.h>
#include <math.h>
#include <stdlib.h>
#include <time.h>
#include <unistd.h>

#include "sampler.h"
/* ----------------------------------------------------------- helpers */

/* Test-local PRNG for logits (never the sampler's own). */
static inline uint64_t mix64(uint64_t *x)
{
    uint64_t z = (*x += 0x9e3779b97f4a7c15ull);
    z = (z ^ (z >> 30)) * 0xbf58476d1ce4e5b9ull;
    z = (z ^ (z >> 27)) * 0x94d049bb133111ebull;
    return z ^ (z >> 31);
}

static inline double unif(uint64_t *x)
{
    return (double)(mix64(x) >> 11) * 0x1.0p-53;
}

/* Roughly normal logits with spread |scale|; when |ties| they are rounded
 * to a coarse grid so that many tokens share a logit. */
static inline void random_logits(uint64_t *x, float *out, uint32_t n, double scale, bool ties)
{
    for (uint32_t i = 0; i < n; i++) {
        double v = (unif(x) + unif(x) + unif(x) + unif(x) - 2.0) * scale;
        out[i] = ties ? (float)(round(v * 2.0) / 2.0) : (float)v;
    }
}

/* A fresh seed per run, as STYLE.md asks; every message prints it. */
static inline uint64_t fresh_seed(void)
{
    struct timespec ts;
    clock_gettime(CLOCK_REALTIME, &ts);
    return (uint64_t)ts.tv_nsec ^ ((uint64_t)ts.tv_sec << 20) ^ ((uint64_t)getpid() << 40);
}

static inline sy_sampler_params params_off(void)
{
    sy_sampler_params p;
    sy_sampler_params_init(&p);
    p.temperature = 1.0f;
    p.top_k = 0;
    p.top_p = 1.0f;
    p.min_p = 0.0f;
    p.repeat_penalty = 1.0f;
    p.repeat_last_n = 64;
    p.seed = 1234;
    return p;
}

static inline sy_sampler *make(const sy_sampler_params *p, uint32_t n_vocab)
{
    sy_sampler *s = NULL;
    sy_sampler_error err;
    sy_status st = sy_sampler_create(p, n_vocab, &s, &err);
    cr_assert_eq(st, SY_OK, "create failed: %s", err.msg);
    cr_assert_not_null(s);
    return s;
}

/* Logits whose softmax at temperature 1 is exactly |probs| (up to float
 * rounding): log p. */
static inline void logits_from_probs(const double *probs, float *out, uint32_t n)
{
    for (uint32_t i = 0; i < n; i++)
        out[i] = probs[i] > 0.0 ? (float)log(probs[i]) : -INFINITY;
}

/* Draws |n_draws| tokens and checks each frequency against |expect|
 * within |tol|; tokens with expect 0 must never appear. */
static inline void check_frequencies(sy_sampler *s, const float *logits, uint32_t n_vocab,
                              const double *expect, int n_draws, double tol)
{
    int *count = calloc(n_vocab, sizeof *count);
    cr_assert_not_null(count);
    for (int d = 0; d < n_draws; d++) {
        int32_t t = -1;
        cr_assert_eq(sy_sampler_sample(s, logits, &t), SY_OK, "%s", sy_sampler_last_error(s));
        cr_assert(t >= 0 && (uint32_t)t < n_vocab, "token %d out of range", t);
        count[t]++;
    }
    for (uint32_t i = 0; i < n_vocab; i++) {
        double f = (double)count[i] / n_draws;
        if (expect[i] == 0.0)
            cr_assert_eq(count[i], 0, "token %u was drawn %d times but is outside the kept set",
                         i, count[i]);
        else
            cr_assert(fabs(f - expect[i]) <= tol, "token %u: frequency %.4f, expected %.4f +- %.3f",
                      i, f, expect[i], tol);
    }
    free(count);
}

/* ------------------------------------------------------------ greedy */

#endif
