/* Tuner: the fit recovers a known cost model from synthetic timings and
 * predicts its own measurements; a quick tune of the CPU device writes a
 * profile the scheduler's loader accepts. */
#include <criterion/criterion.h>
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>
#include <unistd.h>

#include "cost_model.h"
#include "probe.h"
#include "tune.h"

/* Deterministic noise from a seed printed on failure. */
static double noise(uint64_t *state)
{
    *state = *state * 6364136223846793005ull + 1442695040888963407ull;
    return (double)(*state >> 11) / (double)(1ull << 53) * 2.0 - 1.0;
}

/* Synthetic timings of a memory- and compute-bound op family:
 * 5 us + FLOPs / 20 GFLOP/s + bytes / 8 GB/s, times (1 +- |jitter|). */
static void synth(tune_samples *s, double jitter, uint64_t seed)
{
    uint64_t st = seed;
    for (int k = 0; k < 6; k++)
        for (int m = 0; m < 5; m++) {
            double K = 256.0 * (1 << k), M = (double)(1 << (2 * m));
            tune_sample x = {.op = SY_OP_MATMUL, .dtype = SY_DTYPE_Q4_0};
            x.flops = 2 * K * K * M;
            x.bytes = K * K * 0.5625 + 4 * K * M * 2;
            x.seconds = (5e-6 + x.flops / 20e9 + x.bytes / 8e9) * (1 + jitter * noise(&st));
            snprintf(x.shape, sizeof x.shape, "%.0fx%.0fx%.0f", K, K, M);
            cr_assert_eq(tune_samples_add(s, &x), SY_OK);
        }
}

Test(tune_fit, recovers_the_coefficients_of_noise_free_timings)
{
    tune_samples s = {0};
    synth(&s, 0.0, 1);
    tune_fit f;
    cr_assert_eq(tune_fit_samples(s.v, s.n, &f), SY_OK);
    cr_expect_float_eq(f.overhead_s, 5e-6, 5e-8, "overhead %g", f.overhead_s);
    cr_expect_float_eq(f.s_per_flop * 20e9, 1.0, 1e-3, "s_per_flop %g", f.s_per_flop);
    cr_expect_float_eq(f.s_per_byte * 8e9, 1.0, 1e-3, "s_per_byte %g", f.s_per_byte);
    tune_samples_free(&s);
}

/* The stated error: with timings jittered by up to +-3%, the fitted model
 * predicts every one of its own measurements within 8% and the median
 * within 3%. */
Test(tune_fit, predicts_its_own_noisy_measurements_within_8_percent)
{
    uint64_t seed = (uint64_t)time(NULL) ^ ((uint64_t)getpid() << 16);
    tune_samples s = {0};
    synth(&s, 0.03, seed);
    tune_fit f;
    cr_assert_eq(tune_fit_samples(s.v, s.n, &f), SY_OK);
    for (uint32_t i = 0; i < s.n; i++) {
        double p = tune_fit_predict(&f, s.v[i].flops, s.v[i].bytes);
        cr_expect_leq(fabs(p - s.v[i].seconds) / s.v[i].seconds, 0.08,
                      "seed %llu: %s predicted %g s, measured %g s", (unsigned long long)seed,
                      s.v[i].shape, p, s.v[i].seconds);
    }
    cr_expect_leq(f.median_rel_err, 0.03, "seed %llu: median error %g", (unsigned long long)seed,
                  f.median_rel_err);
    tune_samples_free(&s);
}

Test(tune_fit, never_fits_negative_coefficients)
{
    /* Time falls with size: the unconstrained fit would take a negative
     * slope; the non-negative one keeps a constant. */
    tune_sample v[3] = {{.flops = 1e6, .bytes = 1e3, .seconds = 3e-5},
                        {.flops = 2e6, .bytes = 2e3, .seconds = 2e-5},
                        {.flops = 4e6, .bytes = 4e3, .seconds = 1e-5}};
    tune_fit f;
    cr_assert_eq(tune_fit_samples(v, 3, &f), SY_OK);
    cr_expect_geq(f.overhead_s, 0.0);
    cr_expect_geq(f.s_per_flop, 0.0);
    cr_expect_geq(f.s_per_byte, 0.0);
}

Test(tune, quick_profile_is_accepted_by_the_scheduler_loader)
{
    sy_runtime_options ro;
    sy_runtime_options_init(&ro);
    ro.plugins = "cpu";
    sy_runtime *rt = NULL;
    cr_assert_eq(sy_runtime_create(&ro, &rt), SY_OK);
    uint32_t dev = 0;
    cr_assert_eq(sy_runtime_find_device(rt, "cpu", &dev), SY_OK, "the CPU plugin was not found");
    tune_opts o = {.quick = true};
    tune_samples s = {0};
    uint32_t skipped = 0;
    cr_assert_eq(tune_device(rt, dev, NULL, &o, &s, &skipped), SY_OK, "%s",
                 sy_runtime_last_error(rt));
    cr_assert_gt(s.n, 20u, "only %u shape classes timed", s.n);
    tune_device_info info = {.device = "cpu", .plugin = "cpu", .version = "test",
                             .peak_flops = 1e10, .peak_bandwidth = 1e10,
                             .launch_overhead_s = 1e-6};
    char *json = NULL;
    cr_assert_eq(tune_profile_json(&info, &s, &json), SY_OK);

    char err[512] = "";
    sy__profile *prof = NULL;
    cr_assert_eq(sy__profile_parse(json, strlen(json), "tune-test", &prof, err, sizeof err), SY_OK,
                 "%s", err);
    cr_expect_gt(prof->n_ops, 5u);
    /* A matmul the set measured is predicted from measurements. */
    sy_device_desc desc;
    sy_runtime_query_device(rt, dev, &desc);
    sy__device_model *dm = calloc(1, sizeof *dm);
    sy__device_model_init(dm, dev, &desc, prof);
    cr_expect_not_null(dm->entry[SY_OP_MATMUL][SY_DTYPE_Q4_0]);
    free(dm);
    sy__profile_destroy(prof);

    /* And through the public loader, from a file. */
    char path[] = "/tmp/sy-tune-test-XXXXXX";
    int fd = mkstemp(path);
    cr_assert_geq(fd, 0);
    cr_assert_eq(write(fd, json, strlen(json)), (ssize_t)strlen(json));
    close(fd);
    sy_planner *pl = NULL;
    cr_assert_eq(sy_planner_create(rt, &pl), SY_OK);
    cr_expect_eq(sy_planner_load_profile(pl, path), SY_OK, "%s", sy_planner_last_error(pl));
    sy_planner_destroy(pl);
    unlink(path);
    free(json);
    tune_samples_free(&s);
    sy_runtime_destroy(rt);
}
