/* switchyard tune: shared pieces of cmd_tune.c (CLI, profiles, validation),
 * tune_bench.c (what is timed and how) and tune_fit.c (fitting the cost
 * model and writing profiles in the format scheduler/cost_profile.c reads). */
#ifndef SY_TOOLS_TUNE_H
#define SY_TOOLS_TUNE_H

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>
#include <stdio.h>

#include "switchyard/switchyard.h"

/* One timed shape class of one op on one device. */
typedef struct tune_sample {
    uint32_t op;    /* sy_op */
    int32_t dtype;  /* dtype of the node's first input */
    double flops, bytes;
    double seconds; /* sy__timing_estimate, the median over nodes of one class */
    char shape[96]; /* sy__cost_shape_label: "576x1536 f32:576x32" */
    char group[48]; /* sy__cost_shape_group: "576x1536" */
} tune_sample;

/* How one model step was calibrated: its nodes are timed one launch
 * each, but a session runs the step as one launch, which differs by a
 * factor (here 1.03-1.08 on the CPU: the lower quartile of a sum is not
 * the sum of lower quartiles, and long launches run a little slower).  The
 * step's samples are scaled by launch_s / nodes_s when that lies within
 * [TUNE_MIN_FACTOR, TUNE_MAX_FACTOR]; outside it the one-launch figure is
 * taken for preemption by other processes and not applied. */
#define TUNE_MIN_FACTOR 0.5
#define TUNE_MAX_FACTOR 1.25
#define TUNE_MAX_STEPS 16u

typedef struct tune_step_note {
    uint32_t tokens, past;
    double launch_s, nodes_s; /* the step as one launch; the sum of its nodes alone */
    /* What a node's own launch pays on top of its share of the step
     * (sync_s, subtracted from each node: a decode step's saving per
     * launch, (nodes_s - launch_s) / (nodes - 1), where positive), then
     * the factor that makes the rest add up to the step (scale). */
    double sync_s, scale;
    bool applied;
    /* The lower decile of the nodes' lone times (0: not known).  A price
     * every lone launch pays cannot exceed what the fastest launches take:
     * sync_s is capped at it (on the CPU a lone kv_write takes 0.1 us, so
     * a step's 1-2 us saving per node is no wait but time that the
     * longer nodes lose alone, and is left to scale). */
    double alone_low_s;
} tune_step_note;

/* The token tile of matmuls on one weight dtype (tune_tile.c): time
 * rises in whole tiles of |tokens| tokens from |from| tokens on (0: no
 * tile), as measured at 2, 4, 8, 16, 32, 33 and 64 tokens (|seconds|). */
#define TUNE_TILE_COUNTS 7u
#define TUNE_MAX_TILES 8u

typedef struct tune_tile {
    int32_t dtype; /* sy_dtype of the weights */
    uint32_t tokens, from;
    double seconds[TUNE_TILE_COUNTS];
} tune_tile;

typedef struct tune_samples {
    tune_sample *v;
    uint32_t n, cap;
    tune_step_note steps[TUNE_MAX_STEPS]; /* model steps timed in place */
    uint32_t n_steps;
    /* The device's launch_sync_s: the median of its decode steps' sync_s
     * (0 without a model, or where lone launches cost no more). */
    double launch_sync_s;
    tune_tile tiles[TUNE_MAX_TILES]; /* per matmul weight dtype timed */
    uint32_t n_tiles;
} tune_samples;

sy_status tune_samples_add(tune_samples *s, const tune_sample *x);
void tune_samples_free(tune_samples *s);

/* Fitted model of one (op, dtype): overhead + s_per_flop * flops +
 * s_per_byte * bytes, non-negative, minimising the squared relative error. */
typedef struct tune_fit {
    double overhead_s, s_per_flop, s_per_byte;
    double median_rel_err; /* of the fit on its own samples */
    double max_rel_err;
} tune_fit;

/* Fits |n| samples (op and dtype ignored).  SY_E_INVALID_ARG when n == 0. */
sy_status tune_fit_samples(const tune_sample *v, uint32_t n, tune_fit *out_fit);

