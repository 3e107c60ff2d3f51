/* GGUF model files: a validating, zero-copy reader and a small writer.
 *
 * GGUF (the llama.cpp model format) is a little-endian file made of
 *
 *   header        "GGUF", uint32 version, uint64 n_tensors, uint64 n_kv
 *   metadata      n_kv x (string key, uint32 value type, value)
 *   tensor infos  n_tensors x (string name, uint32 n_dims, uint64 ne[n_dims],
 *                              uint32 ggml type, uint64 offset)
 *   padding       up to general.alignment (default 32)
 *   data          tensor bytes, each at data start + its offset
 *
 * where a string is a uint64 byte length followed by that many bytes (no
 * terminator) and an array is a uint32 element type, a uint64 count and the
 * elements.  Versions 2 and 3 share this layout; version 1 (32-bit counts)
 * and big-endian files are refused.
 *
 * sy_gguf_open() maps the file read-only and checks every count, length,
 * size and offset against the file length before trusting it, so that a
 * truncated, corrupt or hostile file yields an sy_status and a message that
 * names the file and the field — never a crash or an oversized allocation.
 * After a successful open every pointer the reader hands out lies inside
 * the mapping (or inside memory owned by the handle) and stays valid until
 * sy_gguf_close().
 *
 * This is a library-internal API of libswitchyard (framework/llm), used by
 * the model loader, the CLI (`switchyard synth`, `switchyard run`) and the
 * tests; it is not installed. */
#ifndef SWITCHYARD_LLM_GGUF_H
#define SWITCHYARD_LLM_GGUF_H

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

#include "switchyard/status.h"
#include "switchyard/types.h"

