/* Sessions: one conversation on a model — its KV cache, its position, the
 * context policy that applies when the cache is full, and the generate
 * loop with metrics.
 *
 * SY_CONTEXT_SHIFT re-evaluates rather than re-rotates: the tokens kept
 * after a shift (the first n_keep, then the newer half of the rest) are
 * evaluated again at their new positions, from n_keep when every layer
 * still holds what that needs, else from 0.  The cache then holds exactly
 * what a fresh session given the kept tokens would hold, for every KV type
 * and architecture.  Re-rotating the cached K by RoPE (llama.cpp's
 * context shift) is cheaper but keeps keys and values that were computed
 * while the dropped tokens were visible, and would re-quantise Q8_0/Q4_0
 * keys at every shift; its result matches no fresh evaluation. */
#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/resource.h>
#include <time.h>

#include "model_internal.h"
#include "plan_internal.h"
#include "runtime_internal.h"
#include "sampler.h"
#include "session_graph.h"
#include "session_memory.h"
#include "session_replan.h"
#include "session_timing.h"

struct sy_session {
    sy_model *m;
    sy_planner *planner;   /* plans every step; its cache makes repeats cheap */
    sy_plan_options plan_opts;
    char *devices, *policy;
    uint32_t n_ctx, n_batch, n_past;
    sy_context_policy ctx_policy;
    uint32_t n_keep, window;
    sy_kv_cache kv;
    int32_t *hist;               /* SHIFT: the ids at positions 0 .. n_past-1 */
    int32_t *tokens, *positions; /* n_batch scratch */
    /* Per layer the first row a step writes, read by its KV writes and
     * attentions when they run (session_graph.h); NULL: in their params. */
    int32_t *kv_starts;
    bool kv_probed; /* the devices were asked whether they take kv_starts */
    float *logits;               /* n_vocab floats: last position */
    sy_metrics metrics;
    sy__replan replan; /* device failures re-planned around */
    sy_executor *exec;  /* runs every step: arenas and weights kept between steps */
    sy_memory_plan memory; /* predicted before anything was allocated (after --fit) */
    sy__timing timing;     /* per-node totals, with time_nodes */
    sy__step_graphs graphs; /* step graphs kept between steps (session_graph.h) */
    char err[1024];
};

static double now_ms(void)
{
    struct timespec ts;
    clock_gettime(CLOCK_MONOTONIC, &ts);
    return ts.tv_sec * 1e3 + ts.tv_nsec / 1e6;
}

static sy_status session_fail(sy_session *s, sy_status st, const char *fmt, ...)
    __attribute__((format(printf, 3, 4)));

static sy_status session_fail(sy_session *s, sy_status st, const char *fmt, ...)
{
    va_list ap;
    va_start(ap, fmt);
    vsnprintf(s->err, sizeof s->err, fmt, ap);
    va_end(ap);
    return st;
}

void sy_session_options_init(sy_session_options *opts)
{
    memset(opts, 0, sizeof *opts);
    opts->struct_size = sizeof *opts;
    opts->kv_type = SY_DTYPE_F16;
}

void sy_generate_params_init(sy_generate_params *p)
{
    memset(p, 0, sizeof *p);
    p->struct_size = sizeof *p;
    p->n_predict = 128;
    p->top_p = 1.0f;
    p->repeat_penalty = 1.0f;
    p->repeat_last_n = 64;
    p->seed = 0x5eed;
}

void sy_session_destroy(sy_session *s)
{
    if (!s)
        return;
    sy__step_graphs_deinit(&s->graphs);
    sy_executor_destroy(s->exec);
    sy__kv_cache_deinit(&s->kv);
    free(s->hist);
    free(s->tokens);
    free(s->positions);
    free(s->kv_starts);
    free(s->logits);
    sy_planner_destroy(s->planner);
    sy__replan_deinit(&s->replan);
    free(s->devices);
    free(s->policy);
    sy__timing_deinit(&s->timing);
    free(s);
}

/* Reads |opts| (may be NULL) into |o| with the defaults filled in and the
 * KV configuration derived; errors go to the runtime. */
