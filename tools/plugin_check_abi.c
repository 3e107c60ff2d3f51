/* plugin-check: loading, the ABI table, init/deinit and describe().
 * These mirror the loader's refusals (docs/plugin-guide.md, "Refusals")
 * and add what a loader cannot see: a table that misreports its size,
 * describe() writing past the struct_size it was given, state that leaks
 * or is shared between two inits. */
#include <ctype.h>
#include <dlfcn.h>
#include <math.h>
#include <stddef.h>
#include <stdlib.h>
#include <string.h>

#include "plugin_check_internal.h"

/* A table claiming more than this is not a table. */
#define PCHECK_MAX_TABLE_SIZE 4096u
#define PCHECK_MAX_DEVICES 256u

static const struct {
    const char *name;
    size_t offset;
} pcheck_required[] = {
    {"init", offsetof(sy_plugin_desc, init)},
    {"deinit", offsetof(sy_plugin_desc, deinit)},
    {"device_count", offsetof(sy_plugin_desc, device_count)},
    {"describe", offsetof(sy_plugin_desc, describe)},
    {"supports", offsetof(sy_plugin_desc, supports)},
    {"buffer_alloc", offsetof(sy_plugin_desc, buffer_alloc)},
    {"buffer_free", offsetof(sy_plugin_desc, buffer_free)},
    {"copy_in", offsetof(sy_plugin_desc, copy_in)},
    {"copy_out", offsetof(sy_plugin_desc, copy_out)},
    {"execute", offsetof(sy_plugin_desc, execute)},
    {"synchronize", offsetof(sy_plugin_desc, synchronize)},
};

static const struct {
    const char *name;
    size_t offset;
} pcheck_optional[] = {
    {"buffer_import_host", offsetof(sy_plugin_desc, buffer_import_host)},
    {"buffer_host_ptr", offsetof(sy_plugin_desc, buffer_host_ptr)},
    {"copy_device", offsetof(sy_plugin_desc, copy_device)},
    {"self_test", offsetof(sy_plugin_desc, self_test)},
};

static bool pcheck_entry_present(const sy_plugin_desc *t, size_t offset)
{
    void (*fn)(void);
    memcpy(&fn, (const char *)t + offset, sizeof fn);
    return fn != NULL;
}

/* True when |s| is a NUL-terminated string of printable characters
 * within |max| bytes. */
static bool pcheck_good_string(const char *s, size_t max, bool allow_empty)
{
    if (!s)
        return false;
    size_t n = strnlen(s, max);
    if (n == max || (n == 0 && !allow_empty))
        return false;
    for (size_t i = 0; i < n; i++)
        if (!isprint((unsigned char)s[i]))
            return false;
    return true;
}

static bool pcheck_table_strings(pcheck_run *run, const sy_plugin_desc *t)
{
    if (!pcheck_good_string(t->name, SY_NAME_MAX, false))
        return pcheck_add(run, "abi", -1, SY_PCHECK_FAIL, "table names the plugin",
                          "name is NULL, empty, unprintable or longer than %d bytes",
                          SY_NAME_MAX - 1);
    for (const char *c = t->name; *c; c++)
        if (*c == '/' || *c == ',' || *c == ':' || isspace((unsigned char)*c))
            return pcheck_add(run, "abi", -1, SY_PCHECK_FAIL, "table names the plugin",
                              "name '%s' contains '%c' (names appear in device lists)",
                              t->name, *c);
    snprintf(run->report->plugin, sizeof run->report->plugin, "%s", t->name);
    pcheck_add(run, "abi", -1, SY_PCHECK_PASS, "table names the plugin", "'%s'", t->name);
    if (!pcheck_good_string(t->version, SY_NAME_MAX, false) ||
        !pcheck_good_string(t->vendor, 256, false))
        return pcheck_add(run, "abi", -1, SY_PCHECK_FAIL, "table has version and vendor",
                          "version or vendor is NULL, empty or unprintable");
    snprintf(run->report->version, sizeof run->report->version, "%s", t->version);
    return pcheck_add(run, "abi", -1, SY_PCHECK_PASS, "table has version and vendor",
                      "version '%s', vendor '%s'", t->version, t->vendor);
}

