"""The preflight's summary: what it says about the data beside the model."""

from __future__ import annotations

import pytest

from pretrain.cli import main
from pretrain.guard.preflight import FEW_TOKENS_PER_ID, PreflightReport, format_preflight


def _report(train_tokens: int, vocab_size: int) -> PreflightReport:
    return PreflightReport(
        ok=True, problems=[], data={"train_tokens": train_tokens, "val_languages": {"bn": 100}, "shard_check": "ok",
                                    "tokenizer_check": "ok"},
        device={"name": "cpu", "device": "cpu", "torch": "2", "autocast": None, "compile": False, "world_size": 1},
        model={"parameters": 10, "non_embedding_parameters": 5, "vocab_size": vocab_size,
               "padded_vocab_size": vocab_size, "flops_per_token": 1e6},
        batch={"global_batch_tokens": 1024, "sequences": 8, "seq_len": 128, "micro_batch": 8, "accumulation": 1},
        memory={"total_bytes": 2**30})


@pytest.mark.parametrize(("train_tokens", "vocab_size", "noted"), [
    (600_000, 64_000, True),  # the demo's shards with a 64k vocabulary: 9 tokens an id
    (4_000_000, 64_000, False),  # 62 an id
    (600_000, 8_000, False),  # the demo: 75 an id
    (FEW_TOKENS_PER_ID * 1000 - 1, 1000, True),
    (FEW_TOKENS_PER_ID * 1000, 1000, False),
])
def test_few_training_tokens_per_vocabulary_id_get_a_note(train_tokens, vocab_size, noted):
    text = format_preflight(_report(train_tokens, vocab_size))
    assert f"{train_tokens:,} train tokens ({train_tokens / vocab_size:,.0f} per vocabulary id)" in text
    assert ("per vocabulary id: most ids are seen a few times at most" in text) is noted


SEQ_128 = ["--set", "model.block_size=128", "--set", "data.micro_batch=2"]


@pytest.fixture(scope="module")
def short_val(micro, tmp_path_factory):
    """Shards whose validation streams hold 115 tokens: fewer than one sequence of `tiny`'s 128 + 1."""
    return micro.write_synthetic(tmp_path_factory.mktemp("short_val"), val_tokens=115)


def test_a_validation_set_shorter_than_one_sequence_is_scored_and_the_run_goes_on(micro, short_val, tmp_path,
                                                                                  capsys):
    """The finding: such shards passed the preflight ("preflight: ok"), then the first validation stopped the
    run before its first checkpoint, and --resume failed again at the same step. Validation now scores each
    document after its BOS in windows of at most seq_len, so 115 tokens against sequences of 129 are scored."""
    from common.fileio import read_jsonl

    run = tmp_path / "run"
    assert main(micro.args(short_val, run, 8, *SEQ_128, "--set", "train.eval_interval=4")) == 0, \
        capsys.readouterr().err
    records = read_jsonl(run / "val.jsonl")
    assert records and all(set(r["languages"]) == {"bn", "en"} for r in records)
    assert all(0 < v < float("inf") for r in records for v in r["languages"].values())
    assert (run / "checkpoints" / "latest.json").is_file()


def test_a_validation_set_with_no_text_fails_the_preflight(micro, tmp_path, capsys):
    """A language whose validation stream holds nothing to score is refused before step 1, in one line each."""
    shards = micro.write_synthetic(tmp_path / "no_val_text", val_tokens=1)
    run = tmp_path / "run"
    assert main(micro.args(shards, run, 8, *SEQ_128)) == 2
    err = capsys.readouterr().err
    problems = [line for line in err.splitlines() if "PROBLEM" in line]
    assert problems and "Traceback" not in err
    assert all("validation shards hold no text token" in line for line in problems)
    assert not (run / "metrics.jsonl").exists(), "refused before any step"


def test_a_failing_validation_costs_no_step(micro, short_val, tmp_path, monkeypatch):
    """A validation that fails (here by a planted error) checkpoints the steps before the error goes on."""
    from pretrain.train import trainer as trainer_module
    from pretrain.train.checkpoint import latest_checkpoint, load_checkpoint
    from pretrain.train.data import DataError, open_dataset
    from pretrain.train.distributed import setup
    from pretrain.train.trainer import Trainer

    def fail(*args, **kwargs):
        raise DataError("planted validation failure")

    monkeypatch.setattr(trainer_module, "language_losses", fail)
    run = tmp_path / "run"
    cfg = micro.config(short_val, run, "model.block_size=128", "data.micro_batch=2", "train.max_steps=8",
                       "train.eval_interval=3", "train.checkpoint_interval=4")
    trainer = Trainer(cfg, open_dataset(short_val), setup("cpu", "fp32"))
    with pytest.raises(DataError, match="planted validation failure"):
        trainer.fit()
    assert latest_checkpoint(run).name == "step_00000003.pt"
    assert load_checkpoint(latest_checkpoint(run))["step"] == 3
