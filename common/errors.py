"""The base class of every error caused by the user's input rather than by a bug."""

from __future__ import annotations


class InputError(ValueError):
    """Bad input a user can fix (a file, a tokenizer, an argument); the message says which and what was expected.

    Every command prints these as one line and exits 2 (``common.cli.run_command``); any other exception is a
    bug and keeps its traceback.
    """


class OutputPathError(InputError):
    """An output destination the contract refuses (``common.outdir.check_output_dir`` says why)."""
