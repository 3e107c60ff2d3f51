/* Tokenizer golden tests: ids from llama.cpp for the real SmolLM2 and
 * Gemma 3 vocabularies (tests/fixtures/tokenizer/, made by
 * tools/make-tokenizer-goldens.py), linear-time encoding of a megabyte,
 * and random round trips (split from test_tokenizer.c).
 *
 * The real models are read from $SY_MODELS_DIR or <source>/models (where
 * tools/fetch-models.sh puts them).  Without them these tests are
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

/* ------------------------------------------------- golden files (real) */

static char *read_file(const char *path, size_t *out_len)
{
    FILE *f = fopen(path, "rb");
    if (!f)
        return NULL;
    fseek(f, 0, SEEK_END);
    long size = ftell(f);
    fseek(f, 0, SEEK_SET);
    char *buf = malloc((size_t)size + 1);
    if (buf && fread(buf, 1, (size_t)size, f) != (size_t)size) {
        free(buf);
        buf = NULL;
    }
    fclose(f);
    if (buf) {
        buf[size] = 0;
        *out_len = (size_t)size;
    }
    return buf;
}

typedef struct corpus {
    char *text[256];
    size_t len[256];
    uint32_t n;
} corpus;

static int hexval(char c)
{
    if (c >= '0' && c <= '9')
        return c - '0';
    if (c >= 'a' && c <= 'f')
        return c - 'a' + 10;
    if (c >= 'A' && c <= 'F')
        return c - 'A' + 10;
    return -1;
}

static void load_corpus(corpus *c)
{
    size_t size;
    char *buf = read_file(SY_SOURCE_ROOT "/tests/fixtures/tokenizer/corpus.txt", &size);
    cr_assert_not_null(buf, "cannot read the corpus");
    memset(c, 0, sizeof *c);
    for (char *line = buf; line && *line;) {
        char *nl = strchr(line, '\n');
        if (nl)
            *nl = 0;
        if (strncmp(line, "case: ", 6) == 0) {
            cr_assert_lt(c->n, 256);
            const char *s = line + 6;
            char *out = malloc(strlen(s) + 1);
            size_t o = 0;
            for (size_t i = 0; s[i]; i++) {
                if (s[i] != '\\') {
                    out[o++] = s[i];
                    continue;
                }
                char e = s[++i];
                if (e == 'n')
                    out[o++] = '\n';
                else if (e == 'r')
                    out[o++] = '\r';
                else if (e == 't')
                    out[o++] = '\t';
                else if (e == '\\')
                    out[o++] = '\\';
                else if (e == 'x' && hexval(s[i + 1]) >= 0 && hexval(s[i + 2]) >= 0) {
                    out[o++] = (char)(hexval(s[i + 1]) * 16 + hexval(s[i + 2]));
                    i += 2;
                } else
                    cr_assert_fail("corpus: bad escape in '%s'", line);
            }
            c->text[c->n] = out;
            c->len[c->n++] = o;
        }
        line = nl ? nl + 1 : NULL;
    }
    free(buf);
}

static void free_corpus(corpus *c)
{
    for (uint32_t i = 0; i < c->n; i++)
        free(c->text[i]);
}

static bool models_required(void)
{
    const char *r = getenv("SY_REQUIRE_MODELS");
    return r && strcmp(r, "1") == 0;
}

/* Opens models/|file| and builds its tokenizer (with |pre| replacing the
 * file's, when not NULL); NULL (test skipped) when the file is absent. */
static sy_tokenizer *open_model_tokenizer(const char *file, const char *pre)
{
    const char *dir = getenv("SY_MODELS_DIR");
    char path[1024];
    snprintf(path, sizeof path, "%s/%s", dir && *dir ? dir : SY_SOURCE_ROOT "/models", file);
    FILE *f = fopen(path, "rb");
    if (!f) {
        if (models_required())
            cr_assert_fail("%s is missing (SY_REQUIRE_MODELS=1); run tools/fetch-models.sh", path);
        cr_log_warn("%s is missing: run tools/fetch-models.sh", path);
        cr_skip_test("model file %s is missing", path);
        return NULL;
    }
    fclose(f);
    sy_gguf *g = NULL;
    sy_gguf_error gerr;
    sy_status st = sy_gguf_open(path, &g, &gerr);
    cr_assert_eq(st, SY_OK, "sy_gguf_open: %s: %s", sy_status_name(st), gerr.msg);
    sy_tokenizer *tok = NULL;
    char err[512];
    st = sy_tokenizer_create_from_gguf(g, pre, &tok, err, sizeof err);
    sy_gguf_close(g);
    cr_assert_eq(st, SY_OK, "tokenizer: %s: %s", sy_status_name(st), err);
    return tok;
}

