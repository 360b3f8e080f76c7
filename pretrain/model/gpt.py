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

Speed on a GPU (numerically the same function; the golden reference in `pretrain.model.hf_llama` holds):

* the vocabulary is padded to a multiple of 128 (tensor-core friendly shapes); the padded ids are never
  predicted: their logits are cut off (``forward`` without targets) or set to -inf in the loss, so an
  untrained model's loss is ln(real vocabulary);
* under autocast the residual stream is carried in the autocast dtype (bf16): the embedding output is cast
  once, the norms compute in fp32 and hand back bf16, and the parameters and optimizer state stay fp32;
* the loss never holds the full fp32 logits: `pretrain.model.loss.linear_cross_entropy` computes the head
  and the cross-entropy in row chunks and the gradients in the same pass;
* :meth:`GPT.compile_blocks` compiles one block's forward once and reuses it for every block (regional
  compilation: a fraction of whole-model compile time), and the loss's per-chunk softmax and gradient (so
  its elementwise passes over the logits fuse); no-grad passes (validation, generation) run eagerly, so
  evaluation never triggers a recompile.

Recipe switches (off by default, measured by ``benchmarks/bench_recipe.py``): ``qk_norm`` (RMSNorm on each
head's q and k before RoPE), ``logit_softcap`` (``c * tanh(logits / c)``, in generation, validation and the
loss alike) and ``z_loss`` (a training-loss term on the log-partition; validation scores the plain
cross-entropy). Neither of the first two has a Llama equivalent, so ``pretrain export`` refuses them.

