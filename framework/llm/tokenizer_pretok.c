/* Pre-tokenizers of byte-level BPE: the regular expressions named by
 * tokenizer.ggml.pre, implemented by hand on code points (no regex
 * library).
 *
 * A pre-tokenizer is a chain of stages.  Each stage runs its pattern over
 * every piece the previous stages left, as a separate string (so that
 * lookahead stops at the piece's end), and cuts the piece at the start and
 * end of every match; text between matches stays a piece of its own.  The
 * words are the pieces left after the last stage.
 *
 * Classes: L = \p{L}, N = \p{N}, P = \p{P}, S = \s (White_Space); a byte
 * of invalid UTF-8 is a code point of no class. */
#include <string.h>

#include "tokenizer_internal.h"
#include "unicode.h"

typedef struct pre_ctx {
    const uint32_t *cps;
    const uint8_t *flags;
} pre_ctx;

/* Returns how many code points the stage's pattern matches at |pos| in the
 * piece ending at |end|, 0 for no match. */
typedef uint32_t (*pre_match_fn)(const pre_ctx *c, uint32_t pos, uint32_t end);

#define IS_L(i) ((c->flags[i] & SY_UNICODE_LETTER) != 0)
#define IS_N(i) ((c->flags[i] & SY_UNICODE_NUMBER) != 0)
#define IS_S(i) ((c->flags[i] & SY_UNICODE_SPACE) != 0)
/* [^\s\p{L}\p{N}] */
#define IS_OTHER(i) ((c->flags[i] & (SY_UNICODE_LETTER | SY_UNICODE_NUMBER | SY_UNICODE_SPACE)) == 0)

static uint32_t ascii_lower(uint32_t cp) { return (cp >= 'A' && cp <= 'Z') ? cp + 32 : cp; }

/* 's|'t|'re|'ve|'m|'ll|'d, ASCII case-insensitive when |fold|. */
static uint32_t match_contraction(const pre_ctx *c, uint32_t pos, uint32_t end, bool fold)
{
    if (c->cps[pos] != '\'' || pos + 1 >= end)
        return 0;
    uint32_t a = c->cps[pos + 1], b = pos + 2 < end ? c->cps[pos + 2] : 0;
    if (fold)
        a = ascii_lower(a), b = ascii_lower(b);
    if (a == 's' || a == 't' || a == 'm' || a == 'd')
        return 2;
    if ((a == 'r' && b == 'e') || (a == 'v' && b == 'e') || (a == 'l' && b == 'l'))
        return 3;
    return 0;
}

/* Whitespace at |pos| for \s+(?!\S)|\s+ : the whole run when it ends the
 * piece, else the run less its last character (which then leads the next
 * word), else the one character. */
static uint32_t match_space_tail(const pre_ctx *c, uint32_t pos, uint32_t end)
{
    uint32_t e = pos;
    while (e < end && IS_S(e))
        e++;
    if (e == end || e - pos == 1)
        return e - pos;
    return e - pos - 1;
}

/* 's|'t|'re|'ve|'m|'ll|'d| ?\p{L}+| ?\p{N}+| ?[^\s\p{L}\p{N}]+|\s+(?!\S)|\s+ */
static uint32_t match_gpt2(const pre_ctx *c, uint32_t pos, uint32_t end)
{
    uint32_t m = match_contraction(c, pos, end, false);
    if (m)
        return m;
    uint32_t q = (c->cps[pos] == ' ' && pos + 1 < end) ? pos + 1 : pos;
    uint32_t e = q;
    if (IS_L(q)) {
        while (e < end && IS_L(e))
            e++;
        return e - pos;
    }
    if (IS_N(q)) {
        while (e < end && IS_N(e))
            e++;
        return e - pos;
    }
    if (IS_OTHER(q)) {
        while (e < end && IS_OTHER(e))
            e++;
        return e - pos;
    }
    return match_space_tail(c, pos, end);
}

/* (?i:'s|'t|'re|'ve|'m|'ll|'d)|[^\r\n\p{L}\p{N}]?\p{L}+|\p{N}{1,max}|
 *  ?[^\s\p{L}\p{N}]+[\r\n]*|\s*[\r\n]+|\s+(?!\S)|\s+ */
