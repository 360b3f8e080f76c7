"""Kill a build (SIGKILL to its whole process group) in the MinHash bucket stage and while packing, rerun the
same command: only the remaining tasks run, and every output file is byte-identical to an uninterrupted build.

The kills are deterministic: ``corpus.engine.faults`` (``CORPUS_FAULT=STAGE:INDEX``) makes the build kill itself at
a chosen task, so nothing here waits on time.
"""

from __future__ import annotations

import hashlib
import os
import signal
import subprocess
import sys
from pathlib import Path

import pytest

from corpus.build import staging_path
from corpus.cli import main
from corpus.engine.faults import FAULT_ENV

ROOT = Path(__file__).resolve().parents[3]


def _argv(sample_dir, out, workers):
    return ["build", "--source", f"bn={sample_dir}/bn/literature-bnarchive.txt.gz",
            "--source", f"en={sample_dir}/en/wiki-en-chinapedia.txt.gz", "--max-chars", "150000",
            "--tokenizer", "gpt2", "--mix", "bn=0.5,en=0.5", "--tokens", "6e4", "--val-tokens", "3000",
            "--shard-tokens", "1500", "--unit-docs", "100", "--seed", "3", "--out", str(out),
            "--workers", str(workers), "--tasks", "2", "--no-progress"]


def _killed_at(argv, fault: str) -> int:
    """Run the build in its own process group with the fault armed; its exit status."""
    proc = subprocess.run([sys.executable, "-m", "corpus", *argv], cwd=ROOT, stdout=subprocess.DEVNULL,
                          stderr=subprocess.DEVNULL, start_new_session=True, env=os.environ | {FAULT_ENV: fault},
                          timeout=300)
    return proc.returncode


def sha256_of_outputs(directory: Path) -> dict[str, str]:
    """sha256 of every file of a shard directory (the work folder excluded)."""
    return {p.name: hashlib.sha256(p.read_bytes()).hexdigest()
            for p in sorted(directory.iterdir()) if p.is_file()}


@pytest.mark.slow
def test_kill_in_dedup_and_packing_then_resume_is_byte_identical(sample_dir, tmp_path):
    reference = tmp_path / "reference"
    assert main(_argv(sample_dir, reference, 1)) == 0

    out = tmp_path / "resumed"
    staged = staging_path(out)
    stage = staged / ".work" / "t2"
    assert _killed_at(_argv(sample_dir, out, 1), "buckets:2") == -signal.SIGKILL
    assert not out.exists()  # the work is in the staging folder until it is complete
    ingest_done = sorted(p.name for p in (stage / "logs" / "ingest" / "completions").iterdir())
    buckets_done = sorted(p.name for p in (stage / "logs" / "buckets" / "completions").iterdir())
    assert ingest_done == ["00000", "00001"] and buckets_done == ["00000", "00001"]
    first_tokens = (stage / "docs" / "00000.tokens").stat().st_mtime_ns

    assert _killed_at(_argv(sample_dir, out, 1), "pack:3") == -signal.SIGKILL
    assert (stage / "docs" / "00000.tokens").stat().st_mtime_ns == first_tokens  # ingest tasks were not rerun
    assert len(list(staged.glob("*.bin"))) == 3
    assert main(_argv(sample_dir, out, 2)) == 0

    assert sha256_of_outputs(out) == sha256_of_outputs(reference)
    assert any(name.endswith(".bin") for name in sha256_of_outputs(out))
    assert not (out / ".work").exists() and not staged.exists()


@pytest.mark.slow
def test_kill_just_after_the_manifest_then_rerun_finishes_the_clean_up(sample_dir, tmp_path):
    """Finding: a build killed just after manifest.json was written reported "already built" on rerun with
    shares.png missing (the report links it) and the work folder left behind. The manifest is now written
    last, after the report, in the staging folder; a rerun of a build finished there publishes it."""
    out = tmp_path / "out"
    staged = staging_path(out)
    assert _killed_at(_argv(sample_dir, out, 1), "manifest:0") == -signal.SIGKILL
    assert not out.exists()
    assert (staged / "manifest.json").exists() and (staged / ".work").exists()
    for name in ("report.json", "report.md", "shares.png"):
        assert (staged / name).stat().st_size > 0, name
    assert main(_argv(sample_dir, out, 1)) == 0
    assert not (out / ".work").exists() and not staged.exists()
    assert "shares.png" in (out / "report.md").read_text(encoding="utf-8")
