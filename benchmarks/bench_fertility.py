"""``fertility.analyze`` time over the tokenizer's own batched encode time, on the same text (goal: <= 1.25;
everything in detail: <= 1.5, <= 2 for a sentencepiece model).

    python benchmarks/bench_fertility.py [--tokenizer gpt2 --tokenizer o200k_base --tokenizer bnlp-bn-spm]
        [--tokenizer-dir ../shared/tokenizers] [--max-chars 1000000] [--repeat 3] [--detail-every 64]

Both sides get the same documents of the shipped sample in memory (Bangla: both bn files; English: the
wiki file; the first ``--max-chars`` of each). The peer is the
tokenizer's batched ``encode_ids`` (tiktoken's ``encode_ordinary_batch``, HF's ``encode_batch_fast``,
sentencepiece's batched ``encode``) over batches of ``BATCH_CHARS`` characters, as ``analyze`` forms them;
the analysis is the whole ``fertility.analyze`` call on those documents with ``detail_every`` as the CLI's
default (every document encoded for exact totals, one block in ``k`` analysed in detail), and once more with
``detail_every=1`` (everything in detail: the ``exact`` columns). Each is timed best of ``--repeat`` rounds in
process CPU time (all threads), the fairer figure on a shared machine, the three taking turns within a round;
wall-clock ratios are printed too.
"""

from __future__ import annotations

import argparse
import time
from pathlib import Path

from fertility.analysis import BATCH_CHARS, analyze, head_documents
from fertility.cli import DEFAULT_DETAIL_EVERY
from fertility.text import iter_documents
from fertility.tokenizers import load_tokenizer

ROOT = Path(__file__).resolve().parents[1]
SAMPLE = ROOT / "data" / "sample"
FILES = {"bn": [SAMPLE / "bn" / "literature-bnarchive.txt.gz", SAMPLE / "bn" / "poems-pd-banglakosh.txt.gz"],
         "en": [SAMPLE / "en" / "wiki-en-chinapedia.txt.gz"]}
SHARED = ROOT.parent / "shared" / "tokenizers"


def batches(docs: list[str]) -> list[list[str]]:
    out, batch, chars = [], [], 0
    for doc in docs:
        batch.append(doc)
        chars += len(doc)
        if chars >= BATCH_CHARS:
            out.append(batch)
            batch, chars = [], 0
    return out + ([batch] if batch else [])


def best_of(repeat: int, *fns) -> list[tuple[float, float]]:
    """Best wall-clock and best CPU time (all threads of this process) of each of ``fns`` over ``repeat``
    rounds, each round running them in turn: load that comes and goes on a shared machine falls on the encoder
    and the analyses alike, rather than on whichever ran while it lasted."""
    wall: list[list[float]] = [[] for _ in fns]
    cpu: list[list[float]] = [[] for _ in fns]
    for _ in range(repeat):
        for i, fn in enumerate(fns):
            start, start_cpu = time.perf_counter(), time.process_time()
            fn()
            wall[i].append(time.perf_counter() - start)
            cpu[i].append(time.process_time() - start_cpu)
    return [(min(w), min(c)) for w, c in zip(wall, cpu, strict=True)]


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--tokenizer", action="append", default=None)
    parser.add_argument("--tokenizer-dir", default=str(SHARED) if SHARED.is_dir() else None)
    parser.add_argument("--max-chars", type=int, default=1_000_000)
    parser.add_argument("--repeat", type=int, default=3)
    parser.add_argument("--detail-every", type=int, default=DEFAULT_DETAIL_EVERY)
    args = parser.parse_args()
    docs = {lang: head_documents([d.text for p in paths for d in iter_documents(str(p))], args.max_chars)
            for lang, paths in FILES.items()}
    print(f"{'tokenizer':<12} {'lang':<4} {'chars':>8} {'encode cpu':>10} {'analysis cpu':>12} {'ratio':>6}"
          f" {'wall ratio':>10} {'exact cpu':>9} {'exact ratio':>11}   (detail_every={args.detail_every})")
    for spec in args.tokenizer or ["gpt2", "o200k_base", "bnlp-bn-spm"]:
        tok = load_tokenizer(spec, args.tokenizer_dir)
        for lang, ds in docs.items():
            bs = batches(ds)
            encode, run, exact = best_of(
                args.repeat,
                lambda bs=bs, tok=tok: [tok.encode_ids(b) for b in bs],
                lambda ds=ds, tok=tok, lang=lang: analyze([tok], {lang: ds}, detail_every=args.detail_every,
                                                          progress=False),
                lambda ds=ds, tok=tok, lang=lang: analyze([tok], {lang: ds}, detail_every=1, progress=False))
            chars = sum(map(len, ds))
            print(f"{tok.name:<12} {lang:<4} {chars:>8,} {encode[1]:>10.3f} {run[1]:>12.3f} {run[1] / encode[1]:>6.2f}"
                  f" {run[0] / encode[0]:>10.2f} {exact[1]:>9.3f} {exact[1] / encode[1]:>11.2f}")


if __name__ == "__main__":
    main()
