/* Sessions: one conversation on a model — its KV cache, its position, and
 * the generate loop with metrics. */
#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/resource.h>
#include <time.h>

#include "model_internal.h"
#include "runtime_internal.h"
#include "sampler.h"

struct sy_session {
    sy_model *m;
    sy_planner *planner;   /* plans every step; its cache makes repeats cheap */
    sy_plan_options plan_opts;
    char *devices, *policy;
    uint32_t n_ctx, n_batch, n_past;
    sy_dtype kv_type;
    void **kv_k, **kv_v; /* per layer host buffers */
    uint64_t kv_bytes;
    int32_t *tokens, *positions; /* n_batch scratch */
    float *logits;               /* n_vocab floats: last position */
    sy_metrics metrics;
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
    for (uint32_t il = 0; s->kv_k && il < s->m->hp.n_layer; il++) {
        free(s->kv_k[il]);
        free(s->kv_v[il]);
    }
    free(s->kv_k);
    free(s->kv_v);
    free(s->tokens);
    free(s->positions);
    free(s->logits);
    sy_planner_destroy(s->planner);
    free(s->devices);
    free(s->policy);
    free(s);
}

sy_status sy_session_create(sy_model *m, const sy_session_options *opts, sy_session **out_session)
{
    if (!out_session)
        return SY_E_INVALID_ARG;
    *out_session = NULL;
    if (!m)
        return SY_E_INVALID_ARG;
    sy_session_options o;
    sy_session_options_init(&o);
    if (opts)
        memcpy(&o, opts, opts->struct_size < sizeof o ? opts->struct_size : sizeof o);
    const sy_hparams *hp = &m->hp;
    sy_runtime *rt = m->rt;
    if (o.kv_type != SY_DTYPE_F16 && o.kv_type != SY_DTYPE_F32) {
        sy__runtime_set_error(rt, "session: KV type %s is not supported (f16, f32)",
                              sy_dtype_name(o.kv_type));
        return SY_E_DTYPE;
    }
    uint32_t n_ctx = o.n_ctx ? o.n_ctx : (hp->n_ctx_train < 4096 ? hp->n_ctx_train : 4096);
    if (n_ctx < 1 || n_ctx > (1u << 24)) {
        sy__runtime_set_error(rt, "session: context of %u tokens is out of range", n_ctx);
        return SY_E_INVALID_ARG;
    }
    sy_status st;
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
    st = sy_planner_create(rt, &s->planner);
    if (st != SY_OK) {
        sy_session_destroy(s);
        return st;
    }
    s->n_ctx = n_ctx;
    s->n_batch = o.n_batch ? o.n_batch : 512;
    s->kv_type = o.kv_type;
    uint64_t per = (uint64_t)hp->head_dim * hp->n_head_kv * n_ctx * sy_dtype_type_size(o.kv_type);
    s->kv_k = calloc(hp->n_layer, sizeof *s->kv_k);
    s->kv_v = calloc(hp->n_layer, sizeof *s->kv_v);
    s->tokens = malloc(s->n_batch * sizeof *s->tokens);
    s->positions = malloc(s->n_batch * sizeof *s->positions);
    s->logits = malloc((size_t)hp->n_vocab * sizeof *s->logits);
    if (!s->kv_k || !s->kv_v || !s->tokens || !s->positions || !s->logits)
        goto out_nomem;
    for (uint32_t il = 0; il < hp->n_layer; il++) {
        /* calloc: untouched pages stay unbacked until the context reaches them. */
        s->kv_k[il] = calloc(1, per);
        s->kv_v[il] = calloc(1, per);
        if (!s->kv_k[il] || !s->kv_v[il])
            goto out_nomem;
    }
    s->kv_bytes = per * 2 * hp->n_layer;
    *out_session = s;
    return SY_OK;
out_nomem:
    sy__runtime_set_error(rt, "session: out of memory for a %u-token KV cache (%.1f MiB)", n_ctx,
                          (double)per * 2 * hp->n_layer / (1 << 20));
    sy_session_destroy(s);
    return SY_E_NO_MEMORY;
}

const char *sy_session_last_error(const sy_session *s)
{
    return s ? s->err : "";
}

void sy_session_reset(sy_session *s)
{
    if (s)
        s->n_past = 0;
}

uint32_t sy_session_n_past(const sy_session *s)
{
    return s ? s->n_past : 0;
}

