"""Before/after of this change's three array rewrites, on the benchmark's text (process CPU milliseconds for
all five batches of 1 M characters, best of 9): ``prepare_batch``'s byte -> character map, the sentencepiece
alignment (``Alignment.spans`` over every text of the batch; the old one read from commit c4f02c5) and
``SentencePieceTokenizer.encode_spans``'s per-text sums. Each pair is checked equal first.

    python benchmarks/results/2026-12-03-fertility-exact-2/micro.py
"""

from __future__ import annotations

import importlib.util
import subprocess
import sys
import tempfile
import time
from pathlib import Path

import numpy as np

ROOT = Path(__file__).resolve().parents[3]
sys.path.insert(0, str(ROOT / "benchmarks"))
from bench_fertility import FILES, SHARED, batches  # noqa: E402

from fertility.analysis import head_documents  # noqa: E402
from fertility.scripts import scripted_batch  # noqa: E402
from fertility.text import iter_documents  # noqa: E402
from fertility.tokenizers import load_tokenizer  # noqa: E402
from fertility.tokenizers.base import flatten  # noqa: E402


def old_alignment_module():
    source = subprocess.run(["git", "show", "c4f02c5:fertility/tokenizers/spm_alignment.py"], cwd=ROOT,
                            capture_output=True, text=True, check=True).stdout
    path = Path(tempfile.mkdtemp()) / "old_spm_alignment.py"
    path.write_text(source)
    spec = importlib.util.spec_from_file_location("old_spm_alignment", path)
    module = importlib.util.module_from_spec(spec)
    sys.modules["old_spm_alignment"] = module
    spec.loader.exec_module(module)
    return module


def best(fn, rounds: int = 9) -> float:
    out = float("inf")
    for _ in range(rounds):
        start = time.process_time()
        fn()
        out = min(out, time.process_time() - start)
    return round(out * 1000, 1)


def byte_char_old(sb):
    out = np.empty(int(sb.char_to_byte[-1]) + 1, dtype=np.int32)
    out[:-1] = np.repeat(np.arange(sb.cps.size, dtype=np.int32), sb.char_bytes)
    out[-1] = sb.cps.size
    return out


def byte_char_new(sb):
    out = np.zeros(int(sb.char_to_byte[-1]) + 1, dtype=np.int32)
    out[sb.char_to_byte[1:-1]] = 1
    np.cumsum(out, out=out)
    out[-1] = sb.cps.size
    return out


def sums_old(tok, texts, ids, counts):
    lengths = tok._piece_bytes[ids]
    totals = np.bincount(np.repeat(np.arange(len(texts)), counts), weights=lengths, minlength=len(texts))
    unk = tok._unk_table[ids]
    has_unk = np.bincount(np.repeat(np.arange(len(texts)), counts), weights=unk, minlength=len(texts)) > 0
    tok._flags(ids)
    return totals, has_unk


def sums_new(tok, texts, ids, counts):
    lengths = tok._piece_bytes[ids]
    ends = np.cumsum(lengths)  # the encode_spans running sum, there before and after
    first = np.cumsum(counts) - counts
    nonempty = counts > 0
    base = np.zeros(counts.size, dtype=np.int64)
    base[nonempty] = ends[first[nonempty]] - lengths[first[nonempty]]
    totals = np.zeros(counts.size, dtype=np.int64)
    totals[nonempty] = ends[(first + counts - 1)[nonempty]] - base[nonempty]
    unk, _ = tok._flags(ids)
    has_unk = np.zeros(counts.size, dtype=bool)
    has_unk[np.searchsorted(np.cumsum(counts), np.flatnonzero(unk), "right")] = True
    return totals, has_unk


def main() -> None:
    tok = load_tokenizer("bnlp-bn-spm", SHARED)
    old = old_alignment_module().Alignment(tok._sp, Path(tok.path).read_bytes())
    new = tok._alignment
    for lang, paths in FILES.items():
        docs = head_documents([d.text for p in paths for d in iter_documents(str(p))], 1_000_000)
        bs = batches(docs)
        sbs = [scripted_batch(b) for b in bs]
        enc = [flatten(tok._sp.encode(b)) for b in bs]
        for sb, b, (ids, counts) in zip(sbs, bs, enc, strict=True):
            assert np.array_equal(byte_char_old(sb), byte_char_new(sb))
            assert all(np.array_equal(x, y) for x, y in zip(old.spans(b, ids, counts), new.spans(b, ids, counts),
                                                            strict=True))
            assert all(np.array_equal(x, y) for x, y in zip(sums_old(tok, b, ids, counts),
                                                            sums_new(tok, b, ids, counts), strict=True))
        print(lang, {
            "byte_char": (best(lambda sbs=sbs: [byte_char_old(s) for s in sbs]),
                          best(lambda sbs=sbs: [byte_char_new(s) for s in sbs])),
            "alignment": (best(lambda a=old, bs=bs, enc=enc: [a.spans(b, i, c) for b, (i, c) in zip(bs, enc, strict=True)]),
                          best(lambda a=new, bs=bs, enc=enc: [a.spans(b, i, c) for b, (i, c) in zip(bs, enc, strict=True)])),
            "spm sums": (best(lambda bs=bs, enc=enc: [sums_old(tok, b, i, c) for b, (i, c) in zip(bs, enc, strict=True)]),
                         best(lambda bs=bs, enc=enc: [sums_new(tok, b, i, c) for b, (i, c) in zip(bs, enc, strict=True)])),
        }, "(old, new) ms")


if __name__ == "__main__":
    main()
