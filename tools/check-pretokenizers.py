#!/usr/bin/env python3
"""Cross-checks Switchyard's hand-written pre-tokenizers
(framework/llm/tokenizer_pretok.c) against the regular expressions they
implement, run by the PyPI `regex` module, on the tokenizer corpus and on
random strings over a tricky alphabet.

Usage: pip install regex; tools/check-pretokenizers.py [--random N] [--seed S]

It compiles a small driver with cc against the tokenizer sources (no meson
needed) and prints the mismatches per pre-tokenizer; exit status 1 when any.
Differences in Unicode version between `regex` and unicode_tables.c can
show up on characters assigned after the tables' version.
"""
import argparse
import importlib.util
import os
import random
import subprocess
import sys
import tempfile

import regex

ROOT = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))

DRIVER = r"""
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include "tokenizer_internal.h"
/* Reads one hex-encoded text per line; prints the byte ends of its words. */
int main(int argc, char **argv)
{
    sy__pretok pre;
    if (argc < 2 || !sy__pretok_from_name(argv[1], &pre))
        return 2;
    static char line[1 << 20];
    static uint8_t buf[1 << 19];
    static uint32_t ends[1 << 19];
    sy__tok_work w = {0};
    while (fgets(line, sizeof line, stdin)) {
        size_t n = strcspn(line, "\n"), len = n / 2;
        for (size_t i = 0; i < len; i++) {
            unsigned v;
            sscanf(line + 2 * i, "%2x", &v);
            buf[i] = (uint8_t)v;
        }
        uint32_t m = 0;
        sy__pretok_split(pre, &w, buf, len, ends, 1 << 19, &m);
        for (uint32_t i = 0; i < m; i++)
            printf(i ? " %u" : "%u", ends[i]);
        printf("\n");
    }
    sy__tok_work_free(&w);
    return 0;
}
"""

GPT2 = r"'s|'t|'re|'ve|'m|'ll|'d| ?\p{L}+| ?\p{N}+| ?[^\s\p{L}\p{N}]+|\s+(?!\S)|\s+"
LLAMA3 = (r"(?i:'s|'t|'re|'ve|'m|'ll|'d)|[^\r\n\p{L}\p{N}]?\p{L}+|\p{N}{1,3}"
          r"| ?[^\s\p{L}\p{N}]+[\r\n]*|\s*[\r\n]+|\s+(?!\S)|\s+")
CHAINS = {
    "gpt2": [GPT2],
    "llama3": [LLAMA3],
    "qwen2": [LLAMA3.replace(r"\p{N}{1,3}", r"\p{N}")],
    "smollm": [r"\p{N}", GPT2],
    "default": [r"[\p{P}\$\+<=>\^~\|]+", GPT2, r"\p{N}+", r"[0-9][0-9][0-9]"],
}
ALPHABET = list("aZé日1٣½ \t\n\r'sStTmMdDlLrReEvV!?.,;<>|$+=^~-_\u00a0\u3000\u2009🎉\u0301\u0663")


def split(text, chain):
    """Applies each pattern of |chain| to every piece left by the previous
    ones, keeping unmatched text as pieces; returns the UTF-8 byte ends."""
    pieces = [text]
    for pattern in chain:
        out = []
        for piece in pieces:
            pos = 0
            for m in regex.finditer(pattern, piece):
                if m.start() > pos:
                    out.append(piece[pos:m.start()])
                if m.end() > m.start():
                    out.append(m.group())
                pos = m.end()
            if pos < len(piece):
                out.append(piece[pos:])
        pieces = out
    ends, off = [], 0
    for piece in pieces:
        off += len(piece.encode())
        ends.append(off)
    return ends


def main():
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--random", type=int, default=3000)
    ap.add_argument("--seed", type=int, default=None)
    args = ap.parse_args()
    seed = args.seed if args.seed is not None else random.randrange(1 << 30)
    rng = random.Random(seed)
    spec = importlib.util.spec_from_file_location("goldens", os.path.join(ROOT, "tools", "make-tokenizer-goldens.py"))
    goldens = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(goldens)
    cases = [c.decode("utf-8") for c in goldens.read_corpus(os.path.join(goldens.FIXTURES, "corpus.txt"))
             if _valid(c)]
    for _ in range(args.random):
        cases.append("".join(rng.choice(ALPHABET) for _ in range(rng.randint(0, 24))))
    llm = os.path.join(ROOT, "framework", "llm")
    with tempfile.TemporaryDirectory() as tmp:
        src, exe = os.path.join(tmp, "driver.c"), os.path.join(tmp, "driver")
        with open(src, "w") as f:
            f.write(DRIVER)
        sources = [os.path.join(llm, n) for n in ("unicode.c", "unicode_tables.c", "tokenizer.c", "tokenizer_encode.c",
                                                  "tokenizer_decode.c", "tokenizer_bpe.c", "tokenizer_spm.c",
                                                  "tokenizer_pretok.c")]
        subprocess.run(["cc", "-std=c11", "-D_GNU_SOURCE", "-O1", "-I" + llm, "-I" + os.path.join(ROOT, "framework", "include"),
                        src] + sources + ["-o", exe], check=True)
        bad_total = 0
        for name, chain in CHAINS.items():
            inp = "".join(c.encode().hex() + "\n" for c in cases)
            res = subprocess.run([exe, name], input=inp.encode(), capture_output=True, check=True).stdout.decode().split("\n")
            bad = 0
            for i, text in enumerate(cases):
                want = split(text, chain)
                got = [int(x) for x in res[i].split()]
                if want != got:
                    bad += 1
                    if bad <= 3:
                        print("%s: %r\n  regex  %s\n  switchyard %s" % (name, text, want, got))
            print("%-8s %d mismatches in %d texts" % (name, bad, len(cases)))
            bad_total += bad
    print("seed %d" % seed)
    sys.exit(1 if bad_total else 0)


def _valid(b):
    try:
        b.decode("utf-8")
        return True
    except UnicodeDecodeError:
        return False


if __name__ == "__main__":
    main()
