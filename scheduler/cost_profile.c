/* Reading device profiles (profiles/schema.json, docs/profiles.md) with
 * cJSON.  Every error names the file and the field. */
#include <cjson/cJSON.h>
#include <math.h>
#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "cost_model.h"

typedef struct prof_reader {
    const char *origin;
    char *err;
    size_t err_size;
} prof_reader;

static sy_status prof_fail(prof_reader *r, const char *fmt, ...)
    __attribute__((format(printf, 2, 3)));

static sy_status prof_fail(prof_reader *r, const char *fmt, ...)
{
    char msg[384];
    va_list ap;
    va_start(ap, fmt);
    vsnprintf(msg, sizeof msg, fmt, ap);
    va_end(ap);
    if (r->err && r->err_size)
        snprintf(r->err, r->err_size, "profile '%s': %s", r->origin, msg);
    return SY_E_FORMAT;
}

/* Reads an optional non-negative number; NAN when absent. */
static sy_status prof_number(prof_reader *r, const cJSON *obj, const char *key, const char *where,
                             double *out)
{
    *out = NAN;
    const cJSON *v = cJSON_GetObjectItemCaseSensitive(obj, key);
    if (!v)
        return SY_OK;
    if (!cJSON_IsNumber(v) || !isfinite(v->valuedouble) || v->valuedouble < 0)
        return prof_fail(r, "%s%s: expected a non-negative number", where, key);
    *out = v->valuedouble;
    return SY_OK;
}

static sy_status prof_string(prof_reader *r, const cJSON *obj, const char *key, bool required,
                             char *out, size_t size)
{
    const cJSON *v = cJSON_GetObjectItemCaseSensitive(obj, key);
    out[0] = '\0';
    if (!v) {
        if (required)
            return prof_fail(r, "missing field '%s'", key);
        return SY_OK;
    }
    if (cJSON_IsNumber(v)) {
        snprintf(out, size, "%.17g", v->valuedouble);
        return SY_OK;
    }
    if (!cJSON_IsString(v) || strlen(v->valuestring) >= size)
        return prof_fail(r, "%s: expected a string shorter than %zu bytes", key, size);
    snprintf(out, size, "%s", v->valuestring);
    return SY_OK;
}

static int prof_op_by_name(const char *name)
{
    if (strcmp(name, "*") == 0)
        return SY_OP_COUNT;
    for (int op = 1; op < SY_OP_COUNT; op++)
        if (strcmp(sy_op_name((sy_op)op), name) == 0)
            return op;
    return -1;
}

static int prof_dtype_by_name(const char *name)
{
    if (strcmp(name, "*") == 0)
        return -1;
    for (int t = 0; t < SY_DTYPE_COUNT; t++)
        if (strcmp(sy_dtype_name((uint32_t)t), name) == 0)
            return t;
    return -2;
}

static int point_cmp(const void *a, const void *b)
{
    double x = ((const sy__cost_point *)a)->work, y = ((const sy__cost_point *)b)->work;
    return x < y ? -1 : x > y;
}

/* Reads an optional whole number in [1, 65536] into *out (0 when absent). */
static sy_status prof_count(prof_reader *r, const cJSON *obj, const char *key, const char *where,
                            uint32_t *out)
{
    *out = 0;
    const cJSON *v = cJSON_GetObjectItemCaseSensitive(obj, key);
    if (!v)
        return SY_OK;
    if (!cJSON_IsNumber(v) || !(v->valuedouble >= 1 && v->valuedouble <= 65536) ||
        v->valuedouble != floor(v->valuedouble))
        return prof_fail(r, "%s%s: expected a whole number from 1 to 65536", where, key);
    *out = (uint32_t)v->valuedouble;
    return SY_OK;
}

/* The entry's token tile: token_tile (1: not tiled, as absent) and
 * token_tile_from (absent: 2, a one-token matvec is never rounded). */
