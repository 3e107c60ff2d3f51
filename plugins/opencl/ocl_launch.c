/* Enqueues the kernels of one node: argument setup, work sizes and the
 * small preparations some ops need (activations converted for matmul, the
 * KV_WRITE destination view, the GET_ROWS error flag).
 *
 * Tensors reach a kernel as (cl_mem, byte offset, byte strides, extents);
 * the kernels do their own address arithmetic, so views need no
 * sub-buffers.  A launch the device refuses for lack of resources returns
 * SY_E_UNSUPPORTED, which makes the caller run the node on the host. */
#include <stdio.h>
#include <string.h>

#include "ocl_internal.h"

/* A tensor as the kernels see it. */
typedef struct ocl_ref {
    cl_mem mem;
    cl_ulong off;
    cl_ulong4 nb;
    cl_long4 ne;
    uint32_t dtype;
} ocl_ref;

/* Kernel arguments set in order; the first failure sticks. */
typedef struct ocl_args {
    cl_kernel k;
    cl_uint i;
    cl_int err;
} ocl_args;

static void ocl_arg(ocl_args *a, size_t size, const void *v)
{
    if (a->err == CL_SUCCESS)
        a->err = clSetKernelArg(a->k, a->i, size, v);
    a->i++;
}

static void ocl_arg_int(ocl_args *a, cl_int v) { ocl_arg(a, sizeof v, &v); }
static void ocl_arg_long(ocl_args *a, cl_long v) { ocl_arg(a, sizeof v, &v); }
static void ocl_arg_float(ocl_args *a, cl_float v) { ocl_arg(a, sizeof v, &v); }
static void ocl_arg_local(ocl_args *a, size_t bytes) { ocl_arg(a, bytes, NULL); }

static void ocl_arg_ref(ocl_args *a, const ocl_ref *r)
{
    ocl_arg(a, sizeof r->mem, &r->mem);
    ocl_arg(a, sizeof r->off, &r->off);
    ocl_arg(a, sizeof r->nb, &r->nb);
    ocl_arg(a, sizeof r->ne, &r->ne);
}

/* A run-time position (an I32 the kernel reads when it runs) as (base,
 * byte offset), or a NULL base and 0 where |r| is NULL: the kernel then
 * takes the position from its other arguments. */
static void ocl_arg_position(ocl_args *a, const ocl_ref *r)
{
    const cl_mem none = NULL;
    const cl_ulong zero = 0;
    ocl_arg(a, sizeof none, r ? &r->mem : &none);
    ocl_arg(a, sizeof zero, r ? &r->off : &zero);
}

/* Bytes an element address must be a multiple of for the kernels' loads. */
static uint64_t ocl_align_of(uint32_t dtype)
{
    switch (dtype) {
    case SY_DTYPE_F32:
    case SY_DTYPE_I32:
        return 4;
    case SY_DTYPE_F16:
    case SY_DTYPE_BF16:
        return 2;
    default:
        return 1;
    }
}

/* Resolves |t| into a kernel reference on |d|. */
static sy_status ocl_resolve(const ocl_state *s, const ocl_dev *d, const sy_tensor *t,
                             ocl_ref *out, const char **why)
{
    const ocl_buffer *b = t->buffer;
    if (!b || b->dev != (uint32_t)(d - s->devs) || t->offset > b->size) {
        *why = "a tensor is not in a buffer of this device";
        return SY_E_INVALID_ARG;
    }
    const uint64_t a = ocl_align_of(t->dtype);
    if (t->offset % a || t->nb[0] % a || t->nb[1] % a || t->nb[2] % a || t->nb[3] % a) {
        *why = "a tensor is not aligned to its element size";
        return SY_E_UNSUPPORTED;
    }
    if (sy_tensor_nbytes(t) > b->size - t->offset) {
        *why = "a tensor extends past the end of its buffer";
        return SY_E_INVALID_ARG;
    }
    out->mem = b->mem;
    out->off = t->offset;
    for (int i = 0; i < 4; i++) {
        out->nb.s[i] = t->nb[i];
        out->ne.s[i] = t->ne[i];
    }
    out->dtype = t->dtype;
    return SY_OK;
}

