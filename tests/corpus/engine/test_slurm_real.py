"""``corpus build --executor slurm`` on a real Slurm (``scripts/slurm-local.sh``: slurmctld and two slurmd on
this host): datatrove's job array through the real ``sbatch``, the statistics merge after it
(``--dependency=afterok``), ``squeue`` and ``scancel``. A stage cancelled mid-run is one line; the rerun runs
only the task left undone, and the shards are byte-identical to the local build's."""

from __future__ import annotations

import json
import os
import subprocess
import sys
import time
from pathlib import Path

import pytest

from corpus.engine.faults import PAUSE_ENV

ROOT = Path(__file__).resolve().parents[3]
TIMEOUT_S = 600  # a build that outlives it fails the test instead of hanging it


def slurm_build(small_build, slurm_cluster, out: Path, work: Path) -> list[str]:
    return [sys.executable, "-m", "corpus", "build", *small_build.args, "--executor", "slurm", "--slurm-partition",
            slurm_cluster.partition, "--slurm-poll", "0.2", "--tasks", "2", "--work-dir", str(work), "--keep-work",
            "--no-progress", "--out", str(out)]


def ingest_logs(work: Path) -> Path:
    """The ingest stage's datatrove logging folder in the work folder (with 2 tasks)."""
    return work / "t2" / "logs" / "ingest"


@pytest.mark.slow
def test_a_scancelled_stage_is_one_line_and_the_rerun_does_only_the_rest_and_equals_local(small_build, slurm_cluster,
                                                                                           tmp_path):
    out, work, paused = tmp_path / "out", tmp_path / "work", tmp_path / "task1.pid"
    # Task 1 of the ingest writes its pid to `paused` and waits there (once: the rerun's task 1 goes on).
    env = os.environ | slurm_cluster.env | {PAUSE_ENV: f"ingest:1:{paused}"}
    argv = slurm_build(small_build, slurm_cluster, out, work)
    with open(tmp_path / "stderr.txt", "w+") as err:
        proc = subprocess.Popen(argv, cwd=tmp_path, env=env, stdout=subprocess.DEVNULL, stderr=err)
        try:
            done0 = ingest_logs(work) / "completions" / "00000"
            deadline = time.monotonic() + TIMEOUT_S
            while not (paused.exists() and done0.exists()):  # task 1 waits, task 0 has finished
                assert proc.poll() is None and time.monotonic() < deadline, "the stage never got to task 1's pause"
                time.sleep(0.05)
            assert "#SBATCH --array=0-1" in (ingest_logs(work) / "launch_script.slurm").read_text()
            environ = Path(f"/proc/{paused.read_text().strip()}/environ").read_bytes().split(b"\0")
            job = next(v.split(b"=", 1)[1].decode() for v in environ if v.startswith(b"SLURM_ARRAY_JOB_ID="))
            subprocess.run(["scancel", job], env=env, check=True)
            assert proc.wait(timeout=TIMEOUT_S) == 1
        finally:
            proc.kill()
        err.seek(0)
        stderr = err.read()
    assert len(stderr.splitlines()) == 1 and "Traceback" not in stderr, stderr
    assert f"Slurm job {job} was scancelled with 1 of 2 tasks undone" in stderr, stderr
    assert not slurm_cluster.squeue("-t", "pending,running", "-o", "%i"), "a job was left queued"

    rerun = subprocess.run(argv, cwd=tmp_path, env=env, capture_output=True, text=True, timeout=TIMEOUT_S)
    assert rerun.returncode == 0, rerun.stderr[-3000:]
    logs = ingest_logs(work)
    assert json.loads((logs / "ranks_to_run.json").read_text()) == [1]  # only the cancelled task, again
    assert "#SBATCH --array=0-0" in (logs / "launch_script.slurm").read_text()
    assert sorted(p.name for p in (logs / "completions").iterdir()) == ["00000", "00001"]
    # Written by the merge job, which Slurm started only once the rerun's array had succeeded, and which the
    # build waited for.
    assert (logs / "stats.json").is_file()
    assert small_build.same_as_local(out)
