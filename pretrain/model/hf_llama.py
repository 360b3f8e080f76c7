"""The golden reference: our GPT against ``transformers.LlamaForCausalLM`` holding the same weights.

The two architectures are the same function (pre-norm RMSNorm, RoPE in the rotate-half layout, SwiGLU, no
biases, optional tied embeddings), so a weight conversion that only renames and splits is exact:

==============================  ==============================================================
ours                            transformers Llama
==============================  ==============================================================
``tok_emb.weight``              ``model.embed_tokens.weight``
``blocks.i.norm1.weight``       ``model.layers.i.input_layernorm.weight``
``blocks.i.attn.qkv.weight``    ``model.layers.i.self_attn.{q,k,v}_proj.weight`` (row blocks of d)
``blocks.i.attn.proj.weight``   ``model.layers.i.self_attn.o_proj.weight``
``blocks.i.norm2.weight``       ``model.layers.i.post_attention_layernorm.weight``
``blocks.i.mlp.gate_up.weight`` ``model.layers.i.mlp.{gate,up}_proj.weight`` (row blocks of h)
``blocks.i.mlp.down.weight``    ``model.layers.i.mlp.down_proj.weight``
``norm.weight``                 ``model.norm.weight``
``lm_head.weight``              ``lm_head.weight`` (absent from ours when tied)
==============================  ==============================================================

Our embedding and head are padded to a multiple of 128 rows whose logits are never predicted; the HF model
gets the real vocabulary's rows (``to_hf``'s default), so it computes the same function, loss included.
Our gradients of the padded rows are zero, which :func:`compare` checks too.

Both models rotate the two *halves* of each head (``rotate_half``), so q and k need no permutation; a model
with the interleaved RoPE layout of the original paper would need one. Gradients convert with the same
mapping, which is how :func:`compare_gradients` lines them up.
"""

from __future__ import annotations

import math
from dataclasses import asdict, dataclass, field

import torch
import torch.nn as nn

from pretrain.model.gpt import GPT, GPTConfig


def hf_config(cfg: GPTConfig, *, bos_id: int | None = None, eos_id: int | None = None, pad_id: int | None = None,
              use_cache: bool = False, attn_implementation: str = "sdpa", vocab_size: int = 0):
    """The ``LlamaConfig`` of the same shape as ``cfg``, with ``vocab_size`` rows (0: the real vocabulary).
    ``use_cache``: off for the comparisons here (training forwards), on for an export (generation)."""
    from transformers import LlamaConfig

    hf = LlamaConfig(
        vocab_size=vocab_size or cfg.real_vocab_size, hidden_size=cfg.n_embd, intermediate_size=cfg.ffn_hidden,
        num_hidden_layers=cfg.n_layer, num_attention_heads=cfg.n_head, num_key_value_heads=cfg.n_head,
        head_dim=cfg.head_dim, max_position_embeddings=cfg.block_size, rms_norm_eps=cfg.norm_eps,
        rope_parameters={"rope_type": "default", "rope_theta": cfg.rope_theta},
        tie_word_embeddings=cfg.tie_embeddings, attention_bias=False, mlp_bias=False, hidden_act="silu",
        initializer_range=cfg.init_std, bos_token_id=bos_id, eos_token_id=eos_id, pad_token_id=pad_id,
        use_cache=use_cache, attn_implementation=attn_implementation,
    )
    # transformers 4 reads the RoPE base from the top-level `rope_theta` only (and silently takes 10000 without
    # it); 5 from `rope_parameters`. config.json carries both, so the export computes the same on either.
    hf.rope_theta = cfg.rope_theta
    return hf


def gpt_config(hf) -> GPTConfig:
    """Our config from a ``LlamaConfig``; refuses the Llama features our model does not have."""
    if hf.num_key_value_heads != hf.num_attention_heads:
        raise ValueError(f"grouped-query attention ({hf.num_key_value_heads} kv heads for "
                         f"{hf.num_attention_heads} heads) is not supported by pretrain.model.gpt.GPT")
    if getattr(hf, "attention_bias", False) or getattr(hf, "mlp_bias", False):
        raise ValueError("Llama biases are not supported by pretrain.model.gpt.GPT (it has none)")
    rope = getattr(hf, "rope_parameters", None) or {}
    if rope.get("rope_type", "default") != "default":
        raise ValueError(f"RoPE scaling {rope.get('rope_type')!r} is not supported by pretrain.model.gpt.GPT")
    if hf.hidden_act != "silu":
        raise ValueError(f"activation {hf.hidden_act!r} is not supported (SwiGLU uses silu)")
    cfg = GPTConfig(vocab_size=hf.vocab_size, block_size=hf.max_position_embeddings, n_layer=hf.num_hidden_layers,
                    n_head=hf.num_attention_heads, n_embd=hf.hidden_size, ffn_hidden=hf.intermediate_size,
                    tie_embeddings=bool(hf.tie_word_embeddings), rope_theta=float(rope.get("rope_theta", 10000.0)),
                    norm_eps=hf.rms_norm_eps, init_std=hf.initializer_range)
    if cfg.head_dim != getattr(hf, "head_dim", cfg.head_dim):
        raise ValueError(f"head_dim {hf.head_dim} != hidden_size / heads = {cfg.head_dim}")
    return cfg


