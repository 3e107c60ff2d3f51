/* Parameter updates of a frozen graph (framework/core/graph_update.c): a
 * session keeps its decode graph and moves the KV write position. */
#include <criterion/criterion.h>
#include <stdio.h>
#include <string.h>

#include "graph_internal.h"
#include "switchyard/switchyard.h"

enum { D = 4, C = 16 };

typedef struct kv_graph {
    sy_graph *g;
    sy_node *kw, *vw, *att;
} kv_graph;

static sy_tensor *leaf3(sy_graph *g, const char *name, int64_t h, int64_t t, sy_tensor_role role)
{
    int64_t ne[3] = {D, h, t};
    sy_tensor *out = NULL;
    cr_assert_eq(sy_graph_add_tensor(g, name, SY_DTYPE_F32, 3, ne, role, NULL, &out), SY_OK,
                 "%s", sy_graph_last_error(g));
    return out;
}

static sy_tensor *node(sy_graph *g, sy_op op, const char *name, sy_tensor *a, sy_tensor *b,
                       sy_tensor *c, const sy_op_params *p)
{
    sy_tensor *in[3] = {a, b, c}, *out = NULL;
    cr_assert_eq(sy_graph_add_node(g, op, name, in, c ? 3 : b ? 2 : 1, p, &out), SY_OK, "%s",
                 sy_graph_last_error(g));
    return out;
}

/* One decode step's attention at |start|: KV writes into 16-row caches,
 * attention over the prefix; with |scaled|, a node that owns storage reads
 * the K write's prefix. */
static kv_graph build(int64_t start, bool scaled)
{
    kv_graph k = {0};
    cr_assert_eq(sy_graph_create(&k.g), SY_OK);
    sy_tensor *ck = leaf3(k.g, "cache_k", 1, C, SY_ROLE_KV);
    sy_tensor *cv = leaf3(k.g, "cache_v", 1, C, SY_ROLE_KV);
    sy_tensor *q = leaf3(k.g, "q", 2, 1, SY_ROLE_INPUT);
    sy_tensor *kr = leaf3(k.g, "k", 1, 1, SY_ROLE_INPUT);
    sy_tensor *vr = leaf3(k.g, "v", 1, 1, SY_ROLE_INPUT);
    sy_op_params at = {.i = {start}};
    sy_tensor *kw = node(k.g, SY_OP_KV_WRITE, "cache_k.write", ck, kr, NULL, &at);
    sy_tensor *vw = node(k.g, SY_OP_KV_WRITE, "cache_v.write", cv, vr, NULL, &at);
    sy_op_params ap = {.i = {start, 0}, .f = {0.5f}};
    sy_tensor *a = node(k.g, SY_OP_ATTENTION, "attn", q, kw, vw, &ap);
    cr_assert_eq(sy_graph_mark_output(k.g, a), SY_OK);
    if (scaled) {
        sy_op_params sp = {.f = {2.0f, 0.0f}};
        sy_tensor *s = node(k.g, SY_OP_SCALE, "k.scaled", kw, NULL, NULL, &sp);
        cr_assert_eq(sy_graph_mark_output(k.g, s), SY_OK);
    }
    cr_assert_eq(sy_graph_freeze(k.g), SY_OK, "%s", sy_graph_last_error(k.g));
    for (uint32_t i = 0; i < sy_graph_node_count(k.g); i++) {
        sy_node *n = sy_graph_node(k.g, i);
        if (n->output == kw)
            k.kw = n;
        else if (n->output == vw)
            k.vw = n;
        else if (n->output == a)
            k.att = n;
    }
    cr_assert(k.kw && k.vw && k.att);
    return k;
}

/* Moves |k| to |start| (and |window|), the way a session does. */
static sy_status move_to(kv_graph *k, int64_t start, int64_t window)
{
    sy__node_update ups[3] = {
        {k->kw->id, {.i = {start}}},
        {k->vw->id, {.i = {start}}},
        {k->att->id, {.i = {start, window}, .f = {0.5f}}},
    };
    return sy__graph_update_params(k->g, ups, 3);
}

static void sig_of(const sy_graph *g, uint64_t out[2])
{
    sy__graph_signature(g, out);
}

Test(graph_update, moves_the_kv_prefix_and_matches_a_graph_built_there)
{
    kv_graph k = build(3, false);
    for (int64_t start = 4; start < C; start++) {
        cr_assert_eq(move_to(&k, start, 0), SY_OK, "%s", sy_graph_last_error(k.g));
        kv_graph fresh = build(start, false);
        cr_assert_eq(k.kw->output->ne[2], start + 1);
        cr_assert_eq(k.vw->output->ne[2], start + 1);
        cr_assert_eq(k.att->params.i[0], start);
        uint64_t a[2], b[2];
        sig_of(k.g, a);
        sig_of(fresh.g, b);
        cr_assert(a[0] == b[0] && a[1] == b[1], "start %lld: the digest differs from a graph "
                  "built at that position", (long long)start);
        cr_assert_eq(sy__graph_layout(k.g), sy__graph_layout(fresh.g));
        sy_graph_destroy(fresh.g);
    }
    sy_graph_destroy(k.g);
}

