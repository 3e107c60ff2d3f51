/* switchyard tune --validate: the scheduler's predictions against
 * measurements of a model's decode or prefill step, per node and per step.
 * The predictions are the planner's own: the step is planned on the one
 * device (a planner holding the tuned profile), and the plan's per-node
 * costs and its step time (segments with their launch_sync_s, transfers)
 * are what is compared.  Nodes are timed exactly as tune times them
 * (tune_time_sequence), and the step also as one launch, which is what a
 * session runs. */
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "cost_model.h"
#include "probe.h"
#include "tune.h"

/* Per op family: how much of the step it is and how well it is predicted. */
typedef struct tv_family {
    uint32_t n;
    double pred, meas;
    double *err; /* |relative error| per node */
} tv_family;

static void tv_print_families(tv_family *fam, double meas_total, FILE *f)
{
    fprintf(f, "    %-10s %5s %6s %12s %10s\n", "op", "nodes", "time", "median|err|", "pred/meas");
    for (uint32_t op = 0; op < SY_OP_COUNT; op++) {
        tv_family *x = &fam[op];
        if (x->n == 0)
            continue;
        fprintf(f, "    %-10s %5u %5.1f%% %11.1f%% %10.2f\n", sy_op_name((sy_op)op), x->n,
                100 * x->meas / meas_total, 100 * sy__quantile(x->err, x->n, 0.5),
                x->meas > 0 ? x->pred / x->meas : 0.0);
    }
}

/* Plans |g| on device |dev| alone; pred[i] gets each node's cost (0 for
 * views), *out_sync the device's price per launch (a segment's time less
 * its nodes'), *out_step_s the plan's step. */
static sy_status tv_plan(sy_runtime *rt, uint32_t dev, sy_planner *pl, const sy_graph *g,
                         double *pred, bool *unmeasured, double *out_sync, double *out_step_s,
                         uint32_t *out_transfers)
{
    sy_device_desc d;
    sy_status st = sy_runtime_query_device(rt, dev, &d);
    if (st != SY_OK)
        return st;
    sy_plan_options po;
    sy_plan_options_init(&po);
    po.devices = d.name;
    po.no_cache = true;
    sy_plan *plan = NULL;
    st = sy_planner_plan(pl, g, &po, &plan);
    if (st != SY_OK)
        return st;
    uint32_t nn = sy_graph_node_count(g);
    for (uint32_t i = 0; i < nn && st == SY_OK; i++) {
        sy_plan_node_info ni;
        st = sy_plan_query_node(plan, i, &ni);
        pred[i] = st == SY_OK && !ni.is_view ? ni.predicted_s : 0.0;
        unmeasured[i] = st == SY_OK && !ni.is_view && ni.unmeasured;
    }
    *out_sync = 0;
    *out_transfers = 0;
    for (uint32_t k = 0; k < sy_plan_step_count(plan) && st == SY_OK; k++) {
        sy_plan_step_info si;
        st = sy_plan_query_step(plan, k, &si);
        if (st != SY_OK || si.kind != SY_PLAN_STEP_SEGMENT) {
            *out_transfers += st == SY_OK;
            continue;
        }
        double nodes = 0;
        for (uint32_t j = 0; j < si.n_nodes; j++)
            nodes += pred[si.nodes[j]];
        *out_sync = si.predicted_s - nodes > 0 ? si.predicted_s - nodes : 0.0;
    }
    sy_plan_summary sum;
    if (st == SY_OK)
        st = sy_plan_query_summary(plan, &sum);
    *out_step_s = st == SY_OK ? sum.predicted_s : 0.0;
    sy_plan_release(plan);
    return st;
}

