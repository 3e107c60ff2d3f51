/* supports(): what the emulated NPU accepts, from its capability file.
 *
 * Checked in this order, so that each refusal names the first rule a node
 * breaks: the op; the node's own form (inputs, output); shape rules (static
 * dense layouts, K alignment, rows per call, broadcasting); dtypes (weights
 * the NPU holds as integers, f32 activations); sizes (per tensor, the
 * arena, the node's tensors together).  Quick and side-effect free, as the
 * plugin guide asks: no allocation, no device work. */
#include <stdarg.h>
#include <stdio.h>

#include "npusim_internal.h"

static bool npu_refuse(sy_support *why, sy_support_reason reason, const char *fmt, ...)
    __attribute__((format(printf, 3, 4)));

/* Fills |why| and returns false. */
static bool npu_refuse(sy_support *why, sy_support_reason reason, const char *fmt, ...)
{
    if (why) {
        why->reason = reason;
        va_list ap;
        va_start(ap, fmt);
        vsnprintf(why->text, sizeof why->text, fmt, ap);
        va_end(ap);
    }
    return false;
}

/* True when rows of ne[0] elements are dense (nb[0] is the element size). */
static bool npu_rows_dense(const sy_tensor *t)
{
    return t->nb[0] == sy_dtype_type_size(t->dtype);
}

/* Which input a refusal is about, for the text. */
static const char *npu_role_word(uint32_t op, uint32_t i)
{
    if (op == SY_OP_MATMUL)
        return i == 0 ? "weight" : "activation";
    return i == 0 ? "input 0" : "input 1";
}

static bool npu_check_layout(const npu_state *s, const char *name, const sy_node *node,
                             sy_support *why)
{
    const uint32_t op = node->op;
    for (uint32_t i = 0; i <= node->n_inputs; i++) {
        const sy_tensor *t = i < node->n_inputs ? node->inputs[i] : node->output;
        const char *what = i < node->n_inputs ? npu_role_word(op, i) : "output";
        if (!sy_dtype_is_valid(t->dtype))
            return npu_refuse(why, SY_UNSUPPORTED_DTYPE, "%s: %s has invalid dtype %u", name,
                              what, t->dtype);
        for (int d = 0; d < SY_MAX_DIMS; d++)
            if (t->ne[d] < 1)
                return npu_refuse(why, SY_UNSUPPORTED_SHAPE, "%s: %s has ne[%d]=%lld", name,
                                  what, d, (long long)t->ne[d]);
        if (!npu_rows_dense(t))
            return npu_refuse(why, SY_UNSUPPORTED_SHAPE,
                              "%s: %s rows are strided (nb[0]=%llu); the NPU reads dense rows",
                              name, what, (unsigned long long)t->nb[0]);
        if (s->caps.static_shapes && !sy_tensor_is_contiguous(t))
            return npu_refuse(why, SY_UNSUPPORTED_SHAPE,
                              "%s: %s is a strided view; npusim compiles static dense layouts "
                              "only (add a copy node)",
                              name, what);
    }
    return true;
}

static bool npu_check_matmul_shape(const npu_state *s, const sy_node *node, sy_support *why)
{
    const sy_tensor *w = node->inputs[0], *x = node->inputs[1], *y = node->output;
    const int64_t K = w->ne[0];
    if (K % (int64_t)s->caps.k_multiple != 0)
        return npu_refuse(why, SY_UNSUPPORTED_SHAPE, "matmul: K=%lld is not a multiple of %u",
                          (long long)K, s->caps.k_multiple);
    if (x->ne[0] != K || y->ne[0] != w->ne[1] || y->ne[1] != x->ne[1] ||
        x->ne[2] % w->ne[2] != 0 || x->ne[3] % w->ne[3] != 0 || y->ne[2] != x->ne[2] ||
        y->ne[3] != x->ne[3])
        return npu_refuse(why, SY_UNSUPPORTED_SHAPE, "matmul: shapes do not follow the matmul "
                          "rule (W [K,N,b2,b3], X [K,M,c2,c3], b|c)");
    const int64_t rows = x->ne[1] * x->ne[2] * x->ne[3];
    if (s->caps.max_rows && rows > (int64_t)s->caps.max_rows)
        return npu_refuse(why, SY_UNSUPPORTED_SHAPE,
                          "matmul: M=%lld activation rows exceed the %u the NPU compiles for",
                          (long long)rows, s->caps.max_rows);
    return true;
}

static bool npu_check_matmul_dtypes(const npu_state *s, const sy_node *node, sy_support *why)
{
    const sy_tensor *w = node->inputs[0], *x = node->inputs[1], *y = node->output;
    if (!(s->caps.weight_mask & (1u << w->dtype))) {
        char list[96];
        npu_dtype_list(s->caps.weight_mask, list, sizeof list);
        return npu_refuse(why, SY_UNSUPPORTED_DTYPE,
                          "matmul: weight dtype %s not supported (npusim takes %s)",
                          sy_dtype_name(w->dtype), list);
    }
    /* K is a multiple of the block size for every block dtype, but a graph
     * built by hand may still break that. */
    if (w->ne[0] % NPU_QK != 0)
        return npu_refuse(why, SY_UNSUPPORTED_SHAPE, "matmul: K=%lld is not a multiple of %d",
                          (long long)w->ne[0], NPU_QK);
    if (x->dtype != SY_DTYPE_F32)
        return npu_refuse(why, SY_UNSUPPORTED_DTYPE,
                          "matmul: activation dtype %s not supported (npusim quantises f32 "
                          "activations to int%u)",
                          sy_dtype_name(x->dtype), s->caps.act_bits);
    if (y->dtype != SY_DTYPE_F32)
        return npu_refuse(why, SY_UNSUPPORTED_DTYPE, "matmul: output dtype %s not supported",
                          sy_dtype_name(y->dtype));
    return true;
}

