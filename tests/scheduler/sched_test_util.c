/* Helpers for the scheduler tests; see sched_test_util.h. */
#include "sched_test_util.h"

#include "plan_internal.h"

#include <criterion/criterion.h>
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>
#include <unistd.h>

uint64_t st_fresh_seed(void)
{
    const char *env = getenv("SY_TEST_SEED");
    if (env && *env)
        return strtoull(env, NULL, 0);
    struct timespec ts;
    clock_gettime(CLOCK_REALTIME, &ts);
    return (uint64_t)ts.tv_nsec * 0x9e3779b97f4a7c15ull ^ (uint64_t)ts.tv_sec ^
           (uint64_t)getpid() << 32;
}

uint64_t st_next(uint64_t *s)
{
    uint64_t z = (*s += 0x9e3779b97f4a7c15ull);
    z = (z ^ (z >> 30)) * 0xbf58476d1ce4e5b9ull;
    z = (z ^ (z >> 27)) * 0x94d049bb133111ebull;
    return z ^ (z >> 31);
}

double st_uniform(uint64_t *s)
{
    return (double)(st_next(s) >> 11) * (1.0 / 9007199254740992.0);
}

uint32_t st_range(uint64_t *s, uint32_t lo, uint32_t hi)
{
    return lo + (uint32_t)(st_next(s) % ((uint64_t)hi - lo + 1));
}

/* ------------------------------------------------------ random problems */

static void fill_costs(sy__sched_problem *pb, uint32_t i, double hole_rate, uint64_t *rng)
{
    uint32_t D = pb->n_dev;
    bool any = false;
    for (uint32_t d = 0; d < D; d++) {
        bool hole = D > 1 && st_uniform(rng) < hole_rate;
        pb->cost[(size_t)i * D + d] = hole ? INFINITY : 1.0 + 99.0 * st_uniform(rng);
        any = any || !hole;
    }
    if (!any)
        pb->cost[(size_t)i * D + st_range(rng, 0, D - 1)] = 1.0 + 99.0 * st_uniform(rng);
    double size = 40.0 * st_uniform(rng);
    for (uint32_t s = 0; s < D; s++)
        for (uint32_t d = 0; d < D; d++)
            pb->xfer[((size_t)i * D + s) * D + d] =
                s == d ? 0.0 : 30.0 * st_uniform(rng) + size * (0.5 + st_uniform(rng));
}

/* Adds a series-parallel piece of |k| nodes reading |entry| (UINT32_MAX:
 * none) to |pb| from node *next on; returns its exit node. */
static uint32_t sp_piece(sy__sched_problem *pb, uint32_t k, uint32_t entry, uint32_t *next,
                         uint32_t *e, uint64_t *rng)
{
    if (k >= 4 && st_uniform(rng) < 0.5) { /* two branches from entry, joined */
        uint32_t a = st_range(rng, 1, k - 2);
        uint32_t x = sp_piece(pb, a, entry, next, e, rng);
        uint32_t y = sp_piece(pb, k - 1 - a, entry, next, e, rng);
        uint32_t j = (*next)++;
        pb->in_start[j] = *e;
        pb->in_list[(*e)++] = x;
        pb->in_list[(*e)++] = y;
        return j;
    }
    if (k >= 2) { /* in series */
        uint32_t a = st_range(rng, 1, k - 1);
        return sp_piece(pb, k - a, sp_piece(pb, a, entry, next, e, rng), next, e, rng);
    }
    uint32_t v = (*next)++;
    pb->in_start[v] = *e;
    if (entry != UINT32_MAX)
        pb->in_list[(*e)++] = entry;
    return v;
}