static sy_status prof_tile(prof_reader *r, const cJSON *o, const char *where, sy__op_entry *e)
{
    sy_status st = prof_count(r, o, "token_tile", where, &e->token_tile);
    if (st == SY_OK)
        st = prof_count(r, o, "token_tile_from", where, &e->token_tile_from);
    if (st != SY_OK)
        return st;
    if (e->token_tile_from && !e->token_tile)
        return prof_fail(r, "%stoken_tile_from: given without token_tile", where);
    if (e->token_tile && e->op != SY_OP_MATMUL)
        return prof_fail(r, "%stoken_tile: only matmul entries are tiled", where);
    if (e->token_tile <= 1)
        e->token_tile = e->token_tile_from = 0;
    else if (e->token_tile_from < 2)
        e->token_tile_from = 2;
    return SY_OK;
}

static sy_status prof_read_op(prof_reader *r, const cJSON *o, uint32_t i, sy__op_entry *e)
{
    char where[48];
    snprintf(where, sizeof where, "ops[%u].", i);
    if (!cJSON_IsObject(o))
        return prof_fail(r, "ops[%u]: expected an object", i);
    const cJSON *op = cJSON_GetObjectItemCaseSensitive(o, "op");
    if (!cJSON_IsString(op))
        return prof_fail(r, "%sop: expected an op name", where);
    int opv = prof_op_by_name(op->valuestring);
    if (opv < 0)
        return prof_fail(r, "%sop: unknown op '%s'", where, op->valuestring);
    e->op = (uint32_t)opv;
    e->dtype = -1;
    const cJSON *dt = cJSON_GetObjectItemCaseSensitive(o, "dtype");
    if (dt) {
        int t = cJSON_IsString(dt) ? prof_dtype_by_name(dt->valuestring) : -2;
        if (t == -2)
            return prof_fail(r, "%sdtype: unknown dtype '%s'", where,
                             cJSON_IsString(dt) ? dt->valuestring : "(not a string)");
        e->dtype = t;
    }
    double ov, spf, spb;
    sy_status st = prof_number(r, o, "overhead_s", where, &ov);
    if (st == SY_OK)
        st = prof_number(r, o, "s_per_flop", where, &spf);
    if (st == SY_OK)
        st = prof_number(r, o, "s_per_byte", where, &spb);
    if (st == SY_OK)
        st = prof_number(r, o, "active_w", where, &e->active_w);
    if (st == SY_OK)
        st = prof_tile(r, o, where, e);
    if (st != SY_OK)
        return st;
    e->has_fit = !isnan(ov) || !isnan(spf) || !isnan(spb);
    e->overhead_s = isnan(ov) ? 0.0 : ov;
    e->s_per_flop = isnan(spf) ? 0.0 : spf;
    e->s_per_byte = isnan(spb) ? 0.0 : spb;
    const cJSON *pts = cJSON_GetObjectItemCaseSensitive(o, "points");
    if (pts && !cJSON_IsArray(pts))
        return prof_fail(r, "%spoints: expected an array", where);
    int n = pts ? cJSON_GetArraySize(pts) : 0;
    e->has_time = e->has_fit || n > 0;
    if (!e->has_time && isnan(e->active_w))
        return prof_fail(r,
                         "ops[%u] (%s): needs fitted coefficients or measured points (or, for "
                         "power alone, active_w)",
                         i, op->valuestring);
    if (n > 0) {
        e->points = calloc((size_t)n, sizeof *e->points);
        if (!e->points)
            return SY_E_NO_MEMORY;
    }
    for (int k = 0; k < n; k++) {
        const cJSON *p = cJSON_GetArrayItem(pts, k);
        char pw[64];
        snprintf(pw, sizeof pw, "ops[%u].points[%d].", i, k);
        if (!cJSON_IsObject(p))
            return prof_fail(r, "%s: expected an object", pw);
        sy__cost_point *cp = &e->points[k];
        st = prof_number(r, p, "flops", pw, &cp->flops);
        if (st == SY_OK)
            st = prof_number(r, p, "bytes", pw, &cp->bytes);
        if (st == SY_OK)
            st = prof_number(r, p, "seconds", pw, &cp->seconds);
        if (st != SY_OK)
            return st;
        if (isnan(cp->seconds) || cp->seconds <= 0)
            return prof_fail(r, "%sseconds: expected a positive number", pw);
        const cJSON *label = cJSON_GetObjectItemCaseSensitive(p, "shape");
        if (label && (!cJSON_IsString(label) || strlen(label->valuestring) >= sizeof cp->shape))
            return prof_fail(r, "%sshape: expected a string of at most %u characters", pw,
                             (unsigned)sizeof cp->shape - 1);
        if (label)
            memcpy(cp->shape, label->valuestring, strlen(label->valuestring) + 1);
        const cJSON *group = cJSON_GetObjectItemCaseSensitive(p, "group");
        if (group && (!cJSON_IsString(group) || strlen(group->valuestring) >= sizeof cp->group))
            return prof_fail(r, "%sgroup: expected a string of at most %u characters", pw,
                             (unsigned)sizeof cp->group - 1);
        if (group)
            memcpy(cp->group, group->valuestring, strlen(group->valuestring) + 1);
        cp->flops = isnan(cp->flops) ? 0.0 : cp->flops;
        cp->bytes = isnan(cp->bytes) ? 0.0 : cp->bytes;
        cp->work = sy__cost_work(cp->flops, cp->bytes);
        if (cp->work <= 0)
            return prof_fail(r, "%s: needs flops or bytes above zero", pw);
        e->n_points++;
    }
    if (e->n_points > 1)
        qsort(e->points, e->n_points, sizeof *e->points, point_cmp);
    return SY_OK;
}

