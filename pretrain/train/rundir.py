"""The run directory: the files the trainer and the supervisor exchange, their names, how each is written and
read, and the protocol between the two (documented here once). Both sides import this module and nothing of
each other; the supervisor's settings are the ``supervisor`` section of ``config.json``.

Generations make the protocol race-free by design. The trainer claims a new generation when a process
starts (fresh or ``--resume``) and again after each rollback; every metrics record, heartbeat and halt
request carries it. The supervisor judges only records of the newest generation and asks at most once per
generation; the trainer obeys only a request of its own current generation. So the steps a trainer logs
between a request and its answer (stale records of the old generation) are never judged again, and a
request left behind by an ended run is void for the next one.

The halt protocol:

* the supervisor atomically writes ``RUN/halt_request.json``
  ``{"gen", "reason", "evidence", "step", "action": "halt"|"rollback", "skip_batches": [first, last]}``,
  at most once per trainer generation, and judges nothing more of that generation;
* on ``halt`` the trainer stops at the next step boundary, keeps its last good checkpoint, writes
  ``RUN/halt.json`` ``{"reason", "evidence", "step", "last_good_checkpoint"}`` and exits with code 3;
* on ``rollback`` it reloads the last good checkpoint, skips the batches of steps ``first..last``, claims
  a new generation and goes on; the steps it logged meanwhile belong to the old generation and are never
  judged, and the abandoned steps leave the supervisor's history;
* a request whose generation is not the trainer's (left by an ended run) is void;
* a trainer whose heartbeat stalls cannot answer, so the supervisor terminates it itself (SIGTERM, then
  SIGKILL after a grace period) and writes ``RUN/halt.json`` on its behalf.

Every decision is also appended to ``RUN/supervisor.jsonl``, and the last step judged to
``RUN/supervisor_ack.json`` (a trainer in lockstep waits for it before its next step).

Files in ``RUN/``:

* ``generation.json`` ``{"generation"}``: the trainer's current generation (written atomically);
* ``metrics.jsonl``: one record per step ``{"gen", "step", "loss", ...}`` (see `pretrain.train.trainer`);
* ``heartbeat.json`` ``{"gen", "step", "time", "pid"}``: rewritten atomically every step;
* ``halt_request.json`` ``{"gen", "reason", "evidence", "step", "action", "skip_batches"}``: by the supervisor;
* ``halt.json``: the outcome of a halt; ``rollbacks.jsonl``: one line per rollback done; ``void_requests.jsonl``:
  requests the trainer discarded as stale;
* ``supervisor.jsonl``: every decision of the supervisor; ``supervisor_ack.json`` ``{"gen", "step"}``: the
  last step it judged (what a trainer in lockstep waits for);
* ``config.json``, ``val.jsonl``, ``checkpoints/``, ``eval.json``: the run's own outputs; in ``checkpoints/``,
  ``NAME.corrupt`` / ``NAME.unloadable``: checkpoints a ``--resume`` skipped (sha256 mismatch / intact but not
  loadable here), set aside with their sidecars;
* ``abandoned/lineL/``: what a branch (``--resume-from`` an earlier step) left of line L: its checkpoints,
  ``best.pt`` when it was one of them, and the ``metrics.jsonl`` / ``val.jsonl`` records past the branch
  point; ``abandoned/redone-after-STEP/``: the log records a plain ``--resume`` from STEP cut and redoes
  (`pretrain.train.checkpoint`; a name taken already gets a ``.2``, ``.3``, ... suffix);
* ``.bangla-tokfair.json`` (`common.outdir.MARKER`) ``{"written_by", "command": "pretrain launch"}``: the mark
  that the folder is a run of ours, which ``--resume`` may continue (and no other folder).

Paths inside a run are absolute from this version on (``data.path``, ``train.out``), so ``pretrain eval --run``
works from any folder; :func:`resolve_path` also finds the data of an older run that recorded them relative
to the folder it was launched from.
"""

from __future__ import annotations

import json
import os
import time
from pathlib import Path
from typing import Any

from common.errors import InputError
from common.fileio import WRITTEN_BY, append_jsonl, atomic_write_bytes, write_json
from common.outdir import MARKER

CONFIG = "config.json"
GENERATION = "generation.json"
METRICS = "metrics.jsonl"
HEARTBEAT = "heartbeat.json"
HALT_REQUEST = "halt_request.json"
HALT = "halt.json"
ROLLBACKS = "rollbacks.jsonl"
VOID_REQUESTS = "void_requests.jsonl"
SUPERVISOR_LOG = "supervisor.jsonl"
SUPERVISOR_ACK = "supervisor_ack.json"
VALIDATION = "val.jsonl"
COMMAND = "pretrain launch"


def mark(run_dir: Path) -> None:
    """Mark ``run_dir`` as a run of ours (the folder exists)."""
    write_json(Path(run_dir) / MARKER, {"written_by": WRITTEN_BY, "command": COMMAND})


def is_run(folder: Path) -> bool:
    """Whether ``folder`` is a run of ``pretrain launch``: it carries our mark, or (a run of a version before
    the mark) the generation file only our trainer writes."""
    folder = Path(folder)
    marker = read_small_json(folder / MARKER)
    if isinstance(marker, dict):
        return marker.get("command") == COMMAND
    return (folder / GENERATION).is_file()


def has_trained(run_dir: Path) -> bool:
    """Whether a trainer started in ``run_dir`` (it wrote config.json); a run of only a preflight has not."""
    return (Path(run_dir) / CONFIG).is_file()


