/* The model half of the embedding API: open/close, info, tokenizer. */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "model_internal.h"
#include "runtime_internal.h"
#include "tokenizer.h"

sy_status sy__model_load(sy_runtime *rt, const char *path, sy_model **out_model, char *err,
                         size_t err_size);

static void log_chat_format(sy_model *m, const char *note)
{
    sy_runtime_log(m->rt, SY_LOG_INFO, "%s: chat format %s (%s)", m->path,
                   sy_chat_kind_name(m->chat.kind), note);
}

sy_status sy__model_load_tokenizer(sy_model *m, char *err, size_t err_size)
{
    char terr[512] = "";
    sy_status st = sy_tokenizer_create_from_gguf(m->gguf, NULL, &m->tok, terr, sizeof terr);
    if (st != SY_OK) {
        snprintf(err, err_size, "%s: tokenizer: %s", m->path, terr);
        return st;
    }
    const char *tmpl = NULL;
    if (sy_gguf_get_str(m->gguf, "tokenizer.chat_template", &tmpl, NULL) != SY_OK)
        tmpl = NULL;
    st = sy_chat_format_detect(tmpl, m->hp.arch_name, &m->chat);
    if (st != SY_OK && st != SY_E_LIMIT) {
        snprintf(err, err_size, "%s: chat template: %s", m->path, m->chat.note);
        return st;
    }
    log_chat_format(m, m->chat.note);
    if (sy_tokenizer_n_tokens(m->tok) < m->hp.n_vocab) {
        snprintf(err, err_size, "%s: tokenizer has %u tokens, the embedding table %u rows",
                 m->path, sy_tokenizer_n_tokens(m->tok), m->hp.n_vocab);
        return SY_E_FORMAT;
    }
    return SY_OK;
}

sy_status sy_model_open(sy_runtime *rt, const char *path, sy_model **out_model)
{
    if (!out_model)
        return SY_E_INVALID_ARG;
    *out_model = NULL;
    if (!rt || !path)
        return SY_E_INVALID_ARG;
    char err[1024] = "";
    sy_status st = sy__model_load(rt, path, out_model, err, sizeof err);
    if (st != SY_OK)
        sy__runtime_set_error(rt, "%s", err[0] ? err : sy_status_str(st));
    return st;
}

void sy_model_close(sy_model *m)
{
    if (!m)
        return;
    sy_tokenizer_destroy(m->tok);
    free(m->layers);
    sy_gguf_close(m->gguf);
    free(m->path);
    free(m);
}

sy_status sy_model_query_info(const sy_model *m, sy_model_info *out_info)
{
    if (!m || !out_info)
        return SY_E_INVALID_ARG;
    const sy_hparams *hp = &m->hp;
    *out_info = (sy_model_info){
        .arch = hp->arch_name, .name = m->name,
        .n_layer = hp->n_layer, .n_embd = hp->n_embd, .n_ff = hp->n_ff,
        .n_head = hp->n_head, .n_head_kv = hp->n_head_kv, .head_dim = hp->head_dim,
        .n_vocab = hp->n_vocab, .n_ctx_train = hp->n_ctx_train,
        .n_params = m->n_params, .weight_bytes = m->weight_bytes,
        .file_bytes = sy_gguf_file_size(m->gguf), .load_ms = m->load_ms,
    };
    return SY_OK;
}

sy_status sy_model_tokenize(const sy_model *m, const char *text, size_t len, bool add_special,
                            bool parse_special, int32_t *out_ids, uint32_t cap, uint32_t *out_n)
{
    if (!m || (!text && len) || !out_n)
        return SY_E_INVALID_ARG;
    sy_status st = sy_tokenizer_encode(m->tok, text ? text : "", len, add_special, parse_special,
                                       out_ids, cap, out_n);
    if (st != SY_OK && st != SY_E_LIMIT)
        sy__runtime_set_error(m->rt, "tokenize: %s", sy_status_str(st));
    return st;
}

sy_status sy_model_detokenize(const sy_model *m, const int32_t *ids, uint32_t n, char *out,
                              size_t cap, size_t *out_len)
{
    if (!m || (!ids && n) || !out_len)
        return SY_E_INVALID_ARG;
    return sy_tokenizer_decode(m->tok, ids, n, out, cap, out_len);
}

sy_status sy_model_format_chat(const sy_model *m, const char *system, const char *user,
                               char *out, size_t cap, size_t *out_len)
{
    if (!m || !user || !out_len)
        return SY_E_INVALID_ARG;
    sy_chat_message msgs[2];
    size_t n = 0;
    if (system)
        msgs[n++] = (sy_chat_message){"system", system};
    msgs[n++] = (sy_chat_message){"user", user};
    sy_chat_error cerr;
    sy_status st = sy_chat_format_prompt(&m->chat, msgs, n, true, out, cap, out_len, &cerr);
    if (st != SY_OK && st != SY_E_LIMIT)
        sy__runtime_set_error(m->rt, "chat prompt: %s", cerr.msg);
    return st;
}

bool sy_model_is_end_token(const sy_model *m, int32_t token)
{
    return m && sy_tokenizer_is_eog(m->tok, token);
}

const char *sy_model_chat_stop_text(const sy_model *m)
{
    return m && sy_chat_stop_is_text(&m->chat) ? sy_chat_end_of_turn(&m->chat) : "";
}
