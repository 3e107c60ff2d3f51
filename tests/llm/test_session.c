/* Sessions: KV cache types and sizes, the context policies (error, shift,
 * window), Gemma 3's window-sized local layers, and several sessions on
 * one model.  Small random models come from `switchyard synth`; the real
 * ones from $SY_MODELS_DIR. */
#include <criterion/criterion.h>
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include "switchyard/switchyard.h"

static const char *models_dir(void)
{
    const char *d = getenv("SY_MODELS_DIR");
    return d && *d ? d : SY_SOURCE_ROOT "/models";
}

/* A model and the runtime it was opened on, and the synth file to remove. */
typedef struct opened {
    sy_runtime *rt;
    sy_model *m;
    char dir[64];
    char path[128];
} opened;

static void open_path(opened *o, const char *path)
{
    cr_assert_eq(sy_runtime_create(NULL, &o->rt), SY_OK);
    sy_status st = sy_model_open(o->rt, path, &o->m);
    cr_assert_eq(st, SY_OK, "%s: %s", path, sy_runtime_last_error(o->rt));
}

static void open_real(opened *o, const char *file)
{
    memset(o, 0, sizeof *o);
    char path[4096];
    snprintf(path, sizeof path, "%s/%s", models_dir(), file);
    cr_assert_eq(access(path, R_OK), 0, "%s is missing: run tools/fetch-models.sh", path);
    open_path(o, path);
}

/* Writes a random model with `switchyard synth` (f32 weights, so that two
 * ways of computing the same logits agree closely) and opens it. */
static void open_synth(opened *o, const char *arch, const char *dims, unsigned ctx, unsigned seed)
{
    memset(o, 0, sizeof *o);
    snprintf(o->dir, sizeof o->dir, "/tmp/sy-session-XXXXXX");
    cr_assert_not_null(mkdtemp(o->dir));
    snprintf(o->path, sizeof o->path, "%s/m.gguf", o->dir);
    char cmd[1024];
    snprintf(cmd, sizeof cmd,
             "'%s' synth --arch %s --dims %s --type f32 --ctx %u --seed %u -o '%s' >/dev/null",
             SY_SWITCHYARD_BIN, arch, dims, ctx, seed, o->path);
    cr_assert_eq(system(cmd), 0, "%s failed", cmd);
    open_path(o, o->path);
}

static void close_opened(opened *o)
{
    sy_model_close(o->m);
    sy_runtime_destroy(o->rt);
    if (o->path[0])
        unlink(o->path);
    if (o->dir[0])
        rmdir(o->dir);
}

static sy_session *new_session(const opened *o, sy_session_options so)
{
    so.devices = "cpu";
    sy_session *s = NULL;
    sy_status st = sy_session_create(o->m, &so, &s);
    cr_assert_eq(st, SY_OK, "session: %s", sy_runtime_last_error(o->rt));
    return s;
}

static sy_session_options options(uint32_t n_ctx, sy_dtype kv_type)
{
    sy_session_options so;
    sy_session_options_init(&so);
    so.n_ctx = n_ctx;
    so.kv_type = kv_type;
    return so;
}

static uint32_t n_vocab(const opened *o)
{
    sy_model_info info;
    cr_assert_eq(sy_model_query_info(o->m, &info), SY_OK);
    return info.n_vocab;
}

static int32_t argmax(const float *x, uint32_t n)
{
    uint32_t best = 0;
    for (uint32_t i = 1; i < n; i++)
        if (x[i] > x[best])
            best = i;
    return (int32_t)best;
}

/* Largest |a - b| over the largest |b|. */
static double rel_diff(const float *a, const float *b, uint32_t n)
{
    double d = 0, m = 0;
    for (uint32_t i = 0; i < n; i++) {
        d = fmax(d, fabs((double)a[i] - b[i]));
        m = fmax(m, fabs((double)b[i]));
    }
    return m > 0 ? d / m : d;
}

/* A reproducible token stream in [4, v) (ids 0-3 are specials in synth). */
static int32_t token_at(uint32_t i, uint32_t v)
{
    uint64_t x = (i + 1) * 0x9e3779b97f4a7c15ULL;
    x ^= x >> 29;
    return (int32_t)(4 + x % (v - 4));
}

#define SYNTH_LLAMA "2,128,256,4,2,512"          /* head size 32: quantised caches fit */
#define SYNTH_GEMMA3 "6,128,256,4,2,512,32"      /* 5 local layers + 1 global, window ctx/4 */

