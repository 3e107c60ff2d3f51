/* plugin-check: the op cases.  Every op of the catalogue (views aside: the
 * core answers for them) on every dtype its rules allow, on a few shapes
 * each, including ones a restricted device should refuse (K not a multiple
 * of 32, strided views, a node larger than the device's memory).  Each
 * case is a small frozen graph whose last node is the one under test,
 * with random inputs drawn from the run's seed. */
#include <stdlib.h>
#include <string.h>

#include "plugin_check_internal.h"

typedef enum pcheck_kind {
    PC_MATMUL,
    PC_GET_ROWS,
    PC_BINARY,  /* add, mul, swiglu, geglu */
    PC_UNARY,   /* scale, rms_norm, silu, gelu, softmax, argmax */
    PC_ROPE,
    PC_ATTENTION,
    PC_COPY,
    PC_KV_WRITE,
    PC_OVERSIZE /* an add larger than the device's memory: supports() only */
} pcheck_kind;

typedef struct pcheck_spec {
    pcheck_kind kind;
    uint32_t op;
    uint32_t dt0, dt1; /* input dtypes (matmul: weights, activations) */
    int64_t a[4], b[4];
    int64_t pi[3];
    float pf[2];
    bool transposed;   /* the second input (matmul) or the input (copy) is a transposed view */
    bool run_time;     /* KV_WRITE's start or ATTENTION's n_past (pi[0]) from an input */
} pcheck_spec;

#define PC_MAX_SPECS 256

static const uint32_t pc_all_dtypes[] = {
    SY_DTYPE_F32,  SY_DTYPE_F16,  SY_DTYPE_BF16, SY_DTYPE_I32,  SY_DTYPE_Q8_0, SY_DTYPE_Q4_0,
    SY_DTYPE_Q4_1, SY_DTYPE_Q5_0, SY_DTYPE_Q5_1, SY_DTYPE_Q4_K, SY_DTYPE_Q5_K, SY_DTYPE_Q6_K,
};
#define PC_N_DTYPES (sizeof pc_all_dtypes / sizeof pc_all_dtypes[0])

typedef struct pcheck_specs {
    pcheck_spec s[PC_MAX_SPECS];
    uint32_t n;
} pcheck_specs;

static pcheck_spec *pc_spec(pcheck_specs *l, pcheck_kind kind, uint32_t op)
{
    if (l->n == PC_MAX_SPECS)
        return &l->s[PC_MAX_SPECS - 1]; /* never reached: the list is fixed */
    pcheck_spec *s = &l->s[l->n++];
    memset(s, 0, sizeof *s);
    s->kind = kind;
    s->op = op;
    s->dt0 = s->dt1 = SY_DTYPE_F32;
    for (int d = 0; d < 4; d++)
        s->a[d] = s->b[d] = 1;
    return s;
}

static void pc_shape(int64_t *ne, int64_t n0, int64_t n1, int64_t n2, int64_t n3)
{
    ne[0] = n0;
    ne[1] = n1;
    ne[2] = n2;
    ne[3] = n3;
}

static void pc_matmul(pcheck_specs *l, uint32_t wt, uint32_t xt, int64_t k, int64_t n, int64_t m,
                      int64_t b2, int64_t c2)
{
    pcheck_spec *s = pc_spec(l, PC_MATMUL, SY_OP_MATMUL);
    s->dt0 = wt;
    s->dt1 = xt;
    pc_shape(s->a, k, n, b2, 1);
    pc_shape(s->b, k, m, c2, 1);
}

