/* State shared by the files of the npusim plugin, the emulated NPU that is
 * also the vendor template.  Nothing here is exported: the module is built
 * with hidden visibility and publishes only sy_plugin_query
 * (npusim_plugin.c).
 *
 * What the emulated NPU is:
 *   - capabilities from a JSON file (npusim_config.c): ops, weight dtypes,
 *     activation quantisation, shape rules, memory size;
 *   - its own memory: one arena carved into buffers (npusim_buffer.c) that
 *     the host cannot map, so every transfer is a copy_in / copy_out;
 *   - integer execution (npusim_kernels_*.c): activations quantised per row
 *     to int8 (or int16), multiplied with int8/int5/int4 weights into int32
 *     block sums, rescaled by the weight block scale and the activation row
 *     scale.  Never the CPU plugin's kernels, never the host's reference. */
#ifndef SY_NPUSIM_INTERNAL_H
#define SY_NPUSIM_INTERNAL_H

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

#include "switchyard/plugin.h"

#define NPU_PLUGIN_NAME "npusim"
#define NPU_PLUGIN_VERSION "0.1.0"
#define NPU_PLUGIN_VENDOR "switchyard (simulated NPU)"
/* File name of the capability file looked for beside the module. */
#define NPU_CONFIG_FILE "npusim.json"
/* Every buffer starts on this boundary and is a multiple of it in size,
 * as a DMA engine would want. */
#define NPU_ARENA_ALIGN 256u
/* Elements per weight block (Q8_0, Q4_0, Q4_1, Q5_0, Q5_1). */
#define NPU_QK 32
/* Node-name patterns whose matmuls quantise activations to int16. */
#define NPU_MAX_WIDE 16
#define NPU_PATTERN_MAX 64

/* How ADD and MUL compute. */
typedef enum npu_eltwise_precision {
    NPU_ELTWISE_F16 = 0, /* inputs and result rounded to binary16 (the default) */
    NPU_ELTWISE_INT8 = 1, /* inputs quantised per row to int8, like matmul activations */
    NPU_ELTWISE_F32 = 2   /* an fp32 vector unit: exact float32 */
} npu_eltwise_precision;

/* What the emulated NPU can do: the parsed capability file. */
typedef struct npu_caps {
    char model[128];
    char source[512];           /* the file it came from, or "built-in defaults" */
    uint64_t memory_bytes;      /* arena size */
    uint64_t max_tensor_bytes;  /* per tensor; never above memory_bytes */
    uint32_t compute_units;
    double peak_ops;            /* int8 MAC-ops per second (2 per MAC) */
    double peak_bandwidth;      /* bytes/s */
    uint32_t op_mask;           /* bit (1 << sy_op) per op it runs */
    uint32_t weight_mask;       /* bit (1 << sy_dtype) per matmul weight dtype */
    uint32_t act_bits;          /* 8 or 16: activation quantisation width */
    bool act_per_block;         /* one scale per 32 activations instead of per row */
    /* Asymmetric activations: each scale comes with an integer zero point
     * and covers [min, max] of its row (or block) instead of [-max|x|,
     * max|x|], as NPUs encode activations (uint8 with an offset). */
    bool act_zero_point;
    /* Mixed precision, as NPU toolchains assign it per layer: matmuls whose
     * node name matches one of these fnmatch patterns use int16 activations. */
    char wide[NPU_MAX_WIDE][NPU_PATTERN_MAX];
    uint32_t n_wide;
    npu_eltwise_precision eltwise;
    bool static_shapes;         /* dense layouts only, no strided views */
    uint32_t k_multiple;        /* matmul K must be a multiple of this */
    uint32_t max_rows;          /* matmul M (and eltwise rows) per call; 0: no limit */
} npu_caps;

/* One region of the arena, used or free.  Used blocks are the buffer
 * handles the core holds; |magic| tells a live handle from anything else. */
typedef struct npu_block {
    uint32_t magic;
    bool used;
    uint64_t offset;   /* in the arena */
    uint64_t size;     /* bytes reserved (a multiple of NPU_ARENA_ALIGN) */
    uint64_t req_size; /* bytes the caller asked for */
    struct npu_block *prev, *next;
} npu_block;

#define NPU_BLOCK_MAGIC 0x4e505542u /* "NPUB" */

typedef struct npu_arena {
    unsigned char *base; /* NULL until the first allocation */
    uint64_t size;
    uint64_t used;
    uint64_t peak;       /* the most |used| has been (memory_usage) */
    npu_block *head;     /* blocks in offset order; NULL until the first allocation */
    uint32_t live;       /* used blocks */
} npu_arena;

/* Inner integer kernels: one table per instruction set, identical results. */
typedef struct npu_isa {
    const char *name;
    /* Sums a[i] * b[i] over |nblocks| blocks of 32 int16 values, one exact
     * int32 sum per block into out[b]. */
    void (*block_dots)(const int16_t *a, const int16_t *b, int64_t nblocks, int32_t *out);
} npu_isa;

/* Scratch memory of one execute() call, grown as needed. */
typedef struct npu_scratch {
    void *ptr;
    size_t size;
} npu_scratch;

