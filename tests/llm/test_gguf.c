/* GGUF reader and writer: round trips of every value type, versions 2 and 3,
 * alignment, coercions, the writer; one test per corruption, each checking
 * the status and that the message names the file and the field, is in
 * test_gguf_corrupt.c. */
#include <criterion/criterion.h>

#include <inttypes.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <time.h>
#include <unistd.h>

#include "gguf.h"

#include "test_gguf_util.h"

TestSuite(gguf, .init = make_tmpdir, .fini = remove_tmpdir);

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
    const uint32_t aligns[] = {8, 64, 4096, 8192};
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
    cr_assert_eq(sy_gguf_writer_set_alignment(w, 4), SY_E_INVALID_ARG);
    cr_assert_not_null(strstr(sy_gguf_writer_last_error(w), "in 8..2^30"));
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
