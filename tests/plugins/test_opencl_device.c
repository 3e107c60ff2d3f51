/* The OpenCL plugin as a set of devices (description from the OpenCL
 * queries, refusals), its program cache (hit, corrupt and stale entries
 * rebuilt), a program that fails to build (the test hook
 * SWITCHYARD_OPENCL_BREAK), and the module opened directly (exported
 * symbols, buffers, self-test). */
#include <criterion/criterion.h>
#include <dirent.h>
#include <dlfcn.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <unistd.h>

#include "direct_host.h"
#include "test_opencl_case.h"

/* -------------------------------------------------------- device facts */

Test(opencl_device, describes_every_device_from_the_opencl_queries)
{
    ocase tc;
    memset(&tc, 0, sizeof tc);
    sy_runtime *rt = oc_runtime(&tc, false);
    uint32_t devs[16];
    const uint32_t n = oc_devices(rt, devs);
    cr_assert_gt(n, 0, "no OpenCL device; log:\n%s", tc.log);
    for (uint32_t i = 0; i < n; i++) {
        sy_device_desc d;
        memset(&d, 0, sizeof d);
        cr_assert_eq(sy_runtime_query_device(rt, devs[i], &d), SY_OK);
        char want[32];
        snprintf(want, sizeof want, "opencl:%u", i);
        cr_assert_str_eq(d.name, want);
        cr_assert(d.kind == SY_DEVICE_GPU || d.kind == SY_DEVICE_CPU || d.kind == SY_DEVICE_NPU);
        /* The model string says what OpenCL calls the device, so a CPU
         * runtime such as PoCL is never mistaken for a GPU. */
        const char *word = d.kind == SY_DEVICE_CPU   ? "(OpenCL CPU device)"
                           : d.kind == SY_DEVICE_GPU ? "(OpenCL GPU)"
                                                     : "(OpenCL accelerator)";
        cr_assert(strstr(d.model, word) != NULL, "model '%s' lacks '%s'", d.model, word);
        cr_assert_neq(d.vendor[0], '\0');
        cr_assert_neq(d.driver[0], '\0');
        cr_assert_gt(d.memory_bytes, 0);
        cr_assert_gt(d.compute_units, 0);
        cr_assert(d.unified_memory == 0 || d.unified_memory == 1);
        cr_assert(strstr(d.topology, "MHz") && strstr(d.topology, "fp16") &&
                      strstr(d.topology, "fp64") && strstr(d.topology, "subgroups") &&
                      strstr(d.topology, "SVM"),
                  "topology: %s", d.topology);
        cr_assert(d.peak_flops == 0.0 && d.peak_bandwidth == 0.0, "peaks are left to the probe");
    }
    sy_runtime_destroy(rt);
}

Test(opencl_device, reports_pocl_as_the_cpu_it_is)
{
    ocase tc;
    memset(&tc, 0, sizeof tc);
    sy_runtime *rt = oc_runtime(&tc, false);
    uint32_t devs[16];
    const uint32_t n = oc_devices(rt, devs);
    bool found = false;
    for (uint32_t i = 0; i < n; i++) {
        sy_device_desc d;
        memset(&d, 0, sizeof d);
        sy_runtime_query_device(rt, devs[i], &d);
        if (!strstr(d.driver, "Portable Computing Language"))
            continue;
        found = true;
        cr_assert_eq(d.kind, SY_DEVICE_CPU, "%s: %s", d.name, d.model);
        cr_assert_eq(d.unified_memory, 1, "PoCL's CPU device shares host memory");
    }
    if (!found)
        cr_skip_test("no PoCL device on this machine");
    sy_runtime_destroy(rt);
}

