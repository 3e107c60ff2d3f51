#!/bin/sh
# Builds and runs bench/microbench.c against the CPU plugin's sources.
# usage: bench/microbench.sh [all|pool|items|bandwidth|qdot|gemm|attention|ab] [LANES] [TABLE]
# "ab" compares the avx512 table with bench/qdot_variant.c built with
# $VARIANT_CFLAGS, interleaved round by round.
set -eu
root=$(cd "$(dirname "$0")/.." && pwd)
out=${TMPDIR:-/tmp}/switchyard-microbench
cc=${CC:-cc}
p=$root/plugins/cpu
flags="-std=c11 -O2 -D_GNU_SOURCE -I$root/framework/include -I$root/ops -I$p \
    -I${MESON_BUILD_ROOT:-$root/build-perf}/framework/include"
$cc ${VARIANT_CFLAGS:-} $flags -c "$root/bench/qdot_variant.c" -o "$out-variant.o"
$cc $flags \
    "$root/bench/microbench.c" "$p/cpu_threadpool.c" "$p/cpu_isa.c" "$p/cpu_kernels_scalar.c" \
    "$p/cpu_kernels_avx2.c" "$p/cpu_kernels_dequant_avx2.c" "$p/cpu_kernels_qdot_scalar.c" "$p/cpu_kernels_qdot_avx2.c" \
    "$p/cpu_kernels_qdot_avxvnni.c" "$p/cpu_kernels_qdot_avx512.c" "$p/cpu_kernels_qrows_gfni.c" "$root/ops/quants.c" \
    "$out-variant.o" \
    -o "$out" $(pkg-config --cflags --libs hwloc) -lpthread -lm
exec "$out" "$@"
