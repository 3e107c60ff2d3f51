/* The op catalogue: names and shape/dtype inference for every op in
 * types.h.  Alias ops (views and KV_WRITE) live in op_infer_alias.c, costs
 * in op_cost.c, kernels in ref_*.c.
 *
 * sy_op_infer() works on a zeroed scratch tensor and copies it into |out|
 * only on success, so a refused node leaves |out| untouched (STYLE.md:
 * on error nothing else changed). */
#include <math.h>
#include <stddef.h>
#include <stdio.h>
#include <string.h>

#include "ops_internal.h"

/* Index = sy_op; the names are what plans, profiles and logs print, so
 * they never change once released. */
static const struct {
    const char *name;
    uint32_t arity;
    uint32_t optional; /* inputs after the first |arity| a node may add */
} op_table[SY_OP_COUNT] = {
    [SY_OP_NONE] = {"none", 0},          [SY_OP_GET_ROWS] = {"get_rows", 2},
    [SY_OP_ADD] = {"add", 2},            [SY_OP_MUL] = {"mul", 2},
    [SY_OP_SCALE] = {"scale", 1},        [SY_OP_RMS_NORM] = {"rms_norm", 1},
    [SY_OP_MATMUL] = {"matmul", 2},      [SY_OP_ROPE] = {"rope", 2},
    [SY_OP_SOFTMAX] = {"softmax", 1},    [SY_OP_ATTENTION] = {"attention", 3, 1},
    [SY_OP_SILU] = {"silu", 1},          [SY_OP_GELU] = {"gelu", 1},
    [SY_OP_SWIGLU] = {"swiglu", 2},      [SY_OP_GEGLU] = {"geglu", 2},
    [SY_OP_COPY] = {"copy", 1},          [SY_OP_VIEW] = {"view", 1},
    [SY_OP_RESHAPE] = {"reshape", 1},    [SY_OP_PERMUTE] = {"permute", 1},
    [SY_OP_TRANSPOSE] = {"transpose", 1}, [SY_OP_KV_WRITE] = {"kv_write", 2, 1},
    [SY_OP_ARGMAX] = {"argmax", 1},
};

const char *sy_op_name(sy_op op)
{
    if ((uint32_t)op >= SY_OP_COUNT)
        return "invalid";
    return op_table[op].name;
}

uint32_t sy__op_arity(sy_op op)
{
    if ((uint32_t)op >= SY_OP_COUNT)
        return 0;
    return op_table[op].arity;
}

sy_status sy__op_fail(char *err, size_t err_size, sy_status st, sy_op op, const char *fmt, ...)
{
    if (err == NULL || err_size == 0)
        return st;
    int n = snprintf(err, err_size, "%s: ", sy_op_name(op));
    if (n < 0 || (size_t)n >= err_size)
        return st;
    va_list ap;
    va_start(ap, fmt);
    vsnprintf(err + n, err_size - (size_t)n, fmt, ap);
    va_end(ap);
    return st;
}

const char *sy__shape_str(const int64_t ne[SY_MAX_DIMS], char *buf)
{
    uint32_t nd = sy__dims_of(ne);
    size_t pos = 0;
    buf[pos++] = '[';
    for (uint32_t d = 0; d < nd; d++) {
        int n = snprintf(buf + pos, SY__SHAPE_STR_MAX - pos, d ? ",%lld" : "%lld", (long long)ne[d]);
        if (n < 0 || (size_t)n >= SY__SHAPE_STR_MAX - pos - 1)
            break;
        pos += (size_t)n;
    }
    buf[pos++] = ']';
    buf[pos] = '\0';
    return buf;
}

uint32_t sy__dims_of(const int64_t ne[SY_MAX_DIMS])
{
    uint32_t nd = 1;
    for (uint32_t d = 1; d < SY_MAX_DIMS; d++)
        if (ne[d] != 1)
            nd = d + 1;
    return nd;
}

/* ------------------------------------------------------- common checks */

