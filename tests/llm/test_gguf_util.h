/* Hand-made GGUF files for the GGUF tests (test_gguf.c,
 * test_gguf_corrupt.c): a temporary directory per suite, byte builders,
 * a valid file, a file of every value type, and the refusal check. */
#ifndef SY_TEST_GGUF_UTIL_H
#define SY_TEST_GGUF_UTIL_H

#include <criterion/criterion.h>

#include <inttypes.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <unistd.h>

#include "gguf.h"

/* ------------------------------------------------------------ temp files */

static char tmpdir[256];

static inline void make_tmpdir(void)
{
    snprintf(tmpdir, sizeof tmpdir, "/tmp/sy-test-gguf-XXXXXX");
    cr_assert_not_null(mkdtemp(tmpdir), "mkdtemp failed");
}

static inline void remove_tmpdir(void)
{
    char cmd[300];
    snprintf(cmd, sizeof cmd, "rm -rf '%s'", tmpdir);
    cr_assert_eq(system(cmd), 0);
}


static inline const char *tmp_path(const char *name)
{
    static char path[512];
    snprintf(path, sizeof path, "%s/%s", tmpdir, name);
    return path;
}

/* ----------------------------------------------------- hand-made files */

typedef struct bytes {
    uint8_t *p;
    size_t len;
    size_t cap;
} bytes;

static inline void put(bytes *b, const void *src, size_t n)
{
    if (b->len + n > b->cap) {
        b->cap = (b->len + n) * 2 + 64;
        b->p = realloc(b->p, b->cap);
        cr_assert_not_null(b->p);
    }
    memcpy(b->p + b->len, src, n);
    b->len += n;
}

static inline void put_u8(bytes *b, uint8_t v) { put(b, &v, 1); }
static inline void put_u32(bytes *b, uint32_t v) { put(b, &v, 4); }
static inline void put_u64(bytes *b, uint64_t v) { put(b, &v, 8); }

static inline void put_str(bytes *b, const char *s)
{
    put_u64(b, strlen(s));
    put(b, s, strlen(s));
}

static inline void put_header(bytes *b, uint32_t version, uint64_t n_tensors, uint64_t n_kv)
{
    put(b, "GGUF", 4);
    put_u32(b, version);
    put_u64(b, n_tensors);
    put_u64(b, n_kv);
}

static inline void put_kv_u32(bytes *b, const char *key, uint32_t v)
{
    put_str(b, key);
    put_u32(b, SY_GGUF_TYPE_UINT32);
    put_u32(b, v);
}

static inline void put_kv_str(bytes *b, const char *key, const char *v)
{
    put_str(b, key);
    put_u32(b, SY_GGUF_TYPE_STRING);
    put_str(b, v);
}

/* A 1-D tensor info of |n| elements. */
static inline void put_tensor(bytes *b, const char *name, uint64_t n, uint32_t ggml_type, uint64_t offset)
{
    put_str(b, name);
    put_u32(b, 1);
    put_u64(b, n);
    put_u32(b, ggml_type);
    put_u64(b, offset);
}

static inline void put_pad(bytes *b, size_t alignment)
{
    while (b->len % alignment)
        put_u8(b, 0);
}

static inline void put_zeros(bytes *b, size_t n)
{
    for (size_t i = 0; i < n; i++)
        put_u8(b, 0);
}

static inline const char *write_bytes(const char *name, const void *p, size_t n)
{
    const char *path = tmp_path(name);
    FILE *f = fopen(path, "wb");
    cr_assert_not_null(f);
    if (n)
        cr_assert_eq(fwrite(p, 1, n, f), n);
    cr_assert_eq(fclose(f), 0);
    return path;
}

/* A valid file: 2 keys, tensors 'a' (8 f32) and 'b' (32 q8_0). */
static inline bytes valid_file(uint32_t version)
{
    bytes b = {0};
    put_header(&b, version, 2, 2);
    put_kv_str(&b, "general.architecture", "llama");
    put_kv_u32(&b, "llama.block_count", 2);
    put_tensor(&b, "a", 8, SY_GGML_TYPE_F32, 0);
    put_tensor(&b, "b", 32, SY_GGML_TYPE_Q8_0, 32);
    put_pad(&b, 32);
    for (int i = 0; i < 8; i++) {
        float f = (float)i;
        put(&b, &f, 4);
    }
    put_zeros(&b, 34);
    put_pad(&b, 32);
    return b;
}

