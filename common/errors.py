"""The base class of every error caused by the user's input rather than by a bug, and how to tell the machine's own
failures (a full disk, too many open files) from both."""

from __future__ import annotations

import errno


class InputError(ValueError):
    """Bad input a user can fix (a file, a tokenizer, an argument); the message says which and what was expected.

    Every command prints these as one line and exits 2 (``common.cli.run_command``); any other exception is a
    bug and keeps its traceback.
    """


class OutputPathError(InputError):
    """An output destination the contract refuses (``common.outdir.check_output_dir`` says why)."""


# The machine's own failures: neither the input's fault nor a bug (every command: one line, exit 74).
MACHINE_ERRNOS = (errno.ENOSPC, errno.EDQUOT, errno.EMFILE, errno.ENFILE, errno.EIO)


def machine_failure(e: BaseException) -> OSError | None:
    """The failure of the machine itself behind ``e``: an OSError with one of :data:`MACHINE_ERRNOS`, ``e``
    itself or one it was raised from or during (``__cause__``, ``__context__``: a library wraps the system's
    error in its own), or one of an exception group's."""
    seen, todo = set(), [e]
    while todo:
        x = todo.pop()
        if x is None or id(x) in seen:
            continue
        seen.add(id(x))
        if isinstance(x, OSError) and x.errno in MACHINE_ERRNOS:
            return x
        todo += [x.__cause__, x.__context__, *getattr(x, "exceptions", ())]
    return None
