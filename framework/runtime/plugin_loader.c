/* Plugin loader: finds plugin files along the search path, opens each one,
 * checks its descriptor table against the ABI, initialises it and records
 * its devices.  Every file that cannot be used is refused with its path and
 * a precise reason, logged, and loading goes on with the rest.
 *
 * Search order (each file once, by realpath):
 *   1. every entry of the plugin path (options or $SWITCHYARD_PLUGIN_PATH),
 *      a directory or a plugin file;
 *   2. unless no_default_paths: when libswitchyard itself runs from the
 *      build tree, the build's plugins dir and its immediate subdirectories;
 *   3. unless no_default_paths: the install dir, when it exists.
 * The build tree comes before the install dir so that a developer running
 * a fresh build never silently gets an older installed copy of a plugin:
 * the installed one is then refused as a duplicate, visibly. */
#include <dirent.h>
#include <dlfcn.h>
#include <errno.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>

#include "runtime_internal.h"

#ifndef SY_PLUGIN_INSTALL_DIR
#error "SY_PLUGIN_INSTALL_DIR must be defined by the build"
#endif
#ifndef SY_PLUGIN_BUILD_DIR
#error "SY_PLUGIN_BUILD_DIR must be defined by the build"
#endif
#ifndef SY_BUILD_ROOT
#error "SY_BUILD_ROOT must be defined by the build"
#endif

/* State of one search: the realpaths already considered, so that a file
 * reached through two entries (a dir and a symlink, say) loads once. */
typedef struct loader_search {
    sy_runtime *rt;
    char **seen;
    uint32_t seen_count, seen_cap;
} loader_search;

/* Any object of the library will do; its address tells dladdr which file
 * the library was loaded from. */
static const char loader_anchor = 0;

/* ------------------------------------------------------------ refusals */

/* Records that |path| was refused with |st| and why, and logs a warning.
 * Returns SY_OK, or SY_E_NO_MEMORY when the record cannot be kept. */
static sy_status loader_refuse(sy_runtime *rt, const char *path, sy_status st, const char *fmt,
                               ...) __attribute__((format(printf, 4, 5)));

static sy_status loader_refuse(sy_runtime *rt, const char *path, sy_status st, const char *fmt,
                               ...)
{
    va_list ap;
    va_start(ap, fmt);
    char *reason = sy__strdup_vprintf(fmt, ap);
    va_end(ap);
    char *copy = strdup(path);
    sy__refusal *grown =
        sy__array_grow(rt->refusals, rt->refusal_count + 1, sizeof *grown, &rt->refusal_cap);
    if (!reason || !copy || !grown) {
        free(reason);
        free(copy);
        return SY_E_NO_MEMORY;
    }
    rt->refusals = grown;
    rt->refusals[rt->refusal_count++] = (sy__refusal){copy, reason, st};
    sy_runtime_log(rt, SY_LOG_WARN, "refused plugin %s: %s", copy, reason);
    return SY_OK;
}

/* ---------------------------------------------------- one plugin file */

/* Returns the name of the first required entry point |d| leaves NULL, or
 * NULL when all are present. */
static const char *loader_missing_function(const sy_plugin_desc *d)
{
    if (!d->init)
        return "init";
    if (!d->deinit)
        return "deinit";
    if (!d->device_count)
        return "device_count";
    if (!d->describe)
        return "describe";
    if (!d->supports)
        return "supports";
    if (!d->buffer_alloc)
        return "buffer_alloc";
    if (!d->buffer_free)
        return "buffer_free";
    if (!d->copy_in)
        return "copy_in";
    if (!d->copy_out)
        return "copy_out";
    if (!d->execute)
        return "execute";
    if (!d->synchronize)
        return "synchronize";
    return NULL;
}

static const sy__plugin *loader_find_plugin(const sy_runtime *rt, const char *name)
{
    for (uint32_t i = 0; i < rt->plugin_count; i++)
        if (strcmp(rt->plugins[i]->desc.name, name) == 0)
            return rt->plugins[i];
    return NULL;
}

