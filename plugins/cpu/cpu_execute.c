/* Graph-segment execution: each node runs on its threaded kernel, or on the
 * host's reference kernel when no threaded kernel covers its layout (logged
 * at debug level, never silent).  Consecutive matmuls of one input run as
 * one group (cpu_kernel_matmul_group); a residual add, the rms_norm of its
 * sum and the multiply by the norm's weight, as one pass
 * (cpu_kernel_norm_chain).  Execution is synchronous, so
 * synchronize() has nothing to wait for. */
#include <stdarg.h>
#include <stddef.h>
#include <stdio.h>

#include "cpu_internal.h"
#include "cpu_kernels.h"
#include "cpu_program.h"

/* A view chain deeper than this can only come from a corrupted graph. */
#define CPU_MAX_VIEW_HOPS 64

void cpu_log(const cpu_state *s, sy_log_level level, const char *fmt, ...)
{
    if (!s->host->log)
        return;
    char msg[512];
    va_list ap;
    va_start(ap, fmt);
    vsnprintf(msg, sizeof msg, fmt, ap);
    va_end(ap);
    s->host->log(s->host->ctx, level, msg);
}

sy_status cpu_reserve(cpu_state *s, void **p, size_t *size, size_t bytes, bool *grew)
{
    if (grew)
        *grew = false;
    if (*size >= bytes)
        return SY_OK;
    void *q = s->host->alloc(s->host->ctx, bytes, CPU_ALIGN);
    if (!q)
        return SY_E_NO_MEMORY;
    if (*p)
        s->host->free(s->host->ctx, *p);
    *p = q;
    *size = bytes;
    if (grew)
        *grew = true;
    return SY_OK;
}

sy_status cpu_scratch_reserve(cpu_state *s, size_t bytes)
{
    for (uint32_t i = 0; i < s->n_threads; i++) {
        cpu_lane *l = &s->lanes[i];
        sy_status st = cpu_reserve(s, &l->scratch, &l->scratch_size, bytes, NULL);
        if (st != SY_OK)
            return st;
    }
    return SY_OK;
}

sy_status cpu_shared_reserve(cpu_state *s, size_t bytes)
{
    return cpu_reserve(s, &s->shared, &s->shared_size, bytes, NULL);
}

/* Fills t->data when the runtime left it NULL but the tensor lives in one
 * of our buffers or aliases one that does. */
static sy_status cpu_resolve_data(sy_tensor *t, int depth)
{
    if (t->data)
        return SY_OK;
    if (depth > CPU_MAX_VIEW_HOPS)
        return SY_E_GRAPH;
    if (t->buffer) {
        const cpu_buffer *b = t->buffer;
        if (!b->ptr || t->offset > b->size)
            return SY_E_INVALID_ARG;
        t->data = (char *)b->ptr + t->offset;
        return SY_OK;
    }
    if (t->view_src) {
        sy_status st = cpu_resolve_data(t->view_src, depth + 1);
        if (st != SY_OK)
            return st;
        t->data = (char *)t->view_src->data + t->view_offset;
        return SY_OK;
    }
    return SY_E_INVALID_ARG;
}

static sy_status cpu_prepare_node(sy_node *node)
{
    if (node->op >= SY_OP_COUNT || node->n_inputs > SY_MAX_INPUTS || !node->output)
        return SY_E_INVALID_ARG;
    for (uint32_t i = 0; i < node->n_inputs; i++) {
        if (!node->inputs[i])
            return SY_E_INVALID_ARG;
        sy_status st = cpu_resolve_data(node->inputs[i], 0);
        if (st != SY_OK)
            return st;
    }
    return cpu_resolve_data(node->output, 0);
}

/* The plugin does not link libswitchyard, so it names statuses itself from
 * the same X-macro table. */
const char *cpu_status_name(sy_status st)
{
    switch (st) {
#define CPU_STATUS_NAME_(name, value, msg) \
    case name:                             \
        return #name;
        SY_STATUS_TABLE(CPU_STATUS_NAME_)
#undef CPU_STATUS_NAME_
    }
    return "SY_E_UNKNOWN";
}

static const char *cpu_op_name(const cpu_state *s, uint32_t op)
{
    const char *name = s->host->op_name ? s->host->op_name(s->host->ctx, op) : NULL;
    return name ? name : "op";
}

/* Nodes are prepared in batches ahead of running them.  Between two
 * decode steps the weights streamed through the caches evict the node and
 * tensor structs; loaded one node at a time, each struct waits for memory
 * in turn (the node, then the tensors it points at).  A batch's loads are
 * independent of each other and overlap.  Prefetches issued a few nodes
 * ahead did not help: a matmul in between streams its weights through the
 * caches and evicts lines fetched and not yet used. */
