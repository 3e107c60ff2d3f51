/* Shape and dtype inference (sy_op_infer), names and costs: every op's
 * accepted shapes, and every refusal with the message it gives. */
#include "ops_test_util.h"

/* Runs inference expecting failure |want| whose message contains |needle|. */
static void expect_fail(sy_op op, sy_tensor **in, uint32_t n, const sy_op_params *p, sy_status want,
                        const char *needle)
{
    char err[256] = "";
    sy_tensor out;
    memset(&out, 0xab, sizeof out);
    sy_tensor before = out;
    sy_status st = sy_op_infer(op, in, n, p, &out, err, sizeof err);
    cr_assert_eq(st, want, "%s: got %s, want %s (message: %s)", sy_op_name(op), sy_status_name(st),
                 sy_status_name(want), err);
    cr_assert(strstr(err, needle) != NULL, "%s: message '%s' lacks '%s'", sy_op_name(op), err, needle);
    cr_assert(memcmp(&out, &before, sizeof out) == 0, "%s: a refused infer changed the output",
                  sy_op_name(op));
}

static sy_tensor infer_ok(sy_op op, sy_tensor **in, uint32_t n, const sy_op_params *p)
{
    char err[256] = "";
    sy_tensor out;
    memset(&out, 0, sizeof out);
    sy_status st = sy_op_infer(op, in, n, p, &out, err, sizeof err);
    cr_assert_eq(st, SY_OK, "%s: %s", sy_op_name(op), err);
    return out;
}

static void expect_shape(const sy_tensor *t, int64_t a, int64_t b, int64_t c, int64_t d)
{
    cr_assert(t->ne[0] == a && t->ne[1] == b && t->ne[2] == c && t->ne[3] == d,
              "shape [%lld,%lld,%lld,%lld], want [%lld,%lld,%lld,%lld]", (long long)t->ne[0],
              (long long)t->ne[1], (long long)t->ne[2], (long long)t->ne[3], (long long)a, (long long)b,
              (long long)c, (long long)d);
}

/* ------------------------------------------------------------------ names */

Test(catalogue, names_every_op_and_rejects_unknown_values)
{
    cr_assert_str_eq(sy_op_name(SY_OP_RMS_NORM), "rms_norm");
    cr_assert_str_eq(sy_op_name(SY_OP_MATMUL), "matmul");
    cr_assert_str_eq(sy_op_name(SY_OP_KV_WRITE), "kv_write");
    cr_assert_str_eq(sy_op_name(SY_OP_COUNT), "invalid");
    cr_assert_str_eq(sy_op_name((sy_op)1000), "invalid");
    for (int op = 0; op < SY_OP_COUNT; op++) {
        cr_assert_not_null(sy_op_name((sy_op)op));
        cr_assert_str_neq(sy_op_name((sy_op)op), "invalid", "op %d has no name", op);
        for (int other = 0; other < op; other++)
            cr_assert_str_neq(sy_op_name((sy_op)op), sy_op_name((sy_op)other), "ops %d and %d share a name",
                              op, other);
    }
}

/* ---------------------------------------------------------- compute ops */

Test(infer, matmul_gives_f32_n_by_m_with_contiguous_strides)
{
    sy_tensor w = tu_tensor(SY_DTYPE_Q4_0, 64, 10, 1, 1, NULL);
    sy_tensor x = tu_tensor(SY_DTYPE_F32, 64, 3, 4, 1, NULL);
    sy_tensor *in[2] = {&w, &x};
    sy_tensor o = infer_ok(SY_OP_MATMUL, in, 2, NULL);
    cr_assert_eq(o.dtype, SY_DTYPE_F32);
    expect_shape(&o, 10, 3, 4, 1);
    cr_assert(o.nb[0] == 4 && o.nb[1] == 40 && o.nb[2] == 120 && o.nb[3] == 480);
    cr_assert_null(o.view_src);
    cr_assert_eq(o.n_dims, 4, "keeps the input's declared dims");
}

Test(infer, matmul_reports_k_mismatch_with_both_sizes)
{
    sy_tensor w = tu_tensor(SY_DTYPE_F32, 64, 8, 1, 1, NULL);
    sy_tensor x = tu_tensor(SY_DTYPE_F32, 60, 2, 1, 1, NULL);
    sy_tensor *in[2] = {&w, &x};
    expect_fail(SY_OP_MATMUL, in, 2, NULL, SY_E_SHAPE, "matmul: K mismatch, weight has K=64, input has K=60");
}

Test(infer, matmul_needs_k_to_be_whole_weight_blocks)
{
    sy_tensor w = tu_tensor(SY_DTYPE_Q4_K, 128, 8, 1, 1, NULL);
    w.nb[0] = 144;
    sy_tensor x = tu_tensor(SY_DTYPE_F32, 128, 2, 1, 1, NULL);
    sy_tensor *in[2] = {&w, &x};
    expect_fail(SY_OP_MATMUL, in, 2, NULL, SY_E_SHAPE, "weight is q4_k with ne[0]=128, not a multiple of its block size 256");
}

