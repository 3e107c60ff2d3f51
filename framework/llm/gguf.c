/* GGUF reader: maps a file read-only and validates it field by field before
 * handing out any pointer into it.  See gguf.h for the format and the API;
 * opening and mapping the file is gguf_open.c, the name index gguf_index.c,
 * the queries on an open file gguf_query.c, the writer gguf_writer.c. */
#include "gguf.h"
#include "gguf_internal.h"

#include <errno.h>
#include <fcntl.h>
#include <inttypes.h>
#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/mman.h>
#include <sys/stat.h>
#include <unistd.h>

#if !defined(__BYTE_ORDER__) || __BYTE_ORDER__ != __ORDER_LITTLE_ENDIAN__
#error "the GGUF reader hands out file bytes as host values: little-endian hosts only"
#endif

/* Smallest possible encodings.  A count is refused before anything is
 * allocated for it when the bytes left in the file cannot hold that many
 * of the smallest items. */
#define GGUF_HEADER_SIZE SY__GGUF_HEADER_SIZE
#define GGUF_MIN_KV_SIZE 14u     /* key length 8 + 1 key byte + type 4 + 1 value byte */
#define GGUF_MIN_TENSOR_SIZE 32u /* name length 8 + n_dims 4 + ne 8 + type 4 + offset 8 */
#define GGUF_MIN_STRING_SIZE 8u  /* length only */
#define GGUF_MIN_ARRAY_SIZE 12u  /* element type 4 + count 8 */
#define GGUF_MAX_KEY_LEN 65535u
#define GGUF_MAX_COUNT 0x7fffffffu /* indices are kept in 32 bits */
#define GGUF_QUOTE_MAX 80u         /* bytes of a name shown in a message */

/* Parse state.  |section|, |item|, |name| and |elem| say where the parser
 * is, so that a message can name the field without formatting anything on
 * the success path. */
typedef struct gguf_parser {
    sy_gguf *g;
    uint64_t pos;
    char *err; /* SY_GGUF_ERROR_MAX bytes */
    uint64_t arena_len;
    uint64_t arena_cap;
    const char *section; /* "header", "key" or "tensor" */
    uint64_t item;
    const uint8_t *name; /* key or tensor name once read, else NULL */
    uint64_t name_len;
    int64_t elem; /* array element being read, or -1 */
} gguf_parser;

/* --------------------------------------------------------------- messages */

/* Writes |len| bytes of |s| into |dst| as a quoted name: printable ASCII
 * as is, other bytes as \xHH, cut at GGUF_QUOTE_MAX with "...". */
static void quote_bytes(char *dst, size_t cap, const uint8_t *s, uint64_t len)
{
    size_t o = 0;
    uint64_t shown = len < GGUF_QUOTE_MAX ? len : GGUF_QUOTE_MAX;
    if (cap < 8)
        return;
    dst[o++] = '\'';
    for (uint64_t i = 0; i < shown && o + 8 < cap; i++) {
        uint8_t c = s[i];
        if (c >= 0x20 && c < 0x7f && c != '\\' && c != '\'') {
            dst[o++] = (char)c;
        } else {
            snprintf(dst + o, cap - o, "\\x%02x", c);
            o += 4;
        }
    }
    if (shown < len && o + 5 < cap) {
        memcpy(dst + o, "...", 3);
        o += 3;
    }
    dst[o++] = '\'';
    dst[o] = '\0';
}

void sy__gguf_vset_error(char *err, const char *path, const char *fmt, va_list ap)
{
    int n = snprintf(err, SY_GGUF_ERROR_MAX, "%s: ", path);
    if (n < 0 || (size_t)n >= SY_GGUF_ERROR_MAX)
        return;
    vsnprintf(err + n, SY_GGUF_ERROR_MAX - (size_t)n, fmt, ap);
}

__attribute__((format(printf, 3, 4))) static sy_status failf(gguf_parser *p, sy_status st,
                                                             const char *fmt, ...)
{
    va_list ap;
    va_start(ap, fmt);
    sy__gguf_vset_error(p->err, p->g->path, fmt, ap);
    va_end(ap);
    return st;
}

