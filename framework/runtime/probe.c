/* The probe's front: fingerprint, cache file and the query that returns
 * cached or fresh results.  Measurements live in probe_host.c and
 * probe_device.c, JSON and tables in probe_json.c. */
#include <errno.h>
#include <pwd.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <time.h>
#include <unistd.h>

#include "probe.h"
#include "runtime_internal.h"

void sy_probe_options_init(sy_probe_options *opts)
{
    memset(opts, 0, sizeof *opts);
    opts->struct_size = sizeof *opts;
}

static uint64_t fnv(uint64_t h, const char *s)
{
    for (; s && *s; s++)
        h = (h ^ (uint8_t)*s) * 1099511628211ull;
    return (h ^ 0xffu) * 1099511628211ull; /* field separator */
}

#define FNV_SEED 1469598103934665603ull

/* Hardware, switchyard and the probe format: what every cached figure
 * depends on. */
static sy_status host_fingerprint(sy_runtime *rt, const char *extra, char *out, size_t size)
{
    sy_probe *topo = calloc(1, sizeof *topo);
    if (!topo)
        return SY_E_NO_MEMORY;
    char buf[512];
    uint64_t h = FNV_SEED;
    snprintf(buf, sizeof buf, "probe-format %u host-method %u switchyard %s",
             SY_PROBE_FORMAT_VERSION, SY_PROBE_HOST_METHOD, SY_VERSION_STRING);
    h = fnv(h, buf);
    sy__probe_host_topology(rt, topo);
    snprintf(buf, sizeof buf, "%s|%s|%llu", topo->cpu_model, topo->topology,
             (unsigned long long)topo->memory_total);
    h = fnv(h, buf);
    h = fnv(h, extra);
    free(topo);
    snprintf(out, size, "%016llx", (unsigned long long)h);
    return SY_OK;
}

void sy__probe_device_fingerprint(sy_runtime *rt, uint32_t dev, char *out, size_t size)
{
    const sy__device *d = &rt->devices[dev];
    const sy__plugin *p = d->plugin;
    char buf[1024];
    snprintf(buf, sizeof buf, "plugin %s %s|device %s|%s|%s|%s|%llu|%u|%u",
             p->desc.name ? p->desc.name : "", p->desc.version ? p->desc.version : "",
             d->desc.name, d->desc.model, d->desc.vendor, d->desc.driver,
             (unsigned long long)d->desc.memory_bytes, d->desc.compute_units,
             d->desc.unified_memory);
    snprintf(out, size, "%016llx", (unsigned long long)fnv(FNV_SEED, buf));
}

/* The whole probe's fingerprint: the host's and every device's. */
static void combined_fingerprint(const char *host, const char (*devs)[24], uint32_t n, char *out,
                                 size_t size)
{
    uint64_t h = fnv(FNV_SEED, host);
    for (uint32_t i = 0; i < n; i++)
        h = fnv(h, devs[i]);
    snprintf(out, size, "%016llx", (unsigned long long)h);
}

sy_status sy_probe_fingerprint(sy_runtime *rt, const char *extra, char *out, size_t size)
{
    if (!rt || !out || size < 17)
        return SY_E_INVALID_ARG;
    char host[24];
    sy_status st = host_fingerprint(rt, extra, host, sizeof host);
    if (st != SY_OK)
        return st;
    char (*devs)[24] = calloc(rt->device_count + 1u, sizeof *devs);
    if (!devs)
        return SY_E_NO_MEMORY;
    for (uint32_t i = 0; i < rt->device_count; i++)
        sy__probe_device_fingerprint(rt, i, devs[i], sizeof devs[i]);
    combined_fingerprint(host, devs, rt->device_count, out, size);
    free(devs);
    return SY_OK;
}

