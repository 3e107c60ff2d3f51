/* plugin-check: the one conformance suite every plugin must pass, ours and
 * a vendor's.  It loads a plugin file itself (no runtime in between), hands
 * it its own host services, and checks the ABI table, describe(), buffers,
 * every (op, dtype, shape) case the plugin claims through supports()
 * against the reference kernels, the refusals' reasons, repeated
 * init/deinit and two plugin states used from two threads at once.
 * `switchyard plugin-check` (cmd_plugin_check.c) prints the results; the
 * tests link this code and read the report. */
#ifndef SY_TOOLS_PLUGIN_CHECK_H
#define SY_TOOLS_PLUGIN_CHECK_H

#include <stdbool.h>
#include <stdint.h>
#include <stdio.h>

#include "switchyard/switchyard.h"

typedef enum sy_pcheck_outcome {
    SY_PCHECK_PASS = 0,
    SY_PCHECK_FAIL = 1,
    SY_PCHECK_SKIP = 2,   /* not applicable (an optional entry the plugin lacks) */
    SY_PCHECK_REFUSED = 3 /* supports() refused the case, with a well-formed reason */
} sy_pcheck_outcome;

/* How closely device results must match the reference kernels. */
typedef enum sy_pcheck_tolerance {
    SY_PCHECK_TOL_AUTO = 0,  /* INT8 on NPUs and for block-quantised matmul weights, else FLOAT */
    SY_PCHECK_TOL_FLOAT = 1, /* float32 arithmetic (f16 where the op stores f16) */
    SY_PCHECK_TOL_INT8 = 2   /* int8 per-row activation quantisation (W8A8) allowed */
} sy_pcheck_tolerance;

typedef struct sy_pcheck_result {
    char group[16];   /* "abi", "lifecycle", "describe", "buffers", "ops", "threads" */
    char name[96];    /* unique within a device: "matmul q4_0 x f32 K=64 N=24 M=7" */
    int32_t device;   /* device index, -1 for plugin-wide checks */
    sy_pcheck_outcome outcome;
    char detail[320]; /* why it failed, the refusal reason, or the error measured */
} sy_pcheck_result;

typedef void (*sy_pcheck_result_fn)(void *user, const sy_pcheck_result *result);

typedef struct sy_pcheck_options {
    const char *path;      /* the plugin file */
    int32_t device;        /* device index to check; -1: every device */
    uint64_t seed;         /* random inputs; 0: a fresh seed (reported) */
    sy_pcheck_tolerance tolerance;
    bool verbose;          /* copy the plugin's log messages to stderr */
    sy_pcheck_result_fn on_result; /* called as each check completes; may be NULL */
    void *user;
} sy_pcheck_options;

typedef struct sy_pcheck_report {
    char path[512];
    char plugin[SY_NAME_MAX];  /* the table's name, once read */
    char version[SY_NAME_MAX];
    uint32_t abi_version;
    uint64_t seed;
    sy_pcheck_result *results;
    uint32_t n_results, cap_results;
    uint32_t passed, failed, skipped, refused;
} sy_pcheck_report;

/* Fills |opts| with defaults: every device, a fresh seed, AUTO tolerance. */
void sy_pcheck_options_init(sy_pcheck_options *opts);

/* Runs every check against the plugin at opts->path.
 * A failing check is a result, not an error: SY_OK means the suite ran
 * (read report->failed); an error means it could not run (out of memory).
 * Ownership: caller owns *out_report; free with sy_pcheck_report_destroy().
 * Thread-safety: safe for distinct reports; the plugin is loaded privately. */
sy_status sy_pcheck_run(const sy_pcheck_options *opts, sy_pcheck_report **out_report);

void sy_pcheck_report_destroy(sy_pcheck_report *report);

/* Returns the first result named |name| (on any device), or NULL. */
const sy_pcheck_result *sy_pcheck_find(const sy_pcheck_report *report, const char *name);

/* Returns "pass", "FAIL", "skip" or "refused". */
const char *sy_pcheck_outcome_name(sy_pcheck_outcome outcome);

/* Writes one table row for |result|. */
void sy_pcheck_print_result(FILE *f, const sy_pcheck_result *result);

/* Writes the closing lines: counts of refused and skipped cases, then
 * "N passed, N failed". */
void sy_pcheck_print_summary(FILE *f, const sy_pcheck_report *report);

/* Writes the whole report as one JSON object. */
sy_status sy_pcheck_write_json(FILE *f, const sy_pcheck_report *report);

#endif
