"""Shards as training data: the stream, the deterministic sampler and its state, and the refusals."""

from __future__ import annotations

import json

import numpy as np
import pytest

from corpus.shards.format import read_shard
from pretrain.train.data import BatchSampler, DataError, check_compatible, open_dataset


def test_stream_reads_across_shard_boundaries(synthetic_shards):
    ds = open_dataset(synthetic_shards)
    a, b = (read_shard(synthetic_shards / f"train_00{i}.bin") for i in range(2))
    assert len(ds.train) == len(a) + len(b)
    window = ds.train.window(len(a) - 3, 7)
    assert window.tolist() == [*a[-3:].tolist(), *b[:4].tolist()]
    assert set(ds.val) == {"bn", "en"}


def test_sampler_is_deterministic_and_covers_each_window_once_per_epoch(synthetic_shards):
    ds = open_dataset(synthetic_shards)
    s1 = BatchSampler(ds.train, seq_len=32, batch_size=8, seed=1)
    s2 = BatchSampler(ds.train, seq_len=32, batch_size=8, seed=1)
    assert np.array_equal(s1.batch(5), s2.batch(5))
    assert not np.array_equal(s1.batch(5), BatchSampler(ds.train, 32, 8, seed=2).batch(5))
    # Each epoch visits every window once, in a seeded order that changes between epochs.
    order0, order1 = s1._order(0).copy(), s1._order(1).copy()
    assert sorted(order0.tolist()) == list(range(s1.n_windows)) and not np.array_equal(order0, order1)
    for j, row in enumerate(s1.batch(0)):
        assert np.array_equal(row, ds.train.window(s1.start(int(order0[j])), 33))
    # Rows of a global batch are the same whichever slice a rank takes.
    full = s1.batch(3)
    assert np.array_equal(np.concatenate([s1.batch(3, slice(0, 4)), s1.batch(3, slice(4, 8))]), full)


@pytest.mark.parametrize("length", [40000, 40002, 32 * 50 + 1])  # 31, 1 and 0 tokens left over
def test_every_target_is_trained_once_per_epoch_the_tail_included(tmp_path, micro, length):
    """The finding: the last ``(len - 1) % seq_len`` tokens of the stream were never a target, in any epoch.
    "Once, with no overlap" in this sense: every target position of the stream is covered by an epoch's
    windows, each exactly once, except the final window aligned to the end of the stream, whose first
    ``seq_len - (len - 1) % seq_len`` targets the window before it covers too (the only overlap)."""
    ds = open_dataset(micro.write_synthetic(tmp_path / "d", train_tokens=length, val_tokens=500))
    n, t = len(ds.train), 32
    s = BatchSampler(ds.train, seq_len=t, batch_size=4, seed=3)
    covered = np.zeros(n, dtype=np.int64)  # covered[i]: how often token i is a target in one epoch
    for w in s._order(0):
        start = s.start(int(w))
        assert start >= 0 and start + t + 1 <= n
        covered[start + 1:start + t + 1] += 1
    rest = (n - 1) % t
    assert covered[0] == 0 and (covered[1:] >= 1).all(), "every target of the stream, the tail included"
    twice = np.flatnonzero(covered == 2)
    assert len(twice) == (t - rest if rest else 0) and (covered <= 2).all()
    if rest:
        assert twice.tolist() == list(range(n - t, n - rest)), "only the tail window overlaps, with the one before"


def test_a_checkpoint_of_a_sampler_without_the_tail_window_resumes_without_it(synthetic_shards):
    ds = open_dataset(synthetic_shards)
    old = BatchSampler(ds.train, 32, 8, seed=0, tail=False)
    state = {k: v for k, v in old.state_dict().items() if k != "tail"}  # as a version before the tail wrote it
    resumed = BatchSampler(ds.train, 32, 8, seed=0)
    resumed.load_state_dict(state)
    assert resumed.n_windows == old.n_windows == (len(ds.train) - 1) // 32
    assert np.array_equal(resumed.batch(7), old.batch(7))


def test_sampler_state_round_trip_and_skips(synthetic_shards):
    ds = open_dataset(synthetic_shards)
    s = BatchSampler(ds.train, 32, 8, seed=0)
    assert [s.next_index() for _ in range(3)] == [0, 1, 2]
    s.state.skip.append([4, 5])
    state = s.state_dict()
    resumed = BatchSampler(ds.train, 32, 8, seed=0)
    resumed.load_state_dict(json.loads(json.dumps(state)))
    assert [resumed.next_index() for _ in range(3)] == [3, 6, 7]
    with pytest.raises(DataError, match="seed"):
        BatchSampler(ds.train, 32, 8, seed=9).load_state_dict(state)


def test_real_shards_fit_gpt2_vocabulary(shards):
    ds = open_dataset(shards)
    check_compatible(ds, 50304, tokenizer="gpt2")  # the shipped GPT-2 is the one the shards name
    assert ds.train.max_token() < ds.manifest.tokenizer.vocab_size <= 50304
    with pytest.raises(DataError, match="more than the model's vocabulary of 50000"):
        check_compatible(ds, 50000, tokenizer="gpt2")


def test_other_tokenizer_is_refused(shards):
    ds = open_dataset(shards)
    with pytest.raises(DataError, match="o200k_base"):
        check_compatible(ds, 50304, tokenizer="o200k_base", scan_tokens=False)
    with pytest.raises(DataError, match="was trained with sha256 " + "a" * 64):
        check_compatible(ds, 50304, expected_sha256="a" * 64, expected_from="checkpoint X", scan_tokens=False)


def test_vocabulary_and_token_range_checks(tmp_path, micro):
    data = micro.write_synthetic(tmp_path / "d", train_tokens=2000, val_tokens=500)
    ds = open_dataset(data)
    with pytest.raises(DataError, match="more than the model's vocabulary of 256"):
        check_compatible(ds, 256)
    manifest = json.loads((data / "manifest.json").read_text())
    manifest["tokenizer"]["vocab_size"] = 100  # ids up to 511 are in the shards
    (data / "manifest.json").write_text(json.dumps(manifest))
    with pytest.raises(DataError, match=r"train shards hold token id \d+, but tokenizer 'synthetic' has only 100"):
        check_compatible(open_dataset(data), 512, expected_sha256=micro.sha256)


def test_manifest_that_lies_about_a_shard_is_refused(tmp_path, micro):
    data = micro.write_synthetic(tmp_path / "d", train_tokens=2000, val_tokens=500)
    manifest = json.loads((data / "manifest.json").read_text())
    manifest["shards"][0]["tokens"] += 1
    (data / "manifest.json").write_text(json.dumps(manifest))
    with pytest.raises(DataError, match="train_000.bin"):
        open_dataset(data)
