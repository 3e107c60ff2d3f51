/* GGUF writer: collects keys and tensors in memory (tensor bytes stay
 * borrowed or are produced at write time) and writes one file.  See gguf.h. */
#include "gguf.h"

#include <errno.h>
#include <inttypes.h>
#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <unistd.h>

#define WRITER_MAX_KEY_LEN 65535u
#define WRITER_MAX_ALIGNMENT (1u << 30)

typedef struct writer_kv {
    char *key;
    uint32_t type;
    uint8_t *payload; /* encoded value after the type field */
    uint64_t len;
} writer_kv;

typedef struct writer_tensor {
    char *name;
    sy_dtype dtype;
    uint32_t n_dims;
    int64_t ne[SY_MAX_DIMS];
    uint64_t size;
    const void *data;     /* borrowed; NULL with no |fill|: zeros */
    sy_gguf_fill_fn fill; /* or bytes produced at write time */
    void *ctx;
} writer_tensor;

struct sy_gguf_writer {
    uint32_t version;
    uint32_t alignment;
    bool alignment_set;
    writer_kv *kvs;
    size_t n_kv;
    size_t cap_kv;
    writer_tensor *tensors;
    size_t n_tensors;
    size_t cap_tensors;
    char last_error[SY_GGUF_ERROR_MAX];
};

__attribute__((format(printf, 3, 4))) static sy_status wfail(sy_gguf_writer *w, sy_status st,
                                                             const char *fmt, ...)
{
    va_list ap;
    va_start(ap, fmt);
    vsnprintf(w->last_error, sizeof w->last_error, fmt, ap);
    va_end(ap);
    return st;
}

sy_status sy_gguf_writer_create(uint32_t version, sy_gguf_writer **out_writer)
{
    if (!out_writer)
        return SY_E_INVALID_ARG;
    *out_writer = NULL;
    if (version != 2 && version != 3)
        return SY_E_UNSUPPORTED;
    sy_gguf_writer *w = calloc(1, sizeof *w);
    if (!w)
        return SY_E_NO_MEMORY;
    w->version = version;
    w->alignment = SY_GGUF_DEFAULT_ALIGNMENT;
    *out_writer = w;
    return SY_OK;
}

void sy_gguf_writer_destroy(sy_gguf_writer *w)
{
    if (!w)
        return;
    for (size_t i = 0; i < w->n_kv; i++) {
        free(w->kvs[i].key);
        free(w->kvs[i].payload);
    }
    for (size_t i = 0; i < w->n_tensors; i++)
        free(w->tensors[i].name);
    free(w->kvs);
    free(w->tensors);
    free(w);
}

const char *sy_gguf_writer_last_error(const sy_gguf_writer *w)
{
    return w ? w->last_error : "";
}

sy_status sy_gguf_writer_set_alignment(sy_gguf_writer *w, uint32_t alignment)
{
    if (!w)
        return SY_E_INVALID_ARG;
    w->last_error[0] = '\0';
    if (alignment < 8 || alignment > WRITER_MAX_ALIGNMENT || (alignment & (alignment - 1)))
        return wfail(w, SY_E_INVALID_ARG, "alignment %" PRIu32 " is not a power of two in 8..2^30",
                     alignment);
    w->alignment = alignment;
    w->alignment_set = true;
    return SY_OK;
}

/* Takes ownership of |payload| on success and on failure. */
static sy_status add_kv(sy_gguf_writer *w, const char *key, uint32_t type, uint8_t *payload,
                        uint64_t len)
{
    sy_status st = SY_OK;
    size_t klen = key ? strlen(key) : 0;
    w->last_error[0] = '\0';
    if (klen == 0 || klen > WRITER_MAX_KEY_LEN) {
        st = wfail(w, SY_E_INVALID_ARG, "key must be 1..%u bytes", WRITER_MAX_KEY_LEN);
        goto out_free_payload;
    }
    if (strcmp(key, "general.alignment") == 0) {
        st = wfail(w, SY_E_INVALID_ARG,
                   "general.alignment is set with sy_gguf_writer_set_alignment()");
        goto out_free_payload;
    }
    for (size_t i = 0; i < w->n_kv; i++) {
        if (strcmp(w->kvs[i].key, key) == 0) {
            st = wfail(w, SY_E_INVALID_ARG, "duplicate key '%s'", key);
            goto out_free_payload;
        }
    }
    if (w->n_kv == w->cap_kv) {
        size_t cap = w->cap_kv ? w->cap_kv * 2 : 16;
        writer_kv *kvs = realloc(w->kvs, cap * sizeof *kvs);
        if (!kvs) {
            st = wfail(w, SY_E_NO_MEMORY, "out of memory");
            goto out_free_payload;
        }
        w->kvs = kvs;
        w->cap_kv = cap;
    }
    char *copy = strdup(key);
    if (!copy) {
        st = wfail(w, SY_E_NO_MEMORY, "out of memory");
        goto out_free_payload;
    }
    w->kvs[w->n_kv++] = (writer_kv){copy, type, payload, len};
    return SY_OK;

out_free_payload:
    free(payload);
    return st;
}

