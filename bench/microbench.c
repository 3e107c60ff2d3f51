/* Microbenchmarks of the CPU plugin's building blocks, compiled straight
 * from the plugin's sources by bench/microbench.sh (the module exports
 * nothing but its query symbol):
 *   bandwidth  read bandwidth of one and of all lanes (sum of a buffer
 *              larger than the last-level cache, and of one that fits L2)
 *   qdot       ns per weight block and GB/s of each table's dot kernels,
 *              hot (weights in L1/L2) and streaming (weights from memory)
 *   gemm       ns per weight block and column of the prefill GEMM kernels
 *   attention  ns per key of the attention row kernels against a call per row
 *   pool       cost of one dispatch + barrier of the thread pool: empty
 *              tasks on 1..n lanes, and back-to-back dispatches
 *   items      item jobs (cpu_pool_run_items) of 0.25 us items in the
 *              counts of SmolLM2's decode matmuls: what n lanes cost over
 *              a perfect split of the 1-lane time
 * Every figure is the median of several rounds; the machine may be shared,
 * so compare variants within one run. */
#include <hwloc.h>
#include <immintrin.h>
#include <stdatomic.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

#include "cpu_isa.h"
#include "cpu_qdot.h"
#include "cpu_threadpool.h"
#include "quants_internal.h"

#include "bench_clock.h"

#define ROUNDS 7

static void *bench_alloc(void *ctx, size_t size, size_t align)
{
    void *p = NULL;
    return posix_memalign(&p, align < sizeof(void *) ? sizeof(void *) : align, size ? size : 1) == 0
               ? p
               : NULL;
}

static void bench_free(void *ctx, void *ptr)
{
    free(ptr);
}

static uint64_t rng_state = 0x9e3779b97f4a7c15ull;

/* Activation planes of the qdot and ab runs: $MB_PLANES (1 = q8, 2 = q16,
 * the plugin's default). */
static int mb_planes(void)
{
    const char *p = getenv("MB_PLANES");
    return p && *p == '1' ? 1 : 2;
}

static uint64_t rng_next(void)
{
    rng_state ^= rng_state << 13;
    rng_state ^= rng_state >> 7;
    rng_state ^= rng_state << 17;
    return rng_state;
}

/* ------------------------------------------------------------ bandwidth */

typedef struct bw_job {
    const uint8_t *buf;
    size_t bytes;
    double sink[64];
} bw_job;

__attribute__((target("avx2"))) static void bw_task(void *arg, uint32_t ith, uint32_t nth,
                                                     uint32_t lane)
{
    bw_job *j = arg;
    const size_t lo = j->bytes * ith / nth / 64 * 64, hi = j->bytes * (ith + 1) / nth / 64 * 64;
    __m256i a0 = _mm256_setzero_si256(), a1 = _mm256_setzero_si256();
    for (size_t i = lo; i < hi; i += 64) {
        a0 = _mm256_add_epi64(a0, _mm256_load_si256((const __m256i *)(j->buf + i)));
        a1 = _mm256_add_epi64(a1, _mm256_load_si256((const __m256i *)(j->buf + i + 32)));
    }
    a0 = _mm256_add_epi64(a0, a1);
    j->sink[ith * 8] = (double)_mm256_extract_epi64(a0, 0);
}

static void bench_bandwidth(cpu_pool *pool, uint32_t lanes)
{
    const size_t sizes[] = {(size_t)1 << 20, (size_t)64 << 20, (size_t)512 << 20};
    for (size_t s = 0; s < 3; s++) {
        bw_job j = {.bytes = sizes[s]};
        uint8_t *buf = bench_alloc(NULL, j.bytes, 64);
        memset(buf, 1, j.bytes);
        j.buf = buf;
        for (uint32_t nth = 1; nth <= lanes; nth++) {
            double t[ROUNDS];
            const int reps = s == 0 ? 2000 : s == 1 ? 10 : 2;
            for (int r = 0; r < ROUNDS; r++) {
                double t0 = now_s();
                for (int k = 0; k < reps; k++)
                    cpu_pool_run(pool, bw_task, &j, nth);
                t[r] = (now_s() - t0) / reps;
            }
            printf("bandwidth  %4zu MiB %u lane%s  %6.1f GB/s\n", j.bytes >> 20, nth,
                   nth == 1 ? " " : "s", (double)j.bytes / median(t, ROUNDS) * 1e-9);
        }
        free(buf);
    }
}

