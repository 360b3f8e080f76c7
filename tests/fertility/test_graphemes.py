"""Grapheme clusters against the Unicode standard's own test cases (UAX #29, GraphemeBreakTest.txt).

``data/GraphemeBreakTest-17.0.0.txt`` is the Unicode Character Database file
https://www.unicode.org/Public/17.0.0/ucd/auxiliary/GraphemeBreakTest.txt, unmodified (Unicode terms of use:
https://www.unicode.org/terms_of_use.html; copyright notice in its header). Taken from the copy vendored in
github.com/Ismail-elkorchi/textfacts (testdata/unicode/17.0.0/auxiliary/, commit 5ce3ed17), so the tests need
no network.
"""

from pathlib import Path

import numpy as np
import pytest
import regex

from fertility.graphemes import REGEX_VERSION, UNICODE_VERSION, cluster_starts, clusters

TEST_FILE = Path(__file__).parent / "data" / "GraphemeBreakTest-17.0.0.txt"


def cases():
    """(line number, code points, expected cluster start flags) of every test line."""
    out = []
    for number, line in enumerate(TEST_FILE.read_text(encoding="utf-8").splitlines(), start=1):
        spec = line.split("#")[0].strip()
        if not spec:
            continue
        tokens = spec.split()
        cps = [int(t, 16) for t in tokens[1::2]]
        marks = tokens[0::2]  # "÷" or "×" before each code point, and one at the end
        out.append((number, cps, [m == "÷" for m in marks[:-1]]))
    return out


CASES = cases()
INDIC = [c for c in CASES if any(0x0900 <= cp < 0x1100 or cp in (0x200C, 0x200D) for cp in c[1])]


def test_the_stated_unicode_version_is_the_test_files():
    assert UNICODE_VERSION == "17.0", f"regex {REGEX_VERSION} has Unicode {UNICODE_VERSION}; update the test file"
    assert len(CASES) == 766 and len(INDIC) > 100


def test_every_standard_case_one_batch():
    """All 766 cases laid end to end as documents of one batch: the array path, the sequential rules and the
    document boundaries together."""
    cps = np.array([cp for _, c, _ in CASES for cp in c], dtype=np.uint32)
    doc_start = np.cumsum([0] + [len(c) for _, c, _ in CASES])
    got = cluster_starts(cps, doc_start)
    for (number, c, expected), a in zip(CASES, doc_start[:-1].tolist(), strict=True):
        assert got[a:a + len(c)].tolist() == expected, f"GraphemeBreakTest line {number}: {[hex(x) for x in c]}"


@pytest.mark.parametrize("case", INDIC, ids=lambda c: f"line{c[0]}")
def test_indic_conjunct_cases_one_by_one(case):
    _, c, expected = case
    cps = np.array(c, dtype=np.uint32)
    assert cluster_starts(cps, np.array([0, len(c)])).tolist() == expected


def test_no_conjunct_without_a_consonant_before_the_virama():
    # ÷ 0061 × 094D ÷ 0924 ÷ in the standard; `regex` \X joins all three (and অ্যা likewise)
    assert clusters("a\u094d\u0924") == ["a\u094d", "\u0924"]
    assert clusters("অ্যা") == ["অ্", "যা"]
    assert clusters("ক্ষ") == ["ক্ষ"] and clusters("র\u200d্যাব") == ["র\u200d্যা", "ব"]
    assert len(regex.findall(r"\X", "অ্যা")) == 1  # why fertility does not use \X


def test_versions_are_in_report_json(gpt2):
    import fertility

    d = fertility.analyze([gpt2], {"bn": ["অ্যাসিড"]}, progress=False).to_dict()
    assert d["settings"]["unicode_version"] == UNICODE_VERSION
    assert d["settings"]["regex_version"] == REGEX_VERSION
