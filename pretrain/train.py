"""The training loop: gradient accumulation to a global batch in tokens, AdamW with warmup then cosine or
WSD, clipping, bf16 autocast and torch.compile on a GPU (fp32 eager on CPU), exact resume, and the
trainer's side of the supervisor protocol (see `pretrain.supervisor`).

Step numbering: step ``n`` (1-based) is the n-th optimizer update; ``metrics.jsonl`` logs it under
``"step": n`` and the checkpoint taken after it is ``step_{n:08d}.pt``. Resuming from that checkpoint runs
step ``n + 1`` next, with batch, learning rate and RNG exactly as the uninterrupted run had them.

Files the trainer writes in ``RUN/`` (rank 0 only):

* ``config.json``: the :class:`~pretrain.config.RunConfig`, plus the manifest's tokenizer;
* ``metrics.jsonl``: one line per step ``{"step", "loss", "lr", "grad_norm", "tokens_per_s", "mfu",
  "time", "tokens", "batch"}`` (non-finite values as null, MFU null on CPU), appended and flushed; after a
  rollback or resume a step can appear again, and the last line for a step is the one that counts;
* ``heartbeat.json``: ``{"step", "time", "pid"}``, rewritten atomically every step;
* ``val.jsonl``: the periodic validation ``{"step", "time", "val_loss", "languages": {lang: loss}}``;
* ``rollbacks.jsonl``, ``halt.json``: the outcome of supervisor requests; ``tb/``: TensorBoard.

MFU = flops_per_token x tokens/s / (peak FLOP/s x world size), with flops_per_token = 6N + 12 L d T
(`pretrain.model.GPT.flops_per_token`) and the dense bf16 peak of the GPU model (:data:`PEAK_FLOPS`).
"""

from __future__ import annotations

import json
import math
import os
import random
import statistics
import sys
import time
from dataclasses import asdict
from pathlib import Path
from typing import Any

import numpy as np
import torch
from tqdm import tqdm

from fertility.fileio import atomic_write_bytes
from pretrain import distributed
from pretrain.checkpoint import latest_checkpoint, load_checkpoint, save_checkpoint
from pretrain.config import OptimConfig, RunConfig
from pretrain.data import BatchSampler, DataError, Dataset, check_compatible
from pretrain.distributed import Runtime
from pretrain.model import GPT

HALT_EXIT_CODE = 3
FAULT_KINDS = ("nan_loss", "loss_spike", "grad_explode", "slow", "hang", "kill_during_checkpoint")
SLOW_STEPS = 8  # a `slow` fault lasts this many steps
SLOW_FACTOR = 10.0  # ...each taking this many times the median step time
# Dense bf16 peak FLOP/s by GPU model (vendor datasheets, without sparsity); matched in order on the name.
PEAK_FLOPS: list[tuple[str, float]] = [
    ("H200", 989e12), ("GH200", 989e12), ("H100 NVL", 835e12), ("H100 PCIe", 756e12), ("H100", 989e12),
    ("H800", 989e12), ("A100", 312e12), ("A800", 312e12), ("L40S", 362e12), ("L4", 121e12),
    ("A10G", 70e12), ("RTX 4090", 165e12),
]
RESUMABLE_KEYS = {"train.max_steps", "train.time_budget_s", "train.supervisor", "train.supervisor_args",
                  "train.max_rollbacks", "train.inject_faults", "train.device", "train.threads",
                  "train.preflight_steps", "train.tensorboard", "train.log_interval", "train.compile",
                  "data.path", "data.tokenizer", "train.out"}


def peak_flops(device: torch.device) -> float | None:
    """The bf16 dense peak of ``device``, or None where unknown (CPU, unlisted GPUs): MFU is then null."""
    if device.type != "cuda":
        return None
    name = torch.cuda.get_device_name(device)
    return next((flops for key, flops in PEAK_FLOPS if key in name), None)


def parse_faults(specs: list[str]) -> list[tuple[str, int]]:
    """``KIND@STEP`` strings as (kind, step) pairs; each fault fires once per process."""
    faults = []
    for spec in specs:
        kind, sep, step = spec.partition("@")
        if not sep or kind not in FAULT_KINDS or not step.isdigit() or int(step) < 1:
            raise ValueError(f"--inject-fault {spec!r}: expected KIND@STEP with KIND in {', '.join(FAULT_KINDS)} "
                             "and STEP >= 1")
        faults.append((kind, int(step)))
    return faults