Test(opencl_device, takes_the_matvec_work_group_from_the_environment)
{
    ocase tc;
    memset(&tc, 0, sizeof tc);
    sy_runtime *rt = oc_runtime_cfg(&tc, false, "rows", "32");
    uint32_t devs[16];
    const uint32_t n = oc_devices(rt, devs);
    cr_assert_gt(n, 0, "no OpenCL device; log:\n%s", tc.log);
    for (uint32_t i = 0; i < n; i++) {
        sy_device_desc d;
        sy_runtime_query_device(rt, devs[i], &d);
        char want[SY_NAME_MAX + 64];
        snprintf(want, sizeof want, "%s: single-token matmul by rows, work-group 32", d.name);
        cr_expect(strstr(tc.log, want), "no '%s' in the log:\n%s", want, tc.log);
    }
    sy_runtime_destroy(rt);
    /* Not a power of two: refused with a warning, the runtime's choice kept. */
    rt = oc_runtime_cfg(&tc, false, "groups", "48");
    cr_expect(strstr(tc.log, "ignoring SWITCHYARD_OPENCL_MATVEC_WG='48'"), "log:\n%s", tc.log);
    cr_expect_null(strstr(tc.log, "work-group 48"), "log:\n%s", tc.log);
    sy_runtime_destroy(rt);
}

Test(opencl_device, describes_memory_as_discrete_when_forced)
{
    ocase tc;
    memset(&tc, 0, sizeof tc);
    sy_runtime *rt = oc_runtime(&tc, true);
    uint32_t devs[16];
    const uint32_t n = oc_devices(rt, devs);
    cr_assert_gt(n, 0);
    for (uint32_t i = 0; i < n; i++) {
        sy_device_desc d;
        memset(&d, 0, sizeof d);
        sy_runtime_query_device(rt, devs[i], &d);
        cr_assert_eq(d.unified_memory, 0, "%s", d.name);
    }
    sy_runtime_destroy(rt);
}

/* A node built by hand, outside any graph. */
static void hand_matmul(sy_node *node, sy_tensor *w, sy_tensor *x, sy_tensor *y, sy_dtype wtype)
{
    memset(node, 0, sizeof *node);
    memset(w, 0, sizeof *w);
    memset(x, 0, sizeof *x);
    memset(y, 0, sizeof *y);
    w->dtype = wtype;
    w->ne[0] = 256;
    w->ne[1] = 8;
    w->ne[2] = w->ne[3] = 1;
    sy_tensor_set_contiguous_strides(w);
    x->dtype = SY_DTYPE_F32;
    x->ne[0] = 256;
    x->ne[1] = 2;
    x->ne[2] = x->ne[3] = 1;
    sy_tensor_set_contiguous_strides(x);
    y->dtype = SY_DTYPE_F32;
    y->ne[0] = 8;
    y->ne[1] = 2;
    y->ne[2] = y->ne[3] = 1;
    sy_tensor_set_contiguous_strides(y);
    node->op = SY_OP_MATMUL;
    node->n_inputs = 2;
    node->inputs[0] = w;
    node->inputs[1] = x;
    node->output = y;
}

