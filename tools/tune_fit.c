/* Fitting the cost model to timed shape classes, and writing the device
 * profile the scheduler reads (profiles/schema.json, docs/profiles.md). */
#include <cjson/cJSON.h>
#include <math.h>
#include <stdlib.h>
#include <string.h>

#include "tune.h"

sy_status tune_samples_add(tune_samples *s, const tune_sample *x)
{
    if (s->n == s->cap) {
        uint32_t cap = s->cap ? s->cap * 2 : 64;
        tune_sample *v = realloc(s->v, cap * sizeof *v);
        if (!v)
            return SY_E_NO_MEMORY;
        s->v = v;
        s->cap = cap;
    }
    s->v[s->n++] = *x;
    return SY_OK;
}

void tune_samples_free(tune_samples *s)
{
    free(s->v);
    memset(s, 0, sizeof *s);
}

double tune_fit_predict(const tune_fit *fit, double flops, double bytes)
{
    return fit->overhead_s + fit->s_per_flop * flops + fit->s_per_byte * bytes;
}

/* Solves the k x k system a x = b in place (Gaussian elimination with
 * partial pivoting); false when singular. */
static bool fit_solve(double a[3][3], double b[3], int k, double x[3])
{
    for (int c = 0; c < k; c++) {
        int piv = c;
        for (int r = c + 1; r < k; r++)
            if (fabs(a[r][c]) > fabs(a[piv][c]))
                piv = r;
        if (fabs(a[piv][c]) < 1e-12)
            return false;
        for (int j = 0; j < k; j++) {
            double t = a[c][j];
            a[c][j] = a[piv][j];
            a[piv][j] = t;
        }
        double t = b[c];
        b[c] = b[piv];
        b[piv] = t;
        for (int r = c + 1; r < k; r++) {
            double f = a[r][c] / a[c][c];
            for (int j = c; j < k; j++)
                a[r][j] -= f * a[c][j];
            b[r] -= f * b[c];
        }
    }
    for (int r = k - 1; r >= 0; r--) {
        double s = b[r];
        for (int j = r + 1; j < k; j++)
            s -= a[r][j] * x[j];
        x[r] = s / a[r][r];
    }
    return true;
}

static int fit_cmp(const void *a, const void *b)
{
    double x = *(const double *)a, y = *(const double *)b;
    return x < y ? -1 : x > y;
}

/* Relative errors of |f| on the samples: median and max. */
static void fit_errors(tune_fit *f, const tune_sample *v, uint32_t n)
{
    double *e = malloc(n * sizeof *e);
    f->median_rel_err = f->max_rel_err = 0;
    if (!e)
        return;
    for (uint32_t i = 0; i < n; i++) {
        e[i] = fabs(tune_fit_predict(f, v[i].flops, v[i].bytes) - v[i].seconds) / v[i].seconds;
        if (e[i] > f->max_rel_err)
            f->max_rel_err = e[i];
    }
    qsort(e, n, sizeof *e, fit_cmp);
    f->median_rel_err = n % 2 ? e[n / 2] : 0.5 * (e[n / 2 - 1] + e[n / 2]);
    free(e);
}

