/* The capability file: what the emulated NPU runs, read once at init.
 *
 * Every field is optional and starts from the built-in defaults below,
 * which the shipped npusim.json spells out in full.  Unknown keys and
 * values outside what npusim can emulate are errors that name the file and
 * the field: a typo must not quietly describe a different NPU.  The format
 * is documented in docs/plugin-guide.md ("The npusim reference plugin"). */
#include <ctype.h>
#include <errno.h>
#include <math.h>
#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include <cjson/cJSON.h>

#include "npusim_internal.h"

/* A capability file larger than this is not a capability file. */
#define NPU_CONFIG_MAX_BYTES (1u << 20)
#define NPU_MAX_MEMORY ((uint64_t)1 << 40)
#define NPU_MIN_MEMORY ((uint64_t)1 << 16)

/* Ops npusim has integer kernels for, by catalogue name. */
static const struct {
    const char *name;
    uint32_t op;
} npu_known_ops[] = {
    {"matmul", SY_OP_MATMUL},
    {"add", SY_OP_ADD},
    {"mul", SY_OP_MUL},
};

/* Weight dtypes npusim can hold as integers: 32-element blocks of symmetric
 * int8/int5/int4 (Q8_0, Q5_0, Q4_0) or unsigned int5/int4 with a per-block
 * minimum (Q5_1, Q4_1, handled as a zero point). */
static const uint32_t npu_emulable_weights = (1u << SY_DTYPE_Q8_0) | (1u << SY_DTYPE_Q4_0) |
                                             (1u << SY_DTYPE_Q4_1) | (1u << SY_DTYPE_Q5_0) |
                                             (1u << SY_DTYPE_Q5_1);

void npu_caps_defaults(npu_caps *caps)
{
    memset(caps, 0, sizeof *caps);
    snprintf(caps->model, sizeof caps->model, "npusim W8A8 reference NPU (emulated)");
    snprintf(caps->source, sizeof caps->source, "built-in defaults");
    caps->memory_bytes = (uint64_t)1 << 30;
    caps->max_tensor_bytes = caps->memory_bytes;
    caps->compute_units = 4;
    caps->peak_ops = 4e12;
    caps->peak_bandwidth = 34e9;
    caps->op_mask = (1u << SY_OP_MATMUL) | (1u << SY_OP_ADD) | (1u << SY_OP_MUL);
    caps->weight_mask = (1u << SY_DTYPE_Q8_0) | (1u << SY_DTYPE_Q4_0);
    caps->act_bits = 8;
    caps->act_zero_point = true;
    caps->eltwise = NPU_ELTWISE_F16;
    caps->static_shapes = true;
    caps->k_multiple = 32;
    caps->max_rows = 0;
}

void npu_dtype_list(uint32_t mask, char *out, size_t size)
{
    size_t used = 0;
    out[0] = '\0';
    for (uint32_t t = 0; t < SY_DTYPE_COUNT; t++) {
        if (!(mask & (1u << t)))
            continue;
        int n = snprintf(out + used, size - used, "%s%s", used ? ", " : "", sy_dtype_name(t));
        if (n < 0 || (size_t)n >= size - used)
            break;
        used += (size_t)n;
    }
    if (!used)
        snprintf(out, size, "none");
}

