/* Probe results as JSON (the cache file and `switchyard probe --json`,
 * docs/probe.md) and as readable tables. */
#include <cjson/cJSON.h>
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "probe.h"

#define PROBE_SCHEMA "switchyard-probe"

/* Numbers are written with 17 significant digits, so that a cached value
 * reads back as exactly the double measured: cJSON's own printer accepts
 * 15 digits when they come back within a relative epsilon, which can
 * change the last bit. */
static void jnum(cJSON *o, const char *k, double v)
{
    char buf[40];
    snprintf(buf, sizeof buf, "%.17g", isfinite(v) ? v : 0.0);
    cJSON_AddRawToObject(o, k, buf);
}

sy_status sy_probe_to_json(const sy_probe *p, char **out_json)
{
    *out_json = NULL;
    cJSON *root = cJSON_CreateObject();
    if (!root)
        return SY_E_NO_MEMORY;
    cJSON_AddStringToObject(root, "schema", PROBE_SCHEMA);
    jnum(root, "format_version", SY_PROBE_FORMAT_VERSION);
    cJSON_AddStringToObject(root, "fingerprint", p->fingerprint);
    cJSON_AddStringToObject(root, "host_fingerprint", p->host_fingerprint);
    cJSON_AddStringToObject(root, "switchyard_version", p->switchyard_version);
    jnum(root, "created", p->created);
    jnum(root, "probe_s", p->probe_s);
    cJSON_AddBoolToObject(root, "quick", p->quick);
    cJSON *topo = cJSON_AddObjectToObject(root, "topology");
    cJSON_AddStringToObject(topo, "cpu_model", p->cpu_model);
    cJSON_AddStringToObject(topo, "summary", p->topology);
    jnum(topo, "packages", p->packages);
    jnum(topo, "cores", p->cores);
    jnum(topo, "pus", p->pus);
    jnum(topo, "numa_nodes", p->numa_nodes);
    jnum(topo, "cores_allowed", p->cores_allowed);
    jnum(topo, "l1d_bytes", (double)p->l1d_bytes);
    jnum(topo, "l2_bytes", (double)p->l2_bytes);
    jnum(topo, "l3_bytes", (double)p->l3_bytes);
    jnum(topo, "memory_total", (double)p->memory_total);
    jnum(topo, "memory_available", (double)p->memory_available);
    cJSON *host = cJSON_AddObjectToObject(root, "host_memory");
    jnum(host, "buffer_bytes", (double)p->host_buffer_bytes);
    cJSON *bw = cJSON_AddArrayToObject(host, "bandwidth");
    for (uint32_t i = 0; i < p->n_host_bw; i++) {
        cJSON *e = cJSON_CreateObject();
        jnum(e, "threads", p->host_bw[i].threads);
        jnum(e, "read_bps", p->host_bw[i].read_bps);
        jnum(e, "copy_bps", p->host_bw[i].copy_bps);
        cJSON_AddItemToArray(bw, e);
    }
    cJSON *devs = cJSON_AddArrayToObject(root, "devices");
    for (uint32_t i = 0; i < p->n_devices; i++) {
        const sy_probe_device *d = &p->devices[i];
        cJSON *e = cJSON_CreateObject();
        cJSON_AddStringToObject(e, "name", d->name);
        cJSON_AddStringToObject(e, "plugin", d->plugin);
        cJSON_AddStringToObject(e, "plugin_version", d->plugin_version);
        cJSON_AddStringToObject(e, "model", d->model);
        cJSON_AddStringToObject(e, "driver", d->driver);
        jnum(e, "kind", d->kind);
        jnum(e, "memory_bytes", (double)d->memory_bytes);
        cJSON_AddBoolToObject(e, "unified_memory", d->unified_memory);
        jnum(e, "compute_units", d->compute_units);
        jnum(e, "bandwidth_bps", d->bandwidth_bps);
        jnum(e, "flops", d->flops);
        jnum(e, "launch_s", d->launch_s);
        jnum(e, "h2d_bps", d->h2d_bps);
        jnum(e, "h2d_latency_s", d->h2d_latency_s);
        jnum(e, "d2h_bps", d->d2h_bps);
        jnum(e, "d2h_latency_s", d->d2h_latency_s);
        cJSON *xs = cJSON_AddArrayToObject(e, "transfers");
        for (uint32_t k = 0; k < SY_PROBE_N_XFER_SIZES; k++) {
            cJSON *x = cJSON_CreateObject();
            jnum(x, "bytes", (double)d->xfer[k].bytes);
            jnum(x, "h2d_s", d->xfer[k].h2d_s);
            jnum(x, "d2h_s", d->xfer[k].d2h_s);
            cJSON_AddItemToArray(xs, x);
        }
        cJSON_AddStringToObject(e, "error", d->error);
        cJSON_AddStringToObject(e, "fingerprint", d->fingerprint);
        jnum(e, "measure_s", d->measure_s);
        jnum(e, "first_use_s", d->first_use_s);
        cJSON_AddItemToArray(devs, e);
    }
    cJSON *links = cJSON_AddArrayToObject(root, "links");
    for (uint32_t i = 0; i < p->n_links; i++) {
        const sy_probe_link *l = &p->links[i];
        cJSON *e = cJSON_CreateObject();
        cJSON_AddStringToObject(e, "from", l->from);
        cJSON_AddStringToObject(e, "to", l->to);
        cJSON_AddStringToObject(e, "from_fingerprint", l->from_fingerprint);
        cJSON_AddStringToObject(e, "to_fingerprint", l->to_fingerprint);
        cJSON_AddStringToObject(e, "method", l->method);
        cJSON_AddBoolToObject(e, "zero_copy", l->zero_copy);
        jnum(e, "bps", l->bps);
        jnum(e, "latency_s", l->latency_s);
        cJSON *xs = cJSON_AddArrayToObject(e, "transfers");
        for (uint32_t k = 0; k < SY_PROBE_N_XFER_SIZES; k++) {
            cJSON *x = cJSON_CreateObject();
            jnum(x, "bytes", (double)l->bytes[k]);
            jnum(x, "seconds", l->seconds[k]);
            cJSON_AddItemToArray(xs, x);
        }
        cJSON_AddStringToObject(e, "error", l->error);
        cJSON_AddItemToArray(links, e);
    }
    char *s = cJSON_Print(root);
    cJSON_Delete(root);
    if (!s)
        return SY_E_NO_MEMORY;
    *out_json = s;
    return SY_OK;
}

