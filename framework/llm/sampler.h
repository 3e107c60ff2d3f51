/* Token sampler: turns one step's logits into the next token id.
 *
 * The chain, in the order llama.cpp applies it:
 *
 *   repetition penalty  tokens seen in the last |repeat_last_n| accepted
 *                       tokens: positive logits are divided by the
 *                       penalty, negative ones multiplied (each distinct
 *                       token once, however often it occurred)
 *   greedy              when temperature <= 0: the arg max, the lowest id
 *                       on ties; nothing below runs and no randomness is used
 *   top-k               keep the k largest logits (ties: lower id first)
 *   softmax             p_i = exp((l_i - l_max) / T) / sum over the kept set
 *                       (a token whose weight exp((l_i - l_max) / T) is
 *                       below e^-87 counts as probability 0)
 *   top-p               keep the smallest prefix, in order of decreasing p,
 *                       whose mass reaches top_p
 *   min-p               drop tokens with p < min_p * p_max
 *   draw                renormalise what is left and draw one token with the
 *                       sampler's own xoshiro256** state, seeded from |seed|
 *
 * Cost per token for a vocabulary of V, all O(V) with no sort of the
 * vocabulary: greedy is a vectorised max and a scan; top-k with k <= 4096
 * is a bounded heap filled in one pass (larger k: quickselect); the
 * softmax weights of the full vocabulary come from a vectorised exp; top-p
 * over the full vocabulary sums the weights into 2033 buckets by the
 * top bits of their float encoding, finds the bucket where the mass
 * crosses top_p, and runs an exact mass-guided quickselect inside that
 * bucket only (the draw needs no order).  Top-p and min-p both keep a prefix of the same order, so
 * min-p is applied as a filter first, which usually leaves a handful of
 * tokens.  Measured on one core of a quiet development machine, V = 262144
 * (tests/llm/test_sampler.c prints it): greedy ~0.05 ms, the defaults of
 * sy_sampler_params_init() ~0.15 ms, full-vocabulary top-p ~2 ms.
 *
 * NaN logits count as -inf and +inf as the largest float; a step whose
 * logits are all NaN or -inf (after the penalty) is an error.
 *
 * This is a library-internal API of libswitchyard (framework/llm), used by
 * the generate loop and the tests; it is not installed. */
#ifndef SWITCHYARD_LLM_SAMPLER_H
#define SWITCHYARD_LLM_SAMPLER_H

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

#include "switchyard/status.h"

#ifdef __cplusplus
extern "C" {
#endif

#define SY_SAMPLER_ERROR_MAX 256u            /* size of an error message buffer */
#define SY_SAMPLER_MAX_LAST_N (1u << 20)     /* largest repeat_last_n accepted */

/* Settings of one sampler; the values named "off" disable a stage. */
typedef struct sy_sampler_params {
    float temperature;      /* <= 0: greedy; finite */
    uint32_t top_k;         /* 0 or >= n_vocab: off */
    float top_p;            /* (0, 1]; 1: off */
    float min_p;            /* [0, 1]; 0: off */
    float repeat_penalty;   /* > 0, finite; 1: off */
    uint32_t repeat_last_n; /* window of accepted tokens penalised; 0: off */
    uint64_t seed;          /* same seed, same logits, same tokens */
} sy_sampler_params;

/* Error text of a failed sy_sampler_create(). */
typedef struct sy_sampler_error {
    char msg[SY_SAMPLER_ERROR_MAX];
} sy_sampler_error;

/* One token of the kept set, as sy_sampler_query_candidates() reports it. */
typedef struct sy_sampler_candidate {
    int32_t token;
    float logit;  /* after the repetition penalty, before temperature */
    float prob;   /* renormalised over the kept set */
} sy_sampler_candidate;

typedef struct sy_sampler sy_sampler;

/* Fills |params| with the defaults of the CLI: temperature 0.8, top_k 40,
 * top_p 0.95, min_p 0.05, repeat_penalty 1 (off), repeat_last_n 64,
 * seed 0.  Thread-safety: safe. */
void sy_sampler_params_init(sy_sampler_params *params);

/* Checks |params| for a vocabulary of |n_vocab| tokens without creating a
 * sampler.  Returns SY_E_INVALID_ARG (NaN or infinite temperature, top_p
 * outside (0, 1], min_p outside [0, 1], repeat_penalty not positive and
 * finite, n_vocab 0, NULL params) or SY_E_LIMIT (n_vocab past INT32_MAX,
 * repeat_last_n past SY_SAMPLER_MAX_LAST_N); when |out_err| is not NULL
 * its msg names the field and the value ("" on success).
 * Thread-safety: safe. */
sy_status sy_sampler_params_check(const sy_sampler_params *params, uint32_t n_vocab,
                                  sy_sampler_error *out_err);

/* Creates a sampler for logits of |n_vocab| floats, checking |params| as
 * sy_sampler_params_check() does.  Allocates about 21 bytes per vocabulary
 * entry once (5.3 MiB for 262144 tokens); sy_sampler_sample() allocates
 * nothing itself (only qsort() may, in the rare fallback of a quickselect
 * that makes no progress).
 * On error *out_sampler is NULL and out_err->msg (when not NULL) says why.
 * Ownership: caller owns *out_sampler; free with sy_sampler_destroy().
 * Thread-safety: one thread per sampler; distinct samplers are
 * independent. */
sy_status sy_sampler_create(const sy_sampler_params *params, uint32_t n_vocab,
                            sy_sampler **out_sampler, sy_sampler_error *out_err);

/* Frees |s|.  NULL is a no-op. */
void sy_sampler_destroy(sy_sampler *s);

/* Returns the message of the last failed call on |s|, or "".
 * Ownership: owned by |s|, valid until the next call on |s|. */
const char *sy_sampler_last_error(const sy_sampler *s);

/* Chooses the next token from |logits| (n_vocab floats, not modified)
 * through the chain above.  Does not record the token: call
 * sy_sampler_accept() with the token actually used.
 * Errors: SY_E_INVALID_ARG for NULL arguments or logits that are all NaN
 * or -inf; *out_token is then -1 and the PRNG has not advanced.
 * Borrowed: |logits| only during the call. */
sy_status sy_sampler_sample(sy_sampler *s, const float *logits, int32_t *out_token);

/* Records |token| in the repetition-penalty window (prompt tokens too,
 * when they should count).  SY_E_INVALID_ARG for a token outside
 * [0, n_vocab); the window is then unchanged. */
sy_status sy_sampler_accept(sy_sampler *s, int32_t token);

/* Forgets the accepted tokens and reseeds the PRNG from params.seed, so
 * that the same logits give the same tokens again.  NULL is a no-op. */
void sy_sampler_reset(sy_sampler *s);

/* Reports the set sy_sampler_sample() would draw from for |logits|, with
 * renormalised probabilities, in order of decreasing probability (lower id
 * first on ties); the greedy path reports its one token with prob 1.
 * Advances no state.  Writes min(kept, cap) entries to |out| (which may be
 * NULL when |cap| is 0) and sets *out_n to the size of the kept set, so a
 * call with cap 0 asks for the size.  Costs a sort of the kept set: for
 * tests and explanations, not for the generate loop.
 * Errors as sy_sampler_sample(); *out_n is then 0. */
sy_status sy_sampler_query_candidates(sy_sampler *s, const float *logits,
                                      sy_sampler_candidate *out, size_t cap, size_t *out_n);

#ifdef __cplusplus
}
#endif
#endif
