/* switchyard synth: writes a valid GGUF model with random weights and a
 * small byte-level BPE tokenizer, of any llama/qwen2/gemma3 shape, so that
 * tests and benchmarks need no download.  Weights are generated block by
 * block while the file is written (a 7B shape never sits in memory). */
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "cli.h"
#include "gguf.h"
#include "quants_internal.h"

typedef struct synth_shape {
    const char *name;
    uint32_t n_layer, n_embd, n_ff, n_head, n_head_kv, head_dim, n_vocab, n_ctx;
} synth_shape;

/* head_dim 0: n_embd / n_head. */
static const synth_shape presets[] = {
    {"tiny", 2, 64, 128, 4, 2, 0, 512, 512},
    {"small", 4, 256, 512, 8, 4, 0, 2048, 1024},
    {"135m", 30, 576, 1536, 9, 3, 0, 49152, 8192},
    {"1b", 22, 2048, 5632, 32, 4, 0, 32000, 2048},
    {"7b", 32, 4096, 11008, 32, 32, 0, 32000, 4096},
};

typedef struct synth {
    const char *arch;
    synth_shape shape;
    sy_dtype type;
    uint64_t seed;
} synth;

static uint64_t splitmix(uint64_t *s)
{
    uint64_t z = (*s += 0x9e3779b97f4a7c15ULL);
    z = (z ^ (z >> 30)) * 0xbf58476d1ce4e5b9ULL;
    z = (z ^ (z >> 27)) * 0x94d049bb133111ebULL;
    return z ^ (z >> 31);
}

static float uniform(uint64_t *s)
{
    return (float)((splitmix(s) >> 40) * (1.0 / 16777216.0)) * 2.0f - 1.0f;
}

static uint64_t name_hash(const char *name)
{
    uint64_t h = 1469598103934665603ULL;
    for (; *name; name++)
        h = (h ^ (uint8_t)*name) * 1099511628211ULL;
    return h;
}

/* Fills a tensor: norms near 1, biases near 0, weights uniform with a
 * 1/sqrt(K) scale so activations stay O(1) through many layers.  Block
 * types get random blocks directly (any bit pattern of a block is valid). */
typedef struct fill_ctx {
    uint64_t seed;
    sy_dtype dtype;
    int64_t ne0;
    int kind; /* 0 weight, 1 norm, 2 bias */
} fill_ctx;

static sy_status fill_tensor(void *ctx, const char *name, void *dst, uint64_t size)
{
    const fill_ctx *f = ctx;
    uint64_t s = f->seed ^ name_hash(name);
    float scale = f->kind == 0 ? 1.0f / sqrtf((float)f->ne0) : 0.1f;
    float base = f->kind == 1 ? 1.0f : 0.0f;
    uint8_t *p = dst;
    switch (f->dtype) {
    case SY_DTYPE_F32:
        for (uint64_t i = 0; i < size / 4; i++) {
            float v = base + uniform(&s) * scale;
            memcpy(p + 4 * i, &v, 4);
        }
        return SY_OK;
    case SY_DTYPE_F16:
        for (uint64_t i = 0; i < size / 2; i++) {
            uint16_t h = sy__f32_to_fp16(base + uniform(&s) * scale);
            memcpy(p + 2 * i, &h, 2);
        }
        return SY_OK;
    default:
        break;
    }
    /* Block types: random bytes, then sane scales so values are ~scale. */
    for (uint64_t i = 0; i < size; i += 8) {
        uint64_t r = splitmix(&s);
        memcpy(p + i, &r, size - i < 8 ? size - i : 8);
    }
    uint32_t bs = sy_dtype_type_size(f->dtype);
    for (uint64_t off = 0; off + bs <= size; off += bs) {
        uint8_t *b = p + off;
        float u = 0.5f + 0.5f * fabsf(uniform(&s));
        uint16_t d, m;
        switch (f->dtype) {
        case SY_DTYPE_Q8_0:
            d = sy__f32_to_fp16(scale * u / 127.0f);
            memcpy(b, &d, 2);
            break;
        case SY_DTYPE_Q4_0:
            d = sy__f32_to_fp16(scale * u / 8.0f);
            memcpy(b, &d, 2);
            break;
        case SY_DTYPE_Q4_1:
            d = sy__f32_to_fp16(scale * u / 7.5f);
            m = sy__f32_to_fp16(-scale * u);
            memcpy(b, &d, 2);
            memcpy(b + 2, &m, 2);
            break;
        case SY_DTYPE_Q5_0:
            d = sy__f32_to_fp16(scale * u / 16.0f);
            memcpy(b, &d, 2);
            break;
        case SY_DTYPE_Q5_1:
            d = sy__f32_to_fp16(scale * u / 15.5f);
            m = sy__f32_to_fp16(-scale * u);
            memcpy(b, &d, 2);
            memcpy(b + 2, &m, 2);
            break;
        case SY_DTYPE_Q4_K:
        case SY_DTYPE_Q5_K:
            /* 6-bit sub-scales and mins are random: d * 63 * 15 (31) ~ scale. */
            d = sy__f32_to_fp16(scale * u / (63.0f * (f->dtype == SY_DTYPE_Q4_K ? 15.0f : 31.0f)) * 2.0f);
            m = sy__f32_to_fp16(scale * u / 63.0f);
            memcpy(b, &d, 2);
            memcpy(b + 2, &m, 2);
            break;
        case SY_DTYPE_Q6_K:
            d = sy__f32_to_fp16(scale * u / (127.0f * 32.0f) * 2.0f);
            memcpy(b + bs - 2, &d, 2);
            break;
        default:
            return SY_E_DTYPE;
        }
    }
    return SY_OK;
}