void npu_caps_summary(const npu_caps *c, char *out, size_t size)
{
    char ops[64] = "", weights[96], max[32];
    size_t used = 0;
    for (size_t i = 0; i < sizeof npu_known_ops / sizeof npu_known_ops[0]; i++) {
        if (!(c->op_mask & (1u << npu_known_ops[i].op)))
            continue;
        int n = snprintf(ops + used, sizeof ops - used, "%s%s", used ? "," : "",
                         npu_known_ops[i].name);
        if (n > 0 && (size_t)n < sizeof ops - used)
            used += (size_t)n;
    }
    npu_dtype_list(c->weight_mask, weights, sizeof weights);
    for (char *p = weights; *p; p++)
        if (*p == ' ')
            memmove(p, p + 1, strlen(p));
    npu_format_size(c->max_tensor_bytes, max, sizeof max);
    char rows[32] = "";
    if (c->max_rows)
        snprintf(rows, sizeof rows, ", M<=%u", c->max_rows);
    char wide[32] = "";
    if (c->n_wide && c->act_bits == 8)
        snprintf(wide, sizeof wide, " (A16 on %u pattern%s)", c->n_wide, c->n_wide == 1 ? "" : "s");
    snprintf(out, size, "ops %s; weights %s; W8A%u%s %s %s dynamic; add/mul %s; %sK%%%u%s; "
             "tensor <= %s",
             used ? ops : "none", weights, c->act_bits, wide,
             c->act_per_block ? "per-block" : "per-row",
             c->act_zero_point ? "asymmetric" : "symmetric",
             c->eltwise == NPU_ELTWISE_F16 ? "f16" : c->eltwise == NPU_ELTWISE_INT8 ? "int8" : "f32",
             c->static_shapes ? "static shapes, " : "", c->k_multiple, rows, max);
}

/* ------------------------------------------------------------- parsing */

typedef struct npu_parser {
    const char *path;
    char *why;
    size_t why_size;
} npu_parser;

static sy_status npu_fail(npu_parser *p, const char *field, const char *fmt, ...)
    __attribute__((format(printf, 3, 4)));

static sy_status npu_fail(npu_parser *p, const char *field, const char *fmt, ...)
{
    char detail[256];
    va_list ap;
    va_start(ap, fmt);
    vsnprintf(detail, sizeof detail, fmt, ap);
    va_end(ap);
    if (field)
        snprintf(p->why, p->why_size, "%s: field '%s': %s", p->path, field, detail);
    else
        snprintf(p->why, p->why_size, "%s: %s", p->path, detail);
    return SY_E_FORMAT;
}

/* Refuses keys of |obj| outside the NULL-terminated |allowed| list. */
static sy_status npu_check_keys(npu_parser *p, const cJSON *obj, const char *where,
                                const char *const *allowed)
{
    const cJSON *item;
    cJSON_ArrayForEach(item, obj)
    {
        bool known = false;
        for (const char *const *a = allowed; *a && !known; a++)
            known = item->string && strcmp(item->string, *a) == 0;
        if (!known) {
            char field[128];
            snprintf(field, sizeof field, "%s%s%s", where, where[0] ? "." : "",
                     item->string ? item->string : "?");
            return npu_fail(p, field, "unknown key (a typo?)");
        }
    }
    return SY_OK;
}

/* Parses "1073741824", "1 GiB", "512M", "64KiB" (powers of 1024). */
static bool npu_parse_size_text(const char *s, uint64_t *out)
{
    errno = 0;
    char *end = NULL;
    double v = strtod(s, &end);
    if (errno || end == s || !(v >= 0) || !isfinite(v))
        return false;
    while (*end == ' ')
        end++;
    double mul = 1;
    switch (toupper((unsigned char)*end)) {
    case 'K':
        mul = 1024.0;
        end++;
        break;
    case 'M':
        mul = 1024.0 * 1024.0;
        end++;
        break;
    case 'G':
        mul = 1024.0 * 1024.0 * 1024.0;
        end++;
        break;
    case 'T':
        mul = 1024.0 * 1024.0 * 1024.0 * 1024.0;
        end++;
        break;
    default:
        break;
    }
    if (mul > 1 && *end == 'i')
        end++;
    if (*end == 'B')
        end++;
    if (*end != '\0' || v * mul > 18e18)
        return false;
    *out = (uint64_t)(v * mul);
    return true;
}

