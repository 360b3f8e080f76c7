"""Per-language evaluation against the random-init twin, in bits per token, character and byte."""

from __future__ import annotations

import json
import math

import pytest
import torch

from pretrain.cli import main
from pretrain.eval.run_eval import language_metrics
from pretrain.model.gpt import build_model
from pretrain.train.data import open_dataset
from pretrain.train.distributed import setup
from pretrain.train.trainer import Trainer


def test_twin_is_the_model_the_run_started_from(micro, synthetic_shards, tmp_path):
    cfg = micro.config(synthetic_shards, tmp_path)
    trainer = Trainer(cfg, open_dataset(synthetic_shards), setup("cpu", "fp32"))
    twin = build_model(cfg.model, cfg.train.seed)
    for (name, a), b in zip(trainer.model.state_dict().items(), twin.state_dict().values(), strict=True):
        assert torch.equal(a, b), name


def test_bits_follow_from_the_loss_and_the_manifest_counts(micro, synthetic_shards, tmp_path):
    cfg = micro.config(synthetic_shards, tmp_path)
    ds = open_dataset(synthetic_shards)
    metrics = language_metrics(build_model(cfg.model, cfg.train.seed), ds, 32, 0, 8, setup("cpu", "fp32"))
    bn = metrics["bn"]
    shard = ds.manifest.split("val", language="bn")[0]
    assert bn.targets == shard.tokens - shard.documents  # every token but the documents' BOS
    assert bn.bits_per_token == pytest.approx(bn.loss / math.log(2))
    assert bn.bits_per_char == pytest.approx(bn.bits_per_token * bn.targets / shard.chars)
    assert bn.bits_per_byte == pytest.approx(bn.bits_per_token * bn.targets / shard.bytes)
    assert bn.loss == pytest.approx(math.log(micro.vocab), abs=0.2)  # untrained: about uniform


@pytest.mark.slow
def test_trained_run_beats_its_twin_per_language_with_decoded_samples(micro, shards, tmp_path):
    run = tmp_path / "run"
    assert main(micro.args(shards, run, 25, "--set", "optim.lr=1e-2")) == 0
    assert main(["eval", "--run", str(run), "--max-tokens", "1024", "--samples", "2"]) == 0
    report = json.loads((run / "eval.json").read_text())
    assert report["schema_version"] == 1 and report["step"] == 25
    assert set(report["languages"]) == {"bn", "en"}
    bn = report["languages"]["bn"]
    assert bn["random_init"]["loss"] == pytest.approx(math.log(50257), abs=0.3)  # the real vocabulary, not the padded one
    assert bn["model"]["loss"] < 0.8 * bn["random_init"]["loss"]
    assert bn["loss_ratio"] == pytest.approx(bn["model"]["loss"] / bn["random_init"]["loss"])
    assert bn["model"]["bits_per_char"] < bn["random_init"]["bits_per_char"]
    sample = bn["samples"][0]
    assert len(sample["prompt_ids"]) == 16 and len(sample["completion_ids"]) == 32
    assert 50256 not in sample["completion_ids"]  # BOS is never sampled: the same document goes on
    assert isinstance(sample["prompt"], str) and sample["prompt"]  # decoded with the manifest's GPT-2
    assert (run / "eval.png").stat().st_size > 10_000


@pytest.mark.slow
def test_eval_json_accumulates_for_one_checkpoint_and_starts_anew_for_another(tiny_run, sample_dir, tmp_path, capsys):
    import shutil

    from pretrain.train.checkpoint import latest_checkpoint, load_checkpoint, save_checkpoint

    run = tmp_path / "run"
    shutil.copytree(tiny_run, run)
    report_path = run / "eval.json"
    fast = ["--max-tokens", "128", "--samples", "0", "--device", "cpu"]
    text = ["--text", f"bn={sample_dir / 'bn' / 'poems-pd-banglakosh.txt.gz'}", "--max-chars", "300"]
    assert main(["eval", "--run", str(run), *fast, *text]) == 0
    first = json.loads(report_path.read_text())
    sha = first["checkpoint_sha256"]
    assert sha and first["text"]["checkpoint_sha256"] == sha
    # What a `--tasks` run (hours of lm-eval) left in the same file, for the same checkpoint.
    tasks = {"harness": "lm-eval", "checkpoint_sha256": sha, "results": {"t": {"score": 0.5}}}
    report_path.write_text(json.dumps({**first, "tasks": tasks}))
    capsys.readouterr()
    assert main(["eval", "--run", str(run), *fast]) == 0  # a plain eval of the same checkpoint
    second = json.loads(report_path.read_text())
    assert second["text"] == first["text"] and second["tasks"] == tasks  # kept
    assert second["languages"].keys() == first["languages"].keys()
    assert "replaces" not in capsys.readouterr().err

    # Another checkpoint: a new report, said in one line.
    state = load_checkpoint(latest_checkpoint(run))
    other = save_checkpoint(tmp_path / "other", state["step"] + 1, {**state, "step": state["step"] + 1})
    assert main(["eval", "--run", str(run), "--checkpoint", str(other), *fast]) == 0
    third = json.loads(report_path.read_text())
    assert third["checkpoint_sha256"] != sha and "text" not in third and "tasks" not in third
    notes = [line for line in capsys.readouterr().err.splitlines() if "replaces" in line]
    assert len(notes) == 1 and sha[:12] in notes[0] and "text, tasks" in notes[0]
    assert not list(run.glob(".eval.json*"))  # written atomically: no temp file left
