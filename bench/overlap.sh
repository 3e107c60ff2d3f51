#!/bin/bash
# A/B of the step time of two independent heavy branches on two devices
# (bench/overlap.c): build A and build B alternate within every round (A
# first in even rounds, B first in odd ones); prints each round's medians,
# then the median over rounds of each and the ratio A/B (above 1: B is
# faster).  bench/overlap.c uses only the public API, so it is compiled
# here against each build's own headers and library; each side loads its
# own plugins.  Each build directory must sit in its source tree.
#
# usage: bench/overlap.sh BUILD_A BUILD_B [-d "cpu opencl:0"] [-k 1024]
#                         [-m 32] [-l 4] [-n 9] [--rounds 5] [--auto]
# --auto: no pins; each build's planner places the branches itself.
set -euo pipefail
a=$(cd "$1" && pwd) b=$(cd "$2" && pwd)
shift 2
devs="cpu opencl:0" k=1024 m=32 layers=4 runs=9 rounds=5 auto=
while [ $# -gt 0 ]; do
    case $1 in
    -d) devs=$2; shift 2 ;;
    -k) k=$2; shift 2 ;;
    -m) m=$2; shift 2 ;;
    -l) layers=$2; shift 2 ;;
    -n) runs=$2; shift 2 ;;
    --rounds) rounds=$2; shift 2 ;;
    --auto) auto=auto; shift ;;
    *) echo "overlap.sh: unknown option '$1'" >&2; exit 2 ;;
    esac
done
here=$(cd "$(dirname "$0")" && pwd)
out=$(mktemp -d)
trap 'rm -rf "$out"' EXIT
for side in a b; do
    build=$([ $side = a ] && echo "$a" || echo "$b")
    src=$(cd "$build/.." && pwd)
    cc -std=c11 -O2 -o "$out/overlap-$side" "$here/overlap.c" -I"$src/framework/include" \
        -I"$build/framework/include" -L"$build" -lswitchyard -Wl,-rpath,"$build"
done
plugins() { echo "$1/plugins/cpu/sy-cpu.so:$1/plugins/opencl/sy-opencl.so"; }
for ((r = 0; r < rounds; r++)); do
    for side in a b; do
        [ $((r % 2)) = 1 ] && side=$([ $side = a ] && echo b || echo a)
        build=$([ $side = a ] && echo "$a" || echo "$b")
        SWITCHYARD_PLUGIN_PATH=$(plugins "$build") "$out/overlap-$side" $devs "$k" "$m" \
            "$layers" "$runs" $auto >"$out/$side-$r.json"
    done
    echo "round $((r + 1))/$rounds: a $(cat "$out/a-$r.json")  b $(cat "$out/b-$r.json")" >&2
done
python3 - "$out" "$rounds" "$a" "$b" <<'PY'
import json, statistics, sys
out, rounds, a, b = sys.argv[1], int(sys.argv[2]), sys.argv[3], sys.argv[4]
res = {s: [json.load(open(f"{out}/{s}-{r}.json")) for r in range(rounds)] for s in "ab"}
ma = statistics.median(x["median_s"] for x in res["a"])
mb = statistics.median(x["median_s"] for x in res["b"])
for s in "ab":
    print(f"{s.upper()} algorithm: {res[s][0].get('algorithm', '?')}")
print(f"A {a}: median {ma * 1e3:.2f} ms/step (predicted {res['a'][0]['predicted_s'] * 1e3:.2f} ms, "
      f"{res['a'][0]['segments']} segments)")
print(f"B {b}: median {mb * 1e3:.2f} ms/step (predicted {res['b'][0]['predicted_s'] * 1e3:.2f} ms, "
      f"serial {res['b'][0]['serial_predicted_s'] * 1e3:.2f} ms, {res['b'][0]['segments']} segments)")
print(f"A/B = {ma / mb:.3f} over {rounds} rounds; checksums {res['a'][0]['checksum']:.4f} "
      f"vs {res['b'][0]['checksum']:.4f}")
PY
