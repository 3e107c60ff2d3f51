/* GGUF reader and writer: round trips of every value type, versions 2 and 3,
 * alignment, and one test per corruption, each checking the status and that
 * the message names the file and the field. */
#include <criterion/criterion.h>

#include <inttypes.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <time.h>
#include <unistd.h>

#include "gguf.h"

/* ------------------------------------------------------------ temp files */

static char tmpdir[256];

static void make_tmpdir(void)
{
    snprintf(tmpdir, sizeof tmpdir, "/tmp/sy-test-gguf-XXXXXX");
    cr_assert_not_null(mkdtemp(tmpdir), "mkdtemp failed");
}

static void remove_tmpdir(void)
{
    char cmd[300];
    snprintf(cmd, sizeof cmd, "rm -rf '%s'", tmpdir);
    cr_assert_eq(system(cmd), 0);
}

TestSuite(gguf, .init = make_tmpdir, .fini = remove_tmpdir);

static const char *tmp_path(const char *name)
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

static void put(bytes *b, const void *src, size_t n)
{
    if (b->len + n > b->cap) {
        b->cap = (b->len + n) * 2 + 64;
        b->p = realloc(b->p, b->cap);
        cr_assert_not_null(b->p);
    }
    memcpy(b->p + b->len, src, n);
    b->len += n;
}

static void put_u8(bytes *b, uint8_t v) { put(b, &v, 1); }
static void put_u32(bytes *b, uint32_t v) { put(b, &v, 4); }
static void put_u64(bytes *b, uint64_t v) { put(b, &v, 8); }

static void put_str(bytes *b, const char *s)
{
    put_u64(b, strlen(s));
    put(b, s, strlen(s));
}

static void put_header(bytes *b, uint32_t version, uint64_t n_tensors, uint64_t n_kv)
{
    put(b, "GGUF", 4);
    put_u32(b, version);
    put_u64(b, n_tensors);
    put_u64(b, n_kv);
}

static void put_kv_u32(bytes *b, const char *key, uint32_t v)
{
    put_str(b, key);
    put_u32(b, SY_GGUF_TYPE_UINT32);
    put_u32(b, v);
}

static void put_kv_str(bytes *b, const char *key, const char *v)
{
    put_str(b, key);
    put_u32(b, SY_GGUF_TYPE_STRING);
    put_str(b, v);
}

/* A 1-D tensor info of |n| elements. */
static void put_tensor(bytes *b, const char *name, uint64_t n, uint32_t ggml_type, uint64_t offset)
{
    put_str(b, name);
    put_u32(b, 1);
    put_u64(b, n);
    put_u32(b, ggml_type);
    put_u64(b, offset);
}

static void put_pad(bytes *b, size_t alignment)
{
    while (b->len % alignment)
        put_u8(b, 0);
}

static void put_zeros(bytes *b, size_t n)
{
    for (size_t i = 0; i < n; i++)
        put_u8(b, 0);
}

static const char *write_bytes(const char *name, const void *p, size_t n)
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
static bytes valid_file(uint32_t version)
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
static void expect_refused(const bytes *b, sy_status want, const char *const *needles)
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

static sy_gguf *open_ok(const char *path)
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
static bytes nested_payload(void)
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

static void write_all_types(uint32_t version, uint32_t alignment, const char *path)
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

static void check_fixed_array(sy_gguf *g, const char *key, uint32_t type, const void *want)
{
    sy_gguf_value arr;
    uint8_t got[24];
    cr_assert_eq(sy_gguf_get_arr(g, key, type, &arr), SY_OK, "%s", sy_gguf_last_error(g));
    cr_assert_eq(arr.count, 3);
    cr_assert_eq(sy_gguf_arr_read(&arr, type, 0, 3, got), SY_OK);
    cr_assert_eq(memcmp(got, want, 3 * sy_gguf_type_size(type)), 0, "%s differs", key);
}

