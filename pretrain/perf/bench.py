"""``pretrain bench``: our training step against the same step of ``transformers.LlamaForCausalLM``.

Both models get the same shape, the same weights (converted by :mod:`pretrain.model.hf_llama`, HF keeping our
padded vocabulary rows so the matmuls have the same shapes), the same batch, the same optimizer and the
same step function, the trainer's own :func:`pretrain.train.optim.train_step` with
:func:`pretrain.train.optim.make_optimizer`: bf16 autocast, SDPA and fused AdamW on a GPU; fp32 on a CPU. Each is
timed over ``--steps`` steps after ``--warmup`` steps (compilation, allocator warm-up), with one device
synchronisation before and after the timed loop and none inside it. Reported per model: tokens/s, seconds
per step, MFU (GPU only: needs the peak FLOP/s of a known GPU model, :data:`pretrain.train.hardware.PEAK_FLOPS`),
peak memory (GPU only), the first (compiling) step's time and the attention kernel that ran
(:mod:`pretrain.perf.attention_probe`); then the ratio of tokens/s, and a gradient-flow arbiter pass on two rows.

Compilation modes: ours compiles per block (`GPT.compile_blocks`); HF runs ``eager``, ``regional`` (each
decoder layer compiled, its mask built eagerly: the flash kernel stays usable) or ``whole`` (the whole model
compiled: it builds an explicit mask, which loses the flash kernel). The GPU check
(``benchmarks/gpu_check.sh``) measures HF eager and regional and compares against the faster.

On a CPU it runs the ``tiny`` config so CI exercises the whole path; ``bangla-0.4b`` is for a GPU.
The ids are uniform random tokens from a fixed seed: a step's cost does not depend on the text.
"""

from __future__ import annotations

import argparse
import contextlib
import datetime
import gc
import os
import platform
import sys
import time
from dataclasses import asdict, dataclass, field, replace
from pathlib import Path
from typing import Any

import torch
import torch.nn as nn

from common import cli, paths
from common.errors import InputError
from common.fileio import write_json
from pretrain.config import OPTIMIZERS, PRESETS, OptimConfig, model_config
from pretrain.model.gpt import GPT, GPTConfig
from pretrain.model.hf_llama import hf_loss, to_hf
from pretrain.train.distributed import Runtime

GPT2_VOCAB = 50257  # the vocabulary of the shipped tokenizer; the model pads it to 50304
COMPILE_MODES = ("default", "max-autotune-no-cudagraphs", "max-autotune", "reduce-overhead")
HF_MODES = ("eager", "regional", "whole")
SDPA_BACKENDS = ("", "flash", "cudnn", "efficient", "math")  # "" = PyTorch's own choice


@dataclass
class BenchSettings:
    config: str
    vocab_size: int
    micro_batch: int
    accum: int  # micro-batches per optimizer step
    seq_len: int
    steps: int
    warmup: int
    device: str
    dtype: str  # "bf16" (autocast) or "fp32"
    compile: bool
    compile_mode: str
    fused_adamw: bool
    seed: int = 0
    compile_backend: str = "inductor"  # "eager" traces with dynamo only (the CPU dress rehearsal)
    n_head: int = 0  # 0 = the preset's (an A/B of the head dimension)
    sdpa_backend: str = ""  # force one SDPA backend (an A/B); "" = PyTorch's choice
    optimizer: str = "adamw"  # a name in pretrain.config.OPTIMIZERS, with its default settings

    @property
    def tokens_per_step(self) -> int:
        return self.micro_batch * self.accum * self.seq_len


@dataclass
class StepResult:
    """One model's measured step."""

    name: str
    mode: str  # "compiled per block" for ours; an HF_MODES entry for HF
    tokens_per_s: float
    seconds_per_step: float
    mfu: float | None  # None where the device's peak is unknown (CPU)
    peak_memory_bytes: int | None  # None on CPU
    first_loss: float
    last_loss: float
    parameters: int
    first_step_s: float  # the first warm-up step: compilation included
    attention: list[dict[str, Any]] = field(default_factory=list)  # pretrain.perf.attention_probe.attention_kernels


