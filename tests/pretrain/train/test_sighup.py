"""A closed terminal or a lost ssh session (SIGHUP) saves what SIGTERM saves: a checkpoint at the next step
boundary, one line, exit 129; --resume continues from it (docs/contract.md, Signals)."""

from __future__ import annotations

import signal
import subprocess
import sys
import time
from pathlib import Path

import pytest

from common.fileio import read_jsonl
from pretrain.train.checkpoint import latest_checkpoint

ROOT = Path(__file__).resolve().parents[3]
STEPS = 12


def wait_for_step(proc: subprocess.Popen, run: Path, step: int) -> None:
    """Until the run has logged ``step`` (held there by the await_signal fault; the deadline only turns a bug
    into a failure instead of a hang)."""
    deadline = time.monotonic() + 600
    while proc.poll() is None and time.monotonic() < deadline:
        done = read_jsonl(run / "metrics.jsonl") if (run / "metrics.jsonl").exists() else []
        if done and done[-1]["step"] == step:
            return
        time.sleep(0.02)
    raise AssertionError(f"the run never logged step {step} (exit code {proc.poll()})")


@pytest.mark.slow
def test_sighup_checkpoints_at_the_step_boundary_like_sigterm(micro, synthetic_shards, tmp_path):
    run = tmp_path / "run"
    argv = micro.args(synthetic_shards, run, STEPS, "--set", "train.checkpoint_interval=100",
                      "--inject-fault", "await_signal@6")
    proc = subprocess.Popen([sys.executable, "-m", "pretrain", *argv], cwd=ROOT, stdout=subprocess.DEVNULL,
                            stderr=subprocess.PIPE, text=True, start_new_session=True)
    try:
        wait_for_step(proc, run, 5)
        proc.send_signal(signal.SIGHUP)
        _, stderr = proc.communicate(timeout=600)
    finally:
        proc.kill()
    assert proc.returncode == 128 + signal.SIGHUP, stderr
    assert "Traceback" not in stderr
    assert stderr.splitlines()[-1] == (f"pretrain: stopped by SIGHUP at step 5, checkpoint saved; continue with: "
                                       f"pretrain launch --out {run} --resume")
    assert latest_checkpoint(run).name == "step_00000005.pt"  # saved by the signal, not by the interval
