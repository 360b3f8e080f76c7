"""What a path on a command line may be used for: every option's role, declared where the option is, and the
one policy of each role (docs/contract.md, "Path roles").

Every option or positional of every command that takes a value declares its role through its argparse
``type=`` (tests/common/test_path_roles.py walks every parser and fails on one that does not):

* :data:`Role.INPUT`, read only: never written, moved or deleted. A file or folder (:data:`input_path`), a
  labelled spec ``LANG=PATH``, ``LANG=PATH:FIELD`` or ``LANG=hf:...`` (:func:`input_spec`), or a name or a path
  (:data:`name_or_path`: a tokenizer, a preset, a hub model). Output files and work folders are kept apart
  from every input; an input folder may name the files inside it that the command itself writes (``own``,
  e.g. ``pretrain eval --run RUN`` writes RUN/eval.json).
* :data:`Role.OUTPUT_DIR`, a folder the command publishes: :func:`common.outdir.check_output_dir`.
* :data:`Role.OUTPUT_FILE`, a file the command writes: :func:`check_output_file`.
* :data:`Role.WORK_DIR`, scratch: :func:`check_work_dir` keeps it apart from the inputs and the current folder;
  what of it is ever deleted is the ownership rule of `common.outdir`.
* :data:`Role.NOT_PATH`, a value that is never used as a path (a label, a number, a host, a shell command):
  :func:`not_a_path`; `common.cli`'s number and label types, ``choices`` and ``int``/``float`` are that too.

At parse time each path role refuses what no command can use, naming the option in one line: a file name
longer than the system allows, a symbolic link that loops or points nowhere, and for an input a FIFO or a
device (the commands read their inputs more than once, and a FIFO without a writer would block in silence).
Before ``run`` (:func:`check_args`, called by `common.cli.run_command`), every output file is checked against
every input of the same command line.

A JSON file proves that this project wrote it by a top-level ``"written_by": "bangla-tokfair"``
(:func:`stamped`); ``--overwrite`` replaces an existing output file only when it carries that field.
"""

from __future__ import annotations

import argparse
import errno
import json
import os
import stat
from collections.abc import Callable, Iterable
from enum import StrEnum
from pathlib import Path
from typing import Any

from common.errors import OutputPathError
from common.fileio import WRITTEN_BY
from common.outdir import MARKER, _check_inputs, _within, _writable_parent, is_ours

# The longest file name (one path component) Linux filesystems take (ext4, xfs, btrfs, tmpfs: NAME_MAX).
NAME_MAX = 255
# An output file is a report or a status: one bigger than this is not a JSON file of ours.
_MAX_OURS_BYTES = 64 << 20


class Role(StrEnum):
    INPUT = "input"
    OUTPUT_DIR = "output folder"
    OUTPUT_FILE = "output file"
    WORK_DIR = "work folder"
    NOT_PATH = "not a path"


PATH_ROLES = (Role.INPUT, Role.OUTPUT_DIR, Role.OUTPUT_FILE, Role.WORK_DIR)


# --- what every path role refuses at parse time ---------------------------------------------------------------

def _is_url(text: str) -> bool:
    return "://" in text or text.startswith("hf:")


def check_name(path: str) -> None:
    """Refuse a path with a file name longer than :data:`NAME_MAX` bytes (the system would say ENAMETOOLONG
    deep inside the work) or with a NUL byte."""
    if "\0" in path:
        raise argparse.ArgumentTypeError(f"{path!r}: holds a NUL byte, which no file name can")
    for part in Path(path).parts:
        size = len(os.fsencode(part))
        if size > NAME_MAX:
            raise argparse.ArgumentTypeError(f"{part[:40]}...: a file name of {size} bytes; the system allows "
                                             f"{NAME_MAX} at most")


def check_link(path: str) -> None:
    """Refuse a symbolic link that loops or points nowhere (``Path.exists`` calls both "missing")."""
    try:
        os.stat(path)
    except OSError as e:
        if e.errno == errno.ELOOP:
            raise argparse.ArgumentTypeError(f"{path}: symlink loop (a symbolic link that leads back to "
                                             "itself)") from None
        if e.errno == errno.ENOENT and os.path.islink(path):
            raise argparse.ArgumentTypeError(f"{path}: a symbolic link to {os.readlink(path)}, which does "
                                             "not exist") from None


