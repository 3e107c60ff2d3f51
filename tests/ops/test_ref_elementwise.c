/* Reference kernels of the elementwise, norm, rope and argmax families
 * against values computed by hand. */
#include "ops_test_util.h"

#define EPS 1e-6f

Test(ref_elementwise, add_broadcasts_a_row_and_a_column)
{
    float a[6] = {1, 2, 3, 4, 5, 6}; /* [3,2] */
    float row[3] = {10, 20, 30};     /* [3,1] */
    float col[2] = {1, -1};          /* [1,2] */
    sy_tensor ta = tu_tensor(SY_DTYPE_F32, 3, 2, 1, 1, a);
    sy_tensor tr = tu_tensor(SY_DTYPE_F32, 3, 1, 1, 1, row);
    sy_tensor tc = tu_tensor(SY_DTYPE_F32, 1, 2, 1, 1, col);
    sy_tensor out;
    sy_tensor *in[2] = {&ta, &tr};
    cr_assert_eq(tu_run(SY_OP_ADD, in, 2, NULL, &out), SY_OK);
    const float want_r[6] = {11, 22, 33, 14, 25, 36};
    for (int i = 0; i < 6; i++)
        cr_assert_eq(((float *)out.data)[i], want_r[i], "row broadcast [%d]", i);
    free(out.data);

    in[1] = &tc;
    cr_assert_eq(tu_run(SY_OP_ADD, in, 2, NULL, &out), SY_OK);
    const float want_c[6] = {2, 3, 4, 3, 4, 5};
    for (int i = 0; i < 6; i++)
        cr_assert_eq(((float *)out.data)[i], want_c[i], "column broadcast [%d]", i);
    free(out.data);
}

Test(ref_elementwise, mul_reads_a_transposed_view_through_its_strides)
{
    float a[6] = {1, 2, 3, 4, 5, 6}; /* storage [3,2]; transposed view is [2,3] */
    sy_tensor base = tu_tensor(SY_DTYPE_F32, 3, 2, 1, 1, a);
    sy_tensor *tin[1] = {&base};
    sy_tensor tv;
    memset(&tv, 0, sizeof tv);
    cr_assert_eq(sy_op_infer(SY_OP_TRANSPOSE, tin, 1, NULL, &tv, NULL, 0), SY_OK);
    tv.data = a;
    float b[6] = {1, 10, 100, 1000, 10000, 100000}; /* [2,3] */
    sy_tensor tb = tu_tensor(SY_DTYPE_F32, 2, 3, 1, 1, b);
    sy_tensor out;
    sy_tensor *in[2] = {&tv, &tb};
    cr_assert_eq(tu_run(SY_OP_MUL, in, 2, NULL, &out), SY_OK);
    /* transposed element (i0, i1) = a[i0 * 3 + i1] */
    const float want[6] = {1 * 1, 4 * 10, 2 * 100, 5 * 1000, 3 * 10000, 6 * 100000};
    for (int i = 0; i < 6; i++)
        cr_assert_eq(((float *)out.data)[i], want[i], "[%d] = %g", i, (double)((float *)out.data)[i]);
    free(out.data);
}

Test(ref_elementwise, scale_multiplies_then_adds_the_bias)
{
    float x[4] = {0, 1, -2, 0.5f};
    sy_tensor t = tu_tensor(SY_DTYPE_F32, 4, 1, 1, 1, x);
    sy_tensor out, *in[1] = {&t};
    const sy_op_params p = {.f = {2.0f, 1.0f}};
    cr_assert_eq(tu_run(SY_OP_SCALE, in, 1, &p, &out), SY_OK);
    const float want[4] = {1, 3, -3, 2};
    for (int i = 0; i < 4; i++)
        cr_assert_eq(((float *)out.data)[i], want[i]);
    free(out.data);
}

