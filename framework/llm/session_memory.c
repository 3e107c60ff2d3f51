/* A session's memory, predicted before it exists and measured while it
 * runs (docs/memory.md, "Budgets, --fit and peak memory").
 *
 * Prediction: the session's two kinds of step, a full prefill chunk and a
 * decode step at the end of the context, are built and planned as the
 * session would plan them; their activation arenas come from the memory
 * planner (the plans' activation_bytes), the weights and KV caches from
 * where the plans put them.  Host memory (the cpu row) holds every
 * weight's file pages (mapped, read by every device that computes on them
 * or uploads them), the whole KV cache, the arenas of every device that
 * shares host memory (or is a CPU-kind device, whose own buffers are host
 * memory too), and the overhead: what the process has resident
 * besides the weights when the prediction is made (code, plugins, the
 * model's metadata and tokenizer) plus the session's own buffers and
 * plans.  A device with memory of its own holds the weights uploaded
 * there, the caches of the layers placed there (copied in every step) and
 * its arena. */
#include <fcntl.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include "plan_internal.h"
#include "runtime_internal.h"
#include "session_memory.h"

#define MIB (1024.0 * 1024.0)
/* Below this context --fit tries smaller KV types instead. */
#define FIT_MIN_CTX 256u
/* Contexts --fit tries are multiples of this (or the minimum). */
#define FIT_CTX_STEP 256u

/* Reads |key| ("VmRSS:") from /proc/self/status in bytes; 0 if absent. */
static uint64_t proc_status_bytes(const char *key)
{
    FILE *f = fopen("/proc/self/status", "r");
    if (!f)
        return 0;
    char line[256];
    uint64_t kb = 0;
    size_t n = strlen(key);
    while (fgets(line, sizeof line, f)) {
        if (strncmp(line, key, n) == 0) {
            kb = strtoull(line + n, NULL, 10);
            break;
        }
    }
    fclose(f);
    return kb * 1024;
}

/* Bytes of [lo, hi) this process has mapped in (pages present in its
 * page table, /proc/self/pagemap bit 63).  mincore() would not do: for a
 * file mapping it reports the page cache, pages this process may never
 * have touched. */
static uint64_t resident_bytes(const char *lo, const char *hi)
{
    long page = sysconf(_SC_PAGESIZE);
    if (!lo || hi <= lo || page <= 0)
        return 0;
    int fd = open("/proc/self/pagemap", O_RDONLY);
    if (fd < 0)
        return 0;
    uint64_t first = (uintptr_t)lo / (uint64_t)page, last = ((uintptr_t)hi - 1) / (uint64_t)page;
    uint64_t entries[512], in = 0;
    for (uint64_t p = first; p <= last;) {
        size_t n = (size_t)(last - p + 1 < 512 ? last - p + 1 : 512);
        ssize_t got = pread(fd, entries, n * sizeof entries[0], (off_t)(p * sizeof entries[0]));
        if (got <= 0)
            break;
        n = (size_t)got / sizeof entries[0];
        for (size_t i = 0; i < n; i++)
            in += entries[i] >> 63;
        p += n;
    }
    close(fd);
    return in * (uint64_t)page;
}

/* ------------------------------------------------------------- planning */

typedef struct kept_w {
    uint32_t dev; /* runtime index, or SY__NONE for the host's file pages */
    const void *ptr;
} kept_w;

/* What the plans of one (context, KV type) put where. */
typedef struct mem_eval {
    uint32_t n_dev;
    uint64_t arena[SY_MEMORY_MAX_DEVICES];   /* per runtime device: the larger phase's */
    uint64_t uploads[SY_MEMORY_MAX_DEVICES]; /* weights uploaded (union over phases) */
    uint64_t kv_on[SY_MEMORY_MAX_DEVICES];   /* caches copied in per step (larger phase) */
    bool used[SY_MEMORY_MAX_DEVICES];
    uint64_t host_weights; /* file pages of every weight a plan uses */
    const char *lo, *hi;   /* the span of those pages */
    kept_w *kept;
    uint32_t n_kept, cap_kept;
    uint32_t n_nodes, n_tensors; /* of the larger graph */
    char err[512];
} mem_eval;

/* Adds weight |t| (host data |ptr|) to device |dev|'s set once; true when
 * it was new. */
