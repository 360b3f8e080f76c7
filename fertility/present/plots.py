"""The report's figures, each returned as PNG bytes.

Figures are drawn on ``matplotlib.figure.Figure`` objects, never through pyplot, so importing this module
chooses no backend: a notebook keeps its inline backend and a server needs no display. Legends stand outside
the axes (constrained layout makes room for them), so they never cover a bar.

The chars/token and ceiling figures show the rows of the summary table: each language's text (all its
scripts), so the figures and the summary state the same numbers. Per-script figures are in the tables.

* chars/token by language and tokenizer;
* achieved chars/token against the pre-tokenizer's ceiling, per language;
* premium by language against the reference (parallel text);
* the balance view: shares of characters, bytes and tokens per language.
"""

from __future__ import annotations

import io

import matplotlib
import numpy as np
from matplotlib.figure import Figure

from fertility.analysis import Report


def languages(report: Report) -> list[str]:
    """The report's languages, in the summary's order."""
    return list(report.tokenizers[0].languages) if report.tokenizers else []


def _png(fig) -> bytes:
    buf = io.BytesIO()
    fig.savefig(buf, format="png", dpi=110, bbox_inches="tight")
    return buf.getvalue()


# More languages than this in the premium figure: horizontal bars, one row per language.
MAX_GROUPS_ACROSS = 12
# The ceiling figure's y axis: this much above the highest achieved value or the median ceiling.
CEILING_HEADROOM = 1.6
# Above this many bars in a group, value labels would overlap: the axis is read instead.
MAX_LABELLED_BARS = 6


def _width(n_bars: int) -> float:
    return float(min(16, max(6, 0.4 * n_bars + 2)))


def _grouped_bars(ax, groups: list[str], series: dict[str, list[float]], fmt: str = "{:.2f}") -> None:
    width = 0.8 / max(len(series), 1)
    x = np.arange(len(groups))
    colors = matplotlib.colormaps["tab20" if len(series) > 10 else "tab10"].colors
    for i, (label, values) in enumerate(series.items()):
        bars = ax.bar(x + (i - (len(series) - 1) / 2) * width, values, width, label=label, color=colors[i % len(colors)])
        if len(series) <= MAX_LABELLED_BARS:
            # upright labels would overlap on neighbouring bars: they stand on end
            ax.bar_label(bars, labels=[fmt.format(v) for v in values], fontsize=7, padding=2, rotation=90)
    ax.margins(y=0.15)
    ax.set_xticks(x, groups)
    ax.legend(fontsize=8, loc="upper left", bbox_to_anchor=(1, 1))
    ax.grid(axis="y", alpha=0.3)


def chars_per_token_drawing(report: Report) -> Figure:
    """Grouped bars: chars/token of each language under each tokenizer (the summary's chars/token)."""
    langs = languages(report)
    fig = Figure(figsize=(_width(len(langs) * len(report.tokenizers)), 3.6), layout="constrained")
    ax = fig.subplots()
    series = {t.name: [t.languages[lang].chars_per_token for lang in langs] for t in report.tokenizers}
    _grouped_bars(ax, langs, series)
    ax.set_ylabel("characters per token")
    ax.set_title("Characters per token, by language (higher is better)")
    return fig


def chars_per_token_figure(report: Report) -> bytes:
    """:func:`chars_per_token_drawing` as PNG bytes."""
    return _png(chars_per_token_drawing(report))


# Tokenizers side by side in one panel of the ceiling figure: inches per tokenizer (two lines of 7-point text
# rotated upright need about a quarter inch; the rest keeps the bars apart).
CEILING_INCHES_PER_TOKENIZER = 0.55
# Marks a phrase ceiling (fertility.scoring.metrics.Metrics.phrase_pieces) under a tokenizer's name.
PHRASE_MARK = "*"
PHRASE_NOTE = (f"{PHRASE_MARK} phrase pieces: the pre-tokenizer keeps several words in one piece, so its ceiling "
               "is a phrase's length and bounds nothing; the vocabulary is the limit")


