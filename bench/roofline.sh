#!/bin/sh
# roofline.sh: decode tokens/s against the memory-bandwidth ceiling (issue 8).
#
#   bench/roofline.sh --bench BENCH.json [--probe PROBE.json] [--models DIR] [--kv-bytes B]
#   bench/roofline.sh --run -m MODEL[,MODEL...] [-t 1,2] [-n 64] [--rounds 5]
#                     [-B BUILD] [--models DIR] [--kv-bytes B]
#
# BENCH.json is `switchyard bench ... -o json` (its tg rows are used), PROBE.json
# `switchyard probe --json` or the probe cache file (default:
# ${XDG_CACHE_HOME:-~/.cache}/switchyard/probe.json). For each tg row it
# prints the bytes one decode token reads, the probed read bandwidth at the
# row's thread count, the ceiling (bandwidth / bytes) and the measured
# tokens/s (mean over the repetitions, and the best repetition) as a share
# of it.
#
# --run measures both itself, side by side, because on a shared host the
# bandwidth left to this VM moves from minute to minute: each round takes,
# for every model and thread count in turn, a CPU probe (`switchyard probe
# --refresh --devices cpu`, into a scratch cache), one tgN repetition after
# bench's warm-up (`switchyard bench -p 0 -n N -r 1 -t T --devices cpu`) and
# a second probe, and divides the tokens/s by the ceiling from the mean of
# the two probes at that thread count. It prints every round and then, per
# model and thread count, the median share and its range over the rounds.
# -B is the build holding tools/switchyard (default build).
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
run=0; run_models=""; threads="1,2"; ngen=64; rounds=5; build="build"
while [ $# -gt 0 ]; do
    case "$1" in
        --bench) bench="$2"; shift 2 ;;
        --probe) probe="$2"; shift 2 ;;
        --models) models="$2"; shift 2 ;;
        --kv-bytes) kvb="$2"; shift 2 ;;
        --run) run=1; shift ;;
        -m) run_models="$2"; shift 2 ;;
        -t) threads="$2"; shift 2 ;;
        -n) ngen="$2"; shift 2 ;;
        --rounds) rounds="$2"; shift 2 ;;
        -B) build="$2"; shift 2 ;;
        -h|--help) sed -n '2,35p' "$0"; exit 0 ;;
        *) echo "roofline.sh: unknown argument $1" >&2; exit 2 ;;
    esac
done
if [ "$run" = 1 ]; then
    [ -n "$run_models" ] || { echo "roofline.sh: --run needs -m MODEL[,MODEL...]" >&2; exit 2; }
    [ -x "$build/tools/switchyard" ] || {
        echo "roofline.sh: $build/tools/switchyard not found (build it, or pass -B BUILD)" >&2
        exit 2
    }
    bench="-"; probe="-"
