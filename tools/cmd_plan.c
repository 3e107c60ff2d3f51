/* switchyard plan: plan one step of a model on the loaded devices and show
 * the plan: a summary, or with --explain every node's device and reason,
 * every transfer and the memory per device; --json and --dot for tools. */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "cli.h"
#include "model_internal.h"
#include "probe.h"

#define PLAN_MAX_LIST 32

static void usage(FILE *f)
{
    fprintf(
        f,
        "usage: switchyard plan [-m MODEL] [--devices LIST] [--policy POLICY]\n"
        "                       [--mem DEV=SIZE]... [--pin PATTERN=DEV]... [--profile FILE]...\n"
        "                       [--phase prefill|decode] [--tokens N] [--ctx N]\n"
        "                       [--algorithm auto|dp|list|exhaustive] [--explain] [--json]\n"
        "                       [--dot FILE] [--memory [--kv-type T] [--batch N]] [--fit]\n"
        "Plans one step of MODEL (default %s) and prints a summary.\n"
        SY_CLI_SCHED_HELP
        "                     (--devices default: every loaded device)\n"
        "  --profile FILE     load a device profile (profiles/schema.json) over the one\n"
        "                     found by default ($SWITCHYARD_PROFILE_DIR, the tune output\n"
        "                     dir, the shipped profiles/; docs/profiles.md)\n"
        "  --phase P          decode (default): one token after N; prefill: N tokens\n"
        "  --tokens N         see --phase (default 64)\n"
        "  --explain          print every node, transfer and the memory per device\n"
        "  --json             print the plan as JSON instead\n"
        "  --dot FILE         write the plan as Graphviz DOT to FILE\n"
        "  --memory           print instead what a session needs per device: weights, KV\n"
        "                     cache at --ctx (default: the session's) of --kv-type\n"
        "                     (" SY_CLI_KV_TYPES "), activation arena of a --batch prefill chunk\n"
        "                     (default 512) and decode step, overhead, predicted peak\n"
        "  --fit              with --mem: choose a smaller context or KV type that fits\n"
        "                     instead of refusing (docs/memory.md)\n"
        "With --mem the whole session's predicted peak must meet each budget too.\n",
        SY_CLI_DEFAULT_MODEL);
}

typedef struct plan_args {
    const char *model, *dot, *phase;
    sy_cli_sched sched; /* --devices, --policy, --mem, --pin */
    const char *profiles[PLAN_MAX_LIST];
    uint32_t n_profiles;
    uint32_t tokens, ctx, batch;
    sy_plan_algorithm algorithm;
    sy_dtype kv_type;
    bool explain, json, memory, fit;
} plan_args;

static bool push(const char **list, uint32_t *n, const char *v, const char *opt)
{
    if (*n == PLAN_MAX_LIST) {
        fprintf(stderr, "switchyard plan: at most %d %s options\n", PLAN_MAX_LIST, opt);
        return false;
    }
    list[(*n)++] = v;
    return true;
}