/* Terminates the fixed-size string field |dst| of |size| bytes, which a
 * plugin may have filled to the last byte. */
static void loader_terminate(char *dst, size_t size)
{
    dst[size - 1] = '\0';
}

/* Describes the devices of the initialised plugin |p| into the free slots
 * past rt->device_count (reserved by the caller); commits nothing.  Sets
 * *out_refused after recording a refusal.  Fails only when out of memory. */
static sy_status loader_describe_devices(sy_runtime *rt, sy__plugin *p, uint32_t count,
                                         bool *out_refused)
{
    *out_refused = false;
    for (uint32_t i = 0; i < count; i++) {
        sy__device *dev = &rt->devices[rt->device_count + i];
        memset(dev, 0, sizeof *dev);
        dev->plugin = p;
        dev->index = i;
        dev->desc.struct_size = (uint32_t)sizeof dev->desc;
        sy_status st = p->desc.describe(p->state, i, &dev->desc);
        if (st != SY_OK) {
            *out_refused = true;
            return loader_refuse(rt, p->path, st < 0 ? st : SY_E_PLUGIN,
                                 "describe(device %u) failed: %s (%s)", i, sy_status_name(st),
                                 sy_status_str(st));
        }
        dev->desc.struct_size = (uint32_t)sizeof dev->desc;
        loader_terminate(dev->desc.name, sizeof dev->desc.name);
        loader_terminate(dev->desc.model, sizeof dev->desc.model);
        loader_terminate(dev->desc.vendor, sizeof dev->desc.vendor);
        loader_terminate(dev->desc.driver, sizeof dev->desc.driver);
        loader_terminate(dev->desc.topology, sizeof dev->desc.topology);
        if (dev->desc.kind > SY_DEVICE_NPU) {
            *out_refused = true;
            return loader_refuse(rt, p->path, SY_E_PLUGIN_ABI, "device %u has unknown kind %u",
                                 i, dev->desc.kind);
        }
        /* A device must be findable by name; the plugin's own name is the
         * natural default for a plugin's only device. */
        if (!dev->desc.name[0]) {
            if (count == 1)
                snprintf(dev->desc.name, sizeof dev->desc.name, "%s", p->desc.name);
            else
                snprintf(dev->desc.name, sizeof dev->desc.name, "%s:%u", p->desc.name, i);
        }
        for (uint32_t k = 0; k < rt->device_count + i; k++) {
            if (strcmp(rt->devices[k].desc.name, dev->desc.name) == 0) {
                sy_runtime_log(rt, SY_LOG_WARN,
                               "device name '%s' of plugin '%s' is also used by plugin '%s'; "
                               "lookups by name find the first",
                               dev->desc.name, p->desc.name, rt->devices[k].plugin->desc.name);
                break;
            }
        }
    }
    return SY_OK;
}

/* True when the allow-list (if any) names |name|, |len| bytes. */
static bool loader_allowed(const sy_runtime *rt, const char *name, size_t len)
{
    if (!rt->plugin_allow)
        return true;
    for (const char *p = rt->plugin_allow; *p;) {
        size_t n = strcspn(p, ",");
        if (n == len && strncmp(p, name, len) == 0)
            return true;
        p += n;
        if (*p == ',')
            p++;
    }
    return false;
}

/* Checks the table |table| that the file |path| returned and, when it is
 * usable, initialises the plugin and registers it and its devices; takes
 * ownership of |handle| either way.  Returns SY_OK (loaded or refused) or
 * SY_E_NO_MEMORY. */
