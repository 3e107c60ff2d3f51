/* Tokenizers: hand-made tiny vocabularies for each rule, the pre-tokenizer
 * patterns, and golden ids from llama.cpp for the real SmolLM2 and Gemma 3
 * vocabularies (tests/fixtures/tokenizer/, made by
 * tools/make-tokenizer-goldens.py; those are in test_tokenizer_golden.c).
 *
 * The real models are read from $SY_MODELS_DIR or <source>/models (where
 * tools/fetch-models.sh puts them).  Without them the golden tests are
 * skipped, unless SY_REQUIRE_MODELS=1 (then they fail). */
#include <criterion/criterion.h>
#include <criterion/logging.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

#include "gguf.h"
#include "tokenizer.h"
#include "tokenizer_internal.h"
#include "unicode.h"

#include "test_tokenizer_util.h"

#ifndef SY_SOURCE_ROOT
#define SY_SOURCE_ROOT "."
#endif

/* ------------------------------------------------------------ helpers */

/* A tiny vocabulary under construction. */
typedef struct tvocab {
    char *tokens[1024];
    int32_t types[1024];
    float scores[1024];
    uint32_t n;
    const char *merges[64];
    uint32_t n_merges;
} tvocab;

static int32_t tv_add(tvocab *v, const char *text, int32_t type, float score)
{
    cr_assert_lt(v->n, 1024);
    v->tokens[v->n] = strdup(text);
    v->types[v->n] = type;
    v->scores[v->n] = score;
    return (int32_t)v->n++;
}

/* The 256 GPT-2 byte tokens, ids 0..255 in byte order. */
static void tv_add_gpt2_bytes(tvocab *v)
{
    for (uint32_t b = 0; b < 256; b++) {
        uint8_t buf[5] = {0};
        sy__utf8_encode(sy__gpt2_byte_to_cp((uint8_t)b), buf);
        tv_add(v, (const char *)buf, SY_TOKEN_NORMAL, 0);
    }
}

static void tv_free(tvocab *v)
{
    for (uint32_t i = 0; i < v->n; i++)
        free(v->tokens[i]);
}

static sy_tokenizer *tv_create(tvocab *v, const char *model, const char *pre, sy_tokenizer_desc *d)
{
    d->model = model;
    d->pre = pre;
    d->n_tokens = v->n;
    d->tokens = (const char *const *)v->tokens;
    d->token_types = v->types;
    d->scores = v->scores;
    d->n_merges = v->n_merges;
    d->merges = v->merges;
    sy_tokenizer *tok = NULL;
    char err[256];
    sy_status st = sy_tokenizer_create(d, &tok, err, sizeof err);
    cr_assert_eq(st, SY_OK, "create: %s (%s)", sy_status_name(st), err);
    return tok;
}

/* Encodes |text| and compares with the |n| ids given after it. */
static void expect_ids(const sy_tokenizer *tok, const char *text, bool add_special,
                       bool parse_special, uint32_t n, const int32_t *want)
{
    int32_t ids[256];
    uint32_t got = 0;
    sy_status st = sy_tokenizer_encode(tok, text, strlen(text), add_special, parse_special, ids,
                                       256, &got);
    cr_assert_eq(st, SY_OK, "encode '%s': %s", text, sy_status_name(st));
    char a[1024] = "", b[1024] = "";
    for (uint32_t i = 0; i < got; i++)
        snprintf(a + strlen(a), sizeof a - strlen(a), " %d", ids[i]);
    for (uint32_t i = 0; i < n; i++)
        snprintf(b + strlen(b), sizeof b - strlen(b), " %d", want[i]);
    cr_assert_str_eq(a, b, "encode '%s': got [%s ], want [%s ]", text, a, b);
}

#define EXPECT_IDS(tok, text, add, parse, ...)                                                     \
    do {                                                                                           \
        const int32_t want_[] = {__VA_ARGS__};                                                     \
        expect_ids(tok, text, add, parse, sizeof want_ / sizeof want_[0], want_);                  \
    } while (0)

/* ----------------------------------------------------- byte-level BPE */

