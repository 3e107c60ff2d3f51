/* Sampler tests: each stage of the chain against hand-computed or
 * independently computed expectations, seeded determinism, parameter
 * checking (NaN/infinite logits and the timing report are in
 * test_sampler_edges.c). */
#include <criterion/criterion.h>
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>
#include <unistd.h>

#include "test_sampler_util.h"

Test(sampler, greedy_picks_the_arg_max_and_the_first_of_ties)
{
    sy_sampler_params p = params_off();
    p.temperature = 0.0f;
    sy_sampler *s = make(&p, 6);
    const float a[6] = {0.5f, -1.0f, 3.0f, 2.9f, -7.0f, 1.0f};
    const float tie[6] = {1.0f, 4.0f, 2.0f, 4.0f, 4.0f, 0.0f};
    int32_t t = -1;
    cr_assert_eq(sy_sampler_sample(s, a, &t), SY_OK);
    cr_assert_eq(t, 2);
    cr_assert_eq(sy_sampler_sample(s, tie, &t), SY_OK);
    cr_assert_eq(t, 1, "ties must go to the lowest id, got %d", t);
    /* Negative temperature is greedy too. */
    sy_sampler_destroy(s);
    p.temperature = -1.0f;
    s = make(&p, 6);
    cr_assert_eq(sy_sampler_sample(s, tie, &t), SY_OK);
    cr_assert_eq(t, 1);
    sy_sampler_destroy(s);
}

Test(sampler, greedy_skips_nan_logits)
{
    sy_sampler_params p = params_off();
    p.temperature = 0.0f;
    sy_sampler *s = make(&p, 4);
    const float a[4] = {NAN, 1.0f, NAN, 0.5f};
    int32_t t = -1;
    cr_assert_eq(sy_sampler_sample(s, a, &t), SY_OK);
    cr_assert_eq(t, 1);
    sy_sampler_destroy(s);
}

/* ------------------------------------------------------- determinism */

Test(sampler, same_seed_gives_the_same_tokens_and_different_seeds_differ)
{
    uint64_t seed = fresh_seed(), x = seed;
    enum { V = 1000, N = 200 };
    float *logits = malloc(V * sizeof *logits);
    cr_assert_not_null(logits);
    random_logits(&x, logits, V, 1.0, false);
    sy_sampler_params p = params_off();
    p.top_k = 100;
    p.top_p = 0.98f;
    p.seed = mix64(&x);
    sy_sampler *a = make(&p, V), *b = make(&p, V);
    p.seed ^= 1;
    sy_sampler *c = make(&p, V);
    int same_ac = 0;
    for (int i = 0; i < N; i++) {
        int32_t ta, tb, tc;
        cr_assert_eq(sy_sampler_sample(a, logits, &ta), SY_OK);
        cr_assert_eq(sy_sampler_sample(b, logits, &tb), SY_OK);
        cr_assert_eq(sy_sampler_sample(c, logits, &tc), SY_OK);
        cr_assert_eq(ta, tb, "seed %llu: step %d: %d vs %d", (unsigned long long)seed, i, ta, tb);
        same_ac += ta == tc;
    }
    /* About 100 tokens carry the mass, so two independent streams agree
     * on roughly 1 step in 50; agreement everywhere means the seed is
     * ignored. */
    cr_assert_lt(same_ac, N / 2, "seed %llu: seeds s and s^1 agree on %d of %d tokens",
                 (unsigned long long)seed, same_ac, N);
    sy_sampler_destroy(a);
    sy_sampler_destroy(b);
    sy_sampler_destroy(c);
    free(logits);
}

