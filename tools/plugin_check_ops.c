/* plugin-check: every op case against the reference kernels.
 *
 * For each case: supports() is asked twice (same answer, node untouched);
 * a refusal must carry a reason code and text; a supported case runs on
 * the device exactly as the single-device executor would run it (one
 * buffer, tensors at 64-byte aligned offsets, leaves copied in, outputs
 * pre-filled with NaN bytes so that unwritten elements show, views bound
 * to their root) and is compared with sy_graph_run_reference().
 *
 * Tolerances: FLOAT allows float32 rounding (and binary16/bfloat16/block
 * rounding where the op stores those types); INT8 also allows what int8
 * per-row dynamic activation quantisation (W8A8) costs: for matmul
 * 0.5 * max|x_row| / 127 * sum|w| per output, for add/mul half a step of
 * each operand's row scale, and 2% elsewhere.  AUTO (the default) picks
 * per case: INT8 on NPUs and for matmuls with block-quantised weights
 * anywhere, FLOAT otherwise. */
#include <math.h>
#include <stdlib.h>
#include <string.h>

#include "plugin_check_internal.h"

static const char *pc_reason_name(uint32_t reason)
{
    static const char *const names[] = {"yes", "op", "dtype", "shape", "size", "memory"};
    return reason <= SY_UNSUPPORTED_MEMORY ? names[reason] : "invalid";
}

/* ------------------------------------------------------------- values */

/* Logical values of |t| (ne[0] fastest) into |out|: a leaf through its
 * host data, a view of an F32 leaf through its strides. */
static sy_status pc_values(const sy_graph *g, const sy_tensor *t, float *out)
{
    const int64_t n = sy_tensor_nelements(t);
    const void *host = sy_graph_host_data(g, t);
    if (host && !t->view_src)
        return pcheck_to_f32(t->dtype, host, n, out);
    const sy_tensor *root = t->view_src;
    const unsigned char *base = root ? sy_graph_host_data(g, root) : NULL;
    if (!base || t->dtype != SY_DTYPE_F32)
        return SY_E_UNSUPPORTED;
    int64_t i = 0;
    for (int64_t i3 = 0; i3 < t->ne[3]; i3++)
        for (int64_t i2 = 0; i2 < t->ne[2]; i2++)
            for (int64_t i1 = 0; i1 < t->ne[1]; i1++)
                for (int64_t i0 = 0; i0 < t->ne[0]; i0++) {
                    const uint64_t off = t->view_offset + (uint64_t)i0 * t->nb[0] +
                                         (uint64_t)i1 * t->nb[1] + (uint64_t)i2 * t->nb[2] +
                                         (uint64_t)i3 * t->nb[3];
                    memcpy(&out[i++], base + off, sizeof(float));
                }
    return SY_OK;
}

/* Per-element allowed error: |got - want| <= tol[i]. */
typedef struct pc_check {
    const pcheck_case *c;
    bool int8;
    const float *want;
    double *tol;
    int64_t n;
} pc_check;

static double pc_max_abs(const float *v, int64_t n)
{
    double m = 0;
    for (int64_t i = 0; i < n; i++)
        m = fabs(v[i]) > m ? fabs(v[i]) : m;
    return m;
}

static void pc_tol_rel_abs(pc_check *k, double rel, double abs_of_max)
{
    const double floor_abs = abs_of_max * pc_max_abs(k->want, k->n);
    for (int64_t i = 0; i < k->n; i++)
        k->tol[i] = rel * fabs(k->want[i]) + floor_abs;
}

