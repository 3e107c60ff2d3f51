/* Checking sy_plan_options against the runtime's devices: device list,
 * policy, pins, memory budgets.  Every error names the option as given. */
#include <ctype.h>
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "plan_internal.h"

void sy_plan_options_init(sy_plan_options *opts)
{
    if (!opts)
        return;
    memset(opts, 0, sizeof *opts);
    opts->struct_size = sizeof *opts;
    opts->algorithm = SY_PLAN_AUTO;
}

static uint64_t mix(uint64_t h, uint64_t v)
{
    h ^= v + 0x9e3779b97f4a7c15ull + (h << 6) + (h >> 2);
    return h * 0xff51afd7ed558ccdull;
}

static uint64_t mix_str(uint64_t h, const char *s)
{
    for (; *s; s++)
        h = (h ^ (uint8_t)*s) * 1099511628211ull;
    return mix(h, 0xabu);
}

/* Slot of device |name| among the request's devices, or SY__NONE. */
static uint32_t find_slot(const sy_planner *pl, const sy__plan_request *req, const char *name,
                          size_t len)
{
    for (uint32_t s = 0; s < req->n_dev; s++) {
        sy_device_desc d;
        if (sy_runtime_query_device(pl->rt, req->dev_index[s], &d) == SY_OK &&
            strlen(d.name) == len && strncmp(d.name, name, len) == 0)
            return s;
    }
    return SY__NONE;
}

static void list_devices(const sy_planner *pl, const sy__plan_request *req, char *out, size_t size)
{
    size_t len = 0;
    out[0] = '\0';
    for (uint32_t s = 0; s < req->n_dev && len + 1 < size; s++) {
        sy_device_desc d;
        sy_runtime_query_device(pl->rt, req->dev_index[s], &d);
        int n = snprintf(out + len, size - len, "%s%s", s ? ", " : "", d.name);
        if (n < 0)
            break;
        len += (size_t)n < size - len ? (size_t)n : size - len - 1;
    }
}

static sy_status resolve_devices(sy_planner *pl, const char *list, sy__plan_request *req)
{
    uint32_t n_rt = sy_runtime_device_count(pl->rt);
    if (!list) {
        if (n_rt == 0)
            return sy__planner_fail(pl, SY_E_NOT_FOUND, "the runtime has no devices to plan on");
        if (n_rt > SY__MAX_PLAN_DEVICES)
            return sy__planner_fail(pl, SY_E_LIMIT,
                                    "the runtime has %u devices; the planner takes at most %u "
                                    "(choose with the devices option)",
                                    n_rt, SY__MAX_PLAN_DEVICES);
        req->n_dev = n_rt;
        for (uint32_t i = 0; i < n_rt; i++)
            req->dev_index[i] = i;
        return SY_OK;
    }
    const char *at = list;
    while (*at) {
        const char *end = strchr(at, ',');
        size_t len = end ? (size_t)(end - at) : strlen(at);
        char name[SY_NAME_MAX];
        if (len == 0 || len >= sizeof name)
            return sy__planner_fail(pl, SY_E_INVALID_ARG, "devices '%s': empty or overlong name",
                                    list);
        memcpy(name, at, len);
        name[len] = '\0';
        uint32_t idx;
        if (sy_runtime_find_device(pl->rt, name, &idx) != SY_OK) {
            sy__plan_request all = {.n_dev =
                                        n_rt < SY__MAX_PLAN_DEVICES ? n_rt : SY__MAX_PLAN_DEVICES};
            for (uint32_t i = 0; i < all.n_dev; i++)
                all.dev_index[i] = i;
            char known[256];
            list_devices(pl, &all, known, sizeof known);
            return sy__planner_fail(pl, SY_E_NOT_FOUND, "devices: no device '%s' (there are: %s)",
                                    name, known);
        }
        if (find_slot(pl, req, name, len) != SY__NONE)
            return sy__planner_fail(pl, SY_E_INVALID_ARG, "devices: '%s' is listed twice", name);
        if (req->n_dev == SY__MAX_PLAN_DEVICES)
            return sy__planner_fail(pl, SY_E_LIMIT, "devices: at most %u devices",
                                    SY__MAX_PLAN_DEVICES);
        req->dev_index[req->n_dev++] = idx;
        at = end ? end + 1 : at + len;
    }
    if (req->n_dev == 0)
        return sy__planner_fail(pl, SY_E_INVALID_ARG, "devices: the list is empty");
    return SY_OK;
}