/* GPT-2's byte <-> printable code point table: printable Latin-1 bytes
 * map to themselves, the rest to 256 + n in byte order. */
static uint32_t byte_to_cp(uint32_t byte)
{
    bool keep = (byte >= 33 && byte <= 126) || (byte >= 161 && byte <= 172) || byte >= 174;
    if (keep)
        return byte;
    uint32_t n = 0;
    for (uint32_t b = 0; b < byte; b++)
        if (!((b >= 33 && b <= 126) || (b >= 161 && b <= 172) || b >= 174))
            n++;
    return 256 + n;
}

static size_t put_utf8(char *out, uint32_t cp)
{
    if (cp < 0x80) {
        out[0] = (char)cp;
        return 1;
    }
    out[0] = (char)(0xc0 | (cp >> 6));
    out[1] = (char)(0x80 | (cp & 0x3f));
    return 2;
}

/* Tokenizer: specials, the 256 byte tokens, then merges of common letter
 * pairs (and pairs of those) until the vocabulary is full. */
static sy_status add_tokenizer(sy_gguf_writer *w, const synth *sy, char *err, size_t err_size)
{
    bool gemma = strcmp(sy->arch, "gemma3") == 0;
    const char *specials_chatml[] = {"<|endoftext|>", "<|im_start|>", "<|im_end|>"};
    const char *specials_gemma[] = {"<pad>", "<eos>", "<bos>", "<start_of_turn>", "<end_of_turn>"};
    const char *const *specials = gemma ? specials_gemma : specials_chatml;
    uint32_t n_special = gemma ? 5 : 3;
    uint32_t V = sy->shape.n_vocab;
    if (V < n_special + 256 + 1) {
        snprintf(err, err_size, "vocabulary of %u is too small (at least %u)", V, n_special + 257);
        return SY_E_INVALID_ARG;
    }
    char **tokens = calloc(V, sizeof *tokens);
    int32_t *types = calloc(V, sizeof *types);
    char **merges = calloc(V, sizeof *merges);
    sy_status st = SY_E_NO_MEMORY;
    uint32_t n = 0, n_merges = 0;
    if (!tokens || !types || !merges)
        goto out_free;
    for (uint32_t i = 0; i < n_special; i++, n++) {
        if (!(tokens[n] = strdup(specials[i])))
            goto out_free;
        types[n] = 3;
    }
    for (uint32_t b = 0; b < 256; b++, n++) {
        char buf[4] = {0};
        put_utf8(buf, byte_to_cp(b));
        if (!(tokens[n] = strdup(buf)))
            goto out_free;
        types[n] = 1;
    }
    /* Merges: pairs over a fixed alphabet, then pairs of those pairs. */
    const char *alpha = "etaoinshrdlucmfwypvbgkjqxz";
    uint32_t na = (uint32_t)strlen(alpha);
    for (uint32_t i = 0; i < na && n < V; i++) {
        for (uint32_t j = 0; j < na && n < V; j++) {
            char tok[3] = {alpha[i], alpha[j], 0}, mg[4] = {alpha[i], ' ', alpha[j], 0};
            if (!(tokens[n] = strdup(tok)) || !(merges[n_merges] = strdup(mg)))
                goto out_free;
            types[n++] = 1;
            n_merges++;
        }
    }
    for (uint32_t i = 0; n < V; i++) {
        /* "ab" + "cd" -> "abcd" for the first pairs; then filler tokens
         * that merges never produce, so the vocabulary has exactly V. */
        char tok[32];
        snprintf(tok, sizeof tok, "<unused%u>", i);
        if (!(tokens[n] = strdup(tok)))
            goto out_free;
        types[n++] = 5;
    }
    st = sy_gguf_writer_add_str(w, "tokenizer.ggml.model", "gpt2");
    if (st == SY_OK) st = sy_gguf_writer_add_str(w, "tokenizer.ggml.pre", gemma ? "default" : "smollm");
    if (st == SY_OK) st = sy_gguf_writer_add_arr_str(w, "tokenizer.ggml.tokens", (const char *const *)tokens, V);
    if (st == SY_OK) st = sy_gguf_writer_add_arr(w, "tokenizer.ggml.token_type", 5 /* INT32 */, types, V);
    if (st == SY_OK) st = sy_gguf_writer_add_arr_str(w, "tokenizer.ggml.merges", (const char *const *)merges, n_merges);
    if (st == SY_OK) st = sy_gguf_writer_add_u32(w, "tokenizer.ggml.bos_token_id", gemma ? 2 : 1);
    if (st == SY_OK) st = sy_gguf_writer_add_u32(w, "tokenizer.ggml.eos_token_id", gemma ? 1 : 2);
    if (st == SY_OK) st = sy_gguf_writer_add_u32(w, "tokenizer.ggml.padding_token_id", 0);
    if (st == SY_OK) st = sy_gguf_writer_add_bool(w, "tokenizer.ggml.add_bos_token", gemma);
    if (st == SY_OK)
        st = sy_gguf_writer_add_str(w, "tokenizer.chat_template",
                                    gemma ? "{{ bos_token }}<start_of_turn>user\n{{ content }}<end_of_turn>\n<start_of_turn>model\n"
                                          : "<|im_start|>user\n{{ content }}<|im_end|>\n<|im_start|>assistant\n");
    if (st != SY_OK)
        snprintf(err, err_size, "tokenizer metadata: %s", sy_gguf_writer_last_error(w));
out_free:
    for (uint32_t i = 0; tokens && i < V; i++)
        free(tokens[i]);
    for (uint32_t i = 0; merges && i < n_merges; i++)
        free(merges[i]);
    free(tokens);
    free(types);
    free(merges);
    if (st == SY_E_NO_MEMORY && !err[0])
        snprintf(err, err_size, "out of memory building the tokenizer");
    return st;
}

