"""Length ratios to English from the shipped Tatoeba sample, and the premiums they estimate."""

import gzip
from pathlib import Path

import pytest

from fertility import length_ratios as lr

ROOT = Path(__file__).resolve().parents[2]


def _lines(path: Path) -> list[str]:
    with gzip.open(path, "rt", encoding="utf-8") as f:
        return [line.rstrip("\n") for line in f]


@pytest.mark.parametrize("label, code", [("bn", "ben_Beng"), ("BEN", "ben_Beng"), ("ben_Beng", "ben_Beng"),
                                         ("bn-IN", "ben_Beng"), ("ta", "tam_Taml"), ("en", "eng_Latn"),
                                         ("zh", "zho_Hans"), ("xx", None), ("বাংলা", None)])
def test_a_label_names_its_sampled_language(label, code):
    assert lr.sample_code(label) == code


def test_every_sampled_language_has_line_aligned_pairs_with_english_and_its_sources_listed():
    folders = sorted(p for p in lr.SAMPLE_DIR.iterdir() if p.is_dir())
    assert {p.name for p in folders} == set(lr.ALIASES) - {lr.ENGLISH}
    sources = (lr.SAMPLE_DIR / "SOURCES.md").read_text(encoding="utf-8")
    for folder in folders:
        own, english = _lines(folder / f"{folder.name}.txt.gz"), _lines(folder / f"{lr.ENGLISH}.txt.gz")
        assert len(own) == len(english) >= 100 and all(own) and all(english), folder.name
        assert f"`{folder.name}/`" in sources, f"{folder.name} is not in SOURCES.md"
    assert "CC BY 2.0 FR" in sources


def test_a_ratio_is_the_languages_characters_over_englishs_on_its_pairs():
    folder = lr.SAMPLE_DIR / "tam_Taml"
    own, english = _lines(folder / "tam_Taml.txt.gz"), _lines(folder / "eng_Latn.txt.gz")
    got = lr.length_ratio("ta")
    assert got.estimated and got.ratio == pytest.approx(sum(map(len, own)) / sum(map(len, english)))
    assert f"{len(own):,} pairs" in got.source
    assert got.ratio > 1.15  # Tamil takes more characters than English for the same sentence
    assert lr.length_ratio("en") == lr.LengthRatio(1.0, "English", True)


def test_a_language_the_sample_lacks_keeps_equal_chars_per_token_and_says_so():
    ratios = lr.length_ratios(["bn", "xx", "en"])
    assert ratios["xx"] == lr.LengthRatio(1.0, f"no parallel text for xx in {lr.SAMPLE_NAME}", False)
    line = lr.describe(ratios)
    assert f"bn {ratios['bn'].ratio:.2f}" in line and "no parallel text for xx: equal chars/token assumed for it" in line
    assert "equal chars/token assumed" in lr.describe(lr.length_ratios(["xx", "yy"]))


def test_premiums_follow_from_chars_per_token_and_the_ratios():
    ratios = {"ta": lr.LengthRatio(1.25, "t", True), "en": lr.LengthRatio(1.0, "English", True),
              "bn": lr.LengthRatio(0.98, "t", True)}
    cpt = {"ta": 4.0, "en": 4.0, "bn": 4.9}
    got = lr.premiums(cpt, ratios, "en")
    # at English's chars/token, a language that needs 25 % more characters pays 25 % more tokens
    assert got == pytest.approx({"ta": 1.25, "en": 1.0, "bn": 0.98 * 4.0 / 4.9})
    # against another reference: the ratio of the two costs
    assert lr.premiums(cpt, ratios, "ta")["en"] == pytest.approx(1 / 1.25)
    # equal English chars/token means equal premiums
    english = lr.english_chars_per_token({"ta": 5.0, "en": 4.0}, ratios)
    assert english == pytest.approx({"ta": 4.0, "en": 4.0})
