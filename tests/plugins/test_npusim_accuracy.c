/* Accuracy of the NPU path on the real SmolLM2-135M (issue 6, item 2):
 * every step of the model planned over cpu and npusim with the matmuls
 * pinned to npusim (W8A8) and everything else on the cpu, against the cpu
 * alone (whose quantised-weight matmuls take activations as 16-bit
 * integers, its default).  Measured and logged:
 *   - top-1 agreement over a 256-token greedy run: the cpu generates 256
 *     tokens greedily; the NPU path, fed the same tokens (teacher forcing),
 *     must pick the same token at each position;
 *   - the first position where an NPU greedy run of its own departs;
 *   - perplexity of two fixed texts (prose; markdown with code) with the
 *     default activations (int8 per row, asymmetric: a scale and a zero
 *     point per row), with per-block scales, and with symmetric per-row
 *     int8 (one scale, no zero point), the scheme that misses the 3%.
 * SmolLM2's weights are Q4_1 (its output head Q8_0), so the capability
 * files here add q4_1 to the default q8_0/q4_0 and change nothing else
 * but the setting measured.  The numbers are recorded in
 * docs/plugin-guide.md. */
#include <criterion/criterion.h>
#include <criterion/logging.h>
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include "model_internal.h"
#include "test_npusim_util.h"

#define ACC_CTX 640
#define ACC_GREEDY 256

static const char acc_prompt[] = "The history of railways began in";

static const char acc_text[] =
    "A railway yard is a complex series of railroad tracks for storing, sorting, or loading and "
    "unloading railroad cars and locomotives. Yards have many tracks in parallel for keeping "
    "rolling stock or unused locomotives stored off the main line, so that they do not obstruct "
    "the flow of traffic. Cars are moved around by specially designed yard switchers, a type of "
    "locomotive. Cars in a yard may be sorted by numerous categories, including railway company, "
    "loaded or unloaded, destination, car type, or whether they need repairs. Yards are normally "
    "built where there is a need to store cars while they are not being loaded or unloaded, or "
    "are waiting to be assembled into trains. Large yards may have a tower to control operations. "
    "Many yards are located at strategic points on a main line. Main line yards are often "
    "composed of an up yard and a down yard, linked to the associated direction of travel. There "
    "are different types of yards, and different parts within a yard, depending on how they are "
    "built. In a flat yard, cars are pushed by a locomotive and coasted to their places; in a hump "
    "yard, gravity does the work once the cars are pushed over a small hill.";

/* Technical prose with code, where activations have more outliers. */
static const char acc_code[] =
    "## Buffers\n\nA plugin allocates device memory with `buffer_alloc` and frees it with "
    "`buffer_free`. The core never touches the bytes directly unless `buffer_host_ptr` returns "
    "a mapping:\n\n```c\nstatic sy_status acme_buffer_alloc(void *state, uint32_t dev, "
    "uint64_t size,\n                                   void **out_buffer)\n{\n    acme_state *s = "
    "state;\n    *out_buffer = NULL;\n    if (dev >= s->n_devices)\n        return "
    "SY_E_INVALID_ARG;\n    acme_block *b = acme_arena_take(&s->arena, size, 256);\n    if (!b)\n"
    "        return SY_E_NO_MEMORY;\n    *out_buffer = b;\n    return SY_OK;\n}\n```\n\n"
    "| entry | required | notes |\n| --- | --- | --- |\n| `copy_in` | yes | host to device, at "
    "a byte offset |\n| `copy_out` | yes | device to host |\n| `copy_device` | no | within one "
    "plugin |\n\nRun `switchyard plugin-check build/plugins/acme/acme.so --device 0` after every "
    "change; a failing check prints its name, the seed (0x5eed1234) and the first element that "
    "differs, e.g. `element 17: got 0.2841, want 0.2876, tolerance 2.5e-05`. Set "
    "`SWITCHYARD_LOG=debug` to see what the plugin logged, and `--json` for CI.\n\n"
    "```meson\nshared_module('acme', files('acme_plugin.c', 'acme_buffer.c'),\n  name_prefix : "
    "'',\n  gnu_symbol_visibility : 'hidden',\n  install_dir : get_option('libdir') / "
    "'switchyard' / 'plugins')\n```\n";

typedef struct acc_path {
    bool npu;            /* planned over cpu + npusim, matmuls pinned to npusim */
    void **kv;           /* 2 * n_layer caches */
    uint32_t n_past;
} acc_path;

typedef struct acc_ctx {
    nt_rt t;
    sy_model *m;
    sy_planner *pl;
    sy_plan_options o;
    const char *pins[2];
    uint32_t n_vocab, n_layer;
    size_t kv_bytes;
    uint32_t npu_matmuls; /* matmul nodes the last plan put on npusim */
} acc_ctx;

