/* The executor's kept state: KV caches (leaves of role KV with host data)
 * that live on the device that reads and writes them, between runs.
 *
 * With sy_executor_keep_state() on, a KV leaf whose home is a device with
 * memory of its own (unified_memory 0) gets a buffer there the first time
 * and keeps it: later runs bind the same buffer, copy nothing in, and copy
 * nothing back, so a decode step moves only the activations its plan
 * lists.  The device copy is then the current one and the host bytes are
 * stale until sy_executor_sync_state() fetches them.  Each host span has
 * at most one device copy: a run that homes the leaf on another device
 * (a re-plan moved its layer) fetches it to the host, frees the old copy
 * and uploads it to the new device once; a run that homes it in host
 * memory fetches it and drops the device copy.  A run that writes the
 * leaf somewhere else than its kept copy leaves the host bytes current
 * (copied back as before) and the kept copy is reloaded before its next
 * use.
 *
 * Internal to framework/runtime (executor_plan.c and executor_state.c). */
#ifndef SY_EXECUTOR_STATE_H
#define SY_EXECUTOR_STATE_H

#include <stdbool.h>
#include <stdint.h>

#include "runtime_internal.h"

typedef struct sy__xstate_entry {
    const void *host;  /* byte 0 of the span on the host: the key */
    uint64_t size;
    uint32_t dev;      /* runtime device holding the copy */
    void *buf;         /* its buffer there */
    bool host_stale;   /* the device copy is newer than the host bytes */
    bool dev_stale;    /* the host bytes are newer than the device copy */
    uint64_t run;      /* the run that last bound it */
    uint32_t tensor;   /* that run's root tensor id and plan slot */
    uint32_t slot;
} sy__xstate_entry;

typedef struct sy__xstate {
    bool on;
    sy__xstate_entry *e;
    uint32_t n, cap;
    uint64_t run; /* counts runs */
} sy__xstate;

/* Allocates / frees on runtime device |di| through the executor, which
 * counts the bytes (executor_plan.c). */
sy_status sy__executor_alloc(sy_executor *x, uint32_t di, uint64_t size, void **out_buffer);
void sy__executor_free(sy_executor *x, uint32_t di, void *buffer, uint64_t size);
/* Counts |size| bytes copied to or from runtime device |di|. */
void sy__executor_moved(sy_executor *x, uint32_t di, uint64_t size);

/* Binds KV leaf root |t| (tensor id |tensor|, plan slot |slot|) homed on
 * runtime device |di|: on a device with memory of its own, to its kept
 * copy there (*out_buf; made, moved or reloaded as needed); in host memory,
 * after fetching any device copy into the host bytes and dropping it, it
 * returns SY_E_UNSUPPORTED and the caller binds the host bytes as before.
 * SY_E_UNSUPPORTED too when keeping is off or |host| is NULL.  Errors are
 * set on |rt| with the device and tensor named. */
sy_status sy__xstate_place(sy__xstate *s, sy_executor *x, sy_runtime *rt, uint32_t di,
                           const void *host, uint64_t size, const char *name, uint32_t tensor,
                           uint32_t slot, void **out_buf);

/* After a run: |writer[tensor]| is the plan slot that wrote each root
 * (SY__NO_DEVICE none).  Kept copies written on their own slot become the
 * current bytes; written elsewhere, the host bytes are (copied back). */
void sy__xstate_after_run(sy__xstate *s, const uint8_t *writer, uint8_t no_device);

/* Makes [host, host + size) current on the host; |will_write|: the caller
 * changes those bytes next, so kept copies overlapping them are reloaded
 * before their next use. */
sy_status sy__xstate_sync(sy__xstate *s, sy_executor *x, sy_runtime *rt, const void *host,
                          uint64_t size, bool will_write);

/* Frees every kept copy (their bytes are dropped, not fetched). */
void sy__xstate_free(sy__xstate *s, sy_executor *x);

#endif