/* Vocabulary: bytes 0..255, then a=.. tokens; merges as given. */
Test(tokenizer, bpe_applies_merges_in_rank_order)
{
    tvocab v = {0};
    tv_add_gpt2_bytes(&v);
    int32_t ab = tv_add(&v, "ab", 1, 0), bc = tv_add(&v, "bc", 1, 0);
    int32_t abc = tv_add(&v, "abc", 1, 0);
    v.merges[v.n_merges++] = "b c";
    v.merges[v.n_merges++] = "a b";
    v.merges[v.n_merges++] = "a bc";
    sy_tokenizer_desc d;
    sy_tokenizer_desc_init(&d);
    sy_tokenizer *tok = tv_create(&v, "gpt2", "gpt-2", &d);
    /* "b c" ranks first, so "abc" is a + bc, then a + bc -> abc. */
    EXPECT_IDS(tok, "abc", false, false, abc);
    EXPECT_IDS(tok, "abd", false, false, ab, 'd');
    EXPECT_IDS(tok, "bcb", false, false, bc, 'b');
    sy_tokenizer_destroy(tok);

    /* With "a b" first and no "ab c", "abc" stays ab + c. */
    v.merges[0] = "a b";
    v.merges[1] = "b c";
    v.n_merges = 2;
    tok = tv_create(&v, "gpt2", "gpt-2", &d);
    EXPECT_IDS(tok, "abc", false, false, ab, 'c');
    sy_tokenizer_destroy(tok);
    tv_free(&v);
}

Test(tokenizer, bpe_merges_the_leftmost_pair_on_equal_rank)
{
    tvocab v = {0};
    tv_add_gpt2_bytes(&v);
    int32_t aa = tv_add(&v, "aa", 1, 0);
    v.merges[v.n_merges++] = "a a";
    sy_tokenizer_desc d;
    sy_tokenizer_desc_init(&d);
    sy_tokenizer *tok = tv_create(&v, "gpt2", "gpt-2", &d);
    EXPECT_IDS(tok, "aaa", false, false, aa, 'a');
    EXPECT_IDS(tok, "aaaa", false, false, aa, aa);
    sy_tokenizer_destroy(tok);
    tv_free(&v);
}

Test(tokenizer, bpe_maps_spaces_and_control_bytes_through_gpt2_code_points)
{
    tvocab v = {0};
    tv_add_gpt2_bytes(&v);
    /* " a" is "\xc4\xa0a" (U+0120 'Ġ' stands for the space). */
    int32_t sp_a = tv_add(&v, "\xc4\xa0" "a", 1, 0);
    v.merges[v.n_merges++] = "\xc4\xa0 a";
    sy_tokenizer_desc d;
    sy_tokenizer_desc_init(&d);
    sy_tokenizer *tok = tv_create(&v, "gpt2", "gpt-2", &d);
    EXPECT_IDS(tok, "a a", false, false, 'a', sp_a);
    EXPECT_IDS(tok, "\n\t", false, false, '\n', '\t');
    const char text[] = "a a\n\t\x01\x7f\xc2\xad end";
    expect_roundtrip(tok, text, sizeof text - 1, false);
    sy_tokenizer_destroy(tok);
    tv_free(&v);
}

Test(tokenizer, replaces_invalid_utf8_by_u_fffd_in_byte_level_bpe)
{
    tvocab v = {0};
    tv_add_gpt2_bytes(&v);
    sy_tokenizer_desc d;
    sy_tokenizer_desc_init(&d);
    sy_tokenizer *tok = tv_create(&v, "gpt2", "llama3", &d);
    /* Byte tokens have the byte's value as id here. */
    EXPECT_IDS(tok, "\xff", false, false, 0xef, 0xbf, 0xbd);
    EXPECT_IDS(tok, "a\xc3", false, false, 'a', 0xef, 0xbf, 0xbd);
    const char bad[] = "\xff\xfe ab \xc3 \xe2\x82 \xed\xa0\x80 \xf4\x90\x80\x80 \xc0\xaf \x80";
    expect_model_roundtrip(tok, bad, sizeof bad - 1, true);
    sy_tokenizer_destroy(tok);
    tv_free(&v);
}

