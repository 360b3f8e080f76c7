"""Fault injection for testing the supervisor and recovery on real runs (``--inject-fault KIND@STEP``).

Kept out of the training step: the trainer hands a :class:`FaultPlan` the few seams it needs (the loss and
gradients of one step, the start of a step, the moment a checkpoint file is written) only when faults were
asked for; a run without ``--inject-fault`` never calls into this module.

Kinds: ``nan_loss`` (the step's loss times NaN), ``loss_spike`` (the loss times 50 for :data:`SPIKE_STEPS`
steps: a diverging loss, not one outlier, which the supervisor lets pass), ``grad_explode`` (gradients times
1e6 for :data:`SPIKE_STEPS` steps), ``slow`` (:data:`SLOW_STEPS` steps each :data:`SLOW_FACTOR` times the median step time),
``hang`` (the trainer stops answering before the step), ``kill_during_checkpoint`` (SIGKILL halfway through
writing the first checkpoint at or after the step), ``await_signal`` (the trainer waits before the step until
a SIGINT/SIGTERM has been received, so a test signals a run at a known step boundary, whatever the
machine's load). Each fault fires once per process.
"""

from __future__ import annotations

import os
import signal
import statistics
import time
from collections.abc import Iterable
from dataclasses import dataclass, field
from pathlib import Path

import torch

from common.errors import InputError

KINDS = ("nan_loss", "loss_spike", "grad_explode", "slow", "hang", "kill_during_checkpoint", "await_signal")
SLOW_STEPS = 8  # a `slow` fault lasts this many steps
SLOW_FACTOR = 10.0  # ...each taking this many times the median step time
# A `loss_spike` or `grad_explode` fault lasts this many steps: the streak `supervisor.spike_patience` needs.
SPIKE_STEPS = 5


def parse_faults(specs: Iterable[str]) -> list[tuple[str, int]]:
    """``KIND@STEP`` strings as (kind, step) pairs."""
    faults = []
    for spec in specs:
        kind, sep, step = spec.partition("@")
        if not sep or kind not in KINDS or not step.isdigit() or int(step) < 1:
            raise InputError(f"--inject-fault {spec!r}: expected KIND@STEP with KIND in {', '.join(KINDS)} "
                             "and STEP >= 1")
        faults.append((kind, int(step)))
    return faults


@dataclass
class StepFaults:
    """The faults that fire inside one optimizer step (what `pretrain.train.trainer.train_step` applies)."""

    kinds: frozenset[str]

    def loss(self, loss: torch.Tensor) -> torch.Tensor:
        if "nan_loss" in self.kinds:
            loss = loss * float("nan")
        if "loss_spike" in self.kinds:
            loss = loss * 50.0
        return loss

    def grads(self, params: list[torch.nn.Parameter]) -> None:
        if "grad_explode" in self.kinds:
            for p in params:
                p.grad.mul_(1e6)


@dataclass
class FaultPlan:
    """The faults one trainer process was asked to inject, consumed as they fire."""

    pending: list[tuple[str, int]]
    slow_until: int = 0
    lasting: dict[str, int] = field(default_factory=dict)  # kind -> steps it still applies to after this one
    step_times: list[float] = field(default_factory=list)

    @classmethod
    def from_specs(cls, specs: Iterable[str]) -> FaultPlan | None:
        faults = parse_faults(specs)
        return cls(faults) if faults else None

    def fires(self, kind: str, step: int) -> bool:
        """Whether fault ``kind`` fires at ``step`` (and consume it)."""
        for i, (k, s) in enumerate(self.pending):
            if k == kind and (s == step or (kind == "kill_during_checkpoint" and s <= step)):
                del self.pending[i]
                return True
        return False

    def before_step(self, step: int, log, stop=None) -> None:
        """``hang``: stop answering (the supervisor must notice the silent heartbeat and end the process).
        ``await_signal``: wait until ``stop`` (the loop's `common.signals.StopRequest`, None outside a
        deferred-signals block: no wait) is set, at most an hour."""
        if self.fires("hang", step):
            log(f"fault injected: hang at step {step}")
            while True:
                time.sleep(3600)
        if self.fires("await_signal", step):
            deadline = time.monotonic() + 3600
            while stop is not None and not stop and time.monotonic() < deadline:
                time.sleep(0.01)

    def in_step(self, step: int) -> StepFaults | None:
        """The faults of step ``step``'s loss and gradients; ``slow`` also sleeps here (inside the timed step)."""
        if self.fires("slow", step):
            self.slow_until = step + SLOW_STEPS - 1
        if step <= self.slow_until:
            time.sleep(SLOW_FACTOR * statistics.median(self.step_times or [0.1]))
        kinds = {k for k in ("nan_loss", "loss_spike", "grad_explode") if self.fires(k, step)}
        for kind in kinds & {"loss_spike", "grad_explode"}:
            self.lasting[kind] = SPIKE_STEPS
        # Counted in steps run, not step numbers: a rollback into the streak does not start it again.
        for kind, left in list(self.lasting.items()):
            kinds.add(kind)
            self.lasting[kind] = left - 1
            if left <= 1:
                del self.lasting[kind]
        return StepFaults(frozenset(kinds)) if kinds else None

    def step_done(self, step: int, seconds: float) -> None:
        if step > self.slow_until:
            self.step_times.append(seconds)

    def checkpoint_hook(self, step: int):
        """For ``kill_during_checkpoint``: a hook that truncates the checkpoint's temp file and SIGKILLs the
        process before the file is renamed into place; None when the fault does not fire."""
        if not self.fires("kill_during_checkpoint", step):
            return None

        def crash(tmp: Path) -> None:
            os.truncate(tmp, os.path.getsize(tmp) // 2)
            os.kill(os.getpid(), signal.SIGKILL)

        return crash