/* Predicted seconds of |fit| for the given counts. */
double tune_fit_predict(const tune_fit *fit, double flops, double bytes);

/* A measured transfer from the profile's device to device |to|. */
typedef struct tune_link {
    const char *to;
    double bandwidth, latency_s, sync_s; /* bandwidth 0: leave out */
} tune_link;

#define TUNE_MAX_LINKS 16u

/* What a device profile carries besides its op entries. */
typedef struct tune_device_info {
    const char *device, *plugin, *plugin_version, *version;
    double peak_flops, peak_bandwidth, launch_overhead_s; /* 0: leave out */
    double launch_sync_s;                                 /* 0: leave out */
    tune_link links[TUNE_MAX_LINKS];
    uint32_t n_links;
    const struct tune_threads *threads; /* the CPU's thread count, or NULL */
    const struct tune_option *options;  /* plugin settings tune chose */
    uint32_t n_options;
} tune_device_info;

/* The CPU thread count tune chose (tune_threads.c): every count measured
 * and the one that serves a prompt of prefill_tokens plus decode_steps
 * generated tokens fastest. */
#define TUNE_MAX_THREAD_COUNTS 16u
#define TUNE_THREADS_DECODE_STEPS 128u

typedef struct tune_threads {
    uint32_t n;
    uint32_t threads[TUNE_MAX_THREAD_COUNTS];
    double decode_s[TUNE_MAX_THREAD_COUNTS], prefill_s[TUNE_MAX_THREAD_COUNTS];
    uint32_t best;
    uint32_t prefill_tokens, decode_steps;
} tune_threads;

/* A plugin setting tune chose by measurement (tune_threads.c): the
 * environment variable the plugin reads when it starts, every value
 * tried with the model's decode and prefill steps as one launch each
 * (medians over rounds that alternate between the values, each value in
 * a runtime of its own, all alive together), and the value that serves a
 * prompt of prefill_tokens plus decode_steps generated tokens fastest
 * (the first value, the plugin's default, unless another is faster by
 * TUNE_OPTION_MARGIN; a value TUNE_OPTION_DROP times slower than the best
 * in the first round is not timed again).
 * Stored in the profile's "options" (docs/profiles.md); `run`, `bench`
 * and `plan` set it before the plugin starts unless the user did. */
#define TUNE_MAX_OPTION_VALUES 6u
#define TUNE_OPTION_MARGIN 0.03
#define TUNE_OPTION_DROP 1.5 /* after the first round, slower than this x the best: dropped */
#define TUNE_MAX_OPTIONS 4u

typedef struct tune_option {
    char name[48];
    uint32_t n;
    char values[TUNE_MAX_OPTION_VALUES][16];
    double decode_s[TUNE_MAX_OPTION_VALUES], prefill_s[TUNE_MAX_OPTION_VALUES];
    uint32_t best; /* index into values */
    uint32_t prefill_tokens, decode_steps;
} tune_option;

struct tune_opts;

/* Tunes |name| (an environment variable |plugin| reads at init) over
 * |values| for |device| with the model at |model_path|: one runtime per
 * value loading only |plugin|, alternating rounds (tune_option).  The
 * variable is restored afterwards.  SY_OK when every value was measured. */
sy_status tune_plugin_option(const char *model_path, const char *plugin, const char *device,
                             const char *name, const char *const *values, uint32_t n_values,
                             const struct tune_opts *o, tune_option *out);

/* Calls |apply| for every (name, value) of the "options" object of the
 * profile at |path| whose name starts with SWITCHYARD_ and whose value is
 * plain ([A-Za-z0-9_.-], under 64 characters).  Returns how many, or -1
 * when the file does not read as JSON or (|device| not NULL) describes
 * another device. */
int tune_profile_options(const char *path, const char *device,
                         void (*apply)(const char *name, const char *value, void *ctx), void *ctx);

/* Times the decode (after o->decode_past) and prefill (o->prefill_tokens)
 * steps of the model at |model_path| on the cpu plugin with 1, 2, 4, ...
 * |cores| threads, each in a runtime of its own; SWITCHYARD_THREADS is
 * restored afterwards.  SY_OK when at least one count was measured. */
