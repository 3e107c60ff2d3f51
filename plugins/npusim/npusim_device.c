/* The npusim device: plugin state, where the capability file comes from,
 * the description and the self-test.  Environment variables are read once,
 * here, at init:
 *   SWITCHYARD_NPUSIM_CONFIG  capability file to use instead of the
 *                             npusim.json found beside the module
 *   SWITCHYARD_NPUSIM_ISA     "scalar" forces the portable integer loop
 *
 * A capability file that cannot be read or parsed fails init (SY_E_IO or
 * SY_E_FORMAT, the reason logged with the file and the field): an NPU
 * quietly described by defaults would plan differently from what its file
 * says.  Only when no file exists at all beside the module (and none is
 * named) does npusim run on its built-in defaults, with a warning. */
#include <dlfcn.h>
#include <errno.h>
#include <math.h>
#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include "npusim_internal.h"

void npu_log(const npu_state *s, sy_log_level level, const char *fmt, ...)
{
    if (!s->host->log)
        return;
    char msg[512];
    va_list ap;
    va_start(ap, fmt);
    vsnprintf(msg, sizeof msg, fmt, ap);
    va_end(ap);
    s->host->log(s->host->ctx, level, msg);
}

const char *npu_op_name(const npu_state *s, uint32_t op)
{
    const char *name = s->host->op_name ? s->host->op_name(s->host->ctx, op) : NULL;
    return name ? name : "op";
}

void npu_format_size(uint64_t bytes, char *out, size_t size)
{
    static const char *const units[] = {"B", "KiB", "MiB", "GiB", "TiB"};
    double v = (double)bytes;
    int u = 0;
    while (v >= 1024.0 && u < 4) {
        v /= 1024.0;
        u++;
    }
    /* "1.0 GiB" for 1 GiB + 1 MiB would hide the difference that
     * matters in a refusal: say "1025 MiB" instead. */
    if (u > 0 && v != floor(v) && floor(v * 10.0 + 0.5) == floor(v) * 10.0) {
        v *= 1024.0;
        u--;
    }
    if (v == floor(v))
        snprintf(out, size, "%.0f %s", v, units[u]);
    else
        snprintf(out, size, "%.1f %s", v, units[u]);
}

sy_status npu_scratch_reserve(npu_state *s, npu_scratch *sc, size_t bytes)
{
    if (sc->size >= bytes)
        return SY_OK;
    void *p = s->host->alloc(s->host->ctx, bytes, 64);
    if (!p) {
        npu_log(s, SY_LOG_ERROR, "out of host memory for %zu bytes of scratch", bytes);
        return SY_E_NO_MEMORY;
    }
    if (sc->ptr)
        s->host->free(s->host->ctx, sc->ptr);
    sc->ptr = p;
    sc->size = bytes;
    return SY_OK;
}

/* ------------------------------------------------------ capability file */

/* Writes the path of npusim.json beside this module into |out|; false when
 * the module's own path is unknown. */
static bool npu_default_config_path(char *out, size_t size)
{
    Dl_info info;
    if (!dladdr((const void *)&npu_device_init, &info) || !info.dli_fname)
        return false;
    const char *slash = strrchr(info.dli_fname, '/');
    if (!slash)
        return snprintf(out, size, "%s", NPU_CONFIG_FILE) < (int)size;
    const int dir_len = (int)(slash - info.dli_fname);
    return snprintf(out, size, "%.*s/%s", dir_len, info.dli_fname, NPU_CONFIG_FILE) < (int)size;
}

static sy_status npu_load_caps(npu_state *s)
{
    npu_caps_defaults(&s->caps);
    char path[512];
    const char *env = getenv("SWITCHYARD_NPUSIM_CONFIG");
    if (env && env[0]) {
        snprintf(path, sizeof path, "%s", env);
    } else if (!npu_default_config_path(path, sizeof path)) {
        npu_log(s, SY_LOG_WARN, "cannot locate the module's directory; using the built-in "
                                "capabilities (set SWITCHYARD_NPUSIM_CONFIG to choose a file)");
        return SY_OK;
    } else if (access(path, F_OK) != 0) {
        npu_log(s, SY_LOG_WARN, "no capability file at %s; using the built-in capabilities",
                path);
        return SY_OK;
    }
    char why[768];
    sy_status st = npu_caps_load(&s->caps, path, why, sizeof why);
    if (st != SY_OK) {
        npu_log(s, SY_LOG_ERROR, "%s%s", why,
                env && env[0] ? " (named by SWITCHYARD_NPUSIM_CONFIG)" : "");
        return st;
    }
    npu_log(s, SY_LOG_DEBUG, "capabilities from %s", s->caps.source);
    return SY_OK;
}

/* ---------------------------------------------------------------- state */

static void npu_state_free(npu_state *s)
{
    const sy_host *host = s->host;
    npu_arena_release(s);
    if (s->act.ptr)
        host->free(host->ctx, s->act.ptr);
    if (s->weight.ptr)
        host->free(host->ctx, s->weight.ptr);
    host->free(host->ctx, s);
}

