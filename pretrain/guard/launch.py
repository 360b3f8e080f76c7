"""Train a GPT on corpus shards (preflight, supervisor, checkpoints). Under torchrun, one process per device.
Ctrl-C or SIGTERM: a checkpoint at the next step boundary, then exit 130/143; --resume continues exactly.

``pretrain launch``: everything that can be refused is refused before any work (the shards, the run folder,
the config and what it asks of the loop); then the preflight, the supervisor beside the training loop (its
settings are the config's ``supervisor`` section, ``--set supervisor.NAME=VALUE``) and, unless ``--no-eval``,
the final evaluation the command line hands in (`pretrain.eval` sits above this package).
"""

from __future__ import annotations

import argparse
import os
import signal
import sys
from collections.abc import Callable
from contextlib import nullcontext
from pathlib import Path

from common import cli, paths
from common.errors import InputError, OutputPathError
from common.outdir import check_output_dir, is_ours
from common.paths import check_output_file
from common.signals import deferred_signals
from common.writer import writing
from pretrain.config import (
    OPTIMIZERS,
    PRESETS,
    RESUMABLE_KEYS,
    SCHEDULES,
    RunConfig,
    apply_overrides,
    check_preset,
    load_config,
    preset,
)
from pretrain.train import rundir
from pretrain.train.data import check_shards
from pretrain.train.distributed import check_device, device_arg

PROG = "pretrain"
EXIT_BAD_INPUT = 2
# What `pretrain launch` runs after a finished training (the run folder, the device, the targets per language).
FinalEval = Callable[[Path, str, int], None]


def add_arguments(p: argparse.ArgumentParser) -> None:
    from pretrain.train.faults import KINDS

    p.add_argument("--config", metavar="PRESET|JSON", type=paths.name_or_path,
                   help=f"preset ({', '.join(PRESETS)}) or a config JSON (e.g. a RUN/config.json)")
    p.add_argument("--data", metavar="DIR", type=paths.input_folder, help="shard directory with manifest.json (from `corpus build`)")
    p.add_argument("--out", metavar="DIR", type=paths.output_dir,
                   help="run directory (checkpoints, metrics, eval): a new or empty folder, or with --resume a run "
                        "to continue; required unless --dry-run")
    p.add_argument("--resume", action="store_true",
                   help="continue RUN from the checkpoint its latest.json names, or the newest before it on the "
                        "same line that verifies (corrupt ones are skipped, named and moved aside as .corrupt); a "
                        "run with none is refused; a RUN that does not exist yet is started from --config and --data")
    p.add_argument("--resume-from", metavar="CHECKPOINT", type=paths.input_file,
                   help="continue RUN from this checkpoint file (e.g. RUN/checkpoints/step_00001000.pt)")
    p.add_argument("--max-steps", type=cli.non_negative_int,
                   help="optimizer steps (0 with --time-budget-s: fit the budget)")
    p.add_argument("--replan-schedule", action="store_true",
                   help="with --resume and a new --max-steps: go on from the checkpoint's learning rate down to "
                        "the floor at the new last step (without it another --max-steps is refused)")
    p.add_argument("--time-budget-s", type=cli.non_negative_float, metavar="SECONDS",
                   help="stop (and checkpoint) after this many seconds (0: no limit)")
    p.add_argument("--micro-batch", type=cli.positive_int, help="sequences per device per forward pass")
    p.add_argument("--global-batch-tokens", type=cli.positive_int, help="tokens per optimizer step (any world size)")
    p.add_argument("--optimizer", choices=list(OPTIMIZERS), help="optim.name: "
                   + "; ".join(f"{name}, {o.help}" for name, o in OPTIMIZERS.items())
                   + " (its settings: --set optim.muon_lr=... and the other optim fields)")
    p.add_argument("--lr", type=cli.positive_float, help="peak learning rate (AdamW's; optim.muon_lr is Muon's)")
    p.add_argument("--schedule", choices=list(SCHEDULES), help="learning-rate decay after warmup: "
                   + "; ".join(f"{name}, {s.help}" for name, s in SCHEDULES.items()))
    p.add_argument("--seed", type=cli.non_negative_int, help="seed of the init and the data order")
    p.add_argument("--device", type=paths.not_a_path(device_arg), help="auto, cpu, cuda, cuda:N")
    p.add_argument("--tokenizer", metavar="SPEC", type=paths.name_or_path, help="tokenizer (name, path or sha256) the shards must have been made with")
    p.add_argument("--set", action="append", default=[], metavar="SECTION.FIELD=VALUE", type=paths.text,
                   help="override any config field, e.g. --set model.n_layer=2 or --set supervisor.halt_policy=rollback "
                        "(sections: model, optim, data, train, supervisor; repeatable)")
    p.add_argument("--inject-fault", action="append", default=[], metavar="KIND@STEP", type=paths.text,
                   help=f"test fault: {', '.join(KINDS)}")
    p.add_argument("--max-rollbacks", type=cli.non_negative_int,
                   help="supervisor rollbacks honoured before halting (supervisor.max_rollbacks)")
    p.add_argument("--no-supervisor", action="store_true", help="do not start the supervisor process")
    p.add_argument("--no-eval", action="store_true", help="skip the final evaluation")
    p.add_argument("--no-progress", action="store_true",
                   help="no progress bar: one line every train.log_interval steps (step, loss, tokens/s, MFU, time "
                        "left) instead, as when stderr is not a terminal (a Slurm job's log, a redirect)")
    p.add_argument("--preflight-only", action="store_true", help="run the preflight and stop")
    p.add_argument("--dry-run", action="store_true",
                   help="print the plan (steps, tokens, LR, time, checkpoint and disk size, memory) and stop; "
                        "needs no data (the vocabulary is --data's, else --vocab-size)")
    p.add_argument("--tokens-per-s", type=cli.non_negative_float, default=0.0,
                   help="--dry-run: throughput for the time estimate (default: 45%% MFU on an H100, assumed)")
    p.add_argument("--vocab-size", type=cli.positive_int, default=50257,
                   help="--dry-run without --data: the tokenizer's vocabulary (default: GPT-2's)")


