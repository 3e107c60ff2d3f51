/* self_test(): builds every kernel program on the device (so a broken
 * driver or compiler shows up here, with its build log, rather than in the
 * middle of a run) and checks both matmul paths against the host's
 * reference kernel on F32 and Q4_0 weights. */
#include <math.h>
#include <stdio.h>
#include <string.h>

#include "ocl_internal.h"

/* A deterministic stream in [-1, 1). */
static float ocl_rand(uint32_t *state)
{
    *state = *state * 1664525u + 1013904223u;
    return (float)(*state >> 8) / (float)(1u << 23) - 1.0f;
}

typedef struct ocl_st_tensor {
    sy_tensor t;
    void *host;  /* host copy: inputs' contents, the output's result */
    void *buf;   /* device buffer */
} ocl_st_tensor;

static void ocl_st_shape(sy_tensor *t, sy_dtype dtype, int64_t ne0, int64_t ne1)
{
    memset(t, 0, sizeof *t);
    t->dtype = dtype;
    t->n_dims = 2;
    t->ne[0] = ne0;
    t->ne[1] = ne1;
    t->ne[2] = t->ne[3] = 1;
    sy_tensor_set_contiguous_strides(t);
}

/* Runs one K x N x M matmul with weights of |wtype| on the device and on
 * the reference and compares. */
static sy_status ocl_st_matmul(ocl_state *s, uint32_t dev, sy_dtype wtype, int64_t m,
                               char *msg, uint32_t msg_size)
{
    enum { K = 256, N = 9 };
    const sy_host *h = s->host;
    ocl_st_tensor tw, tx, ty;
    memset(&tw, 0, sizeof tw);
    memset(&tx, 0, sizeof tx);
    memset(&ty, 0, sizeof ty);
    ocl_st_shape(&tw.t, wtype, K, N);
    ocl_st_shape(&tx.t, SY_DTYPE_F32, K, m);
    ocl_st_shape(&ty.t, SY_DTYPE_F32, N, m);
    ocl_st_tensor *all[3] = {&tw, &tx, &ty};
    float *want = NULL;
    sy_status st = SY_E_NO_MEMORY;
    for (int i = 0; i < 3; i++) {
        all[i]->host = h->alloc(h->ctx, (size_t)sy_tensor_nbytes(&all[i]->t), 64);
        if (!all[i]->host)
            goto out_free;
    }
    want = h->alloc(h->ctx, sizeof(float) * N * (size_t)m, 64);
    if (!want)
        goto out_free;

    uint32_t seed = 2024u + (uint32_t)wtype + (uint32_t)m;
    for (int64_t i = 0; i < K * m; i++)
        ((float *)tx.host)[i] = ocl_rand(&seed);
    if (wtype == SY_DTYPE_F32) {
        for (int64_t i = 0; i < K * N; i++)
            ((float *)tw.host)[i] = ocl_rand(&seed);
    } else {
        /* Q4_0 blocks: an f16 scale of 1/64 (0x2400) and random nibbles. */
        unsigned char *b = tw.host;
        for (int64_t blk = 0; blk < K * N / 32; blk++, b += 18) {
            b[0] = 0x00;
            b[1] = 0x24;
            for (int j = 0; j < 16; j++)
                b[2 + j] = (unsigned char)(ocl_rand(&seed) * 127.0f + 128.0f);
        }
    }
    for (int i = 0; i < 3; i++) {
        st = ocl_buffer_alloc(s, dev, sy_tensor_nbytes(&all[i]->t), &all[i]->buf);
        if (st != SY_OK)
            goto out_free;
        all[i]->t.buffer = all[i]->buf;
        if (i < 2) {
            st = ocl_buffer_copy_in(s, dev, all[i]->buf, 0, all[i]->host,
                                    sy_tensor_nbytes(&all[i]->t));
            if (st != SY_OK)
                goto out_free;
        }
    }
    sy_node node;
    memset(&node, 0, sizeof node);
    node.op = SY_OP_MATMUL;
    node.n_inputs = 2;
    node.inputs[0] = &tw.t;
    node.inputs[1] = &tx.t;
    node.output = &ty.t;
    snprintf(node.name, sizeof node.name, "selftest.matmul");
    sy_node *list[1] = {&node};
    st = ocl_device_execute(s, dev, list, 1);
    sy_status sync = ocl_device_synchronize(s, dev);
    if (st == SY_OK)
        st = sync;
    if (st == SY_OK)
        st = ocl_buffer_copy_out(s, dev, ty.buf, 0, ty.host, sy_tensor_nbytes(&ty.t));
    if (st != SY_OK) {
        snprintf(msg, msg_size, "matmul %s M=%lld: the device failed (%d)", sy_dtype_name(wtype),
                 (long long)m, (int)st);
        goto out_free;
    }
    sy_tensor hw = tw.t, hx = tx.t, hy = ty.t;
    hw.buffer = hx.buffer = hy.buffer = NULL;
    hw.data = tw.host;
    hx.data = tx.host;
    hy.data = want;
    node.inputs[0] = &hw;
    node.inputs[1] = &hx;
    node.output = &hy;
    st = h->reference_execute(h->ctx, &node);
    if (st != SY_OK) {
        snprintf(msg, msg_size, "matmul %s: the reference failed (%d)", sy_dtype_name(wtype),
                 (int)st);
        goto out_free;
    }
    for (int64_t i = 0; i < N * m; i++) {
        const float got = ((float *)ty.host)[i];
        if (!(fabsf(got - want[i]) <= 1e-3f + 1e-4f * fabsf(want[i]))) {
            snprintf(msg, msg_size, "matmul %s M=%lld on %s: out[%lld] = %g, reference %g",
                     sy_dtype_name(wtype), (long long)m, s->devs[dev].desc.name, (long long)i,
                     (double)got, (double)want[i]);
            st = SY_E_DEVICE;
            goto out_free;
        }
    }
    st = SY_OK;

out_free:
    if (st == SY_E_NO_MEMORY && msg[0] == '\0')
        snprintf(msg, msg_size, "self-test: out of memory");
    for (int i = 0; i < 3; i++) {
        if (all[i]->buf)
            ocl_buffer_free(s, dev, all[i]->buf);
        if (all[i]->host)
            h->free(h->ctx, all[i]->host);
    }
    if (want)
        h->free(h->ctx, want);
    return st;
}