def lr_at(step: int, optim: OptimConfig, max_steps: int) -> float:
    """Learning rate of update ``step`` (0-based): linear warmup, then cosine or WSD down to lr * min_lr_ratio."""
    peak, floor = optim.lr, optim.lr * optim.min_lr_ratio
    if step < optim.warmup_steps:
        return peak * (step + 1) / optim.warmup_steps
    if optim.schedule == "wsd":
        decay_start = max(optim.warmup_steps, int(max_steps * (1 - optim.decay_fraction)))
        if step < decay_start:
            return peak
        progress = (step - decay_start) / max(max_steps - decay_start, 1)
        return peak - (peak - floor) * min(progress, 1.0)
    progress = min((step - optim.warmup_steps) / max(max_steps - optim.warmup_steps, 1), 1.0)
    return floor + 0.5 * (peak - floor) * (1 + math.cos(math.pi * progress))


def batch_layout(cfg: RunConfig, world_size: int) -> tuple[int, int]:
    """(global sequences per step, micro-steps per rank): the global batch does not depend on world size."""
    seq, micro = cfg.seq_len, cfg.data.micro_batch
    if cfg.train.global_batch_tokens % seq:
        raise ValueError(f"train.global_batch_tokens {cfg.train.global_batch_tokens} is not a multiple of the "
                         f"sequence length {seq}")
    sequences = cfg.train.global_batch_tokens // seq
    if sequences % (micro * world_size):
        raise ValueError(f"{sequences} sequences per step do not split into micro-batches of {micro} on "
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
               runtime: Runtime, grad_clip: float, faults: frozenset[str] = frozenset()
               ) -> tuple[torch.Tensor, torch.Tensor]:
    """One optimizer update over ``micro_batches`` (each ``(m, T + 1)``); returns (mean loss, grad norm)."""
    total = torch.zeros((), device=runtime.device)
    for i, batch in enumerate(micro_batches):
        x, y = batch[:, :-1], batch[:, 1:]
        with distributed.no_sync(model, i == len(micro_batches) - 1), runtime.autocast():
            _, loss = model(x, y)
        if "nan_loss" in faults:
            loss = loss * float("nan")
        if "loss_spike" in faults:
            loss = loss * 50.0
        (loss / len(micro_batches)).backward()
        total += loss.detach()
    params = [p for p in model.parameters() if p.grad is not None]
    if "grad_explode" in faults:
        for p in params:
            p.grad.mul_(1e6)
    grad_norm = torch.nn.utils.clip_grad_norm_(params, grad_clip if grad_clip > 0 else float("inf"))
    optimizer.step()
    optimizer.zero_grad(set_to_none=True)
    return distributed.mean_across(total / len(micro_batches), runtime), grad_norm


def _finite_or_none(x: float) -> float | None:
    return x if math.isfinite(x) else None


def _write_json(path: Path, obj: dict[str, Any]) -> None:
    atomic_write_bytes(path, json.dumps(obj, indent=2, default=str).encode())


def rng_state() -> dict[str, Any]:
    """Every RNG a step could touch, in a form ``torch.load(weights_only=True)`` accepts."""
    name, keys, pos, has_gauss, gauss = np.random.get_state()
    state = {"python": random.getstate(), "numpy": [name, torch.from_numpy(keys.astype(np.int64)), pos, has_gauss, gauss],
             "torch": torch.get_rng_state()}
    if torch.cuda.is_available():
        state["cuda"] = torch.cuda.get_rng_state_all()
    return state


def set_rng_state(state: dict[str, Any]) -> None:
    random.setstate(state["python"])
    name, keys, pos, has_gauss, gauss = state["numpy"]
    np.random.set_state((name, keys.numpy().astype(np.uint32), pos, has_gauss, gauss))
    torch.set_rng_state(state["torch"])
    if "cuda" in state and torch.cuda.is_available():
        torch.cuda.set_rng_state_all(state["cuda"])


def build_model(cfg: RunConfig) -> GPT:
    """The model as initialised by the run's seed, on CPU (so the init is the same on every device and is
    the random-init twin's)."""
    torch.manual_seed(cfg.train.seed)
    return GPT(cfg.model)