static void check_all_types(const char *path, uint32_t version, uint32_t alignment)
{
    sy_gguf *g = open_ok(path);
    uint32_t u32;
    int32_t i32;
    uint64_t u64;
    int64_t i64;
    float f32;
    double f64;
    bool b;
    const char *s;
    uint64_t len;

    cr_assert_eq(sy_gguf_version(g), version);
    cr_assert_eq(sy_gguf_alignment(g), alignment);
    cr_assert_str_eq(sy_gguf_path(g), path);
    cr_assert_eq(sy_gguf_get_u32(g, "t.u8", &u32), SY_OK);
    cr_assert_eq(u32, 200);
    cr_assert_eq(sy_gguf_get_i32(g, "t.i8", &i32), SY_OK);
    cr_assert_eq(i32, -100);
    cr_assert_eq(sy_gguf_get_u32(g, "t.u16", &u32), SY_OK);
    cr_assert_eq(u32, 60000);
    cr_assert_eq(sy_gguf_get_i32(g, "t.i16", &i32), SY_OK);
    cr_assert_eq(i32, -30000);
    cr_assert_eq(sy_gguf_get_u32(g, "t.u32", &u32), SY_OK);
    cr_assert_eq(u32, 4000000000u);
    cr_assert_eq(sy_gguf_get_i32(g, "t.i32", &i32), SY_OK);
    cr_assert_eq(i32, -2000000000);
    cr_assert_eq(sy_gguf_get_u64(g, "t.u64", &u64), SY_OK);
    cr_assert_eq(u64, UINT64_MAX - 1);
    cr_assert_eq(sy_gguf_get_i64(g, "t.i64", &i64), SY_OK);
    cr_assert_eq(i64, INT64_MIN + 1);
    cr_assert_eq(sy_gguf_get_f32(g, "t.f32", &f32), SY_OK);
    cr_assert_eq(f32, 0.15625f);
    cr_assert_eq(sy_gguf_get_f64(g, "t.f64", &f64), SY_OK);
    cr_assert_eq(f64, -1e100);
    cr_assert_eq(sy_gguf_get_bool(g, "t.bool", &b), SY_OK);
    cr_assert(b);
    cr_assert_eq(sy_gguf_get_str(g, "t.str", &s, &len), SY_OK);
    cr_assert_str_eq(s, "héllo wörld");
    cr_assert_eq(len, strlen("héllo wörld"));
    cr_assert_eq(sy_gguf_get_str(g, "t.empty", &s, NULL), SY_OK);
    cr_assert_str_eq(s, "");

    check_fixed_array(g, "a.u8", SY_GGUF_TYPE_UINT8, vals.u8s);
    check_fixed_array(g, "a.i8", SY_GGUF_TYPE_INT8, vals.i8s);
    check_fixed_array(g, "a.u16", SY_GGUF_TYPE_UINT16, vals.u16s);
    check_fixed_array(g, "a.i16", SY_GGUF_TYPE_INT16, vals.i16s);
    check_fixed_array(g, "a.u32", SY_GGUF_TYPE_UINT32, vals.u32s);
    check_fixed_array(g, "a.i32", SY_GGUF_TYPE_INT32, vals.i32s);
    check_fixed_array(g, "a.u64", SY_GGUF_TYPE_UINT64, vals.u64s);
    check_fixed_array(g, "a.i64", SY_GGUF_TYPE_INT64, vals.i64s);
    check_fixed_array(g, "a.f32", SY_GGUF_TYPE_FLOAT32, vals.f32s);
    check_fixed_array(g, "a.f64", SY_GGUF_TYPE_FLOAT64, vals.f64s);
    check_fixed_array(g, "a.bool", SY_GGUF_TYPE_BOOL, vals.bools);

    sy_gguf_value arr, e;
    cr_assert_eq(sy_gguf_get_arr(g, "a.empty", SY_GGUF_TYPE_FLOAT32, &arr), SY_OK);
    cr_assert_eq(arr.count, 0);
    cr_assert_eq(sy_gguf_arr_elem(&arr, 0, &e), SY_E_INVALID_ARG);

    /* Element views convert like keys. */
    cr_assert_eq(sy_gguf_get_arr(g, "a.i16", SY_GGUF_TYPE_COUNT, &arr), SY_OK);
    cr_assert_eq(sy_gguf_arr_elem(&arr, 1, &e), SY_OK);
    cr_assert_eq(sy_gguf_value_as_i32(&e, &i32), SY_OK);
    cr_assert_eq(i32, -1);
    cr_assert_eq(sy_gguf_value_as_u32(&e, &u32), SY_E_FORMAT);
    cr_assert_eq(sy_gguf_get_arr(g, "a.f64", SY_GGUF_TYPE_FLOAT64, &arr), SY_OK);
    cr_assert_eq(sy_gguf_arr_elem(&arr, 2, &e), SY_OK);
    cr_assert_eq(sy_gguf_value_as_f64(&e, &f64), SY_OK);
    cr_assert_eq(f64, 6.02e23);

    sy_gguf_str str;
    cr_assert_eq(sy_gguf_get_arr(g, "a.str", SY_GGUF_TYPE_STRING, &arr), SY_OK);
    cr_assert_eq(arr.count, 4);
    const char *want[] = {"<unk>", "", "Ġthe", "日本"};
    for (uint64_t i = 0; i < 4; i++) {
        cr_assert_eq(sy_gguf_arr_str(&arr, i, &str), SY_OK);
        cr_assert_eq(str.len, strlen(want[i]));
        cr_assert_eq(memcmp(str.ptr, want[i], str.len), 0);
    }
    cr_assert_eq(sy_gguf_arr_str(&arr, 4, &str), SY_E_INVALID_ARG);

    /* [[1, 2], ["x", "yz"]] */
    sy_gguf_value inner, leaf;
    cr_assert_eq(sy_gguf_get_arr(g, "a.nested", SY_GGUF_TYPE_ARRAY, &arr), SY_OK);
    cr_assert_eq(arr.count, 2);
    cr_assert_eq(sy_gguf_arr_elem(&arr, 0, &inner), SY_OK);
    cr_assert_eq(inner.type, SY_GGUF_TYPE_ARRAY);
    cr_assert_eq(inner.elem_type, SY_GGUF_TYPE_UINT32);
    cr_assert_eq(inner.count, 2);
    cr_assert_eq(sy_gguf_arr_elem(&inner, 1, &leaf), SY_OK);
    cr_assert_eq(sy_gguf_value_as_u32(&leaf, &u32), SY_OK);
    cr_assert_eq(u32, 2);
    cr_assert_eq(sy_gguf_arr_elem(&arr, 1, &inner), SY_OK);
    cr_assert_eq(inner.elem_type, SY_GGUF_TYPE_STRING);
    cr_assert_eq(sy_gguf_arr_str(&inner, 1, &str), SY_OK);
    cr_assert_eq(str.len, 2);
    cr_assert_eq(memcmp(str.ptr, "yz", 2), 0);

    /* Tensors, in file order, aligned, with their data. */
    cr_assert_eq(sy_gguf_tensor_count(g), 2);
    const sy_gguf_tensor_info *t = sy_gguf_tensor(g, 0);
    cr_assert_str_eq(t->name, "w.f32");
    cr_assert_eq(t->dtype, SY_DTYPE_F32);
    cr_assert_eq(t->ggml_type, SY_GGML_TYPE_F32);
    cr_assert_eq(t->n_dims, 2);
    cr_assert_eq(t->ne[0], 3);
    cr_assert_eq(t->ne[1], 2);
    cr_assert_eq(t->ne[2], 1);
    cr_assert_eq(t->size, 24);
    float f[6];
    memcpy(f, t->data, sizeof f);
    for (int i = 0; i < 6; i++)
        cr_assert_eq(f[i], (float)(i + 1));
    const sy_gguf_tensor_info *q;
    cr_assert_eq(sy_gguf_find_tensor(g, "w.q4_0", &q), SY_OK);
    cr_assert_eq(q, sy_gguf_tensor(g, 1));
    cr_assert_eq(q->dtype, SY_DTYPE_Q4_0);
    cr_assert_eq(q->n_dims, 3);
    cr_assert_eq(q->ne[2], 3);
    cr_assert_eq(q->size, 2 * 18 * 3);
    for (uint64_t i = 0; i < q->size; i++)
        cr_assert_eq(((const uint8_t *)q->data)[i], 0);
    for (uint64_t i = 0; i < 2; i++) {
        const sy_gguf_tensor_info *ti = sy_gguf_tensor(g, i);
        cr_assert_eq(ti->offset % alignment, 0);
        cr_assert_eq(((uintptr_t)ti->data) % (alignment < 4096 ? alignment : 4096), 0);
        cr_assert_eq((const uint8_t *)ti->data - (const uint8_t *)sy_gguf_tensor(g, 0)->data,
                     (ptrdiff_t)ti->offset);
    }
    cr_assert_eq(sy_gguf_data_offset(g) % alignment, 0);
    cr_assert_null(sy_gguf_tensor(g, 2));
    sy_gguf_close(g);
}

Test(gguf, round_trips_every_value_type_in_version_3)
{
    const char *path = tmp_path("all.gguf");
    write_all_types(3, 0, path);
    check_all_types(path, 3, 32);
}

Test(gguf, round_trips_every_value_type_in_version_2)
{
    const char *path = tmp_path("all2.gguf");
    write_all_types(2, 0, path);
    check_all_types(path, 2, 32);
}

Test(gguf, honours_a_custom_alignment)
{
    const uint32_t aligns[] = {1, 8, 64, 4096, 8192};
    for (size_t i = 0; i < sizeof aligns / sizeof aligns[0]; i++) {
        char name[32];
        snprintf(name, sizeof name, "align%u.gguf", aligns[i]);
        const char *path = tmp_path(name);
        write_all_types(3, aligns[i], path);
        sy_gguf *g = open_ok(path);
        uint32_t a;
        cr_assert_eq(sy_gguf_get_u32(g, "general.alignment", &a), SY_OK);
        cr_assert_eq(a, aligns[i]);
        cr_assert_str_eq(sy_gguf_kv_key(g, 0), "general.alignment");
        sy_gguf_close(g);
        check_all_types(path, 3, aligns[i]);
    }
}

