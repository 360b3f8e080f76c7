"""The training loop: gradient accumulation to a global batch in tokens, the run's optimizer (AdamW, or Muon
with AdamW) with warmup then cosine or WSD, clipping, bf16 autocast and torch.compile on a GPU (fp32 eager on CPU), exact resume, and the
trainer's side of the supervisor protocol (see `pretrain.guard.supervisor`).

Step numbering: step ``n`` (1-based) is the n-th optimizer update; ``metrics.jsonl`` logs it under
``"step": n`` and the checkpoint taken after it is ``step_{n:08d}.pt``. Resuming from that checkpoint runs
step ``n + 1`` next, with batch, learning rate and RNG exactly as the uninterrupted run had them.

The files the trainer writes in ``RUN/`` and the generation protocol with the supervisor are
`pretrain.train.rundir`'s; the step itself is `pretrain.train.optim`'s; injected faults are `pretrain.train.faults`'s. A metrics
record is ``{"gen", "step", "loss", "lr", "grad_norm", "tokens_per_s", "mfu", "time", "tokens", "batch"}``
(non-finite values as null, MFU null on CPU); after a rollback or resume a step can appear again, and the
last line for a step is the one that counts.
"""

from __future__ import annotations

import dataclasses
import math
import os
import statistics
import sys
import time
from dataclasses import asdict, dataclass
from pathlib import Path
from typing import Any

import torch
from tqdm import tqdm

from common.errors import InputError
from common.fileio import read_jsonl, write_json
from common.signals import StopRequest
from pretrain.config import OptimConfig, RunConfig
from pretrain.model.gpt import GPTConfig, build_model
from pretrain.train import distributed, rundir
from pretrain.train.checkpoint import (
    CheckpointError,
    abandoned_dir,
    adopt,
    checkpoint_step,
    latest_checkpoint,
    load_checkpoint,
    redone_dir,
    resume_checkpoint,
    rng_state,
    save_checkpoint,
    set_rng_state,
    step_checkpoints,
)
from pretrain.train.data import BatchSampler, DataError, Dataset, check_compatible
from pretrain.train.distributed import Runtime
from pretrain.train.faults import FaultPlan
from pretrain.train.hardware import cpu_threads, mfu, peak_flops
from pretrain.train.optim import batch_layout, lr_at, make_optimizer, replan_schedule, set_rates, train_step
from pretrain.train.validation import language_losses

HALT_EXIT_CODE = 3


def _finite_or_none(x: float) -> float | None:
    return x if math.isfinite(x) else None


def _clock(seconds: float) -> str:
    """``seconds`` as H:MM:SS."""
    s = round(seconds)
    return f"{s // 3600}:{s // 60 % 60:02d}:{s % 60:02d}"


@dataclass
class _Pace:
    """What a progress line measures besides the step's own record: the steps and their compute seconds since
    the previous line (its tokens/s and MFU), and the steps and wall time since :meth:`Trainer.fit` began (the
    time left, validation and checkpoints included)."""

    started: float
    done: int = 0
    steps: int = 0
    seconds: float = 0.0


def _check_optimizer(cfg: RunConfig, state: dict[str, Any], path: Path) -> None:
    """A checkpoint's optimizer state continues only under the optimizer that wrote it (a checkpoint of before
    the registry was AdamW's)."""
    was = state["config"]["optim"].get("name", "adamw")
    if was != cfg.optim.name:
        raise DataError(f"checkpoint {path} was trained with optimizer {was}, this run uses {cfg.optim.name}: the "
                        f"optimizer states differ; continue it with --set optim.name={was}, or start from a "
                        f"checkpoint written with {cfg.optim.name}")


