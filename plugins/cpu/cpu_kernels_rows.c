/* Row-wise ops, threaded over rows: RMS_NORM, SOFTMAX (causal and window
 * masks), ROPE (normal and NeoX pairing) and ARGMAX (a single long row is
 * split across lanes and reduced). */
#include <math.h>
#include <string.h>

#include "cpu_kernels.h"

#define CPU_ROWS_MIN_PER_LANE 8192

/* ------------------------------------------------------------ rms_norm */

typedef struct cpu_rows_ctx {
    const cpu_state *s;
    const sy_node *node;
    const sy_tensor *x;
    const sy_tensor *y;
} cpu_rows_ctx;

static void cpu_rms_norm_task(void *arg, uint32_t ith, uint32_t nth, uint32_t lane)
{
    const cpu_rows_ctx *c = arg;
    const int64_t n = c->x->ne[0];
    const float eps = c->node->params.f[0];
    int64_t lo, hi;
    cpu_split(cpu_nrows(c->x), ith, nth, &lo, &hi);
    for (int64_t r = lo; r < hi; r++) {
        const float *x = (const float *)cpu_row_flat(c->x, r);
        float *y = (float *)cpu_row_flat(c->y, r);
        const float ss = c->s->isa->dot_f32(x, x, n);
        /* An all-zero row with eps = 0 scales by zero, as the reference. */
        const double ms = (double)ss / (double)n + (double)eps;
        const float k = ms > 0.0 ? (float)(1.0 / sqrt(ms)) : 0.0f;
        c->s->isa->scale_f32(y, x, k, 0.0f, n);
    }
}

/* Checks the common layout of the single-input row ops. */
static bool cpu_rows_layout_ok(const sy_tensor *x, const sy_tensor *y)
{
    if (!cpu_is_f32_rows(x) || !cpu_is_f32_rows(y))
        return false;
    for (int d = 0; d < SY_MAX_DIMS; d++)
        if (x->ne[d] != y->ne[d])
            return false;
    return true;
}

static uint32_t cpu_rows_lanes(const cpu_state *s, const sy_tensor *x)
{
    const int64_t rows = cpu_nrows(x);
    uint32_t nth = cpu_lanes_for(s, rows * x->ne[0], CPU_ROWS_MIN_PER_LANE);
    return (int64_t)nth > rows ? (uint32_t)rows : nth;
}

sy_status cpu_kernel_rms_norm(cpu_state *s, const sy_node *node, const char **out_why)
{
    cpu_rows_ctx c = {.s = s, .node = node, .x = node->inputs[0], .y = node->output};
    if (!cpu_rows_layout_ok(c.x, c.y)) {
        *out_why = "input or output is not f32 with dense rows of the same shape";
        return SY_E_UNSUPPORTED;
    }
    cpu_pool_run(s->pool, cpu_rms_norm_task, &c, cpu_rows_lanes(s, c.x));
    return SY_OK;
}

/* ------------------------------------------- add + rms_norm + mul chain */

/* The residual add before a norm and the weight multiply after it, with
 * the norm, in one pass over each row: a decode step has two such chains
 * per layer, and each node less is one prepare and dispatch less (the
 * structs they read are cold after the weights stream by).  Every output
 * is written, and each equals the unfused kernel's bit for bit: per row,
 * the same add_f32, dot_f32 + scale_f32 and mul_f32 in the same order. */
static void cpu_norm_chain_task(void *arg, uint32_t ith, uint32_t nth, uint32_t lane)
{
    (void)lane;
    const cpu_norm_chain *c = arg;
    const cpu_isa_table *isa = c->s->isa;
    const int64_t n = c->x->ne[0];
    int64_t lo, hi;
    cpu_split(cpu_nrows(c->x), ith, nth, &lo, &hi);
    for (int64_t r = lo; r < hi; r++) {
        float *x = (float *)cpu_row_flat(c->x, r);
        if (c->a)
            isa->add_f32(x, (const float *)cpu_row_flat(c->a, r),
                         (const float *)cpu_row_flat(c->b, r), n);
        float *y = (float *)cpu_row_flat(c->y, r);
        const float ss = isa->dot_f32(x, x, n);
        const double ms = (double)ss / (double)n + (double)c->eps;
        const float k = ms > 0.0 ? (float)(1.0 / sqrt(ms)) : 0.0f;
        isa->scale_f32(y, x, k, 0.0f, n);
        if (c->w)
            isa->mul_f32((float *)cpu_row_flat(c->z, r), y, (const float *)c->w->data, n);
    }
}

