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
    bool no_default_paths;     /* search only plugin_path / $SWITCHYARD_PLUGIN_PATH, and
                                * only $SWITCHYARD_PROFILE_DIR for profiles */
    sy_log_fn log_fn;          /* NULL: messages at or above log_level go to stderr */
    void *log_user;
    sy_log_level log_level;    /* default SY_LOG_WARN; $SWITCHYARD_LOG overrides */
    /* Comma list of plugin names to load ("cpu,npusim"); NULL: every plugin
     * found, or $SWITCHYARD_PLUGINS.  Files named sy-NAME.so outside the
     * list are not even opened, so an unused GPU stack costs no memory. */
    const char *plugins;
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
 * executes, and copies marked outputs back to their host data (set with
 * sy_graph_set_host_data); KV leaves updated in place are copied back too
 * when the device could not use their host memory directly.
 * This is the single-device path; the scheduler places multi-device plans. */
sy_status sy_runtime_execute_on(sy_runtime *rt, sy_graph *g, uint32_t dev);

/* A device that failed while running a plan: an error from its execute,
 * synchronize, buffer or copy functions, or a node it no longer supports
 * (a cached plan meeting a kernel the device refused since). */
typedef struct sy_device_failure {
    uint32_t device;              /* runtime index of the device */
    uint32_t node;                /* graph index of the node it failed on; UINT32_MAX when
                                   * no one node is to blame (a leaf, a transfer) */
    sy_status status;
    char node_name[SY_NAME_MAX];  /* "" when node is UINT32_MAX */
    char text[512];               /* the error as sy_runtime_last_error() gave it */
} sy_device_failure;

/* Describes the device failure of the last plan run (sy_runtime_execute_plan)
 * if it failed on a device; SY_E_NOT_FOUND when it did not (each run starts
 * by forgetting the previous one's).  Sessions use it to re-plan around
 * the failing (node, device) pair (sy_session_query_failure). */
sy_status sy_runtime_query_device_failure(const sy_runtime *rt, sy_device_failure *out_failure);

/* Device memory runtime device |device|'s plugin holds there, by the
 * plugin's own accounting (sy_plugin_desc.memory_usage): bytes in use now
 * and the most at once since the plugin was loaded or the last query with
 * |reset_peak| (which then restarts the peak from the bytes in use).
 * Either pointer may be NULL.  SY_E_UNSUPPORTED when the plugin does not
 * count; SY_E_NOT_FOUND past the last device.
 * Thread-safety: not with a run on that device. */
sy_status sy_runtime_query_device_memory(sy_runtime *rt, uint32_t device, bool reset_peak,
                                         uint64_t *out_in_use, uint64_t *out_peak);

/* Hwloc topology summary of this machine, one line. */
sy_status sy_runtime_query_topology(const sy_runtime *rt, char *out_text, size_t size);

/* ------------------------------------------------------------ models */

typedef struct sy_model sy_model;
typedef struct sy_session sy_session;

typedef struct sy_model_info {
    const char *arch;       /* "llama", "qwen2", "gemma3" */
    const char *name;       /* general.name, or the file name */
    uint32_t n_layer, n_embd, n_ff, n_head, n_head_kv, head_dim, n_vocab, n_ctx_train;
    uint64_t n_params;      /* elements over all weight tensors */
    uint64_t weight_bytes;  /* bytes of all weight tensors as stored */
    uint64_t file_bytes;
    double load_ms;         /* time sy_model_open() took */
} sy_model_info;

/* Opens the GGUF model at |path|: maps it (zero copy), reads the
 * architecture's hyperparameters, checks every tensor the architecture
 * needs (name, dtype, shape) and builds the tokenizer.  Errors name the
 * file and the field (sy_runtime_last_error(rt)).
 * Ownership: caller owns *out_model; free with sy_model_close().
 * Borrowed: |rt| must outlive the model.
 * Thread-safety: a model may be shared by sessions used from one thread. */
