/* What `switchyard tune` times: every distinct node (op, dtypes, shapes,
 * params) of a model's decode and prefill graphs, or a standard set of
 * shape classes without a model.  Each is cut out into a one-node graph
 * (weights keep their real data), bound to the device once and executed
 * repeatedly: warm-up, repetitions, median (probe_bench.c). */
#include <stdlib.h>
#include <string.h>

#include "cost_model.h"
#include "model_internal.h"
#include "probe.h"
#include "tune.h"

sy_status tune_build_step(const sy_model *m, uint32_t n_tokens, uint32_t n_past,
                          sy_graph **out_graph, void **out_scratch)
{
    *out_graph = NULL;
    *out_scratch = NULL;
    uint32_t L = m->hp.n_layer, T = n_tokens ? n_tokens : 1;
    size_t bytes = (size_t)T * 2 * sizeof(int32_t) + (size_t)L * 2 * sizeof(void *);
    char *scratch = calloc(1, bytes);
    if (!scratch)
        return SY_E_NO_MEMORY;
    void **kv = (void **)scratch;
    int32_t *ids = (int32_t *)(scratch + (size_t)L * 2 * sizeof(void *)), *pos = ids + T;
    for (uint32_t t = 0; t < T; t++)
        pos[t] = (int32_t)(n_past + t);
    /* KV caches without host data start as zeros on the device. */
    sy_step_desc step = {
        .n_tokens = T,
        .n_past = n_past,
        .tokens = ids,
        .positions = pos,
        .kv_k = kv,
        .kv_v = kv + L,
        .kv_type = SY_DTYPE_F16,
        .n_ctx = n_past + T,
    };
    char err[512];
    sy_status st = sy__model_build_graph(m, &step, out_graph, err, sizeof err);
    if (st != SY_OK) {
        fprintf(stderr, "switchyard tune: %s\n", err);
        free(scratch);
        return st;
    }
    *out_scratch = scratch;
    return SY_OK;
}

sy_status tune_node_graph(sy_op op, const sy_tensor *const *inputs, void *const *data,
                          uint32_t n_inputs, const sy_op_params *params, sy_graph **out_g)
{
    *out_g = NULL;
    sy_graph *g = NULL;
    sy_status st = sy_graph_create(&g);
    if (st != SY_OK)
        return st;
    sy_tensor *in[SY_MAX_INPUTS] = {0}, *out = NULL;
    for (uint32_t k = 0; k < n_inputs && st == SY_OK; k++) {
        char name[16];
        snprintf(name, sizeof name, "in%u", k);
        const sy_tensor *t = inputs[k];
        uint32_t role = t->role == SY_ROLE_WEIGHT || t->role == SY_ROLE_KV ? t->role : SY_ROLE_INPUT;
        st = sy_graph_add_tensor(g, name, (sy_dtype)t->dtype, t->n_dims ? t->n_dims : 1, t->ne,
                                 (sy_tensor_role)role, data ? data[k] : NULL, &in[k]);
    }
    if (st == SY_OK)
        st = sy_graph_add_node(g, op, "tune", in, n_inputs, params, &out);
    if (st == SY_OK)
        st = sy_graph_freeze(g);
    if (st != SY_OK) {
        sy_graph_destroy(g);
        return st;
    }
    *out_g = g;
    return SY_OK;
}

static void tb_label(const sy_node *n, tune_sample *x)
{
    sy__cost_shape_label(n, x->shape, sizeof x->shape);
    sy__cost_shape_group(n, x->group, sizeof x->group);
}

