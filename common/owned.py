"""Deletion by ownership: the project deletes only what it can prove it made.

A folder the project makes, or takes over while it is empty (a user-named ``--work-dir``), carries
:data:`OWNER`, a small JSON record written when the folder is claimed, before anything else goes in:

* ``token``: 128 random bits. The process that claimed the folder keeps them (:class:`Owned`), and removal first
  checks that the folder on disk still carries them, so a folder put in its place meanwhile is never removed.
  A rerun proves a folder is ours by a record of the right ``role`` with a well-formed token under the folder's
  own ``name``: no folder of the user's carries one by accident (a folder holding a ``key.json`` may), and a copy
  of one of ours under another name is not taken for it.
* ``made``: whether the project created the folder itself. One it did not make is never removed, only emptied
  of what it recorded.
* ``entries``: for a folder not made whole, the names in it that the project created, each recorded before it is
  written (:func:`record`); removal takes only those, then the record, then the folder if it was made here and
  nothing else is left in it. ``None`` for a folder made whole (a checkpoint), which is removed whole.

Local paths and fsspec URLs alike (``s3://...``, ``memory://...``): the same record, read and written through
the URL's filesystem.
"""

from __future__ import annotations

import json
import os
import re
import secrets
import shutil
from dataclasses import dataclass
from pathlib import Path

from common.errors import OutputPathError
from common.fileio import WRITTEN_BY, write_json

OWNER = ".bangla-tokfair.owner.json"
_TOKEN = re.compile(r"[0-9a-f]{32}")


@dataclass(frozen=True)
class Owned:
    """A folder this process claimed (or proved to be ours): enough to remove what is ours in it, later."""

    url: str  # a local path or an fsspec URL, as given
    role: str  # what the folder is for, e.g. "corpus work"; a record of another role proves nothing
    token: str
    made: bool  # created by the project (else a user's empty folder, never removed)
    whole: bool  # made whole by the project: everything in it is ours


class _Folder:
    """The few operations ownership needs, on a local path or through fsspec for a URL."""

    def __init__(self, url: str | os.PathLike) -> None:
        self.url = str(url).rstrip("/") or "/"
        self.remote = "://" in self.url
        if self.remote:
            import fsspec

            self.fs, self.path = fsspec.core.url_to_fs(self.url)
        # The real folder's name, so that "." and its full path (or a link to it) prove the same folder.
        self.name = self.url.rsplit("/", 1)[-1] if self.remote else os.path.basename(os.path.realpath(self.url))

    def _p(self, name: str = "") -> str:
        return f"{self.path}/{name}" if name else self.path

    def exists(self) -> bool:
        return self.fs.exists(self.path) if self.remote else os.path.lexists(self.url)

    def is_dir(self) -> bool:
        if self.remote:
            return self.fs.isdir(self.path)
        return os.path.isdir(self.url) and not os.path.islink(self.url)

    def names(self) -> list[str]:
        if self.remote:
            return sorted(p.rstrip("/").rsplit("/", 1)[-1] for p in self.fs.ls(self.path, detail=False))
        return sorted(os.listdir(self.url))

    def mkdir(self) -> None:
        if self.remote:
            self.fs.makedirs(self.path, exist_ok=False)
        else:
            Path(self.url).mkdir(parents=True)  # fails on anything there: a folder is made here or not at all

    def read_record(self) -> dict | None:
        try:
            if self.remote:
                with self.fs.open(self._p(OWNER), "r", encoding="utf-8") as f:
                    record = json.load(f)
            else:
                record = json.loads(Path(self.url, OWNER).read_text(encoding="utf-8"))
        except (OSError, ValueError):  # absent, unreadable or torn: proves nothing
            return None
        return record if isinstance(record, dict) else None

    def write_record(self, record: dict) -> None:
        if self.remote:
            with self.fs.open(self._p(OWNER), "w", encoding="utf-8") as f:
                json.dump(record, f, indent=2)
        else:
            write_json(Path(self.url, OWNER), record)

    def remove(self, name: str | None = None) -> None:
        """Remove the entry ``name`` (a file or a tree), or the whole folder when ``name`` is None."""
        if self.remote:
            target = self._p(name or "")
            if self.fs.exists(target):
                self.fs.rm(target, recursive=True)
            return
        target = Path(self.url, name) if name else Path(self.url)
        if target.is_dir() and not target.is_symlink():
            shutil.rmtree(target)
        elif os.path.lexists(target):
            target.unlink()

    def remove_if_empty(self) -> None:
        try:
            if self.remote:
                if not self.fs.ls(self.path, detail=False):
                    self.fs.rmdir(self.path)
            else:
                os.rmdir(self.url)  # refuses a folder that is not empty: whatever else is there stays
        except (OSError, NotImplementedError):  # not empty, or an object store with no folders to remove
            pass


