/* Graph internals shared with the rest of the library (the scheduler's
 * plan cache).  Not part of the public API. */
#ifndef SY_CORE_GRAPH_INTERNAL_H
#define SY_CORE_GRAPH_INTERNAL_H

#include <stdbool.h>
#include <stdint.h>

#include "switchyard/switchyard.h"

/* What sy__graph_update_params() saved to undo an update that failed. */
typedef struct sy__graph_undo {
    sy_tensor *t; /* a tensor whose shape changed, or NULL */
    sy_node *n;   /* a node whose params changed, or NULL */
    int64_t ne[SY_MAX_DIMS];
    uint64_t nb[SY_MAX_DIMS];
    uint64_t view_offset;
    sy_op_params params;
} sy__graph_undo;

/* Per node, for the fast path of sy__graph_update_params (graph_update.c)
 * that moves KV writes and their attentions. */
typedef struct sy__kv_fast {
    int64_t max_start;  /* a KV write: its cache's rows less the rows it
                         * writes; an attention: 0; -1: neither moves fast */
    uint32_t partner;   /* a KV write: the other one its attention reads */
    uint32_t attention; /* a KV write: the attention that reads it */
} sy__kv_fast;

/* The graph itself: private to framework/core (graph.c builds and freezes
 * it, graph_update.c updates a frozen one's parameters). */
struct sy_graph {
    sy_tensor **tensors;
    void **host_data;     /* parallel to tensors: caller's host memory */
    sy_node **producer;   /* parallel to tensors: node writing it, or NULL */
    bool *is_output;      /* parallel to tensors */
    uint32_t n_tensors, cap_tensors;
    sy_node **nodes;
    uint32_t n_nodes, cap_nodes;
    bool frozen;
    uint64_t sig[2]; /* structural digest, set at freeze (graph_signature.c) */
    uint64_t layout; /* sizes and wiring of root storage, set at freeze */
    uint64_t serial;   /* unique to this graph in the process (sy_graph_create) */
    uint64_t host_gen; /* counts sy_graph_set_host_data() calls */
    /* sy__graph_memo_*: the last check recorded, and the nodes updated
     * since (each once; node_dirty marks them) */
    uint64_t memo[4];
    bool has_memo;
    bool *node_dirty;
    uint32_t *dirty, n_dirty;
    /* scratch of sy__graph_update_params, kept between updates */
    uint32_t *cons_off, *cons; /* the nodes reading tensor t: cons[cons_off[t]..[t + 1]) */
    bool *pending;             /* per node: reads a tensor this update changed */
    sy__graph_undo *undo;
    uint32_t n_undo, cap_undo;
    sy__kv_fast *kv_fast; /* per node, with the consumer index */
    bool kv_fast_stale;   /* an update changed a shape it was worked out from */
    char err[512];
};

/* Inline accessors for the executor's per-token loops (a decode step walks
 * every tensor a few times): the public sy_graph_* calls check their
 * arguments and go through the PLT.  |i| and |t| must belong to |g|. */
static inline sy_tensor *sy__graph_tensor_at(const sy_graph *g, uint32_t i)
{
    return g->tensors[i];
}

static inline sy_node *sy__graph_node_at(const sy_graph *g, uint32_t i)
{
    return g->nodes[i];
}

/* Host data by tensor id (a tensor's id is its index), for a loop that
 * should not load every tensor only to read its id. */
static inline void *sy__graph_host_at(const sy_graph *g, uint32_t i)
{
    return g->host_data[i];
}

static inline void *sy__graph_host_of(const sy_graph *g, const sy_tensor *t)
{
    return sy__graph_host_at(g, t->id);
}

static inline sy_node *sy__graph_producer_of(const sy_graph *g, const sy_tensor *t)
{
    return g->producer[t->id];
}

static inline bool sy__graph_is_output_of(const sy_graph *g, const sy_tensor *t)
{
    return g->is_output[t->id];
}

/* Names this graph apart from every other graph the process made, even
 * one later made at the same address. */
static inline uint64_t sy__graph_serial(const sy_graph *g)
{
    return g->serial;
}

/* Changes whenever host data is set, so that whoever kept bindings of the
 * host data can tell they still hold. */
