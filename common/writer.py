"""One writer per output: an exclusive lock on OUT, held from the command's first check to its publish, and the
journal of the hidden folders the writer makes beside OUT.

* The lock is ``flock`` on ``.OUT.lock`` beside OUT (beside the folder a symbolic link points to), so the
  kernel releases it when the process dies, however it dies: a ``kill -9`` leaves no stale lock. A second
  writer of the same OUT, its staging, checkpoint or work folder is refused at once, in one line naming the
  command and process that hold it (:class:`Busy`).
* OUT is resolved once, when the lock is taken (``os.path.realpath``): every later path is built from that
  folder and its name, so ``X/../X`` still names the place after ``X`` was renamed aside.
* The lock file is also the writer's journal: every hidden folder it is about to make beside OUT (a staging
  folder, the old result set aside during the swap) is written there *before* it is made. The next writer of
  the same OUT reads what a killed one left and finishes its work: it puts back an old result set aside whose
  new one never arrived, and removes the rest, all of it provably the project's own (named in the journal of
  a lock on this very OUT). With nothing left to finish, the lock file is removed on release.

Nested writers in one process (a command whose library call takes the lock again) share the one lock.
"""

from __future__ import annotations

import errno
import fcntl
import json
import os
import secrets
import shutil
import socket
from collections.abc import Iterator
from contextlib import contextmanager
from dataclasses import dataclass, field
from pathlib import Path

from common.errors import OutputPathError

STAGING = "staging"  # a folder the result is built in; removed if the writer dies before publishing it
OLD = "old"  # the earlier result, set aside during the swap; put back if the new one is not in place
SWAP = "swap"  # a finished result being swapped with OUT's: removed only once it holds the old one


class Busy(OutputPathError):
    """Another process is writing the same output; nothing was written."""


def canonical(out: str | os.PathLike) -> Path:
    """The folder OUT names, resolved once: symbolic links (OUT itself may be one: its content goes to the
    folder it points to) and ``..`` followed, so the path stays valid whatever is renamed later."""
    return Path(os.path.realpath(out))


def lock_path(out: str | os.PathLike) -> Path:
    target = canonical(out)
    return target.parent / f".{target.name}.lock"


@dataclass
class Writer:
    """The lock this process holds on one output, and the journal written in its file."""

    out: Path  # canonical
    command: str
    overwrite: bool  # whether the command may replace an earlier result at OUT (checked again at the publish)
    fd: int
    made_parents: list[Path]
    given: Path  # OUT as named, its folder resolved: where a symbolic link OUT's own companions lie
    journal: dict[str, str] = field(default_factory=dict)  # a folder's resolved path -> STAGING or OLD

    def covers(self, path: Path) -> bool:
        """Whether ``path`` is OUT or one of its hidden companions (``.OUT.*`` beside it, or beside the symbolic
        link OUT was named by), or lies in one."""
        for out in (self.out, self.given):
            try:
                first = canonical(path).relative_to(out.parent).parts[0]
            except (ValueError, IndexError):
                continue
            if first == out.name or first.startswith(f".{out.name}."):
                return True
        return False

    def new_name(self, beside: Path, kind: str, suffix: str) -> Path:
        """A fresh name beside ``beside`` (OUT or a companion folder), journaled as ``kind`` before anything is
        made under it."""
        beside = canonical(beside)
        while True:
            path = beside.parent / f".{beside.name}.{secrets.token_hex(4)}{suffix}"
            if not os.path.lexists(path):
                self._note(path, kind)
                return path

    def swapping(self, staged: Path) -> bool:
        """``staged`` (a finished result, made by this command or kept by an earlier one for it) is about to
        trade places with OUT: journaled with its identity, so that the next writer removes what is there only
        when OUT is that folder, i.e. when ``staged`` holds the old result. False when it was journaled already
        (a staging folder, removed either way)."""
        if self.journal.get(self._key(staged)) == STAGING:
            return False
        self._note(staged, _identity(staged))
        return True

    def done(self, path: Path) -> None:
        """``path`` needs no finishing any more (published, kept for the user, or removed)."""
        self.journal.pop(self._key(path), None)
        self._save()

    def _key(self, path: Path) -> str:
        return str(canonical(path))

    def _note(self, path: Path, kind: str) -> None:
        self.journal[self._key(path)] = kind
        self._save()

    def _save(self) -> None:
        record = {"command": self.command, "pid": os.getpid(), "host": socket.gethostname(),
                  "journal": self.journal}
        data = json.dumps(record, indent=1).encode()
        # In place: the lock lives on this file's inode, which a rename would replace.
        os.lseek(self.fd, 0, os.SEEK_SET)
        os.ftruncate(self.fd, 0)
        os.write(self.fd, data)
        os.fsync(self.fd)


