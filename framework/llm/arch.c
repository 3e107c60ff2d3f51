/* Graph builders: one decoder step of llama, qwen2 and gemma3 as a graph
 * over the op catalogue.  Llama and qwen2 differ only by QKV biases and
 * the rope style; gemma3 adds QK-norm, post-norms, GeGLU, an embedding
 * scale and sliding-window layers with their own rope base. */
#include <stdio.h>
#include <string.h>

#include "model_internal.h"

/* A builder that stops at the first error: every helper returns NULL once
 * the status is set, so a layer reads as straight-line code. */
typedef struct builder {
    sy_graph *g;
    const sy_model *m;
    const sy_step_desc *step;
    sy_status st;
    int layer; /* -1 outside layers: names get no "blk.N." prefix */
} builder;

/* Appends |s| to the name at out[at] (truncating at size - 1) and returns
 * the new length.  Names are joined by hand: a decode step names about
 * 500 nodes, and snprintf was 1% of SmolLM2's step (bench/overhead.sh). */
static size_t name_cat(char *out, size_t size, size_t at, const char *s)
{
    while (*s && at + 1 < size)
        out[at++] = *s++;
    out[at] = '\0';
    return at;
}

/* Appends |v| in decimal. */
static size_t name_cat_uint(char *out, size_t size, size_t at, uint32_t v)
{
    char digits[11];
    int n = 0;
    do {
        digits[n++] = (char)('0' + v % 10);
        v /= 10;
    } while (v);
    char rev[12];
    for (int i = 0; i < n; i++)
        rev[i] = digits[n - 1 - i];
    rev[n] = '\0';
    return name_cat(out, size, at, rev);
}

/* "blk.<layer>.<what>" inside a layer, else |what|. */
static void node_name(const builder *b, const char *what, char *out, size_t size)
{
    size_t at = 0;
    out[0] = '\0';
    if (b->layer >= 0) {
        at = name_cat(out, size, at, "blk.");
        at = name_cat_uint(out, size, at, (uint32_t)b->layer);
        at = name_cat(out, size, at, ".");
    }
    name_cat(out, size, at, what);
}

static sy_tensor *op4(builder *b, sy_op o, const char *what, sy_tensor *x, sy_tensor *y,
                      sy_tensor *z, sy_tensor *w, const sy_op_params *p)
{
    if (b->st != SY_OK)
        return NULL;
    sy_tensor *in[4] = {x, y, z, w};
    uint32_t n = w ? 4 : z ? 3 : y ? 2 : 1;
    char name[SY_NAME_MAX];
    node_name(b, what, name, sizeof name);
    sy_tensor *out = NULL;
    b->st = sy_graph_add_node(b->g, o, name, in, n, p, &out);
    return out;
}

static sy_tensor *op(builder *b, sy_op o, const char *what, sy_tensor *x, sy_tensor *y,
                     sy_tensor *z, const sy_op_params *p)
{
    return op4(b, o, what, x, y, z, NULL, p);
}

static sy_tensor *weight(builder *b, const sy_gguf_tensor_info *w)
{
    if (b->st != SY_OK)
        return NULL;
    sy_tensor *t = NULL;
    b->st = sy_graph_add_tensor(b->g, w->name, w->dtype, w->n_dims, w->ne, SY_ROLE_WEIGHT,
                                (void *)w->data, &t);
    return t;
}

static sy_tensor *leaf(builder *b, const char *name, sy_dtype dt, uint32_t n_dims,
                       const int64_t *ne, sy_tensor_role role, const void *data)
{
    if (b->st != SY_OK)
        return NULL;
    sy_tensor *t = NULL;
    b->st = sy_graph_add_tensor(b->g, name, dt, n_dims, ne, role, (void *)data, &t);
    return t;
}

/* rms_norm(x) * w */
static sy_tensor *norm(builder *b, const char *what, sy_tensor *x, const sy_gguf_tensor_info *w)
{
    sy_op_params p = {.f = {b->m->hp.rms_eps}};
    char nname[48];
    name_cat(nname, sizeof nname, name_cat(nname, sizeof nname, 0, what), ".rms");
    sy_tensor *n = op(b, SY_OP_RMS_NORM, nname, x, NULL, NULL, &p);
    return op(b, SY_OP_MUL, what, n, weight(b, w), NULL, NULL);
}

static sy_tensor *matmul(builder *b, const char *what, const sy_gguf_tensor_info *w, sy_tensor *x,
                         const sy_gguf_tensor_info *bias)
{
    sy_tensor *y = op(b, SY_OP_MATMUL, what, weight(b, w), x, NULL, NULL);
    if (bias) {
        char bname[48];
        name_cat(bname, sizeof bname, name_cat(bname, sizeof bname, 0, what), ".bias");
        y = op(b, SY_OP_ADD, bname, y, weight(b, bias), NULL, NULL);
    }
    return y;
}