/* ----------------------------------------------------------------- qdot */

static const sy_dtype qtypes[] = {SY_DTYPE_Q4_0, SY_DTYPE_Q4_1, SY_DTYPE_Q5_0, SY_DTYPE_Q5_1,
                                  SY_DTYPE_Q8_0, SY_DTYPE_Q4_K, SY_DTYPE_Q5_K, SY_DTYPE_Q6_K};

/* Fills quantized rows with random quants and small scales. */
static void fill_weights(sy_dtype t, uint8_t *w, size_t bytes)
{
    for (size_t i = 0; i < bytes; i++)
        w[i] = (uint8_t)rng_next();
    const size_t ts = sy_dtype_type_size(t);
    for (size_t b = 0; b + ts <= bytes; b += ts) {
        const uint16_t h = 0x2000; /* f16 2^-7 */
        switch (t) {
        case SY_DTYPE_Q6_K:
            memcpy(w + b + 208, &h, 2);
            break;
        case SY_DTYPE_Q4_1:
        case SY_DTYPE_Q5_1:
        case SY_DTYPE_Q4_K:
        case SY_DTYPE_Q5_K:
            memcpy(w + b, &h, 2);
            memcpy(w + b + 2, &h, 2);
            break;
        default:
            memcpy(w + b, &h, 2);
            break;
        }
    }
}

static void bench_qdot(const cpu_isa_table *isa, int64_t k, size_t big_bytes)
{
    float *x = bench_alloc(NULL, sizeof(float) * (size_t)k * CPU_QDOT_MAX_COLS, 64);
    for (int64_t i = 0; i < k * CPU_QDOT_MAX_COLS; i++)
        x[i] = (float)((int64_t)(rng_next() % 2001) - 1000) / 1000.0f;
    const int planes = mb_planes();
    const size_t stride = cpu_q8_col_bytes(k, planes);
    uint8_t *xq = bench_alloc(NULL, stride * CPU_QDOT_MAX_COLS, 64);
    for (int c = 0; c < CPU_QDOT_MAX_COLS; c++)
        isa->quantize_q8(x + c * k, xq + c * stride, k, planes);

    for (size_t t = 0; t < sizeof qtypes / sizeof qtypes[0]; t++) {
        const sy_dtype dt = qtypes[t];
        const size_t row = (size_t)k / sy_dtype_block_size(dt) * sy_dtype_type_size(dt);
        const size_t rows_big = big_bytes / row, rows_hot = 16 * 1024 / row;
        uint8_t *w = bench_alloc(NULL, rows_big * row, 64);
        fill_weights(dt, w, rows_big * row);
        const double blocks_per_row = (double)k / 32.0;
        for (int nc = 1; nc <= CPU_QDOT_MAX_COLS; nc *= 4) {
            double hot[ROUNDS], cold[ROUNDS];
            float out[CPU_QDOT_MAX_COLS];
            volatile float sink = 0.0f;
            for (int r = 0; r < ROUNDS; r++) {
                double t0 = now_s();
                for (int rep = 0; rep < 200; rep++)
                    for (size_t n = 0; n < rows_hot; n++) {
                        isa->qdot[dt](w + n * row, xq, stride, nc, k, planes, out);
                        sink += out[0];
                    }
                hot[r] = (now_s() - t0) / (200.0 * (double)rows_hot);
                t0 = now_s();
                for (size_t n = 0; n < rows_big; n++) {
                    isa->qdot[dt](w + n * row, xq, stride, nc, k, planes, out);
                    sink += out[0];
                }
                cold[r] = (now_s() - t0) / (double)rows_big;
            }
            const double h = median(hot, ROUNDS), c = median(cold, ROUNDS);
            printf("qdot %-7s %-5s K=%-5lld cols %d  hot %6.2f ns/block/col (%5.1f GB/s)  "
                   "stream %6.2f ns/block/col (%5.1f GB/s)\n",
                   isa->name, sy_dtype_name(dt), (long long)k, nc, h * 1e9 / blocks_per_row / nc,
                   (double)row / h * 1e-9, c * 1e9 / blocks_per_row / nc, (double)row / c * 1e-9);
        }
        free(w);
    }
    free(xq);
    free(x);
}

