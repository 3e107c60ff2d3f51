/* supports(): the CPU device runs every op of the catalogue on every dtype
 * the catalogue allows: its threaded kernels cover the common layouts and
 * the host's reference kernel everything else.  What remains to refuse is a
 * node the catalogue itself would reject; the reason names the culprit. */
#include <stdarg.h>
#include <stdio.h>

#include "cpu_internal.h"

/* Fills |why| and returns false. */
static bool cpu_refuse(sy_support *why, sy_support_reason reason, const char *fmt, ...)
    __attribute__((format(printf, 3, 4)));

static bool cpu_refuse(sy_support *why, sy_support_reason reason, const char *fmt, ...)
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

/* Inputs each op takes (0: unknown op). */
static uint32_t cpu_op_arity(uint32_t op)
{
    switch (op) {
    case SY_OP_GET_ROWS:
    case SY_OP_ADD:
    case SY_OP_MUL:
    case SY_OP_MATMUL:
    case SY_OP_ROPE:
    case SY_OP_SWIGLU:
    case SY_OP_GEGLU:
    case SY_OP_KV_WRITE:
        return 2;
    case SY_OP_ATTENTION:
        return 3;
    case SY_OP_SCALE:
    case SY_OP_RMS_NORM:
    case SY_OP_SOFTMAX:
    case SY_OP_SILU:
    case SY_OP_GELU:
    case SY_OP_COPY:
    case SY_OP_VIEW:
    case SY_OP_RESHAPE:
    case SY_OP_PERMUTE:
    case SY_OP_TRANSPOSE:
    case SY_OP_ARGMAX:
        return 1;
    default:
        return 0;
    }
}

/* Bit mask of the dtypes input |i| of |op| may have. */
static uint32_t cpu_input_dtypes(uint32_t op, uint32_t i)
{
    const uint32_t any = (1u << SY_DTYPE_COUNT) - 1;
    const uint32_t f32 = 1u << SY_DTYPE_F32;
    const uint32_t f16 = 1u << SY_DTYPE_F16;
    const uint32_t i32 = 1u << SY_DTYPE_I32;
    const uint32_t kv = f32 | f16 | (1u << SY_DTYPE_Q8_0) | (1u << SY_DTYPE_Q4_0);
    switch (op) {
    case SY_OP_GET_ROWS:
        return i == 0 ? any : i32;
    case SY_OP_MATMUL:
        return i == 0 ? any : f32 | f16;
    case SY_OP_ROPE:
        return i == 0 ? f32 : i32;
    case SY_OP_ATTENTION:
        return i == 0 ? f32 : i == 3 ? i32 : kv; /* input 3: a run-time n_past */
    case SY_OP_KV_WRITE:
        return i == 0 ? kv : i == 2 ? i32 : f32; /* input 2: a run-time start */
    case SY_OP_COPY:
    case SY_OP_VIEW:
    case SY_OP_RESHAPE:
    case SY_OP_PERMUTE:
    case SY_OP_TRANSPOSE:
        return any;
    default:
        return f32;
    }
}

/* True when COPY can write |dst| from |src|: a same-type copy moves bytes,
 * anything else goes through F32 and a quantizer for |dst|. */
