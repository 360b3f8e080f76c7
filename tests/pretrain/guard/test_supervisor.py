"""The supervisor: its detectors on metric histories, its process loop, and faults injected into real runs."""

from __future__ import annotations

import contextlib
import hashlib
import json
import math
import signal
import subprocess
import sys
import time
from dataclasses import dataclass
from pathlib import Path

import numpy as np
import pytest
import torch

from common.fileio import write_json
from corpus.read.normalize import normalize
from corpus.shards.format import Manifest, ShardInfo, TokenizerInfo, write_shard
from fertility.text import iter_documents
from pretrain import cli
from pretrain.config import SupervisorConfig, preset
from pretrain.guard import supervisor as sup
from pretrain.train import rundir
from pretrain.train.checkpoint import latest_checkpoint, load_checkpoint, step_checkpoints

pytestmark = pytest.mark.usefixtures("one_torch_thread")


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
    assert verdict.evidence[key] == ("null" if value is None else str(value))


# The first 48 steps (loss, grad norm) of a healthy run: `pretrain launch --config tiny --global-batch-tokens 512
# --micro-batch 4` on the sample text (GPT-2 ids). Its small batches make single losses swing (6.04 at step 48
# between 2 and 4), and a z-score against the window's trend halted it there.
HEALTHY_TINY = [
    (10.853, 9.49), (10.716, 8.94), (10.365, 8.21), (10.113, 5.71), (9.896, 4.69), (10.054, 3.17), (9.679, 4.07),
    (9.576, 4.11), (9.448, 4.23), (9.325, 4.15), (9.139, 4.17), (8.97, 4.15), (8.809, 4.23), (9.156, 3.74),
    (8.37, 4.28), (8.165, 4.68), (7.929, 4.16), (7.671, 4.12), (8.154, 3.18), (7.115, 4.13), (7.683, 3.03),
    (6.528, 4.01), (6.188, 4.04), (6.888, 3.13), (6.598, 3.03), (5.113, 4.09), (5.958, 2.95), (4.354, 3.75),
    (4.121, 3.55), (6.713, 1.43), (3.511, 3.05), (4.865, 1.99), (3.117, 2.92), (4.627, 6.04), (4.637, 2.25),
    (3.038, 14.62), (4.383, 3.61), (4.113, 2.68), (2.476, 1.25), (2.326, 1.76), (2.438, 4.42), (2.204, 1.54),
    (2.153, 1.25), (2.116, 1.46), (3.928, 1.68), (4.194, 3.61), (1.982, 2.83), (6.043, 4.78),
]


def test_a_healthy_small_batch_run_is_not_halted_by_its_noise():
    records = [{"step": i, "loss": loss, "grad_norm": norm} for i, (loss, norm) in enumerate(HEALTHY_TINY, 1)]
    assert sup.scan(records, SupervisorConfig()) is None


def test_one_grad_norm_excursion_while_the_loss_falls_is_not_a_verdict():
    """The finding: 41.5 against a median of 1.05 at step 40, the loss still falling, halted the run at once."""
    records = healthy_run()
    records[40]["grad_norm"] = 41.5
    assert sup.scan(records, SupervisorConfig()) is None
    assert sup.scan(records, CFG) is None


def test_one_loss_outlier_is_not_a_verdict():
    for bump in (lambda x: x + 1.0, lambda x: x * 50):
        records = healthy_run()
        records[80]["loss"] = bump(records[80]["loss"])
        assert sup.scan(records, CFG) is None


def test_a_diverging_loss_is_caught_after_its_streak():
    records = healthy_run()
    for r in records[80:80 + CFG.spike_patience]:
        r["loss"] *= 3
    verdict = sup.scan(records, CFG)
    assert verdict.reason == "loss_spike" and (verdict.first_step, verdict.step) == (80, 84)
    assert verdict.evidence["window_steps"] == [30, 79] and verdict.evidence["patience"] == CFG.spike_patience
    assert min(verdict.evidence["losses"]) >= CFG.spike_factor * verdict.evidence["window_median_loss"]
    assert verdict.skip_batches(CFG) == [80, 84]  # a rollback skips every batch of the streak
    records[84]["loss"] /= 3  # one step short of the streak: the run goes on
    assert sup.scan(records, CFG) is None


