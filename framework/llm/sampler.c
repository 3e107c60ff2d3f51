/* Token sampler: repetition penalty, greedy, top-k, temperature, top-p,
 * min-p and a seeded draw (see sampler.h for the chain and its costs).
 *
 * The passes over the whole vocabulary are written as fixed blocks of
 * eight independent lanes over restrict pointers: that is the shape GCC
 * vectorises at -O2 without -ffast-math, and it makes a 262144-token pass
 * a few tens of microseconds instead of a few hundred. */
#include "sampler.h"
#include "sampler_internal.h"

#include <float.h>
#include <math.h>
#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

/* Up to this k, top-k keeps a heap of k entries while scanning the logits:
 * nearly every logit loses to the heap's minimum at once, so the scan costs
 * about one comparison per token.  Past it a quickselect over the whole
 * vocabulary is cheaper than log(k) heap moves per replaced entry. */
#define SAMPLER_HEAP_MAX_K 4096u

/* Top-p over the whole vocabulary first sums the weights into buckets by
 * their float bits (8 exponent and 4 mantissa bits: 16 buckets per octave,
 * the bits of a weight in (0, 1] stay below 2^30), finds the bucket where
 * the mass crosses top_p, and runs the exact selection only inside it. */
#define HIST_SHIFT 19
#define HIST_BUCKETS ((0x3f800000u >> HIST_SHIFT) + 1)

struct sy_sampler {
    sy_sampler_params p;
    uint32_t n_vocab;
    float *work;     /* this step's logits, when they had to be copied */
    float *wbuf;     /* n_vocab weights of the full-vocabulary path */
    cand *cand;      /* n_vocab entries of scratch */
    uint8_t *seen;   /* n_vocab flags, all zero between calls */
    int32_t *hist;   /* ring of the last repeat_last_n accepted tokens */
    uint32_t hist_len, hist_pos;
    uint64_t rng[4]; /* xoshiro256** state */
    double hist_mass[HIST_BUCKETS]; /* top-p over the full vocabulary */
    char err[SY_SAMPLER_ERROR_MAX];
};

/* The tokens a draw chooses from: either the list c[0, n), or, when c is
 * NULL, every token i < n with w[i] > 0 (the full vocabulary, unfiltered),
 * which saves writing a 262144-entry list only to walk it once. */
typedef struct kept_set {
    const cand *c;
    const float *w;
    size_t n;
    double mass; /* sum of the kept weights */
} kept_set;

static sy_status fail_msg(char *buf, size_t size, sy_status st, const char *fmt, ...)
    __attribute__((format(printf, 4, 5)));

static sy_status fail_msg(char *buf, size_t size, sy_status st, const char *fmt, ...)
{
    if (!buf || size == 0)
        return st;
    va_list ap;
    va_start(ap, fmt);
    vsnprintf(buf, size, fmt, ap);
    va_end(ap);
    return st;
}

/* ------------------------------------------------------------------ PRNG */

/* splitmix64 spreads a seed (even 0 or 1) over the 256-bit xoshiro state,
 * which must not be all zero; this is how xoshiro's authors seed it. */
static uint64_t splitmix64(uint64_t *x)
{
    uint64_t z = (*x += 0x9e3779b97f4a7c15ull);
    z = (z ^ (z >> 30)) * 0xbf58476d1ce4e5b9ull;
    z = (z ^ (z >> 27)) * 0x94d049bb133111ebull;
    return z ^ (z >> 31);
}

static void rng_seed(uint64_t st[4], uint64_t seed)
{
    uint64_t x = seed;
    for (int i = 0; i < 4; i++)
        st[i] = splitmix64(&x);
}

static uint64_t rotl(uint64_t x, int k)
{
    return (x << k) | (x >> (64 - k));
}

static uint64_t rng_next(uint64_t st[4])
{
    const uint64_t result = rotl(st[1] * 5, 7) * 9;
    const uint64_t t = st[1] << 17;
    st[2] ^= st[0];
    st[3] ^= st[1];
    st[1] ^= st[2];
    st[0] ^= st[3];
    st[2] ^= t;
    st[3] = rotl(st[3], 45);
    return result;
}

