"""The golden reference: our GPT equals transformers' LlamaForCausalLM holding the same weights."""

from __future__ import annotations

import json
import shutil
from pathlib import Path

import numpy as np
import pytest
import torch

from common.errors import OutputPathError
from corpus.shards.format import Manifest, read_shard
from fertility.text import iter_documents
from fertility.tokenizers import load_tokenizer
from pretrain import cli
from pretrain.config import model_config
from pretrain.model import hf_llama as ref
from pretrain.model.gpt import GPT, GPTConfig, pad_vocab
from pretrain.release.export import export_checkpoint
from pretrain.train.checkpoint import CheckpointError, latest_checkpoint, load_checkpoint

# fp32 on CPU: the two models run the same maths in a different op order (fused vs split projections).
LOGITS_TOL = 1e-5  # max |diff| / max |logit|
GRAD_TOL = 1e-4  # per parameter: max |diff| / max |reference grad|
LOSS_TOL = 1e-5  # per step of the 10-step trajectory, relative


pytestmark = pytest.mark.usefixtures("one_torch_thread")


def batches(shards, n: int, batch: int, seq: int, compact: bool = False) -> list[tuple[torch.Tensor, torch.Tensor]]:
    """``n`` consecutive (inputs, targets) batches of real tokens from the train shard. ``compact``
    relabels the ids that occur as 0..k-1 (same text, a small vocabulary: fast enough for 10 steps on CPU)."""
    manifest = Manifest.load(shards)
    ids = read_shard(shards / manifest.split("train")[0].file)[: n * batch * seq + 1].astype("int64")
    if compact:
        ids = np.unique(ids, return_inverse=True)[1]
    tokens = torch.from_numpy(ids)
    out = []
    for i in range(n):
        chunk = tokens[i * batch * seq: (i + 1) * batch * seq + 1]
        out.append((chunk[:-1].view(batch, seq), chunk[1:].view(batch, seq)))
    return out


@pytest.fixture(scope="module")
def tiny(shards) -> GPT:
    torch.manual_seed(0)
    return GPT(model_config("tiny", Manifest.load(shards).tokenizer.vocab_size))


def small(tied: bool, vocab_size: int = 50304) -> GPT:
    torch.manual_seed(1)
    return GPT(GPTConfig(vocab_size=vocab_size, block_size=32, n_layer=2, n_head=4, n_embd=64, tie_embeddings=tied))


@pytest.mark.parametrize("tied", [True, False])
def test_weight_conversion_round_trips_exactly(tied):
    model = small(tied)
    hf = ref.to_hf(model)
    assert type(hf).__name__ == "LlamaForCausalLM"
    assert hf.config.tie_word_embeddings is tied
    assert (hf.lm_head.weight is hf.model.embed_tokens.weight) is tied
    # Every HF parameter received a weight of ours (none left at its random init).
    hf_state = hf.state_dict()
    assert set(hf_state) == set(ref.to_hf_state_dict(model.state_dict(), model.cfg))
    back = ref.from_hf(hf)
    assert back.cfg == model.cfg
    for name, value in model.state_dict().items():
        assert torch.equal(value, back.state_dict()[name]), name


def test_logits_and_every_gradient_match_the_hf_reference(tiny, shards):
    hf = ref.to_hf(tiny)
    (x, y), = batches(shards, 1, batch=2, seq=tiny.cfg.block_size)
    c = ref.compare(tiny, hf, x, y)
    assert 9.0 < c.loss_ours < 12.0  # a real, untrained loss: about ln(vocab)
    assert abs(c.loss_ours - c.loss_hf) <= LOSS_TOL * c.loss_hf
    assert c.logits_max_rel <= LOGITS_TOL, c.logits_max_abs
    assert set(c.grads) == {n for n, _ in tiny.named_parameters()}
    assert c.grad_max_rel <= GRAD_TOL, f"{c.grad_worst}: {c.grad_max_rel}"


def test_comparison_catches_a_wrong_conversion(tiny, shards):
    """The check can fail: swapping q and k in the HF copy (a classic conversion bug) is found."""
    hf = ref.to_hf(tiny)
    attn = hf.model.layers[1].self_attn
    with torch.no_grad():
        q = attn.q_proj.weight.clone()
        attn.q_proj.weight.copy_(attn.k_proj.weight)
        attn.k_proj.weight.copy_(q)
    (x, y), = batches(shards, 1, batch=1, seq=32)
    c = ref.compare(tiny, hf, x, y)
    assert c.logits_max_rel > 100 * LOGITS_TOL
    assert c.grad_max_rel > 100 * GRAD_TOL


