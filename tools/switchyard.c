/* switchyard: command-line front end.  Each subcommand lives in its own
 * file (cmd_<name>.c) and is listed in the table below. */
#include <stdio.h>
#include <string.h>

#include "cli.h"

static const sy_cli_command commands[] = {
    {"devices", "list plugins, devices, refused plugins and the CPU topology", sy_cli_devices},
    {"run", "generate text from a prompt with a GGUF model, streaming tokens", sy_cli_run},
    {"plan", "plan a model's prefill or decode step across devices and explain it", sy_cli_plan},
    {"plugin-check", "run the conformance suite against a plugin", sy_cli_plugin_check},
    {"perplexity", "perplexity of a model on a text file, in chunks of --ctx tokens", sy_cli_perplexity},
    {"eval", "write the logits of every position of a token sequence (for oracles)", sy_cli_eval},
    {"synth", "write a random-weight GGUF model of any llama/qwen2/gemma3 shape", sy_cli_synth},
    {"bench", "measure prompt and decode tokens/s of GGUF models (llama-bench style)", sy_cli_bench},
    {"demo", "run a small built-in graph on every device, checked against the reference", sy_cli_demo},
    {"tune", "time every op on every device, fit cost profiles the scheduler reads", sy_cli_tune},
    {"probe", "measure this machine (topology, bandwidth, devices), cached per hardware", sy_cli_probe},
};

static void usage(FILE *f)
{
    fprintf(f, "usage: switchyard [--help] [--version] <command> [options]\n\ncommands:\n");
    for (size_t i = 0; i < sizeof commands / sizeof commands[0]; i++)
        fprintf(f, "  %-12s %s\n", commands[i].name, commands[i].summary);
    fprintf(f, "\nRun 'switchyard <command> --help' for a command's options.\n"
               "Environment: SWITCHYARD_PLUGIN_PATH (colon list of plugin dirs or files),\n"
               "SWITCHYARD_LOG (error|warn|info|debug), SWITCHYARD_THREADS.\n");
}

sy_runtime *sy_cli_runtime(void)
{
    return sy_cli_runtime_for(NULL);
}

sy_runtime *sy_cli_runtime_for(const char *devices)
{
    /* "cpu,opencl:0" -> plugins "cpu,opencl": a device is named after its
     * plugin, with ":N" when the plugin has several. */
    char plugins[512] = "";
    size_t used = 0;
    for (const char *p = devices; p && *p && used + 1 < sizeof plugins;) {
        size_t n = strcspn(p, ",");
        size_t name = strcspn(p, ",:");
        if (name > n)
            name = n;
        int w = snprintf(plugins + used, sizeof plugins - used, "%s%.*s", used ? "," : "",
                         (int)name, p);
        if (w < 0 || (size_t)w >= sizeof plugins - used)
            break;
        used += (size_t)w;
        p += n;
        if (*p == ',')
            p++;
    }
    sy_runtime_options opts;
    sy_runtime_options_init(&opts);
    opts.plugins = used ? plugins : NULL;
    sy_runtime *rt = NULL;
    sy_status st = sy_runtime_create(&opts, &rt);
    if (st != SY_OK) {
        fprintf(stderr, "switchyard: cannot create runtime: %s\n", sy_status_str(st));
        return NULL;
    }
    return rt;
}

int main(int argc, char **argv)
{
    if (argc < 2) {
        usage(stderr);
        return 2;
    }
    if (strcmp(argv[1], "--help") == 0 || strcmp(argv[1], "-h") == 0 ||
        strcmp(argv[1], "help") == 0) {
        usage(stdout);
        return 0;
    }
    if (strcmp(argv[1], "--version") == 0 || strcmp(argv[1], "version") == 0) {
        printf("switchyard %s (plugin ABI %u.%u)\n", SY_VERSION_STRING, SY_PLUGIN_ABI_MAJOR,
               SY_PLUGIN_ABI_MINOR);
        return 0;
    }
    for (size_t i = 0; i < sizeof commands / sizeof commands[0]; i++)
        if (strcmp(argv[1], commands[i].name) == 0)
            return commands[i].main(argc - 1, argv + 1);
    fprintf(stderr, "switchyard: unknown command '%s'\n\n", argv[1]);
    usage(stderr);
    return 2;
}
