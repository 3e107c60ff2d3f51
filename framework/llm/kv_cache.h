/* The KV cache of one session: per layer, K and V rows of the cache dtype
 * (F32, F16, Q8_0, Q4_0) and how many positions the layer keeps.
 *
 * A layer that attends to the whole context holds n_ctx positions, row r
 * being position r.  A layer with an attention window of W tokens (Gemma
 * 3's local layers, or every layer under SY_CONTEXT_WINDOW) never reads a
 * key more than W - 1 positions behind its query, so it holds only
 * W - 1 + n_batch positions: row r is position pos0 + r, and before a step
 * that would run past the last row the last W - 1 positions are moved to
 * the front (one memmove per layer every n_batch tokens of decode).  The
 * graph sees the rows as an ordinary cache whose first row is position
 * pos0: KV_WRITE starts at n_past - pos0 and ATTENTION gets n_past - pos0
 * as its n_past, which keeps its causal and window masks exact; RoPE
 * rotates by the true positions.  No kernel knows about the sliding. */
#ifndef SY_LLM_KV_CACHE_H
#define SY_LLM_KV_CACHE_H

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

#include "switchyard/switchyard.h"

struct sy_hparams;

typedef struct sy_kv_layer {
    void *k, *v;     /* [head_dim, n_head_kv, rows] of the cache dtype; NULL in a layout */
    uint32_t rows;   /* positions the layer holds */
    uint32_t window; /* attention span in tokens; 0: the whole context */
    uint32_t pos0;   /* position held by row 0 */
} sy_kv_layer;

typedef struct sy_kv_config {
    sy_dtype type;     /* F32, F16, Q8_0 or Q4_0 */
    uint32_t n_ctx;    /* positions of a whole-context layer; caps every layer */
    uint32_t n_batch;  /* most tokens one step appends */
    uint32_t window;   /* 0, or the span every layer is limited to (SY_CONTEXT_WINDOW) */
} sy_kv_config;

typedef struct sy_kv_cache {
    sy_dtype type;
    uint32_t n_layer;
    size_t row_bytes;     /* one position of one layer: n_head_kv rows of head_dim */
    uint64_t bytes;       /* K and V of every layer */
    uint32_t max_step;    /* most tokens one step may append (<= n_batch) */
    sy_kv_layer *layers;
} sy_kv_cache;

/* Computes the rows and window of every layer of a model with |hp| under
 * |cfg| into out_layers[0..n_layer) (may be NULL) and the bytes K and V
 * take; allocates nothing.  Errors (an unsupported dtype, a head size that
 * is not whole blocks, a window wider than the context) are written to
 * |err|.  Thread-safety: safe. */
sy_status sy__kv_cache_layout(const struct sy_hparams *hp, const sy_kv_config *cfg,
                              sy_kv_layer *out_layers, uint64_t *out_bytes,
                              uint32_t *out_max_step, char *err, size_t err_size);

/* Allocates the cache (zeroed; untouched pages stay unbacked).
 * Ownership: |kv| owns its buffers until sy__kv_cache_deinit(). */
sy_status sy__kv_cache_init(sy_kv_cache *kv, const struct sy_hparams *hp,
                            const sy_kv_config *cfg, char *err, size_t err_size);
void sy__kv_cache_deinit(sy_kv_cache *kv);

/* Forgets every position (row 0 is position 0 again). */
void sy__kv_cache_reset(sy_kv_cache *kv);

/* Called before the rows of a layer's K or V buffer at |host| (|size|
 * bytes) are moved on the host: makes them current there (a device may
 * hold the newer copy) and notes that they change.  Non-OK stops the
 * slide and is returned (the callback reports why). */
typedef sy_status (*sy__kv_sync_fn)(void *user, void *host, uint64_t size);

/* Slides the windowed layers so that a step appending |n| tokens after
 * |n_past| has rows for them while keeping the last window - 1 positions
 * before n_past; |sync| (may be NULL) is called for each buffer before it
 * moves.  SY_E_INTERNAL, with the reason in |err|, when a layer cannot (n
 * exceeds max_step). */
sy_status sy__kv_cache_make_room(sy_kv_cache *kv, uint32_t n_past, uint32_t n,
                                 sy__kv_sync_fn sync, void *sync_user, char *err,
                                 size_t err_size);

/* True when every layer still holds the positions a step at |n_past| reads
 * (those before it, within each layer's window): a session may then rewind
 * to |n_past| and append from there. */
bool sy__kv_cache_can_resume(const sy_kv_cache *kv, uint32_t n_past);

#endif
