/* Auto-configuration from the probe: thread count, context size and KV
 * precision.  The rules are documented in docs/probe.md; keep both in step. */
#include <string.h>

#include "probe.h"

#define GIB (1024.0 * 1024.0 * 1024.0)

/* The context never grows past this by default: longer contexts cost KV
 * memory and attention time that most prompts do not use. */
#define AUTO_CTX_CAP 4096u
#define AUTO_CTX_MIN 256u
/* Fewest threads the bandwidth rule trims to. */
#define AUTO_MIN_TRIMMED 4u

/* Threads: every usable physical core (prefill is compute-bound), trimmed
 * to the smallest count that already reaches 90% of the best measured read
 * bandwidth when decode is bound by that bandwidth (the weights do not fit
 * in the last-level cache, so every token streams them from memory) and
 * the trimmed count still keeps at least half the cores and at least
 * AUTO_MIN_TRIMMED threads (cores past bandwidth saturation only contend
 * on decode, but a small machine needs all of them for prefill). */
static void auto_threads(const sy_probe *p, const sy_autoconfig_model *m, sy_autoconfig *c)
{
    uint32_t cores = p->cores_allowed ? p->cores_allowed : (p->cores ? p->cores : 1);
    c->n_threads = cores;
    snprintf(c->why_threads, sizeof c->why_threads, "%u physical core%s usable (SMT siblings unused)",
             cores, cores == 1 ? "" : "s");
    double best = sy_probe_host_read_bps(p);
    if (best <= 0 || p->n_host_bw < 2)
        return;
    if (p->l3_bytes && m->weight_bytes && m->weight_bytes <= p->l3_bytes) {
        snprintf(c->why_threads + strlen(c->why_threads),
                 sizeof c->why_threads - strlen(c->why_threads),
                 "; the weights fit in the %.0f MiB last-level cache",
                 (double)p->l3_bytes / (1024.0 * 1024.0));
        return;
    }
    for (uint32_t i = 0; i < p->n_host_bw; i++) {
        if (p->host_bw[i].read_bps >= 0.9 * best) {
            uint32_t t = p->host_bw[i].threads;
            if (t < cores && t * 2 >= cores && t >= AUTO_MIN_TRIMMED) {
                c->n_threads = t;
                snprintf(c->why_threads, sizeof c->why_threads,
                         "%u of %u cores already reach %.0f%% of the best read bandwidth "
                         "(%.1f GB/s), which bounds decode",
                         t, cores, 100.0 * p->host_bw[i].read_bps / best, best / 1e9);
            }
            break;
        }
    }
}

sy_status sy_probe_autoconfig(const sy_probe *p, const sy_autoconfig_model *m,
                              sy_autoconfig *out_config)
{
    if (!p || !m || !out_config)
        return SY_E_INVALID_ARG;
    sy_autoconfig *c = out_config;
    memset(c, 0, sizeof *c);
    auto_threads(p, m, c);

    /* Memory for the KV cache: what is available now minus the weights
     * (mapped, so they become resident), minus a reserve of 1/8 of the
     * remainder and at least 512 MiB for activations and everything else. */
    double avail = (double)(p->memory_available ? p->memory_available : p->memory_total);
    double left = avail - (double)m->weight_bytes;
    double reserve = left / 8 > 512.0 * 1024 * 1024 ? left / 8 : 512.0 * 1024 * 1024;
    double budget = left - reserve;
    uint32_t train = m->n_ctx_train ? m->n_ctx_train : AUTO_CTX_CAP;
    uint32_t want = train < AUTO_CTX_CAP ? train : AUTO_CTX_CAP;
    double per_tok16 = 2.0 * m->n_layer * m->n_head_kv * m->head_dim * 2.0; /* K and V, f16 */
    uint32_t ctx = want;
    if (per_tok16 > 0) {
        double fit = budget > 0 ? budget / per_tok16 : 0;
        while (ctx > AUTO_CTX_MIN && (double)ctx > fit)
            ctx /= 2;
    }
    if (ctx < AUTO_CTX_MIN)
        ctx = want < AUTO_CTX_MIN ? want : AUTO_CTX_MIN;
    c->n_ctx = ctx;
    if (ctx < want)
        snprintf(c->why_ctx, sizeof c->why_ctx,
                 "%u tokens: %.2f GiB free after weights and reserve, f16 KV needs %.1f KiB per "
                 "token (wanted %u)",
                 ctx, budget / GIB, per_tok16 / 1024, want);
    else
        snprintf(c->why_ctx, sizeof c->why_ctx,
                 "%u tokens: min(trained %u, default cap %u) fits (%.2f GiB free for KV)", ctx,
                 train, AUTO_CTX_CAP, budget / GIB);

    /* KV precision: f16 halves KV memory and the bytes attention reads per
     * decode step.  f32 (exact, no conversion) only when it costs little:
     * the whole f32 cache fits in an eighth of the budget and reading it
     * takes under a tenth of reading the weights at the measured bandwidth. */
    c->kv_type = SY_DTYPE_F16;
    double kv32 = 2.0 * per_tok16 * ctx;
    double weights = (double)m->weight_bytes;
    if (per_tok16 > 0 && budget > 0 && kv32 <= budget / 8 && weights > 0 && kv32 < 0.1 * weights) {
        c->kv_type = SY_DTYPE_F32;
        snprintf(c->why_kv, sizeof c->why_kv,
                 "f32: the full f32 cache (%.1f MiB) is under 1/8 of free memory and under 10%% "
                 "of the weight bytes read per token",
                 kv32 / (1024.0 * 1024.0));
    } else {
        double bw = sy_probe_host_read_bps(p);
        snprintf(c->why_kv, sizeof c->why_kv,
                 "f16: f32 cache would be %.1f MiB (%.2f ms per token at %.1f GB/s); f16 halves it",
                 kv32 / (1024.0 * 1024.0), bw > 0 ? kv32 / bw * 1e3 : 0.0, bw / 1e9);
    }
    return SY_OK;
}