sy_status npu_device_init(const sy_host *host, void **out_state)
{
    if (!out_state)
        return SY_E_INVALID_ARG;
    *out_state = NULL;
    if (!host)
        return SY_E_INVALID_ARG;
    if (SY_PLUGIN_ABI_MAJOR_OF(host->abi_version) != SY_PLUGIN_ABI_MAJOR ||
        host->struct_size < offsetof(sy_host, op_cost) + sizeof host->op_cost)
        return SY_E_PLUGIN_ABI;
    if (!host->alloc || !host->free)
        return SY_E_INVALID_ARG;

    npu_state *s = host->alloc(host->ctx, sizeof *s, 64);
    if (!s)
        return SY_E_NO_MEMORY;
    memset(s, 0, sizeof *s);
    s->host = host;

    sy_status st = npu_load_caps(s);
    if (st != SY_OK)
        goto out_free_state;
    const char *isa = getenv("SWITCHYARD_NPUSIM_ISA");
    s->isa = npu_isa_select(isa);
    if (isa && isa[0] && strcmp(isa, "scalar") != 0 && strcmp(isa, "auto") != 0)
        npu_log(s, SY_LOG_WARN, "ignoring SWITCHYARD_NPUSIM_ISA='%s' (want scalar or auto)", isa);

    sy_device_desc *d = &s->desc;
    d->struct_size = sizeof *d;
    d->kind = SY_DEVICE_NPU;
    snprintf(d->name, sizeof d->name, "npusim");
    snprintf(d->model, sizeof d->model, "%s", s->caps.model);
    snprintf(d->vendor, sizeof d->vendor, "%s", NPU_PLUGIN_VENDOR);
    snprintf(d->driver, sizeof d->driver, "npusim %s (%s integer loop)", NPU_PLUGIN_VERSION,
             s->isa->name);
    d->memory_bytes = s->caps.memory_bytes;
    d->unified_memory = 0;
    d->compute_units = s->caps.compute_units;
    d->peak_flops = s->caps.peak_ops;
    d->peak_bandwidth = s->caps.peak_bandwidth;
    npu_caps_summary(&s->caps, d->topology, sizeof d->topology);

    *out_state = s;
    return SY_OK;

out_free_state:
    npu_state_free(s);
    return st;
}

void npu_device_deinit(void *state)
{
    if (state)
        npu_state_free(state);
}

uint32_t npu_device_count(void *state)
{
    return 1;
}

sy_status npu_device_describe(void *state, uint32_t dev, sy_device_desc *out_desc)
{
    const npu_state *s = state;
    if (dev != 0 || !out_desc)
        return SY_E_INVALID_ARG;
    /* Fill only as much as the core's struct holds (an older core's is
     * shorter); a later core's longer struct gets the fields this header
     * knows, and struct_size says how far they reach. */
    uint32_t size = out_desc->struct_size;
    if (size < sizeof out_desc->struct_size)
        return SY_E_INVALID_ARG;
    if (size > sizeof *out_desc)
        size = sizeof *out_desc;
    memcpy(out_desc, &s->desc, size);
    out_desc->struct_size = size;
    return SY_OK;
}

/* ------------------------------------------------------------- self-test */

/* Checks the arena (allocate, copy round trip, free) and one W8A8 dot
 * product whose activations quantise exactly, so that the integer path
 * must reproduce the float value to the last bit. */
sy_status npu_device_self_test(void *state, uint32_t dev, char *out_msg, uint32_t msg_size)
{
    npu_state *s = state;
    char scratch[8];
    if (!out_msg || msg_size == 0) {
        out_msg = scratch;
        msg_size = sizeof scratch;
    }
    out_msg[0] = '\0';
    if (dev != 0)
        return SY_E_INVALID_ARG;

    void *buf = NULL;
    sy_status st = npu_buffer_alloc(s, 0, 1000, &buf);
    if (st != SY_OK) {
        snprintf(out_msg, msg_size, "arena: allocating 1000 bytes failed (%d)", (int)st);
        return st;
    }
    unsigned char in[1000], out[1000];
    for (int i = 0; i < 1000; i++)
        in[i] = (unsigned char)(i * 7 + 3);
    st = npu_buffer_copy_in(s, 0, buf, 0, in, sizeof in);
    if (st == SY_OK)
        st = npu_buffer_copy_out(s, 0, buf, 0, out, sizeof out);
    npu_buffer_free(s, 0, buf);
    if (st != SY_OK || memcmp(in, out, sizeof in) != 0) {
        snprintf(out_msg, msg_size, "arena: copy round trip lost data");
        return st != SY_OK ? st : SY_E_DEVICE;
    }

    /* x = (-127..127 step) * 0.5, w = (j % 15 - 7): every value is an
     * integer times a power of two, so the emulation is exact. */
    enum { K = 64 };
    int16_t xq[K], wq[K];
    float x[K];
    int64_t want = 0;
    for (int i = 0; i < K; i++) {
        x[i] = (float)(i * 4 - 127) * 0.5f;
        wq[i] = (int16_t)(i % 15 - 7);
    }
    x[K - 1] = 63.5f; /* the row maximum, so the scale is exactly 0.5 */
    for (int i = 0; i < K; i++)
        want += (int64_t)wq[i] * (int64_t)(x[i] * 2.0f);
    int32_t zp;
    const float scale = npu_quantize_row(x, K, 8, false, xq, &zp);
    int32_t isum[K / NPU_QK];
    s->isa->block_dots(wq, xq, K / NPU_QK, isum);
    const float got = ((float)isum[0] + (float)isum[1]) * scale;
    if (scale != 0.5f || got != (float)want * 0.5f) {
        snprintf(out_msg, msg_size, "W8A8 dot (%s loop): got %g, want %g (scale %g)",
                 s->isa->name, (double)got, (double)want * 0.5, (double)scale);
        return SY_E_DEVICE;
    }
    return SY_OK;
}
