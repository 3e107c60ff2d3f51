/* The packed weight layout of cpu_repack.c, shared with the tests: rows
 * keep their bytes and stride; in each row every group of four 32-element
 * blocks of |block_bytes| (16 quant bytes after a header: Q4_0's d, Q4_1's
 * d and m) becomes the four headers, then the four blocks' quant bytes;
 * blocks after the last whole group stay as they were. */
#ifndef SY_CPU_REPACK_H
#define SY_CPU_REPACK_H

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>
#include <string.h>

#include "switchyard/types.h"

/* True for a dtype whose copy keeps the file's layout (Q8_0: its decode
 * and GEMM kernels read it as stored; the copy is for its huge pages). */
static inline bool cpu_pack_keeps_layout(uint32_t dtype)
{
    return dtype == SY_DTYPE_Q8_0;
}

static inline void cpu_repack_rows(const uint8_t *src, uint8_t *dst, int64_t rows, size_t row_bytes,
                                   int64_t nb, size_t block_bytes)
{
    const size_t head = block_bytes - 16;
    for (int64_t r = 0; r < rows; r++) {
        const uint8_t *s = src + (size_t)r * row_bytes;
        uint8_t *d = dst + (size_t)r * row_bytes;
        int64_t b = 0;
        for (; b + 4 <= nb; b += 4, s += 4 * block_bytes, d += 4 * block_bytes)
            for (size_t j = 0; j < 4; j++) {
                memcpy(d + head * j, s + block_bytes * j, head);
                memcpy(d + 4 * head + 16 * j, s + block_bytes * j + head, 16);
            }
        memcpy(d, s, (size_t)(nb - b) * block_bytes);
    }
}

/* |rows| rows of a |dtype| weight with |k| elements a row (|row_bytes|
 * apart) from |src| into |dst| as cpu_repack.c packs them: interleaved
 * by cpu_repack_rows, or as stored (cpu_pack_keeps_layout). */
static inline void cpu_pack_rows_as(uint32_t dtype, const uint8_t *src, uint8_t *dst,
                                    int64_t rows, size_t row_bytes, int64_t k)
{
    if (cpu_pack_keeps_layout(dtype))
        memcpy(dst, src, (size_t)rows * row_bytes);
    else
        cpu_repack_rows(src, dst, rows, row_bytes, k / (int64_t)sy_dtype_block_size(dtype),
                        sy_dtype_type_size(dtype));
}

/* The inverse of cpu_repack_rows for one row of |nb| blocks: |src| in the
 * packed layout back into the file's at |dst|. */
static inline void cpu_unpack_row(const uint8_t *src, uint8_t *dst, int64_t nb, size_t block_bytes)
{
    const size_t head = block_bytes - 16;
    int64_t b = 0;
    for (; b + 4 <= nb; b += 4, src += 4 * block_bytes, dst += 4 * block_bytes)
        for (size_t j = 0; j < 4; j++) {
            memcpy(dst + block_bytes * j, src + head * j, head);
            memcpy(dst + block_bytes * j + head, src + 4 * head + 16 * j, 16);
        }
    memcpy(dst, src, (size_t)(nb - b) * block_bytes);
}

#endif