/* Uniform in [0, 1) with 53 random bits. */
static double rng_uniform(uint64_t st[4])
{
    return (double)(rng_next(st) >> 11) * 0x1.0p-53;
}

/* ------------------------------------------------------------ parameters */

void sy_sampler_params_init(sy_sampler_params *params)
{
    if (!params)
        return;
    params->temperature = 0.8f;
    params->top_k = 40;
    params->top_p = 0.95f;
    params->min_p = 0.05f;
    params->repeat_penalty = 1.0f;
    params->repeat_last_n = 64;
    params->seed = 0;
}

sy_status sy_sampler_params_check(const sy_sampler_params *p, uint32_t n_vocab,
                                  sy_sampler_error *out_err)
{
    char *buf = out_err ? out_err->msg : NULL;
    size_t size = out_err ? sizeof out_err->msg : 0;
    if (buf)
        buf[0] = '\0';
    if (!p)
        return fail_msg(buf, size, SY_E_INVALID_ARG, "sampler parameters are NULL");
    if (n_vocab == 0)
        return fail_msg(buf, size, SY_E_INVALID_ARG,
                        "n_vocab is 0; a sampler needs at least one token");
    if (n_vocab > (uint32_t)INT32_MAX)
        return fail_msg(buf, size, SY_E_LIMIT, "n_vocab is %u; token ids are int32, at most %d",
                        n_vocab, INT32_MAX);
    if (!isfinite(p->temperature))
        return fail_msg(buf, size, SY_E_INVALID_ARG,
                        "temperature is %g; it must be finite (<= 0 for greedy)",
                        (double)p->temperature);
    if (!(p->top_p > 0.0f && p->top_p <= 1.0f))
        return fail_msg(buf, size, SY_E_INVALID_ARG,
                        "top_p is %g; it must lie in (0, 1] (1 turns it off)", (double)p->top_p);
    if (!(p->min_p >= 0.0f && p->min_p <= 1.0f))
        return fail_msg(buf, size, SY_E_INVALID_ARG,
                        "min_p is %g; it must lie in [0, 1] (0 turns it off)", (double)p->min_p);
    if (!(p->repeat_penalty > 0.0f) || !isfinite(p->repeat_penalty))
        return fail_msg(buf, size, SY_E_INVALID_ARG,
                        "repeat_penalty is %g; it must be positive and finite (1 turns it off)",
                        (double)p->repeat_penalty);
    if (p->repeat_last_n > SY_SAMPLER_MAX_LAST_N)
        return fail_msg(buf, size, SY_E_LIMIT, "repeat_last_n is %u; at most %u is supported",
                        p->repeat_last_n, SY_SAMPLER_MAX_LAST_N);
    return SY_OK;
}

/* ------------------------------------------------------------- lifetime */

sy_status sy_sampler_create(const sy_sampler_params *params, uint32_t n_vocab,
                            sy_sampler **out_sampler, sy_sampler_error *out_err)
{
    if (out_sampler)
        *out_sampler = NULL;
    sy_status st = sy_sampler_params_check(params, n_vocab, out_err);
    if (st != SY_OK)
        return st;
    if (!out_sampler)
        return fail_msg(out_err ? out_err->msg : NULL, SY_SAMPLER_ERROR_MAX, SY_E_INVALID_ARG,
                        "out_sampler is NULL");

    sy_sampler *s = calloc(1, sizeof *s);
    if (!s)
        goto out_no_memory;
    s->p = *params;
    s->n_vocab = n_vocab;
    s->work = malloc((size_t)n_vocab * sizeof *s->work);
    s->wbuf = malloc((size_t)n_vocab * sizeof *s->wbuf);
    s->cand = malloc((size_t)n_vocab * sizeof *s->cand);
    s->seen = calloc(n_vocab, 1);
    if (params->repeat_last_n > 0)
        s->hist = malloc((size_t)params->repeat_last_n * sizeof *s->hist);
    if (!s->work || !s->wbuf || !s->cand || !s->seen || (params->repeat_last_n > 0 && !s->hist))
        goto out_free_sampler;
    rng_seed(s->rng, params->seed);
    *out_sampler = s;
    return SY_OK;

out_free_sampler:
    sy_sampler_destroy(s);
out_no_memory:
    return fail_msg(out_err ? out_err->msg : NULL, SY_SAMPLER_ERROR_MAX, SY_E_NO_MEMORY,
                    "cannot allocate a sampler for %u tokens", n_vocab);
}

