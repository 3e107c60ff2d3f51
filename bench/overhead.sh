#!/bin/bash
# Share of the decode step spent outside the kernels, from CPU samples.
#
# Runs `switchyard bench -p 0 -n N --devices cpu` under `perf record`
# (frame-pointer call chains: build with -fno-omit-frame-pointer, e.g.
# `meson setup build-prof --buildtype=release -Dc_args=-fno-omit-frame-pointer`)
# and classifies the samples of the calling thread (lane 0, which runs
# the step from start to end) taken between its first and last sample
# inside bench's timed loop (run_once), by the function the sample
# landed in:
#   kernels   the CPU plugin's op arithmetic (ISA kernels, tile and row
#             loops: every sy-cpu.so function not listed below) and libm
#   dispatch  the plugin's per-node work: every cpu_device_* entry (the
#             executor's support checks land in cpu_device_supports), its
#             node loop (cpu_execute_nodes) and the kept program that
#             replays it (cpu_program_*), data resolution, cpu_kernel_*,
#             the launchers of a chain, an element-wise node or a node
#             alone, and matmul setup (dtype checks, tiling, scratch, the
#             lookup of a packed weight, a job's per-run setup in
#             cpu_matmul_job_go and the move of its fused KV writes),
#             matching and readying the nodes fused into a matmul group
#             (cpu_kernels_fused.c), cpu_log.  Prefetches a job issues
#             for the data of later kernels (cpu_matmul_job_prefetch,
#             cpu_epilogue_prefetch) count as kernels: they are those
#             kernels' reads, moved earlier
#   pool      cpu_pool_* and cpu_worker_main (a worker's wait for the next
#             job is inlined there): waking lanes, claiming chunks, waiting
#             for lanes still inside a job (the barrier)
#   runtime   libswitchyard: graph building, planning, the executor
#   libc      malloc/free, printf (node names), qsort, memcpy outside kernels
#   os        the kernel: interrupts, page faults, scheduling
#   other     the CLI, the dynamic linker, hwloc
#   repack    any sample under cpu_weight_packed (but in it: its lookup
#             is dispatch) or cpu_repack_task, or in
#             madvise called from the plugin (its file-page release): the
#             CPU plugin's one-time copy of Q4_0/Q4_1 weights into its
#             packed layout, made during the first (warm-up) step; reported
#             apart and left out of the per-token shares below
# Outside the kernels = everything but 'kernels'; per token divides the
# samples by the rate and by the tokens in the window (N x REPS and bench's
# one-token warm-up).  Samples count CPU time
# of the thread, so time the thread spends preempted by other processes is
# not in any bucket.  Worker lanes (-t 2) are reported apart: their pool
# share is the time they spin or sleep-wait between jobs.
#
# -s N also lists the N functions outside the kernels with most samples
# on the main lane.
#
# The sampling rate (-F, default 999 Hz) perturbs what it measures: every
# sample of the cpu-clock event is a timer interrupt, in this VM an exit to
# the hypervisor, plus a frame-pointer unwind.  Interleaved on SmolLM2
# (bench -p 0 -n 128 -r 3, 4 rounds, median tokens/s): unprofiled 145 at 1
# thread and 222 at 2; under perf at 4999 Hz 128 (-11%) and 176 (-21%); at
# 999 Hz 143 (-1.5%) and 210 (-5%).  At 2 threads the lost time lands in the
# barriers (a lane stopped by a sample makes the other wait), so 4999 Hz
# inflated the pool share.  Hence 999 Hz and more repetitions by default.
#
# -L VENV measures the peer instead: llama.cpp, as llama-cpp-python in the
# virtualenv VENV (bench/compare-llamacpp.sh --venv VENV builds it), running
# the same decode (bench/llamacpp_bench.py -p 0 -n N -r REPS) on the same
# model and threads.  Its calling thread's samples between its first and
# last sample in a quantized dot product (ggml_vec_dot_*, ggml_gemv_*)
# are sorted the same way:
#   kernels   libggml-cpu's op arithmetic (ggml_vec_*, ggml_compute_forward_*,
#             quantize_row_*, ggml_gemv_/gemm_*, dequantize_*, fp16
#             conversions, its unnamed local functions) and libm
#   pool      libgomp (its parallel regions' barriers and waits)
#   runtime   the rest of libggml*, libllama
#   libc, os, other  as above
#   python    the interpreter running the loop (one ctypes call per token;
#             llama-bench, in C, has none): listed, and left out of the
#             outside-kernels share
#
# --runs N repeats the whole measurement N times (each a fresh process)
# and ends with the median, lowest and highest outside-kernels share and
# time per token: one run's share moved between 5% and 10% at 2 threads in
# this VM from one minute to the next, so a verdict takes several runs.
# Most of that spread is the pool bucket: a worker preempted inside a tile
# holds it, and the caller waits in the barrier until the worker runs
# again.  `perf record -e sched:sched_switch -a` during a 2-thread run
# (2026-12-04) showed the guest's kdamond (DAMON) taking a core 5 times
# for 0.86 ms each, and a sandbox process 51 times for ~31 us each.  On a
# run without such events the caller waited ~1100 TSC cycles a job on
# average with 16-row decode tiles (the other lane's last tile or two,
# ~1200 cycles each on SmolLM2), 600-650 with 4-row tiles (2026-12-04).
#
# usage: bench/overhead.sh [-m MODEL] [-t THREADS] [-n 128] [-r 6]
#                          [-F 999] [-s N] [-B BUILD_DIR] [-L VENV] [--runs N]
set -euo pipefail
root=$(cd "$(dirname "$0")/.." && pwd)
build=$root/build-prof
model=$root/models/SmolLM2-135M-Instruct.Q4_1.gguf
threads=1
n_gen=128
reps=6
freq=999
top=0
venv=
runs=1
args=("$@")
while [ $# -gt 0 ]; do
    case $1 in
    --runs) runs=$2; shift 2 ;;
    -m) model=$2; shift 2 ;;
    -t) threads=$2; shift 2 ;;
    -n) n_gen=$2; shift 2 ;;
    -r) reps=$2; shift 2 ;;
    -F) freq=$2; shift 2 ;;
    -s) top=$2; shift 2 ;;
    -B) build=$2; shift 2 ;;
    -L) venv=$2; shift 2 ;;
    *) echo "overhead.sh: unknown option '$1'" >&2; exit 2 ;;
    esac
