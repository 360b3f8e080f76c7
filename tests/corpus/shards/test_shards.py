"""corpus.shards.format: llm.c shard layout, headers, manifest round trip and verification."""

from __future__ import annotations

import numpy as np
import pytest

from common.fileio import file_sha256
from corpus.shards.format import (
    HEADER_BYTES,
    Manifest,
    ShardError,
    ShardInfo,
    TokenizerInfo,
    dtype_for_vocab,
    encode_shard,
    read_header,
    read_shard,
    write_shard,
)


def test_dtype_for_vocab():
    assert dtype_for_vocab(50257) == "uint16"
    assert dtype_for_vocab(65536) == "uint16"
    assert dtype_for_vocab(65537) == "uint32"


@pytest.mark.parametrize(("dtype", "magic", "version", "itemsize"), [("uint16", 20240520, 1, 2), ("uint32", 20240801, 7, 4)])
def test_write_read_round_trip(tmp_path, dtype, magic, version, itemsize):
    tokens = np.array([0, 1, 50256, 65535, 7], dtype=np.int64)
    path = tmp_path / "s.bin"
    write_shard(path, tokens, dtype)
    header = np.fromfile(path, dtype="<i4", count=256)
    assert (header[0], header[1], header[2]) == (magic, version, 5)
    assert not header[3:].any()
    assert path.stat().st_size == HEADER_BYTES + 5 * itemsize
    assert read_header(path) == (dtype, 5)
    assert read_shard(path).tolist() == tokens.tolist()


def test_ids_out_of_range_rejected():
    with pytest.raises(ShardError, match="out of range"):
        encode_shard(np.array([70000]), "uint16")
    with pytest.raises(ShardError, match="out of range"):
        encode_shard(np.array([-1]), "uint32")


def test_bad_files_named_in_errors(tmp_path):
    with pytest.raises(ShardError, match="missing"):
        read_header(tmp_path / "nope.bin")
    short = tmp_path / "short.bin"
    short.write_bytes(b"\0" * 100)
    with pytest.raises(ShardError, match="short.bin.*shorter"):
        read_header(short)
    good = tmp_path / "good.bin"
    write_shard(good, np.arange(10), "uint16")
    truncated = tmp_path / "trunc.bin"
    truncated.write_bytes(good.read_bytes()[:-2])
    with pytest.raises(ShardError, match="header says 10 tokens"):
        read_header(truncated)
    bad = tmp_path / "magic.bin"
    bad.write_bytes(b"\1" * HEADER_BYTES)
    with pytest.raises(ShardError, match="bad magic"):
        read_header(bad)


def _manifest(tmp_path) -> Manifest:
    write_shard(tmp_path / "train_000000.bin", np.array([9, 1, 2, 9, 3]), "uint16")
    write_shard(tmp_path / "val_bn_000000.bin", np.array([9, 4]), "uint16")
    shards = [ShardInfo("train_000000.bin", "train", 5, 2, {"bn": 3, "en": 2},
                        sha256=file_sha256(tmp_path / "train_000000.bin")),
              ShardInfo("val_bn_000000.bin", "val", 2, 1, {"bn": 2}, language="bn", chars=3, bytes=9)]
    return Manifest(TokenizerInfo("/x/tok.json", "ab" * 32, 10, 9), "uint16", shards, seed=3,
                    plan={"shares": {"bn": 0.6}}, arguments={"tokens": 5})


def test_manifest_round_trip_and_split(tmp_path):
    m = _manifest(tmp_path)
    m.save(tmp_path)
    loaded = Manifest.load(tmp_path)
    assert loaded == m
    assert [s.file for s in loaded.split("train")] == ["train_000000.bin"]
    assert [s.file for s in loaded.split("val", language="bn")] == ["val_bn_000000.bin"]
    assert loaded.split("val", language="en") == []
    assert loaded.languages() == ["bn", "en"]
    loaded.verify(tmp_path)


def test_manifest_verify_catches_mismatch(tmp_path):
    m = _manifest(tmp_path)
    m.shards[0].tokens = 6
    with pytest.raises(ShardError, match="train_000000.bin: 5 tokens, manifest says 6"):
        m.verify(tmp_path)
    m = _manifest(tmp_path)
    m.shards[0].tokens_by_language = {"bn": 1}
    with pytest.raises(ShardError, match="per-language"):
        m.verify(tmp_path)
    m = _manifest(tmp_path)
    m.dtype = "uint32"
    with pytest.raises(ShardError, match="dtype"):
        m.verify(tmp_path)


def test_manifest_load_errors(tmp_path):
    with pytest.raises(ShardError, match="no manifest"):
        Manifest.load(tmp_path)
    (tmp_path / "manifest.json").write_text("{not json")
    with pytest.raises(ShardError, match="not valid JSON"):
        Manifest.load(tmp_path)
    (tmp_path / "manifest.json").write_text('{"dtype": "uint16"}')
    with pytest.raises(ShardError, match="no field 'tokenizer' .* required"):
        Manifest.load(tmp_path)