/* ------------------------------------------------------------ KV types */

Test(session, kv_types_size_the_cache_by_their_blocks)
{
    opened o;
    open_real(&o, "SmolLM2-135M-Instruct.Q4_1.gguf");
    /* 30 layers, K and V, 3 kv heads of 64: bytes per position of a layer. */
    const struct {
        sy_dtype t;
        uint64_t row;
    } want[] = {{SY_DTYPE_F32, 3 * 64 * 4}, {SY_DTYPE_F16, 3 * 64 * 2},
                {SY_DTYPE_Q8_0, 3 * 2 * 34}, {SY_DTYPE_Q4_0, 3 * 2 * 18}};
    for (size_t i = 0; i < sizeof want / sizeof want[0]; i++) {
        sy_session_options so = options(1000, want[i].t);
        uint64_t bytes = 0;
        cr_assert_eq(sy_model_query_kv_bytes(o.m, &so, &bytes), SY_OK);
        cr_expect_eq(bytes, 2ull * 30 * 1000 * want[i].row, "%s: %llu bytes",
                     sy_dtype_name(want[i].t), (unsigned long long)bytes);
        sy_session *s = new_session(&o, so);
        cr_assert_eq(sy_session_eval(s, (int32_t[]){1, 2, 3}, 3, false, NULL), SY_OK, "%s: %s",
                     sy_dtype_name(want[i].t), sy_session_last_error(s));
        sy_session_destroy(s);
    }
    sy_session_options so = options(1000, SY_DTYPE_Q4_1);
    sy_session *s = NULL;
    cr_assert_eq(sy_session_create(o.m, &so, &s), SY_E_DTYPE);
    cr_assert_null(s);
    cr_assert(strstr(sy_runtime_last_error(o.rt), "KV type q4_1 is not supported") != NULL, "%s",
              sy_runtime_last_error(o.rt));
    close_opened(&o);
}

Test(session, refuses_a_quantized_cache_when_heads_are_not_whole_blocks)
{
    opened o;
    open_synth(&o, "llama", "2,64,128,4,2,512", 64, 1); /* head size 16 */
    sy_session_options so = options(64, SY_DTYPE_Q8_0);
    sy_session *s = NULL;
    cr_assert_eq(sy_session_create(o.m, &so, &s), SY_E_DTYPE);
    cr_assert(strstr(sy_runtime_last_error(o.rt), "head size 16") != NULL, "%s",
              sy_runtime_last_error(o.rt));
    close_opened(&o);
}

Test(session, gemma3_local_layers_keep_only_their_window)
{
    opened o;
    open_real(&o, "gemma-3-270m-q4_k_m.gguf");
    /* 18 layers of one 256-wide kv head; every sixth is global, the other
     * fifteen attend to 512 tokens and hold 511 + n_batch (512) positions. */
    sy_session_options so = options(4096, SY_DTYPE_F16);
    uint64_t bytes = 0;
    cr_assert_eq(sy_model_query_kv_bytes(o.m, &so, &bytes), SY_OK);
    cr_expect_eq(bytes, 2ull * 256 * 2 * (3 * 4096 + 15 * 1023));
    so.n_batch = 64;
    cr_assert_eq(sy_model_query_kv_bytes(o.m, &so, &bytes), SY_OK);
    cr_expect_eq(bytes, 2ull * 256 * 2 * (3 * 4096 + 15 * 575));
    so = options(512, SY_DTYPE_F16); /* a context within the span: no saving */
    cr_assert_eq(sy_model_query_kv_bytes(o.m, &so, &bytes), SY_OK);
    cr_expect_eq(bytes, 2ull * 256 * 2 * 18 * 512);
    close_opened(&o);
}

/* Feeds |n| tokens one at a time to sessions |a| and |b| and requires the
 * same logits (within |tol| of the largest) and the same argmax. */