bool pcheck_abi(pcheck_run *run)
{
    const char *path = run->opts->path;
    dlerror();
    run->dl = dlopen(path, RTLD_NOW | RTLD_LOCAL);
    if (!run->dl) {
        const char *e = dlerror();
        pcheck_add(run, "abi", -1, SY_PCHECK_FAIL, "loads as a shared object", "%s",
                   e ? e : "dlopen failed");
        return false;
    }
    pcheck_pass(run, "abi", -1, "loads as a shared object");

    sy_plugin_query_fn query = NULL;
    void *sym = dlsym(run->dl, SY_PLUGIN_ENTRY_SYMBOL);
    memcpy(&query, &sym, sizeof query);
    if (!query) {
        pcheck_add(run, "abi", -1, SY_PCHECK_FAIL, "exports sy_plugin_query",
                   "no '%s' symbol (missing, misspelt or not exported)", SY_PLUGIN_ENTRY_SYMBOL);
        return false;
    }
    pcheck_pass(run, "abi", -1, "exports sy_plugin_query");

    const sy_plugin_desc *t = query(SY_PLUGIN_ABI_VERSION);
    if (!t) {
        pcheck_add(run, "abi", -1, SY_PCHECK_FAIL, "serves a host of ABI 1.0",
                   "sy_plugin_query(0x%08x) returned NULL", SY_PLUGIN_ABI_VERSION);
        return false;
    }
    pcheck_pass(run, "abi", -1, "serves a host of ABI 1.0");
    const uint32_t foreign = (SY_PLUGIN_ABI_MAJOR + 1u) << 16;
    if (query(foreign) != NULL)
        pcheck_add(run, "abi", -1, SY_PCHECK_FAIL, "refuses a host of another major ABI",
                   "sy_plugin_query(0x%08x) returned a table; it must return NULL", foreign);
    else
        pcheck_pass(run, "abi", -1, "refuses a host of another major ABI");

    run->report->abi_version = t->abi_version;
    if (SY_PLUGIN_ABI_MAJOR_OF(t->abi_version) != SY_PLUGIN_ABI_MAJOR) {
        pcheck_add(run, "abi", -1, SY_PCHECK_FAIL, "table ABI major matches",
                   "built for ABI %u.%u, host is %u.%u", SY_PLUGIN_ABI_MAJOR_OF(t->abi_version),
                   t->abi_version & 0xffffu, SY_PLUGIN_ABI_MAJOR, SY_PLUGIN_ABI_MINOR);
        return false;
    }
    pcheck_add(run, "abi", -1, SY_PCHECK_PASS, "table ABI major matches", "ABI %u.%u",
               SY_PLUGIN_ABI_MAJOR_OF(t->abi_version), t->abi_version & 0xffffu);
    if (t->struct_size < PCHECK_DESC_SIZE_1_0 || t->struct_size > PCHECK_MAX_TABLE_SIZE) {
        pcheck_add(run, "abi", -1, SY_PCHECK_FAIL, "table struct_size covers ABI 1.0",
                   "struct_size %u; ABI 1.0 needs %zu bytes (at most %u accepted)",
                   t->struct_size, (size_t)PCHECK_DESC_SIZE_1_0, PCHECK_MAX_TABLE_SIZE);
        return false;
    }
    pcheck_add(run, "abi", -1, SY_PCHECK_PASS, "table struct_size covers ABI 1.0",
               "%u bytes (this host reads %zu)", t->struct_size, sizeof(sy_plugin_desc));
    /* Read only what struct_size covers, as the core does. */
    memset(&run->table, 0, sizeof run->table);
    memcpy(&run->table, t,
           t->struct_size < sizeof run->table ? t->struct_size : sizeof run->table);

    if (!pcheck_table_strings(run, &run->table))
        return false;

    char missing[256] = "";
    for (size_t i = 0; i < sizeof pcheck_required / sizeof pcheck_required[0]; i++) {
        if (pcheck_entry_present(&run->table, pcheck_required[i].offset))
            continue;
        size_t used = strlen(missing);
        snprintf(missing + used, sizeof missing - used, "%s'%s'", used ? ", " : "",
                 pcheck_required[i].name);
    }
    if (missing[0]) {
        pcheck_add(run, "abi", -1, SY_PCHECK_FAIL, "required functions are present",
                   "NULL: %s", missing);
        return false;
    }
    pcheck_pass(run, "abi", -1, "required functions are present");
    char optional[256] = "";
    for (size_t i = 0; i < sizeof pcheck_optional / sizeof pcheck_optional[0]; i++) {
        size_t used = strlen(optional);
        snprintf(optional + used, sizeof optional - used, "%s%s %s", used ? ", " : "",
                 pcheck_optional[i].name,
                 pcheck_entry_present(&run->table, pcheck_optional[i].offset) ? "yes" : "no");
    }
    pcheck_add(run, "abi", -1, SY_PCHECK_PASS, "optional functions", "%s", optional);
    return true;
}

