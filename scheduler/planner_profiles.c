/* Finding each device's profile without being told where: the user's
 * (written by `switchyard tune`, docs/probe.md) before the shipped ones.
 * The runtime resolves the search path once, when it is created
 * (sy__runtime_profile_path); this file walks it.  A device no file
 * describes gets the probe's measured peaks as its roofline, when the
 * probe cache has them, rather than the device's own claims. */
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include "plan_internal.h"
#include "probe.h"
#include "runtime_internal.h"

/* "<dir>/<stem>.json" with ':' and '/' in |stem| as '_': "opencl:0" gives
 * opencl_0.json, the name `switchyard tune` writes. */
static bool profile_file(const char *dir, size_t dir_len, const char *stem, char *out, size_t size)
{
    char name[SY_NAME_MAX];
    snprintf(name, sizeof name, "%s", stem);
    for (char *p = name; *p; p++)
        if (*p == ':' || *p == '/')
            *p = '_';
    int n = snprintf(out, size, "%.*s/%s.json", (int)dir_len, dir, name);
    return n > 0 && (size_t)n < size;
}

/* Tries |file| for device |dev|; true when it now holds the profile.  A
 * plugin-named file (the shipped opencl.json) that describes another
 * device of the plugin is passed over quietly. */
static bool try_profile(sy_planner *pl, const char *file, const char *dev, bool by_plugin)
{
    if (access(file, F_OK) != 0)
        return false;
    sy_status st = sy__planner_load_profile_for(pl, file, dev);
    if (st == SY_OK) {
        sy_runtime_log(pl->rt, SY_LOG_INFO, "profile for %s: %s", dev, file);
        return true;
    }
    if (!(by_plugin && st == SY_E_NOT_FOUND))
        /* A broken user profile must neither hide the shipped one nor go
         * unnoticed. */
        sy_runtime_log(pl->rt, SY_LOG_WARN, "skipping profile %s: %s", file, pl->last_error);
    return false;
}

static double measured(double v)
{
    return v > 0 && isfinite(v) ? v : NAN;
}

/* A profile holding what the probe measured of |pd|: roofline peaks,
 * launch overhead and the links from it.  No op entries, so its nodes stay
 * flagged unmeasured; NULL when the probe measured neither rate. */
static sy__profile *probe_profile(const sy_probe *pr, const sy_probe_device *pd)
{
    if (!(pd->flops > 0) && !(pd->bandwidth_bps > 0))
        return NULL;
    sy__profile *p = calloc(1, sizeof *p);
    if (!p)
        return NULL;
    snprintf(p->device, sizeof p->device, "%s", pd->name);
    snprintf(p->plugin, sizeof p->plugin, "%s", pd->plugin);
    snprintf(p->plugin_version, sizeof p->plugin_version, "%s", pd->plugin_version);
    snprintf(p->version, sizeof p->version, "probe %s", pd->fingerprint);
    snprintf(p->origin, sizeof p->origin, "the probe cache (no profile file)");
    uint64_t h = 0x9e3779b97f4a7c15ull;
    for (const char *c = p->version; *c; c++)
        h = (h ^ (uint8_t)*c) * 0x100000001b3ull;
    p->hash = h;
    p->peak_flops = measured(pd->flops);
    p->peak_bandwidth = measured(pd->bandwidth_bps);
    p->launch_overhead_s = measured(pd->launch_s);
    p->idle_w = p->active_w = NAN;
    p->links = calloc((size_t)pr->n_links + 1, sizeof *p->links);
    if (!p->links) {
        sy__profile_destroy(p);
        return NULL;
    }
    for (uint32_t k = 0; k < pr->n_links; k++) {
        const sy_probe_link *pl = &pr->links[k];
        if (strcmp(pl->from, pd->name) != 0 || pl->error[0] || !(pl->bps > 0))
            continue;
        sy__link_entry *l = &p->links[p->n_links++];
        snprintf(l->to, sizeof l->to, "%s", pl->to);
        l->bandwidth = pl->bps;
        l->latency_s = measured(pl->latency_s);
        l->sync_s = l->map_s = l->j_per_byte = NAN;
        l->zero_copy = pl->zero_copy ? 1 : -1;
    }
    return p;
}

/* Gives the devices flagged in |need| their probe figures, when the probe
 * cache holds every device of the runtime (nothing is measured here). */
static uint32_t load_probe_profiles(sy_planner *pl, const bool *need)
{
    sy_probe *pr = calloc(1, sizeof *pr);
    if (!pr)
        return 0;
    sy_probe_options po;
    sy_probe_options_init(&po);
    po.cache_only = true;
    uint32_t loaded = 0;
    sy_status st = sy_runtime_probe(pl->rt, &po, pr);
    if (st != SY_OK)
        sy_runtime_log(pl->rt, SY_LOG_DEBUG, "probe cache not used for profiles: %s",
                       sy_status_str(st));
    if (st == SY_OK) {
        for (uint32_t k = 0; k < pr->n_devices; k++) {
            uint32_t d;
            if (sy_runtime_find_device(pl->rt, pr->devices[k].name, &d) != SY_OK || !need[d])
                continue;
            sy__profile *p = probe_profile(pr, &pr->devices[k]);
            if (p && sy__planner_install_profile(pl, p) == SY_OK) {
                sy_runtime_log(pl->rt, SY_LOG_INFO,
                               "no profile for %s: roofline from the probe (%.3g FLOP/s, %.3g B/s)",
                               pr->devices[k].name, pr->devices[k].flops,
                               pr->devices[k].bandwidth_bps);
                loaded++;
            }
        }
    }
    free(pr);
    return loaded;
}

sy_status sy_planner_load_default_profiles(sy_planner *pl, uint32_t *out_loaded)
{
    if (out_loaded)
        *out_loaded = 0;
    if (!pl)
        return SY_E_INVALID_ARG;
    const char *path = sy__runtime_profile_path(pl->rt);
    uint32_t loaded = 0, missing = 0;
    bool *need = calloc((size_t)pl->rt->device_count + 1, sizeof *need);
    if (!need)
        return sy__planner_fail(pl, SY_E_NO_MEMORY, "out of memory finding profiles");
    for (uint32_t d = 0; d < pl->rt->device_count; d++) {
        const sy__device *dv = &pl->rt->devices[d];
        const char *dev = dv->desc.name, *plugin = dv->plugin->desc.name;
        bool found = false;
        /* Per directory: the device's own file, then the plugin's (the
         * shipped profiles are named after their plugin). */
        for (const char *at = path; *at && !found;) {
            size_t len = strcspn(at, ":");
            char file[1024];
            if (len > 0 && profile_file(at, len, dev, file, sizeof file))
                found = try_profile(pl, file, dev, false);
            if (!found && len > 0 && strcmp(plugin, dev) != 0 &&
                profile_file(at, len, plugin, file, sizeof file))
                found = try_profile(pl, file, dev, true);
            at += len + (at[len] == ':');
        }
        if (!found)
            sy_runtime_log(pl->rt, SY_LOG_DEBUG,
                           "no profile for %s along '%s': its costs are roofline defaults", dev,
                           path);
        need[d] = !found;
        missing += !found;
        loaded += found;
    }
    /* The device's own peak figures are claims (npusim claims an NPU's
     * 4 TFLOP/s while it runs on the host's cores); measured ones are
     * not.  Tests and embedders that set no_default_paths get neither. */
    if (missing && !pl->rt->no_default_paths)
        loaded += load_probe_profiles(pl, need);
    free(need);
    pl->last_error[0] = '\0';
    if (out_loaded)
        *out_loaded = loaded;
    return SY_OK;
}