Test(sampler, reset_replays_the_same_tokens_and_forgets_the_history)
{
    enum { V = 50, N = 64 };
    uint64_t seed = fresh_seed(), x = seed;
    float logits[V];
    random_logits(&x, logits, V, 1.0, false);
    sy_sampler_params p = params_off();
    p.repeat_penalty = 1.3f;
    p.repeat_last_n = 8;
    sy_sampler *s = make(&p, V);
    int32_t first[N];
    for (int i = 0; i < N; i++) {
        cr_assert_eq(sy_sampler_sample(s, logits, &first[i]), SY_OK);
        cr_assert_eq(sy_sampler_accept(s, first[i]), SY_OK);
    }
    sy_sampler_reset(s);
    for (int i = 0; i < N; i++) {
        int32_t t;
        cr_assert_eq(sy_sampler_sample(s, logits, &t), SY_OK);
        cr_assert_eq(t, first[i], "seed %llu: step %d after reset: %d vs %d",
                     (unsigned long long)seed, i, t, first[i]);
        cr_assert_eq(sy_sampler_accept(s, t), SY_OK);
    }
    sy_sampler_destroy(s);
}

/* ------------------------------------------------------------- top-k */

Test(sampler, top_k_of_one_equals_greedy)
{
    enum { V = 3000 };
    uint64_t seed = fresh_seed(), x = seed;
    float *logits = malloc(V * sizeof *logits);
    cr_assert_not_null(logits);
    sy_sampler_params pg = params_off(), pk = params_off();
    pg.temperature = 0.0f;
    pk.temperature = 1.5f;
    pk.top_k = 1;
    pk.seed = mix64(&x);
    sy_sampler *g = make(&pg, V), *k = make(&pk, V);
    for (int trial = 0; trial < 200; trial++) {
        /* Tied logits on odd trials check that both break ties alike. */
        random_logits(&x, logits, V, 2.0, trial % 2 == 1);
        int32_t tg, tk;
        cr_assert_eq(sy_sampler_sample(g, logits, &tg), SY_OK);
        cr_assert_eq(sy_sampler_sample(k, logits, &tk), SY_OK);
        cr_assert_eq(tg, tk, "seed %llu: trial %d: greedy %d, top-k=1 %d",
                     (unsigned long long)seed, trial, tg, tk);
    }
    sy_sampler_destroy(g);
    sy_sampler_destroy(k);
    free(logits);
}

/* Reference for the kept set: sort everything, then apply each stage in
 * the documented order, in double precision with libm's exp().
 * *out_ambiguous is set when a top-p or min-p boundary lies within the
 * sampler's float rounding of its threshold. */
typedef struct ref_entry {
    float logit;
    int32_t id;
} ref_entry;

static int ref_cmp(const void *pa, const void *pb)
{
    const ref_entry *a = pa, *b = pb;
    if (a->logit != b->logit)
        return a->logit > b->logit ? -1 : 1;
    return a->id < b->id ? -1 : (a->id > b->id);
}

static size_t reference_kept(const float *logits, uint32_t n, const sy_sampler_params *p,
                             int32_t *out_ids, double *out_probs, bool *out_ambiguous)
{
    ref_entry *e = malloc(n * sizeof *e);
    double *w = malloc(n * sizeof *w);
    cr_assert(e && w);
    for (uint32_t i = 0; i < n; i++)
        e[i] = (ref_entry){isnan(logits[i]) ? -INFINITY : logits[i], (int32_t)i};
    qsort(e, n, sizeof *e, ref_cmp);
    size_t k = (p->top_k > 0 && p->top_k < n) ? p->top_k : n;
    double z = 0.0;
    for (size_t i = 0; i < k; i++) {
        /* The sampler documents that weights below e^-87 count as 0. */
        double d = ((double)e[i].logit - e[0].logit) / p->temperature;
        w[i] = d < -87.0 ? 0.0 : exp(d);
        z += w[i];
    }
    /* The sampler computes weights in float (relative error ~1e-7), so a
     * boundary this close to a threshold may fall either way. */
    const double slack = 1e-5;
    size_t keep = k;
    *out_ambiguous = false;
    if (p->top_p < 1.0f) {
        double target = (double)p->top_p * z, acc = 0.0;
        for (size_t i = 0; i < k; i++) {
            acc += w[i];
            if (fabs(acc - target) <= slack * z)
                *out_ambiguous = true;
            if (acc >= target) {
                keep = i + 1;
                break;
            }
        }
    }
    size_t m = 0;
    double mass = 0.0;
    for (size_t i = 0; i < keep; i++) {
        if (p->min_p > 0.0f && fabs(w[i] - p->min_p) <= slack * p->min_p)
            *out_ambiguous = true;
        if (w[i] > 0.0 && w[i] >= p->min_p) {
            out_ids[m] = e[i].id;
            out_probs[m] = w[i];
            mass += w[i];
            m++;
        }
    }
    for (size_t i = 0; i < m; i++)
        out_probs[i] /= mass;
    free(e);
    free(w);
    return m;
}