sy_status sy__session_config(const sy_model *m, const sy_session_options *opts,
                             sy_session_options *o, sy_kv_config *out_kv)
{
    sy_session_options_init(o);
    if (opts)
        memcpy(o, opts, opts->struct_size < sizeof *o ? opts->struct_size : sizeof *o);
    const sy_hparams *hp = &m->hp;
    sy_runtime *rt = m->rt;
    if (o->n_ctx == 0)
        o->n_ctx = hp->n_ctx_train < 4096 ? hp->n_ctx_train : 4096;
    if (o->n_ctx < 1 || o->n_ctx > (1u << 24)) {
        sy__runtime_set_error(rt, "session: context of %u tokens is out of range", o->n_ctx);
        return SY_E_INVALID_ARG;
    }
    if (o->n_batch == 0)
        o->n_batch = 512;
    switch (o->context_policy) {
    case SY_CONTEXT_ERROR:
        break;
    case SY_CONTEXT_SHIFT:
        if (o->n_keep >= o->n_ctx) {
            sy__runtime_set_error(rt, "session: shift keeps the first %u tokens, the context "
                                      "holds only %u", o->n_keep, o->n_ctx);
            return SY_E_INVALID_ARG;
        }
        break;
    case SY_CONTEXT_WINDOW:
        if (o->window == 0) {
            sy__runtime_set_error(rt, "session: the window policy needs a window of at least "
                                      "1 token");
            return SY_E_INVALID_ARG;
        }
        break;
    default:
        sy__runtime_set_error(rt, "session: context policy %d is not one of error (0), shift "
                                  "(1), window (2)", (int)o->context_policy);
        return SY_E_INVALID_ARG;
    }
    *out_kv = (sy_kv_config){
        .type = o->kv_type, .n_ctx = o->n_ctx, .n_batch = o->n_batch,
        .window = o->context_policy == SY_CONTEXT_WINDOW ? o->window : 0,
    };
    return SY_OK;
}

sy_status sy_model_query_kv_bytes(const sy_model *m, const sy_session_options *opts,
                                  uint64_t *out_bytes)
{
    if (!out_bytes)
        return SY_E_INVALID_ARG;
    *out_bytes = 0;
    if (!m)
        return SY_E_INVALID_ARG;
    sy_session_options o;
    sy_kv_config kc;
    sy_status st = sy__session_config(m, opts, &o, &kc);
    if (st != SY_OK)
        return st;
    char err[256];
    st = sy__kv_cache_layout(&m->hp, &kc, NULL, out_bytes, NULL, err, sizeof err);
    if (st != SY_OK)
        sy__runtime_set_error(m->rt, "session: %s", err);
    return st;
}