@dataclass
class BenchReport:
    settings: BenchSettings
    device: dict[str, Any]
    ours: StepResult
    hf: StepResult | None
    ratio_tokens_per_s: float | None  # ours / HF
    flops_per_token: float
    arbiter: dict[str, Any] = field(default_factory=dict)
    date: str = ""

    def to_dict(self) -> dict[str, Any]:
        return asdict(self)


class HFCausalLM(nn.Module):
    """``LlamaForCausalLM`` behind our model's call convention ``model(inputs, targets) -> (logits, loss)``,
    so the trainer's step function drives it unchanged; HF computes the loss its own way."""

    def __init__(self, hf: nn.Module):
        super().__init__()
        self.hf = hf

    def forward(self, inputs: torch.Tensor, targets: torch.Tensor) -> tuple[torch.Tensor, torch.Tensor]:
        return hf_loss(self.hf, inputs, targets)


def device_info(device: torch.device) -> dict[str, Any]:
    info: dict[str, Any] = {"device": str(device), "torch": torch.__version__, "python": platform.python_version()}
    if device.type == "cuda":
        props = torch.cuda.get_device_properties(device)
        info.update(name=props.name, capability=f"{props.major}.{props.minor}", memory_bytes=props.total_memory,
                    cuda=torch.version.cuda, cudnn=torch.backends.cudnn.version())
    else:
        info.update(name=platform.processor() or platform.machine(), threads=torch.get_num_threads())
    try:
        import transformers

        info["transformers"] = transformers.__version__
    except ImportError:
        pass
    return info


def _synchronize(device: torch.device) -> None:
    if device.type == "cuda":
        torch.cuda.synchronize(device)


def _step_model(model: nn.Module, mode: str, settings: BenchSettings) -> nn.Module:
    """The module the step calls: ours compiled per block; HF eager, per decoder layer, or whole."""
    if not settings.compile or mode == "eager":
        return model
    kwargs = {"backend": settings.compile_backend,
              "mode": None if settings.compile_backend != "inductor" else settings.compile_mode}
    if isinstance(model, GPT):
        model.compile_blocks(**kwargs)
        return model
    if mode == "regional":
        for layer in model.hf.model.layers:
            layer.compile(**kwargs)
        return model
    return torch.compile(model, **kwargs)


def measure(name: str, mode: str, model: nn.Module, settings: BenchSettings, runtime: Runtime, optim: OptimConfig,
            micro_batches: list[torch.Tensor], flops_per_token: float, peak: float | None) -> StepResult:
    """Time the trainer's step on ``model`` (compiled here as ``mode`` says), then probe one more step for
    the attention kernel it runs."""
    from pretrain.perf.attention_probe import attention_kernels
    from pretrain.train.optim import make_optimizer, train_step

    device = runtime.device
    optimizer = make_optimizer(model, optim, device)
    step_model = _step_model(model, mode, settings)
    if device.type == "cuda":
        torch.cuda.reset_peak_memory_stats(device)
    losses = []
    first_step_s = 0.0
    for i in range(settings.warmup):
        start = time.perf_counter()
        loss, _ = train_step(step_model, optimizer, micro_batches, runtime, optim.grad_clip)
        losses.append(loss)
        if i == 0:
            _synchronize(device)
            first_step_s = time.perf_counter() - start
    _synchronize(device)
    start = time.perf_counter()
    for _ in range(settings.steps):
        loss, _ = train_step(step_model, optimizer, micro_batches, runtime, optim.grad_clip)
        losses.append(loss)  # kept on the device: reading it here would sync every step
    _synchronize(device)
    elapsed = time.perf_counter() - start
    step_s = elapsed / settings.steps
    tps = settings.tokens_per_step / step_s
    peak_mem = torch.cuda.max_memory_allocated(device) if device.type == "cuda" else None
    attention = attention_kernels(lambda: train_step(step_model, optimizer, micro_batches, runtime, optim.grad_clip))
    return StepResult(name=name, mode=mode, tokens_per_s=tps, seconds_per_step=step_s,
                      mfu=flops_per_token * tps / peak if peak else None, peak_memory_bytes=peak_mem,
                      first_loss=float(losses[0]), last_loss=float(losses[-1]),
                      parameters=sum(p.numel() for p in model.parameters()), first_step_s=first_step_s,
                      attention=attention)


