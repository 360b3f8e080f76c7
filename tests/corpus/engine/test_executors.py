"""The same bytes whatever runs the pipeline: the local executor with 1 and 2 tasks, Ray (a local instance
with 2 CPUs, started once for this module) and Slurm (stand-in ``sbatch``/``srun``/``squeue`` commands that run
the job array here); a FineWeb-2-schema parquet file set as a source, offline."""

from __future__ import annotations

import os
import signal
import threading
from pathlib import Path

import multiprocess
import pytest

from corpus.build import BuildConfig, build
from corpus.engine.executors import (
    ExecutorConfig,
    SlurmConfig,
    StageError,
    terminal_signals_held,
    worker_pool,
)
from corpus.read.sources import parse_source


@pytest.fixture(scope="module")
def config(small_build) -> BuildConfig:
    return small_build.config


@pytest.fixture(scope="module")
def local_one(small_build) -> Path:
    return small_build.local


def test_status_file_shows_every_stage_done(local_one):
    import json

    stages = json.loads((local_one.parent / "status.json").read_text())["stages"]
    assert [s["stage"] for s in stages] == ["ingest", "buckets", "pack"]
    assert all(s["done"] and s["tasks_done"] == s["tasks"] and s["eta_s"] == 0 for s in stages)
    assert stages[0]["documents"] > 0 and stages[0]["bytes"] > stages[0]["documents"]
    assert stages[2]["documents"] == stages[2]["total_documents"] > 0


def test_hub_file_sets_are_fsspec_urls():
    source = parse_source("bn=hf://datasets/HuggingFaceFW/fineweb-2/data/ben_Beng/train/*.parquet")
    assert (source.lang, source.field) == ("bn", "text")
    assert source.spec == "hf://datasets/HuggingFaceFW/fineweb-2/data/ben_Beng/train/*.parquet"
    assert parse_source("en=s3://bucket/edu/*.jsonl.gz:body").field == "body"


def test_fineweb2_parquet_source_filters_by_language_score(local_one):
    import json

    report = json.loads((local_one / "report.json").read_text())
    bn = next(s for s in report["sources"] if s["language"] == "bn")
    assert bn["counters"]["drop_language_score"] > 0
    assert bn["kept"]["documents"] > 0 and bn["name"].endswith("*.parquet")


@pytest.mark.slow
def test_local_two_tasks_equals_one(config, small_build, tmp_path):
    build(config, tmp_path, executor=ExecutorConfig(workers=2, tasks=2, progress=False))
    assert small_build.same_as_local(tmp_path)


@pytest.mark.slow
def test_ray_equals_local(config, small_build, tmp_path):
    ray = pytest.importorskip("ray")
    # No --ray-address: the build starts a local Ray instance with --workers (2) CPUs and stops it.
    build(config, tmp_path, executor=ExecutorConfig(kind="ray", workers=2, tasks=2, progress=False))
    assert not ray.is_initialized()
    assert small_build.same_as_local(tmp_path)


FAKE_SBATCH = """#!{python}
# Stand-in for sbatch: keeps the script, runs the array's tasks now, one after another (unless the test says
# the job was cancelled), and answers as sbatch does.
import os, re, shutil, subprocess, sys
script = sys.argv[-1]
text = open(script).read()
kept = os.path.join(os.environ["FAKE_SLURM_DIR"], "submitted")
os.makedirs(kept, exist_ok=True)
shutil.copy(script, os.path.join(kept, str(len(os.listdir(kept)))))
env = dict(os.environ, SLURM_NODELIST="localhost", SLURM_JOB_ID="4242",
           PATH=os.path.dirname(sys.executable) + os.pathsep + os.environ["PATH"])
for opt in sys.argv[1:-1]:
    if opt.startswith("--export=ALL,"):
        env.update(kv.split("=", 1) for kv in opt[len("--export=ALL,"):].split(","))
first, last = map(int, re.search(r"#SBATCH --array=(\\d+)-(\\d+)", text).groups())
if not os.path.exists(os.path.join(os.environ["FAKE_SLURM_DIR"], "cancel")):
    with open(os.path.join(os.environ["FAKE_SLURM_DIR"], "tasks.log"), "a") as log:
        for i in range(first, last + 1):
            subprocess.run(["bash", script], env=dict(env, SLURM_ARRAY_TASK_ID=str(i)), stdout=log, stderr=log)
print("Submitted batch job 4242")
"""