def _check_schedule(cfg: RunConfig, state: dict[str, Any], replan: bool) -> None:
    """A resumed run keeps its learning-rate schedule: a ``train.max_steps`` other than the checkpoint's would
    re-stretch it and make the rate jump at the resumed step, so it is refused unless ``replan``, which
    records in ``cfg.optim`` that the schedule goes on from the checkpoint's rate at its step, inside the warmup
    too (`pretrain.train.optim.replan_schedule`)."""
    was, now, step = int(state["config"]["train"]["max_steps"]), cfg.train.max_steps, int(state["step"])
    if was == now:
        return
    before = OptimConfig(**state["config"]["optim"])
    lr_was = lr_at(step, before, was)
    if cfg.optim.replan_step == step and cfg.optim.replan_lr == lr_was:
        return  # re-planned at this step already (a run killed after its --replan-schedule)
    if not replan:
        raise InputError(f"--max-steps {now}: the checkpoint at step {step} was planned for {was} steps, and "
                         f"another count re-stretches its learning-rate schedule (the rate of step {step + 1}: "
                         f"{lr_was:.3g} as planned, {lr_at(step, cfg.optim, now):.3g} stretched); keep "
                         f"--max-steps {was}, or pass --replan-schedule to go on from {lr_was:.3g} down to the "
                         f"floor at step {now}")
    planned = dataclasses.replace(before)  # the checkpoint's plan is the one to continue without a jump
    replan_schedule(planned, step, was, now)
    cfg.optim.replan_step, cfg.optim.replan_lr, cfg.optim.replan_warmup = (planned.replan_step, planned.replan_lr,
                                                                          planned.replan_warmup)