def _free(device: torch.device) -> None:
    gc.collect()
    if device.type == "cuda":
        torch.cuda.empty_cache()


@dataclass
class BenchSetup:
    """What every measurement of one settings shares: the config, runtime, batch and the device's peak."""

    cfg: GPTConfig
    runtime: Runtime
    optim: OptimConfig
    micro_batches: list[torch.Tensor]
    peak: float | None

    def model(self, settings: BenchSettings) -> GPT:
        """Our model as initialised by the settings' seed, on CPU (HF's copy is converted from it)."""
        torch.manual_seed(settings.seed)
        return GPT(self.cfg)


def setup(settings: BenchSettings) -> BenchSetup:
    from pretrain.train.hardware import peak_flops

    device = torch.device(settings.device)
    runtime = Runtime(device=device, autocast_dtype=torch.bfloat16 if settings.dtype == "bf16" else None)
    if device.type == "cuda":
        # The fp32 pieces (norms, the loss's upcast logits) may use TF32 tensor cores, for both models alike.
        torch.set_float32_matmul_precision("high")
    shape = {"block_size": max(settings.seq_len, model_config(settings.config, settings.vocab_size).block_size)}
    if settings.n_head:
        shape["n_head"] = settings.n_head
    cfg = model_config(settings.config, settings.vocab_size, **shape)
    generator = torch.Generator().manual_seed(settings.seed)
    batch = torch.randint(0, settings.vocab_size, (settings.micro_batch * settings.accum, settings.seq_len + 1),
                          generator=generator).to(device)
    return BenchSetup(cfg=cfg, runtime=runtime, optim=OptimConfig(name=settings.optimizer), micro_batches=list(batch.split(settings.micro_batch)),
                      peak=peak_flops(device))


def _sdpa_backend(name: str):
    """A context forcing one SDPA backend (an A/B), or nothing for PyTorch's own choice."""
    if not name:
        return contextlib.nullcontext()
    from torch.nn.attention import SDPBackend, sdpa_kernel

    return sdpa_kernel({"flash": SDPBackend.FLASH_ATTENTION, "cudnn": SDPBackend.CUDNN_ATTENTION,
                        "efficient": SDPBackend.EFFICIENT_ATTENTION, "math": SDPBackend.MATH}[name])


def measure_ours(settings: BenchSettings, su: BenchSetup | None = None) -> tuple[StepResult, dict[str, Any], float]:
    """Our step, the arbiter's verdict on two rows of the batch, and the model's FLOPs per token."""
    from pretrain.guard.grad_flow import check_gradient_flow

    su = su or setup(settings)
    model = su.model(settings).to(su.runtime.device)
    flops = model.flops_per_token(settings.seq_len)
    first = su.micro_batches[0][:2]
    verdict = check_gradient_flow(model, (first[:, :-1], first[:, 1:]), autocast=su.runtime.autocast_dtype)
    arbiter = {"ok": verdict.ok, "problems": verdict.problems, "checked": verdict.checked, "loss": verdict.loss}
    _free(su.runtime.device)
    with _sdpa_backend(settings.sdpa_backend):
        ours = measure("ours", "compiled per block" if settings.compile else "eager", model, settings, su.runtime,
                       su.optim, su.micro_batches, flops, su.peak)
    del model
    _free(su.runtime.device)
    return ours, arbiter, flops


def measure_hf(settings: BenchSettings, mode: str, su: BenchSetup | None = None) -> StepResult:
    """HF Llama's step in ``mode`` (an HF_MODES entry), from the same initial weights as ours."""
    if mode not in HF_MODES:
        raise ValueError(f"HF mode {mode!r}: expected one of {', '.join(HF_MODES)}")
    su = su or setup(settings)
    model = su.model(settings)
    flops = model.flops_per_token(settings.seq_len)
    hf = HFCausalLM(to_hf(model, vocab_size=model.cfg.vocab_size).to(su.runtime.device))
    del model
    with _sdpa_backend(settings.sdpa_backend):
        result = measure("transformers LlamaForCausalLM", mode, hf, settings, su.runtime, su.optim, su.micro_batches,
                         flops, su.peak)
    del hf
    _free(su.runtime.device)
    return result