void sy_sampler_destroy(sy_sampler *s)
{
    if (!s)
        return;
    free(s->work);
    free(s->wbuf);
    free(s->cand);
    free(s->seen);
    free(s->hist);
    free(s);
}

const char *sy_sampler_last_error(const sy_sampler *s)
{
    return s ? s->err : "";
}

sy_status sy_sampler_accept(sy_sampler *s, int32_t token)
{
    if (!s)
        return SY_E_INVALID_ARG;
    s->err[0] = '\0';
    if (token < 0 || (uint32_t)token >= s->n_vocab)
        return fail_msg(s->err, sizeof s->err, SY_E_INVALID_ARG,
                        "token %d is outside the vocabulary [0, %u)", token, s->n_vocab);
    if (s->p.repeat_last_n == 0)
        return SY_OK;
    s->hist[s->hist_pos] = token;
    s->hist_pos = (s->hist_pos + 1) % s->p.repeat_last_n;
    if (s->hist_len < s->p.repeat_last_n)
        s->hist_len++;
    return SY_OK;
}

void sy_sampler_reset(sy_sampler *s)
{
    if (!s)
        return;
    s->hist_len = 0;
    s->hist_pos = 0;
    rng_seed(s->rng, s->p.seed);
    s->err[0] = '\0';
}


/* ------------------------------------------------------------- the chain */

/* Returns the logits the chain should read: |logits| itself, or, when a
 * repetition penalty applies, a copy in s->work with the penalty applied.
 * NaN and infinities pass through; every later pass handles them. */
static const float *penalised_logits(sy_sampler *s, const float *logits)
{
    const float pen = s->p.repeat_penalty;
    if (pen == 1.0f || s->hist_len == 0)
        return logits;
    float *w = s->work;
    memcpy(w, logits, (size_t)s->n_vocab * sizeof *w);
    /* |seen| makes each distinct token count once, as llama.cpp does, no
     * matter how many times it occurs in the window. */
    for (uint32_t i = 0; i < s->hist_len; i++) {
        int32_t t = s->hist[i];
        if (s->seen[t])
            continue;
        s->seen[t] = 1;
        w[t] = w[t] > 0.0f ? w[t] / pen : w[t] * pen;
    }
    for (uint32_t i = 0; i < s->hist_len; i++)
        s->seen[s->hist[i]] = 0;
    return w;
}

static sy_status all_masked(sy_sampler *s)
{
    return fail_msg(s->err, sizeof s->err, SY_E_INVALID_ARG,
                    "all %u logits are NaN or -inf; there is no token to sample", s->n_vocab);
}

/* The first index holding the maximum: a vectorised max, then a scan that
 * stops at the first equal value. */
static sy_status argmax(sy_sampler *s, const float *x, int32_t *out_token)
{
    float m = sy__sampler_max(x, s->n_vocab);
    if (m == -INFINITY)
        return all_masked(s);
    uint32_t i = 0;
    while (x[i] != m)
        i++;
    *out_token = (int32_t)i;
    return SY_OK;
}

/* A logit as a candidate key: NaN sorts last (-inf), +inf first among
 * finite keys (FLT_MAX), so that logit - max stays a number. */
static inline float sanitise(float x)
{
    return x != x ? -INFINITY : (x > FLT_MAX ? FLT_MAX : x);
}

