/* switchyard run: generate text from a prompt, streaming tokens, then
 * print the metrics. */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "cli.h"
#include "probe.h"

/* Streams generated text to stdout.  With a stop text (a base model's
 * transcript turn ends at "\nUser:"), the bytes that may be the start of
 * it are held back until the next token shows whether they are; when it
 * appears, what precedes it is printed and generation stops. */
typedef struct text_stream {
    const char *stop; /* "" for none */
    size_t stop_len;
    char held[64];    /* a proper prefix of |stop| awaiting more text */
    size_t n_held;
} text_stream;

static void stream_write(const char *p, size_t n)
{
    fwrite(p, 1, n, stdout);
    fflush(stdout);
}

static bool print_token(void *user, int32_t token, const char *text, size_t len)
{
    (void)token;
    text_stream *ts = user;
    if (ts->stop_len == 0) {
        stream_write(text, len);
        return true;
    }
    for (size_t i = 0; i < len; i++) {
        ts->held[ts->n_held++] = text[i];
        /* Drop leading bytes until |held| is a prefix of |stop| again. */
        size_t skip = 0;
        while (skip < ts->n_held &&
               memcmp(ts->held + skip, ts->stop, ts->n_held - skip) != 0)
            skip++;
        stream_write(ts->held, skip);
        memmove(ts->held, ts->held + skip, ts->n_held - skip);
        ts->n_held -= skip;
        if (ts->n_held == ts->stop_len) {
            ts->n_held = 0;
            return false;
        }
    }
    return true;
}

static void usage(FILE *f)
{
    fprintf(f,
            "usage: switchyard run [-m MODEL] [-p PROMPT] [-n N] [--chat] [--system TEXT]\n"
            "                      [--temp T] [--top-k K] [--top-p P] [--min-p P]\n"
            "                      [--repeat-penalty R] [--seed S] [--ctx N]\n"
            "                      [--kv-type " SY_CLI_KV_TYPES "] [--context-policy error|shift|window:W]\n"
            "                      [--keep N] [--devices LIST] [--policy P] [--truncate]\n"
            "                      [--threads N] [--mem DEV=SIZE]... [--pin PATTERN=DEV]...\n"
            "                      [--fit] [--profile]\n"
            "Generates up to N tokens (default 128) after PROMPT, streaming them, then prints\n"

            "load time, TTFT, prefill and decode tokens/s and peak RSS.  Without -m it uses\n"
            "the default model %s (fetch it with tools/fetch-models.sh).\n"
            "--devices: comma list of devices the scheduler may use (default: cpu);\n"
            "--policy: latency (default), energy, cpu-only or prefer:DEVICE;\n"
            "--pin PATTERN=DEV (repeatable): nodes whose name or op matches the glob run on\n"
            "  DEV, as with switchyard plan (first matching pin wins).\n"
            "--kv-type: the KV cache's element type (default f16; q8_0 and q4_0 take about\n"
            "  1/2 and 1/4 of its memory).\n"
            "--context-policy: what happens when the context (--ctx) is full: error (default)\n"
            "  stops with an error; shift drops the older half of the tokens after the first\n"
            "  --keep ones (default: the chat prompt's system turn, or the BOS token) and\n"
            "  re-evaluates the rest; window:W lets every layer see only its last W tokens,\n"
            "  so the context never fills (see docs/memory.md).\n"
            "--threads, --ctx and --kv-type default to what the machine's probe suggests for\n"
            "the model (docs/probe.md: auto-configuration; the first run probes, once).\n"
            "--mem DEV=SIZE: memory budget of a device (K/M/G suffix; cpu is the process's\n"
            "  host memory): refuse to start when the predicted peak exceeds it, or with\n"
            "  --fit start with a smaller context, then KV type, that fits (docs/memory.md).\n"
            "  After generating, the measured peak per device is printed beside the\n"
            "  predicted one.\n"
            "--profile: time every node (each launched alone, so the run is slower) and\n"
            "  print the top nodes by time per device.\n",
            SY_CLI_DEFAULT_MODEL);
}

