/* GGUF value views: type tables, the ggml type mapping, and typed access to
 * metadata values and array elements.  Every view handed out by gguf.c
 * points at bytes sy_gguf_open() has already validated; the helpers here
 * still bound each step by the view's end so that a stray view fails
 * instead of reading past it.  See gguf.h. */
#include "gguf.h"

#include <string.h>

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

/* ------------------------------------------------------------ type tables */

static const char *const gguf_type_names[SY_GGUF_TYPE_COUNT] = {
    [SY_GGUF_TYPE_UINT8] = "uint8",   [SY_GGUF_TYPE_INT8] = "int8",
    [SY_GGUF_TYPE_UINT16] = "uint16", [SY_GGUF_TYPE_INT16] = "int16",
    [SY_GGUF_TYPE_UINT32] = "uint32", [SY_GGUF_TYPE_INT32] = "int32",
    [SY_GGUF_TYPE_FLOAT32] = "float32", [SY_GGUF_TYPE_BOOL] = "bool",
    [SY_GGUF_TYPE_STRING] = "string", [SY_GGUF_TYPE_ARRAY] = "array",
    [SY_GGUF_TYPE_UINT64] = "uint64", [SY_GGUF_TYPE_INT64] = "int64",
    [SY_GGUF_TYPE_FLOAT64] = "float64",
};

static const uint8_t gguf_type_sizes[SY_GGUF_TYPE_COUNT] = {
    [SY_GGUF_TYPE_UINT8] = 1,   [SY_GGUF_TYPE_INT8] = 1,  [SY_GGUF_TYPE_UINT16] = 2,
    [SY_GGUF_TYPE_INT16] = 2,   [SY_GGUF_TYPE_UINT32] = 4, [SY_GGUF_TYPE_INT32] = 4,
    [SY_GGUF_TYPE_FLOAT32] = 4, [SY_GGUF_TYPE_BOOL] = 1,  [SY_GGUF_TYPE_STRING] = 0,
    [SY_GGUF_TYPE_ARRAY] = 0,   [SY_GGUF_TYPE_UINT64] = 8, [SY_GGUF_TYPE_INT64] = 8,
    [SY_GGUF_TYPE_FLOAT64] = 8,
};

/* ggml's type numbering, for messages about types we refuse. */
static const char *const ggml_type_names[] = {
    [0] = "f32",       [1] = "f16",      [2] = "q4_0",     [3] = "q4_1",
    [6] = "q5_0",      [7] = "q5_1",     [8] = "q8_0",     [9] = "q8_1",
    [10] = "q2_k",     [11] = "q3_k",    [12] = "q4_k",    [13] = "q5_k",
    [14] = "q6_k",     [15] = "q8_k",    [16] = "iq2_xxs", [17] = "iq2_xs",
    [18] = "iq3_xxs",  [19] = "iq1_s",   [20] = "iq4_nl",  [21] = "iq3_s",
    [22] = "iq2_s",    [23] = "iq4_xs",  [24] = "i8",      [25] = "i16",
    [26] = "i32",      [27] = "i64",     [28] = "f64",     [29] = "iq1_m",
    [30] = "bf16",     [34] = "tq1_0",   [35] = "tq2_0",   [39] = "mxfp4",
};

typedef struct ggml_dtype_map {
    uint32_t ggml;
    sy_dtype dtype;
} ggml_dtype_map;

static const ggml_dtype_map ggml_dtypes[] = {
    {SY_GGML_TYPE_F32, SY_DTYPE_F32},   {SY_GGML_TYPE_F16, SY_DTYPE_F16},
    {SY_GGML_TYPE_Q4_0, SY_DTYPE_Q4_0}, {SY_GGML_TYPE_Q4_1, SY_DTYPE_Q4_1},
    {SY_GGML_TYPE_Q5_0, SY_DTYPE_Q5_0}, {SY_GGML_TYPE_Q5_1, SY_DTYPE_Q5_1},
    {SY_GGML_TYPE_Q8_0, SY_DTYPE_Q8_0}, {SY_GGML_TYPE_Q4_K, SY_DTYPE_Q4_K},
    {SY_GGML_TYPE_Q5_K, SY_DTYPE_Q5_K}, {SY_GGML_TYPE_Q6_K, SY_DTYPE_Q6_K},
    {SY_GGML_TYPE_I32, SY_DTYPE_I32},   {SY_GGML_TYPE_BF16, SY_DTYPE_BF16},
};

