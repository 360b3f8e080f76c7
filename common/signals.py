"""How every command ends on SIGINT or SIGTERM: one line and exit 128 + the signal's number (130, 143), with
finished work kept; a loop that can stop cleanly (the trainer) defers the signal to its next safe point.

* :func:`raise_on_signals` (installed by ``common.cli.run_command``): both signals raise :class:`Interrupted`,
  which is a ``BaseException`` so that no library's ``except Exception`` swallows it.
* :func:`deferred_signals`: inside the block a signal only sets a flag the loop polls; a second one raises.
* :func:`die_with_parent`: a worker process asks the kernel to kill it when its parent dies (even by
  ``kill -9``), so no orphan keeps running.
"""

from __future__ import annotations

import ctypes
import os
import signal
import sys
import threading
from collections.abc import Iterator
from contextlib import contextmanager
from dataclasses import dataclass

SIGNALS = (signal.SIGINT, signal.SIGTERM)


class Interrupted(BaseException):
    """The command was stopped by a signal; ``exit_code`` is 128 + its number."""

    def __init__(self, signum: int) -> None:
        self.signum = signum
        super().__init__(signal.Signals(signum).name)

    @property
    def exit_code(self) -> int:
        return 128 + self.signum

    @property
    def name(self) -> str:
        return signal.Signals(self.signum).name


def _raise(signum: int, _frame) -> None:
    raise Interrupted(signum)


def raise_on_signals() -> None:
    """SIGINT and SIGTERM raise :class:`Interrupted` in the main thread (a no-op elsewhere)."""
    if threading.current_thread() is threading.main_thread():
        for sig in SIGNALS:
            signal.signal(sig, _raise)


@dataclass
class StopRequest:
    """Set by a deferred signal; the loop checks ``signum`` at its next safe point."""
    signum: int | None = None

    def __bool__(self) -> bool:
        return self.signum is not None


@contextmanager
def deferred_signals() -> Iterator[StopRequest]:
    """Within the block, the first SIGINT/SIGTERM only records itself in the yielded :class:`StopRequest`;
    a second one raises :class:`Interrupted` at once (a user pressing Ctrl-C twice means now). Outside the
    main thread the block defers nothing."""
    request = StopRequest()
    if threading.current_thread() is not threading.main_thread():
        yield request
        return

    def record(signum: int, _frame) -> None:
        if request:
            raise Interrupted(signum)
        request.signum = signum
        print(f"{signal.Signals(signum).name}: stopping at the next safe point (again to stop now)",
              file=sys.stderr, flush=True)

    previous = {sig: signal.signal(sig, record) for sig in SIGNALS}
    try:
        yield request
    finally:
        for sig, handler in previous.items():
            signal.signal(sig, handler)


_PR_SET_PDEATHSIG = 1


def die_with_parent(parent_pid: int | None = None, sig: int = signal.SIGKILL) -> None:
    """Ask Linux to send ``sig`` to this process when its parent dies; elsewhere a no-op. Call it first thing
    in a worker process (a pool initializer, a forked child) with the parent's pid taken before the fork: a
    parent that died before the call is then noticed too."""
    if not sys.platform.startswith("linux"):
        return
    libc = ctypes.CDLL(None, use_errno=True)
    libc.prctl(_PR_SET_PDEATHSIG, int(sig), 0, 0, 0)
    if parent_pid is not None and os.getppid() != parent_pid:
        os._exit(128 + int(sig))
