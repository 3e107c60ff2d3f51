#!/bin/bash
# Predicted against measured peak memory per device (docs/memory.md,
# "Budgets, --fit and peak memory"): `switchyard bench` tests whose context
# is exactly filled (ppN: N prompt tokens in one chunk into an N-token
# context; tgN: N decode steps into an N-token context), so that the whole
# KV cache and the largest arena are touched, on SmolLM2-135M and on a
# 1.1B synthetic llama (Q4_0, written with `switchyard synth` once).  The
# cpu row's measured peak is the process's VmHWM, restarted before each
# test (each test runs in a process of its own, as a session would: a
# second session in one process reuses the first's freed heap); other
# devices' is the plugin's own count of what it held there (memory_usage),
# else what the executor allocated there.
#
# usage: bench/mem_peak.sh [-B BUILD_DIR] [-t THREADS] [--quick | --discrete]
#   --quick: SmolLM2 only, shorter tests
#   --discrete: only SmolLM2 on cpu,opencl:0 prefer:opencl:0 with PoCL
#               forced discrete (SWITCHYARD_OPENCL_DISCRETE=1)
set -euo pipefail
root=$(cd "$(dirname "$0")/.." && pwd)
build=$root/build
threads=2
quick=0
while [ $# -gt 0 ]; do
    case $1 in
    -B) build=$2; shift 2 ;;
    -t) threads=$2; shift 2 ;;
    --quick) quick=1; shift ;;
    --discrete) quick=2; shift ;;
    *) echo "mem_peak.sh: unknown option '$1'" >&2; exit 2 ;;
    esac
done
sy=$build/tools/switchyard
smol=$root/models/SmolLM2-135M-Instruct.Q4_1.gguf
synth=${TMPDIR:-/tmp}/switchyard-synth-1b-q4_0.gguf
out=$(mktemp -d)
trap 'rm -rf "$out"' EXIT
[ -f "$smol" ] || { echo "mem_peak.sh: $smol missing (tools/fetch-models.sh)" >&2; exit 1; }
if [ $quick = 0 ] && [ ! -f "$synth" ]; then
    "$sy" synth --arch llama --preset 1b --type q4_0 -o "$synth" >/dev/null
fi

# case: label, model, bench arguments, environment
n=0
run() {
    local label=$1 model=$2 args=$3 env=$4
    env -u SWITCHYARD_PLUGIN_PATH $env "$sy" bench -m "$model" -t "$threads" -r 1 --no-warmup \
        -o json $args >"$out/$n.json" 2>"$out/$n.err" ||
        { echo "mem_peak.sh: $label failed:" >&2; cat "$out/$n.err" >&2; exit 1; }
    echo "$label" >"$out/$n.label"
    n=$((n + 1))
}
# A prompt test and a generation test, each in its own process.
both() {
    run "$1" "$2" "-p $3 -n 0 $4" "$5"
    run "$1" "$2" "-p 0 -n $6 $4" "$5"
}
if [ $quick = 1 ]; then
    both "cpu" "$smol" 256 "--devices cpu" "" 256
elif [ $quick = 2 ]; then
    both "cpu,opencl:0 prefer:opencl:0, discrete" "$smol" 512 \
        "--devices cpu,opencl:0 --policy prefer:opencl:0" "SWITCHYARD_OPENCL_DISCRETE=1" 256
else
    both "cpu" "$smol" 512 "--devices cpu" "" 512
    both "cpu,opencl:0 prefer:opencl:0" "$smol" 512 \
        "--devices cpu,opencl:0 --policy prefer:opencl:0" "" 256
    both "cpu,opencl:0 prefer:opencl:0, discrete" "$smol" 512 \
        "--devices cpu,opencl:0 --policy prefer:opencl:0" "SWITCHYARD_OPENCL_DISCRETE=1" 256
    both "cpu" "$synth" 512 "--devices cpu" "" 256
fi

python3 - "$out" "$n" <<'PY'
import json, os, sys
out, n = sys.argv[1], int(sys.argv[2])
print("| model | devices | test | device | predicted | measured | predicted/measured |")
print("| --- | --- | ---: | --- | ---: | ---: | ---: |")
worst = 0.0
for i in range(n):
    label = open(os.path.join(out, "%d.label" % i)).read().strip()
    for e in json.load(open(os.path.join(out, "%d.json" % i))):
        for p in e.get("peaks", []):
            m, q = p["measured_bytes"], p["predicted_bytes"]
            if m == 0 and q == 0:
                continue
            r = q / m if m else float("inf")
            worst = max(worst, abs(r - 1.0))
            print("| %s | %s | %s | %s | %.1f MiB | %.1f MiB | %.3f |"
                  % (e["model"], label, e["test"], p["device"], q / 2**20, m / 2**20, r))
print("\nlargest difference: %.1f%%" % (100 * worst))
PY
