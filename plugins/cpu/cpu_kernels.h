/* The CPU plugin's threaded kernels, one entry per op family.
 *
 * Contract of every cpu_kernel_*: run |node| (all tensor data pointers
 * set) on the lanes of |s|.  When the kernel does not cover the node's
 * layout or dtypes it returns SY_E_UNSUPPORTED before touching any memory
 * and sets *out_why to a static string; the caller then runs the host's
 * reference kernel.  Any other non-OK status is a real failure. */
#ifndef SY_CPU_KERNELS_H
#define SY_CPU_KERNELS_H

#include <stdbool.h>
#include <stdint.h>

#include "cpu_internal.h"

/* Dispatches on node->op. */
sy_status cpu_kernel_run(cpu_state *s, const sy_node *node, const char **out_why);

/* cpu_kernels_matmul.c */
sy_status cpu_kernel_matmul(cpu_state *s, const sy_node *node, const char **out_why);
/* Matmuls that read the same input (attention's q, k and v; the FFN's gate
 * and up) run as one: the input is quantized once and every member's
 * tiles go to one dispatch, so lanes balance across members.  Each output
 * equals cpu_kernel_matmul's bit for bit.  cpu_matmul_can_group tells
 * whether |b| may join a group started by |a|. */
#define CPU_MATMUL_GROUP_MAX 4
bool cpu_matmul_can_group(const cpu_state *s, const sy_node *a, const sy_node *b);
typedef struct cpu_epilogue cpu_epilogue;
/* A matmul (|n| = 1) or a group of |n| set up once (checks, the packed
 * weights, the lanes it takes), to run now and, in a kept program
 * (cpu_program.c), at later calls while its nodes' tensors keep their
 * shapes, dtypes and storage.  The job is a plain struct of
 * cpu_matmul_job_size() bytes that may be moved between runs.  |epi| (or
 * NULL), copied in: work that runs in the group's tiles
 * (cpu_kernels_fused.c); with it the group must be a decode (one column
 * per member, float output rows), else SY_E_UNSUPPORTED.  Build returns
 * SY_E_UNSUPPORTED, touching no memory, where the kernel does not cover
 * the nodes. */
typedef struct cpu_matmul_job cpu_matmul_job;
size_t cpu_matmul_job_size(void);
sy_status cpu_matmul_job_build(cpu_state *s, const sy_node *const *nodes, uint32_t n,
                               const cpu_epilogue *epi, cpu_matmul_job *j, const char **out_why);
/* Asks for every cache line of [at, at + bytes) into L2 (prefetcht1), for
 * writing where |write|: bytes a later step reads from memory. */
static inline void cpu_prefetch_range(const void *at, size_t bytes, bool write)
{
    const uintptr_t a = (uintptr_t)at, end = a + bytes;
    for (uintptr_t p = a - a % 64; p < end; p += 64) {
        if (write)
            __builtin_prefetch((const void *)p, 1, 2);
        else
            __builtin_prefetch((const void *)p, 0, 2);
    }
}
/* Byte ranges the next run of a job prefetches at most. */
#define CPU_MATMUL_PF_MAX (2 * CPU_MATMUL_GROUP_MAX + 1)
/* Adds [at, at + bytes) to what the next run of |j| prefetches (for
 * writing where |write|): on the calling lane once the job is out, for
 * the steps after it (a cache's past rows, a norm's weight row).  Past
 * CPU_MATMUL_PF_MAX ranges, dropped.  Each run empties the list. */
void cpu_matmul_job_prefetch(cpu_matmul_job *j, const void *at, size_t bytes, bool write);
/* Asks for the lines of |j| that its run reads (its first |members|
 * members' set-up, and its epilogue where |epi|), without reading it:
 * for the time before the run. */
void cpu_matmul_job_fetch(const cpu_matmul_job *j, uint32_t members, bool epi);
/* Has the calling lane of |j|'s next run call |fn|(|ctx|) once it is out
 * of items, before it waits for the other lanes (cpu_pool_run_items_tail):
 * prefetches for the steps after the job.  Each run drops it. */
