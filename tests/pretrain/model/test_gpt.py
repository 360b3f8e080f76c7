"""The model: parameter counts, causality, RoPE, gradient flow, and the presets/overrides of the config."""

from __future__ import annotations

import pytest
import torch

from pretrain.config import apply_overrides, model_config, preset
from pretrain.model.gpt import GPT, GPTConfig, count_parameters, pad_vocab, parameter_counts

GPT2_VOCAB = 50257


def small_config(**kw) -> GPTConfig:
    return GPTConfig(**{**dict(vocab_size=256, block_size=32, n_layer=2, n_head=2, n_embd=32), **kw})


def test_pad_vocab_rounds_up_to_128():
    assert pad_vocab(GPT2_VOCAB) == 50304
    assert pad_vocab(128) == 128
    assert pad_vocab(64) == pad_vocab(129 - 1) == 128
    assert pad_vocab(129) == 256


@pytest.mark.parametrize("tied", [False, True])
def test_count_matches_instantiated_model(tied):
    cfg = small_config(tie_embeddings=tied)
    model = GPT(cfg)
    assert model.num_params() == count_parameters(cfg)
    if tied:
        assert model.lm_head.weight is model.tok_emb.weight


def test_bangla_04b_is_about_04b_parameters_on_meta_device():
    cfg = model_config("bangla-0.4b", GPT2_VOCAB)
    assert (cfg.n_layer, cfg.n_embd, cfg.n_head, cfg.block_size, cfg.vocab_size) == (24, 1024, 16, 2048, 50304)
    assert cfg.ffn_hidden == 2816  # 8/3 * 1024 rounded up to a multiple of 256
    with torch.device("meta"):
        model = GPT(cfg)
    n = model.num_params()
    # Analytically: embedding + head 2 * 50304 * 1024, 24 layers of (4 d^2 + 3 d h + 2 d), final norm d.
    expected = 2 * 50304 * 1024 + 24 * (4 * 1024**2 + 3 * 1024 * 2816 + 2 * 1024) + 1024
    assert n == expected == count_parameters(cfg)
    assert 0.38e9 < n < 0.45e9
    assert parameter_counts(cfg).non_embedding == parameter_counts(cfg).matmul == n - 50304 * 1024


def test_forward_shapes_and_initial_loss_near_uniform():
    torch.manual_seed(0)
    cfg = small_config()
    model = GPT(cfg)
    idx = torch.randint(0, cfg.vocab_size, (3, 16))
    logits, _ = model(idx)
    assert logits.shape == (3, 16, cfg.vocab_size)
    nothing, loss = model(idx, idx)
    assert nothing is None  # with targets the full logits are never built
    # Small init: the untrained model is close to uniform, ln(256) = 5.55.
    assert abs(loss.item() - torch.log(torch.tensor(256.0)).item()) < 0.2


def test_causal_future_tokens_do_not_change_past_logits():
    torch.manual_seed(0)
    model = GPT(small_config()).eval()
    idx = torch.randint(0, 256, (1, 20))
    changed = idx.clone()
    changed[0, 12:] = (changed[0, 12:] + 7) % 256
    a, _ = model(idx)
    b, _ = model(changed)
    torch.testing.assert_close(a[0, :12], b[0, :12])
    assert not torch.allclose(a[0, 12:], b[0, 12:])


def test_rope_makes_attention_position_dependent():
    # Attention alone is blind to order: without RoPE, permuting the context of the last token would not
    # change its logits.
    torch.manual_seed(0)
    model = GPT(small_config()).eval()
    a, _ = model(torch.tensor([[3, 17, 99, 42]]))
    b, _ = model(torch.tensor([[99, 3, 17, 42]]))
    assert not torch.allclose(a[0, -1], b[0, -1], atol=1e-4)


def test_every_parameter_gets_a_nonzero_gradient_at_step_zero():
    torch.manual_seed(0)
    model = GPT(small_config())
    idx = torch.randint(0, 256, (2, 16))
    _, loss = model(idx[:, :-1], idx[:, 1:])
    loss.backward()
    for name, p in model.named_parameters():
        assert p.grad is not None and torch.isfinite(p.grad).all() and p.grad.abs().sum() > 0, name


def test_no_biases_and_rmsnorm():
    model = GPT(small_config())
    assert not any(name.endswith("bias") for name, _ in model.named_parameters())
    assert isinstance(model.norm, torch.nn.RMSNorm)


def test_generate_is_greedy_and_deterministic():
    torch.manual_seed(0)
    model = GPT(small_config()).eval()
    prompt = torch.randint(0, 256, (1, 5))
    out = model.generate(prompt, 6)
    assert out.shape == (1, 11)
    assert torch.equal(out[:, :5], prompt)
    assert torch.equal(out, model.generate(prompt, 6))


def test_sampling_keeps_to_the_top_k_and_is_reproducible():
    torch.manual_seed(0)
    model = GPT(small_config()).eval()
    prompt = torch.randint(0, 256, (1, 5))

    def draw(seed, **kw):
        return model.generate(prompt, 8, temperature=0.8, generator=torch.Generator().manual_seed(seed), **kw)

    assert torch.equal(draw(1, top_k=5), draw(1, top_k=5))
    assert torch.equal(draw(1, top_k=1), model.generate(prompt, 8))  # top-1 sampling is greedy
    seqs = {tuple(draw(s)[0, 5:].tolist()) for s in range(4)}
    assert len(seqs) > 1  # sampling, not argmax
    greedy = model.generate(prompt, 8)[0, 5:].tolist()
    assert greedy[0] not in model.generate(prompt, 8, banned=(greedy[0],))[0, 5:].tolist()[:1]


def test_flops_per_token_is_6n_plus_attention():
    cfg = small_config()
    model = GPT(cfg)
    assert model.flops_per_token() == 6 * (model.num_params() - 256 * 32) + 12 * 2 * 32 * 32  # untied: all but the table


def test_preset_and_overrides():
    cfg = preset("tiny", GPT2_VOCAB)
    assert cfg.model.vocab_size == 50304 and cfg.model.tie_embeddings
    apply_overrides(cfg, ["model.n_layer=2", "model.n_embd=64", "train.max_steps=7", "optim.schedule=wsd",
                          "train.tensorboard=no", "train.inject_faults=nan_loss@3,slow@4"])
    assert (cfg.model.n_layer, cfg.model.n_embd, cfg.train.max_steps) == (2, 64, 7)
    assert cfg.model.ffn_hidden == 256  # derived again from the new width
    assert cfg.optim.schedule == "wsd" and cfg.train.tensorboard is False
    assert cfg.train.inject_faults == ["nan_loss@3", "slow@4"]
    with pytest.raises(ValueError, match="no field 'n_layers'"):
        apply_overrides(cfg, ["model.n_layers=3"])
    with pytest.raises(ValueError, match="expected a int"):
        apply_overrides(cfg, ["train.max_steps=many"])
    with pytest.raises(ValueError, match="cosine"):
        apply_overrides(cfg, ["optim.schedule=linear"])
