"""The `pretrain` command: refusals before any step, resume rules, preflight, time budget."""

from __future__ import annotations

import json

from fertility.fileio import read_jsonl
from pretrain.cli import main


def test_shards_of_another_tokenizer_are_refused_before_training(micro, shards, tmp_path, capsys):
    run = tmp_path / "run"
    assert main(micro.args(shards, run, 5, "--tokenizer", "o200k_base")) == 2
    err = capsys.readouterr().err
    assert "gpt2" in err and "o200k_base" in err
    assert not (run / "metrics.jsonl").exists()


def test_resume_on_shards_of_another_tokenizer_is_refused(micro, synthetic_shards, tmp_path, capsys):
    run = tmp_path / "run"
    assert main(micro.args(synthetic_shards, run, 4)) == 0
    other = micro.write_synthetic(tmp_path / "other", train_tokens=5000, val_tokens=500, sha256="6" * 64)
    assert main(micro.args(other, run, 8, "--resume")) == 2
    assert "was trained with sha256 " + "5" * 64 in capsys.readouterr().err
    assert read_jsonl(run / "metrics.jsonl")[-1]["step"] == 4  # not a single step more


def test_existing_run_needs_resume_and_shape_cannot_change(micro, synthetic_shards, tmp_path, capsys):
    run = tmp_path / "run"
    assert main(micro.args(synthetic_shards, run, 2)) == 0
    assert main(micro.args(synthetic_shards, run, 4)) == 2
    assert "--resume" in capsys.readouterr().err
    assert main(micro.args(synthetic_shards, run, 4, "--resume", "--set", "model.n_layer=3")) == 2
    assert "model.n_layer: 2 -> 3" in capsys.readouterr().err
    assert main(micro.args(synthetic_shards, run, 4, "--resume")) == 0  # more steps is fine
    assert read_jsonl(run / "metrics.jsonl")[-1]["step"] == 4


def test_bad_override_is_a_clear_error(micro, synthetic_shards, tmp_path, capsys):
    assert main(micro.args(synthetic_shards, tmp_path / "r", 2, "--set", "train.max_step=3")) == 2
    assert "train has no field 'max_step'" in capsys.readouterr().err


def test_preflight_only_and_time_budget(micro, synthetic_shards, tmp_path):
    run = tmp_path / "run"
    assert main(micro.args(synthetic_shards, run, 50, "--preflight-only")) == 0
    report = json.loads((run / "preflight.json").read_text())
    assert report["ok"] and report["arbiter"]["ok"] and report["arbiter"]["checked"] == 14
    assert report["burst"]["kind"] == "measured" and report["burst"]["tokens_per_s"] > 0
    assert report["estimate"]["steps_remaining"] == 50
    assert not (run / "metrics.jsonl").exists()
    # --max-steps 0 with a time budget: the preflight burst sizes the run to fit the budget.
    run2 = tmp_path / "budget"
    assert main(micro.args(synthetic_shards, run2, 0, "--time-budget-s", "3")) == 0
    steps = json.loads((run2 / "config.json").read_text())["train"]["max_steps"]
    assert steps > 0 and read_jsonl(run2 / "metrics.jsonl")[-1]["step"] <= steps
