"""Process layout: one device, or several under ``torchrun`` (DDP, or FSDP2 ``fully_shard``).

Under torchrun every rank builds the same model from the same seed, so no broadcast of the initial
weights is needed; DDP averages gradients, FSDP2 shards parameters, gradients and optimizer state.
Checkpoints hold full (unsharded) state dicts either way; FSDP ones are keyed by parameter name
(``torch.distributed.checkpoint.state_dict``), DDP ones are the plain ``state_dict()``s.
"""

from __future__ import annotations

import argparse
import contextlib
import os
import re
from dataclasses import dataclass
from typing import Any

import torch
import torch.distributed as dist
import torch.nn as nn

from common.errors import InputError


@dataclass
class Runtime:
    """Where this process runs: its device, autocast dtype (None = fp32), rank and world size."""

    device: torch.device
    autocast_dtype: torch.dtype | None
    rank: int = 0
    world_size: int = 1
    local_rank: int = 0
    fsdp: bool = False

    @property
    def is_main(self) -> bool:
        return self.rank == 0

    @property
    def distributed(self) -> bool:
        return self.world_size > 1

    def autocast(self):
        if self.autocast_dtype is None:
            return contextlib.nullcontext()
        return torch.autocast(self.device.type, dtype=self.autocast_dtype)


def check_device(name: str, what: str) -> str:
    """``name`` if it is auto, cpu, cuda or cuda:N, and a CUDA device only where torch sees one."""
    if not re.fullmatch(r"auto|cpu|cuda(:\d+)?", name):
        raise InputError(f"{what} {name!r}: expected auto, cpu, cuda or cuda:N")
    if name.startswith("cuda") and not torch.cuda.is_available():
        raise InputError(f"{what} {name}: torch {torch.__version__} sees no CUDA device")
    return name


def device_arg(text: str) -> str:
    """argparse type for ``--device`` (:func:`check_device`)."""
    try:
        return check_device(text, "device")
    except InputError as e:
        raise argparse.ArgumentTypeError(str(e)) from None


def use_fsdp(fsdp: str, parameters: int, runtime: Runtime) -> bool:
    """FSDP2 when asked (``train.fsdp``), or ("auto") when fp32 weights, gradients and AdamW state (16 bytes per
    parameter) would take more than 60% of one GPU, so DDP's full replica plus activations would not fit."""
    if fsdp != "auto":
        return fsdp == "yes"
    if runtime.device.type != "cuda":
        return False
    return 16 * parameters > 0.6 * torch.cuda.get_device_properties(runtime.device).total_memory


def setup(device: str = "auto", dtype: str = "auto") -> Runtime:
    """Pick the device and precision; join the process group when started by torchrun."""
    world = int(os.environ.get("WORLD_SIZE", "1"))
    rank, local_rank = int(os.environ.get("RANK", "0")), int(os.environ.get("LOCAL_RANK", "0"))
    if device == "auto":
        device = "cuda" if torch.cuda.is_available() else "cpu"
    dev = torch.device(device)
    if dev.type == "cuda":
        dev = torch.device("cuda", local_rank if world > 1 else (dev.index or 0))
        torch.cuda.set_device(dev)
    if dtype == "auto":
        dtype = "bf16" if dev.type == "cuda" else "fp32"
    if dtype not in ("bf16", "fp32"):
        raise ValueError(f"train.dtype must be auto, bf16 or fp32, got {dtype!r}")
    if world > 1 and not dist.is_initialized():
        dist.init_process_group(backend="nccl" if dev.type == "cuda" else "gloo", device_id=dev if dev.type == "cuda" else None)
    return Runtime(device=dev, autocast_dtype=torch.bfloat16 if dtype == "bf16" else None, rank=rank,
                   world_size=world, local_rank=local_rank)


def teardown() -> None:
    if dist.is_initialized():
        dist.destroy_process_group()


def wrap(model: nn.Module, runtime: Runtime, compile_model: bool) -> nn.Module:
    """The module the training loop calls: blocks compiled (`GPT.compile_blocks`), then DDP- or
    FSDP2-wrapped when distributed."""
    if runtime.fsdp:
        from torch.distributed.fsdp import fully_shard

        for block in model.blocks:
            fully_shard(block)
        fully_shard(model)
    if compile_model:
        model.compile_blocks()  # regional: one block graph for all blocks; no-grad passes stay eager
    if runtime.distributed and not runtime.fsdp:
        from torch.nn.parallel import DistributedDataParallel

        model = DistributedDataParallel(model, device_ids=[runtime.device.index] if runtime.device.type == "cuda" else None)
    return model


def no_sync(model: nn.Module, last_micro_step: bool):
    """Skip DDP's gradient all-reduce on every micro-step but the last of an accumulation."""
    if last_micro_step or not hasattr(model, "no_sync"):
        return contextlib.nullcontext()
    return model.no_sync()


def mean_across(value: torch.Tensor, runtime: Runtime) -> torch.Tensor:
    if runtime.distributed:
        value = value.clone()
        dist.all_reduce(value, op=dist.ReduceOp.SUM)
        value /= runtime.world_size
    return value


def broadcast(obj: Any, runtime: Runtime) -> Any:
    """Rank 0's ``obj`` on every rank."""
    if not runtime.distributed:
        return obj
    box = [obj]
    dist.broadcast_object_list(box, src=0)
    return box[0]


def state_dicts(model: nn.Module, optimizer: torch.optim.Optimizer, runtime: Runtime) -> tuple[dict, dict]:
    """Full model and optimizer state dicts of the unwrapped ``model`` (collective under FSDP)."""
    if runtime.fsdp:
        from torch.distributed.checkpoint.state_dict import StateDictOptions, get_state_dict

        return get_state_dict(model, optimizer, options=StateDictOptions(full_state_dict=True, cpu_offload=True))
    return model.state_dict(), optimizer.state_dict()


def load_state_dicts(model: nn.Module, optimizer: torch.optim.Optimizer, model_sd: dict, optim_sd: dict,
                     runtime: Runtime) -> None:
    if runtime.fsdp:
        from torch.distributed.checkpoint.state_dict import StateDictOptions, set_state_dict

        set_state_dict(model, optimizer, model_state_dict=model_sd, optim_state_dict=optim_sd,
                       options=StateDictOptions(full_state_dict=True))
        return
    model.load_state_dict(model_sd)
    optimizer.load_state_dict(optim_sd)
