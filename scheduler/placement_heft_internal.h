/* The local search that improves HEFT's candidate plans by the makespan
 * model (placement_heft_search.c), shared with placement_heft.c's
 * iterated search and its kicks. */
#ifndef SY_SCHEDULER_PLACEMENT_HEFT_INTERNAL_H
#define SY_SCHEDULER_PLACEMENT_HEFT_INTERNAL_H

#include <stdbool.h>
#include <stdint.h>

#include "sched_problem.h"

/* Rounds of sy__heft_search()'s moves at most. */
#define SY__HEFT_SEARCH_ROUNDS 8u
/* Swaps of two runs (n^2 simulations a round), pair moves (n^2 D^2 a
 * pass) and the iterated search up to this many nodes. */
#define SY__HEFT_SWAP_MAX_NODES 32u

/* Moves single nodes, producer-consumer pairs together, a node with the
 * rest of its run on its device, a node with its chain and, when |swaps|,
 * the devices of two runs swapped, while the makespan of |assign| (now
 * |best|) drops; returns it.  |stack| and |saved| hold n entries.
 * Thread-safety: safe for distinct workspaces. */
double sy__heft_search(sy__makespan_ws *ws, uint8_t *assign, double best, uint32_t *stack,
                       uint8_t *saved, bool swaps);

/* Moves any two nodes at once, each to another allowed device, then
 * sy__heft_search() again, while the makespan of |assign| (now |best|)
 * drops; returns it.  Thread-safety: safe for distinct workspaces. */
double sy__heft_pair_search(sy__makespan_ws *ws, uint8_t *assign, double best, uint32_t *stack,
                            uint8_t *saved);

/* Puts on |d| the chain through |v| (its one-input/one-consumer stretch,
 * on whatever devices it is).  Returns false, with |assign| partly
 * changed, when d cannot run one of its nodes. */
bool sy__heft_put_chain(const sy__makespan_ws *ws, uint8_t *assign, uint32_t v, uint32_t d);

/* Makes the single-node move that gives the lowest makespan, better or
 * not than |assign|'s own. */
void sy__heft_best_single_move(sy__makespan_ws *ws, uint8_t *assign);

#endif
