"""Presets, optimizers and learning-rate schedules are each one table in `pretrain.config`: a new entry there is
accepted by the config's validation, the command line's choices, the trainer (its learning rate, its
checkpoints) and the model card, with nothing else touched. Each test adds one entry (removed again by
monkeypatch) and follows it through."""

from __future__ import annotations

import re

import pytest
import torch

from common.fileio import read_jsonl
from pretrain import cli, config
from pretrain.config import (
    OPTIMIZERS,
    PRESETS,
    SCHEDULES,
    OptimConfig,
    OptimizerSpec,
    Preset,
    Schedule,
    apply_overrides,
    preset,
)
from pretrain.guard.run_plan import plan_run
from pretrain.release.model_card import CardInputs, render
from pretrain.train.checkpoint import latest_checkpoint, load_checkpoint
from pretrain.train.optim import lr_at


def _card(cfg: config.RunConfig) -> str:
    return render(CardInputs(name="m", config=cfg, step=0, tokens_seen=0, dtype="fp32", checkpoint_sha256="0" * 64,
                             tokenizer={"spec": "gpt2", "sha256": "0" * 64, "vocab_size": 300, "bos_id": 0,
                                        "eos_id": 0}, notes=dict.fromkeys(("tokenizer", "data", "eval"), "")))


def test_a_new_preset_is_a_run_config_a_cli_choice_and_a_card(monkeypatch, capsys):
    monkeypatch.setitem(PRESETS, "micro", Preset(model=dict(n_layer=1, n_head=2, n_embd=32, block_size=16),
                                                 optim=dict(lr=1e-3, warmup_steps=2),
                                                 data=dict(micro_batch=2, eval_tokens=64),
                                                 train=dict(global_batch_tokens=64, max_steps=7)))
    cfg = preset("micro", 300)
    assert (cfg.model.n_layer, cfg.model.real_vocab_size, cfg.optim.lr, cfg.train.max_steps) == (1, 300, 1e-3, 7)
    assert config.RunConfig.from_dict(cfg.to_dict()).model_preset == "micro"  # a config.json of it loads back
    parser = cli.build_parser()
    assert parser.parse_args(["bench", "--config", "micro"]).config == "micro"
    assert cli.main(["launch", "--config", "micro", "--vocab-size", "300", "--dry-run"]) == 0
    assert re.search(r"steps +7 of 64 tokens \(2 sequences", capsys.readouterr().out)
    assert "| layers / hidden size / heads | 1 / 32 / 2" in _card(cfg)
    monkeypatch.delitem(PRESETS, "micro")
    with pytest.raises(config.InputError, match="no such preset"):
        preset("micro", 300)


