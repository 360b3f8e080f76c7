"""One optimizer step, shared by the trainer, the preflight and the benchmark: AdamW, the learning-rate
schedule, how a global batch splits into micro-batches, and the step function itself."""

from __future__ import annotations

import math

import torch

from common.errors import InputError
from pretrain.config import OptimConfig, RunConfig
from pretrain.train import distributed
from pretrain.train.distributed import Runtime
from pretrain.train.faults import StepFaults


def lr_at(step: int, optim: OptimConfig, max_steps: int) -> float:
    """Learning rate of update ``step`` (0-based): linear warmup, then cosine or WSD down to lr * min_lr_ratio,
    reached at the last update of the run (``step == max_steps - 1``)."""
    peak, floor = optim.lr, optim.lr * optim.min_lr_ratio
    if step < optim.warmup_steps:
        return peak * (step + 1) / optim.warmup_steps
    last = max_steps - 1
    if optim.schedule == "wsd":
        decay_start = max(optim.warmup_steps, int(max_steps * (1 - optim.decay_fraction)))
        if step < decay_start:
            return peak
        progress = (step - decay_start) / max(last - decay_start, 1)
        return peak - (peak - floor) * min(progress, 1.0)
    progress = min((step - optim.warmup_steps) / max(last - optim.warmup_steps, 1), 1.0)
    return floor + 0.5 * (peak - floor) * (1 + math.cos(math.pi * progress))


def batch_layout(cfg: RunConfig, world_size: int) -> tuple[int, int]:
    """(global sequences per step, micro-steps per rank): the global batch does not depend on world size."""
    seq, micro = cfg.seq_len, cfg.data.micro_batch
    if cfg.train.global_batch_tokens % seq:
        raise InputError(f"train.global_batch_tokens {cfg.train.global_batch_tokens} is not a multiple of the "
                         f"sequence length {seq}")
    sequences = cfg.train.global_batch_tokens // seq
    if sequences % (micro * world_size):
        raise InputError(f"{sequences} sequences per step do not split into micro-batches of {micro} on "
                         f"{world_size} process(es); pick data.micro_batch dividing {sequences // world_size}")
    return sequences, sequences // (micro * world_size)


def make_optimizer(model: torch.nn.Module, optim: OptimConfig, device: torch.device) -> torch.optim.AdamW:
    """AdamW with weight decay on matrices only; fused on CUDA."""
    params = [p for p in model.parameters() if p.requires_grad]
    groups = [{"params": [p for p in params if p.dim() >= 2], "weight_decay": optim.weight_decay},
              {"params": [p for p in params if p.dim() < 2], "weight_decay": 0.0}]
    fused = device.type == "cuda"
    return torch.optim.AdamW(groups, lr=optim.lr, betas=(optim.beta1, optim.beta2), eps=optim.eps,
                             fused=fused or None)


def train_step(model: torch.nn.Module, optimizer: torch.optim.Optimizer, micro_batches: list[torch.Tensor],
               runtime: Runtime, grad_clip: float, faults: StepFaults | None = None
               ) -> tuple[torch.Tensor, torch.Tensor]:
    """One optimizer update over ``micro_batches`` (each ``(m, T + 1)``); returns (mean loss, grad norm).
    ``faults`` (tests only, `pretrain.train.faults`) may poison the loss or the gradients."""
    total = torch.zeros((), device=runtime.device)
    for i, batch in enumerate(micro_batches):
        x, y = batch[:, :-1], batch[:, 1:]
        with distributed.no_sync(model, i == len(micro_batches) - 1), runtime.autocast():
            _, loss = model(x, y)
        if faults is not None:
            loss = faults.loss(loss)
        (loss / len(micro_batches)).backward()
        total += loss.detach()
    params = [p for p in model.parameters() if p.grad is not None]
    if faults is not None:
        faults.grads(params)
    grad_norm = torch.nn.utils.clip_grad_norm_(params, grad_clip if grad_clip > 0 else float("inf"))
    optimizer.step()
    optimizer.zero_grad(set_to_none=True)
    return distributed.mean_across(total / len(micro_batches), runtime), grad_norm
