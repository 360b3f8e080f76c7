"""Writing a :class:`~fertility.analysis.Report`: report.json, report.md, report.html, and the terminal table.

The three files are written into a temporary folder beside ``out_dir`` and renamed into place together, so
a failure never leaves a partial report (an existing report at ``out_dir`` is replaced only on success).
"""

from __future__ import annotations

import base64
import html
import os
import re
from pathlib import Path

from common.fileio import atomic_write_text, write_json
from common.outdir import output_dir, publish_dir, staging_dir
from fertility.analysis import Report
from fertility.present import viewer
from fertility.scoring.metrics import COUNT_FIELDS, PHRASE_PIECES_PER_WORD, Metrics
from fertility.scoring.traps import MIN_CHARS, MIN_FRACTION_OF_BEST, verdicts

# (column header, attribute, format) of the per-language / per-script tables.
COLUMNS = (
    ("chars/token", "chars_per_token", "{:.3f}"),
    ("graphemes/token", "graphemes_per_token", "{:.3f}"),
    ("bytes/token", "bytes_per_token", "{:.3f}"),
    ("tokens/word", "tokens_per_word", "{:.2f}"),
    ("continued words", "continued_word_rate", "{:.1%}"),
    ("broken graphemes", "broken_grapheme_rate", "{:.1%}"),
    ("UNK", "unk_rate", "{:.2%}"),
    ("byte fallback", "byte_fallback_rate", "{:.2%}"),
    ("vocab used", "vocab_types_used", "{:,}"),
    ("ceiling", "pretoken_ceiling", "{:.2f}"),
    ("chars", "chars", "{:,}"),
)


def plural(n: int, noun: str) -> str:
    """``n`` and ``noun``, plural unless ``n`` is 1: "1 script", "2 scripts", "1,024 characters"."""
    return f"{n:,} {noun}" + ("" if n == 1 else "s")


def ceiling_text(m: Metrics, *, interval: bool = False) -> str:
    """A ceiling as the tables show it (``interval``: with its ± where estimated), marked "(phrases)" where it is
    a phrase's length and bounds nothing."""
    text = _estimate(m, "pretoken_ceiling", "{:.2f}") if interval else f"{m.pretoken_ceiling:.2f}"
    return text + (" (phrases)" if m.phrase_pieces else "")


def metrics_row(label: str, m: Metrics) -> list[str]:
    return [label] + [ceiling_text(m) if attr == "pretoken_ceiling" else fmt.format(getattr(m, attr))
                      for _, attr, fmt in COLUMNS]


def summary_rows(report: Report) -> tuple[list[str], list[list[str]]]:
    """One row per tokenizer and language: the terminal table."""
    header = ["tokenizer", "lang", "chars/tok", "graph/tok", "bytes/tok", "tok/word", "cont.words", "broken",
              "ceiling", "premium"]
    rows = []
    for t in report.tokenizers:
        for lang, m in t.languages.items():
            par = t.parallel.get(lang)
            rows.append([t.name, lang, f"{m.chars_per_token:.3f}", f"{m.graphemes_per_token:.3f}",
                         f"{m.bytes_per_token:.3f}", f"{m.tokens_per_word:.2f}", f"{m.continued_word_rate:.1%}",
                         f"{m.broken_grapheme_rate:.1%}", ceiling_text(m),
                         f"{par.premium:.2f}" if par else "-"])
    return header, rows


def terminal_table(report: Report) -> str:
    """A plain-text table of the summary, then the traps and balance warnings."""
    header, rows = summary_rows(report)
    widths = [max(len(r[i]) for r in [header, *rows]) for i in range(len(header))]
    lines = ["  ".join(c.rjust(w) if i > 1 else c.ljust(w) for i, (c, w) in enumerate(zip(r, widths, strict=True)))
             for r in [header, *rows]]
    lines.insert(1, "  ".join("-" * w for w in widths))
    if report.detail_every > 1:
        lines.append(f"(chars/tok and premium are exact; the other columns are estimated from one block of text in "
                     f"{report.detail_every}: intervals in report.json, --detail-every 1 for exact figures)")
    for t in report.tokenizers:
        if f := t.fairness():
            lines.append(f"FAIRNESS {t.name} (parallel text, vs {f.reference}): max premium {f.max_premium:.3f}, "
                         f"Gini {f.gini:.4f}")
    judged = verdicts(report.tokenizers)
    for t in report.tokenizers:
        for trap in t.traps:
            lines.append(f"TRAP {t.name} / {trap.script} [{trap.rule}]: {trap.cause}")
        for warning in t.balance.warnings:
            lines.append(f"BALANCE {t.name}: {warning}")
        lines.append(f"VERDICT {t.name}: {judged[t.name].text}")
    return "\n".join(lines)


