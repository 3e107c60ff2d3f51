/* Switchyard value types shared by the embedding API and the plugin ABI:
 * data types, tensors, operators and graph nodes.
 *
 * Everything here is part of the stable plugin ABI: structs are laid out
 * once and only ever grow at the end (tests/abi pins offsets and sizes),
 * enums are append only.  Helpers are static inline so that a plugin can
 * use them without linking against libswitchyard. */
#ifndef SWITCHYARD_TYPES_H
#define SWITCHYARD_TYPES_H

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

#ifdef __cplusplus
extern "C" {
#endif

/* ---------------------------------------------------------------- dtypes */

/* Element types.  Block types follow the GGUF definitions exactly
 * (block size in elements, bytes per block). */
typedef enum sy_dtype {
    SY_DTYPE_F32 = 0,   /* 1 elem,   4 bytes */
    SY_DTYPE_F16 = 1,   /* 1 elem,   2 bytes, IEEE binary16 */
    SY_DTYPE_BF16 = 2,  /* 1 elem,   2 bytes */
    SY_DTYPE_I32 = 3,   /* 1 elem,   4 bytes */
    SY_DTYPE_Q8_0 = 4,  /* 32 elems, 34 bytes: f16 d, int8 qs[32] */
    SY_DTYPE_Q4_0 = 5,  /* 32 elems, 18 bytes: f16 d, uint8 qs[16] */
    SY_DTYPE_Q4_1 = 6,  /* 32 elems, 20 bytes: f16 d, f16 m, uint8 qs[16] */
    SY_DTYPE_Q4_K = 7,  /* 256 elems, 144 bytes */
    SY_DTYPE_Q5_K = 8,  /* 256 elems, 176 bytes */
    SY_DTYPE_Q6_K = 9,  /* 256 elems, 210 bytes */
    SY_DTYPE_Q5_0 = 10, /* 32 elems, 22 bytes: f16 d, uint8 qh[4], uint8 qs[16] */
    SY_DTYPE_Q5_1 = 11, /* 32 elems, 24 bytes: f16 d, f16 m, uint8 qh[4], uint8 qs[16] */
    SY_DTYPE_COUNT
} sy_dtype;

typedef struct sy_dtype_traits_ {
    const char *name;
    uint32_t block_size; /* elements per block */
    uint32_t type_size;  /* bytes per block */
    bool quantized;
} sy_dtype_traits_;

/* Returns the traits of |t|, or NULL for an unknown value. */
static inline const sy_dtype_traits_ *sy_dtype_traits(uint32_t t)
{
    static const sy_dtype_traits_ table[SY_DTYPE_COUNT] = {
        [SY_DTYPE_F32] = {"f32", 1, 4, false},     [SY_DTYPE_F16] = {"f16", 1, 2, false},
        [SY_DTYPE_BF16] = {"bf16", 1, 2, false},   [SY_DTYPE_I32] = {"i32", 1, 4, false},
        [SY_DTYPE_Q8_0] = {"q8_0", 32, 34, true},  [SY_DTYPE_Q4_0] = {"q4_0", 32, 18, true},
        [SY_DTYPE_Q4_1] = {"q4_1", 32, 20, true},  [SY_DTYPE_Q4_K] = {"q4_k", 256, 144, true},
        [SY_DTYPE_Q5_K] = {"q5_k", 256, 176, true}, [SY_DTYPE_Q6_K] = {"q6_k", 256, 210, true},
        [SY_DTYPE_Q5_0] = {"q5_0", 32, 22, true},  [SY_DTYPE_Q5_1] = {"q5_1", 32, 24, true},
    };
    return t < SY_DTYPE_COUNT ? &table[t] : NULL;
}

static inline bool sy_dtype_is_valid(uint32_t t) { return t < SY_DTYPE_COUNT; }
static inline const char *sy_dtype_name(uint32_t t)
{
    return t < SY_DTYPE_COUNT ? sy_dtype_traits(t)->name : "invalid";
}
static inline uint32_t sy_dtype_block_size(uint32_t t)
{
    return t < SY_DTYPE_COUNT ? sy_dtype_traits(t)->block_size : 0;
}
static inline uint32_t sy_dtype_type_size(uint32_t t)
{
    return t < SY_DTYPE_COUNT ? sy_dtype_traits(t)->type_size : 0;
}
static inline bool sy_dtype_is_quantized(uint32_t t)
{
    return t < SY_DTYPE_COUNT && sy_dtype_traits(t)->quantized;
}

/* ------------------------------------------------------------------ ops */

/* The operator catalogue.  Shapes use ne[0] as the innermost (contiguous)
 * dimension, as GGUF does.  "F32" below means the activation type; inputs
 * marked "any" accept every sy_dtype the op's rules allow.  p = node params.
 *
 * GET_ROWS   in0 table [K,R] any, in1 ids I32 [M]      -> F32 [K,M]
 * ADD, MUL   in0 F32 [a0..a3], in1 F32 with b_i | a_i (broadcast)  -> F32 shape of in0
 * SCALE      in0 F32 -> F32: x * p.f[0] + p.f[1]
 * RMS_NORM   in0 F32 -> F32: each ne[0] row x / sqrt(mean(x^2) + p.f[0])
 * MATMUL     in0 W [K,N,b2,b3] any, in1 X [K,M,c2,c3] F32|F16 with b2|c2, b3|c3
 *            -> F32 [N,M,c2,c3]; out[n,m] = sum_k W[k,n] * X[k,m]
 * ROPE       in0 F32 [D,H,T], in1 positions I32 [T] -> F32 [D,H,T];
 *            p.i[0] mode (SY_ROPE_NORMAL pairs (2j,2j+1), SY_ROPE_NEOX pairs (j,j+n/2)),
 *            p.i[1] n_rot (even, <= D; dims past it pass through),
 *            p.f[0] freq_base, p.f[1] freq_scale (0 means 1):
 *            theta_j = pos * freq_scale * base^(-2j/n_rot)
 * SOFTMAX    in0 F32 [N,M,...] -> F32 same; each row softmax(x * p.f[0]) with
 *            p.i[0] causal (key j masked when j > p.i[1] + m, row m),
 *            p.i[1] n_past, p.i[2] window (0: none; else key j masked when
 *            p.i[1] + m - j >= window)
 * ATTENTION  in0 Q F32 [D,Hq,T], in1 K [D,Hkv,S], in2 V [D,Hkv,S], each F32|F16|Q8_0|Q4_0
 *            (the KV cache types; quantised rows are read as their dequantised values),
 *            Hkv | Hq (GQA: query head h reads kv head h / (Hq/Hkv)) -> F32 [D,Hq,T];
 *            softmax(q.k * p.f[0]) . v with query t at position p.i[0] + t and
 *            the causal / window masks of SOFTMAX (p.i[0] n_past, p.i[1] window);
 *            a fully masked row gives zeros.  SOFTMAX and ATTENTION refuse a
 *            zero or non-finite scale p.f[0] (an unset parameter, not a choice).
 *            Optional in3 I32 [1]: n_past read when the node runs (p.i[0] must
 *            be 0); then S may exceed n_past + T, and rows from n_past + T on
 *            are never read (a decode graph that stays the same from token to
 *            token; a run with n_past + T > S fails)
 * SILU, GELU in0 F32 -> F32 (GELU: tanh approximation)
 * SWIGLU     in0 gate F32, in1 up F32 (same shape) -> silu(gate) * up
 * GEGLU      in0 gate F32, in1 up F32 (same shape) -> gelu(gate) * up
 * COPY       in0 any (views allowed) -> contiguous, same shape, dtype p.i[0];
 *            converts between F32/F16/BF16, dequantizes every block type,
 *            quantizes to Q8_0/Q4_0/Q4_1
 * VIEW       in0 -> alias of in0's storage: ne = p.i[0..3], nb1..nb3 = p.i[4..6],
 *            byte offset p.i[7]
 * RESHAPE    in0 contiguous -> alias with ne = p.i[0..3] (same element count)
 * PERMUTE    in0 -> alias; source dim k becomes output dim p.i[k]
 * TRANSPOSE  in0 -> alias with dims 0 and 1 swapped
 * KV_WRITE   in0 cache [D,H,C] F32|F16|Q8_0|Q4_0, in1 F32 [D,H,T], p.i[0] start P,
 *            P + T <= C -> alias of the cache [D,H,P+T] after writing in1 at rows P..P+T-1.
 *            Optional in2 I32 [1]: P read when the node runs (p.i[0] must be 0)
 *            -> alias of the whole cache [D,H,C]; rows outside P..P+T-1 keep
 *            what they held, and a run with P < 0 or P + T > C fails.  Only
 *            plugins of ABI 1.3 or later are given the forms with a run-time
 *            P or n_past
 * ARGMAX     in0 F32 [N,M] -> I32 [M] (first maximum of each row)
 */
typedef enum sy_op {
    SY_OP_NONE = 0,
    SY_OP_GET_ROWS,
    SY_OP_ADD,
    SY_OP_MUL,
    SY_OP_SCALE,
    SY_OP_RMS_NORM,
    SY_OP_MATMUL,
    SY_OP_ROPE,
    SY_OP_SOFTMAX,
    SY_OP_ATTENTION,
    SY_OP_SILU,
    SY_OP_GELU,
    SY_OP_SWIGLU,
    SY_OP_GEGLU,
    SY_OP_COPY,
    SY_OP_VIEW,
    SY_OP_RESHAPE,
    SY_OP_PERMUTE,
    SY_OP_TRANSPOSE,
    SY_OP_KV_WRITE,
    SY_OP_ARGMAX,
    SY_OP_COUNT
} sy_op;

enum { SY_ROPE_NORMAL = 0, SY_ROPE_NEOX = 1 };

/* True for ops whose output aliases their first input's storage and that
 * compute nothing (VIEW, RESHAPE, PERMUTE, TRANSPOSE). */
static inline bool sy_op_is_view(uint32_t op)
{
    return op == SY_OP_VIEW || op == SY_OP_RESHAPE || op == SY_OP_PERMUTE ||
           op == SY_OP_TRANSPOSE;
}

/* --------------------------------------------------------------- tensors */

#define SY_MAX_DIMS 4
#define SY_MAX_INPUTS 4
#define SY_MAX_PARAMS 8
#define SY_NAME_MAX 64

typedef enum sy_tensor_role {
    SY_ROLE_ACTIVATION = 0, /* produced by a node, lifetime within a step */
    SY_ROLE_INPUT = 1,      /* filled by the caller before execution */
    SY_ROLE_WEIGHT = 2,     /* constant model data, placed once */
    SY_ROLE_KV = 3,         /* state kept across steps (KV cache) */
    SY_ROLE_OUTPUT = 4      /* read by the caller after execution */
} sy_tensor_role;

/* A tensor: shape, type, role and residency.
 * ne[] counts elements per dim (unused dims are 1); nb[] are byte strides
 * (nb[0] = type size of one block; for block types a row of ne[0] elements
 * takes ne[0] / block_size * type_size bytes).  A view (view_src != NULL)
 * aliases the root storage tensor view_src at byte view_offset.
 * Residency is filled in by the runtime before a device executes:
 * |buffer| is the executing plugin's buffer handle (NULL for host memory the
 * plugin did not allocate), |offset| the byte offset in it, and |data| the
 * host-visible address of element 0 or NULL when the memory is not mapped. */
typedef struct sy_tensor {
    uint32_t id;       /* index within its graph */
    uint32_t dtype;    /* sy_dtype */
    uint32_t role;     /* sy_tensor_role */
    uint32_t n_dims;   /* 1..SY_MAX_DIMS, informational */
    int64_t ne[SY_MAX_DIMS];
    uint64_t nb[SY_MAX_DIMS];
    struct sy_tensor *view_src;
    uint64_t view_offset;
    void *data;
    void *buffer;
    uint64_t offset;
    char name[SY_NAME_MAX];
} sy_tensor;

typedef struct sy_op_params {
    int64_t i[SY_MAX_PARAMS];
    float f[SY_MAX_PARAMS];
} sy_op_params;

/* One operation: inputs, the output it writes, and small parameters. */
typedef struct sy_node {
    uint32_t id;       /* index within its graph's topological order */
    uint32_t op;       /* sy_op */
    uint32_t n_inputs;
    uint32_t reserved_;
    sy_tensor *inputs[SY_MAX_INPUTS];
    sy_tensor *output;
    sy_op_params params;
    char name[SY_NAME_MAX];
} sy_node;

/* True for the forms of KV_WRITE and ATTENTION that read their start or
 * n_past from an input when they run (types.h, ops). */
static inline bool sy_op_has_run_time_position(const sy_node *n)
{
    return (n->op == SY_OP_KV_WRITE && n->n_inputs == 3) ||
           (n->op == SY_OP_ATTENTION && n->n_inputs == 4);
}

static inline int64_t sy_tensor_nelements(const sy_tensor *t)
{
    return t->ne[0] * t->ne[1] * t->ne[2] * t->ne[3];
}

/* Bytes of one contiguous row of ne[0] elements. */
static inline uint64_t sy_tensor_row_size(const sy_tensor *t)
{
    return (uint64_t)t->ne[0] / sy_dtype_block_size(t->dtype) * sy_dtype_type_size(t->dtype);
}

/* Bytes spanned by the tensor's elements (for contiguous tensors: its size). */
static inline uint64_t sy_tensor_nbytes(const sy_tensor *t)
{
    if (sy_tensor_nelements(t) == 0)
        return 0;
    uint64_t n = sy_tensor_row_size(t);
    for (int d = 1; d < SY_MAX_DIMS; d++)
        n += (uint64_t)(t->ne[d] - 1) * t->nb[d];
    return n;
}

/* True when rows are dense and dims follow each other without gaps. */
static inline bool sy_tensor_is_contiguous(const sy_tensor *t)
{
    uint64_t want = sy_dtype_type_size(t->dtype);
    if (t->nb[0] != want)
        return false;
    want = sy_tensor_row_size(t);
    for (int d = 1; d < SY_MAX_DIMS; d++) {
        if (t->ne[d] != 1 && t->nb[d] != want)
            return false;
        want *= (uint64_t)t->ne[d];
    }
    return true;
}

/* Fills nb[] for a contiguous layout of ne[] and dtype. */
static inline void sy_tensor_set_contiguous_strides(sy_tensor *t)
{
    t->nb[0] = sy_dtype_type_size(t->dtype);
    t->nb[1] = sy_tensor_row_size(t);
    for (int d = 2; d < SY_MAX_DIMS; d++)
        t->nb[d] = t->nb[d - 1] * (uint64_t)t->ne[d - 1];
}

#ifdef __cplusplus
}
#endif
#endif
