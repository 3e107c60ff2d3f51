#!/usr/bin/env python3
"""Rewrite a GGUF with its tensors converted to another type, keeping every
metadata key (tokenizer included).

    python3 requant.py IN.gguf OUT.gguf --type f32|f16|q8_0|q4_0|q4_1|q4_k|keep

Matrices (2-D tensors whose row length is a multiple of the block size) are
converted; 1-D tensors (norm weights, biases, rope factors) are written as F32.
Conversion goes through the `gguf` package: dequantize, then quantize (for
q4_k, whose quantizer the package lacks, synth_check.quantize_q4_k is used).

Main use: `--type f32` turns a quantised real model into an F32 model with
exactly the weights the quantised file represents, so the C runtime can be
held to the float thresholds (rel L2 < 1e-3, argmax at every position) on a
real architecture, and llama.cpp can cross-check the oracle without its
activation quantisation.
"""

from __future__ import annotations

import argparse
import os
import sys

import numpy as np
import gguf
from gguf import GGMLQuantizationType as QT, GGUFValueType as VT

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))

TYPES = {"f32": QT.F32, "f16": QT.F16, "q8_0": QT.Q8_0, "q4_0": QT.Q4_0, "q4_1": QT.Q4_1,
         "q5_0": QT.Q5_0, "q5_1": QT.Q5_1, "q4_k": QT.Q4_K}
# general.file_type values (llama_ftype) for the uniform types.
FILE_TYPE = {QT.F32: 0, QT.F16: 1, QT.Q4_0: 2, QT.Q4_1: 3, QT.Q8_0: 7, QT.Q5_0: 8, QT.Q5_1: 9,
             QT.Q4_K: 15}


def encode_tensor(w: np.ndarray, qtype: QT):
    """(data, raw_dtype) for GGUFWriter.add_tensor from a float32 numpy array
    (numpy order: last axis = ggml ne[0])."""
    w = np.ascontiguousarray(w, dtype=np.float32)
    if qtype == QT.F32:
        return w, None
    if qtype == QT.F16:
        return w.astype(np.float16), None
    if qtype == QT.Q4_K:
        from synth_check import quantize_q4_k
        return quantize_q4_k(w), QT.Q4_K
    return gguf.quants.quantize(w, qtype), qtype


def can_quantize(shape, qtype: QT) -> bool:
    if qtype in (QT.F32, QT.F16):
        return True
    block = gguf.GGML_QUANT_SIZES[qtype][0]
    return len(shape) >= 2 and shape[-1] % block == 0


def copy_metadata(reader: gguf.GGUFReader, writer: gguf.GGUFWriter, skip=()):
    for key, field in reader.fields.items():
        if key.startswith("GGUF.") or key == "general.architecture" or key in skip:
            continue
        vtype = field.types[0]
        val = field.contents()
        if vtype == VT.ARRAY:
            if len(field.types) > 2:
                raise NotImplementedError("nested array metadata %s" % key)
            writer.add_key_value(key, val, vtype, sub_type=field.types[-1])
        else:
            writer.add_key_value(key, val, vtype)


def main(argv=None) -> int:
    ap = argparse.ArgumentParser(description="Rewrite a GGUF with converted tensors.")
    ap.add_argument("src")
    ap.add_argument("dst")
    ap.add_argument("--type", choices=sorted(TYPES) + ["keep"], default="f32")
    args = ap.parse_args(argv)

    r = gguf.GGUFReader(args.src, "r")
    arch = r.fields["general.architecture"].contents()
    w = gguf.GGUFWriter(args.dst, arch)
    target = TYPES.get(args.type)
    copy_metadata(r, w, skip=("general.file_type",) if target is not None else ())
    if target is not None:
        w.add_uint32("general.file_type", FILE_TYPE[target])
    for t in r.tensors:
        src_t = QT(int(t.tensor_type))
        shape = tuple(int(d) for d in reversed([int(x) for x in t.shape]))
        if target is None:
            w.add_tensor(t.name, np.asarray(t.data), raw_shape=shape if src_t not in (QT.F32, QT.F16) else None,
                         raw_dtype=src_t if src_t not in (QT.F32, QT.F16) else None)
            continue
        if src_t == QT.F32:
            val = np.asarray(t.data, dtype=np.float32)
        elif src_t == QT.F16:
            val = np.asarray(t.data).view(np.float16).astype(np.float32)
        else:
            val = gguf.quants.dequantize(np.asarray(t.data), src_t)
        val = val.reshape(shape)
        qt = target if (val.ndim >= 2 and can_quantize(shape, target)) else QT.F32
        data, raw = encode_tensor(val, qt)
        w.add_tensor(t.name, data, raw_dtype=raw)
    w.write_header_to_file()
    w.write_kv_data_to_file()
    w.write_tensors_to_file()
    w.close()
    print("wrote %s (%s)" % (args.dst, args.type))
    return 0


if __name__ == "__main__":
    sys.exit(main())