static bool keep_once(mem_eval *e, uint32_t dev, const void *ptr)
{
    for (uint32_t i = 0; i < e->n_kept; i++)
        if (e->kept[i].dev == dev && e->kept[i].ptr == ptr)
            return false;
    if (e->n_kept == e->cap_kept) {
        uint32_t cap = e->cap_kept ? e->cap_kept * 2 : 512;
        kept_w *grown = realloc(e->kept, cap * sizeof *grown);
        if (!grown)
            return false;
        e->kept = grown;
        e->cap_kept = cap;
    }
    e->kept[e->n_kept++] = (kept_w){dev, ptr};
    return true;
}

static bool device_unified(const sy_runtime *rt, uint32_t di)
{
    return rt->devices[di].desc.unified_memory != 0;
}

/* Builds and plans one step (T tokens after |past|) and adds what it puts
 * where to |e|. */
static sy_status eval_phase(sy_model *m, sy_planner *pl, const sy_session_options *o,
                            const sy_plan_options *po, uint32_t T, uint32_t past, mem_eval *e)
{
    const sy_hparams *hp = &m->hp;
    uint32_t L = hp->n_layer;
    void **kv = calloc(2 * (size_t)L + 1, sizeof *kv);
    int32_t *ids = calloc(2 * (size_t)T + 1, sizeof *ids);
    if (!kv || !ids) {
        free(kv);
        free(ids);
        snprintf(e->err, sizeof e->err, "out of memory planning the session's memory");
        return SY_E_NO_MEMORY;
    }
    for (uint32_t t = 0; t < T; t++)
        ids[T + t] = (int32_t)(past + t);
    sy_step_desc step = {.n_tokens = T, .n_past = past, .tokens = ids, .positions = ids + T,
                         .kv_k = kv, .kv_v = kv + L, .kv_type = o->kv_type, .n_ctx = o->n_ctx};
    sy_graph *g = NULL;
    sy_plan *plan = NULL;
    sy_status st = sy__model_build_graph(m, &step, &g, e->err, sizeof e->err);
    if (st == SY_OK) {
        st = sy_planner_plan(pl, g, po, &plan);
        if (st != SY_OK)
            snprintf(e->err, sizeof e->err, "%s", sy_planner_last_error(pl));
    }
    sy_runtime *rt = m->rt;
    for (uint32_t d = 0; st == SY_OK && d < plan->n_dev; d++) {
        uint32_t di = plan->dev_index[d];
        if (di >= SY_MEMORY_MAX_DEVICES)
            continue;
        if (plan->mem[d].activation_bytes > e->arena[di])
            e->arena[di] = plan->mem[d].activation_bytes;
        uint64_t kv_here = 0;
        for (uint32_t i = 0; i < plan->n_tensors; i++) {
            const sy_tensor *t = sy_graph_tensor(g, i);
            if (plan->leaf_home[i] != d)
                continue;
            e->used[di] = true;
            if (t->role == SY_ROLE_KV && !device_unified(rt, di))
                kv_here += sy_tensor_nbytes(t);
            if (t->role == SY_ROLE_WEIGHT && !device_unified(rt, di) &&
                keep_once(e, di, sy_graph_host_data(g, t)))
                e->uploads[di] += sy_tensor_nbytes(t);
        }
        if (kv_here > e->kv_on[di])
            e->kv_on[di] = kv_here;
    }
    for (uint32_t k = 0; st == SY_OK && k < plan->n_steps; k++) {
        const sy__plan_step *s = &plan->steps[k];
        uint32_t di = plan->dev_index[s->dev];
        if (s->kind == SY_PLAN_STEP_SEGMENT) {
            if (di < SY_MEMORY_MAX_DEVICES)
                e->used[di] = true;
            continue;
        }
        const sy_tensor *t = sy_graph_tensor(g, s->tensor);
        if (di < SY_MEMORY_MAX_DEVICES && s->value_node == SY__NONE &&
            t->role == SY_ROLE_WEIGHT && !device_unified(rt, di) &&
            keep_once(e, di, sy_graph_host_data(g, t)))
            e->uploads[di] += sy_tensor_nbytes(t);
    }
    for (uint32_t i = 0; st == SY_OK && i < sy_graph_tensor_count(g); i++) {
        const sy_tensor *t = sy_graph_tensor(g, i);
        const char *p = sy_graph_host_data(g, t);
        if (t->role != SY_ROLE_WEIGHT || !p || !keep_once(e, SY__NONE, p))
            continue;
        uint64_t n = sy_tensor_nbytes(t);
        e->host_weights += n;
        if (!e->lo || p < e->lo)
            e->lo = p;
        if (p + n > e->hi)
            e->hi = p + n;
    }
    if (st == SY_OK && sy_graph_node_count(g) > e->n_nodes) {
        e->n_nodes = sy_graph_node_count(g);
        e->n_tensors = sy_graph_tensor_count(g);
    }
    sy_plan_release(plan);
    sy_graph_destroy(g);
    free(kv);
    free(ids);
    return st;
}

