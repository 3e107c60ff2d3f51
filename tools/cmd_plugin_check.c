/* switchyard plugin-check [PLUGIN.so | --plugin NAME] [--device D] [--json]
 *                         [--seed S] [--tolerance auto|float|int8] [--verbose]
 *
 * Runs the conformance suite (plugin_check.c) against one plugin file, or
 * against the plugin the runtime would load under NAME, and prints one row
 * per check and "N passed, N failed".  Exit status: 0 when nothing failed,
 * 1 when a check failed, 2 on a usage error. */
#include <errno.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "cli.h"
#include "plugin_check.h"

static void pc_usage(FILE *f)
{
    fprintf(f,
            "usage: switchyard plugin-check [PLUGIN.so | --plugin NAME] [--device D] [--json]\n"
            "                               [--seed S] [--tolerance auto|float|int8] [--verbose]\n"
            "\n"
            "Checks a plugin against the Switchyard plugin ABI: its table, describe(),\n"
            "buffers, every op case supports() accepts (against the reference kernels),\n"
            "the reasons of its refusals, repeated init/deinit and two threads at once.\n"
            "\n"
            "  PLUGIN.so         the plugin file to check\n"
            "  --plugin NAME     the plugin named NAME where the runtime finds plugins\n"
            "                    ($SWITCHYARD_PLUGIN_PATH, the build tree, the install dir)\n"
            "  --device D        only device D (index or name); default: every device\n"
            "  --json            write the report as JSON instead of a table\n"
            "  --seed S          seed of the random inputs (default: fresh, printed)\n"
            "  --tolerance T     float, int8 (W8A8 activation rounding allowed) or auto\n"
            "                    (int8 on NPUs and for matmuls with quantised weights,\n"
            "                    float otherwise)\n"
            "  --verbose         show the plugin's log messages\n");
}

typedef struct pc_cli {
    const char *path;
    const char *plugin;
    const char *device;
    bool json;
} pc_cli;

/* Finds the file of the plugin named |name| the way the runtime does. */
static char *pc_find_plugin(const char *name)
{
    sy_runtime *rt = sy_cli_runtime();
    if (!rt)
        return NULL;
    char *path = NULL;
    for (uint32_t i = 0; i < sy_runtime_plugin_count(rt) && !path; i++) {
        sy_plugin_info pi;
        if (sy_runtime_query_plugin(rt, i, &pi) == SY_OK && strcmp(pi.name, name) == 0)
            path = strdup(pi.path);
    }
    if (!path) {
        fprintf(stderr, "switchyard plugin-check: no plugin named '%s' was loaded\n", name);
        for (uint32_t i = 0; i < sy_runtime_refusal_count(rt); i++) {
            sy_plugin_refusal r;
            if (sy_runtime_query_refusal(rt, i, &r) == SY_OK)
                fprintf(stderr, "  refused %s: %s\n", r.path, r.reason);
        }
        fprintf(stderr, "  (set SWITCHYARD_PLUGIN_PATH, or give the plugin file)\n");
    }
    sy_runtime_destroy(rt);
    return path;
}

/* Turns --device (an index or a device name) into an index by asking the
 * plugin itself, through a runtime restricted to that one file. */
static int pc_resolve_device(const char *path, const char *device, int32_t *out_index)
{
    char *end = NULL;
    errno = 0;
    long v = strtol(device, &end, 10);
    if (errno == 0 && end && *end == '\0' && v >= 0 && v < 256) {
        *out_index = (int32_t)v;
        return 0;
    }
    sy_runtime_options o;
    sy_runtime_options_init(&o);
    o.plugin_path = path;
    o.no_default_paths = true;
    sy_runtime *rt = NULL;
    if (sy_runtime_create(&o, &rt) != SY_OK) {
        fprintf(stderr, "switchyard plugin-check: cannot create a runtime\n");
        return 2;
    }
    int rc = 2;
    for (uint32_t i = 0; i < sy_runtime_device_count(rt); i++) {
        sy_device_desc d;
        if (sy_runtime_query_device(rt, i, &d) == SY_OK && strcmp(d.name, device) == 0) {
            *out_index = (int32_t)i; /* one plugin loaded: runtime index = plugin index */
            rc = 0;
        }
    }
    if (rc != 0)
        fprintf(stderr, "switchyard plugin-check: the plugin has no device named '%s'\n", device);
    sy_runtime_destroy(rt);
    return rc;
}

