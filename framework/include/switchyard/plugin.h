/* Switchyard plugin ABI: the whole contract between the core and a backend
 * plugin (.so).  A plugin includes this header only and never links against
 * libswitchyard; the core hands it every service it needs in sy_host.
 *
 * Versioning: SY_PLUGIN_ABI_VERSION = major << 16 | minor.  The core refuses
 * a plugin whose major differs and reads a table field only when the
 * table's struct_size covers it.  Tables are append only: a new field bumps
 * the minor, any change to an existing field bumps the major.
 *
 * Threading: the core calls a plugin's functions for one device from one
 * thread at a time; calls for distinct devices may come from distinct
 * threads.  Plugins keep no globals (all state hangs off |state|), never
 * print (use host->log), and never exit or abort. */
#ifndef SWITCHYARD_PLUGIN_H
#define SWITCHYARD_PLUGIN_H

#include <stdarg.h>
#include <stdbool.h>
#include <stdint.h>

#include "switchyard/status.h"
#include "switchyard/types.h"

#ifdef __cplusplus
extern "C" {
#endif

#define SY_PLUGIN_ABI_MAJOR 1u
#define SY_PLUGIN_ABI_MINOR 3u
#define SY_PLUGIN_ABI_VERSION ((SY_PLUGIN_ABI_MAJOR << 16) | SY_PLUGIN_ABI_MINOR)
#define SY_PLUGIN_ABI_MAJOR_OF(v) ((uint32_t)(v) >> 16)
#define SY_PLUGIN_ABI_MINOR_OF(v) ((uint32_t)(v) & 0xffffu)
/* The minor version from which the core gives a plugin KV_WRITE and
 * ATTENTION with their position read at run time (types.h). */
#define SY_PLUGIN_ABI_MINOR_RUN_TIME_POSITION 3u

#if defined(_WIN32)
#define SY_PLUGIN_EXPORT __declspec(dllexport)
#else
#define SY_PLUGIN_EXPORT __attribute__((visibility("default")))
#endif

typedef enum sy_log_level {
    SY_LOG_ERROR = 0,
    SY_LOG_WARN = 1,
    SY_LOG_INFO = 2,
    SY_LOG_DEBUG = 3
} sy_log_level;

/* Services the core offers a plugin.  Valid from init() to deinit(). */
typedef struct sy_host {
    uint32_t abi_version; /* SY_PLUGIN_ABI_VERSION of the core */
    uint32_t struct_size; /* sizeof(sy_host) in the core */
    void *ctx;            /* pass back as the first argument of every service */
    /* --- ABI 1.0 --- */
    /* Logs one message, prefixed by the core with the plugin's name. */
    void (*log)(void *ctx, sy_log_level level, const char *msg);
    /* Allocates |size| bytes aligned to |align| (a power of two, >= 16); NULL on failure. */
    void *(*alloc)(void *ctx, size_t size, size_t align);
    void (*free)(void *ctx, void *ptr);
    /* Returns the catalogue name of |op| ("matmul"). */
    const char *(*op_name)(void *ctx, uint32_t op);
    /* Runs the portable reference kernel of |node| on host memory: every
     * input and the output must have a non-NULL data pointer. */
    sy_status (*reference_execute)(void *ctx, const sy_node *node);
    /* Counts the floating-point operations and bytes moved by |node|. */
    void (*op_cost)(void *ctx, const sy_node *node, uint64_t *out_flops, uint64_t *out_bytes);
} sy_host;

typedef enum sy_device_kind {
    SY_DEVICE_CPU = 0,
    SY_DEVICE_GPU = 1,
    SY_DEVICE_NPU = 2
} sy_device_kind;

/* What a device is.  The plugin fills it in describe(); zero means unknown. */
typedef struct sy_device_desc {
    uint32_t struct_size;     /* set by the core to sizeof(sy_device_desc) */
    uint32_t kind;            /* sy_device_kind */
    char name[SY_NAME_MAX];   /* "cpu", "opencl:0", "npusim" */
    char model[128];          /* marketing/driver name of the hardware */
    char vendor[SY_NAME_MAX];
    char driver[SY_NAME_MAX];
    uint64_t memory_bytes;    /* memory the device can allocate */
    uint32_t unified_memory;  /* 1 when device buffers are host memory (zero-copy) */
    uint32_t compute_units;   /* cores / CUs / NPU engines */
    double peak_flops;        /* F32 FLOP/s */
    double peak_bandwidth;    /* bytes/s the device reads its memory at */
    char topology[256];       /* one line, e.g. "1 package, 2 cores, L2 2 MiB, L3 32 MiB" */
} sy_device_desc;

/* Why a device cannot run a node. */
typedef enum sy_support_reason {
    SY_SUPPORT_YES = 0,
    SY_UNSUPPORTED_OP = 1,    /* the op is not implemented */
    SY_UNSUPPORTED_DTYPE = 2, /* an input or output dtype is not implemented */
    SY_UNSUPPORTED_SHAPE = 3, /* shape rule (alignment, static shape, rank) */
    SY_UNSUPPORTED_SIZE = 4,  /* a tensor exceeds a size limit */
    SY_UNSUPPORTED_MEMORY = 5 /* not enough device memory */
} sy_support_reason;

typedef struct sy_support {
    uint32_t reason;  /* sy_support_reason */
    char text[192];   /* human-readable detail, e.g. "K=100 is not a multiple of 32" */
} sy_support;

/* A plugin's descriptor table.  Functions taking |dev| address the device
 * by its index in [0, device_count()).  Buffers are opaque plugin handles. */
typedef struct sy_plugin_desc {
    uint32_t abi_version; /* SY_PLUGIN_ABI_VERSION the plugin was built with */
    uint32_t struct_size; /* sizeof(sy_plugin_desc) at build time */
    const char *name;     /* unique among loaded plugins: "cpu", "opencl" */
    const char *version;  /* the plugin's own version; part of profile keys */
    const char *vendor;
    /* --- ABI 1.0 --- */
    /* Creates the plugin's state.  On failure nothing is left allocated. */
    sy_status (*init)(const sy_host *host, void **out_state);
    void (*deinit)(void *state);
    uint32_t (*device_count)(void *state);
    sy_status (*describe)(void *state, uint32_t dev, sy_device_desc *out_desc);
    /* True when |dev| can run |node|; otherwise fills |out_why|. */
    bool (*supports)(void *state, uint32_t dev, const sy_node *node, sy_support *out_why);
    sy_status (*buffer_alloc)(void *state, uint32_t dev, uint64_t size, void **out_buffer);
    /* (optional, NULL = not possible) Wraps host memory the caller keeps
     * alive (e.g. mmap'd weights) as a device buffer without copying where
     * the device can read host memory. */
    sy_status (*buffer_import_host)(void *state, uint32_t dev, void *ptr, uint64_t size,
                                    void **out_buffer);
    void (*buffer_free)(void *state, uint32_t dev, void *buffer);
    /* (optional, NULL = never mappable) Host address of the buffer's byte 0
     * for as long as the buffer lives, or NULL when not mappable. */
    void *(*buffer_host_ptr)(void *state, uint32_t dev, void *buffer);
    sy_status (*copy_in)(void *state, uint32_t dev, void *buffer, uint64_t offset,
                         const void *src, uint64_t size);
    sy_status (*copy_out)(void *state, uint32_t dev, void *buffer, uint64_t offset, void *dst,
                          uint64_t size);
    /* (optional) Copies between two buffers of this plugin. */
    sy_status (*copy_device)(void *state, uint32_t dst_dev, void *dst, uint64_t dst_offset,
                             uint32_t src_dev, void *src, uint64_t src_offset, uint64_t size);
    /* Runs |n| nodes in order.  Tensors carry their residency on |dev|.
     * View nodes (sy_op_is_view) are passed too and must be no-ops: their
     * output already aliases the input's memory.
     * May return before completion; synchronize() waits.  Work queued on
     * one device runs in queue order.  Without events the core calls
     * synchronize() before it touches |nodes| again; a plugin with events
     * (ABI 1.1) reads everything the work needs from |nodes| and their
     * tensors before returning, as the core repoints those tensors for
     * the next segment at once.  copy_in/copy_out return when the copy is
     * done, after the work queued on the device before them. */
    sy_status (*execute)(void *state, uint32_t dev, sy_node *const *nodes, uint32_t n);
    sy_status (*synchronize)(void *state, uint32_t dev);
    /* (optional) Runs the device's own checks; fills |out_msg| on failure. */
    sy_status (*self_test)(void *state, uint32_t dev, char *out_msg, uint32_t msg_size);
    /* --- ABI 1.1: events (optional, all three or none; NULL = the core
     * calls synchronize() where it needs |dev|'s work done) --- */
    /* Records a marker after the work queued on |dev| so far (execute,
     * copies).  Ownership: caller owns *out_event; free with
     * event_release().  Since ABI 1.1. */
    sy_status (*event_record)(void *state, uint32_t dev, void **out_event);
    /* Blocks the calling thread until the work before |event| is done and
     * its results are visible to the host and to other devices; returns
     * the first error that work met (a failing kernel may report here
     * rather than from execute()).  Does not release |event|.  Since
     * ABI 1.1. */
    sy_status (*event_wait)(void *state, uint32_t dev, void *event);
    /* Frees |event|, waited for or not.  Since ABI 1.1. */
    void (*event_release)(void *state, uint32_t dev, void *event);
    /* (optional, NULL = not counted) Device memory the plugin holds on
     * |dev|, by its own accounting: the bytes of every buffer allocated
     * through buffer_alloc and not yet freed, plus whatever else it
     * allocated for the device and says so (scratch, staging); buffers
     * wrapping host memory (buffer_import_host) count 0.  The peak is the
     * most held at once since the plugin was initialised or since the
     * last call with |reset_peak|, which, after reporting, restarts it
     * from the bytes in use.  Either pointer may be NULL.  Since ABI 1.1. */
    sy_status (*memory_usage)(void *state, uint32_t dev, bool reset_peak, uint64_t *out_in_use,
                              uint64_t *out_peak);
    /* --- ABI 1.2 --- */
    /* (optional, NULL = the core calls execute()) Runs |n| nodes as
     * execute() does, and says that they are the nodes of an earlier call
     * with the same |key|, changed only where |changed| says.  The core
     * picks |key| (never 0) and passes it again only with the same |nodes|
     * array holding the same node pointers in the same order, with the
     * same ops, inputs, outputs, dtypes and storage; between two calls
     * with one key, only these may differ: the params of the |n_changed|
     * nodes in |changed|, and the ne, nb, view_offset, offset and data of
     * their outputs (which any node may read).  |changed| may name nodes
     * that are not among |nodes| (views, which the core need not pass).
     * Tensor contents may differ as in any call.  The core never reuses a
     * key for another array.  A plugin may keep what it derived from the
     * nodes under the key (grouping, kernel setup, data pointers) and at
     * the next call with it redo only what depends on |changed|; one that
     * has nothing kept under |key| takes every node as new.  Since ABI
     * 1.2. */
    sy_status (*execute_keyed)(void *state, uint32_t dev, sy_node *const *nodes, uint32_t n,
                               uint64_t key, sy_node *const *changed, uint32_t n_changed);
    /* --- ABI 1.3: no new field.  KV_WRITE and ATTENTION may come with a
     * run-time start / n_past input (types.h); the core gives those forms
     * only to plugins of 1.3 or later, whose supports() accepts or
     * refuses them. --- */
    /* --- append only --- */
} sy_plugin_desc;

/* The one exported symbol of a plugin.  Returns the plugin's table, or NULL
 * when the plugin cannot serve a host whose ABI is |host_abi|. */
typedef const sy_plugin_desc *(*sy_plugin_query_fn)(uint32_t host_abi);
#define SY_PLUGIN_ENTRY_SYMBOL "sy_plugin_query"

#ifdef __cplusplus
}
#endif
#endif