# What each summary column means, shown under the summary.
EXPLANATIONS = (
    ("chars/token", "characters of the language's text per token: higher is cheaper (exact, every document)"),
    ("ceiling", "characters per pre-tokenizer piece: no vocabulary behind this pre-tokenizer can exceed it, "
                "so a ceiling near chars/token means the pre-tokenizer, not the vocabulary, is the limit. "
                "(phrases): the pre-tokenizer keeps several words in one piece (phrase merges: under "
                f"{PHRASE_PIECES_PER_WORD:g} pieces per word), so the ceiling is a phrase's length, far above "
                "what any vocabulary reaches: it bounds nothing there, the vocabulary is the limit"),
    ("premium", "tokens for the same sentences over the reference language's tokens (parallel text): 1 is parity"),
    ("verdict", "per script, the traps found (details at the end); per language, a drop: under "
                f"{MIN_FRACTION_OF_BEST:.0%} of the best other tokenizer's chars/token on the same text, i.e. "
                f"{1 / MIN_FRACTION_OF_BEST - 1:.0%} more tokens or worse; \"not enough text to judge\" for a script "
                f"with fewer than {MIN_CHARS:,} characters (the rules need that many to mean anything); "
                "OK when a script was judged and nothing was found"),
    ("max premium", "the largest premium of any language against the reference: 1 is parity"),
    ("Gini", "Gini coefficient of the languages' token counts for the same sentences: 0 when every language "
             "costs the same, up to (n - 1) / n when one language takes all the tokens"),
)
# Scripts with less than this share of the characters are summed into one "other" row of the tables.
MIN_TABLE_SHARE = 0.005


def _estimate(m: Metrics, rate: str, fmt: str) -> str:
    text = fmt.format(getattr(m, rate))
    half = m.ci95.get(rate)
    if rate in m.ci95 and half is None:  # an estimate from fewer than two sampled blocks: no interval to state
        return text + " ±?"
    return text + (f" ±{half:.2f}" if half else "")


def summary(report: Report) -> tuple[list[str], list[list[str]]]:
    """Every tokenizer side by side: chars/token and ceiling per language, premiums, and a verdict."""
    langs = list(report.tokenizers[0].languages) if report.tokenizers else []
    premium_langs = [lang for lang in (report.tokenizers[0].parallel if report.tokenizers else {})
                     if lang != report.reference]
    header = (["tokenizer"] + [f"{lang} chars/token" for lang in langs] + [f"{lang} ceiling" for lang in langs]
              + [f"{lang} premium" for lang in premium_langs] + ["verdict"])
    judged = verdicts(report.tokenizers)
    rows = []
    for t in report.tokenizers:
        rows.append([t.name] + [f"{t.languages[lang].chars_per_token:.2f}" for lang in langs]
                    + [ceiling_text(t.languages[lang], interval=True) for lang in langs]
                    + [f"{t.parallel[lang].premium:.2f}" for lang in premium_langs] + [judged[t.name].text])
    return header, rows



def fairness_table(report: Report) -> tuple[list[str], list[list[str]]] | None:
    """The summary's fairness table on parallel text, for any number of languages: per tokenizer each
    language's premium against the reference, the maximum premium and the Gini coefficient of the token
    counts; None without parallel text."""
    rows, langs = [], []
    for t in report.tokenizers:
        f = t.fairness()
        if f is None:
            continue
        langs = langs or [k for k in f.premium if k != f.reference]
        rows.append([t.name] + [f"{f.premium[k]:.3f}" for k in langs] + [f"{f.max_premium:.3f}", f"{f.gini:.4f}"])
    if not rows:
        return None
    header = ["tokenizer"] + [f"{k} premium (vs {report.reference})" for k in langs] + ["max premium", "Gini"]
    return header, rows