#define CPU_PREPARE_BATCH 8

/* Prepares nodes [i, end) of |nodes|; on failure names the node. */
static sy_status cpu_prepare_batch(cpu_state *s, sy_node *const *nodes, uint32_t i, uint32_t end)
{
    for (; i < end; i++) {
        sy_node *node = nodes[i];
        if (!node)
            return SY_E_INVALID_ARG;
        if (sy_op_is_view(node->op))
            continue;
        sy_status st = cpu_prepare_node(node);
        if (st != SY_OK) {
            cpu_log(s, SY_LOG_ERROR, "node '%s' (%s) has a tensor without host memory",
                    node->name, cpu_op_name(s, node->op));
            return st;
        }
        /* the node's params and the tensors' shapes, on the lines after
         * the inputs and before the storage fields */
        __builtin_prefetch((const char *)node + offsetof(sy_node, params));
        __builtin_prefetch((const char *)node + offsetof(sy_node, params.f));
        for (uint32_t j = 0; j < node->n_inputs; j++)
            __builtin_prefetch(node->inputs[j]);
        __builtin_prefetch(node->output);
    }
    return SY_OK;
}

/* Runs the chain of an ADD, the RMS_NORM of its sum and a MUL of the norm
 * (cpu_kernel_norm_chain) that starts at nodes[i], the ADD or the MUL
 * possibly missing, as one kernel.  Returns the number of nodes it ran;
 * 0 when no chain starts there (the caller runs nodes[i] alone).  |rec|
 * (or NULL) records the chain that ran. */
static uint32_t cpu_run_norm_chain(cpu_state *s, sy_node *const *nodes, uint32_t i, uint32_t n,
                                   cpu_program *rec)
{
    const sy_node *add = NULL, *mul = NULL;
    uint32_t j = i;
    if (nodes[j]->op == SY_OP_ADD)
        add = nodes[j++];
    if (j >= n || !nodes[j] || nodes[j]->op != SY_OP_RMS_NORM ||
        (add && cpu_prepare_node(nodes[j]) != SY_OK))
        return 0;
    const sy_node *norm = nodes[j++];
    if (j < n && nodes[j] && nodes[j]->op == SY_OP_MUL && cpu_prepare_node(nodes[j]) == SY_OK)
        mul = nodes[j++];
    const char *why = NULL;
    cpu_norm_chain c;
    if ((add || mul) && cpu_norm_chain_prepare(s, add, norm, mul, &c, &why) == SY_OK) {
        cpu_norm_chain_run(s, &c);
        cpu_program_add_chain(rec, i, j - i, add, norm, mul, &c);
        return j - i;
    }
    if (add && mul && cpu_norm_chain_prepare(s, add, norm, NULL, &c, &why) == SY_OK) {
        cpu_norm_chain_run(s, &c);
        cpu_program_add_chain(rec, i, j - 1 - i, add, norm, NULL, &c);
        return j - 1 - i;
    }
    return 0;
}

uint32_t cpu_scan_epilogue(cpu_state *s, sy_node *const *nodes, uint32_t i, uint32_t grouped,
                           uint32_t n, cpu_epilogue *e)
{
    cpu_epilogue_begin(e, s, (const sy_node *const *)(nodes + i), grouped);
    uint32_t covered = 0;
    for (uint32_t j = i + grouped; j < n && nodes[j]; j++) {
        sy_node *node = nodes[j];
        if (sy_op_is_view(node->op))
            continue;
        if ((node->op != SY_OP_ROPE && node->op != SY_OP_KV_WRITE) ||
            cpu_prepare_node(node) != SY_OK || !cpu_epilogue_take(e, node))
            break;
        covered = j + 1 - (i + grouped);
    }
    return covered;
}

sy_status cpu_run_node(cpu_state *s, sy_node *node)
{
    const char *why = "unknown";
    sy_status st = cpu_kernel_run(s, node, &why);
    if (st == SY_E_UNSUPPORTED) {
        cpu_log(s, SY_LOG_DEBUG, "node '%s' (%s) runs the reference kernel: %s", node->name,
                cpu_op_name(s, node->op), why);
        if (!s->host->reference_execute)
            return SY_E_UNSUPPORTED;
        st = s->host->reference_execute(s->host->ctx, node);
    }
    if (st != SY_OK)
        cpu_log(s, SY_LOG_ERROR, "node '%s' (%s) failed: %s", node->name,
                cpu_op_name(s, node->op), cpu_status_name(st));
    return st;
}

