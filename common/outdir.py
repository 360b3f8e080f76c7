"""What ``--out`` may be, for every command of the project, and how an output folder appears.

The policy (docs/contract.md says it to users):

* OUT may be a path that does not exist, or an empty folder.
* An existing OUT that is not empty is replaced only with ``--overwrite``, and only when this project wrote
  it: a published folder carries :data:`MARKER`. A folder of anything else is never replaced.
* Never, whatever the flags: a file where a folder is expected, the current directory or a folder above it,
  a folder that is, holds or lies inside one of the command's inputs.
* Its parent must be writable (a probe of one block: a full disk is caught too). All of this is checked before
  any work starts (:func:`check_output_dir`), and again under the lock of OUT's one writer (:func:`output_dir`,
  ``common.writer``), which every staging and publishing call requires.
* The content is built in a staging folder beside OUT (:func:`staging_dir`) and swapped in at the end
  (:func:`publish_dir`, in one exchange where the file system can, with signals held), so OUT holds either
  the old or the new content, never a mixture or neither.
* A symbolic link as OUT stays as it is: the content goes to the folder it points to (:func:`publish_path`).
  A mount point cannot take the final rename and is refused before any work (:func:`check_publishable`).
* Only what the project made is ever removed (``common.owned`` for folders that outlive a process).

This is the output-folder role of `common.paths`, which holds the other roles' policies (an output file's too).
"""

from __future__ import annotations

import ctypes
import errno
import os
import re
import shutil
import tempfile
from collections.abc import Iterable, Iterator
from contextlib import contextmanager
from functools import partial
from pathlib import Path

from common.errors import OutputPathError
from common.fileio import WRITTEN_BY, read_json, write_json
from common.signals import held_signals
from common.writer import OLD, STAGING, Writer, canonical, require, writing

# Written into every folder this project publishes: the mark that --overwrite may replace it.
MARKER = ".bangla-tokfair.json"
PROBE_BYTES = 4096  # one block: what any new file of a result needs at least


def _within(path: Path, folder: Path) -> bool:
    return path == folder or folder in path.parents


def _writable_parent(out: Path, what: str) -> None:
    parent = out.parent
    while not parent.exists():
        parent = parent.parent
    if not parent.is_dir():
        raise OutputPathError(f"{what} {out}: {parent} is not a folder")
    # A real probe, not os.access: root passes os.access on a read-only mount, and only a write tells.
    try:
        fd, probe = tempfile.mkstemp(dir=parent, prefix=".write-probe.", suffix=".tmp")
    except OSError as e:
        raise OutputPathError(f"{what} {out}: {parent} is not writable ({e.strerror}); choose another place "
                              "(nothing was written)") from None
    try:
        os.write(fd, bytes(PROBE_BYTES))  # a full disk still allows an empty file, not a block of data
    except OSError as e:
        raise OutputPathError(f"{what} {out}: {parent} cannot be written ({e.strerror}); free space or choose "
                              "another place (nothing was written)") from None
    finally:
        os.close(fd)
        os.unlink(probe)


def _check_inputs(out: Path, inputs: Iterable[str | os.PathLike], what: str) -> None:
    for given in inputs:
        if not Path(given).exists():
            continue  # a tokenizer name, a hub id: nothing on disk to keep apart from OUT
        source = Path(given).resolve()
        if _within(source, out):
            raise OutputPathError(f"{what} {out}: holds the input {given}; choose a folder apart from the inputs")
        if source.is_dir() and _within(out, source):
            raise OutputPathError(f"{what} {out}: lies inside the input folder {given}; choose a folder apart "
                                  "from the inputs")


def is_ours(folder: str | os.PathLike) -> bool:
    """Whether ``folder`` is one this project published (it carries :data:`MARKER`)."""
    return (Path(folder) / MARKER).is_file()


def check_output_dir(out: str | os.PathLike, *, overwrite: bool = False, inputs: Iterable[str | os.PathLike] = (),
                     what: str = "--out", publish: bool = True) -> Path:
    """Refuse, before any work, an output folder the policy above forbids; return it as given.

    ``inputs`` are the command's input paths (files or folders); one that does not exist on disk (a tokenizer
    name, a hub id) is ignored. With ``publish`` (a result swapped in by :func:`publish_dir`) OUT must also be
    a place that rename can fill (:func:`check_publishable`); a command that writes in place (a training run)
    passes False.
    """
    out = Path(out)
    resolved = out.resolve()
    if _within(Path.cwd().resolve(), resolved):
        raise OutputPathError(f"{what} {out}: is the current folder or holds it; name a new folder")
    _check_inputs(resolved, inputs, what)
    if out.exists() or out.is_symlink():
        if not out.is_dir():
            raise OutputPathError(f"{what} {out}: exists and is not a folder; choose a folder path "
                                  "(nothing was written)")
        if any(out.iterdir()):
            if not is_ours(out):
                raise OutputPathError(f"{what} {out}: is a folder this project did not write and is not empty; "
                                      "choose a new or empty folder (nothing was written)")
            if not overwrite:
                raise OutputPathError(f"{what} {out}: already holds a result; choose another path or pass "
                                      "--overwrite to replace it")
    _writable_parent(out, what)
    if publish:
        check_publishable(out, what)
    return out


