"""The project's one way to write files: atomically, readable by others, never losing what was there.

Every package writes through these helpers (they sit in the base layer so that all four can import them):

* ``atomic_write_bytes`` / ``atomic_write_text`` / ``write_json``: a temp file in the same folder, fsync, rename.
* ``append_jsonl`` / ``read_jsonl``: line-per-record logs; a torn last line (a kill mid-write) is skipped.
* ``file_sha256``: the hex digest of a file, streamed.
* ``staging_dir`` + ``publish_dir``: build a whole output folder beside its destination, then swap it in.
  ``check_output_dir`` refuses a destination that is an existing file *before* any work starts.
"""

from __future__ import annotations

import hashlib
import json
import os
import shutil
import tempfile
from collections.abc import Iterator
from contextlib import contextmanager
from pathlib import Path
from typing import Any


def _umask() -> int:
    mask = os.umask(0)
    os.umask(mask)
    return mask


def atomic_write_bytes(path: str | os.PathLike, data: bytes) -> None:
    """Write ``data`` to ``path`` through a temp file in the same directory and a rename."""
    path = Path(path)
    fd, tmp = tempfile.mkstemp(dir=path.parent, prefix=f".{path.name}.", suffix=".tmp")
    try:
        # mkstemp creates the file 0600; give it the mode a plain open() would, so other users can read it.
        os.fchmod(fd, 0o666 & ~_umask())
        with os.fdopen(fd, "wb") as f:
            f.write(data)
            f.flush()
            os.fsync(f.fileno())
        os.replace(tmp, path)
    except BaseException:
        Path(tmp).unlink(missing_ok=True)
        raise


def atomic_write_text(path: str | os.PathLike, text: str) -> None:
    """``atomic_write_bytes`` for UTF-8 text."""
    atomic_write_bytes(path, text.encode("utf-8"))


def write_json(path: str | os.PathLike, obj: Any, *, allow_nan: bool = False) -> None:
    """Write ``obj`` as indented UTF-8 JSON (trailing newline), atomically. NaN is refused unless allowed:
    a JSON file with ``NaN`` in it is not JSON to most readers."""
    text = json.dumps(obj, indent=2, ensure_ascii=False, allow_nan=allow_nan, default=str) + "\n"
    atomic_write_text(path, text)


def read_json(path: str | os.PathLike) -> Any:
    """Parse a JSON file (UTF-8)."""
    return json.loads(Path(path).read_text(encoding="utf-8"))


def append_jsonl(path: str | os.PathLike, record: dict[str, Any]) -> None:
    """Append one record as a line and flush it to disk, so a reader never sees half a line from a live writer
    except after a crash (which ``read_jsonl`` tolerates)."""
    line = json.dumps(record, ensure_ascii=False, default=str) + "\n"
    with open(path, "a", encoding="utf-8") as f:
        f.write(line)
        f.flush()
        os.fsync(f.fileno())


def read_jsonl(path: str | os.PathLike) -> list[dict[str, Any]]:
    """The records of a JSONL file; a missing file is empty; an unterminated last line (torn write) is skipped.
    Any other line that is not JSON is an error naming the file and line."""
    path = Path(path)
    if not path.exists():
        return []
    records = []
    with open(path, encoding="utf-8") as f:
        for number, line in enumerate(f, 1):
            if not line.endswith("\n"):
                break  # a writer is mid-line or was killed mid-line
            if not line.strip():
                continue
            try:
                records.append(json.loads(line))
            except json.JSONDecodeError as e:
                raise ValueError(f"{path}:{number}: not a JSON record ({e.msg})") from None
    return records


def file_sha256(path: str | os.PathLike) -> str:
    """Hex SHA-256 of a file's content."""
    h = hashlib.sha256()
    with open(path, "rb") as f:
        for block in iter(lambda: f.read(1 << 20), b""):
            h.update(block)
    return h.hexdigest()


class OutputPathError(ValueError):
    """An output destination that cannot be (re)placed: an existing file, or a folder without ``overwrite``."""


def check_output_dir(out: str | os.PathLike, *, overwrite: bool = True, what: str = "--out") -> Path:
    """Refuse, before any work, a destination folder that would lose a user's file.

    An existing regular file (or anything not a folder) is always refused; an existing folder only when
    ``overwrite`` is false.
    """
    out = Path(out)
    if out.exists() or out.is_symlink():
        if not out.is_dir():
            raise OutputPathError(f"{what} {out}: exists and is not a folder; choose a folder path "
                                  "(nothing was written)")
        if not overwrite:
            raise OutputPathError(f"{what} {out}: already exists; choose another path or pass --overwrite")
    return out


@contextmanager
def staging_dir(out: str | os.PathLike) -> Iterator[Path]:
    """A fresh folder beside ``out`` to build its content in; removed if the block raises.

    The folder gets the mode a plain ``mkdir`` would (``mkdtemp`` makes it 0700, which would leave a
    published report unreadable to others).
    """
    out = Path(out)
    out.parent.mkdir(parents=True, exist_ok=True)
    tmp = Path(tempfile.mkdtemp(dir=out.parent, prefix=f".{out.name}.", suffix=".tmp"))
    os.chmod(tmp, 0o777 & ~_umask())
    try:
        yield tmp
    except BaseException:
        shutil.rmtree(tmp, ignore_errors=True)
        raise


def publish_dir(staged: str | os.PathLike, out: str | os.PathLike) -> Path:
    """Move a staged folder to ``out``, replacing an existing *folder* there; a file at ``out`` is refused.

    The old folder is moved aside and removed only once the new one is in place, so a crash in between leaves
    either the old or the new content under ``out``, never neither.
    """
    staged, out = Path(staged), Path(out)
    check_output_dir(out)
    if out.exists():
        old = out.with_name(f".{out.name}.old-{os.getpid()}")
        shutil.rmtree(old, ignore_errors=True)
        out.rename(old)
        staged.rename(out)
        shutil.rmtree(old)
    else:
        staged.rename(out)
    return out