sy_status sy_probe_default_cache_path(char *out, size_t size)
{
    /* Resolved now, not when the runtime was made: the cache is a file of
     * this user's, and a caller (a test, a service) may point
     * XDG_CACHE_HOME elsewhere between runtimes. */
    const char *xdg = getenv("XDG_CACHE_HOME");
    int n;
    if (xdg && xdg[0] == '/') {
        n = snprintf(out, size, "%s/switchyard/probe.json", xdg);
    } else {
        const char *home = getenv("HOME");
        char pwbuf[1024];
        struct passwd pw, *found = NULL;
        if ((!home || !home[0]) && getpwuid_r(getuid(), &pw, pwbuf, sizeof pwbuf, &found) == 0 &&
            found && found->pw_dir && found->pw_dir[0] == '/')
            home = found->pw_dir;
        if (!home || !home[0])
            return SY_E_NOT_FOUND;
        n = snprintf(out, size, "%s/.cache/switchyard/probe.json", home);
    }
    return n > 0 && (size_t)n < size ? SY_OK : SY_E_LIMIT;
}

/* Creates every missing directory above the file |path|. */
static sy_status probe_mkdirs(const char *path)
{
    char dir[1024];
    if (snprintf(dir, sizeof dir, "%s", path) >= (int)sizeof dir)
        return SY_E_LIMIT;
    char *slash = strrchr(dir, '/');
    if (!slash || slash == dir)
        return SY_OK;
    *slash = '\0';
    for (char *p = dir + 1; *p; p++) {
        if (*p != '/')
            continue;
        *p = '\0';
        if (mkdir(dir, 0755) != 0 && errno != EEXIST)
            return SY_E_IO;
        *p = '/';
    }
    if (mkdir(dir, 0755) != 0 && errno != EEXIST)
        return SY_E_IO;
    return SY_OK;
}

/* Reads the whole file; NULL with *out_len 0 when absent. */
static char *probe_read_file(const char *path, size_t *out_len)
{
    *out_len = 0;
    FILE *f = fopen(path, "rb");
    if (!f)
        return NULL;
    char *buf = NULL;
    size_t cap = 0, len = 0;
    for (;;) {
        if (len + 4096 > cap) {
            if (cap > (16u << 20))
                break;
            char *nb = realloc(buf, cap ? cap * 2 : 8192);
            if (!nb)
                break;
            buf = nb;
            cap = cap ? cap * 2 : 8192;
        }
        size_t got = fread(buf + len, 1, cap - len - 1, f);
        len += got;
        if (got == 0)
            break;
    }
    fclose(f);
    if (buf)
        buf[len] = '\0';
    *out_len = len;
    return buf;
}

/* Writes |json| to |path| through a temporary file and a rename, so that a
 * reader never sees half a file. */
static sy_status probe_write_file(const char *path, const char *json)
{
    sy_status st = probe_mkdirs(path);
    if (st != SY_OK)
        return st;
    char tmp[1100];
    if (snprintf(tmp, sizeof tmp, "%s.%ld.tmp", path, (long)getpid()) >= (int)sizeof tmp)
        return SY_E_LIMIT;
    FILE *f = fopen(tmp, "wb");
    if (!f)
        return SY_E_IO;
    size_t n = strlen(json);
    bool ok = fwrite(json, 1, n, f) == n;
    ok = fclose(f) == 0 && ok;
    if (!ok || rename(tmp, path) != 0) {
        unlink(tmp);
        return SY_E_IO;
    }
    return SY_OK;
}

static const sy_probe_device *cached_device(const sy_probe *c, const char *name, const char *fp)
{
    for (uint32_t i = 0; c && i < c->n_devices; i++)
        if (strcmp(c->devices[i].name, name) == 0 && strcmp(c->devices[i].fingerprint, fp) == 0)
            return &c->devices[i];
    return NULL;
}

