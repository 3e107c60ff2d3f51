#!/bin/bash
# A/B of two whole builds (core library, plugins and CLI): the same
# `switchyard bench` runs with build A and with build B, alternating within
# every round (A first in even rounds, B first in odd ones), and the table
# gives the median tokens/s of each over the rounds and the ratio B/A.
# Where bench/ab_plugins.sh swaps the CPU plugin under one CLI, this swaps
# everything, for changes to the runtime, scheduler or executor.
#
# usage: bench/ab_builds.sh BUILD_A BUILD_B [-m MODEL]... [-d DEVICES]...
#                           [-t "1 2"] [-p 128] [-n 32] [-r 2] [--rounds 5]
#                           [--policy P]
# Each -d adds a device list to compare on (default: cpu); every
# (model, devices, threads) combination runs in every round.
set -euo pipefail
root=$(cd "$(dirname "$0")/.." && pwd)
a=$(cd "$1" && pwd) b=$(cd "$2" && pwd)
shift 2
models=()
devices=()
threads="2"
n_prompt=128
n_gen=32
reps=2
rounds=5
policy=latency
while [ $# -gt 0 ]; do
    case $1 in
    -m) models+=("$2"); shift 2 ;;
    -d) devices+=("$2"); shift 2 ;;
    -t) threads=$2; shift 2 ;;
    -p) n_prompt=$2; shift 2 ;;
    -n) n_gen=$2; shift 2 ;;
    -r) reps=$2; shift 2 ;;
    --rounds) rounds=$2; shift 2 ;;
    --policy) policy=$2; shift 2 ;;
    *) echo "ab_builds.sh: unknown option '$1'" >&2; exit 2 ;;
    esac
done
[ ${#models[@]} -gt 0 ] || models=("$root/models/SmolLM2-135M-Instruct.Q4_1.gguf")
[ ${#devices[@]} -gt 0 ] || devices=(cpu)
out=$(mktemp -d)
trap 'rm -rf "$out"' EXIT
for ((r = 0; r < rounds; r++)); do
    for side in a b; do
        [ $((r % 2)) = 1 ] && side=$([ $side = a ] && echo b || echo a)
        build=$([ $side = a ] && echo "$a" || echo "$b")
        for mi in "${!models[@]}"; do
            for di in "${!devices[@]}"; do
                for t in $threads; do
                    env -u SWITCHYARD_PLUGIN_PATH "$build/tools/switchyard" bench -m "${models[$mi]}" -t "$t" -p "$n_prompt" \
                        -n "$n_gen" -r "$reps" --devices "${devices[$di]}" --policy "$policy" -o json \
                        >"$out/$side-$r-$mi-$di-$t.json"
                done
            done
        done
    done
    echo "round $((r + 1))/$rounds done" >&2
done
python3 - "$out" "$rounds" "$threads" "${#devices[@]}" "${devices[@]}" "${models[@]}" <<'PY'
import json, os, statistics, sys
out, rounds, threads, nd = sys.argv[1], int(sys.argv[2]), sys.argv[3].split(), int(sys.argv[4])
devices, models = sys.argv[5:5 + nd], sys.argv[5 + nd:]
print("| model | devices | threads | test | A t/s | B t/s | B/A |")
print("| --- | --- | ---: | ---: | ---: | ---: | ---: |")
for mi, m in enumerate(models):
    for di, d in enumerate(devices):
        for t in threads:
            res = {"a": {}, "b": {}}
            for side in "ab":
                for r in range(rounds):
                    name = "%s-%d-%d-%d-%s.json" % (side, r, mi, di, t)
                    for e in json.load(open(os.path.join(out, name))):
                        res[side].setdefault(e["test"], []).append(e["avg_ts"])
            for test in res["a"]:
                x, y = statistics.median(res["a"][test]), statistics.median(res["b"][test])
                print("| %s | %s | %s | %s | %.2f | %.2f | %.3f |"
                      % (os.path.basename(m), d, t, test, x, y, y / x))
PY
