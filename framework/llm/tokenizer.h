/* Tokenizers described by GGUF metadata: byte-level BPE ("gpt2") and
 * SentencePiece-style ("llama").
 *
 * A tokenizer is built from a plain description (sy_tokenizer_desc) so that
 * it depends on no file reader; sy_tokenizer_create_from_gguf() fills that
 * description from the tokenizer.ggml.* keys of an open GGUF file.
 *
 * Encoding follows llama.cpp's reading of the same metadata, so that ids
 * match what the models were run with:
 *
 *  1. Special tokens are cut out of the raw text first: tokens of type
 *     CONTROL and UNKNOWN when |parse_special| is set, USER_DEFINED tokens
 *     always.  Longer tokens are cut first (then lower ids), each leftmost
 *     first within the pieces still raw.
 *  2. Each remaining piece of raw text is encoded by the model:
 *     - gpt2: split into words by the pre-tokenizer named by
 *       tokenizer.ggml.pre (see sy_tokenizer_desc.pre), each word's bytes
 *       mapped to GPT-2's printable code points, then the merges applied in
 *       rank order (lowest rank first, leftmost first).
 *     - llama: spaces become U+2581 ("▁") (with one added in front when
 *       add_space_prefix is set and the piece starts the text or follows a
 *       special token), then adjacent symbols are merged greedily, highest
 *       score first (leftmost first on ties), while the pair forms a token;
 *       characters that form no token are written as <0xNN> byte tokens.
 *  3. With |add_special|, BOS is put first when add_bos is set and EOS last
 *     when add_eos is set.
 *
 * Invalid UTF-8 is handled as llama.cpp does: byte-level BPE replaces each
 * byte that does not start a valid sequence by U+FFFD (so such input does
 * not decode back byte for byte); SentencePiece takes a character's length
 * from its first byte and writes what forms no token as byte tokens (so
 * every byte decodes back).  Differences from llama.cpp, all on input it
 * handles poorly: overlong forms, surrogates and code points past U+10FFFF
 * count as invalid here (llama.cpp decodes some of them leniently or
 * throws); in SentencePiece a byte without a <0xNN> token becomes UNK (or
 * SY_E_UNSUPPORTED without one) where llama.cpp throws.  Like llama.cpp,
 * byte-level BPE drops a byte whose code point is not in the vocabulary
 * (SmolLM2's lacks 0x04, 0xF5 and a few more).
 *
 * Decoding reverses this: GPT-2 code points back to bytes, "▁" back to a
 * space, byte tokens to their byte; CONTROL, UNKNOWN and USER_DEFINED tokens
 * are written as their text.  So decode(encode(s)) == s for valid UTF-8,
 * except that SentencePiece reads a literal U+2581 in |s| as a space.
 *
 * Library-internal API of libswitchyard (framework/llm); not installed. */
#ifndef SWITCHYARD_LLM_TOKENIZER_H
#define SWITCHYARD_LLM_TOKENIZER_H

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

#include "switchyard/status.h"