class Trainer:
    """One training run: the model, optimizer and sampler, and the loop that advances them.

    ``resume``: continue from the checkpoint ``latest.json`` of ``train.out`` names, or the newest one before it
    on the same line that verifies (the ones skipped are named in ``skipped_checkpoints`` and moved aside when
    the run starts: ``NAME.corrupt`` when their sha256 proves them damaged, else ``NAME.unloadable``); a run that has trained but holds no such checkpoint is
    refused. ``resume_from``: from that checkpoint file; an earlier one than the run's newest starts a branch
    (`pretrain.train.checkpoint.adopt`). ``replan``: a ``train.max_steps`` other than the checkpoint's
    re-plans the schedule from the resumed step (else it is refused).
    """

    def __init__(self, cfg: RunConfig, dataset: Dataset, runtime: Runtime, *, resume: bool = False,
                 resume_from: str | os.PathLike | None = None, replan: bool = False):
        self.cfg, self.dataset, self.runtime = cfg, dataset, runtime
        self.run_dir = Path(cfg.train.out)
        self.sequences, self.accum = batch_layout(cfg, runtime.world_size)
        self.faults = FaultPlan.from_specs(cfg.train.inject_faults)
        self.skipped_checkpoints: list[tuple[Path, str, bool]] = []  # (file, why, proven corrupt)
        self.resumed_from, state = None, None
        if resume_from:
            self.resumed_from = Path(resume_from)
            state = load_checkpoint(self.resumed_from)
        elif resume:
            found = resume_checkpoint(self.run_dir)
            if found:
                self.resumed_from, state, self.skipped_checkpoints = found
            elif rundir.has_trained(self.run_dir):
                raise CheckpointError(f"--resume {self.run_dir}: the run has trained but holds no complete "
                                      "checkpoint to continue from; start a new run in another --out, or "
                                      "continue from a checkpoint file with --resume-from")
        self.branch = bool(resume_from)
        check_compatible(dataset, cfg.model.vocab_size, tokenizer=cfg.data.tokenizer,
                         expected_sha256=state["tokenizer"]["sha256"] if state else "",
                         expected_from=f"checkpoint {self.resumed_from}")
        # Compared as configs, so a checkpoint written before a field existed gets that field's default.
        if state and GPTConfig(**state["config"]["model"]) != cfg.model:
            raise DataError(f"checkpoint {self.resumed_from} holds a model of another shape than "
                            f"{self.run_dir}/config.json")
        if state:
            _check_optimizer(cfg, state, self.resumed_from)
            _check_schedule(cfg, state, replan)
        torch.set_num_threads(cfg.train.threads or cpu_threads(int(os.environ.get("LOCAL_WORLD_SIZE", "1"))))
        if runtime.device.type == "cuda":
            # The fp32 pieces (norms, the loss's upcast logits) may use TF32 tensor cores, as in `pretrain bench`.
            torch.set_float32_matmul_precision("high")
        self.model = build_model(cfg.model, cfg.train.seed).to(runtime.device)
        self.compile = cfg.train.compile == "yes" or (cfg.train.compile == "auto" and runtime.device.type == "cuda")
        self.wrapped = distributed.wrap(self.model, runtime, self.compile)
        self.optimizer = make_optimizer(self.model, cfg.optim, runtime.device)
        self.sampler = BatchSampler(dataset.train, cfg.seq_len, self.sequences, cfg.train.seed)
        self.step, self.tokens_seen, self.last_saved = 0, 0, 0
        self.gen = 0  # claimed by begin(): 0 means the run directory has not been prepared yet
        self.batch_of_step: dict[int, int] = {}
        self.finite_since_save = True
        self.val_loss: float | None = None
        self.stopped_by: int | None = None  # the signal that ended fit() early, after its checkpoint
        self.step_seconds = 0.0  # the compute time of the last step
        self.flops_per_token = self.model.flops_per_token(cfg.seq_len)
        self.peak = peak_flops(runtime.device)
        if state:
            self._restore(state)
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

    def save(self) -> Path | None:
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
            hook = self.faults.checkpoint_hook(self.step) if self.faults else None
            path = save_checkpoint(self.run_dir, self.step, state, val_loss=self.val_loss,
                                   keep_last=self.cfg.train.keep_last, before_publish=hook)
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

    def begin(self) -> int:
        """Prepare the run directory (config.json; a half-written last metrics line left by a kill is dropped)
        and claim this process's generation; a request left by an earlier process is void from here on.
        Returns the generation. Called by :meth:`fit`; call it earlier to start a supervisor first."""
        if self.gen:
            return self.gen
        if self.runtime.is_main:
            self.run_dir.mkdir(parents=True, exist_ok=True)
            write_json(self.run_dir / rundir.CONFIG, {**self.cfg.to_dict(),
                                                      "tokenizer": asdict(self.dataset.manifest.tokenizer)})
            if self.resumed_from:
                self._adopt()  # cuts the logs back to the resumed step, a torn last line with them
            elif (metrics := self.run_dir / rundir.METRICS).exists():
                data = metrics.read_bytes()
                if data and not data.endswith(b"\n"):
                    with open(metrics, "r+b") as f:
                        f.truncate(data.rfind(b"\n") + 1)
            gen = rundir.claim_generation(self.run_dir)
            rundir.take_request(self.run_dir, gen)  # voids a request of an earlier generation
        else:
            gen = None
        self.gen = distributed.broadcast(gen, self.runtime)
        if self.resumed_from:
            self._log(f"resumed from {self.resumed_from} at step {self.step}")
        return self.gen

    def _adopt(self) -> None:
        """The resumed checkpoint becomes the head of the run's live line (`checkpoint.adopt`: corrupt ones
        skipped and the checkpoints a branch abandons moved aside), and the run's logs are cut back to its
        step, so that no step appears twice; the records cut are kept, beside a branch's abandoned checkpoints
        or, for a plain resume, in ``RUN/abandoned/redone-after-STEP/``."""
        moved, abandoned = adopt(self.run_dir, self.resumed_from,
                                 [(p, proven) for p, _, proven in self.skipped_checkpoints], branch=self.branch)
        reasons = {p: reason for p, reason, _ in self.skipped_checkpoints}
        for src, dst in moved:
            why = f": {reasons[src]}" if src in reasons else ""
            self._log(f"moved {src.name} aside to {dst.relative_to(self.run_dir)}{why}")
        if abandoned is not None:
            self._log(f"--resume-from {self.resumed_from.name}: a branch at step {self.step}; line {abandoned} "
                      f"is kept in {abandoned_dir(self.run_dir, abandoned).relative_to(self.run_dir)}")
        kept = abandoned_dir(self.run_dir, abandoned) if abandoned is not None else redone_dir(self.run_dir, self.step)
        for name in (rundir.METRICS, rundir.VALIDATION):
            rundir.truncate_log(self.run_dir, name, self.step, kept / name)

    # ------------------------------------------------------------------------------------------ supervisor

    def _read_request(self) -> dict[str, Any] | None:
        request = rundir.take_request(self.run_dir, self.gen) if self.runtime.is_main else None
        return distributed.broadcast(request, self.runtime)

    def _good_checkpoint(self, request: dict[str, Any]) -> Path | None:
        """The newest checkpoint from before the steps ``request`` blames (``first_step``; a request without it,
        of an earlier version, blames its ``step``): a checkpoint taken during a diverging streak holds
        finite but damaged weights, so the newest one is not necessarily good."""
        before = int(request.get("first_step", request.get("step", self.step)))
        good = [p for p in step_checkpoints(self.run_dir) if checkpoint_step(p) < before]
        return good[-1] if good else None

    def _make_head(self, checkpoint: Path) -> None:
        """Make ``checkpoint`` the one ``--resume`` continues from: the checkpoints after it, taken during the
        fault, are moved aside as a branch's are (`pretrain.train.checkpoint.adopt`)."""
        if self.runtime.is_main and checkpoint != latest_checkpoint(self.run_dir):
            for src, dst in adopt(self.run_dir, checkpoint, [], branch=True)[0]:
                self._log(f"moved {src.name} aside to {dst.relative_to(self.run_dir)}: taken during the fault")
        distributed.broadcast(None, self.runtime)  # every rank waits until the folder is settled

    def _halt(self, request: dict[str, Any]) -> int:
        """Stop for the supervisor, leaving a checkpoint to go on from: the last good one, made the one
        ``--resume`` takes; or, when there is none (a halt before the first checkpoint), the current state if
        it is finite. Only a run whose state is not finite before its first checkpoint leaves none."""
        last_good = self._good_checkpoint(request)
        saved_now = False
        if last_good is not None:
            self._make_head(last_good)
        else:
            last_good = self.save()
            last_good = distributed.broadcast(str(last_good) if last_good else None, self.runtime)
            last_good, saved_now = (Path(last_good), True) if last_good else (None, False)
        if self.runtime.is_main:
            write_json(self.run_dir / rundir.HALT, {
                "reason": request.get("reason"), "evidence": request.get("evidence", {}),
                "step": request.get("step", self.step), "last_good_checkpoint": str(last_good) if last_good else None,
                "saved_at_halt": saved_now, "trainer_step": self.step, "gen": self.gen, "written_by": "trainer"})
            rundir.clear_request(self.run_dir)
        if last_good is None:
            how = ("no checkpoint: the state was not finite before the first one; start again in a new --out "
                   "(with a lower --lr, or a smaller train.checkpoint_interval)")
        else:
            kept = (f"the state at step {self.step} saved as {last_good.name}" if saved_now
                    else f"last good checkpoint {last_good.name}")
            how = (f"{kept}; continue with: pretrain launch --out {self.run_dir} --resume (or --set "
                   "supervisor.halt_policy=rollback to skip the batches at fault)")
        self._log(f"halted at step {self.step}: {request.get('reason')}; {how}")
        return HALT_EXIT_CODE

    def _rollback(self, request: dict[str, Any]) -> int | None:
        done = len(read_jsonl(self.run_dir / rundir.ROLLBACKS)) if self.runtime.is_main else 0
        done = distributed.broadcast(done, self.runtime)
        target = self._good_checkpoint(request)
        if done >= self.cfg.supervisor.max_rollbacks or target is None:
            why = (f"max_rollbacks ({self.cfg.supervisor.max_rollbacks}) reached" if target is not None
                   else "no checkpoint to roll back to")
            return self._halt({**request, "evidence": {**request.get("evidence", {}), "rollback_refused": why}})
        first, last = request.get("skip_batches") or [request.get("step", self.step)] * 2
        skipped = sorted({self.batch_of_step[s] for s in range(int(first), int(last) + 1) if s in self.batch_of_step})
        self._make_head(target)
        self._restore(load_checkpoint(target))
        self.sampler.state.skip.extend([b, b] for b in skipped)
        self.finite_since_save = True
        old_gen = self.gen
        if self.runtime.is_main:
            self.gen = rundir.claim_generation(self.run_dir)
            rundir.append(self.run_dir, rundir.ROLLBACKS, {
                "time": time.time(), "reason": request.get("reason"), "request_step": request.get("step"),
                "gen": old_gen, "new_gen": self.gen, "skip_steps": [first, last], "skip_batch_indices": skipped,
                "checkpoint": str(target), "resumed_at_step": self.step, "evidence": request.get("evidence", {})})
            rundir.clear_request(self.run_dir)
        self.gen = distributed.broadcast(self.gen, self.runtime)
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
        batch = torch.from_numpy(rows)
        if self.runtime.device.type == "cuda":
            batch = batch.pin_memory()  # from pageable memory a non_blocking copy would still be synchronous
        batch = batch.to(self.runtime.device, non_blocking=True)
        return list(batch.split(self.cfg.data.micro_batch))

    def run_step(self) -> dict[str, Any]:
        step = self.step + 1
        t0 = time.perf_counter()
        lr = set_rates(self.optimizer, self.step, self.cfg.optim, self.cfg.train.max_steps)
        index = self.sampler.next_index()
        self.batch_of_step[step] = index
        faults = self.faults.in_step(step) if self.faults else None
        loss, grad_norm = train_step(self.wrapped, self.optimizer, self.micro_batches(index), self.runtime,
                                     self.cfg.optim.grad_clip, faults)
        loss, grad_norm = loss.item(), grad_norm.item()
        self.step = step
        self.tokens_seen += self.cfg.train.global_batch_tokens
        if not (math.isfinite(loss) and math.isfinite(grad_norm)):
            self.finite_since_save = False
        dt = self.step_seconds = time.perf_counter() - t0
        if self.faults:
            self.faults.step_done(step, dt)
        tps = self.cfg.train.global_batch_tokens / dt
        return {"gen": self.gen, "step": step, "loss": _finite_or_none(loss), "lr": lr,
                "grad_norm": _finite_or_none(grad_norm), "tokens_per_s": tps,
                "mfu": mfu(self.flops_per_token, tps, self.peak, self.runtime.world_size),
                "time": time.time(), "tokens": self.tokens_seen, "batch": index}

    def validate(self) -> dict[str, float]:
        """Mean loss per language on the first ``data.eval_tokens`` tokens of each validation stream."""
        losses = language_losses(self.wrapped, self.dataset, self.cfg.seq_len, self.cfg.data.eval_tokens,
                                 self.cfg.data.micro_batch, self.runtime)
        self.val_loss = statistics.fmean(losses.values()) if losses else None
        if self.runtime.is_main:
            rundir.append(self.run_dir, rundir.VALIDATION, {"step": self.step, "time": time.time(),
                                                            "val_loss": self.val_loss, "languages": losses})
            tb = self._tensorboard()
            if tb:
                for lang, value in losses.items():
                    tb.add_scalar(f"val/loss_{lang}", value, self.step)
        self._log(f"step {self.step}: val loss " + ", ".join(f"{k} {v:.4f}" for k, v in losses.items()))
        return losses

    def _validate_or_save(self) -> None:
        """Validate; a validation that fails still costs no step: the state is checkpointed (without a
        validation loss) before the error goes on."""
        try:
            self.validate()
        except Exception:
            self.val_loss = None
            if self.step != self.last_saved:
                self.save()
            raise

    def _record(self, record: dict[str, Any], bar: tqdm, pace: _Pace) -> None:
        """Log the step: metrics.jsonl and the heartbeat always; the bar (or, without one, a plain line) and
        TensorBoard at the first step of the fit, every ``train.log_interval`` steps and the last step."""
        rundir.append(self.run_dir, rundir.METRICS, record)
        rundir.write_heartbeat(self.run_dir, self.gen, self.step, os.getpid())
        bar.update(1)
        pace.done, pace.steps, pace.seconds = pace.done + 1, pace.steps + 1, pace.seconds + self.step_seconds
        tc = self.cfg.train
        if pace.done == 1 or self.step % tc.log_interval == 0 or self.step == tc.max_steps:
            if bar.disable:
                self._log(self._progress_line(record, pace))
            else:
                bar.set_postfix(loss=record["loss"], lr=f"{record['lr']:.2e}",
                                tok_s=f"{record['tokens_per_s']:.0f}")
            pace.steps, pace.seconds = 0, 0.0
            tb = self._tensorboard()
            if tb:
                for key in ("loss", "lr", "grad_norm", "tokens_per_s", "mfu"):
                    if record[key] is not None:
                        tb.add_scalar(f"train/{key}", record[key], self.step)

    def _progress_line(self, record: dict[str, Any], pace: _Pace) -> str:
        """``step 10/900: loss 3.2100, lr 1.99e-03, 5,120 tokens/s, MFU 31.2%, 0:04:12 left`` (tokens/s and MFU
        over the steps since the previous line; no MFU where the device's peak is unknown, as on CPU)."""
        tc = self.cfg.train
        loss = "non-finite" if record["loss"] is None else f"{record['loss']:.4f}"
        tokens_per_s = pace.steps * tc.global_batch_tokens / pace.seconds
        line = f"step {self.step}/{tc.max_steps}: loss {loss}, lr {record['lr']:.2e}, {tokens_per_s:,.0f} tokens/s"
        utilisation = mfu(self.flops_per_token, tokens_per_s, self.peak, self.runtime.world_size)
        if utilisation is not None:
            line += f", MFU {utilisation:.1%}"
        elapsed = time.monotonic() - pace.started
        left = elapsed / pace.done * max(tc.max_steps - self.step, 0)
        if tc.time_budget_s:
            left = min(left, max(tc.time_budget_s - elapsed, 0.0))
        return f"{line}, {_clock(left)} left"

    def fit(self, on_step=None, stop: StopRequest | None = None, *, progress: bool = True) -> int:
        """Train to ``train.max_steps`` (or the time budget); return 0, or 3 when the supervisor halted.

        ``on_step(record)`` runs after each step is logged (a supervisor in lockstep waits there).

        ``progress``: a progress bar, drawn only where stderr is a terminal. A bar redraws its line with carriage
        returns, and a log file (a Slurm job's, a redirect) would keep every redraw: there, and with ``progress``
        False, rank 0 writes one plain line (:meth:`_progress_line`) at the first step, every
        ``train.log_interval`` steps and the last step instead.

        ``stop`` is the flag of a `common.signals.deferred_signals` block around the call (``pretrain launch``
        has one): once a SIGINT/SIGTERM set it, the run stops at the next step boundary with a checkpoint of
        that step, as the end of a run does, sets ``stopped_by`` and returns 128 + the signal's number (130,
        143); ``--resume`` then continues exactly, losing no step."""
        tc = self.cfg.train
        self.begin()
        start = time.monotonic()
        pace = _Pace(started=start)
        bar = tqdm(total=tc.max_steps, initial=self.step, unit="step", dynamic_ncols=True,
                   disable=not (progress and self.runtime.is_main and sys.stderr.isatty()), file=sys.stderr)
        try:
            while True:
                code = self._handle_request()  # at every step boundary, the last one included
                if code is not None:
                    return code
                if self.step >= tc.max_steps:
                    break
                if tc.time_budget_s and time.monotonic() - start > tc.time_budget_s:
                    self._log(f"time budget of {tc.time_budget_s:.0f} s spent at step {self.step}")
                    break
                if self.faults:
                    self.faults.before_step(self.step + 1, self._log, stop)
                # Rank 0's request, so that every rank stops at the same boundary.
                self.stopped_by = distributed.broadcast(stop.signum, self.runtime) if stop is not None else None
                if self.stopped_by:
                    break
                record = self.run_step()
                if self.runtime.is_main:
                    self._record(record, bar, pace)
                if on_step:
                    on_step(record)
                at_checkpoint = self.step % tc.checkpoint_interval == 0
                if self.step % tc.eval_interval == 0 or at_checkpoint:
                    self._validate_or_save()
                if at_checkpoint:
                    self.save()
            if self.step != self.last_saved:
                if self.val_loss is None or self.step % tc.eval_interval:
                    self._validate_or_save()
                self.save()
            return 128 + self.stopped_by if self.stopped_by else 0
        finally:
            bar.close()
            if self._tb:
                self._tb.close()
