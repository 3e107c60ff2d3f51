/* The Q4_0/Q4_1 decode-row kernels of cpu_qrows_avx512.inc built with GFNI
 * as well (the avx512gfni table): one GF(2) affine instruction takes each
 * byte's high nibble where the avx512 build shifts and masks.  Ice Lake
 * and later, Zen 4/5.  bench/ab_plugins.sh, tg64 at 1 thread, against the
 * avx512 build: 1B Q4_0 1.068, SmolLM2 Q4_1 1.024 (5 rounds). */
#if defined(__x86_64__) || defined(__i386__)

#include <immintrin.h>

#define CPU_QD_TARGET "avx2,fma,f16c,avx512f,avx512bw,avx512vl,avx512vnni,gfni"
#define CPU_QD_FN(name) cpu_avx512g_##name
#define CPU_QD_HELPERS_ONLY

#include "cpu_qdot_vnni512.inc"
#include "cpu_qdot_x86.inc"

#define CPU_Z_FN(name) cpu_avx512g_##name
#define CPU_Z_GFNI 1
#include "cpu_qrows_avx512.inc"

#endif
