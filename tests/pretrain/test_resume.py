"""kill -9 in the middle of a run, then --resume: the loss trajectory equals the uninterrupted run's exactly."""

from __future__ import annotations

import os
import signal
import subprocess
import sys
import time

import pytest

from common.fileio import read_jsonl
from pretrain.cli import main
from pretrain.plots import trajectory

ROOT = __import__("pathlib").Path(__file__).resolve().parents[2]


@pytest.mark.slow
def test_sigkill_and_resume_reproduces_the_uninterrupted_trajectory(micro, synthetic_shards, tmp_path):
    steps, common = 24, ["--set", "train.checkpoint_interval=4", "--set", "train.eval_interval=8"]
    reference, killed = tmp_path / "reference", tmp_path / "killed"
    assert main(micro.args(synthetic_shards, reference, steps, *common)) == 0

    # The `hang` fault stops the trainer before step 11 without changing any number, so the kill lands there
    # whatever the machine's load (the deadline only turns a bug into a failure instead of a hang).
    proc = subprocess.Popen([sys.executable, "-m", "pretrain", *micro.args(synthetic_shards, killed, steps, *common,
                                                                        "--inject-fault", "hang@11")],
                            cwd=ROOT, stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL)
    deadline = time.monotonic() + 600
    while proc.poll() is None and time.monotonic() < deadline:
        done = read_jsonl(killed / "metrics.jsonl")
        if done and done[-1]["step"] == 10:
            os.kill(proc.pid, signal.SIGKILL)
            break
        time.sleep(0.02)
    assert proc.wait() == -signal.SIGKILL, "the run should have hung at step 11 and been killed there"
    before = read_jsonl(killed / "metrics.jsonl")
    assert before[-1]["step"] < steps

    assert main(micro.args(synthetic_shards, killed, steps, *common, "--resume")) == 0
    log = read_jsonl(killed / "metrics.jsonl")
    replayed = [r["step"] for r in log].count(9)
    assert replayed == 2, "the resume should have replayed the steps after the last checkpoint (step 8)"
    ref, got = trajectory(reference), trajectory(killed)
    assert [r["step"] for r in got] == list(range(1, steps + 1))
    assert [r["loss"] for r in got] == [r["loss"] for r in ref]
    assert [r["grad_norm"] for r in got] == [r["grad_norm"] for r in ref]
    assert [r["lr"] for r in got] == [r["lr"] for r in ref]
    assert read_jsonl(killed / "val.jsonl")[-1]["languages"] == read_jsonl(reference / "val.jsonl")[-1]["languages"]