Test(tokenizer, cuts_control_tokens_only_when_parsing_special_text)
{
    tvocab v = {0};
    tv_add_gpt2_bytes(&v);
    int32_t start = tv_add(&v, "<|s|>", SY_TOKEN_CONTROL, 0);
    int32_t user = tv_add(&v, "<u>", SY_TOKEN_USER_DEFINED, 0);
    sy_tokenizer_desc d;
    sy_tokenizer_desc_init(&d);
    sy_tokenizer *tok = tv_create(&v, "gpt2", "gpt-2", &d);
    EXPECT_IDS(tok, "x<|s|>y", false, true, 'x', start, 'y');
    EXPECT_IDS(tok, "x<|s|>", false, false, 'x', '<', '|', 's', '|', '>');
    /* USER_DEFINED tokens are cut either way (as llama.cpp does). */
    EXPECT_IDS(tok, "<u>x<u>", false, false, user, 'x', user);
    expect_roundtrip(tok, "a<|s|>b<u>c", 11, true);
    expect_roundtrip(tok, "a<|s|>b<u>c", 11, false);
    sy_tokenizer_destroy(tok);
    tv_free(&v);
}

Test(tokenizer, cuts_longer_special_tokens_first)
{
    tvocab v = {0};
    tv_add_gpt2_bytes(&v);
    int32_t ab = tv_add(&v, "<ab>", SY_TOKEN_CONTROL, 0);
    int32_t bcd = tv_add(&v, "ab><cd", SY_TOKEN_CONTROL, 0);
    sy_tokenizer_desc d;
    sy_tokenizer_desc_init(&d);
    sy_tokenizer *tok = tv_create(&v, "gpt2", "gpt-2", &d);
    /* The six-byte token is cut first even though "<ab>" starts earlier. */
    EXPECT_IDS(tok, "<ab><cd>", false, true, '<', bcd, '>');
    EXPECT_IDS(tok, "<ab><ab>", false, true, ab, ab);
    sy_tokenizer_destroy(tok);
    tv_free(&v);
}

Test(tokenizer, adds_bos_and_eos_only_with_add_special)
{
    tvocab v = {0};
    tv_add_gpt2_bytes(&v);
    int32_t bos = tv_add(&v, "<s>", SY_TOKEN_CONTROL, 0);
    int32_t eos = tv_add(&v, "</s>", SY_TOKEN_CONTROL, 0);
    sy_tokenizer_desc d;
    sy_tokenizer_desc_init(&d);
    d.bos = bos, d.eos = eos, d.add_bos = true, d.add_eos = true;
    sy_tokenizer *tok = tv_create(&v, "gpt2", "gpt-2", &d);
    EXPECT_IDS(tok, "a", true, false, bos, 'a', eos);
    EXPECT_IDS(tok, "a", false, false, 'a');
    uint32_t n = 99;
    cr_assert_eq(sy_tokenizer_encode(tok, "", 0, false, true, NULL, 0, &n), SY_OK);
    cr_assert_eq(n, 0);
    EXPECT_IDS(tok, "", true, true, bos, eos);
    cr_assert_eq(sy_tokenizer_encode(tok, NULL, 0, false, false, NULL, 0, &n), SY_OK);
    cr_assert_eq(n, 0);
    sy_tokenizer_destroy(tok);
    tv_free(&v);
}

Test(tokenizer, reports_the_needed_count_when_the_buffer_is_short)
{
    tvocab v = {0};
    tv_add_gpt2_bytes(&v);
    sy_tokenizer_desc d;
    sy_tokenizer_desc_init(&d);
    sy_tokenizer *tok = tv_create(&v, "gpt2", "gpt-2", &d);
    int32_t ids[3] = {-7, -7, -7};
    uint32_t n = 0;
    cr_assert_eq(sy_tokenizer_encode(tok, "hello", 5, false, false, ids, 2, &n), SY_E_LIMIT);
    cr_assert_eq(n, 5);
    cr_assert_eq(ids[0], 'h');
    cr_assert_eq(ids[1], 'e');
    cr_assert_eq(ids[2], -7);
    cr_assert_eq(sy_tokenizer_encode(tok, "hello", 5, false, false, NULL, 1, &n), SY_E_INVALID_ARG);

    char out[4];
    size_t len = 0;
    const int32_t hello[] = {'h', 'e', 'l', 'l', 'o'};
    cr_assert_eq(sy_tokenizer_decode(tok, hello, 5, out, sizeof out, &len), SY_E_LIMIT);
    cr_assert_eq(len, 5);
    char big[6];
    cr_assert_eq(sy_tokenizer_decode(tok, hello, 5, big, sizeof big, &len), SY_OK);
    cr_assert_str_eq(big, "hello");
    const int32_t bad[] = {'h', 9999};
    cr_assert_eq(sy_tokenizer_decode(tok, bad, 2, big, sizeof big, &len), SY_E_INVALID_ARG);
    cr_assert_eq(sy_tokenizer_decode_token(tok, -1, big, sizeof big, &len), SY_E_INVALID_ARG);
    cr_assert_eq(sy_tokenizer_decode_token(tok, 'x', big, sizeof big, &len), SY_OK);
    cr_assert_str_eq(big, "x");
    sy_tokenizer_destroy(tok);
    tv_free(&v);
}