/* The budget |o| gives device |name|, 0 for none; SY_E_INVALID_ARG for a
 * malformed entry. */
static sy_status budget_of(const sy_session_options *o, const char *name, uint64_t *out)
{
    *out = 0;
    for (uint32_t k = 0; k < o->n_mem; k++) {
        const char *eq = o->mem && o->mem[k] ? strchr(o->mem[k], '=') : NULL;
        if (!eq)
            return SY_E_INVALID_ARG;
        size_t len = (size_t)(eq - o->mem[k]);
        if (len == strlen(name) && strncmp(o->mem[k], name, len) == 0 &&
            !sy__parse_size(eq + 1, out))
            return SY_E_INVALID_ARG;
    }
    return SY_OK;
}

/* The host's row: the device named cpu, else the first CPU-kind one. */
static uint32_t host_device(const sy_runtime *rt)
{
    uint32_t idx;
    if (sy_runtime_find_device(rt, "cpu", &idx) == SY_OK)
        return idx;
    for (uint32_t i = 0; i < rt->device_count; i++)
        if (rt->devices[i].desc.kind == SY_DEVICE_CPU)
            return i;
    return SY__NONE;
}

/* Memory the session allocates for itself besides the KV cache and the
 * executor's buffers: logits, token scratch, the shift history, and the
 * graph and plans of its steps (structures of the larger graph, once per
 * cached plan: a prefill and a decode class are planned at least). */
static uint64_t session_own_bytes(const sy_model *m, const sy_session_options *o,
                                  const mem_eval *e)
{
    uint64_t b = (uint64_t)m->hp.n_vocab * sizeof(float) + (uint64_t)o->n_batch * 8;
    if (o->context_policy == SY_CONTEXT_SHIFT)
        b += (uint64_t)o->n_ctx * sizeof(int32_t);
    uint64_t graph = (uint64_t)e->n_tensors * (sizeof(sy_tensor) + 16) +
                     (uint64_t)e->n_nodes * (sizeof(sy_node) + 16);
    uint64_t plan = (uint64_t)e->n_nodes * (sizeof(sy__plan_node) + sizeof(uint32_t) +
                                           sizeof(sy__plan_step)) +
                    e->n_tensors;
    return b + graph + 2 * plan;
}

/* Evaluates (o->n_ctx, o->kv_type) into |out|; *out_fits tells whether
 * every budget holds, and |why| says which does not. */