def _record(folder: _Folder, role: str, *, made: bool, whole: bool) -> Owned:
    token = secrets.token_hex(16)
    folder.write_record({"written_by": WRITTEN_BY, "role": role, "name": folder.name, "token": token,
                         "made": made, "entries": None if whole else []})
    return Owned(folder.url, role, token, made, whole)


def owned(url: str | os.PathLike, role: str) -> Owned | None:
    """The proof that ``url`` is a folder of ours for ``role``, or None (then it is never removed)."""
    folder = _Folder(url)
    if not folder.is_dir():
        return None
    record = folder.read_record()
    if (record is None or record.get("written_by") != WRITTEN_BY or record.get("role") != role
            or record.get("name") != folder.name or not _TOKEN.fullmatch(str(record.get("token")))):
        return None
    entries = record.get("entries")
    if entries is not None and not (isinstance(entries, list) and all(isinstance(e, str) for e in entries)):
        return None
    return Owned(folder.url, role, record["token"], record.get("made") is True, entries is None)


def make(url: str | os.PathLike, role: str, *, whole: bool = True) -> Owned:
    """Create the folder ``url`` (nothing may be there) and record it as ours."""
    folder = _Folder(url)
    folder.mkdir()
    return _record(folder, role, made=True, whole=whole)


def check_claimable(url: str | os.PathLike, role: str, what: str) -> None:
    """Refuse, before any work, a folder :func:`claim` would not take: anything but a new path, an empty folder
    or a folder of ours for ``role``."""
    folder = _Folder(url)
    if not folder.exists():
        return
    if not folder.remote and os.path.islink(folder.url):
        raise OutputPathError(f"{what} {url}: is a symbolic link; give the folder it points to, "
                              f"{os.path.realpath(folder.url)} (nothing was written)")
    if not folder.is_dir():
        raise OutputPathError(f"{what} {url}: exists and is not a folder; give a new or empty folder (nothing "
                              "was written)")
    if folder.names() and owned(url, role) is None:
        raise OutputPathError(f"{what} {url}: is a folder this project did not make and is not empty; give a new "
                              "or empty folder, which the project empties of its own files when done (nothing "
                              "was written)")


def claim(url: str | os.PathLike, role: str, what: str) -> Owned:
    """Take ``url`` for ``role``: make it when it is new, record an empty folder as ours (not made here: it
    is never removed), or prove one that is ours already. Anything else is refused (:func:`check_claimable`)."""
    check_claimable(url, role, what)
    folder = _Folder(url)
    if not folder.exists():
        return make(url, role, whole=False)
    proof = owned(url, role)
    return proof if proof is not None else _record(folder, role, made=False, whole=False)


def record(owner: Owned, *names: str) -> None:
    """Record ``names`` as entries the project creates in ``owner``'s folder, before they are written. A name
    already there that is not ours is refused: it was not created by the project and never will be removed."""
    folder = _Folder(owner.url)
    current = folder.read_record()
    if owned(owner.url, owner.role) != owner or current is None:
        raise OutputPathError(f"{owner.url}: no longer carries this project's record {OWNER}; it was changed "
                              "meanwhile (nothing of it is removed)")
    if owner.whole:
        return
    entries = list(current["entries"])
    present = set(folder.names())
    for name in names:
        if name in entries:
            continue
        if name in present:
            raise OutputPathError(f"{owner.url}: holds {name}, which this project did not write; move it away "
                                  "(nothing was written)")
        entries.append(name)
    folder.write_record(current | {"entries": entries})


def remove(owner: Owned) -> bool:
    """Remove what is ours in ``owner``'s folder: all of it when made whole, else its recorded entries, the
    record, and the folder itself only when made here and left empty. Nothing is removed (False) when the
    folder no longer carries ``owner``'s token."""
    proof = owned(owner.url, owner.role)
    if proof is None or proof.token != owner.token:
        return False
    folder = _Folder(owner.url)
    if proof.whole and proof.made:
        folder.remove()
        return True
    for name in (folder.read_record() or {}).get("entries") or []:
        if "/" not in name and name not in ("", ".", "..", OWNER):
            folder.remove(name)
    folder.remove(OWNER)
    if proof.made:
        folder.remove_if_empty()
    return True
