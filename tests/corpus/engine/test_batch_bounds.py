"""The ingest's documents travel between its steps in batches of one source, of at most ``BATCH_DOCS``
documents and ``BATCH_CHARS`` characters plus one document (whatever the documents' sizes: a long document
comes as many pieces of up to 2 MiB), and the batches change nothing but memory: the same documents, files and
counters as one batch of everything."""

from __future__ import annotations

import gzip
import random
from pathlib import Path

import pytest

import corpus.engine.steps as steps
from corpus.quality.dedup import DedupConfig
from corpus.quality.filters import CleanConfig
from corpus.read.sources import RawDocument

CAP = 6_000  # characters: small, so that a few short documents already fill a batch
# the functions the spies wrap, taken once: a second run in one test must not wrap the first run's spy
_CLEAN = steps.clean_and_filter_batch
_SIGNATURES = steps.Signatures.signatures


def _texts(sample_dir: Path) -> list[str]:
    """Documents of the sample's Bangla: mostly a few hundred characters, some over ``CAP`` alone, a few
    empty of words (dropped), in a fixed order."""
    with gzip.open(sample_dir / "bn" / "poems-pd-banglakosh.txt.gz", "rt", encoding="utf-8") as f:
        lines = [line.strip() for line in f if line.strip()]
    rng = random.Random(7)
    texts, at = [], 0
    for i in range(60):
        n = 40 if i % 11 == 3 else rng.choice((1, 2, 3, 5, 8))
        texts.append(" ".join(lines[at:at + n]) if i % 17 != 5 else "... !!! ...")
        at = (at + n) % max(1, len(lines) - 50)
    assert max(len(t) for t in texts) > CAP
    return texts


def _documents(texts: list[str]) -> list[RawDocument]:
    # two sources, in runs: a batch never mixes them
    return [RawDocument(int(25 <= i < 45), i, t, len(t.encode())) for i, t in enumerate(texts)]


def _check(batches: list[list[str]], total: int | None = None) -> None:
    if total is not None:
        assert sum(len(b) for b in batches) == total
    for texts in batches:
        assert 0 < len(texts) <= steps.BATCH_DOCS
        assert sum(len(t) for t in texts[:-1]) < steps.BATCH_CHARS, [len(t) for t in texts]
    assert len(batches) > 1


@pytest.mark.parametrize("docs_cap", [256, 3])
def test_batches_bounded_by_count_characters_and_source(docs_cap):
    rng = random.Random(3)
    sizes = [rng.choice((0, 10, 900, 2_500, 5_999, 6_000, 14_000)) for _ in range(200)]
    docs = [RawDocument(i // 50, i, "x" * n, n) for i, n in enumerate(sizes)]
    batches = list(steps._batches(iter(docs), docs_cap, CAP))
    assert [d.uid for b in batches for d in b] == [d.uid for d in docs]
    for b in batches:
        assert len(b) <= docs_cap
        assert sum(len(d.text) for d in b[:-1]) < CAP
        assert len({d.source for d in b}) == 1
    # a batch ends early only where a limit or a change of source ends it
    for b, after in zip(batches, batches[1:], strict=False):
        full = len(b) == docs_cap or sum(len(d.text) for d in b) >= CAP
        assert full or b[0].source != after[0].source


class _Tokenizer:
    """One id per code point (and its length for a comparison tokenizer): every batch it is given, recorded."""

    def __init__(self, seen: list[list[str]] | None):
        self.seen = seen

    def encode_ids(self, texts: list[str]) -> list[list[int]]:
        if self.seen is not None:
            self.seen.append(list(texts))
        return [[ord(c) for c in t] for t in texts]


def _ingest(texts: list[str], tmp_path: Path, monkeypatch, cap: int) -> tuple[dict[str, list], dict[str, bytes]]:
    """Clean, tokenize and sign ``texts`` in batches formed as the reader forms them, capped at ``cap``
    characters: every batch each pass was given, and every file the steps wrote."""
    import fertility.tokenizers

    seen: dict[str, list] = {"clean": [], "tokenize": [], "signatures": []}

    def clean_spy(batch, *args, **kwargs):
        seen["clean"].append(list(batch))
        return _CLEAN(batch, *args, **kwargs)

    def signature_spy(self, grams):
        seen["signatures"].append(len(grams))
        return _SIGNATURES(self, grams)

    monkeypatch.setattr(steps, "clean_and_filter_batch", clean_spy)
    monkeypatch.setattr(steps.Signatures, "signatures", signature_spy)
    loaded = iter([_Tokenizer(seen["tokenize"]), _Tokenizer(None)])
    monkeypatch.setattr(fertility.tokenizers, "load_tokenizer", lambda spec, folder=None: next(loaded))
    work = tmp_path / f"ingest-{cap}"
    batches = (steps.Docs(b[0].source, [d.uid for d in b], [d.text for d in b])
               for b in steps._batches(iter(_documents(texts)), steps.BATCH_DOCS, cap))
    cleaned = steps.CleanAndFilter(["bn", "bn"], CleanConfig(), DedupConfig().ngram, str(work)).run(batches)
    tokenized = steps.TokenizeAndStore("ours", None, ["compare"], str(work)).run(cleaned)
    steps.Signatures(str(work / "signatures"), DedupConfig()).run(tokenized)
    return seen, {str(p.relative_to(work)): p.read_bytes() for p in sorted(work.rglob("*"))
                  if p.is_file() and not p.name.endswith(".tokenize.json")}


def test_every_pass_gets_bounded_batches_and_the_batches_change_nothing(sample_dir, tmp_path, monkeypatch):
    texts = _texts(sample_dir)
    monkeypatch.setattr(steps, "BATCH_CHARS", CAP)
    seen, files = _ingest(texts, tmp_path, monkeypatch, CAP)
    _check(seen["clean"], len(texts))
    _check(seen["tokenize"])
    kept = sum(len(b) for b in seen["tokenize"])
    assert 0 < kept < len(texts)  # some dropped, most kept
    assert sum(seen["signatures"]) == kept and len(seen["signatures"]) == len(seen["tokenize"])
    assert {"counters/00000.clean.json", "docs/00000.tokens", "docs/00000.meta.npz"} <= set(files)
    assert sum(1 for f in files if f.endswith(".sig")) == steps.minhash_config(DedupConfig()).num_buckets
    _, whole = _ingest(texts, tmp_path, monkeypatch, 10**9)
    assert files == whole