static const sy_probe_link *cached_link(const sy_probe *c, const sy_probe_device *from,
                                        const sy_probe_device *to)
{
    for (uint32_t i = 0; c && i < c->n_links; i++) {
        const sy_probe_link *l = &c->links[i];
        if (strcmp(l->from, from->name) == 0 && strcmp(l->to, to->name) == 0 &&
            strcmp(l->from_fingerprint, from->fingerprint) == 0 &&
            strcmp(l->to_fingerprint, to->fingerprint) == 0)
            return l;
    }
    return NULL;
}

/* Reads the cache at |path| into a new probe when it was made on this
 * host (fingerprint |host_fp|); NULL otherwise, with the reason logged. */
static sy_probe *probe_read_cache(sy_runtime *rt, const char *path, const char *host_fp)
{
    size_t len;
    char *json = probe_read_file(path, &len);
    if (!json)
        return NULL;
    char err[256];
    sy_probe *c = calloc(1, sizeof *c);
    sy_status st = c ? sy_probe_from_json(json, len, c, err, sizeof err) : SY_E_NO_MEMORY;
    free(json);
    if (st == SY_OK && strcmp(c->host_fingerprint, host_fp) == 0)
        return c;
    if (st == SY_OK)
        sy_runtime_log(rt, SY_LOG_INFO,
                       "probe cache '%s' was made on other hardware or another switchyard "
                       "(fingerprint %s, now %s); probing again",
                       path, c->host_fingerprint, host_fp);
    else if (c)
        sy_runtime_log(rt, SY_LOG_WARN, "probe cache '%s' is corrupt or foreign (%s); replacing it",
                       path, err);
    free(c);
    return NULL;
}

/* The file's content: |p|, then the entries of |cached| for devices and
 * links |p| does not hold (other plugins, other drivers), as many as fit,
 * so that alternating device sets do not probe again and again. */
static void probe_merge_for_file(const sy_probe *p, const sy_probe *cached, sy_probe *file)
{
    *file = *p;
    for (uint32_t i = 0; cached && i < cached->n_devices; i++) {
        const sy_probe_device *d = &cached->devices[i];
        if (file->n_devices < SY_PROBE_MAX_DEVICES && !cached_device(p, d->name, d->fingerprint))
            file->devices[file->n_devices++] = *d;
    }
    for (uint32_t i = 0; cached && i < cached->n_links; i++) {
        const sy_probe_link *l = &cached->links[i];
        bool held = false;
        for (uint32_t k = 0; k < p->n_links && !held; k++)
            held = strcmp(p->links[k].from_fingerprint, l->from_fingerprint) == 0 &&
                   strcmp(p->links[k].to_fingerprint, l->to_fingerprint) == 0 &&
                   strcmp(p->links[k].from, l->from) == 0 && strcmp(p->links[k].to, l->to) == 0;
        if (!held && file->n_links < SY_PROBE_MAX_LINKS)
            file->links[file->n_links++] = *l;
    }
}

static void probe_copy_host(sy_probe *p, const sy_probe *c)
{
    memcpy(p->cpu_model, c->cpu_model, sizeof p->cpu_model);
    memcpy(p->topology, c->topology, sizeof p->topology);
    p->packages = c->packages;
    p->cores = c->cores;
    p->pus = c->pus;
    p->numa_nodes = c->numa_nodes;
    p->cores_allowed = c->cores_allowed;
    p->l1d_bytes = c->l1d_bytes;
    p->l2_bytes = c->l2_bytes;
    p->l3_bytes = c->l3_bytes;
    p->memory_total = c->memory_total;
    p->host_buffer_bytes = c->host_buffer_bytes;
    p->n_host_bw = c->n_host_bw;
    memcpy(p->host_bw, c->host_bw, sizeof p->host_bw);
    p->quick = c->quick;
    p->created = c->created;
    p->probe_s = c->probe_s;
}

/* Fills every part of |p| that |cached| (may be NULL) does not hold for
 * this runtime by measuring it; *out_measured counts the parts measured. */
