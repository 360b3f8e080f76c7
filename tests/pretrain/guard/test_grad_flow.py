"""The gradient-flow arbiter on the real `tiny` model and a batch of real Bangla text: healthy passes,
each planted fault is caught with the parameter named, zero-initialised projections are handled."""

from __future__ import annotations

import copy

import pytest
import torch
import torch.nn as nn
import torch.nn.functional as F

from fertility.text import iter_documents
from fertility.tokenizers import load_tokenizer
from pretrain.config import model_config
from pretrain.guard.grad_flow import GradientFlowError, check_gradient_flow
from pretrain.model.gpt import GPT

SEQ, BATCH = 64, 2
BYTE_VOCAB = 256


pytestmark = pytest.mark.usefixtures("one_torch_thread")


def bangla_tokens(sample_dir, tokenizer=None) -> torch.Tensor:
    """BATCH * SEQ + 1 tokens of the shipped Bangla sample: its UTF-8 bytes, or ``tokenizer``'s ids."""
    texts = [d.text for d in iter_documents(str(sample_dir / "bn" / "literature-bnarchive.txt.gz"), max_chars=2000)]
    ids = ([i for row in tokenizer.encode_ids(texts) for i in row] if tokenizer
           else list("\n".join(texts).encode()))
    tokens = torch.tensor(ids[:BATCH * SEQ + 1])
    assert tokens.numel() == BATCH * SEQ + 1
    return tokens


def as_batch(tokens: torch.Tensor) -> tuple[torch.Tensor, torch.Tensor]:
    return tokens[:-1].view(BATCH, SEQ), tokens[1:].view(BATCH, SEQ)


@pytest.fixture(scope="module")
def batch(sample_dir) -> tuple[torch.Tensor, torch.Tensor]:
    """Real Bangla text as bytes: the `tiny` shapes with a 256-id vocabulary keep each check well under 1 s."""
    return as_batch(bangla_tokens(sample_dir))


@pytest.fixture
def model() -> GPT:
    torch.manual_seed(0)
    return GPT(model_config("tiny", BYTE_VOCAB))


class DetachedLinear(nn.Linear):
    """A refactoring bug: the weight is used through ``.detach()``, so it never learns."""

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        return F.linear(x, self.weight.detach())


class NaNBackward(nn.Module):
    """Wraps a module with an op whose forward is finite (sqrt(0) = 0) but whose backward is 0 * inf = NaN."""

    def __init__(self, inner: nn.Module):
        super().__init__()
        self.inner = inner

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        y = self.inner(x)
        return y + torch.sqrt(y * 0.0)


class DeadLinear(nn.Linear):
    """A real bug that looks like a zero-initialised projection: the weight is multiplied by a zero mask."""

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        return F.linear(x, self.weight * 0.0)


def test_healthy_tiny_model_with_the_gpt2_vocabulary_passes_untouched(sample_dir):
    """The `tiny` config exactly as the demo trains it: gpt2's vocabulary, real Bangla tokens."""
    gpt2 = load_tokenizer("gpt2")
    torch.manual_seed(0)
    model = GPT(model_config("tiny", gpt2.vocab_size))
    before = copy.deepcopy(model.state_dict())
    report = check_gradient_flow(model, as_batch(bangla_tokens(sample_dir, gpt2)))
    assert report.ok, report.problems
    names = [n for n, _ in model.named_parameters()]
    assert report.checked == len(names) == 2 + 4 * 6  # embedding (tied head), final norm, 6 per block
    assert set(report.grad_norms) == set(names) and all(v > 0 for v in report.grad_norms.values())
    assert not report.second_pass and report.blocked_at_init == []
    assert 9.0 < report.loss < 12.0  # about ln(50304) at initialisation
    report.raise_if_failed()
    # The caller's model is not touched: same weights, no gradients left behind.
    assert all(torch.equal(before[k], v) for k, v in model.state_dict().items())
    assert all(p.grad is None for p in model.parameters())