static void pc_build_specs(pcheck_specs *l)
{
    l->n = 0;
    pcheck_spec *s;
    for (size_t i = 0; i < PC_N_DTYPES; i++) {
        const uint32_t t = pc_all_dtypes[i];
        const int64_t k = sy_dtype_block_size(t) == 256 ? 256 : 64;
        pc_matmul(l, t, SY_DTYPE_F32, k, 24, 1, 1, 1);
        pc_matmul(l, t, SY_DTYPE_F32, k, 24, 7, 1, 1);
        pc_matmul(l, t, SY_DTYPE_F16, k, 8, 3, 1, 1);
        pc_matmul(l, t, SY_DTYPE_F32, k, 8, 3, 2, 4);
        if (sy_dtype_block_size(t) == 32)
            pc_matmul(l, t, SY_DTYPE_F32, 96, 16, 5, 1, 1);
    }
    /* K=100: no 32-element alignment; a larger one; a transposed input. */
    pc_matmul(l, SY_DTYPE_F32, SY_DTYPE_F32, 100, 12, 3, 1, 1);
    pc_matmul(l, SY_DTYPE_Q4_0, SY_DTYPE_F32, 512, 96, 9, 1, 1);
    pc_matmul(l, SY_DTYPE_Q8_0, SY_DTYPE_F32, 512, 96, 9, 1, 1);
    s = pc_spec(l, PC_MATMUL, SY_OP_MATMUL);
    s->dt0 = SY_DTYPE_Q8_0;
    pc_shape(s->a, 64, 16, 1, 1);
    pc_shape(s->b, 64, 5, 1, 1);
    s->transposed = true;

    for (size_t i = 0; i < PC_N_DTYPES; i++) {
        s = pc_spec(l, PC_GET_ROWS, SY_OP_GET_ROWS);
        s->dt0 = pc_all_dtypes[i];
        pc_shape(s->a, sy_dtype_block_size(s->dt0) == 256 ? 256 : 64, 10, 1, 1);
        s->b[0] = 5;
    }

    static const uint32_t binary[] = {SY_OP_ADD, SY_OP_MUL};
    for (size_t i = 0; i < 2; i++) {
        s = pc_spec(l, PC_BINARY, binary[i]);
        pc_shape(s->a, 64, 6, 2, 1);
        pc_shape(s->b, 64, 6, 2, 1);
        s = pc_spec(l, PC_BINARY, binary[i]);
        pc_shape(s->a, 64, 6, 2, 1);
        pc_shape(s->b, 64, 1, 1, 1);
        s = pc_spec(l, PC_BINARY, binary[i]);
        pc_shape(s->a, 37, 3, 1, 1);
        pc_shape(s->b, 1, 3, 1, 1);
    }
    static const uint32_t glu[] = {SY_OP_SWIGLU, SY_OP_GEGLU};
    for (size_t i = 0; i < 2; i++) {
        s = pc_spec(l, PC_BINARY, glu[i]);
        pc_shape(s->a, 50, 3, 1, 1);
        pc_shape(s->b, 50, 3, 1, 1);
    }

    s = pc_spec(l, PC_UNARY, SY_OP_SCALE);
    pc_shape(s->a, 50, 3, 1, 1);
    s->pf[0] = 0.7f;
    s->pf[1] = 0.1f;
    s = pc_spec(l, PC_UNARY, SY_OP_RMS_NORM);
    pc_shape(s->a, 64, 5, 1, 1);
    s->pf[0] = 1e-5f;
    s = pc_spec(l, PC_UNARY, SY_OP_SILU);
    pc_shape(s->a, 50, 3, 1, 1);
    s = pc_spec(l, PC_UNARY, SY_OP_GELU);
    pc_shape(s->a, 50, 3, 1, 1);
    s = pc_spec(l, PC_UNARY, SY_OP_SOFTMAX);
    pc_shape(s->a, 9, 4, 1, 1);
    s->pf[0] = 0.5f;
    s = pc_spec(l, PC_UNARY, SY_OP_SOFTMAX);
    pc_shape(s->a, 9, 4, 1, 1);
    s->pf[0] = 0.5f;
    s->pi[0] = 1; /* causal */
    s->pi[1] = 5; /* n_past */
    s = pc_spec(l, PC_UNARY, SY_OP_SOFTMAX);
    pc_shape(s->a, 9, 4, 1, 1);
    s->pf[0] = 1.0f;
    s->pi[0] = 1;
    s->pi[1] = 5;
    s->pi[2] = 3; /* window */
    s = pc_spec(l, PC_UNARY, SY_OP_ARGMAX);
    pc_shape(s->a, 40, 5, 1, 1);

    for (int mode = 0; mode < 2; mode++) {
        s = pc_spec(l, PC_ROPE, SY_OP_ROPE);
        pc_shape(s->a, 16, 3, 4, 1);
        s->pi[0] = mode;
        s->pi[1] = 16;
        s->pf[0] = 10000.0f;
    }
    s = pc_spec(l, PC_ROPE, SY_OP_ROPE);
    pc_shape(s->a, 16, 3, 4, 1);
    s->pi[1] = 8;
    s->pf[0] = 500000.0f;
    s->pf[1] = 0.5f;

    static const uint32_t kv_types[] = {SY_DTYPE_F32, SY_DTYPE_F16};
    for (size_t i = 0; i < 2; i++) {
        s = pc_spec(l, PC_ATTENTION, SY_OP_ATTENTION);
        s->dt1 = kv_types[i];
        pc_shape(s->a, 16, 4, 3, 1);
        pc_shape(s->b, 16, 2, 8, 1);
        s->pi[0] = 5;
        s->pf[0] = 0.25f;
    }
    s = pc_spec(l, PC_ATTENTION, SY_OP_ATTENTION);
    s->dt1 = SY_DTYPE_F16;
    pc_shape(s->a, 16, 4, 3, 1);
    pc_shape(s->b, 16, 2, 8, 1);
    s->pi[0] = 5;
    s->pi[1] = 4;
    s->pf[0] = 0.25f;
    /* Quantised KV caches: head rows of whole 32-element blocks. */
    static const uint32_t kv_quants[] = {SY_DTYPE_Q8_0, SY_DTYPE_Q4_0};
    for (size_t i = 0; i < 2; i++) {
        s = pc_spec(l, PC_ATTENTION, SY_OP_ATTENTION);
        s->dt1 = kv_quants[i];
        pc_shape(s->a, 32, 4, 3, 1);
        pc_shape(s->b, 32, 2, 8, 1);
        s->pi[0] = 5;
        s->pf[0] = 0.25f;
    }

    /* n_past read at run time (ABI 1.3): the whole cache given, its rows
     * past the queries never read. */
    s = pc_spec(l, PC_ATTENTION, SY_OP_ATTENTION);
    s->dt1 = SY_DTYPE_F16;
    pc_shape(s->a, 16, 4, 3, 1);
    pc_shape(s->b, 16, 2, 12, 1);
    s->pi[0] = 5;
    s->pf[0] = 0.25f;
    s->run_time = true;

    static const uint32_t copy_pairs[][2] = {
        {SY_DTYPE_F32, SY_DTYPE_F16},  {SY_DTYPE_F32, SY_DTYPE_BF16}, {SY_DTYPE_F32, SY_DTYPE_Q8_0},
        {SY_DTYPE_F32, SY_DTYPE_Q4_0}, {SY_DTYPE_F32, SY_DTYPE_Q4_1}, {SY_DTYPE_F16, SY_DTYPE_F32},
        {SY_DTYPE_Q8_0, SY_DTYPE_F32}, {SY_DTYPE_Q4_K, SY_DTYPE_F32}, {SY_DTYPE_Q6_K, SY_DTYPE_F32},
    };
    for (size_t i = 0; i < sizeof copy_pairs / sizeof copy_pairs[0]; i++) {
        s = pc_spec(l, PC_COPY, SY_OP_COPY);
        s->dt0 = copy_pairs[i][0];
        s->pi[0] = copy_pairs[i][1];
        pc_shape(s->a, sy_dtype_block_size(s->dt0) == 256 ? 256 : 64, 3, 1, 1);
    }
    s = pc_spec(l, PC_COPY, SY_OP_COPY);
    s->pi[0] = SY_DTYPE_F32;
    pc_shape(s->a, 5, 7, 1, 1);
    s->transposed = true;

    static const uint32_t caches[] = {SY_DTYPE_F32, SY_DTYPE_F16, SY_DTYPE_Q8_0, SY_DTYPE_Q4_0};
    for (size_t i = 0; i < 4; i++) {
        s = pc_spec(l, PC_KV_WRITE, SY_OP_KV_WRITE);
        s->dt0 = caches[i];
        const int64_t d = sy_dtype_is_quantized(caches[i]) ? 32 : 16;
        pc_shape(s->a, d, 2, 8, 1);
        pc_shape(s->b, d, 2, 3, 1);
        s->pi[0] = 2;
    }
    s = pc_spec(l, PC_KV_WRITE, SY_OP_KV_WRITE); /* the start read at run time (ABI 1.3) */
    s->dt0 = SY_DTYPE_F16;
    pc_shape(s->a, 16, 2, 8, 1);
    pc_shape(s->b, 16, 2, 3, 1);
    s->pi[0] = 4;
    s->run_time = true;

    pc_spec(l, PC_OVERSIZE, SY_OP_ADD);
}

