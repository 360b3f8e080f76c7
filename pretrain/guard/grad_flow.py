"""The gradient-flow arbiter: does every trainable parameter receive a finite, nonzero gradient?

Silent gradient failures (a fused kernel without a backward, a tensor detached by a refactor, a layer left
frozen, an op that overflows) do not crash a run; the loss simply falls more slowly than it should. One
forward and backward pass on a real batch finds them, and names the parameter.

Zero-initialised projections (a common trick: the last projection of each residual branch starts at zero)
legitimately block the gradient of everything upstream of them at step 0. So a parameter whose gradient is
exactly zero on the first pass gets a second chance: the arbiter takes one AdamW step (whose first update
is about ``lr * sign(grad)`` for every parameter with a nonzero gradient, whatever the gradient's scale) on
a *copy* of the model, runs forward and backward again, and judges the zero-gradient parameters on that
second pass. A parameter that was only blocked by a zero-initialised neighbour now gets a gradient and is
listed in ``ArbiterReport.blocked_at_init``; one that still gets zero is a problem. Missing (None),
non-finite and frozen gradients are never given a second chance: no optimizer step can cure them.

The caller's model, its gradients and its optimizer are never touched (the arbiter works on a deep copy).
"""

from __future__ import annotations

import contextlib
import copy
import math
from collections.abc import Callable
from dataclasses import asdict, dataclass, field

import torch
import torch.nn as nn

Batch = tuple[torch.Tensor, torch.Tensor]
LossFn = Callable[[nn.Module, Batch], torch.Tensor]

# The one AdamW step of the second chance: big enough that every parameter moves, small enough that a
# healthy model stays healthy.
SECOND_CHANCE_LR = 1e-3


class GradientFlowError(RuntimeError):
    """Raised by :meth:`ArbiterReport.raise_if_failed`; the message lists every problem."""


@dataclass
class ArbiterReport:
    """The verdict on one batch. ``problems`` name the parameter and what is wrong with its gradient."""

    ok: bool
    problems: list[str]
    checked: int  # parameters checked (shared tensors once)
    loss: float
    blocked_at_init: list[str] = field(default_factory=list)  # zero at step 0, nonzero after one step
    second_pass: bool = False  # whether the one-step second chance was needed
    grad_norms: dict[str, float] = field(default_factory=dict)  # per parameter, from the pass that judged it

    def raise_if_failed(self) -> None:
        if not self.ok:
            raise GradientFlowError(
                f"gradient flow check failed on {len(self.problems)} of {self.checked} parameters:\n  "
                + "\n  ".join(self.problems))

    def to_dict(self) -> dict:
        return asdict(self)


def default_loss(model: nn.Module, batch: Batch) -> torch.Tensor:
    """``model(inputs, targets)`` returning ``(logits, loss)``, as :class:`pretrain.model.gpt.GPT` does."""
    out = model(*batch)
    return out[1] if isinstance(out, tuple) else out


def _parameters(model: nn.Module) -> list[tuple[str, nn.Parameter]]:
    """Named parameters, each shared tensor once under its first name (tied embeddings)."""
    return list(model.named_parameters(remove_duplicate=True))


def _backward(model: nn.Module, batch: Batch, loss_fn: LossFn, autocast: torch.dtype | None) -> float:
    model.zero_grad(set_to_none=True)
    device_type = batch[0].device.type
    ctx = torch.autocast(device_type, dtype=autocast) if autocast is not None else contextlib.nullcontext()
    with ctx:
        loss = loss_fn(model, batch)
    if not isinstance(loss, torch.Tensor) or loss.dim() != 0:
        raise TypeError(f"loss_fn must return a scalar tensor, got {type(loss).__name__} "
                        f"{tuple(loss.shape) if isinstance(loss, torch.Tensor) else ''}")
    if loss.requires_grad:
        loss.backward()
    return float(loss.detach())