static sy_status resolve_policy(sy_planner *pl, const char *policy, sy__plan_request *req)
{
    char known[256] = "";
    if (!policy || strcmp(policy, "latency") == 0) {
        req->policy = SY__POLICY_LATENCY;
        snprintf(req->policy_text, sizeof req->policy_text, "latency");
        return SY_OK;
    }
    if (strcmp(policy, "energy") == 0) {
        req->policy = SY__POLICY_ENERGY;
        snprintf(req->policy_text, sizeof req->policy_text, "energy");
        return SY_OK;
    }
    if (strcmp(policy, "cpu-only") == 0) {
        req->policy = SY__POLICY_CPU_ONLY;
        uint32_t s = find_slot(pl, req, "cpu", 3);
        for (uint32_t k = 0; s == SY__NONE && k < req->n_dev; k++) {
            sy_device_desc d;
            sy_runtime_query_device(pl->rt, req->dev_index[k], &d);
            if (d.kind == SY_DEVICE_CPU)
                s = k;
        }
        if (s == SY__NONE) {
            list_devices(pl, req, known, sizeof known);
            return sy__planner_fail(pl, SY_E_NOT_FOUND, "policy cpu-only: no CPU device among %s",
                                    known);
        }
        req->policy_slot = s;
        snprintf(req->policy_text, sizeof req->policy_text, "cpu-only");
        return SY_OK;
    }
    if (strncmp(policy, "prefer:", 7) == 0) {
        const char *name = policy + 7;
        uint32_t s = find_slot(pl, req, name, strlen(name));
        if (s == SY__NONE) {
            list_devices(pl, req, known, sizeof known);
            return sy__planner_fail(pl, SY_E_NOT_FOUND, "policy '%s': no device '%s' among %s",
                                    policy, name, known);
        }
        req->policy = SY__POLICY_PREFER;
        req->policy_slot = s;
        snprintf(req->policy_text, sizeof req->policy_text, "prefer:%s", name);
        return SY_OK;
    }
    return sy__planner_fail(pl, SY_E_INVALID_ARG,
                            "unknown policy '%s' (latency, energy, cpu-only or prefer:DEVICE)",
                            policy);
}

/* Splits "LEFT=DEVICE" at its last '=' into a slot. */
static sy_status split_assignment(sy_planner *pl, const char *what, const char *text,
                                  sy__plan_request *req, size_t *out_left_len, uint32_t *out_slot)
{
    const char *eq = text ? strrchr(text, '=') : NULL;
    if (!eq || eq == text || !eq[1])
        return sy__planner_fail(pl, SY_E_INVALID_ARG, "%s '%s': expected %s", what,
                                text ? text : "(null)",
                                strcmp(what, "pin") == 0 ? "PATTERN=DEVICE" : "DEVICE=SIZE");
    *out_left_len = (size_t)(eq - text);
    *out_slot = find_slot(pl, req, eq + 1, strlen(eq + 1));
    if (*out_slot == SY__NONE) {
        char known[256];
        list_devices(pl, req, known, sizeof known);
        return sy__planner_fail(pl, SY_E_NOT_FOUND, "%s '%s': no device '%s' among %s", what, text,
                                eq + 1, known);
    }
    return SY_OK;
}

static sy_status resolve_pins(sy_planner *pl, const sy_plan_options *o, sy__plan_request *req)
{
    if (o->n_pins == 0)
        return SY_OK;
    if (!o->pins)
        return sy__planner_fail(pl, SY_E_INVALID_ARG, "n_pins is %u but pins is NULL", o->n_pins);
    req->pins = calloc(o->n_pins, sizeof *req->pins);
    if (!req->pins)
        return sy__planner_fail(pl, SY_E_NO_MEMORY, "out of memory reading pins");
    for (uint32_t k = 0; k < o->n_pins; k++) {
        size_t len;
        uint32_t slot;
        sy_status st = split_assignment(pl, "pin", o->pins[k], req, &len, &slot);
        if (st != SY_OK)
            return st;
        sy__pin *p = &req->pins[req->n_pins++];
        if (len >= sizeof p->glob || strlen(o->pins[k]) >= sizeof p->text)
            return sy__planner_fail(pl, SY_E_INVALID_ARG, "pin '%s': too long", o->pins[k]);
        memcpy(p->glob, o->pins[k], len);
        p->glob[len] = '\0';
        p->slot = slot;
        snprintf(p->text, sizeof p->text, "%s", o->pins[k]);
    }
    return SY_OK;
}