Test(infer, matmul_rejects_quantized_activations_and_bad_batches)
{
    sy_tensor w = tu_tensor(SY_DTYPE_F16, 32, 8, 2, 1, NULL);
    sy_tensor xq = tu_tensor(SY_DTYPE_Q8_0, 32, 2, 2, 1, NULL);
    sy_tensor *in[2] = {&w, &xq};
    expect_fail(SY_OP_MATMUL, in, 2, NULL, SY_E_DTYPE, "input must be f32 or f16, got q8_0");
    sy_tensor x = tu_tensor(SY_DTYPE_F32, 32, 2, 3, 1, NULL);
    in[1] = &x;
    expect_fail(SY_OP_MATMUL, in, 2, NULL, SY_E_SHAPE, "weight batch dims [2,1] must divide input batch dims [3,1]");
    x.ne[2] = 4;
    sy_tensor o = infer_ok(SY_OP_MATMUL, in, 2, NULL);
    expect_shape(&o, 8, 2, 4, 1);
}

Test(infer, checks_input_count_and_null_inputs)
{
    sy_tensor a = tu_tensor(SY_DTYPE_F32, 4, 1, 1, 1, NULL);
    sy_tensor *in[2] = {&a, NULL};
    expect_fail(SY_OP_ADD, in, 1, NULL, SY_E_INVALID_ARG, "add: takes 2 inputs, got 1");
    expect_fail(SY_OP_SILU, in, 2, NULL, SY_E_INVALID_ARG, "silu: takes 1 input, got 2");
    expect_fail(SY_OP_ADD, in, 2, NULL, SY_E_INVALID_ARG, "in1 is NULL");
    expect_fail(SY_OP_NONE, in, 1, NULL, SY_E_INVALID_ARG, "unknown op");
    expect_fail((sy_op)77, in, 1, NULL, SY_E_INVALID_ARG, "unknown op 77");
}

Test(infer, rejects_bad_extents_and_dtypes_of_any_input)
{
    sy_tensor a = tu_tensor(SY_DTYPE_F32, 4, 0, 1, 1, NULL);
    sy_tensor *in[1] = {&a};
    expect_fail(SY_OP_SILU, in, 1, NULL, SY_E_SHAPE, "in0 has ne[1]=0");
    a = tu_tensor(SY_DTYPE_F32, 4, 1, 1, 1, NULL);
    a.dtype = 42;
    expect_fail(SY_OP_SILU, in, 1, NULL, SY_E_DTYPE, "in0 has invalid dtype 42");
    a = tu_tensor(SY_DTYPE_F16, 4, 1, 1, 1, NULL);
    expect_fail(SY_OP_SILU, in, 1, NULL, SY_E_DTYPE, "silu: in0 must be f32, got f16");
    sy_tensor q = tu_tensor(SY_DTYPE_Q8_0, 64, 2, 1, 1, NULL);
    q.nb[0] = 68;
    in[0] = &q;
    const sy_op_params p = {.i = {SY_DTYPE_F32}};
    expect_fail(SY_OP_COPY, in, 1, &p, SY_E_SHAPE, "block rows must be dense");
}

Test(infer, add_and_mul_broadcast_when_extents_divide)
{
    sy_tensor a = tu_tensor(SY_DTYPE_F32, 6, 4, 2, 1, NULL);
    sy_tensor b = tu_tensor(SY_DTYPE_F32, 3, 1, 2, 1, NULL);
    sy_tensor *in[2] = {&a, &b};
    sy_tensor o = infer_ok(SY_OP_ADD, in, 2, NULL);
    expect_shape(&o, 6, 4, 2, 1);
    b.ne[0] = 4;
    expect_fail(SY_OP_MUL, in, 2, NULL, SY_E_SHAPE, "mul: in1 [4,1,2] does not broadcast to in0 [6,4,2]");
}

Test(infer, unary_ops_keep_shape_and_check_params)
{
    sy_tensor a = tu_tensor(SY_DTYPE_F32, 8, 3, 1, 1, NULL);
    sy_tensor *in[1] = {&a};
    sy_tensor o = infer_ok(SY_OP_GELU, in, 1, NULL);
    expect_shape(&o, 8, 3, 1, 1);
    sy_op_params p = {.f = {-1e-5f}};
    expect_fail(SY_OP_RMS_NORM, in, 1, &p, SY_E_INVALID_ARG, "rms_norm: eps (p.f[0]) must be finite and >= 0");
    p.f[0] = NAN;
    expect_fail(SY_OP_SCALE, in, 1, &p, SY_E_INVALID_ARG, "scale: scale nan and bias 0 must be finite");
}