void cpu_matmul_job_tail(cpu_matmul_job *j, void (*fn)(void *), void *ctx);
/* The job's epilogue, to be taken again in place, or NULL when it has none. */
cpu_epilogue *cpu_matmul_job_epilogue(cpu_matmul_job *j);
sy_status cpu_matmul_job_run(cpu_state *s, cpu_matmul_job *j);

/* cpu_kernels_fused.c: nodes that follow a decode matmul group and read
 * its outputs, run inside the group's tiles, so the lanes share their work
 * and no dispatch of their own runs for them; every node's output is
 * written bit for bit as each kernel alone would (the same row functions).
 * After q, k and v: the ROPE of q and k and the KV_WRITE of k and v, head
 * by head.  The lane that completes a head's rows of a member's output
 * ropes that head and writes it into the cache.  (The SWIGLU after gate
 * and up was run in their tiles too, each item a tile of gate rows and
 * the same tile of up rows: two weight streams per lane instead of one
 * cost the 1.1B Q4_0 decode 4-11% at 2 threads; it runs as a node.) */
/* Head h of a step reads x + h * x_nb and writes y + h * y_nb. */
struct cpu_qkv_rows {
    const char *x;
    char *y;
    uint64_t x_nb, y_nb;
};
struct cpu_qkv_chain {
    const sy_tensor *y;  /* the member's output: [D * H] rows of one column */
    const sy_node *rope; /* its ROPE, or NULL */
    const sy_node *kv;   /* its KV_WRITE (of the rope's output or of y), or NULL */
    int64_t d;           /* rows per head */
    int64_t heads;       /* y's heads of d rows (set with d) */
    _Atomic int64_t *done; /* rows of each head done, one cache line per head */
    /* What the lanes read per head, taken from the nodes when they are
     * taken: the lanes never load the node and tensor structs. */
    struct cpu_qkv_rows rope_rows, kv_rows;
    int64_t n_rot;
    bool neox;
    uint32_t kv_dtype;
    uint32_t kv_slot; /* the KV write's bytes in the epilogue's written list */
    const char *kv_base; /* the cache's position 0 (prefetches of its past rows) */
    const int32_t *kv_start; /* the KV write's run-time start (host), or NULL */
    int64_t kv_cap;          /* the cache's rows */
    uint64_t kv_row_nb;      /* bytes from one of its rows (positions) to the next */
};
struct cpu_epilogue {
    cpu_state *s;
    uint32_t n; /* members */
    struct cpu_qkv_chain chain[CPU_MATMUL_GROUP_MAX];
    const sy_node *rope_params; /* the first rope; every rope has its params */
    /* Its params and position, read again by every run: the position is
     * input data, which changes between runs of a kept job with no node
     * changed. */
    sy_op_params rope_p;
    const int32_t *rope_pos;
    const char *written[2 * CPU_MATMUL_GROUP_MAX][2]; /* bytes the steps write */
    uint32_t n_written;
};
/* Starts an epilogue for the matmul group |group| of |n| members. */
void cpu_epilogue_begin(cpu_epilogue *e, cpu_state *s, const sy_node *const *group, uint32_t n);
/* Takes |node| (its data resolved) into the epilogue: a ROPE or KV_WRITE
 * that reads a member's output heads, or the rope of one, where its memory
 * and params allow.  False leaves the epilogue as it was. */
bool cpu_epilogue_take(cpu_epilogue *e, const sy_node *node);
/* Moves the KV write |node|, taken into |e| before, to where it writes
 * now (its start position moved; the rows it stores and the cache are the
 * same); false, leaving |e| as it was, where it is not one of |e|'s or its
 * new rows fail the checks cpu_epilogue_take makes. */
bool cpu_epilogue_move_kv(cpu_epilogue *e, const sy_node *node);
/* Readies an epilogue (head counters). */
sy_status cpu_epilogue_ready(cpu_epilogue *e);
/* Adds to |j|'s prefetch list the cache bytes the steps after the group
 * read and write: each KV write's row and the cache's newest past rows. */
