"""The run plan: what a config will do, before it does it. ``pretrain launch --dry-run`` prints it; the
preflight uses its memory estimate.

Everything here is arithmetic on the config (no model is built, no data read): steps, tokens, the learning
rate at the milestones of the schedule, the time at a given throughput, checkpoint size and the disk the
kept checkpoints need, and memory per device for one micro-batch. Estimates, not measurements: the GPU check
(``benchmarks/gpu_check.sh``) measures throughput and peak memory.
"""

from __future__ import annotations

from dataclasses import asdict, dataclass
from typing import Any

from pretrain.config import OPTIMIZERS, RunConfig, effective_warmup
from pretrain.model.gpt import count_parameters, parameter_counts
from pretrain.model.loss import LOSS_CHUNK_ELEMENTS
from pretrain.train.hardware import PEAK_FLOPS
from pretrain.train.optim import batch_layout, lr_at

# The throughput assumed when none is given: this MFU on an H100 SXM (the floor for bangla-0.4b).
ASSUMED_MFU = 0.45
ASSUMED_PEAK = dict(PEAK_FLOPS)["H100"]

def optimizer_state_bytes(cfg: RunConfig) -> int:
    """The optimizer's fp32 state (`pretrain.config.OptimizerSpec.state_floats`): AdamW's two moments per
    parameter; Muon's one momentum buffer per block matrix element, with AdamW's two for the rest."""
    return 4 * OPTIMIZERS[cfg.optim.name].state_floats(cfg.model)


def checkpoint_bytes(cfg: RunConfig) -> int:
    """fp32 weights and the optimizer state; beyond them a checkpoint holds the config, RNG and sampler state:
    kilobytes."""
    return 4 * count_parameters(cfg.model) + optimizer_state_bytes(cfg)