/* Runs one graph for tokens[0..n) (n <= n_batch) at the current position. */
static sy_status eval_chunk(sy_session *s, const int32_t *tokens, uint32_t n, bool all_logits,
                            float *out_logits)
{
    const sy_hparams *hp = &s->m->hp;
    for (uint32_t i = 0; i < n; i++) {
        if (tokens[i] < 0 || (uint32_t)tokens[i] >= hp->n_vocab)
            return session_fail(s, SY_E_INVALID_ARG, "token %d at position %u is outside the "
                                "vocabulary of %u", tokens[i], s->n_past + i, hp->n_vocab);
        s->tokens[i] = tokens[i];
        s->positions[i] = (int32_t)(s->n_past + i);
    }
    sy_step_desc step = {
        .n_tokens = n, .n_past = s->n_past, .all_logits = all_logits,
        .tokens = s->tokens, .positions = s->positions,
        .logits = all_logits ? out_logits : s->logits,
        .kv_k = s->kv_k, .kv_v = s->kv_v, .kv_type = s->kv_type, .n_ctx = s->n_ctx,
    };
    sy_graph *g = NULL;
    sy_status st = sy__model_build_graph(s->m, &step, &g, s->err, sizeof s->err);
    if (st != SY_OK)
        return st;
    sy_plan *plan = NULL;
    st = sy_planner_plan(s->planner, g, &s->plan_opts, &plan);
    if (st != SY_OK) {
        session_fail(s, st, "planning step at position %u: %s", s->n_past,
                     sy_planner_last_error(s->planner));
        sy_graph_destroy(g);
        return st;
    }
    st = sy_runtime_execute_plan(s->m->rt, g, plan);
    if (st != SY_OK)
        session_fail(s, st, "executing step at position %u: %s", s->n_past,
                     sy_runtime_last_error(s->m->rt));
    sy_plan_release(plan);
    sy_graph_destroy(g);
    if (st == SY_OK) {
        s->n_past += n;
        if (!all_logits && out_logits)
            memcpy(out_logits, s->logits, (size_t)hp->n_vocab * sizeof *out_logits);
    }
    return st;
}

sy_status sy_session_eval(sy_session *s, const int32_t *tokens, uint32_t n, bool all_logits,
                          float *out_logits)
{
    if (!s || (!tokens && n))
        return SY_E_INVALID_ARG;
    if (n == 0)
        return session_fail(s, SY_E_INVALID_ARG, "eval: no tokens");
    if ((uint64_t)s->n_past + n > s->n_ctx)
        return session_fail(s, SY_E_LIMIT,
                            "context full: %u tokens in context plus %u new exceed the context "
                            "size of %u (raise --ctx)",
                            s->n_past, n, s->n_ctx);
    size_t nv = s->m->hp.n_vocab;
    for (uint32_t done = 0; done < n;) {
        uint32_t c = n - done < s->n_batch ? n - done : s->n_batch;
        bool last = done + c == n;
        float *dst = all_logits && out_logits ? out_logits + done * nv : (last ? out_logits : NULL);
        sy_status st = eval_chunk(s, tokens + done, c, all_logits && out_logits, dst);
        if (st != SY_OK)
            return st;
        done += c;
    }
    return SY_OK;
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
    if ((uint64_t)s->n_past + n_prompt >= s->n_ctx) {
        if (!p.truncate_prompt || s->n_past + 1 >= s->n_ctx)
            return session_fail(s, SY_E_LIMIT,
                                "prompt of %u tokens does not fit the context of %u (%u in use); "
                                "raise --ctx or truncate the prompt",
                                n_prompt, s->n_ctx, s->n_past);
        uint32_t keep = s->n_ctx - s->n_past - 1;
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
    mt->kv_bytes = s->kv_bytes;
    double t0 = now_ms();
    st = sy_session_eval(s, prompt, n_prompt, false, NULL);
    if (st != SY_OK)
        goto out_sampler;
    double t1 = now_ms();
    mt->prefill_ms = t1 - t0;
    mt->prefill_tokens = n_prompt;
    uint32_t limit = p.n_predict ? p.n_predict : s->n_ctx;
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
        if (i + 1 == limit || s->n_past + 1 > s->n_ctx)
            break;
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

sy_status sy_session_query_metrics(const sy_session *s, sy_metrics *out_metrics)
{
    if (!s || !out_metrics)
        return SY_E_INVALID_ARG;
    *out_metrics = s->metrics;
    return SY_OK;
}