Test(opencl_device, says_why_it_refuses_a_node)
{
    ocase tc;
    memset(&tc, 0, sizeof tc);
    sy_runtime *rt = oc_runtime(&tc, false);
    uint32_t devs[16];
    cr_assert_gt(oc_devices(rt, devs), 0);
    const uint32_t dev = devs[0];
    sy_node node;
    sy_tensor w, x, y;
    sy_support why;

    hand_matmul(&node, &w, &x, &y, SY_DTYPE_Q4_K);
    cr_assert(sy_runtime_device_supports(rt, dev, &node, &why), "refused: %s", why.text);

    hand_matmul(&node, &w, &x, &y, SY_DTYPE_I32);
    cr_assert_not(sy_runtime_device_supports(rt, dev, &node, &why));
    cr_assert_eq(why.reason, SY_UNSUPPORTED_DTYPE);
    cr_assert(strstr(why.text, "i32") != NULL, "reason: %s", why.text);

    /* Weights read as a transposed view: rows are not dense. */
    hand_matmul(&node, &w, &x, &y, SY_DTYPE_F32);
    w.nb[0] = w.nb[1];
    w.nb[1] = 4;
    cr_assert_not(sy_runtime_device_supports(rt, dev, &node, &why));
    cr_assert_eq(why.reason, SY_UNSUPPORTED_SHAPE);
    cr_assert(strstr(why.text, "dense rows") != NULL, "reason: %s", why.text);

    /* Quantized blocks with a stride between them. */
    hand_matmul(&node, &w, &x, &y, SY_DTYPE_Q8_0);
    w.nb[0] = 68;
    cr_assert_not(sy_runtime_device_supports(rt, dev, &node, &why));
    cr_assert_eq(why.reason, SY_UNSUPPORTED_SHAPE);
    cr_assert(strstr(why.text, "strided blocks") != NULL, "reason: %s", why.text);

    /* An activation of the wrong dtype. */
    hand_matmul(&node, &w, &x, &y, SY_DTYPE_F32);
    node.op = SY_OP_SILU;
    node.n_inputs = 1;
    w.dtype = SY_DTYPE_Q8_0;
    sy_tensor_set_contiguous_strides(&w);
    cr_assert_not(sy_runtime_device_supports(rt, dev, &node, &why));
    cr_assert_eq(why.reason, SY_UNSUPPORTED_DTYPE);

    hand_matmul(&node, &w, &x, &y, SY_DTYPE_F32);
    node.op = SY_OP_COUNT + 3;
    cr_assert_not(sy_runtime_device_supports(rt, dev, &node, &why));
    cr_assert_eq(why.reason, SY_UNSUPPORTED_OP);
    sy_runtime_destroy(rt);
}

Test(opencl_device, refuses_transposed_weights_before_running_anything)
{
    ocase tc;
    oc_begin(&tc, "matmul with transposed weights");
    sy_tensor *wt = oc_input(&tc, "wt", SY_DTYPE_F32, 9, 64, 1, 1);
    sy_tensor *w = oc_node(&tc, SY_OP_TRANSPOSE, "w", &wt, 1, NULL);
    sy_tensor *x = oc_input(&tc, "x", SY_DTYPE_F32, 64, 3, 1, 1);
    sy_tensor *in[2] = {w, x};
    oc_output(&tc, oc_node(&tc, SY_OP_MATMUL, "mm", in, 2, NULL));
    cr_assert_eq(sy_graph_freeze(tc.g), SY_OK);
    sy_runtime *rt = oc_runtime(&tc, false);
    uint32_t devs[16];
    cr_assert_gt(oc_devices(rt, devs), 0);
    sy_status st = sy_runtime_execute_on(rt, tc.g, devs[0]);
    cr_assert_eq(st, SY_E_UNSUPPORTED);
    cr_assert(strstr(sy_runtime_last_error(rt), "dense rows") != NULL, "error: %s",
              sy_runtime_last_error(rt));
    sy_runtime_destroy(rt);
    oc_end(&tc);
}

/* ---------------------------------------------------------- program cache */

/* Points XDG_CACHE_HOME at a fresh directory; returns the plugin's cache
 * directory inside it. */
static void fresh_cache(char *xdg, size_t xdg_size, char *dir, size_t dir_size)
{
    snprintf(xdg, xdg_size, "/tmp/sy-opencl-cache-XXXXXX");
    cr_assert_not_null(mkdtemp(xdg));
    setenv("XDG_CACHE_HOME", xdg, 1);
    /* PoCL keeps its own kernel cache under XDG_CACHE_HOME too: keep that
     * one shared (the caller's POCL_CACHE_DIR, else the suite's), so only
     * our programs start cold. */
    const char *pocl = getenv("POCL_CACHE_DIR");
    const char *shared = getenv("SY_TEST_POCL_CACHE");
    if ((!pocl || !*pocl) && shared && *shared)
        setenv("POCL_CACHE_DIR", shared, 1);
    snprintf(dir, dir_size, "%s/switchyard/opencl", xdg);
}

