/* Helpers shared by every program of the OpenCL plugin: element
 * conversions and the dequantizers of every GGUF block type.  The plugin
 * prepends this file to each kernel family's source (ocl_program.c).
 *
 * Portable OpenCL C 1.2: no half arithmetic (cl_khr_fp16 is optional), no
 * unaligned vector loads of wide types, no subgroups.  The host defines
 * SY_FP64 when the device has cl_khr_fp64; reductions and transcendental
 * functions then run in double like the reference kernels.
 *
 * Conversions are written with integer bit operations so that they are
 * bit-exact with ops/quants.c on every device (vload_half/vstore_half leave
 * NaN payloads to the implementation).  Dequantization performs exactly the
 * float operations of ops/quants.c in the same order; contraction into fma
 * is switched off so that results are bit-exact where the reference is. */
#pragma OPENCL FP_CONTRACT OFF

#ifdef SY_FP64
#pragma OPENCL EXTENSION cl_khr_fp64 : enable
typedef double real;
#else
typedef float real;
#endif

/* sy_dtype values (framework/include/switchyard/types.h). */
#define T_F32 0
#define T_F16 1
#define T_BF16 2
#define T_I32 3
#define T_Q8_0 4
#define T_Q4_0 5
#define T_Q4_1 6
#define T_Q4_K 7
#define T_Q5_K 8
#define T_Q6_K 9
#define T_Q5_0 10
#define T_Q5_1 11

/* Values of the device's error flag, raised by a kernel that finds its
 * data out of range (ocl_internal.h: OCL_FLAG_*). */
#define FLAG_ROW_ID 1
#define FLAG_KV_START 2
#define FLAG_N_PAST 3

/* A tensor is passed as (base, byte offset, byte strides nb, extents ne). */
#define TENSOR_ARGS(n) global uchar *n##_base, ulong n##_off, ulong4 n##_nb, long4 n##_ne
#define CTENSOR_ARGS(n) \
    global const uchar *n##_base, ulong n##_off, ulong4 n##_nb, long4 n##_ne