def test_a_new_schedule_is_validated_chosen_followed_and_carded(monkeypatch, capsys):
    def step_down(step: int, o: OptimConfig, max_steps: int) -> float:
        return o.lr * (o.min_lr_ratio if step >= max_steps // 2 else 1.0)

    monkeypatch.setitem(SCHEDULES, "step", Schedule("the peak, then the floor from the middle on", step_down,
                                                    lambda o: f"a step down to {o.lr * o.min_lr_ratio:g} halfway"))
    # tiny's schedule with its own numbers, so the figures below do not follow the preset's
    numbers = ["optim.lr=4e-3", "optim.min_lr_ratio=0.1", "train.max_steps=600"]
    cfg = apply_overrides(preset("tiny", 300), ["optim.schedule=step", "optim.warmup_steps=2", *numbers])
    assert [lr_at(s, cfg.optim, 10) for s in (1, 4, 5, 9)] == pytest.approx([4e-3, 4e-3, 4e-4, 4e-4])
    assert cli.main(["launch", "--config", "tiny", "--vocab-size", "300", "--schedule", "step",
                     "--set", "optim.warmup_steps=2", *[a for n in numbers for a in ("--set", n)], "--dry-run"]) == 0
    assert "step 301: 0.0004, step 600 (last): 0.0004" in capsys.readouterr().out  # cosine: 0.0022 at 301
    assert "then a step down to 0.0004 halfway at step 600" in _card(cfg)
    with pytest.raises(SystemExit):
        cli.main(["launch", "--help"])
    helped = " ".join(capsys.readouterr().out.split())
    assert "--schedule {cosine,wsd,step}" in helped and "step, the peak, then the floor from the middle on" in helped
    monkeypatch.delitem(SCHEDULES, "step")
    with pytest.raises(config.InputError, match="optim.schedule"):
        apply_overrides(preset("tiny", 300), ["optim.schedule=step"])


def test_a_new_optimizer_is_validated_chosen_planned_carded_and_checkpointed(monkeypatch, capsys, micro,
                                                                             synthetic_shards, tmp_path):
    """Plain SGD with momentum (one buffer per parameter), added in the registry alone."""
    def sgd(model, o, device):
        return {"sgd": torch.optim.SGD([p for p in model.parameters() if p.requires_grad], lr=o.lr, momentum=0.9)}

    monkeypatch.setitem(OPTIMIZERS, "sgd", OptimizerSpec(
        help="plain SGD with momentum 0.9", build=sgd, state_floats=lambda m: config.parameter_counts(m).total,
        step_bytes=lambda m, fused: 0, describe=lambda o: f"SGD (momentum 0.9, lr {o.lr:g})"))
    cfg = apply_overrides(preset("tiny", 300), ["optim.name=sgd"])
    assert config.RunConfig.from_dict(cfg.to_dict()).optim.name == "sgd"  # a config.json of it loads back
    plan = plan_run(cfg)
    assert plan.memory["optimizer_state_bytes"] == 4 * plan.parameters  # the one buffer, from the entry
    assert plan.checkpoint_bytes == 8 * plan.parameters
    assert "| optimizer | SGD (momentum 0.9, lr 0.002); gradient clip 1.0 |" in _card(cfg)
    assert ("| optimizer | Muon (lr 0.02, momentum 0.85 rising to 0.95 over 300 steps, Nesterov, 5 Newton-Schulz "
            "steps, weight decay 0.0, adjust_lr_fn original) on the blocks' matrices; AdamW (lr 0.002, betas 0.9, "
            "0.95; weight decay 0.1 on matrices) on the embeddings, head and norms; gradient clip 1.0 |"
            in _card(apply_overrides(preset("tiny", 300), ["optim.name=muon"])))
    with pytest.raises(SystemExit):
        cli.main(["launch", "--help"])
    helped = " ".join(capsys.readouterr().out.split())
    assert "--optimizer {adamw,muon,sgd}" in helped and "sgd, plain SGD with momentum 0.9" in helped

    # Trained, checkpointed with its state, and continued from the checkpoint exactly.
    whole, branch = tmp_path / "whole", tmp_path / "branch"
    assert cli.main(micro.args(synthetic_shards, whole, 6, "--optimizer", "sgd",
                               "--set", "train.checkpoint_interval=3")) == 0
    third = whole / "checkpoints" / "step_00000003.pt"
    state = load_checkpoint(third)
    assert state["config"]["optim"]["name"] == "sgd"
    assert all(set(s) == {"momentum_buffer"} for s in state["optimizer"]["state"].values())
    assert cli.main(micro.args(synthetic_shards, branch, 6, "--optimizer", "sgd", "--resume-from", str(third))) == 0
    steps = [(r["step"], r["loss"], r["grad_norm"]) for r in read_jsonl(branch / "metrics.jsonl")]
    assert steps == [(r["step"], r["loss"], r["grad_norm"]) for r in read_jsonl(whole / "metrics.jsonl")][3:]
    mine, theirs = (load_checkpoint(latest_checkpoint(r))["optimizer"]["state"] for r in (branch, whole))
    assert mine.keys() == theirs.keys()
    assert all(torch.equal(mine[k]["momentum_buffer"], theirs[k]["momentum_buffer"]) for k in mine)
    capsys.readouterr()

    monkeypatch.delitem(OPTIMIZERS, "sgd")
    with pytest.raises(config.InputError, match="optim.name must be one of adamw, muon, got 'sgd'"):
        apply_overrides(preset("tiny", 300), ["optim.name=sgd"])
