"""The 2e9-token bangla-0.4b preset and `pretrain launch --dry-run`: the steps follow the token budget and
the learning rate reaches its floor at the last step."""

from __future__ import annotations

import json
import os
import subprocess
import sys
from pathlib import Path

import pytest

from pretrain import cli
from pretrain.config import apply_overrides, preset
from pretrain.guard.run_plan import plan_run
from pretrain.model.gpt import parameter_counts
from pretrain.train.optim import lr_at

GPT2_VOCAB = 50257


def test_bangla_preset_trains_a_token_budget_with_the_schedule_ending_at_the_last_step():
    cfg = preset("bangla-0.4b", GPT2_VOCAB)
    assert cfg.train.token_budget == 2e9 and cfg.train.global_batch_tokens == 524288
    assert cfg.train.max_steps == 3815  # ceil(2e9 / 524288)
    steps, optim = cfg.train.max_steps, cfg.optim
    floor = optim.lr * optim.min_lr_ratio
    assert lr_at(steps - 1, optim, steps) == pytest.approx(floor)  # the last update is at the floor
    assert lr_at(steps - 2, optim, steps) > floor  # and the decay runs up to it
    lrs = [lr_at(s, optim, steps) for s in range(optim.warmup_steps, steps)]
    assert lrs == sorted(lrs, reverse=True) and max(lrs) == pytest.approx(optim.lr)


def test_budget_overrides_rederive_the_steps_and_an_explicit_step_count_wins():
    assert apply_overrides(preset("bangla-0.4b", GPT2_VOCAB), ["train.token_budget=1e9"]).train.max_steps == 1908
    assert apply_overrides(preset("bangla-0.4b", GPT2_VOCAB), ["train.global_batch_tokens=262144"]).train.max_steps == 7630
    assert apply_overrides(preset("bangla-0.4b", GPT2_VOCAB), ["train.max_steps=50"]).train.max_steps == 50
    with pytest.raises(ValueError, match="token_budget"):
        apply_overrides(preset("bangla-0.4b", GPT2_VOCAB), ["train.token_budget=-1"])


def test_plan_numbers():
    # AdamW's figures (the preset trains with Muon: test_muons_one_buffer_in_the_plan).
    plan = plan_run(apply_overrides(preset("bangla-0.4b", GPT2_VOCAB), ["optim.name=adamw"]), tokens_per_s=200_000)
    assert (plan.steps, plan.tokens_per_step, plan.tokens) == (3815, 524288, 3815 * 524288)
    assert (plan.micro_batch, plan.accumulation) == (16, 16)
    assert plan.hours == pytest.approx(3815 * 524288 / 200_000 / 3600)
    assert plan.checkpoint_bytes == 12 * plan.parameters and plan.disk_bytes == 4 * plan.checkpoint_bytes
    assert plan.memory["total_bytes"] > plan.memory["weights_grads_optimizer_bytes"] == 16 * plan.parameters
    with pytest.raises(ValueError, match="max_steps or train.token_budget"):
        plan_run(apply_overrides(preset("tiny", GPT2_VOCAB), ["train.max_steps=0"]))


def test_muons_one_buffer_in_the_plan():
    """Muon keeps one fp32 buffer per element of the blocks' matrices where AdamW keeps two moments."""
    adamw = apply_overrides(preset("bangla-0.4b", GPT2_VOCAB), ["optim.name=adamw"])
    muon = apply_overrides(preset("bangla-0.4b", GPT2_VOCAB), ["optim.name=muon"])
    a, m = plan_run(adamw), plan_run(muon)
    blocks = parameter_counts(muon.model).block_matrices
    assert (a.optimizer, m.optimizer) == ("adamw", "muon")
    assert a.memory["optimizer_state_bytes"] - m.memory["optimizer_state_bytes"] == 4 * blocks
    assert a.checkpoint_bytes - m.checkpoint_bytes == 4 * blocks
    assert m.checkpoint_bytes == 4 * m.parameters + m.memory["optimizer_state_bytes"]
    assert a.memory["total_bytes"] - m.memory["total_bytes"] == 4 * blocks  # fused AdamW: no step temporaries
    assert blocks == 24 * (4 * 1024**2 + 3 * 1024 * 2816)  # qkv, proj, gate_up, down of 24 blocks


def test_launch_dry_run_prints_the_plan(capsys):
    assert cli.main(["launch", "--config", "bangla-0.4b", "--dry-run"]) == 0
    out = capsys.readouterr().out
    assert "2,000,158,720 (2.000e9) for a budget of 2e+09" in out
    assert "3,815 of 524,288 tokens (16 sequences x 16 accumulation" in out
    assert "step 3815 (last): 5e-05" in out  # lr 5e-4 x min_lr_ratio 0.1, at the last step
    assert "assumed: 45% MFU" in out and "GB each" in out and "GB of disk" in out and "per device" in out
    assert cli.main(["launch", "--config", "bangla-0.4b", "--dry-run", "--micro-batch", "32",
                     "--tokens-per-s", "150000"]) == 0
    out = capsys.readouterr().out
    assert "32 sequences x 8 accumulation" in out and "150,000 tokens/s (given)" in out


def test_launch_without_out_is_refused_unless_dry_run(capsys):
    assert cli.main(["launch", "--config", "tiny", "--data", "nowhere"]) == 2
    assert "launch needs --out" in capsys.readouterr().err


