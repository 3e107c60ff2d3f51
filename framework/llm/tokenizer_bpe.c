/* Byte-level BPE ("gpt2"): invalid UTF-8 replaced by U+FFFD, pre-tokenizer
 * words, GPT-2 byte mapping, merges applied lowest rank first (leftmost
 * first on ties). */
#include <string.h>

#include "tokenizer_internal.h"
#include "unicode.h"

sy_status sy__tok_push_byte(const sy_tokenizer *tok, uint8_t b, sy__tok_out *out)
{
    int32_t id = tok->byte_token[b] >= 0 ? tok->byte_token[b] : tok->unk;
    if (id < 0)
        return SY_E_UNSUPPORTED;
    sy__tok_out_push(out, id);
    return SY_OK;
}

/* Queues the merge of live symbols |a| and |b| when the vocabulary has
 * one. */
static sy_status bpe_try_pair(const sy_tokenizer *tok, sy__tok_work *w, uint32_t *n_heap,
                              int32_t a, int32_t b)
{
    if (a < 0 || b < 0)
        return SY_OK;
    const sy__tok_sym *syms = w->syms.ptr;
    uint32_t rank;
    int32_t result;
    if (!sy__tok_merge_find(tok, syms[a].id, syms[b].id, &rank, &result))
        return SY_OK;
    sy__tok_pair p = {((uint64_t)rank << 32) | (uint32_t)a, (uint32_t)a, (uint32_t)b,
                      syms[a].len + syms[b].len, result};
    return sy__tok_heap_push(&w->heap, n_heap, &p);
}

/* Encodes one word of |len| > 0 bytes. */
static sy_status bpe_word(const sy_tokenizer *tok, sy__tok_work *w, const uint8_t *word,
                          uint32_t len, sy__tok_out *out)
{
    sy_status st;
    if (tok->ignore_merges) {
        if ((st = sy__tok_buf_reserve(&w->bytes, (size_t)len * 2)) != SY_OK)
            return st;
        uint8_t *mapped = w->bytes.ptr;
        size_t n = 0;
        for (uint32_t i = 0; i < len; i++)
            n += sy__utf8_encode(sy__gpt2_byte_to_cp(word[i]), mapped + n);
        int32_t id = sy__tok_lookup(tok, mapped, n);
        if (id >= 0) {
            sy__tok_out_push(out, id);
            return SY_OK;
        }
    }
    if ((st = sy__tok_buf_reserve(&w->syms, (size_t)len * sizeof(sy__tok_sym))) != SY_OK)
        return st;
    sy__tok_sym *syms = w->syms.ptr;
    for (uint32_t i = 0; i < len; i++)
        syms[i] = (sy__tok_sym){i, 1, (int32_t)i - 1, i + 1 < len ? (int32_t)i + 1 : -1,
                                tok->byte_token[word[i]]};
    uint32_t n_heap = 0;
    for (uint32_t i = 1; i < len; i++)
        if ((st = bpe_try_pair(tok, w, &n_heap, (int32_t)i - 1, (int32_t)i)) != SY_OK)
            return st;
    while (n_heap) {
        sy__tok_pair p;
        sy__tok_heap_pop(&w->heap, &n_heap, &p);
        syms = w->syms.ptr;
        sy__tok_sym *l = &syms[p.left], *r = &syms[p.right];
        /* Symbols only grow, so an unchanged pair has its old total size. */
        if (!l->len || !r->len || l->len + r->len != p.size)
            continue;
        l->len += r->len;
        l->id = p.result;
        r->len = 0;
        l->next = r->next;
        if (r->next >= 0)
            syms[r->next].prev = (int32_t)p.left;
        if ((st = bpe_try_pair(tok, w, &n_heap, l->prev, (int32_t)p.left)) != SY_OK ||
            (st = bpe_try_pair(tok, w, &n_heap, (int32_t)p.left, l->next)) != SY_OK)
            return st;
    }
    syms = w->syms.ptr;
    for (int32_t i = 0; i >= 0; i = syms[i].next) {
        if (syms[i].id >= 0) {
            sy__tok_out_push(out, syms[i].id);
            continue;
        }
        /* Only a single byte whose code point is no token gets here (some
         * vocabularies lack bytes such as 0x04 or 0xF5).  llama.cpp drops
         * such a byte, and so do we: the model never saw it, and UNK is
         * often an end-of-text token in byte-level vocabularies. */
    }
    return SY_OK;
}

/* Replaces every byte of invalid UTF-8 in |text| by U+FFFD, as llama.cpp
 * does before byte-level BPE; *out_text is |text| itself when it is valid,
 * else the copy in |w->clean|. */
static sy_status bpe_clean_utf8(sy__tok_work *w, const uint8_t *text, size_t len,
                                const uint8_t **out_text, size_t *out_len)
{
    static const uint8_t replacement[3] = {0xef, 0xbf, 0xbd};
    size_t i = 0;
    uint32_t cp;
    while (i < len) {
        size_t k = sy__utf8_decode(text + i, len - i, &cp);
        if (cp == SY_UNICODE_INVALID)
            break;
        i += k;
    }
    *out_text = text;
    *out_len = len;
    if (i == len)
        return SY_OK;
    sy_status st = sy__tok_buf_reserve(&w->clean, len * 3);
    if (st != SY_OK)
        return st;
    uint8_t *out = w->clean.ptr;
    memcpy(out, text, i);
    size_t o = i;
    while (i < len) {
        size_t k = sy__utf8_decode(text + i, len - i, &cp);
        if (cp == SY_UNICODE_INVALID) {
            memcpy(out + o, replacement, 3);
            o += 3;
        } else {
            memcpy(out + o, text + i, k);
            o += k;
        }
        i += k;
    }
    *out_text = out;
    *out_len = o;
    return SY_OK;
}

sy_status sy__tok_encode_bpe(const sy_tokenizer *tok, sy__tok_work *w, const uint8_t *text,
                             size_t len, sy__tok_out *out)
{
    if (!len)
        return SY_OK;
    sy_status st = bpe_clean_utf8(w, text, len, &text, &len);
    if (st != SY_OK)
        return st;
    if (len >= UINT32_MAX / 8)
        return SY_E_LIMIT;
    if ((st = sy__tok_buf_reserve(&w->ends, len * sizeof(uint32_t))) != SY_OK)
        return st;
    uint32_t n_words;
    st = sy__pretok_split(tok->pre, w, text, len, w->ends.ptr, (uint32_t)len, &n_words);
    if (st != SY_OK)
        return st;
    const uint32_t *ends = w->ends.ptr;
    uint32_t start = 0;
    for (uint32_t i = 0; i < n_words; i++) {
        if ((st = bpe_word(tok, w, text + start, ends[i] - start, out)) != SY_OK)
            return st;
        start = ends[i];
    }
    return SY_OK;
}
