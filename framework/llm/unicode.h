/* Unicode helpers for the tokenizers: UTF-8 decoding that never fails,
 * the character classes the pre-tokenizer patterns use, and the GPT-2
 * byte <-> code point mapping of byte-level BPE.
 *
 * Library-internal (framework/llm); not installed.  Everything here is
 * pure and thread-safe. */
#ifndef SWITCHYARD_LLM_UNICODE_H
#define SWITCHYARD_LLM_UNICODE_H

#include <stddef.h>
#include <stdint.h>

#ifdef __cplusplus
extern "C" {
#endif

/* Character classes, as bits. */
#define SY_UNICODE_LETTER 1u /* \p{L}: general category L* */
#define SY_UNICODE_NUMBER 2u /* \p{N}: general category N* */
#define SY_UNICODE_PUNCT 4u  /* \p{P}: general category P* */
#define SY_UNICODE_SPACE 8u  /* \s: the White_Space property */

/* The code point that stands for one byte of invalid UTF-8.  It is above
 * U+10FFFF so it can never be confused with a real character; it has no
 * class (like a symbol: [^\s\p{L}\p{N}]). */
#define SY_UNICODE_INVALID 0x110000u

/* One range of the generated table (unicode_tables.c). */
typedef struct sy__unicode_range {
    uint32_t lo, hi; /* inclusive */
    uint8_t flags;   /* SY_UNICODE_* bits */
} sy__unicode_range;

extern const char sy__unicode_version[];
extern const uint8_t sy__unicode_ascii_flags[128];
extern const sy__unicode_range sy__unicode_ranges[];
extern const uint32_t sy__unicode_range_count;

/* Decodes the UTF-8 character at |s| (|len| > 0 bytes available) and
 * returns its length in bytes (1..4) with the code point in *out_cp.
 * A byte that does not start a complete, shortest-form, non-surrogate
 * sequence of at most U+10FFFF is returned alone (length 1) as
 * SY_UNICODE_INVALID, so that every byte of any input is covered exactly
 * once.  Thread-safety: safe. */
size_t sy__utf8_decode(const uint8_t *s, size_t len, uint32_t *out_cp);

/* Returns the length (1..4) of the UTF-8 encoding of |cp| and writes it
 * to |out| (4 bytes of room); 0 for code points above U+10FFFF (nothing
 * written). */
size_t sy__utf8_encode(uint32_t cp, uint8_t *out);

/* Returns the SY_UNICODE_* classes of |cp| (0 for none, and for
 * SY_UNICODE_INVALID).  Binary search outside ASCII. */
uint32_t sy__unicode_flags(uint32_t cp);

/* GPT-2's byte-level mapping: byte |b| to the printable code point that
 * stands for it in byte-level BPE vocabularies (printable Latin-1 bytes
 * map to themselves, the other 68 bytes to U+0100.. in byte order). */
uint32_t sy__gpt2_byte_to_cp(uint8_t b);

/* The inverse of sy__gpt2_byte_to_cp(): returns the byte in 0..255, or
 * -1 when |cp| stands for no byte. */
int sy__gpt2_cp_to_byte(uint32_t cp);

#ifdef __cplusplus
}
#endif
#endif