done
command -v perf > /dev/null || { echo "overhead.sh: perf is not installed" >&2; exit 1; }
case $runs in
'' | *[!0-9]* | 0) echo "overhead.sh: --runs takes a positive count, not '$runs'" >&2; exit 2 ;;
esac
if [ "$runs" -gt 1 ]; then
    # The same measurement, once per run; --runs after the others wins.
    summary=$(mktemp)
    trap 'rm -f "$summary"' EXIT
    for i in $(seq "$runs"); do
        echo "== run $i/$runs"
        "$0" "${args[@]}" --runs 1 | tee -a "$summary"
    done
    python3 - "$summary" <<'PY'
import re, statistics, sys
text = open(sys.argv[1]).read()
share = [float(v) for v in re.findall(r"^outside kernels \(.*\): ([0-9.]+)%$", text, re.M)]
ms = [float(v) for v in re.findall(r"^per token .*outside kernels ([0-9.]+) ms$", text, re.M)]
if not share:
    sys.exit("overhead.sh: no run gave a share")
print("outside kernels over %d runs: median %.2f%% (lowest %.2f%%, highest %.2f%%)"
      % (len(share), statistics.median(share), min(share), max(share)))
if len(ms) == len(share):
    print("outside kernels per token: median %.3f ms (lowest %.3f, highest %.3f)"
          % (statistics.median(ms), min(ms), max(ms)))
PY
    exit
fi
out=$(mktemp -d)
trap 'rm -rf "$out"' EXIT
if [ -n "$venv" ]; then
    [ -x "$venv/bin/python" ] || { echo "overhead.sh: no python in '$venv'" >&2; exit 1; }
    perf record -q -F "$freq" -o "$out/perf.data" -- \
        "$venv/bin/python" "$root/bench/llamacpp_bench.py" -m "$model" -t "$threads" -p 0 \
        -n "$n_gen" -r "$reps" > "$out/bench.json" 2> "$out/bench.err" ||
        { cat "$out/bench.err" >&2; exit 1; }
    python3 -c 'import json, sys
