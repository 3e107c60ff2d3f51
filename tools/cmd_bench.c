/* switchyard bench: prompt-processing and decode speed of GGUF models, in
 * the shape of llama-bench so that the two can be compared line by line.
 *
 * For every model x thread count a fresh runtime is created (the CPU
 * plugin reads SWITCHYARD_THREADS when it starts) and the model opened
 * (its load time is reported).  Then for every prompt length P a test
 * "ppP" evaluates P random tokens as one batch, and for every generation
 * length N a test "tgN" evaluates N single tokens one after another, each
 * from an empty context (the KV cache is cleared between repetitions).
 * One untimed warm-up run precedes the repetitions; tokens/s are given as
 * mean +- sample standard deviation over the repetitions. */
#include <errno.h>
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/resource.h>
#include <time.h>

#include "cli.h"
#include "probe.h"

#define BENCH_MAX_LIST 16
#define BENCH_MAX_REPS 1000

typedef struct bench_list {
    const char *items[BENCH_MAX_LIST];
    uint32_t n;
} bench_list;

typedef struct bench_opts {
    bench_list models, prompts, gens, threads, depths;
    uint32_t reps;
    uint32_t batch;
    bool warmup;
    bool json;
    sy_cli_sched sched; /* --devices (default cpu), --policy, --mem, --pin */
    sy_dtype kv_type;
    bool kv_set; /* --kv-type given; else auto-configured (docs/probe.md) */
    uint64_t seed;
    bool fit;
} bench_opts;

/* One finished test. */
typedef struct bench_result {
    sy_runtime *rt;
    const char *model;
    sy_model_info info;
    const char *threads;
    char test[32];
    uint32_t n_depth, n_prompt, n_gen, reps;
    double ts[BENCH_MAX_REPS]; /* tokens/s per repetition */
    double mean_ts, sd_ts, mean_ms;
    double load_ms;
    uint64_t peak_rss, kv_bytes;
    sy_cli_peak peaks[SY_MEMORY_MAX_DEVICES]; /* measured vs predicted, per device */
    uint32_t n_peaks;
    sy_step_stats steps; /* what the executor did in the timed repetitions */
} bench_result;

static void usage(FILE *f)
{
    fprintf(f,
            "usage: switchyard bench [-m MODEL[,MODEL...]] [-p N[,N...]] [-n N[,N...]] [-r REPS]\n"
            "                        [-d N[,N...]] [-t THREADS[,THREADS...]] [-b BATCH]\n"
            "                        [-o md|json]\n"
            "                        [--devices LIST] [--policy P] [--kv-type " SY_CLI_KV_TYPES "]\n"
            "                        [--no-warmup] [--seed S] [--mem DEV=SIZE]... [--fit]\n"
            "                        [--pin PATTERN=DEV]...\n"
            "Measures prompt processing (ppN: N random tokens evaluated as one batch) and\n"
            "decode (tgN: N single-token steps) in tokens/s, mean +- standard deviation over\n"
            "REPS repetitions (default 5) after one warm-up run, with the KV cache cleared\n"
            "between repetitions, as llama-bench does.  Defaults: -p 512 -n 128, the default\n"
            "model %s and the CPU plugin's default thread count.  Comma lists sweep every\n"
            "combination; -p 0 or -n 0 skips that test.  -d N (--n-depth, default 0): each\n"
            "repetition first fills the context with N random tokens, untimed, so the test\n"
            "runs at depth N (\"tg128 @ d4096\", as llama-bench).  Also reported: model\n"
            "load time, time to first token (the prompt's evaluation), KV cache size and\n"
            "peak RSS.\n"
            "--devices: comma list the scheduler may use (default: cpu); --policy: latency\n"
            "(default), energy, cpu-only or prefer:DEVICE; --pin PATTERN=DEV (repeatable):\n"
            "nodes whose name or op matches the glob run on DEV (as switchyard plan).\n"
            "--mem DEV=SIZE (repeatable): memory budget of a device (cpu: the process's host\n"
            "memory); a test whose session's predicted peak exceeds it is refused, or with\n"
            "--fit runs with a smaller context/KV type.  Each test's measured peak per device\n"
            "(the process's VmHWM, reset before the test, and the executor's buffers) is\n"
            "printed beside the predicted one (docs/memory.md).\n",
            SY_CLI_DEFAULT_MODEL);
}

