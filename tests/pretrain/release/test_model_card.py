"""The model card `pretrain export` writes: the run's own numbers, no placeholder."""

from __future__ import annotations

import json
import re
import shutil
from pathlib import Path

import pytest

from corpus.shards.format import Manifest
from pretrain.cli import main
from pretrain.model.gpt import GPTConfig, parameter_counts
from pretrain.release.model_card import matching_evaluation
from pretrain.train.checkpoint import load_checkpoint


def _front_matter(card: str) -> list[str]:
    assert card.startswith("---\n")
    return card.split("---\n")[1].splitlines()


@pytest.mark.slow
def test_the_card_renders_the_runs_architecture_data_training_and_evaluation(tiny_run, shards, sample_dir, tmp_path):
    run = tmp_path / "run"
    shutil.copytree(tiny_run, run)  # eval.json is written into the run
    ckpt = run / "checkpoints" / "step_00000003.pt"
    assert main(["eval", "--run", str(run), "--checkpoint", str(ckpt), "--max-tokens", "256", "--samples", "0",
                 "--text", f"bn={sample_dir / 'bn' / 'poems-pd-banglakosh.txt.gz'}", "--max-chars", "400",
                 "--tasks", "bangla_sample_cloze", "--limit", "8", "--device", "cpu"]) == 0
    report = json.loads((run / "eval.json").read_text())
    assert {"languages", "text", "tasks"} <= set(report)  # one file: validation, text and tasks
    assert main(["export", "--checkpoint", str(ckpt), "--out", str(tmp_path / "hf")]) == 0
    card = (tmp_path / "hf" / "README.md").read_text(encoding="utf-8")

    header = _front_matter(card)
    assert header[:3] == ["language:", "- bn", "- en"] and "library_name: transformers" in header
    assert "- bangla" in header  # a tag for the languages the model has: bn is one
    # the tokenizer by its name; no path of this machine (the repository's data/tokenizers, the run's folder)
    assert "## Tokenizer\n\n`gpt2`," in card
    assert str(Path(__file__).resolve().parents[3]) not in card and str(tmp_path) not in card
    state = load_checkpoint(ckpt)
    counts = parameter_counts(GPTConfig(**state["config"]["model"]))  # gpt2's 50,257 ids, padded to 50,304
    assert f"| parameters | {counts.exported_total:,} ({counts.non_embedding:,} non-embedding" in card
    assert "| vocabulary | 50,257 ids" in card and f"| as trained | {counts.total:,} parameters" in card
    assert "| layers / hidden size / heads | 2 / 64 / 4" in card
    manifest = Manifest.load(shards)
    train = manifest.split("train")[0]
    total = sum(train.tokens_by_language.values())
    for lang, n in train.tokens_by_language.items():
        assert f"| {lang} | {n:,} | {n / total:.1%} |" in card
    optim = state["config"]["optim"]
    assert f"| tokens seen | {state['tokens_seen']:,} " in card
    assert f"cosine decay to {optim['lr'] * optim['min_lr_ratio']:g}" in card
    assert re.search(r"\| bn \| 0\.\d{3} \| 1\.\d{3} \| [\d,]+ \|", card)  # gpt2: ~0.5 Bangla chars per token
    text = report["text"]["languages"]["bn"]
    assert f"| {text['bits_per_byte']:.4f} | {text['bits_per_char']:.4f} |" in card
    val = report["languages"]["en"]
    assert f"| en | {val['model']['bits_per_char']:.3f} | {val['model']['bits_per_byte']:.3f} |" in card
    task = report["tasks"]["results"]["bangla_sample_cloze"]
    assert f"| bangla_sample_cloze | acc | {task['score']:.3f} | 0.250 | 8 |" in card
    assert report["tasks"]["model"] == str(ckpt)  # the temporary export for the harness is not kept
    assert state["tokenizer"]["sha256"] in card
    for placeholder in ("TODO", "TBD", "PATH", "None", "nan", "XXX", "{", "}"):
        assert placeholder not in card.split("## Use")[0], placeholder


def test_a_card_without_evaluation_says_so_and_how_to_add_it(tiny_run, tmp_path):
    from pretrain.train.checkpoint import save_checkpoint

    # A checkpoint whose run's shards are gone: the default manifest and eval.json are absent, said in the card.
    state = load_checkpoint(tiny_run / "checkpoints" / "step_00000003.pt")
    state["config"]["data"]["path"] = str(tmp_path / "moved-away")
    ckpt = save_checkpoint(tmp_path / "run", 3, state)
    assert main(["export", "--checkpoint", str(ckpt), "--out", str(tmp_path / "hf")]) == 0
    card = (tmp_path / "hf" / "README.md").read_text(encoding="utf-8")
    assert "No evaluation of this checkpoint was found" in card and "pretrain eval --run" in card
    assert "manifest.json) was not found" in card and "## Evaluation" in card
    assert "| bits/char" not in card


def test_export_refuses_a_named_eval_or_data_it_cannot_read_before_any_work(tiny_run, tmp_path, capsys):
    ckpt = tiny_run / "checkpoints" / "step_00000003.pt"
    (tmp_path / "broken.json").write_text('{"schema_version": 1, "languages": {')
    (tmp_path / "list.json").write_text("[]")
    (tmp_path / "other.json").write_text('{"schema_version": 1, "shards": []}')
    (tmp_path / "folder").mkdir()
    (tmp_path / "bad_manifest").mkdir()
    (tmp_path / "bad_manifest" / "manifest.json").write_text("[]")
    cases = [(["--eval", tmp_path / "no.json"], "--eval"), (["--eval", tmp_path / "broken.json"], "not JSON"),
             (["--eval", tmp_path / "list.json"], "not an eval report"),
             (["--eval", tmp_path / "other.json"], "not an eval report"),
             (["--eval", tmp_path / "folder"], "--eval"),
             (["--data", tmp_path / "nowhere"], "--data"), (["--data", tmp_path / "folder"], "manifest.json"),
             (["--data", tmp_path / "bad_manifest"], "--data")]
    for extra, says in cases:
        capsys.readouterr()
        out = tmp_path / "hf"
        try:
            code = main(["export", "--checkpoint", str(ckpt), "--out", str(out), *map(str, extra)])
        except SystemExit as e:  # an input of the wrong kind is refused while parsing (common.paths)
            code = e.code
        assert code == 2, extra
        err = capsys.readouterr().err
        assert len(err.strip().splitlines()) == 1 and says in err and "Traceback" not in err, (extra, err)
        assert not out.exists()  # refused before the export's work


def test_only_the_sections_of_the_exported_checkpoint_are_used():
    report = {"step": 3, "languages": {}, "text": {"checkpoint_sha256": "a"}, "tasks": {"checkpoint_sha256": "b"}}
    assert set(matching_evaluation(report, 3, "a")) == {"validation", "text"}
    assert set(matching_evaluation(report, 4, "b")) == {"tasks"}
    assert matching_evaluation({"step": 3, "text": {}}, 3, "a") == {}
    # The validation split names its checkpoint's sha256 too: the same step of another checkpoint is not it.
    assert matching_evaluation({"step": 3, "languages": {}, "checkpoint_sha256": "b"}, 3, "a") == {}