Test(graph_update, rehashes_only_when_a_shape_class_or_hashed_param_changes)
{
    kv_graph k = build(4, false); /* prefix 5: class 8 */
    uint64_t s0[2], s1[2];
    sig_of(k.g, s0);
    uint64_t layout = sy__graph_layout(k.g);
    cr_assert_eq(move_to(&k, 6, 0), SY_OK); /* prefix 7: class 8 */
    sig_of(k.g, s1);
    cr_assert(s0[0] == s1[0] && s0[1] == s1[1]);
    cr_assert_eq(move_to(&k, 8, 0), SY_OK); /* prefix 9: class 16 */
    sig_of(k.g, s1);
    cr_assert(s0[0] != s1[0] || s0[1] != s1[1]);
    cr_assert_eq(move_to(&k, 6, 0), SY_OK);
    sig_of(k.g, s1);
    cr_assert(s0[0] == s1[0] && s0[1] == s1[1]);
    cr_assert_eq(move_to(&k, 6, 3), SY_OK); /* the window is hashed */
    sig_of(k.g, s1);
    cr_assert(s0[0] != s1[0] || s0[1] != s1[1]);
    cr_assert_eq(sy__graph_layout(k.g), layout);
    sy_graph_destroy(k.g);
}

Test(graph_update, a_refused_update_leaves_the_graph_as_it_was)
{
    kv_graph k = build(5, false);
    uint64_t s0[2], s1[2];
    sig_of(k.g, s0);
    /* 16 rows from 16 overflow the cache: the K write fails after the
     * update list was half applied. */
    sy__node_update ups[3] = {
        {k.att->id, {.i = {9, 0}, .f = {0.5f}}},
        {k.vw->id, {.i = {9}}},
        {k.kw->id, {.i = {C}}},
    };
    cr_assert_eq(sy__graph_update_params(k.g, ups, 3), SY_E_SHAPE);
    cr_assert(strstr(sy_graph_last_error(k.g), "cache_k.write"), "%s",
              sy_graph_last_error(k.g));
    cr_assert_eq(k.kw->params.i[0], 5);
    cr_assert_eq(k.vw->params.i[0], 5);
    cr_assert_eq(k.att->params.i[0], 5);
    cr_assert_eq(k.kw->output->ne[2], 6);
    cr_assert_eq(k.vw->output->ne[2], 6);
    sig_of(k.g, s1);
    cr_assert(s0[0] == s1[0] && s0[1] == s1[1]);
    cr_assert_eq(move_to(&k, 6, 0), SY_OK, "%s", sy_graph_last_error(k.g));
    cr_assert_eq(k.vw->output->ne[2], 7);
    sy_graph_destroy(k.g);
}

Test(graph_update, refuses_to_resize_a_tensor_that_owns_storage)
{
    kv_graph k = build(5, true);
    cr_assert_eq(move_to(&k, 6, 0), SY_E_SHAPE);
    cr_assert(strstr(sy_graph_last_error(k.g), "k.scaled"), "%s", sy_graph_last_error(k.g));
    cr_assert_eq(k.kw->output->ne[2], 6);
    cr_assert_eq(k.kw->params.i[0], 5);
    cr_assert_eq(k.att->params.i[0], 5);
    sy_graph_destroy(k.g);
}

Test(graph_update, refuses_an_unfrozen_graph_and_a_node_out_of_range)
{
    sy_graph *g = NULL;
    cr_assert_eq(sy_graph_create(&g), SY_OK);
    sy__node_update u = {0};
    cr_assert_eq(sy__graph_update_params(g, &u, 1), SY_E_STATE);
    sy_graph_destroy(g);
    kv_graph k = build(2, false);
    u.node = 99;
    cr_assert_eq(sy__graph_update_params(k.g, &u, 1), SY_E_INVALID_ARG);
    sy_graph_destroy(k.g);
}

/* Tensors' shapes, nodes' params, digest and the nodes listed as updated
 * since the last memo (as a set) are the same in |a| and |b|. */
