"""datatrove's own steps, one document at a time, on the benchmark's input: what the field's library spends on a
part of the build's work.

    pip install orjson   # datatrove's JsonlReader needs it; the project does not
    python benchmarks/results/2026-12-04-corpus-floor/datatrove_peer.py [--scales 1,4] [--repeat 2]

The input of ``benchmarks/bench_corpus.py`` at each scale (the head of each shared bn and en file, the same
documents as ``fertility.text`` reads them, k copies), written as JSONL beforehand (not timed). Two pipelines, as
datatrove's examples run them (a signature step and a tokenizer step each end a pipeline), each in a fresh
process on one task, CPU seconds of the whole process, fastest of ``--repeat``:

* read -> NFC -> ``MinhashDedupSignature`` (the build's MinHash settings and word split);
* read -> NFC -> ``DocumentTokenizer`` (GPT-2, no shuffling), with raw batched tokenization of the same
  documents beside it (``bench_corpus.raw_tokenization``).

Neither cleans, filters, keys exact duplicates, matches buckets, plans or packs: the build does all of those.
"""

from __future__ import annotations

import argparse
import gzip
import json
import shutil
import sys
import tempfile
from pathlib import Path

ROOT = Path(__file__).resolve().parents[3]
sys.path.insert(0, str(ROOT / "benchmarks"))
sys.path.insert(0, str(ROOT))
sys.path.insert(0, str(Path(__file__).resolve().parent))

import bench_corpus  # noqa: E402
from floor import child_cpu  # noqa: E402

PIPELINE = r'''
import sys, unicodedata
from datatrove.executor import LocalPipelineExecutor
from datatrove.pipeline.base import PipelineStep
from datatrove.pipeline.dedup.minhash import MinhashDedupSignature
from datatrove.pipeline.readers import JsonlReader
from datatrove.pipeline.tokens import DocumentTokenizer
from corpus.engine.steps import _Words
from corpus.quality.dedup import DedupConfig, minhash_config

class NFC(PipelineStep):
    name = "nfc"

    def run(self, data, rank=0, world_size=1):
        for doc in data:
            doc.text = unicodedata.normalize("NFC", doc.text)
            yield doc

tmp, which = sys.argv[1], sys.argv[2]
last = (MinhashDedupSignature(f"{tmp}/sig", config=minhash_config(DedupConfig()), language=_Words())
        if which == "minhash" else
        DocumentTokenizer(f"{tmp}/tok", tokenizer_name_or_path=f"{tmp}/gpt2.json", shuffle_documents=False,
                          save_final_metadata=False))
LocalPipelineExecutor([JsonlReader(f"{tmp}/in"), NFC(), last], tasks=1, workers=1,
                      logging_dir=f"{tmp}/logs").run()
'''


def write_input(files: list[tuple[str, Path]], max_chars: int, tmp: Path) -> None:
    from fertility.text import iter_documents, parse_text_arg
    from fertility.tokenizers import load_tokenizer

    (tmp / "in").mkdir()
    for n, (lang, path) in enumerate(files):
        with gzip.open(tmp / "in" / f"{n:03d}-{lang}.jsonl.gz", "wt", encoding="utf-8") as f:
            for i, doc in enumerate(iter_documents(parse_text_arg(f"{lang}={path}"), max_chars=max_chars)):
                f.write(json.dumps({"text": doc.text, "id": f"{n}-{i}"}) + "\n")
    (tmp / "gpt2.json").write_text(load_tokenizer("gpt2").to_json())


def cpu_of(tmp: Path, which: str) -> float:
    for folder in ("sig", "tok", "logs"):
        shutil.rmtree(tmp / folder, ignore_errors=True)
    return child_cpu([sys.executable, "-c", PIPELINE, str(tmp), which])


def main() -> None:
    p = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    shared = ROOT.parent / "shared" / "data"
    p.add_argument("--data", type=Path, default=shared if shared.is_dir() else ROOT / "data" / "sample")
    p.add_argument("--max-chars", type=int, default=2_000_000)
    p.add_argument("--scales", default="1,4")
    p.add_argument("--repeat", type=int, default=2)
    a = p.parse_args()
    files = bench_corpus._files(a.data)
    for k in (int(x) for x in a.scales.split(",")):
        with tempfile.TemporaryDirectory(prefix="datatrove-peer-") as t:
            tmp = Path(t)
            inputs = bench_corpus.copies(files, k, tmp)
            write_input(inputs, a.max_chars, tmp)
            n_docs, n_bytes, raw = bench_corpus.raw_tokenization("gpt2", inputs, a.max_chars, 500, a.repeat)
            minhash = min(cpu_of(tmp, "minhash") for _ in range(a.repeat))
            tokenize = min(cpu_of(tmp, "tokenize") for _ in range(a.repeat))
            print(f"{k}x: {n_docs:,} documents, {n_bytes:,} UTF-8 bytes; raw batched tokenization {raw:.2f} CPU s")
            print(f"  datatrove read -> NFC -> MinhashDedupSignature: {minhash:6.2f} CPU s")
            print(f"  datatrove read -> NFC -> DocumentTokenizer:     {tokenize:6.2f} CPU s (raw tokenization over "
                  f"it: {raw / tokenize:.2f})")
            print(f"  both: {minhash + tokenize:.2f} CPU s (raw tokenization over both: {raw / (minhash + tokenize):.2f})",
                  flush=True)


if __name__ == "__main__":
    main()