typedef struct jreader {
    char *err;
    size_t err_size;
    bool bad;
} jreader;

static double jget(jreader *r, const cJSON *o, const char *k)
{
    const cJSON *v = cJSON_GetObjectItemCaseSensitive(o, k);
    if (!cJSON_IsNumber(v) || !isfinite(v->valuedouble) || v->valuedouble < 0) {
        if (!r->bad)
            snprintf(r->err, r->err_size, "field '%s': expected a non-negative number", k);
        r->bad = true;
        return 0;
    }
    return v->valuedouble;
}

static void jstr(jreader *r, const cJSON *o, const char *k, char *out, size_t size)
{
    const cJSON *v = cJSON_GetObjectItemCaseSensitive(o, k);
    out[0] = '\0';
    if (!cJSON_IsString(v) || strlen(v->valuestring) >= size) {
        if (!r->bad)
            snprintf(r->err, r->err_size, "field '%s': expected a string", k);
        r->bad = true;
        return;
    }
    memcpy(out, v->valuestring, strlen(v->valuestring) + 1);
}

static void jread_device(jreader *r, const cJSON *e, sy_probe_device *d)
{
    jstr(r, e, "name", d->name, sizeof d->name);
    jstr(r, e, "plugin", d->plugin, sizeof d->plugin);
    jstr(r, e, "plugin_version", d->plugin_version, sizeof d->plugin_version);
    jstr(r, e, "model", d->model, sizeof d->model);
    jstr(r, e, "driver", d->driver, sizeof d->driver);
    jstr(r, e, "error", d->error, sizeof d->error);
    d->kind = (uint32_t)jget(r, e, "kind");
    d->memory_bytes = (uint64_t)jget(r, e, "memory_bytes");
    d->unified_memory = cJSON_IsTrue(cJSON_GetObjectItemCaseSensitive(e, "unified_memory"));
    d->compute_units = (uint32_t)jget(r, e, "compute_units");
    d->bandwidth_bps = jget(r, e, "bandwidth_bps");
    d->flops = jget(r, e, "flops");
    d->launch_s = jget(r, e, "launch_s");
    d->h2d_bps = jget(r, e, "h2d_bps");
    d->h2d_latency_s = jget(r, e, "h2d_latency_s");
    d->d2h_bps = jget(r, e, "d2h_bps");
    d->d2h_latency_s = jget(r, e, "d2h_latency_s");
    jstr(r, e, "fingerprint", d->fingerprint, sizeof d->fingerprint);
    d->measure_s = jget(r, e, "measure_s");
    d->first_use_s = jget(r, e, "first_use_s");
    const cJSON *xs = cJSON_GetObjectItemCaseSensitive(e, "transfers");
    int n = cJSON_IsArray(xs) ? cJSON_GetArraySize(xs) : -1;
    if (n != (int)SY_PROBE_N_XFER_SIZES) {
        if (!r->bad)
            snprintf(r->err, r->err_size, "device '%s': expected %u transfers", d->name,
                     SY_PROBE_N_XFER_SIZES);
        r->bad = true;
        return;
    }
    for (int k = 0; k < n; k++) {
        const cJSON *x = cJSON_GetArrayItem(xs, k);
        d->xfer[k].bytes = (uint64_t)jget(r, x, "bytes");
        d->xfer[k].h2d_s = jget(r, x, "h2d_s");
        d->xfer[k].d2h_s = jget(r, x, "d2h_s");
    }
}

