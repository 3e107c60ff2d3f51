/* npusim's own memory: the arena's allocator through the plugin table
 * (exhaustion, reuse, merging of freed neighbours, no host mapping) and a
 * graph too big for the arena through the runtime (SY_E_NO_MEMORY with the
 * tensor named, the device still usable afterwards). */
#include <criterion/criterion.h>
#include <dlfcn.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include "test_npusim_util.h"

/* A bare host for driving the table directly. */
static void th_log(void *ctx, sy_log_level level, const char *msg)
{
    char *buf = ctx;
    size_t used = strlen(buf);
    if (used + strlen(msg) + 2 < 4096) {
        strcat(buf, msg);
        strcat(buf, "\n");
    }
}

static void *th_alloc(void *ctx, size_t size, size_t align)
{
    void *p = NULL;
    return posix_memalign(&p, align < 16 ? 16 : align, size ? size : 1) == 0 ? p : NULL;
}

static void th_free(void *ctx, void *ptr)
{
    free(ptr);
}

static const char *th_op_name(void *ctx, uint32_t op)
{
    return sy_op_name((sy_op)op);
}

static sy_status th_reference(void *ctx, const sy_node *node)
{
    cr_assert_fail("npusim called the host's reference kernels");
    return SY_E_INTERNAL;
}

static void th_op_cost(void *ctx, const sy_node *node, uint64_t *flops, uint64_t *bytes)
{
    sy_op_cost(node, flops, bytes);
}

typedef struct table_fixture {
    void *dl;
    const sy_plugin_desc *t;
    sy_host host;
    void *state;
    char log[4096];
    char config[256];
} table_fixture;

static void table_open(table_fixture *f, const char *json)
{
    memset(f, 0, sizeof *f);
    snprintf(f->config, sizeof f->config, "/tmp/npusim-arena-XXXXXX.json");
    int fd = mkstemps(f->config, 5);
    cr_assert(fd >= 0);
    FILE *cf = fdopen(fd, "w");
    fputs(json, cf);
    fclose(cf);
    setenv("SWITCHYARD_NPUSIM_CONFIG", f->config, 1);
    char path[512];
    f->dl = dlopen(nt_plugin_path("npusim/sy-npusim.so", path, sizeof path), RTLD_NOW | RTLD_LOCAL);
    cr_assert(f->dl != NULL, "%s", dlerror());
    sy_plugin_query_fn query = NULL;
    void *sym = dlsym(f->dl, SY_PLUGIN_ENTRY_SYMBOL);
    memcpy(&query, &sym, sizeof query);
    cr_assert(query != NULL);
    f->t = query(SY_PLUGIN_ABI_VERSION);
    cr_assert(f->t != NULL);
    f->host = (sy_host){
        .abi_version = SY_PLUGIN_ABI_VERSION,
        .struct_size = sizeof(sy_host),
        .ctx = f->log,
        .log = th_log,
        .alloc = th_alloc,
        .free = th_free,
        .op_name = th_op_name,
        .reference_execute = th_reference,
        .op_cost = th_op_cost,
    };
    cr_assert_eq(f->t->init(&f->host, &f->state), SY_OK, "init: %s", f->log);
}

static void table_close(table_fixture *f)
{
    f->t->deinit(f->state);
    dlclose(f->dl);
    unlink(f->config);
    unsetenv("SWITCHYARD_NPUSIM_CONFIG");
}

Test(npusim_arena, runs_out_with_no_memory_and_reuses_merged_free_space)
{
    table_fixture f;
    table_open(&f, "{ \"memory_bytes\": \"1 MiB\" }");
    const uint64_t quarter = 256u << 10;
    void *b[5] = {NULL};
    for (int i = 0; i < 4; i++)
        cr_assert_eq(f.t->buffer_alloc(f.state, 0, quarter, &b[i]), SY_OK, "buffer %d", i);
    void *extra = (void *)&extra;
    cr_assert_eq(f.t->buffer_alloc(f.state, 0, 1, &extra), SY_E_NO_MEMORY);
    cr_assert_null(extra, "a failed allocation must leave *out_buffer NULL");
    cr_assert(strstr(f.log, "arena exhausted") != NULL, "log:\n%s", f.log);

    /* Two freed neighbours merge into one block that fits twice their size. */
    f.t->buffer_free(f.state, 0, b[1]);
    f.t->buffer_free(f.state, 0, b[2]);
    cr_assert_eq(f.t->buffer_alloc(f.state, 0, 2 * quarter, &b[1]), SY_OK);
    cr_assert_eq(f.t->buffer_alloc(f.state, 0, 1, &b[4]), SY_E_NO_MEMORY);
    for (int i = 0; i < 4; i++)
        if (i != 2)
            f.t->buffer_free(f.state, 0, b[i]);
    /* Everything free again: the whole arena is one block. */
    cr_assert_eq(f.t->buffer_alloc(f.state, 0, 4 * quarter, &b[0]), SY_OK);
    f.t->buffer_free(f.state, 0, b[0]);
    cr_assert_eq(f.t->buffer_alloc(f.state, 0, 4 * quarter + 1, &b[0]), SY_E_NO_MEMORY);
    table_close(&f);
}

