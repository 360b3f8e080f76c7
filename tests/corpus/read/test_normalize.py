"""corpus.read.normalize: the project's canonical form (NFC, nukta letters decomposed, ZWJ/ZWNJ kept)."""

from __future__ import annotations

import gzip
import unicodedata

from corpus.read.normalize import NUKTA_LETTERS, is_normalized, normalize


def test_nukta_letters_end_up_decomposed():
    for precomposed, decomposed in NUKTA_LETTERS.items():
        assert normalize(precomposed) == decomposed
        assert normalize(decomposed) == decomposed
    assert normalize("বাংলায়") == "বাংলা" + "\u09af\u09bc"


def test_composes_what_nfc_composes():
    # Bengali two-part vowel sign o: e-sign + aa-sign composes to U+09CB under NFC.
    assert normalize("\u0995\u09c7\u09be") == "\u0995\u09cb"
    assert normalize("e\u0301") == "\u00e9"


def test_zwj_zwnj_survive():
    text = "র\u200d্যাব ক\u200cষ"
    assert normalize(text).count("\u200d") == 1
    assert normalize(text).count("\u200c") == 1


def test_no_compatibility_folding():
    for text in ("ﬁ", "²", "Ａ", "১২৩"):
        assert normalize(text) == text


def test_idempotent_and_is_normalized_on_real_text(sample_dir):
    with gzip.open(sample_dir / "bn" / "literature-bnarchive.txt.gz", "rt", encoding="utf-8") as f:
        lines = [next(f) for _ in range(200)]
    changed = 0
    for line in lines:
        once = normalize(line)
        assert normalize(once) == once
        assert is_normalized(once)
        assert is_normalized(line) == (once == line)
        assert unicodedata.is_normalized("NFC", once)
        changed += once != line
    assert changed > 0  # the sample is deliberately not NFC
