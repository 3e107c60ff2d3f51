/* Models: hyperparameters and weights read from a GGUF file, the graph
 * builders of each architecture, and sessions (KV cache, generation). */
#ifndef SY_LLM_MODEL_INTERNAL_H
#define SY_LLM_MODEL_INTERNAL_H

#include "chat.h"
#include "gguf.h"
#include "kv_cache.h"
#include "switchyard/switchyard.h"

typedef enum sy_arch {
    SY_ARCH_LLAMA = 0,
    SY_ARCH_QWEN2 = 1,
    SY_ARCH_GEMMA3 = 2
} sy_arch;

typedef struct sy_hparams {
    sy_arch arch;
    char arch_name[16];
    uint32_t n_layer, n_embd, n_ff, n_head, n_head_kv, head_dim, n_rot, n_vocab, n_ctx_train;
    float rms_eps;
    float rope_base;        /* global layers */
    float rope_base_local;  /* gemma3 sliding-window layers */
    float rope_scale;       /* linear position scaling; 1 = none */
    float attn_scale;       /* multiplies q.k */
    float embd_scale;       /* multiplies the token embedding; 1 = none */
    uint32_t sliding_window;  /* 0: none */
    uint32_t swa_period;      /* every swa_period-th layer is global; 0: all global */
    bool rope_neox;
} sy_hparams;

/* One layer's weights; optional ones are NULL when the file lacks them. */
typedef struct sy_layer_weights {
    const sy_gguf_tensor_info *attn_norm, *wq, *wk, *wv, *wo;
    const sy_gguf_tensor_info *bq, *bk, *bv;              /* qwen2 */
    const sy_gguf_tensor_info *q_norm, *k_norm;           /* gemma3 */
    const sy_gguf_tensor_info *post_attn_norm, *post_ffn_norm; /* gemma3 */
    const sy_gguf_tensor_info *ffn_norm, *gate, *up, *down;
} sy_layer_weights;

struct sy_model {
    sy_runtime *rt;
    sy_gguf *gguf;
    char *path;
    sy_hparams hp;
    const sy_gguf_tensor_info *tok_embd, *output_norm, *output;
    sy_layer_weights *layers;
    struct sy_tokenizer *tok;
    sy_chat_format chat;
    char name[128];
    uint64_t n_params, weight_bytes;
    double load_ms;
};

/* Builds m->tok from the file's tokenizer.ggml.* keys. */
sy_status sy__model_load_tokenizer(sy_model *m, char *err, size_t err_size);

/* True when layer |il| uses the sliding window. */
bool sy__layer_is_local(const sy_hparams *hp, uint32_t il);

/* What one graph computes: |n_tokens| new tokens after |n_past| cached
 * ones, reading ids and positions from the host arrays given, writing
 * logits (all positions or the last) to |logits|. */
typedef struct sy_step_desc {
    uint32_t n_tokens;
    uint32_t n_past;
    bool all_logits;
    const int32_t *tokens;
    const int32_t *positions;
    float *logits;
    void *const *kv_k;  /* per layer: [head_dim, n_head_kv, n_ctx] of kv_type */
    void *const *kv_v;
    sy_dtype kv_type;
    uint32_t n_ctx;
    /* Optional, a session's cache: per layer its buffers, rows, window and
     * first position (kv_cache.h); when set, kv_k, kv_v and n_ctx are
     * unused and layers attend within their own window. */
    const sy_kv_layer *kv_layers;
    /* Optional, with kv_layers: per layer the first row this step writes
     * (n_past - pos0).  When set, every KV write and attention reads it
     * from an input when it runs (types.h), so a decode graph stays the
     * same from one step to the next: the caller writes the array before
     * each run instead of updating the graph.  The graph holds the array
     * as one I32 leaf ("kv_starts", one element per layer) and gives each
     * layer its element through a VIEW ("blk.N.kv_start"): a device that
     * runs the attentions receives it in one transfer a step. */
    const int32_t *kv_starts;
} sy_step_desc;

/* Builds and freezes the graph of one step of |m|.
 * Ownership: caller owns *out_graph.  Borrowed: every array in |step|
 * must outlive the graph. */
sy_status sy__model_build_graph(const sy_model *m, const sy_step_desc *step, sy_graph **out_graph,
                                char *err, size_t err_size);

/* Fills the params of layer |il|'s KV writes and attention for |step|:
 * the only params of a step's graph that depend on its position (a
 * session updates a kept decode graph with them, session_graph.c). */
void sy__model_step_params(const sy_model *m, const sy_step_desc *step, uint32_t il,
                           sy_op_params *out_kv_write, sy_op_params *out_attention);

#endif
