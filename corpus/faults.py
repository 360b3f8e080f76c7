"""Fault injection for the resume tests: make a chosen stage die as ``kill -9`` would, at a chosen task.

``CORPUS_FAULT=STAGE:INDEX`` in the environment kills the whole process group (the build and every worker it
started) when ``checkpoint(STAGE, INDEX)`` is reached. Off (one dictionary lookup) unless the variable is set.
"""

from __future__ import annotations

import os
import signal

FAULT_ENV = "CORPUS_FAULT"


def checkpoint(stage: str, index: int) -> None:
    """Die here, by SIGKILL to the process group, when ``CORPUS_FAULT`` names this stage and index."""
    if os.environ.get(FAULT_ENV) == f"{stage}:{index}":
        os.killpg(os.getpgrp(), signal.SIGKILL)
