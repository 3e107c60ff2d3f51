/* Plugins that the loader must refuse, one per refusal path.  Built once per
 * define; each names exactly one defect and is otherwise well formed, so
 * that the refusal the test sees can only come from that defect:
 *
 *   BROKEN_ABI_99        built for ABI 99.0
 *   BROKEN_NO_ENTRY      exports a misspelt entry symbol only
 *   BROKEN_QUERY_NULL    sy_plugin_query returns NULL
 *   BROKEN_SMALL_TABLE   struct_size covers only the header fields
 *   BROKEN_NULL_EXECUTE  the required execute entry is NULL
 *   BROKEN_INIT_FAILS    init logs why through the host and fails */
#include <stddef.h>

#include "switchyard/plugin.h"

static sy_status broken_init(const sy_host *host, void **out_state)
{
#ifdef BROKEN_INIT_FAILS
    host->log(host->ctx, SY_LOG_ERROR, "no such hardware here");
    *out_state = NULL;
    return SY_E_DEVICE;
#else
    static const int no_state_needed = 0;
    (void)host;
    *out_state = (void *)&no_state_needed;
    return SY_OK;
#endif
}

static void broken_deinit(void *state)
{
    (void)state;
}

static uint32_t broken_device_count(void *state)
{
    (void)state;
    return 0;
}

static sy_status broken_describe(void *state, uint32_t dev, sy_device_desc *out_desc)
{
    (void)state;
    (void)dev;
    (void)out_desc;
    return SY_E_NOT_FOUND;
}

static bool broken_supports(void *state, uint32_t dev, const sy_node *node, sy_support *out_why)
{
    (void)state;
    (void)dev;
    (void)node;
    out_why->reason = SY_UNSUPPORTED_OP;
    return false;
}

static sy_status broken_buffer_alloc(void *state, uint32_t dev, uint64_t size,
                                     void **out_buffer)
{
    (void)state;
    (void)dev;
    (void)size;
    *out_buffer = NULL;
    return SY_E_NO_MEMORY;
}

static void broken_buffer_free(void *state, uint32_t dev, void *buffer)
{
    (void)state;
    (void)dev;
    (void)buffer;
}

static sy_status broken_copy(void *state, uint32_t dev, void *buffer, uint64_t offset,
                             const void *src, uint64_t size)
{
    (void)state;
    (void)dev;
    (void)buffer;
    (void)offset;
    (void)src;
    (void)size;
    return SY_E_DEVICE;
}

static sy_status broken_copy_out(void *state, uint32_t dev, void *buffer, uint64_t offset,
                                 void *dst, uint64_t size)
{
    (void)state;
    (void)dev;
    (void)buffer;
    (void)offset;
    (void)dst;
    (void)size;
    return SY_E_DEVICE;
}

#ifndef BROKEN_NULL_EXECUTE
static sy_status broken_execute(void *state, uint32_t dev, sy_node *const *nodes, uint32_t n)
{
    (void)state;
    (void)dev;
    (void)nodes;
    (void)n;
    return SY_E_DEVICE;
}
#endif

static sy_status broken_synchronize(void *state, uint32_t dev)
{
    (void)state;
    (void)dev;
    return SY_OK;
}

static const sy_plugin_desc broken_desc = {
#ifdef BROKEN_ABI_99
    .abi_version = 99u << 16,
#else
    .abi_version = SY_PLUGIN_ABI_VERSION,
#endif
#ifdef BROKEN_SMALL_TABLE
    .struct_size = offsetof(sy_plugin_desc, init),
#else
    .struct_size = sizeof(sy_plugin_desc),
#endif
    .name = BROKEN_NAME,
    .version = "0.0.1",
    .vendor = "switchyard tests",
    .init = broken_init,
    .deinit = broken_deinit,
    .device_count = broken_device_count,
    .describe = broken_describe,
    .supports = broken_supports,
    .buffer_alloc = broken_buffer_alloc,
    .buffer_free = broken_buffer_free,
    .copy_in = broken_copy,
    .copy_out = broken_copy_out,
#ifndef BROKEN_NULL_EXECUTE
    .execute = broken_execute,
#endif
    .synchronize = broken_synchronize,
};

#ifdef BROKEN_NO_ENTRY
SY_PLUGIN_EXPORT const sy_plugin_desc *sy_plugin_qurey(uint32_t host_abi);
SY_PLUGIN_EXPORT const sy_plugin_desc *sy_plugin_qurey(uint32_t host_abi)
#else
SY_PLUGIN_EXPORT const sy_plugin_desc *sy_plugin_query(uint32_t host_abi);
SY_PLUGIN_EXPORT const sy_plugin_desc *sy_plugin_query(uint32_t host_abi)
#endif
{
    (void)host_abi;
#ifdef BROKEN_QUERY_NULL
    (void)broken_desc; /* kept so that only the NULL differs from a good plugin */
    return NULL;
#else
    return &broken_desc;
#endif
}