def folded_scripts(scripts: dict[str, Metrics]) -> list[tuple[str, Metrics]]:
    """Scripts with at least ``MIN_TABLE_SHARE`` of the characters, then one "other" row summing the rest."""
    total = sum(m.chars for m in scripts.values()) or 1
    kept = [(name, m) for name, m in scripts.items() if m.chars / total >= MIN_TABLE_SHARE]
    rest = [m for m in scripts.values() if m.chars / total < MIN_TABLE_SHARE]
    if rest:
        other = Metrics(documents=rest[0].documents)
        for m in rest:
            for name in COUNT_FIELDS:
                setattr(other, name, getattr(other, name) + getattr(m, name))
            other.vocab_types_used += m.vocab_types_used  # an upper bound: the scripts may share tokens
        kept.append((f"other ({plural(len(rest), 'script')})", other))
    return kept


def _sections(report: Report):
    """The report's details as (title, header, rows, notes) sections, shared by Markdown and HTML."""
    header = ["", *(c[0] for c in COLUMNS)]
    judged = verdicts(report.tokenizers)
    for t in report.tokenizers:
        title = f"{t.name} ({t.kind}, vocabulary {t.vocab_size:,})"
        yield title + ": languages", header, [metrics_row(k, m) for k, m in t.languages.items()], []
        yield title + ": scripts", header, [metrics_row(k, m) for k, m in folded_scripts(t.scripts)], []
        if t.parallel:
            rows = [[lang, f"{p.sentences:,}", f"{p.chars_per_token:.3f}", f"{p.premium:.3f}",
                     f"{p.median_premium:.3f}"] for lang, p in t.parallel.items()]
            yield (title + f": parallel text (reference {report.reference})",
                   ["", "sentences", "chars/token", "premium (total)", "premium (median)"], rows, [])
        b = t.balance
        rows = [[lang, f"{b.char_share[lang]:.1%}", f"{b.byte_share[lang]:.1%}", f"{b.token_share[lang]:.1%}"]
                for lang in b.char_share]
        yield title + ": balance", ["", "chars", "bytes", "tokens"], rows, b.warnings
        traps = [f"**{x.script}** `{x.rule}`: {x.cause}" for x in t.traps] or ["no traps"]
        yield title + ": traps", [], [], traps + [f"verdict: {judged[t.name].text}"]


def _md_table(header: list[str], rows: list[list[str]]) -> list[str]:
    return ["| " + " | ".join(header) + " |", "|" + "---|" * len(header), *("| " + " | ".join(r) + " |" for r in rows)]


def markdown(report: Report) -> str:
    """report.md: the summary and what its columns mean, then every table of the report and the traps."""
    out = ["# Tokenizer fertility report", "", _sources_line(report), "", "## Summary", ""]
    out += _md_table(*summary(report)) + [""]
    fair = fairness_table(report)
    if fair:
        out += [f"Fairness on parallel text (reference {report.reference}):", ""] + _md_table(*fair) + [""]
    out += [f"- **{name}**: {text}" for name, text in EXPLANATIONS] + [""]
    for title, header, rows, notes in _sections(report):
        out += [f"## {title}", ""]
        if header:
            out += _md_table(header, rows) + [""]
        out += [f"- {n}" for n in notes]
        if notes:
            out.append("")
    return "\n".join(out)


def _sources_line(report: Report) -> str:
    texts = "; ".join(f"{t['lang']}: {t['source']} ({plural(t['documents'], 'document')}, "
                      f"{plural(t['chars'], 'character')})" for t in report.texts)
    line = f"Text: {texts}."
    if report.parallel_texts:
        line += " Parallel: " + "; ".join(f"{k}: {v}" for k, v in report.parallel_texts.items()) + "."
    if report.max_chars:
        line += f" Sampled: the first {report.max_chars:,} characters (whole documents) of each source."
    if report.detail_every > 1:
        line += (f" Detail (scripts, clusters, words, ceilings) on one block of text in {report.detail_every}:"
                 " those figures are estimates, ± the half-width of an approximate 95% interval"
                 " (±? where fewer than two sampled blocks hold it);"
                 " chars/token per language and premiums are exact.")
    return line


