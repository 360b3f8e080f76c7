"""corpus.dedup: exact keys, MinHash LSH near-duplicates, and a state that rebuilds exactly."""

from __future__ import annotations

import gzip

import numpy as np

from corpus.dedup import DedupConfig, Deduplicator, exact_key, shingle_hashes, signature


def _paragraphs(path, n):
    with gzip.open(path, "rt", encoding="utf-8") as f:
        return [next(f).rstrip("\n") for _ in range(n)]


def test_exact_key_ignores_case_punctuation_whitespace():
    assert exact_key("Hello,  World!") == exact_key("hello world")
    assert exact_key("hello world") != exact_key("hello word")
    assert exact_key("আমি  গান গাই।") == exact_key("আমি গান গাই")


def test_shingles_are_deterministic_and_order_sensitive():
    a = shingle_hashes("a b c d e f g", 5)
    assert a.size == 3
    assert np.array_equal(a, shingle_hashes("A b c d e f g", 5))
    assert not np.array_equal(a, shingle_hashes("g f e d c b a", 5))
    assert shingle_hashes("", 5).size == 0
    assert shingle_hashes("two words", 5).size == 1


def test_near_duplicates_found_unrelated_kept(sample_dir):
    config = DedupConfig()
    docs = [p for p in _paragraphs(sample_dir / "en" / "wiki-en-chinapedia.txt.gz", 60) if len(p.split()) > 60][:20]
    d = Deduplicator(config)
    for doc in docs:
        assert d.check(exact_key(doc), signature(doc, config)) is None
    words = docs[3].split()
    edited = " ".join(words[:-1] + ["changed"])  # one word of many
    assert d.check(exact_key(edited), signature(edited, config)) == "near_duplicate"
    assert d.check(exact_key(docs[5].upper()), signature(docs[5].upper(), config)) == "exact_duplicate"
    unrelated = _paragraphs(sample_dir / "en" / "wiki-en-chinapedia.txt.gz", 200)[150]
    assert d.check(exact_key(unrelated), signature(unrelated, config)) is None


def test_near_dedup_can_be_switched_off(sample_dir):
    config = DedupConfig(near=False)
    doc = _paragraphs(sample_dir / "bn" / "poems-pd-banglakosh.txt.gz", 1)[0]
    d = Deduplicator(config)
    assert d.check(exact_key(doc), signature(doc, config)) is None
    edited = doc + " শেষ"
    assert d.check(exact_key(edited), signature(edited, config)) is None
    assert d.check(exact_key(doc), signature(doc, config)) == "exact_duplicate"


def test_remembered_state_decides_like_the_original(sample_dir):
    config = DedupConfig()
    docs = _paragraphs(sample_dir / "bn" / "poems-pd-banglakosh.txt.gz", 40)
    probes = [docs[2] + " আর", docs[7], "নতুন কবিতা " * 3 + docs[30][:50]]
    first = Deduplicator(config)
    kept = [(exact_key(t), signature(t, config)) for t in docs if first.check(exact_key(t), signature(t, config)) is None]
    rebuilt = Deduplicator(config)
    for key, sig in kept:
        rebuilt.remember(key, sig)
    for probe in probes:
        k, s = exact_key(probe), signature(probe, config)
        assert Deduplicator.check(rebuilt, k, s) == Deduplicator.check(first, k, s)
