/* SmolLM2 on a discrete OpenCL device (PoCL under SWITCHYARD_OPENCL_DISCRETE=1):
 * with the KV cache of every layer kept on the device that runs its
 * attention, greedy decoding picks the cpu's tokens, but for ties within
 * rounding (forced_tokens), for F16 and Q8_0 caches, and the plugin's own memory count covers the session's buffers
 * there. */
#include <criterion/criterion.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include "switchyard/switchyard.h"

#define N_GEN 12

typedef struct collected {
    int32_t ids[N_GEN + 1];
    uint32_t n;
} collected;

static bool on_token(void *user, int32_t token, const char *text, size_t len)
{
    (void)text;
    (void)len;
    collected *c = user;
    if (c->n < N_GEN + 1)
        c->ids[c->n++] = token;
    return true;
}

static const int32_t prompt[] = {1, 504, 3327, 28, 4730, 30};
#define N_PROMPT (sizeof prompt / sizeof prompt[0])

/* A session of 64 positions on |devices| with |policy| and a |kv| cache. */
static sy_session *open_session(sy_model *m, sy_runtime *rt, const char *devices,
                                const char *policy, sy_dtype kv)
{
    sy_session_options so;
    sy_session_options_init(&so);
    so.n_ctx = 64;
    so.kv_type = kv;
    so.devices = devices;
    so.policy = policy;
    sy_session *s = NULL;
    cr_assert_eq(sy_session_create(m, &so, &s), SY_OK, "%s", sy_runtime_last_error(rt));
    return s;
}

/* Generates greedily on |devices| with |policy|; checks the device's memory. */
static void generate(sy_model *m, sy_runtime *rt, const char *devices, const char *policy,
                     sy_dtype kv, collected *out)
{
    sy_session *s = open_session(m, rt, devices, policy, kv);
    sy_generate_params gp;
    sy_generate_params_init(&gp);
    gp.n_predict = N_GEN;
    gp.temperature = 0.0f;
    memset(out, 0, sizeof *out);
    cr_assert_eq(sy_session_generate(s, prompt, N_PROMPT, &gp, on_token, out), SY_OK, "%s",
                 sy_session_last_error(s));
    sy_memory_plan plan;
    sy_memory_usage use;
    sy_memory_plan_init(&plan);
    sy_memory_usage_init(&use);
    cr_assert_eq(sy_session_query_memory(s, &plan, &use), SY_OK);
    for (uint32_t d = 0; d < use.n_devices; d++) {
        if (strcmp(use.devices[d].name, "cpu") == 0)
            continue;
        /* The plugin counts the executor's buffers there and its scratch. */
        cr_assert(use.devices[d].plugin_counted, "%s", use.devices[d].name);
        cr_assert_geq(use.devices[d].plugin_bytes, use.devices[d].current_bytes);
        cr_assert_lt(use.devices[d].plugin_bytes, use.devices[d].current_bytes + (16u << 20));
        cr_assert_geq(use.devices[d].plugin_peak_bytes, use.devices[d].plugin_bytes);
    }
    if (policy) {
        bool kv_on_device = false;
        for (uint32_t k = 1; k < plan.n_devices; k++)
            kv_on_device |= plan.devices[k].kv_bytes > 0;
        cr_assert(kv_on_device, "the plan puts the KV cache on the discrete device");
    }
    sy_session_destroy(s);
}

/* Logits this close are a tie between two tokens: the devices' logits of
 * one step differ by up to ~0.04 here (SmolLM2, Q8_0 cache: 27.58 on the
 * cpu against 27.62 on PoCL), so a greedy pick between two tokens closer
 * than that is decided by rounding.  Step 9 of this prompt is one
 * (31.656 against 31.655 on the cpu's avx512 kernels, 31.671 against
 * 31.661 on PoCL); the cpu's avx2 kernels pick the other token there. */
#define TIE_LOGIT 0.05f

/* Feeds the cpu's greedy tokens |cpu| through a session on |devices|: at
 * every step the session's own greedy pick must be the cpu's token, or
 * tie with it (TIE_LOGIT) in the session's logits; it then goes on from
 * the cpu's token, so one tie does not end the comparison. */
static void forced_tokens(sy_model *m, sy_runtime *rt, const char *devices, const char *policy,
                          sy_dtype kv, const collected *cpu)
{
    sy_model_info info;
    cr_assert_eq(sy_model_query_info(m, &info), SY_OK);
    sy_session *s = open_session(m, rt, devices, policy, kv);
    float *logits = malloc((size_t)info.n_vocab * sizeof *logits);
    cr_assert_not_null(logits);
    cr_assert_eq(sy_session_eval(s, prompt, N_PROMPT, false, logits), SY_OK, "%s",
                 sy_session_last_error(s));
    uint32_t ties = 0;
    for (uint32_t i = 0; i < cpu->n; i++) {
        uint32_t best = 0;
        for (uint32_t v = 1; v < info.n_vocab; v++)
            if (logits[v] > logits[best])
                best = v;
        const int32_t want = cpu->ids[i];
        cr_assert(want >= 0 && (uint32_t)want < info.n_vocab);
        if ((int32_t)best != want) {
            cr_assert_leq(logits[best] - logits[want], TIE_LOGIT,
                          "token %u: %u on %s (logit %.5f), %d on the cpu (logit %.5f there)", i,
                          best, devices, logits[best], want, logits[want]);
            ties++;
        }
        cr_assert_eq(sy_session_eval(s, &want, 1, false, logits), SY_OK, "%s",
                     sy_session_last_error(s));
    }
    cr_log_info("%s: %u of %u greedy picks ties with the cpu's", devices, ties, cpu->n);
    /* A tie is rare: most picks must be the cpu's outright. */
    cr_assert_leq(ties, 1u, "%u ties in %u steps", ties, cpu->n);
    free(logits);
    sy_session_destroy(s);
}

