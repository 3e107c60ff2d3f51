/* GGUF reader: one test per corruption, each checking the status and that
 * the message names the file and the field, and random corruption (split
 * from test_gguf.c). */
#include <criterion/criterion.h>

#include <inttypes.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

#include "test_gguf_util.h"

TestSuite(gguf_corrupt, .init = make_tmpdir, .fini = remove_tmpdir);

/* ------------------------------------------------------------ corruptions */

Test(gguf_corrupt, rejects_a_missing_file_and_a_directory)
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

Test(gguf_corrupt, rejects_an_empty_file)
{
    bytes b = {0};
    REFUSED(b, SY_E_FORMAT, "file is empty");
}

Test(gguf_corrupt, rejects_bad_magic)
{
    bytes b = valid_file(3);
    memcpy(b.p, "ggjt", 4);
    REFUSED(b, SY_E_FORMAT, "bad magic 'ggjt'", "not a GGUF file");
    b.len = 3;
    REFUSED(b, SY_E_FORMAT, "truncated", "magic");
    free(b.p);
}

Test(gguf_corrupt, rejects_version_1_with_a_clear_message)
{
    bytes b = valid_file(1);
    REFUSED(b, SY_E_UNSUPPORTED, "GGUF version 1 is not supported", "versions 2 and 3");
    free(b.p);
}

Test(gguf_corrupt, rejects_version_99)
{
    bytes b = valid_file(99);
    REFUSED(b, SY_E_UNSUPPORTED, "GGUF version 99 is not supported");
    free(b.p);
}

Test(gguf_corrupt, rejects_a_big_endian_file)
{
    bytes b = valid_file(3);
    uint32_t v = __builtin_bswap32(3);
    memcpy(b.p + 4, &v, 4);
    REFUSED(b, SY_E_UNSUPPORTED, "big-endian");
    free(b.p);
}

Test(gguf_corrupt, rejects_a_truncated_header)
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

Test(gguf_corrupt, rejects_a_file_truncated_in_a_key)
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

Test(gguf_corrupt, rejects_a_file_truncated_in_the_tensor_infos)
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

Test(gguf_corrupt, rejects_a_file_truncated_in_the_data)
{
    bytes b = valid_file(3);
    size_t full = b.len;
    b.len = full - 40; /* 'b' is the last 34 bytes before 30 bytes of padding */
    char want[96];
    snprintf(want, sizeof want, "tensor 'b' ends at byte %zu, file has %zu", full - 30, full - 40);
    REFUSED(b, SY_E_FORMAT, want);
    free(b.p);
}

Test(gguf_corrupt, rejects_every_truncation_of_a_valid_file)
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

Test(gguf_corrupt, rejects_a_huge_n_kv_before_allocating)
{
    bytes b = valid_file(3);
    uint64_t huge = UINT64_MAX / 2;
    memcpy(b.p + 16, &huge, 8);
    REFUSED(b, SY_E_FORMAT, "header", "n_kv 9223372036854775807 needs at least 14 bytes each");
    free(b.p);
}

Test(gguf_corrupt, rejects_a_huge_n_tensors_before_allocating)
{
    bytes b = valid_file(3);
    uint64_t huge = 1ull << 40;
    memcpy(b.p + 8, &huge, 8);
    REFUSED(b, SY_E_FORMAT, "header", "n_tensors 1099511627776 needs");
    free(b.p);
}

Test(gguf_corrupt, rejects_counts_that_fit_alone_but_not_together)
{
    bytes b = valid_file(3);
    uint64_t n_tensors = (b.len - 24) / 32, n_kv = (b.len - 24) / 14;
    memcpy(b.p + 8, &n_tensors, 8);
    memcpy(b.p + 16, &n_kv, 8);
    REFUSED(b, SY_E_FORMAT, "header", "need more than");
    free(b.p);
}

Test(gguf_corrupt, rejects_a_huge_string_length)
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

