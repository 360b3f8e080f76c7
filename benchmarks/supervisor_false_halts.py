"""False halts of the supervisor on healthy runs, and its catch of a diverging one.

Trains `tiny` on the sample text this repository ships (GPT-2 ids, as `pretrain.train.sample_shards` writes them)
for 200 steps at three batch sizes and three seeds, one thread each, and judges every run's metrics with the
supervisor's own decision over a whole history (`pretrain.guard.supervisor.scan`, the verdict the live
supervisor reaches step by step, in lockstep or not) under the default `SupervisorConfig`. Then the same
metrics with the loss multiplied by 3 from step 150 on (a run whose loss diverges and stays up): each of
those must be caught, at the fifth step of the streak.

    .venv/bin/python benchmarks/supervisor_false_halts.py [--steps 200] [--out DIR]

Prints one line per run (loss at the first and last step, the largest gradient-norm ratio to the running
median, the verdict) and a summary; exit 1 when a healthy run is halted or a diverging one is not.
"""

from __future__ import annotations

import argparse
import copy
import shutil
import statistics
import tempfile
from pathlib import Path

from common.fileio import read_jsonl
from pretrain.config import SupervisorConfig, apply_overrides, preset
from pretrain.guard.supervisor import scan
from pretrain.train.data import open_dataset
from pretrain.train.distributed import setup
from pretrain.train.sample_shards import SAMPLE_SOURCES, write_shard_set
from pretrain.train.trainer import Trainer

BATCH_TOKENS = (256, 512, 1024)  # 2, 4 and 8 sequences of 128 tokens
SEEDS = (0, 1, 2)
DIVERGE_AT, DIVERGE_FACTOR = 150, 3.0


def train(shards: Path, out: Path, batch: int, seed: int, steps: int) -> list[dict]:
    """The metrics of a finished run in ``out`` (kept under --out: judging again after a change of the rules
    costs no training), else of a run trained there now."""
    if (out / "metrics.jsonl").exists() and len(records := read_jsonl(out / "metrics.jsonl")) == steps:
        return records
    shutil.rmtree(out, ignore_errors=True)  # a run of ours cut short: trained again from the start
    cfg = apply_overrides(preset("tiny", open_dataset(shards).manifest.tokenizer.vocab_size), [
        f"data.path={shards}", f"train.out={out}", f"train.max_steps={steps}", f"train.global_batch_tokens={batch}",
        "data.micro_batch=2", f"train.seed={seed}", "train.threads=1", "train.tensorboard=no",
        "train.supervisor=no", f"train.eval_interval={steps}", f"train.checkpoint_interval={steps}",
        "data.eval_tokens=1024"])
    assert Trainer(cfg, open_dataset(shards), setup("cpu", "fp32")).fit() == 0
    return read_jsonl(out / "metrics.jsonl")


def worst_grad_ratio(records: list[dict], cfg: SupervisorConfig) -> float:
    """The largest grad norm against the median of the window before it (what one excursion looks like)."""
    ratios = []
    for i in range(cfg.min_history, len(records)):
        window = [r["grad_norm"] for r in records[max(0, i - cfg.window):i]]
        ratios.append(records[i]["grad_norm"] / statistics.median(window))
    return max(ratios)


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--steps", type=int, default=200)
    parser.add_argument("--out", type=Path, help="keep the shards and runs here (default: a temporary folder)")
    args = parser.parse_args()
    cfg = SupervisorConfig()
    with tempfile.TemporaryDirectory() as tmp:
        root = args.out or Path(tmp)
        shards = root / "shards"
        if not (shards / "manifest.json").exists():
            write_shard_set(shards, SAMPLE_SOURCES, train_chars=200_000, val_chars=20_000)
        false_halts, missed = 0, 0
        for batch in BATCH_TOKENS:
            for seed in SEEDS:
                records = train(shards, root / f"run-b{batch}-s{seed}", batch, seed, args.steps)
                verdict = scan(records, cfg)
                diverged = copy.deepcopy(records)
                for r in diverged[DIVERGE_AT - 1:]:
                    r["loss"] *= DIVERGE_FACTOR
                caught = scan(diverged, cfg)
                false_halts += verdict is not None
                missed += caught is None or caught.reason != "loss_spike"
                print(f"batch {batch:5d} seed {seed}: loss {records[0]['loss']:.2f} -> {records[-1]['loss']:.2f}, "
                      f"worst grad-norm ratio {worst_grad_ratio(records, cfg):5.1f}x, verdict "
                      f"{verdict.reason + ' at step ' + str(verdict.step) if verdict else 'none'}; diverged copy: "
                      f"{caught.reason + ' at step ' + str(caught.step) if caught else 'NOT CAUGHT'}", flush=True)
        runs = len(BATCH_TOKENS) * len(SEEDS)
        print(f"healthy runs halted: {false_halts} of {runs}; diverging runs caught: {runs - missed} of {runs}")
        return 1 if false_halts or missed else 0


if __name__ == "__main__":
    raise SystemExit(main())