sy_status sy_session_create(sy_model *m, const sy_session_options *opts, sy_session **out_session)
{
    if (!out_session)
        return SY_E_INVALID_ARG;
    *out_session = NULL;
    if (!m)
        return SY_E_INVALID_ARG;
    sy_session_options o;
    sy_kv_config kc;
    const sy_hparams *hp = &m->hp;
    sy_runtime *rt = m->rt;
    sy_status st = sy__session_config(m, opts, &o, &kc);
    if (st != SY_OK)
        return st;
    /* Every named device must exist: a typo is an error, not a silent
     * CPU-only run. */
    for (const char *p = o.devices; p && *p;) {
        size_t n = strcspn(p, ",");
        char name[SY_NAME_MAX];
        snprintf(name, sizeof name, "%.*s", (int)n, p);
        uint32_t idx;
        if (sy_runtime_find_device(rt, name, &idx) != SY_OK) {
            sy__runtime_set_error(rt, "session: no device named '%s' (see 'switchyard devices')",
                                  name);
            return SY_E_NOT_FOUND;
        }
        p += n + (p[n] == ',');
    }
    if (sy_runtime_device_count(rt) == 0) {
        sy__runtime_set_error(rt, "session: no device loaded (is a plugin on "
                                  "SWITCHYARD_PLUGIN_PATH? see 'switchyard devices')");
        return SY_E_NOT_FOUND;
    }
    sy_session *s = calloc(1, sizeof *s);
    if (!s)
        return SY_E_NO_MEMORY;
    s->m = m;
    sy_plan_options_init(&s->plan_opts);
    if ((o.devices && !(s->devices = strdup(o.devices))) ||
        (o.policy && !(s->policy = strdup(o.policy)))) {
        sy_session_destroy(s);
        return SY_E_NO_MEMORY;
    }
    s->plan_opts.devices = s->devices;
    s->plan_opts.policy = s->policy;
    s->plan_opts.pins = o.pins;
    s->plan_opts.n_pins = o.n_pins;
    s->plan_opts.mem = o.mem;
    s->plan_opts.n_mem = o.n_mem;
    st = sy_planner_create(rt, &s->planner);
    if (st == SY_OK)
        st = sy_planner_load_default_profiles(s->planner, NULL);
    if (st == SY_OK)
        st = sy_executor_create(rt, &s->exec);
    if (st == SY_OK)
        st = sy_executor_keep_state(s->exec, true);
    if (st == SY_OK && o.time_nodes)
        st = sy_executor_set_node_timing(s->exec, true);
    s->timing.on = o.time_nodes;
    if (st != SY_OK) {
        sy_session_destroy(s);
        return st;
    }
    /* Before the cache and buffers: budgets refuse or, with fit, shrink.
     * Planned with the session's planner, whose cache then holds the
     * steps' plans. */
    sy_memory_plan_init(&s->memory);
    st = sy__session_plan_memory(m, s->planner, &o, &kc, &s->memory);
    if (st != SY_OK) {
        sy_session_destroy(s);
        return st;
    }
    uint32_t n_ctx = o.n_ctx;
    s->n_ctx = n_ctx;
    s->n_batch = o.n_batch;
    s->ctx_policy = o.context_policy;
    s->n_keep = o.n_keep;
    s->window = o.window;
    st = sy__kv_cache_init(&s->kv, hp, &kc, s->err, sizeof s->err);
    if (st != SY_OK) {
        sy__runtime_set_error(rt, "session: %s", s->err);
        sy_session_destroy(s);
        return st;
    }
    s->tokens = malloc(s->n_batch * sizeof *s->tokens);
    s->positions = malloc(s->n_batch * sizeof *s->positions);
    s->logits = malloc((size_t)hp->n_vocab * sizeof *s->logits);
    /* SWITCHYARD_KV_POSITIONS=params keeps the positions in the params
     * (docs/cli.md): the form every device takes, for comparisons. */
    const char *kvp = getenv("SWITCHYARD_KV_POSITIONS");
    if (kvp && *kvp && strcmp(kvp, "params") != 0)
        sy_runtime_log(rt, SY_LOG_WARN, "session: SWITCHYARD_KV_POSITIONS=%s is not 'params'; "
                       "positions are read at run time where the devices take that", kvp);
    if (!kvp || strcmp(kvp, "params") != 0) {
        s->kv_starts = calloc(hp->n_layer ? hp->n_layer : 1, sizeof *s->kv_starts);
        if (!s->kv_starts) {
            sy__runtime_set_error(rt, "session: out of memory for the KV starts of %u layers",
                                  hp->n_layer);
            sy_session_destroy(s);
            return SY_E_NO_MEMORY;
        }
    }
    if (o.context_policy == SY_CONTEXT_SHIFT)
        s->hist = malloc((size_t)n_ctx * sizeof *s->hist);
    if (!s->tokens || !s->positions || !s->logits ||
        (o.context_policy == SY_CONTEXT_SHIFT && !s->hist)) {
        sy__runtime_set_error(rt, "session: out of memory for the buffers of a %u-token context",
                              n_ctx);
        sy_session_destroy(s);
        return SY_E_NO_MEMORY;
    }
    *out_session = s;
    return SY_OK;
}

const char *sy_session_last_error(const sy_session *s)
{
    return s ? s->err : "";
}

