#!/bin/bash
# Side-by-side prompt-processing and decode speed of switchyard and
# llama.cpp on the same GGUF files and thread counts, measured in the same
# run, printed as one table with the ratios.
#
# usage: bench/compare-llamacpp.sh MODEL [MODEL...] [-t "1 2"] [-p 512] [-n 128]
#            [-r REPS] [--rounds N] [-B BUILD_DIR] [-d DEVICES] [--venv DIR]
#            [--depth "0 512"]
#
# llama.cpp is llama-cpp-python from PyPI, built from its source
# distribution for this CPU (GGML_NATIVE) into a throwaway virtualenv that
# is removed at exit; --venv DIR (or $LLAMACPP_VENV) keeps it there and
# reuses it next time (the build takes minutes).  bench/llamacpp_bench.py
# runs llama-bench's measurement through its C bindings: ppN decodes N
# random tokens as one batch, tgN decodes N single tokens, after one
# warm-up, REPS times from an empty KV cache, or from one filled with D
# random tokens (untimed) at each depth D of --depth ("tg128 @ d512", as
# llama-bench's -d).  switchyard runs `switchyard bench` with the same N,
# REPS, depths and thread count, on --devices cpu (-d changes it) so both
# use the same cores and nothing else.
#
# Every round runs both tools once per model and thread count, alternating
# which goes first; the table gives the median over rounds of each tool's
# mean tokens/s and their ratio.  The machine may be shared: trust the
# medians and the ratios of one run, not absolute numbers across runs.
set -euo pipefail

root=$(cd "$(dirname "$0")/.." && pwd)
build=$root/build
models=()
threads="1 2"
n_prompt=512
n_gen=128
reps=3
rounds=3
devices=cpu
depths=0
venv=${LLAMACPP_VENV:-}
while [ $# -gt 0 ]; do
    case $1 in
    -m) models+=("$2"); shift 2 ;;
    -t) threads=${2//,/ }; shift 2 ;;
    -p) n_prompt=$2; shift 2 ;;
    -n) n_gen=$2; shift 2 ;;
    -r) reps=$2; shift 2 ;;
    --rounds) rounds=$2; shift 2 ;;
    -B) build=$2; shift 2 ;;
    -d) devices=$2; shift 2 ;;
    --venv) venv=$2; shift 2 ;;
    --depth) depths=${2// /,}; shift 2 ;;
    -h | --help) sed -n '2,25p' "$0"; exit 0 ;;
    -*) echo "compare-llamacpp.sh: unknown option '$1'" >&2; exit 2 ;;
    *) models+=("$1"); shift ;;
    esac
