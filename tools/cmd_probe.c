/* switchyard probe [--refresh] [--json] [--quick] [-m MODEL]: what this
 * machine is and measurably does, cached per hardware fingerprint
 * (docs/probe.md); with -m, the configuration chosen for that model. */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "cli.h"
#include "probe.h"

static void usage(FILE *f)
{
    fprintf(f,
            "usage: switchyard probe [--refresh] [--json] [--quick] [--cache FILE] [-m MODEL]\n"
            "                        [--devices LIST]\n"
            "  --refresh      measure again even when the cache matches this machine\n"
            "  --json         print the probe as JSON (the cache file's format)\n"
            "  --quick        small buffers and few repetitions (about a second)\n"
            "  --cache FILE   cache file (default $XDG_CACHE_HOME/switchyard/probe.json)\n"
            "  -m MODEL       also print the thread count, context and KV precision chosen\n"
            "                 for MODEL (docs/probe.md: auto-configuration)\n"
            "  --devices LIST only the plugins of these devices (\"cpu,opencl:0\"; default all)\n");
}

static int print_autoconfig(sy_runtime *rt, const sy_probe *p, const char *path)
{
    sy_model *m = NULL;
    if (sy_model_open(rt, path, &m) != SY_OK) {
        fprintf(stderr, "switchyard probe: %s\n", sy_runtime_last_error(rt));
        return 1;
    }
    sy_model_info mi;
    sy_model_query_info(m, &mi);
    sy_autoconfig_model am = {.weight_bytes = mi.weight_bytes,
                              .n_layer = mi.n_layer,
                              .n_head_kv = mi.n_head_kv,
                              .head_dim = mi.head_dim,
                              .n_ctx_train = mi.n_ctx_train};
    sy_autoconfig c;
    sy_probe_autoconfig(p, &am, &c);
    printf("\nauto-configuration for %s\n", mi.name);
    printf("  threads  %-6u %s\n", c.n_threads, c.why_threads);
    printf("  context  %-6u %s\n", c.n_ctx, c.why_ctx);
    printf("  kv       %-6s %s\n", sy_dtype_name(c.kv_type), c.why_kv);
    sy_model_close(m);
    return 0;
}

int sy_cli_probe(int argc, char **argv)
{
    sy_probe_options o;
    sy_probe_options_init(&o);
    bool json = false;
    const char *model = NULL, *devices = NULL;
    for (int i = 1; i < argc; i++) {
        const char *a = argv[i];
        if (strcmp(a, "--help") == 0 || strcmp(a, "-h") == 0) {
            usage(stdout);
            return 0;
        } else if (strcmp(a, "--refresh") == 0) {
            o.refresh = true;
        } else if (strcmp(a, "--json") == 0) {
            json = true;
        } else if (strcmp(a, "--quick") == 0) {
            o.quick = true;
        } else if (strcmp(a, "--cache") == 0 && i + 1 < argc) {
            o.cache_path = argv[++i];
        } else if ((strcmp(a, "--devices") == 0 || strcmp(a, "--device") == 0) && i + 1 < argc) {
            devices = argv[++i];
        } else if ((strcmp(a, "-m") == 0 || strcmp(a, "--model") == 0) && i + 1 < argc) {
            model = argv[++i];
        } else {
            fprintf(stderr, "switchyard probe: unknown option '%s'\n", a);
            usage(stderr);
            return 2;
        }
    }
    sy_runtime *rt = sy_cli_runtime_for(devices);
    if (!rt)
        return 1;
    sy_probe *p = calloc(1, sizeof *p);
    int rc = 1;
    if (!p)
        goto out_runtime;
    sy_status st = sy_runtime_probe(rt, &o, p);
    if (st != SY_OK) {
        fprintf(stderr, "switchyard probe: %s: %s\n", sy_status_str(st), sy_runtime_last_error(rt));
        goto out_probe;
    }
    if (json) {
        char *text = NULL;
        if (sy_probe_to_json(p, &text) != SY_OK)
            goto out_probe;
        printf("%s\n", text);
        free(text);
    } else {
        sy_probe_print(p, stdout);
    }
    rc = model && !json ? print_autoconfig(rt, p, model) : 0;
out_probe:
    free(p);
out_runtime:
    sy_runtime_destroy(rt);
    return rc;
}
