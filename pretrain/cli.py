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

import shlex
import subprocess
import sys
from pathlib import Path

from common import cli as clihelp
from common.cli import HelpFormatter, plain
from common.fileio import read_json
from pretrain.config import RunConfig, apply_overrides, preset

EXIT_BAD_INPUT = 2


def _subparser(sub, name: str, help_text: str, doc: str):
    return sub.add_parser(name, help=help_text, description=plain(doc), formatter_class=HelpFormatter)


def _launch_parser(sub) -> None:
    p = _subparser(sub, "launch", "train (with preflight and supervisor)",
                   "Train a GPT on corpus shards (preflight, supervisor, checkpoints). Under torchrun, one process "
                   "per device.")
    p.add_argument("--config", metavar="PRESET|JSON", help="preset (tiny, bangla-0.4b) or a config JSON (e.g. a RUN/config.json)")
    p.add_argument("--data", metavar="DIR", help="shard directory with manifest.json (from `corpus build`)")
    p.add_argument("--out", metavar="DIR", help="run directory (checkpoints, metrics, eval); required unless --dry-run")
    p.add_argument("--resume", action="store_true",
                   help="continue RUN from its newest checkpoint that verifies (newer corrupt ones are skipped, "
                        "named and kept)")
    p.add_argument("--resume-from", metavar="CHECKPOINT",
                   help="continue RUN from this checkpoint file (e.g. RUN/checkpoints/step_00001000.pt)")
    p.add_argument("--max-steps", type=int, metavar="N", help="optimizer steps (0 with --time-budget-s: fit the budget)")
    p.add_argument("--time-budget-s", type=float, metavar="SECONDS", help="stop (and checkpoint) after this many seconds")
    p.add_argument("--micro-batch", type=int, metavar="N", help="sequences per device per forward pass")
    p.add_argument("--global-batch-tokens", type=int, metavar="N", help="tokens per optimizer step (any world size)")
    p.add_argument("--lr", type=float, metavar="X", help="peak learning rate")
    p.add_argument("--schedule", choices=["cosine", "wsd"], help="learning-rate decay after warmup")
    p.add_argument("--seed", type=int, metavar="N", help="seed of the init and the data order")
    p.add_argument("--device", metavar="DEVICE", help="auto, cpu, cuda, cuda:N")
    p.add_argument("--tokenizer", metavar="SPEC", help="tokenizer (name, path or sha256) the shards must have been made with")
    p.add_argument("--set", action="append", default=[], metavar="SECTION.FIELD=VALUE",
                   help="override any config field, e.g. --set model.n_layer=2 (repeatable)")
    p.add_argument("--inject-fault", action="append", default=[], metavar="KIND@STEP",
                   help="test fault: nan_loss, loss_spike, grad_explode, slow, hang, kill_during_checkpoint")
    p.add_argument("--max-rollbacks", type=int, metavar="N", help="supervisor rollbacks honoured before halting")
    p.add_argument("--no-supervisor", action="store_true", help="do not start the supervisor process")
    p.add_argument("--supervisor-args", default="", metavar="ARGS",
                   help="options for python -m pretrain.supervisor, one string (or use the --sup-NAME options below)")
    p.add_argument("--no-eval", action="store_true", help="skip the final evaluation")
    p.add_argument("--preflight-only", action="store_true", help="run the preflight and stop")
    p.add_argument("--dry-run", action="store_true",
                   help="print the plan (steps, tokens, LR, time, checkpoint and disk size, memory) and stop; "
                        "needs no data (the vocabulary is --data's, else --vocab-size)")
    p.add_argument("--tokens-per-s", type=float, default=0.0, metavar="X",
                   help="--dry-run: throughput for the time estimate (default: 45%% MFU on an H100, assumed)")
    p.add_argument("--vocab-size", type=int, default=50257, metavar="N",
                   help="--dry-run without --data: the tokenizer's vocabulary (default: GPT-2's)")
    from pretrain.supervisor import add_arguments as supervisor_arguments

    supervisor_arguments(p.add_argument_group("supervisor (each --sup-NAME is passed on as --NAME)"), prefix="sup-")


def _supervisor_args(args) -> list[str]:
    """The --sup-NAME options the user gave, as the supervisor's own --NAME options."""
    from dataclasses import fields

    from pretrain.supervisor import SupervisorConfig

    out = shlex.split(args.supervisor_args)
    for f in fields(SupervisorConfig):
        value = getattr(args, "sup_" + f.name)
        if value is not None:
            out += ["--" + f.name.replace("_", "-"), str(value)]
    return out


def _eval_parser(sub) -> None:
    from pretrain import downstream

    p = _subparser(sub, "eval", "per-language evaluation of a run against its random-init twin; bits per byte on "
                   "any text; lm-evaluation-harness tasks",
                   "Per-language loss, bits per byte and per character of a checkpoint against its random-init "
                   "twin (RUN/eval.json, eval.png); bits per byte and character on any text (--text), for a "
                   "checkpoint or any HF causal-LM folder (--hf); lm-evaluation-harness tasks (--tasks).")
    p.add_argument("--run", metavar="DIR", help="run directory: its validation split against the random-init twin")
    p.add_argument("--checkpoint", metavar="CHECKPOINT", help="checkpoint file (default: the run's latest)")
    p.add_argument("--data", metavar="DIR", help="shard directory (default: the run's)")
    p.add_argument("--max-tokens", type=int, default=0, metavar="N", help="targets per language (0 = all)")
    p.add_argument("--samples", type=int, default=3, metavar="N", help="sampled continuations per language")
    p.add_argument("--device", default="auto", metavar="DEVICE", help="auto, cpu, cuda, cuda:N")
    p.add_argument("--micro-batch", type=int, default=0, metavar="N", help="sequences per forward pass (0: the run's)")
    downstream.add_arguments(p)