static sy_tensor *reshape(builder *b, const char *what, sy_tensor *x, int64_t a, int64_t c,
                          int64_t d)
{
    sy_op_params p = {.i = {a, c, d, 1}};
    return op(b, SY_OP_RESHAPE, what, x, NULL, NULL, &p);
}

void sy__model_step_params(const sy_model *m, const sy_step_desc *s, uint32_t il,
                           sy_op_params *out_kv_write, sy_op_params *out_attention)
{
    const sy_hparams *hp = &m->hp;
    /* Row r of a session's cache holds position pos0 + r: writes and masks
     * count rows, RoPE the true positions (kv_cache.h). */
    int64_t first_row = s->n_past, window = sy__layer_is_local(hp, il) ? hp->sliding_window : 0;
    if (s->kv_layers) {
        first_row = (int64_t)s->n_past - s->kv_layers[il].pos0;
        window = s->kv_layers[il].window;
    }
    *out_kv_write = (sy_op_params){.i = {first_row}};
    *out_attention = (sy_op_params){.i = {first_row, window}, .f = {hp->attn_scale}};
}

static sy_tensor *attention_block(builder *b, uint32_t il, sy_tensor *h, sy_tensor *pos,
                                  sy_tensor *kc, sy_tensor *vc, sy_tensor *start)
{
    const sy_hparams *hp = &b->m->hp;
    const sy_layer_weights *w = &b->m->layers[il];
    const sy_step_desc *s = b->step;
    int64_t D = hp->head_dim, T = s->n_tokens;
    bool local = sy__layer_is_local(hp, il);
    sy_op_params at, ap;
    sy__model_step_params(b->m, s, il, &at, &ap);
    if (start) /* the first row comes from |start| when the step runs */
        at.i[0] = ap.i[0] = 0;

    sy_tensor *q = matmul(b, "attn_q", w->wq, h, w->bq);
    sy_tensor *k = matmul(b, "attn_k", w->wk, h, w->bk);
    sy_tensor *v = matmul(b, "attn_v", w->wv, h, w->bv);
    q = reshape(b, "attn_q.heads", q, D, hp->n_head, T);
    k = reshape(b, "attn_k.heads", k, D, hp->n_head_kv, T);
    v = reshape(b, "attn_v.heads", v, D, hp->n_head_kv, T);
    if (w->q_norm) {
        q = norm(b, "attn_q_norm", q, w->q_norm);
        k = norm(b, "attn_k_norm", k, w->k_norm);
    }
    sy_op_params rope = {
        .i = {hp->rope_neox ? SY_ROPE_NEOX : SY_ROPE_NORMAL, hp->n_rot},
        .f = {local ? hp->rope_base_local : hp->rope_base, hp->rope_scale},
    };
    q = op(b, SY_OP_ROPE, "attn_q.rope", q, pos, NULL, &rope);
    k = op(b, SY_OP_ROPE, "attn_k.rope", k, pos, NULL, &rope);
    k = op(b, SY_OP_KV_WRITE, "cache_k.write", kc, k, start, &at);
    v = op(b, SY_OP_KV_WRITE, "cache_v.write", vc, v, start, &at);
    sy_tensor *a = op4(b, SY_OP_ATTENTION, "attn", q, k, v, start, &ap);
    a = reshape(b, "attn.flat", a, D * hp->n_head, T, 1);
    a = matmul(b, "attn_output", w->wo, a, NULL);
    if (w->post_attn_norm)
        a = norm(b, "post_attention_norm", a, w->post_attn_norm);
    return a;
}

static sy_tensor *ffn_block(builder *b, uint32_t il, sy_tensor *h)
{
    const sy_layer_weights *w = &b->m->layers[il];
    sy_tensor *g = matmul(b, "ffn_gate", w->gate, h, NULL);
    sy_tensor *u = matmul(b, "ffn_up", w->up, h, NULL);
    sy_op glu = b->m->hp.arch == SY_ARCH_GEMMA3 ? SY_OP_GEGLU : SY_OP_SWIGLU;
    h = op(b, glu, "ffn_glu", g, u, NULL, NULL);
    h = matmul(b, "ffn_down", w->down, h, NULL);
    if (w->post_ffn_norm)
        h = norm(b, "post_ffw_norm", h, w->post_ffn_norm);
    return h;
}