def _html_table(header: list[str], rows: list[list[str]], cls: str = "") -> list[str]:
    esc = html.escape
    parts = [f"<table class='{cls}'><tr>" + "".join(f"<th>{esc(h)}</th>" for h in header) + "</tr>"]
    parts += ["<tr>" + "".join(f"<td>{esc(c)}</td>" for c in r) + "</tr>" for r in rows]
    parts.append("</table>")
    return parts


# The Markdown the notes use inline: **bold** and `code`.
_INLINE = re.compile(r"\*\*(.+?)\*\*|`(.+?)`")


def inline_html(note: str) -> str:
    """A note of report.md as HTML: escaped, its **bold** and `code` as <strong> and <code>."""
    out, end = [], 0
    for m in _INLINE.finditer(note):
        out.append(html.escape(note[end:m.start()]))
        bold, code = m.groups()
        out.append(f"<strong>{html.escape(bold)}</strong>" if bold is not None else f"<code>{html.escape(code)}</code>")
        end = m.end()
    return "".join(out) + html.escape(note[end:])


def report_json(report: Report) -> dict:
    """report.json: the analysis, and in its summary each tokenizer's verdict as the summary table states it."""
    data = report.to_dict()
    data["summary"]["verdicts"] = {name: v.to_dict() for name, v in verdicts(report.tokenizers).items()}
    return data


def html_page(report: Report, figures: dict[str, bytes]) -> str:
    """report.html: the summary, the token viewer, the figures (inline PNG), then the same tables as report.md."""
    esc = html.escape
    parts = ["<!doctype html><html lang='en'><head><meta charset='utf-8'>",
             "<title>Tokenizer fertility report</title>",
             "<style>body{font-family:sans-serif;max-width:1200px;margin:auto;padding:0 1em}"
             "table{border-collapse:collapse;font-size:13px;margin:0.5em 0}"
             "td,th{border:1px solid #ccc;padding:2px 6px;text-align:right}td:first-child{text-align:left}"
             "table.summary td:last-child,table.summary th:last-child{text-align:left}img{max-width:100%}dt{font-weight:bold}"
             f"{viewer.CSS}</style></head><body>",
             "<h1>Tokenizer fertility report</h1>", f"<p>{esc(_sources_line(report))}</p>",
             "<h2 id='summary'>Summary</h2>"]
    parts += _html_table(*summary(report), cls="summary")
    fair = fairness_table(report)
    if fair:
        parts.append(f"<h3 id='fairness'>Fairness on parallel text (reference {esc(report.reference)})</h3>")
        parts += _html_table(*fair, cls="fairness")
    parts.append("<dl>" + "".join(f"<dt>{esc(n)}</dt><dd>{esc(t)}</dd>" for n, t in EXPLANATIONS) + "</dl>")
    parts.append(viewer.viewer_html(report))
    parts.append("<h2>Figures</h2>")
    for name, png in figures.items():
        data = base64.b64encode(png).decode("ascii")
        parts.append(f"<figure><img alt='{esc(name)}' src='data:image/png;base64,{data}'></figure>")
    for title, header, rows, notes in _sections(report):
        parts.append(f"<h2>{esc(title)}</h2>")
        if header:
            parts += _html_table(header, rows)
        if notes:
            parts.append("<ul>" + "".join(f"<li>{inline_html(n)}</li>" for n in notes) + "</ul>")
    parts.append("</body></html>")
    return "\n".join(parts)


def write_report(report: Report, out_dir: str | os.PathLike, *, overwrite: bool = False) -> Path:
    """Write report.json, report.md and report.html into ``out_dir`` atomically; returns ``out_dir``. An
    existing report folder is replaced only with ``overwrite`` (the policy of ``common.outdir``)."""
    from fertility.present.plots import all_figures

    with output_dir(out_dir, "fertility report", overwrite=overwrite) as out, staging_dir(out) as tmp:
        write_json(tmp / "report.json", report_json(report))
        atomic_write_text(tmp / "report.md", markdown(report))
        atomic_write_text(tmp / "report.html", html_page(report, all_figures(report)))
        publish_dir(tmp, out, command="fertility report")
    return out
