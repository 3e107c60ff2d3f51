/* Wall clock and medians shared by the microbenchmarks built from the CPU
 * plugin's sources (microbench.c, attention_bench.c). */
#ifndef SY_BENCH_CLOCK_H
#define SY_BENCH_CLOCK_H

#include <stdlib.h>
#include <time.h>

static inline double now_s(void)
{
    struct timespec ts;
    clock_gettime(CLOCK_MONOTONIC, &ts);
    return (double)ts.tv_sec + 1e-9 * (double)ts.tv_nsec;
}

static inline int cmp_double(const void *a, const void *b)
{
    const double x = *(const double *)a, y = *(const double *)b;
    return x < y ? -1 : x > y;
}

/* Sorts |v| and returns its middle element. */
static inline double median(double *v, int n)
{
    qsort(v, (size_t)n, sizeof *v, cmp_double);
    return v[n / 2];
}

#endif
