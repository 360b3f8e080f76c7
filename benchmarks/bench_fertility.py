"""Analysis time over the tokenizer's own batched encode time, on the same text (goal: at most 1.25).

    python benchmarks/bench_fertility.py [--tokenizer o200k_base --tokenizer gpt2] [--max-chars 300000]

Both sides get the same in-memory batches of the shipped sample (Bangla and English): the peer is the
tokenizer's batched ``encode_ids``; the analysis is everything ``analyze`` does per batch (scripts, clusters,
words, encoding with spans, attribution, pre-token pieces). Each is timed best of ``--repeat`` runs. CPU time
counts every thread of the process (the encoders' and the analysis' workers), so it is the fairer figure on a
loaded machine. ``extra`` is the cost of one more tokenizer in a report: ``analyze`` lays each batch out once
for all tokenizers, so that column times the analysis without the layout (``prepare_batch``).
"""

from __future__ import annotations

import argparse
import time
from pathlib import Path

from fertility.analysis import BATCH_CHARS
from fertility.metrics import count_tokens, prepare_batch
from fertility.text import iter_documents
from fertility.tokenizers import load_tokenizer

SAMPLE = Path(__file__).resolve().parents[1] / "data" / "sample"
FILES = {"bn": SAMPLE / "bn" / "literature-bnarchive.txt.gz", "en": SAMPLE / "en" / "wiki-en-chinapedia.txt.gz"}


def batches(path: Path, max_chars: int) -> list[list[str]]:
    out, batch, chars = [], [], 0
    for doc in iter_documents(str(path), max_chars=max_chars):
        batch.append(doc.text)
        chars += len(doc.text)
        if chars >= BATCH_CHARS:
            out.append(batch)
            batch, chars = [], 0
    return out + ([batch] if batch else [])


def best_of(repeat: int, fn) -> tuple[float, float]:
    """Best wall-clock and best CPU time (all threads of this process) over ``repeat`` runs."""
    wall, cpu = [], []
    for _ in range(repeat):
        start, start_cpu = time.perf_counter(), time.process_time()
        fn()
        wall.append(time.perf_counter() - start)
        cpu.append(time.process_time() - start_cpu)
    return min(wall), min(cpu)


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--tokenizer", action="append", default=None)
    parser.add_argument("--tokenizer-dir", default=None)
    parser.add_argument("--max-chars", type=int, default=300_000)
    parser.add_argument("--repeat", type=int, default=3)
    args = parser.parse_args()
    data = {lang: batches(path, args.max_chars) for lang, path in FILES.items()}
    print(f"{'tokenizer':<14} {'lang':<4} {'chars':>8} {'encode s':>9} {'analysis s':>10} {'ratio':>6}"
          f" {'encode cpu':>10} {'analysis cpu':>12} {'cpu ratio':>9} {'extra cpu ratio':>15}")
    for spec in args.tokenizer or ["o200k_base", "gpt2"]:
        tok = load_tokenizer(spec, args.tokenizer_dir)
        for lang, bs in data.items():
            encode = best_of(args.repeat, lambda bs=bs, tok=tok: [tok.encode_ids(b) for b in bs])
            analysis = best_of(args.repeat, lambda bs=bs, tok=tok: [count_tokens(tok, prepare_batch(b)) for b in bs])
            prepared = [prepare_batch(b) for b in bs]
            extra = best_of(args.repeat, lambda ps=prepared, tok=tok: [count_tokens(tok, p) for p in ps])
            chars = sum(len(d) for b in bs for d in b)
            print(f"{tok.name:<14} {lang:<4} {chars:>8,} {encode[0]:>9.3f} {analysis[0]:>10.3f} "
                  f"{analysis[0] / encode[0]:>6.2f} {encode[1]:>10.3f} {analysis[1]:>12.3f} {analysis[1] / encode[1]:>9.2f}"
                  f" {extra[1] / encode[1]:>15.2f}")


if __name__ == "__main__":
    main()