static sy_status loader_admit(sy_runtime *rt, const char *path, void *handle,
                              const sy_plugin_desc *table)
{
    sy_status st = SY_OK;
    uint32_t abi = table->abi_version;
    if (SY_PLUGIN_ABI_MAJOR_OF(abi) != SY_PLUGIN_ABI_MAJOR) {
        st = loader_refuse(rt, path, SY_E_PLUGIN_ABI, "built for ABI %u.%u, host is %u.%u",
                           SY_PLUGIN_ABI_MAJOR_OF(abi), abi & 0xffffu, SY_PLUGIN_ABI_MAJOR,
                           SY_PLUGIN_ABI_MINOR);
        goto out_close;
    }
    if (table->struct_size < SY__PLUGIN_DESC_SIZE_1_0) {
        st = loader_refuse(rt, path, SY_E_PLUGIN_ABI,
                           "descriptor struct_size %u is smaller than the %zu bytes of ABI 1.0",
                           table->struct_size, (size_t)SY__PLUGIN_DESC_SIZE_1_0);
        goto out_close;
    }
    sy__plugin *p = calloc(1, sizeof *p);
    if (!p) {
        st = SY_E_NO_MEMORY;
        goto out_close;
    }
    /* Read only what the plugin's struct_size covers: a newer minor's extra
     * fields are ignored, an older one's missing fields read as zero. */
    size_t n = table->struct_size < sizeof p->desc ? table->struct_size : sizeof p->desc;
    memcpy(&p->desc, table, n);
    if (!p->desc.name || !p->desc.name[0]) {
        st = loader_refuse(rt, path, SY_E_PLUGIN_ABI, "the descriptor's name is NULL or empty");
        goto out_free_plugin;
    }
    if (!loader_allowed(rt, p->desc.name, strlen(p->desc.name))) {
        sy_runtime_log(rt, SY_LOG_DEBUG, "%s: plugin '%s' not in the plugin list, not loaded",
                       path, p->desc.name);
        st = SY_OK;
        goto out_free_plugin;
    }
    const char *missing = loader_missing_function(&p->desc);
    if (missing) {
        st = loader_refuse(rt, path, SY_E_PLUGIN_ABI, "required function '%s' is NULL", missing);
        goto out_free_plugin;
    }
    const int n_event_fns = (p->desc.event_record != NULL) + (p->desc.event_wait != NULL) +
                            (p->desc.event_release != NULL);
    if (n_event_fns != 0 && n_event_fns != 3) {
        st = loader_refuse(rt, path, SY_E_PLUGIN_ABI,
                           "event_record, event_wait and event_release come together; the table "
                           "has %d of the three",
                           n_event_fns);
        goto out_free_plugin;
    }
    const sy__plugin *twin = loader_find_plugin(rt, p->desc.name);
    if (twin) {
        st = loader_refuse(rt, path, SY_E_PLUGIN, "plugin '%s' already loaded from %s",
                           p->desc.name, twin->path);
        goto out_free_plugin;
    }
    p->rt = rt;
    p->handle = handle;
    p->path = strdup(path);
    if (!p->path) {
        st = SY_E_NO_MEMORY;
        goto out_free_plugin;
    }
    /* Reserve both lists now so that nothing can fail once the plugin is
     * initialised and its devices described. */
    sy__plugin **plugins =
        sy__array_grow(rt->plugins, rt->plugin_count + 1, sizeof *plugins, &rt->plugin_cap);
    if (!plugins) {
        st = SY_E_NO_MEMORY;
        goto out_free_path;
    }
    rt->plugins = plugins;
    sy__host_init(p);
    sy_status ist = p->desc.init(&p->host, &p->state);
    if (ist != SY_OK) {
        st = loader_refuse(rt, path, ist < 0 ? ist : SY_E_PLUGIN, "init failed: %s (%s)",
                           sy_status_name(ist), sy_status_str(ist));
        goto out_free_path;
    }
    uint32_t count = p->desc.device_count(p->state);
    if (count > SY__MAX_DEVICES_PER_PLUGIN) {
        st = loader_refuse(rt, path, SY_E_PLUGIN, "device_count() returned %u, more than %u",
                           count, SY__MAX_DEVICES_PER_PLUGIN);
        goto out_deinit;
    }
    sy__device *devices = sy__array_grow(rt->devices, rt->device_count + count, sizeof *devices,
                                         &rt->device_cap);
    if (!devices) {
        st = SY_E_NO_MEMORY;
        goto out_deinit;
    }
    rt->devices = devices;
    bool refused;
    st = loader_describe_devices(rt, p, count, &refused);
    if (st != SY_OK || refused)
        goto out_deinit;
    p->first_device = rt->device_count;
    p->device_count = count;
    rt->device_count += count;
    rt->plugins[rt->plugin_count++] = p;
    sy_runtime_log(rt, SY_LOG_INFO, "loaded plugin '%s' %s (ABI %u.%u, %u device%s) from %s",
                   p->desc.name, p->desc.version ? p->desc.version : "",
                   SY_PLUGIN_ABI_MAJOR_OF(abi), abi & 0xffffu, count, count == 1 ? "" : "s",
                   p->path);
    return SY_OK;

out_deinit:
    p->desc.deinit(p->state);
out_free_path:
    free(p->path);
out_free_plugin:
    free(p);
out_close:
    dlclose(handle);
    return st;
}