/* MATMUL: float rounding relative to sum |w x|, plus the W8A8 bound. */
static sy_status pc_tol_matmul(pc_check *k)
{
    const sy_graph *g = k->c->g;
    const sy_node *node = k->c->node;
    const sy_tensor *w = node->inputs[0], *x = node->inputs[1];
    const int64_t K = w->ne[0], N = w->ne[1], M = x->ne[1];
    float *wv = malloc((size_t)sy_tensor_nelements(w) * sizeof *wv);
    float *xv = malloc((size_t)sy_tensor_nelements(x) * sizeof *xv);
    sy_status st = SY_E_NO_MEMORY;
    if (wv && xv)
        st = pc_values(g, w, wv);
    if (st == SY_OK)
        st = pc_values(g, x, xv);
    if (st == SY_OK) {
        const int64_t r2 = x->ne[2] / w->ne[2], r3 = x->ne[3] / w->ne[3];
        double max_s = 0;
        for (int64_t i3 = 0; i3 < x->ne[3]; i3++)
            for (int64_t i2 = 0; i2 < x->ne[2]; i2++)
                for (int64_t m = 0; m < M; m++) {
                    const float *xr = xv + ((i3 * x->ne[2] + i2) * M + m) * K;
                    double xmax = 0;
                    for (int64_t kk = 0; kk < K; kk++)
                        xmax = fabs(xr[kk]) > xmax ? fabs(xr[kk]) : xmax;
                    for (int64_t n = 0; n < N; n++) {
                        const float *wr =
                            wv + (((i3 / r3) * w->ne[2] + i2 / r2) * N + n) * K;
                        double s = 0, sw = 0;
                        for (int64_t kk = 0; kk < K; kk++) {
                            s += fabs((double)wr[kk] * xr[kk]);
                            sw += fabs(wr[kk]);
                        }
                        const int64_t o = ((i3 * x->ne[2] + i2) * M + m) * N + n;
                        k->tol[o] = 1e-5 * s + (k->int8 ? 0.5 * xmax / 127.0 * sw * 1.001 : 0);
                        max_s = s > max_s ? s : max_s;
                    }
                }
        for (int64_t i = 0; i < k->n; i++)
            k->tol[i] += 1e-7 * max_s + 1e-30;
    }
    free(wv);
    free(xv);
    return st;
}

/* ADD / MUL under INT8: half a quantisation step of each operand's row. */
static sy_status pc_tol_binary_int8(pc_check *k)
{
    const sy_graph *g = k->c->g;
    const sy_node *node = k->c->node;
    const sy_tensor *a = node->inputs[0], *b = node->inputs[1];
    float *av = malloc((size_t)sy_tensor_nelements(a) * sizeof *av);
    float *bv = malloc((size_t)sy_tensor_nelements(b) * sizeof *bv);
    sy_status st = SY_E_NO_MEMORY;
    if (av && bv)
        st = pc_values(g, a, av);
    if (st == SY_OK)
        st = pc_values(g, b, bv);
    if (st == SY_OK) {
        const int64_t n0 = a->ne[0], rows = sy_tensor_nelements(a) / n0;
        for (int64_t r = 0; r < rows; r++) {
            const int64_t i1 = r % a->ne[1], i2 = (r / a->ne[1]) % a->ne[2],
                          i3 = r / (a->ne[1] * a->ne[2]);
            const int64_t br = ((i3 % b->ne[3]) * b->ne[2] + i2 % b->ne[2]) * b->ne[1] +
                               i1 % b->ne[1];
            const float *ar = av + r * n0, *brow = bv + br * b->ne[0];
            const double sa = pc_max_abs(ar, n0) / 254.0, sb = pc_max_abs(brow, b->ne[0]) / 254.0;
            for (int64_t i = 0; i < n0; i++) {
                const double x = fabs(ar[i]), y = fabs(brow[i % b->ne[0]]);
                double t = node->op == SY_OP_ADD ? sa + sb : x * sb + y * sa + sa * sb;
                t += 1e-3 * fabs(k->want[r * n0 + i]) + 1e-30;
                k->tol[r * n0 + i] = t * 1.001;
            }
        }
    }
    free(av);
    free(bv);
    return st;
}

