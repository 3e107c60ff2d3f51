/* Pins the layout of every struct of the plugin ABI on x86_64 (LP64), and
 * the values of the enums that cross it.  A failure here means a plugin
 * built against an older plugin.h would misread the core: append fields at
 * the end and bump the minor instead, or bump the major on purpose and
 * update these numbers in the same change. */
#include <criterion/criterion.h>
#include <stddef.h>

#include "switchyard/plugin.h"

#define PIN_OFFSET(type, field, off)                                                   \
    cr_expect_eq(offsetof(type, field), (size_t)(off), #type "." #field " is at %zu, " \
                 "pinned at %zu", offsetof(type, field), (size_t)(off))
#define PIN_SIZE(type, size) \
    cr_expect_eq(sizeof(type), (size_t)(size), "sizeof " #type " is %zu, pinned at %zu", \
                 sizeof(type), (size_t)(size))

#if defined(__x86_64__) && defined(__LP64__)

/* 1.3: KV_WRITE and ATTENTION forms with a run-time position input, no
 * table change (plugin.h). */
Test(abi, version_is_1_3)
{
    cr_expect_eq(SY_PLUGIN_ABI_VERSION, 0x00010003u);
    cr_expect_eq(SY_PLUGIN_ABI_MAJOR_OF(0x00630002u), 99u);
    cr_expect_str_eq(SY_PLUGIN_ENTRY_SYMBOL, "sy_plugin_query");
}

Test(abi, plugin_desc_layout_is_pinned)
{
    PIN_OFFSET(sy_plugin_desc, abi_version, 0);
    PIN_OFFSET(sy_plugin_desc, struct_size, 4);
    PIN_OFFSET(sy_plugin_desc, name, 8);
    PIN_OFFSET(sy_plugin_desc, version, 16);
    PIN_OFFSET(sy_plugin_desc, vendor, 24);
    PIN_OFFSET(sy_plugin_desc, init, 32);
    PIN_OFFSET(sy_plugin_desc, deinit, 40);
    PIN_OFFSET(sy_plugin_desc, device_count, 48);
    PIN_OFFSET(sy_plugin_desc, describe, 56);
    PIN_OFFSET(sy_plugin_desc, supports, 64);
    PIN_OFFSET(sy_plugin_desc, buffer_alloc, 72);
    PIN_OFFSET(sy_plugin_desc, buffer_import_host, 80);
    PIN_OFFSET(sy_plugin_desc, buffer_free, 88);
    PIN_OFFSET(sy_plugin_desc, buffer_host_ptr, 96);
    PIN_OFFSET(sy_plugin_desc, copy_in, 104);
    PIN_OFFSET(sy_plugin_desc, copy_out, 112);
    PIN_OFFSET(sy_plugin_desc, copy_device, 120);
    PIN_OFFSET(sy_plugin_desc, execute, 128);
    PIN_OFFSET(sy_plugin_desc, synchronize, 136);
    PIN_OFFSET(sy_plugin_desc, self_test, 144);
    /* ABI 1.1 */
    PIN_OFFSET(sy_plugin_desc, event_record, 152);
    PIN_OFFSET(sy_plugin_desc, event_wait, 160);
    PIN_OFFSET(sy_plugin_desc, event_release, 168);
    PIN_OFFSET(sy_plugin_desc, memory_usage, 176);
    /* ABI 1.2 */
    PIN_OFFSET(sy_plugin_desc, execute_keyed, 184);
    PIN_SIZE(sy_plugin_desc, 192);
}

Test(abi, host_layout_is_pinned)
{
    PIN_OFFSET(sy_host, abi_version, 0);
    PIN_OFFSET(sy_host, struct_size, 4);
    PIN_OFFSET(sy_host, ctx, 8);
    PIN_OFFSET(sy_host, log, 16);
    PIN_OFFSET(sy_host, alloc, 24);
    PIN_OFFSET(sy_host, free, 32);
    PIN_OFFSET(sy_host, op_name, 40);
    PIN_OFFSET(sy_host, reference_execute, 48);
    PIN_OFFSET(sy_host, op_cost, 56);
    PIN_SIZE(sy_host, 64);
}

