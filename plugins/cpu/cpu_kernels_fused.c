/* A decode step's ROPE of q and k and KV_WRITE of k and v, run head by
 * head inside the tiles of the q/k/v matmul group (cpu_kernels.h).
 *
 * Run as nodes of their own, these four ran on the calling lane after the
 * group's dispatch while the other lanes waited for the next one, each
 * with its own node preparation and kernel setup: on SmolLM2 at 2 threads
 * their arithmetic alone was about 1% of the calling lane's samples.
 * Here every tile that finishes rows of a member's output adds how many
 * rows of each head it covered to that head's counter; the add that
 * completes a head (acquire-release, so the lane sees the rows the other
 * lanes wrote) ropes that head and writes it into the cache.  A tile
 * covering a whole head adds nothing.  The row
 * functions are the kernels' own (cpu_rope_row, cpu_store_row), so every
 * output is bit for bit what the nodes alone write. */
#include <stdatomic.h>
#include <string.h>

#include "cpu_kernels.h"

#define CPU_QKV_LINE 64
/* Counters per cache line: one head per line. */
#define CPU_QKV_SLOT ((int64_t)(CPU_QKV_LINE / sizeof(_Atomic int64_t)))
/* Bytes of each cache's past rows prefetched for the attention
 * (cpu_epilogue_prefetch): 170 positions of SmolLM2's F16 cache, 128
 * of the 1B's. */
#define CPU_QKV_PAST_BYTES (64 * 1024)

void cpu_epilogue_begin(cpu_epilogue *e, cpu_state *s, const sy_node *const *group, uint32_t n)
{
    memset(e, 0, sizeof *e);
    e->s = s;
    e->n = n;
    for (uint32_t m = 0; m < n; m++)
        e->chain[m].y = group[m]->output;
}

/* The member whose output |x| lays out as heads: an f32 [D, H, 1] view of
 * the member's [D * H] output column, head h at rows [h * D, (h + 1) * D).
 * -1 when none. */
static int cpu_qkv_member_of(const cpu_epilogue *e, const sy_tensor *x)
{
    if (!cpu_is_f32_rows(x) || x->ne[2] != 1 || x->ne[3] != 1 ||
        x->nb[1] != (uint64_t)x->ne[0] * sizeof(float))
        return -1;
    for (uint32_t m = 0; m < e->n; m++) {
        const sy_tensor *y = e->chain[m].y;
        if (x->data == y->data && cpu_is_f32_rows(y) && y->ne[1] == 1 && y->ne[2] == 1 &&
            y->ne[3] == 1 && x->ne[0] * x->ne[1] == y->ne[0])
            return (int)m;
    }
    return -1;
}

/* Bytes [lo, hi) that rows [0, ne[1]) of the first plane of |t| may span. */
static void cpu_qkv_span(const sy_tensor *t, const char *base, const char **lo, const char **hi)
{
    *lo = base;
    *hi = base + (size_t)t->ne[1] * t->nb[1];
}

static bool cpu_qkv_overlap(const char *a0, const char *a1, const char *b0, const char *b1)
{
    return a0 < b1 && b0 < a1;
}

/* True when bytes [lo, hi) touch what an earlier step writes. */
static bool cpu_qkv_hits_written(const cpu_epilogue *e, const char *lo, const char *hi)
{
    for (uint32_t k = 0; k < e->n_written; k++)
        if (cpu_qkv_overlap(lo, hi, e->written[k][0], e->written[k][1]))
            return true;
    return false;
}

/* True when bytes [lo, hi), about to be written by a step, touch nothing
 * else the epilogue or the group reads or writes: the members' outputs
 * (tiles write them in any order with the steps), the positions, and
 * what earlier steps write. */
static bool cpu_qkv_may_write(const cpu_epilogue *e, const char *lo, const char *hi)
{
    for (uint32_t m = 0; m < e->n; m++) {
        const sy_tensor *y = e->chain[m].y;
        const char *y0 = y->data, *y1 = y0 + (size_t)y->ne[0] * sizeof(float);
        if (cpu_qkv_overlap(lo, hi, y0, y1))
            return false;
    }
    if (e->rope_params) {
        const sy_tensor *pos = e->rope_params->inputs[1];
        const char *p0 = pos->data;
        if (cpu_qkv_overlap(lo, hi, p0, p0 + sizeof(int32_t)))
            return false;
    }
    return !cpu_qkv_hits_written(e, lo, hi);
}

