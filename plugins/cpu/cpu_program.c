/* The kept program of execute_keyed (cpu_program.h).
 *
 * A session's decode step hands the plugin the same node array every
 * token; between two tokens only the KV writes' positions and the extent
 * of the cache prefixes the attention reads change.  cpu_execute_nodes
 * looks at every node each call: it resolves its data, matches norm
 * chains and matmul groups and the ropes and KV writes fused into them,
 * checks each matmul against the kernel's rules and looks its packed
 * weight up.  The node and tensor structs it reads are cold by then (the
 * weights streamed through the caches since the last step), so that work
 * was most of the decode step's time in dispatch (bench/overhead.sh).
 *
 * Under a key, the first call runs cpu_execute_nodes and records what it
 * ran: steps of one node, of a norm chain, of an element-wise node, or of
 * a matmul job (a matmul or a group, set up, with its fused nodes).  Later
 * calls with the key run the steps.  A node step runs its kernel on the
 * node as it is now, as any call does.  A chain or element-wise step
 * keeps its kernel's checked context, and a job its setup; a step any
 * changed node's output touches is checked or set up again, except that a
 * job whose only touched nodes are its fused KV writes (a decode step:
 * their position moved) moves those writes in place.  When a step refuses
 * now what it took when recorded, the call runs the rest of the nodes as
 * cpu_execute_nodes does and the next call records again.  Every output
 * is the one cpu_execute_nodes writes, bit for bit: the same kernels on
 * the same data. */
#include <stdlib.h>
#include <string.h>

#include "cpu_program.h"

enum { CPU_STEP_NODE, CPU_STEP_CHAIN, CPU_STEP_ELTWISE, CPU_STEP_ATTENTION, CPU_STEP_JOB };

/* Set on a step whose nodes (a job's matmuls), or a job's fused nodes, a
 * changed output touches. */
#define CPU_TOUCH_MEMBERS 1u
#define CPU_TOUCH_FUSED 2u

typedef struct cpu_step {
    uint8_t kind;
    uint8_t touch;   /* CPU_TOUCH_*, under the last changed list */
    uint16_t members; /* a job's matmuls */
    uint32_t first, count; /* nodes [first, first + count) */
    uint32_t job;          /* a job's index in jobs */
    /* Its structs in warm: |warm_nodes| nodes, then tensors up to
     * |warm_end|. */
    uint32_t warm_first, warm_nodes, warm_end;
    /* A job's fused nodes a changed output touches: bit i for node
     * members + i (the first 32; any after them are looked up). */
    uint32_t fused_touched;
    const sy_node *chain[3]; /* a chain's add (or NULL), norm, mul (or NULL) */
    /* A chain's weight row (its multiply's), or NULL: prefetched as the
     * step before it starts (cpu_program_run). */
    const char *ahead;
    uint32_t ahead_bytes;
    /* A chain's, an element-wise node's or an attention's kernel, checked
     * when recorded: untouched, it runs without reading its nodes' structs
     * again. */
    union {
        cpu_norm_chain chain;
        cpu_eltwise eltwise;
        cpu_attention_kept attention;
    } k;
} cpu_step;

struct cpu_program {
    cpu_state *state;
    uint64_t key; /* 0: none kept */
    sy_node *const *nodes;
    uint32_t n;
    cpu_step *steps;
    size_t n_steps, cap_steps; /* cap in bytes */
    char *jobs;                /* job i at i * job_size */
    size_t n_jobs, cap_jobs;   /* cap in bytes */
    size_t job_size;
    uint64_t packs_rewritten; /* s->packs_rewritten when recorded */
    /* The node and tensor structs each step reads, by step: prefetched
     * together as the step starts, their misses overlap, where the
     * kernels' own loads wait for each in turn (a node, then the tensors
     * it points at). */
    const void **warm;
    size_t n_warm, cap_warm; /* cap in bytes */
    /* The changed outputs the steps' touch flags were worked out for, in
     * the caller's order and sorted (searched); valid: they were. */
    const sy_tensor **touched, **sorted;
    size_t n_touched, cap_touched, cap_sorted; /* caps in bytes */
    bool touch_valid;
    bool broken; /* a record did not fit (out of memory): not kept */
    size_t fetch_at; /* the step a job's tail fetches (cpu_program_tail) */
};

