"""corpus.quality.dedup: exact keys, and duplicate decisions that keep the first document whatever the task split."""

from __future__ import annotations

import gzip
import json

import numpy as np
import pytest

from corpus.config import IngestConfig
from corpus.engine.executors import ExecutorConfig
from corpus.ingest import ingest
from corpus.quality.clean import words_batch
from corpus.quality.dedup import DedupConfig, bands, exact_duplicates, near_duplicates
from corpus.read.sources import parse_source
from fertility.tokenizers import load_tokenizer


def key(text):
    return words_batch([text])[0].key


def _paragraphs(path, n):
    with gzip.open(path, "rt", encoding="utf-8") as f:
        return [next(f).rstrip("\n") for _ in range(n)]


def test_exact_key_ignores_case_punctuation_whitespace():
    assert key("Hello,  World!") == key("hello world")
    assert key("hello world") != key("hello word")
    assert key("আমি  গান গাই।") == key("আমি গান গাই")
    assert key("ab c") != key("a bc")  # the same characters, other words
    assert key("ab") != key("ab ab") and key("") == key("...")


def test_exact_duplicates_keep_the_smallest_id_in_any_order():
    keys = np.array([[1] * 16, [2] * 16, [1] * 16, [2] * 16, [3] * 16], dtype=np.uint8)
    uids = np.array([50, 7, 3, 9, 1])
    assert exact_duplicates(uids, keys).tolist() == [True, False, False, True, False]
    perm = np.array([4, 2, 0, 3, 1])
    assert exact_duplicates(uids[perm], keys[perm]).tolist() == [False, False, True, True, False]


def test_near_duplicates_keep_the_smallest_id_of_each_cluster():
    uids = np.array([10, 4, 8, 2, 6])
    pairs = np.array([[0, 1], [1, 2], [3, 4]])  # clusters {10, 4, 8} and {2, 6}
    assert near_duplicates(uids, [pairs]).tolist() == [True, False, True, False, True]
    assert not near_duplicates(uids, [np.zeros((0, 2), dtype=np.int64)]).any()
    assert not near_duplicates(uids, []).any()


def test_near_duplicate_clusters_join_across_blocks():
    # A cluster's pairs may come in different blocks (bands, parts of a band): the components are those of
    # all the pairs, whatever the blocks, and their order.
    gen = np.random.default_rng(0)
    uids = gen.permutation(200) * 3
    pairs = gen.integers(0, 200, size=(150, 2))
    whole = near_duplicates(uids, [pairs])
    for cuts in ([1], [37, 38, 90], list(range(1, 150, 7))):
        blocks = np.split(pairs, cuts)
        assert near_duplicates(uids, blocks).tolist() == whole.tolist()
        assert near_duplicates(uids, blocks[::-1]).tolist() == whole.tolist()
    from scipy.sparse import coo_matrix
    from scipy.sparse.csgraph import connected_components

    _, label = connected_components(coo_matrix((np.ones(150), pairs.T), shape=(200, 200)), directed=False)
    assert whole.tolist() == [u != uids[label == c].min() for u, c in zip(uids, label, strict=True)]


def test_bands_are_datasketch_choice():
    from datasketch.lsh import _optimal_param

    for threshold in (0.5, 0.63, 0.8, 0.9):
        assert bands(threshold, 64) == tuple(_optimal_param(threshold, 64, 0.5, 0.5))


@pytest.mark.parametrize(("tasks", "pair_block"), [(1, 1 << 20), (2, 1 << 20), (2, 1)])
def test_pipeline_drops_near_and_exact_duplicates(sample_dir, tmp_path, monkeypatch, tasks, pair_block):
    # pair_block 1: the bands' pairs read one at a time, each joining the clusters found so far.
    import corpus.ingest

    monkeypatch.setattr(corpus.ingest, "PAIR_BLOCK", pair_block)
    docs = [p for p in _paragraphs(sample_dir / "en" / "wiki-en-chinapedia.txt.gz", 80) if len(p.split()) > 60][:12]
    edited = " ".join(docs[3].split()[:-1] + ["changed"])  # one word of many
    texts = docs + [edited, docs[5].upper()]
    path = tmp_path / "docs.jsonl"
    path.write_text("".join(json.dumps({"text": t}) + "\n" for t in texts))
    config = IngestConfig(tokenizer="gpt2", unit_docs=4, dedup=DedupConfig())
    got = ingest([parse_source(f"en={path}")], config, str(tmp_path / "work"), load_tokenizer("gpt2").fingerprint,
                 ExecutorConfig(workers=1, tasks=tasks, progress=False))
    counters = got.states[0].counters
    assert counters["drop_near_duplicate"] == 1
    assert counters["drop_exact_duplicate"] == 1
    assert counters["documents_kept"] == len(docs)
    assert sorted(got.table.uid.tolist()) == got.table.uid.tolist() == list(range(len(docs)))


