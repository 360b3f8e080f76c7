"""Measure a corpus side by side in documents, characters, UTF-8 bytes and tokens of one or more tokenizers.

The same text weighs differently in each unit: Bengali takes three bytes per character, and a tokenizer that
splits Bengali marks from their letters spends several tokens per word. A mixture balanced in one unit is
therefore unbalanced in the others; this table is where that shows. A build measures its documents once
(:class:`Sizes`, in ``corpus.mixture.prepare``); ``corpus plan``, ``corpus build`` and the report show those.
"""

from __future__ import annotations

from dataclasses import dataclass

import numpy as np

from corpus.mixture.layout import DocTable, SourceIngest
from fertility.totals import Totals


@dataclass
class Sizes:
    """The kept corpus per source and per language, the training selection (documents repeated as planned) and
    each language's validation documents, in every unit."""

    corpus_by_source: dict[str, Totals]
    corpus: dict[str, Totals]  # per language
    train: dict[str, Totals]  # per language
    validation: dict[str, Totals]


def shares(totals: dict[str, Totals], tokenizer: str) -> dict[str, dict[str, float]]:
    """For each unit, each key's share of the whole: ``{"bytes": {"bn": 0.49, "en": 0.51}, ...}``."""
    out: dict[str, dict[str, float]] = {}
    for key, t in totals.items():
        for unit, n in t.units(tokenizer).items():
            out.setdefault(unit, {})[key] = n
    return {unit: {k: (n / sum(v.values()) if sum(v.values()) else 0.0) for k, n in v.items()} for unit, v in out.items()}


def format_table(title: str, totals: dict[str, Totals], tokenizer: str) -> str:
    """A text table: one row per key, each unit's count and share of the total."""
    if not totals:
        return f"{title}: (empty)"
    share = shares(totals, tokenizer)
    units = list(next(iter(totals.values())).units(tokenizer))
    width = max(len(k) for k in totals) + 2
    header = f"{title:<{width}}" + "".join(f"{u[:22]:>24}" for u in units)
    rows = [header]
    for key, t in totals.items():
        cells = "".join(f" {n:>16,} {share[u][key]:>6.1%}" for u, n in t.units(tokenizer).items())
        rows.append(f"{key:<{width}}{cells}")
    return "\n".join(rows)


def group_totals(rows: np.ndarray, group: np.ndarray, names: list[str], *, chars: np.ndarray, bytes: np.ndarray,
                 tokens: np.ndarray, compare: np.ndarray, compare_names: list[str]) -> dict[str, Totals]:
    """Sizes of the documents ``rows`` (repeats count again), grouped by ``names[group[row]]``.

    ``tokens``/``compare`` are per-document token counts; documents with the same name are summed.
    """
    out: dict[str, Totals] = {}
    for k, name in enumerate(names):
        sel = rows[group[rows] == k]
        out.setdefault(name, Totals()).add(Totals(
            documents=len(sel), chars=int(chars[sel].sum()), bytes=int(bytes[sel].sum()), tokens=int(tokens[sel].sum()),
            compare={c: int(compare[sel, j].sum()) for j, c in enumerate(compare_names)}))
    return dict(sorted(out.items()))


def measure_rows(table: DocTable, states: list[SourceIngest], compare_names: list[str], rows: np.ndarray,
                 by: str) -> dict[str, Totals]:
    """Sizes of ``rows`` of the document table (repeats count again), per source (``by="source"``) or language."""
    names = [s.name for s in states]
    groups = table.source
    if by == "language":
        names = sorted({s.language for s in states})
        lookup = np.array([names.index(s.language) for s in states], dtype=np.int64)
        groups = lookup[table.source] if len(table.source) else table.source
    return group_totals(rows, groups, names, chars=table.chars, bytes=table.bytes, tokens=table.tokens - 1,
                        compare=table.compare, compare_names=compare_names)


def measure(table: DocTable, states: list[SourceIngest], compare_names: list[str], val: dict[str, np.ndarray],
            train_rows: np.ndarray) -> Sizes:
    """Every table of :class:`Sizes`, each measured once."""
    everything = np.arange(len(table.tokens))
    return Sizes(
        corpus_by_source=measure_rows(table, states, compare_names, everything, "source"),
        corpus=measure_rows(table, states, compare_names, everything, "language"),
        train=measure_rows(table, states, compare_names, train_rows, "language"),
        validation={lang: measure_rows(table, states, compare_names, rows, "language").get(lang, Totals())
                    for lang, rows in val.items()})


def corpus_tables(sizes: Sizes, tokenizer: str) -> str:
    """The kept corpus per source and per language, as terminal tables."""
    return "\n\n".join(format_table(by, totals, tokenizer)
                       for by, totals in (("source", sizes.corpus_by_source), ("language", sizes.corpus)))