/* A/B: the avx512 table against bench/qdot_variant.c, round by round. */
CPU_QDOT_DECLARE_SET(bench_variant)

static cpu_qdot_fn variant_qdot(sy_dtype t)
{
    switch (t) {
    case SY_DTYPE_Q4_0:
        return bench_variant_qdot_q4_0;
    case SY_DTYPE_Q4_1:
        return bench_variant_qdot_q4_1;
    case SY_DTYPE_Q5_0:
        return bench_variant_qdot_q5_0;
    case SY_DTYPE_Q5_1:
        return bench_variant_qdot_q5_1;
    case SY_DTYPE_Q8_0:
        return bench_variant_qdot_q8_0;
    case SY_DTYPE_Q4_K:
        return bench_variant_qdot_q4_k;
    case SY_DTYPE_Q5_K:
        return bench_variant_qdot_q5_k;
    default:
        return bench_variant_qdot_q6_k;
    }
}

/* Seconds per row of |fn| over |rows| rows of |row| bytes. */
static double time_rows(cpu_qdot_fn fn, const uint8_t *w, size_t row, size_t rows, int reps,
                        const uint8_t *xq, size_t stride, int nc, int64_t k)
{
    const int planes = mb_planes();
    float out[CPU_QDOT_MAX_COLS];
    volatile float sink = 0.0f;
    const double t0 = now_s();
    for (int rep = 0; rep < reps; rep++)
        for (size_t n = 0; n < rows; n++) {
            fn(w + n * row, xq, stride, nc, k, planes, out);
            sink += out[0];
        }
    return (now_s() - t0) / ((double)reps * (double)rows);
}

static void bench_ab(const cpu_isa_table *isa, int64_t k, size_t big_bytes)
{
    enum { AB_ROUNDS = 15 };
    float *x = bench_alloc(NULL, sizeof(float) * (size_t)k * CPU_QDOT_MAX_COLS, 64);
    for (int64_t i = 0; i < k * CPU_QDOT_MAX_COLS; i++)
        x[i] = (float)((int64_t)(rng_next() % 2001) - 1000) / 1000.0f;
    const int planes = mb_planes();
    const size_t stride = cpu_q8_col_bytes(k, planes);
    uint8_t *xq = bench_alloc(NULL, stride * CPU_QDOT_MAX_COLS, 64);
    for (int c = 0; c < CPU_QDOT_MAX_COLS; c++)
        isa->quantize_q8(x + c * k, xq + c * stride, k, planes);
    for (size_t t = 0; t < sizeof qtypes / sizeof qtypes[0]; t++) {
        const sy_dtype dt = qtypes[t];
        const char *only = getenv("AB_DTYPE");
        if (only && strcmp(only, sy_dtype_name(dt)) != 0)
            continue;
        const size_t row = (size_t)k / sy_dtype_block_size(dt) * sy_dtype_type_size(dt);
        const size_t rows_big = big_bytes / row, rows_hot = 16 * 1024 / row;
        uint8_t *w = bench_alloc(NULL, rows_big * row, 64);
        fill_weights(dt, w, rows_big * row);
        const double bpr = (double)k / 32.0;
        const cpu_qdot_fn fa = isa->qdot[dt], fb = variant_qdot(dt);
        for (int nc = 1; nc <= CPU_QDOT_MAX_COLS; nc *= 4) {
            double ha[AB_ROUNDS], hb[AB_ROUNDS], sa[AB_ROUNDS], sb[AB_ROUNDS], hr[AB_ROUNDS],
                sr[AB_ROUNDS];
            for (int r = 0; r < AB_ROUNDS; r++) {
                ha[r] = time_rows(fa, w, row, rows_hot, 100, xq, stride, nc, k);
                hb[r] = time_rows(fb, w, row, rows_hot, 100, xq, stride, nc, k);
                sa[r] = time_rows(fa, w, row, rows_big, 1, xq, stride, nc, k);
                sb[r] = time_rows(fb, w, row, rows_big, 1, xq, stride, nc, k);
                hr[r] = hb[r] / ha[r];
                sr[r] = sb[r] / sa[r];
            }
            const double s = 1e9 / bpr / nc;
            printf("ab %-5s cols %d  hot A %5.2f B %5.2f ns/block (B/A %.3f)  stream A %5.2f B "
                   "%5.2f ns/block (B/A %.3f)\n",
                   sy_dtype_name(dt), nc, median(ha, AB_ROUNDS) * s, median(hb, AB_ROUNDS) * s,
                   median(hr, AB_ROUNDS), median(sa, AB_ROUNDS) * s, median(sb, AB_ROUNDS) * s,
                   median(sr, AB_ROUNDS));
        }
        free(w);
    }
    free(xq);
    free(x);
}