/* Runs init; on failure records |check| with the status and what the
 * plugin logged. */
static bool pcheck_init_state(pcheck_run *run, const char *check, void **out_state)
{
    *out_state = NULL;
    sy_status st = run->table.init(&run->host.host, out_state);
    if (st == SY_OK)
        return true;
    char said[512];
    pcheck_host_take_error(&run->host, said, sizeof said);
    pcheck_add(run, "lifecycle", -1, SY_PCHECK_FAIL, check, "init failed: %s (%s)%s%s",
               sy_status_name(st), sy_status_str(st), said[0] ? "; plugin said: " : "", said);
    if (*out_state)
        pcheck_add(run, "lifecycle", -1, SY_PCHECK_FAIL, "failed init leaves nothing",
                   "init failed but set *out_state");
    *out_state = NULL;
    return false;
}

bool pcheck_lifecycle(pcheck_run *run)
{
    const int64_t before = pcheck_host_live_allocs(&run->host);
    if (!pcheck_init_state(run, "init succeeds", &run->state))
        return false;
    pcheck_pass(run, "lifecycle", -1, "init succeeds");

    run->device_count = run->table.device_count(run->state);
    if (run->device_count == 0 || run->device_count > PCHECK_MAX_DEVICES) {
        pcheck_add(run, "lifecycle", -1, SY_PCHECK_FAIL, "device_count is 1..256",
                   "device_count() returned %u", run->device_count);
        run->table.deinit(run->state);
        return false;
    }
    pcheck_add(run, "lifecycle", -1, SY_PCHECK_PASS, "device_count is 1..256", "%u device(s)",
               run->device_count);

    /* Three more init/deinit cycles while the first state lives: no
     * globals, and each deinit returns what its init took. */
    const int64_t with_one = pcheck_host_live_allocs(&run->host);
    bool ok = true;
    char detail[160] = "";
    for (int i = 0; i < 3 && ok; i++) {
        void *extra = NULL;
        if (!pcheck_init_state(run, "repeated init/deinit", &extra)) {
            ok = false;
            break;
        }
        if (extra == run->state && extra != NULL) {
            snprintf(detail, sizeof detail, "a second init returned the same state pointer");
            ok = false;
        }
        if (run->table.device_count(extra) != run->device_count) {
            snprintf(detail, sizeof detail, "device_count changed between two states");
            ok = false;
        }
        run->table.deinit(extra);
        const int64_t now = pcheck_host_live_allocs(&run->host);
        if (ok && now != with_one) {
            snprintf(detail, sizeof detail,
                     "cycle %d: %lld host allocation(s) left after deinit", i + 1,
                     (long long)(now - with_one));
            ok = false;
        }
    }
    if (ok)
        pcheck_add(run, "lifecycle", -1, SY_PCHECK_PASS, "repeated init/deinit",
                   "3 cycles with a live state; %lld host allocation(s) per state",
                   (long long)(with_one - before));
    else if (detail[0])
        pcheck_add(run, "lifecycle", -1, SY_PCHECK_FAIL, "repeated init/deinit", "%s", detail);
    return true;
}

