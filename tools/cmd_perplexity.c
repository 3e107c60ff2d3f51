/* switchyard perplexity: perplexity of a model on a text file, computed in
 * chunks of --ctx tokens.  As the usual llama perplexity tool does, each
 * chunk starts from an empty context and only its second half is scored,
 * so every scored token sees at least ctx/2 tokens of history. */
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "cli.h"

static char *read_file(const char *path, size_t *out_len)
{
    FILE *f = fopen(path, "rb");
    if (!f)
        return NULL;
    size_t cap = 1 << 16, len = 0;
    char *buf = malloc(cap);
    while (buf) {
        size_t n = fread(buf + len, 1, cap - len, f);
        len += n;
        if (n == 0)
            break;
        if (len == cap) {
            char *nb = realloc(buf, cap * 2);
            if (!nb) {
                free(buf);
                buf = NULL;
                break;
            }
            buf = nb;
            cap *= 2;
        }
    }
    fclose(f);
    *out_len = len;
    return buf;
}

/* -log softmax(logits)[target], computed stably in double. */
static double token_nll(const float *logits, uint32_t n_vocab, int32_t target)
{
    double mx = logits[0];
    for (uint32_t i = 1; i < n_vocab; i++)
        mx = logits[i] > mx ? logits[i] : mx;
    double sum = 0;
    for (uint32_t i = 0; i < n_vocab; i++)
        sum += exp((double)logits[i] - mx);
    return -((double)logits[target] - mx - log(sum));
}

int sy_cli_perplexity(int argc, char **argv)
{
    const char *model = SY_CLI_DEFAULT_MODEL, *file = NULL, *device = NULL;
    uint32_t n_ctx = 512, max_chunks = 0;
    sy_dtype kv_type = SY_DTYPE_F16;
    for (int i = 1; i < argc; i++) {
        const char *a = argv[i], *v = i + 1 < argc ? argv[i + 1] : NULL;
        if (strcmp(a, "--help") == 0) {
            printf("usage: switchyard perplexity -m MODEL -f FILE [--ctx N] [--chunks N] "
                   "[--kv-type " SY_CLI_KV_TYPES "]\n"
                   "                             [--device NAME]\n"
                   "Prints the perplexity of MODEL on FILE, chunk by chunk, with the KV cache in\n"
                   "the type given (default f16).\n");
            return 0;
        }
        if (!v) {
            fprintf(stderr, "switchyard perplexity: '%s' needs a value\n", a);
            return 2;
        }
        i++;
        if (strcmp(a, "-m") == 0)
            model = v;
        else if (strcmp(a, "-f") == 0)
            file = v;
        else if (strcmp(a, "--device") == 0)
            device = v;
        else if (strcmp(a, "--ctx") == 0)
            n_ctx = (uint32_t)strtoul(v, NULL, 10);
        else if (strcmp(a, "--chunks") == 0)
            max_chunks = (uint32_t)strtoul(v, NULL, 10);
        else if (strcmp(a, "--kv-type") == 0) {
            if (!sy_cli_parse_kv_type(v, &kv_type)) {
                fprintf(stderr, "switchyard perplexity: --kv-type takes " SY_CLI_KV_TYPES
                                ", got '%s'\n", v);
                return 2;
            }
        } else {
            fprintf(stderr, "switchyard perplexity: unknown option '%s'\n", a);
            return 2;
        }
    }
    if (!file || n_ctx < 8) {
        fprintf(stderr, "switchyard perplexity: need -f FILE and --ctx of at least 8\n");
        return 2;
    }
    size_t text_len = 0;
    char *text = read_file(file, &text_len);
    if (!text) {
        fprintf(stderr, "switchyard perplexity: cannot read '%s'\n", file);
        return 1;
    }
    sy_runtime *rt = sy_cli_runtime_for(device);
    int rc = 1;
    sy_model *m = NULL;
    sy_session *s = NULL;
    int32_t *ids = NULL;
    float *logits = NULL;
    if (!rt)
        goto out_text;
    if (sy_model_open(rt, model, &m) != SY_OK) {
        fprintf(stderr, "switchyard perplexity: %s\n", sy_runtime_last_error(rt));
        goto out_rt;
    }
    sy_session_options so;
    sy_session_options_init(&so);
    so.n_ctx = n_ctx;
    so.kv_type = kv_type;
    /* The CPU alone until profiles exist: unmeasured devices are planned
     * from their own claims (see docs/scheduler.md). */
    if (!device)
        device = "cpu";
    so.devices = device;
    if (sy_session_create(m, &so, &s) != SY_OK) {
        fprintf(stderr, "switchyard perplexity: %s\n", sy_runtime_last_error(rt));
        goto out_model;
    }
    uint32_t n_ids = 0;
    sy_status st = sy_model_tokenize(m, text, text_len, true, false, NULL, 0, &n_ids);
    if ((st == SY_OK || st == SY_E_LIMIT) && n_ids > 0) {
        ids = malloc((size_t)n_ids * sizeof *ids);
        st = ids ? sy_model_tokenize(m, text, text_len, true, false, ids, n_ids, &n_ids)
                 : SY_E_NO_MEMORY;
    }
    if (st != SY_OK || n_ids < n_ctx) {
        fprintf(stderr, "switchyard perplexity: '%s' gives %u tokens, need at least one chunk of "
                        "%u\n", file, n_ids, n_ctx);
        goto out_session;
    }
    sy_model_info info;
    sy_model_query_info(m, &info);
    logits = malloc((size_t)n_ctx * info.n_vocab * sizeof *logits);
    if (!logits)
        goto out_session;
    uint32_t n_chunks = n_ids / n_ctx;
    if (max_chunks && n_chunks > max_chunks)
        n_chunks = max_chunks;
    double nll = 0, nll2 = 0;
    uint64_t count = 0;
    printf("perplexity of %s on %s: %u tokens, %u chunks of %u, KV cache %s\n", info.name, file,
           n_ids, n_chunks, n_ctx, sy_dtype_name(kv_type));
    for (uint32_t c = 0; c < n_chunks; c++) {
        sy_session_reset(s);
        const int32_t *chunk = ids + (size_t)c * n_ctx;
        st = sy_session_eval(s, chunk, n_ctx, true, logits);
        if (st != SY_OK) {
            fprintf(stderr, "switchyard perplexity: %s\n", sy_session_last_error(s));
            goto out_session;
        }
        for (uint32_t i = n_ctx / 2; i + 1 < n_ctx; i++) {
            double v = token_nll(logits + (size_t)i * info.n_vocab, info.n_vocab, chunk[i + 1]);
            nll += v;
            nll2 += v * v;
            count++;
        }
        printf("[%u] %.4f\n", c + 1, exp(nll / (double)count));
        fflush(stdout);
    }
    double mean = nll / (double)count;
    double var = nll2 / (double)count - mean * mean;
    double err = count > 1 && var > 0 ? sqrt(var / (double)(count - 1)) : 0;
    printf("Final estimate: PPL = %.4f +/- %.5f\n", exp(mean), exp(mean) * err);
    rc = 0;
out_session:
    free(logits);
    free(ids);
    sy_session_destroy(s);
out_model:
    sy_model_close(m);
out_rt:
    sy_runtime_destroy(rt);
out_text:
    free(text);
    return rc;
}