/* Times the single node of |g| on |dev| and appends the sample. */
static sy_status tb_time(sy_runtime *rt, uint32_t dev, sy_graph *g, const tune_opts *o,
                         tune_samples *out, uint32_t *skipped)
{
    sy_node *n = sy_graph_node(g, 0);
    sy_support why;
    if (!sy_runtime_device_supports(rt, dev, n, &why)) {
        (*skipped)++;
        return SY_OK;
    }
    sy_bench *b = NULL;
    sy_status st = sy_bench_create(rt, g, dev, &b);
    if (st != SY_OK) {
        if (o->verbose)
            fprintf(stderr, "  skip %s: %s\n", sy_op_name((sy_op)n->op), sy_runtime_last_error(rt));
        (*skipped)++;
        return SY_OK;
    }
    double s = 0;
    st = o->quick ? sy_bench_time(b, 0, 1, 2, tune_reps(o), 0.15, &s)
                 : sy_bench_time(b, 0, 1, 3, tune_reps(o), 0.6, &s);
    sy_bench_destroy(b);
    if (st != SY_OK || s <= 0) {
        if (o->verbose)
            fprintf(stderr, "  failed %s: %s\n", sy_op_name((sy_op)n->op), sy_runtime_last_error(rt));
        (*skipped)++;
        return SY_OK;
    }
    uint64_t flops, bytes;
    sy_op_cost(n, &flops, &bytes);
    tune_sample x = {.op = n->op, .dtype = (int32_t)n->inputs[0]->dtype, .flops = (double)flops,
                     .bytes = (double)bytes, .seconds = s};
    tb_label(n, &x);
    if (o->verbose)
        fprintf(stderr, "  %-10s %-5s %-20s %10.1f us\n", sy_op_name((sy_op)x.op),
                sy_dtype_name((uint32_t)x.dtype), x.shape, s * 1e6);
    return tune_samples_add(out, &x);
}

/* A key naming everything that decides a node's cost. */
static void tb_key(const sy_node *n, char *out, size_t size)
{
    int w = snprintf(out, size, "%u", n->op);
    for (uint32_t k = 0; k < n->n_inputs && w > 0 && (size_t)w < size; k++) {
        const sy_tensor *t = n->inputs[k];
        w += snprintf(out + w, size - (size_t)w, "|%u:%lld,%lld,%lld,%lld", t->dtype,
                      (long long)t->ne[0], (long long)t->ne[1], (long long)t->ne[2],
                      (long long)t->ne[3]);
    }
    for (uint32_t k = 0; k < SY_MAX_PARAMS && w > 0 && (size_t)w < size; k++)
        w += snprintf(out + w, size - (size_t)w, "|%lld,%g", (long long)n->params.i[k],
                      (double)n->params.f[k]);
}

static sy_status tb_model_graph(sy_runtime *rt, uint32_t dev, sy_graph *g, const tune_opts *o,
                                char (*keys)[512], uint32_t *n_keys, uint32_t max_keys,
                                tune_samples *out, uint32_t *skipped)
{
    uint32_t nn = sy_graph_node_count(g);
    for (uint32_t i = 0; i < nn; i++) {
        const sy_node *n = sy_graph_node(g, i);
        if (sy_op_is_view(n->op))
            continue;
        char key[512];
        tb_key(n, key, sizeof key);
        bool seen = false;
        for (uint32_t k = 0; k < *n_keys && !seen; k++)
            seen = strcmp(keys[k], key) == 0;
        if (seen || *n_keys >= max_keys)
            continue;
        memcpy(keys[(*n_keys)++], key, sizeof key);
        void *data[SY_MAX_INPUTS] = {0};
        for (uint32_t k = 0; k < n->n_inputs; k++)
            if (n->inputs[k]->role == SY_ROLE_WEIGHT && !n->inputs[k]->view_src)
                data[k] = sy_graph_host_data(g, n->inputs[k]);
        sy_graph *one = NULL;
        sy_status st = tune_node_graph((sy_op)n->op, (const sy_tensor *const *)n->inputs, data,
                                n->n_inputs, &n->params, &one);
        if (st != SY_OK) {
            (*skipped)++;
            continue;
        }
        st = tb_time(rt, dev, one, o, out, skipped);
        sy_graph_destroy(one);
        if (st != SY_OK)
            return st;
    }
    return SY_OK;
}