sy_status tune_cpu_threads(const char *model_path, uint32_t cores, const struct tune_opts *o,
                           tune_threads *out);

/* The thread count stored in the cpu profile at |path|, or 0 (no file, no
 * "threads" object). */
uint32_t tune_profile_threads(const char *path);

/* Writes the profile JSON (profiles/schema.json) of one device from its
 * samples: per (op, dtype) the fit and every shape class as a point.
 * Ownership: caller frees *out_json. */
sy_status tune_profile_json(const tune_device_info *info, const tune_samples *s, char **out_json);

/* Times the standard set (no model) or every distinct node of the model's
 * decode and prefill steps on device |dev|, appending to |out|.
 * |m| may be NULL.  Nodes the device cannot run are skipped (counted in
 * *out_skipped). */
typedef struct tune_opts tune_opts;
struct tune_opts {
    bool quick;
    bool verbose;
    uint32_t prefill_tokens; /* tokens of the prefill graph */
    uint32_t decode_past;    /* context before the decode token */
};

sy_status tune_device(sy_runtime *rt, uint32_t dev, sy_model *m, const tune_opts *o,
                      tune_samples *out, uint32_t *out_skipped);

/* A one-node graph of |op| on fresh leaves shaped like |inputs| (their
 * dtype, shape and role: weights and KV stay so, the rest become inputs),
 * holding |data|[k] where given.  Ownership: caller owns *out_g. */
sy_status tune_node_graph(sy_op op, const sy_tensor *const *inputs, void *const *data,
                          uint32_t n_inputs, const sy_op_params *params, sy_graph **out_g);

/* Measures the token tile of |dev|'s matmul on |dtype| weights
 * (tune_tile.c).  SY_E_UNSUPPORTED when the device cannot run it. */
sy_status tune_token_tile(sy_runtime *rt, uint32_t dev, sy_dtype dtype, const tune_opts *o,
                          tune_tile *out);

/* The tile (0: none) and, in *out_from, the count it applies from, of
 * times |t| at 2, 4, 8, 16, 32, 33 and 64 tokens. */
uint32_t tune_tile_from_times(const double *t, uint32_t *out_from);

/* Measures the token tile of every matmul weight dtype among |s|'s
 * samples into s->tiles (one a dtype; dtypes the device refuses at the
 * tile probe's size are left out). */
sy_status tune_token_tiles(sy_runtime *rt, uint32_t dev, const tune_opts *o, tune_samples *s);

/* Passes a short step may get (tune_time_sequence), and the seconds its
 * passes (nodes alone and the step as one launch) may take together. */
#define TUNE_MAX_REPS 45u
#define TUNE_SEQUENCE_S 0.5

/* Timed repetitions per measurement: 5 with --quick, else 9. */
static inline uint32_t tune_reps(const tune_opts *o)
{
    return o->quick ? 5u : 9u;
}

/* The steps a model is tuned on, as {tokens, past} pairs: decode at
 * decode_past and 4x it (and a quarter of it without --quick), prefill of
 * prefill_tokens and a quarter of them (without --quick also 1/8, 3/8,
 * 1/2, 5/8, 3/4, 3/2 and 2x).  Returns the count, at most |max|. */
uint32_t tune_model_steps(const tune_opts *o, uint32_t out_steps[][2], uint32_t max);

/* Times every node of |g| (bound in |b|) one launch at a time, in graph
 * order, over |reps| passes after a warm one (multiples of |reps| up to
 * TUNE_MAX_REPS when they fit in TUNE_SEQUENCE_S); out_s[i] is node i's
 * sy__timing_estimate() (0 for views).  With |out_step_s| (may be NULL)
 * the whole step is also timed as one launch after every pass, and
 * *out_step_s is its estimate; with |out_spread| (may be NULL) too,
 * out_spread->iqr gets the interquartile range of those one-launch
 * passes over their median and out_spread->passes their count.  |out_s|
 * has sy_graph_node_count(g) entries. */