Test(ref_elementwise, silu_and_gelu_match_hand_values)
{
    float x[4] = {1.0f, -2.0f, 0.5f, 0.0f};
    sy_tensor t = tu_tensor(SY_DTYPE_F32, 4, 1, 1, 1, x);
    sy_tensor out, *in[1] = {&t};
    cr_assert_eq(tu_run(SY_OP_SILU, in, 1, NULL, &out), SY_OK);
    const float *y = out.data;
    cr_assert_float_eq(y[0], 0.7310585786f, EPS);
    cr_assert_float_eq(y[1], -0.2384058440f, EPS);
    cr_assert_float_eq(y[2], 0.3112296656f, EPS);
    cr_assert_eq(y[3], 0.0f);
    free(out.data);

    x[1] = -1.0f;
    cr_assert_eq(tu_run(SY_OP_GELU, in, 1, NULL, &out), SY_OK);
    y = out.data;
    cr_assert_float_eq(y[0], 0.8411919906f, EPS, "gelu(1) uses the tanh approximation");
    cr_assert_float_eq(y[1], -0.1588080094f, EPS);
    cr_assert_float_eq(y[2], 0.3457140098f, EPS);
    cr_assert_eq(y[3], 0.0f);
    free(out.data);
}

Test(ref_elementwise, swiglu_and_geglu_gate_the_up_projection)
{
    float g[2] = {1.0f, 0.5f}, u[2] = {2.0f, -4.0f};
    sy_tensor tg = tu_tensor(SY_DTYPE_F32, 2, 1, 1, 1, g);
    sy_tensor tu = tu_tensor(SY_DTYPE_F32, 2, 1, 1, 1, u);
    sy_tensor out, *in[2] = {&tg, &tu};
    cr_assert_eq(tu_run(SY_OP_SWIGLU, in, 2, NULL, &out), SY_OK);
    cr_assert_float_eq(((float *)out.data)[0], 2.0f * 0.7310585786f, EPS);
    cr_assert_float_eq(((float *)out.data)[1], -4.0f * 0.3112296656f, EPS);
    free(out.data);
    cr_assert_eq(tu_run(SY_OP_GEGLU, in, 2, NULL, &out), SY_OK);
    cr_assert_float_eq(((float *)out.data)[0], 2.0f * 0.8411919906f, EPS);
    cr_assert_float_eq(((float *)out.data)[1], -4.0f * 0.3457140098f, EPS);
    free(out.data);
}

Test(ref_norm, rms_norm_divides_each_row_by_its_root_mean_square)
{
    float x[8] = {1, 2, 3, 4, 0, 0, 0, 0};
    sy_tensor t = tu_tensor(SY_DTYPE_F32, 4, 2, 1, 1, x);
    sy_tensor out, *in[1] = {&t};
    sy_op_params p = {.f = {0.0f}};
    cr_assert_eq(tu_run(SY_OP_RMS_NORM, in, 1, &p, &out), SY_OK);
    const float *y = out.data;
    /* mean(x^2) = (1 + 4 + 9 + 16) / 4 = 7.5 */
    for (int i = 0; i < 4; i++)
        cr_assert_float_eq(y[i], x[i] / sqrtf(7.5f), EPS, "y[%d] = %g", i, (double)y[i]);
    for (int i = 4; i < 8; i++)
        cr_assert_eq(y[i], 0.0f, "an all-zero row with eps 0 stays zero, not NaN");
    free(out.data);

    p.f[0] = 1.0f;
    cr_assert_eq(tu_run(SY_OP_RMS_NORM, in, 1, &p, &out), SY_OK);
    cr_assert_float_eq(((float *)out.data)[3], 4.0f / sqrtf(8.5f), EPS, "eps adds under the root");
    free(out.data);
}

/* x = [1,2,3,4] for one head at positions 0 and 1, base 10000, n_rot 4:
 * theta_0 = pos, theta_1 = pos * 10000^(-2/4) = pos * 0.01. */
Test(ref_rope, normal_mode_rotates_adjacent_pairs)
{
    float x[8] = {1, 2, 3, 4, 1, 2, 3, 4}; /* [4,1,2] */
    int32_t pos[2] = {0, 1};
    sy_tensor tx = tu_tensor(SY_DTYPE_F32, 4, 1, 2, 1, x);
    sy_tensor tp = tu_tensor(SY_DTYPE_I32, 2, 1, 1, 1, pos);
    sy_tensor out, *in[2] = {&tx, &tp};
    const sy_op_params p = {.i = {SY_ROPE_NORMAL, 4}, .f = {10000.0f, 0.0f}};
    cr_assert_eq(tu_run(SY_OP_ROPE, in, 2, &p, &out), SY_OK);
    const float *y = out.data;
    for (int i = 0; i < 4; i++)
        cr_assert_float_eq(y[i], x[i], EPS, "position 0 is the identity");
    const double c1 = cos(1.0), s1 = sin(1.0), c2 = cos(0.01), s2 = sin(0.01);
    cr_assert_float_eq(y[4], (float)(1 * c1 - 2 * s1), EPS);
    cr_assert_float_eq(y[5], (float)(1 * s1 + 2 * c1), EPS);
    cr_assert_float_eq(y[6], (float)(3 * c2 - 4 * s2), EPS);
    cr_assert_float_eq(y[7], (float)(3 * s2 + 4 * c2), EPS);
    free(out.data);
}