sy_status sy_model_open(sy_runtime *rt, const char *path, sy_model **out_model);
void sy_model_close(sy_model *m);
sy_status sy_model_query_info(const sy_model *m, sy_model_info *out_info);

/* Converts |text| (|len| bytes) to token ids.  |add_special| adds BOS/EOS
 * as the model asks; |parse_special| turns special-token text
 * ("<|im_start|>") into its id.  SY_E_LIMIT when |cap| is too small, with
 * *out_n set to the count needed. */
sy_status sy_model_tokenize(const sy_model *m, const char *text, size_t len, bool add_special,
                            bool parse_special, int32_t *out_ids, uint32_t cap, uint32_t *out_n);

/* Converts ids back to text (UTF-8 bytes, not NUL-terminated when |cap|
 * is exactly the length).  SY_E_LIMIT when |cap| is too small, with
 * *out_len set to the bytes needed. */
sy_status sy_model_detokenize(const sy_model *m, const int32_t *ids, uint32_t n, char *out,
                              size_t cap, size_t *out_len);

/* Formats one user message (and an optional |system| message, may be
 * NULL) in the model's chat template with the assistant prompt appended.
 * SY_E_LIMIT when |cap| is too small, with *out_len set to the need. */
sy_status sy_model_format_chat(const sy_model *m, const char *system, const char *user,
                               char *out, size_t cap, size_t *out_len);

/* True when |token| ends a turn or the text (EOS, EOT, <|im_end|>, ...). */
bool sy_model_is_end_token(const sy_model *m, int32_t token);

/* The text that ends the assistant's turn when the model's chat format
 * marks it with plain text instead of an end token: a model without a
 * chat template (a base model) is given a "User: .../Assistant:"
 * transcript by sy_model_format_chat(), and its answer ends where it
 * starts the next "\nUser:" line.  "" when an end token ends the turn.
 * Stop generating when the generated text contains it (and drop it).
 * Ownership: static storage.  Thread-safety: safe. */
const char *sy_model_chat_stop_text(const sy_model *m);

/* What a session does when new tokens would not fit its context
 * (docs/memory.md). */
typedef enum sy_context_policy {
    SY_CONTEXT_ERROR = 0,  /* refuse with SY_E_LIMIT, naming the sizes (the default) */
    SY_CONTEXT_SHIFT = 1,  /* drop the older half of the tokens after the first n_keep and
                            * re-evaluate the rest at their new positions, then go on */
    SY_CONTEXT_WINDOW = 2  /* every layer attends to its last |window| tokens only; the
                            * context never fills and the cache holds window - 1 + n_batch
                            * positions per layer (at most n_ctx) */
} sy_context_policy;

typedef struct sy_session_options {
    uint32_t struct_size;  /* sizeof(sy_session_options) */
    uint32_t n_ctx;        /* context length in tokens; 0: min(4096, trained context) */
    sy_dtype kv_type;      /* KV cache: SY_DTYPE_F16 (default), F32, Q8_0 or Q4_0 */
    const char *devices;   /* comma list of devices the scheduler may use ("cpu,opencl:0");
                            * NULL: every loaded device */
    const char *policy;    /* "latency" (NULL), "cpu-only" or "prefer:DEVICE" */
    uint32_t n_batch;      /* prompt tokens per prefill step; 0: 512 */
    const char *const *pins; /* n_pins "GLOB=DEVICE" placement pins, as sy_plan_options;
                              * borrowed: must outlive the session */
    uint32_t n_pins;
    sy_context_policy context_policy; /* SY_CONTEXT_ERROR (0) unless set */
    uint32_t n_keep;       /* SHIFT: leading tokens never dropped (a system prompt) */
    uint32_t window;       /* WINDOW: attention span in tokens, 1 .. n_ctx */
    const char *const *mem; /* n_mem "DEVICE=SIZE" budgets (as sy_plan_options.mem; "cpu" is
                             * the host's memory); borrowed: must outlive the session.  The
                             * session refuses to start when its predicted peak on a device
                             * exceeds the budget (sy_model_plan_memory) */
    uint32_t n_mem;
    bool fit;              /* with budgets: start with the largest context, then the
                            * smallest KV type, that fits instead of refusing */
    bool time_nodes;       /* time every node of every step (sy_session_query_node_timing);
                            * each node then runs as a launch of its own, so steps are slower */
} sy_session_options;