Test(infer, glu_ops_need_equal_gate_and_up)
{
    sy_tensor g = tu_tensor(SY_DTYPE_F32, 8, 3, 1, 1, NULL);
    sy_tensor u = tu_tensor(SY_DTYPE_F32, 8, 2, 1, 1, NULL);
    sy_tensor *in[2] = {&g, &u};
    expect_fail(SY_OP_SWIGLU, in, 2, NULL, SY_E_SHAPE, "swiglu: gate [8,3] and up [8,2] must have the same shape");
    u.ne[1] = 3;
    sy_tensor o = infer_ok(SY_OP_GEGLU, in, 2, NULL);
    expect_shape(&o, 8, 3, 1, 1);
    u.dtype = SY_DTYPE_F16;
    expect_fail(SY_OP_GEGLU, in, 2, NULL, SY_E_DTYPE, "up must be f32, got f16");
}

Test(infer, get_rows_gives_f32_rows_for_each_id)
{
    sy_tensor t = tu_tensor(SY_DTYPE_Q6_K, 256, 100, 1, 1, NULL);
    sy_tensor ids = tu_tensor(SY_DTYPE_I32, 7, 1, 1, 1, NULL);
    sy_tensor *in[2] = {&t, &ids};
    sy_tensor o = infer_ok(SY_OP_GET_ROWS, in, 2, NULL);
    cr_assert_eq(o.dtype, SY_DTYPE_F32);
    expect_shape(&o, 256, 7, 1, 1);
    ids.dtype = SY_DTYPE_F32;
    expect_fail(SY_OP_GET_ROWS, in, 2, NULL, SY_E_DTYPE, "get_rows: ids must be i32, got f32");
    ids.dtype = SY_DTYPE_I32;
    ids.ne[1] = 2;
    expect_fail(SY_OP_GET_ROWS, in, 2, NULL, SY_E_SHAPE, "ids must be [M], got shape [7,2]");
}

Test(infer, rope_validates_mode_n_rot_and_positions)
{
    sy_tensor x = tu_tensor(SY_DTYPE_F32, 8, 2, 3, 1, NULL);
    sy_tensor pos = tu_tensor(SY_DTYPE_I32, 3, 1, 1, 1, NULL);
    sy_tensor *in[2] = {&x, &pos};
    sy_op_params p = {.i = {SY_ROPE_NEOX, 8}, .f = {10000.0f, 0.0f}};
    sy_tensor o = infer_ok(SY_OP_ROPE, in, 2, &p);
    expect_shape(&o, 8, 2, 3, 1);
    p.i[1] = 5;
    expect_fail(SY_OP_ROPE, in, 2, &p, SY_E_INVALID_ARG, "n_rot (p.i[1]) must be even and in 2..D=8, got 5");
    p.i[1] = 10;
    expect_fail(SY_OP_ROPE, in, 2, &p, SY_E_INVALID_ARG, "got 10");
    p.i[1] = 8;
    p.i[0] = 2;
    expect_fail(SY_OP_ROPE, in, 2, &p, SY_E_INVALID_ARG, "mode (p.i[0]) must be 0 (normal) or 1 (neox), got 2");
    p.i[0] = 0;
    p.f[0] = 0.0f;
    expect_fail(SY_OP_ROPE, in, 2, &p, SY_E_INVALID_ARG, "freq_base (p.f[0]) must be finite and > 0");
    p.f[0] = 10000.0f;
    pos.ne[0] = 4;
    expect_fail(SY_OP_ROPE, in, 2, &p, SY_E_SHAPE, "positions has 4 entries, x has T=3 tokens");
}

Test(infer, softmax_validates_mask_params)
{
    sy_tensor x = tu_tensor(SY_DTYPE_F32, 5, 3, 2, 1, NULL);
    sy_tensor *in[1] = {&x};
    sy_op_params p = {.i = {1, 2, 0}, .f = {1.0f}};
    sy_tensor o = infer_ok(SY_OP_SOFTMAX, in, 1, &p);
    expect_shape(&o, 5, 3, 2, 1);
    p.i[0] = 2;
    expect_fail(SY_OP_SOFTMAX, in, 1, &p, SY_E_INVALID_ARG, "causal (p.i[0]) must be 0 or 1, got 2");
    p.i[0] = 1;
    p.i[1] = -1;
    expect_fail(SY_OP_SOFTMAX, in, 1, &p, SY_E_INVALID_ARG, "n_past (p.i[1]) must be >= 0, got -1");
    p.i[1] = 0;
    p.i[2] = -3;
    expect_fail(SY_OP_SOFTMAX, in, 1, &p, SY_E_INVALID_ARG, "window (p.i[2]) must be >= 0, got -3");
    p.i[2] = 0;
    p.f[0] = 0.0f;
    expect_fail(SY_OP_SOFTMAX, in, 1, &p, SY_E_INVALID_ARG, "softmax: scale (p.f[0]) must be finite and non-zero");
    expect_fail(SY_OP_SOFTMAX, in, 1, NULL, SY_E_INVALID_ARG, "got 0");
}

