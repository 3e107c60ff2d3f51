/* A plugin host for tests that open a plugin module directly (dlopen, no
 * runtime): it logs into a buffer, allocates with posix_memalign and
 * serves the reference kernels and costs from libswitchyard. */
#ifndef SY_TEST_DIRECT_HOST_H
#define SY_TEST_DIRECT_HOST_H

#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "switchyard/plugin.h"
#include "switchyard/switchyard.h"

typedef struct direct_host {
    sy_host host;
    char log[8192];
    size_t log_used;
} direct_host;

static inline void direct_log(void *ctx, sy_log_level level, const char *msg)
{
    direct_host *h = ctx;
    int n = snprintf(h->log + h->log_used, sizeof h->log - h->log_used, "%s\n", msg);
    if (n > 0 && (size_t)n < sizeof h->log - h->log_used)
        h->log_used += (size_t)n;
}

static inline void *direct_alloc(void *ctx, size_t size, size_t align)
{
    void *p = NULL;
    return posix_memalign(&p, align < sizeof(void *) ? sizeof(void *) : align, size ? size : 1) == 0
               ? p
               : NULL;
}

static inline void direct_free(void *ctx, void *ptr)
{
    free(ptr);
}

static inline const char *direct_op_name(void *ctx, uint32_t op)
{
    return sy_op_name((sy_op)op);
}

static inline sy_status direct_reference(void *ctx, const sy_node *node)
{
    return sy_op_reference_execute(node);
}

static inline void direct_cost(void *ctx, const sy_node *node, uint64_t *out_flops, uint64_t *out_bytes)
{
    sy_op_cost(node, out_flops, out_bytes);
}

static inline void direct_host_init(direct_host *h)
{
    memset(h, 0, sizeof *h);
    h->host.abi_version = SY_PLUGIN_ABI_VERSION;
    h->host.struct_size = sizeof h->host;
    h->host.ctx = h;
    h->host.log = direct_log;
    h->host.alloc = direct_alloc;
    h->host.free = direct_free;
    h->host.op_name = direct_op_name;
    h->host.reference_execute = direct_reference;
    h->host.op_cost = direct_cost;
}

#endif
