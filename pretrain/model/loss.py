"""The loss of the GPT's head: the cross-entropy of ``h @ weight.T`` computed in row chunks, never holding the
full fp32 logits, with the gradients of ``h`` and ``weight`` computed in the same pass (so backward only scales
them). `pretrain.model.gpt` calls :func:`linear_cross_entropy`; ``GPT.compile_blocks`` compiles the per-chunk
softmax and gradient (:func:`compiled_loss_chunk`).
"""

from __future__ import annotations

import functools

import torch

# Rows of the loss's logits chunk: about 2**28 fp32 logits (1 GiB) per chunk, whatever the vocabulary.
LOSS_CHUNK_ELEMENTS = 2**28


def _loss_chunk(logits: torch.Tensor, targets: torch.Tensor, real_vocab: int, n: int, want_grad: bool,
                dtype: torch.dtype, softcap: float = 0.0, z_loss: float = 0.0
                ) -> tuple[torch.Tensor, torch.Tensor | None]:
    """One chunk of the loss after its head matmul: the summed cross-entropy of ``logits`` over the first
    ``real_vocab`` columns and, with ``want_grad``, d(mean loss)/d(logits) = (softmax - one_hot) / n in
    ``dtype``. Eager, each step below is one pass over the chunk's fp32 logits (about ten 1 GiB reads and
    writes per chunk of bangla-0.4b: ~8% of an H100 step by bandwidth); compiled (`GPT.compile_blocks`)
    inductor fuses them into a few passes over the bf16 logits.

    ``softcap`` c > 0 scores ``c * tanh(logits / c)`` (the gradient goes through the tanh); ``z_loss`` z > 0
    adds ``z * lse**2`` per row, whose gradient is ``2 z lse * softmax``. With both 0 (the default) the
    computation is exactly the one without them."""
    logits = logits.float()
    slope = None
    if softcap:
        capped = torch.tanh(logits / softcap)
        slope = 1.0 - capped * capped  # d capped / d logits, finite on the padded columns too
        logits = capped.mul_(softcap)
    logits[:, real_vocab:] = float("-inf")
    lse = torch.logsumexp(logits, dim=1)
    total = (lse - logits.gather(1, targets[:, None]).squeeze(1)).sum()
    if z_loss:
        total = total + z_loss * (lse * lse).sum()
    if not want_grad:
        return total, None
    grad = logits.sub_(lse[:, None]).exp_()  # built in place over the logits
    if z_loss:
        grad.mul_(1.0 + 2.0 * z_loss * lse[:, None])
    grad[torch.arange(len(targets), device=targets.device), targets] -= 1.0
    if slope is not None:
        grad.mul_(slope)
    return total, grad.div_(n).to(dtype)


class _LinearCrossEntropy(torch.autograd.Function):
    """Mean cross-entropy of ``h @ weight.T`` over the first ``real_vocab`` columns, in row chunks; the
    gradients of ``h`` and ``weight`` are computed in the same pass (one chunk of fp32 logits alive at a
    time), so backward only scales them. ``body`` is :func:`_loss_chunk` or its compiled twin."""

    @staticmethod
    def forward(ctx, h, weight, targets, real_vocab: int, chunk_rows: int, dtype: torch.dtype, body,
                softcap: float, z_loss: float):
        n = h.size(0)
        want_grads = h.requires_grad or weight.requires_grad
        with torch.autocast(h.device.type, enabled=False):
            w = weight.to(dtype)
            total = torch.zeros((), device=h.device, dtype=torch.float32)
            grad_h = torch.empty_like(h) if want_grads else None
            grad_w = torch.zeros_like(weight, dtype=torch.float32) if want_grads else None
            for start in range(0, n, chunk_rows):
                hc, t = h[start:start + chunk_rows].to(dtype), targets[start:start + chunk_rows]
                loss, grad = body(hc @ w.t(), t, real_vocab, n, want_grads, dtype, softcap, z_loss)
                total += loss
                if grad is None:
                    continue
                grad_h[start:start + chunk_rows] = grad @ w
                grad_w.add_(grad.t() @ hc)  # accumulated in fp32 (a bf16 product is upcast)
        if want_grads:
            ctx.save_for_backward(grad_h, grad_w)
        ctx.weight_dtype = weight.dtype
        return total / n

    @staticmethod
    def backward(ctx, grad_out):
        grad_h, grad_w = ctx.saved_tensors
        return grad_h * grad_out, (grad_w * grad_out).to(ctx.weight_dtype), None, None, None, None, None, None, None


def linear_cross_entropy(h: torch.Tensor, weight: torch.Tensor, targets: torch.Tensor, real_vocab: int,
                         chunk_rows: int = 0, body=None, softcap: float = 0.0, z_loss: float = 0.0) -> torch.Tensor:
    """``F.cross_entropy((h @ weight.T)[:, :real_vocab].float(), targets)`` without the full logits: at most
    ``chunk_rows`` rows of fp32 logits at a time (0 = :data:`LOSS_CHUNK_ELEMENTS` worth). The matmuls run in
    the autocast dtype when autocast is on, else in ``weight``'s dtype; ``body`` is the per-chunk function
    (None = :func:`_loss_chunk` eager; `GPT.compile_blocks` passes its compiled twin). ``softcap`` and
    ``z_loss`` (0 = off) are the model's switches, as :func:`_loss_chunk` applies them."""
    device = h.device.type
    dtype = torch.get_autocast_dtype(device) if torch.is_autocast_enabled(device) else weight.dtype
    chunk_rows = chunk_rows or max(1, LOSS_CHUNK_ELEMENTS // weight.size(0))
    return _LinearCrossEntropy.apply(h, weight, targets, real_vocab, chunk_rows, dtype, body or _loss_chunk,
                                     softcap, z_loss)


@functools.cache
def compiled_loss_chunk(backend: str, mode: str | None):
    return torch.compile(_loss_chunk, backend=backend, mode=mode, fullgraph=True)
