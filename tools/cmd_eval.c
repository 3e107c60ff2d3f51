/* switchyard eval: logits of every position of a token sequence, written
 * as raw little-endian float32 (n_tokens x n_vocab) — what the reference
 * forward pass in tests/reference/ compares against.  --split K evaluates
 * the first K tokens as one batch and the rest one token at a time, so
 * both the prefill and the decode path (KV cache) are exercised. */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "cli.h"

static int parse_tokens(const char *list, int32_t **out_ids, uint32_t *out_n)
{
    uint32_t cap = 16, n = 0;
    int32_t *ids = malloc(cap * sizeof *ids);
    const char *p = list;
    while (ids && *p) {
        char *end = NULL;
        long v = strtol(p, &end, 10);
        if (end == p || v < 0 || v > INT32_MAX) {
            free(ids);
            return -1;
        }
        if (n == cap) {
            int32_t *nb = realloc(ids, 2 * cap * sizeof *ids);
            if (!nb) {
                free(ids);
                return -1;
            }
            ids = nb;
            cap *= 2;
        }
        ids[n++] = (int32_t)v;
        p = *end == ',' ? end + 1 : end;
        if (*end && *end != ',') {
            free(ids);
            return -1;
        }
    }
    *out_ids = ids;
    *out_n = n;
    return ids && n ? 0 : -1;
}

int sy_cli_eval(int argc, char **argv)
{
    const char *model = SY_CLI_DEFAULT_MODEL, *tokens = NULL, *out = NULL, *device = NULL;
    const char *prompt = NULL;
    uint32_t split = 0;
    sy_session_options so;
    sy_session_options_init(&so);
    for (int i = 1; i < argc; i++) {
        const char *a = argv[i], *v = i + 1 < argc ? argv[i + 1] : NULL;
        if (strcmp(a, "--help") == 0) {
            printf("usage: switchyard eval -m MODEL (--tokens ID,ID,... | --prompt TEXT) -o FILE "
                   "[--split K] [--kv-type " SY_CLI_KV_TYPES "] [--device NAME]\nWrites the logits of every "
                   "position as raw float32 (n_tokens x n_vocab) and prints the token ids.\n");
            return 0;
        }
        if (!v) {
            fprintf(stderr, "switchyard eval: '%s' needs a value\n", a);
            return 2;
        }
        i++;
        if (strcmp(a, "-m") == 0)
            model = v;
        else if (strcmp(a, "--tokens") == 0)
            tokens = v;
        else if (strcmp(a, "--prompt") == 0)
            prompt = v;
        else if (strcmp(a, "-o") == 0)
            out = v;
        else if (strcmp(a, "--device") == 0)
            device = v;
        else if (strcmp(a, "--split") == 0)
            split = (uint32_t)strtoul(v, NULL, 10);
        else if (strcmp(a, "--kv-type") == 0) {
            if (!sy_cli_parse_kv_type(v, &so.kv_type)) {
                fprintf(stderr, "switchyard eval: --kv-type takes " SY_CLI_KV_TYPES ", got '%s'\n",
                        v);
                return 2;
            }
        } else {
            fprintf(stderr, "switchyard eval: unknown option '%s %s'\n", a, v);
            return 2;
        }
    }
    int32_t *ids = NULL;
    uint32_t n = 0;
    if (!out || (!tokens == !prompt) || (tokens && parse_tokens(tokens, &ids, &n) != 0)) {
        fprintf(stderr, "switchyard eval: need -o FILE and either --tokens (comma-separated "
                        "ids) or --prompt\n");
        return 2;
    }
    /* The CPU alone until profiles exist: unmeasured devices are planned
     * from their own claims (see docs/scheduler.md). */
    if (!device)
        device = "cpu";
    so.devices = device;
    sy_runtime *rt = sy_cli_runtime_for(device);
    int rc = 1;
    sy_model *m = NULL;
    sy_session *s = NULL;
    float *logits = NULL;
    FILE *f = NULL;
    if (!rt)
        goto out_ids;
    if (sy_model_open(rt, model, &m) != SY_OK) {
        fprintf(stderr, "switchyard eval: %s\n", sy_runtime_last_error(rt));
        goto out_model;
    }
    if (prompt) {
        sy_status ts = sy_model_tokenize(m, prompt, strlen(prompt), true, false, NULL, 0, &n);
        if ((ts == SY_OK || ts == SY_E_LIMIT) && n > 0 && (ids = malloc(n * sizeof *ids)))
            ts = sy_model_tokenize(m, prompt, strlen(prompt), true, false, ids, n, &n);
        if (ts != SY_OK || n == 0) {
            fprintf(stderr, "switchyard eval: cannot tokenize the prompt\n");
            goto out_model;
        }
    }
    so.n_ctx = n;
    if (sy_session_create(m, &so, &s) != SY_OK) {
        fprintf(stderr, "switchyard eval: %s\n", sy_runtime_last_error(rt));
        goto out_model;
    }
    sy_model_info info;
    sy_model_query_info(m, &info);
    logits = malloc((size_t)n * info.n_vocab * sizeof *logits);
    if (!logits)
        goto out_model;
    uint32_t first = split && split < n ? split : n;
    sy_status st = sy_session_eval(s, ids, first, true, logits);
    for (uint32_t t = first; t < n && st == SY_OK; t++)
        st = sy_session_eval(s, ids + t, 1, true, logits + (size_t)t * info.n_vocab);
    if (st != SY_OK) {
        fprintf(stderr, "switchyard eval: %s\n", sy_session_last_error(s));
        goto out_model;
    }
    f = fopen(out, "wb");
    if (!f || fwrite(logits, sizeof *logits, (size_t)n * info.n_vocab, f) !=
                  (size_t)n * info.n_vocab) {
        fprintf(stderr, "switchyard eval: cannot write '%s'\n", out);
        goto out_model;
    }
    printf("tokens:");
    for (uint32_t t = 0; t < n; t++)
        printf("%s%d", t ? "," : " ", ids[t]);
    printf("\n%u tokens x %u vocab -> %s\n", n, info.n_vocab, out);
    rc = 0;
out_model:
    if (f && fclose(f) != 0)
        rc = 1;
    free(logits);
    sy_session_destroy(s);
    sy_model_close(m);
    sy_runtime_destroy(rt);
out_ids:
    free(ids);
    return rc;
}
