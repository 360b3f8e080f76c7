"""The command-line contract every command of the project follows, in one place (docs/contract.md):

* the help format: defaults shown, descriptions kept as written, docstring reST turned into plain text;
* a parser whose errors are one line (``PROG: error: ...``) and exit 2;
* argparse types for numbers (:func:`positive_int`, :func:`fraction`, ...) and language labels
  (:func:`label`), so nonsense fails at parse time naming the option; :func:`parse_lang_numbers` is the one
  ``LANG=NUMBER,...`` parser;
* :func:`run_command`, the one top-level handler: bad input (:class:`common.errors.InputError`, or a file the
  system refuses) is one line and exit 2, never a traceback; the machine's own failures (a full disk or quota,
  too many open files, an I/O error) one line and exit 74; a reader that closes the pipe a quiet exit 141;
  SIGINT/SIGTERM/SIGHUP one line and 130/143/129.

Every CLI module has the same shape: ``build_parser()`` and ``main(argv) = run_command(PROG, build_parser,
run, argv)``, where ``run(args) -> int`` does the work.
"""

from __future__ import annotations

import argparse
import errno
import functools
import math
import os
import re
import resource
import select
import stat
import sys
import unicodedata
from collections.abc import Callable, Iterator, Sequence
from contextlib import contextmanager, nullcontext

from common import paths
from common.errors import InputError, machine_failure
from common.signals import Interrupted, raise_on_signals

_RST_ROLE = re.compile(r":(?:func|class|meth|mod|data|attr|obj):`~?([^`]+)`")
_LITERAL = re.compile(r"``([^`]+)``")
_REF = re.compile(r"`([^`]+)`")

DISTRIBUTION = "bangla-tokfair"
EXIT_INPUT = 2
EXIT_MACHINE = 74  # EX_IOERR (sysexits.h): the machine failed (disk full, quota, open files, I/O), not the input
EXIT_PIPE = 141  # 128 + SIGPIPE: the reader of the output went away (`| head -1`), what a shell shows for `yes`


def plain(text: str) -> str:
    """Docstring text without reST markup: ``:func:`a.b``` -> a.b, ````x```` -> x, ```a.b``` -> a.b."""
    return _REF.sub(r"\1", _LITERAL.sub(r"\1", _RST_ROLE.sub(r"\1", text)))


class HelpFormatter(argparse.RawDescriptionHelpFormatter, argparse.ArgumentDefaultsHelpFormatter):
    """Descriptions as written (paragraphs and examples kept), every option's default shown."""

    def _get_help_string(self, action: argparse.Action) -> str:
        # No "(default: None)" / "(default: False)" noise for options without a meaningful default, and no
        # second default where the help already names one.
        text = action.help or ""
        if action.default in (None, False, [], "", argparse.SUPPRESS) or "default" in text.lower():
            return text
        return super()._get_help_string(action)

    def _get_default_metavar_for_optional(self, action: argparse.Action) -> str:
        # One convention in every command: N for a count, X for a number, else the option's name.
        kind = getattr(action.type, "kind", action.type)
        return {int: "N", float: "X"}.get(kind, action.dest.upper())


class ArgumentParser(argparse.ArgumentParser):
    """argparse with the contract's error form: one line on stderr, exit 2 (no usage block above it)."""

    def error(self, message: str) -> None:  # type: ignore[override]
        self.exit(EXIT_INPUT, f"{self.prog}: error: {message} (see {self.prog} --help)\n")


def version() -> str:
    """The installed package's version (what a bug report names)."""
    from importlib.metadata import PackageNotFoundError
    from importlib.metadata import version as installed

    try:
        return installed(DISTRIBUTION)
    except PackageNotFoundError:  # run from a source tree that was never installed
        return "unknown (not installed)"


def parser(prog: str, doc: str | None = None, **kwargs) -> ArgumentParser:
    """A command's top-level :class:`ArgumentParser`: the project's help format, ``--version``, and ``doc`` (a
    docstring) as its plain description. Its subparsers are of the same class (argparse's default)."""
    kwargs.setdefault("formatter_class", HelpFormatter)
    p = ArgumentParser(prog=prog, description=plain(doc) if doc else None, **kwargs)
    p.add_argument("--version", action="version", version=f"%(prog)s {version()} ({DISTRIBUTION})")
    return p