void st_random_problem(sy__sched_problem *pb, uint32_t n, uint32_t n_dev, st_shape shape,
                       double hole_rate, uint64_t *rng)
{
    if (shape == ST_SERIES_PARALLEL) {
        cr_assert_eq(sy__sched_problem_init(pb, n, n_dev, n * 3 + 1), SY_OK);
        for (uint32_t i = 0; i < n; i++)
            fill_costs(pb, i, hole_rate, rng);
        uint32_t next = 0, e = 0;
        sp_piece(pb, n, UINT32_MAX, &next, &e, rng);
        pb->in_start[n] = e;
        return;
    }
    cr_assert_eq(sy__sched_problem_init(pb, n, n_dev, n * 3 + 1), SY_OK);
    uint32_t e = 0;
    for (uint32_t i = 0; i < n; i++) {
        pb->in_start[i] = e;
        fill_costs(pb, i, hole_rate, rng);
        if (i == 0)
            continue;
        if (shape == ST_DAG) {
            uint32_t k = st_range(rng, 1, i < 3 ? i : 3);
            for (uint32_t j = 0; j < k; j++) {
                uint32_t p = st_range(rng, 0, i - 1);
                bool dup = false;
                for (uint32_t q = pb->in_start[i]; q < e; q++)
                    dup = dup || pb->in_list[q] == p;
                if (!dup)
                    pb->in_list[e++] = p;
            }
            continue;
        }
        pb->in_list[e++] = i - 1;
        if (shape == ST_CHAIN_SKIP && i >= 2 && st_uniform(rng) < 0.3) {
            uint32_t back = st_range(rng, 2, i < 4 ? i : 4);
            pb->in_list[e++] = i - back;
        }
    }
    pb->in_start[n] = e;
}

void st_layered_problem(sy__sched_problem *pb, uint32_t block, uint32_t repeat, uint32_t n_dev,
                        uint64_t *rng)
{
    sy__sched_problem tpl;
    st_random_problem(&tpl, block, n_dev, ST_CHAIN_SKIP, 0.2, rng);
    uint32_t n = block * repeat, D = n_dev;
    cr_assert_eq(sy__sched_problem_init(pb, n, D, (tpl.in_start[block] + 1) * repeat), SY_OK);
    uint32_t e = 0;
    for (uint32_t r = 0; r < repeat; r++) {
        for (uint32_t b = 0; b < block; b++) {
            uint32_t i = r * block + b;
            pb->in_start[i] = e;
            memcpy(&pb->cost[(size_t)i * D], &tpl.cost[(size_t)b * D], D * sizeof(double));
            memcpy(&pb->xfer[(size_t)i * D * D], &tpl.xfer[(size_t)b * D * D],
                   D * D * sizeof(double));
            if (b == 0 && r > 0)
                pb->in_list[e++] = i - 1; /* the previous block's last value */
            for (uint32_t q = tpl.in_start[b]; q < tpl.in_start[b + 1]; q++)
                pb->in_list[e++] = r * block + tpl.in_list[q];
        }
    }
    pb->in_start[n] = e;
    sy__sched_problem_deinit(&tpl);
}

/* ------------------------------------------------------------- runtimes */

void st_log_append(void *user, sy_log_level level, const char *msg)
{
    st_log *log = user;
    (void)level;
    size_t len = strlen(log->text);
    snprintf(log->text + len, sizeof log->text - len, "%s\n", msg);
}

sy_runtime *st_runtime_logging(const char *plugin_path, sy_log_fn fn, void *user)
{
    sy_runtime_options o;
    sy_runtime_options_init(&o);
    o.plugin_path = plugin_path;
    o.no_default_paths = true;
    o.log_fn = fn;
    o.log_user = user;
    o.log_level = SY_LOG_DEBUG;
    sy_runtime *rt = NULL;
    cr_assert_eq(sy_runtime_create(&o, &rt), SY_OK);
    return rt;
}

sy_runtime *st_runtime(void)
{
    sy_runtime_options o;
    sy_runtime_options_init(&o);
    o.plugin_path = SY_TEST_CPU_PLUGIN ":" PLUGIN("testdev.so") ":" PLUGIN("opaquedev.so");
    o.no_default_paths = true;
    sy_runtime *rt = NULL;
    cr_assert_eq(sy_runtime_create(&o, &rt), SY_OK);
    cr_assert_eq(sy_runtime_device_count(rt), ST_N_DEVICES);
    uint32_t idx;
    cr_assert_eq(sy_runtime_find_device(rt, "cpu", &idx), SY_OK);
    cr_assert_eq(idx, ST_CPU);
    cr_assert_eq(sy_runtime_find_device(rt, "testdev", &idx), SY_OK);
    cr_assert_eq(idx, ST_TESTDEV);
    return rt;
}

const char *st_fixture(const char *name, char *buf, size_t size)
{
    snprintf(buf, size, "%s/tests/scheduler/fixtures/%s", SY_TEST_SOURCE_DIR, name);
    return buf;
}