Test(infer, attention_checks_heads_head_size_and_kv_dtypes)
{
    sy_tensor q = tu_tensor(SY_DTYPE_F32, 16, 6, 2, 1, NULL);
    sy_tensor k = tu_tensor(SY_DTYPE_F16, 16, 2, 9, 1, NULL);
    sy_tensor v = tu_tensor(SY_DTYPE_F32, 16, 2, 9, 1, NULL);
    sy_tensor *in[3] = {&q, &k, &v};
    const sy_op_params p = {.i = {7, 0}, .f = {0.25f}};
    sy_tensor o = infer_ok(SY_OP_ATTENTION, in, 3, &p);
    expect_shape(&o, 16, 6, 2, 1);
    cr_assert_eq(o.dtype, SY_DTYPE_F32);
    k.ne[1] = v.ne[1] = 4;
    expect_fail(SY_OP_ATTENTION, in, 3, &p, SY_E_SHAPE, "kv heads Hkv=4 must divide query heads Hq=6");
    k.ne[1] = v.ne[1] = 3;
    k.ne[0] = v.ne[0] = 8;
    expect_fail(SY_OP_ATTENTION, in, 3, &p, SY_E_SHAPE, "head size mismatch, q has D=16, k has D=8");
    k.ne[0] = 16;
    expect_fail(SY_OP_ATTENTION, in, 3, &p, SY_E_SHAPE, "k [16,3,9] and v [8,3,9] must have the same shape");
    v.ne[0] = 16;
    k = tu_tensor(SY_DTYPE_BF16, 16, 3, 9, 1, NULL);
    expect_fail(SY_OP_ATTENTION, in, 3, &p, SY_E_DTYPE,
                "attention: k must be f32, f16, q8_0 or q4_0, got bf16");
    /* The quantised KV cache types are read; other block types are not. */
    sy_tensor qq = tu_tensor(SY_DTYPE_F32, 32, 6, 2, 1, NULL);
    sy_tensor qk = tu_tensor(SY_DTYPE_Q8_0, 32, 3, 9, 1, NULL);
    sy_tensor qv = tu_tensor(SY_DTYPE_Q4_0, 32, 3, 9, 1, NULL);
    sy_tensor *qin[3] = {&qq, &qk, &qv};
    sy_tensor qo = infer_ok(SY_OP_ATTENTION, qin, 3, &p);
    expect_shape(&qo, 32, 6, 2, 1);
    qv = tu_tensor(SY_DTYPE_Q4_1, 32, 3, 9, 1, NULL);
    expect_fail(SY_OP_ATTENTION, qin, 3, &p, SY_E_DTYPE,
                "attention: v must be f32, f16, q8_0 or q4_0, got q4_1");
    k = tu_tensor(SY_DTYPE_F16, 16, 3, 9, 1, NULL);
    const sy_op_params unset = {.i = {7, 0}};
    expect_fail(SY_OP_ATTENTION, in, 3, &unset, SY_E_INVALID_ARG, "scale (p.f[0]) must be finite and non-zero");
    const sy_op_params neg = {.i = {-2, 0}, .f = {1.0f}};
    expect_fail(SY_OP_ATTENTION, in, 3, &neg, SY_E_INVALID_ARG, "n_past (p.i[0]) must be >= 0, got -2");
}

Test(infer, copy_converts_and_refuses_k_quant_targets)
{
    sy_tensor x = tu_tensor(SY_DTYPE_Q4_K, 256, 2, 1, 1, NULL);
    sy_tensor *in[1] = {&x};
    sy_op_params p = {.i = {SY_DTYPE_F16}};
    sy_tensor o = infer_ok(SY_OP_COPY, in, 1, &p);
    cr_assert_eq(o.dtype, SY_DTYPE_F16);
    expect_shape(&o, 256, 2, 1, 1);
    cr_assert(sy_tensor_is_contiguous(&o));
    p.i[0] = SY_DTYPE_Q4_K;
    o = infer_ok(SY_OP_COPY, in, 1, &p);
    cr_assert_eq(o.dtype, SY_DTYPE_Q4_K, "a same-type copy of a k-quant moves blocks");
    sy_tensor f = tu_tensor(SY_DTYPE_F32, 256, 2, 1, 1, NULL);
    in[0] = &f;
    p.i[0] = SY_DTYPE_Q5_K;
    expect_fail(SY_OP_COPY, in, 1, &p, SY_E_DTYPE, "copy: cannot convert f32 to q5_k");
    p.i[0] = 99;
    expect_fail(SY_OP_COPY, in, 1, &p, SY_E_DTYPE, "target dtype (p.i[0]) 99 is not a dtype");
    f.ne[0] = 48;
    p.i[0] = SY_DTYPE_Q8_0;
    expect_fail(SY_OP_COPY, in, 1, &p, SY_E_SHAPE, "ne[0]=48 is not a multiple of the q8_0 block size 32");
}

