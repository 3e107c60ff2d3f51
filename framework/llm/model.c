/* Model loading: GGUF -> hyperparameters, weight table, tokenizer. */
#include <math.h>
#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

#include "model_internal.h"
#include "runtime_internal.h"

static double now_ms(void)
{
    struct timespec ts;
    clock_gettime(CLOCK_MONOTONIC, &ts);
    return ts.tv_sec * 1e3 + ts.tv_nsec / 1e6;
}

bool sy__layer_is_local(const sy_hparams *hp, uint32_t il)
{
    return hp->sliding_window > 0 && hp->swa_period > 0 && (il + 1) % hp->swa_period != 0;
}

typedef struct loader {
    sy_model *m;
    char *err;
    size_t err_size;
} loader;

static sy_status load_fail(loader *l, sy_status st, const char *fmt, ...)
    __attribute__((format(printf, 3, 4)));

static sy_status load_fail(loader *l, sy_status st, const char *fmt, ...)
{
    int n = snprintf(l->err, l->err_size, "%s: ", l->m->path);
    va_list ap;
    va_start(ap, fmt);
    if (n >= 0 && (size_t)n < l->err_size)
        vsnprintf(l->err + n, l->err_size - (size_t)n, fmt, ap);
    va_end(ap);
    return st;
}

/* Reads "<arch>.<suffix>" as u32; |required| decides absence. */
static sy_status arch_u32(loader *l, const char *suffix, bool required, uint32_t *out)
{
    char key[128];
    snprintf(key, sizeof key, "%s.%s", l->m->hp.arch_name, suffix);
    sy_status st = sy_gguf_get_u32(l->m->gguf, key, out);
    if (st == SY_E_NOT_FOUND && !required)
        return SY_OK;
    if (st != SY_OK)
        return load_fail(l, st == SY_E_NOT_FOUND ? SY_E_FORMAT : st, "metadata %s: %s", key,
                         st == SY_E_NOT_FOUND ? "missing" : sy_gguf_last_error(l->m->gguf));
    return SY_OK;
}

static sy_status arch_f32(loader *l, const char *suffix, bool required, float *out)
{
    char key[128];
    snprintf(key, sizeof key, "%s.%s", l->m->hp.arch_name, suffix);
    sy_status st = sy_gguf_get_f32(l->m->gguf, key, out);
    if (st == SY_E_NOT_FOUND && !required)
        return SY_OK;
    if (st != SY_OK)
        return load_fail(l, st == SY_E_NOT_FOUND ? SY_E_FORMAT : st, "metadata %s: %s", key,
                         st == SY_E_NOT_FOUND ? "missing" : sy_gguf_last_error(l->m->gguf));
    return SY_OK;
}