@contextmanager
def output_dir(out: str | os.PathLike, command: str, *, overwrite: bool = False,
               inputs: Iterable[str | os.PathLike] = (), what: str = "--out", publish: bool = True) -> Iterator[Path]:
    """OUT for the block, with its one writer's lock held (:func:`common.writer.writing`): checked
    (:func:`check_output_dir`) before the lock is taken, so that a refused OUT gets nothing written beside it,
    and again under it, since another writer may have finished meanwhile."""
    check_output_dir(out, overwrite=overwrite, inputs=inputs, what=what, publish=publish)
    with writing(out, command, overwrite=overwrite, what=what):
        yield check_output_dir(out, overwrite=overwrite, inputs=inputs, what=what, publish=publish)


class PublishError(OutputPathError):
    """The finished result could not be put in place at OUT (a mount the checks could not see, a folder changed
    meanwhile); it is kept where it was built, and OUT is as it was."""


def publish_path(out: str | os.PathLike) -> Path:
    """Where OUT's content goes: OUT resolved once (:func:`common.writer.canonical`), so, when OUT is a
    symbolic link, the folder it points to. The link is the user's: it is never renamed or replaced, and the
    content is staged beside its target, so that publishing is still one rename on the target's file system."""
    return canonical(out)


def check_publishable(out: str | os.PathLike, what: str = "--out") -> None:
    """Refuse, before any work, an OUT that :func:`publish_dir` cannot fill: a mount point (or a link to one).

    Publishing renames a finished folder into place, which keeps OUT either as it was or complete; a mount
    point cannot be renamed or replaced (EBUSY), and filling it file by file would leave a half-written OUT
    behind a kill. So the result goes in a folder inside it. A read-only mount is refused the same way."""
    target = publish_path(out)
    if is_mount_point(target):
        raise OutputPathError(f"{what} {out}: is a mount point, which cannot be replaced by the finished folder; "
                              f"give a folder inside it, e.g. {what} {Path(out) / 'result'} (nothing was written)")
    if Path(out).is_symlink():
        _writable_parent(target, what)


def is_mount_point(path: str | os.PathLike) -> bool:
    """Whether ``path`` is a mount point: ``os.path.ismount``, or listed in ``/proc/self/mountinfo``, which also
    names a bind mount of a folder of the same file system (ismount sees no change of device there, and the
    rename onto it fails with EBUSY all the same: measured with ``mount --bind`` on this machine)."""
    if os.path.ismount(path):
        return True
    try:
        lines = Path("/proc/self/mountinfo").read_text(encoding="utf-8").splitlines()
    except OSError:  # not Linux: ismount is all there is, and publish_dir still fails in one line
        return False
    real = os.path.realpath(path)
    unescape = partial(re.compile(r"\\([0-7]{3})").sub, lambda m: chr(int(m.group(1), 8)))
    return any(len(fields) > 4 and unescape(fields[4]) == real for fields in map(str.split, lines))


@contextmanager
def staging_dir(out: str | os.PathLike) -> Iterator[Path]:
    """A fresh folder beside ``out`` (beside its target when ``out`` is a symlink) to build its content in,
    under the lock of OUT's writer (:func:`common.writer.writing`), which journals it first; removed if the
    block raises, except once publishing has handed it to the user (:class:`PublishError`: it holds the result).
    """
    writer = require(out)
    out = publish_path(out)  # its folder exists: the writer's lock file lies in it
    tmp = writer.new_name(out, STAGING, ".tmp")
    tmp.mkdir()  # the mode a plain mkdir gives, so that a published report is readable by others
    try:
        yield tmp
    except BaseException:
        # Provably ours: journaled under OUT's lock before it was made, and not yet handed on.
        if writer.journal.get(writer._key(tmp)) == STAGING:
            shutil.rmtree(tmp, ignore_errors=True)
            writer.done(tmp)
        raise


