#!/usr/bin/env python3
"""llama-bench's pp/tg measurement through llama-cpp-python's C bindings.

usage: llamacpp_bench.py -m MODEL -t THREADS [-p 512] [-n 128] [-r 3] [-d 0[,D...]]
                         [--seed S]

Runs the tests llama-bench runs, on one model at one thread count, and
prints a JSON list in llama-bench's shape (n_prompt, n_gen, avg_ts,
stddev_ts, samples_ts) for bench/compare-llamacpp.sh:
  ppN  N random tokens decoded as one batch (ubatch 512, as llama-bench),
       logits for the last token only;
  tgN  N single-token decode steps, each on a fresh random token;
at each depth D of -d (llama-bench's -d): every run first fills the
context with D random tokens in batches, untimed ("tg128 @ d512").
Each test runs once untimed (warm-up: the whole prompt for pp, one token
for tg), then REPS times from an empty KV cache.  Everything goes through
the low-level bindings (llama_decode on llama_batch_get_one), so the
Python layer adds one ctypes call per step, not the high-level Llama
class's logits copies."""

import argparse
import ctypes
import json
import random
import statistics
import sys
import time

import llama_cpp as L


def first_attr(*names):
    for n in names:
        f = getattr(L, n, None)
        if f is not None:
            return f
    raise RuntimeError("llama-cpp-python has none of " + ", ".join(names))


def clear_kv(ctx):
    # The KV cache API was renamed twice across llama.cpp versions.
    if hasattr(L, "llama_memory_clear") and hasattr(L, "llama_get_memory"):
        L.llama_memory_clear(L.llama_get_memory(ctx), True)
    else:
        first_attr("llama_kv_self_clear", "llama_kv_cache_clear")(ctx)


def decode(ctx, tokens):
    arr = (L.llama_token * len(tokens))(*tokens)
    rc = L.llama_decode(ctx, L.llama_batch_get_one(arr, len(tokens)))
    if rc != 0:
        raise RuntimeError("llama_decode returned %d" % rc)


def main():
    ap = argparse.ArgumentParser()
    ap.add_argument("-m", required=True)
    ap.add_argument("-t", type=int, required=True)
    ap.add_argument("-p", type=int, default=512)
    ap.add_argument("-n", type=int, default=128)
    ap.add_argument("-r", type=int, default=3)
    ap.add_argument("-d", default="0", help="comma list of depths")
    ap.add_argument("--seed", type=int, default=1234)
    ap.add_argument("--system-info", action="store_true",
                    help="print llama.cpp's build/CPU feature line and exit")
    a = ap.parse_args()

    L.llama_backend_init()
    if a.system_info:
        print("llama-cpp-python %s: %s" % (L.__version__, L.llama_print_system_info().decode()))
        return 0
    # ctypes keeps no reference to a callback: hold it for the whole run.
    quiet = L.llama_log_callback(lambda level, text, user: None)
    L.llama_log_set(quiet, ctypes.c_void_p(0))

    mp = L.llama_model_default_params()
    mp.n_gpu_layers = 0
    model = first_attr("llama_model_load_from_file", "llama_load_model_from_file")(a.m.encode(), mp)
    if not model:
        raise RuntimeError("cannot load " + a.m)
    vocab = L.llama_model_get_vocab(model)
    n_vocab = L.llama_vocab_n_tokens(vocab)

    depths = [int(d) for d in a.d.split(",")]
    if min(depths) < 0:
        raise SystemExit("llamacpp_bench.py: -d takes depths >= 0")
    fill = max(1, min(max(depths), 512))  # tokens per decode call filling the depth
    cp = L.llama_context_default_params()
    cp.n_ctx = max(depths) + a.p + a.n
    cp.n_batch = max(a.p, fill, 1)
    cp.n_ubatch = min(cp.n_batch, 512)
    cp.n_threads = a.t
    cp.n_threads_batch = a.t
    ctx = first_attr("llama_init_from_model", "llama_new_context_with_model")(model, cp)
    if not ctx:
        raise RuntimeError("cannot create a context")

    rng = random.Random(a.seed)
    rand = lambda n: [rng.randrange(n_vocab) for _ in range(n)]  # noqa: E731
    results = []
    tests = [(d, p, g) for d in depths for p, g in ((a.p, 0), (0, a.n)) if p or g]
    for depth, n_prompt, n_gen in tests:

        def once(n_prompt=n_prompt, n_gen=n_gen, depth=depth):
            clear_kv(ctx)
            for i in range(0, depth, fill):
                decode(ctx, rand(min(fill, depth - i)))
            L.llama_synchronize(ctx)
            toks = rand(n_prompt)
            t0 = time.perf_counter()
            if n_prompt:
                decode(ctx, toks)
            for _ in range(n_gen):
                decode(ctx, rand(1))
            L.llama_synchronize(ctx)
            return time.perf_counter() - t0

        if n_prompt:
            once()
        else:
            once(0, 1)
        secs = [once() for _ in range(a.r)]
        ts = [(n_prompt or n_gen) / s for s in secs]
        results.append({"n_depth": depth, "n_prompt": n_prompt, "n_gen": n_gen, "n_threads": a.t,
                        "avg_ts": statistics.mean(ts),
                        "stddev_ts": statistics.stdev(ts) if len(ts) > 1 else 0.0,
                        "samples_ts": ts})
    json.dump(results, sys.stdout, indent=1)
    print()
    L.llama_free(ctx)
    first_attr("llama_model_free", "llama_free_model")(model)
    return 0


if __name__ == "__main__":
    sys.exit(main())