/* Describes the parser's position: "key 5 'general.name', array element 3". */
static const char *where(const gguf_parser *p, char *buf, size_t cap)
{
    char q[GGUF_QUOTE_MAX * 4 + 8] = "";
    int n;
    if (p->name)
        quote_bytes(q, sizeof q, p->name, p->name_len);
    if (strcmp(p->section, "header") == 0)
        n = snprintf(buf, cap, "header");
    else
        n = snprintf(buf, cap, "%s %" PRIu64 "%s%s", p->section, p->item, q[0] ? " " : "", q);
    if (p->elem >= 0 && n >= 0 && (size_t)n < cap)
        snprintf(buf + n, cap - (size_t)n, ", array element %" PRId64, p->elem);
    return buf;
}

/* ------------------------------------------------------------ raw reading */

static uint32_t load_u32(const uint8_t *q)
{
    uint32_t v;
    memcpy(&v, q, sizeof v);
    return v;
}

static uint64_t load_u64(const uint8_t *q)
{
    uint64_t v;
    memcpy(&v, q, sizeof v);
    return v;
}

static uint64_t bytes_left(const gguf_parser *p)
{
    return p->g->size - p->pos;
}

/* Consumes |n| bytes of |field|, or fails naming the field and the place. */
static sy_status take(gguf_parser *p, uint64_t n, const char *field, const uint8_t **out_ptr)
{
    *out_ptr = NULL;
    if (n > bytes_left(p)) {
        char w[GGUF_QUOTE_MAX * 4 + 64];
        return failf(p, SY_E_FORMAT,
                     "truncated: %s: %s needs %" PRIu64 " bytes at byte %" PRIu64
                     ", file has %" PRIu64,
                     where(p, w, sizeof w), field, n, p->pos, p->g->size);
    }
    *out_ptr = p->g->base + p->pos;
    p->pos += n;
    return SY_OK;
}

static sy_status read_u32(gguf_parser *p, const char *field, uint32_t *out_value)
{
    const uint8_t *q;
    sy_status st = take(p, 4, field, &q);
    if (st == SY_OK)
        *out_value = load_u32(q);
    return st;
}

static sy_status read_u64(gguf_parser *p, const char *field, uint64_t *out_value)
{
    const uint8_t *q;
    sy_status st = take(p, 8, field, &q);
    if (st == SY_OK)
        *out_value = load_u64(q);
    return st;
}

/* Refuses |count| items of at least |min_size| bytes each when the rest of
 * the file cannot hold them — before anything is allocated for them. */
static sy_status check_count(gguf_parser *p, const char *field, uint64_t count,
                             uint64_t min_size)
{
    if (count > bytes_left(p) / min_size) {
        char w[GGUF_QUOTE_MAX * 4 + 64];
        return failf(p, SY_E_FORMAT,
                     "%s: %s %" PRIu64 " needs at least %" PRIu64 " bytes each, only %" PRIu64
                     " bytes follow byte %" PRIu64 " (file has %" PRIu64 ")",
                     where(p, w, sizeof w), field, count, min_size, bytes_left(p), p->pos,
                     p->g->size);
    }
    return SY_OK;
}

/* Copies |len| bytes and a NUL into the arena; returns the copy's offset
 * (pointers are taken once the arena stops growing). */
static sy_status arena_push(gguf_parser *p, const uint8_t *s, uint64_t len, uint64_t *out_off)
{
    uint64_t need;
    if (__builtin_add_overflow(p->arena_len, len, &need) ||
        __builtin_add_overflow(need, 1, &need) || need > SIZE_MAX)
        return failf(p, SY_E_NO_MEMORY, "out of memory for names");
    if (need > p->arena_cap) {
        uint64_t cap = p->arena_cap ? p->arena_cap : 1024;
        while (cap < need)
            cap = cap > UINT64_MAX / 2 ? need : cap * 2;
        if (cap > SIZE_MAX)
            cap = need;
        char *a = realloc(p->g->arena, (size_t)cap);
        if (!a)
            return failf(p, SY_E_NO_MEMORY, "out of memory for names (%" PRIu64 " bytes)", cap);
        p->g->arena = a;
        p->arena_cap = cap;
    }
    memcpy(p->g->arena + p->arena_len, s, (size_t)len);
    p->g->arena[p->arena_len + len] = '\0';
    *out_off = p->arena_len;
    p->arena_len = need;
    return SY_OK;
}

