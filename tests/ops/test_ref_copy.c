/* Reference COPY, KV_WRITE, GET_ROWS, the no-op view kernels, and the
 * refusals of sy_op_reference_execute() itself. */
#include "ops_test_util.h"

static sy_node make_node(sy_op op, sy_tensor **in, uint32_t n, sy_tensor *out, const sy_op_params *p)
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

/* ------------------------------------------------------------------ copy */

Test(ref_copy, makes_a_transposed_view_contiguous)
{
    float a[6] = {1, 2, 3, 4, 5, 6}; /* [3,2] */
    sy_tensor base = tu_tensor(SY_DTYPE_F32, 3, 2, 1, 1, a);
    sy_tensor tv, *tin[1] = {&base};
    cr_assert_eq(sy_op_infer(SY_OP_TRANSPOSE, tin, 1, NULL, &tv, NULL, 0), SY_OK);
    tv.data = a;
    sy_tensor out, *in[1] = {&tv};
    const sy_op_params p = {.i = {SY_DTYPE_F32}};
    cr_assert_eq(tu_run(SY_OP_COPY, in, 1, &p, &out), SY_OK);
    cr_assert(sy_tensor_is_contiguous(&out));
    const float want[6] = {1, 4, 2, 5, 3, 6};
    for (int i = 0; i < 6; i++)
        cr_assert_eq(((float *)out.data)[i], want[i], "[%d]", i);
    free(out.data);
}

Test(ref_copy, converts_f32_to_f16_and_bf16_with_the_scalar_rounding)
{
    float x[4] = {1.0f + 0x1p-11f, -0.1f, 70000.0f, 3.0f};
    sy_tensor t = tu_tensor(SY_DTYPE_F32, 4, 1, 1, 1, x);
    sy_tensor out, *in[1] = {&t};
    sy_op_params p = {.i = {SY_DTYPE_F16}};
    cr_assert_eq(tu_run(SY_OP_COPY, in, 1, &p, &out), SY_OK);
    for (int i = 0; i < 4; i++)
        cr_assert_eq(((uint16_t *)out.data)[i], sy__f32_to_fp16(x[i]));
    cr_assert_eq(((uint16_t *)out.data)[2], 0x7c00, "70000 overflows f16");
    free(out.data);
    p.i[0] = SY_DTYPE_BF16;
    cr_assert_eq(tu_run(SY_OP_COPY, in, 1, &p, &out), SY_OK);
    for (int i = 0; i < 4; i++)
        cr_assert_eq(((uint16_t *)out.data)[i], sy__f32_to_bf16(x[i]));
    free(out.data);
}

Test(ref_copy, quantizes_rows_exactly_like_the_row_quantizer)
{
    tu_rng rng = tu_rng_fresh();
    float x[128];
    tu_fill(&rng, x, 128, -3, 3);
    const sy_dtype types[3] = {SY_DTYPE_Q8_0, SY_DTYPE_Q4_0, SY_DTYPE_Q4_1};
    for (int i = 0; i < 3; i++) {
        sy_tensor t = tu_tensor(SY_DTYPE_F32, 64, 2, 1, 1, x);
        sy_tensor out, *in[1] = {&t};
        const sy_op_params p = {.i = {types[i]}};
        cr_assert_eq(tu_run(SY_OP_COPY, in, 1, &p, &out), SY_OK);
        uint8_t want[2 * 2 * 34];
        cr_assert_eq(sy__quantize_row(types[i], x, want, 128), SY_OK);
        cr_assert(memcmp(out.data, want, sy_tensor_nbytes(&out)) == 0, "%s seed %llu",
                  sy_dtype_name(types[i]), (unsigned long long)rng.seed);
        free(out.data);
    }
}

Test(ref_copy, dequantizes_k_quants_and_moves_same_type_blocks_as_bytes)
{
    tu_rng rng = tu_rng_fresh();
    uint8_t blk[2 * 144];
    for (size_t i = 0; i < sizeof blk; i++)
        blk[i] = (uint8_t)tu_next(&rng);
    for (int b = 0; b < 2; b++) {
        blk[b * 144 + 1] = 0x20; /* d, dmin: small finite halves */
        blk[b * 144 + 3] = 0x1c;
    }
    sy_tensor t = tu_tensor(SY_DTYPE_Q4_K, 256, 2, 1, 1, blk);
    sy_tensor out, *in[1] = {&t};
    sy_op_params p = {.i = {SY_DTYPE_F32}};
    cr_assert_eq(tu_run(SY_OP_COPY, in, 1, &p, &out), SY_OK);
    float want[512];
    cr_assert_eq(sy__dequantize_row(SY_DTYPE_Q4_K, blk, want, 512), SY_OK);
    cr_assert(memcmp(out.data, want, sizeof want) == 0);
    free(out.data);

    p.i[0] = SY_DTYPE_Q4_K;
    cr_assert_eq(tu_run(SY_OP_COPY, in, 1, &p, &out), SY_OK);
    cr_assert(memcmp(out.data, blk, sizeof blk) == 0);
    free(out.data);
}