typedef struct npu_state {
    const sy_host *host;
    npu_caps caps;
    npu_arena arena;
    const npu_isa *isa;
    npu_scratch act;    /* quantised activations */
    npu_scratch weight; /* one unpacked weight row */
    sy_device_desc desc;
} npu_state;

/* Logs |fmt| through the host at |level|.  Never prints by itself. */
void npu_log(const npu_state *s, sy_log_level level, const char *fmt, ...)
    __attribute__((format(printf, 3, 4)));

/* Returns the catalogue name of |op| ("matmul") through the host. */
const char *npu_op_name(const npu_state *s, uint32_t op);

/* Formats |bytes| as "1 GiB", "2.1 GiB", "300 KiB" into |out|. */
void npu_format_size(uint64_t bytes, char *out, size_t size);

/* Makes |sc| at least |bytes| long (contents not kept). */
sy_status npu_scratch_reserve(npu_state *s, npu_scratch *sc, size_t bytes);

/* npusim_config.c: fills |caps| with the built-in defaults (what the
 * shipped npusim.json spells out). */
void npu_caps_defaults(npu_caps *caps);
/* Reads the capability file |path| over the defaults.  On SY_E_IO or
 * SY_E_FORMAT, |why| says which file and which field. */
sy_status npu_caps_load(npu_caps *caps, const char *path, char *why, size_t why_size);
/* One line: "matmul,add,mul; weights q8_0,q4_0; W8A8 per-row; K%32; ..." */
void npu_caps_summary(const npu_caps *caps, char *out, size_t size);
/* Writes the names of the dtypes in |mask| as "q8_0, q4_0". */
void npu_dtype_list(uint32_t mask, char *out, size_t size);

/* npusim_device.c: the plugin table's entry points. */
sy_status npu_device_init(const sy_host *host, void **out_state);
void npu_device_deinit(void *state);
uint32_t npu_device_count(void *state);
sy_status npu_device_describe(void *state, uint32_t dev, sy_device_desc *out_desc);
sy_status npu_device_self_test(void *state, uint32_t dev, char *out_msg, uint32_t msg_size);

/* npusim_supports.c */
bool npu_device_supports(void *state, uint32_t dev, const sy_node *node, sy_support *out_why);

/* npusim_buffer.c */
sy_status npu_buffer_alloc(void *state, uint32_t dev, uint64_t size, void **out_buffer);
void npu_buffer_free(void *state, uint32_t dev, void *buffer);
void *npu_buffer_host_ptr(void *state, uint32_t dev, void *buffer);
sy_status npu_buffer_memory_usage(void *state, uint32_t dev, bool reset_peak,
                                  uint64_t *out_in_use, uint64_t *out_peak);
sy_status npu_buffer_copy_in(void *state, uint32_t dev, void *buffer, uint64_t offset,
                             const void *src, uint64_t size);
sy_status npu_buffer_copy_out(void *state, uint32_t dev, void *buffer, uint64_t offset,
                              void *dst, uint64_t size);
sy_status npu_buffer_copy_device(void *state, uint32_t dst_dev, void *dst, uint64_t dst_offset,
                                 uint32_t src_dev, void *src, uint64_t src_offset,
                                 uint64_t size);
/* Frees every block and the arena itself (deinit). */
void npu_arena_release(npu_state *s);
/* Device address of byte |offset| of |buffer| when [offset, offset + size)
 * lies inside a live buffer of this arena, else NULL. */
unsigned char *npu_buffer_address(const npu_state *s, const void *buffer, uint64_t offset,
                                  uint64_t size);

/* npusim_execute.c */
sy_status npu_device_execute(void *state, uint32_t dev, sy_node *const *nodes, uint32_t n);
sy_status npu_device_synchronize(void *state, uint32_t dev);

/* npusim_kernels_matmul.c: out = W8A8(W, X) on device addresses. */
typedef struct npu_view {
    unsigned char *data;
    const sy_tensor *t; /* shape, dtype and strides */
} npu_view;
sy_status npu_kernel_matmul(npu_state *s, const npu_view *w, const npu_view *x,
                            const npu_view *y, uint32_t act_bits);
/* Activation width (8 or 16) the capability file gives the matmul |name|. */
uint32_t npu_matmul_act_bits(const npu_caps *caps, const char *name);
/* Quantises |n| floats to integers of |bits| (8 or 16) with one dynamic
 * scale, round to nearest even, so that x ~ scale * (q - zero point).
 * Symmetric (|zero_point| false): q in [-127, 127] (or +-32767) and the
 * zero point is 0.  Asymmetric: q spans the full [-128, 127] (or
 * [-32768, 32767]) over [min(x, 0), max(x, 0)] and *out_zp says where 0
 * lies.  Returns the scale (0 for an all-zero row, NaN when the row holds
 * a NaN or an infinity). */
float npu_quantize_row(const float *x, int64_t n, uint32_t bits, bool zero_point, int16_t *out_q,
                       int32_t *out_zp);

/* npusim_kernels_eltwise.c: ADD and MUL with broadcasting. */
sy_status npu_kernel_eltwise(npu_state *s, uint32_t op, const npu_view *a, const npu_view *b,
                             const npu_view *y);

/* npusim_isa.c: the inner-kernel table for this machine, or the portable
 * one when |request| is "scalar". */
const npu_isa *npu_isa_select(const char *request);

#endif