/* Makes *|p| (*|cap| bytes) hold at least |bytes|, keeping its contents. */
static bool cpu_program_grow(cpu_state *s, void **p, size_t *cap, size_t bytes)
{
    if (*cap >= bytes)
        return true;
    size_t want = *cap ? *cap * 2 : 4096;
    while (want < bytes)
        want *= 2;
    void *q = s->host->alloc(s->host->ctx, want, CPU_ALIGN);
    if (!q)
        return false;
    if (*p) {
        memcpy(q, *p, *cap);
        s->host->free(s->host->ctx, *p);
    }
    *p = q;
    *cap = want;
    return true;
}

cpu_matmul_job *cpu_program_job(cpu_state *s, cpu_program *p)
{
    if (p && !p->broken &&
        cpu_program_grow(s, (void **)&p->jobs, &p->cap_jobs, (p->n_jobs + 1) * p->job_size))
        return (cpu_matmul_job *)(p->jobs + p->n_jobs * p->job_size);
    if (p)
        p->broken = true;
    if (!s->job && !(s->job = s->host->alloc(s->host->ctx, cpu_matmul_job_size(), CPU_ALIGN)))
        return NULL;
    return s->job;
}

static cpu_step *cpu_program_step(cpu_program *p, uint8_t kind, uint32_t first, uint32_t count)
{
    cpu_state *s = p->state;
    if (p->broken || !cpu_program_grow(s, (void **)&p->steps, &p->cap_steps,
                                (p->n_steps + 1) * sizeof *p->steps)) {
        p->broken = true;
        return NULL;
    }
    cpu_step *st = &p->steps[p->n_steps++];
    memset(st, 0, sizeof *st);
    st->kind = kind;
    st->first = first;
    st->count = count;
    /* Each node, and each tensor it reads or writes. */
    size_t need = 0;
    for (uint32_t i = 0; i < count; i++)
        need += 2 + p->nodes[first + i]->n_inputs;
    if (!cpu_program_grow(s, (void **)&p->warm, &p->cap_warm, (p->n_warm + need) * sizeof *p->warm)) {
        p->broken = true;
        return NULL;
    }
    st->warm_first = (uint32_t)p->n_warm;
    /* Jobs, chains and element-wise steps read their nodes' structs only
     * when they are set up. */
    if (kind == CPU_STEP_NODE)
        for (uint32_t i = 0; i < count; i++)
            p->warm[p->n_warm++] = p->nodes[first + i];
    st->warm_nodes = (uint32_t)(p->n_warm - st->warm_first);
    for (uint32_t i = 0; i < count; i++) {
        const sy_node *node = p->nodes[first + i];
        for (uint32_t j = 0; j <= node->n_inputs; j++) {
            const void *t = j < node->n_inputs ? (const void *)node->inputs[j] : node->output;
            bool seen = false; /* members share their input */
            for (size_t k = p->n_warm; k-- > (size_t)st->warm_first + st->warm_nodes && !seen;)
                seen = p->warm[k] == t;
            if (!seen)
                p->warm[p->n_warm++] = t;
        }
    }
    st->warm_end = (uint32_t)p->n_warm;
    return st;
}

static bool cpu_program_node_touched(const cpu_program *p, const sy_node *node);

/* True when a changed output touches fused node |i| of job step |st|: its
 * bit, or (past the first 32) a look at the node where |look| (else
 * true). */
static bool cpu_program_fused_touched(const cpu_program *p, const cpu_step *st, uint32_t i,
                                      bool look)
{
    const uint32_t f = i - st->members;
    if (f < 32)
        return (st->fused_touched >> f) & 1u;
    return !look || cpu_program_node_touched(p, p->nodes[st->first + i]);
}