Test(infer, argmax_gives_one_i32_per_row)
{
    sy_tensor x = tu_tensor(SY_DTYPE_F32, 100, 3, 1, 1, NULL);
    sy_tensor *in[1] = {&x};
    sy_tensor o = infer_ok(SY_OP_ARGMAX, in, 1, NULL);
    cr_assert_eq(o.dtype, SY_DTYPE_I32);
    expect_shape(&o, 3, 1, 1, 1);
    x.ne[2] = 2;
    expect_fail(SY_OP_ARGMAX, in, 1, NULL, SY_E_SHAPE, "argmax: in0 must be [N,M], got shape [100,3,2]");
}

/* -------------------------------------------------------------- aliases */

Test(infer, view_aliases_the_root_storage_at_the_summed_offset)
{
    sy_tensor root = tu_tensor(SY_DTYPE_F32, 8, 4, 2, 1, NULL); /* 256 bytes */
    sy_tensor *in[1] = {&root};
    /* Rows 1..2 of matrix 1: offset 32*4 + 32 = 160 */
    sy_op_params p = {.i = {8, 2, 1, 1, 32, 64, 64, 160}};
    sy_tensor v1 = infer_ok(SY_OP_VIEW, in, 1, &p);
    cr_assert_eq(v1.view_src, &root);
    cr_assert_eq(v1.view_offset, 160);
    expect_shape(&v1, 8, 2, 1, 1);
    cr_assert(v1.nb[0] == 4 && v1.nb[1] == 32);

    /* A view of that view points at the root, offsets added. */
    in[0] = &v1;
    sy_op_params p2 = {.i = {4, 1, 1, 1, 32, 32, 32, 48}};
    sy_tensor v2 = infer_ok(SY_OP_VIEW, in, 1, &p2);
    cr_assert_eq(v2.view_src, &root);
    cr_assert_eq(v2.view_offset, 208);
}

Test(infer, view_refuses_to_reach_past_its_source)
{
    sy_tensor root = tu_tensor(SY_DTYPE_F32, 8, 4, 1, 1, NULL); /* 128 bytes */
    sy_tensor *in[1] = {&root};
    sy_op_params p = {.i = {8, 2, 1, 1, 32, 64, 64, 96}};
    expect_fail(SY_OP_VIEW, in, 1, &p, SY_E_SHAPE,
                "view: view of 64 bytes at offset 96 does not fit in its source of 128 bytes");
    p.i[7] = 2;
    expect_fail(SY_OP_VIEW, in, 1, &p, SY_E_SHAPE, "offset (p.i[7]) = 2 must be >= 0 and a multiple of 4");
    p.i[7] = 0;
    p.i[4] = -32;
    expect_fail(SY_OP_VIEW, in, 1, &p, SY_E_SHAPE, "nb1 (p.i[4]) must be > 0 for a dim of 2 elements, got -32");
    p.i[4] = 32;
    p.i[1] = 0;
    expect_fail(SY_OP_VIEW, in, 1, &p, SY_E_SHAPE, "ne[1] (p.i[1]) must be >= 1, got 0");
}

Test(infer, view_of_block_type_keeps_whole_blocks)
{
    sy_tensor w = tu_tensor(SY_DTYPE_Q8_0, 64, 4, 1, 1, NULL); /* rows of 68 bytes */
    sy_tensor *in[1] = {&w};
    sy_op_params p = {.i = {32, 4, 1, 1, 68, 272, 272, 34}};
    sy_tensor v = infer_ok(SY_OP_VIEW, in, 1, &p);
    cr_assert_eq(v.nb[0], 34);
    cr_assert_eq(v.view_offset, 34);
    p.i[0] = 16;
    expect_fail(SY_OP_VIEW, in, 1, &p, SY_E_SHAPE, "ne[0]=16 is not a multiple of the q8_0 block size 32");
}