/* Splits |arg| (modified in place) at commas into |out|. */
static bool parse_list(const char *opt, char *arg, bench_list *out)
{
    out->n = 0;
    for (char *tok = strtok(arg, ","); tok; tok = strtok(NULL, ",")) {
        if (out->n == BENCH_MAX_LIST) {
            fprintf(stderr, "switchyard bench: %s takes at most %d values\n", opt, BENCH_MAX_LIST);
            return false;
        }
        out->items[out->n++] = tok;
    }
    if (out->n == 0) {
        fprintf(stderr, "switchyard bench: %s needs a value\n", opt);
        return false;
    }
    return true;
}

static bool parse_u32(const char *opt, const char *s, uint32_t lo, uint32_t hi, uint32_t *out)
{
    char *end = NULL;
    errno = 0;
    unsigned long v = strtoul(s, &end, 10);
    if (errno || !end || end == s || *end || v < lo || v > hi) {
        fprintf(stderr, "switchyard bench: %s needs an integer in [%u, %u], got '%s'\n", opt, lo,
                hi, s);
        return false;
    }
    *out = (uint32_t)v;
    return true;
}

static bool parse_list_u32(const char *opt, const bench_list *l, uint32_t hi)
{
    uint32_t v;
    for (uint32_t i = 0; i < l->n; i++)
        if (!parse_u32(opt, l->items[i], 0, hi, &v))
            return false;
    return true;
}

static double now_ms(void)
{
    struct timespec ts;
    clock_gettime(CLOCK_MONOTONIC, &ts);
    return (double)ts.tv_sec * 1e3 + (double)ts.tv_nsec * 1e-6;
}

static uint64_t peak_rss_bytes(void)
{
    struct rusage ru;
    return getrusage(RUSAGE_SELF, &ru) == 0 ? (uint64_t)ru.ru_maxrss * 1024 : 0;
}

static uint64_t bench_rand(uint64_t *s)
{
    *s ^= *s << 13;
    *s ^= *s >> 7;
    *s ^= *s << 17;
    return *s;
}

static void random_tokens(uint64_t *seed, uint32_t n_vocab, int32_t *out, uint32_t n)
{
    for (uint32_t i = 0; i < n; i++)
        out[i] = (int32_t)(bench_rand(seed) % n_vocab);
}

/* Adds what the executor did between |a| and |b| to |acc|. */
static void add_stats(sy_step_stats *acc, const sy_step_stats *a, const sy_step_stats *b)
{
    acc->steps += b->steps - a->steps;
    acc->segments += b->segments - a->segments;
    acc->switches += b->switches - a->switches;
    acc->transfers += b->transfers - a->transfers;
    acc->transfer_bytes += b->transfer_bytes - a->transfer_bytes;
    acc->planned_bytes += b->planned_bytes - a->planned_bytes;
    acc->replayed += b->replayed - a->replayed;
}

/* Runs one repetition of a test from an empty context filled first with
 * |n_depth| random tokens (untimed) and returns its time in ms, or a
 * negative value on error (printed).  |acc|, when set, gains the executor's
 * counts of the timed part.  Never inlined: bench/overhead.sh finds the
 * timed loop's samples by this frame. */
__attribute__((noinline)) static double run_once(sy_session *s, uint64_t *seed,
                                                 uint32_t n_vocab, uint32_t n_depth,
                                                 uint32_t n_prompt, uint32_t n_gen,
                                                 int32_t *tokens, sy_step_stats *acc)
{
    sy_session_reset(s);
    sy_status st = SY_OK;
    if (n_depth > 0) {
        random_tokens(seed, n_vocab, tokens, n_depth);
        st = sy_session_eval(s, tokens, n_depth, false, NULL);
        if (st != SY_OK) {
            fprintf(stderr, "switchyard bench: filling the context to depth %u: %s\n", n_depth,
                    sy_session_last_error(s));
            return -1.0;
        }
    }
    sy_step_stats before;
    sy_step_stats_init(&before);
    if (acc)
        sy_session_query_step_stats(s, &before);
    double t0 = now_ms();
    if (n_prompt > 0) {
        random_tokens(seed, n_vocab, tokens, n_prompt);
        t0 = now_ms();
        st = sy_session_eval(s, tokens, n_prompt, false, NULL);
    } else {
        for (uint32_t i = 0; i < n_gen && st == SY_OK; i++) {
            int32_t tok;
            random_tokens(seed, n_vocab, &tok, 1);
            st = sy_session_eval(s, &tok, 1, false, NULL);
        }
    }
    const double ms = now_ms() - t0;
    if (st != SY_OK) {
        fprintf(stderr, "switchyard bench: %s\n", sy_session_last_error(s));
        return -1.0;
    }
    if (acc) {
        sy_step_stats after;
        sy_step_stats_init(&after);
        sy_session_query_step_stats(s, &after);
        add_stats(acc, &before, &after);
    }
    return ms;
}

