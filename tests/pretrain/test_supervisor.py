"""The supervisor: its detectors on metric histories, its process loop, and faults injected into real runs."""

from __future__ import annotations

import json
import math
import subprocess
import sys
import time
from pathlib import Path

import numpy as np
import pytest

from pretrain import supervisor as sup
from pretrain.supervisor import SupervisorConfig

CFG = SupervisorConfig(window=50, min_history=10, throughput_patience=3, throughput_warmup=2)


def healthy_run(steps: int = 120, seed: int = 0) -> list[dict]:
    """A plausible clean trajectory: decaying noisy loss, noisy grad norm and throughput."""
    rng = np.random.default_rng(seed)
    return [{
        "step": t,
        "loss": float(3.0 + 5.0 * math.exp(-t / 15) + rng.normal(0, 0.03)),
        "lr": 1e-3,
        "grad_norm": float(1.0 + 2.0 * math.exp(-t / 10) + abs(rng.normal(0, 0.1))),
        "tokens_per_s": float(1000.0 * (0.5 if t < 2 else 1.0) + rng.normal(0, 30)),
        "mfu": 0.4,
        "time": 1000.0 + t,
    } for t in range(steps)]


@pytest.mark.parametrize("seed", range(5))
def test_healthy_runs_are_left_alone(seed):
    assert sup.scan(healthy_run(seed=seed), CFG) is None


@pytest.mark.parametrize("key,value,reason", [
    ("loss", float("nan"), "nonfinite_loss"),
    ("loss", float("inf"), "nonfinite_loss"),
    ("loss", None, "nonfinite_loss"),  # strict JSON writers log NaN as null
    ("grad_norm", float("nan"), "nonfinite_grad_norm"),
    ("grad_norm", float("-inf"), "nonfinite_grad_norm"),
])
def test_nonfinite_values_halt_at_their_step(key, value, reason):
    records = healthy_run()
    records[3][key] = value  # early: no history is needed to judge a NaN
    verdict = sup.scan(records, CFG)
    assert verdict is not None and verdict.reason == reason and verdict.step == 3
    assert verdict.evidence[key] == str(value)


def test_loss_spike_is_caught_with_its_z_score():
    records = healthy_run()
    records[80]["loss"] += 1.0
    verdict = sup.scan(records, CFG)
    assert verdict.reason == "loss_spike" and verdict.step == 80
    assert verdict.evidence["z"] > CFG.spike_z
    assert verdict.evidence["window_steps"] == [30, 79]
    # A spike below the threshold passes; the threshold is the user's.
    lenient = SupervisorConfig(**{**CFG.__dict__, "spike_z": verdict.evidence["z"] + 1})
    assert sup.scan(records, lenient) is None


def test_loss_falling_fast_is_not_a_spike():
    records = healthy_run()
    records[60]["loss"] -= 2.0
    assert sup.scan(records, CFG) is None


def test_grad_norm_explosion_against_median_and_absolute_ceiling():
    records = healthy_run()
    records[70]["grad_norm"] *= 25
    verdict = sup.scan(records, CFG)
    assert verdict.reason == "grad_norm_explosion" and verdict.step == 70
    assert verdict.evidence["ratio"] > CFG.grad_explode_factor
    capped = SupervisorConfig(**{**CFG.__dict__, "grad_norm_max": 2.5})
    verdict = sup.scan(healthy_run(), capped)  # the early grad norms (about 3) exceed the ceiling
    assert verdict.reason == "grad_norm_explosion" and verdict.step == 0


def test_throughput_collapse_needs_a_streak():
    records = healthy_run()
    records[50]["tokens_per_s"] = 10.0  # one hiccup (an eval, a checkpoint) is not a collapse
    assert sup.scan(records, CFG) is None
    for r in records[90:]:
        r["tokens_per_s"] = 100.0
    verdict = sup.scan(records, CFG)
    assert verdict.reason == "throughput_collapse"
    assert (verdict.first_step, verdict.step) == (90, 92)
    assert 900 < verdict.evidence["run_median_tokens_per_s"] < 1100


def test_heartbeat_timeout_counts_from_start_before_the_first_beat():
    assert sup.check_heartbeat(None, now=105.0, started_at=100.0, timeout_s=10) is None
    verdict = sup.check_heartbeat(None, now=111.0, started_at=100.0, timeout_s=10)
    assert verdict.reason == "heartbeat_stalled" and verdict.evidence["seconds_silent"] == 11.0
    beat = {"step": 7, "time": 108.0, "pid": 1}
    assert sup.check_heartbeat(beat, now=115.0, started_at=100.0, timeout_s=10) is None
    verdict = sup.check_heartbeat(beat, now=119.0, started_at=100.0, timeout_s=10)
    assert verdict.step == 7 and verdict.evidence["last_heartbeat"] == beat
    # A heartbeat left over from before a resume does not count against the new trainer.
    assert sup.check_heartbeat({"step": 1, "time": 0.0}, now=105.0, started_at=100.0, timeout_s=10) is None


