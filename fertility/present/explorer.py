"""The explorer: a pasted text (or a parallel pair) under several tokenizers, drawn as coloured token spans
beside the report's figures. ``fertility serve`` (the web app) and ``fertility.show`` (Jupyter) both show
:meth:`Exploration.html`, the same HTML.

The figures come from the report's own code, so they equal ``fertility report --detail-every 1`` on the same
text saved as a ``.txt`` file: the text is read as such a file is (one document per non-blank line,
:func:`pasted_documents`), measured by :func:`fertility.analyze`, a parallel pair is aligned and its premium
taken by :mod:`fertility.premium`, and the spans are :func:`fertility.segments.token_segments` drawn by
:func:`fertility.present.viewer.token_spans`. Every piece of text in the HTML is escaped.
"""

from __future__ import annotations

import html
from collections.abc import Mapping, Sequence
from dataclasses import dataclass
from pathlib import Path

from common.cli import check_label
from common.errors import InputError
from fertility.analysis import Report, analyze
from fertility.premium import ParallelMetrics, aligned, premium
from fertility.present import viewer
from fertility.present.report import COLUMNS, EXPLANATIONS, ceiling_text, folded_scripts, metrics_row, plural
from fertility.scoring.traps import verdicts
from fertility.segments import TokenSegment, token_segments
from fertility.text import Document, TextError
from fertility.tokenizers import Tokenizer, load_tokenizer

# The most UTF-8 bytes of text one request of the web app may carry (all its texts together).
MAX_TEXT_BYTES = 1_000_000
# Characters drawn as spans (per language): a browser stays responsive; the figures cover the whole text.
DRAWN_CHARS = 20_000
DEFAULT_LANG = "und"  # BCP-47 "undetermined": the label of a text nobody labelled
MAX_COLUMNS = 12  # the CSS below has a grid for up to this many tokenizers side by side
FORMATS = {attr: fmt for _, attr, fmt in COLUMNS}

CSS = viewer.CSS + """
.fx {font-family: sans-serif; font-size: 14px}
.fx table {border-collapse: collapse; font-size: 13px; margin: 0.4em 0 1em}
.fx td, .fx th {border: 1px solid #ccc; padding: 2px 6px; text-align: right}
.fx td:first-child, .fx th:first-child {text-align: left}
.fx td.verdict {text-align: left}
.fx .note {color: #555; font-size: 12px}
.fx .more {color: #b71c1c}
.fx .less {color: #1b5e20}
.fx .grid {display: grid; gap: 0.3em 1.2em; overflow-x: auto}
.fx .head {font-weight: bold; border-bottom: 1px solid #ccc; padding-bottom: 0.2em}
.fx .cell .tokens {font-size: 18px; line-height: 2}
.fx .cell .lang {font-size: 10px; color: #777; margin-right: 0.4em}
.fx details {margin: 0.3em 0}
.fx summary {cursor: pointer}
""" + "\n".join(f".fx .grid.n{n} {{grid-template-columns: repeat({n}, minmax(16em, 1fr))}}"
               for n in range(1, MAX_COLUMNS + 1))


def pasted_documents(text: str, source: str) -> list[Document]:
    """``text`` as ``fertility report`` reads a ``.txt`` file (fertility.text): one document per line split at
    "\\n" only, line ends and a leading BOM removed, blank lines skipped, 1-based physical line numbers kept."""
    docs = []
    for number, line in enumerate(text.split("\n"), 1):
        if number == 1:
            line = line.removeprefix("\ufeff")
        line = line.rstrip("\r\n")
        if line.strip():
            docs.append(Document(line, source, number))
    return docs


class TextTooLarge(InputError):
    """Texts over the web app's limit (:data:`MAX_TEXT_BYTES`)."""


def check_size(texts: Mapping[str, str], limit: int = MAX_TEXT_BYTES) -> None:
    """A :class:`TextTooLarge` when the texts together are over ``limit`` UTF-8 bytes."""
    size = sum(len(t.encode("utf-8")) for t in texts.values())
    if size > limit:
        raise TextTooLarge(f"the text is {size:,} bytes of UTF-8; the limit is {limit:,} bytes ({limit / 1e6:g} MB): "
                         "paste or drop a shorter text")