static sy_status read_hparams(loader *l)
{
    sy_hparams *hp = &l->m->hp;
    const char *arch = NULL;
    sy_status st = sy_gguf_get_str(l->m->gguf, "general.architecture", &arch, NULL);
    if (st != SY_OK)
        return load_fail(l, SY_E_FORMAT, "metadata general.architecture: %s",
                         st == SY_E_NOT_FOUND ? "missing" : sy_gguf_last_error(l->m->gguf));
    if (strcmp(arch, "llama") == 0)
        hp->arch = SY_ARCH_LLAMA;
    else if (strcmp(arch, "qwen2") == 0)
        hp->arch = SY_ARCH_QWEN2;
    else if (strcmp(arch, "gemma3") == 0)
        hp->arch = SY_ARCH_GEMMA3;
    else
        return load_fail(l, SY_E_UNSUPPORTED,
                         "metadata general.architecture: '%.40s' is not supported (llama, qwen2, "
                         "gemma3)",
                         arch);
    snprintf(hp->arch_name, sizeof hp->arch_name, "%s", arch);

    if ((st = arch_u32(l, "block_count", true, &hp->n_layer)) != SY_OK ||
        (st = arch_u32(l, "embedding_length", true, &hp->n_embd)) != SY_OK ||
        (st = arch_u32(l, "feed_forward_length", true, &hp->n_ff)) != SY_OK ||
        (st = arch_u32(l, "attention.head_count", true, &hp->n_head)) != SY_OK)
        return st;
    hp->n_head_kv = hp->n_head;
    hp->n_ctx_train = 2048;
    if ((st = arch_u32(l, "attention.head_count_kv", false, &hp->n_head_kv)) != SY_OK ||
        (st = arch_u32(l, "context_length", false, &hp->n_ctx_train)) != SY_OK)
        return st;
    if (hp->n_layer == 0 || hp->n_layer > 1024 || hp->n_embd == 0 || hp->n_embd > 65536 ||
        hp->n_ff == 0 || hp->n_ff > 1u << 20 || hp->n_head == 0 || hp->n_head > 1024 ||
        hp->n_head_kv == 0 || hp->n_head % hp->n_head_kv != 0)
        return load_fail(l, SY_E_FORMAT,
                         "hyperparameters out of range: %u layers, embedding %u, ffn %u, %u "
                         "heads, %u kv heads",
                         hp->n_layer, hp->n_embd, hp->n_ff, hp->n_head, hp->n_head_kv);
    hp->head_dim = hp->n_embd / hp->n_head;
    if ((st = arch_u32(l, "attention.key_length", false, &hp->head_dim)) != SY_OK)
        return st;
    uint32_t vlen = hp->head_dim;
    if ((st = arch_u32(l, "attention.value_length", false, &vlen)) != SY_OK)
        return st;
    if (hp->head_dim == 0 || hp->head_dim > 1024 || hp->head_dim % 2 || vlen != hp->head_dim)
        return load_fail(l, SY_E_FORMAT, "attention key length %u / value length %u unsupported",
                         hp->head_dim, vlen);
    hp->n_rot = hp->head_dim;
    if ((st = arch_u32(l, "rope.dimension_count", false, &hp->n_rot)) != SY_OK)
        return st;
    if (hp->n_rot == 0 || hp->n_rot > hp->head_dim || hp->n_rot % 2)
        return load_fail(l, SY_E_FORMAT, "rope.dimension_count %u does not fit head size %u",
                         hp->n_rot, hp->head_dim);
    hp->rms_eps = 1e-5f;
    hp->rope_base = 10000.0f;
    hp->rope_scale = 1.0f;
    if ((st = arch_f32(l, "attention.layer_norm_rms_epsilon", false, &hp->rms_eps)) != SY_OK ||
        (st = arch_f32(l, "rope.freq_base", false, &hp->rope_base)) != SY_OK)
        return st;
    float lin = 0;
    if ((st = arch_f32(l, "rope.scaling.factor", false, &lin)) != SY_OK)
        return st;
    if (lin > 0)
        hp->rope_scale = 1.0f / lin;
    hp->rope_base_local = hp->rope_base;
    hp->attn_scale = 1.0f / sqrtf((float)hp->head_dim);
    hp->embd_scale = 1.0f;
    hp->rope_neox = hp->arch != SY_ARCH_LLAMA;
    if (hp->arch == SY_ARCH_GEMMA3) {
        /* Gemma 3: local layers use base 10000 and a window; every sixth
         * layer is global (the model card's 5:1 pattern). */
        hp->rope_base_local = 10000.0f;
        hp->swa_period = 6;
        if ((st = arch_u32(l, "attention.sliding_window", false, &hp->sliding_window)) != SY_OK)
            return st;
        hp->embd_scale = sqrtf((float)hp->n_embd);
    }
    return SY_OK;
}

/* Finds |name| (formatted with the layer) and checks dtype class and shape. */
static sy_status want_tensor(loader *l, bool required, const char *name, int64_t ne0, int64_t ne1,
                             const sy_gguf_tensor_info **out)
{
    *out = NULL;
    sy_status st = sy_gguf_find_tensor(l->m->gguf, name, out);
    if (st == SY_E_NOT_FOUND && !required)
        return SY_OK;
    if (st != SY_OK)
        return load_fail(l, SY_E_FORMAT, "tensor '%s' is missing", name);
    const sy_gguf_tensor_info *t = *out;
    int64_t want1 = ne1 ? ne1 : 1;
    if (t->ne[0] != ne0 || t->ne[1] != want1 || t->ne[2] != 1 || t->ne[3] != 1)
        return load_fail(l, SY_E_FORMAT,
                         "tensor '%s' has shape [%lld,%lld,%lld,%lld], the architecture needs "
                         "[%lld,%lld]",
                         name, (long long)t->ne[0], (long long)t->ne[1], (long long)t->ne[2],
                         (long long)t->ne[3], (long long)ne0, (long long)want1);
    if (ne1 == 0 && t->dtype != SY_DTYPE_F32)
        return load_fail(l, SY_E_DTYPE, "tensor '%s' is %s, norms and biases must be f32", name,
                         sy_dtype_name(t->dtype));
    l->m->n_params += (uint64_t)(t->ne[0] * t->ne[1]);
    l->m->weight_bytes += t->size;
    return SY_OK;
}