uint32_t pcheck_case_count(void)
{
    pcheck_specs *l = malloc(sizeof *l);
    if (!l)
        return 0;
    pc_build_specs(l);
    const uint32_t n = l->n;
    free(l);
    return n;
}

/* ------------------------------------------------------------- the data */

/* A random binary16 value with magnitude in [2^(emin-15), 2^(emax-14)). */
static uint16_t pc_rand_f16(uint64_t *rng, unsigned emin, unsigned emax, bool negative_too)
{
    const uint64_t r = pcheck_rand(rng);
    const unsigned e = emin + (unsigned)((r >> 20) % (emax - emin + 1));
    const unsigned sign = negative_too ? (unsigned)(r >> 63) : 0;
    return (uint16_t)((sign << 15) | (e << 10) | (unsigned)((r >> 32) & 0x3ff));
}

static void pc_put_f16(unsigned char *p, uint16_t v)
{
    memcpy(p, &v, sizeof v);
}

/* Fills |n| elements of |dtype| at |dst|: values in about [-1, 1], block
 * scales small and positive, everything finite. */
static void pc_fill(uint64_t *rng, uint32_t dtype, void *dst, int64_t n)
{
    unsigned char *p = dst;
    switch (dtype) {
    case SY_DTYPE_F32:
        for (int64_t i = 0; i < n; i++)
            ((float *)dst)[i] = pcheck_uniform(rng, -1.0f, 1.0f);
        return;
    case SY_DTYPE_F16:
        for (int64_t i = 0; i < n; i++)
            pc_put_f16(p + 2 * i, pc_rand_f16(rng, 9, 14, true));
        return;
    case SY_DTYPE_BF16:
        for (int64_t i = 0; i < n; i++) {
            const uint64_t r = pcheck_rand(rng);
            const unsigned e = 121 + (unsigned)((r >> 20) % 6);
            const uint16_t v = (uint16_t)(((unsigned)(r >> 63) << 15) | (e << 7) |
                                          (unsigned)((r >> 32) & 0x7f));
            pc_put_f16(p + 2 * i, v);
        }
        return;
    case SY_DTYPE_I32:
        for (int64_t i = 0; i < n; i++)
            ((int32_t *)dst)[i] = (int32_t)(pcheck_rand(rng) % 17) - 8;
        return;
    default:
        break;
    }
    /* Block types: random quant bits, then sane scales. */
    const int64_t nblocks = n / sy_dtype_block_size(dtype);
    const uint32_t bsz = sy_dtype_type_size(dtype);
    for (int64_t i = 0; i < nblocks * bsz; i++)
        p[i] = (unsigned char)(pcheck_rand(rng) >> 56);
    for (int64_t b = 0; b < nblocks; b++) {
        unsigned char *blk = p + b * bsz;
        switch (dtype) {
        case SY_DTYPE_Q6_K:
            pc_put_f16(blk + 208, pc_rand_f16(rng, 4, 6, false));
            break;
        case SY_DTYPE_Q4_K:
        case SY_DTYPE_Q5_K:
            pc_put_f16(blk, pc_rand_f16(rng, 4, 6, false));
            pc_put_f16(blk + 2, pc_rand_f16(rng, 4, 6, false));
            break;
        case SY_DTYPE_Q4_1:
        case SY_DTYPE_Q5_1:
            pc_put_f16(blk, pc_rand_f16(rng, 6, 9, false));
            pc_put_f16(blk + 2, pc_rand_f16(rng, 8, 11, true));
            break;
        default: /* Q8_0, Q4_0, Q5_0 */
            pc_put_f16(blk, pc_rand_f16(rng, dtype == SY_DTYPE_Q8_0 ? 4 : 6,
                                        dtype == SY_DTYPE_Q8_0 ? 7 : 9, false));
            break;
        }
    }
}