def test_rollback_replaces_abandoned_steps():
    records: list[dict] = []
    for rec in healthy_run(20):
        sup.add_record(records, rec)
    for rec in healthy_run(15, seed=1)[12:]:  # the trainer went back to step 12
        sup.add_record(records, rec)
    assert [r["step"] for r in records] == list(range(15))


def test_metrics_tail_holds_back_a_half_written_line(tmp_path):
    path = tmp_path / "metrics.jsonl"
    tail = sup.MetricsTail(path)
    assert tail.read() == ([], [])
    path.write_text('{"step": 0, "loss": 5.0}\n{"step": 1, "lo')
    records, warnings = tail.read()
    assert [r["step"] for r in records] == [0] and warnings == []
    with open(path, "a") as f:
        f.write('ss": 4.0}\nnot json\n{"event": "eval"}\n')
    records, warnings = tail.read()
    assert [r["step"] for r in records] == [1]
    assert warnings == [f"{path}:3: not valid JSON (Expecting value); line ignored"]


def test_config_rejects_bad_policy():
    with pytest.raises(ValueError, match="halt_policy"):
        SupervisorConfig(halt_policy="ignore")


def test_command_round_trips_through_the_cli_parser(tmp_path):
    cfg = SupervisorConfig(window=7, spike_z=3.5, grad_norm_max=9.0, halt_policy="rollback", max_rollbacks=2)
    argv = sup.command(tmp_path, 123, cfg)
    assert argv[:3] == [sys.executable, "-m", "pretrain.supervisor"]
    import argparse

    parser = argparse.ArgumentParser()
    parser.add_argument("--run")
    parser.add_argument("--trainer-pid", type=int)
    sup.add_arguments(parser)
    args = parser.parse_args(argv[3:])
    assert args.trainer_pid == 123
    assert SupervisorConfig(**{k: getattr(args, k) for k in cfg.__dict__}) == cfg


def _write_metrics(run: Path, records: list[dict]) -> None:
    with open(run / sup.METRICS_NAME, "a") as f:
        for r in records:
            f.write(json.dumps(r) + "\n")


def _events(run: Path) -> list[dict]:
    return [json.loads(line) for line in (run / sup.LOG_NAME).read_text().splitlines()]


def test_loop_requests_a_halt_and_exits_with_the_trainer(tmp_path):
    """The real process loop against a stand-in trainer process (the real trainer's tests are below)."""
    trainer = subprocess.Popen([sys.executable, "-c", "import time; time.sleep(30)"])
    try:
        records = healthy_run(40)
        records[30]["loss"] = float("nan")
        _write_metrics(tmp_path, records)
        cfg = SupervisorConfig(**{**CFG.__dict__, "poll_s": 0.05, "heartbeat_timeout_s": 60})
        proc = subprocess.Popen(sup.command(tmp_path, trainer.pid, cfg))
        deadline = time.monotonic() + 20
        while not (tmp_path / sup.HALT_REQUEST_NAME).exists() and time.monotonic() < deadline:
            time.sleep(0.05)
        request = json.loads((tmp_path / sup.HALT_REQUEST_NAME).read_text())
        assert request["reason"] == "nonfinite_loss" and request["step"] == 30
        assert request["action"] == "halt" and request["skip_batches"] == [30, 30]
        assert proc.poll() is None  # it waits for the trainer to act
    finally:
        trainer.kill()
        trainer.wait()
    assert proc.wait(timeout=20) == 0
    assert [e["event"] for e in _events(tmp_path)] == ["start", "request", "trainer_exited"]


def test_rollback_policy_gives_up_after_max_rollbacks(tmp_path):
    cfg = SupervisorConfig(**{**CFG.__dict__, "halt_policy": "rollback", "max_rollbacks": 1,
                              "rollback_skip_before": 2})
    state = sup.SupervisorState()
    verdict = sup.Verdict("loss_spike", 40, {"z": 9.0}, 40)
    assert sup.request_halt(tmp_path, verdict, state, cfg) == "rollback"
    assert json.loads((tmp_path / sup.HALT_REQUEST_NAME).read_text())["skip_batches"] == [38, 40]
    assert sup.request_halt(tmp_path, verdict, state, cfg) == "halt"
    request = json.loads((tmp_path / sup.HALT_REQUEST_NAME).read_text())
    assert request["evidence"]["rollbacks_exhausted"] == 1
    # A slow trainer is never rolled back: replaying the data does not make it faster.
    slow = sup.Verdict("throughput_collapse", 50, {}, 48)
    assert sup.request_halt(tmp_path, slow, sup.SupervisorState(), cfg) == "halt"