static void expect_same_decode(const opened *o, sy_session *a, sy_session *b, uint32_t first,
                               uint32_t n, double tol)
{
    const uint32_t v = n_vocab(o);
    float *la = malloc(v * sizeof *la), *lb = malloc(v * sizeof *lb);
    cr_assert(la && lb);
    for (uint32_t i = first; i < first + n; i++) {
        const int32_t t = token_at(i, v);
        cr_assert_eq(sy_session_eval(a, &t, 1, false, la), SY_OK, "%s", sy_session_last_error(a));
        cr_assert_eq(sy_session_eval(b, &t, 1, false, lb), SY_OK, "%s", sy_session_last_error(b));
        const double d = rel_diff(la, lb, v);
        cr_assert(d <= tol, "token %u: logits differ by %.3g of the largest", i, d);
        cr_assert_eq(argmax(la, v), argmax(lb, v), "token %u: argmax differs", i);
    }
    free(la);
    free(lb);
}

Test(session, gemma3_sliding_local_layers_give_the_logits_of_a_full_cache)
{
    opened o;
    open_synth(&o, "gemma3", SYNTH_GEMMA3, 64, 3); /* window 16 */
    sy_session_options so = options(64, SY_DTYPE_F16);
    so.n_batch = 2;  /* local layers hold 17 positions and slide every 2 tokens */
    sy_session *slide = new_session(&o, so);
    so.n_batch = 64; /* every layer holds the whole context */
    sy_session *full = new_session(&o, so);
    expect_same_decode(&o, slide, full, 0, 60, 1e-6);
    sy_session_destroy(slide);
    sy_session_destroy(full);
    close_opened(&o);
}

/* A cpu session's KV writes and attentions read their first row when they
 * run (kv_starts), so its decode graph stays the same from token to token;
 * SWITCHYARD_KV_POSITIONS=params puts the rows in the params, updated per
 * step.  Both give the same logits bit for bit, through a prompt in two
 * chunks and decode steps past the local layers' slides. */
Test(session, kv_positions_read_at_run_time_give_the_logits_of_positions_in_params)
{
    opened o;
    open_synth(&o, "gemma3", SYNTH_GEMMA3, 64, 5); /* window 16 */
    sy_session_options so = options(64, SY_DTYPE_F16);
    so.n_batch = 4; /* local layers hold 19 positions and slide every 4 tokens */
    sy_session *run = new_session(&o, so);
    cr_assert_eq(setenv("SWITCHYARD_KV_POSITIONS", "params", 1), 0);
    sy_session *params = new_session(&o, so);
    unsetenv("SWITCHYARD_KV_POSITIONS");
    const uint32_t v = n_vocab(&o);
    int32_t prompt[7];
    for (uint32_t i = 0; i < 7; i++)
        prompt[i] = token_at(100 + i, v);
    float *la = malloc(v * sizeof *la), *lb = malloc(v * sizeof *lb);
    cr_assert(la && lb);
    cr_assert_eq(sy_session_eval(run, prompt, 7, false, la), SY_OK, "%s",
                 sy_session_last_error(run));
    cr_assert_eq(sy_session_eval(params, prompt, 7, false, lb), SY_OK, "%s",
                 sy_session_last_error(params));
    cr_assert(memcmp(la, lb, v * sizeof *la) == 0, "the prompt's logits differ");
    free(la);
    free(lb);
    expect_same_decode(&o, run, params, 7, 50, 0.0);
    sy_session_destroy(run);
    sy_session_destroy(params);
    close_opened(&o);
}

/* ------------------------------------------------------- error policy */

Test(session, error_policy_names_the_sizes_when_the_context_is_full)
{
    opened o;
    open_synth(&o, "llama", SYNTH_LLAMA, 64, 1);
    sy_session *s = new_session(&o, options(16, SY_DTYPE_F16));
    int32_t ids[16];
    for (uint32_t i = 0; i < 16; i++)
        ids[i] = token_at(i, n_vocab(&o));
    cr_assert_eq(sy_session_eval(s, ids, 10, false, NULL), SY_OK);
    cr_assert_eq(sy_session_eval(s, ids, 7, false, NULL), SY_E_LIMIT);
    cr_assert(strstr(sy_session_last_error(s), "context full: 10 tokens in context plus 7 new "
                                               "exceed the context size of 16") != NULL,
              "%s", sy_session_last_error(s));
    cr_assert_eq(sy_session_n_past(s), 10, "a refused eval changes nothing");

    /* Generating past the end: the tokens that fit, then SY_E_LIMIT. */
    sy_session_reset(s);
    sy_generate_params gp;
    sy_generate_params_init(&gp);
    gp.n_predict = 40;
    gp.temperature = 1.0f; /* a sampled random model: no end token for this seed */
    gp.seed = 7;
    cr_assert_eq(sy_session_generate(s, ids, 4, &gp, NULL, NULL), SY_E_LIMIT);
    cr_assert(strstr(sy_session_last_error(s), "context full after 13 generated tokens") != NULL,
              "%s", sy_session_last_error(s));
    cr_assert_eq(sy_session_n_past(s), 16);
    sy_session_destroy(s);
    close_opened(&o);
}