static const char *const input_role[SY_OP_COUNT][SY_MAX_INPUTS] = {
    [SY_OP_GET_ROWS] = {"table", "ids"},   [SY_OP_MATMUL] = {"weight", "input"},
    [SY_OP_ROPE] = {"x", "positions"},     [SY_OP_ATTENTION] = {"q", "k", "v", "n_past"},
    [SY_OP_SWIGLU] = {"gate", "up"},       [SY_OP_GEGLU] = {"gate", "up"},
    [SY_OP_KV_WRITE] = {"cache", "rows", "start"},
};

/* Name of input |i| in messages: the role where the op has named inputs,
 * else "in0", "in1". */
static const char *in_name(sy_op op, uint32_t i, char buf[16])
{
    if (input_role[op][i] != NULL)
        return input_role[op][i];
    snprintf(buf, 16, "in%u", i);
    return buf;
}

static sy_status check_input(sy_op op, uint32_t i, const sy_tensor *t, char *err, size_t err_size)
{
    char nm[16];
    const char *name = in_name(op, i, nm);
    if (t == NULL)
        return sy__op_fail(err, err_size, SY_E_INVALID_ARG, op, "%s is NULL", name);
    if (!sy_dtype_is_valid(t->dtype))
        return sy__op_fail(err, err_size, SY_E_DTYPE, op, "%s has invalid dtype %u", name, t->dtype);
    int64_t total = 1;
    for (int d = 0; d < SY_MAX_DIMS; d++) {
        if (t->ne[d] < 1)
            return sy__op_fail(err, err_size, SY_E_SHAPE, op, "%s has ne[%d]=%lld, extents must be >= 1",
                               name, d, (long long)t->ne[d]);
        /* Keep element counts far from int64 overflow in every kernel. */
        if (t->ne[d] > (INT64_C(1) << 62) / total)
            return sy__op_fail(err, err_size, SY_E_LIMIT, op, "%s has more than 2^62 elements", name);
        total *= t->ne[d];
    }
    const uint32_t bs = sy_dtype_block_size(t->dtype);
    if (bs > 1 && t->ne[0] % bs != 0)
        return sy__op_fail(err, err_size, SY_E_SHAPE, op,
                           "%s is %s with ne[0]=%lld, not a multiple of its block size %u", name,
                           sy_dtype_name(t->dtype), (long long)t->ne[0], bs);
    if (bs > 1 && t->nb[0] != sy_dtype_type_size(t->dtype))
        return sy__op_fail(err, err_size, SY_E_SHAPE, op,
                           "%s is %s with nb[0]=%llu; block rows must be dense (nb[0]=%u)", name,
                           sy_dtype_name(t->dtype), (unsigned long long)t->nb[0],
                           sy_dtype_type_size(t->dtype));
    return SY_OK;
}

static sy_status want_dtype(sy_op op, uint32_t i, const sy_tensor *t, uint32_t dtype, char *err,
                            size_t err_size)
{
    char nm[16];
    if (t->dtype == dtype)
        return SY_OK;
    return sy__op_fail(err, err_size, SY_E_DTYPE, op, "%s must be %s, got %s", in_name(op, i, nm),
                       sy_dtype_name(dtype), sy_dtype_name(t->dtype));
}

sy_status sy__want_run_time_position(sy_op op, uint32_t i, const sy_tensor *t, int64_t param,
                                     char *err, size_t err_size)
{
    char nm[16];
    sy_status st = want_dtype(op, i, t, SY_DTYPE_I32, err, err_size);
    if (st != SY_OK)
        return st;
    if (sy_tensor_nelements(t) != 1) {
        char a[SY__SHAPE_STR_MAX];
        return sy__op_fail(err, err_size, SY_E_SHAPE, op, "%s must be one element, got %s",
                           in_name(op, i, nm), sy__shape_str(t->ne, a));
    }
    if (param != 0)
        return sy__op_fail(err, err_size, SY_E_INVALID_ARG, op,
                           "p.i[0] must be 0 when %s (in%u) gives it at run time, got %lld",
                           in_name(op, i, nm), i, (long long)param);
    return SY_OK;
}

static sy_status want_f32_or_f16(sy_op op, uint32_t i, const sy_tensor *t, char *err, size_t err_size)
{
    char nm[16];
    if (t->dtype == SY_DTYPE_F32 || t->dtype == SY_DTYPE_F16)
        return SY_OK;
    return sy__op_fail(err, err_size, SY_E_DTYPE, op, "%s must be f32 or f16, got %s",
                       in_name(op, i, nm), sy_dtype_name(t->dtype));
}

