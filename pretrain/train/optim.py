"""One optimizer step, shared by the trainer, the preflight and the benchmark: the optimizer of the run (one of
`pretrain.config.OPTIMIZERS`, its parts stepped as one), the learning rate and Muon momentum of each step (the
schedules themselves are `pretrain.config.SCHEDULES`), how a global batch splits into micro-batches, and the
step function itself."""

from __future__ import annotations

import dataclasses
from typing import Any

import torch

from common.errors import InputError
from pretrain.config import OPTIMIZERS, SCHEDULES, OptimConfig, RunConfig, effective_warmup
from pretrain.train import distributed
from pretrain.train.distributed import Runtime
from pretrain.train.faults import StepFaults


def lr_at(step: int, optim: OptimConfig, max_steps: int) -> float:
    """Learning rate of update ``step`` (0-based): linear warmup, then the schedule ``optim.schedule`` (one of
    `pretrain.config.SCHEDULES`) down to lr * min_lr_ratio, reached at the last update (``step == max_steps - 1``;
    the warmup is `pretrain.config.effective_warmup`, short enough for that).

    A run re-planned at step ``optim.replan_step`` (``--replan-schedule``: resumed with another ``max_steps``)
    goes on from ``optim.replan_lr``, the rate the old plan gave that step: inside the warmup, with
    ``optim.replan_warmup`` set, linearly up to the peak at that update and then down as usual; otherwise as
    the same schedule would from a warmup ending at that step at that rate, down to the same floor at its new
    last update."""
    if optim.replan_step and step >= optim.replan_step:
        start, rate, peak_at = optim.replan_step, optim.replan_lr, optim.replan_warmup
        optim = dataclasses.replace(optim, replan_step=0, replan_lr=0.0, replan_warmup=0)
        if peak_at > start:
            if step < peak_at:
                return rate + (optim.lr - rate) * (step - start) / (peak_at - start)
            return SCHEDULES[optim.schedule].lr(step, dataclasses.replace(optim, warmup_steps=peak_at), max_steps)
        floor = optim.lr * optim.min_lr_ratio
        if rate <= floor:
            return floor
        optim = dataclasses.replace(optim, lr=rate, min_lr_ratio=floor / rate, warmup_steps=start)
        return SCHEDULES[optim.schedule].lr(step, optim, max_steps)
    warmup = effective_warmup(optim, max_steps)
    if step < warmup:
        return optim.lr * (step + 1) / warmup
    if warmup != optim.warmup_steps:
        optim = dataclasses.replace(optim, warmup_steps=warmup)
    return SCHEDULES[optim.schedule].lr(step, optim, max_steps)


def peak_step(optim: OptimConfig, max_steps: int) -> int:
    """The update at which the plan's warmup is over: the warmup's end, a re-planned warmup's end, or, for a
    plan re-planned in its decay, the step it was re-planned at."""
    if optim.replan_step:
        return max(optim.replan_warmup, optim.replan_step)
    return effective_warmup(optim, max_steps)


def replan_schedule(optim: OptimConfig, step: int, was: int, now: int) -> None:
    """Re-plan ``optim`` (the plan of a run of ``was`` updates) at update ``step`` for ``now`` updates, in
    place, so that the rate goes on from the one the old plan gave update ``step`` without a jump: in the
    decay, down to the floor at the new last update; inside the warmup, up to the peak where a run of ``now``
    updates has it (`pretrain.config.effective_warmup`), or, when that is behind, down from there."""
    rate = lr_at(step, optim, was)
    if step >= peak_step(optim, was):
        optim.replan_step, optim.replan_lr, optim.replan_warmup = step, rate, 0
        return
    fresh = dataclasses.replace(optim, replan_step=0, replan_lr=0.0, replan_warmup=0)
    peak_at = effective_warmup(fresh, now)
    if not optim.replan_step and peak_at == effective_warmup(fresh, was):
        return  # the same warmup, and a longer or shorter decay after it: no rate changes yet
    optim.replan_step, optim.replan_lr, optim.replan_warmup = step, rate, peak_at if peak_at > step else 0


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