@pytest.mark.parametrize("block", [7, 16_384])
def test_batched_signatures_equal_datatrove(tmp_path, monkeypatch, block):
    # The signature step computes a batch's signatures at once; each must equal datatrove's own get_signature,
    # value for value, including documents without shingles and documents split across blocks of rows.
    from datatrove.pipeline.dedup.minhash import MinhashDedupSignature

    import corpus.engine.steps

    monkeypatch.setattr(corpus.engine.steps, "SIGNATURE_BLOCK_ROWS", block)
    step = corpus.engine.steps.Signatures(str(tmp_path), DedupConfig())
    reference = MinhashDedupSignature(str(tmp_path), step.config, language=corpus.engine.steps._Words())
    gen = np.random.default_rng(0)
    grams = [gen.integers(0, 2**64, size=n, dtype=np.uint64) for n in (5, 0, 1, 40, 3, 0, 17)]
    docs, rows = step.signatures(grams)
    assert docs.tolist() == [i for i, g in enumerate(grams) if len(g)]
    for i, row in zip(docs.tolist(), rows, strict=True):
        assert [x.tolist() for x in np.split(row, step.config.num_buckets)] == reference.get_signature(
            grams[i].reshape(-1, 1))


def test_signature_files_equal_datatrove(tmp_path):
    # The step writes datatrove's bucket files itself (a batch at a time) and lets datatrove sort them: every
    # file must hold the same bytes as datatrove's own stage 1 writes for the same documents and shingles,
    # across batches and with documents that have no shingles (which keep their index but write no record).
    from datatrove.data import Document
    from datatrove.pipeline.dedup.minhash import MinhashDedupSignature

    import corpus.engine.steps

    gen = np.random.default_rng(1)
    grams = [gen.integers(0, 2**64, size=n, dtype=np.uint64) for n in (5, 0, 1, 40, 3, 0, 17, 9, 2, 6)]
    texts = {f"doc {i}": g for i, g in enumerate(grams)}

    class Reference(MinhashDedupSignature):
        def get_shingles(self, text):
            return texts[text].reshape(-1, 1)

    ours = corpus.engine.steps.Signatures(str(tmp_path / "ours"), DedupConfig())
    reference = Reference(str(tmp_path / "reference"), ours.config, language=corpus.engine.steps._Words())
    batches = list(texts.items())
    ours.run(corpus.engine.steps.Docs(0, list(range(i, i + 4)), [t for t, _ in batches[i:i + 4]],
                                      grams=[g for _, g in batches[i:i + 4]]) for i in range(0, len(batches), 4))
    reference.run(Document(text=t, id=t) for t in texts)
    files = sorted(p.relative_to(tmp_path / "reference") for p in (tmp_path / "reference").rglob("*.sig"))
    assert len(files) == ours.config.num_buckets
    for f in files:
        assert (tmp_path / "ours" / f).read_bytes() == (tmp_path / "reference" / f).read_bytes(), f


def test_batched_signatures_modulus_edges(tmp_path):
    # Shingles whose products land on the Mersenne prime, just above it and at the top of uint64 exercise the
    # division-free modulus at its edges.
    import corpus.engine.steps

    step = corpus.engine.steps.Signatures(str(tmp_path), DedupConfig())
    a, b = step.parameters
    prime = int(corpus.engine.steps._MERSENNE_PRIME)
    edges = np.array([0, 1, prime - 1, prime, prime + 1, 2 * prime, 2**64 - 1], dtype=np.uint64)
    _, rows = step.signatures([edges[i:i + 1] for i in range(len(edges))])
    for x, signature in zip(edges.tolist(), rows, strict=True):
        # a document of one shingle: its signature is that shingle's permuted hashes
        want = [(x * int(a[0, j]) + int(b[0, j])) % 2**64 % prime for j in range(a.shape[1])]
        assert signature.tolist() == want