static bool acc_open(acc_ctx *a, const char *json)
{
    const char *dir = getenv("SY_MODELS_DIR");
    char path[1024];
    snprintf(path, sizeof path, "%s/SmolLM2-135M-Instruct.Q4_1.gguf", dir ? dir : "models");
    if (access(path, R_OK) != 0) {
        cr_assert(getenv("SY_REQUIRE_MODELS") == NULL, "%s is missing (tools/fetch-models.sh)",
                  path);
        return false;
    }
    memset(a, 0, sizeof *a);
    nt_open(&a->t, json, true);
    cr_assert_neq(a->t.npu, UINT32_MAX, "npusim refused; log:\n%s", a->t.log);
    cr_assert_eq(sy_model_open(a->t.rt, path, &a->m), SY_OK, "%s", sy_runtime_last_error(a->t.rt));
    cr_assert_eq(sy_planner_create(a->t.rt, &a->pl), SY_OK);
    sy_plan_options_init(&a->o);
    a->o.devices = "cpu,npusim";
    /* The matmuls npusim supports go there, everything else stays on the
     * cpu whatever the cost model says. */
    a->pins[0] = "matmul=npusim";
    a->pins[1] = "*=cpu";
    a->o.pins = a->pins;
    a->o.n_pins = 2;
    const sy_hparams *hp = &a->m->hp;
    a->n_vocab = hp->n_vocab;
    a->n_layer = hp->n_layer;
    a->kv_bytes = (size_t)hp->head_dim * hp->n_head_kv * ACC_CTX * sizeof(uint16_t);
    return true;
}

static void acc_close(acc_ctx *a)
{
    sy_planner_destroy(a->pl);
    sy_model_close(a->m);
    nt_close(&a->t);
}

static void acc_path_init(acc_ctx *a, acc_path *p, bool npu)
{
    p->npu = npu;
    p->n_past = 0;
    p->kv = calloc(2 * a->n_layer, sizeof *p->kv);
    cr_assert(p->kv != NULL);
    for (uint32_t i = 0; i < 2 * a->n_layer; i++) {
        p->kv[i] = calloc(1, a->kv_bytes);
        cr_assert(p->kv[i] != NULL);
    }
}

static void acc_path_free(acc_ctx *a, acc_path *p)
{
    for (uint32_t i = 0; i < 2 * a->n_layer; i++)
        free(p->kv[i]);
    free(p->kv);
}

/* Appends |n| tokens to |p| and writes the logits (every position when
 * |all|, else the last) to |logits|. */
static void acc_step(acc_ctx *a, acc_path *p, const int32_t *tokens, uint32_t n, bool all,
                     float *logits)
{
    cr_assert(p->n_past + n <= ACC_CTX);
    int32_t *pos = malloc(n * sizeof *pos);
    cr_assert(pos != NULL);
    for (uint32_t i = 0; i < n; i++)
        pos[i] = (int32_t)(p->n_past + i);
    sy_step_desc step = {
        .n_tokens = n,
        .n_past = p->n_past,
        .all_logits = all,
        .tokens = tokens,
        .positions = pos,
        .logits = logits,
        .kv_k = p->kv,
        .kv_v = p->kv + a->n_layer,
        .kv_type = SY_DTYPE_F16,
        .n_ctx = ACC_CTX,
    };
    char err[256];
    sy_graph *g = NULL;
    cr_assert_eq(sy__model_build_graph(a->m, &step, &g, err, sizeof err), SY_OK, "%s", err);
    sy_status st;
    if (p->npu) {
        sy_plan *plan = NULL;
        st = sy_planner_plan(a->pl, g, &a->o, &plan);
        cr_assert_eq(st, SY_OK, "plan: %s", sy_planner_last_error(a->pl));
        a->npu_matmuls = 0;
        for (uint32_t i = 0; i < sy_graph_node_count(g); i++) {
            sy_plan_node_info info;
            if (sy_graph_node(g, i)->op == SY_OP_MATMUL &&
                sy_plan_query_node(plan, i, &info) == SY_OK && info.device == a->t.npu)
                a->npu_matmuls++;
        }
        st = sy_runtime_execute_plan(a->t.rt, g, plan);
        sy_plan_release(plan);
    } else {
        st = sy_runtime_execute_on(a->t.rt, g, a->t.cpu);
    }
    cr_assert_eq(st, SY_OK, "%s step at %u: %s", p->npu ? "npusim" : "cpu", p->n_past,
                 sy_runtime_last_error(a->t.rt));
    sy_graph_destroy(g);
    free(pos);
    p->n_past += n;
}