@pytest.fixture
def fake_slurm(tmp_path, monkeypatch) -> Path:
    import sys

    bin_dir = tmp_path / "bin"
    bin_dir.mkdir()
    (bin_dir / "sbatch").write_text(FAKE_SBATCH.format(python=sys.executable))
    (bin_dir / "srun").write_text('#!/bin/bash\nwhile [[ $# -gt 2 ]]; do shift; done\nexec "$@"\n')  # the command
    (bin_dir / "squeue").write_text("#!/bin/bash\n")  # the job has left the queue: sbatch ran it already
    (bin_dir / "scontrol").write_text("#!/bin/bash\necho localhost\n")  # show hostnames: the one node
    # The build cancels the statistics merge of an array with tasks undone; the fake queue has no jobs to cancel
    # (and a machine without Slurm no scancel to find).
    (bin_dir / "scancel").write_text(f'#!/bin/bash\necho "$@" >> {tmp_path / "cancelled"}\n')
    for f in bin_dir.iterdir():
        f.chmod(0o755)
    monkeypatch.setenv("PATH", f"{bin_dir}:{os.environ['PATH']}")
    monkeypatch.setenv("FAKE_SLURM_DIR", str(tmp_path))
    return tmp_path


@pytest.mark.slow
def test_slurm_equals_local_and_a_cancelled_stage_is_rerun(config, small_build, fake_slurm, tmp_path):
    slurm = ExecutorConfig(kind="slurm", tasks=2, progress=False,
                           slurm=SlurmConfig(partition="cpu", sbatch_args={"account": "proj"}, poll_s=0.01))
    (fake_slurm / "cancel").touch()  # the job array leaves the queue with no task done
    with pytest.raises(StageError, match="2 of 2 tasks failed"):
        build(config, tmp_path / "out", executor=slurm)
    assert (fake_slurm / "cancelled").read_text().split() == ["4242"]  # its merge, which could never start
    (fake_slurm / "cancel").unlink()
    build(config, tmp_path / "out", executor=slurm)  # the same command again: the tasks run this time
    assert small_build.same_as_local(tmp_path / "out")
    scripts = [p.read_text() for p in sorted((fake_slurm / "submitted").iterdir())]
    arrays = [s for s in scripts if "launch_pickled_pipeline" in s]
    assert len(arrays) == 2 and all("#SBATCH --array=0-1" in s for s in arrays)
    assert all("#SBATCH --partition=cpu" in s and "#SBATCH --account=proj" in s for s in scripts)
    assert all("#SBATCH --cpus-per-task=1" in s for s in arrays)


@pytest.mark.parametrize("queued, done_after, sleeps", [(True, 3, 3), (False, 3, 0), (True, 0, 0)])
def test_waiting_for_a_slurm_stage(monkeypatch, queued, done_after, sleeps):
    # The build waits while the job array is queued or running and tasks are incomplete; it stops waiting
    # when they are all complete, or when the array has left the queue (the caller then names the failures).
    import corpus.engine.executors as ex

    class Stage:
        job_id, merge_job_id, looked = "4242", None, 0

        def get_incomplete_ranks(self, skip_completed):
            self.looked += 1
            return [0, 1] if self.looked <= done_after else []

    slept = []
    monkeypatch.setattr(ex, "_in_queue", lambda job_id: queued)
    monkeypatch.setattr(ex.time, "sleep", slept.append)
    ex._wait_for_slurm(Stage(), poll_s=7.0)
    assert slept == [7.0] * sleeps


def test_slurm_needs_a_partition(config, tmp_path):
    with pytest.raises(ValueError, match="--slurm-partition"):
        build(config, tmp_path, executor=ExecutorConfig(kind="slurm", progress=False))


def test_unreadable_file_sets_fail_before_any_work(tmp_path, capsys):
    import pyarrow as pa
    import pyarrow.parquet as pq

    from corpus.cli import main

    pq.write_table(pa.table({"text": ["এক দুই তিন চার পাঁচ ছয় সাত আট"]}), tmp_path / "a.parquet")
    common = ["--tokenizer", "gpt2", "--mix", "bn=1", "--tokens", "100", "--workers", "1", "--no-progress"]
    out = tmp_path / "out"
    assert main(["build", "--source", f"bn={tmp_path}/*.parquet", "--min-language-score", "0.9", "--out", str(out),
                 *common]) == 2
    assert "a.parquet: no column 'language_score'" in capsys.readouterr().err
    assert main(["build", "--source", f"bn={tmp_path}/*.parquet:body", "--out", str(out), *common]) == 2
    assert "no column 'body'" in capsys.readouterr().err
    assert main(["build", "--source", f"bn={tmp_path}/*.jsonl", "--out", str(out), *common]) == 2
    assert "matches no files" in capsys.readouterr().err
    assert not out.exists() and not list(tmp_path.glob(".out*"))  # nothing made, not even the staging folder


