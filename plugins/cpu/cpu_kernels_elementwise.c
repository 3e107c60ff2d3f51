/* Element-wise ops, threaded over rows: ADD and MUL (with broadcast of
 * in1), SCALE, SILU, GELU (tanh approximation), SWIGLU and GEGLU.
 * Every input needs packed rows; the outer dims may have any strides. */
#include <math.h>

#include "cpu_kernels.h"

/* Rows of at least this many elements in total are worth a second lane. */
#define CPU_ELEMENTWISE_MIN_PER_LANE 8192

typedef struct cpu_eltwise_ctx {
    uint32_t op;
    const sy_tensor *a;
    const sy_tensor *b; /* NULL for unary ops */
    const sy_tensor *y;
    float scale, bias;
} cpu_eltwise_ctx;

static inline float cpu_silu(float x)
{
    return x / (1.0f + expf(-x));
}

static inline float cpu_gelu(float x)
{
    const float sqrt_2_over_pi = 0.79788456080286535588f;
    return 0.5f * x * (1.0f + tanhf(sqrt_2_over_pi * (x + 0.044715f * x * x * x)));
}

static void cpu_binary_row(uint32_t op, const float *a, const float *b, int64_t nb0, float *y,
                           int64_t n)
{
    if (nb0 == n) {
        if (op == SY_OP_ADD)
            for (int64_t i = 0; i < n; i++)
                y[i] = a[i] + b[i];
        else
            for (int64_t i = 0; i < n; i++)
                y[i] = a[i] * b[i];
    } else if (nb0 == 1) {
        const float v = b[0];
        if (op == SY_OP_ADD)
            for (int64_t i = 0; i < n; i++)
                y[i] = a[i] + v;
        else
            for (int64_t i = 0; i < n; i++)
                y[i] = a[i] * v;
    } else {
        for (int64_t i0 = 0; i0 < n; i0 += nb0)
            cpu_binary_row(op, a + i0, b, nb0, y + i0, nb0);
    }
}

static void cpu_eltwise_task(void *arg, uint32_t ith, uint32_t nth)
{
    const cpu_eltwise_ctx *c = arg;
    const sy_tensor *a = c->a, *b = c->b, *y = c->y;
    const int64_t n = a->ne[0];
    int64_t lo, hi;
    cpu_split(cpu_nrows(a), ith, nth, &lo, &hi);
    for (int64_t r = lo; r < hi; r++) {
        const int64_t i1 = r % a->ne[1], i2 = (r / a->ne[1]) % a->ne[2],
                      i3 = r / (a->ne[1] * a->ne[2]);
        const float *ar = (const float *)cpu_row(a, i1, i2, i3);
        float *yr = (float *)cpu_row(y, i1, i2, i3);
        switch (c->op) {
        case SY_OP_ADD:
        case SY_OP_MUL: {
            const float *br =
                (const float *)cpu_row(b, i1 % b->ne[1], i2 % b->ne[2], i3 % b->ne[3]);
            cpu_binary_row(c->op, ar, br, b->ne[0], yr, n);
            break;
        }
        case SY_OP_SCALE:
            for (int64_t i = 0; i < n; i++)
                yr[i] = ar[i] * c->scale + c->bias;
            break;
        case SY_OP_SILU:
            for (int64_t i = 0; i < n; i++)
                yr[i] = cpu_silu(ar[i]);
            break;
        case SY_OP_GELU:
            for (int64_t i = 0; i < n; i++)
                yr[i] = cpu_gelu(ar[i]);
            break;
        case SY_OP_SWIGLU: {
            const float *br = (const float *)cpu_row(b, i1, i2, i3);
            for (int64_t i = 0; i < n; i++)
                yr[i] = cpu_silu(ar[i]) * br[i];
            break;
        }
        case SY_OP_GEGLU: {
            const float *br = (const float *)cpu_row(b, i1, i2, i3);
            for (int64_t i = 0; i < n; i++)
                yr[i] = cpu_gelu(ar[i]) * br[i];
            break;
        }
        default:
            break;
        }
    }
}

sy_status cpu_kernel_elementwise(cpu_state *s, const sy_node *node, const char **out_why)
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
    cpu_eltwise_ctx c = {.op = op, .a = a, .b = b, .y = y,
                         .scale = node->params.f[0], .bias = node->params.f[1]};
    const int64_t rows = cpu_nrows(a);
    uint32_t nth = cpu_lanes_for(s, rows * a->ne[0], CPU_ELEMENTWISE_MIN_PER_LANE);
    if ((int64_t)nth > rows)
        nth = (uint32_t)rows;
    cpu_pool_run(s->pool, cpu_eltwise_task, &c, nth);
    return SY_OK;
}
