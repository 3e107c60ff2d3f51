/* GGUF reader, queries on an open file: file facts, metadata lookups and
 * typed getters, tensor infos.  Parsing and validation are in gguf.c. */
#include <inttypes.h>
#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/mman.h>
#include <unistd.h>

#include "gguf.h"
#include "gguf_internal.h"

/* ------------------------------------------------------------ file facts */

const char *sy_gguf_last_error(const sy_gguf *g)
{
    return g ? g->last_error : "";
}

void sy_gguf_prefetch(const sy_gguf *g)
{
    if (!g || !g->base || g->data_offset >= g->size)
        return;
    long page = sysconf(_SC_PAGESIZE);
    uint64_t start = page > 0 ? g->data_offset / (uint64_t)page * (uint64_t)page : 0;
    madvise((void *)(g->base + start), (size_t)(g->size - start), MADV_WILLNEED);
}

const char *sy_gguf_path(const sy_gguf *g)
{
    return g ? g->path : "";
}

uint32_t sy_gguf_version(const sy_gguf *g)
{
    return g ? g->version : 0;
}

uint64_t sy_gguf_file_size(const sy_gguf *g)
{
    return g ? g->size : 0;
}

uint32_t sy_gguf_alignment(const sy_gguf *g)
{
    return g ? g->alignment : 0;
}

uint64_t sy_gguf_data_offset(const sy_gguf *g)
{
    return g ? g->data_offset : 0;
}

/* -------------------------------------------------------------- metadata */

uint64_t sy_gguf_kv_count(const sy_gguf *g)
{
    return g ? g->n_kv : 0;
}

const char *sy_gguf_kv_key(const sy_gguf *g, uint64_t i)
{
    return g && i < g->n_kv ? g->kvs[i].key : NULL;
}

sy_status sy_gguf_kv_value(const sy_gguf *g, uint64_t i, sy_gguf_value *out_value)
{
    if (!g || !out_value || i >= g->n_kv)
        return SY_E_INVALID_ARG;
    *out_value = g->kvs[i].value;
    return SY_OK;
}

sy_status sy_gguf_kv_raw(const sy_gguf *g, uint64_t i, uint32_t *out_type,
                         const void **out_payload, uint64_t *out_len)
{
    if (!g || !out_type || !out_payload || !out_len || i >= g->n_kv)
        return SY_E_INVALID_ARG;
    *out_type = g->kvs[i].value.type;
    *out_payload = g->base + g->kvs[i].raw_pos;
    *out_len = g->kvs[i].raw_len;
    return SY_OK;
}

sy_status sy_gguf_find_key(const sy_gguf *g, const char *key, uint64_t *out_index)
{
    if (!g || !key || !out_index)
        return SY_E_INVALID_ARG;
    return sy__gguf_find_kv(g, key, out_index) ? SY_OK : SY_E_NOT_FOUND;
}

bool sy_gguf_has_key(const sy_gguf *g, const char *key)
{
    uint64_t i;
    return sy_gguf_find_key(g, key, &i) == SY_OK;
}

__attribute__((format(printf, 3, 4))) static sy_status get_failf(sy_gguf *g, sy_status st,
                                                                 const char *fmt, ...)
{
    va_list ap;
    va_start(ap, fmt);
    sy__gguf_vset_error(g->last_error, g->path, fmt, ap);
    va_end(ap);
    return st;
}

sy_status sy_gguf_get_value(sy_gguf *g, const char *key, sy_gguf_value *out_value)
{
    uint64_t i;
    if (!g || !key || !out_value)
        return SY_E_INVALID_ARG;
    g->last_error[0] = '\0';
    if (sy_gguf_find_key(g, key, &i) != SY_OK)
        return get_failf(g, SY_E_NOT_FOUND, "key '%s' not found", key);
    *out_value = g->kvs[i].value;
    return SY_OK;
}

/* Explains a failed conversion of |key|'s value |v| to |want|. */
static sy_status explain(sy_gguf *g, const char *key, const char *want, sy_status st,
                         const sy_gguf_value *v)
{
    bool want_int = want[0] == 'u' || want[0] == 'i'; /* "uint32", "int64", ... */
    int64_t s;
    uint64_t u;
    if (st == SY_OK)
        return SY_OK;
    if (want_int && sy_gguf_value_as_i64(v, &s) == SY_OK)
        return get_failf(g, st, "key '%s' value %" PRId64 " does not fit %s", key, s, want);
    if (want_int && sy_gguf_value_as_u64(v, &u) == SY_OK)
        return get_failf(g, st, "key '%s' value %" PRIu64 " does not fit %s", key, u, want);
    return get_failf(g, st, "key '%s' has type %s, expected %s", key, sy_gguf_type_name(v->type),
                     want);
}

sy_status sy_gguf_get_u32(sy_gguf *g, const char *key, uint32_t *out_value)
{
    sy_gguf_value v;
    uint32_t x = 0;
    sy_status st = out_value ? sy_gguf_get_value(g, key, &v) : SY_E_INVALID_ARG;
    if (st == SY_OK)
        st = explain(g, key, "uint32", sy_gguf_value_as_u32(&v, &x), &v);
    if (st == SY_OK)
        *out_value = x;
    return st;
}

