/* Library-internal layout of an open GGUF file, shared by the parser
 * (gguf.c) and the queries (gguf_query.c). */
#ifndef SWITCHYARD_LLM_GGUF_INTERNAL_H
#define SWITCHYARD_LLM_GGUF_INTERNAL_H

#include <stdarg.h>
#include <stdbool.h>
#include <stdint.h>

#include "gguf.h"

/* ----------------------------------------------------------------- handle */

typedef struct gguf_kv {
    const char *key;       /* arena copy, NUL-terminated */
    uint64_t key_len;
    uint64_t key_off;      /* arena offset, until the arena stops growing */
    uint64_t str_off;      /* STRING values: arena offset of the copy */
    uint64_t raw_pos;      /* file offset of the encoded value (after its type) */
    uint64_t raw_len;      /* its length in bytes */
    uint64_t *index;       /* arrays of strings/arrays: element offsets */
    sy_gguf_value value;
} gguf_kv;

typedef struct gguf_tensor {
    sy_gguf_tensor_info info;
    uint64_t name_off; /* arena offset, until the arena stops growing */
} gguf_tensor;

/* Open-addressing table of entry indices + 1 (0 marks a free slot). */
typedef struct gguf_hash {
    uint32_t *slots;
    uint64_t mask;
} gguf_hash;

struct sy_gguf {
    char *path;
    const uint8_t *base; /* the mapping, NULL when none */
    uint64_t size;
    uint32_t version;
    uint32_t alignment;
    uint64_t data_offset;
    uint64_t n_kv;
    uint64_t n_tensors;
    gguf_kv *kvs;
    gguf_tensor *tensors;
    char *arena; /* keys, key strings and tensor names, NUL-terminated */
    gguf_hash kv_hash;
    gguf_hash tensor_hash;
    char last_error[SY_GGUF_ERROR_MAX];
};

/* Bytes of the fixed GGUF header (magic, version, tensor and key counts). */
#define SY__GGUF_HEADER_SIZE 24u

/* Validates the mapped file g->base[0, g->size) and fills the handle;
 * on failure writes "{path}: {message}" into |err|. (gguf.c) */
sy_status sy__gguf_parse(sy_gguf *g, char *err);

/* Builds the hash of the keys (|tensors| false) or tensor names; names
 * must already point into the arena.  SY_E_FORMAT on a duplicate name,
 * with the two entries' indices in *out_first and *out_second. (gguf_index.c) */
sy_status sy__gguf_hash_build(sy_gguf *g, bool tensors, uint64_t *out_first,
                              uint64_t *out_second);

/* Finds the metadata entry or tensor named |name|; false when absent. */
bool sy__gguf_find_kv(const sy_gguf *g, const char *name, uint64_t *out_index);
bool sy__gguf_find_tensor_index(const sy_gguf *g, const char *name, uint64_t *out_index);

/* Writes "{path}: {message}" into |err| (SY_GGUF_ERROR_MAX bytes). */
void sy__gguf_vset_error(char *err, const char *path, const char *fmt, va_list ap);

#endif
