/* ATTENTION: out = softmax(q.k * scale) . v for Q [D,Hq,T] F32 and K, V
 * [D,Hkv,S] F32, F16, Q8_0 or Q4_0 (a quantised KV cache: each element is
 * dequantised where it is read, with the arithmetic of ops/quants.c), with GQA (query head h reads kv head h / (Hq/Hkv)),
 * the causal mask (query t sits at position n_past + t) and an optional
 * sliding window.
 *
 * One work-group per (query head, query token).  Keys are visited in chunks
 * of one key per work-item with an online softmax: the running maximum m,
 * the running sum l and the output accumulator (each work-item owns the
 * dims d = lid + ls*i, i < ATT_ACC) are rescaled by exp(m_old - m_new)
 * whenever a chunk raises the maximum, so the scores never leave local
 * memory and S is unbounded.  Masked keys are skipped, never multiplied by
 * zero: rows of a KV cache past the query may hold anything.  A query whose
 * keys are all masked gets zeros.
 *
 * Where np_base is not NULL, n_past is the I32 it points at (ATTENTION's
 * fourth input, read when the kernel runs) and the argument is ignored; a
 * value with n_past < 0 or n_past + T > S writes nothing and raises the
 * error flag with FLAG_N_PAST (the whole work-group returns, before any
 * barrier). */

#define ATT_ACC 4

/* Element |e| of the K or V row at |row| of dtype |t|. */
inline float ld_kv(const global uchar *row, long e, int t)
{
    switch (t) {
    case T_F16:
        return h2f(ld_u16(row + e * 2));
    case T_Q8_0: {
        const global uchar *blk = row + (e >> 5) * 34;
        return (float)((const global char *)(blk + 2))[e & 31] * h2f(ld_u16(blk));
    }
    case T_Q4_0: {
        const global uchar *blk = row + (e >> 5) * 18;
        const int j = (int)(e & 31);
        const int nib = j < 16 ? blk[2 + j] & 0x0f : blk[2 + j - 16] >> 4;
        return (float)(nib - 8) * h2f(ld_u16(blk));
    }
    default:
        return *(const global float *)(row + e * 4);
    }
}

kernel void attention(CTENSOR_ARGS(q), CTENSOR_ARGS(k), CTENSOR_ARGS(v), TENSOR_ARGS(o),
                      int k_type, int v_type, float scale, long n_past, long window,
                      local float *qs, local float *ps, local float *red,
                      global const uchar *np_base, ulong np_off, global int *flag)
{
    const int lid = (int)get_local_id(0), ls = (int)get_local_size(0);
    const long h = (long)get_group_id(0), t = (long)get_group_id(1);
    const long D = q_ne.x, S = k_ne.z;
    const long hk = h / (q_ne.y / k_ne.y);
    if (np_base) {
        n_past = *(const global int *)(np_base + np_off);
        if (n_past < 0 || n_past + q_ne.z > S) {
            *flag = FLAG_N_PAST;
            return;
        }
    }
    const long q_pos = n_past + t;

    for (long d = lid; d < D; d += ls)
        qs[d] = *(const global float *)ELEM_AT(q, d, h, t, 0);

    float acc[ATT_ACC];
    for (int i = 0; i < ATT_ACC; i++)
        acc[i] = 0.0f;
    float m = -INFINITY, l = 0.0f;

    /* Keys outside [first, last] are masked for this query. */
    long last = min(S - 1, q_pos);
    long first = window > 0 ? max(0L, q_pos - window + 1) : 0L;
    barrier(CLK_LOCAL_MEM_FENCE);

    for (long c0 = first; c0 <= last; c0 += ls) {
        const long s = c0 + lid;
        float score = -INFINITY;
        if (s <= last) {
            const global uchar *kr = ROW_AT(k, hk, s, 0);
            float dsum = 0.0f;
            for (long d = 0; d < D; d++)
                dsum += qs[d] * ld_kv(kr, d, k_type);
            score = dsum * scale;
        }
        red[lid] = score;
        reduce_max(red, lid, ls);
        const float cmax = red[0];
        const float m_new = fmax(m, cmax);
        const float f = m == -INFINITY ? 0.0f : exp(m - m_new);
        const float p = s <= last ? exp(score - m_new) : 0.0f;
        barrier(CLK_LOCAL_MEM_FENCE);
        ps[lid] = p;
        red[lid] = p;
        reduce_sum(red, lid, ls);
        l = l * f + red[0];
        m = m_new;
        const long n_keys = min((long)ls, last - c0 + 1);
        for (int i = 0; i < ATT_ACC; i++) {
            const long d = lid + (long)ls * i;
            if (d >= D)
                break;
            float a = acc[i] * f;
            for (long j = 0; j < n_keys; j++) {
                const float pj = ps[j];
                if (pj == 0.0f)
                    continue;
                a += pj * ld_kv(ROW_AT(v, hk, c0 + j, 0), d, v_type);
            }
            acc[i] = a;
        }
        barrier(CLK_LOCAL_MEM_FENCE);
    }
    for (int i = 0; i < ATT_ACC; i++) {
        const long d = lid + (long)ls * i;
        if (d < D)
            *(global float *)ELEM_AT(o, d, h, t, 0) = l > 0.0f ? acc[i] / l : 0.0f;
    }
}