r = json.load(open(sys.argv[1]))[0]
print("llama.cpp tg%d, %d thread(s): %.2f t/s" % (r["n_gen"], r["n_threads"], r["avg_ts"]))' \
        "$out/bench.json"
    perf script -i "$out/perf.data" -F pid,tid,time,ip,sym,dso 2> /dev/null |
        awk -v top="$top" -v freq="$freq" -v tokens=$((n_gen * reps + 1)) '
function classify(sym, dso) {
    if (dso ~ /libggml-cpu/ &&
        sym ~ /^(ggml_vec_|ggml_compute_forward|quantize_row|ggml_gemv|ggml_gemm|dequantize)/)
        return "kernels"
    if (dso ~ /libggml-cpu/ && sym ~ /^(ggml_cpu_fp|ggml_v_|\[unknown\])/) return "kernels"
    if (dso ~ /libm\.so/) return "kernels"
    if (dso ~ /libgomp/ || sym == "ggml_barrier") return "pool"
    if (dso ~ /libggml|libllama/) return "runtime"
    if (dso ~ /libc\.so/) return "libc"
    if (dso ~ /kernel\.kallsyms/ || dso ~ /vdso/) return "os"
    if (dso ~ /python|_ctypes|libffi/) return "python"
    return "other"
}
/^[ \t]*[0-9]+\/[0-9]+ / {
    split($1, a, "/"); sym = $4
    n_s++; S_main[n_s] = a[1] == a[2]; S_t[n_s] = $2 + 0; S_f[n_s] = sym
    S_c[n_s] = classify(sym, $NF)
    if (S_main[n_s] && sym ~ /^(ggml_vec_dot|ggml_gemv)/) {
        if (lo == "" || S_t[n_s] < lo) lo = S_t[n_s]
        if (S_t[n_s] > hi) hi = S_t[n_s]
    }
}
END {
    if (lo == "") { print "overhead.sh: no llama.cpp dot-product samples" > "/dev/stderr"; exit 1 }
    for (i = 1; i <= n_s; i++) {
        if (!S_main[i] || S_t[i] < lo || S_t[i] > hi) continue
        n++; c[S_c[i]]++
        if (S_c[i] != "kernels") f[S_c[i] " " S_f[i]]++
    }
    split("kernels pool runtime libc os other python", order, " ")
    line = sprintf("main    %6d samples:", n)
    for (k = 1; k <= 7; k++) line = line sprintf(" %s %.2f%%", order[k], 100 * c[order[k]] / n)
    print line
    printf("outside kernels (main lane, python left out): %.2f%%\n",
           100 * (n - c["kernels"] - c["python"]) / (n - c["python"]))
    printf("per token (main lane CPU, python left out): %.3f ms, outside kernels %.3f ms\n",
           1000 * (n - c["python"]) / freq / tokens,
           1000 * (n - c["kernels"] - c["python"]) / freq / tokens)
    if (top > 0) {
        for (k in f) printf("  %6.2f%%  %s\n", 100 * f[k] / n, k) | "sort -rn | head -n " top
        close("sort -rn | head -n " top)
    }
}'
    exit
fi
perf record -q -F "$freq" --call-graph fp -o "$out/perf.data" -- \
    "$build/tools/switchyard" bench -m "$model" -p 0 -n "$n_gen" -r "$reps" -t "$threads" \
    --devices cpu > "$out/bench.txt" 2> "$out/bench.err" ||
    { cat "$out/bench.err" >&2; exit 1; }