_HELD: dict[Path, Writer] = {}


def holder(path: str | os.PathLike) -> Writer | None:
    """The writer this process holds whose output covers ``path``, or None."""
    return next((w for w in _HELD.values() if w.covers(Path(path))), None)


def require(path: str | os.PathLike) -> Writer:
    """The writer covering ``path``; a bug (not the user's) when there is none: every command that writes an
    output folder takes its lock first (:func:`writing`)."""
    writer = holder(path)
    if writer is None:
        raise RuntimeError(f"{path}: written without its writer's lock (common.writer.writing)")
    return writer


def _read(fd: int) -> dict:
    try:
        record = json.loads(os.pread(fd, 1 << 20, 0) or b"{}")
    except (OSError, ValueError):  # being written, or torn by a crash: proves nothing
        return {}
    return record if isinstance(record, dict) else {}


def _make_parents(folder: Path) -> list[Path]:
    made = []
    for parent in reversed([folder, *folder.parents]):
        if not parent.exists():
            parent.mkdir()
            made.append(parent)
    return made


def _acquire(out: Path, given: Path, what: str) -> tuple[int, list[Path]]:
    made = _make_parents(out.parent)
    path = out.parent / f".{out.name}.lock"
    while True:
        fd = os.open(path, os.O_RDWR | os.O_CREAT | os.O_CLOEXEC, 0o666)
        try:
            fcntl.flock(fd, fcntl.LOCK_EX | fcntl.LOCK_NB)
        except OSError as e:
            record = _read(fd)
            os.close(fd)
            for parent in reversed(made):
                os.rmdir(parent)
            if e.errno not in (errno.EWOULDBLOCK, errno.EAGAIN):
                raise
            who = (f"{record['command']} (pid {record['pid']} on {record.get('host', '?')})"
                   if {"command", "pid"} <= record.keys() else "another process")
            raise Busy(f"{what} {given}: is being written by {who}; wait for it to end or choose another path "
                       "(nothing was written)") from None
        # A releasing writer removes the file after its last use: the lock counts only on the file that is
        # still at the path, else try again.
        try:
            if os.path.samestat(os.fstat(fd), os.stat(path)):
                return fd, made
        except FileNotFoundError:
            pass
        os.close(fd)


def _identity(path: Path) -> str | None:
    try:
        stat = os.lstat(path)
    except OSError:
        return None
    return f"{SWAP}:{stat.st_dev}:{stat.st_ino}"


def _finish(writer: Writer) -> None:
    """Finish what a killed writer of the same OUT left, as its journal (now this writer's) says."""
    for name, kind in list(writer.journal.items()):
        path = Path(name)
        if path.is_absolute() and writer.covers(path) and path.is_dir() and not path.is_symlink():
            if kind == OLD and not os.path.lexists(writer.out):
                path.rename(writer.out)  # killed mid-swap: the old result goes back, as if the swap had not begun
            elif kind in (STAGING, OLD) or kind == _identity(writer.out):
                shutil.rmtree(path)  # a SWAP entry only once OUT is the new result: then this is the old one
        writer.journal.pop(name)
        writer._save()


@contextmanager
def writing(out: str | os.PathLike, command: str, *, overwrite: bool = False, what: str = "--out") -> Iterator[Writer]:
    """Hold the lock on OUT for the block (re-entrant within a process); :class:`Busy` when another process
    holds it. What a killed earlier writer left half-done is finished first."""
    target = canonical(out)
    writer = _HELD.get(target)
    if writer is not None:  # a nested writer of this process: the one lock, released by the outer block
        writer.overwrite = writer.overwrite or overwrite
        yield writer
        return
    fd, made = _acquire(target, Path(out), what)
    writer = Writer(target, command, overwrite, fd, made, canonical(Path(out).parent) / Path(out).name)
    try:
        left = _read(fd).get("journal")
        writer.journal = {str(k): str(v) for k, v in left.items()} if isinstance(left, dict) else {}
        writer._save()  # this writer's name in the file at once, for a refused second writer to show
        _HELD[target] = writer
        _finish(writer)
        yield writer
    finally:
        _HELD.pop(target, None)
        _release(writer)


def _release(writer: Writer) -> None:
    lock = writer.out.parent / f".{writer.out.name}.lock"
    if not writer.journal:  # nothing for a later writer to finish: no trace left
        lock.unlink(missing_ok=True)
    os.close(writer.fd)
    for parent in reversed(writer.made_parents):
        try:
            os.rmdir(parent)  # only when left empty: the folders this writer made for OUT, nothing else
        except OSError:
            break