# --- numbers ---------------------------------------------------------------------------------------------------

def _to_int(text: str) -> int:
    # "2e9" and "1_000_000" are how people write token budgets; they are integers if they are whole.
    try:
        return int(text)
    except ValueError:
        value = float(text)
        if not math.isfinite(value) or value != int(value):
            raise ValueError(text) from None
        return int(value)


def _to_float(text: str) -> float:
    value = float(text)
    if not math.isfinite(value):
        raise ValueError(text)
    return value


def _number_type(convert: Callable[[str], float], kind: type, test: Callable[[float], bool], expected: str):
    def parse(text: str):
        try:
            value = convert(text)
        except ValueError:
            raise argparse.ArgumentTypeError(f"expected {expected}, got {text!r}") from None
        if not test(value):
            raise argparse.ArgumentTypeError(f"expected {expected}, got {text}")
        return value

    parse.kind = kind  # the help's metavar convention (N / X) reads it
    parse.role = paths.Role.NOT_PATH
    parse.__name__ = expected
    return parse


positive_int = _number_type(_to_int, int, lambda v: v > 0, "a positive integer")
non_negative_int = _number_type(_to_int, int, lambda v: v >= 0, "an integer >= 0")
positive_float = _number_type(_to_float, float, lambda v: v > 0, "a positive number")
non_negative_float = _number_type(_to_float, float, lambda v: v >= 0, "a number >= 0")
fraction = _number_type(_to_float, float, lambda v: 0 < v < 1, "a fraction between 0 and 1 (exclusive)")
share = _number_type(_to_float, float, lambda v: 0 <= v <= 1, "a share between 0 and 1")
# A TCP port; 0 asks the system for a free one (the server prints the one it got).
port = _number_type(_to_int, int, lambda v: 0 <= v <= 65535, "a port number from 0 to 65535")


def at_least(minimum: float, kind: type = float):
    """An argparse type for a number ``>= minimum`` (e.g. a tolerance ratio >= 1)."""
    convert = _to_int if kind is int else _to_float
    return _number_type(convert, kind, lambda v: v >= minimum, f"a number >= {minimum:g}")


# --- language labels -------------------------------------------------------------------------------------------

# Letters of any script (with their combining marks), digits, "_" and "-", starting with a letter: ISO codes
# (bn), FLORES codes (ben_Beng), BCP-47 (bn-IN), a language's own name (বাংলা). A label names a language in
# reports and file names, so it never holds a path separator, a dot (so never ".."), a space or a control.
LABEL_MAX = 64
LABEL_EXPECTED = ("letters (any script, with their marks), digits, '_' or '-', starting with a letter "
                  "(e.g. bn, ben_Beng, বাংলা)")


def _label_ok(text: str) -> bool:
    if not 0 < len(text) <= LABEL_MAX or not unicodedata.category(text[0]).startswith("L"):
        return False
    return all(c in "_-" or unicodedata.category(c)[0] in "LMN" for c in text)


def check_label(text: str, what: str = "language label") -> str:
    """``text`` if it is a valid label, else an :class:`InputError` naming ``what``."""
    if not _label_ok(text):
        raise InputError(f"{what} {text!r}: expected {LABEL_EXPECTED}")
    return text


def label(text: str) -> str:
    """argparse type for an option whose value is a language label."""
    try:
        return check_label(text.strip(), "label")
    except InputError as e:
        raise argparse.ArgumentTypeError(str(e)) from None


label.role = paths.Role.NOT_PATH


def parse_lang_numbers(spec: str, *, option: str, number: str = "NUMBER", minimum: float = 0.0,
                       strict: bool = False) -> dict[str, float]:
    """The one ``LANG=NUMBER[,LANG=NUMBER...]`` parser: ``"bn=0.7, en=0.3"`` -> ``{"bn": 0.7, "en": 0.3}``.

    Every value must be a finite number ``>= minimum`` (``> minimum`` when ``strict``); a label appears once.
    Errors are :class:`InputError` naming ``option`` and the offending item.
    """
    expected = f"{option}: expected LANG={number}[,LANG={number}...]"
    bound = f"> {minimum:g}" if strict else f">= {minimum:g}"
    out: dict[str, float] = {}
    for item in filter(None, (s.strip() for s in spec.split(","))):
        lang, sep, value = (s.strip() for s in item.partition("="))
        if not sep or not lang:
            raise InputError(f"{expected}, got {item!r}")
        check_label(lang, f"{option}: label")
        try:
            number_value = _to_float(value)
        except ValueError:
            raise InputError(f"{option}: {value!r} for {lang!r} is not a number") from None
        if number_value < minimum or (strict and number_value == minimum):
            raise InputError(f"{option}: {lang}={value}: expected a number {bound}")
        if lang in out:
            raise InputError(f"{option}: language {lang!r} given twice")
        out[lang] = number_value
    if not out:
        raise InputError(f"{expected}, got {spec!r}")
    return out


