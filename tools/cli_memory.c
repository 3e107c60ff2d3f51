/* Memory reports several subcommands share: a session's memory plan as a
 * table, and its predicted against measured peaks. */
#include <stdio.h>
#include <string.h>

#include "cli.h"

#define MIB (1024.0 * 1024.0)

void sy_cli_print_memory_plan(FILE *f, const sy_memory_plan *p)
{
    fprintf(f, "memory plan: context %u tokens, KV %s, prefill chunk %u tokens\n", p->n_ctx,
            sy_dtype_name(p->kv_type), p->n_batch);
    fprintf(f, "%-12s %-8s %12s %12s %12s %12s %12s %12s\n", "device", "memory", "weights", "KV",
            "activations", "overhead", "peak", "budget");
    for (uint32_t k = 0; k < p->n_devices; k++) {
        const sy_memory_device *r = &p->devices[k];
        char budget[32] = "-";
        if (r->budget_bytes)
            snprintf(budget, sizeof budget, "%.1f MiB", r->budget_bytes / MIB);
        /* The first row is the host's; other rows in host memory are part of it. */
        const char *kind = k == 0 ? "host" : r->host ? "in host" : "own";
        fprintf(f, "%-12s %-8s %8.1f MiB %8.1f MiB %8.1f MiB %8.1f MiB %8.1f MiB %12s\n",
                r->name, kind, r->weight_bytes / MIB, r->kv_bytes / MIB, r->arena_bytes / MIB,
                r->overhead_bytes / MIB, r->peak_bytes / MIB, budget);
    }
    if (p->note[0])
        fprintf(f, "%s\n", p->note);
}

void sy_cli_reset_peak(sy_runtime *rt)
{
    for (uint32_t d = 0; rt && d < sy_runtime_device_count(rt); d++)
        sy_runtime_query_device_memory(rt, d, true, NULL, NULL);
    FILE *f = fopen("/proc/self/clear_refs", "w");
    if (!f)
        return;
    fputs("5", f);
    fclose(f);
}

bool sy_cli_memory_peaks(const sy_session *s, sy_cli_peak *out, uint32_t cap, uint32_t *out_n)
{
    *out_n = 0;
    sy_memory_plan plan;
    sy_memory_usage use;
    sy_memory_plan_init(&plan);
    sy_memory_usage_init(&use);
    if (sy_session_query_memory(s, &plan, &use) != SY_OK)
        return false;
    for (uint32_t k = 0; k < plan.n_devices && *out_n < cap; k++) {
        const sy_memory_device *r = &plan.devices[k];
        sy_cli_peak *o = &out[(*out_n)++];
        memset(o, 0, sizeof *o);
        snprintf(o->name, sizeof o->name, "%s", r->name);
        o->host = k == 0;
        o->predicted = r->peak_bytes;
        if (k == 0) {
            o->measured = use.host_peak_bytes;
            continue;
        }
        /* The plugin's own count where it keeps one (buffers of every
         * session, scratch), else the executor's buffers. */
        for (uint32_t d = 0; d < use.n_devices; d++)
            if (use.devices[d].device == r->device)
                o->measured = use.devices[d].plugin_counted ? use.devices[d].plugin_peak_bytes
                                                            : use.devices[d].peak_bytes;
    }
    return true;
}

void sy_cli_print_memory_peaks(FILE *f, const sy_session *s)
{
    sy_cli_peak peaks[SY_MEMORY_MAX_DEVICES];
    uint32_t n = 0;
    if (!sy_cli_memory_peaks(s, peaks, SY_MEMORY_MAX_DEVICES, &n) || n == 0)
        return;
    fprintf(f, "peak memory:");
    for (uint32_t k = 0; k < n; k++) {
        const sy_cli_peak *p = &peaks[k];
        double err = p->predicted ? 100.0 * ((double)p->predicted - (double)p->measured) /
                                        (double)p->measured
                                  : 0.0;
        fprintf(f, "%s %s%s measured %.1f MiB, predicted %.1f MiB", k ? ";" : "", p->name,
                p->host ? " (process RSS)" : "", p->measured / MIB, p->predicted / MIB);
        if (p->measured)
            fprintf(f, " (%+.1f%%)", err);
    }
    fprintf(f, "\n");
}
