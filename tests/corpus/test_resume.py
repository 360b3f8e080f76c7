"""Kill a build mid-way, rerun the same command: the shard directory is byte-identical to an uninterrupted one."""

from __future__ import annotations

import json
import os
import signal
import subprocess
import sys
import time
from pathlib import Path

import pytest

from corpus.cli import main

ROOT = Path(__file__).resolve().parents[2]


def _argv(sample_dir, out, workers):
    return ["build", "--source", f"bn={sample_dir}/bn/literature-bnarchive.txt.gz",
            "--source", f"en={sample_dir}/en/wiki-en-chinapedia.txt.gz", "--max-chars", "150000",
            "--tokenizer", "gpt2", "--mix", "bn=0.5,en=0.5", "--tokens", "6e4", "--val-tokens", "3000",
            "--shard-tokens", "1500", "--unit-docs", "100", "--seed", "3", "--out", str(out),
            "--workers", str(workers), "--no-progress"]


def _run_until(argv, ready, timeout=120.0) -> bool:
    """Start the build in a subprocess and SIGKILL it once ``ready()``; True if it was killed mid-way."""
    proc = subprocess.Popen([sys.executable, "-m", "corpus", *argv], cwd=ROOT, stdout=subprocess.DEVNULL,
                            stderr=subprocess.DEVNULL, start_new_session=True)
    deadline = time.monotonic() + timeout
    try:
        while proc.poll() is None and time.monotonic() < deadline:
            if ready():
                os.killpg(proc.pid, signal.SIGKILL)
                proc.wait()
                return True
            time.sleep(0.005)
        return False
    finally:
        if proc.poll() is None:
            os.killpg(proc.pid, signal.SIGKILL)
            proc.wait()


def _units_committed(work: Path, n: int):
    def ready() -> bool:
        try:
            saved = json.loads((work / "ingest.json").read_text())
        except (FileNotFoundError, json.JSONDecodeError):
            return False
        return sum(len(s["units"]) for s in saved["sources"]) >= n
    return ready


def _shards_written(work: Path, n: int):
    def ready() -> bool:
        try:
            return len(json.loads((work / "pack.json").read_text())["done"]) >= n
        except (FileNotFoundError, json.JSONDecodeError):
            return False
    return ready


def _contents(directory: Path) -> dict[str, bytes]:
    return {p.name: p.read_bytes() for p in sorted(directory.iterdir()) if p.is_file() and p.suffix != ".png"}


@pytest.mark.slow
def test_kill_and_resume_is_byte_identical(sample_dir, tmp_path):
    reference = tmp_path / "reference"
    assert main(_argv(sample_dir, reference, 1)) == 0

    out = tmp_path / "resumed"
    work = out / ".work"
    assert _run_until(_argv(sample_dir, out, 1), _units_committed(work, 3)), "build finished before the kill"
    assert not (out / "manifest.json").exists()
    saved = json.loads((work / "ingest.json").read_text())
    assert not all(s["done"] for s in saved["sources"])
    # Second interruption, during packing when it can be caught; then finish with two workers.
    _run_until(_argv(sample_dir, out, 1), _shards_written(work, 5))
    assert main(_argv(sample_dir, out, 2)) == 0

    assert _contents(out) == _contents(reference)
    assert any(name.endswith(".bin") for name in _contents(out))
    assert not work.exists()