# --- the top-level handler -------------------------------------------------------------------------------------

# Errors from the system about a path the user named: bad input (a missing file, a read-only folder), not bugs.
_PATH_ERRORS = (FileNotFoundError, PermissionError, IsADirectoryError, NotADirectoryError, FileExistsError)
# The same for errors that have no subclass of their own; ELOOP gets its plain name (strerror says "Too many
# levels of symbolic links").
_PATH_ERRNOS = {errno.ENAMETOOLONG: None, errno.ELOOP: "symlink loop", errno.EROFS: None, errno.ENXIO: None}
# Where the machine's own failure (exit 74, :func:`machine_message`) was a write that found no room.
_WRITE_ERRNOS = (errno.ENOSPC, errno.EDQUOT)


def one_line(message: object) -> str:
    """A message on one line: any line breaks become "; "."""
    return "; ".join(line.strip() for line in str(message).splitlines() if line.strip())


def _open_file_limit() -> str:
    try:
        return f" (the limit is {resource.getrlimit(resource.RLIMIT_NOFILE)[0]})"
    except (OSError, ValueError):
        return ""


_WRITES = (paths.Role.OUTPUT_DIR, paths.Role.OUTPUT_FILE, paths.Role.WORK_DIR)


def write_targets(parser: argparse.ArgumentParser | None, args: argparse.Namespace | None) -> list[str]:
    """What the parsed command may have been writing when a write failed without naming its file: its output
    options by their roles (``--out /data/shards``), and standard output where that is a file or a device (a
    terminal or a pipe never runs out of space)."""
    found = []
    if parser is not None and args is not None:
        found = [f"{option} {value}" for option, value in paths.chosen_paths(parser, args, _WRITES)]
    try:
        out = os.fstat(sys.stdout.fileno())
        if ((stat.S_ISREG(out.st_mode) or stat.S_ISCHR(out.st_mode)) and not sys.stdout.isatty()
                and not os.path.samestat(out, os.stat(os.devnull))):  # /dev/null never fills
            found.append("standard output")
    except (AttributeError, OSError, ValueError):  # no stdout, or not a file (replaced by a test's capture)
        pass
    return found


def machine_message(e: OSError, targets: Sequence[str] = ()) -> str:
    """One line on what ran out or failed, and where: the file, or else ``targets`` for a write (what the
    command writes, :func:`write_targets`): ``no space left on device writing /data/x.bin: ...``."""
    if e.errno in _WRITE_ERRNOS:
        where = e.filename if e.filename is not None else " or ".join(targets)
        what = "no space left on device" if e.errno == errno.ENOSPC else "disk quota exceeded"
        return (f"{what}{f' writing {where}' if where else ''}: free some space (finished work is kept) and rerun "
                "the same command")
    where = e.filename
    if e.errno == errno.EMFILE:
        return (f"too many open files{_open_file_limit()}{f' opening {where}' if where else ''}: raise the limit "
                "with `ulimit -n 65536` in this shell and rerun the same command")
    if e.errno == errno.ENFILE:
        return (f"too many open files in the system{f' opening {where}' if where else ''}: the system's table of "
                "open files is full; close other programs (or raise fs.file-max) and rerun the same command")
    return (f"input/output error{f' on {where}' if where else ''}: the disk or file system failed; check it "
            "(dmesg) and rerun the same command")


def _flush_stdout() -> None:
    # Buffered output is written here, under the handler, and not at the interpreter's exit, where a closed
    # pipe or a full disk would be an "Exception ignored" traceback and exit 120.
    if sys.stdout is not None:
        sys.stdout.flush()


