"""The project's one way to write files: atomically, readable by others, never losing what was there.

Every package writes through these helpers (they sit in the base layer so that all four can import them):

* ``atomic_write_bytes`` / ``atomic_write_text`` / ``write_json``: a temp file in the same folder, fsync, rename.
* ``append_jsonl`` / ``read_jsonl``: line-per-record logs; a torn last line (a kill mid-write) is skipped.
* ``file_sha256``: the hex digest of a file, streamed.

Output folders (what ``--out`` may be, staging and publishing one) are ``common.outdir``.
"""

from __future__ import annotations

import hashlib
import json
import os
import tempfile
from pathlib import Path
from typing import Any

# The field value that proves this project wrote a file or folder marker (common.paths.written_by_us).
WRITTEN_BY = "bangla-tokfair"


def umask() -> int:
    mask = os.umask(0)
    os.umask(mask)
    return mask


def atomic_write_bytes(path: str | os.PathLike, data: bytes) -> None:
    """Write ``data`` to ``path`` through a temp file in the same directory and a rename."""
    path = Path(path)
    fd, tmp = tempfile.mkstemp(dir=path.parent, prefix=f".{path.name}.", suffix=".tmp")
    try:
        # mkstemp creates the file 0600; give it the mode a plain open() would, so other users can read it.
        os.fchmod(fd, 0o666 & ~umask())
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
