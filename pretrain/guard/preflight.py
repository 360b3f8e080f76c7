"""The preflight every launch runs before its first step: data and tokenizer, device, memory for the
micro-batch, gradient flow (the arbiter), and the time to finish from a short measured burst.

The manifest, vocabulary and token-id checks already ran when the :class:`~pretrain.train.trainer.Trainer` was built;
a mismatch there stops the launch before this point. Here every shard is hashed against the manifest, and
the tokenizer file is loaded and hashed against the manifest's record. The burst
runs real optimizer steps on the run's own model and optimizer and then restores them (a fresh run's weights
rebuilt from the seed, a resumed run's reloaded from its checkpoint), so the run starts from the untouched
state and the preflight never holds a second copy of the weights or optimizer state: the launch's peak memory
is the run's, which the memory estimate computes.

``RUN/preflight.json`` holds the report; every figure says whether it was measured or estimated.
"""

from __future__ import annotations

import gc
import os
import platform
import time
from dataclasses import asdict, dataclass, field
from typing import Any

import torch

from common.fileio import write_json
from corpus.shards.format import ShardError
from corpus.shards.verify import verify_shards
from pretrain.guard import run_plan
from pretrain.model.gpt import build_model, parameter_counts
from pretrain.train import distributed
from pretrain.train.checkpoint import load_checkpoint, rng_state, set_rng_state
from pretrain.train.hardware import mfu
from pretrain.train.optim import clear_state, make_optimizer, train_step
from pretrain.train.trainer import Trainer
from pretrain.train.validation import text_tokens

GiB = 1024**3
# Below this many training tokens per vocabulary id the preflight says that a model will learn little beyond
# token frequencies: on the demo's 600k tokens with 64,000 ids (9 a id) even an oracle bigram is only 0.12 nats
# below a unigram in Bangla; on 4M tokens (62 a id) `tiny` ends 0.25 below it (benchmarks/results/2026-12-01-tiny-budget).
FEW_TOKENS_PER_ID = 32


@dataclass
class PreflightReport:
    ok: bool
    problems: list[str]
    data: dict[str, Any]
    device: dict[str, Any]
    model: dict[str, Any]
    batch: dict[str, Any]
    memory: dict[str, Any]
    arbiter: dict[str, Any] = field(default_factory=dict)
    burst: dict[str, Any] = field(default_factory=dict)
    estimate: dict[str, Any] = field(default_factory=dict)

    def to_dict(self) -> dict[str, Any]:
        return asdict(self)


def _resident_bytes() -> int:
    """The process's resident memory now (Linux ``/proc/self/statm``; 0 where there is none)."""
    try:
        with open("/proc/self/statm") as f:
            return int(f.read().split()[1]) * os.sysconf("SC_PAGE_SIZE")
    except (OSError, ValueError, IndexError):
        return 0


def _tensor_bytes(trainer: Trainer) -> int:
    """Bytes of the trainer's parameters, gradients and optimizer state (what the estimate computes)."""
    tensors = [p for p in trainer.model.parameters()] + [p.grad for p in trainer.model.parameters() if p.grad is not None]
    tensors += [v for state in trainer.optimizer.state.values() for v in state.values() if torch.is_tensor(v)]
    return sum(t.numel() * t.element_size() for t in tensors)


def memory_estimate(trainer: Trainer) -> dict[str, Any]:
    """`pretrain.guard.run_plan.memory_estimate` for this trainer's config, precision, optimizer and sharding. On a CPU
    the device's memory is the process's, so what the process holds beyond the training tensors (interpreter,
    libraries, the mapped shards, the heap the allocator keeps) is measured and counted too: its resident
    memory now, less those tensors."""
    rt = trainer.runtime
    runtime = max(_resident_bytes() - _tensor_bytes(trainer), 0) if rt.device.type == "cpu" else 0
    return run_plan.memory_estimate(trainer.cfg, autocast=rt.autocast_dtype is not None,
                                shard=rt.world_size if rt.fsdp else 1, fused_optimizer=rt.device.type == "cuda",
                                runtime_bytes=runtime)


