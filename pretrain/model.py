"""The whole model in one file: a decoder-only GPT with RoPE, RMSNorm, SwiGLU and no biases.

Layout (Llama-style, pre-norm):

    tokens -> tok_emb -> [ x + attn(norm1(x)); x + mlp(norm2(x)) ] x n_layer -> norm -> lm_head -> logits

Conventions other code relies on (the HF golden reference converts weights with them):

* ``attn.qkv`` is the fused ``[q; k; v]`` projection (rows ``0:d``, ``d:2d``, ``2d:3d``); heads are
  contiguous slices of ``head_dim`` along the feature axis, as in ``LlamaAttention``.
* RoPE uses the "rotate half" layout (the first and second halves of each head are the pair), like
  ``transformers``' Llama, not the interleaved layout of the original paper.
* ``mlp.gate_up`` is the fused ``[gate; up]`` projection (rows ``0:h`` and ``h:2h``);
  ``mlp(x) = down(silu(gate(x)) * up(x))``.

Initialisation: every weight matrix ~ N(0, init_std), the two projections that write into the residual
stream (``attn.proj``, ``mlp.down``) ~ N(0, init_std / sqrt(2 * n_layer)) as in GPT-2, norm weights 1.
Nothing is zero-initialised, so every parameter receives a nonzero gradient at step 0 (the gradient-flow
arbiter needs no allow-list for this model).
"""

from __future__ import annotations

import math
from dataclasses import dataclass

import torch
import torch.nn as nn
import torch.nn.functional as F

VOCAB_MULTIPLE = 64


