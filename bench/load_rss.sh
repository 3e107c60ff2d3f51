#!/usr/bin/env bash
# Model load time and peak RSS of a 256-token generation (issue 3 targets:
# load < 100 ms; peak RSS < 1.5 x (weights + KV cache)).  Runs R rounds and
# prints each round and the medians.
#   bench/load_rss.sh [MODEL] [ROUNDS] [CTX]
set -euo pipefail
cd "$(dirname "$0")/.."
model=${1:-models/SmolLM2-135M-Instruct.Q4_1.gguf}
rounds=${2:-5}
ctx=${3:-512}
sy=${SWITCHYARD:-build/tools/switchyard}
loads=() rss=() ratio=()
for r in $(seq "$rounds"); do
  line=$("$sy" run -m "$model" --device cpu --ctx "$ctx" -n 256 -p "Once upon a time" 2>&1 >/dev/null | tail -1)
  l=$(sed -n 's/.*load \([0-9.]*\) ms.*/\1/p' <<<"$line")
  p=$(sed -n 's/.*peak RSS \([0-9.]*\) MiB.*/\1/p' <<<"$line")
  w=$(sed -n 's/.*weights \([0-9.]*\) MiB.*/\1/p' <<<"$line")
  k=$(sed -n 's/.*KV \([0-9.]*\) MiB.*/\1/p' <<<"$line")
  q=$(awk -v p="$p" -v w="$w" -v k="$k" 'BEGIN { printf "%.3f", p / (w + k) }')
  echo "round $r: load $l ms, peak RSS $p MiB, weights $w MiB + KV $k MiB, ratio $q"
  loads+=("$l") rss+=("$p") ratio+=("$q")
done
median() { printf '%s\n' "$@" | sort -g | awk '{a[NR]=$1} END {print (NR % 2) ? a[(NR+1)/2] : (a[NR/2] + a[NR/2+1]) / 2}'; }
echo "median: load $(median "${loads[@]}") ms (target < 100), peak RSS $(median "${rss[@]}") MiB, ratio $(median "${ratio[@]}") (target < 1.5)"