def check_run(run_dir: str | os.PathLike, what: str = "--run", *, checkpoint: bool = True) -> Path:
    """``run_dir`` if it is a run folder (that holds a checkpoint, unless ``checkpoint`` is False), else an
    :class:`InputError` naming ``what``."""
    from pretrain.train.checkpoint import latest_checkpoint

    run_dir = Path(run_dir)
    if not run_dir.is_dir():
        raise InputError(f"{what} {run_dir}: no such folder (expected a run folder of `pretrain launch`)")
    if not is_run(run_dir):
        raise InputError(f"{what} {run_dir}: not a run folder of `pretrain launch` (no {MARKER} naming it)")
    if checkpoint and latest_checkpoint(run_dir) is None:
        raise InputError(f"{what} {run_dir}: holds no checkpoint yet (train first, or pass --checkpoint)")
    return run_dir


def resolve_path(run_dir: str | os.PathLike, recorded: str, out: str) -> Path:
    """A path a run recorded (``data.path``), as seen from the current folder.

    Absolute paths are what runs record now. An older run recorded the paths it was given, relative to the
    folder it was launched from; that folder is the run folder's absolute path less the recorded
    ``train.out`` (``/home/u/demo_out/run`` less ``demo_out/run``), so the path is found from anywhere.
    """
    path = Path(recorded)
    if path.is_absolute() or not recorded:
        return path
    run_abs, tail = Path(run_dir).resolve(), Path(out)
    if not tail.is_absolute() and tail.parts and run_abs.parts[-len(tail.parts):] == tail.parts:
        return run_abs.parents[len(tail.parts) - 1] / path
    return path


def read_small_json(path: Path) -> Any:
    """A small JSON file the other process rewrites atomically; None if absent (or not JSON)."""
    try:
        return json.loads(path.read_text(encoding="utf-8"))
    except (FileNotFoundError, json.JSONDecodeError):
        return None


def current_generation(run_dir: Path) -> int:
    """The newest generation claimed in ``run_dir`` (0 before any trainer ran)."""
    saved = read_small_json(Path(run_dir) / GENERATION)
    return int(saved["generation"]) if isinstance(saved, dict) and "generation" in saved else 0


def claim_generation(run_dir: Path) -> int:
    """A new generation for a trainer process that starts or rolls back; recorded before it logs anything."""
    gen = current_generation(run_dir) + 1
    write_json(Path(run_dir) / GENERATION, {"generation": gen})
    return gen


def append(run_dir: Path, name: str, record: dict[str, Any]) -> None:
    """Append one record to a JSONL file of the run (flushed to disk)."""
    append_jsonl(Path(run_dir) / name, record)


def truncate_log(run_dir: Path, name: str, step: int, aside: Path | None = None) -> int:
    """Cut the JSONL log ``name`` of a resumed run back to the records of steps up to ``step`` (the checkpoint
    it resumed from), so that no step appears twice; a torn last line goes too. The file is replaced
    atomically. The records cut are appended to ``aside`` when given (what a branch abandoned). Returns how
    many records were cut."""
    path = Path(run_dir) / name
    if not path.exists():
        return 0
    kept, cut = [], []
    for line in path.read_bytes().splitlines(keepends=True):
        if not line.endswith(b"\n") or not line.strip():
            continue
        try:
            record_step = json.loads(line).get("step", 0)
        except (json.JSONDecodeError, AttributeError):
            record_step = 0  # not ours to judge: kept where it was
        (kept if record_step <= step else cut).append(line)
    if aside is not None and cut:
        aside.parent.mkdir(parents=True, exist_ok=True)
        atomic_write_bytes(aside, (aside.read_bytes() if aside.exists() else b"") + b"".join(cut))
    atomic_write_bytes(path, b"".join(kept))
    return len(cut)


def write_heartbeat(run_dir: Path, gen: int, step: int, pid: int) -> None:
    write_json(Path(run_dir) / HEARTBEAT, {"gen": gen, "step": step, "time": time.time(), "pid": pid})


def write_request(run_dir: Path, request: dict[str, Any]) -> None:
    """The supervisor's halt or rollback request; ``request["gen"]`` names the generation it judged."""
    if "gen" not in request:
        raise ValueError("a halt request must name the generation it judged")
    write_json(Path(run_dir) / HALT_REQUEST, request)


def take_request(run_dir: Path, gen: int) -> dict[str, Any] | None:
    """The pending request for generation ``gen``, or None. A request of another generation is void: it is
    removed and recorded in ``void_requests.jsonl`` so that it can never act on this trainer."""
    path = Path(run_dir) / HALT_REQUEST
    request = read_small_json(path)
    if request is None:
        return None
    if request.get("gen") != gen:
        append(run_dir, VOID_REQUESTS, {"time": time.time(), "trainer_gen": gen, "request": request})
        path.unlink(missing_ok=True)
        return None
    return request


def clear_request(run_dir: Path) -> None:
    """Remove the request once it has been acted on."""
    (Path(run_dir) / HALT_REQUEST).unlink(missing_ok=True)


def write_ack(run_dir: Path, gen: int, step: int) -> None:
    write_json(Path(run_dir) / SUPERVISOR_ACK, {"gen": gen, "step": step})


def acked(run_dir: Path, gen: int, step: int) -> bool:
    """Whether the supervisor has judged step ``step`` of generation ``gen`` (or anything later)."""
    ack = read_small_json(Path(run_dir) / SUPERVISOR_ACK)
    return isinstance(ack, dict) and (ack.get("gen", 0), ack.get("step", -1)) >= (gen, step)