static void jread_link(jreader *r, const cJSON *e, sy_probe_link *l)
{
    if (!cJSON_IsObject(e)) {
        if (!r->bad)
            snprintf(r->err, r->err_size, "links: expected objects");
        r->bad = true;
        return;
    }
    jstr(r, e, "from", l->from, sizeof l->from);
    jstr(r, e, "to", l->to, sizeof l->to);
    jstr(r, e, "from_fingerprint", l->from_fingerprint, sizeof l->from_fingerprint);
    jstr(r, e, "to_fingerprint", l->to_fingerprint, sizeof l->to_fingerprint);
    jstr(r, e, "method", l->method, sizeof l->method);
    jstr(r, e, "error", l->error, sizeof l->error);
    l->zero_copy = cJSON_IsTrue(cJSON_GetObjectItemCaseSensitive(e, "zero_copy"));
    l->bps = jget(r, e, "bps");
    l->latency_s = jget(r, e, "latency_s");
    const cJSON *xs = cJSON_GetObjectItemCaseSensitive(e, "transfers");
    int n = cJSON_IsArray(xs) ? cJSON_GetArraySize(xs) : -1;
    if (n != (int)SY_PROBE_N_XFER_SIZES) {
        if (!r->bad)
            snprintf(r->err, r->err_size, "link %s->%s: expected %u transfers", l->from, l->to,
                     SY_PROBE_N_XFER_SIZES);
        r->bad = true;
        return;
    }
    for (int k = 0; k < n; k++) {
        const cJSON *x = cJSON_GetArrayItem(xs, k);
        l->bytes[k] = (uint64_t)jget(r, x, "bytes");
        l->seconds[k] = jget(r, x, "seconds");
    }
}