/* A contiguous F32 tensor of extents |ne| at the start of the scratch. */
static void ocl_scratch_ref(const ocl_dev *d, const int64_t ne[4], ocl_ref *out)
{
    out->mem = d->scratch;
    out->off = 0;
    out->dtype = SY_DTYPE_F32;
    uint64_t stride = sizeof(float);
    for (int i = 0; i < 4; i++) {
        out->ne.s[i] = ne[i];
        out->nb.s[i] = stride;
        stride *= (uint64_t)ne[i];
    }
}

static size_t ocl_next_pow2(uint64_t v)
{
    size_t p = 1;
    while (p < v && p < ((size_t)1 << 30))
        p <<= 1;
    return p;
}

/* Work-group size for a reduction kernel over |work| items: a power of two
 * no larger than the kernel, the device or OCL_MAX_WG allow. */
static size_t ocl_group(const ocl_dev *d, ocl_kernel_id k, uint64_t work)
{
    size_t limit = d->kernel_wg[k] < OCL_MAX_WG ? d->kernel_wg[k] : OCL_MAX_WG;
    size_t want = ocl_next_pow2(work ? work : 1);
    size_t ls = 1;
    while (ls * 2 <= limit && ls * 2 <= want)
        ls *= 2;
    return ls;
}

static sy_status ocl_enqueue(const ocl_state *s, ocl_dev *d, ocl_kernel_id k, const ocl_args *a,
                             cl_uint dims, const size_t *global, const size_t *local,
                             const char **why)
{
    if (a->err != CL_SUCCESS) {
        ocl_log(s, SY_LOG_ERROR, "%s: setting argument %u failed: %s", d->desc.name, a->i - 1,
                ocl_error_name(a->err));
        *why = "a kernel argument was refused";
        return SY_E_DEVICE;
    }
    for (cl_uint i = 0; i < dims; i++)
        if (global[i] == 0)
            return SY_OK;
    if ((int)k == s->failing_kernel) {
        ocl_log(s, SY_LOG_WARN, "%s: kernel %s refused by SWITCHYARD_OPENCL_FAIL_KERNEL",
                d->desc.name, ocl_kernel_name(k));
        *why = OCL_WHY_LAUNCH_REFUSED;
        return SY_E_UNSUPPORTED;
    }
    cl_event ev = NULL;
    cl_int err = clEnqueueNDRangeKernel(d->queue, d->kernels[k], dims, NULL, global, local, 0, NULL,
                                        d->profile ? &ev : NULL);
    if (err == CL_SUCCESS) {
        if (ev)
            ocl_profile_keep((ocl_state *)s, d, k, ev);
        return SY_OK;
    }
    ocl_log(s, SY_LOG_WARN, "%s: enqueueing a kernel failed: %s", d->desc.name,
            ocl_error_name(err));
    if (err == CL_OUT_OF_RESOURCES || err == CL_INVALID_WORK_GROUP_SIZE ||
        err == CL_MEM_OBJECT_ALLOCATION_FAILURE || err == CL_INVALID_WORK_ITEM_SIZE) {
        *why = OCL_WHY_LAUNCH_REFUSED;
        return SY_E_UNSUPPORTED;
    }
    *why = "enqueueing a kernel failed";
    return SY_E_DEVICE;
}

/* ------------------------------------------------------------ copy family */

/* Converts |src| (any dtype, any layout) into |dst| of the same extents.
 * |dst| is dense in its block dtypes.  Picks the right copy kernel.  With
 * |start| (a run-time KV_WRITE start, an I32), the kernel moves |dst| down
 * that many rows of dim 2, once it has checked the value is in
 * [0, |limit|] (else it raises the error flag and writes nothing). */