static sy_status probe_fill(sy_runtime *rt, const sy_probe_options *o, const sy_probe *cached,
                            sy_probe *p, uint32_t *out_measured)
{
    uint32_t measured = 0;
    double t0 = sy__probe_now();
    double budget = o->budget_s > 0 ? o->budget_s : SY_PROBE_DEFAULT_BUDGET_S;
    if (cached) {
        probe_copy_host(p, cached);
    } else {
        sy_status st = sy__probe_host_topology(rt, p);
        if (st != SY_OK)
            return st;
        /* Host bandwidth gets a third of the budget, devices and links the
         * rest: a device may need a first launch that builds kernels. */
        st = sy__probe_host_bandwidth(rt, p, o->quick, budget / 3);
        if (st != SY_OK)
            sy_runtime_log(rt, SY_LOG_WARN, "probe: host bandwidth not measured: %s",
                           sy_runtime_last_error(rt));
        p->quick = o->quick;
        p->created = (double)time(NULL);
        measured++;
        sy_runtime_log(rt, SY_LOG_INFO, "probe: host done in %.2f s", sy__probe_now() - t0);
    }
    p->memory_available = sy__probe_memory_available();
    p->n_devices = rt->device_count < SY_PROBE_MAX_DEVICES ? rt->device_count : SY_PROBE_MAX_DEVICES;
    uint32_t to_measure = 0;
    for (uint32_t i = 0; i < p->n_devices; i++) {
        char fp[24];
        sy__probe_device_fingerprint(rt, i, fp, sizeof fp);
        const sy_probe_device *c = cached_device(cached, rt->devices[i].desc.name, fp);
        if (c) {
            p->devices[i] = *c;
            p->devices[i].measured_now = false;
        } else {
            memset(&p->devices[i], 0, sizeof p->devices[i]);
            snprintf(p->devices[i].fingerprint, sizeof p->devices[i].fingerprint, "%s", fp);
            to_measure++;
        }
    }
    for (uint32_t i = 0; i < p->n_devices; i++) {
        sy_probe_device *d = &p->devices[i];
        if (d->name[0])
            continue;
        char fp[24];
        memcpy(fp, d->fingerprint, sizeof fp);
        double left = budget - (sy__probe_now() - t0);
        double share = left * 0.8 / (double)(to_measure ? to_measure : 1);
        double td = sy__probe_now();
        sy__probe_device(rt, i, o->quick, share > 0.3 ? share : 0.3, d);
        memcpy(d->fingerprint, fp, sizeof fp);
        d->measure_s = sy__probe_now() - td;
        d->measured_now = true;
        to_measure--;
        measured++;
        sy_runtime_log(rt, SY_LOG_INFO, "probe: device '%s' done in %.2f s (first launches %.2f s)",
                       d->name, d->measure_s, d->first_use_s);
        if (d->error[0])
            sy_runtime_log(rt, SY_LOG_INFO, "probe: device '%s': %s", d->name, d->error);
    }
    p->n_links = 0;
    for (uint32_t i = 0; i < p->n_devices; i++) {
        for (uint32_t j = 0; j < p->n_devices && p->n_links < SY_PROBE_MAX_LINKS; j++) {
            if (i == j)
                continue;
            sy_probe_link *l = &p->links[p->n_links++];
            const sy_probe_link *c = cached_link(cached, &p->devices[i], &p->devices[j]);
            if (c) {
                *l = *c;
                l->measured_now = false;
                continue;
            }
            sy__probe_link(rt, i, j, o->quick, l);
            memcpy(l->from_fingerprint, p->devices[i].fingerprint, sizeof l->from_fingerprint);
            memcpy(l->to_fingerprint, p->devices[j].fingerprint, sizeof l->to_fingerprint);
            l->measured_now = true;
            measured++;
        }
    }
    if (measured)
        p->probe_s = sy__probe_now() - t0;
    *out_measured = measured;
    return SY_OK;
}