static int tb_cmp(const void *a, const void *b)
{
    double x = *(const double *)a, y = *(const double *)b;
    return x < y ? -1 : x > y;
}

static double tb_median(double *v, uint32_t n)
{
    qsort(v, n, sizeof *v, tb_cmp);
    return n % 2 ? v[n / 2] : 0.5 * (v[n / 2 - 1] + v[n / 2]);
}

sy_status tune_time_sequence(sy_bench *b, sy_graph *g, uint32_t reps, double *out_s,
                             double *out_step_s, tune_spread *out_spread)
{
    if (out_spread)
        *out_spread = (tune_spread){0};
    uint32_t nn = sy_graph_node_count(g);
    if (reps == 0)
        reps = 1;
    double s, pass_s = 0;
    sy_status st = SY_OK;
    /* Warm-up: the whole step once (first-use work such as kernel builds
     * and page faults), then one pass node by node. */
    if (out_step_s)
        st = sy_bench_run(b, 0, nn, &s);
    for (uint32_t i = 0; i < nn && st == SY_OK; i++)
        if (!sy_op_is_view(sy_graph_node(g, i)->op)) {
            st = sy_bench_run(b, i, 1, &s);
            pass_s += s;
        }
    /* Short steps (decode) get more passes, up to about half a second: their
     * nodes take a microsecond or less, where a repetition's noise is a
     * large part of the figure. */
    uint32_t n_reps = reps;
    while (n_reps + reps <= TUNE_MAX_REPS && (n_reps + reps) * pass_s * 2 < TUNE_SEQUENCE_S)
        n_reps += reps;
    double *t = calloc((size_t)nn * n_reps + 1u, sizeof *t);
    double *col = calloc(n_reps + 1u, sizeof *col), *step = calloc(n_reps + 1u, sizeof *step);
    if (st == SY_OK && (!t || !col || !step))
        st = SY_E_NO_MEMORY;
    /* |n_reps| passes through the whole graph, one node per launch, so every
     * node sees the caches as the step leaves them rather than as its own
     * previous repetition did; the whole step as one launch after each
     * pass, so both figures come from the same minutes of machine load. */
    for (uint32_t r = 0; r < n_reps && st == SY_OK; r++) {
        for (uint32_t i = 0; i < nn && st == SY_OK; i++)
            if (!sy_op_is_view(sy_graph_node(g, i)->op))
                st = sy_bench_run(b, i, 1, &t[(size_t)i * n_reps + r]);
        if (st == SY_OK && out_step_s)
            st = sy_bench_run(b, 0, nn, &step[r]);
    }
    for (uint32_t i = 0; i < nn && st == SY_OK; i++) {
        memcpy(col, &t[(size_t)i * n_reps], n_reps * sizeof *col);
        out_s[i] = sy_op_is_view(sy_graph_node(g, i)->op) ? 0 : sy__timing_estimate(col, n_reps);
    }
    if (st == SY_OK && out_step_s && out_spread) {
        /* sy__quantile sorts: the estimate below reads the same. */
        double mid = sy__quantile(step, n_reps, 0.5);
        double iqr = sy__quantile(step, n_reps, 0.75) - sy__quantile(step, n_reps, 0.25);
        *out_spread = (tune_spread){.iqr = mid > 0 ? iqr / mid : 0, .passes = n_reps};
    }
    if (st == SY_OK && out_step_s)
        *out_step_s = sy__timing_estimate(step, n_reps);
    free(step);
    free(col);
    free(t);
    return st;
}

