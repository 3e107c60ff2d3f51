/* Round-trip checks shared by the tokenizer tests (test_tokenizer.c,
 * test_tokenizer_golden.c). */
#ifndef SY_TEST_TOKENIZER_UTIL_H
#define SY_TEST_TOKENIZER_UTIL_H

#include <criterion/criterion.h>
#include <stdlib.h>
#include <string.h>

#include "tokenizer.h"
#include "unicode.h"

/* decode(encode(text)) == |want| (|want_len| bytes). */
static inline void expect_decoded(const sy_tokenizer *tok, const char *text, size_t len,
                           bool parse_special, const char *want, size_t want_len)
{
    uint32_t n = 0;
    sy_status st = sy_tokenizer_encode(tok, text, len, false, parse_special, NULL, 0, &n);
    cr_assert(st == SY_OK || st == SY_E_LIMIT, "encode: %s", sy_status_name(st));
    int32_t *ids = malloc((n ? n : 1) * sizeof *ids);
    cr_assert_not_null(ids);
    cr_assert_eq(sy_tokenizer_encode(tok, text, len, false, parse_special, ids, n, &n), SY_OK);
    size_t out_len = 0;
    st = sy_tokenizer_decode(tok, ids, n, NULL, 0, &out_len);
    cr_assert(st == SY_E_LIMIT, "decode size query: %s", sy_status_name(st));
    char *out = malloc(out_len + 1);
    cr_assert_not_null(out);
    cr_assert_eq(sy_tokenizer_decode(tok, ids, n, out, out_len + 1, &out_len), SY_OK);
    bool same = out_len == want_len && memcmp(out, want, want_len) == 0;
    free(out);
    free(ids);
    cr_assert(same, "round trip of %zu bytes gave %zu bytes, want %zu", len, out_len, want_len);
}

/* decode(encode(text)) == text. */
static inline void expect_roundtrip(const sy_tokenizer *tok, const char *text, size_t len,
                             bool parse_special)
{
    expect_decoded(tok, text, len, parse_special, text, len);
}

/* |text| with every byte of invalid UTF-8 replaced by U+FFFD (what
 * byte-level BPE encodes); caller frees. */
static inline char *replace_invalid_utf8(const char *text, size_t len, size_t *out_len)
{
    char *out = malloc(len * 3 + 1);
    cr_assert_not_null(out);
    size_t o = 0;
    for (size_t i = 0; i < len;) {
        uint32_t cp;
        size_t k = sy__utf8_decode((const uint8_t *)text + i, len - i, &cp);
        if (cp == SY_UNICODE_INVALID) {
            memcpy(out + o, "\xef\xbf\xbd", 3);
            o += 3;
        } else {
            memcpy(out + o, text + i, k);
            o += k;
        }
        i += k;
    }
    *out_len = o;
    return out;
}

/* The round trip of |text| through a real tokenizer: exact for
 * SentencePiece, with invalid UTF-8 replaced for byte-level BPE. */
static inline void expect_model_roundtrip(const sy_tokenizer *tok, const char *text, size_t len,
                                   bool parse_special)
{
    if (strcmp(sy_tokenizer_model(tok), "gpt2") != 0) {
        expect_roundtrip(tok, text, len, parse_special);
        return;
    }
    size_t want_len;
    char *want = replace_invalid_utf8(text, len, &want_len);
    expect_decoded(tok, text, len, parse_special, want, want_len);
    free(want);
}

#endif