const char *sy_gguf_type_name(uint32_t t)
{
    return t < SY_GGUF_TYPE_COUNT ? gguf_type_names[t] : "invalid";
}

uint32_t sy_gguf_type_size(uint32_t t)
{
    return t < SY_GGUF_TYPE_COUNT ? gguf_type_sizes[t] : 0;
}

sy_status sy_gguf_dtype_from_ggml(uint32_t ggml_type, sy_dtype *out_dtype)
{
    if (!out_dtype)
        return SY_E_INVALID_ARG;
    for (size_t i = 0; i < sizeof ggml_dtypes / sizeof ggml_dtypes[0]; i++) {
        if (ggml_dtypes[i].ggml == ggml_type) {
            *out_dtype = ggml_dtypes[i].dtype;
            return SY_OK;
        }
    }
    return SY_E_DTYPE;
}

uint32_t sy_gguf_ggml_from_dtype(uint32_t dtype)
{
    for (size_t i = 0; i < sizeof ggml_dtypes / sizeof ggml_dtypes[0]; i++) {
        if ((uint32_t)ggml_dtypes[i].dtype == dtype)
            return ggml_dtypes[i].ggml;
    }
    return UINT32_MAX;
}

const char *sy_gguf_ggml_type_name(uint32_t ggml_type)
{
    size_t n = sizeof ggml_type_names / sizeof ggml_type_names[0];
    if (ggml_type < n && ggml_type_names[ggml_type])
        return ggml_type_names[ggml_type];
    return "unknown";
}

/* Skips one encoded value of |type| at |q| (already validated at open);
 * returns the byte after it, or NULL if it would pass |end|. */
static const uint8_t *skip_value(const uint8_t *q, uint32_t type, const uint8_t *end,
                                 uint32_t depth)
{
    uint64_t left = (uint64_t)(end - q);
    uint32_t size = sy_gguf_type_size(type);
    if (size)
        return size <= left ? q + size : NULL;
    if (type == SY_GGUF_TYPE_STRING) {
        if (left < 8)
            return NULL;
        uint64_t len = load_u64(q);
        return len <= left - 8 ? q + 8 + len : NULL;
    }
    if (type != SY_GGUF_TYPE_ARRAY || left < 12 || depth >= SY_GGUF_MAX_DEPTH)
        return NULL;
    uint32_t et = load_u32(q);
    uint64_t n = load_u64(q + 4);
    uint32_t es = sy_gguf_type_size(et);
    q += 12;
    if (es) {
        uint64_t bytes;
        if (__builtin_mul_overflow(n, es, &bytes) || bytes > (uint64_t)(end - q))
            return NULL;
        return q + bytes;
    }
    for (uint64_t i = 0; i < n && q; i++)
        q = skip_value(q, et, end, depth + 1);
    return q;
}

/* ----------------------------------------------------------- value views */

/* Reads an integer value as either unsigned (*out_signed false, *out_u) or
 * signed (*out_signed true, *out_s).  False for non-integer types. */
static bool read_int(const sy_gguf_value *v, bool *out_signed, uint64_t *out_u, int64_t *out_s)
{
    if (!v || !v->data)
        return false;
    *out_signed = false;
    switch (v->type) {
    case SY_GGUF_TYPE_UINT8: { uint8_t x; memcpy(&x, v->data, 1); *out_u = x; return true; }
    case SY_GGUF_TYPE_UINT16: { uint16_t x; memcpy(&x, v->data, 2); *out_u = x; return true; }
    case SY_GGUF_TYPE_UINT32: { uint32_t x; memcpy(&x, v->data, 4); *out_u = x; return true; }
    case SY_GGUF_TYPE_UINT64: { uint64_t x; memcpy(&x, v->data, 8); *out_u = x; return true; }
    default: break;
    }
    *out_signed = true;
    switch (v->type) {
    case SY_GGUF_TYPE_INT8: { int8_t x; memcpy(&x, v->data, 1); *out_s = x; return true; }
    case SY_GGUF_TYPE_INT16: { int16_t x; memcpy(&x, v->data, 2); *out_s = x; return true; }
    case SY_GGUF_TYPE_INT32: { int32_t x; memcpy(&x, v->data, 4); *out_s = x; return true; }
    case SY_GGUF_TYPE_INT64: { int64_t x; memcpy(&x, v->data, 8); *out_s = x; return true; }
    default: return false;
    }
}

