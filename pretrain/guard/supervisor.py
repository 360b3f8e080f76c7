"""The run supervisor: a separate process with the authority to halt a training run.

It reads only what the trainer writes (the files, the generation protocol and the halt protocol are
`pretrain.train.rundir`'s): ``RUN/metrics.jsonl`` and ``RUN/heartbeat.json``, and decides. The decisions are pure functions over a list of metric dicts
(:func:`detect`, :func:`scan`, :func:`check_heartbeat`) so they are tested without any process;
:class:`Supervisor` applies them to what is new in the run directory at each :meth:`Supervisor.poll`, and
:func:`supervise` is the thin loop around that.

Usage: ``python -m pretrain.guard.supervisor --run RUN --trainer-pid PID --generation GEN`` (``pretrain launch``
starts it, :func:`start`); its settings are the ``supervisor`` section of ``RUN/config.json``
(:class:`pretrain.config.SupervisorConfig`, set with ``pretrain launch --set supervisor.NAME=VALUE``).
"""

from __future__ import annotations

import argparse
import json
import math
import os
import signal
import statistics
import subprocess
import sys
import time
from collections.abc import Callable
from dataclasses import asdict, dataclass, field
from pathlib import Path
from typing import Any

from common import cli as clihelp
from common import paths
from common.errors import InputError
from common.fileio import write_json
from pretrain.config import SupervisorConfig, load_config
from pretrain.train import rundir

# Faults a rollback can cure: they come from the data or the optimiser state, so replaying from the last
# good checkpoint without the offending batches is worth a try. A slow or hung trainer is not cured by that.
ROLLBACK_REASONS = ("nonfinite_loss", "nonfinite_grad_norm", "loss_spike", "grad_norm_explosion")


@dataclass
class Verdict:
    """A decision to stop: why, at which step, the numbers that justify it, and the batches to blame."""

    reason: str
    step: int
    evidence: dict[str, Any]
    first_step: int  # first step of the offending range (== step unless the fault lasted several steps)

    def skip_batches(self, cfg: SupervisorConfig) -> list[int]:
        return [max(self.first_step - cfg.rollback_skip_before, 0), self.step]


@dataclass
class SupervisorState:
    """What the loop remembers between polls."""

    records: list[dict[str, Any]] = field(default_factory=list)
    rollbacks: int = 0
    started_at: float = field(default_factory=time.time)
    newest_gen: int = 0  # the newest trainer generation seen in the metrics
    requested: set[int] = field(default_factory=set)  # generations already asked to halt or roll back


def as_float(value: Any) -> float:
    """A metric value as a float; null and unparsable values (how strict JSON writers log NaN) become NaN."""
    if isinstance(value, bool) or value is None:
        return math.nan
    try:
        return float(value)
    except (TypeError, ValueError):
        return math.nan


def _finite(values: list[float]) -> list[float]:
    return [v for v in values if math.isfinite(v)]


def check_nonfinite(records: list[dict[str, Any]]) -> Verdict | None:
    """NaN or Inf in the newest step's loss or grad norm."""
    rec = records[-1]
    step = int(rec["step"])
    for key, reason in (("loss", "nonfinite_loss"), ("grad_norm", "nonfinite_grad_norm")):
        if key in rec and not math.isfinite(as_float(rec[key])):
            value = rec[key]
            return Verdict(reason, step, {key: "null" if value is None else str(value)}, step)
    return None


def _streak(records: list[dict[str, Any]], cfg: SupervisorConfig, key: str
            ) -> tuple[list[dict[str, Any]], list[float], list[float]] | None:
    """The newest ``spike_patience`` steps, their ``key`` values, and the finite ``key`` values of the ``window``
    steps before them (the yardstick: taken before the streak, so that a lasting fault does not drag its own
    reference along); None while either is too short to judge."""
    n = cfg.spike_patience
    streak = records[-n:]
    reference = _finite([as_float(r.get(key)) for r in records[:-n][-cfg.window:]])
    if len(streak) < n or len(reference) < cfg.min_history:
        return None
    return streak, [as_float(r.get(key)) for r in streak], reference


