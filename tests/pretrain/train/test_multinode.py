"""torchrun across nodes: two torchrun agents (``--nnodes 2``, c10d rendezvous on 127.0.0.1, gloo, one process
each), as on two hosts, against the one-process run at the same global batch: a one-process checkpoint resumes
on two nodes, which then train steps 5-8 as the one process did; two nodes train until a rank is killed after
step 6, which stops the whole run, and their step-4 checkpoint resumes on one process: the log (steps 1-4 from
two nodes, 5-8 from one process) equals the one process's. Every step is thus trained on two nodes and
compared; ``test_slurm_launch.py`` runs all 8 on two Slurm nodes at once.

The tolerance is zero, from the arithmetic: one process takes the global batch of 8 sequences as two
micro-batches of 4, each loss scaled by 1/2 before its backward pass, and adds the two gradients; two ranks
each take one of those micro-batches (the same shapes, so the same kernels and sums), and DDP scales each
gradient by 1/2 and adds the two in the all-reduce. Scaling by a power of two is exact in floating point and
a sum of two terms does not depend on their order, so every gradient, loss, norm and weight is the same bits.
(With more ranks than two the all-reduce's order of summation differs, and equality would be approximate.)
"""

from __future__ import annotations

import os
import shutil
import signal
import socket
import subprocess
import sys
import time
from pathlib import Path

import pytest

from common.fileio import read_jsonl
from pretrain.cli import main
from pretrain.train.checkpoint import latest_checkpoint, load_checkpoint

ROOT = Path(__file__).resolve().parents[3]
AGENT_TIMEOUT_S = 300  # a hung agent fails the test instead of hanging it


def free_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return s.getsockname()[1]


def start_agents(launch_args: list[str], log_dir: Path, *, extra: dict[int, list[str]] | None = None):
    """Two torchrun agents, node ranks 0 and 1, one trainer process each, meeting at a c10d rendezvous on
    127.0.0.1 (the first agent there hosts its store); ``extra[node]``: more arguments for that node's trainer."""
    port = free_port()
    agents = []
    for node in (0, 1):
        argv = [sys.executable, "-m", "torch.distributed.run", "--nnodes=2", f"--node-rank={node}",
                "--nproc-per-node=1", "--rdzv-backend=c10d", f"--rdzv-endpoint=127.0.0.1:{port}",
                f"--rdzv-id=multinode-{port}", "--max-restarts=0", "-m", "pretrain", *launch_args,
                *(extra or {}).get(node, [])]
        with open(log_dir / f"agent{node}.log", "w") as log:
            agents.append(subprocess.Popen(argv, cwd=ROOT, stdout=log, stderr=subprocess.STDOUT))
    return agents


def wait_agents(agents, log_dir: Path) -> list[int]:
    """Both agents' exit codes; one still running after AGENT_TIMEOUT_S fails the test (and is killed)."""
    try:
        return [a.wait(timeout=AGENT_TIMEOUT_S) for a in agents]
    except subprocess.TimeoutExpired:
        logs = "\n".join((log_dir / f"agent{n}.log").read_text()[-2000:] for n in (0, 1))
        raise AssertionError(f"a torchrun agent still runs after {AGENT_TIMEOUT_S} s:\n{logs}") from None
    finally:
        for a in agents:
            a.kill()
            a.wait()


def run_agents(launch_args: list[str], log_dir: Path) -> None:
    agents = start_agents(launch_args, log_dir)
    codes = wait_agents(agents, log_dir)
    assert codes == [0, 0], (codes, (log_dir / "agent0.log").read_text()[-3000:])


def children(pid: int) -> list[int]:
    """The processes whose parent is ``pid``."""
    return [int(p) for p in Path(f"/proc/{pid}/task/{pid}/children").read_text().split()]


@pytest.mark.slow
def test_a_one_process_checkpoint_resumes_on_two_nodes(micro, synthetic_shards, one_process_reference, tmp_path):
    run = tmp_path / "run"
    shutil.copytree(one_process_reference, run)
    step4 = run / "checkpoints" / "step_00000004.pt"
    assert load_checkpoint(step4)["world_size"] == 1
    run_agents(micro.args(synthetic_shards, run, micro.reference_steps, *micro.reference_args, "--resume-from", str(step4)), tmp_path)
    assert [r["gen"] for r in read_jsonl(run / "metrics.jsonl")][-1] == 2  # steps 5-8 trained again, on 2 nodes
    assert load_checkpoint(latest_checkpoint(run))["world_size"] == 2
    micro.assert_same_run(run, one_process_reference, micro.reference_steps)


@pytest.mark.slow
def test_a_killed_rank_stops_the_run_and_it_resumes_on_one_process(micro, synthetic_shards, one_process_reference,
                                                                     tmp_path):
    run = tmp_path / "run"
    launch = micro.args(synthetic_shards, run, micro.reference_steps, *micro.reference_args)
    # Node 1's trainer stops answering before step 7 (`hang` changes no number), so the kill lands there, after
    # the checkpoint of step 4, whatever the machine's load; node 0's waits for it in the step's all-reduce.
    agents = start_agents(launch, tmp_path, extra={1: ["--inject-fault", "hang@7"]})
    try:
        deadline = time.monotonic() + AGENT_TIMEOUT_S
        while not any(r["step"] == 6 for r in read_jsonl(run / "metrics.jsonl")):
            assert time.monotonic() < deadline and all(a.poll() is None for a in agents), "the run never reached step 6"
            time.sleep(0.05)
        (rank1,) = children(agents[1].pid)
        os.kill(rank1, signal.SIGKILL)
    except BaseException:
        for a in agents:
            a.kill()
        raise
    codes = wait_agents(agents, tmp_path)  # both agents end, neither hangs on the lost rank
    assert codes[0] != 0 and codes[1] != 0, codes
    assert max(r["step"] for r in read_jsonl(run / "metrics.jsonl")) == 6
    assert load_checkpoint(latest_checkpoint(run))["world_size"] == 2

    assert main([*launch, "--resume"]) == 0  # on one process
    assert [r["gen"] for r in read_jsonl(run / "metrics.jsonl")] == [1] * 4 + [2] * 4
    micro.assert_same_run(run, one_process_reference, micro.reference_steps)
