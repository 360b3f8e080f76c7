"""corpus.quality.clean.drop_markup_lines: lines that are only markup or punctuation are dropped inside documents,
counted, and nothing else changes; and the shipped sample holds no markup residue."""

from __future__ import annotations

import gzip
import re
from collections import Counter

import pytest

from corpus.quality.clean import canonicalize, drop_markup_lines
from corpus.quality.filters import CleanConfig, clean_and_filter_batch

# Lines of nothing but punctuation, symbols and spaces, of several scripts: each is dropped.
MARKUP = ["```", "````", "***", "* * *", "====", "-----", "___", "~~~", "###", "—", "…", "।", "॥", "।।", "॥ ॥",
          "«»", "<>", "|", "+=+=", "★★★", "😀😀", "#!/*-*/", "〜〜", "؟", "\"'\"'"]
# Lines with a letter, a mark or a digit, whatever punctuation they carry: each stays.
PROSE = ["আমি ভাত খাই।", "সে বলল, \"না!\"", "॥ ১ ॥", "॥ १ ॥", "नमस्ते।", "ठीक है॥", "Hello, world!", "1.",
         "---a---", "(ক)", "** bold **", "`code`", "```python", "=== Heading ===", "- item", "৳ ১০০", "$5",
         "\u0981", "…and so on", "ok 😀"]


@pytest.mark.parametrize("line", MARKUP)
def test_a_markup_line_between_prose_is_dropped(line):
    c = Counter()
    assert drop_markup_lines(f"আমি ভাত খাই।\n{line}\nসে যায়।", c) == "আমি ভাত খাই।\nসে যায়।"
    assert c == Counter(markup_lines_dropped=1)


@pytest.mark.parametrize("line", PROSE)
def test_a_line_with_letters_marks_or_digits_stays(line):
    text = f"first line\n{line}\nlast line"
    c = Counter()
    assert drop_markup_lines(text, c) == text
    assert canonicalize(text, c) == text
    assert not c


def test_crafted_document_drops_exactly_the_markup_lines():
    text = "\n".join(["```", "print('বাংলা')", "```", "", "* * *", "", "প্রথম অনুচ্ছেদ। শেষ॥", "॥ ১ ॥", "॥",
                      "", "====", "दूसरा अनुच्छेद।", "।", "Plain English, with punctuation: yes!", "-----"])
    c = Counter()
    out = canonicalize(text, c)
    assert out == ("print('বাংলা')\n\nপ্রথম অনুচ্ছেদ। শেষ॥\n॥ ১ ॥\n\nदूसरा अनुच्छेद।\n"
                   "Plain English, with punctuation: yes!")
    assert c == Counter(markup_lines_dropped=7)
    assert canonicalize(out, Counter()) == out  # the result is canonical: a second pass changes nothing


def test_blank_lines_left_around_a_dropped_line_collapse_to_one():
    c = Counter()
    assert drop_markup_lines("a para\n\n***\n\nanother", c) == "a para\n\nanother"
    assert drop_markup_lines("***\n\na para\n\n---", c) == "a para"
    assert c == Counter(markup_lines_dropped=3)


def test_text_without_markup_lines_is_unchanged_and_uncounted():
    for text in ("one line, with punctuation: «ok»!", "a para\n\nanother para\nsame para", "আমি।\nতুমি।"):
        c = Counter()
        assert canonicalize(text, c) == text
        assert not c


def test_a_document_of_only_markup_is_left_to_the_filters():
    """Nothing would be left: the document stays as it is (and the too_short filter drops it)."""
    c = Counter()
    for text in ("```", "```\n\n***", "॥"):
        assert canonicalize(text, c) == text
    assert not c
    assert clean_and_filter_batch(["```\n\n***"], "bn", CleanConfig(), c) == [None]
    assert c["drop_too_short"] == 1 and "markup_lines_dropped" not in c


def test_the_filter_batch_counts_dropped_lines_per_language_batch():
    docs = ["প্রথম লাইন, যথেষ্ট লম্বা।\n```\nদ্বিতীয় লাইন, এটাও লম্বা।\n```",
            "কোনো চিহ্ন-লাইন নেই এখানে।\nআরেকটা লাইন।", "একটি মাত্র লাইন, বিরামচিহ্নসহ।"]
    c = Counter()
    kept = clean_and_filter_batch(docs, "bn", CleanConfig(), c)
    assert [k.text for k in kept] == ["প্রথম লাইন, যথেষ্ট লম্বা।\nদ্বিতীয় লাইন, এটাও লম্বা।", docs[1], docs[2]]
    assert c["markup_lines_dropped"] == 2 and c["documents_in"] == 3


def test_no_line_of_the_shipped_sample_holds_markup_residue(sample_dir):
    """Markup residue left by a source (a "````" opened 443 Bangla paragraphs once) must not ship again."""
    files = sorted(sample_dir.rglob("*.txt.gz"))
    assert len(files) >= 5
    residue = re.compile(r"`{3,}|<(?:div|p|br|center|font)\b|\{\{|\[\[|={3,}")
    found = []
    for path in files:
        with gzip.open(path, "rt", encoding="utf-8") as f:
            found += [f"{path.relative_to(sample_dir)}:{n}" for n, line in enumerate(f, 1) if residue.search(line)]
    assert not found, f"markup residue in the sample: {found[:5]} ({len(found)} lines)"
