"""What ``--out`` may be, for every command of the project, and how an output folder appears.

The policy (docs/contract.md says it to users):

* OUT may be a path that does not exist, or an empty folder.
* An existing OUT that is not empty is replaced only with ``--overwrite``, and only when this project wrote
  it: a published folder carries :data:`MARKER`. A folder of anything else is never replaced.
* Never, whatever the flags: a file where a folder is expected, the current directory or a folder above it,
  a folder that is, holds or lies inside one of the command's inputs.
* Its parent must be writable. All of this is checked before any work starts (:func:`check_output_dir`).
* The content is built in a staging folder beside OUT (:func:`staging_dir`) and swapped in at the end
  (:func:`publish_dir`), so OUT holds either the old or the new content, never a mixture or neither.

This is the output-folder role of `common.paths`, which holds the other roles' policies (an output file's too).
"""

from __future__ import annotations

import os
import shutil
import tempfile
from collections.abc import Iterable, Iterator
from contextlib import contextmanager
from pathlib import Path

from common.errors import OutputPathError
from common.fileio import umask, write_json

# Written into every folder this project publishes: the mark that --overwrite may replace it.
MARKER = ".bangla-tokfair.json"


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
                     what: str = "--out") -> Path:
    """Refuse, before any work, an output folder the policy above forbids; return it as given.

    ``inputs`` are the command's input paths (files or folders); one that does not exist on disk (a tokenizer
    name, a hub id) is ignored.
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
    os.chmod(tmp, 0o777 & ~umask())
    try:
        yield tmp
    except BaseException:
        shutil.rmtree(tmp, ignore_errors=True)
        raise


def publish_dir(staged: str | os.PathLike, out: str | os.PathLike, *, command: str = "") -> Path:
    """Mark a staged folder as ours and move it to ``out``, replacing an existing folder there only when it
    is empty or ours (the caller checked ``--overwrite`` up front with :func:`check_output_dir`).

    The old folder is moved aside and removed only once the new one is in place, so a crash in between leaves
    either the old or the new content under ``out``, never neither.
    """
    staged, out = Path(staged), Path(out)
    write_json(staged / MARKER, {"written_by": "bangla-tokfair", "command": command})
    if out.exists() or out.is_symlink():
        if not out.is_dir() or (any(out.iterdir()) and not is_ours(out)):
            raise OutputPathError(f"{out}: is no longer empty nor a folder this project wrote; the result is "
                                  f"left in {staged}")
        old = out.with_name(f".{out.name}.old-{os.getpid()}")
        shutil.rmtree(old, ignore_errors=True)
        out.rename(old)
        staged.rename(out)
        shutil.rmtree(old)
    else:
        staged.rename(out)
    return out