/* Opens |b| and expects failure with |want| and a message that starts
 * with the path and holds every string of |needles| (NULL-terminated). */
static inline void expect_refused(const bytes *b, sy_status want, const char *const *needles)
{
    sy_gguf *g = (sy_gguf *)0x1;
    sy_gguf_error err;
    const char *path = write_bytes("bad.gguf", b->p, b->len);
    sy_status st = sy_gguf_open(path, &g, &err);
    cr_assert_eq(st, want, "status %s, expected %s (message: %s)", sy_status_name(st),
                 sy_status_name(want), err.msg);
    cr_assert_null(g, "out_gguf must be NULL on error");
    cr_assert_eq(strncmp(err.msg, path, strlen(path)), 0, "message must start with the path: %s",
                 err.msg);
    for (const char *const *n = needles; *n; n++)
        cr_assert_not_null(strstr(err.msg, *n), "message lacks '%s': %s", *n, err.msg);
}

#define REFUSED(b, st, ...) expect_refused(&(b), (st), (const char *const[]){__VA_ARGS__, NULL})

static inline sy_gguf *open_ok(const char *path)
{
    sy_gguf *g = NULL;
    sy_gguf_error err;
    sy_status st = sy_gguf_open(path, &g, &err);
    cr_assert_eq(st, SY_OK, "open failed: %s: %s", sy_status_name(st), err.msg);
    cr_assert_str_empty(err.msg);
    cr_assert_not_null(g);
    return g;
}

/* ----------------------------------------------------------- round trips */

typedef struct all_values {
    uint8_t u8s[3];
    int8_t i8s[3];
    uint16_t u16s[3];
    int16_t i16s[3];
    uint32_t u32s[3];
    int32_t i32s[3];
    uint64_t u64s[3];
    int64_t i64s[3];
    float f32s[3];
    double f64s[3];
    uint8_t bools[3];
} all_values;

static const all_values vals = {
    {0, 7, 255},
    {-128, 0, 127},
    {0, 1000, 65535},
    {-32768, -1, 32767},
    {0, 123456789, UINT32_MAX},
    {INT32_MIN, -5, INT32_MAX},
    {0, 1ull << 40, UINT64_MAX},
    {INT64_MIN, -7, INT64_MAX},
    {-1.5f, 0.0f, 3.25f},
    {-2.5, 1e-300, 6.02e23},
    {1, 0, 1},
};

/* Payload of an array of 2 arrays: [[1, 2] u32, ["x", "yz"] string]. */
static inline bytes nested_payload(void)
{
    bytes b = {0};
    put_u32(&b, SY_GGUF_TYPE_ARRAY);
    put_u64(&b, 2);
    put_u32(&b, SY_GGUF_TYPE_UINT32);
    put_u64(&b, 2);
    put_u32(&b, 1);
    put_u32(&b, 2);
    put_u32(&b, SY_GGUF_TYPE_STRING);
    put_u64(&b, 2);
    put_str(&b, "x");
    put_str(&b, "yz");
    return b;
}

