/* Decode attention of whole models, the CPU plugin's kernel alone: one
 * query token against a KV cache filled to a depth, every layer in turn,
 * as a decode step runs it.  Compiled by bench/attention.sh from the
 * plugin's sources with one or more builds of cpu_kernels_attention.c
 * (the one in the tree, an older one), each its own program, run
 * interleaved so that they meet the same load on a shared machine.
 *
 *   attention_bench SHAPE DEPTH THREADS KV_TYPE ROUNDS
 *
 * SHAPE: smollm2 (30 layers, 9 query heads on 3 kv heads of 64),
 * 1b (22 layers, 32 on 4 of 64: the synth 1B), gemma (18 layers, 4 on 1
 * of 256).  KV_TYPE: f16, f32, q8_0 or q4_0.  Each layer's cache is its own
 * buffer, [head dim, kv heads, depth + 1], so a deep cache is read from
 * memory, not from the last-level cache.  Prints the median of ROUNDS
 * tokens' times (each round runs 4 tokens and keeps their mean) and the
 * K+V bytes read per token divided by it. */
#include <hwloc.h>
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

#include "cpu_isa.h"
#include "cpu_kernels.h"
#include "cpu_threadpool.h"
#include "quants_internal.h"

#include "bench_clock.h"

static void *ab_alloc(void *ctx, size_t size, size_t align)
{
    (void)ctx;
    void *p = NULL;
    return posix_memalign(&p, align < sizeof(void *) ? sizeof(void *) : align, size ? size : 1) == 0
               ? p
               : NULL;
}

static void ab_free(void *ctx, void *ptr)
{
    (void)ctx;
    free(ptr);
}

/* The two services of cpu_execute.c the attention kernel calls. */
sy_status cpu_scratch_reserve(cpu_state *s, size_t bytes)
{
    for (uint32_t i = 0; i < s->n_threads; i++) {
        cpu_lane *l = &s->lanes[i];
        if (l->scratch_size >= bytes)
            continue;
        free(l->scratch);
        l->scratch = ab_alloc(NULL, bytes, CPU_ALIGN);
        if (!l->scratch)
            return SY_E_NO_MEMORY;
        l->scratch_size = bytes;
    }
    return SY_OK;
}

sy_status cpu_shared_reserve(cpu_state *s, size_t bytes)
{
    if (s->shared_size >= bytes)
        return SY_OK;
    free(s->shared);
    s->shared = ab_alloc(NULL, bytes, CPU_ALIGN);
    s->shared_size = s->shared ? bytes : 0;
    return s->shared ? SY_OK : SY_E_NO_MEMORY;
}

static void tensor_init(sy_tensor *t, sy_dtype dtype, int64_t n0, int64_t n1, int64_t n2)
{
    memset(t, 0, sizeof *t);
    t->dtype = dtype;
    t->n_dims = 3;
    t->ne[0] = n0, t->ne[1] = n1, t->ne[2] = n2, t->ne[3] = 1;
    t->nb[0] = sy_dtype_type_size(dtype);
    t->nb[1] = sy_tensor_row_size(t);
    t->nb[2] = t->nb[1] * (uint64_t)n1;
    t->nb[3] = t->nb[2] * (uint64_t)n2;
    t->data = ab_alloc(NULL, t->nb[3], 64);
}

/* Random rows in [-1, 1), stored as |t|'s dtype through the reference
 * quantizers. */
static void tensor_fill(sy_tensor *t, uint64_t *rng)
{
    const int64_t d = t->ne[0], rows = t->ne[1] * t->ne[2];
    float *row = malloc(sizeof(float) * (size_t)d);
    for (int64_t r = 0; r < rows; r++) {
        for (int64_t i = 0; i < d; i++) {
            *rng = *rng * 6364136223846793005ull + 1442695040888963407ull;
            row[i] = (float)((double)(*rng >> 11) / 4503599627370496.0 - 1.0);
        }
        char *dst = (char *)t->data + (size_t)r * t->nb[1];
        if (t->dtype == SY_DTYPE_F32)
            memcpy(dst, row, sizeof(float) * (size_t)d);
        else if (t->dtype == SY_DTYPE_F16)
            for (int64_t i = 0; i < d; i++)
                ((uint16_t *)dst)[i] = sy__f32_to_fp16(row[i]);
        else
            sy__quantize_row(t->dtype, row, dst, d);
    }
    free(row);
}