Test(sampler, kept_set_matches_a_full_sort_reference_on_random_logits)
{
    enum { V = 8000 };
    uint64_t seed = fresh_seed(), x = seed;
    float *logits = malloc(V * sizeof *logits);
    int32_t *ref_ids = malloc(V * sizeof *ref_ids);
    double *ref_p = malloc(V * sizeof *ref_p);
    sy_sampler_candidate *got = malloc(V * sizeof *got);
    cr_assert(logits && ref_ids && ref_p && got);
    /* 4096 and 4097 straddle the switch from the heap to quickselect. */
    static const uint32_t ks[] = {0, 1, 2, 7, 40, 100, 4096, 4097, 6000, 7999, 8000, 9000};
    int checked = 0;
    for (int trial = 0; trial < 240; trial++) {
        sy_sampler_params p = params_off();
        p.top_k = ks[trial % (sizeof ks / sizeof ks[0])];
        p.temperature = (float)(0.2 + 2.0 * unif(&x));
        p.top_p = trial % 3 == 0 ? 1.0f : (float)(0.05 + 0.95 * unif(&x));
        p.min_p = trial % 4 == 0 ? 0.0f : (float)(0.3 * unif(&x));
        random_logits(&x, logits, V, 1.0 + 3.0 * unif(&x), trial % 5 == 0);
        if (trial % 7 == 0)
            for (int j = 0; j < 50; j++)
                logits[mix64(&x) % V] = NAN;
        bool ambiguous = false;
        size_t m = reference_kept(logits, V, &p, ref_ids, ref_p, &ambiguous);
        if (ambiguous)
            continue;
        sy_sampler *s = make(&p, V);
        size_t n = 0;
        cr_assert_eq(sy_sampler_query_candidates(s, logits, got, V, &n), SY_OK, "%s",
                     sy_sampler_last_error(s));
        cr_assert_eq(n, m,
                     "seed %llu trial %d (k=%u T=%g top_p=%g min_p=%g): kept %zu, reference %zu",
                     (unsigned long long)seed, trial, p.top_k, (double)p.temperature,
                     (double)p.top_p, (double)p.min_p, n, m);
        double sum = 0.0;
        for (size_t i = 0; i < n; i++) {
            cr_assert_eq(got[i].token, ref_ids[i], "seed %llu trial %d: entry %zu is %d, not %d",
                         (unsigned long long)seed, trial, i, got[i].token, ref_ids[i]);
            cr_assert(fabs(got[i].prob - ref_p[i]) <= 1e-6 + 1e-5 * ref_p[i],
                      "seed %llu trial %d: p[%zu] %g vs %g", (unsigned long long)seed, trial, i,
                      (double)got[i].prob, ref_p[i]);
            sum += got[i].prob;
        }
        cr_assert(fabs(sum - 1.0) < 1e-4, "probabilities sum to %g", sum);
        sy_sampler_destroy(s);
        checked++;
    }
    cr_assert_gt(checked, 200, "seed %llu: only %d of 240 trials were unambiguous",
                 (unsigned long long)seed, checked);
    free(logits);
    free(ref_ids);
    free(ref_p);
    free(got);
}

Test(sampler, top_k_draws_only_the_k_largest_logits_in_proportion)
{
    /* Probabilities .4 .3 .2 .1; top-k 2 renormalises the first two. */
    const double probs[4] = {0.1, 0.4, 0.2, 0.3};
    float logits[4];
    logits_from_probs(probs, logits, 4);
    sy_sampler_params p = params_off();
    p.top_k = 2;
    p.seed = 7;
    sy_sampler *s = make(&p, 4);
    const double expect[4] = {0.0, 4.0 / 7.0, 0.0, 3.0 / 7.0};
    check_frequencies(s, logits, 4, expect, 40000, 0.012);
    sy_sampler_destroy(s);
}

