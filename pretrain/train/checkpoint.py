"""Checkpoints: atomic, checksummed, the last K kept plus the best, and everything an exact resume needs.

Layout in ``RUN/checkpoints/``:

* ``step_XXXXXXXX.pt``: a ``torch.save`` of the training state (model, optimizer: every part's under Muon,
  scheduler, RNG states, data sampler position, config, tokenizer identity); loadable with ``weights_only=True``.
* ``step_XXXXXXXX.json``: its sidecar ``{"file", "step", "sha256", "bytes", "val_loss", "time", "line",
  "lineage"}``. It is written after the ``.pt`` is complete and renamed into place, so a checkpoint without a
  sidecar is an interrupted write and is never loaded.
* ``best.pt`` + ``best.json``: a hard link (copy where links are unsupported) to the step checkpoint of the
  live line with the lowest validation loss so far.
* ``latest.json``: ``{"latest", "step", "lineage", "lines", "best", "best_step", "best_val_loss"}``, naming the
  last good checkpoint of the live line.

Every file is written to a temp name in the same directory, fsynced and renamed, so a kill -9 at any
moment leaves the previous checkpoint loadable. The trainer never saves a state that saw a non-finite
loss since the previous checkpoint.

**One line of checkpoints.** A run's checkpoints form one line: ``--resume`` continues from what
``latest.json`` names and falls back only along that line. ``--resume-from`` an earlier checkpoint starts a
*branch*: a new line number, and a lineage ``[[line, after_step], ...]`` (line ``L`` owns the steps after
``after_step`` up to the next entry's) recorded in ``latest.json`` and in every later sidecar. A checkpoint is
on the live line when its sidecar's ``line`` owns its step in the live lineage. The checkpoints a branch
abandons (and ``best.pt`` when it was one of them) are moved to ``RUN/abandoned/lineL/``, never deleted, so
``RUN/checkpoints/`` holds the live line only and pruning (``keep_last``), the best and ``--resume`` stay
within it. A checkpoint that ``--resume`` skips as corrupt is moved aside as ``step_XXXXXXXX.pt.corrupt``
(its sidecar as ``step_XXXXXXXX.json.corrupt``), so the redone step never overwrites it.
"""

from __future__ import annotations

import hashlib
import json
import os
import pickle
import random
import re
import shutil
import tempfile
import time
import warnings
from collections.abc import Callable
from pathlib import Path
from typing import Any

import numpy as np
import torch

from common.errors import InputError
from common.fileio import file_sha256, umask, write_json

CHECKPOINT_DIR = "checkpoints"
LATEST_NAME = "latest.json"
BEST_NAME = "best.pt"
ABANDONED_DIR = "abandoned"  # RUN/abandoned/lineL/: what a branch left of line L
_STEP_FILE = re.compile(r"step_(\d{8})\.pt$")


class CheckpointError(InputError):
    """A checkpoint that is missing, incomplete or corrupt; the message names the file."""


class CorruptCheckpoint(CheckpointError):
    """A checkpoint whose bytes do not match its sidecar's sha256: proven damaged (`adopt` sets it aside as
    ``NAME.corrupt``). One that matches but will not load (another torch, a refused pickle) is intact and may
    load elsewhere: it is set aside as ``NAME.unloadable``."""


def checkpoint_dir(run_dir: str | os.PathLike) -> Path:
    return Path(run_dir) / CHECKPOINT_DIR


def sidecar(path: Path) -> Path:
    return path.with_suffix(".json")


class _HashingWriter:
    """A binary file that hashes what is written through it, so a checkpoint is hashed as it is written
    instead of by reading the file back (4.9 GB for bangla-0.4b). ``torch.save`` writes sequentially."""

    def __init__(self, f):
        self.f, self.sha = f, hashlib.sha256()

    def write(self, data) -> int:
        self.sha.update(data)
        return self.f.write(data)

    def flush(self) -> None:
        self.f.flush()