static void pc_print_row(void *user, const sy_pcheck_result *r)
{
    sy_pcheck_print_result(stdout, r);
    fflush(stdout);
}

static int pc_parse(int argc, char **argv, pc_cli *cli, sy_pcheck_options *opts)
{
    for (int i = 1; i < argc; i++) {
        const char *a = argv[i];
        const bool has_value = i + 1 < argc;
        if (strcmp(a, "--help") == 0 || strcmp(a, "-h") == 0) {
            pc_usage(stdout);
            return 1;
        } else if (strcmp(a, "--json") == 0) {
            cli->json = true;
        } else if (strcmp(a, "--verbose") == 0 || strcmp(a, "-v") == 0) {
            opts->verbose = true;
        } else if (strcmp(a, "--plugin") == 0 && has_value) {
            cli->plugin = argv[++i];
        } else if (strcmp(a, "--device") == 0 && has_value) {
            cli->device = argv[++i];
        } else if (strcmp(a, "--seed") == 0 && has_value) {
            char *end = NULL;
            errno = 0;
            opts->seed = strtoull(argv[++i], &end, 0);
            if (errno || !end || *end || opts->seed == 0) {
                fprintf(stderr, "switchyard plugin-check: --seed wants a non-zero number\n");
                return 2;
            }
        } else if (strcmp(a, "--tolerance") == 0 && has_value) {
            const char *t = argv[++i];
            if (strcmp(t, "auto") == 0) {
                opts->tolerance = SY_PCHECK_TOL_AUTO;
            } else if (strcmp(t, "float") == 0) {
                opts->tolerance = SY_PCHECK_TOL_FLOAT;
            } else if (strcmp(t, "int8") == 0) {
                opts->tolerance = SY_PCHECK_TOL_INT8;
            } else {
                fprintf(stderr, "switchyard plugin-check: --tolerance is auto, float or int8\n");
                return 2;
            }
        } else if (a[0] != '-' && !cli->path) {
            cli->path = a;
        } else {
            fprintf(stderr, "switchyard plugin-check: unexpected argument '%s'\n\n", a);
            pc_usage(stderr);
            return 2;
        }
    }
    if (!cli->path == !cli->plugin) {
        fprintf(stderr, "switchyard plugin-check: give a plugin file or --plugin NAME\n\n");
        pc_usage(stderr);
        return 2;
    }
    return 0;
}

int sy_cli_plugin_check(int argc, char **argv)
{
    pc_cli cli = {0};
    sy_pcheck_options opts;
    sy_pcheck_options_init(&opts);
    int rc = pc_parse(argc, argv, &cli, &opts);
    if (rc != 0)
        return rc == 1 ? 0 : rc;

    char *found = cli.plugin ? pc_find_plugin(cli.plugin) : NULL;
    if (cli.plugin && !found)
        return 2;
    opts.path = found ? found : cli.path;
    if (cli.device) {
        rc = pc_resolve_device(opts.path, cli.device, &opts.device);
        if (rc != 0) {
            free(found);
            return rc;
        }
    }
    if (!cli.json) {
        printf("switchyard plugin-check %s\n", opts.path);
        opts.on_result = pc_print_row;
    }
    sy_pcheck_report *report = NULL;
    sy_status st = sy_pcheck_run(&opts, &report);
    if (st != SY_OK) {
        fprintf(stderr, "switchyard plugin-check: %s\n", sy_status_str(st));
        free(found);
        return 2;
    }
    if (cli.json) {
        sy_pcheck_write_json(stdout, report);
    } else {
        printf("\nplugin '%s' %s, seed 0x%016llx (--seed to repeat)",
               report->plugin[0] ? report->plugin : "?", report->version,
               (unsigned long long)report->seed);
        sy_pcheck_print_summary(stdout, report);
    }
    rc = report->failed ? 1 : 0;
    sy_pcheck_report_destroy(report);
    free(found);
    return rc;
}