sy_status cpu_execute_nodes(cpu_state *s, sy_node *const *nodes, uint32_t n, cpu_program *rec)
{
    uint32_t prepared = 0; /* nodes [0, prepared) are */
    for (uint32_t i = 0; i < n; i++) {
        if (i >= prepared) {
            prepared = n - i > CPU_PREPARE_BATCH ? i + CPU_PREPARE_BATCH : n;
            sy_status st = cpu_prepare_batch(s, nodes, i, prepared);
            if (st != SY_OK)
                return st;
        }
        sy_node *node = nodes[i];
        if (sy_op_is_view(node->op))
            continue;
        if (node->op == SY_OP_ADD || node->op == SY_OP_RMS_NORM) {
            const uint32_t ran = cpu_run_norm_chain(s, nodes, i, n, rec);
            if (ran) {
                i += ran - 1;
                continue;
            }
        }
        if (node->op == SY_OP_MATMUL) {
            sy_status st;
            uint32_t grouped = 1;
            while (grouped < CPU_MATMUL_GROUP_MAX && i + grouped < n && nodes[i + grouped] &&
                   nodes[i + grouped]->op == SY_OP_MATMUL &&
                   cpu_prepare_node(nodes[i + grouped]) == SY_OK &&
                   cpu_matmul_can_group(s, node, nodes[i + grouped]))
                grouped++;
            cpu_epilogue epi;
            uint32_t covered = 0;
            if (grouped > 1 && s->fuse) {
                /* The nodes the scan looks at, prepared as one batch (their
                 * structs' misses overlap) rather than one by one. */
                const uint32_t want = n - (i + grouped) > CPU_PREPARE_BATCH
                                          ? i + grouped + CPU_PREPARE_BATCH
                                          : n;
                if (prepared < want) {
                    st = cpu_prepare_batch(s, nodes, prepared, want);
                    if (st != SY_OK)
                        return st;
                    prepared = want;
                }
                covered = cpu_scan_epilogue(s, nodes, i, grouped, n, &epi);
            }
            /* Refused (SY_E_UNSUPPORTED), the first member runs alone
             * below and the rest, the taken nodes too, as nodes. */
            cpu_matmul_job *job = cpu_program_job(s, rec);
            if (!job) {
                cpu_log(s, SY_LOG_ERROR, "out of memory setting up the matmul of node '%s'",
                        node->name);
                return SY_E_NO_MEMORY;
            }
            const char *why = "unknown";
            st = cpu_matmul_job_build(s, (const sy_node *const *)(nodes + i), grouped,
                                      covered ? &epi : NULL, job, &why);
            if (st == SY_OK) {
                st = cpu_matmul_job_run(s, job);
                if (st != SY_OK) {
                    cpu_log(s, SY_LOG_ERROR, "matmul from node '%s' failed: %s", node->name,
                            cpu_status_name(st));
                    return st;
                }
                cpu_program_add_job(rec, i, grouped, grouped + covered);
                i += grouped - 1 + covered;
                continue;
            }
            if (st != SY_E_UNSUPPORTED) {
                cpu_log(s, SY_LOG_ERROR, "matmul from node '%s' failed: %s", node->name,
                        cpu_status_name(st));
                return st;
            }
        }
        if (rec && cpu_op_is_eltwise(node->op)) {
            /* Checked once, kept with the step. */
            cpu_eltwise e;
            const char *why = NULL;
            if (cpu_eltwise_prepare(s, node, &e, &why) == SY_OK) {
                cpu_eltwise_run(s, &e);
                cpu_program_add_eltwise(rec, i, &e);
                continue;
            }
        }
        if (rec && node->op == SY_OP_ATTENTION) {
            /* Checked once, kept with the step. */
            cpu_attention_kept a;
            const char *why = NULL;
            if (cpu_attention_prepare(s, node, &a, &why) == SY_OK) {
                sy_status st = cpu_attention_run(s, &a, &why);
                if (st != SY_OK) {
                    cpu_log(s, SY_LOG_ERROR, "attention '%s' failed: %s (%s)", node->name,
                            cpu_status_name(st), why ? why : "");
                    return st;
                }
                cpu_program_add_attention(rec, i, &a);
                continue;
            }
        }
        sy_status st = cpu_run_node(s, node);
        if (st != SY_OK)
            return st;
        cpu_program_add_node(rec, i);
    }
    return SY_OK;
}

sy_status cpu_device_execute(void *state, uint32_t dev, sy_node *const *nodes, uint32_t n)
{
    /* Key 0: nothing kept (cpu_program.c). */
    return cpu_device_execute_keyed(state, dev, nodes, n, 0, NULL, 0);
}

sy_status cpu_device_synchronize(void *state, uint32_t dev)
{
    return dev == 0 ? SY_OK : SY_E_INVALID_ARG;
}
