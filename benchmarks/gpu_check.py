"""The stages of the one-shot GPU check (``benchmarks/gpu_check.sh`` runs each in its own process, under its
own time limit): ``python3 benchmarks/gpu_check.py STAGE [ARG]``.

Stages, in order of priority, each writing its file in ``RESULTS_DIR`` atomically as soon as it has measured
(a later failure, kill or timeout loses nothing earlier):

    env              environment.json  GPU, driver, torch/CUDA/cuDNN/transformers, the measured matmul rate
    ours [eager]     ours.json         our step: tokens/s, MFU, peak memory, first (compiling) step, attention;
                                       compiled, falling back to eager (and saying so) if compilation fails;
                                       `eager` measures it uncompiled at once (the script's fallback when the
                                       compiled stage wrote nothing)
    hf MODE          hf.json           HF LlamaForCausalLM's step in MODE (eager, regional), one entry per mode
    ab NAME          ab.json           one A/B variant of our step (or HF whole-model compiled), one entry each;
                                       mb2x (micro-batch 32) is the only source of the "fits 80 GB" figure;
                                       muon: our step with Muon instead of AdamW (step time, peak memory)
    smoke            smoke.json        pretrain launch (supervisor, checkpoint), --resume, pretrain eval
    summary          summary.json      ours / fastest HF mode, micro-batch 32's peak memory, the table printed last

Every measuring stage records the inductor cache folder it compiled in (``TORCHINDUCTOR_CACHE_DIR``, one per
stage: the script sets it).

Settings come from the environment (the shell script sets them): GPU_CHECK_CONFIG (bangla-0.4b; tiny for the
CPU dress rehearsal), GPU_CHECK_DEVICE (auto), GPU_CHECK_MICRO_BATCH, GPU_CHECK_SEQ_LEN (0: the preset's
context), GPU_CHECK_STEPS, GPU_CHECK_WARMUP, GPU_CHECK_VOCAB, GPU_CHECK_COMPILE_BACKEND (inductor; eager
traces with dynamo only), GPU_CHECK_WORK (scratch folder for the smoke's shards and run), GIT_COMMIT.
"""

from __future__ import annotations

import datetime
import json
import os
import platform
import resource
import shutil
import subprocess
import sys
import tempfile
import time
from dataclasses import asdict, replace
from pathlib import Path
from typing import Any

import torch

from common.fileio import write_json

ROOT = Path(__file__).resolve().parents[1]
FILES = {"env": "environment.json", "ours": "ours.json", "hf": "hf.json", "smoke": "smoke.json", "ab": "ab.json",
         "summary": "summary.json"}
# The A/B variants: what each changes in our step's settings (or HF compiled whole; not in the script's
# default list: it is the slowest to compile and loses the flash kernel to an explicit mask).
AB_VARIANTS = ("mb2x", "muon", "cudnn", "flash", "head128", "hf_whole")
FITS_BYTES = 80 * 10**9  # an 80 GB GPU (H100): micro-batch 32's peak must stay below it
NVIDIA_SMI_S = 5  # each nvidia-smi call's limit, well inside the env stage's


def _now() -> str:
    return datetime.datetime.now(datetime.UTC).isoformat(timespec="seconds")


def _env(name: str, default: str) -> str:
    return os.environ.get(name) or default


def results_dir() -> Path:
    out = os.environ.get("RESULTS_DIR")
    if not out:
        raise SystemExit("gpu_check: RESULTS_DIR is not set")
    return Path(out)


def _read(name: str) -> dict[str, Any] | None:
    path = results_dir() / FILES[name]
    return json.loads(path.read_text(encoding="utf-8")) if path.exists() else None


def _write(name: str, data: dict[str, Any]) -> Path:
    path = results_dir() / FILES[name]
    write_json(path, data)
    print(f"gpu_check: wrote {path.name}", flush=True)
    return path