static int32_t acc_argmax(const float *v, uint32_t n)
{
    uint32_t best = 0;
    for (uint32_t i = 1; i < n; i++)
        if (v[i] > v[best])
            best = i;
    return (int32_t)best;
}

static uint32_t acc_tokenize(acc_ctx *a, const char *text, int32_t *ids, uint32_t cap)
{
    uint32_t n = 0;
    cr_assert_eq(sy_model_tokenize(a->m, text, strlen(text), true, false, ids, cap, &n), SY_OK);
    return n;
}

/* Greedy generation of |n| tokens after |prompt| on |p|. */
static void acc_greedy(acc_ctx *a, acc_path *p, const int32_t *prompt, uint32_t n_prompt,
                       int32_t *out, uint32_t n, float *logits)
{
    acc_step(a, p, prompt, n_prompt, false, logits);
    for (uint32_t i = 0; i < n; i++) {
        out[i] = acc_argmax(logits, a->n_vocab);
        if (i + 1 < n)
            acc_step(a, p, &out[i], 1, false, logits);
    }
}

/* Perplexity of |ids| on |p| (one prefill, every position's logits). */
static double acc_perplexity(acc_ctx *a, acc_path *p, const int32_t *ids, uint32_t n)
{
    float *logits = malloc((size_t)n * a->n_vocab * sizeof *logits);
    cr_assert(logits != NULL);
    acc_step(a, p, ids, n, true, logits);
    double nll = 0;
    for (uint32_t i = 0; i + 1 < n; i++) {
        const float *l = logits + (size_t)i * a->n_vocab;
        double mx = l[0];
        for (uint32_t v = 1; v < a->n_vocab; v++)
            mx = l[v] > mx ? l[v] : mx;
        double sum = 0;
        for (uint32_t v = 0; v < a->n_vocab; v++)
            sum += exp((double)l[v] - mx);
        nll += -((double)l[ids[i + 1]] - mx - log(sum));
    }
    free(logits);
    return exp(nll / (n - 1));
}

typedef struct acc_greedy_result {
    double agreement;    /* teacher-forced top-1 agreement over the greedy run */
    uint32_t divergence; /* first position where the NPU's own greedy run departs */
    uint32_t npu_matmuls;
} acc_greedy_result;

static void acc_measure_greedy(acc_ctx *a, acc_greedy_result *r)
{
    memset(r, 0, sizeof *r);
    int32_t prompt[64];
    const uint32_t n_prompt = acc_tokenize(a, acc_prompt, prompt, 64);
    float *logits = malloc((size_t)a->n_vocab * sizeof *logits);
    int32_t *cpu_seq = malloc(ACC_GREEDY * sizeof *cpu_seq);
    int32_t *npu_seq = malloc(ACC_GREEDY * sizeof *npu_seq);
    cr_assert(logits && cpu_seq && npu_seq);

    acc_path cpu, npu;
    acc_path_init(a, &cpu, false);
    acc_greedy(a, &cpu, prompt, n_prompt, cpu_seq, ACC_GREEDY, logits);
    acc_path_free(a, &cpu);

    /* Teacher forcing: prompt + the cpu's tokens in one prefill on the NPU path. */
    const uint32_t n_all = n_prompt + ACC_GREEDY - 1;
    int32_t *all = malloc(n_all * sizeof *all);
    float *all_logits = malloc((size_t)n_all * a->n_vocab * sizeof *all_logits);
    cr_assert(all && all_logits);
    memcpy(all, prompt, n_prompt * sizeof *all);
    memcpy(all + n_prompt, cpu_seq, (ACC_GREEDY - 1) * sizeof *all);
    acc_path_init(a, &npu, true);
    acc_step(a, &npu, all, n_all, true, all_logits);
    r->npu_matmuls = a->npu_matmuls;
    uint32_t agree = 0;
    for (uint32_t i = 0; i < ACC_GREEDY; i++)
        agree += acc_argmax(all_logits + (size_t)(n_prompt - 1 + i) * a->n_vocab, a->n_vocab) ==
                 cpu_seq[i];
    r->agreement = (double)agree / ACC_GREEDY;
    acc_path_free(a, &npu);
    free(all);
    free(all_logits);

    acc_path_init(a, &npu, true);
    acc_greedy(a, &npu, prompt, n_prompt, npu_seq, ACC_GREEDY, logits);
    acc_path_free(a, &npu);
    r->divergence = ACC_GREEDY;
    for (uint32_t i = 0; i < ACC_GREEDY && r->divergence == ACC_GREEDY; i++)
        if (npu_seq[i] != cpu_seq[i])
            r->divergence = i;
    free(logits);
    free(cpu_seq);
    free(npu_seq);
}

/* Perplexity of |text| on the cpu path and on the NPU path; returns the
 * relative change and logs both. */