sy_status sy__model_build_graph(const sy_model *m, const sy_step_desc *step, sy_graph **out_graph,
                                char *err, size_t err_size)
{
    *out_graph = NULL;
    const sy_hparams *hp = &m->hp;
    builder b = {.m = m, .step = step, .layer = -1};
    b.st = sy_graph_create(&b.g);
    if (b.st != SY_OK)
        return b.st;
    int64_t T = step->n_tokens;
    sy_tensor *ids = leaf(&b, "tokens", SY_DTYPE_I32, 1, &T, SY_ROLE_INPUT, step->tokens);
    sy_tensor *pos = leaf(&b, "positions", SY_DTYPE_I32, 1, &T, SY_ROLE_INPUT, step->positions);
    sy_tensor *x = op(&b, SY_OP_GET_ROWS, "token_embd", weight(&b, m->tok_embd), ids, NULL, NULL);
    if (hp->embd_scale != 1.0f) {
        sy_op_params p = {.f = {hp->embd_scale, 0.0f}};
        x = op(&b, SY_OP_SCALE, "token_embd.scale", x, NULL, NULL, &p);
    }
    int64_t kv_ne[3] = {hp->head_dim, hp->n_head_kv, step->n_ctx};
    /* Run-time KV positions: one I32 per layer in one leaf, so a device
     * running the attention takes them in one transfer a step; each layer
     * reads its own through a view. */
    sy_tensor *starts = NULL;
    if (step->kv_layers && step->kv_starts) {
        const int64_t n_layer = hp->n_layer;
        starts = leaf(&b, "kv_starts", SY_DTYPE_I32, 1, &n_layer, SY_ROLE_INPUT, step->kv_starts);
    }
    for (uint32_t il = 0; il < hp->n_layer && b.st == SY_OK; il++) {
        b.layer = (int)il;
        char kname[32], vname[32];
        name_cat_uint(kname, sizeof kname, name_cat(kname, sizeof kname, 0, "cache_k."), il);
        name_cat_uint(vname, sizeof vname, name_cat(vname, sizeof vname, 0, "cache_v."), il);
        const void *kd = step->kv_layers ? step->kv_layers[il].k : step->kv_k[il];
        const void *vd = step->kv_layers ? step->kv_layers[il].v : step->kv_v[il];
        if (step->kv_layers)
            kv_ne[2] = step->kv_layers[il].rows;
        sy_tensor *kc = leaf(&b, kname, step->kv_type, 3, kv_ne, SY_ROLE_KV, kd);
        sy_tensor *vc = leaf(&b, vname, step->kv_type, 3, kv_ne, SY_ROLE_KV, vd);
        sy_tensor *start = NULL;
        if (starts) {
            const int64_t nb = sizeof(int32_t);
            sy_op_params p = {.i = {1, 1, 1, 1, nb, nb, nb, nb * (int64_t)il}};
            start = op(&b, SY_OP_VIEW, "kv_start", starts, NULL, NULL, &p);
        }
        sy_tensor *h = norm(&b, "attn_norm", x, m->layers[il].attn_norm);
        h = attention_block(&b, il, h, pos, kc, vc, start);
        x = op(&b, SY_OP_ADD, "attn.residual", x, h, NULL, NULL);
        h = norm(&b, "ffn_norm", x, m->layers[il].ffn_norm);
        h = ffn_block(&b, il, h);
        x = op(&b, SY_OP_ADD, "ffn.residual", x, h, NULL, NULL);
    }
    b.layer = -1;
    if (!step->all_logits && T > 1 && b.st == SY_OK) {
        /* Only the last position's logits are needed: slice before the
         * norm so the output matmul reads one column. */
        sy_op_params p = {.i = {hp->n_embd, 1, 1, 1, (int64_t)x->nb[1], (int64_t)x->nb[1],
                                (int64_t)x->nb[1], (int64_t)((T - 1) * (int64_t)x->nb[1])}};
        x = op(&b, SY_OP_VIEW, "last_token", x, NULL, NULL, &p);
    }
    x = norm(&b, "output_norm", x, m->output_norm);
    sy_tensor *logits = matmul(&b, "output", m->output ? m->output : m->tok_embd, x, NULL);
    if (b.st == SY_OK)
        b.st = sy_graph_mark_output(b.g, logits);
    if (b.st == SY_OK)
        b.st = sy_graph_set_host_data(b.g, logits, step->logits);
    if (b.st == SY_OK)
        b.st = sy_graph_freeze(b.g);
    if (b.st != SY_OK) {
        snprintf(err, err_size, "building the %s graph (%u tokens after %u): %s", hp->arch_name,
                 step->n_tokens, step->n_past, sy_graph_last_error(b.g));
        sy_graph_destroy(b.g);
        return b.st;
    }
    *out_graph = b.g;
    return SY_OK;
}
