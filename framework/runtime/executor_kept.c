/* Weights kept on the devices between runs (executor_internal.h): wrapped
 * zero-copy where a device shares host memory, else uploaded once; found
 * again by (host address, size, device) through an open-addressing index. */
#include <stdlib.h>
#include <string.h>

#include "executor_internal.h"

static uint32_t kept_hash(const void *host, uint64_t size, uint32_t dev)
{
    uint64_t h = (uint64_t)(uintptr_t)host * 0x9e3779b97f4a7c15ull;
    h ^= (size + dev) * 0xbf58476d1ce4e5b9ull;
    return (uint32_t)(h ^ (h >> 32));
}

static xp_kept *kept_find(sy_executor *x, const void *host, uint64_t size, uint32_t dev)
{
    if (!x->index_cap)
        return NULL;
    for (uint32_t h = kept_hash(host, size, dev) & (x->index_cap - 1);;
         h = (h + 1) & (x->index_cap - 1)) {
        uint32_t k = x->kept_index[h];
        if (k == SY__NONE)
            return NULL;
        xp_kept *e = &x->kept[k];
        if (e->host == host && e->size == size && e->dev == dev)
            return e;
    }
}

static sy_status kept_add(sy_executor *x, const xp_kept *e)
{
    if (x->n_kept == x->cap_kept) {
        uint32_t cap = x->cap_kept ? x->cap_kept * 2 : 256;
        xp_kept *grown = realloc(x->kept, (size_t)cap * sizeof *grown);
        if (!grown)
            return SY_E_NO_MEMORY;
        x->kept = grown;
        x->cap_kept = cap;
    }
    if ((uint64_t)(x->n_kept + 1) * 2 > x->index_cap) {
        uint32_t cap = x->index_cap ? x->index_cap * 2 : 512;
        uint32_t *index = malloc((size_t)cap * sizeof *index);
        if (!index)
            return SY_E_NO_MEMORY;
        memset(index, 0xff, (size_t)cap * sizeof *index);
        for (uint32_t k = 0; k < x->n_kept; k++) {
            uint32_t h = kept_hash(x->kept[k].host, x->kept[k].size, x->kept[k].dev) & (cap - 1);
            while (index[h] != SY__NONE)
                h = (h + 1) & (cap - 1);
            index[h] = k;
        }
        free(x->kept_index);
        x->kept_index = index;
        x->index_cap = cap;
    }
    uint32_t h = kept_hash(e->host, e->size, e->dev) & (x->index_cap - 1);
    while (x->kept_index[h] != SY__NONE)
        h = (h + 1) & (x->index_cap - 1);
    x->kept_index[h] = x->n_kept;
    x->kept[x->n_kept++] = *e;
    return SY_OK;
}

/* Binds weight |t| on slot |d| to its kept copy there, wrapping or
 * uploading it the first time.  SY_E_UNSUPPORTED when |t| is not a weight
 * that can be kept (the caller then handles it per run). */
sy_status sy__xp_keep_weight(xp_run *r, const sy_tensor *t, uint32_t d)
{
    void *host = sy__graph_host_of(r->g, t);
    uint64_t size = sy_tensor_nbytes(t);
    if (t->role != SY_ROLE_WEIGHT || !host || size == 0)
        return SY_E_UNSUPPORTED;
    uint32_t di = r->plan->dev_index[d];
    const sy__device *dev = r->dev[d];
    const sy__plugin *p = dev->plugin;
    xp_kept *e = kept_find(r->x, host, size, di);
    if (!e) {
        xp_kept k = {.host = host, .size = size, .dev = di};
        if (dev->desc.unified_memory && p->desc.buffer_import_host &&
            p->desc.buffer_import_host(p->state, dev->index, host, size, &k.buf) == SY_OK) {
            k.imported = true;
        } else {
            sy_status st = sy__xp_dev_alloc(r->x, di, size, &k.buf);
            if (st != SY_OK)
                return sy__xp_fail(r, st, d, "buffer_alloc", t->name, size);
            st = p->desc.copy_in(p->state, dev->index, k.buf, 0, host, size);
            sy__xp_moved(r->x, di, size);
            if (st != SY_OK) {
                sy__xp_dev_free(r->x, di, k.buf, size);
                return sy__xp_fail(r, st, d, "copy_in", t->name, size);
            }
            r->x->dev[di].weights += size;
        }
        if (kept_add(r->x, &k) != SY_OK) {
            if (k.imported)
                p->desc.buffer_free(p->state, dev->index, k.buf);
            else
                sy__xp_dev_free(r->x, di, k.buf, size);
            sy__runtime_set_error(r->rt, "out of memory keeping weight '%s'", t->name);
            return SY_E_NO_MEMORY;
        }
        e = &r->x->kept[r->x->n_kept - 1];
    }
    xp_bind *b = sy__xp_at(r, t->id, d);
    b->buf = e->buf;
    b->off = 0;
    b->host = e->imported ? (char *)host : sy__xp_host_ptr(dev, e->buf);
    b->flags = e->imported ? XP_FROM_HOST : 0;
    return SY_OK;
}
