/* Runtime internals shared by runtime.c, plugin_loader.c and
 * executor_single.c.  Not part of the public API. */
#ifndef SY_RUNTIME_INTERNAL_H
#define SY_RUNTIME_INTERNAL_H

#include <stdarg.h>
#include <stdatomic.h>
#include <stddef.h>
#include <stdint.h>

#include "switchyard/plugin.h"
#include "switchyard/switchyard.h"

/* Bytes of sy_plugin_desc that every ABI 1.0 plugin provides: all fields up
 * to and including self_test.  Later minors append fields past this. */
#define SY__PLUGIN_DESC_SIZE_1_0 \
    (offsetof(sy_plugin_desc, self_test) + sizeof(((sy_plugin_desc *)0)->self_test))

/* A plugin count of devices past this is a broken plugin, not a machine. */
#define SY__MAX_DEVICES_PER_PLUGIN 256u

/* One loaded plugin.  Heap-allocated on its own so that |host| keeps its
 * address for the plugin's whole life: the plugin may keep the pointer. */
typedef struct sy__plugin {
    struct sy_runtime *rt; /* owner; host services reach the logger through it */
    char *path;            /* realpath of the .so */
    void *handle;          /* dlopen handle, closed after deinit */
    /* The plugin's table copied up to its struct_size; fields it does not
     * cover are zero, so a NULL optional entry means "not provided". */
    sy_plugin_desc desc;
    void *state;           /* from desc.init */
    sy_host host;          /* services handed to the plugin; host.ctx is this record */
    uint32_t first_device; /* index of its device 0 in the runtime's device list */
    uint32_t device_count;
} sy__plugin;

typedef struct sy__device {
    sy__plugin *plugin;
    uint32_t index;      /* device number within its plugin */
    sy_device_desc desc; /* as the plugin described it, strings terminated */
} sy__device;

/* True when |dev|'s plugin has events (ABI 1.1; the loader admits all
 * three functions or none). */
static inline bool sy__device_has_events(const sy__device *dev)
{
    return dev->plugin->desc.event_record != NULL;
}

typedef struct sy__refusal {
    char *path;
    char *reason;
    sy_status status;
} sy__refusal;

struct sy_runtime {
    sy_log_fn log_fn; /* NULL: stderr */
    void *log_user;
    sy_log_level log_level; /* threshold of the stderr logger */
    char *plugin_path;      /* from the options or $SWITCHYARD_PLUGIN_PATH, or NULL */
    bool no_default_paths;
    char *plugin_allow;     /* comma list of plugin names to load, or NULL: all */
    char *profile_path;     /* ':'-separated directories searched for device profiles,
                             * resolved at create (sy__runtime_profile_path) */

    sy__plugin **plugins;
    uint32_t plugin_count, plugin_cap;
    sy__device *devices;
    uint32_t device_count, device_cap;
    sy__refusal *refusals;
    uint32_t refusal_count, refusal_cap;

    /* The last key handed to a plugin's execute_keyed (executor_replay.c):
     * unique per runtime, so two executors' replays never share one. */
    _Atomic uint64_t replay_key;

    char last_error[1024];
    bool has_failure;          /* failure holds the last device failure of a plan run */
    sy_device_failure failure;
};

/* Records that runtime device |device| failed (|node|: graph index of the
 * node it failed on, or UINT32_MAX), with rt->last_error as its text: what
 * sy_runtime_query_device_failure() reports and sessions re-plan around. */
void sy__runtime_note_failure(sy_runtime *rt, uint32_t device, const sy_node *node,
                              sy_status status);
/* Forgets the last device failure (a plan run starts). */
void sy__runtime_clear_failure(sy_runtime *rt);

/* Formats |fmt| into rt->last_error. */
void sy__runtime_set_error(sy_runtime *rt, const char *fmt, ...)
    __attribute__((format(printf, 2, 3)));

/* sy_runtime_log with a va_list. */
void sy__runtime_logv(sy_runtime *rt, sy_log_level level, const char *fmt, va_list ap)
    __attribute__((format(printf, 3, 0)));

/* Returns a newly allocated formatted string, or NULL when out of memory.
 * Ownership: caller frees. */
char *sy__strdup_printf(const char *fmt, ...) __attribute__((format(printf, 1, 2)));
char *sy__strdup_vprintf(const char *fmt, va_list ap) __attribute__((format(printf, 1, 0)));

/* Returns |items| grown so that it holds at least |need| elements of
 * |elem_size| bytes, updating *inout_cap; returns |items| itself when it is
 * already large enough.  Returns NULL when out of memory, and |items| and
 * *inout_cap are then unchanged and still valid. */
void *sy__array_grow(void *items, uint32_t need, size_t elem_size, uint32_t *inout_cap);

/* True when libswitchyard itself runs from the build tree it was built in
 * (plugin_loader.c). */
bool sy__runs_from_build_tree(void);

/* The directories searched for device profiles, in order, ':'-separated:
 * $SWITCHYARD_PROFILE_DIR (itself a list), then, unless no_default_paths,
 * $XDG_DATA_HOME/switchyard/profiles (or ~/.local/share/switchyard/profiles),
 * the source tree's profiles/ when running from the build tree, and the
 * installed profiles.  Read once, when the runtime is created.
 * Ownership: owned by |rt|. */
const char *sy__runtime_profile_path(const sy_runtime *rt);

/* Fills p->host with the services table for plugin |p|. */
void sy__host_init(sy__plugin *p);

/* Searches the plugin path, loads every plugin found and records every
 * refusal in |rt|.  Fails only when out of memory. */
sy_status sy__loader_load_all(sy_runtime *rt);

/* Deinitialises and closes every loaded plugin, last loaded first, and
 * frees the plugin, device and refusal lists. */
void sy__loader_unload_all(sy_runtime *rt);

/* Returns the short name of a sy_support_reason ("dtype"), or "unknown". */
const char *sy__support_reason_name(uint32_t reason);

/* Asks device |dev| whether it can run |node|; view nodes are always
 * supported because they compute nothing.  |out_why| is always filled:
 * on a yes its reason is SY_SUPPORT_YES and its text empty (the bytes
 * past the terminator are not cleared). */
bool sy__device_supports(const sy__device *dev, const sy_node *node, sy_support *out_why);

#endif
