#!/bin/bash
# A/B of two builds of the CPU plugin on whole models: the same
# `switchyard bench` runs with SWITCHYARD_PLUGIN_PATH set to plugin folder A
# and to B, alternating within every round, and the table gives the median
# tokens/s of each over the rounds and the ratio B/A.
#
# usage: bench/ab_plugins.sh A B [-m MODEL]... [-t "1 2"]
#                            [-p 128] [-n 32] [-r 2] [-d 0] [--rounds 5]
#                            [-B BUILD_DIR]
# -d N: every test at depth N (bench -d: the context first filled with N
# tokens, untimed), where attention reads a long cache.
# A and B are each a plugin folder, optionally followed by environment
# settings for that side: "build/plugins/cpu,SWITCHYARD_CPU_ACTIVATIONS=q8".
# Both sides run on --devices cpu.
set -euo pipefail
root=$(cd "$(dirname "$0")/.." && pwd)
a=$1 b=$2
shift 2
build=$root/build
models=()
threads="1 2"
n_prompt=128
n_gen=32
reps=2
depth=0
rounds=5
while [ $# -gt 0 ]; do
    case $1 in
    -m) models+=("$2"); shift 2 ;;
    -t) threads=$2; shift 2 ;;
    -p) n_prompt=$2; shift 2 ;;
    -n) n_gen=$2; shift 2 ;;
    -r) reps=$2; shift 2 ;;
    -d) depth=$2; shift 2 ;;
    --rounds) rounds=$2; shift 2 ;;
    -B) build=$2; shift 2 ;;
    *) echo "ab_plugins.sh: unknown option '$1'" >&2; exit 2 ;;
    esac
done
[ ${#models[@]} -gt 0 ] || models=("$root/models/SmolLM2-135M-Instruct.Q4_1.gguf")
out=$(mktemp -d)
trap 'rm -rf "$out"' EXIT
for ((r = 0; r < rounds; r++)); do
    for side in a b; do
        [ $((r % 2)) = 1 ] && side=$([ $side = a ] && echo b || echo a)
        spec=$([ $side = a ] && echo "$a" || echo "$b")
        IFS=, read -r -a parts <<<"$spec"
        for mi in "${!models[@]}"; do
            for t in $threads; do
                env SWITCHYARD_PLUGIN_PATH="${parts[0]}" "${parts[@]:1}" "$build/tools/switchyard" bench -m "${models[$mi]}" \
                    -t "$t" -p "$n_prompt" -n "$n_gen" -r "$reps" -d "$depth" --devices cpu -o json >"$out/$side-$r-$mi-$t.json"
            done
        done
    done
    echo "round $((r + 1))/$rounds done" >&2
done
python3 - "$out" "$rounds" "$threads" "${models[@]}" <<'PY'
import json, os, statistics, sys
out, rounds, threads, models = sys.argv[1], int(sys.argv[2]), sys.argv[3].split(), sys.argv[4:]
print("| model | threads | test | A t/s | B t/s | B/A |")
print("| --- | ---: | ---: | ---: | ---: | ---: |")
for mi, m in enumerate(models):
    for t in threads:
        res = {"a": {}, "b": {}}
        for side in "ab":
            for r in range(rounds):
                for e in json.load(open(os.path.join(out, "%s-%d-%d-%s.json" % (side, r, mi, t)))):
                    res[side].setdefault(e["test"], []).append(e["avg_ts"])
        for test in res["a"]:
            x, y = statistics.median(res["a"][test]), statistics.median(res["b"][test])
            print("| %s | %s | %s | %.2f | %.2f | %.3f |" % (os.path.basename(m), t, test, x, y, y / x))
PY