static void heap_sift_down(cand *h, size_t k, size_t i)
{
    /* A min-heap in the better-first order: the root is the worst entry,
     * and every child is no better than its parent. */
    for (;;) {
        size_t l = 2 * i + 1, r = l + 1, worst = i;
        if (l < k && cand_better(&h[worst], &h[l]))
            worst = l;
        if (r < k && cand_better(&h[worst], &h[r]))
            worst = r;
        if (worst == i)
            return;
        cand_swap(&h[i], &h[worst]);
        i = worst;
    }
}

/* Fills s->cand[0, k) with the k best tokens of x, in no order. */
static void heap_top_k(sy_sampler *s, const float *x, size_t k)
{
    cand *h = s->cand;
    for (size_t i = 0; i < k; i++)
        h[i] = (cand){sanitise(x[i]), 0.0f, (int32_t)i};
    for (size_t top = k / 2; top-- > 0;)
        heap_sift_down(h, k, top);
    float floor_logit = h[0].logit;
    for (uint32_t t = (uint32_t)k; t < s->n_vocab; t++) {
        /* Later ids lose ties, so only a strictly larger logit enters;
         * NaN never compares larger. */
        if (!(x[t] > floor_logit))
            continue;
        h[0] = (cand){sanitise(x[t]), 0.0f, (int32_t)t};
        heap_sift_down(h, k, 0);
        floor_logit = h[0].logit;
    }
}

/* Applies min-p and top-p to the candidates c[0, n) whose weights are set
 * and whose top-k softmax denominator is |z|, and fills *out_kept. */
static void filter_candidates(sy_sampler *s, size_t n, double z, kept_set *out_kept)
{
    const sy_sampler_params *p = &s->p;
    cand *c = s->cand;
    /* p_i / p_max = w_i because the best token's weight is exp(0) = 1,
     * so min-p is a threshold on w and needs no normalisation. */
    const float thr = p->min_p > 0.0f ? p->min_p : FLT_TRUE_MIN;
    size_t m = 0;
    for (size_t i = 0; i < n; i++) {
        if (c[i].w >= thr)
            c[m++] = c[i];
    }
    /* Min-p ran first, yet the result is the chain's: top-p and min-p each
     * keep a prefix of the same order, so applying both keeps the shorter
     * prefix whichever runs first, as long as top-p measures mass against
     * the whole top-k softmax (z), not against what min-p left. */
    double mass;
    if (p->top_p < 1.0f)
        m = sy__sampler_select_mass(c, m, (double)p->top_p * z, &mass);
    else
        mass = sy__sampler_sum_cand(c, 0, m);
    *out_kept = (kept_set){c, NULL, m, mass};
}

/* Min-p (or just "weight > 0") over the full vocabulary: collects the
 * tokens whose weight in s->wbuf passes.  Under min-p with real logits
 * that is a few dozen tokens, so the branch is predictable. */
static void collect_min_p(sy_sampler *s, const float *x, double z, kept_set *out_kept)
{
    const float thr = s->p.min_p > 0.0f ? s->p.min_p : FLT_TRUE_MIN;
    const float *w = s->wbuf;
    cand *c = s->cand;
    size_t n = 0;
    for (uint32_t i = 0; i < s->n_vocab; i++) {
        if (w[i] >= thr)
            c[n++] = (cand){x[i], w[i], (int32_t)i};
    }
    filter_candidates(s, n, z, out_kept);
}

/* The bucket of weight |w| in [0, 1]; larger weights, larger buckets.
 * The clamp only guards the array should a weight ever exceed 1. */
static inline uint32_t bucket_of(float w)
{
    uint32_t b = f32_bits(w) >> HIST_SHIFT;
    return b < HIST_BUCKETS ? b : HIST_BUCKETS - 1;
}

/* Top-p (and min-p) over the full vocabulary with weights in s->wbuf and
 * denominator |z|, without a selection over every token: bucket masses
 * locate the bucket b holding the top-p boundary, tokens above b are kept
 * whole, and sy__sampler_select_mass() runs on bucket b's tokens only.  Bucket order
 * agrees with the better-first order because a larger weight means a
 * larger logit. */