sy_status pcheck_to_f32(uint32_t dtype, const void *src, int64_t n, float *dst)
{
    if (dtype == SY_DTYPE_F32) {
        memcpy(dst, src, (size_t)n * sizeof(float));
        return SY_OK;
    }
    if (dtype == SY_DTYPE_I32) {
        for (int64_t i = 0; i < n; i++)
            dst[i] = (float)((const int32_t *)src)[i];
        return SY_OK;
    }
    sy_graph *g = NULL;
    sy_status st = sy_graph_create(&g);
    if (st != SY_OK)
        return st;
    const int64_t ne[1] = {n};
    sy_tensor *in = NULL, *out = NULL;
    const sy_op_params p = {.i = {SY_DTYPE_F32}};
    st = sy_graph_add_tensor(g, "src", (sy_dtype)dtype, 1, ne, SY_ROLE_INPUT, (void *)src, &in);
    if (st == SY_OK)
        st = sy_graph_add_node(g, SY_OP_COPY, "to_f32", &in, 1, &p, &out);
    if (st == SY_OK)
        st = sy_graph_mark_output(g, out);
    if (st == SY_OK)
        st = sy_graph_set_host_data(g, out, dst);
    if (st == SY_OK)
        st = sy_graph_freeze(g);
    if (st == SY_OK)
        st = sy_graph_run_reference(g);
    sy_graph_destroy(g);
    return st;
}