Test(gguf_corrupt, rejects_a_huge_key_length)
{
    bytes b = {0};
    put_header(&b, 3, 0, 1);
    put_u64(&b, 1ull << 62);
    put_zeros(&b, 40);
    REFUSED(b, SY_E_FORMAT, "key 0", "key length 4611686018427387904 exceeds 65535");
    free(b.p);
}

Test(gguf_corrupt, rejects_a_huge_array_length)
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

Test(gguf_corrupt, rejects_a_huge_string_length_inside_an_array)
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

Test(gguf_corrupt, rejects_unknown_value_and_element_types)
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

Test(gguf_corrupt, rejects_arrays_nested_too_deep)
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

Test(gguf_corrupt, rejects_bad_keys)
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

Test(gguf_corrupt, rejects_a_duplicate_key)
{
    bytes b = {0};
    put_header(&b, 3, 0, 3);
    put_kv_u32(&b, "a", 1);
    put_kv_u32(&b, "b", 1);
    put_kv_u32(&b, "a", 2);
    REFUSED(b, SY_E_FORMAT, "duplicate key 'a' (keys 0 and 2)");
    free(b.p);
}

Test(gguf_corrupt, rejects_a_bad_general_alignment)
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
    /* Powers of two below 8: GGUF asks for a multiple of 8, and blocks
     * at odd addresses are misaligned for the kernels' reads. */
    const uint32_t small[] = {1, 2, 4};
    for (size_t i = 0; i < 3; i++) {
        bytes b = {0};
        put_header(&b, 3, 0, 1);
        put_kv_u32(&b, "general.alignment", small[i]);
        char want[96];
        snprintf(want, sizeof want, "general.alignment %u is not a multiple of 8, as GGUF requires",
                 small[i]);
        REFUSED(b, SY_E_FORMAT, want);
        free(b.p);
    }
    bytes b = {0};
    put_header(&b, 3, 0, 1);
    put_kv_str(&b, "general.alignment", "32");
    REFUSED(b, SY_E_FORMAT, "general.alignment has type string");
    free(b.p);
}

Test(gguf_corrupt, rejects_too_many_dims)
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

Test(gguf_corrupt, rejects_a_tensor_name_too_long_or_holding_nul)
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

Test(gguf_corrupt, rejects_tensor_past_end_of_file)
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

Test(gguf_corrupt, rejects_a_data_section_past_end_of_file)
{
    bytes b = {0};
    put_header(&b, 3, 1, 0);
    put_tensor(&b, "w", 0, SY_GGML_TYPE_F32, 0);
    REFUSED(b, SY_E_FORMAT, "data section starts at byte 64");
    free(b.p);
}

Test(gguf_corrupt, rejects_an_offset_that_overflows)
{
    bytes b = {0};
    put_header(&b, 3, 1, 0);
    put_tensor(&b, "w", 8, SY_GGML_TYPE_F32, UINT64_MAX - 31);
    put_pad(&b, 32);
    put_zeros(&b, 32);
    REFUSED(b, SY_E_FORMAT, "tensor 'w' offset 18446744073709551584", "overflows");
    free(b.p);
}

Test(gguf_corrupt, rejects_a_shape_whose_size_overflows)
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

Test(gguf_corrupt, rejects_an_unknown_dtype_naming_the_tensor_and_type)
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

Test(gguf_corrupt, rejects_a_row_that_is_not_whole_blocks)
{
    bytes b = {0};
    put_header(&b, 3, 1, 0);
    put_tensor(&b, "w", 33, SY_GGML_TYPE_Q4_0, 0);
    put_pad(&b, 32);
    put_zeros(&b, 64);
    REFUSED(b, SY_E_FORMAT, "ne[0] 33 is not a multiple of the q4_0 block size 32");
    free(b.p);
}

Test(gguf_corrupt, rejects_a_misaligned_tensor_offset)
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

Test(gguf_corrupt, rejects_a_duplicate_tensor_name)
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

Test(gguf_corrupt, survives_random_corruption)
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
