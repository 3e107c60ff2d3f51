/* The switchyard CLI: one source file per subcommand. */
#ifndef SY_TOOLS_CLI_H
#define SY_TOOLS_CLI_H

#include <stdio.h>

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

/* The scheduler's options, the same on plan, run and bench: --devices
 * (alias --device), --policy, --mem DEV=SIZE and --pin PATTERN=DEV (both
 * repeatable).  Strings are borrowed from argv. */
#define SY_CLI_MAX_SCHED_LIST 32
typedef struct sy_cli_sched {
    const char *devices, *policy; /* NULL: the command's default */
    const char *pins[SY_CLI_MAX_SCHED_LIST], *mem[SY_CLI_MAX_SCHED_LIST];
    uint32_t n_pins, n_mem;
} sy_cli_sched;

/* The usage lines of those options, for the commands' help texts. */
#define SY_CLI_SCHED_HELP                                                                          \
    "  --devices LIST     comma list of devices the scheduler may use\n"                            \
    "  --policy POLICY    latency (default), energy, cpu-only or prefer:DEVICE\n"                   \
    "  --mem DEV=SIZE     memory budget of a device (bytes, or K/M/G suffix; cpu: the\n"            \
    "                     host memory), repeatable\n"                                               \
    "  --pin PATTERN=DEV  nodes whose name or op matches the glob PATTERN run on DEV\n"             \
    "                     (first matching pin wins), repeatable\n"

/* When argv[*i] is one of those options, stores its value (argv[*i + 1])
 * in |out|, advances *i past it and returns 1; returns 0 for any other
 * option and -1 after printing an error naming |cmd| (a missing or empty
 * value, a --pin or --mem without both sides of its '=', too many).
 * Device names, policies and sizes are checked by the planner, whose
 * error names the option as given and the devices there are. */
int sy_cli_parse_sched_option(const char *cmd, int argc, char **argv, int *i, sy_cli_sched *out);

/* Copies the options given in |s| into |so| (devices and policy only when
 * given). */
void sy_cli_sched_apply(const sy_cli_sched *s, sy_session_options *so);

/* Prints a memory plan as a table, one row per device (cli_memory.c). */
void sy_cli_print_memory_plan(FILE *f, const sy_memory_plan *p);

/* One device's predicted and measured peak bytes (the first, the host's:
 * the process's peak resident set). */
typedef struct sy_cli_peak {
    char name[SY_NAME_MAX];
    bool host;
    uint64_t predicted, measured;
} sy_cli_peak;

/* Fills out[0..*out_n) with |s|'s peaks per device; false when the
 * session has no memory plan to compare with. */
bool sy_cli_memory_peaks(const sy_session *s, sy_cli_peak *out, uint32_t cap, uint32_t *out_n);

/* Restarts the process's peak resident set (VmHWM) at its current size
 * (/proc/self/clear_refs) and the device peaks of |rt|'s plugins that
 * count their memory (|rt| may be NULL), so that a later peak is one
 * test's. */
void sy_cli_reset_peak(sy_runtime *rt);

/* Prints "peak memory: cpu (process RSS) measured X MiB, predicted Y MiB
 * (+Z%); ..." for |s|. */
void sy_cli_print_memory_peaks(FILE *f, const sy_session *s);

struct sy_probe;

/* Makes sure |rt|'s machine is probed (cli_probe.c): from the cache, or
 * measured now with one line on stderr naming |cmd| (the first run on a
 * machine).  SY_OK with *out_probe filled, else the probe's error (already
 * printed).  |out_probe| is large: allocate it. */
sy_status sy_cli_ensure_probe(sy_runtime *rt, const char *cmd, struct sy_probe *out_probe);

/* Creates the runtime for |devices| (as sy_cli_runtime_for) for a command
 * that runs or plans |model_path| (may be NULL), probes it as
 * sy_cli_ensure_probe does, and, where neither SWITCHYARD_THREADS nor a
 * flag chose the CPU's thread count, applies the auto-configured one
 * (docs/probe.md) by setting SWITCHYARD_THREADS and creating the runtime
 * again.  *out_probe is zeroed when no probe is available. */
sy_runtime *sy_cli_runtime_probed(const char *cmd, const char *devices, const char *model_path,
                                  struct sy_probe *out_probe);

/* Sets so->n_ctx and so->kv_type for |m| by auto-configuration from |p|
 * (may be NULL or empty: nothing changes), except the ones the user gave. */
void sy_cli_autoconfig_session(const struct sy_probe *p, const sy_model *m, bool ctx_given,
                               bool kv_given, sy_session_options *so);

/* Prints where |s|'s time went per device, the |top| node kinds of each
 * (cli_timing.c); nothing when the session did not time its nodes. */
void sy_cli_print_node_timing(FILE *f, const sy_session *s, uint32_t top);

/* Creates a runtime with the CLI's defaults, printing the error on failure. */
sy_runtime *sy_cli_runtime(void);

/* Like sy_cli_runtime(), loading only the plugins that provide |devices|
 * (a comma list of device names such as "cpu,opencl:0"; NULL: all). */
sy_runtime *sy_cli_runtime_for(const char *devices);

#endif