void tune_step_split(tune_step_note *n, uint32_t n_nodes, double sync_s)
{
    /* A decode step is many short nodes, where a lone launch's extra
     * (waiting for the device, waking it again) is a fixed price per
     * launch: it is what the step saves per node.  Longer steps take the
     * decode steps' figure. */
    if (sync_s < 0)
        sync_s = n_nodes > 1 && n->nodes_s > n->launch_s
                     ? (n->nodes_s - n->launch_s) / (double)(n_nodes - 1)
                     : 0.0;
    if (n->alone_low_s > 0 && sync_s > n->alone_low_s)
        sync_s = n->alone_low_s;
    if (!(n->nodes_s - n_nodes * sync_s > 0))
        sync_s = 0;
    double rest = n->nodes_s - n_nodes * sync_s;
    double scale = rest > 0 ? (n->launch_s - sync_s) / rest : 1.0;
    n->applied = scale >= TUNE_MIN_FACTOR && scale <= TUNE_MAX_FACTOR;
    n->sync_s = n->applied ? sync_s : 0.0;
    n->scale = n->applied ? scale : 1.0;
}

double tune_node_in_step(const tune_step_note *n, double alone_s)
{
    double in = (alone_s - n->sync_s) * n->scale;
    double floor = alone_s * TUNE_MIN_FACTOR * 0.5;
    return in > floor ? in : floor;
}

double tune_alone_low(const double *t, uint32_t n)
{
    double *v = calloc(n + 1u, sizeof *v);
    uint32_t k = 0;
    for (uint32_t i = 0; v && i < n; i++)
        if (t[i] > 0)
            v[k++] = t[i];
    double low = k ? sy__quantile(v, k, 0.1) : 0.0;
    free(v);
    return low;
}

double tune_launch_sync(const tune_samples *s)
{
    double v[TUNE_MAX_STEPS];
    uint32_t n = 0;
    for (uint32_t k = 0; k < s->n_steps; k++)
        if (s->steps[k].tokens == 1 && s->steps[k].applied)
            v[n++] = s->steps[k].sync_s;
    return n ? tb_median(v, n) : 0.0;
}

/* Times every node of |g| in place on |dev| and adds one sample per
 * distinct key: the median over the nodes sharing it (30 layers give 30
 * timings of the same shape class; the median drops a layer whose caches
 * differ), scaled to the step as one launch (tune_step_note). */
static sy_status tb_model_inplace(sy_bench *b, sy_graph *g, uint32_t step_tokens,
                                  uint32_t step_past, const tune_opts *o, char (*keys)[512],
                                  uint32_t *n_keys, uint32_t max_keys, tune_samples *out)
{
    uint32_t nn = sy_graph_node_count(g);
    double *t = calloc(nn + 1u, sizeof *t), *same = calloc(nn + 1u, sizeof *same);
    char (*nk)[512] = calloc(nn + 1u, sizeof *nk);
    sy_status st = t && same && nk ? SY_OK : SY_E_NO_MEMORY;
    double launch_s = 0, nodes_s = 0;
    if (st == SY_OK)
        st = tune_time_sequence(b, g, tune_reps(o), t, &launch_s, NULL);
    uint32_t n_run = 0;
    for (uint32_t i = 0; i < nn && st == SY_OK; i++) {
        tb_key(sy_graph_node(g, i), nk[i], sizeof nk[i]);
        nodes_s += t[i];
        n_run += t[i] > 0;
    }
    tune_step_note note = {.tokens = step_tokens, .past = step_past, .launch_s = launch_s,
                           .nodes_s = nodes_s, .alone_low_s = tune_alone_low(t, nn)};
    tune_step_split(&note, n_run, step_tokens == 1 ? -1.0 : out->launch_sync_s);
    if (st == SY_OK && out->n_steps < TUNE_MAX_STEPS) {
        out->steps[out->n_steps++] = note;
        out->launch_sync_s = tune_launch_sync(out);
    }
    for (uint32_t i = 0; i < nn && st == SY_OK; i++) {
        const sy_node *n = sy_graph_node(g, i);
        if (sy_op_is_view(n->op) || t[i] <= 0)
            continue;
        bool seen = false;
        for (uint32_t k = 0; k < *n_keys && !seen; k++)
            seen = strcmp(keys[k], nk[i]) == 0;
        if (seen || *n_keys >= max_keys)
            continue;
        memcpy(keys[(*n_keys)++], nk[i], sizeof nk[i]);
        uint32_t ns = 0;
        for (uint32_t j = i; j < nn; j++)
            if (t[j] > 0 && strcmp(nk[j], nk[i]) == 0)
                same[ns++] = t[j];
        uint64_t flops, bytes;
        sy_op_cost(n, &flops, &bytes);
        tune_sample x = {.op = n->op, .dtype = (int32_t)n->inputs[0]->dtype,
                         .flops = (double)flops, .bytes = (double)bytes,
                         .seconds = tune_node_in_step(&note, tb_median(same, ns))};
        tb_label(n, &x);
        if (o->verbose)
            fprintf(stderr, "  %-10s %-5s %-20s %10.1f us (%u nodes)\n", sy_op_name((sy_op)x.op),
                    sy_dtype_name((uint32_t)x.dtype), x.shape, x.seconds * 1e6, ns);
        st = tune_samples_add(out, &x);
    }
    free(nk);
    free(same);
    free(t);
    return st;
}

