"""The token viewer of report.html: a few sentences per language, each tokenizer's tokens as coloured spans.

Static HTML and CSS only (no script, nothing fetched), so the page works offline from a file. Each token is a
``<span class="tok">`` whose ``title`` (shown on hover) gives its id and its bytes in hex; a token that starts
inside a grapheme cluster (a vowel sign, hasanta or nukta cut from its letter) is marked ``cut`` (a red bar
before it), an UNK token is grey with a black outline and a byte-fallback piece is underlined with a purple
wave. A character whose UTF-8 bytes are split between tokens is shown in the token where it starts; the
tokens holding only its remaining bytes show a middle dot. All corpus text is HTML-escaped.

Bangla needs a font with Bengali glyphs: the page names common ones (Noto Sans Bengali, and those of the
Debian packages fonts-beng-extra and fonts-lohit-beng-bengali) before the generic family.
"""

from __future__ import annotations

import html

from fertility.analysis import Report
from fertility.segments import TokenSegment

FONT_STACK = ('"Noto Sans Bengali", "Noto Serif Bengali", "Lohit Bengali", "Mukti Narrow", "Mukti", "Likhan", '
              '"Akaash", "Vrinda", "Nirmala UI", "Kohinoor Bangla", "Bangla Sangam MN", sans-serif')
# Token backgrounds, cycled; light enough for black text.
COLOURS = ("#ffe0b2", "#c8e6c9", "#bbdefb", "#f8bbd0", "#d1c4e9", "#fff59d")

CSS = f"""
.viewer .tokens {{font-family: {FONT_STACK}; font-size: 20px; line-height: 2.1}}
.viewer .sentence {{margin: 0.4em 0 1.2em}}
.viewer .row {{display: flex; gap: 0.8em; align-items: baseline}}
.viewer .name {{font-family: sans-serif; font-size: 12px; color: #555; min-width: 11em; text-align: right}}
.viewer .tok {{border-radius: 3px; padding: 1px 0; white-space: pre-wrap}}
.viewer .tok.cut {{box-shadow: inset 3px 0 0 #d32f2f}}
.viewer .tok.unk {{outline: 2px solid #000; background: #9e9e9e}}
.viewer .tok.bf {{text-decoration: underline wavy #6a1b9a}}
.viewer .count {{font-family: sans-serif; font-size: 11px; color: #777}}
""" + "\n".join(f".viewer .c{i} {{background: {c}}}" for i, c in enumerate(COLOURS))


def token_spans(text: str, segments: list[TokenSegment]) -> str:
    """``text``'s tokens as escaped ``<span>`` elements, in order."""
    data = text.encode("utf-8")
    # the character starting at each byte offset (None for continuation bytes)
    char_at: dict[int, str] = {}
    offset = 0
    for ch in text:
        char_at[offset] = ch
        offset += len(ch.encode("utf-8"))
    parts = []
    for i, seg in enumerate(segments):
        shown = "".join(char_at.get(b, "") for b in range(seg.byte_start, seg.byte_end)) or "\u00b7"
        hex_bytes = " ".join(f"{b:02x}" for b in data[seg.byte_start:seg.byte_end]) or "(none)"
        flags = [what for on, what in ((seg.cuts_cluster, "starts inside a grapheme cluster"), (seg.unk, "UNK"),
                                       (seg.byte_fallback, "byte fallback")) if on]
        title = " | ".join([f"id {seg.token_id}", f"bytes {hex_bytes}", *flags])
        classes = (f"tok c{i % len(COLOURS)}" + (" cut" if seg.cuts_cluster else "") + (" unk" if seg.unk else "")
                   + (" bf" if seg.byte_fallback else ""))
        parts.append(f'<span class="{classes}" title="{html.escape(title)}">{html.escape(shown)}</span>')
    return "".join(parts)


def viewer_html(report: Report) -> str:
    """The viewer section: per language, per sample sentence, one row of token spans per tokenizer."""
    if not report.samples:
        return ""
    out = ['<section class="viewer" id="viewer"><h2>Token viewer</h2>',
           '<p class="count">Each coloured span is one token; hover for its id and bytes. A red bar marks a token '
           'that starts inside a grapheme cluster (a cut a reader would not make). A middle dot is a token holding '
           'only the remaining bytes of a character.</p>']
    for lang, sentences in report.samples.items():
        out.append(f"<h3>{html.escape(lang)}</h3>")
        for k, text in enumerate(sentences):
            out.append(f'<div class="sentence" lang="{html.escape(lang)}">')
            for t in report.tokenizers:
                segments = t.samples.get(lang, [])
                if k >= len(segments):
                    continue
                cuts = sum(s.cuts_cluster for s in segments[k])
                out.append(f'<div class="row"><span class="name">{html.escape(t.name)}<br>'
                           f'<span class="count">{len(segments[k])} tokens, {cuts} cuts</span></span>'
                           f'<span class="tokens">{token_spans(text, segments[k])}</span></div>')
            out.append("</div>")
    out.append("</section>")
    return "\n".join(out)
