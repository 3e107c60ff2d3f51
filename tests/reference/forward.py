#!/usr/bin/env python3
"""Independent reference forward pass for Switchyard's correctness oracle.

Reads a GGUF file with the PyPI `gguf` package (GGUFReader for metadata and
tensor bytes, gguf.quants.dequantize for every quantised type) and computes
the logits of a token sequence with numpy.  Nothing here uses Switchyard's C
code, so the C runtime can be checked against it.

Supported architectures (general.architecture): llama, qwen2, gemma3.
See README.md in this directory for every convention this file relies on and
the evidence for each.

CLI:
    python3 forward.py MODEL.gguf --tokens 1,2,3 [--out logits.npy]
                       [--n-past-split K] [--dtype float32|float64]
Library:
    from forward import forward
    logits = forward("model.gguf", [1, 2, 3])   # (n_tokens, n_vocab) float32
"""

from __future__ import annotations

import argparse
import math
import os
import sys
import time
from typing import Dict, List, Optional, Sequence

import numpy as np

try:
    import gguf
    from gguf import GGUFReader, GGMLQuantizationType
except ImportError as exc:  # pragma: no cover - message for the user
    sys.stderr.write("forward.py needs the PyPI packages `gguf` and `numpy` "
                     "(pip install gguf numpy): %s\n" % exc)
    raise

SUPPORTED_ARCHS = ("llama", "qwen2", "gemma3")

# ggml rope modes (GGML_ROPE_TYPE_NEOX == 2).  "norm" rotates adjacent pairs
# (x[2i], x[2i+1]); "neox" rotates (x[i], x[i + n_rot/2]).
ROPE_NORM = "norm"
ROPE_NEOX = "neox"
ROPE_STYLE = {"llama": ROPE_NORM, "qwen2": ROPE_NEOX, "gemma3": ROPE_NEOX}


# --------------------------------------------------------------------------
# GGUF access
# --------------------------------------------------------------------------

def _field_value(field):
    """Python value of a GGUF metadata field (scalar, string or list)."""
    if hasattr(field, "contents"):
        return field.contents()
    # Fallback for old gguf releases without ReaderField.contents().
    vtype = field.types[0]
    if vtype == gguf.GGUFValueType.STRING:
        return bytes(field.parts[field.data[0]]).decode("utf-8")
    if vtype == gguf.GGUFValueType.ARRAY:
        sub = field.types[-1]
        if sub == gguf.GGUFValueType.STRING:
            return [bytes(field.parts[i]).decode("utf-8") for i in field.data]
        return [field.parts[i].tolist()[0] for i in field.data]
    return field.parts[field.data[0]].tolist()[0]


class GGUFModelFile:
    """Metadata + lazily dequantised (then cached) float tensors of one GGUF."""

    def __init__(self, path: str):
        self.path = path
        self.reader = GGUFReader(path, "r")
        self.meta: Dict[str, object] = {}
        for key, field in self.reader.fields.items():
            if key.startswith("GGUF."):
                continue
            # The large tokenizer arrays are decoded only on demand.
            if key in ("tokenizer.ggml.tokens", "tokenizer.ggml.scores",
                       "tokenizer.ggml.token_type", "tokenizer.ggml.merges"):
                continue
            self.meta[key] = _field_value(field)
        self.tensors = {t.name: t for t in self.reader.tensors}
        self._cache: Dict[str, np.ndarray] = {}

    def field(self, key: str, default=None):
        if key in self.meta:
            return self.meta[key]
        f = self.reader.fields.get(key)
        if f is None:
            return default
        v = _field_value(f)
        self.meta[key] = v
        return v

    def has(self, name: str) -> bool:
        return name in self.tensors

    def numpy_shape(self, name: str):
        """GGUF lists dims innermost-first (ggml ne[0], ne[1], ...); numpy
        (row-major) wants them outermost-first, so the order is reversed."""
        t = self.tensors[name]
        return tuple(int(d) for d in reversed([int(x) for x in t.shape]))

    def get(self, name: str, dtype=np.float32) -> np.ndarray:
        """Dequantised tensor as a C-contiguous numpy array in numpy order.

        A 2-D weight with GGUF shape [K, N] (ne0 = K = input features) comes
        back as an (N, K) array: one row per output feature, so y = x @ W.T.
        """
        key = name + "|" + np.dtype(dtype).name
        arr = self._cache.get(key)
        if arr is not None:
            return arr
        t = self.tensors[name]
        raw = t.data
        qtype = GGMLQuantizationType(int(t.tensor_type))
        if qtype == GGMLQuantizationType.F32:
            val = np.asarray(raw, dtype=np.float32)
        elif qtype == GGMLQuantizationType.F16:
            val = np.asarray(raw).view(np.float16).astype(np.float32)
        else:
            val = gguf.quants.dequantize(np.asarray(raw), qtype)
        val = np.ascontiguousarray(val.reshape(self.numpy_shape(name)), dtype=dtype)
        self._cache[key] = val
        return val

    def tensor_type_name(self, name: str) -> str:
        return GGMLQuantizationType(int(self.tensors[name].tensor_type)).name


