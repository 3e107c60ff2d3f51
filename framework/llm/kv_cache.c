/* The KV cache: per-layer sizing, allocation and the sliding of windowed
 * layers (see kv_cache.h). */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "kv_cache.h"
#include "model_internal.h"

static uint32_t min_u32(uint32_t a, uint32_t b)
{
    return a < b ? a : b;
}

sy_status sy__kv_cache_layout(const sy_hparams *hp, const sy_kv_config *cfg,
                              sy_kv_layer *out_layers, uint64_t *out_bytes,
                              uint32_t *out_max_step, char *err, size_t err_size)
{
    switch (cfg->type) {
    case SY_DTYPE_F32:
    case SY_DTYPE_F16:
    case SY_DTYPE_Q8_0:
    case SY_DTYPE_Q4_0:
        break;
    default:
        snprintf(err, err_size, "KV type %s is not supported (f16, f32, q8_0, q4_0)",
                 sy_dtype_name(cfg->type));
        return SY_E_DTYPE;
    }
    const uint32_t bs = sy_dtype_block_size(cfg->type);
    if (hp->head_dim % bs != 0) {
        snprintf(err, err_size,
                 "KV type %s stores blocks of %u elements: the head size %u of this model is not "
                 "a multiple of %u (use f16 or f32)",
                 sy_dtype_name(cfg->type), bs, hp->head_dim, bs);
        return SY_E_DTYPE;
    }
    if (cfg->n_ctx == 0 || cfg->n_batch == 0) {
        snprintf(err, err_size, "KV cache of %u positions and steps of %u tokens: both must be > 0",
                 cfg->n_ctx, cfg->n_batch);
        return SY_E_INVALID_ARG;
    }
    if (cfg->window > cfg->n_ctx) {
        snprintf(err, err_size,
                 "attention window of %u tokens is wider than the context of %u (raise the "
                 "context or narrow the window)",
                 cfg->window, cfg->n_ctx);
        return SY_E_INVALID_ARG;
    }
    const uint64_t row_bytes = (uint64_t)hp->n_head_kv * (hp->head_dim / bs) *
                               sy_dtype_type_size(cfg->type);
    uint64_t bytes = 0;
    uint32_t max_step = cfg->n_batch;
    for (uint32_t il = 0; il < hp->n_layer; il++) {
        uint32_t w = sy__layer_is_local(hp, il) ? hp->sliding_window : 0;
        if (cfg->window)
            w = w ? min_u32(w, cfg->window) : cfg->window;
        uint32_t rows = cfg->n_ctx;
        if (w) {
            /* W - 1 positions the next query still reads, plus one step. */
            uint64_t span = (uint64_t)w - 1 + cfg->n_batch;
            if (span < rows)
                rows = (uint32_t)span;
            /* A cache capped below the span takes shorter steps; one that
             * holds the whole context never slides. */
            if (cfg->window && rows - (w - 1) < max_step)
                max_step = rows - (w - 1);
        }
        if (out_layers)
            out_layers[il] = (sy_kv_layer){.rows = rows, .window = w};
        bytes += 2 * row_bytes * rows;
    }
    if (out_bytes)
        *out_bytes = bytes;
    if (out_max_step)
        *out_max_step = max_step;
    return SY_OK;
}

void sy__kv_cache_deinit(sy_kv_cache *kv)
{
    if (!kv)
        return;
    for (uint32_t il = 0; kv->layers && il < kv->n_layer; il++) {
        free(kv->layers[il].k);
        free(kv->layers[il].v);
    }
    free(kv->layers);
    memset(kv, 0, sizeof *kv);
}

sy_status sy__kv_cache_init(sy_kv_cache *kv, const sy_hparams *hp, const sy_kv_config *cfg,
                            char *err, size_t err_size)
{
    memset(kv, 0, sizeof *kv);
    sy_kv_layer *layers = calloc(hp->n_layer, sizeof *layers);
    if (!layers) {
        snprintf(err, err_size, "out of memory for the KV cache of %u layers", hp->n_layer);
        return SY_E_NO_MEMORY;
    }
    uint64_t bytes = 0;
    uint32_t max_step = 0;
    sy_status st = sy__kv_cache_layout(hp, cfg, layers, &bytes, &max_step, err, err_size);
    if (st != SY_OK) {
        free(layers);
        return st;
    }
    kv->type = cfg->type;
    kv->n_layer = hp->n_layer;
    kv->row_bytes = (size_t)hp->n_head_kv * (hp->head_dim / sy_dtype_block_size(cfg->type)) *
                    sy_dtype_type_size(cfg->type);
    kv->bytes = bytes;
    kv->max_step = max_step;
    kv->layers = layers;
    for (uint32_t il = 0; il < hp->n_layer; il++) {
        /* calloc: untouched pages stay unbacked until the context reaches them. */
        layers[il].k = calloc(layers[il].rows, kv->row_bytes);
        layers[il].v = calloc(layers[il].rows, kv->row_bytes);
        if (!layers[il].k || !layers[il].v) {
            snprintf(err, err_size, "out of memory for a %u-token KV cache (%.1f MiB of %s)",
                     cfg->n_ctx, (double)bytes / (1 << 20), sy_dtype_name(cfg->type));
            sy__kv_cache_deinit(kv);
            return SY_E_NO_MEMORY;
        }
    }
    return SY_OK;
}

void sy__kv_cache_reset(sy_kv_cache *kv)
{
    for (uint32_t il = 0; il < kv->n_layer; il++)
        kv->layers[il].pos0 = 0;
}

sy_status sy__kv_cache_make_room(sy_kv_cache *kv, uint32_t n_past, uint32_t n,
                                 sy__kv_sync_fn sync, void *sync_user, char *err,
                                 size_t err_size)
{
    for (uint32_t il = 0; il < kv->n_layer; il++) {
        sy_kv_layer *l = &kv->layers[il];
        if ((uint64_t)n_past + n - l->pos0 <= l->rows)
            continue;
        /* The oldest position the step's first query reads. */
        uint32_t keep = l->window && n_past >= l->window ? n_past - l->window + 1 : 0;
        if (keep < l->pos0 || (uint64_t)n_past + n - keep > l->rows) {
            snprintf(err, err_size,
                     "KV cache layer %u holds %u positions from %u: cannot append %u tokens at "
                     "position %u with a window of %u",
                     il, l->rows, l->pos0, n, n_past, l->window);
            return SY_E_INTERNAL;
        }
        const size_t from = (size_t)(keep - l->pos0) * kv->row_bytes;
        const size_t len = (size_t)(n_past - keep) * kv->row_bytes;
        if (sync) {
            sy_status st = sync(sync_user, l->k, (uint64_t)l->rows * kv->row_bytes);
            if (st == SY_OK)
                st = sync(sync_user, l->v, (uint64_t)l->rows * kv->row_bytes);
            if (st != SY_OK)
                return st; /* |sync| said why */
        }
        memmove(l->k, (char *)l->k + from, len);
        memmove(l->v, (char *)l->v + from, len);
        l->pos0 = keep;
    }
    return SY_OK;
}

bool sy__kv_cache_can_resume(const sy_kv_cache *kv, uint32_t n_past)
{
    for (uint32_t il = 0; il < kv->n_layer; il++) {
        const sy_kv_layer *l = &kv->layers[il];
        uint32_t oldest = l->window && n_past >= l->window ? n_past - l->window + 1 : 0;
        if (l->pos0 > oldest)
            return false;
    }
    return true;
}
