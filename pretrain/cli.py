"""The ``pretrain`` command (also ``python -m pretrain``; ``torchrun ... -m pretrain launch`` for several GPUs).

    pretrain launch --config tiny|bangla-0.4b|CONFIG.json --data SHARDS --out RUN [--resume] [--max-steps N]
                    [--time-budget-s S] [--set section.field=value ...] [--inject-fault KIND@STEP ...]
    pretrain eval --run RUN [--checkpoint PATH] [--max-tokens N] [--text LANG=PATH ...] [--tasks T1,T2]
    pretrain eval --checkpoint CKPT | --hf DIR  --text LANG=PATH ... [--tasks T1,T2] --out FILE.json
                                                                                     (pretrain.downstream)
    pretrain bench --config tiny|bangla-0.4b [--micro-batch B] [--steps N] [--out FILE.json]   (pretrain.bench)
    pretrain export --checkpoint CKPT --out DIR [--tokenizer SPEC]                          (pretrain.export)

Exit codes: 0 done, 1 training error, 2 bad arguments or data refused, 3 halted by the supervisor.
"""

from __future__ import annotations

import argparse
import json
import shlex
import subprocess
import sys
from pathlib import Path

from pretrain.config import RunConfig, apply_overrides, preset

EXIT_BAD_INPUT = 2


def _launch_parser(sub) -> None:
    p = sub.add_parser("launch", help="train (with preflight and supervisor)",
                       description="Train a GPT on corpus shards. Under torchrun, one process per device.")
    p.add_argument("--config", help="preset (tiny, bangla-0.4b) or a config JSON (e.g. a RUN/config.json)")
    p.add_argument("--data", help="shard directory with manifest.json (from `corpus build`)")
    p.add_argument("--out", required=True, help="run directory (checkpoints, metrics, eval)")
    p.add_argument("--resume", action="store_true", help="continue RUN from its last good checkpoint")
    p.add_argument("--max-steps", type=int, help="optimizer steps (0 with --time-budget-s: fit the budget)")
    p.add_argument("--time-budget-s", type=float, help="stop (and checkpoint) after this many seconds")
    p.add_argument("--micro-batch", type=int, help="sequences per device per forward pass")
    p.add_argument("--global-batch-tokens", type=int, help="tokens per optimizer step (any world size)")
    p.add_argument("--lr", type=float, help="peak learning rate")
    p.add_argument("--schedule", choices=["cosine", "wsd"])
    p.add_argument("--seed", type=int)
    p.add_argument("--device", help="auto, cpu, cuda, cuda:N")
    p.add_argument("--tokenizer", help="tokenizer (name, path or sha256) the shards must have been made with")
    p.add_argument("--set", action="append", default=[], metavar="SECTION.FIELD=VALUE",
                   help="override any config field, e.g. --set model.n_layer=2 (repeatable)")
    p.add_argument("--inject-fault", action="append", default=[], metavar="KIND@STEP",
                   help="test fault: nan_loss, loss_spike, grad_explode, slow, hang, kill_during_checkpoint")
    p.add_argument("--max-rollbacks", type=int, help="supervisor rollbacks honoured before halting")
    p.add_argument("--no-supervisor", action="store_true", help="do not start the supervisor process")
    p.add_argument("--supervisor-args", default="", help="options for python -m pretrain.supervisor, one string")
    p.add_argument("--no-eval", action="store_true", help="skip the final evaluation")
    p.add_argument("--preflight-only", action="store_true", help="run the preflight and stop")


def _eval_parser(sub) -> None:
    from pretrain import downstream

    p = sub.add_parser("eval", help="per-language evaluation of a run against its random-init twin; "
                       "bits per byte on any text; lm-evaluation-harness tasks")
    p.add_argument("--run", help="run directory: its validation split against the random-init twin")
    p.add_argument("--checkpoint", help="checkpoint file (default: the run's latest)")
    p.add_argument("--data", help="shard directory (default: the run's)")
    p.add_argument("--max-tokens", type=int, default=0, help="targets per language (0 = all)")
    p.add_argument("--samples", type=int, default=3, help="greedy samples per language")
    p.add_argument("--device", default="auto")
    p.add_argument("--micro-batch", type=int, default=0)
    downstream.add_arguments(p)