/* ------------------------------------------------------- shift policy */

/* Feeds |n| tokens one at a time to a shifting session and compares its
 * logits with a fresh session given the tokens the shift rule keeps (the
 * first |keep|, then the newer half of the rest): right after every shift,
 * the token after, and every fourth token. */
static void check_shift(const opened *o, sy_session_options so, uint32_t n)
{
    const uint32_t v = n_vocab(o);
    so.context_policy = SY_CONTEXT_SHIFT;
    sy_session *s = new_session(o, so);
    int32_t *ctx = malloc(so.n_ctx * sizeof *ctx);
    float *got = malloc(v * sizeof *got), *want = malloc(v * sizeof *want);
    cr_assert(ctx && got && want);
    uint32_t n_ctx_tokens = 0, shifts = 0, since_shift = 2;
    for (uint32_t i = 0; i < n; i++) {
        if (n_ctx_tokens == so.n_ctx) {
            const uint32_t keep = so.n_keep, drop = (n_ctx_tokens - keep) / 2;
            memmove(ctx + keep, ctx + keep + drop, (n_ctx_tokens - keep - drop) * sizeof *ctx);
            n_ctx_tokens -= drop;
            shifts++;
            since_shift = 0;
        }
        ctx[n_ctx_tokens++] = token_at(i, v);
        cr_assert_eq(sy_session_eval(s, &ctx[n_ctx_tokens - 1], 1, false, got), SY_OK, "%s",
                     sy_session_last_error(s));
        cr_assert_eq(sy_session_n_past(s), n_ctx_tokens, "token %u", i);
        if (since_shift++ >= 2 && i % 4 != 0)
            continue;
        sy_session_options fo = so;
        fo.context_policy = SY_CONTEXT_ERROR;
        sy_session *fresh = new_session(o, fo);
        cr_assert_eq(sy_session_eval(fresh, ctx, n_ctx_tokens, false, want), SY_OK);
        sy_session_destroy(fresh);
        const double d = rel_diff(got, want, v);
        cr_assert(d <= 1e-4, "token %u (%u shifts): logits differ by %.3g of the largest", i,
                  shifts, d);
        cr_assert_eq(argmax(got, v), argmax(want, v), "token %u (%u shifts)", i, shifts);
    }
    cr_assert_geq(shifts, 3);
    free(ctx);
    free(got);
    free(want);
    sy_session_destroy(s);
}

Test(session, shift_gives_the_logits_of_a_fresh_evaluation_of_the_kept_tokens)
{
    opened o;
    open_synth(&o, "llama", SYNTH_LLAMA, 64, 2);
    sy_session_options so = options(20, SY_DTYPE_F16);
    so.n_keep = 3;
    check_shift(&o, so, 60);
    close_opened(&o);
}

Test(session, shift_reevaluates_from_the_start_when_local_layers_slid_past_the_kept_tokens)
{
    opened o;
    open_synth(&o, "gemma3", SYNTH_GEMMA3, 64, 4); /* window 16 */
    sy_session_options so = options(40, SY_DTYPE_Q8_0);
    so.n_keep = 2;
    so.n_batch = 4; /* local layers hold 19 positions */
    check_shift(&o, so, 90);
    close_opened(&o);
}

/* Counts generated tokens and the shifts seen between them (the context
 * got shorter). */
typedef struct shift_watch {
    sy_session *s;
    uint32_t last, shifts, tokens;
} shift_watch;

static bool count_shifts(void *user, int32_t token, const char *text, size_t len)
{
    (void)token;
    (void)text;
    (void)len;
    shift_watch *w = user;
    const uint32_t n = sy_session_n_past(w->s);
    w->shifts += n < w->last;
    w->last = n;
    w->tokens++;
    return true;
}

