/* Element-wise F32 ops on any strided layout, one work-item per element
 * (global size ne0 x ne1 x ne2*ne3): ADD and MUL with broadcast of in1,
 * SCALE, SILU, GELU (tanh approximation), SWIGLU, GEGLU.  Arithmetic runs in
 * |real| (double where the device has it) like the reference kernels. */

#define EW_INDEX(ne)                                                                    \
    const long i0 = (long)get_global_id(0), i1 = (long)get_global_id(1);                \
    const long i23 = (long)get_global_id(2);                                            \
    if (i0 >= (ne).x || i1 >= (ne).y || i23 >= (ne).z * (ne).w)                          \
        return;                                                                         \
    const long i2 = i23 % (ne).z, i3 = i23 / (ne).z

#define F32_AT(n, i0, i1, i2, i3) (*(const global float *)ELEM_AT(n, i0, i1, i2, i3))
#define F32_OUT(n, i0, i1, i2, i3) (*(global float *)ELEM_AT(n, i0, i1, i2, i3))

inline real silu_r(real x)
{
    return x / ((real)1 + exp(-x));
}

inline real gelu_r(real x)
{
    const real k = (real)0.79788456080286535588;
    return (real)0.5 * x * ((real)1 + tanh(k * (x + (real)0.044715 * x * x * x)));
}

/* op 0: add, 1: mul. */
kernel void binary(CTENSOR_ARGS(a), CTENSOR_ARGS(b), TENSOR_ARGS(y), int op)
{
    EW_INDEX(a_ne);
    const float x = F32_AT(a, i0, i1, i2, i3);
    const float z = F32_AT(b, i0 % b_ne.x, i1 % b_ne.y, i2 % b_ne.z, i3 % b_ne.w);
    F32_OUT(y, i0, i1, i2, i3) = op == 0 ? x + z : x * z;
}

/* op 0: x * s + bias, 1: silu, 2: gelu. */
kernel void unary(CTENSOR_ARGS(x), TENSOR_ARGS(y), int op, float s, float bias)
{
    EW_INDEX(x_ne);
    const real v = F32_AT(x, i0, i1, i2, i3);
    real r;
    if (op == 0)
        r = v * (real)s + (real)bias;
    else if (op == 1)
        r = silu_r(v);
    else
        r = gelu_r(v);
    F32_OUT(y, i0, i1, i2, i3) = (float)r;
}

/* op 0: silu(gate) * up, 1: gelu(gate) * up. */
kernel void glu(CTENSOR_ARGS(g), CTENSOR_ARGS(u), TENSOR_ARGS(y), int op)
{
    EW_INDEX(g_ne);
    const real gv = F32_AT(g, i0, i1, i2, i3);
    const real uv = F32_AT(u, i0, i1, i2, i3);
    const real a = op == 0 ? silu_r(gv) : gelu_r(gv);
    F32_OUT(y, i0, i1, i2, i3) = (float)(a * uv);
}