/* ----------------------------------------------------------- the graphs */

typedef struct pc_builder {
    pcheck_case *c;
    uint64_t *rng;
    sy_status st;
    char *err;
    size_t err_size;
} pc_builder;

static void *pc_hold(pc_builder *b, size_t bytes)
{
    pcheck_case *c = b->c;
    if (b->st != SY_OK)
        return NULL;
    void *p = NULL;
    if (c->n_hold == sizeof c->hold / sizeof c->hold[0] ||
        posix_memalign(&p, 64, bytes ? bytes : 1) != 0) {
        b->st = SY_E_NO_MEMORY;
        snprintf(b->err, b->err_size, "out of host memory");
        return NULL;
    }
    memset(p, 0, bytes ? bytes : 1);
    c->hold[c->n_hold++] = p;
    return p;
}

static uint32_t pc_dims(const int64_t *ne)
{
    uint32_t n = 1;
    for (uint32_t d = 1; d < 4; d++)
        if (ne[d] != 1)
            n = d + 1;
    return n;
}

/* Adds a leaf of |dtype| and shape |ne|; random contents unless |fill| is
 * false (then no host data: supports-only cases). */
static sy_tensor *pc_leaf(pc_builder *b, const char *name, uint32_t dtype, const int64_t *ne,
                          sy_tensor_role role, bool fill)
{
    if (b->st != SY_OK)
        return NULL;
    const int64_t n = ne[0] * ne[1] * ne[2] * ne[3];
    void *data = NULL;
    if (fill) {
        const size_t bytes = (size_t)(n / sy_dtype_block_size(dtype) * sy_dtype_type_size(dtype));
        data = pc_hold(b, bytes);
        if (!data)
            return NULL;
        pc_fill(b->rng, dtype, data, n);
    }
    sy_tensor *t = NULL;
    b->st = sy_graph_add_tensor(b->c->g, name, (sy_dtype)dtype, pc_dims(ne), ne, role, data, &t);
    if (b->st != SY_OK)
        snprintf(b->err, b->err_size, "adding '%s': %s", name, sy_graph_last_error(b->c->g));
    return t;
}

