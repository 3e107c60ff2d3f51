/* Builds a tokenizer from the tokenizer.ggml.* keys of a GGUF file. */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "gguf.h"
#include "tokenizer.h"
#include "tokenizer_internal.h"

/* Reads an optional id key; -1 when absent or stored as UINT32_MAX
 * (some converters write that for "none"). */
static sy_status gguf_tok_id(sy_gguf *g, const char *key, int32_t *out_id, char *err,
                             size_t err_size)
{
    *out_id = -1;
    if (!sy_gguf_has_key(g, key))
        return SY_OK;
    int64_t v;
    sy_status st = sy_gguf_get_i64(g, key, &v);
    if (st != SY_OK) {
        snprintf(err, err_size, "%s", sy_gguf_last_error(g));
        return SY_E_FORMAT;
    }
    if (v == (int64_t)UINT32_MAX || v == -1)
        return SY_OK;
    if (v < 0 || v > INT32_MAX) {
        snprintf(err, err_size, "%s: %s = %lld is not a token id", sy_gguf_path(g), key,
                 (long long)v);
        return SY_E_FORMAT;
    }
    *out_id = (int32_t)v;
    return SY_OK;
}

static sy_status gguf_tok_bool(sy_gguf *g, const char *key, bool dflt, bool *out_value,
                               char *err, size_t err_size)
{
    *out_value = dflt;
    if (!sy_gguf_has_key(g, key))
        return SY_OK;
    if (sy_gguf_get_bool(g, key, out_value) != SY_OK) {
        snprintf(err, err_size, "%s", sy_gguf_last_error(g));
        return SY_E_FORMAT;
    }
    return SY_OK;
}

/* Reads an array of strings into |*out_ptrs| / |*out_lens| (pointers into
 * the mapping).  |*out_n| is 0 when the key is absent and not |required|. */
static sy_status gguf_tok_strs(sy_gguf *g, const char *key, bool required, const char ***out_ptrs,
                               uint32_t **out_lens, uint32_t *out_n, char *err, size_t err_size)
{
    *out_ptrs = NULL;
    *out_lens = NULL;
    *out_n = 0;
    if (!required && !sy_gguf_has_key(g, key))
        return SY_OK;
    sy_gguf_value arr;
    if (sy_gguf_get_arr(g, key, SY_GGUF_TYPE_STRING, &arr) != SY_OK) {
        snprintf(err, err_size, "%s", sy_gguf_last_error(g));
        return SY_E_FORMAT;
    }
    if (arr.count > INT32_MAX) {
        snprintf(err, err_size, "%s: %s has %llu entries", sy_gguf_path(g), key,
                 (unsigned long long)arr.count);
        return SY_E_FORMAT;
    }
    uint32_t n = (uint32_t)arr.count;
    const char **ptrs = malloc((n ? n : 1) * sizeof *ptrs);
    uint32_t *lens = malloc((n ? n : 1) * sizeof *lens);
    if (!ptrs || !lens) {
        free(ptrs);
        free(lens);
        return SY_E_NO_MEMORY;
    }
    for (uint32_t i = 0; i < n; i++) {
        sy_gguf_str s;
        if (sy_gguf_arr_str(&arr, i, &s) != SY_OK || s.len >= SY_TOKENIZER_MAX_TOKEN_LEN) {
            snprintf(err, err_size, "%s: %s[%u] is not a string of at most %u bytes",
                     sy_gguf_path(g), key, i, SY_TOKENIZER_MAX_TOKEN_LEN - 1);
            free(ptrs);
            free(lens);
            return SY_E_FORMAT;
        }
        ptrs[i] = s.ptr;
        lens[i] = (uint32_t)s.len;
    }
    *out_ptrs = ptrs;
    *out_lens = lens;
    *out_n = n;
    return SY_OK;
}

/* Reads an optional array of |n| fixed-size |elem_type| values into a new
 * buffer (*out stays NULL when absent). */
static sy_status gguf_tok_nums(sy_gguf *g, const char *key, uint32_t elem_type, uint32_t n,
                               void **out, char *err, size_t err_size)
{
    *out = NULL;
    if (!sy_gguf_has_key(g, key))
        return SY_OK;
    sy_gguf_value arr;
    if (sy_gguf_get_arr(g, key, elem_type, &arr) != SY_OK) {
        snprintf(err, err_size, "%s", sy_gguf_last_error(g));
        return SY_E_FORMAT;
    }
    if (arr.count != n) {
        snprintf(err, err_size, "%s: %s has %llu entries, tokenizer.ggml.tokens has %u",
                 sy_gguf_path(g), key, (unsigned long long)arr.count, n);
        return SY_E_FORMAT;
    }
    void *buf = malloc((size_t)(n ? n : 1) * 4);
    if (!buf)
        return SY_E_NO_MEMORY;
    if (sy_gguf_arr_read(&arr, elem_type, 0, n, buf) != SY_OK) {
        free(buf);
        snprintf(err, err_size, "%s: cannot read %s", sy_gguf_path(g), key);
        return SY_E_FORMAT;
    }
    *out = buf;
    return SY_OK;
}