const char *st_smollm2(void)
{
    const char *path = SY_TEST_SOURCE_DIR "/models/SmolLM2-135M-Instruct.Q4_1.gguf";
    if (access(path, R_OK) != 0)
        cr_skip_test("%s not fetched (tools/fetch-models.sh)", path);
    return path;
}

/* ------------------------------------------------------------ planners */

sy_planner *st_planner_with_profiles(sy_runtime *rt)
{
    sy_planner *pl = NULL;
    cr_assert_eq(sy_planner_create(rt, &pl), SY_OK);
    char path[512];
    cr_assert_eq(
        sy_planner_load_profile(pl, st_fixture("testdev_fast_matmul.json", path, sizeof path)),
        SY_OK, "%s", sy_planner_last_error(pl));
    cr_assert_eq(sy_planner_load_profile(
                     pl, st_fixture("opaquedev_fast_elementwise.json", path, sizeof path)),
                 SY_OK, "%s", sy_planner_last_error(pl));
    return pl;
}

const st_decoder_shape st_small_decoder = {
    .n_layer = 3,
    .n_embd = 64,
    .n_head = 4,
    .n_head_kv = 2,
    .n_ff = 128,
    .n_vocab = 256,
    .n_ctx = 32,
    .n_tokens = 1,
    .n_past = 5,
    .kv_type = SY_DTYPE_F16,
    .with_data = false,
};

uint32_t st_node_index(const sy_graph *g, const char *name)
{
    for (uint32_t i = 0; i < sy_graph_node_count(g); i++)
        if (strcmp(sy_graph_node(g, i)->name, name) == 0)
            return i;
    cr_assert_fail("no node '%s'", name);
    return 0;
}

/* ------------------------------------------------------------- graphs */

static void *st_keep(st_graph *sg, size_t bytes)
{
    if (sg->n_blocks == sg->cap_blocks) {
        sg->cap_blocks = sg->cap_blocks ? sg->cap_blocks * 2 : 64;
        sg->blocks = realloc(sg->blocks, sg->cap_blocks * sizeof *sg->blocks);
        cr_assert_not_null(sg->blocks);
    }
    void *p = calloc(1, bytes ? bytes : 1);
    cr_assert_not_null(p);
    sg->blocks[sg->n_blocks++] = p;
    return p;
}

static sy_tensor *st_leaf(st_graph *sg, const char *name, sy_dtype dt, uint32_t n_dims,
                          const int64_t *ne, sy_tensor_role role, bool with_data, uint64_t *rng,
                          float scale)
{
    int64_t count = 1;
    for (uint32_t d = 0; d < n_dims; d++)
        count *= ne[d];
    void *data = NULL;
    if (with_data) {
        data = st_keep(sg, (size_t)count * sy_dtype_type_size(dt));
        if (dt == SY_DTYPE_F32)
            for (int64_t k = 0; k < count; k++)
                ((float *)data)[k] = scale * (float)(2.0 * st_uniform(rng) - 1.0);
    }
    sy_tensor *t = NULL;
    cr_assert_eq(sy_graph_add_tensor(sg->g, name, dt, n_dims, ne, role, data, &t), SY_OK, "%s",
                 sy_graph_last_error(sg->g));
    return t;
}

static sy_tensor *st_op(st_graph *sg, sy_op op, const char *name, sy_tensor *a, sy_tensor *b,
                        sy_tensor *c, const sy_op_params *p)
{
    sy_tensor *in[3] = {a, b, c};
    sy_tensor *out = NULL;
    cr_assert_eq(sy_graph_add_node(sg->g, op, name, in,
                                   c   ? 3
                                   : b ? 2
                                       : 1,
                                   p, &out),
                 SY_OK, "%s: %s", name, sy_graph_last_error(sg->g));
    return out;
}

static void st_mark_output(st_graph *sg, sy_tensor *t)
{
    uint64_t count = (uint64_t)sy_tensor_nelements(t);
    void *host = st_keep(sg, sy_tensor_nbytes(t));
    cr_assert_eq(sy_graph_mark_output(sg->g, t), SY_OK);
    cr_assert_eq(sy_graph_set_host_data(sg->g, t, host), SY_OK);
    if (!sg->out) {
        sg->out = host;
        sg->out_count = count;
    }
}