static double acc_measure_ppl(acc_ctx *a, const char *what, const char *text)
{
    int32_t ids[512];
    const uint32_t n = acc_tokenize(a, text, ids, 512);
    acc_path cpu, npu;
    acc_path_init(a, &cpu, false);
    const double ppl_cpu = acc_perplexity(a, &cpu, ids, n);
    acc_path_free(a, &cpu);
    acc_path_init(a, &npu, true);
    const double ppl_npu = acc_perplexity(a, &npu, ids, n);
    acc_path_free(a, &npu);
    const double rel = ppl_npu / ppl_cpu - 1.0;
    cr_log_info("  perplexity of the %s text (%u tokens): npusim path %.4f, cpu %.4f (%+.2f%%)",
                what, n, ppl_npu, ppl_cpu, 100.0 * rel);
    return rel;
}

/* The default capability file plus q4_1 weights. */
static const char acc_q4_1_default[] =
    "{ \"matmul\": { \"weight_dtypes\": [\"q8_0\", \"q4_0\", \"q4_1\"] } }";
static const char acc_q4_1_per_block[] =
    "{ \"matmul\": { \"weight_dtypes\": [\"q8_0\", \"q4_0\", \"q4_1\"],\n"
    "  \"activations\": { \"granularity\": \"per_block\" } } }";
static const char acc_q4_1_symmetric[] =
    "{ \"matmul\": { \"weight_dtypes\": [\"q8_0\", \"q4_0\", \"q4_1\"],\n"
    "  \"activations\": { \"scheme\": \"symmetric\" } } }";

Test(npusim_accuracy, smollm2_with_every_matmul_on_npusim_tracks_the_cpu)
{
    acc_ctx a;
    if (!acc_open(&a, acc_q4_1_default))
        cr_skip_test("SmolLM2 not fetched");
    acc_greedy_result r;
    acc_measure_greedy(&a, &r);
    cr_log_info("npusim W8A8 per-row asymmetric on SmolLM2-135M, %u matmuls on npusim per step: "
                "top-1 agreement %.1f%% over %u greedy tokens; its own greedy run departs at "
                "token %u",
                r.npu_matmuls, 100.0 * r.agreement, ACC_GREEDY, r.divergence);
    cr_assert_eq(r.npu_matmuls, 7 * a.n_layer + 1, "only %u matmuls ran on npusim", r.npu_matmuls);
    cr_assert_geq(r.agreement, 0.90, "top-1 agreement %.1f%%", 100.0 * r.agreement);
    const double prose = acc_measure_ppl(&a, "prose", acc_text);
    const double code = acc_measure_ppl(&a, "markdown and code", acc_code);
    cr_assert(fabs(prose) <= 0.03, "perplexity of the prose text moved %+.2f%%", 100.0 * prose);
    cr_assert(fabs(code) <= 0.03, "perplexity of the code text moved %+.2f%%", 100.0 * code);
    acc_close(&a);
}

Test(npusim_accuracy, smollm2_with_per_block_activation_scales_stays_within_3_percent)
{
    acc_ctx a;
    if (!acc_open(&a, acc_q4_1_per_block))
        cr_skip_test("SmolLM2 not fetched");
    cr_log_info("npusim W8A8 per-block asymmetric on SmolLM2-135M:");
    const double prose = acc_measure_ppl(&a, "prose", acc_text);
    const double code = acc_measure_ppl(&a, "markdown and code", acc_code);
    cr_assert(fabs(prose) <= 0.03, "perplexity of the prose text moved %+.2f%%", 100.0 * prose);
    cr_assert(fabs(code) <= 0.03, "perplexity of the code text moved %+.2f%%", 100.0 * code);
    acc_close(&a);
}

Test(npusim_accuracy, smollm2_with_symmetric_per_row_activations_loses_more_on_code)
{
    acc_ctx a;
    if (!acc_open(&a, acc_q4_1_symmetric))
        cr_skip_test("SmolLM2 not fetched");
    cr_log_info("npusim W8A8 per-row symmetric on SmolLM2-135M:");
    const double prose = acc_measure_ppl(&a, "prose", acc_text);
    const double code = acc_measure_ppl(&a, "markdown and code", acc_code);
    cr_assert(fabs(prose) <= 0.03, "perplexity of the prose text moved %+.2f%%", 100.0 * prose);
    /* A symmetric scale leaves 15-30% of the int8 levels unused on
     * SmolLM2's one-sided rows (measured +5.9% here): a guard against
     * regressions, not the 3% target, which the default meets. */
    cr_assert(fabs(code) <= 0.12, "perplexity of the code text moved %+.2f%%", 100.0 * code);
    acc_close(&a);
}
