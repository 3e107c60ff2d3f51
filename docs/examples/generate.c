/* A complete program embedding Switchyard: open a model, chat, stream the
 * answer, print the metrics.  Built and run by the test suite.
 *
 *   cc generate.c $(pkg-config --cflags --libs switchyard) -o generate
 *   ./generate models/SmolLM2-135M-Instruct.Q4_1.gguf "Why is the sky blue?"
 */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include <switchyard/switchyard.h>

static bool print_token(void *user, int32_t token, const char *text, size_t len)
{
    (void)token;
    size_t *total = user;
    *total += len;
    fwrite(text, 1, len, stdout);
    fflush(stdout);
    return true; /* false would stop the generation here */
}

int main(int argc, char **argv)
{
    if (argc < 3) {
        fprintf(stderr, "usage: %s MODEL.gguf PROMPT [N_TOKENS]\n", argv[0]);
        return 2;
    }
    int rc = 1;
    sy_runtime *rt = NULL;
    sy_model *model = NULL;
    sy_session *session = NULL;
    char *prompt = NULL;
    int32_t *ids = NULL;

    if (sy_runtime_create(NULL, &rt) != SY_OK) {
        fprintf(stderr, "cannot create the runtime\n");
        return 1;
    }
    if (sy_model_open(rt, argv[1], &model) != SY_OK) {
        fprintf(stderr, "%s\n", sy_runtime_last_error(rt));
        goto out;
    }
    sy_session_options so;
    sy_session_options_init(&so);
    so.n_ctx = 1024;
    if (sy_session_create(model, &so, &session) != SY_OK) {
        fprintf(stderr, "%s\n", sy_runtime_last_error(rt));
        goto out;
    }

    /* The chat template turns one user message into the model's format;
     * a first call with no buffer asks for the length. */
    size_t len = 0;
    sy_status st = sy_model_format_chat(model, NULL, argv[2], NULL, 0, &len);
    if (st != SY_OK && st != SY_E_LIMIT)
        goto out;
    prompt = malloc(len + 1);
    if (!prompt || sy_model_format_chat(model, NULL, argv[2], prompt, len + 1, &len) != SY_OK)
        goto out;

    uint32_t n_ids = 0;
    st = sy_model_tokenize(model, prompt, len, true, true, NULL, 0, &n_ids);
    if (st != SY_OK && st != SY_E_LIMIT)
        goto out;
    ids = malloc(n_ids * sizeof *ids);
    if (!ids || sy_model_tokenize(model, prompt, len, true, true, ids, n_ids, &n_ids) != SY_OK)
        goto out;

    sy_generate_params gp;
    sy_generate_params_init(&gp); /* greedy, 128 tokens */
    gp.n_predict = argc > 3 ? (uint32_t)atoi(argv[3]) : 64;
    size_t total = 0;
    if (sy_session_generate(session, ids, n_ids, &gp, print_token, &total) != SY_OK) {
        fprintf(stderr, "\n%s\n", sy_session_last_error(session));
        goto out;
    }
    sy_metrics mt;
    sy_session_query_metrics(session, &mt);
    printf("\n-- %zu bytes; TTFT %.1f ms, prefill %.1f tok/s, decode %.1f tok/s, peak RSS %.1f MiB\n",
           total, mt.ttft_ms, mt.prefill_tok_s, mt.decode_tok_s,
           (double)mt.peak_rss_bytes / (1 << 20));
    rc = total > 0 ? 0 : 1;
out:
    free(ids);
    free(prompt);
    sy_session_destroy(session);
    sy_model_close(model);
    sy_runtime_destroy(rt);
    return rc;
}