/* ------------------------------------------------------------- top-p */

Test(sampler, top_p_keeps_the_smallest_prefix_reaching_p)
{
    /* Sorted probabilities .4 .3 .2 .1 (shuffled ids): prefixes weigh
     * .4, .7, .9, 1.  top_p .65 needs two tokens, .75 three, .4 one. */
    const double probs[4] = {0.2, 0.4, 0.1, 0.3};
    float logits[4];
    logits_from_probs(probs, logits, 4);
    sy_sampler_params p = params_off();
    p.seed = 99;

    p.top_p = 0.65f;
    sy_sampler *s = make(&p, 4);
    sy_sampler_candidate c[4];
    size_t n = 0;
    cr_assert_eq(sy_sampler_query_candidates(s, logits, c, 4, &n), SY_OK);
    cr_assert_eq(n, 2);
    cr_assert_eq(c[0].token, 1);
    cr_assert_eq(c[1].token, 3);
    cr_assert_float_eq(c[0].prob, 4.0f / 7.0f, 1e-5f);
    const double e65[4] = {0.0, 4.0 / 7.0, 0.0, 3.0 / 7.0};
    check_frequencies(s, logits, 4, e65, 40000, 0.012);
    sy_sampler_destroy(s);

    p.top_p = 0.75f;
    s = make(&p, 4);
    const double e75[4] = {2.0 / 9.0, 4.0 / 9.0, 0.0, 3.0 / 9.0};
    check_frequencies(s, logits, 4, e75, 40000, 0.012);
    sy_sampler_destroy(s);

    p.top_p = 0.3f;
    s = make(&p, 4);
    const double e30[4] = {0.0, 1.0, 0.0, 0.0};
    check_frequencies(s, logits, 4, e30, 2000, 0.0);
    sy_sampler_destroy(s);
}

/* ------------------------------------------------------------- min-p */

Test(sampler, min_p_drops_tokens_below_the_cutoff)
{
    /* p_max .5, min_p .25: cutoff .125 drops the .1 token only. */
    const double probs[4] = {0.15, 0.5, 0.1, 0.25};
    float logits[4];
    logits_from_probs(probs, logits, 4);
    sy_sampler_params p = params_off();
    p.min_p = 0.25f;
    p.seed = 5;
    sy_sampler *s = make(&p, 4);
    const double expect[4] = {0.15 / 0.9, 0.5 / 0.9, 0.0, 0.25 / 0.9};
    check_frequencies(s, logits, 4, expect, 40000, 0.012);
    sy_sampler_destroy(s);

    /* min_p .6: cutoff .3 keeps the .5 token alone. */
    p.min_p = 0.6f;
    s = make(&p, 4);
    const double only[4] = {0.0, 1.0, 0.0, 0.0};
    check_frequencies(s, logits, 4, only, 2000, 0.0);
    sy_sampler_destroy(s);
}

/* ------------------------------------------------ repetition penalty */

Test(sampler, repetition_penalty_divides_positive_and_multiplies_negative_logits)
{
    const float logits[4] = {2.0f, 1.9f, -1.0f, -1.1f};
    sy_sampler_params p = params_off();
    p.repeat_penalty = 2.0f;
    sy_sampler *s = make(&p, 4);
    cr_assert_eq(sy_sampler_accept(s, 0), SY_OK);
    cr_assert_eq(sy_sampler_accept(s, 2), SY_OK);
    sy_sampler_candidate c[4];
    size_t n = 0;
    cr_assert_eq(sy_sampler_query_candidates(s, logits, c, 4, &n), SY_OK);
    cr_assert_eq(n, 4);
    float by_id[4];
    for (size_t i = 0; i < n; i++)
        by_id[c[i].token] = c[i].logit;
    cr_assert_float_eq(by_id[0], 1.0f, 1e-6f);
    cr_assert_float_eq(by_id[1], 1.9f, 1e-6f);
    cr_assert_float_eq(by_id[2], -2.0f, 1e-6f);
    cr_assert_float_eq(by_id[3], -1.1f, 1e-6f);
    /* The input array is not touched. */
    cr_assert_float_eq(logits[0], 2.0f, 0.0f);
    sy_sampler_destroy(s);
}