static sy_status read_weights(loader *l)
{
    sy_model *m = l->m;
    const sy_hparams *hp = &m->hp;
    int64_t E = hp->n_embd, D = hp->head_dim, Hq = hp->n_head, Hkv = hp->n_head_kv;
    /* The vocabulary size comes from the embedding table itself. */
    const sy_gguf_tensor_info *te = NULL;
    sy_gguf_find_tensor(m->gguf, "token_embd.weight", &te);
    if (!te || te->ne[0] != E || te->ne[2] != 1 || te->ne[3] != 1)
        return load_fail(l, SY_E_FORMAT, "tensor 'token_embd.weight' must be [%lld, n_vocab]",
                         (long long)E);
    sy_status st;
    m->tok_embd = te;
    m->n_params = (uint64_t)(te->ne[0] * te->ne[1]);
    m->weight_bytes = te->size;
    m->hp.n_vocab = (uint32_t)te->ne[1];
    int64_t V = te->ne[1];
    if ((st = want_tensor(l, true, "output_norm.weight", E, 0, &m->output_norm)) != SY_OK ||
        (st = want_tensor(l, false, "output.weight", E, V, &m->output)) != SY_OK)
        return st;
    m->layers = calloc(hp->n_layer, sizeof *m->layers);
    if (!m->layers)
        return load_fail(l, SY_E_NO_MEMORY, "out of memory for %u layers", hp->n_layer);
    bool gemma = hp->arch == SY_ARCH_GEMMA3, qwen = hp->arch == SY_ARCH_QWEN2;
    for (uint32_t il = 0; il < hp->n_layer; il++) {
        sy_layer_weights *w = &m->layers[il];
        struct {
            const char *suffix;
            bool required;
            int64_t ne0, ne1;
            const sy_gguf_tensor_info **dst;
        } want[] = {
            {"attn_norm.weight", true, E, 0, &w->attn_norm},
            {"attn_q.weight", true, E, Hq * D, &w->wq},
            {"attn_k.weight", true, E, Hkv * D, &w->wk},
            {"attn_v.weight", true, E, Hkv * D, &w->wv},
            {"attn_output.weight", true, Hq * D, E, &w->wo},
            {"attn_q.bias", qwen, Hq * D, 0, &w->bq},
            {"attn_k.bias", qwen, Hkv * D, 0, &w->bk},
            {"attn_v.bias", qwen, Hkv * D, 0, &w->bv},
            {"attn_q_norm.weight", gemma, D, 0, &w->q_norm},
            {"attn_k_norm.weight", gemma, D, 0, &w->k_norm},
            {"post_attention_norm.weight", gemma, E, 0, &w->post_attn_norm},
            {"post_ffw_norm.weight", gemma, E, 0, &w->post_ffn_norm},
            {"ffn_norm.weight", true, E, 0, &w->ffn_norm},
            {"ffn_gate.weight", true, E, hp->n_ff, &w->gate},
            {"ffn_up.weight", true, E, hp->n_ff, &w->up},
            {"ffn_down.weight", true, hp->n_ff, E, &w->down},
        };
        for (size_t k = 0; k < sizeof want / sizeof want[0]; k++) {
            char name[96];
            snprintf(name, sizeof name, "blk.%u.%s", il, want[k].suffix);
            st = want_tensor(l, want[k].required, name, want[k].ne0, want[k].ne1, want[k].dst);
            if (st != SY_OK)
                return st;
        }
    }
    return SY_OK;
}

sy_status sy__model_load(sy_runtime *rt, const char *path, sy_model **out_model, char *err,
                         size_t err_size)
{
    *out_model = NULL;
    double t0 = now_ms();
    sy_model *m = calloc(1, sizeof *m);
    if (!m)
        return SY_E_NO_MEMORY;
    m->rt = rt;
    m->path = strdup(path);
    if (!m->path) {
        free(m);
        return SY_E_NO_MEMORY;
    }
    loader l = {m, err, err_size};
    sy_gguf_error gerr;
    sy_status st = sy_gguf_open(path, &m->gguf, &gerr);
    if (st != SY_OK) {
        snprintf(err, err_size, "%s", gerr.msg);
        goto out_close;
    }
    if ((st = read_hparams(&l)) != SY_OK || (st = read_weights(&l)) != SY_OK ||
        (st = sy__model_load_tokenizer(m, err, err_size)) != SY_OK)
        goto out_close;
    const char *gname = NULL;
    if (sy_gguf_get_str(m->gguf, "general.name", &gname, NULL) == SY_OK)
        snprintf(m->name, sizeof m->name, "%s", gname);
    else
        snprintf(m->name, sizeof m->name, "%s", strrchr(path, '/') ? strrchr(path, '/') + 1 : path);
    m->load_ms = now_ms() - t0;
    *out_model = m;
    return SY_OK;
out_close:
    sy_model_close(m);
    return st;
}