/* Opens the plugin file |path| (a realpath) and admits or refuses it. */
static sy_status loader_open(sy_runtime *rt, const char *path)
{
    /* Files that follow the sy-NAME.so convention are skipped unopened
     * when the allow-list leaves NAME out; others are checked by the name
     * their table gives, after opening. */
    const char *base = strrchr(path, '/') ? strrchr(path, '/') + 1 : path;
    size_t blen = strlen(base);
    if (strncmp(base, "sy-", 3) == 0 && blen > 6 && strcmp(base + blen - 3, ".so") == 0 &&
        !loader_allowed(rt, base + 3, blen - 6)) {
        sy_runtime_log(rt, SY_LOG_DEBUG, "%s: not in the plugin list, not loaded", path);
        return SY_OK;
    }
    dlerror();
    /* RTLD_NOW: an unresolved symbol refuses the plugin here instead of
     * killing the process at the first call.  RTLD_LOCAL: plugins cannot
     * see each other's symbols. */
    void *handle = dlopen(path, RTLD_NOW | RTLD_LOCAL);
    if (!handle) {
        const char *e = dlerror();
        return loader_refuse(rt, path, SY_E_FORMAT, "not a loadable shared object: %s",
                             e ? e : "dlopen failed");
    }
    dlerror();
    sy_plugin_query_fn query = (sy_plugin_query_fn)dlsym(handle, SY_PLUGIN_ENTRY_SYMBOL);
    if (!query) {
        sy_status st = loader_refuse(rt, path, SY_E_PLUGIN_ABI,
                                     "no '%s' symbol: not a Switchyard plugin, or the symbol "
                                     "is not exported",
                                     SY_PLUGIN_ENTRY_SYMBOL);
        dlclose(handle);
        return st;
    }
    const sy_plugin_desc *table = query(SY_PLUGIN_ABI_VERSION);
    if (!table) {
        sy_status st = loader_refuse(rt, path, SY_E_PLUGIN_ABI,
                                     "%s() returned NULL: the plugin cannot serve a host of "
                                     "ABI %u.%u",
                                     SY_PLUGIN_ENTRY_SYMBOL, SY_PLUGIN_ABI_MAJOR,
                                     SY_PLUGIN_ABI_MINOR);
        dlclose(handle);
        return st;
    }
    return loader_admit(rt, path, handle, table);
}

/* Loads the file at |path| unless this search already considered it. */
static sy_status loader_load_file(loader_search *s, const char *path)
{
    char *real = realpath(path, NULL);
    if (!real) {
        if (errno == ENOMEM)
            return SY_E_NO_MEMORY;
        return loader_refuse(s->rt, path, SY_E_IO, "cannot resolve the path: %s",
                             strerror(errno));
    }
    for (uint32_t i = 0; i < s->seen_count; i++) {
        if (strcmp(s->seen[i], real) == 0) {
            sy_runtime_log(s->rt, SY_LOG_DEBUG, "%s: already considered as %s", path, real);
            free(real);
            return SY_OK;
        }
    }
    char **seen = sy__array_grow(s->seen, s->seen_count + 1, sizeof *seen, &s->seen_cap);
    if (!seen) {
        free(real);
        return SY_E_NO_MEMORY;
    }
    s->seen = seen;
    s->seen[s->seen_count++] = real;
    return loader_open(s->rt, real);
}