static sy_tensor *pc_ids(pc_builder *b, const char *name, int64_t n, int32_t hi)
{
    const int64_t ne[4] = {n, 1, 1, 1};
    sy_tensor *t = pc_leaf(b, name, SY_DTYPE_I32, ne, SY_ROLE_INPUT, true);
    if (t) {
        int32_t *v = sy_graph_host_data(b->c->g, t);
        for (int64_t i = 0; i < n; i++)
            v[i] = (int32_t)(pcheck_rand(b->rng) % (uint64_t)hi);
    }
    return t;
}

static sy_tensor *pc_node(pc_builder *b, uint32_t op, const char *name, sy_tensor **in,
                          uint32_t n, const sy_op_params *p)
{
    if (b->st != SY_OK)
        return NULL;
    sy_tensor *out = NULL;
    b->st = sy_graph_add_node(b->c->g, (sy_op)op, name, in, n, p, &out);
    if (b->st != SY_OK)
        snprintf(b->err, b->err_size, "adding node '%s': %s", name, sy_graph_last_error(b->c->g));
    return out;
}

static void pc_name(pcheck_case *c, const pcheck_spec *s)
{
    const char *op = sy_op_name((sy_op)s->op);
    switch (s->kind) {
    case PC_MATMUL:
        snprintf(c->name, sizeof c->name, "matmul %s x %s%s K=%lld N=%lld M=%lld%s",
                 sy_dtype_name(s->dt0), sy_dtype_name(s->dt1), s->transposed ? " (transposed)" : "",
                 (long long)s->a[0], (long long)s->a[1], (long long)s->b[1],
                 s->b[2] > 1 ? " batch 2/4" : "");
        break;
    case PC_GET_ROWS:
        snprintf(c->name, sizeof c->name, "get_rows %s [%lld,%lld] 5 ids", sy_dtype_name(s->dt0),
                 (long long)s->a[0], (long long)s->a[1]);
        break;
    case PC_BINARY:
        snprintf(c->name, sizeof c->name, "%s f32 [%lld,%lld,%lld] by [%lld,%lld,%lld]", op,
                 (long long)s->a[0], (long long)s->a[1], (long long)s->a[2], (long long)s->b[0],
                 (long long)s->b[1], (long long)s->b[2]);
        break;
    case PC_UNARY:
        snprintf(c->name, sizeof c->name, "%s f32 [%lld,%lld]%s%s", op, (long long)s->a[0],
                 (long long)s->a[1], s->pi[0] ? " causal" : "", s->pi[2] ? " window" : "");
        break;
    case PC_ROPE:
        snprintf(c->name, sizeof c->name, "rope f32 [16,3,4] %s n_rot=%lld%s",
                 s->pi[0] ? "neox" : "normal", (long long)s->pi[1], s->pf[1] ? " scaled" : "");
        break;
    case PC_ATTENTION:
        snprintf(c->name, sizeof c->name, "attention q f32 kv %s gqa 4/2%s%s",
                 sy_dtype_name(s->dt1), s->pi[1] ? " window" : "",
                 s->run_time ? ", n_past at run time" : "");
        break;
    case PC_COPY:
        snprintf(c->name, sizeof c->name, "copy %s to %s%s", sy_dtype_name(s->dt0),
                 sy_dtype_name((uint32_t)s->pi[0]), s->transposed ? " (transposed)" : "");
        break;
    case PC_KV_WRITE:
        snprintf(c->name, sizeof c->name, "kv_write %s cache%s", sy_dtype_name(s->dt0),
                 s->run_time ? ", start at run time" : "");
        break;
    case PC_OVERSIZE:
        snprintf(c->name, sizeof c->name, "add larger than the device's memory");
        break;
    }
}

