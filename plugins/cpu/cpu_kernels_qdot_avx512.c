/* Quantized-matmul kernels for AVX-512 F/BW/VL/VNNI (Ice Lake server and
 * later, Zen 4/5): the x86 template with the EVEX vpdpbusd on 256-bit
 * vectors as the 8-bit dot primitive, and a prefill GEMM of its own on
 * 512-bit vectors: panels of 16 columns, one vpdpbusd per group for all 16
 * (the template's row decoders feed it). */
#if defined(__x86_64__) || defined(__i386__)

#include <immintrin.h>

#define CPU_QD_TARGET "avx2,fma,f16c,avx512f,avx512bw,avx512vl,avx512vnni"
#define CPU_QD_FN(name) cpu_avx512_##name

static inline __attribute__((target(CPU_QD_TARGET), always_inline)) __m256i
cpu_qd_dot(__m256i u, __m256i s)
{
    return _mm256_dpbusd_epi32(_mm256_setzero_si256(), u, s);
}

static inline __attribute__((target(CPU_QD_TARGET), always_inline)) __m256i
cpu_qd_dot2(__m256i u1, __m256i s1, __m256i u2, __m256i s2)
{
    return _mm256_dpbusd_epi32(_mm256_dpbusd_epi32(_mm256_setzero_si256(), u1, s1), u2, s2);
}

#include "cpu_qdot_x86.inc"
#include "cpu_qgemm_x86.inc"

/* ------------------------------------------------ 512-bit prefill GEMM */

/* Panels of 16 columns, laid out as the template's panels of 8: per block
 * and plane int8 qs[8][16][4], then float d[16], ds[16], ds_lo[16]. */
#define CPU_Z_COLS 16
#define CPU_Z_PLANE_BYTES (32 * CPU_Z_COLS)

CPU_QD size_t cpu_z_block_bytes(int planes)
{
    return (size_t)planes * CPU_Z_PLANE_BYTES + 3 * sizeof(float) * CPU_Z_COLS;
}

CPU_QD_EXPORT void cpu_avx512_pack_panel16(const void *cols, size_t col_stride, int nc, int64_t k,
                                           int planes, void *panel)
{
    uint8_t *p = panel;
    const size_t block_bytes = cpu_z_block_bytes(planes);
    for (int64_t b = 0; b < k / 32; b++, p += block_bytes) {
        float *d = (float *)(p + planes * CPU_Z_PLANE_BYTES);
        for (int c = 0; c < CPU_Z_COLS; c++) {
            if (c >= nc) {
                for (int pl = 0; pl < planes; pl++)
                    for (int g = 0; g < 8; g++)
                        memset(p + pl * CPU_Z_PLANE_BYTES + (g * CPU_Z_COLS + c) * 4, 0, 4);
                d[c] = d[CPU_Z_COLS + c] = d[2 * CPU_Z_COLS + c] = 0.0f;
                continue;
            }
            const uint8_t *col = (const uint8_t *)cols + (size_t)c * col_stride;
            int lo16 = 0;
            for (int pl = 0; pl < planes; pl++) {
                const int8_t *q = (const int8_t *)col + pl * k + 32 * b;
                for (int g = 0; g < 8; g++)
                    memcpy(p + pl * CPU_Z_PLANE_BYTES + (g * CPU_Z_COLS + c) * 4, q + 4 * g, 4);
                int sum = 0;
                for (int j = 0; j < 16; j++)
                    sum += q[j];
                lo16 += planes == 2 && pl == 0 ? 128 * sum : sum;
            }
            const float *sc = cpu_q8_scales(col, k, planes) + 2 * b;
            d[c] = sc[0];
            d[CPU_Z_COLS + c] = sc[1];
            d[2 * CPU_Z_COLS + c] = sc[0] * (float)lo16;
        }
    }
}

CPU_QD __m512i cpu_z_load(const void *p)
{
    return _mm512_loadu_si512(p);
}

/* The dot of weight groups g0..g0+3 (broadcast in |wg|) with the panel's
 * groups, per column, over the planes. */
CPU_QD __m512i cpu_z_dot4(const __m512i *wg, const uint8_t *pq)
{
    const __m512i z = _mm512_setzero_si512();
    const __m512i a = _mm512_dpbusd_epi32(_mm512_dpbusd_epi32(z, wg[0], cpu_z_load(pq)), wg[1],
                                          cpu_z_load(pq + 64));
    const __m512i b = _mm512_dpbusd_epi32(_mm512_dpbusd_epi32(z, wg[2], cpu_z_load(pq + 128)),
                                          wg[3], cpu_z_load(pq + 192));
    return _mm512_add_epi32(a, b);
}

CPU_QD __m512i cpu_z_dot4p(const __m512i *wg, const uint8_t *pq, int planes)
{
    const __m512i hi = cpu_z_dot4(wg, pq);
    if (planes == 1)
        return hi;
    return _mm512_add_epi32(_mm512_slli_epi32(hi, 7), cpu_z_dot4(wg, pq + CPU_Z_PLANE_BYTES));
}

