/* Name index of an open GGUF file: open-addressing hash tables of the
 * metadata keys and the tensor names, built once by the parser (gguf.c)
 * and used by every lookup (gguf_query.c). */
#include "gguf_internal.h"

#include <stdint.h>
#include <stdlib.h>
#include <string.h>

static uint64_t hash_name(const char *s)
{
    uint64_t h = 0xcbf29ce484222325ull; /* FNV-1a */
    for (; *s; s++) {
        h ^= (uint8_t)*s;
        h *= 0x100000001b3ull;
    }
    return h;
}

static sy_status hash_init(gguf_hash *h, uint64_t n)
{
    uint64_t cap = 8;
    while (cap < 2 * n)
        cap *= 2;
    if (cap > SIZE_MAX / sizeof *h->slots)
        return SY_E_NO_MEMORY;
    h->slots = calloc((size_t)cap, sizeof *h->slots);
    if (!h->slots)
        return SY_E_NO_MEMORY;
    h->mask = cap - 1;
    return SY_OK;
}

typedef const char *(*gguf_name_fn)(const sy_gguf *g, uint32_t i);

static const char *kv_name(const sy_gguf *g, uint32_t i)
{
    return g->kvs[i].key;
}

static const char *tensor_name(const sy_gguf *g, uint32_t i)
{
    return g->tensors[i].info.name;
}

/* Returns the slot holding |name| or the free slot where it would go. */
static uint64_t hash_slot(const sy_gguf *g, const gguf_hash *h, gguf_name_fn name_of,
                          const char *name)
{
    uint64_t s = hash_name(name) & h->mask;
    while (h->slots[s] && strcmp(name_of(g, h->slots[s] - 1), name) != 0)
        s = (s + 1) & h->mask;
    return s;
}

/* Inserts entries 0..n-1; on a duplicate returns false with *out_first set
 * to the earlier entry and *out_second to the later one. */
static bool hash_fill(const sy_gguf *g, gguf_hash *h, gguf_name_fn name_of, uint64_t n,
                      uint64_t *out_first, uint64_t *out_second)
{
    for (uint64_t i = 0; i < n; i++) {
        uint64_t s = hash_slot(g, h, name_of, name_of(g, (uint32_t)i));
        if (h->slots[s]) {
            *out_first = h->slots[s] - 1;
            *out_second = i;
            return false;
        }
        h->slots[s] = (uint32_t)(i + 1);
    }
    return true;
}

static bool hash_find(const sy_gguf *g, const gguf_hash *h, gguf_name_fn name_of,
                      const char *name, uint64_t *out_index)
{
    if (!h->slots)
        return false;
    uint64_t s = hash_slot(g, h, name_of, name);
    if (!h->slots[s])
        return false;
    *out_index = h->slots[s] - 1;
    return true;
}

sy_status sy__gguf_hash_build(sy_gguf *g, bool tensors, uint64_t *out_first,
                              uint64_t *out_second)
{
    gguf_hash *h = tensors ? &g->tensor_hash : &g->kv_hash;
    uint64_t n = tensors ? g->n_tensors : g->n_kv;
    if (hash_init(h, n) != SY_OK)
        return SY_E_NO_MEMORY;
    if (!hash_fill(g, h, tensors ? tensor_name : kv_name, n, out_first, out_second))
        return SY_E_FORMAT;
    return SY_OK;
}

bool sy__gguf_find_kv(const sy_gguf *g, const char *name, uint64_t *out_index)
{
    return hash_find(g, &g->kv_hash, kv_name, name, out_index);
}

bool sy__gguf_find_tensor_index(const sy_gguf *g, const char *name, uint64_t *out_index)
{
    return hash_find(g, &g->tensor_hash, tensor_name, name, out_index);
}
