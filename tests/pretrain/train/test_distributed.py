"""torchrun with 2 CPU processes (gloo; DDP, and FSDP2 fully_shard) follows the 1-process loss trajectory
for the same global batch."""

from __future__ import annotations

import re
import subprocess
import sys
from pathlib import Path

import pytest

from common.fileio import read_jsonl
from pretrain.config import TrainConfig
from pretrain.eval.plots import trajectory
from pretrain.train.checkpoint import latest_checkpoint, load_checkpoint

ROOT = Path(__file__).resolve().parents[3]
STEPS = 8


@pytest.fixture(scope="module")
def one_process(micro, synthetic_shards, tmp_path_factory):
    """The 1-process run of each optimizer (made when first asked)."""
    return micro.runs(synthetic_shards, tmp_path_factory.mktemp("one"), STEPS)


@pytest.mark.slow
@pytest.mark.parametrize(("fsdp", "optimizer"), [("no", "adamw"), ("yes", "adamw"), ("no", "muon")])
def test_two_gloo_processes_match_one_process(micro, synthetic_shards, one_process, tmp_path, fsdp, optimizer):
    """Muon under DDP: every rank orthogonalises the same all-reduced gradients (FSDP2 + Muon is refused)."""
    two = tmp_path / "two"
    argv = micro.args(synthetic_shards, two, STEPS, "--set", f"train.fsdp={fsdp}", "--optimizer", optimizer)
    proc = subprocess.run([sys.executable, "-m", "torch.distributed.run", "--standalone", "--nproc_per_node=2",
                           "-m", "pretrain", *argv], cwd=ROOT, capture_output=True, text=True, timeout=240)
    assert proc.returncode == 0, proc.stderr[-3000:]
    one = one_process(optimizer)
    a, b = trajectory(one), trajectory(two)
    assert [r["step"] for r in b] == list(range(1, STEPS + 1))
    assert len(read_jsonl(two / "metrics.jsonl")) == STEPS  # only rank 0 writes
    # Captured stderr is not a terminal: no bar but plain lines, rank 0's only (the first, every log_interval-th and
    # the last step's).
    interval = TrainConfig().log_interval
    assert len(re.findall(r"^\[pretrain\] step \d+/", proc.stderr, re.MULTILINE)) == len(
        {1, STEPS, *range(interval, STEPS + 1, interval)}), proc.stderr[-3000:]
    assert [r["loss"] for r in b] == pytest.approx([r["loss"] for r in a], rel=1e-5)
    assert [r["grad_norm"] for r in b] == pytest.approx([r["grad_norm"] for r in a], rel=1e-4)
    assert b[-1]["loss"] < 0.95 * b[0]["loss"]  # it trained, and both runs agree on how
    # The checkpoint holds full (unsharded) weights equal to the 1-process run's.
    mine, theirs = load_checkpoint(latest_checkpoint(two)), load_checkpoint(latest_checkpoint(one))
    assert mine["fsdp"] == (fsdp == "yes")
    for name, tensor in theirs["model"].items():
        assert mine["model"][name].shape == tensor.shape
        assert mine["model"][name].float().sub(tensor).abs().max() < 1e-4, name
