"""kill -9, SIGTERM or Ctrl-C in the middle of a run, then --resume: the loss trajectory equals the
uninterrupted run's exactly, with either optimizer (Muon's momentum buffers and AdamW's moments are both in
the checkpoint). SIGTERM and SIGINT save a checkpoint at the next step boundary, so no step is lost; after
kill -9 the steps since the last checkpoint are replayed."""

from __future__ import annotations

import os
import signal
import subprocess
import sys
import time
from pathlib import Path

import pytest

from common.fileio import read_jsonl
from pretrain.cli import main
from pretrain.eval.plots import trajectory
from pretrain.train.checkpoint import latest_checkpoint

ROOT = Path(__file__).resolve().parents[3]


STEPS, COMMON = 24, ["--set", "train.checkpoint_interval=4", "--set", "train.eval_interval=8"]
OPTIMIZERS = ["adamw", "muon"]


@pytest.fixture(scope="module")
def references(micro, synthetic_shards, tmp_path_factory):
    """The uninterrupted run of each optimizer the interrupted ones are compared with (made when first asked)."""
    made = {}

    def reference(optimizer: str) -> Path:
        if optimizer not in made:
            made[optimizer] = tmp_path_factory.mktemp(f"reference-{optimizer}") / "run"
            assert main(micro.args(synthetic_shards, made[optimizer], STEPS, *COMMON, "--optimizer", optimizer)) == 0
        return made[optimizer]
    return reference


def assert_same_trajectory(run, reference) -> None:
    ref, got = trajectory(reference), trajectory(run)
    assert [r["step"] for r in got] == list(range(1, STEPS + 1))
    assert [r["loss"] for r in got] == [r["loss"] for r in ref]
    assert [r["grad_norm"] for r in got] == [r["grad_norm"] for r in ref]
    assert [r["lr"] for r in got] == [r["lr"] for r in ref]
    assert read_jsonl(run / "val.jsonl")[-1]["languages"] == read_jsonl(reference / "val.jsonl")[-1]["languages"]


def wait_for_step(proc: subprocess.Popen, run, step: int) -> None:
    """Until the run has logged ``step`` (the deadline only turns a bug into a failure instead of a hang)."""
    deadline = time.monotonic() + 600
    while proc.poll() is None and time.monotonic() < deadline:
        done = read_jsonl(run / "metrics.jsonl")
        if done and done[-1]["step"] == step:
            return
        time.sleep(0.02)
    raise AssertionError(f"the run never logged step {step} (exit code {proc.poll()})")


def supervisors_of(run) -> list[int]:
    """The pids of the supervisor processes watching ``run``."""
    pids = []
    for cmdline in Path("/proc").glob("[0-9]*/cmdline"):
        try:
            argv = cmdline.read_bytes().split(b"\0")
        except OSError:
            continue  # the process ended meanwhile
        if b"pretrain.guard.supervisor" in argv and str(run).encode() in argv:
            pids.append(int(cmdline.parent.name))
    return pids


@pytest.mark.slow
@pytest.mark.parametrize("optimizer", OPTIMIZERS)
def test_sigkill_and_resume_reproduces_the_uninterrupted_trajectory(micro, synthetic_shards, references, tmp_path,
                                                                    optimizer):
    steps, common = STEPS, [*COMMON, "--optimizer", optimizer]
    killed = tmp_path / "killed"

    # The `hang` fault stops the trainer before step 11 without changing any number, so the kill lands there
    # whatever the machine's load (the deadline only turns a bug into a failure instead of a hang).
    # With a supervisor that never judges (so it cannot change a number), which must not outlive the trainer.
    argv = [a for a in micro.args(synthetic_shards, killed, steps, *common) if a != "--no-supervisor"]
    argv += ["--set", "supervisor.min_history=1000", "--set", "supervisor.poll_s=0.05", "--inject-fault", "hang@11"]
    proc = subprocess.Popen([sys.executable, "-m", "pretrain", *argv], cwd=ROOT, stdout=subprocess.DEVNULL,
                            stderr=subprocess.DEVNULL)
    deadline = time.monotonic() + 600
    while proc.poll() is None and time.monotonic() < deadline:
        done = read_jsonl(killed / "metrics.jsonl")
        if done and done[-1]["step"] == 10:
            assert supervisors_of(killed), "the supervisor should be watching the run"
            os.kill(proc.pid, signal.SIGKILL)
            break
        time.sleep(0.02)
    assert proc.wait() == -signal.SIGKILL, "the run should have hung at step 11 and been killed there"
    deadline = time.monotonic() + 60  # the supervisor notices at its next poll that the trainer is gone
    while supervisors_of(killed) and time.monotonic() < deadline:
        time.sleep(0.05)
    assert not supervisors_of(killed), "the supervisor must not outlive a killed trainer"
    before = read_jsonl(killed / "metrics.jsonl")
    assert before[-1]["step"] < steps

    assert main(micro.args(synthetic_shards, killed, steps, *common, "--resume")) == 0
    log = read_jsonl(killed / "metrics.jsonl")
    # The log is cut back to the last checkpoint (step 8), and the resumed process (generation 2) replayed
    # the steps after it: each step once.
    assert [r["step"] for r in log] == list(range(1, steps + 1))
    assert [r["gen"] for r in log] == [1] * 8 + [2] * (steps - 8)
    assert_same_trajectory(killed, references(optimizer))


