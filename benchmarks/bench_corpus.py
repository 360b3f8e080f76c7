"""Build throughput over raw batched tokenization of the same text (goal: at least 0.8).

    python benchmarks/bench_corpus.py [--tokenizer gpt2] [--max-chars 1000000] [--workers N]

The peer is the tokenizer's batched ``encode_ids`` over the sample's documents held in memory, on the same
cores (its own threads). The build is the whole ``corpus build``: reading the gzip files, cleaning, quality
filters, exact and MinHash dedup, tokenization in ``--workers`` processes, the plan, the validation hold-out,
shard writing, manifest and report. Both are timed over the same UTF-8 bytes; the ratio is
build bytes/s over tokenization bytes/s.
"""

from __future__ import annotations

import argparse
import os
import tempfile
import time
from pathlib import Path

from corpus.build import BuildConfig, build
from corpus.ingest import IngestConfig
from fertility.text import iter_documents, parse_text_arg
from fertility.tokenizers import load_tokenizer

SAMPLE = Path(__file__).resolve().parents[1] / "data" / "sample"
SOURCES = [f"bn={SAMPLE}/bn/literature-bnarchive.txt.gz", f"bn={SAMPLE}/bn/poems-pd-banglakosh.txt.gz",
           f"en={SAMPLE}/en/wiki-en-chinapedia.txt.gz"]


def raw_tokenization(tokenizer: str, max_chars: int, batch_docs: int) -> tuple[int, float]:
    """UTF-8 bytes of the sample and seconds to tokenize them in batches of ``batch_docs`` documents."""
    tok = load_tokenizer(tokenizer)
    texts = [d.text for s in SOURCES for d in iter_documents(parse_text_arg(s), max_chars=max_chars)]
    n_bytes = sum(len(t.encode()) for t in texts)
    start = time.perf_counter()
    for i in range(0, len(texts), batch_docs):
        tok.encode_ids(texts[i:i + batch_docs])
    return n_bytes, time.perf_counter() - start


def full_build(tokenizer: str, max_chars: int, workers: int, unit_docs: int) -> float:
    """Seconds for a complete build of the same sources (into a temporary directory)."""
    config = BuildConfig(sources=SOURCES, tokens=10**6, mix={"bn": 0.7, "en": 0.3}, val_tokens=20_000,
                         ingest=IngestConfig(tokenizer=tokenizer, unit_docs=unit_docs, max_chars=max_chars))
    with tempfile.TemporaryDirectory(prefix="bench-corpus-") as out:
        start = time.perf_counter()
        build(config, out, workers=workers, progress=False)
        return time.perf_counter() - start


def main() -> None:
    p = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    p.add_argument("--tokenizer", default="gpt2")
    p.add_argument("--max-chars", type=int, default=1_000_000, help="per source")
    p.add_argument("--workers", type=int, default=max(1, (os.cpu_count() or 1) - 1), help="as corpus build")
    p.add_argument("--unit-docs", type=int, default=500, help="documents per work unit and per raw batch")
    a = p.parse_args()
    n_bytes, raw_s = raw_tokenization(a.tokenizer, a.max_chars, a.unit_docs)
    build_s = full_build(a.tokenizer, a.max_chars, a.workers, a.unit_docs)
    raw, built = n_bytes / raw_s / 1e6, n_bytes / build_s / 1e6
    print(f"text: {n_bytes:,} UTF-8 bytes of the sample; tokenizer {a.tokenizer}; {a.workers} build workers")
    print(f"raw batched tokenization: {raw_s:7.2f} s  {raw:6.2f} MB/s")
    print(f"corpus build (end to end): {build_s:7.2f} s  {built:6.2f} MB/s")
    print(f"ratio build/raw: {built / raw:.2f}  (goal >= 0.8)")


if __name__ == "__main__":
    main()
