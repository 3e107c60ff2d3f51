/* Unit tests of attention's row kernels (cpu_isa.h: dot_rows, mix_rows),
 * compiled straight into the test: every SIMD table this CPU runs against
 * the scalar table on random F16 and F32 rows, for head groups of 1 to 9,
 * row lengths with and without a partial vector, and row counts around the
 * kernels' blocks of four.  Rows lie a kv-head stride apart as in the
 * cache; every output's padding must stay as it was.  The avx512 table's
 * kernels are the AVX2 ones with more registers: their results must be
 * the AVX2 results bit for bit.  Seeds are fresh per run and printed in
 * every failure. */
#include <criterion/criterion.h>
#include <math.h>
#include <stdlib.h>
#include <string.h>

#include "cpu_case.h"
#include "cpu_isa.h"
#include "quants_internal.h"

static const int64_t lengths[] = {1, 7, 16, 20, 33, 64, 80, 256};
static const int64_t heads[] = {1, 2, 3, 4, 5, 8, 9};
static const int64_t counts[] = {1, 2, 3, 4, 5, 7, 13, 32};
#define N_OF(a) (sizeof(a) / sizeof((a)[0]))
#define PAD 3           /* floats past each head's outputs */
#define PAD_VALUE 777.0f

typedef struct rows_case {
    int64_t d, nh, n;
    bool f16;
    size_t stride; /* bytes between rows: two kv heads' rows per position */
    void *rows;
    float *q, *p; /* nh x (d + 1) queries; nh x (n + PAD) weights */
} rows_case;

static void case_init(rows_case *c, trng *r, int64_t d, int64_t nh, int64_t n, bool f16)
{
    *c = (rows_case){.d = d, .nh = nh, .n = n, .f16 = f16};
    const size_t elt = f16 ? 2 : 4;
    c->stride = 2 * (size_t)d * elt;
    c->rows = tc_xalloc(c->stride * (size_t)n);
    for (int64_t j = 0; j < n; j++)
        for (int64_t i = 0; i < 2 * d; i++) {
            const float v = trng_unit(r);
            char *at = (char *)c->rows + (size_t)j * c->stride;
            if (f16)
                ((uint16_t *)at)[i] = sy__f32_to_fp16(v);
            else
                ((float *)at)[i] = v;
        }
    c->q = tc_xalloc(sizeof(float) * (size_t)(nh * (d + 1)));
    for (int64_t i = 0; i < nh * (d + 1); i++)
        c->q[i] = trng_unit(r);
    c->p = tc_xalloc(sizeof(float) * (size_t)(nh * (n + PAD)));
    for (int64_t i = 0; i < nh * (n + PAD); i++)
        c->p[i] = 0.5f * (trng_unit(r) + 1.0f);
}

static void case_free(rows_case *c)
{
    free(c->rows);
    free(c->q);
    free(c->p);
}

/* |a| and |b| (heads of |used| floats every |ld|) agree within |bound|,
 * and the padding past each head's |used| floats is untouched. */
static void expect_close(const char *what, const rows_case *c, const cpu_isa_table *isa,
                         uint64_t seed, const float *a, const float *b, int64_t used, int64_t ld,
                         double bound)
{
    for (int64_t h = 0; h < c->nh; h++) {
        for (int64_t i = 0; i < used; i++)
            cr_assert(fabs((double)a[h * ld + i] - b[h * ld + i]) <= bound,
                      "seed %llu: %s %s %s d=%lld heads=%lld rows=%lld: head %lld [%lld] = %.9g, "
                      "scalar %.9g", (unsigned long long)seed, isa->name, what,
                      c->f16 ? "f16" : "f32", (long long)c->d, (long long)c->nh,
                      (long long)c->n, (long long)h, (long long)i, (double)a[h * ld + i],
                      (double)b[h * ld + i]);
        for (int64_t i = used; i < ld; i++)
            cr_assert_eq(a[h * ld + i], PAD_VALUE, "%s %s d=%lld heads=%lld rows=%lld wrote past "
                         "head %lld's outputs", isa->name, what, (long long)c->d,
                         (long long)c->nh, (long long)c->n, (long long)h);
    }
}