/* ------------------------------------------------------------- search */

static int loader_compare_strings(const void *a, const void *b)
{
    return strcmp(*(char *const *)a, *(char *const *)b);
}

static bool loader_has_suffix(const char *name, const char *suffix)
{
    size_t n = strlen(name), k = strlen(suffix);
    return n > k && strcmp(name + n - k, suffix) == 0;
}

/* Lists the entries of |dir| that are regular files named *.so (when
 * |want_dirs| is false) or subdirectories (when true), as full paths in
 * byte order so that loading is deterministic.  A missing or unreadable
 * directory yields an empty list.
 * Ownership: caller frees each path and *out_paths. */
static sy_status loader_list_dir(sy_runtime *rt, const char *dir, bool want_dirs,
                                 char ***out_paths, uint32_t *out_count)
{
    *out_paths = NULL;
    *out_count = 0;
    DIR *d = opendir(dir);
    if (!d) {
        sy_runtime_log(rt, errno == ENOENT ? SY_LOG_DEBUG : SY_LOG_WARN,
                       "cannot read plugin directory %s: %s", dir, strerror(errno));
        return SY_OK;
    }
    char **paths = NULL;
    uint32_t count = 0, cap = 0;
    sy_status st = SY_OK;
    struct dirent *e;
    while ((e = readdir(d)) != NULL) {
        /* Hidden entries are editor and build leftovers, and "." / "..". */
        if (e->d_name[0] == '.')
            continue;
        if (!want_dirs && !loader_has_suffix(e->d_name, ".so"))
            continue;
        char *full = sy__strdup_printf("%s/%s", dir, e->d_name);
        if (!full) {
            st = SY_E_NO_MEMORY;
            goto out_free_paths;
        }
        struct stat sb;
        bool keep = stat(full, &sb) == 0 && (want_dirs ? S_ISDIR(sb.st_mode) : S_ISREG(sb.st_mode));
        if (!keep) {
            free(full);
            continue;
        }
        char **grown = sy__array_grow(paths, count + 1, sizeof *grown, &cap);
        if (!grown) {
            free(full);
            st = SY_E_NO_MEMORY;
            goto out_free_paths;
        }
        paths = grown;
        paths[count++] = full;
    }
    closedir(d);
    if (count > 1)
        qsort(paths, count, sizeof *paths, loader_compare_strings);
    *out_paths = paths;
    *out_count = count;
    return SY_OK;

out_free_paths:
    for (uint32_t i = 0; i < count; i++)
        free(paths[i]);
    free(paths);
    closedir(d);
    return st;
}

static void loader_free_list(char **paths, uint32_t count)
{
    for (uint32_t i = 0; i < count; i++)
        free(paths[i]);
    free(paths);
}

/* Loads every *.so directly inside |dir|. */
static sy_status loader_scan_dir(loader_search *s, const char *dir)
{
    sy_runtime_log(s->rt, SY_LOG_DEBUG, "looking for plugins in %s", dir);
    char **files;
    uint32_t count;
    sy_status st = loader_list_dir(s->rt, dir, false, &files, &count);
    if (st != SY_OK)
        return st;
    for (uint32_t i = 0; i < count && st == SY_OK; i++)
        st = loader_load_file(s, files[i]);
    loader_free_list(files, count);
    return st;
}