def check_readable_kind(path: str, expects: str = "") -> None:
    """An input on disk is a regular file or a folder (``expects`` "file" or "folder": that one): a FIFO or
    a device is refused (read once, or never)."""
    try:
        mode = os.stat(path).st_mode
    except OSError:
        return  # missing: the command says what it expected there
    if stat.S_ISFIFO(mode):
        raise argparse.ArgumentTypeError(f"{path}: is a FIFO (named pipe), not a file; the command reads its "
                                         "inputs more than once: give a regular file")
    if not (stat.S_ISREG(mode) or stat.S_ISDIR(mode)):
        raise argparse.ArgumentTypeError(f"{path}: is not a regular file or folder")
    if expects == "file" and stat.S_ISDIR(mode):
        raise argparse.ArgumentTypeError(f"{path}: is a folder, not a file")
    if expects == "folder" and not stat.S_ISDIR(mode):
        raise argparse.ArgumentTypeError(f"{path}: is a file, not a folder")


def spec_path(text: str, *, labelled: bool = False) -> str | None:
    """The local path in an input spec, if one is on disk: ``PATH``, ``PATH:FIELD`` (a field of a JSONL or
    parquet file), after ``LANG=`` when ``labelled``; None for a name, a hub id or a URL."""
    rest = text.partition("=")[2] if labelled else text
    rest = rest.strip()
    if not rest or _is_url(rest):
        return None
    candidates = [rest] + ([rest.rsplit(":", 1)[0]] if ":" in rest else [])
    return next((c for c in candidates if os.path.lexists(c)), None)


# --- the argparse types, one per role -------------------------------------------------------------------------

def _typed(role: Role, convert: Callable[[str], Any] = str, *, labelled: bool = False,
           own: Iterable[str] = (), expects: str = "") -> Callable[[str], Any]:
    def parse(text: str):
        if role in PATH_ROLES:
            raw = text.partition("=")[2] if labelled else text
            if not _is_url(raw.strip()):
                check_name(raw.strip())
            local = spec_path(text, labelled=labelled) if role is Role.INPUT else text
            if local and not _is_url(local):
                check_link(local)
                if role is Role.INPUT:
                    check_readable_kind(local, expects)
        return convert(text)

    parse.role = role
    parse.labelled = labelled
    parse.own = tuple(own)  # files inside this input folder that the command writes itself
    parse.expects = expects
    parse.__name__ = getattr(convert, "__name__", role.value)
    if hasattr(convert, "kind"):
        parse.kind = convert.kind  # the help's metavar convention (common.cli)
    return parse


def input_spec(convert: Callable[[str], Any] = str, *, labelled: bool = True) -> Callable[[str], Any]:
    """An input given as ``LANG=PATH``, ``LANG=PATH:FIELD`` or ``LANG=hf:...`` (``convert`` parses it further)."""
    return _typed(Role.INPUT, convert, labelled=labelled)


def input_dir(*own: str) -> Callable[[str], str]:
    """An input folder; the command writes inside it only the files named ``own`` (its own output), if any."""
    return _typed(Role.INPUT, own=own, expects="folder")


def not_a_path(convert: Callable[[str], Any] = str) -> Callable[[str], Any]:
    """A value that is never used as a path (a host, a URL, a shell command, ``KEY=VALUE`` settings)."""
    return _typed(Role.NOT_PATH, convert)


def output_dir_type(convert: Callable[[str], Any] = str) -> Callable[[str], Any]:
    """An output folder whose value ``convert`` turns into what the command wants (e.g. a Path)."""
    return _typed(Role.OUTPUT_DIR, convert)


input_path = _typed(Role.INPUT)              # a file or folder read
input_file = _typed(Role.INPUT, expects="file")
input_folder = input_dir()
name_or_path = _typed(Role.INPUT)            # a name (tokenizer, preset, hub id) or a path to one: read only
output_dir = _typed(Role.OUTPUT_DIR)         # common.outdir.check_output_dir
output_file = _typed(Role.OUTPUT_FILE)       # check_output_file, applied by check_args before run
work_dir = _typed(Role.WORK_DIR)             # check_work_dir; a URL is left to fsspec
text = not_a_path()