def _resolve_config(args, overrides: list[str], sup_args: list[str]) -> RunConfig:
    """The run's config: the saved one on --resume (only run-control fields may change), else the preset."""
    from pretrain.data import DataError, open_dataset
    from pretrain.train import RESUMABLE_KEYS

    saved = Path(args.out) / "config.json"
    if args.resume and saved.exists():
        raw = json.loads(saved.read_text(encoding="utf-8"))
        raw["train"]["inject_faults"] = []  # faults are per invocation, never inherited
        cfg = apply_overrides(RunConfig.from_dict(raw), overrides)
        before, after = RunConfig.from_dict(raw).to_dict(), cfg.to_dict()
        changed = [f"{section}.{key}: {before[section][key]!r} -> {after[section][key]!r}"
                   for section in ("model", "optim", "data", "train") for key in after[section]
                   if after[section][key] != before[section][key] and f"{section}.{key}" not in RESUMABLE_KEYS]
        if changed:
            raise DataError(f"--resume continues the run in {saved}; these cannot change mid-run: {'; '.join(changed)}")
    else:
        if args.resume:
            print(f"[pretrain] --resume: {saved} does not exist yet, starting a new run", file=sys.stderr)
        if not args.config or not args.data:
            raise DataError("launch needs --config and --data (or --resume of an existing run)")
        if Path(args.config).suffix == ".json":
            cfg = RunConfig.from_dict(json.loads(Path(args.config).read_text(encoding="utf-8")))
        else:
            cfg = preset(args.config, open_dataset(args.data).manifest.tokenizer.vocab_size)
        cfg = apply_overrides(cfg, overrides)
    if sup_args:
        cfg.train.supervisor_args = sup_args
    return cfg


def _overrides(args) -> list[str]:
    pairs = [("data.path", args.data), ("train.out", args.out), ("train.max_steps", args.max_steps),
             ("train.time_budget_s", args.time_budget_s), ("data.micro_batch", args.micro_batch),
             ("train.global_batch_tokens", args.global_batch_tokens), ("optim.lr", args.lr),
             ("optim.schedule", args.schedule), ("train.seed", args.seed), ("train.device", args.device),
             ("data.tokenizer", args.tokenizer), ("train.max_rollbacks", args.max_rollbacks)]
    out = [f"{k}={v}" for k, v in pairs if v is not None]
    if args.inject_fault:
        out.append("train.inject_faults=" + ",".join(args.inject_fault))
    if args.no_supervisor:
        out.append("train.supervisor=no")
    return out + args.set


def start_supervisor(run_dir: Path, args: list[str]) -> subprocess.Popen | None:
    """``python -m pretrain.supervisor --run RUN --trainer-pid PID ...`` beside this trainer."""
    import os

    cmd = [sys.executable, "-m", "pretrain.supervisor", "--run", str(run_dir), "--trainer-pid", str(os.getpid()), *args]
    return subprocess.Popen(cmd)


def stop_supervisor(proc: subprocess.Popen | None) -> None:
    if proc is None or proc.poll() is not None:
        return
    proc.terminate()
    try:
        proc.wait(timeout=10)
    except subprocess.TimeoutExpired:
        proc.kill()
        proc.wait()


def use_fsdp(cfg: RunConfig, runtime) -> bool:
    """FSDP2 when asked, or ("auto") when fp32 weights, gradients and AdamW state (16 bytes per parameter)
    would take more than 60% of one GPU, so DDP's full replica plus activations would not fit."""
    import torch

    from pretrain.model import count_parameters

    if cfg.train.fsdp != "auto":
        return cfg.train.fsdp == "yes"
    if runtime.device.type != "cuda":
        return False
    return 16 * count_parameters(cfg.model) > 0.6 * torch.cuda.get_device_properties(runtime.device).total_memory