def check_loss_spike(records: list[dict[str, Any]], cfg: SupervisorConfig) -> Verdict | None:
    """A diverging loss: each of the newest ``spike_patience`` steps at least ``spike_factor`` x the median loss
    of the ``window`` steps before them (LLM Foundry's ``KillLossSpike`` rule: an outlier is a loss twice the
    running level, and only a streak of them stops a run).

    One outlier is not enough: with small batches a single batch's loss swings widely while the run learns
    (a healthy `tiny` run logged 6.04 at step 48 between losses of 2 to 4), and a loss that comes back at
    the next step has cost nothing a halt would save. The median, where LLM Foundry takes the mean: those
    single outliers inflate a mean (2.5 against a median of 1.8 over steps 50-149 of a `tiny` run with
    256-token batches), which then hides a loss that has really doubled.
    """
    found = _streak(records, cfg, "loss")
    if found is None:
        return None
    streak, losses, reference = found
    median = statistics.median(reference)
    if median <= 0 or not all(loss >= cfg.spike_factor * median for loss in losses):
        return None
    return Verdict("loss_spike", int(streak[-1]["step"]), {
        "losses": losses, "window_median_loss": median, "threshold_factor": cfg.spike_factor,
        "patience": cfg.spike_patience, "first_step": int(streak[0]["step"]),
        "window_steps": [int(records[:-len(streak)][-cfg.window:][0]["step"]), int(streak[0]["step"]) - 1],
    }, int(streak[0]["step"]))


def check_grad_explosion(records: list[dict[str, Any]], cfg: SupervisorConfig) -> Verdict | None:
    """The newest grad norm above ``grad_norm_max`` (a ceiling the user set), or each of the newest
    ``spike_patience`` grad norms above ``grad_explode_factor`` x the median of the ``window`` steps before them.

    One excursion is not a verdict: clipping bounds the update it makes, and healthy small-batch runs show
    them (41.5 against a median of 1.05 at step 40 of a `tiny` run whose loss kept falling). OLMo-core's
    skip-step optimizers skip such an update and go on; none of the trainers we follow stops a run for one.
    """
    rec = records[-1]
    if "grad_norm" not in rec:
        return None
    norm = as_float(rec["grad_norm"])
    step = int(rec["step"])
    if cfg.grad_norm_max is not None and norm > cfg.grad_norm_max:
        return Verdict("grad_norm_explosion", step, {"grad_norm": norm, "grad_norm_max": cfg.grad_norm_max}, step)
    found = _streak(records, cfg, "grad_norm")
    if found is None:
        return None
    streak, norms, reference = found
    median = statistics.median(reference)
    if median <= 0 or not all(n > cfg.grad_explode_factor * median for n in norms):
        return None
    return Verdict("grad_norm_explosion", step, {
        "grad_norms": norms, "window_median": median, "ratio": min(norms) / median,
        "threshold_factor": cfg.grad_explode_factor, "patience": cfg.spike_patience,
        "first_step": int(streak[0]["step"]),
    }, int(streak[0]["step"]))


def check_throughput(records: list[dict[str, Any]], cfg: SupervisorConfig) -> Verdict | None:
    """Tokens/s below ``throughput_fraction`` of the run's own median for ``throughput_patience`` steps.

    The median is over every step after the warm-up and before the slow streak, so a collapse that
    lasts does not drag its own yardstick down with it.
    """
    streak = records[-cfg.throughput_patience:]
    reference = _finite([as_float(r.get("tokens_per_s"))
                         for r in records[cfg.throughput_warmup:len(records) - cfg.throughput_patience]])
    if len(streak) < cfg.throughput_patience or len(reference) < cfg.min_history:
        return None
    median = statistics.median(reference)
    speeds = [as_float(r.get("tokens_per_s")) for r in streak]
    if median <= 0 or not all(s < cfg.throughput_fraction * median for s in speeds):
        return None
    return Verdict("throughput_collapse", int(streak[-1]["step"]), {
        "tokens_per_s": speeds, "run_median_tokens_per_s": median,
        "threshold_fraction": cfg.throughput_fraction,
    }, int(streak[0]["step"]))