/* "512M", "1.5G", "4096" (bytes), optional "iB"/"B" after the suffix. */
bool sy__parse_size(const char *s, uint64_t *out)
{
    char *end;
    double v = strtod(s, &end);
    if (end == s || !isfinite(v) || v < 0)
        return false;
    double scale = 1.0;
    switch (toupper((unsigned char)*end)) {
    case 'K':
        scale = 1024.0;
        end++;
        break;
    case 'M':
        scale = 1024.0 * 1024.0;
        end++;
        break;
    case 'G':
        scale = 1024.0 * 1024.0 * 1024.0;
        end++;
        break;
    case 'T':
        scale = 1024.0 * 1024.0 * 1024.0 * 1024.0;
        end++;
        break;
    default:
        break;
    }
    if (scale > 1.0 && (strcmp(end, "iB") == 0 || strcmp(end, "B") == 0))
        end += strlen(end);
    if (*end || v * scale >= 1.8e19)
        return false;
    *out = (uint64_t)(v * scale);
    return true;
}

static sy_status resolve_budgets(sy_planner *pl, const sy_plan_options *o, sy__plan_request *req)
{
    for (uint32_t s = 0; s < req->n_dev; s++) {
        sy_device_desc d;
        sy_runtime_query_device(pl->rt, req->dev_index[s], &d);
        /* What the device reports, less a tenth for its runtime and others. */
        req->budget[s] = d.memory_bytes - d.memory_bytes / 10;
    }
    if (o->n_mem && !o->mem)
        return sy__planner_fail(pl, SY_E_INVALID_ARG, "n_mem is %u but mem is NULL", o->n_mem);
    for (uint32_t k = 0; k < o->n_mem; k++) {
        size_t len;
        uint32_t slot;
        /* "DEVICE=SIZE": the device is on the left, so swap the roles. */
        const char *eq = o->mem[k] ? strchr(o->mem[k], '=') : NULL;
        if (!eq || eq == o->mem[k] || !eq[1])
            return sy__planner_fail(pl, SY_E_INVALID_ARG, "mem '%s': expected DEVICE=SIZE",
                                    o->mem[k] ? o->mem[k] : "(null)");
        len = (size_t)(eq - o->mem[k]);
        slot = find_slot(pl, req, o->mem[k], len);
        if (slot == SY__NONE) {
            char known[256];
            list_devices(pl, req, known, sizeof known);
            return sy__planner_fail(pl, SY_E_NOT_FOUND, "mem '%s': no device '%.*s' among %s",
                                    o->mem[k], (int)len, o->mem[k], known);
        }
        uint64_t size;
        if (!sy__parse_size(eq + 1, &size) || size == 0)
            return sy__planner_fail(pl, SY_E_INVALID_ARG,
                                    "mem '%s': '%s' is not a size (bytes, or with K, M, G, T)",
                                    o->mem[k], eq + 1);
        req->budget[slot] = size;
        req->budget_given[slot] = true;
    }
    return SY_OK;
}

sy_status sy__plan_request_resolve(sy_planner *pl, const sy_plan_options *o, sy__plan_request *req)
{
    memset(req, 0, sizeof *req);
    req->algorithm = o->algorithm;
    req->no_cache = o->no_cache;
    if ((uint32_t)o->algorithm > SY_PLAN_EXHAUSTIVE)
        return sy__planner_fail(pl, SY_E_INVALID_ARG, "unknown algorithm %u",
                                (unsigned)o->algorithm);
    sy_status st = resolve_devices(pl, o->devices, req);
    if (st == SY_OK)
        st = resolve_policy(pl, o->policy, req);
    if (st == SY_OK)
        st = resolve_pins(pl, o, req);
    if (st == SY_OK)
        st = resolve_budgets(pl, o, req);
    if (st != SY_OK)
        return st;
    uint64_t h = mix(0x5eed, req->n_dev);
    for (uint32_t s = 0; s < req->n_dev; s++)
        h = mix(mix(h, req->dev_index[s]), req->budget[s]);
    h = mix(mix(mix_str(h, req->policy_text), req->policy_slot), req->algorithm);
    for (uint32_t k = 0; k < req->n_pins; k++)
        h = mix(mix_str(h, req->pins[k].glob), req->pins[k].slot);
    req->hash = h;
    return SY_OK;
}
