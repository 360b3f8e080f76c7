"""The summary's fairness table: premiums against the reference, the maximum premium and the Gini coefficient
of per-language token counts, for any number of languages, in report.json, report.md and report.html."""

import copy
import json

import pytest

import fertility
from fertility.premium import gini


def test_gini_against_hand_computed_values():
    # |100-200| + |100-300| + |200-300| = 400 over unordered pairs, 800 over ordered ones; 2 * n * sum = 3600
    assert gini([100, 200, 300]) == pytest.approx(800 / 3600)
    assert gini([7, 7, 7, 7]) == 0.0
    assert gini([0, 0, 10]) == pytest.approx(2 / 3)  # one language takes every token: (n - 1) / n
    assert gini([1, 3]) == pytest.approx(4 / (2 * 2 * 4))
    assert gini([]) == 0.0


PARALLEL = {
    "en": ["I sing a song.", "She reads a book every day.", "The river is wide."],
    "bn": ["আমি একটি গান গাই।", "সে প্রতিদিন একটি বই পড়ে।", "নদীটি চওড়া।"],
    "hi": ["मैं एक गाना गाता हूँ।", "वह हर दिन एक किताब पढ़ती है।", "नदी चौड़ी है।"],
    "ta": ["நான் ஒரு பாடல் பாடுகிறேன்.", "அவள் தினமும் ஒரு புத்தகம் படிக்கிறாள்.", "ஆறு அகலமானது."],
}


@pytest.fixture
def parallel_files(tmp_path):
    files = {}
    for lang, lines in PARALLEL.items():
        files[lang] = tmp_path / f"{lang}.txt"
        files[lang].write_text("\n".join(lines) + "\n", encoding="utf-8")
    return files


def test_fairness_table_for_four_languages_in_json_md_and_html(parallel_files, tmp_path, o200k, gpt2):
    named = copy.copy(gpt2)
    named.name = "<b>gpt2</b> & co"  # a name from the user's files: escaped in the HTML
    texts = {lang: lines for lang, lines in PARALLEL.items()}
    report = fertility.analyze([o200k, named], texts, parallel={k: str(v) for k, v in parallel_files.items()},
                               progress=False)
    out = fertility.write_report(report, tmp_path / "report")
    data = json.loads((out / "report.json").read_text())
    table = data["summary"]["fairness"]
    assert set(table) == {"o200k_base", "<b>gpt2</b> & co"}
    for t in report.tokenizers:
        row = table[t.name]
        tokens = {lang: p.tokens for lang, p in t.parallel.items()}
        assert row["reference"] == "en" and row["premium"]["en"] == 1.0
        for lang in ("bn", "hi", "ta"):
            assert row["premium"][lang] == pytest.approx(tokens[lang] / tokens["en"], abs=1e-6)
        assert row["max_premium"] == pytest.approx(max(tokens[k] / tokens["en"] for k in ("bn", "hi", "ta")), abs=1e-6)
        assert row["gini"] == pytest.approx(gini(list(tokens.values())), abs=1e-6)
        assert data["tokenizers"][report.tokenizers.index(t)]["fairness"] == row
    # gpt2 cuts Indic scripts into bytes: far less fair than o200k on every figure
    assert table["<b>gpt2</b> & co"]["max_premium"] > table["o200k_base"]["max_premium"] > 1
    assert table["<b>gpt2</b> & co"]["gini"] > table["o200k_base"]["gini"] > 0
    md = (out / "report.md").read_text()
    assert "| tokenizer | bn premium (vs en) | hi premium (vs en) | ta premium (vs en) | max premium | Gini |" in md
    page = (out / "report.html").read_text()
    assert "<table class='fairness'>" in page and "&lt;b&gt;gpt2&lt;/b&gt; &amp; co" in page
    assert "<b>gpt2</b>" not in page
    assert "FAIRNESS o200k_base (parallel text, vs en): max premium" in fertility.present.report.terminal_table(report)


def test_no_fairness_table_without_parallel_text(o200k, tmp_path):
    report = fertility.analyze([o200k], {"en": PARALLEL["en"], "bn": PARALLEL["bn"]}, progress=False)
    assert report.to_dict()["summary"] == {"fairness": {}}
    assert report.tokenizers[0].to_dict()["fairness"] is None
    out = fertility.write_report(report, tmp_path / "r")
    assert "fairness" not in (out / "report.html").read_text()