/* K and V of ATTENTION: the KV cache types (F32, F16, Q8_0, Q4_0). */
static sy_status want_kv_dtype(sy_op op, uint32_t i, const sy_tensor *t, char *err, size_t err_size)
{
    char nm[16];
    switch (t->dtype) {
    case SY_DTYPE_F32:
    case SY_DTYPE_F16:
    case SY_DTYPE_Q8_0:
    case SY_DTYPE_Q4_0:
        return SY_OK;
    default:
        return sy__op_fail(err, err_size, SY_E_DTYPE, op, "%s must be f32, f16, q8_0 or q4_0, got %s",
                           in_name(op, i, nm), sy_dtype_name(t->dtype));
    }
}

/* Requires ne[d] == 1 for d >= |max_dims|. */
static sy_status want_max_dims(sy_op op, uint32_t i, const sy_tensor *t, uint32_t max_dims,
                               const char *layout, char *err, size_t err_size)
{
    char nm[16], s[SY__SHAPE_STR_MAX];
    for (uint32_t d = max_dims; d < SY_MAX_DIMS; d++)
        if (t->ne[d] != 1)
            return sy__op_fail(err, err_size, SY_E_SHAPE, op, "%s must be %s, got shape %s",
                               in_name(op, i, nm), layout, sy__shape_str(t->ne, s));
    return SY_OK;
}

static bool same_shape(const sy_tensor *a, const sy_tensor *b)
{
    for (int d = 0; d < SY_MAX_DIMS; d++)
        if (a->ne[d] != b->ne[d])
            return false;
    return true;
}

static void set_output(sy_tensor *o, uint32_t dtype, const int64_t ne[SY_MAX_DIMS], uint32_t n_dims)
{
    o->dtype = dtype;
    for (int d = 0; d < SY_MAX_DIMS; d++)
        o->ne[d] = ne[d];
    o->n_dims = n_dims;
    sy_tensor_set_contiguous_strides(o);
}

static uint32_t keep_dims(const sy_tensor *in)
{
    uint32_t nd = sy__dims_of(in->ne);
    return in->n_dims > nd && in->n_dims <= SY_MAX_DIMS ? in->n_dims : nd;
}

/* ------------------------------------------------------- per-op inference */

static sy_status infer_get_rows(sy_tensor *const *in, sy_tensor *o, char *err, size_t es)
{
    sy_status st = want_max_dims(SY_OP_GET_ROWS, 0, in[0], 2, "[K,R]", err, es);
    if (st == SY_OK)
        st = want_dtype(SY_OP_GET_ROWS, 1, in[1], SY_DTYPE_I32, err, es);
    if (st == SY_OK)
        st = want_max_dims(SY_OP_GET_ROWS, 1, in[1], 1, "[M]", err, es);
    if (st != SY_OK)
        return st;
    const int64_t ne[SY_MAX_DIMS] = {in[0]->ne[0], in[1]->ne[0], 1, 1};
    set_output(o, SY_DTYPE_F32, ne, 2);
    return SY_OK;
}

static sy_status infer_broadcast(sy_op op, sy_tensor *const *in, sy_tensor *o, char *err, size_t es)
{
    sy_status st = want_dtype(op, 0, in[0], SY_DTYPE_F32, err, es);
    if (st == SY_OK)
        st = want_dtype(op, 1, in[1], SY_DTYPE_F32, err, es);
    if (st != SY_OK)
        return st;
    for (int d = 0; d < SY_MAX_DIMS; d++) {
        if (in[0]->ne[d] % in[1]->ne[d] != 0) {
            char a[SY__SHAPE_STR_MAX], b[SY__SHAPE_STR_MAX];
            return sy__op_fail(err, es, SY_E_SHAPE, op,
                               "in1 %s does not broadcast to in0 %s (ne[%d]: %lld does not divide %lld)",
                               sy__shape_str(in[1]->ne, b), sy__shape_str(in[0]->ne, a), d,
                               (long long)in[1]->ne[d], (long long)in[0]->ne[d]);
        }
    }
    set_output(o, SY_DTYPE_F32, in[0]->ne, keep_dims(in[0]));
    return SY_OK;
}