/* Fetches the lines of |st|'s structs that the kernels read: a node's op,
 * inputs, output and params (its first three lines); a tensor's shape,
 * strides and data (its first two). */
static void cpu_program_warm(const cpu_program *p, const cpu_step *st)
{
    const void *const *w = p->warm;
    uint32_t k = st->warm_first;
    for (const uint32_t nodes_end = k + st->warm_nodes; k < nodes_end; k++) {
        __builtin_prefetch(w[k]);
        __builtin_prefetch((const char *)w[k] + 64);
        __builtin_prefetch((const char *)w[k] + 128);
    }
    for (; k < st->warm_end; k++) {
        __builtin_prefetch(w[k]);
        __builtin_prefetch((const char *)w[k] + 64);
    }
    /* A job taking its fused nodes again, or moving its KV writes, reads
     * their structs. */
    if (st->touch)
        for (uint32_t i = st->members; i < st->count; i++) {
            if (!(st->touch & CPU_TOUCH_MEMBERS) && !cpu_program_fused_touched(p, st, i, false))
                continue;
            const char *node = (const char *)p->nodes[st->first + i];
            __builtin_prefetch(node);
            __builtin_prefetch(node + 64);
            __builtin_prefetch(node + 128);
        }
}

/* Fetches, for the time before step |k| starts, what it reads first: its
 * record, the structs its warm list names, its job's set-up; and the
 * records of the step after it (its record, the start of its warm list,
 * which follows |k|'s), which the next fetch reads.  Step |k|'s records
 * were fetched so by the fetch before, so its few loads here hit.  The
 * last step fetches the first, for the next call. */
static void cpu_program_fetch(const cpu_program *p, size_t k)
{
    if (p->n_steps == 0)
        return;
    k %= p->n_steps;
    const cpu_step *st = &p->steps[k];
    cpu_program_warm(p, st);
    if (st->kind == CPU_STEP_JOB)
        cpu_matmul_job_fetch((const cpu_matmul_job *)(p->jobs + st->job * p->job_size),
                             st->members, st->count > st->members);
    const size_t nx = k + 1 < p->n_steps ? k + 1 : 0;
    cpu_prefetch_range(&p->steps[nx], sizeof *p->steps, false);
    cpu_prefetch_range(p->warm + st->warm_end, 4 * 64, false);
}

/* A job's tail (cpu_matmul_job_tail): the fetch for the step after it,
 * in the time the calling lane waits for the other lanes. */
static void cpu_program_tail(void *arg)
{
    const cpu_program *p = arg;
    cpu_program_fetch(p, p->fetch_at);
}

void cpu_program_add_job(cpu_program *p, uint32_t first, uint32_t members, uint32_t count)
{
    if (!p)
        return;
    cpu_step *st = p->broken ? NULL : cpu_program_step(p, CPU_STEP_JOB, first, count);
    if (!st)
        return;
    st->members = (uint16_t)members;
    st->job = (uint32_t)p->n_jobs++;
}

/* A chain's weight row as the step's ahead bytes. */
static void cpu_program_set_ahead(cpu_step *st)
{
    const sy_tensor *w = st->k.chain.w;
    st->ahead = w ? (const char *)w->data : NULL;
    st->ahead_bytes = w ? (uint32_t)(w->ne[0] * (int64_t)sizeof(float)) : 0;
}

void cpu_program_add_chain(cpu_program *p, uint32_t first, uint32_t count, const sy_node *add,
                           const sy_node *norm, const sy_node *mul, const cpu_norm_chain *c)
{
    cpu_step *st = p && !p->broken ? cpu_program_step(p, CPU_STEP_CHAIN, first, count) : NULL;
    if (!st)
        return;
    st->chain[0] = add;
    st->chain[1] = norm;
    st->chain[2] = mul;
    st->k.chain = *c;
    cpu_program_set_ahead(st);
}