def test_loss_falling_fast_is_not_a_spike():
    records = healthy_run()
    records[60]["loss"] -= 2.0
    assert sup.scan(records, CFG) is None


def test_grad_norm_explosion_needs_a_streak_or_the_absolute_ceiling():
    records = healthy_run()
    for r in records[70:70 + CFG.spike_patience]:
        r["grad_norm"] *= 30
    verdict = sup.scan(records, CFG)
    assert verdict.reason == "grad_norm_explosion" and (verdict.first_step, verdict.step) == (70, 74)
    assert verdict.evidence["ratio"] > CFG.grad_explode_factor
    capped = SupervisorConfig(**{**CFG.__dict__, "grad_norm_max": 2.5})
    verdict = sup.scan(healthy_run(), capped)  # the early grad norms (about 3) exceed the ceiling
    assert verdict.reason == "grad_norm_explosion" and verdict.step == 0


def test_a_config_naming_the_retired_z_test_settings_still_loads(tmp_path):
    """A run written before the streak rule (supervisor.spike_z, spike_std_floor) can still be resumed."""
    from pretrain.config import load_config

    raw = preset("tiny", 300).to_dict()
    raw["supervisor"].update(spike_z=8.0, spike_std_floor=0.01)
    write_json(tmp_path / "config.json", raw)
    assert load_config(tmp_path / "config.json").supervisor == SupervisorConfig()


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


def _write_settings(run: Path, cfg: SupervisorConfig) -> None:
    """A RUN/config.json whose supervisor section is ``cfg`` (what the trainer writes before starting it)."""
    run_cfg = preset("tiny", 300)
    run_cfg.supervisor = cfg
    write_json(run / rundir.CONFIG, run_cfg.to_dict())


def test_the_supervisor_takes_its_settings_from_the_runs_config_not_argv(tmp_path):
    cfg = SupervisorConfig(window=7, spike_factor=3.5, grad_norm_max=9.0, halt_policy="rollback", max_rollbacks=2)
    _write_settings(tmp_path, cfg)
    assert sup.command(tmp_path, 123, 4) == [sys.executable, "-m", "pretrain.guard.supervisor", "--run",
                                             str(tmp_path), "--trainer-pid", "123", "--generation", "4"]
    assert sup.settings(tmp_path) == cfg


def test_a_run_config_without_supervisor_settings_is_refused_in_one_line(tmp_path, capsys):
    with pytest.raises(SystemExit) as e:
        sup.main(["--run", str(tmp_path), "--trainer-pid", "1", "--generation", "1"])
    assert e.value.code == 2
    err = capsys.readouterr().err.strip().splitlines()
    assert len(err) == 1 and rundir.CONFIG in err[0]


def _write_metrics(run: Path, records: list[dict]) -> None:
    with open(run / rundir.METRICS, "a") as f:
        for r in records:
            f.write(json.dumps(r) + "\n")


def _events(run: Path) -> list[dict]:
    return [json.loads(line) for line in (run / rundir.SUPERVISOR_LOG).read_text().splitlines()]


def test_loop_requests_a_halt_and_exits_with_the_trainer(tmp_path):
    """The real process loop against a stand-in trainer process (the real trainer's tests are below)."""
    trainer = subprocess.Popen([sys.executable, "-c", "import time; time.sleep(30)"])
    try:
        records = healthy_run(40)
        records[30]["loss"] = float("nan")
        for r in records:
            r["gen"] = 1
        _write_metrics(tmp_path, records)
        _write_settings(tmp_path, SupervisorConfig(**{**CFG.__dict__, "poll_s": 0.05, "heartbeat_timeout_s": 60}))
        proc = subprocess.Popen(sup.command(tmp_path, trainer.pid, 1))
        wait_for_ack(tmp_path, proc, 1, 39)
        request = json.loads((tmp_path / rundir.HALT_REQUEST).read_text())
        assert request["reason"] == "nonfinite_loss" and request["step"] == 30 and request["gen"] == 1
        assert request["action"] == "halt" and request["skip_batches"] == [30, 30]
        assert proc.poll() is None  # it waits for the trainer to act
    finally:
        trainer.kill()
        trainer.wait()
    assert proc.wait(timeout=20) == 0
    assert [e["event"] for e in _events(tmp_path)] == ["start", "request", "trainer_exited"]


