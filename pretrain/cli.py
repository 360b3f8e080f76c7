"""The ``pretrain`` command (also ``python -m pretrain``; ``torchrun ... -m pretrain launch`` for several GPUs).

    pretrain launch --config PRESET|CONFIG.json --data SHARDS --out RUN [--resume] [--max-steps N]
                    [--time-budget-s S] [--set section.field=value ...] [--inject-fault KIND@STEP ...]
                                                                                     (pretrain.guard.launch)
    pretrain eval --run RUN [--checkpoint PATH] [--max-tokens N] [--text LANG=PATH ...] [--tasks T1,T2]
                  [--out FILE.json]
    pretrain eval --checkpoint CKPT | --hf DIR  --text LANG=PATH ... [--tasks T1,T2] --out FILE.json
                                                                                     (pretrain.eval.command)
    pretrain bench --config PRESET [--micro-batch B] [--steps N] [--out FILE.json]   (pretrain.perf.bench)
    pretrain export --checkpoint CKPT --out DIR [--tokenizer SPEC] [--overwrite]            (pretrain.release.export)

--out of launch is a new or empty folder, or with --resume a run of ours to continue; nothing else is
written into. Ctrl-C or SIGTERM during training saves a checkpoint at the next step boundary and stops
(exit 130/143); --resume then goes on exactly where it stopped.

Progress bars are drawn only on a terminal: with stderr in a file (a Slurm job's log, a redirect) or with
--no-progress, launch writes one plain line every train.log_interval steps instead, and no bar of the libraries
a command runs (transformers loading or writing weights, lm-evaluation-harness) is drawn.

Exit codes: 0 done, 1 training error, 2 bad arguments or data refused (one line, before any work),
3 halted by the supervisor, 130/143 stopped by SIGINT/SIGTERM.
"""

from __future__ import annotations

import argparse
import functools

from common import cli
from pretrain.eval import command as eval_command
from pretrain.eval.run_eval import final_eval
from pretrain.guard import launch
from pretrain.perf import bench
from pretrain.release import export

PROG = "pretrain"
# name -> (the module that owns the command: add_arguments(parser) and run(args), its one-line help)
COMMANDS = {
    "launch": (launch, "train (with preflight and supervisor)"),
    "eval": (eval_command, "per-language evaluation of a run against its random-init twin; bits per byte on any "
                           "text; lm-evaluation-harness tasks"),
    "bench": (bench, "time our training step against transformers' Llama"),
    "export": (export, "a checkpoint as a transformers folder"),
}


def build_parser() -> argparse.ArgumentParser:
    parser = cli.parser(PROG, __doc__)
    sub = parser.add_subparsers(dest="command", required=True, metavar="COMMAND")
    for name, (module, help_text) in COMMANDS.items():
        description = cli.plain(module.__doc__.split("\n\n")[0])
        module.add_arguments(sub.add_parser(name, help=help_text, description=description,
                                            formatter_class=cli.HelpFormatter))
    return parser


def run(args: argparse.Namespace) -> int:
    # launch's final evaluation is handed in here: pretrain.guard sits below pretrain.eval.
    commands = {"launch": functools.partial(launch.run, final_eval=final_eval)}
    return commands.get(args.command, COMMANDS[args.command][0].run)(args)


def main(argv: list[str] | None = None) -> int:
    return cli.run_command(PROG, build_parser, run, argv)