static sy_status prof_read_link(prof_reader *r, const cJSON *o, uint32_t i, sy__link_entry *l)
{
    char where[48];
    snprintf(where, sizeof where, "links[%u].", i);
    if (!cJSON_IsObject(o))
        return prof_fail(r, "links[%u]: expected an object", i);
    const cJSON *to = cJSON_GetObjectItemCaseSensitive(o, "to");
    if (!cJSON_IsString(to) || strlen(to->valuestring) >= sizeof l->to)
        return prof_fail(r, "%sto: expected a device name", where);
    snprintf(l->to, sizeof l->to, "%s", to->valuestring);
    sy_status st = prof_number(r, o, "bandwidth", where, &l->bandwidth);
    if (st == SY_OK)
        st = prof_number(r, o, "latency_s", where, &l->latency_s);
    if (st == SY_OK)
        st = prof_number(r, o, "sync_s", where, &l->sync_s);
    if (st == SY_OK)
        st = prof_number(r, o, "map_s", where, &l->map_s);
    if (st == SY_OK)
        st = prof_number(r, o, "j_per_byte", where, &l->j_per_byte);
    if (st != SY_OK)
        return st;
    if (l->bandwidth == 0.0)
        return prof_fail(r, "%sbandwidth: must be above zero", where);
    l->zero_copy = -1;
    const cJSON *zc = cJSON_GetObjectItemCaseSensitive(o, "zero_copy");
    if (zc) {
        if (!cJSON_IsBool(zc))
            return prof_fail(r, "%szero_copy: expected true or false", where);
        l->zero_copy = cJSON_IsTrue(zc);
    }
    return SY_OK;
}