def memory_estimate(cfg: RunConfig, *, autocast: bool, shard: int = 1, fused_optimizer: bool = True,
                    runtime_bytes: int = 0) -> dict[str, Any]:
    """Bytes per device at the launch's peak: fp32 weights, gradients and the optimizer state (16 per
    parameter with AdamW, 12 for Muon's matrices; divided by ``shard`` under FSDP), plus the larger of

    * the activations of one micro-batch: per layer about 12 d + 4 h saved values per token in the
      activation dtype, plus the loss's one chunk of fp32 logits with one more chunk beside it (logsumexp's
      temporary, then the gradient's copy), its bf16 copy of the head, and the gradients it builds in the
      same pass: the head's in fp32 and the final hidden states' in the activation dtype; and
    * the optimizer step's temporaries (`pretrain.config.OptimizerSpec.step_bytes`): the unfused (CPU) AdamW
      builds sqrt(v) for every parameter it trains, 4 bytes each, the fused one (CUDA) none; Muon one
      matrix's update and Newton-Schulz iterates at a time;

    plus ``runtime_bytes``, what the process holds besides (the caller measures it on a CPU, where the
    device's memory is the process's). Every other phase of a launch holds less: the preflight's arbiter
    copies the model alone (12 bytes per parameter with its gradients), its burst runs on the run's own
    model and optimizer, a resume holds the loaded checkpoint (12) beside the model (4)."""
    m = cfg.model
    act_bytes = 2 if autocast else 4
    tokens = cfg.data.micro_batch * cfg.seq_len
    per_token = m.n_layer * (12 * m.n_embd + 4 * m.ffn_hidden) * act_bytes + m.n_embd * act_bytes
    # One chunk of fp32 logits and its gradient: a full chunk, or every row when the micro-batch is smaller.
    chunk = min(tokens * m.vocab_size, max(1, LOSS_CHUNK_ELEMENTS // m.vocab_size) * m.vocab_size)
    loss = 2 * chunk * 4 + (m.vocab_size * m.n_embd * 2 if autocast else 0) + m.vocab_size * m.n_embd * 4 \
        + tokens * m.n_embd * act_bytes
    n = count_parameters(m)
    optimizer_state = optimizer_state_bytes(cfg) // shard
    states = n * 8 // shard + optimizer_state
    activations = tokens * per_token + loss
    optimizer_step = OPTIMIZERS[cfg.optim.name].step_bytes(m, fused_optimizer) // shard
    return {"kind": "estimate", "optimizer": cfg.optim.name, "weights_grads_optimizer_bytes": states,
            "optimizer_state_bytes": optimizer_state, "activations_bytes": activations,
            "optimizer_step_bytes": optimizer_step, "runtime_bytes": runtime_bytes,
            "total_bytes": states + max(activations, optimizer_step) + runtime_bytes}


@dataclass
class RunPlan:
    preset: str
    optimizer: str  # optim.name
    parameters: int
    non_embedding_parameters: int
    flops_per_token: float
    vocab_size: int  # padded embedding rows
    real_vocab_size: int
    token_budget: float
    steps: int
    tokens_per_step: int
    tokens: int
    micro_batch: int
    accumulation: int
    world_size: int
    lr: dict[str, float]  # at the first step, the end of warmup, the middle, and the last step
    tokens_per_s: float
    tokens_per_s_assumed: bool  # from ASSUMED_MFU on an H100, not a measurement
    hours: float
    checkpoint_bytes: int
    checkpoints_kept: int
    disk_bytes: int
    memory: dict[str, Any]

    def to_dict(self) -> dict[str, Any]:
        return asdict(self)


def plan_run(cfg: RunConfig, *, tokens_per_s: float = 0.0, world_size: int = 1, autocast: bool = True) -> RunPlan:
    """The plan of ``cfg`` on ``world_size`` devices; ``tokens_per_s`` 0 assumes :data:`ASSUMED_MFU`."""
    m, tc = cfg.model, cfg.train
    if tc.max_steps < 1:
        raise ValueError("the plan needs train.max_steps or train.token_budget (a time budget alone is sized by "
                         "the preflight's measured steps)")
    _, accum = batch_layout(cfg, world_size)
    counts = parameter_counts(m)
    n, non_embedding = counts.total, counts.non_embedding
    flops = 6 * counts.matmul + 12 * m.n_layer * m.n_embd * cfg.seq_len
    assumed = tokens_per_s <= 0
    if assumed:
        tokens_per_s = ASSUMED_MFU * ASSUMED_PEAK * world_size / flops
    steps, warmup = tc.max_steps, max(effective_warmup(cfg.optim, tc.max_steps), 1)
    lr = {"step 1": lr_at(0, cfg.optim, steps), f"step {min(warmup, steps)} (end of warmup)":
          lr_at(min(warmup, steps) - 1, cfg.optim, steps),
          f"step {(warmup + steps) // 2}": lr_at((warmup + steps) // 2 - 1, cfg.optim, steps),
          f"step {steps} (last)": lr_at(steps - 1, cfg.optim, steps)}
    tokens = steps * tc.global_batch_tokens
    ckpt = checkpoint_bytes(cfg)
    kept = tc.keep_last + 1  # the last few and the best
    return RunPlan(preset=cfg.model_preset, optimizer=cfg.optim.name, parameters=n, non_embedding_parameters=non_embedding,
                   flops_per_token=flops, vocab_size=m.vocab_size, real_vocab_size=m.real_vocab_size,
                   token_budget=tc.token_budget, steps=steps, tokens_per_step=tc.global_batch_tokens, tokens=tokens,
                   micro_batch=cfg.data.micro_batch, accumulation=accum, world_size=world_size, lr=lr,
                   tokens_per_s=tokens_per_s, tokens_per_s_assumed=assumed, hours=tokens / tokens_per_s / 3600,
                   checkpoint_bytes=ckpt, checkpoints_kept=kept, disk_bytes=kept * ckpt,
                   memory=memory_estimate(cfg, autocast=autocast))


def format_plan(plan: RunPlan) -> str:
    GB = 1e9
    mem = plan.memory
    speed = (f"{plan.tokens_per_s:,.0f} tokens/s (assumed: {ASSUMED_MFU:.0%} MFU on an H100; measure with "
             "benchmarks/gpu_check.sh and pass --tokens-per-s)" if plan.tokens_per_s_assumed
             else f"{plan.tokens_per_s:,.0f} tokens/s (given)")
    lines = [
        f"plan for {plan.preset}: {plan.parameters / 1e9:.3f}B parameters ({plan.non_embedding_parameters / 1e9:.3f}B "
        f"non-embedding), vocabulary {plan.real_vocab_size:,} padded to {plan.vocab_size:,}",
        f"  tokens      {plan.tokens:,} ({plan.tokens / 1e9:.3f}e9)"
        + (f" for a budget of {plan.token_budget:.3g}" if plan.token_budget else ""),
        f"  steps       {plan.steps:,} of {plan.tokens_per_step:,} tokens "
        f"({plan.micro_batch} sequences x {plan.accumulation} accumulation x {plan.world_size} device(s))",
        "  lr          " + ", ".join(f"{k}: {v:.3g}" for k, v in plan.lr.items()),
        f"  time        {plan.hours:.1f} h at {speed}",
        f"  optimizer   {plan.optimizer}: {mem['optimizer_state_bytes'] / GB:.2f} GB of fp32 state",
        f"  checkpoint  {plan.checkpoint_bytes / GB:.1f} GB each (fp32 weights + {plan.optimizer} state); "
        f"{plan.checkpoints_kept} kept: {plan.disk_bytes / GB:.1f} GB of disk",
        f"  memory      {mem['total_bytes'] / GB:.1f} GB per device for a micro-batch of {plan.micro_batch} "
        f"(weights, grads, {plan.optimizer} state {mem['weights_grads_optimizer_bytes'] / GB:.1f} GB + activations "
        f"{mem['activations_bytes'] / GB:.1f} GB; an estimate for a GPU in bf16)",
    ]
    return "\n".join(lines)