uint32_t tune_model_steps(const tune_opts *o, uint32_t out_steps[][2], uint32_t max)
{
    /* Decode at the given context and around it (attention grows with the
     * context, so its points must span it).  Prefill at the given batch and
     * at eighths of it: matmul kernels work in tiles of tokens, so time
     * rises in steps (here 32 -> 40 tokens costs 1.9x, 40 -> 64 1.05x) that
     * only dense points catch, plus 1.5x and 2x the batch. */
    uint32_t past = o->decode_past, T = o->prefill_tokens ? o->prefill_tokens : 1;
    uint32_t quick[][2] = {{1, past}, {1, past * 4}, {T, 0}, {T / 4, 0}};
    uint32_t full[][2] = {{1, past},        {1, past * 4},     {1, past / 4},    {T, 0},
                          {T / 8, 0},       {T / 4, 0},        {T * 3 / 8, 0},   {T / 2, 0},
                          {T * 5 / 8, 0},   {T * 3 / 4, 0},    {T * 3 / 2, 0},   {T * 2, 0}};
    uint32_t (*list)[2] = o->quick ? quick : full;
    uint32_t n_list = o->quick ? sizeof quick / sizeof quick[0] : sizeof full / sizeof full[0];
    uint32_t n = 0;
    for (uint32_t i = 0; i < n_list && n < max; i++) {
        uint32_t tok = list[i][0] ? list[i][0] : 1;
        bool dup = false;
        for (uint32_t k = 0; k < n && !dup; k++)
            dup = out_steps[k][0] == tok && out_steps[k][1] == list[i][1];
        if (!dup) {
            out_steps[n][0] = tok;
            out_steps[n][1] = list[i][1];
            n++;
        }
    }
    return n;
}

static sy_status tb_model(sy_runtime *rt, uint32_t dev, sy_model *m, const tune_opts *o,
                          tune_samples *out, uint32_t *skipped)
{
    const uint32_t max_keys = 1024;
    char (*keys)[512] = calloc(max_keys, sizeof *keys);
    if (!keys)
        return SY_E_NO_MEMORY;
    uint32_t n_keys = 0;
    uint32_t steps[TUNE_MAX_STEPS][2];
    uint32_t n_steps = tune_model_steps(o, steps, TUNE_MAX_STEPS);
    sy_status st = SY_OK;
    for (uint32_t s = 0; s < n_steps && st == SY_OK; s++) {
        sy_graph *g = NULL;
        void *scratch = NULL;
        st = tune_build_step(m, steps[s][0], steps[s][1], &g, &scratch);
        sy_bench *b = NULL;
        /* In place when the device runs the whole step; node by node in
         * one-node graphs otherwise (an NPU that lacks some ops). */
        if (st == SY_OK && sy_bench_create(rt, g, dev, &b) == SY_OK)
            st = tb_model_inplace(b, g, steps[s][0], steps[s][1], o, keys, &n_keys, max_keys,
                                  out);
        else if (st == SY_OK)
            st = tb_model_graph(rt, dev, g, o, keys, &n_keys, max_keys, out, skipped);
        sy_bench_destroy(b);
        sy_graph_destroy(g);
        free(scratch);
    }
    free(keys);
    return st;
}

