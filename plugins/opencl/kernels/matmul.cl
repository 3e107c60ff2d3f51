/* MATMUL: y[n,m] = sum_k W[k,n] * X[k,m], one kernel pair per weight dtype.
 *
 * W rows are dense (nb[0] is the block size); they are dequantized inside
 * the kernel, eight elements at a time (deq8_* in common.cl).  X is F32 with
 * dense rows and 4-byte aligned; the host converts any other X (F16, strided
 * views) into a scratch buffer first.  Batch dims broadcast as in the
 * reference: input batch i2 reads weight batch i2 / (c2 / b2), same for 3.
 *
 * mv_<t>: the single-token path (mat-vec).  One work-group per output row n
 *   and per group of MV_M columns; its work-items stride over K in chunks of
 *   eight and the partial sums meet in a work-group tree reduction.  Any K
 *   (plain dtypes may leave a tail that is not a multiple of eight).
 * mvr_<t>: the path for CPU devices (PoCL), single token and batch: one
 *   work-item per output row and group of MV_M columns, vector accumulators,
 *   no local memory and no barriers, which a CPU runtime turns into a plain
 *   loop (work-group reductions and local tiles cost it more than they
 *   save).
 * mm_<t>: the batch path.  A 16x16 work-group computes a 64x64 tile of y,
 *   each work-item a 4x4 sub-tile (strided, so local reads do not conflict);
 *   K advances 32 at a time through two local tiles that the work-items fill
 *   together, one deq8 / vload8 each.  Needs K % 32 == 0. */

#define MV_M 8
#define MM_TILE 64
#define MM_TK 32