void st_random_graph(st_graph *sg, uint32_t n_ops, bool argmax, uint64_t *rng)
{
    memset(sg, 0, sizeof *sg);
    cr_assert_eq(sy_graph_create(&sg->g), SY_OK);
    int64_t ne[2] = {32, 4}, wne[2] = {32, 32};
    sy_tensor *pool[64];
    uint32_t n = 0;
    pool[n++] = st_leaf(sg, "x", SY_DTYPE_F32, 2, ne, SY_ROLE_INPUT, true, rng, 1.0f);
    for (uint32_t k = 0; k < n_ops && n < 64; k++) {
        char name[32];
        snprintf(name, sizeof name, "op%u", k);
        sy_tensor *a = pool[st_range(rng, n > 4 ? n - 4 : 0, n - 1)];
        sy_tensor *b = pool[st_range(rng, 0, n - 1)];
        sy_tensor *out;
        switch (st_range(rng, 0, 7)) {
        case 0:
            out = st_op(sg, SY_OP_ADD, name, a, b, NULL, NULL);
            break;
        case 1:
            out = st_op(sg, SY_OP_MUL, name, a, b, NULL, NULL);
            break;
        case 2: {
            sy_op_params p = {.f = {0.5f, 0.1f}};
            out = st_op(sg, SY_OP_SCALE, name, a, NULL, NULL, &p);
            break;
        }
        case 3:
            out = st_op(sg, SY_OP_SILU, name, a, NULL, NULL, NULL);
            break;
        case 4: {
            sy_op_params p = {.f = {1e-5f}};
            out = st_op(sg, SY_OP_RMS_NORM, name, a, NULL, NULL, &p);
            break;
        }
        case 5: {
            char wname[32];
            snprintf(wname, sizeof wname, "w%u", k);
            sy_tensor *w =
                st_leaf(sg, wname, SY_DTYPE_F32, 2, wne, SY_ROLE_WEIGHT, true, rng, 0.2f);
            out = st_op(sg, SY_OP_MATMUL, name, w, a, NULL, NULL);
            break;
        }
        case 6: {
            sy_op_params p = {.f = {1.0f}};
            out = st_op(sg, SY_OP_SOFTMAX, name, a, NULL, NULL, &p);
            break;
        }
        default: {
            sy_op_params p = {.i = {32, 4, 1, 1}};
            out = st_op(sg, SY_OP_RESHAPE, name, a, NULL, NULL, &p);
            break;
        }
        }
        pool[n++] = out;
    }
    sy_tensor *last = pool[n - 1];
    if (argmax) {
        sy_tensor *am = st_op(sg, SY_OP_ARGMAX, "argmax", last, NULL, NULL, NULL);
        st_mark_output(sg, last);
        cr_assert_eq(sy_graph_mark_output(sg->g, am), SY_OK);
        cr_assert_eq(sy_graph_set_host_data(sg->g, am, st_keep(sg, sy_tensor_nbytes(am))), SY_OK);
    } else {
        st_mark_output(sg, last);
    }
    cr_assert_eq(sy_graph_freeze(sg->g), SY_OK, "%s", sy_graph_last_error(sg->g));
}

/* "blk.<il>.<what>" into |buf| (SY_NAME_MAX bytes). */
static const char *layer_name(char *buf, uint32_t il, const char *what)
{
    snprintf(buf, SY_NAME_MAX, "blk.%u.%s", il, what);
    return buf;
}

static sy_tensor *layer_weight(st_graph *sg, uint32_t il, const char *what, bool data,
                               uint64_t *rng, uint32_t n_dims, const int64_t *ne, float scale)
{
    char name[SY_NAME_MAX];
    snprintf(name, sizeof name, "blk.%u.%s.weight", il, what);
    return st_leaf(sg, name, SY_DTYPE_F32, n_dims, ne, SY_ROLE_WEIGHT, data, rng, scale);
}