static void remove_tree(const char *path)
{
    char cmd[1200];
    snprintf(cmd, sizeof cmd, "rm -rf '%s'", path);
    cr_assert_eq(system(cmd), 0);
}

/* Path of the cached binary of program |family| in |dir|, or "" if none. */
static void cache_entry(const char *dir, const char *family, char *out, size_t size)
{
    out[0] = '\0';
    DIR *dp = opendir(dir);
    if (!dp)
        return;
    struct dirent *e;
    size_t n = strlen(family);
    while ((e = readdir(dp)) != NULL) {
        if (strncmp(e->d_name, family, n) == 0 && e->d_name[n] == '-' &&
            strstr(e->d_name, ".bin") && !strstr(e->d_name, ".tmp")) {
            snprintf(out, size, "%s/%s", dir, e->d_name);
            break;
        }
    }
    closedir(dp);
}

/* An rms_norm graph: the 'rows' program. */
static void norm_case(ocase *tc, const char *what)
{
    oc_begin(tc, "%s", what);
    sy_tensor *x = oc_input(tc, "x", SY_DTYPE_F32, 256, 7, 1, 1);
    sy_op_params p = {.f = {1e-5f}};
    oc_output(tc, oc_node(tc, SY_OP_RMS_NORM, "norm", &x, 1, &p));
    tc->only_unified = true;
}

Test(opencl_cache, builds_once_then_loads_programs_from_the_cache)
{
    char xdg[256], dir[512], entry[1024];
    fresh_cache(xdg, sizeof xdg, dir, sizeof dir);
    ocase tc;
    norm_case(&tc, "first run, empty cache");
    oc_run(&tc, (otol){2e-6, 1e-6});
    cr_assert(strstr(tc.log, "program 'rows' built from source"), "log:\n%s", tc.log);
    cache_entry(dir, "rows", entry, sizeof entry);
    cr_assert_neq(entry[0], '\0', "no cache entry in %s", dir);
    oc_end(&tc);

    norm_case(&tc, "second run, warm cache");
    oc_run(&tc, (otol){2e-6, 1e-6});
    cr_assert(strstr(tc.log, "program 'rows' loaded from the cache"), "log:\n%s", tc.log);
    cr_assert_null(strstr(tc.log, "built from source"), "log:\n%s", tc.log);
    oc_end(&tc);
    remove_tree(xdg);
}

/* Corrupts the cache entry of 'rows' with |damage|, then checks that the
 * next run rebuilds it (saying why), gets the right answer, and that the
 * entry it wrote is good again. */
static void check_rebuild(void (*damage)(const char *path), const char *reason)
{
    char xdg[256], dir[512], entry[1024];
    fresh_cache(xdg, sizeof xdg, dir, sizeof dir);
    ocase tc;
    norm_case(&tc, "populate the cache");
    oc_run(&tc, (otol){2e-6, 1e-6});
    oc_end(&tc);
    cache_entry(dir, "rows", entry, sizeof entry);
    cr_assert_neq(entry[0], '\0');
    damage(entry);

    norm_case(&tc, "run over a damaged cache entry");
    oc_run(&tc, (otol){2e-6, 1e-6});
    cr_assert(strstr(tc.log, "is unusable") && strstr(tc.log, reason) &&
                  strstr(tc.log, "program 'rows' built from source"),
              "expected a rebuild because of '%s'; log:\n%s", reason, tc.log);
    oc_end(&tc);

    norm_case(&tc, "run over the rewritten entry");
    oc_run(&tc, (otol){2e-6, 1e-6});
    cr_assert(strstr(tc.log, "program 'rows' loaded from the cache"), "log:\n%s", tc.log);
    oc_end(&tc);
    remove_tree(xdg);
}

static long file_size(const char *path)
{
    struct stat st;
    cr_assert_eq(stat(path, &st), 0);
    return (long)st.st_size;
}

