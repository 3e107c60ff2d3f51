/* Declarations shared between the files of the op catalogue (ops/) and
 * visible to the rest of libswitchyard, never to plugins: shape-inference
 * helpers, row access through strides, and the reference kernels that
 * sy_op_reference_execute() dispatches to.
 *
 * Numerics of the reference kernels (the ground truth every plugin is
 * compared against): inputs are converted to float exactly (F16, BF16 and
 * block types dequantize exactly to F32), every reduction (dot products,
 * sums of squares, softmax sums, attention mixes) accumulates in double,
 * transcendental functions run in double, and each result is rounded to
 * float once when it is stored. */
#ifndef SY_OPS_OPS_INTERNAL_H
#define SY_OPS_OPS_INTERNAL_H

#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>

#include "quants_internal.h"
#include "switchyard/switchyard.h"

/* ------------------------------------------------------- shape inference */

/* Writes "<op name>: <formatted message>" into |err| (may be NULL) and
 * returns |st|, so that a check reads `return sy__op_fail(...)`. */
sy_status sy__op_fail(char *err, size_t err_size, sy_status st, sy_op op, const char *fmt, ...)
#if defined(__GNUC__)
    __attribute__((format(printf, 5, 6)))
#endif
    ;

/* Formats ne[] as "[4,3,2]" (trailing 1s dropped, at least one dim) into
 * |buf| of at least SY__SHAPE_STR_MAX bytes and returns |buf|. */
#define SY__SHAPE_STR_MAX 96
const char *sy__shape_str(const int64_t ne[SY_MAX_DIMS], char *buf);

/* Returns 1 + the index of the last dim whose extent is not 1 (at least 1). */
uint32_t sy__dims_of(const int64_t ne[SY_MAX_DIMS]);

/* Number of inputs |op| takes, or 0 for SY_OP_NONE and unknown values. */
uint32_t sy__op_arity(sy_op op);

/* Infers the alias ops VIEW, RESHAPE, PERMUTE, TRANSPOSE and KV_WRITE into
 * |out| (a scratch tensor the caller zeroed).  Inputs were already checked
 * for count, NULL, dtype and extents by sy_op_infer(). */
sy_status sy__infer_alias(sy_op op, sy_tensor *const *in, uint32_t n_in, const sy_op_params *p,
                          sy_tensor *out, char *err, size_t err_size);

/* Checks input |i| of |op|, the run-time start or n_past of KV_WRITE and
 * ATTENTION: one I32 element, with the params' own value |param| (p.i[0])
 * left at 0. */
sy_status sy__want_run_time_position(sy_op op, uint32_t i, const sy_tensor *t, int64_t param,
                                     char *err, size_t err_size);

/* ------------------------------------------------------------ row access */

/* Address of row (i1, i2, i3) of |t|: element (0, i1, i2, i3). */
static inline uint8_t *sy__row_ptr(const sy_tensor *t, int64_t i1, int64_t i2, int64_t i3)
{
    return (uint8_t *)t->data + (uint64_t)i1 * t->nb[1] + (uint64_t)i2 * t->nb[2] +
           (uint64_t)i3 * t->nb[3];
}

/* Splits a flat row number |r| (0 .. ne1*ne2*ne3-1) into (i1, i2, i3). */
static inline void sy__row_index(const sy_tensor *t, int64_t r, int64_t *out_i1, int64_t *out_i2,
                                 int64_t *out_i3)
{
    *out_i1 = r % t->ne[1];
    *out_i2 = (r / t->ne[1]) % t->ne[2];
    *out_i3 = r / (t->ne[1] * t->ne[2]);
}

static inline int64_t sy__nrows(const sy_tensor *t)
{
    return t->ne[1] * t->ne[2] * t->ne[3];
}

/* Reads the ne[0] elements of row (i1, i2, i3) of |t| as F32 into |dst|.
 * Any dtype; strided rows (nb[0] larger than the element) work for the
 * non-block types.  SY_E_UNSUPPORTED for a block type whose row is not
 * dense. */
sy_status sy__row_load_f32(const sy_tensor *t, int64_t i1, int64_t i2, int64_t i3, float *dst);

/* Writes |src| (ne[0] F32 values) as row (i1, i2, i3) of |t| in t's dtype
 * (rounding or quantizing as sy__quantize_row does).  SY_E_DTYPE for the
 * K-quants, SY_E_UNSUPPORTED for a non-dense block row. */
sy_status sy__row_store_f32(sy_tensor *t, int64_t i1, int64_t i2, int64_t i3, const float *src);

/* Reads one I32 element (i0 of row i1, i2, i3); the caller checked the dtype. */
int32_t sy__load_i32(const sy_tensor *t, int64_t i0, int64_t i1, int64_t i2, int64_t i3);

/* The value of a run-time start or n_past input (one I32 element in host
 * memory); SY_E_INVALID_ARG when |t| is not that. */
sy_status sy__run_time_position(const sy_tensor *t, int64_t *out);

/* Stores one F32 value at element (i0, i1, i2, i3) of an F32 tensor. */
void sy__store_f32(sy_tensor *t, int64_t i0, int64_t i1, int64_t i2, int64_t i3, float v);

/* ------------------------------------------------------ reference kernels */

/* Each kernel assumes sy_op_reference_execute() already validated the node
 * with sy_op_infer() and checked every data pointer; each still refuses a
 * dtype it cannot handle with SY_E_DTYPE rather than misreading memory. */
sy_status sy__ref_binary(const sy_node *node);    /* ADD, MUL */
sy_status sy__ref_unary(const sy_node *node);     /* SCALE, SILU, GELU */
sy_status sy__ref_glu(const sy_node *node);       /* SWIGLU, GEGLU */
sy_status sy__ref_rms_norm(const sy_node *node);
sy_status sy__ref_matmul(const sy_node *node);
sy_status sy__ref_rope(const sy_node *node);
sy_status sy__ref_softmax(const sy_node *node);
sy_status sy__ref_attention(const sy_node *node);
sy_status sy__ref_copy(const sy_node *node);
sy_status sy__ref_kv_write(const sy_node *node);
sy_status sy__ref_get_rows(const sy_node *node);
sy_status sy__ref_argmax(const sy_node *node);

/* Scalar activations in double, shared by the unary and gated kernels. */
double sy__silu(double x);
double sy__gelu_tanh(double x);

#endif
