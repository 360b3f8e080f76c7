"""benchmarks/bench_multiscript.py end to end on the shipped sample (two languages, a tiny vocabulary)."""

import json
import sys
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parents[2]
sys.path.insert(0, str(ROOT / "benchmarks"))
import bench_multiscript  # noqa: E402


@pytest.mark.slow
def test_every_peer_is_measured_on_the_same_held_out_text(sample_dir, shipped_tokenizers, tmp_path, capsys):
    out = tmp_path / "bench.json"
    assert bench_multiscript.main(["--langs", "bn,en", "--data", str(sample_dir), "--vocab-size", "1024",
                                   "--max-chars-per-source", "40000", "--tokenizer-dir", str(shipped_tokenizers),
                                   "--out", str(out), "--keep", str(tmp_path / "kept")]) == 0
    data = json.loads(out.read_text())
    results = data["tokenizers"]
    code = bench_multiscript.sample_code("bn")
    pairs = bench_multiscript.read_parallel({"bn": bench_multiscript.SAMPLE_DIR / code / f"{code}.txt.gz",
                                             "en": bench_multiscript.SAMPLE_DIR / code / "eng_Latn.txt.gz"})
    assert {"ours", "parity-base", "parity-window", "bpe-fair", "o200k_base"} <= set(results)
    for name in ("ours", "parity-base", "parity-window", "bpe-fair"):
        r = results[name]
        assert r["vocab_size"] == 1024 and r["seconds"] > 0
        # each trainer ran in a process of its own: its peak memory is over what the bare process holds
        assert r["peak_rss_mib"] > data["baseline_rss_mib"] > 20
        # no held-out parallel set in the sample's layout: Bangla is measured on the shipped Tatoeba pairs
        assert r["premium"]["en"] == 1.0 and r["premium_source"]["bn"] == "sample"
        tok = bench_multiscript.fertility.load_tokenizer(str(tmp_path / "kept" / name / "tokenizer.json"))
        assert r["premium"]["bn"] == pytest.approx(bench_multiscript.premium(tok, pairs, "en")["bn"].premium, rel=1e-3)
        assert r["max_premium"] == r["premium"]["bn"]
        assert r["gini"] == pytest.approx(bench_multiscript.gini([1.0, r["premium"]["bn"]]), abs=1e-4)
    for name in ("ours", "parity-base", "parity-window", "bpe-fair"):
        assert (tmp_path / "kept" / name / "tokenizer.json").is_file()
    assert results["ours"]["probes"] == 2
    assert len(results["ours"]["rounds"]) >= 3 and results["ours"]["rounds"][0]["probe"]
    printed = capsys.readouterr().out
    assert all(name in printed for name in results) and "peak MiB" in printed.splitlines()[0]
    assert results["o200k_base"]["seconds"] is None and "peak_rss_mib" not in results["o200k_base"]


def test_every_source_takes_a_languages_folder_and_its_multi_files_but_xquad(tmp_path):
    for rel in ("bn/blog.txt.gz", "bn/comments.txt.gz", "multi/dakshina-wiki/ben_Beng.txt.gz",
                "multi/xquad/ben_Beng.txt.gz", "multi/sipc-wiki/hin_Deva.txt.gz", "en/wiki.txt.gz"):
        (tmp_path / rel).parent.mkdir(parents=True, exist_ok=True)
        (tmp_path / rel).write_bytes(b"")
    found = bench_multiscript.sources(tmp_path, ["bn", "hi"], every=True)
    assert found == [f"bn={tmp_path / 'bn/blog.txt.gz'}", f"bn={tmp_path / 'bn/comments.txt.gz'}",
                     f"bn={tmp_path / 'multi/dakshina-wiki/ben_Beng.txt.gz'}",
                     f"hi={tmp_path / 'multi/sipc-wiki/hin_Deva.txt.gz'}"]