static void flip_payload_bytes(const char *path)
{
    FILE *f = fopen(path, "r+b");
    cr_assert_not_null(f);
    const long size = file_size(path);
    for (long at = 40; at < size; at += size / 7) {
        fseek(f, at, SEEK_SET);
        int c = fgetc(f);
        fseek(f, at, SEEK_SET);
        fputc(c ^ 0x5a, f);
    }
    fclose(f);
}

static void truncate_entry(const char *path)
{
    cr_assert_eq(truncate(path, file_size(path) / 2), 0);
}

static void break_magic(const char *path)
{
    FILE *f = fopen(path, "r+b");
    cr_assert_not_null(f);
    fputs("GARBAGE!", f);
    fclose(f);
}

/* 64-bit FNV-1a, the checksum of the cache format (ocl_program.c). */
static uint64_t fnv(const unsigned char *p, size_t n)
{
    uint64_t h = 0xcbf29ce484222325ull;
    for (size_t i = 0; i < n; i++) {
        h ^= p[i];
        h *= 0x100000001b3ull;
    }
    return h;
}

/* Keeps the header valid (same key, a correct size and checksum) but puts
 * garbage where the driver's binary was: the entry passes every check of
 * ours and only the driver can tell. */
static void forge_consistent_garbage(const char *path)
{
    FILE *f = fopen(path, "r+b");
    cr_assert_not_null(f);
    unsigned char header[32];
    cr_assert_eq(fread(header, 1, sizeof header, f), sizeof header);
    unsigned char junk[4096];
    for (size_t i = 0; i < sizeof junk; i++)
        junk[i] = (unsigned char)(i * 131u + 7u);
    uint64_t size = sizeof junk, hash = fnv(junk, sizeof junk);
    memcpy(header + 16, &size, 8);
    memcpy(header + 24, &hash, 8);
    fclose(f);
    f = fopen(path, "wb");
    cr_assert_not_null(f);
    cr_assert_eq(fwrite(header, 1, sizeof header, f), sizeof header);
    cr_assert_eq(fwrite(junk, 1, sizeof junk, f), sizeof junk);
    fclose(f);
}

Test(opencl_cache, rebuilds_an_entry_with_a_corrupt_payload)
{
    check_rebuild(flip_payload_bytes, "checksum mismatch");
}

Test(opencl_cache, rebuilds_a_truncated_entry) { check_rebuild(truncate_entry, "truncated"); }
Test(opencl_cache, rebuilds_an_entry_with_a_foreign_header) { check_rebuild(break_magic, "bad magic"); }

Test(opencl_cache, rebuilds_an_entry_the_driver_refuses)
{
    check_rebuild(forge_consistent_garbage, "rebuilding");
}

Test(opencl_cache, runs_without_a_cache_when_switched_off)
{
    char xdg[256], dir[512], entry[1024];
    fresh_cache(xdg, sizeof xdg, dir, sizeof dir);
    setenv("SWITCHYARD_OPENCL_CACHE", "0", 1);
    ocase tc;
    norm_case(&tc, "no cache");
    oc_run(&tc, (otol){2e-6, 1e-6});
    cr_assert(strstr(tc.log, "built from source"), "log:\n%s", tc.log);
    oc_end(&tc);
    unsetenv("SWITCHYARD_OPENCL_CACHE");
    cache_entry(dir, "rows", entry, sizeof entry);
    cr_assert_eq(entry[0], '\0', "a cache entry was written: %s", entry);
    remove_tree(xdg);
}

/* ------------------------------------------------ a program that breaks */

