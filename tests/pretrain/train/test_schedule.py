"""The learning-rate schedule at its edges: it reaches its peak and ends at its floor at the last update
(docs/pretrain.md), whatever the step count; and a resumed run keeps its schedule unless told to re-plan it."""

from __future__ import annotations

import pytest

from common.fileio import read_jsonl
from pretrain.cli import main
from pretrain.config import apply_overrides, effective_warmup, preset
from pretrain.train.optim import lr_at


def rates(cfg) -> list[float]:
    return [lr_at(s, cfg.optim, cfg.train.max_steps) for s in range(cfg.train.max_steps)]


@pytest.mark.parametrize("schedule", ["cosine", "wsd"])
@pytest.mark.parametrize("steps, warmup", [(4, 3), (4, 4), (20, 30), (3, 30), (2, 1), (5, 3), (900, 30)])
def test_the_schedule_reaches_its_peak_and_ends_at_its_floor(steps, warmup, schedule):
    """The finding: warmup 3 over 4 steps gave 0.333, 0.667, 1.0, 1.0 (the last update at the peak), and `tiny`
    with --max-steps 20 (warmup 30) reached neither the peak nor the floor."""
    cfg = apply_overrides(preset("tiny", 512), [f"train.max_steps={steps}", f"optim.warmup_steps={warmup}",
                                                "optim.min_lr_ratio=0.1", f"optim.schedule={schedule}"])
    got = rates(cfg)
    assert max(got) == pytest.approx(cfg.optim.lr), got
    assert got[-1] == pytest.approx(cfg.optim.lr * 0.1), got
    assert effective_warmup(cfg.optim, steps) <= max(steps - 2, 0) and cfg.optim.warmup_steps == warmup
    if warmup <= steps - 2:
        assert effective_warmup(cfg.optim, steps) == warmup, "a warmup that fits is left alone"


def test_tiny_over_20_steps_warms_up_over_a_fifth_of_them():
    cfg = apply_overrides(preset("tiny", 512), ["train.max_steps=20"])
    assert effective_warmup(cfg.optim, 20) == 4
    assert rates(cfg)[3] == cfg.optim.lr and rates(cfg)[-1] == 0.0


COMMON = ["--set", "train.checkpoint_interval=4", "--set", "train.eval_interval=4"]


def test_a_changed_max_steps_on_resume_is_refused_unless_the_schedule_is_replanned(micro, synthetic_shards, tmp_path,
                                                                                   capsys):
    """The finding: resuming a 900-step run at step 451 with --max-steps 1800 re-stretched the cosine, and the
    rate jumped from 1.05e-3 to 1.73e-3. Here: a 16-step run continued from its step 8 as a 24-step one."""
    from pretrain.config import load_config

    run = tmp_path / "run"
    assert main(micro.args(synthetic_shards, run, 16, *COMMON, "--set", "train.keep_last=5")) == 0
    planned = read_jsonl(run / "metrics.jsonl")
    step_8 = run / "checkpoints" / "step_00000008.pt"
    capsys.readouterr()
    assert main(micro.args(synthetic_shards, run, 24, *COMMON, "--resume-from", str(step_8))) == 2
    err = capsys.readouterr().err.strip().splitlines()
    assert len(err) == 1 and "--max-steps 24" in err[0] and "--replan-schedule" in err[0]
    assert read_jsonl(run / "metrics.jsonl") == planned, "refused before any work"

    assert main(micro.args(synthetic_shards, run, 24, *COMMON, "--resume-from", str(step_8),
                           "--replan-schedule")) == 0
    log = read_jsonl(run / "metrics.jsonl")
    assert [r["step"] for r in log] == list(range(1, 25))
    assert [r["lr"] for r in log[:8]] == [r["lr"] for r in planned[:8]]
    assert log[8]["lr"] == planned[8]["lr"], "step 9 runs at the rate the plan gave it: no jump"
    cfg = load_config(run / "config.json")
    assert (cfg.optim.replan_step, cfg.optim.replan_lr, cfg.train.max_steps) == (8, planned[8]["lr"], 24)
    assert log[-1]["lr"] == pytest.approx(cfg.optim.lr * cfg.optim.min_lr_ratio)
    lrs = [r["lr"] for r in log[8:]]
    assert all(a >= b for a, b in zip(lrs, lrs[1:], strict=False)) and lrs[-2] > lrs[-1]


def test_a_replanned_schedule_goes_on_from_the_rate_it_had(micro, synthetic_shards, tmp_path):
    """Re-planned in the middle of the decay: the rate of the resumed step is the one the old plan gave it."""
    from pretrain.config import OptimConfig

    old = OptimConfig(lr=1.0, min_lr_ratio=0.1, warmup_steps=10)
    at = lr_at(450, old, 900)
    new = OptimConfig(lr=1.0, min_lr_ratio=0.1, warmup_steps=10, replan_step=450, replan_lr=at)
    assert lr_at(450, new, 1800) == pytest.approx(at)
    assert lr_at(450, old, 1800) > 1.5 * at  # what the stretched cosine would have jumped to
    assert lr_at(1799, new, 1800) == pytest.approx(0.1)
    assert lr_at(1000, new, 1800) < at


def test_the_model_card_says_the_warmup_used_and_the_replan():
    from pretrain.release.model_card import CardInputs, _training_section

    cfg = apply_overrides(preset("tiny", 512), ["train.max_steps=20"])
    card = "\n".join(_training_section(CardInputs(name="m", config=cfg, step=20, tokens_seen=20480,
                                                  checkpoint_sha256="0" * 64, tokenizer={}, dtype="float32")))
    assert "linear warmup over 4 steps" in card and "re-planned" not in card
    cfg.optim.replan_step, cfg.optim.replan_lr = 8, 1e-3
    card = "\n".join(_training_section(CardInputs(name="m", config=cfg, step=20, tokens_seen=20480,
                                                  checkpoint_sha256="0" * 64, tokenizer={}, dtype="float32")))
    assert "re-planned on resume at step 8 (`--replan-schedule`): from 0.001 down to the floor at step 20" in card