static void summarize(bench_result *r, const double *ms)
{
    const uint32_t n_tok = r->n_prompt ? r->n_prompt : r->n_gen;
    double sum = 0.0, sum_ms = 0.0;
    for (uint32_t i = 0; i < r->reps; i++) {
        r->ts[i] = 1e3 * n_tok / ms[i];
        sum += r->ts[i];
        sum_ms += ms[i];
    }
    r->mean_ts = sum / r->reps;
    r->mean_ms = sum_ms / r->reps;
    double var = 0.0;
    for (uint32_t i = 0; i < r->reps; i++)
        var += (r->ts[i] - r->mean_ts) * (r->ts[i] - r->mean_ts);
    r->sd_ts = r->reps > 1 ? sqrt(var / (r->reps - 1)) : 0.0;
}

static const char *base_name(const char *path)
{
    const char *slash = strrchr(path, '/');
    return slash ? slash + 1 : path;
}

static void print_md_header(void)
{
    printf("| model | size | params | threads | devices | test | t/s | ms | load ms | switches "
           "/ step | moved / step (plan) | peak RSS | peak / predicted |\n");
    printf("| --- | ---: | ---: | ---: | --- | ---: | ---: | ---: | ---: | ---: | ---: | ---: | "
           "--- |\n");
}

/* Per step of the timed repetitions: |total| / steps. */
static double per_step(const bench_result *r, uint64_t total)
{
    return r->steps.steps ? (double)total / (double)r->steps.steps : 0.0;
}

/* The scheduler options of |o| in one cell: "cpu,opencl:0 prefer:opencl:0
 * pin blk.*.ffn_*=cpu" (pins in backquotes: their stars are not emphasis). */
static void print_md_devices(const sy_cli_sched *o)
{
    printf(" %s", o->devices);
    if (o->policy)
        printf(" %s", o->policy);
    for (uint32_t k = 0; k < o->n_pins; k++)
        printf(" pin `%s`", o->pins[k]);
    for (uint32_t k = 0; k < o->n_mem; k++)
        printf(" mem %s", o->mem[k]);
    printf(" |");
}

static void print_json_string(const char *s)
{
    putchar('"');
    for (; *s; s++) {
        if (*s == '"' || *s == '\\')
            printf("\\%c", *s);
        else if ((unsigned char)*s < 0x20)
            printf("\\u%04x", (unsigned)(unsigned char)*s);
        else
            putchar(*s);
    }
    putchar('"');
}

static void print_md_row(const bench_result *r, const sy_cli_sched *o)
{
    printf("| %s | %.2f MiB | %.2f M | %s |", base_name(r->model),
           (double)r->info.weight_bytes / (1 << 20), (double)r->info.n_params / 1e6, r->threads);
    print_md_devices(o);
    printf(" %s | %.2f ± %.2f | %.2f | %.1f | %.1f | %.1f KiB (%.1f KiB) | %.1f MiB |", r->test,
           r->mean_ts, r->sd_ts, r->mean_ms, r->load_ms, per_step(r, r->steps.switches),
           per_step(r, r->steps.transfer_bytes) / 1024.0,
           per_step(r, r->steps.planned_bytes) / 1024.0, (double)r->peak_rss / (1 << 20));
    for (uint32_t k = 0; k < r->n_peaks; k++)
        printf("%s %s %.1f / %.1f MiB", k ? "," : "", r->peaks[k].name,
               (double)r->peaks[k].measured / (1 << 20), (double)r->peaks[k].predicted / (1 << 20));
    printf(" |\n");
    fflush(stdout);
}