def _reader_gone() -> bool:
    """Whether the reader of stdout went away: its pipe's (or socket's) other end is closed."""
    try:
        poll = select.poll()
        poll.register(sys.stdout.fileno(), select.POLLOUT)
        return any(events & (select.POLLERR | select.POLLHUP) for _, events in poll.poll(0))
    except (AttributeError, OSError, ValueError):  # no stdout, or not a file (replaced by a test's capture)
        return False


def _parse(parser: argparse.ArgumentParser, argv: Sequence[str] | None) -> argparse.Namespace:
    try:
        return parser.parse_args(argv)
    except SystemExit:  # --help, or a parse error: the help's text is flushed under the handler too
        _flush_stdout()
        raise


def bars_wanted(args: argparse.Namespace) -> bool:
    """Whether a command draws progress bars: on a terminal, unless ``--no-progress``. A bar redraws its line with
    carriage returns, and a log file (a Slurm job's, a redirect) keeps every redraw."""
    return sys.stderr.isatty() and not getattr(args, "no_progress", False)


@contextmanager
def bars_off() -> Iterator[None]:
    """Every tqdm bar made inside is disabled. The libraries a command runs draw theirs with no option to stop them
    (lm-evaluation-harness passes ``disable=False`` itself), so the switch is tqdm's own constructor, put back on
    the way out."""
    from tqdm import std

    saved = std.tqdm.__dict__["__init__"]  # as defined (tqdm wraps it in a descriptor), to put back as it was
    init = std.tqdm.__init__

    @functools.wraps(init)
    def disabled(self, *args, **kwargs):
        init(self, *args, **{**kwargs, "disable": True})

    std.tqdm.__init__ = disabled
    try:
        yield
    finally:
        std.tqdm.__init__ = saved


def run_command(prog: str, build_parser: Callable[[], argparse.ArgumentParser],
                run: Callable[[argparse.Namespace], int], argv: Sequence[str] | None = None) -> int:
    """Parse ``argv`` and run: the contract's exit codes and one-line messages for every command.

    Progress bars are drawn only when :func:`bars_wanted` (on a terminal, without ``--no-progress``); a command's
plain progress lines are its own. 0/``run``'s own code; 2 bad input (one line naming the file, option or field); 74 the machine failed
    (a full disk or quota, too many open files, an I/O error: one line naming what and where, found
    through the chain of a library's wrapping exceptions too); 141 and nothing said when the reader of
    stdout went away (``| head -1``); 130/143/129 SIGINT/SIGTERM/SIGHUP (one line; finished work is kept by
    the command's atomic writes). Any other exception is a bug and keeps its traceback.
    """
    raise_on_signals()
    parser = args = None
    try:
        parser = build_parser()
        args = _parse(parser, argv)
        paths.check_args(parser, args)  # every output file and work folder against the inputs, before any work
        with nullcontext() if bars_wanted(args) else bars_off():
            code = run(args)
        _flush_stdout()
        return code
    except InputError as e:
        print(f"{prog}: error: {one_line(e)}", file=sys.stderr)
        # Its own words (a result that could not be put in place says where it is kept), the machine's code
        # where the machine failed beneath it.
        return EXIT_MACHINE if machine_failure(e) is not None else EXIT_INPUT
    except BrokenPipeError:
        if not _reader_gone():
            raise  # another pipe (a child process's): not the reader of our output going away
        # As Unix tools end: quietly. Python's recipe: what is still buffered goes to /dev/null, not to the
        # closed pipe (which would fail again at exit).
        devnull = os.open(os.devnull, os.O_WRONLY)
        os.dup2(devnull, sys.stdout.fileno())
        os.close(devnull)
        return EXIT_PIPE
    except (Interrupted, KeyboardInterrupt) as e:
        stop = Interrupted.of(e)
        print(stop.line(prog), file=sys.stderr)
        return stop.exit_code
    except Exception as e:
        if (failure := machine_failure(e)) is not None:
            print(f"{prog}: error: {one_line(machine_message(failure, write_targets(parser, args)))}",
                  file=sys.stderr)
            return EXIT_MACHINE
        if not isinstance(e, OSError) or not (isinstance(e, _PATH_ERRORS) or e.errno in _PATH_ERRNOS):
            raise
        where = f"{e.filename}: " if e.filename else ""
        print(f"{prog}: error: {where}{_PATH_ERRNOS.get(e.errno) or e.strerror or one_line(e)}", file=sys.stderr)
        return EXIT_INPUT
