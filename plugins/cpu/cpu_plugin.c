/* The CPU plugin's entry table: the only symbol this module exports. */
#include "cpu_internal.h"
#include "cpu_program.h"

static const sy_plugin_desc cpu_plugin_desc = {
    .abi_version = SY_PLUGIN_ABI_VERSION,
    .struct_size = sizeof(sy_plugin_desc),
    .name = CPU_PLUGIN_NAME,
    .version = CPU_PLUGIN_VERSION,
    .vendor = CPU_PLUGIN_VENDOR,
    .init = cpu_device_init,
    .deinit = cpu_device_deinit,
    .device_count = cpu_device_count,
    .describe = cpu_device_describe,
    .supports = cpu_device_supports,
    .buffer_alloc = cpu_buffer_alloc,
    .buffer_import_host = cpu_buffer_import_host,
    .buffer_free = cpu_buffer_free,
    .buffer_host_ptr = cpu_buffer_host_ptr,
    .copy_in = cpu_buffer_copy_in,
    .copy_out = cpu_buffer_copy_out,
    .copy_device = cpu_buffer_copy_device,
    .execute = cpu_device_execute,
    .synchronize = cpu_device_synchronize,
    .self_test = cpu_device_self_test,
    .memory_usage = cpu_buffer_memory_usage,
    .execute_keyed = cpu_device_execute_keyed,
};

SY_PLUGIN_EXPORT const sy_plugin_desc *sy_plugin_query(uint32_t host_abi);

/* Returns the table for a host of the same ABI major, NULL otherwise. */
SY_PLUGIN_EXPORT const sy_plugin_desc *sy_plugin_query(uint32_t host_abi)
{
    if (SY_PLUGIN_ABI_MAJOR_OF(host_abi) != SY_PLUGIN_ABI_MAJOR)
        return NULL;
    return &cpu_plugin_desc;
}