/* ------------------------------------------------------- standard set */

typedef struct tb_leaf {
    sy_dtype dtype;
    int64_t ne[4];
    uint32_t n_dims;
    sy_tensor_role role;
} tb_leaf;

static sy_status tb_std_one(sy_runtime *rt, uint32_t dev, const tune_opts *o, sy_op op,
                            const tb_leaf *leaves, uint32_t n, const sy_op_params *p,
                            tune_samples *out, uint32_t *skipped)
{
    sy_tensor shapes[SY_MAX_INPUTS];
    const sy_tensor *ptrs[SY_MAX_INPUTS];
    memset(shapes, 0, sizeof shapes);
    for (uint32_t k = 0; k < n; k++) {
        shapes[k].dtype = leaves[k].dtype;
        shapes[k].n_dims = leaves[k].n_dims;
        shapes[k].role = leaves[k].role;
        for (uint32_t d = 0; d < 4; d++)
            shapes[k].ne[d] = leaves[k].ne[d] ? leaves[k].ne[d] : 1;
        ptrs[k] = &shapes[k];
    }
    sy_graph *g = NULL;
    sy_status st = tune_node_graph(op, ptrs, NULL, n, p, &g);
    if (st != SY_OK) {
        if (o->verbose)
            fprintf(stderr, "  cannot build %s: %s\n", sy_op_name(op), sy_status_name(st));
        (*skipped)++;
        return SY_OK;
    }
    st = tb_time(rt, dev, g, o, out, skipped);
    sy_graph_destroy(g);
    return st;
}