@pytest.mark.slow
@pytest.mark.parametrize("optimizer", OPTIMIZERS)
def test_sigterm_checkpoints_at_the_step_boundary_and_resume_loses_no_step(micro, synthetic_shards, references,
                                                                           tmp_path, optimizer):
    run, common = tmp_path / "run", [*COMMON, "--optimizer", optimizer]
    # With its supervisor (which must end with it); one that never judges, so that it cannot change a number.
    argv = [a for a in micro.args(synthetic_shards, run, STEPS, *common) if a != "--no-supervisor"]
    # `await_signal` holds the trainer before step 11 until the signal is in, so the stop lands at the
    # boundary after step 10 (not a checkpoint step) whatever the machine's load.
    argv += ["--set", "supervisor.min_history=1000", "--set", "supervisor.poll_s=0.05", "--inject-fault", "await_signal@11"]
    with open(tmp_path / "stderr.txt", "w") as err:
        proc = subprocess.Popen([sys.executable, "-m", "pretrain", *argv], cwd=ROOT, stdout=subprocess.DEVNULL,
                                stderr=err)
        wait_for_step(proc, run, 10)
        assert supervisors_of(run), "the supervisor should be watching the run"
        os.kill(proc.pid, signal.SIGTERM)
        assert proc.wait(timeout=600) == 128 + signal.SIGTERM
    stderr = (tmp_path / "stderr.txt").read_text()
    assert "Traceback" not in stderr
    assert stderr.splitlines()[-1] == (f"pretrain: stopped by SIGTERM at step 10, checkpoint saved; continue with: "
                                       f"pretrain launch --out {run} --resume")
    assert not supervisors_of(run), "the supervisor must not outlive its trainer"
    assert latest_checkpoint(run).name == "step_00000010.pt"
    assert not (run / "eval.json").exists()

    assert main(micro.args(synthetic_shards, run, STEPS, *common, "--resume")) == 0
    assert [r["step"] for r in read_jsonl(run / "metrics.jsonl")] == list(range(1, STEPS + 1)), "no step replayed"
    assert_same_trajectory(run, references(optimizer))


@pytest.mark.slow
def test_ctrl_c_stops_with_one_line_and_exit_130(micro, synthetic_shards, tmp_path):
    run = tmp_path / "run"
    argv = micro.args(synthetic_shards, run, STEPS, *COMMON, "--inject-fault", "await_signal@6")
    proc = subprocess.Popen([sys.executable, "-m", "pretrain", *argv], cwd=ROOT, stdout=subprocess.DEVNULL,
                            stderr=subprocess.PIPE, text=True, start_new_session=True)
    wait_for_step(proc, run, 5)
    os.killpg(proc.pid, signal.SIGINT)  # what Ctrl-C at a terminal does: the whole foreground group
    _, stderr = proc.communicate(timeout=600)
    assert proc.returncode == 128 + signal.SIGINT
    assert "Traceback" not in stderr and "KeyboardInterrupt" not in stderr
    said = [line for line in stderr.splitlines() if line.startswith("pretrain:")]
    assert said == [f"pretrain: stopped by SIGINT at step 5, checkpoint saved; continue with: "
                    f"pretrain launch --out {run} --resume"]
    assert stderr.splitlines()[-1] == said[0]
    assert latest_checkpoint(run).name == "step_00000005.pt"
