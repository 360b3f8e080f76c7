"""Validation bits per byte: BOS is never a target, every text token is scored once, each document from its
own BOS (the way `pretrain eval --text` scores a text), and the summed bits are divided by the bytes."""

from __future__ import annotations

import json
import math

import numpy as np
import pytest
import torch
import torch.nn.functional as F

from corpus.shards.verify import documents
from fertility.tokenizers import load_tokenizer
from pretrain.cli import main
from pretrain.model.gpt import GPT, GPTConfig
from pretrain.train.data import open_dataset
from pretrain.train.distributed import setup
from pretrain.train.validation import language_metrics


def _model(vocab: int, context: int) -> GPT:
    torch.manual_seed(0)
    return GPT(GPTConfig(vocab_size=vocab, block_size=context, n_layer=1, n_head=2, n_embd=16)).eval()


def _doc_nll(model: GPT, bos: int, doc: np.ndarray) -> float:
    """NLL in nats of a document's tokens after its BOS, in one pass (the document fits the context)."""
    ids = torch.from_numpy(np.concatenate([[bos], doc]).astype(np.int64)).unsqueeze(0)
    with torch.no_grad():
        return F.cross_entropy(model(ids[:, :-1])[0][0], ids[0, 1:], reduction="sum").item()


def test_every_text_token_is_scored_after_its_own_bos_and_the_bits_are_divided_by_the_bytes(micro, synthetic_shards):
    ds = open_dataset(synthetic_shards)
    model = _model(micro.vocab, 256)  # each synthetic document (199 tokens after its BOS) fits the context
    stream = ds.val["bn"]
    tokens = stream.window(0, len(stream))
    docs = list(documents(tokens, 0))
    assert len(docs) > 1 and all(len(d) == 199 for d in docs)
    expected_nats = sum(_doc_nll(model, 0, d) for d in docs)
    shard = ds.manifest.split("val", language="bn")[0]
    for micro_batch in (1, 4):
        bn = language_metrics(model, ds, 256, 0, micro_batch, setup("cpu", "fp32"))["bn"]
        assert bn.targets == sum(len(d) for d in docs) == len(tokens) - len(docs)  # no BOS target, no tail left out
        assert bn.loss == pytest.approx(expected_nats / bn.targets, rel=1e-5)
        assert bn.bits_per_byte == pytest.approx(expected_nats / math.log(2) / shard.bytes, rel=1e-5)
        assert bn.bits_per_char == pytest.approx(expected_nats / math.log(2) / shard.chars, rel=1e-5)


def test_a_token_budget_scores_the_first_text_tokens_and_scales_by_the_text_tokens_per_byte(micro, synthetic_shards):
    ds = open_dataset(synthetic_shards)
    model = _model(micro.vocab, 256)
    tokens = ds.val["en"].window(0, len(ds.val["en"]))
    docs = list(documents(tokens, 0))
    budget = 199 + 50  # the first document and the first 50 tokens of the second
    en = language_metrics(model, ds, 256, budget, 2, setup("cpu", "fp32"))["en"]
    nats = _doc_nll(model, 0, docs[0]) + _doc_nll(model, 0, docs[1][:50])
    assert en.targets == budget and en.loss == pytest.approx(nats / budget, rel=1e-5)
    shard = ds.manifest.split("val", language="en")[0]
    text_tokens = len(tokens) - len(docs)
    assert en.bits_per_byte == pytest.approx(en.bits_per_token * text_tokens / shard.bytes, rel=1e-9)


@pytest.mark.slow
def test_validation_agrees_with_eval_text_on_the_same_documents(tiny_run, shards, tmp_path, capsys):
    """The run's validation documents, decoded, are the text `--text` scores: the two bits per byte agree."""
    ds = open_dataset(shards)
    tok = load_tokenizer(ds.manifest.tokenizer.spec)
    texts = []
    for lang, stream in ds.val.items():
        docs = [tok.decode(d.tolist()) for d in documents(stream.window(0, len(stream)), ds.manifest.tokenizer.bos_id)]
        path = tmp_path / f"{lang}.jsonl"
        path.write_text("".join(json.dumps({"text": d}, ensure_ascii=False) + "\n" for d in docs), encoding="utf-8")
        texts += ["--text", f"{lang}={path}"]
    out = tmp_path / "eval.json"
    assert main(["eval", "--run", str(tiny_run), "--max-tokens", "0", "--samples", "0", "--device", "cpu",
                 *texts, "--out", str(out)]) == 0
    report = json.loads(out.read_text())
    for lang in ds.val:
        validation, text = report["languages"][lang]["model"], report["text"]["languages"][lang]
        shard = ds.manifest.split("val", language=lang)[0]
        assert (text["bytes"], text["chars"]) == (shard.bytes, shard.chars)  # the same documents
        assert validation["targets"] == text["tokens"]
        assert validation["bits_per_byte"] == pytest.approx(text["bits_per_byte"], rel=1e-5)
        assert validation["bits_per_char"] == pytest.approx(text["bits_per_char"], rel=1e-5)
