#!/usr/bin/env python3
"""Sanity check of the reference forward pass on a real model: greedy-decode a
chat answer and print it (it should read as coherent text).

    python3 sanity.py MODEL.gguf [--prompt "..."] [-n 20] [--llama-cpp]

--llama-cpp tokenizes with llama-cpp-python (vocab_only) when it is
installed; otherwise the approximate tokenizer in vocab.py is used.
"""

from __future__ import annotations

import argparse
import sys
import time

import numpy as np

import forward as ref
from vocab import Vocab


def chat_prompt(arch: str, user: str) -> str:
    if arch == "gemma3":
        return "<start_of_turn>user\n%s<end_of_turn>\n<start_of_turn>model\n" % user
    # ChatML (SmolLM2, Qwen2).
    return ("<|im_start|>system\nYou are a helpful AI assistant named SmolLM, trained by "
            "Hugging Face<|im_end|>\n<|im_start|>user\n%s<|im_end|>\n<|im_start|>assistant\n" % user)


def main(argv=None) -> int:
    ap = argparse.ArgumentParser()
    ap.add_argument("model")
    ap.add_argument("--prompt", default="What is the capital of France?")
    ap.add_argument("-n", type=int, default=20)
    ap.add_argument("--llama-cpp", action="store_true")
    ap.add_argument("--raw", action="store_true", help="no chat template")
    args = ap.parse_args(argv)

    m = ref.load(args.model)
    voc = Vocab(args.model)
    text = args.prompt if args.raw else chat_prompt(m.hp.arch, args.prompt)
    if args.llama_cpp:
        import llama_cpp
        llm = llama_cpp.Llama(model_path=args.model, vocab_only=True, verbose=False)
        ids = llm.tokenize(text.encode(), add_bos=voc.add_bos, special=True)
    else:
        ids = voc.encode(text)
    stop = {voc.eos}
    for s in ("<|im_end|>", "<end_of_turn>", "<|endoftext|>"):
        if s in voc.id_of:
            stop.add(voc.id_of[s])
    t0 = time.time()
    m.preload()
    t1 = time.time()
    out = ref.greedy(args.model, ids, args.n, stop=sorted(stop))
    t2 = time.time()
    print("prompt ids (%d): %s" % (len(ids), ids))
    print("generated ids: %s" % out)
    print("load %.1fs, generate %.1fs" % (t1 - t0, t2 - t1))
    print("---- answer ----")
    print(voc.decode(out))
    return 0


if __name__ == "__main__":
    sys.exit(main())
