"""How every command ends on SIGINT, SIGTERM or SIGHUP: one line and exit 128 + the signal's number (130, 143,
129), with finished work kept; a loop that can stop cleanly (the trainer) defers the signal to its next safe
point. SIGHUP (a closed terminal, a lost ssh session) is handled exactly like SIGTERM.

* :func:`launch`: the entry of every command (its console script and ``python -m PACKAGE``): the handlers
  first, then the command's module with its heavy imports (torch, datatrove, tokenizers), so that a signal in
  the first instant is the same one line as one during the work.
* :func:`raise_on_signals` (installed by :func:`launch` and ``common.cli.run_command``): the signals raise
  :class:`Interrupted`, which is a ``BaseException`` so that no library's ``except Exception`` swallows it.
* :func:`deferred_signals`: inside the block a signal only sets a flag the loop polls; a second one raises.
* :func:`held_signals`: a block no signal interrupts; one that arrives is handled once it is over.
* :func:`die_with_parent`: a worker process asks the kernel to kill it when its parent dies (even by
  ``kill -9``), so no orphan keeps running.
"""

from __future__ import annotations

import ctypes
import importlib
import os
import signal
import sys
import threading
from collections.abc import Iterator
from contextlib import contextmanager
from dataclasses import dataclass

SIGNALS = (signal.SIGINT, signal.SIGTERM, signal.SIGHUP)


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

    @classmethod
    def of(cls, e: BaseException) -> Interrupted:
        """``e`` itself, or for a ``KeyboardInterrupt`` (Python's own SIGINT handler) the SIGINT it stands for."""
        return e if isinstance(e, Interrupted) else cls(signal.SIGINT)

    def line(self, prog: str) -> str:
        """The one line a command ends with when this signal stops it."""
        return f"{prog}: stopped by {self.name}; finished work is kept (rerun the same command to go on)"


def _raise(signum: int, _frame) -> None:
    raise Interrupted(signum)


def raise_on_signals() -> None:
    """SIGINT, SIGTERM and SIGHUP raise :class:`Interrupted` in the main thread (a no-op elsewhere)."""
    if threading.current_thread() is threading.main_thread():
        for sig in SIGNALS:
            signal.signal(sig, _raise)


def launch(prog: str, module: str, argv: list[str] | None = None) -> int:
    """Run command ``prog``, whose ``main(argv)`` is in ``module``, with the handlers installed before that module
    and its heavy imports load: a signal meanwhile (0.2-2 s of imports) ends it with the one stop line and
    128 + the signal's number, as during the work (``common.cli.run_command`` handles the rest). The console
    scripts and every package's ``__main__`` start here; this module imports nothing heavy."""
    raise_on_signals()
    try:
        return importlib.import_module(module).main(argv)
    except (Interrupted, KeyboardInterrupt) as e:  # during the imports, or before run_command's own handler
        stop = Interrupted.of(e)
        print(stop.line(prog), file=sys.stderr)
        return stop.exit_code


@dataclass
class StopRequest:
    """Set by a deferred signal; the loop checks ``signum`` at its next safe point."""
    signum: int | None = None

    def __bool__(self) -> bool:
        return self.signum is not None


@contextmanager
def deferred_signals() -> Iterator[StopRequest]:
    """Within the block, the first SIGINT/SIGTERM/SIGHUP only records itself in the yielded :class:`StopRequest`;
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


@contextmanager
def held_signals() -> Iterator[None]:
    """A block no signal of :data:`SIGNALS` interrupts (an output's swap, ``common.outdir.publish_dir``): one
    that arrives meanwhile is recorded and handed to the handler that was in place once the block is over.

    Held at Python's level, not with the thread's signal mask: the kernel hands a signal sent to the process to
    any thread that does not block it (a tokenizer's or a logger's thread), and Python then runs its handler in
    the main thread all the same, mid-block. Outside the main thread nothing is held, nor needs to be: Python
    runs handlers in the main thread only."""
    if threading.current_thread() is not threading.main_thread():
        yield
        return
    arrived: list[int] = []
    previous = {sig: signal.signal(sig, lambda signum, _frame: arrived.append(signum)) for sig in SIGNALS}
    try:
        yield
    finally:
        for sig, handler in previous.items():
            signal.signal(sig, handler)
        if arrived:
            handler = previous[arrived[0]]
            if callable(handler):
                handler(arrived[0], None)
            elif handler == signal.SIG_DFL:
                signal.raise_signal(arrived[0])  # its default action, as if it had come now


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