def test_detached_parameter_is_named(model, batch):
    old = model.blocks[1].mlp.down
    model.blocks[1].mlp.down = DetachedLinear(old.in_features, old.out_features, bias=False)
    report = check_gradient_flow(model, batch)
    assert not report.ok
    assert len(report.problems) == 1
    assert report.problems[0].startswith("blocks.1.mlp.down.weight [128x512]: no gradient (grad is None)")
    with pytest.raises(GradientFlowError, match=r"1 of 26 parameters:\n  blocks\.1\.mlp\.down\.weight"):
        report.raise_if_failed()


def test_nan_producing_op_is_named_though_the_loss_is_finite(model, batch):
    model.blocks[2].mlp = NaNBackward(model.blocks[2].mlp)
    report = check_gradient_flow(model, batch)
    assert not report.ok
    assert report.loss == report.loss  # finite forward: only the gradients are poisoned
    bad = {p.split(" ")[0] for p in report.problems}
    # Everything at or below the NaN op gets NaN; the layers above it and the head stay healthy.
    assert {"blocks.2.mlp.inner.gate_up.weight", "blocks.2.mlp.inner.down.weight",
            "blocks.0.attn.qkv.weight", "tok_emb.weight"} <= bad
    assert not any(name.startswith("blocks.3.") for name in bad)
    assert all("non-finite gradient" in p and "NaN" in p for p in report.problems)


def test_nan_in_forward_is_reported_as_a_nonfinite_loss(model, batch):
    with torch.no_grad():
        model.blocks[0].norm2.weight[0] = float("nan")
    report = check_gradient_flow(model, batch)
    assert not report.ok
    assert report.problems[0].startswith("loss: non-finite (nan)")


def test_frozen_layer_is_named(model, batch):
    model.blocks[3].requires_grad_(False)
    report = check_gradient_flow(model, batch)
    assert not report.ok
    frozen = sorted(p.split(" ")[0] for p in report.problems)
    assert frozen == sorted(f"blocks.3.{n}" for n, _ in model.blocks[3].named_parameters())
    assert all("frozen (requires_grad=False)" in p for p in report.problems)


def _zero_init_residual_projections(model: GPT) -> None:
    with torch.no_grad():
        for block in model.blocks:
            block.attn.proj.weight.zero_()
            block.mlp.down.weight.zero_()


def test_zero_initialised_projections_pass_after_one_step(model, batch):
    _zero_init_residual_projections(model)
    strict = check_gradient_flow(model, batch, optimizer_step=False)
    blocked = {p.split(" ")[0] for p in strict.problems}
    # Zero projections block the gradient of everything inside the residual branches at step 0.
    assert {"blocks.0.attn.qkv.weight", "blocks.3.mlp.gate_up.weight", "blocks.1.norm1.weight"} <= blocked
    assert all("exactly zero on the first pass" in p for p in strict.problems)

    report = check_gradient_flow(model, batch)
    assert report.ok, report.problems
    assert report.second_pass and set(report.blocked_at_init) == blocked


def test_a_truly_dead_parameter_is_not_hidden_by_the_second_chance(model, batch):
    _zero_init_residual_projections(model)
    old = model.blocks[2].attn.qkv
    model.blocks[2].attn.qkv = DeadLinear(old.in_features, old.out_features, bias=False)
    report = check_gradient_flow(model, batch)
    assert not report.ok and report.second_pass
    # The dead qkv takes down its attention branch: its own norm and output projection can never learn.
    dead = {"blocks.2.attn.qkv.weight", "blocks.2.norm1.weight", "blocks.2.attn.proj.weight"}
    assert {p.split(" ")[0] for p in report.problems} == dead
    assert all("exactly zero on the first pass and still after one optimizer step" in p for p in report.problems)
    assert "blocks.2.mlp.gate_up.weight" in report.blocked_at_init