class Trainer:
    """One training run: the model, optimizer and sampler, and the loop that advances them."""

    def __init__(self, cfg: RunConfig, dataset: Dataset, runtime: Runtime, *, resume: bool = False):
        self.cfg, self.dataset, self.runtime = cfg, dataset, runtime
        self.run_dir = Path(cfg.train.out)
        self.sequences, self.accum = batch_layout(cfg, runtime.world_size)
        self.faults = parse_faults(cfg.train.inject_faults)
        resume_from = latest_checkpoint(self.run_dir) if resume else None
        state = load_checkpoint(resume_from) if resume_from else None
        check_compatible(dataset, cfg.model.vocab_size, tokenizer=cfg.data.tokenizer,
                         expected_sha256=state["tokenizer"]["sha256"] if state else "",
                         expected_from=f"checkpoint {resume_from}")
        if state and state["config"]["model"] != asdict(cfg.model):
            raise DataError(f"checkpoint {resume_from} holds a model of another shape than {self.run_dir}/config.json")
        if cfg.train.threads:
            torch.set_num_threads(cfg.train.threads)
        self.model = build_model(cfg).to(runtime.device)
        self.compile = cfg.train.compile == "yes" or (cfg.train.compile == "auto" and runtime.device.type == "cuda")
        self.wrapped = distributed.wrap(self.model, runtime, self.compile)
        self.optimizer = make_optimizer(self.model, cfg.optim, runtime.device)
        self.sampler = BatchSampler(dataset.train, cfg.seq_len, self.sequences, cfg.train.seed)
        self.step, self.tokens_seen, self.last_saved = 0, 0, 0
        self.batch_of_step: dict[int, int] = {}
        self.finite_since_save = True
        self.step_times: list[float] = []
        self.slow_until = 0
        self.val_loss: float | None = None
        self.flops_per_token = self.model.flops_per_token(cfg.seq_len)
        self.peak = peak_flops(runtime.device)
        if state:
            self._restore(state)
            self.resumed_from = resume_from
        else:
            self.resumed_from = None
        self._tb = None

    # ------------------------------------------------------------------------------------------ state

    def state_dict(self) -> dict[str, Any]:
        model_sd, optim_sd = distributed.state_dicts(self.model, self.optimizer, self.runtime)
        return {"step": self.step, "tokens_seen": self.tokens_seen, "model": model_sd, "optimizer": optim_sd,
                "scheduler": {"schedule": self.cfg.optim.schedule, "step": self.step,
                              "max_steps": self.cfg.train.max_steps, "lr": lr_at(self.step, self.cfg.optim, self.cfg.train.max_steps)},
                "rng": rng_state(), "data": self.sampler.state_dict(), "config": self.cfg.to_dict(),
                "tokenizer": asdict(self.dataset.manifest.tokenizer), "world_size": self.runtime.world_size,
                "fsdp": self.runtime.fsdp, "val_loss": self.val_loss}

    def _restore(self, state: dict[str, Any]) -> None:
        if state["fsdp"] != self.runtime.fsdp:
            raise DataError("checkpoint was written with fsdp={}, this run has fsdp={}: the optimizer state layouts "
                            "differ".format(state["fsdp"], self.runtime.fsdp))
        distributed.load_state_dicts(self.model, self.optimizer, state["model"], state["optimizer"], self.runtime)
        self.sampler.load_state_dict(state["data"])
        set_rng_state(state["rng"])
        self.step = self.last_saved = int(state["step"])
        self.tokens_seen = int(state["tokens_seen"])
        self.val_loss = state["val_loss"]

    def save(self, crash_midway: bool = False) -> Path | None:
        """Checkpoint the current state, unless a non-finite loss or weight was seen since the last one."""
        finite = self.finite_since_save and all(torch.isfinite(p).all() for p in self.model.parameters())
        finite = bool(distributed.broadcast(finite, self.runtime))
        if not finite:
            self._log(f"step {self.step}: not checkpointing, a non-finite loss or weight was seen since step "
                      f"{self.last_saved}")
            return None
        state = self.state_dict()
        path = None
        if self.runtime.is_main:
            path = save_checkpoint(self.run_dir, self.step, state, val_loss=self.val_loss,
                                   keep_last=self.cfg.train.keep_last, crash_midway=crash_midway)
        self.last_saved = self.step
        self.finite_since_save = True
        return path

    # ------------------------------------------------------------------------------------------ logging

    def _log(self, message: str) -> None:
        if self.runtime.is_main:
            tqdm.write(f"[pretrain] {message}", file=sys.stderr)

    def _tensorboard(self):
        if self._tb is None and self.cfg.train.tensorboard and self.runtime.is_main:
            from torch.utils.tensorboard import SummaryWriter

            self._tb = SummaryWriter(str(self.run_dir / "tb"))
        return self._tb

    def _heartbeat(self) -> None:
        _write_json(self.run_dir / "heartbeat.json", {"step": self.step, "time": time.time(), "pid": os.getpid()})

    def _append(self, name: str, record: dict[str, Any]) -> None:
        with open(self.run_dir / name, "a", encoding="utf-8") as f:
            f.write(json.dumps(record) + "\n")
            f.flush()

    def prepare_run_dir(self) -> None:
        """Write config.json; drop a half-written last metrics line left by a kill."""
        if not self.runtime.is_main:
            return
        self.run_dir.mkdir(parents=True, exist_ok=True)
        _write_json(self.run_dir / "config.json", {**self.cfg.to_dict(),
                                                   "tokenizer": asdict(self.dataset.manifest.tokenizer)})
        metrics = self.run_dir / "metrics.jsonl"
        if metrics.exists():
            data = metrics.read_bytes()
            if data and not data.endswith(b"\n"):
                with open(metrics, "r+b") as f:
                    f.truncate(data.rfind(b"\n") + 1)

    # ------------------------------------------------------------------------------------------ supervisor

    def _read_request(self) -> dict[str, Any] | None:
        request = None
        if self.runtime.is_main:
            try:
                request = json.loads((self.run_dir / "halt_request.json").read_text(encoding="utf-8"))
            except (FileNotFoundError, json.JSONDecodeError):
                request = None
        return distributed.broadcast(request, self.runtime)

    def _halt(self, request: dict[str, Any]) -> int:
        last_good = latest_checkpoint(self.run_dir)
        if self.runtime.is_main:
            _write_json(self.run_dir / "halt.json", {
                "reason": request.get("reason"), "evidence": request.get("evidence", {}),
                "step": request.get("step", self.step), "last_good_checkpoint": str(last_good) if last_good else None,
                "trainer_step": self.step, "written_by": "trainer"})
            (self.run_dir / "halt_request.json").unlink(missing_ok=True)
        self._log(f"halted at step {self.step}: {request.get('reason')}; last good checkpoint {last_good}")
        return HALT_EXIT_CODE

    def _rollbacks_done(self) -> int:
        path = self.run_dir / "rollbacks.jsonl"
        return sum(1 for line in path.read_text().splitlines() if line.strip()) if path.exists() else 0

    def _rollback(self, request: dict[str, Any]) -> int | None:
        done = self._rollbacks_done() if self.runtime.is_main else 0
        done = distributed.broadcast(done, self.runtime)
        target = latest_checkpoint(self.run_dir)
        if done >= self.cfg.train.max_rollbacks or target is None:
            why = (f"max_rollbacks ({self.cfg.train.max_rollbacks}) reached" if target is not None
                   else "no checkpoint to roll back to")
            return self._halt({**request, "evidence": {**request.get("evidence", {}), "rollback_refused": why}})
        first, last = request.get("skip_batches") or [request.get("step", self.step)] * 2
        skipped = sorted({self.batch_of_step[s] for s in range(int(first), int(last) + 1) if s in self.batch_of_step})
        self._restore(load_checkpoint(target))
        self.sampler.state.skip.extend([b, b] for b in skipped)
        self.finite_since_save = True
        if self.runtime.is_main:
            self._append("rollbacks.jsonl", {"time": time.time(), "reason": request.get("reason"),
                                             "request_step": request.get("step"), "skip_steps": [first, last],
                                             "skip_batch_indices": skipped, "checkpoint": str(target),
                                             "resumed_at_step": self.step, "evidence": request.get("evidence", {})})
            (self.run_dir / "halt_request.json").unlink(missing_ok=True)
        self._log(f"rolled back to {target.name} (step {self.step}), skipping batches {skipped}: {request.get('reason')}")
        return None

    def _handle_request(self) -> int | None:
        request = self._read_request()
        if request is None:
            return None
        if request.get("action") == "rollback":
            return self._rollback(request)
        return self._halt(request)

    # ------------------------------------------------------------------------------------------ loop

    def micro_batches(self, index: int) -> list[torch.Tensor]:
        """This rank's micro-batches of global batch ``index``."""
        per_rank = self.sequences // self.runtime.world_size
        rows = self.sampler.batch(index, slice(self.runtime.rank * per_rank, (self.runtime.rank + 1) * per_rank))
        batch = torch.from_numpy(rows).to(self.runtime.device, non_blocking=True)
        return list(batch.split(self.cfg.data.micro_batch))

    def _fault(self, kind: str, step: int) -> bool:
        """Whether fault ``kind`` fires at ``step`` (each injected fault fires once)."""
        for i, (k, s) in enumerate(self.faults):
            if k == kind and (s == step or (kind == "kill_during_checkpoint" and s <= step)):
                del self.faults[i]
                return True
        return False

    def run_step(self) -> dict[str, Any]:
        step = self.step + 1
        t0 = time.perf_counter()
        lr = lr_at(self.step, self.cfg.optim, self.cfg.train.max_steps)
        for group in self.optimizer.param_groups:
            group["lr"] = lr
        index = self.sampler.next_index()
        self.batch_of_step[step] = index
        faults = frozenset(k for k in ("nan_loss", "loss_spike", "grad_explode") if self._fault(k, step))
        loss, grad_norm = train_step(self.wrapped, self.optimizer, self.micro_batches(index), self.runtime,
                                     self.cfg.optim.grad_clip, faults)
        loss, grad_norm = loss.item(), grad_norm.item()
        self.step = step
        self.tokens_seen += self.cfg.train.global_batch_tokens
        if not (math.isfinite(loss) and math.isfinite(grad_norm)):
            self.finite_since_save = False
        if self._fault("slow", step):
            self.slow_until = step + SLOW_STEPS - 1
        if step <= self.slow_until:
            time.sleep(SLOW_FACTOR * statistics.median(self.step_times or [0.1]))
        dt = time.perf_counter() - t0
        if step > self.slow_until:
            self.step_times.append(dt)
        tps = self.cfg.train.global_batch_tokens / dt
        mfu = self.flops_per_token * tps / (self.peak * self.runtime.world_size) if self.peak else None
        return {"step": step, "loss": _finite_or_none(loss), "lr": lr, "grad_norm": _finite_or_none(grad_norm),
                "tokens_per_s": tps, "mfu": mfu, "time": time.time(), "tokens": self.tokens_seen, "batch": index}

    def validate(self) -> dict[str, float]:
        """Mean loss per language on the first ``data.eval_tokens`` tokens of each validation stream."""
        from pretrain.evaluate import language_losses

        losses = language_losses(self.wrapped, self.dataset, self.cfg.seq_len, self.cfg.data.eval_tokens,
                                 self.cfg.data.micro_batch, self.runtime)
        self.val_loss = statistics.fmean(losses.values()) if losses else None
        if self.runtime.is_main:
            self._append("val.jsonl", {"step": self.step, "time": time.time(), "val_loss": self.val_loss,
                                       "languages": losses})
            tb = self._tensorboard()
            if tb:
                for lang, value in losses.items():
                    tb.add_scalar(f"val/loss_{lang}", value, self.step)
        self._log(f"step {self.step}: val loss " + ", ".join(f"{k} {v:.4f}" for k, v in losses.items()))
        return losses

    def fit(self, on_step=None) -> int:
        """Train to ``train.max_steps`` (or the time budget); return 0, or 3 when the supervisor halted."""
        tc = self.cfg.train
        self.prepare_run_dir()
        if self.resumed_from:
            self._log(f"resumed from {self.resumed_from} at step {self.step}")
        start = time.monotonic()
        bar = tqdm(total=tc.max_steps, initial=self.step, unit="step", dynamic_ncols=True,
                   disable=not self.runtime.is_main, file=sys.stderr)
        try:
            while self.step < tc.max_steps:
                code = self._handle_request()
                if code is not None:
                    return code
                if tc.time_budget_s and time.monotonic() - start > tc.time_budget_s:
                    self._log(f"time budget of {tc.time_budget_s:.0f} s spent at step {self.step}")
                    break
                if self._fault("hang", self.step + 1):
                    self._log(f"fault injected: hang at step {self.step + 1}")
                    while True:
                        time.sleep(3600)
                record = self.run_step()
                if self.runtime.is_main:
                    self._append("metrics.jsonl", record)
                    self._heartbeat()
                    bar.update(1)
                    if self.step % tc.log_interval == 0:
                        bar.set_postfix(loss=record["loss"], lr=f"{record['lr']:.2e}",
                                        tok_s=f"{record['tokens_per_s']:.0f}")
                        tb = self._tensorboard()
                        if tb:
                            for key in ("loss", "lr", "grad_norm", "tokens_per_s", "mfu"):
                                if record[key] is not None:
                                    tb.add_scalar(f"train/{key}", record[key], self.step)
                if on_step:
                    on_step(record)
                at_checkpoint = self.step % tc.checkpoint_interval == 0
                if self.step % tc.eval_interval == 0 or at_checkpoint:
                    self.validate()
                if at_checkpoint:
                    self.save(crash_midway=self._fault("kill_during_checkpoint", self.step))
            if self.step != self.last_saved:
                if self.val_loss is None or self.step % tc.eval_interval:
                    self.validate()
                self.save(crash_midway=self._fault("kill_during_checkpoint", self.step))
            return 0
        finally:
            bar.close()
            if self._tb:
                self._tb.close()
