#!/bin/sh
# Decode attention of whole models, the CPU plugin's kernel alone
# (bench/attention_bench.c): builds one program per attention source and
# runs them interleaved, round after round, so an old and a new kernel meet
# the same load on a shared machine.  Each line: the median ms per token
# over the program's rounds within that round.
#
# usage: bench/attention.sh [-s SHAPE] [-d "512 2048"] [-t "1 2"] [-k f16]
#                           [--rounds 3] [SRC.c ...]
# SRC defaults to plugins/cpu/cpu_kernels_attention.c; give an older copy
# (git show REV:plugins/cpu/cpu_kernels_attention.c > /tmp/old.c) and the
# tree's to compare them, or another checkout's plugins/cpu folder (git
# worktree add /tmp/old REV) when the ISA tables changed too.  SHAPE:
# smollm2, 1b or gemma.
set -eu
root=$(cd "$(dirname "$0")/.." && pwd)
shape=smollm2 depths="512 2048" threads="1 2" kv=f16 rounds=3
while [ $# -gt 0 ]; do
    case $1 in
    -s) shape=$2; shift 2 ;;
    -d) depths=$2; shift 2 ;;
    -t) threads=$2; shift 2 ;;
    -k) kv=$2; shift 2 ;;
    --rounds) rounds=$2; shift 2 ;;
    -*) echo "attention.sh: unknown option $1" >&2; exit 2 ;;
    *) break ;;
    esac
done
[ $# -gt 0 ] || set -- "$root/plugins/cpu/cpu_kernels_attention.c"
out=${TMPDIR:-/tmp}/switchyard-attention
mkdir -p "$out"
cc=${CC:-cc}
p=$root/plugins/cpu
build=${MESON_BUILD_ROOT:-$root/build}
[ -d "$build/framework/include" ] || build=$root/build-bench
flags="-std=c11 -O2 -D_GNU_SOURCE -I$root/framework/include -I$root/ops -I$p \
    -I$build/framework/include"
i=0
for src in "$@"; do
    i=$((i + 1))
    # A folder is another checkout's plugins/cpu: all its kernel sources.
    dir=$p
    if [ -d "$src" ]; then
        dir=$src
        src=$src/cpu_kernels_attention.c
    fi
    # Kernel tables added since some older checkouts.
    extra=
    [ ! -f "$dir/cpu_kernels_qrows_gfni.c" ] || extra=$dir/cpu_kernels_qrows_gfni.c
    # shellcheck disable=SC2086
    $cc -I"$dir" $flags "$root/bench/attention_bench.c" "$src" "$dir/cpu_threadpool.c" \
        "$dir/cpu_isa.c" "$dir/cpu_kernels_scalar.c" "$dir/cpu_kernels_avx2.c" \
        "$dir/cpu_kernels_dequant_avx2.c" "$dir/cpu_kernels_qdot_scalar.c" \
        "$dir/cpu_kernels_qdot_avx2.c" "$dir/cpu_kernels_qdot_avxvnni.c" \
        "$dir/cpu_kernels_qdot_avx512.c" $extra "$root/ops/quants.c" \
        -o "$out/bench$i" $(pkg-config --cflags --libs hwloc) -lpthread -lm
done
for r in $(seq "$rounds"); do
    for t in $threads; do
        for d in $depths; do
            i=0
            for src in "$@"; do
                i=$((i + 1))
                printf 'round %s  %-40s ' "$r" "$(basename "$src")"
                "$out/bench$i" "$shape" "$d" "$t" "$kv" 7
            done
        done
    done
done