void cpu_program_add_eltwise(cpu_program *p, uint32_t first, const cpu_eltwise *e)
{
    cpu_step *st = p && !p->broken ? cpu_program_step(p, CPU_STEP_ELTWISE, first, 1) : NULL;
    if (st)
        st->k.eltwise = *e;
}

void cpu_program_add_attention(cpu_program *p, uint32_t first, const cpu_attention_kept *a)
{
    cpu_step *st = p && !p->broken ? cpu_program_step(p, CPU_STEP_ATTENTION, first, 1) : NULL;
    if (st)
        st->k.attention = *a;
}

void cpu_program_add_node(cpu_program *p, uint32_t first)
{
    if (p && !p->broken)
        cpu_program_step(p, CPU_STEP_NODE, first, 1);
}

void cpu_program_free(cpu_state *s)
{
    cpu_program *p = s->program;
    if (p) {
        if (p->steps)
            s->host->free(s->host->ctx, p->steps);
        if (p->jobs)
            s->host->free(s->host->ctx, p->jobs);
        if (p->touched)
            s->host->free(s->host->ctx, p->touched);
        if (p->sorted)
            s->host->free(s->host->ctx, p->sorted);
        if (p->warm)
            s->host->free(s->host->ctx, p->warm);
        s->host->free(s->host->ctx, p);
        s->program = NULL;
    }
    if (s->job)
        s->host->free(s->host->ctx, s->job);
    s->job = NULL;
}

static int cpu_ptr_cmp(const void *a, const void *b)
{
    const uintptr_t x = (uintptr_t)*(const sy_tensor *const *)a;
    const uintptr_t y = (uintptr_t)*(const sy_tensor *const *)b;
    return x < y ? -1 : x > y;
}

static bool cpu_program_touches(const cpu_program *p, const sy_tensor *t)
{
    return bsearch(&t, p->sorted, p->n_touched, sizeof *p->sorted, cpu_ptr_cmp) != NULL;
}

/* True when a changed output is |node|'s output or one of its inputs. */
static bool cpu_program_node_touched(const cpu_program *p, const sy_node *node)
{
    bool hit = cpu_program_touches(p, node->output);
    for (uint32_t j = 0; j < node->n_inputs && !hit; j++)
        hit = cpu_program_touches(p, node->inputs[j]);
    return hit;
}

/* Works out which steps the outputs of |changed| touch; false when
 * out of memory.  The same changed outputs as the last call's (a decode
 * step updates the same nodes every token) keep the flags. */
static bool cpu_program_touch(cpu_program *p, sy_node *const *changed, uint32_t n_changed)
{
    cpu_state *s = p->state;
    const size_t bytes = ((size_t)n_changed + 1) * sizeof *p->touched;
    if (!cpu_program_grow(s, (void **)&p->touched, &p->cap_touched, bytes) ||
        !cpu_program_grow(s, (void **)&p->sorted, &p->cap_sorted, bytes))
        return false;
    /* The same list in the same order: nothing to work out again. */
    bool same = p->touch_valid && p->n_touched == n_changed;
    for (uint32_t k = 0; k < n_changed && same; k++)
        same = changed[k] && changed[k]->output == p->touched[k];
    if (same)
        return true;
    p->n_touched = 0;
    for (uint32_t k = 0; k < n_changed; k++)
        if (changed[k] && changed[k]->output)
            p->touched[p->n_touched++] = changed[k]->output;
    memcpy(p->sorted, p->touched, p->n_touched * sizeof *p->sorted);
    qsort(p->sorted, p->n_touched, sizeof *p->sorted, cpu_ptr_cmp);
    for (size_t k = 0; k < p->n_steps; k++) {
        cpu_step *st = &p->steps[k];
        st->touch = 0;
        st->fused_touched = 0;
        for (uint32_t i = 0; st->kind != CPU_STEP_NODE && i < st->count; i++) {
            if (!cpu_program_node_touched(p, p->nodes[st->first + i]))
                continue;
            st->touch |= i < st->members ? CPU_TOUCH_MEMBERS : CPU_TOUCH_FUSED;
            if (i >= st->members && i - st->members < 32)
                st->fused_touched |= 1u << (i - st->members);
        }
    }
    p->touch_valid = true;
    return true;
}

