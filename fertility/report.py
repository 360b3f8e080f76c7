"""Writing a :class:`~fertility.analysis.Report`: report.json, report.md, report.html, and the terminal table.

The three files are written into a temporary folder beside ``out_dir`` and renamed into place together, so
a failure never leaves a partial report (an existing report at ``out_dir`` is replaced only on success).
"""

from __future__ import annotations

import base64
import html
import os
from pathlib import Path

from fertility.analysis import Report
from fertility.fileio import atomic_write_text, check_output_dir, publish_dir, staging_dir, write_json
from fertility.metrics import Metrics

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


def metrics_row(label: str, m: Metrics) -> list[str]:
    return [label] + [fmt.format(getattr(m, attr)) for _, attr, fmt in COLUMNS]


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
                         f"{m.broken_grapheme_rate:.1%}", f"{m.pretoken_ceiling:.2f}",
                         f"{par.premium:.2f}" if par else "-"])
    return header, rows


def terminal_table(report: Report) -> str:
    """A plain-text table of the summary, then the traps and balance warnings."""
    header, rows = summary_rows(report)
    widths = [max(len(r[i]) for r in [header, *rows]) for i in range(len(header))]
    lines = ["  ".join(c.rjust(w) if i > 1 else c.ljust(w) for i, (c, w) in enumerate(zip(r, widths, strict=True)))
             for r in [header, *rows]]
    lines.insert(1, "  ".join("-" * w for w in widths))
    for t in report.tokenizers:
        for trap in t.traps:
            lines.append(f"TRAP {t.name} / {trap.script} [{trap.rule}]: {trap.cause}")
        for warning in t.balance.warnings:
            lines.append(f"BALANCE {t.name}: {warning}")
    return "\n".join(lines)


def _sections(report: Report):
    """The report's content as (title, header, rows, notes) sections, shared by Markdown and HTML."""
    header = ["", *(c[0] for c in COLUMNS)]
    for t in report.tokenizers:
        title = f"{t.name} ({t.kind}, vocabulary {t.vocab_size:,})"
        yield title + ": languages", header, [metrics_row(k, m) for k, m in t.languages.items()], []
        yield title + ": scripts", header, [metrics_row(k, m) for k, m in t.scripts.items()], []
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
        yield title + ": traps", [], [], traps


def markdown(report: Report) -> str:
    """report.md: every table of the report, and the traps in words."""
    out = ["# Tokenizer fertility report", "", _sources_line(report), ""]
    for title, header, rows, notes in _sections(report):
        out += [f"## {title}", ""]
        if header:
            out += ["| " + " | ".join(header) + " |", "|" + "---|" * len(header)]
            out += ["| " + " | ".join(r) + " |" for r in rows]
            out.append("")
        out += [f"- {n}" for n in notes]
        if notes:
            out.append("")
    return "\n".join(out)


def _sources_line(report: Report) -> str:
    texts = "; ".join(f"{t['lang']}: {t['source']} ({t['documents']:,} documents, {t['chars']:,} characters)"
                      for t in report.texts)
    line = f"Text: {texts}."
    if report.parallel_texts:
        line += " Parallel: " + "; ".join(f"{k}: {v}" for k, v in report.parallel_texts.items()) + "."
    if report.max_chars:
        line += f" Sampled: the first {report.max_chars:,} characters (whole documents) of each source."
    return line


def html_page(report: Report, figures: dict[str, bytes]) -> str:
    """report.html: the figures (inline PNG) and the same tables as report.md."""
    esc = html.escape
    parts = ["<!doctype html><meta charset='utf-8'><title>Tokenizer fertility report</title>",
             "<style>body{font-family:sans-serif;max-width:1200px;margin:auto}table{border-collapse:collapse;"
             "font-size:13px}td,th{border:1px solid #ccc;padding:2px 6px;text-align:right}"
             "td:first-child{text-align:left}img{max-width:100%}</style>",
             "<h1>Tokenizer fertility report</h1>", f"<p>{esc(_sources_line(report))}</p>"]
    for name, png in figures.items():
        data = base64.b64encode(png).decode("ascii")
        parts.append(f"<figure><img alt='{esc(name)}' src='data:image/png;base64,{data}'></figure>")
    for title, header, rows, notes in _sections(report):
        parts.append(f"<h2>{esc(title)}</h2>")
        if header:
            parts.append("<table><tr>" + "".join(f"<th>{esc(h)}</th>" for h in header) + "</tr>")
            parts += ["<tr>" + "".join(f"<td>{esc(c)}</td>" for c in r) + "</tr>" for r in rows]
            parts.append("</table>")
        if notes:
            parts.append("<ul>" + "".join(f"<li>{esc(n).replace('**', '')}</li>" for n in notes) + "</ul>")
    return "\n".join(parts)


def write_report(report: Report, out_dir: str | os.PathLike) -> Path:
    """Write report.json, report.md and report.html into ``out_dir`` atomically; returns ``out_dir``."""
    from fertility.plots import all_figures

    out = check_output_dir(out_dir)
    with staging_dir(out) as tmp:
        write_json(tmp / "report.json", report.to_dict())
        atomic_write_text(tmp / "report.md", markdown(report))
        atomic_write_text(tmp / "report.html", html_page(report, all_figures(report)))
        publish_dir(tmp, out)
    return out
