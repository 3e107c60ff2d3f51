/* Shared between the tokenizer's files (tokenizer.c, tokenizer_bpe.c,
 * tokenizer_spm.c, tokenizer_pretok.c, tokenizer_gguf.c); not installed. */
#ifndef SWITCHYARD_LLM_TOKENIZER_INTERNAL_H
#define SWITCHYARD_LLM_TOKENIZER_INTERNAL_H

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

#include "tokenizer.h"

#ifdef __cplusplus
extern "C" {
#endif

typedef enum sy__tok_model {
    SY__TOK_BPE = 0, /* "gpt2" */
    SY__TOK_SPM = 1  /* "llama" */
} sy__tok_model;

/* Pre-tokenizers of byte-level BPE: each a chain of split stages. */
typedef enum sy__pretok {
    SY__PRE_GPT2 = 0,   /* 's|'t|'re|'ve|'m|'ll|'d| ?\p{L}+| ?\p{N}+| ?[^\s\p{L}\p{N}]+|\s+(?!\S)|\s+ */
    SY__PRE_LLAMA3 = 1, /* (?i:'s|..)|[^\r\n\p{L}\p{N}]?\p{L}+|\p{N}{1,3}| ?[^\s\p{L}\p{N}]+[\r\n]*|\s*[\r\n]+|\s+(?!\S)|\s+ */
    SY__PRE_QWEN2 = 2,  /* as LLAMA3 with \p{N} alone */
    SY__PRE_SMOLLM = 3, /* \p{N} first, then GPT2 within each piece */
    SY__PRE_DEFAULT = 4 /* llama.cpp's BPE default: [\p{P}$+<=>^~|]+, GPT2, \p{N}+, [0-9][0-9][0-9] */
} sy__pretok;

/* A node of the byte trie over special-token texts. */
typedef struct sy__tok_trie_node {
    uint32_t child;   /* first child, 0 = none (node 0 is the root) */
    uint32_t sibling; /* next sibling, 0 = none */
    int32_t order;    /* index into special[] of the token ending here, -1 = none */
    uint8_t byte;
} sy__tok_trie_node;

struct sy_tokenizer {
    sy__tok_model model;
    sy__pretok pre;
    bool ignore_merges; /* llama3: a word that is a token is not merged */
    uint32_t n_tokens;
    char *text;         /* all token texts, each followed by a NUL */
    uint32_t *text_off; /* [n_tokens] */
    uint32_t *text_len; /* [n_tokens] */
    float *scores;      /* [n_tokens] */
    uint8_t *types;     /* [n_tokens] sy_token_type */

    /* Text -> id: open addressing; a slot is the text's hash in the high
     * 32 bits (checked before the text is compared) and id + 1 in the low
     * 32 bits; 0 = empty. */
    uint64_t *map;
    uint32_t map_mask;

    /* gpt2 merges: (left id, right id) -> (rank, result id). */
    uint64_t *merge_keys; /* UINT64_MAX = empty */
    uint32_t *merge_rank;
    int32_t *merge_result;
    uint32_t merge_mask;
    uint32_t n_merges;

    /* Special tokens cut from raw text, longest first, then by id. */
    int32_t *special;
    uint32_t n_special;
    sy__tok_trie_node *trie;
    uint32_t n_trie;

    /* gpt2: the token of each byte's code point; llama: <0xNN>; -1 = none. */
    int32_t byte_token[256];

    int32_t bos, eos, eot, eom, unk, pad;
    int32_t eog[16];
    uint32_t n_eog;
    bool add_bos, add_eos, add_space_prefix;
};

/* Growing scratch memory of one encode call. */
typedef struct sy__tok_buf {
    void *ptr;
    size_t cap; /* bytes */
} sy__tok_buf;

/* Makes |b| hold at least |bytes| bytes (contents kept).  SY_E_NO_MEMORY
 * on failure (|b| unchanged). */
sy_status sy__tok_buf_reserve(sy__tok_buf *b, size_t bytes);

/* Ids produced so far: the first |cap| are stored, all are counted. */
typedef struct sy__tok_out {
    int32_t *ids;
    uint32_t cap;
    uint64_t n;
} sy__tok_out;

static inline void sy__tok_out_push(sy__tok_out *o, int32_t id)
{
    if (o->n < o->cap)
        o->ids[o->n] = id;
    o->n++;
}

/* Scratch for the model encoders, reused across the pieces of one call. */
typedef struct sy__tok_work {
    sy__tok_buf cps, offs, flags, cuts, ends, syms, heap, bytes, clean;
} sy__tok_work;

void sy__tok_work_free(sy__tok_work *w);

/* True when |id| is inside |tok|'s vocabulary (|tok| may be NULL). */
bool sy__tok_valid_id(const sy_tokenizer *tok, int32_t id);

/* True when the |len| bytes at |s| are "<0xNN>" (upper-case hex); the
 * byte in *out_byte. */
bool sy__tok_is_byte_text(const char *s, uint32_t len, uint8_t *out_byte);

/* Returns the id whose text is the |len| bytes at |s|, or -1. */
int32_t sy__tok_lookup(const sy_tokenizer *tok, const void *s, size_t len);

/* Finds the merge of (|left|, |right|): true with its rank and result. */
bool sy__tok_merge_find(const sy_tokenizer *tok, int32_t left, int32_t right,
                        uint32_t *out_rank, int32_t *out_result);

/* Writes the token that stands for byte |b| when nothing else can (SPM):
 * its byte token, else UNK; SY_E_UNSUPPORTED without either. */
sy_status sy__tok_push_byte(const sy_tokenizer *tok, uint8_t b, sy__tok_out *out);

/* Encodes one piece of raw text (no special tokens in it) with byte-level
 * BPE / SentencePiece.  |first| tells the SPM encoder whether the piece
 * starts the text or follows a special token (for add_space_prefix). */
sy_status sy__tok_encode_bpe(const sy_tokenizer *tok, sy__tok_work *w, const uint8_t *text,
                             size_t len, sy__tok_out *out);
sy_status sy__tok_encode_spm(const sy_tokenizer *tok, sy__tok_work *w, const uint8_t *text,
                             size_t len, bool first, sy__tok_out *out);

/* Splits |len| bytes of |text| into pre-tokenizer words: writes the byte
 * offset where each word ends to |out_ends| (at most |cap|; all counted in
 * *out_n).  Words cover the text in order.  SY_E_LIMIT when |cap| is too
 * small (the first |cap| ends are written), SY_E_NO_MEMORY.
 * For tests and for sy__tok_encode_bpe(). */
sy_status sy__pretok_split(sy__pretok pre, sy__tok_work *w, const uint8_t *text, size_t len,
                           uint32_t *out_ends, uint32_t cap, uint32_t *out_n);

/* Looks up a pre-tokenizer by tokenizer.ggml.pre name; false if unknown. */
bool sy__pretok_from_name(const char *name, sy__pretok *out_pre);

/* Canonical name of |pre| ("gpt2", "llama3", ...).  Static storage. */
const char *sy__pretok_name(sy__pretok pre);

/* Min-heap entry of the merge loops: |key| orders, |left|/|right| are
 * symbol indexes, |size| the bytes of the pair, |result| the id formed. */
typedef struct sy__tok_pair {
    uint64_t key;
    uint32_t left, right;
    uint32_t size;
    int32_t result;
} sy__tok_pair;

/* Pushes |p| on the heap of |*n| entries in |w->heap| (grown as needed). */
sy_status sy__tok_heap_push(sy__tok_buf *heap, uint32_t *n, const sy__tok_pair *p);

/* Pops the smallest entry of a non-empty heap into *out_p. */
void sy__tok_heap_pop(sy__tok_buf *heap, uint32_t *n, sy__tok_pair *out_p);

/* One symbol of the merge loops: bytes [start, start + len) of the piece,
 * linked to its live neighbours (-1 = none); len 0 once merged away. */
typedef struct sy__tok_sym {
    uint32_t start, len;
    int32_t prev, next;
    int32_t id; /* token id of the symbol's text, -1 = none */
} sy__tok_sym;

#ifdef __cplusplus
}
#endif
#endif
