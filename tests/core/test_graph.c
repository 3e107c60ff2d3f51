#include <criterion/criterion.h>
#include <string.h>

#include "switchyard/switchyard.h"

static sy_graph *g;

static void setup(void)
{
    cr_assert_eq(sy_graph_create(&g), SY_OK);
}

static void teardown(void)
{
    sy_graph_destroy(g);
}

static sy_tensor *leaf(const char *name, sy_dtype dt, int64_t a, int64_t b, sy_tensor_role role)
{
    int64_t ne[2] = {a, b};
    sy_tensor *t = NULL;
    cr_assert_eq(sy_graph_add_tensor(g, name, dt, 2, ne, role, NULL, &t), SY_OK, "%s",
                 sy_graph_last_error(g));
    return t;
}

TestSuite(graph, .init = setup, .fini = teardown);

Test(graph, status_names_and_messages_come_from_one_table)
{
    cr_assert_str_eq(sy_status_name(SY_E_FORMAT), "SY_E_FORMAT");
    cr_assert_str_eq(sy_status_str(SY_E_NO_MEMORY), "out of memory");
    cr_assert_str_eq(sy_status_name((sy_status)-999), "SY_E_UNKNOWN");
}

Test(graph, dtype_traits_match_gguf_block_sizes)
{
    cr_assert_eq(sy_dtype_block_size(SY_DTYPE_Q8_0), 32);
    cr_assert_eq(sy_dtype_type_size(SY_DTYPE_Q8_0), 34);
    cr_assert_eq(sy_dtype_type_size(SY_DTYPE_Q4_0), 18);
    cr_assert_eq(sy_dtype_type_size(SY_DTYPE_Q4_1), 20);
    cr_assert_eq(sy_dtype_block_size(SY_DTYPE_Q4_K), 256);
    cr_assert_eq(sy_dtype_type_size(SY_DTYPE_Q4_K), 144);
    cr_assert_eq(sy_dtype_type_size(SY_DTYPE_Q5_K), 176);
    cr_assert_eq(sy_dtype_type_size(SY_DTYPE_Q6_K), 210);
    cr_assert_eq(sy_dtype_type_size(SY_DTYPE_BF16), 2);
    cr_assert_str_eq(sy_dtype_name(SY_DTYPE_COUNT), "invalid");
}

Test(graph, builds_matmul_and_infers_its_shape)
{
    sy_tensor *w = leaf("w", SY_DTYPE_Q8_0, 64, 16, SY_ROLE_WEIGHT);
    sy_tensor *x = leaf("x", SY_DTYPE_F32, 64, 3, SY_ROLE_INPUT);
    sy_tensor *in[2] = {w, x}, *y = NULL;
    cr_assert_eq(sy_graph_add_node(g, SY_OP_MATMUL, "y", in, 2, NULL, &y), SY_OK, "%s",
                 sy_graph_last_error(g));
    cr_assert_eq(y->ne[0], 16);
    cr_assert_eq(y->ne[1], 3);
    cr_assert_eq(y->dtype, SY_DTYPE_F32);
    cr_assert_eq(sy_graph_freeze(g), SY_OK);
    cr_assert_eq(sy_graph_node_count(g), 1);
    cr_assert_eq(sy_graph_producer(g, y), sy_graph_node(g, 0));
    cr_assert_eq(sy_graph_find_tensor(g, "x"), x);
}

Test(graph, rejects_matmul_with_mismatched_k_naming_the_node)
{
    sy_tensor *w = leaf("w", SY_DTYPE_F32, 64, 16, SY_ROLE_WEIGHT);
    sy_tensor *x = leaf("x", SY_DTYPE_F32, 60, 3, SY_ROLE_INPUT);
    sy_tensor *in[2] = {w, x}, *y = (sy_tensor *)1;
    cr_assert_eq(sy_graph_add_node(g, SY_OP_MATMUL, "blk0.q", in, 2, NULL, &y), SY_E_SHAPE);
    cr_assert_null(y);
    cr_assert(strstr(sy_graph_last_error(g), "blk0.q") != NULL, "%s", sy_graph_last_error(g));
    cr_assert_eq(sy_graph_node_count(g), 0);
    cr_assert_eq(sy_graph_tensor_count(g), 2);
}

Test(graph, rejects_quantized_tensor_whose_rows_are_not_whole_blocks)
{
    int64_t ne[2] = {48, 2};
    sy_tensor *t = NULL;
    cr_assert_eq(sy_graph_add_tensor(g, "bad", SY_DTYPE_Q4_0, 2, ne, SY_ROLE_WEIGHT, NULL, &t),
                 SY_E_SHAPE);
    cr_assert(strstr(sy_graph_last_error(g), "bad") != NULL);
}