def to_hf_state_dict(state: dict[str, torch.Tensor], cfg: GPTConfig, vocab_size: int = 0) -> dict[str, torch.Tensor]:
    """Our state dict (or a dict of gradients with the same names) in transformers Llama names, with the
    first ``vocab_size`` rows of the embedding and head (0: the real vocabulary)."""
    d, h, v = cfg.n_embd, cfg.ffn_hidden, vocab_size or cfg.real_vocab_size
    out = {"model.embed_tokens.weight": state["tok_emb.weight"][:v], "model.norm.weight": state["norm.weight"],
           "lm_head.weight": state["tok_emb.weight" if cfg.tie_embeddings else "lm_head.weight"][:v]}
    for i in range(cfg.n_layer):
        ours, hf = f"blocks.{i}.", f"model.layers.{i}."
        q, k, v = state[ours + "attn.qkv.weight"].split(d, dim=0)
        gate, up = state[ours + "mlp.gate_up.weight"].split(h, dim=0)
        out.update({
            hf + "input_layernorm.weight": state[ours + "norm1.weight"],
            hf + "self_attn.q_proj.weight": q, hf + "self_attn.k_proj.weight": k, hf + "self_attn.v_proj.weight": v,
            hf + "self_attn.o_proj.weight": state[ours + "attn.proj.weight"],
            hf + "post_attention_layernorm.weight": state[ours + "norm2.weight"],
            hf + "mlp.gate_proj.weight": gate, hf + "mlp.up_proj.weight": up,
            hf + "mlp.down_proj.weight": state[ours + "mlp.down.weight"],
        })
    return out


def from_hf_state_dict(state: dict[str, torch.Tensor], cfg: GPTConfig) -> dict[str, torch.Tensor]:
    """A transformers Llama state dict (or gradients) in our names; the inverse of :func:`to_hf_state_dict`."""
    out = {"tok_emb.weight": state["model.embed_tokens.weight"], "norm.weight": state["model.norm.weight"]}
    if not cfg.tie_embeddings:
        out["lm_head.weight"] = state["lm_head.weight"]
    for i in range(cfg.n_layer):
        ours, hf = f"blocks.{i}.", f"model.layers.{i}."
        out.update({
            ours + "norm1.weight": state[hf + "input_layernorm.weight"],
            ours + "attn.qkv.weight": torch.cat([state[hf + f"self_attn.{n}_proj.weight"] for n in "qkv"]),
            ours + "attn.proj.weight": state[hf + "self_attn.o_proj.weight"],
            ours + "norm2.weight": state[hf + "post_attention_layernorm.weight"],
            ours + "mlp.gate_up.weight": torch.cat([state[hf + "mlp.gate_proj.weight"], state[hf + "mlp.up_proj.weight"]]),
            ours + "mlp.down.weight": state[hf + "mlp.down_proj.weight"],
        })
    return out


def to_hf(model: GPT, *, attn_implementation: str = "sdpa", bos_id: int | None = None, eos_id: int | None = None,
          pad_id: int | None = None, use_cache: bool = False, vocab_size: int = 0) -> nn.Module:
    """A ``LlamaForCausalLM`` holding a copy of ``model``'s weights (same device and dtype). By default it
    has the real vocabulary (the same function as ours); ``vocab_size=model.cfg.vocab_size`` keeps the
    padded rows (the same matmul shapes, for a speed comparison)."""
    from transformers import LlamaForCausalLM

    param = next(model.parameters())
    cfg = hf_config(model.cfg, bos_id=bos_id, eos_id=eos_id, pad_id=pad_id, use_cache=use_cache,
                    attn_implementation=attn_implementation, vocab_size=vocab_size)
    with torch.device(param.device):
        hf = LlamaForCausalLM(cfg).to(param.dtype)
    state = to_hf_state_dict(model.state_dict(), model.cfg, vocab_size)
    _load_exact(hf, {k: v.detach().clone() for k, v in state.items()}, model.cfg.tie_embeddings)
    return hf