static sy_status prof_read(prof_reader *r, const cJSON *root, sy__profile *p)
{
    if (!cJSON_IsObject(root))
        return prof_fail(r, "expected a JSON object at the top");
    const cJSON *schema = cJSON_GetObjectItemCaseSensitive(root, "schema");
    if (!cJSON_IsString(schema) || strcmp(schema->valuestring, "switchyard-profile") != 0)
        return prof_fail(r, "schema: expected \"switchyard-profile\"");
    const cJSON *fv = cJSON_GetObjectItemCaseSensitive(root, "format_version");
    if (!cJSON_IsNumber(fv))
        return prof_fail(r, "format_version: expected a number");
    if (fv->valuedouble != (double)SY__PROFILE_FORMAT_VERSION)
        return prof_fail(r, "format_version %g is not supported (this build reads %u)",
                         fv->valuedouble, SY__PROFILE_FORMAT_VERSION);
    sy_status st = prof_string(r, root, "device", true, p->device, sizeof p->device);
    if (st == SY_OK)
        st = prof_string(r, root, "version", true, p->version, sizeof p->version);
    if (st == SY_OK)
        st = prof_string(r, root, "plugin", false, p->plugin, sizeof p->plugin);
    if (st == SY_OK)
        st = prof_string(r, root, "plugin_version", false, p->plugin_version,
                         sizeof p->plugin_version);
    if (st == SY_OK)
        st = prof_number(r, root, "peak_flops", "", &p->peak_flops);
    if (st == SY_OK)
        st = prof_number(r, root, "peak_bandwidth", "", &p->peak_bandwidth);
    if (st == SY_OK)
        st = prof_number(r, root, "launch_overhead_s", "", &p->launch_overhead_s);
    if (st == SY_OK)
        st = prof_number(r, root, "launch_sync_s", "", &p->launch_sync_s);
    if (st == SY_OK && isnan(p->launch_sync_s))
        p->launch_sync_s = 0;
    if (st != SY_OK)
        return st;
    p->idle_w = p->active_w = NAN;
    const cJSON *power = cJSON_GetObjectItemCaseSensitive(root, "power");
    if (power) {
        if (!cJSON_IsObject(power))
            return prof_fail(r, "power: expected an object");
        st = prof_number(r, power, "idle_w", "power.", &p->idle_w);
        if (st == SY_OK)
            st = prof_number(r, power, "active_w", "power.", &p->active_w);
        if (st != SY_OK)
            return st;
    }
    const cJSON *ops = cJSON_GetObjectItemCaseSensitive(root, "ops");
    const cJSON *links = cJSON_GetObjectItemCaseSensitive(root, "links");
    if (ops && !cJSON_IsArray(ops))
        return prof_fail(r, "ops: expected an array");
    if (links && !cJSON_IsArray(links))
        return prof_fail(r, "links: expected an array");
    int n_ops = ops ? cJSON_GetArraySize(ops) : 0;
    int n_links = links ? cJSON_GetArraySize(links) : 0;
    p->ops = calloc((size_t)n_ops + 1, sizeof *p->ops);
    p->links = calloc((size_t)n_links + 1, sizeof *p->links);
    if (!p->ops || !p->links)
        return SY_E_NO_MEMORY;
    for (int i = 0; i < n_ops; i++) {
        p->n_ops++; /* counted first so that cleanup frees its points */
        st = prof_read_op(r, cJSON_GetArrayItem(ops, i), (uint32_t)i, &p->ops[i]);
        if (st != SY_OK)
            return st;
    }
    for (int i = 0; i < n_links; i++) {
        st = prof_read_link(r, cJSON_GetArrayItem(links, i), (uint32_t)i, &p->links[i]);
        if (st != SY_OK)
            return st;
        p->n_links++;
    }
    return SY_OK;
}

sy_status sy__profile_parse(const char *json, size_t len, const char *origin,
                            sy__profile **out_profile, char *err, size_t err_size)
{
    *out_profile = NULL;
    prof_reader r = {.origin = origin ? origin : "(memory)", .err = err, .err_size = err_size};
    cJSON *root = cJSON_ParseWithLength(json, len);
    if (!root) {
        const char *at = cJSON_GetErrorPtr();
        long off = at && at >= json && at <= json + len ? (long)(at - json) : -1;
        return prof_fail(&r, "not valid JSON (near byte %ld)", off);
    }
    sy__profile *p = calloc(1, sizeof *p);
    if (!p) {
        cJSON_Delete(root);
        return SY_E_NO_MEMORY;
    }
    snprintf(p->origin, sizeof p->origin, "%s", r.origin);
    uint64_t h = 1469598103934665603ull;
    for (size_t i = 0; i < len; i++)
        h = (h ^ (uint8_t)json[i]) * 1099511628211ull;
    p->hash = h;
    sy_status st = prof_read(&r, root, p);
    cJSON_Delete(root);
    if (st != SY_OK) {
        sy__profile_destroy(p);
        return st;
    }
    *out_profile = p;
    return SY_OK;
}

void sy__profile_destroy(sy__profile *p)
{
    if (!p)
        return;
    for (uint32_t i = 0; i < p->n_ops; i++)
        free(p->ops[i].points);
    free(p->ops);
    free(p->links);
    free(p);
}