sy_status tune_validate_step(sy_runtime *rt, uint32_t dev, sy_planner *pl, const sy_model *m,
                             uint32_t T, uint32_t past, const tune_opts *o, FILE *report,
                             tune_step_report *out)
{
    memset(out, 0, sizeof *out);
    out->tokens = T;
    out->past = past;
    sy_graph *g = NULL;
    void *scratch = NULL;
    sy_status st = tune_build_step(m, T, past, &g, &scratch);
    if (st != SY_OK)
        return st;
    sy_bench *b = NULL;
    st = sy_bench_create(rt, g, dev, &b);
    if (st != SY_OK) {
        out->not_run = true;
        snprintf(out->why, sizeof out->why, "%s", sy_runtime_last_error(rt));
        sy_graph_destroy(g);
        free(scratch);
        return SY_OK;
    }
    uint32_t nn = sy_graph_node_count(g);
    double *meas = calloc(nn + 1u, sizeof *meas), *err = calloc(nn + 1u, sizeof *err);
    double *pred = calloc(nn + 1u, sizeof *pred);
    double *fam_err = calloc(nn + 1u, sizeof *fam_err);
    tv_family *fam = calloc(SY_OP_COUNT, sizeof *fam);
    bool *unmeasured = calloc(nn + 1u, sizeof *unmeasured);
    if (!meas || !err || !pred || !fam_err || !fam || !unmeasured) {
        st = SY_E_NO_MEMORY;
        goto out_free;
    }
    double sync = 0, plan_s = 0;
    st = tv_plan(rt, dev, pl, g, pred, unmeasured, &sync, &plan_s, &out->n_transfers);
    if (st != SY_OK) {
        out->not_run = true;
        snprintf(out->why, sizeof out->why, "not planned: %s", sy_planner_last_error(pl));
        st = SY_OK;
        goto out_free;
    }
    st = tune_time_sequence(b, g, tune_reps(o), meas, &out->launch_s, &out->launch_spread);
    if (st != SY_OK)
        goto out_free;
    /* A node's prediction is its share of a step; launched and waited
     * for alone it is a segment of its own and pays the device's
     * launch_sync_s, as the plan's one segment does once. */
    out->sync_s = sync;
    uint32_t ne = 0;
    double abs_sum = 0;
    for (uint32_t i = 0; i < nn; i++) {
        const sy_node *n = sy_graph_node(g, i);
        if (sy_op_is_view(n->op))
            continue;
        out->n_unmeasured += unmeasured[i];
        pred[i] += sync;
        out->predicted_nodes_s += pred[i];
        out->nodes_s += meas[i];
        abs_sum += fabs(pred[i] - meas[i]);
        err[ne++] = meas[i] > 0 ? fabs(pred[i] - meas[i]) / meas[i] : 0;
        fam[n->op].n++;
        fam[n->op].pred += pred[i];
        fam[n->op].meas += meas[i];
    }
    out->predicted_s = plan_s;
    out->n_nodes = ne;
    out->node_weighted = out->nodes_s > 0 ? abs_sum / out->nodes_s : 0;
    /* Each family's errors in one slice of fam_err. */
    uint32_t used = 0;
    for (uint32_t op = 0; op < SY_OP_COUNT; op++) {
        fam[op].err = fam_err + used;
        used += fam[op].n;
        fam[op].n = 0;
    }
    for (uint32_t i = 0; i < nn; i++) {
        const sy_node *n = sy_graph_node(g, i);
        if (!sy_op_is_view(n->op))
            fam[n->op].err[fam[n->op].n++] = meas[i] > 0 ? fabs(pred[i] - meas[i]) / meas[i] : 0;
    }
    out->node_p90 = sy__quantile(err, ne, 0.9);
    out->node_median = sy__quantile(err, ne, 0.5);
    /* Against each node's share of the step as one launch: its time alone
     * split as tune splits samples (tune_step_note, with the profile's
     * launch_sync_s), which is what a profile's points stand for on a
     * device whose lone launches pay a wait the step pays once. */
    tune_step_note note = {.tokens = T, .past = past, .launch_s = out->launch_s,
                           .nodes_s = out->nodes_s, .alone_low_s = tune_alone_low(meas, nn)};
    tune_step_split(&note, out->n_nodes, sync);
    out->step_factor = note.scale;
    ne = 0;
    for (uint32_t i = 0; i < nn; i++) {
        if (sy_op_is_view(sy_graph_node(g, i)->op))
            continue;
        double in = tune_node_in_step(&note, meas[i]), p = pred[i] - sync;
        err[ne++] = in > 0 ? fabs(p - in) / in : 0;
    }
    out->node_median_in_step = sy__quantile(err, ne, 0.5);
    if (report) {
        {
            sy_device_desc d;
            sy_runtime_query_device(rt, dev, &d);
            tune_print_step_report(d.name, out, report);
        }
        tv_print_families(fam, out->nodes_s, report);
    }
    if (report && o->verbose) {
        fprintf(report, "    %-34s %-9s %-5s %11s %11s %8s\n", "node", "op", "dtype",
                "predicted", "measured", "error");
        for (uint32_t i = 0; i < nn; i++) {
            const sy_node *n = sy_graph_node(g, i);
            if (sy_op_is_view(n->op))
                continue;
            fprintf(report, "    %-34s %-9s %-5s %8.1f us %8.1f us %+7.1f%%%s\n", n->name,
                    sy_op_name((sy_op)n->op), sy_dtype_name(n->inputs[0]->dtype), pred[i] * 1e6,
                    meas[i] * 1e6, meas[i] > 0 ? 100 * (pred[i] - meas[i]) / meas[i] : 0.0,
                    unmeasured[i] ? " [unmeasured]" : "");
        }
    }
out_free:
    free(unmeasured);
    free(fam);
    free(fam_err);
    free(pred);
    free(err);
    free(meas);
    sy_bench_destroy(b);
    sy_graph_destroy(g);
    free(scratch);
    return st;
}