static sy_status ocl_copy_at(ocl_state *s, ocl_dev *d, const ocl_ref *src, const ocl_ref *dst,
                             const ocl_ref *start, int64_t limit, const char **why)
{
    sy_status st = ocl_program_ensure(s, d, OCL_FAM_MEMORY);
    if (st != SY_OK) {
        *why = "the OpenCL program 'memory' failed to build";
        return st;
    }
    const size_t rows1 = (size_t)src->ne.s[1], rows23 = (size_t)(src->ne.s[2] * src->ne.s[3]);
    const bool sq = sy_dtype_is_quantized(src->dtype), dq = sy_dtype_is_quantized(dst->dtype);
    ocl_kernel_id k;
    size_t g0;
    if (src->dtype == dst->dtype && sq) {
        k = OCL_K_COPY_ROWS_RAW;
        g0 = (size_t)(src->ne.s[0] / sy_dtype_block_size(src->dtype) *
                      sy_dtype_type_size(src->dtype));
    } else if (dq) {
        k = OCL_K_COPY_QUANT;
        g0 = (size_t)(src->ne.s[0] / 32);
    } else if (sq) {
        k = OCL_K_COPY_DEQ;
        g0 = (size_t)(src->ne.s[0] / 8);
    } else {
        k = OCL_K_COPY_ELEMS;
        g0 = (size_t)src->ne.s[0];
    }
    ocl_args a = {d->kernels[k], 0, CL_SUCCESS};
    ocl_arg_ref(&a, src);
    if (k != OCL_K_COPY_ROWS_RAW)
        ocl_arg_int(&a, (cl_int)src->dtype);
    ocl_arg_ref(&a, dst);
    if (k == OCL_K_COPY_ROWS_RAW)
        ocl_arg_long(&a, (cl_long)g0);
    else
        ocl_arg_int(&a, (cl_int)dst->dtype);
    ocl_arg_position(&a, start);
    ocl_arg_long(&a, (cl_long)limit);
    ocl_arg(&a, sizeof d->flag, &d->flag);
    const size_t global[3] = {g0, rows1, rows23};
    st = ocl_enqueue(s, d, k, &a, 3, global, NULL, why);
    if (st == SY_OK && start)
        d->flag_armed = true;
    return st;
}

static sy_status ocl_copy(ocl_state *s, ocl_dev *d, const ocl_ref *src, const ocl_ref *dst,
                          const char **why)
{
    return ocl_copy_at(s, d, src, dst, NULL, 0, why);
}

static sy_status ocl_launch_copy(ocl_state *s, ocl_dev *d, const sy_node *node, const char **why)
{
    ocl_ref src, dst;
    sy_status st = ocl_resolve(s, d, node->inputs[0], &src, why);
    if (st == SY_OK)
        st = ocl_resolve(s, d, node->output, &dst, why);
    if (st != SY_OK)
        return st;
    return ocl_copy(s, d, &src, &dst, why);
}

static sy_status ocl_launch_kv_write(ocl_state *s, ocl_dev *d, const sy_node *node,
                                     const char **why)
{
    const sy_tensor *rows = node->inputs[1], *cache = node->output;
    const bool run_time = sy_op_has_run_time_position(node);
    const int64_t start = run_time ? 0 : node->params.i[0];
    const int64_t limit = node->inputs[0]->ne[2] - rows->ne[2];
    if (start < 0 || start > limit) {
        *why = "kv_write rows past the end of the cache";
        return SY_E_SHAPE;
    }
    ocl_ref src, dst, at;
    sy_status st = ocl_resolve(s, d, rows, &src, why);
    if (st == SY_OK)
        st = ocl_resolve(s, d, cache, &dst, why);
    if (st == SY_OK && run_time)
        st = ocl_resolve(s, d, node->inputs[2], &at, why);
    if (st != SY_OK)
        return st;
    /* The rows land at cache rows start .. start+T-1: a view of the cache
     * with the rows' extents (the kernel moves it to a run-time start). */
    dst.off += (cl_ulong)start * dst.nb.s[2];
    for (int i = 0; i < 4; i++)
        dst.ne.s[i] = rows->ne[i];
    return ocl_copy_at(s, d, &src, &dst, run_time ? &at : NULL, limit, why);
}

static sy_status ocl_launch_get_rows(ocl_state *s, ocl_dev *d, const sy_node *node,
                                     const char **why)
{
    ocl_ref table, ids, out;
    sy_status st = ocl_resolve(s, d, node->inputs[0], &table, why);
    if (st == SY_OK)
        st = ocl_resolve(s, d, node->inputs[1], &ids, why);
    if (st == SY_OK)
        st = ocl_resolve(s, d, node->output, &out, why);
    if (st != SY_OK)
        return st;
    const bool q = sy_dtype_is_quantized(table.dtype);
    const ocl_kernel_id k = q ? OCL_K_GET_ROWS_DEQ : OCL_K_GET_ROWS_ELEMS;
    ocl_args a = {d->kernels[k], 0, CL_SUCCESS};
    ocl_arg_ref(&a, &table);
    ocl_arg_int(&a, (cl_int)table.dtype);
    ocl_arg_ref(&a, &ids);
    ocl_arg_ref(&a, &out);
    ocl_arg(&a, sizeof d->flag, &d->flag);
    const size_t global[2] = {(size_t)(q ? table.ne.s[0] / 8 : table.ne.s[0]),
                              (size_t)ids.ne.s[0]};
    st = ocl_enqueue(s, d, k, &a, 2, global, NULL, why);
    if (st == SY_OK)
        d->flag_armed = true;
    return st;
}

