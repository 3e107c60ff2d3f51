/* Decoding: token ids back to the bytes they stand for. */
#include "tokenizer_internal.h"
#include "unicode.h"

/* Output of decoding: bytes are stored below |cap| and all are counted. */
typedef struct tok_sink {
    char *out;
    size_t cap;
    size_t pos;
    bool strip_space; /* drop the next byte if it is a space */
} tok_sink;

static void tok_put(tok_sink *k, uint8_t byte)
{
    bool strip = k->strip_space && byte == ' ';
    k->strip_space = false;
    if (strip)
        return;
    if (k->pos < k->cap)
        k->out[k->pos] = (char)byte;
    k->pos++;
}

/* Appends the bytes token |id| stands for to |k|. */
static void tok_decode_append(const sy_tokenizer *tok, int32_t id, tok_sink *k)
{
    const uint8_t *s = (const uint8_t *)tok->text + tok->text_off[id];
    uint32_t len = tok->text_len[id];
    uint8_t b;
    switch ((sy_token_type)tok->types[id]) {
    case SY_TOKEN_UNDEFINED:
    case SY_TOKEN_UNUSED:
        return;
    case SY_TOKEN_CONTROL:
    case SY_TOKEN_UNKNOWN:
    case SY_TOKEN_USER_DEFINED:
        for (uint32_t i = 0; i < len; i++)
            tok_put(k, s[i]);
        return;
    case SY_TOKEN_BYTE:
        if (tok->model == SY__TOK_SPM && sy__tok_is_byte_text((const char *)s, len, &b)) {
            tok_put(k, b);
            return;
        }
        break; /* a byte token without <0xNN> text reads as a normal one */
    case SY_TOKEN_NORMAL:
        break;
    }
    for (uint32_t i = 0; i < len;) {
        uint32_t cp;
        size_t n = sy__utf8_decode(s + i, len - i, &cp);
        int byte = -1;
        if (tok->model == SY__TOK_SPM && cp == 0x2581)
            byte = ' ';
        else if (tok->model == SY__TOK_BPE)
            byte = sy__gpt2_cp_to_byte(cp);
        if (byte >= 0) {
            tok_put(k, (uint8_t)byte);
        } else {
            /* SPM text, or a code point GPT-2's map lacks: kept as is. */
            for (size_t j = 0; j < n; j++)
                tok_put(k, s[i + j]);
        }
        i += (uint32_t)n;
    }
}

/* Decodes |ids| (valid) into |out|; |strip| drops one leading space. */
static sy_status tok_decode(const sy_tokenizer *tok, const int32_t *ids, uint32_t n, bool strip,
                            char *out, size_t cap, size_t *out_len)
{
    /* Count first so that a short buffer is left untouched. */
    tok_sink count = {NULL, 0, 0, strip};
    for (uint32_t i = 0; i < n; i++)
        tok_decode_append(tok, ids[i], &count);
    *out_len = count.pos;
    if (count.pos >= cap)
        return SY_E_LIMIT;
    tok_sink sink = {out, cap, 0, strip};
    for (uint32_t i = 0; i < n; i++)
        tok_decode_append(tok, ids[i], &sink);
    out[sink.pos] = 0;
    return SY_OK;
}

sy_status sy_tokenizer_decode_token(const sy_tokenizer *tok, int32_t id, char *out, size_t cap,
                                    size_t *out_len)
{
    if (!out_len)
        return SY_E_INVALID_ARG;
    *out_len = 0;
    if (!sy__tok_valid_id(tok, id) || (!out && cap))
        return SY_E_INVALID_ARG;
    return tok_decode(tok, &id, 1, false, out, cap, out_len);
}

sy_status sy_tokenizer_decode(const sy_tokenizer *tok, const int32_t *ids, uint32_t n, char *out,
                              size_t cap, size_t *out_len)
{
    if (!out_len)
        return SY_E_INVALID_ARG;
    *out_len = 0;
    if (!tok || (!ids && n) || (!out && cap))
        return SY_E_INVALID_ARG;
    for (uint32_t i = 0; i < n; i++)
        if (!sy__tok_valid_id(tok, ids[i]))
            return SY_E_INVALID_ARG;
    return tok_decode(tok, ids, n, tok->add_space_prefix, out, cap, out_len);
}