Test(abi, device_desc_layout_is_pinned)
{
    PIN_OFFSET(sy_device_desc, struct_size, 0);
    PIN_OFFSET(sy_device_desc, kind, 4);
    PIN_OFFSET(sy_device_desc, name, 8);
    PIN_OFFSET(sy_device_desc, model, 72);
    PIN_OFFSET(sy_device_desc, vendor, 200);
    PIN_OFFSET(sy_device_desc, driver, 264);
    PIN_OFFSET(sy_device_desc, memory_bytes, 328);
    PIN_OFFSET(sy_device_desc, unified_memory, 336);
    PIN_OFFSET(sy_device_desc, compute_units, 340);
    PIN_OFFSET(sy_device_desc, peak_flops, 344);
    PIN_OFFSET(sy_device_desc, peak_bandwidth, 352);
    PIN_OFFSET(sy_device_desc, topology, 360);
    PIN_SIZE(sy_device_desc, 616);
}

Test(abi, tensor_layout_is_pinned)
{
    PIN_OFFSET(sy_tensor, id, 0);
    PIN_OFFSET(sy_tensor, dtype, 4);
    PIN_OFFSET(sy_tensor, role, 8);
    PIN_OFFSET(sy_tensor, n_dims, 12);
    PIN_OFFSET(sy_tensor, ne, 16);
    PIN_OFFSET(sy_tensor, nb, 48);
    PIN_OFFSET(sy_tensor, view_src, 80);
    PIN_OFFSET(sy_tensor, view_offset, 88);
    PIN_OFFSET(sy_tensor, data, 96);
    PIN_OFFSET(sy_tensor, buffer, 104);
    PIN_OFFSET(sy_tensor, offset, 112);
    PIN_OFFSET(sy_tensor, name, 120);
    PIN_SIZE(sy_tensor, 184);
}

Test(abi, node_layout_is_pinned)
{
    PIN_OFFSET(sy_op_params, i, 0);
    PIN_OFFSET(sy_op_params, f, 64);
    PIN_SIZE(sy_op_params, 96);
    PIN_OFFSET(sy_node, id, 0);
    PIN_OFFSET(sy_node, op, 4);
    PIN_OFFSET(sy_node, n_inputs, 8);
    PIN_OFFSET(sy_node, reserved_, 12);
    PIN_OFFSET(sy_node, inputs, 16);
    PIN_OFFSET(sy_node, output, 48);
    PIN_OFFSET(sy_node, params, 56);
    PIN_OFFSET(sy_node, name, 152);
    PIN_SIZE(sy_node, 216);
}

Test(abi, support_layout_is_pinned)
{
    PIN_OFFSET(sy_support, reason, 0);
    PIN_OFFSET(sy_support, text, 4);
    PIN_SIZE(sy_support, 196);
}

Test(abi, limits_that_size_the_structs_are_pinned)
{
    cr_expect_eq(SY_MAX_DIMS, 4);
    cr_expect_eq(SY_MAX_INPUTS, 4);
    cr_expect_eq(SY_MAX_PARAMS, 8);
    cr_expect_eq(SY_NAME_MAX, 64);
}