void st_decoder_graph(st_graph *sg, const st_decoder_shape *sh, uint64_t seed)
{
    memset(sg, 0, sizeof *sg);
    uint64_t rng = seed;
    bool data = sh->with_data;
    cr_assert_eq(sy_graph_create(&sg->g), SY_OK);
    int64_t E = sh->n_embd, H = sh->n_head, Hk = sh->n_head_kv, Dh = E / H, F = sh->n_ff;
    int64_t T = sh->n_tokens, V = sh->n_vocab;
    int32_t *tok = data ? st_keep(sg, (size_t)T * 4) : NULL;
    int32_t *pos = data ? st_keep(sg, (size_t)T * 4) : NULL;
    for (int64_t t = 0; data && t < T; t++) {
        tok[t] = (int32_t)(st_next(&rng) % (uint64_t)V);
        pos[t] = (int32_t)(sh->n_past + t);
    }
    sy_tensor *tokens, *positions;
    cr_assert_eq(
        sy_graph_add_tensor(sg->g, "tokens", SY_DTYPE_I32, 1, &T, SY_ROLE_INPUT, tok, &tokens),
        SY_OK);
    cr_assert_eq(sy_graph_add_tensor(sg->g, "positions", SY_DTYPE_I32, 1, &T, SY_ROLE_INPUT, pos,
                                     &positions),
                 SY_OK);
    int64_t emb_ne[2] = {E, V};
    sy_tensor *emb =
        st_leaf(sg, "token_embd.weight", SY_DTYPE_F32, 2, emb_ne, SY_ROLE_WEIGHT, data, &rng, 1.0f);
    sy_tensor *x = st_op(sg, SY_OP_GET_ROWS, "token_embd", emb, tokens, NULL, NULL);
    int64_t norm_ne[1] = {E}, kv_ne[3] = {Dh, Hk, sh->n_ctx};
    float ws = 1.0f / sqrtf((float)E);
    for (uint32_t il = 0; il < sh->n_layer; il++) {
        char nm[SY_NAME_MAX], wn[SY_NAME_MAX];
        int64_t q_ne[2] = {E, E}, kv_w[2] = {E, Dh * Hk}, o_ne[2] = {E, E};
        int64_t up_ne[2] = {E, F}, down_ne[2] = {F, E};
        snprintf(wn, sizeof wn, "cache_k.%u", il);
        sy_tensor *kc = st_leaf(sg, wn, sh->kv_type, 3, kv_ne, SY_ROLE_KV, data, &rng, 0.0f);
        snprintf(wn, sizeof wn, "cache_v.%u", il);
        sy_tensor *vc = st_leaf(sg, wn, sh->kv_type, 3, kv_ne, SY_ROLE_KV, data, &rng, 0.0f);
        sy_op_params eps = {.f = {1e-5f}};
        sy_tensor *h =
            st_op(sg, SY_OP_RMS_NORM, layer_name(nm, il, "attn_norm.rms"), x, NULL, NULL, &eps);
        h = st_op(sg, SY_OP_MUL, layer_name(nm, il, "attn_norm"), h,
                  layer_weight(sg, il, "attn_norm", data, &rng, 1, norm_ne, 1.0f), NULL, NULL);
        sy_tensor *q =
            st_op(sg, SY_OP_MATMUL, layer_name(nm, il, "attn_q"),
                  layer_weight(sg, il, "attn_q", data, &rng, 2, q_ne, ws), h, NULL, NULL);
        sy_tensor *k =
            st_op(sg, SY_OP_MATMUL, layer_name(nm, il, "attn_k"),
                  layer_weight(sg, il, "attn_k", data, &rng, 2, kv_w, ws), h, NULL, NULL);
        sy_tensor *v =
            st_op(sg, SY_OP_MATMUL, layer_name(nm, il, "attn_v"),
                  layer_weight(sg, il, "attn_v", data, &rng, 2, kv_w, ws), h, NULL, NULL);
        sy_op_params qh = {.i = {Dh, H, T, 1}}, kh = {.i = {Dh, Hk, T, 1}};
        q = st_op(sg, SY_OP_RESHAPE, layer_name(nm, il, "attn_q.heads"), q, NULL, NULL, &qh);
        k = st_op(sg, SY_OP_RESHAPE, layer_name(nm, il, "attn_k.heads"), k, NULL, NULL, &kh);
        v = st_op(sg, SY_OP_RESHAPE, layer_name(nm, il, "attn_v.heads"), v, NULL, NULL, &kh);
        sy_op_params rope = {.i = {SY_ROPE_NORMAL, Dh}, .f = {10000.0f, 1.0f}};
        q = st_op(sg, SY_OP_ROPE, layer_name(nm, il, "attn_q.rope"), q, positions, NULL, &rope);
        k = st_op(sg, SY_OP_ROPE, layer_name(nm, il, "attn_k.rope"), k, positions, NULL, &rope);
        sy_op_params at = {.i = {sh->n_past}};
        k = st_op(sg, SY_OP_KV_WRITE, layer_name(nm, il, "cache_k.write"), kc, k, NULL, &at);
        v = st_op(sg, SY_OP_KV_WRITE, layer_name(nm, il, "cache_v.write"), vc, v, NULL, &at);
        sy_op_params ap = {.i = {sh->n_past, 0}, .f = {1.0f / sqrtf((float)Dh)}};
        sy_tensor *a = st_op(sg, SY_OP_ATTENTION, layer_name(nm, il, "attn"), q, k, v, &ap);
        sy_op_params flat = {.i = {E, T, 1, 1}};
        a = st_op(sg, SY_OP_RESHAPE, layer_name(nm, il, "attn.flat"), a, NULL, NULL, &flat);
        a = st_op(sg, SY_OP_MATMUL, layer_name(nm, il, "attn_output"),
                  layer_weight(sg, il, "attn_output", data, &rng, 2, o_ne, ws), a, NULL, NULL);
        x = st_op(sg, SY_OP_ADD, layer_name(nm, il, "attn.residual"), x, a, NULL, NULL);
        h = st_op(sg, SY_OP_RMS_NORM, layer_name(nm, il, "ffn_norm.rms"), x, NULL, NULL, &eps);
        h = st_op(sg, SY_OP_MUL, layer_name(nm, il, "ffn_norm"), h,
                  layer_weight(sg, il, "ffn_norm", data, &rng, 1, norm_ne, 1.0f), NULL, NULL);
        sy_tensor *gt =
            st_op(sg, SY_OP_MATMUL, layer_name(nm, il, "ffn_gate"),
                  layer_weight(sg, il, "ffn_gate", data, &rng, 2, up_ne, ws), h, NULL, NULL);
        sy_tensor *up =
            st_op(sg, SY_OP_MATMUL, layer_name(nm, il, "ffn_up"),
                  layer_weight(sg, il, "ffn_up", data, &rng, 2, up_ne, ws), h, NULL, NULL);
        h = st_op(sg, SY_OP_SWIGLU, layer_name(nm, il, "ffn_glu"), gt, up, NULL, NULL);
        h = st_op(sg, SY_OP_MATMUL, layer_name(nm, il, "ffn_down"),
                  layer_weight(sg, il, "ffn_down", data, &rng, 2, down_ne, 1.0f / sqrtf((float)F)),
                  h, NULL, NULL);
        x = st_op(sg, SY_OP_ADD, layer_name(nm, il, "ffn.residual"), x, h, NULL, NULL);
    }
    sy_op_params eps = {.f = {1e-5f}};
    sy_tensor *h = st_op(sg, SY_OP_RMS_NORM, "output_norm.rms", x, NULL, NULL, &eps);
    h = st_op(sg, SY_OP_MUL, "output_norm", h,
              st_leaf(sg, "output_norm.weight", SY_DTYPE_F32, 1, norm_ne, SY_ROLE_WEIGHT, data,
                      &rng, 1.0f),
              NULL, NULL);
    sy_tensor *logits = st_op(sg, SY_OP_MATMUL, "output", emb, h, NULL, NULL);
    if (data)
        st_mark_output(sg, logits);
    else
        cr_assert_eq(sy_graph_mark_output(sg->g, logits), SY_OK);
    cr_assert_eq(sy_graph_freeze(sg->g), SY_OK, "%s", sy_graph_last_error(sg->g));
}