def wait_for_ack(run: Path, proc: subprocess.Popen, gen: int, step: int) -> None:
    """Wait until the supervisor process has judged ``step`` of ``gen`` (synchronised on its ack file; the
    deadline only turns a bug into a failure instead of a hang)."""
    deadline = time.monotonic() + 300
    while not rundir.acked(run, gen, step):
        assert proc.poll() is None, "the supervisor exited early"
        assert time.monotonic() < deadline, f"the supervisor never judged step {step} of generation {gen}"
        time.sleep(0.01)


def test_steps_of_an_earlier_trainer_generation_are_history_not_news(tmp_path):
    """After a halt and --resume, the old NaN in metrics.jsonl must not halt the resumed trainer."""
    trainer = subprocess.Popen([sys.executable, "-c", "import time; time.sleep(60)"])
    try:
        old = healthy_run(20)
        for r in old:
            r["gen"] = 1
        old[12]["loss"] = None  # what halted the previous process
        _write_metrics(tmp_path, old)
        _write_settings(tmp_path, SupervisorConfig(**{**CFG.__dict__, "poll_s": 0.05}))
        proc = subprocess.Popen(sup.command(tmp_path, trainer.pid, 2))
        wait_for_ack(tmp_path, proc, 1, 19)
        assert not (tmp_path / rundir.HALT_REQUEST).exists()
        new = healthy_run(30)[13:]  # the resumed run restarts after its checkpoint at step 12
        for r in new:
            r["gen"] = 2
        new[10]["grad_norm"] = float("inf")  # step 23: a fault of the resumed process
        _write_metrics(tmp_path, new)
        wait_for_ack(tmp_path, proc, 2, 29)
        request = json.loads((tmp_path / rundir.HALT_REQUEST).read_text())
        assert (request["reason"], request["step"], request["gen"]) == ("nonfinite_grad_norm", 23, 2)
    finally:
        trainer.kill()
        trainer.wait()
    assert proc.wait(timeout=60) == 0


def test_steps_logged_between_a_request_and_its_answer_are_not_judged_again(tmp_path):
    """The race of 'one NaN, two rollbacks', forced step by step: the supervisor reads the NaN at step 6 and asks
    for a rollback; the trainer logs step 7 (NaN too) before it answers; the supervisor reads step 7 only after
    the trainer has rolled back and removed the request. Step 7 belongs to the old generation: no new request."""
    cfg = SupervisorConfig(**{**CFG.__dict__, "halt_policy": "rollback"})
    supervisor = sup.Supervisor(tmp_path, trainer_pid=0, cfg=cfg, generation=rundir.claim_generation(tmp_path))
    run = healthy_run(8)
    for r in run:
        r["gen"] = 1
    run[6]["loss"] = run[7]["loss"] = None
    _write_metrics(tmp_path, run[:7])
    assert supervisor.poll() is None
    request = rundir.take_request(tmp_path, 1)
    assert (request["step"], request["action"], request["gen"]) == (6, "rollback", 1)
    _write_metrics(tmp_path, run[7:])  # logged before the trainer read the request
    rundir.clear_request(tmp_path)  # the trainer rolls back to its checkpoint of step 4...
    gen = rundir.claim_generation(tmp_path)  # ...and claims generation 2
    supervisor.poll()
    assert not (tmp_path / rundir.HALT_REQUEST).exists()
    redo = healthy_run(12, seed=1)[5:]
    for r in redo:
        r["gen"] = gen
    _write_metrics(tmp_path, redo)
    supervisor.poll()
    assert not (tmp_path / rundir.HALT_REQUEST).exists()
    assert [e["event"] for e in _events(tmp_path)] == ["request"]
    assert [r["step"] for r in supervisor.state.records] == list(range(12))  # the abandoned steps are gone
    assert rundir.acked(tmp_path, gen, 11)