def _save_file(state: dict[str, Any], path: Path, before_publish: Callable[[Path], None] | None) -> str:
    """``torch.save`` to a temp file (hashed while written), fsync, rename; return the sha256. The file gets
    ordinary permissions (0666 & ~umask: mkstemp makes it 0600). ``before_publish`` sees the complete temp
    file before the rename (`pretrain.train.faults` kills the process there)."""
    fd, tmp = tempfile.mkstemp(dir=path.parent, prefix=f".{path.name}.", suffix=".tmp")
    try:
        os.fchmod(fd, 0o666 & ~umask())
        with os.fdopen(fd, "wb") as f:
            writer = _HashingWriter(f)
            torch.save(state, writer)
            f.flush()
            os.fsync(f.fileno())
        if before_publish is not None:
            before_publish(Path(tmp))
        os.replace(tmp, path)
        return writer.sha.hexdigest()
    except BaseException:
        Path(tmp).unlink(missing_ok=True)
        raise


def _link_best(ckdir: Path, source: Path, meta: dict[str, Any]) -> None:
    tmp = ckdir / f".{BEST_NAME}.{os.getpid()}.tmp"
    tmp.unlink(missing_ok=True)
    try:
        os.link(source, tmp)
    except OSError:
        shutil.copyfile(source, tmp)
    os.replace(tmp, ckdir / BEST_NAME)
    write_json(sidecar(ckdir / BEST_NAME), {**meta, "file": BEST_NAME, "source": source.name})


def read_latest(run_dir: str | os.PathLike) -> dict[str, Any]:
    """The content of ``latest.json`` (empty when no checkpoint was written yet)."""
    path = checkpoint_dir(run_dir) / LATEST_NAME
    try:
        return json.loads(path.read_text(encoding="utf-8"))
    except FileNotFoundError:
        return {}
    except json.JSONDecodeError as e:
        raise CheckpointError(f"{path}: not valid JSON (line {e.lineno}): {e.msg}") from None


def _read_meta(path: Path) -> dict[str, Any] | None:
    """A checkpoint's sidecar, or None when it is missing or not JSON (an interrupted write)."""
    try:
        meta = json.loads(sidecar(path).read_text(encoding="utf-8"))
    except (FileNotFoundError, json.JSONDecodeError):
        return None
    return meta if isinstance(meta, dict) else None


def lineage(latest: dict[str, Any], run_dir: str | os.PathLike | None = None) -> list[list[int]]:
    """The live lineage ``[[line, after_step], ...]`` of ``latest.json``'s content; without one (a new run, a run
    of a version before lineages, a latest.json lost), the newest complete checkpoint's of ``run_dir``, else
    line 1 from step 0."""
    found = latest.get("lineage")
    if not found and run_dir is not None:
        metas = [m for _, m in _complete(run_dir) if m.get("lineage")]
        found = max(metas, key=lambda m: m["step"])["lineage"] if metas else None
    return [list(e) for e in found or [[1, 0]]]


def _owner(lines: list[list[int]], step: int) -> int | None:
    """The line that owns ``step`` in a lineage (None for a step before its first entry)."""
    owner = None
    for line, after in lines:
        if after < step:
            owner = line
    return owner


def _on_line(meta: dict[str, Any], lines: list[list[int]]) -> bool:
    return _owner(lines, int(meta.get("step", 0))) == meta.get("line", 1)


def _complete(run_dir: str | os.PathLike) -> list[tuple[Path, dict[str, Any]]]:
    """Step checkpoints of ``RUN/checkpoints/`` with a readable sidecar, oldest first."""
    ckdir = checkpoint_dir(run_dir)
    found = sorted(p for p in ckdir.glob("step_*.pt") if _STEP_FILE.search(p.name)) if ckdir.is_dir() else []
    return [(p, meta) for p in found if (meta := _read_meta(p)) is not None]


def checkpoint_step(path: Path) -> int:
    """The step of a step checkpoint, from its name (``step_00000040.pt``: 40)."""
    return int(_STEP_FILE.search(Path(path).name).group(1))