Test(npusim_arena, is_not_mappable_and_keeps_every_copy_inside_its_buffer)
{
    table_fixture f;
    table_open(&f, "{ \"memory_bytes\": \"1 MiB\" }");
    cr_assert_null(f.t->buffer_import_host, "npusim must not import host memory");
    void *b = NULL;
    cr_assert_eq(f.t->buffer_alloc(f.state, 0, 1000, &b), SY_OK);
    cr_assert_null(f.t->buffer_host_ptr(f.state, 0, b));
    unsigned char in[1000], out[1000];
    for (int i = 0; i < 1000; i++)
        in[i] = (unsigned char)(i * 13);
    cr_assert_eq(f.t->copy_in(f.state, 0, b, 0, in, sizeof in), SY_OK);
    cr_assert_eq(f.t->copy_out(f.state, 0, b, 0, out, sizeof out), SY_OK);
    cr_assert_arr_eq(in, out, sizeof in);
    /* The block is rounded up to 256 bytes, but the buffer is 1000. */
    cr_assert_neq(f.t->copy_in(f.state, 0, b, 990, in, 11), SY_OK);
    cr_assert_neq(f.t->copy_out(f.state, 0, b, 1001, out, 0), SY_OK);
    f.t->buffer_free(f.state, 0, b);
    table_close(&f);
}

Test(npusim_arena, a_graph_bigger_than_the_arena_fails_with_no_memory_not_a_crash)
{
    nt_rt t;
    nt_open(&t, "{ \"memory_bytes\": \"64 MiB\" }", false);
    cr_assert_neq(t.npu, UINT32_MAX, "log:\n%s", t.log);
    /* Six tensors of 16 MiB: each node fits, the graph does not. */
    sy_graph *g = NULL;
    cr_assert_eq(sy_graph_create(&g), SY_OK);
    const int64_t ne[2] = {1 << 20, 4};
    sy_tensor *x = NULL, *y = NULL;
    cr_assert_eq(sy_graph_add_tensor(g, "x", SY_DTYPE_F32, 2, ne, SY_ROLE_INPUT, NULL, &x), SY_OK);
    cr_assert_eq(sy_graph_add_tensor(g, "y", SY_DTYPE_F32, 2, ne, SY_ROLE_INPUT, NULL, &y), SY_OK);
    sy_tensor *cur = x;
    for (int i = 0; i < 4; i++) {
        sy_tensor *in[2] = {cur, y};
        char name[16];
        snprintf(name, sizeof name, "a%d", i);
        cr_assert_eq(sy_graph_add_node(g, SY_OP_ADD, name, in, 2, NULL, &cur), SY_OK);
    }
    cr_assert_eq(sy_graph_freeze(g), SY_OK);
    for (uint32_t i = 0; i < sy_graph_node_count(g); i++) {
        sy_support why;
        cr_assert(nt_supports(&t, sy_graph_node(g, i), &why), "%s", why.text);
    }
    sy_status st = sy_runtime_execute_on(t.rt, g, t.npu);
    cr_assert_eq(st, SY_E_NO_MEMORY, "got %s: %s", sy_status_name(st), sy_runtime_last_error(t.rt));
    cr_assert(strstr(sy_runtime_last_error(t.rt), "buffer_alloc") != NULL, "%s",
              sy_runtime_last_error(t.rt));
    sy_graph_destroy(g);

    /* The failed run freed what it had: a small graph still runs. */
    uint64_t s = nt_fresh_seed();
    nt_graph ng;
    nt_matmul_graph(&ng, &s, SY_DTYPE_Q8_0, 64, 8, 2);
    cr_assert_eq(nt_run(&t, &ng, t.npu), SY_OK, "%s", sy_runtime_last_error(t.rt));
    nt_graph_free(&ng);
    nt_close(&t);
}