/* Checks every golden line of |golden| and the round trip of every case. */
static void check_goldens(const char *model_file, const char *pre, const char *golden)
{
    sy_tokenizer *tok = open_model_tokenizer(model_file, pre);
    corpus c;
    load_corpus(&c);
    char path[1024];
    snprintf(path, sizeof path, SY_SOURCE_ROOT "/tests/fixtures/tokenizer/%s", golden);
    size_t size;
    char *buf = read_file(path, &size);
    cr_assert_not_null(buf, "cannot read %s", path);
    uint32_t lines = 0, matched = 0;
    int32_t *ids = malloc(65536 * sizeof *ids);
    cr_assert_not_null(ids);
    char report[4096] = "";
    for (char *line = buf; line && *line;) {
        char *nl = strchr(line, '\n');
        if (nl)
            *nl = 0;
        if (*line && *line != '#') {
            char *p = line;
            unsigned long ci = strtoul(p, &p, 10);
            while (*p == ' ')
                p++;
            bool special = strncmp(p, "special", 7) == 0;
            cr_assert(special || strncmp(p, "plain", 5) == 0, "bad golden line '%s'", line);
            p += special ? 7 : 5;
            cr_assert_lt(ci, c.n, "golden case %lu is not in the corpus", ci);
            uint32_t n = 0;
            sy_status st = sy_tokenizer_encode(tok, c.text[ci], c.len[ci], special, special, ids,
                                               65536, &n);
            cr_assert_eq(st, SY_OK, "encode case %lu: %s", ci, sy_status_name(st));
            bool same = true;
            uint32_t k = 0;
            for (;; k++) {
                while (*p == ' ')
                    p++;
                if (!*p)
                    break;
                long want = strtol(p, &p, 10);
                if (k >= n || ids[k] != want)
                    same = false;
            }
            if (k != n)
                same = false;
            lines++;
            if (same) {
                matched++;
            } else if (strlen(report) < sizeof report - 200) {
                snprintf(report + strlen(report), sizeof report - strlen(report),
                         "\n  case %lu %s: %u ids, golden has %u", ci, special ? "special" : "plain",
                         n, k);
            }
        }
        line = nl ? nl + 1 : NULL;
    }
    free(buf);
    cr_log_info("%s: %u of %u golden lines match", golden, matched, lines);
    cr_assert_gt(lines, 0, "%s has no golden lines", golden);
    cr_expect_eq(matched, lines, "%s: %u of %u golden lines match:%s", golden, matched, lines, report);
    for (uint32_t i = 0; i < c.n; i++) {
        expect_model_roundtrip(tok, c.text[i], c.len[i], true);
        expect_model_roundtrip(tok, c.text[i], c.len[i], false);
    }
    free(ids);
    free_corpus(&c);
    sy_tokenizer_destroy(tok);
}

#define SMOLLM2 "SmolLM2-135M-Instruct.Q4_1.gguf"
#define GEMMA3 "gemma-3-270m-q4_k_m.gguf"

Test(tokenizer_golden, smollm2_matches_llama_cpp_on_the_corpus)
{
    check_goldens(SMOLLM2, NULL, "smollm2.golden");
}

Test(tokenizer_golden, gpt2_pre_tokenizer_matches_llama_cpp_on_smollm2_vocabulary)
{
    check_goldens(SMOLLM2, "gpt-2", "smollm2-gpt2.golden");
}

Test(tokenizer_golden, llama3_pre_tokenizer_matches_llama_cpp_on_smollm2_vocabulary)
{
    check_goldens(SMOLLM2, "llama3", "smollm2-llama3.golden");
}

Test(tokenizer_golden, qwen2_pre_tokenizer_matches_llama_cpp_on_smollm2_vocabulary)
{
    check_goldens(SMOLLM2, "qwen2", "smollm2-qwen2.golden");
}

Test(tokenizer_golden, default_pre_tokenizer_matches_llama_cpp_on_smollm2_vocabulary)
{
    check_goldens(SMOLLM2, "default", "smollm2-default.golden");
}

Test(tokenizer_golden, gemma3_matches_llama_cpp_on_the_corpus)
{
    check_goldens(GEMMA3, NULL, "gemma3.golden");
}

static double now_ms(void)
{
    struct timespec ts;
    clock_gettime(CLOCK_MONOTONIC, &ts);
    return ts.tv_sec * 1e3 + ts.tv_nsec / 1e6;
}

/* Encodes about 1 MiB of the corpus, repeated, with a real vocabulary:
 * linear-time merging keeps this well under the bound (seconds, not the
 * minutes a quadratic loop would take). */
