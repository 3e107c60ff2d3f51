#!/bin/sh
# roofline.sh: decode tokens/s against the memory-bandwidth ceiling (issue 8).
#
#   bench/roofline.sh --bench BENCH.json [--probe PROBE.json] [--models DIR] [--kv-bytes B]
#
# BENCH.json is `switchyard bench ... -o json` (its tg rows are used), PROBE.json
# `switchyard probe --json` or the probe cache file (default:
# ${XDG_CACHE_HOME:-~/.cache}/switchyard/probe.json). For each tg row it
# prints the bytes one decode token reads, the probed read bandwidth at the
# row's thread count, the ceiling (bandwidth / bytes) and the measured
# tokens/s (mean over the repetitions, and the best repetition) as a share
# of it.
#
# Bytes per token, from the GGUF file (found in --models, default models/):
#   weights: every tensor's bytes in its stored type, except the token
#     embedding, of which one row is read (all of it when there is no
#     output.weight: the tied head reads it whole);
#   KV: K and V of every layer over the positions attended, averaged over
#     the test's tokens from an empty cache (tgN: positions 1..N, mean
#     (N+1)/2; at depth D, "tgN @ dD": D more), at --kv-bytes per element
#     (default 2: f16, bench's default), plus the one position written.
# Activations, norms' inputs and logits are left out (under 0.1% here).
set -eu
bench=""; probe=""; models="models"; kvb=2
while [ $# -gt 0 ]; do
    case "$1" in
        --bench) bench="$2"; shift 2 ;;
        --probe) probe="$2"; shift 2 ;;
        --models) models="$2"; shift 2 ;;
        --kv-bytes) kvb="$2"; shift 2 ;;
        -h|--help) sed -n '2,24p' "$0"; exit 0 ;;
        *) echo "roofline.sh: unknown argument $1" >&2; exit 2 ;;
    esac
done
[ -n "$bench" ] || { echo "roofline.sh: --bench FILE is required" >&2; exit 2; }
if [ -z "$probe" ]; then
    cache="${XDG_CACHE_HOME:-}"
    case "$cache" in /*) ;; *) cache="$HOME/.cache" ;; esac
    probe="$cache/switchyard/probe.json"
fi
exec python3 - "$bench" "$probe" "$models" "$kvb" <<'EOF'
import json, os, struct, sys

bench_path, probe_path, models, kvb = sys.argv[1], sys.argv[2], sys.argv[3], float(sys.argv[4])

# ggml type -> (elements per block, bytes per block)
TYPES = {0: (1, 4), 1: (1, 2), 2: (32, 18), 3: (32, 20), 6: (32, 22), 7: (32, 24),
         8: (32, 34), 9: (32, 36), 10: (256, 84), 11: (256, 110), 12: (256, 144),
         13: (256, 176), 14: (256, 210), 15: (256, 292), 30: (1, 2)}

def gguf(path):
    """(metadata dict, [(name, dims, type)]) of a GGUF file."""
    with open(path, "rb") as f:
        def rd(fmt):
            return struct.unpack("<" + fmt, f.read(struct.calcsize("<" + fmt)))[0]
        def rstr():
            return f.read(rd("Q")).decode("utf-8", "replace")
        scalar = {0: "B", 1: "b", 2: "H", 3: "h", 4: "I", 5: "i", 6: "f", 7: "?",
                  10: "Q", 11: "q", 12: "d"}
        def rval(t):
            if t == 8:
                return rstr()
            if t == 9:  # arrays (vocabulary, scores) are skipped
                et, n = rd("I"), rd("Q")
                if et == 8:
                    for _ in range(n):
                        f.seek(rd("Q"), 1)
                elif et in scalar:
                    f.seek(struct.calcsize("<" + scalar[et]) * n, 1)
                else:
                    for _ in range(n):
                        rval(et)
                return None
            return rd(scalar[t])
        if f.read(4) != b"GGUF":
            raise SystemExit(f"roofline.sh: {path} is not a GGUF file")
        rd("I")
        n_t, n_kv = rd("Q"), rd("Q")
        meta = {}
        for _ in range(n_kv):
            k = rstr()
            meta[k] = rval(rd("I"))
        tensors = []
        for _ in range(n_t):
            name = rstr()
            dims = [rd("Q") for _ in range(rd("I"))]
            t = rd("I")
            rd("Q")
            tensors.append((name, dims, t))
        return meta, tensors

def nbytes(dims, t):
    if t not in TYPES:
        raise SystemExit(f"roofline.sh: ggml type {t} has no size here")
    n = 1
    for d in dims:
        n *= d
    blk, b = TYPES[t]
    return n // blk * b

def bytes_per_token(path, n_gen, depth):
    meta, tensors = gguf(path)
    arch = meta.get("general.architecture", "llama")
    names = {n for n, _, _ in tensors}
    w = 0
    for name, dims, t in tensors:
        if name == "token_embd.weight":
            w += nbytes(dims[:1], t)  # one row
            if "output.weight" not in names:
                w += nbytes(dims, t)  # the tied head reads all of it
        else:
            w += nbytes(dims, t)
    layers = meta[f"{arch}.block_count"]
    heads = meta[f"{arch}.attention.head_count"]
    kv_heads = meta.get(f"{arch}.attention.head_count_kv", heads)
    head_dim = meta.get(f"{arch}.attention.key_length", meta[f"{arch}.embedding_length"] // heads)
    per_pos = 2 * layers * kv_heads * head_dim * kvb  # K and V, one position
    kv = per_pos * (depth + (n_gen + 1) / 2 + 1)
    return w, kv

probe = json.load(open(probe_path))
bw = {e["threads"]: e["read_bps"] for e in probe["host_memory"]["bandwidth"]}
rows = json.load(open(bench_path))
cache = {}
print(f"probe: {probe_path} ({probe.get('topology', {}).get('cpu_model', '?')}); "
      f"read GB/s " + ", ".join(f"{t}t {v / 1e9:.2f}" for t, v in sorted(bw.items())))
print(f"{'model':34} {'thr':>3} {'test':>12} {'weights MB':>10} {'KV MB':>6} {'MB/token':>8} "
      f"{'GB/s':>6} {'ceil t/s':>8} {'t/s':>7} {'best':>7} {'%ceil':>6} {'%best':>6}")
for r in rows:
    if not r.get("n_gen") or r.get("n_prompt"):
        continue
    model = r["model"]
    path = model if os.path.isabs(model) else os.path.join(models, model)
    if path not in cache:
        cache[path] = {}
    key = (r["n_gen"], r.get("n_depth", 0))
    if key not in cache[path]:
        cache[path][key] = bytes_per_token(path, *key)
    w, kv = cache[path][key]
    try:
        th = int(r["threads"])
    except ValueError:
        th = max(bw)
    usable = [t for t in bw if t <= th]
    g = bw[max(usable)] if usable else bw[min(bw)]
    per_tok = w + kv
    ceil = g / per_tok
    best = max(r.get("samples_ts") or [r["avg_ts"]])
    print(f"{model:34} {th:3} {r['test']:>12} {w / 1e6:10.1f} {kv / 1e6:6.2f} {per_tok / 1e6:8.1f} "
          f"{g / 1e9:6.2f} {ceil:8.2f} {r['avg_ts']:7.2f} {best:7.2f} {100 * r['avg_ts'] / ceil:5.1f}% "
          f"{100 * best / ceil:5.1f}%")
EOF