static void assert_same_state(kv_graph *a, kv_graph *b, const char *when)
{
    cr_assert_eq(sy_graph_tensor_count(a->g), sy_graph_tensor_count(b->g));
    for (uint32_t i = 0; i < sy_graph_tensor_count(a->g); i++) {
        const sy_tensor *x = sy_graph_tensor(a->g, i), *y = sy_graph_tensor(b->g, i);
        cr_assert(memcmp(x->ne, y->ne, sizeof x->ne) == 0 &&
                      memcmp(x->nb, y->nb, sizeof x->nb) == 0 && x->view_offset == y->view_offset,
                  "%s: tensor '%s' differs", when, x->name);
    }
    for (uint32_t i = 0; i < sy_graph_node_count(a->g); i++)
        cr_assert(memcmp(&sy_graph_node(a->g, i)->params, &sy_graph_node(b->g, i)->params,
                         sizeof(sy_op_params)) == 0,
                  "%s: the params of node %u differ", when, i);
    uint64_t sa[2], sb[2];
    sig_of(a->g, sa);
    sig_of(b->g, sb);
    cr_assert(sa[0] == sb[0] && sa[1] == sb[1], "%s: the digests differ", when);
    const uint32_t *da, *db;
    uint32_t na, nb;
    const uint64_t key[4] = {1, 2, 3, 4};
    sy__graph_memo_holds(a->g, key, &da, &na);
    sy__graph_memo_holds(b->g, key, &db, &nb);
    cr_assert_eq(na, nb, "%s: %u nodes listed as updated against %u", when, na, nb);
    for (uint32_t i = 0; i < na; i++) {
        bool found = false;
        for (uint32_t j = 0; j < nb && !found; j++)
            found = da[i] == db[j];
        cr_assert(found, "%s: node %u listed as updated in one graph only", when, da[i]);
    }
    sy__graph_memo_set(a->g, key);
    sy__graph_memo_set(b->g, key);
}

Test(graph_update, the_fast_move_of_a_decode_step_matches_the_general_update)
{
    /* |a| moves as a session does (K and V writes side by side, then the
     * attention): the fast path.  |b| gets the same moves with the K write
     * listed twice (again at the end, where it changes nothing), which
     * the fast path leaves to the general one. */
    kv_graph a = build(3, false), b = build(3, false);
    const int64_t starts[] = {4, 5, 6, 7, 8, 12, 15, 2, 2, 9, 0, 14};
    for (size_t s = 0; s < sizeof starts / sizeof *starts; s++) {
        const int64_t at = starts[s];
        char when[64];
        snprintf(when, sizeof when, "start %lld", (long long)at);
        sy__node_update fast[3] = {
            {a.kw->id, {.i = {at}}},
            {a.vw->id, {.i = {at}}},
            {a.att->id, {.i = {at, 0}, .f = {0.5f}}},
        };
        sy__node_update general[4] = {
            {b.kw->id, {.i = {at}}},
            {b.vw->id, {.i = {at}}},
            {b.att->id, {.i = {at, 0}, .f = {0.5f}}},
            {b.kw->id, {.i = {at}}},
        };
        /* Every third move, the writes alone (the attention is re-inferred
         * and listed as updated all the same). */
        const bool writes_only = s % 3 == 2;
        if (writes_only)
            general[2] = general[3];
        const uint32_t n = writes_only ? 2 : 3;
        cr_assert_eq(sy__graph_update_params(a.g, fast, n), SY_OK, "%s",
                     sy_graph_last_error(a.g));
        cr_assert_eq(sy__graph_update_params(b.g, general, n + 1), SY_OK, "%s",
                     sy_graph_last_error(b.g));
        cr_assert_eq(a.kw->output->ne[2], at + 1);
        assert_same_state(&a, &b, when);
    }
    /* The general path keeps undo records; the fast one never needed any. */
    cr_assert_eq(a.g->cap_undo, 0, "the session's moves took the general path");
    cr_assert_gt(b.g->cap_undo, 0);
    sy_graph_destroy(a.g);
    sy_graph_destroy(b.g);
}

Test(graph_update, a_move_past_either_end_of_the_cache_is_refused_and_changes_nothing)
{
    kv_graph k = build(5, false);
    const int64_t bad[] = {C, C + 7, -1};
    for (size_t i = 0; i < sizeof bad / sizeof *bad; i++) {
        cr_assert_eq(move_to(&k, bad[i], 0), SY_E_SHAPE, "start %lld", (long long)bad[i]);
        cr_assert(strstr(sy_graph_last_error(k.g), "cache_"), "%s", sy_graph_last_error(k.g));
        cr_assert_eq(k.kw->params.i[0], 5);
        cr_assert_eq(k.vw->params.i[0], 5);
        cr_assert_eq(k.att->params.i[0], 5);
        cr_assert_eq(k.kw->output->ne[2], 6);
        cr_assert_eq(k.vw->output->ne[2], 6);
    }
    cr_assert_eq(move_to(&k, C - 1, 0), SY_OK, "%s", sy_graph_last_error(k.g));
    cr_assert_eq(k.kw->output->ne[2], C);
    cr_assert_eq(k.vw->output->ne[2], C);
    sy_graph_destroy(k.g);
}