def ceiling_drawing(report: Report) -> Figure:
    """Per language: achieved chars/token (bars) against the pre-tokenizer ceiling (outlined bars), the
    summary's chars/token and ceiling.

    The ceiling is written under each tokenizer's name, not on the bars (no labels to collide); names stand
    upright from four tokenizers on. The y axis stops at ``CEILING_HEADROOM`` times the larger of the highest
    achieved value and the median ceiling, so one extreme ceiling (a pre-tokenizer that hardly splits) does
    not flatten the others; a clipped ceiling ends in an arrow at the top. A phrase ceiling is marked.
    """
    langs = languages(report)
    n = len(report.tokenizers)
    per_axis = max(3.2, CEILING_INCHES_PER_TOKENIZER * n)
    fig = Figure(figsize=(per_axis * len(langs) + 1.5, 4.6), layout="constrained")
    axes = fig.subplots(1, len(langs), squeeze=False)
    x = np.arange(n)
    phrases = False
    for ax, lang in zip(axes[0], langs, strict=True):
        rows = [t.languages[lang] for t in report.tokenizers]
        achieved = [m.chars_per_token for m in rows]
        ceiling = [m.pretoken_ceiling for m in rows]
        top = CEILING_HEADROOM * max(max(achieved, default=0.0), float(np.median(ceiling)) if ceiling else 0.0, 0.1)
        shown = np.minimum(ceiling, top)
        ax.bar(x, shown, 0.6, fill=False, edgecolor="black", linestyle="--", label="pre-tokenizer ceiling")
        bars = ax.bar(x, achieved, 0.6, color="tab:blue", alpha=0.8, label="achieved")
        if n <= MAX_LABELLED_BARS:
            ax.bar_label(bars, labels=[f"{a:.2f}" for a in achieved], fontsize=7, label_type="center", color="white")
        for xi, c in zip(x, ceiling, strict=True):
            if c > top:
                ax.annotate("", xy=(xi, top), xytext=(xi, top * 0.9), arrowprops={"arrowstyle": "->"})
        ax.set_ylim(0, top * 1.05)
        names = [f"{t.name}\nceiling {m.pretoken_ceiling:.2f}" + (PHRASE_MARK if m.phrase_pieces else "")
                 for t, m in zip(report.tokenizers, rows, strict=True)]
        phrases = phrases or any(m.phrase_pieces for m in rows)
        upright = n > 3
        ax.set_xticks(x, names, rotation=90 if upright else 0, fontsize=7)
        ax.set_title(lang)
        ax.grid(axis="y", alpha=0.3)
    axes[0][0].set_ylabel("characters per token")
    fig.legend(*axes[0][0].get_legend_handles_labels(), fontsize=7, loc="outside right center")
    fig.suptitle("Achieved characters per token vs the pre-tokenizer's ceiling, per language")
    if phrases:
        fig.supxlabel(PHRASE_NOTE, fontsize=7)
    return fig


def ceiling_figure(report: Report) -> bytes:
    """:func:`ceiling_drawing` as PNG bytes."""
    return _png(ceiling_drawing(report))


def premium_figure(report: Report) -> bytes | None:
    """Grouped bars: each language's token premium against the reference, per tokenizer (None without parallel)."""
    langs = [lang for lang in report.parallel_texts if lang != report.reference]
    if not langs:
        return None
    # highest premium first (under the first tokenizer), as the published tables are read
    langs.sort(key=lambda lang: -report.tokenizers[0].parallel[lang].premium)
    series = {t.name: [t.parallel[lang].premium for lang in langs] for t in report.tokenizers}
    if len(langs) > MAX_GROUPS_ACROSS:  # FLORES-200: one row per language, read down the page
        n = len(report.tokenizers)
        fig = Figure(figsize=(9, 1 + 0.16 * len(langs) * max(1, n / 2)), layout="constrained")
        ax = fig.subplots()
        height = 0.8 / n
        y = np.arange(len(langs))
        for i, (label, values) in enumerate(series.items()):
            ax.barh(y + (i - (n - 1) / 2) * height, values, height, label=label)
        ax.set_yticks(y, langs, fontsize=6)
        ax.invert_yaxis()
        ax.axvline(1.0, color="black", linewidth=0.8)
        ax.set_xlabel(f"tokens / tokens of {report.reference}")
        ax.legend(fontsize=8, loc="upper left", bbox_to_anchor=(1, 1))
        ax.grid(axis="x", alpha=0.3)
    else:
        fig = Figure(figsize=(_width(len(langs) * len(report.tokenizers)), 3.6), layout="constrained")
        ax = fig.subplots()
        _grouped_bars(ax, langs, series)
        ax.axhline(1.0, color="black", linewidth=0.8)
        ax.set_ylabel(f"tokens / tokens of {report.reference}")
    ax.set_title(f"Premium against {report.reference} on parallel text (1 = parity), highest first")
    return _png(fig)


def balance_figure(report: Report) -> bytes | None:
    """Stacked shares of characters, bytes and tokens per language, one bar group per tokenizer."""
    if not report.tokenizers or len(report.tokenizers[0].languages) < 2:
        return None
    langs = list(report.tokenizers[0].languages)
    labels = ["chars", "bytes"] + [f"tokens\n{t.name}" for t in report.tokenizers]
    shares = [report.tokenizers[0].balance.char_share, report.tokenizers[0].balance.byte_share]
    shares += [t.balance.token_share for t in report.tokenizers]
    fig = Figure(figsize=(1.2 * len(labels) + 2, 3.6), layout="constrained")
    ax = fig.subplots()
    bottom = np.zeros(len(labels))
    for lang in langs:
        values = np.array([s.get(lang, 0.0) for s in shares])
        ax.bar(labels, values, 0.6, bottom=bottom, label=lang)
        bottom += values
    ax.set_ylabel("share")
    ax.set_title("Language shares in characters, bytes and tokens")
    ax.legend(fontsize=8, loc="upper left", bbox_to_anchor=(1, 1))
    return _png(fig)


def all_figures(report: Report) -> dict[str, bytes]:
    """Every figure the report has data for, by a short file-like name."""
    figures = {"chars_per_token": chars_per_token_figure(report), "ceiling": ceiling_figure(report)}
    for name, make in (("premium", premium_figure), ("balance", balance_figure)):
        png = make(report)
        if png is not None:
            figures[name] = png
    return figures
