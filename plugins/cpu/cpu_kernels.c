/* Routes a node to its threaded kernel. */
#include "cpu_kernels.h"

sy_status cpu_kernel_run(cpu_state *s, const sy_node *node, const char **out_why)
{
    if (cpu_op_is_eltwise(node->op))
        return cpu_kernel_elementwise(s, node, out_why);
    switch (node->op) {
    case SY_OP_MATMUL:
        return cpu_kernel_matmul(s, node, out_why);
    case SY_OP_RMS_NORM:
        return cpu_kernel_rms_norm(s, node, out_why);
    case SY_OP_SOFTMAX:
        return cpu_kernel_softmax(s, node, out_why);
    case SY_OP_ROPE:
        return cpu_kernel_rope(s, node, out_why);
    case SY_OP_ARGMAX:
        return cpu_kernel_argmax(s, node, out_why);
    case SY_OP_ATTENTION:
        return cpu_kernel_attention(s, node, out_why);
    case SY_OP_GET_ROWS:
        return cpu_kernel_get_rows(s, node, out_why);
    case SY_OP_KV_WRITE:
        return cpu_kernel_kv_write(s, node, out_why);
    case SY_OP_COPY:
        return cpu_kernel_copy(s, node, out_why);
    default:
        *out_why = "no threaded kernel for this op";
        return SY_E_UNSUPPORTED;
    }
}
