/* Plans as objects: queries, explain as table / JSON / DOT, buffers too
 * small, reference counts, and the plan cache (signatures, shape classes,
 * options and profiles in the key). */
#include <cjson/cJSON.h>
#include <criterion/criterion.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "plan_internal.h"
#include "sched_test_util.h"

static const st_decoder_shape decoder = {
    .n_layer = 2,
    .n_embd = 64,
    .n_head = 4,
    .n_head_kv = 2,
    .n_ff = 128,
    .n_vocab = 256,
    .n_ctx = 64,
    .n_tokens = 1,
    .n_past = 5,
    .kv_type = SY_DTYPE_F16,
    .with_data = false,
};

static sy_planner *mixed_planner(sy_runtime *rt)
{
    sy_planner *pl = NULL;
    cr_assert_eq(sy_planner_create(rt, &pl), SY_OK);
    char path[512];
    cr_assert_eq(
        sy_planner_load_profile(pl, st_fixture("testdev_fast_matmul.json", path, sizeof path)),
        SY_OK, "%s", sy_planner_last_error(pl));
    return pl;
}

/* The plan of |g| as text in |format|, malloc'ed. */
static char *explain(const sy_plan *plan, sy_plan_format format)
{
    size_t len = 0;
    cr_assert_eq(sy_plan_explain_to_buffer(plan, format, NULL, 0, &len), SY_E_LIMIT);
    cr_assert_gt(len, 0u);
    char *text = malloc(len + 1);
    size_t again = 0;
    cr_assert_eq(sy_plan_explain_to_buffer(plan, format, text, len + 1, &again), SY_OK);
    cr_assert_eq(again, len);
    cr_assert_eq(strlen(text), len);
    if (getenv("SY_TEST_DUMP_PLAN"))
        fprintf(stderr, "%s\n", text);
    return text;
}

Test(plan, explain_table_shows_summary_nodes_reasons_steps_and_memory)
{
    sy_runtime *rt = st_runtime();
    sy_planner *pl = mixed_planner(rt);
    st_graph sg;
    st_decoder_graph(&sg, &decoder, 1);
    sy_plan *plan = st_plan(pl, sg.g, NULL);
    char *text = explain(plan, SY_PLAN_FORMAT_TABLE);
    cr_assert(strstr(text, "plan: "), "%s", text);
    cr_assert(strstr(text, "policy latency"));
    cr_assert(strstr(text, "algorithm: dp ("));
    cr_assert(strstr(text, "predicted step: "));
    cr_assert(strstr(text, "blk.1.ffn_down"));
    cr_assert(strstr(text, "cheapest: "));
    cr_assert(strstr(text, " transfer  "));
    cr_assert(strstr(text, " segment   "));
    cr_assert(strstr(text, "memory:\n  cpu "));
    cr_assert(strstr(text, "[unmeasured]"), "cpu has no profile");
    free(text);
    sy_plan_release(plan);
    st_graph_free(&sg);
    sy_planner_destroy(pl);
    sy_runtime_destroy(rt);
    st_check_leaks();
}

Test(plan, explain_json_parses_and_matches_the_queries)
{
    sy_runtime *rt = st_runtime();
    sy_planner *pl = mixed_planner(rt);
    st_graph sg;
    st_decoder_graph(&sg, &decoder, 2);
    sy_plan *plan = st_plan(pl, sg.g, NULL);
    char *text = explain(plan, SY_PLAN_FORMAT_JSON);
    cJSON *root = cJSON_Parse(text);
    cr_assert_not_null(root, "not JSON:\n%s", text);
    const cJSON *nodes = cJSON_GetObjectItem(root, "nodes");
    const cJSON *steps = cJSON_GetObjectItem(root, "steps");
    cr_assert_eq((uint32_t)cJSON_GetArraySize(nodes), sy_graph_node_count(sg.g));
    cr_assert_eq((uint32_t)cJSON_GetArraySize(steps), sy_plan_step_count(plan));
    for (uint32_t i = 0; i < sy_graph_node_count(sg.g); i++) {
        sy_plan_node_info ni;
        cr_assert_eq(sy_plan_query_node(plan, i, &ni), SY_OK);
        const cJSON *n = cJSON_GetArrayItem(nodes, (int)i);
        cr_assert_str_eq(cJSON_GetObjectItem(n, "device")->valuestring, ni.device_name);
        cr_assert_str_eq(cJSON_GetObjectItem(n, "reason")->valuestring, ni.reason);
        cr_assert_str_eq(cJSON_GetObjectItem(n, "name")->valuestring, sy_graph_node(sg.g, i)->name);
    }
    sy_plan_summary s;
    sy_plan_query_summary(plan, &s);
    cr_assert_float_eq(cJSON_GetObjectItem(root, "predicted_s")->valuedouble, s.predicted_s, 1e-12);
    uint32_t transfers = 0;
    for (int k = 0; k < cJSON_GetArraySize(steps); k++)
        transfers += strcmp(cJSON_GetObjectItem(cJSON_GetArrayItem(steps, k), "kind")->valuestring,
                            "transfer") == 0;
    cr_assert_eq(transfers, s.n_transfers);
    cJSON_Delete(root);
    free(text);
    sy_plan_release(plan);
    st_graph_free(&sg);
    sy_planner_destroy(pl);
    sy_runtime_destroy(rt);
    st_check_leaks();
}

