"""The staging folder beside OUT where a build works (``.OUT.building``, marked as this project's): created or
resumed, kept across a kill or a signal for the rerun, removed when bad input met before the ingest was
finished makes its work untrustworthy, and renamed into OUT when the build is complete."""

from __future__ import annotations

import os
import shutil
from collections.abc import Iterator
from contextlib import contextmanager
from pathlib import Path

from common.errors import InputError, OutputPathError
from common.fileio import WRITTEN_BY, read_json, write_json
from common.outdir import MARKER, PublishError, is_ours, publish_path
from common.owned import Owned, claim, record, remove
from corpus.config import PlanError
from corpus.shards.format import MANIFEST_NAME

WORK_DIR = ".work"
STAGE_SUFFIX = ".building"
STAGE_COMMAND = "corpus build (unfinished)"
WORK_ROLE = "corpus work"  # the common.owned role of a user-named --work-dir
WORK_STATUS = "status.json"  # the build's status file in a local work folder, when no --status-file is given
FINGERPRINT_NAME = "ingest.json"  # in the work folder: what the ingest there was made of (corpus.ingest)


def staging_path(out_dir: str | Path) -> Path:
    """Where a build into OUT keeps its unfinished work (shards, report, and the stages' files in ``.work``): a
    folder beside OUT, marked as this project's, that a rerun of the same command resumes and that becomes OUT
    by a rename when the build is complete (``common.outdir.publish_dir``)."""
    out_dir = publish_path(out_dir)  # beside the folder a symlinked OUT points to: publishing renames into it
    return out_dir.parent / f".{out_dir.name}{STAGE_SUFFIX}"


def _open_stage(stage: Path, record: dict | None) -> bool:
    """Create the staging folder, or resume the one there; True when it is created now. ``record`` says what
    the folder's shards are for (the build's arguments); a folder holding another build's unfinished shards
    keeps only its ingest (``.work``, checked by its own fingerprint) and packs again, which takes seconds.
    ``None`` (a plan) leaves an existing folder as it is."""
    marker = {"written_by": WRITTEN_BY, "command": STAGE_COMMAND, "build": record}
    if stage.exists() or stage.is_symlink():
        if stage.is_symlink() or not stage.is_dir() or not is_ours(stage) or _stage_record(stage) is None:
            raise OutputPathError(f"{stage}: is where this build keeps its unfinished work, but holds something "
                                  "this project did not write; move it away (nothing was written)")
        if record is not None and _stage_record(stage).get("build") != record:
            if _stage_record(stage).get("command") != STAGE_COMMAND:
                # A finished build whose publishing failed: the result the one line said was kept.
                raise OutputPathError(f"{stage}: holds a finished build of other arguments that could not be "
                                      "put in place; move it where you want it (nothing was written)")
            # Provably ours: a real folder named for OUT's staging whose marker names it an unfinished build,
            # which only _open_stage writes; its entries are the other build's shards and report.
            for path in stage.iterdir():
                if path.name not in (MARKER, WORK_DIR):
                    shutil.rmtree(path) if path.is_dir() else path.unlink()
            write_json(stage / MARKER, marker)
        return False
    stage.mkdir(parents=True)  # OUT may lie in folders not made yet (common.outdir checks the nearest one)
    write_json(stage / MARKER, marker)
    return True


def _stage_record(stage: Path) -> dict | None:
    try:
        marker = read_json(stage / MARKER)
    except (OSError, ValueError):
        return None
    # "corpus build": publish_dir marked it finished, then could not rename it into place
    return marker if isinstance(marker, dict) and marker.get("command") in (STAGE_COMMAND, "corpus build") else None


def link_existing(out_dir: Path, stage: Path) -> None:
    """The files of the shard set an --append adds to, in the staging folder: hard links (shards are never
    rewritten in place, so OUT's files stay as they were), or copies where links are refused. Not its
    manifest: in the staging folder, a manifest marks the build finished."""
    for path in out_dir.iterdir():
        target = stage / path.name
        if path.is_file() and path.name not in (MARKER, MANIFEST_NAME) and not target.exists():
            try:
                os.link(path, target)
            except OSError:
                shutil.copy2(path, target)


@contextmanager
def staged(out_dir: Path, record: dict | None) -> Iterator[Path]:
    """The staging folder of ``out_dir`` for the block. Bad input met before the ingest was finished removes a
    folder created by this run (its work cannot be trusted once the input is fixed): nothing is left that was
    not there before. Anything else (a signal, a bug, a plan error after a finished ingest) keeps it, marked,
    for the rerun to resume."""
    stage = staging_path(out_dir)
    created = _open_stage(stage, record)
    made = os.lstat(stage)
    try:
        yield stage
    except InputError as e:
        # Provably ours: made by this very call (mkdir refuses a path that exists) and still the same folder. A
        # finished build whose publishing failed keeps it: it holds the result.
        if created and not isinstance(e, PlanError | PublishError) and _same_folder(stage, made):
            shutil.rmtree(stage, ignore_errors=True)
        raise


def _same_folder(path: Path, made: os.stat_result) -> bool:
    try:
        return os.path.samestat(made, os.lstat(path))
    except OSError:  # gone already
        return False


def work_url(stage: Path, work_dir: str | None) -> str:
    return str(work_dir).rstrip("/") if work_dir else str((stage / WORK_DIR).resolve())


def claim_work(work_dir: str | None, tasks: int) -> Owned | None:
    """A user-named --work-dir taken for the build (``common.owned``: new, empty or ours, as
    ``corpus.check.check_work_dir`` made sure up front), with the names the stages write at its top recorded
    before they are written: the ingest's fingerprint, its folder for this number of tasks, the status file.
    None for the default ``.work``, which lies in the staging folder."""
    if work_dir is None:
        return None
    owner = claim(str(work_dir).rstrip("/"), WORK_ROLE, "--work-dir")
    record(owner, FINGERPRINT_NAME, f"t{tasks}", WORK_STATUS)
    return owner


def remove_work(stage: Path, owner: Owned | None) -> None:
    """The work of a finished build: in a user-named folder only what was recorded there (the folder too when
    the build made it); else the staging folder's ``.work``, ours as the folder that holds it is."""
    if owner is not None:
        remove(owner)
    else:
        shutil.rmtree(stage / WORK_DIR, ignore_errors=True)


def remove_stale_temp_files(*directories: Path) -> None:
    """Temp files that a killed ``atomic_write_bytes`` left behind (never a committed file)."""
    for directory in directories:
        for path in directory.glob(".*.tmp"):
            path.unlink(missing_ok=True)
