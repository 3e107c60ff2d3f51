/* switchyard devices [--json]: what the runtime found. */
#include <stdio.h>
#include <string.h>

#include <cjson/cJSON.h>

#include "cli.h"

static const char *kind_name(uint32_t kind)
{
    switch (kind) {
    case SY_DEVICE_CPU:
        return "cpu";
    case SY_DEVICE_GPU:
        return "gpu";
    case SY_DEVICE_NPU:
        return "npu";
    }
    return "unknown";
}

static void print_text(const sy_runtime *rt)
{
    char topo[512] = "";
    if (sy_runtime_query_topology(rt, topo, sizeof topo) == SY_OK)
        printf("host: %s\n", topo);
    uint32_t np = sy_runtime_plugin_count(rt);
    printf("\nplugins (%u):\n", np);
    for (uint32_t i = 0; i < np; i++) {
        sy_plugin_info pi;
        if (sy_runtime_query_plugin(rt, i, &pi) != SY_OK)
            continue;
        printf("  %-10s %-8s ABI %u.%u  %u device(s)  %s\n", pi.name, pi.version,
               SY_PLUGIN_ABI_MAJOR_OF(pi.abi_version), pi.abi_version & 0xffffu,
               pi.device_count, pi.path);
    }
    uint32_t nd = sy_runtime_device_count(rt);
    printf("\ndevices (%u):\n", nd);
    for (uint32_t i = 0; i < nd; i++) {
        sy_device_desc d;
        if (sy_runtime_query_device(rt, i, &d) != SY_OK)
            continue;
        printf("  [%u] %-10s %-4s %s\n", i, d.name, kind_name(d.kind), d.model);
        printf("       memory %.1f GiB%s, %u compute units", (double)d.memory_bytes / (1u << 30),
               d.unified_memory ? " (shared with host)" : "", d.compute_units);
        if (d.peak_bandwidth > 0)
            printf(", %.1f GB/s", d.peak_bandwidth / 1e9);
        if (d.peak_flops > 0)
            printf(", %.1f GFLOP/s", d.peak_flops / 1e9);
        printf("\n");
        if (d.topology[0])
            printf("       topology: %s\n", d.topology);
    }
    uint32_t nr = sy_runtime_refusal_count(rt);
    if (nr) {
        printf("\nrefused plugins (%u):\n", nr);
        for (uint32_t i = 0; i < nr; i++) {
            sy_plugin_refusal r;
            if (sy_runtime_query_refusal(rt, i, &r) == SY_OK)
                printf("  refused %s: %s\n", r.path, r.reason);
        }
    }
}

static int print_json(const sy_runtime *rt)
{
    cJSON *root = cJSON_CreateObject();
    if (!root)
        return 1;
    char topo[512] = "";
    if (sy_runtime_query_topology(rt, topo, sizeof topo) == SY_OK)
        cJSON_AddStringToObject(root, "host", topo);
    cJSON *plugins = cJSON_AddArrayToObject(root, "plugins");
    for (uint32_t i = 0; i < sy_runtime_plugin_count(rt); i++) {
        sy_plugin_info pi;
        if (sy_runtime_query_plugin(rt, i, &pi) != SY_OK)
            continue;
        cJSON *p = cJSON_CreateObject();
        cJSON_AddStringToObject(p, "name", pi.name);
        cJSON_AddStringToObject(p, "version", pi.version);
        cJSON_AddStringToObject(p, "vendor", pi.vendor ? pi.vendor : "");
        cJSON_AddStringToObject(p, "path", pi.path);
        cJSON_AddNumberToObject(p, "abi_version", pi.abi_version);
        cJSON_AddNumberToObject(p, "device_count", pi.device_count);
        cJSON_AddItemToArray(plugins, p);
    }
    cJSON *devices = cJSON_AddArrayToObject(root, "devices");
    for (uint32_t i = 0; i < sy_runtime_device_count(rt); i++) {
        sy_device_desc d;
        if (sy_runtime_query_device(rt, i, &d) != SY_OK)
            continue;
        cJSON *o = cJSON_CreateObject();
        cJSON_AddNumberToObject(o, "index", i);
        cJSON_AddStringToObject(o, "name", d.name);
        cJSON_AddStringToObject(o, "kind", kind_name(d.kind));
        cJSON_AddStringToObject(o, "model", d.model);
        cJSON_AddStringToObject(o, "vendor", d.vendor);
        cJSON_AddStringToObject(o, "driver", d.driver);
        cJSON_AddNumberToObject(o, "memory_bytes", (double)d.memory_bytes);
        cJSON_AddBoolToObject(o, "unified_memory", d.unified_memory != 0);
        cJSON_AddNumberToObject(o, "compute_units", d.compute_units);
        cJSON_AddNumberToObject(o, "peak_flops", d.peak_flops);
        cJSON_AddNumberToObject(o, "peak_bandwidth", d.peak_bandwidth);
        cJSON_AddStringToObject(o, "topology", d.topology);
        cJSON_AddItemToArray(devices, o);
    }
    cJSON *refused = cJSON_AddArrayToObject(root, "refused");
    for (uint32_t i = 0; i < sy_runtime_refusal_count(rt); i++) {
        sy_plugin_refusal r;
        if (sy_runtime_query_refusal(rt, i, &r) != SY_OK)
            continue;
        cJSON *o = cJSON_CreateObject();
        cJSON_AddStringToObject(o, "path", r.path);
        cJSON_AddStringToObject(o, "reason", r.reason);
        cJSON_AddStringToObject(o, "status", sy_status_name(r.status));
        cJSON_AddItemToArray(refused, o);
    }
    char *text = cJSON_Print(root);
    cJSON_Delete(root);
    if (!text)
        return 1;
    printf("%s\n", text);
    cJSON_free(text);
    return 0;
}

int sy_cli_devices(int argc, char **argv)
{
    bool json = false;
    for (int i = 1; i < argc; i++) {
        if (strcmp(argv[i], "--json") == 0) {
            json = true;
        } else if (strcmp(argv[i], "--help") == 0) {
            printf("usage: switchyard devices [--json]\n"
                   "Lists loaded plugins, their devices, refused plugin files with the reason,\n"
                   "and the host topology.\n");
            return 0;
        } else {
            fprintf(stderr, "switchyard devices: unknown option '%s'\n", argv[i]);
            return 2;
        }
    }
    sy_runtime *rt = sy_cli_runtime();
    if (!rt)
        return 1;
    int rc = 0;
    if (json)
        rc = print_json(rt);
    else
        print_text(rt);
    sy_runtime_destroy(rt);
    return rc;
}
