/* Tokenizer: creation and validation of the description, the text -> id
 * and merge maps, and queries.  Encoding is in tokenizer_encode.c (special
 * tokens), tokenizer_bpe.c, tokenizer_spm.c and tokenizer_pretok.c;
 * decoding in tokenizer_decode.c. */
#include "tokenizer_internal.h"

#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "unicode.h"

/* Texts that end a turn or the text, in the order eot is chosen by. */
static const char *const tok_eog_texts[] = {
    "<|eot_id|>", "<|im_end|>", "<end_of_turn>", "<|end|>", "<EOT>", "<|endoftext|>", "<|eom_id|>",
};
#define TOK_N_EOT_TEXTS 6u /* the first six choose eot; <|eom_id|> does not */

static void tok_err(char *err, size_t err_size, const char *fmt, ...)
{
    if (!err || !err_size)
        return;
    va_list ap;
    va_start(ap, fmt);
    vsnprintf(err, err_size, fmt, ap);
    va_end(ap);
}

/* Writes at most 40 bytes of |s| for a message, escaping non-printables. */
static const char *tok_quote(const char *s, size_t len, char *buf, size_t size)
{
    size_t o = 0;
    for (size_t i = 0; i < len && o + 5 < size; i++) {
        unsigned char c = (unsigned char)s[i];
        if (i == 40) {
            memcpy(buf + o, "...", 3);
            o += 3;
            break;
        }
        if (c >= 0x20 && c != 0x7f && c != '\'' && c != '\\') {
            buf[o++] = (char)c;
        } else {
            snprintf(buf + o, size - o, "\\x%02x", c);
            o += 4;
        }
    }
    buf[o] = 0;
    return buf;
}

/* --------------------------------------------------------------- maps */

static uint64_t tok_hash(const void *s, size_t len)
{
    /* FNV-1a, then a final mix so that the low bits used as slot index
     * depend on every byte. */
    const uint8_t *p = s;
    uint64_t h = 0xcbf29ce484222325ull;
    for (size_t i = 0; i < len; i++) {
        h ^= p[i];
        h *= 0x100000001b3ull;
    }
    h ^= h >> 33;
    h *= 0xff51afd7ed558ccdull;
    h ^= h >> 33;
    return h;
}

static uint64_t tok_hash_pair(uint64_t key)
{
    key ^= key >> 31;
    key *= 0x9e3779b97f4a7c15ull;
    key ^= key >> 29;
    return key;
}

/* Smallest power of two >= 2n (at least 16). */
static uint32_t tok_table_size(uint32_t n)
{
    uint32_t size = 16;
    while (size < 2 * (uint64_t)n && size < (1u << 31))
        size *= 2;
    return size;
}

int32_t sy__tok_lookup(const sy_tokenizer *tok, const void *s, size_t len)
{
    uint64_t h = tok_hash(s, len);
    uint64_t tag = h & 0xffffffff00000000ull;
    uint32_t i = (uint32_t)h & tok->map_mask;
    for (;;) {
        uint64_t slot = tok->map[i];
        if (!slot)
            return -1;
        if ((slot & 0xffffffff00000000ull) == tag) {
            uint32_t id = (uint32_t)slot - 1;
            if (tok->text_len[id] == len && memcmp(tok->text + tok->text_off[id], s, len) == 0)
                return (int32_t)id;
        }
        i = (i + 1) & tok->map_mask;
    }
}

/* Inserts |id|; an id already holding the same text is replaced, so the
 * last of duplicate texts wins (as llama.cpp's map does). */
static void tok_map_insert(sy_tokenizer *tok, uint32_t id)
{
    const char *s = tok->text + tok->text_off[id];
    uint32_t len = tok->text_len[id];
    uint64_t h = tok_hash(s, len);
    uint64_t tag = h & 0xffffffff00000000ull;
    uint32_t i = (uint32_t)h & tok->map_mask;
    for (;;) {
        uint64_t slot = tok->map[i];
        if (!slot)
            break;
        uint32_t o = (uint32_t)slot - 1;
        if ((slot & 0xffffffff00000000ull) == tag && tok->text_len[o] == len &&
            memcmp(tok->text + tok->text_off[o], s, len) == 0)
            break;
        i = (i + 1) & tok->map_mask;
    }
    tok->map[i] = tag | (id + 1u);
}