def step_checkpoints(run_dir: str | os.PathLike) -> list[Path]:
    """Complete step checkpoints (with their sidecar) of the live line, oldest first."""
    lines = lineage(read_latest(run_dir), run_dir)
    return [p for p, meta in _complete(run_dir) if _on_line(meta, lines)]


def _free_name(dest: Path) -> Path:
    """``dest``, or ``dest.2``, ``dest.3``...: the first name not taken (a moved file never replaces one)."""
    n, free = 1, dest
    while free.exists():
        n += 1
        free = dest.with_name(f"{dest.name}.{n}")
    return free


def _move(path: Path, dest: Path) -> Path:
    dest.parent.mkdir(parents=True, exist_ok=True)
    dest = _free_name(dest)
    os.rename(path, dest)
    return dest


def abandoned_dir(run_dir: str | os.PathLike, line: int) -> Path:
    """Where the checkpoints (and the metrics) a branch abandoned of line ``line`` are kept."""
    return Path(run_dir) / ABANDONED_DIR / f"line{line}"


def redone_dir(run_dir: str | os.PathLike, step: int) -> Path:
    """Where a plain ``--resume`` from ``step`` keeps the log records of the steps after it, which it redoes
    (the only trace of what led to the stop; the live logs then hold each step once)."""
    return Path(run_dir) / ABANDONED_DIR / f"redone-after-{step:08d}"


def _set_aside(run_dir: Path, path: Path, line: int) -> Path:
    """Move a checkpoint and its sidecar into ``abandoned_dir(line)``: the sidecar first, so that what is left
    behind by a kill in between is a .pt without a sidecar (never loaded)."""
    dest = abandoned_dir(run_dir, line)
    if sidecar(path).exists():
        _move(sidecar(path), dest / sidecar(path).name)
    return _move(path, dest / path.name)


def save_checkpoint(run_dir: str | os.PathLike, step: int, state: dict[str, Any], *,
                    val_loss: float | None = None, keep_last: int = 3,
                    before_publish: Callable[[Path], None] | None = None) -> Path:
    """Write ``state`` as the checkpoint of ``step`` on the live line; update latest.json and best; prune the
    live line to ``keep_last``."""
    ckdir = checkpoint_dir(run_dir)
    ckdir.mkdir(parents=True, exist_ok=True)
    for stale in ckdir.glob(".*.tmp"):  # left by a writer that was killed; this process is the only writer
        stale.unlink(missing_ok=True)
    latest = read_latest(run_dir)
    lines = lineage(latest, run_dir)
    path = ckdir / f"step_{step:08d}.pt"
    sha = _save_file(state, path, before_publish)
    meta = {"file": path.name, "step": step, "sha256": sha, "bytes": path.stat().st_size,
            "val_loss": val_loss, "time": time.time(), "line": lines[-1][0], "lineage": lines}
    write_json(sidecar(path), meta)
    best_loss = latest.get("best_val_loss")
    if val_loss is not None and (best_loss is None or val_loss < best_loss):
        _link_best(ckdir, path, meta)
        latest.update(best=BEST_NAME, best_step=step, best_val_loss=val_loss)
    latest.update(latest=path.name, step=step, lineage=lines, lines=max(latest.get("lines", 1), lines[-1][0]))
    write_json(ckdir / LATEST_NAME, latest)
    for old in step_checkpoints(run_dir)[:-max(keep_last, 1)]:
        sidecar(old).unlink(missing_ok=True)  # sidecar first: a .pt without one is never loaded
        old.unlink(missing_ok=True)
    return path