/* --------------------------------------------------------------- matmul */

static const ocl_kernel_id ocl_mv_kernels[SY_DTYPE_COUNT] = {
    [SY_DTYPE_F32] = OCL_K_MV_F32,   [SY_DTYPE_F16] = OCL_K_MV_F16,
    [SY_DTYPE_BF16] = OCL_K_MV_BF16, [SY_DTYPE_I32] = OCL_K_COUNT,
    [SY_DTYPE_Q8_0] = OCL_K_MV_Q8_0, [SY_DTYPE_Q4_0] = OCL_K_MV_Q4_0,
    [SY_DTYPE_Q4_1] = OCL_K_MV_Q4_1, [SY_DTYPE_Q4_K] = OCL_K_MV_Q4_K,
    [SY_DTYPE_Q5_K] = OCL_K_MV_Q5_K, [SY_DTYPE_Q6_K] = OCL_K_MV_Q6_K,
    [SY_DTYPE_Q5_0] = OCL_K_MV_Q5_0, [SY_DTYPE_Q5_1] = OCL_K_MV_Q5_1,
};

static const ocl_kernel_id ocl_mm_kernels[SY_DTYPE_COUNT] = {
    [SY_DTYPE_F32] = OCL_K_MM_F32,   [SY_DTYPE_F16] = OCL_K_MM_F16,
    [SY_DTYPE_BF16] = OCL_K_MM_BF16, [SY_DTYPE_I32] = OCL_K_COUNT,
    [SY_DTYPE_Q8_0] = OCL_K_MM_Q8_0, [SY_DTYPE_Q4_0] = OCL_K_MM_Q4_0,
    [SY_DTYPE_Q4_1] = OCL_K_MM_Q4_1, [SY_DTYPE_Q4_K] = OCL_K_MM_Q4_K,
    [SY_DTYPE_Q5_K] = OCL_K_MM_Q5_K, [SY_DTYPE_Q6_K] = OCL_K_MM_Q6_K,
    [SY_DTYPE_Q5_0] = OCL_K_MM_Q5_0, [SY_DTYPE_Q5_1] = OCL_K_MM_Q5_1,
};