Test(opencl_broken, runs_the_node_on_the_host_and_says_why)
{
    setenv("SWITCHYARD_OPENCL_BREAK", "rows", 1);
    ocase tc;
    norm_case(&tc, "rms_norm with the 'rows' program broken");
    tc.allow_host = true;
    sy_tensor *x = sy_graph_find_tensor(tc.g, "norm");
    sy_tensor *in[2] = {x, x};
    oc_output(&tc, oc_node(&tc, SY_OP_ADD, "sum", in, 2, NULL));
    oc_run(&tc, (otol){2e-6, 1e-6});
    cr_assert(strstr(tc.log, "program 'rows' failed to build") &&
                  strstr(tc.log, "broken on purpose"),
              "the build log is not in the log:\n%s", tc.log);
    cr_assert(strstr(tc.log, "node 'norm' (rms_norm) runs on the host"), "log:\n%s", tc.log);
    cr_assert_null(strstr(tc.log, "node 'sum' (add) runs on the host"),
                   "only the broken program's ops leave the device:\n%s", tc.log);
    oc_end(&tc);
    unsetenv("SWITCHYARD_OPENCL_BREAK");
}

Test(opencl_broken, refuses_the_ops_of_a_broken_program_with_the_build_log)
{
    setenv("SWITCHYARD_OPENCL_BREAK", "rows", 1);
    ocase tc;
    norm_case(&tc, "supports() after a failed build");
    tc.allow_host = true;
    cr_assert_eq(sy_graph_freeze(tc.g), SY_OK);
    sy_graph_set_host_data(tc.g, tc.outs[0], tc.got[0]);
    sy_runtime *rt = oc_runtime(&tc, false);
    uint32_t devs[16];
    cr_assert_gt(oc_devices(rt, devs), 0);
    const sy_node *node = sy_graph_node(tc.g, 0);
    sy_support why;
    cr_assert(sy_runtime_device_supports(rt, devs[0], node, &why),
              "nothing is known before the first build");
    cr_assert_eq(sy_runtime_execute_on(rt, tc.g, devs[0]), SY_OK, "%s", sy_runtime_last_error(rt));
    cr_assert_not(sy_runtime_device_supports(rt, devs[0], node, &why));
    cr_assert_eq(why.reason, SY_UNSUPPORTED_OP);
    cr_assert(strstr(why.text, "failed to build") && strstr(why.text, "rows"), "reason: %s",
              why.text);
    /* The next run is refused up front, so a planner places it elsewhere. */
    cr_assert_eq(sy_runtime_execute_on(rt, tc.g, devs[0]), SY_E_UNSUPPORTED);
    sy_runtime_destroy(rt);
    oc_end(&tc);
    unsetenv("SWITCHYARD_OPENCL_BREAK");
}

Test(opencl_broken, marks_an_op_unsupported_when_its_launch_fails_at_run_time)
{
    setenv("SWITCHYARD_OPENCL_FAIL_KERNEL", "softmax", 1);
    ocase tc;
    oc_begin(&tc, "softmax whose launch the device refuses");
    tc.allow_host = true;
    tc.only_unified = true;
    sy_tensor *x = oc_input(&tc, "x", SY_DTYPE_F32, 40, 6, 2, 1);
    sy_op_params p = {.i = {1, 3, 0}, .f = {0.5f}};
    oc_output(&tc, oc_node(&tc, SY_OP_SOFTMAX, "probs", &x, 1, &p));
    cr_assert_eq(sy_graph_freeze(tc.g), SY_OK);
    sy_graph_set_host_data(tc.g, tc.outs[0], tc.want[0]);
    cr_assert_eq(sy_graph_run_reference(tc.g), SY_OK);
    sy_graph_set_host_data(tc.g, tc.outs[0], tc.got[0]);
    sy_runtime *rt = oc_runtime(&tc, false);
    uint32_t devs[16];
    cr_assert_gt(oc_devices(rt, devs), 0);
    cr_assert_eq(sy_runtime_execute_on(rt, tc.g, devs[0]), SY_OK, "%s", sy_runtime_last_error(rt));
    cr_assert(strstr(tc.log, "node 'probs' (softmax) runs on the host: the device refused"),
              "log:\n%s", tc.log);
    const float *got = tc.got[0], *want = tc.want[0];
    for (int64_t i = 0; i < 40 * 12; i++)
        cr_assert_eq(got[i], want[i], "the host fallback is the reference itself (element %lld)",
                     (long long)i);
    sy_support why;
    cr_assert_not(sy_runtime_device_supports(rt, devs[0], sy_graph_node(tc.g, 0), &why));
    cr_assert(strstr(why.text, "failed at run time"), "reason: %s", why.text);
    sy_runtime_destroy(rt);
    oc_end(&tc);
    unsetenv("SWITCHYARD_OPENCL_FAIL_KERNEL");
}

