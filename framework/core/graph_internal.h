/* Graph internals shared with the rest of the library (the scheduler's
 * plan cache).  Not part of the public API. */
#ifndef SY_CORE_GRAPH_INTERNAL_H
#define SY_CORE_GRAPH_INTERNAL_H

#include <stdbool.h>
#include <stdint.h>

#include "switchyard/switchyard.h"

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

#endif
