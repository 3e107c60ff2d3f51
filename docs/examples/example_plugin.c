/* A minimal out-of-tree Switchyard plugin: one device, "example", that
 * runs f32 add, mul and matmul with its own kernels on host memory and
 * refuses everything else with a reason.  It is built the way a vendor
 * builds a plugin, against the installed header and pkg-config file only,
 * never linking libswitchyard:
 *
 *   cc -std=c11 -O2 -fPIC -shared -fvisibility=hidden \
 *      $(pkg-config --cflags switchyard) example_plugin.c -o sy-example.so
 *   SWITCHYARD_PLUGIN_PATH=$PWD/sy-example.so switchyard devices
 *   switchyard plugin-check ./sy-example.so
 *
 * The test suite does exactly that against a staged install
 * (tests/examples/test_example_plugin.sh).  docs/plugin-guide.md explains
 * every rule this file follows; plugins/npusim/ is the complete template
 * (its own memory, integer kernels, a capability file).
 *
 * What it shows, in file order: the host services checked at init, state
 * from host->alloc (no globals), describe() honouring the caller's
 * struct_size, supports() refusing with a reason code and text, buffers
 * within a memory budget, execute() reaching tensors through buffer +
 * offset and strides, and the one exported symbol. */
#include <stddef.h>
#include <stdint.h>
#include <stdio.h>
#include <string.h>

#include <switchyard/plugin.h>

#define EX_NAME "example"
#define EX_MEMORY ((uint64_t)256 << 20) /* the budget describe() reports */
#define EX_BUFFER_MAGIC 0x45584246u     /* "EXBF" */

typedef struct ex_state {
    const sy_host *host;
    uint64_t used; /* bytes of live buffers */
} ex_state;

typedef struct ex_buffer {
    uint32_t magic;
    uint64_t size;
    unsigned char *data;
} ex_buffer;

static void ex_log(const ex_state *s, sy_log_level level, const char *msg)
{
    s->host->log(s->host->ctx, level, msg);
}

/* ------------------------------------------------------------ lifecycle */

static sy_status ex_init(const sy_host *host, void **out_state)
{
    if (!out_state)
        return SY_E_INVALID_ARG;
    *out_state = NULL;
    /* Use only the services this build knows and the host's table covers. */
    if (!host || SY_PLUGIN_ABI_MAJOR_OF(host->abi_version) != SY_PLUGIN_ABI_MAJOR ||
        host->struct_size < offsetof(sy_host, op_name) + sizeof host->op_name)
        return SY_E_PLUGIN_ABI;
    if (!host->log || !host->alloc || !host->free || !host->op_name)
        return SY_E_INVALID_ARG;
    ex_state *s = host->alloc(host->ctx, sizeof *s, 16);
    if (!s)
        return SY_E_NO_MEMORY;
    memset(s, 0, sizeof *s);
    s->host = host;
    *out_state = s;
    return SY_OK;
}

static void ex_deinit(void *state)
{
    ex_state *s = state;
    if (s)
        s->host->free(s->host->ctx, s);
}

static uint32_t ex_device_count(void *state)
{
    (void)state;
    return 1;
}

static sy_status ex_describe(void *state, uint32_t dev, sy_device_desc *out_desc)
{
    (void)state;
    if (dev != 0 || !out_desc || out_desc->struct_size < sizeof out_desc->struct_size)
        return SY_E_INVALID_ARG;
    /* Fill a whole description, then copy only as much as the caller's
     * struct holds: an older core passes a shorter one, and writing past
     * it would corrupt the core's memory. */
    sy_device_desc d;
    memset(&d, 0, sizeof d);
    d.kind = SY_DEVICE_CPU;
    snprintf(d.name, sizeof d.name, EX_NAME);
    snprintf(d.model, sizeof d.model, "out-of-tree example device (f32 add, mul, matmul)");
    snprintf(d.vendor, sizeof d.vendor, "switchyard docs/examples");
    snprintf(d.driver, sizeof d.driver, "example_plugin.c");
    d.memory_bytes = EX_MEMORY;
    d.unified_memory = 1; /* buffers are host memory */
    d.compute_units = 1;
    d.peak_flops = 1e9;
    d.peak_bandwidth = 5e9;
    snprintf(d.topology, sizeof d.topology, "one host thread; ops add,mul,matmul in f32");
    uint32_t size = out_desc->struct_size < sizeof d ? out_desc->struct_size : (uint32_t)sizeof d;
    d.struct_size = size;
    memcpy(out_desc, &d, size);
    return SY_OK;
}

/* ------------------------------------------------------------- supports */

static bool ex_refuse(const ex_state *s, sy_support *why, sy_support_reason reason,
                      const sy_node *node, const char *detail)
{
    why->reason = reason;
    snprintf(why->text, sizeof why->text, "%s: %s", s->host->op_name(s->host->ctx, node->op),
             detail);
    return false;
}

