#!/usr/bin/env python3
"""Tiny random-weight GGUF models of every architecture and weight type, for
testing the C runtime against the reference forward pass.

    # one file
    python3 synth_check.py write --arch llama --type q4_k -o /tmp/s.gguf [--seed 1]
    # every arch x type into DIR, reference run on each (finite, n_past split
    # consistent), optional cross-check against llama-cpp-python
    python3 synth_check.py all DIR [--llama-cpp] [--tokens 64]

Files are written with gguf.GGUFWriter; quantised types use
gguf.quants.quantize (q8_0, q4_0, q4_1) or quantize_q4_k below (the gguf
package has no Q4_K quantizer; the packing is checked by round-tripping
through gguf's own Q4_K dequantizer).  Each file carries a minimal tokenizer:
byte-level BPE (`gpt2`, with merges) for llama/qwen2 and SentencePiece-style
(`llama`, scores, <0xNN> byte tokens) for gemma3, with BOS/EOS and the
chat-turn control tokens.

Shapes (chosen so every matrix row is a multiple of 256, the Q4_K block):
  llama : 2 layers, d=256, ff=512, 4 heads / 2 kv heads, head 64, separate output.weight
  qwen2 : 2 layers, d=256, ff=512, 4 heads / 2 kv heads, head 64, QKV biases, tied output
  gemma3: 6 layers (5 local + 1 global), d=256, ff=512, 4 heads / 1 kv head, head 64,
          sliding_window 8 (so a 64-token prompt exercises the window), QK-norm,
          pre/post norms, key_length/value_length 64
"""

from __future__ import annotations

import argparse
import os
import sys
import time

import numpy as np
import gguf
from gguf import GGMLQuantizationType as QT

HERE = os.path.dirname(os.path.abspath(__file__))
sys.path.insert(0, HERE)

ARCHS = ("llama", "qwen2", "gemma3")
TYPES = {"f32": QT.F32, "f16": QT.F16, "q8_0": QT.Q8_0, "q4_0": QT.Q4_0,
         "q4_1": QT.Q4_1, "q4_k": QT.Q4_K}
FILE_TYPE = {QT.F32: 0, QT.F16: 1, QT.Q4_0: 2, QT.Q4_1: 3, QT.Q8_0: 7, QT.Q4_K: 15}

SHAPES = {
    "llama": dict(n_layer=2, n_embd=256, n_ff=512, n_head=4, n_head_kv=2, head_dim=64,
                  rope_base=10000.0, eps=1e-5, tied=False),
    "qwen2": dict(n_layer=2, n_embd=256, n_ff=512, n_head=4, n_head_kv=2, head_dim=64,
                  rope_base=1000000.0, eps=1e-6, tied=True),
    "gemma3": dict(n_layer=6, n_embd=256, n_ff=512, n_head=4, n_head_kv=1, head_dim=64,
                   rope_base=1000000.0, eps=1e-6, tied=True, sliding_window=8),
}

WORDS = ("the of and to in is you that it he was for on are as with his they at be this "
         "from have or by one had not but what all were when we there can an your which their "
         "hello world model token switch yard reference test code data").split()


# --------------------------------------------------------------------------
# Q4_K quantizer (block of 256 = 8 sub-blocks of 32; x ~ d*sc*q - dmin*m,
# q in 0..15, sc and m 6-bit, d and dmin f16)
# --------------------------------------------------------------------------

