"""Test hook (fault injection for tests/tokenizers_train/test_contract.py): run ``tokenizers-train`` with one
training round held open until a signal comes, so that a test can signal a run that is certainly mid-training.

    python hold_round.py N ARGS...    # the N-th call of backends.train waits (signal.pause) instead of training
"""

from __future__ import annotations

import signal
import sys

from tokenizers_train import backends
from tokenizers_train.cli import main


def hold_call(n: int) -> None:
    real, calls = backends.train, []

    def train(*args, **kwargs):
        calls.append(args)
        if len(calls) == n:
            while True:
                signal.pause()  # the command's handler raises on SIGINT/SIGTERM and ends this
        return real(*args, **kwargs)

    backends.train = train


if __name__ == "__main__":
    hold_call(int(sys.argv[1]))
    raise SystemExit(main(sys.argv[2:]))