def run_bench(settings: BenchSettings, *, with_hf: bool = True) -> BenchReport:
    """Measure our step, then HF's (compiled per layer when compiling, else eager), on the same batch."""
    su = setup(settings)
    ours, arbiter, flops = measure_ours(settings, su)
    theirs = measure_hf(settings, "regional" if settings.compile else "eager", su) if with_hf else None
    return BenchReport(settings=settings, device=device_info(su.runtime.device), ours=ours, hf=theirs,
                       ratio_tokens_per_s=ours.tokens_per_s / theirs.tokens_per_s if theirs else None,
                       flops_per_token=flops, arbiter=arbiter,
                       date=datetime.datetime.now(datetime.UTC).isoformat(timespec="seconds"))


def format_bench(report: BenchReport) -> str:
    s, d = report.settings, report.device
    lines = [f"bench {s.config}: {d.get('name')} ({d['device']}), torch {d['torch']}, {s.dtype}, "
             f"compile {'mode=' + s.compile_mode if s.compile else 'off'}, optimizer {s.optimizer}, fused AdamW "
             f"{s.fused_adamw}",
             f"  step: {s.micro_batch} x {s.seq_len} tokens x {s.accum} accumulation = {s.tokens_per_step:,} tokens; "
             f"{s.steps} timed steps after {s.warmup} warm-up",
             f"  {'model':<44}{'tokens/s':>12}{'s/step':>10}{'MFU':>8}{'peak mem':>12}{'loss first/last':>20}"]
    for r in (report.ours, report.hf):
        if r is None:
            continue
        mfu = "n/a" if r.mfu is None else f"{100 * r.mfu:.1f}%"
        mem = "n/a" if r.peak_memory_bytes is None else f"{r.peak_memory_bytes / 2**30:.2f} GiB"
        lines.append(f"  {r.name + ' (' + r.mode + ')':<44}{r.tokens_per_s:>12,.0f}{r.seconds_per_step:>10.4f}{mfu:>8}{mem:>12}"
                     f"{r.first_loss:>10.3f}/{r.last_loss:.3f}")
    if report.ratio_tokens_per_s is not None:
        lines.append(f"  ratio ours / HF tokens/s: {report.ratio_tokens_per_s:.3f}x")
    from pretrain.perf.attention_probe import describe

    lines += [f"  attention of {r.name}: {describe(r.attention)}" for r in (report.ours, report.hf) if r is not None]
    a = report.arbiter
    lines.append(f"  arbiter: {'ok' if a['ok'] else 'FAILED'}, {a['checked']} parameters checked")
    lines += [f"    {p}" for p in a["problems"]]
    return "\n".join(lines)


def add_arguments(p: argparse.ArgumentParser) -> None:
    p.add_argument("--config", default="tiny", choices=list(PRESETS), help="model preset")
    p.add_argument("--micro-batch", metavar="N", type=cli.positive_int,
                   help="sequences per forward pass (default: the preset's)")
    p.add_argument("--accum", metavar="N", type=cli.positive_int, default=1,
                   help="micro-batches per optimizer step (1 = the optimizer's cost is amortised the least)")
    p.add_argument("--seq-len", metavar="N", type=cli.positive_int, help="tokens per sequence (default: the preset's context)")
    p.add_argument("--steps", metavar="N", type=cli.positive_int, default=10, help="timed steps")
    p.add_argument("--warmup", metavar="N", type=cli.non_negative_int, default=3,
                   help="untimed steps first (compilation, allocator)")
    p.add_argument("--vocab-size", metavar="N", type=cli.positive_int, default=GPT2_VOCAB,
                   help="tokenizer vocabulary (padded to 128)")
    p.add_argument("--device", metavar="DEVICE", default="auto", type=paths.text, help="auto, cpu, cuda, cuda:N")
    p.add_argument("--compile", choices=["auto", "yes", "no"], default="auto", help="auto = on CUDA")
    p.add_argument("--compile-mode", choices=COMPILE_MODES, default="default", help="torch.compile mode")
    p.add_argument("--dtype", choices=["auto", "bf16", "fp32"], default="auto", help="auto = bf16 on CUDA")
    p.add_argument("--optimizer", choices=list(OPTIMIZERS), default="adamw",
                   help="the optimizer our step (and HF's) uses, with its default settings")
    p.add_argument("--no-hf", action="store_true", help="measure our step only")
    p.add_argument("--out", metavar="PATH", type=paths.output_file,
                   help="write the report as JSON here: a new file, or with --overwrite one this command wrote")
    p.add_argument("--overwrite", action="store_true", help="replace an earlier --out report")