/* Adds a key whose payload is |n| bytes copied from |bytes|. */
static sy_status add_copy(sy_gguf_writer *w, const char *key, uint32_t type, const void *bytes,
                          uint64_t n)
{
    if (!w)
        return SY_E_INVALID_ARG;
    if (n > SIZE_MAX || (n && !bytes))
        return wfail(w, SY_E_INVALID_ARG, "bad payload for key '%s'", key ? key : "(null)");
    uint8_t *payload = malloc(n ? (size_t)n : 1);
    if (!payload)
        return wfail(w, SY_E_NO_MEMORY, "out of memory");
    if (n)
        memcpy(payload, bytes, (size_t)n);
    return add_kv(w, key, type, payload, n);
}

sy_status sy_gguf_writer_add_u8(sy_gguf_writer *w, const char *key, uint8_t value)
{
    return add_copy(w, key, SY_GGUF_TYPE_UINT8, &value, sizeof value);
}

sy_status sy_gguf_writer_add_i8(sy_gguf_writer *w, const char *key, int8_t value)
{
    return add_copy(w, key, SY_GGUF_TYPE_INT8, &value, sizeof value);
}

sy_status sy_gguf_writer_add_u16(sy_gguf_writer *w, const char *key, uint16_t value)
{
    return add_copy(w, key, SY_GGUF_TYPE_UINT16, &value, sizeof value);
}

sy_status sy_gguf_writer_add_i16(sy_gguf_writer *w, const char *key, int16_t value)
{
    return add_copy(w, key, SY_GGUF_TYPE_INT16, &value, sizeof value);
}

sy_status sy_gguf_writer_add_u32(sy_gguf_writer *w, const char *key, uint32_t value)
{
    return add_copy(w, key, SY_GGUF_TYPE_UINT32, &value, sizeof value);
}

sy_status sy_gguf_writer_add_i32(sy_gguf_writer *w, const char *key, int32_t value)
{
    return add_copy(w, key, SY_GGUF_TYPE_INT32, &value, sizeof value);
}

sy_status sy_gguf_writer_add_u64(sy_gguf_writer *w, const char *key, uint64_t value)
{
    return add_copy(w, key, SY_GGUF_TYPE_UINT64, &value, sizeof value);
}

sy_status sy_gguf_writer_add_i64(sy_gguf_writer *w, const char *key, int64_t value)
{
    return add_copy(w, key, SY_GGUF_TYPE_INT64, &value, sizeof value);
}

sy_status sy_gguf_writer_add_f32(sy_gguf_writer *w, const char *key, float value)
{
    return add_copy(w, key, SY_GGUF_TYPE_FLOAT32, &value, sizeof value);
}

sy_status sy_gguf_writer_add_f64(sy_gguf_writer *w, const char *key, double value)
{
    return add_copy(w, key, SY_GGUF_TYPE_FLOAT64, &value, sizeof value);
}

sy_status sy_gguf_writer_add_bool(sy_gguf_writer *w, const char *key, bool value)
{
    uint8_t b = value ? 1 : 0;
    return add_copy(w, key, SY_GGUF_TYPE_BOOL, &b, sizeof b);
}

sy_status sy_gguf_writer_add_str(sy_gguf_writer *w, const char *key, const char *value)
{
    if (!w)
        return SY_E_INVALID_ARG;
    if (!value)
        return wfail(w, SY_E_INVALID_ARG, "NULL string for key '%s'", key ? key : "(null)");
    uint64_t len = strlen(value);
    uint8_t *payload = malloc(8 + (size_t)len);
    if (!payload)
        return wfail(w, SY_E_NO_MEMORY, "out of memory");
    memcpy(payload, &len, 8);
    memcpy(payload + 8, value, (size_t)len);
    return add_kv(w, key, SY_GGUF_TYPE_STRING, payload, 8 + len);
}