bool sy__tok_merge_find(const sy_tokenizer *tok, int32_t left, int32_t right,
                        uint32_t *out_rank, int32_t *out_result)
{
    if (!tok->n_merges || left < 0 || right < 0)
        return false;
    uint64_t key = ((uint64_t)(uint32_t)left << 32) | (uint32_t)right;
    uint32_t i = (uint32_t)tok_hash_pair(key) & tok->merge_mask;
    for (;;) {
        uint64_t k = tok->merge_keys[i];
        if (k == UINT64_MAX)
            return false;
        if (k == key) {
            *out_rank = tok->merge_rank[i];
            *out_result = tok->merge_result[i];
            return true;
        }
        i = (i + 1) & tok->merge_mask;
    }
}

/* --------------------------------------------------------------- create */

void sy_tokenizer_desc_init(sy_tokenizer_desc *desc)
{
    memset(desc, 0, sizeof *desc);
    desc->bos = desc->eos = desc->eot = desc->eom = desc->unk = desc->pad = -1;
}

static sy_status tok_check_id(const char *what, int32_t id, uint32_t n, char *err, size_t err_size)
{
    if (id >= -1 && (id < 0 || (uint32_t)id < n))
        return SY_OK;
    tok_err(err, err_size, "%s %d is outside the vocabulary of %u tokens", what, id, n);
    return SY_E_FORMAT;
}

static sy_status tok_copy_texts(sy_tokenizer *tok, const sy_tokenizer_desc *d, char *err,
                                size_t err_size)
{
    uint32_t n = d->n_tokens;
    uint64_t total = 0;
    for (uint32_t i = 0; i < n; i++) {
        if (!d->tokens[i]) {
            tok_err(err, err_size, "token %u has no text", i);
            return SY_E_FORMAT;
        }
        size_t len = d->token_lengths ? d->token_lengths[i] : strlen(d->tokens[i]);
        if (len >= SY_TOKENIZER_MAX_TOKEN_LEN) {
            tok_err(err, err_size, "token %u is %zu bytes long (at most %u)", i, len,
                    SY_TOKENIZER_MAX_TOKEN_LEN - 1);
            return SY_E_FORMAT;
        }
        tok->text_len[i] = (uint32_t)len;
        total += len + 1;
    }
    if (total > UINT32_MAX) {
        tok_err(err, err_size, "token texts add up to %llu bytes (at most 4 GiB)",
                (unsigned long long)total);
        return SY_E_LIMIT;
    }
    tok->text = malloc(total ? total : 1);
    if (!tok->text)
        return SY_E_NO_MEMORY;
    uint32_t off = 0;
    for (uint32_t i = 0; i < n; i++) {
        tok->text_off[i] = off;
        memcpy(tok->text + off, d->tokens[i], tok->text_len[i]);
        off += tok->text_len[i];
        tok->text[off++] = 0;
    }
    return SY_OK;
}

bool sy__tok_is_byte_text(const char *s, uint32_t len, uint8_t *out_byte)
{
    static const char hex[] = "0123456789ABCDEF";
    if (len != 6 || memcmp(s, "<0x", 3) != 0 || s[5] != '>')
        return false;
    const char *h = strchr(hex, s[3]), *l = strchr(hex, s[4]);
    if (!h || !l || !s[3] || !s[4])
        return false;
    *out_byte = (uint8_t)(((h - hex) << 4) | (l - hex));
    return true;
}

static sy_status tok_set_types(sy_tokenizer *tok, const sy_tokenizer_desc *d, char *err,
                               size_t err_size)
{
    uint32_t n = d->n_tokens;
    for (uint32_t i = 0; i < n; i++) {
        if (d->token_types) {
            int32_t t = d->token_types[i];
            if (t < SY_TOKEN_UNDEFINED || t > SY_TOKEN_BYTE) {
                tok_err(err, err_size, "token %u has type %d (types are 0..6)", i, t);
                return SY_E_FORMAT;
            }
            tok->types[i] = (uint8_t)t;
            continue;
        }
        uint8_t b;
        tok->types[i] = SY_TOKEN_NORMAL;
        if (tok->model == SY__TOK_SPM && sy__tok_is_byte_text(tok->text + tok->text_off[i], tok->text_len[i], &b))
            tok->types[i] = SY_TOKEN_BYTE;
    }
    if (!d->token_types) {
        const int32_t ctl[] = {d->bos, d->eos, d->eot, d->eom, d->pad};
        for (size_t k = 0; k < sizeof ctl / sizeof ctl[0]; k++)
            if (ctl[k] >= 0)
                tok->types[ctl[k]] = SY_TOKEN_CONTROL;
        if (d->unk >= 0)
            tok->types[d->unk] = SY_TOKEN_UNKNOWN;
    }
    return SY_OK;
}