/* ------------------------------------------------------- validation */

static sy_status try_create(tvocab *v, const char *model, const char *pre, sy_tokenizer_desc *d,
                            char *err, size_t err_size)
{
    d->model = model;
    d->pre = pre;
    d->n_tokens = v->n;
    d->tokens = (const char *const *)v->tokens;
    d->token_types = v->types;
    d->n_merges = v->n_merges;
    d->merges = v->merges;
    sy_tokenizer *tok = (sy_tokenizer *)&tok;
    sy_status st = sy_tokenizer_create(d, &tok, err, err_size);
    if (st == SY_OK)
        sy_tokenizer_destroy(tok);
    else
        cr_assert_null(tok);
    return st;
}

Test(tokenizer, refuses_merges_that_name_unknown_tokens)
{
    tvocab v = {0};
    tv_add_gpt2_bytes(&v);
    v.merges[v.n_merges++] = "a b"; /* "ab" is not a token */
    sy_tokenizer_desc d;
    sy_tokenizer_desc_init(&d);
    char err[256];
    cr_assert_eq(try_create(&v, "gpt2", NULL, &d, err, sizeof err), SY_E_FORMAT);
    cr_assert(strstr(err, "merge 0 'a b'") != NULL, "%s", err);
    v.merges[0] = "a zz";
    cr_assert_eq(try_create(&v, "gpt2", NULL, &d, err, sizeof err), SY_E_FORMAT);
    cr_assert(strstr(err, "'zz' is not a token") != NULL, "%s", err);
    v.merges[0] = "nospace";
    cr_assert_eq(try_create(&v, "gpt2", NULL, &d, err, sizeof err), SY_E_FORMAT);
    cr_assert(strstr(err, "separated by a space") != NULL, "%s", err);
    tv_free(&v);
}

Test(tokenizer, refuses_ids_types_models_and_pre_tokenizers_it_does_not_know)
{
    tvocab v = {0};
    tv_add_gpt2_bytes(&v);
    sy_tokenizer_desc d;
    sy_tokenizer_desc_init(&d);
    char err[256];
    d.bos = 256;
    cr_assert_eq(try_create(&v, "gpt2", NULL, &d, err, sizeof err), SY_E_FORMAT);
    cr_assert(strstr(err, "bos_token_id 256 is outside the vocabulary of 256") != NULL, "%s", err);
    d.bos = -1;
    d.add_eos = true;
    cr_assert_eq(try_create(&v, "gpt2", NULL, &d, err, sizeof err), SY_E_FORMAT);
    d.add_eos = false;
    v.types[7] = 9;
    cr_assert_eq(try_create(&v, "gpt2", NULL, &d, err, sizeof err), SY_E_FORMAT);
    cr_assert(strstr(err, "token 7 has type 9") != NULL, "%s", err);
    v.types[7] = 1;
    cr_assert_eq(try_create(&v, "bert", NULL, &d, err, sizeof err), SY_E_UNSUPPORTED);
    cr_assert(strstr(err, "'bert'") != NULL, "%s", err);
    cr_assert_eq(try_create(&v, "gpt2", "no-such-pre", &d, err, sizeof err), SY_E_UNSUPPORTED);
    cr_assert(strstr(err, "'no-such-pre'") != NULL, "%s", err);
    cr_assert_eq(try_create(&v, NULL, NULL, &d, err, sizeof err), SY_E_UNSUPPORTED);
    v.n = 0;
    cr_assert_eq(try_create(&v, "gpt2", NULL, &d, err, sizeof err), SY_E_FORMAT);
    v.n = 256;
    sy_tokenizer *tok = NULL;
    cr_assert_eq(sy_tokenizer_create(NULL, &tok, err, sizeof err), SY_E_INVALID_ARG);
    cr_assert_eq(sy_tokenizer_create(&d, NULL, err, sizeof err), SY_E_INVALID_ARG);
    tv_free(&v);
}