static sy_status npu_get_size(npu_parser *p, const cJSON *obj, const char *key,
                              const char *field, uint64_t lo, uint64_t hi, uint64_t *inout)
{
    const cJSON *v = cJSON_GetObjectItemCaseSensitive(obj, key);
    if (!v)
        return SY_OK;
    uint64_t bytes = 0;
    if (cJSON_IsNumber(v)) {
        double d = v->valuedouble;
        if (!(d >= 0) || d > 18e18 || d != floor(d))
            return npu_fail(p, field, "expected a whole number of bytes, got %g", d);
        bytes = (uint64_t)d;
    } else if (cJSON_IsString(v)) {
        if (!npu_parse_size_text(v->valuestring, &bytes))
            return npu_fail(p, field, "cannot read '%s' as a size (bytes, or e.g. \"512 MiB\")",
                            v->valuestring);
    } else {
        return npu_fail(p, field, "expected a size (a number of bytes or a string like \"1 GiB\")");
    }
    if (bytes < lo || bytes > hi) {
        char a[32], b[32], c[32];
        npu_format_size(bytes, a, sizeof a);
        npu_format_size(lo, b, sizeof b);
        npu_format_size(hi, c, sizeof c);
        return npu_fail(p, field, "%s is outside %s .. %s", a, b, c);
    }
    *inout = bytes;
    return SY_OK;
}

static sy_status npu_get_uint(npu_parser *p, const cJSON *obj, const char *key,
                              const char *field, uint32_t lo, uint32_t hi, uint32_t *inout)
{
    const cJSON *v = cJSON_GetObjectItemCaseSensitive(obj, key);
    if (!v)
        return SY_OK;
    if (!cJSON_IsNumber(v) || v->valuedouble != floor(v->valuedouble) || v->valuedouble < lo ||
        v->valuedouble > hi)
        return npu_fail(p, field, "expected a whole number in %u .. %u", lo, hi);
    *inout = (uint32_t)v->valuedouble;
    return SY_OK;
}

static sy_status npu_get_positive(npu_parser *p, const cJSON *obj, const char *key,
                                  const char *field, double *inout)
{
    const cJSON *v = cJSON_GetObjectItemCaseSensitive(obj, key);
    if (!v)
        return SY_OK;
    if (!cJSON_IsNumber(v) || !(v->valuedouble > 0) || !isfinite(v->valuedouble))
        return npu_fail(p, field, "expected a positive number");
    *inout = v->valuedouble;
    return SY_OK;
}

/* Matches string |key| of |obj| against |names|; leaves *inout alone when
 * the key is absent. */
static sy_status npu_get_choice(npu_parser *p, const cJSON *obj, const char *key,
                                const char *field, const char *const *names, uint32_t n,
                                uint32_t *inout)
{
    const cJSON *v = cJSON_GetObjectItemCaseSensitive(obj, key);
    if (!v)
        return SY_OK;
    char list[128] = "";
    size_t used = 0;
    for (uint32_t i = 0; i < n; i++) {
        if (cJSON_IsString(v) && strcmp(v->valuestring, names[i]) == 0) {
            *inout = i;
            return SY_OK;
        }
        int w = snprintf(list + used, sizeof list - used, "%s\"%s\"", i ? ", " : "", names[i]);
        if (w > 0 && (size_t)w < sizeof list - used)
            used += (size_t)w;
    }
    if (!cJSON_IsString(v))
        return npu_fail(p, field, "expected a string (npusim emulates %s)", list);
    return npu_fail(p, field, "'%s' is not emulated (npusim emulates %s)", v->valuestring, list);
}

static sy_status npu_parse_ops(npu_parser *p, const cJSON *root, npu_caps *c)
{
    const cJSON *ops = cJSON_GetObjectItemCaseSensitive(root, "ops");
    if (!ops)
        return SY_OK;
    if (!cJSON_IsArray(ops))
        return npu_fail(p, "ops", "expected an array of op names");
    uint32_t mask = 0;
    const cJSON *item;
    cJSON_ArrayForEach(item, ops)
    {
        if (!cJSON_IsString(item))
            return npu_fail(p, "ops", "expected op names (strings)");
        bool found = false;
        for (size_t i = 0; i < sizeof npu_known_ops / sizeof npu_known_ops[0]; i++) {
            if (strcmp(item->valuestring, npu_known_ops[i].name) == 0) {
                mask |= 1u << npu_known_ops[i].op;
                found = true;
            }
        }
        if (!found)
            return npu_fail(p, "ops", "op '%s' is not emulated (npusim has kernels for matmul, "
                            "add, mul)", item->valuestring);
    }
    c->op_mask = mask;
    return SY_OK;
}

