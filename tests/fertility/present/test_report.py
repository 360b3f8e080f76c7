"""The report's pages (fertility.present.report, the explorer's summary) and figures: a verdict on too little
text says so, user text is escaped, no Markdown leaks into the HTML, counts are pluralised, the figures show
the summary's numbers, and legends and labels do not cover bars or each other."""

from __future__ import annotations

import dataclasses
import html
import json
import re

import pytest
from matplotlib.backends.backend_agg import FigureCanvasAgg

import fertility
from fertility.present import plots
from fertility.present.explorer import explore
from fertility.present.report import folded_scripts, html_page, markdown, summary, write_report
from fertility.scoring.metrics import Metrics
from fertility.scoring.traps import MIN_CHARS

SENTENCE = "আমি বাংলায় গান গাই। রবীন্দ্রনাথ ঠাকুরের স্বাধীনতা ও ক্ষমতা।"  # about 55 characters
ENGLISH = "The quick brown fox jumps over the lazy dog, and the tokenizer counts its pieces."
PLANTED = "<script>window.planted = 1</script> & <b>bold</b>"
NOT_JUDGED = "not enough text to judge"


@pytest.fixture(scope="module")
def short_report(gpt2):
    return fertility.analyze([gpt2], {"bn": [SENTENCE]}, progress=False)


@pytest.fixture(scope="module")
def long_report(gpt2, o200k):
    """Enough Bangla for the rules (GPT-2's traps fire) and English, under two tokenizers."""
    return fertility.analyze([gpt2, o200k], {"bn": [SENTENCE] * 20, "en": [ENGLISH, PLANTED] * 10}, progress=False)


def test_a_short_text_is_not_judged_in_every_page(short_report, tmp_path):
    assert len(SENTENCE) < MIN_CHARS
    expected = f"{NOT_JUDGED}: {len(SENTENCE)} characters of Bengali (the rules need {MIN_CHARS} characters"
    out = write_report(short_report, tmp_path / "report")
    page = (out / "report.html").read_text(encoding="utf-8")
    assert expected in html.unescape(page) and "<td>OK</td>" not in page
    assert expected in (out / "report.md").read_text(encoding="utf-8")
    verdict = json.loads((out / "report.json").read_text(encoding="utf-8"))["summary"]["verdicts"]["gpt2"]
    assert verdict["verdict"].startswith(expected) and verdict["judged"] is False
    assert verdict["not_enough_text"] == [{"script": "Bengali", "chars": len(SENTENCE), "needed": MIN_CHARS}]


def test_a_short_text_is_not_judged_in_the_explorer(gpt2):
    # what `fertility serve` shows and returns as JSON for one pasted sentence
    found = explore(SENTENCE, [gpt2], lang="bn")
    cell = re.search(r"<td class='verdict'>(.*?)</td>", found.html()).group(1)
    assert html.unescape(cell).startswith(f"{NOT_JUDGED}: {len(SENTENCE)} characters of Bengali")
    (t,) = found.to_dict()["tokenizers"]
    assert t["verdict"]["judged"] is False and t["verdict"]["verdict"].startswith(NOT_JUDGED)


def test_the_page_escapes_user_text_and_renders_trap_markup(long_report):
    page = html_page(long_report, {})
    # the viewer draws the planted line token by token: each piece escaped, no element of it in the page
    assert "<script" not in page and "<b>" not in page
    assert PLANTED.split(" &")[0] in html.unescape(re.sub(r"<[^>]+>", "", page))  # yet it is drawn, as text
    traps = page[page.index("gpt2 (hf, vocabulary 50,257): traps"):]
    traps = traps[:traps.index("</ul>")]
    assert "<strong>Bengali</strong> <code>low_chars_per_token</code>" in traps
    assert "`" not in traps and "**" not in traps
    # and each trap of GPT-2 gives its own cause: no sentence said twice
    causes = re.findall(r"</code>: (.*?)</li>", traps)
    sentences = [s for c in causes for s in c.split(": ")]
    assert len(causes) >= 2 and len(sentences) == len(set(sentences))


def test_counts_are_pluralised(long_report):
    scripts = {"Bengali": Metrics(chars=100_000), "Latin": Metrics(chars=100), "Cyrillic": Metrics(chars=50)}
    assert [label for label, _ in folded_scripts(scripts)][-1] == "other (2 scripts)"
    del scripts["Cyrillic"]
    assert [label for label, _ in folded_scripts(scripts)][-1] == "other (1 script)"
    text = markdown(dataclasses.replace(long_report, texts=[{"lang": "bn", "source": "a.txt", "documents": 1,
                                                              "chars": 1}]))
    assert "bn: a.txt (1 document, 1 character)" in text


def _summary_cells(report, column: str) -> dict[str, str]:
    header, rows = summary(report)
    return {row[0]: row[header.index(column)] for row in rows}


def test_the_figures_show_the_summarys_numbers(long_report):
    fig = plots.ceiling_drawing(long_report)
    for ax in fig.axes:
        lang = ax.get_title()
        shown = {label.get_text().split("\n")[0]: label.get_text().split("ceiling ")[1].rstrip(plots.PHRASE_MARK)
                 for label in ax.get_xticklabels()}
        assert shown == _summary_cells(long_report, f"{lang} ceiling")
    fig = plots.chars_per_token_drawing(long_report)
    (ax,) = fig.axes
    handles, names = ax.get_legend_handles_labels()
    for lang_index, lang in enumerate(plots.languages(long_report)):
        heights = {name: f"{bars.patches[lang_index].get_height():.2f}" for bars, name in zip(handles, names,
                                                                                            strict=True)}
        assert heights == _summary_cells(long_report, f"{lang} chars/token")


def _overlap(a, b) -> bool:
    return a.x0 < b.x1 and b.x0 < a.x1 and a.y0 < b.y1 and b.y0 < a.y1


def _six(report):
    """Six tokenizers with long names (copies of the report's first), as the notebook compares."""
    t = report.tokenizers[0]
    return dataclasses.replace(report, tokenizers=[dataclasses.replace(t, name=f"{name}-tokenizer") for name in
                                                   ("gpt2", "o200k_base", "cl100k_base", "llama3", "gemma3", "bnlp")])


@pytest.mark.parametrize("draw", [plots.chars_per_token_drawing, plots.ceiling_drawing])
def test_legends_and_labels_cover_nothing(long_report, draw):
    for report in (long_report, _six(long_report)):
        fig = draw(report)
        FigureCanvasAgg(fig).draw()
        renderer = fig.canvas.get_renderer()
        legends = [lg.get_window_extent(renderer) for lg in [*fig.legends, *(ax.get_legend() for ax in fig.axes)]
                   if lg is not None]
        assert legends
        for ax in fig.axes:
            bars = [p.get_window_extent(renderer) for p in ax.patches]
            assert bars and not any(_overlap(lg, bar) for lg in legends for bar in bars)
            labels = [t.get_window_extent(renderer) for t in ax.get_xticklabels() if t.get_text()]
            assert not any(_overlap(a, b) for i, a in enumerate(labels) for b in labels[i + 1:])
