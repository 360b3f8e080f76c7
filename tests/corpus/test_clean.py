"""corpus.clean: canonical form, control characters, whitespace and each quality filter, counted."""

from __future__ import annotations

import gzip
from collections import Counter

import pytest

from corpus.clean import (
    CleanConfig,
    bad_char_share,
    canonicalize,
    clean_document,
    dup_line_share,
    dup_ngram_share,
    quality_issue,
    script_of,
    script_share,
)
from corpus.normalize import is_normalized


def _lines(path, n):
    with gzip.open(path, "rt", encoding="utf-8") as f:
        return [next(f).rstrip("\n") for _ in range(n)]


def test_script_of_codes():
    assert script_of("bn") == "Bengali"
    assert script_of("ben_Beng") == "Bengali"
    assert script_of("en") == "Latin"
    assert script_of("hin_Deva") == "Devanagari"
    assert script_of("xx") is None


def test_canonicalize_counts_each_change():
    c = Counter()
    out = canonicalize("\ufeff\u09dfা\u0007  ক\u00a0\tখ \r\n\n\n\n গ\u200c ", c)
    assert out == "\u09af\u09bcা ক খ\n\nগ\u200c"
    assert is_normalized(out)
    assert c == Counter(changed_normalization=1, changed_control_chars=1, changed_whitespace=1)
    c = Counter()
    assert canonicalize("already clean", c) == "already clean"
    assert not c


def test_script_share_on_real_text(sample_dir):
    bn = " ".join(_lines(sample_dir / "bn" / "literature-bnarchive.txt.gz", 50))
    en = " ".join(_lines(sample_dir / "en" / "wiki-en-chinapedia.txt.gz", 50))
    assert script_share(bn, "Bengali") > 0.98
    assert script_share(en, "Latin") > 0.98
    assert script_share(en, "Bengali") < 0.01
    mixed = bn[:1000] + en[:1000]
    assert 0.2 < script_share(mixed, "Bengali") < 0.8


def test_repetition_measures():
    assert dup_line_share("a line\nanother\na line") == pytest.approx(12 / 19)
    assert dup_line_share("single line") == 0.0
    text = "one two three four five " * 4
    assert dup_ngram_share(text, 5) == 1.0
    assert dup_ngram_share("a b c d e f g h i j k l", 5) == 0.0


def test_mojibake_share():
    good = "বাংলা ভাষা café"
    broken = good.encode("utf-8").decode("cp1252", errors="replace")
    assert bad_char_share(good) == 0.0
    assert bad_char_share(broken) > 0.3
    assert bad_char_share("abc\ufffd") == 0.25


def test_each_filter_fires_and_is_counted(sample_dir):
    config = CleanConfig()
    bn = _lines(sample_dir / "bn" / "poems-pd-banglakosh.txt.gz", 3)
    en = _lines(sample_dir / "en" / "wiki-en-chinapedia.txt.gz", 3)
    cases = {
        "too_short": ("ছোট", "bn"),
        "script_purity": (en[0], "bn"),
        "repeated_lines": ("\n".join([bn[0][:200]] * 3 + [bn[1][:100]]), "bn"),
        "repeated_ngrams": (" ".join([en[1][:300]] * 3), "en"),
        "mojibake": (bn[2].encode("utf-8").decode("cp1252", errors="replace"), "bn"),
    }
    counters = Counter()
    for expected, (text, lang) in cases.items():
        assert quality_issue(canonicalize(text), lang, config) == expected
        assert clean_document(text, lang, config, counters) is None
    assert counters["documents_in"] == len(cases)
    for expected in cases:
        assert counters[f"drop_{expected}"] == 1
    assert clean_document(bn[0], "bn", config, counters) == canonicalize(bn[0])


def test_real_sample_mostly_survives(sample_dir):
    config, counters = CleanConfig(), Counter()
    kept = [clean_document(t, "en", config, counters) for t in _lines(sample_dir / "en" / "wiki-en-chinapedia.txt.gz", 300)]
    assert sum(k is not None for k in kept) > 280
    assert counters["documents_in"] == 300