static sy_status npu_parse_weights(npu_parser *p, const cJSON *mm, npu_caps *c)
{
    const cJSON *list = cJSON_GetObjectItemCaseSensitive(mm, "weight_dtypes");
    if (!list)
        return SY_OK;
    if (!cJSON_IsArray(list))
        return npu_fail(p, "matmul.weight_dtypes", "expected an array of dtype names");
    char emulable[96];
    npu_dtype_list(npu_emulable_weights, emulable, sizeof emulable);
    uint32_t mask = 0;
    const cJSON *item;
    cJSON_ArrayForEach(item, list)
    {
        uint32_t t = SY_DTYPE_COUNT;
        for (uint32_t d = 0; cJSON_IsString(item) && d < SY_DTYPE_COUNT; d++)
            if (strcmp(item->valuestring, sy_dtype_name(d)) == 0)
                t = d;
        if (t == SY_DTYPE_COUNT)
            return npu_fail(p, "matmul.weight_dtypes", "'%s' is not a dtype name",
                            cJSON_IsString(item) ? item->valuestring : "?");
        if (!(npu_emulable_weights & (1u << t)))
            return npu_fail(p, "matmul.weight_dtypes",
                            "%s weights cannot be held as integers (npusim emulates %s)",
                            sy_dtype_name(t), emulable);
        mask |= 1u << t;
    }
    c->weight_mask = mask;
    return SY_OK;
}

/* matmul.activations.int16_nodes: node-name patterns (fnmatch) whose
 * matmuls keep int16 activations, the mixed precision NPU toolchains
 * assign to layers whose activations have outliers. */
static sy_status npu_parse_wide(npu_parser *p, const cJSON *act, npu_caps *c)
{
    const char *field = "matmul.activations.int16_nodes";
    const cJSON *list = cJSON_GetObjectItemCaseSensitive(act, "int16_nodes");
    if (!list)
        return SY_OK;
    if (!cJSON_IsArray(list))
        return npu_fail(p, field, "expected an array of node-name patterns");
    uint32_t n = 0;
    const cJSON *item;
    cJSON_ArrayForEach(item, list)
    {
        if (!cJSON_IsString(item) || !item->valuestring[0])
            return npu_fail(p, field, "expected non-empty strings");
        if (n == NPU_MAX_WIDE)
            return npu_fail(p, field, "more than %d patterns", NPU_MAX_WIDE);
        if (strlen(item->valuestring) >= NPU_PATTERN_MAX)
            return npu_fail(p, field, "pattern '%s' is longer than %d bytes", item->valuestring,
                            NPU_PATTERN_MAX - 1);
        snprintf(c->wide[n++], NPU_PATTERN_MAX, "%s", item->valuestring);
    }
    c->n_wide = n;
    return SY_OK;
}

static sy_status npu_parse_matmul(npu_parser *p, const cJSON *root, npu_caps *c)
{
    const cJSON *mm = cJSON_GetObjectItemCaseSensitive(root, "matmul");
    if (!mm)
        return SY_OK;
    if (!cJSON_IsObject(mm))
        return npu_fail(p, "matmul", "expected an object");
    static const char *const keys[] = {"weight_dtypes", "activations", NULL};
    sy_status st = npu_check_keys(p, mm, "matmul", keys);
    if (st == SY_OK)
        st = npu_parse_weights(p, mm, c);
    if (st != SY_OK)
        return st;
    const cJSON *act = cJSON_GetObjectItemCaseSensitive(mm, "activations");
    if (!act)
        return SY_OK;
    if (!cJSON_IsObject(act))
        return npu_fail(p, "matmul.activations", "expected an object");
    static const char *const act_keys[] = {"dtype", "granularity", "scheme", "scaling",
                                           "int16_nodes", NULL};
    st = npu_check_keys(p, act, "matmul.activations", act_keys);
    if (st != SY_OK)
        return st;
    static const char *const dtypes[] = {"int8", "int16"};
    uint32_t d = c->act_bits == 16 ? 1 : 0;
    st = npu_get_choice(p, act, "dtype", "matmul.activations.dtype", dtypes, 2, &d);
    if (st != SY_OK)
        return st;
    c->act_bits = d ? 16 : 8;
    st = npu_parse_wide(p, act, c);
    if (st != SY_OK)
        return st;
    static const char *const gran[] = {"per_row", "per_block"};
    uint32_t g = c->act_per_block ? 1 : 0;
    st = npu_get_choice(p, act, "granularity", "matmul.activations.granularity", gran, 2, &g);
    if (st != SY_OK)
        return st;
    c->act_per_block = g == 1;
    static const char *const schemes[] = {"symmetric", "asymmetric"};
    uint32_t z = c->act_zero_point ? 1 : 0;
    st = npu_get_choice(p, act, "scheme", "matmul.activations.scheme", schemes, 2, &z);
    if (st != SY_OK)
        return st;
    c->act_zero_point = z == 1;
    /* One value today; parsed so that a file asking for static scales is
     * refused rather than silently emulated as dynamic. */
    static const char *const scaling[] = {"dynamic"};
    uint32_t unused = 0;
    return npu_get_choice(p, act, "scaling", "matmul.activations.scaling", scaling, 1, &unused);
}