done
[ ${#models[@]} -gt 0 ] || models=("$root/models/SmolLM2-135M-Instruct.Q4_1.gguf")
for m in "${models[@]}"; do
    [ -f "$m" ] || { echo "compare-llamacpp.sh: no model file '$m'" >&2; exit 2; }
done
sy=$build/tools/switchyard
[ -x "$sy" ] || { echo "compare-llamacpp.sh: no $sy (build first, or pass -B)" >&2; exit 2; }

out=$(mktemp -d)
cleanup() { rm -rf "$out"; }
trap cleanup EXIT

# ------------------------------------------------------ llama-cpp-python
# llama.cpp built for this CPU: -march=native, except where the CPU reports
# AMX: there ggml's AMX weight buffer crashes llama_decode here (SIGSEGV in
# the first batch, a KVM guest with amx_int8/amx_tile, llama-cpp-python
# 0.3.36), so the build names every other ISA extension the CPU has.
llama_cmake_args() {
    local f
    f=" $(grep -m1 '^flags' /proc/cpuinfo 2>/dev/null | cut -d: -f2) "
    if [[ $f != *" amx_int8 "* && $f != *" amx_tile "* ]]; then
        echo "-DGGML_NATIVE=ON"
        return
    fi
    local a="-DGGML_NATIVE=OFF -DGGML_AMX_TILE=OFF -DGGML_AMX_INT8=OFF -DGGML_AMX_BF16=OFF"
    has() { [[ $f == *" $1 "* ]]; }
    has avx && a+=" -DGGML_AVX=ON"
    has avx2 && a+=" -DGGML_AVX2=ON"
    has fma && a+=" -DGGML_FMA=ON"
    has f16c && a+=" -DGGML_F16C=ON"
    has bmi2 && a+=" -DGGML_BMI2=ON"
    has avx_vnni && a+=" -DGGML_AVX_VNNI=ON"
    has avx512f && a+=" -DGGML_AVX512=ON"
    has avx512vbmi && a+=" -DGGML_AVX512_VBMI=ON"
    has avx512_vnni && a+=" -DGGML_AVX512_VNNI=ON"
    has avx512_bf16 && a+=" -DGGML_AVX512_BF16=ON"
    echo "$a"
}
if [ -z "$venv" ]; then
    venv=$out/venv
fi
py=$venv/bin/python
if ! [ -x "$py" ] || ! "$py" -c 'import llama_cpp' 2>/dev/null; then
    echo "building llama-cpp-python from PyPI for this CPU into $venv (minutes)..." >&2
    python3 -m venv "$venv"
    CMAKE_ARGS="$(llama_cmake_args) -DLLAMA_CURL=OFF -DLLAMA_BUILD_TESTS=OFF -DLLAMA_BUILD_EXAMPLES=OFF -DLLAMA_BUILD_SERVER=OFF" \
        CMAKE_BUILD_PARALLEL_LEVEL=$(nproc) \
        "$venv/bin/pip" install --quiet --disable-pip-version-check --no-cache-dir \
        --no-binary llama-cpp-python llama-cpp-python >"$out/pip.log" 2>&1 ||
        { tail -30 "$out/pip.log" >&2; echo "compare-llamacpp.sh: installing llama-cpp-python failed" >&2; exit 1; }
fi
lb() { "$py" "$root/bench/llamacpp_bench.py" "$@"; }
lb --system-info -m x -t 1 >&2

# ---------------------------------------------------------------- rounds
run_llama() { # model threads file
    lb -m "$1" -t "$2" -p "$n_prompt" -n "$n_gen" -r "$reps" -d "$depths" >"$3"
}
run_sy() {
    "$sy" bench -m "$1" -t "$2" -p "$n_prompt" -n "$n_gen" -r "$reps" -d "$depths" \
        --devices "$devices" -o json >"$3"
}
for ((round = 0; round < rounds; round++)); do
    for mi in "${!models[@]}"; do
        for t in $threads; do
            base=$out/r$round-m$mi-t$t
            if ((round % 2 == 0)); then
                run_llama "${models[$mi]}" "$t" "$base.llama.json"
                run_sy "${models[$mi]}" "$t" "$base.sy.json"
            else
                run_sy "${models[$mi]}" "$t" "$base.sy.json"
                run_llama "${models[$mi]}" "$t" "$base.llama.json"
            fi
            echo "round $((round + 1))/$rounds, $(basename "${models[$mi]}"), $t thread(s) done" >&2
        done
    done
done

# ----------------------------------------------------------------- table
python3 - "$out" "$rounds" "$threads" "${models[@]}" <<'PY'
import json, os, statistics, sys
out, rounds, threads, models = sys.argv[1], int(sys.argv[2]), sys.argv[3].split(), sys.argv[4:]
def test_name(n_prompt, n_gen, n_depth):
    name = "pp%d" % n_prompt if n_prompt else "tg%d" % n_gen
    return name + (" @ d%d" % n_depth if n_depth else "")
def order(test):  # by depth, pp before tg
    depth = int(test.split(" @ d")[1]) if " @ d" in test else 0
    return (depth, test[:2] != "pp", test)
print("| model | threads | test | llama.cpp t/s | switchyard t/s | ratio |")
print("| --- | ---: | ---: | ---: | ---: | ---: |")
for mi, m in enumerate(models):
    for t in threads:
        llama, sy = {}, {}
        for r in range(rounds):
            base = os.path.join(out, "r%d-m%d-t%s" % (r, mi, t))
            for e in json.load(open(base + ".llama.json")):
                llama.setdefault(test_name(e["n_prompt"], e["n_gen"], e.get("n_depth", 0)),
                                 []).append(e["avg_ts"])
            for e in json.load(open(base + ".sy.json")):
                sy.setdefault(e["test"], []).append(e["avg_ts"])
        for test in sorted(set(llama) | set(sy), key=order):
            a = statistics.median(llama[test]) if test in llama else float("nan")
            b = statistics.median(sy[test]) if test in sy else float("nan")
            print("| %s | %s | %s | %.2f | %.2f | %.2fx |" % (os.path.basename(m), t, test, a, b, b / a))
print("\nmedians over %d rounds, each the mean of the tool's repetitions; "
      "ratio = switchyard / llama.cpp" % rounds)
PY