# --------------------------------------------------------------------------
# Hyper-parameters
# --------------------------------------------------------------------------

class HParams:
    def __init__(self, f: GGUFModelFile):
        arch = f.field("general.architecture")
        if arch not in SUPPORTED_ARCHS:
            raise ValueError("%s: unsupported general.architecture %r (supported: %s)"
                             % (f.path, arch, ", ".join(SUPPORTED_ARCHS)))
        self.arch = arch

        def need(key):
            v = f.field(arch + "." + key)
            if v is None:
                raise ValueError("%s: missing metadata %s.%s" % (f.path, arch, key))
            return v

        def opt(key, default=None):
            v = f.field(arch + "." + key)
            return default if v is None else v

        self.n_layer = int(need("block_count"))
        self.n_embd = int(need("embedding_length"))
        self.n_ff = int(need("feed_forward_length"))
        self.n_head = int(need("attention.head_count"))
        self.n_head_kv = int(opt("attention.head_count_kv", self.n_head))
        if self.n_head % self.n_head_kv != 0:
            raise ValueError("%s: head_count %d not a multiple of head_count_kv %d"
                             % (f.path, self.n_head, self.n_head_kv))
        self.head_dim_k = int(opt("attention.key_length", self.n_embd // self.n_head))
        self.head_dim_v = int(opt("attention.value_length", self.head_dim_k))
        self.eps = float(need("attention.layer_norm_rms_epsilon"))
        self.rope_base = float(opt("rope.freq_base", 10000.0))
        self.n_rot = int(opt("rope.dimension_count", self.head_dim_k))
        self.rope_style = ROPE_STYLE[arch]
        self.rope_scaling_type = opt("rope.scaling.type", "none")
        self.rope_scaling_factor = float(opt("rope.scaling.factor", 1.0) or 1.0)
        if self.rope_scaling_type not in ("none", "linear") and self.rope_scaling_factor != 1.0:
            raise NotImplementedError("%s: rope scaling %r not supported by the reference"
                                      % (f.path, self.rope_scaling_type))
        self.final_softcap = opt("final_logit_softcapping")
        self.attn_softcap = opt("attn_logit_softcapping")

        # Sliding-window attention (gemma3).
        self.sliding_window = int(opt("attention.sliding_window", 0) or 0)
        self.swa_layers = [False] * self.n_layer
        self.rope_base_swa = self.rope_base
        if arch == "gemma3":
            pattern = opt("attention.sliding_window_pattern")
            if isinstance(pattern, list) and len(pattern) == self.n_layer:
                # Per-layer booleans (true = sliding window layer).
                self.swa_layers = [bool(x) for x in pattern]
            else:
                # Gemma 3 rule: 5 local layers then 1 global, repeating:
                # layer i is global iff (i + 1) % 6 == 0.
                period = int(pattern) if isinstance(pattern, int) and pattern > 0 else 6
                self.swa_layers = [((i + 1) % period) != 0 for i in range(self.n_layer)]
            if self.sliding_window <= 0:
                self.swa_layers = [False] * self.n_layer
            # Local layers use their own rope base; Gemma 3 GGUFs do not store
            # it, the published config (rope_local_base_freq) is 10000.
            self.rope_base_swa = float(opt("rope.freq_base_swa", 10000.0))
            # Query scaling: query_pre_attn_scalar ** -0.5.  It equals
            # key_length for every Gemma 3 size except 27B, where it is
            # n_embd / n_head (27B is recognised by its 62 layers).
            qpas = opt("attention.query_pre_attn_scalar")
            if qpas is None:
                qpas = (self.n_embd // self.n_head) if self.n_layer == 62 else self.head_dim_k
            self.attn_scale = 1.0 / math.sqrt(float(qpas))
            self.embd_scale = math.sqrt(float(self.n_embd))
        else:
            self.attn_scale = 1.0 / math.sqrt(float(self.head_dim_k))
            self.embd_scale = 1.0
        self.n_vocab = None  # filled from token_embd

    def describe(self) -> str:
        keys = ["arch", "n_layer", "n_embd", "n_ff", "n_head", "n_head_kv", "head_dim_k",
                "head_dim_v", "eps", "rope_base", "rope_base_swa", "n_rot", "rope_style",
                "rope_scaling_type", "rope_scaling_factor", "sliding_window", "attn_scale",
                "embd_scale", "final_softcap", "attn_softcap", "n_vocab"]
        s = ", ".join("%s=%s" % (k, getattr(self, k)) for k in keys)
        if any(self.swa_layers):
            s += ", swa_layers=%s" % [i for i, x in enumerate(self.swa_layers) if x]
        return s


# --------------------------------------------------------------------------
# Math helpers
# --------------------------------------------------------------------------

def rms_norm(x: np.ndarray, w: Optional[np.ndarray], eps: float) -> np.ndarray:
    """x / sqrt(mean(x^2) + eps) * w over the last axis (mean in float64)."""
    x64 = x.astype(np.float64, copy=False)
    ms = np.mean(x64 * x64, axis=-1, keepdims=True)
    y = (x64 / np.sqrt(ms + eps)).astype(x.dtype, copy=False)
    if w is not None:
        y = y * w
    return y


def silu(x):
    return x / (1.0 + np.exp(-x))


def gelu_tanh(x):
    c = math.sqrt(2.0 / math.pi)
    return 0.5 * x * (1.0 + np.tanh(c * (x + 0.044715 * x * x * x)))


def rope(x: np.ndarray, pos: np.ndarray, n_rot: int, base: float, style: str,
         pos_scale: float = 1.0, freq_factors: Optional[np.ndarray] = None) -> np.ndarray:
    """Rotary embedding.  x: (T, H, D); pos: (T,) absolute positions.

    Pair i (0 <= i < n_rot/2) is rotated by angle pos * base^(-2i/n_rot)
    (divided by freq_factors[i] when the GGUF has rope_freqs.weight).  Dims
    n_rot..D pass through unchanged.
    """
    half = n_rot // 2
    inv = base ** (-np.arange(half, dtype=np.float64) * 2.0 / n_rot)
    if freq_factors is not None:
        inv = inv / freq_factors.astype(np.float64)[:half]
    ang = (pos.astype(np.float64) * pos_scale)[:, None] * inv[None, :]   # (T, half)
    cos = np.cos(ang)[:, None, :].astype(x.dtype)
    sin = np.sin(ang)[:, None, :].astype(x.dtype)
    out = x.copy()
    if style == ROPE_NORM:
        a = x[..., 0:n_rot:2]
        b = x[..., 1:n_rot:2]
        out[..., 0:n_rot:2] = a * cos - b * sin
        out[..., 1:n_rot:2] = a * sin + b * cos
    elif style == ROPE_NEOX:
        a = x[..., :half]
        b = x[..., half:n_rot]
        out[..., :half] = a * cos - b * sin
        out[..., half:n_rot] = a * sin + b * cos
    else:
        raise ValueError("unknown rope style %r" % style)
    return out


def softmax(x: np.ndarray, axis: int = -1) -> np.ndarray:
    m = np.max(x, axis=axis, keepdims=True)
    e = np.exp(x - m)
    return e / np.sum(e, axis=axis, keepdims=True)


# --------------------------------------------------------------------------
# Model
# --------------------------------------------------------------------------

# KV cache element types: "f32" keeps the computed values; the others store
# what a cache of that type would hold (float16 rounding, or a Q8_0/Q4_0
# round trip through gguf's own quantiser), as the C runtime's --kv-type.
KV_TYPES = ("f32", "f16", "q8_0", "q4_0")


# Elements a Q8_0/Q4_0 cache rounds within KV_NEAR_TOL (in quant steps) of
# a rounding boundary, counted by kv_round since the last reset: there a
# key computed a float rounding apart (another summation order) can land
# on the neighbouring quant, so the caches of two correct implementations
# differ by one step in that element.  Measured: over 9 llama F32 synth
# seeds ~1 element in 5 runs lies within 1e-5 steps (5 per run within
# 1e-4); oracle seed 18969714's Q4_0 case failed the float thresholds
# (rel L2 1.3e-2) with exactly one element within 3e-6 steps.
KV_NEAR_TOL = 1e-5
KV_NEAR = {"count": 0}


def _count_near_boundary(rows: np.ndarray, kv_type: str) -> int:
    blocks = rows.reshape(-1, 32).astype(np.float32)
    if kv_type == "q4_0":
        # gguf: d = signed max / -8, q = trunc(x / d + 8.5): boundaries at
        # integers of x / d + 8.5 (ties resolve upwards).
        idx = np.argmax(np.abs(blocks), axis=1)
        mx = blocks[np.arange(len(blocks)), idx]
        d = mx / -8
    else:
        # gguf: d = absmax / 127, q = round(x / d): boundaries at halves.
        d = np.abs(blocks).max(axis=1) / 127
    with np.errstate(divide="ignore", invalid="ignore"):
        t = np.where(d[:, None] == 0, 0.0, blocks / d[:, None])
    frac = np.abs((t + (8.5 if kv_type == "q4_0" else 0.5)) % 1.0)
    near = np.minimum(frac, 1.0 - frac) < KV_NEAR_TOL
    if kv_type == "q4_0":
        near &= (t > -8.5) & (t < 7.5)  # beyond these the clip decides
    return int(near.sum())


def kv_round(x: np.ndarray, kv_type: str) -> np.ndarray:
    if kv_type == "f32":
        return x
    if kv_type == "f16":
        return x.astype(np.float16).astype(x.dtype)
    qt = {"q8_0": GGMLQuantizationType.Q8_0, "q4_0": GGMLQuantizationType.Q4_0}[kv_type]
    rows = x.astype(np.float32).reshape(-1, x.shape[-1])
    KV_NEAR["count"] += _count_near_boundary(rows, kv_type)
    back = gguf.quants.dequantize(gguf.quants.quantize(rows, qt), qt)
    return back.reshape(x.shape).astype(x.dtype)


class KVCache:
    def __init__(self, n_layer: int, kv_type: str = "f32"):
        if kv_type not in KV_TYPES:
            raise ValueError("kv_type %r is not one of %s" % (kv_type, ", ".join(KV_TYPES)))
        self.k: List[Optional[np.ndarray]] = [None] * n_layer  # (T, n_kv, hd_k), post-rope
        self.v: List[Optional[np.ndarray]] = [None] * n_layer  # (T, n_kv, hd_v)
        self.n_past = 0
        self.kv_type = kv_type

    def append(self, il: int, k: np.ndarray, v: np.ndarray):
        k, v = kv_round(k, self.kv_type), kv_round(v, self.kv_type)
        if self.k[il] is None:
            self.k[il], self.v[il] = k, v
        else:
            self.k[il] = np.concatenate([self.k[il], k], axis=0)
            self.v[il] = np.concatenate([self.v[il], v], axis=0)
        return self.k[il], self.v[il]


class Model:
    def __init__(self, path: str, dtype=np.float32):
        self.file = GGUFModelFile(path)
        self.hp = HParams(self.file)
        self.dtype = np.dtype(dtype)
        f = self.file
        if not f.has("token_embd.weight"):
            raise ValueError("%s: no token_embd.weight" % path)
        emb_shape = f.numpy_shape("token_embd.weight")
        self.hp.n_vocab = emb_shape[0]
        if emb_shape[1] != self.hp.n_embd:
            raise ValueError("%s: token_embd.weight has %d columns, embedding_length is %d"
                             % (path, emb_shape[1], self.hp.n_embd))
        # Separate output matrix if present, tied to the embedding otherwise.
        self.output_name = "output.weight" if f.has("output.weight") else "token_embd.weight"
        self.freq_factors = f.get("rope_freqs.weight") if f.has("rope_freqs.weight") else None

    def w(self, name: str) -> np.ndarray:
        return self.file.get(name, self.dtype)

    def wopt(self, name: str) -> Optional[np.ndarray]:
        return self.w(name) if self.file.has(name) else None

    def linear(self, x: np.ndarray, name: str) -> np.ndarray:
        y = x @ self.w(name + ".weight").T
        b = self.wopt(name + ".bias")
        if b is not None:
            y = y + b
        return y

    def preload(self):
        """Dequantise every tensor once (the cache then makes calls cheap)."""
        for name in self.file.tensors:
            self.w(name)

    def new_cache(self, kv_type: str = "f32") -> KVCache:
        return KVCache(self.hp.n_layer, kv_type)

    def eval(self, tokens: Sequence[int], cache: Optional[KVCache] = None) -> np.ndarray:
        """Run `tokens` as one batch after the cache's n_past tokens.
        Returns (len(tokens), n_vocab) logits in the compute dtype."""
        hp = self.hp
        if cache is None:
            cache = self.new_cache()
        toks = np.asarray(list(tokens), dtype=np.int64)
        if toks.ndim != 1 or toks.size == 0:
            raise ValueError("need a non-empty 1-D token list")
        if toks.min() < 0 or toks.max() >= hp.n_vocab:
            raise ValueError("token id out of range [0, %d)" % hp.n_vocab)
        T = toks.size
        n_past = cache.n_past
        pos = np.arange(n_past, n_past + T, dtype=np.int64)
        n_kv_total = n_past + T
        kpos = np.arange(n_kv_total, dtype=np.int64)

        emb = self.w("token_embd.weight")
        x = emb[toks].astype(self.dtype, copy=True)
        if hp.embd_scale != 1.0:
            x = x * self.dtype.type(hp.embd_scale)

        # Masks: causal (key position <= query position); a sliding-window
        # layer also needs query_pos - key_pos < window.
        diff = pos[:, None] - kpos[None, :]                 # (T, n_kv_total)
        mask_full = diff >= 0
        mask_swa = mask_full & (diff < hp.sliding_window) if hp.sliding_window > 0 else mask_full

        group = hp.n_head // hp.n_head_kv
        gemma = hp.arch == "gemma3"
        for il in range(hp.n_layer):
            p = "blk.%d." % il
            is_swa = hp.swa_layers[il]
            h = rms_norm(x, self.w(p + "attn_norm.weight"), hp.eps)
            q = self.linear(h, p + "attn_q").reshape(T, hp.n_head, hp.head_dim_k)
            k = self.linear(h, p + "attn_k").reshape(T, hp.n_head_kv, hp.head_dim_k)
            v = self.linear(h, p + "attn_v").reshape(T, hp.n_head_kv, hp.head_dim_v)
            qn = self.wopt(p + "attn_q_norm.weight")
            kn = self.wopt(p + "attn_k_norm.weight")
            if qn is not None:
                q = rms_norm(q, qn, hp.eps)
            if kn is not None:
                k = rms_norm(k, kn, hp.eps)
            if is_swa:
                base, pscale = hp.rope_base_swa, 1.0
            else:
                base = hp.rope_base
                pscale = 1.0 / hp.rope_scaling_factor if hp.rope_scaling_type == "linear" else 1.0
            q = rope(q, pos, hp.n_rot, base, hp.rope_style, pscale, self.freq_factors)
            k = rope(k, pos, hp.n_rot, base, hp.rope_style, pscale, self.freq_factors)
            K, V = cache.append(il, k, v)                   # (n_kv_total, n_kv, d)

            # Scores per query head; query head j reads kv head j // group.
            # Attention is cheap next to the matmuls: done in float64.
            qh = q.reshape(T, hp.n_head_kv, group, hp.head_dim_k).transpose(1, 2, 0, 3)
            qh = qh.astype(np.float64)                      # (n_kv, g, T, d)
            Kt = K.astype(np.float64).transpose(1, 2, 0)[:, None]   # (n_kv, 1, d, S)
            s = np.matmul(qh, Kt) * hp.attn_scale           # (n_kv, g, T, S)
            if hp.attn_softcap:
                s = hp.attn_softcap * np.tanh(s / hp.attn_softcap)
            m = mask_swa if is_swa else mask_full
            s = np.where(m[None, None], s, -np.inf)
            a = softmax(s, axis=-1)
            Vh = V.astype(np.float64).transpose(1, 0, 2)[:, None]   # (n_kv, 1, S, dv)
            o = np.matmul(a, Vh)                            # (n_kv, g, T, dv)
            o = o.transpose(2, 0, 1, 3).reshape(T, hp.n_head * hp.head_dim_v).astype(self.dtype)
            o = self.linear(o, p + "attn_output")
            if gemma:
                o = rms_norm(o, self.w(p + "post_attention_norm.weight"), hp.eps)
            x = x + o

            h = rms_norm(x, self.w(p + "ffn_norm.weight"), hp.eps)
            g = self.linear(h, p + "ffn_gate")
            u = self.linear(h, p + "ffn_up")
            act = gelu_tanh(g) if gemma else silu(g)
            d = self.linear(act * u, p + "ffn_down")
            if gemma:
                d = rms_norm(d, self.w(p + "post_ffw_norm.weight"), hp.eps)
            x = x + d

        cache.n_past += T
        x = rms_norm(x, self.w("output_norm.weight"), hp.eps)
        logits = x @ self.w(self.output_name).T
        if hp.final_softcap:
            logits = hp.final_softcap * np.tanh(logits / hp.final_softcap)
        return logits


_MODELS: Dict[tuple, Model] = {}


def load(model_path: str, dtype=np.float32) -> Model:
    """Model with a per-process cache (weights are dequantised once)."""
    key = (os.path.abspath(model_path), np.dtype(dtype).name)
    m = _MODELS.get(key)
    if m is None:
        m = Model(model_path, dtype)
        _MODELS[key] = m
    return m


def forward(model_path: str, tokens: Sequence[int], n_past_split: Optional[int] = None,
            dtype=np.float32, kv_type: str = "f32") -> np.ndarray:
    """float32 logits (n_tokens, n_vocab) for every position of `tokens`.

    With n_past_split=K (0 < K < n), the first K tokens are evaluated as one
    batch and the rest as a second batch reusing the KV cache; the result must
    equal the single-batch one (useful to mirror the C runtime's n_past path).
    kv_type (KV_TYPES) rounds the cached keys and values as a cache of that
    type stores them.
    """
    m = load(model_path, dtype)
    tokens = list(tokens)
    cache = m.new_cache(kv_type)
    if n_past_split and 0 < n_past_split < len(tokens):
        a = m.eval(tokens[:n_past_split], cache)
        b = m.eval(tokens[n_past_split:], cache)
        out = np.concatenate([a, b], axis=0)
    else:
        out = m.eval(tokens, cache)
    return out.astype(np.float32)


def greedy(model_path: str, prompt: Sequence[int], n_new: int, stop: Sequence[int] = (),
           dtype=np.float32) -> List[int]:
    """Greedy decoding with the KV cache (prefill as a batch, then 1 token/step)."""
    m = load(model_path, dtype)
    cache = m.new_cache()
    logits = m.eval(list(prompt), cache)
    out: List[int] = []
    for _ in range(n_new):
        nxt = int(np.argmax(logits[-1]))
        out.append(nxt)
        if nxt in stop:
            break
        logits = m.eval([nxt], cache)
    return out


def parse_tokens(s: str) -> List[int]:
    s = s.strip()
    if os.path.exists(s):
        with open(s) as fh:
            s = fh.read()
    return [int(t) for t in s.replace(",", " ").split()]


def main(argv=None) -> int:
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("model")
    ap.add_argument("--tokens", required=True,
                    help="comma/space separated token ids, or a file containing them")
    ap.add_argument("--out", help="write logits here: .npy (numpy) or anything else = raw "
                                  "little-endian float32, row-major (n_tokens, n_vocab)")
    ap.add_argument("--n-past-split", type=int, default=None,
                    help="evaluate the first K tokens, then the rest with n_past=K")
    ap.add_argument("--dtype", choices=["float64", "float32"], default="float32",
                    help="dtype of weights and matmuls (default float32; norms, rope angles, "
                         "attention scores/softmax are float64 either way; float64 widens the "
                         "dequantised weights exactly and is slower)")
    ap.add_argument("--kv-type", choices=list(KV_TYPES), default="f32",
                    help="store the KV cache's keys and values as this type (default f32: exact)")
    ap.add_argument("--quiet", action="store_true")
    args = ap.parse_args(argv)

    tokens = parse_tokens(args.tokens)
    t0 = time.time()
    m = load(args.model, np.float64 if args.dtype == "float64" else np.float32)
    m.preload()
    t1 = time.time()
    logits = forward(args.model, tokens, args.n_past_split, m.dtype, args.kv_type)
    t2 = time.time()
    if not args.quiet:
        print("model: %s" % m.hp.describe(), file=sys.stderr)
        print("load+dequantise %.2fs, forward %.2fs for %d tokens" % (t1 - t0, t2 - t1, len(tokens)),
              file=sys.stderr)
    if args.out:
        if args.out.endswith(".npy"):
            np.save(args.out, logits)
        else:
            logits.astype("<f4").tofile(args.out)
    print("logits shape %s; argmax per position: %s"
          % (logits.shape, ",".join(str(int(i)) for i in np.argmax(logits, axis=-1))))
    return 0


if __name__ == "__main__":
    sys.exit(main())