sy_status sy_gguf_writer_add_arr(sy_gguf_writer *w, const char *key, uint32_t elem_type,
                                 const void *data, uint64_t count)
{
    uint64_t bytes, total;
    if (!w)
        return SY_E_INVALID_ARG;
    uint32_t es = sy_gguf_type_size(elem_type);
    if (es == 0)
        return wfail(w, SY_E_INVALID_ARG, "key '%s': element type %s is not a fixed-size type",
                     key ? key : "(null)", sy_gguf_type_name(elem_type));
    if (__builtin_mul_overflow(count, (uint64_t)es, &bytes) ||
        __builtin_add_overflow(bytes, 12, &total) || total > SIZE_MAX || (count && !data))
        return wfail(w, SY_E_INVALID_ARG, "key '%s': bad array data", key ? key : "(null)");
    uint8_t *payload = malloc((size_t)total);
    if (!payload)
        return wfail(w, SY_E_NO_MEMORY, "out of memory");
    memcpy(payload, &elem_type, 4);
    memcpy(payload + 4, &count, 8);
    if (bytes)
        memcpy(payload + 12, data, (size_t)bytes);
    return add_kv(w, key, SY_GGUF_TYPE_ARRAY, payload, total);
}

sy_status sy_gguf_writer_add_arr_str(sy_gguf_writer *w, const char *key,
                                     const char *const *strs, uint64_t count)
{
    uint64_t total = 12;
    if (!w)
        return SY_E_INVALID_ARG;
    if (count && !strs)
        return wfail(w, SY_E_INVALID_ARG, "key '%s': NULL strings", key ? key : "(null)");
    for (uint64_t i = 0; i < count; i++) {
        if (!strs[i] || __builtin_add_overflow(total, 8 + (uint64_t)strlen(strs[i]), &total))
            return wfail(w, SY_E_INVALID_ARG, "key '%s': bad string %" PRIu64,
                         key ? key : "(null)", i);
    }
    if (total > SIZE_MAX)
        return wfail(w, SY_E_NO_MEMORY, "key '%s': array too large", key ? key : "(null)");
    uint8_t *payload = malloc((size_t)total);
    if (!payload)
        return wfail(w, SY_E_NO_MEMORY, "out of memory");
    uint32_t et = SY_GGUF_TYPE_STRING;
    memcpy(payload, &et, 4);
    memcpy(payload + 4, &count, 8);
    size_t o = 12;
    for (uint64_t i = 0; i < count; i++) {
        uint64_t len = strlen(strs[i]);
        memcpy(payload + o, &len, 8);
        memcpy(payload + o + 8, strs[i], (size_t)len);
        o += 8 + (size_t)len;
    }
    return add_kv(w, key, SY_GGUF_TYPE_ARRAY, payload, total);
}

sy_status sy_gguf_writer_add_raw(sy_gguf_writer *w, const char *key, uint32_t type,
                                 const void *payload, uint64_t n)
{
    return add_copy(w, key, type, payload, n);
}

sy_status sy_gguf_writer_copy_kv(sy_gguf_writer *w, const sy_gguf *src, uint64_t i)
{
    uint32_t type;
    const void *payload;
    uint64_t len;
    if (!w)
        return SY_E_INVALID_ARG;
    if (sy_gguf_kv_raw(src, i, &type, &payload, &len) != SY_OK)
        return wfail(w, SY_E_INVALID_ARG, "no key %" PRIu64 " in the source file", i);
    const char *key = sy_gguf_kv_key(src, i);
    if (strcmp(key, "general.alignment") == 0) {
        sy_gguf_value v;
        uint32_t a = 0;
        sy_gguf_kv_value(src, i, &v);
        sy_gguf_value_as_u32(&v, &a);
        return sy_gguf_writer_set_alignment(w, a);
    }
    return add_copy(w, key, type, payload, len);
}

/* ----------------------------------------------------------------- tensors */