@dataclass
class Exploration:
    """Texts per language measured under some tokenizers, with the tokens of the drawn lines."""

    documents: dict[str, list[Document]]  # per language, as read by pasted_documents
    report: Report  # fertility.analyze on those documents (everything in detail)
    drawn: dict[str, list[str]]  # per language, the lines drawn as spans (the last may be cut short)
    segments: dict[str, dict[str, list[list[TokenSegment]]]]  # tokenizer -> language -> one list per drawn line
    parallel: dict[str, dict[str, ParallelMetrics]]  # tokenizer -> language -> premium ({} unless parallel)
    reference: str | None = None  # the parallel reference language

    @property
    def languages(self) -> list[str]:
        return list(self.documents)

    def tokens(self, name: str, lang: str | None = None) -> int:
        """Tokenizer ``name``'s token count of language ``lang``'s text (of all the text for None)."""
        t = self.report.tokenizer(name)
        return round(sum(m.tokens for k, m in t.languages.items() if lang in (None, k)))

    def to_dict(self) -> dict:
        """The figures as report.json writes them, per tokenizer, plus the text's own counts."""
        judged = verdicts(self.report.tokenizers)
        return {
            "languages": {lang: {"documents": len(docs), "chars": sum(len(d.text) for d in docs),
                                 "drawn_chars": sum(map(len, self.drawn[lang]))}
                          for lang, docs in self.documents.items()},
            "reference": self.reference,
            "tokenizers": [{"name": t.name, "kind": t.kind, "vocab_size": t.vocab_size,
                            "tokens": {lang: self.tokens(t.name, lang) for lang in self.languages},
                            "languages": {k: m.to_dict() for k, m in t.languages.items()},
                            "scripts": {k: m.to_dict() for k, m in t.scripts.items()},
                            "parallel": {k: p.to_dict() for k, p in self.parallel.get(t.name, {}).items()},
                            "traps": [x.to_dict() for x in t.traps],
                            "verdict": judged[t.name].to_dict()} for t in self.report.tokenizers],
        }

    def html(self, *, style: bool = True) -> str:
        """The explorer's HTML: summary, figures per script, then the spans side by side. ``style=False``
        leaves out the ``<style>`` element (the web app serves :data:`CSS` itself)."""
        parts = [f"<style>{CSS}</style>"] if style else []
        parts.append('<div class="viewer fx">')
        parts += self._summary()
        parts += self._scripts()
        parts += self._spans()
        parts.append("</div>")
        return "\n".join(parts)

    def _repr_html_(self) -> str:
        return self.html()

    def _summary(self) -> list[str]:
        toks = self.report.tokenizers
        first = toks[0].name
        header = ["tokenizer", "kind", "vocabulary"]
        for lang in self.languages:
            header += [f"{lang} tokens", f"{lang} chars/token", f"{lang} ceiling"]
        if len(toks) > 1:
            header.append(f"tokens vs {first}")
        premium_langs = [lang for lang in self.languages if self.parallel and lang != self.reference]
        header += [f"{lang} premium (vs {self.reference})" for lang in premium_langs]
        header.append("verdict")
        rows = []
        for t in toks:
            cells = [_esc(t.name), _esc(t.kind), f"{t.vocab_size:,}"]
            for lang in self.languages:
                m = t.languages[lang]
                cells += [f"{self.tokens(t.name, lang):,}", FORMATS["chars_per_token"].format(m.chars_per_token),
                          _esc(ceiling_text(m))]
            if len(toks) > 1:
                cells.append(self._difference(t.name, first))
            cells += [f"{self.parallel[t.name][lang].premium:.3f}" for lang in premium_langs]
            rows.append(cells)
        judged = verdicts(toks)
        out = ["<table class='summary'><tr>" + "".join(f"<th>{_esc(h)}</th>" for h in header) + "</tr>"]
        for t, cells in zip(toks, rows, strict=True):
            out.append(f"<tr data-tokenizer='{_esc(t.name)}'>" + "".join(f"<td>{c}</td>" for c in cells)
                       + f"<td class='verdict'>{_esc(judged[t.name].text)}</td></tr>")
        out.append("</table>")
        explained = ("chars/token", "ceiling", *(("premium",) if premium_langs else ()), "verdict")
        out.append("<p class='note'>" + "<br>".join(f"<b>{_esc(name)}</b>: {_esc(text)}"
                                                      for name, text in EXPLANATIONS if name in explained) + "</p>")
        return out

    def _difference(self, name: str, first: str) -> str:
        if name == first:
            return "-"
        a, b = self.tokens(name), self.tokens(first)
        diff = a - b
        pct = f" ({diff / b:+.1%})" if b else ""
        cls = "more" if diff > 0 else "less" if diff < 0 else ""
        return f"<span class='{cls}'>{diff:+,}{pct}</span>"

    def _scripts(self) -> list[str]:
        """Chars/token and ceiling per language and script, tokenizers side by side; then every figure of the
        report's tables per tokenizer (the rows report.md writes), folded away."""
        toks = self.report.tokenizers
        header = ["", "chars"] + [f"{t.name} {what}" for t in toks for what in ("chars/token", "ceiling")]
        out = ["<h3>Per language and script</h3>",
               "<table class='scripts'><tr>" + "".join(f"<th>{_esc(h)}</th>" for h in header) + "</tr>"]
        rows = [(f"{lang} (all)", [t.languages[lang] for t in toks]) for lang in self.languages]
        for i, (label, _) in enumerate(folded_scripts(toks[0].scripts)):
            rows.append((label, [folded_scripts(t.scripts)[i][1] for t in toks]))
        for label, metrics in rows:
            cells = [_esc(label), f"{metrics[0].chars:,}"]
            for m in metrics:
                cells += [FORMATS["chars_per_token"].format(m.chars_per_token), _esc(ceiling_text(m))]
            out.append(f"<tr data-row='{_esc(label)}'>" + "".join(f"<td>{c}</td>" for c in cells) + "</tr>")
        out.append("</table>")
        full_header = "".join(f"<th>{_esc(h)}</th>" for h in ["", *(c[0] for c in COLUMNS)])
        for t in toks:
            out.append(f"<details data-tokenizer='{_esc(t.name)}'><summary>{_esc(t.name)}: every figure "
                       f"({_esc(t.kind)}, vocabulary {t.vocab_size:,})</summary>")
            out.append(f"<table class='full'><tr>{full_header}</tr>")
            for label, m in [*t.languages.items(), *folded_scripts(t.scripts)]:
                out.append("<tr>" + "".join(f"<td>{_esc(c)}</td>" for c in metrics_row(label, m)) + "</tr>")
            out.append("</table>")
            traps = [f"{x.script} [{x.rule}]: {x.cause}" for x in t.traps] or ["no traps"]
            out.append("<ul>" + "".join(f"<li>{_esc(x)}</li>" for x in traps) + "</ul></details>")
        return out

    def _spans(self) -> list[str]:
        toks = self.report.tokenizers
        n = min(len(toks), MAX_COLUMNS)
        out = ["<h3>Tokens</h3>",
               "<p class='note'>Each coloured span is one token; hover for its id and bytes. A red bar marks a token "
               "that starts inside a grapheme cluster; a middle dot, a token holding only the rest of a "
               "character's bytes; grey with a black outline, the UNK token; a purple wave, a byte-fallback "
               "piece.</p>"]
        for lang in self.languages:
            shown = sum(map(len, self.drawn[lang]))
            total = sum(len(d.text) for d in self.documents[lang])
            if shown < total:
                out.append(f"<p class='note truncated'>{_esc(lang)}: tokens drawn for the first {shown:,} "
                           f"characters of {total:,}; the figures above are over all of it.</p>")
        out.append(f"<div class='grid n{n}'>")
        first = toks[0].name
        for t in toks[:n]:
            diff = f", {self._difference(t.name, first)} vs {_esc(first)}" if t.name != first else ""
            out.append(f"<div class='head' data-tokenizer='{_esc(t.name)}'>{_esc(t.name)} "
                       f"<span class='count'>{plural(self.tokens(t.name), 'token')}{diff}</span></div>")
        for lang, k in self._line_order():
            text = self.drawn[lang][k]
            for t in toks[:n]:
                segments = self.segments[t.name][lang][k]
                tag = f"<span class='lang'>{_esc(lang)}</span>" if len(self.languages) > 1 else ""
                out.append(f"<div class='cell' data-tokenizer='{_esc(t.name)}' data-lang='{_esc(lang)}' "
                           f"lang='{_esc(lang)}'>{tag}<span class='tokens'>{viewer.token_spans(text, segments)}"
                           "</span></div>")
        out.append("</div>")
        return out

    def _line_order(self) -> list[tuple[str, int]]:
        """(language, drawn line) in the order drawn: language by language, or sentence by sentence (parallel)."""
        if self.parallel:
            count = min(len(lines) for lines in self.drawn.values())
            return [(lang, k) for k in range(count) for lang in self.languages]
        return [(lang, k) for lang in self.languages for k in range(len(self.drawn[lang]))]