sy_status sy_tokenizer_create_from_gguf(struct sy_gguf *g, const char *pre,
                                        sy_tokenizer **out_tok, char *err, size_t err_size)
{
    char local_err[256];
    if (!err || !err_size) {
        err = local_err;
        err_size = sizeof local_err;
    }
    err[0] = 0;
    if (!out_tok)
        return SY_E_INVALID_ARG;
    *out_tok = NULL;
    if (!g)
        return SY_E_INVALID_ARG;
    sy_tokenizer_desc d;
    sy_tokenizer_desc_init(&d);
    const char **tokens = NULL, **merges = NULL;
    uint32_t *token_lens = NULL, *merge_lens = NULL, n_tokens = 0, n_merges = 0;
    void *scores = NULL, *types = NULL;
    const char *model = NULL, *file_pre = NULL;
    sy_status st = SY_E_FORMAT;
    if (sy_gguf_get_str(g, "tokenizer.ggml.model", &model, NULL) != SY_OK) {
        snprintf(err, err_size, "%s", sy_gguf_last_error(g));
        goto out_free;
    }
    if (sy_gguf_has_key(g, "tokenizer.ggml.pre") &&
        sy_gguf_get_str(g, "tokenizer.ggml.pre", &file_pre, NULL) != SY_OK) {
        snprintf(err, err_size, "%s", sy_gguf_last_error(g));
        goto out_free;
    }
    bool spm = strcmp(model, "llama") == 0;
    const char *use_pre = pre ? pre : file_pre;
    sy__pretok pre_kind = SY__PRE_DEFAULT;
    bool bos_default = spm || (strcmp(model, "gpt2") == 0 &&
                               sy__pretok_from_name(use_pre, &pre_kind) && pre_kind == SY__PRE_LLAMA3);
    if ((st = gguf_tok_strs(g, "tokenizer.ggml.tokens", true, &tokens, &token_lens, &n_tokens, err,
                            err_size)) != SY_OK ||
        (st = gguf_tok_strs(g, "tokenizer.ggml.merges", false, &merges, &merge_lens, &n_merges,
                            err, err_size)) != SY_OK ||
        (st = gguf_tok_nums(g, "tokenizer.ggml.scores", SY_GGUF_TYPE_FLOAT32, n_tokens, &scores,
                            err, err_size)) != SY_OK ||
        (st = gguf_tok_nums(g, "tokenizer.ggml.token_type", SY_GGUF_TYPE_INT32, n_tokens, &types,
                            err, err_size)) != SY_OK)
        goto out_free;
    d.model = model;
    d.pre = use_pre;
    d.n_tokens = n_tokens;
    d.tokens = tokens;
    d.token_lengths = token_lens;
    d.scores = scores;
    d.token_types = types;
    d.n_merges = n_merges;
    d.merges = merges;
    d.merge_lengths = merge_lens;
    if ((st = gguf_tok_id(g, "tokenizer.ggml.bos_token_id", &d.bos, err, err_size)) != SY_OK ||
        (st = gguf_tok_id(g, "tokenizer.ggml.eos_token_id", &d.eos, err, err_size)) != SY_OK ||
        (st = gguf_tok_id(g, "tokenizer.ggml.eot_token_id", &d.eot, err, err_size)) != SY_OK ||
        (st = gguf_tok_id(g, "tokenizer.ggml.eom_token_id", &d.eom, err, err_size)) != SY_OK ||
        (st = gguf_tok_id(g, "tokenizer.ggml.unknown_token_id", &d.unk, err, err_size)) != SY_OK ||
        (st = gguf_tok_id(g, "tokenizer.ggml.padding_token_id", &d.pad, err, err_size)) != SY_OK ||
        (st = gguf_tok_bool(g, "tokenizer.ggml.add_bos_token", bos_default, &d.add_bos, err, err_size)) != SY_OK ||
        (st = gguf_tok_bool(g, "tokenizer.ggml.add_eos_token", false, &d.add_eos, err, err_size)) != SY_OK ||
        (st = gguf_tok_bool(g, "tokenizer.ggml.add_space_prefix", spm, &d.add_space_prefix, err,
                            err_size)) != SY_OK)
        goto out_free;
    st = sy_tokenizer_create(&d, out_tok, err, err_size);
    if (st != SY_OK) {
        /* Prefix the file's name to the tokenizer's message. */
        char msg[512];
        snprintf(msg, sizeof msg, "%s", err);
        snprintf(err, err_size, "%s: tokenizer: %s", sy_gguf_path(g), msg);
    }
out_free:
    free(tokens);
    free(token_lens);
    free(merges);
    free(merge_lens);
    free(scores);
    free(types);
    return st;
}