/* Relative and absolute (of max |want|) allowance for a stored dtype. */
static void pc_storage_tol(uint32_t dtype, double *rel, double *abs_of_max)
{
    switch (dtype) {
    case SY_DTYPE_F16:
        *rel = 1e-3;
        *abs_of_max = 1e-7;
        return;
    case SY_DTYPE_BF16:
        *rel = 8e-3;
        *abs_of_max = 1e-7;
        return;
    case SY_DTYPE_Q8_0:
        *rel = 0;
        *abs_of_max = 1.05 / 127.0;
        return;
    case SY_DTYPE_Q4_0:
    case SY_DTYPE_Q4_1:
        *rel = 0;
        *abs_of_max = 0.15;
        return;
    default:
        *rel = 1e-6;
        *abs_of_max = 1e-7;
        return;
    }
}

static sy_status pc_tolerance(pc_check *k)
{
    const sy_node *node = k->c->node;
    const uint32_t op = node->op;
    if (op == SY_OP_MATMUL)
        return pc_tol_matmul(k);
    if (k->int8 && (op == SY_OP_ADD || op == SY_OP_MUL))
        return pc_tol_binary_int8(k);
    double rel = 1e-6, abs_of_max = 1e-7;
    switch (op) {
    case SY_OP_COPY:
    case SY_OP_KV_WRITE:
        pc_storage_tol(k->c->result->dtype, &rel, &abs_of_max);
        break;
    case SY_OP_SCALE:
        abs_of_max = 1e-6;
        break;
    case SY_OP_RMS_NORM:
    case SY_OP_SILU:
    case SY_OP_GELU:
    case SY_OP_SWIGLU:
    case SY_OP_GEGLU:
    case SY_OP_SOFTMAX:
    case SY_OP_ROPE:
        rel = 1e-5;
        abs_of_max = 1e-5;
        break;
    case SY_OP_ATTENTION:
        rel = 1e-4;
        abs_of_max = 1e-5;
        break;
    default:
        break;
    }
    if (k->int8 && op != SY_OP_ARGMAX && op != SY_OP_GET_ROWS && op != SY_OP_COPY &&
        op != SY_OP_KV_WRITE) {
        rel = rel > 2e-2 ? rel : 2e-2;
        abs_of_max = abs_of_max > 2e-2 ? abs_of_max : 2e-2;
    }
    pc_tol_rel_abs(k, rel, abs_of_max);
    return SY_OK;
}

/* ----------------------------------------------------------- the run */

typedef struct pc_layout {
    uint64_t *offset; /* per tensor id; roots only */
    uint64_t total;
} pc_layout;

static sy_status pc_plan(const sy_graph *g, pc_layout *lay)
{
    const uint32_t nt = sy_graph_tensor_count(g);
    lay->offset = calloc(nt ? nt : 1, sizeof *lay->offset);
    if (!lay->offset)
        return SY_E_NO_MEMORY;
    lay->total = 0;
    for (uint32_t i = 0; i < nt; i++) {
        const sy_tensor *t = sy_graph_tensor(g, i);
        if (t->view_src)
            continue;
        lay->offset[i] = lay->total;
        lay->total += (sy_tensor_nbytes(t) + 63) / 64 * 64;
    }
    return SY_OK;
}