static inline uint64_t sy__graph_host_gen(const sy_graph *g)
{
    return g->host_gen;
}

/* Hashes the structure of |n_nodes| nodes in topological order into
 * |out_sig|: topology (which tensor feeds which node), ops, the op
 * parameters that can change what a device accepts, dtypes, roles, view
 * roots, marked outputs (|is_output|, per tensor id) and the shape class of
 * every tensor a node reads or writes (weights exact, every other dim
 * rounded up to a power of two).  Node names are left out.
 * Called once by sy_graph_freeze(); graph_signature.c. */
void sy__graph_hash_structure(sy_node *const *nodes, uint32_t n_nodes, uint32_t n_tensors,
                              const bool *is_output, uint64_t out_sig[2]);

/* Returns in |out_sig| the digest sy_graph_freeze() computed, so that a
 * plan-cache lookup costs no walk over the graph; zeros when |g| is not
 * frozen.  A frozen graph's structure does not change, so the digest
 * stays true for its lifetime. */
void sy__graph_signature(const sy_graph *g, uint64_t out_sig[2]);

/* Digest of what an activation memory layout depends on besides the plan:
 * the byte size and view root of every tensor that owns storage, the
 * marked outputs and the wiring.  Views contribute their root only, not
 * their extent: they own no bytes, so a KV write exposing one more row
 * keeps the layout.  Called once by sy_graph_freeze(); graph_signature.c. */
uint64_t sy__graph_hash_layout(const sy_graph *g);

/* Returns the digest sy__graph_hash_layout() gave |g| at freeze; 0 when
 * |g| is not frozen.  Updates of parameters never change it. */
uint64_t sy__graph_layout(const sy_graph *g);

/* True when the structural digest would hash |a| and |b| alike: the same
 * shape class (graph_signature.c). */
bool sy__graph_same_class(const int64_t a[SY_MAX_DIMS], const int64_t b[SY_MAX_DIMS]);

/* True when the structural digest would hash node params |a| and |b| of
 * |op| alike. */
bool sy__graph_same_params(uint32_t op, const sy_op_params *a, const sy_op_params *b);

/* One parameter update of a frozen graph: node |node| (its id, the
 * topological index) gets |params|. */
typedef struct sy__node_update {
    uint32_t node;
    sy_op_params params;
} sy__node_update;

/* Sets the params of |n| nodes of frozen graph |g| and re-infers what
 * depends on them, so a caller that runs the same step over and over (a
 * session's decode step, where only the KV write position moves) keeps
 * one graph instead of building, freezing and hashing one per token.
 * Only views may change shape (a KV write exposing one more cache row):
 * a node that owns storage and would change shape or dtype, or a node the
 * catalogue rejects with the new params, fails the update with
 * SY_E_SHAPE, SY_E_DTYPE or the catalogue's status; the graph is then as
 * it was and sy_graph_last_error() says why.  The structural digest is
 * recomputed when a shape class or a hashed parameter changed; the layout
 * digest never changes.  A list that only moves KV writes, each listed
 * next to the other write its attention reads (moved to the same row),
 * and the n_past of attentions that read only such writes, each node
 * once, takes a path that reads none of their inputs (graph_update.c),
 * with the same result.
 * Thread-safety: not safe while |g| is read by another thread (planning or
 * running it). */
sy_status sy__graph_update_params(sy_graph *g, const sy__node_update *ups, uint32_t n);

/* A run check's memo: whoever checks |g| node by node against something
 * named by the four words |key| (the executor: a plan and its runtime)
 * records that it passed with sy__graph_memo_set; until the next record,
 * the graph lists the nodes updates touched since (params changed, or
 * re-inferred because an input changed shape).
 * sy__graph_memo_holds is true when the last record was |key|, with those
 * nodes (ids) in *out_dirty, *out_n of them: only they need checking
 * again. */
bool sy__graph_memo_holds(const sy_graph *g, const uint64_t key[4], const uint32_t **out_dirty,
                          uint32_t *out_n);
void sy__graph_memo_set(sy_graph *g, const uint64_t key[4]);

/* Frees the update scratch of |g| (sy_graph_destroy). */
void sy__graph_update_free(sy_graph *g);

#endif