def muon_momentum_at(step: int, optim: OptimConfig) -> float:
    """Muon's momentum at update ``step`` (0-based): from ``muon_momentum_start`` linearly up to
    ``muon_momentum`` over ``muon_momentum_warmup_steps`` updates, then constant (modded-nanogpt's warmup)."""
    warmup = optim.muon_momentum_warmup_steps
    if step >= warmup:
        return optim.muon_momentum
    return optim.muon_momentum_start + (optim.muon_momentum - optim.muon_momentum_start) * step / warmup


class CombinedOptimizer:
    """Torch optimizers over disjoint parameter sets (``parts``, by name), used as one: ``step``,
    ``zero_grad``, the ``param_groups`` of all (each part's groups in order), and one state dict
    ``{name: part's state dict}`` that ``load_state_dict`` restores exactly. ``peaks`` is each group's peak
    learning rate, as built (not state: a checkpoint's saved rates never replace the run's)."""

    def __init__(self, parts: dict[str, torch.optim.Optimizer]):
        self.parts = parts
        self.peaks = [g["lr"] for part in parts.values() for g in part.param_groups]

    @property
    def param_groups(self) -> list[dict[str, Any]]:
        # A property: a part's load_state_dict replaces its group dicts.
        return [g for part in self.parts.values() for g in part.param_groups]

    @property
    def state(self) -> dict[torch.Tensor, dict[str, Any]]:
        """Every part's per-parameter state (a merged view; `clear_state` empties the parts)."""
        return {p: st for part in self.parts.values() for p, st in part.state.items()}

    def step(self) -> None:
        for part in self.parts.values():
            part.step()

    def zero_grad(self, set_to_none: bool = True) -> None:
        for part in self.parts.values():
            part.zero_grad(set_to_none=set_to_none)

    def state_dict(self) -> dict[str, Any]:
        return {name: part.state_dict() for name, part in self.parts.items()}

    def load_state_dict(self, state: dict[str, Any]) -> None:
        if set(state) != set(self.parts):
            raise InputError(f"optimizer state holds parts {', '.join(sorted(state))}, this optimizer has "
                             f"{', '.join(self.parts)}")
        for name, part in self.parts.items():
            part.load_state_dict(state[name])


Optimizer = torch.optim.Optimizer | CombinedOptimizer


def make_optimizer(model: torch.nn.Module, optim: OptimConfig, device: torch.device) -> Optimizer:
    """The optimizer ``optim.name`` of `pretrain.config.OPTIMIZERS` for ``model``'s trainable parameters: its one
    part itself (``adamw``: a plain AdamW, as before the registry), or its parts as one
    :class:`CombinedOptimizer` (``muon``: Muon and AdamW)."""
    parts = OPTIMIZERS[optim.name].build(model, optim, device)
    return next(iter(parts.values())) if len(parts) == 1 else CombinedOptimizer(parts)


def clear_state(optimizer: Optimizer) -> None:
    """Drop every part's per-parameter state (moments, momentum buffers)."""
    for part in optimizer.parts.values() if isinstance(optimizer, CombinedOptimizer) else [optimizer]:
        part.state.clear()


def set_rates(optimizer: Optimizer, step: int, optim: OptimConfig, max_steps: int) -> float:
    """Set every param group's rate for update ``step`` (0-based) and return the schedule's rate
    (`lr_at`, of the peak ``optim.lr``): a group with another peak gets that peak times the same
    multiplier, so all follow one warmup and decay. Muon's momentum follows `muon_momentum_at`."""
    lr = lr_at(step, optim, max_steps)
    if not isinstance(optimizer, CombinedOptimizer):
        for group in optimizer.param_groups:
            group["lr"] = lr
        return lr
    for group, peak in zip(optimizer.param_groups, optimizer.peaks, strict=True):
        group["lr"] = lr * (peak / optim.lr)  # exactly lr for the groups at optim.lr
    for part in optimizer.parts.values():
        if isinstance(part, torch.optim.Muon):
            for group in part.param_groups:
                group["momentum"] = muon_momentum_at(step, optim)
    return lr


def train_step(model: torch.nn.Module, optimizer: Optimizer, micro_batches: list[torch.Tensor],
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