int main(int argc, char **argv)
{
    if (argc < 6) {
        fprintf(stderr, "usage: attention_bench smollm2|1b|gemma DEPTH THREADS f16|f32|q8_0|q4_0 "
                        "ROUNDS\n");
        return 2;
    }
    int64_t layers = 30, hq = 9, hkv = 3, d = 64;
    if (!strcmp(argv[1], "1b"))
        layers = 22, hq = 32, hkv = 4;
    else if (!strcmp(argv[1], "gemma"))
        layers = 18, hq = 4, hkv = 1, d = 256;
    const int64_t depth = atoll(argv[2]);
    const uint32_t threads = (uint32_t)atoi(argv[3]);
    sy_dtype kv = SY_DTYPE_F16;
    if (!strcmp(argv[4], "f32"))
        kv = SY_DTYPE_F32;
    else if (!strcmp(argv[4], "q8_0"))
        kv = SY_DTYPE_Q8_0;
    else if (!strcmp(argv[4], "q4_0"))
        kv = SY_DTYPE_Q4_0;
    const int rounds = atoi(argv[5]) > 0 ? atoi(argv[5]) : 1;

    sy_host host = {.abi_version = SY_PLUGIN_ABI_VERSION, .struct_size = sizeof host,
                    .alloc = ab_alloc, .free = ab_free};
    cpu_state s;
    memset(&s, 0, sizeof s);
    s.host = &host;
    s.n_threads = threads;
    hwloc_topology_init(&s.topo);
    hwloc_topology_load(s.topo);
    cpu_isa_detect(&s.features);
    const char *want = getenv("SWITCHYARD_CPU_ISA");
    if (cpu_isa_select(&s.features, want ? want : "auto", &s.isa) != SY_OK ||
        cpu_pool_create(&host, s.topo, threads, true, &s.pool) != SY_OK) {
        fprintf(stderr, "attention_bench: no ISA table or thread pool\n");
        return 1;
    }
    s.lanes = ab_alloc(NULL, sizeof(cpu_lane) * threads, CPU_ALIGN);
    memset(s.lanes, 0, sizeof(cpu_lane) * threads);

    uint64_t rng = 42;
    sy_tensor q, y, *k = calloc((size_t)layers, sizeof *k), *v = calloc((size_t)layers, sizeof *v);
    tensor_init(&q, SY_DTYPE_F32, d, hq, 1);
    tensor_init(&y, SY_DTYPE_F32, d, hq, 1);
    tensor_fill(&q, &rng);
    for (int64_t l = 0; l < layers; l++) {
        tensor_init(&k[l], kv, d, hkv, depth + 1);
        tensor_init(&v[l], kv, d, hkv, depth + 1);
        tensor_fill(&k[l], &rng);
        tensor_fill(&v[l], &rng);
    }
    sy_node node = {.op = SY_OP_ATTENTION, .n_inputs = 3, .inputs = {&q, NULL, NULL},
                    .output = &y};
    node.params.f[0] = 1.0f / sqrtf((float)d);
    node.params.i[0] = depth; /* n_past: the query is token depth + 1 */
    double *t = malloc(sizeof(double) * (size_t)rounds);
    double check = 0.0;
    for (int r = -1; r < rounds; r++) {
        const double t0 = now_s();
        for (int tok = 0; tok < 4; tok++)
            for (int64_t l = 0; l < layers; l++) {
                node.inputs[1] = &k[l];
                node.inputs[2] = &v[l];
                const char *why = NULL;
                if (cpu_kernel_attention(&s, &node, &why) != SY_OK) {
                    fprintf(stderr, "attention_bench: kernel refused: %s\n", why ? why : "?");
                    return 1;
                }
                check += ((const float *)y.data)[l % (d * hq)];
            }
        if (r >= 0)
            t[r] = (now_s() - t0) / 4.0;
    }
    const double med = median(t, rounds);
    const double bytes = 2.0 * (double)layers * (double)hkv * (double)(depth + 1) *
                         (double)sy_tensor_row_size(&k[0]);
    printf("%s depth=%lld t=%u kv=%s: %.3f ms/token (min %.3f), K+V %.1f MB/token, %.1f GB/s"
           "  [check %.3g]\n",
           argv[1], (long long)depth, threads, argv[4], med * 1e3, t[0] * 1e3, bytes / 1e6,
           bytes / med / 1e9, check);
    return 0;
}