def launch(args, sup_args: list[str]) -> int:
    from pretrain import distributed
    from pretrain.checkpoint import step_checkpoints
    from pretrain.data import open_dataset
    from pretrain.preflight import format_report, run_preflight, write_report
    from pretrain.train import Trainer

    cfg = _resolve_config(args, _overrides(args), sup_args)
    run_dir = Path(cfg.train.out)
    if not args.resume and step_checkpoints(run_dir):
        raise FileExistsError(f"{run_dir} already holds checkpoints; pass --resume to continue it, or another --out")
    runtime = distributed.setup(cfg.train.device, cfg.train.dtype)
    try:
        runtime.fsdp = runtime.distributed and use_fsdp(cfg, runtime)
        dataset = open_dataset(cfg.data.path)
        trainer = Trainer(cfg, dataset, runtime, resume=args.resume)
        report = run_preflight(trainer)
        if runtime.is_main:
            run_dir.mkdir(parents=True, exist_ok=True)
            write_report(report, run_dir)
            print(format_report(report), file=sys.stderr)
        if not report.ok:
            return EXIT_BAD_INPUT
        if args.preflight_only:
            return 0
        supervisor = None
        if runtime.is_main and cfg.train.supervisor:
            run_dir.mkdir(parents=True, exist_ok=True)
            forwarded = cfg.train.supervisor_args
            if "--max-rollbacks" not in forwarded:
                forwarded = [*forwarded, "--max-rollbacks", str(cfg.train.max_rollbacks)]
            supervisor = start_supervisor(run_dir, forwarded)
        try:
            code = trainer.fit()
        finally:
            stop_supervisor(supervisor)
        if code == 0 and runtime.is_main and not args.no_eval:
            from pretrain.evaluate import evaluate_run
            from pretrain.evaluate import format_report as format_eval

            report = evaluate_run(run_dir, device=str(runtime.device), max_tokens=cfg.data.eval_tokens)
            print(format_eval(report), file=sys.stderr)
        return code
    finally:
        distributed.teardown()


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(prog="pretrain", description=__doc__.split("\n\n")[0])
    sub = parser.add_subparsers(dest="command", required=True)
    _launch_parser(sub)
    _eval_parser(sub)
    from pretrain import bench, export

    bench.add_arguments(sub.add_parser("bench", help="time our training step against transformers' Llama",
                                       description=bench.__doc__.split("\n\n")[0]))
    export.add_arguments(sub.add_parser("export", help="a checkpoint as a transformers folder",
                                        description=export.__doc__.split("\n\n")[0]))
    args, unknown = parser.parse_known_args(argv)
    # --sup-NAME VALUE is forwarded to the supervisor as --NAME VALUE.
    sup_args, rest = [], list(unknown)
    while rest:
        item = rest.pop(0)
        if args.command == "launch" and item.startswith("--sup-"):
            name, eq, value = item.partition("=")
            sup_args.append("--" + name[len("--sup-"):])
            if eq:
                sup_args.append(value)
            elif rest and not rest[0].startswith("--"):
                sup_args.append(rest.pop(0))
        else:
            parser.error(f"unrecognized argument: {item}")
    from pretrain.checkpoint import CheckpointError
    from pretrain.data import DataError

    try:
        if args.command in ("bench", "export"):
            return (bench if args.command == "bench" else export).main(args)
        if args.command == "launch":
            return launch(args, shlex.split(args.supervisor_args) + sup_args)
        from pretrain.downstream import format_downstream, plan_from_args, run_plan
        from pretrain.evaluate import evaluate_run, format_report

        plan = plan_from_args(args)  # texts and task names are checked before any model runs
        report = None
        if args.run:
            report = evaluate_run(args.run, checkpoint=args.checkpoint, data=args.data, max_tokens=args.max_tokens,
                                  samples=args.samples, device=args.device, micro_batch=args.micro_batch)
            print(format_report(report))
            print(f"wrote {Path(args.run) / 'eval.json'} and eval.png")
        if plan is not None:
            report = run_plan(plan, report)
            print(format_downstream(report))
            print(f"wrote {plan.out}")
        return 0
    except (DataError, CheckpointError, FileExistsError, FileNotFoundError, ValueError) as e:
        print(f"pretrain: error: {e}", file=sys.stderr)
        return EXIT_BAD_INPUT
