/* Capability pass: asks every device whether it can run every node,
 * records each refusal with its reason, then narrows the candidates by
 * pins and policy.  A node left with no device is an error that names the
 * node and every device's reason. */
#include <fnmatch.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "plan_internal.h"

uint32_t sy__ctx_pool_add(sy__plan_ctx *c, const char *text)
{
    size_t n = strlen(text) + 1;
    if (c->pool_len + n > c->pool_cap) {
        size_t cap = c->pool_cap ? c->pool_cap : 4096;
        while (c->pool_len + n > cap)
            cap *= 2;
        char *grown = realloc(c->pool, cap);
        if (!grown)
            return SY__NONE;
        c->pool = grown;
        c->pool_cap = cap;
    }
    memcpy(c->pool + c->pool_len, text, n);
    uint32_t at = (uint32_t)c->pool_len;
    c->pool_len += n;
    return at;
}

const char *sy__support_short(uint32_t code)
{
    switch (code) {
    case SY_UNSUPPORTED_OP:
        return "op unsupported";
    case SY_UNSUPPORTED_DTYPE:
        return "dtype unsupported";
    case SY_UNSUPPORTED_SHAPE:
        return "shape unsupported";
    case SY_UNSUPPORTED_SIZE:
        return "too large";
    case SY_UNSUPPORTED_MEMORY:
        return "not enough memory";
    case SY__UNSUPPORTED_FAILED:
        return "failed at run time";
    default:
        return "refused";
    }
}

/* Appends "dev: reason: text" for every refusal of node |i| to |out|. */
static void list_refusals(const sy__plan_ctx *c, uint32_t i, char *out, size_t size)
{
    size_t len = strlen(out);
    for (uint32_t d = 0; d < c->D && len + 1 < size; d++) {
        if (c->supported[i] >> d & 1u)
            continue;
        uint32_t t = c->why_text[(size_t)i * c->D + d];
        int n = snprintf(out + len, size - len, "%s%s: %s: %s", len ? "; " : "", c->dm[d].desc.name,
                         sy__support_short(c->why_code[(size_t)i * c->D + d]),
                         t == SY__NONE ? "(no detail)" : c->pool + t);
        if (n < 0)
            break;
        len += (size_t)n < size - len ? (size_t)n : size - len - 1;
    }
}

static const char *why_of(const sy__plan_ctx *c, uint32_t i, uint32_t d)
{
    uint32_t t = c->why_text[(size_t)i * c->D + d];
    return t == SY__NONE ? "(no detail)" : c->pool + t;
}

/* The exclusion (sy_planner_exclude) of node |n| on runtime device
 * |device|, or NULL. */
static const sy__exclusion *excluded(const sy_planner *pl, const sy_node *n, uint32_t device)
{
    const char *op = sy_op_name((sy_op)n->op);
    for (uint32_t k = 0; k < pl->n_exclusions; k++) {
        const sy__exclusion *e = &pl->exclusions[k];
        if (e->device == device &&
            (fnmatch(e->glob, n->name, 0) == 0 || fnmatch(e->glob, op, 0) == 0))
            return e;
    }
    return NULL;
}

/* First pin matching node |n|'s name or op name, or -1. */
static int32_t match_pin(const sy__plan_request *req, const sy_node *n)
{
    const char *op = sy_op_name((sy_op)n->op);
    for (uint32_t k = 0; k < req->n_pins; k++)
        if (fnmatch(req->pins[k].glob, n->name, 0) == 0 || fnmatch(req->pins[k].glob, op, 0) == 0)
            return (int32_t)k;
    return -1;
}

sy_status sy__capability_run(sy__plan_ctx *c)
{
    const sy__plan_request *req = c->req;
    uint32_t D = c->D;
    uint8_t all = (uint8_t)((1u << D) - 1);
    for (uint32_t i = 0; i < c->n_nodes; i++) {
        const sy_node *n = sy_graph_node(c->g, i);
        c->pin_of[i] = -1;
        if (sy_op_is_view(n->op)) {
            c->supported[i] = c->allowed[i] = all;
            continue;
        }
        uint8_t mask = 0;
        for (uint32_t d = 0; d < D; d++) {
            sy_support why;
            c->why_text[(size_t)i * D + d] = SY__NONE;
            const sy__exclusion *ex = NULL;
            if (sy_runtime_device_supports(c->rt, req->dev_index[d], n, &why)) {
                ex = c->pl->n_exclusions ? excluded(c->pl, n, req->dev_index[d]) : NULL;
                if (!ex) {
                    mask |= (uint8_t)(1u << d);
                    continue;
                }
                why.reason = (sy_support_reason)SY__UNSUPPORTED_FAILED;
                snprintf(why.text, sizeof why.text, "%.*s", (int)sizeof why.text - 1, ex->reason);
            }
            why.text[sizeof why.text - 1] = '\0';
            c->why_code[(size_t)i * D + d] = (uint8_t)why.reason;
            c->why_text[(size_t)i * D + d] = sy__ctx_pool_add(c, why.text);
        }
        c->supported[i] = mask;
        if (mask == 0) {
            char list[768] = "";
            list_refusals(c, i, list, sizeof list);
            return sy__planner_fail(c->pl, SY_E_UNSUPPORTED, "no device can run node '%s' (%s): %s",
                                    n->name, sy_op_name((sy_op)n->op), list);
        }
        int32_t pin = req->n_pins ? match_pin(req, n) : -1;
        if (pin >= 0) {
            uint32_t s = req->pins[pin].slot;
            if (!(mask >> s & 1u))
                return sy__planner_fail(
                    c->pl, SY_E_UNSUPPORTED,
                    "pin '%s' puts node '%s' (%s) on '%s', which refuses it: %s: %s",
                    req->pins[pin].text, n->name, sy_op_name((sy_op)n->op), c->dm[s].desc.name,
                    sy__support_short(c->why_code[(size_t)i * D + s]), why_of(c, i, s));
            c->pin_of[i] = pin;
            c->allowed[i] = (uint8_t)(1u << s);
            continue;
        }
        uint32_t s = req->policy_slot;
        switch (req->policy) {
        case SY__POLICY_CPU_ONLY:
            if (!(mask >> s & 1u))
                return sy__planner_fail(
                    c->pl, SY_E_UNSUPPORTED, "policy cpu-only: '%s' refuses node '%s' (%s): %s: %s",
                    c->dm[s].desc.name, n->name, sy_op_name((sy_op)n->op),
                    sy__support_short(c->why_code[(size_t)i * D + s]), why_of(c, i, s));
            c->allowed[i] = (uint8_t)(1u << s);
            break;
        case SY__POLICY_PREFER:
            c->allowed[i] = (mask >> s & 1u) ? (uint8_t)(1u << s) : mask;
            break;
        case SY__POLICY_LATENCY:
        case SY__POLICY_ENERGY:
            c->allowed[i] = mask;
            break;
        }
    }
    return SY_OK;
}