typedef struct tensor_plan {
    char name[64];
    sy_dtype dtype;
    int64_t ne[2];
    uint32_t n_dims;
    fill_ctx fill;
} tensor_plan;

static void plan_add(tensor_plan *tp, uint32_t *n, const char *name, sy_dtype dt, int64_t ne0,
                     int64_t ne1, int kind, uint64_t seed)
{
    tensor_plan *t = &tp[(*n)++];
    snprintf(t->name, sizeof t->name, "%s", name);
    t->dtype = dt;
    t->ne[0] = ne0;
    t->ne[1] = ne1;
    t->n_dims = ne1 > 0 ? 2 : 1;
    if (ne1 <= 0)
        t->ne[1] = 1;
    t->fill = (fill_ctx){.seed = seed, .dtype = dt, .ne0 = ne0, .kind = kind};
}

static sy_status write_model(const synth *sy, const char *path, char *err, size_t err_size)
{
    const synth_shape *s = &sy->shape;
    bool gemma = strcmp(sy->arch, "gemma3") == 0, qwen = strcmp(sy->arch, "qwen2") == 0;
    uint32_t D = s->head_dim ? s->head_dim : s->n_embd / s->n_head;
    uint32_t per_layer = 16;
    uint32_t cap = 3 + s->n_layer * per_layer;
    tensor_plan *tp = calloc(cap, sizeof *tp);
    sy_gguf_writer *w = NULL;
    sy_status st = tp ? sy_gguf_writer_create(3, &w) : SY_E_NO_MEMORY;
    if (st != SY_OK) {
        snprintf(err, err_size, "out of memory");
        free(tp);
        return st;
    }
    char key[96];
#define KV_U32(suffix, val)                                                      \
    do {                                                                         \
        snprintf(key, sizeof key, "%s.%s", sy->arch, suffix);                    \
        if (st == SY_OK)                                                         \
            st = sy_gguf_writer_add_u32(w, key, (val));                          \
    } while (0)
    st = sy_gguf_writer_add_str(w, "general.architecture", sy->arch);
    if (st == SY_OK) {
        char nm[96];
        snprintf(nm, sizeof nm, "synth-%s-%s-%s", sy->arch, s->name, sy_dtype_name(sy->type));
        st = sy_gguf_writer_add_str(w, "general.name", nm);
    }
    KV_U32("block_count", s->n_layer);
    KV_U32("context_length", s->n_ctx);
    KV_U32("embedding_length", s->n_embd);
    KV_U32("feed_forward_length", s->n_ff);
    KV_U32("attention.head_count", s->n_head);
    KV_U32("attention.head_count_kv", s->n_head_kv);
    KV_U32("attention.key_length", D);
    KV_U32("attention.value_length", D);
    KV_U32("rope.dimension_count", D);
    if (gemma)
        KV_U32("attention.sliding_window", s->n_ctx / 4 > 4 ? s->n_ctx / 4 : 4);
#undef KV_U32
    snprintf(key, sizeof key, "%s.attention.layer_norm_rms_epsilon", sy->arch);
    if (st == SY_OK)
        st = sy_gguf_writer_add_f32(w, key, 1e-6f);
    snprintf(key, sizeof key, "%s.rope.freq_base", sy->arch);
    if (st == SY_OK)
        st = sy_gguf_writer_add_f32(w, key, gemma ? 1000000.0f : 10000.0f);
    if (st != SY_OK) {
        snprintf(err, err_size, "metadata: %s", sy_gguf_writer_last_error(w));
        goto out_free;
    }
    if ((st = add_tokenizer(w, sy, err, err_size)) != SY_OK)
        goto out_free;

    uint32_t n = 0;
    int64_t E = s->n_embd;
    plan_add(tp, &n, "token_embd.weight", sy->type, E, s->n_vocab, 0, sy->seed);
    plan_add(tp, &n, "output_norm.weight", SY_DTYPE_F32, E, 0, 1, sy->seed);
    char nm[64];
    for (uint32_t il = 0; il < s->n_layer; il++) {
#define T(suffix, dt, a, b, kind)                                   \
    do {                                                            \
        snprintf(nm, sizeof nm, "blk.%u.%s", il, suffix);           \
        plan_add(tp, &n, nm, dt, a, b, kind, sy->seed);             \
    } while (0)
        T("attn_norm.weight", SY_DTYPE_F32, E, 0, 1);
        T("attn_q.weight", sy->type, E, (int64_t)s->n_head * D, 0);
        T("attn_k.weight", sy->type, E, (int64_t)s->n_head_kv * D, 0);
        T("attn_v.weight", sy->type, E, (int64_t)s->n_head_kv * D, 0);
        T("attn_output.weight", sy->type, (int64_t)s->n_head * D, E, 0);
        if (qwen) {
            T("attn_q.bias", SY_DTYPE_F32, (int64_t)s->n_head * D, 0, 2);
            T("attn_k.bias", SY_DTYPE_F32, (int64_t)s->n_head_kv * D, 0, 2);
            T("attn_v.bias", SY_DTYPE_F32, (int64_t)s->n_head_kv * D, 0, 2);
        }
        if (gemma) {
            T("attn_q_norm.weight", SY_DTYPE_F32, D, 0, 1);
            T("attn_k_norm.weight", SY_DTYPE_F32, D, 0, 1);
            T("post_attention_norm.weight", SY_DTYPE_F32, E, 0, 1);
            T("post_ffw_norm.weight", SY_DTYPE_F32, E, 0, 1);
        }
        T("ffn_norm.weight", SY_DTYPE_F32, E, 0, 1);
        T("ffn_gate.weight", sy->type, E, s->n_ff, 0);
        T("ffn_up.weight", sy->type, E, s->n_ff, 0);
        T("ffn_down.weight", sy->type, s->n_ff, E, 0);
#undef T
    }
    for (uint32_t i = 0; i < n && st == SY_OK; i++)
        st = sy_gguf_writer_add_tensor_fn(w, tp[i].name, tp[i].dtype, tp[i].n_dims, tp[i].ne,
                                          fill_tensor, &tp[i].fill);
    if (st == SY_OK)
        st = sy_gguf_writer_write_file(w, path);
    if (st != SY_OK)
        snprintf(err, err_size, "%s", sy_gguf_writer_last_error(w));
out_free:
    sy_gguf_writer_destroy(w);
    free(tp);
    return st;
}

