"""Bits per byte and character on any text, for a checkpoint and for its HF export (`pretrain eval --text`)."""

from __future__ import annotations

import json
import math

import pytest
import torch
import torch.nn.functional as F

from pretrain.cli import main
from pretrain.model.gpt import GPT, GPTConfig
from pretrain.train.checkpoint import latest_checkpoint
from pretrain.train.validation import score_ids, windows


@pytest.mark.parametrize("n_ids,context", [(2, 8), (9, 8), (10, 8), (37, 8), (100, 7), (5, 1)])
def test_windows_score_every_target_once_with_half_a_context_before_it(n_ids, context):
    scored = []
    for start, first, end in windows(n_ids, context):
        assert end - 1 - start <= context  # the model reads at most a context
        assert start == 0 or first - start >= context // 2  # and every scored token has half a context before it
        scored += range(first, end)
    assert scored == list(range(1, n_ids))


def _score(model: GPT, docs: list[list[int]], context: int, batch: int) -> float:
    return score_ids(lambda ids: model(ids)[0], docs, prefix_id=0, context=context, device=torch.device("cpu"),
                     batch_size=batch)


def test_score_is_the_summed_nll_in_bits_whatever_the_batching():
    torch.manual_seed(0)
    model = GPT(GPTConfig(vocab_size=64, block_size=32, n_layer=1, n_head=2, n_embd=16)).eval()
    docs = [torch.randint(1, 64, (n,)).tolist() for n in (5, 20, 31, 3)]
    with torch.no_grad():
        expected = sum(F.cross_entropy(model(torch.tensor([[0, *d]]))[0][0, :-1], torch.tensor(d),
                                       reduction="sum").item() for d in docs) / math.log(2)
    for batch in (1, 3, 8):  # right padding never changes the scored positions
        assert _score(model, docs, 32, batch) == pytest.approx(expected, rel=1e-6)
    # A shorter context scores the same tokens with less to go on: different, still finite.
    windowed = _score(model, docs, 8, 4)
    assert math.isfinite(windowed) and windowed != pytest.approx(expected, rel=1e-6)


@pytest.mark.slow
def test_bits_per_byte_of_a_checkpoint_equal_those_of_its_export(tiny_run, tiny_export, sample_dir, tmp_path):
    texts = ["--text", f"bn={sample_dir / 'bn' / 'poems-pd-banglakosh.txt.gz'}",
             "--text", f"en={sample_dir / 'en' / 'wiki-en-chinapedia.txt.gz'}", "--max-chars", "600"]
    ckpt = latest_checkpoint(tiny_run)
    assert main(["eval", "--checkpoint", str(ckpt), *texts, "--out", str(tmp_path / "ckpt.json")]) == 0
    assert main(["eval", "--hf", str(tiny_export), *texts, "--out", str(tmp_path / "hf.json")]) == 0
    a = json.loads((tmp_path / "ckpt.json").read_text())["text"]
    b = json.loads((tmp_path / "hf.json").read_text())["text"]
    assert (a["kind"], b["kind"]) == ("checkpoint", "hf") and a["checkpoint_sha256"] == b["checkpoint_sha256"]
    for lang in ("bn", "en"):
        x, y = a["languages"][lang], b["languages"][lang]
        assert (x["tokens"], x["chars"], x["bytes"]) == (y["tokens"], y["chars"], y["bytes"])
        assert abs(x["bits_per_byte"] - y["bits_per_byte"]) <= 1e-5
        assert x["bits_per_char"] == pytest.approx(x["bits"] / x["chars"])
        assert x["bits_per_byte"] == pytest.approx(x["bits"] / x["bytes"])
    # Bangla takes 3 UTF-8 bytes a character, English 1: the same bits spread over more bytes.
    bn = a["languages"]["bn"]
    assert bn["bytes"] > 2.5 * bn["chars"] and bn["bits_per_char"] > 2.5 * bn["bits_per_byte"]


def test_bad_arguments_are_refused_before_any_model_runs(tiny_run, tmp_path, capsys):
    ckpt = str(latest_checkpoint(tiny_run))
    assert main(["eval", "--checkpoint", ckpt, "--text", f"bn={tmp_path / 'missing.txt'}",
                 "--out", str(tmp_path / "e.json")]) == 2
    assert "missing.txt" in capsys.readouterr().err
    assert main(["eval", "--checkpoint", ckpt, "--text", "bn"]) == 2  # not LANG=PATH
    assert main(["eval", "--checkpoint", ckpt, "--text", f"bn={tmp_path}"]) == 2
    assert "--out" in capsys.readouterr().err
    assert main(["eval", "--hf", str(tmp_path), "--text", "bn=x", "--out", str(tmp_path / "e.json")]) == 2
    assert main(["eval", "--out", str(tmp_path / "e.json")]) == 2
    assert not (tmp_path / "e.json").exists()