def test_a_request_of_another_generation_is_void(tmp_path):
    rundir.claim_generation(tmp_path)
    rundir.write_request(tmp_path, {"gen": 1, "reason": "nonfinite_loss", "step": 9, "action": "rollback"})
    gen = rundir.claim_generation(tmp_path)  # a --resume
    assert rundir.take_request(tmp_path, gen) is None
    assert not (tmp_path / rundir.HALT_REQUEST).exists()
    void = [json.loads(line) for line in (tmp_path / rundir.VOID_REQUESTS).read_text().splitlines()]
    assert [(v["trainer_gen"], v["request"]["step"]) for v in void] == [(2, 9)]


def test_rollback_policy_gives_up_after_max_rollbacks(tmp_path):
    cfg = SupervisorConfig(**{**CFG.__dict__, "halt_policy": "rollback", "max_rollbacks": 1,
                              "rollback_skip_before": 2})
    state = sup.SupervisorState()
    verdict = sup.Verdict("loss_spike", 40, {"z": 9.0}, 40)
    assert sup.request_halt(tmp_path, verdict, state, cfg, 1) == "rollback"
    assert json.loads((tmp_path / rundir.HALT_REQUEST).read_text())["skip_batches"] == [38, 40]
    assert sup.request_halt(tmp_path, verdict, state, cfg, 2) == "halt"
    request = json.loads((tmp_path / rundir.HALT_REQUEST).read_text())
    assert request["evidence"]["rollbacks_exhausted"] == 1
    # A slow trainer is never rolled back: replaying the data does not make it faster.
    slow = sup.Verdict("throughput_collapse", 50, {}, 48)
    assert sup.request_halt(tmp_path, slow, sup.SupervisorState(), cfg, 1) == "halt"


# ------------------------------------------------------------------------------------- faults in real runs

BYTE_BOS = 0  # NUL never occurs in the text, so it can stand for BOS


def write_byte_shards(out: Path, sample_dir: Path) -> Path:
    """Real sample text (Bangla and English) as UTF-8 bytes, in the `corpus.shards.format` layout and manifest.

    Bytes keep the vocabulary at 256, so a `tiny` step takes milliseconds and a whole faulty run a few seconds.
    """
    out.mkdir(parents=True, exist_ok=True)
    sources = {"bn": sample_dir / "bn" / "literature-bnarchive.txt.gz",
               "en": sample_dir / "en" / "wiki-en-chinapedia.txt.gz"}
    train, by_lang, infos, train_docs = [], {}, [], 0
    for lang, path in sources.items():
        docs = [normalize(d.text) for d in iter_documents(str(path), max_chars=16000)]
        split = int(len(docs) * 0.8)
        for part, name in ((docs[:split], "train"), (docs[split:], "val")):
            ids = np.concatenate([np.frombuffer(bytes([BYTE_BOS]) + d.encode(), dtype=np.uint8) for d in part])
            if name == "train":
                train.append(ids)
                by_lang[lang] = len(ids)
                train_docs += len(part)
                continue
            write_shard(out / f"val_{lang}.bin", ids, "uint16")
            infos.append(ShardInfo(file=f"val_{lang}.bin", split="val", tokens=len(ids), documents=len(part),
                                   tokens_by_language={lang: len(ids)}, language=lang,
                                   chars=sum(map(len, part)), bytes=sum(len(d.encode()) for d in part)))
    tokens = np.concatenate(train)
    write_shard(out / "train_000.bin", tokens, "uint16")
    infos.insert(0, ShardInfo(file="train_000.bin", split="train", tokens=len(tokens), documents=train_docs,
                              tokens_by_language=by_lang))
    Manifest(tokenizer=TokenizerInfo(spec="utf-8 bytes", sha256=hashlib.sha256(b"utf-8 bytes").hexdigest(),
                                     vocab_size=256, bos_id=BYTE_BOS), dtype="uint16", shards=infos).save(out)
    return out


