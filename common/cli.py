"""The command-line contract every command of the project follows, in one place (docs/contract.md):

* the help format: defaults shown, descriptions kept as written, docstring reST turned into plain text;
* a parser whose errors are one line (``PROG: error: ...``) and exit 2;
* argparse types for numbers (:func:`positive_int`, :func:`fraction`, ...) and language labels
  (:func:`label`), so nonsense fails at parse time naming the option; :func:`parse_lang_numbers` is the one
  ``LANG=NUMBER,...`` parser;
* :func:`run_command`, the one top-level handler: bad input (:class:`common.errors.InputError`, or a file the
  system refuses) is one line and exit 2, never a traceback; SIGINT/SIGTERM are one line and 130/143.

Every CLI module has the same shape: ``build_parser()`` and ``main(argv) = run_command(PROG, build_parser,
run, argv)``, where ``run(args) -> int`` does the work.
"""

from __future__ import annotations

import argparse
import errno
import math
import re
import sys
import unicodedata
from collections.abc import Callable, Sequence

from common import paths
from common.errors import InputError
from common.signals import Interrupted, raise_on_signals

_RST_ROLE = re.compile(r":(?:func|class|meth|mod|data|attr|obj):`~?([^`]+)`")
_LITERAL = re.compile(r"``([^`]+)``")
_REF = re.compile(r"`([^`]+)`")

EXIT_INPUT = 2


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


def parser(prog: str, doc: str | None = None, **kwargs) -> ArgumentParser:
    """An :class:`ArgumentParser` with the project's help format; ``doc`` (a docstring) becomes its plain
    description. Its subparsers are of the same class (argparse's default)."""
    kwargs.setdefault("formatter_class", HelpFormatter)
    return ArgumentParser(prog=prog, description=plain(doc) if doc else None, **kwargs)


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


def one_line(message: object) -> str:
    """A message on one line: any line breaks become "; "."""
    return "; ".join(line.strip() for line in str(message).splitlines() if line.strip())


def run_command(prog: str, build_parser: Callable[[], argparse.ArgumentParser],
                run: Callable[[argparse.Namespace], int], argv: Sequence[str] | None = None) -> int:
    """Parse ``argv`` and run: the contract's exit codes and one-line messages for every command.

    0/``run``'s own code; 2 bad input (one line naming the file, option or field); 130/143 SIGINT/SIGTERM
    (one line; finished work is kept by the command's atomic writes). Any other exception is a bug and keeps
    its traceback.
    """
    raise_on_signals()
    try:
        parser = build_parser()
        args = parser.parse_args(argv)
        paths.check_args(parser, args)  # every output file and work folder against the inputs, before any work
        return run(args)
    except InputError as e:
        print(f"{prog}: error: {one_line(e)}", file=sys.stderr)
        return EXIT_INPUT
    except OSError as e:
        if not isinstance(e, _PATH_ERRORS) and e.errno not in _PATH_ERRNOS:
            raise
        where = f"{e.filename}: " if e.filename else ""
        print(f"{prog}: error: {where}{_PATH_ERRNOS.get(e.errno) or e.strerror or one_line(e)}", file=sys.stderr)
        return EXIT_INPUT
    except (Interrupted, KeyboardInterrupt) as e:
        stop = e if isinstance(e, Interrupted) else Interrupted(2)
        print(f"{prog}: stopped by {stop.name}; finished work is kept (rerun the same command to go on)",
              file=sys.stderr)
        return stop.exit_code