Initialisation: every weight matrix ~ N(0, init_std), the two projections that write into the residual
stream (``attn.proj``, ``mlp.down``) ~ N(0, init_std / sqrt(2 * n_layer)) as in GPT-2, norm weights 1.
Nothing is zero-initialised, so every parameter receives a nonzero gradient at step 0 (the gradient-flow
arbiter needs no allow-list for this model).
"""

from __future__ import annotations

import functools
import math
from dataclasses import dataclass

import torch
import torch.nn as nn
import torch.nn.functional as F

from pretrain.model.loss import compiled_loss_chunk, linear_cross_entropy

VOCAB_MULTIPLE = 128


def pad_vocab(vocab_size: int, multiple: int = VOCAB_MULTIPLE) -> int:
    """``vocab_size`` rounded up to a multiple of ``multiple`` (tensor-core friendly embedding shapes)."""
    return -(-vocab_size // multiple) * multiple


@dataclass
class GPTConfig:
    """Shape of the model. ``vocab_size`` is the embedding size: the shard manifest's tokenizer vocabulary
    (``real_vocab_size``) padded up to a multiple of 128; ids from ``real_vocab_size`` on are never predicted."""

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
    real_vocab_size: int = 0  # the tokenizer's vocabulary; 0 = vocab_size (no padding)
    # Recipe switches (issue 31), each off by default; benchmarks/bench_recipe.py measures them.
    qk_norm: bool = False  # RMSNorm (learned weight) on each head's q and k, before RoPE (OLMo 2, Qwen3)
    logit_softcap: float = 0.0  # logits = c * tanh(logits / c) (Gemma 2); 0 = off
    z_loss: float = 0.0  # adds z_loss * logsumexp(logits)^2 per token to the training loss (PaLM); 0 = off

    def __post_init__(self) -> None:
        if self.n_embd % self.n_head:
            raise ValueError(f"n_embd {self.n_embd} is not divisible by n_head {self.n_head}")
        if (self.n_embd // self.n_head) % 2:
            raise ValueError(f"head dim {self.n_embd // self.n_head} must be even for RoPE")
        if not self.ffn_hidden:
            self.ffn_hidden = -(-(8 * self.n_embd // 3) // 256) * 256
        if not self.real_vocab_size:
            self.real_vocab_size = self.vocab_size
        if not 0 < self.real_vocab_size <= self.vocab_size:
            raise ValueError(f"real_vocab_size {self.real_vocab_size} must be in 1..vocab_size {self.vocab_size}")
        if self.logit_softcap < 0 or self.z_loss < 0:
            raise ValueError(f"logit_softcap {self.logit_softcap} and z_loss {self.z_loss} must be >= 0 (0 = off)")

    @property
    def head_dim(self) -> int:
        return self.n_embd // self.n_head


def count_parameters(cfg: GPTConfig) -> int:
    """The parameter count of ``GPT(cfg)``, computed from the shapes alone."""
    d, h, v = cfg.n_embd, cfg.ffn_hidden, cfg.vocab_size
    per_layer = 2 * d + 4 * d * d + 3 * d * h  # two norms, qkv + proj, gate_up + down
    if cfg.qk_norm:
        per_layer += 2 * cfg.head_dim  # the q and k norms' weights, shared by the heads
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


class RMSNorm(nn.RMSNorm):
    """RMSNorm computed in fp32 and returned in the input's dtype, whatever autocast's op lists say: the
    residual stream stays bf16 under autocast, the normalisation itself does not lose precision."""

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        return F.rms_norm(x.float(), self.normalized_shape, self.weight, self.eps).to(x.dtype)


class CausalSelfAttention(nn.Module):
    def __init__(self, cfg: GPTConfig):
        super().__init__()
        self.n_head, self.head_dim = cfg.n_head, cfg.head_dim
        self.qkv = nn.Linear(cfg.n_embd, 3 * cfg.n_embd, bias=False)
        self.proj = nn.Linear(cfg.n_embd, cfg.n_embd, bias=False)
        # Modules only with the switch on: a default model's state dict and parameters are today's.
        self.q_norm = RMSNorm(cfg.head_dim, eps=cfg.norm_eps) if cfg.qk_norm else None
        self.k_norm = RMSNorm(cfg.head_dim, eps=cfg.norm_eps) if cfg.qk_norm else None

    def forward(self, x: torch.Tensor, cos: torch.Tensor, sin: torch.Tensor) -> torch.Tensor:
        B, T, C = x.shape
        q, k, v = (t.view(B, T, self.n_head, self.head_dim).transpose(1, 2) for t in self.qkv(x).split(C, dim=2))
        if self.q_norm is not None:
            q, k = self.q_norm(q), self.k_norm(k)
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
        self.norm1 = RMSNorm(cfg.n_embd, eps=cfg.norm_eps)
        self.attn = CausalSelfAttention(cfg)
        self.norm2 = RMSNorm(cfg.n_embd, eps=cfg.norm_eps)
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
        self.norm = RMSNorm(cfg.n_embd, eps=cfg.norm_eps)
        self.lm_head = nn.Linear(cfg.n_embd, cfg.vocab_size, bias=False)
        if cfg.tie_embeddings:
            self.lm_head.weight = self.tok_emb.weight
        # Derived from the config, so not saved in checkpoints (persistent=False).
        self.register_buffer("rope_cos", torch.empty(cfg.block_size, cfg.head_dim), persistent=False)
        self.register_buffer("rope_sin", torch.empty(cfg.block_size, cfg.head_dim), persistent=False)
        self.block_forward = self.loss_chunk = None  # set by compile_blocks
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

    def num_params(self) -> int:
        """Parameter count of the tensors (shared ones once); :func:`parameter_counts` has the figures the
        reports print, from the shapes."""
        return sum(p.numel() for p in self.parameters())

    def flops_per_token(self, seq_len: int | None = None) -> float:
        """Training FLOPs per token: 6N for the matmuls (forward + backward) plus the attention scores and
        weighted sum, 12 * n_layer * n_embd * seq_len (PaLM appendix B; nanoGPT's estimate_mfu)."""
        t = seq_len or self.cfg.block_size
        return 6 * parameter_counts(self.cfg).matmul + 12 * self.cfg.n_layer * self.cfg.n_embd * t

    def compile_blocks(self, backend: str = "inductor", mode: str | None = None) -> None:
        """Regional compilation: one compiled block forward shared by every block (parameters are graph
        inputs, so the 24 blocks of bangla-0.4b reuse one graph), and the loss's per-chunk body after its head
        matmul (`pretrain.model.loss`), both used by passes that record gradients. Models of one process share
        the compiled functions, so a copy compiles nothing new."""
        self.block_forward = _compiled_run_block(backend, mode)
        self.loss_chunk = compiled_loss_chunk(backend, mode)

    def __getstate__(self) -> dict:
        # A copy (the arbiter's on a row or two, the preflight's) starts eager: the compiled block would
        # otherwise recompile for the copy's batch shape.
        return {**super().__getstate__(), "block_forward": None, "loss_chunk": None}

    def forward(self, idx: torch.Tensor, targets: torch.Tensor | None = None
                ) -> tuple[torch.Tensor | None, torch.Tensor | None]:
        """Without ``targets``: logits ``(B, T, real_vocab_size)`` and None. With ``targets``: None and the
        mean cross-entropy (fp32) over the real vocabulary; the full logits are never built."""
        seq_len = idx.size(1)
        if seq_len > self.cfg.block_size:
            raise ValueError(f"sequence of {seq_len} tokens is longer than the context of {self.cfg.block_size}")
        cos, sin = self.rope_cos[:seq_len], self.rope_sin[:seq_len]
        x = self.tok_emb(idx)
        if torch.is_autocast_enabled(x.device.type):
            x = x.to(torch.get_autocast_dtype(x.device.type))
        compiled = self.block_forward is not None and torch.is_grad_enabled()
        run = self.block_forward if compiled else _run_block
        for block in self.blocks:
            x = run(block, x, cos, sin)
        h = self.norm(x)
        if targets is None:
            logits = self.lm_head(h)[..., :self.cfg.real_vocab_size]
            if self.cfg.logit_softcap:
                logits = self.cfg.logit_softcap * torch.tanh(logits / self.cfg.logit_softcap)
            return logits, None
        return None, linear_cross_entropy(h.flatten(0, 1), self.lm_head.weight, targets.reshape(-1),
                                          self.cfg.real_vocab_size, body=self.loss_chunk if compiled else None,
                                          softcap=self.cfg.logit_softcap, z_loss=self.cfg.z_loss)

    @torch.no_grad()
    def generate(self, idx: torch.Tensor, max_new_tokens: int, *, temperature: float = 0.0, top_k: int | None = None,
                 generator: torch.Generator | None = None, banned: tuple[int, ...] = ()) -> torch.Tensor:
        """Continue ``idx`` (B, T) by ``max_new_tokens`` tokens (no KV cache: a few samples only): greedy at
        temperature 0, else sampled from the ``top_k`` most likely tokens (reproducible with ``generator``);
        ``banned`` ids are never produced (e.g. BOS, to continue the same document)."""
        for _ in range(max_new_tokens):
            logits, _ = self(idx[:, -self.cfg.block_size:])
            logits = logits[:, -1].float()
            if banned:
                logits[:, list(banned)] = float("-inf")
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


def _run_block(block: Block, x: torch.Tensor, cos: torch.Tensor, sin: torch.Tensor) -> torch.Tensor:
    return block(x, cos, sin)


@functools.cache
def _compiled_run_block(backend: str, mode: str | None):
    return torch.compile(_run_block, backend=backend, mode=mode)


def build_model(cfg: GPTConfig, seed: int) -> GPT:
    """The model as initialised by a run's seed, on CPU (so the init is the same on every device, and is
    the random-init twin that evaluation compares against)."""
    torch.manual_seed(seed)
    return GPT(cfg)


@dataclass(frozen=True)
class ParameterCounts:
    """The parameter figures of a model shape, defined here once for every report (preflight, plan, model
    card, export, bench via ``flops_per_token``).

    * ``non_embedding``: every parameter but the token-embedding table; with tied embeddings that table is
      also the output head, so the head goes with it (RoPE has no position table). This is what
      ``transformers``' ``num_parameters(exclude_embeddings=True)`` counts, so the export gives the same.
    * trained vs exported: training pads the vocabulary tables from the tokenizer's ``vocab`` rows to
      ``padded_vocab`` (a multiple of 128); the export keeps only the ``vocab`` rows (padded ids are never
      predicted), so an untied model's non-embedding count (its head) differs between the two, a tied one's not.
    * ``matmul``: the weights every token is multiplied by in training, the N of the 6N FLOPs per token:
      ``non_embedding`` plus the output head with its padded rows when it is the tied table.
    * ``block_matrices``: the 2-D weights inside the blocks (qkv, proj, gate_up, down), what Muon trains.
    """

    vocab: int
    padded_vocab: int
    total: int
    non_embedding: int
    exported_total: int
    exported_non_embedding: int
    matmul: int
    block_matrices: int


def parameter_counts(cfg: GPTConfig) -> ParameterCounts:
    """The :class:`ParameterCounts` of ``GPT(cfg)`` and of its export, from the shapes alone."""
    tables = 1 if cfg.tie_embeddings else 2  # vocabulary-sized tables: embedding, and the head unless tied
    total = count_parameters(cfg)
    exported = total - (cfg.vocab_size - cfg.real_vocab_size) * cfg.n_embd * tables
    non_embedding = total - cfg.vocab_size * cfg.n_embd
    return ParameterCounts(vocab=cfg.real_vocab_size, padded_vocab=cfg.vocab_size, total=total,
                           non_embedding=non_embedding, exported_total=exported,
                           exported_non_embedding=exported - cfg.real_vocab_size * cfg.n_embd,
                           matmul=non_embedding + (cfg.vocab_size * cfg.n_embd if cfg.tie_embeddings else 0),
                           block_matrices=cfg.n_layer * (4 * cfg.n_embd ** 2 + 3 * cfg.n_embd * cfg.ffn_hidden))
