/* Switchyard embedding API: runtime (plugins, devices, logging), graph
 * builder, and execution.  See docs/embedding.md. */
#ifndef SWITCHYARD_SWITCHYARD_H
#define SWITCHYARD_SWITCHYARD_H

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

#include "switchyard/plugin.h"
#include "switchyard/status.h"
#include "switchyard/types.h"
#include "switchyard/version.h"

#ifdef __cplusplus
extern "C" {
#endif

/* ----------------------------------------------------------------- graph */

typedef struct sy_graph sy_graph;

/* Creates an empty graph.
 * Ownership: caller owns *out_graph; free with sy_graph_destroy().
 * Thread-safety: safe for distinct graphs. */
sy_status sy_graph_create(sy_graph **out_graph);

/* Destroys |g| and every tensor and node it owns.  NULL is a no-op. */
void sy_graph_destroy(sy_graph *g);

/* Returns the message of the last failed call on |g|, or "".
 * Ownership: owned by |g|, valid until the next call on |g|. */
const char *sy_graph_last_error(const sy_graph *g);

/* Adds a leaf tensor (input, weight or KV state) of |dtype| and shape
 * ne[0..n_dims-1] with contiguous strides.  |data| (may be NULL) is the
 * host memory holding its contents; it is borrowed and must outlive the graph.
 * Ownership: the tensor belongs to |g|. */
sy_status sy_graph_add_tensor(sy_graph *g, const char *name, sy_dtype dtype, uint32_t n_dims,
                              const int64_t *ne, sy_tensor_role role, void *data,
                              sy_tensor **out_tensor);

/* Adds a node running |op| on |inputs|; the op catalogue checks shapes and
 * dtypes and creates the output tensor.  |params| may be NULL (all zero).
 * On error nothing is added and sy_graph_last_error() names the node.
 * Ownership: the output tensor belongs to |g|. */
sy_status sy_graph_add_node(sy_graph *g, sy_op op, const char *name, sy_tensor *const *inputs,
                            uint32_t n_inputs, const sy_op_params *params,
                            sy_tensor **out_output);

/* Adds a node writing an existing tensor |output| of |g| (advanced use:
 * graphs assembled from parts).  Shapes are checked at sy_graph_freeze(). */
sy_status sy_graph_add_node_into(sy_graph *g, sy_op op, const char *name,
                                 sy_tensor *const *inputs, uint32_t n_inputs,
                                 const sy_op_params *params, sy_tensor *output);

/* Marks |t| as an output the caller reads after execution. */
sy_status sy_graph_mark_output(sy_graph *g, sy_tensor *t);

/* Sets (or clears, with NULL) the host memory holding |t|'s contents:
 * leaves are read from it, marked outputs are written to it after
 * execution.  Borrowed: must outlive its use by the runtime. */
sy_status sy_graph_set_host_data(sy_graph *g, sy_tensor *t, void *data);

/* Returns the host memory bound to |t| with sy_graph_add_tensor() or
 * sy_graph_set_host_data(), or NULL. */
void *sy_graph_host_data(const sy_graph *g, const sy_tensor *t);

/* True when |t| belongs to |g| and is one of its marked outputs. */
bool sy_graph_is_output(const sy_graph *g, const sy_tensor *t);

/* Returns the node producing |t|, or NULL for leaves. */
sy_node *sy_graph_producer(const sy_graph *g, const sy_tensor *t);

/* Validates |g| and orders its nodes topologically: rejects dangling inputs
 * (tensors no node produces and that are not leaves), tensors written by two
 * nodes, cycles and shape/dtype errors, naming the node.  After a successful
 * freeze the graph is read-only. */
sy_status sy_graph_freeze(sy_graph *g);

bool sy_graph_is_frozen(const sy_graph *g);
uint32_t sy_graph_node_count(const sy_graph *g);
uint32_t sy_graph_tensor_count(const sy_graph *g);
/* Returns node |i| in topological order (after freeze) or NULL. */
sy_node *sy_graph_node(const sy_graph *g, uint32_t i);
/* Returns tensor |i| or NULL. */
sy_tensor *sy_graph_tensor(const sy_graph *g, uint32_t i);
/* Returns the tensor named |name| or NULL. */
sy_tensor *sy_graph_find_tensor(const sy_graph *g, const char *name);

/* ------------------------------------------------------------- op catalogue */

/* Returns the catalogue name of |op| ("rms_norm"), or "invalid". */
const char *sy_op_name(sy_op op);

/* Infers the output shape/dtype of |op| on |inputs| into |out| (ne, nb,
 * dtype, n_dims, view fields).  Fills |err| (may be NULL) on failure. */
sy_status sy_op_infer(sy_op op, sy_tensor *const *inputs, uint32_t n_inputs,
                      const sy_op_params *params, sy_tensor *out, char *err, size_t err_size);

/* Counts FLOPs and bytes read + written by |node|. */
void sy_op_cost(const sy_node *node, uint64_t *out_flops, uint64_t *out_bytes);

/* Runs the portable reference kernel of |node| on host memory (every
 * tensor's data pointer set).  This is the ground truth for every plugin. */
sy_status sy_op_reference_execute(const sy_node *node);

/* Runs the frozen graph |g| with the reference kernels on host memory:
 * leaves are read from their host data, temporary host memory holds every
 * other tensor, and marked outputs are copied to their host data when set.
 * The ground truth that plugins are checked against.
 * Thread-safety: not safe on the same graph concurrently. */
sy_status sy_graph_run_reference(sy_graph *g);

/* --------------------------------------------------------------- runtime */

typedef struct sy_runtime sy_runtime;

typedef void (*sy_log_fn)(void *user, sy_log_level level, const char *msg);

typedef struct sy_runtime_options {
    uint32_t struct_size;      /* sizeof(sy_runtime_options) */
    const char *plugin_path;   /* colon list searched first; NULL: $SWITCHYARD_PLUGIN_PATH */
    bool no_default_paths;     /* search only plugin_path / $SWITCHYARD_PLUGIN_PATH */
    sy_log_fn log_fn;          /* NULL: messages at or above log_level go to stderr */
    void *log_user;
    sy_log_level log_level;    /* default SY_LOG_WARN; $SWITCHYARD_LOG overrides */
} sy_runtime_options;

/* Fills |opts| with defaults. */
void sy_runtime_options_init(sy_runtime_options *opts);

/* Creates a runtime: reads the environment once, loads every plugin found
 * and records each refusal.  |opts| may be NULL.
 * Ownership: caller owns *out_rt; free with sy_runtime_destroy().
 * Thread-safety: a runtime is used from one thread at a time. */
sy_status sy_runtime_create(const sy_runtime_options *opts, sy_runtime **out_rt);
void sy_runtime_destroy(sy_runtime *rt);

/* Returns detail for the last failed call on |rt|, or "".
 * Ownership: owned by |rt|, valid until the next call on |rt|. */
const char *sy_runtime_last_error(const sy_runtime *rt);

/* Sends a message through |rt|'s logger. */
void sy_runtime_log(sy_runtime *rt, sy_log_level level, const char *fmt, ...)
    __attribute__((format(printf, 3, 4)));

typedef struct sy_plugin_info {
    const char *name;
    const char *version;
    const char *vendor;
    const char *path;
    uint32_t abi_version;
    uint32_t device_count;
} sy_plugin_info;

typedef struct sy_plugin_refusal {
    const char *path;   /* the file refused */
    const char *reason; /* why, in words */
    sy_status status;
} sy_plugin_refusal;

uint32_t sy_runtime_plugin_count(const sy_runtime *rt);
sy_status sy_runtime_query_plugin(const sy_runtime *rt, uint32_t i, sy_plugin_info *out_info);
uint32_t sy_runtime_refusal_count(const sy_runtime *rt);
sy_status sy_runtime_query_refusal(const sy_runtime *rt, uint32_t i,
                                   sy_plugin_refusal *out_refusal);

/* Devices of all loaded plugins, numbered 0..count-1 in load order. */
uint32_t sy_runtime_device_count(const sy_runtime *rt);
sy_status sy_runtime_query_device(const sy_runtime *rt, uint32_t i, sy_device_desc *out_desc);
/* Finds a device by name ("cpu", "opencl:0"); SY_E_NOT_FOUND otherwise. */
sy_status sy_runtime_find_device(const sy_runtime *rt, const char *name, uint32_t *out_index);
/* Asks device |i| whether it can run |node|. */
bool sy_runtime_device_supports(const sy_runtime *rt, uint32_t i, const sy_node *node,
                                sy_support *out_why);

/* Runs the frozen graph |g| entirely on device |dev|: allocates device
 * buffers for every non-view tensor, copies leaves that have host data in,
 * executes, and copies outputs (marked tensors) back to their host data
 * pointers when set, or keeps them readable through sy_runtime_read_tensor.
 * This is the single-device path; the scheduler places multi-device plans. */
sy_status sy_runtime_execute_on(sy_runtime *rt, sy_graph *g, uint32_t dev);

/* Hwloc topology summary of this machine, one line. */
sy_status sy_runtime_query_topology(const sy_runtime *rt, char *out_text, size_t size);

#ifdef __cplusplus
}
#endif
#endif
