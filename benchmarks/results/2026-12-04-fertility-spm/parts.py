"""Where exact mode's time goes: process CPU seconds of each part of ``fertility.analyze(detail_every=1)`` on
the benchmark's text, beside the encoder's own batched call (best of 3 rounds, each part's own best).

    python benchmarks/results/2026-12-04-fertility-spm/parts.py [--tokenizer gpt2 ...] [--tokenizer-dir DIR]

(../2026-12-03-fertility-exact/parts.py, but for a tokenizer whose pieces the analyzer takes from its words
(sentencepiece, from 2026-12-04), whose ``pretokenize`` is then 0.)

Parts: ``encode_spans`` (the tokenizer's tokens with byte spans), ``pretokenize`` (the pre-tokenizer's pieces),
``prepare`` (scripts, clusters, words of a batch), ``attribute`` (the rest of ``count_tokens``: tokens,
boundaries and pieces attributed to scripts), ``other`` (the rest of ``analyze``). Code that found the pieces on
a second thread (before 2026-12-03) is made to find them on the calling thread, so that each part's CPU time is
its own.
"""

from __future__ import annotations

import argparse
import sys
import time
from collections import defaultdict
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parents[2]))  # benchmarks/ of the checkout it lies in
from bench_fertility import FILES, SHARED, batches  # noqa: E402

import fertility.analysis as analysis  # noqa: E402
import fertility.scoring.metrics as metrics  # noqa: E402
from fertility.analysis import analyze, head_documents  # noqa: E402
from fertility.text import iter_documents  # noqa: E402
from fertility.tokenizers import load_tokenizer  # noqa: E402


def timed(spent: dict[str, float], key: str, fn):
    def run(*args, **kwargs):
        start = time.process_time()
        try:
            return fn(*args, **kwargs)
        finally:
            spent[key] += time.process_time() - start
    return run


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--tokenizer", action="append", default=None)
    parser.add_argument("--tokenizer-dir", default=str(SHARED))
    args = parser.parse_args()
    if hasattr(metrics, "THREAD_MIN_BYTES"):
        metrics.THREAD_MIN_BYTES = 1 << 62
    print(f"{'tokenizer':<12} {'lang':<4} {'encode':>7} {'analyze':>8} {'encode_spans':>12} {'pretokenize':>11} "
          f"{'prepare':>8} {'attribute':>9} {'other':>6}")
    for spec in args.tokenizer or ["gpt2", "o200k_base", "bnlp-bn-spm"]:
        for lang, paths in FILES.items():
            tok = load_tokenizer(spec, args.tokenizer_dir)
            docs = head_documents([d.text for p in paths for d in iter_documents(str(p))], 1_000_000)
            bs = batches(docs)
            spent: dict[str, float] = defaultdict(float)
            tok.encode_spans = timed(spent, "encode_spans", tok.encode_spans)
            tok.pretokenize_batch = timed(spent, "pretokenize", tok.pretokenize_batch)
            real = analysis.prepare_batch, analysis.count_tokens
            analysis.prepare_batch = timed(spent, "prepare", real[0])
            analysis.count_tokens = timed(spent, "count", real[1])
            best: dict[str, float] = {}
            try:
                for _ in range(3):
                    start = time.process_time()
                    [tok.encode_ids(b) for b in bs]
                    encode = time.process_time() - start
                    spent.clear()
                    start = time.process_time()
                    analyze([tok], {lang: docs}, detail_every=1, progress=False)
                    parts = {"encode": encode, "analyze": time.process_time() - start, **spent}
                    parts["attribute"] = parts["count"] - parts["encode_spans"] - parts.setdefault("pretokenize", 0.0)
                    parts["other"] = parts["analyze"] - parts["count"] - parts["prepare"]
                    best = {k: min(v, best.get(k, v)) for k, v in parts.items()}
            finally:
                analysis.prepare_batch, analysis.count_tokens = real
            print(f"{tok.name:<12} {lang:<4} {best['encode']:>7.3f} {best['analyze']:>8.3f} {best['encode_spans']:>12.3f} "
                  f"{best['pretokenize']:>11.3f} {best['prepare']:>8.3f} {best['attribute']:>9.3f} {best['other']:>6.3f}")


if __name__ == "__main__":
    main()
