#!/usr/bin/env python3
"""The logits oracle of issue 3, run by the test suite.

For the real models (SmolLM2-135M-Instruct Q4_1, Gemma 3 270M Q4_K_M) and
for synth models of every architecture and weight type, runs
`switchyard eval` on a 64-token sequence (the first 40 tokens as one
prefill batch, the rest one decode step at a time through the KV cache)
and compares its logits with forward.py, the independent numpy forward
pass that reads the GGUF with the PyPI `gguf` package.  Thresholds are the
issue's: F32/F16 weights rel L2 < 1e-3 and the same argmax everywhere;
quantised weights rel L2 < 2e-2 and argmax agreement >= 98%.  "Same
argmax" holds where float32 can decide it: a position whose reference top
two logits lie within compare.FLOAT32_TIE_ULPS ulps of each other is a tie,
counted as agreement and reported (seed 915261345 drew a synth llama F16
model with one: 1.7015445 against 1.7015443, one ulp apart, while the C
logits there sit 1.4e-6 from the reference).

Quantised KV caches (issue 9) are compared with a reference whose cache
holds the same type (forward.py's kv_type, through gguf's own quantiser).
An element that C and reference compute a hair apart can round to
neighbouring quants, so the agreement depends on how close the two keys
are and how far a quant step carries.  The precise check is llama with F32
weights, Q8_0 and Q4_0 caches, at the float thresholds (over 20 seeds: rel
L2 at most 2.4e-4, every argmax), unless the reference's own cache holds
an element within forward.KV_NEAR_TOL quant steps of a rounding boundary:
then that one quant may land a step apart and the case is judged as
"kv-synth" below (seed 18969714: one such element, rel L2 1.3e-2).  The gemma3 synth (six layers) carries a flipped
quant further (measured): its Q8_0 case takes the quant thresholds with near-ties (within 0.5 of the
reference's maximum) counted as agreement ("kv-synth"; over 40 seeds rel
L2 at most 1.9e-3, at most one near-tie; its Q4_0 reached 1.2e-2 and is
left out).  On SmolLM2 the Q4_1 weights' path leaves its
keys ~3e-4 (relative) off the reference's, enough to move a few percent of
the elements across a Q8_0/Q4_0 rounding boundary, so the two caches
differ by about as much as either differs from an F32 cache: there the
thresholds (KV_PRESETS) are the quant ones for Q8_0, near-ties within 0.5
of the reference's maximum counted as agreement, and a guard against a
broken cache for Q4_0, whose cost on SmolLM2 is ~17% of the logits' norm
(measured: rel L2 1.6e-1 to 1.7e-1, argmax 0.81 to 0.91 over the scalar,
avx2, avxvnni and avx512 kernels; Q8_0 1.2e-2, 63/64 with one near-tie).

Every weight-type case (not the KV ones) runs first with the CPU plugin's
default kernels (the best ISA level this CPU has), then again with each
other level forced through SWITCHYARD_CPU_ISA, against the same reference
logits: the synth models at every level (scalar, avx2, avxvnni, avx512,
avx512gfni on x86; scalar, neon, dotprod on ARM), the real models at the
SIMD levels (the scalar kernels take about two minutes per real model
here; the synth cases cover their arithmetic).  A level the CPU cannot run
is skipped, found once at the start (`switchyard devices` with the level
forced); SY_ORACLE_ISAS overrides the list for every case ("" for the
default kernels only).

Usage: oracle_suite.py SWITCHYARD_BIN MODELS_DIR [--quick]
Prints one line per case and level and ends with "N passed, N failed"."""

import os
import random
import subprocess
import sys
import tempfile

HERE = os.path.dirname(os.path.abspath(__file__))
sys.path.insert(0, HERE)

import numpy as np  # noqa: E402

import compare  # noqa: E402
import forward  # noqa: E402

N_TOKENS = 64
SPLIT = 40
TEXT = ("The old lighthouse keeper climbed the spiral stairs every evening, counting "
        "each of the one hundred and twelve steps. At the top he wiped the salt from the "
        "glass, trimmed the wick, and watched the ships pass the rocks below. In winter the "
        "storms came from the north, and the light was the only thing the sailors trusted.")


def run(cmd):
    return subprocess.run(cmd, check=False, capture_output=True, text=True)


ISA_LEVELS = ("scalar", "avx2", "avxvnni", "avx512", "avx512gfni", "neon", "dotprod")