/* out[0..32) = one decoded row against two panels of 16. */
CPU_QD void cpu_z_row_panels2(int sixteen, const int planes, const cpu_qg_row *r,
                              const uint8_t *p0, const uint8_t *p1, int64_t nb, float *out)
{
    const size_t block_bytes = cpu_z_block_bytes(planes);
    __m512 acc[2] = {_mm512_setzero_ps(), _mm512_setzero_ps()};
    __m512 accm[2] = {_mm512_setzero_ps(), _mm512_setzero_ps()};
    const uint8_t *pan[2] = {p0, p1};
    for (int64_t b = 0; b < nb; b++) {
        __m512i wg[8];
        for (int g = 0; g < 8; g++)
            wg[g] = _mm512_set1_epi32((int)cpu_qd_u32(r->q + 32 * b + 4 * g));
        for (int j = 0; j < 2; j++) {
            const uint8_t *pb = pan[j] + b * block_bytes;
            const __m512i sa = cpu_z_dot4p(wg, pb, planes);
            const __m512i sb = cpu_z_dot4p(wg + 4, pb + 4 * 64, planes);
            const float *pf = (const float *)(pb + planes * CPU_Z_PLANE_BYTES);
            const __m512 d = _mm512_loadu_ps(pf), ds = _mm512_loadu_ps(pf + CPU_Z_COLS);
            if (sixteen) {
                const __m512 dlo = _mm512_loadu_ps(pf + 2 * CPU_Z_COLS);
                acc[j] = _mm512_fmadd_ps(_mm512_cvtepi32_ps(sa),
                                         _mm512_mul_ps(d, _mm512_set1_ps(r->scale[2 * b])), acc[j]);
                acc[j] = _mm512_fmadd_ps(_mm512_cvtepi32_ps(sb),
                                         _mm512_mul_ps(d, _mm512_set1_ps(r->scale[2 * b + 1])), acc[j]);
                accm[j] = _mm512_fmadd_ps(_mm512_set1_ps(r->min[2 * b]), dlo, accm[j]);
                accm[j] = _mm512_fmadd_ps(_mm512_set1_ps(r->min[2 * b + 1]), _mm512_sub_ps(ds, dlo),
                                          accm[j]);
            } else {
                acc[j] = _mm512_fmadd_ps(_mm512_cvtepi32_ps(_mm512_add_epi32(sa, sb)),
                                         _mm512_mul_ps(d, _mm512_set1_ps(r->scale[b])), acc[j]);
                accm[j] = _mm512_fmadd_ps(_mm512_set1_ps(r->min[b]), ds, accm[j]);
            }
        }
    }
    _mm512_storeu_ps(out, _mm512_add_ps(acc[0], accm[0]));
    _mm512_storeu_ps(out + CPU_Z_COLS, _mm512_add_ps(acc[1], accm[1]));
}

CPU_QD void cpu_z_gemm(int kind, const uint8_t *w, size_t w_stride, int64_t rows,
                       const uint8_t *panels, int np, int64_t k, const int planes, float *y,
                       size_t y_stride, int ncols, void *scratch)
{
    const size_t panel_bytes = (size_t)(k / 32) * cpu_z_block_bytes(planes);
    cpu_qg_row r;
    cpu_qg_row_init(&r, scratch, k);
    for (int64_t n = 0; n < rows; n++, w += w_stride) {
        switch (kind) {
        case SY_DTYPE_Q4_K:
        case SY_DTYPE_Q5_K:
            cpu_qg_decode_k45(kind == SY_DTYPE_Q5_K, w, k, &r);
            break;
        case SY_DTYPE_Q6_K:
            cpu_qg_decode_q6k(w, k, &r);
            break;
        default:
            cpu_qg_decode32(kind == SY_DTYPE_Q4_0   ? CPU_QD_Q4_0
                            : kind == SY_DTYPE_Q4_1 ? CPU_QD_Q4_1
                            : kind == SY_DTYPE_Q5_0 ? CPU_QD_Q5_0
                            : kind == SY_DTYPE_Q5_1 ? CPU_QD_Q5_1
                                                    : CPU_QD_Q8_0,
                            w, k, &r);
            break;
        }
        for (int p = 0; p < np; p += 2) {
            float out[2 * CPU_Z_COLS];
            const uint8_t *p0 = panels + (size_t)p * panel_bytes;
            const uint8_t *p1 = p + 1 < np ? p0 + panel_bytes : p0;
            cpu_z_row_panels2(kind == SY_DTYPE_Q6_K, planes, &r, p0, p1, k / 32, out);
            const int c1 = (p + 2) * CPU_Z_COLS < ncols ? (p + 2) * CPU_Z_COLS : ncols;
            for (int c = p * CPU_Z_COLS; c < c1; c++)
                y[(size_t)c * y_stride + (size_t)n] = out[c - p * CPU_Z_COLS];
        }
    }
}

#define CPU_Z_DEFINE(name, dtype)                                                             \
    CPU_QD_EXPORT void cpu_avx512_##name(CPU_QGEMM_ARGS)                                      \
    {                                                                                         \
        if (planes == 2)                                                                      \
            cpu_z_gemm(dtype, w, w_stride, rows, panels, n_panels, k, 2, y, y_stride, ncols,  \
                       scratch);                                                              \
        else                                                                                  \
            cpu_z_gemm(dtype, w, w_stride, rows, panels, n_panels, k, 1, y, y_stride, ncols,  \
                       scratch);                                                              \
    }

CPU_Z_DEFINE(qgemm16_q8_0, SY_DTYPE_Q8_0)
CPU_Z_DEFINE(qgemm16_q4_0, SY_DTYPE_Q4_0)
CPU_Z_DEFINE(qgemm16_q4_1, SY_DTYPE_Q4_1)
CPU_Z_DEFINE(qgemm16_q5_0, SY_DTYPE_Q5_0)
CPU_Z_DEFINE(qgemm16_q5_1, SY_DTYPE_Q5_1)
CPU_Z_DEFINE(qgemm16_q4_k, SY_DTYPE_Q4_K)
CPU_Z_DEFINE(qgemm16_q5_k, SY_DTYPE_Q5_K)
CPU_Z_DEFINE(qgemm16_q6_k, SY_DTYPE_Q6_K)

#endif