static sy_status ocl_launch_matmul(ocl_state *s, ocl_dev *d, const sy_node *node,
                                   const char **why)
{
    const sy_tensor *w = node->inputs[0], *x = node->inputs[1];
    if (w->dtype >= SY_DTYPE_COUNT || ocl_mv_kernels[w->dtype] == OCL_K_COUNT) {
        *why = "no matmul kernel for this weight dtype";
        return SY_E_UNSUPPORTED;
    }
    ocl_ref wr, xr, yr;
    sy_status st = ocl_resolve(s, d, w, &wr, why);
    if (st == SY_OK)
        st = ocl_resolve(s, d, node->output, &yr, why);
    if (st == SY_OK)
        st = ocl_resolve(s, d, x, &xr, why);
    if (st != SY_OK)
        return st;
    if (x->dtype != SY_DTYPE_F32 || x->nb[0] != sizeof(float)) {
        /* The kernels read dense F32 rows: convert anything else once. */
        const uint64_t bytes = (uint64_t)sy_tensor_nelements(x) * sizeof(float);
        st = ocl_scratch_reserve(s, d, bytes ? bytes : 4);
        if (st != SY_OK) {
            *why = "no scratch memory to convert the activations";
            return st;
        }
        ocl_ref conv;
        ocl_scratch_ref(d, x->ne, &conv);
        st = ocl_copy(s, d, &xr, &conv, why);
        if (st != SY_OK)
            return st;
        xr = conv;
    }
    const int64_t K = w->ne[0], N = w->ne[1], M = x->ne[1];
    const size_t batches = (size_t)(x->ne[2] * x->ne[3]);
    const ocl_kernel_id mm = ocl_mm_kernels[w->dtype];
    /* CPU runtimes take the row kernel for batches too: eight columns per
     * dequantized row chunk beat local-memory tiles there (2.5x on PoCL). */
    if (!d->row_matvec && M > OCL_MV_MAX_COLUMNS && K % 32 == 0 && d->kernel_wg[mm] >= 256) {
        ocl_args a = {d->kernels[mm], 0, CL_SUCCESS};
        ocl_arg_ref(&a, &wr);
        ocl_arg_ref(&a, &xr);
        ocl_arg_ref(&a, &yr);
        const size_t global[3] = {16 * (size_t)((N + 63) / 64), 16 * (size_t)((M + 63) / 64),
                                  batches};
        const size_t local[3] = {16, 16, 1};
        return ocl_enqueue(s, d, mm, &a, 3, global, local, why);
    }
    const ocl_kernel_id mv = ocl_mv_kernels[w->dtype];
    if (d->row_matvec) {
        /* The row kernels follow the group kernels in the same order. */
        const ocl_kernel_id mvr = (ocl_kernel_id)(mv + (OCL_K_MVR_F32 - OCL_K_MV_F32));
        ocl_args a = {d->kernels[mvr], 0, CL_SUCCESS};
        ocl_arg_ref(&a, &wr);
        ocl_arg_ref(&a, &xr);
        ocl_arg_ref(&a, &yr);
        /* The runtime's choice of work-group unless one is set
         * (SWITCHYARD_OPENCL_MATVEC_WG): then rows are padded to whole
         * groups, and the kernel skips the rows past N. */
        const size_t ls = s->matvec_wg ? ocl_group(d, mvr, s->matvec_wg) : 0;
        const size_t rows = ls ? ((size_t)N + ls - 1) / ls * ls : (size_t)N;
        const size_t global[3] = {rows, batches, (size_t)((M + OCL_MV_M - 1) / OCL_MV_M)};
        const size_t local[3] = {ls, 1, 1};
        return ocl_enqueue(s, d, mvr, &a, 3, global, ls ? local : NULL, why);
    }
    const size_t ls = ocl_group(d, mv, s->matvec_wg ? s->matvec_wg : (uint64_t)(K + 7) / 8);
    ocl_args a = {d->kernels[mv], 0, CL_SUCCESS};
    ocl_arg_ref(&a, &wr);
    ocl_arg_ref(&a, &xr);
    ocl_arg_ref(&a, &yr);
    ocl_arg_local(&a, sizeof(float) * OCL_MV_M * ls);
    const size_t global[3] = {ls * (size_t)N, batches, (size_t)((M + OCL_MV_M - 1) / OCL_MV_M)};
    const size_t local[3] = {ls, 1, 1};
    return ocl_enqueue(s, d, mv, &a, 3, global, local, why);
}

/* ----------------------------------------------------------------- rows */

static sy_status ocl_launch_row_op(ocl_state *s, ocl_dev *d, const sy_node *node,
                                   const char **why)
{
    ocl_ref x, y;
    sy_status st = ocl_resolve(s, d, node->inputs[0], &x, why);
    if (st == SY_OK)
        st = ocl_resolve(s, d, node->output, &y, why);
    if (st != SY_OK)
        return st;
    const sy_tensor *t = node->inputs[0];
    const size_t rows = (size_t)(t->ne[1] * t->ne[2] * t->ne[3]);
    ocl_kernel_id k;
    switch (node->op) {
    case SY_OP_RMS_NORM:
        k = OCL_K_RMS_NORM;
        break;
    case SY_OP_SOFTMAX:
        k = OCL_K_SOFTMAX;
        break;
    default:
        k = OCL_K_ARGMAX;
        break;
    }
    const size_t ls = ocl_group(d, k, (uint64_t)t->ne[0]);
    ocl_args a = {d->kernels[k], 0, CL_SUCCESS};
    ocl_arg_ref(&a, &x);
    ocl_arg_ref(&a, &y);
    size_t n_rows = rows;
    if (node->op == SY_OP_RMS_NORM) {
        ocl_arg_float(&a, node->params.f[0]);
        ocl_arg_local(&a, ls * (d->fp64 ? sizeof(cl_double) : sizeof(cl_float)));
    } else if (node->op == SY_OP_SOFTMAX) {
        ocl_arg_float(&a, node->params.f[0]);
        ocl_arg_int(&a, node->params.i[0] != 0);
        ocl_arg_long(&a, node->params.i[1]);
        ocl_arg_long(&a, node->params.i[2]);
        ocl_arg_local(&a, ls * sizeof(cl_float));
    } else {
        ocl_arg_local(&a, ls * sizeof(cl_float));
        ocl_arg_local(&a, ls * sizeof(cl_int));
        n_rows = (size_t)t->ne[1];
    }
    const size_t global[1] = {ls * n_rows};
    const size_t local[1] = {ls};
    return ocl_enqueue(s, d, k, &a, 1, global, local, why);
}

