"""``pretrain launch`` under a real Slurm (``scripts/slurm-local.sh``): ``sbatch scripts/slurm-pretrain.sbatch``
runs ``srun torchrun`` as 2 tasks, one per node, and the run equals the one-process run at the same global batch,
bit for bit (``test_multinode.py`` says why the tolerance is zero)."""

from __future__ import annotations

import os
import socket
import subprocess
import sys
from pathlib import Path

import pytest

from common.fileio import read_jsonl
from pretrain.train.checkpoint import latest_checkpoint, load_checkpoint

ROOT = Path(__file__).resolve().parents[3]


@pytest.mark.slow
def test_sbatch_srun_torchrun_on_two_nodes_equals_one_process(micro, synthetic_shards, one_process_reference,
                                                              slurm_cluster, tmp_path):
    run, log = tmp_path / "run", tmp_path / "job.log"
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        port = s.getsockname()[1]
    # The job gets this environment (sbatch exports it): torchrun of this interpreter's environment on PATH.
    env = os.environ | slurm_cluster.env | {"RDZV_PORT": str(port),
                                            "PATH": f"{Path(sys.executable).parent}{os.pathsep}{os.environ['PATH']}"}
    argv = ["sbatch", "--parsable", f"--partition={slurm_cluster.partition}", f"--output={log}",
            str(ROOT / "scripts" / "slurm-pretrain.sbatch"),
            *micro.args(synthetic_shards, run, micro.reference_steps, *micro.reference_args)]
    job = subprocess.run(argv, cwd=tmp_path, env=env, capture_output=True, text=True, check=True).stdout.strip()
    state = slurm_cluster.wait_job(job, timeout=600)
    assert state == "COMPLETED", (state, log.read_text()[-3000:] if log.exists() else "")
    assert len(read_jsonl(run / "metrics.jsonl")) == micro.reference_steps  # only rank 0 writes
    assert load_checkpoint(latest_checkpoint(run))["world_size"] == 2
    micro.assert_same_run(run, one_process_reference, micro.reference_steps)