static inline void write_all_types(uint32_t version, uint32_t alignment, const char *path)
{
    sy_gguf_writer *w;
    cr_assert_eq(sy_gguf_writer_create(version, &w), SY_OK);
    if (alignment)
        cr_assert_eq(sy_gguf_writer_set_alignment(w, alignment), SY_OK);
    cr_assert_eq(sy_gguf_writer_add_u8(w, "t.u8", 200), SY_OK);
    cr_assert_eq(sy_gguf_writer_add_i8(w, "t.i8", -100), SY_OK);
    cr_assert_eq(sy_gguf_writer_add_u16(w, "t.u16", 60000), SY_OK);
    cr_assert_eq(sy_gguf_writer_add_i16(w, "t.i16", -30000), SY_OK);
    cr_assert_eq(sy_gguf_writer_add_u32(w, "t.u32", 4000000000u), SY_OK);
    cr_assert_eq(sy_gguf_writer_add_i32(w, "t.i32", -2000000000), SY_OK);
    cr_assert_eq(sy_gguf_writer_add_u64(w, "t.u64", UINT64_MAX - 1), SY_OK);
    cr_assert_eq(sy_gguf_writer_add_i64(w, "t.i64", INT64_MIN + 1), SY_OK);
    cr_assert_eq(sy_gguf_writer_add_f32(w, "t.f32", 0.15625f), SY_OK);
    cr_assert_eq(sy_gguf_writer_add_f64(w, "t.f64", -1e100), SY_OK);
    cr_assert_eq(sy_gguf_writer_add_bool(w, "t.bool", true), SY_OK);
    cr_assert_eq(sy_gguf_writer_add_str(w, "t.str", "héllo wörld"), SY_OK);
    cr_assert_eq(sy_gguf_writer_add_str(w, "t.empty", ""), SY_OK);
    cr_assert_eq(sy_gguf_writer_add_arr(w, "a.u8", SY_GGUF_TYPE_UINT8, vals.u8s, 3), SY_OK);
    cr_assert_eq(sy_gguf_writer_add_arr(w, "a.i8", SY_GGUF_TYPE_INT8, vals.i8s, 3), SY_OK);
    cr_assert_eq(sy_gguf_writer_add_arr(w, "a.u16", SY_GGUF_TYPE_UINT16, vals.u16s, 3), SY_OK);
    cr_assert_eq(sy_gguf_writer_add_arr(w, "a.i16", SY_GGUF_TYPE_INT16, vals.i16s, 3), SY_OK);
    cr_assert_eq(sy_gguf_writer_add_arr(w, "a.u32", SY_GGUF_TYPE_UINT32, vals.u32s, 3), SY_OK);
    cr_assert_eq(sy_gguf_writer_add_arr(w, "a.i32", SY_GGUF_TYPE_INT32, vals.i32s, 3), SY_OK);
    cr_assert_eq(sy_gguf_writer_add_arr(w, "a.u64", SY_GGUF_TYPE_UINT64, vals.u64s, 3), SY_OK);
    cr_assert_eq(sy_gguf_writer_add_arr(w, "a.i64", SY_GGUF_TYPE_INT64, vals.i64s, 3), SY_OK);
    cr_assert_eq(sy_gguf_writer_add_arr(w, "a.f32", SY_GGUF_TYPE_FLOAT32, vals.f32s, 3), SY_OK);
    cr_assert_eq(sy_gguf_writer_add_arr(w, "a.f64", SY_GGUF_TYPE_FLOAT64, vals.f64s, 3), SY_OK);
    cr_assert_eq(sy_gguf_writer_add_arr(w, "a.bool", SY_GGUF_TYPE_BOOL, vals.bools, 3), SY_OK);
    cr_assert_eq(sy_gguf_writer_add_arr(w, "a.empty", SY_GGUF_TYPE_FLOAT32, NULL, 0), SY_OK);
    const char *strs[] = {"<unk>", "", "Ġthe", "日本"};
    cr_assert_eq(sy_gguf_writer_add_arr_str(w, "a.str", strs, 4), SY_OK);
    bytes nested = nested_payload();
    cr_assert_eq(sy_gguf_writer_add_raw(w, "a.nested", SY_GGUF_TYPE_ARRAY, nested.p, nested.len),
                 SY_OK);
    free(nested.p);

    float f32[6] = {1, 2, 3, 4, 5, 6};
    int64_t ne_f32[2] = {3, 2};
    cr_assert_eq(sy_gguf_writer_add_tensor(w, "w.f32", SY_DTYPE_F32, 2, ne_f32, f32, sizeof f32),
                 SY_OK);
    int64_t ne_q[3] = {64, 1, 3};
    cr_assert_eq(sy_gguf_writer_add_tensor(w, "w.q4_0", SY_DTYPE_Q4_0, 3, ne_q, NULL, 0), SY_OK);
    cr_assert_eq(sy_gguf_writer_write_file(w, path), SY_OK, "%s", sy_gguf_writer_last_error(w));
    sy_gguf_writer_destroy(w);
}

#endif
