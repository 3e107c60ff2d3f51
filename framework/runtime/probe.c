/* The probe's front: fingerprint, cache file and the query that returns
 * cached or fresh results.  Measurements live in probe_host.c and
 * probe_device.c, JSON and tables in probe_json.c. */
#include <errno.h>
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

sy_status sy_probe_fingerprint(sy_runtime *rt, const char *extra, char *out, size_t size)
{
    if (!rt || !out || size < 17)
        return SY_E_INVALID_ARG;
    char buf[512];
    uint64_t h = 1469598103934665603ull;
    snprintf(buf, sizeof buf, "probe-format %u switchyard %s", SY_PROBE_FORMAT_VERSION,
             SY_VERSION_STRING);
    h = fnv(h, buf);
    sy_probe topo;
    memset(&topo, 0, sizeof topo);
    sy__probe_host_topology(rt, &topo);
    snprintf(buf, sizeof buf, "%s|%s|%llu", topo.cpu_model, topo.topology,
             (unsigned long long)topo.memory_total);
    h = fnv(h, buf);
    for (uint32_t i = 0; i < rt->plugin_count; i++) {
        const sy__plugin *p = rt->plugins[i];
        snprintf(buf, sizeof buf, "plugin %s %s", p->desc.name ? p->desc.name : "",
                 p->desc.version ? p->desc.version : "");
        h = fnv(h, buf);
    }
    for (uint32_t i = 0; i < rt->device_count; i++) {
        const sy_device_desc *d = &rt->devices[i].desc;
        snprintf(buf, sizeof buf, "device %s|%s|%s|%s|%llu|%u|%u", d->name, d->model, d->vendor,
                 d->driver, (unsigned long long)d->memory_bytes, d->compute_units,
                 d->unified_memory);
        h = fnv(h, buf);
    }
    h = fnv(h, extra);
    snprintf(out, size, "%016llx", (unsigned long long)h);
    return SY_OK;
}

sy_status sy_probe_default_cache_path(char *out, size_t size)
{
    const char *xdg = getenv("XDG_CACHE_HOME");
    int n;
    if (xdg && xdg[0] == '/') {
        n = snprintf(out, size, "%s/switchyard/probe.json", xdg);
    } else {
        const char *home = getenv("HOME");
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

static sy_status probe_measure(sy_runtime *rt, bool quick, sy_probe *p)
{
    double t0 = sy__probe_now();
    sy_status st = sy__probe_host_topology(rt, p);
    if (st != SY_OK)
        return st;
    st = sy__probe_host_bandwidth(rt, p, quick);
    if (st != SY_OK)
        sy_runtime_log(rt, SY_LOG_WARN, "probe: host bandwidth not measured: %s",
                       sy_runtime_last_error(rt));
    p->n_devices = rt->device_count < SY_PROBE_MAX_DEVICES ? rt->device_count
                                                           : SY_PROBE_MAX_DEVICES;
    sy_runtime_log(rt, SY_LOG_INFO, "probe: host done in %.2f s", sy__probe_now() - t0);
    for (uint32_t i = 0; i < p->n_devices; i++) {
        double td = sy__probe_now();
        sy__probe_device(rt, i, quick, &p->devices[i]);
        sy_runtime_log(rt, SY_LOG_INFO, "probe: device '%s' done in %.2f s", p->devices[i].name,
                       sy__probe_now() - td);
        if (p->devices[i].error[0])
            sy_runtime_log(rt, SY_LOG_INFO, "probe: device '%s': %s", p->devices[i].name,
                           p->devices[i].error);
    }
    p->quick = quick;
    p->created = (double)time(NULL);
    p->probe_s = sy__probe_now() - t0;
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
    char fp[24];
    sy_status st = sy_probe_fingerprint(rt, o.fingerprint_extra, fp, sizeof fp);
    if (st != SY_OK)
        return st;
    char path[1024] = "";
    if (!o.no_cache) {
        if (o.cache_path)
            snprintf(path, sizeof path, "%s", o.cache_path);
        else if (sy_probe_default_cache_path(path, sizeof path) != SY_OK)
            path[0] = '\0';
    }
    if (path[0] && !o.refresh) {
        size_t len;
        char *json = probe_read_file(path, &len);
        if (json) {
            char err[256];
            sy_probe *cached = calloc(1, sizeof *cached);
            st = cached ? sy_probe_from_json(json, len, cached, err, sizeof err) : SY_E_NO_MEMORY;
            if (st == SY_OK && strcmp(cached->fingerprint, fp) == 0) {
                *out_probe = *cached;
                out_probe->from_cache = true;
                out_probe->memory_available = sy__probe_memory_available();
                free(cached);
                free(json);
                return SY_OK;
            }
            if (st == SY_OK)
                sy_runtime_log(rt, SY_LOG_INFO,
                               "probe cache '%s' was made for another machine or driver "
                               "(fingerprint %s, now %s); probing again",
                               path, cached->fingerprint, fp);
            else
                sy_runtime_log(rt, SY_LOG_WARN,
                               "probe cache '%s' is corrupt or foreign (%s); replacing it", path,
                               err);
            free(cached);
            free(json);
        }
    }
    sy_runtime_log(rt, SY_LOG_INFO, "probing this machine (once; cached in %s)",
                   path[0] ? path : "nowhere");
    st = probe_measure(rt, o.quick, out_probe);
    if (st != SY_OK) {
        memset(out_probe, 0, sizeof *out_probe);
        return st;
    }
    snprintf(out_probe->fingerprint, sizeof out_probe->fingerprint, "%s", fp);
    snprintf(out_probe->switchyard_version, sizeof out_probe->switchyard_version, "%s",
             SY_VERSION_STRING);
    if (path[0]) {
        char *json = NULL;
        st = sy_probe_to_json(out_probe, &json);
        if (st == SY_OK)
            st = probe_write_file(path, json);
        free(json);
        if (st != SY_OK)
            sy_runtime_log(rt, SY_LOG_WARN, "cannot write probe cache '%s': %s", path,
                           sy_status_str(st));
    }
    return SY_OK;
}

double sy_probe_host_read_bps(const sy_probe *p)
{
    double best = 0;
    for (uint32_t i = 0; i < p->n_host_bw; i++)
        if (p->host_bw[i].read_bps > best)
            best = p->host_bw[i].read_bps;
    return best;
}