static void cpu_qkv_wrote(cpu_epilogue *e, const char *lo, const char *hi)
{
    e->written[e->n_written][0] = lo;
    e->written[e->n_written][1] = hi;
    e->n_written++;
}

static bool cpu_qkv_take_rope(cpu_epilogue *e, const sy_node *node)
{
    const sy_tensor *x = node->inputs[0], *pos = node->inputs[1], *y = node->output;
    const int m = cpu_qkv_member_of(e, x);
    if (m < 0 || e->chain[m].rope || e->chain[m].kv)
        return false;
    /* One table of angles serves the epilogue: every rope alike. */
    const sy_node *first = e->rope_params;
    if (first && (memcmp(&first->params, &node->params, sizeof node->params) != 0 ||
                  pos->data != first->inputs[1]->data))
        return false;
    const char *why = NULL;
    if (cpu_rope_prepare(e->s, node, &why) != SY_OK)
        return false;
    const char *lo, *hi;
    cpu_qkv_span(y, y->data, &lo, &hi);
    if (!cpu_qkv_may_write(e, lo, hi))
        return false;
    if (!first) {
        /* The positions must not be what an earlier step writes. */
        const char *p0 = pos->data;
        if (cpu_qkv_hits_written(e, p0, p0 + sizeof(int32_t)))
            return false;
        e->rope_params = node;
        e->rope_p = node->params;
        e->rope_pos = (const int32_t *)pos->data;
    }
    cpu_qkv_wrote(e, lo, hi);
    struct cpu_qkv_chain *c = &e->chain[m];
    c->rope = node;
    c->d = x->ne[0];
    c->heads = c->y->ne[0] / c->d;
    c->rope_rows = (struct cpu_qkv_rows){.x = x->data, .y = y->data, .x_nb = x->nb[1],
                                         .y_nb = y->nb[1]};
    c->n_rot = node->params.i[1];
    c->neox = node->params.i[0] == SY_ROPE_NEOX;
    return true;
}

static bool cpu_qkv_take_kv(cpu_epilogue *e, const sy_node *node)
{
    const char *why = NULL;
    const sy_tensor *rows = node->inputs[1], *cache = node->output;
    if (cpu_kv_write_check(node, &why) != SY_OK || rows->ne[2] != 1)
        return false;
    int m = -1;
    for (uint32_t k = 0; k < e->n && m < 0; k++)
        if (e->chain[k].rope && e->chain[k].rope->output == rows)
            m = (int)k;
    if (m < 0)
        m = cpu_qkv_member_of(e, rows);
    if (m < 0 || e->chain[m].kv || (e->chain[m].d && e->chain[m].d != rows->ne[0]))
        return false;
    const char *lo, *hi;
    /* A run-time start may write any row: the whole cache is the span
     * checked, and the row is found as each run readies. */
    const int32_t *at = cpu_kv_run_time_position(node);
    if (at)
        lo = cache->data, hi = (const char *)cache->data + sy_tensor_nbytes(cache);
    else
        cpu_qkv_span(cache, cpu_row(cache, 0, node->params.i[0], 0), &lo, &hi);
    if (!cpu_qkv_may_write(e, lo, hi))
        return false;
    struct cpu_qkv_chain *c = &e->chain[m];
    c->kv_start = at;
    c->kv_slot = e->n_written;
    cpu_qkv_wrote(e, lo, hi);
    c->kv = node;
    c->d = rows->ne[0];
    c->heads = c->y->ne[0] / c->d;
    c->kv_cap = cache->ne[2];
    c->kv_row_nb = cache->nb[2];
    c->kv_rows = (struct cpu_qkv_rows){.x = rows->data, .y = (char *)lo, .x_nb = rows->nb[1],
                                       .y_nb = cache->nb[1]};
    c->kv_dtype = cache->dtype;
    c->kv_base = cache->data;
    return true;
}