sy_status sy_runtime_probe(sy_runtime *rt, const sy_probe_options *opts, sy_probe *out_probe)
{
    if (!rt || !out_probe)
        return SY_E_INVALID_ARG;
    sy_probe_options o;
    sy_probe_options_init(&o);
    if (opts)
        memcpy(&o, opts, opts->struct_size < sizeof o ? opts->struct_size : sizeof o);
    memset(out_probe, 0, sizeof *out_probe);
    char host_fp[24];
    sy_status st = host_fingerprint(rt, o.fingerprint_extra, host_fp, sizeof host_fp);
    if (st != SY_OK)
        return st;
    char path[1024] = "";
    if (!o.no_cache) {
        if (o.cache_path)
            snprintf(path, sizeof path, "%s", o.cache_path);
        else if (sy_probe_default_cache_path(path, sizeof path) != SY_OK)
            path[0] = '\0';
    }
    /* With --refresh the old file still gives the entries of devices this
     * runtime does not hold, so that they survive the rewrite. */
    sy_probe *old = path[0] ? probe_read_cache(rt, path, host_fp) : NULL;
    const sy_probe *cached = o.refresh ? NULL : old;
    sy_probe *p = calloc(1, sizeof *p), *file = NULL;
    if (!p) {
        free(old);
        return SY_E_NO_MEMORY;
    }
    if (o.cache_only) {
        /* Dry run: would anything be measured? */
        bool current = cached != NULL;
        for (uint32_t i = 0; current && i < rt->device_count && i < SY_PROBE_MAX_DEVICES; i++) {
            char fp[24];
            sy__probe_device_fingerprint(rt, i, fp, sizeof fp);
            current = cached_device(cached, rt->devices[i].desc.name, fp) != NULL;
        }
        if (!current) {
            st = SY_E_NOT_FOUND;
            goto out_free;
        }
    }
    if (!cached)
        sy_runtime_log(rt, SY_LOG_INFO, "probing this machine (once; cached in %s)",
                       path[0] ? path : "nowhere");
    uint32_t measured = 0;
    st = probe_fill(rt, &o, cached, p, &measured);
    if (st != SY_OK)
        goto out_free;
    snprintf(p->host_fingerprint, sizeof p->host_fingerprint, "%s", host_fp);
    snprintf(p->switchyard_version, sizeof p->switchyard_version, "%s", SY_VERSION_STRING);
    char (*fps)[24] = calloc(p->n_devices + 1u, sizeof *fps);
    if (!fps) {
        st = SY_E_NO_MEMORY;
        goto out_free;
    }
    for (uint32_t i = 0; i < p->n_devices; i++)
        memcpy(fps[i], p->devices[i].fingerprint, sizeof fps[i]);
    combined_fingerprint(host_fp, fps, p->n_devices, p->fingerprint, sizeof p->fingerprint);
    free(fps);
    p->from_cache = measured == 0;
    if (path[0] && measured > 0) {
        char *json = NULL;
        file = calloc(1, sizeof *file);
        st = file ? SY_OK : SY_E_NO_MEMORY;
        if (st == SY_OK) {
            probe_merge_for_file(p, old, file);
            st = sy_probe_to_json(file, &json);
        }
        if (st == SY_OK)
            st = probe_write_file(path, json);
        free(json);
        if (st != SY_OK)
            sy_runtime_log(rt, SY_LOG_WARN, "cannot write probe cache '%s': %s", path,
                           sy_status_str(st));
        st = SY_OK;
    }
    *out_probe = *p;
out_free:
    free(file);
    free(p);
    free(old);
    return st;
}

double sy_probe_host_read_bps(const sy_probe *p)
{
    double best = 0;
    for (uint32_t i = 0; i < p->n_host_bw; i++)
        if (p->host_bw[i].read_bps > best)
            best = p->host_bw[i].read_bps;
    return best;
}