static void jread(jreader *r, const cJSON *root, sy_probe *p)
{
    const cJSON *schema = cJSON_GetObjectItemCaseSensitive(root, "schema");
    if (!cJSON_IsString(schema) || strcmp(schema->valuestring, PROBE_SCHEMA) != 0) {
        snprintf(r->err, r->err_size, "schema: expected \"%s\"", PROBE_SCHEMA);
        r->bad = true;
        return;
    }
    if (jget(r, root, "format_version") != SY_PROBE_FORMAT_VERSION && !r->bad) {
        snprintf(r->err, r->err_size, "format_version: this build reads %u",
                 SY_PROBE_FORMAT_VERSION);
        r->bad = true;
        return;
    }
    jstr(r, root, "fingerprint", p->fingerprint, sizeof p->fingerprint);
    jstr(r, root, "host_fingerprint", p->host_fingerprint, sizeof p->host_fingerprint);
    jstr(r, root, "switchyard_version", p->switchyard_version, sizeof p->switchyard_version);
    p->created = jget(r, root, "created");
    p->probe_s = jget(r, root, "probe_s");
    p->quick = cJSON_IsTrue(cJSON_GetObjectItemCaseSensitive(root, "quick"));
    const cJSON *t = cJSON_GetObjectItemCaseSensitive(root, "topology");
    const cJSON *h = cJSON_GetObjectItemCaseSensitive(root, "host_memory");
    const cJSON *devs = cJSON_GetObjectItemCaseSensitive(root, "devices");
    if (!cJSON_IsObject(t) || !cJSON_IsObject(h) || !cJSON_IsArray(devs)) {
        if (!r->bad)
            snprintf(r->err, r->err_size, "expected topology, host_memory and devices");
        r->bad = true;
        return;
    }
    jstr(r, t, "cpu_model", p->cpu_model, sizeof p->cpu_model);
    jstr(r, t, "summary", p->topology, sizeof p->topology);
    p->packages = (uint32_t)jget(r, t, "packages");
    p->cores = (uint32_t)jget(r, t, "cores");
    p->pus = (uint32_t)jget(r, t, "pus");
    p->numa_nodes = (uint32_t)jget(r, t, "numa_nodes");
    p->cores_allowed = (uint32_t)jget(r, t, "cores_allowed");
    p->l1d_bytes = (uint64_t)jget(r, t, "l1d_bytes");
    p->l2_bytes = (uint64_t)jget(r, t, "l2_bytes");
    p->l3_bytes = (uint64_t)jget(r, t, "l3_bytes");
    p->memory_total = (uint64_t)jget(r, t, "memory_total");
    p->memory_available = (uint64_t)jget(r, t, "memory_available");
    p->host_buffer_bytes = (uint64_t)jget(r, h, "buffer_bytes");
    const cJSON *bw = cJSON_GetObjectItemCaseSensitive(h, "bandwidth");
    int n = cJSON_IsArray(bw) ? cJSON_GetArraySize(bw) : -1;
    if (n < 0 || n > (int)SY_PROBE_MAX_THREAD_COUNTS ||
        cJSON_GetArraySize(devs) > (int)SY_PROBE_MAX_DEVICES) {
        if (!r->bad)
            snprintf(r->err, r->err_size, "host_memory.bandwidth or devices: bad array");
        r->bad = true;
        return;
    }
    p->n_host_bw = (uint32_t)n;
    for (int i = 0; i < n; i++) {
        const cJSON *e = cJSON_GetArrayItem(bw, i);
        p->host_bw[i].threads = (uint32_t)jget(r, e, "threads");
        p->host_bw[i].read_bps = jget(r, e, "read_bps");
        p->host_bw[i].copy_bps = jget(r, e, "copy_bps");
        /* What the probe writes: thread counts rising from 1, every
         * bandwidth measured (> 0). Anything else was not written by it. */
        uint32_t prev = i ? p->host_bw[i - 1].threads : 0;
        if (!r->bad && (p->host_bw[i].threads <= prev || !(p->host_bw[i].read_bps > 0) ||
                        !(p->host_bw[i].copy_bps > 0))) {
            snprintf(r->err, r->err_size,
                     "host_memory.bandwidth[%d]: thread counts must rise and bandwidths be > 0", i);
            r->bad = true;
        }
    }
    p->n_devices = (uint32_t)cJSON_GetArraySize(devs);
    for (uint32_t i = 0; i < p->n_devices; i++)
        jread_device(r, cJSON_GetArrayItem(devs, (int)i), &p->devices[i]);
    const cJSON *links = cJSON_GetObjectItemCaseSensitive(root, "links");
    int nl = cJSON_IsArray(links) ? cJSON_GetArraySize(links) : -1;
    if (nl < 0 || nl > (int)SY_PROBE_MAX_LINKS) {
        if (!r->bad)
            snprintf(r->err, r->err_size, "links: expected an array of at most %u",
                     SY_PROBE_MAX_LINKS);
        r->bad = true;
        return;
    }
    p->n_links = (uint32_t)nl;
    for (uint32_t i = 0; i < p->n_links; i++)
        jread_link(r, cJSON_GetArrayItem(links, (int)i), &p->links[i]);
}