def load_checkpoint(path: str | os.PathLike, map_location: str | torch.device = "cpu") -> dict[str, Any]:
    """Load a checkpoint after verifying its sha256 against the sidecar; raise CheckpointError if not."""
    path = Path(path)
    meta_path = sidecar(path)
    if not path.exists():
        raise CheckpointError(f"{path}: no such checkpoint")
    try:
        meta = json.loads(meta_path.read_text(encoding="utf-8"))
    except FileNotFoundError:
        raise CheckpointError(f"{path}: no sidecar {meta_path.name}, so the write never completed") from None
    except json.JSONDecodeError as e:
        raise CheckpointError(f"{meta_path}: not valid JSON (line {e.lineno}): {e.msg}") from None
    sha = file_sha256(path)
    if sha != meta.get("sha256"):
        raise CorruptCheckpoint(f"{path}: sha256 {sha} does not match {meta_path.name} ({meta.get('sha256')}); "
                                "the file is corrupt")
    try:
        with warnings.catch_warnings():  # a pickle of another protocol: the refusal below says it, in one line
            warnings.filterwarnings("ignore", message="Detected pickle protocol")
            return torch.load(path, map_location=map_location, weights_only=True)
    except pickle.UnpicklingError as e:
        # A pickle that would run code (or name a class torch does not allow): the weights-only loader
        # refuses it, and so do we, in one line.
        reason = str(e).strip().splitlines()[-1] if str(e).strip() else type(e).__name__
        raise CheckpointError(f"{path}: not a checkpoint of `pretrain launch`: the weights-only loader refuses "
                              f"it ({reason[:200]})") from None


def latest_checkpoint(run_dir: str | os.PathLike) -> Path | None:
    """The last good checkpoint of a run: the one latest.json names, else the newest complete step file of
    the live line."""
    latest = read_latest(run_dir).get("latest")
    if latest and (checkpoint_dir(run_dir) / latest).exists():
        return checkpoint_dir(run_dir) / latest
    found = step_checkpoints(run_dir)
    return found[-1] if found else None


def resume_checkpoint(run_dir: str | os.PathLike
                      ) -> tuple[Path, dict[str, Any], list[tuple[Path, str, bool]]] | None:
    """The checkpoint ``--resume`` continues from: the one ``latest.json`` names if it verifies and loads,
    else the newest one before it on the same line that does; with the ones skipped, why, and whether each is
    proven corrupt (:class:`CorruptCheckpoint`).

    Nothing is moved here (`adopt` does that once the run starts). None if the live line has no complete
    checkpoint at all.
    """
    latest = read_latest(run_dir)
    lines, last = lineage(latest, run_dir), latest.get("step")
    skipped: list[tuple[Path, str, bool]] = []
    for path, meta in reversed(_complete(run_dir)):
        if not _on_line(meta, lines) or (last is not None and int(meta.get("step", 0)) > last):
            continue
        try:
            return path, load_checkpoint(path), skipped
        except CheckpointError as e:
            skipped.append((path, str(e), isinstance(e, CorruptCheckpoint)))
        except Exception as e:  # torch.load of a file that passed its checksum can still fail (other torch)
            skipped.append((path, f"{path}: cannot be loaded: {type(e).__name__}: {e}", False))
    if skipped:
        raise CheckpointError("no checkpoint of " + str(run_dir) + " verifies: "
                              + "; ".join(reason for _, reason, _ in skipped)
                              + "; continue from a checkpoint file with --resume-from, or start a new run in "
                                "another --out")
    return None


