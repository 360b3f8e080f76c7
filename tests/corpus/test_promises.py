"""What a shard set promises, kept across a user's second step: an --append puts no validation document into
training (either way round), and a language with little text gets a warning (or, under --strict-mix, a
refusal) when its validation set is empty or its training share misses the plan; ``corpus inspect --recount``
then exits 1. Small builds of the shipped sample, one worker."""

from __future__ import annotations

import gzip
from pathlib import Path

import numpy as np
import pytest

from corpus.build import BuildConfig, build
from corpus.cli import main
from corpus.config import IngestConfig
from corpus.engine.executors import ExecutorConfig
from corpus.mixture.plan import SHARE_TOLERANCE
from corpus.shards.format import Manifest, read_shard
from corpus.shards.keys import KEYS_NAME, load_keys
from corpus.shards.verify import documents
from fertility.tokenizers import load_tokenizer

QUIET = ExecutorConfig(workers=1, progress=False)


def _sources(sample_dir: Path) -> list[str]:
    return [f"bn={sample_dir}/bn/literature-bnarchive.txt.gz", f"en={sample_dir}/en/wiki-en-chinapedia.txt.gz"]


def _config(sources: list[str], max_chars: int, **overrides) -> BuildConfig:
    values = dict(sources=sources, tokens=20_000, mix={"bn": 0.5, "en": 0.5}, val_tokens=3_000, shard_tokens=8_000,
                  ingest=IngestConfig(tokenizer="gpt2", unit_docs=200, max_chars=max_chars))
    values.update(overrides)
    return BuildConfig(**values)


def _token_docs(out: Path, manifest: Manifest, split: str, files: set[str]) -> dict[str | None, set[tuple]]:
    """Each shard's documents as token tuples (BOS excluded), per validation language (None for training)."""
    found: dict[str | None, set[tuple]] = {}
    for s in manifest.split(split):
        if s.file in files:
            for doc in documents(read_shard(out / s.file), manifest.tokenizer.bos_id):
                found.setdefault(s.language, set()).add(tuple(doc.tolist()))
    return found


@pytest.mark.slow
def test_an_append_keeps_validation_out_of_training_both_ways(sample_dir, tmp_path):
    """The second build reads the first one's documents again (a longer head of the same sources): before the
    fix its hold-out drew afresh, and exact token matches found old validation inside new training and new
    validation inside old training."""
    out = tmp_path / "shards"
    first, _ = build(_config(_sources(sample_dir), 60_000), out, executor=QUIET)
    old = {s.file for s in first.shards}
    # A set written before the keys were kept has none beside its manifest: they are computed again from its
    # decoded documents, and they are the same keys.
    kept = load_keys(out, first, load_tokenizer("gpt2"))
    (out / KEYS_NAME).rename(tmp_path / KEYS_NAME)
    recomputed = np.unique(load_keys(out, first, load_tokenizer("gpt2")), axis=0)
    (tmp_path / KEYS_NAME).rename(out / KEYS_NAME)
    every = {doc for split in ("train", "val") for docs in _token_docs(out, first, split, old).values() for doc in docs}
    assert len(kept) == len(every)  # one key per document of the set (exact dedup left one of each key)
    assert np.array_equal(kept, recomputed)
    appended, prepared = build(_config(_sources(sample_dir), 90_000), out, append=True, executor=QUIET)
    new = {s.file for s in appended.shards} - old
    assert new and prepared is not None
    old_train = set().union(*_token_docs(out, appended, "train", old).values())
    new_train = set().union(*_token_docs(out, appended, "train", new).values())
    old_val = _token_docs(out, appended, "val", old)
    new_val = _token_docs(out, appended, "val", new)
    assert set(old_val) == {"bn", "en"} and new_train and old_train
    for language, docs in old_val.items():
        assert not docs & new_train, f"old {language} validation inside new training"
    for language, docs in new_val.items():
        assert not docs & old_train, f"new {language} validation inside old training"
        assert not docs & set().union(*old_val.values()), f"new {language} validation repeats old validation"
    # What was dropped is counted: the documents the first build already holds.
    dropped = {s["name"]: s["counters"].get("drop_in_existing_set", 0) for s in appended.sources[2:]}
    assert all(n > 0 for n in dropped.values()), dropped


def _three_long_bangla_documents(sample_dir: Path, folder: Path) -> Path:
    with gzip.open(sample_dir / "bn" / "literature-bnarchive.txt.gz", "rt", encoding="utf-8") as f:
        lines = [line.strip() for line, _ in zip(f, range(60), strict=False)]
    path = folder / "bn-long.txt"
    path.write_text("".join(" ".join(lines[i::3]) + "\n" for i in range(3)), encoding="utf-8")
    return path


@pytest.fixture(scope="module")
def little_bangla(sample_dir, tmp_path_factory) -> tuple[Path, list[str]]:
    folder = tmp_path_factory.mktemp("little")
    bn = _three_long_bangla_documents(sample_dir, folder)
    return folder, [f"bn={bn}", f"en={sample_dir}/en/wiki-en-chinapedia.txt.gz"]


def _argv(sources: list[str], out: Path, *extra: str) -> list[str]:
    return ["build", "--source", sources[0], "--source", sources[1], "--tokenizer", "gpt2", "--mix",
            "bn=0.5,en=0.5", "--tokens", "2e4", "--val-tokens", "3000", "--max-chars", "120000",
            "--shard-tokens", "8000", "--out", str(out), "--workers", "1", "--no-progress", *extra]


def test_a_language_with_little_text_is_warned_about(little_bangla, capsys):
    folder, sources = little_bangla
    out = folder / "warned"
    assert main(_argv(sources, out)) == 0
    printed = capsys.readouterr().out
    warnings = [line for line in printed.splitlines() if line.startswith("WARNING: bn:")]
    assert any("no validation documents" in w for w in warnings), printed
    share = next(w for w in warnings if "training shards hold" in w)
    assert "50.00%" in share and f"{SHARE_TOLERANCE:g}" in share
    manifest = Manifest.load(out)
    assert not manifest.split("val", language="bn")
    assert any("no validation documents" in w for w in manifest.plan["warnings"])
    # The recount finds the same miss and says so in its exit status.
    assert main(["inspect", str(out), "--recount", "--no-progress"]) == 1
    printed = capsys.readouterr().out
    assert "FAIL bn:" in printed and "no validation shard" in printed


def test_strict_mix_refuses_before_writing_shards(little_bangla, capsys):
    folder, sources = little_bangla
    out = folder / "strict"
    assert main(_argv(sources, out, "--strict-mix")) == 2
    err = capsys.readouterr().err.strip().splitlines()
    assert len(err) == 1 and "--strict-mix" in err[0] and "bn:" in err[0], err
    assert not out.exists()
    # `corpus plan` keeps the same promise, in the same one line, and writes nothing either.
    assert main(["plan", *_argv(sources, out, "--strict-mix")[1:]]) == 2
    err = capsys.readouterr().err.strip().splitlines()
    assert len(err) == 1 and "--strict-mix" in err[0] and "bn:" in err[0], err
    assert not out.exists()


def test_a_build_that_keeps_its_promises_warns_of_nothing(sample_dir, tmp_path, capsys):
    assert main(_argv(_sources(sample_dir), tmp_path / "ok", "--strict-mix")) == 0
    assert "WARNING" not in capsys.readouterr().out
    assert main(["inspect", str(tmp_path / "ok"), "--recount", "--no-progress"]) == 0