/* Sets job step |st| up again where the changed outputs touch it; false
 * when its nodes no longer group or fuse as they did. */
static bool cpu_program_refresh(cpu_state *s, const cpu_program *p, const cpu_step *st,
                                cpu_matmul_job *j)
{
    sy_node *const *nodes = p->nodes;
    if (st->touch & CPU_TOUCH_MEMBERS) {
        cpu_epilogue e;
        uint32_t covered = 0;
        if (st->count > st->members)
            covered = cpu_scan_epilogue(s, nodes, st->first, st->members, p->n, &e);
        const char *why;
        return st->members + covered == st->count &&
               cpu_matmul_job_build(s, (const sy_node *const *)(nodes + st->first), st->members,
                                    covered ? &e : NULL, j, &why) == SY_OK;
    }
    cpu_epilogue *e = cpu_matmul_job_epilogue(j);
    if (!e)
        return false;
    /* A decode step moves its KV writes and nothing else of the job: each
     * write moved in place spares taking every fused node again (their
     * structs and tensors, the rope's checks). */
    bool moved = true;
    for (uint32_t i = st->members; i < st->count && moved; i++) {
        if (!cpu_program_fused_touched(p, st, i, true))
            continue;
        const sy_node *node = nodes[st->first + i];
        moved = node->op == SY_OP_KV_WRITE && cpu_epilogue_move_kv(e, node);
    }
    return moved ||
           st->members + cpu_scan_epilogue(s, nodes, st->first, st->members, p->n, e) == st->count;
}

static sy_status cpu_program_run(cpu_state *s, cpu_program *p)
{
    sy_node *const *nodes = p->nodes;
    for (size_t k = 0; k < p->n_steps; k++) {
        cpu_step *st = &p->steps[k];
        sy_status r;
        /* Again, though the step before fetched it (cpu_program_fetch): a
         * long step between (an attention deep into its cache) can have
         * pushed those lines out of L2, and present lines cost little. */
        cpu_program_warm(p, st);
        /* The next step's weight row, while this one runs: a norm's weight
         * row read after a job has streamed the weights through every
         * cache came from memory, with a page walk, in its multiply
         * (SmolLM2 decode: 0.8% of the step in cpu_avx2_mul_f32).  A job
         * asks for it once it is out (cpu_matmul_job_prefetch). */
        const cpu_step *nx = k + 1 < p->n_steps ? &p->steps[k + 1] : NULL;
        if (nx && nx->ahead && st->kind == CPU_STEP_JOB)
            cpu_matmul_job_prefetch((cpu_matmul_job *)(p->jobs + st->job * p->job_size),
                                    nx->ahead, nx->ahead_bytes, false);
        else if (nx && nx->ahead)
            cpu_prefetch_range(nx->ahead, nx->ahead_bytes, false);
        /* The next step's structs: a job fetches them in its tail, any
         * other step before it runs. */
        if (st->kind != CPU_STEP_JOB)
            cpu_program_fetch(p, k + 1);
        if (st->kind == CPU_STEP_NODE) {
            r = cpu_run_node(s, nodes[st->first]);
            if (r != SY_OK)
                return r;
            continue;
        }
        if (st->kind == CPU_STEP_ATTENTION) {
            /* A decode's attention reads n_past at run time where its
             * graph has it so, and is never touched then. */
            const char *why = NULL;
            r = st->touch ? cpu_attention_prepare(s, nodes[st->first], &st->k.attention, &why)
                          : SY_OK;
            if (r == SY_OK) {
                r = cpu_attention_run(s, &st->k.attention, &why);
                if (r == SY_OK)
                    continue;
                if (r != SY_E_UNSUPPORTED) {
                    cpu_log(s, SY_LOG_ERROR, "attention '%s' failed: %s (%s)",
                            nodes[st->first]->name, cpu_status_name(r), why ? why : "");
                    return r;
                }
            }
        } else if (st->kind == CPU_STEP_CHAIN || st->kind == CPU_STEP_ELTWISE) {
            /* Checked again where a changed output touches it. */
            const char *why = NULL;
            r = SY_OK;
            if (st->touch && st->kind == CPU_STEP_CHAIN) {
                r = cpu_norm_chain_prepare(s, st->chain[0], st->chain[1], st->chain[2],
                                           &st->k.chain, &why);
                if (r == SY_OK)
                    cpu_program_set_ahead(st);
            }
            else if (st->touch)
                r = cpu_eltwise_prepare(s, nodes[st->first], &st->k.eltwise, &why);
            if (r == SY_OK) {
                if (st->kind == CPU_STEP_CHAIN)
                    cpu_norm_chain_run(s, &st->k.chain);
                else
                    cpu_eltwise_run(s, &st->k.eltwise);
                continue;
            }
        } else {
            cpu_matmul_job *j = (cpu_matmul_job *)(p->jobs + st->job * p->job_size);
            if (!st->touch || cpu_program_refresh(s, p, st, j)) {
                p->fetch_at = k + 1;
                cpu_matmul_job_tail(j, cpu_program_tail, p);
                r = cpu_matmul_job_run(s, j);
                if (r == SY_OK)
                    continue;
                cpu_log(s, SY_LOG_ERROR, "matmul from node '%s' failed: %s",
                        nodes[st->first]->name, cpu_status_name(r));
                return r;
            }
        }
        /* Refused now what it took when recorded: the rest as any call
         * runs it, and the next call records again. */
        p->key = 0;
        cpu_log(s, SY_LOG_DEBUG, "kept program: node '%s' no longer runs as recorded; recording again",
                nodes[st->first]->name);
        return cpu_execute_nodes(s, nodes + st->first, p->n - st->first, NULL);
    }
    return SY_OK;
}