Test(session, shift_generates_hundreds_of_tokens_in_a_small_context)
{
    /* Short enough for the sanitizer build, long enough for several shifts
     * of every buffer: LeakSanitizer checks the rest at exit. */
    opened o;
    open_synth(&o, "llama", SYNTH_LLAMA, 64, 5);
    sy_session_options so = options(48, SY_DTYPE_Q4_0);
    so.context_policy = SY_CONTEXT_SHIFT;
    so.n_keep = 4;
    sy_session *s = new_session(&o, so);
    int32_t prompt[8];
    for (uint32_t i = 0; i < 8; i++)
        prompt[i] = token_at(i, n_vocab(&o));
    sy_generate_params gp;
    sy_generate_params_init(&gp);
    gp.n_predict = 300;
    gp.temperature = 1.0f;
    gp.seed = 11;
    shift_watch w = {.s = s};
    cr_assert_eq(sy_session_generate(s, prompt, 8, &gp, count_shifts, &w), SY_OK, "%s",
                 sy_session_last_error(s));
    /* An end token ends a generation: the conversation goes on with a
     * new one-token prompt, in the same context. */
    for (uint32_t turn = 1; w.tokens < 300 && turn < 50; turn++) {
        gp.n_predict = 300 - w.tokens;
        cr_assert_eq(sy_session_generate(s, &prompt[turn % 8], 1, &gp, count_shifts, &w), SY_OK,
                     "%s", sy_session_last_error(s));
    }
    cr_assert_eq(w.tokens, 300, "generated %u tokens", w.tokens);
    /* 8 + 300 tokens through 48 positions, 22 freed per shift. */
    cr_assert_geq(w.shifts, 11, "%u shifts", w.shifts);
    cr_assert_leq(sy_session_n_past(s), 48);
    cr_assert_geq(sy_session_n_past(s), 4 + 22);
    sy_session_destroy(s);
    close_opened(&o);
}

Test(session, shift_refuses_what_cannot_fit_beside_the_kept_tokens)
{
    opened o;
    open_synth(&o, "llama", SYNTH_LLAMA, 64, 1);
    sy_session_options so = options(16, SY_DTYPE_F16);
    so.context_policy = SY_CONTEXT_SHIFT;
    so.n_keep = 6;
    sy_session *s = new_session(&o, so);
    int32_t ids[16];
    for (uint32_t i = 0; i < 16; i++)
        ids[i] = token_at(i, n_vocab(&o));
    cr_assert_eq(sy_session_eval(s, ids, 12, false, NULL), SY_OK);
    cr_assert_eq(sy_session_eval(s, ids, 11, false, NULL), SY_E_LIMIT);
    cr_assert(strstr(sy_session_last_error(s), "11 new tokens do not fit beside the 6 kept ones") !=
                  NULL,
              "%s", sy_session_last_error(s));
    so.n_keep = 16;
    cr_assert_eq(sy_session_create(o.m, &so, &(sy_session *){NULL}), SY_E_INVALID_ARG);
    sy_session_destroy(s);
    close_opened(&o);
}

/* ------------------------------------------------------ window policy */

Test(session, window_policy_slides_past_the_context_with_the_logits_of_masking_alone)
{
    opened o;
    open_synth(&o, "llama", SYNTH_LLAMA, 64, 6);
    sy_session_options so = options(16, SY_DTYPE_F16);
    so.context_policy = SY_CONTEXT_WINDOW;
    so.window = 8;
    so.n_batch = 4; /* 11 positions per layer, slid every 4 tokens */
    sy_session *slide = new_session(&o, so);
    so.n_ctx = 256;
    so.n_batch = 256; /* holds everything; only the mask limits attention */
    sy_session *mask = new_session(&o, so);
    expect_same_decode(&o, slide, mask, 0, 100, 1e-6);
    cr_assert_eq(sy_session_n_past(slide), 100, "positions run past the context of 16");
    sy_session_destroy(slide);
    sy_session_destroy(mask);
    close_opened(&o);
}

