/* supports(): which nodes an OpenCL device runs, and why not the others.
 * Quick and side-effect free: it reads the node and what the device and
 * its programs already recorded (a program that failed to build refuses
 * its ops with the build log), and never builds or allocates. */
#include <stdarg.h>
#include <stdio.h>

#include "ocl_internal.h"

static bool ocl_refuse(sy_support *why, sy_support_reason reason, const char *fmt, ...)
    __attribute__((format(printf, 3, 4)));

static bool ocl_refuse(sy_support *why, sy_support_reason reason, const char *fmt, ...)
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

static uint32_t ocl_arity(uint32_t op)
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

ocl_family ocl_node_family(const sy_node *node)
{
    switch (node->op) {
    case SY_OP_MATMUL:
        return OCL_FAM_MATMUL;
    case SY_OP_RMS_NORM:
    case SY_OP_SOFTMAX:
    case SY_OP_ARGMAX:
    case SY_OP_ROPE:
        return OCL_FAM_ROWS;
    case SY_OP_ATTENTION:
        return OCL_FAM_ATTENTION;
    case SY_OP_ADD:
    case SY_OP_MUL:
    case SY_OP_SCALE:
    case SY_OP_SILU:
    case SY_OP_GELU:
    case SY_OP_SWIGLU:
    case SY_OP_GEGLU:
        return OCL_FAM_ELEMENTWISE;
    case SY_OP_COPY:
    case SY_OP_GET_ROWS:
    case SY_OP_KV_WRITE:
        return OCL_FAM_MEMORY;
    default:
        return OCL_FAM_COUNT;
    }
}

/* Bit mask of the dtypes input |i| of |op| may have on this plugin. */
static uint32_t ocl_input_dtypes(uint32_t op, uint32_t i)
{
    const uint32_t any = (1u << SY_DTYPE_COUNT) - 1;
    const uint32_t f32 = 1u << SY_DTYPE_F32, f16 = 1u << SY_DTYPE_F16;
    const uint32_t i32 = 1u << SY_DTYPE_I32;
    const uint32_t kv = f32 | f16 | (1u << SY_DTYPE_Q8_0) | (1u << SY_DTYPE_Q4_0);
    switch (op) {
    case SY_OP_GET_ROWS:
        return i == 0 ? any : i32;
    case SY_OP_MATMUL:
        return i == 0 ? any & ~i32 : f32 | f16;
    case SY_OP_ROPE:
        return i == 0 ? f32 : i32;
    case SY_OP_ATTENTION:
        return i == 0 ? f32 : i == 3 ? i32 : kv; /* input 3: a run-time n_past */
    case SY_OP_KV_WRITE:
        return i == 0 ? kv : i == 2 ? i32 : f32; /* input 2: a run-time start */
    case SY_OP_COPY:
        return any;
    default:
        return f32;
    }
}

static bool ocl_copy_can_write(uint32_t dst, uint32_t src)
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

static const char *ocl_dtype_list(uint32_t mask, char *buf, size_t size)
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

/* Work-items per group the attention kernel will get on |d|. */
static size_t ocl_attention_group(const ocl_dev *d)
{
    size_t limit = d->kernels[OCL_K_ATTENTION] ? d->kernel_wg[OCL_K_ATTENTION] : d->max_wg;
    if (limit > OCL_MAX_WG)
        limit = OCL_MAX_WG;
    size_t ls = 1;
    while (ls * 2 <= limit)
        ls *= 2;
    return ls;
}

/* Refuses a node whose program failed to build on |d|. */
static bool ocl_family_ok(const ocl_dev *d, ocl_family f, const char *name, sy_support *why)
{
    if (f >= OCL_FAM_COUNT || d->progs[f].state != OCL_PROG_FAILED)
        return true;
    return ocl_refuse(why, SY_UNSUPPORTED_OP, "%s: OpenCL program '%s' failed to build: %s", name,
                      ocl_family_name(f), d->progs[f].log);
}