def settings(measuring: bool = True):
    """The benchmark settings every stage shares, from the environment. A measuring stage refuses a model
    larger than `tiny` without a GPU at once (it would only run into its time limit)."""
    from pretrain.config import PRESETS, model_config
    from pretrain.perf.bench import BenchSettings

    config = _env("GPU_CHECK_CONFIG", "bangla-0.4b")
    device = _env("GPU_CHECK_DEVICE", "auto")
    if device == "auto":
        device = "cuda" if torch.cuda.is_available() else "cpu"
    on_gpu = torch.device(device).type == "cuda"
    vocab = int(_env("GPU_CHECK_VOCAB", "50257"))
    if measuring and config != "tiny" and not on_gpu:
        raise SystemExit(f"gpu_check: {config} needs a GPU; torch {torch.__version__} sees none (device {device})")
    return BenchSettings(
        config=config, vocab_size=vocab,
        micro_batch=int(_env("GPU_CHECK_MICRO_BATCH", str(PRESETS[config].data["micro_batch"]))), accum=1,
        seq_len=int(_env("GPU_CHECK_SEQ_LEN", "0")) or model_config(config, vocab).block_size,
        steps=int(_env("GPU_CHECK_STEPS", "10")), warmup=int(_env("GPU_CHECK_WARMUP", "3")), device=device,
        dtype="bf16" if on_gpu else "fp32", compile=True, compile_mode="default", fused_adamw=on_gpu,
        compile_backend=_env("GPU_CHECK_COMPILE_BACKEND", "inductor" if on_gpu else "eager"))


# ------------------------------------------------------------------------------------------------ env


