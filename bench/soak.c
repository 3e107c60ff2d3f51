/* soak: a long generation through one session, sampling the process's
 * resident set every N tokens.  Run by bench/soak.sh, which judges the
 * curve; not a test (its figures depend on the machine).
 *
 *   soak MODEL TOKENS CTX EVERY KV_TYPE POLICY
 *     POLICY: shift or window:W
 *
 * Prints one line per sample:
 *   sample TOKENS RSS_KIB N_PAST SHIFTS SECONDS
 * then "done TOKENS SHIFTS SECONDS DECODE_TOK_S".  Sampled text (temperature
 * 0.8, top-p 0.95, fixed seed); an end token ends one generation and the
 * next one continues the same context from a one-token prompt, as a long
 * conversation would. */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>
#include <unistd.h>

#include <switchyard/switchyard.h>

typedef struct soak {
    sy_session *s;
    uint32_t target, every, tokens, shifts, last_past;
    double t0;
} soak;

static double now_s(void)
{
    struct timespec ts;
    clock_gettime(CLOCK_MONOTONIC, &ts);
    return ts.tv_sec + ts.tv_nsec / 1e9;
}

/* Resident set in KiB from /proc/self/statm (0 where unavailable). */
static unsigned long rss_kib(void)
{
    unsigned long size = 0, resident = 0;
    FILE *f = fopen("/proc/self/statm", "r");
    if (!f)
        return 0;
    if (fscanf(f, "%lu %lu", &size, &resident) != 2)
        resident = 0;
    fclose(f);
    return resident * (unsigned long)sysconf(_SC_PAGESIZE) / 1024;
}

static bool on_token(void *user, int32_t token, const char *text, size_t len)
{
    (void)token;
    (void)text;
    (void)len;
    soak *k = user;
    const uint32_t n_past = sy_session_n_past(k->s);
    k->shifts += n_past < k->last_past;
    k->last_past = n_past;
    k->tokens++;
    if (k->tokens % k->every == 0) {
        printf("sample %u %lu %u %u %.1f\n", k->tokens, rss_kib(), n_past, k->shifts,
               now_s() - k->t0);
        fflush(stdout);
    }
    return k->tokens < k->target;
}

static int32_t *tokenize(const sy_model *m, const char *text, uint32_t *out_n)
{
    uint32_t n = 0;
    sy_status st = sy_model_tokenize(m, text, strlen(text), true, false, NULL, 0, &n);
    if ((st != SY_OK && st != SY_E_LIMIT) || n == 0)
        return NULL;
    int32_t *ids = malloc(n * sizeof *ids);
    if (ids && sy_model_tokenize(m, text, strlen(text), true, false, ids, n, &n) != SY_OK) {
        free(ids);
        return NULL;
    }
    *out_n = n;
    return ids;
}

int main(int argc, char **argv)
{
    if (argc != 7) {
        fprintf(stderr, "usage: %s MODEL TOKENS CTX EVERY f16|f32|q8_0|q4_0 shift|window:W\n",
                argv[0]);
        return 2;
    }
    sy_session_options so;
    sy_session_options_init(&so);
    so.n_ctx = (uint32_t)strtoul(argv[3], NULL, 10);
    so.devices = "cpu";
    static const char *const kv_names[] = {"f32", "f16", "q8_0", "q4_0"};
    static const sy_dtype kv_types[] = {SY_DTYPE_F32, SY_DTYPE_F16, SY_DTYPE_Q8_0, SY_DTYPE_Q4_0};
    bool kv_ok = false;
    for (int i = 0; i < 4; i++)
        if (strcmp(argv[5], kv_names[i]) == 0)
            so.kv_type = kv_types[i], kv_ok = true;
    if (strcmp(argv[6], "shift") == 0) {
        so.context_policy = SY_CONTEXT_SHIFT;
    } else if (strncmp(argv[6], "window:", 7) == 0 && atoi(argv[6] + 7) > 0) {
        so.context_policy = SY_CONTEXT_WINDOW;
        so.window = (uint32_t)atoi(argv[6] + 7);
    } else {
        kv_ok = false;
    }
    soak k = {.target = (uint32_t)strtoul(argv[2], NULL, 10),
              .every = (uint32_t)strtoul(argv[4], NULL, 10)};
    if (!kv_ok || k.target == 0 || k.every == 0) {
        fprintf(stderr, "soak: bad arguments (see the usage)\n");
        return 2;
    }
    int rc = 1;
    sy_runtime *rt = NULL;
    sy_model *m = NULL;
    int32_t *prompt = NULL;
    if (sy_runtime_create(NULL, &rt) != SY_OK) {
        fprintf(stderr, "soak: cannot create the runtime\n");
        return 1;
    }
    if (sy_model_open(rt, argv[1], &m) != SY_OK) {
        fprintf(stderr, "soak: %s\n", sy_runtime_last_error(rt));
        goto out;
    }
    uint32_t n_prompt = 0;
    prompt = tokenize(m, "Chapter One. The river town woke before dawn, and the ferryman", &n_prompt);
    if (!prompt) {
        fprintf(stderr, "soak: cannot tokenize the prompt\n");
        goto out;
    }
    /* The first token of the prompt (BOS, or the first word) is kept at
     * every shift, as run's default keeps a BOS. */
    so.n_keep = 1;
    if (sy_session_create(m, &so, &k.s) != SY_OK) {
        fprintf(stderr, "soak: %s\n", sy_runtime_last_error(rt));
        goto out;
    }
    sy_generate_params gp;
    sy_generate_params_init(&gp);
    gp.temperature = 0.8f;
    gp.top_p = 0.95f;
    gp.seed = 42;
    printf("soak %s: %u tokens, context %u, KV %s, policy %s, RSS every %u tokens\n", argv[1],
           k.target, so.n_ctx, argv[5], argv[6], k.every);
    printf("start rss_kib %lu\n", rss_kib());
    k.t0 = now_s();
    double decode_ms = 0;
    uint32_t decode_tokens = 0;
    const int32_t *next = prompt;
    uint32_t n_next = n_prompt;
    while (k.tokens < k.target) {
        gp.n_predict = k.target - k.tokens;
        gp.seed++;
        sy_status st = sy_session_generate(k.s, next, n_next, &gp, on_token, &k);
        if (st != SY_OK) {
            fprintf(stderr, "soak: after %u tokens: %s\n", k.tokens, sy_session_last_error(k.s));
            goto out;
        }
        sy_metrics mt;
        sy_session_query_metrics(k.s, &mt);
        decode_ms += mt.decode_ms;
        decode_tokens += mt.decode_tokens;
        /* Ended by an end token: go on from the prompt's second token. */
        next = prompt + (n_prompt > 1);
        n_next = 1;
    }
    printf("done %u %u %.1f %.1f\n", k.tokens, k.shifts, now_s() - k.t0,
           decode_ms > 0 ? decode_tokens * 1e3 / decode_ms : 0.0);
    rc = 0;
out:
    free(prompt);
    sy_session_destroy(k.s);
    sy_model_close(m);
    sy_runtime_destroy(rt);
    return rc;
}