def _judge(p: nn.Parameter) -> tuple[str | None, float]:
    """``(kind, norm)``: kind is None for a healthy gradient, else 'none', 'nonfinite' or 'zero'."""
    g = p.grad
    if g is None:
        return "none", 0.0
    g = g.detach().float()
    n_nan, n_inf = int(torch.isnan(g).sum()), int(torch.isinf(g).sum())
    if n_nan or n_inf:
        return "nonfinite", float("nan")
    norm = float(torch.linalg.vector_norm(g))
    return ("zero" if norm == 0.0 else None), norm


def _describe(name: str, p: nn.Parameter, kind: str, after_step: bool) -> str:
    shape = "x".join(map(str, p.shape))
    if kind == "none":
        return (f"{name} [{shape}]: no gradient (grad is None): the parameter is detached from the loss "
                "or unused in the forward pass")
    if kind == "nonfinite":
        g = p.grad.detach()
        return (f"{name} [{shape}]: non-finite gradient ({int(torch.isnan(g).sum())} NaN, "
                f"{int(torch.isinf(g).sum())} Inf of {g.numel()} elements)")
    when = "on the first pass and still after one optimizer step" if after_step else "on the first pass"
    return f"{name} [{shape}]: gradient is exactly zero {when}"


def check_gradient_flow(model: nn.Module, batch: Batch, loss_fn: LossFn | None = None, *,
                        optimizer_step: bool = True, autocast: torch.dtype | None = None) -> ArbiterReport:
    """One forward and backward pass of ``model`` on ``batch``; every trainable parameter must receive a
    finite, nonzero gradient, and every parameter must be trainable.

    ``loss_fn(model, batch)`` returns the scalar loss (default: ``model(inputs, targets)[1]``).
    ``optimizer_step`` enables the one-AdamW-step second chance for parameters whose gradient is exactly zero
    at initialisation (see the module docstring). ``autocast`` runs the passes under
    ``torch.autocast(dtype=autocast)`` so the check covers the kernels training really uses (bf16 on GPU).
    """
    loss_fn = loss_fn or default_loss
    work = copy.deepcopy(model)
    work.train()
    named = _parameters(work)
    problems = [f"{name} [{'x'.join(map(str, p.shape))}]: frozen (requires_grad=False), so it never trains"
                for name, p in named if not p.requires_grad]
    trainable = [(name, p) for name, p in named if p.requires_grad]

    loss = _backward(work, batch, loss_fn, autocast)
    if not math.isfinite(loss):
        problems.append(f"loss: non-finite ({loss}) on the first pass")
    verdicts = {name: _judge(p) for name, p in trainable}
    grad_norms = {name: norm for name, (_, norm) in verdicts.items()}
    zero = [name for name, (kind, _) in verdicts.items() if kind == "zero"]
    for name, p in trainable:
        kind = verdicts[name][0]
        if kind in ("none", "nonfinite") or (kind == "zero" and not optimizer_step):
            problems.append(_describe(name, p, kind, after_step=False))

    blocked_at_init: list[str] = []
    second_pass = bool(zero) and optimizer_step
    if second_pass:
        # Step only on finite gradients: a NaN here is already reported and would poison the second pass.
        for _, p in trainable:
            if p.grad is not None and not torch.isfinite(p.grad).all():
                p.grad = None
        torch.optim.AdamW([p for _, p in trainable], lr=SECOND_CHANCE_LR, weight_decay=0.0).step()
        _backward(work, batch, loss_fn, autocast)
        params = dict(trainable)
        for name in zero:
            kind, norm = _judge(params[name])
            grad_norms[name] = norm
            if kind is None:
                blocked_at_init.append(name)
            else:
                problems.append(_describe(name, params[name], kind, after_step=True))

    return ArbiterReport(ok=not problems, problems=problems, checked=len(named), loss=loss,
                         blocked_at_init=blocked_at_init, second_pass=second_pass, grad_norms=grad_norms)
