/* The structural digest of a frozen graph, the key the scheduler's plan
 * cache files plans under (docs/scheduler.md, "Plan cache").
 *
 * It is computed once, when the graph is frozen and its nodes are still in
 * cache from building and ordering, instead of at every plan lookup: a
 * lookup then costs a few words of hashing, not a walk over ~700 nodes and
 * the tensors they point at (11 us for the SmolLM2 decode graph on the
 * 2-core build machine, mostly waiting on those structs).
 *
 * Shape class: weights keep their exact shape; every other dim is rounded
 * up to a power of two.  A decode step's KV length and position grow by
 * one per token, so without classes no step would ever share a plan; with
 * them a plan is made once per doubling.  Whoever runs a plan re-reads
 * sizes from the graph it runs. */
#include <string.h>

#include "graph_internal.h"

/* Words are buffered and hashed four lanes at a time: each lane is a
 * multiply-xorshift chain, and independent lanes keep the multiplier busy
 * instead of waiting on one chain. */
#define SIG_BUF 256

typedef struct sig {
    uint64_t lane[4];
    uint64_t buf[SIG_BUF];
    uint32_t n;
} sig;

static inline uint64_t sig_mix(uint64_t h, uint64_t w)
{
    h = (h ^ w) * 0x9e3779b97f4a7c15ull;
    return h ^ (h >> 31);
}

static void sig_flush(sig *s)
{
    uint64_t a = s->lane[0], b = s->lane[1], c = s->lane[2], d = s->lane[3];
    uint32_t n = s->n & ~3u;
    for (uint32_t i = 0; i < n; i += 4) {
        a = sig_mix(a, s->buf[i]);
        b = sig_mix(b, s->buf[i + 1]);
        c = sig_mix(c, s->buf[i + 2]);
        d = sig_mix(d, s->buf[i + 3]);
    }
    for (uint32_t i = n; i < s->n; i++)
        a = sig_mix(a, s->buf[i] ^ ((uint64_t)i << 56));
    s->lane[0] = a;
    s->lane[1] = b;
    s->lane[2] = c;
    s->lane[3] = d;
    s->n = 0;
}

static inline void sig_word(sig *s, uint64_t w)
{
    s->buf[s->n++] = w;
    if (s->n == SIG_BUF)
        sig_flush(s);
}

static inline uint64_t ceil_log2(int64_t v)
{
    return v <= 1 ? 0 : 64u - (uint64_t)__builtin_clzll((uint64_t)(v - 1));
}

static uint64_t fbits(float f)
{
    uint32_t u;
    memcpy(&u, &f, sizeof u);
    return u;
}

/* The words of |p| (params of |op|) the digest hashes: those that can
 * change what a device accepts.  Returns how many (0..2). */
static uint32_t params_words(uint32_t op, const sy_op_params *p, uint64_t w[2])
{
    switch ((sy_op)op) {
    case SY_OP_ROPE:
        w[0] = (uint64_t)p->i[0] ^ (uint64_t)p->i[1] << 8 ^ fbits(p->f[0]) << 32;
        w[1] = fbits(p->f[1]);
        return 2;
    case SY_OP_SOFTMAX:
        w[0] = (uint64_t)p->i[0] ^ (uint64_t)p->i[2] << 8 ^ fbits(p->f[0]) << 32;
        return 1;
    case SY_OP_ATTENTION:
        w[0] = (uint64_t)p->i[1] ^ fbits(p->f[0]) << 32;
        return 1;
    case SY_OP_COPY:
        w[0] = (uint64_t)p->i[0];
        return 1;
    default:
        return 0;
    }
}

static void sig_params(sig *s, const sy_node *n)
{
    uint64_t w[2];
    uint32_t k = params_words(n->op, &n->params, w);
    for (uint32_t i = 0; i < k; i++)
        sig_word(s, w[i]);
}

bool sy__graph_same_params(uint32_t op, const sy_op_params *a, const sy_op_params *b)
{
    uint64_t wa[2], wb[2];
    uint32_t k = params_words(op, a, wa);
    params_words(op, b, wb);
    for (uint32_t i = 0; i < k; i++)
        if (wa[i] != wb[i])
            return false;
    return true;
}