sy_status sy_gguf_get_i32(sy_gguf *g, const char *key, int32_t *out_value)
{
    sy_gguf_value v;
    int32_t x = 0;
    sy_status st = out_value ? sy_gguf_get_value(g, key, &v) : SY_E_INVALID_ARG;
    if (st == SY_OK)
        st = explain(g, key, "int32", sy_gguf_value_as_i32(&v, &x), &v);
    if (st == SY_OK)
        *out_value = x;
    return st;
}

sy_status sy_gguf_get_u64(sy_gguf *g, const char *key, uint64_t *out_value)
{
    sy_gguf_value v;
    uint64_t x = 0;
    sy_status st = out_value ? sy_gguf_get_value(g, key, &v) : SY_E_INVALID_ARG;
    if (st == SY_OK)
        st = explain(g, key, "uint64", sy_gguf_value_as_u64(&v, &x), &v);
    if (st == SY_OK)
        *out_value = x;
    return st;
}

sy_status sy_gguf_get_i64(sy_gguf *g, const char *key, int64_t *out_value)
{
    sy_gguf_value v;
    int64_t x = 0;
    sy_status st = out_value ? sy_gguf_get_value(g, key, &v) : SY_E_INVALID_ARG;
    if (st == SY_OK)
        st = explain(g, key, "int64", sy_gguf_value_as_i64(&v, &x), &v);
    if (st == SY_OK)
        *out_value = x;
    return st;
}

sy_status sy_gguf_get_f32(sy_gguf *g, const char *key, float *out_value)
{
    sy_gguf_value v;
    float x = 0;
    sy_status st = out_value ? sy_gguf_get_value(g, key, &v) : SY_E_INVALID_ARG;
    if (st == SY_OK)
        st = explain(g, key, "a number", sy_gguf_value_as_f32(&v, &x), &v);
    if (st == SY_OK)
        *out_value = x;
    return st;
}

sy_status sy_gguf_get_f64(sy_gguf *g, const char *key, double *out_value)
{
    sy_gguf_value v;
    double x = 0;
    sy_status st = out_value ? sy_gguf_get_value(g, key, &v) : SY_E_INVALID_ARG;
    if (st == SY_OK)
        st = explain(g, key, "a number", sy_gguf_value_as_f64(&v, &x), &v);
    if (st == SY_OK)
        *out_value = x;
    return st;
}

sy_status sy_gguf_get_bool(sy_gguf *g, const char *key, bool *out_value)
{
    sy_gguf_value v;
    bool x = false;
    sy_status st = out_value ? sy_gguf_get_value(g, key, &v) : SY_E_INVALID_ARG;
    if (st == SY_OK)
        st = explain(g, key, "bool", sy_gguf_value_as_bool(&v, &x), &v);
    if (st == SY_OK)
        *out_value = x;
    return st;
}

sy_status sy_gguf_get_str(sy_gguf *g, const char *key, const char **out_str, uint64_t *out_len)
{
    sy_gguf_value v;
    if (!out_str)
        return SY_E_INVALID_ARG;
    sy_status st = sy_gguf_get_value(g, key, &v);
    if (st != SY_OK)
        return st;
    if (v.type != SY_GGUF_TYPE_STRING)
        return get_failf(g, SY_E_FORMAT, "key '%s' has type %s, expected string", key,
                         sy_gguf_type_name(v.type));
    *out_str = (const char *)v.data;
    if (out_len)
        *out_len = v.count;
    return SY_OK;
}

sy_status sy_gguf_get_arr(sy_gguf *g, const char *key, uint32_t elem_type,
                          sy_gguf_value *out_arr)
{
    sy_gguf_value v;
    if (!out_arr)
        return SY_E_INVALID_ARG;
    sy_status st = sy_gguf_get_value(g, key, &v);
    if (st != SY_OK)
        return st;
    if (v.type != SY_GGUF_TYPE_ARRAY)
        return get_failf(g, SY_E_FORMAT, "key '%s' has type %s, expected array", key,
                         sy_gguf_type_name(v.type));
    if (elem_type < SY_GGUF_TYPE_COUNT && v.elem_type != elem_type)
        return get_failf(g, SY_E_FORMAT, "key '%s' is an array of %s, expected %s", key,
                         sy_gguf_type_name(v.elem_type), sy_gguf_type_name(elem_type));
    *out_arr = v;
    return SY_OK;
}

/* --------------------------------------------------------------- tensors */

uint64_t sy_gguf_tensor_count(const sy_gguf *g)
{
    return g ? g->n_tensors : 0;
}

const sy_gguf_tensor_info *sy_gguf_tensor(const sy_gguf *g, uint64_t i)
{
    return g && i < g->n_tensors ? &g->tensors[i].info : NULL;
}

sy_status sy_gguf_find_tensor(const sy_gguf *g, const char *name,
                              const sy_gguf_tensor_info **out_info)
{
    uint64_t i;
    if (out_info)
        *out_info = NULL;
    if (!g || !name || !out_info)
        return SY_E_INVALID_ARG;
    if (!sy__gguf_find_tensor_index(g, name, &i))
        return SY_E_NOT_FOUND;
    *out_info = &g->tensors[i].info;
    return SY_OK;
}