Test(sampler, repetition_penalty_changes_the_greedy_choice_within_its_window)
{
    const float logits[4] = {2.0f, 1.9f, 0.0f, -3.0f};
    sy_sampler_params p = params_off();
    p.temperature = 0.0f;
    p.repeat_penalty = 1.5f;
    p.repeat_last_n = 2;
    sy_sampler *s = make(&p, 4);
    int32_t t = -1;
    cr_assert_eq(sy_sampler_sample(s, logits, &t), SY_OK);
    cr_assert_eq(t, 0);
    cr_assert_eq(sy_sampler_accept(s, 0), SY_OK);
    cr_assert_eq(sy_sampler_sample(s, logits, &t), SY_OK);
    cr_assert_eq(t, 1, "2.0 / 1.5 < 1.9, so token 1 must win, got %d", t);
    /* Two more tokens push 0 out of the window of 2. */
    cr_assert_eq(sy_sampler_accept(s, 2), SY_OK);
    cr_assert_eq(sy_sampler_accept(s, 3), SY_OK);
    cr_assert_eq(sy_sampler_sample(s, logits, &t), SY_OK);
    cr_assert_eq(t, 0, "token 0 left the window, got %d", t);
    /* Reset forgets the history. */
    cr_assert_eq(sy_sampler_accept(s, 0), SY_OK);
    sy_sampler_reset(s);
    cr_assert_eq(sy_sampler_sample(s, logits, &t), SY_OK);
    cr_assert_eq(t, 0);
    sy_sampler_destroy(s);
}

Test(sampler, repetition_penalty_counts_a_repeated_token_once)
{
    const float logits[3] = {2.0f, 1.0f, 1.2f};
    sy_sampler_params p = params_off();
    p.temperature = 0.0f;
    p.repeat_penalty = 1.5f;
    sy_sampler *s = make(&p, 3);
    for (int i = 0; i < 3; i++)
        cr_assert_eq(sy_sampler_accept(s, 0), SY_OK);
    /* Once: 2 / 1.5 = 1.33 still beats 1.2; thrice would give 0.59. */
    int32_t t = -1;
    cr_assert_eq(sy_sampler_sample(s, logits, &t), SY_OK);
    cr_assert_eq(t, 0);
    sy_sampler_destroy(s);
}

Test(sampler, repetition_penalty_of_one_or_empty_window_changes_nothing)
{
    const float logits[2] = {1.0f, 0.99f};
    sy_sampler_params p = params_off();
    p.temperature = 0.0f;
    p.repeat_penalty = 1.0f;
    sy_sampler *s = make(&p, 2);
    cr_assert_eq(sy_sampler_accept(s, 0), SY_OK);
    int32_t t = -1;
    cr_assert_eq(sy_sampler_sample(s, logits, &t), SY_OK);
    cr_assert_eq(t, 0);
    sy_sampler_destroy(s);
    p.repeat_penalty = 3.0f;
    p.repeat_last_n = 0;
    s = make(&p, 2);
    cr_assert_eq(sy_sampler_accept(s, 0), SY_OK);
    cr_assert_eq(sy_sampler_sample(s, logits, &t), SY_OK);
    cr_assert_eq(t, 0);
    sy_sampler_destroy(s);
}

/* ------------------------------------------------------- temperature */

