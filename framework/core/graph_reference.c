/* Whole-graph execution with the portable reference kernels on the host. */
#include <stdlib.h>
#include <string.h>

#include "switchyard/switchyard.h"

sy_status sy_graph_run_reference(sy_graph *g)
{
    if (!g || !sy_graph_is_frozen(g))
        return SY_E_STATE;
    uint32_t nt = sy_graph_tensor_count(g);
    void **scratch = calloc(nt ? nt : 1, sizeof *scratch);
    if (!scratch)
        return SY_E_NO_MEMORY;
    sy_status st = SY_OK;
    /* Roots first: leaves read their host data in place, everything else
     * gets zeroed host memory (KV tensors without data start empty). */
    for (uint32_t i = 0; i < nt; i++) {
        sy_tensor *t = sy_graph_tensor(g, i);
        if (t->view_src)
            continue;
        void *host = sy_graph_host_data(g, t);
        bool leaf = !sy_graph_producer(g, t);
        if (leaf && host) {
            t->data = host;
            continue;
        }
        scratch[i] = calloc(1, sy_tensor_nbytes(t) ? sy_tensor_nbytes(t) : 1);
        if (!scratch[i]) {
            st = SY_E_NO_MEMORY;
            goto out_free;
        }
        t->data = scratch[i];
    }
    for (uint32_t i = 0; i < nt; i++) {
        sy_tensor *t = sy_graph_tensor(g, i);
        if (t->view_src)
            t->data = (char *)t->view_src->data + t->view_offset;
    }
    for (uint32_t i = 0; i < sy_graph_node_count(g); i++) {
        st = sy_op_reference_execute(sy_graph_node(g, i));
        if (st != SY_OK)
            goto out_free;
    }
    for (uint32_t i = 0; i < nt; i++) {
        sy_tensor *t = sy_graph_tensor(g, i);
        void *host = sy_graph_host_data(g, t);
        if (sy_graph_is_output(g, t) && host && host != t->data) {
            if (sy_tensor_is_contiguous(t)) {
                memcpy(host, t->data, sy_tensor_nbytes(t));
            } else {
                st = SY_E_UNSUPPORTED; /* outputs must be contiguous to be copied out */
                goto out_free;
            }
        }
    }
out_free:
    for (uint32_t i = 0; i < nt; i++) {
        sy_tensor *t = sy_graph_tensor(g, i);
        t->data = sy_graph_host_data(g, t);
        free(scratch[i]);
    }
    free(scratch);
    return st;
}
