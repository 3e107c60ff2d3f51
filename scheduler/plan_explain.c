/* Explaining a plan: the reason text of each node, and the plan as a
 * table, as JSON (cJSON) or as Graphviz DOT. */
#include <cjson/cJSON.h>
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "plan_internal.h"

const char *sy__reason_name(uint32_t reason)
{
    switch (reason) {
    case SY__REASON_VIEW:
        return "view";
    case SY__REASON_PINNED:
        return "pinned";
    case SY__REASON_CPU_ONLY:
        return "cpu-only";
    case SY__REASON_PREFERRED:
        return "preferred";
    case SY__REASON_FALLBACK:
        return "fallback";
    case SY__REASON_ONLY_DEVICE:
        return "only-device";
    case SY__REASON_SINGLE:
        return "single";
    case SY__REASON_CHEAPEST:
        return "cheapest";
    default:
        return "unknown";
    }
}

static const char *fmt_time(double s, char *buf, size_t size)
{
    if (!isfinite(s))
        snprintf(buf, size, "inf");
    else if (s < 1e-6)
        snprintf(buf, size, "%.0f ns", s * 1e9);
    else if (s < 1e-3)
        snprintf(buf, size, "%.1f us", s * 1e6);
    else if (s < 1.0)
        snprintf(buf, size, "%.2f ms", s * 1e3);
    else
        snprintf(buf, size, "%.3f s", s);
    return buf;
}

static const char *fmt_energy(double j, char *buf, size_t size)
{
    if (!isfinite(j))
        snprintf(buf, size, "inf");
    else if (j < 1e-6)
        snprintf(buf, size, "%.0f nJ", j * 1e9);
    else if (j < 1e-3)
        snprintf(buf, size, "%.1f uJ", j * 1e6);
    else if (j < 1.0)
        snprintf(buf, size, "%.2f mJ", j * 1e3);
    else
        snprintf(buf, size, "%.3f J", j);
    return buf;
}

/* Energy is shown where it is known (every device's power measured) or
 * asked for (the energy policy, default figures flagged). */
static bool show_energy(const sy_plan *p)
{
    return p->energy_measured || strcmp(p->policy, "energy") == 0;
}

static const char *fmt_bytes(uint64_t b, char *buf, size_t size)
{
    static const char *const units[] = {"B", "KiB", "MiB", "GiB", "TiB"};
    double v = (double)b;
    unsigned u = 0;
    while (v >= 1024.0 && u + 1 < sizeof units / sizeof units[0]) {
        v /= 1024.0;
        u++;
    }
    if (u == 0)
        snprintf(buf, size, "%llu B", (unsigned long long)b);
    else
        snprintf(buf, size, "%.1f %s", v, units[u]);
    return buf;
}

void sy__plan_format_reason(const sy_plan *p, uint32_t i, char *out, size_t size)
{
    const sy__plan_node *pn = &p->nodes[i];
    const char *op = sy_op_name((sy_op)pn->op);
    char refusal[224] = "";
    if (pn->refusing_dev != SY__NO_DEVICE)
        snprintf(refusal, sizeof refusal, "%s refuses %s (%s%s%s)", p->dev_name[pn->refusing_dev],
                 op, sy__support_short(pn->refusal_code),
                 pn->refusal != SY__NONE && p->pool[pn->refusal] ? ": " : "",
                 pn->refusal != SY__NONE ? p->pool + pn->refusal : "");
    char a[32], b[32];
    switch (pn->reason) {
    case SY__REASON_VIEW:
        snprintf(out, size, "view: follows its input");
        break;
    case SY__REASON_PINNED:
        snprintf(out, size, "pinned by '%s'", pn->pin >= 0 ? p->pins[pn->pin] : "?");
        break;
    case SY__REASON_CPU_ONLY:
        snprintf(out, size, "policy cpu-only");
        break;
    case SY__REASON_PREFERRED:
        snprintf(out, size, "preferred device");
        break;
    case SY__REASON_FALLBACK:
        snprintf(out, size, "fallback: %s", refusal);
        break;
    case SY__REASON_ONLY_DEVICE:
        if (pn->refusing_dev != SY__NO_DEVICE)
            snprintf(out, size, "only device supporting it: %s", refusal);
        else if (pn->flags & SY__PN_EVICTED)
            snprintf(out, size, "only device left within the memory budgets");
        else
            snprintf(out, size, "only device allowed");
        break;
    case SY__REASON_SINGLE:
        snprintf(out, size, "only device considered");
        break;
    case SY__REASON_CHEAPEST:
        if (strcmp(p->policy, "energy") == 0) {
            fmt_energy(pn->local_s, a, sizeof a);
            fmt_energy(pn->alt_s, b, sizeof b);
        } else {
            fmt_time(pn->local_s, a, sizeof a);
            fmt_time(pn->alt_s, b, sizeof b);
        }
        snprintf(out, size, "cheapest: %s vs %s on %s%s%s%s", a, b,
                 pn->alt_dev != SY__NO_DEVICE ? p->dev_name[pn->alt_dev] : "?",
                 refusal[0] ? "; " : "", refusal,
                 pn->flags & SY__PN_EVICTED ? "; kept off a device over its memory budget" : "");
        break;
    default:
        snprintf(out, size, "?");
        break;
    }
}

