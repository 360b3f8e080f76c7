"""A run has one line of checkpoints: a branch (``--resume-from`` an earlier step) gets its own line, and
``--resume``, pruning and the best stay within the live one; what a branch abandons is kept aside. Also the
resume edges of the same kind: nothing to resume, a corrupt newest checkpoint, a pickle with code in it."""

from __future__ import annotations

import json
import os
import pickle
import signal
import subprocess
import sys
from pathlib import Path

import pytest

from common.fileio import file_sha256, read_jsonl
from pretrain.cli import main
from pretrain.train import rundir
from pretrain.train.checkpoint import (
    abandoned_dir,
    checkpoint_dir,
    latest_checkpoint,
    load_checkpoint,
    read_latest,
    redone_dir,
    step_checkpoints,
)

ROOT = Path(__file__).resolve().parents[3]
COMMON = ["--set", "train.checkpoint_interval=4", "--set", "train.eval_interval=4"]


def names(paths) -> list[str]:
    return [p.name for p in paths]


@pytest.mark.slow
def test_resume_after_a_killed_branch_continues_the_branch(micro, synthetic_shards, tmp_path, capsys):
    """The finding: 20 steps (checkpoints 4..20), then ``--resume-from step_4 --data OTHER`` writes a new step 8
    and is killed. ``--resume`` took step 20 of the abandoned run, and with keep_last 3 the pruning by step
    number deleted the new step 8 right after it was written."""
    run = tmp_path / "run"
    assert main(micro.args(synthetic_shards, run, 20, *COMMON, "--set", "train.keep_last=5")) == 0
    first = {r["step"]: r for r in read_jsonl(run / rundir.METRICS)}
    old_best = read_latest(run)["best_step"]
    other = micro.write_synthetic(tmp_path / "other", seed=1)
    step_4 = checkpoint_dir(run) / "step_00000004.pt"

    # The branch kills itself (SIGKILL) halfway through writing its step 12, after its step 8 was checkpointed:
    # the kill lands there whatever the machine's load, with nothing to wait for.
    argv = micro.args(other, run, 20, *COMMON, "--set", "train.keep_last=3", "--resume-from", str(step_4),
                      "--inject-fault", "kill_during_checkpoint@12")
    proc = subprocess.run([sys.executable, "-m", "pretrain", *argv], cwd=ROOT, stdout=subprocess.DEVNULL,
                          stderr=subprocess.DEVNULL, timeout=600)
    assert proc.returncode == -signal.SIGKILL, "the branch should have been killed writing its step 12"
    assert read_latest(run)["step"] == 8
    new_8 = checkpoint_dir(run) / "step_00000008.pt"
    assert new_8.exists(), "the branch's step 8 must not be pruned"
    assert names(step_checkpoints(run)) == ["step_00000004.pt", "step_00000008.pt"]
    # The abandoned line is kept aside, under a name that says so, with its metrics.
    aside = abandoned_dir(run, 1)
    assert sorted(p.name for p in aside.glob("step_*.pt")) == [f"step_{s:08d}.pt" for s in (8, 12, 16, 20)]
    assert [r["step"] for r in read_jsonl(aside / rundir.METRICS)] == list(range(5, 21))

    capsys.readouterr()
    assert main(micro.args(other, run, 20, *COMMON, "--set", "train.keep_last=3", "--resume")) == 0
    err = capsys.readouterr().err
    assert f"resumed from {new_8} at step 8" in err
    final = read_jsonl(run / rundir.METRICS)
    assert [r["step"] for r in final] == list(range(1, 21)), "each step once, the branch's"
    assert all(r["loss"] == first[r["step"]]["loss"] for r in final[:4])
    assert final[8]["loss"] != first[9]["loss"], "step 9 trained on the branch's data, not the old line's"
    assert names(step_checkpoints(run)) == [f"step_{s:08d}.pt" for s in (12, 16, 20)]
    meta = json.loads((checkpoint_dir(run) / "step_00000020.json").read_text())
    assert meta["line"] == 2 and meta["lineage"] == [[1, 0], [2, 4]]
    latest = read_latest(run)
    best_meta = json.loads((checkpoint_dir(run) / "best.json").read_text())
    # The best is the live line's: step 4 or a step of the branch, never the abandoned line's.
    assert latest["best_step"] == best_meta["step"] and (best_meta["step"] <= 4 or best_meta["line"] == 2)
    if old_best > 4:
        assert (aside / "best.pt").exists()
    assert sorted(p.name for p in aside.glob("step_*.pt")) == [f"step_{s:08d}.pt" for s in (8, 12, 16, 20)]


def test_resume_from_the_newest_checkpoint_is_no_branch(micro, synthetic_shards, tmp_path):
    run = tmp_path / "run"
    assert main(micro.args(synthetic_shards, run, 8, *COMMON)) == 0
    newest = checkpoint_dir(run) / "step_00000008.pt"
    assert main(micro.args(synthetic_shards, run, 8, *COMMON, "--resume-from", str(newest))) == 0
    assert read_latest(run)["lineage"] == [[1, 0]] and not (run / "abandoned").exists()