/* ----------------------------------------------------------------- values */

static sy_status parse_array(gguf_parser *p, uint32_t depth, uint64_t **out_index,
                             sy_gguf_value *out_value);

/* Reads one value of |type| into |out_value|.  Strings are views of the
 * mapping here; a key's own string is copied later by the caller. */
static sy_status parse_value(gguf_parser *p, uint32_t type, uint32_t depth,
                             uint64_t **out_index, sy_gguf_value *out_value)
{
    sy_status st;
    const uint8_t *q;
    memset(out_value, 0, sizeof *out_value);
    out_value->type = type;
    if (type == SY_GGUF_TYPE_ARRAY)
        return parse_array(p, depth, out_index, out_value);
    if (type == SY_GGUF_TYPE_STRING) {
        uint64_t len;
        st = read_u64(p, "string length", &len);
        if (st != SY_OK)
            return st;
        st = check_count(p, "string length", len, 1);
        if (st != SY_OK)
            return st;
        st = take(p, len, "string bytes", &q);
        if (st != SY_OK)
            return st;
        out_value->count = len;
        out_value->data = q;
        out_value->end_ = q + len;
        return SY_OK;
    }
    st = take(p, sy_gguf_type_size(type), "value", &q);
    if (st != SY_OK)
        return st;
    out_value->count = 1;
    out_value->data = q;
    out_value->end_ = q + sy_gguf_type_size(type);
    return SY_OK;
}

/* Reads an array's element type, count and elements.  When |out_index| is
 * not NULL and the elements vary in size, fills *out_index with each
 * element's offset from the first (owned by the caller). */
static sy_status parse_array(gguf_parser *p, uint32_t depth, uint64_t **out_index,
                             sy_gguf_value *out_value)
{
    char w[GGUF_QUOTE_MAX * 4 + 64];
    uint32_t et;
    uint64_t n;
    sy_status st;
    if (depth >= SY_GGUF_MAX_DEPTH)
        return failf(p, SY_E_LIMIT, "%s: arrays nested more than %u deep", where(p, w, sizeof w),
                     SY_GGUF_MAX_DEPTH);
    st = read_u32(p, "array element type", &et);
    if (st != SY_OK)
        return st;
    if (et >= SY_GGUF_TYPE_COUNT)
        return failf(p, SY_E_FORMAT, "%s: array element type %" PRIu32 " is not a GGUF type",
                     where(p, w, sizeof w), et);
    st = read_u64(p, "array length", &n);
    if (st != SY_OK)
        return st;
    uint32_t es = sy_gguf_type_size(et);
    uint32_t min = es ? es
                      : (et == SY_GGUF_TYPE_STRING ? GGUF_MIN_STRING_SIZE : GGUF_MIN_ARRAY_SIZE);
    st = check_count(p, "array length", n, min);
    if (st != SY_OK)
        return st;
    out_value->type = SY_GGUF_TYPE_ARRAY;
    out_value->elem_type = et;
    out_value->count = n;
    out_value->data = p->g->base + p->pos;
    if (es) {
        const uint8_t *q;
        st = take(p, n * es, "array elements", &q); /* n * es fits: checked above */
        if (st != SY_OK)
            return st;
        out_value->end_ = q + n * es;
        return SY_OK;
    }

    uint64_t *index = NULL;
    if (out_index && n > 0) {
        index = malloc((size_t)n * sizeof *index); /* n * 8 <= bytes left */
        if (!index)
            return failf(p, SY_E_NO_MEMORY, "%s: out of memory for %" PRIu64 " array offsets",
                         where(p, w, sizeof w), n);
    }
    uint64_t start = p->pos;
    int64_t outer_elem = p->elem;
    for (uint64_t i = 0; i < n; i++) {
        sy_gguf_value elem;
        if (index)
            index[i] = p->pos - start;
        p->elem = (int64_t)i;
        st = parse_value(p, et, depth + 1, NULL, &elem);
        if (st != SY_OK)
            goto out_free_index;
    }
    p->elem = outer_elem;
    out_value->end_ = p->g->base + p->pos;
    if (out_index)
        *out_index = index;
    return SY_OK;

out_free_index:
    free(index);
    return st;
}