def _resolve_config(args, overrides: list[str], sup_args: list[str]) -> RunConfig:
    """The run's config: the saved one on --resume (only run-control fields may change), else the preset."""
    from pretrain.config import RESUMABLE_KEYS
    from pretrain.data import DataError

    saved = Path(args.out) / "config.json"
    if (args.resume or args.resume_from) and saved.exists():
        raw = read_json(saved)
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
        cfg = _new_config(args, overrides)
    if sup_args:
        cfg.train.supervisor_args = sup_args
    return cfg


def _new_config(args, overrides: list[str]) -> RunConfig:
    """A new run's config: ``--config`` (a preset sized to the shards' vocabulary, else to ``--vocab-size``, or a
    config JSON) with ``overrides`` applied."""
    from pretrain.data import open_dataset

    if Path(args.config).suffix == ".json":
        cfg = RunConfig.from_dict(read_json(args.config))
    else:
        vocab = open_dataset(args.data).manifest.tokenizer.vocab_size if args.data else args.vocab_size
        cfg = preset(args.config, vocab)
    return apply_overrides(cfg, overrides)


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


def start_supervisor(run_dir: Path, generation: int, args: list[str]) -> subprocess.Popen:
    """``python -m pretrain.supervisor --run RUN --trainer-pid PID --generation GEN ...`` beside this trainer."""
    import os

    cmd = [sys.executable, "-m", "pretrain.supervisor", "--run", str(run_dir), "--trainer-pid", str(os.getpid()),
           "--generation", str(generation), *args]
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


def lockstep(run_dir: Path, proc: subprocess.Popen):
    """An ``on_step`` for the trainer that waits until the supervisor has judged the step just logged."""
    import time

    from pretrain import rundir

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

    from pretrain.model import count_parameters

    if cfg.train.fsdp != "auto":
        return cfg.train.fsdp == "yes"
    if runtime.device.type != "cuda":
        return False
    return 16 * count_parameters(cfg.model) > 0.6 * torch.cuda.get_device_properties(runtime.device).total_memory


def dry_run(args, sup_args: list[str]) -> int:
    """``launch --dry-run``: the plan of the config the same arguments would train, without data or a device."""
    from pretrain.data import DataError
    from pretrain.plan import format_plan, run_plan

    if args.out and (args.resume or args.resume_from):
        cfg = _resolve_config(args, _overrides(args), sup_args)
    else:
        if not args.config:
            raise DataError("launch --dry-run needs --config")
        cfg = _new_config(args, [o for o in _overrides(args) if not o.startswith("train.out=")])
    print(format_plan(run_plan(cfg, tokens_per_s=args.tokens_per_s)))
    return 0


def launch(args, sup_args: list[str]) -> int:
    from pretrain import distributed
    from pretrain.checkpoint import step_checkpoints
    from pretrain.data import DataError, open_dataset
    from pretrain.preflight import format_report, run_preflight, write_report
    from pretrain.train import Trainer

    if args.dry_run:
        return dry_run(args, sup_args)
    if not args.out:
        raise DataError("launch needs --out (the run directory)")
    resume = args.resume or bool(args.resume_from)
    cfg = _resolve_config(args, _overrides(args), sup_args)
    run_dir = Path(cfg.train.out)
    if not resume and step_checkpoints(run_dir):
        raise FileExistsError(f"{run_dir} already holds checkpoints; pass --resume to continue it, or another --out")
    runtime = distributed.setup(cfg.train.device, cfg.train.dtype)
    try:
        runtime.fsdp = runtime.distributed and use_fsdp(cfg, runtime)
        dataset = open_dataset(cfg.data.path)
        trainer = Trainer(cfg, dataset, runtime, resume=args.resume, resume_from=args.resume_from)
        report = run_preflight(trainer)
        if runtime.is_main:
            run_dir.mkdir(parents=True, exist_ok=True)
            write_report(report, run_dir)
            print(format_report(report), file=sys.stderr)
        if not report.ok:
            return EXIT_BAD_INPUT
        if args.preflight_only:
            return 0
        generation = trainer.begin()
        supervisor, on_step = None, None
        if runtime.is_main and cfg.train.supervisor:
            forwarded = cfg.train.supervisor_args
            if "--max-rollbacks" not in forwarded:
                forwarded = [*forwarded, "--max-rollbacks", str(cfg.train.max_rollbacks)]
            supervisor = start_supervisor(run_dir, generation, forwarded)
            if cfg.train.supervisor_lockstep:
                on_step = lockstep(run_dir, supervisor)
        try:
            code = trainer.fit(on_step)
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
    parser = clihelp.parser("pretrain", __doc__)
    sub = parser.add_subparsers(dest="command", required=True, metavar="COMMAND")
    _launch_parser(sub)
    _eval_parser(sub)
    from pretrain import bench, export

    bench.add_arguments(_subparser(sub, "bench", "time our training step against transformers' Llama",
                                   bench.__doc__.split("\n\n")[0]))
    export.add_arguments(_subparser(sub, "export", "a checkpoint as a transformers folder",
                                    export.__doc__.split("\n\n")[0]))
    args = parser.parse_args(argv)
    from pretrain.checkpoint import CheckpointError
    from pretrain.data import DataError

    try:
        if args.command in ("bench", "export"):
            return (bench if args.command == "bench" else export).main(args)
        if args.command == "launch":
            return launch(args, _supervisor_args(args))
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
