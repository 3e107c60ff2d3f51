"""Small tokenizer helpers for the oracle's sanity checks (not golden data).

Only used to turn a chat prompt into ids and ids back into text when checking
that the reference forward pass produces coherent text.  The BPE pre-splitting
is an approximation of the real pre-tokenizer regexes, so ids may differ from
the model's official tokenizer on unusual text; the golden tokenizer files of
issue 3 must come from a trusted tokenizer, not from this module.
"""

from __future__ import annotations

import re
from typing import Dict, List, Optional

import gguf


def _arr(reader, key):
    f = reader.fields.get(key)
    if f is None:
        return None
    return f.contents()


def bytes_to_unicode() -> Dict[int, str]:
    """GPT-2 byte-level alphabet: printable Latin-1 bytes stand for
    themselves, the other bytes get code points 256, 257, ... in order."""
    keep = list(range(ord("!"), ord("~") + 1)) + list(range(0xA1, 0xAC + 1)) + \
        list(range(0xAE, 0xFF + 1))
    table = {}
    extra = 0
    for b in range(256):
        if b in keep:
            table[b] = chr(b)
        else:
            table[b] = chr(256 + extra)
            extra += 1
    return table


class Vocab:
    def __init__(self, path: str):
        r = gguf.GGUFReader(path, "r")
        self.model = _arr(r, "tokenizer.ggml.model")
        self.tokens: List[str] = _arr(r, "tokenizer.ggml.tokens")
        self.types = _arr(r, "tokenizer.ggml.token_type") or [1] * len(self.tokens)
        self.scores = _arr(r, "tokenizer.ggml.scores")
        merges = _arr(r, "tokenizer.ggml.merges") or []
        self.merge_rank = {tuple(m.split(" ", 1)): i for i, m in enumerate(merges)}
        self.bos = _arr(r, "tokenizer.ggml.bos_token_id")
        self.eos = _arr(r, "tokenizer.ggml.eos_token_id")
        self.add_bos = bool(_arr(r, "tokenizer.ggml.add_bos_token"))
        self.id_of = {t: i for i, t in enumerate(self.tokens)}
        # token_type 3 = control, 4 = user defined: matched as whole strings.
        self.specials = sorted([t for t, ty in zip(self.tokens, self.types) if ty in (3, 4) and t],
                               key=len, reverse=True)
        self.b2u = bytes_to_unicode()
        self.u2b = {v: k for k, v in self.b2u.items()}

    # ---- encoding ----
    def _split_specials(self, text: str, specials: List[str]):
        if not specials:
            return [(False, text)]
        pat = "(" + "|".join(re.escape(s) for s in specials) + ")"
        out = []
        for part in re.split(pat, text):
            if part == "":
                continue
            out.append((part in self.id_of and part in specials, part))
        return out

    def _bpe_word(self, word: str) -> List[int]:
        syms = [self.b2u[b] for b in word.encode("utf-8")]
        while len(syms) > 1:
            best, best_i = None, -1
            for i in range(len(syms) - 1):
                r = self.merge_rank.get((syms[i], syms[i + 1]))
                if r is not None and (best is None or r < best):
                    best, best_i = r, i
            if best is None:
                break
            syms[best_i:best_i + 2] = [syms[best_i] + syms[best_i + 1]]
        return [self.id_of[s] for s in syms]

    def _spm(self, text: str) -> List[int]:
        s = text.replace(" ", "\u2581")
        syms = list(s)
        while len(syms) > 1:
            best, best_i = None, -1
            for i in range(len(syms) - 1):
                j = self.id_of.get(syms[i] + syms[i + 1])
                if j is not None and (best is None or self.scores[j] > best):
                    best, best_i = self.scores[j], i
            if best is None:
                break
            syms[best_i:best_i + 2] = [syms[best_i] + syms[best_i + 1]]
        ids = []
        for sym in syms:
            j = self.id_of.get(sym)
            if j is not None:
                ids.append(j)
            else:  # byte fallback
                ids.extend(self.id_of["<0x%02X>" % b] for b in sym.encode("utf-8"))
        return ids

    def encode(self, text: str, add_bos: Optional[bool] = None) -> List[int]:
        ids: List[int] = []
        if (self.add_bos if add_bos is None else add_bos) and self.bos is not None:
            ids.append(self.bos)
        for special, part in self._split_specials(text, self.specials):
            if special:
                ids.append(self.id_of[part])
            elif self.model == "gpt2":
                # Approximate pre-tokenizer: words with their leading space,
                # single digits, punctuation runs, newline runs.
                for w in re.findall(r" ?[A-Za-z\u00c0-\uffff]+| ?\d| ?[^\sA-Za-z\d\u00c0-\uffff]+|\s+(?!\S)|\s+",
                                    part):
                    ids.extend(self._bpe_word(w))
            else:
                ids.extend(self._spm(part))
        return ids

    # ---- decoding ----
    def decode(self, ids: List[int]) -> str:
        out = bytearray()
        for i in ids:
            t = self.tokens[i]
            if self.types[i] == 3:  # control tokens
                out += t.encode("utf-8")
            elif self.model == "gpt2":
                out += bytes(self.u2b.get(c, 0x3F) for c in t)
            else:
                m = re.fullmatch(r"<0x([0-9A-Fa-f]{2})>", t)
                if m:
                    out.append(int(m.group(1), 16))
                else:
                    out += t.replace("\u2581", " ").encode("utf-8")
        return out.decode("utf-8", errors="replace")
