"""The pre-tokenizer's pieces of the benchmark's text: the ``regex`` engine's ``findall`` (what
``fertility.tokenizers.base.regex_pieces`` runs) against ``fertility.tokenizers.pattern_pieces`` (process CPU
seconds, best of 5, the five batches of 1 M characters as ``analyze`` forms them), and how many texts the
arrays leave to the engine.

    python benchmarks/results/2026-12-03-fertility-exact-2/pieces.py
"""

from __future__ import annotations

import sys
import time
from pathlib import Path

import regex

sys.path.insert(0, str(Path(__file__).resolve().parents[2]))  # benchmarks/ of the checkout it lies in
from bench_fertility import FILES, batches  # noqa: E402

import fertility.tokenizers.pattern_pieces as pp  # noqa: E402
from fertility.analysis import head_documents  # noqa: E402
from fertility.text import iter_documents  # noqa: E402
from fertility.tokenizers.hf import GPT2_PATTERN  # noqa: E402
from fertility.tokenizers.tiktoken import O200K_PATTERN  # noqa: E402


class Counting:
    def __init__(self, pattern: regex.Pattern) -> None:
        self.pattern, self.asked = pattern, 0

    def findall(self, text: str) -> list[str]:
        self.asked += 1
        return self.pattern.findall(text)


def best(fn, rounds: int = 5) -> float:
    out = float("inf")
    for _ in range(rounds):
        start = time.process_time()
        fn()
        out = min(out, time.process_time() - start)
    return out


def main() -> None:
    print(f"{'pattern':<8} {'lang':<4} {'texts':>6} {'findall':>8} {'arrays':>7} {'left to the engine':>18}")
    for lang, paths in FILES.items():
        docs = head_documents([d.text for p in paths for d in iter_documents(str(p))], 1_000_000)
        bs = batches(docs)
        for name, finder, source in (("gpt2", pp.gpt2_pieces, GPT2_PATTERN), ("o200k", pp.o200k_pieces, O200K_PATTERN)):
            pattern = regex.compile(source)
            counting = Counting(pattern)
            [finder(b, counting) for b in bs]  # fills the class tables; counts the texts left to the engine
            engine = best(lambda p=pattern, bs=bs: [[p.findall(t) for t in b] for b in bs])
            arrays = best(lambda f=finder, p=pattern, bs=bs: [f(b, p) for b in bs])
            print(f"{name:<8} {lang:<4} {len(docs):>6} {engine:>8.3f} {arrays:>7.3f} {counting.asked:>18}")


if __name__ == "__main__":
    main()
