/* Row-wise F32 ops: RMS_NORM, SOFTMAX and ARGMAX (one work-group per
 * ne[0] row, a tree reduction in local memory) and ROPE (one work-item per
 * element).  Rows may be strided views: every element address goes through
 * nb[]. */

/* Splits the flat row number |r| of a tensor with extents |ne| into
 * (i1, i2, i3). */
#define ROW_SPLIT(ne, r, i1, i2, i3)                                                        \
    const long i1 = (r) % (ne).y, i2 = ((r) / (ne).y) % (ne).z, i3 = (r) / ((ne).y * (ne).z)

/* y = x / sqrt(mean(x^2) + eps); the sum of squares in |real|.  An all-zero
 * row with eps = 0 scales by zero instead of producing NaN, as the
 * reference does. */
kernel void rms_norm(CTENSOR_ARGS(x), TENSOR_ARGS(y), float eps, local real *red)
{
    const int lid = (int)get_local_id(0), ls = (int)get_local_size(0);
    const long r = (long)get_group_id(0);
    ROW_SPLIT(x_ne, r, i1, i2, i3);
    const long n = x_ne.x;
    real ss = 0;
    for (long i = lid; i < n; i += ls) {
        const real v = *(const global float *)ELEM_AT(x, i, i1, i2, i3);
        ss += v * v;
    }
    red[lid] = ss;
    reduce_sum_real(red, lid, ls);
    const real ms = red[0] / (real)n + (real)eps;
    const real scale = ms > 0 ? (real)1 / sqrt(ms) : (real)0;
    for (long i = lid; i < n; i += ls) {
        const real v = *(const global float *)ELEM_AT(x, i, i1, i2, i3);
        *(global float *)ELEM_AT(y, i, i1, i2, i3) = (float)(v * scale);
    }
}

/* True when key j is masked for a query at position q_pos. */
inline bool is_masked(long j, long q_pos, int causal, long window)
{
    if (causal && j > q_pos)
        return true;
    return window > 0 && q_pos - j >= window;
}

/* Softmax of each row of x * scale with the causal / window masks; row m
 * of every matrix is the query at position n_past + m.  Masked entries are
 * exactly 0; a row whose keys are all masked becomes zeros. */
kernel void softmax(CTENSOR_ARGS(x), TENSOR_ARGS(y), float scale, int causal, long n_past,
                    long window, local float *red)
{
    const int lid = (int)get_local_id(0), ls = (int)get_local_size(0);
    const long r = (long)get_group_id(0);
    ROW_SPLIT(x_ne, r, i1, i2, i3);
    const long n = x_ne.x;
    const long q_pos = n_past + i1;
    float mx = -INFINITY;
    for (long j = lid; j < n; j += ls) {
        if (is_masked(j, q_pos, causal, window))
            continue;
        const float v = *(const global float *)ELEM_AT(x, j, i1, i2, i3) * scale;
        mx = fmax(mx, v);
    }
    red[lid] = mx;
    reduce_max(red, lid, ls);
    mx = red[0];
    barrier(CLK_LOCAL_MEM_FENCE);
    float sum = 0.0f;
    if (mx != -INFINITY) {
        for (long j = lid; j < n; j += ls) {
            if (!is_masked(j, q_pos, causal, window))
                sum += exp(*(const global float *)ELEM_AT(x, j, i1, i2, i3) * scale - mx);
        }
    }
    red[lid] = sum;
    reduce_sum(red, lid, ls);
    sum = red[0];
    for (long j = lid; j < n; j += ls) {
        float p = 0.0f;
        if (mx != -INFINITY && !is_masked(j, q_pos, causal, window))
            p = exp(*(const global float *)ELEM_AT(x, j, i1, i2, i3) * scale - mx) / sum;
        *(global float *)ELEM_AT(y, j, i1, i2, i3) = p;
    }
}

/* Index of the first maximum of each row (rows of a [N,M] tensor); NaN
 * entries are no candidates and a row of nothing but NaN gives 0. */
kernel void argmax(CTENSOR_ARGS(x), TENSOR_ARGS(y), local float *red_v, local int *red_i)
{
    const int lid = (int)get_local_id(0), ls = (int)get_local_size(0);
    const long m = (long)get_group_id(0);
    const long n = x_ne.x;
    float best = 0.0f;
    int best_i = -1;
    for (long j = lid; j < n; j += ls) {
        const float v = *(const global float *)ELEM_AT(x, j, m, 0, 0);
        if (v == v && (best_i < 0 || v > best)) {
            best = v;
            best_i = (int)j;
        }
    }
    red_v[lid] = best;
    red_i[lid] = best_i;
    for (int s = ls >> 1; s > 0; s >>= 1) {
        barrier(CLK_LOCAL_MEM_FENCE);
        if (lid < s) {
            const int oi = red_i[lid + s];
            const float ov = red_v[lid + s];
            const int bi = red_i[lid];
            if (oi >= 0 && (bi < 0 || ov > red_v[lid] || (ov == red_v[lid] && oi < bi))) {
                red_v[lid] = ov;
                red_i[lid] = oi;
            }
        }
    }
    barrier(CLK_LOCAL_MEM_FENCE);
    if (lid == 0)
        *(global int *)(y_base + y_off + (ulong)m * y_nb.x) = red_i[0] < 0 ? 0 : red_i[0];
}

/* ROPE on x [D,H,T] with positions [T].  Work-item (i, t) handles rotated
 * pair i < n_rot/2 of every head of token t (the angle is computed once and
 * applied H times), or, for i >= n_rot/2, passes dim n_rot + (i - n_rot/2)
 * through.  mode 0 pairs (2j, 2j+1), mode 1 pairs (j, j + n_rot/2). */
kernel void rope(CTENSOR_ARGS(x), CTENSOR_ARGS(pos), TENSOR_ARGS(y), int mode, int n_rot,
                 float base, float freq_scale)
{
    const long i = (long)get_global_id(0), t = (long)get_global_id(1);
    const int half_ = n_rot / 2;
    if (i >= half_ + (x_ne.x - n_rot) || t >= x_ne.z)
        return;
    if (i >= half_) {
        const long d = n_rot + (i - half_);
        for (long h = 0; h < x_ne.y; h++)
            *(global float *)ELEM_AT(y, d, h, t, 0) = *(const global float *)ELEM_AT(x, d, h, t, 0);
        return;
    }
    const int j = (int)i;
    const int a = mode == 0 ? 2 * j : j;
    const int b = mode == 0 ? 2 * j + 1 : j + half_;
    const real p = (real)(*(const global int *)ELEM_AT(pos, t, 0, 0, 0)) * (real)freq_scale;
    const real inv_freq = pow((real)base, (real)(-2.0f * (float)j) / (real)n_rot);
    const real theta = p * inv_freq;
    const real c = cos(theta), sn = sin(theta);
    for (long h = 0; h < x_ne.y; h++) {
        const real x0 = *(const global float *)ELEM_AT(x, a, h, t, 0);
        const real x1 = *(const global float *)ELEM_AT(x, b, h, t, 0);
        *(global float *)ELEM_AT(y, a, h, t, 0) = (float)(x0 * c - x1 * sn);
        *(global float *)ELEM_AT(y, b, h, t, 0) = (float)(x0 * sn + x1 * c);
    }
}
