"""Run a datatrove pipeline on the chosen executor: local (default, embedded, no server), Ray or Slurm.

``local`` is datatrove's ``LocalPipelineExecutor`` (tasks run in this process when one runs at a time, else in
a process pool). ``ray`` is datatrove's ``RayPipelineExecutor`` on the Ray cluster at ``ray_address`` or, without
one, on a local Ray instance that :func:`executor_session` starts with ``workers`` CPUs and stops afterwards
(an instance already started by the caller, ``ray.init()``, is used as it is). ``slurm`` is datatrove's
``SlurmPipelineExecutor``: a stage is submitted as a job array (``sbatch``), and this process waits until its
tasks are complete or the array has left the queue (``squeue``), since the next stage reads their files. Each
stage keeps its own datatrove logging folder, whose completion markers let a rerun skip the tasks already done.
"""

from __future__ import annotations

import os
import signal
import subprocess
import sys
import threading
import time
from collections.abc import Iterator
from contextlib import contextmanager, suppress
from dataclasses import dataclass, field

import datatrove.executor.base
import datatrove.executor.local
import datatrove.executor.ray
import multiprocess
from datatrove.executor import LocalPipelineExecutor, RayPipelineExecutor, SlurmPipelineExecutor
from datatrove.utils.logging import logger
from multiprocess.managers import SyncManager

from common.errors import InputError, machine_failure
from common.signals import die_with_parent

EXECUTORS = ("local", "ray", "slurm")


class StageError(RuntimeError):
    """Tasks of a stage failed; their logs say why, and a rerun retries them."""


@dataclass
class SlurmConfig:
    """Where the stages' job arrays run (``--executor slurm``); one CPU per task, as everywhere."""

    partition: str | None = None  # required with --executor slurm
    time: str = "24:00:00"  # per task
    mem_per_cpu_gb: int = 2
    qos: str | None = None
    # run on the node before each task, e.g. "source /shared/venv/bin/activate"; None: activate the virtual
    # environment this command runs in (the nodes must see the same path), or nothing outside one
    env_command: str | None = None
    sbatch_args: dict[str, str] = field(default_factory=dict)  # more #SBATCH options, e.g. {"account": "x"}
    poll_s: float = 30.0  # how often this process looks at the stage's completion markers and the queue


@dataclass
class ExecutorConfig:
    """How to run the stages; none of it changes the output."""

    kind: str = "local"
    # tasks running at once (local: processes; ray: CPUs of a local instance); with slurm the queue decides, and
    # this is only the default number of ingest tasks
    workers: int = 1
    tasks: int | None = None  # tasks of the ingest stage; None = workers
    ray_address: str | None = None
    slurm: SlurmConfig = field(default_factory=SlurmConfig)
    progress: bool = True
    status_file: str | None = None

    @property
    def ingest_tasks(self) -> int:
        return self.tasks or self.workers


def _not_input_error(record) -> bool:
    # A task that stops on bad input (a line that is not UTF-8, a tokenizer that will not load) or on the
    # machine's failure (a full disk, too many open files) is logged by datatrove with its traceback and every
    # variable; the command prints the error as its one line, so the terminal gets none of that (the stage's log
    # file keeps it, where it can still be written).
    exception = record["exception"]
    return exception is None or not (isinstance(exception.value, InputError) or machine_failure(exception.value))


def _best_effort(logfile):
    """A loguru sink writing to ``logfile`` that drops what the machine cannot store (a full disk): the task's
    own error says so in one line, where loguru would print a second traceback about its sink."""
    def write(message: str) -> None:
        with suppress(OSError):
            logfile.write(message)
    return write


def _task_logger(logging_dir, rank: int, local_rank: int = 0, node_rank: int = -1):
    # datatrove prints every task's log at INFO on stderr, which would bury the progress line: keep the full
    # log in the stage's logging folder (as datatrove does) and only warnings on the terminal.
    logger.remove()
    logfile = logging_dir.open(f"logs/task_{rank:05d}.log", "w")
    logger.add(sys.stderr, level="WARNING", filter=_not_input_error,
               format="{time:HH:mm:ss} {level} task " + str(rank) + ": {message}")
    logger.add(_best_effort(logfile), level="DEBUG")
    return logfile


