"""`pretrain bench` on CPU: the `tiny` config end to end (our step, HF Llama's step, the arbiter, the JSON).

Speed is not asserted here (benchmarks/ holds the speed targets); what is tested is that both models run the
same step on the same batch from the same weights, and that the report says so.
"""

from __future__ import annotations

import json

import pytest
import torch

from pretrain import cli

pytestmark = pytest.mark.usefixtures("one_torch_thread")


@pytest.mark.slow
def test_bench_tiny_on_cpu_measures_both_models_on_the_same_step(tmp_path, capsys):
    out = tmp_path / "bench.json"
    # A 512-id vocabulary keeps the CPU cost to seconds; the shapes are otherwise the `tiny` preset's.
    code = cli.main(["bench", "--config", "tiny", "--vocab-size", "512", "--micro-batch", "2", "--seq-len", "64", "--steps", "2",
                     "--warmup", "1", "--out", str(out)])
    assert code == 0
    table = capsys.readouterr().out
    assert "ratio ours / HF tokens/s" in table and "arbiter: ok" in table
    report = json.loads(out.read_text())
    s = report["settings"]
    assert (s["config"], s["device"], s["dtype"], s["compile"], s["fused_adamw"]) == ("tiny", "cpu", "fp32", False, False)
    assert s["micro_batch"] * s["accum"] * s["seq_len"] == 128
    ours, hf = report["ours"], report["hf"]
    assert ours["parameters"] == hf["parameters"] > 0
    for r in (ours, hf):
        assert r["tokens_per_s"] > 0 and r["mfu"] is None and r["peak_memory_bytes"] is None
        assert r["tokens_per_s"] == pytest.approx(128 / r["seconds_per_step"])
    assert report["ratio_tokens_per_s"] == pytest.approx(ours["tokens_per_s"] / hf["tokens_per_s"])
    # Same weights, batch and optimizer: the two trajectories agree (the golden reference, inside the bench).
    assert ours["first_loss"] == pytest.approx(hf["first_loss"], rel=1e-5)
    assert ours["last_loss"] == pytest.approx(hf["last_loss"], rel=1e-4)
    assert ours["last_loss"] < ours["first_loss"]  # three AdamW steps on one batch
    assert report["arbiter"]["ok"] and report["arbiter"]["checked"] == 2 + 4 * 6
    # The attention kernel that ran is recorded for both: SDPA's CPU flash kernel with the causal flag.
    for r in (ours, hf):
        assert [(a["kernel"], a["is_causal"], a["explicit_mask"]) for a in r["attention"]] == [("flash-cpu", True, False)]
    assert ours["mode"] == hf["mode"] == "eager"
    assert report["device"]["torch"] == torch.__version__ and report["date"]


def test_bench_rejects_bad_arguments(capsys):
    with pytest.raises(SystemExit) as refused:  # at parse time
        cli.main(["bench", "--config", "tiny", "--steps", "0"])
    assert refused.value.code == 2
    assert "--steps: expected a positive integer, got 0" in capsys.readouterr().err
    # Integers any type accepts, but no machine holds: one line before anything is allocated.
    for option, value in (("--micro-batch", "1e30"), ("--seq-len", "1e12"), ("--vocab-size", "1e15"),
                          ("--accum", "1e18")):
        assert cli.main(["bench", "--config", "tiny", "--device", "cpu", option, value]) == 2
        err = capsys.readouterr().err
        assert len(err.strip().splitlines()) == 1 and "GiB" in err and "Traceback" not in err, (option, err)
    if not torch.cuda.is_available():
        assert cli.main(["bench", "--device", "cuda"]) == 2
        assert "sees no CUDA device" in capsys.readouterr().err


def test_attention_probe_tells_the_causal_flag_from_an_explicit_mask():
    import torch.nn.functional as F

    from pretrain.perf.attention_probe import attention_kernels, describe

    q = torch.randn(1, 2, 16, 8)
    mask = torch.ones(16, 16, dtype=torch.bool).tril()
    flag = attention_kernels(lambda: F.scaled_dot_product_attention(q, q, q, is_causal=True))
    explicit = attention_kernels(lambda: F.scaled_dot_product_attention(q, q, q, attn_mask=mask))
    assert [(a["is_causal"], a["explicit_mask"], a["calls"]) for a in flag] == [(True, False, 1)]
    assert [(a["is_causal"], a["explicit_mask"], a["calls"]) for a in explicit] == [(False, True, 1)]
    assert describe(flag) == "flash-cpu (causal flag)" and describe(explicit) == "flash-cpu (explicit mask)"
    assert attention_kernels(lambda: q @ q.transpose(-1, -2)) == [] and describe([]).startswith("none seen")


def test_the_attention_probe_prints_nothing_of_the_profilers(tmp_path):
    """Kineto's two `USDT ... profiler_start/stop` lines used to come with every bench (a fresh process: the
    profiler reads its log level once)."""
    import os
    import subprocess
    import sys

    from pretrain.cli import __file__ as cli_file

    env = {k: v for k, v in os.environ.items() if k != "KINETO_LOG_LEVEL"}
    code = ("import torch\nfrom pretrain.perf.attention_probe import attention_kernels\n"
            "q = torch.ones(1, 1, 4, 8)\n"
            "calls = attention_kernels(lambda: torch.nn.functional.scaled_dot_product_attention(q, q, q, is_causal=True))\n"
            "assert calls and calls[0]['is_causal'] is True, calls\n")
    proc = subprocess.run([sys.executable, "-c", code], env=env, capture_output=True, text=True, timeout=300,
                          cwd=os.path.dirname(os.path.dirname(cli_file)))
    assert proc.returncode == 0, proc.stderr
    assert proc.stderr == "", proc.stderr
