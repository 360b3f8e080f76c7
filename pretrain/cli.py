"""The ``pretrain`` command (also ``python -m pretrain``; ``torchrun ... -m pretrain launch`` for several GPUs).

    pretrain launch --config PRESET|CONFIG.json --data SHARDS --out RUN [--resume] [--max-steps N]
                    [--time-budget-s S] [--set section.field=value ...] [--inject-fault KIND@STEP ...]
    pretrain eval --run RUN [--checkpoint PATH] [--max-tokens N] [--text LANG=PATH ...] [--tasks T1,T2]
                  [--out FILE.json]
    pretrain eval --checkpoint CKPT | --hf DIR  --text LANG=PATH ... [--tasks T1,T2] --out FILE.json
                                                                                     (pretrain.eval.model_scores)
    pretrain bench --config PRESET [--micro-batch B] [--steps N] [--out FILE.json]   (pretrain.perf.bench)
    pretrain export --checkpoint CKPT --out DIR [--tokenizer SPEC] [--overwrite]            (pretrain.release.export)

--out of launch is a new or empty folder, or with --resume a run of ours to continue; nothing else is
written into. Ctrl-C or SIGTERM during training saves a checkpoint at the next step boundary and stops
(exit 130/143); --resume then goes on exactly where it stopped.

Exit codes: 0 done, 1 training error, 2 bad arguments or data refused (one line, before any work),
3 halted by the supervisor, 130/143 stopped by SIGINT/SIGTERM.
"""

from __future__ import annotations

import argparse
import os
import re
import shlex
import signal
import subprocess
import sys
from pathlib import Path