def quiet_logger() -> None:
    """This process's datatrove log: warnings only (the executors log every task's start and statistics)."""
    logger.remove()
    logger.add(sys.stderr, level="WARNING", filter=_not_input_error)


def _close_task_logger(logfile) -> None:
    logger.complete()
    quiet_logger()
    logfile.close()


for _module in (datatrove.executor.base, datatrove.executor.ray):
    _module.add_task_logger, _module.close_task_logger = _task_logger, _close_task_logger


class _Multiprocess:
    """``multiprocess`` as datatrove's local executor sees it, except that the processes it starts are the
    build's workers (:func:`worker_pool`): the manager it starts for its task queue (a forked server process,
    started even for one worker) dies with the build, where it outlived a ``kill -9`` of the build, orphaned;
    and the pool's workers start with Ctrl-C left to the build, where one that had not yet taken a task
    printed a traceback."""

    def __getattr__(self, name: str):
        return getattr(multiprocess, name)

    @staticmethod
    def Manager():  # noqa: N802 (multiprocess's name)
        manager = SyncManager(ctx=multiprocess.get_context())
        with terminal_signals_held():
            manager.start(die_with_parent, (os.getpid(),))
        return manager

    @staticmethod
    def get_context(method: str | None = None):
        return _WorkerContext(multiprocess.get_context(method))


class _WorkerContext:
    """A multiprocess context whose ``Pool`` is a :func:`worker_pool`."""

    def __init__(self, ctx) -> None:
        self._ctx = ctx

    def __getattr__(self, name: str):
        return getattr(self._ctx, name)

    def Pool(self, processes: int):  # noqa: N802 (multiprocess's name)
        return worker_pool(self._ctx, processes)


datatrove.executor.local.multiprocess = _Multiprocess()


def check_executor(config: ExecutorConfig) -> None:
    """Before any work: a known executor, a partition for ``slurm``, Ray installed for ``ray``."""
    if config.kind not in EXECUTORS:
        raise InputError(f"--executor {config.kind!r}: expected one of {', '.join(EXECUTORS)}")
    if config.kind == "slurm" and not config.slurm.partition:
        raise InputError("--executor slurm needs --slurm-partition (the partition the job arrays run on)")
    if config.kind == "ray":
        try:
            import ray  # noqa: F401
        except ImportError:
            raise InputError("--executor ray needs Ray: pip install 'bangla-tokfair[ray]'") from None


@contextmanager
def executor_session(config: ExecutorConfig) -> Iterator[None]:
    """Connect to (or start, and then stop) the Ray instance the ``ray`` executor needs; nothing for the others.
    ``config`` is one :func:`check_executor` passed (stage 1 of a build)."""
    if config.kind != "ray":
        yield
        return
    import ray

    if ray.is_initialized():
        yield
        return
    # ray.init() sets variables in this process's environment and leaves them there after ray.shutdown(): a new
    # local instance turns on token authentication (RAY_AUTH_MODE=token) for this process and everything it
    # starts later. A build called from a long-lived process (a notebook, a test session) would thus change how
    # every Ray cluster started or joined from it afterwards runs; what Ray changed is put back once it stops.
    before, changed = dict(os.environ), {}
    try:
        try:
            if config.ray_address:
                ray.init(address=config.ray_address, log_to_driver=False)
            else:
                _start_local_ray(ray, config.workers)
        finally:
            changed = {key: before.get(key) for key in {*before, *os.environ}
                       if before.get(key) != os.environ.get(key)}
        yield
    finally:
        ray.shutdown()
        for key, value in changed.items():
            if value is None:
                os.environ.pop(key, None)
            else:
                os.environ[key] = value


# Ray waits a fixed 30 s (`ray._private.node`, not configurable in this version) for a starting node to
# register, which a busy 2-core machine can exceed ("The current node timed out during startup"); the start
# is then tried again, from scratch, a few times before the error is the user's.
RAY_START_ATTEMPTS = 4


