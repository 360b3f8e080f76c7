"""The model's recipe switches (issue 31): qk_norm, logit_softcap and z_loss, each off by default, each
changing what it says and nothing when off; `pretrain export` refuses the two without a Llama equivalent."""

from __future__ import annotations

import dataclasses

import pytest
import torch
import torch.nn.functional as F

from pretrain.cli import main
from pretrain.model.gpt import GPT, GPTConfig, count_parameters, pad_vocab
from pretrain.model.loss import linear_cross_entropy
from pretrain.train.checkpoint import load_checkpoint, save_checkpoint


def _cfg(**switches) -> GPTConfig:
    return GPTConfig(vocab_size=pad_vocab(300), real_vocab_size=300, block_size=32, n_layer=2, n_head=2, n_embd=32,
                     **switches)


def _model(**switches) -> GPT:
    torch.manual_seed(0)
    return GPT(_cfg(**switches))


def test_switches_are_off_by_default_and_add_no_parameter():
    cfg = GPTConfig()
    assert (cfg.qk_norm, cfg.logit_softcap, cfg.z_loss) == (False, 0.0, 0.0)
    plain, explicit = _model(), _model(qk_norm=False, logit_softcap=0.0, z_loss=0.0)
    assert list(plain.state_dict()) == list(explicit.state_dict())
    assert not any("q_norm" in k or "k_norm" in k for k in plain.state_dict())


def test_qk_norm_adds_one_norm_weight_per_head_dim_and_makes_attention_blind_to_the_scale_of_q_and_k():
    model = _model(qk_norm=True)
    assert model.num_params() == count_parameters(model.cfg) == count_parameters(_cfg()) + 2 * 2 * 16
    idx = torch.randint(0, 300, (2, 16))
    before, _ = model(idx)
    with torch.no_grad():
        for block in model.blocks:
            block.attn.qkv.weight[:64] *= 7.0  # q and k rows; v is rows 64:96
    after, _ = model(idx)
    torch.testing.assert_close(after, before, rtol=1e-4, atol=1e-4)
    plain = _model()  # the same edit changes a model without the norms
    base, _ = plain(idx)
    with torch.no_grad():
        for block in plain.blocks:
            block.attn.qkv.weight[:64] *= 7.0
    assert (plain(idx)[0] - base).abs().max() > 1e-2


def _reference(h, w, t, real, softcap=0.0, z_loss=0.0):
    """The loss from the full float64 logits by autograd: what the chunked, hand-derived gradient must equal."""
    h64, w64 = h.detach().double().requires_grad_(), w.detach().double().requires_grad_()
    logits = (h64 @ w64.t())[:, :real]
    if softcap:
        logits = softcap * torch.tanh(logits / softcap)
    loss = F.cross_entropy(logits, t) + z_loss * (torch.logsumexp(logits, -1) ** 2).mean()
    loss.backward()
    return loss.detach(), h64.grad, w64.grad


@pytest.mark.parametrize("softcap,z_loss", [(3.0, 0.0), (0.0, 1e-2), (3.0, 1e-2)])
@pytest.mark.parametrize("chunk_rows", [7, 1000])
def test_softcap_and_z_loss_give_the_loss_and_gradients_autograd_gives(softcap, z_loss, chunk_rows):
    torch.manual_seed(0)
    h, w = torch.randn(45, 16, requires_grad=True), torch.randn(256, 16, requires_grad=True)
    t = torch.randint(0, 200, (45,))
    loss = linear_cross_entropy(h, w, t, 200, chunk_rows=chunk_rows, softcap=softcap, z_loss=z_loss)
    loss.backward()
    ref, h_grad, w_grad = _reference(h, w, t, 200, softcap, z_loss)
    torch.testing.assert_close(loss.double(), ref, rtol=1e-5, atol=1e-5)
    torch.testing.assert_close(h.grad.double(), h_grad, rtol=1e-4, atol=1e-6)
    torch.testing.assert_close(w.grad[:200].double(), w_grad[:200], rtol=1e-4, atol=1e-6)
    assert torch.count_nonzero(w.grad[200:]) == 0  # padded rows: still never pushed
    plain = linear_cross_entropy(h.detach(), w.detach(), t, 200, chunk_rows=chunk_rows)
    assert abs(loss.item() - plain.item()) > 1e-3  # each switch changes the loss it is set on


def test_softcap_bounds_the_logits_generation_and_validation_read():
    model = _model(logit_softcap=2.0)
    with torch.no_grad():
        model.lm_head.weight.mul_(50.0)  # logits far beyond the cap without it
    logits, _ = model(torch.randint(0, 300, (2, 16)))
    assert logits.abs().max() <= 2.0 and logits.abs().max() > 1.9


def test_negative_switch_values_are_refused():
    for bad in ({"logit_softcap": -1.0}, {"z_loss": -0.1}):
        with pytest.raises(ValueError, match="must be >= 0"):
            _cfg(**bad)


@pytest.mark.parametrize("switch", [{"qk_norm": True}, {"logit_softcap": 15.0}])
def test_export_refuses_a_switch_without_a_llama_equivalent_in_one_line(switch, tiny_run, tmp_path, capsys):
    state = load_checkpoint(tiny_run / "checkpoints" / "step_00000003.pt")
    cfg = dataclasses.replace(GPTConfig(**state["config"]["model"]), **switch)
    state["config"]["model"] = dataclasses.asdict(cfg)
    state["model"] = GPT(cfg).state_dict()
    ckpt = save_checkpoint(tmp_path / "run", 3, state)
    out = tmp_path / "hf"
    assert main(["export", "--checkpoint", str(ckpt), "--out", str(out)]) == 2
    err = capsys.readouterr().err.strip()
    assert len(err.splitlines()) == 1 and next(iter(switch)) in err and "Traceback" not in err
    assert not out.exists()