/* ------------------------------------------------- the module, directly */

/* Opens sy-opencl.so from the first SWITCHYARD_PLUGIN_PATH entry that has it. */
static void *open_module(void)
{
    const char *list = getenv("SWITCHYARD_PLUGIN_PATH");
    cr_assert_not_null(list, "SWITCHYARD_PLUGIN_PATH is not set");
    char path[4096];
    const char *p = list;
    while (*p) {
        size_t n = strcspn(p, ":");
        snprintf(path, sizeof path, "%.*s/sy-opencl.so", (int)n, p);
        if (access(path, R_OK) == 0) {
            void *so = dlopen(path, RTLD_NOW | RTLD_LOCAL);
            cr_assert_not_null(so, "dlopen %s: %s", path, dlerror());
            return so;
        }
        p += n + (p[n] == ':');
    }
    cr_assert_fail("no sy-opencl.so on SWITCHYARD_PLUGIN_PATH=%s", list);
    return NULL;
}

static const sy_plugin_desc *query_module(void *so, uint32_t abi)
{
    sy_plugin_query_fn q;
    void *sym = dlsym(so, SY_PLUGIN_ENTRY_SYMBOL);
    cr_assert_not_null(sym, "no %s", SY_PLUGIN_ENTRY_SYMBOL);
    memcpy(&q, &sym, sizeof q);
    return q(abi);
}

Test(opencl_module, exports_only_its_query_symbol)
{
    void *so = open_module();
    cr_assert_not_null(dlsym(so, SY_PLUGIN_ENTRY_SYMBOL));
    cr_assert_null(dlsym(so, "ocl_device_init"));
    cr_assert_null(dlsym(so, "ocl_kernel_sources"));
    cr_assert_null(dlsym(so, "ocl_launch_node"));
    const sy_plugin_desc *d = query_module(so, SY_PLUGIN_ABI_VERSION);
    cr_assert_not_null(d);
    cr_assert_str_eq(d->name, "opencl");
    cr_assert_null(query_module(so, (SY_PLUGIN_ABI_MAJOR + 1) << 16));
    dlclose(so);
}