static sy_status ocl_launch_rope(ocl_state *s, ocl_dev *d, const sy_node *node, const char **why)
{
    const sy_tensor *x = node->inputs[0];
    const int64_t mode = node->params.i[0], n_rot = node->params.i[1];
    if ((mode != SY_ROPE_NORMAL && mode != SY_ROPE_NEOX) || n_rot < 2 || n_rot > x->ne[0] ||
        n_rot % 2) {
        *why = "invalid rope mode or n_rot";
        return SY_E_INVALID_ARG;
    }
    ocl_ref xr, pr, yr;
    sy_status st = ocl_resolve(s, d, x, &xr, why);
    if (st == SY_OK)
        st = ocl_resolve(s, d, node->inputs[1], &pr, why);
    if (st == SY_OK)
        st = ocl_resolve(s, d, node->output, &yr, why);
    if (st != SY_OK)
        return st;
    ocl_args a = {d->kernels[OCL_K_ROPE], 0, CL_SUCCESS};
    ocl_arg_ref(&a, &xr);
    ocl_arg_ref(&a, &pr);
    ocl_arg_ref(&a, &yr);
    ocl_arg_int(&a, (cl_int)mode);
    ocl_arg_int(&a, (cl_int)n_rot);
    ocl_arg_float(&a, node->params.f[0]);
    ocl_arg_float(&a, node->params.f[1] != 0.0f ? node->params.f[1] : 1.0f);
    const size_t global[2] = {(size_t)(n_rot / 2 + (x->ne[0] - n_rot)), (size_t)x->ne[2]};
    return ocl_enqueue(s, d, OCL_K_ROPE, &a, 2, global, NULL, why);
}

static sy_status ocl_launch_attention(ocl_state *s, ocl_dev *d, const sy_node *node,
                                      const char **why)
{
    ocl_ref q, k, v, o, np;
    const bool run_time = sy_op_has_run_time_position(node);
    sy_status st = ocl_resolve(s, d, node->inputs[0], &q, why);
    if (st == SY_OK)
        st = ocl_resolve(s, d, node->inputs[1], &k, why);
    if (st == SY_OK)
        st = ocl_resolve(s, d, node->inputs[2], &v, why);
    if (st == SY_OK)
        st = ocl_resolve(s, d, node->output, &o, why);
    if (st == SY_OK && run_time)
        st = ocl_resolve(s, d, node->inputs[3], &np, why);
    if (st != SY_OK)
        return st;
    const int64_t D = q.ne.s[0], Hq = q.ne.s[1], T = q.ne.s[2], S = k.ne.s[2];
    /* Enough work-items for every output dim, and a chunk of keys as long
     * as the cache allows. */
    size_t ls = ocl_group(d, OCL_K_ATTENTION, (uint64_t)(S > D ? S : D));
    while (ls < OCL_MAX_WG && (int64_t)(ls * OCL_ATT_ACC) < D)
        ls *= 2;
    if ((int64_t)(ls * OCL_ATT_ACC) < D || ls > d->kernel_wg[OCL_K_ATTENTION]) {
        *why = "head size too large for the device's work-groups";
        return SY_E_UNSUPPORTED;
    }
    ocl_args a = {d->kernels[OCL_K_ATTENTION], 0, CL_SUCCESS};
    ocl_arg_ref(&a, &q);
    ocl_arg_ref(&a, &k);
    ocl_arg_ref(&a, &v);
    ocl_arg_ref(&a, &o);
    ocl_arg_int(&a, (cl_int)k.dtype);
    ocl_arg_int(&a, (cl_int)v.dtype);
    ocl_arg_float(&a, node->params.f[0]);
    ocl_arg_long(&a, node->params.i[0]);
    ocl_arg_long(&a, node->params.i[1]);
    ocl_arg_local(&a, sizeof(cl_float) * (size_t)D);
    ocl_arg_local(&a, sizeof(cl_float) * ls);
    ocl_arg_local(&a, sizeof(cl_float) * ls);
    ocl_arg_position(&a, run_time ? &np : NULL);
    ocl_arg(&a, sizeof d->flag, &d->flag);
    const size_t global[2] = {ls * (size_t)Hq, (size_t)T};
    const size_t local[2] = {ls, 1};
    st = ocl_enqueue(s, d, OCL_K_ATTENTION, &a, 2, global, local, why);
    if (st == SY_OK && run_time)
        d->flag_armed = true;
    return st;
}