/* ------------------------------------------------------------------ parse */

static sy_status parse_header(gguf_parser *p)
{
    sy_gguf *g = p->g;
    const uint8_t *magic;
    uint32_t version;
    sy_status st;

    st = take(p, 4, "magic", &magic);
    if (st != SY_OK)
        return st;
    if (memcmp(magic, "GGUF", 4) != 0) {
        char q[64];
        quote_bytes(q, sizeof q, magic, 4);
        return failf(p, SY_E_FORMAT, "bad magic %s at byte 0, expected 'GGUF': not a GGUF file", q);
    }
    st = read_u32(p, "version", &version);
    if (st != SY_OK)
        return st;
    if (version == 1)
        return failf(p, SY_E_UNSUPPORTED,
                     "GGUF version 1 is not supported (only versions 2 and 3); "
                     "convert the model again with a current llama.cpp");
    if (version != 2 && version != 3) {
        uint32_t swapped = __builtin_bswap32(version);
        if (swapped == 2 || swapped == 3)
            return failf(p, SY_E_UNSUPPORTED,
                         "big-endian GGUF file (version %" PRIu32 " byte-swapped); "
                         "only little-endian files are supported", swapped);
        return failf(p, SY_E_UNSUPPORTED,
                     "GGUF version %" PRIu32 " is not supported (only versions 2 and 3)",
                     version);
    }
    g->version = version;
    st = read_u64(p, "n_tensors", &g->n_tensors);
    if (st != SY_OK)
        return st;
    st = read_u64(p, "n_kv", &g->n_kv);
    if (st != SY_OK)
        return st;
    st = check_count(p, "n_kv", g->n_kv, GGUF_MIN_KV_SIZE);
    if (st != SY_OK)
        return st;
    st = check_count(p, "n_tensors", g->n_tensors, GGUF_MIN_TENSOR_SIZE);
    if (st != SY_OK)
        return st;
    /* Each count fits alone; both together must fit too. */
    if (g->n_kv * GGUF_MIN_KV_SIZE > bytes_left(p) - g->n_tensors * GGUF_MIN_TENSOR_SIZE)
        return failf(p, SY_E_FORMAT,
                     "header: n_kv %" PRIu64 " and n_tensors %" PRIu64
                     " need more than the %" PRIu64 " bytes after the header",
                     g->n_kv, g->n_tensors, bytes_left(p));
    if (g->n_kv > GGUF_MAX_COUNT || g->n_tensors > GGUF_MAX_COUNT)
        return failf(p, SY_E_LIMIT, "header: n_kv %" PRIu64 " or n_tensors %" PRIu64
                     " exceeds %u", g->n_kv, g->n_tensors, GGUF_MAX_COUNT);
    return SY_OK;
}

/* Reads a key, refusing empty, oversized and NUL-holding ones. */
static sy_status parse_key(gguf_parser *p, gguf_kv *kv)
{
    char w[GGUF_QUOTE_MAX * 4 + 64];
    const uint8_t *key;
    uint64_t len;
    sy_status st = read_u64(p, "key length", &len);
    if (st != SY_OK)
        return st;
    if (len == 0)
        return failf(p, SY_E_FORMAT, "%s: empty key", where(p, w, sizeof w));
    if (len > GGUF_MAX_KEY_LEN)
        return failf(p, SY_E_FORMAT, "%s: key length %" PRIu64 " exceeds %u",
                     where(p, w, sizeof w), len, GGUF_MAX_KEY_LEN);
    st = take(p, len, "key", &key);
    if (st != SY_OK)
        return st;
    p->name = key;
    p->name_len = len;
    if (memchr(key, 0, (size_t)len))
        return failf(p, SY_E_FORMAT, "%s: key holds a NUL byte", where(p, w, sizeof w));
    kv->key_len = len;
    return arena_push(p, key, len, &kv->key_off);
}