sy_status tune_fit_samples(const tune_sample *v, uint32_t n, tune_fit *out_fit)
{
    memset(out_fit, 0, sizeof *out_fit);
    if (n == 0)
        return SY_E_INVALID_ARG;
    /* Columns scaled to their largest value so the normal equations stay
     * well conditioned whatever the units. */
    double scale[3] = {1, 0, 0};
    for (uint32_t i = 0; i < n; i++) {
        scale[1] = fmax(scale[1], v[i].flops);
        scale[2] = fmax(scale[2], v[i].bytes);
    }
    /* Non-negative least squares by enumeration: with three terms, every
     * subset of active terms is tried and the best non-negative solution
     * kept.  Weights 1/t^2 make it minimise the relative error, so small
     * overhead-bound ops matter as much as large ones. */
    double best_err = INFINITY;
    for (int mask = 1; mask < 8; mask++) {
        int cols[3], k = 0;
        for (int c = 0; c < 3; c++)
            if ((mask >> c) & 1 && scale[c] > 0)
                cols[k++] = c;
        if (k == 0 || (uint32_t)k > n)
            continue;
        double a[3][3] = {{0}}, b[3] = {0}, x[3] = {0};
        for (uint32_t i = 0; i < n; i++) {
            double feat[3] = {1.0, 0, 0};
            feat[1] = scale[1] > 0 ? v[i].flops / scale[1] : 0;
            feat[2] = scale[2] > 0 ? v[i].bytes / scale[2] : 0;
            double w = 1.0 / (v[i].seconds * v[i].seconds);
            for (int r = 0; r < k; r++) {
                for (int c = 0; c < k; c++)
                    a[r][c] += w * feat[cols[r]] * feat[cols[c]];
                b[r] += w * feat[cols[r]] * v[i].seconds;
            }
        }
        if (!fit_solve(a, b, k, x))
            continue;
        bool ok = true;
        double coef[3] = {0, 0, 0};
        for (int r = 0; r < k; r++) {
            if (!(x[r] >= 0) || !isfinite(x[r]))
                ok = false;
            coef[cols[r]] = x[r] / scale[cols[r]];
        }
        if (!ok)
            continue;
        tune_fit f = {.overhead_s = coef[0], .s_per_flop = coef[1], .s_per_byte = coef[2]};
        double err = 0;
        for (uint32_t i = 0; i < n; i++) {
            double r = (tune_fit_predict(&f, v[i].flops, v[i].bytes) - v[i].seconds) / v[i].seconds;
            err += r * r;
        }
        if (err < best_err) {
            best_err = err;
            *out_fit = f;
        }
    }
    if (!isfinite(best_err)) {
        /* Only possible when every sample counts nothing: a constant. */
        double sum = 0;
        for (uint32_t i = 0; i < n; i++)
            sum += v[i].seconds;
        out_fit->overhead_s = sum / n;
    }
    fit_errors(out_fit, v, n);
    return SY_OK;
}

/* ------------------------------------------------------------- profile */

static int sample_cmp(const void *a, const void *b)
{
    const tune_sample *x = a, *y = b;
    if (x->op != y->op)
        return x->op < y->op ? -1 : 1;
    if (x->dtype != y->dtype)
        return x->dtype < y->dtype ? -1 : 1;
    if (x->flops != y->flops)
        return x->flops < y->flops ? -1 : 1;
    return x->bytes < y->bytes ? -1 : x->bytes > y->bytes;
}

static void add_num(cJSON *o, const char *k, double v)
{
    cJSON_AddNumberToObject(o, k, isfinite(v) && v > 0 ? v : 0.0);
}