void sy_session_reset(sy_session *s)
{
    if (!s)
        return;
    s->n_past = 0;
    sy__kv_cache_reset(&s->kv);
}

uint32_t sy_session_n_past(const sy_session *s)
{
    return s ? s->n_past : 0;
}

/* The KV cache's slides move rows on the host: the executor keeps each
 * layer's cache on the device that runs its attention (docs/memory.md). */
static sy_status kv_sync(void *user, void *host, uint64_t size)
{
    sy_session *s = user;
    sy_status st = sy_executor_sync_state(s->exec, host, size, true);
    if (st != SY_OK)
        session_fail(s, st, "sliding the KV cache's window: %s",
                     sy_runtime_last_error(s->m->rt));
    return st;
}

/* Runs one graph for tokens[0..n) (n <= the cache's max_step) at the
 * current position.  |tokens| may point into s->hist at the current
 * position (a re-evaluation after a shift): it is copied to itself. */
static sy_status eval_chunk(sy_session *s, const int32_t *tokens, uint32_t n, bool all_logits,
                            float *out_logits)
{
    const sy_hparams *hp = &s->m->hp;
    if (s->n_past > (uint32_t)INT32_MAX - n)
        return session_fail(s, SY_E_LIMIT, "position %u is past the largest the graph takes",
                            s->n_past);
    for (uint32_t i = 0; i < n; i++) {
        if (tokens[i] < 0 || (uint32_t)tokens[i] >= hp->n_vocab)
            return session_fail(s, SY_E_INVALID_ARG, "token %d at position %u is outside the "
                                "vocabulary of %u", tokens[i], s->n_past + i, hp->n_vocab);
        s->tokens[i] = tokens[i];
        s->positions[i] = (int32_t)(s->n_past + i);
    }
    sy_status st = sy__kv_cache_make_room(&s->kv, s->n_past, n, kv_sync, s, s->err,
                                          sizeof s->err);
    if (st != SY_OK)
        return st;
    if (s->kv_starts)
        for (uint32_t il = 0; il < hp->n_layer; il++)
            s->kv_starts[il] = (int32_t)(s->n_past - s->kv.layers[il].pos0);
    sy_step_desc step = {
        .n_tokens = n, .n_past = s->n_past, .all_logits = all_logits,
        .tokens = s->tokens, .positions = s->positions,
        .logits = all_logits ? out_logits : s->logits,
        .kv_type = s->kv.type, .n_ctx = s->n_ctx, .kv_layers = s->kv.layers,
        .kv_starts = s->kv_starts,
    };
    sy__step_graph *e = NULL;
    st = sy__step_graph_get(&s->graphs, s->m, &step, &e, s->err, sizeof s->err);
    if (st == SY_OK && s->kv_starts && !s->kv_probed) {
        /* Once: a device that takes the positions only in the params
         * would otherwise lose the KV writes and attentions. */
        s->kv_probed = true;
        if (!sy__step_graph_run_time_kv_ok(e, s->m->rt, s->devices)) {
            sy_runtime_log(s->m->rt, SY_LOG_INFO, "session: a device takes KV positions only "
                           "in the params: every step graph keeps them there");
            sy__step_graph_drop(e);
            free(s->kv_starts);
            s->kv_starts = NULL;
            step.kv_starts = NULL;
            st = sy__step_graph_get(&s->graphs, s->m, &step, &e, s->err, sizeof s->err);
        }
    }
    if (st != SY_OK)
        return st;
    /* The plan the kept graph ran last time serves while its digest (shape
     * class) is the same and no failure re-planned since.  In a new class,
     * the plan made for it is looked at: where it runs the step exactly as
     * the kept one does (a decode's placement rarely moves from one power
     * of two of the context to the next), the kept one goes on, and with
     * it the executor's replay of the step (a new plan object makes a full
     * run: every tensor bound again, the devices' kept work redone). */
    uint64_t sig[2];
    sy__graph_signature(e->g, sig);
    if (e->plan && e->plan_failures == s->replan.n &&
        (sig[0] != e->plan_sig[0] || sig[1] != e->plan_sig[1])) {
        sy_plan *fresh = NULL;
        if (sy_planner_plan(s->planner, e->g, &s->plan_opts, &fresh) == SY_OK &&
            sy__plan_same_run(e->plan, fresh)) {
            sy_plan_release(fresh);
        } else {
            sy_plan_release(e->plan);
            e->plan = fresh; /* NULL after a failure: the step plans again and says why */
        }
    } else if (e->plan && e->plan_failures != s->replan.n) {
        sy_plan_release(e->plan);
        e->plan = NULL;
    }
    st = sy__replan_run_step(&s->replan, s->m->rt, s->planner, s->exec, &s->plan_opts, e->g,
                             s->n_past, &e->plan, s->err, sizeof s->err);
    e->plan_failures = s->replan.n;
    e->plan_sig[0] = sig[0];
    e->plan_sig[1] = sig[1];
    if (st == SY_OK && s->timing.on && sy__timing_add(&s->timing, e->g, s->exec) != SY_OK)
        sy_runtime_log(s->m->rt, SY_LOG_WARN, "session: out of memory totalling node times");
    if (st != SY_OK)
        sy__step_graph_drop(e);
    if (st == SY_OK) {
        if (s->hist)
            memmove(s->hist + s->n_past, s->tokens, n * sizeof *s->hist);
        s->n_past += n;
        if (!all_logits && out_logits)
            memcpy(out_logits, s->logits, (size_t)hp->n_vocab * sizeof *out_logits);
    }
    return st;
}