Test(graph, rejects_input_from_another_graph_as_dangling)
{
    sy_graph *other = NULL;
    cr_assert_eq(sy_graph_create(&other), SY_OK);
    int64_t ne[1] = {8};
    sy_tensor *foreign = NULL, *y = NULL;
    cr_assert_eq(sy_graph_add_tensor(other, "foreign", SY_DTYPE_F32, 1, ne, SY_ROLE_INPUT, NULL,
                                     &foreign),
                 SY_OK);
    cr_assert_eq(sy_graph_add_node(g, SY_OP_SILU, "act", &foreign, 1, NULL, &y), SY_E_GRAPH);
    cr_assert(strstr(sy_graph_last_error(g), "act") != NULL);
    cr_assert(strstr(sy_graph_last_error(g), "dangling") != NULL);
    sy_graph_destroy(other);
}

Test(graph, rejects_activation_no_node_produces_at_freeze)
{
    sy_tensor *orphan = leaf("orphan", SY_DTYPE_F32, 8, 1, SY_ROLE_ACTIVATION);
    sy_tensor *y = NULL;
    cr_assert_eq(sy_graph_add_node(g, SY_OP_SILU, "uses_orphan", &orphan, 1, NULL, &y), SY_OK);
    cr_assert_eq(sy_graph_freeze(g), SY_E_GRAPH);
    cr_assert(strstr(sy_graph_last_error(g), "uses_orphan") != NULL, "%s", sy_graph_last_error(g));
    cr_assert(strstr(sy_graph_last_error(g), "orphan") != NULL);
    cr_assert_not(sy_graph_is_frozen(g));
}

Test(graph, rejects_cycle_naming_a_node_on_it)
{
    sy_tensor *x = leaf("x", SY_DTYPE_F32, 8, 1, SY_ROLE_INPUT);
    sy_tensor *a = leaf("a", SY_DTYPE_F32, 8, 1, SY_ROLE_ACTIVATION);
    sy_tensor *b = leaf("b", SY_DTYPE_F32, 8, 1, SY_ROLE_ACTIVATION);
    sy_tensor *c = leaf("c", SY_DTYPE_F32, 8, 1, SY_ROLE_ACTIVATION);
    sy_tensor *ab[2] = {x, b};
    /* feeder -> a = x + b, b = silu(a): a cycle; c = silu(b) hangs below it. */
    cr_assert_eq(sy_graph_add_node_into(g, SY_OP_SILU, "tail", &b, 1, NULL, c), SY_OK);
    cr_assert_eq(sy_graph_add_node_into(g, SY_OP_ADD, "loop_add", ab, 2, NULL, a), SY_OK);
    cr_assert_eq(sy_graph_add_node_into(g, SY_OP_SILU, "loop_silu", &a, 1, NULL, b), SY_OK);
    cr_assert_eq(sy_graph_freeze(g), SY_E_GRAPH);
    const char *e = sy_graph_last_error(g);
    cr_assert(strstr(e, "cycle") != NULL, "%s", e);
    cr_assert(strstr(e, "loop_") != NULL, "the named node must be on the cycle: %s", e);
}

Test(graph, rejects_second_writer_of_a_tensor)
{
    sy_tensor *x = leaf("x", SY_DTYPE_F32, 8, 1, SY_ROLE_INPUT);
    sy_tensor *a = leaf("a", SY_DTYPE_F32, 8, 1, SY_ROLE_ACTIVATION);
    cr_assert_eq(sy_graph_add_node_into(g, SY_OP_SILU, "first", &x, 1, NULL, a), SY_OK);
    cr_assert_eq(sy_graph_add_node_into(g, SY_OP_GELU, "second", &x, 1, NULL, a), SY_E_GRAPH);
    cr_assert(strstr(sy_graph_last_error(g), "first") != NULL);
}

Test(graph, rejects_add_node_into_with_wrong_output_shape_at_freeze)
{
    sy_tensor *x = leaf("x", SY_DTYPE_F32, 8, 2, SY_ROLE_INPUT);
    sy_tensor *a = leaf("a", SY_DTYPE_F32, 8, 3, SY_ROLE_ACTIVATION);
    cr_assert_eq(sy_graph_add_node_into(g, SY_OP_SILU, "misfit", &x, 1, NULL, a), SY_OK);
    cr_assert_eq(sy_graph_freeze(g), SY_E_SHAPE);
    cr_assert(strstr(sy_graph_last_error(g), "misfit") != NULL);
}