sy_status ocl_device_self_test(void *state, uint32_t dev, char *out_msg, uint32_t msg_size)
{
    ocl_state *s = state;
    char scratch[8];
    if (!out_msg || msg_size == 0) {
        out_msg = scratch;
        msg_size = sizeof scratch;
    }
    out_msg[0] = '\0';
    if (!s || dev >= s->n_devs)
        return SY_E_INVALID_ARG;
    if (!s->host->reference_execute) {
        snprintf(out_msg, msg_size, "self-test needs the host's reference kernels");
        return SY_E_UNSUPPORTED;
    }
    ocl_dev *d = &s->devs[dev];
    ocl_program_build_all(s, d);
    for (int f = 0; f < OCL_FAM_COUNT; f++) {
        if (d->progs[f].state == OCL_PROG_FAILED) {
            snprintf(out_msg, msg_size, "OpenCL program '%s' failed to build on %s: %s",
                     ocl_family_name((ocl_family)f), d->desc.name, d->progs[f].log);
            return SY_E_DEVICE;
        }
    }
    static const sy_dtype types[] = {SY_DTYPE_F32, SY_DTYPE_Q4_0};
    static const int64_t columns[] = {1, 3, 20};
    for (size_t i = 0; i < sizeof types / sizeof types[0]; i++) {
        for (size_t j = 0; j < sizeof columns / sizeof columns[0]; j++) {
            sy_status st = ocl_st_matmul(s, dev, types[i], columns[j], out_msg, msg_size);
            if (st != SY_OK)
                return st;
        }
    }
    return SY_OK;
}