static uint32_t match_llama3_n(const pre_ctx *c, uint32_t pos, uint32_t end, uint32_t max_digits)
{
    uint32_t m = match_contraction(c, pos, end, true);
    if (m)
        return m;
    uint32_t cp = c->cps[pos], e;
    bool newline = cp == '\r' || cp == '\n';
    if (IS_L(pos) || (!newline && !IS_N(pos) && pos + 1 < end && IS_L(pos + 1))) {
        e = pos + 1;
        while (e < end && IS_L(e))
            e++;
        return e - pos;
    }
    if (IS_N(pos)) {
        e = pos + 1;
        while (e < end && e - pos < max_digits && IS_N(e))
            e++;
        return e - pos;
    }
    uint32_t q = (cp == ' ' && pos + 1 < end) ? pos + 1 : pos;
    if (IS_OTHER(q)) {
        e = q;
        while (e < end && IS_OTHER(e))
            e++;
        while (e < end && (c->cps[e] == '\r' || c->cps[e] == '\n'))
            e++;
        return e - pos;
    }
    /* \s*[\r\n]+ : up to the last newline of the whitespace run. */
    e = pos;
    uint32_t last_nl = UINT32_MAX;
    while (e < end && IS_S(e)) {
        if (c->cps[e] == '\r' || c->cps[e] == '\n')
            last_nl = e;
        e++;
    }
    if (last_nl != UINT32_MAX)
        return last_nl + 1 - pos;
    return match_space_tail(c, pos, end);
}

static uint32_t match_llama3(const pre_ctx *c, uint32_t pos, uint32_t end)
{
    return match_llama3_n(c, pos, end, 3);
}

static uint32_t match_qwen2(const pre_ctx *c, uint32_t pos, uint32_t end)
{
    return match_llama3_n(c, pos, end, 1);
}

/* \p{N} */
static uint32_t match_one_number(const pre_ctx *c, uint32_t pos, uint32_t end)
{
    (void)end;
    return IS_N(pos) ? 1 : 0;
}

/* \p{N}+ */
static uint32_t match_numbers(const pre_ctx *c, uint32_t pos, uint32_t end)
{
    uint32_t e = pos;
    while (e < end && IS_N(e))
        e++;
    return e - pos;
}

/* [0-9][0-9][0-9] */
static uint32_t match_three_digits(const pre_ctx *c, uint32_t pos, uint32_t end)
{
    if (end - pos < 3)
        return 0;
    for (uint32_t i = pos; i < pos + 3; i++)
        if (c->cps[i] < '0' || c->cps[i] > '9')
            return 0;
    return 3;
}

/* [\p{P}\$\+<=>\^~\|]+ */
static bool is_punct_or_symbol(const pre_ctx *c, uint32_t i)
{
    uint32_t cp = c->cps[i];
    return (c->flags[i] & SY_UNICODE_PUNCT) || cp == '$' || cp == '+' || cp == '<' || cp == '=' ||
           cp == '>' || cp == '^' || cp == '~' || cp == '|';
}

static uint32_t match_punct_run(const pre_ctx *c, uint32_t pos, uint32_t end)
{
    uint32_t e = pos;
    while (e < end && is_punct_or_symbol(c, e))
        e++;
    return e - pos;
}

#undef IS_L
#undef IS_N
#undef IS_S
#undef IS_OTHER

typedef struct pre_chain {
    const char *name;
    uint32_t n_stages;
    pre_match_fn stages[4];
} pre_chain;

static const pre_chain pre_chains[] = {
    [SY__PRE_GPT2] = {"gpt2", 1, {match_gpt2}},
    [SY__PRE_LLAMA3] = {"llama3", 1, {match_llama3}},
    [SY__PRE_QWEN2] = {"qwen2", 1, {match_qwen2}},
    [SY__PRE_SMOLLM] = {"smollm", 2, {match_one_number, match_gpt2}},
    [SY__PRE_DEFAULT] = {"default", 4, {match_punct_run, match_gpt2, match_numbers, match_three_digits}},
};