static sy_status evaluate(sy_model *m, sy_planner *pl, const sy_session_options *o,
                          const sy_kv_config *kc, uint64_t rss, sy_memory_plan *out,
                          bool *out_fits, char *why, size_t why_size)
{
    sy_runtime *rt = m->rt;
    *out_fits = true;
    why[0] = '\0';
    uint64_t kv_bytes = 0;
    uint32_t max_step = 0;
    char err[256];
    sy_status st = sy__kv_cache_layout(&m->hp, kc, NULL, &kv_bytes, &max_step, err, sizeof err);
    if (st != SY_OK) {
        sy__runtime_set_error(rt, "session: %s", err);
        return st;
    }
    sy_plan_options po;
    sy_plan_options_init(&po);
    po.devices = o->devices;
    po.policy = o->policy;
    po.pins = o->pins;
    po.n_pins = o->n_pins;
    po.mem = o->mem;
    po.n_mem = o->n_mem;
    mem_eval e = {.n_dev = rt->device_count};
    uint32_t T = max_step ? max_step : 1; /* the longest chunk a prefill step takes */
    if (T > o->n_ctx)
        T = o->n_ctx;
    for (int pass = 0; pass < 2; pass++) {
        st = eval_phase(m, pl, o, &po, T, 0, &e);
        if (st == SY_OK)
            st = eval_phase(m, pl, o, &po, 1, o->n_ctx > 1 ? o->n_ctx - 1 : 0, &e);
        if (st != SY_E_LIMIT || !po.n_mem)
            break;
        /* A step's plan cannot meet a budget: the session does not fit.
         * Plan again without budgets for the numbers to report. */
        *out_fits = false;
        snprintf(why, why_size, "%s", e.err);
        free(e.kept);
        e = (mem_eval){.n_dev = rt->device_count};
        po.mem = NULL;
        po.n_mem = 0;
    }
    free(e.kept);
    /* Resident now besides the weights' pages (code, plugins, metadata,
     * other models): it stays for the session's whole life. */
    uint64_t in_weights = resident_bytes(e.lo, e.hi);
    uint64_t baseline = rss > in_weights ? rss - in_weights : 0;
    if (st != SY_OK) {
        sy__runtime_set_error(rt, "session memory: %s", e.err);
        return st;
    }
    uint32_t host = host_device(rt);
    out->n_ctx = o->n_ctx;
    out->kv_type = o->kv_type;
    out->n_batch = T;
    out->n_devices = 0;
    sy_memory_device *hr = &out->devices[out->n_devices++];
    memset(hr, 0, sizeof *hr);
    hr->device = host;
    hr->host = true;
    snprintf(hr->name, sizeof hr->name, "%s",
             host == SY__NONE ? "host" : rt->devices[host].desc.name);
    hr->weight_bytes = e.host_weights;
    hr->kv_bytes = kv_bytes;
    hr->overhead_bytes = baseline + session_own_bytes(m, o, &e);
    for (uint32_t di = 0; di < e.n_dev && di < SY_MEMORY_MAX_DEVICES; di++) {
        bool unified = device_unified(rt, di);
        /* A CPU-kind device keeps even its "own" buffers in host memory
         * (an OpenCL CPU runtime told not to share, PoCL under
         * SWITCHYARD_OPENCL_DISCRETE=1): they are the host's too. */
        bool in_host = unified || rt->devices[di].desc.kind == SY_DEVICE_CPU;
        if (in_host && di != host) {
            hr->arena_bytes += e.arena[di];
            hr->weight_bytes += e.uploads[di];
            hr->kv_bytes += e.kv_on[di];
        } else if (di == host) {
            hr->arena_bytes += e.arena[di];
        }
        uint64_t budget = 0;
        budget_of(o, rt->devices[di].desc.name, &budget);
        if (di == host || (!e.used[di] && !budget) || out->n_devices == SY_MEMORY_MAX_DEVICES)
            continue;
        sy_memory_device *r = &out->devices[out->n_devices++];
        memset(r, 0, sizeof *r);
        r->device = di;
        r->host = in_host;
        snprintf(r->name, sizeof r->name, "%s", rt->devices[di].desc.name);
        r->arena_bytes = e.arena[di];
        r->weight_bytes = e.uploads[di];
        r->kv_bytes = e.kv_on[di];
    }
    bool over = false;
    for (uint32_t k = 0; k < out->n_devices; k++) {
        sy_memory_device *r = &out->devices[k];
        r->peak_bytes = r->weight_bytes + r->kv_bytes + r->arena_bytes + r->overhead_bytes;
        if (budget_of(o, r->name, &r->budget_bytes) != SY_OK) {
            sy__runtime_set_error(rt, "session: a memory budget is not DEVICE=SIZE");
            return SY_E_INVALID_ARG;
        }
        if (r->budget_bytes && r->peak_bytes > r->budget_bytes && !over) {
            /* The whole session's numbers before a step plan's. */
            over = true;
            *out_fits = false;
            snprintf(why, why_size,
                     "model needs %.1f MiB on %s, budget %.1f MiB (weights %.1f MiB, KV %.1f "
                     "MiB, activations %.1f MiB, overhead %.1f MiB)",
                     r->peak_bytes / MIB, r->name, r->budget_bytes / MIB, r->weight_bytes / MIB,
                     r->kv_bytes / MIB, r->arena_bytes / MIB, r->overhead_bytes / MIB);
        }
    }
    return SY_OK;
}