static sy_status tok_build_map(sy_tokenizer *tok)
{
    uint32_t size = tok_table_size(tok->n_tokens);
    tok->map = calloc(size, sizeof *tok->map);
    if (!tok->map)
        return SY_E_NO_MEMORY;
    tok->map_mask = size - 1;
    for (uint32_t i = 0; i < tok->n_tokens; i++)
        if (tok->text_len[i])
            tok_map_insert(tok, i);
    return SY_OK;
}

static sy_status tok_build_merges(sy_tokenizer *tok, const sy_tokenizer_desc *d, char *err,
                                  size_t err_size)
{
    uint32_t n = d->n_merges;
    if (!n)
        return SY_OK;
    if (!d->merges) {
        tok_err(err, err_size, "%u merges but no merge texts", n);
        return SY_E_INVALID_ARG;
    }
    uint32_t size = tok_table_size(n);
    tok->merge_keys = malloc((size_t)size * sizeof *tok->merge_keys);
    tok->merge_rank = malloc((size_t)size * sizeof *tok->merge_rank);
    tok->merge_result = malloc((size_t)size * sizeof *tok->merge_result);
    char *cat = malloc(2u * SY_TOKENIZER_MAX_TOKEN_LEN);
    sy_status st = SY_E_NO_MEMORY;
    if (!tok->merge_keys || !tok->merge_rank || !tok->merge_result || !cat)
        goto out_free_cat;
    memset(tok->merge_keys, 0xff, (size_t)size * sizeof *tok->merge_keys);
    tok->merge_mask = size - 1;
    tok->n_merges = n;
    char q[200];
    st = SY_E_FORMAT;
    for (uint32_t r = 0; r < n; r++) {
        const char *m = d->merges[r];
        if (!m) {
            tok_err(err, err_size, "merge %u has no text", r);
            goto out_free_cat;
        }
        size_t len = d->merge_lengths ? d->merge_lengths[r] : strlen(m);
        const char *sp = len > 1 ? memchr(m + 1, ' ', len - 1) : NULL;
        if (!sp) {
            tok_err(err, err_size, "merge %u '%s' is not two tokens separated by a space", r,
                    tok_quote(m, len, q, sizeof q));
            goto out_free_cat;
        }
        size_t ll = (size_t)(sp - m), rl = len - ll - 1;
        int32_t left = sy__tok_lookup(tok, m, ll), right = sy__tok_lookup(tok, sp + 1, rl);
        if (left < 0 || right < 0) {
            char q2[200];
            tok_err(err, err_size, "merge %u '%s': '%s' is not a token", r,
                    tok_quote(m, len, q, sizeof q),
                    left < 0 ? tok_quote(m, ll, q2, sizeof q2) : tok_quote(sp + 1, rl, q2, sizeof q2));
            goto out_free_cat;
        }
        memcpy(cat, m, ll);
        memcpy(cat + ll, sp + 1, rl);
        int32_t result = sy__tok_lookup(tok, cat, ll + rl);
        if (result < 0) {
            tok_err(err, err_size, "merge %u '%s': the merged text is not a token", r,
                    tok_quote(m, len, q, sizeof q));
            goto out_free_cat;
        }
        uint64_t key = ((uint64_t)(uint32_t)left << 32) | (uint32_t)right;
        uint32_t i = (uint32_t)tok_hash_pair(key) & tok->merge_mask;
        while (tok->merge_keys[i] != UINT64_MAX && tok->merge_keys[i] != key)
            i = (i + 1) & tok->merge_mask;
        if (tok->merge_keys[i] == key)
            continue; /* a duplicate keeps its first (best) rank */
        tok->merge_keys[i] = key;
        tok->merge_rank[i] = r;
        tok->merge_result[i] = result;
    }
    st = SY_OK;
out_free_cat:
    free(cat);
    return st;
}

/* Orders special tokens by their sort keys (longer first, then lower id). */
static int tok_cmp_special(const void *a, const void *b)
{
    const int64_t *x = a, *y = b;
    return (*x > *y) - (*x < *y);
}

