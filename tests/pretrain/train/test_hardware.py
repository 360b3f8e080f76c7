"""The CPU thread default (`pretrain.train.hardware.cpu_threads`): the cores this process may use, less one."""

from __future__ import annotations

import os

import pytest

from pretrain.train import hardware


@pytest.mark.parametrize(("cores", "processes", "threads"), [(1, 1, 1), (2, 1, 1), (16, 1, 15), (16, 2, 7), (2, 2, 1)])
def test_the_default_leaves_a_core_and_shares_the_rest_among_the_runs_processes(monkeypatch, cores, processes,
                                                                                 threads):
    monkeypatch.setattr(os, "sched_getaffinity", lambda pid: set(range(cores)), raising=False)
    assert hardware.cpu_threads(processes) == threads


def test_a_run_without_threads_gets_the_default(micro, synthetic_shards, tmp_path, monkeypatch):
    import torch

    from pretrain.train import trainer as train
    from pretrain.train.data import open_dataset
    from pretrain.train.distributed import Runtime

    before = torch.get_num_threads()
    default = 1 if before != 1 else 2  # a count the process does not have yet, so the test can fail
    monkeypatch.setattr(train, "cpu_threads", lambda processes=1: default)
    cfg = micro.config(synthetic_shards, tmp_path / "run", "train.threads=0")
    try:
        train.Trainer(cfg, open_dataset(synthetic_shards), Runtime(device=torch.device("cpu"), autocast_dtype=None))
        assert torch.get_num_threads() == default
    finally:
        torch.set_num_threads(before)
