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

/* Checks "LEFT=RIGHT" with both sides non-empty, split at the last '='
 * (a pattern may hold '=' but a device name or size never does). */
static bool check_assignment(const char *cmd, const char *opt, const char *what, const char *v)
{
    const char *eq = strrchr(v, '=');
    if (!eq || eq == v || !eq[1]) {
        fprintf(stderr, "switchyard %s: %s takes %s, got '%s'\n", cmd, opt, what, v);
        return false;
    }
    return true;
}

int sy_cli_parse_sched_option(const char *cmd, int argc, char **argv, int *i, sy_cli_sched *out)
{
    const char *o = argv[*i];
    bool list = strcmp(o, "--pin") == 0 || strcmp(o, "--mem") == 0;
    if (!list && strcmp(o, "--devices") != 0 && strcmp(o, "--device") != 0 &&
        strcmp(o, "--policy") != 0)
        return 0;
    if (*i + 1 >= argc || !argv[*i + 1][0]) {
        fprintf(stderr, "switchyard %s: %s needs a value\n", cmd, o);
        return -1;
    }
    const char *v = argv[++*i];
    if (strcmp(o, "--policy") == 0) {
        out->policy = v;
    } else if (!list) {
        out->devices = v;
    } else {
        bool pin = strcmp(o, "--pin") == 0;
        uint32_t *n = pin ? &out->n_pins : &out->n_mem;
        if (!check_assignment(cmd, o, pin ? "PATTERN=DEVICE" : "DEVICE=SIZE", v))
            return -1;
        if (*n == SY_CLI_MAX_SCHED_LIST) {
            fprintf(stderr, "switchyard %s: at most %d %s options\n", cmd, SY_CLI_MAX_SCHED_LIST,
                    o);
            return -1;
        }
        (pin ? out->pins : out->mem)[(*n)++] = v;
    }
    return 1;
}

void sy_cli_sched_apply(const sy_cli_sched *s, sy_session_options *so)
{
    if (s->devices)
        so->devices = s->devices;
    if (s->policy)
        so->policy = s->policy;
    so->pins = s->n_pins ? s->pins : NULL;
    so->n_pins = s->n_pins;
    so->mem = s->n_mem ? s->mem : NULL;
    so->n_mem = s->n_mem;
}