/* SCALE, SILU, GELU and RMS_NORM: F32 in, same shape out. */
static sy_status infer_unary(sy_op op, sy_tensor *const *in, const sy_op_params *p, sy_tensor *o,
                             char *err, size_t es)
{
    sy_status st = want_dtype(op, 0, in[0], SY_DTYPE_F32, err, es);
    if (st != SY_OK)
        return st;
    if (op == SY_OP_RMS_NORM && !(p->f[0] >= 0.0f && isfinite(p->f[0])))
        return sy__op_fail(err, es, SY_E_INVALID_ARG, op, "eps (p.f[0]) must be finite and >= 0, got %g",
                           (double)p->f[0]);
    if (op == SY_OP_SCALE && !(isfinite(p->f[0]) && isfinite(p->f[1])))
        return sy__op_fail(err, es, SY_E_INVALID_ARG, op, "scale %g and bias %g must be finite",
                           (double)p->f[0], (double)p->f[1]);
    set_output(o, SY_DTYPE_F32, in[0]->ne, keep_dims(in[0]));
    return SY_OK;
}

static sy_status infer_glu(sy_op op, sy_tensor *const *in, sy_tensor *o, char *err, size_t es)
{
    sy_status st = want_dtype(op, 0, in[0], SY_DTYPE_F32, err, es);
    if (st == SY_OK)
        st = want_dtype(op, 1, in[1], SY_DTYPE_F32, err, es);
    if (st != SY_OK)
        return st;
    if (!same_shape(in[0], in[1])) {
        char a[SY__SHAPE_STR_MAX], b[SY__SHAPE_STR_MAX];
        return sy__op_fail(err, es, SY_E_SHAPE, op, "gate %s and up %s must have the same shape",
                           sy__shape_str(in[0]->ne, a), sy__shape_str(in[1]->ne, b));
    }
    set_output(o, SY_DTYPE_F32, in[0]->ne, keep_dims(in[0]));
    return SY_OK;
}

static sy_status infer_matmul(sy_tensor *const *in, sy_tensor *o, char *err, size_t es)
{
    const sy_tensor *w = in[0], *x = in[1];
    sy_status st = want_f32_or_f16(SY_OP_MATMUL, 1, x, err, es);
    if (st != SY_OK)
        return st;
    if (w->ne[0] != x->ne[0])
        return sy__op_fail(err, es, SY_E_SHAPE, SY_OP_MATMUL,
                           "K mismatch, weight has K=%lld, input has K=%lld", (long long)w->ne[0],
                           (long long)x->ne[0]);
    if (x->ne[2] % w->ne[2] != 0 || x->ne[3] % w->ne[3] != 0)
        return sy__op_fail(err, es, SY_E_SHAPE, SY_OP_MATMUL,
                           "weight batch dims [%lld,%lld] must divide input batch dims [%lld,%lld]",
                           (long long)w->ne[2], (long long)w->ne[3], (long long)x->ne[2],
                           (long long)x->ne[3]);
    const int64_t ne[SY_MAX_DIMS] = {w->ne[1], x->ne[1], x->ne[2], x->ne[3]};
    uint32_t nd = keep_dims(x);
    set_output(o, SY_DTYPE_F32, ne, nd < 2 ? 2 : nd);
    return SY_OK;
}

