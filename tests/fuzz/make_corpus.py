#!/usr/bin/env python3
"""Writes the seed corpus of fuzz_gguf into tests/fuzz/corpus_gguf/.

Small valid GGUF files (versions 2 and 3, every value type, nested arrays,
a custom alignment, tensors of each supported type) and a few corrupt ones
(bad magic, version 1, truncations, huge counts, a tensor past the end).
Run it again after changing it; the files are committed."""
import os
import struct
import sys

OUT = os.path.join(os.path.dirname(os.path.abspath(__file__)), "corpus_gguf")

U8, I8, U16, I16, U32, I32, F32, BOOL, STR, ARR, U64, I64, F64 = range(13)
FMT = {U8: "<B", I8: "<b", U16: "<H", I16: "<h", U32: "<I", I32: "<i", F32: "<f",
       BOOL: "<B", U64: "<Q", I64: "<q", F64: "<d"}
# ggml type id -> (elements per block, bytes per block)
GGML = {0: (1, 4), 1: (1, 2), 2: (32, 18), 3: (32, 20), 6: (32, 22), 7: (32, 24), 8: (32, 34),
        12: (256, 144), 13: (256, 176), 14: (256, 210), 26: (1, 4), 30: (1, 2)}


def s(text):
    b = text.encode() if isinstance(text, str) else text
    return struct.pack("<Q", len(b)) + b


def value(t, v):
    if t == STR:
        return s(v)
    if t == ARR:
        et, items = v
        return struct.pack("<IQ", et, len(items)) + b"".join(value(et, x) for x in items)
    return struct.pack(FMT[t], v)


def kv(key, t, v):
    return s(key) + struct.pack("<I", t) + value(t, v)


def gguf(kvs, tensors, version=3, alignment=32):
    """tensors: (name, ne list, ggml type); data is a byte ramp."""
    body = b"".join(kv(*x) for x in kvs)
    infos, blobs, off = b"", [], 0
    for name, ne, gt in tensors:
        bs, ts = GGML[gt]
        n = ne[0] // bs * ts
        for d in ne[1:]:
            n *= d
        infos += s(name) + struct.pack("<I", len(ne)) + b"".join(struct.pack("<Q", d) for d in ne)
        infos += struct.pack("<IQ", gt, off)
        blobs.append(bytes((i * 7 + off) & 0xFF for i in range(n)))
        off += n + (-n % alignment)
    head = b"GGUF" + struct.pack("<IQQ", version, len(tensors), len(kvs)) + body + infos
    out = head + b"\0" * (-len(head) % alignment)
    for blob in blobs:
        out += blob + b"\0" * (-len(blob) % alignment)
    return out


def main():
    os.makedirs(OUT, exist_ok=True)
    every = [
        ("general.architecture", STR, "llama"),
        ("t.u8", U8, 200), ("t.i8", I8, -5), ("t.u16", U16, 60000), ("t.i16", I16, -300),
        ("t.u32", U32, 4000000000), ("t.i32", I32, -7), ("t.u64", U64, 1 << 40),
        ("t.i64", I64, -(1 << 40)), ("t.f32", F32, 0.5), ("t.f64", F64, -2.25),
        ("t.bool", BOOL, 1),
        ("tokenizer.ggml.tokens", ARR, (STR, ["<unk>", "a", "b", "ab"])),
        ("tokenizer.ggml.scores", ARR, (F32, [0.0, -1.0, -2.0, -3.0])),
        ("a.nested", ARR, (ARR, [(U32, [1, 2]), (STR, ["x", "yz", ""]),
                                 (ARR, [(I8, [-1]), (STR, ["a", "bc"]), (ARR, [(U8, [7])])])])),
    ]
    tensors = [("token_embd.weight", [32, 4], 8), ("blk.0.attn_norm.weight", [32], 0),
               ("blk.0.ffn_up.weight", [256, 2], 12)]
    files = {
        "valid_v3_all_types.gguf": gguf(every, tensors),
        "valid_v2.gguf": gguf(every[:4], tensors[:2], version=2),
        "valid_align64.gguf": gguf([("general.alignment", U32, 64)] + every[:2], tensors, alignment=64),
        "valid_every_dtype.gguf": gguf([], [("t%d" % gt, [256], gt) for gt in sorted(GGML)]),
        "valid_empty.gguf": gguf([], []),
    }
    good = files["valid_v3_all_types.gguf"]
    files["bad_magic.gguf"] = b"GGJT" + good[4:]
    files["bad_version1.gguf"] = good[:4] + struct.pack("<I", 1) + good[8:]
    files["bad_truncated_kv.gguf"] = good[:90]
    files["bad_truncated_data.gguf"] = good[:-100]
    files["bad_huge_n_kv.gguf"] = good[:16] + struct.pack("<Q", 1 << 62) + good[24:]
    files["bad_tensor_past_end.gguf"] = gguf([], [("w", [64], 0)])[:-128]
    files["bad_unknown_dtype.gguf"] = gguf([], [("w", [32], 2)]).replace(
        struct.pack("<IQ", 2, 0), struct.pack("<IQ", 9, 0), 1)
    for name, data in sorted(files.items()):
        with open(os.path.join(OUT, name), "wb") as f:
            f.write(data)
        print(f"{name}: {len(data)} bytes")
    return 0


if __name__ == "__main__":
    sys.exit(main())