#define DEFINE_MATMUL(name, DEQ, PLAIN_T)                                                    \
    kernel void mv_##name(CTENSOR_ARGS(w), CTENSOR_ARGS(x), TENSOR_ARGS(y), local float *red) \
    {                                                                                         \
        const int lid = (int)get_local_id(0), ls = (int)get_local_size(0);                     \
        const long n = (long)get_group_id(0), b = (long)get_group_id(1);                      \
        const long m0 = (long)get_group_id(2) * MV_M;                                         \
        const long K = w_ne.x, M = x_ne.y;                                                    \
        const long i2 = b % x_ne.z, i3 = b / x_ne.z;                                          \
        const global uchar *wrow = ROW_AT(w, n, i2 / (x_ne.z / w_ne.z), i3 / (x_ne.w / w_ne.w)); \
        const global uchar *xb = ROW_AT(x, m0, i2, i3);                                       \
        const int mc = (int)min((long)MV_M, M - m0);                                          \
        float acc[MV_M];                                                                      \
        for (int m = 0; m < MV_M; m++)                                                        \
            acc[m] = 0.0f;                                                                    \
        const long k8 = K & ~7L;                                                              \
        for (long e = (long)lid * 8; e < k8; e += (long)ls * 8) {                             \
            const float8 wv = DEQ(wrow, e);                                                   \
            for (int m = 0; m < MV_M; m++) {                                                  \
                if (m < mc) {                                                                 \
                    const float8 xv =                                                         \
                        vload8(0, (const global float *)(xb + (ulong)m * x_nb.y) + e);        \
                    acc[m] += dot(wv.lo, xv.lo) + dot(wv.hi, xv.hi);                          \
                }                                                                             \
            }                                                                                 \
        }                                                                                     \
        if (PLAIN_T >= 0) {                                                                   \
            const uint ts = type_size(PLAIN_T);                                               \
            for (long e = k8 + lid; e < K; e += ls) {                                         \
                const float wv = ld_plain(wrow + (ulong)e * ts, PLAIN_T);                     \
                for (int m = 0; m < MV_M; m++)                                                \
                    if (m < mc)                                                               \
                        acc[m] += wv * ((const global float *)(xb + (ulong)m * x_nb.y))[e];   \
            }                                                                                 \
        }                                                                                     \
        for (int m = 0; m < MV_M; m++)                                                        \
            red[m * ls + lid] = acc[m];                                                       \
        for (int s = ls >> 1; s > 0; s >>= 1) {                                               \
            barrier(CLK_LOCAL_MEM_FENCE);                                                     \
            if (lid < s)                                                                      \
                for (int m = 0; m < MV_M; m++)                                                \
                    red[m * ls + lid] += red[m * ls + lid + s];                               \
        }                                                                                     \
        barrier(CLK_LOCAL_MEM_FENCE);                                                         \
        for (int m = lid; m < mc; m += ls)                                                    \
            *(global float *)ELEM_AT(y, n, m0 + m, i2, i3) = red[m * ls];                     \
    }                                                                                         \
                                                                                              \
    kernel void mvr_##name(CTENSOR_ARGS(w), CTENSOR_ARGS(x), TENSOR_ARGS(y))                  \
    {                                                                                         \
        const long n = (long)get_global_id(0), b = (long)get_global_id(1);                   \
        const long m0 = (long)get_global_id(2) * MV_M;                                        \
        if (n >= w_ne.y)                                                                      \
            return;                                                                           \
        const long K = w_ne.x, M = x_ne.y;                                                    \
        const long i2 = b % x_ne.z, i3 = b / x_ne.z;                                          \
        const global uchar *wrow = ROW_AT(w, n, i2 / (x_ne.z / w_ne.z), i3 / (x_ne.w / w_ne.w)); \
        const global uchar *xb = ROW_AT(x, m0, i2, i3);                                       \
        const int mc = (int)min((long)MV_M, M - m0);                                          \
        float acc[MV_M];                                                                      \
        for (int m = 0; m < MV_M; m++)                                                        \
            acc[m] = 0.0f;                                                                    \
        const long k8 = K & ~7L;                                                              \
        if (mc == 1) {                                                                        \
            /* One column (decode): a vector accumulator, reduced once. */                    \
            const global float *xr = (const global float *)xb;                                \
            float8 a8 = (float8)(0.0f);                                                       \
            const long k32 = K & ~31L;                                                        \
            /* Four chunks of one 32-block per step: its header is read once. */              \
            for (long e = 0; e < k32; e += 32) {                                              \
                a8 += DEQ(wrow, e) * vload8(0, xr + e);                                       \
                a8 += DEQ(wrow, e + 8) * vload8(0, xr + e + 8);                               \
                a8 += DEQ(wrow, e + 16) * vload8(0, xr + e + 16);                             \
                a8 += DEQ(wrow, e + 24) * vload8(0, xr + e + 24);                             \
            }                                                                                 \
            for (long e = k32; e < k8; e += 8)                                                \
                a8 += DEQ(wrow, e) * vload8(0, xr + e);                                       \
            acc[0] = (a8.s0 + a8.s1) + (a8.s2 + a8.s3) + (a8.s4 + a8.s5) + (a8.s6 + a8.s7);    \
        } else {                                                                              \
            float8 a8[MV_M];                                                                  \
            for (int m = 0; m < MV_M; m++)                                                    \
                a8[m] = (float8)(0.0f);                                                       \
            for (long e = 0; e < k8; e += 8) {                                                \
                const float8 wv = DEQ(wrow, e);                                               \
                for (int m = 0; m < MV_M; m++)                                                \
                    if (m < mc)                                                               \
                        a8[m] += wv * vload8(0, (const global float *)(xb + (ulong)m * x_nb.y) + e); \
            }                                                                                 \
            for (int m = 0; m < MV_M; m++)                                                    \
                acc[m] = (a8[m].s0 + a8[m].s1) + (a8[m].s2 + a8[m].s3) +                      \
                         (a8[m].s4 + a8[m].s5) + (a8[m].s6 + a8[m].s7);                       \
        }                                                                                     \
        if (PLAIN_T >= 0) {                                                                   \
            const uint ts = type_size(PLAIN_T);                                               \
            for (long e = k8; e < K; e++) {                                                   \
                const float wv = ld_plain(wrow + (ulong)e * ts, PLAIN_T);                     \
                for (int m = 0; m < MV_M; m++)                                                \
                    if (m < mc)                                                               \
                        acc[m] += wv * ((const global float *)(xb + (ulong)m * x_nb.y))[e];   \
            }                                                                                 \
        }                                                                                     \
        for (int m = 0; m < MV_M; m++)                                                        \
            if (m < mc)                                                                       \
                *(global float *)ELEM_AT(y, n, m0 + m, i2, i3) = acc[m];                      \
    }                                                                                         \
                                                                                              \
    kernel __attribute__((reqd_work_group_size(16, 16, 1))) void mm_##name(                  \
        CTENSOR_ARGS(w), CTENSOR_ARGS(x), TENSOR_ARGS(y))                                     \
    {                                                                                         \
        local float ws[MM_TK][MM_TILE + 1];                                                   \
        local float xs[MM_TK][MM_TILE + 1];                                                   \
        const int tx = (int)get_local_id(0), ty = (int)get_local_id(1);                       \
        const int t = ty * 16 + tx;                                                           \
        const long n0 = (long)get_group_id(0) * MM_TILE, m0 = (long)get_group_id(1) * MM_TILE; \
        const long b = (long)get_group_id(2);                                                 \
        const long K = w_ne.x, N = w_ne.y, M = x_ne.y;                                        \
        const long i2 = b % x_ne.z, i3 = b / x_ne.z;                                          \
        const long wi2 = i2 / (x_ne.z / w_ne.z), wi3 = i3 / (x_ne.w / w_ne.w);                \
        const int lr = t >> 2, lc = (t & 3) * 8;                                              \
        const long wn = n0 + lr, xm = m0 + lr;                                                \
        const global uchar *wrow = ROW_AT(w, wn < N ? wn : 0, wi2, wi3);                      \
        const global float *xrow = (const global float *)ROW_AT(x, xm < M ? xm : 0, i2, i3);  \
        float acc[4][4];                                                                      \
        for (int i = 0; i < 4; i++)                                                           \
            for (int j = 0; j < 4; j++)                                                       \
                acc[i][j] = 0.0f;                                                             \
        float tmp[8];                                                                         \
        for (long k0 = 0; k0 < K; k0 += MM_TK) {                                              \
            const float8 wv = wn < N ? DEQ(wrow, k0 + lc) : (float8)(0.0f);                   \
            vstore8(wv, 0, tmp);                                                              \
            for (int q = 0; q < 8; q++)                                                       \
                ws[lc + q][lr] = tmp[q];                                                      \
            const float8 xv = xm < M ? vload8(0, xrow + k0 + lc) : (float8)(0.0f);            \
            vstore8(xv, 0, tmp);                                                              \
            for (int q = 0; q < 8; q++)                                                       \
                xs[lc + q][lr] = tmp[q];                                                      \
            barrier(CLK_LOCAL_MEM_FENCE);                                                     \
            for (int kk = 0; kk < MM_TK; kk++) {                                              \
                float a[4], c[4];                                                             \
                for (int i = 0; i < 4; i++) {                                                 \
                    a[i] = ws[kk][tx + 16 * i];                                               \
                    c[i] = xs[kk][ty + 16 * i];                                               \
                }                                                                             \
                for (int i = 0; i < 4; i++)                                                   \
                    for (int j = 0; j < 4; j++)                                               \
                        acc[i][j] = fma(a[i], c[j], acc[i][j]);                               \
            }                                                                                 \
            barrier(CLK_LOCAL_MEM_FENCE);                                                     \
        }                                                                                     \
        for (int i = 0; i < 4; i++) {                                                         \
            const long n = n0 + tx + 16 * i;                                                  \
            for (int j = 0; j < 4; j++) {                                                     \
                const long m = m0 + ty + 16 * j;                                              \
                if (n < N && m < M)                                                           \
                    *(global float *)ELEM_AT(y, n, m, i2, i3) = acc[i][j];                    \
            }                                                                                 \
        }                                                                                     \
    }

DEFINE_MATMUL(f32, deq8_f32, T_F32)
DEFINE_MATMUL(f16, deq8_f16, T_F16)
DEFINE_MATMUL(bf16, deq8_bf16, T_BF16)
DEFINE_MATMUL(q8_0, deq8_q8_0, -1)
DEFINE_MATMUL(q4_0, deq8_q4_0, -1)
DEFINE_MATMUL(q4_1, deq8_q4_1, -1)
DEFINE_MATMUL(q5_0, deq8_q5_0, -1)
DEFINE_MATMUL(q5_1, deq8_q5_1, -1)
DEFINE_MATMUL(q4_k, deq8_q4_k, -1)
DEFINE_MATMUL(q5_k, deq8_q5_k, -1)
DEFINE_MATMUL(q6_k, deq8_q6_k, -1)