def quantize_q4_k(w: np.ndarray) -> np.ndarray:
    w = np.ascontiguousarray(w, dtype=np.float32)
    rows, k = w.shape[:-1], w.shape[-1]
    if k % 256:
        raise ValueError("Q4_K needs rows that are a multiple of 256, got %d" % k)
    x = w.reshape(-1, 8, 32).astype(np.float64)          # (blocks, sub, 32)
    nb = x.shape[0]
    mn = np.minimum(x.min(axis=-1), 0.0)                  # (nb, 8) <= 0
    mx = x.max(axis=-1)
    scale = (mx - mn) / 15.0                              # per sub-block step
    mins = -mn                                            # >= 0
    d = scale.max(axis=-1) / 63.0
    dmin = mins.max(axis=-1) / 63.0
    d16 = d.astype(np.float16)
    dmin16 = dmin.astype(np.float16)
    d_f = d16.astype(np.float64)
    dmin_f = dmin16.astype(np.float64)
    with np.errstate(divide="ignore", invalid="ignore"):
        sc = np.where(d_f[:, None] > 0, np.rint(scale / d_f[:, None]), 0)
        m = np.where(dmin_f[:, None] > 0, np.rint(mins / dmin_f[:, None]), 0)
    sc = np.clip(sc, 0, 63).astype(np.uint8)
    m = np.clip(m, 0, 63).astype(np.uint8)
    step = d_f[:, None] * sc                              # (nb, 8)
    off = dmin_f[:, None] * m
    with np.errstate(divide="ignore", invalid="ignore"):
        q = np.where(step[..., None] > 0, np.rint((x + off[..., None]) / step[..., None]), 0)
    q = np.clip(q, 0, 15).astype(np.uint8)                # (nb, 8, 32)

    scales = np.zeros((nb, 12), dtype=np.uint8)
    # bytes 0-3: low 6 bits = sc[0..3], top 2 bits = high bits of sc[4..7]
    # bytes 4-7: low 6 bits = m[0..3],  top 2 bits = high bits of m[4..7]
    # bytes 8-11: low nibble = low 4 bits of sc[4..7], high nibble = low 4 bits of m[4..7]
    scales[:, 0:4] = (sc[:, 0:4] & 63) | ((sc[:, 4:8] >> 4) << 6)
    scales[:, 4:8] = (m[:, 0:4] & 63) | ((m[:, 4:8] >> 4) << 6)
    scales[:, 8:12] = (sc[:, 4:8] & 15) | ((m[:, 4:8] & 15) << 4)
    # qs: 4 chunks of 32 bytes; chunk c holds sub-block 2c in the low nibble
    # and sub-block 2c+1 in the high nibble, element l at byte l.
    qs = (q[:, 0::2, :] | (q[:, 1::2, :] << 4)).reshape(nb, 128)
    out = np.concatenate([d16.reshape(nb, 1).view(np.uint8), dmin16.reshape(nb, 1).view(np.uint8),
                          scales, qs], axis=1)
    return out.reshape(*rows, (k // 256) * 144)


def encode(w: np.ndarray, qt: QT):
    w = np.ascontiguousarray(w, dtype=np.float32)
    if qt == QT.F32:
        return w, None
    if qt == QT.F16:
        return w.astype(np.float16), None
    if qt == QT.Q4_K:
        return quantize_q4_k(w), QT.Q4_K
    return gguf.quants.quantize(w, qt), qt


# --------------------------------------------------------------------------
# Tokenizers
# --------------------------------------------------------------------------

def bpe_vocab():
    from vocab import bytes_to_unicode
    b2u = bytes_to_unicode()
    tokens = [b2u[b] for b in range(256)]
    have = set(tokens)
    merges = []
    for word in WORDS:
        for form in (word, "\u0120" + word):          # Ġ marks a leading space
            cur = form[0] if form[0] != "\u0120" else "\u0120"
            rest = form[1:] if form[0] == "\u0120" else form[1:]
            for ch in rest:
                new = cur + ch
                if new not in have:
                    merges.append("%s %s" % (cur, ch))
                    tokens.append(new)
                    have.add(new)
                cur = new
    types = [1] * len(tokens)
    specials = ["<|endoftext|>", "<|im_start|>", "<|im_end|>"]
    for s in specials:
        tokens.append(s)
        types.append(3)
    idx = {t: i for i, t in enumerate(tokens)}
    return tokens, types, merges, {"bos": idx["<|im_start|>"], "eos": idx["<|im_end|>"],
                                   "eot": idx["<|im_end|>"]}


def spm_vocab():
    tokens = ["<pad>", "<eos>", "<bos>", "<unk>", "<start_of_turn>", "<end_of_turn>"]
    types = [3, 3, 3, 2, 3, 3]
    scores = [0.0] * len(tokens)
    for b in range(256):
        tokens.append("<0x%02X>" % b)
        types.append(6)
        scores.append(0.0)
    have = set(tokens)
    pieces = ["\u2581"] + [chr(c) for c in range(ord("a"), ord("z") + 1)]
    for word in WORDS:
        w = "\u2581" + word
        for i in range(2, len(w) + 1):
            pieces.append(w[:i])
    for p in pieces:
        if p not in have:
            have.add(p)
            tokens.append(p)
            types.append(1)
            scores.append(-float(len(tokens)) / 100.0 + (len(p) * 0.5))
    return tokens, types, scores, {"bos": 2, "eos": 1, "eot": 5}


# --------------------------------------------------------------------------
# Writer
# --------------------------------------------------------------------------

def write_model(path: str, arch: str, type_name: str, seed: int = 0, final_softcap: float = 0.0):
    if arch not in SHAPES:
        raise ValueError("arch must be one of %s" % (ARCHS,))
    qt = TYPES[type_name]
    s = SHAPES[arch]
    rng = np.random.default_rng(seed)
    L, d, ff, nh, nkv, hd = (s["n_layer"], s["n_embd"], s["n_ff"], s["n_head"], s["n_head_kv"],
                             s["head_dim"])
    if arch == "gemma3":
        tokens, types, scores, ids = spm_vocab()
        merges = None
    else:
        tokens, types, merges, ids = bpe_vocab()
        scores = None
    n_vocab = len(tokens)

    w = gguf.GGUFWriter(path, arch)
    w.add_name("switchyard-synth-%s-%s" % (arch, type_name))
    w.add_uint32("general.file_type", FILE_TYPE[qt])
    w.add_uint32("general.quantization_version", 2)
    w.add_context_length(2048)
    w.add_block_count(L)
    w.add_embedding_length(d)
    w.add_feed_forward_length(ff)
    w.add_head_count(nh)
    w.add_head_count_kv(nkv)
    w.add_layer_norm_rms_eps(s["eps"])
    w.add_rope_freq_base(s["rope_base"])
    w.add_vocab_size(n_vocab)
    if arch == "gemma3":
        w.add_key_length(hd)
        w.add_value_length(hd)
        w.add_sliding_window(s["sliding_window"])
        if final_softcap:
            w.add_float32("gemma3.final_logit_softcapping", final_softcap)
    else:
        w.add_rope_dimension_count(hd)

    if merges is not None:
        w.add_tokenizer_model("gpt2")
        w.add_tokenizer_pre("default")
        w.add_token_list(tokens)
        w.add_token_types(types)
        w.add_token_merges(merges)
        w.add_add_bos_token(False)
        w.add_chat_template("{% for message in messages %}{{'<|im_start|>' + message['role'] + '\n' + "
                            "message['content'] + '<|im_end|>' + '\n'}}{% endfor %}"
                            "{% if add_generation_prompt %}{{ '<|im_start|>assistant\n' }}{% endif %}")
    else:
        w.add_tokenizer_model("llama")
        w.add_tokenizer_pre("default")
        w.add_token_list(tokens)
        w.add_token_scores(scores)
        w.add_token_types(types)
        w.add_add_bos_token(True)
        w.add_add_eos_token(False)
        w.add_add_space_prefix(False)
        w.add_unk_token_id(3)
        w.add_pad_token_id(0)
        w.add_chat_template("{{ bos_token }}{% for message in messages %}<start_of_turn>"
                            "{{ 'model' if message['role'] == 'assistant' else message['role'] }}\n"
                            "{{ message['content'] | trim }}<end_of_turn>\n{% endfor %}"
                            "{% if add_generation_prompt %}<start_of_turn>model\n{% endif %}")
    w.add_bos_token_id(ids["bos"])
    w.add_eos_token_id(ids["eos"])

    def mat(n_out, n_in, scale=1.0):
        return (rng.standard_normal((n_out, n_in)) * scale / np.sqrt(n_in)).astype(np.float32)

    def vec(n, mean, std):
        return (mean + std * rng.standard_normal(n)).astype(np.float32)

    def add(name, arr, quant=True):
        if quant and arr.ndim == 2:
            data, raw = encode(arr, qt)
        else:
            data, raw = arr.astype(np.float32), None
        w.add_tensor(name, data, raw_dtype=raw)

    add("token_embd.weight", rng.standard_normal((n_vocab, d)).astype(np.float32))
    add("output_norm.weight", vec(d, 1.0, 0.1), quant=False)
    if not s["tied"]:
        add("output.weight", mat(n_vocab, d, 4.0))
    for il in range(L):
        p = "blk.%d." % il
        add(p + "attn_norm.weight", vec(d, 1.0, 0.1), quant=False)
        add(p + "attn_q.weight", mat(nh * hd, d, 2.0))
        add(p + "attn_k.weight", mat(nkv * hd, d, 2.0))
        add(p + "attn_v.weight", mat(nkv * hd, d))
        if arch == "qwen2":
            add(p + "attn_q.bias", vec(nh * hd, 0.0, 0.5), quant=False)
            add(p + "attn_k.bias", vec(nkv * hd, 0.0, 0.5), quant=False)
            add(p + "attn_v.bias", vec(nkv * hd, 0.0, 0.5), quant=False)
        if arch == "gemma3":
            add(p + "attn_q_norm.weight", vec(hd, 1.0, 0.2), quant=False)
            add(p + "attn_k_norm.weight", vec(hd, 1.0, 0.2), quant=False)
            add(p + "post_attention_norm.weight", vec(d, 1.0, 0.1), quant=False)
            add(p + "post_ffw_norm.weight", vec(d, 1.0, 0.1), quant=False)
        add(p + "attn_output.weight", mat(d, nh * hd))
        add(p + "ffn_norm.weight", vec(d, 1.0, 0.1), quant=False)
        add(p + "ffn_gate.weight", mat(ff, d, 2.0))
        add(p + "ffn_up.weight", mat(ff, d))
        add(p + "ffn_down.weight", mat(d, ff))
    w.write_header_to_file()
    w.write_kv_data_to_file()
    w.write_tensors_to_file()
    w.close()
    return path


def self_test_q4_k():
    rng = np.random.default_rng(7)
    x = rng.standard_normal((4, 512)).astype(np.float32)
    q = quantize_q4_k(x)
    y = gguf.quants.dequantize(q, QT.Q4_K).reshape(x.shape)
    err = np.linalg.norm(y - x) / np.linalg.norm(x)
    if not err < 0.12:
        raise AssertionError("Q4_K round trip error %.3f too large" % err)
    return err


def synth_tokens(n_vocab: int, n: int, seed: int = 1, bos=None):
    rng = np.random.default_rng(seed)
    toks = [int(t) for t in rng.integers(0, n_vocab, size=n)]
    if bos is not None:
        toks[0] = bos
    return toks


def run_all(outdir: str, n_tokens: int, use_llama_cpp: bool, seed: int) -> int:
    import forward as ref
    import compare
    os.makedirs(outdir, exist_ok=True)
    print("Q4_K quantizer round-trip rel error: %.4f" % self_test_q4_k())
    failures = 0
    for arch in ARCHS:
        for tn in TYPES:
            path = os.path.join(outdir, "synth-%s-%s.gguf" % (arch, tn))
            write_model(path, arch, tn, seed)
            m = ref.load(path)
            bos = m.file.field("tokenizer.ggml.bos_token_id")
            toks = synth_tokens(m.hp.n_vocab, n_tokens, seed + 1, bos if arch == "gemma3" else None)
            t0 = time.time()
            a = ref.forward(path, toks)
            b = ref.forward(path, toks, n_past_split=n_tokens // 3)
            dt = time.time() - t0
            ok = bool(np.all(np.isfinite(a)))
            split = compare.compare(b, a)
            line = "%-7s %-5s ref %.2fs finite=%s split_rel_l2=%.1e" % (arch, tn, dt, ok, split["rel_l2"])
            if not ok or split["rel_l2"] > 1e-6:
                failures += 1
                line += "  FAIL"
            if use_llama_cpp:
                try:
                    lc = llama_cpp_logits(path, toks)
                    r = compare.compare(lc, a)
                    line += "  llama.cpp: rel_l2=%.2e argmax=%d/%d" % (r["rel_l2"], r["argmax_agree"], r["n"])
                except Exception as exc:  # report, do not hide
                    line += "  llama.cpp: error %s" % exc
            print(line, flush=True)
    print("%d passed, %d failed" % (len(ARCHS) * len(TYPES) - failures, failures))
    return 1 if failures else 0


def llama_cpp_logits(path: str, toks):
    import llama_cpp
    llm = llama_cpp.Llama(model_path=path, n_ctx=256, logits_all=True, n_threads=2, n_batch=256,
                          verbose=False, type_k=0, type_v=0, flash_attn=False)
    llm.reset()
    llm.eval(toks)
    out = np.array(llm.scores[:len(toks)], dtype=np.float32)
    del llm
    return out


def main(argv=None) -> int:
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    sub = ap.add_subparsers(dest="cmd", required=True)
    w = sub.add_parser("write")
    w.add_argument("--arch", choices=ARCHS, required=True)
    w.add_argument("--type", choices=sorted(TYPES), required=True)
    w.add_argument("-o", "--out", required=True)
    w.add_argument("--seed", type=int, default=0)
    w.add_argument("--final-softcap", type=float, default=0.0,
                   help="gemma3 only: write final_logit_softcapping")
    a = sub.add_parser("all")
    a.add_argument("dir")
    a.add_argument("--tokens", type=int, default=64)
    a.add_argument("--seed", type=int, default=0)
    a.add_argument("--llama-cpp", action="store_true", help="cross-check with llama-cpp-python")
    args = ap.parse_args(argv)
    if args.cmd == "write":
        write_model(args.out, args.arch, args.type, args.seed, args.final_softcap)
        print("wrote %s" % args.out)
        return 0
    return run_all(args.dir, args.tokens, args.llama_cpp, args.seed)


if __name__ == "__main__":
    sys.exit(main())