def explore(
    texts: str | Mapping[str, str],
    tokenizers: Sequence[str | Tokenizer],
    *,
    lang: str = DEFAULT_LANG,
    parallel: bool = False,
    reference: str | None = None,
    tokenizer_dir: str | Path | None = None,
) -> Exploration:
    """Measure ``texts`` (one text labelled ``lang``, or a text per language) under ``tokenizers`` (names,
    paths or loaded). ``parallel``: the texts say the same thing line by line; premiums are taken against
    ``reference`` (default: the last language). Bad input is an :class:`InputError` saying what to fix."""
    if not isinstance(texts, str | Mapping):
        raise TypeError(f"texts must be a string or a mapping of language -> text, not {type(texts).__name__}")
    texts = {lang: texts} if isinstance(texts, str) else dict(texts)
    for label, text in texts.items():
        if not isinstance(text, str):
            raise TypeError(f"texts[{label!r}] must be a string (the text), not {type(text).__name__}")
    if not texts:
        raise TextError("no text: expected at least one text")
    for label in texts:
        check_label(label)
    if not tokenizers:
        raise InputError("no tokenizer: choose at least one")
    toks = [load_tokenizer(t, tokenizer_dir) for t in tokenizers]
    documents = {label: pasted_documents(text, f"the {label} text") for label, text in texts.items()}
    for label, docs in documents.items():
        if not docs:
            raise TextError(f"the {label} text is empty: expected some text (blank lines are skipped)")
    parallel_text = None
    if parallel:
        if len(documents) < 2:
            raise InputError("parallel mode needs two texts that say the same thing line by line")
        reference = reference or list(documents)[-1]
        if reference not in documents:
            raise InputError(f"reference language {reference!r} is not among the texts ({', '.join(documents)})")
        parallel_text = aligned(documents, {label: f"the {label} text" for label in documents})
    report = analyze(toks, {label: [d.text for d in docs] for label, docs in documents.items()},
                     reference=reference or "en", progress=False, detail_every=1)
    drawn = _drawn_lines({label: [d.text for d in docs] for label, docs in documents.items()}, parallel)
    segments = {t.name: {label: [token_segments(t, line) for line in lines] for label, lines in drawn.items()}
                for t in toks}
    premiums = {t.name: premium(t, parallel_text, reference) for t in toks} if parallel_text else {}
    return Exploration(documents, report, drawn, segments, premiums, reference if parallel else None)


