/* Option values several subcommands share: the KV cache type and the
 * context policy. */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "cli.h"

bool sy_cli_parse_kv_type(const char *name, sy_dtype *out)
{
    static const struct {
        const char *name;
        sy_dtype type;
    } types[] = {
        {"f16", SY_DTYPE_F16}, {"f32", SY_DTYPE_F32}, {"q8_0", SY_DTYPE_Q8_0}, {"q4_0", SY_DTYPE_Q4_0},
    };
    for (size_t i = 0; name && i < sizeof types / sizeof types[0]; i++) {
        if (strcmp(name, types[i].name) == 0) {
            *out = types[i].type;
            return true;
        }
    }
    return false;
}

bool sy_cli_parse_context_policy(const char *text, sy_session_options *so)
{
    if (!text)
        return false;
    if (strcmp(text, "error") == 0) {
        so->context_policy = SY_CONTEXT_ERROR;
        return true;
    }
    if (strcmp(text, "shift") == 0) {
        so->context_policy = SY_CONTEXT_SHIFT;
        return true;
    }
    if (strncmp(text, "window:", 7) == 0) {
        char *end = NULL;
        unsigned long n = strtoul(text + 7, &end, 10);
        if (end == text + 7 || *end || n == 0 || n > (1ul << 24) || text[7] == '-')
            return false;
        so->context_policy = SY_CONTEXT_WINDOW;
        so->window = (uint32_t)n;
        return true;
    }
    return false;
}
