"""Fault injection for the resume and signal tests: make a chosen stage die as ``kill -9`` would, or wait there
for a signal, at a chosen task.

* ``CORPUS_FAULT=STAGE:INDEX`` kills the whole process group (the build and every worker it started) when
  ``kill_or_pause_if_asked(STAGE, INDEX)`` is reached.
* ``CORPUS_PAUSE=STAGE:INDEX:FILE`` writes this process's pid to FILE there and then waits for a signal: a
  test synchronises on FILE, then signals the build or kills it (or the task's node), knowing where it stands.
  Once: where FILE exists, the task goes on, so a task retried after its node died, or rerun, completes.

Off (two dictionary lookups) unless a variable is set.
"""

from __future__ import annotations

import os
import signal

FAULT_ENV = "CORPUS_FAULT"
PAUSE_ENV = "CORPUS_PAUSE"


def kill_or_pause_if_asked(stage: str, index: int) -> None:
    """Die here, by SIGKILL to the process group, when ``CORPUS_FAULT`` names this stage and index; wait here
    for a signal when ``CORPUS_PAUSE`` does."""
    here = f"{stage}:{index}"
    if os.environ.get(FAULT_ENV) == here:
        os.killpg(os.getpgrp(), signal.SIGKILL)
    pause = os.environ.get(PAUSE_ENV, "")
    if pause.startswith(here + ":"):
        path = pause[len(here) + 1:]
        if os.path.exists(path):  # paused here once already
            return
        with open(path + ".tmp", "w", encoding="utf-8") as f:
            f.write(f"{os.getpid()}\n")
        os.replace(path + ".tmp", path)  # the test reads a whole pid or nothing
        while True:
            signal.pause()  # a handled signal returns here only if its handler does not raise
