/* Encoding: special tokens cut from the raw text, then each raw piece
 * encoded by the model (tokenizer_bpe.c, tokenizer_spm.c). */
#include <stdlib.h>
#include <string.h>

#include "tokenizer_internal.h"

/* ------------------------------------------------------------ scratch */

sy_status sy__tok_buf_reserve(sy__tok_buf *b, size_t bytes)
{
    if (bytes <= b->cap)
        return SY_OK;
    size_t cap = b->cap ? b->cap : 256;
    while (cap < bytes) {
        if (cap > SIZE_MAX / 2)
            return SY_E_NO_MEMORY;
        cap *= 2;
    }
    void *p = realloc(b->ptr, cap);
    if (!p)
        return SY_E_NO_MEMORY;
    b->ptr = p;
    b->cap = cap;
    return SY_OK;
}

void sy__tok_work_free(sy__tok_work *w)
{
    free(w->cps.ptr);
    free(w->offs.ptr);
    free(w->flags.ptr);
    free(w->cuts.ptr);
    free(w->ends.ptr);
    free(w->syms.ptr);
    free(w->heap.ptr);
    free(w->bytes.ptr);
    free(w->clean.ptr);
    memset(w, 0, sizeof *w);
}

sy_status sy__tok_heap_push(sy__tok_buf *heap, uint32_t *n, const sy__tok_pair *p)
{
    if (*n == UINT32_MAX)
        return SY_E_LIMIT;
    sy_status st = sy__tok_buf_reserve(heap, ((size_t)*n + 1) * sizeof(sy__tok_pair));
    if (st != SY_OK)
        return st;
    sy__tok_pair *h = heap->ptr;
    uint32_t i = (*n)++;
    while (i > 0) {
        uint32_t parent = (i - 1) / 2;
        if (h[parent].key <= p->key)
            break;
        h[i] = h[parent];
        i = parent;
    }
    h[i] = *p;
    return SY_OK;
}

void sy__tok_heap_pop(sy__tok_buf *heap, uint32_t *n, sy__tok_pair *out_p)
{
    sy__tok_pair *h = heap->ptr;
    *out_p = h[0];
    sy__tok_pair last = h[--(*n)];
    uint32_t i = 0, count = *n;
    for (;;) {
        uint32_t c = 2 * i + 1;
        if (c >= count)
            break;
        if (c + 1 < count && h[c + 1].key < h[c].key)
            c++;
        if (last.key <= h[c].key)
            break;
        h[i] = h[c];
        i = c;
    }
    if (count)
        h[i] = last;
}

/* ---------------------------------------------------------- encoding */

/* A piece of the input: raw text (id -1) or one special token. */
typedef struct tok_frag {
    uint32_t off, len;
    int32_t id;
} tok_frag;

static sy_status frag_push(sy__tok_buf *b, uint32_t *n, uint32_t off, uint32_t len, int32_t id)
{
    sy_status st = sy__tok_buf_reserve(b, ((size_t)*n + 1) * sizeof(tok_frag));
    if (st != SY_OK)
        return st;
    ((tok_frag *)b->ptr)[(*n)++] = (tok_frag){off, len, id};
    return SY_OK;
}

/* First occurrence of |needle| (|nl| > 0 bytes) in |hay|, or NULL. */
static const uint8_t *find_bytes(const uint8_t *hay, size_t hl, const uint8_t *needle, size_t nl)
{
    while (hl >= nl) {
        const uint8_t *p = memchr(hay, needle[0], hl - nl + 1);
        if (!p)
            return NULL;
        if (memcmp(p, needle, nl) == 0)
            return p;
        hl -= (size_t)(p - hay) + 1;
        hay = p + 1;
    }
    return NULL;
}

/* Marks in |present| (one byte per entry of tok->special) every special
 * token that occurs somewhere in |text|, by walking the trie from each
 * byte. */
static void mark_present(const sy_tokenizer *tok, const uint8_t *text, size_t len, uint8_t *present)
{
    const sy__tok_trie_node *t = tok->trie;
    for (size_t i = 0; i < len; i++) {
        uint32_t node = 0;
        for (size_t j = i; j < len; j++) {
            uint32_t c = t[node].child;
            while (c && t[c].byte != text[j])
                c = t[c].sibling;
            if (!c)
                break;
            node = c;
            if (t[node].order >= 0)
                present[t[node].order] = 1;
        }
    }
}

/* Cuts every occurrence of special token |id| out of the raw fragments of
 * |*from| (|*n_from| of them) into |*to|; then swaps the two. */