static bool pcheck_desc_strings(const sy_device_desc *d, char *why, size_t size)
{
    const struct {
        const char *field;
        const char *s;
        size_t max;
        bool allow_empty;
    } fields[] = {
        {"name", d->name, sizeof d->name, false},
        {"model", d->model, sizeof d->model, true},
        {"vendor", d->vendor, sizeof d->vendor, true},
        {"driver", d->driver, sizeof d->driver, true},
        {"topology", d->topology, sizeof d->topology, true},
    };
    for (size_t i = 0; i < sizeof fields / sizeof fields[0]; i++) {
        if (!pcheck_good_string(fields[i].s, fields[i].max, fields[i].allow_empty)) {
            snprintf(why, size, "%s is %s", fields[i].field,
                     strnlen(fields[i].s, fields[i].max) == fields[i].max
                         ? "not NUL-terminated"
                         : "empty or holds unprintable bytes");
            return false;
        }
    }
    return true;
}

/* Room after the struct handed to describe(), filled with a canary: a
 * plugin that ignores struct_size (or was built against a later header
 * with a longer struct) writes into it instead of into the caller. */
enum { PCHECK_DESC_GUARD = 512, PCHECK_CANARY = 0xa5 };

typedef union pcheck_guarded_desc {
    sy_device_desc desc;
    unsigned char raw[sizeof(sy_device_desc) + PCHECK_DESC_GUARD];
} pcheck_guarded_desc;

/* Calls describe() with a struct of |size| bytes (zeroed, struct_size set)
 * followed by canary bytes; *out_overrun is the number of bytes past
 * |size| that changed. */
static sy_status pcheck_describe_guarded(pcheck_run *run, uint32_t dev, size_t size,
                                         pcheck_guarded_desc *g, size_t *out_overrun)
{
    memset(g->raw, PCHECK_CANARY, sizeof g->raw);
    memset(g->raw, 0, size);
    g->desc.struct_size = (uint32_t)size;
    sy_status st = run->table.describe(run->state, dev, &g->desc);
    *out_overrun = 0;
    for (size_t i = size; i < sizeof g->raw; i++)
        if (g->raw[i] != PCHECK_CANARY)
            *out_overrun = i - size + 1;
    return st;
}

