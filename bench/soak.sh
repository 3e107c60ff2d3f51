#!/usr/bin/env bash
# Long-run stability (issue 9): generates TOKENS tokens through one session
# whose context policy keeps it going past a small context (shift by
# default; or window:W), sampling the resident set every EVERY tokens, and
# prints the curve and a verdict: after the warm-up (the first WARMUP
# tokens: the context fills, the plan cache learns every step shape) the
# RSS must stay within 2% (max - min over min).
#   bench/soak.sh [MODEL] [TOKENS] [CTX] [EVERY] [KV_TYPE] [POLICY] [WARMUP]
# Defaults: SmolLM2, 20000 tokens, context 512, every 1000, f16, shift, 2000.
# $SOAK names the soak binary (default build/bench/soak); the cpu plugin is
# taken from the same build unless $SWITCHYARD_PLUGIN_PATH is set.
set -euo pipefail
cd "$(dirname "$0")/.."
model=${1:-models/SmolLM2-135M-Instruct.Q4_1.gguf}
tokens=${2:-20000}
ctx=${3:-512}
every=${4:-1000}
kv=${5:-f16}
policy=${6:-shift}
warmup=${7:-2000}
soak=${SOAK:-build/bench/soak}
build=$(dirname "$(dirname "$soak")")
export SWITCHYARD_PLUGIN_PATH=${SWITCHYARD_PLUGIN_PATH:-$build/plugins/cpu}
out=$(mktemp)
trap 'rm -f "$out"' EXIT
"$soak" "$model" "$tokens" "$ctx" "$every" "$kv" "$policy" | tee "$out"
awk -v warmup="$warmup" '
  /^start/  { start = $3 }
  /^sample/ { n++; tok[n] = $2; rss[n] = $3; past[n] = $4; shifts[n] = $5; sec[n] = $6 }
  /^done/   { shifts_total = $3; secs = $4; tps = $5 }
  END {
    printf "\n%8s %12s %8s %8s %8s\n", "tokens", "RSS MiB", "n_past", "shifts", "s"
    for (i = 1; i <= n; i++)
      printf "%8d %12.2f %8d %8d %8.1f%s\n", tok[i], rss[i] / 1024, past[i], shifts[i], sec[i],
             tok[i] <= warmup ? "  (warm-up)" : ""
    lo = -1; hi = 0; m = 0
    for (i = 1; i <= n; i++) {
      if (tok[i] <= warmup) continue
      m++
      if (lo < 0 || rss[i] < lo) lo = rss[i]
      if (rss[i] > hi) hi = rss[i]
    }
    if (m < 2) { print "verdict: too few samples after the warm-up"; exit 1 }
    spread = (hi - lo) / lo * 100
    printf "start %.2f MiB; after warm-up %d samples: min %.2f MiB, max %.2f MiB, spread %.2f%%\n",
           start / 1024, m, lo / 1024, hi / 1024, spread
    printf "%d shifts in %.1f s, decode %.1f tok/s\n", shifts_total, secs, tps
    if (spread <= 2) { print "verdict: FLAT (within 2%)"; exit 0 }
    print "verdict: GROWS (more than 2%)"; exit 1
  }' "$out"