static sy_status tok_trie_add(sy_tokenizer *tok, const uint8_t *s, uint32_t len, int32_t order,
                              uint32_t *cap)
{
    uint32_t node = 0;
    for (uint32_t i = 0; i < len; i++) {
        uint32_t c = tok->trie[node].child, last = 0;
        while (c && tok->trie[c].byte != s[i]) {
            last = c;
            c = tok->trie[c].sibling;
        }
        if (!c) {
            if (tok->n_trie == *cap)
                return SY_E_INTERNAL; /* capacity is the total text length + 1 */
            c = tok->n_trie++;
            tok->trie[c] = (sy__tok_trie_node){0, 0, -1, s[i]};
            if (last)
                tok->trie[last].sibling = c;
            else
                tok->trie[node].child = c;
        }
        node = c;
    }
    if (tok->trie[node].order < 0)
        tok->trie[node].order = order;
    return SY_OK;
}

static sy_status tok_build_specials(sy_tokenizer *tok)
{
    uint32_t n = 0;
    uint64_t bytes = 0;
    for (uint32_t i = 0; i < tok->n_tokens; i++) {
        uint8_t t = tok->types[i];
        if ((t == SY_TOKEN_CONTROL || t == SY_TOKEN_USER_DEFINED || t == SY_TOKEN_UNKNOWN) &&
            tok->text_len[i]) {
            n++;
            bytes += tok->text_len[i];
        }
    }
    if (!n)
        return SY_OK;
    /* Sort keys: (SY_TOKENIZER_MAX_TOKEN_LEN - len) << 32 | id. */
    int64_t *keys = malloc((size_t)n * sizeof *keys);
    tok->special = malloc((size_t)n * sizeof *tok->special);
    uint32_t cap = (uint32_t)(bytes + 1 > UINT32_MAX ? UINT32_MAX : bytes + 1);
    tok->trie = malloc((size_t)cap * sizeof *tok->trie);
    sy_status st = SY_E_NO_MEMORY;
    if (!keys || !tok->special || !tok->trie)
        goto out_free_keys;
    uint32_t k = 0;
    for (uint32_t i = 0; i < tok->n_tokens; i++) {
        uint8_t t = tok->types[i];
        if ((t == SY_TOKEN_CONTROL || t == SY_TOKEN_USER_DEFINED || t == SY_TOKEN_UNKNOWN) &&
            tok->text_len[i])
            keys[k++] = ((int64_t)(SY_TOKENIZER_MAX_TOKEN_LEN - tok->text_len[i]) << 32) | i;
    }
    qsort(keys, n, sizeof *keys, tok_cmp_special);
    tok->trie[0] = (sy__tok_trie_node){0, 0, -1, 0};
    tok->n_trie = 1;
    for (uint32_t j = 0; j < n; j++) {
        int32_t id = (int32_t)(keys[j] & 0xffffffff);
        tok->special[j] = id;
        st = tok_trie_add(tok, (const uint8_t *)tok->text + tok->text_off[id], tok->text_len[id],
                          (int32_t)j, &cap);
        if (st != SY_OK)
            goto out_free_keys;
    }
    tok->n_special = n;
    st = SY_OK;
out_free_keys:
    free(keys);
    return st;
}

static void tok_set_byte_tokens(sy_tokenizer *tok)
{
    for (uint32_t b = 0; b < 256; b++) {
        char buf[8];
        size_t len;
        if (tok->model == SY__TOK_BPE) {
            len = sy__utf8_encode(sy__gpt2_byte_to_cp((uint8_t)b), (uint8_t *)buf);
        } else {
            snprintf(buf, sizeof buf, "<0x%02X>", b);
            len = 6;
        }
        tok->byte_token[b] = sy__tok_lookup(tok, buf, len);
    }
}

static void tok_set_eog(sy_tokenizer *tok)
{
    if (tok->eot < 0) {
        for (uint32_t i = 0; i < TOK_N_EOT_TEXTS && tok->eot < 0; i++)
            tok->eot = sy__tok_lookup(tok, tok_eog_texts[i], strlen(tok_eog_texts[i]));
    }
    const int32_t ids[] = {tok->eos, tok->eot, tok->eom};
    uint32_t cap = sizeof tok->eog / sizeof tok->eog[0];
    for (size_t i = 0; i < sizeof ids / sizeof ids[0]; i++)
        if (ids[i] >= 0 && !sy_tokenizer_is_eog(tok, ids[i]) && tok->n_eog < cap)
            tok->eog[tok->n_eog++] = ids[i];
    for (size_t i = 0; i < sizeof tok_eog_texts / sizeof tok_eog_texts[0]; i++) {
        int32_t id = sy__tok_lookup(tok, tok_eog_texts[i], strlen(tok_eog_texts[i]));
        if (id >= 0 && !sy_tokenizer_is_eog(tok, id) && tok->n_eog < cap)
            tok->eog[tok->n_eog++] = id;
    }
}