/* Copies every root's initial contents into |buf| and binds residency. */
static sy_status pc_place(pcheck_run *run, void *state, uint32_t dev, sy_graph *g,
                          const pc_layout *lay, void *buf, char *detail, size_t size)
{
    const uint32_t nt = sy_graph_tensor_count(g);
    unsigned char *base = run->table.buffer_host_ptr
                              ? run->table.buffer_host_ptr(state, dev, buf)
                              : NULL;
    for (uint32_t i = 0; i < nt; i++) {
        sy_tensor *t = sy_graph_tensor(g, i);
        if (t->view_src)
            continue;
        const uint64_t bytes = sy_tensor_nbytes(t);
        const void *host = sy_graph_host_data(g, t);
        const bool leaf = sy_graph_producer(g, t) == NULL;
        void *fill = NULL;
        if (!leaf || !host) {
            /* Outputs start as NaN bytes, so that an element the device
             * never writes cannot pass; leaves without data are zeros. */
            fill = malloc(bytes ? (size_t)bytes : 1);
            if (!fill)
                return SY_E_NO_MEMORY;
            memset(fill, leaf ? 0x00 : 0xff, (size_t)bytes);
        }
        sy_status st = run->table.copy_in(state, dev, buf, lay->offset[i], fill ? fill : host,
                                          bytes);
        free(fill);
        if (st != SY_OK) {
            snprintf(detail, size, "copy_in of '%s' (%llu bytes at %llu) failed: %s", t->name,
                     (unsigned long long)bytes, (unsigned long long)lay->offset[i],
                     sy_status_name(st));
            return st;
        }
        t->buffer = buf;
        t->offset = lay->offset[i];
        t->data = base ? base + lay->offset[i] : NULL;
    }
    for (uint32_t i = 0; i < nt; i++) {
        sy_tensor *t = sy_graph_tensor(g, i);
        const sy_tensor *root = t->view_src;
        if (!root)
            continue;
        t->buffer = root->buffer;
        t->offset = root->offset + t->view_offset;
        t->data = root->data ? (char *)root->data + t->view_offset : NULL;
    }
    return SY_OK;
}

static void pc_unbind(sy_graph *g)
{
    for (uint32_t i = 0; i < sy_graph_tensor_count(g); i++) {
        sy_tensor *t = sy_graph_tensor(g, i);
        t->data = sy_graph_host_data(g, t);
        t->buffer = NULL;
        t->offset = 0;
    }
}

/* Sets the result's bytes in |buf| again as pc_place set them: its
 * initial value (an op that updates it in place), else all ones (NaN as
 * floats), so that a second run that leaves it unwritten cannot pass with
 * the first run's bytes. */
static sy_status pc_fill_result(pcheck_run *run, void *state, uint32_t dev, pcheck_case *c,
                                void *buf, uint64_t offset, char *detail, size_t size)
{
    const size_t rb = (size_t)sy_tensor_nbytes(c->result);
    void *fill = malloc(rb ? rb : 1);
    if (!fill)
        return SY_E_NO_MEMORY;
    if (c->result_init)
        memcpy(fill, c->result_init, rb);
    else
        memset(fill, 0xFF, rb);
    sy_status st = run->table.copy_in(state, dev, buf, offset, fill, rb);
    free(fill);
    if (st != SY_OK)
        snprintf(detail, size, "copy_in of the result's fill failed: %s", sy_status_name(st));
    return st;
}

/* Runs the graph on the device; fills |got| with the result's bytes.
 * |keyed|: through execute_keyed (ABI 1.2), twice under one new key, the
 * second call free to run from what the plugin kept at the first. */