static void top_p_by_buckets(sy_sampler *s, const float *x, double z, kept_set *out_kept)
{
    const uint32_t nv = s->n_vocab;
    const float *w = s->wbuf;
    double *hm = s->hist_mass;
    memset(hm, 0, sizeof s->hist_mass);
    for (uint32_t i = 0; i < nv; i++)
        hm[bucket_of(w[i])] += w[i];

    const double target = (double)s->p.top_p * z;
    double above = 0.0; /* mass of the buckets above b, every token */
    uint32_t b = HIST_BUCKETS - 1;
    while (b > 0 && above + hm[b] < target) {
        above += hm[b];
        b--;
    }

    /* Tokens above b go to the front of s->cand, bucket b's to the back;
     * min-p drops tokens from both, which is safe because it removes a
     * suffix of the same order (see filter_candidates()). */
    const float thr = s->p.min_p > 0.0f ? s->p.min_p : FLT_TRUE_MIN;
    cand *c = s->cand;
    size_t front = 0, back = nv;
    /* Branch-free: a flat distribution keeps a third of the vocabulary at
     * random, which a branch would mispredict.  Every token is written to
     * both ends and each end advances only when it keeps it; the two slots
     * are distinct while an unkept token remains, and equal (holding the
     * same entry) only for the very last token. */
    for (uint32_t i = 0; i < nv; i++) {
        uint32_t bk = bucket_of(w[i]);
        size_t pass = w[i] >= thr;
        const cand e = {x[i], w[i], (int32_t)i};
        c[front] = e;
        c[back - 1] = e;
        front += pass & (bk > b);
        back -= pass & (bk == b);
    }
    double front_mass = sy__sampler_sum_cand(c, 0, front);
    double b_mass = 0.0;
    size_t r = sy__sampler_select_mass(c + back, nv - back, target - above, &b_mass);
    memmove(c + front, c + back, r * sizeof *c);
    *out_kept = (kept_set){c, NULL, front + r, front_mass + b_mass};
}

/* Runs top-k, softmax with temperature, top-p and min-p on the logits |x|
 * and describes what is left in *out_kept.  When |need_list| is false and
 * nothing filters the full vocabulary, the kept set stays the weight
 * array.  Requires temperature > 0. */
static sy_status build_kept_set(sy_sampler *s, const float *x, bool need_list,
                                kept_set *out_kept)
{
    const sy_sampler_params *p = &s->p;
    const uint32_t nv = s->n_vocab;
    const float t = p->temperature;
    cand *c = s->cand;

    if (p->top_k > 0 && p->top_k < nv) {
        size_t k = p->top_k;
        if (k <= SAMPLER_HEAP_MAX_K) {
            heap_top_k(s, x, k);
        } else {
            for (uint32_t i = 0; i < nv; i++)
                c[i] = (cand){sanitise(x[i]), 0.0f, (int32_t)i};
            sy__sampler_select_top(c, nv, k);
        }
        float m = -INFINITY;
        for (size_t i = 0; i < k; i++)
            m = c[i].logit > m ? c[i].logit : m;
        if (m == -INFINITY)
            return all_masked(s);
        double z = 0.0;
        for (size_t i = 0; i < k; i++) {
            c[i].w = exp_nonpos((c[i].logit - m) / t);
            z += c[i].w;
        }
        filter_candidates(s, k, z, out_kept);
        return SY_OK;
    }

    float m = sy__sampler_max(x, nv);
    if (m == -INFINITY)
        return all_masked(s);
    if (m > FLT_MAX) {
        /* A +inf logit: clamp every +inf to FLT_MAX (in a copy unless
         * the penalty already made one) so that l - m is 0, not NaN. */
        float *w = s->work;
        for (uint32_t i = 0; i < nv; i++)
            w[i] = x[i] > FLT_MAX ? FLT_MAX : x[i];
        x = w;
        m = FLT_MAX;
    }
    sy__sampler_exp(x, s->wbuf, nv, m, t);
    double z = sy__sampler_sum(s->wbuf, nv);
    if (!need_list && p->top_p >= 1.0f && p->min_p <= 0.0f) {
        *out_kept = (kept_set){NULL, s->wbuf, nv, z};
        return SY_OK;
    }
    if (p->top_p < 1.0f)
        top_p_by_buckets(s, x, z, out_kept);
    else
        collect_min_p(s, x, z, out_kept);
    return SY_OK;
}