sy_status sy_tokenizer_create(const sy_tokenizer_desc *d, sy_tokenizer **out_tok, char *err,
                              size_t err_size)
{
    if (err && err_size)
        err[0] = 0;
    if (!out_tok)
        return SY_E_INVALID_ARG;
    *out_tok = NULL;
    if (!d || !d->tokens) {
        tok_err(err, err_size, "no tokenizer description or no tokens");
        return SY_E_INVALID_ARG;
    }
    sy__tok_model model;
    sy__pretok pre = SY__PRE_GPT2;
    if (d->model && strcmp(d->model, "gpt2") == 0) {
        model = SY__TOK_BPE;
        if (!sy__pretok_from_name(d->pre, &pre)) {
            tok_err(err, err_size,
                    "pre-tokenizer '%s' (tokenizer.ggml.pre) is not supported; supported: "
                    "default, gpt2, llama3, qwen2, smollm and their aliases",
                    d->pre);
            return SY_E_UNSUPPORTED;
        }
    } else if (d->model && strcmp(d->model, "llama") == 0) {
        model = SY__TOK_SPM;
    } else {
        tok_err(err, err_size,
                "tokenizer model '%s' (tokenizer.ggml.model) is not supported; supported: gpt2, llama",
                d->model ? d->model : "(none)");
        return SY_E_UNSUPPORTED;
    }
    uint32_t n = d->n_tokens;
    if (n == 0 || n > INT32_MAX) {
        tok_err(err, err_size, "vocabulary of %u tokens (1..%d)", n, INT32_MAX);
        return SY_E_FORMAT;
    }
    const struct {
        const char *what;
        int32_t id;
    } ids[] = {{"bos_token_id", d->bos}, {"eos_token_id", d->eos}, {"eot_token_id", d->eot},
               {"eom_token_id", d->eom}, {"unknown_token_id", d->unk}, {"padding_token_id", d->pad}};
    for (size_t i = 0; i < sizeof ids / sizeof ids[0]; i++) {
        sy_status st = tok_check_id(ids[i].what, ids[i].id, n, err, err_size);
        if (st != SY_OK)
            return st;
    }
    if (d->add_bos && d->bos < 0) {
        tok_err(err, err_size, "add_bos_token is set but there is no bos_token_id");
        return SY_E_FORMAT;
    }
    if (d->add_eos && d->eos < 0) {
        tok_err(err, err_size, "add_eos_token is set but there is no eos_token_id");
        return SY_E_FORMAT;
    }

    sy_tokenizer *tok = calloc(1, sizeof *tok);
    if (!tok)
        return SY_E_NO_MEMORY;
    tok->model = model;
    tok->pre = pre;
    tok->ignore_merges = model == SY__TOK_BPE && pre == SY__PRE_LLAMA3;
    tok->n_tokens = n;
    tok->bos = d->bos, tok->eos = d->eos, tok->eot = d->eot, tok->eom = d->eom;
    tok->unk = d->unk, tok->pad = d->pad;
    tok->add_bos = d->add_bos, tok->add_eos = d->add_eos;
    tok->add_space_prefix = model == SY__TOK_SPM && d->add_space_prefix;
    tok->text_off = malloc((size_t)n * sizeof *tok->text_off);
    tok->text_len = malloc((size_t)n * sizeof *tok->text_len);
    tok->scores = calloc(n, sizeof *tok->scores);
    tok->types = malloc(n);
    sy_status st = SY_E_NO_MEMORY;
    if (!tok->text_off || !tok->text_len || !tok->scores || !tok->types)
        goto out_destroy;
    if (d->scores)
        memcpy(tok->scores, d->scores, (size_t)n * sizeof *tok->scores);
    if ((st = tok_copy_texts(tok, d, err, err_size)) != SY_OK ||
        (st = tok_set_types(tok, d, err, err_size)) != SY_OK || (st = tok_build_map(tok)) != SY_OK)
        goto out_destroy;
    if (model == SY__TOK_BPE && (st = tok_build_merges(tok, d, err, err_size)) != SY_OK)
        goto out_destroy;
    if ((st = tok_build_specials(tok)) != SY_OK)
        goto out_destroy;
    tok_set_byte_tokens(tok);
    tok_set_eog(tok);
    *out_tok = tok;
    return SY_OK;
out_destroy:
    if (st == SY_E_NO_MEMORY)
        tok_err(err, err_size, "out of memory building a tokenizer of %u tokens", n);
    sy_tokenizer_destroy(tok);
    return st;
}

