/* The sampler's passes over the whole vocabulary and its selections
 * (split from sampler.c; see the note there on the shape of the loops). */
#include "sampler_internal.h"

#include <math.h>
#include <stdlib.h>

/* ------------------------------------------------------- whole-vocab passes */

/* Largest value of x[0, n), skipping NaN (a NaN never compares greater);
 * -inf when there is none. */
float sy__sampler_max(const float *restrict x, size_t n)
{
    float lane[LANES];
    for (int j = 0; j < LANES; j++)
        lane[j] = -INFINITY;
    size_t i = 0;
    for (; i + LANES <= n; i += LANES)
        for (int j = 0; j < LANES; j++)
            lane[j] = x[i + j] > lane[j] ? x[i + j] : lane[j];
    float m = -INFINITY;
    for (int j = 0; j < LANES; j++)
        m = lane[j] > m ? lane[j] : m;
    for (; i < n; i++)
        m = x[i] > m ? x[i] : m;
    return m;
}




/* w[i] = exp((x[i] - m) / t) for i < n.  Requires m >= every x[i] and
 * m finite. */
void sy__sampler_exp(const float *restrict x, float *restrict w, size_t n, float m, float t)
{
    size_t i = 0;
    for (; i + LANES <= n; i += LANES)
        for (int j = 0; j < LANES; j++)
            w[i + j] = exp_nonpos((x[i + j] - m) / t);
    for (; i < n; i++)
        w[i] = exp_nonpos((x[i] - m) / t);
}

/* Sum of w[0, n) in double, in independent lanes so that the additions
 * do not wait on one another. */
double sy__sampler_sum(const float *restrict w, size_t n)
{
    double lane[LANES] = {0};
    size_t i = 0;
    for (; i + LANES <= n; i += LANES)
        for (int j = 0; j < LANES; j++)
            lane[j] += (double)w[i + j];
    double s = 0.0;
    for (int j = 0; j < LANES; j++)
        s += lane[j];
    for (; i < n; i++)
        s += (double)w[i];
    return s;
}

double sy__sampler_sum_cand(const cand *c, size_t lo, size_t hi)
{
    double a = 0.0, b = 0.0, d = 0.0, e = 0.0;
    size_t i = lo;
    for (; i + 4 <= hi; i += 4) {
        a += c[i].w;
        b += c[i + 1].w;
        d += c[i + 2].w;
        e += c[i + 3].w;
    }
    for (; i < hi; i++)
        a += c[i].w;
    return (a + b) + (d + e);
}

/* ------------------------------------------------------------- ordering */


int sy__sampler_cand_cmp(const void *pa, const void *pb)
{
    const cand *a = pa, *b = pb;
    if (cand_better(a, b))
        return -1;
    return cand_better(b, a) ? 1 : 0;
}


/* Partitions c[lo, hi) (hi - lo >= 2) around a median-of-three pivot:
 * entries better than the pivot first, then the pivot, then the rest.
 * Returns the pivot's final index. */
static size_t partition(cand *c, size_t lo, size_t hi)
{
    size_t mid = lo + (hi - lo) / 2, last = hi - 1;
    /* Logits arrive in id order, which is sorted by the tie-break, and
     * median-of-three keeps such runs from degrading to quadratic time. */
    if (cand_better(&c[mid], &c[lo]))
        cand_swap(&c[mid], &c[lo]);
    if (cand_better(&c[last], &c[lo]))
        cand_swap(&c[last], &c[lo]);
    if (cand_better(&c[mid], &c[last]))
        cand_swap(&c[mid], &c[last]);
    const cand pivot = c[last];
    size_t store = lo;
    /* Always swapping and advancing |store| by the comparison's result
     * keeps [lo, store) better and [store, i] worse without a branch,
     * which random logits would mispredict half of the time. */
    for (size_t i = lo; i < last; i++) {
        cand t = c[i];
        bool b = cand_better(&t, &pivot);
        c[i] = c[store];
        c[store] = t;
        store += b;
    }
    cand_swap(&c[store], &c[last]);
    return store;
}

/* Partition rounds allowed before falling back to a sort of what is left:
 * quickselect is expected O(n) but has quadratic inputs, and a fallback
 * keeps the worst case at O(n log n). */
static unsigned select_budget(size_t n)
{
    unsigned b = 16;
    while (n > 1) {
        n >>= 1;
        b += 2;
    }
    return b;
}

/* Moves the |k| best of c[0, n) (0 < k < n) into c[0, k), in no order. */
void sy__sampler_select_top(cand *c, size_t n, size_t k)
{
    size_t lo = 0, hi = n;
    unsigned budget = select_budget(n);
    /* Invariant: c[0, lo) are among the k best, c[hi, n) are not. */
    while (hi - lo > 1) {
        if (budget-- == 0) {
            qsort(c + lo, hi - lo, sizeof *c, sy__sampler_cand_cmp);
            return;
        }
        size_t p = partition(c, lo, hi);
        if (p == k || p + 1 == k)
            return;
        if (p > k)
            hi = p;
        else
            lo = p + 1;
    }
}

/* Finds the smallest prefix, in the better-first order, of c[0, n) whose
 * weights sum to at least |target|, moves it into c[0, r) in no particular
 * order and returns r; the prefix's weight goes to *out_mass.  When all of
 * c together weighs less, returns n.  Expected O(n): each round sums one
 * side of a partition and continues in the side that holds the boundary,
 * as quickselect does. */
size_t sy__sampler_select_mass(cand *c, size_t n, double target, double *out_mass)
{
    double total = sy__sampler_sum_cand(c, 0, n);
    *out_mass = total;
    if (total < target)
        return n;
    /* Invariant: c[0, lo) is kept and weighs |kept|, c[hi, n) is not,
     * need = target - kept > 0 and c[lo, hi) weighs at least |need|, so
     * the boundary lies in c[lo, hi). */
    size_t lo = 0, hi = n;
    double need = target, kept = 0.0;
    unsigned budget = select_budget(n);
    while (hi - lo > 1) {
        if (budget-- == 0) {
            qsort(c + lo, hi - lo, sizeof *c, sy__sampler_cand_cmp);
            for (size_t i = lo; i < hi; i++) {
                kept += c[i].w;
                if (kept >= target) {
                    *out_mass = kept;
                    return i + 1;
                }
            }
            *out_mass = kept;
            return hi;
        }
        size_t p = partition(c, lo, hi);
        double better = sy__sampler_sum_cand(c, lo, p);
        if (better >= need) {
            hi = p;
            continue;
        }
        kept += better + c[p].w;
        if (better + c[p].w >= need) {
            *out_mass = kept;
            return p + 1;
        }
        need -= better + c[p].w;
        lo = p + 1;
    }
    if (hi > lo)
        kept += c[lo].w;
    *out_mass = kept;
    return hi > lo ? lo + 1 : lo;
}
