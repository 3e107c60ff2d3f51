/* plugin-check internals shared by tools/plugin_check*.c. */
#ifndef SY_TOOLS_PLUGIN_CHECK_INTERNAL_H
#define SY_TOOLS_PLUGIN_CHECK_INTERNAL_H

#include <pthread.h>

#include "plugin_check.h"

/* Bytes of sy_plugin_desc every ABI 1.0 plugin provides. */
#define PCHECK_DESC_SIZE_1_0 \
    (offsetof(sy_plugin_desc, self_test) + sizeof(((sy_plugin_desc *)0)->self_test))

/* The host services plugin-check hands a plugin.  Thread-safe: a plugin may
 * call them from its own threads, and the threads check runs two states. */
typedef struct pcheck_host {
    sy_host host; /* host.ctx points back here */
    pthread_mutex_t lock;
    bool verbose;
    char plugin[SY_NAME_MAX];
    uint64_t alloc_limit;  /* larger requests fail (a real machine would too) */
    int64_t live_allocs;   /* host->alloc minus host->free */
    uint64_t reference_calls;
    char last_error[512];  /* the plugin's last message at warn or error level */
} pcheck_host;

/* One run of the suite. */
typedef struct pcheck_run {
    const sy_pcheck_options *opts;
    sy_pcheck_report *report;
    void *dl;
    sy_plugin_desc table;  /* the plugin's table copied up to its struct_size */
    pcheck_host host;
    void *state;           /* the state device checks use */
    uint32_t device_count;
    uint64_t rng;          /* xorshift state, from the report's seed */
    uint64_t last_key;     /* the last key passed to execute_keyed */
} pcheck_run;

/* Records one result and passes it to the callback.  |dev| is -1 for
 * plugin-wide checks.  Returns whether |outcome| is not a failure. */
bool pcheck_add(pcheck_run *run, const char *group, int32_t dev, sy_pcheck_outcome outcome,
                const char *name, const char *fmt, ...) __attribute__((format(printf, 6, 7)));

/* Records a pass without detail. */
bool pcheck_pass(pcheck_run *run, const char *group, int32_t dev, const char *name);

/* Returns the next pseudo-random 64-bit value of |*state| (xorshift64*). */
uint64_t pcheck_rand(uint64_t *state);
/* Returns a uniform float in [lo, hi). */
float pcheck_uniform(uint64_t *state, float lo, float hi);

/* Takes the plugin's last warn/error message (or "") into |out|, then clears it. */
void pcheck_host_take_error(pcheck_host *h, char *out, size_t size);
int64_t pcheck_host_live_allocs(pcheck_host *h);
uint64_t pcheck_host_reference_calls(pcheck_host *h);

/* plugin_check_abi.c: loads the plugin and checks its table; false when
 * nothing more can be checked. */
bool pcheck_abi(pcheck_run *run);
/* init, device_count, repeated init/deinit; false when init failed. */
bool pcheck_lifecycle(pcheck_run *run);
/* describe() of |dev|; fills |out_desc|; false when describe failed. */
bool pcheck_describe(pcheck_run *run, uint32_t dev, sy_device_desc *out_desc);

/* event_record/wait/release (ABI 1.1) when present (plugin_check_abi.c). */
void pcheck_events(pcheck_run *run, uint32_t dev, const sy_device_desc *desc);

/* plugin_check_buffers.c */
void pcheck_buffers(pcheck_run *run, uint32_t dev, const sy_device_desc *desc);
/* Two fresh plugin states used from two threads at once. */
void pcheck_threads(pcheck_run *run, uint32_t dev, const sy_device_desc *desc);

/* plugin_check_cases.c: the op cases, as graphs with random inputs. */
typedef struct pcheck_case {
    char name[96];
    sy_graph *g;
    sy_node *node;        /* the node under test: the graph's last node */
    sy_tensor *result;    /* the tensor compared: the output, or the KV leaf written */
    void *hold[16];       /* host memory of leaves and the result */
    uint32_t n_hold;
    void *result_init;    /* for a written leaf: its bytes before the run */
    bool supports_only;   /* too big to run: only supports() is asked */
} pcheck_case;

/* Number of cases in the catalogue. */
uint32_t pcheck_case_count(void);
/* Builds case |i| with inputs drawn from |rng|; false (and *c cleared) on
 * failure, with |err| saying why. */
bool pcheck_case_build(uint32_t i, uint64_t *rng, uint64_t memory_bytes, pcheck_case *c,
                       char *err, size_t err_size);
void pcheck_case_free(pcheck_case *c);
/* Converts |n| elements of |dtype| at |src| to floats through the reference
 * COPY kernel (I32 by value). */
sy_status pcheck_to_f32(uint32_t dtype, const void *src, int64_t n, float *dst);

/* plugin_check_ops.c */
void pcheck_ops(pcheck_run *run, uint32_t dev, const sy_device_desc *desc);
/* Runs case |c| on |dev| of |state| and compares; fills |detail|.
 * Returns PASS or FAIL (the case must be supported). */
sy_pcheck_outcome pcheck_case_run(pcheck_run *run, void *state, uint32_t dev,
                                  const sy_device_desc *desc, pcheck_case *c, char *detail,
                                  size_t detail_size);

#endif