#ifdef __cplusplus
extern "C" {
#endif

/* ------------------------------------------------------------ constants */

#define SY_GGUF_MAGIC 0x46554747u     /* "GGUF" read as a little-endian uint32 */
#define SY_GGUF_DEFAULT_ALIGNMENT 32u /* when general.alignment is absent */
#define SY_GGUF_MAX_DIMS 4u           /* tensor infos with more dims are refused */
#define SY_GGUF_NAME_MAX 64u          /* tensor names are shorter than this (bytes) */
#define SY_GGUF_MAX_DEPTH 8u          /* deepest array nesting accepted */
#define SY_GGUF_ERROR_MAX 1024u       /* size of an error message buffer */

/* Metadata value types, numbered as in the file. */
typedef enum sy_gguf_type {
    SY_GGUF_TYPE_UINT8 = 0,
    SY_GGUF_TYPE_INT8 = 1,
    SY_GGUF_TYPE_UINT16 = 2,
    SY_GGUF_TYPE_INT16 = 3,
    SY_GGUF_TYPE_UINT32 = 4,
    SY_GGUF_TYPE_INT32 = 5,
    SY_GGUF_TYPE_FLOAT32 = 6,
    SY_GGUF_TYPE_BOOL = 7,
    SY_GGUF_TYPE_STRING = 8,
    SY_GGUF_TYPE_ARRAY = 9,
    SY_GGUF_TYPE_UINT64 = 10,
    SY_GGUF_TYPE_INT64 = 11,
    SY_GGUF_TYPE_FLOAT64 = 12,
    SY_GGUF_TYPE_COUNT
} sy_gguf_type;

/* ggml tensor type ids (the file's numbering) of the types Switchyard maps
 * to an sy_dtype.  Every other id is refused with SY_E_DTYPE. */
enum {
    SY_GGML_TYPE_F32 = 0,
    SY_GGML_TYPE_F16 = 1,
    SY_GGML_TYPE_Q4_0 = 2,
    SY_GGML_TYPE_Q4_1 = 3,
    SY_GGML_TYPE_Q5_0 = 6,
    SY_GGML_TYPE_Q5_1 = 7,
    SY_GGML_TYPE_Q8_0 = 8,
    SY_GGML_TYPE_Q4_K = 12,
    SY_GGML_TYPE_Q5_K = 13,
    SY_GGML_TYPE_Q6_K = 14,
    SY_GGML_TYPE_I32 = 26,
    SY_GGML_TYPE_BF16 = 30
};

/* Returns the name of value type |t| ("uint32", "string", ...) or "invalid".
 * Ownership: static storage.  Thread-safety: safe. */
const char *sy_gguf_type_name(uint32_t t);

/* Returns the size in bytes of one value of fixed-size type |t|, or 0 for
 * STRING, ARRAY and invalid types.  Thread-safety: safe. */
uint32_t sy_gguf_type_size(uint32_t t);

/* Maps ggml type id |ggml_type| to an sy_dtype.
 * Returns SY_E_DTYPE (and leaves *out_dtype untouched) for ids Switchyard
 * does not support.  Thread-safety: safe. */
sy_status sy_gguf_dtype_from_ggml(uint32_t ggml_type, sy_dtype *out_dtype);

/* Returns the ggml type id of |dtype|, or UINT32_MAX for an invalid dtype.
 * Thread-safety: safe. */
uint32_t sy_gguf_ggml_from_dtype(uint32_t dtype);

/* Returns the ggml name of type id |ggml_type| ("q4_k", "iq2_xs", ...) for
 * messages, or "unknown".  Ownership: static storage.  Thread-safety: safe. */
const char *sy_gguf_ggml_type_name(uint32_t ggml_type);

/* ---------------------------------------------------------------- values */

/* A string inside the file: |len| bytes at |ptr|, not NUL-terminated. */
typedef struct sy_gguf_str {
    const char *ptr;
    uint64_t len;
} sy_gguf_str;

/* A view of one metadata value (a key's value or an array element).
 * |data| points at the payload: the scalar's bytes, the string's bytes, or
 * the first array element.  Scalars and array elements in the file are not
 * aligned; read them with the sy_gguf_value_as_*() / sy_gguf_arr_*()
 * helpers (or memcpy), not by casting |data|.
 * For a key's own STRING value, |data| is a NUL-terminated copy owned by
 * the handle; strings inside arrays are not terminated.
 * Lifetime: valid until sy_gguf_close() of the handle it came from. */
typedef struct sy_gguf_value {
    uint32_t type;        /* sy_gguf_type */
    uint32_t elem_type;   /* ARRAY only: sy_gguf_type of the elements */
    uint64_t count;       /* ARRAY: elements; STRING: bytes; scalars: 1 */
    const uint8_t *data;  /* payload, see above */
    const uint64_t *index_; /* private: element offsets from |data|, or NULL */
    const uint8_t *end_;    /* private: end of the validated bytes */
} sy_gguf_value;

/* Converts the integer value |v| (any of the eight integer types) to the
 * requested type when the value fits; BOOL, floats, strings and arrays are
 * refused.  Returns SY_E_FORMAT for a wrong type or a value out of range;
 * *out_value is then left unchanged.  Thread-safety: safe. */
sy_status sy_gguf_value_as_u32(const sy_gguf_value *v, uint32_t *out_value);
sy_status sy_gguf_value_as_i32(const sy_gguf_value *v, int32_t *out_value);
sy_status sy_gguf_value_as_u64(const sy_gguf_value *v, uint64_t *out_value);
sy_status sy_gguf_value_as_i64(const sy_gguf_value *v, int64_t *out_value);

/* Converts |v| (FLOAT32, FLOAT64 or any integer type) to a float/double;
 * FLOAT64 is rounded to the nearest float.  Returns SY_E_FORMAT for BOOL,
 * STRING and ARRAY.  Thread-safety: safe. */
sy_status sy_gguf_value_as_f32(const sy_gguf_value *v, float *out_value);
sy_status sy_gguf_value_as_f64(const sy_gguf_value *v, double *out_value);

/* Reads a BOOL value (any non-zero byte is true).  Returns SY_E_FORMAT for
 * other types.  Thread-safety: safe. */
sy_status sy_gguf_value_as_bool(const sy_gguf_value *v, bool *out_value);

/* Reads a STRING value as bytes and length.  Returns SY_E_FORMAT for other
 * types.  Borrowed: *out_str points into the handle's memory. */
sy_status sy_gguf_value_as_str(const sy_gguf_value *v, sy_gguf_str *out_str);

/* Returns element |i| of the array |arr| as a value view.  Constant time
 * for arrays of fixed-size types and for a key's own array of strings or
 * arrays; linear in |i| for arrays of strings nested inside other arrays.
 * Returns SY_E_INVALID_ARG when |arr| is not an array or |i| >= count.
 * Thread-safety: safe. */
sy_status sy_gguf_arr_elem(const sy_gguf_value *arr, uint64_t i, sy_gguf_value *out_elem);

/* Returns string element |i| of an array of strings (e.g. token texts).
 * Returns SY_E_INVALID_ARG for a non-string array or |i| >= count.
 * Borrowed: *out_str points into the mapping, not NUL-terminated. */
sy_status sy_gguf_arr_str(const sy_gguf_value *arr, uint64_t i, sy_gguf_str *out_str);

/* Copies elements [first, first + n) of an array of fixed-size |elem_type|
 * elements (e.g. FLOAT32 token scores) to |dst|, which must hold
 * n * sy_gguf_type_size(elem_type) bytes.  The element type must match
 * exactly; no conversion.  Returns SY_E_FORMAT for another element type
 * and SY_E_INVALID_ARG for a range past the end. */
sy_status sy_gguf_arr_read(const sy_gguf_value *arr, uint32_t elem_type, uint64_t first,
                           uint64_t n, void *dst);

/* --------------------------------------------------------------- tensors */

/* One tensor of the file.  Lifetime: valid until sy_gguf_close(). */
typedef struct sy_gguf_tensor_info {
    const char *name;         /* NUL-terminated copy owned by the handle */
    uint32_t n_dims;          /* 1..SY_GGUF_MAX_DIMS */
    uint32_t ggml_type;       /* type id as stored in the file */
    sy_dtype dtype;           /* the matching sy_dtype */
    int64_t ne[SY_MAX_DIMS];  /* elements per dim, ne[0] innermost; unused dims 1 */
    uint64_t offset;          /* byte offset from the start of the data section */
    uint64_t size;            /* bytes of data, rows packed */
    const void *data;         /* first byte inside the read-only mapping */
} sy_gguf_tensor_info;

/* ------------------------------------------------------------------ file */

typedef struct sy_gguf sy_gguf;

/* Error text of a failed sy_gguf_open(): "<path>: <what went wrong>". */
typedef struct sy_gguf_error {
    char msg[SY_GGUF_ERROR_MAX];
} sy_gguf_error;

/* Opens and validates the GGUF file at |path| by mapping it read-only
 * (MAP_PRIVATE; nothing is copied but names and keys).
 * Errors: SY_E_IO (cannot open, stat or map), SY_E_FORMAT (bad magic,
 * truncation, counts or lengths the file cannot hold, tensor outside the
 * file, misaligned or overflowing offset, duplicate key or tensor name,
 * bad general.alignment), SY_E_UNSUPPORTED (version other than 2 or 3,
 * big-endian file), SY_E_DTYPE (tensor of a type Switchyard does not
 * support), SY_E_LIMIT (arrays nested deeper than SY_GGUF_MAX_DEPTH, counts
 * past 2^31), SY_E_NO_MEMORY.  On error *out_gguf is NULL and, when
 * |out_err| is not NULL, out_err->msg names the file and the field, e.g.
 * "m.gguf: tensor 'blk.3.attn_q.weight' ends at byte 91220480, file has
 * 90000000".  On success out_err->msg is "".
 * Ownership: caller owns *out_gguf; free with sy_gguf_close().
 * Thread-safety: safe for distinct handles.  The file must not be
 * truncated while it is open (the mapping would fault). */
sy_status sy_gguf_open(const char *path, sy_gguf **out_gguf, sy_gguf_error *out_err);

/* Unmaps the file and frees |g| with every name, view and tensor info it
 * handed out.  NULL is a no-op. */
void sy_gguf_close(sy_gguf *g);

/* Returns the message of the last failed sy_gguf_get_*() call on |g|, or "".
 * Ownership: owned by |g|, valid until the next call on |g|. */
const char *sy_gguf_last_error(const sy_gguf *g);

/* Asks the kernel to read the tensor data ahead (madvise WILLNEED); a hint,
 * it returns at once.  Thread-safety: safe. */
void sy_gguf_prefetch(const sy_gguf *g);

/* File facts.  |path| is the string given to sy_gguf_open() (owned by |g|).
 * Thread-safety: safe. */
const char *sy_gguf_path(const sy_gguf *g);
uint32_t sy_gguf_version(const sy_gguf *g);
uint64_t sy_gguf_file_size(const sy_gguf *g);
uint32_t sy_gguf_alignment(const sy_gguf *g);
uint64_t sy_gguf_data_offset(const sy_gguf *g); /* start of the data section */

/* ---------------------------------------------------------- metadata */

/* Returns the number of metadata keys.  Thread-safety: safe. */
uint64_t sy_gguf_kv_count(const sy_gguf *g);

/* Returns key |i| (NUL-terminated, owned by |g|), or NULL when |i| is out
 * of range.  Keys keep the file's order.  Thread-safety: safe. */
const char *sy_gguf_kv_key(const sy_gguf *g, uint64_t i);

/* Fills *out_value with the value of key |i|.  Returns SY_E_INVALID_ARG
 * when |i| is out of range.  Thread-safety: safe. */
sy_status sy_gguf_kv_value(const sy_gguf *g, uint64_t i, sy_gguf_value *out_value);

/* Returns the encoded value of key |i| exactly as stored after its type
 * field: *out_type, and *out_len bytes at *out_payload inside the mapping
 * (what sy_gguf_writer_add_raw() takes).  SY_E_INVALID_ARG when |i| is out
 * of range.  Thread-safety: safe. */
sy_status sy_gguf_kv_raw(const sy_gguf *g, uint64_t i, uint32_t *out_type,
                         const void **out_payload, uint64_t *out_len);

/* Finds |key|; returns SY_E_NOT_FOUND when absent.  Constant expected time.
 * Thread-safety: safe. */
sy_status sy_gguf_find_key(const sy_gguf *g, const char *key, uint64_t *out_index);

/* True when |key| is present.  Thread-safety: safe. */
bool sy_gguf_has_key(const sy_gguf *g, const char *key);

/* Typed getters: find |key| and convert its value as the matching
 * sy_gguf_value_as_*() does (integers coerce to any integer type they fit;
 * get_f32/f64 accept floats and integers).  Errors: SY_E_NOT_FOUND when the
 * key is absent, SY_E_FORMAT for a wrong type or an out-of-range value;
 * sy_gguf_last_error() then names the file, the key and the types.
 * Thread-safety: not safe concurrently on one handle (they record the last
 * error); the const functions above are.
 * On error *out_value is left unchanged (unlike the house rule of zeroing
 * out-params), so that a caller may preset the default of an optional key:
 *     float base = 10000.0f;
 *     if (sy_gguf_get_f32(g, "llama.rope.freq_base", &base) == SY_E_FORMAT) ... */
sy_status sy_gguf_get_value(sy_gguf *g, const char *key, sy_gguf_value *out_value);
sy_status sy_gguf_get_u32(sy_gguf *g, const char *key, uint32_t *out_value);
sy_status sy_gguf_get_i32(sy_gguf *g, const char *key, int32_t *out_value);
sy_status sy_gguf_get_u64(sy_gguf *g, const char *key, uint64_t *out_value);
sy_status sy_gguf_get_i64(sy_gguf *g, const char *key, int64_t *out_value);
sy_status sy_gguf_get_f32(sy_gguf *g, const char *key, float *out_value);
sy_status sy_gguf_get_f64(sy_gguf *g, const char *key, double *out_value);
sy_status sy_gguf_get_bool(sy_gguf *g, const char *key, bool *out_value);

/* Gets a STRING value as a NUL-terminated string (owned by |g|) and,
 * when |out_len| is not NULL, its byte length (the string may hold NULs). */
sy_status sy_gguf_get_str(sy_gguf *g, const char *key, const char **out_str, uint64_t *out_len);

/* Gets an ARRAY value.  When |elem_type| is below SY_GGUF_TYPE_COUNT the
 * elements must be of that type (SY_E_FORMAT otherwise); pass
 * SY_GGUF_TYPE_COUNT to accept any element type. */
sy_status sy_gguf_get_arr(sy_gguf *g, const char *key, uint32_t elem_type,
                          sy_gguf_value *out_arr);

/* ----------------------------------------------------------- tensors */

/* Returns the number of tensors.  Thread-safety: safe. */
uint64_t sy_gguf_tensor_count(const sy_gguf *g);

/* Returns tensor |i| in file order, or NULL when out of range.
 * Thread-safety: safe. */
const sy_gguf_tensor_info *sy_gguf_tensor(const sy_gguf *g, uint64_t i);

/* Finds the tensor called |name|; SY_E_NOT_FOUND when absent (*out_info is
 * then NULL).  Constant expected time.  Thread-safety: safe. */
sy_status sy_gguf_find_tensor(const sy_gguf *g, const char *name,
                              const sy_gguf_tensor_info **out_info);

/* ---------------------------------------------------------------- writer */

typedef struct sy_gguf_writer sy_gguf_writer;

/* Produces the bytes of one tensor at write time: fills |size| bytes at
 * |dst|.  Returns SY_OK or an error that aborts the write. */
typedef sy_status (*sy_gguf_fill_fn)(void *ctx, const char *name, void *dst, uint64_t size);

/* Creates a writer for a GGUF file of |version| (2 or 3) with the default
 * alignment.  Ownership: caller owns *out_writer; free with
 * sy_gguf_writer_destroy().  Thread-safety: one thread per writer. */
sy_status sy_gguf_writer_create(uint32_t version, sy_gguf_writer **out_writer);

/* Destroys |w|.  NULL is a no-op. */
void sy_gguf_writer_destroy(sy_gguf_writer *w);

/* Returns the message of the last failed call on |w|, or "".
 * Ownership: owned by |w|, valid until the next call on |w|. */
const char *sy_gguf_writer_last_error(const sy_gguf_writer *w);

/* Sets the data alignment (a power of two, 8..2^30: GGUF asks for a
 * multiple of 8; default
 * SY_GGUF_DEFAULT_ALIGNMENT).  Once set it is written as the UINT32 key
 * general.alignment, first among the keys.  Returns SY_E_INVALID_ARG for
 * other values. */
sy_status sy_gguf_writer_set_alignment(sy_gguf_writer *w, uint32_t alignment);

/* Adds a metadata key of the named type.  Keys must be unique, non-empty
 * and at most 65535 bytes (SY_E_INVALID_ARG otherwise) and are written in
 * the order added, after general.alignment.  general.alignment itself is
 * refused here: use sy_gguf_writer_set_alignment().
 * |key| and string values are copied. */
sy_status sy_gguf_writer_add_u8(sy_gguf_writer *w, const char *key, uint8_t value);
sy_status sy_gguf_writer_add_i8(sy_gguf_writer *w, const char *key, int8_t value);
sy_status sy_gguf_writer_add_u16(sy_gguf_writer *w, const char *key, uint16_t value);
sy_status sy_gguf_writer_add_i16(sy_gguf_writer *w, const char *key, int16_t value);
sy_status sy_gguf_writer_add_u32(sy_gguf_writer *w, const char *key, uint32_t value);
sy_status sy_gguf_writer_add_i32(sy_gguf_writer *w, const char *key, int32_t value);
sy_status sy_gguf_writer_add_u64(sy_gguf_writer *w, const char *key, uint64_t value);
sy_status sy_gguf_writer_add_i64(sy_gguf_writer *w, const char *key, int64_t value);
sy_status sy_gguf_writer_add_f32(sy_gguf_writer *w, const char *key, float value);
sy_status sy_gguf_writer_add_f64(sy_gguf_writer *w, const char *key, double value);
sy_status sy_gguf_writer_add_bool(sy_gguf_writer *w, const char *key, bool value);
sy_status sy_gguf_writer_add_str(sy_gguf_writer *w, const char *key, const char *value);

/* Adds an array of |count| fixed-size |elem_type| values read from |data|
 * (host byte order, tightly packed: count * sy_gguf_type_size(elem_type)
 * bytes).  STRING and ARRAY element types are refused here. */
sy_status sy_gguf_writer_add_arr(sy_gguf_writer *w, const char *key, uint32_t elem_type,
                                 const void *data, uint64_t count);

/* Adds an array of |count| NUL-terminated strings. */
sy_status sy_gguf_writer_add_arr_str(sy_gguf_writer *w, const char *key,
                                     const char *const *strs, uint64_t count);

/* Adds a key whose value is given already encoded: |type| followed by the
 * |n| payload bytes at |payload|, exactly as they appear in a file after
 * the type field (for nested arrays and for copying values).  The payload is
 * not checked; sy_gguf_open() checks the result. */
sy_status sy_gguf_writer_add_raw(sy_gguf_writer *w, const char *key, uint32_t type,
                                 const void *payload, uint64_t n);

/* Copies key |i| of the open file |src| with its value, byte for byte
 * (e.g. a tokenizer into a synthetic model).  general.alignment is not
 * copied as a key: its value becomes the writer's alignment. */
sy_status sy_gguf_writer_copy_kv(sy_gguf_writer *w, const sy_gguf *src, uint64_t i);

/* Adds a tensor of |dtype| and shape ne[0..n_dims-1] (ne[0] a multiple of
 * the dtype's block size) whose bytes are |data| (size must equal the
 * packed size, or 0 with |data| NULL for zeros).  Tensor names are unique
 * and shorter than SY_GGUF_NAME_MAX bytes.
 * Borrowed: |data| must stay valid until sy_gguf_writer_write_file(). */
sy_status sy_gguf_writer_add_tensor(sy_gguf_writer *w, const char *name, sy_dtype dtype,
                                    uint32_t n_dims, const int64_t *ne, const void *data,
                                    uint64_t size);

/* Adds a tensor like sy_gguf_writer_add_tensor() whose bytes |fill|
 * produces at write time (so that large models need not sit in memory).
 * Borrowed: |ctx| must stay valid until sy_gguf_writer_write_file(). */
sy_status sy_gguf_writer_add_tensor_fn(sy_gguf_writer *w, const char *name, sy_dtype dtype,
                                       uint32_t n_dims, const int64_t *ne, sy_gguf_fill_fn fill,
                                       void *ctx);

/* Writes the file to |path|: header, keys, tensor infos and data, each
 * tensor at an aligned offset in the order added.  The file is written to a
 * temporary name beside |path| and renamed into place, so a failed write
 * leaves no partial file.  The writer may be written again. */
sy_status sy_gguf_writer_write_file(sy_gguf_writer *w, const char *path);

#ifdef __cplusplus
}
#endif
#endif