void st_graph_free(st_graph *sg)
{
    sy_graph_destroy(sg->g);
    for (uint32_t i = 0; i < sg->n_blocks; i++)
        free(sg->blocks[i]);
    free(sg->blocks);
    memset(sg, 0, sizeof *sg);
}

/* ----------------------------------------------------------- plan checks */

#if defined(__SANITIZE_ADDRESS__)
#define ST_LEAK_CHECK 1
#elif defined(__has_feature)
#if __has_feature(address_sanitizer)
#define ST_LEAK_CHECK 1
#endif
#endif
#ifdef ST_LEAK_CHECK
#include <sanitizer/lsan_interface.h>
void st_check_leaks(void)
{
    cr_assert_eq(__lsan_do_recoverable_leak_check(), 0, "memory leaked (report on stderr)");
}
#else
void st_check_leaks(void)
{
}
#endif

static uint32_t root_of(const sy_tensor *t)
{
    return t->view_src ? t->view_src->id : t->id;
}

bool st_check_plan(sy_runtime *rt, const sy_graph *g, const sy_plan *plan, char *why, size_t size)
{
    uint32_t nt = sy_graph_tensor_count(g), D = plan->n_dev;
    uint8_t *avail = calloc((size_t)nt * D + 1, 1);
    uint8_t *moved = calloc((size_t)nt * D + 1, 1);
    bool ok = avail && moved;
    for (uint32_t t = 0; ok && t < nt; t++)
        if (plan->leaf_home[t] != SY__NO_DEVICE)
            avail[(size_t)t * D + plan->leaf_home[t]] = 1;
    for (uint32_t k = 0; ok && k < plan->n_steps; k++) {
        const sy__plan_step *s = &plan->steps[k];
        if (s->kind == SY_PLAN_STEP_TRANSFER) {
            const char *name = sy_graph_tensor(g, s->tensor)->name;
            if (!avail[(size_t)s->tensor * D + s->src]) {
                snprintf(why, size, "step %u moves '%s' from %s, which does not hold it", k, name,
                         plan->dev_name[s->src]);
                ok = false;
            } else if (moved[(size_t)s->tensor * D + s->dev]++) {
                snprintf(why, size, "step %u moves '%s' to %s a second time", k, name,
                         plan->dev_name[s->dev]);
                ok = false;
            }
            avail[(size_t)s->tensor * D + s->dev] = 1;
            continue;
        }
        for (uint32_t q = 0; ok && q < s->count; q++) {
            uint32_t i = plan->order[s->first + q];
            const sy_node *n = sy_graph_node(g, i);
            sy_support sup;
            if (plan->nodes[i].dev != s->dev) {
                snprintf(why, size, "node '%s' sits in a segment of another device", n->name);
                ok = false;
            } else if (!sy_runtime_device_supports(rt, plan->dev_index[s->dev], n, &sup)) {
                snprintf(why, size, "node '%s' runs on %s, which refuses it: %s", n->name,
                         plan->dev_name[s->dev], sup.text);
                ok = false;
            }
            for (uint32_t j = 0; ok && j < n->n_inputs; j++) {
                uint32_t r = root_of(n->inputs[j]);
                if (!avail[(size_t)r * D + s->dev]) {
                    snprintf(why, size, "node '%s' on %s reads '%s' without a transfer", n->name,
                             plan->dev_name[s->dev], sy_graph_tensor(g, r)->name);
                    ok = false;
                }
            }
            avail[(size_t)root_of(n->output) * D + s->dev] = 1;
        }
    }
    for (uint32_t d = 0; ok && d < D; d++) {
        const sy_plan_memory *m = &plan->mem[d];
        uint64_t total = m->weight_bytes + m->kv_bytes + m->activation_bytes;
        if (m->budget_bytes && total > m->budget_bytes) {
            snprintf(why, size, "%s holds %llu bytes over its budget of %llu", plan->dev_name[d],
                     (unsigned long long)total, (unsigned long long)m->budget_bytes);
            ok = false;
        }
    }
    free(avail);
    free(moved);
    return ok;
}

uint32_t st_devices_used(const sy_plan *plan)
{
    uint32_t mask = 0, n = 0;
    for (uint32_t k = 0; k < plan->n_steps; k++)
        if (plan->steps[k].kind == SY_PLAN_STEP_SEGMENT)
            mask |= 1u << plan->steps[k].dev;
    for (; mask; mask &= mask - 1)
        n++;
    return n;
}

sy_plan *st_plan(sy_planner *pl, const sy_graph *g, const sy_plan_options *opts)
{
    sy_plan *plan = NULL;
    sy_status st = sy_planner_plan(pl, g, opts, &plan);
    cr_assert_eq(st, SY_OK, "plan: %s: %s", sy_status_name(st), sy_planner_last_error(pl));
    cr_assert_not_null(plan);
    return plan;
}