Test(ref_rope, neox_mode_rotates_dims_half_apart)
{
    float x[8] = {1, 2, 3, 4, 1, 2, 3, 4};
    int32_t pos[2] = {0, 1};
    sy_tensor tx = tu_tensor(SY_DTYPE_F32, 4, 1, 2, 1, x);
    sy_tensor tp = tu_tensor(SY_DTYPE_I32, 2, 1, 1, 1, pos);
    sy_tensor out, *in[2] = {&tx, &tp};
    const sy_op_params p = {.i = {SY_ROPE_NEOX, 4}, .f = {10000.0f, 1.0f}};
    cr_assert_eq(tu_run(SY_OP_ROPE, in, 2, &p, &out), SY_OK);
    const float *y = (const float *)out.data + 4;
    const double c1 = cos(1.0), s1 = sin(1.0), c2 = cos(0.01), s2 = sin(0.01);
    /* pairs (0,2) with theta_0 and (1,3) with theta_1 */
    cr_assert_float_eq(y[0], (float)(1 * c1 - 3 * s1), EPS);
    cr_assert_float_eq(y[2], (float)(1 * s1 + 3 * c1), EPS);
    cr_assert_float_eq(y[1], (float)(2 * c2 - 4 * s2), EPS);
    cr_assert_float_eq(y[3], (float)(2 * s2 + 4 * c2), EPS);
    free(out.data);
}

Test(ref_rope, partial_rotation_passes_the_tail_through_and_applies_freq_scale)
{
    float x[8] = {1, 2, 3, 4, 5, 6, 7, 8}; /* [4,2,1]: two heads, one token */
    int32_t pos[1] = {3};
    sy_tensor tx = tu_tensor(SY_DTYPE_F32, 4, 2, 1, 1, x);
    sy_tensor tp = tu_tensor(SY_DTYPE_I32, 1, 1, 1, 1, pos);
    sy_tensor out, *in[2] = {&tx, &tp};
    const sy_op_params p = {.i = {SY_ROPE_NORMAL, 2}, .f = {10000.0f, 0.5f}};
    cr_assert_eq(tu_run(SY_OP_ROPE, in, 2, &p, &out), SY_OK);
    const float *y = out.data;
    const double th = 3 * 0.5; /* pos * freq_scale * base^0 */
    cr_assert_float_eq(y[0], (float)(1 * cos(th) - 2 * sin(th)), EPS);
    cr_assert_float_eq(y[1], (float)(1 * sin(th) + 2 * cos(th)), EPS);
    cr_assert_eq(y[2], 3.0f, "dims past n_rot pass through");
    cr_assert_eq(y[3], 4.0f);
    cr_assert_float_eq(y[4], (float)(5 * cos(th) - 6 * sin(th)), EPS, "second head rotated too");
    cr_assert_eq(y[7], 8.0f);
    free(out.data);
}

Test(ref_argmax, picks_the_first_maximum_and_skips_nan)
{
    float x[16] = {1, 5, 5, 2,       NAN, -1, -3, -1,
                   NAN, NAN, NAN, NAN, -INFINITY, -INFINITY, -INFINITY, -5};
    sy_tensor t = tu_tensor(SY_DTYPE_F32, 4, 4, 1, 1, x);
    sy_tensor out, *in[1] = {&t};
    cr_assert_eq(tu_run(SY_OP_ARGMAX, in, 1, NULL, &out), SY_OK);
    const int32_t *y = out.data;
    cr_assert_eq(y[0], 1, "ties go to the first maximum");
    cr_assert_eq(y[1], 1, "NaN is no candidate");
    cr_assert_eq(y[2], 0, "an all-NaN row gives 0");
    cr_assert_eq(y[3], 3);
    free(out.data);
}
