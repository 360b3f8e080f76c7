"""The base class of every error caused by the user's input rather than by a bug in fertility."""

from __future__ import annotations


class InputError(ValueError):
    """Bad input a user can fix (a file, a tokenizer, an argument); the message says which and what was expected.

    The CLI prints these as one line and exits 2; any other exception is a bug and keeps its traceback.
    """
