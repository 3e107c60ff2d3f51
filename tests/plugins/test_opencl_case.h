/* Test harness of the OpenCL plugin suites (see test_opencl_case.c). */
#ifndef SY_TESTS_OPENCL_CASE_H
#define SY_TESTS_OPENCL_CASE_H

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

#include "switchyard/switchyard.h"

/* A random stream; |seed| is printed by every failing comparison. */
typedef struct orng {
    uint64_t seed;
    uint64_t s;
} orng;

/* Returns a uniform integer in [0, n). */
uint32_t orng_below(orng *r, uint32_t n);
/* Returns a uniform float in [-1, 1). */
float orng_unit(orng *r);

/* Allowed error of an F32 result; both zero: bit-exact. */
typedef struct otol {
    double rel; /* of |want| */
    double abs; /* of max |want| over the tensor */
} otol;

extern const otol OTOL_EXACT;

#define O_N_DTYPES 12
/* Every dtype of the catalogue. */
extern const sy_dtype o_all_dtypes[O_N_DTYPES];

#define OC_MAX_BUFS 64
#define OC_MAX_OUTS 4

/* One graph under test, its host buffers and its expected results. */
typedef struct ocase {
    orng rng;
    sy_graph *g;
    void *bufs[OC_MAX_BUFS];
    uint32_t n_bufs;
    sy_tensor *outs[OC_MAX_OUTS];
    void *want[OC_MAX_OUTS];
    void *got[OC_MAX_OUTS];
    uint32_t n_outs;
    /* Leaves a node writes in place (KV caches): initial and expected bytes. */
    sy_tensor *state[OC_MAX_OUTS];
    void *state_init[OC_MAX_OUTS];
    void *state_want[OC_MAX_OUTS];
    uint32_t n_state;
    char what[192];
    char log[16384]; /* messages of the last runtime */
    size_t log_used;
    bool allow_host;   /* the case may run nodes on the host (fallback) */
    bool only_unified; /* skip the discrete-memory configuration */
    bool both_matvec;  /* also run with each single-token matmul kernel forced */
} ocase;

/* Starts a case: fresh seed, empty graph, |fmt| names it in failures. */
void oc_begin(ocase *tc, const char *fmt, ...) __attribute__((format(printf, 2, 3)));
/* Destroys the graph and frees every buffer of the case. */
void oc_end(ocase *tc);
/* Returns zeroed 64-byte aligned memory freed by oc_end(). */
void *oc_alloc(ocase *tc, size_t size);
/* Fills |n| elements of |dtype| with random values (block types get sane
 * scales and random quants). */
void oc_fill_random(orng *r, sy_dtype dtype, void *dst, int64_t n);
/* Adds a leaf holding |data|, or random data of |dtype| when NULL. */
sy_tensor *oc_leaf(ocase *tc, const char *name, sy_dtype dtype, const int64_t ne[4],
                   sy_tensor_role role, void *data);
/* Adds a random input leaf. */
sy_tensor *oc_input(ocase *tc, const char *name, sy_dtype dtype, int64_t ne0, int64_t ne1,
                    int64_t ne2, int64_t ne3);
/* Adds a node and returns its output; fails the test on error. */
sy_tensor *oc_node(ocase *tc, sy_op op, const char *name, sy_tensor *const *in, uint32_t n,
                   const sy_op_params *p);
/* Marks |t| as an output compared after every run. */
void oc_output(ocase *tc, sy_tensor *t);
/* Marks leaf |t| as written in place (a KV cache); compared after every run. */
void oc_state(ocase *tc, sy_tensor *t);

/* Creates a runtime that logs into tc->log, with the plugin's memory model
 * forced discrete when |discrete| (SWITCHYARD_OPENCL_DISCRETE=1). */
sy_runtime *oc_runtime(ocase *tc, bool discrete);
/* Same, with SWITCHYARD_OPENCL_MATVEC set to |matvec| ("rows", "groups")
 * and SWITCHYARD_OPENCL_MATVEC_WG to |wg| ("16") unless NULL. */
sy_runtime *oc_runtime_cfg(ocase *tc, bool discrete, const char *matvec, const char *wg);
/* Number of "opencl:N" devices of |rt|; their indices in |out| (up to 16). */
uint32_t oc_devices(const sy_runtime *rt, uint32_t out[16]);

/* Freezes the graph, runs the reference, then every OpenCL device in the
 * unified and the discrete configuration (and with each single-token
 * matmul kernel when both_matvec); expects |expect| from all and compares
 * within |tl|. */
void oc_run_expect(ocase *tc, otol tl, sy_status expect);
void oc_run(ocase *tc, otol tl);

/* Row length that suits the block size of |t|. */
int64_t o_row_for(sy_dtype t);

#endif
