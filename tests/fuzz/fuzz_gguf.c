/* libFuzzer target for the GGUF reader: writes the input to a memfd, opens
 * it through /proc/self/fd and, when it opens, walks everything the reader
 * hands out (keys, values, array elements, nested arrays, tensors and their
 * bytes), checking the reader's own invariants.  Build and run: README.md. */
#include <inttypes.h>
#include <stdint.h>
#include <stdio.h>
#include <string.h>
#include <sys/mman.h>
#include <unistd.h>

#include "gguf.h"

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size);

/* Fails loudly: libFuzzer reports the crash and keeps the input. */
#define CHECK(cond)                                                                            \
    do {                                                                                       \
        if (!(cond)) {                                                                         \
            fprintf(stderr, "fuzz_gguf: check failed at line %d: %s\n", __LINE__, #cond);     \
            __builtin_trap();                                                                  \
        }                                                                                      \
    } while (0)

static void walk_value(const sy_gguf_value *v, unsigned depth)
{
    uint32_t u32;
    int64_t i64;
    double f64;
    bool b;
    sy_gguf_str s;
    uint8_t buf[64];

    CHECK(depth <= SY_GGUF_MAX_DEPTH);
    (void)sy_gguf_value_as_u32(v, &u32);
    (void)sy_gguf_value_as_i64(v, &i64);
    (void)sy_gguf_value_as_f64(v, &f64);
    (void)sy_gguf_value_as_bool(v, &b);
    if (v->type == SY_GGUF_TYPE_STRING) {
        volatile uint8_t sum = 0;
        CHECK(sy_gguf_value_as_str(v, &s) == SY_OK && s.len == v->count);
        for (uint64_t k = 0; k < s.len; k++) /* every byte must be readable */
            sum ^= (uint8_t)s.ptr[k];
        (void)sum;
    }
    if (v->type != SY_GGUF_TYPE_ARRAY)
        return;
    uint32_t es = sy_gguf_type_size(v->elem_type);
    if (es && v->count) {
        uint64_t n = sizeof buf / es;
        n = n < v->count ? n : v->count;
        CHECK(sy_gguf_arr_read(v, v->elem_type, v->count - n, n, buf) == SY_OK);
    }
    /* First and last few elements: the walk of unindexed nested arrays is
     * linear, so keep it short. */
    for (uint64_t k = 0; k < v->count && k < 8; k++) {
        uint64_t idx[2] = {k, v->count - 1 - k};
        for (int j = 0; j < 2; j++) {
            sy_gguf_value e;
            CHECK(sy_gguf_arr_elem(v, idx[j], &e) == SY_OK);
            CHECK(e.type == v->elem_type);
            if (e.type == SY_GGUF_TYPE_STRING)
                CHECK(sy_gguf_arr_str(v, idx[j], &s) == SY_OK && s.len == e.count);
            walk_value(&e, depth + 1);
        }
    }
    sy_gguf_value past;
    CHECK(sy_gguf_arr_elem(v, v->count, &past) == SY_E_INVALID_ARG);
}

static void walk_file(sy_gguf *g)
{
    uint64_t file_size = sy_gguf_file_size(g);
    uint32_t a = sy_gguf_alignment(g);
    CHECK(a && (a & (a - 1)) == 0);
    CHECK(sy_gguf_version(g) == 2 || sy_gguf_version(g) == 3);
    for (uint64_t i = 0; i < sy_gguf_kv_count(g); i++) {
        const char *key = sy_gguf_kv_key(g, i);
        uint64_t found;
        sy_gguf_value v;
        uint32_t type;
        const void *payload;
        uint64_t len;
        CHECK(key && key[0]);
        CHECK(sy_gguf_find_key(g, key, &found) == SY_OK && found == i);
        CHECK(sy_gguf_kv_value(g, i, &v) == SY_OK);
        CHECK(sy_gguf_kv_raw(g, i, &type, &payload, &len) == SY_OK && type == v.type);
        CHECK(len <= file_size);
        walk_value(&v, 0);
        /* The typed getters on every key: errors only, never crashes. */
        float f;
        const char *str;
        sy_gguf_value arr;
        (void)sy_gguf_get_f32(g, key, &f);
        (void)sy_gguf_get_str(g, key, &str, NULL);
        (void)sy_gguf_get_arr(g, key, SY_GGUF_TYPE_COUNT, &arr);
    }
    CHECK(sy_gguf_kv_key(g, sy_gguf_kv_count(g)) == NULL);
    for (uint64_t i = 0; i < sy_gguf_tensor_count(g); i++) {
        const sy_gguf_tensor_info *t = sy_gguf_tensor(g, i);
        const sy_gguf_tensor_info *found;
        CHECK(t && strlen(t->name) < SY_GGUF_NAME_MAX);
        CHECK(sy_gguf_find_tensor(g, t->name, &found) == SY_OK && found == t);
        CHECK(t->n_dims >= 1 && t->n_dims <= SY_GGUF_MAX_DIMS);
        CHECK(t->offset % a == 0);
        CHECK(sy_gguf_data_offset(g) + t->offset + t->size <= file_size);
        if (t->size) {
            volatile uint8_t first = ((const uint8_t *)t->data)[0];
            volatile uint8_t last = ((const uint8_t *)t->data)[t->size - 1];
            (void)first;
            (void)last;
        }
    }
    CHECK(sy_gguf_tensor(g, sy_gguf_tensor_count(g)) == NULL);
}

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size)
{
    char path[64];
    sy_gguf *g = NULL;
    sy_gguf_error err;
    int fd = memfd_create("fuzz.gguf", MFD_CLOEXEC);
    if (fd < 0)
        return 0;
    size_t done = 0;
    while (done < size) {
        ssize_t n = write(fd, data + done, size - done);
        if (n <= 0)
            goto out_close;
        done += (size_t)n;
    }
    snprintf(path, sizeof path, "/proc/self/fd/%d", fd);
    sy_status st = sy_gguf_open(path, &g, &err);
    if (st == SY_OK) {
        CHECK(g != NULL && err.msg[0] == '\0');
        walk_file(g);
        sy_gguf_close(g);
    } else {
        CHECK(g == NULL);
        CHECK(st == SY_E_FORMAT || st == SY_E_UNSUPPORTED || st == SY_E_DTYPE ||
              st == SY_E_LIMIT);
        CHECK(strncmp(err.msg, path, strlen(path)) == 0);
    }
out_close:
    close(fd);
    return 0;
}