static bool npu_check_eltwise(const npu_state *s, const char *name, const sy_node *node,
                              sy_support *why)
{
    const sy_tensor *a = node->inputs[0], *b = node->inputs[1], *y = node->output;
    for (int d = 0; d < SY_MAX_DIMS; d++) {
        if (a->ne[d] % b->ne[d] != 0)
            return npu_refuse(why, SY_UNSUPPORTED_SHAPE,
                              "%s: input 1 dim %d (%lld) does not divide input 0's (%lld)", name,
                              d, (long long)b->ne[d], (long long)a->ne[d]);
        if (y->ne[d] != a->ne[d])
            return npu_refuse(why, SY_UNSUPPORTED_SHAPE, "%s: output shape differs from input 0",
                              name);
    }
    const int64_t rows = a->ne[1] * a->ne[2] * a->ne[3];
    if (s->caps.max_rows && rows > (int64_t)s->caps.max_rows)
        return npu_refuse(why, SY_UNSUPPORTED_SHAPE,
                          "%s: %lld rows exceed the %u the NPU compiles for", name,
                          (long long)rows, s->caps.max_rows);
    for (uint32_t i = 0; i <= 2; i++) {
        const sy_tensor *t = i < 2 ? node->inputs[i] : y;
        if (t->dtype != SY_DTYPE_F32)
            return npu_refuse(why, SY_UNSUPPORTED_DTYPE,
                              "%s: %s dtype %s not supported (npusim takes f32)", name,
                              i < 2 ? (i == 0 ? "input 0" : "input 1") : "output",
                              sy_dtype_name(t->dtype));
    }
    return true;
}

/* Sizes: each tensor against the per-tensor limit and the arena, then the
 * node's distinct tensors together against the arena. */
static bool npu_check_sizes(const npu_state *s, const char *name, const sy_node *node,
                            sy_support *why)
{
    const npu_caps *c = &s->caps;
    uint64_t total = 0;
    char have[32], limit[32];
    for (uint32_t i = 0; i <= node->n_inputs; i++) {
        const sy_tensor *t = i < node->n_inputs ? node->inputs[i] : node->output;
        bool seen = false;
        for (uint32_t j = 0; j < i && !seen; j++)
            seen = node->inputs[j] == t;
        const uint64_t bytes = sy_tensor_nbytes(t);
        npu_format_size(bytes, have, sizeof have);
        if (bytes > c->memory_bytes) {
            npu_format_size(c->memory_bytes, limit, sizeof limit);
            return npu_refuse(why, SY_UNSUPPORTED_SIZE,
                              "%s: tensor of %s exceeds the %s arena (%s '%s')", name, have,
                              limit, i < node->n_inputs ? npu_role_word(node->op, i) : "output",
                              t->name);
        }
        if (bytes > c->max_tensor_bytes) {
            npu_format_size(c->max_tensor_bytes, limit, sizeof limit);
            return npu_refuse(why, SY_UNSUPPORTED_SIZE,
                              "%s: tensor of %s exceeds the NPU's %s limit per tensor (%s '%s')",
                              name, have, limit,
                              i < node->n_inputs ? npu_role_word(node->op, i) : "output",
                              t->name);
        }
        if (!seen)
            total += bytes;
    }
    if (total > c->memory_bytes) {
        npu_format_size(total, have, sizeof have);
        npu_format_size(c->memory_bytes, limit, sizeof limit);
        return npu_refuse(why, SY_UNSUPPORTED_MEMORY,
                          "%s: its tensors need %s together, more than the %s arena", name, have,
                          limit);
    }
    return true;
}

bool npu_device_supports(void *state, uint32_t dev, const sy_node *node, sy_support *out_why)
{
    const npu_state *s = state;
    if (out_why) {
        out_why->reason = SY_SUPPORT_YES;
        out_why->text[0] = '\0';
    }
    if (dev != 0)
        return npu_refuse(out_why, SY_UNSUPPORTED_OP, "no device %u (npusim has one)", dev);
    if (!node)
        return npu_refuse(out_why, SY_UNSUPPORTED_OP, "no node");
    const uint32_t op = node->op;
    const char *name = npu_op_name(s, op);
    if (op >= 32 || !(s->caps.op_mask & (1u << op)))
        return npu_refuse(out_why, SY_UNSUPPORTED_OP, "%s: op not supported by npusim", name);
    if (node->n_inputs != 2 || !node->inputs[0] || !node->inputs[1] || !node->output)
        return npu_refuse(out_why, SY_UNSUPPORTED_SHAPE, "%s: needs two inputs and an output",
                          name);
    if (!npu_check_layout(s, name, node, out_why))
        return false;
    if (op == SY_OP_MATMUL) {
        if (!npu_check_matmul_shape(s, node, out_why) ||
            !npu_check_matmul_dtypes(s, node, out_why))
            return false;
    } else if (!npu_check_eltwise(s, name, node, out_why)) {
        return false;
    }
    return npu_check_sizes(s, name, node, out_why);
}
