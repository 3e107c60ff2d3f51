#!/bin/bash
# Side-by-side prompt-processing and decode speed of switchyard and
# llama.cpp on the same GGUF files and thread counts, measured in the same
# run: every round runs llama-bench and `switchyard bench` once per model
# and thread count, alternating which goes first, and the table gives the
# median over rounds of each tool's mean tokens/s and the ratio.
#
# usage: bench/compare_llamacpp.sh [-m MODEL]... [-t "1 2"] [-p 512] [-n 128]
#                                  [-r REPS] [--rounds N] [-B BUILD_DIR] [-d DEVICES]
#
# switchyard runs on --devices cpu (-d changes it) so that both tools use
# the same CPU cores and nothing else.
#
# llama-bench comes from $LLAMA_BENCH, else from a previous build under
# ${LLAMACPP_DIR:-/tmp/switchyard-llamacpp}, else it is built there from
# the PyPI source distribution of llama-cpp-python (its vendored llama.cpp,
# native CPU flags), which needs pip, cmake and a C++ compiler once.  The
# machine may be shared: trust the medians and the ratios, not one run.
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
while [ $# -gt 0 ]; do
    case $1 in
    -m) models+=("$2"); shift 2 ;;
    -t) threads=$2; shift 2 ;;
    -p) n_prompt=$2; shift 2 ;;
    -n) n_gen=$2; shift 2 ;;
    -r) reps=$2; shift 2 ;;
    --rounds) rounds=$2; shift 2 ;;
    -B) build=$2; shift 2 ;;
    -d) devices=$2; shift 2 ;;
    -h | --help) sed -n '2,19p' "$0"; exit 0 ;;
    *) echo "compare_llamacpp.sh: unknown option '$1'" >&2; exit 2 ;;
    esac
done
[ ${#models[@]} -gt 0 ] || models=("$root/models/SmolLM2-135M-Instruct.Q4_1.gguf")
sy=$build/tools/switchyard
[ -x "$sy" ] || { echo "compare_llamacpp.sh: no $sy (build first, or pass -B)" >&2; exit 2; }

# ------------------------------------------------------------ llama-bench
llama_dir=${LLAMACPP_DIR:-/tmp/switchyard-llamacpp}
find_llama_bench() {
    if [ -n "${LLAMA_BENCH:-}" ]; then echo "$LLAMA_BENCH"; return; fi
    local b
    for b in "$llama_dir"/build/bin/llama-bench; do
        [ -x "$b" ] && { echo "$b"; return; }
    done
}
lb=$(find_llama_bench)
if [ -z "$lb" ]; then
    echo "building llama-bench from the llama-cpp-python sdist in $llama_dir (once)..." >&2
    mkdir -p "$llama_dir"
    (cd "$llama_dir" &&
        pip download --quiet --no-deps --no-binary :all: llama-cpp-python -d sdist &&
        tar -xzf sdist/llama_cpp_python-*.tar.gz &&
        src=$(ls -d llama_cpp_python-*/vendor/llama.cpp | head -1) &&
        cmake -S "$src" -B build -DCMAKE_BUILD_TYPE=Release -DGGML_NATIVE=ON -DLLAMA_CURL=OFF \
            -DLLAMA_BUILD_TESTS=OFF -DLLAMA_BUILD_EXAMPLES=OFF -DLLAMA_BUILD_SERVER=OFF >cmake.log &&
        cmake --build build --target llama-bench -j "$(nproc)" >build.log) ||
        { echo "compare_llamacpp.sh: building llama-bench failed (see $llama_dir)" >&2; exit 1; }
    lb=$llama_dir/build/bin/llama-bench
fi

# ---------------------------------------------------------------- rounds
out=$(mktemp -d)
trap 'rm -rf "$out"' EXIT
run_llama() { # model threads file
    "$lb" -m "$1" -t "$2" -p "$n_prompt" -n "$n_gen" -r "$reps" -o json >"$3" 2>/dev/null
}
run_sy() {
    "$sy" bench -m "$1" -t "$2" -p "$n_prompt" -n "$n_gen" -r "$reps" --devices "$devices" -o json >"$3"
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
python3 - "$out" "$rounds" "$threads" "${models[@]}" <<'EOF'
import json, os, statistics, sys
out, rounds, threads, models = sys.argv[1], int(sys.argv[2]), sys.argv[3].split(), sys.argv[4:]
def test_name(n_prompt, n_gen):
    return "pp%d" % n_prompt if n_prompt else "tg%d" % n_gen
print("| model | threads | test | llama.cpp t/s | switchyard t/s | ratio |")
print("| --- | ---: | ---: | ---: | ---: | ---: |")
for mi, m in enumerate(models):
    for t in threads:
        llama, sy = {}, {}
        for r in range(rounds):
            base = os.path.join(out, "r%d-m%d-t%s" % (r, mi, t))
            for e in json.load(open(base + ".llama.json")):
                llama.setdefault(test_name(e["n_prompt"], e["n_gen"]), []).append(e["avg_ts"])
            for e in json.load(open(base + ".sy.json")):
                sy.setdefault(e["test"], []).append(e["avg_ts"])
        for test in sorted(set(llama) | set(sy), key=lambda s: (s[:2] != "pp", s)):
            a = statistics.median(llama[test]) if test in llama else float("nan")
            b = statistics.median(sy[test]) if test in sy else float("nan")
            print("| %s | %s | %s | %.2f | %.2f | %.2fx |" % (os.path.basename(m), t, test, a, b, b / a))
print("\nmedians over %d rounds, each the mean of the tool's repetitions; "
      "ratio = switchyard / llama.cpp" % rounds)
EOF
