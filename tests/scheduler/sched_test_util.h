/* Helpers for the scheduler tests: a seeded RNG (fresh seed per run,
 * printed on failure), random placement problems with capability holes,
 * runtimes with the real cpu device and the fake test devices, random
 * op graphs and a small decoder graph shaped like the llama builder's. */
#ifndef SY_TESTS_SCHED_TEST_UTIL_H
#define SY_TESTS_SCHED_TEST_UTIL_H

#include <stdbool.h>
#include <stdint.h>

#include "sched_problem.h"
#include "switchyard/switchyard.h"

#define PLUGIN(file) SY_TEST_PLUGIN_DIR "/" file

/* ------------------------------------------------------------------ rng */

/* A seed for this run: $SY_TEST_SEED when set, else time and pid. */
uint64_t st_fresh_seed(void);
uint64_t st_next(uint64_t *state);
/* Uniform in [0, 1). */
double st_uniform(uint64_t *state);
/* Uniform in [lo, hi]. */
uint32_t st_range(uint64_t *state, uint32_t lo, uint32_t hi);

/* ------------------------------------------------------ random problems */

typedef enum st_shape {
    ST_CHAIN,      /* node i reads node i-1 */
    ST_CHAIN_SKIP, /* and now and then a node up to four back (residuals) */
    ST_DAG,        /* one to three random earlier producers */
    ST_SERIES_PARALLEL /* nested series and parallel compositions (forks joined) */
} st_shape;

/* Fills |pb| with |n| nodes on |n_dev| devices: costs in [1, 100] with
 * about |hole_rate| of (node, device) pairs forbidden (never all of a
 * node's), transfer costs of latency [0, 30] plus a per-value size term. */
void st_random_problem(sy__sched_problem *pb, uint32_t n, uint32_t n_dev, st_shape shape,
                       double hole_rate, uint64_t *rng);

/* Builds a problem that repeats one random block of |block| nodes
 * |repeat| times between single-value cuts (a model's layers). */
void st_layered_problem(sy__sched_problem *pb, uint32_t block, uint32_t repeat, uint32_t n_dev,
                        uint64_t *rng);

/* ------------------------------------------------------------- runtimes */

/* Devices of st_runtime(), in load order. */
enum { ST_CPU = 0, ST_TESTDEV = 1, ST_OPAQUE = 2, ST_N_DEVICES = 3 };

/* A runtime with the cpu plugin, testdev (unified, refuses argmax) and
 * opaquedev (not unified, buffers not mappable). */
sy_runtime *st_runtime(void);

/* A runtime with the plugins of |plugin_path| alone, passing every
 * message, debug included, to |fn|. */
sy_runtime *st_runtime_logging(const char *plugin_path, sy_log_fn fn, void *user);

/* Messages kept one per line, by st_log_append (an st_log as |user|;
 * heap-allocate it: it is large). */
typedef struct st_log {
    char text[1 << 16];
} st_log;
void st_log_append(void *user, sy_log_level level, const char *msg);

/* Path of a fixture file under tests/scheduler/fixtures. */
const char *st_fixture(const char *name, char *buf, size_t size);

/* Path of the real SmolLM2-135M-Instruct Q4_1 (tools/fetch-models.sh);
 * skips the calling test when it is not fetched. */
const char *st_smollm2(void);

/* ------------------------------------------------------------- graphs */

/* Host memory a test graph points at; free with st_graph_free(). */
typedef struct st_graph {
    sy_graph *g;
    void **blocks;
    uint32_t n_blocks, cap_blocks;
    float *out;         /* the first marked output's host data */
    uint64_t out_count; /* its elements */
} st_graph;

/* A random DAG of |n_ops| ops over [32, 4] activations: add, mul, scale,
 * silu, rms_norm, matmul with weights, softmax and reshape views, ending
 * in an argmax (which testdev refuses) when |argmax|.  Data random. */
void st_random_graph(st_graph *sg, uint32_t n_ops, bool argmax, uint64_t *rng);

typedef struct st_decoder_shape {
    uint32_t n_layer, n_embd, n_head, n_head_kv, n_ff, n_vocab, n_ctx;
    uint32_t n_tokens, n_past;
    sy_dtype kv_type;
    bool with_data; /* allocate and fill host memory (false: planning only) */
} st_decoder_shape;

/* A llama-style decode/prefill step: token_embd, per layer attn_norm,
 * attn_q/k/v, heads reshapes, rope, cache writes, attention, attn_output,
 * residual, ffn_norm, gate/up, swiglu, down, residual; output_norm and
 * output.  Node names follow framework/llm/arch.c ("blk.3.attn_q"). */
void st_decoder_graph(st_graph *sg, const st_decoder_shape *shape, uint64_t seed);

void st_graph_free(st_graph *sg);

/* A planner on |rt| with the fixtures that make matmuls cheap on testdev
 * and elementwise ops cheap on opaquedev, so that plans mix devices. */
sy_planner *st_planner_with_profiles(sy_runtime *rt);

/* A 3-layer decode step (64 wide, 4/2 heads, 32-token context, no data). */
extern const st_decoder_shape st_small_decoder;

/* The index of |g|'s node named |name|; fails the test when there is none. */
uint32_t st_node_index(const sy_graph *g, const char *name);

/* ----------------------------------------------------------- plan checks */

/* Checks the invariants every plan keeps: each node runs on a device that
 * supports it; every input a segment reads is on its device (made there,
 * homed there, or brought by an earlier transfer from a device holding
 * it); one transfer per tensor and destination; memory within budgets.
 * Returns false with the first violation in |why|. */
bool st_check_plan(sy_runtime *rt, const sy_graph *g, const sy_plan *plan, char *why, size_t size);

/* Number of distinct devices the plan's segments use. */
uint32_t st_devices_used(const sy_plan *plan);

/* Plans |g| with |opts| (NULL: defaults), asserting success. */
sy_plan *st_plan(sy_planner *pl, const sy_graph *g, const sy_plan_options *opts);

/* Under AddressSanitizer, fails the test when memory leaked so far.
 * Each test calls it last: Criterion ignores the worker's exit report. */
void st_check_leaks(void);

#endif
