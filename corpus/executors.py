"""Run a datatrove pipeline on the chosen executor: local (default, embedded, no server) or Ray.

``local`` is datatrove's ``LocalPipelineExecutor`` (tasks run in this process when one runs at a time, else in
a process pool). ``ray`` is datatrove's ``RayPipelineExecutor`` on the Ray cluster at ``ray_address`` or, without
one, on a local Ray instance that :func:`executor_session` starts with ``workers`` CPUs and stops afterwards
(an instance already started by the caller, ``ray.init()``, is used as it is). Each stage keeps its own
datatrove logging folder, whose completion markers let a rerun skip the tasks already done.
"""

from __future__ import annotations

import os
import sys
from collections.abc import Iterator
from contextlib import contextmanager
from dataclasses import dataclass

import datatrove.executor.base
import datatrove.executor.ray
from datatrove.executor import LocalPipelineExecutor, RayPipelineExecutor
from datatrove.utils.logging import logger

EXECUTORS = ("local", "ray")


class StageError(RuntimeError):
    """Tasks of a stage failed; their logs say why, and a rerun retries them."""


@dataclass
class ExecutorConfig:
    """How to run the stages; none of it changes the output."""

    kind: str = "local"
    workers: int = 1  # tasks running at once (local: processes; ray: CPUs of a local instance)
    tasks: int | None = None  # tasks of the ingest stage; None = workers
    ray_address: str | None = None
    progress: bool = True
    status_file: str | None = None

    @property
    def ingest_tasks(self) -> int:
        return self.tasks or self.workers


def _task_logger(logging_dir, rank: int, local_rank: int = 0, node_rank: int = -1):
    # datatrove prints every task's log at INFO on stderr, which would bury the progress line: keep the full
    # log in the stage's logging folder (as datatrove does) and only warnings on the terminal.
    logger.remove()
    logfile = logging_dir.open(f"logs/task_{rank:05d}.log", "w")
    logger.add(sys.stderr, level="WARNING", format="{time:HH:mm:ss} {level} task " + str(rank) + ": {message}")
    logger.add(logfile, level="DEBUG")
    return logfile


def quiet_logger() -> None:
    """This process's datatrove log: warnings only (the executors log every task's start and statistics)."""
    logger.remove()
    logger.add(sys.stderr, level="WARNING")


def _close_task_logger(logfile) -> None:
    logger.complete()
    quiet_logger()
    logfile.close()


for _module in (datatrove.executor.base, datatrove.executor.ray):
    _module.add_task_logger, _module.close_task_logger = _task_logger, _close_task_logger


@contextmanager
def executor_session(config: ExecutorConfig) -> Iterator[None]:
    """Connect to (or start, and then stop) the Ray instance the ``ray`` executor needs; nothing for local."""
    if config.kind not in EXECUTORS:
        raise ValueError(f"--executor {config.kind!r}: expected one of {', '.join(EXECUTORS)}")
    if config.kind != "ray":
        yield
        return
    try:
        import ray
    except ImportError:
        raise ValueError("--executor ray needs Ray: pip install 'bangla-tokfair[ray]'") from None
    if ray.is_initialized():
        yield
        return
    if config.ray_address:
        ray.init(address=config.ray_address, log_to_driver=False)
    else:
        # Ray gives a starting node 60 s to register, which a busy shared machine can exceed.
        os.environ.setdefault("RAY_raylet_start_wait_time_s", "600")
        ray.init(num_cpus=config.workers, include_dashboard=False, log_to_driver=False)
    try:
        yield
    finally:
        ray.shutdown()


class _Local(LocalPipelineExecutor):
    """datatrove's local executor; defined here so that a spawned task process imports this module (and with it
    the quieter task logger) when it unpickles its executor."""


class _Ray(RayPipelineExecutor):
    """datatrove's Ray executor, for the same reason as :class:`_Local`."""


def run_pipeline(config: ExecutorConfig, pipeline: list, tasks: int, logging_dir: str) -> None:
    """Run ``tasks`` tasks of ``pipeline``, skipping those already completed in ``logging_dir``."""
    workers = max(1, min(config.workers, tasks))
    if config.kind == "ray":
        # A task streams its documents, so half a GB is what it reserves; datatrove's default (2 GB per CPU)
        # can leave tasks pending forever on a small or busy machine.
        executor = _Ray(pipeline, tasks=tasks, workers=workers, logging_dir=logging_dir,
                        cpus_per_task=1, mem_per_cpu_gb=0.5)
    else:
        executor = _Local(pipeline, tasks=tasks, workers=workers, logging_dir=logging_dir,
                                         start_method="spawn")
    executor.run()
    incomplete = executor.get_incomplete_ranks(skip_completed=True)
    if incomplete:
        raise StageError(f"{len(incomplete)} of {tasks} tasks failed (see {logging_dir}/logs); rerun the same "
                           f"command to retry them")