static void explain_table(const sy_plan *p, FILE *f)
{
    char a[32], b[32], c[32], tb[32];
    fprintf(f, "plan: %u nodes on %u device%s (", p->n_nodes, p->n_dev, p->n_dev == 1 ? "" : "s");
    for (uint32_t d = 0; d < p->n_dev; d++)
        fprintf(f, "%s%s", d ? ", " : "", p->dev_name[d]);
    fprintf(f, "), policy %s\n", p->policy);
    for (uint32_t d = 0; d < p->n_dev; d++)
        fprintf(f, "profile %-12s %s\n", p->dev_name[d],
                p->dev_profile[d][0] ? p->dev_profile[d] : "none (roofline defaults)");
    fprintf(f, "algorithm: %s; planned in %s\n", p->algorithm,
            fmt_time(p->planning_s, a, sizeof a));
    const bool overlapped = p->predicted_s < (p->compute_s + p->transfer_s) * (1 - 1e-9);
    fprintf(f, "predicted step: %s %s compute %s + %u transfer%s %s (%s)\n",
            fmt_time(p->predicted_s, a, sizeof a),
            overlapped ? "overlapped; in a row:" : "=", fmt_time(p->compute_s, b, sizeof b),
            p->n_transfers, p->n_transfers == 1 ? "" : "s", fmt_time(p->transfer_s, c, sizeof c),
            fmt_bytes(p->transfer_bytes, tb, sizeof tb));
    bool energy = show_energy(p);
    if (energy)
        fprintf(f, "predicted energy: %s = compute %s + transfers %s (%s)\n",
                fmt_energy(p->predicted_j, a, sizeof a), fmt_energy(p->compute_j, b, sizeof b),
                fmt_energy(p->transfer_j, c, sizeof c),
                p->energy_measured ? "power from the profiles"
                                   : "default power figures for devices without them");
    if (p->n_unmeasured)
        fprintf(f, "unmeasured: %u node%s costed by the roofline default (no profile entry)\n",
                p->n_unmeasured, p->n_unmeasured == 1 ? "" : "s");
    fprintf(f, "\nnodes:\n  %-5s %-32s %-11s %-12s %-10s %s%s\n", "#", "node", "op", "device",
            "time", energy ? "energy     " : "", "reason");
    for (uint32_t i = 0; i < p->n_nodes; i++) {
        const sy__plan_node *pn = &p->nodes[i];
        char reason[256];
        sy__plan_format_reason(p, i, reason, sizeof reason);
        char ej[32] = "";
        if (energy)
            snprintf(ej, sizeof ej, "%-10s ",
                     pn->flags & SY__PN_VIEW ? "-" : fmt_energy(pn->predicted_j, b, sizeof b));
        fprintf(f, "  %-5u %-32s %-11s %-12s %-10s %s%s%s\n", i, pn->name,
                sy_op_name((sy_op)pn->op), p->dev_name[pn->dev],
                pn->flags & SY__PN_VIEW ? "-" : fmt_time(pn->predicted_s, a, sizeof a), ej, reason,
                pn->flags & SY__PN_UNMEASURED ? " [unmeasured]" : "");
    }
    fprintf(f, "\nsteps:\n");
    for (uint32_t k = 0; k < p->n_steps; k++) {
        const sy__plan_step *s = &p->steps[k];
        char ej[40] = "";
        if (energy)
            snprintf(ej, sizeof ej, ", %s", fmt_energy(s->predicted_j, c, sizeof c));
        if (s->kind == SY_PLAN_STEP_SEGMENT) {
            const char *first = p->nodes[p->order[s->first]].name;
            const char *last = p->nodes[p->order[s->first + s->count - 1]].name;
            if (s->count == 1)
                fprintf(f, "  %-5u segment   %-24s 1 node (%s)  %s%s\n", k + 1,
                        p->dev_name[s->dev], first, fmt_time(s->predicted_s, a, sizeof a), ej);
            else
                fprintf(f, "  %-5u segment   %-24s %u nodes (%s .. %s)  %s%s\n", k + 1,
                        p->dev_name[s->dev], s->count, first, last,
                        fmt_time(s->predicted_s, a, sizeof a), ej);
        } else {
            char route[2 * SY_NAME_MAX + 8];
            snprintf(route, sizeof route, "%s -> %s", p->dev_name[s->src], p->dev_name[s->dev]);
            fprintf(f, "  %-5u transfer  %-24s %s (%s%s)  %s%s\n", k + 1, route, s->tensor_name,
                    fmt_bytes(s->bytes, a, sizeof a), s->zero_copy ? ", zero-copy" : "",
                    fmt_time(s->predicted_s, b, sizeof b), ej);
        }
    }
    fprintf(f, "\nmemory:\n");
    for (uint32_t k = 0; k < p->n_dev; k++) {
        const sy_plan_memory *m = &p->mem[k];
        char w[32], kv[32], act[32], bud[32];
        fprintf(f, "  %-12s weights %s, kv %s, activations %s (no reuse), budget %s\n",
                p->dev_name[k], fmt_bytes(m->weight_bytes, w, sizeof w),
                fmt_bytes(m->kv_bytes, kv, sizeof kv),
                fmt_bytes(m->activation_bytes, act, sizeof act),
                m->budget_bytes ? fmt_bytes(m->budget_bytes, bud, sizeof bud) : "unlimited");
    }
}