/* tokenizer.ggml.pre names, grouped as llama.cpp groups them. */
static const struct {
    const char *name;
    sy__pretok pre;
} pre_names[] = {
    {"default", SY__PRE_DEFAULT},
    {"gpt-2", SY__PRE_GPT2},
    {"phi-2", SY__PRE_GPT2},
    {"jina-es", SY__PRE_GPT2},
    {"jina-de", SY__PRE_GPT2},
    {"roberta-bpe", SY__PRE_GPT2},
    {"llama3", SY__PRE_LLAMA3},
    {"llama-v3", SY__PRE_LLAMA3},
    {"llama-bpe", SY__PRE_LLAMA3},
    {"falcon3", SY__PRE_LLAMA3},
    {"falcon-h1", SY__PRE_LLAMA3},
    {"pixtral", SY__PRE_LLAMA3},
    {"midm-2.0", SY__PRE_LLAMA3},
    {"lfm2", SY__PRE_LLAMA3},
    {"qwen2", SY__PRE_QWEN2},
    {"deepseek-r1-qwen", SY__PRE_QWEN2},
    {"megrez", SY__PRE_QWEN2},
    {"smollm", SY__PRE_SMOLLM},
    {"starcoder", SY__PRE_SMOLLM},
    {"refact", SY__PRE_SMOLLM},
    {"command-r", SY__PRE_SMOLLM},
    {"codeshell", SY__PRE_SMOLLM},
    {"exaone", SY__PRE_SMOLLM},
    {"minerva-7b", SY__PRE_SMOLLM},
};

bool sy__pretok_from_name(const char *name, sy__pretok *out_pre)
{
    if (!name) {
        *out_pre = SY__PRE_DEFAULT;
        return true;
    }
    for (size_t i = 0; i < sizeof pre_names / sizeof pre_names[0]; i++) {
        if (strcmp(name, pre_names[i].name) == 0) {
            *out_pre = pre_names[i].pre;
            return true;
        }
    }
    return false;
}

const char *sy__pretok_name(sy__pretok pre)
{
    if ((unsigned)pre >= sizeof pre_chains / sizeof pre_chains[0])
        return "";
    return pre_chains[pre].name;
}

sy_status sy__pretok_split(sy__pretok pre, sy__tok_work *w, const uint8_t *text, size_t len,
                           uint32_t *out_ends, uint32_t cap, uint32_t *out_n)
{
    *out_n = 0;
    if ((unsigned)pre >= sizeof pre_chains / sizeof pre_chains[0])
        return SY_E_INVALID_ARG;
    if (len >= UINT32_MAX / 8)
        return SY_E_LIMIT;
    if (len == 0)
        return SY_OK;
    sy_status st;
    if ((st = sy__tok_buf_reserve(&w->cps, len * sizeof(uint32_t))) != SY_OK ||
        (st = sy__tok_buf_reserve(&w->offs, (len + 1) * sizeof(uint32_t))) != SY_OK ||
        (st = sy__tok_buf_reserve(&w->flags, len)) != SY_OK ||
        (st = sy__tok_buf_reserve(&w->cuts, len + 1)) != SY_OK)
        return st;
    uint32_t *cps = w->cps.ptr, *offs = w->offs.ptr;
    uint8_t *flags = w->flags.ptr, *cuts = w->cuts.ptr;
    uint32_t n = 0;
    for (size_t i = 0; i < len;) {
        uint32_t cp;
        size_t k = sy__utf8_decode(text + i, len - i, &cp);
        cps[n] = cp;
        offs[n] = (uint32_t)i;
        flags[n] = (uint8_t)sy__unicode_flags(cp);
        n++;
        i += k;
    }
    offs[n] = (uint32_t)len;
    memset(cuts, 0, n + 1);
    cuts[0] = cuts[n] = 1;

    const pre_ctx ctx = {cps, flags};
    const pre_chain *chain = &pre_chains[pre];
    for (uint32_t s = 0; s < chain->n_stages; s++) {
        pre_match_fn match = chain->stages[s];
        uint32_t start = 0;
        while (start < n) {
            uint32_t end = start + 1;
            while (!cuts[end])
                end++;
            for (uint32_t pos = start; pos < end;) {
                uint32_t m = match(&ctx, pos, end);
                if (!m) {
                    pos++;
                    continue;
                }
                cuts[pos] = cuts[pos + m] = 1;
                pos += m;
            }
            start = end;
        }
    }
    uint32_t count = 0;
    for (uint32_t i = 1; i <= n; i++) {
        if (!cuts[i])
            continue;
        if (count < cap)
            out_ends[count] = offs[i];
        count++;
    }
    *out_n = count;
    return count > cap ? SY_E_LIMIT : SY_OK;
}
