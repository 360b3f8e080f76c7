"""The ingest steps hand their batched passes at most ``BATCH_CHARS`` characters plus one document at a time
(whatever the documents' sizes: a long document comes as many pieces of up to 2 MiB), and the batches change
nothing but memory: the same documents, files and counters as one batch of everything."""

from __future__ import annotations

import gzip
import random
from pathlib import Path

import numpy as np
import pytest
from datatrove.data import Document

import corpus.engine.steps as steps
from corpus.quality.dedup import DedupConfig
from corpus.quality.filters import CleanConfig

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


def _docs(texts: list[str]) -> list[Document]:
    # two sources, in runs: a batch of the cleaning step never mixes them
    return [Document(text=t, id=str(i), metadata={"source": int(i >= 25 and i < 45), "uid": i})
            for i, t in enumerate(texts)]


def _check(batches: list[list[str]], total: int) -> None:
    assert sum(len(b) for b in batches) == total
    for texts in batches:
        assert 0 < len(texts) <= steps.BATCH_DOCS
        assert sum(len(t) for t in texts[:-1]) < steps.BATCH_CHARS, [len(t) for t in texts]
    assert len(batches) > 1


@pytest.mark.parametrize("docs_cap", [256, 3])
def test_batches_bounded_by_count_and_characters(docs_cap):
    rng = random.Random(3)
    sizes = [rng.choice((0, 10, 900, 2_500, 5_999, 6_000, 14_000)) for _ in range(200)]
    docs = [Document(text="x" * n, id=str(i), metadata={"source": i // 50}) for i, n in enumerate(sizes)]
    for by_source in (False, True):
        batches = list(steps._batches(iter(docs), docs_cap, CAP, by_source=by_source))
        assert [d.id for b in batches for d in b] == [d.id for d in docs]
        for b in batches:
            assert len(b) <= docs_cap
            assert sum(len(d.text) for d in b[:-1]) < CAP
            if by_source:
                assert len({d.metadata["source"] for d in b}) == 1
        # a batch ends early only where a limit (or a change of source) ends it
        for b, after in zip(batches, batches[1:], strict=False):
            full = len(b) == docs_cap or sum(len(d.text) for d in b) >= CAP
            assert full or (by_source and b[0].metadata["source"] != after[0].metadata["source"])


def _clean(texts: list[str], tmp_path: Path, monkeypatch, cap: int) -> tuple[list, list[list[str]], str]:
    monkeypatch.setattr(steps, "BATCH_CHARS", cap, raising=False)
    seen: list[list[str]] = []

    def spy(batch, *args, **kwargs):
        seen.append(list(batch))
        return _CLEAN(batch, *args, **kwargs)

    monkeypatch.setattr(steps, "clean_and_filter_batch", spy)
    work = tmp_path / f"clean-{cap}"
    step = steps.CleanAndFilter(["bn", "bn"], CleanConfig(), DedupConfig().ngram, str(work))
    out = [(d.id, d.text, d.metadata["key"], d.metadata["grams"].tobytes()) for d in step.run(iter(_docs(texts)))]
    return out, seen, (work / "counters" / "00000.clean.json").read_text()


def test_cleaning_batches_bounded(sample_dir, tmp_path, monkeypatch):
    texts = _texts(sample_dir)
    out, seen, counters = _clean(texts, tmp_path, monkeypatch, CAP)
    _check(seen, len(texts))
    assert 0 < len(out) < len(texts)  # some dropped, most kept
    whole, _, whole_counters = _clean(texts, tmp_path, monkeypatch, 10**9)
    assert out == whole
    assert counters == whole_counters


class _Tokenizer:
    """One id per code point (and its length for a comparison tokenizer): every batch it is given, recorded."""

    def __init__(self, seen: list[list[str]] | None):
        self.seen = seen

    def encode_ids(self, texts: list[str]) -> list[list[int]]:
        if self.seen is not None:
            self.seen.append(list(texts))
        return [[ord(c) for c in t] for t in texts]


def _tokenize(texts: list[str], tmp_path: Path, monkeypatch, cap: int) -> tuple[list[list[str]], bytes, bytes]:
    import fertility.tokenizers

    monkeypatch.setattr(steps, "BATCH_CHARS", cap, raising=False)
    seen: list[list[str]] = []
    loaded = iter([_Tokenizer(seen), _Tokenizer(None)])
    monkeypatch.setattr(fertility.tokenizers, "load_tokenizer", lambda spec, folder=None: next(loaded))
    work = tmp_path / f"tokenize-{cap}"
    docs = _docs(texts)
    for i, d in enumerate(docs):
        d.metadata["key"] = i.to_bytes(16, "little")
    step = steps.TokenizeAndStore("ours", None, ["compare"], str(work))
    assert [d.id for d in step.run(iter(docs))] == [d.id for d in _docs(texts)]
    return seen, (work / "docs" / "00000.tokens").read_bytes(), (work / "docs" / "00000.meta.npz").read_bytes()


def test_tokenizer_batches_bounded(sample_dir, tmp_path, monkeypatch):
    texts = _texts(sample_dir)
    seen, tokens, meta = _tokenize(texts, tmp_path, monkeypatch, CAP)
    _check(seen, len(texts))
    _, whole_tokens, whole_meta = _tokenize(texts, tmp_path, monkeypatch, 10**9)
    assert (tokens, meta) == (whole_tokens, whole_meta)


def _signatures(texts: list[str], tmp_path: Path, monkeypatch, cap: int) -> tuple[list[list[str]], dict]:
    monkeypatch.setattr(steps, "BATCH_CHARS", cap, raising=False)
    seen: list[list[str]] = []
    by_grams: dict[int, str] = {}

    def spy(self, grams):
        seen.append([by_grams[id(g)] for g in grams])
        return _SIGNATURES(self, grams)

    monkeypatch.setattr(steps.Signatures, "signatures", spy)
    rng = np.random.default_rng(5)
    docs, grams = [], []  # grams: every array held to the end, so that no id() is reused
    for i, t in enumerate(texts):
        g = rng.integers(0, 2**64, size=len(t) // 6, dtype=np.uint64)  # about a shingle per word
        grams.append(g)
        by_grams[id(g)] = t
        docs.append(Document(text=t, id=str(i), metadata={"grams": g}))
    out = tmp_path / f"signatures-{cap}"
    steps.Signatures(str(out), DedupConfig()).run(iter(docs))
    return seen, {p.relative_to(out): p.read_bytes() for p in sorted(out.rglob("*.sig"))}


def test_signature_batches_bounded(sample_dir, tmp_path, monkeypatch):
    texts = _texts(sample_dir)
    seen, files = _signatures(texts, tmp_path, monkeypatch, CAP)
    _check(seen, len(texts))
    _, whole = _signatures(texts, tmp_path, monkeypatch, 10**9)
    assert files and files == whole