Test(infer, reshape_keeps_count_and_needs_contiguous_input)
{
    sy_tensor x = tu_tensor(SY_DTYPE_F32, 6, 4, 1, 1, NULL);
    sy_tensor *in[1] = {&x};
    sy_op_params p = {.i = {3, 2, 4, 1}};
    sy_tensor r = infer_ok(SY_OP_RESHAPE, in, 1, &p);
    expect_shape(&r, 3, 2, 4, 1);
    cr_assert(sy_tensor_is_contiguous(&r));
    cr_assert_eq(r.view_src, &x);
    cr_assert_eq(r.view_offset, 0);
    p.i[2] = 5;
    expect_fail(SY_OP_RESHAPE, in, 1, &p, SY_E_SHAPE, "element count differs: input [6,4] has 24, new shape [3,2,5]");
    p.i[0] = INT64_C(1) << 40;
    p.i[1] = INT64_C(1) << 40;
    expect_fail(SY_OP_RESHAPE, in, 1, &p, SY_E_SHAPE, "element count differs");

    in[0] = &r;
    sy_op_params pt = {0};
    sy_tensor t = infer_ok(SY_OP_TRANSPOSE, in, 1, &pt);
    in[0] = &t;
    p = (sy_op_params){.i = {24, 1, 1, 1}};
    expect_fail(SY_OP_RESHAPE, in, 1, &p, SY_E_SHAPE, "reshape: input must be contiguous");
}

Test(infer, permute_moves_extents_and_strides)
{
    sy_tensor x = tu_tensor(SY_DTYPE_F32, 2, 3, 4, 5, NULL);
    sy_tensor *in[1] = {&x};
    sy_op_params p = {.i = {2, 0, 1, 3}};
    sy_tensor o = infer_ok(SY_OP_PERMUTE, in, 1, &p);
    expect_shape(&o, 3, 4, 2, 5);
    cr_assert(o.nb[0] == x.nb[1] && o.nb[1] == x.nb[2] && o.nb[2] == x.nb[0] && o.nb[3] == x.nb[3]);
    cr_assert_eq(o.view_src, &x);
    cr_assert(!sy_tensor_is_contiguous(&o));
    p.i[1] = 2;
    expect_fail(SY_OP_PERMUTE, in, 1, &p, SY_E_INVALID_ARG, "axes (p.i[0..3]) = (2,2,1,3) are not a permutation of 0..3");
    expect_fail(SY_OP_PERMUTE, in, 1, NULL, SY_E_INVALID_ARG, "not a permutation");
}

Test(infer, transpose_swaps_dims_0_and_1_but_not_for_blocks)
{
    sy_tensor x = tu_tensor(SY_DTYPE_F16, 4, 3, 2, 1, NULL);
    sy_tensor *in[1] = {&x};
    sy_tensor o = infer_ok(SY_OP_TRANSPOSE, in, 1, NULL);
    expect_shape(&o, 3, 4, 2, 1);
    cr_assert(o.nb[0] == 8 && o.nb[1] == 2 && o.nb[2] == 24);
    sy_tensor q = tu_tensor(SY_DTYPE_Q4_0, 32, 3, 1, 1, NULL);
    in[0] = &q;
    expect_fail(SY_OP_TRANSPOSE, in, 1, NULL, SY_E_DTYPE, "transpose: cannot move dim 0 of a q4_0 tensor");
}

Test(infer, kv_write_aliases_the_cache_prefix)
{
    sy_tensor cache = tu_tensor(SY_DTYPE_F16, 8, 2, 16, 1, NULL);
    sy_tensor rows = tu_tensor(SY_DTYPE_F32, 8, 2, 3, 1, NULL);
    sy_tensor *in[2] = {&cache, &rows};
    sy_op_params p = {.i = {5}};
    sy_tensor o = infer_ok(SY_OP_KV_WRITE, in, 2, &p);
    cr_assert_eq(o.dtype, SY_DTYPE_F16);
    expect_shape(&o, 8, 2, 8, 1);
    cr_assert_eq(o.view_src, &cache);
    cr_assert_eq(o.view_offset, 0);
    cr_assert(memcmp(o.nb, cache.nb, sizeof o.nb) == 0);
    p.i[0] = 14;
    expect_fail(SY_OP_KV_WRITE, in, 2, &p, SY_E_SHAPE,
                "kv_write: writing 3 rows at start 14 (p.i[0]) overflows the cache of 16 rows");
    p.i[0] = -1;
    expect_fail(SY_OP_KV_WRITE, in, 2, &p, SY_E_SHAPE, "at start -1");
    p.i[0] = 0;
    cache.dtype = SY_DTYPE_BF16;
    expect_fail(SY_OP_KV_WRITE, in, 2, &p, SY_E_DTYPE, "cache must be f32, f16, q8_0 or q4_0, got bf16");
    cache = tu_tensor(SY_DTYPE_F32, 8, 4, 16, 1, NULL);
    expect_fail(SY_OP_KV_WRITE, in, 2, &p, SY_E_SHAPE, "same D and H");
}

/* With a run-time start (in2), the output is the whole cache and the
 * start is checked when the node runs. */
