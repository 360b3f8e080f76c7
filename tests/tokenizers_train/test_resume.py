import json

import pytest

from common.fileio import file_sha256
from tokenizers_train import backends
from tokenizers_train.cli import main


def _argv(small_texts, out):
    return ["--text", f"bn={small_texts['bn']}", "--text", f"en={small_texts['en']}", "--out", str(out),
            "--no-progress", "--max-validation-chars", "20000", "--holdout", "0.1", "--vocab-size", "1024",
            "--phrase-fraction", "0.1", "--probe-chars", "30000", "--naive"]


@pytest.mark.slow
def test_a_killed_run_resumes_and_gives_the_uninterrupted_result(small_texts, tmp_path, monkeypatch, capsys):
    reference = tmp_path / "reference"
    assert main(_argv(small_texts, reference)) == 0
    rounds = json.loads((reference / "training_report.json").read_text())["rounds"]
    assert len(rounds) >= 3  # two probes and at least one full round: something to resume

    real_train, calls = backends.train, []

    def interrupted_after_two_rounds(*args, **kwargs):
        calls.append(args)
        if len(calls) == 3:
            raise KeyboardInterrupt  # as Ctrl-C would: the first two rounds are in the checkpoint
        return real_train(*args, **kwargs)

    out = tmp_path / "out"
    monkeypatch.setattr(backends, "train", interrupted_after_two_rounds)
    assert main(_argv(small_texts, out)) == 130
    ckpt = tmp_path / ".out.checkpoint"
    assert not out.exists() and (ckpt / "round2" / "step.json").is_file() and not (ckpt / "round3").exists()
    (ckpt / ".round3.stale.tmp").mkdir()  # what a SIGKILL in the middle of round 3 leaves
    (ckpt / ".round3.stale.tmp" / "tokenizer.json").write_text("{half a file")

    calls.clear()
    capsys.readouterr()
    assert main(_argv(small_texts, out)) == 0
    err = capsys.readouterr().err
    assert "resuming from" in err
    assert len(calls) == len(rounds) - 2  # only the rounds the checkpoint did not hold were trained
    assert file_sha256(out / "tokenizer.json") == file_sha256(reference / "tokenizer.json")
    assert file_sha256(out / "naive" / "tokenizer.json") == file_sha256(reference / "naive" / "tokenizer.json")
    resumed = json.loads((out / "training_report.json").read_text())["rounds"]
    assert [{**r, "seconds": 0} for r in resumed] == [{**r, "seconds": 0} for r in rounds]
    assert sorted(p.name for p in tmp_path.iterdir()) == ["out", "reference"]  # the checkpoint is gone


def test_a_checkpoint_of_other_settings_is_discarded(small_texts, tmp_path, monkeypatch):
    from tokenizers_train.checkpoint import Checkpoint

    ckpt = Checkpoint(tmp_path / "out", {"other": "settings"}).root  # a checkpoint this command made
    (ckpt / "round1").mkdir(parents=True)
    (ckpt / "round1" / "step.json").write_text("{}")
    argv = _argv(small_texts, tmp_path / "out")
    argv[argv.index("1024")] = "320"  # smaller than the alphabet: refused after reading, so the run stops early
    assert main(argv) == 2
    assert not ckpt.exists()