/* ---------------------------------------------------------- elementwise */

static sy_status ocl_launch_elementwise(ocl_state *s, ocl_dev *d, const sy_node *node,
                                        const char **why)
{
    ocl_ref in0, in1, out;
    const bool two = node->n_inputs == 2;
    sy_status st = ocl_resolve(s, d, node->inputs[0], &in0, why);
    if (st == SY_OK && two)
        st = ocl_resolve(s, d, node->inputs[1], &in1, why);
    if (st == SY_OK)
        st = ocl_resolve(s, d, node->output, &out, why);
    if (st != SY_OK)
        return st;
    ocl_kernel_id k;
    switch (node->op) {
    case SY_OP_ADD:
    case SY_OP_MUL:
        k = OCL_K_BINARY;
        break;
    case SY_OP_SWIGLU:
    case SY_OP_GEGLU:
        k = OCL_K_GLU;
        break;
    default:
        k = OCL_K_UNARY;
        break;
    }
    ocl_args a = {d->kernels[k], 0, CL_SUCCESS};
    ocl_arg_ref(&a, &in0);
    if (two)
        ocl_arg_ref(&a, &in1);
    ocl_arg_ref(&a, &out);
    switch (node->op) {
    case SY_OP_ADD:
    case SY_OP_SWIGLU:
        ocl_arg_int(&a, 0);
        break;
    case SY_OP_MUL:
    case SY_OP_GEGLU:
        ocl_arg_int(&a, 1);
        break;
    default:
        ocl_arg_int(&a, node->op == SY_OP_SCALE ? 0 : node->op == SY_OP_SILU ? 1 : 2);
        ocl_arg_float(&a, node->params.f[0]);
        ocl_arg_float(&a, node->params.f[1]);
        break;
    }
    const size_t global[3] = {(size_t)in0.ne.s[0], (size_t)in0.ne.s[1],
                              (size_t)(in0.ne.s[2] * in0.ne.s[3])};
    return ocl_enqueue(s, d, k, &a, 3, global, NULL, why);
}

/* ------------------------------------------------------------- dispatch */

sy_status ocl_launch_node(ocl_state *s, ocl_dev *d, const sy_node *node, const char **out_why)
{
    *out_why = "";
    const ocl_family f = ocl_node_family(node);
    if (f >= OCL_FAM_COUNT) {
        *out_why = "no OpenCL kernel for this op";
        return SY_E_UNSUPPORTED;
    }
    sy_status st = ocl_program_ensure(s, d, f);
    if (st != SY_OK) {
        *out_why = "its OpenCL program failed to build";
        return SY_E_UNSUPPORTED;
    }
    switch (node->op) {
    case SY_OP_MATMUL:
        return ocl_launch_matmul(s, d, node, out_why);
    case SY_OP_RMS_NORM:
    case SY_OP_SOFTMAX:
    case SY_OP_ARGMAX:
        return ocl_launch_row_op(s, d, node, out_why);
    case SY_OP_ROPE:
        return ocl_launch_rope(s, d, node, out_why);
    case SY_OP_ATTENTION:
        return ocl_launch_attention(s, d, node, out_why);
    case SY_OP_COPY:
        return ocl_launch_copy(s, d, node, out_why);
    case SY_OP_KV_WRITE:
        return ocl_launch_kv_write(s, d, node, out_why);
    case SY_OP_GET_ROWS:
        return ocl_launch_get_rows(s, d, node, out_why);
    default:
        return ocl_launch_elementwise(s, d, node, out_why);
    }
}