static sy_status infer_rope(sy_tensor *const *in, const sy_op_params *p, sy_tensor *o, char *err,
                            size_t es)
{
    const sy_tensor *x = in[0], *pos = in[1];
    sy_status st = want_dtype(SY_OP_ROPE, 0, x, SY_DTYPE_F32, err, es);
    if (st == SY_OK)
        st = want_max_dims(SY_OP_ROPE, 0, x, 3, "[D,H,T]", err, es);
    if (st == SY_OK)
        st = want_dtype(SY_OP_ROPE, 1, pos, SY_DTYPE_I32, err, es);
    if (st == SY_OK)
        st = want_max_dims(SY_OP_ROPE, 1, pos, 1, "[T]", err, es);
    if (st != SY_OK)
        return st;
    if (pos->ne[0] != x->ne[2])
        return sy__op_fail(err, es, SY_E_SHAPE, SY_OP_ROPE,
                           "positions has %lld entries, x has T=%lld tokens", (long long)pos->ne[0],
                           (long long)x->ne[2]);
    if (p->i[0] != SY_ROPE_NORMAL && p->i[0] != SY_ROPE_NEOX)
        return sy__op_fail(err, es, SY_E_INVALID_ARG, SY_OP_ROPE,
                           "mode (p.i[0]) must be %d (normal) or %d (neox), got %lld", SY_ROPE_NORMAL,
                           SY_ROPE_NEOX, (long long)p->i[0]);
    if (p->i[1] < 2 || p->i[1] % 2 != 0 || p->i[1] > x->ne[0])
        return sy__op_fail(err, es, SY_E_INVALID_ARG, SY_OP_ROPE,
                           "n_rot (p.i[1]) must be even and in 2..D=%lld, got %lld", (long long)x->ne[0],
                           (long long)p->i[1]);
    if (!(p->f[0] > 0.0f && isfinite(p->f[0])))
        return sy__op_fail(err, es, SY_E_INVALID_ARG, SY_OP_ROPE,
                           "freq_base (p.f[0]) must be finite and > 0, got %g", (double)p->f[0]);
    if (!isfinite(p->f[1]))
        return sy__op_fail(err, es, SY_E_INVALID_ARG, SY_OP_ROPE, "freq_scale (p.f[1]) must be finite, got %g",
                           (double)p->f[1]);
    set_output(o, SY_DTYPE_F32, x->ne, 3);
    return SY_OK;
}

/* The mask parameters SOFTMAX and ATTENTION share: n_past and window. */
static sy_status check_mask(sy_op op, int64_t n_past, int64_t window, const char *n_past_at,
                            const char *window_at, char *err, size_t es)
{
    if (n_past < 0)
        return sy__op_fail(err, es, SY_E_INVALID_ARG, op, "n_past (%s) must be >= 0, got %lld", n_past_at,
                           (long long)n_past);
    if (window < 0)
        return sy__op_fail(err, es, SY_E_INVALID_ARG, op, "window (%s) must be >= 0, got %lld",
                           window_at, (long long)window);
    return SY_OK;
}

static sy_status infer_softmax(sy_tensor *const *in, const sy_op_params *p, sy_tensor *o, char *err,
                               size_t es)
{
    sy_status st = want_dtype(SY_OP_SOFTMAX, 0, in[0], SY_DTYPE_F32, err, es);
    if (st != SY_OK)
        return st;
    if (p->i[0] != 0 && p->i[0] != 1)
        return sy__op_fail(err, es, SY_E_INVALID_ARG, SY_OP_SOFTMAX, "causal (p.i[0]) must be 0 or 1, got %lld",
                           (long long)p->i[0]);
    st = check_mask(SY_OP_SOFTMAX, p->i[1], p->i[2], "p.i[1]", "p.i[2]", err, es);
    if (st != SY_OK)
        return st;
    /* A zero scale makes every row uniform whatever its input: it only
     * ever comes from params left unset, so it is refused loudly here
     * rather than producing plausible-looking garbage. */
    if (!isfinite(p->f[0]) || p->f[0] == 0.0f)
        return sy__op_fail(err, es, SY_E_INVALID_ARG, SY_OP_SOFTMAX,
                           "scale (p.f[0]) must be finite and non-zero (1 for a plain softmax), got %g",
                           (double)p->f[0]);
    set_output(o, SY_DTYPE_F32, in[0]->ne, keep_dims(in[0]));
    return SY_OK;
}