sy_status tune_profile_json(const tune_device_info *info, const tune_samples *s, char **out_json)
{
    *out_json = NULL;
    tune_sample *v = malloc((s->n + 1u) * sizeof *v);
    cJSON *root = cJSON_CreateObject();
    if (!v || !root) {
        free(v);
        cJSON_Delete(root);
        return SY_E_NO_MEMORY;
    }
    memcpy(v, s->v, s->n * sizeof *v);
    qsort(v, s->n, sizeof *v, sample_cmp);
    cJSON_AddStringToObject(root, "schema", "switchyard-profile");
    cJSON_AddNumberToObject(root, "format_version", 1);
    cJSON_AddStringToObject(root, "version", info->version);
    cJSON_AddStringToObject(root, "device", info->device);
    if (info->plugin)
        cJSON_AddStringToObject(root, "plugin", info->plugin);
    if (info->plugin_version)
        cJSON_AddStringToObject(root, "plugin_version", info->plugin_version);
    if (info->peak_flops > 0)
        add_num(root, "peak_flops", info->peak_flops);
    if (info->peak_bandwidth > 0)
        add_num(root, "peak_bandwidth", info->peak_bandwidth);
    if (info->launch_overhead_s > 0)
        add_num(root, "launch_overhead_s", info->launch_overhead_s);
    if (info->launch_sync_s > 0)
        add_num(root, "launch_sync_s", info->launch_sync_s);
    cJSON *ops = cJSON_AddArrayToObject(root, "ops");
    for (uint32_t i = 0; i < s->n;) {
        uint32_t j = i;
        while (j < s->n && v[j].op == v[i].op && v[j].dtype == v[i].dtype)
            j++;
        tune_fit f;
        tune_fit_samples(v + i, j - i, &f);
        cJSON *e = cJSON_CreateObject();
        cJSON_AddStringToObject(e, "op", sy_op_name((sy_op)v[i].op));
        cJSON_AddStringToObject(e, "dtype", v[i].dtype >= 0 ? sy_dtype_name((uint32_t)v[i].dtype) : "*");
        cJSON_AddNumberToObject(e, "overhead_s", f.overhead_s);
        cJSON_AddNumberToObject(e, "s_per_flop", f.s_per_flop);
        cJSON_AddNumberToObject(e, "s_per_byte", f.s_per_byte);
        for (uint32_t k = 0; k < s->n_tiles && v[i].op == SY_OP_MATMUL; k++)
            if (s->tiles[k].dtype == v[i].dtype && s->tiles[k].tokens > 1) {
                cJSON_AddNumberToObject(e, "token_tile", s->tiles[k].tokens);
                cJSON_AddNumberToObject(e, "token_tile_from", s->tiles[k].from);
            }
        cJSON *pts = cJSON_AddArrayToObject(e, "points");
        for (uint32_t k = i; k < j; k++) {
            /* The loader needs work above zero: flops or bytes. */
            if (v[k].flops <= 0 && v[k].bytes <= 0)
                continue;
            cJSON *p = cJSON_CreateObject();
            cJSON_AddStringToObject(p, "shape", v[k].shape);
            if (v[k].group[0])
                cJSON_AddStringToObject(p, "group", v[k].group);
            cJSON_AddNumberToObject(p, "flops", v[k].flops);
            cJSON_AddNumberToObject(p, "bytes", v[k].bytes);
            cJSON_AddNumberToObject(p, "seconds", v[k].seconds);
            cJSON_AddItemToArray(pts, p);
        }
        cJSON_AddItemToArray(ops, e);
        i = j;
    }
    if (info->threads && info->threads->n > 0) {
        const tune_threads *t = info->threads;
        cJSON *th = cJSON_AddObjectToObject(root, "threads");
        cJSON_AddNumberToObject(th, "best", t->best);
        cJSON_AddNumberToObject(th, "prefill_tokens", t->prefill_tokens);
        cJSON_AddNumberToObject(th, "decode_steps", t->decode_steps);
        cJSON *ms = cJSON_AddArrayToObject(th, "measured");
        for (uint32_t i = 0; i < t->n; i++) {
            cJSON *e = cJSON_CreateObject();
            cJSON_AddNumberToObject(e, "threads", t->threads[i]);
            add_num(e, "decode_s", t->decode_s[i]);
            add_num(e, "prefill_s", t->prefill_s[i]);
            cJSON_AddItemToArray(ms, e);
        }
    }
    /* The chosen settings as the environment the plugin reads, then what
     * every value measured. */
    cJSON *opts = info->n_options ? cJSON_AddObjectToObject(root, "options") : NULL;
    cJSON *trials = info->n_options ? cJSON_AddArrayToObject(root, "option_trials") : NULL;
    for (uint32_t i = 0; i < info->n_options; i++) {
        const tune_option *t = &info->options[i];
        if (t->n == 0 || t->best >= t->n)
            continue;
        cJSON_AddStringToObject(opts, t->name, t->values[t->best]);
        cJSON *tr = cJSON_CreateObject();
        cJSON_AddStringToObject(tr, "name", t->name);
        cJSON_AddNumberToObject(tr, "prefill_tokens", t->prefill_tokens);
        cJSON_AddNumberToObject(tr, "decode_steps", t->decode_steps);
        cJSON *ms = cJSON_AddArrayToObject(tr, "measured");
        for (uint32_t k = 0; k < t->n; k++) {
            cJSON *e = cJSON_CreateObject();
            cJSON_AddStringToObject(e, "value", t->values[k]);
            add_num(e, "decode_s", t->decode_s[k]);
            add_num(e, "prefill_s", t->prefill_s[k]);
            cJSON_AddItemToArray(ms, e);
        }
        cJSON_AddItemToArray(trials, tr);
    }
    cJSON *links = info->n_links ? cJSON_AddArrayToObject(root, "links") : NULL;
    for (uint32_t i = 0; i < info->n_links && i < TUNE_MAX_LINKS; i++) {
        const tune_link *x = &info->links[i];
        cJSON *l = cJSON_CreateObject();
        cJSON_AddStringToObject(l, "to", x->to);
        if (x->bandwidth > 0)
            add_num(l, "bandwidth", x->bandwidth);
        add_num(l, "latency_s", x->latency_s);
        add_num(l, "sync_s", x->sync_s);
        cJSON_AddItemToArray(links, l);
    }
    free(v);
    char *text = cJSON_Print(root);
    cJSON_Delete(root);
    if (!text)
        return SY_E_NO_MEMORY;
    *out_json = text;
    return SY_OK;
}