def _absolute(path: str) -> str:
    """``path`` made absolute (symlinks kept), so that a run's records are valid from any folder."""
    return os.path.abspath(path)


def check_run_dir(out: str, *, resume: bool, inputs: list[str]) -> None:
    """``--out`` of ``launch`` under the one --out policy (`common.outdir`): a new or empty folder, or a run of
    ours that has not trained yet (the folder of its ``--preflight-only``); with ``--resume`` also a run of
    ours to go on with. Anything else there (a run without --resume, a folder of someone else's, the output
    of another command) is refused."""
    run_dir = Path(out)
    ours_run = run_dir.is_dir() and rundir.is_run(run_dir)
    if ours_run and rundir.has_trained(run_dir):
        if not resume:
            raise OutputPathError(f"--out {run_dir}: already holds a run; pass --resume to continue it, or "
                                  "choose a new folder")
        # The trainer writes into the run itself: a read-only run is refused here, not at its first step.
        check_output_file(run_dir / rundir.CONFIG, overwrite=True, what="--out", own=True)
        return
    if not ours_run and run_dir.is_dir() and is_ours(run_dir):
        raise OutputPathError(f"--out {run_dir}: holds the output of another command, not a run; choose a new "
                              "folder")
    check_output_dir(run_dir, overwrite=ours_run, inputs=inputs, publish=False)  # written in place