static sy_status cut_token(const sy_tokenizer *tok, const uint8_t *text, int32_t id,
                           sy__tok_buf *from, uint32_t *n_from, sy__tok_buf *to)
{
    const uint8_t *needle = (const uint8_t *)tok->text + tok->text_off[id];
    uint32_t nl = tok->text_len[id], n_to = 0;
    sy_status st;
    for (uint32_t f = 0; f < *n_from; f++) {
        tok_frag fr = ((const tok_frag *)from->ptr)[f];
        if (fr.id >= 0) {
            if ((st = frag_push(to, &n_to, fr.off, fr.len, fr.id)) != SY_OK)
                return st;
            continue;
        }
        uint32_t off = fr.off, end = fr.off + fr.len;
        for (;;) {
            const uint8_t *hit = find_bytes(text + off, end - off, needle, nl);
            if (!hit)
                break;
            uint32_t at = (uint32_t)(hit - text);
            if (at > off && (st = frag_push(to, &n_to, off, at - off, -1)) != SY_OK)
                return st;
            if ((st = frag_push(to, &n_to, at, nl, id)) != SY_OK)
                return st;
            off = at + nl;
        }
        if (off < end && (st = frag_push(to, &n_to, off, end - off, -1)) != SY_OK)
            return st;
    }
    sy__tok_buf tmp = *from;
    *from = *to;
    *to = tmp;
    *n_from = n_to;
    return SY_OK;
}

/* Splits |text| into raw and special fragments, in |*frags|. */
static sy_status partition(const sy_tokenizer *tok, const uint8_t *text, uint32_t len,
                           bool parse_special, sy__tok_buf *frags, uint32_t *n_frags)
{
    sy_status st = frag_push(frags, n_frags, 0, len, -1);
    if (st != SY_OK || !tok->n_special)
        return st;
    uint8_t *present = calloc(tok->n_special, 1);
    sy__tok_buf other = {0};
    if (!present)
        return SY_E_NO_MEMORY;
    mark_present(tok, text, len, present);
    for (uint32_t k = 0; k < tok->n_special; k++) {
        if (!present[k])
            continue;
        int32_t id = tok->special[k];
        uint8_t type = tok->types[id];
        if (!parse_special && (type == SY_TOKEN_CONTROL || type == SY_TOKEN_UNKNOWN))
            continue; /* USER_DEFINED tokens are cut either way */
        if ((st = cut_token(tok, text, id, frags, n_frags, &other)) != SY_OK)
            break;
    }
    free(other.ptr);
    free(present);
    return st;
}

sy_status sy_tokenizer_encode(const sy_tokenizer *tok, const char *text, size_t len,
                              bool add_special, bool parse_special, int32_t *out_ids,
                              uint32_t cap, uint32_t *out_n)
{
    if (!out_n)
        return SY_E_INVALID_ARG;
    *out_n = 0;
    if (!tok || (!text && len) || (!out_ids && cap))
        return SY_E_INVALID_ARG;
    if (len >= UINT32_MAX / 8)
        return SY_E_LIMIT;
    sy__tok_out out = {out_ids, cap, 0};
    sy__tok_work w = {0};
    sy__tok_buf frags = {0};
    uint32_t n_frags = 0;
    sy_status st = SY_OK;
    const uint8_t *bytes = (const uint8_t *)text;
    if (add_special && tok->add_bos)
        sy__tok_out_push(&out, tok->bos);
    if (len && (st = partition(tok, bytes, (uint32_t)len, parse_special, &frags, &n_frags)) != SY_OK)
        goto out_free;
    bool after_special = true; /* the text's start counts as after a special token */
    for (uint32_t f = 0; f < n_frags; f++) {
        tok_frag fr = ((const tok_frag *)frags.ptr)[f];
        if (fr.id >= 0) {
            sy__tok_out_push(&out, fr.id);
            after_special = true;
            continue;
        }
        if (tok->model == SY__TOK_BPE)
            st = sy__tok_encode_bpe(tok, &w, bytes + fr.off, fr.len, &out);
        else
            st = sy__tok_encode_spm(tok, &w, bytes + fr.off, fr.len, after_special, &out);
        if (st != SY_OK)
            goto out_free;
        after_special = false;
    }
    if (add_special && tok->add_eos)
        sy__tok_out_push(&out, tok->eos);
    if (out.n > UINT32_MAX) {
        st = SY_E_LIMIT;
        goto out_free;
    }
    *out_n = (uint32_t)out.n;
    st = out.n > cap ? SY_E_LIMIT : SY_OK;
out_free:
    free(frags.ptr);
    sy__tok_work_free(&w);
    return st;
}
