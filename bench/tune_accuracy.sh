#!/bin/bash
# How well tuned profiles predict what they measure: for every device and
# round, `switchyard tune` writes a fresh profile (into a temporary
# directory), then `tune --validate --no-tune` compares the cost model's
# predictions with measurements of the model's decode and prefill steps at
# the tuned shapes and at shapes the tune never ran (--past/--tokens).
# The table gives, per device and step, the median over the rounds of the
# per-node median |error| and of the step's error against the step run as
# one launch and against the sum of its nodes run alone.
#
# usage: bench/tune_accuracy.sh [-m MODEL] [-d "cpu opencl:0"] [--rounds 3]
#                               [--quick] [--held-out "300 40"] [--prio] [-B BUILD_DIR]
#                               [--keep DIR]
# --prio runs every tune and validation under SCHED_RR priority 1 (needs
#   root): on a machine other work keeps busy, this is the only way to see
#   the device instead of the neighbours.  Off by default: it starves
#   everything else on the machine while it runs.
# --held-out "PAST TOKENS": the untuned shapes (default "300 40").
# --keep DIR: keep every round's profiles and outputs in DIR (with --verbose
#   validations there, per node; default: a temporary directory, removed).
set -euo pipefail
root=$(cd "$(dirname "$0")/.." && pwd)
build=$root/build
model=$root/models/SmolLM2-135M-Instruct.Q4_1.gguf
devices="cpu opencl:0"
rounds=3
quick=""
held="300 40"
prio=()
keep=""
while [ $# -gt 0 ]; do
    case $1 in
    -m) model=$2; shift 2 ;;
    -d) devices=$2; shift 2 ;;
    --rounds) rounds=$2; shift 2 ;;
    --quick) quick=--quick; shift ;;
    --held-out) held=$2; shift 2 ;;
    --prio) prio=(chrt -r 1); shift ;;
    -B) build=$2; shift 2 ;;
    --keep) keep=$2; shift 2 ;;
    *) echo "tune_accuracy.sh: unknown option '$1'" >&2; exit 2 ;;
    esac
done
sy=$build/tools/switchyard
[ -x "$sy" ] || { echo "tune_accuracy.sh: no $sy (build first, or -B)" >&2; exit 1; }
read -r held_past held_tokens <<<"$held"
if [ -n "$keep" ]; then
    mkdir -p "$keep"
    out=$(cd "$keep" && pwd)
    rm -f "$out/rows.txt"
    verbose=--verbose
else
    out=$(mktemp -d)
    trap 'rm -rf "$out"' EXIT
    verbose=""
fi
# The summary lines of one validation as "step node_median launch_err nodes_err".
summarize() {
    awk '
        / decode, 1 token after / { step = "decode@" $6; sub(":", "", step) }
        / prefill, [0-9]+ tokens/ { step = "prefill" $3 }
        /per node \|error\|: median/ {
            med = $5; sub("%,", "", med)
            ins = $0; sub(/.*launch sync\); median /, "", ins); sub(/%.*/, "", ins)
        }
        /step: predicted/ {
            l = $0; sub(/.*as one launch \(/, "", l); sub(/%.*/, "", l)
            n = $0; sub(/.*node by node \(/, "", n); sub(/%.*/, "", n)
            q = "-"
            if ($0 ~ /their IQR /) { q = $0; sub(/.*their IQR /, "", q); sub(/%.*/, "", q) }
            print step, med, l, n, ins, q
        }'
}
for ((r = 1; r <= rounds; r++)); do
    for dev in $devices; do
        dir=$out/$r-${dev//:/_}
        mkdir -p "$dir"
        uptime >"$dir/load.txt"
        "${prio[@]}" "$sy" tune --device "$dev" -m "$model" $quick --out "$dir" >"$dir/tune.txt" 2>&1
        "${prio[@]}" "$sy" tune --device "$dev" -m "$model" $quick --validate --no-tune $verbose \
            --out "$dir" >"$dir/tuned.txt" 2>&1
        "${prio[@]}" "$sy" tune --device "$dev" -m "$model" $quick --validate --no-tune $verbose \
            --out "$dir" --past "$held_past" --tokens "$held_tokens" >"$dir/held.txt" 2>&1
        { summarize <"$dir/tuned.txt"; summarize <"$dir/held.txt" | sed 's/^/held:/'; } |
            sed "s|^|$dev |" >>"$out/rows.txt"
        echo "round $r $dev: $(awk '{printf "%s %s%%/%s%%  ", $2, $3, $4}' < <(grep "^$dev " "$out/rows.txt" | tail -4))" >&2
    done
done
load=$(cut -d' ' -f1 /proc/loadavg)
echo
echo "$(basename "$model"), $rounds round(s)${quick:+, quick}${prio:+, SCHED_RR}; load average now $load on $(nproc) CPUs"
echo "held-out shapes: decode after $held_past tokens, prefill of $held_tokens (the tune ran neither)"
printf '| device | step | per-node median |error| (vs node alone) | (vs its share of the step) | step vs one launch | step vs nodes alone | one-launch IQR |\n'
printf '| --- | --- | ---: | ---: | ---: | ---: | ---: |\n'
awk '
    function median(list,   n, a, i, j, t) {
        n = split(list, a, " ")
        for (i = 1; i <= n; i++) for (j = i + 1; j <= n; j++) if (a[j] + 0 < a[i] + 0) { t = a[i]; a[i] = a[j]; a[j] = t }
        return n % 2 ? a[(n + 1) / 2] : (a[n / 2] + a[n / 2 + 1]) / 2
    }
    function absv(x) { return x < 0 ? -x : x }
    {
        key = $1 SUBSEP $2
        if (!(key in med)) order[++n] = key
        med[key] = med[key] " " $3
        launch[key] = launch[key] " " absv($4)
        nodes[key] = nodes[key] " " absv($5)
        share[key] = share[key] " " $6
        if ($7 != "-" && $7 != "") iqr[key] = iqr[key] " " $7
    }
    END {
        for (i = 1; i <= n; i++) {
            split(order[i], k, SUBSEP)
            printf "| %s | %s | %.1f%% | %.1f%% | %.1f%% | %.1f%% | %s |\n", k[1], k[2],
                   median(med[order[i]]), median(share[order[i]]), median(launch[order[i]]),
                   median(nodes[order[i]]),
                   order[i] in iqr ? sprintf("%.1f%%", median(iqr[order[i]])) : "-"
        }
    }' "$out/rows.txt"
echo "(step errors are medians of |error| over the rounds; one-launch IQR: the interquartile"
echo " range of validate's one-launch passes over their median, the noise it measured in)"
