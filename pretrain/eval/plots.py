"""Plots of a run: the training/validation loss curves and the per-language bits beside the random-init twin."""

from __future__ import annotations

from pathlib import Path
from typing import Any

from common.fileio import read_jsonl


def trajectory(run_dir: str | Path) -> list[dict[str, Any]]:
    """The run's steps in order, the last logged record of each step (after a resume or rollback, the
    redone step replaces the abandoned one)."""
    by_step = {}
    for rec in read_jsonl(Path(run_dir) / "metrics.jsonl"):
        by_step[rec["step"]] = rec
    return [by_step[s] for s in sorted(by_step)]


def plot_eval(report: dict[str, Any], run_dir: str | Path, out: str | Path) -> None:
    """eval.png: loss curves (left) and bits per character per language, model vs twin (right)."""
    # A Figure, not pyplot: no backend is chosen, so a notebook keeps its inline one.
    from matplotlib.figure import Figure

    run_dir = Path(run_dir)
    steps = trajectory(run_dir)
    val = read_jsonl(run_dir / "val.jsonl")
    fig = Figure(figsize=(12, 4.5), layout="constrained")  # constrained: room for the legends beside the axes
    ax1, ax2 = fig.subplots(1, 2)
    ax1.plot([r["step"] for r in steps], [r["loss"] for r in steps], lw=0.8, label="train loss")
    langs = sorted({lang for r in val for lang in r["languages"]})
    for lang in langs:
        pts = [(r["step"], r["languages"][lang]) for r in val if lang in r["languages"]]
        ax1.plot(*zip(*pts, strict=True), marker="o", ms=3, label=f"val loss ({lang})")
    ax1.set_xlabel("step")
    ax1.set_ylabel("loss (nats/token)")
    ax1.set_title("training")
    # legends beside their axes, not on them: none covers a curve or a bar
    ax1.legend(fontsize=8, loc="upper left", bbox_to_anchor=(1.01, 1), borderaxespad=0)
    langs = list(report["languages"])
    metric = "bits_per_char" if all(report["languages"][k]["model"]["bits_per_char"] for k in langs) else "bits_per_token"
    xs = range(len(langs))
    model = [report["languages"][k]["model"][metric] for k in langs]
    twin = [report["languages"][k]["random_init"][metric] for k in langs]
    ax2.bar([x - 0.2 for x in xs], twin, width=0.4, label="random-init twin", color="#bbbbbb")
    ax2.bar([x + 0.2 for x in xs], model, width=0.4, label=f"trained (step {report['step']})", color="#1f77b4")
    for x, v in zip(xs, model, strict=True):
        ax2.text(x + 0.2, v, f"{v:.2f}", ha="center", va="bottom", fontsize=8)
    ax2.set_xticks(list(xs), langs)
    ax2.set_ylabel(metric.replace("_", " "))
    ax2.set_title("validation, per language")
    ax2.legend(fontsize=8, loc="upper left", bbox_to_anchor=(1.01, 1), borderaxespad=0)
    fig.savefig(out, dpi=120)