Test(graph, orders_nodes_added_out_of_order_topologically)
{
    sy_tensor *x = leaf("x", SY_DTYPE_F32, 8, 1, SY_ROLE_INPUT);
    sy_tensor *a = leaf("a", SY_DTYPE_F32, 8, 1, SY_ROLE_ACTIVATION);
    sy_tensor *b = leaf("b", SY_DTYPE_F32, 8, 1, SY_ROLE_ACTIVATION);
    sy_tensor *c = leaf("c", SY_DTYPE_F32, 8, 1, SY_ROLE_ACTIVATION);
    cr_assert_eq(sy_graph_add_node_into(g, SY_OP_SILU, "third", &b, 1, NULL, c), SY_OK);
    cr_assert_eq(sy_graph_add_node_into(g, SY_OP_SILU, "second", &a, 1, NULL, b), SY_OK);
    cr_assert_eq(sy_graph_add_node_into(g, SY_OP_SILU, "first", &x, 1, NULL, a), SY_OK);
    cr_assert_eq(sy_graph_freeze(g), SY_OK, "%s", sy_graph_last_error(g));
    cr_assert_str_eq(sy_graph_node(g, 0)->name, "first");
    cr_assert_str_eq(sy_graph_node(g, 1)->name, "second");
    cr_assert_str_eq(sy_graph_node(g, 2)->name, "third");
    for (uint32_t i = 0; i < 3; i++)
        cr_assert_eq(sy_graph_node(g, i)->id, i);
}

Test(graph, refuses_changes_after_freeze)
{
    sy_tensor *x = leaf("x", SY_DTYPE_F32, 8, 1, SY_ROLE_INPUT), *y = NULL;
    cr_assert_eq(sy_graph_freeze(g), SY_OK);
    cr_assert_eq(sy_graph_add_node(g, SY_OP_SILU, "late", &x, 1, NULL, &y), SY_E_STATE);
    int64_t ne = 4;
    cr_assert_eq(sy_graph_add_tensor(g, "late_t", SY_DTYPE_F32, 1, &ne, SY_ROLE_INPUT, NULL, &y),
                 SY_E_STATE);
}

Test(graph, rejects_bad_tensor_descriptions)
{
    int64_t ne[4] = {8, 0, 1, 1};
    sy_tensor *t = NULL;
    cr_assert_eq(sy_graph_add_tensor(g, "zero", SY_DTYPE_F32, 2, ne, SY_ROLE_INPUT, NULL, &t),
                 SY_E_SHAPE);
    cr_assert_eq(sy_graph_add_tensor(g, "rank5", SY_DTYPE_F32, 5, ne, SY_ROLE_INPUT, NULL, &t),
                 SY_E_SHAPE);
    cr_assert_eq(sy_graph_add_tensor(g, "dtype", (sy_dtype)99, 1, ne, SY_ROLE_INPUT, NULL, &t),
                 SY_E_DTYPE);
    cr_assert_null(t);
    cr_assert_eq(sy_graph_add_node(g, (sy_op)999, "bad_op", NULL, 0, NULL, &t), SY_E_INVALID_ARG);
}

Test(graph, reference_run_computes_a_small_chain)
{
    float xs[4] = {1, -2, 3, -4}, ys[4] = {1, 1, 1, 1}, out[4] = {0};
    int64_t ne = 4;
    sy_tensor *x, *y, *s, *r;
    cr_assert_eq(sy_graph_add_tensor(g, "x", SY_DTYPE_F32, 1, &ne, SY_ROLE_INPUT, xs, &x), SY_OK);
    cr_assert_eq(sy_graph_add_tensor(g, "y", SY_DTYPE_F32, 1, &ne, SY_ROLE_INPUT, ys, &y), SY_OK);
    sy_tensor *xy[2] = {x, y};
    sy_op_params p = {.f = {2.0f, 0.0f}};
    cr_assert_eq(sy_graph_add_node(g, SY_OP_ADD, "sum", xy, 2, NULL, &s), SY_OK);
    cr_assert_eq(sy_graph_add_node(g, SY_OP_SCALE, "twice", &s, 1, &p, &r), SY_OK);
    cr_assert_eq(sy_graph_mark_output(g, r), SY_OK);
    cr_assert_eq(sy_graph_set_host_data(g, r, out), SY_OK);
    cr_assert_eq(sy_graph_freeze(g), SY_OK);
    cr_assert_eq(sy_graph_run_reference(g), SY_OK);
    float want[4] = {4, -2, 8, -6};
    for (int i = 0; i < 4; i++)
        cr_assert_float_eq(out[i], want[i], 1e-6, "element %d", i);
}