def settings_from_args(args: argparse.Namespace) -> BenchSettings:
    device = args.device if args.device != "auto" else ("cuda" if torch.cuda.is_available() else "cpu")
    on_gpu = torch.device(device).type == "cuda"
    if on_gpu and not torch.cuda.is_available():
        raise InputError(f"--device {device}: torch {torch.__version__} sees no CUDA device")
    cfg = model_config(args.config, args.vocab_size)
    settings = BenchSettings(
        config=args.config, vocab_size=args.vocab_size,
        micro_batch=args.micro_batch or PRESETS[args.config].data["micro_batch"], accum=args.accum,
        seq_len=args.seq_len or cfg.block_size, steps=args.steps, warmup=args.warmup, device=device,
        dtype=("bf16" if on_gpu else "fp32") if args.dtype == "auto" else args.dtype,
        compile=args.compile == "yes" or (args.compile == "auto" and on_gpu), compile_mode=args.compile_mode,
        fused_adamw=on_gpu, optimizer=args.optimizer)
    check_memory(settings)
    return settings


def _device_memory(device: torch.device) -> tuple[int, str]:
    """The memory a step can use on ``device``, and its name: the GPU's, or on a CPU the machine's RAM."""
    if device.type == "cuda":
        props = torch.cuda.get_device_properties(device)
        return props.total_memory, props.name
    return os.sysconf("SC_PAGE_SIZE") * os.sysconf("SC_PHYS_PAGES"), "this machine's RAM"


def check_memory(s: BenchSettings) -> None:
    """Refuse, before anything is allocated, a step that cannot fit: the launch's memory estimate
    (`pretrain.guard.run_plan.memory_estimate`) for this shape, plus the step's batch of int64 ids, against the
    device's memory. Any integer passes the option types, so a huge ``--micro-batch`` or ``--seq-len`` would
    otherwise fail deep inside torch (an overflow, or an allocation the machine cannot make)."""
    from pretrain.config import preset
    from pretrain.guard.run_plan import memory_estimate

    run = preset(s.config, s.vocab_size)
    run = replace(run, model=model_config(s.config, s.vocab_size, block_size=max(s.seq_len, run.model.block_size)),
                  data=replace(run.data, micro_batch=s.micro_batch, seq_len=s.seq_len),
                  optim=replace(run.optim, name=s.optimizer))
    need = memory_estimate(run, autocast=s.dtype == "bf16", fused_optimizer=s.fused_adamw)["total_bytes"]
    need += s.micro_batch * s.accum * (s.seq_len + 1) * 8
    have, name = _device_memory(torch.device(s.device))
    if need > have:
        raise InputError(f"--micro-batch {s.micro_batch} x --seq-len {s.seq_len} x --accum {s.accum} "
                         f"(--config {s.config}, --vocab-size {s.vocab_size}): the step needs about "
                         f"{need / 2**30:.3g} GiB, more than the {have / 2**30:.1f} GiB of {name}; lower them")


def run(args: argparse.Namespace) -> int:
    """Run the benchmark from parsed ``pretrain bench`` arguments; print the table, write JSON if asked."""
    settings = settings_from_args(args)
    if settings.device.startswith("cpu") and settings.config != "tiny":
        print(f"pretrain bench: warning: {settings.config} on a CPU will be very slow; use --config tiny",
              file=sys.stderr)
    report = run_bench(settings, with_hf=not args.no_hf)
    print(format_bench(report))
    if args.out:
        out = Path(args.out)
        out.parent.mkdir(parents=True, exist_ok=True)
        write_json(out, paths.stamped(report.to_dict()))
        print(f"wrote {out}")
    return 0 if report.arbiter["ok"] else 1