static void pc_build(pc_builder *b, const pcheck_spec *s, uint64_t memory_bytes)
{
    pcheck_case *c = b->c;
    sy_op_params p;
    memset(&p, 0, sizeof p);
    for (int i = 0; i < 3; i++)
        p.i[i] = s->pi[i];
    p.f[0] = s->pf[0];
    p.f[1] = s->pf[1];
    sy_tensor *in[4] = {NULL, NULL, NULL, NULL};
    sy_tensor *out = NULL;
    /* The run-time start or n_past: an I32 input holding pi[0]. */
    sy_tensor *at = NULL;
    if (s->run_time) {
        const int64_t one[4] = {1, 1, 1, 1};
        at = pc_leaf(b, "at", SY_DTYPE_I32, one, SY_ROLE_INPUT, true);
        if (at)
            *(int32_t *)sy_graph_host_data(b->c->g, at) = (int32_t)s->pi[0];
        p.i[0] = 0;
    }
    switch (s->kind) {
    case PC_MATMUL:
        in[0] = pc_leaf(b, "w", s->dt0, s->a, SY_ROLE_WEIGHT, true);
        if (s->transposed) {
            const int64_t t[4] = {s->b[1], s->b[0], 1, 1};
            sy_tensor *xt = pc_leaf(b, "xt", s->dt1, t, SY_ROLE_INPUT, true);
            in[1] = pc_node(b, SY_OP_TRANSPOSE, "x", &xt, 1, NULL);
        } else {
            in[1] = pc_leaf(b, "x", s->dt1, s->b, SY_ROLE_INPUT, true);
        }
        out = pc_node(b, SY_OP_MATMUL, "mm", in, 2, NULL);
        break;
    case PC_GET_ROWS:
        in[0] = pc_leaf(b, "table", s->dt0, s->a, SY_ROLE_WEIGHT, true);
        in[1] = pc_ids(b, "ids", s->b[0], (int32_t)s->a[1]);
        out = pc_node(b, s->op, "rows", in, 2, NULL);
        break;
    case PC_BINARY:
        in[0] = pc_leaf(b, "a", SY_DTYPE_F32, s->a, SY_ROLE_INPUT, true);
        in[1] = pc_leaf(b, "b", SY_DTYPE_F32, s->b, SY_ROLE_INPUT, true);
        out = pc_node(b, s->op, "out", in, 2, NULL);
        break;
    case PC_UNARY:
        in[0] = pc_leaf(b, "x", SY_DTYPE_F32, s->a, SY_ROLE_INPUT, true);
        out = pc_node(b, s->op, "out", in, 1, &p);
        break;
    case PC_ROPE:
        in[0] = pc_leaf(b, "x", SY_DTYPE_F32, s->a, SY_ROLE_INPUT, true);
        in[1] = pc_ids(b, "pos", s->a[2], 100);
        out = pc_node(b, s->op, "out", in, 2, &p);
        break;
    case PC_ATTENTION:
        in[0] = pc_leaf(b, "q", SY_DTYPE_F32, s->a, SY_ROLE_INPUT, true);
        in[1] = pc_leaf(b, "k", s->dt1, s->b, SY_ROLE_KV, true);
        in[2] = pc_leaf(b, "v", s->dt1, s->b, SY_ROLE_KV, true);
        in[3] = at;
        out = pc_node(b, s->op, "out", in, at ? 4 : 3, &p);
        break;
    case PC_COPY:
        if (s->transposed) {
            const int64_t t[4] = {s->a[1], s->a[0], 1, 1};
            sy_tensor *src = pc_leaf(b, "src", s->dt0, t, SY_ROLE_INPUT, true);
            in[0] = pc_node(b, SY_OP_TRANSPOSE, "view", &src, 1, NULL);
        } else {
            in[0] = pc_leaf(b, "src", s->dt0, s->a, SY_ROLE_INPUT, true);
        }
        out = pc_node(b, s->op, "out", in, 1, &p);
        break;
    case PC_KV_WRITE:
        in[0] = pc_leaf(b, "cache", s->dt0, s->a, SY_ROLE_KV, true);
        in[1] = pc_leaf(b, "rows", SY_DTYPE_F32, s->b, SY_ROLE_INPUT, true);
        in[2] = at;
        out = pc_node(b, s->op, "write", in, at ? 3 : 2, &p);
        break;
    case PC_OVERSIZE: {
        /* Rows of 1 MiB, enough of them to pass the device's memory. */
        const uint64_t rows = (memory_bytes ? memory_bytes : ((uint64_t)1 << 40)) / (1u << 20) + 1;
        const int64_t ne[4] = {1 << 18, (int64_t)rows, 1, 1};
        in[0] = pc_leaf(b, "a", SY_DTYPE_F32, ne, SY_ROLE_INPUT, false);
        in[1] = pc_leaf(b, "b", SY_DTYPE_F32, ne, SY_ROLE_INPUT, false);
        out = pc_node(b, s->op, "out", in, 2, NULL);
        c->supports_only = true;
        break;
    }
    }
    if (b->st != SY_OK)
        return;
    c->result = s->kind == PC_KV_WRITE ? in[0] : out;
    if (s->kind != PC_KV_WRITE && !c->supports_only) {
        void *host = pc_hold(b, (size_t)sy_tensor_nbytes(out));
        if (host) {
            b->st = sy_graph_set_host_data(c->g, out, host);
            if (b->st == SY_OK)
                b->st = sy_graph_mark_output(c->g, out);
        }
    }
    if (s->kind == PC_KV_WRITE) {
        const size_t bytes = (size_t)sy_tensor_nbytes(in[0]);
        c->result_init = pc_hold(b, bytes);
        if (c->result_init)
            memcpy(c->result_init, sy_graph_host_data(c->g, in[0]), bytes);
    }
}