def show(texts: str | Mapping[str, str], tokenizers: Sequence[str | Tokenizer] = ("gpt2", "o200k_base"),
         **options) -> Exploration:
    """The explorer inline in Jupyter: ``fertility.show(text, tokenizers=["gpt2", "o200k_base"])`` returns an
    :class:`Exploration`, which a notebook displays as the web app's HTML (options as :func:`explore`)."""
    return explore(texts, tokenizers, **options)


def picker(texts: str | Mapping[str, str], tokenizers: Sequence[str | Tokenizer], *,
           chosen: Sequence[str | Tokenizer] | None = None, tokenizer_dir: str | Path | None = None, **options):
    """An ipywidgets control for a notebook: a checkbox per tokenizer of ``tokenizers`` (``chosen`` ticked, by
    default the first two) above :func:`show`'s HTML for the ticked ones, measured again on each change."""
    import ipywidgets as widgets

    toks = {t.name: t for t in (load_tokenizer(spec, tokenizer_dir) for spec in tokenizers)}
    ticked = {load_tokenizer(spec, tokenizer_dir).name for spec in chosen} if chosen else set(list(toks)[:2])
    boxes = [widgets.Checkbox(value=name in ticked, description=name, indent=False) for name in toks]
    output = widgets.HTML()

    def update(_change=None) -> None:
        names = [box.description for box in boxes if box.value]
        output.value = (explore(texts, [toks[n] for n in names], **options).html() if names
                        else "<p>Tick at least one tokenizer.</p>")

    for box in boxes:
        box.observe(update, names="value")
    update()
    return widgets.VBox([widgets.HBox(boxes), output])


def _drawn_lines(lines: dict[str, list[str]], parallel: bool) -> dict[str, list[str]]:
    """The first lines of each language up to ``DRAWN_CHARS`` characters, the last cut after a space; for
    parallel texts the same number of sentences in every language."""
    drawn = {lang: _head(docs, DRAWN_CHARS) for lang, docs in lines.items()}
    if parallel:
        count = min(map(len, drawn.values()))
        drawn = {lang: _head(lines[lang][:count], DRAWN_CHARS) for lang in lines}
    return drawn


def _head(docs: list[str], budget: int) -> list[str]:
    out, used = [], 0
    for doc in docs:
        if used >= budget:
            break
        room = budget - used
        if len(doc) > room:
            cut = doc.rfind(" ", 0, room)
            doc = doc[: cut if cut > room // 2 else room]
        out.append(doc)
        used += len(doc)
    return out


def _esc(text: str) -> str:
    return html.escape(str(text), quote=True)
