/* The npusim plugin's entry table: the only symbol this module exports.
 * npusim is the vendor template: copy this folder to start a plugin for a
 * real NPU (docs/plugin-guide.md walks through it). */
#include "npusim_internal.h"

static const sy_plugin_desc npu_plugin_desc = {
    .abi_version = SY_PLUGIN_ABI_VERSION,
    .struct_size = sizeof(sy_plugin_desc),
    .name = NPU_PLUGIN_NAME,
    .version = NPU_PLUGIN_VERSION,
    .vendor = NPU_PLUGIN_VENDOR,
    .init = npu_device_init,
    .deinit = npu_device_deinit,
    .device_count = npu_device_count,
    .describe = npu_device_describe,
    .supports = npu_device_supports,
    .buffer_alloc = npu_buffer_alloc,
    /* NPU memory is not host memory: nothing can be imported zero-copy. */
    .buffer_import_host = NULL,
    .buffer_free = npu_buffer_free,
    .buffer_host_ptr = npu_buffer_host_ptr,
    .copy_in = npu_buffer_copy_in,
    .copy_out = npu_buffer_copy_out,
    .copy_device = npu_buffer_copy_device,
    .execute = npu_device_execute,
    .synchronize = npu_device_synchronize,
    .self_test = npu_device_self_test,
    .memory_usage = npu_buffer_memory_usage,
};

SY_PLUGIN_EXPORT const sy_plugin_desc *sy_plugin_query(uint32_t host_abi);

/* Returns the table for a host of the same ABI major, NULL otherwise. */
SY_PLUGIN_EXPORT const sy_plugin_desc *sy_plugin_query(uint32_t host_abi)
{
    if (SY_PLUGIN_ABI_MAJOR_OF(host_abi) != SY_PLUGIN_ABI_MAJOR)
        return NULL;
    return &npu_plugin_desc;
}
