"""What a device can do: the dense bf16 peak FLOP/s by GPU model, for MFU, and the CPU thread default.

MFU = flops_per_token x tokens/s / (peak FLOP/s x world size), with flops_per_token = 6N + 12 L d T
(`pretrain.model.gpt.GPT.flops_per_token`).
"""

from __future__ import annotations

import os

import torch

# Dense bf16 peak FLOP/s by GPU model (vendor datasheets, without sparsity); matched in order on the name.
PEAK_FLOPS: list[tuple[str, float]] = [
    ("H200", 989e12), ("GH200", 989e12), ("H100 NVL", 835e12), ("H100 PCIe", 756e12), ("H100", 989e12),
    ("H800", 989e12), ("A100", 312e12), ("A800", 312e12), ("L40S", 362e12), ("L4", 121e12),
    ("A10G", 70e12), ("RTX 4090", 165e12),
]


def peak_flops(device: torch.device) -> float | None:
    """The bf16 dense peak of ``device``, or None where unknown (CPU, unlisted GPUs): MFU is then null."""
    if device.type != "cuda":
        return None
    name = torch.cuda.get_device_name(device)
    return next((flops for key, flops in PEAK_FLOPS if key in name), None)


def mfu(flops_per_token: float, tokens_per_s: float, peak: float | None, world_size: int = 1) -> float | None:
    """Model FLOPs utilisation, or None where the peak is unknown."""
    return flops_per_token * tokens_per_s / (peak * world_size) if peak else None


def cpu_threads(processes: int = 1) -> int:
    """torch's intra-op threads for a run that sets none (``train.threads`` 0): the cores this process may
    use (its affinity mask, which a container or ``taskset`` narrows) shared among the ``processes`` of the
    run on this machine, less one for the supervisor, the data reads and everything else; at least 1.
    torch's own default takes every core, and on a 2-core machine with anything else running its threads
    wait on each other: there `tiny` ran at 0.25x to 0.46x the tokens/s of one thread, even at a load average
    of 0.2 (benchmarks/bench_threads.py; benchmarks/results/2026-12-01-cpu-threads)."""
    cores = len(os.sched_getaffinity(0)) if hasattr(os, "sched_getaffinity") else os.cpu_count() or 1
    return max(cores // processes - 1, 1)
