"""The figures a user reads twice agree: parameter counts and vocabulary in the preflight, the model card, the
exported config.json and the exported model itself (`pretrain.model.gpt.parameter_counts`, defined once)."""

from __future__ import annotations

import json
import os
import re

import pytest
import torch

from pretrain.cli import main
from pretrain.config import model_config
from pretrain.model.gpt import GPT, parameter_counts
from pretrain.model.hf_llama import to_hf


@pytest.mark.parametrize("vocab", [8000, 8192])
@pytest.mark.parametrize("tied", [True, False])
def test_the_counts_are_those_of_the_model_and_of_its_transformers_export(vocab, tied):
    cfg = model_config("tiny", vocab, tie_embeddings=tied)
    model = GPT(cfg)
    counts = parameter_counts(cfg)
    assert (counts.vocab, counts.padded_vocab) == (vocab, -(-vocab // 128) * 128)
    assert counts.total == model.num_params()
    table = model.tok_emb.weight.numel()
    assert counts.non_embedding == counts.total - table
    # FLOPs count the head's matmul: the table again when it is tied, the separate head when not.
    assert counts.matmul == counts.total - (0 if tied else table)
    assert model.flops_per_token(64) == 6 * counts.matmul + 12 * cfg.n_layer * cfg.n_embd * 64
    hf = to_hf(model)  # the export's model: the tokenizer's rows only
    assert hf.config.vocab_size == vocab
    assert counts.exported_total == hf.num_parameters()
    assert counts.exported_non_embedding == hf.num_parameters(exclude_embeddings=True)
    if tied:  # the blocks and the final norm: the same whatever the vocabulary's padding
        assert counts.exported_non_embedding == counts.non_embedding


def _tokenizer(path, texts: list[str], vocab: int) -> str:
    """A byte-level BPE of exactly ``vocab`` ids (``<|endoftext|>`` is id 0, the BOS) trained on ``texts``."""
    from tokenizers import Tokenizer, decoders, models, pre_tokenizers, trainers

    tok = Tokenizer(models.BPE())
    tok.pre_tokenizer = pre_tokenizers.ByteLevel(add_prefix_space=False)
    tok.decoder = decoders.ByteLevel()
    tok.train_from_iterator(texts, trainers.BpeTrainer(vocab_size=vocab, special_tokens=["<|endoftext|>"],
                                                       initial_alphabet=pre_tokenizers.ByteLevel.alphabet(),
                                                       show_progress=False))
    assert tok.get_vocab_size() == vocab  # else the case is not the one named
    tok.save(str(path))
    return str(path)


def _number(pattern: str, text: str) -> list[int]:
    found = re.search(pattern, text)
    assert found, pattern
    return [int(g.replace(",", "")) for g in found.groups()]


@pytest.mark.parametrize("vocab", [8000, 8192])  # padded to 8,064 rows; a multiple of 128 already
def test_preflight_card_config_and_export_say_the_same_numbers(vocab, micro, sample_dir, tmp_path, capsys):
    from fertility.text import iter_documents

    sources = {"bn": [sample_dir / "bn" / "literature-bnarchive.txt.gz"],
               "en": [sample_dir / "en" / "wiki-en-chinapedia.txt.gz"]}
    texts = [d.text for paths in sources.values() for p in paths for d in iter_documents(str(p), max_chars=150_000)]
    spec = _tokenizer(tmp_path / "tokenizer.json", texts, vocab)
    shards = micro.write_real(tmp_path / "shards", sources, train_chars=6000, val_chars=2000, tokenizer=spec)
    run, hf = tmp_path / "run", tmp_path / "hf"
    capsys.readouterr()
    assert main(["launch", "--config", "tiny", "--data", str(shards), "--out", str(run), "--max-steps", "1",
                 "--global-batch-tokens", "256", "--micro-batch", "2", "--set", "data.eval_tokens=128",
                 "--set", "train.preflight_steps=0", "--set", "train.tensorboard=no", "--set", "train.threads=1",
                 "--no-supervisor", "--no-eval"]) == 0
    preflight = capsys.readouterr().err
    total, non_embedding, real, padded = _number(
        r"model +([\d,]+) parameters \(([\d,]+) non-embedding\), vocabulary ([\d,]+) padded to ([\d,]+)", preflight)
    assert (real, padded) == (vocab, -(-vocab // 128) * 128)

    mask = os.umask(0o027)  # an unusual umask: the export's files must follow it, as every user-facing write does
    try:
        assert main(["export", "--checkpoint", str(run / "checkpoints" / "step_00000001.pt"), "--out", str(hf)]) == 0
    finally:
        os.umask(mask)
    for path in hf.iterdir():
        assert path.stat().st_mode & 0o777 == 0o640, path.name

    card = (hf / "README.md").read_text(encoding="utf-8")
    exported, exported_non_embedding = _number(r"\| parameters \| ([\d,]+) \(([\d,]+) non-embedding", card)
    assert _number(r"\| vocabulary \| ([\d,]+) ids", card) == [vocab]
    if padded != vocab:
        assert _number(r"\| as trained \| ([\d,]+) parameters \(([\d,]+) non-embedding\): the vocabulary tables "
                       r"were padded from ([\d,]+) to ([\d,]+) rows", card) == [total, non_embedding, vocab, padded]
    else:
        assert "| as trained |" not in card and exported == total
    assert exported_non_embedding == non_embedding  # tied: the padding is all in the table

    config = json.loads((hf / "config.json").read_text())
    assert config["vocab_size"] == vocab
    from transformers import AutoModelForCausalLM

    model = AutoModelForCausalLM.from_pretrained(hf, dtype=torch.float32)
    assert model.num_parameters() == exported
    assert model.num_parameters(exclude_embeddings=True) == exported_non_embedding
    record = json.loads((hf / "export.json").read_text())["parameters"]
    assert (record["total"], record["exported_total"], record["padded_vocab"]) == (total, exported, padded)
