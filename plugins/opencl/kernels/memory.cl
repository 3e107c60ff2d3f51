/* Kernels that move rows between dtypes: COPY, KV_WRITE (a copy into a view
 * of the cache at the start row) and GET_ROWS.  Plain dtypes (F32, F16,
 * BF16, I32) may be strided in every dim; block dtypes need dense rows.
 * Same-dtype moves copy bits, never through F32, like the reference.
 *
 * Every copy kernel takes MV_START_ARGS: where st_base is not NULL (a
 * KV_WRITE whose start is an input, read when it runs), the destination
 * moves down by that many rows of dim 2 after the start is checked against
 * st_limit; out of range, the kernel writes nothing and raises the error
 * flag with FLAG_KV_START. */

#define MV_START_ARGS global const uchar *st_base, ulong st_off, long st_limit, global int *flag

/* Moves the destination to the run-time start, or returns from the kernel
 * when the start is out of range. */
#define MV_START(d)                                                                     \
    if (st_base) {                                                                      \
        const long start_ = *(const global int *)(st_base + st_off);                   \
        if (start_ < 0 || start_ > st_limit) {                                          \
            *flag = FLAG_KV_START;                                                      \
            return;                                                                     \
        }                                                                               \
        d##_off += (ulong)start_ * d##_nb.z;                                            \
    }

#define MV_INDEX(ne)                                                                    \
    const long i1 = (long)get_global_id(1), i23 = (long)get_global_id(2);               \
    if (i1 >= (ne).y || i23 >= (ne).z * (ne).w)                                          \
        return;                                                                         \
    const long i2 = i23 % (ne).z, i3 = i23 / (ne).z

/* Plain to plain, one element per work-item. */
kernel void copy_elems(CTENSOR_ARGS(s), int s_type, TENSOR_ARGS(d), int d_type,
                       MV_START_ARGS)
{
    const long i0 = (long)get_global_id(0);
    MV_INDEX(s_ne);
    MV_START(d);
    if (i0 >= s_ne.x)
        return;
    const global uchar *sp = ELEM_AT(s, i0, i1, i2, i3);
    global uchar *dp = ELEM_AT(d, i0, i1, i2, i3);
    if (s_type == d_type) {
        if (type_size(s_type) == 2)
            st_u16(dp, ld_u16(sp));
        else
            *(global uint *)dp = ld_u32(sp);
        return;
    }
    st_plain(dp, d_type, ld_plain(sp, s_type));
}

/* Block dtype to plain: eight elements per work-item. */
kernel void copy_deq(CTENSOR_ARGS(s), int s_type, TENSOR_ARGS(d), int d_type,
                     MV_START_ARGS)
{
    const long e = (long)get_global_id(0) * 8;
    MV_INDEX(s_ne);
    MV_START(d);
    if (e >= s_ne.x)
        return;
    float v[8];
    vstore8(deq8_any(ROW_AT(s, i1, i2, i3), e, s_type), 0, v);
    for (int i = 0; i < 8; i++)
        st_plain(ELEM_AT(d, e + i, i1, i2, i3), d_type, v[i]);
}

/* Same dtype, dense rows of |row_bytes|: one byte per work-item. */
kernel void copy_rows_raw(CTENSOR_ARGS(s), TENSOR_ARGS(d), long row_bytes,
                          MV_START_ARGS)
{
    const long i0 = (long)get_global_id(0);
    MV_INDEX(s_ne);
    MV_START(d);
    if (i0 >= row_bytes)
        return;
    ROW_AT(d, i1, i2, i3)[i0] = ROW_AT(s, i1, i2, i3)[i0];
}

/* Any dtype to Q8_0 / Q4_0 / Q4_1: one block of 32 per work-item. */
kernel void copy_quant(CTENSOR_ARGS(s), int s_type, TENSOR_ARGS(d), int d_type,
                       MV_START_ARGS)
{
    const long e = (long)get_global_id(0) * 32;
    MV_INDEX(s_ne);
    MV_START(d);
    if (e >= s_ne.x)
        return;
    float v[32];
    if (block_size(s_type) == 1) {
        for (int i = 0; i < 32; i++)
            v[i] = ld_plain(ELEM_AT(s, e + i, i1, i2, i3), s_type);
    } else {
        const global uchar *row = ROW_AT(s, i1, i2, i3);
        for (int i = 0; i < 32; i += 8)
            vstore8(deq8_any(row, e + i, s_type), 0, v + i);
    }
    quant_block(v, ROW_AT(d, i1, i2, i3) + (e / 32) * type_size(d_type), d_type);
}

/* Reads id m, or raises the error flag and returns -1 when it is out of
 * range (ids are data, so a bad one is an argument error, not a crash). */
inline long row_id(CTENSOR_ARGS(ids), long m, long rows, global int *flag)
{
    const int id = *(const global int *)ELEM_AT(ids, m, 0, 0, 0);
    if (id < 0 || id >= rows) {
        *flag = FLAG_ROW_ID;
        return -1;
    }
    return id;
}

/* GET_ROWS from a plain table: one element per work-item. */
kernel void get_rows_elems(CTENSOR_ARGS(t), int t_type, CTENSOR_ARGS(ids), TENSOR_ARGS(y),
                           global int *flag)
{
    const long i0 = (long)get_global_id(0), m = (long)get_global_id(1);
    if (i0 >= t_ne.x || m >= ids_ne.x)
        return;
    const long id = row_id(ids_base, ids_off, ids_nb, ids_ne, m, t_ne.y, flag);
    if (id < 0)
        return;
    *(global float *)ELEM_AT(y, i0, m, 0, 0) = ld_plain(ELEM_AT(t, i0, id, 0, 0), t_type);
}

/* GET_ROWS from a block table: eight elements per work-item. */
kernel void get_rows_deq(CTENSOR_ARGS(t), int t_type, CTENSOR_ARGS(ids), TENSOR_ARGS(y),
                         global int *flag)
{
    const long e = (long)get_global_id(0) * 8, m = (long)get_global_id(1);
    if (e >= t_ne.x || m >= ids_ne.x)
        return;
    const long id = row_id(ids_base, ids_off, ids_nb, ids_ne, m, t_ne.y, flag);
    if (id < 0)
        return;
    float v[8];
    vstore8(deq8_any(ROW_AT(t, id, 0, 0), e, t_type), 0, v);
    for (int i = 0; i < 8; i++)
        *(global float *)ELEM_AT(y, e + i, m, 0, 0) = v[i];
}