def publish_dir(staged: str | os.PathLike, out: str | os.PathLike, *, command: str = "") -> Path:
    """Mark a staged folder as ours and move it to ``out`` (to its target when ``out`` is a symlink, which
    stays as it is), under the lock of OUT's writer, replacing an existing folder there only when it is empty
    or ours, and, at OUT itself, only when the writer was given ``overwrite``: checked again here, under the
    lock, since the check before the work.

    An empty folder is replaced by the one rename (POSIX renames a folder onto an empty one). A folder of ours
    is moved aside first (journaled, so a writer killed in between is undone by the next one) and removed only
    once the new one is in place; signals wait until the swap is over. So whatever stops the command, ``out``
    holds the old or the new content, never neither. A rename that fails (a mount point no check could see:
    EBUSY) puts back what was moved and raises :class:`PublishError`: one line, nothing lost.
    """
    writer = require(out)
    staged, given = Path(staged), Path(out)
    out = publish_path(given)
    # What the staging folder's own marker recorded (a resumable build's arguments) stays in it: should the
    # rename fail, the rerun must still recognise the kept result as its own.
    try:
        earlier = read_json(staged / MARKER)
    except (OSError, ValueError):
        earlier = {}
    extra = earlier if isinstance(earlier, dict) else {}
    write_json(staged / MARKER, {**extra, "written_by": WRITTEN_BY, "command": command})
    kept = f"the result is kept in {staged}; move it where you want it"
    old = None  # where the earlier result is once the new one is in place
    with held_signals():
        try:
            if os.path.lexists(out) and (not out.is_dir() or any(out.iterdir())):
                if not out.is_dir() or not is_ours(out):
                    raise PublishError(f"{given}: is no longer empty nor a folder this project wrote; {kept}")
                if out == writer.out and not writer.overwrite:
                    raise PublishError(f"{given}: holds a result written since this command began (it was given "
                                       f"no --overwrite); {kept}")
                old = _swap(writer, staged, out, given, kept)
            else:
                _rename(staged, out, given, kept)
        except PublishError:
            writer.done(staged)  # the user's to move now: never removed
            raise
        if old != staged:
            writer.done(staged)
    if old is not None:
        # Provably the folder that was at OUT: ours (checked above), swapped out by this very call, journaled.
        shutil.rmtree(old)
        writer.done(old)
    return given


def _swap(writer: Writer, staged: Path, out: Path, given: Path, kept: str) -> Path:
    """Put ``staged`` in the place of the folder at ``out`` and return where that folder is now.

    Where the file system can (Linux's ``renameat2(RENAME_EXCHANGE)``: ext4, xfs, btrfs, tmpfs), the two trade
    places in one step, so that not even ``kill -9`` finds OUT missing; the journal says which folder ``staged``
    was, and the next writer removes it only once it is the old one. Elsewhere the old folder is renamed aside
    first (journaled; the next writer puts it back if the new one never arrived)."""
    swapping = writer.swapping(staged)
    try:
        exchange(staged, out)
        return staged
    except OSError as e:
        if e.errno not in (errno.EINVAL, errno.ENOSYS, errno.ENOTSUP):
            raise PublishError(f"{given}: could not be put in place ({e.strerror}); {kept}") from None
    if swapping:
        writer.done(staged)  # not swapped: as it was before
    old = writer.new_name(out, OLD, ".old")
    _rename(out, old, given, kept)
    try:
        _rename(staged, out, given, kept)
    except PublishError:
        old.rename(out)
        writer.done(old)
        raise
    return old


_RENAME_EXCHANGE = 2  # linux/fs.h


def exchange(a: Path, b: Path) -> None:
    """Swap two paths atomically (``renameat2`` with ``RENAME_EXCHANGE``); OSError EINVAL/ENOSYS where the
    system or file system cannot."""
    libc = ctypes.CDLL(None, use_errno=True)
    renameat2 = getattr(libc, "renameat2", None)
    if renameat2 is None:
        raise OSError(errno.ENOSYS, "renameat2 is not available")
    at_fdcwd = -100
    if renameat2(at_fdcwd, os.fsencode(a), at_fdcwd, os.fsencode(b), _RENAME_EXCHANGE) != 0:
        code = ctypes.get_errno()
        raise OSError(code, os.strerror(code), str(b))


def _rename(src: Path, dst: Path, given: Path, kept: str) -> None:
    try:
        src.rename(dst)
    except OSError as e:
        raise PublishError(f"{given}: could not be put in place ({e.strerror}); {kept}") from None
