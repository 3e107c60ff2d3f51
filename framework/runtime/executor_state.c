/* KV caches kept on the devices that run them (executor_state.h). */
#include <stdlib.h>
#include <string.h>

#include "executor_state.h"

static sy__xstate_entry *find(sy__xstate *s, const void *host)
{
    for (uint32_t k = 0; k < s->n; k++)
        if (s->e[k].host == host)
            return &s->e[k];
    return NULL;
}

static sy_status fail(sy_runtime *rt, uint32_t di, sy_status st, const char *what,
                      const char *name, uint64_t size)
{
    sy__runtime_set_error(rt, "device '%s': %s of %llu bytes for KV cache '%s' failed: %s",
                          rt->devices[di].desc.name, what, (unsigned long long)size, name,
                          sy_status_name(st));
    sy__runtime_note_failure(rt, di, NULL, st);
    return st;
}

/* Copies a kept copy newer than the host bytes to them. */
static sy_status fetch(sy__xstate_entry *e, sy_executor *x, sy_runtime *rt, const char *name)
{
    if (!e->host_stale)
        return SY_OK;
    sy__executor_moved(x, e->dev, e->size);
    const sy__device *dev = &rt->devices[e->dev];
    const sy__plugin *p = dev->plugin;
    sy_status st = p->desc.copy_out(p->state, dev->index, e->buf, 0, (void *)e->host, e->size);
    if (st != SY_OK)
        return fail(rt, e->dev, st, "copy_out", name, e->size);
    e->host_stale = false;
    return SY_OK;
}

static void drop(sy__xstate *s, sy_executor *x, sy__xstate_entry *e)
{
    sy__executor_free(x, e->dev, e->buf, e->size);
    *e = s->e[--s->n];
}

sy_status sy__xstate_place(sy__xstate *s, sy_executor *x, sy_runtime *rt, uint32_t di,
                           const void *host, uint64_t size, const char *name, uint32_t tensor,
                           uint32_t slot, void **out_buf)
{
    *out_buf = NULL;
    if (!s->on || !host)
        return SY_E_UNSUPPORTED;
    sy__xstate_entry *e = find(s, host);
    const sy__device *dev = &rt->devices[di];
    if (e && (e->dev != di || e->size != size || dev->desc.unified_memory)) {
        /* Moved (another device, or host memory) or resized: the host
         * bytes take the current contents, the old copy goes. */
        sy_status st = fetch(e, x, rt, name);
        if (st != SY_OK)
            return st;
        drop(s, x, e);
        e = NULL;
    }
    if (dev->desc.unified_memory)
        return SY_E_UNSUPPORTED;
    const sy__plugin *p = dev->plugin;
    if (!e) {
        if (s->n == s->cap) {
            uint32_t cap = s->cap ? s->cap * 2 : 64;
            sy__xstate_entry *grown = realloc(s->e, (size_t)cap * sizeof *grown);
            if (!grown) {
                sy__runtime_set_error(rt, "out of memory keeping KV cache '%s'", name);
                return SY_E_NO_MEMORY;
            }
            s->e = grown;
            s->cap = cap;
        }
        sy__xstate_entry fresh = {.host = host, .size = size, .dev = di, .dev_stale = true};
        sy_status st = sy__executor_alloc(x, di, size, &fresh.buf);
        if (st != SY_OK)
            return fail(rt, di, st, "buffer_alloc", name, size);
        s->e[s->n] = fresh;
        e = &s->e[s->n++];
    }
    if (e->dev_stale) {
        sy__executor_moved(x, di, size);
        sy_status st = p->desc.copy_in(p->state, dev->index, e->buf, 0, host, size);
        if (st != SY_OK)
            return fail(rt, di, st, "copy_in", name, size);
        e->dev_stale = false;
    }
    e->run = s->run;
    e->tensor = tensor;
    e->slot = slot;
    *out_buf = e->buf;
    return SY_OK;
}

void sy__xstate_after_run(sy__xstate *s, const uint8_t *writer, uint8_t no_device)
{
    for (uint32_t k = 0; k < s->n; k++) {
        sy__xstate_entry *e = &s->e[k];
        if (e->run != s->run || writer[e->tensor] == no_device)
            continue;
        if (writer[e->tensor] == e->slot) {
            e->host_stale = true;
        } else {
            e->host_stale = false;
            e->dev_stale = true;
        }
    }
    s->run++;
}

sy_status sy__xstate_sync(sy__xstate *s, sy_executor *x, sy_runtime *rt, const void *host,
                          uint64_t size, bool will_write)
{
    const char *lo = host, *hi = lo + size;
    for (uint32_t k = 0; k < s->n; k++) {
        sy__xstate_entry *e = &s->e[k];
        const char *elo = e->host, *ehi = elo + e->size;
        if (ehi <= lo || elo >= hi)
            continue;
        sy_status st = fetch(e, x, rt, "(synchronised)");
        if (st != SY_OK)
            return st;
        if (will_write)
            e->dev_stale = true;
    }
    return SY_OK;
}

void sy__xstate_free(sy__xstate *s, sy_executor *x)
{
    while (s->n)
        drop(s, x, &s->e[s->n - 1]);
    free(s->e);
    memset(s, 0, sizeof *s);
}