static void check_buffers(bool discrete)
{
    if (discrete)
        setenv("SWITCHYARD_OPENCL_DISCRETE", "1", 1);
    void *so = open_module();
    const sy_plugin_desc *d = query_module(so, SY_PLUGIN_ABI_VERSION);
    direct_host h;
    direct_host_init(&h);
    void *state = NULL;
    cr_assert_eq(d->init(&h.host, &state), SY_OK, "init: %s", h.log);
    unsetenv("SWITCHYARD_OPENCL_DISCRETE");
    cr_assert_gt(d->device_count(state), 0);
    sy_device_desc desc;
    memset(&desc, 0, sizeof desc);
    desc.struct_size = sizeof desc;
    cr_assert_eq(d->describe(state, 0, &desc), SY_OK);

    uint8_t src[1000], dst[1000];
    for (int i = 0; i < 1000; i++)
        src[i] = (uint8_t)(i * 7);
    void *a = NULL, *b = NULL;
    cr_assert_eq(d->buffer_alloc(state, 0, 1000, &a), SY_OK);
    cr_assert_eq(d->buffer_alloc(state, 0, 1000, &b), SY_OK);
    cr_assert_eq(d->buffer_host_ptr(state, 0, a) != NULL, desc.unified_memory == 1,
                 "buffers are mapped exactly on unified memory");
    cr_assert_eq(d->copy_in(state, 0, a, 0, src, 1000), SY_OK);
    cr_assert_eq(d->copy_device(state, 0, b, 10, 0, a, 0, 990), SY_OK);
    cr_assert_eq(d->copy_out(state, 0, b, 10, dst, 990), SY_OK);
    cr_assert_eq(memcmp(src, dst, 990), 0);
    /* Overlapping ranges of one buffer. */
    cr_assert_eq(d->copy_device(state, 0, a, 5, 0, a, 0, 900), SY_OK);
    cr_assert_eq(d->copy_out(state, 0, a, 5, dst, 900), SY_OK);
    cr_assert_eq(memcmp(src, dst, 900), 0);
    cr_assert_neq(d->copy_in(state, 0, a, 900, src, 101), SY_OK, "copy past the end refused");
    cr_assert_neq(d->copy_out(state, 0, a, 1001, dst, 0), SY_OK, "offset past the end refused");

    void *imported = NULL;
    static _Alignas(64) uint8_t host_mem[4096];
    sy_status st = d->buffer_import_host(state, 0, host_mem, sizeof host_mem, &imported);
    if (desc.unified_memory) {
        cr_assert_eq(st, SY_OK, "import on unified memory: %s", h.log);
        cr_assert_eq(d->buffer_host_ptr(state, 0, imported), (void *)host_mem,
                     "import does not copy");
        void *unaligned = NULL;
        cr_assert_eq(d->buffer_import_host(state, 0, host_mem + 1, 64, &unaligned),
                     SY_E_UNSUPPORTED, "unaligned host memory is left to the runtime's copy");
        cr_assert_null(unaligned);
        d->buffer_free(state, 0, imported);
    } else {
        cr_assert_eq(st, SY_E_UNSUPPORTED, "no import on discrete memory");
    }
    d->buffer_free(state, 0, a);
    d->buffer_free(state, 0, b);
    cr_assert_eq(d->synchronize(state, 0), SY_OK);
    d->deinit(state);
    dlclose(so);
}

Test(opencl_module, moves_bytes_through_its_buffers) { check_buffers(false); }
Test(opencl_module, moves_bytes_through_discrete_buffers) { check_buffers(true); }

Test(opencl_module, passes_its_self_test_on_every_device)
{
    void *so = open_module();
    const sy_plugin_desc *d = query_module(so, SY_PLUGIN_ABI_VERSION);
    direct_host h;
    direct_host_init(&h);
    void *state = NULL;
    cr_assert_eq(d->init(&h.host, &state), SY_OK, "init: %s", h.log);
    for (uint32_t i = 0; i < d->device_count(state); i++) {
        char msg[512] = "";
        sy_status st = d->self_test(state, i, msg, sizeof msg);
        cr_assert_eq(st, SY_OK, "self-test of device %u: %s\nlog:\n%s", i, msg, h.log);
    }
    d->deinit(state);
    dlclose(so);
}

Test(opencl_module, fails_its_self_test_with_the_build_log_of_a_broken_program)
{
    setenv("SWITCHYARD_OPENCL_BREAK", "attention", 1);
    void *so = open_module();
    const sy_plugin_desc *d = query_module(so, SY_PLUGIN_ABI_VERSION);
    direct_host h;
    direct_host_init(&h);
    void *state = NULL;
    cr_assert_eq(d->init(&h.host, &state), SY_OK, "init: %s", h.log);
    char msg[512] = "";
    cr_assert_neq(d->self_test(state, 0, msg, sizeof msg), SY_OK);
    cr_assert(strstr(msg, "'attention' failed to build") && strstr(msg, "broken on purpose"),
              "message: %s", msg);
    d->deinit(state);
    dlclose(so);
    unsetenv("SWITCHYARD_OPENCL_BREAK");
}
