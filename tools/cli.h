/* The switchyard CLI: one source file per subcommand. */
#ifndef SY_TOOLS_CLI_H
#define SY_TOOLS_CLI_H

#include "switchyard/switchyard.h"

typedef struct sy_cli_command {
    const char *name;
    const char *summary;
    int (*main)(int argc, char **argv);
} sy_cli_command;

int sy_cli_devices(int argc, char **argv);
int sy_cli_demo(int argc, char **argv);
int sy_cli_run(int argc, char **argv);
int sy_cli_synth(int argc, char **argv);
int sy_cli_perplexity(int argc, char **argv);
int sy_cli_eval(int argc, char **argv);
int sy_cli_plan(int argc, char **argv);
int sy_cli_plugin_check(int argc, char **argv);
int sy_cli_tune(int argc, char **argv);
int sy_cli_probe(int argc, char **argv);
int sy_cli_bench(int argc, char **argv);

/* The model `run` uses without -m: what tools/fetch-models.sh fetches. */
#define SY_CLI_DEFAULT_MODEL "models/SmolLM2-135M-Instruct.Q4_1.gguf"

/* The values --kv-type takes, for usage texts. */
#define SY_CLI_KV_TYPES "f16|f32|q8_0|q4_0"

/* Parses a KV cache type (f16, f32, q8_0, q4_0) into *out; false for any
 * other name (cli_options.c). */
bool sy_cli_parse_kv_type(const char *name, sy_dtype *out);

/* Parses a --context-policy value (error, shift, window:N with N >= 1)
 * into so->context_policy and so->window; false when it is none of them. */
bool sy_cli_parse_context_policy(const char *text, sy_session_options *so);

/* Creates a runtime with the CLI's defaults, printing the error on failure. */
sy_runtime *sy_cli_runtime(void);

/* Like sy_cli_runtime(), loading only the plugins that provide |devices|
 * (a comma list of device names such as "cpu,opencl:0"; NULL: all). */
sy_runtime *sy_cli_runtime_for(const char *devices);

#endif