def _matmul_rate(device: torch.device) -> dict[str, Any]:
    """TFLOP/s of a large square matmul on random data (bf16 on a GPU, fp32 on a CPU), median of 10."""
    n, dtype = (8192, torch.bfloat16) if device.type == "cuda" else (512, torch.float32)
    a, b = (torch.randn(n, n, device=device, dtype=dtype) for _ in range(2))
    times = []
    for i in range(13):
        if device.type == "cuda":
            start, end = torch.cuda.Event(enable_timing=True), torch.cuda.Event(enable_timing=True)
            start.record()
            a @ b
            end.record()
            end.synchronize()
            seconds = start.elapsed_time(end) / 1000
        else:
            t0 = time.perf_counter()
            a @ b
            seconds = time.perf_counter() - t0
        if i >= 3:  # warm-up: handle creation, kernel selection
            times.append(seconds)
    median = sorted(times)[len(times) // 2]
    return {"n": n, "dtype": str(dtype).removeprefix("torch."), "median_s": median, "tflops": 2 * n**3 / median / 1e12}


def _run_tool(argv: list[str]) -> str:
    """A tool's stdout, or why there is none; never longer than NVIDIA_SMI_S (a wedged driver hangs it)."""
    try:
        return subprocess.run(argv, capture_output=True, text=True, timeout=NVIDIA_SMI_S).stdout.strip()
    except subprocess.TimeoutExpired:
        return f"timed out after {NVIDIA_SMI_S} s"
    except OSError as e:
        return f"{type(e).__name__}: {e}"


def _nvidia_smi() -> dict[str, Any]:
    if not shutil.which("nvidia-smi"):
        return {"available": False}
    return {"available": True,
            "query": _run_tool(["nvidia-smi", "--query-gpu=name,driver_version,memory.total,clocks.max.sm,"
                                "power.limit", "--format=csv,noheader"]),
            "text": _run_tool(["nvidia-smi"])}


def stage_env() -> None:
    """Written four times, growing: what needs no device at once, then the device (CUDA initialised,
    transformers imported for its version), then nvidia-smi, then the matmul rate; a limit reached at any
    point leaves what came before it on disk."""
    from pretrain.perf.bench import device_info
    from pretrain.train.hardware import peak_flops

    s = settings(measuring=False)
    info: dict[str, Any] = {"date": _now(), "commit": os.environ.get("GIT_COMMIT") or "unknown",
                            "python": sys.version, "executable": sys.executable, "platform": platform.platform(),
                            "torch": torch.__version__, "settings": asdict(s)}
    _write("env", info)
    device = torch.device(s.device)
    info.update(device=device_info(device), cudnn_enabled=torch.backends.cudnn.enabled,
                peak_flops_datasheet=peak_flops(device))
    _write("env", info)
    info["nvidia_smi"] = _nvidia_smi()
    _write("env", info)
    info["matmul"] = _matmul_rate(device)
    _write("env", info)


# ------------------------------------------------------------------------------------------------ steps


def _error(e: BaseException) -> str:
    return f"{type(e).__name__}: {(str(e).splitlines() or [''])[0][:300]}"


def _cache() -> str | None:
    return os.environ.get("TORCHINDUCTOR_CACHE_DIR")


def stage_ours(mode: str = "") -> None:
    """Our step compiled; if compilation fails (inductor, Triton, a backend), the same step eager, with the
    error recorded, so the ratio still comes back. ``eager``: uncompiled at once (the script's fallback
    after a compiled stage that wrote nothing: hung or crashed)."""
    from pretrain.perf.bench import measure_ours

    if mode not in ("", "eager"):
        raise SystemExit(f"gpu_check: ours {mode!r}: expected no argument or 'eager'")
    s = settings()
    record: dict[str, Any] = {"date": _now(), "inductor_cache": _cache(), "fell_back": False}
    if mode == "eager":
        record.update(fell_back=True, compile_error="the compiled stage wrote nothing (see stages.tsv, log.txt)")
        s = replace(s, compile=False)
    try:
        ours, arbiter, flops = measure_ours(s)
    except Exception as e:  # any compiler failure; the eager step below is the answer then
        if not s.compile:
            raise
        print(f"gpu_check: compiling our step failed ({_error(e)}); measuring it eager", flush=True)
        record.update(fell_back=True, compile_error=_error(e))
        s = replace(s, compile=False)
        ours, arbiter, flops = measure_ours(s)
    _write("ours", {**record, "settings": asdict(s), "flops_per_token": flops, "result": asdict(ours),
                    "arbiter": arbiter})


def stage_hf(mode: str) -> None:
    from pretrain.perf.bench import measure_hf

    s = settings()
    result = measure_hf(s, mode)
    data = _read("hf") or {"settings": asdict(s), "modes": {}}
    data["modes"][mode] = {"date": _now(), "inductor_cache": _cache(), **asdict(result)}
    _write("hf", data)


def _variant(name: str):
    s = settings()
    if name == "mb2x":
        return replace(s, micro_batch=2 * s.micro_batch)
    if name == "muon":  # Muon on the blocks' matrices, AdamW on the rest, against ours (AdamW alone)
        return replace(s, optimizer="muon")
    if name in ("cudnn", "flash"):
        return replace(s, sdpa_backend=name)
    if name == "head128":  # bangla-0.4b: 8 heads of 128 instead of 16 of 64
        from pretrain.config import model_config

        cfg = model_config(s.config, s.vocab_size)
        return replace(s, n_head=max(1, cfg.n_embd // 128))
    if name == "hf_whole":
        return s
    raise SystemExit(f"gpu_check: unknown A/B {name!r}; known: {', '.join(AB_VARIANTS)}")


def stage_ab(name: str) -> None:
    from pretrain.perf.bench import measure_hf, measure_ours

    s = _variant(name)
    entry: dict[str, Any] = {"date": _now(), "settings": asdict(s), "inductor_cache": _cache()}
    try:
        result = measure_hf(s, "whole") if name == "hf_whole" else measure_ours(s)[0]
        entry["result"] = asdict(result)
    except Exception as e:  # an answer too: out of memory, a backend that cannot run these shapes
        entry["error"] = _error(e)
    data = _read("ab") or {"variants": {}}
    data["variants"][name] = entry
    _write("ab", data)


# ------------------------------------------------------------------------------------------------ smoke

# Per preset: the smoke's run overrides. bangla-0.4b keeps its width, context and micro-batch but only 4 of
# its 24 layers, so checkpoints are ~2 GB and the minute goes to the loader, checkpoints, supervisor and eval.
SMOKE = {
    "bangla-0.4b": dict(first_steps=20, resumed_steps=30, eval_tokens=16384, train_chars=300_000, val_chars=60_000,
                        sets=["model.n_layer=4", "train.global_batch_tokens=65536", "train.checkpoint_interval=10",
                              "train.eval_interval=10", "data.eval_tokens=16384", "train.preflight_steps=1"]),
    "tiny": dict(first_steps=4, resumed_steps=6, eval_tokens=1024, train_chars=30_000, val_chars=8_000,
                 sets=["model.n_layer=2", "train.global_batch_tokens=1024", "data.micro_batch=4",
                       "train.checkpoint_interval=2", "train.eval_interval=2", "data.eval_tokens=512",
                       "train.preflight_steps=1", "train.threads=1"]),  # TensorBoard on, as a real launch
}


# On a CPU the launch's memory estimate (tensors + one micro-batch's activations + the process's resident
# memory beyond its tensors, sampled once after the preflight's burst) is compared with the launch's peak RSS.
# With glibc's default malloc, RSS also holds freed memory the allocator keeps: its mmap threshold rises to
# the largest block freed (up to 32 MiB), so freed activations stay in the heap, and each thread allocating
# gets an arena of its own. How much is kept when the estimate samples it, and at the peak, depends on the
# order in which the threads (the trainer's, TensorBoard's writer) allocate, so on a loaded machine the two
# drifted apart: 1,040 MB peak against an 830 MB estimate (issue 19). Measured on the tiny smoke launch
# (`/proc/PID/status` every 50 ms): VmRSS swung by 250-390 MiB within single steps (480-726, 505-798,
# 406-800 MiB) and the estimate sampled 478 MiB beyond the tensors. A fixed threshold (which also turns the
# dynamic one off) and one arena give freed blocks back at once: RSS is then the live memory the estimate
# counts (349 MiB beyond the tensors; peak 737 MiB against 692 estimated). GPU runs are untouched: there the
# estimate is the device's.
CPU_MALLOC = {"MALLOC_MMAP_THRESHOLD_": "131072", "MALLOC_ARENA_MAX": "1"}


def _run(name: str, args: list[str], record: dict[str, Any], env: dict[str, str]) -> int:
    """``python -m pretrain ARGS`` in ``env``, its exit code and time recorded in ``record`` and smoke.json at once."""
    cmd = [sys.executable, "-m", "pretrain", *args]
    print(f"gpu_check smoke: {' '.join(cmd)}", flush=True)
    t0 = time.perf_counter()
    proc = subprocess.run(cmd, cwd=ROOT, capture_output=True, text=True, env=env)
    sys.stderr.write(proc.stderr[-4000:])
    record["commands"].append({"name": name, "argv": args, "exit_code": proc.returncode,
                               "seconds": round(time.perf_counter() - t0, 2), "stderr_tail": proc.stderr[-1500:]})
    _write("smoke", record)
    return proc.returncode


def stage_smoke() -> None:
    from pretrain.train.checkpoint import step_checkpoints
    from pretrain.train.sample_shards import SAMPLE_SOURCES, write_shard_set

    s = settings()
    plan = SMOKE[s.config]
    work = Path(os.environ.get("GPU_CHECK_WORK") or tempfile.mkdtemp(prefix="gpu_check_"))
    shards, run = work / "shards", work / "run"
    t0 = time.perf_counter()
    write_shard_set(shards, SAMPLE_SOURCES, train_chars=plan["train_chars"], val_chars=plan["val_chars"])
    record: dict[str, Any] = {"date": _now(), "config": s.config, "device": s.device, "sets": plan["sets"],
                              "shards_seconds": round(time.perf_counter() - t0, 2),
                              "shards": json.loads((shards / "manifest.json").read_text()), "commands": [], "ok": False}
    _write("smoke", record)
    env = {**os.environ, **(CPU_MALLOC if s.device == "cpu" else {})}
    common = ["--config", s.config, "--data", str(shards), "--out", str(run), "--device", s.device, "--no-eval"]
    for item in plan["sets"]:
        common += ["--set", item]
    codes = [_run("launch", ["launch", *common, "--max-steps", str(plan["first_steps"])], record, env)]
    record["checkpoints_after_launch"] = [p.name for p in step_checkpoints(run)]
    # The launch's memory: the preflight's estimate beside what was measured (the launch is this stage's
    # first child, so the children's peak RSS is its own, or its smaller supervisor's; on a GPU the estimate
    # is the device's and the burst's peak_memory_bytes is the figure to compare).
    preflight = json.loads((run / "preflight.json").read_text()) if (run / "preflight.json").exists() else {}
    record["launch_memory"] = {"estimate": preflight.get("memory"),
                               "burst_peak_memory_bytes": preflight.get("burst", {}).get("peak_memory_bytes"),
                               "peak_rss_bytes": resource.getrusage(resource.RUSAGE_CHILDREN).ru_maxrss * 1024}
    codes.append(_run("resume", ["launch", *common, "--resume", "--replan-schedule", "--max-steps", str(plan["resumed_steps"])], record, env))
    record["checkpoints_after_resume"] = [p.name for p in step_checkpoints(run)]
    codes.append(_run("eval", ["eval", "--run", str(run), "--max-tokens", str(plan["eval_tokens"]),
                               "--device", s.device], record, env))
    metrics = [json.loads(line) for line in (run / "metrics.jsonl").read_text().splitlines() if line.strip()]
    evaluation = json.loads((run / "eval.json").read_text()) if (run / "eval.json").exists() else {}
    record.update(
        metrics_steps=sorted({m["step"] for m in metrics}), last_metrics=metrics[-1] if metrics else None,
        supervisor_decisions=sum(1 for _ in (run / "supervisor.jsonl").open()) if (run / "supervisor.jsonl").exists() else 0,
        tensorboard_files=sum(1 for p in (run / "tb").rglob("*") if p.is_file()) if (run / "tb").is_dir() else 0,
        eval_mean=evaluation.get("mean"), eval_step=evaluation.get("step"),
        ok=codes == [0, 0, 0] and bool(metrics) and metrics[-1]["step"] == plan["resumed_steps"]
        and evaluation.get("step") == plan["resumed_steps"])
    _write("smoke", record)


# ------------------------------------------------------------------------------------------------ summary


def _fmt(value: float | None, spec: str, scale: float = 1.0, unit: str = "") -> str:
    return "n/a" if value is None else f"{value * scale:{spec}}{unit}"


def stage_summary() -> None:
    from pretrain.perf.attention_probe import describe

    env, ours, hf, smoke, ab = (_read(n) for n in ("env", "ours", "hf", "smoke", "ab"))
    modes = (hf or {}).get("modes", {})
    mb32 = ((ab or {}).get("variants") or {}).get("mb2x", {})
    mb32_peak = (mb32.get("result") or {}).get("peak_memory_bytes")
    muon = (((ab or {}).get("variants") or {}).get("muon") or {}).get("result")
    fastest = max(modes, key=lambda m: modes[m]["tokens_per_s"]) if modes else None
    ratio = (ours["result"]["tokens_per_s"] / modes[fastest]["tokens_per_s"]) if ours and fastest else None
    summary = {"date": _now(), "commit": (env or {}).get("commit", os.environ.get("GIT_COMMIT") or "unknown"),
               "files": {n: (results_dir() / f).exists() for n, f in FILES.items() if n != "summary"},
               "hf_fastest_mode": fastest, "ratio_ours_over_fastest_hf": ratio,
               "ratios_ours_over_hf": {m: ours["result"]["tokens_per_s"] / r["tokens_per_s"] for m, r in modes.items()}
               if ours else {},
               "ours_fell_back_to_eager": (ours or {}).get("fell_back"),
               "mb2x_micro_batch": (mb32.get("settings") or {}).get("micro_batch"),
               "mb2x_peak_memory_bytes": mb32_peak,
               "mb2x_fits_80GB": None if mb32_peak is None else mb32_peak < FITS_BYTES,
               "muon_over_adamw_tokens_per_s": muon["tokens_per_s"] / ours["result"]["tokens_per_s"]
               if muon and ours else None,
               "smoke_ok": (smoke or {}).get("ok")}
    _write("summary", summary)

    lines = [f"GPU check, commit {summary['commit']}"]
    if env:
        d = env["device"]
        lines.append(f"  {d.get('name')}; torch {d['torch']}, CUDA {d.get('cuda')}, cuDNN {d.get('cudnn')}, "
                     f"transformers {d.get('transformers')}; matmul {env['matmul']['dtype']} "
                     f"{env['matmul']['tflops']:.0f} TFLOP/s measured")
    rows = ([("ours eager!" if ours["fell_back"] else "ours", ours["result"])] if ours else []) + [(f"HF {m}", r) for m, r in modes.items()]
    rows += [(f"A/B {n}", v["result"]) for n, v in ((ab or {}).get("variants") or {}).items() if "result" in v]
    lines.append(f"  {'what':<14}{'tokens/s':>12}{'MFU':>8}{'peak mem':>11}{'1st step':>10}  attention")
    for name, r in rows:
        lines.append(f"  {name:<14}{r['tokens_per_s']:>12,.0f}{_fmt(r['mfu'], '.1f', 100, '%'):>8}"
                     f"{_fmt(r['peak_memory_bytes'], '.1f', 2**-30, 'G'):>11}{r['first_step_s']:>9.1f}s  "
                     f"{describe(r['attention'])}")
    for n, v in ((ab or {}).get("variants") or {}).items():
        if "error" in v:
            lines.append(f"  A/B {n}: {v['error']}")
    lines.append(f"  ours / fastest HF ({fastest}): {_fmt(ratio, '.2f', unit='x')}")
    if ours:
        lines.append(f"  arbiter: {'ok' if ours['arbiter']['ok'] else 'FAILED'}")
        if ours["fell_back"]:
            lines.append(f"  ours fell back to eager: {ours['compile_error']}")
    if mb32:
        fits = summary["mb2x_fits_80GB"]
        lines.append(f"  micro-batch {summary['mb2x_micro_batch']}: peak {_fmt(mb32_peak, '.1f', 1e-9, ' GB')}, "
                     f"{'n/a' if fits is None else 'fits' if fits else 'does NOT fit'} in 80 GB"
                     + (f" ({mb32['error']})" if "error" in mb32 else ""))
    if summary["muon_over_adamw_tokens_per_s"] is not None:
        lines.append(f"  Muon / AdamW tokens/s: {summary['muon_over_adamw_tokens_per_s']:.2f}x; peak memory "
                     f"{_fmt(muon['peak_memory_bytes'], '.1f', 2**-30, 'G')} against "
                     f"{_fmt(ours['result']['peak_memory_bytes'], '.1f', 2**-30, 'G')}")
    lines.append(f"  smoke (launch + supervisor, checkpoint, --resume, eval): "
                 f"{'ok' if summary['smoke_ok'] else 'FAILED or not run'}")
    missing = [f for n, f in FILES.items() if n != "summary" and not summary["files"][n]]
    if missing:
        lines.append(f"  missing (failed, timed out or skipped; see log.txt): {', '.join(missing)}")
    print("\n".join(lines), flush=True)


STAGES = {"env": stage_env, "ours": stage_ours, "hf": stage_hf, "smoke": stage_smoke, "ab": stage_ab,
          "summary": stage_summary}


def main(argv: list[str]) -> int:
    if not argv or argv[0] not in STAGES:
        print(f"usage: gpu_check.py {{{','.join(STAGES)}}} [ARG]", file=sys.stderr)
        return 2
    results_dir().mkdir(parents=True, exist_ok=True)
    STAGES[argv[0]](*argv[1:])
    return 0


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))
