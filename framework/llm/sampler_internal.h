/* What sampler.c and sampler_select.c share: the candidate type, the
 * branch-free helpers of the whole-vocabulary passes, and the passes and
 * selections that sampler_select.c implements. */
#ifndef SY_SAMPLER_INTERNAL_H
#define SY_SAMPLER_INTERNAL_H

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>
#include <string.h>

/* Lanes of the vectorisable passes. */
#define LANES 8

/* One token under consideration: its logit, its unnormalised probability
 * exp((logit - max) / T) once computed, and its id. */
typedef struct cand {
    float logit;
    float w;
    int32_t id;
} cand;

static inline uint32_t f32_bits(float f)
{
    uint32_t u;
    memcpy(&u, &f, sizeof u);
    return u;
}

static inline float f32_from_bits(uint32_t u)
{
    float f;
    memcpy(&f, &u, sizeof f);
    return f;
}

/* exp(x) for x in [-87, 0] with a relative error under 1e-7 (Cephes'
 * expf polynomial after reducing by ln 2); 0 for x below -87, for -inf and
 * for NaN, so masked tokens get no weight.  expf() itself is a library
 * call GCC cannot vectorise without -ffast-math, and this pass runs over
 * every token of the vocabulary.  Out-of-range inputs are computed anyway
 * (IEEE arithmetic does not trap) and masked with integer operations,
 * because a float comparison in the loop would stop the vectoriser. */
static inline float exp_nonpos(float x)
{
    const float shifter = 0x1.8p23f; /* adding it rounds to an integer */
    float t = x * 1.44269504088896341f + shifter;
    float n = t - shifter;
    uint32_t ni = f32_bits(t) - f32_bits(shifter);
    float r = x - n * 0.693359375f;
    r = r + n * 2.12194440e-4f;
    float p = 1.9875691500e-4f;
    p = p * r + 1.3981999507e-3f;
    p = p * r + 8.3334519073e-3f;
    p = p * r + 4.1665795894e-2f;
    p = p * r + 1.6666665459e-1f;
    p = p * r + 5.0000001201e-1f;
    p = p * (r * r) + r + 1.0f;
    float e = p * f32_from_bits((ni + 127u) << 23);
    /* As a signed integer, a float in [-87, -0] lies in [INT32_MIN,
     * bits(-87)]; +0 is 0; -inf, NaN and anything below -87 fall outside. */
    int32_t sx = (int32_t)f32_bits(x);
    uint32_t keep = 0u - (uint32_t)((sx <= (int32_t)0xC2AE0000u) | (sx == 0));
    return f32_from_bits(f32_bits(e) & keep);
}

/* The order every stage agrees on: larger logit first, lower id on ties.
 * Ids are unique, so this is a strict total order and selection results
 * do not depend on where an algorithm happened to put equal logits.
 * Candidates never hold NaN logits. */
static inline bool cand_better(const cand *a, const cand *b)
{
    return (a->logit > b->logit) | ((a->logit == b->logit) & (a->id < b->id));
}

static inline void cand_swap(cand *a, cand *b)
{
    cand t = *a;
    *a = *b;
    *b = t;
}

/* qsort order of cand_better: better first. */
int sy__sampler_cand_cmp(const void *pa, const void *pb);
/* Largest value of x[0, n), skipping NaN; -inf when there is none. */
float sy__sampler_max(const float *restrict x, size_t n);
/* w[i] = exp((x[i] - m) / t) for i < n; m >= every x[i], m finite. */
void sy__sampler_exp(const float *restrict x, float *restrict w, size_t n, float m, float t);
/* Sum of w[0, n) in double. */
double sy__sampler_sum(const float *restrict w, size_t n);
/* Sum of c[lo, hi).w in double. */
double sy__sampler_sum_cand(const cand *c, size_t lo, size_t hi);
/* Moves the k best of c[0, n) (0 < k < n) into c[0, k), in no order. */
void sy__sampler_select_top(cand *c, size_t n, size_t k);
/* Moves the best prefix whose weight reaches target to the front, in
 * order, and returns its length (n when all of c weighs less); the
 * prefix's weight goes to *out_mass. */
size_t sy__sampler_select_mass(cand *c, size_t n, double target, double *out_mass);

#endif