/* Returns 0 to go on, else the exit code. */
static int parse(int argc, char **argv, plan_args *a)
{
    for (int i = 1; i < argc; i++) {
        const char *o = argv[i], *v = i + 1 < argc ? argv[i + 1] : NULL;
        int sched = sy_cli_parse_sched_option("plan", argc, argv, &i, &a->sched);
        if (sched < 0)
            return 2;
        if (sched > 0)
            continue;
        if (strcmp(o, "--help") == 0 || strcmp(o, "-h") == 0) {
            usage(stdout);
            return -1;
        } else if (strcmp(o, "--explain") == 0) {
            a->explain = true;
        } else if (strcmp(o, "--json") == 0) {
            a->json = true;
        } else if (strcmp(o, "--memory") == 0) {
            a->memory = true;
        } else if (strcmp(o, "--fit") == 0) {
            a->fit = true;
        } else if (!v) {
            fprintf(stderr, "switchyard plan: unknown option or missing value: '%s'\n", o);
            return 2;
        } else if (strcmp(o, "-m") == 0 || strcmp(o, "--model") == 0) {
            a->model = argv[++i];
        } else if (strcmp(o, "--dot") == 0) {
            a->dot = argv[++i];
        } else if (strcmp(o, "--phase") == 0) {
            a->phase = argv[++i];
            if (strcmp(a->phase, "prefill") != 0 && strcmp(a->phase, "decode") != 0) {
                fprintf(stderr, "switchyard plan: --phase is prefill or decode, got '%s'\n", v);
                return 2;
            }
        } else if (strcmp(o, "--kv-type") == 0) {
            if (!sy_cli_parse_kv_type(argv[++i], &a->kv_type)) {
                fprintf(stderr, "switchyard plan: --kv-type takes " SY_CLI_KV_TYPES ", got '%s'\n",
                        v);
                return 2;
            }
        } else if (strcmp(o, "--batch") == 0) {
            char *end;
            long n = strtol(v, &end, 10);
            if (*end || n < 1 || n > 1 << 16) {
                fprintf(stderr, "switchyard plan: --batch needs a count in [1, %d], got '%s'\n",
                        1 << 16, v);
                return 2;
            }
            a->batch = (uint32_t)n;
            i++;
        } else if (strcmp(o, "--profile") == 0) {
            if (!push(a->profiles, &a->n_profiles, argv[++i], o))
                return 2;
        } else if (strcmp(o, "--tokens") == 0 || strcmp(o, "--ctx") == 0) {
            char *end;
            long n = strtol(v, &end, 10);
            if (*end || n < 1 || n > 1 << 20) {
                fprintf(stderr, "switchyard plan: %s needs a count in [1, %d], got '%s'\n", o,
                        1 << 20, v);
                return 2;
            }
            *(strcmp(o, "--ctx") == 0 ? &a->ctx : &a->tokens) = (uint32_t)n;
            i++;
        } else if (strcmp(o, "--algorithm") == 0) {
            static const char *const names[] = {"auto", "dp", "list", "exhaustive"};
            uint32_t k = 0;
            while (k < 4 && strcmp(v, names[k]) != 0)
                k++;
            if (k == 4) {
                fprintf(stderr, "switchyard plan: --algorithm is auto, dp, list or exhaustive\n");
                return 2;
            }
            a->algorithm = (sy_plan_algorithm)k;
            i++;
        } else {
            fprintf(stderr, "switchyard plan: unknown option '%s'\n", o);
            return 2;
        }
    }
    return 0;
}

/* Builds the step graph the session would build for this phase. */
static sy_status build_step(const sy_model *m, const plan_args *a, sy_graph **out_graph,
                            void **out_scratch)
{
    bool prefill = a->phase && strcmp(a->phase, "prefill") == 0;
    uint32_t T = prefill ? a->tokens : 1, past = prefill ? 0 : a->tokens;
    uint32_t ctx = a->ctx ? a->ctx : past + T;
    if (ctx < past + T)
        ctx = past + T;
    uint32_t L = m->hp.n_layer;
    /* One block: ids, positions and the (empty) per-layer cache tables. */
    size_t bytes = (size_t)T * 2 * sizeof(int32_t) + (size_t)L * 2 * sizeof(void *);
    char *scratch = calloc(1, bytes);
    if (!scratch)
        return SY_E_NO_MEMORY;
    void **kv = (void **)scratch;
    int32_t *ids = (int32_t *)(scratch + (size_t)L * 2 * sizeof(void *)), *pos = ids + T;
    for (uint32_t t = 0; t < T; t++)
        pos[t] = (int32_t)(past + t);
    sy_step_desc step = {
        .n_tokens = T,
        .n_past = past,
        .tokens = ids,
        .positions = pos,
        .kv_k = kv,
        .kv_v = kv + L,
        .kv_type = SY_DTYPE_F16,
        .n_ctx = ctx,
    };
    char err[512];
    sy_status st = sy__model_build_graph(m, &step, out_graph, err, sizeof err);
    if (st != SY_OK) {
        fprintf(stderr, "switchyard plan: %s\n", err);
        free(scratch);
        return st;
    }
    *out_scratch = scratch;
    return SY_OK;
}

static int show(const sy_plan *plan, const plan_args *a)
{
    if (a->json)
        return sy_plan_explain(plan, SY_PLAN_FORMAT_JSON, stdout) == SY_OK ? 0 : 1;
    if (a->explain)
        return sy_plan_explain(plan, SY_PLAN_FORMAT_TABLE, stdout) == SY_OK ? 0 : 1;
    sy_plan_summary s;
    sy_plan_query_summary(plan, &s);
    printf("%u nodes, %u segments, %u transfers (%.1f KiB) on %u devices, policy %s\n", s.n_nodes,
           s.n_segments, s.n_transfers, (double)s.transfer_bytes / 1024.0, s.n_devices, s.policy);
    printf("predicted step %.3f ms (compute %.3f ms, transfers %.3f ms); %u nodes unmeasured\n",
           s.predicted_s * 1e3, s.compute_s * 1e3, s.transfer_s * 1e3, s.n_unmeasured);
    if (s.energy_measured || strcmp(s.policy, "energy") == 0)
        printf("predicted energy %.3f mJ (compute %.3f mJ, transfers %.3f mJ)%s\n",
               s.predicted_j * 1e3, s.compute_j * 1e3, s.transfer_j * 1e3,
               s.energy_measured ? "" : "; default power figures for devices without them");
    printf("algorithm %s; planned in %.3f ms\n", s.algorithm, s.planning_s * 1e3);
    return 0;
}

