/* Sampler tests: NaN and infinite logits, and a timing report for a
 * Gemma-sized vocabulary (split from test_sampler.c). */
#include <criterion/criterion.h>
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

#include "test_sampler_util.h"

Test(sampler, nan_logits_are_never_drawn_and_all_nan_is_an_error)
{
    const float some[4] = {NAN, 0.0f, NAN, 0.0f};
    const float all_nan[4] = {NAN, NAN, NAN, NAN};
    const float all_ninf[4] = {-INFINITY, NAN, -INFINITY, NAN};
    static const uint32_t ks[] = {0, 2};
    for (size_t ki = 0; ki < 2; ki++) {
        sy_sampler_params p = params_off();
        p.top_k = ks[ki];
        p.top_p = 0.9f;
        sy_sampler *s = make(&p, 4);
        const double expect[4] = {0.0, 0.5, 0.0, 0.5};
        check_frequencies(s, some, 4, expect, 20000, 0.015);
        int32_t t = 7;
        cr_assert_eq(sy_sampler_sample(s, all_nan, &t), SY_E_INVALID_ARG);
        cr_assert_eq(t, -1);
        cr_assert(strstr(sy_sampler_last_error(s), "NaN"), "%s", sy_sampler_last_error(s));
        cr_assert_eq(sy_sampler_sample(s, all_ninf, &t), SY_E_INVALID_ARG);
        sy_sampler_destroy(s);
    }
    sy_sampler_params p = params_off();
    p.temperature = 0.0f;
    sy_sampler *s = make(&p, 4);
    int32_t t = 7;
    cr_assert_eq(sy_sampler_sample(s, all_nan, &t), SY_E_INVALID_ARG);
    cr_assert_eq(t, -1);
    sy_sampler_destroy(s);
}

Test(sampler, infinite_logits_win_without_producing_nan)
{
    const float one[4] = {0.0f, INFINITY, 5.0f, -INFINITY};
    const float two[4] = {INFINITY, 3.0f, INFINITY, 1.0f};
    static const uint32_t ks[] = {0, 3};
    for (size_t ki = 0; ki < 2; ki++) {
        sy_sampler_params p = params_off();
        p.top_k = ks[ki];
        sy_sampler *s = make(&p, 4);
        const double e1[4] = {0.0, 1.0, 0.0, 0.0};
        check_frequencies(s, one, 4, e1, 2000, 0.0);
        const double e2[4] = {0.5, 0.0, 0.5, 0.0};
        check_frequencies(s, two, 4, e2, 20000, 0.015);
        sy_sampler_destroy(s);
    }
}

/* ------------------------------------------------------------- speed */

Test(sampler, samples_a_262k_vocabulary_quickly_enough_to_report)
{
    enum { V = 262144, N = 50 };
    uint64_t seed = fresh_seed(), x = seed;
    float *logits = malloc((size_t)V * sizeof *logits);
    cr_assert_not_null(logits);
    random_logits(&x, logits, V, 3.0, false);
    double total_ms = 0.0;
    struct {
        const char *name;
        float temperature, top_p, min_p, penalty;
        uint32_t top_k;
    } cfg[] = {
        {"greedy", 0.0f, 1.0f, 0.0f, 1.0f, 0},
        {"defaults (T .8, k 40, p .95, min_p .05)", 0.8f, 0.95f, 0.05f, 1.0f, 40},
        {"defaults + repeat penalty 1.1/64", 0.8f, 0.95f, 0.05f, 1.1f, 40},
        {"full vocab, top-p .95 only", 0.8f, 0.95f, 0.0f, 1.0f, 0},
        {"full vocab, min-p .05 only", 0.8f, 1.0f, 0.05f, 1.0f, 0},
        {"full vocab, plain temperature", 1.0f, 1.0f, 0.0f, 1.0f, 0},
        {"top-k 10000 (quickselect) + top-p .9", 1.0f, 0.9f, 0.0f, 1.0f, 10000},
    };
    for (size_t c = 0; c < sizeof cfg / sizeof cfg[0]; c++) {
        sy_sampler_params p = params_off();
        p.temperature = cfg[c].temperature;
        p.top_k = cfg[c].top_k;
        p.top_p = cfg[c].top_p;
        p.min_p = cfg[c].min_p;
        p.repeat_penalty = cfg[c].penalty;
        p.seed = seed;
        sy_sampler *s = make(&p, V);
        struct timespec t0, t1;
        clock_gettime(CLOCK_MONOTONIC, &t0);
        for (int i = 0; i < N; i++) {
            int32_t t = -1;
            /* Perturb a few logits per step so no step repeats the last. */
            logits[mix64(&x) % V] += 0.5f;
            cr_assert_eq(sy_sampler_sample(s, logits, &t), SY_OK, "%s", sy_sampler_last_error(s));
            cr_assert(t >= 0 && t < V);
            cr_assert_eq(sy_sampler_accept(s, t), SY_OK);
        }
        clock_gettime(CLOCK_MONOTONIC, &t1);
        double ms = (double)(t1.tv_sec - t0.tv_sec) * 1e3 + (double)(t1.tv_nsec - t0.tv_nsec) / 1e6;
        fprintf(stderr, "sampler timing: V=%d, %d tokens, %-42s %8.3f ms/token\n", V, N,
                cfg[c].name, ms / N);
        total_ms += ms;
        sy_sampler_destroy(s);
    }
    free(logits);
    /* The bound this test once left to Criterion's .timeout (whose watchdog
     * thread leaks under LeakSanitizer): every configuration within 120 s. */
    cr_assert_lt(total_ms, 120000.0, "sampling took %.0f ms in all", total_ms);
}
