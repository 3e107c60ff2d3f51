#!/bin/bash
# "Do no harm": the automatic plan over every device against each
# single-device plan, on whole-model decode and prefill speed.
#
# Configurations (each a `switchyard bench` run, with the profiles a
# session finds by default: $SWITCHYARD_PROFILE_DIR, the tune output
# directory, the shipped profiles/):
#   auto             --devices cpu,opencl:0,npusim (policy latency)
#   cpu              --devices cpu
#   opencl:0         --devices cpu,opencl:0 --policy prefer:opencl:0
#   npusim           --devices cpu,npusim --policy prefer:npusim
# A device's "single-device plan" runs every node that device can run on
# it and falls back to the cpu for the rest, as the scheduler's best single
# plan does (npusim has no get_rows, rope or attention).  Rounds interleave
# the configurations, in rotated order, so that drifting load on the
# shared machine hits all of them alike; the table gives the median and
# the best tokens/s over the rounds and the ratio auto / best single (goal
# >= 0.97 on the medians).
#
# usage: bench/do_no_harm.sh [-m MODEL] [-p 64] [-n 32] [-r 2] [--rounds 5]
#                            [-t THREADS] [-B BUILD_DIR] [--devices LIST]
set -euo pipefail
root=$(cd "$(dirname "$0")/.." && pwd)
build=$root/build
model=$root/models/SmolLM2-135M-Instruct.Q4_1.gguf
n_prompt=64
n_gen=32
reps=2
rounds=5
threads=
devices=cpu,opencl:0,npusim
while [ $# -gt 0 ]; do
    case $1 in
    -m) model=$2; shift 2 ;;
    -p) n_prompt=$2; shift 2 ;;
    -n) n_gen=$2; shift 2 ;;
    -r) reps=$2; shift 2 ;;
    -t) threads=$2; shift 2 ;;
    --rounds) rounds=$2; shift 2 ;;
    -B) build=$2; shift 2 ;;
    --devices) devices=$2; shift 2 ;;
    *) echo "do_no_harm.sh: unknown option '$1'" >&2; exit 2 ;;
    esac
done
bin=$build/tools/switchyard
[ -x "$bin" ] || { echo "do_no_harm.sh: no $bin (build first, or -B DIR)" >&2; exit 2; }
[ -r "$model" ] || { echo "do_no_harm.sh: no $model (tools/fetch-models.sh)" >&2; exit 2; }

# name|bench arguments
configs=("auto|--devices $devices")
IFS=, read -r -a devs <<<"$devices"
for d in "${devs[@]}"; do
    if [ "$d" = cpu ]; then
        configs+=("cpu|--devices cpu")
    else
        configs+=("$d|--devices cpu,$d --policy prefer:$d")
    fi
done
out=$(mktemp -d)
trap 'rm -rf "$out"' EXIT
# What the automatic plan is, with the profiles it finds: nodes per device.
for phase in prefill decode; do
    "$bin" plan -m "$model" --devices "$devices" --phase "$phase" --tokens "$n_prompt" --json \
        2>/dev/null >"$out/plan-$phase.json" || true
    python3 - "$out/plan-$phase.json" "$phase" <<'PY'
import collections, json, sys
try:
    p = json.load(open(sys.argv[1]))
except ValueError:
    sys.exit(print("auto plan (%s): could not be made" % sys.argv[2]))
c = collections.Counter(n["device"] for n in p["nodes"] if not n["view"])
prof = ", ".join("%s: %s" % (d["name"], d["profile"] or "none") for d in p["devices"])
print("auto plan (%s): %s; predicted %.2f ms; profiles %s" % (sys.argv[2],
      ", ".join("%d nodes on %s" % (v, k) for k, v in c.items()), p["predicted_s"] * 1e3, prof))
PY
done
n=${#configs[@]}
for ((r = 0; r < rounds; r++)); do
    for ((k = 0; k < n; k++)); do
        c=${configs[$(((k + r) % n))]}
        name=${c%%|*}
        args=${c#*|}
        # shellcheck disable=SC2086
        "$bin" bench -m "$model" -p "$n_prompt" -n "$n_gen" -r "$reps" ${threads:+-t $threads} \
            $args -o json >"$out/${name//[:\/]/_}-$r.json" 2>"$out/${name//[:\/]/_}-$r.err" || {
            echo "do_no_harm.sh: $name failed:" >&2
            cat "$out/${name//[:\/]/_}-$r.err" >&2
            exit 1
        }
    done
    echo "round $((r + 1))/$rounds done" >&2
done
names=()
for c in "${configs[@]}"; do names+=("${c%%|*}"); done
python3 - "$out" "$rounds" "${names[@]}" <<'PY'
import json, os, statistics, sys
out, rounds, names = sys.argv[1], int(sys.argv[2]), sys.argv[3:]
res = {}
for name in names:
    f = name.replace(":", "_").replace("/", "_")
    for r in range(rounds):
        for e in json.load(open(os.path.join(out, "%s-%d.json" % (f, r)))):
            res.setdefault(e["test"], {}).setdefault(name, []).append(e["avg_ts"])
# Median over the rounds, and the fastest round: on a loaded machine the
# fastest is the better estimate of what the plan can do.
print("| test | stat | " + " | ".join("%s t/s" % n for n in names) +
      " | best single | auto / best |")
print("| --- | --- | " + " | ".join("---:" for _ in names) + " | --- | ---: |")
worst = None
for test, by in res.items():
    for stat, fn in (("median", statistics.median), ("max", max)):
        val = {n: fn(v) for n, v in by.items()}
        singles = {n: v for n, v in val.items() if n != "auto"}
        best = max(singles, key=singles.get)
        ratio = val["auto"] / singles[best]
        if stat == "median":
            worst = ratio if worst is None else min(worst, ratio)
        print("| %s | %s | " % (test, stat) + " | ".join("%.2f" % val[n] for n in names) +
              " | %s | %.3f |" % (best, ratio))
print("\nworst median auto / best single: %.3f (goal >= 0.97)" % worst)
PY
