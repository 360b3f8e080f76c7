"""The token viewer of report.html: escaped spans in Python, and the page itself in a real headless Chromium.

The browser test needs Chromium from the system's packages and Playwright (``make install`` installs both;
Playwright drives ``/usr/bin/chromium``, it downloads no browser). Its screenshot is written to
``test-output/fertility-report.png`` at the repository root.
"""

from __future__ import annotations

import html
import re
from pathlib import Path

import pytest

import fertility
from fertility.present.viewer import token_spans

PLANTED = "<script>window.planted = 1; alert('planted')</script> & <b>bold</b>"
OUTPUT = Path(__file__).resolve().parents[3] / "test-output"


def test_spans_escape_text_and_mark_cuts(gpt2):
    text = "<b>ক্ষ</b> " + PLANTED
    segments = fertility.token_segments(gpt2, text)
    page = token_spans(text, segments)
    assert page.count('<span class="tok') == len(segments)
    assert "<script" not in page and "<b>" not in page  # every piece of markup is escaped
    assert "cut" in page  # gpt2 cuts the Bangla conjunct's bytes and marks
    # the spans' text is the text, every character once (a token holding only a character's tail shows a dot)
    shown = html.unescape(re.sub(r"<[^>]+>", "", page))
    assert shown.replace("\u00b7", "") == text


@pytest.fixture(scope="module")
def report_page(tmp_path_factory, shipped_tokenizers, sample_dir):
    bn = [d.text for d in fertility.iter_documents(str(sample_dir / "parallel" / "ben_Beng.txt.gz"), max_chars=2000)]
    en = [PLANTED] + [d.text for d in fertility.iter_documents(str(sample_dir / "parallel" / "eng_Latn.txt.gz"),
                                                             max_chars=2000)]
    report = fertility.analyze(["gpt2", "o200k_base"], {"bn": bn, "en": en}, tokenizer_dir=shipped_tokenizers,
                               progress=False)
    out = fertility.write_report(report, tmp_path_factory.mktemp("rep") / "report")
    return out / "report.html"


def test_page_holds_bangla_and_no_planted_markup(report_page):
    page = report_page.read_text(encoding="utf-8")
    assert "<script" not in page  # the page is static; the planted tag is text
    assert "&lt;" in page and "&amp;" in page
    assert any("\u0980" <= ch <= "\u09ff" for ch in page)
    assert page.index("id='summary'") < page.index('id="viewer"') < page.index("<h2>Figures</h2>")


def test_viewer_in_headless_chromium(report_page, browser_page):
    with browser_page(1200, 900) as (page, problems, dialogs):
        page.goto(report_page.as_uri(), wait_until="load")
        assert problems == [] and dialogs == []
        assert page.evaluate("window.planted") is None  # the planted script did not run
        spans = page.locator(".viewer .tok")
        assert spans.count() > 50
        assert page.locator(".viewer .tok.cut").count() > 0  # gpt2 cuts Bangla clusters
        first = spans.first.get_attribute("title")
        assert first.startswith("id ") and "| bytes " in first
        english = page.locator('.viewer .sentence[lang="en"] .tokens').first.inner_text()
        assert PLANTED in english  # shown as the text it is
        bangla = page.locator('.viewer .sentence[lang="bn"] .tokens').first
        assert any("\u0980" <= ch <= "\u09ff" for ch in bangla.inner_text())
        # Real glyphs, not boxes: two different Bengali letters in the viewer's font draw differently
        # (missing glyphs all draw the same empty box) and draw something.
        drawn = page.evaluate("""() => {
            const font = getComputedStyle(document.querySelector('.viewer .tokens')).fontFamily;
            const c = document.createElement('canvas'); c.width = 80; c.height = 80;
            const x = c.getContext('2d');
            const draw = ch => { x.clearRect(0, 0, 80, 80); x.font = '48px ' + font; x.fillText(ch, 8, 60);
                                 return x.getImageData(0, 0, 80, 80).data.join(','); };
            const ka = draw('\\u0995'), ma = draw('\\u09ae'), blank = draw(' ');
            return {differ: ka !== ma, inked: ka !== blank};
        }""")
        assert drawn == {"differ": True, "inked": True}
        OUTPUT.mkdir(exist_ok=True)
        page.locator("#viewer").screenshot(path=str(OUTPUT / "fertility-viewer.png"))
        page.screenshot(path=str(OUTPUT / "fertility-report.png"), full_page=False)