grep "tg$n_gen" "$out/bench.txt" || true
perf script -i "$out/perf.data" -F pid,tid,time,ip,sym,dso 2> /dev/null | awk -v top="$top" -v freq="$freq" -v tokens=$((n_gen * reps + 1)) '
function classify(sym, dso) {
    if (dso ~ /sy-cpu\.so/) {
        if (sym ~ /^cpu_pool_/ || sym == "cpu_worker_main") return "pool"
        if (sym ~ /^(cpu_device_[a-z_]+|cpu_program_[a-z_]+|cpu_matmul_job_(go|run|build|epilogue)|cpu_matmul_prepare|cpu_epilogue_move_kv|cpu_run_node|cpu_norm_chain_run|cpu_eltwise_run|cpu_execute_nodes|cpu_prepare_batch|cpu_prepare_node|cpu_resolve_data|cpu_run_norm_chain|cpu_scan_epilogue|cpu_kernel_run|cpu_kernel_[a-z0-9_]+|cpu_matmul_(setup|plan_tiles|use_packed|scratch|can_group)|cpu_epilogue_(begin|take|ready)|cpu_qkv_(take_rope|take_kv|member_of|span|may_write|wrote)|cpu_glu_take|cpu_rope_prepare|cpu_rope_tables|cpu_kv_write_check|cpu_weight_packed|cpu_weight_packed_made|cpu_scratch_reserve|cpu_shared_reserve|cpu_log|cpu_op_name|cpu_status_name)($|\.)/) return "dispatch"
        return "kernels"
    }
    if (dso ~ /libm\.so/) return "kernels"
    if (dso ~ /libswitchyard/) return "runtime"
    if (dso ~ /libc\.so/) return "libc"
    if (dso ~ /kernel\.kallsyms/ || dso ~ /vdso/) return "os"
    return "other"
}
function flush() {
    if (n_s == 0) return
    if (madv && in_cpu) repack = 1
    S_pid[n_s] = pid; S_tid[n_s] = tid; S_t[n_s] = t; S_c[n_s] = repack ? "repack" : leaf; S_f[n_s] = leaf_sym
    if (timed) { if (!(tid in first) || t < first[tid]) first[tid] = t; if (t > last[tid]) last[tid] = t }
}
/^[ \t]*$/ { next }
/^[ \t]*[0-9]+\/[0-9]+ / {
    flush()
    n_s++
    split($1, a, "/"); pid = a[1]; tid = a[2]; t = $2 + 0; leaf = ""; timed = 0; repack = 0
    madv = 0; in_cpu = 0
    next
}
{
    # a frame: "addr sym (dso)"
    dso = $NF; sym = $2
    if (leaf == "") { leaf = classify(sym, dso); leaf_sym = sym }
    if (sym ~ /^run_once($|\.)/) timed = 1  # gcc may clone it (run_once.constprop.0)
    # Packing runs under cpu_weight_packed; its own samples at every step
    # (the lookup of the packed copy) are dispatch.
    if ((sym == "cpu_weight_packed" && leaf_sym !~ /^cpu_weight_packed/) || sym == "cpu_repack_task") repack = 1
    # The plugin calls madvise only to release the file pages of a packed
    # weight; unwinding by frame pointers drops the caller of the frameless
    # libc wrapper, so cpu_weight_packed is not always in those stacks.
    if (sym ~ /^_*madvise$/) madv = 1
    if (dso ~ /sy-cpu\.so/) in_cpu = 1
}
END {
    flush()
    main = ""
    for (i = 1; i <= n_s; i++) if (S_pid[i] == S_tid[i]) { main = S_tid[i]; break }
    lo = first[main]; hi = last[main]
    split("kernels dispatch pool runtime libc os other", order, " ")
    for (i = 1; i <= n_s; i++) {
        if (S_t[i] < lo || S_t[i] > hi) continue
        who = S_tid[i] == main ? "main" : "workers"
        if (S_c[i] == "repack") { rp[who]++; continue }
        n[who]++; c[who, S_c[i]]++
        if (who == "main" && S_c[i] != "kernels") f[S_c[i] " " S_f[i]]++
    }
    for (w = 1; w <= 2; w++) {
        who = w == 1 ? "main" : "workers"
        if (!(who in n)) continue
        line = sprintf("%-7s %6d samples:", who, n[who])
        for (k = 1; k <= 7; k++) line = line sprintf(" %s %.2f%%", order[k], 100 * c[who, order[k]] / n[who])
        print line
        if (who == "main") {
            printf("outside kernels (main lane): %.2f%%\n", 100 * (1 - c[who, "kernels"] / n[who]))
            printf("per token (main lane CPU): %.3f ms, outside kernels %.3f ms\n",
                   1000 * n[who] / freq / tokens, 1000 * (n[who] - c[who, "kernels"]) / freq / tokens)
            printf("repack (one-time, first step; left out above): main lane %.1f ms, workers %.1f ms\n",
                   1000 * rp["main"] / freq, 1000 * rp["workers"] / freq)
        }
        if (who == "main" && top > 0) {
            for (k in f) printf("  %6.2f%%  %s\n", 100 * f[k] / n[who], k) | "sort -rn | head -n " top
            close("sort -rn | head -n " top)
        }
    }
}'