static sy_status parse_kvs(gguf_parser *p)
{
    sy_gguf *g = p->g;
    char w[GGUF_QUOTE_MAX * 4 + 64];
    sy_status st;

    if (g->n_kv) {
        g->kvs = calloc((size_t)g->n_kv, sizeof *g->kvs);
        if (!g->kvs)
            return failf(p, SY_E_NO_MEMORY, "out of memory for %" PRIu64 " keys", g->n_kv);
    }
    p->section = "key";
    for (uint64_t i = 0; i < g->n_kv; i++) {
        gguf_kv *kv = &g->kvs[i];
        uint32_t type;
        p->item = i;
        p->name = NULL;
        p->elem = -1;
        st = parse_key(p, kv);
        if (st != SY_OK)
            return st;
        st = read_u32(p, "value type", &type);
        if (st != SY_OK)
            return st;
        if (type >= SY_GGUF_TYPE_COUNT)
            return failf(p, SY_E_FORMAT, "%s: value type %" PRIu32 " is not a GGUF type",
                         where(p, w, sizeof w), type);
        kv->raw_pos = p->pos;
        st = parse_value(p, type, 0, &kv->index, &kv->value);
        if (st != SY_OK)
            return st;
        kv->raw_len = p->pos - kv->raw_pos;
        if (type == SY_GGUF_TYPE_STRING) {
            st = arena_push(p, kv->value.data, kv->value.count, &kv->str_off);
            if (st != SY_OK)
                return st;
        }
    }
    p->name = NULL;
    p->elem = -1;
    return SY_OK;
}

static sy_status parse_alignment(gguf_parser *p)
{
    sy_gguf *g = p->g;
    uint64_t i;
    uint32_t a;
    g->alignment = SY_GGUF_DEFAULT_ALIGNMENT;
    if (!sy__gguf_find_kv(g, "general.alignment", &i))
        return SY_OK;
    const sy_gguf_value *v = &g->kvs[i].value;
    if (sy_gguf_value_as_u32(v, &a) != SY_OK)
        return failf(p, SY_E_FORMAT,
                     "general.alignment has type %s or a value out of range, "
                     "expected a uint32", sy_gguf_type_name(v->type));
    if (a == 0 || (a & (a - 1)) != 0)
        return failf(p, SY_E_FORMAT, "general.alignment %" PRIu32 " is not a power of two", a);
    /* The spec asks for a multiple of 8; below it, blocks would lie at odd
     * addresses where the kernels read their fields. */
    if (a < 8)
        return failf(p, SY_E_FORMAT,
                     "general.alignment %" PRIu32 " is not a multiple of 8, as GGUF requires", a);
    g->alignment = a;
    return SY_OK;
}