/* GEMM: ns per weight block and column of each table's qgemm (and of the
 * 256-bit GEMM the avx512 set also carries), rows x 64 columns hot. */
typedef struct gemm_kernel {
    const char *name;
    uint32_t cols;
    cpu_pack_panel_fn pack;
    cpu_qgemm_fn fn;
} gemm_kernel;

static void bench_gemm(const cpu_isa_features *f, sy_dtype dt, int64_t k)
{
    enum { NCOLS = 64, ROWS = 32, GEMM_ROUNDS = 9 };
    gemm_kernel kernels[8];
    int nk = 0;
    const char *tables[] = {"avx2", "avxvnni", "avx512"};
    for (int i = 0; i < 3; i++) {
        const cpu_isa_table *isa = NULL;
        if (cpu_isa_select(f, tables[i], &isa) == SY_OK && isa->qgemm[dt])
            kernels[nk++] = (gemm_kernel){isa->name, isa->q8_panel, isa->pack_q8_panel, isa->qgemm[dt]};
    }
    if (f->avx512vnni && dt == SY_DTYPE_Q4_1)
        kernels[nk++] = (gemm_kernel){"avx512/256", 8, cpu_avx512_pack_panel, cpu_avx512_qgemm_q4_1};
    if (f->avx512vnni && dt == SY_DTYPE_Q5_0)
        kernels[nk++] = (gemm_kernel){"avx512/256", 8, cpu_avx512_pack_panel, cpu_avx512_qgemm_q5_0};
    const size_t row = (size_t)k / sy_dtype_block_size(dt) * sy_dtype_type_size(dt);
    uint8_t *w = bench_alloc(NULL, row * ROWS, 64);
    fill_weights(dt, w, row * ROWS);
    float *x = bench_alloc(NULL, sizeof(float) * (size_t)k, 64);
    float *y = bench_alloc(NULL, sizeof(float) * ROWS * NCOLS, 64);
    void *scratch = bench_alloc(NULL, cpu_qgemm_scratch_bytes(k), 64);
    for (int planes = 1; planes <= 2; planes++) {
        const size_t stride = cpu_q8_col_bytes(k, planes);
        uint8_t *cols = bench_alloc(NULL, stride * NCOLS, 64);
        for (int c = 0; c < NCOLS; c++) {
            for (int64_t i = 0; i < k; i++)
                x[i] = (float)((int64_t)(rng_next() % 2001) - 1000) / 1000.0f;
            cpu_isa_scalar_table()->quantize_q8(x, cols + c * stride, k, planes);
        }
        double t[8][GEMM_ROUNDS];
        uint8_t *panels[8];
        for (int j = 0; j < nk; j++) {
            const size_t pb = cpu_q8_panel_bytes(k, kernels[j].cols, planes);
            panels[j] = bench_alloc(NULL, pb * (NCOLS / kernels[j].cols), 64);
            for (uint32_t p = 0; p < NCOLS / kernels[j].cols; p++)
                kernels[j].pack(cols + p * kernels[j].cols * stride, stride, (int)kernels[j].cols, k,
                                planes, panels[j] + p * pb);
        }
        for (int r = 0; r < GEMM_ROUNDS; r++)
            for (int j = 0; j < nk; j++) {
                const double t0 = now_s();
                for (int rep = 0; rep < 20; rep++)
                    kernels[j].fn(w, row, ROWS, panels[j], NCOLS / (int)kernels[j].cols, k, planes, y,
                                  ROWS, NCOLS, scratch);
                t[j][r] = (now_s() - t0) / 20.0;
            }
        for (int j = 0; j < nk; j++) {
            printf("gemm %-10s %-5s K=%lld planes %d  %6.3f ns/block/col\n", kernels[j].name,
                   sy_dtype_name(dt), (long long)k, planes,
                   median(t[j], GEMM_ROUNDS) * 1e9 / ((double)ROWS * NCOLS * (double)k / 32.0));
            free(panels[j]);
        }
        free(cols);
    }
    free(scratch);
    free(y);
    free(x);
    free(w);
}