void sy_tokenizer_destroy(sy_tokenizer *tok)
{
    if (!tok)
        return;
    free(tok->text);
    free(tok->text_off);
    free(tok->text_len);
    free(tok->scores);
    free(tok->types);
    free(tok->map);
    free(tok->merge_keys);
    free(tok->merge_rank);
    free(tok->merge_result);
    free(tok->special);
    free(tok->trie);
    free(tok);
}

/* -------------------------------------------------------------- queries */

bool sy__tok_valid_id(const sy_tokenizer *tok, int32_t id)
{
    return tok && id >= 0 && (uint32_t)id < tok->n_tokens;
}

sy_status sy_tokenizer_find(const sy_tokenizer *tok, const char *text, int32_t *out_id)
{
    if (!out_id)
        return SY_E_INVALID_ARG;
    *out_id = -1;
    if (!tok || !text)
        return SY_E_INVALID_ARG;
    size_t len = strlen(text);
    if (!len)
        return SY_E_NOT_FOUND;
    *out_id = sy__tok_lookup(tok, text, len);
    return *out_id >= 0 ? SY_OK : SY_E_NOT_FOUND;
}

uint32_t sy_tokenizer_n_tokens(const sy_tokenizer *tok) { return tok ? tok->n_tokens : 0; }

const char *sy_tokenizer_token_text(const sy_tokenizer *tok, int32_t id, uint32_t *out_len)
{
    if (!sy__tok_valid_id(tok, id)) {
        if (out_len)
            *out_len = 0;
        return NULL;
    }
    if (out_len)
        *out_len = tok->text_len[id];
    return tok->text + tok->text_off[id];
}

sy_token_type sy_tokenizer_token_type(const sy_tokenizer *tok, int32_t id)
{
    return sy__tok_valid_id(tok, id) ? (sy_token_type)tok->types[id] : SY_TOKEN_UNDEFINED;
}

float sy_tokenizer_token_score(const sy_tokenizer *tok, int32_t id)
{
    return sy__tok_valid_id(tok, id) ? tok->scores[id] : 0.0f;
}

int32_t sy_tokenizer_bos(const sy_tokenizer *tok) { return tok ? tok->bos : -1; }
int32_t sy_tokenizer_eos(const sy_tokenizer *tok) { return tok ? tok->eos : -1; }
int32_t sy_tokenizer_eot(const sy_tokenizer *tok) { return tok ? tok->eot : -1; }
int32_t sy_tokenizer_unk(const sy_tokenizer *tok) { return tok ? tok->unk : -1; }
int32_t sy_tokenizer_pad(const sy_tokenizer *tok) { return tok ? tok->pad : -1; }
bool sy_tokenizer_adds_bos(const sy_tokenizer *tok) { return tok && tok->add_bos; }
bool sy_tokenizer_adds_eos(const sy_tokenizer *tok) { return tok && tok->add_eos; }

bool sy_tokenizer_is_eog(const sy_tokenizer *tok, int32_t id)
{
    if (!sy__tok_valid_id(tok, id))
        return false;
    for (uint32_t i = 0; i < tok->n_eog; i++)
        if (tok->eog[i] == id)
            return true;
    return false;
}

bool sy_tokenizer_is_control(const sy_tokenizer *tok, int32_t id)
{
    if (!sy__tok_valid_id(tok, id))
        return false;
    return tok->types[id] == SY_TOKEN_CONTROL || tok->types[id] == SY_TOKEN_UNKNOWN;
}

const char *sy_tokenizer_model(const sy_tokenizer *tok)
{
    if (!tok)
        return "";
    return tok->model == SY__TOK_BPE ? "gpt2" : "llama";
}

const char *sy_tokenizer_pre(const sy_tokenizer *tok)
{
    if (!tok || tok->model != SY__TOK_BPE)
        return "";
    return sy__pretok_name(tok->pre);
}