void cpu_epilogue_prefetch(const cpu_epilogue *e, cpu_matmul_job *j);
/* Rows [n0, n1) of member |m|'s output are done (by the calling lane). */
void cpu_epilogue_tile_done(cpu_epilogue *e, uint32_t m, int64_t n0, int64_t n1);
/* cpu_kernels_elementwise.c: ADD, MUL, SCALE, SILU, GELU, SWIGLU, GEGLU */
static inline bool cpu_op_is_eltwise(uint32_t op)
{
    return op == SY_OP_ADD || op == SY_OP_MUL || op == SY_OP_SCALE || op == SY_OP_SILU ||
           op == SY_OP_GELU || op == SY_OP_SWIGLU || op == SY_OP_GEGLU;
}
sy_status cpu_kernel_elementwise(cpu_state *s, const sy_node *node, const char **out_why);
/* An element-wise node checked once and run later (a kept program's step). */
typedef struct cpu_eltwise {
    const cpu_isa_table *isa;
    uint32_t op;
    const sy_tensor *a;
    const sy_tensor *b; /* NULL for unary ops */
    const sy_tensor *y;
    float scale, bias;
    uint32_t nth;  /* lanes */
    bool flat;     /* contiguous operands of one shape: split into element ranges */
} cpu_eltwise;
/* Checks |node| as cpu_kernel_elementwise does and fills *|out|; touches
 * no memory. */
sy_status cpu_eltwise_prepare(cpu_state *s, const sy_node *node, cpu_eltwise *out,
                              const char **out_why);
/* Runs a prepared element-wise node (its tensors as they were prepared). */
void cpu_eltwise_run(cpu_state *s, const cpu_eltwise *e);
/* cpu_kernels_rows.c: RMS_NORM, SOFTMAX, ROPE, ARGMAX */
sy_status cpu_kernel_rms_norm(cpu_state *s, const sy_node *node, const char **out_why);
/* An ADD whose sum an RMS_NORM normalizes and a MUL of the norm by a
 * weight row, as one pass per row (|add| or |mul| may be NULL, not both);
 * every node's output is written, bit for bit as each kernel alone would.
 * SY_E_UNSUPPORTED, touching nothing, when the nodes do not chain or
 * their layouts or memory do not allow it. */
sy_status cpu_kernel_norm_chain(cpu_state *s, const sy_node *add, const sy_node *norm,
                                const sy_node *mul, const char **out_why);
/* The same chain checked once and run later (a kept program's step): what
 * the rows read, taken from the nodes, so a run reads no node struct. */
typedef struct cpu_norm_chain {
    const cpu_state *s;
    const sy_tensor *a, *b; /* the add's operands; NULL: no add */
    const sy_tensor *x;     /* the norm's input (the add's output) */
    const sy_tensor *y;     /* the norm's output */
    const sy_tensor *w;     /* the multiply's weight row; NULL: no multiply */
    const sy_tensor *z;     /* the multiply's output */
    float eps;
    uint32_t nth; /* lanes */
} cpu_norm_chain;
/* Checks the chain as cpu_kernel_norm_chain does and fills *|out|;
 * touches no memory. */
sy_status cpu_norm_chain_prepare(cpu_state *s, const sy_node *add, const sy_node *norm,
                                 const sy_node *mul, cpu_norm_chain *out, const char **out_why);
/* Runs a prepared chain on the tensors as they are now (their shapes,
 * strides and storage those it was prepared with). */
void cpu_norm_chain_run(cpu_state *s, const cpu_norm_chain *c);
sy_status cpu_kernel_softmax(cpu_state *s, const sy_node *node, const char **out_why);
sy_status cpu_kernel_rope(cpu_state *s, const sy_node *node, const char **out_why);
/* Checks a ROPE node against the kernel's rules and readies the angles
 * (for one token, of its position) that cpu_rope_row takes. */
sy_status cpu_rope_prepare(cpu_state *s, const sy_node *node, const char **out_why);
/* Readies the angles of one token at |pos| for a rope of params |p| (as
 * cpu_rope_prepare does for a node, without its checks). */
sy_status cpu_rope_position(cpu_state *s, const sy_op_params *p, int32_t pos);
/* Ropes one head row of |d| values: pairs of the first |n_rot| rotated by
 * cos_t/sin_t (adjacent pairs, or split halves for NeoX), the rest copied. */
void cpu_rope_row(const float *x, float *y, int64_t d, int64_t n_rot, bool neox,
                  const float *cos_t, const float *sin_t);