def detect(records: list[dict[str, Any]], cfg: SupervisorConfig) -> Verdict | None:
    """Judge the newest step of ``records`` (the run's steps in order) against the ones before it."""
    if not records:
        return None
    # A loss spike usually drags the gradient norm up with it; the loss is the symptom to report.
    return (check_nonfinite(records) or check_loss_spike(records, cfg)
            or check_grad_explosion(records, cfg) or check_throughput(records, cfg))


def scan(records: list[dict[str, Any]], cfg: SupervisorConfig) -> Verdict | None:
    """The first verdict over a whole metric history, as the live supervisor would have reached it."""
    for i in range(1, len(records) + 1):
        verdict = detect(records[:i], cfg)
        if verdict is not None:
            return verdict
    return None


def check_heartbeat(heartbeat: dict[str, Any] | None, now: float, started_at: float,
                    timeout_s: float) -> Verdict | None:
    """A trainer silent for longer than ``timeout_s``. Before its first beat, the clock starts with us."""
    beat_time = as_float(heartbeat.get("time")) if heartbeat else math.nan
    last = max(beat_time, started_at) if math.isfinite(beat_time) else started_at
    silent = now - last
    if silent <= timeout_s:
        return None
    step = int(heartbeat.get("step", -1)) if heartbeat else -1
    return Verdict("heartbeat_stalled", step, {
        "seconds_silent": round(silent, 3), "timeout_s": timeout_s,
        "last_heartbeat": heartbeat,
    }, step)


def add_record(records: list[dict[str, Any]], record: dict[str, Any]) -> None:
    """Append a step record; a step at or before the newest one means the trainer rolled back, so the
    abandoned steps leave the history (the statistics describe the trajectory the run is on now)."""
    step = int(record["step"])
    while records and int(records[-1]["step"]) >= step:
        records.pop()
    records.append(record)


class MetricsTail:
    """Reads the lines appended to metrics.jsonl since the last call; holds back a half-written line."""

    def __init__(self, path: Path) -> None:
        self.path = path
        self.offset = 0
        self.line_no = 0
        self.partial = b""

    def read(self) -> tuple[list[dict[str, Any]], list[str]]:
        """New step records, and a warning for each line that is not a step record."""
        try:
            with open(self.path, "rb") as f:
                f.seek(self.offset)
                chunk = f.read()
        except FileNotFoundError:
            return [], []
        self.offset += len(chunk)
        *lines, self.partial = (self.partial + chunk).split(b"\n")
        records, warnings = [], []
        for raw in lines:
            self.line_no += 1
            if not raw.strip():
                continue
            try:
                rec = json.loads(raw)
            except json.JSONDecodeError as e:
                warnings.append(f"{self.path}:{self.line_no}: not valid JSON ({e.msg}); line ignored")
                continue
            if isinstance(rec, dict) and "step" in rec and "loss" in rec:
                records.append(rec)
        return records, warnings


def log_event(run_dir: Path, event: str, **data: Any) -> None:
    rundir.append(run_dir, rundir.SUPERVISOR_LOG, {"time": time.time(), "event": event, **data})


def pid_alive(pid: int) -> bool:
    """Whether ``pid`` still runs; a zombie (exited, not yet reaped by its parent) counts as gone."""
    try:
        os.kill(pid, 0)
    except ProcessLookupError:
        return False
    except PermissionError:
        return True
    try:
        stat = Path(f"/proc/{pid}/stat").read_text()
    except OSError:
        return True  # no procfs (macOS): trust kill(0)
    return stat.rsplit(")", 1)[1].split()[0] != "Z"


def terminate(pid: int, grace_s: float) -> str:
    """SIGTERM, then SIGKILL if ``pid`` still runs after ``grace_s``; return the signal that ended it."""
    for sig, wait in ((signal.SIGTERM, grace_s), (signal.SIGKILL, 10.0)):
        try:
            os.kill(pid, sig)
        except ProcessLookupError:
            return sig.name
        deadline = time.monotonic() + wait
        while time.monotonic() < deadline:
            if not pid_alive(pid):
                return sig.name
            time.sleep(0.05)
    return "unkillable"