/* ------------------------------------------------------------------ fit */

/* KV types --fit steps down to after the requested one, smallest last. */
static const sy_dtype fit_types[] = {SY_DTYPE_F32, SY_DTYPE_F16, SY_DTYPE_Q8_0, SY_DTYPE_Q4_0};

static double bytes_per_elem(sy_dtype t)
{
    return (double)sy_dtype_type_size(t) / (double)sy_dtype_block_size(t);
}

/* Evaluates |o| at context |ctx| and KV type |type|. */
static sy_status try_config(sy_model *m, sy_planner *pl, sy_session_options *o, sy_kv_config *kc,
                            uint32_t ctx, sy_dtype type, uint64_t rss, sy_memory_plan *out,
                            bool *fits, char *why, size_t why_size)
{
    o->n_ctx = ctx;
    o->kv_type = type;
    kc->n_ctx = ctx;
    kc->type = type;
    if (o->context_policy == SY_CONTEXT_WINDOW && kc->window > ctx)
        kc->window = ctx;
    return evaluate(m, pl, o, kc, rss, out, fits, why, why_size);
}

/* The largest context in [lo, hi] at which |type| fits: hi itself, else
 * by bisection over multiples of FIT_CTX_STEP above lo, else lo; 0 when
 * not even lo does. */
static sy_status largest_ctx(sy_model *m, sy_planner *pl, sy_session_options *o, sy_kv_config *kc,
                             uint32_t lo, uint32_t hi, sy_dtype type, uint64_t rss,
                             sy_memory_plan *scratch, uint32_t *out_ctx, char *why,
                             size_t why_size)
{
    *out_ctx = 0;
    bool fits;
    char ignored[512];
    sy_status st = try_config(m, pl, o, kc, hi, type, rss, scratch, &fits, ignored,
                              sizeof ignored);
    if (st != SY_OK || fits) {
        *out_ctx = st == SY_OK ? hi : 0;
        return st;
    }
    st = try_config(m, pl, o, kc, lo, type, rss, scratch, &fits, why, why_size);
    if (st != SY_OK || !fits)
        return st;
    uint32_t good = lo, a = lo / FIT_CTX_STEP + 1, b = (hi - 1) / FIT_CTX_STEP;
    while (a <= b) {
        uint32_t mid = a + (b - a) / 2;
        st = try_config(m, pl, o, kc, mid * FIT_CTX_STEP, type, rss, scratch, &fits, ignored,
                        sizeof ignored);
        if (st != SY_OK)
            return st;
        if (fits) {
            good = mid * FIT_CTX_STEP;
            a = mid + 1;
        } else {
            b = mid - 1;
        }
    }
    *out_ctx = good;
    return SY_OK;
}

