"""torchrun with 2 CPU processes (gloo, DDP) follows the 1-process loss trajectory for the same global batch."""

from __future__ import annotations

import subprocess
import sys
from pathlib import Path

import pytest

from pretrain.cli import main
from pretrain.plots import read_jsonl, trajectory

ROOT = Path(__file__).resolve().parents[2]


@pytest.mark.slow
def test_two_gloo_processes_match_one_process(micro, synthetic_shards, tmp_path):
    steps = 12
    one, two = tmp_path / "one", tmp_path / "two"
    assert main(micro.args(synthetic_shards, one, steps)) == 0
    proc = subprocess.run([sys.executable, "-m", "torch.distributed.run", "--standalone", "--nproc_per_node=2",
                           "-m", "pretrain", *micro.args(synthetic_shards, two, steps)],
                          cwd=ROOT, capture_output=True, text=True, timeout=240)
    assert proc.returncode == 0, proc.stderr[-3000:]
    config = (two / "config.json").read_text()
    assert '"global_batch_tokens": 256' in config
    a, b = trajectory(one), trajectory(two)
    assert [r["step"] for r in b] == list(range(1, steps + 1))
    assert len(read_jsonl(two / "metrics.jsonl")) == steps  # only rank 0 writes
    assert [r["loss"] for r in b] == pytest.approx([r["loss"] for r in a], rel=1e-5)
    assert [r["grad_norm"] for r in b] == pytest.approx([r["grad_norm"] for r in a], rel=1e-4)
    assert b[-1]["loss"] < 0.9 * b[0]["loss"]  # it trained, and the two runs agree on how