static cJSON *json_plan(const sy_plan *p)
{
    cJSON *root = cJSON_CreateObject();
    if (!root)
        return NULL;
    cJSON_AddStringToObject(root, "policy", p->policy);
    cJSON_AddStringToObject(root, "algorithm", p->algorithm);
    cJSON_AddNumberToObject(root, "planning_s", p->planning_s);
    cJSON_AddNumberToObject(root, "predicted_s", p->predicted_s);
    cJSON_AddNumberToObject(root, "compute_s", p->compute_s);
    cJSON_AddNumberToObject(root, "transfer_s", p->transfer_s);
    cJSON_AddNumberToObject(root, "transfer_bytes", (double)p->transfer_bytes);
    cJSON_AddNumberToObject(root, "unmeasured_nodes", p->n_unmeasured);
    cJSON_AddNumberToObject(root, "predicted_j", p->predicted_j);
    cJSON_AddNumberToObject(root, "compute_j", p->compute_j);
    cJSON_AddNumberToObject(root, "transfer_j", p->transfer_j);
    cJSON_AddBoolToObject(root, "energy_measured", p->energy_measured);
    cJSON *devs = cJSON_AddArrayToObject(root, "devices");
    for (uint32_t d = 0; devs && d < p->n_dev; d++) {
        cJSON *o = cJSON_CreateObject();
        cJSON_AddNumberToObject(o, "index", p->dev_index[d]);
        cJSON_AddStringToObject(o, "name", p->dev_name[d]);
        if (p->dev_profile[d][0])
            cJSON_AddStringToObject(o, "profile", p->dev_profile[d]);
        else
            cJSON_AddNullToObject(o, "profile");
        cJSON_AddNumberToObject(o, "weight_bytes", (double)p->mem[d].weight_bytes);
        cJSON_AddNumberToObject(o, "kv_bytes", (double)p->mem[d].kv_bytes);
        cJSON_AddNumberToObject(o, "activation_bytes", (double)p->mem[d].activation_bytes);
        cJSON_AddNumberToObject(o, "budget_bytes", (double)p->mem[d].budget_bytes);
        cJSON_AddItemToArray(devs, o);
    }
    cJSON *nodes = cJSON_AddArrayToObject(root, "nodes");
    for (uint32_t i = 0; nodes && i < p->n_nodes; i++) {
        const sy__plan_node *pn = &p->nodes[i];
        char reason[256];
        sy__plan_format_reason(p, i, reason, sizeof reason);
        cJSON *o = cJSON_CreateObject();
        cJSON_AddNumberToObject(o, "index", i);
        cJSON_AddStringToObject(o, "name", pn->name);
        cJSON_AddStringToObject(o, "op", sy_op_name((sy_op)pn->op));
        cJSON_AddStringToObject(o, "device", p->dev_name[pn->dev]);
        cJSON_AddNumberToObject(o, "predicted_s", pn->predicted_s);
        cJSON_AddNumberToObject(o, "predicted_j", pn->predicted_j);
        cJSON_AddBoolToObject(o, "view", (pn->flags & SY__PN_VIEW) != 0);
        cJSON_AddBoolToObject(o, "unmeasured", (pn->flags & SY__PN_UNMEASURED) != 0);
        cJSON_AddStringToObject(o, "reason_code", sy__reason_name(pn->reason));
        cJSON_AddStringToObject(o, "reason", reason);
        cJSON_AddItemToArray(nodes, o);
    }
    cJSON *steps = cJSON_AddArrayToObject(root, "steps");
    for (uint32_t k = 0; steps && k < p->n_steps; k++) {
        const sy__plan_step *s = &p->steps[k];
        cJSON *o = cJSON_CreateObject();
        bool seg = s->kind == SY_PLAN_STEP_SEGMENT;
        cJSON_AddStringToObject(o, "kind", seg ? "segment" : "transfer");
        if (seg) {
            cJSON_AddStringToObject(o, "device", p->dev_name[s->dev]);
            cJSON *list = cJSON_AddArrayToObject(o, "nodes");
            for (uint32_t q = 0; list && q < s->count; q++)
                cJSON_AddItemToArray(list, cJSON_CreateNumber(p->order[s->first + q]));
        } else {
            cJSON_AddStringToObject(o, "tensor", s->tensor_name);
            cJSON_AddNumberToObject(o, "tensor_id", s->tensor);
            cJSON_AddStringToObject(o, "from", p->dev_name[s->src]);
            cJSON_AddStringToObject(o, "to", p->dev_name[s->dev]);
            cJSON_AddNumberToObject(o, "bytes", (double)s->bytes);
            cJSON_AddBoolToObject(o, "zero_copy", s->zero_copy);
        }
        cJSON_AddNumberToObject(o, "predicted_s", s->predicted_s);
        cJSON_AddNumberToObject(o, "predicted_j", s->predicted_j);
        cJSON_AddItemToArray(steps, o);
    }
    return root;
}