/* Loads one entry of the plugin path: a directory or a plugin file. */
static sy_status loader_scan_entry(loader_search *s, const char *entry)
{
    struct stat sb;
    if (stat(entry, &sb) != 0) {
        sy_runtime_log(s->rt, SY_LOG_INFO, "plugin path entry %s: %s", entry, strerror(errno));
        return SY_OK;
    }
    if (S_ISDIR(sb.st_mode))
        return loader_scan_dir(s, entry);
    /* Named explicitly, so tried whatever its suffix: a wrong file is
     * refused with a reason rather than skipped without one. */
    return loader_load_file(s, entry);
}

static sy_status loader_scan_path_list(loader_search *s, const char *list)
{
    const char *at = list;
    while (*at) {
        const char *end = strchr(at, ':');
        size_t len = end ? (size_t)(end - at) : strlen(at);
        if (len > 0) {
            char *entry = strndup(at, len);
            if (!entry)
                return SY_E_NO_MEMORY;
            sy_status st = loader_scan_entry(s, entry);
            free(entry);
            if (st != SY_OK)
                return st;
        }
        if (!end)
            break;
        at = end + 1;
    }
    return SY_OK;
}

/* True when the libswitchyard in this process lives under the build root,
 * i.e. runs uninstalled, so that the build's plugins belong to it. */
bool sy__runs_from_build_tree(void)
{
    Dl_info info;
    if (!dladdr(&loader_anchor, &info) || !info.dli_fname)
        return false;
    char *lib = realpath(info.dli_fname, NULL);
    char *root = realpath(SY_BUILD_ROOT, NULL);
    bool inside = false;
    if (lib && root) {
        size_t n = strlen(root);
        inside = strncmp(lib, root, n) == 0 && lib[n] == '/';
    }
    free(lib);
    free(root);
    return inside;
}

static sy_status loader_scan_build_tree(loader_search *s)
{
    sy_status st = loader_scan_dir(s, SY_PLUGIN_BUILD_DIR);
    if (st != SY_OK)
        return st;
    char **dirs;
    uint32_t count;
    st = loader_list_dir(s->rt, SY_PLUGIN_BUILD_DIR, true, &dirs, &count);
    if (st != SY_OK)
        return st;
    for (uint32_t i = 0; i < count && st == SY_OK; i++)
        st = loader_scan_dir(s, dirs[i]);
    loader_free_list(dirs, count);
    return st;
}

sy_status sy__loader_load_all(sy_runtime *rt)
{
    loader_search s = {.rt = rt};
    sy_status st = SY_OK;
    if (rt->plugin_path) {
        st = loader_scan_path_list(&s, rt->plugin_path);
        if (st != SY_OK)
            goto out_free_seen;
    }
    if (!rt->no_default_paths) {
        if (sy__runs_from_build_tree()) {
            st = loader_scan_build_tree(&s);
            if (st != SY_OK)
                goto out_free_seen;
        }
        st = loader_scan_dir(&s, SY_PLUGIN_INSTALL_DIR);
        if (st != SY_OK)
            goto out_free_seen;
    }
    if (rt->plugin_count == 0)
        sy_runtime_log(rt, SY_LOG_INFO, "no plugin loaded (%u refused)", rt->refusal_count);

out_free_seen:
    loader_free_list(s.seen, s.seen_count);
    return st;
}

void sy__loader_unload_all(sy_runtime *rt)
{
    /* Last loaded first, mirroring the order of init. */
    for (uint32_t i = rt->plugin_count; i-- > 0;) {
        sy__plugin *p = rt->plugins[i];
        p->desc.deinit(p->state);
        dlclose(p->handle);
        free(p->path);
        free(p);
    }
    free(rt->plugins);
    rt->plugins = NULL;
    rt->plugin_count = rt->plugin_cap = 0;
    free(rt->devices);
    rt->devices = NULL;
    rt->device_count = rt->device_cap = 0;
    for (uint32_t i = 0; i < rt->refusal_count; i++) {
        free(rt->refusals[i].path);
        free(rt->refusals[i].reason);
    }
    free(rt->refusals);
    rt->refusals = NULL;
    rt->refusal_count = rt->refusal_cap = 0;
}