else
    [ -n "$bench" ] || { echo "roofline.sh: --bench FILE (or --run) is required" >&2; exit 2; }
    if [ -z "$probe" ]; then
        cache="${XDG_CACHE_HOME:-}"
        case "$cache" in /*) ;; *) cache="$HOME/.cache" ;; esac
        probe="$cache/switchyard/probe.json"
    fi
fi
export RL_MODELS="$run_models" RL_THREADS="$threads" RL_NGEN="$ngen" RL_ROUNDS="$rounds"
export RL_SY="$build/tools/switchyard"
exec python3 - "$bench" "$probe" "$models" "$kvb" <<'EOF'
import json, os, statistics, struct, subprocess, sys, tempfile

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

def probe_bw(path):
    """{threads: read bytes/s} of a probe JSON."""
    with open(path) as f:
        p = json.load(f)
    return {e["threads"]: e["read_bps"] for e in p["host_memory"]["bandwidth"]}, p

def at_threads(bw, th):
    usable = [t for t in bw if t <= th]
    return bw[max(usable)] if usable else bw[min(bw)]

def model_path(model):
    """A model as given where it names a file, else under --models (bench's JSON names
    a model by its file name)."""
    return model if os.path.isabs(model) or os.path.isfile(model) else os.path.join(models, model)

def report(probe_path, bench_path):
    bw, probe = probe_bw(probe_path)
    with open(bench_path) as f:
        rows = json.load(f)
    cache = {}
    print(f"probe: {probe_path} ({probe.get('topology', {}).get('cpu_model', '?')}); "
          f"read GB/s " + ", ".join(f"{t}t {v / 1e9:.2f}" for t, v in sorted(bw.items())))
    print(f"{'model':34} {'thr':>3} {'test':>12} {'weights MB':>10} {'KV MB':>6} "
          f"{'MB/token':>8} {'GB/s':>6} {'ceil t/s':>8} {'t/s':>7} {'best':>7} {'%ceil':>6} "
          f"{'%best':>6}")
    for r in rows:
        if not r.get("n_gen") or r.get("n_prompt"):
            continue
        model = r["model"]
        path = model_path(model)
        key = (path, r["n_gen"], r.get("n_depth", 0))
        if key not in cache:
            cache[key] = bytes_per_token(*key)
        w, kv = cache[key]
        try:
            th = int(r["threads"])
        except ValueError:
            th = max(bw)
        g = at_threads(bw, th)
        per_tok = w + kv
        ceil = g / per_tok
        best = max(r.get("samples_ts") or [r["avg_ts"]])
        print(f"{model:34} {th:3} {r['test']:>12} {w / 1e6:10.1f} {kv / 1e6:6.2f} "
              f"{per_tok / 1e6:8.1f} {g / 1e9:6.2f} {ceil:8.2f} {r['avg_ts']:7.2f} {best:7.2f} "
              f"{100 * r['avg_ts'] / ceil:5.1f}% {100 * best / ceil:5.1f}%")

def run():
    sy = os.environ["RL_SY"]
    mlist = [m for m in os.environ["RL_MODELS"].split(",") if m]
    tlist = [int(t) for t in os.environ["RL_THREADS"].split(",") if t]
    n_gen, rounds = int(os.environ["RL_NGEN"]), int(os.environ["RL_ROUNDS"])
    tmp = tempfile.mkdtemp(prefix="roofline.")
    pcache, pjson, bjson = (os.path.join(tmp, n) for n in ("cache.json", "p.json", "b.json"))

    def probe():
        with open(pjson, "w") as f:
            subprocess.run([sy, "probe", "--refresh", "--json", "--devices", "cpu",
                            "--cache", pcache], stdout=f, check=True)
        return probe_bw(pjson)[0]

    per = {}
    print(f"{'round':>5} {'model':34} {'thr':>3} {'GB/s before':>11} {'after':>6} "
          f"{'ceil t/s':>8} {'t/s':>7} {'%ceil':>6}")
    for rnd in range(1, rounds + 1):
        for m in mlist:
            w, kv = bytes_per_token(model_path(m), n_gen, 0)
            for th in tlist:
                before = probe()
                with open(bjson, "w") as f:
                    subprocess.run([sy, "bench", "-m", model_path(m), "-p", "0",
                                    "-n", str(n_gen), "-r", "1", "-t", str(th),
                                    "--devices", "cpu", "-o", "json"],
                                   stdout=f, stderr=subprocess.DEVNULL, check=True)
                after = probe()
                with open(bjson) as f:
                    ts = json.load(f)[0]["avg_ts"]
                g0, g1 = at_threads(before, th), at_threads(after, th)
                ceil = (g0 + g1) / 2 / (w + kv)
                share = 100 * ts / ceil
                per.setdefault((m, th), []).append((share, (g0 + g1) / 2, ts, w + kv))
                print(f"{rnd:5} {os.path.basename(m):34} {th:3} {g0 / 1e9:11.2f} "
                      f"{g1 / 1e9:6.2f} {ceil:8.2f} {ts:7.2f} {share:5.1f}%", flush=True)
    print()
    print(f"median over {rounds} rounds (tg{n_gen}, probe = mean of the probes either side)")
    print(f"{'model':34} {'thr':>3} {'MB/token':>8} {'GB/s':>6} {'t/s':>7} {'%ceil':>6} "
          f"{'range':>13}")
    for (m, th), v in per.items():
        shares = [x[0] for x in v]
        print(f"{os.path.basename(m):34} {th:3} {v[0][3] / 1e6:8.1f} "
              f"{statistics.median(x[1] for x in v) / 1e9:6.2f} "
              f"{statistics.median(x[2] for x in v):7.2f} {statistics.median(shares):5.1f}% "
              f"{min(shares):5.1f}-{max(shares):5.1f}%")
    for n in (pcache, pjson, bjson):
        if os.path.exists(n):
            os.unlink(n)
    os.rmdir(tmp)

if bench_path == "-":
    run()
else:
    report(probe_path, bench_path)
EOF