static bool cpu_copy_can_write(uint32_t dst, uint32_t src)
{
    if (dst == src)
        return true;
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

static const char *cpu_dtype_list(uint32_t mask, char *buf, size_t size)
{
    size_t used = 0;
    buf[0] = '\0';
    for (uint32_t t = 0; t < SY_DTYPE_COUNT; t++) {
        if (!(mask & (1u << t)))
            continue;
        int n = snprintf(buf + used, size - used, "%s%s", used ? "/" : "", sy_dtype_name(t));
        if (n < 0 || (size_t)n >= size - used)
            break;
        used += (size_t)n;
    }
    return buf;
}

bool cpu_device_supports(void *state, uint32_t dev, const sy_node *node, sy_support *out_why)
{
    const cpu_state *s = state;
    if (out_why) {
        out_why->reason = SY_SUPPORT_YES;
        out_why->text[0] = '\0';
    }
    if (dev != 0)
        return cpu_refuse(out_why, SY_UNSUPPORTED_OP, "no device %u (the cpu plugin has one)", dev);
    if (!node)
        return cpu_refuse(out_why, SY_UNSUPPORTED_OP, "no node");
    const uint32_t op = node->op;
    const uint32_t arity = cpu_op_arity(op);
    if (arity == 0)
        return cpu_refuse(out_why, SY_UNSUPPORTED_OP, "op %u is not in the catalogue", op);
    const char *name = s->host->op_name ? s->host->op_name(s->host->ctx, op) : "op";
    /* KV_WRITE and ATTENTION may read their start / n_past from one more
     * input (types.h). */
    const uint32_t given = sy_op_has_run_time_position(node) ? arity + 1 : arity;
    if (node->n_inputs != given)
        return cpu_refuse(out_why, SY_UNSUPPORTED_SHAPE, "%s takes %u inputs, node has %u", name,
                          arity, node->n_inputs);
    if (!node->output)
        return cpu_refuse(out_why, SY_UNSUPPORTED_SHAPE, "%s has no output tensor", name);

    for (uint32_t i = 0; i < given; i++) {
        const sy_tensor *t = node->inputs[i];
        if (!t)
            return cpu_refuse(out_why, SY_UNSUPPORTED_SHAPE, "%s input %u is missing", name, i);
        if (!sy_dtype_is_valid(t->dtype))
            return cpu_refuse(out_why, SY_UNSUPPORTED_DTYPE, "%s input %u has invalid dtype %u",
                              name, i, t->dtype);
        const uint32_t allowed = cpu_input_dtypes(op, i);
        if (!(allowed & (1u << t->dtype))) {
            char list[96];
            return cpu_refuse(out_why, SY_UNSUPPORTED_DTYPE, "%s input %u is %s; the cpu device takes %s",
                              name, i, sy_dtype_name(t->dtype), cpu_dtype_list(allowed, list, sizeof list));
        }
        if (sy_dtype_is_quantized(t->dtype) && !sy_op_is_view(op) &&
            t->nb[0] != sy_dtype_type_size(t->dtype))
            return cpu_refuse(out_why, SY_UNSUPPORTED_SHAPE,
                              "%s input %u is %s with strided blocks (nb[0]=%llu)", name, i,
                              sy_dtype_name(t->dtype), (unsigned long long)t->nb[0]);
    }
    if (given > arity && sy_tensor_nelements(node->inputs[arity]) != 1)
        return cpu_refuse(out_why, SY_UNSUPPORTED_SHAPE, "%s: its run-time position is not one "
                          "element", name);
    if (op == SY_OP_COPY) {
        const int64_t dst = node->params.i[0];
        if (dst < 0 || dst >= SY_DTYPE_COUNT)
            return cpu_refuse(out_why, SY_UNSUPPORTED_DTYPE, "copy to invalid dtype %lld",
                              (long long)dst);
        if (!cpu_copy_can_write((uint32_t)dst, node->inputs[0]->dtype))
            return cpu_refuse(out_why, SY_UNSUPPORTED_DTYPE, "copy %s to %s: no quantizer for %s",
                              sy_dtype_name(node->inputs[0]->dtype), sy_dtype_name((uint32_t)dst),
                              sy_dtype_name((uint32_t)dst));
    }
    if (!sy_op_is_view(op) && op != SY_OP_KV_WRITE && s->desc.memory_bytes &&
        sy_tensor_nbytes(node->output) > s->desc.memory_bytes)
        return cpu_refuse(out_why, SY_UNSUPPORTED_SIZE, "%s output needs %llu bytes, RAM is %llu",
                          name, (unsigned long long)sy_tensor_nbytes(node->output),
                          (unsigned long long)s->desc.memory_bytes);
    return true;
}
