"""benchmarks/bench_model.py's figures: the seeds' summary, the verdict against their spread, the table."""

import json
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


def test_the_table_has_a_row_group_per_vocabulary_with_each_rows_flops():
    s = bench_model.summarise(BITS)
    cpt = {"default": {"bn": 4.0, "en": 4.5}, "naive": {"bn": 1.4, "en": 4.6}}
    flops = {"default": {"1000": 5.6e10}, "naive": {"1000": 5.6e10}}
    lines = bench_model.table({"64000": s, "8192": s}, {"64000": cpt, "8192": cpt},
                              {"64000": flops, "8192": flops}, ["bn", "en"]).splitlines()
    assert len(lines) == 6
    assert lines[2] == "| 64,000 | default | 1,000 | 5.6e+10 | 1.6100 ± 0.0100 | 1.2500 ± 0.0500 | 4.00 | 4.50 |"
    assert [line.split(" | ")[0] for line in lines[2:]] == ["| 64,000", "| 64,000", "| 8,192", "| 8,192"]


def test_the_means_are_taken_per_seed_and_get_bits_columns_but_no_chars_per_token():
    runs = [bench_model.with_means({"bn": 1.0, "en": 3.0, "bn_tatoeba": 2.0, "en_tatoeba": 4.0}),
            bench_model.with_means({"bn": 1.2, "en": 3.4, "bn_tatoeba": 2.0, "en_tatoeba": 4.0})]
    assert runs[0]["mean"] == pytest.approx(2.0) and runs[0]["tatoeba_mean"] == pytest.approx(3.0)
    s = bench_model.summarise({"default": {1000: runs}})
    assert s["default"]["1000"]["mean"]["seeds"] == pytest.approx([2.0, 2.3])
    cpt = {"default": {"bn": 4.0, "en": 4.5, "bn_tatoeba": 3.9, "en_tatoeba": 4.2}}
    lines = bench_model.table({"64000": s}, {"64000": cpt}, {"64000": {"default": {"1000": 1e9}}},
                              ["bn", "en", "mean"]).splitlines()
    assert "| mean bits/byte | bn chars/token |" in lines[0] and "mean chars/token" not in lines[0]
    assert "| 2.1500 ± 0.1500 | 4.00 | 4.50 | 3.90 | 4.20 |" in lines[2]


def test_the_english_verdict_names_a_cost_a_gain_or_the_seeds_spread():
    worse = {"default": {"1000": {"en": {"mean": 1.30, "spread": 0.02}}},
             "naive": {"1000": {"en": {"mean": 1.20, "spread": 0.02}}}}
    (line,) = bench_model.english_cost(worse, "64000")
    assert line.startswith("vocabulary 64,000, 1,000 tokens, en: default 1.3000 vs naive 1.2000 bits/byte (+8.3%)")
    assert line.endswith("beyond the seeds' spread: default costs English 8.3%")
    better = {"default": worse["naive"], "naive": worse["default"]}
    assert bench_model.english_cost(better, "64000")[0].endswith("default is 7.7% better for English")
    close = {"default": {"1000": {"en": {"mean": 1.21, "spread": 0.02}}}, "naive": worse["naive"]}
    assert bench_model.english_cost(close, "8192")[0].endswith("within the seeds' spread: no cost the seeds can show")


def test_training_flops_are_the_runs_own_flops_per_token_times_its_tokens(tmp_path):
    (tmp_path / "preflight.json").write_text(json.dumps({"model": {"flops_per_token": 56236800}}))
    assert bench_model.training_flops(tmp_path, 146) == 56236800 * 146 * 1024


@pytest.mark.parametrize("text", ["", "1,a", "0", "8192,-1"])
def test_a_list_option_takes_only_positive_numbers(text):
    with pytest.raises(bench_model.argparse.ArgumentTypeError, match="positive numbers"):
        bench_model.numbers(text)
    assert bench_model.numbers("64000,8192,1e5") == [64000, 8192, 100000]