def _start_local_ray(ray, workers: int) -> None:
    for attempt in range(1, RAY_START_ATTEMPTS + 1):
        try:
            # address="local": a new instance even where RAY_ADDRESS or a `ray start` on this machine names a
            # cluster, which ray.init() would join instead (and then refuse num_cpus); --ray-address joins one.
            ray.init(address="local", num_cpus=workers, include_dashboard=False, log_to_driver=False)
            return
        except Exception as e:  # Ray raises a bare Exception for this
            if "timed out during startup" not in str(e) or attempt == RAY_START_ATTEMPTS:
                raise
            ray.shutdown()


# What a terminal sends to every process of its group: Ctrl-C, and SIGHUP when it closes (a lost ssh session).
TERMINAL_SIGNALS = {signal.SIGINT, signal.SIGHUP}


@contextmanager
def terminal_signals_held() -> Iterator[None]:
    """The terminal's signals held back while worker processes start, so that they start ignoring them: a new
    Python (spawn) keeps a SIG_IGN it inherits (the signal mask is reset by the exec), so the disposition is
    SIG_IGN meanwhile (from the main thread, the one that may set it). The signals are also blocked in this
    thread, which on Linux keeps one arriving meanwhile pending rather than ignored: it reaches the build's own
    handler when the block ends."""
    previous_mask = signal.pthread_sigmask(signal.SIG_BLOCK, TERMINAL_SIGNALS)
    main = threading.current_thread() is threading.main_thread()
    previous = {sig: signal.signal(sig, signal.SIG_IGN) for sig in TERMINAL_SIGNALS} if main else {}
    try:
        yield
    finally:
        for sig, handler in previous.items():
            signal.signal(sig, handler)
        signal.pthread_sigmask(signal.SIG_SETMASK, previous_mask)


def worker_start(parent_pid: int) -> None:
    """First thing in a worker process of the build (a pool initializer): die with the build (even by
    ``kill -9``), and leave the terminal's signals to it. A terminal sends SIGINT (and SIGHUP) to every process
    of the group; the build is the one that stops its pools (which ends the workers) and says so in one line.
    Started under :func:`terminal_signals_held`, it has ignored them from its first instruction; a forked one
    unblocks them here."""
    die_with_parent(parent_pid)
    for sig in TERMINAL_SIGNALS:
        signal.signal(sig, signal.SIG_IGN)
    signal.pthread_sigmask(signal.SIG_UNBLOCK, TERMINAL_SIGNALS)


def worker_pool(ctx, processes: int):
    """``ctx.Pool(processes)`` of build workers: every worker runs :func:`worker_start` before anything else and
    is started with the terminal's signals held, so no Ctrl-C or hang-up, however early, reaches a worker's
    Python."""
    with terminal_signals_held():
        return ctx.Pool(processes, initializer=worker_start, initargs=(os.getpid(),))


class _Local(LocalPipelineExecutor):
    """datatrove's local executor; defined here so that a spawned task process imports this module (and with it
    the quieter task logger) when it unpickles its executor. Its pool's workers are the build's
    (:class:`_Multiprocess`)."""


class _Ray(RayPipelineExecutor):
    """datatrove's Ray executor, for the same reason as :class:`_Local`."""


class _Slurm(SlurmPipelineExecutor):
    """datatrove's Slurm executor, for the same reason as :class:`_Local` (a task unpickles it on its node). It
    keeps the id of the job datatrove submits after the array to merge the tasks' statistics (``merge_job_id``,
    ``--dependency=afterok`` on the array), which the build waits for: a merge still running when the build
    has finished would write into the work folder the build has removed."""

    merge_job_id: str | None = None

    def launch_merge_stats(self) -> None:
        retrieve, ids = self.job_id_retriever, []
        self.job_id_retriever = lambda output: ids.append(retrieve(output)) or ids[-1]
        try:
            super().launch_merge_stats()
        finally:
            self.job_id_retriever = retrieve
        self.merge_job_id = ids[0]