Test(sampler, temperature_scales_the_logits_before_the_softmax)
{
    const float logits[2] = {1.0f, 0.0f};
    static const double temps[] = {1.0, 2.0, 0.5};
    for (size_t i = 0; i < 3; i++) {
        sy_sampler_params p = params_off();
        p.temperature = (float)temps[i];
        p.seed = 11 + i;
        sy_sampler *s = make(&p, 2);
        double p0 = 1.0 / (1.0 + exp(-1.0 / temps[i]));
        sy_sampler_candidate c[2];
        size_t n = 0;
        cr_assert_eq(sy_sampler_query_candidates(s, logits, c, 2, &n), SY_OK);
        cr_assert_eq(n, 2);
        cr_assert_float_eq(c[0].prob, (float)p0, 1e-6f, "T=%g: p0 %g vs %g", temps[i],
                           (double)c[0].prob, p0);
        const double expect[2] = {p0, 1.0 - p0};
        check_frequencies(s, logits, 2, expect, 40000, 0.012);
        sy_sampler_destroy(s);
    }
    /* A tiny temperature is greedy in effect. */
    sy_sampler_params p = params_off();
    p.temperature = 1e-4f;
    sy_sampler *s = make(&p, 2);
    const double only[2] = {1.0, 0.0};
    check_frequencies(s, logits, 2, only, 1000, 0.0);
    sy_sampler_destroy(s);
}

/* ------------------------------------------------- invalid arguments */

Test(sampler, invalid_parameters_are_refused_with_a_message)
{
    static const char *const field[10] = {
        "temperature", "temperature", "top_p", "top_p", "top_p",
        "min_p", "min_p", "repeat_penalty", "repeat_penalty", "repeat_penalty",
    };
    sy_sampler_params ps[10];
    for (int i = 0; i < 10; i++)
        ps[i] = params_off();
    ps[0].temperature = NAN;
    ps[1].temperature = INFINITY;
    ps[2].top_p = 0.0f;
    ps[3].top_p = 1.5f;
    ps[4].top_p = NAN;
    ps[5].min_p = -0.1f;
    ps[6].min_p = NAN;
    ps[7].repeat_penalty = 0.0f;
    ps[8].repeat_penalty = NAN;
    ps[9].repeat_penalty = INFINITY;
    for (int i = 0; i < 10; i++) {
        sy_sampler *s = (sy_sampler *)&ps[i]; /* must be overwritten with NULL */
        sy_sampler_error err;
        cr_assert_eq(sy_sampler_create(&ps[i], 10, &s, &err), SY_E_INVALID_ARG, "case %d", i);
        cr_assert_null(s, "case %d left a sampler", i);
        cr_assert(strstr(err.msg, field[i]), "case %d: message '%s' does not name %s", i,
                  err.msg, field[i]);
    }
    sy_sampler_params p = params_off();
    sy_sampler *s = NULL;
    sy_sampler_error err;
    cr_assert_eq(sy_sampler_create(&p, 0, &s, &err), SY_E_INVALID_ARG);
    cr_assert(strstr(err.msg, "n_vocab"), "%s", err.msg);
    cr_assert_eq(sy_sampler_create(NULL, 10, &s, &err), SY_E_INVALID_ARG);
    p.repeat_last_n = SY_SAMPLER_MAX_LAST_N + 1;
    cr_assert_eq(sy_sampler_create(&p, 10, &s, &err), SY_E_LIMIT);
    cr_assert(strstr(err.msg, "repeat_last_n"), "%s", err.msg);
    cr_assert_null(s);
    /* Edges that are valid. */
    p = params_off();
    p.top_p = 1.0f;
    p.min_p = 1.0f;
    p.temperature = -3.0f;
    cr_assert_eq(sy_sampler_params_check(&p, 1, &err), SY_OK, "%s", err.msg);
    cr_assert_str_empty(err.msg);
}

Test(sampler, accept_refuses_tokens_outside_the_vocabulary)
{
    sy_sampler_params p = params_off();
    sy_sampler *s = make(&p, 10);
    cr_assert_eq(sy_sampler_accept(s, 10), SY_E_INVALID_ARG);
    cr_assert(strstr(sy_sampler_last_error(s), "10"), "%s", sy_sampler_last_error(s));
    cr_assert_eq(sy_sampler_accept(s, -1), SY_E_INVALID_ARG);
    cr_assert_eq(sy_sampler_accept(s, 9), SY_OK);
    cr_assert_str_empty(sy_sampler_last_error(s));
    sy_sampler_destroy(s);
}