Test(tokenizer, survives_odd_vocabularies)
{
    /* Empty texts, duplicates, a vocabulary without byte tokens. */
    tvocab v = {0};
    tv_add(&v, "", SY_TOKEN_NORMAL, 0);
    tv_add(&v, "", SY_TOKEN_CONTROL, 0);
    int32_t a1 = tv_add(&v, "a", SY_TOKEN_NORMAL, 0);
    int32_t a2 = tv_add(&v, "a", SY_TOKEN_NORMAL, 0);
    (void)a1;
    sy_tokenizer_desc d;
    sy_tokenizer_desc_init(&d);
    sy_tokenizer *tok = tv_create(&v, "gpt2", "gpt-2", &d);
    EXPECT_IDS(tok, "aa", false, true, a2, a2); /* the last duplicate wins */
    /* A byte without a token is dropped (as llama.cpp does), UNK or not. */
    EXPECT_IDS(tok, "ab", false, false, a2);
    sy_tokenizer_destroy(tok);
    int32_t unk = tv_add(&v, "<unk>", SY_TOKEN_UNKNOWN, 0);
    d.unk = unk;
    tok = tv_create(&v, "gpt2", "gpt-2", &d);
    EXPECT_IDS(tok, "ab", false, false, a2);
    int32_t id;
    cr_assert_eq(sy_tokenizer_find(tok, "<unk>", &id), SY_OK);
    cr_assert_eq(id, unk);
    cr_assert_eq(sy_tokenizer_find(tok, "zzz", &id), SY_E_NOT_FOUND);
    cr_assert_eq(id, -1);
    sy_tokenizer_destroy(tok);
    tv_free(&v);
}

Test(tokenizer, finds_end_of_generation_tokens)
{
    tvocab v = {0};
    tv_add_gpt2_bytes(&v);
    int32_t eot = tv_add(&v, "<|endoftext|>", SY_TOKEN_CONTROL, 0);
    int32_t im_end = tv_add(&v, "<|im_end|>", SY_TOKEN_CONTROL, 0);
    sy_tokenizer_desc d;
    sy_tokenizer_desc_init(&d);
    d.eos = eot;
    sy_tokenizer *tok = tv_create(&v, "gpt2", "smollm", &d);
    cr_assert_eq(sy_tokenizer_eot(tok), im_end);
    cr_assert(sy_tokenizer_is_eog(tok, eot));
    cr_assert(sy_tokenizer_is_eog(tok, im_end));
    cr_assert_not(sy_tokenizer_is_eog(tok, 'a'));
    cr_assert_not(sy_tokenizer_is_eog(tok, -1));
    cr_assert(sy_tokenizer_is_control(tok, im_end));
    cr_assert_str_eq(sy_tokenizer_model(tok), "gpt2");
    cr_assert_str_eq(sy_tokenizer_pre(tok), "smollm");
    sy_tokenizer_destroy(tok);
    tv_free(&v);
}

/* ------------------------------------------------------ SentencePiece */

/* Vocabulary: <unk>, <s>, </s>, 256 byte tokens (ids 3..258), then
 * pieces with scores. */
static void tv_add_spm_base(tvocab *v)
{
    tv_add(v, "<unk>", SY_TOKEN_UNKNOWN, 0);
    tv_add(v, "<s>", SY_TOKEN_CONTROL, 0);
    tv_add(v, "</s>", SY_TOKEN_CONTROL, 0);
    for (uint32_t b = 0; b < 256; b++) {
        char buf[8];
        snprintf(buf, sizeof buf, "<0x%02X>", b);
        tv_add(v, buf, SY_TOKEN_BYTE, 0);
    }
}

#define SP "\xe2\x96\x81" /* U+2581 */