/* Reads any integer as a value in [lo, hi] (hi >= 0); the two halves of the
 * comparison keep signed and unsigned apart. */
static sy_status int_in_range(const sy_gguf_value *v, int64_t lo, uint64_t hi, bool *out_signed,
                              uint64_t *out_u, int64_t *out_s)
{
    *out_u = 0;
    *out_s = 0;
    if (!read_int(v, out_signed, out_u, out_s))
        return SY_E_FORMAT;
    if (*out_signed)
        return (*out_s >= lo && (*out_s < 0 || (uint64_t)*out_s <= hi)) ? SY_OK : SY_E_FORMAT;
    return *out_u <= hi ? SY_OK : SY_E_FORMAT;
}

sy_status sy_gguf_value_as_u32(const sy_gguf_value *v, uint32_t *out_value)
{
    bool sgn;
    uint64_t u;
    int64_t s;
    if (!out_value)
        return SY_E_INVALID_ARG;
    sy_status st = int_in_range(v, 0, UINT32_MAX, &sgn, &u, &s);
    if (st == SY_OK)
        *out_value = sgn ? (uint32_t)s : (uint32_t)u;
    return st;
}

sy_status sy_gguf_value_as_i32(const sy_gguf_value *v, int32_t *out_value)
{
    bool sgn;
    uint64_t u;
    int64_t s;
    if (!out_value)
        return SY_E_INVALID_ARG;
    sy_status st = int_in_range(v, INT32_MIN, INT32_MAX, &sgn, &u, &s);
    if (st == SY_OK)
        *out_value = sgn ? (int32_t)s : (int32_t)u;
    return st;
}

sy_status sy_gguf_value_as_u64(const sy_gguf_value *v, uint64_t *out_value)
{
    bool sgn;
    uint64_t u;
    int64_t s;
    if (!out_value)
        return SY_E_INVALID_ARG;
    sy_status st = int_in_range(v, 0, UINT64_MAX, &sgn, &u, &s);
    if (st == SY_OK)
        *out_value = sgn ? (uint64_t)s : u;
    return st;
}

sy_status sy_gguf_value_as_i64(const sy_gguf_value *v, int64_t *out_value)
{
    bool sgn;
    uint64_t u;
    int64_t s;
    if (!out_value)
        return SY_E_INVALID_ARG;
    sy_status st = int_in_range(v, INT64_MIN, INT64_MAX, &sgn, &u, &s);
    if (st == SY_OK)
        *out_value = sgn ? s : (int64_t)u;
    return st;
}

sy_status sy_gguf_value_as_f64(const sy_gguf_value *v, double *out_value)
{
    bool sgn;
    uint64_t u;
    int64_t s;
    if (!v || !v->data || !out_value)
        return SY_E_INVALID_ARG;
    if (v->type == SY_GGUF_TYPE_FLOAT32) {
        float f;
        memcpy(&f, v->data, sizeof f);
        *out_value = f;
        return SY_OK;
    }
    if (v->type == SY_GGUF_TYPE_FLOAT64) {
        memcpy(out_value, v->data, sizeof *out_value);
        return SY_OK;
    }
    if (!read_int(v, &sgn, &u, &s))
        return SY_E_FORMAT;
    *out_value = sgn ? (double)s : (double)u;
    return SY_OK;
}

sy_status sy_gguf_value_as_f32(const sy_gguf_value *v, float *out_value)
{
    double d;
    if (!out_value)
        return SY_E_INVALID_ARG;
    sy_status st = sy_gguf_value_as_f64(v, &d);
    if (st == SY_OK)
        *out_value = (float)d;
    return st;
}