def resolve_config(args: argparse.Namespace, overrides: list[str]) -> RunConfig:
    """The run's config: the saved one on --resume (only run-control fields may change), else the preset."""
    from pretrain.train.data import DataError

    saved = Path(args.out) / rundir.CONFIG
    if (args.resume or args.resume_from) and saved.exists():
        before = load_config(saved)
        before.train.inject_faults = []  # faults are per invocation, never inherited
        if not args.data:  # an older run recorded its data relative to the folder it was launched from
            data = rundir.resolve_path(args.out, before.data.path, before.train.out)
            overrides = [*overrides, f"data.path={_absolute(str(data))}"]
        cfg = apply_overrides(RunConfig.from_dict(before.to_dict(), str(saved)), overrides)
        was, now = before.to_dict(), cfg.to_dict()
        changed = [f"{section}.{key}: {was[section][key]!r} -> {now[section][key]!r}"
                   for section in ("model", "optim", "data", "train") for key in now[section]
                   if now[section][key] != was[section][key] and f"{section}.{key}" not in RESUMABLE_KEYS]
        if changed:
            raise DataError(f"--resume continues the run in {saved}; these cannot change mid-run: {'; '.join(changed)}")
        return cfg
    if not args.config or not args.data:
        raise InputError("launch needs --config and --data (or --resume of an existing run: "
                         f"{saved} does not exist)")
    if args.resume:
        print(f"[pretrain] --resume: {saved} does not exist yet, starting a new run", file=sys.stderr)
    return new_config(args, overrides)


def new_config(args: argparse.Namespace, overrides: list[str]) -> RunConfig:
    """A new run's config: ``--config`` (a preset sized to the shards' vocabulary, else to ``--vocab-size``, or a
    config JSON) with ``overrides`` applied."""
    from pretrain.train.data import open_dataset

    if Path(args.config).suffix == ".json":
        cfg = load_config(args.config)
    else:
        check_preset(args.config)  # before the shards are opened
        vocab = open_dataset(args.data).manifest.tokenizer.vocab_size if args.data else args.vocab_size
        cfg = preset(args.config, vocab)
    return apply_overrides(cfg, overrides)


def overrides_from(args: argparse.Namespace) -> list[str]:
    """The launch options as ``section.field=value`` overrides, ``--set`` last (so it wins)."""
    pairs = [("data.path", args.data and _absolute(args.data)), ("train.out", args.out and _absolute(args.out)),
             ("train.max_steps", args.max_steps), ("train.time_budget_s", args.time_budget_s),
             ("data.micro_batch", args.micro_batch), ("train.global_batch_tokens", args.global_batch_tokens),
             ("optim.name", args.optimizer), ("optim.lr", args.lr), ("optim.schedule", args.schedule), ("train.seed", args.seed),
             ("train.device", args.device), ("data.tokenizer", args.tokenizer),
             ("supervisor.max_rollbacks", args.max_rollbacks)]
    out = [f"{k}={v}" for k, v in pairs if v is not None]
    if args.inject_fault:
        out.append("train.inject_faults=" + ",".join(args.inject_fault))
    if args.no_supervisor:
        out.append("train.supervisor=no")
    return out + args.set


def check_runnable(cfg: RunConfig) -> None:
    """What the config asks of the loop, checked before any device or data work: a batch that splits, a
    step count (or a way to find one) and a device torch sees."""
    from pretrain.train.faults import parse_faults
    from pretrain.train.optim import batch_layout

    batch_layout(cfg, int(os.environ.get("WORLD_SIZE", "1")))
    tc = cfg.train
    if not tc.max_steps and not (tc.time_budget_s and tc.preflight_steps):
        raise InputError("--max-steps 0: the run needs a step count, or --time-budget-s with "
                         "train.preflight_steps > 0 to size it")
    check_device(tc.device, "train.device")
    parse_faults(tc.inject_faults)


def dry_run(args: argparse.Namespace) -> int:
    """``launch --dry-run``: the plan of the config the same arguments would train, without data or a device."""
    from pretrain.guard.run_plan import format_plan, plan_run

    if args.data:
        check_shards(args.data)
    if args.out and (args.resume or args.resume_from):
        cfg = resolve_config(args, overrides_from(args))
    else:
        if not args.config:
            raise InputError("launch --dry-run needs --config")
        cfg = new_config(args, [o for o in overrides_from(args) if not o.startswith("train.out=")])
    print(format_plan(plan_run(cfg, tokens_per_s=args.tokens_per_s)))
    return 0