static sy_status tb_standard(sy_runtime *rt, uint32_t dev, const tune_opts *o, tune_samples *out,
                             uint32_t *skipped)
{
    static const sy_dtype mm_types[] = {SY_DTYPE_F32, SY_DTYPE_F16, SY_DTYPE_Q8_0, SY_DTYPE_Q4_0,
                                        SY_DTYPE_Q4_1, SY_DTYPE_Q4_K, SY_DTYPE_Q6_K};
    static const int64_t mm_kn[][2] = {{512, 512}, {512, 2048}, {2048, 512}, {2048, 2048}};
    static const int64_t mm_m[] = {1, 16, 64};
    sy_status st = SY_OK;
    uint32_t n_kn = o->quick ? 3 : 4;
    for (size_t t = 0; t < sizeof mm_types / sizeof mm_types[0] && st == SY_OK; t++)
        for (uint32_t s = 0; s < n_kn && st == SY_OK; s++)
            for (size_t m = 0; m < 3 && st == SY_OK; m++) {
                tb_leaf l[2] = {{mm_types[t], {mm_kn[s][0], mm_kn[s][1]}, 2, SY_ROLE_WEIGHT},
                                {SY_DTYPE_F32, {mm_kn[s][0], mm_m[m]}, 2, SY_ROLE_INPUT}};
                st = tb_std_one(rt, dev, o, SY_OP_MATMUL, l, 2, NULL, out, skipped);
            }
    static const int64_t ew[] = {1024, 16384, 262144, 1048576};
    for (size_t i = 0; i < 4 && st == SY_OK; i++) {
        tb_leaf a = {SY_DTYPE_F32, {ew[i], 1}, 2, SY_ROLE_INPUT};
        tb_leaf two[2] = {a, a};
        sy_op_params sc = {.f = {0.5f, 0.0f}}, eps = {.f = {1e-5f}};
        tb_leaf rows = {SY_DTYPE_F32, {ew[i] >= 4096 ? 1024 : ew[i], ew[i] >= 4096 ? ew[i] / 1024 : 1}, 2,
                        SY_ROLE_INPUT};
        sy_op_params cp = {.i = {SY_DTYPE_F16}};
        st = tb_std_one(rt, dev, o, SY_OP_ADD, two, 2, NULL, out, skipped);
        if (st == SY_OK)
            st = tb_std_one(rt, dev, o, SY_OP_MUL, two, 2, NULL, out, skipped);
        if (st == SY_OK)
            st = tb_std_one(rt, dev, o, SY_OP_SCALE, &a, 1, &sc, out, skipped);
        if (st == SY_OK)
            st = tb_std_one(rt, dev, o, SY_OP_SILU, &a, 1, NULL, out, skipped);
        if (st == SY_OK)
            st = tb_std_one(rt, dev, o, SY_OP_SWIGLU, two, 2, NULL, out, skipped);
        if (st == SY_OK)
            st = tb_std_one(rt, dev, o, SY_OP_RMS_NORM, &rows, 1, &eps, out, skipped);
        if (st == SY_OK)
            st = tb_std_one(rt, dev, o, SY_OP_COPY, &a, 1, &cp, out, skipped);
        sy_op_params smx = {.f = {0.125f}};
        if (st == SY_OK)
            st = tb_std_one(rt, dev, o, SY_OP_SOFTMAX, &rows, 1, &smx, out, skipped);
    }
    static const int64_t toks[] = {1, 16, 64};
    static const int64_t ctx[] = {64, 512};
    for (size_t t = 0; t < 3 && st == SY_OK; t++) {
        int64_t T = toks[t];
        tb_leaf rope[2] = {{SY_DTYPE_F32, {64, 9, T}, 3, SY_ROLE_INPUT},
                           {SY_DTYPE_I32, {T}, 1, SY_ROLE_INPUT}};
        sy_op_params rp = {.i = {SY_ROPE_NEOX, 64}, .f = {10000.0f, 1.0f}};
        st = tb_std_one(rt, dev, o, SY_OP_ROPE, rope, 2, &rp, out, skipped);
        tb_leaf gr[2] = {{SY_DTYPE_Q8_0, {576, 4096}, 2, SY_ROLE_WEIGHT},
                         {SY_DTYPE_I32, {T}, 1, SY_ROLE_INPUT}};
        if (st == SY_OK)
            st = tb_std_one(rt, dev, o, SY_OP_GET_ROWS, gr, 2, NULL, out, skipped);
        for (size_t c = 0; c < 2 && st == SY_OK; c++) {
            int64_t S = ctx[c];
            tb_leaf at[3] = {{SY_DTYPE_F32, {64, 9, T}, 3, SY_ROLE_INPUT},
                             {SY_DTYPE_F16, {64, 3, S}, 3, SY_ROLE_KV},
                             {SY_DTYPE_F16, {64, 3, S}, 3, SY_ROLE_KV}};
            sy_op_params ap = {.i = {S - T, 0}, .f = {0.125f}};
            st = tb_std_one(rt, dev, o, SY_OP_ATTENTION, at, 3, &ap, out, skipped);
            tb_leaf kw[2] = {{SY_DTYPE_F16, {64, 3, S}, 3, SY_ROLE_KV},
                             {SY_DTYPE_F32, {64, 3, T}, 3, SY_ROLE_INPUT}};
            sy_op_params kp = {.i = {S - T}};
            if (st == SY_OK)
                st = tb_std_one(rt, dev, o, SY_OP_KV_WRITE, kw, 2, &kp, out, skipped);
        }
    }
    return st;
}

sy_status tune_device(sy_runtime *rt, uint32_t dev, sy_model *m, const tune_opts *o,
                      tune_samples *out, uint32_t *out_skipped)
{
    *out_skipped = 0;
    sy_status st = m ? tb_model(rt, dev, m, o, out, out_skipped)
                     : tb_standard(rt, dev, o, out, out_skipped);
    if (st == SY_OK)
        st = tune_token_tiles(rt, dev, o, out);
    return st;
}