/* Reads one tensor info: name, dims, type, offset; computes its size. */
static sy_status parse_tensor_info(gguf_parser *p, gguf_tensor *t)
{
    static const char *const ne_fields[SY_GGUF_MAX_DIMS] = {"ne[0]", "ne[1]", "ne[2]", "ne[3]"};
    char w[GGUF_QUOTE_MAX * 4 + 64];
    sy_gguf_tensor_info *ti = &t->info;
    const uint8_t *name;
    uint64_t len, off;
    uint32_t n_dims, type;
    sy_status st;

    st = read_u64(p, "name length", &len);
    if (st != SY_OK)
        return st;
    if (len >= SY_GGUF_NAME_MAX)
        return failf(p, SY_E_FORMAT, "%s: name length %" PRIu64 " exceeds %u bytes",
                     where(p, w, sizeof w), len, SY_GGUF_NAME_MAX - 1);
    st = take(p, len, "name", &name);
    if (st != SY_OK)
        return st;
    p->name = name;
    p->name_len = len;
    if (memchr(name, 0, (size_t)len))
        return failf(p, SY_E_FORMAT, "%s: name holds a NUL byte", where(p, w, sizeof w));
    st = arena_push(p, name, len, &t->name_off);
    if (st != SY_OK)
        return st;

    st = read_u32(p, "n_dims", &n_dims);
    if (st != SY_OK)
        return st;
    if (n_dims == 0 || n_dims > SY_GGUF_MAX_DIMS)
        return failf(p, SY_E_FORMAT, "%s: n_dims %" PRIu32 " is not in 1..%u",
                     where(p, w, sizeof w), n_dims, SY_GGUF_MAX_DIMS);
    ti->n_dims = n_dims;
    for (uint32_t d = 0; d < SY_MAX_DIMS; d++)
        ti->ne[d] = 1;
    for (uint32_t d = 0; d < n_dims; d++) {
        uint64_t ne;
        st = read_u64(p, ne_fields[d], &ne);
        if (st != SY_OK)
            return st;
        if (ne > INT64_MAX)
            return failf(p, SY_E_FORMAT, "%s: %s %" PRIu64 " is negative as int64",
                         where(p, w, sizeof w), ne_fields[d], ne);
        ti->ne[d] = (int64_t)ne;
    }

    st = read_u32(p, "type", &type);
    if (st != SY_OK)
        return st;
    ti->ggml_type = type;
    if (sy_gguf_dtype_from_ggml(type, &ti->dtype) != SY_OK)
        return failf(p, SY_E_DTYPE, "%s: ggml type %" PRIu32 " (%s) is not supported",
                     where(p, w, sizeof w), type, sy_gguf_ggml_type_name(type));
    st = read_u64(p, "offset", &off);
    if (st != SY_OK)
        return st;
    ti->offset = off;
    if (off % p->g->alignment != 0)
        return failf(p, SY_E_FORMAT, "%s: offset %" PRIu64 " is not a multiple of the alignment %"
                     PRIu32, where(p, w, sizeof w), off, p->g->alignment);

    uint32_t bs = sy_dtype_block_size(ti->dtype);
    uint64_t ne0 = (uint64_t)ti->ne[0];
    if (ne0 % bs != 0)
        return failf(p, SY_E_FORMAT, "%s: ne[0] %" PRIu64 " is not a multiple of the %s block size %"
                     PRIu32, where(p, w, sizeof w), ne0, sy_dtype_name(ti->dtype), bs);
    int64_t elems = 1;
    uint64_t size = ne0 / bs;
    bool overflow = __builtin_mul_overflow(size, (uint64_t)sy_dtype_type_size(ti->dtype), &size);
    for (uint32_t d = 0; d < SY_MAX_DIMS; d++) {
        overflow |= __builtin_mul_overflow(elems, ti->ne[d], &elems);
        if (d > 0)
            overflow |= __builtin_mul_overflow(size, (uint64_t)ti->ne[d], &size);
    }
    if (overflow)
        return failf(p, SY_E_FORMAT,
                     "%s: shape [%" PRId64 ", %" PRId64 ", %" PRId64 ", %" PRId64
                     "] overflows the element count or byte size",
                     where(p, w, sizeof w), ti->ne[0], ti->ne[1], ti->ne[2], ti->ne[3]);
    ti->size = size;
    return SY_OK;
}

static sy_status parse_tensors(gguf_parser *p)
{
    sy_gguf *g = p->g;
    sy_status st;

    p->section = "tensor";
    p->item = 0;
    p->name = NULL;
    p->elem = -1;
    st = check_count(p, "n_tensors", g->n_tensors, GGUF_MIN_TENSOR_SIZE);
    if (st != SY_OK)
        return st;
    if (g->n_tensors) {
        g->tensors = calloc((size_t)g->n_tensors, sizeof *g->tensors);
        if (!g->tensors)
            return failf(p, SY_E_NO_MEMORY, "out of memory for %" PRIu64 " tensors",
                         g->n_tensors);
    }
    for (uint64_t i = 0; i < g->n_tensors; i++) {
        p->item = i;
        p->name = NULL;
        st = parse_tensor_info(p, &g->tensors[i]);
        if (st != SY_OK)
            return st;
    }
    return SY_OK;
}