/* Evaluates tokens[0..n) in steps of at most the cache's max_step. */
static sy_status eval_steps(sy_session *s, const int32_t *tokens, uint32_t n, bool all_logits,
                            float *out_logits)
{
    size_t nv = s->m->hp.n_vocab;
    for (uint32_t done = 0; done < n;) {
        uint32_t c = n - done < s->kv.max_step ? n - done : s->kv.max_step;
        bool last = done + c == n;
        float *dst = all_logits && out_logits ? out_logits + done * nv : (last ? out_logits : NULL);
        sy_status st = eval_chunk(s, tokens + done, c, all_logits && out_logits, dst);
        if (st != SY_OK)
            return st;
        done += c;
    }
    return SY_OK;
}

/* SY_CONTEXT_SHIFT: makes room for |n| new tokens by dropping the older
 * half (at least what |n| needs) of the tokens after the first n_keep and
 * re-evaluating the rest at their new positions (see the top of the file). */
static sy_status session_shift(sy_session *s, uint32_t n)
{
    const uint32_t keep = s->n_keep < s->n_past ? s->n_keep : s->n_past;
    if ((uint64_t)keep + n > s->n_ctx)
        return session_fail(s, SY_E_LIMIT,
                            "context full: %u new tokens do not fit beside the %u kept ones in "
                            "the context of %u, even after a shift (raise --ctx)",
                            n, keep, s->n_ctx);
    const uint32_t movable = s->n_past - keep;
    uint32_t drop = movable / 2;
    const uint32_t need = s->n_past + n - s->n_ctx;
    if (drop < need)
        drop = need;
    const uint32_t tail = movable - drop;
    memmove(s->hist + keep, s->hist + keep + drop, (size_t)tail * sizeof *s->hist);
    uint32_t from = keep;
    if (!sy__kv_cache_can_resume(&s->kv, keep)) {
        /* A windowed layer has slid past the kept tokens: start over. */
        from = 0;
        sy__kv_cache_reset(&s->kv);
    }
    sy_runtime_log(s->m->rt, SY_LOG_DEBUG,
                   "context shift: %u tokens dropped after the first %u, %u re-evaluated from "
                   "position %u",
                   drop, keep, keep + tail - from, from);
    s->n_past = from;
    if (keep + tail == from)
        return SY_OK;
    return eval_steps(s, s->hist + from, keep + tail - from, false, NULL);
}