/* Byte address of element (i0, i1, i2, i3) of a non-block tensor. */
#define ELEM_AT(n, i0, i1, i2, i3)                                                      \
    (n##_base + n##_off + (ulong)(i0) * n##_nb.x + (ulong)(i1) * n##_nb.y +           \
     (ulong)(i2) * n##_nb.z + (ulong)(i3) * n##_nb.w)
/* Byte address of row (i1, i2, i3). */
#define ROW_AT(n, i1, i2, i3)                                                           \
    (n##_base + n##_off + (ulong)(i1) * n##_nb.y + (ulong)(i2) * n##_nb.z +           \
     (ulong)(i3) * n##_nb.w)

/* ------------------------------------------------------------ bit access */

inline ushort ld_u16(const global uchar *p)
{
    return (ushort)(p[0] | (p[1] << 8));
}

inline uint ld_u32(const global uchar *p)
{
    return (uint)p[0] | ((uint)p[1] << 8) | ((uint)p[2] << 16) | ((uint)p[3] << 24);
}

inline void st_u16(global uchar *p, ushort v)
{
    p[0] = (uchar)(v & 0xff);
    p[1] = (uchar)(v >> 8);
}

inline float h2f(ushort h)
{
    const uint sign = (uint)(h & 0x8000u) << 16;
    const uint e = (h >> 10) & 0x1fu;
    const uint mant = h & 0x3ffu;
    if (e == 0x1fu)
        return as_float(sign | 0x7f800000u | (mant << 13));
    if (e == 0u) {
        const float v = (float)mant * (1.0f / 16777216.0f);
        return sign ? -v : v;
    }
    return as_float(sign | ((e + 112u) << 23) | (mant << 13));
}

inline ushort f2h(float f)
{
    const uint x = as_uint(f);
    const ushort sign = (ushort)((x >> 16) & 0x8000u);
    const uint a = x & 0x7fffffffu;
    if (a > 0x7f800000u)
        return (ushort)(sign | 0x7e00u | ((a >> 13) & 0x3ffu));
    if (a >= 0x477ff000u)
        return (ushort)(sign | 0x7c00u);
    if (a < 0x38800000u) {
        const uint e = a >> 23;
        if (e < 102u)
            return sign;
        const uint m = (a & 0x7fffffu) | 0x800000u;
        const uint shift = 126u - e;
        uint q = m >> shift;
        const uint rem = m & ((1u << shift) - 1u);
        const uint half_ = 1u << (shift - 1u);
        if (rem > half_ || (rem == half_ && (q & 1u)))
            q++;
        return (ushort)(sign | q);
    }
    uint h = (a >> 13) - (112u << 10);
    const uint rem = a & 0x1fffu;
    if (rem > 0x1000u || (rem == 0x1000u && (h & 1u)))
        h++;
    return (ushort)(sign | h);
}

inline float bf2f(ushort h)
{
    return as_float((uint)h << 16);
}

inline ushort f2bf(float f)
{
    uint x = as_uint(f);
    if ((x & 0x7fffffffu) > 0x7f800000u)
        return (ushort)((x >> 16) | 0x40u);
    x += 0x7fffu + ((x >> 16) & 1u);
    return (ushort)(x >> 16);
}

/* Round half away from zero with saturation and NaN -> 0, as quants.c. */
inline int f2i32(float v)
{
    if (v != v)
        return 0;
    const float r = round(v);
    if (r >= 2147483648.0f)
        return 2147483647;
    if (r < -2147483648.0f)
        return (int)0x80000000u;
    return (int)r;
}

/* Float to int8 by truncation with saturation, NaN -> 0 (quants.c trunc_i8). */
inline int trunc_i8(float v)
{
    if (v != v)
        return 0;
    if (v >= 127.0f)
        return 127;
    if (v <= -128.0f)
        return -128;
    return (int)v;
}

/* ------------------------------------------------------ dequantization */

/* Bytes per block and elements per block of dtype |t| (0 for unknown). */
inline uint type_size(int t)
{
    switch (t) {
    case T_F32: return 4;
    case T_F16: return 2;
    case T_BF16: return 2;
    case T_I32: return 4;
    case T_Q8_0: return 34;
    case T_Q4_0: return 18;
    case T_Q4_1: return 20;
    case T_Q4_K: return 144;
    case T_Q5_K: return 176;
    case T_Q6_K: return 210;
    case T_Q5_0: return 22;
    case T_Q5_1: return 24;
    default: return 0;
    }
}

inline uint block_size(int t)
{
    switch (t) {
    case T_F32:
    case T_F16:
    case T_BF16:
    case T_I32: return 1;
    case T_Q4_K:
    case T_Q5_K:
    case T_Q6_K: return 256;
    default: return 32;
    }
}

/* One element of a plain (non-block) dtype at |p| as float. */
inline float ld_plain(const global uchar *p, int t)
{
    switch (t) {
    case T_F16: return h2f(ld_u16(p));
    case T_BF16: return bf2f(ld_u16(p));
    case T_I32: return convert_float((int)ld_u32(p));
    default: return as_float(ld_u32(p));
    }
}

/* Stores |v| at |p| as plain dtype |t|. */
inline void st_plain(global uchar *p, int t, float v)
{
    switch (t) {
    case T_F16: st_u16(p, f2h(v)); break;
    case T_BF16: st_u16(p, f2bf(v)); break;
    case T_I32: *(global int *)p = f2i32(v); break;
    default: *(global float *)p = v; break;
    }
}

/* The 6-bit scale and min of sub-block |j| of a Q4_K/Q5_K super-block. */
inline uint2 k_scale_min(int j, const global uchar *q)
{
    if (j < 4)
        return (uint2)(q[j] & 63, q[j + 4] & 63);
    return (uint2)((q[j + 4] & 0x0f) | ((q[j - 4] >> 6) << 4), (q[j + 4] >> 4) | ((q[j] >> 6) << 4));
}

/* Elements e .. e+7 (e a multiple of 8) of the row at |row| for each block
 * type.  Each performs the float operations of ops/quants.c in order, in
 * eight-wide vectors (SIMD on CPU runtimes, fewer instructions on GPUs);
 * bytes are read with vload8, which needs no alignment. */
inline float8 deq8_q8_0(const global uchar *row, long e)
{
    const global uchar *blk = row + (e >> 5) * 34;
    const float d = h2f(ld_u16(blk));
    const char8 q = vload8(0, (const global char *)(blk + 2) + (e & 31));
    return convert_float8(q) * d;
}

/* The nibbles of bytes qs[0..8): low ones for elements j < 16 of a 32-block,
 * high ones above. */
inline int8 nibbles8(const global uchar *qs, int high)
{
    const uchar8 q = vload8(0, qs);
    return convert_int8(high ? q >> (uchar)4 : q & (uchar)0x0f);
}

inline float8 deq8_q4_0(const global uchar *row, long e)
{
    const global uchar *blk = row + (e >> 5) * 18;
    const float d = h2f(ld_u16(blk));
    const int j = (int)(e & 31);
    return convert_float8(nibbles8(blk + 2 + (j & 15), j >= 16) - 8) * d;
}

inline float8 deq8_q4_1(const global uchar *row, long e)
{
    const global uchar *blk = row + (e >> 5) * 20;
    const float d = h2f(ld_u16(blk));
    const float m = h2f(ld_u16(blk + 2));
    const int j = (int)(e & 31);
    return convert_float8(nibbles8(blk + 4 + (j & 15), j >= 16)) * d + m;
}

inline float8 deq8_q5(const global uchar *row, long e, int has_min)
{
    const uint bsz = has_min ? 24 : 22;
    const global uchar *blk = row + (e >> 5) * bsz;
    const float d = h2f(ld_u16(blk));
    const float m = has_min ? h2f(ld_u16(blk + 2)) : 0.0f;
    const uint qh = ld_u32(blk + (has_min ? 4 : 2));
    const int j = (int)(e & 31);
    const int8 lo = nibbles8(blk + (has_min ? 8 : 6) + (j & 15), j >= 16);
    /* Bit j + i of qh is the fifth bit of element j + i. */
    const int8 hi = as_int8(((uint8)(qh >> j) >> (uint8)(0, 1, 2, 3, 4, 5, 6, 7)) & 1u) << 4;
    /* Q5_0 has no min term: adding +0.0 would turn -0.0 into +0.0. */
    if (!has_min)
        return convert_float8((lo | hi) - 16) * d;
    return convert_float8(lo | hi) * d + m;
}

inline float8 deq8_q5_0(const global uchar *row, long e) { return deq8_q5(row, e, 0); }
inline float8 deq8_q5_1(const global uchar *row, long e) { return deq8_q5(row, e, 1); }

inline float8 deq8_q4_k(const global uchar *row, long e)
{
    const global uchar *blk = row + (e >> 8) * 144;
    const float d = h2f(ld_u16(blk));
    const float dmin = h2f(ld_u16(blk + 2));
    const int r = (int)(e & 255);
    const int sb = r >> 5;
    const uint2 sm = k_scale_min(sb, blk + 4);
    const float d1 = d * (float)sm.x, m1 = dmin * (float)sm.y;
    const int8 q = nibbles8(blk + 16 + 32 * (r >> 6) + (r & 31), sb & 1);
    return d1 * convert_float8(q) - m1;
}

inline float8 deq8_q5_k(const global uchar *row, long e)
{
    const global uchar *blk = row + (e >> 8) * 176;
    const float d = h2f(ld_u16(blk));
    const float dmin = h2f(ld_u16(blk + 2));
    const int r = (int)(e & 255);
    const int sb = r >> 5;
    const uint2 sm = k_scale_min(sb, blk + 4);
    const float d1 = d * (float)sm.x, m1 = dmin * (float)sm.y;
    const int l = r & 31;
    const int8 lo = nibbles8(blk + 48 + 32 * (r >> 6) + l, sb & 1);
    /* Bit sb of qh[l] is the fifth bit of element l of sub-block sb. */
    const int8 hi = convert_int8((vload8(0, blk + 16 + l) >> (uchar)sb) & (uchar)1) << 4;
    return d1 * convert_float8(lo + hi) - m1;
}

inline float8 deq8_q6_k(const global uchar *row, long e)
{
    const global uchar *blk = row + (e >> 8) * 210;
    const float d = h2f(ld_u16(blk + 208));
    const int r = (int)(e & 255);
    const int n = r >> 7, quarter = (r & 127) >> 5, l = r & 31;
    const uchar8 ql = vload8(0, blk + 64 * n + 32 * (quarter & 1) + l);
    const uchar8 qh = vload8(0, blk + 128 + 32 * n + l);
    const int8 lo = convert_int8((ql >> (uchar)(4 * (quarter >> 1))) & (uchar)0x0f);
    const int8 hi = convert_int8((qh >> (uchar)(2 * quarter)) & (uchar)3) << 4;
    /* The eight elements share one scale: l is a multiple of 8. */
    const float sc = (float)((const global char *)blk)[192 + 8 * n + 2 * quarter + (l >> 4)];
    return d * sc * convert_float8((lo | hi) - 32);
}

/* Eight halves to floats, exactly as h2f does one. */
inline float8 h2f8(ushort8 h16)
{
    const uint8 h = convert_uint8(h16);
    const uint8 sign = (h & 0x8000u) << 16;
    const uint8 ex = (h >> 10) & 0x1fu;
    const uint8 mant = h & 0x3ffu;
    const uint8 normal = sign | ((ex + 112u) << 23) | (mant << 13);
    const uint8 special = sign | 0x7f800000u | (mant << 13);
    const uint8 tiny = sign | as_uint8(convert_float8(mant) * (1.0f / 16777216.0f));
    uint8 bits = select(normal, special, ex == 0x1fu);
    bits = select(bits, tiny, ex == 0u);
    return as_float8(bits);
}

inline float8 deq8_f32(const global uchar *row, long e)
{
    return vload8(0, (const global float *)row + e);
}

inline float8 deq8_f16(const global uchar *row, long e)
{
    return h2f8(vload8(0, (const global ushort *)row + e));
}

inline float8 deq8_bf16(const global uchar *row, long e)
{
    return as_float8(convert_uint8(vload8(0, (const global ushort *)row + e)) << 16);
}

inline float8 deq8_i32(const global uchar *row, long e)
{
    return convert_float8(vload8(0, (const global int *)row + e));
}

/* Elements e .. e+7 of a dense row of any dtype (e a multiple of 8). */
inline float8 deq8_any(const global uchar *row, long e, int t)
{
    switch (t) {
    case T_F16: return deq8_f16(row, e);
    case T_BF16: return deq8_bf16(row, e);
    case T_I32: return deq8_i32(row, e);
    case T_Q8_0: return deq8_q8_0(row, e);
    case T_Q4_0: return deq8_q4_0(row, e);
    case T_Q4_1: return deq8_q4_1(row, e);
    case T_Q4_K: return deq8_q4_k(row, e);
    case T_Q5_K: return deq8_q5_k(row, e);
    case T_Q6_K: return deq8_q6_k(row, e);
    case T_Q5_0: return deq8_q5_0(row, e);
    case T_Q5_1: return deq8_q5_1(row, e);
    default: return deq8_f32(row, e);
    }
}

/* --------------------------------------------------------- quantization */

/* Quantizes the 32 floats v[0..32) into one block of dtype |t| (Q8_0, Q4_0
 * or Q4_1) at |blk|, exactly as ops/quants.c does. */
inline void quant_block(const float *v, global uchar *blk, int t)
{
    if (t == T_Q8_0) {
        float amax = 0.0f;
        for (int j = 0; j < 32; j++) {
            const float a = fabs(v[j]);
            amax = a > amax ? a : amax;
        }
        const float d = amax / 127.0f;
        const float id = d != 0.0f ? 1.0f / d : 0.0f;
        st_u16(blk, f2h(d));
        global char *qs = (global char *)(blk + 2);
        for (int j = 0; j < 32; j++)
            qs[j] = (char)trunc_i8(round(v[j] * id));
    } else if (t == T_Q4_0) {
        float amax = 0.0f, max = 0.0f;
        for (int j = 0; j < 32; j++) {
            if (amax < fabs(v[j])) {
                amax = fabs(v[j]);
                max = v[j];
            }
        }
        const float d = max / -8.0f;
        const float id = d != 0.0f ? 1.0f / d : 0.0f;
        st_u16(blk, f2h(d));
        for (int j = 0; j < 16; j++) {
            int x0 = trunc_i8(v[j] * id + 8.5f);
            int x1 = trunc_i8(v[j + 16] * id + 8.5f);
            x0 = x0 < 0 ? 0 : (x0 < 15 ? x0 : 15);
            x1 = x1 < 0 ? 0 : (x1 < 15 ? x1 : 15);
            blk[2 + j] = (uchar)(x0 | (x1 << 4));
        }
    } else {
        float min = FLT_MAX, max = -FLT_MAX;
        for (int j = 0; j < 32; j++) {
            min = v[j] < min ? v[j] : min;
            max = v[j] > max ? v[j] : max;
        }
        const float d = (max - min) / 15.0f;
        const float id = d != 0.0f ? 1.0f / d : 0.0f;
        st_u16(blk, f2h(d));
        st_u16(blk + 2, f2h(min));
        for (int j = 0; j < 16; j++) {
            int x0 = trunc_i8((v[j] - min) * id + 0.5f);
            int x1 = trunc_i8((v[j + 16] - min) * id + 0.5f);
            x0 = x0 < 0 ? 0 : (x0 < 15 ? x0 : 15);
            x1 = x1 < 0 ? 0 : (x1 < 15 ? x1 : 15);
            blk[4 + j] = (uchar)(x0 | (x1 << 4));
        }
    }
}

/* ------------------------------------------------------------ reductions */

/* Sums red[0..n) (n a power of two) into red[0]; every work-item of the
 * group must call it.  Leaves a barrier behind so red[0] is visible. */
inline void reduce_sum(local float *red, int lid, int n)
{
    for (int s = n >> 1; s > 0; s >>= 1) {
        barrier(CLK_LOCAL_MEM_FENCE);
        if (lid < s)
            red[lid] += red[lid + s];
    }
    barrier(CLK_LOCAL_MEM_FENCE);
}

inline void reduce_sum_real(local real *red, int lid, int n)
{
    for (int s = n >> 1; s > 0; s >>= 1) {
        barrier(CLK_LOCAL_MEM_FENCE);
        if (lid < s)
            red[lid] += red[lid + s];
    }
    barrier(CLK_LOCAL_MEM_FENCE);
}

inline void reduce_max(local float *red, int lid, int n)
{
    for (int s = n >> 1; s > 0; s >>= 1) {
        barrier(CLK_LOCAL_MEM_FENCE);
        if (lid < s)
            red[lid] = fmax(red[lid], red[lid + s]);
    }
    barrier(CLK_LOCAL_MEM_FENCE);
}