static sy_status npu_parse_rules(npu_parser *p, const cJSON *root, npu_caps *c)
{
    const cJSON *el = cJSON_GetObjectItemCaseSensitive(root, "elementwise");
    if (el) {
        if (!cJSON_IsObject(el))
            return npu_fail(p, "elementwise", "expected an object");
        static const char *const keys[] = {"precision", NULL};
        static const char *const prec[] = {"f16", "int8", "f32"};
        uint32_t v = (uint32_t)c->eltwise;
        sy_status st = npu_check_keys(p, el, "elementwise", keys);
        if (st == SY_OK)
            st = npu_get_choice(p, el, "precision", "elementwise.precision", prec, 3, &v);
        if (st != SY_OK)
            return st;
        c->eltwise = (npu_eltwise_precision)v;
    }
    const cJSON *sr = cJSON_GetObjectItemCaseSensitive(root, "shape_rules");
    if (!sr)
        return SY_OK;
    if (!cJSON_IsObject(sr))
        return npu_fail(p, "shape_rules", "expected an object");
    static const char *const keys[] = {"static_shapes", "k_multiple", "max_rows", NULL};
    sy_status st = npu_check_keys(p, sr, "shape_rules", keys);
    if (st != SY_OK)
        return st;
    const cJSON *stat = cJSON_GetObjectItemCaseSensitive(sr, "static_shapes");
    if (stat) {
        if (!cJSON_IsBool(stat))
            return npu_fail(p, "shape_rules.static_shapes", "expected true or false");
        c->static_shapes = cJSON_IsTrue(stat);
    }
    st = npu_get_uint(p, sr, "k_multiple", "shape_rules.k_multiple", 1, 1u << 16, &c->k_multiple);
    if (st == SY_OK)
        st = npu_get_uint(p, sr, "max_rows", "shape_rules.max_rows", 0, 1u << 30, &c->max_rows);
    return st;
}

