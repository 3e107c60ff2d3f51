#!/bin/bash
# Time to first token of `switchyard run` with the CPU plugin's weight
# repacking three ways, interleaved round by round:
#   memory  packed copies in fresh anonymous memory (the default)
#   cache   packed copies mapped from SWITCHYARD_CPU_PACK_CACHE (warmed
#           by one run before the rounds)
#   none    SWITCHYARD_CPU_REPACK=0: weights read where the GGUF lies
# Each run follows IDLE seconds of sleep: on a VM whose host takes idle
# memory back, fresh memory is what the first step pays for (docs/cli.md,
# SWITCHYARD_CPU_PACK_CACHE).  Prints every run, then the median TTFT and
# decode t/s per mode and thread count.
#
# usage: bench/ttft.sh [-m MODEL] [-t "1 2"] [-r ROUNDS] [-i IDLE] [-n TOKENS]
#                      [-B BUILD_DIR] [--cache DIR]
set -euo pipefail
model=models/synth-1b-q4_0.gguf
threads="1 2"
rounds=3
idle=8
tokens=64
build=build
cache=
while [ $# -gt 0 ]; do
    case $1 in
    -m) model=$2; shift 2 ;;
    -t) threads=$2; shift 2 ;;
    -r) rounds=$2; shift 2 ;;
    -i) idle=$2; shift 2 ;;
    -n) tokens=$2; shift 2 ;;
    -B) build=$2; shift 2 ;;
    --cache) cache=$2; shift 2 ;;
    -h | --help) sed -n '2,15p' "$0"; exit 0 ;;
    *) echo "ttft.sh: unknown option '$1' (see --help)" >&2; exit 2 ;;
    esac
done
sy=$build/tools/switchyard
[ -x "$sy" ] || { echo "ttft.sh: no $sy (build first, or pass -B)" >&2; exit 1; }
[ -f "$model" ] || { echo "ttft.sh: no model '$model' (tools/fetch-models.sh)" >&2; exit 1; }
own_cache=
if [ -z "$cache" ]; then
    cache=$(mktemp -d /tmp/sy-ttft-XXXXXX)
    own_cache=$cache
fi
trap '[ -n "$own_cache" ] && rm -rf "$own_cache"' EXIT

# One run: prints "TTFT_MS DECODE_TPS".
one() {
    local mode=$1 t=$2 line
    local -a env=()
    case $mode in
    cache) env=(SWITCHYARD_CPU_PACK_CACHE="$cache") ;;
    none) env=(SWITCHYARD_CPU_REPACK=0) ;;
    esac
    line=$(env "${env[@]}" "$sy" run -m "$model" -p "Hello there, how are you today" -n "$tokens" \
        --threads "$t" --temp 0 2>&1 >/dev/null | grep 'TTFT') ||
        { echo "ttft.sh: $mode run at $t threads failed" >&2; exit 1; }
    echo "$line" | sed -E 's/.*TTFT ([0-9.]+) ms.*decode [0-9]+ tok, ([0-9.]+) tok\/s.*/\1 \2/'
}

one cache 2 >/dev/null # writes the cache
results=$(mktemp)
for r in $(seq "$rounds"); do
    for t in $threads; do
        for mode in memory cache none; do
            sleep "$idle"
            v=$(one $mode "$t")
            echo "round $r, $t thread(s), $mode: TTFT ${v% *} ms, decode ${v#* } t/s"
            echo "$t $mode $v" >>"$results"
        done
    done
done
echo
echo "| threads | mode | median TTFT ms | median decode t/s | runs |"
echo "| ---: | --- | ---: | ---: | ---: |"
median() { sort -g | awk '{a[NR] = $1} END {print (NR % 2) ? a[(NR + 1) / 2] : (a[NR / 2] + a[NR / 2 + 1]) / 2}'; }
for t in $threads; do
    for mode in memory cache none; do
        runs=$(awk -v t="$t" -v m="$mode" '$1 == t && $2 == m' "$results")
        echo "| $t | $mode | $(echo "$runs" | cut -d' ' -f3 | median) | $(echo "$runs" | cut -d' ' -f4 | median) | $(echo "$runs" | wc -l) |"
    done
done
rm -f "$results"