def test_work_folder_on_an_fsspec_filesystem(config, small_build, tmp_path):
    import fsspec

    # memory:// stands in for s3:// or gs:// (it lives in this process, so one in-process task).
    build(config, tmp_path, executor=ExecutorConfig(workers=1, tasks=1, progress=False),
          work_dir="memory://corpus-work")
    assert small_build.same_as_local(tmp_path)
    assert not fsspec.filesystem("memory").exists("/corpus-work")


def test_fineweb2_preset_fills_options_left_at_their_defaults():
    from corpus.cli import _config, build_parser

    args = build_parser().parse_args(["plan", "--source", "bn=x.parquet", "--tokenizer", "gpt2", "--mix", "bn=1",
                                "--tokens", "10", "--preset", "fineweb2-ben", "--max-dup-line-share", "0.2"])
    config = _config(args)
    assert config.ingest.min_language_score == 0.872
    assert config.ingest.clean.max_dup_ngram_share == 0.099
    assert config.ingest.clean.max_dup_line_share == 0.2  # given explicitly


def test_a_single_parquet_file_is_filtered_by_language_score_too(tmp_path):
    import pyarrow as pa
    import pyarrow.parquet as pq

    from corpus.read.sources import partition

    pq.write_table(pa.table({"text": ["এক দুই", None, "তিন চার", "পাঁচ ছয়"], "language_score": [0.9, 0.9, 0.5, 0.95]}),
                   tmp_path / "one.parquet")
    counters = [{}]
    docs = list(partition([parse_source(f"bn={tmp_path}/one.parquet")], 0, 1, unit_docs=10, max_chars=None,
                          bad_utf8="fail", min_language_score=0.872, counters=counters))
    assert [d.text for d in docs] == ["এক দুই", "পাঁচ ছয়"]
    assert [d.uid for d in docs] == [0, 3]  # the row, nulls and filtered rows counted
    assert counters[0]["drop_language_score"] == 1


class _FlakyRay:
    """A stand-in for ``ray`` whose node start times out ``failures`` times, as on a busy machine."""

    def __init__(self, failures: int, message: str = "The current node timed out during startup. ..."):
        self.failures, self.message, self.inits, self.shutdowns = failures, message, 0, 0

    def init(self, **kwargs):
        self.inits += 1
        if self.inits <= self.failures:
            raise Exception(self.message)

    def shutdown(self):
        self.shutdowns += 1


def test_a_ray_start_that_times_out_is_tried_again():
    from corpus.engine.executors import RAY_START_ATTEMPTS, _start_local_ray

    ray = _FlakyRay(failures=RAY_START_ATTEMPTS - 1)
    _start_local_ray(ray, 2)
    assert (ray.inits, ray.shutdowns) == (RAY_START_ATTEMPTS, RAY_START_ATTEMPTS - 1)
    with pytest.raises(Exception, match="timed out during startup"):
        _start_local_ray(_FlakyRay(failures=RAY_START_ATTEMPTS), 2)
    other = _FlakyRay(failures=1, message="no such address")
    with pytest.raises(Exception, match="no such address"):
        _start_local_ray(other, 2)
    assert other.inits == 1


@pytest.mark.parametrize("signum", [signal.SIGINT, signal.SIGHUP], ids=["Ctrl-C", "hang-up"])
def test_a_build_worker_ignores_the_terminals_signals_from_its_first_instruction(signum):
    """A Ctrl-C (or the hang-up of a closed terminal) reaches every process of the group, also a pool worker
    still starting (spawn: a new Python) or waiting for its first task; such a worker printed a traceback
    (or died of SIGHUP). Sent right after the pool returns, the signal lands while the worker boots, before any
    code of ours runs in it."""
    with worker_pool(multiprocess.get_context("spawn"), 1) as pool:
        assert signum not in signal.pthread_sigmask(signal.SIG_BLOCK, [])  # the build's mask is back
        (worker,) = pool._pool
        os.kill(worker.pid, signum)
        # Library functions only: a spawned worker that cannot import a task's function (this module is not
        # importable there under the ``pytest`` script) dies and leaves the pool waiting forever.
        pid = pool.apply(os.getpid)
        handler = pool.apply(signal.getsignal, (signum,))
        blocked = pool.apply(signal.pthread_sigmask, (signal.SIG_BLOCK, []))
    assert pid == worker.pid  # the same worker: it did not die of the signal and get replaced
    assert handler == signal.SIG_IGN and signum not in blocked


def test_a_sigint_while_workers_start_reaches_the_build_afterwards():
    arrived: list[str] = []
    previous = signal.signal(signal.SIGINT, lambda signum, _frame: arrived.append("delivered"))
    try:
        with terminal_signals_held():
            signal.pthread_kill(threading.main_thread().ident, signal.SIGINT)
            arrived.append("block ends")  # held: the handler has not run yet
    finally:
        signal.signal(signal.SIGINT, previous)
    assert arrived == ["block ends", "delivered"]  # not lost, only later