bool ocl_device_supports(void *state, uint32_t dev, const sy_node *node, sy_support *out_why)
{
    const ocl_state *s = state;
    if (out_why) {
        out_why->reason = SY_SUPPORT_YES;
        out_why->text[0] = '\0';
    }
    if (!s || dev >= s->n_devs)
        return ocl_refuse(out_why, SY_UNSUPPORTED_OP, "no OpenCL device %u", dev);
    const ocl_dev *d = &s->devs[dev];
    if (!node)
        return ocl_refuse(out_why, SY_UNSUPPORTED_OP, "no node");
    const uint32_t op = node->op;
    const uint32_t arity = ocl_arity(op);
    if (arity == 0)
        return ocl_refuse(out_why, SY_UNSUPPORTED_OP, "op %u is not in the catalogue", op);
    const char *name = ocl_op_name(s, op);
    if (sy_op_is_view(op))
        return true;
    /* KV_WRITE and ATTENTION may take their position as one more input,
     * read when they run (the kernels check it). */
    const uint32_t n_in = sy_op_has_run_time_position(node) ? arity + 1 : arity;
    if (node->n_inputs != n_in)
        return ocl_refuse(out_why, SY_UNSUPPORTED_SHAPE, "%s takes %u inputs, node has %u", name,
                          arity, node->n_inputs);
    if (n_in > arity && (node->params.i[0] != 0 || !node->inputs[arity] ||
                         sy_tensor_nelements(node->inputs[arity]) != 1))
        return ocl_refuse(out_why, SY_UNSUPPORTED_SHAPE,
                          "%s: a run-time position is one I32 element, with 0 in the params",
                          name);
    if (!node->output)
        return ocl_refuse(out_why, SY_UNSUPPORTED_SHAPE, "%s has no output tensor", name);
    if (!ocl_family_ok(d, ocl_node_family(node), name, out_why))
        return false;
    if (op < SY_OP_COUNT && d->op_failed[op][0])
        return ocl_refuse(out_why, SY_UNSUPPORTED_OP, "%s", d->op_failed[op]);

    for (uint32_t i = 0; i < n_in; i++) {
        const sy_tensor *t = node->inputs[i];
        if (!t)
            return ocl_refuse(out_why, SY_UNSUPPORTED_SHAPE, "%s input %u is missing", name, i);
        if (!sy_dtype_is_valid(t->dtype))
            return ocl_refuse(out_why, SY_UNSUPPORTED_DTYPE, "%s input %u has invalid dtype %u",
                              name, i, t->dtype);
        const uint32_t allowed = ocl_input_dtypes(op, i);
        if (!(allowed & (1u << t->dtype))) {
            char list[96];
            return ocl_refuse(out_why, SY_UNSUPPORTED_DTYPE, "%s input %u is %s; OpenCL takes %s",
                              name, i, sy_dtype_name(t->dtype),
                              ocl_dtype_list(allowed, list, sizeof list));
        }
        if (sy_dtype_is_quantized(t->dtype) && t->nb[0] != sy_dtype_type_size(t->dtype))
            return ocl_refuse(out_why, SY_UNSUPPORTED_SHAPE,
                              "%s input %u is %s with strided blocks (nb[0]=%llu)", name, i,
                              sy_dtype_name(t->dtype), (unsigned long long)t->nb[0]);
        if (d->max_alloc && sy_tensor_nbytes(t) > d->max_alloc)
            return ocl_refuse(out_why, SY_UNSUPPORTED_SIZE,
                              "%s input %u spans %llu bytes; the device allocates at most %llu",
                              name, i, (unsigned long long)sy_tensor_nbytes(t),
                              (unsigned long long)d->max_alloc);
    }
    if (d->max_alloc && sy_tensor_nbytes(node->output) > d->max_alloc)
        return ocl_refuse(out_why, SY_UNSUPPORTED_SIZE,
                          "%s output spans %llu bytes; the device allocates at most %llu", name,
                          (unsigned long long)sy_tensor_nbytes(node->output),
                          (unsigned long long)d->max_alloc);

    switch (op) {
    case SY_OP_MATMUL: {
        const sy_tensor *w = node->inputs[0], *x = node->inputs[1];
        if (w->nb[0] != sy_dtype_type_size(w->dtype))
            return ocl_refuse(out_why, SY_UNSUPPORTED_SHAPE,
                              "matmul weights must have dense rows (nb[0]=%llu, element %u bytes)",
                              (unsigned long long)w->nb[0], sy_dtype_type_size(w->dtype));
        const bool converts = x->dtype != SY_DTYPE_F32 || x->nb[0] != sizeof(float);
        if (converts && !ocl_family_ok(d, OCL_FAM_MEMORY, name, out_why))
            return false;
        break;
    }
    case SY_OP_ATTENTION: {
        for (uint32_t i = 0; i < 3; i++) {
            const sy_tensor *t = node->inputs[i];
            if (t->nb[0] != sy_dtype_type_size(t->dtype))
                return ocl_refuse(out_why, SY_UNSUPPORTED_SHAPE,
                                  "attention input %u has strided elements (nb[0]=%llu)", i,
                                  (unsigned long long)t->nb[0]);
        }
        const size_t ls = ocl_attention_group(d);
        const int64_t dim = node->inputs[0]->ne[0];
        if (dim > (int64_t)(OCL_ATT_ACC * ls))
            return ocl_refuse(out_why, SY_UNSUPPORTED_SHAPE,
                              "attention head size %lld exceeds %zu on this device",
                              (long long)dim, OCL_ATT_ACC * ls);
        const uint64_t local = sizeof(float) * ((uint64_t)dim + 2 * ls);
        if (d->local_mem && local > d->local_mem)
            return ocl_refuse(out_why, SY_UNSUPPORTED_MEMORY,
                              "attention needs %llu bytes of local memory, device has %llu",
                              (unsigned long long)local, (unsigned long long)d->local_mem);
        break;
    }
    case SY_OP_COPY: {
        const int64_t dst = node->params.i[0];
        if (dst < 0 || dst >= SY_DTYPE_COUNT)
            return ocl_refuse(out_why, SY_UNSUPPORTED_DTYPE, "copy to invalid dtype %lld",
                              (long long)dst);
        if (!ocl_copy_can_write((uint32_t)dst, node->inputs[0]->dtype))
            return ocl_refuse(out_why, SY_UNSUPPORTED_DTYPE, "copy %s to %s: no quantizer for %s",
                              sy_dtype_name(node->inputs[0]->dtype), sy_dtype_name((uint32_t)dst),
                              sy_dtype_name((uint32_t)dst));
        break;
    }
    case SY_OP_ARGMAX:
        if (node->inputs[0]->ne[0] > INT32_MAX)
            return ocl_refuse(out_why, SY_UNSUPPORTED_SIZE, "argmax rows longer than 2^31");
        break;
    default:
        break;
    }
    return true;
}