sy_status sy_probe_from_json(const char *json, size_t len, sy_probe *out_probe, char *err,
                             size_t err_size)
{
    char dummy[8];
    if (!err || !err_size) {
        err = dummy;
        err_size = sizeof dummy;
    }
    err[0] = '\0';
    memset(out_probe, 0, sizeof *out_probe);
    cJSON *root = cJSON_ParseWithLength(json, len);
    if (!root || !cJSON_IsObject(root)) {
        cJSON_Delete(root);
        snprintf(err, err_size, "not a JSON object");
        return SY_E_FORMAT;
    }
    jreader r = {.err = err, .err_size = err_size};
    jread(&r, root, out_probe);
    cJSON_Delete(root);
    if (r.bad) {
        memset(out_probe, 0, sizeof *out_probe);
        return SY_E_FORMAT;
    }
    return SY_OK;
}

/* ---------------------------------------------------------------- tables */

static const char *fmt_bytes(uint64_t b, char *out, size_t size)
{
    static const char *const u[] = {"B", "KiB", "MiB", "GiB", "TiB"};
    double v = (double)b;
    unsigned k = 0;
    while (v >= 1024.0 && k < 4) {
        v /= 1024.0;
        k++;
    }
    snprintf(out, size, v == (double)(uint64_t)v ? "%.0f %s" : "%.1f %s", v, u[k]);
    return out;
}

static const char *fmt_time(double s, char *out, size_t size)
{
    if (s <= 0)
        snprintf(out, size, "-");
    else if (s < 1e-3)
        snprintf(out, size, "%.1f us", s * 1e6);
    else
        snprintf(out, size, "%.2f ms", s * 1e3);
    return out;
}