bool pcheck_describe(pcheck_run *run, uint32_t dev, sy_device_desc *out_desc)
{
    const int32_t d = (int32_t)dev;
    sy_device_desc *desc = out_desc;
    pcheck_guarded_desc full;
    size_t overrun = 0;
    sy_status st = pcheck_describe_guarded(run, dev, sizeof *desc, &full, &overrun);
    memcpy(desc, &full.desc, sizeof *desc);
    if (st != SY_OK) {
        char said[512];
        pcheck_host_take_error(&run->host, said, sizeof said);
        pcheck_add(run, "describe", d, SY_PCHECK_FAIL, "describe succeeds", "%s%s%s",
                   sy_status_name(st), said[0] ? "; plugin said: " : "", said);
        return false;
    }
    pcheck_add(run, "describe", d, SY_PCHECK_PASS, "describe succeeds", "'%s': %s",
               desc->name, desc->model);
    if (overrun)
        pcheck_add(run, "describe", d, SY_PCHECK_FAIL, "describe stays within struct_size",
                   "describe(struct_size %zu) changed bytes up to %zu past the end",
                   sizeof *desc, overrun);
    else
        pcheck_pass(run, "describe", d, "describe stays within struct_size");

    char why[160];
    if (desc->kind > SY_DEVICE_NPU)
        pcheck_add(run, "describe", d, SY_PCHECK_FAIL, "kind is cpu, gpu or npu", "kind %u",
                   desc->kind);
    else
        pcheck_pass(run, "describe", d, "kind is cpu, gpu or npu");
    if (!pcheck_desc_strings(desc, why, sizeof why))
        pcheck_add(run, "describe", d, SY_PCHECK_FAIL, "strings are terminated and printable",
                   "%s", why);
    else
        pcheck_pass(run, "describe", d, "strings are terminated and printable");
    if (desc->memory_bytes == 0)
        pcheck_add(run, "describe", d, SY_PCHECK_FAIL, "reports its memory size",
                   "memory_bytes is 0; the planner needs a budget");
    else
        pcheck_add(run, "describe", d, SY_PCHECK_PASS, "reports its memory size",
                   "%llu bytes%s", (unsigned long long)desc->memory_bytes,
                   desc->unified_memory ? ", unified with host memory" : ", its own memory");
    if (desc->unified_memory > 1 || desc->struct_size != sizeof *desc || desc->peak_flops < 0 ||
        desc->peak_bandwidth < 0)
        pcheck_add(run, "describe", d, SY_PCHECK_FAIL, "fields are in range",
                   "unified_memory %u, struct_size %u (given %zu), peak_flops %g, "
                   "peak_bandwidth %g",
                   desc->unified_memory, desc->struct_size, sizeof *desc, desc->peak_flops,
                   desc->peak_bandwidth);
    else
        pcheck_pass(run, "describe", d, "fields are in range");

    /* An older core hands a shorter struct: nothing past it may change,
     * and what it covers must read as the full description does. */
    const size_t short_size = offsetof(sy_device_desc, memory_bytes);
    pcheck_guarded_desc small;
    st = pcheck_describe_guarded(run, dev, short_size, &small, &overrun);
    const bool same = memcmp(small.raw + sizeof small.desc.struct_size,
                             full.raw + sizeof full.desc.struct_size,
                             short_size - sizeof small.desc.struct_size) == 0;
    if (st != SY_OK)
        pcheck_add(run, "describe", d, SY_PCHECK_FAIL, "describe honours a smaller struct_size",
                   "describe(struct_size %zu) failed: %s", short_size, sy_status_name(st));
    else if (overrun)
        pcheck_add(run, "describe", d, SY_PCHECK_FAIL, "describe honours a smaller struct_size",
                   "describe(struct_size %zu) changed bytes up to %zu past it", short_size,
                   overrun);
    else if (small.desc.struct_size != short_size || !same)
        pcheck_add(run, "describe", d, SY_PCHECK_FAIL, "describe honours a smaller struct_size",
                   "describe(struct_size %zu) %s", short_size,
                   small.desc.struct_size != short_size ? "changed struct_size"
                                                        : "filled it differently");
    else
        pcheck_pass(run, "describe", d, "describe honours a smaller struct_size");

    /* A caller whose struct_size is 0 told the plugin no size at all:
     * writing anything (even struct_size) would be a guess. */
    pcheck_guarded_desc none;
    memset(none.raw, PCHECK_CANARY, sizeof none.raw);
    none.desc.struct_size = 0;
    st = run->table.describe(run->state, dev, &none.desc);
    overrun = 0;
    for (size_t i = sizeof none.desc.struct_size; i < sizeof none.raw; i++)
        if (none.raw[i] != PCHECK_CANARY)
            overrun = i + 1;
    if (overrun || none.desc.struct_size != 0)
        pcheck_add(run, "describe", d, SY_PCHECK_FAIL, "describe writes nothing for struct_size 0",
                   "describe(struct_size 0) returned %s and changed %s", sy_status_name(st),
                   overrun ? "bytes of the struct" : "struct_size");
    else
        pcheck_add(run, "describe", d, SY_PCHECK_PASS, "describe writes nothing for struct_size 0",
                   "returned %s", sy_status_name(st));

    sy_device_desc bad;
    memset(&bad, 0, sizeof bad);
    bad.struct_size = (uint32_t)sizeof bad;
    st = run->table.describe(run->state, run->device_count, &bad);
    pcheck_add(run, "describe", d, st != SY_OK ? SY_PCHECK_PASS : SY_PCHECK_FAIL,
               "describe refuses a device index out of range", "describe(%u) returned %s",
               run->device_count, sy_status_name(st));

    for (uint32_t other = 0; other < dev; other++) {
        sy_device_desc o;
        memset(&o, 0, sizeof o);
        o.struct_size = (uint32_t)sizeof o;
        if (run->table.describe(run->state, other, &o) == SY_OK &&
            strncmp(o.name, desc->name, sizeof o.name) == 0)
            pcheck_add(run, "describe", d, SY_PCHECK_FAIL, "device name is unique",
                       "device %u is also named '%s'", other, o.name);
    }

    if (run->table.self_test) {
        char msg[256] = "";
        st = run->table.self_test(run->state, dev, msg, sizeof msg);
        msg[sizeof msg - 1] = '\0';
        pcheck_add(run, "describe", d, st == SY_OK ? SY_PCHECK_PASS : SY_PCHECK_FAIL,
                   "self_test passes", "%s%s%s", st == SY_OK ? "" : sy_status_name(st),
                   st != SY_OK && msg[0] ? ": " : "", msg);
    } else {
        pcheck_add(run, "describe", d, SY_PCHECK_SKIP, "self_test passes", "no self_test entry");
    }
    return true;
}