def run(args: argparse.Namespace, final_eval: FinalEval | None = None) -> int:
    """``pretrain launch``; ``final_eval`` evaluates the run once it has trained (unless ``--no-eval``)."""
    if args.dry_run:
        return dry_run(args)
    if not args.out:
        raise InputError("launch needs --out (the run directory)")
    resume = args.resume or bool(args.resume_from)
    if args.data:
        check_shards(args.data)
    if args.resume_from and not Path(args.resume_from).is_file():
        raise InputError(f"--resume-from {args.resume_from}: no such checkpoint file")
    if args.config and Path(args.config).suffix == ".json" and not Path(args.config).is_file():
        raise InputError(f"--config {args.config}: no such file")
    inputs = [p for p in (args.data, args.config) if p]
    check_run_dir(args.out, resume=resume, inputs=inputs)
    # One launch at a time on a run (a requeued job whose first copy still runs is refused); the processes of one
    # distributed launch share it, so only its first takes the lock.
    with writing(args.out, "pretrain launch", what="--out") if _first_process() else nullcontext():
        check_run_dir(args.out, resume=resume, inputs=inputs)  # again, under the lock
        cfg = resolve_config(args, overrides_from(args))
        check_runnable(cfg)
        return train(cfg, Path(cfg.train.out), args, None if args.no_eval else final_eval)


def _first_process() -> bool:
    """Whether this is the first process of the launch (torchrun's global RANK 0, or a launch of one)."""
    return os.environ.get("RANK", "0") == "0"


def train(cfg: RunConfig, run_dir: Path, args: argparse.Namespace, final_eval: FinalEval | None) -> int:
    """Preflight, supervisor, the training loop (signals deferred to its step boundaries), final evaluation."""
    from pretrain.guard import supervisor
    from pretrain.guard.preflight import format_preflight, run_preflight, write_report
    from pretrain.model.gpt import count_parameters
    from pretrain.train import distributed
    from pretrain.train.data import open_dataset
    from pretrain.train.trainer import Trainer

    runtime = distributed.setup(cfg.train.device, cfg.train.dtype)
    try:
        runtime.fsdp = runtime.distributed and distributed.use_fsdp(cfg.train.fsdp, count_parameters(cfg.model),
                                                                    runtime)
        if runtime.fsdp and (why := OPTIMIZERS[cfg.optim.name].not_fsdp):
            # train.fsdp=yes was refused with the config; "auto" chose FSDP2 here, as DDP would not fit.
            raise InputError(f"train.fsdp=auto chose FSDP2 (DDP's full replica would not fit on this device), and "
                             f"optim.name={cfg.optim.name} does not work with it: {why}")
        dataset = open_dataset(cfg.data.path)
        trainer = Trainer(cfg, dataset, runtime, resume=args.resume, resume_from=args.resume_from,
                          replan=args.replan_schedule)
        report = run_preflight(trainer)
        if runtime.is_main:
            run_dir.mkdir(parents=True, exist_ok=True)
            if not is_ours(run_dir):
                rundir.mark(run_dir)
            write_report(report, run_dir)
            print(format_preflight(report), file=sys.stderr)
        if not report.ok:
            return EXIT_BAD_INPUT
        if args.preflight_only:
            return 0
        generation = trainer.begin()
        with deferred_signals() as stop:
            watcher, on_step = None, None
            try:
                if runtime.is_main and cfg.train.supervisor:
                    watcher = supervisor.start(run_dir, generation)
                    if cfg.train.supervisor_lockstep:
                        on_step = supervisor.lockstep(run_dir, watcher)
                code = trainer.fit(on_step, stop, progress=not args.no_progress)
            finally:
                supervisor.stop(watcher)
        if trainer.stopped_by:
            if runtime.is_main:
                print(f"{PROG}: stopped by {signal.Signals(trainer.stopped_by).name} at step {trainer.step}, "
                      f"checkpoint saved; continue with: pretrain launch --out {run_dir} --resume", file=sys.stderr)
            return code
        if code == 0 and runtime.is_main and final_eval is not None:
            final_eval(run_dir, str(runtime.device), cfg.data.eval_tokens)
        return code
    finally:
        distributed.teardown()
