/* Finding each device's profile without being told where: the user's
 * (written by `switchyard tune`, docs/probe.md) before the shipped ones.
 * The runtime resolves the search path once, when it is created
 * (sy__runtime_profile_path); this file walks it. */
#include <stdio.h>
#include <string.h>
#include <unistd.h>

#include "plan_internal.h"
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

sy_status sy_planner_load_default_profiles(sy_planner *pl, uint32_t *out_loaded)
{
    if (out_loaded)
        *out_loaded = 0;
    if (!pl)
        return SY_E_INVALID_ARG;
    const char *path = sy__runtime_profile_path(pl->rt);
    uint32_t loaded = 0;
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
        loaded += found;
    }
    pl->last_error[0] = '\0';
    if (out_loaded)
        *out_loaded = loaded;
    return SY_OK;
}
