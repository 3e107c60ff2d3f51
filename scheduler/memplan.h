/* The activation memory planner: gives every activation a plan keeps on a
 * device (a node's output root, or the copy a transfer brings) an offset
 * in that device's arena, reusing bytes between activations whose
 * lifetimes do not overlap.  Not part of the public API; used by the
 * planner (the plan's memory per device) and the executor (the arenas it
 * allocates).
 *
 * Time is the plan's run order: every node of a segment and every
 * transfer is one tick, and the copy of marked outputs back to host data
 * is one last tick.  An activation lives on a device from the first tick
 * that touches it there to the last (inclusive).  A transfer between two
 * devices that share host memory may map the source instead of copying
 * (the executor does so wherever it can); the destination then has no
 * storage of its own and its reads extend the source's lifetime. */
#ifndef SY_SCHEDULER_MEMPLAN_H
#define SY_SCHEDULER_MEMPLAN_H

#include <stddef.h>
#include <stdint.h>

#include "plan_internal.h"

/* Offsets are multiples of this: enough for every vector load the CPU
 * kernels do and for OpenCL's base-address alignment on common devices. */
#define SY__MEMPLAN_ALIGN 256u

/* One buffer of an arena. */
typedef struct sy__mp_item {
    uint32_t tensor;      /* root storage tensor id (graph plans) */
    uint32_t slot;        /* plan device slot: whose arena */
    uint32_t first, last; /* ticks of the first and last use, inclusive */
    uint64_t size;        /* bytes */
    uint64_t offset;      /* in the slot's arena; a multiple of the alignment */
} sy__mp_item;

typedef struct sy__memplan {
    uint32_t n_tensors, D;
    uint32_t n_ticks; /* ticks in use: items lie within [0, n_ticks) */
    uint64_t align;
    sy__mp_item *items;
    uint32_t n_items;
    /* n_tensors * D: the item holding root t's storage as seen from slot
     * d: its own (items[..].slot == d) or, after a mapping transfer, the
     * source's (slot != d); SY__NONE when t has no storage there. */
    uint32_t *item_of;
    uint64_t arena[SY__MAX_PLAN_DEVICES];     /* bytes of each slot's arena */
    uint64_t live_peak[SY__MAX_PLAN_DEVICES]; /* most aligned bytes live at one tick */
    uint64_t total[SY__MAX_PLAN_DEVICES];     /* sum of the aligned sizes: no reuse */
} sy__memplan;

/* Places |n| items (tensor, slot, first, last and size set) at aligned
 * offsets so that no two items of one slot whose tick ranges meet share a
 * byte, and writes each slot's arena size (SY__MAX_PLAN_DEVICES entries).
 * Best fit, largest items first: each item takes the smallest gap left
 * between the items already placed that overlap it in time, else the
 * lowest offset above them all.  |align| is a power of two.
 * Thread-safety: safe. */
sy_status sy__memplan_pack(sy__mp_item *items, uint32_t n, uint32_t n_ticks, uint64_t align,
                           uint64_t *out_arena);

/* Fills alias_to[s] with the slots of |plan| that a transfer from slot s
 * maps instead of copying, as the executor does: both devices share host
 * memory and the destination can wrap it (buffer_import_host). */
void sy__memplan_alias_masks(const sy_runtime *rt, const sy_plan *plan,
                             uint8_t out_alias_to[SY__MAX_PLAN_DEVICES]);

/* Plans the arenas for running |g| by |plan| with the graph's own sizes.
 * alias_to[s] is the mask of slots a transfer from slot s maps instead of
 * copying.  On failure (a plan that reads an activation where it never
 * brings it, out of memory) |err| says why and *out is zeroed.
 * Ownership: free with sy__memplan_free().  Thread-safety: safe. */
sy_status sy__memplan_build(const sy_graph *g, const sy_plan *plan,
                            const uint8_t alias_to[SY__MAX_PLAN_DEVICES], uint64_t align,
                            sy__memplan *out, char *err, size_t err_size);
void sy__memplan_free(sy__memplan *mp);

#endif
