"""Checkpoints: atomic, checksummed, the last K kept plus the best, and everything an exact resume needs.

Layout in ``RUN/checkpoints/``:

* ``step_XXXXXXXX.pt``: a ``torch.save`` of the training state (model, optimizer, scheduler, RNG states,
  data sampler position, config, tokenizer identity); loadable with ``weights_only=True``.
* ``step_XXXXXXXX.json``: its sidecar ``{"file", "step", "sha256", "bytes", "val_loss", "time"}``. It is
  written after the ``.pt`` is complete and renamed into place, so a checkpoint without a sidecar is an
  interrupted write and is never loaded.
* ``best.pt`` + ``best.json``: a hard link (copy where links are unsupported) to the step checkpoint with
  the lowest validation loss so far.
* ``latest.json``: ``{"latest", "step", "best", "best_val_loss"}``, naming the last good checkpoint.

Every file is written to a temp name in the same directory, fsynced and renamed, so a kill -9 at any
moment leaves the previous checkpoint loadable. The trainer never saves a state that saw a non-finite
loss since the previous checkpoint.
"""

from __future__ import annotations

import hashlib
import json
import os
import random
import re
import shutil
import tempfile
import time
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
_STEP_FILE = re.compile(r"step_(\d{8})\.pt$")


class CheckpointError(InputError):
    """A checkpoint that is missing, incomplete or corrupt; the message names the file."""


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


def step_checkpoints(run_dir: str | os.PathLike) -> list[Path]:
    """Complete step checkpoints (with their sidecar), oldest first."""
    ckdir = checkpoint_dir(run_dir)
    found = sorted(p for p in ckdir.glob("step_*.pt") if _STEP_FILE.search(p.name)) if ckdir.is_dir() else []
    return [p for p in found if sidecar(p).exists()]


def save_checkpoint(run_dir: str | os.PathLike, step: int, state: dict[str, Any], *,
                    val_loss: float | None = None, keep_last: int = 3,
                    before_publish: Callable[[Path], None] | None = None) -> Path:
    """Write ``state`` as the checkpoint of ``step``; update latest.json and best; prune to ``keep_last``."""
    ckdir = checkpoint_dir(run_dir)
    ckdir.mkdir(parents=True, exist_ok=True)
    for stale in ckdir.glob(".*.tmp"):  # left by a writer that was killed; this process is the only writer
        stale.unlink(missing_ok=True)
    path = ckdir / f"step_{step:08d}.pt"
    sha = _save_file(state, path, before_publish)
    meta = {"file": path.name, "step": step, "sha256": sha, "bytes": path.stat().st_size,
            "val_loss": val_loss, "time": time.time()}
    write_json(sidecar(path), meta)
    latest = read_latest(run_dir)
    best_loss = latest.get("best_val_loss")
    if val_loss is not None and (best_loss is None or val_loss < best_loss):
        _link_best(ckdir, path, meta)
        latest.update(best=BEST_NAME, best_step=step, best_val_loss=val_loss)
    latest.update(latest=path.name, step=step)
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
        raise CheckpointError(f"{path}: sha256 {sha} does not match {meta_path.name} ({meta.get('sha256')}); "
                              "the file is corrupt")
    return torch.load(path, map_location=map_location, weights_only=True)


def latest_checkpoint(run_dir: str | os.PathLike) -> Path | None:
    """The last good checkpoint of a run: the one latest.json names, else the newest complete step file."""
    latest = read_latest(run_dir).get("latest")
    if latest and (checkpoint_dir(run_dir) / latest).exists():
        return checkpoint_dir(run_dir) / latest
    found = step_checkpoints(run_dir)
    return found[-1] if found else None


def resume_checkpoint(run_dir: str | os.PathLike) -> tuple[Path, dict[str, Any], list[tuple[Path, str]]] | None:
    """The newest checkpoint of a run that verifies and loads, with the newer ones skipped and why.

    Nothing is deleted: a corrupt checkpoint stays on disk for a person to look at. None if the run has no
    complete checkpoint at all.
    """
    skipped: list[tuple[Path, str]] = []
    for path in reversed(step_checkpoints(run_dir)):
        try:
            return path, load_checkpoint(path), skipped
        except CheckpointError as e:
            skipped.append((path, str(e)))
        except Exception as e:  # torch.load of a file that passed its checksum can still fail (other torch)
            skipped.append((path, f"{path}: cannot be loaded: {type(e).__name__}: {e}"))
    if skipped:
        raise CheckpointError("no checkpoint of " + str(run_dir) + " verifies: "
                              + "; ".join(reason for _, reason in skipped))
    return None


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