Test(gguf, keeps_keys_in_file_order_and_finds_them_by_name)
{
    bytes b = valid_file(3);
    sy_gguf *g = open_ok(write_bytes("ok.gguf", b.p, b.len));
    uint64_t i;
    cr_assert_eq(sy_gguf_kv_count(g), 2);
    cr_assert_str_eq(sy_gguf_kv_key(g, 0), "general.architecture");
    cr_assert_str_eq(sy_gguf_kv_key(g, 1), "llama.block_count");
    cr_assert_null(sy_gguf_kv_key(g, 2));
    cr_assert_eq(sy_gguf_find_key(g, "llama.block_count", &i), SY_OK);
    cr_assert_eq(i, 1);
    cr_assert_eq(sy_gguf_find_key(g, "llama.block", &i), SY_E_NOT_FOUND);
    cr_assert(sy_gguf_has_key(g, "general.architecture"));
    cr_assert_not(sy_gguf_has_key(g, "general.name"));
    const sy_gguf_tensor_info *t = (const sy_gguf_tensor_info *)0x1;
    cr_assert_eq(sy_gguf_find_tensor(g, "c", &t), SY_E_NOT_FOUND);
    cr_assert_null(t);
    cr_assert_eq(sy_gguf_find_tensor(g, "b", &t), SY_OK);
    cr_assert_eq(t->dtype, SY_DTYPE_Q8_0);
    cr_assert_eq(t->size, 34);
    cr_assert_eq(sy_gguf_data_offset(g) + 32, (uint64_t)((const uint8_t *)t->data -
                                                         (const uint8_t *)sy_gguf_tensor(g, 0)->data) +
                                                  sy_gguf_data_offset(g));
    sy_gguf_close(g);
    free(b.p);
}

Test(gguf, coerces_integers_that_fit_and_refuses_the_rest_naming_the_key)
{
    sy_gguf_writer *w;
    cr_assert_eq(sy_gguf_writer_create(3, &w), SY_OK);
    cr_assert_eq(sy_gguf_writer_add_u8(w, "k.u8", 9), SY_OK);
    cr_assert_eq(sy_gguf_writer_add_i64(w, "k.neg", -1), SY_OK);
    cr_assert_eq(sy_gguf_writer_add_u64(w, "k.big", 1ull << 33), SY_OK);
    cr_assert_eq(sy_gguf_writer_add_i16(w, "k.i16", 300), SY_OK);
    cr_assert_eq(sy_gguf_writer_add_str(w, "k.str", "7"), SY_OK);
    cr_assert_eq(sy_gguf_writer_add_f64(w, "k.f64", 0.5), SY_OK);
    cr_assert_eq(sy_gguf_writer_add_bool(w, "k.bool", false), SY_OK);
    const char *path = tmp_path("coerce.gguf");
    cr_assert_eq(sy_gguf_writer_write_file(w, path), SY_OK);
    sy_gguf_writer_destroy(w);

    sy_gguf *g = open_ok(path);
    uint32_t u32 = 77;
    int32_t i32;
    uint64_t u64;
    int64_t i64;
    float f;
    bool b;
    const char *s;
    sy_gguf_value arr;
    cr_assert_eq(sy_gguf_get_u32(g, "k.u8", &u32), SY_OK);
    cr_assert_eq(u32, 9);
    cr_assert_eq(sy_gguf_get_u64(g, "k.i16", &u64), SY_OK);
    cr_assert_eq(u64, 300);
    cr_assert_eq(sy_gguf_get_i64(g, "k.big", &i64), SY_OK);
    cr_assert_eq(i64, 1ll << 33);
    cr_assert_eq(sy_gguf_get_f32(g, "k.u8", &f), SY_OK);
    cr_assert_eq(f, 9.0f);
    cr_assert_eq(sy_gguf_get_f32(g, "k.f64", &f), SY_OK);
    cr_assert_eq(f, 0.5f);
    cr_assert_eq(sy_gguf_get_bool(g, "k.bool", &b), SY_OK);
    cr_assert_not(b);

    u32 = 77;
    cr_assert_eq(sy_gguf_get_u32(g, "k.neg", &u32), SY_E_FORMAT);
    cr_assert_eq(u32, 77, "out-param must be untouched on error");
    cr_assert_not_null(strstr(sy_gguf_last_error(g), "'k.neg' value -1 does not fit uint32"),
                       "%s", sy_gguf_last_error(g));
    cr_assert_eq(strncmp(sy_gguf_last_error(g), path, strlen(path)), 0);
    cr_assert_eq(sy_gguf_get_i32(g, "k.big", &i32), SY_E_FORMAT);
    cr_assert_not_null(strstr(sy_gguf_last_error(g), "8589934592 does not fit int32"));
    cr_assert_eq(sy_gguf_get_u64(g, "k.neg", &u64), SY_E_FORMAT);
    cr_assert_eq(sy_gguf_get_u32(g, "k.str", &u32), SY_E_FORMAT);
    cr_assert_not_null(strstr(sy_gguf_last_error(g), "'k.str' has type string, expected uint32"),
                       "%s", sy_gguf_last_error(g));
    cr_assert_eq(sy_gguf_get_u32(g, "k.f64", &u32), SY_E_FORMAT);
    cr_assert_eq(sy_gguf_get_f32(g, "k.str", &f), SY_E_FORMAT);
    cr_assert_eq(sy_gguf_get_bool(g, "k.u8", &b), SY_E_FORMAT);
    cr_assert_not_null(strstr(sy_gguf_last_error(g), "has type uint8, expected bool"), "%s",
                       sy_gguf_last_error(g));
    cr_assert_eq(sy_gguf_get_str(g, "k.u8", &s, NULL), SY_E_FORMAT);
    cr_assert_eq(sy_gguf_get_arr(g, "k.u8", SY_GGUF_TYPE_COUNT, &arr), SY_E_FORMAT);
    cr_assert_not_null(strstr(sy_gguf_last_error(g), "expected array"));
    cr_assert_eq(sy_gguf_get_u32(g, "k.missing", &u32), SY_E_NOT_FOUND);
    cr_assert_not_null(strstr(sy_gguf_last_error(g), "key 'k.missing' not found"));
    cr_assert_eq(sy_gguf_get_u32(g, "k.u8", &u32), SY_OK);
    cr_assert_str_empty(sy_gguf_last_error(g), "a success clears the last error");
    sy_gguf_close(g);
}

Test(gguf, checks_array_element_types_and_ranges)
{
    sy_gguf_writer *w;
    const float scores[4] = {0.5f, -1, 2, 3};
    cr_assert_eq(sy_gguf_writer_create(3, &w), SY_OK);
    cr_assert_eq(sy_gguf_writer_add_arr(w, "s", SY_GGUF_TYPE_FLOAT32, scores, 4), SY_OK);
    const char *path = tmp_path("arr.gguf");
    cr_assert_eq(sy_gguf_writer_write_file(w, path), SY_OK);
    sy_gguf_writer_destroy(w);
    sy_gguf *g = open_ok(path);
    sy_gguf_value arr;
    float out[4];
    sy_gguf_str str;
    cr_assert_eq(sy_gguf_get_arr(g, "s", SY_GGUF_TYPE_INT32, &arr), SY_E_FORMAT);
    cr_assert_not_null(strstr(sy_gguf_last_error(g), "array of float32, expected int32"));
    cr_assert_eq(sy_gguf_get_arr(g, "s", SY_GGUF_TYPE_FLOAT32, &arr), SY_OK);
    cr_assert_eq(sy_gguf_arr_read(&arr, SY_GGUF_TYPE_FLOAT32, 1, 3, out), SY_OK);
    cr_assert_eq(out[0], -1.0f);
    cr_assert_eq(out[2], 3.0f);
    cr_assert_eq(sy_gguf_arr_read(&arr, SY_GGUF_TYPE_FLOAT32, 2, 3, out), SY_E_INVALID_ARG);
    cr_assert_eq(sy_gguf_arr_read(&arr, SY_GGUF_TYPE_FLOAT32, UINT64_MAX, 2, out),
                 SY_E_INVALID_ARG);
    cr_assert_eq(sy_gguf_arr_read(&arr, SY_GGUF_TYPE_INT32, 0, 1, out), SY_E_FORMAT);
    cr_assert_eq(sy_gguf_arr_str(&arr, 0, &str), SY_E_INVALID_ARG);
    sy_gguf_close(g);
}