def test_resume_with_no_checkpoint_left_is_refused(micro, synthetic_shards, tmp_path, capsys):
    """The finding: after every .pt was deleted, --resume started again from step 0 without a word, and the
    metrics read 1,2,3,4,1,2,..."""
    run = tmp_path / "run"
    assert main(micro.args(synthetic_shards, run, 4, *COMMON)) == 0
    for path in checkpoint_dir(run).glob("*.pt"):
        path.unlink()
    before = (run / rundir.METRICS).read_bytes()
    capsys.readouterr()
    assert main(micro.args(synthetic_shards, run, 4, *COMMON, "--resume")) == 2
    err = capsys.readouterr().err.strip().splitlines()
    assert len(err) == 1 and "no complete checkpoint" in err[0] and "--resume-from" in err[0]
    assert (run / rundir.METRICS).read_bytes() == before


def test_a_truncated_newest_checkpoint_is_moved_aside_and_no_step_is_logged_twice(micro, synthetic_shards,
                                                                                tmp_path, capsys):
    """The finding: after a fallback past a truncated newest checkpoint, the redone step overwrote the bad file
    that the message said was kept, and the metrics held that step twice."""
    run = tmp_path / "run"
    common = [*COMMON, "--set", "train.keep_last=5"]
    assert main(micro.args(synthetic_shards, run, 12, *common)) == 0
    newest = checkpoint_dir(run) / "step_00000012.pt"
    os.truncate(newest, newest.stat().st_size // 2)
    bad = newest.read_bytes()
    capsys.readouterr()
    assert main(micro.args(synthetic_shards, run, 12, *common, "--resume")) == 0
    err = capsys.readouterr().err
    assert "step_00000008.pt at step 8" in err and "step_00000012.pt.corrupt" in err
    assert (checkpoint_dir(run) / "step_00000012.pt.corrupt").read_bytes() == bad
    assert (checkpoint_dir(run) / "step_00000012.json.corrupt").exists()
    assert load_checkpoint(newest)["step"] == 12  # the redone step, next to the kept bad file
    assert [r["step"] for r in read_jsonl(run / rundir.METRICS)] == list(range(1, 13))
    steps = [r["step"] for r in read_jsonl(run / rundir.VALIDATION)]
    assert steps == sorted(set(steps))
    # The records of the redone steps 9-12 are kept, not dropped: the only trace of what led to the stop.
    assert [r["step"] for r in read_jsonl(redone_dir(run, 8) / rundir.METRICS)] == list(range(9, 13))


class _Payload:
    def __reduce__(self):
        return (print, ("a checkpoint must never run this",))


def test_an_intact_newest_checkpoint_that_will_not_load_is_set_aside_as_unloadable(micro, synthetic_shards,
                                                                                   tmp_path, capsys):
    """Its sha256 matches its sidecar (so it is not corrupt: another torch may load it), yet this torch refuses
    it: the resume falls back past it and sets it aside under a name that says so, never over it, never as
    ``.corrupt``."""
    run = tmp_path / "run"
    common = [*COMMON, "--set", "train.keep_last=5"]
    assert main(micro.args(synthetic_shards, run, 12, *common)) == 0
    newest = checkpoint_dir(run) / "step_00000012.pt"
    newest.write_bytes(pickle.dumps({"step": 12, "model": _Payload()}, protocol=2))
    meta = json.loads(newest.with_suffix(".json").read_text())
    newest.with_suffix(".json").write_text(json.dumps({**meta, "sha256": file_sha256(newest)}))
    kept = newest.read_bytes()
    capsys.readouterr()
    assert main(micro.args(synthetic_shards, run, 12, *common, "--resume")) == 0
    err = capsys.readouterr().err
    assert "step_00000008.pt at step 8" in err and "step_00000012.pt.unloadable" in err
    assert (checkpoint_dir(run) / "step_00000012.pt.unloadable").read_bytes() == kept
    assert not (checkpoint_dir(run) / "step_00000012.pt.corrupt").exists()
    assert load_checkpoint(newest)["step"] == 12  # the redone step, beside the kept file


def test_a_checkpoint_with_code_in_it_is_refused_in_one_line(micro, synthetic_shards, tmp_path, capsys):
    evil = tmp_path / "evil" / "step_00000004.pt"
    evil.parent.mkdir()
    evil.write_bytes(pickle.dumps({"step": 4, "model": _Payload()}, protocol=2))
    evil.with_suffix(".json").write_text(json.dumps({"file": evil.name, "step": 4, "sha256": file_sha256(evil)}))
    assert main(micro.args(synthetic_shards, tmp_path / "run", 8, "--resume-from", str(evil))) == 2
    err = capsys.readouterr().err.strip().splitlines()
    assert len(err) == 1 and str(evil) in err[0] and "weights-only" in err[0]
    assert "Traceback" not in capsys.readouterr().err
    assert latest_checkpoint(tmp_path / "run") is None