/* Attention inner loops: scores and value mix of one query against |n|
 * F16 rows of |d| elements, the row kernels (dot_rows, mix_rows) against a
 * call per row (dot_f16, axpy_f16). */
static void bench_attention(const cpu_isa_table *isa, int64_t n, int64_t d)
{
    enum { ATT_ROUNDS = 9 };
    uint16_t *kv = bench_alloc(NULL, sizeof(uint16_t) * (size_t)(n * d), 64);
    for (int64_t i = 0; i < n * d; i++)
        kv[i] = (uint16_t)(0x3000 + rng_next() % 0x800);
    float *q = bench_alloc(NULL, sizeof(float) * (size_t)d, 64);
    float *sc = bench_alloc(NULL, sizeof(float) * (size_t)n, 64);
    float *acc = bench_alloc(NULL, sizeof(float) * (size_t)d, 64);
    for (int64_t i = 0; i < d; i++)
        q[i] = 0.01f * (float)(i % 7);
    double t[4][ATT_ROUNDS];
    const size_t stride = (size_t)d * sizeof(uint16_t);
    for (int r = 0; r < ATT_ROUNDS; r++) {
        double t0 = now_s();
        for (int rep = 0; rep < 200; rep++)
            isa->dot_rows(kv, stride, true, n, q, d, 1, d, 0.125f, sc, n);
        t[0][r] = now_s() - t0;
        t0 = now_s();
        for (int rep = 0; rep < 200; rep++)
            for (int64_t j = 0; j < n; j++)
                sc[j] = isa->dot_f16(kv + j * d, q, d) * 0.125f;
        t[1][r] = now_s() - t0;
        t0 = now_s();
        for (int rep = 0; rep < 200; rep++)
            isa->mix_rows(acc, d, kv, stride, true, n, sc, n, 1, d);
        t[2][r] = now_s() - t0;
        t0 = now_s();
        for (int rep = 0; rep < 200; rep++)
            for (int64_t j = 0; j < n; j++)
                isa->axpy_f16(acc, sc[j], kv + j * d, d);
        t[3][r] = now_s() - t0;
    }
    const char *what[4] = {"dot_rows", "dot_f16 per row", "mix_rows", "axpy_f16 per row"};
    for (int i = 0; i < 4; i++)
        printf("attention %-7s n=%lld d=%lld  %-17s %7.1f ns/row\n", isa->name, (long long)n,
               (long long)d, what[i], median(t[i], ATT_ROUNDS) * 1e9 / (200.0 * (double)n));
    free(acc);
    free(sc);
    free(q);
    free(kv);
}

/* ----------------------------------------------------------------- pool */

static void empty_task(void *arg, uint32_t ith, uint32_t nth, uint32_t lane)
{
    atomic_fetch_add_explicit((atomic_uint *)arg, 1, memory_order_relaxed);
}

static void bench_pool(cpu_pool *pool, uint32_t lanes)
{
    atomic_uint count = 0;
    for (uint32_t nth = 1; nth <= lanes; nth++) {
        double t[ROUNDS];
        const int reps = 20000;
        for (int r = 0; r < ROUNDS; r++) {
            double t0 = now_s();
            for (int k = 0; k < reps; k++)
                cpu_pool_run(pool, empty_task, &count, nth);
            t[r] = (now_s() - t0) / reps;
        }
        printf("pool       dispatch+barrier, %u lane%s  %7.0f ns\n", nth, nth == 1 ? " " : "s",
               median(t, ROUNDS) * 1e9);
    }
}

/* An item of about 0.25 us of arithmetic, the size of a decode matmul's
 * tile on SmolLM2 (16 rows of 576). */
static void busy_item(void *arg, int64_t first, int64_t end, uint32_t lane)
{
    volatile double *sink = arg;
    for (int64_t item = first; item < end; item++) {
        double x = (double)item;
        for (int i = 0; i < 200; i++)
            x = x * 0.999999 + 1e-9;
        sink[lane * 8] = x;
    }
}