bool pcheck_case_build(uint32_t i, uint64_t *rng, uint64_t memory_bytes, pcheck_case *c,
                       char *err, size_t err_size)
{
    memset(c, 0, sizeof *c);
    pcheck_specs *l = malloc(sizeof *l);
    if (!l) {
        snprintf(err, err_size, "out of host memory");
        return false;
    }
    pc_build_specs(l);
    if (i >= l->n) {
        free(l);
        snprintf(err, err_size, "no case %u", i);
        return false;
    }
    const pcheck_spec spec = l->s[i];
    free(l);
    pc_name(c, &spec);
    pc_builder b = {.c = c, .rng = rng, .st = SY_OK, .err = err, .err_size = err_size};
    b.st = sy_graph_create(&c->g);
    if (b.st == SY_OK)
        pc_build(&b, &spec, memory_bytes);
    if (b.st == SY_OK) {
        b.st = sy_graph_freeze(c->g);
        if (b.st != SY_OK)
            snprintf(err, err_size, "freeze: %s", sy_graph_last_error(c->g));
    }
    if (b.st != SY_OK) {
        char name[96];
        memcpy(name, c->name, sizeof name);
        pcheck_case_free(c);
        memcpy(c->name, name, sizeof name);
        return false;
    }
    c->node = sy_graph_node(c->g, sy_graph_node_count(c->g) - 1);
    return true;
}

void pcheck_case_free(pcheck_case *c)
{
    sy_graph_destroy(c->g);
    for (uint32_t i = 0; i < c->n_hold; i++)
        free(c->hold[i]);
    memset(c, 0, sizeof *c);
}
