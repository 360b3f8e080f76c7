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
    assert bn.targets == (shard.tokens - 1) // 32 * 32  # every window of the shard
    assert bn.bits_per_token == pytest.approx(bn.loss / math.log(2))
    assert bn.bits_per_char == pytest.approx(bn.bits_per_token * shard.tokens / shard.chars)
    assert bn.bits_per_byte == pytest.approx(bn.bits_per_token * shard.tokens / shard.bytes)
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