static bool ex_supports(void *state, uint32_t dev, const sy_node *node, sy_support *out_why)
{
    const ex_state *s = state;
    (void)dev;
    if (sy_op_is_view(node->op))
        return true; /* views only alias memory: nothing to run */
    if (node->op != SY_OP_ADD && node->op != SY_OP_MUL && node->op != SY_OP_MATMUL)
        return ex_refuse(s, out_why, SY_UNSUPPORTED_OP, node, "op not supported by example");
    if (node->n_inputs != 2)
        return ex_refuse(s, out_why, SY_UNSUPPORTED_SHAPE, node, "expects two inputs");
    uint64_t bytes = sy_tensor_nbytes(node->output);
    for (uint32_t i = 0; i < node->n_inputs; i++) {
        if (node->inputs[i]->dtype != SY_DTYPE_F32)
            return ex_refuse(s, out_why, SY_UNSUPPORTED_DTYPE, node,
                             "only f32 inputs (example has no quantised kernels)");
        bytes += sy_tensor_nbytes(node->inputs[i]);
    }
    if (node->output->dtype != SY_DTYPE_F32)
        return ex_refuse(s, out_why, SY_UNSUPPORTED_DTYPE, node, "only an f32 output");
    if (bytes > EX_MEMORY)
        return ex_refuse(s, out_why, SY_UNSUPPORTED_MEMORY, node,
                         "its tensors need more than the 256 MiB of example");
    return true;
}

/* -------------------------------------------------------------- buffers */

static ex_buffer *ex_buffer_of(void *buffer)
{
    ex_buffer *b = buffer;
    return b && b->magic == EX_BUFFER_MAGIC ? b : NULL;
}

static sy_status ex_buffer_alloc(void *state, uint32_t dev, uint64_t size, void **out_buffer)
{
    ex_state *s = state;
    if (!out_buffer)
        return SY_E_INVALID_ARG;
    *out_buffer = NULL;
    if (dev != 0)
        return SY_E_INVALID_ARG;
    if (size > EX_MEMORY - s->used)
        return SY_E_NO_MEMORY; /* the core reports the failed allocation */
    ex_buffer *b = s->host->alloc(s->host->ctx, sizeof *b, 16);
    if (!b)
        return SY_E_NO_MEMORY;
    /* One byte at least, so that a zero-size buffer is still a handle. */
    b->data = s->host->alloc(s->host->ctx, size ? (size_t)size : 1, 64);
    if (!b->data) {
        s->host->free(s->host->ctx, b);
        return SY_E_NO_MEMORY;
    }
    b->magic = EX_BUFFER_MAGIC;
    b->size = size;
    s->used += size;
    *out_buffer = b;
    return SY_OK;
}

static void ex_buffer_free(void *state, uint32_t dev, void *buffer)
{
    ex_state *s = state;
    (void)dev;
    ex_buffer *b = ex_buffer_of(buffer);
    if (!b)
        return;
    s->used -= b->size;
    b->magic = 0;
    s->host->free(s->host->ctx, b->data);
    s->host->free(s->host->ctx, b);
}

static void *ex_buffer_host_ptr(void *state, uint32_t dev, void *buffer)
{
    (void)state;
    (void)dev;
    ex_buffer *b = ex_buffer_of(buffer);
    return b ? b->data : NULL;
}

static sy_status ex_copy_in(void *state, uint32_t dev, void *buffer, uint64_t offset,
                            const void *src, uint64_t size)
{
    (void)state;
    (void)dev;
    ex_buffer *b = ex_buffer_of(buffer);
    if (!b || (size && !src) || offset > b->size || size > b->size - offset)
        return SY_E_INVALID_ARG;
    if (size)
        memcpy(b->data + offset, src, (size_t)size);
    return SY_OK;
}

static sy_status ex_copy_out(void *state, uint32_t dev, void *buffer, uint64_t offset, void *dst,
                             uint64_t size)
{
    (void)state;
    (void)dev;
    ex_buffer *b = ex_buffer_of(buffer);
    if (!b || (size && !dst) || offset > b->size || size > b->size - offset)
        return SY_E_INVALID_ARG;
    if (size)
        memcpy(dst, b->data + offset, (size_t)size);
    return SY_OK;
}

/* ------------------------------------------------------------ execution */

/* Address of element (i0, i1, i2, i3) of |t| whose storage starts at |base|. */
static float *ex_at(unsigned char *base, const sy_tensor *t, int64_t i0, int64_t i1, int64_t i2,
                    int64_t i3)
{
    return (float *)(base + i0 * t->nb[0] + i1 * t->nb[1] + i2 * t->nb[2] + i3 * t->nb[3]);
}

/* Where |t| lives: the buffer the core bound it to, plus its offset. */
static unsigned char *ex_resolve(const ex_state *s, const sy_node *node, const sy_tensor *t)
{
    ex_buffer *b = ex_buffer_of(t->buffer);
    if (!b || t->offset > b->size || sy_tensor_nbytes(t) > b->size - t->offset) {
        char msg[256];
        snprintf(msg, sizeof msg, "node '%s': tensor '%s' is not inside an example buffer",
                 node->name, t->name);
        ex_log(s, SY_LOG_ERROR, msg);
        return NULL;
    }
    return b->data + t->offset;
}