#ifdef __cplusplus
extern "C" {
#endif

/* Token types, numbered as tokenizer.ggml.token_type stores them. */
typedef enum sy_token_type {
    SY_TOKEN_UNDEFINED = 0,
    SY_TOKEN_NORMAL = 1,
    SY_TOKEN_UNKNOWN = 2,
    SY_TOKEN_CONTROL = 3,
    SY_TOKEN_USER_DEFINED = 4,
    SY_TOKEN_UNUSED = 5,
    SY_TOKEN_BYTE = 6
} sy_token_type;

/* Longest token text accepted (bytes). */
#define SY_TOKENIZER_MAX_TOKEN_LEN 65536u

/* What a tokenizer is made of.  Every pointer is borrowed for the duration
 * of sy_tokenizer_create() only: the tokenizer copies what it keeps. */
typedef struct sy_tokenizer_desc {
    const char *model; /* tokenizer.ggml.model: "gpt2" | "llama" */
    /* tokenizer.ggml.pre (gpt2 only): NULL or "default" (llama.cpp's BPE
     * default: runs of punctuation, then GPT-2, then numbers in groups of
     * three ASCII digits); "gpt-2", "phi-2", "jina-es", "jina-de",
     * "roberta-bpe" (GPT-2); "llama3", "llama-v3", "llama-bpe", "falcon3",
     * "falcon-h1", "pixtral", "midm-2.0", "lfm2" (Llama-3: digits in
     * groups of up to three; a word that is a token is not merged);
     * "qwen2", "deepseek-r1-qwen", "megrez" (Llama-3 with single digits);
     * "smollm", "starcoder", "refact", "command-r", "codeshell", "exaone",
     * "minerva-7b" (each digit
     * alone, then GPT-2).  Other names are refused with SY_E_UNSUPPORTED. */
    const char *pre;
    uint32_t n_tokens;
    const char *const *tokens;      /* n_tokens texts, raw bytes */
    const uint32_t *token_lengths;  /* bytes of each text; NULL: strlen() */
    const float *scores;            /* n_tokens scores; NULL: all 0 (llama needs them) */
    const int32_t *token_types;     /* n_tokens sy_token_type; NULL: see below */
    uint32_t n_merges;              /* gpt2: merges, rank = index */
    const char *const *merges;      /* "left right" (split at the first space after byte 0) */
    const uint32_t *merge_lengths;  /* bytes of each merge; NULL: strlen() */
    int32_t bos, eos, eot, eom, unk, pad; /* ids, -1 = none; eot -1: found by text */
    bool add_bos, add_eos;          /* added by encode when |add_special| */
    bool add_space_prefix;          /* llama: tokenizer.ggml.add_space_prefix */
} sy_tokenizer_desc;
/* Without token_types every token is NORMAL except: the bos, eos, eot, eom
 * and pad ids (CONTROL), the unk id (UNKNOWN), and for "llama" the texts
 * <0x00>..<0xFF> (BYTE). */

typedef struct sy_tokenizer sy_tokenizer;

/* Fills |desc| with "no tokenizer": every id -1, every pointer NULL,
 * every flag false. */
void sy_tokenizer_desc_init(sy_tokenizer_desc *desc);

/* Creates a tokenizer from |desc|, validating it: a known model and
 * pre-tokenizer, special ids inside the vocabulary, token types in 0..6,
 * texts shorter than SY_TOKENIZER_MAX_TOKEN_LEN, and (gpt2) merges of two
 * tokens whose concatenation is a token.  Duplicate texts map to their
 * last id; duplicate merges keep their first rank.
 * Errors: SY_E_INVALID_ARG (NULL arguments), SY_E_UNSUPPORTED (model or
 * pre-tokenizer), SY_E_FORMAT (the description is inconsistent),
 * SY_E_NO_MEMORY; |err| (|err_size| bytes, may be NULL) then says which
 * field and which token, e.g. "merge 17 'a bc': 'bc' is not a token".
 * Ownership: caller owns *out_tok; free with sy_tokenizer_destroy().
 * Thread-safety: safe for distinct tokenizers. */
sy_status sy_tokenizer_create(const sy_tokenizer_desc *desc, sy_tokenizer **out_tok, char *err,
                              size_t err_size);

/* Destroys |tok|.  NULL is a no-op. */
void sy_tokenizer_destroy(sy_tokenizer *tok);

/* Encodes |len| bytes of |text| (any bytes; need not be NUL-terminated)
 * into token ids, as described at the top of this file.  Writes at most
 * |cap| ids to |out_ids| (may be NULL when |cap| is 0) and the number of
 * ids of the whole encoding to *out_n.
 * Errors: SY_E_LIMIT when |cap| is too small: *out_n is the count needed
 * and |out_ids| holds the first |cap| of them; SY_E_UNSUPPORTED (llama)
 * when a byte has no byte token and there is no UNK token; SY_E_NO_MEMORY.
 * Thread-safety: safe concurrently on one tokenizer (it is read only). */
sy_status sy_tokenizer_encode(const sy_tokenizer *tok, const char *text, size_t len,
                              bool add_special, bool parse_special, int32_t *out_ids,
                              uint32_t cap, uint32_t *out_n);

/* Writes the bytes token |id| stands for to |out| followed by a NUL, and
 * their count (without the NUL) to *out_len.  UNDEFINED and UNUSED tokens
 * stand for no bytes.  A BPE token may hold part of a UTF-8 character.
 * Errors: SY_E_INVALID_ARG for an id outside the vocabulary; SY_E_LIMIT
 * when |cap| < *out_len + 1 (nothing written; *out_len is the need).
 * Thread-safety: safe. */
sy_status sy_tokenizer_decode_token(const sy_tokenizer *tok, int32_t id, char *out, size_t cap,
                                    size_t *out_len);

/* Decodes |n| ids to text: the concatenation of their bytes (for "llama"
 * with add_space_prefix, less the one space the encoder put in front of
 * the first token), then a NUL; *out_len gets the length without the NUL.
 * Errors as sy_tokenizer_decode_token().  Thread-safety: safe. */
sy_status sy_tokenizer_decode(const sy_tokenizer *tok, const int32_t *ids, uint32_t n, char *out,
                              size_t cap, size_t *out_len);

/* Finds the token whose text is exactly the NUL-terminated |text|
 * (e.g. "<|im_start|>").  Returns SY_E_NOT_FOUND (*out_id = -1) when none
 * is.  Constant expected time.  Thread-safety: safe. */
sy_status sy_tokenizer_find(const sy_tokenizer *tok, const char *text, int32_t *out_id);

/* Returns the vocabulary size.  Thread-safety: safe. */
uint32_t sy_tokenizer_n_tokens(const sy_tokenizer *tok);

/* Returns the text of token |id| (NUL-terminated, owned by |tok|) and,
 * when |out_len| is not NULL, its length; NULL for an id out of range.
 * This is the vocabulary's text ("Ġthe", "▁the"), not the decoded bytes. */
const char *sy_tokenizer_token_text(const sy_tokenizer *tok, int32_t id, uint32_t *out_len);

/* Returns the sy_token_type of |id|, or SY_TOKEN_UNDEFINED out of range. */
sy_token_type sy_tokenizer_token_type(const sy_tokenizer *tok, int32_t id);

/* Returns the score of |id| (0 without scores or out of range). */
float sy_tokenizer_token_score(const sy_tokenizer *tok, int32_t id);

/* Special ids, -1 when the vocabulary has none.  eot is the description's
 * or, when that is -1, the first of "<|eot_id|>", "<|im_end|>",
 * "<end_of_turn>", "<|end|>", "<EOT>", "<|endoftext|>" in the vocabulary. */
int32_t sy_tokenizer_bos(const sy_tokenizer *tok);
int32_t sy_tokenizer_eos(const sy_tokenizer *tok);
int32_t sy_tokenizer_eot(const sy_tokenizer *tok);
int32_t sy_tokenizer_unk(const sy_tokenizer *tok);
int32_t sy_tokenizer_pad(const sy_tokenizer *tok);

/* The description's add_bos / add_eos flags. */
bool sy_tokenizer_adds_bos(const sy_tokenizer *tok);
bool sy_tokenizer_adds_eos(const sy_tokenizer *tok);

/* True when |id| ends generation: EOS, EOT, EOM, or a token whose text
 * is one of the end markers listed for eot above (or "<|eom_id|>").
 * Thread-safety: safe. */
bool sy_tokenizer_is_eog(const sy_tokenizer *tok, int32_t id);

/* True when |id| is a CONTROL or UNKNOWN token (text a caller may want to
 * hide when printing). */
bool sy_tokenizer_is_control(const sy_tokenizer *tok, int32_t id);

/* Returns the model name as created ("gpt2" or "llama") and the
 * pre-tokenizer's canonical name ("gpt2", "llama3", "qwen2", "smollm", or
 * "" for llama).  Ownership: static storage. */
const char *sy_tokenizer_model(const sy_tokenizer *tok);
const char *sy_tokenizer_pre(const sy_tokenizer *tok);

struct sy_gguf;

/* Builds a tokenizer from the tokenizer.ggml.* keys of the open file |g|:
 * model, pre, tokens, token_type, scores, merges, bos/eos/eot/eom/
 * unknown/padding_token_id, add_bos_token, add_eos_token,
 * add_space_prefix.  Missing optional keys take llama.cpp's defaults
 * (add_bos: true for llama and for gpt2 with a Llama-3 pre-tokenizer,
 * else false; add_space_prefix: true for llama).  |pre|, when not NULL, replaces tokenizer.ggml.pre (tests use
 * it to try other pre-tokenizers on a real vocabulary).
 * Errors: those of sy_tokenizer_create(), SY_E_FORMAT for missing or
 * mistyped keys (named in |err|).
 * Ownership: caller owns *out_tok; it keeps nothing of |g|.
 * Thread-safety: not concurrently with other calls on the same |g|. */
sy_status sy_tokenizer_create_from_gguf(struct sy_gguf *g, const char *pre,
                                        sy_tokenizer **out_tok, char *err, size_t err_size);

#ifdef __cplusplus
}
#endif
#endif