/* The session-wide memory plan: printed with --memory, and checked
 * against the budgets whenever --mem is given.  Returns the exit code. */
static int plan_memory(sy_runtime *rt, sy_model *m, const plan_args *a)
{
    sy_session_options so;
    sy_session_options_init(&so);
    so.n_ctx = a->ctx;
    so.n_batch = a->batch;
    so.kv_type = a->kv_type;
    sy_cli_sched_apply(&a->sched, &so);
    so.fit = a->fit;
    sy_memory_plan mp;
    sy_memory_plan_init(&mp);
    sy_status st = sy_model_plan_memory(m, &so, &mp);
    if (a->memory && mp.n_devices)
        sy_cli_print_memory_plan(stdout, &mp);
    else if (mp.fitted)
        printf("%s\n", mp.note);
    if (st != SY_OK) {
        fprintf(stderr, "switchyard plan: %s\n", sy_runtime_last_error(rt));
        return 1;
    }
    return 0;
}

int sy_cli_plan(int argc, char **argv)
{
    plan_args a = {.model = SY_CLI_DEFAULT_MODEL, .tokens = 64, .kv_type = SY_DTYPE_F16};
    int rc = parse(argc, argv, &a);
    if (rc != 0)
        return rc < 0 ? 0 : rc;
    /* Only the plugins of the devices named, as run and bench load them. */
    sy_runtime *rt = sy_cli_runtime_for(a.sched.devices);
    if (!rt)
        return 1;
    /* The first command on a machine that looks at its devices probes them
     * (docs/probe.md, "First run"). */
    sy_probe *probe = calloc(1, sizeof *probe);
    if (probe)
        sy_cli_ensure_probe(rt, "plan", probe);
    free(probe);
    sy_model *m = NULL;
    sy_planner *pl = NULL;
    sy_graph *g = NULL;
    sy_plan *plan = NULL;
    void *scratch = NULL;
    rc = 1;
    if (sy_model_open(rt, a.model, &m) != SY_OK) {
        fprintf(stderr, "switchyard plan: %s\n", sy_runtime_last_error(rt));
        goto out_runtime;
    }
    if (sy_planner_create(rt, &pl) != SY_OK)
        goto out_model;
    sy_planner_load_default_profiles(pl, NULL);
    for (uint32_t k = 0; k < a.n_profiles; k++) {
        if (sy_planner_load_profile(pl, a.profiles[k]) != SY_OK) {
            fprintf(stderr, "switchyard plan: %s\n", sy_planner_last_error(pl));
            goto out_planner;
        }
    }
    if (a.memory || a.sched.n_mem) {
        rc = plan_memory(rt, m, &a);
        if (rc != 0 || a.memory)
            goto out_planner;
        rc = 1;
    }
    if (build_step(m, &a, &g, &scratch) != SY_OK)
        goto out_planner;
    sy_plan_options o;
    sy_plan_options_init(&o);
    o.devices = a.sched.devices;
    o.policy = a.sched.policy;
    o.pins = a.sched.n_pins ? a.sched.pins : NULL;
    o.n_pins = a.sched.n_pins;
    o.mem = a.sched.n_mem ? a.sched.mem : NULL;
    o.n_mem = a.sched.n_mem;
    o.algorithm = a.algorithm;
    if (sy_planner_plan(pl, g, &o, &plan) != SY_OK) {
        fprintf(stderr, "switchyard plan: %s\n", sy_planner_last_error(pl));
        goto out_graph;
    }
    rc = show(plan, &a);
    if (rc == 0 && a.dot) {
        FILE *f = fopen(a.dot, "w");
        if (!f || sy_plan_explain(plan, SY_PLAN_FORMAT_DOT, f) != SY_OK) {
            fprintf(stderr, "switchyard plan: cannot write '%s'\n", a.dot);
            rc = 1;
        }
        if (f && fclose(f) != 0)
            rc = 1;
    }
    sy_plan_release(plan);
out_graph:
    sy_graph_destroy(g);
    free(scratch);
out_planner:
    sy_planner_destroy(pl);
out_model:
    sy_model_close(m);
out_runtime:
    sy_runtime_destroy(rt);
    return rc;
}
