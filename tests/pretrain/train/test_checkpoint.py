"""Checkpoint files: round trip, checksum, retention of the last K and the best, interrupted writes."""

from __future__ import annotations

import json
import subprocess
import sys

import pytest
import torch

from pretrain.train.checkpoint import (
    CheckpointError,
    checkpoint_dir,
    latest_checkpoint,
    load_checkpoint,
    read_latest,
    save_checkpoint,
    step_checkpoints,
)


def state(step: int) -> dict:
    return {"step": step, "weights": torch.full((4,), float(step)), "rng": (3, tuple(range(5)), None)}


def test_round_trip_and_latest(tmp_path):
    save_checkpoint(tmp_path, 1, state(1), val_loss=2.0)
    path = save_checkpoint(tmp_path, 2, state(2), val_loss=3.0)
    assert latest_checkpoint(tmp_path) == path
    loaded = load_checkpoint(path)
    assert loaded["step"] == 2 and torch.equal(loaded["weights"], torch.full((4,), 2.0))
    meta = json.loads(path.with_suffix(".json").read_text())
    assert meta["step"] == 2 and len(meta["sha256"]) == 64


def test_keeps_last_k_and_the_best(tmp_path):
    for step, loss in [(1, 5.0), (2, 1.0), (3, 4.0), (4, 3.0), (5, 2.5)]:
        save_checkpoint(tmp_path, step, state(step), val_loss=loss, keep_last=2)
    assert [p.name for p in step_checkpoints(tmp_path)] == ["step_00000004.pt", "step_00000005.pt"]
    latest = read_latest(tmp_path)
    assert latest["best_step"] == 2 and latest["best_val_loss"] == 1.0
    assert load_checkpoint(checkpoint_dir(tmp_path) / "best.pt")["step"] == 2  # survives the pruning


def test_corruption_is_detected(tmp_path):
    path = save_checkpoint(tmp_path, 1, state(1))
    data = bytearray(path.read_bytes())
    data[len(data) // 2] ^= 0xFF
    path.write_bytes(bytes(data))
    with pytest.raises(CheckpointError, match="does not match"):
        load_checkpoint(path)


def test_a_file_without_sidecar_is_an_interrupted_write(tmp_path):
    good = save_checkpoint(tmp_path, 1, state(1))
    orphan = checkpoint_dir(tmp_path) / "step_00000002.pt"
    torch.save(state(2), orphan)
    (checkpoint_dir(tmp_path) / "latest.json").unlink()
    assert latest_checkpoint(tmp_path) == good
    with pytest.raises(CheckpointError, match="never completed"):
        load_checkpoint(orphan)


def test_kill_during_checkpoint_leaves_previous_loadable(tmp_path):
    save_checkpoint(tmp_path, 1, state(1))
    code = (f"import torch; from pretrain.train.checkpoint import save_checkpoint; from pretrain.train.faults import FaultPlan; "
            f"hook = FaultPlan([('kill_during_checkpoint', 2)]).checkpoint_hook(2); "
            f"save_checkpoint({str(tmp_path)!r}, 2, {{'w': torch.zeros(100000)}}, before_publish=hook)")
    proc = subprocess.run([sys.executable, "-c", code], capture_output=True)
    assert proc.returncode == -9
    assert list(checkpoint_dir(tmp_path).glob(".*.tmp"))  # the half-written temp file is all that is left
    assert latest_checkpoint(tmp_path).name == "step_00000001.pt"
    assert load_checkpoint(latest_checkpoint(tmp_path))["step"] == 1
    save_checkpoint(tmp_path, 3, state(3))
    assert not list(checkpoint_dir(tmp_path).glob(".*.tmp"))


def test_the_sha256_is_of_the_bytes_on_disk_and_the_files_have_ordinary_permissions(tmp_path):
    """Hashed while written (no read-back), the sidecar's sha256 is still the file's; mkstemp's 0600 is
    replaced by what a plain open() gives (0666 & ~umask), so another user of the machine can read it."""
    from common.fileio import file_sha256, umask

    big = {"step": 1, "weights": torch.randn(300_000), "more": [torch.arange(1000)] * 3}
    path = save_checkpoint(tmp_path, 1, big, val_loss=1.0)
    meta = json.loads(path.with_suffix(".json").read_text())
    assert meta["sha256"] == file_sha256(path) and meta["bytes"] == path.stat().st_size
    expected = 0o666 & ~umask()
    for name in (path.name, "best.pt", path.with_suffix(".json").name, "latest.json"):
        assert (checkpoint_dir(tmp_path) / name).stat().st_mode & 0o777 == expected, name
    assert torch.equal(load_checkpoint(path)["weights"], big["weights"])