def c_logits(sy, model, tokens, out, kv_type, isa=None):
    env = dict(os.environ)
    if isa:
        env["SWITCHYARD_CPU_ISA"] = isa
    r = subprocess.run([sy, "eval", "-m", model, "--tokens", ",".join(map(str, tokens)),
                        "-o", out, "--split", str(SPLIT), "--kv-type", kv_type],
                       check=False, capture_output=True, text=True, env=env)
    if r.returncode != 0:
        raise RuntimeError("switchyard eval failed: " + r.stderr.strip())
    if isa and "' is not available here" in r.stderr:  # runnable_levels let it through
        raise RuntimeError(f"isa {isa} was not available to switchyard eval")
    return np.fromfile(out, dtype="<f4").reshape(len(tokens), -1)


def default_level(sy):
    """The CPU plugin's automatic choice, from its driver string."""
    r = run([sy, "devices", "--json"])
    for level in ISA_LEVELS:
        if f"({level} kernels" in r.stdout:
            return level
    return None


def runnable_levels(sy, levels):
    """|levels| less those this CPU cannot run (each reported once)."""
    kept = []
    for level in levels:
        env = dict(os.environ, SWITCHYARD_CPU_ISA=level)
        r = subprocess.run([sy, "devices"], check=False, capture_output=True, text=True, env=env)
        if "' is not available here" in r.stderr:
            print(f"SKIP isa {level}: this CPU cannot run it", flush=True)
        else:
            kept.append(level)
    return kept


def prompt_tokens(sy, model, out):
    r = run([sy, "eval", "-m", model, "--prompt", TEXT, "-o", out])
    if r.returncode != 0:
        raise RuntimeError("switchyard eval failed: " + r.stderr.strip())
    line = next(x for x in r.stdout.splitlines() if x.startswith("tokens:"))
    ids = [int(v) for v in line.split(":", 1)[1].split(",")]
    if len(ids) < N_TOKENS:
        raise RuntimeError(f"prompt gave {len(ids)} tokens, need {N_TOKENS}")
    return ids[:N_TOKENS]


# Real-model thresholds per quantised KV type (see the top of the file).
KV_PRESETS = {
    "kv-synth": {"max_rel_l2": 2e-2, "min_argmax": 0.98, "tie_tol": 0.5},
    "kv-q8_0": {"max_rel_l2": 2e-2, "min_argmax": 0.98, "tie_tol": 0.5},
    "kv-q4_0": {"max_rel_l2": 3e-1, "min_argmax": 0.85, "tie_tol": 0.5},
}


def check(name, sy, model, tokens, preset, work, kv_ref=None, levels=()):
    """Returns (passed, failed) over the default kernels and |levels|."""
    # F32/F16 weights are held to 1e-3 and every argmax: the default F16 KV
    # cache alone adds ~4e-4 and flips near-ties of the flat synth logits, so
    # those cases keep the cache in F32 and measure the weights' path.
    # kv_ref: a quantised KV type, used by both sides.
    kv = kv_ref or ("f32" if preset == "float" else "f16")
    forward.KV_NEAR["count"] = 0
    want = forward.forward(model, tokens, kv_type=kv_ref or "f32")
    near = forward.KV_NEAR["count"]
    passed = failed = 0
    for level in (None,) + tuple(levels):
        label = name if level is None else f"{name} [isa {level}]"
        try:
            got = c_logits(sy, model, tokens, os.path.join(work, "c.bin"), kv, level)
            flip = bool(kv_ref) and preset == "float" and near > 0
            ok = judge(label, got, want, preset, "NEAR" if flip else "FAIL")
            if not ok and flip:
                # The reference's own cache holds elements a float rounding
                # from a quant boundary (forward.KV_NEAR_TOL): one key
                # computed in another summation order flips such a quant
                # by a whole step, so only the quant thresholds apply.
                print(f"     {near} cached element(s) within {forward.KV_NEAR_TOL:g} quant "
                      f"steps of a rounding boundary in the reference: judged as kv-synth", flush=True)
                ok = judge(label, got, want, "kv-synth")
        except Exception as e:  # a crash is a failure, not a skip
            print(f"FAIL {label}: {e}", flush=True)
            ok = False
        passed += ok
        failed += not ok
    return passed, failed


