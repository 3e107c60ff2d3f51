/* Graph-segment execution on the emulated NPU.  Every tensor of a node
 * must live in this device's arena: the core gives its buffer handle and
 * byte offset (the host cannot map NPU memory, so |data| is NULL).  Each
 * node is checked against supports() again, because a node the NPU cannot
 * run must fail loudly here rather than compute something else.
 * Execution is synchronous, so synchronize() has nothing to wait for. */
#include <stdio.h>

#include "npusim_internal.h"

/* The plugin does not link libswitchyard, so it names statuses itself from
 * the same X-macro table. */
static const char *npu_status_name(sy_status st)
{
    switch (st) {
#define NPU_STATUS_NAME_(name, value, msg) \
    case name:                             \
        return #name;
        SY_STATUS_TABLE(NPU_STATUS_NAME_)
#undef NPU_STATUS_NAME_
    }
    return "SY_E_UNKNOWN";
}

/* Resolves |t| to its bytes in the arena. */
static sy_status npu_resolve(const npu_state *s, const sy_node *node, const sy_tensor *t,
                             npu_view *out)
{
    out->t = t;
    out->data = NULL;
    if (!t->buffer) {
        npu_log(s, SY_LOG_ERROR,
                "node '%s': tensor '%s' is not in npusim memory (the NPU cannot read host "
                "memory; it must be copied in)",
                node->name, t->name);
        return SY_E_INVALID_ARG;
    }
    out->data = npu_buffer_address(s, t->buffer, t->offset, sy_tensor_nbytes(t));
    if (!out->data) {
        npu_log(s, SY_LOG_ERROR,
                "node '%s': tensor '%s' (%llu bytes at offset %llu) is outside its npusim "
                "buffer, or the buffer is not live",
                node->name, t->name, (unsigned long long)sy_tensor_nbytes(t),
                (unsigned long long)t->offset);
        return SY_E_INVALID_ARG;
    }
    return SY_OK;
}

static sy_status npu_run_node(npu_state *s, const sy_node *node)
{
    sy_support why;
    if (!npu_device_supports(s, 0, node, &why)) {
        npu_log(s, SY_LOG_ERROR, "node '%s' cannot run on npusim: %s", node->name, why.text);
        return SY_E_UNSUPPORTED;
    }
    npu_view in0, in1, out;
    sy_status st = npu_resolve(s, node, node->inputs[0], &in0);
    if (st == SY_OK)
        st = npu_resolve(s, node, node->inputs[1], &in1);
    if (st == SY_OK)
        st = npu_resolve(s, node, node->output, &out);
    if (st != SY_OK)
        return st;
    if (node->op == SY_OP_MATMUL)
        return npu_kernel_matmul(s, &in0, &in1, &out, npu_matmul_act_bits(&s->caps, node->name));
    return npu_kernel_eltwise(s, node->op, &in0, &in1, &out);
}

sy_status npu_device_execute(void *state, uint32_t dev, sy_node *const *nodes, uint32_t n)
{
    npu_state *s = state;
    if (dev != 0 || (!nodes && n))
        return SY_E_INVALID_ARG;
    for (uint32_t i = 0; i < n; i++) {
        const sy_node *node = nodes[i];
        if (!node)
            return SY_E_INVALID_ARG;
        if (sy_op_is_view(node->op))
            continue;
        sy_status st = npu_run_node(s, node);
        if (st != SY_OK) {
            npu_log(s, SY_LOG_ERROR, "node '%s' (%s) failed: %s", node->name,
                    npu_op_name(s, node->op), npu_status_name(st));
            return st;
        }
    }
    return SY_OK;
}

sy_status npu_device_synchronize(void *state, uint32_t dev)
{
    return dev == 0 ? SY_OK : SY_E_INVALID_ARG;
}