sy_status cpu_device_execute_keyed(void *state, uint32_t dev, sy_node *const *nodes, uint32_t n,
                                   uint64_t key, sy_node *const *changed, uint32_t n_changed)
{
    cpu_state *s = state;
    if (dev != 0 || (!nodes && n) || (!changed && n_changed))
        return SY_E_INVALID_ARG;
    cpu_program *p = s->program;
    if (!p && s->keep_program && key != 0) {
        p = s->program = s->host->alloc(s->host->ctx, sizeof *p, CPU_ALIGN);
        if (p) {
            memset(p, 0, sizeof *p);
            p->state = s;
            p->job_size = (cpu_matmul_job_size() + CPU_ALIGN - 1) / CPU_ALIGN * CPU_ALIGN;
        }
    }
    /* Mappings may have changed between calls (cpu_repack.c). */
    s->file_maps.valid = false;
    sy_status st;
    if (!p || key == 0) {
        st = cpu_execute_nodes(s, nodes, n, NULL);
    } else if (p->key == key && p->nodes == nodes && p->n == n &&
               /* A packed weight dropped since the record (its buffer
                * written) leaves the jobs pointing at freed memory. */
               p->packs_rewritten == s->packs_rewritten &&
               cpu_program_touch(p, changed, n_changed)) {
        st = cpu_program_run(s, p);
    } else {
        p->key = 0;
        p->nodes = nodes;
        p->n = n;
        p->n_steps = p->n_jobs = p->n_warm = 0;
        p->touch_valid = p->broken = false;
        st = cpu_execute_nodes(s, nodes, n, p);
        if (st == SY_OK && !p->broken) {
            p->key = key;
            p->packs_rewritten = s->packs_rewritten;
            cpu_log(s, SY_LOG_DEBUG, "kept program: %u nodes in %zu steps, %zu of them matmul jobs",
                    n, p->n_steps, p->n_jobs);
        }
    }
    /* Weights packed into the pack cache during the call are synced and
     * recorded once, here, after it. */
    if (s->pack_pending)
        cpu_pack_cache_commit(s);
    return st;
}