def _slurm_executor(config: SlurmConfig, pipeline: list, tasks: int, logging_dir: str) -> _Slurm:
    env_command = config.env_command
    if env_command is None and sys.prefix != sys.base_prefix:
        env_command = f"source {os.path.join(sys.prefix, 'bin', 'activate')}"
    name = os.path.basename(logging_dir.rstrip("/"))
    return _Slurm(pipeline, tasks=tasks, logging_dir=logging_dir, partition=config.partition, time=config.time,
                  cpus_per_task=1, mem_per_cpu_gb=config.mem_per_cpu_gb, qos=config.qos, job_name=f"corpus-{name}",
                  env_command=env_command, sbatch_args=dict(config.sbatch_args))


def _in_queue(job_id: str) -> bool:
    """Whether Slurm still lists the job (pending or running); an id it no longer knows is not."""
    listed = subprocess.run(["squeue", "-h", "-j", str(job_id), "-o", "%i"], capture_output=True, text=True)
    return listed.returncode == 0 and bool(listed.stdout.strip())


def _cancelled(job_id: str) -> bool:
    """Whether Slurm reports a task of the job (array) as cancelled (``scancel``, or an administrator). Slurm
    keeps a finished job's record for its ``MinJobAge`` (300 s by default), which ``squeue -t all`` shows; a
    record already gone says nothing either way."""
    listed = subprocess.run(["squeue", "-h", "-j", str(job_id), "-t", "all", "-o", "%T"], capture_output=True,
                            text=True)
    return listed.returncode == 0 and "CANCELLED" in listed.stdout.split()


def _wait_for_slurm(executor: _Slurm, poll_s: float) -> None:
    """Until every task of the stage is complete, or its job array has left the queue with tasks undone
    (the caller then reports them), and then until the statistics merge has left the queue. A task marks
    itself complete before it exits, so once the array is out of the queue, the markers there are all there
    will be. With tasks undone the merge can never start (``afterok``), and Slurm would keep it pending for
    ever: it is cancelled."""
    while executor.get_incomplete_ranks(skip_completed=True):
        if executor.job_id in (None, -1) or not _in_queue(executor.job_id):
            break
        time.sleep(poll_s)
    merge = executor.merge_job_id
    if merge is None:
        return
    if executor.get_incomplete_ranks(skip_completed=True):
        subprocess.run(["scancel", str(merge)], capture_output=True)
    while _in_queue(merge):
        time.sleep(poll_s)


def run_pipeline(config: ExecutorConfig, pipeline: list, tasks: int, logging_dir: str) -> None:
    """Run ``tasks`` tasks of ``pipeline``, skipping those already completed in ``logging_dir``."""
    workers = max(1, min(config.workers, tasks))
    if config.kind == "slurm":
        executor = _slurm_executor(config.slurm, pipeline, tasks, logging_dir)
        executor.run()  # submits the job array (and datatrove's merge of its statistics) and returns
        _wait_for_slurm(executor, config.slurm.poll_s)
    elif config.kind == "ray":
        # A task streams its documents, so half a GB is what it reserves; datatrove's default (2 GB per CPU)
        # can leave tasks pending forever on a small or busy machine.
        executor = _Ray(pipeline, tasks=tasks, workers=workers, logging_dir=logging_dir,
                        cpus_per_task=1, mem_per_cpu_gb=0.5)
        executor.run()
    else:
        executor = _Local(pipeline, tasks=tasks, workers=workers, logging_dir=logging_dir, start_method="spawn")
        executor.run()
    incomplete = executor.get_incomplete_ranks(skip_completed=True)
    if incomplete and config.kind == "slurm" and executor.job_id not in (None, -1) and _cancelled(executor.job_id):
        raise StageError(f"stage {os.path.basename(logging_dir.rstrip('/'))}: Slurm job {executor.job_id} was "
                         f"scancelled with {len(incomplete)} of {tasks} tasks undone; rerun the same command to run "
                         f"them")
    if incomplete:
        raise StageError(f"{len(incomplete)} of {tasks} tasks failed (see {logging_dir}/logs); rerun the same "
                           f"command to retry them")