Test(session, window_policy_forgets_tokens_beyond_the_receptive_field)
{
    /* Two layers with a window of 4: position p depends on tokens
     * p - 6 .. p only, so sequences that differ in token 0 agree exactly
     * from position 7 on, and differ before. */
    opened o;
    open_synth(&o, "llama", SYNTH_LLAMA, 64, 8);
    const uint32_t v = n_vocab(&o);
    sy_session_options so = options(64, SY_DTYPE_F32);
    so.context_policy = SY_CONTEXT_WINDOW;
    so.window = 4;
    sy_session *a = new_session(&o, so), *b = new_session(&o, so);
    float *la = malloc(v * sizeof *la), *lb = malloc(v * sizeof *lb);
    cr_assert(la && lb);
    for (uint32_t i = 0; i < 12; i++) {
        int32_t ta = token_at(i, v), tb = i == 0 ? token_at(100, v) : ta;
        cr_assert_eq(sy_session_eval(a, &ta, 1, false, la), SY_OK);
        cr_assert_eq(sy_session_eval(b, &tb, 1, false, lb), SY_OK);
        if (i >= 7)
            cr_assert_eq(memcmp(la, lb, v * sizeof *la), 0, "position %u still sees token 0", i);
        else if (i <= 6)
            cr_assert_gt(rel_diff(la, lb, v), 0.0, "position %u must see token 0", i);
    }
    free(la);
    free(lb);
    sy_session_destroy(a);
    sy_session_destroy(b);
    so.window = 65;
    cr_assert_eq(sy_session_create(o.m, &so, &(sy_session *){NULL}), SY_E_INVALID_ARG);
    cr_assert(strstr(sy_runtime_last_error(o.rt), "window of 65 tokens is wider than the context "
                                                  "of 64") != NULL,
              "%s", sy_runtime_last_error(o.rt));
    close_opened(&o);
}

/* ------------------------------------------- several sessions, one model */

static int32_t *tokenize(const opened *o, const char *text, uint32_t *out_n)
{
    uint32_t n = 0;
    sy_model_tokenize(o->m, text, strlen(text), true, false, NULL, 0, &n);
    int32_t *ids = malloc((n ? n : 1) * sizeof *ids);
    cr_assert_not_null(ids);
    cr_assert_eq(sy_model_tokenize(o->m, text, strlen(text), true, false, ids, n, &n), SY_OK);
    *out_n = n;
    return ids;
}

/* Evaluates |ids| in |s|, then step |i| (1 .. N-1) feeds back the argmax of
 * the last logits: a greedy generation, with every step's logits kept in
 * logits[i * v]. */
static void greedy_begin(sy_session *s, const int32_t *ids, uint32_t n, uint32_t v, float *logits)
{
    cr_assert_eq(sy_session_eval(s, ids, n, false, logits), SY_OK, "%s", sy_session_last_error(s));
}

static void greedy_step(sy_session *s, uint32_t i, uint32_t v, float *logits)
{
    const int32_t tok = argmax(logits + (size_t)(i - 1) * v, v);
    cr_assert_eq(sy_session_eval(s, &tok, 1, false, logits + (size_t)i * v), SY_OK, "%s",
                 sy_session_last_error(s));
}

Test(session, two_sessions_on_one_model_generate_what_each_does_alone)
{
    /* Two conversations on one random model (fast under the sanitizers),
     * one with an F16 cache and one with Q8_0: stepped in turn, each must
     * produce its solo run's logits bit for bit at every step (so its
     * greedy tokens too). */
    enum { N = 24 };
    opened o;
    open_synth(&o, "llama", SYNTH_LLAMA, 64, 9);
    const uint32_t v = n_vocab(&o);
    const char *prompts[2] = {"The capital of France is", "Once upon a time, in a small village,"};
    const sy_dtype kv[2] = {SY_DTYPE_F16, SY_DTYPE_Q8_0};
    float *solo[2], *both[2];
    int32_t *ids[2];
    uint32_t n_ids[2];
    for (int k = 0; k < 2; k++) {
        ids[k] = tokenize(&o, prompts[k], &n_ids[k]);
        solo[k] = malloc((size_t)N * v * sizeof(float));
        both[k] = malloc((size_t)N * v * sizeof(float));
        cr_assert(solo[k] && both[k]);
    }
    for (int k = 0; k < 2; k++) {
        sy_session *s = new_session(&o, options(128, kv[k]));
        greedy_begin(s, ids[k], n_ids[k], v, solo[k]);
        for (uint32_t i = 1; i < N; i++)
            greedy_step(s, i, v, solo[k]);
        sy_session_destroy(s);
    }
    /* Both at once, created together and stepped in turn. */
    sy_session *s[2] = {new_session(&o, options(128, kv[0])), new_session(&o, options(128, kv[1]))};
    for (int k = 0; k < 2; k++)
        greedy_begin(s[k], ids[k], n_ids[k], v, both[k]);
    for (uint32_t i = 1; i < N; i++)
        for (int k = 0; k < 2; k++)
            greedy_step(s[k], i, v, both[k]);
    for (int k = 0; k < 2; k++) {
        for (uint32_t i = 0; i < N; i++)
            cr_expect_eq(memcmp(both[k] + (size_t)i * v, solo[k] + (size_t)i * v, v * sizeof(float)),
                         0, "session %d (%s KV), step %u: logits depart from its solo run", k,
                         sy_dtype_name(kv[k]), i);
        cr_expect_eq(sy_session_n_past(s[k]), n_ids[k] + N - 1);
        sy_session_destroy(s[k]);
    }
    /* The two conversations are different ones. */
    cr_expect_neq(memcmp(solo[0], solo[1], v * sizeof(float)), 0);
    for (int k = 0; k < 2; k++) {
        free(ids[k]);
        free(solo[k]);
        free(both[k]);
    }
    close_opened(&o);
}