/* Returns |m|'s chat prompt for |user| (malloc'd), or NULL. */
static char *format_chat(const sy_model *m, const char *system, const char *user)
{
    size_t need = 0;
    sy_status st = sy_model_format_chat(m, system, user, NULL, 0, &need);
    if (st != SY_E_LIMIT && st != SY_OK) /* a size query may answer either */
        return NULL;
    char *text = malloc(need + 1);
    if (text && sy_model_format_chat(m, system, user, text, need + 1, &need) != SY_OK) {
        free(text);
        text = NULL;
    }
    return text;
}

/* Returns the tokens of |text| as run tokenizes the prompt (malloc'd, at
 * least one element), or NULL. */
static int32_t *tokens_of(const sy_model *m, const char *text, bool chat, uint32_t *out_n)
{
    uint32_t n = 0;
    sy_status st = sy_model_tokenize(m, text, strlen(text), true, chat, NULL, 0, &n);
    if (st != SY_OK && st != SY_E_LIMIT)
        return NULL;
    int32_t *ids = malloc((n ? n : 1) * sizeof *ids);
    if (ids && sy_model_tokenize(m, text, strlen(text), true, chat, ids, n, &n) != SY_OK) {
        free(ids);
        return NULL;
    }
    *out_n = n;
    return ids;
}

/* The tokens a context shift keeps by default: with --chat, the prompt's
 * leading tokens that do not depend on the user's message (the system
 * turn, default or given, and the user turn's header); else the BOS token
 * the model adds, if it adds one. */
static uint32_t default_keep(const sy_model *m, bool chat, const char *system, const char *prompt)
{
    uint32_t keep = 0, na = 0, nb = 0;
    if (!chat) {
        int32_t *ids = tokens_of(m, "", false, &na);
        free(ids);
        return ids ? na : 0;
    }
    char *a = format_chat(m, system, prompt), *b = format_chat(m, system, "");
    int32_t *ia = a ? tokens_of(m, a, true, &na) : NULL;
    int32_t *ib = b ? tokens_of(m, b, true, &nb) : NULL;
    while (ia && ib && keep < na && keep < nb && ia[keep] == ib[keep])
        keep++;
    free(ia);
    free(ib);
    free(a);
    free(b);
    return keep;
}

/* Parses a number option, printing an error when it is not one. */
static bool parse_num(const char *opt, const char *val, double lo, double hi, double *out)
{
    char *end = NULL;
    double v = val ? strtod(val, &end) : 0;
    if (!val || end == val || *end || v < lo || v > hi) {
        fprintf(stderr, "switchyard run: %s needs a number in [%g, %g], got '%s'\n", opt, lo, hi,
                val ? val : "");
        return false;
    }
    *out = v;
    return true;
}