void sy_session_options_init(sy_session_options *opts);

/* Computes the bytes of the KV cache a session of |m| with |opts| (may be
 * NULL) allocates, without allocating it: per layer K and V of kv_type,
 * n_ctx positions, fewer for layers with an attention window.  Errors
 * (an unsupported KV type, a window wider than the context) in
 * sy_runtime_last_error().  Thread-safety: as sy_session_create(). */
sy_status sy_model_query_kv_bytes(const sy_model *m, const sy_session_options *opts,
                                  uint64_t *out_bytes);

/* Creates a conversation on |m|: its own KV cache and position, sharing
 * the model's weights.  |opts| may be NULL.
 * Ownership: caller owns *out_session; free with sy_session_destroy().
 * Borrowed: |m| must outlive the session. */
sy_status sy_session_create(sy_model *m, const sy_session_options *opts, sy_session **out_session);
void sy_session_destroy(sy_session *s);
const char *sy_session_last_error(const sy_session *s);

/* Forgets the context (the KV cache is reused). */
void sy_session_reset(sy_session *s);
uint32_t sy_session_n_past(const sy_session *s);

/* Appends |n| tokens to the context and computes their logits: for every
 * one of them into |out_logits| (n * n_vocab floats) when |all_logits|,
 * else for the last one only (n_vocab floats).  |out_logits| may be NULL.
 * When the context would overflow: SY_E_LIMIT naming both sizes
 * (SY_CONTEXT_ERROR), a shift before the new tokens (SY_CONTEXT_SHIFT;
 * SY_E_LIMIT when n_keep + n exceed the context), nothing (WINDOW). */
sy_status sy_session_eval(sy_session *s, const int32_t *tokens, uint32_t n, bool all_logits,
                          float *out_logits);

typedef struct sy_generate_params {
    uint32_t struct_size;  /* sizeof(sy_generate_params) */
    uint32_t n_predict;    /* tokens to generate at most; 0: until an end token (or, with
                            * SY_CONTEXT_ERROR, the context is full).  SY_CONTEXT_ERROR
                            * fails with SY_E_LIMIT when the context fills first */
    float temperature;     /* 0: greedy */
    uint32_t top_k;        /* 0: off */
    float top_p;           /* 1: off */
    float min_p;           /* 0: off */
    float repeat_penalty;  /* 1: off */
    uint32_t repeat_last_n;
    uint64_t seed;
    bool truncate_prompt;  /* keep the prompt's last tokens when it does not fit (else SY_E_LIMIT) */
} sy_generate_params;

void sy_generate_params_init(sy_generate_params *params);

/* Receives each generated token and its text as soon as it is sampled.
 * Return false to stop generating. */
typedef bool (*sy_token_fn)(void *user, int32_t token, const char *text, size_t len);

/* Evaluates |prompt| (token ids) and generates up to params->n_predict
 * tokens, calling |on_token| for each; stops at an end token. */
sy_status sy_session_generate(sy_session *s, const int32_t *prompt, uint32_t n_prompt,
                              const sy_generate_params *params, sy_token_fn on_token, void *user);

typedef struct sy_metrics {
    double load_ms;            /* model open */
    double ttft_ms;            /* generate start to the first sampled token */
    double prefill_ms;
    uint32_t prefill_tokens;
    double decode_ms;
    uint32_t decode_tokens;
    double prefill_tok_s;
    double decode_tok_s;
    uint64_t peak_rss_bytes;   /* process peak resident set */
    uint64_t kv_bytes;         /* this session's KV cache */
} sy_metrics;

/* A device that failed while running one of the session's steps.  The
 * session marked the pair unsupported in its planner, re-planned and ran
 * the step again, so generation went on (docs/scheduler.md, "Device
 * failures"); each failure is also logged as a warning. */
