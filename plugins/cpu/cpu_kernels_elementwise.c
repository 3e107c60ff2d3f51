/* Element-wise ops: ADD and MUL (with broadcast of in1), SCALE, SILU, GELU
 * (tanh approximation), SWIGLU and GEGLU.  Contiguous operands of one shape
 * are split into element ranges, anything else into rows.  Every input
 * needs packed rows; the outer dims may have any strides. */
#include <math.h>

#include "cpu_kernels.h"

/* Rows of at least this many elements in total are worth a second lane. */
#define CPU_ELEMENTWISE_MIN_PER_LANE 8192

static void cpu_binary_row(const cpu_isa_table *isa, uint32_t op, const float *a, const float *b,
                           int64_t nb0, float *y, int64_t n)
{
    if (nb0 == n) {
        (op == SY_OP_ADD ? isa->add_f32 : isa->mul_f32)(y, a, b, n);
    } else if (nb0 == 1) {
        if (op == SY_OP_ADD)
            isa->scale_f32(y, a, 1.0f, b[0], n);
        else
            isa->scale_f32(y, a, b[0], 0.0f, n);
    } else {
        for (int64_t i0 = 0; i0 < n; i0 += nb0)
            (op == SY_OP_ADD ? isa->add_f32 : isa->mul_f32)(y + i0, a + i0, b, nb0);
    }
}

/* Applies the op to |n| elements; |b| holds |b_n| elements that repeat
 * (b_n == n: none repeat) and is NULL for unary ops.  Scalars come by
 * value so the compiler need not reload them after every store. */
static void cpu_eltwise_span(const cpu_isa_table *isa, uint32_t op, float scale, float bias,
                             const float *a, const float *b, int64_t b_n, float *y, int64_t n)
{
    switch (op) {
    case SY_OP_ADD:
    case SY_OP_MUL:
        cpu_binary_row(isa, op, a, b, b_n, y, n);
        break;
    case SY_OP_SCALE:
        isa->scale_f32(y, a, scale, bias, n);
        break;
    case SY_OP_SILU:
        isa->silu_f32(y, a, NULL, n);
        break;
    case SY_OP_GELU:
        isa->gelu_f32(y, a, NULL, n);
        break;
    case SY_OP_SWIGLU:
        isa->silu_f32(y, a, b, n);
        break;
    case SY_OP_GEGLU:
        isa->gelu_f32(y, a, b, n);
        break;
    default:
        break;
    }
}

/* Contiguous operands of one shape: lanes take element ranges, so one
 * long row (decode: [4096, 1]) still spreads over every lane. */
static void cpu_eltwise_flat_task(void *arg, uint32_t ith, uint32_t nth, uint32_t lane)
{
    const cpu_eltwise *c = arg;
    const int64_t total = sy_tensor_nelements(c->a);
    /* Cut at multiples of 16 floats (one cache line): lanes never write
     * the same line. */
    int64_t lo, hi;
    cpu_split((total + 15) / 16, ith, nth, &lo, &hi);
    lo *= 16;
    hi = hi * 16 < total ? hi * 16 : total;
    if (lo >= hi)
        return;
    const float *b = c->b ? (const float *)c->b->data + lo : NULL;
    cpu_eltwise_span(c->isa, c->op, c->scale, c->bias, (const float *)c->a->data + lo, b, hi - lo,
                     (float *)c->y->data + lo, hi - lo);
}

static void cpu_eltwise_rows_task(void *arg, uint32_t ith, uint32_t nth, uint32_t lane)
{
    const cpu_eltwise *c = arg;
    const sy_tensor *a = c->a, *b = c->b, *y = c->y;
    const int64_t n = a->ne[0];
    int64_t lo, hi;
    cpu_split(cpu_nrows(a), ith, nth, &lo, &hi);
    for (int64_t r = lo; r < hi; r++) {
        const int64_t i1 = r % a->ne[1], i2 = (r / a->ne[1]) % a->ne[2],
                      i3 = r / (a->ne[1] * a->ne[2]);
        const float *br = b ? (const float *)cpu_row(b, i1 % b->ne[1], i2 % b->ne[2],
                                                     i3 % b->ne[3])
                            : NULL;
        cpu_eltwise_span(c->isa, c->op, c->scale, c->bias, (const float *)cpu_row(a, i1, i2, i3), br,
                         b ? b->ne[0] : n, (float *)cpu_row(y, i1, i2, i3), n);
    }
}

static bool cpu_same_shape(const sy_tensor *a, const sy_tensor *b)
{
    for (int d = 0; d < SY_MAX_DIMS; d++)
        if (a->ne[d] != b->ne[d])
            return false;
    return true;
}

sy_status cpu_eltwise_prepare(cpu_state *s, const sy_node *node, cpu_eltwise *out,
                              const char **out_why)
{
    const uint32_t op = node->op;
    const bool binary = op == SY_OP_ADD || op == SY_OP_MUL || op == SY_OP_SWIGLU ||
                        op == SY_OP_GEGLU;
    const sy_tensor *a = node->inputs[0], *b = binary ? node->inputs[1] : NULL, *y = node->output;
    if (!cpu_is_f32_rows(a) || (b && !cpu_is_f32_rows(b)) || !cpu_is_f32_rows(y)) {
        *out_why = "an operand is not f32 with dense rows";
        return SY_E_UNSUPPORTED;
    }
    for (int d = 0; d < SY_MAX_DIMS; d++) {
        if (y->ne[d] != a->ne[d] || (b && a->ne[d] % b->ne[d] != 0)) {
            *out_why = "shapes outside the element-wise rules";
            return SY_E_UNSUPPORTED;
        }
        if ((op == SY_OP_SWIGLU || op == SY_OP_GEGLU) && b->ne[d] != a->ne[d]) {
            *out_why = "gate and up differ in shape";
            return SY_E_UNSUPPORTED;
        }
    }
    *out = (cpu_eltwise){.isa = s->isa, .op = op, .a = a, .b = b, .y = y,
                         .scale = node->params.f[0], .bias = node->params.f[1]};
    const int64_t total = sy_tensor_nelements(a);
    out->nth = cpu_lanes_for(s, total, CPU_ELEMENTWISE_MIN_PER_LANE);
    out->flat = sy_tensor_is_contiguous(a) && sy_tensor_is_contiguous(y) &&
                (!b || (sy_tensor_is_contiguous(b) && cpu_same_shape(a, b)));
    const int64_t rows = cpu_nrows(a);
    if (!out->flat && (int64_t)out->nth > rows)
        out->nth = (uint32_t)rows;
    return SY_OK;
}

void cpu_eltwise_run(cpu_state *s, const cpu_eltwise *e)
{
    cpu_pool_run(s->pool, e->flat ? cpu_eltwise_flat_task : cpu_eltwise_rows_task, (void *)e,
                 e->nth);
}

sy_status cpu_kernel_elementwise(cpu_state *s, const sy_node *node, const char **out_why)
{
    cpu_eltwise e;
    sy_status st = cpu_eltwise_prepare(s, node, &e, out_why);
    if (st == SY_OK)
        cpu_eltwise_run(s, &e);
    return st;
}
