"""Measure a corpus side by side in documents, characters, UTF-8 bytes and tokens of one or more tokenizers.

The same text weighs differently in each unit: Bengali takes three bytes per character, and a tokenizer that
splits Bengali marks from their letters spends several tokens per word. A mixture balanced in one unit is
therefore unbalanced in the others; this table is where that shows.
"""

from __future__ import annotations

import numpy as np

from corpus.mixture.prepare import Prepared
from fertility.totals import Totals


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


def measure_rows(prepared: Prepared, rows: np.ndarray, by: str) -> dict[str, Totals]:
    """Sizes of ``rows`` of the document table (repeats count again), per source (``by="source"``) or language."""
    t = prepared.table
    names = [s.name for s in prepared.states]
    groups = t.source
    if by == "language":
        names = sorted({s.language for s in prepared.states})
        lookup = np.array([names.index(s.language) for s in prepared.states], dtype=np.int64)
        groups = lookup[t.source] if len(t.source) else t.source
    return group_totals(rows, groups, names, chars=t.chars, bytes=t.bytes, tokens=t.tokens - 1, compare=t.compare,
                        compare_names=prepared.compare_names)


def corpus_tables(prepared: Prepared) -> str:
    """The kept corpus per source and per language, as terminal tables."""
    everything = np.arange(len(prepared.table.tokens))
    return "\n\n".join(format_table(by, measure_rows(prepared, everything, by), prepared.tokenizer_name)
                       for by in ("source", "language"))