/* Writes |s| as a DOT string literal body (quotes and backslashes escaped). */
static void dot_escape(FILE *f, const char *s)
{
    for (; *s; s++) {
        if (*s == '"' || *s == '\\')
            fputc('\\', f);
        fputc(*s, f);
    }
}

static void explain_dot(const sy_plan *p, FILE *f)
{
    static const char *const colors[] = {"#dbe9f6", "#fde2c8", "#d9f0d3", "#e8dff5",
                                         "#fbe0e6", "#f6f0c8", "#d4f1f1", "#eeeeee"};
    char a[32], b[32];
    fprintf(f, "digraph plan {\n  rankdir=TB;\n  node [shape=box, style=filled, fontsize=10];\n");
    fprintf(f, "  label=\"policy %s, predicted %s\";\n", p->policy,
            fmt_time(p->predicted_s, a, sizeof a));
    for (uint32_t d = 0; d < p->n_dev; d++) {
        fprintf(f, "  subgraph cluster_%u {\n    label=\"", d);
        dot_escape(f, p->dev_name[d]);
        fprintf(f, "\";\n    style=rounded;\n");
        for (uint32_t i = 0; i < p->n_nodes; i++) {
            const sy__plan_node *pn = &p->nodes[i];
            if (pn->dev != d)
                continue;
            char reason[256];
            sy__plan_format_reason(p, i, reason, sizeof reason);
            fprintf(f, "    n%u [label=\"", i);
            dot_escape(f, pn->name);
            fprintf(f, "\\n%s", sy_op_name((sy_op)pn->op));
            if (!(pn->flags & SY__PN_VIEW))
                fprintf(f, " %s", fmt_time(pn->predicted_s, a, sizeof a));
            fprintf(f, "\", fillcolor=\"%s\"%s, tooltip=\"", colors[d % 8],
                    pn->flags & SY__PN_VIEW ? ", shape=ellipse" : "");
            dot_escape(f, reason);
            fprintf(f, "\"];\n");
        }
        fprintf(f, "  }\n");
    }
    for (uint32_t i = 0; i < p->n_nodes; i++) {
        const sy__plan_node *pn = &p->nodes[i];
        for (uint32_t j = 0; j < pn->n_in; j++) {
            uint32_t q = pn->in[j];
            if (q == SY__NONE)
                continue;
            if (p->nodes[q].dev == pn->dev)
                fprintf(f, "  n%u -> n%u;\n", q, i);
            else
                fprintf(f, "  n%u -> n%u [color=red, fontcolor=red, label=\"transfer\"];\n", q, i);
        }
    }
    for (uint32_t k = 0; k < p->n_steps; k++) {
        const sy__plan_step *s = &p->steps[k];
        if (s->kind != SY_PLAN_STEP_TRANSFER)
            continue;
        fprintf(f, "  // transfer %s: %s -> %s, %s, %s\n", s->tensor_name, p->dev_name[s->src],
                p->dev_name[s->dev], fmt_bytes(s->bytes, a, sizeof a),
                fmt_time(s->predicted_s, b, sizeof b));
    }
    fprintf(f, "}\n");
}

