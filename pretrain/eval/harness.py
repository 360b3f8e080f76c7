"""Downstream tasks through lm-evaluation-harness (``pip install 'bangla-tokfair[eval]'``), on an HF folder.

    pretrain eval --run RUN --tasks belebele_ben_Beng,bangla_mmlu     (the checkpoint is exported first)
    pretrain eval --hf DIR --tasks bangla_sample_cloze --out eval.json

The harness's own HF backend runs the model, so scores are those anyone gets with ``lm_eval --model hf``.
Task names are the harness's; the Bangla ones in lm-eval 0.4.13 are ``belebele_ben_Beng``, ``bangla_mmlu``,
``boolqa_bn``, ``openbookqa_bn``, ``piqa_bn``, ``bangla_commonsenseqa`` and ``global_mmlu_bn`` (a group).
They download their data from the hub on first use. ``bangla_sample_cloze`` (``pretrain/eval/tasks``,
made from the repository's sample text) runs offline and is what the tests use.

Each task's chance level is measured on the documents actually scored: the mean over documents of
1 / (number of choices) for multiple-choice tasks (a group: its subtasks' weighted by their documents);
None for generation tasks, where chance is not defined by the format.
"""

from __future__ import annotations

import difflib
from collections.abc import Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from common.errors import InputError

LOCAL_TASKS = Path(__file__).with_name("tasks")


class HarnessError(InputError):
    """lm-evaluation-harness missing, or a task it does not know; the message says what to do."""


@dataclass
class HarnessSettings:
    """How the harness runs; ``limit`` caps documents per task (a smoke run), 0 = all."""

    num_fewshot: int | None = None  # None: each task's own default
    limit: int = 0
    batch_size: int = 8
    device: str = "cpu"
    task_paths: Sequence[str] = ()  # folders of extra task YAMLs, besides the shipped ones


def task_manager(task_paths: Sequence[str] = ()):
    """The harness's task index with the shipped local tasks and ``task_paths`` added."""
    try:
        from lm_eval.tasks import TaskManager
    except ImportError:
        raise HarnessError("--tasks needs lm-evaluation-harness: pip install 'bangla-tokfair[eval]'") from None
    for p in task_paths:
        if not Path(p).is_dir():
            raise HarnessError(f"--task-path {p}: not a folder of task YAML files")
    return TaskManager(include_path=[str(LOCAL_TASKS), *map(str, task_paths)])


def check_tasks(names: Sequence[str], manager) -> None:
    """Refuse, before any work, task names the harness does not know (with the closest known names)."""
    known = set(manager.all_tasks)
    unknown = [n for n in names if n not in known]
    if unknown:
        hints = "; ".join(f"{n}: did you mean {', '.join(_similar(n, known)) or '?'}" for n in unknown)
        raise HarnessError(f"lm-evaluation-harness knows no task {', '.join(unknown)} ({hints}); "
                           "list them with `lm_eval ls tasks`")


def _parts(name: str) -> frozenset[str]:
    return frozenset("bn" if p in ("bangla", "bengali") else p for p in name.lower().split("_"))


def _similar(name: str, known: set[str]) -> list[str]:
    """Known names with the same words in any order ("bangla_piqa" -> "piqa_bn"), else the closest spellings."""
    same = sorted(k for k in known if _parts(k) == _parts(name))
    return same or difflib.get_close_matches(name, known, 3, 0.6)


def run_tasks(hf_dir: str | Path, names: Sequence[str], settings: HarnessSettings, manager=None) -> dict[str, Any]:
    """Run ``names`` on the HF folder ``hf_dir``; the ``tasks`` section of eval.json."""
    import lm_eval

    manager = manager or task_manager(settings.task_paths)
    check_tasks(names, manager)
    hf_dir = Path(hf_dir)
    # Our exports were trained with BOS before every document; the harness adds none by default.
    ours = (hf_dir / "export.json").is_file()
    model_args = {"pretrained": str(hf_dir), "dtype": "float32", "device": settings.device,
                  **({"add_bos_token": True} if ours else {})}
    out = lm_eval.simple_evaluate(model="hf", model_args=model_args, tasks=list(names),
                                  num_fewshot=settings.num_fewshot, batch_size=settings.batch_size,
                                  limit=settings.limit or None, task_manager=manager, log_samples=True,
                                  bootstrap_iters=1000)
    return {"harness": f"lm-eval {lm_eval.__version__}", "model": str(hf_dir), "model_args": model_args,
            "num_fewshot": settings.num_fewshot, "limit": settings.limit,
            "results": {name: task_result(name, out) for name in names}}


def _chance_and_count(name: str, out: dict[str, Any]) -> tuple[float | None, int]:
    samples = out.get("samples", {}).get(name)
    if samples is not None:
        if not samples or out["configs"][name].get("output_type") != "multiple_choice":
            return None, len(samples)
        return sum(1 / len(s["arguments"]) for s in samples) / len(samples), len(samples)
    parts = [_chance_and_count(sub, out) for sub in out.get("group_subtasks", {}).get(name, [])]
    n = sum(c for _, c in parts)
    if not parts or any(ch is None for ch, _ in parts) or not n:
        return None, n
    return sum(ch * c for ch, c in parts) / n, n


def task_result(name: str, out: dict[str, Any]) -> dict[str, Any]:
    """One task's (or group's) metrics, the headline score (accuracy where there is one) and chance level."""
    raw = out["results"][name]
    metrics, stderr = {}, {}
    for key, value in raw.items():
        metric, _, filt = key.partition(",")
        if not filt or not isinstance(value, int | float):
            continue  # "alias" and other labels
        (stderr if metric.endswith("_stderr") else metrics)[metric.removesuffix("_stderr")] = value
    headline = "acc" if "acc" in metrics else next(iter(metrics), None)
    chance, n = _chance_and_count(name, out)
    return {"metric": headline, "score": metrics.get(headline), "chance": chance, "documents": n,
            "metrics": metrics, "stderr": {k: v for k, v in stderr.items() if v != "N/A"}}


def format_tasks(section: dict[str, Any]) -> str:
    """A terminal table of the ``tasks`` section."""
    lines = [f"{'task':<28}{'metric':>8}{'score':>8}{'chance':>8}{'docs':>7}"]
    for name, r in section["results"].items():
        score = "-" if r["score"] is None else f"{r['score']:.3f}"
        chance = "-" if r["chance"] is None else f"{r['chance']:.3f}"
        lines.append(f"{name:<28}{r['metric'] or '-':>8}{score:>8}{chance:>8}{r['documents']:>7}")
    return "\n".join(lines)