static void print_json_row(const bench_result *r, const sy_cli_sched *o, bool first)
{
    printf("%s  {\"model\": \"%s\", \"arch\": \"%s\", \"weight_bytes\": %llu, \"n_params\": %llu, "
           "\"threads\": %s%s%s, \"test\": \"%s\", \"n_depth\": %u, \"n_prompt\": %u, "
           "\"n_gen\": %u, "
           "\"avg_ts\": %.4f, \"stddev_ts\": %.4f, \"avg_ms\": %.4f, \"load_ms\": %.3f, "
           "\"kv_bytes\": %llu, \"peak_rss_bytes\": %llu, \"samples_ts\": [",
           first ? "" : ",\n", base_name(r->model), r->info.arch ? r->info.arch : "",
           (unsigned long long)r->info.weight_bytes, (unsigned long long)r->info.n_params,
           /* a count as a number, "default" as a string: valid JSON either way */
           r->threads[strspn(r->threads, "0123456789")] ? "\"" : "", r->threads,
           r->threads[strspn(r->threads, "0123456789")] ? "\"" : "", r->test, r->n_depth,
           r->n_prompt, r->n_gen, r->mean_ts, r->sd_ts, r->mean_ms,
           r->load_ms, (unsigned long long)r->kv_bytes, (unsigned long long)r->peak_rss);
    for (uint32_t i = 0; i < r->reps; i++)
        printf("%s%.4f", i ? ", " : "", r->ts[i]);
    printf("], \"peaks\": [");
    for (uint32_t k = 0; k < r->n_peaks; k++)
        printf("%s{\"device\": \"%s\", \"measured_bytes\": %llu, \"predicted_bytes\": %llu}",
               k ? ", " : "", r->peaks[k].name, (unsigned long long)r->peaks[k].measured,
               (unsigned long long)r->peaks[k].predicted);
    printf("], \"devices\": ");
    print_json_string(o->devices);
    printf(", \"policy\": ");
    print_json_string(o->policy ? o->policy : "latency");
    printf(", \"pins\": [");
    for (uint32_t k = 0; k < o->n_pins; k++) {
        printf("%s", k ? ", " : "");
        print_json_string(o->pins[k]);
    }
    printf("], \"steps\": %llu, \"segments_per_step\": %.4f, \"switches_per_step\": %.4f, "
           "\"transfers_per_step\": %.4f, \"transfer_bytes_per_step\": %.1f, "
           "\"planned_transfer_bytes_per_step\": %.1f, \"replayed_steps\": %llu}",
           (unsigned long long)r->steps.steps, per_step(r, r->steps.segments),
           per_step(r, r->steps.switches), per_step(r, r->steps.transfers),
           per_step(r, r->steps.transfer_bytes), per_step(r, r->steps.planned_bytes),
           (unsigned long long)r->steps.replayed);
    fflush(stdout);
}

/* Runs test (n_prompt, n_gen) — exactly one of them non-zero — at depth
 * |n_depth| on |m|. */
static int run_test(const bench_opts *o, sy_model *m, bench_result *r, uint32_t n_depth,
                    uint32_t n_prompt, uint32_t n_gen, uint64_t *seed)
{
    sy_session_options so;
    sy_session_options_init(&so);
    so.n_ctx = n_depth + n_prompt + n_gen;
    /* The batch the prompt, or else the depth's filling, is evaluated in. */
    const uint32_t batched = n_prompt > n_depth ? n_prompt : n_depth;
    so.n_batch = batched ? (batched < o->batch ? batched : o->batch) : 1;
    so.kv_type = o->kv_type;
    sy_cli_sched_apply(&o->sched, &so);
    so.fit = o->fit;
    /* Each test's peak from here: the process's high-water mark and the
     * plugins' device peaks restart. */
    sy_cli_reset_peak(r->rt);
    sy_session *s = NULL;
    sy_status st = sy_session_create(m, &so, &s);
    if (st != SY_OK) {
        fprintf(stderr, "switchyard bench: cannot create a session: %s: %s\n",
                sy_status_str(st), sy_runtime_last_error(r->rt));
        return 1;
    }
    sy_memory_plan mp;
    sy_memory_plan_init(&mp);
    const bool planned = sy_session_query_memory(s, &mp, NULL) == SY_OK;
    if (planned && mp.fitted)
        fprintf(stderr, "switchyard bench: %s\n", mp.note);
    /* Room for the prompt or the depth's tokens, whichever is longer. */
    int32_t *tokens = malloc(sizeof(int32_t) * (batched ? batched : 1));
    double *ms = malloc(sizeof(double) * o->reps);
    int rc = 1;
    if (!tokens || !ms)
        goto out_free;
    r->n_depth = n_depth;
    r->n_prompt = n_prompt;
    r->n_gen = n_gen;
    r->reps = o->reps;
    int len = snprintf(r->test, sizeof r->test, n_prompt ? "pp%u" : "tg%u",
                       n_prompt ? n_prompt : n_gen);
    if (n_depth > 0 && len > 0 && (size_t)len < sizeof r->test)
        snprintf(r->test + len, sizeof r->test - (size_t)len, " @ d%u", n_depth);
    const uint32_t n_vocab = r->info.n_vocab;
    if (o->warmup &&
        run_once(s, seed, n_vocab, n_depth, n_prompt, n_gen ? 1 : 0, tokens, NULL) < 0)
        goto out_free;
    r->steps = (sy_step_stats){.struct_size = sizeof r->steps};
    for (uint32_t i = 0; i < o->reps; i++) {
        ms[i] = run_once(s, seed, n_vocab, n_depth, n_prompt, n_gen, tokens, &r->steps);
        if (ms[i] < 0)
            goto out_free;
    }
    summarize(r, ms);
    r->peak_rss = peak_rss_bytes();
    if (!sy_cli_memory_peaks(s, r->peaks, SY_MEMORY_MAX_DEVICES, &r->n_peaks))
        r->n_peaks = 0;
    /* The whole cache, in host memory: the plan's cpu row (the session's
     * metrics are filled by generate, which bench does not call). */
    r->kv_bytes = planned && mp.n_devices > 0 ? mp.devices[0].kv_bytes : 0;
    rc = 0;
out_free:
    free(ms);
    free(tokens);
    sy_session_destroy(s);
    return rc;
}