bool sy__graph_same_class(const int64_t a[SY_MAX_DIMS], const int64_t b[SY_MAX_DIMS])
{
    for (int d = 0; d < SY_MAX_DIMS; d++)
        if (ceil_log2(a[d]) != ceil_log2(b[d]))
            return false;
    return true;
}

/* One tensor's dtype, role, view root and shape class. */
static void sig_tensor(sig *s, const sy_tensor *t, bool output)
{
    uint64_t meta = (uint64_t)t->dtype | (uint64_t)t->role << 4 | (uint64_t)output << 7 |
                    (uint64_t)(t->view_src ? t->view_src->id + 1 : 0) << 32;
    if (t->role == SY_ROLE_WEIGHT) {
        sig_word(s, meta);
        sig_word(s, (uint64_t)t->ne[0] | (uint64_t)t->ne[1] << 32);
        sig_word(s, (uint64_t)t->ne[2] | (uint64_t)t->ne[3] << 32);
        return;
    }
    sig_word(s, meta | ceil_log2(t->ne[0]) << 8 | ceil_log2(t->ne[1]) << 14 |
                    ceil_log2(t->ne[2]) << 20 | ceil_log2(t->ne[3]) << 26);
}

static bool is_leaf_role(uint32_t role)
{
    return role == SY_ROLE_WEIGHT || role == SY_ROLE_INPUT || role == SY_ROLE_KV;
}

/* Walks the nodes only: every tensor a plan can depend on is a node's
 * output (described there) or a leaf some node reads (described where it
 * is read). */
void sy__graph_hash_structure(sy_node *const *nodes, uint32_t n_nodes, uint32_t n_tensors,
                              const bool *is_output, uint64_t out_sig[2])
{
    sig s = {.lane = {0x6a09e667f3bcc908ull, 0xbb67ae8584caa73bull, 0x3c6ef372fe94f82bull,
                      0xa54ff53a5f1d36f1ull}};
    sig_word(&s, (uint64_t)n_tensors << 32 | n_nodes);
    for (uint32_t i = 0; i < n_nodes; i++) {
        const sy_node *n = nodes[i];
        uint64_t in[SY_MAX_INPUTS] = {0};
        for (uint32_t k = 0; k < n->n_inputs && k < SY_MAX_INPUTS; k++) {
            const sy_tensor *t = n->inputs[k];
            in[k] = t->id + 1u;
            if (is_leaf_role(t->role))
                sig_tensor(&s, t, false);
        }
        sig_word(&s, (uint64_t)n->op | (uint64_t)n->n_inputs << 8 | (uint64_t)n->output->id << 16 |
                         in[0] << 40);
        sig_word(&s, in[1] | in[2] << 24 | in[3] << 48);
        sig_tensor(&s, n->output, is_output[n->output->id]);
        sig_params(&s, n);
    }
    sig_flush(&s);
    out_sig[0] = sig_mix(sig_mix(s.lane[0], s.lane[1]), s.lane[2] ^ s.lane[3]);
    out_sig[1] =
        sig_mix(sig_mix(s.lane[3], s.lane[2]) + 0x510e527fade682d1ull, s.lane[1] ^ s.lane[0]);
}

static inline uint64_t layout_mix(uint64_t h, uint64_t v)
{
    return (h ^ v) * 0x100000001b3ull;
}

uint64_t sy__graph_hash_layout(const sy_graph *g)
{
    uint64_t h = layout_mix(layout_mix(0xcbf29ce484222325ull, g->n_tensors), g->n_nodes);
    for (uint32_t i = 0; i < g->n_tensors; i++) {
        const sy_tensor *t = g->tensors[i];
        h = layout_mix(h, t->view_src ? 0 : sy_tensor_nbytes(t));
        h = layout_mix(h, t->view_src ? t->view_src->id : UINT32_MAX);
        h = layout_mix(h, g->is_output[i]);
    }
    for (uint32_t i = 0; i < g->n_nodes; i++) {
        const sy_node *n = g->nodes[i];
        h = layout_mix(h, n->output->id);
        for (uint32_t j = 0; j < n->n_inputs; j++)
            h = layout_mix(h, n->inputs[j]->id);
    }
    return h;
}