static sy_status pc_run_device(pcheck_run *run, void *state, uint32_t dev, pcheck_case *c,
                               bool keyed, void *got, char *detail, size_t size)
{
    sy_graph *g = c->g;
    pc_layout lay;
    sy_status st = pc_plan(g, &lay);
    if (st != SY_OK)
        return st;
    void *buf = NULL;
    st = run->table.buffer_alloc(state, dev, lay.total, &buf);
    if (st != SY_OK || !buf) {
        snprintf(detail, size, "buffer_alloc(%llu) failed: %s", (unsigned long long)lay.total,
                 sy_status_name(st));
        free(lay.offset);
        return st != SY_OK ? st : SY_E_DEVICE;
    }
    st = pc_place(run, state, dev, g, &lay, buf, detail, size);
    if (st == SY_OK) {
        const uint32_t n = sy_graph_node_count(g);
        sy_node **nodes = malloc(n * sizeof *nodes);
        if (!nodes) {
            st = SY_E_NO_MEMORY;
        } else {
            for (uint32_t i = 0; i < n; i++)
                nodes[i] = sy_graph_node(g, i);
            const uint64_t key = keyed ? ++run->last_key : 0;
            if (keyed) {
                st = run->table.execute_keyed(state, dev, nodes, n, key, NULL, 0);
                if (st == SY_OK)
                    st = run->table.synchronize(state, dev);
                if (st == SY_OK)
                    st = pc_fill_result(run, state, dev, c, buf, lay.offset[c->result->id],
                                        detail, size);
                if (st == SY_OK)
                    st = run->table.execute_keyed(state, dev, nodes, n, key, NULL, 0);
            } else {
                st = run->table.execute(state, dev, nodes, n);
            }
            const sy_status sync = run->table.synchronize(state, dev);
            free(nodes);
            if (st != SY_OK || sync != SY_OK) {
                char said[256];
                pcheck_host_take_error(&run->host, said, sizeof said);
                snprintf(detail, size, "%s failed: %s%s%s",
                         st != SY_OK ? (keyed ? "execute_keyed" : "execute") : "synchronize",
                         sy_status_name(st != SY_OK ? st : sync), said[0] ? "; plugin said: " : "",
                         said);
                st = st != SY_OK ? st : sync;
            }
        }
    }
    if (st == SY_OK) {
        const sy_tensor *r = c->result;
        st = run->table.copy_out(state, dev, buf, lay.offset[r->id], got, sy_tensor_nbytes(r));
        if (st != SY_OK)
            snprintf(detail, size, "copy_out of the result failed: %s", sy_status_name(st));
    }
    run->table.buffer_free(state, dev, buf);
    pc_unbind(g);
    free(lay.offset);
    return st;
}

static sy_pcheck_outcome pc_compare(pcheck_case *c, bool int8, const void *want_bytes,
                                    const void *got_bytes, char *detail, size_t size)
{
    const sy_tensor *r = c->result;
    const int64_t n = sy_tensor_nelements(r);
    float *want = malloc((size_t)n * sizeof *want);
    float *got = malloc((size_t)n * sizeof *got);
    double *tol = malloc((size_t)n * sizeof *tol);
    sy_pcheck_outcome out = SY_PCHECK_FAIL;
    sy_status st = SY_E_NO_MEMORY;
    if (want && got && tol) {
        st = pcheck_to_f32(r->dtype, want_bytes, n, want);
        if (st == SY_OK)
            st = pcheck_to_f32(r->dtype, got_bytes, n, got);
    }
    if (st == SY_OK) {
        pc_check k = {.c = c, .int8 = int8, .want = want, .tol = tol, .n = n};
        st = pc_tolerance(&k);
    }
    if (st != SY_OK) {
        snprintf(detail, size, "cannot compare: %s", sy_status_name(st));
        goto out_free;
    }
    double worst = 0;
    int64_t at = -1;
    bool failed = false;
    for (int64_t i = 0; i < n; i++) {
        const double err = fabs((double)got[i] - (double)want[i]);
        const bool ok = err <= tol[i];
        double ratio = err / tol[i];
        if (isnan(ratio))
            ratio = INFINITY;
        if (!ok && (!failed || ratio > worst)) {
            failed = true;
            worst = ratio;
            at = i;
        } else if (!failed && ratio > worst) {
            worst = ratio;
        }
    }
    if (failed) {
        snprintf(detail, size, "element %lld: got %.9g, want %.9g, tolerance %.3g (%s)",
                 (long long)at, (double)got[at], (double)want[at], tol[at],
                 int8 ? "int8 activations" : "float");
    } else {
        snprintf(detail, size, "worst error %.0f%% of the %s tolerance", worst * 100.0,
                 int8 ? "int8-activation" : "float");
        out = SY_PCHECK_PASS;
    }
out_free:
    free(want);
    free(got);
    free(tol);
    return out;
}

/* Whether |node| may carry the error of int8 activation quantisation:
 * always on an NPU; elsewhere for matmuls with block-quantised weights,
 * which CPU and GPU backends commonly run as integer dot products against
 * activations quantised to 8 bits (llama.cpp's Q8 path). */