/* Draws one token from |k| with probability weight / mass. */
static int32_t draw(const kept_set *k, double u01)
{
    const double u = u01 * k->mass;
    double acc = 0.0;
    size_t i = 0;
    if (k->c) {
        const cand *c = k->c;
        /* Skip blocks of four whole, so that the running sum waits on one
         * addition per block rather than per entry. */
        for (; i + 4 <= k->n; i += 4) {
            double blk = ((double)c[i].w + c[i + 1].w) + ((double)c[i + 2].w + c[i + 3].w);
            if (acc + blk > u)
                break;
            acc += blk;
        }
        for (; i < k->n; i++) {
            acc += c[i].w;
            if (u < acc)
                return c[i].id;
        }
        /* Rounding can leave u a hair above the running sum; every listed
         * weight is positive, so the last entry is a fair outcome. */
        return c[k->n - 1].id;
    }
    const float *w = k->w;
    for (; i + 4 <= k->n; i += 4) {
        double blk = ((double)w[i] + w[i + 1]) + ((double)w[i + 2] + w[i + 3]);
        if (acc + blk > u)
            break;
        acc += blk;
    }
    for (; i < k->n; i++) {
        acc += w[i];
        if (u < acc)
            return (int32_t)i;
    }
    /* As above; zero weights are not kept, so take the last positive. */
    i = k->n;
    while (i > 0 && !(w[i - 1] > 0.0f))
        i--;
    return (int32_t)(i > 0 ? i - 1 : 0);
}

sy_status sy_sampler_sample(sy_sampler *s, const float *logits, int32_t *out_token)
{
    if (out_token)
        *out_token = -1;
    if (!s)
        return SY_E_INVALID_ARG;
    s->err[0] = '\0';
    if (!logits || !out_token)
        return fail_msg(s->err, sizeof s->err, SY_E_INVALID_ARG, "logits or out_token is NULL");

    const float *x = penalised_logits(s, logits);
    if (!(s->p.temperature > 0.0f))
        return argmax(s, x, out_token);

    kept_set kept;
    sy_status st = build_kept_set(s, x, false, &kept);
    if (st != SY_OK)
        return st;
    *out_token = draw(&kept, rng_uniform(s->rng));
    return SY_OK;
}

sy_status sy_sampler_query_candidates(sy_sampler *s, const float *logits,
                                      sy_sampler_candidate *out, size_t cap, size_t *out_n)
{
    if (out_n)
        *out_n = 0;
    if (!s)
        return SY_E_INVALID_ARG;
    s->err[0] = '\0';
    if (!logits || !out_n || (cap > 0 && !out))
        return fail_msg(s->err, sizeof s->err, SY_E_INVALID_ARG,
                        "logits, out_n or out (with cap > 0) is NULL");

    const float *x = penalised_logits(s, logits);
    if (!(s->p.temperature > 0.0f)) {
        int32_t tok = -1;
        sy_status st = argmax(s, x, &tok);
        if (st != SY_OK)
            return st;
        if (cap > 0)
            out[0] = (sy_sampler_candidate){tok, x[tok], 1.0f};
        *out_n = 1;
        return SY_OK;
    }

    kept_set kept;
    sy_status st = build_kept_set(s, x, true, &kept);
    if (st != SY_OK)
        return st;
    qsort(s->cand, kept.n, sizeof *s->cand, sy__sampler_cand_cmp);
    for (size_t i = 0; i < kept.n && i < cap; i++)
        out[i] = (sy_sampler_candidate){s->cand[i].id, s->cand[i].logit,
                                        (float)(s->cand[i].w / kept.mass)};
    *out_n = kept.n;
    return SY_OK;
}
