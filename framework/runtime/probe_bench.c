/* Node timing for the probe and the tuner: a frozen graph bound once to
 * one device's buffers, so that single nodes can be executed again and
 * again with nothing but execute + synchronize inside the timed region.
 * Storage follows the single-device executor (one buffer per root tensor,
 * views alias their root) without its transfers back. */
#include <stdlib.h>
#include <string.h>
#include <time.h>

#include "probe.h"
#include "runtime_internal.h"

struct sy_bench {
    sy_runtime *rt;
    sy_graph *g;
    const sy__device *dev;
    const sy__plugin *p;
    void **buffers; /* per tensor id, NULL for views and empty tensors */
    uint32_t n_tensors;
    sy_node **nodes; /* topological order */
    uint32_t n_nodes;
};

double sy__probe_now(void)
{
    struct timespec ts;
    clock_gettime(CLOCK_MONOTONIC, &ts);
    return (double)ts.tv_sec + (double)ts.tv_nsec * 1e-9;
}

static void bench_bind(sy_bench *b, sy_tensor *t, void *buffer)
{
    t->buffer = buffer;
    t->offset = 0;
    t->data = NULL;
    if (b->p->desc.buffer_host_ptr) {
        char *base = b->p->desc.buffer_host_ptr(b->p->state, b->dev->index, buffer);
        if (base)
            t->data = base;
    }
}

static sy_status bench_place(sy_bench *b, sy_tensor *t)
{
    const sy__plugin *p = b->p;
    uint32_t di = b->dev->index;
    uint64_t size = sy_tensor_nbytes(t);
    if (size == 0)
        return SY_OK;
    sy_status st = p->desc.buffer_alloc(p->state, di, size, &b->buffers[t->id]);
    if (st != SY_OK) {
        b->buffers[t->id] = NULL;
        sy__runtime_set_error(b->rt, "bench: device '%s' cannot allocate %llu bytes for '%s'",
                              b->dev->desc.name, (unsigned long long)size, t->name);
        return st;
    }
    bench_bind(b, t, b->buffers[t->id]);
    if (sy_graph_producer(b->g, t))
        return SY_OK;
    const void *host = sy_graph_host_data(b->g, t);
    void *zeros = NULL;
    if (!host) {
        zeros = calloc(1, (size_t)size);
        if (!zeros)
            return SY_E_NO_MEMORY;
    }
    st = p->desc.copy_in(p->state, di, b->buffers[t->id], 0, host ? host : zeros, size);
    free(zeros);
    if (st != SY_OK)
        sy__runtime_set_error(b->rt, "bench: copy_in of '%s' to '%s' failed: %s", t->name,
                              b->dev->desc.name, sy_status_name(st));
    return st;
}

sy_status sy_bench_create(sy_runtime *rt, sy_graph *g, uint32_t dev, sy_bench **out_bench)
{
    *out_bench = NULL;
    if (!rt || !g || !sy_graph_is_frozen(g) || dev >= rt->device_count)
        return SY_E_INVALID_ARG;
    sy_bench *b = calloc(1, sizeof *b);
    if (!b)
        return SY_E_NO_MEMORY;
    b->rt = rt;
    b->g = g;
    b->dev = &rt->devices[dev];
    b->p = rt->devices[dev].plugin;
    b->n_tensors = sy_graph_tensor_count(g);
    b->n_nodes = sy_graph_node_count(g);
    b->buffers = calloc(b->n_tensors + 1u, sizeof *b->buffers);
    b->nodes = calloc(b->n_nodes + 1u, sizeof *b->nodes);
    if (!b->buffers || !b->nodes) {
        sy_bench_destroy(b);
        return SY_E_NO_MEMORY;
    }
    for (uint32_t i = 0; i < b->n_nodes; i++) {
        b->nodes[i] = sy_graph_node(g, i);
        sy_support why;
        if (!sy__device_supports(b->dev, b->nodes[i], &why)) {
            sy__runtime_set_error(rt, "bench: device '%s' cannot run node '%s': %s",
                                  b->dev->desc.name, b->nodes[i]->name, why.text);
            sy_bench_destroy(b);
            return SY_E_UNSUPPORTED;
        }
    }
    sy_status st = SY_OK;
    for (uint32_t i = 0; i < b->n_tensors && st == SY_OK; i++) {
        sy_tensor *t = sy_graph_tensor(g, i);
        if (!t->view_src)
            st = bench_place(b, t);
    }
    if (st != SY_OK) {
        sy_bench_destroy(b);
        return st;
    }
    for (uint32_t i = 0; i < b->n_tensors; i++) {
        sy_tensor *t = sy_graph_tensor(g, i);
        const sy_tensor *root = t->view_src;
        if (!root)
            continue;
        t->buffer = root->buffer;
        t->offset = root->offset + t->view_offset;
        t->data = root->data ? (char *)root->data + t->view_offset : NULL;
    }
    *out_bench = b;
    return SY_OK;
}