typedef struct sy_bench sy_bench;
typedef struct tune_spread {
    double iqr;
    uint32_t passes;
} tune_spread;
sy_status tune_time_sequence(sy_bench *b, sy_graph *g, uint32_t reps, double *out_s,
                             double *out_step_s, tune_spread *out_spread);

/* Splits a step's lone-launch overhead from its nodes' own time
 * (tune_step_note): with |sync_s| < 0 the step's own saving per launch
 * (decode), else |sync_s| (the device's, for longer steps); then the
 * scale that makes the nodes add up to the step as one launch.  Neither
 * is applied (applied false, sync_s 0, scale 1) when the scale falls
 * outside [TUNE_MIN_FACTOR, TUNE_MAX_FACTOR]: other processes preempted
 * the launches.  sync_s is capped at n->alone_low_s when that is set. */
void tune_step_split(tune_step_note *n, uint32_t n_nodes, double sync_s);

/* A node's share of the step as one launch from its time alone:
 * (alone - sync_s) * scale, never under a quarter of the lone time. */
double tune_node_in_step(const tune_step_note *n, double alone_s);

/* The lower decile of the positive entries of |t|[0..n) (0 when none):
 * tune_step_note.alone_low_s of a step's lone node times. */
double tune_alone_low(const double *t, uint32_t n);

/* The median sync_s of |s|'s applied decode steps, or 0. */
double tune_launch_sync(const tune_samples *s);

/* Predicted against measured for one step of a model on one device. */
typedef struct tune_step_report {
    uint32_t tokens, past;
    bool not_run; /* the device cannot run the whole step (|why|) */
    char why[256];
    uint32_t n_nodes, n_unmeasured; /* views not counted */
    /* |predicted - measured| / measured over the nodes: median and 90th
     * percentile, and the sum of |predicted - measured| over the sum of
     * measured (time-weighted). */
    double node_median, node_p90, node_weighted;
    /* The median against each node alone times step_factor (launch_s /
     * nodes_s within [TUNE_MIN_FACTOR, TUNE_MAX_FACTOR], else 1): its share
     * of the step as one launch, what tune's points stand for. */
    double node_median_in_step, step_factor;
    /* The device's price per launch in the plan (its profile's
     * launch_sync_s): a node alone is predicted as its cost in the plan
     * plus this. */
    double sync_s;
    double predicted_s;       /* the planner's step (sy_plan_summary.predicted_s) */
    double predicted_nodes_s; /* sum of the nodes' predictions as lone launches */
    uint32_t n_transfers;     /* transfers in the plan (host inputs, ...) */
    double launch_s;    /* the step measured as one launch (what a session runs) */
    tune_spread launch_spread; /* of launch_s's passes: how noisy the machine was */
    double nodes_s;     /* sum of the nodes measured one launch each */
} tune_step_report;

/* Plans |m|'s step (|T| tokens after |past|) on device |dev| alone with
 * |pl| (holding the profile to validate; plans are made afresh) and
 * measures it as tune does (tune_time_sequence with tune_reps(o) passes):
 * the plan's node costs against each node, the plan's step against the
 * step as one launch.  With |report| (may be NULL) prints the summary, a
 * table per op family and, with o->verbose, every node.  A device that
 * cannot run or plan the whole step gives SY_OK with out->not_run set. */
sy_status tune_validate_step(sy_runtime *rt, uint32_t dev, sy_planner *pl, const sy_model *m,
                             uint32_t T, uint32_t past, const tune_opts *o, FILE *report,
                             tune_step_report *out);

/* Prints the summary lines of |r| for device |device|. */
void tune_print_step_report(const char *device, const tune_step_report *r, FILE *f);

/* The 1-minute load average of this machine, or -1. */
double tune_load_average(void);

/* Builds the decode (n_tokens 1) or prefill graph of |m| the way a session
 * does.  Ownership: caller frees *out_graph and then *out_scratch. */
sy_status tune_build_step(const sy_model *m, uint32_t n_tokens, uint32_t n_past,
                          sy_graph **out_graph, void **out_scratch);

#endif
