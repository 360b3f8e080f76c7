"""The CPU dress rehearsal of the one-shot GPU check: `benchmarks/gpu_check.sh` end to end with `tiny` on
CPU, through the same script and code path as on the GPU machine, where `datasets` and `datasketch` are not
installed (here they are made unimportable), checking every file it writes; and a kill right after the
first measurement leaves that measurement on disk.
"""

from __future__ import annotations

import csv
import json
import os
import signal
import subprocess
import sys
import time
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parents[2]
SCRIPT = ROOT / "benchmarks" / "gpu_check.sh"
COMMIT = "0123456789abcdef0123456789abcdef01234567"
FILES = {"environment.json", "ours.json", "hf.json", "smoke.json", "ab.json", "summary.json", "stages.tsv", "log.txt"}


def rehearsal_env(tmp_path: Path, results: Path) -> dict[str, str]:
    """The GPU machine's conditions on CPU: no datasets/datasketch, no network, RESULTS_DIR and the commit
    from the caller; `tiny` at a size that keeps each stage to seconds."""
    blocker = tmp_path / "unimportable"
    for name in ("datasets", "datasketch"):
        (blocker / name).mkdir(parents=True)
        (blocker / name / "__init__.py").write_text(f"raise ImportError('{name} is not installed on the GPU machine')\n")
    return {**os.environ, "PYTHONPATH": str(blocker), "PYTHON": sys.executable, "RESULTS_DIR": str(results),
            "GIT_COMMIT": COMMIT, "TMPDIR": str(tmp_path), "HF_HUB_OFFLINE": "1", "OMP_NUM_THREADS": "1",
            "GPU_CHECK_CONFIG": "tiny", "GPU_CHECK_DEVICE": "cpu", "GPU_CHECK_MICRO_BATCH": "2",
            "GPU_CHECK_SEQ_LEN": "64", "GPU_CHECK_STEPS": "2", "GPU_CHECK_WARMUP": "1", "GPU_CHECK_AB": "mb2x",
            # Generous on a loaded CI machine; the GPU budgets are the script's defaults.
            "GPU_CHECK_TOTAL_S": "900", "GPU_CHECK_SMOKE_S": "400", "GPU_CHECK_OURS_S": "200",
            "GPU_CHECK_HF_EAGER_S": "200", "GPU_CHECK_HF_REGIONAL_S": "200", "GPU_CHECK_AB_S": "200"}


def test_the_blocked_packages_are_really_unimportable(tmp_path):
    env = rehearsal_env(tmp_path, tmp_path / "results")
    for name in ("datasets", "datasketch"):
        proc = subprocess.run([sys.executable, "-c", f"import {name}"], env=env, capture_output=True, text=True)
        assert proc.returncode != 0 and "not installed on the GPU machine" in proc.stderr