Test(tokenizer, spm_merges_the_highest_scoring_pair_first)
{
    tvocab v = {0};
    tv_add_spm_base(&v);
    int32_t a = tv_add(&v, "a", 1, -10), b = tv_add(&v, "b", 1, -10), c = tv_add(&v, "c", 1, -10);
    int32_t ab = tv_add(&v, "ab", 1, -5), bc = tv_add(&v, "bc", 1, -3);
    int32_t sp = tv_add(&v, SP, 1, -10), spa = tv_add(&v, SP "a", 1, -1);
    sy_tokenizer_desc d;
    sy_tokenizer_desc_init(&d);
    d.unk = 0, d.bos = 1, d.eos = 2, d.add_bos = true;
    sy_tokenizer *tok = tv_create(&v, "llama", NULL, &d);
    EXPECT_IDS(tok, "abc", false, false, a, bc); /* bc (-3) beats ab (-5) */
    EXPECT_IDS(tok, "ab", false, false, ab);
    EXPECT_IDS(tok, "a b", true, false, 1, a, sp, b);
    EXPECT_IDS(tok, " abc", false, false, spa, bc);
    (void)c;
    expect_roundtrip(tok, " abc  a b ", 10, false);
    sy_tokenizer_destroy(tok);
    tv_free(&v);
}

Test(tokenizer, spm_falls_back_to_byte_tokens)
{
    tvocab v = {0};
    tv_add_spm_base(&v);
    int32_t a = tv_add(&v, "a", 1, -1);
    tv_add(&v, SP, 1, -1);
    sy_tokenizer_desc d;
    sy_tokenizer_desc_init(&d);
    d.unk = 0;
    sy_tokenizer *tok = tv_create(&v, "llama", NULL, &d);
    /* "é" is C3 A9: byte tokens are 3 + byte. */
    EXPECT_IDS(tok, "a\xc3\xa9", false, false, a, 3 + 0xc3, 3 + 0xa9);
    /* Invalid UTF-8: a character's length comes from its first byte, and
     * what forms no token is written as bytes. */
    const char bad[] = "a\xff\x80" "bcd\x80\xc3";
    expect_roundtrip(tok, bad, sizeof bad - 1, false);
    /* ... so a space swallowed by a broken sequence comes back as the
     * bytes of U+2581, as in llama.cpp. */
    expect_decoded(tok, "\xc3 a", 3, false, "\xc3\xe2\x96\x81" "a", 5);
    char out[8];
    size_t len;
    cr_assert_eq(sy_tokenizer_decode_token(tok, 3 + 'Z', out, sizeof out, &len), SY_OK);
    cr_assert_str_eq(out, "Z");
    sy_tokenizer_destroy(tok);
    tv_free(&v);
}

Test(tokenizer, spm_uses_unk_without_byte_tokens_and_refuses_without_either)
{
    tvocab v = {0};
    int32_t a = tv_add(&v, "a", 1, -1);
    sy_tokenizer_desc d;
    sy_tokenizer_desc_init(&d);
    sy_tokenizer *tok = tv_create(&v, "llama", NULL, &d);
    uint32_t n;
    cr_assert_eq(sy_tokenizer_encode(tok, "ab", 2, false, false, NULL, 0, &n), SY_E_UNSUPPORTED);
    sy_tokenizer_destroy(tok);
    int32_t unk = tv_add(&v, "<unk>", SY_TOKEN_UNKNOWN, 0);
    d.unk = unk;
    tok = tv_create(&v, "llama", NULL, &d);
    EXPECT_IDS(tok, "ab", false, false, a, unk);
    sy_tokenizer_destroy(tok);
    tv_free(&v);
}

Test(tokenizer, spm_adds_a_space_prefix_when_asked_and_decode_removes_it)
{
    tvocab v = {0};
    tv_add_spm_base(&v);
    int32_t hi = tv_add(&v, SP "hi", 1, -1);
    tv_add(&v, SP "h", 1, -2);
    tv_add(&v, "h", 1, -5);
    tv_add(&v, "i", 1, -5);
    tv_add(&v, SP, 1, -5);
    int32_t ctl = tv_add(&v, "<c>", SY_TOKEN_CONTROL, 0);
    sy_tokenizer_desc d;
    sy_tokenizer_desc_init(&d);
    d.add_space_prefix = true;
    sy_tokenizer *tok = tv_create(&v, "llama", NULL, &d);
    EXPECT_IDS(tok, "hi hi", false, false, hi, hi);
    /* After a special token the prefix is added again. */
    EXPECT_IDS(tok, "hi<c>hi", false, true, hi, ctl, hi);
    expect_roundtrip(tok, "hi hi", 5, false);
    sy_tokenizer_destroy(tok);
    tv_free(&v);
}