/* Bit for bit the same outputs (the padding included). */
static void expect_same(const char *what, const rows_case *c, const cpu_isa_table *isa,
                        const cpu_isa_table *twin, const float *a, const float *b, size_t n)
{
    cr_assert(memcmp(a, b, n * sizeof(float)) == 0,
              "%s %s %s d=%lld heads=%lld rows=%lld differs from %s's", isa->name, what,
              c->f16 ? "f16" : "f32", (long long)c->d, (long long)c->nh, (long long)c->n,
              twin->name);
}

/* |table|'s scores of |c| into |out| (nh heads of n + PAD, padding set). */
static void run_dot(const cpu_isa_table *table, const rows_case *c, float *out)
{
    const int64_t os = c->n + PAD;
    for (int64_t i = 0; i < c->nh * os; i++)
        out[i] = PAD_VALUE;
    table->dot_rows(c->rows, c->stride, c->f16, c->n, c->q, c->d + 1, c->nh, c->d, 0.125f, out,
                    os);
}

/* |table|'s mix of |c| onto accumulators |acc| (nh heads of d + PAD) that
 * already hold values. */
static void run_mix(const cpu_isa_table *table, const rows_case *c, float *acc)
{
    const int64_t as = c->d + PAD;
    for (int64_t h = 0; h < c->nh; h++)
        for (int64_t i = 0; i < as; i++)
            acc[h * as + i] = i < c->d ? (float)(h - i) * 0.25f : PAD_VALUE;
    table->mix_rows(acc, as, c->rows, c->stride, c->f16, c->n, c->p, c->n + PAD, c->nh, c->d);
}

/* |isa| against the scalar table, and bit for bit against |twin| (or
 * NULL). */
static void check_case(const cpu_isa_table *isa, const cpu_isa_table *twin, const rows_case *c,
                       uint64_t seed)
{
    const cpu_isa_table *ref = cpu_isa_scalar_table();
    const int64_t d = c->d, nh = c->nh, n = c->n;
    const int64_t os = n + PAD, as = d + PAD;
    const size_t most = (size_t)(nh * (os > as ? os : as));
    float *got = tc_xalloc(sizeof(float) * most), *want = tc_xalloc(sizeof(float) * most);

    /* Scores: |row| and |q| are below 1, so |score| <= d * scale. */
    run_dot(isa, c, got);
    run_dot(ref, c, want);
    expect_close("dot_rows", c, isa, seed, got, want, n, os, 1e-5 * (double)d);
    if (twin) {
        run_dot(twin, c, want);
        expect_same("dot_rows", c, isa, twin, got, want, (size_t)(nh * os));
    }

    run_mix(isa, c, got);
    run_mix(ref, c, want);
    expect_close("mix_rows", c, isa, seed, got, want, d, as, 1e-5 * (double)(n + d));
    if (twin) {
        run_mix(twin, c, want);
        expect_same("mix_rows", c, isa, twin, got, want, (size_t)(nh * as));
    }
    free(got);
    free(want);
}

Test(cpu_attn_rows, simd_row_kernels_match_the_scalar_ones)
{
    trng r;
    trng_init(&r);
    int checked = 0;
    for (size_t tb = 0; tb < TC_SIMD_TABLES; tb++) {
        const cpu_isa_table *isa = tc_simd_table(tb);
        if (!isa)
            continue;
        /* The avx512 tables' row kernels are the AVX2 table's (table 0). */
        const cpu_isa_table *twin =
            strncmp(isa->name, "avx512", 6) == 0 ? tc_simd_table(0) : NULL;
        for (size_t di = 0; di < N_OF(lengths); di++)
            for (size_t hi = 0; hi < N_OF(heads); hi++)
                for (size_t ni = 0; ni < N_OF(counts); ni++)
                    for (int f16 = 0; f16 <= 1; f16++, checked++) {
                        rows_case c;
                        case_init(&c, &r, lengths[di], heads[hi], counts[ni], f16);
                        check_case(isa, twin, &c, r.seed);
                        case_free(&c);
                    }
    }
    if (!checked)
        cr_log_info("no SIMD table runs here");
}