Test(gguf, maps_every_supported_ggml_type_and_sizes_its_tensor)
{
    static const struct {
        uint32_t ggml;
        sy_dtype dtype;
        uint64_t bytes_per_256;
    } cases[] = {
        {0, SY_DTYPE_F32, 1024},  {1, SY_DTYPE_F16, 512},   {2, SY_DTYPE_Q4_0, 144},
        {3, SY_DTYPE_Q4_1, 160},  {6, SY_DTYPE_Q5_0, 176},  {7, SY_DTYPE_Q5_1, 192},
        {8, SY_DTYPE_Q8_0, 272},  {12, SY_DTYPE_Q4_K, 144},
        {13, SY_DTYPE_Q5_K, 176}, {14, SY_DTYPE_Q6_K, 210}, {26, SY_DTYPE_I32, 1024},
        {30, SY_DTYPE_BF16, 512},
    };
    sy_gguf_writer *w;
    cr_assert_eq(sy_gguf_writer_create(3, &w), SY_OK);
    for (size_t i = 0; i < sizeof cases / sizeof cases[0]; i++) {
        sy_dtype d;
        cr_assert_eq(sy_gguf_dtype_from_ggml(cases[i].ggml, &d), SY_OK);
        cr_assert_eq(d, cases[i].dtype);
        cr_assert_eq(sy_gguf_ggml_from_dtype(cases[i].dtype), cases[i].ggml);
        char name[16];
        snprintf(name, sizeof name, "t%zu", i);
        int64_t ne[2] = {256, 2};
        cr_assert_eq(sy_gguf_writer_add_tensor(w, name, cases[i].dtype, 2, ne, NULL, 0), SY_OK);
    }
    const char *path = tmp_path("types.gguf");
    cr_assert_eq(sy_gguf_writer_write_file(w, path), SY_OK);
    sy_gguf_writer_destroy(w);
    sy_gguf *g = open_ok(path);
    for (size_t i = 0; i < sizeof cases / sizeof cases[0]; i++) {
        const sy_gguf_tensor_info *t = sy_gguf_tensor(g, i);
        cr_assert_eq(t->ggml_type, cases[i].ggml);
        cr_assert_eq(t->dtype, cases[i].dtype);
        cr_assert_eq(t->size, 2 * cases[i].bytes_per_256, "%s", sy_dtype_name(t->dtype));
    }
    sy_gguf_close(g);
    sy_dtype d = SY_DTYPE_F32;
    cr_assert_eq(sy_gguf_dtype_from_ggml(9, &d), SY_E_DTYPE);
    cr_assert_eq(d, SY_DTYPE_F32);
    cr_assert_str_eq(sy_gguf_ggml_type_name(9), "q8_1");
    cr_assert_str_eq(sy_gguf_ggml_type_name(4), "unknown");
    cr_assert_str_eq(sy_gguf_ggml_type_name(1000), "unknown");
    cr_assert_str_eq(sy_gguf_type_name(SY_GGUF_TYPE_FLOAT64), "float64");
    cr_assert_str_eq(sy_gguf_type_name(13), "invalid");
}

static sy_status fill_ramp(void *ctx, const char *name, void *dst, uint64_t size)
{
    int *calls = ctx;
    (*calls)++;
    for (uint64_t i = 0; i < size; i++)
        ((uint8_t *)dst)[i] = (uint8_t)(i + (uint64_t)name[0]);
    return SY_OK;
}

static sy_status fill_fails(void *ctx, const char *name, void *dst, uint64_t size)
{
    return SY_E_IO;
}

Test(gguf, writer_fills_tensors_at_write_time_and_leaves_no_file_when_that_fails)
{
    sy_gguf_writer *w;
    int calls = 0;
    int64_t ne[1] = {100};
    cr_assert_eq(sy_gguf_writer_create(3, &w), SY_OK);
    cr_assert_eq(sy_gguf_writer_add_tensor_fn(w, "r", SY_DTYPE_F16, 1, ne, fill_ramp, &calls),
                 SY_OK);
    const char *path = tmp_path("fill.gguf");
    cr_assert_eq(sy_gguf_writer_write_file(w, path), SY_OK);
    cr_assert_eq(calls, 1);
    sy_gguf *g = open_ok(path);
    const sy_gguf_tensor_info *t = sy_gguf_tensor(g, 0);
    cr_assert_eq(t->size, 200);
    for (uint64_t i = 0; i < 200; i++)
        cr_assert_eq(((const uint8_t *)t->data)[i], (uint8_t)(i + 'r'));
    sy_gguf_close(g);

    cr_assert_eq(sy_gguf_writer_add_tensor_fn(w, "x", SY_DTYPE_F32, 1, ne, fill_fails, NULL),
                 SY_OK);
    const char *path2 = tmp_path("fail.gguf");
    cr_assert_eq(sy_gguf_writer_write_file(w, path2), SY_E_IO);
    cr_assert_not_null(strstr(sy_gguf_writer_last_error(w), "tensor 'x'"));
    cr_assert_neq(access(path2, F_OK), 0, "a failed write must leave no file");
    sy_gguf_writer_destroy(w);
}