bool cpu_epilogue_move_kv(cpu_epilogue *e, const sy_node *node)
{
    struct cpu_qkv_chain *c = NULL;
    for (uint32_t m = 0; m < e->n && !c; m++)
        if (e->chain[m].kv == node)
            c = &e->chain[m];
    const char *why = NULL;
    /* A write with a run-time start never moves (its params stay): one
     * named as changed is taken again. */
    if (!c || c->kv_start || node->n_inputs != 2 || cpu_kv_write_check(node, &why) != SY_OK)
        return false;
    const sy_tensor *rows = node->inputs[1], *cache = node->output;
    if (rows->data != c->kv_rows.x || rows->nb[1] != c->kv_rows.x_nb || rows->ne[0] != c->d ||
        rows->ne[2] != 1 || cache->nb[1] != c->kv_rows.y_nb || cache->dtype != c->kv_dtype)
        return false;
    const char *lo, *hi;
    cpu_qkv_span(cache, cpu_row(cache, 0, node->params.i[0], 0), &lo, &hi);
    /* Checked against everything else the epilogue writes and reads, as
     * when it was taken, its own old bytes aside. */
    const char *old[2] = {e->written[c->kv_slot][0], e->written[c->kv_slot][1]};
    e->written[c->kv_slot][0] = e->written[c->kv_slot][1] = NULL;
    if (!cpu_qkv_may_write(e, lo, hi)) {
        e->written[c->kv_slot][0] = old[0];
        e->written[c->kv_slot][1] = old[1];
        return false;
    }
    e->written[c->kv_slot][0] = lo;
    e->written[c->kv_slot][1] = hi;
    c->kv_rows.y = (char *)lo;
    c->kv_base = cache->data;
    return true;
}

bool cpu_epilogue_take(cpu_epilogue *e, const sy_node *node)
{
    if (node->n_inputs < 2)
        return false;
    if (node->op == SY_OP_ROPE)
        return cpu_qkv_take_rope(e, node);
    if (node->op == SY_OP_KV_WRITE)
        return cpu_qkv_take_kv(e, node);
    return false;
}

/* The attention after the group reads the newest CPU_QKV_PAST_BYTES of
 * each cache's rows before the one this step writes, on the calling lane
 * below 2 * CPU_ATT_CHUNK_MIN positions, and found them in memory, a miss
 * chain of its own after the weights streamed through every cache; and
 * the row each KV write stores missed too.  Asked for on the calling lane
 * as the job starts (prefetcht1 into its L2; prefetchw for the row).
 * SmolLM2 tg128 (positions 0-127), TSC cycles per layer, 3 runs each at 1
 * and 2 threads: attention 22-27k -> 13-15k, the group's job 43-56k ->
 * 51-62k (the rows' bandwidth, now paid there), both 64-84k -> 62-77k. */
void cpu_epilogue_prefetch(const cpu_epilogue *e, cpu_matmul_job *j)
{
    for (uint32_t m = 0; m < e->n; m++) {
        const struct cpu_qkv_chain *c = &e->chain[m];
        if (!c->kv)
            continue;
        const char *row = c->kv_rows.y;
        const size_t past = (size_t)(row - c->kv_base);
        const size_t take = past < CPU_QKV_PAST_BYTES ? past : CPU_QKV_PAST_BYTES;
        cpu_matmul_job_prefetch(j, row - take, take, false);
        cpu_matmul_job_prefetch(j, row, (size_t)c->heads * c->kv_rows.y_nb, true);
    }
}

