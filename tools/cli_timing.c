/* `run --profile`: where the generation's time went, per device, from the
 * session's per-node timing (sy_session_query_node_timing). */
#include <stdio.h>
#include <string.h>

#include "cli.h"

void sy_cli_print_node_timing(FILE *f, const sy_session *s, uint32_t top)
{
    uint32_t n = sy_session_node_timing_count(s);
    if (n == 0)
        return;
    fprintf(f, "\nnode timing (every node launched and waited for alone, so these steps ran "
               "slower than without --profile)\n");
    /* Devices in order of first appearance; entries come most time first. */
    uint32_t devs[64], n_devs = 0;
    for (uint32_t i = 0; i < n; i++) {
        sy_node_timing e;
        if (sy_session_query_node_timing(s, i, &e) != SY_OK)
            continue;
        bool seen = false;
        for (uint32_t k = 0; k < n_devs && !seen; k++)
            seen = devs[k] == e.device;
        if (!seen && n_devs < 64)
            devs[n_devs++] = e.device;
    }
    for (uint32_t k = 0; k < n_devs; k++) {
        double total = 0;
        uint64_t nodes = 0;
        const char *name = "";
        for (uint32_t i = 0; i < n; i++) {
            sy_node_timing e;
            if (sy_session_query_node_timing(s, i, &e) == SY_OK && e.device == devs[k]) {
                total += e.seconds;
                nodes += e.count;
                name = e.device_name;
            }
        }
        fprintf(f, "  %s: %.1f ms in %llu nodes\n", name, total * 1e3, (unsigned long long)nodes);
        fprintf(f, "    %-20s %-10s %7s %10s %7s %10s\n", "node", "op", "count", "total", "share",
                "each");
        uint32_t shown = 0;
        for (uint32_t i = 0; i < n && shown < top; i++) {
            sy_node_timing e;
            if (sy_session_query_node_timing(s, i, &e) != SY_OK || e.device != devs[k])
                continue;
            fprintf(f, "    %-20s %-10s %7llu %7.2f ms %6.1f%% %7.1f us\n", e.name, e.op,
                    (unsigned long long)e.count, e.seconds * 1e3,
                    total > 0 ? 100 * e.seconds / total : 0.0,
                    e.count ? e.seconds / (double)e.count * 1e6 : 0.0);
            shown++;
        }
    }
}
