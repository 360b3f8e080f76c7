"""The explorer (fertility.present.explorer, fertility.show): the same figures as ``fertility report`` on the same text,
the text read as a .txt file is, every piece of text escaped, the drawing capped, a parallel pair's premium."""

from __future__ import annotations

import html
import json
import re

import pytest

import fertility
from fertility.cli import main
from fertility.present.explorer import (
    DRAWN_CHARS,
    MAX_TEXT_BYTES,
    TextTooLarge,
    check_size,
    explore,
    pasted_documents,
)
from fertility.text import iter_documents

PLANTED = ['<script>window.planted = 1</script>', '<img src=x onerror="window.planted = 2">',
           "\" onmouseover='window.planted = 3' x=\"", "&amp; </td></tr></table>"]
BANGLA = "আমি বাংলায় গান গাই। রবীন্দ্রনাথ ঠাকুরের স্বাধীনতা ও ক্ষমতা নিয়ে কবিতা।"
ENGLISH = "The quick brown fox jumps over the lazy dog, and the tokenizer counts its pieces."
MIXED = "\n".join([BANGLA, ENGLISH, "", *PLANTED, f"{BANGLA} {ENGLISH}"])


def cli_report(tmp_path, args: list[str], shipped_tokenizers) -> dict:
    out = tmp_path / "report"
    code = main(["report", "--no-progress", "--tokenizer", "gpt2", "--tokenizer", "o200k_base",
                 "--tokenizer-dir", str(shipped_tokenizers), "--detail-every", "1", *args, "--out", str(out)])
    assert code == 0
    return json.loads((out / "report.json").read_text(encoding="utf-8"))


@pytest.fixture(scope="module")
def mixed(gpt2, o200k):
    return explore(MIXED, [gpt2, o200k], lang="mix")


def test_pasted_text_reads_as_a_txt_file(tmp_path):
    text = "\ufeffone\r\n\r\n  \ntwo\rstill two\n\x0bthree\u2028four\n\nlast"
    path = tmp_path / "t.txt"
    path.write_bytes(text.encode("utf-8"))
    from_file = [(d.text, d.line) for d in iter_documents(str(path))]
    assert [(d.text, d.line) for d in pasted_documents(text, "pasted")] == from_file
    assert len(from_file) == 4  # the file reader splits at "\n" only, not at \r, \x0b or U+2028


def test_figures_equal_the_reports(tmp_path, mixed, shipped_tokenizers):
    path = tmp_path / "mixed.txt"
    path.write_text(MIXED, encoding="utf-8")
    report = cli_report(tmp_path, ["--text", f"mix={path}"], shipped_tokenizers)
    mine = mixed.to_dict()["tokenizers"]
    assert [t["name"] for t in mine] == [t["name"] for t in report["tokenizers"]] == ["gpt2", "o200k_base"]
    for ours, theirs in zip(mine, report["tokenizers"], strict=True):
        assert ours["languages"] == theirs["languages"]
        assert ours["scripts"] == theirs["scripts"]
        assert {"Bengali", "Latin"} <= set(ours["scripts"])
        assert ours["tokens"]["mix"] == round(theirs["languages"]["mix"]["tokens"])


def test_tables_hold_the_report_md_rows(tmp_path, mixed, shipped_tokenizers):
    path = tmp_path / "mixed.txt"
    path.write_text(MIXED, encoding="utf-8")
    cli_report(tmp_path, ["--text", f"mix={path}"], shipped_tokenizers)
    md = (tmp_path / "report" / "report.md").read_text(encoding="utf-8")
    page = mixed.html()
    rows = []
    for table in re.findall(r"<table class='full'>(.*?)</table>", page, flags=re.S):
        for row in re.findall(r"<tr>(.*?)</tr>", table, flags=re.S)[1:]:
            rows.append("| " + " | ".join(html.unescape(c) for c in re.findall(r"<td>(.*?)</td>", row)) + " |")
    assert len(rows) >= 6  # the language and at least Bengali and Latin, for each tokenizer
    for row in rows:
        assert row in md.splitlines()


def test_spans_escape_every_text_and_cover_it(mixed):
    page = mixed.html()
    for planted in PLANTED:
        assert planted not in page
    assert "<script" not in page and "<img" not in page and "onmouseover='" not in page
    for name in ("gpt2", "o200k_base"):
        cells = re.findall(rf"<div class='cell' data-tokenizer='{name}'[^>]*>(.*?)</div>", page, flags=re.S)
        shown = [html.unescape(re.sub(r"<[^>]+>", "", c)).replace("\u00b7", "") for c in cells]
        assert shown == [d.text for d in pasted_documents(MIXED, "x")]
        spans = sum(c.count("<span class=\"tok") for c in cells)
        assert spans == mixed.tokens(name)  # every token drawn (the text is under the drawing cap)


def test_count_difference_and_cuts(mixed):
    page = mixed.html()
    diff = mixed.tokens("o200k_base") - mixed.tokens("gpt2")
    assert diff < 0  # o200k has Bengali merges gpt2 lacks
    assert f"{diff:+,} ({diff / mixed.tokens('gpt2'):+.1%})" in page
    assert 'class="tok c' in page and " cut" in page  # gpt2 starts tokens inside Bengali clusters


