"""A test hook, never imported by the project: put this folder on PYTHONPATH with ``SIGNAL_ON_IMPORT=SIGNAME:MODULE``
and the process sends itself SIGNAME the moment MODULE is first imported (a deterministic point inside a
command's heavy imports: tests/common/test_signals_at_start.py). Python imports ``sitecustomize`` at start-up."""

import os
import signal
import sys

_SPEC = os.environ.get("SIGNAL_ON_IMPORT")


class _SignalOnImport:
    def __init__(self, signum: int, module: str) -> None:
        self.signum, self.module = signum, module

    def find_spec(self, fullname, path=None, target=None):
        if fullname == self.module:
            sys.meta_path.remove(self)
            signal.raise_signal(self.signum)  # delivered before raise_signal returns
        return None  # the ordinary finders import the module (or the signal's handler has raised)


if _SPEC:
    _name, _, _module = _SPEC.partition(":")
    sys.meta_path.insert(0, _SignalOnImport(signal.Signals[_name], _module))
