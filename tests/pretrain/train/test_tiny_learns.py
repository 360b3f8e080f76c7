"""`tiny` with nothing but its preset learns more than token frequencies: on the demo's shards of an 8,000-id
tokenizer its validation loss ends at least 0.25 nats below a unigram model of its own training tokens, in
each language (`benchmarks/tiny_vs_unigram.py`, which also measures other vocabularies)."""

from __future__ import annotations

import importlib.util

import numpy as np
import pytest

from corpus.shards.verify import documents
from pretrain.train.data import open_dataset


def _bench(root):
    spec = importlib.util.spec_from_file_location("tiny_vs_unigram", root / "benchmarks" / "tiny_vs_unigram.py")
    module = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(module)
    return module


def test_the_unigram_baseline_is_the_add_one_estimate_on_the_validation_targets(micro, tmp_path):
    bench = _bench(micro.root)
    data = micro.write_synthetic(tmp_path / "shards")
    ds = open_dataset(data)
    train = ds.train.window(0, len(ds.train))
    losses = bench.unigram_losses(data, 256)
    for lang, stream in ds.val.items():
        targets = np.concatenate(list(documents(stream.window(0, len(stream)), 0)))[:256]  # BOS never a target
        # Written out token by token, the slow way: -mean log((count + 1) / (N + V)).
        expected = -np.mean([np.log(((train == t).sum() + 1) / (len(train) + micro.vocab)) for t in targets])
        assert losses[lang] == pytest.approx(expected, rel=1e-12)


@pytest.mark.slow
def test_tiny_beats_the_unigram_of_its_training_tokens_by_a_quarter_nat(micro, tmp_path):
    bench = _bench(micro.root)
    shards = bench.build_shards(micro.root / "data" / "sample", 8000, tmp_path)
    bench.train_tiny(shards, tmp_path / "run", [])
    result = bench.compare(shards, tmp_path / "run")
    assert set(result) == {"bn", "en"}
    for lang, r in result.items():
        assert r["margin"] >= bench.MARGIN, (lang, r)