Test(plan, explain_dot_draws_a_cluster_per_device_and_red_transfer_edges)
{
    sy_runtime *rt = st_runtime();
    sy_planner *pl = mixed_planner(rt);
    st_graph sg;
    st_decoder_graph(&sg, &decoder, 3);
    sy_plan *plan = st_plan(pl, sg.g, NULL);
    char *text = explain(plan, SY_PLAN_FORMAT_DOT);
    cr_assert(strncmp(text, "digraph plan {", 14) == 0);
    cr_assert(strstr(text, "subgraph cluster_0 {"));
    cr_assert(strstr(text, "label=\"testdev\""));
    cr_assert(strstr(text, "color=red"));
    cr_assert(text[strlen(text) - 2] == '}');
    free(text);
    FILE *f = tmpfile();
    cr_assert_eq(sy_plan_explain(plan, SY_PLAN_FORMAT_DOT, f), SY_OK);
    cr_assert_gt(ftell(f), 100L);
    fclose(f);
    cr_assert_eq(sy_plan_explain(plan, (sy_plan_format)9, stderr), SY_E_INVALID_ARG);
    cr_assert_eq(sy_plan_explain(NULL, SY_PLAN_FORMAT_DOT, stderr), SY_E_INVALID_ARG);
    sy_plan_release(plan);
    st_graph_free(&sg);
    sy_planner_destroy(pl);
    sy_runtime_destroy(rt);
    st_check_leaks();
}

Test(plan, queries_reject_bad_arguments_and_describe_every_step)
{
    sy_runtime *rt = st_runtime();
    sy_planner *pl = mixed_planner(rt);
    st_graph sg;
    st_decoder_graph(&sg, &decoder, 4);
    sy_plan *plan = st_plan(pl, sg.g, NULL);
    sy_plan_node_info ni;
    cr_assert_eq(sy_plan_query_node(plan, sy_graph_node_count(sg.g), &ni), SY_E_NOT_FOUND);
    cr_assert_eq(sy_plan_query_node(NULL, 0, &ni), SY_E_INVALID_ARG);
    cr_assert_eq(sy_plan_query_node(plan, 0, NULL), SY_E_INVALID_ARG);
    sy_plan_step_info si;
    cr_assert_eq(sy_plan_query_step(plan, sy_plan_step_count(plan), &si), SY_E_NOT_FOUND);
    cr_assert_eq(sy_plan_step_count(NULL), 0u);
    uint32_t seen = 0;
    for (uint32_t k = 0; k < sy_plan_step_count(plan); k++) {
        cr_assert_eq(sy_plan_query_step(plan, k, &si), SY_OK);
        if (si.kind == SY_PLAN_STEP_SEGMENT) {
            for (uint32_t q = 0; q < si.n_nodes; q++) {
                cr_assert_eq(sy_plan_query_node(plan, si.nodes[q], &ni), SY_OK);
                cr_assert_eq(ni.device, si.device);
                cr_assert_not(ni.is_view, "views run nowhere");
            }
            seen += si.n_nodes;
        } else {
            cr_assert_neq(si.src_device, si.device);
            cr_assert_str_eq(si.tensor_name, sy_graph_tensor(sg.g, si.tensor)->name);
            cr_assert_gt(si.predicted_s, 0.0);
        }
    }
    uint32_t views = 0;
    for (uint32_t i = 0; i < sy_graph_node_count(sg.g); i++)
        views += sy_op_is_view(sy_graph_node(sg.g, i)->op);
    cr_assert_eq(seen + views, sy_graph_node_count(sg.g));
    sy_plan_memory m;
    cr_assert_eq(sy_plan_query_memory(plan, 99, &m), SY_OK);
    cr_assert_eq(m.weight_bytes + m.kv_bytes + m.activation_bytes, 0u);
    sy_plan_summary s;
    cr_assert_eq(sy_plan_query_summary(NULL, &s), SY_E_INVALID_ARG);
    sy_plan_release(plan);
    st_graph_free(&sg);
    sy_planner_destroy(pl);
    sy_runtime_destroy(rt);
    st_check_leaks();
}