Test(gguf, writer_refuses_bad_keys_and_tensors)
{
    sy_gguf_writer *w;
    float data[4] = {0};
    int64_t ne[2] = {4, 1};
    int64_t bad_ne[1] = {33};
    int64_t neg_ne[2] = {4, -1};
    cr_assert_eq(sy_gguf_writer_create(1, &w), SY_E_UNSUPPORTED);
    cr_assert_null(w);
    cr_assert_eq(sy_gguf_writer_create(3, &w), SY_OK);
    cr_assert_eq(sy_gguf_writer_add_u32(w, "k", 1), SY_OK);
    cr_assert_eq(sy_gguf_writer_add_u32(w, "k", 2), SY_E_INVALID_ARG);
    cr_assert_not_null(strstr(sy_gguf_writer_last_error(w), "duplicate key 'k'"));
    cr_assert_eq(sy_gguf_writer_add_u32(w, "", 2), SY_E_INVALID_ARG);
    cr_assert_eq(sy_gguf_writer_add_u32(w, "general.alignment", 64), SY_E_INVALID_ARG);
    cr_assert_eq(sy_gguf_writer_set_alignment(w, 48), SY_E_INVALID_ARG);
    cr_assert_eq(sy_gguf_writer_set_alignment(w, 0), SY_E_INVALID_ARG);
    cr_assert_eq(sy_gguf_writer_add_arr(w, "a", SY_GGUF_TYPE_STRING, data, 1), SY_E_INVALID_ARG);
    cr_assert_eq(sy_gguf_writer_add_tensor(w, "t", SY_DTYPE_F32, 2, ne, data, 8),
                 SY_E_INVALID_ARG);
    cr_assert_eq(sy_gguf_writer_add_tensor(w, "t", SY_DTYPE_F32, 2, ne, data, sizeof data), SY_OK);
    cr_assert_eq(sy_gguf_writer_add_tensor(w, "t", SY_DTYPE_F32, 2, ne, data, sizeof data),
                 SY_E_INVALID_ARG);
    cr_assert_not_null(strstr(sy_gguf_writer_last_error(w), "duplicate tensor name 't'"));
    cr_assert_eq(sy_gguf_writer_add_tensor(w, "q", SY_DTYPE_Q4_0, 1, bad_ne, NULL, 0),
                 SY_E_SHAPE);
    cr_assert_eq(sy_gguf_writer_add_tensor(w, "n", SY_DTYPE_F32, 2, neg_ne, NULL, 0), SY_E_SHAPE);
    cr_assert_eq(sy_gguf_writer_add_tensor(w, "d", (sy_dtype)99, 2, ne, NULL, 0), SY_E_DTYPE);
    cr_assert_eq(sy_gguf_writer_add_tensor(w, "z", SY_DTYPE_F32, 5, ne, NULL, 0),
                 SY_E_INVALID_ARG);
    char long_name[80];
    memset(long_name, 'n', sizeof long_name - 1);
    long_name[sizeof long_name - 1] = '\0';
    cr_assert_eq(sy_gguf_writer_add_tensor(w, long_name, SY_DTYPE_F32, 2, ne, NULL, 0),
                 SY_E_INVALID_ARG);
    cr_assert_eq(sy_gguf_writer_write_file(w, "/nonexistent-dir/x.gguf"), SY_E_IO);
    cr_assert_not_null(strstr(sy_gguf_writer_last_error(w), "/nonexistent-dir/x.gguf"));
    sy_gguf_writer_destroy(w);
    sy_gguf_writer_destroy(NULL);
}

Test(gguf, copies_keys_byte_for_byte_from_another_file)
{
    const char *src_path = tmp_path("src.gguf");
    write_all_types(3, 64, src_path);
    sy_gguf *src = open_ok(src_path);
    sy_gguf_writer *w;
    cr_assert_eq(sy_gguf_writer_create(2, &w), SY_OK);
    for (uint64_t i = 0; i < sy_gguf_kv_count(src); i++)
        cr_assert_eq(sy_gguf_writer_copy_kv(w, src, i), SY_OK, "%s", sy_gguf_writer_last_error(w));
    cr_assert_eq(sy_gguf_writer_copy_kv(w, src, 9999), SY_E_INVALID_ARG);
    const char *dst_path = tmp_path("dst.gguf");
    cr_assert_eq(sy_gguf_writer_write_file(w, dst_path), SY_OK);
    sy_gguf_writer_destroy(w);
    sy_gguf *dst = open_ok(dst_path);
    cr_assert_eq(sy_gguf_kv_count(dst), sy_gguf_kv_count(src));
    cr_assert_eq(sy_gguf_alignment(dst), 64);
    for (uint64_t i = 0; i < sy_gguf_kv_count(src); i++) {
        uint32_t ta, tb;
        const void *pa, *pb;
        uint64_t la, lb;
        cr_assert_str_eq(sy_gguf_kv_key(dst, i), sy_gguf_kv_key(src, i));
        cr_assert_eq(sy_gguf_kv_raw(src, i, &ta, &pa, &la), SY_OK);
        cr_assert_eq(sy_gguf_kv_raw(dst, i, &tb, &pb, &lb), SY_OK);
        cr_assert_eq(ta, tb);
        cr_assert_eq(la, lb);
        cr_assert_eq(memcmp(pa, pb, la), 0, "value of %s differs", sy_gguf_kv_key(src, i));
    }
    sy_gguf_close(src);
    sy_gguf_close(dst);
}

Test(gguf, opens_a_small_llama_shaped_model_with_a_tokenizer)
{
    static const char *const tokens[] = {"<unk>", "<s>", "</s>", "a", "b", "ab"};
    static const float scores[] = {0, 0, 0, -1, -2, -3};
    static const int32_t types[] = {2, 3, 3, 1, 1, 1};
    static const char *const merges[] = {"a b"};
    sy_gguf_writer *w;
    cr_assert_eq(sy_gguf_writer_create(3, &w), SY_OK);
    cr_assert_eq(sy_gguf_writer_add_str(w, "general.architecture", "llama"), SY_OK);
    cr_assert_eq(sy_gguf_writer_add_u32(w, "llama.block_count", 2), SY_OK);
    cr_assert_eq(sy_gguf_writer_add_u32(w, "llama.embedding_length", 64), SY_OK);
    cr_assert_eq(sy_gguf_writer_add_f32(w, "llama.attention.layer_norm_rms_epsilon", 1e-5f), SY_OK);
    cr_assert_eq(sy_gguf_writer_add_str(w, "tokenizer.ggml.model", "gpt2"), SY_OK);
    cr_assert_eq(sy_gguf_writer_add_arr_str(w, "tokenizer.ggml.tokens", tokens, 6), SY_OK);
    cr_assert_eq(sy_gguf_writer_add_arr(w, "tokenizer.ggml.scores", SY_GGUF_TYPE_FLOAT32, scores, 6),
                 SY_OK);
    cr_assert_eq(sy_gguf_writer_add_arr(w, "tokenizer.ggml.token_type", SY_GGUF_TYPE_INT32, types, 6),
                 SY_OK);
    cr_assert_eq(sy_gguf_writer_add_arr_str(w, "tokenizer.ggml.merges", merges, 1), SY_OK);
    cr_assert_eq(sy_gguf_writer_add_u32(w, "tokenizer.ggml.bos_token_id", 1), SY_OK);
    const char *names[] = {"attn_norm", "attn_q", "attn_k", "attn_v", "attn_output",
                           "ffn_norm", "ffn_gate", "ffn_up", "ffn_down"};
    int64_t ne_norm[1] = {64}, ne_mat[2] = {64, 64};
    for (int l = 0; l < 2; l++) {
        for (size_t k = 0; k < sizeof names / sizeof names[0]; k++) {
            char name[64];
            snprintf(name, sizeof name, "blk.%d.%s.weight", l, names[k]);
            bool norm = strstr(names[k], "norm") != NULL;
            cr_assert_eq(sy_gguf_writer_add_tensor(w, name, norm ? SY_DTYPE_F32 : SY_DTYPE_Q8_0,
                                                   norm ? 1 : 2, norm ? ne_norm : ne_mat, NULL, 0),
                         SY_OK,
                         "%s", sy_gguf_writer_last_error(w));
        }
    }
    int64_t ne_emb[2] = {64, 6};
    cr_assert_eq(sy_gguf_writer_add_tensor(w, "token_embd.weight", SY_DTYPE_Q8_0, 2, ne_emb, NULL, 0),
                 SY_OK);
    const char *path = tmp_path("llama.gguf");
    cr_assert_eq(sy_gguf_writer_write_file(w, path), SY_OK);
    sy_gguf_writer_destroy(w);

    sy_gguf *g = open_ok(path);
    const char *arch;
    cr_assert_eq(sy_gguf_get_str(g, "general.architecture", &arch, NULL), SY_OK);
    cr_assert_str_eq(arch, "llama");
    sy_gguf_value toks;
    sy_gguf_str s;
    cr_assert_eq(sy_gguf_get_arr(g, "tokenizer.ggml.tokens", SY_GGUF_TYPE_STRING, &toks), SY_OK);
    cr_assert_eq(toks.count, 6);
    cr_assert_eq(sy_gguf_arr_str(&toks, 5, &s), SY_OK);
    cr_assert_eq(s.len, 2);
    cr_assert_eq(memcmp(s.ptr, "ab", 2), 0);
    float eps;
    cr_assert_eq(sy_gguf_get_f32(g, "llama.attention.layer_norm_rms_epsilon", &eps), SY_OK);
    cr_assert_float_eq(eps, 1e-5f, 1e-12f);
    const sy_gguf_tensor_info *t;
    cr_assert_eq(sy_gguf_find_tensor(g, "blk.1.ffn_norm.weight", &t), SY_OK);
    cr_assert_eq(t->size, 256);
    sy_gguf_close(g);
}