Test(ref_copy, keeps_i32_values_beyond_float_precision)
{
    int32_t v[3] = {16777217, -2147483647, 5};
    sy_tensor t = tu_tensor(SY_DTYPE_I32, 3, 1, 1, 1, v);
    sy_tensor out, *in[1] = {&t};
    sy_op_params p = {.i = {SY_DTYPE_I32}};
    cr_assert_eq(tu_run(SY_OP_COPY, in, 1, &p, &out), SY_OK);
    cr_assert(memcmp(out.data, v, sizeof v) == 0, "a same-type copy must not go through float");
    free(out.data);

    float f[3] = {2.5f, -0.4f, 7.0f};
    sy_tensor tf = tu_tensor(SY_DTYPE_F32, 3, 1, 1, 1, f);
    in[0] = &tf;
    cr_assert_eq(tu_run(SY_OP_COPY, in, 1, &p, &out), SY_OK);
    const int32_t *y = out.data;
    cr_assert(y[0] == 3 && y[1] == 0 && y[2] == 7);
    free(out.data);
}

Test(ref_copy, converts_a_strided_f16_view_to_bf16)
{
    uint16_t h[6];
    const float vals[6] = {1, 2, 3, 4, 5, 6};
    for (int i = 0; i < 6; i++)
        h[i] = sy__f32_to_fp16(vals[i]);
    sy_tensor base = tu_tensor(SY_DTYPE_F16, 2, 3, 1, 1, h);
    sy_tensor tv, *tin[1] = {&base};
    cr_assert_eq(sy_op_infer(SY_OP_TRANSPOSE, tin, 1, NULL, &tv, NULL, 0), SY_OK);
    tv.data = h;
    sy_tensor out, *in[1] = {&tv};
    const sy_op_params p = {.i = {SY_DTYPE_BF16}};
    cr_assert_eq(tu_run(SY_OP_COPY, in, 1, &p, &out), SY_OK);
    const float want[6] = {1, 3, 5, 2, 4, 6};
    for (int i = 0; i < 6; i++)
        cr_assert_eq(sy__bf16_to_f32(((uint16_t *)out.data)[i]), want[i], "[%d]", i);
    free(out.data);
}

/* -------------------------------------------------------------- kv_write */

Test(ref_kv_write, writes_rows_p_to_p_plus_t_and_nothing_else)
{
    enum { D = 4, H = 2, C = 6, T = 2, P = 3 };
    uint16_t cache[D * H * C];
    for (int i = 0; i < D * H * C; i++)
        cache[i] = 0x7777;
    float rows[D * H * T];
    for (int i = 0; i < D * H * T; i++)
        rows[i] = (float)i * 0.5f - 3.0f;
    sy_tensor tc = tu_tensor(SY_DTYPE_F16, D, H, C, 1, cache);
    sy_tensor tr = tu_tensor(SY_DTYPE_F32, D, H, T, 1, rows);
    sy_tensor *in[2] = {&tc, &tr};
    const sy_op_params p = {.i = {P}};
    sy_tensor out;
    memset(&out, 0, sizeof out);
    cr_assert_eq(sy_op_infer(SY_OP_KV_WRITE, in, 2, &p, &out, NULL, 0), SY_OK);
    out.data = cache; /* the runtime points the alias at the cache's row 0 */
    sy_node node = make_node(SY_OP_KV_WRITE, in, 2, &out, &p);
    cr_assert_eq(sy_op_reference_execute(&node), SY_OK);
    for (int s = 0; s < C; s++)
        for (int h = 0; h < H; h++)
            for (int i = 0; i < D; i++) {
                const uint16_t got = cache[(s * H + h) * D + i];
                if (s >= P && s < P + T)
                    cr_assert_eq(got, sy__f32_to_fp16(rows[((s - P) * H + h) * D + i]), "row %d h %d i %d", s, h, i);
                else
                    cr_assert_eq(got, 0x7777, "row %d was touched", s);
            }
}

/* The run-time start (in2) writes where the params' start would, and a
 * start that puts the rows past the cache fails without writing. */