def adopt(run_dir: str | os.PathLike, source: Path, skipped: list[tuple[Path, bool]], *,
          branch: bool) -> tuple[list[tuple[Path, Path]], int | None]:
    """Make ``source`` (the verified checkpoint a resumed run starts from) the head of the run's live line.

    The checkpoints ``--resume`` skipped, ``(file, proven corrupt)``, are moved aside as ``NAME.corrupt`` or
    ``NAME.unloadable``, so that the redone step never writes over them. With ``branch``
    (``--resume-from``) and a ``source`` that is not the newest checkpoint of the live line (an earlier step,
    or a checkpoint of another line or run), a new line starts: a new line number and lineage, and every
    checkpoint no longer on the live line (and ``best.pt`` when it was one of them) is moved to
    ``RUN/abandoned/lineL/``; the best is then the best of the live line's remaining checkpoints.
    ``latest.json`` is rewritten first, naming ``source``: a kill in the middle leaves a run that ``--resume``
    continues from ``source``, tidying the same way.

    Returns the moves ``(from, to)`` and the line a branch abandoned (None when there was no branch)."""
    run_dir, source = Path(run_dir), Path(source)
    ckdir = checkpoint_dir(run_dir)
    moved = []
    for path, corrupt in skipped:
        for p in (path, sidecar(path)):
            if p.exists():
                moved.append((p, _move(p, p.with_name(p.name + (".corrupt" if corrupt else ".unloadable")))))
    latest = read_latest(run_dir)
    lines = lineage(latest, run_dir)
    meta = _read_meta(source) or {}
    step = int(meta.get("step", 0))
    in_run = source.resolve().parent == ckdir.resolve()
    live = step_checkpoints(run_dir)
    head = in_run and _on_line(meta, lines) and all(int((_read_meta(p) or {}).get("step", 0)) <= step for p in live)
    abandoned = None
    if branch and not head and (latest or live):
        # The source's own ancestry (when it is a checkpoint of this run) up to its step, then a new line.
        of_run = source.resolve().is_relative_to(run_dir.resolve())
        base = [list(e) for e in meta.get("lineage") or [[meta.get("line", 1), 0]]] if of_run else []
        new_line = max([latest.get("lines", 1), *(line for line, _ in lines), *(line for line, _ in base)]) + 1
        abandoned, lines = lines[-1][0], [e for e in base if e[1] < step] + [[new_line, step]]

    def off_line(m: dict[str, Any]) -> bool:
        return not _on_line(m, lines) or (abandoned is not None and int(m.get("step", 0)) > step)

    best = _read_meta(ckdir / BEST_NAME) if (ckdir / BEST_NAME).exists() else None
    best_off = best is not None and off_line(best)
    if best_off:
        for key in ("best", "best_step", "best_val_loss"):
            latest.pop(key, None)
    latest.update(lineage=lines, lines=max(latest.get("lines", 1), lines[-1][0]), step=step,
                  latest=source.name if in_run else None)
    ckdir.mkdir(parents=True, exist_ok=True)
    write_json(ckdir / LATEST_NAME, latest)
    for path, m in _complete(run_dir):
        if off_line(m):
            moved.append((path, _set_aside(run_dir, path, int(m.get("line", 1)))))
    if best_off:
        moved.append((ckdir / BEST_NAME, _set_aside(run_dir, ckdir / BEST_NAME, int(best.get("line", 1)))))
        scored = [(m["val_loss"], p, m) for p, m in _complete(run_dir) if m.get("val_loss") is not None]
        if scored:
            loss, path, m = min(scored, key=lambda t: t[0])
            _link_best(ckdir, path, m)
            latest.update(best=BEST_NAME, best_step=m["step"], best_val_loss=loss)
            write_json(ckdir / LATEST_NAME, latest)
    return moved, abandoned


def rng_state() -> dict[str, Any]:
    """Every RNG a step could touch, in a form ``torch.load(weights_only=True)`` accepts."""
    name, keys, pos, has_gauss, gauss = np.random.get_state()
    state = {"python": random.getstate(), "numpy": [name, torch.from_numpy(keys.astype(np.int64)), pos, has_gauss, gauss],
             "torch": torch.get_rng_state()}
    if torch.cuda.is_available():
        state["cuda"] = torch.cuda.get_rng_state_all()
    return state


def set_rng_state(state: dict[str, Any]) -> None:
    random.setstate(state["python"])
    name, keys, pos, has_gauss, gauss = state["numpy"]
    np.random.set_state((name, keys.numpy().astype(np.uint32), pos, has_gauss, gauss))
    torch.set_rng_state(state["torch"])
    if "cuda" in state and torch.cuda.is_available():
        torch.cuda.set_rng_state_all(state["cuda"])