def test_the_loss_chunk_in_the_memory_estimate_is_never_larger_than_the_micro_batch():
    from pretrain.config import preset
    from pretrain.guard.run_plan import memory_estimate
    from pretrain.model.loss import LOSS_CHUNK_ELEMENTS

    small = preset("tiny", 8000)  # 8 x 128 tokens: far fewer logits than one full chunk
    memory = memory_estimate(small, autocast=False)
    logits = small.data.micro_batch * small.seq_len * small.model.vocab_size
    assert memory["activations_bytes"] < 2 * LOSS_CHUNK_ELEMENTS * 4
    assert memory["activations_bytes"] >= 2 * logits * 4



# ------------------------------------------------------------------------------------------------ memory

# Runs `pretrain launch` and writes its own peak resident bytes to argv[1]: VmHWM, the high-water mark of this
# process's own memory. Not ru_maxrss: Linux keeps that across exec, so a child forked from a pytest process
# of 2 GiB (late in the full suite) reports 2 GiB whatever it did itself.
_PEAK_RSS = ("import json, re, sys; from pretrain.cli import main; code = main(sys.argv[2:]); "
             "hwm = re.search(r'VmHWM:\\s+(\\d+) kB', open('/proc/self/status').read()).group(1); "
             "open(sys.argv[1], 'w').write(json.dumps(int(hwm) * 1024)); sys.exit(code)")
ROOT = Path(__file__).resolve().parents[3]
SHAPES = {  # `tiny` itself, where one chunk of logits dominates; an untied one where the 16 bytes/parameter do
    "tiny": ["--micro-batch", "8", "--global-batch-tokens", "1024"],
    "untied-256": ["--set", "model.n_layer=2", "--set", "model.n_embd=256", "--set", "model.tie_embeddings=false",
                   "--micro-batch", "2", "--global-batch-tokens", "256"],
}


def _peak_rss(args: list[str], record: Path) -> int:
    proc = subprocess.run([sys.executable, "-c", _PEAK_RSS, str(record), *args], cwd=ROOT, capture_output=True,
                          text=True, env={**os.environ, "OMP_NUM_THREADS": "1"})
    assert proc.returncode == 0, proc.stderr[-3000:]
    return json.loads(record.read_text())


@pytest.mark.slow
@pytest.mark.parametrize("shape", SHAPES)
def test_the_memory_estimate_is_within_a_fifth_of_a_cpu_launchs_peak_rss(shape, shards, tmp_path):
    """The preflight's estimate against the measured peak of the whole launch (preflight burst, arbiter,
    steps, validation, checkpoint), fresh and resumed. Before the burst ran on the run's own model, a resume
    of `untied-256` peaked at 1195 MiB (885 MiB now) and the estimate was 46% under."""
    run = tmp_path / "run"
    common = ["launch", "--config", "tiny", "--data", str(shards), "--out", str(run), "--no-supervisor", "--no-eval",
              "--set", "train.preflight_steps=1", "--set", "train.threads=1", "--set", "data.eval_tokens=256",
              "--set", "train.checkpoint_interval=2", *SHAPES[shape]]
    for name, extra in (("fresh", ["--max-steps", "2"]), ("resumed", ["--max-steps", "3", "--resume", "--replan-schedule"])):
        peak = _peak_rss([*common, *extra], tmp_path / f"{name}.json")
        memory = json.loads((run / "preflight.json").read_text())["memory"]
        assert memory["runtime_bytes"] > 0  # measured on a CPU: the interpreter and libraries
        assert abs(memory["total_bytes"] - peak) <= 0.2 * peak, (name, memory, peak)


@pytest.mark.parametrize("optimizer", ["adamw", "muon"])
def test_the_preflight_burst_leaves_the_run_untouched(micro, synthetic_shards, tmp_path, optimizer):
    """The burst trains the run's own model and optimizer, then restores them: a run with a burst has the
    trajectory of one without, fresh and resumed (with Muon: both parts' state)."""
    from common.fileio import read_jsonl

    def run(out: Path, steps: int, burst: int, *extra: str) -> list[tuple]:
        args = micro.args(synthetic_shards, out, steps, "--set", f"train.preflight_steps={burst}",
                          "--set", "train.checkpoint_interval=2", "--optimizer", optimizer, *extra)
        assert cli.main(args) == 0
        return [(r["step"], r["loss"], r["grad_norm"]) for r in read_jsonl(out / "metrics.jsonl")]

    with_burst, without = run(tmp_path / "a", 2, 2), run(tmp_path / "b", 2, 0)
    assert with_burst == without
    assert run(tmp_path / "a", 4, 2, "--resume", "--replan-schedule") == run(tmp_path / "b", 4, 0, "--resume",
                                                                             "--replan-schedule")


def test_tensorboard_on_without_the_package_stops_the_launch_before_step_1(micro, synthetic_shards, tmp_path):
    """The trainer imports TensorBoard at its first log; the preflight imports it first, so a machine
    without the package (the GPU machine may lack it) fails the preflight, not the run mid-way."""
    blocker = tmp_path / "blocker" / "tensorboard"
    blocker.mkdir(parents=True)
    (blocker / "__init__.py").write_text("raise ImportError('no tensorboard here')\n")
    run = tmp_path / "run"
    args = micro.args(synthetic_shards, run, 3, "--set", "train.tensorboard=yes")
    proc = subprocess.run([sys.executable, "-m", "pretrain", *args], cwd=ROOT, capture_output=True, text=True,
                          env={**os.environ, "PYTHONPATH": f"{ROOT}{os.pathsep}{blocker.parent}"})
    assert proc.returncode == 2, proc.stderr[-2000:]
    assert "train.tensorboard is on but cannot be used" in proc.stderr and "Traceback" not in proc.stderr
    assert not (run / "metrics.jsonl").exists()