static sy_status add_tensor(sy_gguf_writer *w, const char *name, sy_dtype dtype, uint32_t n_dims,
                            const int64_t *ne, const writer_tensor *src)
{
    uint64_t size;
    w->last_error[0] = '\0';
    if (!name || strlen(name) >= SY_GGUF_NAME_MAX)
        return wfail(w, SY_E_INVALID_ARG, "tensor name must be shorter than %u bytes",
                     SY_GGUF_NAME_MAX);
    if (!sy_dtype_is_valid(dtype))
        return wfail(w, SY_E_DTYPE, "tensor '%s': invalid dtype %d", name, (int)dtype);
    if (n_dims == 0 || n_dims > SY_GGUF_MAX_DIMS || !ne)
        return wfail(w, SY_E_INVALID_ARG, "tensor '%s': n_dims %" PRIu32 " is not in 1..%u", name,
                     n_dims, SY_GGUF_MAX_DIMS);
    for (size_t i = 0; i < w->n_tensors; i++) {
        if (strcmp(w->tensors[i].name, name) == 0)
            return wfail(w, SY_E_INVALID_ARG, "duplicate tensor name '%s'", name);
    }
    writer_tensor t = *src;
    t.dtype = dtype;
    t.n_dims = n_dims;
    for (uint32_t d = 0; d < SY_MAX_DIMS; d++) {
        t.ne[d] = d < n_dims ? ne[d] : 1;
        if (t.ne[d] < 0)
            return wfail(w, SY_E_SHAPE, "tensor '%s': ne[%" PRIu32 "] is negative", name, d);
    }
    uint32_t bs = sy_dtype_block_size(dtype);
    if (t.ne[0] % bs != 0)
        return wfail(w, SY_E_SHAPE, "tensor '%s': ne[0] %" PRId64 " is not a multiple of %" PRIu32,
                     name, t.ne[0], bs);
    bool overflow = __builtin_mul_overflow((uint64_t)t.ne[0] / bs,
                                           (uint64_t)sy_dtype_type_size(dtype), &size);
    for (uint32_t d = 1; d < SY_MAX_DIMS; d++)
        overflow |= __builtin_mul_overflow(size, (uint64_t)t.ne[d], &size);
    if (overflow || size > SIZE_MAX)
        return wfail(w, SY_E_SHAPE, "tensor '%s': size overflows", name);
    if (t.data && t.size != size)
        return wfail(w, SY_E_INVALID_ARG,
                     "tensor '%s': %" PRIu64 " bytes given, its shape needs %" PRIu64, name,
                     t.size, size);
    if (!t.data && !t.fill && t.size != 0)
        return wfail(w, SY_E_INVALID_ARG, "tensor '%s': NULL data with size %" PRIu64, name,
                     t.size);
    t.size = size;
    if (w->n_tensors == w->cap_tensors) {
        size_t cap = w->cap_tensors ? w->cap_tensors * 2 : 16;
        writer_tensor *ts = realloc(w->tensors, cap * sizeof *ts);
        if (!ts)
            return wfail(w, SY_E_NO_MEMORY, "out of memory");
        w->tensors = ts;
        w->cap_tensors = cap;
    }
    t.name = strdup(name);
    if (!t.name)
        return wfail(w, SY_E_NO_MEMORY, "out of memory");
    w->tensors[w->n_tensors++] = t;
    return SY_OK;
}

sy_status sy_gguf_writer_add_tensor(sy_gguf_writer *w, const char *name, sy_dtype dtype,
                                    uint32_t n_dims, const int64_t *ne, const void *data,
                                    uint64_t size)
{
    if (!w)
        return SY_E_INVALID_ARG;
    writer_tensor src = {.data = data, .size = size};
    return add_tensor(w, name, dtype, n_dims, ne, &src);
}

sy_status sy_gguf_writer_add_tensor_fn(sy_gguf_writer *w, const char *name, sy_dtype dtype,
                                       uint32_t n_dims, const int64_t *ne, sy_gguf_fill_fn fill,
                                       void *ctx)
{
    if (!w)
        return SY_E_INVALID_ARG;
    if (!fill)
        return wfail(w, SY_E_INVALID_ARG, "tensor '%s': NULL fill function",
                     name ? name : "(null)");
    writer_tensor src = {.fill = fill, .ctx = ctx};
    return add_tensor(w, name, dtype, n_dims, ne, &src);
}

/* ------------------------------------------------------------------- write */

typedef struct out_file {
    FILE *f;
    uint64_t pos;
    bool failed;
} out_file;

static void put(out_file *o, const void *p, uint64_t n)
{
    if (o->failed || n == 0)
        return;
    if (fwrite(p, 1, (size_t)n, o->f) != (size_t)n)
        o->failed = true;
    o->pos += n;
}

static void put_u32(out_file *o, uint32_t v)
{
    put(o, &v, 4);
}

static void put_u64(out_file *o, uint64_t v)
{
    put(o, &v, 8);
}

static void put_str(out_file *o, const char *s)
{
    uint64_t len = strlen(s);
    put_u64(o, len);
    put(o, s, len);
}

static void put_zeros(out_file *o, uint64_t n)
{
    static const uint8_t zeros[4096];
    while (n > 0) {
        uint64_t k = n < sizeof zeros ? n : sizeof zeros;
        put(o, zeros, k);
        n -= k;
    }
}

static uint64_t pad_to(uint64_t pos, uint32_t alignment)
{
    return (alignment - pos % alignment) % alignment;
}