void sy_bench_destroy(sy_bench *b)
{
    if (!b)
        return;
    if (b->buffers) {
        b->p->desc.synchronize(b->p->state, b->dev->index);
        for (uint32_t i = b->n_tensors; i-- > 0;) {
            if (b->buffers[i])
                b->p->desc.buffer_free(b->p->state, b->dev->index, b->buffers[i]);
            sy_tensor *t = sy_graph_tensor(b->g, i);
            t->data = sy_graph_host_data(b->g, t);
            t->buffer = NULL;
            t->offset = 0;
        }
    }
    free(b->buffers);
    free(b->nodes);
    free(b);
}

sy_status sy_bench_run(sy_bench *b, uint32_t first, uint32_t n, double *out_s)
{
    *out_s = 0;
    if (first > b->n_nodes || n > b->n_nodes - first)
        return SY_E_INVALID_ARG;
    const sy__plugin *p = b->p;
    uint32_t di = b->dev->index;
    double t0 = sy__probe_now();
    sy_status st = p->desc.execute(p->state, di, b->nodes + first, n);
    sy_status sst = p->desc.synchronize(p->state, di);
    *out_s = sy__probe_now() - t0;
    if (st == SY_OK)
        st = sst;
    if (st != SY_OK)
        sy__runtime_set_error(b->rt, "bench: device '%s' failed running '%s': %s",
                              b->dev->desc.name, b->nodes[first]->name, sy_status_name(st));
    return st;
}

static int bench_cmp(const void *a, const void *b)
{
    double x = *(const double *)a, y = *(const double *)b;
    return x < y ? -1 : x > y;
}

double sy__quantile(double *v, uint32_t n, double q)
{
    if (n == 0)
        return 0;
    qsort(v, n, sizeof *v, bench_cmp);
    double pos = (q < 0 ? 0 : q > 1 ? 1 : q) * (double)(n - 1);
    uint32_t i = (uint32_t)pos;
    double f = pos - (double)i;
    return i + 1 < n ? v[i] + f * (v[i + 1] - v[i]) : v[i];
}

double sy__timing_estimate(double *times, uint32_t n)
{
    return sy__quantile(times, n, 0.25);
}

sy_status sy_bench_sample(sy_bench *b, uint32_t first, uint32_t n, uint32_t warmup, uint32_t reps,
                          double budget_s, double *out_times, uint32_t *out_count)
{
    *out_count = 0;
    double start = sy__probe_now(), s;
    sy_status st = SY_OK;
    for (uint32_t i = 0; i < warmup && st == SY_OK; i++) {
        st = sy_bench_run(b, first, n, &s);
        if (sy__probe_now() - start > budget_s * 0.5)
            break;
    }
    uint32_t done = 0;
    while (st == SY_OK && done < reps) {
        st = sy_bench_run(b, first, n, &out_times[done]);
        if (st == SY_OK)
            done++;
        if (sy__probe_now() - start > budget_s)
            break;
    }
    *out_count = done;
    return st;
}

sy_status sy_bench_time(sy_bench *b, uint32_t first, uint32_t n, uint32_t warmup, uint32_t reps,
                        double budget_s, double *out_s)
{
    *out_s = 0;
    if (reps == 0)
        reps = 1;
    double *t = calloc(reps, sizeof *t);
    if (!t)
        return SY_E_NO_MEMORY;
    uint32_t done = 0;
    sy_status st = sy_bench_sample(b, first, n, warmup, reps, budget_s, t, &done);
    if (st == SY_OK && done > 0)
        *out_s = sy__timing_estimate(t, done);
    free(t);
    return st;
}
