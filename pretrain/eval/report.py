"""``eval.json``: which checkpoint a report evaluates, and how a run's report accumulates.

A run's ``RUN/eval.json`` gathers what each ``pretrain eval`` adds: the validation split (the top-level
keys, `pretrain.eval.run_eval`), ``text`` and ``tasks`` (`pretrain.eval.model_scores`; lm-evaluation-harness
tasks can take hours). A later ``pretrain eval`` of the same checkpoint (the same sha256) replaces only the
sections it computes and keeps the others; a different checkpoint starts a new report, and says so in one
line. Every write is atomic (`common.fileio.write_json`).
"""

from __future__ import annotations

import json
import sys
from pathlib import Path
from typing import Any

from common.fileio import read_json

SECTIONS = ("text", "tasks")  # what model_scores adds; everything else is the validation split's


def checkpoint_sha256(path: Path) -> str | None:
    """The sha256 of a checkpoint (from its sidecar, which `load_checkpoint` verifies) or of the checkpoint an
    export came from (its export.json); None where neither says."""
    from pretrain.train.checkpoint import sidecar

    meta = sidecar(path.resolve()) if path.is_file() else path / "export.json"
    if not meta.is_file():
        return None
    return read_json(meta).get("sha256" if path.is_file() else "checkpoint_sha256")


def report_sha256(report: dict[str, Any]) -> str | None:
    """The checkpoint an eval.json evaluates: its own ``checkpoint_sha256``, else that of a section."""
    if report.get("checkpoint_sha256"):
        return report["checkpoint_sha256"]
    return next((s["checkpoint_sha256"] for k in SECTIONS if isinstance(s := report.get(k), dict)
                 and s.get("checkpoint_sha256")), None)


def earlier_report(path: Path, sha256: str | None, checkpoint: str) -> dict[str, Any]:
    """The sections of ``path`` to keep for a report on the checkpoint ``sha256``: all of them when it
    evaluates the same checkpoint, none (with a line on stderr saying why) when it does not."""
    if not path.is_file():
        return {}
    try:
        report = read_json(path)
    except (OSError, UnicodeDecodeError, json.JSONDecodeError):
        report = None
    if not isinstance(report, dict):
        print(f"pretrain eval: {path} is not an eval report; a new report for {checkpoint} replaces it",
              file=sys.stderr)
        return {}
    old = report_sha256(report)
    if sha256 is not None and old == sha256:
        return report
    print(f"pretrain eval: {path} evaluated {report.get('checkpoint', 'another checkpoint')} (sha256 "
          f"{(old or 'unknown')[:12]}); a new report for {checkpoint} (sha256 {(sha256 or 'unknown')[:12]}) "
          f"replaces its sections {', '.join(k for k in ('languages', *SECTIONS) if k in report) or '(none)'}",
          file=sys.stderr)
    return {}