def from_hf(hf: nn.Module) -> GPT:
    """Our ``GPT`` holding a copy of a ``LlamaForCausalLM``'s weights."""
    cfg = gpt_config(hf.config)
    param = next(hf.parameters())
    model = GPT(cfg).to(device=param.device, dtype=param.dtype)
    _load_exact(model, {k: v.detach().clone() for k, v in from_hf_state_dict(hf.state_dict(), cfg).items()},
                cfg.tie_embeddings)
    return model


def _load_exact(module: nn.Module, state: dict[str, torch.Tensor], tied: bool) -> None:
    """``load_state_dict`` that fails on any missing or unexpected name (the tied head excepted)."""
    result = module.load_state_dict(state, strict=False)
    missing = set(result.missing_keys) - ({"lm_head.weight"} if tied else set())
    if missing or result.unexpected_keys:
        raise KeyError(f"weight conversion mismatch: missing {sorted(missing)}, unexpected {sorted(result.unexpected_keys)}")


def hf_loss(hf: nn.Module, inputs: torch.Tensor, targets: torch.Tensor) -> tuple[torch.Tensor, torch.Tensor]:
    """HF's own forward and loss for already-shifted ``targets``: ``(logits, mean cross-entropy)``."""
    targets = targets.contiguous()  # HF flattens them with .view
    out = hf(input_ids=inputs, labels=targets, shift_labels=targets)
    return out.logits, out.loss


def _max_abs_rel(a: torch.Tensor, b: torch.Tensor) -> tuple[float, float]:
    a, b = a.detach().float(), b.detach().float()
    diff = float((a - b).abs().max())
    scale = float(b.abs().max())
    return diff, diff / scale if scale > 0 else diff


@dataclass
class Comparison:
    """Largest differences between our model and the HF reference on one batch."""

    loss_ours: float
    loss_hf: float
    logits_max_abs: float
    logits_max_rel: float  # max |diff| / max |reference|
    grad_max_rel: float  # worst parameter's max |diff| / max |reference grad|
    grad_worst: str
    grads: dict[str, float] = field(default_factory=dict)  # per parameter, max |diff| / max |reference grad|

    def to_dict(self) -> dict:
        return asdict(self)


def compare(model: GPT, hf: nn.Module, inputs: torch.Tensor, targets: torch.Tensor) -> Comparison:
    """Forward and backward through both models on one batch; compare logits, loss and every gradient (an
    HF gradient with fewer vocabulary rows than ours is compared as if its missing rows were zero)."""
    model.zero_grad(set_to_none=True)
    hf.zero_grad(set_to_none=True)
    with torch.no_grad():
        logits, _ = model(inputs)
    _, loss = model(inputs, targets)
    loss.backward()
    hf_logits, loss_hf = hf_loss(hf, inputs, targets)
    loss_hf.backward()
    logits_abs, logits_rel = _max_abs_rel(logits, hf_logits)
    hf_grads = from_hf_state_dict({n: p.grad for n, p in hf.named_parameters(remove_duplicate=False)
                                   if p.grad is not None}, model.cfg)
    grads = {}
    for name, p in model.named_parameters():
        if name not in hf_grads:
            grads[name] = math.inf
            continue
        reference = hf_grads[name]
        if reference.shape[0] < p.shape[0]:  # the padded vocabulary rows, absent from HF
            reference = torch.cat([reference, reference.new_zeros(p.shape[0] - reference.shape[0], *reference.shape[1:])])
        grads[name] = _max_abs_rel(p.grad, reference)[1]
    worst = max(grads, key=grads.get)
    return Comparison(float(loss.detach()), float(loss_hf.detach()), logits_abs, logits_rel, grads[worst], worst, grads)


def train_trajectories(model: GPT, hf: nn.Module, batches: list[tuple[torch.Tensor, torch.Tensor]],
                       lr: float = 1e-3, weight_decay: float = 0.1) -> tuple[list[float], list[float]]:
    """Train both models with the same AdamW on the same batches; return the two loss trajectories."""
    trajectories = []
    for net, step in ((model, lambda x, y: model(x, y)[1]), (hf, lambda x, y: hf_loss(hf, x, y)[1])):
        opt = torch.optim.AdamW(net.parameters(), lr=lr, weight_decay=weight_decay, betas=(0.9, 0.95))
        losses = []
        for x, y in batches:
            opt.zero_grad(set_to_none=True)
            loss = step(x, y)
            loss.backward()
            opt.step()
            losses.append(float(loss.detach()))
        trajectories.append(losses)
    return trajectories[0], trajectories[1]
