"""corpus.quality.clean and corpus.quality.filters: canonical form, control characters, whitespace and each quality filter, counted."""

from __future__ import annotations

import gzip
import re
from collections import Counter

import numpy as np
import pytest
import regex

from corpus.quality.clean import (
    HSPACE_CHARS,
    canonicalize,
    ngram_hashes,
    ngram_hashes_batch,
    script_of,
    script_share,
    words,
    words_batch,
)
from corpus.quality.filters import (
    CleanConfig,
    bad_char_share,
    clean_document,
    dup_line_share,
    dup_ngram_share,
    quality_issue,
)
from corpus.read.normalize import is_normalized


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


def test_fast_character_classes_agree_with_regex():
    # The `re` classes and code-point tables stand in for `regex` properties; they must agree on every code point.
    everything = "".join(chr(cp) for cp in range(0x110000) if not 0xD800 <= cp < 0xE000)
    hspace = set(regex.findall(r"[^\S\n]", everything))
    assert set(re.findall(f"[{HSPACE_CHARS}]", everything)) == hspace
    controls = set(regex.findall(r"[\p{Cc}\uFEFF--[\t\n]]", everything, flags=regex.V1))
    assert canonicalize("a" + "".join(sorted(controls)) + "b") == "ab"
    from corpus.quality.clean import _word_characters

    word = {ord(c) for c in regex.findall(r"\w", everything)}  # what `words` matches (regex's default flags)
    assert set(np.flatnonzero(_word_characters()).tolist()) == word
    letters = regex.findall(r"[\p{L}\p{M}]", everything)
    # Script letters are those of the Basic Multilingual Plane (letters anywhere count in the denominator).
    bmp = everything[:0xF800]  # U+0000..U+FFFF less the 2,048 surrogates
    bengali = regex.findall(r"[\p{Script=Bengali}&&[\p{L}\p{M}]]", bmp, flags=regex.V1)
    assert script_share("".join(letters), "Bengali") == len(bengali) / len(letters)


def test_canonicalize_whitespace_runs():
    assert canonicalize("a \u00a0 b\tc\u2003d  e f\u3000\u3000g") == "a b c d e f g"
    assert canonicalize("  x \n\n\n\n y \t\n z ") == "x\n\ny\nz"


def test_batched_ngram_hashes_equal_one_document_at_a_time(sample_dir):
    texts = (_lines(sample_dir / "en" / "wiki-en-chinapedia.txt.gz", 30)
             + _lines(sample_dir / "bn" / "poems-pd-banglakosh.txt.gz", 30)
             + ["", "one", "a b c d", "x" * 40 + " y", "Straße STRASSE", "র‍্যাব উ‌ৎস কৃষ্ণ"])
    cleaned = [canonicalize(t) for t in texts]
    word_lists = [words(t) for t in cleaned]
    doc_words = words_batch(cleaned)
    assert [w.count for w in doc_words] == [len(w) for w in word_lists]
    batch = ngram_hashes_batch([w.hashes for w in doc_words], 5)
    for word_list, doc, grams in zip(word_lists, doc_words, batch, strict=True):
        # Reference: each word's first 24 code points as a polynomial, then the n-gram polynomial.
        powers = [pow(0x100000001B3, k, 2**64) for k in range(24)]
        h = [sum(ord(c) * p for c, p in zip(w[:24], powers, strict=False)) % 2**64 for w in word_list]
        n = min(5, len(h))
        expected = []
        for start in range(len(h) - n + 1 if h else 0):
            g = 0
            for value in h[start:start + n]:
                g = (g * 0x9E3779B1 + value) % 2**64
            expected.append(g)
        assert doc.hashes.tolist() == h
        assert grams.tolist() == expected
        assert np.array_equal(grams, ngram_hashes(doc.hashes, 5))


def test_batched_script_shares_equal_one_document_at_a_time():
    from corpus.quality.clean import script_shares

    texts = ["আমি বাংলায় গান গাই", "", "123 !!", "mixed বাংলা text", "\ud800 lone surrogate আ", "ড়"]
    got = script_shares(texts, "Bengali").tolist()
    assert got == [script_shares([t], "Bengali")[0] for t in texts]
    assert got[0] == 1.0 and got[1] == got[2] == 1.0 and 0 < got[3] < 1


def test_the_fast_path_of_canonicalize_changes_nothing(monkeypatch):
    # canonicalize returns a text at once when one scan finds nothing to do; with that scan disabled (every
    # text takes the full path) the results and counts must be the same.
    import random

    import corpus.quality.clean

    rng = random.Random(0)
    alphabet = ["a", "ব", "া", " ", "  ", "\t", "\u00a0", "\r", "\n", "\x07", "\ufeff", "\u200d", "\u2003", "x"]
    texts = ["".join(rng.choice(alphabet) for _ in range(rng.randint(0, 12))) for _ in range(3000)]
    texts += ["plain text", " lead", "trail ", "a\u3000b", "\u09df"]
    fast_counts, slow_counts = Counter(), Counter()
    fast = [canonicalize(t, fast_counts) for t in texts]
    monkeypatch.setattr(corpus.quality.clean, "_NEEDS_WORK", re.compile(""))  # matches everywhere: never the fast path
    slow = [canonicalize(t, slow_counts) for t in texts]
    assert fast == slow and fast_counts == slow_counts