/* One past the last byte of f32-row tensor |t|. */
static const char *cpu_rows_end(const sy_tensor *t)
{
    const char *e = (const char *)t->data + t->ne[0] * (int64_t)sizeof(float);
    for (int d = 1; d < SY_MAX_DIMS; d++)
        e += (t->ne[d] - 1) * (int64_t)t->nb[d];
    return e;
}

/* True when the rows of |p| and |q| are the same rows (same start and
 * strides: a row-by-row pass may write one while it reads the other) or
 * share no byte. */
static bool cpu_rows_apart_or_same(const sy_tensor *p, const sy_tensor *q)
{
    if (p->data == q->data)
        return p->nb[1] == q->nb[1] && p->nb[2] == q->nb[2] && p->nb[3] == q->nb[3];
    return cpu_rows_end(p) <= (const char *)q->data || cpu_rows_end(q) <= (const char *)p->data;
}

sy_status cpu_norm_chain_prepare(cpu_state *s, const sy_node *add, const sy_node *norm,
                                 const sy_node *mul, cpu_norm_chain *out, const char **out_why)
{
    cpu_norm_chain c = {.s = s, .x = norm->inputs[0], .y = norm->output,
                        .eps = norm->params.f[0]};
    *out_why = "not a fusable add, rms_norm and mul chain";
    if (!cpu_rows_layout_ok(c.x, c.y))
        return SY_E_UNSUPPORTED;
    const sy_tensor *t[6];
    int nt = 0;
    t[nt++] = c.x;
    t[nt++] = c.y;
    if (add) {
        if (add->op != SY_OP_ADD || add->n_inputs != 2 || add->output != c.x ||
            !cpu_rows_layout_ok(add->inputs[0], c.x) || !cpu_rows_layout_ok(add->inputs[1], c.x))
            return SY_E_UNSUPPORTED;
        c.a = add->inputs[0];
        c.b = add->inputs[1];
        t[nt++] = c.a;
        t[nt++] = c.b;
    }
    if (mul) {
        const sy_tensor *w = mul->n_inputs == 2 ? mul->inputs[1] : NULL;
        if (mul->op != SY_OP_MUL || mul->inputs[0] != c.y || !w ||
            !cpu_rows_layout_ok(c.y, mul->output) || !cpu_is_f32_rows(w) ||
            w->ne[0] != c.y->ne[0] || w->ne[1] != 1 || w->ne[2] != 1 || w->ne[3] != 1)
            return SY_E_UNSUPPORTED;
        c.w = w;
        c.z = mul->output;
        t[nt++] = c.z;
        /* The weight is read by every row: no output may touch it. */
        for (int k = 0; k < nt; k++)
            if (t[k]->data == w->data || !cpu_rows_apart_or_same(t[k], w))
                return SY_E_UNSUPPORTED;
    }
    if (!add && !mul)
        return SY_E_UNSUPPORTED;
    /* Rows go one at a time through every step: tensors that share memory
     * must share it row for row. */
    for (int i = 0; i < nt; i++)
        for (int j = i + 1; j < nt; j++)
            if (!cpu_rows_apart_or_same(t[i], t[j]))
                return SY_E_UNSUPPORTED;
    c.nth = cpu_rows_lanes(s, c.x);
    *out = c;
    return SY_OK;
}

void cpu_norm_chain_run(cpu_state *s, const cpu_norm_chain *c)
{
    cpu_pool_run(s->pool, cpu_norm_chain_task, (void *)c, c->nth);
}

sy_status cpu_kernel_norm_chain(cpu_state *s, const sy_node *add, const sy_node *norm,
                                const sy_node *mul, const char **out_why)
{
    cpu_norm_chain c;
    sy_status st = cpu_norm_chain_prepare(s, add, norm, mul, &c, out_why);
    if (st == SY_OK)
        cpu_norm_chain_run(s, &c);
    return st;
}

/* ------------------------------------------------------------- softmax */