static sy_status npu_parse(npu_parser *p, const cJSON *root, npu_caps *c)
{
    if (!cJSON_IsObject(root))
        return npu_fail(p, NULL, "the top level must be an object");
    static const char *const keys[] = {"format", "model", "memory_bytes", "max_tensor_bytes",
                                       "compute_units", "peak_ops", "peak_bandwidth", "ops",
                                       "matmul", "elementwise", "shape_rules", NULL};
    sy_status st = npu_check_keys(p, root, "", keys);
    if (st != SY_OK)
        return st;
    const cJSON *fmt = cJSON_GetObjectItemCaseSensitive(root, "format");
    if (fmt && (!cJSON_IsString(fmt) || strcmp(fmt->valuestring, "npusim-capabilities/1") != 0))
        return npu_fail(p, "format", "expected \"npusim-capabilities/1\"");
    const cJSON *model = cJSON_GetObjectItemCaseSensitive(root, "model");
    if (model) {
        if (!cJSON_IsString(model) || !model->valuestring[0])
            return npu_fail(p, "model", "expected a non-empty string");
        snprintf(c->model, sizeof c->model, "%s", model->valuestring);
    }
    const bool max_given = cJSON_GetObjectItemCaseSensitive(root, "max_tensor_bytes") != NULL;
    st = npu_get_size(p, root, "memory_bytes", "memory_bytes", NPU_MIN_MEMORY, NPU_MAX_MEMORY,
                      &c->memory_bytes);
    if (st != SY_OK)
        return st;
    c->max_tensor_bytes = c->memory_bytes;
    st = npu_get_size(p, root, "max_tensor_bytes", "max_tensor_bytes", 1, NPU_MAX_MEMORY,
                      &c->max_tensor_bytes);
    if (st != SY_OK)
        return st;
    if (max_given && c->max_tensor_bytes > c->memory_bytes) {
        char a[32], b[32];
        npu_format_size(c->max_tensor_bytes, a, sizeof a);
        npu_format_size(c->memory_bytes, b, sizeof b);
        return npu_fail(p, "max_tensor_bytes", "%s is more than memory_bytes (%s)", a, b);
    }
    st = npu_get_uint(p, root, "compute_units", "compute_units", 1, 4096, &c->compute_units);
    if (st == SY_OK)
        st = npu_get_positive(p, root, "peak_ops", "peak_ops", &c->peak_ops);
    if (st == SY_OK)
        st = npu_get_positive(p, root, "peak_bandwidth", "peak_bandwidth", &c->peak_bandwidth);
    if (st == SY_OK)
        st = npu_parse_ops(p, root, c);
    if (st == SY_OK)
        st = npu_parse_matmul(p, root, c);
    if (st == SY_OK)
        st = npu_parse_rules(p, root, c);
    return st;
}

/* Line and column of byte |pos| of |text|, both from 1. */
static void npu_line_col(const char *text, size_t pos, unsigned *out_line, unsigned *out_col)
{
    unsigned line = 1, col = 1;
    for (size_t i = 0; i < pos && text[i]; i++) {
        if (text[i] == '\n') {
            line++;
            col = 1;
        } else {
            col++;
        }
    }
    *out_line = line;
    *out_col = col;
}

sy_status npu_caps_load(npu_caps *caps, const char *path, char *why, size_t why_size)
{
    npu_parser p = {.path = path, .why = why, .why_size = why_size};
    FILE *f = fopen(path, "rb");
    if (!f) {
        snprintf(why, why_size, "cannot open capability file %s: %s", path, strerror(errno));
        return SY_E_IO;
    }
    char *text = malloc(NPU_CONFIG_MAX_BYTES + 1);
    if (!text) {
        fclose(f);
        snprintf(why, why_size, "out of memory reading %s", path);
        return SY_E_NO_MEMORY;
    }
    size_t n = fread(text, 1, NPU_CONFIG_MAX_BYTES + 1, f);
    const bool read_error = ferror(f) != 0;
    fclose(f);
    sy_status st = SY_OK;
    if (read_error) {
        snprintf(why, why_size, "cannot read capability file %s", path);
        st = SY_E_IO;
        goto out_free_text;
    }
    if (n > NPU_CONFIG_MAX_BYTES) {
        st = npu_fail(&p, NULL, "larger than %u bytes; not a capability file",
                      NPU_CONFIG_MAX_BYTES);
        goto out_free_text;
    }
    text[n] = '\0';
    const char *end = NULL;
    cJSON *root = cJSON_ParseWithLengthOpts(text, n, &end, false);
    if (!root) {
        unsigned line = 0, col = 0;
        npu_line_col(text, end && end >= text ? (size_t)(end - text) : 0, &line, &col);
        st = npu_fail(&p, NULL, "not valid JSON (error near line %u, column %u)", line, col);
        goto out_free_text;
    }
    npu_caps parsed = *caps;
    st = npu_parse(&p, root, &parsed);
    cJSON_Delete(root);
    if (st == SY_OK) {
        *caps = parsed;
        snprintf(caps->source, sizeof caps->source, "%s", path);
    }
out_free_text:
    free(text);
    return st;
}
