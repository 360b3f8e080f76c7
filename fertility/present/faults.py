"""Fault injection for the server's tests: make the measuring of a request wait, so that a test can stop the
server while a request runs, knowing where it stands.

* ``FERTILITY_BLOCK_MEASURE=FILE``: :func:`block_if_asked` (called as a request's measuring starts) writes its
  pid to FILE, then waits until the process ends. FILE is a FIFO the test reads (a blocking read: the test
  waits on the event itself, never on time), or a plain path, written whole (atomically).

Off (one dictionary lookup) unless the variable is set.
"""

from __future__ import annotations

import os
import stat
import threading

BLOCK_ENV = "FERTILITY_BLOCK_MEASURE"


def block_if_asked() -> None:
    """Write ``FERTILITY_BLOCK_MEASURE``'s file and wait for good, when the variable is set."""
    path = os.environ.get(BLOCK_ENV)
    if path:
        fifo = os.path.exists(path) and stat.S_ISFIFO(os.stat(path).st_mode)
        with open(path if fifo else path + ".tmp", "w", encoding="utf-8") as f:
            f.write(f"{os.getpid()}\n")
        if not fifo:
            os.replace(path + ".tmp", path)  # the test sees the whole file or none
        threading.Event().wait()