def pad_vocab(vocab_size: int, multiple: int = VOCAB_MULTIPLE) -> int:
    """``vocab_size`` rounded up to a multiple of ``multiple`` (tensor-core friendly embedding shapes)."""
    return -(-vocab_size // multiple) * multiple


@dataclass
class GPTConfig:
    """Shape of the model. ``vocab_size`` comes from the shard manifest's tokenizer, padded up to 64."""

    vocab_size: int = 50304
    block_size: int = 2048  # context length in tokens
    n_layer: int = 24
    n_head: int = 16
    n_embd: int = 1024
    ffn_hidden: int = 0  # SwiGLU hidden width; 0 = Llama's rule (8/3 * n_embd rounded up to a multiple of 256)
    tie_embeddings: bool = False
    rope_theta: float = 10000.0
    norm_eps: float = 1e-5
    init_std: float = 0.02

    def __post_init__(self) -> None:
        if self.n_embd % self.n_head:
            raise ValueError(f"n_embd {self.n_embd} is not divisible by n_head {self.n_head}")
        if (self.n_embd // self.n_head) % 2:
            raise ValueError(f"head dim {self.n_embd // self.n_head} must be even for RoPE")
        if not self.ffn_hidden:
            self.ffn_hidden = -(-(8 * self.n_embd // 3) // 256) * 256

    @property
    def head_dim(self) -> int:
        return self.n_embd // self.n_head


# Shapes only; the vocabulary is always taken from the data (see `model_config`).
PRESETS: dict[str, dict] = {
    # ~0.41B parameters with a 50k vocabulary (0.44B with 64k): see docs/pretrain.md for the count.
    "bangla-0.4b": dict(n_layer=24, n_head=16, n_embd=1024, block_size=2048),
    # Trains on a laptop CPU in minutes; tied embeddings keep the 50k-vocabulary tables from dominating.
    "tiny": dict(n_layer=4, n_head=4, n_embd=128, block_size=128, tie_embeddings=True),
}


def model_config(name: str, vocab_size: int, **overrides) -> GPTConfig:
    """The preset ``name`` for a tokenizer of ``vocab_size`` ids (padded up to a multiple of 64)."""
    if name not in PRESETS:
        raise ValueError(f"unknown model preset {name!r}; known: {', '.join(PRESETS)}")
    return GPTConfig(vocab_size=pad_vocab(vocab_size), **{**PRESETS[name], **overrides})


def count_parameters(cfg: GPTConfig) -> int:
    """The parameter count of ``GPT(cfg)``, computed from the shapes alone."""
    d, h, v = cfg.n_embd, cfg.ffn_hidden, cfg.vocab_size
    per_layer = 2 * d + 4 * d * d + 3 * d * h  # two norms, qkv + proj, gate_up + down
    head = 0 if cfg.tie_embeddings else v * d
    return v * d + cfg.n_layer * per_layer + d + head


def rope_tables(head_dim: int, length: int, theta: float, device=None) -> tuple[torch.Tensor, torch.Tensor]:
    """cos and sin of shape ``(length, head_dim)`` for the rotate-half RoPE layout."""
    inv_freq = 1.0 / theta ** (torch.arange(0, head_dim, 2, device=device, dtype=torch.float32) / head_dim)
    angles = torch.outer(torch.arange(length, device=device, dtype=torch.float32), inv_freq)
    angles = torch.cat([angles, angles], dim=-1)
    return angles.cos(), angles.sin()


def apply_rope(x: torch.Tensor, cos: torch.Tensor, sin: torch.Tensor) -> torch.Tensor:
    """Rotate ``x`` of shape ``(B, H, T, head_dim)`` by position."""
    x1, x2 = x.chunk(2, dim=-1)
    rotated = torch.cat([-x2, x1], dim=-1)
    return x * cos.to(x.dtype) + rotated * sin.to(x.dtype)


class CausalSelfAttention(nn.Module):
    def __init__(self, cfg: GPTConfig):
        super().__init__()
        self.n_head, self.head_dim = cfg.n_head, cfg.head_dim
        self.qkv = nn.Linear(cfg.n_embd, 3 * cfg.n_embd, bias=False)
        self.proj = nn.Linear(cfg.n_embd, cfg.n_embd, bias=False)

    def forward(self, x: torch.Tensor, cos: torch.Tensor, sin: torch.Tensor) -> torch.Tensor:
        B, T, C = x.shape
        q, k, v = (t.view(B, T, self.n_head, self.head_dim).transpose(1, 2) for t in self.qkv(x).split(C, dim=2))
        q, k = apply_rope(q, cos, sin), apply_rope(k, cos, sin)
        y = F.scaled_dot_product_attention(q, k, v, is_causal=True)  # flash attention on a GPU
        return self.proj(y.transpose(1, 2).contiguous().view(B, T, C))


class SwiGLU(nn.Module):
    def __init__(self, cfg: GPTConfig):
        super().__init__()
        self.gate_up = nn.Linear(cfg.n_embd, 2 * cfg.ffn_hidden, bias=False)
        self.down = nn.Linear(cfg.ffn_hidden, cfg.n_embd, bias=False)

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        gate, up = self.gate_up(x).chunk(2, dim=-1)
        return self.down(F.silu(gate) * up)


class Block(nn.Module):
    def __init__(self, cfg: GPTConfig):
        super().__init__()
        self.norm1 = nn.RMSNorm(cfg.n_embd, eps=cfg.norm_eps)
        self.attn = CausalSelfAttention(cfg)
        self.norm2 = nn.RMSNorm(cfg.n_embd, eps=cfg.norm_eps)
        self.mlp = SwiGLU(cfg)

    def forward(self, x: torch.Tensor, cos: torch.Tensor, sin: torch.Tensor) -> torch.Tensor:
        x = x + self.attn(self.norm1(x), cos, sin)
        return x + self.mlp(self.norm2(x))


class GPT(nn.Module):
    def __init__(self, cfg: GPTConfig):
        super().__init__()
        self.cfg = cfg
        self.tok_emb = nn.Embedding(cfg.vocab_size, cfg.n_embd)
        self.blocks = nn.ModuleList(Block(cfg) for _ in range(cfg.n_layer))
        self.norm = nn.RMSNorm(cfg.n_embd, eps=cfg.norm_eps)
        self.lm_head = nn.Linear(cfg.n_embd, cfg.vocab_size, bias=False)
        if cfg.tie_embeddings:
            self.lm_head.weight = self.tok_emb.weight
        # Derived from the config, so not saved in checkpoints (persistent=False).
        self.register_buffer("rope_cos", torch.empty(cfg.block_size, cfg.head_dim), persistent=False)
        self.register_buffer("rope_sin", torch.empty(cfg.block_size, cfg.head_dim), persistent=False)
        self.init_weights()

    @torch.no_grad()
    def init_weights(self) -> None:
        """(Re)initialise every parameter and the RoPE tables; also used after ``to_empty`` from meta."""
        cos, sin = rope_tables(self.cfg.head_dim, self.cfg.block_size, self.cfg.rope_theta, self.rope_cos.device)
        self.rope_cos.copy_(cos)
        self.rope_sin.copy_(sin)
        residual_std = self.cfg.init_std / math.sqrt(2 * self.cfg.n_layer)
        for name, p in self.named_parameters():
            if p.dim() == 1:
                nn.init.ones_(p)
            elif name.endswith(("attn.proj.weight", "mlp.down.weight")):
                nn.init.normal_(p, mean=0.0, std=residual_std)
            else:
                nn.init.normal_(p, mean=0.0, std=self.cfg.init_std)

    def num_params(self, non_embedding: bool = False) -> int:
        """Parameter count (shared tensors once); ``non_embedding`` leaves out the input embedding table,
        which is a lookup, not a matmul (with tied embeddings it is the output head and stays counted)."""
        n = sum(p.numel() for p in self.parameters())
        if non_embedding and not self.cfg.tie_embeddings:
            n -= self.tok_emb.weight.numel()
        return n

    def flops_per_token(self, seq_len: int | None = None) -> float:
        """Training FLOPs per token: 6N for the matmuls (forward + backward) plus the attention scores and
        weighted sum, 12 * n_layer * n_embd * seq_len (PaLM appendix B; nanoGPT's estimate_mfu)."""
        t = seq_len or self.cfg.block_size
        return 6 * self.num_params(non_embedding=True) + 12 * self.cfg.n_layer * self.cfg.n_embd * t

    def forward(self, idx: torch.Tensor, targets: torch.Tensor | None = None) -> tuple[torch.Tensor, torch.Tensor | None]:
        """Logits ``(B, T, vocab)`` and, when ``targets`` are given, the mean cross-entropy (fp32)."""
        seq_len = idx.size(1)
        if seq_len > self.cfg.block_size:
            raise ValueError(f"sequence of {seq_len} tokens is longer than the context of {self.cfg.block_size}")
        cos, sin = self.rope_cos[:seq_len], self.rope_sin[:seq_len]
        x = self.tok_emb(idx)
        for block in self.blocks:
            x = block(x, cos, sin)
        logits = self.lm_head(self.norm(x))
        loss = None
        if targets is not None:
            loss = F.cross_entropy(logits.float().view(-1, logits.size(-1)), targets.reshape(-1))
        return logits, loss

    @torch.no_grad()
    def generate(self, idx: torch.Tensor, max_new_tokens: int, *, temperature: float = 0.0, top_k: int | None = None,
                 generator: torch.Generator | None = None) -> torch.Tensor:
        """Continue ``idx`` (B, T) by ``max_new_tokens`` tokens (no KV cache: a few samples only): greedy at
        temperature 0, else sampled from the ``top_k`` most likely tokens (reproducible with ``generator``)."""
        for _ in range(max_new_tokens):
            logits, _ = self(idx[:, -self.cfg.block_size:])
            logits = logits[:, -1].float()
            if temperature <= 0:
                nxt = logits.argmax(dim=-1, keepdim=True)
            else:
                if top_k:
                    kth = torch.topk(logits, min(top_k, logits.size(-1))).values[:, -1:]
                    logits = logits.masked_fill(logits < kth, float("-inf"))
                probs = torch.softmax(logits / temperature, dim=-1)
                nxt = torch.multinomial(probs.cpu(), 1, generator=generator).to(idx.device)
            idx = torch.cat([idx, nxt], dim=1)
        return idx


def build_model(cfg: GPTConfig, seed: int) -> GPT:
    """The model as initialised by a run's seed, on CPU (so the init is the same on every device, and is
    the random-init twin that evaluation compares against)."""
    torch.manual_seed(seed)
    return GPT(cfg)