def _last_good_checkpoint(run_dir: Path) -> str | None:
    from pretrain.train.checkpoint import latest_checkpoint

    path = latest_checkpoint(run_dir)
    return None if path is None else str(path)


def request_halt(run_dir: Path, verdict: Verdict, state: SupervisorState, cfg: SupervisorConfig, gen: int) -> str:
    """Write halt_request.json for ``verdict``, reached on generation ``gen``; return the action asked for."""
    rollback = (cfg.halt_policy == "rollback" and verdict.reason in ROLLBACK_REASONS
                and state.rollbacks < cfg.max_rollbacks)
    action = "rollback" if rollback else "halt"
    if rollback:
        state.rollbacks += 1
    state.requested.add(gen)
    # first_step: the trainer keeps (or rolls back to) a checkpoint from before it, never one the fault made.
    request = {"gen": gen, "reason": verdict.reason, "evidence": verdict.evidence, "step": verdict.step,
               "first_step": verdict.first_step, "action": action, "skip_batches": verdict.skip_batches(cfg)}
    if cfg.halt_policy == "rollback" and not rollback and verdict.reason in ROLLBACK_REASONS:
        request["evidence"] = {**verdict.evidence, "rollbacks_exhausted": state.rollbacks}
    rundir.write_request(run_dir, request)
    log_event(run_dir, "request", **request, rollbacks=state.rollbacks)
    return action


def halt_stalled_trainer(run_dir: Path, pid: int, verdict: Verdict, cfg: SupervisorConfig) -> None:
    """Write halt.json in place of a trainer that no longer answers, then end it.

    halt.json comes first so that whoever waits on the trainer's exit finds it; how the trainer ended
    is logged to supervisor.jsonl.
    """
    halt = {"reason": verdict.reason,
            "evidence": {**verdict.evidence, "action": f"SIGTERM, then SIGKILL after {cfg.grace_s} s"},
            "step": verdict.step, "last_good_checkpoint": _last_good_checkpoint(run_dir),
            "written_by": "supervisor"}
    write_json(run_dir / rundir.HALT, halt)
    log_event(run_dir, "terminated", **halt, ended_by=terminate(pid, cfg.grace_s))


class Supervisor:
    """The supervisor of one trainer process: :meth:`poll` judges what is new in the run directory.

    ``generation`` is the trainer's first generation; records of earlier ones (the run before a
    ``--resume``) are history, never news.
    """

    def __init__(self, run_dir: str | os.PathLike, trainer_pid: int, cfg: SupervisorConfig, generation: int):
        self.run_dir, self.trainer_pid, self.cfg = Path(run_dir), trainer_pid, cfg
        self.first_gen = generation
        self.state = SupervisorState()
        self.tail = MetricsTail(self.run_dir / rundir.METRICS)
        self.acked: tuple[int, int] | None = None

    def judge(self, records: list[dict[str, Any]]) -> None:
        """Add step records in the order the trainer logged them; judge each one of a generation that has not
        been asked anything yet; acknowledge the last one."""
        for rec in records:
            gen = int(rec.get("gen", 0))
            add_record(self.state.records, rec)
            self.state.newest_gen = max(self.state.newest_gen, gen)
            if gen < max(self.first_gen, self.state.newest_gen) or gen in self.state.requested:
                continue  # history, or steps logged after a request and before the trainer's answer
            verdict = detect(self.state.records, self.cfg)
            if verdict is not None:
                request_halt(self.run_dir, verdict, self.state, self.cfg, gen)
        if records:
            last = (int(records[-1].get("gen", 0)), int(records[-1]["step"]))
            if last != self.acked:
                rundir.write_ack(self.run_dir, *last)
                self.acked = last

    def poll(self) -> int | None:
        """Judge the new steps and the heartbeat; 3 if the trainer had to be ended, else None."""
        new, warnings = self.tail.read()
        for w in warnings:
            log_event(self.run_dir, "warning", message=w)
        self.judge(new)
        stalled = check_heartbeat(rundir.read_small_json(self.run_dir / rundir.HEARTBEAT), time.time(),
                                  self.state.started_at, self.cfg.heartbeat_timeout_s)
        if stalled is not None:
            halt_stalled_trainer(self.run_dir, self.trainer_pid, stalled, self.cfg)
            return 3
        return None