static void cpu_softmax_task(void *arg, uint32_t ith, uint32_t nth, uint32_t lane)
{
    const cpu_rows_ctx *c = arg;
    const sy_op_params *p = &c->node->params;
    const int64_t n = c->x->ne[0];
    const float scale = p->f[0];
    const bool causal = p->i[0] != 0;
    const int64_t n_past = p->i[1], window = p->i[2];
    int64_t lo, hi;
    cpu_split(cpu_nrows(c->x), ith, nth, &lo, &hi);
    for (int64_t r = lo; r < hi; r++) {
        const float *x = (const float *)cpu_row_flat(c->x, r);
        float *y = (float *)cpu_row_flat(c->y, r);
        const int64_t pos = n_past + r % c->x->ne[1];
        /* Unmasked keys form one range [j0, j1). */
        int64_t j1 = causal ? (pos + 1 < n ? pos + 1 : n) : n;
        int64_t j0 = window > 0 ? pos - window + 1 : 0;
        if (j0 < 0)
            j0 = 0;
        if (j0 >= j1) {
            memset(y, 0, (size_t)n * sizeof(float));
            continue;
        }
        float max = -INFINITY;
        for (int64_t j = j0; j < j1; j++)
            if (x[j] * scale > max)
                max = x[j] * scale;
        if (max == -INFINITY) {
            /* Every score is -inf: no distribution, zeros as the reference. */
            memset(y, 0, (size_t)n * sizeof(float));
            continue;
        }
        const float sum = c->s->isa->exp_sum_f32(y + j0, x + j0, scale, max, j1 - j0);
        const float inv = 1.0f / sum;
        for (int64_t j = 0; j < j0; j++)
            y[j] = 0.0f;
        for (int64_t j = j0; j < j1; j++)
            y[j] *= inv;
        for (int64_t j = j1; j < n; j++)
            y[j] = 0.0f;
    }
}

sy_status cpu_kernel_softmax(cpu_state *s, const sy_node *node, const char **out_why)
{
    cpu_rows_ctx c = {.s = s, .node = node, .x = node->inputs[0], .y = node->output};
    if (!cpu_rows_layout_ok(c.x, c.y)) {
        *out_why = "input or output is not f32 with dense rows of the same shape";
        return SY_E_UNSUPPORTED;
    }
    cpu_pool_run(s->pool, cpu_softmax_task, &c, cpu_rows_lanes(s, c.x));
    return SY_OK;
}

/* ---------------------------------------------------------------- rope */

typedef struct cpu_rope_ctx {
    const cpu_state *s;
    const sy_node *node;
    const sy_tensor *x, *pos, *y;
} cpu_rope_ctx;

/* cos and sin of pos * freq_scale * inv_freq[j] for j < half. */
static void cpu_rope_angles(const double *inv_freq, int64_t half, int32_t pos, double freq_scale,
                            float *cos_t, float *sin_t)
{
    for (int64_t j = 0; j < half; j++) {
        const double theta = (double)pos * freq_scale * inv_freq[j];
        cos_t[j] = (float)cos(theta);
        sin_t[j] = (float)sin(theta);
    }
}

void cpu_rope_row(const float *x, float *y, int64_t d, int64_t n_rot, bool neox,
                  const float *cos_t, const float *sin_t)
{
    const int64_t half = n_rot / 2, stride = neox ? 1 : 2, other = neox ? half : 1;
    for (int64_t j = 0; j < half; j++) {
        const int64_t i0 = j * stride, i1 = i0 + other;
        const float x0 = x[i0], x1 = x[i1];
        y[i0] = x0 * cos_t[j] - x1 * sin_t[j];
        y[i1] = x0 * sin_t[j] + x1 * cos_t[j];
    }
    for (int64_t i = n_rot; i < d; i++)
        y[i] = x[i];
}