Test(ref_kv_write, takes_its_start_from_the_run_time_input)
{
    enum { D = 4, H = 2, C = 6, T = 2 };
    float rows[D * H * T];
    for (int i = 0; i < D * H * T; i++)
        rows[i] = (float)i * 0.25f - 1.0f;
    for (int32_t at = -1; at <= C - T + 1; at++) {
        uint16_t want[D * H * C], got[D * H * C];
        for (int i = 0; i < D * H * C; i++)
            want[i] = got[i] = 0x7777;
        sy_tensor tw = tu_tensor(SY_DTYPE_F16, D, H, C, 1, want);
        sy_tensor tg = tu_tensor(SY_DTYPE_F16, D, H, C, 1, got);
        sy_tensor tr = tu_tensor(SY_DTYPE_F32, D, H, T, 1, rows);
        sy_tensor ts = tu_tensor(SY_DTYPE_I32, 1, 1, 1, 1, &at);
        const bool fits = at >= 0 && at + T <= C;
        if (fits) { /* the params' form, as the oracle */
            sy_tensor *in[2] = {&tw, &tr};
            const sy_op_params p = {.i = {at}};
            sy_tensor out;
            memset(&out, 0, sizeof out);
            cr_assert_eq(sy_op_infer(SY_OP_KV_WRITE, in, 2, &p, &out, NULL, 0), SY_OK);
            out.data = want;
            sy_node node = make_node(SY_OP_KV_WRITE, in, 2, &out, &p);
            cr_assert_eq(sy_op_reference_execute(&node), SY_OK);
        }
        sy_tensor *in[3] = {&tg, &tr, &ts};
        const sy_op_params p = {.i = {0}};
        sy_tensor out;
        memset(&out, 0, sizeof out);
        cr_assert_eq(sy_op_infer(SY_OP_KV_WRITE, in, 3, &p, &out, NULL, 0), SY_OK);
        cr_assert_eq(out.ne[2], C);
        out.data = got;
        sy_node node = make_node(SY_OP_KV_WRITE, in, 3, &out, &p);
        cr_assert_eq(sy_op_reference_execute(&node), fits ? SY_OK : SY_E_INVALID_ARG, "start %d",
                     at);
        cr_assert(memcmp(got, want, sizeof got) == 0, "start %d: the cache differs", at);
    }
}

Test(ref_kv_write, quantizes_into_a_q8_0_cache)
{
    enum { D = 32, C = 4 };
    uint8_t cache[C * 34];
    memset(cache, 0x55, sizeof cache);
    float rows[D];
    for (int i = 0; i < D; i++)
        rows[i] = (float)(i - 10) * 0.3f;
    sy_tensor tc = tu_tensor(SY_DTYPE_Q8_0, D, 1, C, 1, cache);
    sy_tensor tr = tu_tensor(SY_DTYPE_F32, D, 1, 1, 1, rows);
    sy_tensor *in[2] = {&tc, &tr};
    const sy_op_params p = {.i = {2}};
    sy_tensor out;
    cr_assert_eq(sy_op_infer(SY_OP_KV_WRITE, in, 2, &p, &out, NULL, 0), SY_OK);
    out.data = cache;
    sy_node node = make_node(SY_OP_KV_WRITE, in, 2, &out, &p);
    cr_assert_eq(sy_op_reference_execute(&node), SY_OK);
    uint8_t want[34];
    cr_assert_eq(sy__quantize_row(SY_DTYPE_Q8_0, rows, want, D), SY_OK);
    cr_assert(memcmp(cache + 2 * 34, want, 34) == 0);
    for (int i = 0; i < 2 * 34; i++)
        cr_assert_eq(cache[i], 0x55, "byte %d before the written row changed", i);
    for (int i = 3 * 34; i < 4 * 34; i++)
        cr_assert_eq(cache[i], 0x55, "byte %d after the written row changed", i);
}

/* -------------------------------------------------------------- get_rows */

Test(ref_get_rows, gathers_dequantized_rows_by_id)
{
    float src[3 * 32];
    for (int i = 0; i < 3 * 32; i++)
        src[i] = (float)(i % 32) - (float)(i / 32) * 5.0f;
    uint8_t table[3 * 34];
    cr_assert_eq(sy__quantize_row(SY_DTYPE_Q8_0, src, table, 96), SY_OK);
    int32_t ids[3] = {2, 0, 2};
    sy_tensor tt = tu_tensor(SY_DTYPE_Q8_0, 32, 3, 1, 1, table);
    sy_tensor ti = tu_tensor(SY_DTYPE_I32, 3, 1, 1, 1, ids);
    sy_tensor out, *in[2] = {&tt, &ti};
    cr_assert_eq(tu_run(SY_OP_GET_ROWS, in, 2, NULL, &out), SY_OK);
    float row[32];
    for (int m = 0; m < 3; m++) {
        cr_assert_eq(sy__dequantize_row(SY_DTYPE_Q8_0, table + ids[m] * 34, row, 32), SY_OK);
        cr_assert(memcmp((float *)out.data + m * 32, row, sizeof row) == 0, "row %d", m);
    }
    free(out.data);
}