sy_status sy__session_plan_memory(sy_model *m, sy_planner *pl, sy_session_options *o,
                                  sy_kv_config *kc, sy_memory_plan *out)
{
    sy_runtime *rt = m->rt;
    sy_planner *own = NULL;
    if (!pl) {
        sy_status st = sy_planner_create(rt, &own);
        if (st == SY_OK)
            st = sy_planner_load_default_profiles(own, NULL);
        if (st != SY_OK) {
            sy_planner_destroy(own);
            sy__runtime_set_error(rt, "session memory: cannot create a planner");
            return st;
        }
        pl = own;
    }
    uint64_t rss = proc_status_bytes("VmRSS:");
    char why[512];
    bool fits = false;
    const uint32_t want_ctx = o->n_ctx;
    const sy_dtype want_type = o->kv_type;
    const sy_kv_config want_kc = *kc;
    sy_status st = evaluate(m, pl, o, kc, rss, out, &fits, why, sizeof why);
    out->fitted = false;
    out->note[0] = '\0';
    if (st != SY_OK || fits || !o->fit) {
        if (st == SY_OK && !fits) {
            sy__runtime_set_error(rt, "%s (--fit picks a smaller context or KV type)", why);
            st = SY_E_LIMIT;
        }
        sy_planner_destroy(own);
        return st;
    }
    /* Largest context at the requested KV type; then, where not even
     * FIT_MIN_CTX fits, each smaller KV type from the requested context. */
    uint32_t lo = want_ctx < FIT_MIN_CTX ? want_ctx : FIT_MIN_CTX, ctx = 0;
    sy_dtype type = want_type;
    sy_memory_plan scratch = *out;
    char last[512];
    snprintf(last, sizeof last, "%s", why);
    for (size_t k = 0; st == SY_OK && ctx == 0 && k < sizeof fit_types / sizeof fit_types[0];
         k++) {
        if (fit_types[k] != want_type && bytes_per_elem(fit_types[k]) >= bytes_per_elem(want_type))
            continue;
        *kc = want_kc;
        type = fit_types[k];
        st = largest_ctx(m, pl, o, kc, lo, want_ctx, type, rss, &scratch, &ctx, last,
                         sizeof last);
    }
    if (st == SY_OK && ctx == 0) {
        sy__runtime_set_error(rt,
                              "%s; --fit found nothing smaller that fits: at a %u-token context "
                              "with %s KV, %s",
                              why, lo, sy_dtype_name(type), last);
        st = SY_E_LIMIT;
    }
    if (st == SY_OK) {
        *kc = want_kc;
        st = try_config(m, pl, o, kc, ctx, type, rss, out, &fits, last, sizeof last);
        out->fitted = true;
        const sy_memory_device *tight = NULL;
        for (uint32_t k = 0; k < out->n_devices; k++) {
            const sy_memory_device *r = &out->devices[k];
            if (r->budget_bytes && (!tight || (double)r->peak_bytes / r->budget_bytes >
                                                  (double)tight->peak_bytes / tight->budget_bytes))
                tight = r;
        }
        snprintf(out->note, sizeof out->note,
                 "--fit: context %u -> %u tokens, KV %s -> %s: predicted peak %.1f MiB on %s, "
                 "budget %.1f MiB",
                 want_ctx, ctx, sy_dtype_name(want_type), sy_dtype_name(type),
                 tight ? tight->peak_bytes / MIB : 0.0, tight ? tight->name : "?",
                 tight ? tight->budget_bytes / MIB : 0.0);
    }
    if (st != SY_OK) {
        o->n_ctx = want_ctx;
        o->kv_type = want_type;
        *kc = want_kc;
    }
    sy_planner_destroy(own);
    return st;
}

void sy_memory_plan_init(sy_memory_plan *plan)
{
    if (!plan)
        return;
    memset(plan, 0, sizeof *plan);
    plan->struct_size = sizeof *plan;
}

void sy_memory_usage_init(sy_memory_usage *usage)
{
    if (!usage)
        return;
    memset(usage, 0, sizeof *usage);
    usage->struct_size = sizeof *usage;
}

sy_status sy_model_plan_memory(sy_model *m, const sy_session_options *opts,
                               sy_memory_plan *out_plan)
{
    if (!out_plan || out_plan->struct_size < sizeof *out_plan)
        return SY_E_INVALID_ARG;
    sy_memory_plan_init(out_plan);
    if (!m)
        return SY_E_INVALID_ARG;
    sy_session_options o;
    sy_kv_config kc;
    sy_status st = sy__session_config(m, opts, &o, &kc);
    if (st != SY_OK)
        return st;
    return sy__session_plan_memory(m, NULL, &o, &kc, out_plan);
}

sy_status sy__session_usage(const sy_runtime *rt, const sy_executor *x, sy_memory_usage *out)
{
    uint32_t size = out->struct_size;
    memset(out, 0, sizeof *out);
    out->struct_size = size;
    out->host_rss_bytes = proc_status_bytes("VmRSS:");
    out->host_peak_bytes = proc_status_bytes("VmHWM:");
    for (uint32_t di = 0; di < SY_MEMORY_MAX_DEVICES; di++) {
        sy_executor_memory em;
        if (sy_executor_query_memory(x, di, &em) != SY_OK)
            break;
        snprintf(out->devices[di].name, sizeof out->devices[di].name, "%s",
                 rt->devices[di].desc.name);
        out->devices[di].device = di;
        out->devices[di].current_bytes = em.current_bytes;
        out->devices[di].peak_bytes = em.peak_bytes;
        out->devices[di].plugin_counted =
            sy_runtime_query_device_memory((sy_runtime *)rt, di, false,
                                           &out->devices[di].plugin_bytes,
                                           &out->devices[di].plugin_peak_bytes) == SY_OK;
        out->n_devices = di + 1;
    }
    return SY_OK;
}
