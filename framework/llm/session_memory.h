/* A session's memory before it is created (the prediction behind
 * sy_model_plan_memory() and the budgets of sy_session_options) and after
 * (sy_session_query_memory()).  Internal to libswitchyard. */
#ifndef SY_LLM_SESSION_MEMORY_H
#define SY_LLM_SESSION_MEMORY_H

#include "kv_cache.h"
#include "model_internal.h"

/* Reads |opts| (may be NULL) into |o| with the session's defaults filled
 * in, and derives the KV cache's configuration (session.c). */
sy_status sy__session_config(const sy_model *m, const sy_session_options *opts,
                             sy_session_options *o, sy_kv_config *out_kv);

/* Predicts the memory of a session of |m| with the resolved options |o|
 * into |out|, planning with |pl| (NULL: a planner of its own with the
 * default profiles).  With budgets in o->mem: SY_E_LIMIT naming the
 * device and the numbers when a peak exceeds its budget, or with o->fit
 * the context and KV type that fit, written back into |o| and |kv|.
 * Errors in sy_runtime_last_error(). */
sy_status sy__session_plan_memory(sy_model *m, sy_planner *pl, sy_session_options *o,
                                  sy_kv_config *kv, sy_memory_plan *out);

/* Fills |out| (struct_size kept) with the process's resident set from
 * the OS and what |x| holds on each device of |rt|. */
sy_status sy__session_usage(const sy_runtime *rt, const sy_executor *x, sy_memory_usage *out);

#endif