sy_status cpu_kernel_argmax(cpu_state *s, const sy_node *node, const char **out_why);
/* cpu_kernels_attention.c */
sy_status cpu_kernel_attention(cpu_state *s, const sy_node *node, const char **out_why);
/* An attention node checked once and run later (a kept program's step):
 * what a run needs besides the position, taken from the node. */
typedef struct cpu_attention_kept {
    const sy_tensor *q, *k, *v, *y;
    cpu_dequant_fn k_deq, v_deq; /* NULL: F32 rows read in place */
    const int32_t *n_past_at;    /* the run-time n_past (host), or NULL: |n_past| */
    int64_t n_past, window, keys;
    int64_t d, hq, hkv, tokens, tile;
    float scale;
} cpu_attention_kept;
/* Checks |node| as cpu_kernel_attention does and fills *|out|; touches no
 * memory but the node's structs. */
sy_status cpu_attention_prepare(cpu_state *s, const sy_node *node, cpu_attention_kept *out,
                                const char **out_why);
/* Runs a prepared attention at the n_past it holds now. */
sy_status cpu_attention_run(cpu_state *s, const cpu_attention_kept *a, const char **out_why);
/* cpu_kernels_memory.c: GET_ROWS, KV_WRITE, COPY */
sy_status cpu_kernel_get_rows(cpu_state *s, const sy_node *node, const char **out_why);
sy_status cpu_kernel_kv_write(cpu_state *s, const sy_node *node, const char **out_why);
/* Checks a KV_WRITE node against the kernel's rules. */
sy_status cpu_kv_write_check(const sy_node *node, const char **out_why);
/* The run-time start of a KV_WRITE or n_past of an ATTENTION (types.h):
 * its input's host memory, or NULL when the node has the position in its
 * params. */
const int32_t *cpu_kv_run_time_position(const sy_node *node);
/* Stores |n| F32 values as one dense row of |dtype| (a dtype KV_WRITE or
 * COPY admit). */
void cpu_store_row(const cpu_state *s, uint32_t dtype, const float *src, void *dst, int64_t n);
sy_status cpu_kernel_copy(cpu_state *s, const sy_node *node, const char **out_why);

/* ------------------------------------------------------------ helpers */

/* Splits [0, n) into |nth| near-equal ranges; lane |ith| gets [*lo, *hi). */
static inline void cpu_split(int64_t n, uint32_t ith, uint32_t nth, int64_t *lo, int64_t *hi)
{
    *lo = n * (int64_t)ith / (int64_t)nth;
    *hi = n * (int64_t)(ith + 1) / (int64_t)nth;
}

/* Lanes worth waking for |work| units when one lane should get at least
 * |min_per_lane| of them. */
static inline uint32_t cpu_lanes_for(const cpu_state *s, int64_t work, int64_t min_per_lane)
{
    int64_t n = min_per_lane > 0 ? work / min_per_lane : work;
    if (n < 1)
        n = 1;
    return n < (int64_t)s->n_threads ? (uint32_t)n : s->n_threads;
}

/* Number of ne[0]-rows of |t|. */
static inline int64_t cpu_nrows(const sy_tensor *t)
{
    return t->ne[1] * t->ne[2] * t->ne[3];
}

/* Address of row (i1, i2, i3) of |t|. */
static inline char *cpu_row(const sy_tensor *t, int64_t i1, int64_t i2, int64_t i3)
{
    return (char *)t->data + i1 * (int64_t)t->nb[1] + i2 * (int64_t)t->nb[2] +
           i3 * (int64_t)t->nb[3];
}

/* Address of flat row |r| (r = i1 + ne1 * (i2 + ne2 * i3)) of |t|. */
static inline char *cpu_row_flat(const sy_tensor *t, int64_t r)
{
    int64_t i1 = r % t->ne[1];
    int64_t i23 = r / t->ne[1];
    return cpu_row(t, i1, i23 % t->ne[2], i23 / t->ne[2]);
}

/* True when the elements (blocks) of each row of |t| are packed. */
static inline bool cpu_rows_dense(const sy_tensor *t)
{
    return t->nb[0] == sy_dtype_type_size(t->dtype);
}

/* True when |t| is F32 with packed rows. */
static inline bool cpu_is_f32_rows(const sy_tensor *t)
{
    return t->dtype == SY_DTYPE_F32 && t->nb[0] == sizeof(float);
}

#endif