sy_status sy_plan_explain(const sy_plan *plan, sy_plan_format format, FILE *f)
{
    if (!plan || !f)
        return SY_E_INVALID_ARG;
    switch (format) {
    case SY_PLAN_FORMAT_TABLE:
        explain_table(plan, f);
        break;
    case SY_PLAN_FORMAT_JSON: {
        cJSON *root = json_plan(plan);
        char *text = root ? cJSON_Print(root) : NULL;
        cJSON_Delete(root);
        if (!text)
            return SY_E_NO_MEMORY;
        fputs(text, f);
        fputc('\n', f);
        cJSON_free(text);
        break;
    }
    case SY_PLAN_FORMAT_DOT:
        explain_dot(plan, f);
        break;
    default:
        return SY_E_INVALID_ARG;
    }
    return ferror(f) ? SY_E_IO : SY_OK;
}

sy_status sy_plan_explain_to_buffer(const sy_plan *plan, sy_plan_format format, char *out,
                                    size_t cap, size_t *out_len)
{
    if (out_len)
        *out_len = 0;
    if (!plan || !out_len || (!out && cap))
        return SY_E_INVALID_ARG;
    char *text = NULL;
    size_t len = 0;
    FILE *f = open_memstream(&text, &len);
    if (!f)
        return SY_E_NO_MEMORY;
    sy_status st = sy_plan_explain(plan, format, f);
    if (fclose(f) != 0 && st == SY_OK)
        st = SY_E_NO_MEMORY;
    if (st == SY_OK) {
        *out_len = len;
        if (len + 1 > cap)
            st = SY_E_LIMIT;
        else
            memcpy(out, text, len + 1);
    }
    if (st != SY_OK && out && cap)
        out[0] = '\0';
    free(text);
    return st;
}