typedef struct sy_session_failure {
    const char *device;   /* the device's name */
    const char *node;     /* the node it failed on; "" when no one node was to blame */
    const char *excluded; /* what the session took off the device: the node's name, its op
                           * ("matmul") when the op had failed there before, or "*" */
    sy_status status;
    const char *text;     /* the error as the executor gave it */
    uint32_t position;    /* n_past of the step */
} sy_session_failure;

/* Returns the number of device failures |s| has re-planned around. */
uint32_t sy_session_failure_count(const sy_session *s);

/* Describes failure |i| (0 .. count-1, oldest first).  Strings are owned
 * by |s| and valid until it is destroyed. */
sy_status sy_session_query_failure(const sy_session *s, uint32_t i,
                                   sy_session_failure *out_failure);

/* Where a session's time went, with sy_session_options.time_nodes: the
 * nodes of every step so far, totalled per node name without its layer
 * prefix ("ffn_down" for blk.3.ffn_down), op and device. */
typedef struct sy_node_timing {
    const char *name;        /* "ffn_down", "attn", "output" */
    const char *op;          /* "matmul" */
    uint32_t device;         /* runtime device index */
    const char *device_name; /* "cpu" */
    uint64_t count;          /* nodes timed under this entry (layers x steps) */
    double seconds;          /* their total wall time */
} sy_node_timing;

/* Returns the number of node timing entries of |s| (0 without time_nodes). */
uint32_t sy_session_node_timing_count(const sy_session *s);

/* Describes entry |i| (0 .. count-1, the most time first).  Strings are
 * owned by |s| (names) or its runtime (device names) and valid until the
 * next step.  SY_E_NOT_FOUND past the last entry. */
sy_status sy_session_query_node_timing(const sy_session *s, uint32_t i,
                                       sy_node_timing *out_timing);

/* What a session's steps did across devices, counted by its executor as
 * it ran them (sy_executor_query_stats), from the session's creation on. */
typedef struct sy_step_stats {
    uint32_t struct_size;    /* sizeof(sy_step_stats) */
    uint64_t steps;          /* graphs run to the end: prefill chunks and decode steps (a
                              * step re-run after a device failure counts again) */
    uint64_t segments;       /* device segments launched */
    uint64_t switches;       /* segments launched on another device than the segment
                              * before them in the same step */
    uint64_t transfers;      /* values moved (copied or mapped) to another device */
    uint64_t transfer_bytes; /* their bytes, as the graphs run held them */
    uint64_t planned_bytes;  /* the same transfers' bytes as their plans list them (a plan
                              * serves a shape class, so they can differ) */
    /* Added after the first release (a caller built before it passes the
     * shorter struct_size and gets the fields above): */
    uint64_t replayed;       /* steps that ran the nodes the same graph and plan bound the
                              * step before, only their changed parameters copied (a kept
                              * decode graph on one device; counted in |steps| too) */
} sy_step_stats;

/* Fills |stats| with zeros and its struct_size. */
void sy_step_stats_init(sy_step_stats *stats);

/* Fills |out_stats| (struct_size set first) with what |s|'s executor
 * counted so far.  Thread-safety: not with a step of |s| in flight. */
sy_status sy_session_query_step_stats(const sy_session *s, sy_step_stats *out_stats);

/* Metrics of the last sy_session_generate(). */
sy_status sy_session_query_metrics(const sy_session *s, sy_metrics *out_metrics);

/* ---------------------------------------------------------------- memory
 * What a session will need per device before it is created, and what it
 * used (docs/memory.md, "Budgets, --fit and peak memory"). */

#define SY_MEMORY_MAX_DEVICES 8