def test_drawing_is_capped_but_figures_cover_everything(gpt2):
    long = "\n".join([ENGLISH] * (2 * DRAWN_CHARS // len(ENGLISH)))
    e = explore(long, [gpt2], lang="en")
    data = e.to_dict()["languages"]["en"]
    assert data["chars"] == len(long.replace("\n", ""))
    assert data["drawn_chars"] <= DRAWN_CHARS < data["chars"]
    assert "tokens drawn for the first" in e.html()
    assert e.tokens("gpt2") == sum(map(len, gpt2.encode_ids(long.split("\n"))))


def test_parallel_premium_equals_the_reports(tmp_path, gpt2, o200k, shipped_tokenizers):
    bn = "আমি বাংলায় গান গাই।\n\nতুমি কেমন আছ?\nআজ আকাশ নীল।"
    en = "I sing in Bangla.\n\nHow are you?\nThe sky is blue today."
    (tmp_path / "bn.txt").write_text(bn, encoding="utf-8")
    (tmp_path / "en.txt").write_text(en, encoding="utf-8")
    report = cli_report(tmp_path, ["--parallel", f"bn={tmp_path / 'bn.txt'}", "--parallel",
                                   f"en={tmp_path / 'en.txt'}"], shipped_tokenizers)
    e = fertility.show({"bn": bn, "en": en}, [gpt2, o200k], parallel=True)
    for ours, theirs in zip(e.to_dict()["tokenizers"], report["tokenizers"], strict=True):
        assert ours["parallel"] == theirs["parallel"]
        assert ours["languages"] == theirs["languages"]
    page = e._repr_html_()
    assert page.startswith("<style>") and "bn premium (vs en)" in page
    assert f"{e.parallel['gpt2']['bn'].premium:.3f}" in page


def test_misaligned_parallel_text_and_other_bad_input(gpt2):
    with pytest.raises(fertility.InputError, match="the bn text has 2 non-blank lines"):
        explore({"bn": "এক\nদুই", "en": "one"}, [gpt2], parallel=True)
    with pytest.raises(fertility.InputError, match="empty"):
        explore(" \n\n", [gpt2])
    with pytest.raises(fertility.InputError, match="label"):
        explore({"../x": "text"}, [gpt2])
    with pytest.raises(fertility.InputError, match="no tokenizer"):
        explore("text", [])


def test_size_limit_counts_utf8_bytes():
    at_limit = "ক" * (MAX_TEXT_BYTES // 3) + "a" * (MAX_TEXT_BYTES % 3)  # three bytes a letter
    assert len(at_limit.encode("utf-8")) == MAX_TEXT_BYTES
    check_size({"bn": at_limit})
    with pytest.raises(TextTooLarge, match=f"{MAX_TEXT_BYTES + 1:,} bytes"):
        check_size({"bn": at_limit, "en": "a"})


def test_picker_measures_the_ticked_tokenizers(gpt2, o200k):
    pytest.importorskip("ipywidgets", reason="ipywidgets comes with the dev and notebooks extras")
    from fertility.present.explorer import picker

    control = picker(BANGLA, [gpt2, o200k], chosen=[o200k], lang="bn")
    boxes, output = control.children[0].children, control.children[1]
    assert [b.value for b in boxes] == [False, True]
    assert output.value == explore(BANGLA, [o200k], lang="bn").html()
    boxes[0].value = True  # ticking gpt2 measures both
    assert output.value == explore(BANGLA, [gpt2, o200k], lang="bn").html()
    boxes[0].value = boxes[1].value = False
    assert "Tick at least one" in output.value


@pytest.mark.shared
def test_unk_and_byte_fallback_tokens_are_marked(shared_tok):
    text = "আমি 😀 漢字 ঋ ৠ ꧁ test"
    e = explore(text, [shared_tok("bangla-bert-base"), shared_tok("llama2")])
    page = e.html()
    for name, flag, cls, title in (("bangla-bert-base", "unk", "unk", "UNK"),
                                   ("llama2", "byte_fallback", "bf", "byte fallback")):
        flagged = sum(getattr(s, flag) for lines in e.segments[name].values() for line in lines for s in line)
        assert flagged > 0  # a WordPiece UNK for the emoji, llama2's <0x..> pieces for the rare characters
        cells = "".join(re.findall(rf"<div class='cell' data-tokenizer='{name}'.*?</div>", page, flags=re.S))
        assert len(re.findall(rf'class="tok[^"]*\b{cls}\b[^"]*" title="[^"]*{title}', cells)) == flagged


@pytest.mark.parametrize("texts, words", [(12345, "texts must be"), ({"bn": 7}, "texts['bn'] must be"),
                                          (["আমি"], "texts must be")])
def test_show_names_what_it_expected(texts, words):
    with pytest.raises(TypeError, match=re.escape(words)):
        fertility.show(texts, ["gpt2"])