def judge(name, got, want, preset, fail_word="FAIL"):
    p = dict(compare.PRESETS.get(preset) or KV_PRESETS[preset])
    tie_tol = p.get("tie_tol", 0.0)
    m = compare.compare(got, want, tie_tol)
    if not m["finite"]:
        print(f"FAIL {name}: {m['nonfinite']} non-finite logits", flush=True)
        return False
    rel, pos_rel = m["rel_l2"], m["max_pos_rel_l2"]
    # Near-ties where the preset has a tolerance, else float32 ties (the
    # reference's top two equal in float32: compare.FLOAT32_TIE_ULPS).
    agree = m["counted_agree"] / m["n"]
    ok = rel < p["max_rel_l2"] and agree >= p["min_argmax"]
    ties = f" (near-ties within {tie_tol} counted: {m['near_ties']})" if tie_tol > 0 else ""
    if tie_tol == 0 and m["float32_ties"]:
        ties = (f" (float32 ties within {compare.FLOAT32_TIE_ULPS} ulps counted: "
                f"{m['float32_ties']})")
    print(f"{'PASS' if ok else fail_word} {name}: rel_l2={rel:.3e} max_pos_rel_l2={pos_rel:.3e} "
          f"argmax={agree:.4f}{ties} [{preset}: rel_l2<{p['max_rel_l2']:.0e}, "
          f"argmax>={p['min_argmax']:.2f}]", flush=True)
    return ok


def main():
    if len(sys.argv) < 3:
        print(__doc__, file=sys.stderr)
        return 2
    sy, models = sys.argv[1], sys.argv[2]
    quick = "--quick" in sys.argv
    seed = int(os.environ.get("SY_ORACLE_SEED", random.randrange(1 << 30)))
    print(f"oracle seed {seed} (set SY_ORACLE_SEED to repeat)")
    rng = random.Random(seed)
    env_levels = os.environ.get("SY_ORACLE_ISAS")
    levels = runnable_levels(sy, [x for x in env_levels.split(",") if x] if env_levels is not None
                             else [x for x in ISA_LEVELS if x != default_level(sy)])
    # The scalar kernels take minutes on a real model.
    real_levels = levels if env_levels is not None else [x for x in levels if x != "scalar"]
    passed = failed = 0
    with tempfile.TemporaryDirectory() as work:
        cases = []
        for fname in ("SmolLM2-135M-Instruct.Q4_1.gguf", "gemma-3-270m-q4_k_m.gguf"):
            path = os.path.join(models, fname)
            cases.append((fname, path, None, "quant", None, real_levels))
        smol = os.path.join(models, "SmolLM2-135M-Instruct.Q4_1.gguf")
        for kv in ("q8_0", "q4_0"):
            cases.append((f"SmolLM2-135M-Instruct.Q4_1.gguf kv {kv}", smol, None, "kv-" + kv, kv, ()))
        types = ["f32", "f16", "q8_0", "q4_0", "q4_1", "q5_0", "q4_k", "q5_k", "q6_k"]
        for arch in ("llama", "qwen2", "gemma3"):
            for t in (types[:3] if quick else types):
                # 256-wide rows so K-quants fit; gemma3 gets 6 layers and a
                # 16-token window so both local and global layers run.
                dims = "6,256,512,4,2,512,64" if arch == "gemma3" else "2,256,512,4,2,512"
                path = os.path.join(work, f"synth-{arch}-{t}.gguf")
                r = run([sy, "synth", "--arch", arch, "--dims", dims, "--ctx", "64", "--type", t,
                         "--seed", str(rng.randrange(1 << 30)), "-o", path])
                if r.returncode != 0:
                    print(f"FAIL synth {arch} {t}: {r.stderr.strip()}")
                    failed += 1
                    continue
                ids = [rng.randrange(0, 512) for _ in range(N_TOKENS)]
                cases.append((f"synth {arch} {t}", path, ids, "float" if t in ("f32", "f16") else "quant",
                              None, levels))
                # Quantised KV on float weights (see the top of the file).
                if t == "f32" and arch == "llama":
                    for kv in ("q8_0", "q4_0"):
                        cases.append((f"synth {arch} {t} kv {kv}", path, ids, "float", kv, ()))
                if t == "f32" and arch == "gemma3":
                    cases.append((f"synth {arch} {t} kv q8_0", path, ids, "kv-synth", "q8_0", ()))
        for name, path, ids, preset, kv_ref, case_levels in cases:
            try:
                if ids is None:
                    if not os.path.exists(path):
                        raise RuntimeError(f"{path} missing: run tools/fetch-models.sh")
                    ids = prompt_tokens(sy, path, os.path.join(work, "p.bin"))
                p, f = check(name, sy, path, ids, preset, work, kv_ref, case_levels)
            except Exception as e:  # a crash or a missing file is a failure, not a skip
                print(f"FAIL {name}: {e}", flush=True)
                p, f = 0, 1
            passed += p
            failed += f
    print(f"{passed} passed, {failed} failed")
    return 0 if failed == 0 else 1


if __name__ == "__main__":
    sys.exit(main())
