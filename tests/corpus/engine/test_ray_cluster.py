"""``corpus build --executor ray --ray-address`` on a Ray cluster of three nodes on loopback (``ray.cluster_utils``:
each node its own raylet with its own resources): a head that runs no task (no CPUs, as on many clusters) and
two workers of one CPU each. The ingest's tasks run on both workers (Ray's actor table says where); the worker
running task 0 is killed mid-task; datatrove retries the task on the other, and the shards are byte-identical
to the local build's."""

from __future__ import annotations

import contextlib
import os
import signal
import subprocess
import sys
import time
from pathlib import Path

import pytest

from corpus.engine.executors import RAY_START_ATTEMPTS
from corpus.engine.faults import PAUSE_ENV

ROOT = Path(__file__).resolve().parents[3]
TIMEOUT_S = 600  # a build that outlives it fails the test instead of hanging it


def parent_pid(pid: int) -> int:
    return int(Path(f"/proc/{pid}/stat").read_text().rsplit(")", 1)[1].split()[1])


def rank_workers(cluster) -> list[dict]:
    """datatrove's task actors (one per task and attempt) in the cluster's actor table."""
    return [a for a in cluster.global_state.actor_table(None).values() if a["ActorClassName"] == "RankWorker"]


def stop_cluster(cluster) -> None:
    """Every node of the cluster, without the grace period each process gets by default (nothing to save)."""
    for node in [*cluster.worker_nodes, *([cluster.head_node] if cluster.head_node else [])]:
        cluster.remove_node(node, allow_graceful=False)
    cluster.shutdown()  # resets the driver-side state (and the cluster address Ray wrote for this machine)


def descendants() -> set[int]:
    """The pids of this process's descendants, from /proc."""
    parents = {}
    for stat in Path("/proc").glob("[0-9]*/stat"):
        try:
            parents[int(stat.parent.name)] = parent_pid(int(stat.parent.name))
        except (OSError, ValueError, IndexError):  # gone meanwhile
            continue
    found, frontier = set(), {os.getpid()}
    while frontier:
        frontier = {pid for pid, ppid in parents.items() if ppid in frontier} - found
        found |= frontier
    return found


def running(pid: int) -> bool:
    try:
        return Path(f"/proc/{pid}/stat").read_text().rsplit(")", 1)[1].split()[0] != "Z"
    except OSError:
        return False


def start_cluster():
    """The head (no CPUs) and two workers of one CPU each, started at once; returns the cluster and its workers
    by node id. Ray waits a fixed 30 s for a starting node to register (and its raylet a fixed time for the
    node's agent), which a busy 2-core machine can exceed ("timed out during startup"): as the build does for
    its own instance (``RAY_START_ATTEMPTS``), the start is then tried again from scratch, after stopping what
    the failed try started (a node whose start failed is in no list of the cluster: its processes are the
    descendants of this process that were not there before)."""
    from ray.cluster_utils import Cluster

    for attempt in range(1, RAY_START_ATTEMPTS + 1):
        before = descendants()
        cluster = Cluster(initialize_head=False)
        try:
            cluster.add_node(num_cpus=0, include_dashboard=False)  # the head
            workers = {node.node_id: node for node in (cluster.add_node(num_cpus=1, wait=False) for _ in range(2))}
            cluster.wait_for_nodes()
            return cluster, workers
        except Exception as e:  # Ray raises a bare Exception for this
            stop_cluster(cluster)
            started = descendants() - before
            for pid in started:
                with contextlib.suppress(ProcessLookupError):
                    os.kill(pid, signal.SIGKILL)
            deadline = time.monotonic() + 30
            while any(map(running, started)) and time.monotonic() < deadline:
                time.sleep(0.1)
            if "timed out during startup" not in str(e) or attempt == RAY_START_ATTEMPTS:
                raise


@pytest.mark.slow
def test_a_three_node_cluster_runs_the_build_across_nodes_and_survives_a_killed_node(small_build, tmp_path,
                                                                                     monkeypatch):
    pytest.importorskip("ray")

    out, paused = tmp_path / "out", tmp_path / "task0.pid"
    # Ingest task 0 writes its pid to `paused` and waits there, holding its worker's one CPU, so task 1 runs on
    # the other worker; once only, so the retried task 0 goes on. The nodes' processes inherit this environment
    # from the test; the build (the driver) gets none of it.
    monkeypatch.setenv(PAUSE_ENV, f"ingest:0:{paused}")
    cluster, workers = start_cluster()
    proc = None
    try:
        monkeypatch.delenv(PAUSE_ENV)
        argv = [sys.executable, "-m", "corpus", "build", *small_build.args, "--executor", "ray", "--ray-address",
                cluster.address, "--tasks", "2", "--workers", "2", "--no-progress", "--out", str(out)]
        with open(tmp_path / "stderr.txt", "w") as err:
            proc = subprocess.Popen(argv, cwd=tmp_path, stdout=subprocess.DEVNULL, stderr=err)
        deadline = time.monotonic() + TIMEOUT_S
        while not paused.exists():
            assert proc.poll() is None and time.monotonic() < deadline, "task 0 never got to its pause"
            time.sleep(0.05)
        task0 = int(paused.read_text())
        # The task runs in a process of datatrove's task actor, whose record names the node.
        (actor,) = [a for a in rank_workers(cluster) if a["Pid"] == parent_pid(task0)]
        killed = actor["Address"]["NodeID"]
        cluster.remove_node(workers.pop(killed), allow_graceful=False)
        os.kill(task0, signal.SIGKILL)  # the node's machine is gone: the task's own process with it
        assert proc.wait(timeout=TIMEOUT_S) == 0, (tmp_path / "stderr.txt").read_text()[-3000:]
        nodes = {a["Address"]["NodeID"] for a in rank_workers(cluster)}
        (survivor,) = workers
        assert nodes == {killed, survivor}  # the tasks ran on both workers, task 0 again on the survivor
        assert len(rank_workers(cluster)) == 3  # task 0, task 1, task 0 retried
        assert small_build.same_as_local(out)
    finally:
        if proc is not None:
            proc.kill()
            proc.wait()
        stop_cluster(cluster)