static sy_status infer_attention(sy_tensor *const *in, uint32_t n_in, const sy_op_params *p,
                                 sy_tensor *o, char *err, size_t es)
{
    const sy_tensor *q = in[0], *k = in[1], *v = in[2];
    sy_status st = want_dtype(SY_OP_ATTENTION, 0, q, SY_DTYPE_F32, err, es);
    if (st == SY_OK)
        st = want_kv_dtype(SY_OP_ATTENTION, 1, k, err, es);
    if (st == SY_OK)
        st = want_kv_dtype(SY_OP_ATTENTION, 2, v, err, es);
    for (uint32_t i = 0; i < 3 && st == SY_OK; i++)
        st = want_max_dims(SY_OP_ATTENTION, i, in[i], 3, i ? "[D,Hkv,S]" : "[D,Hq,T]", err, es);
    if (st != SY_OK)
        return st;
    if (!same_shape(k, v)) {
        char a[SY__SHAPE_STR_MAX], b[SY__SHAPE_STR_MAX];
        return sy__op_fail(err, es, SY_E_SHAPE, SY_OP_ATTENTION, "k %s and v %s must have the same shape",
                           sy__shape_str(k->ne, a), sy__shape_str(v->ne, b));
    }
    if (k->ne[0] != q->ne[0])
        return sy__op_fail(err, es, SY_E_SHAPE, SY_OP_ATTENTION,
                           "head size mismatch, q has D=%lld, k has D=%lld", (long long)q->ne[0],
                           (long long)k->ne[0]);
    if (q->ne[1] % k->ne[1] != 0)
        return sy__op_fail(err, es, SY_E_SHAPE, SY_OP_ATTENTION,
                           "kv heads Hkv=%lld must divide query heads Hq=%lld", (long long)k->ne[1],
                           (long long)q->ne[1]);
    st = check_mask(SY_OP_ATTENTION, p->i[0], p->i[1], "p.i[0]", "p.i[1]", err, es);
    if (st == SY_OK && n_in > 3)
        st = sy__want_run_time_position(SY_OP_ATTENTION, 3, in[3], p->i[0], err, es);
    if (st != SY_OK)
        return st;
    /* Zero scale: see infer_softmax. */
    if (!isfinite(p->f[0]) || p->f[0] == 0.0f)
        return sy__op_fail(err, es, SY_E_INVALID_ARG, SY_OP_ATTENTION,
                           "scale (p.f[0]) must be finite and non-zero (usually 1/sqrt(D)), got %g",
                           (double)p->f[0]);
    set_output(o, SY_DTYPE_F32, q->ne, 3);
    return SY_OK;
}

static bool copy_can_write(uint32_t dst, uint32_t src)
{
    if (dst == src)
        return true; /* a same-type copy moves bytes, K-quants included */
    switch (dst) {
    case SY_DTYPE_F32:
    case SY_DTYPE_F16:
    case SY_DTYPE_BF16:
    case SY_DTYPE_I32:
    case SY_DTYPE_Q8_0:
    case SY_DTYPE_Q4_0:
    case SY_DTYPE_Q4_1:
        return true;
    default:
        return false;
    }
}

static sy_status infer_copy(sy_tensor *const *in, const sy_op_params *p, sy_tensor *o, char *err,
                            size_t es)
{
    const sy_tensor *x = in[0];
    if (p->i[0] < 0 || p->i[0] >= SY_DTYPE_COUNT)
        return sy__op_fail(err, es, SY_E_DTYPE, SY_OP_COPY, "target dtype (p.i[0]) %lld is not a dtype",
                           (long long)p->i[0]);
    const uint32_t dst = (uint32_t)p->i[0];
    if (!copy_can_write(dst, x->dtype))
        return sy__op_fail(err, es, SY_E_DTYPE, SY_OP_COPY,
                           "cannot convert %s to %s (no quantizer for %s)", sy_dtype_name(x->dtype),
                           sy_dtype_name(dst), sy_dtype_name(dst));
    const uint32_t bs = sy_dtype_block_size(dst);
    if (x->ne[0] % bs != 0)
        return sy__op_fail(err, es, SY_E_SHAPE, SY_OP_COPY,
                           "ne[0]=%lld is not a multiple of the %s block size %u", (long long)x->ne[0],
                           sy_dtype_name(dst), bs);
    set_output(o, dst, x->ne, keep_dims(x));
    return SY_OK;
}

static sy_status infer_argmax(sy_tensor *const *in, sy_tensor *o, char *err, size_t es)
{
    sy_status st = want_dtype(SY_OP_ARGMAX, 0, in[0], SY_DTYPE_F32, err, es);
    if (st == SY_OK)
        st = want_max_dims(SY_OP_ARGMAX, 0, in[0], 2, "[N,M]", err, es);
    if (st != SY_OK)
        return st;
    const int64_t ne[SY_MAX_DIMS] = {in[0]->ne[1], 1, 1, 1};
    set_output(o, SY_DTYPE_I32, ne, 1);
    return SY_OK;
}