/* Places the data section and checks every tensor lies inside the file. */
static sy_status place_tensors(gguf_parser *p)
{
    sy_gguf *g = p->g;
    uint64_t pad = (g->alignment - p->pos % g->alignment) % g->alignment;
    if (__builtin_add_overflow(p->pos, pad, &g->data_offset))
        return failf(p, SY_E_FORMAT, "data section offset overflows");
    if (g->n_tensors == 0)
        return SY_OK;
    if (g->data_offset > g->size)
        return failf(p, SY_E_FORMAT,
                     "data section starts at byte %" PRIu64 " (tensor infos end at %" PRIu64
                     ", alignment %" PRIu32 "), file has %" PRIu64,
                     g->data_offset, p->pos, g->alignment, g->size);
    for (uint64_t i = 0; i < g->n_tensors; i++) {
        sy_gguf_tensor_info *ti = &g->tensors[i].info;
        uint64_t start, end;
        if (__builtin_add_overflow(g->data_offset, ti->offset, &start) ||
            __builtin_add_overflow(start, ti->size, &end))
            return failf(p, SY_E_FORMAT,
                         "tensor '%s' offset %" PRIu64 " + size %" PRIu64 " overflows",
                         ti->name, ti->offset, ti->size);
        if (end > g->size)
            return failf(p, SY_E_FORMAT, "tensor '%s' ends at byte %" PRIu64 ", file has %" PRIu64,
                         ti->name, end, g->size);
        ti->data = g->base + start;
    }
    return SY_OK;
}

/* Turns arena offsets into pointers once the arena no longer moves. */
static void fix_names(sy_gguf *g)
{
    for (uint64_t i = 0; i < g->n_kv; i++) {
        gguf_kv *kv = &g->kvs[i];
        kv->key = g->arena + kv->key_off;
        kv->value.index_ = kv->index;
        if (kv->value.type == SY_GGUF_TYPE_STRING) {
            kv->value.data = (const uint8_t *)g->arena + kv->str_off;
            kv->value.end_ = kv->value.data + kv->value.count;
        }
    }
}

static sy_status index_names(gguf_parser *p)
{
    sy_gguf *g = p->g;
    uint64_t a, b;
    sy_status st = sy__gguf_hash_build(g, false, &a, &b);
    if (st == SY_E_NO_MEMORY)
        return failf(p, st, "out of memory for the name index");
    if (st != SY_OK) {
        char q[GGUF_QUOTE_MAX * 4 + 8];
        quote_bytes(q, sizeof q, (const uint8_t *)g->kvs[b].key, g->kvs[b].key_len);
        return failf(p, SY_E_FORMAT, "duplicate key %s (keys %" PRIu64 " and %" PRIu64 ")", q, a, b);
    }
    return SY_OK;
}

static sy_status index_tensors(gguf_parser *p)
{
    sy_gguf *g = p->g;
    uint64_t a, b;
    for (uint64_t i = 0; i < g->n_tensors; i++)
        g->tensors[i].info.name = g->arena + g->tensors[i].name_off;
    sy_status st = sy__gguf_hash_build(g, true, &a, &b);
    if (st == SY_E_NO_MEMORY)
        return failf(p, st, "out of memory for the name index");
    if (st != SY_OK)
        return failf(p, SY_E_FORMAT, "duplicate tensor name '%s' (tensors %" PRIu64 " and %" PRIu64
                     ")", g->tensors[b].info.name, a, b);
    return SY_OK;
}

static sy_status parse_file(gguf_parser *p)
{
    sy_status st = parse_header(p);
    if (st != SY_OK)
        return st;
    st = parse_kvs(p);
    if (st != SY_OK)
        return st;
    /* Keys must have pointers for the hash; tensor names are pushed later,
     * so the arena may still move: keys are fixed up again below. */
    fix_names(p->g);
    st = index_names(p);
    if (st != SY_OK)
        return st;
    st = parse_alignment(p);
    if (st != SY_OK)
        return st;
    st = parse_tensors(p);
    if (st != SY_OK)
        return st;
    fix_names(p->g);
    st = index_tensors(p);
    if (st != SY_OK)
        return st;
    return place_tensors(p);
}

sy_status sy__gguf_parse(sy_gguf *g, char *err)
{
    gguf_parser p = {.g = g, .err = err, .section = "header", .elem = -1};
    return parse_file(&p);
}
