#!/usr/bin/env python3
"""Generates the tokenizer golden files under tests/fixtures/tokenizer/ with
llama.cpp (through llama-cpp-python, vocab_only=True) as the independent,
trusted tokenizer.

Usage:
  pip install llama-cpp-python gguf numpy
  tools/fetch-models.sh            # models/SmolLM2-135M-Instruct.Q4_1.gguf, models/gemma-3-270m-q4_k_m.gguf
  tools/make-tokenizer-goldens.py [--models DIR] [--out DIR]

For every case of corpus.txt (see the comment at its top) and every
tokenizer below it writes two lines:

  <case> plain   <ids...>   add_special=False, parse_special=False
  <case> special <ids...>   add_special=True,  parse_special=True

Tokenizers:
  smollm2          SmolLM2's own vocabulary (gpt2, pre "smollm")
  smollm2-<pre>    the same vocabulary with tokenizer.ggml.pre replaced by
                   gpt-2 / llama3 / qwen2 / default, to check each hand-written
                   pre-tokenizer against llama.cpp's (a metadata-only copy of
                   the file is written to a temporary directory for this)
  gemma3           Gemma 3's vocabulary (llama / SentencePiece, 262144 tokens)

The C test (tests/llm/test_tokenizer.c) reads the same GGUF files and
checks its ids against these lines; it does not need llama-cpp-python.
"""
import argparse
import hashlib
import os
import sys
import tempfile

ROOT = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))
FIXTURES = os.path.join(ROOT, "tests", "fixtures", "tokenizer")
SMOLLM2 = "SmolLM2-135M-Instruct.Q4_1.gguf"
GEMMA3 = "gemma-3-270m-q4_k_m.gguf"
# golden file suffix -> tokenizer.ggml.pre written into the copy
PRE_VARIANTS = {"gpt2": "gpt-2", "llama3": "llama3", "qwen2": "qwen2", "default": "default"}


def unescape(line: bytes) -> bytes:
    """Decodes the corpus escapes \\n \\r \\t \\\\ \\xNN."""
    out = bytearray()
    i = 0
    while i < len(line):
        c = line[i]
        if c != 0x5C:  # backslash
            out.append(c)
            i += 1
            continue
        if i + 1 >= len(line):
            raise ValueError("corpus: backslash at end of line")
        e = chr(line[i + 1])
        if e in "nrt\\":
            out += {"n": b"\n", "r": b"\r", "t": b"\t", "\\": b"\\"}[e]
            i += 2
        elif e == "x":
            out.append(int(line[i + 2 : i + 4], 16))
            i += 4
        else:
            raise ValueError("corpus: unknown escape \\%s" % e)
    return bytes(out)


def read_corpus(path):
    cases = []
    with open(path, "rb") as f:
        for raw in f:
            raw = raw.rstrip(b"\n")
            if raw.startswith(b"case: "):
                cases.append(unescape(raw[len(b"case: "):]))
    return cases


def sha256(path):
    h = hashlib.sha256()
    with open(path, "rb") as f:
        for block in iter(lambda: f.read(1 << 20), b""):
            h.update(block)
    return h.hexdigest()


def metadata_copy(src, dst, pre):
    """Writes the metadata of |src| (no tensors) to |dst| with
    tokenizer.ggml.pre set to |pre|."""
    import gguf

    r = gguf.GGUFReader(src)
    arch = bytes(r.fields["general.architecture"].parts[-1]).decode()
    w = gguf.GGUFWriter(dst, arch=arch)
    for key, field in r.fields.items():
        if key.startswith("GGUF.") or key == "general.architecture":
            continue
        t = field.types[0]
        if key == "tokenizer.ggml.pre":
            w.add_string(key, pre)
        elif t == gguf.GGUFValueType.ARRAY:
            if field.types[1] == gguf.GGUFValueType.STRING:
                w.add_array(key, [bytes(field.parts[i]) for i in field.data])
            elif field.types[1] == gguf.GGUFValueType.ARRAY:
                continue  # nested arrays: not needed for a vocabulary
            else:
                w.add_array(key, [field.parts[i][0].item() for i in field.data])
        elif t == gguf.GGUFValueType.STRING:
            w.add_string(key, bytes(field.parts[-1]).decode("utf-8", "surrogateescape"))
        else:
            w.add_key_value(key, field.parts[-1][0].item(), t)
    if "tokenizer.ggml.pre" not in r.fields:
        w.add_string("tokenizer.ggml.pre", pre)
    w.write_header_to_file()
    w.write_kv_data_to_file()
    w.write_tensors_to_file()
    w.close()


def write_goldens(name, model_path, pre, cases, out_dir, source):
    import llama_cpp

    llm = llama_cpp.Llama(model_path=model_path, vocab_only=True, verbose=False)
    lines = [
        "# Golden token ids for tests/fixtures/tokenizer/corpus.txt: %s" % name,
        "# made by tools/make-tokenizer-goldens.py with llama-cpp-python %s (vocab_only)" % llama_cpp.__version__,
        "# vocabulary: %s (sha256 %s), tokenizer.ggml.pre = %s" % (os.path.basename(source), sha256(source), pre),
        "# <case> plain|special <ids>: plain = add_special off, parse_special off;",
        "# special = add_special on, parse_special on.",
    ]
    for i, text in enumerate(cases):
        plain = llm.tokenize(text, add_bos=False, special=False)
        special = llm.tokenize(text, add_bos=True, special=True)
        lines.append("%d plain %s" % (i, " ".join(map(str, plain))))
        lines.append("%d special %s" % (i, " ".join(map(str, special))))
    path = os.path.join(out_dir, name + ".golden")
    with open(path, "w", encoding="ascii") as f:
        f.write("\n".join(lines) + "\n")
    print("wrote %s (%d cases)" % (path, len(cases)))
    del llm


def main():
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--models", default=os.environ.get("SY_MODELS_DIR", os.path.join(ROOT, "models")))
    ap.add_argument("--out", default=FIXTURES)
    args = ap.parse_args()
    cases = read_corpus(os.path.join(FIXTURES, "corpus.txt"))
    smol = os.path.join(args.models, SMOLLM2)
    gemma = os.path.join(args.models, GEMMA3)
    for p in (smol, gemma):
        if not os.path.exists(p):
            sys.exit("missing %s: run tools/fetch-models.sh first" % p)
    write_goldens("smollm2", smol, "smollm", cases, args.out, smol)
    with tempfile.TemporaryDirectory() as tmp:
        for suffix, pre in PRE_VARIANTS.items():
            dst = os.path.join(tmp, "smollm2-%s.gguf" % suffix)
            metadata_copy(smol, dst, pre)
            write_goldens("smollm2-" + suffix, dst, pre, cases, args.out, smol)
    write_goldens("gemma3", gemma, "default", cases, args.out, gemma)


if __name__ == "__main__":
    main()
