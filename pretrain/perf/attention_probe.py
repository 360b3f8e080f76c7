"""Which attention kernel really ran: SDPA's dispatch (flash, cuDNN, memory-efficient, math), read off the
profiler's record of the aten ops a callable executed, with whether it was asked for causal masking by flag
or given an explicit mask (an explicit mask rules out the flash kernel).

Eager and compiled code alike call these ops through the dispatcher (inductor keeps SDPA as an extern
kernel), so the profiler sees them; a compiled graph that decomposed attention into plain matmuls shows
no SDPA kernel at all, which :func:`attention_kernels` reports as an empty list.
"""

from __future__ import annotations

import os
from collections import Counter
from collections.abc import Callable
from typing import Any

# Kineto, the profiler's backend, prints "USDT: ... profiler_start" and "profiler_stop" on stderr at every
# profile (its USDT level, 5, is above ERROR, 4), two lines of noise in every `pretrain bench`. It reads the
# level when the profiler first starts, so setting it here, before any profile, is enough; 6 is past its last
# level. A kineto error would then go unprinted too: the probe would find no kernel and say "none seen".
# A level the user set is kept.
os.environ.setdefault("KINETO_LOG_LEVEL", "6")

import torch  # noqa: E402  (after the level, which the profiler reads)
from torch.profiler import ProfilerActivity, profile  # noqa: E402

# aten op -> kernel family; backward ops are left out (the forward op decides the family).
KERNELS = {
    "_scaled_dot_product_flash_attention": "flash",
    "_scaled_dot_product_flash_attention_for_cpu": "flash-cpu",
    "_scaled_dot_product_cudnn_attention": "cudnn",
    "_scaled_dot_product_efficient_attention": "efficient",
    "_scaled_dot_product_attention_math": "math",
    "_scaled_dot_product_fused_attention_overrideable": "overrideable",
}


def _argument(op: str, shapes: list, concrete: list, names: tuple[str, ...]) -> tuple[Any, Any]:
    """(input shape, concrete value) of the first of ``names`` that the op's schema has, else (None, None)."""
    arguments = [a.name for a in getattr(torch.ops.aten, op).default._schema.arguments]
    for name in names:
        if name in arguments:
            i = arguments.index(name)
            return (shapes[i] if i < len(shapes) else None), (concrete[i] if i < len(concrete) else None)
    return None, None


def attention_kernels(fn: Callable[[], Any]) -> list[dict[str, Any]]:
    """Run ``fn`` under the profiler; one entry per distinct (kernel, causal flag, explicit mask), with the
    number of calls, e.g. ``[{"kernel": "flash", "op": "...", "is_causal": True, "explicit_mask": False,
    "calls": 24}]``."""
    with profile(activities=[ProfilerActivity.CPU], record_shapes=True) as prof:
        fn()
    seen: Counter = Counter()
    for event in prof.events():
        op = event.name.removeprefix("aten::")
        if op not in KERNELS:
            continue
        shapes, concrete = list(event.input_shapes or []), list(getattr(event, "concrete_inputs", None) or [])
        _, causal = _argument(op, shapes, concrete, ("is_causal",))
        mask_shape, _ = _argument(op, shapes, concrete, ("attn_mask", "attn_bias"))
        seen[(KERNELS[op], op, causal if isinstance(causal, bool) else None, bool(mask_shape))] += 1
    return [{"kernel": k, "op": op, "is_causal": c, "explicit_mask": m, "calls": n}
            for (k, op, c, m), n in sorted(seen.items(), key=lambda kv: -kv[1])]


def describe(calls: list[dict[str, Any]]) -> str:
    """``flash (causal flag)``, ``efficient (explicit mask)``, ...; ``none seen`` for an empty list."""
    if not calls:
        return "none seen (decomposed?)"
    return ", ".join(f"{c['kernel']} ({'explicit mask' if c['explicit_mask'] else 'causal flag' if c['is_causal'] else 'no mask'})"
                     for c in calls)
