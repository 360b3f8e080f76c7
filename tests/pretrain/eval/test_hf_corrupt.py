"""``pretrain eval --hf DIR`` whose weights are truncated or corrupt: exit 2 and one line naming the file, never
a safetensors traceback (docs/contract.md, Bad input)."""

from __future__ import annotations

import os
from pathlib import Path

import pytest

from pretrain.cli import main


@pytest.fixture(scope="module")
def small_llama(tmp_path_factory) -> Path:
    """A few-kilobyte LlamaForCausalLM folder (config.json, model.safetensors), as `pretrain export` writes."""
    from transformers import LlamaConfig, LlamaForCausalLM

    folder = tmp_path_factory.mktemp("hf") / "model"
    config = LlamaConfig(vocab_size=64, hidden_size=16, intermediate_size=32, num_hidden_layers=1,
                         num_attention_heads=2, num_key_value_heads=2, max_position_embeddings=32)
    LlamaForCausalLM(config).save_pretrained(folder)
    return folder


def copy_with(folder: Path, dest: Path, weights: bytes) -> Path:
    dest.mkdir()
    (dest / "config.json").write_bytes((folder / "config.json").read_bytes())
    (dest / "model.safetensors").write_bytes(weights)
    return dest


@pytest.mark.parametrize("damage", ["truncated", "garbage"])
def test_a_truncated_or_corrupt_model_safetensors_is_one_line_and_exit_2(small_llama, damage, tmp_path, capsys,
                                                                        input_error):
    good = (small_llama / "model.safetensors").read_bytes()
    weights = good[: len(good) // 2] if damage == "truncated" else os.urandom(len(good))
    bad = copy_with(small_llama, tmp_path / "bad", weights)
    text = tmp_path / "bn.txt"
    text.write_text("আমি বাংলায় গান গাই।\n", encoding="utf-8")
    code = main(["eval", "--hf", str(bad), "--text", f"bn={text}", "--out", str(tmp_path / "e.json")])
    err = capsys.readouterr().err
    input_error(code, err, str(bad / "model.safetensors"), "truncated or corrupt")
    # The harness's tasks load the same folder: refused the same way, before any model runs.
    code = main(["eval", "--hf", str(bad), "--tasks", "bangla_sample_cloze", "--out", str(tmp_path / "e.json")])
    input_error(code, capsys.readouterr().err, str(bad / "model.safetensors"), "truncated or corrupt")
    assert not (tmp_path / "e.json").exists()


def test_a_whole_folder_passes_the_check(small_llama):
    from pretrain.eval.text_bits import check_hf_weights

    check_hf_weights(small_llama)  # no error: the check reads headers, and these are whole