Test(abi, enum_values_that_cross_the_abi_are_pinned)
{
    cr_expect_eq(SY_OK, 0);
    cr_expect_eq(SY_E_INVALID_ARG, -1);
    cr_expect_eq(SY_E_NO_MEMORY, -2);
    cr_expect_eq(SY_E_UNSUPPORTED, -3);
    cr_expect_eq(SY_E_FORMAT, -4);
    cr_expect_eq(SY_E_DEVICE, -5);
    cr_expect_eq(SY_E_PLUGIN_ABI, -6);
    cr_expect_eq(SY_E_PLUGIN, -7);
    cr_expect_eq(SY_E_IO, -8);
    cr_expect_eq(SY_E_NOT_FOUND, -9);
    cr_expect_eq(SY_E_SHAPE, -10);
    cr_expect_eq(SY_E_DTYPE, -11);
    cr_expect_eq(SY_E_GRAPH, -12);
    cr_expect_eq(SY_E_STATE, -13);
    cr_expect_eq(SY_E_LIMIT, -14);
    cr_expect_eq(SY_E_INTERNAL, -15);

    cr_expect_eq(SY_DTYPE_F32, 0);
    cr_expect_eq(SY_DTYPE_F16, 1);
    cr_expect_eq(SY_DTYPE_BF16, 2);
    cr_expect_eq(SY_DTYPE_I32, 3);
    cr_expect_eq(SY_DTYPE_Q8_0, 4);
    cr_expect_eq(SY_DTYPE_Q4_0, 5);
    cr_expect_eq(SY_DTYPE_Q4_1, 6);
    cr_expect_eq(SY_DTYPE_Q4_K, 7);
    cr_expect_eq(SY_DTYPE_Q5_K, 8);
    cr_expect_eq(SY_DTYPE_Q6_K, 9);

    cr_expect_eq(SY_OP_NONE, 0);
    cr_expect_eq(SY_OP_GET_ROWS, 1);
    cr_expect_eq(SY_OP_ADD, 2);
    cr_expect_eq(SY_OP_MUL, 3);
    cr_expect_eq(SY_OP_SCALE, 4);
    cr_expect_eq(SY_OP_RMS_NORM, 5);
    cr_expect_eq(SY_OP_MATMUL, 6);
    cr_expect_eq(SY_OP_ROPE, 7);
    cr_expect_eq(SY_OP_SOFTMAX, 8);
    cr_expect_eq(SY_OP_ATTENTION, 9);
    cr_expect_eq(SY_OP_SILU, 10);
    cr_expect_eq(SY_OP_GELU, 11);
    cr_expect_eq(SY_OP_SWIGLU, 12);
    cr_expect_eq(SY_OP_GEGLU, 13);
    cr_expect_eq(SY_OP_COPY, 14);
    cr_expect_eq(SY_OP_VIEW, 15);
    cr_expect_eq(SY_OP_RESHAPE, 16);
    cr_expect_eq(SY_OP_PERMUTE, 17);
    cr_expect_eq(SY_OP_TRANSPOSE, 18);
    cr_expect_eq(SY_OP_KV_WRITE, 19);
    cr_expect_eq(SY_OP_ARGMAX, 20);

    cr_expect_eq(SY_ROLE_ACTIVATION, 0);
    cr_expect_eq(SY_ROLE_INPUT, 1);
    cr_expect_eq(SY_ROLE_WEIGHT, 2);
    cr_expect_eq(SY_ROLE_KV, 3);
    cr_expect_eq(SY_ROLE_OUTPUT, 4);

    cr_expect_eq(SY_LOG_ERROR, 0);
    cr_expect_eq(SY_LOG_WARN, 1);
    cr_expect_eq(SY_LOG_INFO, 2);
    cr_expect_eq(SY_LOG_DEBUG, 3);

    cr_expect_eq(SY_DEVICE_CPU, 0);
    cr_expect_eq(SY_DEVICE_GPU, 1);
    cr_expect_eq(SY_DEVICE_NPU, 2);

    cr_expect_eq(SY_SUPPORT_YES, 0);
    cr_expect_eq(SY_UNSUPPORTED_OP, 1);
    cr_expect_eq(SY_UNSUPPORTED_DTYPE, 2);
    cr_expect_eq(SY_UNSUPPORTED_SHAPE, 3);
    cr_expect_eq(SY_UNSUPPORTED_SIZE, 4);
    cr_expect_eq(SY_UNSUPPORTED_MEMORY, 5);
}

#else

/* The numbers above are for LP64 x86_64; other targets need their own. */
Test(abi, layout_is_pinned_only_on_x86_64, .disabled = true)
{
}

#endif