static bool pc_int8_allowed(sy_pcheck_tolerance tl, const sy_device_desc *desc,
                            const sy_node *node)
{
    if (tl != SY_PCHECK_TOL_AUTO)
        return tl == SY_PCHECK_TOL_INT8;
    if (desc->kind == SY_DEVICE_NPU)
        return true;
    return node->op == SY_OP_MATMUL && sy_dtype_is_quantized(node->inputs[0]->dtype);
}

sy_pcheck_outcome pcheck_case_run(pcheck_run *run, void *state, uint32_t dev,
                                  const sy_device_desc *desc, pcheck_case *c, char *detail,
                                  size_t detail_size)
{
    sy_graph *g = c->g;
    sy_tensor *r = c->result;
    const size_t bytes = (size_t)sy_tensor_nbytes(r);
    void *host = sy_graph_host_data(g, r);
    unsigned char *want = malloc(bytes ? bytes : 1), *got = malloc(bytes ? bytes : 1);
    sy_pcheck_outcome out = SY_PCHECK_FAIL;
    if (!want || !got || !host) {
        snprintf(detail, detail_size, "out of host memory");
        goto out_free;
    }
    if (c->result_init)
        memcpy(host, c->result_init, bytes);
    sy_status st = sy_graph_run_reference(g);
    if (st != SY_OK) {
        snprintf(detail, detail_size, "the reference kernels failed: %s", sy_status_name(st));
        goto out_free;
    }
    memcpy(want, host, bytes);
    if (c->result_init)
        memcpy(host, c->result_init, bytes);

    const uint64_t ref_before = pcheck_host_reference_calls(&run->host);
    const bool int8 = pc_int8_allowed(run->opts->tolerance, desc, c->node);
    /* Through execute, then, where the table has it, execute_keyed: each
     * must give the reference's result. */
    for (int keyed = 0; keyed <= (run->table.execute_keyed != NULL); keyed++) {
        if (keyed && c->result_init)
            memcpy(host, c->result_init, bytes);
        st = pc_run_device(run, state, dev, c, keyed, got, detail, detail_size);
        if (st != SY_OK) {
            if (!detail[0])
                snprintf(detail, detail_size, "device run failed: %s", sy_status_name(st));
            out = SY_PCHECK_FAIL;
            goto out_free;
        }
        out = pc_compare(c, int8, want, got, detail, detail_size);
        if (out != SY_PCHECK_PASS) {
            if (keyed) {
                const size_t used = strlen(detail);
                snprintf(detail + used, detail_size - used, " (through execute_keyed)");
            }
            break;
        }
    }
    if (out == SY_PCHECK_PASS && run->table.execute_keyed) {
        const size_t used = strlen(detail);
        snprintf(detail + used, detail_size - used, "; execute_keyed too");
    }
    /* Informative only: a plugin may use the host's kernels. */
    if (pcheck_host_reference_calls(&run->host) != ref_before) {
        const size_t used = strlen(detail);
        snprintf(detail + used, detail_size - used, "; ran on the host's reference kernels");
    }
out_free:
    free(want);
    free(got);
    return out;
}

/* --------------------------------------------------------------- supports */

typedef struct pc_snapshot {
    sy_node node;
    sy_tensor t[SY_MAX_INPUTS + 1];
} pc_snapshot;

static void pc_snap(const sy_node *node, pc_snapshot *s)
{
    memset(s, 0, sizeof *s);
    s->node = *node;
    for (uint32_t i = 0; i < node->n_inputs && i < SY_MAX_INPUTS; i++)
        s->t[i] = *node->inputs[i];
    s->t[SY_MAX_INPUTS] = *node->output;
}