static void cpu_rope_task(void *arg, uint32_t ith, uint32_t nth, uint32_t lane)
{
    const cpu_rope_ctx *c = arg;
    const sy_op_params *p = &c->node->params;
    const int64_t d = c->x->ne[0], heads = c->x->ne[1], tokens = c->x->ne[2];
    const bool neox = p->i[0] == SY_ROPE_NEOX;
    const int64_t n_rot = p->i[1], half = n_rot / 2;
    const double freq_scale = p->f[1] != 0.0f ? p->f[1] : 1.0;
    /* One token: the angles cpu_kernel_rope left in the state.  More: the
     * lane's own cos[half], sin[half] of the token in hand. */
    const bool one = tokens == 1;
    float *lane_cs = c->s->lanes[lane].scratch;
    const float *cos_t = one ? c->s->rope.cos : lane_cs;
    const float *sin_t = one ? c->s->rope.sin : lane_cs + half;
    int64_t cached_t = one ? 0 : -1;

    int64_t lo, hi;
    cpu_split(heads * tokens, ith, nth, &lo, &hi);
    for (int64_t r = lo; r < hi; r++) {
        const int64_t h = r % heads, t = r / heads;
        if (t != cached_t) {
            const int32_t pos = *(const int32_t *)((const char *)c->pos->data + t * (int64_t)c->pos->nb[0]);
            cpu_rope_angles(c->s->rope.inv_freq, half, pos, freq_scale, lane_cs, lane_cs + half);
            cached_t = t;
        }
        cpu_rope_row((const float *)cpu_row(c->x, h, t, 0), (float *)cpu_row(c->y, h, t, 0), d,
                     n_rot, neox, cos_t, sin_t);
    }
}

/* Makes s->rope hold the frequencies of (n_rot, base), and
 * cpu_rope_position (below) the angles of one token's position: pow, cos
 * and sin run when these change, not on every call (a decode step ropes q
 * and k of every layer at one position).  The same double arithmetic as
 * per call, so bit-identical. */
static sy_status cpu_rope_freqs(cpu_state *s, const sy_op_params *p)
{
    const int64_t n_rot = p->i[1], half = n_rot / 2;
    const float base = p->f[0];
    if (s->rope.n_rot != n_rot || memcmp(&s->rope.base, &base, sizeof base) != 0) {
        if (s->rope.n_rot < n_rot) {
            void *m = s->host->alloc(s->host->ctx, (size_t)half * (sizeof(double) + 2 * sizeof(float)),
                                     CPU_ALIGN);
            if (!m)
                return SY_E_NO_MEMORY;
            if (s->rope.inv_freq)
                s->host->free(s->host->ctx, s->rope.inv_freq);
            s->rope.inv_freq = m;
        }
        s->rope.cos = (float *)(s->rope.inv_freq + half);
        s->rope.sin = s->rope.cos + half;
        for (int64_t j = 0; j < half; j++)
            s->rope.inv_freq[j] = pow((double)base, -2.0 * (double)j / (double)n_rot);
        s->rope.n_rot = n_rot;
        s->rope.base = base;
        s->rope.has_pos = false;
    }
    return SY_OK;
}

sy_status cpu_rope_position(cpu_state *s, const sy_op_params *p, int32_t pos)
{
    sy_status st = cpu_rope_freqs(s, p);
    if (st != SY_OK)
        return st;
    const float fs = p->f[1];
    if (!s->rope.has_pos || s->rope.pos != pos || memcmp(&s->rope.freq_scale, &fs, sizeof fs) != 0) {
        cpu_rope_angles(s->rope.inv_freq, p->i[1] / 2, pos, fs != 0.0f ? fs : 1.0, s->rope.cos,
                        s->rope.sin);
        s->rope.pos = pos;
        s->rope.freq_scale = fs;
        s->rope.has_pos = true;
    }
    return SY_OK;
}

static sy_status cpu_rope_tables(cpu_state *s, const sy_node *node)
{
    const sy_tensor *x = node->inputs[0], *pt = node->inputs[1];
    if (x->ne[2] != 1)
        return cpu_rope_freqs(s, &node->params);
    return cpu_rope_position(s, &node->params, *(const int32_t *)pt->data);
}

sy_status cpu_rope_prepare(cpu_state *s, const sy_node *node, const char **out_why)
{
    const sy_tensor *x = node->inputs[0], *pos = node->inputs[1];
    const sy_op_params *p = &node->params;
    if (!cpu_rows_layout_ok(x, node->output) || x->ne[3] != 1 || pos->dtype != SY_DTYPE_I32 ||
        pos->ne[0] != x->ne[2]) {
        *out_why = "x/out not f32 [D,H,T] with dense rows, or positions not i32 [T]";
        return SY_E_UNSUPPORTED;
    }
    if ((p->i[0] != SY_ROPE_NORMAL && p->i[0] != SY_ROPE_NEOX) || p->i[1] < 2 || p->i[1] % 2 ||
        p->i[1] > x->ne[0]) {
        *out_why = "mode or n_rot outside the rope rules";
        return SY_E_UNSUPPORTED;
    }
    sy_status st = cpu_scratch_reserve(s, (size_t)p->i[1] * sizeof(float));
    return st == SY_OK ? cpu_rope_tables(s, node) : st;
}

