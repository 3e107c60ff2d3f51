/* The OpenCL plugin's entry table: the only symbol this module exports. */
#include "ocl_internal.h"

static const sy_plugin_desc ocl_plugin_desc = {
    .abi_version = SY_PLUGIN_ABI_VERSION,
    .struct_size = sizeof(sy_plugin_desc),
    .name = OCL_PLUGIN_NAME,
    .version = OCL_PLUGIN_VERSION,
    .vendor = OCL_PLUGIN_VENDOR,
    .init = ocl_device_init,
    .deinit = ocl_device_deinit,
    .device_count = ocl_device_count,
    .describe = ocl_device_describe,
    .supports = ocl_device_supports,
    .buffer_alloc = ocl_buffer_alloc,
    .buffer_import_host = ocl_buffer_import_host,
    .buffer_free = ocl_buffer_free,
    .buffer_host_ptr = ocl_buffer_host_ptr,
    .copy_in = ocl_buffer_copy_in,
    .copy_out = ocl_buffer_copy_out,
    .copy_device = ocl_buffer_copy_device,
    .execute = ocl_device_execute,
    .synchronize = ocl_device_synchronize,
    .self_test = ocl_device_self_test,
    .event_record = ocl_device_event_record,
    .event_wait = ocl_device_event_wait,
    .event_release = ocl_device_event_release,
    .memory_usage = ocl_buffer_memory_usage,
};

SY_PLUGIN_EXPORT const sy_plugin_desc *sy_plugin_query(uint32_t host_abi);

/* Returns the table for a host of the same ABI major, NULL otherwise.
 * Touches no hardware: OpenCL is first called from init(). */
SY_PLUGIN_EXPORT const sy_plugin_desc *sy_plugin_query(uint32_t host_abi)
{
    if (SY_PLUGIN_ABI_MAJOR_OF(host_abi) != SY_PLUGIN_ABI_MAJOR)
        return NULL;
    return &ocl_plugin_desc;
}