/* ADD and MUL: in1 is broadcast over in0 (its dims divide in0's). */
static void ex_binary(uint32_t op, const sy_tensor *a, unsigned char *pa, const sy_tensor *b,
                      unsigned char *pb, const sy_tensor *y, unsigned char *py)
{
    for (int64_t i3 = 0; i3 < y->ne[3]; i3++)
        for (int64_t i2 = 0; i2 < y->ne[2]; i2++)
            for (int64_t i1 = 0; i1 < y->ne[1]; i1++)
                for (int64_t i0 = 0; i0 < y->ne[0]; i0++) {
                    const float av = *ex_at(pa, a, i0, i1, i2, i3);
                    const float bv = *ex_at(pb, b, i0 % b->ne[0], i1 % b->ne[1],
                                            i2 % b->ne[2], i3 % b->ne[3]);
                    *ex_at(py, y, i0, i1, i2, i3) = op == SY_OP_ADD ? av + bv : av * bv;
                }
}

/* MATMUL: y[n, m] = sum_k w[k, n] * x[k, m], w broadcast over x's batches.
 * Sums in double, as the reference kernels do. */
static void ex_matmul(const sy_tensor *w, unsigned char *pw, const sy_tensor *x,
                      unsigned char *px, const sy_tensor *y, unsigned char *py)
{
    const int64_t r2 = x->ne[2] / w->ne[2], r3 = x->ne[3] / w->ne[3];
    for (int64_t i3 = 0; i3 < y->ne[3]; i3++)
        for (int64_t i2 = 0; i2 < y->ne[2]; i2++)
            for (int64_t m = 0; m < y->ne[1]; m++)
                for (int64_t n = 0; n < y->ne[0]; n++) {
                    double acc = 0;
                    for (int64_t k = 0; k < w->ne[0]; k++)
                        acc += (double)*ex_at(pw, w, k, n, i2 / r2, i3 / r3) *
                               *ex_at(px, x, k, m, i2, i3);
                    *ex_at(py, y, n, m, i2, i3) = (float)acc;
                }
}

static sy_status ex_execute(void *state, uint32_t dev, sy_node *const *nodes, uint32_t n)
{
    ex_state *s = state;
    if (dev != 0 || (n && !nodes))
        return SY_E_INVALID_ARG;
    for (uint32_t i = 0; i < n; i++) {
        const sy_node *node = nodes[i];
        if (sy_op_is_view(node->op))
            continue;
        sy_support why;
        if (!ex_supports(s, dev, node, &why)) {
            /* The planner asked supports() first; a node arriving anyway
             * fails loudly instead of computing something else. */
            ex_log(s, SY_LOG_ERROR, why.text);
            return SY_E_UNSUPPORTED;
        }
        unsigned char *p0 = ex_resolve(s, node, node->inputs[0]);
        unsigned char *p1 = ex_resolve(s, node, node->inputs[1]);
        unsigned char *py = ex_resolve(s, node, node->output);
        if (!p0 || !p1 || !py)
            return SY_E_INVALID_ARG;
        if (node->op == SY_OP_MATMUL)
            ex_matmul(node->inputs[0], p0, node->inputs[1], p1, node->output, py);
        else
            ex_binary(node->op, node->inputs[0], p0, node->inputs[1], p1, node->output, py);
    }
    return SY_OK; /* synchronous: synchronize() has nothing to wait for */
}

static sy_status ex_synchronize(void *state, uint32_t dev)
{
    (void)state;
    return dev == 0 ? SY_OK : SY_E_INVALID_ARG;
}

/* ---------------------------------------------------- the entry point */

static const sy_plugin_desc ex_desc = {
    .abi_version = SY_PLUGIN_ABI_VERSION,
    .struct_size = sizeof(sy_plugin_desc),
    .name = EX_NAME,
    .version = "1.0.0",
    .vendor = "switchyard docs/examples",
    .init = ex_init,
    .deinit = ex_deinit,
    .device_count = ex_device_count,
    .describe = ex_describe,
    .supports = ex_supports,
    .buffer_alloc = ex_buffer_alloc,
    .buffer_import_host = NULL, /* optional: the core allocates and copies */
    .buffer_free = ex_buffer_free,
    .buffer_host_ptr = ex_buffer_host_ptr,
    .copy_in = ex_copy_in,
    .copy_out = ex_copy_out,
    .copy_device = NULL,
    .execute = ex_execute,
    .synchronize = ex_synchronize,
    .self_test = NULL,
};

/* The only exported symbol.  NULL tells a host of another major ABI that
 * this plugin cannot serve it. */
SY_PLUGIN_EXPORT const sy_plugin_desc *sy_plugin_query(uint32_t host_abi)
{
    if (SY_PLUGIN_ABI_MAJOR_OF(host_abi) != SY_PLUGIN_ABI_MAJOR)
        return NULL;
    return &ex_desc;
}