def role_of(action: argparse.Action) -> Role | None:
    """The role an argparse action declares; None for an action that takes a value and declares none."""
    declared = getattr(action.type, "role", None)
    if declared is not None:
        return declared
    if action.choices is not None or action.type in (int, float):
        return Role.NOT_PATH
    return None


def takes_value(action: argparse.Action) -> bool:
    return action.nargs != 0 and not isinstance(action, argparse._SubParsersAction)


def undeclared(parser: argparse.ArgumentParser, prog: str | None = None) -> list[str]:
    """``PROG OPTION`` for every action of ``parser`` and its subcommands that takes a value and declares no
    role: the list the inventory test wants empty."""
    prog = prog or parser.prog
    found = []
    for action in parser._actions:
        if isinstance(action, argparse._SubParsersAction):
            for name, sub in action.choices.items():
                found += undeclared(sub, f"{prog} {name}")
        elif takes_value(action) and role_of(action) is None:
            found.append(f"{prog} {(action.option_strings or [action.dest])[0]}")
    return found


# --- the policies applied before run ---------------------------------------------------------------------------

def _chosen(parser: argparse.ArgumentParser, args: argparse.Namespace) -> tuple[str, list[argparse.Action]]:
    """The prog of the (sub)command ``args`` chose (e.g. "pretrain export") and its actions, its parents' too."""
    prog, actions = parser.prog, []
    for action in parser._actions:
        if isinstance(action, argparse._SubParsersAction):
            chosen = action.choices.get(getattr(args, action.dest, None) or "")
            if chosen is not None:
                prog, more = _chosen(chosen, args)
                actions += more
        else:
            actions.append(action)
    return prog, actions


def _values(action: argparse.Action, args: argparse.Namespace) -> list[str]:
    value = getattr(args, action.dest, None)
    if value is None:
        return []
    return [str(v) for v in (value if isinstance(value, list) else [value])]


def chosen_paths(parser: argparse.ArgumentParser, args: argparse.Namespace,
                 roles: tuple[Role, ...]) -> list[tuple[str, str]]:
    """(option, value) for every value of a path option of ``roles`` the parsed command was given, e.g.
    ``("--out", "/data/shards")``."""
    _, actions = _chosen(parser, args)
    return [((a.option_strings or [a.dest])[0], value) for a in actions
            if takes_value(a) and role_of(a) in roles for value in _values(a, args)]


def written_by_us(path: str | os.PathLike) -> bool:
    """Whether ``path`` is a JSON object this project wrote (it carries ``"written_by": "bangla-tokfair"``)."""
    path = Path(path)
    try:
        if path.stat().st_size > _MAX_OURS_BYTES:
            return False
        data = json.loads(path.read_text(encoding="utf-8"))
    except (OSError, UnicodeDecodeError, ValueError):
        return False
    return isinstance(data, dict) and data.get("written_by") == WRITTEN_BY


def stamped(record: dict[str, Any]) -> dict[str, Any]:
    """``record`` with the field that proves this project wrote the file (:func:`written_by_us`)."""
    return {"written_by": WRITTEN_BY, **record}


def _published_folder(path: Path) -> Path | None:
    """The nearest folder above ``path`` that this project published (a run, shards, a report)."""
    return next((folder for folder in path.parents if (folder / MARKER).is_file()), None)