Test(infer, kv_write_with_a_run_time_start_aliases_the_whole_cache)
{
    sy_tensor cache = tu_tensor(SY_DTYPE_F16, 8, 2, 16, 1, NULL);
    sy_tensor rows = tu_tensor(SY_DTYPE_F32, 8, 2, 3, 1, NULL);
    sy_tensor start = tu_tensor(SY_DTYPE_I32, 1, 1, 1, 1, NULL);
    sy_tensor *in[3] = {&cache, &rows, &start};
    sy_op_params p = {.i = {0}};
    sy_tensor o = infer_ok(SY_OP_KV_WRITE, in, 3, &p);
    expect_shape(&o, 8, 2, 16, 1);
    cr_assert_eq(o.view_src, &cache);
    p.i[0] = 5;
    expect_fail(SY_OP_KV_WRITE, in, 3, &p, SY_E_INVALID_ARG,
                "kv_write: p.i[0] must be 0 when start (in2) gives it at run time, got 5");
    p.i[0] = 0;
    start.dtype = SY_DTYPE_F32;
    expect_fail(SY_OP_KV_WRITE, in, 3, &p, SY_E_DTYPE, "kv_write: start must be i32, got f32");
    start = tu_tensor(SY_DTYPE_I32, 2, 1, 1, 1, NULL);
    expect_fail(SY_OP_KV_WRITE, in, 3, &p, SY_E_SHAPE, "kv_write: start must be one element");
    start = tu_tensor(SY_DTYPE_I32, 1, 1, 1, 1, NULL);
    rows = tu_tensor(SY_DTYPE_F32, 8, 2, 17, 1, NULL);
    expect_fail(SY_OP_KV_WRITE, in, 3, &p, SY_E_SHAPE,
                "kv_write: writing 17 rows overflows the cache of 16 rows");
    expect_fail(SY_OP_KV_WRITE, in, 4, &p, SY_E_INVALID_ARG, "kv_write: takes 2 or 3 inputs, got 4");
}

Test(infer, attention_with_a_run_time_n_past_checks_its_input)
{
    sy_tensor q = tu_tensor(SY_DTYPE_F32, 8, 4, 2, 1, NULL);
    sy_tensor k = tu_tensor(SY_DTYPE_F16, 8, 2, 16, 1, NULL);
    sy_tensor v = tu_tensor(SY_DTYPE_F16, 8, 2, 16, 1, NULL);
    sy_tensor n_past = tu_tensor(SY_DTYPE_I32, 1, 1, 1, 1, NULL);
    sy_tensor *in[4] = {&q, &k, &v, &n_past};
    sy_op_params p = {.i = {0, 0}, .f = {0.5f}};
    sy_tensor o = infer_ok(SY_OP_ATTENTION, in, 4, &p);
    expect_shape(&o, 8, 4, 2, 1);
    p.i[0] = 3;
    expect_fail(SY_OP_ATTENTION, in, 4, &p, SY_E_INVALID_ARG,
                "attention: p.i[0] must be 0 when n_past (in3) gives it at run time, got 3");
    p.i[0] = 0;
    n_past.dtype = SY_DTYPE_F16;
    expect_fail(SY_OP_ATTENTION, in, 4, &p, SY_E_DTYPE, "attention: n_past must be i32, got f16");
    expect_fail(SY_OP_ATTENTION, in, 2, &p, SY_E_INVALID_ARG, "attention: takes 3 or 4 inputs, got 2");
}

Test(infer, leaves_the_error_buffer_empty_on_success_and_accepts_null)
{
    sy_tensor x = tu_tensor(SY_DTYPE_F32, 4, 1, 1, 1, NULL);
    sy_tensor *in[1] = {&x};
    char err[32] = "stale";
    sy_tensor o;
    cr_assert_eq(sy_op_infer(SY_OP_SILU, in, 1, NULL, &o, err, sizeof err), SY_OK);
    cr_assert_str_eq(err, "");
    cr_assert_eq(sy_op_infer(SY_OP_SILU, in, 2, NULL, &o, NULL, 0), SY_E_INVALID_ARG);
    char tiny[8];
    cr_assert_eq(sy_op_infer(SY_OP_SILU, in, 2, NULL, &o, tiny, sizeof tiny), SY_E_INVALID_ARG);
    cr_assert_eq(strlen(tiny), 7, "messages are truncated, still terminated");
}

/* ------------------------------------------------------------------ costs */

static sy_node node_of(sy_op op, sy_tensor **in, uint32_t n, sy_tensor *out, const sy_op_params *p)
{
    sy_node node;
    memset(&node, 0, sizeof node);
    node.op = op;
    node.n_inputs = n;
    for (uint32_t i = 0; i < n; i++)
        node.inputs[i] = in[i];
    node.output = out;
    if (p)
        node.params = *p;
    return node;
}