static void check_long_text(const char *model_file)
{
    sy_tokenizer *tok = open_model_tokenizer(model_file, NULL);
    corpus c;
    load_corpus(&c);
    size_t cap = 1u << 20, len = 0;
    char *text = malloc(cap + 4096);
    cr_assert_not_null(text);
    while (len < cap) {
        for (uint32_t i = 0; i < c.n && len < cap; i++) {
            memcpy(text + len, c.text[i], c.len[i]);
            len += c.len[i];
            text[len++] = '\n';
        }
    }
    uint32_t n = 0;
    double t0 = now_ms();
    sy_status st = sy_tokenizer_encode(tok, text, len, false, true, NULL, 0, &n);
    cr_assert_eq(st, SY_E_LIMIT);
    int32_t *ids = malloc((size_t)n * sizeof *ids);
    cr_assert_not_null(ids);
    double t1 = now_ms();
    cr_assert_eq(sy_tokenizer_encode(tok, text, len, false, true, ids, n, &n), SY_OK);
    double t2 = now_ms();
    cr_log_info("%s: encoded %zu bytes into %u tokens in %.1f ms (%.2f MB/s)", model_file, len, n,
                t2 - t1, len / 1e3 / (t2 - t1));
    fprintf(stderr, "tokenizer timing: %s: %zu bytes -> %u tokens in %.1f ms\n", model_file, len, n,
            t2 - t1);
    cr_assert_lt(t2 - t1, 20000.0, "encoding 1 MiB took %.0f ms", t2 - t1);
    (void)t0;
    free(ids);
    free(text);
    free_corpus(&c);
    sy_tokenizer_destroy(tok);
}

Test(tokenizer_golden, gemma3_encodes_a_megabyte_in_linear_time)
{
    check_long_text(GEMMA3);
}

Test(tokenizer_golden, smollm2_encodes_a_megabyte_in_linear_time)
{
    check_long_text(SMOLLM2);
}

/* Random text (fresh seed per run, printed): valid UTF-8 from a mixed
 * alphabet decodes back exactly; random bytes never crash and give ids
 * inside the vocabulary. */
static void check_random_text(const char *model_file)
{
    static const char *const pieces[] = {
        "a", "Z", "e", " ", "  ", "\n", "\t", "\r\n", "7", "42", "'s", "'LL", "!", "?!", ".", "<", ">",
        "<|", "|>", "\xc3\xa9", "\xe6\x97\xa5", "\xf0\x9f\x8e\x89", "\xc2\xa0",
        "\xe3\x80\x80", "\xd9\xa3", "<|im_end|>", "<end_of_turn>", "<b>", "the", " the", "ing",
    };
    sy_tokenizer *tok = open_model_tokenizer(model_file, NULL);
    unsigned seed = (unsigned)time(NULL) ^ (unsigned)clock();
    srand(seed);
    fprintf(stderr, "%s: random text with seed %u\n", model_file, seed);
    char text[1200];
    int32_t ids[1200];
    for (int round = 0; round < 400; round++) {
        size_t len = 0;
        int n_pieces = rand() % 60;
        for (int i = 0; i < n_pieces; i++) {
            const char *p = pieces[rand() % (int)(sizeof pieces / sizeof pieces[0])];
            memcpy(text + len, p, strlen(p));
            len += strlen(p);
        }
        expect_roundtrip(tok, text, len, round & 1);
        /* Raw bytes: anything goes but a crash or an id out of range. */
        len = (size_t)(rand() % 300);
        for (size_t i = 0; i < len; i++)
            text[i] = (char)(rand() & 0xff);
        uint32_t n = 0;
        sy_status st = sy_tokenizer_encode(tok, text, len, true, round & 1, ids, 1200, &n);
        cr_assert_eq(st, SY_OK, "seed %u round %d: %s", seed, round, sy_status_name(st));
        for (uint32_t i = 0; i < n; i++)
            cr_assert(ids[i] >= 0 && (uint32_t)ids[i] < sy_tokenizer_n_tokens(tok));
        char out[4096];
        size_t out_len;
        cr_assert_eq(sy_tokenizer_decode(tok, ids, n, out, sizeof out, &out_len), SY_OK);
    }
    sy_tokenizer_destroy(tok);
}

Test(tokenizer_golden, smollm2_round_trips_random_text_and_survives_random_bytes)
{
    check_random_text(SMOLLM2);
}

Test(tokenizer_golden, gemma3_round_trips_random_text_and_survives_random_bytes)
{
    check_random_text(GEMMA3);
}
