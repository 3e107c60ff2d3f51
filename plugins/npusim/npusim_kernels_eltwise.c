/* ADD and MUL on the NPU's vector unit, with the catalogue's broadcasting
 * (in1's dims divide in0's).  Two precisions, chosen by the capability
 * file's elementwise.precision:
 *   f16  (default) both inputs rounded to binary16, the sum or product
 *        formed in float32 and rounded to binary16 again: what an NPU
 *        with an fp16 vector unit returns;
 *   int8 each row of each input quantised dynamically to symmetric int8
 *        (s = max|x| / 127, no zero point); ADD rescales each side, MUL
 *        multiplies the integers exactly and rescales once by s_a * s_b;
 *   f32  an fp32 vector unit: plain float32 arithmetic. */
#include <string.h>

#include "npusim_internal.h"
#include "quants_internal.h"

static inline float npu_round_f16(float v)
{
    return sy__fp16_to_f32(sy__f32_to_fp16(v));
}

static void npu_row_f32(uint32_t op, const float *a, const float *b, int64_t n, int64_t nb0,
                        float *y)
{
    for (int64_t i = 0; i < n; i++) {
        const float bv = b[nb0 == n ? i : i % nb0];
        y[i] = op == SY_OP_ADD ? a[i] + bv : a[i] * bv;
    }
}

static void npu_row_f16(uint32_t op, const float *a, const float *b, int64_t n, int64_t nb0,
                        float *y)
{
    for (int64_t i = 0; i < n; i++) {
        const float av = npu_round_f16(a[i]);
        const float bv = npu_round_f16(b[nb0 == n ? i : i % nb0]);
        y[i] = npu_round_f16(op == SY_OP_ADD ? av + bv : av * bv);
    }
}

static void npu_row_int8(uint32_t op, const int16_t *qa, float sa, const int16_t *qb, float sb,
                         int64_t n, int64_t nb0, float *y)
{
    const float sab = sa * sb;
    for (int64_t i = 0; i < n; i++) {
        const int16_t bq = qb[nb0 == n ? i : i % nb0];
        if (op == SY_OP_ADD)
            y[i] = sa * (float)qa[i] + sb * (float)bq;
        else
            y[i] = sab * (float)((int32_t)qa[i] * (int32_t)bq);
    }
}

sy_status npu_kernel_eltwise(npu_state *s, uint32_t op, const npu_view *av, const npu_view *bv,
                             const npu_view *yv)
{
    const sy_tensor *a = av->t, *b = bv->t, *y = yv->t;
    const int64_t n0 = a->ne[0], b0 = b->ne[0];
    const bool int8 = s->caps.eltwise == NPU_ELTWISE_INT8;
    int16_t *qa = NULL, *qb = NULL;
    if (int8) {
        sy_status st = npu_scratch_reserve(s, &s->act, (size_t)(n0 + b0) * sizeof(int16_t) + 64);
        if (st != SY_OK)
            return st;
        qa = s->act.ptr;
        qb = qa + n0;
    }
    for (int64_t i3 = 0; i3 < a->ne[3]; i3++) {
        for (int64_t i2 = 0; i2 < a->ne[2]; i2++) {
            for (int64_t i1 = 0; i1 < a->ne[1]; i1++) {
                const float *ar = (const float *)(av->data + i1 * a->nb[1] + i2 * a->nb[2] +
                                                  i3 * a->nb[3]);
                const float *br = (const float *)(bv->data + (i1 % b->ne[1]) * b->nb[1] +
                                                  (i2 % b->ne[2]) * b->nb[2] +
                                                  (i3 % b->ne[3]) * b->nb[3]);
                float *yr = (float *)(yv->data + i1 * y->nb[1] + i2 * y->nb[2] + i3 * y->nb[3]);
                if (s->caps.eltwise == NPU_ELTWISE_F32) {
                    npu_row_f32(op, ar, br, n0, b0, yr);
                    continue;
                }
                if (!int8) {
                    npu_row_f16(op, ar, br, n0, b0, yr);
                    continue;
                }
                int32_t za, zb; /* 0: the vector unit's int8 is symmetric */
                const float sa = npu_quantize_row(ar, n0, 8, false, qa, &za);
                const float sb = npu_quantize_row(br, b0, 8, false, qb, &zb);
                npu_row_int8(op, qa, sa, qb, sb, n0, b0, yr);
            }
        }
    }
    return SY_OK;
}