TRAIN_ARGS = [
    "--config", "tiny", "--set", "model.n_layer=2", "--set", "model.n_embd=64", "--set", "model.block_size=64",
    "--global-batch-tokens", "256", "--micro-batch", "4", "--set", "train.checkpoint_interval=4",
    "--set", "train.eval_interval=1000", "--set", "data.eval_tokens=256", "--set", "train.preflight_steps=0",
    "--set", "train.tensorboard=false", "--set", "train.threads=1", "--no-eval",
    # Each step waits until the supervisor has judged it, so every verdict lands at the step it names.
    "--set", "train.supervisor_lockstep=true",
]
SUPERVISOR = {"poll_s": 0.05, "window": 30, "min_history": 8, "throughput_warmup": 3, "throughput_patience": 3,
              "heartbeat_timeout_s": 60, "grace_s": 2}
# Runs that must not trip on throughput: all seven share two cores, so their speeds wobble together.
STEADY = {"throughput_fraction": 0.02}

# name -> (faults, max steps, supervisor settings besides SUPERVISOR)
RUNS = {
    "nan_loss": (["nan_loss@12"], 400, STEADY),
    "loss_spike": (["loss_spike@12"], 400, STEADY),
    "grad_explode": (["grad_explode@12"], 400, STEADY),
    "slow": (["slow@14"], 400, {"throughput_fraction": 0.3, "throughput_patience": 2}),
    "hang": (["hang@10"], 400, {**STEADY, "heartbeat_timeout_s": 6}),
    "kill_during_checkpoint": (["kill_during_checkpoint@8"], 400, STEADY),
    "rollback": (["loss_spike@12", "nan_loss@20"], 32, {**STEADY, "halt_policy": "rollback"}),
}
# These end the trainer's process, so they need one of their own; the others train inside the test
# process (torch is imported already), each with its supervisor in a separate process as in production.
OWN_PROCESS = ("hang", "kill_during_checkpoint")


@dataclass
class Run:
    dir: Path
    returncode: int
    log: str

    def json(self, name: str) -> dict:
        return json.loads((self.dir / name).read_text())

    def jsonl(self, name: str) -> list[dict]:
        return [json.loads(line) for line in (self.dir / name).read_text().splitlines() if line.strip()]


@pytest.fixture(scope="module")
def fault_runs(tmp_path_factory, sample_dir) -> dict[str, Run]:
    """Every fault injected into its own real `tiny` run with its supervisor."""
    root = tmp_path_factory.mktemp("faults")
    data = write_byte_shards(root / "shards", sample_dir)

    def argv(name: str) -> list[str]:
        faults, steps, options = RUNS[name]
        return ["launch", *TRAIN_ARGS, "--data", str(data), "--out", str(root / name), "--max-steps", str(steps),
                *(a for k, v in {**SUPERVISOR, **options}.items() for a in ("--set", f"supervisor.{k}={v}")),
                *(a for f in faults for a in ("--inject-fault", f))]

    codes, procs = {}, {}
    with contextlib.ExitStack() as logs:
        for name in OWN_PROCESS:
            log = logs.enter_context(open(root / f"{name}.log", "w"))
            procs[name] = subprocess.Popen([sys.executable, "-m", "pretrain", *argv(name)], stdout=log,
                                           stderr=subprocess.STDOUT)
        try:
            for name in RUNS:
                if name not in OWN_PROCESS:
                    with open(root / f"{name}.log", "w") as log, contextlib.redirect_stderr(log):
                        codes[name] = cli.main(argv(name))
            for name, proc in procs.items():
                codes[name] = proc.wait(timeout=300)
        finally:
            for proc in procs.values():
                proc.kill()
    return {name: Run(root / name, codes[name], (root / f"{name}.log").read_text()) for name in RUNS}


def assert_checkpoints_intact(run: Run, newest_step: int) -> None:
    """Every complete checkpoint loads and passes its checksum; the newest is ``newest_step``."""
    latest = latest_checkpoint(run.dir)
    assert latest is not None and latest.name == f"step_{newest_step:08d}.pt", run.log
    for path in step_checkpoints(run.dir):
        state = load_checkpoint(path)
        assert all(torch.isfinite(v).all() for v in state["model"].values()), path


@pytest.mark.slow
@pytest.mark.parametrize("fault,reason", [("nan_loss", "nonfinite_loss"), ("loss_spike", "loss_spike"),
                                          ("grad_explode", "grad_norm_explosion"), ("slow", "throughput_collapse")])