Test(plan, cache_returns_the_same_plan_for_a_rebuilt_graph_of_the_same_signature)
{
    sy_runtime *rt = st_runtime();
    sy_planner *pl = mixed_planner(rt);
    st_graph a, b;
    st_decoder_graph(&a, &decoder, 5);
    st_decoder_graph(&b, &decoder, 6);
    sy_plan *pa = st_plan(pl, a.g, NULL);
    sy_plan *pb = st_plan(pl, b.g, NULL);
    cr_assert_eq(pa, pb);
    sy_planner_stats stats;
    cr_assert_eq(sy_planner_query_stats(pl, &stats), SY_OK);
    cr_assert_eq(stats.hits, 1u);
    cr_assert_eq(stats.misses, 1u);
    cr_assert_eq(stats.entries, 1u);
    sy_plan_release(pa);
    sy_plan_release(pb);
    /* The cache still holds it; a fresh lookup finds it. */
    sy_plan *pc = st_plan(pl, a.g, NULL);
    sy_plan_summary s;
    cr_assert_eq(sy_plan_query_summary(pc, &s), SY_OK);
    cr_assert_eq(s.n_nodes, sy_graph_node_count(a.g));
    sy_plan_release(pc);
    st_graph_free(&a);
    st_graph_free(&b);
    sy_planner_destroy(pl);
    sy_runtime_destroy(rt);
    st_check_leaks();
}

Test(plan, decode_steps_share_a_plan_within_a_shape_class_only)
{
    sy_runtime *rt = st_runtime();
    sy_planner *pl = mixed_planner(rt);
    st_decoder_shape s5 = decoder, s6 = decoder, s9 = decoder;
    s6.n_past = 6; /* kv length 7: class 8, as 6 */
    s9.n_past = 9; /* kv length 10: class 16 */
    st_graph a, b, c;
    st_decoder_graph(&a, &s5, 1);
    st_decoder_graph(&b, &s6, 1);
    st_decoder_graph(&c, &s9, 1);
    sy_plan *pa = st_plan(pl, a.g, NULL), *pb = st_plan(pl, b.g, NULL),
            *pc = st_plan(pl, c.g, NULL);
    cr_assert_eq(pa, pb);
    cr_assert_neq(pa, pc);
    sy_plan_release(pa);
    sy_plan_release(pb);
    sy_plan_release(pc);
    st_graph_free(&a);
    st_graph_free(&b);
    st_graph_free(&c);
    sy_planner_destroy(pl);
    sy_runtime_destroy(rt);
    st_check_leaks();
}

Test(plan, options_and_profiles_are_part_of_the_cache_key)
{
    sy_runtime *rt = st_runtime();
    sy_planner *pl = mixed_planner(rt);
    st_graph a;
    st_decoder_graph(&a, &decoder, 7);
    sy_plan *p1 = st_plan(pl, a.g, NULL);
    sy_plan_options o;
    sy_plan_options_init(&o);
    o.policy = "cpu-only";
    sy_plan *p2 = st_plan(pl, a.g, &o);
    cr_assert_neq(p1, p2);
    const char *pins[] = {"blk.0.*=cpu"};
    sy_plan_options_init(&o);
    o.pins = pins;
    o.n_pins = 1;
    sy_plan *p3 = st_plan(pl, a.g, &o);
    cr_assert_neq(p1, p3);
    sy_plan_options_init(&o);
    o.no_cache = true;
    sy_plan *p4 = st_plan(pl, a.g, &o);
    cr_assert_neq(p1, p4);
    sy_planner_stats stats;
    sy_planner_query_stats(pl, &stats);
    cr_assert_eq(stats.entries, 3u);
    char path[512];
    cr_assert_eq(sy_planner_load_profile(
                     pl, st_fixture("opaquedev_fast_elementwise.json", path, sizeof path)),
                 SY_OK);
    sy_planner_query_stats(pl, &stats);
    cr_assert_eq(stats.entries, 0u, "new figures empty the cache");
    sy_plan *p5 = st_plan(pl, a.g, NULL);
    cr_assert_neq(p1, p5);
    sy_plan_release(p1);
    sy_plan_release(p2);
    sy_plan_release(p3);
    sy_plan_release(p4);
    sy_plan_release(p5);
    st_graph_free(&a);
    sy_planner_destroy(pl);
    sy_runtime_destroy(rt);
    st_check_leaks();
}