/* SmolLM2 in a new runtime whose OpenCL devices are forced discrete. */
static sy_model *open_smollm2(sy_runtime **rt)
{
    const char *dir = getenv("SY_MODELS_DIR");
    char path[1024];
    snprintf(path, sizeof path, "%s/SmolLM2-135M-Instruct.Q4_1.gguf", dir ? dir : "models");
    cr_assert_eq(access(path, R_OK), 0, "%s is missing (tools/fetch-models.sh)", path);
    cr_assert_eq(setenv("SWITCHYARD_OPENCL_DISCRETE", "1", 1), 0);
    cr_assert_eq(sy_runtime_create(NULL, rt), SY_OK);
    sy_model *m = NULL;
    cr_assert_eq(sy_model_open(*rt, path, &m), SY_OK, "%s", sy_runtime_last_error(*rt));
    return m;
}

static void same_tokens(sy_dtype kv)
{
    sy_runtime *rt = NULL;
    sy_model *m = open_smollm2(&rt);
    collected cpu, ocl;
    generate(m, rt, "cpu", NULL, kv, &cpu);
    generate(m, rt, "cpu,opencl:0", "prefer:opencl:0", kv, &ocl);
    cr_assert_eq(ocl.n, cpu.n);
    forced_tokens(m, rt, "cpu,opencl:0", "prefer:opencl:0", kv, &cpu);
    sy_model_close(m);
    sy_runtime_destroy(rt);
}

Test(opencl_session, greedy_tokens_with_f16_kv_on_the_discrete_device_are_the_cpus)
{
    same_tokens(SY_DTYPE_F16);
}

Test(opencl_session, greedy_tokens_with_q8_0_kv_on_the_discrete_device_are_the_cpus)
{
    same_tokens(SY_DTYPE_Q8_0);
}

/* Logits of the prompt and of |n| steps fed the cpu's greedy tokens, on
 * |devices| with |policy|, into |out| (n + 1 rows of the vocabulary). */
static void step_logits(sy_model *m, sy_runtime *rt, const char *devices, const char *policy,
                        const collected *cpu, uint32_t n, uint32_t n_vocab, float *out)
{
    sy_session *s = open_session(m, rt, devices, policy, SY_DTYPE_F16);
    cr_assert_eq(sy_session_eval(s, prompt, N_PROMPT, false, out), SY_OK, "%s",
                 sy_session_last_error(s));
    for (uint32_t i = 0; i < n; i++)
        cr_assert_eq(sy_session_eval(s, &cpu->ids[i], 1, false, out + (size_t)(i + 1) * n_vocab),
                     SY_OK, "%s", sy_session_last_error(s));
    sy_session_destroy(s);
}

/* With the KV cache and the attention on the device, the session reads
 * the layers' KV positions from an input when the steps run (the OpenCL
 * kernels take that form): bit for bit the logits of the same session with
 * the positions in the params (SWITCHYARD_KV_POSITIONS=params), at every
 * step, for a decode graph that no longer changes between tokens. */
Test(opencl_session, kv_positions_read_at_run_time_give_the_params_logits)
{
    sy_runtime *rt = NULL;
    sy_model *m = open_smollm2(&rt);
    sy_model_info info;
    cr_assert_eq(sy_model_query_info(m, &info), SY_OK);
    collected cpu;
    generate(m, rt, "cpu", NULL, SY_DTYPE_F16, &cpu);
    const uint32_t n = 6;
    const size_t count = (size_t)(n + 1) * info.n_vocab;
    float *run_time = malloc(count * sizeof *run_time), *params = malloc(count * sizeof *params);
    cr_assert(run_time && params);
    cr_assert_eq(unsetenv("SWITCHYARD_KV_POSITIONS"), 0);
    step_logits(m, rt, "cpu,opencl:0", "prefer:opencl:0", &cpu, n, info.n_vocab, run_time);
    cr_assert_eq(setenv("SWITCHYARD_KV_POSITIONS", "params", 1), 0);
    step_logits(m, rt, "cpu,opencl:0", "prefer:opencl:0", &cpu, n, info.n_vocab, params);
    cr_assert_eq(unsetenv("SWITCHYARD_KV_POSITIONS"), 0);
    for (size_t i = 0; i < count; i++)
        cr_assert(memcmp(&run_time[i], &params[i], sizeof(float)) == 0,
                  "step %zu, token %zu: %.6f at run time, %.6f with the params", i / info.n_vocab,
                  i % info.n_vocab, run_time[i], params[i]);
    free(run_time);
    free(params);
    sy_model_close(m);
    sy_runtime_destroy(rt);
}