typedef struct sy_memory_device {
    char name[SY_NAME_MAX];  /* "cpu", "opencl:0" */
    uint32_t device;         /* runtime index */
    bool host;               /* its memory is host memory: part of the cpu row too */
    uint64_t weight_bytes;   /* cpu: the weights' file pages every device reads or uploads
                              * from; others: weights uploaded there and kept */
    uint64_t kv_bytes;       /* cpu: the whole KV cache (host memory, full context); others:
                              * the caches of the layers placed there, kept there */
    uint64_t arena_bytes;    /* activation arena, the larger of the prefill-chunk and decode
                              * plans' (cpu: the arenas of every device in host memory) */
    uint64_t overhead_bytes; /* cpu: the process's resident memory besides the weights when
                              * planned (code, plugins, tokenizer) plus the session's own
                              * buffers and plans; others: 0 */
    uint64_t peak_bytes;     /* predicted peak: the sum of the four */
    uint64_t budget_bytes;   /* from |mem|; 0: none */
} sy_memory_device;

typedef struct sy_memory_plan {
    uint32_t struct_size;    /* sizeof(sy_memory_plan) */
    uint32_t n_ctx;          /* the context planned for (after --fit) */
    sy_dtype kv_type;        /* the KV type planned for (after --fit) */
    uint32_t n_batch;        /* prompt tokens per prefill step */
    uint32_t n_devices;      /* rows: cpu first, then every other device the plans use */
    sy_memory_device devices[SY_MEMORY_MAX_DEVICES];
    bool fitted;             /* fit changed the context or the KV type */
    char note[256];          /* what fit chose, "" when nothing changed */
} sy_memory_plan;

/* Fills |plan| with zeros and its struct_size. */
void sy_memory_plan_init(sy_memory_plan *plan);

/* Predicts the memory a session of |m| with |opts| (may be NULL) needs
 * on each device, without allocating it: it plans a full prefill chunk
 * and a decode step at the end of the context as the session would, lays
 * out their activation arenas, and adds the weights, the KV cache at the
 * whole context and the runtime's overhead.  Where opts->mem gives a
 * budget and the predicted peak exceeds it: SY_E_LIMIT with "model needs
 * X MiB on DEV, budget Y MiB (...)" in sy_runtime_last_error(), or with
 * opts->fit the largest context (keeping the KV type; below 256 tokens,
 * smaller KV types: q8_0, then q4_0) that fits, said in out_plan->note.
 * |out_plan| is filled in either case.
 * Thread-safety: as sy_session_create(). */
sy_status sy_model_plan_memory(sy_model *m, const sy_session_options *opts,
                               sy_memory_plan *out_plan);

typedef struct sy_memory_usage {
    uint32_t struct_size;    /* sizeof(sy_memory_usage) */
    uint64_t host_rss_bytes; /* the process's resident set now (VmRSS) */
    uint64_t host_peak_bytes; /* its peak so far (VmHWM): the cpu row's measured peak */
    uint32_t n_devices;
    struct {
        char name[SY_NAME_MAX];
        uint32_t device;      /* runtime index */
        uint64_t current_bytes; /* buffers the session's executor holds there now */
        uint64_t peak_bytes;  /* the most it held there at once */
        bool plugin_counted;  /* the plugin counts its memory (sy_runtime_query_device_memory):
                               * the two below hold its figures */
        uint64_t plugin_bytes;      /* what the plugin holds there now, every session's */
        uint64_t plugin_peak_bytes; /* its peak since loaded or last reset */
    } devices[SY_MEMORY_MAX_DEVICES];
} sy_memory_usage;

/* Fills |usage| with zeros and its struct_size. */
void sy_memory_usage_init(sy_memory_usage *usage);

/* Fills |out_plan| (may be NULL) with the memory plan |s| was created
 * with (predicted before it allocated anything; after fit, what fit
 * chose) and |out_usage| (may be NULL) with what it uses: the process's
 * resident set from the OS, each device's buffers as the session's
 * executor counts them, and, where the plugin counts, what it holds by
 * its own accounting.  Set struct_size (the _init functions) first. */
sy_status sy_session_query_memory(const sy_session *s, sy_memory_plan *out_plan,
                                  sy_memory_usage *out_usage);

#ifdef __cplusplus
}
#endif

/* The scheduler and plans: planners, plans, the executor. */
#include "switchyard/scheduler.h"

#endif
