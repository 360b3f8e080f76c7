"""The pure parts of benchmarks/bench_recipe.py: the interpolated token ratio, the phases' choices, and a
resumed benchmark running only what is missing. No training: a fake runner writes made-up curves."""

from __future__ import annotations

import math
import sys
from dataclasses import asdict
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parents[3]
sys.path.insert(0, str(ROOT / "benchmarks"))
import bench_recipe as br  # noqa: E402

from common.fileio import write_json  # noqa: E402

SIZES = (br.Size("s", 64, 2), br.Size("l", 128, 2))
SEEDS = (0, 1, 2)
ADAMW, MUON = (0.002, 0.004, 0.008), ((0.005, 0.01, 0.02), (0.005, 0.01, 0.02))
CANDIDATES = {"good": ("optim.schedule=wsd",), "bad": ("model.qk_norm=true",)}


def test_tokens_to_reach_interpolates_the_first_crossing():
    tokens = [0, 100, 200, 300]
    assert br.tokens_to_reach(tokens, [3.0, 2.0, 1.0, 1.2], 1.5) == pytest.approx(150.0)
    assert br.tokens_to_reach(tokens, [3.0, 2.0, 1.0, 0.5], 2.0) == pytest.approx(100.0)  # reached at a point
    assert br.tokens_to_reach(tokens, [3.0, 2.0, 1.0, 0.5], 0.4) is None  # never
    assert br.tokens_to_reach(tokens, [1.0, 0.9, 0.8, 0.7], 2.0) == 0.0


def _final(spec: br.Spec) -> float:
    """Made-up final bits per byte: AdamW best at 0.004 for the small size and 0.002 for the large one (lr ∝
    1/width), Muon best at 0.01 for both and 0.2 lower; seeds add a little noise; the candidate "good" 0.05
    lower, "bad" 0.05 higher."""
    if spec.optimizer == "adamw":
        best = 0.004 * 64 / spec.size.n_embd
        value = 2.0 + (math.log2(spec.lr / best)) ** 2 * 0.1
    else:
        value = 1.8 + (math.log2(spec.muon_lr / 0.01)) ** 2 * 0.1
    value += {"good": -0.05, "bad": 0.05}.get(spec.label, 0.0) + 0.001 * spec.seed
    return value - (0.1 if spec.size.name == "l" else 0.0)


class FakeRunner:
    def __init__(self):
        self.ran: list[str] = []

    def __call__(self, spec: br.Spec, runs_dir: Path) -> str:
        self.ran.append(spec.name)
        end = _final(spec)
        result = br.RunResult(spec.name, br._spec_dict(spec), spec.size.n_embd ** 2, 4, tokens=[0, 2048, 4096],
                              bpb={lang: [4.0, (4.0 + end) / 2, end] for lang in br.LANGS}, ms_per_step=10.0)
        write_json(runs_dir / f"{spec.name}.json", asdict(result))
        return spec.name


def _run_all(runs: Path, runner: FakeRunner) -> list[int]:
    phases = []
    while True:
        phase, specs = br.plan(br.load_results(runs), SIZES, SEEDS, ADAMW, MUON, CANDIDATES)
        if not specs:
            return phases
        phases.append(phase)
        br.run_phase(specs, runs, 1, runner)


def test_the_phases_choose_the_best_rates_and_keep_only_a_winning_candidate(tmp_path):
    runner = FakeRunner()
    assert _run_all(tmp_path, runner) == [1, 2, 3, 4]
    results = br.load_results(tmp_path)
    assert len(runner.ran) == len(set(runner.ran)) == len(results)  # no run twice
    summary = br.summarise(results, SIZES, SEEDS, ADAMW, MUON, CANDIDATES)
    assert summary["sizes"]["s"]["adamw_lr"] == 0.004 and summary["sizes"]["l"]["adamw_lr"] == 0.002
    assert summary["sizes"]["s"]["muon_lr"] == summary["sizes"]["l"]["muon_lr"] == 0.01
    assert summary["recipe"] == ["muon", "good"]
    assert summary["candidates"]["good"]["wins"] and not summary["candidates"]["bad"]["wins"]
    assert summary["transfer"]["adamw"]["holds"] and summary["transfer"]["adamw"]["predicted"] == 0.002
    assert summary["transfer"]["muon"]["holds"]
    c = summary["sizes"]["s"]["recipe_vs_adamw"]["bn"]
    # Muon+good ends at 1.75 (+ seed noise) against AdamW's 2.0: the curve 4.0 -> 2.875 -> 1.75 reaches 2.0 at
    # 2048 + 2048 * (2.875 - 2.0) / (2.875 - 1.75) tokens, of AdamW's 4096.
    assert c["token_ratio"] == pytest.approx((2048 + 2048 * 0.875 / 1.125) / 4096, abs=2e-3)
    assert c["gap"] == pytest.approx(-0.25, abs=1e-9) and c["beyond_spread"]
    assert "| s | recipe (3 seeds) |" in br.table(summary, {"steps": 4, "seeds": list(SEEDS)})


def test_a_resumed_benchmark_runs_only_what_is_missing(tmp_path):
    first = FakeRunner()
    phase, specs = br.plan({}, SIZES, SEEDS, ADAMW, MUON, CANDIDATES)
    assert phase == 1
    br.run_phase(specs[:2], tmp_path, 1, first)  # interrupted after two runs
    again = FakeRunner()
    br.run_phase(specs, tmp_path, 1, again)
    assert again.ran == [s.name for s in specs[2:]]
    assert br.run_phase(specs, tmp_path, 1, FakeRunner()) == []  # all done: nothing to run
    assert br.pending(specs + specs, []) == specs  # each spec once