sy_status sy_gguf_value_as_bool(const sy_gguf_value *v, bool *out_value)
{
    if (!v || !v->data || !out_value)
        return SY_E_INVALID_ARG;
    if (v->type != SY_GGUF_TYPE_BOOL)
        return SY_E_FORMAT;
    *out_value = v->data[0] != 0;
    return SY_OK;
}

sy_status sy_gguf_value_as_str(const sy_gguf_value *v, sy_gguf_str *out_str)
{
    if (!v || !out_str)
        return SY_E_INVALID_ARG;
    if (v->type != SY_GGUF_TYPE_STRING)
        return SY_E_FORMAT;
    out_str->ptr = (const char *)v->data;
    out_str->len = v->count;
    return SY_OK;
}

/* Builds the view of the string or array encoded at |q|. */
static sy_status decode_at(const uint8_t *q, uint32_t type, const uint8_t *end,
                           sy_gguf_value *out_value)
{
    uint64_t left = (uint64_t)(end - q);
    memset(out_value, 0, sizeof *out_value);
    out_value->type = type;
    out_value->end_ = end;
    if (type == SY_GGUF_TYPE_STRING) {
        if (left < 8 || load_u64(q) > left - 8)
            return SY_E_INTERNAL;
        out_value->count = load_u64(q);
        out_value->data = q + 8;
        return SY_OK;
    }
    if (left < 12)
        return SY_E_INTERNAL;
    out_value->elem_type = load_u32(q);
    out_value->count = load_u64(q + 4);
    out_value->data = q + 12;
    return SY_OK;
}

sy_status sy_gguf_arr_elem(const sy_gguf_value *arr, uint64_t i, sy_gguf_value *out_elem)
{
    if (!arr || !out_elem || arr->type != SY_GGUF_TYPE_ARRAY || i >= arr->count || !arr->data)
        return SY_E_INVALID_ARG;
    uint32_t et = arr->elem_type;
    uint32_t es = sy_gguf_type_size(et);
    if (es) {
        memset(out_elem, 0, sizeof *out_elem);
        out_elem->type = et;
        out_elem->count = 1;
        out_elem->data = arr->data + i * es;
        out_elem->end_ = out_elem->data + es;
        return SY_OK;
    }
    const uint8_t *q = arr->data;
    if (arr->index_) {
        q += arr->index_[i];
    } else {
        /* Arrays nested in arrays keep no index: walk to the element. */
        for (uint64_t k = 0; k < i && q; k++)
            q = skip_value(q, et, arr->end_, 1);
        if (!q)
            return SY_E_INTERNAL;
    }
    return decode_at(q, et, arr->end_, out_elem);
}

sy_status sy_gguf_arr_str(const sy_gguf_value *arr, uint64_t i, sy_gguf_str *out_str)
{
    sy_gguf_value v;
    if (!arr || !out_str || arr->type != SY_GGUF_TYPE_ARRAY ||
        arr->elem_type != SY_GGUF_TYPE_STRING)
        return SY_E_INVALID_ARG;
    sy_status st = sy_gguf_arr_elem(arr, i, &v);
    if (st != SY_OK)
        return st;
    out_str->ptr = (const char *)v.data;
    out_str->len = v.count;
    return SY_OK;
}

sy_status sy_gguf_arr_read(const sy_gguf_value *arr, uint32_t elem_type, uint64_t first,
                           uint64_t n, void *dst)
{
    uint64_t last;
    if (!arr || arr->type != SY_GGUF_TYPE_ARRAY || (n && !dst))
        return SY_E_INVALID_ARG;
    if (arr->elem_type != elem_type || sy_gguf_type_size(elem_type) == 0)
        return SY_E_FORMAT;
    if (__builtin_add_overflow(first, n, &last) || last > arr->count)
        return SY_E_INVALID_ARG;
    if (n)
        memcpy(dst, arr->data + first * sy_gguf_type_size(elem_type),
               (size_t)(n * sy_gguf_type_size(elem_type)));
    return SY_OK;
}

