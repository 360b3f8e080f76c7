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


@pytest.mark.parametrize("now", [20, 40, 16])
def test_a_schedule_replanned_inside_the_warmup_goes_on_from_the_rate_it_had(now):
    """The finding: `tiny` over 200 steps (warmup 30) resumed at step 15 with --max-steps 20: the shorter plan's
    warmup ends at step 4, and the rate went from 0.001 to 0.00033 in one step."""
    import dataclasses

    from pretrain.train.optim import replan_schedule

    old = apply_overrides(preset("tiny", 512), ["train.max_steps=200"]).optim
    new = dataclasses.replace(old)
    replan_schedule(new, 15, 200, now)
    got = [lr_at(s, new, now) for s in range(15, now)]
    assert got[0] == lr_at(15, old, 200), "the first resumed step runs at the rate the old plan gave it"
    if now == 16:
        return  # one update left, the resumed one: its rate is the old plan's (no jump wins over the floor)
    assert got[-1] == pytest.approx(old.lr * old.min_lr_ratio)
    # Smooth: no step moves the rate by more than the steepest step of a fresh plan of the same length.
    fresh = [lr_at(s, old, now) for s in range(now)]
    steepest = max(abs(a - b) for a, b in zip(fresh, fresh[1:], strict=False))
    assert max(abs(a - b) for a, b in zip(got, got[1:], strict=False)) <= steepest + 1e-12
    if now == 40:  # a warmup that still fits goes on to the peak, as a fresh 40-step run has it
        assert max(got) == pytest.approx(old.lr)


def test_a_longer_plan_replanned_inside_the_warmup_warms_up_to_its_own_peak():
    import dataclasses

    from pretrain.train.optim import replan_schedule

    old = apply_overrides(preset("tiny", 512), ["train.max_steps=20"]).optim  # warmup 30 shortened to 4
    new = dataclasses.replace(old)
    replan_schedule(new, 2, 20, 200)
    got = [lr_at(s, new, 200) for s in range(2, 200)]
    assert got[0] == lr_at(2, old, 20) and new.replan_warmup == 30
    peak = got.index(max(got)) + 2
    assert peak == 30 and max(got) == pytest.approx(old.lr)
    assert all(a < b for a, b in zip(got[:peak - 2], got[1:peak - 1], strict=False))  # rising to the peak
    assert got[-1] == pytest.approx(old.lr * old.min_lr_ratio)


def test_a_run_resumed_inside_its_warmup_with_a_shorter_plan_keeps_its_rate(micro, synthetic_shards, tmp_path):
    """End to end: a 16-step run with a 10-step warmup continued from its step 4 as an 8-step one, whose own
    warmup would be 1 step."""
    from pretrain.config import load_config

    run = tmp_path / "run"
    warm = ["--set", "optim.warmup_steps=10", "--set", "train.keep_last=5"]
    assert main(micro.args(synthetic_shards, run, 16, *COMMON, *warm)) == 0
    planned = read_jsonl(run / "metrics.jsonl")
    assert main(micro.args(synthetic_shards, run, 8, *COMMON, *warm, "--resume-from",
                           str(run / "checkpoints" / "step_00000004.pt"), "--replan-schedule")) == 0
    log = read_jsonl(run / "metrics.jsonl")
    assert [r["step"] for r in log] == list(range(1, 9))
    assert log[4]["lr"] == planned[4]["lr"], "step 5 runs at the rate the plan gave it: no jump"
    lrs = [r["lr"] for r in log[4:]]
    assert all(a >= b for a, b in zip(lrs, lrs[1:], strict=False))
    cfg = load_config(run / "config.json")
    assert lrs[-1] == pytest.approx(cfg.optim.lr * cfg.optim.min_lr_ratio) and cfg.optim.replan_step == 4


def test_the_model_card_says_a_replan_inside_the_warmup_climbs_first():
    from pretrain.release.model_card import CardInputs, _training_section

    cfg = apply_overrides(preset("tiny", 512), ["train.max_steps=200"])
    cfg.optim.replan_step, cfg.optim.replan_lr, cfg.optim.replan_warmup = 2, 2e-4, 30
    card = "\n".join(_training_section(CardInputs(name="m", config=cfg, step=200, tokens_seen=204800,
                                                  checkpoint_sha256="0" * 64, tokenizer={}, dtype="float32")))
    assert "from 0.0002 up to 0.002 at step 30, then down to the floor at step 200" in card
