"""The 2e9-token bangla-0.4b preset and `pretrain launch --dry-run`: the steps follow the token budget and
the learning rate reaches its floor at the last step."""

from __future__ import annotations

import pytest

from pretrain import cli
from pretrain.config import apply_overrides, preset
from pretrain.plan import run_plan
from pretrain.step import lr_at

GPT2_VOCAB = 50257


def test_bangla_preset_trains_a_token_budget_with_the_schedule_ending_at_the_last_step():
    cfg = preset("bangla-0.4b", GPT2_VOCAB)
    assert cfg.train.token_budget == 2e9 and cfg.train.global_batch_tokens == 524288
    assert cfg.train.max_steps == 3815  # ceil(2e9 / 524288)
    steps, optim = cfg.train.max_steps, cfg.optim
    floor = optim.lr * optim.min_lr_ratio
    assert lr_at(steps - 1, optim, steps) == pytest.approx(floor)  # the last update is at the floor
    assert lr_at(steps - 2, optim, steps) > floor  # and the decay runs up to it
    lrs = [lr_at(s, optim, steps) for s in range(optim.warmup_steps, steps)]
    assert lrs == sorted(lrs, reverse=True) and max(lrs) == pytest.approx(optim.lr)


def test_budget_overrides_rederive_the_steps_and_an_explicit_step_count_wins():
    assert apply_overrides(preset("bangla-0.4b", GPT2_VOCAB), ["train.token_budget=1e9"]).train.max_steps == 1908
    assert apply_overrides(preset("bangla-0.4b", GPT2_VOCAB), ["train.global_batch_tokens=262144"]).train.max_steps == 7630
    assert apply_overrides(preset("bangla-0.4b", GPT2_VOCAB), ["train.max_steps=50"]).train.max_steps == 50
    with pytest.raises(ValueError, match="token_budget"):
        apply_overrides(preset("bangla-0.4b", GPT2_VOCAB), ["train.token_budget=-1"])


def test_plan_numbers():
    plan = run_plan(preset("bangla-0.4b", GPT2_VOCAB), tokens_per_s=200_000)
    assert (plan.steps, plan.tokens_per_step, plan.tokens) == (3815, 524288, 3815 * 524288)
    assert (plan.micro_batch, plan.accumulation) == (16, 16)
    assert plan.hours == pytest.approx(3815 * 524288 / 200_000 / 3600)
    assert plan.checkpoint_bytes == 12 * plan.parameters and plan.disk_bytes == 4 * plan.checkpoint_bytes
    assert plan.memory["total_bytes"] > plan.memory["weights_grads_adam_bytes"] == 16 * plan.parameters
    with pytest.raises(ValueError, match="max_steps or train.token_budget"):
        run_plan(apply_overrides(preset("tiny", GPT2_VOCAB), ["train.max_steps=0"]))


def test_launch_dry_run_prints_the_plan(capsys):
    assert cli.main(["launch", "--config", "bangla-0.4b", "--dry-run"]) == 0
    out = capsys.readouterr().out
    assert "2,000,158,720 (2.000e9) for a budget of 2e+09" in out
    assert "3,815 of 524,288 tokens (16 sequences x 16 accumulation" in out
    assert "step 3815 (last): 3e-05" in out  # lr 3e-4 x min_lr_ratio 0.1, at the last step
    assert "assumed: 45% MFU" in out and "GB each" in out and "GB of disk" in out and "per device" in out
    assert cli.main(["launch", "--config", "bangla-0.4b", "--dry-run", "--micro-batch", "32",
                     "--tokens-per-s", "150000"]) == 0
    out = capsys.readouterr().out
    assert "32 sequences x 8 accumulation" in out and "150,000 tokens/s (given)" in out


def test_launch_without_out_is_refused_unless_dry_run(capsys):
    assert cli.main(["launch", "--config", "tiny", "--data", "nowhere"]) == 2
    assert "launch needs --out" in capsys.readouterr().err


def test_the_loss_chunk_in_the_memory_estimate_is_never_larger_than_the_micro_batch():
    from pretrain.config import preset
    from pretrain.model import LOSS_CHUNK_ELEMENTS
    from pretrain.plan import memory_estimate

    small = preset("tiny", 8000)  # 8 x 128 tokens: far fewer logits than one full chunk
    memory = memory_estimate(small, autocast=False)
    logits = small.data.micro_batch * small.seq_len * small.model.vocab_size
    assert memory["activations_bytes"] < 2 * LOSS_CHUNK_ELEMENTS * 4
    assert memory["activations_bytes"] >= 2 * logits * 4