/* Runs one test and prints its row; nonzero on error (printed). */
static int bench_row(const bench_opts *o, sy_model *m, bench_result *r, uint32_t n_depth,
                     uint32_t n_prompt, uint32_t n_gen, uint64_t *seed, bool *first)
{
    if (run_test(o, m, r, n_depth, n_prompt, n_gen, seed) != 0)
        return 1;
    if (o->json)
        print_json_row(r, &o->sched, *first);
    else
        print_md_row(r, &o->sched);
    *first = false;
    return 0;
}

/* Benchmarks one model at one thread count. */
static int bench_model(const bench_opts *o, const char *path, const char *threads, bool *first)
{
    if (threads)
        setenv("SWITCHYARD_THREADS", threads, 1);
    sy_probe *probe = calloc(1, sizeof *probe);
    /* Only the plugins of the devices named: an unused GPU stack would show
     * in every peak. */
    sy_runtime *rt = probe ? sy_cli_runtime_probed("bench", o->sched.devices, path, probe) : NULL;
    if (!rt) {
        free(probe);
        return 1;
    }
    sy_model *m = NULL;
    int rc = 1;
    sy_status st = sy_model_open(rt, path, &m);
    if (st != SY_OK) {
        fprintf(stderr, "switchyard bench: %s\n", sy_runtime_last_error(rt));
        goto out_runtime;
    }
    bench_opts local = *o;
    if (!o->kv_set) {
        sy_session_options so;
        sy_session_options_init(&so);
        so.kv_type = o->kv_type;
        sy_cli_autoconfig_session(probe, m, true, false, &so);
        local.kv_type = so.kv_type;
    }
    o = &local;
    bench_result *r = calloc(1, sizeof *r);
    if (!r)
        goto out_model;
    sy_model_query_info(m, &r->info);
    r->model = path;
    r->rt = rt;
    r->threads = threads ? threads : "default";
    r->load_ms = r->info.load_ms;
    uint64_t seed = o->seed ? o->seed : 0x2545f4914f6cdd1dull;
    for (uint32_t di = 0; di < o->depths.n; di++) {
        const uint32_t depth = (uint32_t)strtoul(o->depths.items[di], NULL, 10);
        for (uint32_t i = 0; i < o->prompts.n; i++) {
            const uint32_t n = (uint32_t)strtoul(o->prompts.items[i], NULL, 10);
            if (n > 0 && bench_row(o, m, r, depth, n, 0, &seed, first) != 0)
                goto out_result;
        }
        for (uint32_t i = 0; i < o->gens.n; i++) {
            const uint32_t n = (uint32_t)strtoul(o->gens.items[i], NULL, 10);
            if (n > 0 && bench_row(o, m, r, depth, 0, n, &seed, first) != 0)
                goto out_result;
        }
    }
    rc = 0;
out_result:
    free(r);
out_model:
    sy_model_close(m);
out_runtime:
    sy_runtime_destroy(rt);
    free(probe);
    return rc;
}