static sy_status write_body(sy_gguf_writer *w, out_file *o, const char *path)
{
    uint64_t off = 0;
    void *scratch = NULL;
    uint64_t scratch_size = 0;
    sy_status st = SY_OK;

    put(o, "GGUF", 4);
    put_u32(o, w->version);
    put_u64(o, w->n_tensors);
    put_u64(o, w->n_kv + (w->alignment_set ? 1 : 0));
    if (w->alignment_set) {
        put_str(o, "general.alignment");
        put_u32(o, SY_GGUF_TYPE_UINT32);
        put_u32(o, w->alignment);
    }
    for (size_t i = 0; i < w->n_kv; i++) {
        put_str(o, w->kvs[i].key);
        put_u32(o, w->kvs[i].type);
        put(o, w->kvs[i].payload, w->kvs[i].len);
    }
    for (size_t i = 0; i < w->n_tensors; i++) {
        const writer_tensor *t = &w->tensors[i];
        put_str(o, t->name);
        put_u32(o, t->n_dims);
        for (uint32_t d = 0; d < t->n_dims; d++)
            put_u64(o, (uint64_t)t->ne[d]);
        put_u32(o, sy_gguf_ggml_from_dtype(t->dtype));
        put_u64(o, off);
        if (__builtin_add_overflow(off, t->size + pad_to(t->size, w->alignment), &off)) {
            st = wfail(w, SY_E_LIMIT, "%s: tensor data past 2^64 bytes at tensor '%s'", path,
                       t->name);
            goto out_free_scratch;
        }
    }
    put_zeros(o, pad_to(o->pos, w->alignment));
    for (size_t i = 0; i < w->n_tensors && !o->failed; i++) {
        const writer_tensor *t = &w->tensors[i];
        if (t->fill) {
            if (t->size > scratch_size) {
                void *s = realloc(scratch, (size_t)t->size);
                if (!s) {
                    st = wfail(w, SY_E_NO_MEMORY, "%s: out of memory for tensor '%s'", path,
                               t->name);
                    goto out_free_scratch;
                }
                scratch = s;
                scratch_size = t->size;
            }
            st = t->fill(t->ctx, t->name, scratch, t->size);
            if (st != SY_OK) {
                wfail(w, st, "%s: filling tensor '%s' failed: %s", path, t->name,
                      sy_status_name(st));
                goto out_free_scratch;
            }
            put(o, scratch, t->size);
        } else if (t->data) {
            put(o, t->data, t->size);
        } else {
            put_zeros(o, t->size);
        }
        put_zeros(o, pad_to(t->size, w->alignment));
    }
    if (o->failed)
        st = wfail(w, SY_E_IO, "%s: write failed: %s", path, strerror(errno));

out_free_scratch:
    free(scratch);
    return st;
}

sy_status sy_gguf_writer_write_file(sy_gguf_writer *w, const char *path)
{
    sy_status st;
    if (!w || !path)
        return SY_E_INVALID_ARG;
    w->last_error[0] = '\0';
    size_t plen = strlen(path);
    char *tmp = malloc(plen + 16);
    if (!tmp)
        return wfail(w, SY_E_NO_MEMORY, "out of memory");
    memcpy(tmp, path, plen);
    memcpy(tmp + plen, ".tmp-XXXXXX", 12);
    int fd = mkstemp(tmp);
    if (fd < 0) {
        st = wfail(w, SY_E_IO, "%s: cannot create a temporary file: %s", path, strerror(errno));
        goto out_free_tmp;
    }
    if (fchmod(fd, 0644) != 0) {
        st = wfail(w, SY_E_IO, "%s: cannot set permissions: %s", path, strerror(errno));
        close(fd);
        goto out_unlink;
    }
    out_file o = {.f = fdopen(fd, "wb")};
    if (!o.f) {
        st = wfail(w, SY_E_IO, "%s: cannot open a stream: %s", path, strerror(errno));
        close(fd);
        goto out_unlink;
    }
    st = write_body(w, &o, path);
    if (fclose(o.f) != 0 && st == SY_OK)
        st = wfail(w, SY_E_IO, "%s: write failed: %s", path, strerror(errno));
    if (st != SY_OK)
        goto out_unlink;
    if (rename(tmp, path) != 0) {
        st = wfail(w, SY_E_IO, "%s: cannot rename the temporary file: %s", path, strerror(errno));
        goto out_unlink;
    }
    free(tmp);
    return SY_OK;

out_unlink:
    unlink(tmp);
out_free_tmp:
    free(tmp);
    return st;
}