def test_ten_step_training_trajectories_match(shards):
    data = batches(shards, 10, batch=4, seq=32, compact=True)
    model = small(tied=False, vocab_size=pad_vocab(1 + max(int(y.max()) for _, y in data)))
    hf = ref.to_hf(model)
    ours, theirs = ref.train_trajectories(model, hf, data, lr=3e-3)
    assert ours[-1] < ours[0] - 1.0  # it really trains
    for step, (a, b) in enumerate(zip(ours, theirs, strict=True)):
        assert abs(a - b) <= LOSS_TOL * abs(b), f"step {step}: ours {a}, hf {b}"


def test_unsupported_llama_features_are_refused():
    hf_cfg = ref.hf_config(small(True).cfg)
    hf_cfg.num_key_value_heads = 2
    with pytest.raises(ValueError, match="grouped-query attention"):
        ref.gpt_config(hf_cfg)


# ------------------------------------------------------------------------------------------------ export


@pytest.fixture(scope="module")
def trained_checkpoint(tmp_path_factory, shards) -> Path:
    """A checkpoint of a real (very short) `tiny` run on the gpt2-tokenized sample shards."""
    run = tmp_path_factory.mktemp("export") / "run"
    code = cli.main(["launch", "--config", "tiny", "--data", str(shards), "--out", str(run), "--max-steps", "3",
                     "--set", "model.n_layer=2", "--set", "model.n_embd=64", "--set", "model.block_size=64",
                     "--global-batch-tokens", "256", "--micro-batch", "4", "--set", "data.eval_tokens=256",
                     "--set", "train.preflight_steps=0", "--set", "train.tensorboard=false",
                     "--set", "train.threads=1", "--no-supervisor", "--no-eval"])
    assert code == 0
    return latest_checkpoint(run)


@pytest.mark.slow
def test_export_loads_in_transformers_and_computes_the_same_logits(trained_checkpoint, tmp_path, sample_dir):
    from transformers import AutoModelForCausalLM, AutoTokenizer

    out = export_checkpoint(trained_checkpoint, tmp_path / "hf")
    assert {"config.json", "model.safetensors", "tokenizer.json", "tokenizer_config.json", "export.json"} <= {
        p.name for p in out.iterdir()}
    hf = AutoModelForCausalLM.from_pretrained(out)
    tok = AutoTokenizer.from_pretrained(out)
    assert type(hf).__name__ == "LlamaForCausalLM"
    # The exported tokenizer gives the ids training saw: BOS, then the text's tokens.
    text = next(iter_documents(str(sample_dir / "bn" / "poems-pd-banglakosh.txt.gz"))).text[:200]
    gpt2 = load_tokenizer("gpt2")
    ids = tok(text).input_ids
    assert ids == [gpt2.bos_id, *gpt2.encode_ids([text])[0]]
    assert tok.decode(ids[1:]) == text
    # And the exported model computes what the checkpoint computes.
    state = load_checkpoint(trained_checkpoint)
    ours = GPT(GPTConfig(**state["config"]["model"]))
    ours.load_state_dict(state["model"])
    x = torch.tensor([ids[:64]])
    with torch.no_grad():
        expected, _ = ours(x)
        got = hf(input_ids=x).logits
    assert float((got - expected).abs().max()) <= LOGITS_TOL * float(expected.abs().max())
    provenance = json.loads((out / "export.json").read_text())
    assert provenance["step"] == 3 and provenance["tokenizer"]["spec"] == "gpt2"


def test_export_refuses_to_overwrite_or_to_read_a_corrupt_checkpoint(trained_checkpoint, tmp_path):
    (tmp_path / "taken").mkdir()
    (tmp_path / "taken" / "notes.txt").write_text("someone else's\n")
    with pytest.raises(OutputPathError, match="did not write"):  # a folder of someone else's is never replaced
        export_checkpoint(trained_checkpoint, tmp_path / "taken")
    assert (tmp_path / "taken" / "notes.txt").read_text() == "someone else's\n"
    corrupt = tmp_path / trained_checkpoint.name
    data = bytearray(trained_checkpoint.read_bytes())
    data[len(data) // 2] ^= 0xFF
    corrupt.write_bytes(bytes(data))
    shutil.copy(trained_checkpoint.with_suffix(".json"), corrupt.with_suffix(".json"))
    with pytest.raises(CheckpointError, match="corrupt"):
        export_checkpoint(corrupt, tmp_path / "hf")
    assert sorted(p.name for p in tmp_path.iterdir()) == sorted([corrupt.name, corrupt.with_suffix(".json").name,
                                                                 "taken"])