Test(tokenizer, spm_infers_byte_and_control_types_without_token_types)
{
    tvocab v = {0};
    tv_add_spm_base(&v);
    sy_tokenizer_desc d;
    sy_tokenizer_desc_init(&d);
    d.bos = 1;
    d.model = "llama";
    d.n_tokens = v.n;
    d.tokens = (const char *const *)v.tokens;
    sy_tokenizer *tok = NULL;
    cr_assert_eq(sy_tokenizer_create(&d, &tok, NULL, 0), SY_OK);
    cr_assert_eq(sy_tokenizer_token_type(tok, 3 + 0x41), SY_TOKEN_BYTE);
    cr_assert_eq(sy_tokenizer_token_type(tok, 1), SY_TOKEN_CONTROL);
    cr_assert_eq(sy_tokenizer_token_type(tok, 0), SY_TOKEN_NORMAL);
    sy_tokenizer_destroy(tok);
    tv_free(&v);
}

/* ----------------------------------------------------- pre-tokenizers */

/* Splits |text| with |pre| and compares the words, given as "a|b|c". */
static void expect_words(sy__pretok pre, const char *text, const char *want)
{
    sy__tok_work w = {0};
    uint32_t ends[512], n = 0;
    size_t len = strlen(text);
    cr_assert_eq(sy__pretok_split(pre, &w, (const uint8_t *)text, len, ends, 512, &n), SY_OK);
    char got[2048] = "";
    size_t start = 0;
    for (uint32_t i = 0; i < n; i++) {
        if (i)
            strcat(got, "|");
        strncat(got, text + start, ends[i] - start);
        start = ends[i];
    }
    cr_assert_eq(start, len);
    cr_assert_str_eq(got, want, "%s split of '%s'", sy__pretok_name(pre), text);
    sy__tok_work_free(&w);
}

Test(tokenizer, splits_words_with_the_gpt2_pattern)
{
    expect_words(SY__PRE_GPT2, "Hello world", "Hello| world");
    expect_words(SY__PRE_GPT2, "I'm here, they'll go", "I|'m| here|,| they|'ll| go");
    expect_words(SY__PRE_GPT2, "DON'T", "DON|'|T");
    expect_words(SY__PRE_GPT2, "a   b", "a|  | b");
    expect_words(SY__PRE_GPT2, "x  ", "x|  ");
    expect_words(SY__PRE_GPT2, "abc123 456", "abc|123| 456");
    expect_words(SY__PRE_GPT2, "hi!!! ??", "hi|!!!| ??");
    expect_words(SY__PRE_GPT2, "a\n\nb", "a|\n|\n|b");
    expect_words(SY__PRE_GPT2, "caf\xc3\xa9 \xe6\x97\xa5\xe6\x9c\xac", "caf\xc3\xa9| \xe6\x97\xa5\xe6\x9c\xac");
}

Test(tokenizer, splits_words_with_the_llama3_and_qwen2_patterns)
{
    expect_words(SY__PRE_LLAMA3, "DON'T you'RE", "DON|'T| you|'RE");
    expect_words(SY__PRE_LLAMA3, "1234567", "123|456|7");
    expect_words(SY__PRE_QWEN2, "1234", "1|2|3|4");
    expect_words(SY__PRE_LLAMA3, "!hello .world", "!hello| .|world");
    expect_words(SY__PRE_LLAMA3, "a;\n\nb", "a|;\n\n|b");
    expect_words(SY__PRE_LLAMA3, "x  \n  \n  y", "x|  \n  \n| | y");
    expect_words(SY__PRE_LLAMA3, "\tfoo", "\tfoo");
}

Test(tokenizer, splits_digits_alone_for_smollm_and_in_threes_for_default)
{
    expect_words(SY__PRE_SMOLLM, "abc123 def", "abc|1|2|3| def");
    expect_words(SY__PRE_SMOLLM, "a 12", "a| |1|2");
    expect_words(SY__PRE_DEFAULT, "x 1234567", "x| |123|456|7");
    expect_words(SY__PRE_DEFAULT, "a...b", "a|...|b");
}