/* ------------------------------------------------------------ corruptions */

Test(gguf, rejects_a_missing_file_and_a_directory)
{
    sy_gguf *g;
    sy_gguf_error err;
    cr_assert_eq(sy_gguf_open(tmp_path("nope.gguf"), &g, &err), SY_E_IO);
    cr_assert_not_null(strstr(err.msg, "nope.gguf: cannot open"), "%s", err.msg);
    cr_assert_eq(sy_gguf_open(tmpdir, &g, &err), SY_E_IO);
    cr_assert_not_null(strstr(err.msg, "not a regular file"), "%s", err.msg);
    cr_assert_eq(sy_gguf_open(NULL, &g, &err), SY_E_INVALID_ARG);
    cr_assert_eq(sy_gguf_open(tmpdir, NULL, NULL), SY_E_INVALID_ARG);
    sy_gguf_close(NULL);
}

Test(gguf, rejects_an_empty_file)
{
    bytes b = {0};
    REFUSED(b, SY_E_FORMAT, "file is empty");
}

Test(gguf, rejects_bad_magic)
{
    bytes b = valid_file(3);
    memcpy(b.p, "ggjt", 4);
    REFUSED(b, SY_E_FORMAT, "bad magic 'ggjt'", "not a GGUF file");
    b.len = 3;
    REFUSED(b, SY_E_FORMAT, "truncated", "magic");
    free(b.p);
}

Test(gguf, rejects_version_1_with_a_clear_message)
{
    bytes b = valid_file(1);
    REFUSED(b, SY_E_UNSUPPORTED, "GGUF version 1 is not supported", "versions 2 and 3");
    free(b.p);
}

Test(gguf, rejects_version_99)
{
    bytes b = valid_file(99);
    REFUSED(b, SY_E_UNSUPPORTED, "GGUF version 99 is not supported");
    free(b.p);
}

Test(gguf, rejects_a_big_endian_file)
{
    bytes b = valid_file(3);
    uint32_t v = __builtin_bswap32(3);
    memcpy(b.p + 4, &v, 4);
    REFUSED(b, SY_E_UNSUPPORTED, "big-endian");
    free(b.p);
}

Test(gguf, rejects_a_truncated_header)
{
    bytes b = valid_file(3);
    b.len = 6;
    REFUSED(b, SY_E_FORMAT, "truncated", "header", "version");
    b.len = 12;
    REFUSED(b, SY_E_FORMAT, "truncated", "header", "n_tensors");
    b.len = 20;
    REFUSED(b, SY_E_FORMAT, "truncated", "header", "n_kv");
    free(b.p);
}

Test(gguf, rejects_a_file_truncated_in_a_key)
{
    bytes b = valid_file(3);
    b.len = 24 + 8 + 5; /* inside the first key's bytes */
    REFUSED(b, SY_E_FORMAT, "n_kv 2 needs");
    free(b.p);
    /* Keep the counts plausible: cut inside key 1's value. */
    bytes c = {0};
    put_header(&c, 3, 0, 2);
    put_kv_str(&c, "general.architecture", "llama");
    put_str(&c, "llama.block_count");
    put_u32(&c, SY_GGUF_TYPE_UINT32);
    put_u8(&c, 2);
    REFUSED(c, SY_E_FORMAT, "truncated", "key 1 'llama.block_count'", "value needs 4 bytes");
    free(c.p);
}

Test(gguf, rejects_a_file_truncated_in_the_tensor_infos)
{
    bytes b = {0};
    put_header(&b, 3, 2, 1);
    put_kv_str(&b, "general.architecture", "llama");
    put_tensor(&b, "a", 8, SY_GGML_TYPE_F32, 0);
    put_str(&b, "b");
    put_u32(&b, 2);
    put_u64(&b, 32);
    put_zeros(&b, 10); /* ne[1] is there, the type only in part */
    REFUSED(b, SY_E_FORMAT, "truncated", "tensor 1 'b'", "type");
    free(b.p);
}

Test(gguf, rejects_a_file_truncated_in_the_data)
{
    bytes b = valid_file(3);
    size_t full = b.len;
    b.len = full - 40; /* 'b' is the last 34 bytes before 30 bytes of padding */
    char want[96];
    snprintf(want, sizeof want, "tensor 'b' ends at byte %zu, file has %zu", full - 30, full - 40);
    REFUSED(b, SY_E_FORMAT, want);
    free(b.p);
}

Test(gguf, rejects_every_truncation_of_a_valid_file)
{
    const char *path = tmp_path("all.gguf");
    write_all_types(3, 0, path);
    FILE *f = fopen(path, "rb");
    cr_assert_not_null(f);
    uint8_t buf[4096];
    size_t n = fread(buf, 1, sizeof buf, f);
    fclose(f);
    cr_assert_lt(n, sizeof buf);
    /* Everything up to the last tensor byte is needed; the padding after
     * it is not. */
    sy_gguf *full = open_ok(path);
    uint64_t need = 0;
    for (uint64_t i = 0; i < sy_gguf_tensor_count(full); i++) {
        const sy_gguf_tensor_info *t = sy_gguf_tensor(full, i);
        uint64_t end = sy_gguf_data_offset(full) + t->offset + t->size;
        need = end > need ? end : need;
    }
    sy_gguf_close(full);
    cr_assert_leq(need, n);
    for (size_t len = 0; len <= n; len++) {
        sy_gguf *g;
        sy_gguf_error err;
        const char *p = write_bytes("cut.gguf", buf, len);
        sy_status st = sy_gguf_open(p, &g, &err);
        if (len < need) {
            cr_assert_eq(st, SY_E_FORMAT, "length %zu of %zu: %s", len, n, err.msg);
            cr_assert_null(g);
        } else {
            cr_assert_eq(st, SY_OK, "length %zu of %zu: %s", len, n, err.msg);
            sy_gguf_close(g);
        }
    }
}

Test(gguf, rejects_a_huge_n_kv_before_allocating)
{
    bytes b = valid_file(3);
    uint64_t huge = UINT64_MAX / 2;
    memcpy(b.p + 16, &huge, 8);
    REFUSED(b, SY_E_FORMAT, "header", "n_kv 9223372036854775807 needs at least 14 bytes each");
    free(b.p);
}

