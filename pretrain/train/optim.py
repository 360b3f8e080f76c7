"""One optimizer step, shared by the trainer, the preflight and the benchmark: AdamW, the learning rate of
each step (the schedules themselves are `pretrain.config.SCHEDULES`), how a global batch splits into
micro-batches, and the step function itself."""

from __future__ import annotations

import dataclasses

import torch

from common.errors import InputError
from pretrain.config import SCHEDULES, OptimConfig, RunConfig, effective_warmup
from pretrain.train import distributed
from pretrain.train.distributed import Runtime
from pretrain.train.faults import StepFaults


def lr_at(step: int, optim: OptimConfig, max_steps: int) -> float:
    """Learning rate of update ``step`` (0-based): linear warmup, then the schedule ``optim.schedule`` (one of
    `pretrain.config.SCHEDULES`) down to lr * min_lr_ratio, reached at the last update (``step == max_steps - 1``;
    the warmup is `pretrain.config.effective_warmup`, short enough for that).

    A run re-planned at step ``optim.replan_step`` (``--replan-schedule``: resumed with another ``max_steps``)
    goes on from there as the same schedule would from a warmup ending at that step at ``optim.replan_lr`` (the
    rate it had), down to the same floor at its new last update."""
    if optim.replan_step and step >= optim.replan_step:
        floor = optim.lr * optim.min_lr_ratio
        if optim.replan_lr <= floor:
            return floor
        optim = dataclasses.replace(optim, lr=optim.replan_lr, min_lr_ratio=floor / optim.replan_lr,
                                    warmup_steps=optim.replan_step, replan_step=0)
        return SCHEDULES[optim.schedule].lr(step, optim, max_steps)
    warmup = effective_warmup(optim, max_steps)
    if step < warmup:
        return optim.lr * (step + 1) / warmup
    if warmup != optim.warmup_steps:
        optim = dataclasses.replace(optim, warmup_steps=warmup)
    return SCHEDULES[optim.schedule].lr(step, optim, max_steps)


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