/* ------------------------------------------------------------- the CLI */

/* Runs `switchyard run -m MODEL ARGS` and returns its exit status with
 * stdout and stderr in |out|. */
static int run_cli(const char *model, const char *args, char *out, size_t size)
{
    char cmd[4096];
    snprintf(cmd, sizeof cmd, "'%s' run -m '%s' %s 2>&1", SY_SWITCHYARD_BIN, model, args);
    FILE *p = popen(cmd, "r");
    cr_assert_not_null(p);
    size_t n = fread(out, 1, size - 1, p);
    out[n] = '\0';
    return pclose(p);
}

Test(session, run_reports_a_full_context_and_shifts_past_it_when_asked)
{
    opened o;
    open_synth(&o, "llama", SYNTH_LLAMA, 64, 10);
    uint32_t n_prompt = 0;
    free(tokenize(&o, "Hi", &n_prompt));
    cr_assert(n_prompt > 0 && n_prompt < 12);
    char out[16384], want[160];
    int rc = run_cli(o.path, "-p Hi -n 40 --ctx 16", out, sizeof out);
    cr_assert_neq(rc, 0, "%s", out);
    /* The prompt and 16 - n_prompt generated tokens fill the context; the
     * next one is streamed but has no room. */
    snprintf(want, sizeof want, "context full after %u generated tokens: the context of 16 tokens "
             "holds no more", 16 - n_prompt + 1);
    cr_assert(strstr(out, want) != NULL, "want '%s' in:\n%s", want, out);
    rc = run_cli(o.path, "-p Hi -n 40 --ctx 16 --context-policy shift --kv-type q4_0",
                 out, sizeof out);
    cr_assert_eq(rc, 0, "%s", out);
    cr_assert(strstr(out, "decode 39 tok") != NULL, "%s", out);
    rc = run_cli(o.path, "-p Hi -n 40 --ctx 16 --context-policy window:8", out,
                 sizeof out);
    cr_assert_eq(rc, 0, "%s", out);
    cr_assert(strstr(out, "decode 39 tok") != NULL, "%s", out);
    rc = run_cli(o.path, "--context-policy window:x", out, sizeof out);
    cr_assert_neq(rc, 0);
    cr_assert(strstr(out, "--context-policy must be error, shift or window:W") != NULL, "%s", out);
    close_opened(&o);
}

/* A value of SWITCHYARD_KV_POSITIONS other than "params" (a typo) is
 * named in a warning; the run goes on with the positions read at run
 * time. */
Test(session, warns_of_an_unknown_kv_positions_value)
{
    opened o;
    open_synth(&o, "llama", SYNTH_LLAMA, 64, 11);
    char out[16384];
    cr_assert_eq(setenv("SWITCHYARD_KV_POSITIONS", "param", 1), 0);
    int rc = run_cli(o.path, "-p Hi -n 4 --devices cpu", out, sizeof out);
    unsetenv("SWITCHYARD_KV_POSITIONS");
    cr_assert_eq(rc, 0, "%s", out);
    cr_assert(strstr(out, "SWITCHYARD_KV_POSITIONS=param is not 'params'") != NULL, "%s", out);
    rc = run_cli(o.path, "-p Hi -n 4 --devices cpu", out, sizeof out);
    cr_assert_eq(rc, 0, "%s", out);
    cr_assert(strstr(out, "SWITCHYARD_KV_POSITIONS") == NULL, "%s", out);
    close_opened(&o);
}
