/* Plan cache: plans keyed by a 128-bit graph signature.
 *
 * The signature covers the graph's structural digest (topology, ops,
 * dtypes, roles, outputs, the shape class of every tensor, the op
 * parameters that can change what a device accepts; computed at freeze,
 * see framework/core/graph_signature.c), node names when pins are given,
 * the resolved options and the loaded profiles.
 *
 * The executor re-reads sizes from the graph it runs, so a plan reused
 * within a shape class stays correct; only its predicted times refer to
 * the graph it was made for. */
#include <stdlib.h>
#include <string.h>

#include "graph_internal.h"
#include "plan_internal.h"

static inline uint64_t key_mix(uint64_t h, uint64_t w)
{
    h = (h ^ w) * 0x9e3779b97f4a7c15ull;
    return h ^ (h >> 31);
}

/* Node names, only when pins are given: they decide what a pin matches. */
static uint64_t names_hash(const sy_graph *g)
{
    uint64_t h = 0x243f6a8885a308d3ull;
    uint32_t nn = sy_graph_node_count(g);
    for (uint32_t i = 0; i < nn; i++) {
        const char *str = sy_graph_node(g, i)->name;
        uint64_t w = 0;
        size_t k = 0;
        for (; *str; str++, k++) {
            w = w << 8 | (uint8_t)*str;
            if (k % 8 == 7) {
                h = key_mix(h, w);
                w = 0;
            }
        }
        h = key_mix(h, w ^ k << 56);
    }
    return h;
}

/* The graph's structure was hashed once when it was frozen
 * (framework/core/graph_signature.c); a lookup adds the request, the
 * profiles and, with pins, the node names. */
void sy__plan_signature(const sy_graph *g, const sy__plan_request *req, uint64_t salt,
                        uint64_t out_key[2])
{
    uint64_t gs[2];
    sy__graph_signature(g, gs);
    uint64_t names = req->n_pins ? names_hash(g) : 0;
    uint64_t a = key_mix(key_mix(gs[0] ^ 0x6a09e667f3bcc908ull, req->hash), names);
    uint64_t b = key_mix(key_mix(gs[1] ^ 0xbb67ae8584caa73bull, salt), names ^ req->hash);
    out_key[0] = key_mix(a, b);
    out_key[1] = key_mix(b + 0x510e527fade682d1ull, a);
}

sy_plan *sy__cache_lookup(sy_planner *pl, const uint64_t key[2])
{
    for (uint32_t i = 0; i < pl->n_cache; i++) {
        sy__cache_entry *e = &pl->cache[i];
        if (e->key[0] == key[0] && e->key[1] == key[1]) {
            e->last_use = ++pl->tick;
            pl->hits++;
            return e->plan;
        }
    }
    pl->misses++;
    return NULL;
}

void sy__cache_insert(sy_planner *pl, const uint64_t key[2], sy_plan *plan)
{
    uint32_t at = pl->n_cache;
    if (at == SY__PLAN_CACHE_CAP) {
        at = 0;
        for (uint32_t i = 1; i < pl->n_cache; i++)
            if (pl->cache[i].last_use < pl->cache[at].last_use)
                at = i;
        sy_plan_release(pl->cache[at].plan);
    } else {
        pl->n_cache++;
    }
    sy_plan_retain(plan);
    pl->cache[at] = (sy__cache_entry){{key[0], key[1]}, plan, ++pl->tick};
}

void sy__cache_clear(sy_planner *pl)
{
    for (uint32_t i = 0; i < pl->n_cache; i++)
        sy_plan_release(pl->cache[i].plan);
    pl->n_cache = 0;
}