void sy_probe_print(const sy_probe *p, FILE *f)
{
    static const char *const kinds[] = {"cpu", "gpu", "npu"};
    char a[32], b[32], c[32];
    fprintf(f, "machine   %s\n", p->cpu_model);
    fprintf(f, "topology  %s\n", p->topology);
    fprintf(f, "caches    L1d %s, L2 %s, L3 %s (one instance each)\n",
            fmt_bytes(p->l1d_bytes, a, sizeof a), fmt_bytes(p->l2_bytes, b, sizeof b),
            fmt_bytes(p->l3_bytes, c, sizeof c));
    fprintf(f, "memory    %s total, %s available now\n", fmt_bytes(p->memory_total, a, sizeof a),
            fmt_bytes(p->memory_available, b, sizeof b));
    fprintf(f, "probe     %s in %.2f s%s, fingerprint %s\n",
            p->from_cache ? "cached, measured" : "measured now", p->probe_s,
            p->quick ? " (quick sizes)" : "", p->fingerprint);
    for (uint32_t i = 0; i < p->n_devices; i++)
        if (p->devices[i].measured_now && p->devices[i].first_use_s > 0.5)
            fprintf(f, "          of which %.2f s first launches on %s (kernel builds; once)\n",
                    p->devices[i].first_use_s, p->devices[i].name);
    fprintf(f, "\nhost memory bandwidth (buffer %s, pinned threads)\n",
            fmt_bytes(p->host_buffer_bytes, a, sizeof a));
    fprintf(f, "  %7s  %12s  %12s\n", "threads", "read GB/s", "copy GB/s");
    for (uint32_t i = 0; i < p->n_host_bw; i++)
        fprintf(f, "  %7u  %12.2f  %12.2f\n", p->host_bw[i].threads, p->host_bw[i].read_bps / 1e9,
                p->host_bw[i].copy_bps / 1e9);
    fprintf(f, "\ndevices\n");
    fprintf(f, "  %-12s %-4s %-8s %10s %10s %10s %10s %10s %10s\n", "device", "kind", "plugin",
            "mem", "GB/s", "GFLOP/s", "launch", "h2d GB/s", "d2h GB/s");
    for (uint32_t i = 0; i < p->n_devices; i++) {
        const sy_probe_device *d = &p->devices[i];
        fprintf(f, "  %-12s %-4s %-8s %10s %10.2f %10.2f %10s %10.2f %10.2f\n", d->name,
                d->kind < 3 ? kinds[d->kind] : "?", d->plugin,
                fmt_bytes(d->memory_bytes, a, sizeof a), d->bandwidth_bps / 1e9, d->flops / 1e9,
                fmt_time(d->launch_s, b, sizeof b), d->h2d_bps / 1e9, d->d2h_bps / 1e9);
    }
    fprintf(f, "\nhost transfers (one copy, lower quartile)\n");
    fprintf(f, "  %-12s %10s %12s %12s\n", "device", "size", "host->dev", "dev->host");
    for (uint32_t i = 0; i < p->n_devices; i++) {
        const sy_probe_device *d = &p->devices[i];
        for (uint32_t k = 0; k < SY_PROBE_N_XFER_SIZES; k++) {
            if (!d->xfer[k].bytes)
                continue;
            fprintf(f, "  %-12s %10s %12s %12s\n", k == 0 ? d->name : "",
                    fmt_bytes(d->xfer[k].bytes, a, sizeof a), fmt_time(d->xfer[k].h2d_s, b, sizeof b),
                    fmt_time(d->xfer[k].d2h_s, c, sizeof c));
        }
        if (d->error[0])
            fprintf(f, "  %-12s not measured: %s\n", d->name, d->error);
    }
    if (p->n_links == 0)
        return;
    fprintf(f, "\ndevice->device transfers (one copy as the executor makes it)\n");
    fprintf(f, "  %-22s %-12s %10s %10s %10s %10s %9s\n", "link", "method",
            fmt_bytes(p->links[0].bytes[0], a, sizeof a), fmt_bytes(p->links[0].bytes[1], b, sizeof b),
            fmt_bytes(p->links[0].bytes[2], c, sizeof c), "GB/s", "");
    for (uint32_t i = 0; i < p->n_links; i++) {
        const sy_probe_link *l = &p->links[i];
        char name[2 * SY_NAME_MAX + 4];
        snprintf(name, sizeof name, "%s->%s", l->from, l->to);
        if (l->error[0]) {
            fprintf(f, "  %-22s not measured: %s\n", name, l->error);
            continue;
        }
        char t0[32], t1[32], t2[32];
        fprintf(f, "  %-22s %-12s %10s %10s %10s %10.2f %9s\n", name, l->method,
                fmt_time(l->seconds[0], t0, sizeof t0), fmt_time(l->seconds[1], t1, sizeof t1),
                fmt_time(l->seconds[2], t2, sizeof t2), l->bps / 1e9,
                l->zero_copy ? "mappable" : "");
    }
}