def _device_info(trainer: Trainer) -> dict[str, Any]:
    dev = trainer.runtime.device
    info: dict[str, Any] = {"device": str(dev), "torch": torch.__version__, "world_size": trainer.runtime.world_size,
                            "fsdp": trainer.runtime.fsdp, "autocast": str(trainer.runtime.autocast_dtype),
                            "compile": trainer.compile, "peak_flops": trainer.peak}
    if dev.type == "cuda":
        props = torch.cuda.get_device_properties(dev)
        info.update(name=props.name, capability=f"{props.major}.{props.minor}", memory_bytes=props.total_memory,
                    bf16=torch.cuda.is_bf16_supported())
    else:
        info.update(name=platform.processor() or platform.machine(), threads=torch.get_num_threads())
    return info


def _timed_steps(trainer: Trainer, model, optimizer, steps: int) -> dict[str, Any]:
    """Time ``steps`` optimizer steps of ``model`` after a warm-up step."""
    rt = trainer.runtime
    batches = trainer.micro_batches(trainer.sampler.state.next_batch)
    if rt.device.type == "cuda":
        torch.cuda.reset_peak_memory_stats(rt.device)
    # The first step pays for compilation, allocator and cache warm-up (4x a warm step on CPU, far more on a
    # GPU): time the ones after it, or a time budget would be spent on a fraction of the steps it allows.
    warmup = 1
    times = []
    for i in range(steps + warmup):
        t0 = time.perf_counter()
        loss, _ = train_step(model, optimizer, batches, rt, trainer.cfg.optim.grad_clip)
        loss.item()
        if i >= warmup:
            times.append(time.perf_counter() - t0)
    step_s = sorted(times)[len(times) // 2]
    tps = trainer.cfg.train.global_batch_tokens / step_s
    out = {"kind": "measured", "steps": steps, "seconds_per_step": step_s, "tokens_per_s": tps,
           "mfu": mfu(trainer.flops_per_token, tps, trainer.peak, rt.world_size)}
    if rt.device.type == "cuda":
        out["peak_memory_bytes"] = torch.cuda.max_memory_allocated(rt.device)
    return out


def _release_optimizer_state(trainer: Trainer) -> None:
    """Drop the gradients and the optimizer state (a resumed run's is reloaded after the burst)."""
    trainer.optimizer.zero_grad(set_to_none=True)
    clear_state(trainer.optimizer)
    gc.collect()


def _restore(trainer: Trainer) -> None:
    """Put the model and optimizer back as the run starts: a fresh run's weights rebuilt from its seed (the
    optimizer has no state yet), a resumed run's weights and optimizer state reloaded from its checkpoint."""
    _release_optimizer_state(trainer)
    if trainer.resumed_from:
        state = load_checkpoint(trainer.resumed_from)
        distributed.load_state_dicts(trainer.model, trainer.optimizer, state["model"], state["optimizer"],
                                     trainer.runtime)
    else:
        trainer.model.load_state_dict(build_model(trainer.cfg.model, trainer.cfg.train.seed).state_dict())
    gc.collect()


def _burst(trainer: Trainer, steps: int) -> dict[str, Any]:
    """Time ``steps`` optimizer steps (after a warm-up step) of the run's own model and optimizer, wrapped and
    compiled as the run has them, then restore both (`_restore`) and every RNG. No second copy of the weights
    or the optimizer state is held, so the burst needs no more memory than the run (the caller released a
    resumed run's optimizer state first), and a compiled run's block graph is compiled here, once.
    Under FSDP the burst runs on a fresh build (sharded, so its copy costs 1/world of the state)."""
    rt = trainer.runtime
    rng = rng_state()
    try:
        if rt.fsdp:
            model = build_model(trainer.cfg.model, trainer.cfg.train.seed).to(rt.device)
            wrapped = distributed.wrap(model, rt, trainer.compile)
            out = _timed_steps(trainer, wrapped, make_optimizer(model, trainer.cfg.optim, rt.device), steps)
            del model, wrapped
        else:
            out = _timed_steps(trainer, trainer.wrapped, trainer.optimizer, steps)
            _restore(trainer)
    finally:
        set_rng_state(rng)
    return out


def check_tokenizer(ds, problems: list[str]) -> str:
    """Whether the tokenizer file the manifest names is still the one the shards were made with (its sha256
    is computed from the file, not copied from the manifest). A file that cannot be loaded is reported but
    does not stop the run: training needs only the ids, and the vocabulary was checked against the model."""
    info = ds.manifest.tokenizer
    try:
        info.load()
    except ShardError as e:
        problems.append(f"{ds.path / 'manifest.json'}: {e}")
        return f"FAIL: {e}"
    except Exception as e:  # not loadable here (moved, another machine): say so, keep going
        return (f"not verified: {info.spec!r} cannot be loaded ({type(e).__name__}: {e}); shards, vocabulary and "
                "ids were checked")
    return f"ok: {info.spec} has sha256 {info.sha256} (computed from the file), as the manifest records"


def check_shards(ds, problems: list[str]) -> str:
    """Every shard against the manifest: header, size, count, documents and sha256 (`corpus.shards.verify`)."""
    result = verify_shards(ds.path, ds.manifest, hashes=True, progress=False)
    problems.extend(f"{ds.path}: {p}" for p in result.problems)
    if not result.ok:
        return f"FAIL: {len(result.problems)} problem(s)"
    return f"ok: {result.shards} shards, {result.tokens:,} tokens match the manifest (sha256 included)"


def run_preflight(trainer: Trainer) -> PreflightReport:
    """Check everything that can be checked before step 1; set max_steps from the burst when the run has
    only a time budget. Raises nothing: problems are listed and ``ok`` is False."""
    cfg, rt = trainer.cfg, trainer.runtime
    ds = trainer.dataset
    problems: list[str] = []
    data = {"path": str(ds.path), "train_tokens": len(ds.train), "val_languages": {k: len(v) for k, v in ds.val.items()},
            "tokenizer": asdict(ds.manifest.tokenizer), "windows_per_epoch": trainer.sampler.n_windows,
            "tokenizer_check": check_tokenizer(ds, problems), "shard_check": check_shards(ds, problems)}
    if not ds.val:
        problems.append(f"{ds.path}: no validation shards, so no per-language evaluation is possible")
    bos = ds.manifest.tokenizer.bos_id
    for lang, stream in ds.val.items():
        # Validation scores each document after its BOS in windows of at most seq_len (pretrain.train.validation),
        # so a set shorter than one sequence is scored as it is; a stream with no text token would stop the run
        # at its first validation (step train.eval_interval), so it is refused here, before any step.
        if not text_tokens(stream, bos):
            problems.append(f"{ds.path}: the {lang} validation shards hold no text token ({len(stream):,} tokens, "
                            "all BOS); build the shards with more --val-tokens")
    if cfg.train.tensorboard and rt.is_main:
        try:  # imported now, not at the first log: a missing package stops the launch before step 1
            import torch.utils.tensorboard  # noqa: F401
        except ImportError as e:
            problems.append(f"train.tensorboard is on but cannot be used ({e}); install tensorboard or set "
                            "train.tensorboard=no")
    counts = parameter_counts(cfg.model)
    model = {"preset": cfg.model_preset, "parameters": counts.total, "non_embedding_parameters": counts.non_embedding,
             "vocab_size": counts.vocab, "padded_vocab_size": counts.padded_vocab,
             "flops_per_token": trainer.flops_per_token}
    batch = {"global_batch_tokens": cfg.train.global_batch_tokens, "sequences": trainer.sequences,
             "seq_len": cfg.seq_len, "micro_batch": cfg.data.micro_batch, "accumulation": trainer.accum,
             "world_size": rt.world_size}
    memory = memory_estimate(trainer)
    device = _device_info(trainer)
    if "memory_bytes" in device and memory["total_bytes"] > 0.95 * device["memory_bytes"]:
        problems.append(f"estimated {memory['total_bytes'] / GiB:.1f} GiB per device exceeds the "
                        f"{device['memory_bytes'] / GiB:.1f} GiB of {device['name']}; lower data.micro_batch")
    report = PreflightReport(ok=False, problems=problems, data=data, device=device, model=model, batch=batch,
                             memory=memory)
    if cfg.train.preflight_steps and not rt.fsdp:
        # The burst restores a resumed run's optimizer state from its checkpoint anyway: dropping it now
        # keeps the arbiter's copy of the model within the run's own memory.
        _release_optimizer_state(trainer)
    if rt.is_main and not rt.fsdp:
        from pretrain.guard.grad_flow import check_gradient_flow

        # Two rows are enough to reach every parameter; the arbiter runs eager on a copy, so a full
        # micro-batch would cost an uncompiled step's time and memory.
        first = trainer.micro_batches(trainer.sampler.state.next_batch)[0][:2]
        verdict = check_gradient_flow(trainer.model, (first[:, :-1], first[:, 1:]), autocast=rt.autocast_dtype)
        report.arbiter = {"ok": verdict.ok, "problems": verdict.problems, "checked": verdict.checked,
                          "loss": verdict.loss, "blocked_at_init": verdict.blocked_at_init}
        problems.extend(f"gradient flow: {p}" for p in verdict.problems)
    if cfg.train.preflight_steps:
        report.burst = _burst(trainer, cfg.train.preflight_steps)
        if rt.device.type == "cpu":
            # Measured again after real steps: the heap the allocator keeps from them is the run's too.
            report.memory = memory_estimate(trainer)
        step_s = report.burst["seconds_per_step"]
        if not cfg.train.max_steps and cfg.train.time_budget_s:
            # Leave a tenth of the budget for validation, checkpoints and the final evaluation.
            cfg.train.max_steps = max(int(0.9 * cfg.train.time_budget_s / step_s), 1)
            # A run cut to fit a short budget still gets most of its steps at the peak learning rate.
            cfg.optim.warmup_steps = min(cfg.optim.warmup_steps, max(cfg.train.max_steps // 5, 1))
        remaining = max(cfg.train.max_steps - trainer.step, 0)
        report.estimate = {"kind": "estimate from the measured burst", "steps_remaining": remaining,
                           "seconds": remaining * step_s, "hours": remaining * step_s / 3600,
                           "tokens": remaining * cfg.train.global_batch_tokens}
    if not cfg.train.max_steps:
        problems.append("train.max_steps is 0: give --max-steps, or a --time-budget-s with preflight steps")
    report.ok = not problems
    return report


def write_report(report: PreflightReport, run_dir) -> None:
    write_json(run_dir / "preflight.json", report.to_dict())


def format_preflight(report: PreflightReport) -> str:
    d, m, b = report.device, report.model, report.batch
    per_id = report.data["train_tokens"] / m["vocab_size"]
    lines = [f"preflight: {'ok' if report.ok else 'FAILED'}",
             f"  data    {report.data['train_tokens']:,} train tokens ({per_id:,.0f} per vocabulary id); "
             f"val {report.data['val_languages']}",
             f"  shards  {report.data['shard_check']}",
             f"  tokens  {report.data['tokenizer_check']}",
             f"  device  {d.get('name')} ({d['device']}), torch {d['torch']}, autocast {d['autocast']}, "
             f"compile {d['compile']}, world {d['world_size']}",
             f"  model   {m['parameters']:,} parameters ({m['non_embedding_parameters']:,} non-embedding), vocabulary "
             f"{m['vocab_size']:,} padded to {m['padded_vocab_size']:,}, {m['flops_per_token'] / 1e9:.3f} GFLOP/token",
             f"  batch   {b['global_batch_tokens']:,} tokens = {b['sequences']} x {b['seq_len']}; micro-batch "
             f"{b['micro_batch']} x {b['accumulation']} accumulation",
             f"  memory  ~{report.memory['total_bytes'] / GiB:.2f} GiB per device (estimate)"]
    if report.arbiter:
        lines.append(f"  grads   {'ok' if report.arbiter['ok'] else 'FAILED'}: {report.arbiter['checked']} "
                     "parameters checked by the gradient-flow arbiter")
    if report.burst:
        burst_mfu = report.burst["mfu"]
        lines.append(f"  speed   {report.burst['tokens_per_s']:,.0f} tokens/s, {report.burst['seconds_per_step']:.3f} "
                     f"s/step (measured), MFU {'n/a' if burst_mfu is None else f'{100 * burst_mfu:.1f}%'}")
    if report.estimate:
        lines.append(f"  finish  {report.estimate['steps_remaining']} steps in ~{report.estimate['seconds'] / 60:.1f} "
                     "min (estimate)")
    if per_id < FEW_TOKENS_PER_ID:
        lines.append(f"  note    {per_id:.0f} train tokens per vocabulary id: most ids are seen a few times at most, "
                     "so a model learns little beyond their frequencies (docs/pretrain.md, `tiny`'s budget)")
    lines += [f"  PROBLEM {p}" for p in report.problems]
    return "\n".join(lines)