sy_status cpu_epilogue_ready(cpu_epilogue *e)
{
    cpu_state *s = e->s;
    /* The counters are never reset between groups (a reset moved each
     * head's line to the calling lane and back for every layer): each
     * group adds d to every head's counter, so at its start each counter
     * is a multiple of its head's rows and the add that completes a head
     * is the one that makes it one again.  Only where the heads' layout
     * differs from the last group's are they set to zero. */
    _Static_assert(sizeof s->qkv_layout == 2 * CPU_MATMUL_GROUP_MAX * sizeof(int64_t),
                   "a layout holds every member's heads and rows");
    int64_t heads = 0, layout[2 * CPU_MATMUL_GROUP_MAX] = {0};
    for (uint32_t m = 0; m < e->n; m++) {
        const struct cpu_qkv_chain *c = &e->chain[m];
        const int64_t h = c->rope || c->kv ? c->heads : 0;
        heads += h;
        layout[2 * m] = h;
        layout[2 * m + 1] = h ? c->d : 0;
    }
    _Static_assert(CPU_ALIGN % CPU_QKV_LINE == 0, "counters on lines of their own");
    bool grew;
    sy_status st = cpu_reserve(s, &s->qkv_done, &s->qkv_done_size,
                               (size_t)heads * CPU_QKV_LINE, &grew);
    if (st != SY_OK)
        return st;
    if (e->rope_params) {
        st = cpu_rope_position(s, &e->rope_p, *e->rope_pos);
        if (st != SY_OK)
            return st;
    }
    _Atomic int64_t *done = s->qkv_done;
    if (grew || memcmp(layout, s->qkv_layout, sizeof layout) != 0) {
        for (int64_t h = 0; h < heads; h++)
            atomic_init(&done[h * CPU_QKV_SLOT], 0);
        memcpy(s->qkv_layout, layout, sizeof layout);
    }
    for (uint32_t m = 0; m < e->n; m++) {
        struct cpu_qkv_chain *c = &e->chain[m];
        if (!c->rope && !c->kv)
            continue;
        if (c->kv_start) {
            /* The row this run writes: the start its input holds now. */
            const int64_t row = *c->kv_start;
            if (row < 0 || row > c->kv_cap - 1) {
                cpu_log(s, SY_LOG_ERROR, "kv_write '%s': run-time start %lld outside the cache "
                        "of %lld rows", c->kv->name, (long long)row, (long long)c->kv_cap);
                return SY_E_INVALID_ARG;
            }
            c->kv_rows.y = (char *)c->kv_base + row * (int64_t)c->kv_row_nb;
        }
        if (c->done != done) /* the lanes read it: stored only where it moved */
            c->done = done;
        done += c->heads * CPU_QKV_SLOT;
    }
    if (!s->qkv_logged) {
        s->qkv_logged = true;
        cpu_log(s, SY_LOG_DEBUG, "rope and kv_write after the matmul group of '%s' run in its "
                "tiles, head by head", e->chain[0].y->name);
    }
    return SY_OK;
}

/* Ropes head |h| of chain |c| and writes it into the cache. */
static void cpu_qkv_head(const cpu_state *s, const struct cpu_qkv_chain *c, int64_t h)
{
    const struct cpu_qkv_rows *r = &c->rope_rows, *k = &c->kv_rows;
    if (c->rope)
        cpu_rope_row((const float *)(r->x + h * r->x_nb), (float *)(r->y + h * r->y_nb), c->d,
                     c->n_rot, c->neox, s->rope.cos, s->rope.sin);
    if (c->kv)
        cpu_store_row(s, c->kv_dtype, (const float *)(k->x + h * k->x_nb), k->y + h * k->y_nb,
                      c->d);
}

void cpu_epilogue_tile_done(cpu_epilogue *e, uint32_t m, int64_t n0, int64_t n1)
{
    const struct cpu_qkv_chain *c = &e->chain[m];
    if (!c->rope && !c->kv)
        return;
    const int64_t d = c->d;
    for (int64_t h = n0 / d; h * d < n1; h++) {
        const int64_t lo = n0 > h * d ? n0 : h * d;
        const int64_t hi = n1 < (h + 1) * d ? n1 : (h + 1) * d;
        const int64_t rows = hi - lo;
        /* A tile that covers the whole head needs no count. */
        if (rows < d && (atomic_fetch_add_explicit(&c->done[h * CPU_QKV_SLOT], rows,
                                                   memory_order_acq_rel) + rows) % d != 0)
            continue;
        cpu_qkv_head(e->s, c, h);
    }
}