Test(ref_get_rows, refuses_out_of_range_ids)
{
    float table[8] = {0};
    int32_t ids[2] = {1, 4};
    sy_tensor tt = tu_tensor(SY_DTYPE_F32, 2, 4, 1, 1, table);
    sy_tensor ti = tu_tensor(SY_DTYPE_I32, 2, 1, 1, 1, ids);
    sy_tensor out, *in[2] = {&tt, &ti};
    cr_assert_eq(tu_run(SY_OP_GET_ROWS, in, 2, NULL, &out), SY_E_INVALID_ARG);
    free(out.data);
    ids[1] = -1;
    cr_assert_eq(tu_run(SY_OP_GET_ROWS, in, 2, NULL, &out), SY_E_INVALID_ARG);
    free(out.data);
}

/* ----------------------------------------------------- views and refusals */

Test(ref_execute, view_ops_compute_nothing)
{
    float a[4] = {1, 2, 3, 4};
    sy_tensor t = tu_tensor(SY_DTYPE_F32, 2, 2, 1, 1, a);
    sy_tensor out, *in[1] = {&t};
    cr_assert_eq(sy_op_infer(SY_OP_TRANSPOSE, in, 1, NULL, &out, NULL, 0), SY_OK);
    out.data = NULL; /* a view kernel must not even look */
    sy_node node = make_node(SY_OP_TRANSPOSE, in, 1, &out, NULL);
    cr_assert_eq(sy_op_reference_execute(&node), SY_OK);
    cr_assert(a[0] == 1 && a[1] == 2 && a[2] == 3 && a[3] == 4);
}

Test(ref_execute, refuses_malformed_nodes_without_touching_memory)
{
    float a[4] = {1, 2, 3, 4}, o[4] = {9, 9, 9, 9};
    sy_tensor t = tu_tensor(SY_DTYPE_F32, 4, 1, 1, 1, a);
    sy_tensor out = tu_tensor(SY_DTYPE_F32, 4, 1, 1, 1, o);
    sy_tensor *in[1] = {&t};
    sy_node node = make_node(SY_OP_SILU, in, 1, &out, NULL);
    cr_assert_eq(sy_op_reference_execute(NULL), SY_E_INVALID_ARG);

    out.ne[0] = 3;
    cr_assert_eq(sy_op_reference_execute(&node), SY_E_SHAPE, "output shape differs from the inferred one");
    out.ne[0] = 4;
    out.dtype = SY_DTYPE_F16;
    cr_assert_eq(sy_op_reference_execute(&node), SY_E_DTYPE, "output dtype differs");
    out.dtype = SY_DTYPE_F32;
    t.data = NULL;
    cr_assert_eq(sy_op_reference_execute(&node), SY_E_INVALID_ARG, "input without data");
    t.data = a;
    t.dtype = SY_DTYPE_I32;
    cr_assert_eq(sy_op_reference_execute(&node), SY_E_DTYPE, "silu of i32 is refused by inference");
    t.dtype = SY_DTYPE_F32;
    node.op = SY_OP_NONE;
    cr_assert_eq(sy_op_reference_execute(&node), SY_E_UNSUPPORTED);
    node.op = SY_OP_COUNT + 3;
    cr_assert_eq(sy_op_reference_execute(&node), SY_E_UNSUPPORTED);
    node.op = SY_OP_SILU;
    node.n_inputs = 2;
    cr_assert_eq(sy_op_reference_execute(&node), SY_E_INVALID_ARG);
    for (int i = 0; i < 4; i++)
        cr_assert_eq(o[i], 9.0f, "a refused node wrote its output");

    node.n_inputs = 1;
    cr_assert_eq(sy_op_reference_execute(&node), SY_OK, "the repaired node runs");
    cr_assert_neq(o[0], 9.0f);
}

Test(ref_execute, writes_through_a_strided_output)
{
    float a[4] = {1, 2, 3, 4};
    float o[8] = {0};
    sy_tensor t = tu_tensor(SY_DTYPE_F32, 4, 1, 1, 1, a);
    sy_tensor out = tu_tensor(SY_DTYPE_F32, 4, 1, 1, 1, o);
    out.nb[0] = 8; /* every other float */
    sy_tensor *in[1] = {&t};
    const sy_op_params p = {.f = {10.0f, 0.0f}};
    sy_node node = make_node(SY_OP_SCALE, in, 1, &out, &p);
    cr_assert_eq(sy_op_reference_execute(&node), SY_OK);
    const float want[8] = {10, 0, 20, 0, 30, 0, 40, 0};
    for (int i = 0; i < 8; i++)
        cr_assert_eq(o[i], want[i], "o[%d] = %g", i, (double)o[i]);
}