sy_status sy_session_eval(sy_session *s, const int32_t *tokens, uint32_t n, bool all_logits,
                          float *out_logits)
{
    if (!s || (!tokens && n))
        return SY_E_INVALID_ARG;
    if (n == 0)
        return session_fail(s, SY_E_INVALID_ARG, "eval: no tokens");
    if (s->ctx_policy != SY_CONTEXT_WINDOW && (uint64_t)s->n_past + n > s->n_ctx) {
        if (s->ctx_policy == SY_CONTEXT_ERROR)
            return session_fail(s, SY_E_LIMIT,
                                "context full: %u tokens in context plus %u new exceed the "
                                "context size of %u (raise --ctx, or choose the shift or window "
                                "context policy)",
                                s->n_past, n, s->n_ctx);
        sy_status st = session_shift(s, n);
        if (st != SY_OK)
            return st;
    }
    return eval_steps(s, tokens, n, all_logits, out_logits);
}

static uint64_t peak_rss(void)
{
    struct rusage ru;
    if (getrusage(RUSAGE_SELF, &ru) != 0)
        return 0;
    return (uint64_t)ru.ru_maxrss * 1024;
}

sy_status sy_session_generate(sy_session *s, const int32_t *prompt, uint32_t n_prompt,
                              const sy_generate_params *params, sy_token_fn on_token, void *user)
{
    if (!s || !prompt || n_prompt == 0)
        return s ? session_fail(s, SY_E_INVALID_ARG, "generate: empty prompt") : SY_E_INVALID_ARG;
    sy_generate_params p;
    sy_generate_params_init(&p);
    if (params)
        memcpy(&p, params, params->struct_size < sizeof p ? params->struct_size : sizeof p);
    /* Room the prompt may take, leaving one position to generate into. */
    uint32_t room = UINT32_MAX;
    if (s->ctx_policy == SY_CONTEXT_ERROR)
        room = s->n_ctx - s->n_past;
    else if (s->ctx_policy == SY_CONTEXT_SHIFT)
        room = s->n_ctx - (s->n_keep < s->n_past ? s->n_keep : s->n_past);
    if (n_prompt >= room) {
        if (!p.truncate_prompt || room <= 1)
            return session_fail(s, SY_E_LIMIT,
                                "prompt of %u tokens does not fit the context of %u (%u in use); "
                                "raise --ctx or truncate the prompt",
                                n_prompt, s->n_ctx, s->n_past);
        uint32_t keep = room - 1;
        sy_runtime_log(s->m->rt, SY_LOG_WARN,
                       "prompt of %u tokens truncated to its last %u to fit the context of %u",
                       n_prompt, keep, s->n_ctx);
        prompt += n_prompt - keep;
        n_prompt = keep;
    }
    sy_sampler_params sp;
    sy_sampler_params_init(&sp);
    sp.temperature = p.temperature;
    sp.top_k = p.top_k;
    sp.top_p = p.top_p;
    sp.min_p = p.min_p;
    sp.repeat_penalty = p.repeat_penalty;
    sp.repeat_last_n = p.repeat_last_n;
    sp.seed = p.seed;
    sy_sampler *smp = NULL;
    sy_sampler_error serr;
    sy_status st = sy_sampler_create(&sp, s->m->hp.n_vocab, &smp, &serr);
    if (st != SY_OK)
        return session_fail(s, st, "sampler: %s", serr.msg);
    for (uint32_t i = 0; i < n_prompt; i++)
        sy_sampler_accept(smp, prompt[i]);

    sy_metrics *mt = &s->metrics;
    memset(mt, 0, sizeof *mt);
    mt->load_ms = s->m->load_ms;
    mt->kv_bytes = s->kv.bytes;
    double t0 = now_ms();
    st = sy_session_eval(s, prompt, n_prompt, false, NULL);
    if (st != SY_OK)
        goto out_sampler;
    double t1 = now_ms();
    mt->prefill_ms = t1 - t0;
    mt->prefill_tokens = n_prompt;
    uint32_t limit = p.n_predict ? p.n_predict
                   : s->ctx_policy == SY_CONTEXT_ERROR ? s->n_ctx : UINT32_MAX;
    char text[256];
    for (uint32_t i = 0; i < limit; i++) {
        int32_t tok = 0;
        st = sy_sampler_sample(smp, s->logits, &tok);
        if (st != SY_OK) {
            session_fail(s, st, "sampling: %s", sy_sampler_last_error(smp));
            break;
        }
        if (i == 0)
            mt->ttft_ms = now_ms() - t0;
        sy_sampler_accept(smp, tok);
        if (sy_model_is_end_token(s->m, tok))
            break;
        size_t len = 0;
        if (sy_model_detokenize(s->m, &tok, 1, text, sizeof text, &len) != SY_OK)
            len = 0;
        if (on_token && !on_token(user, tok, text, len))
            break;
        if (i + 1 == limit)
            break;
        if (s->ctx_policy == SY_CONTEXT_ERROR && s->n_past + 1 > s->n_ctx) {
            if (p.n_predict)
                st = session_fail(s, SY_E_LIMIT,
                                  "context full after %u generated tokens: the context of %u "
                                  "tokens holds no more (raise --ctx, or choose the shift or "
                                  "window context policy)",
                                  i + 1, s->n_ctx);
            break;
        }
        double td = now_ms();
        st = sy_session_eval(s, &tok, 1, false, NULL);
        mt->decode_ms += now_ms() - td;
        if (st != SY_OK)
            break;
        mt->decode_tokens++;
    }
    mt->prefill_tok_s = mt->prefill_ms > 0 ? mt->prefill_tokens * 1e3 / mt->prefill_ms : 0;
    mt->decode_tok_s = mt->decode_ms > 0 ? mt->decode_tokens * 1e3 / mt->decode_ms : 0;
out_sampler:
    mt->peak_rss_bytes = peak_rss();
    sy_sampler_destroy(smp);
    return st;
}