Test(gguf, rejects_a_huge_n_tensors_before_allocating)
{
    bytes b = valid_file(3);
    uint64_t huge = 1ull << 40;
    memcpy(b.p + 8, &huge, 8);
    REFUSED(b, SY_E_FORMAT, "header", "n_tensors 1099511627776 needs");
    free(b.p);
}

Test(gguf, rejects_counts_that_fit_alone_but_not_together)
{
    bytes b = valid_file(3);
    uint64_t n_tensors = (b.len - 24) / 32, n_kv = (b.len - 24) / 14;
    memcpy(b.p + 8, &n_tensors, 8);
    memcpy(b.p + 16, &n_kv, 8);
    REFUSED(b, SY_E_FORMAT, "header", "need more than");
    free(b.p);
}

Test(gguf, rejects_a_huge_string_length)
{
    bytes b = {0};
    put_header(&b, 3, 0, 1);
    put_str(&b, "general.name");
    put_u32(&b, SY_GGUF_TYPE_STRING);
    put_u64(&b, UINT64_MAX - 3);
    put(&b, "abc", 3);
    REFUSED(b, SY_E_FORMAT, "key 0 'general.name'", "string length 18446744073709551612");
    free(b.p);
}

Test(gguf, rejects_a_huge_key_length)
{
    bytes b = {0};
    put_header(&b, 3, 0, 1);
    put_u64(&b, 1ull << 62);
    put_zeros(&b, 40);
    REFUSED(b, SY_E_FORMAT, "key 0", "key length 4611686018427387904 exceeds 65535");
    free(b.p);
}

Test(gguf, rejects_a_huge_array_length)
{
    static const uint32_t elem_types[] = {SY_GGUF_TYPE_UINT8, SY_GGUF_TYPE_FLOAT64,
                                          SY_GGUF_TYPE_STRING, SY_GGUF_TYPE_ARRAY};
    for (size_t i = 0; i < 4; i++) {
        bytes b = {0};
        put_header(&b, 3, 0, 1);
        put_str(&b, "tokenizer.ggml.tokens");
        put_u32(&b, SY_GGUF_TYPE_ARRAY);
        put_u32(&b, elem_types[i]);
        put_u64(&b, (1ull << 61) + 1);
        put_zeros(&b, 64);
        REFUSED(b, SY_E_FORMAT, "key 0 'tokenizer.ggml.tokens'", "array length 2305843009213693953");
        free(b.p);
    }
}

Test(gguf, rejects_a_huge_string_length_inside_an_array)
{
    bytes b = {0};
    put_header(&b, 3, 0, 1);
    put_str(&b, "tokenizer.ggml.tokens");
    put_u32(&b, SY_GGUF_TYPE_ARRAY);
    put_u32(&b, SY_GGUF_TYPE_STRING);
    put_u64(&b, 2);
    put_str(&b, "ok");
    put_u64(&b, 1ull << 50);
    put_zeros(&b, 8);
    REFUSED(b, SY_E_FORMAT, "'tokenizer.ggml.tokens', array element 1", "string length");
    free(b.p);
}

Test(gguf, rejects_unknown_value_and_element_types)
{
    bytes b = {0};
    put_header(&b, 3, 0, 1);
    put_str(&b, "k");
    put_u32(&b, 13);
    put_zeros(&b, 16);
    REFUSED(b, SY_E_FORMAT, "key 0 'k'", "value type 13 is not a GGUF type");
    free(b.p);
    b = (bytes){0};
    put_header(&b, 3, 0, 1);
    put_str(&b, "k");
    put_u32(&b, SY_GGUF_TYPE_ARRAY);
    put_u32(&b, 77);
    put_u64(&b, 1);
    put_zeros(&b, 16);
    REFUSED(b, SY_E_FORMAT, "key 0 'k'", "array element type 77");
    free(b.p);
}

Test(gguf, rejects_arrays_nested_too_deep)
{
    bytes b = {0};
    put_header(&b, 3, 0, 1);
    put_str(&b, "deep");
    put_u32(&b, SY_GGUF_TYPE_ARRAY);
    for (int i = 0; i < 20; i++) {
        put_u32(&b, SY_GGUF_TYPE_ARRAY);
        put_u64(&b, 1);
    }
    put_zeros(&b, 64);
    REFUSED(b, SY_E_LIMIT, "key 0 'deep'", "nested more than 8 deep");
    free(b.p);
}

Test(gguf, rejects_bad_keys)
{
    bytes b = {0};
    put_header(&b, 3, 0, 1);
    put_u64(&b, 0);
    put_u32(&b, SY_GGUF_TYPE_UINT8);
    put_zeros(&b, 8);
    REFUSED(b, SY_E_FORMAT, "key 0: empty key");
    free(b.p);
    b = (bytes){0};
    put_header(&b, 3, 0, 1);
    put_u64(&b, 3);
    put(&b, "a\0b", 3);
    put_u32(&b, SY_GGUF_TYPE_UINT8);
    put_zeros(&b, 8);
    REFUSED(b, SY_E_FORMAT, "key 0 'a\\x00b'", "NUL");
    free(b.p);
}

Test(gguf, rejects_a_duplicate_key)
{
    bytes b = {0};
    put_header(&b, 3, 0, 3);
    put_kv_u32(&b, "a", 1);
    put_kv_u32(&b, "b", 1);
    put_kv_u32(&b, "a", 2);
    REFUSED(b, SY_E_FORMAT, "duplicate key 'a' (keys 0 and 2)");
    free(b.p);
}

Test(gguf, rejects_a_bad_general_alignment)
{
    const uint32_t bad[] = {0, 3, 48, 0x80000001u};
    for (size_t i = 0; i < 4; i++) {
        bytes b = {0};
        put_header(&b, 3, 0, 1);
        put_kv_u32(&b, "general.alignment", bad[i]);
        char want[64];
        snprintf(want, sizeof want, "general.alignment %u is not a power of two", bad[i]);
        REFUSED(b, SY_E_FORMAT, want);
        free(b.p);
    }
    bytes b = {0};
    put_header(&b, 3, 0, 1);
    put_kv_str(&b, "general.alignment", "32");
    REFUSED(b, SY_E_FORMAT, "general.alignment has type string");
    free(b.p);
}

Test(gguf, rejects_too_many_dims)
{
    const uint32_t dims[] = {0, 5, UINT32_MAX};
    for (size_t i = 0; i < 3; i++) {
        bytes b = {0};
        put_header(&b, 3, 1, 0);
        put_str(&b, "w");
        put_u32(&b, dims[i]);
        put_zeros(&b, 64);
        char want[64];
        snprintf(want, sizeof want, "tensor 0 'w': n_dims %u is not in 1..4", dims[i]);
        REFUSED(b, SY_E_FORMAT, want);
        free(b.p);
    }
}

Test(gguf, rejects_a_tensor_name_too_long_or_holding_nul)
{
    bytes b = {0};
    put_header(&b, 3, 1, 0);
    put_u64(&b, 64);
    put_zeros(&b, 128);
    REFUSED(b, SY_E_FORMAT, "tensor 0", "name length 64 exceeds 63 bytes");
    free(b.p);
    b = (bytes){0};
    put_header(&b, 3, 1, 0);
    put_u64(&b, 2);
    put(&b, "w\0", 2);
    put_zeros(&b, 64);
    REFUSED(b, SY_E_FORMAT, "tensor 0", "NUL");
    free(b.p);
}

