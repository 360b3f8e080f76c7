"""SIGINT and SIGTERM end `corpus build` with one line and 130/143, keeping the finished work, and the rerun of
the same command gives the same bytes as a build never stopped; after `kill -9` of the build, no worker it
started outlives it.

Each test synchronises on a file the build writes where it stands (``corpus.engine.faults``: ``CORPUS_PAUSE``
writes the pid of the process that reached the chosen stage and task, then waits there), never on time.
"""

from __future__ import annotations

import os
import signal
import subprocess
import sys
import time
from pathlib import Path

import pytest

from common.fileio import file_sha256
from corpus.build import staging_path
from corpus.cli import main
from corpus.engine.faults import PAUSE_ENV

ROOT = Path(__file__).resolve().parents[3]
WAIT_S = 300  # bounds on waiting for a file or a process: generous on a loaded 2-core machine, never reached


def _argv(sample_dir: Path, out: Path, workers: int) -> list[str]:
    return ["build", "--source", f"bn={sample_dir}/bn/literature-bnarchive.txt.gz",
            "--source", f"en={sample_dir}/en/wiki-en-chinapedia.txt.gz", "--max-chars", "40000",
            "--tokenizer", "gpt2", "--mix", "bn=0.5,en=0.5", "--tokens", "1e4", "--val-tokens", "1000",
            "--shard-tokens", "1500", "--seed", "2", "--out", str(out), "--workers", str(workers), "--tasks", "2",
            "--no-progress"]


def sha256_of_outputs(directory: Path) -> dict[str, str]:
    """sha256 of every file of a shard directory."""
    return {p.name: file_sha256(p) for p in sorted(directory.iterdir()) if p.is_file()}


def _start_paused(argv: list[str], where: str, pid_file: Path) -> tuple[subprocess.Popen, int]:
    """Start the build; once it stands at ``where`` (STAGE:INDEX), the build and the pid that is waiting there."""
    proc = subprocess.Popen([sys.executable, "-m", "corpus", *argv], cwd=ROOT, stdout=subprocess.DEVNULL,
                            stderr=subprocess.PIPE, text=True, start_new_session=True,
                            env=os.environ | {PAUSE_ENV: f"{where}:{pid_file}"})
    deadline = time.monotonic() + WAIT_S
    while not pid_file.exists():
        if proc.poll() is not None:
            pytest.fail(f"the build ended ({proc.returncode}) before reaching {where}: {proc.stderr.read()}")
        if time.monotonic() > deadline:
            proc.kill()
            pytest.fail(f"the build did not reach {where} in {WAIT_S} s")
        time.sleep(0.05)
    return proc, int(pid_file.read_text())


@pytest.fixture(scope="module")
def reference(sample_dir, tmp_path_factory) -> dict[str, str]:
    out = tmp_path_factory.mktemp("reference") / "out"
    assert main(_argv(sample_dir, out, 1)) == 0
    return sha256_of_outputs(out)


@pytest.mark.slow
@pytest.mark.parametrize(("sig", "code", "where", "workers"), [
    (signal.SIGINT, 130, "pack:3", 1),  # in the build process, while it writes shards
    (signal.SIGINT, 130, "ingest:1", 2),  # while a pool worker runs an ingest task
    (signal.SIGTERM, 143, "ingest:1", 2),
], ids=["sigint-packing", "sigint-ingest-pool", "sigterm-ingest-pool"])
def test_signal_stops_with_one_line_and_the_rerun_is_byte_identical(sample_dir, tmp_path, reference, sig, code,
                                                                    where, workers):
    out = tmp_path / "out"
    argv = _argv(sample_dir, out, workers)
    proc, _ = _start_paused(argv, where, tmp_path / "paused")
    if sig == signal.SIGINT:
        os.killpg(proc.pid, sig)  # as Ctrl-C in a terminal: to the build and every worker of its group
    else:
        proc.send_signal(sig)  # as `kill PID`
    _, err = proc.communicate(timeout=WAIT_S)
    assert proc.returncode == code, err
    assert "Traceback" not in err and len(err.splitlines()) == 1, err
    assert "stopped by" in err and "rerun the same command" in err
    assert not out.exists()  # OUT appears only when complete
    staged = staging_path(out)
    assert (staged / ".work").is_dir()
    if where.startswith("pack"):
        assert len(list(staged.glob("*.bin"))) == 3  # the shards written before the signal are kept
    assert main(argv) == 0
    assert sha256_of_outputs(out) == reference
    assert not staged.exists()


def _children(pid: int) -> set[int]:
    found = set()
    for task in Path(f"/proc/{pid}/task").iterdir():
        found |= {int(x) for x in (task / "children").read_text().split()}
    return found


def _running(pid: int) -> bool:
    """Whether ``pid`` is still a live process (a zombie, dead and waiting for init to reap it, is not)."""
    try:
        status = Path(f"/proc/{pid}/status").read_text()
    except (FileNotFoundError, ProcessLookupError):
        return False
    state = next(line for line in status.splitlines() if line.startswith("State:"))
    return state.split()[1] not in ("Z", "X")


@pytest.mark.slow
@pytest.mark.skipif(not sys.platform.startswith("linux") or not Path("/proc/self/task").is_dir(),
                    reason="PDEATHSIG and /proc are Linux's")
def test_workers_die_with_a_killed_build(sample_dir, tmp_path):
    """Finding: after `kill -9` of `corpus build`, a process it had started was still running 20-30 s later.
    Every one of them (the pool workers, datatrove's manager) now asks the kernel to kill it when the build
    dies; the kernel does that at the build's exit, so the bounded wait below ends as soon as it looks."""
    proc, worker = _start_paused(_argv(sample_dir, tmp_path / "out", 2), "ingest:1", tmp_path / "paused")
    children = _children(proc.pid)
    assert worker in children and len(children) >= 3  # the task's worker, another worker, the manager
    os.kill(proc.pid, signal.SIGKILL)
    proc.wait(timeout=WAIT_S)
    proc.stderr.close()
    deadline = time.monotonic() + 60  # the kernel kills them at the build's exit; 60 s only bounds a failure
    while (alive := {pid for pid in children if _running(pid)}) and time.monotonic() < deadline:
        time.sleep(0.05)
    assert not alive, f"still running after the build was killed: {alive}"
