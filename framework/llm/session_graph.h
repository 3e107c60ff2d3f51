/* The step graphs a session keeps between steps: a decode step differs
 * from the one before only in its position, so the session builds its
 * graph once and runs the plan it ran last time unless a device failure
 * re-planned since.  Building, freezing, hashing and looking up the plan
 * of a fresh graph per token cost about 3% of SmolLM2's decode step
 * (bench/overhead.sh).  Where every device of the session takes them, the
 * KV writes and attentions read their first row from an input when they
 * run (kv_starts, model_internal.h): the graph then never changes.  Else
 * the session updates their params in place (sy__graph_update_params). */
#ifndef SY_LLM_SESSION_GRAPH_H
#define SY_LLM_SESSION_GRAPH_H

#include "graph_internal.h"
#include "model_internal.h"

/* Graphs kept: the decode step and the latest prefill chunk length. */
#define SY__STEP_GRAPHS 2u

typedef struct sy__step_graph {
    sy_graph *g;
    uint32_t n_tokens;
    bool all_logits;
    const int32_t *tokens, *positions, *kv_starts;
    float *logits;
    sy_dtype kv_type;
    sy_kv_layer *kv;          /* per layer, as built (k, v, rows) */
    sy__node_update *ups;     /* per layer: k write, v write, attention */
    sy_plan *plan;            /* the plan the last step ran, or NULL */
    uint32_t plan_failures;   /* failures recorded when it was planned */
    uint64_t plan_sig[2];     /* the graph's digest it was planned for */
    uint64_t last_use;
} sy__step_graph;

typedef struct sy__step_graphs {
    sy__step_graph e[SY__STEP_GRAPHS];
    uint64_t tick;
} sy__step_graphs;

/* Returns in *out a frozen graph of |m| computing |step|: a kept one
 * updated to the step's position when one was built for the same token
 * count, logits, host arrays and KV buffers, else a new one (evicting the
 * least recently used).  Borrowed: *out belongs to |c| until the next
 * call or sy__step_graphs_deinit. */
sy_status sy__step_graph_get(sy__step_graphs *c, const sy_model *m, const sy_step_desc *step,
                             sy__step_graph **out, char *err, size_t err_size);

/* False when a device of the session (those |devices| names, or every
 * device of |rt| when NULL) runs the KV writes and attention of |e|'s
 * first layer with their first row in the params, as at position 0, but
 * not with it read at run time as |e| has them (built with kv_starts).
 * Borrowed: |e| during the call. */
bool sy__step_graph_run_time_kv_ok(const sy__step_graph *e, sy_runtime *rt, const char *devices);

/* Drops the graph of |e| (after a step on it failed half way). */
void sy__step_graph_drop(sy__step_graph *e);

void sy__step_graphs_deinit(sy__step_graphs *c);

#endif