from common import cli
from common.errors import InputError, OutputPathError
from common.outdir import check_output_dir, check_output_file, is_ours
from common.signals import deferred_signals
from pretrain.config import (
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

PROG = "pretrain"
EXIT_BAD_INPUT = 2


def device(text: str) -> str:
    """argparse type for ``--device``: auto, cpu, cuda or cuda:N, and a CUDA device only where torch sees one."""
    try:
        return check_device(text, "device")
    except InputError as e:
        raise argparse.ArgumentTypeError(str(e)) from None


def check_device(name: str, what: str) -> str:
    if not re.fullmatch(r"auto|cpu|cuda(:\d+)?", name):
        raise InputError(f"{what} {name!r}: expected auto, cpu, cuda or cuda:N")
    if name.startswith("cuda"):
        import torch

        if not torch.cuda.is_available():
            raise InputError(f"{what} {name}: torch {torch.__version__} sees no CUDA device")
    return name


def _subparser(sub, name: str, help_text: str, doc: str):
    return sub.add_parser(name, help=help_text, description=cli.plain(doc), formatter_class=cli.HelpFormatter)


def _launch_parser(sub) -> None:
    from pretrain.train.faults import KINDS

    p = _subparser(sub, "launch", "train (with preflight and supervisor)",
                   "Train a GPT on corpus shards (preflight, supervisor, checkpoints). Under torchrun, one process "
                   "per device. Ctrl-C or SIGTERM: a checkpoint at the next step boundary, then exit 130/143; "
                   "--resume continues exactly.")
    p.add_argument("--config", metavar="PRESET|JSON", help=f"preset ({', '.join(PRESETS)}) or a config JSON (e.g. a RUN/config.json)")
    p.add_argument("--data", metavar="DIR", help="shard directory with manifest.json (from `corpus build`)")
    p.add_argument("--out", metavar="DIR",
                   help="run directory (checkpoints, metrics, eval): a new or empty folder, or with --resume a run "
                        "to continue; required unless --dry-run")
    p.add_argument("--resume", action="store_true",
                   help="continue RUN from its newest checkpoint that verifies (newer corrupt ones are skipped, "
                        "named and kept); a RUN that does not exist yet is started from --config and --data")
    p.add_argument("--resume-from", metavar="CHECKPOINT",
                   help="continue RUN from this checkpoint file (e.g. RUN/checkpoints/step_00001000.pt)")
    p.add_argument("--max-steps", type=cli.non_negative_int,
                   help="optimizer steps (0 with --time-budget-s: fit the budget)")
    p.add_argument("--time-budget-s", type=cli.non_negative_float, metavar="SECONDS",
                   help="stop (and checkpoint) after this many seconds (0: no limit)")
    p.add_argument("--micro-batch", type=cli.positive_int, help="sequences per device per forward pass")
    p.add_argument("--global-batch-tokens", type=cli.positive_int, help="tokens per optimizer step (any world size)")
    p.add_argument("--lr", type=cli.positive_float, help="peak learning rate")
    p.add_argument("--schedule", choices=list(SCHEDULES), help="learning-rate decay after warmup: "
                   + "; ".join(f"{name}, {s.help}" for name, s in SCHEDULES.items()))
    p.add_argument("--seed", type=cli.non_negative_int, help="seed of the init and the data order")
    p.add_argument("--device", type=device, help="auto, cpu, cuda, cuda:N")
    p.add_argument("--tokenizer", metavar="SPEC", help="tokenizer (name, path or sha256) the shards must have been made with")
    p.add_argument("--set", action="append", default=[], metavar="SECTION.FIELD=VALUE",
                   help="override any config field, e.g. --set model.n_layer=2 (repeatable)")
    p.add_argument("--inject-fault", action="append", default=[], metavar="KIND@STEP",
                   help=f"test fault: {', '.join(KINDS)}")
    p.add_argument("--max-rollbacks", type=cli.non_negative_int, help="supervisor rollbacks honoured before halting")
    p.add_argument("--no-supervisor", action="store_true", help="do not start the supervisor process")
    p.add_argument("--supervisor-args", default="", metavar="ARGS",
                   help="options for python -m pretrain.guard.supervisor, one string (or use the --sup-NAME options below)")
    p.add_argument("--no-eval", action="store_true", help="skip the final evaluation")
    p.add_argument("--preflight-only", action="store_true", help="run the preflight and stop")
    p.add_argument("--dry-run", action="store_true",
                   help="print the plan (steps, tokens, LR, time, checkpoint and disk size, memory) and stop; "
                        "needs no data (the vocabulary is --data's, else --vocab-size)")
    p.add_argument("--tokens-per-s", type=cli.non_negative_float, default=0.0,
                   help="--dry-run: throughput for the time estimate (default: 45%% MFU on an H100, assumed)")
    p.add_argument("--vocab-size", type=cli.positive_int, default=50257,
                   help="--dry-run without --data: the tokenizer's vocabulary (default: GPT-2's)")
    from pretrain.guard.supervisor import add_arguments as supervisor_arguments

    supervisor_arguments(p.add_argument_group("supervisor (each --sup-NAME is passed on as --NAME)"), prefix="sup-")


def _supervisor_args(args) -> list[str]:
    """The --sup-NAME options the user gave, as the supervisor's own --NAME options."""
    from dataclasses import fields

    from pretrain.guard.supervisor import SupervisorConfig

    out = shlex.split(args.supervisor_args)
    for f in fields(SupervisorConfig):
        value = getattr(args, "sup_" + f.name)
        if value is not None:
            out += ["--" + f.name.replace("_", "-"), str(value)]
    return out


def _eval_parser(sub) -> None:
    from pretrain.eval import model_scores as downstream

    p = _subparser(sub, "eval", "per-language evaluation of a run against its random-init twin; bits per byte on "
                   "any text; lm-evaluation-harness tasks",
                   "Per-language loss, bits per byte and per character of a checkpoint against its random-init "
                   "twin (RUN/eval.json and its plot RUN/eval.png; with --out the report goes to that file "
                   "only, RUN is left as it is and no plot is drawn); bits per byte and character on any text "
                   "(--text), for a checkpoint or any HF causal-LM folder (--hf); lm-evaluation-harness tasks "
                   "(--tasks).")
    p.add_argument("--run", metavar="DIR", help="run directory: its validation split against the random-init twin")
    p.add_argument("--checkpoint", metavar="CHECKPOINT", help="checkpoint file (default: the run's latest)")
    p.add_argument("--data", metavar="DIR", help="shard directory (default: the run's)")
    p.add_argument("--max-tokens", type=cli.non_negative_int, default=0, help="targets per language (0 = all)")
    p.add_argument("--samples", type=cli.non_negative_int, default=3, help="sampled continuations per language")
    p.add_argument("--device", type=device, default="auto", help="auto, cpu, cuda, cuda:N")
    p.add_argument("--micro-batch", type=cli.non_negative_int, default=0,
                   help="sequences per forward pass (0: the run's)")
    p.add_argument("--overwrite", action="store_true", help="replace an existing --out file")
    downstream.add_arguments(p)


def build_parser() -> argparse.ArgumentParser:
    from pretrain.perf import bench
    from pretrain.release import export

    parser = cli.parser(PROG, __doc__)
    sub = parser.add_subparsers(dest="command", required=True, metavar="COMMAND")
    _launch_parser(sub)
    _eval_parser(sub)
    bench.add_arguments(_subparser(sub, "bench", "time our training step against transformers' Llama",
                                   bench.__doc__.split("\n\n")[0]))
    export.add_arguments(_subparser(sub, "export", "a checkpoint as a transformers folder",
                                    export.__doc__.split("\n\n")[0]))
    return parser


# --- launch: everything that can be refused is refused here, before any work ----------------------------------

def _absolute(path: str) -> str:
    """``path`` made absolute (symlinks kept), so that a run's records are valid from any folder."""
    return os.path.abspath(path)


def check_shards(path: str, what: str = "--data") -> None:
    """A shard folder: it exists, is a folder and holds a manifest (its content is `open_dataset`'s to check)."""
    from corpus.shards import MANIFEST_NAME

    folder = Path(path)
    if not folder.exists():
        raise InputError(f"{what} {folder}: no such folder (expected the shards of `corpus build`)")
    if not folder.is_dir():
        raise InputError(f"{what} {folder}: is a file; expected the shard folder (with {MANIFEST_NAME}) of "
                         "`corpus build`")
    if not (folder / MANIFEST_NAME).is_file():
        raise InputError(f"{what} {folder}: holds no {MANIFEST_NAME}; is it a shard folder of `corpus build`?")


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
        check_output_file(run_dir / rundir.CONFIG, overwrite=True, what="--out")
        return
    if not ours_run and run_dir.is_dir() and is_ours(run_dir):
        raise OutputPathError(f"--out {run_dir}: holds the output of another command, not a run; choose a new "
                              "folder")
    check_output_dir(run_dir, overwrite=ours_run, inputs=inputs)


def _resolve_config(args, overrides: list[str], sup_args: list[str]) -> RunConfig:
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
    else:
        if not args.config or not args.data:
            raise InputError("launch needs --config and --data (or --resume of an existing run: "
                             f"{saved} does not exist)")
        if args.resume:
            print(f"[pretrain] --resume: {saved} does not exist yet, starting a new run", file=sys.stderr)
        cfg = _new_config(args, overrides)
    if sup_args:
        cfg.train.supervisor_args = sup_args
    return cfg


def _new_config(args, overrides: list[str]) -> RunConfig:
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


def _overrides(args) -> list[str]:
    pairs = [("data.path", args.data and _absolute(args.data)), ("train.out", args.out and _absolute(args.out)),
             ("train.max_steps", args.max_steps), ("train.time_budget_s", args.time_budget_s),
             ("data.micro_batch", args.micro_batch), ("train.global_batch_tokens", args.global_batch_tokens),
             ("optim.lr", args.lr), ("optim.schedule", args.schedule), ("train.seed", args.seed),
             ("train.device", args.device), ("data.tokenizer", args.tokenizer),
             ("train.max_rollbacks", args.max_rollbacks)]
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


def start_supervisor(run_dir: Path, generation: int, args: list[str]) -> subprocess.Popen:
    """``python -m pretrain.guard.supervisor --run RUN --trainer-pid PID --generation GEN ...`` beside this trainer.

    In a session of its own, so that a Ctrl-C at the terminal reaches only the trainer, which stops the
    supervisor itself once its checkpoint is saved; after a kill -9 of the trainer the supervisor sees it gone
    at its next poll and exits."""
    cmd = [sys.executable, "-m", "pretrain.guard.supervisor", "--run", str(run_dir), "--trainer-pid", str(os.getpid()),
           "--generation", str(generation), *args]
    return subprocess.Popen(cmd, start_new_session=True)


def stop_supervisor(proc: subprocess.Popen | None) -> None:
    if proc is None or proc.poll() is not None:
        return
    proc.terminate()
    try:
        proc.wait(timeout=10)
    except subprocess.TimeoutExpired:
        proc.kill()
        proc.wait()


def lockstep(run_dir: Path, proc: subprocess.Popen):
    """An ``on_step`` for the trainer that waits until the supervisor has judged the step just logged."""
    import time

    def wait(record: dict) -> None:
        while not rundir.acked(run_dir, record["gen"], record["step"]):
            if proc.poll() is not None:
                raise RuntimeError(f"the supervisor exited (code {proc.returncode}) before judging step "
                                   f"{record['step']}; see {run_dir / rundir.SUPERVISOR_LOG}")
            time.sleep(0.01)

    return wait


def use_fsdp(cfg: RunConfig, runtime) -> bool:
    """FSDP2 when asked, or ("auto") when fp32 weights, gradients and AdamW state (16 bytes per parameter)
    would take more than 60% of one GPU, so DDP's full replica plus activations would not fit."""
    import torch

    from pretrain.model.gpt import count_parameters

    if cfg.train.fsdp != "auto":
        return cfg.train.fsdp == "yes"
    if runtime.device.type != "cuda":
        return False
    return 16 * count_parameters(cfg.model) > 0.6 * torch.cuda.get_device_properties(runtime.device).total_memory


def dry_run(args, sup_args: list[str]) -> int:
    """``launch --dry-run``: the plan of the config the same arguments would train, without data or a device."""
    from pretrain.guard.run_plan import format_plan, plan_run

    if args.data:
        check_shards(args.data)
    if args.out and (args.resume or args.resume_from):
        cfg = _resolve_config(args, _overrides(args), sup_args)
    else:
        if not args.config:
            raise InputError("launch --dry-run needs --config")
        cfg = _new_config(args, [o for o in _overrides(args) if not o.startswith("train.out=")])
    print(format_plan(plan_run(cfg, tokens_per_s=args.tokens_per_s)))
    return 0


def launch(args) -> int:
    if args.dry_run:
        return dry_run(args, _supervisor_args(args))
    if not args.out:
        raise InputError("launch needs --out (the run directory)")
    resume = args.resume or bool(args.resume_from)
    if args.data:
        check_shards(args.data)
    if args.resume_from and not Path(args.resume_from).is_file():
        raise InputError(f"--resume-from {args.resume_from}: no such checkpoint file")
    if args.config and Path(args.config).suffix == ".json" and not Path(args.config).is_file():
        raise InputError(f"--config {args.config}: no such file")
    check_run_dir(args.out, resume=resume, inputs=[p for p in (args.data, args.config) if p])
    cfg = _resolve_config(args, _overrides(args), _supervisor_args(args))
    check_runnable(cfg)
    return train(cfg, Path(cfg.train.out), args)


def train(cfg: RunConfig, run_dir: Path, args) -> int:
    """Preflight, supervisor, the training loop (signals deferred to its step boundaries), final evaluation."""
    from pretrain.guard.preflight import format_preflight, run_preflight, write_report
    from pretrain.train import distributed
    from pretrain.train.data import open_dataset
    from pretrain.train.trainer import Trainer

    runtime = distributed.setup(cfg.train.device, cfg.train.dtype)
    try:
        runtime.fsdp = runtime.distributed and use_fsdp(cfg, runtime)
        dataset = open_dataset(cfg.data.path)
        trainer = Trainer(cfg, dataset, runtime, resume=args.resume, resume_from=args.resume_from)
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
            supervisor, on_step = None, None
            try:
                if runtime.is_main and cfg.train.supervisor:
                    forwarded = cfg.train.supervisor_args
                    if "--max-rollbacks" not in forwarded:
                        forwarded = [*forwarded, "--max-rollbacks", str(cfg.train.max_rollbacks)]
                    supervisor = start_supervisor(run_dir, generation, forwarded)
                    if cfg.train.supervisor_lockstep:
                        on_step = lockstep(run_dir, supervisor)
                code = trainer.fit(on_step, stop)
            finally:
                stop_supervisor(supervisor)
        if trainer.stopped_by:
            if runtime.is_main:
                print(f"{PROG}: stopped by {signal.Signals(trainer.stopped_by).name} at step {trainer.step}, "
                      f"checkpoint saved; continue with: pretrain launch --out {run_dir} --resume", file=sys.stderr)
            return code
        if code == 0 and runtime.is_main and not args.no_eval:
            from pretrain.eval.run_eval import evaluate_run, format_eval

            report = evaluate_run(run_dir, device=str(runtime.device), max_tokens=cfg.data.eval_tokens)
            print(format_eval(report), file=sys.stderr)
        return code
    finally:
        distributed.teardown()


# --- eval ------------------------------------------------------------------------------------------------------

def run_eval(args) -> int:
    from pretrain.eval.model_scores import format_scores, plan_from_args, score_model
    from pretrain.eval.run_eval import evaluate_run, format_eval

    texts = [t.partition("=") for t in args.text]
    for lang, _, _ in texts:
        cli.check_label(lang.strip(), "--text: label")
    out = Path(args.out) if args.out else None
    if out is not None:
        inputs = [p for p in (args.checkpoint, args.hf, *(path for _, _, path in texts)) if p]
        check_output_file(out, overwrite=args.overwrite, inputs=inputs)
    if args.run:
        rundir.check_run(args.run, checkpoint=not args.checkpoint)
    if args.data:
        check_shards(args.data)
    plan = plan_from_args(args)  # texts and task names are checked before any model runs
    report = None
    if args.run:
        report = evaluate_run(args.run, checkpoint=args.checkpoint, data=args.data, max_tokens=args.max_tokens,
                              samples=args.samples, device=args.device, micro_batch=args.micro_batch, out=out)
        print(format_eval(report))
        print(f"wrote {out}" if out else f"wrote {Path(args.run) / 'eval.json'} and eval.png")
    if plan is not None:
        report = score_model(plan, report)
        print(format_scores(report))
        print(f"wrote {plan.out}")
    return 0


def run(args: argparse.Namespace) -> int:
    from pretrain.perf import bench
    from pretrain.release import export

    commands = {"launch": launch, "eval": run_eval, "bench": bench.main, "export": export.run}
    return commands[args.command](args)


def main(argv: list[str] | None = None) -> int:
    return cli.run_command(PROG, build_parser, run, argv)
