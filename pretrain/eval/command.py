"""Per-language loss, bits per byte and per character of a checkpoint against its random-init twin
(RUN/eval.json and its plot RUN/eval.png; with --out the report goes to that file only, RUN is left as it is
and no plot is drawn); bits per byte and character on any text (--text), for a checkpoint or any HF causal-LM
folder (--hf); lm-evaluation-harness tasks (--tasks).

``pretrain eval``: its options and what it runs, `pretrain.eval.run_eval` for ``--run`` and
`pretrain.eval.model_scores` for ``--text`` and ``--tasks``; every input is checked before any model runs.
"""

from __future__ import annotations

import argparse
from pathlib import Path

from common import cli, paths
from pretrain.eval.model_scores import format_scores, plan_from_args, score_model
from pretrain.eval.run_eval import evaluate_run, format_eval
from pretrain.train import rundir
from pretrain.train.data import check_shards
from pretrain.train.distributed import device_arg


def add_arguments(p: argparse.ArgumentParser) -> None:
    p.add_argument("--run", metavar="DIR", type=paths.input_dir("eval.json", "eval.png"), help="run directory: its validation split against the random-init twin")
    p.add_argument("--checkpoint", metavar="CHECKPOINT", type=paths.input_file, help="checkpoint file (default: the run's latest)")
    p.add_argument("--data", metavar="DIR", type=paths.input_folder, help="shard directory (default: the run's)")
    p.add_argument("--max-tokens", type=cli.non_negative_int, default=0, help="text tokens scored per language (0 = all: exact bits per byte)")
    p.add_argument("--samples", type=cli.non_negative_int, default=3, help="sampled continuations per language")
    p.add_argument("--device", type=paths.not_a_path(device_arg), default="auto", help="auto, cpu, cuda, cuda:N")
    p.add_argument("--micro-batch", type=cli.non_negative_int, default=0,
                   help="sequences per forward pass (0: the run's)")
    p.add_argument("--overwrite", action="store_true", help="replace an existing --out file")
    p.add_argument("--hf", type=paths.name_or_path, help="an HF causal-LM folder (an export, or any public model) for --text and --tasks")
    p.add_argument("--text", action="append", default=[], metavar="LANG=PATH", type=paths.input_spec(),
                   help="bits per byte/char on this text (any format fertility reads; repeatable)")
    p.add_argument("--max-chars", type=cli.positive_int, help="score the first documents of each text up to this many chars")
    p.add_argument("--no-normalize", action="store_true", help="score the text as given, not NFC-normalised")
    p.add_argument("--tasks", default="", type=paths.text, help="lm-evaluation-harness tasks, comma-separated "
                   "(e.g. belebele_ben_Beng,bangla_mmlu; offline: bangla_sample_cloze)")
    p.add_argument("--task-path", action="append", default=[], type=paths.input_folder, help="a folder of extra harness task YAMLs")
    p.add_argument("--num-fewshot", type=cli.non_negative_int, help="few-shot examples (default: each task's own)")
    p.add_argument("--limit", type=cli.non_negative_int, default=0, help="documents per task (0 = all; a smoke run)")
    p.add_argument("--batch-size", type=cli.positive_int, default=8, help="sequences per forward pass (text and tasks)")
    p.add_argument("--no-progress", action="store_true",
                   help="no progress bars (loading the model, the harness's requests); none are drawn either when "
                        "stderr is not a terminal")
    p.add_argument("--out", type=paths.output_file, help="the report file to write (default RUN/eval.json, plot RUN/eval.png; with --out "
                   "only this file is written, no plot; needed without --run)")


def run(args: argparse.Namespace) -> int:
    texts = [t.partition("=") for t in args.text]
    for lang, _, _ in texts:
        cli.check_label(lang.strip(), "--text: label")
    out = Path(args.out) if args.out else None  # checked against every input by its role (common.paths)
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
    if plan is not None:  # the scores join the run's report in the same file
        report = score_model(plan, report)
        print(format_scores(report))
    written = plan.out if plan is not None else out or Path(args.run) / "eval.json"
    print(f"wrote {written}" + (" and eval.png" if args.run and not out else ""))
    return 0