int sy_cli_run(int argc, char **argv)
{
    const char *model = SY_CLI_DEFAULT_MODEL, *prompt = NULL;
    const char *system = NULL, *device = NULL;
    sy_cli_sched sched = {0};
    bool chat = false, keep_set = false, ctx_set = false, kv_set = false;
    sy_generate_params gp;
    sy_generate_params_init(&gp);
    sy_session_options so;
    sy_session_options_init(&so);
    for (int i = 1; i < argc; i++) {
        const char *a = argv[i], *v = i + 1 < argc ? argv[i + 1] : NULL;
        double num = 0;
        int sched_opt = sy_cli_parse_sched_option("run", argc, argv, &i, &sched);
        if (sched_opt < 0)
            return 2;
        if (sched_opt > 0)
            continue;
        if (strcmp(a, "--help") == 0 || strcmp(a, "-h") == 0) {
            usage(stdout);
            return 0;
        } else if (strcmp(a, "--chat") == 0) {
            chat = true;
        } else if (strcmp(a, "--truncate") == 0) {
            gp.truncate_prompt = true;
        } else if (strcmp(a, "--fit") == 0) {
            so.fit = true;
        } else if (strcmp(a, "--profile") == 0) {
            so.time_nodes = true;
        } else if (!v) {
            fprintf(stderr, "switchyard run: unknown option or missing value: '%s'\n", a);
            return 2;
        } else if (strcmp(a, "-m") == 0 || strcmp(a, "--model") == 0) {
            model = v, i++;
        } else if (strcmp(a, "-p") == 0 || strcmp(a, "--prompt") == 0) {
            prompt = v, i++;
        } else if (strcmp(a, "--system") == 0) {
            system = v, i++;
        } else if (strcmp(a, "--kv-type") == 0) {
            i++;
            if (!sy_cli_parse_kv_type(v, &so.kv_type)) {
                fprintf(stderr, "switchyard run: --kv-type must be one of " SY_CLI_KV_TYPES
                                ", got '%s'\n", v);
                return 2;
            }
            kv_set = true;
        } else if (strcmp(a, "--context-policy") == 0) {
            i++;
            if (!sy_cli_parse_context_policy(v, &so)) {
                fprintf(stderr, "switchyard run: --context-policy must be error, shift or "
                                "window:W (W >= 1 tokens), got '%s'\n", v);
                return 2;
            }
        } else {
            i++;
            if (strcmp(a, "-n") == 0 || strcmp(a, "--n-predict") == 0) {
                if (!parse_num(a, v, 1, 1e7, &num))
                    return 2;
                gp.n_predict = (uint32_t)num;
            } else if (strcmp(a, "--temp") == 0) {
                if (!parse_num(a, v, 0, 100, &num))
                    return 2;
                gp.temperature = (float)num;
            } else if (strcmp(a, "--top-k") == 0) {
                if (!parse_num(a, v, 0, 1e9, &num))
                    return 2;
                gp.top_k = (uint32_t)num;
            } else if (strcmp(a, "--top-p") == 0) {
                if (!parse_num(a, v, 0, 1, &num))
                    return 2;
                gp.top_p = (float)num;
            } else if (strcmp(a, "--min-p") == 0) {
                if (!parse_num(a, v, 0, 1, &num))
                    return 2;
                gp.min_p = (float)num;
            } else if (strcmp(a, "--repeat-penalty") == 0) {
                if (!parse_num(a, v, 0, 100, &num))
                    return 2;
                gp.repeat_penalty = (float)num;
            } else if (strcmp(a, "--seed") == 0) {
                if (!parse_num(a, v, 0, 1.8e19, &num))
                    return 2;
                gp.seed = (uint64_t)num;
            } else if (strcmp(a, "--ctx") == 0) {
                if (!parse_num(a, v, 1, 1 << 24, &num))
                    return 2;
                so.n_ctx = (uint32_t)num;
                ctx_set = true;
            } else if (strcmp(a, "--threads") == 0) {
                if (!parse_num(a, v, 1, 1024, &num))
                    return 2;
                setenv("SWITCHYARD_THREADS", v, 1);
            } else if (strcmp(a, "--keep") == 0) {
                if (!parse_num(a, v, 0, 1 << 24, &num))
                    return 2;
                so.n_keep = (uint32_t)num;
                keep_set = true;
            } else {
                fprintf(stderr, "switchyard run: unknown option '%s'\n", a);
                return 2;
            }
        }
    }
    /* The CPU alone until profiles exist: unmeasured devices are planned
     * from their own claims (see docs/scheduler.md). */
    sy_cli_sched_apply(&sched, &so);
    device = sched.devices ? sched.devices : "cpu";
    so.devices = device;
    if (!prompt)
        prompt = chat ? "Explain in two sentences why the sky is blue." : "The capital of France is";

    sy_probe *probe = calloc(1, sizeof *probe);
    sy_runtime *rt = probe ? sy_cli_runtime_probed("run", device, model, probe) : NULL;
    if (!rt) {
        free(probe);
        return 1;
    }
    int rc = 1;
    sy_model *m = NULL;
    sy_session *s = NULL;
    char *text = NULL;
    int32_t *ids = NULL;
    sy_status st = sy_model_open(rt, model, &m);
    if (st != SY_OK) {
        fprintf(stderr, "switchyard run: %s\n", sy_runtime_last_error(rt));
        goto out_rt;
    }
    sy_cli_autoconfig_session(probe, m, ctx_set, kv_set, &so);
    if (so.context_policy == SY_CONTEXT_SHIFT && !keep_set)
        so.n_keep = default_keep(m, chat, system, prompt);
    st = sy_session_create(m, &so, &s);
    if (st != SY_OK) {
        fprintf(stderr, "switchyard run: %s\n", sy_runtime_last_error(rt));
        goto out_model;
    }
    sy_memory_plan mp;
    sy_memory_plan_init(&mp);
    if (sy_session_query_memory(s, &mp, NULL) == SY_OK && mp.fitted)
        fprintf(stderr, "switchyard run: %s\n", mp.note);
    const char *input = prompt;
    if (chat) {
        size_t need = 0;
        st = sy_model_format_chat(m, system, prompt, NULL, 0, &need);
        if (st == SY_E_LIMIT || st == SY_OK) { /* a size query may answer either */
            text = malloc(need + 1);
            st = text ? sy_model_format_chat(m, system, prompt, text, need + 1, &need)
                      : SY_E_NO_MEMORY;
        }
        if (st != SY_OK) {
            fprintf(stderr, "switchyard run: formatting the chat prompt: %s\n",
                    sy_status_str(st));
            goto out_session;
        }
        input = text;
    }
    uint32_t n = 0;
    st = sy_model_tokenize(m, input, strlen(input), true, chat, NULL, 0, &n);
    if (st == SY_E_LIMIT || st == SY_OK) {
        ids = malloc((n ? n : 1) * sizeof *ids);
        st = ids ? sy_model_tokenize(m, input, strlen(input), true, chat, ids, n, &n)
                 : SY_E_NO_MEMORY;
    }
    if (st != SY_OK || n == 0) {
        fprintf(stderr, "switchyard run: tokenizing the prompt: %s\n",
                st != SY_OK ? sy_runtime_last_error(rt) : "it gave no tokens");
        goto out_session;
    }
    if (!chat) {
        fputs(prompt, stdout);
        fflush(stdout);
    }
    text_stream ts = {.stop = chat ? sy_model_chat_stop_text(m) : ""};
    ts.stop_len = strlen(ts.stop);
    if (ts.stop_len >= sizeof ts.held)
        ts.stop_len = 0; /* never: the stop texts are a few bytes */
    if (ts.stop_len > 0)
        fprintf(stderr, "switchyard run: %s has no chat template (a base model?): chatting "
                        "through a User:/Assistant: transcript\n", model);
    st = sy_session_generate(s, ids, n, &gp, print_token, &ts);
    stream_write(ts.held, ts.n_held); /* a partial stop text at the end is text */
    printf("\n");
    fflush(stdout); /* the text ends before an error on stderr starts */
    if (st != SY_OK) {
        fprintf(stderr, "switchyard run: %s\n", sy_session_last_error(s));
        goto out_session;
    }
    sy_metrics mt;
    sy_session_query_metrics(s, &mt);
    sy_model_info info;
    sy_model_query_info(m, &info);
    fprintf(stderr,
            "\n[%s, %s, %u layers] load %.1f ms | TTFT %.1f ms | prefill %u tok, %.1f tok/s | "
            "decode %u tok, %.1f tok/s | peak RSS %.1f MiB (weights %.1f MiB, KV %.1f MiB)\n",
            info.name, info.arch, info.n_layer, mt.load_ms, mt.ttft_ms, mt.prefill_tokens,
            mt.prefill_tok_s, mt.decode_tokens, mt.decode_tok_s,
            (double)mt.peak_rss_bytes / (1 << 20), (double)info.weight_bytes / (1 << 20),
            (double)mt.kv_bytes / (1 << 20));
    sy_cli_print_memory_peaks(stderr, s);
    sy_cli_print_node_timing(stderr, s, 10);
    rc = 0;
out_session:
    free(ids);
    free(text);
    sy_session_destroy(s);
out_model:
    sy_model_close(m);
out_rt:
    sy_runtime_destroy(rt);
    free(probe);
    return rc;
}