/* cpu_pool_run_items with items of the sizes of SmolLM2's decode matmuls
 * (36, 96 and 615 tiles): time per dispatch on 1 lane and on every lane,
 * and what the lanes cost over a perfect split of the 1-lane time. */
static void bench_pool_items(cpu_pool *pool, uint32_t lanes)
{
    static const int64_t counts[] = {36, 96, 615};
    double sink[8 * 64];
    for (size_t c = 0; c < sizeof counts / sizeof counts[0]; c++) {
        double one = 0;
        /* 1 lane, then every lane */
        for (uint32_t nth = 1; nth <= lanes; nth += lanes > 1 ? lanes - 1 : 1) {
            double t[ROUNDS];
            const int reps = (int)(400000 / counts[c]);
            for (int r = 0; r < ROUNDS; r++) {
                double t0 = now_s();
                for (int k = 0; k < reps; k++)
                    cpu_pool_run_items(pool, busy_item, sink, counts[c], 4, nth);
                t[r] = (now_s() - t0) / reps;
            }
            const double med = median(t, ROUNDS);
            if (nth == 1)
                one = med;
            printf("pool items %4lld items, %u lane%s  %8.0f ns per dispatch", (long long)counts[c],
                   nth, nth == 1 ? " " : "s", med * 1e9);
            if (nth > 1)
                printf(", %5.0f ns over 1-lane time / %u", (med - one / nth) * 1e9, nth);
            printf("\n");
        }
    }
}

int main(int argc, char **argv)
{
    const char *what = argc > 1 ? argv[1] : "all";
    const uint32_t lanes = argc > 2 ? (uint32_t)atoi(argv[2]) : 2;
    sy_host host;
    memset(&host, 0, sizeof host);
    host.abi_version = SY_PLUGIN_ABI_VERSION;
    host.struct_size = sizeof host;
    host.alloc = bench_alloc;
    host.free = bench_free;
    hwloc_topology_t topo;
    hwloc_topology_init(&topo);
    hwloc_topology_load(topo);
    cpu_pool *pool = NULL;
    if (cpu_pool_create(&host, topo, lanes, true, &pool) != SY_OK) {
        fprintf(stderr, "microbench: no pool\n");
        return 1;
    }
    cpu_isa_features f;
    cpu_isa_detect(&f);
    if (!strcmp(what, "all") || !strcmp(what, "pool"))
        bench_pool(pool, lanes);
    if (!strcmp(what, "all") || !strcmp(what, "items"))
        bench_pool_items(pool, lanes);
    if (!strcmp(what, "all") || !strcmp(what, "bandwidth"))
        bench_bandwidth(pool, lanes);
    if (!strcmp(what, "all") || !strcmp(what, "gemm")) {
        bench_gemm(&f, SY_DTYPE_Q4_0, 2048);
        bench_gemm(&f, SY_DTYPE_Q4_1, 1536);
        bench_gemm(&f, SY_DTYPE_Q5_0, 640);
        bench_gemm(&f, SY_DTYPE_Q4_K, 1536);
    }
    if (!strcmp(what, "all") || !strcmp(what, "attention")) {
        const cpu_isa_table *isa = NULL;
        cpu_isa_select(&f, "auto", &isa);
        bench_attention(isa, 512, 64);
        bench_attention(isa, 512, 256);
    }
    if (!strcmp(what, "ab")) {
        const cpu_isa_table *isa = NULL;
        if (cpu_isa_select(&f, "avx512", &isa) == SY_OK)
            bench_ab(isa, 1536, (size_t)64 << 20);
    }
    if (!strcmp(what, "all") || !strcmp(what, "qdot")) {
        const char *tables[] = {"scalar", "avx2", "avxvnni", "avx512"};
        const char *only = argc > 3 ? argv[3] : NULL;
        for (size_t i = 0; i < 4; i++) {
            const cpu_isa_table *isa = NULL;
            if (only && strcmp(only, tables[i]) != 0)
                continue;
            if (cpu_isa_select(&f, tables[i], &isa) != SY_OK)
                continue;
            bench_qdot(isa, 1536, (size_t)64 << 20);
        }
    }
    cpu_pool_destroy(pool);
    hwloc_topology_destroy(topo);
    return 0;
}
