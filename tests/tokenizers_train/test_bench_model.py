"""benchmarks/bench_model.py's figures: the seeds' summary, the verdict against their spread, the table."""

import sys
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parents[2]
sys.path.insert(0, str(ROOT / "benchmarks"))
import bench_model  # noqa: E402

BITS = {
    "default": {1000: [{"bn": 1.60, "en": 1.30}, {"bn": 1.62, "en": 1.20}, {"bn": 1.61, "en": 1.25}]},
    "naive": {1000: [{"bn": 2.00, "en": 1.22}, {"bn": 2.02, "en": 1.24}, {"bn": 2.04, "en": 1.26}]},
}


def test_the_summary_keeps_every_seed_with_its_mean_and_range():
    s = bench_model.summarise(BITS)
    assert s["default"]["1000"]["bn"]["mean"] == pytest.approx(1.61)
    assert s["default"]["1000"]["bn"]["spread"] == pytest.approx(0.02)
    assert s["naive"]["1000"]["en"]["seeds"] == [1.22, 1.24, 1.26]


def test_a_gap_counts_only_beyond_the_seeds_spread():
    s = bench_model.summarise(BITS)
    bn, en = bench_model.verdicts(s, ["bn", "en"], "default", "naive")
    assert "bn: default 1.6100 vs naive 2.0200" in bn and "beyond the seeds' spread" in bn  # 0.41 apart, ranges 0.02, 0.04
    assert "within the seeds' spread" in en  # 0.01 apart, default's seeds range over 0.10


def test_the_table_has_a_row_per_tokenizer_and_budget():
    s = bench_model.summarise(BITS)
    cpt = {"default": {"bn": 4.0, "en": 4.5}, "naive": {"bn": 1.4, "en": 4.6}}
    lines = bench_model.table(s, cpt, ["bn", "en"]).splitlines()
    assert len(lines) == 4
    assert lines[2].startswith("| default | 1,000 | 1.6100 ± 0.0100 | 1.2500 ± 0.0500 | 4.00 | 4.50 |")