/* ------------------------------------------------------------------ events */

/* The events of ABI 1.1 (event_record, event_wait,
 * event_release), when a plugin provides them.
 *
 * Two adds are queued back to back on one buffer (y = x + x, z = y + y),
 * with an event after each; the node structs are repointed at a decoy
 * region as soon as execute() returns, as the core does for its next
 * segment.  Waiting for the second event must leave z = 4x exactly: the
 * work done, in queue order, from what the nodes said at launch. */

enum { PCE_N = 1024 }; /* floats per region */

typedef struct pce_bufs {
    void *buf;
    unsigned char *base; /* host pointer, or NULL */
    sy_tensor x, y, z;
    sy_node add1, add2;
} pce_bufs;

static void pce_bind(pce_bufs *b, sy_tensor *t, uint32_t region)
{
    memset(t, 0, sizeof *t);
    t->dtype = SY_DTYPE_F32;
    t->ne[0] = PCE_N;
    t->ne[1] = t->ne[2] = t->ne[3] = 1;
    sy_tensor_set_contiguous_strides(t);
    t->buffer = b->buf;
    t->offset = (uint64_t)region * PCE_N * sizeof(float);
    t->data = b->base ? b->base + t->offset : NULL;
}

/* Points every tensor at region 3, which holds zeros: a plugin that reads
 * a node after execute() returned computes zeros there. */
static void pce_decoy(pce_bufs *b)
{
    pce_bind(b, &b->x, 3);
    pce_bind(b, &b->y, 3);
    pce_bind(b, &b->z, 3);
}

/* Queues add1 and add2 with an event after each; waits for the second
 * (then the first, already done) and checks z.  Returns the failure in
 * |why| or "" when all went right. */
static void pce_run(pcheck_run *run, uint32_t dev, pce_bufs *b, char *why, size_t size)
{
    const sy_plugin_desc *t = &run->table;
    void *st_ = run->state;
    void *e1 = NULL, *e2 = NULL;
    sy_node *one[1];
    pce_bind(b, &b->x, 0);
    pce_bind(b, &b->y, 1);
    pce_bind(b, &b->z, 2);
    b->add1 = (sy_node){.op = SY_OP_ADD, .n_inputs = 2, .inputs = {&b->x, &b->x}, .output = &b->y};
    b->add2 = (sy_node){.op = SY_OP_ADD, .n_inputs = 2, .inputs = {&b->y, &b->y}, .output = &b->z};
    snprintf(b->add1.name, sizeof b->add1.name, "events.add1");
    snprintf(b->add2.name, sizeof b->add2.name, "events.add2");
    one[0] = &b->add1;
    sy_status st = t->execute(st_, dev, one, 1);
    if (st == SY_OK)
        st = t->event_record(st_, dev, &e1);
    if (st != SY_OK) {
        snprintf(why, size, "execute or event_record of the first add: %s", sy_status_name(st));
        goto out_release;
    }
    pce_decoy(b);
    pce_bind(b, &b->y, 1);
    pce_bind(b, &b->z, 2);
    one[0] = &b->add2;
    st = t->execute(st_, dev, one, 1);
    if (st == SY_OK)
        st = t->event_record(st_, dev, &e2);
    if (st != SY_OK) {
        snprintf(why, size, "execute or event_record of the second add: %s", sy_status_name(st));
        goto out_release;
    }
    pce_decoy(b);
    st = t->event_wait(st_, dev, e2);
    if (st == SY_OK)
        st = t->event_wait(st_, dev, e1);
    if (st != SY_OK) {
        snprintf(why, size, "event_wait: %s", sy_status_name(st));
        goto out_release;
    }
    /* Through the mapping where there is one: copy_out() itself waits
     * for queued work, so only the host pointer shows a wait that did not. */
    float got[PCE_N];
    if (b->base)
        memcpy(got, b->base + 2u * PCE_N * sizeof(float), sizeof got);
    else
        st = t->copy_out(st_, dev, b->buf, 2u * PCE_N * sizeof(float), got, sizeof got);
    if (st != SY_OK) {
        snprintf(why, size, "copy_out after the wait: %s", sy_status_name(st));
        goto out_release;
    }
    for (uint32_t i = 0; i < PCE_N; i++) {
        const float want = 4.0f * (float)(i % 97) - 100.0f;
        if (got[i] != want) {
            snprintf(why, size,
                     "z[%u] is %g after waiting for its event, want %g (work not done at the "
                     "wait, or nodes read after execute() returned)",
                     i, (double)got[i], (double)want);
            goto out_release;
        }
    }
    why[0] = '\0';
out_release:
    if (e1)
        t->event_release(st_, dev, e1);
    if (e2)
        t->event_release(st_, dev, e2);
    t->synchronize(st_, dev);
}

