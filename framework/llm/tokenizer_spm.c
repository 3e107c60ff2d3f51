/* SentencePiece-style BPE ("llama"): spaces to U+2581, then adjacent
 * symbols merged while their concatenation is a token, highest score first
 * (leftmost first on ties); characters that form no token become <0xNN>
 * byte tokens. */
#include <string.h>

#include "tokenizer_internal.h"

/* UTF-8 sequence length by the high nibble of the first byte. */
static const uint8_t spm_char_len[16] = {1, 1, 1, 1, 1, 1, 1, 1, 1, 1, 1, 1, 2, 2, 3, 4};

/* Maps a float to a uint32 whose unsigned order is the float's order. */
static uint32_t spm_order(float f)
{
    uint32_t u;
    memcpy(&u, &f, sizeof u);
    return (u & 0x80000000u) ? ~u : (u | 0x80000000u);
}

static sy_status spm_try_pair(const sy_tokenizer *tok, sy__tok_work *w, const uint8_t *text,
                              uint32_t *n_heap, int32_t a, int32_t b)
{
    if (a < 0 || b < 0)
        return SY_OK;
    const sy__tok_sym *syms = w->syms.ptr;
    uint32_t size = syms[a].len + syms[b].len;
    int32_t id = sy__tok_lookup(tok, text + syms[a].start, size);
    if (id < 0)
        return SY_OK;
    /* Highest score first: order by the complement of the score's order. */
    uint64_t key = ((uint64_t)~spm_order(tok->scores[id]) << 32) | (uint32_t)a;
    sy__tok_pair p = {key, (uint32_t)a, (uint32_t)b, size, id};
    return sy__tok_heap_push(&w->heap, n_heap, &p);
}

sy_status sy__tok_encode_spm(const sy_tokenizer *tok, sy__tok_work *w, const uint8_t *text,
                             size_t len, bool first, sy__tok_out *out)
{
    static const uint8_t space_mark[3] = {0xe2, 0x96, 0x81}; /* U+2581 */
    bool prefix = first && tok->add_space_prefix;
    if (!len && !prefix)
        return SY_OK;
    if (len >= UINT32_MAX / 4)
        return SY_E_LIMIT;
    size_t cap = (len + 1) * 3;
    sy_status st = sy__tok_buf_reserve(&w->bytes, cap);
    if (st != SY_OK)
        return st;
    uint8_t *buf = w->bytes.ptr;
    size_t n = 0;
    if (prefix) {
        memcpy(buf, space_mark, 3);
        n = 3;
    }
    for (size_t i = 0; i < len; i++) {
        if (text[i] == ' ') {
            memcpy(buf + n, space_mark, 3);
            n += 3;
        } else {
            buf[n++] = text[i];
        }
    }
    /* One symbol per character.  As in llama.cpp, a character's length is
     * read from its first byte alone (1 for ASCII and stray continuation
     * bytes, 2 for C0..DF, 3 for E0..EF, 4 for F0..FF), so invalid UTF-8
     * makes symbols that are no token and end up as byte tokens. */
    if ((st = sy__tok_buf_reserve(&w->syms, n * sizeof(sy__tok_sym))) != SY_OK)
        return st;
    sy__tok_sym *syms = w->syms.ptr;
    uint32_t n_syms = 0;
    for (size_t i = 0; i < n;) {
        size_t k = spm_char_len[buf[i] >> 4];
        if (k > n - i)
            k = n - i;
        syms[n_syms] = (sy__tok_sym){(uint32_t)i, (uint32_t)k, (int32_t)n_syms - 1,
                                     (int32_t)n_syms + 1, sy__tok_lookup(tok, buf + i, k)};
        n_syms++;
        i += k;
    }
    syms[n_syms - 1].next = -1;
    uint32_t n_heap = 0;
    for (uint32_t i = 1; i < n_syms; i++)
        if ((st = spm_try_pair(tok, w, buf, &n_heap, (int32_t)i - 1, (int32_t)i)) != SY_OK)
            return st;
    while (n_heap) {
        sy__tok_pair p;
        sy__tok_heap_pop(&w->heap, &n_heap, &p);
        syms = w->syms.ptr;
        sy__tok_sym *l = &syms[p.left], *r = &syms[p.right];
        if (!l->len || !r->len || l->len + r->len != p.size)
            continue;
        l->len += r->len;
        l->id = p.result;
        r->len = 0;
        l->next = r->next;
        if (r->next >= 0)
            syms[r->next].prev = (int32_t)p.left;
        if ((st = spm_try_pair(tok, w, buf, &n_heap, l->prev, (int32_t)p.left)) != SY_OK ||
            (st = spm_try_pair(tok, w, buf, &n_heap, (int32_t)p.left, l->next)) != SY_OK)
            return st;
    }
    syms = w->syms.ptr;
    for (int32_t i = 0; i >= 0; i = syms[i].next) {
        if (syms[i].id >= 0) {
            sy__tok_out_push(out, syms[i].id);
            continue;
        }
        for (uint32_t k = 0; k < syms[i].len; k++)
            if ((st = sy__tok_push_byte(tok, buf[syms[i].start + k], out)) != SY_OK)
                return st;
    }
    return SY_OK;
}
