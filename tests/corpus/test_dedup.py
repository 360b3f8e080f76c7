"""corpus.dedup: exact keys, MinHash LSH near-duplicates, and a state that rebuilds exactly."""

from __future__ import annotations

import gzip

import numpy as np

from corpus.clean import ngram_hashes, words
from corpus.dedup import DedupConfig, Deduplicator, exact_key, shingle_hashes, signature, signatures


def key(text):
    return exact_key(words(text))


def sig(text, config):
    return signature(words(text), config)


def _paragraphs(path, n):
    with gzip.open(path, "rt", encoding="utf-8") as f:
        return [next(f).rstrip("\n") for _ in range(n)]


def test_exact_key_ignores_case_punctuation_whitespace():
    assert key("Hello,  World!") == key("hello world")
    assert key("hello world") != key("hello word")
    assert key("আমি  গান গাই।") == key("আমি গান গাই")


def test_shingles_are_deterministic_and_order_sensitive():
    a = shingle_hashes(words("a b c d e f g"), 5)
    assert a.size == 3
    assert np.array_equal(a, shingle_hashes(words("A b c d e f g"), 5))
    assert not np.array_equal(a, shingle_hashes(words("g f e d c b a"), 5))
    assert shingle_hashes(words(""), 5).size == 0
    assert shingle_hashes(words("two words"), 5).size == 1


def test_near_duplicates_found_unrelated_kept(sample_dir):
    config = DedupConfig()
    docs = [p for p in _paragraphs(sample_dir / "en" / "wiki-en-chinapedia.txt.gz", 60) if len(p.split()) > 60][:20]
    d = Deduplicator(config)
    for doc in docs:
        assert d.check(key(doc), sig(doc, config)) is None
    words = docs[3].split()
    edited = " ".join(words[:-1] + ["changed"])  # one word of many
    assert d.check(key(edited), sig(edited, config)) == "near_duplicate"
    assert d.check(key(docs[5].upper()), sig(docs[5].upper(), config)) == "exact_duplicate"
    unrelated = _paragraphs(sample_dir / "en" / "wiki-en-chinapedia.txt.gz", 200)[150]
    assert d.check(key(unrelated), sig(unrelated, config)) is None


def test_near_dedup_can_be_switched_off(sample_dir):
    config = DedupConfig(near=False)
    doc = _paragraphs(sample_dir / "bn" / "poems-pd-banglakosh.txt.gz", 1)[0]
    d = Deduplicator(config)
    assert d.check(key(doc), sig(doc, config)) is None
    edited = doc + " শেষ"
    assert d.check(key(edited), sig(edited, config)) is None
    assert d.check(key(doc), sig(doc, config)) == "exact_duplicate"


def test_remembered_state_decides_like_the_original(sample_dir):
    config = DedupConfig()
    docs = _paragraphs(sample_dir / "bn" / "poems-pd-banglakosh.txt.gz", 40)
    probes = [docs[2] + " আর", docs[7], "নতুন কবিতা " * 3 + docs[30][:50]]
    first = Deduplicator(config)
    kept = [(key(t), sig(t, config)) for t in docs if first.check(key(t), sig(t, config)) is None]
    rebuilt = Deduplicator(config)
    for k, s in kept:
        rebuilt.remember(k, s)
    for probe in probes:
        k, s = key(probe), sig(probe, config)
        assert Deduplicator.check(rebuilt, k, s) == Deduplicator.check(first, k, s)


def test_batched_signatures_equal_datasketch_minhash(sample_dir):
    # The batched numpy MinHash must give exactly datasketch's affine32 values, document by document.
    from datasketch import MinHash

    config = DedupConfig()
    texts = _paragraphs(sample_dir / "bn" / "poems-pd-banglakosh.txt.gz", 40) + ["", "two words", "a b c d e f"]
    grams = [ngram_hashes(words(t), config.ngram) for t in texts]
    batch = signatures(grams, config)
    for text, row in zip(texts, batch, strict=True):
        m = MinHash(num_perm=config.num_perm, hashfunc=int, scheme="affine32")
        m.update_batch(shingle_hashes(words(text), config.ngram).tolist())
        assert np.array_equal(row, m.hashvalues), text[:40]
        assert np.array_equal(row, sig(text, config))