Test(cost, matmul_counts_2knm_per_batch_and_quantized_weight_bytes)
{
    sy_tensor w = tu_tensor(SY_DTYPE_Q4_0, 64, 10, 1, 1, NULL);
    sy_tensor x = tu_tensor(SY_DTYPE_F32, 64, 3, 2, 1, NULL);
    sy_tensor *in[2] = {&w, &x};
    sy_tensor o = infer_ok(SY_OP_MATMUL, in, 2, NULL);
    sy_node n = node_of(SY_OP_MATMUL, in, 2, &o, NULL);
    uint64_t flops = 0, bytes = 0;
    sy_op_cost(&n, &flops, &bytes);
    cr_assert_eq(flops, 2ull * 64 * 10 * 3 * 2);
    /* weight 10 rows * 2 blocks * 18 bytes, input 64*3*2*4, output 10*3*2*4 */
    cr_assert_eq(bytes, 360ull + 1536 + 240, "bytes = %llu", (unsigned long long)bytes);
}

Test(cost, attention_counts_4dtshq)
{
    sy_tensor q = tu_tensor(SY_DTYPE_F32, 16, 8, 3, 1, NULL);
    sy_tensor k = tu_tensor(SY_DTYPE_F16, 16, 2, 10, 1, NULL);
    sy_tensor v = tu_tensor(SY_DTYPE_F16, 16, 2, 10, 1, NULL);
    sy_tensor *in[3] = {&q, &k, &v};
    const sy_op_params p = {.i = {7}, .f = {0.25f}};
    sy_tensor o = infer_ok(SY_OP_ATTENTION, in, 3, &p);
    sy_node n = node_of(SY_OP_ATTENTION, in, 3, &o, &p);
    uint64_t flops = 0, bytes = 0;
    sy_op_cost(&n, &flops, &bytes);
    cr_assert_eq(flops, 4ull * 16 * 3 * 10 * 8);
    cr_assert_eq(bytes, 16ull * 8 * 3 * 4 * 2 + 2 * 16 * 2 * 10 * 2);
}

Test(cost, elementwise_ops_count_one_flop_per_element_and_views_nothing)
{
    sy_tensor a = tu_tensor(SY_DTYPE_F32, 10, 4, 1, 1, NULL);
    sy_tensor b = tu_tensor(SY_DTYPE_F32, 10, 1, 1, 1, NULL);
    sy_tensor *in[2] = {&a, &b};
    sy_tensor o = infer_ok(SY_OP_ADD, in, 2, NULL);
    sy_node n = node_of(SY_OP_ADD, in, 2, &o, NULL);
    uint64_t flops = 0, bytes = 0;
    sy_op_cost(&n, &flops, &bytes);
    cr_assert_eq(flops, 40);
    cr_assert_eq(bytes, 160 + 40 + 160);

    sy_tensor t = infer_ok(SY_OP_TRANSPOSE, in, 1, NULL);
    n = node_of(SY_OP_TRANSPOSE, in, 1, &t, NULL);
    flops = bytes = 99;
    sy_op_cost(&n, &flops, &bytes);
    cr_assert(flops == 0 && bytes == 0);
    sy_op_cost(NULL, &flops, &bytes);
    cr_assert(flops == 0 && bytes == 0);
}

Test(cost, kv_write_counts_only_the_new_rows)
{
    sy_tensor cache = tu_tensor(SY_DTYPE_Q8_0, 64, 2, 100, 1, NULL);
    sy_tensor rows = tu_tensor(SY_DTYPE_F32, 64, 2, 1, 1, NULL);
    sy_tensor *in[2] = {&cache, &rows};
    const sy_op_params p = {.i = {50}};
    sy_tensor o = infer_ok(SY_OP_KV_WRITE, in, 2, &p);
    sy_node n = node_of(SY_OP_KV_WRITE, in, 2, &o, &p);
    uint64_t flops = 0, bytes = 0;
    sy_op_cost(&n, &flops, &bytes);
    cr_assert_eq(flops, 128);
    cr_assert_eq(bytes, 512 + 2 * 68);
}

Test(cost, get_rows_reads_only_the_selected_rows)
{
    sy_tensor table = tu_tensor(SY_DTYPE_Q8_0, 64, 1000, 1, 1, NULL);
    sy_tensor ids = tu_tensor(SY_DTYPE_I32, 3, 1, 1, 1, NULL);
    sy_tensor *in[2] = {&table, &ids};
    sy_tensor o = infer_ok(SY_OP_GET_ROWS, in, 2, NULL);
    sy_node n = node_of(SY_OP_GET_ROWS, in, 2, &o, NULL);
    uint64_t flops = 0, bytes = 0;
    sy_op_cost(&n, &flops, &bytes);
    cr_assert_eq(flops, 192);
    cr_assert_eq(bytes, 3 * 68 + 12 + 192 * 4);
}