void pcheck_events(pcheck_run *run, uint32_t dev, const sy_device_desc *desc)
{
    (void)desc;
    const int32_t d = (int32_t)dev;
    const sy_plugin_desc *t = &run->table;
    const int n = (t->event_record != NULL) + (t->event_wait != NULL) +
                  (t->event_release != NULL);
    if (n == 0) {
        pcheck_add(run, "events", d, SY_PCHECK_SKIP, "event_wait completes queued work",
                   "no events (ABI 1.0 or synchronize() only)");
        return;
    }
    if (n != 3) {
        pcheck_add(run, "events", d, SY_PCHECK_FAIL, "events come as a set",
                   "%d of event_record, event_wait, event_release present", n);
        return;
    }
    pcheck_pass(run, "events", d, "events come as a set");

    pce_bufs b;
    memset(&b, 0, sizeof b);
    const uint64_t bytes = 4u * PCE_N * sizeof(float);
    sy_status st = t->buffer_alloc(run->state, dev, bytes, &b.buf);
    if (st != SY_OK || !b.buf) {
        pcheck_add(run, "events", d, SY_PCHECK_FAIL, "event_wait completes queued work",
                   "buffer_alloc(%llu): %s", (unsigned long long)bytes, sy_status_name(st));
        return;
    }
    b.base = t->buffer_host_ptr ? t->buffer_host_ptr(run->state, dev, b.buf) : NULL;
    float init[4 * PCE_N];
    for (uint32_t i = 0; i < PCE_N; i++) {
        init[i] = (float)(i % 97) - 25.0f;
        init[PCE_N + i] = NAN;
        init[2 * PCE_N + i] = NAN;
        init[3 * PCE_N + i] = 0.0f;
    }
    st = t->copy_in(run->state, dev, b.buf, 0, init, bytes);
    char why[256] = "";
    if (st != SY_OK)
        snprintf(why, sizeof why, "copy_in: %s", sy_status_name(st));
    else
        pce_run(run, dev, &b, why, sizeof why);
    if (why[0]) {
        char said[256];
        pcheck_host_take_error(&run->host, said, sizeof said);
        pcheck_add(run, "events", d, SY_PCHECK_FAIL, "event_wait completes queued work", "%s%s%s",
                   why, said[0] ? "; plugin said: " : "", said);
    } else {
        pcheck_pass(run, "events", d, "event_wait completes queued work");
    }

    /* An event on an idle device, and one released without a wait. */
    void *e = NULL;
    st = t->event_record(run->state, dev, &e);
    if (st == SY_OK)
        st = t->event_wait(run->state, dev, e);
    if (e)
        t->event_release(run->state, dev, e);
    e = NULL;
    if (st == SY_OK)
        st = t->event_record(run->state, dev, &e);
    if (e)
        t->event_release(run->state, dev, e);
    if (st == SY_OK)
        st = t->synchronize(run->state, dev);
    pcheck_add(run, "events", d, st == SY_OK ? SY_PCHECK_PASS : SY_PCHECK_FAIL,
               "an idle or unwaited event is released cleanly", "%s",
               st == SY_OK ? "" : sy_status_name(st));
    t->buffer_free(run->state, dev, b.buf);
}
