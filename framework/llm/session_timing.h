/* Per-node timing of a session's steps (sy_session_options.time_nodes):
 * the executor times every node of a step as a launch of its own, and the
 * session adds the times up per node name without its layer prefix
 * ("ffn_down" for blk.3.ffn_down), op and device, so that the top of the
 * list says where a generation's time went. */
#ifndef SY_LLM_SESSION_TIMING_H
#define SY_LLM_SESSION_TIMING_H

#include <stdbool.h>
#include <stdint.h>

#include "switchyard/switchyard.h"

typedef struct sy__timing_entry {
    char name[SY_NAME_MAX];
    uint32_t op, device;
    uint64_t count;
    double seconds;
} sy__timing_entry;

typedef struct sy__timing {
    bool on;             /* the session times its nodes */
    sy__timing_entry *v; /* by descending seconds */
    uint32_t n, cap;
} sy__timing;

/* Adds the times |x| measured in its last run of |g|.  SY_E_NO_MEMORY
 * leaves the totals as they were. */
sy_status sy__timing_add(sy__timing *t, const sy_graph *g, const sy_executor *x);

/* Fills |out| from entry |i|; strings are owned by |t|. */
sy_status sy__timing_query(const sy__timing *t, const sy_runtime *rt, uint32_t i,
                           sy_node_timing *out);

void sy__timing_deinit(sy__timing *t);

#endif