Test(gguf, rejects_tensor_past_end_of_file)
{
    bytes b = {0};
    put_header(&b, 3, 1, 0);
    put_tensor(&b, "blk.3.attn_q.weight", 1024, SY_GGML_TYPE_F32, 0);
    put_pad(&b, 32);
    size_t data = b.len;
    put_zeros(&b, 4000);
    char want[128];
    snprintf(want, sizeof want, "tensor 'blk.3.attn_q.weight' ends at byte %zu, file has %zu",
             data + 4096, data + 4000);
    REFUSED(b, SY_E_FORMAT, want);
    free(b.p);
}

Test(gguf, rejects_a_data_section_past_end_of_file)
{
    bytes b = {0};
    put_header(&b, 3, 1, 0);
    put_tensor(&b, "w", 0, SY_GGML_TYPE_F32, 0);
    REFUSED(b, SY_E_FORMAT, "data section starts at byte 64");
    free(b.p);
}

Test(gguf, rejects_an_offset_that_overflows)
{
    bytes b = {0};
    put_header(&b, 3, 1, 0);
    put_tensor(&b, "w", 8, SY_GGML_TYPE_F32, UINT64_MAX - 31);
    put_pad(&b, 32);
    put_zeros(&b, 32);
    REFUSED(b, SY_E_FORMAT, "tensor 'w' offset 18446744073709551584", "overflows");
    free(b.p);
}

Test(gguf, rejects_a_shape_whose_size_overflows)
{
    bytes b = {0};
    put_header(&b, 3, 1, 0);
    put_str(&b, "w");
    put_u32(&b, 3);
    put_u64(&b, 1ull << 30);
    put_u64(&b, 1ull << 30);
    put_u64(&b, 1ull << 30);
    put_u32(&b, SY_GGML_TYPE_F32);
    put_u64(&b, 0);
    put_zeros(&b, 64);
    REFUSED(b, SY_E_FORMAT, "tensor 0 'w'", "overflows");
    free(b.p);
    b = (bytes){0};
    put_header(&b, 3, 1, 0);
    put_tensor(&b, "neg", UINT64_MAX, SY_GGML_TYPE_F32, 0);
    put_zeros(&b, 64);
    REFUSED(b, SY_E_FORMAT, "tensor 0 'neg'", "ne[0] 18446744073709551615 is negative");
    free(b.p);
}

Test(gguf, rejects_an_unknown_dtype_naming_the_tensor_and_type)
{
    const uint32_t types[] = {9, 15, 24, 999};
    const char *names[] = {"q8_1", "q8_k", "i8", "unknown"};
    for (size_t i = 0; i < 4; i++) {
        bytes b = {0};
        put_header(&b, 3, 1, 0);
        put_tensor(&b, "output.weight", 256, types[i], 0);
        put_pad(&b, 32);
        put_zeros(&b, 2048);
        char want[96];
        snprintf(want, sizeof want, "tensor 0 'output.weight': ggml type %u (%s) is not supported",
                 types[i], names[i]);
        REFUSED(b, SY_E_DTYPE, want);
        free(b.p);
    }
}

Test(gguf, rejects_a_row_that_is_not_whole_blocks)
{
    bytes b = {0};
    put_header(&b, 3, 1, 0);
    put_tensor(&b, "w", 33, SY_GGML_TYPE_Q4_0, 0);
    put_pad(&b, 32);
    put_zeros(&b, 64);
    REFUSED(b, SY_E_FORMAT, "ne[0] 33 is not a multiple of the q4_0 block size 32");
    free(b.p);
}

Test(gguf, rejects_a_misaligned_tensor_offset)
{
    bytes b = {0};
    put_header(&b, 3, 2, 0);
    put_tensor(&b, "a", 4, SY_GGML_TYPE_F32, 0);
    put_tensor(&b, "b", 4, SY_GGML_TYPE_F32, 16);
    put_pad(&b, 32);
    put_zeros(&b, 64);
    REFUSED(b, SY_E_FORMAT, "tensor 1 'b': offset 16 is not a multiple of the alignment 32");
    free(b.p);
}

Test(gguf, rejects_a_duplicate_tensor_name)
{
    bytes b = {0};
    put_header(&b, 3, 2, 0);
    put_tensor(&b, "blk.0.w", 8, SY_GGML_TYPE_F32, 0);
    put_tensor(&b, "blk.0.w", 8, SY_GGML_TYPE_F32, 32);
    put_pad(&b, 32);
    put_zeros(&b, 64);
    REFUSED(b, SY_E_FORMAT, "duplicate tensor name 'blk.0.w' (tensors 0 and 1)");
    free(b.p);
}

Test(gguf, survives_random_corruption)
{
    unsigned seed = (unsigned)time(NULL) ^ (unsigned)getpid();
    srand(seed);
    const char *path = tmp_path("all.gguf");
    write_all_types(3, 0, path);
    FILE *f = fopen(path, "rb");
    cr_assert_not_null(f);
    uint8_t orig[4096], buf[4096];
    size_t n = fread(orig, 1, sizeof orig, f);
    fclose(f);
    int opened = 0;
    for (int iter = 0; iter < 1500; iter++) {
        memcpy(buf, orig, n);
        int flips = 1 + rand() % 4;
        for (int k = 0; k < flips; k++) {
            size_t at = (size_t)rand() % n;
            buf[at] = rand() % 3 == 0 ? 0xff : (uint8_t)rand();
        }
        size_t len = rand() % 8 == 0 ? (size_t)rand() % n : n;
        sy_gguf *g;
        sy_gguf_error err;
        const char *p = write_bytes("mut.gguf", buf, len);
        sy_status st = sy_gguf_open(p, &g, &err);
        if (st == SY_OK) {
            opened++;
            /* Walk everything the file offers. */
            for (uint64_t i = 0; i < sy_gguf_kv_count(g); i++) {
                sy_gguf_value v, e;
                cr_assert_eq(sy_gguf_kv_value(g, i, &v), SY_OK);
                for (uint64_t k = 0; v.type == SY_GGUF_TYPE_ARRAY && k < v.count && k < 16; k++)
                    cr_assert_eq(sy_gguf_arr_elem(&v, k, &e), SY_OK, "seed %u", seed);
            }
            for (uint64_t i = 0; i < sy_gguf_tensor_count(g); i++) {
                const sy_gguf_tensor_info *t = sy_gguf_tensor(g, i);
                volatile uint8_t sink = 0;
                if (t->size)
                    sink ^= ((const uint8_t *)t->data)[t->size - 1];
                (void)sink;
            }
            sy_gguf_close(g);
        } else {
            cr_assert(st == SY_E_FORMAT || st == SY_E_UNSUPPORTED || st == SY_E_DTYPE ||
                          st == SY_E_LIMIT,
                      "seed %u: unexpected %s: %s", seed, sy_status_name(st), err.msg);
            cr_assert_eq(strncmp(err.msg, p, strlen(p)), 0, "seed %u: %s", seed, err.msg);
        }
    }
    cr_log_info("random corruption: seed %u, %d of 1500 mutants opened", seed, opened);
}