def check_output_file(path: str | os.PathLike, *, overwrite: bool = False,
                      inputs: Iterable[str | os.PathLike] = (), what: str = "--out", own: bool = False) -> Path:
    """The output-file policy, before any work: a new path, or an existing file this project wrote
    (:func:`written_by_us`) with ``overwrite``. Never a folder, a link, a FIFO or a device; never one of the
    ``inputs`` nor a file inside an input folder; never a file inside a folder this project published (a run,
    a shard folder, a report) unless ``own`` (the command's own output there, e.g. a run's config.json to
    its trainer); its folder must be writable."""
    path = Path(path)
    resolved = path.resolve()
    for given in inputs:
        source = Path(given).resolve()
        if source == resolved:
            raise OutputPathError(f"{what} {path}: is the input {given}; choose another file")
        if source.is_dir() and _within(resolved, source) and not own:
            raise OutputPathError(f"{what} {path}: lies inside the input folder {given}; choose a file apart "
                                  "from the inputs")
    published = None if own else _published_folder(resolved)
    if published is not None:
        raise OutputPathError(f"{what} {path}: lies inside {published}, a folder this project wrote (it holds "
                              f"{MARKER}); write the file elsewhere")
    if path.is_symlink():
        raise OutputPathError(f"{what} {path}: is a symbolic link; name a file path, not a link")
    if path.is_dir():
        raise OutputPathError(f"{what} {path}: is a folder; expected a file path")
    if path.exists():
        if not path.is_file():
            raise OutputPathError(f"{what} {path}: is not a regular file; expected a file path")
        if not overwrite:
            raise OutputPathError(f"{what} {path}: already exists; choose another path or pass --overwrite")
        if not own and not written_by_us(path):
            raise OutputPathError(f"{what} {path}: exists and was not written by this project (no \"written_by\": "
                                  f"\"{WRITTEN_BY}\"); it is never replaced: choose another path")
    _writable_parent(path, what)
    return path


def check_replaced_dir(out: str | os.PathLike, command: str, what: str = "--out") -> None:
    """``--overwrite`` replaces only an earlier result of the same command: never a run (its checkpoints), a
    shard folder or a tokenizer under another command's output."""
    try:
        marker = json.loads((Path(out) / MARKER).read_text(encoding="utf-8"))
    except (OSError, UnicodeDecodeError, ValueError):
        return  # no marker: check_output_dir refuses a folder that is not ours
    made_by = marker.get("command") if isinstance(marker, dict) else None
    if made_by and made_by != command:
        raise OutputPathError(f"{what} {out}: holds the output of `{made_by}`; --overwrite replaces only an "
                              f"earlier result of `{command}`: choose another folder")


def check_work_dir(path: str, *, inputs: Iterable[str | os.PathLike] = (), what: str = "--work-dir") -> None:
    """A local work folder is never a file, the current folder or one above it, an input, a folder that holds
    an input, nor one inside an input folder (a URL is the remote store's to judge)."""
    if _is_url(path):
        return
    folder = Path(path).resolve()
    if _within(Path.cwd().resolve(), folder):
        raise OutputPathError(f"{what} {path}: is the current folder or holds it; name a new folder")
    if Path(path).exists() and not Path(path).is_dir():
        raise OutputPathError(f"{what} {path}: exists and is not a folder")
    _check_inputs(folder, inputs, what)  # the output folder's rule: never is, holds or lies inside an input


def check_args(parser: argparse.ArgumentParser, args: argparse.Namespace) -> None:
    """Every output file and work folder of a parsed command line under its role's policy, against every input
    of the same line, and every output folder that ``--overwrite`` would replace, before ``run`` does any work."""
    command, actions = _chosen(parser, args)
    actions = [a for a in actions if takes_value(a)]
    inputs, own = [], set()
    for action in actions:
        if role_of(action) is Role.INPUT:
            for value in _values(action, args):
                local = spec_path(value, labelled=action.type.labelled)
                if local:
                    inputs.append(local)
                    if is_ours(local):  # a run of ours may take its own eval.json; a folder of the user's, nothing
                        own |= {(Path(local) / name).resolve() for name in action.type.own}
    overwrite = bool(getattr(args, "overwrite", False))
    for action in actions:
        what = (action.option_strings or [action.dest])[0]
        for value in _values(action, args):
            if role_of(action) is Role.OUTPUT_FILE:
                check_output_file(value, overwrite=overwrite, inputs=inputs, what=what,
                                  own=Path(value).resolve() in own)
            elif role_of(action) is Role.WORK_DIR:
                check_work_dir(value, inputs=inputs, what=what)
            elif role_of(action) is Role.OUTPUT_DIR and overwrite:
                check_replaced_dir(value, command, what)