static void pc_case_check(pcheck_run *run, uint32_t dev, const sy_device_desc *desc,
                          pcheck_case *c)
{
    const int32_t d = (int32_t)dev;
    const uint32_t minor = SY_PLUGIN_ABI_MINOR_OF(run->table.abi_version);
    if (sy_op_has_run_time_position(c->node) && minor < SY_PLUGIN_ABI_MINOR_RUN_TIME_POSITION) {
        pcheck_add(run, "ops", d, SY_PCHECK_SKIP, c->name,
                   "built for ABI 1.%u: the core gives run-time KV positions only to 1.3 on",
                   minor);
        return;
    }
    pc_snapshot before, after;
    pc_snap(c->node, &before);
    sy_support why1, why2;
    memset(&why1, 0x5a, sizeof why1);
    memset(&why2, 0x5a, sizeof why2);
    const bool yes1 = run->table.supports(run->state, dev, c->node, &why1);
    const bool yes2 = run->table.supports(run->state, dev, c->node, &why2);
    pc_snap(c->node, &after);
    if (memcmp(&before, &after, sizeof before) != 0) {
        pcheck_add(run, "ops", d, SY_PCHECK_FAIL, c->name, "supports() modified the node");
        return;
    }
    if (yes1 != yes2 ||
        (!yes1 && (why1.reason != why2.reason ||
                   strncmp(why1.text, why2.text, sizeof why1.text) != 0))) {
        pcheck_add(run, "ops", d, SY_PCHECK_FAIL, c->name,
                   "supports() answered differently when asked twice");
        return;
    }
    if (!yes1) {
        const size_t len = strnlen(why1.text, sizeof why1.text);
        if (why1.reason < SY_UNSUPPORTED_OP || why1.reason > SY_UNSUPPORTED_MEMORY || len == 0 ||
            len == sizeof why1.text) {
            pcheck_add(run, "ops", d, SY_PCHECK_FAIL, c->name,
                       "refused without a reason (code %u, text %s)", why1.reason,
                       len == 0 ? "empty" : len == sizeof why1.text ? "not terminated" : "ok");
            return;
        }
        if (c->supports_only) {
            const bool sized =
                why1.reason == SY_UNSUPPORTED_SIZE || why1.reason == SY_UNSUPPORTED_MEMORY;
            pcheck_add(run, "ops", d, sized ? SY_PCHECK_PASS : SY_PCHECK_FAIL, c->name,
                       "%s%s: %.*s", sized ? "refused, " : "refused with the wrong reason ",
                       pc_reason_name(why1.reason), (int)len, why1.text);
            return;
        }
        pcheck_add(run, "ops", d, SY_PCHECK_REFUSED, c->name, "%s: %.*s",
                   pc_reason_name(why1.reason), (int)len, why1.text);
        return;
    }
    if (c->supports_only) {
        pcheck_add(run, "ops", d, SY_PCHECK_FAIL, c->name,
                   "supports() accepts a node of %llu bytes on a device of %llu",
                   (unsigned long long)sy_tensor_nbytes(c->node->output),
                   (unsigned long long)desc->memory_bytes);
        return;
    }
    char detail[320] = "";
    const sy_pcheck_outcome out = pcheck_case_run(run, run->state, dev, desc, c, detail,
                                                  sizeof detail);
    if (out == SY_PCHECK_FAIL) {
        const size_t used = strlen(detail);
        snprintf(detail + used, sizeof detail - used, " [seed 0x%016llx]",
                 (unsigned long long)run->report->seed);
    }
    pcheck_add(run, "ops", d, out, c->name, "%s", detail);
}

void pcheck_ops(pcheck_run *run, uint32_t dev, const sy_device_desc *desc)
{
    const uint32_t n = pcheck_case_count();
    for (uint32_t i = 0; i < n; i++) {
        pcheck_case c;
        char err[192] = "";
        if (!pcheck_case_build(i, &run->rng, desc->memory_bytes, &c, err, sizeof err)) {
            pcheck_add(run, "ops", (int32_t)dev, SY_PCHECK_FAIL, c.name[0] ? c.name : "case",
                       "plugin-check could not build the case: %s", err);
            continue;
        }
        pc_case_check(run, dev, desc, &c);
        pcheck_case_free(&c);
    }
}
