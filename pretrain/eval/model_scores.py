"""``pretrain eval`` beyond the run's own validation split: bits per byte and character on any text
(``--text``, :mod:`pretrain.eval.text_bits`) and lm-evaluation-harness tasks (``--tasks``, :mod:`pretrain.eval.harness`),
for a run's checkpoint, a checkpoint file or any HF causal-LM folder, written into ``eval.json``.

    pretrain eval --run RUN --text bn=bn.txt --tasks belebele_ben_Beng     -> RUN/eval.json, all sections
    pretrain eval --checkpoint CKPT --text bn=bn.txt --out a.json           (no validation split needed)
    pretrain eval --hf DIR --text bn=bn.txt --tasks bangla_sample_cloze --out b.json

Everything is checked before any model runs: the model path, each text (its first document is read) and
each task name. The sections added to eval.json (schema_version 1; a run's file keeps its other sections for
the same checkpoint, `pretrain.eval.report`)::

    "text":  {"model", "kind", "tokenizer", "context", "normalized", "max_chars", "checkpoint_sha256"?,
              "languages": {LANG: {"bits_per_byte", "bits_per_char", "bits_per_token", "source",
                                   "documents", "chars", "bytes", "tokens", "bits"}}}
    "tasks": {"harness", "model", "model_args", "num_fewshot", "limit", "checkpoint_sha256"?,
              "results": {TASK: {"metric", "score", "chance", "documents", "metrics", "stderr"}}}

With a checkpoint, ``--tasks`` exports it (``pretrain.release.export``) to a temporary folder for the harness's
HF backend and removes it afterwards.
"""

from __future__ import annotations

import argparse
import shutil
import tempfile
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from common.fileio import write_json
from common.paths import stamped
from fertility.text import TextSource, iter_documents, parse_text_arg
from pretrain.eval.harness import HarnessSettings, check_tasks, format_tasks, run_tasks, task_manager
from pretrain.eval.report import checkpoint_sha256
from pretrain.eval.text_bits import TextEvalError, check_hf_weights, evaluate_texts, load_scorer


@dataclass
class ScorePlan:
    """What to score and where to write it; made (and checked) before any work."""

    model: Path  # a checkpoint file or an HF folder
    out: Path
    texts: list[TextSource] = field(default_factory=list)
    tasks: list[str] = field(default_factory=list)
    max_chars: int | None = None
    normalize: bool = True
    device: str = "auto"
    harness: HarnessSettings = field(default_factory=HarnessSettings)


def plan_from_args(args: argparse.Namespace) -> ScorePlan | None:
    """The checked plan of a ``pretrain eval`` command line; None when it asks for no text and no task."""
    from pretrain.train.checkpoint import latest_checkpoint

    tasks = [t.strip() for t in args.tasks.split(",") if t.strip()]
    if not args.text and not tasks:
        if args.run:
            return None
        raise TextEvalError("pretrain eval needs --run, or --text/--tasks with --checkpoint or --hf")
    if args.hf:
        model = Path(args.hf)
    elif args.checkpoint:
        model = Path(args.checkpoint)
    elif args.run:
        model = latest_checkpoint(args.run)
        if model is None:
            raise FileNotFoundError(f"{args.run}: no checkpoint to evaluate (train first, or pass --checkpoint)")
    else:
        raise TextEvalError("--text and --tasks need a model: --run, --checkpoint or --hf")
    if not model.exists():
        raise FileNotFoundError(f"{model}: no such checkpoint or folder")
    if model.is_dir():
        check_hf_weights(model)  # damaged weights: one line now, for the text scorer and the harness alike
    if not args.out and not args.run:
        raise TextEvalError("--out FILE is needed without --run (where eval.json goes)")
    texts = [parse_text_arg(t) for t in args.text]
    for source in texts:
        next(iter_documents(source))  # a missing or unreadable text fails now, naming the file and line
    settings = HarnessSettings(num_fewshot=args.num_fewshot, limit=args.limit, batch_size=args.batch_size,
                               device=_device(args.device), task_paths=args.task_path)
    if tasks:
        check_tasks(tasks, task_manager(settings.task_paths))
    return ScorePlan(model=model, out=Path(args.out) if args.out else Path(args.run) / "eval.json",
                          texts=texts, tasks=tasks, max_chars=args.max_chars, normalize=not args.no_normalize,
                          device=args.device, harness=settings)


def _device(name: str) -> str:
    import torch

    return ("cuda" if torch.cuda.is_available() else "cpu") if name == "auto" else name


def score_model(plan: ScorePlan, report: dict[str, Any] | None = None) -> dict[str, Any]:
    """Score the texts and tasks of ``plan``, add them to ``report`` (a run's eval.json) and write it."""
    from pretrain.release.export import export_checkpoint

    sha256 = checkpoint_sha256(plan.model)
    # Which checkpoint each section scored, so that `pretrain export` can tell which belong to the one it exports.
    provenance = {"checkpoint_sha256": sha256} if sha256 else {}
    report = dict(report) if report else {"schema_version": 1, **provenance}
    if plan.texts:
        scorer = load_scorer(plan.model, plan.device)
        report["text"] = {**evaluate_texts(scorer, plan.texts, max_chars=plan.max_chars, normalize=plan.normalize,
                                           batch_size=plan.harness.batch_size), **provenance}
    if plan.tasks:
        work = None
        try:
            hf = plan.model
            if plan.model.is_file():
                work = Path(tempfile.mkdtemp(prefix="pretrain-harness-"))
                hf = export_checkpoint(plan.model, work / "hf")
            report["tasks"] = {**run_tasks(hf, plan.tasks, plan.harness), **provenance}
            if work is not None:
                report["tasks"]["model"] = str(plan.model)  # the temporary export is gone
        finally:
            if work is not None:  # provably ours: mkdtemp made it in this process under a name nothing else has
                shutil.rmtree(work, ignore_errors=True)
    plan.out.parent.mkdir(parents=True, exist_ok=True)
    write_json(plan.out, stamped(report))
    return report


def format_scores(report: dict[str, Any]) -> str:
    """Terminal tables of the ``text`` and ``tasks`` sections."""
    lines = []
    if "text" in report:
        lines.append(f"text, scored by {report['text']['model']}")
        lines.append(f"{'lang':<6}{'bits/byte':>11}{'bits/char':>11}{'bits/token':>12}{'tokens':>10}{'chars':>10}")
        for lang, r in report["text"]["languages"].items():
            lines.append(f"{lang:<6}{r['bits_per_byte']:>11.4f}{r['bits_per_char']:>11.4f}"
                         f"{r['bits_per_token']:>12.4f}{r['tokens']:>10,}{r['chars']:>10,}")
    if "tasks" in report:
        lines.append(format_tasks(report["tasks"]))
    return "\n".join(lines)
