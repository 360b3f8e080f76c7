"""Fault injection for the server's tests: make the measuring of a request wait, so that a test can stop the
server while a request runs, knowing where it stands.

* ``FERTILITY_BLOCK_MEASURE=FILE``: :func:`block_if_asked` (called as a request's measuring starts) writes FILE,
  then waits until the process ends. A test synchronises on FILE, then signals ``fertility serve``.

Off (one dictionary lookup) unless the variable is set.
"""

from __future__ import annotations

import os
import threading

BLOCK_ENV = "FERTILITY_BLOCK_MEASURE"


def block_if_asked() -> None:
    """Write ``FERTILITY_BLOCK_MEASURE``'s file and wait for good, when the variable is set."""
    path = os.environ.get(BLOCK_ENV)
    if path:
        with open(path + ".tmp", "w", encoding="utf-8") as f:
            f.write(f"{os.getpid()}\n")
        os.replace(path + ".tmp", path)  # the test sees the whole file or none
        threading.Event().wait()