@pytest.mark.slow
def test_dress_rehearsal_writes_every_file_and_the_table(tmp_path):
    results = tmp_path / "results"
    proc = subprocess.run(["bash", str(SCRIPT)], env=rehearsal_env(tmp_path, results), capture_output=True,
                          text=True, timeout=1500)
    assert proc.returncode == 0, proc.stdout[-6000:]
    assert {p.name for p in results.iterdir()} == FILES  # at most 8 files, no folders
    stages = list(csv.DictReader((results / "stages.tsv").open(), delimiter="\t"))
    assert [s["stage"] for s in stages] == ["env", "ours", "hf eager", "hf regional", "smoke", "ab mb2x"]
    assert all(s["exit_code"] == "0" for s in stages), stages

    env = json.loads((results / "environment.json").read_text())
    assert env["commit"] == COMMIT and env["device"]["device"] == "cpu" and env["matmul"]["tflops"] > 0
    assert env["device"]["transformers"] and env["device"]["torch"]

    ours = json.loads((results / "ours.json").read_text())
    r = ours["result"]
    assert r["tokens_per_s"] > 0 and r["mode"] == "compiled per block" and ours["arbiter"]["ok"]
    assert ours["settings"]["config"] == "tiny" and ours["settings"]["compile_backend"] == "eager"
    # Our attention: the fused kernel with the causal flag, never an explicit mask.
    assert r["attention"] and all(a["is_causal"] is True and not a["explicit_mask"] for a in r["attention"])
    assert {a["kernel"] for a in r["attention"]} == {"flash-cpu"}

    hf = json.loads((results / "hf.json").read_text())
    assert set(hf["modes"]) == {"eager", "regional"}
    for mode in hf["modes"].values():
        assert mode["tokens_per_s"] > 0 and mode["attention"], mode  # the kernel that ran is recorded
        assert mode["parameters"] == r["parameters"]
        assert mode["first_loss"] == pytest.approx(r["first_loss"], rel=1e-3)  # same weights, same batch

    summary = json.loads((results / "summary.json").read_text())
    fastest = max(hf["modes"], key=lambda m: hf["modes"][m]["tokens_per_s"])
    assert summary["hf_fastest_mode"] == fastest and summary["commit"] == COMMIT
    assert summary["ratio_ours_over_fastest_hf"] == pytest.approx(r["tokens_per_s"] / hf["modes"][fastest]["tokens_per_s"])
    assert summary["ratio_ours_over_fastest_hf"] == min(summary["ratios_ours_over_hf"].values())

    smoke = json.loads((results / "smoke.json").read_text())
    assert smoke["ok"], smoke
    assert [(c["name"], c["exit_code"]) for c in smoke["commands"]] == [("launch", 0), ("resume", 0), ("eval", 0)]
    assert smoke["checkpoints_after_launch"] and smoke["supervisor_decisions"] > 0
    assert smoke["eval_mean"]["model_loss"] < smoke["eval_mean"]["random_init_loss"]

    ab = json.loads((results / "ab.json").read_text())
    assert ab["variants"]["mb2x"]["settings"]["micro_batch"] == 2 * ours["settings"]["micro_batch"]
    assert ab["variants"]["mb2x"]["result"]["tokens_per_s"] > 0

    # The table comes last, in the output and in log.txt.
    tail = proc.stdout.rstrip().splitlines()[-12:]
    assert any(line.startswith("GPU check, commit " + COMMIT) for line in tail)
    assert any(f"ours / fastest HF ({fastest})" in line for line in tail)
    assert tail[-1].strip().startswith("smoke") and "ok" in tail[-1]
    assert "ours / fastest HF" in (results / "log.txt").read_text()


def _kill_session(sid: int) -> None:
    """SIGKILL every process of session ``sid`` (the script, its stages under `timeout`, their children)."""
    for entry in Path("/proc").iterdir():
        if entry.name.isdigit():
            try:
                if os.getsid(int(entry.name)) == sid:
                    os.kill(int(entry.name), signal.SIGKILL)
            except (ProcessLookupError, PermissionError):
                pass


def test_a_kill_after_the_first_measurement_leaves_it_on_disk(tmp_path):
    results = tmp_path / "results"
    proc = subprocess.Popen(["bash", str(SCRIPT)], env=rehearsal_env(tmp_path, results), start_new_session=True,
                            stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL)
    first = results / "environment.json"
    deadline = time.monotonic() + 600
    try:
        while not first.exists():  # written atomically: it appears complete or not at all
            assert proc.poll() is None, f"gpu_check.sh ended (exit {proc.returncode}) before writing {first.name}"
            assert time.monotonic() < deadline, f"no {first.name} after 600 s"
            time.sleep(0.05)
    finally:
        _kill_session(proc.pid)
        proc.wait()
    assert proc.returncode == -signal.SIGKILL
    env = json.loads(first.read_text())
    assert env["commit"] == COMMIT and env["matmul"]["tflops"] > 0
    # Whatever other result was published before the kill is whole too.
    for path in results.iterdir():
        if path.name in FILES and path.suffix == ".json":
            json.loads(path.read_text())


def _gpu_check_module():
    import importlib.util

    spec = importlib.util.spec_from_file_location("gpu_check", ROOT / "benchmarks" / "gpu_check.py")
    module = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(module)
    return module


@pytest.mark.parametrize("config", ["bangla-0.4b", "tiny"])
def test_the_smoke_runs_are_valid_configs(config, capsys):
    """The GPU smoke's bangla-0.4b overrides never run on CPU: their plan must at least be a valid one."""
    from pretrain import cli

    smoke = _gpu_check_module().SMOKE[config]
    args = ["launch", "--config", config, "--dry-run", "--max-steps", str(smoke["first_steps"])]
    for item in smoke["sets"]:
        args += ["--set", item]
    assert cli.main(args) == 0, capsys.readouterr().err
    out = capsys.readouterr().out
    assert f"steps       {smoke['first_steps']} of" in out
    if config == "bangla-0.4b":
        assert "65,536 tokens (16 sequences x 2 accumulation" in out  # gradient accumulation runs on the GPU too