int sy_cli_bench(int argc, char **argv)
{
    static char default_model[] = SY_CLI_DEFAULT_MODEL;
    bench_opts o = {.reps = 5, .batch = 512, .warmup = true, .kv_type = SY_DTYPE_F16};
    o.models.items[0] = default_model;
    o.models.n = 1;
    static char p512[] = "512", n128[] = "128", d0[] = "0";
    o.depths.items[0] = d0;
    o.depths.n = 1;
    o.prompts.items[0] = p512;
    o.prompts.n = 1;
    o.gens.items[0] = n128;
    o.gens.n = 1;
    for (int i = 1; i < argc; i++) {
        const char *a = argv[i];
        char *v = i + 1 < argc ? argv[i + 1] : NULL;
        bool ok = true;
        int sched_opt = sy_cli_parse_sched_option("bench", argc, argv, &i, &o.sched);
        if (sched_opt < 0)
            return 2;
        if (sched_opt > 0)
            continue;
        if (strcmp(a, "--help") == 0 || strcmp(a, "-h") == 0) {
            usage(stdout);
            return 0;
        } else if (strcmp(a, "--no-warmup") == 0) {
            o.warmup = false;
            continue;
        } else if (strcmp(a, "--fit") == 0) {
            o.fit = true;
            continue;
        } else if (!v) {
            fprintf(stderr, "switchyard bench: unknown option or missing value: '%s'\n", a);
            return 2;
        } else if (strcmp(a, "-m") == 0 || strcmp(a, "--model") == 0) {
            ok = parse_list(a, v, &o.models);
        } else if (strcmp(a, "-p") == 0 || strcmp(a, "--n-prompt") == 0) {
            ok = parse_list(a, v, &o.prompts) && parse_list_u32(a, &o.prompts, 1u << 20);
        } else if (strcmp(a, "-n") == 0 || strcmp(a, "--n-gen") == 0) {
            ok = parse_list(a, v, &o.gens) && parse_list_u32(a, &o.gens, 1u << 20);
        } else if (strcmp(a, "-d") == 0 || strcmp(a, "--n-depth") == 0) {
            ok = parse_list(a, v, &o.depths) && parse_list_u32(a, &o.depths, 1u << 20);
        } else if (strcmp(a, "-t") == 0 || strcmp(a, "--threads") == 0) {
            ok = parse_list(a, v, &o.threads) && parse_list_u32(a, &o.threads, 1024);
        } else if (strcmp(a, "-r") == 0 || strcmp(a, "--repetitions") == 0) {
            ok = parse_u32(a, v, 1, BENCH_MAX_REPS, &o.reps);
        } else if (strcmp(a, "-b") == 0 || strcmp(a, "--batch") == 0) {
            ok = parse_u32(a, v, 1, 1u << 16, &o.batch);
        } else if (strcmp(a, "-o") == 0 || strcmp(a, "--output") == 0) {
            if (strcmp(v, "json") == 0)
                o.json = true;
            else if (strcmp(v, "md") != 0)
                ok = false, fprintf(stderr, "switchyard bench: -o takes md or json\n");
        } else if (strcmp(a, "--kv-type") == 0) {
            o.kv_set = true;
            if (!sy_cli_parse_kv_type(v, &o.kv_type))
                ok = false, fprintf(stderr, "switchyard bench: --kv-type takes " SY_CLI_KV_TYPES
                                            ", got '%s'\n", v);
        } else if (strcmp(a, "--seed") == 0) {
            o.seed = strtoull(v, NULL, 10);
        } else {
            fprintf(stderr, "switchyard bench: unknown option '%s'\n", a);
            return 2;
        }
        if (!ok)
            return 2;
        i++;
    }
    /* As run: the CPU alone unless told (docs/cli.md). */
    if (!o.sched.devices)
        o.sched.devices = "cpu";
    for (uint32_t i = 0; i < o.threads.n; i++)
        if (strcmp(o.threads.items[i], "0") == 0) {
            fprintf(stderr, "switchyard bench: -t needs at least one thread\n");
            return 2;
        }

    bool first = true;
    if (o.json)
        printf("[\n");
    else
        print_md_header();
    int rc = 0;
    for (uint32_t mi = 0; mi < o.models.n && rc == 0; mi++) {
        if (o.threads.n == 0)
            rc = bench_model(&o, o.models.items[mi], NULL, &first);
        for (uint32_t ti = 0; ti < o.threads.n && rc == 0; ti++)
            rc = bench_model(&o, o.models.items[mi], o.threads.items[ti], &first);
    }
    if (o.json)
        printf("\n]\n");
    return rc;
}