void sy_step_stats_init(sy_step_stats *stats)
{
    if (stats) {
        memset(stats, 0, sizeof *stats);
        stats->struct_size = sizeof *stats;
    }
}

sy_status sy_session_query_step_stats(const sy_session *s, sy_step_stats *out_stats)
{
    if (!s)
        return SY_E_INVALID_ARG;
    return sy_executor_query_stats(s->exec, out_stats);
}

sy_status sy_session_query_metrics(const sy_session *s, sy_metrics *out_metrics)
{
    if (!s || !out_metrics)
        return SY_E_INVALID_ARG;
    *out_metrics = s->metrics;
    return SY_OK;
}

sy_status sy_session_query_memory(const sy_session *s, sy_memory_plan *out_plan,
                                  sy_memory_usage *out_usage)
{
    if (!s || (out_plan && out_plan->struct_size < sizeof *out_plan) ||
        (out_usage && out_usage->struct_size < sizeof *out_usage))
        return SY_E_INVALID_ARG;
    if (out_plan)
        *out_plan = s->memory;
    return out_usage ? sy__session_usage(s->m->rt, s->exec, out_usage) : SY_OK;
}

uint32_t sy_session_node_timing_count(const sy_session *s)
{
    return s ? s->timing.n : 0;
}

sy_status sy_session_query_node_timing(const sy_session *s, uint32_t i,
                                       sy_node_timing *out_timing)
{
    if (!out_timing)
        return SY_E_INVALID_ARG;
    memset(out_timing, 0, sizeof *out_timing);
    if (!s)
        return SY_E_INVALID_ARG;
    return sy__timing_query(&s->timing, s->m->rt, i, out_timing);
}

uint32_t sy_session_failure_count(const sy_session *s)
{
    return s ? s->replan.n : 0;
}

sy_status sy_session_query_failure(const sy_session *s, uint32_t i,
                                   sy_session_failure *out_failure)
{
    if (!out_failure)
        return SY_E_INVALID_ARG;
    memset(out_failure, 0, sizeof *out_failure);
    if (!s)
        return SY_E_INVALID_ARG;
    return sy__replan_query(&s->replan, i, out_failure);
}