def supervise(run_dir: str | os.PathLike, trainer_pid: int, cfg: SupervisorConfig, generation: int) -> int:
    """Watch the run until the trainer exits; return 0, or 3 if the supervisor had to end the trainer."""
    sup = Supervisor(run_dir, trainer_pid, cfg, generation)
    log_event(sup.run_dir, "start", trainer_pid=trainer_pid, generation=generation, config=asdict(cfg))
    while pid_alive(trainer_pid):
        code = sup.poll()
        if code is not None:
            return code
        time.sleep(cfg.poll_s)
    sup.judge(sup.tail.read()[0])  # what the trainer logged after the last poll, for the record
    log_event(sup.run_dir, "trainer_exited", trainer_pid=trainer_pid, steps_seen=len(sup.state.records),
              rollbacks=sup.state.rollbacks)
    return 0


def command(run_dir: str | os.PathLike, trainer_pid: int, generation: int) -> list[str]:
    """The argv of a supervisor for the trainer ``trainer_pid`` of ``run_dir``; its settings are the supervisor
    section of ``RUN/config.json``, which the trainer has written by then (`pretrain.train.rundir`)."""
    return [sys.executable, "-m", "pretrain.guard.supervisor", "--run", str(run_dir), "--trainer-pid",
            str(trainer_pid), "--generation", str(generation)]


def start(run_dir: Path, generation: int) -> subprocess.Popen:
    """A supervisor beside this trainer process, in a session of its own, so that a Ctrl-C at the terminal
    reaches only the trainer, which stops the supervisor itself once its checkpoint is saved; after a kill -9
    of the trainer the supervisor sees it gone at its next poll and exits."""
    return subprocess.Popen(command(run_dir, os.getpid(), generation), start_new_session=True)


def stop(proc: subprocess.Popen | None) -> None:
    if proc is None or proc.poll() is not None:
        return
    proc.terminate()
    try:
        proc.wait(timeout=10)
    except subprocess.TimeoutExpired:
        proc.kill()
        proc.wait()


def lockstep(run_dir: Path, proc: subprocess.Popen) -> Callable[[dict], None]:
    """An ``on_step`` for the trainer that waits until the supervisor has judged the step just logged."""

    def wait(record: dict) -> None:
        while not rundir.acked(run_dir, record["gen"], record["step"]):
            if proc.poll() is not None:
                raise RuntimeError(f"the supervisor exited (code {proc.returncode}) before judging step "
                                   f"{record['step']}; see {run_dir / rundir.SUPERVISOR_LOG}")
            time.sleep(0.01)

    return wait


def settings(run_dir: Path) -> SupervisorConfig:
    """The supervisor section of ``RUN/config.json``."""
    path = Path(run_dir) / rundir.CONFIG
    if not path.is_file():
        raise InputError(f"{path}: no such file (the trainer writes it before it starts the supervisor)")
    return load_config(path).supervisor


def build_parser() -> argparse.ArgumentParser:
    parser = clihelp.parser("python -m pretrain.guard.supervisor", __doc__.split("\n\n")[0])
    # The run folder `pretrain launch` checked and made (an output folder: the supervisor adds its log there).
    parser.add_argument("--run", required=True, type=paths.output_dir,
                        help="the run directory the trainer writes (settings: its config.json)")
    parser.add_argument("--trainer-pid", type=int, required=True, help="the trainer's process id")
    parser.add_argument("--generation", type=int, required=True,
                        help="the trainer's generation (pretrain.train.rundir); earlier ones are history")
    return parser


def main(argv: list[str] | None = None) -> int:
    parser = build_parser()
    args = parser.parse_args(argv)
    run_dir = Path(args.run)
    if not run_dir.is_dir():
        parser.error(f"--run {run_dir}: no such directory")
    try:
        cfg = settings(run_dir)
    except InputError as e:
        parser.error(str(e))
    return supervise(run_dir, args.trainer_pid, cfg, args.generation)


if __name__ == "__main__":
    raise SystemExit(main())