def test_supervisor_halts_a_faulty_run_at_a_step_boundary(fault_runs, fault, reason):
    run = fault_runs[fault]
    assert run.returncode == 3, run.log
    halt = run.json("halt.json")
    assert halt["reason"] == reason and halt["written_by"] == "trainer"
    # A slow streak is judged on its second step, a diverging loss or gradient on the fifth of its streak.
    assert halt["step"] == {"slow": 15, "nan_loss": 12}.get(fault, 16)
    assert halt["trainer_step"] >= halt["step"]
    assert not (run.dir / rundir.HALT_REQUEST).exists()  # consumed
    requests = [e for e in _events(run.dir) if e["event"] == "request"]
    assert len(requests) == 1 and requests[0]["action"] == "halt"
    # The last good checkpoint is named, intact, and from before the fault where the fault poisons weights.
    last_good = Path(halt["last_good_checkpoint"])
    assert last_good == latest_checkpoint(run.dir)
    if fault != "slow":
        # Nothing from the fault's first step on: after the NaN nothing was saved; the checkpoints of steps 12 and
        # 16, taken during the diverging streak, were moved aside, so `--resume` goes on from step 8.
        assert last_good.name == "step_00000008.pt"
    assert_checkpoints_intact(run, int(last_good.stem.split("_")[1]))


@pytest.mark.slow
def test_supervisor_ends_a_hung_trainer_and_writes_halt_json(fault_runs):
    run = fault_runs["hang"]
    # The trainer defers SIGTERM to its next step boundary, which a hung trainer never reaches: the grace
    # period ends, and SIGKILL ends it.
    assert run.returncode == -signal.SIGKILL, run.log
    halt = run.json("halt.json")
    assert halt["reason"] == "heartbeat_stalled" and halt["written_by"] == "supervisor"
    # silent for longer than the timeout; recorded to the millisecond, so 6.0004 s reads 6.0
    assert halt["step"] == 9 and halt["evidence"]["seconds_silent"] >= halt["evidence"]["timeout_s"] == 6
    assert [e.get("ended_by") for e in _events(run.dir)] == [None, "SIGKILL"]
    assert halt["last_good_checkpoint"].endswith("step_00000008.pt")
    assert_checkpoints_intact(run, 8)


@pytest.mark.slow
def test_kill_9_while_writing_a_checkpoint_keeps_the_previous_one(fault_runs):
    run = fault_runs["kill_during_checkpoint"]
    assert run.returncode == -signal.SIGKILL, run.log
    ckdir = run.dir / "checkpoints"
    assert list(ckdir.glob(".step_00000008.pt.*.tmp")), "the fault should leave a half-written temp file"
    assert not (ckdir / "step_00000008.pt").exists()
    assert_checkpoints_intact(run, 4)
    assert not (run.dir / "halt.json").exists()  # nobody halted it: it died


@pytest.mark.slow
def test_rollback_policy_skips_the_bad_batches_and_finishes(fault_runs):
    run = fault_runs["rollback"]
    assert run.returncode == 0, run.log
    assert not (run.dir / "halt.json").exists()
    rollbacks = run.jsonl("rollbacks.jsonl")
    assert [r["reason"] for r in rollbacks] == ["loss_spike", "nonfinite_loss"]
    assert [r["request_step"] for r in rollbacks] == [16, 20]  # the fifth step of the diverging streak
    # Back to before the streak, whose batches are never used again.
    assert rollbacks[0]["resumed_at_step"] == 8 and rollbacks[0]["skip_steps"] == [12, 16]
    assert rollbacks[1]["resumed_at_step"] < 20  # back before the NaN: no checkpoint saw it
    requests = [e for e in _events(run.dir) if e["event"] == "request"]
    assert [(e["action"], e["rollbacks"]) for e in requests] == [("rollback", 1), ("rollback", 2)]
    # The last logged trajectory (after the rollbacks) is finite and reaches the end.
    final = {}
    for rec in run.jsonl("metrics.jsonl"):
        final[rec["step"]] = rec
    assert max(final) == 32 and all(final[s]["loss"] is not None for s in final)
    assert_checkpoints_intact(run, 32)
