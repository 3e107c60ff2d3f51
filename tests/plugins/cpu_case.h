/* Test harness shared by the CPU plugin suites (see cpu_case.c). */
#ifndef SY_TESTS_CPU_CASE_H
#define SY_TESTS_CPU_CASE_H

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

#include "switchyard/switchyard.h"

/* A random stream; |seed| is printed by every failing comparison. */
typedef struct trng {
    uint64_t seed;
    uint64_t s;
} trng;

/* Returns a uniform integer in [0, n). */
uint32_t trng_below(trng *r, uint32_t n);

/* Allowed error of an F32 result; both zero: bit-exact. */
typedef struct tol {
    double rel; /* of |want| */
    double abs; /* of max |want| over the tensor */
} tol;

extern const tol TOL_EXACT;

/* One configuration of the plugin, set through its environment. */
typedef struct run_cfg {
    const char *isa;
    const char *threads;
} run_cfg;

#define N_RUN_CFGS 14
extern const run_cfg run_cfgs[N_RUN_CFGS];

#define N_ALL_DTYPES 10
extern const sy_dtype all_dtypes[N_ALL_DTYPES];

#define TC_MAX_BUFS 64
#define TC_MAX_OUTS 4

/* One graph under test, its host buffers and its expected results. */
typedef struct tcase {
    trng rng;
    sy_graph *g;
    void *bufs[TC_MAX_BUFS];
    uint32_t n_bufs;
    sy_tensor *outs[TC_MAX_OUTS];
    /* Per-element error allowed on top of the tolerance (NULL: none). */
    const float *bound[TC_MAX_OUTS];
    void *want[TC_MAX_OUTS];
    void *got[TC_MAX_OUTS];
    uint32_t n_outs;
    /* Leaves a node writes in place (KV caches): initial and expected bytes. */
    sy_tensor *state[TC_MAX_OUTS];
    void *state_init[TC_MAX_OUTS];
    void *state_want[TC_MAX_OUTS];
    uint32_t n_state;
    char what[192];
    char log[8192]; /* messages of the last runtime */
    size_t log_used;
    bool allow_fallback; /* the case exercises the reference fallback */
} tcase;

/* Fills |n| elements of |dtype| at |dst| with random values of magnitude
 * <= ~2 (no NaN or infinity); block types get random quants and sane
 * scales, so every bit of the block formats is exercised. */
void fill_random(trng *r, sy_dtype dtype, void *dst, int64_t n);
/* Returns a uniform float in [-1, 1). */
float trng_unit(trng *r);
/* Seeds |r| from the clock and the process id. */
void trng_init(trng *r);

/* Starts a case: fresh seed, empty graph, |fmt| names it in failures. */
void tc_begin(tcase *tc, const char *fmt, ...) __attribute__((format(printf, 2, 3)));
/* Destroys the graph and frees every buffer of the case. */
void tc_end(tcase *tc);
/* Returns zeroed 64-byte aligned memory freed by tc_end(). */
void *tc_alloc(tcase *tc, size_t size);
/* Adds a leaf holding |data|, or random data of |dtype| when NULL. */
sy_tensor *tc_leaf(tcase *tc, const char *name, sy_dtype dtype, const int64_t ne[4],
                   sy_tensor_role role, void *data);
/* Adds a random input leaf. */
sy_tensor *tc_input(tcase *tc, const char *name, sy_dtype dtype, int64_t ne0, int64_t ne1,
                    int64_t ne2, int64_t ne3);
/* Adds a node and returns its output; fails the test on error. */
sy_tensor *tc_node(tcase *tc, sy_op op, const char *name, sy_tensor *const *in, uint32_t n,
                   const sy_op_params *p);
/* Marks |t| as an output compared after every run. */
void tc_output(tcase *tc, sy_tensor *t);
/* Marks leaf |t| as written in place (a KV cache); compared after every run. */
void tc_state(tcase *tc, sy_tensor *t);
/* Creates a runtime with the plugin configured as |cfg| and finds "cpu". */
sy_runtime *tc_runtime(tcase *tc, const run_cfg *cfg, uint32_t *out_dev);
/* Freezes the graph, runs the reference and the cpu device under every
 * configuration, expects |expect| from both and compares within |tl|. */
void tc_run_expect(tcase *tc, tol tl, sy_status expect);
void tc_run(tcase *tc, tol tl);
/* Row length that suits the block size of |t|. */
int64_t row_for(sy_dtype t);

/* The kernel-table tests (test_cpu_qdot.c, test_cpu_attn_rows.c): the
 * i-th of the TC_SIMD_TABLES SIMD tables (avx2, avxvnni, avx512,
 * avx512gfni, neon, dotprod), or NULL where this CPU cannot run it. */
#define TC_SIMD_TABLES 6
const struct cpu_isa_table *tc_simd_table(size_t i);
/* 64-byte aligned memory (free() it); fails the test when out of memory. */
void *tc_xalloc(size_t size);

#endif
