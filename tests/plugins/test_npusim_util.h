/* Helpers shared by the npusim suites (test_npusim_*.c). */
#ifndef SY_TESTS_NPUSIM_UTIL_H
#define SY_TESTS_NPUSIM_UTIL_H

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

#include "switchyard/switchyard.h"

/* A runtime holding npusim (and optionally the cpu plugin) from the build
 * tree, with its log captured. */
typedef struct nt_rt {
    sy_runtime *rt;
    uint32_t npu;      /* device index of npusim, UINT32_MAX when it was refused */
    uint32_t cpu;      /* device index of cpu, UINT32_MAX when not loaded */
    char log[16384];   /* every message the runtime logged */
    size_t log_used;
    char config[256];  /* temporary capability file, removed by nt_close */
} nt_rt;

/* Writes |json| to a temporary capability file and points
 * SWITCHYARD_NPUSIM_CONFIG at it (NULL |json|: unset, the default file).
 * Then creates the runtime with npusim (and cpu when |with_cpu|) at debug
 * log level.  Fails the test when the runtime cannot be created. */
void nt_open(nt_rt *t, const char *json, bool with_cpu);
/* Creates the runtime as nt_open does, leaving the environment alone
 * (|t| must be zeroed). */
void nt_open_env(nt_rt *t, bool with_cpu);
void nt_close(nt_rt *t);

/* Path of a plugin module in the build tree: "npusim/sy-npusim.so". */
const char *nt_plugin_path(const char *rel, char *out, size_t size);

/* A fresh seed (time and pid) for random inputs; printed on failure. */
uint64_t nt_fresh_seed(void);
uint64_t nt_rand(uint64_t *s);
float nt_uniform(uint64_t *s, float lo, float hi);

/* Fills |n| weights (a multiple of 32) of Q8_0 / Q4_0 / Q4_1 / Q5_0 / Q5_1
 * with random quants and small positive scales. */
void nt_fill_blocks(uint64_t *s, sy_dtype t, void *dst, int64_t n);

/* Converts |n| elements of |t| to F32 through the reference COPY kernel. */
void nt_to_f32(sy_dtype t, const void *src, int64_t n, float *dst);

/* IEEE binary16 round trip (round to nearest even), as the NPU's f16 unit. */
float nt_round_f16(float v);

/* A frozen one-node graph: matmul of a [K, N] |wtype| weight by [K, M] F32
 * activations, or |op| (ADD/MUL) of F32 a [ne0, rows] by b [bne0, brows].
 * Inputs random from |seed|; output marked with host memory. */
typedef struct nt_graph {
    sy_graph *g;
    sy_node *node;
    sy_tensor *out;
    void *in0, *in1;
    float *out_data;
    int64_t n_out;
} nt_graph;

void nt_matmul_graph(nt_graph *ng, uint64_t *seed, sy_dtype wtype, int64_t k, int64_t n,
                     int64_t m);
void nt_binary_graph(nt_graph *ng, uint64_t *seed, sy_op op, int64_t ne0, int64_t rows,
                     int64_t bne0, int64_t brows);
void nt_graph_free(nt_graph *ng);

/* Runs |ng| on device |dev| into ng->out_data; returns the status. */
sy_status nt_run(nt_rt *t, nt_graph *ng, uint32_t dev);
/* Runs the reference into a new array the caller frees. */
float *nt_reference(nt_graph *ng);

/* Asks npusim about |node|; returns the answer and fills |why|. */
bool nt_supports(nt_rt *t, const sy_node *node, sy_support *why);

#endif