/* ------------------------------------------------------------ dispatcher */

sy_status sy_op_infer(sy_op op, sy_tensor *const *inputs, uint32_t n_inputs,
                      const sy_op_params *params, sy_tensor *out, char *err, size_t err_size)
{
    static const sy_op_params no_params;
    if (err != NULL && err_size > 0)
        err[0] = '\0';
    if ((uint32_t)op >= SY_OP_COUNT || op == SY_OP_NONE)
        return sy__op_fail(err, err_size, SY_E_INVALID_ARG, op, "unknown op %u", (unsigned)op);
    if (out == NULL)
        return sy__op_fail(err, err_size, SY_E_INVALID_ARG, op, "output tensor is NULL");
    const uint32_t want = sy__op_arity(op), most = want + op_table[op].optional;
    if (n_inputs < want || n_inputs > most) {
        if (most > want)
            return sy__op_fail(err, err_size, SY_E_INVALID_ARG, op, "takes %u or %u inputs, got %u",
                               want, most, n_inputs);
        return sy__op_fail(err, err_size, SY_E_INVALID_ARG, op, "takes %u input%s, got %u", want,
                           want == 1 ? "" : "s", n_inputs);
    }
    if (inputs == NULL)
        return sy__op_fail(err, err_size, SY_E_INVALID_ARG, op, "inputs array is NULL");
    for (uint32_t i = 0; i < n_inputs; i++) {
        sy_status st = check_input(op, i, inputs[i], err, err_size);
        if (st != SY_OK)
            return st;
    }
    const sy_op_params *p = params != NULL ? params : &no_params;

    /* The fields inference sets and reads, not the storage and name after
     * them: a session re-infers ~90 nodes per decode step, and the whole
     * struct compiled to a `rep stos` each time. */
    sy_tensor o;
    memset(&o, 0, offsetof(sy_tensor, data));
    sy_status st = SY_E_INTERNAL;
    switch (op) {
    case SY_OP_GET_ROWS:
        st = infer_get_rows(inputs, &o, err, err_size);
        break;
    case SY_OP_ADD:
    case SY_OP_MUL:
        st = infer_broadcast(op, inputs, &o, err, err_size);
        break;
    case SY_OP_SCALE:
    case SY_OP_RMS_NORM:
    case SY_OP_SILU:
    case SY_OP_GELU:
        st = infer_unary(op, inputs, p, &o, err, err_size);
        break;
    case SY_OP_MATMUL:
        st = infer_matmul(inputs, &o, err, err_size);
        break;
    case SY_OP_ROPE:
        st = infer_rope(inputs, p, &o, err, err_size);
        break;
    case SY_OP_SOFTMAX:
        st = infer_softmax(inputs, p, &o, err, err_size);
        break;
    case SY_OP_ATTENTION:
        st = infer_attention(inputs, n_inputs, p, &o, err, err_size);
        break;
    case SY_OP_SWIGLU:
    case SY_OP_GEGLU:
        st = infer_glu(op, inputs, &o, err, err_size);
        break;
    case SY_OP_COPY:
        st = infer_copy(inputs, p, &o, err, err_size);
        break;
    case SY_OP_VIEW:
    case SY_OP_RESHAPE:
    case SY_OP_PERMUTE:
    case SY_OP_TRANSPOSE:
    case SY_OP_KV_WRITE:
        st = sy__infer_alias(op, inputs, n_inputs, p, &o, err, err_size);
        break;
    case SY_OP_ARGMAX:
        st = infer_argmax(inputs, &o, err, err_size);
        break;
    case SY_OP_NONE:
    case SY_OP_COUNT:
        break;
    }
    if (st != SY_OK)
        return st;

    out->dtype = o.dtype;
    out->n_dims = o.n_dims;
    for (int d = 0; d < SY_MAX_DIMS; d++) {
        out->ne[d] = o.ne[d];
        out->nb[d] = o.nb[d];
    }
    out->view_src = o.view_src;
    out->view_offset = o.view_offset;
    return SY_OK;
}