sy_status cpu_kernel_rope(cpu_state *s, const sy_node *node, const char **out_why)
{
    cpu_rope_ctx c = {.s = s, .node = node, .x = node->inputs[0], .pos = node->inputs[1],
                      .y = node->output};
    sy_status st = cpu_rope_prepare(s, node, out_why);
    if (st != SY_OK)
        return st;
    cpu_pool_run(s->pool, cpu_rope_task, &c, cpu_rows_lanes(s, c.x));
    return SY_OK;
}

/* -------------------------------------------------------------- argmax */

typedef struct cpu_argmax_ctx {
    cpu_state *s;
    const sy_tensor *x, *y;
} cpu_argmax_ctx;

/* First maximum of x[lo..hi); NaNs never win. */
static void cpu_argmax_range(const float *x, int64_t lo, int64_t hi, float *out_value,
                             int64_t *out_index)
{
    float best = -INFINITY;
    int64_t at = -1;
    for (int64_t i = lo; i < hi; i++) {
        if (x[i] > best || (at < 0 && x[i] == best)) {
            best = x[i];
            at = i;
        }
    }
    *out_value = best;
    *out_index = at;
}

static void cpu_argmax_rows_task(void *arg, uint32_t ith, uint32_t nth, uint32_t lane)
{
    const cpu_argmax_ctx *c = arg;
    int64_t lo, hi;
    cpu_split(c->x->ne[1], ith, nth, &lo, &hi);
    for (int64_t m = lo; m < hi; m++) {
        float v;
        int64_t at;
        cpu_argmax_range((const float *)cpu_row(c->x, m, 0, 0), 0, c->x->ne[0], &v, &at);
        *(int32_t *)((char *)c->y->data + m * (int64_t)c->y->nb[0]) = (int32_t)(at < 0 ? 0 : at);
    }
}

static void cpu_argmax_split_task(void *arg, uint32_t ith, uint32_t nth, uint32_t lane)
{
    const cpu_argmax_ctx *c = arg;
    int64_t lo, hi;
    cpu_split(c->x->ne[0], ith, nth, &lo, &hi);
    cpu_argmax_range((const float *)c->x->data, lo, hi, &c->s->lanes[ith].chunk_best_value,
                     &c->s->lanes[ith].chunk_best_index);
}

sy_status cpu_kernel_argmax(cpu_state *s, const sy_node *node, const char **out_why)
{
    cpu_argmax_ctx c = {.s = s, .x = node->inputs[0], .y = node->output};
    if (!cpu_is_f32_rows(c.x) || c.x->ne[2] != 1 || c.x->ne[3] != 1 ||
        c.y->dtype != SY_DTYPE_I32 || c.y->ne[0] != c.x->ne[1]) {
        *out_why = "input is not f32 [N,M] with dense rows";
        return SY_E_UNSUPPORTED;
    }
    const int64_t n = c.x->ne[0], m = c.x->ne[1];
    uint32_t nth = cpu_lanes_for(s, n * m, CPU_ROWS_MIN_PER_LANE);
    if (m >= (int64_t)nth || nth == 1) {
        cpu_pool_run(s->pool, cpu_argmax_rows_task, &c, (int64_t)nth > m ? (uint32_t)m : nth);
        return SY_OK;
    }
    /* Few long rows (decode: one row of vocabulary logits): split each. */
    for (int64_t row = 0; row < m; row++) {
        cpu_argmax_ctx rc = c;
        sy_tensor xr = *c.x;
        xr.data = cpu_row(c.x, row, 0, 0);
        xr.ne[1] = 1;
        rc.x = &xr;
        cpu_pool_run(s->pool, cpu_argmax_split_task, &rc, nth);
        float best = -INFINITY;
        int64_t at = -1;
        for (uint32_t i = 0; i < nth; i++) {
            const cpu_lane *l = &s->lanes[i];
            if (l->chunk_best_index >= 0 && (at < 0 || l->chunk_best_value > best)) {
                best = l->chunk_best_value;
                at = l->chunk_best_index;
            }
        }
        *(int32_t *)((char *)c.y->data + row * (int64_t)c.y->nb[0]) = (int32_t)(at < 0 ? 0 : at);
    }
    (void)n;
    return SY_OK;
}