static void usage(FILE *f)
{
    fprintf(f, "usage: switchyard synth --arch llama|qwen2|gemma3 (--preset NAME | --dims "
               "L,E,FF,H,HKV,V[,HD]) --type f32|f16|q8_0|q4_0|q4_1|q5_0|q5_1|q4_k|q5_k|q6_k\n"
               "       -o FILE "
               "[--seed S] [--ctx N]\npresets:");
    for (size_t i = 0; i < sizeof presets / sizeof presets[0]; i++)
        fprintf(f, " %s", presets[i].name);
    fprintf(f, "\nWrites a GGUF with random weights and a byte-level BPE tokenizer.\n");
}

int sy_cli_synth(int argc, char **argv)
{
    synth sy = {.arch = "llama", .type = SY_DTYPE_Q8_0, .seed = 1};
    sy.shape = presets[0];
    const char *out = NULL;
    for (int i = 1; i < argc; i++) {
        const char *a = argv[i], *v = i + 1 < argc ? argv[i + 1] : NULL;
        if (strcmp(a, "--help") == 0) {
            usage(stdout);
            return 0;
        }
        if (!v) {
            fprintf(stderr, "switchyard synth: '%s' needs a value\n", a);
            return 2;
        }
        i++;
        if (strcmp(a, "--arch") == 0) {
            if (strcmp(v, "llama") && strcmp(v, "qwen2") && strcmp(v, "gemma3")) {
                fprintf(stderr, "switchyard synth: unknown arch '%s'\n", v);
                return 2;
            }
            sy.arch = v;
        } else if (strcmp(a, "--preset") == 0) {
            size_t k = 0, np = sizeof presets / sizeof presets[0];
            while (k < np && strcmp(presets[k].name, v) != 0)
                k++;
            if (k == np) {
                fprintf(stderr, "switchyard synth: unknown preset '%s'\n", v);
                return 2;
            }
            sy.shape = presets[k];
        } else if (strcmp(a, "--dims") == 0) {
            synth_shape s = {.name = "custom", .n_ctx = 2048};
            int got = sscanf(v, "%u,%u,%u,%u,%u,%u,%u", &s.n_layer, &s.n_embd, &s.n_ff, &s.n_head,
                             &s.n_head_kv, &s.n_vocab, &s.head_dim);
            if (got < 6 || !s.n_layer || !s.n_embd || !s.n_ff || !s.n_head || !s.n_head_kv ||
                s.n_head % s.n_head_kv) {
                fprintf(stderr, "switchyard synth: --dims wants L,E,FF,H,HKV,V[,HD]\n");
                return 2;
            }
            sy.shape = s;
        } else if (strcmp(a, "--type") == 0) {
            uint32_t t = 0;
            while (t < SY_DTYPE_COUNT && strcmp(sy_dtype_name(t), v) != 0)
                t++;
            if (t == SY_DTYPE_COUNT || t == SY_DTYPE_I32 || t == SY_DTYPE_BF16) {
                fprintf(stderr, "switchyard synth: unknown weight type '%s'\n", v);
                return 2;
            }
            sy.type = (sy_dtype)t;
        } else if (strcmp(a, "--seed") == 0) {
            sy.seed = strtoull(v, NULL, 10);
        } else if (strcmp(a, "--ctx") == 0) {
            sy.shape.n_ctx = (uint32_t)strtoul(v, NULL, 10);
        } else if (strcmp(a, "-o") == 0) {
            out = v;
        } else {
            fprintf(stderr, "switchyard synth: unknown option '%s'\n", a);
            return 2;
        }
    }
    if (!out) {
        usage(stderr);
        return 2;
    }
    uint32_t D = sy.shape.head_dim ? sy.shape.head_dim : sy.shape.n_embd / sy.shape.n_head;
    uint32_t bs = sy_dtype_block_size(sy.type);
    if (sy.shape.n_embd % bs || sy.shape.n_ff % bs || (sy.shape.n_head * D) % bs) {
        fprintf(stderr, "switchyard synth: %s needs embedding, ffn and head sizes that are "
                        "multiples of %u\n", sy_dtype_name(sy.type), bs);
        return 2;
    }
    char err[1024] = "";
    sy_status st = write_model(&sy, out, err, sizeof err);
    if (st != SY_OK) {
        fprintf(stderr, "switchyard synth: %s: %s\n", out, err);
        return 1;
    }
    printf("wrote %s: %s %s, %u layers, embedding %u, %s weights\n", out, sy.arch, sy.shape.name,
           sy.shape.n_layer, sy.shape.n_embd, sy_dtype_name(sy.type));
    return 0;
}
