"""Recoveries that recover: the supervisor protocol against a real trainer with the interleaving forced step by
step, void requests after a resume, and --resume past a corrupt checkpoint."""

from __future__ import annotations

import json
import os

import pytest

from common.fileio import read_jsonl, write_json
from pretrain.cli import main
from pretrain.config import SupervisorConfig
from pretrain.eval.plots import trajectory
from pretrain.guard.supervisor import Supervisor
from pretrain.train import rundir
from pretrain.train.checkpoint import CheckpointError, step_checkpoints
from pretrain.train.data import open_dataset
from pretrain.train.distributed import setup
from pretrain.train.trainer import Trainer

pytestmark = pytest.mark.usefixtures("one_torch_thread")

ROLLBACK = SupervisorConfig(window=20, min_history=5, halt_policy="rollback", throughput_fraction=0.001)


def make_trainer(micro, data, out, *overrides, resume=False, resume_from=None, replan=False):
    cfg = micro.config(data, out, *overrides)
    return Trainer(cfg, open_dataset(data), setup("cpu", "fp32"), resume=resume, resume_from=resume_from,
                   replan=replan)


@pytest.mark.parametrize(("lag", "optimizer"), [(0, "adamw"), (2, "adamw"), (0, "muon")],
                         ids=["prompt", "lagging", "prompt-muon"])
def test_one_nan_gives_one_rollback(micro, synthetic_shards, tmp_path, lag, optimizer):
    """A NaN at step 6 poisons the weights, so every later step of that generation is NaN too. The supervisor
    polls after step 6 + ``lag``: a lagging one sees NaN steps logged after the first; they must not cost a
    second rollback, nor leave a request behind. With Muon the rollback restores both optimizers' state."""
    run = tmp_path / "run"
    trainer = make_trainer(micro, synthetic_shards, run, "train.max_steps=12", "train.checkpoint_interval=4",
                           "train.inject_faults=nan_loss@6", f"optim.name={optimizer}")
    supervisor = Supervisor(run, os.getpid(), ROLLBACK, trainer.begin())

    def on_step(rec):
        if rec["gen"] > 1 or rec["step"] >= 6 + lag:
            supervisor.poll()

    assert trainer.fit(on_step) == 0
    supervisor.poll()
    rollbacks = read_jsonl(run / rundir.ROLLBACKS)
    assert [(r["reason"], r["request_step"], r["resumed_at_step"]) for r in rollbacks] == [("nonfinite_loss", 6, 4)]
    assert [e["event"] for e in read_jsonl(run / rundir.SUPERVISOR_LOG)] == ["request"]
    assert not (run / rundir.HALT_REQUEST).exists()
    final = trajectory(run)
    assert [r["step"] for r in final] == list(range(1, 13)) and all(r["loss"] is not None for r in final)
    assert {r["gen"] for r in final[4:]} == {2}


def test_a_request_left_by_an_ended_run_is_void_on_resume(micro, synthetic_shards, tmp_path):
    """Finding: the run ended with a second request on disk, and the next --resume obeyed it."""
    run = tmp_path / "run"
    first = make_trainer(micro, synthetic_shards, run, "train.max_steps=8", "train.checkpoint_interval=4")
    assert first.fit() == 0
    rundir.write_request(run, {"gen": first.gen, "reason": "nonfinite_loss", "step": 8, "action": "rollback",
                               "skip_batches": [8, 8], "evidence": {}})
    resumed = make_trainer(micro, synthetic_shards, run, "train.max_steps=12", "train.checkpoint_interval=4",
                           resume=True, replan=True)
    assert resumed.fit() == 0
    assert not (run / rundir.ROLLBACKS).exists()
    assert [v["request"]["gen"] for v in read_jsonl(run / rundir.VOID_REQUESTS)] == [first.gen]
    assert resumed.gen == first.gen + 1 and trajectory(run)[-1]["step"] == 12


def _corrupt(path):
    data = bytearray(path.read_bytes())
    data[len(data) // 2] ^= 0xFF
    path.write_bytes(bytes(data))


def test_resume_falls_back_to_the_newest_checkpoint_that_verifies(micro, synthetic_shards, tmp_path, capsys):
    run = tmp_path / "run"
    common = ["--set", "train.checkpoint_interval=4", "--set", "train.keep_last=5"]
    assert main(micro.args(synthetic_shards, run, 12, *common)) == 0
    newest = step_checkpoints(run)[-1]
    assert newest.name == "step_00000012.pt"
    _corrupt(newest)
    corrupt = newest.read_bytes()
    capsys.readouterr()
    assert main(micro.args(synthetic_shards, run, 16, *common, "--resume", "--replan-schedule")) == 0
    err = capsys.readouterr().err
    assert "moved step_00000012.pt aside to checkpoints/step_00000012.pt.corrupt" in err and "corrupt" in err
    assert "resumed from" in err and "step_00000008.pt at step 8" in err
    # Kept for a person to look at, under a name that says so, not overwritten by the redone step 12.
    assert newest.with_name(newest.name + ".corrupt").read_bytes() == corrupt
    steps = [r["step"] for r in read_jsonl(run / rundir.METRICS)]
    assert steps == list(range(1, 17)), "the log is cut back to the resumed step: no step twice"


def test_resume_from_a_chosen_checkpoint(micro, synthetic_shards, tmp_path, capsys):
    run = tmp_path / "run"
    common = ["--set", "train.checkpoint_interval=4", "--set", "train.keep_last=5"]
    assert main(micro.args(synthetic_shards, run, 12, *common)) == 0
    chosen = run / "checkpoints" / "step_00000004.pt"
    assert main(micro.args(synthetic_shards, run, 12, *common, "--resume-from", str(chosen))) == 0
    steps = [r["step"] for r in read_jsonl(run / rundir.METRICS)]
    assert steps == list(range(1, 13))  # the branch's; the abandoned line's steps 5-12 are kept aside
    assert [r["step"] for r in read_jsonl(run / "abandoned" / "line1" / rundir.METRICS)] == list(range(5, 13))
    _corrupt(chosen)
    capsys.readouterr()
    assert main(micro.args(synthetic_shards, run, 12, *common, "--resume-from", str(chosen))) == 2
    assert "step_00000004.pt" in capsys.readouterr().err


def test_resume_with_no_valid_checkpoint_says_which_failed(micro, synthetic_shards, tmp_path):
    run = tmp_path / "run"
    assert make_trainer(micro, synthetic_shards, run, "train.max_steps=4", "train.checkpoint_interval=4").fit() == 0
    _corrupt(step_checkpoints(run)[0])
    with pytest.raises(CheckpointError, match="no checkpoint of .* verifies: .*step_00000004.pt"):
        make_trainer(micro, synthetic_shards, run, "train.max_steps=8", resume=True)


def test_generation_is_claimed_per_process_and_written_in_every_record(micro, synthetic_shards, tmp_path):
    run = tmp_path / "run"
    write_json(run.parent / "unrelated.json", {})  # nothing outside the run directory is read
    assert make_trainer(micro, synthetic_shards, run, "train.max_steps=3").fit() == 0
    assert make_trainer(micro, synthetic_shards, run, "train.max_steps=5", resume=True, replan=True).fit() == 0
    assert [r["gen"] for r in read_jsonl(run / rundir.METRICS)] == [1, 1, 1, 2, 2]
    assert json.loads((run / rundir.HEARTBEAT).read_text())["gen"] == 2
    assert rundir.current_generation(run) == 2
