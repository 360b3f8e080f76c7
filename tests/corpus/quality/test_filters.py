"""corpus.quality.filters: a quality filter is one registered class, and the settings, the command's flags, the build's
drop counts and its report follow from the registry."""

from __future__ import annotations

import json
import random
from collections import Counter

import pytest

from common import cli
from corpus.cli import main
from corpus.quality.clean import canonicalize
from corpus.quality.filters import (
    FILTERS,
    CleanConfig,
    Option,
    PerDocument,
    clean_and_filter_batch,
    options,
    quality_issue,
    register,
    unregister,
)


def digit_share(text: str) -> float:
    return sum(c.isdigit() for c in text) / max(len(text), 1)


# The docs' example filter (corpus/quality/filters.py's docstring), declared here and nowhere else.
TOO_MANY_DIGITS = PerDocument("too_many_digits", Option(
    "max_digit_share", 0.5, cli.share, "drop documents whose characters are more than this share digits"),
    digit_share)


def _help(capsys) -> str:
    with pytest.raises(SystemExit):
        main(["build", "--help"])
    return capsys.readouterr().out


def test_the_registry_holds_the_filters_in_the_order_they_run():
    assert [f.name for f in FILTERS] == ["too_short", "mojibake", "script_purity", "repeated_lines", "repeated_ngrams"]
    # CleanConfig holds the settings in the order builds have recorded them (manifest.json's filters.clean)
    assert list(CleanConfig()) == ["min_chars", "min_script_share", "max_dup_line_share", "max_dup_ngram_share",
                                   "ngram", "max_bad_char_share"]
    assert CleanConfig(min_chars=7).min_chars == 7 and CleanConfig().ngram == 5
    with pytest.raises(TypeError, match="max_digit_share"):
        CleanConfig(max_digit_share=0.1)
    with pytest.raises(ValueError, match="too_short"):
        register(PerDocument("too_short", Option("min_words", 3, cli.positive_int, "a second too_short"), len))


def test_a_registered_filter_is_a_setting_a_flag_a_drop_reason_and_a_report_column(tmp_path, sample_head, capsys):
    lines = [line for line in sample_head("en/wiki-en-chinapedia.txt.gz", 400).splitlines()
             if len(line) > 200 and quality_issue(canonicalize(line), "en", CleanConfig()) is None]
    rng = random.Random(0)  # distinct numbers: no repeated n-grams, so no earlier filter drops these
    numeric = [line + " " + " ".join(f"{rng.randrange(10**6):06d}" for _ in range(len(line) // 3))
               for line in lines[:25]]
    source = tmp_path / "en.txt"
    source.write_text("\n".join(lines[25:] + numeric) + "\n", encoding="utf-8")
    out = tmp_path / "out"

    register(TOO_MANY_DIGITS)
    try:
        assert "max_digit_share" in CleanConfig() and options()[-1].field == "max_digit_share"
        assert "--max-digit-share" in _help(capsys) and "share digits" in _help(capsys)
        kept = clean_and_filter_batch(numeric, "en", CleanConfig(max_digit_share=0.9), Counter())
        assert all(doc is not None for doc in kept)  # the setting is what decides
        code = main(["build", "--source", f"en={source}", "--tokenizer", "gpt2", "--mix", "en=1", "--tokens", "20000",
                     "--val-tokens", "1000", "--max-digit-share", "0.4", "--workers", "1", "--no-progress",
                     "--out", str(out)])
    finally:
        unregister("too_many_digits")
    assert code == 0
    counters = json.loads((out / "report.json").read_text())["sources"][0]["counters"]
    assert counters["drop_too_many_digits"] == len(numeric)
    assert counters["documents_in"] == len(lines)
    assert "| drop_too_many_digits |" in (out / "report.md").read_text()
    assert json.loads((out / "manifest.json").read_text())["filters"]["clean"]["max_digit_share"] == 0.4
    # unregistered: gone from the settings and the flags
    assert "max_digit_share" not in CleanConfig() and "--max-digit-share" not in _help(capsys)