void tune_print_step_report(const char *device, const tune_step_report *r, FILE *f)
{
    char what[64];
    if (r->tokens == 1)
        snprintf(what, sizeof what, "decode, 1 token after %u", r->past);
    else
        snprintf(what, sizeof what, "prefill, %u tokens", r->tokens);
    if (r->not_run) {
        fprintf(f, "  %s %s: not run: %s\n", device, what, r->why);
        return;
    }
    fprintf(f, "  %s %s: %u nodes, %u unmeasured\n", device, what, r->n_nodes, r->n_unmeasured);
    fprintf(f,
            "    per node |error|: median %.1f%%, p90 %.1f%%, time-weighted %.1f%% (vs each node "
            "alone, predicted + %.1f us launch sync); median %.1f%% vs its share of the "
            "one-launch step (x%.3f)\n",
            100 * r->node_median, 100 * r->node_p90, 100 * r->node_weighted, r->sync_s * 1e6,
            100 * r->node_median_in_step, r->step_factor);
    fprintf(f,
            "    step: predicted %.3f ms by the plan (%u transfer%s), measured %.3f ms as one "
            "launch (%+.1f%%; lower quartile of %u passes, their IQR %.1f%% of the median) | "
            "predicted %.3f ms, measured %.3f ms node by node (%+.1f%%)\n",
            r->predicted_s * 1e3, r->n_transfers, r->n_transfers == 1 ? "" : "s",
            r->launch_s * 1e3,
            r->launch_s > 0 ? 100 * (r->predicted_s - r->launch_s) / r->launch_s : 0.0,
            r->launch_spread.passes, 100 * r->launch_spread.iqr,
            r->predicted_nodes_s * 1e3, r->nodes_s * 1e3,
            r->nodes_s > 0 ? 100 * (r->predicted_nodes_s - r->nodes_s) / r->nodes_s : 0.0);
}

double tune_load_average(void)
{
    FILE *f = fopen("/proc/loadavg", "r");
    double load = -1;
    if (f) {
        if (fscanf(f, "%lf", &load) != 1)
            load = -1;
        fclose(f);
    }
    return load;
}
