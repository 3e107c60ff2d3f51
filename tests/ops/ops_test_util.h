/* Helpers for the op tests: tensors and nodes built by hand on host
 * memory, a seeded RNG (fresh seed per run, printed in failure messages),
 * and a naive reference for comparisons. */
#ifndef SY_TESTS_OPS_TEST_UTIL_H
#define SY_TESTS_OPS_TEST_UTIL_H

#include <criterion/criterion.h>
#include <math.h>
#include <stdint.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>
#include <unistd.h>

#include "ops_internal.h"
#include "quants_internal.h"
#include "switchyard/switchyard.h"

/* A contiguous tensor of |dt| and shape ne0..ne3 over |data| (may be NULL). */
static inline sy_tensor tu_tensor(sy_dtype dt, int64_t ne0, int64_t ne1, int64_t ne2, int64_t ne3,
                                  void *data)
{
    sy_tensor t;
    memset(&t, 0, sizeof t);
    t.dtype = dt;
    t.ne[0] = ne0;
    t.ne[1] = ne1;
    t.ne[2] = ne2;
    t.ne[3] = ne3;
    t.n_dims = 4;
    sy_tensor_set_contiguous_strides(&t);
    t.data = data;
    return t;
}

/* Infers |op| into |out|, allocates out->data (zeroed; freed by the
 * caller) and runs the reference kernel.  Asserts that inference works. */
static inline sy_status tu_run(sy_op op, sy_tensor **in, uint32_t n_in, const sy_op_params *p,
                               sy_tensor *out)
{
    char err[256] = "";
    memset(out, 0, sizeof *out);
    sy_status st = sy_op_infer(op, in, n_in, p, out, err, sizeof err);
    cr_assert_eq(st, SY_OK, "infer of %s failed: %s", sy_op_name(op), err);
    out->data = calloc(1, sy_tensor_nbytes(out) + 1);
    cr_assert_not_null(out->data);
    sy_node node;
    memset(&node, 0, sizeof node);
    node.op = op;
    node.n_inputs = n_in;
    for (uint32_t i = 0; i < n_in; i++)
        node.inputs[i] = in[i];
    node.output = out;
    if (p != NULL)
        node.params = *p;
    return sy_op_reference_execute(&node);
}

static inline float tu_f32_at(const sy_tensor *t, int64_t i0, int64_t i1, int64_t i2, int64_t i3)
{
    float v;
    memcpy(&v,
           (const uint8_t *)t->data + i0 * t->nb[0] + i1 * t->nb[1] + i2 * t->nb[2] + i3 * t->nb[3],
           sizeof v);
    return v;
}

/* xorshift64*: a small RNG with a seed the failure message can print. */
typedef struct {
    uint64_t s;
    uint64_t seed;
} tu_rng;

static inline tu_rng tu_rng_fresh(void)
{
    tu_rng r;
    r.seed = (uint64_t)time(NULL) ^ ((uint64_t)getpid() << 20) ^ (uint64_t)clock();
    if (r.seed == 0)
        r.seed = 0x9e3779b97f4a7c15ull;
    r.s = r.seed;
    return r;
}

static inline uint64_t tu_next(tu_rng *r)
{
    r->s ^= r->s >> 12;
    r->s ^= r->s << 25;
    r->s ^= r->s >> 27;
    return r->s * 0x2545f4914f6cdd1dull;
}

/* Uniform float in [lo, hi). */
static inline float tu_uniform(tu_rng *r, float lo, float hi)
{
    return lo + (hi - lo) * (float)((tu_next(r) >> 40) * (1.0 / 16777216.0));
}

static inline void tu_fill(tu_rng *r, float *x, int64_t n, float lo, float hi)
{
    for (int64_t i = 0; i < n; i++)
        x[i] = tu_uniform(r, lo, hi);
}

static inline uint16_t tu_h(float f)
{
    return sy__f32_to_fp16(f);
}

#endif
