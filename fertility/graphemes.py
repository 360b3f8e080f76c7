"""Extended grapheme clusters exactly as Unicode Standard Annex #29 defines them, on arrays.

The character properties (Grapheme_Cluster_Break, Indic_Conjunct_Break, Extended_Pictographic) are read from
the ``regex`` module's tables, so the rules follow the Unicode version of the installed ``regex``
(:data:`UNICODE_VERSION`, written into report.json). The rules themselves are applied here, not by ``regex``
``\\X``: ``regex`` joins a consonant after a virama even when no consonant precedes the virama (``a`` + ``्`` +
``त`` as one cluster, and ``অ্যা`` in Bangla), where the standard's rule GB9c requires
``Consonant [Extend Linker]* Linker [Extend Linker]* × Consonant`` and its own test cases break
(``÷ 0061 × 094D ÷ 0924 ÷``). ``tests/fertility/data/GraphemeBreakTest-17.0.0.txt`` checks every rule.

Documents made only of characters under rules GB4-GB9c (controls, extend, ZWJ, spacing marks, Indic
conjuncts: nearly all running text) are segmented with numpy over the whole batch; a document holding a CR,
a Prepend character, Hangul jamo or syllables, a regional indicator or an Extended_Pictographic character is
segmented by :func:`cluster_starts_sequential`, a direct transcription of the rules, one code point at a time.
"""

from __future__ import annotations

import numpy as np
import regex

# Grapheme_Cluster_Break values.
OTHER, CR, LF, CONTROL, EXTEND, ZWJ, RI, PREPEND, SPACING_MARK, L, V, T, LV, LVT = range(14)
# Indic_Conjunct_Break values.
INCB_NONE, INCB_CONSONANT, INCB_LINKER, INCB_EXTEND = range(4)

_GCB_NAMES = {"CR": CR, "LF": LF, "Control": CONTROL, "Extend": EXTEND, "ZWJ": ZWJ, "Regional_Indicator": RI,
              "Prepend": PREPEND, "SpacingMark": SPACING_MARK, "L": L, "V": V, "T": T, "LV": LV, "LVT": LVT}
_GCB = regex.compile("|".join(rf"(?P<{name}>\p{{GCB={name}}})" for name in _GCB_NAMES))
_INCB = regex.compile(r"(?P<Consonant>\p{InCB=Consonant})|(?P<Linker>\p{InCB=Linker})|(?P<Extend>\p{InCB=Extend})")
_INCB_NAMES = {"Consonant": INCB_CONSONANT, "Linker": INCB_LINKER, "Extend": INCB_EXTEND}
_PICT = regex.compile(r"\p{Extended_Pictographic}")

# The first Unicode version in which each probe is defined; the newest one ``regex`` knows is its version.
# 15.1 introduced Indic_Conjunct_Break (rule GB9c); 16.0 and 17.0 each encoded new scripts.
_VERSION_PROBES = (("15.1", r"\p{InCB=Linker}"), ("16.0", r"\p{sc=Garay}"), ("17.0", r"\p{sc=Sidetic}"))


def _unicode_version() -> str:
    version = "15.0 or older"
    for name, probe in _VERSION_PROBES:
        try:
            regex.compile(probe)
        except regex.error:
            break
        version = name
    return version


UNICODE_VERSION: str = _unicode_version()
REGEX_VERSION: str = regex.__version__

_known = np.zeros(0x110000, dtype=bool)
_gcb_table = np.zeros(0x110000, dtype=np.int8)
_incb_table = np.zeros(0x110000, dtype=np.int8)
_pict_table = np.zeros(0x110000, dtype=bool)
# Classes the array path handles; a document with any other sends that document to the sequential rules.
_SIMPLE = np.zeros(14, dtype=bool)
_SIMPLE[[OTHER, LF, CONTROL, EXTEND, ZWJ, SPACING_MARK]] = True


def _classify(cps: np.ndarray) -> None:
    """Fill the property tables for code points seen for the first time (each costs a few regex matches once)."""
    unseen = ~_known[cps]
    if not unseen.any():
        return
    for cp in np.unique(cps[unseen]).tolist():
        ch = chr(cp)
        m = _GCB.match(ch)
        _gcb_table[cp] = _GCB_NAMES[m.lastgroup] if m else OTHER
        m = _INCB.match(ch)
        _incb_table[cp] = _INCB_NAMES[m.lastgroup] if m else INCB_NONE
        _pict_table[cp] = _PICT.match(ch) is not None
        _known[cp] = True


def cluster_starts(cps: np.ndarray, doc_char_start: np.ndarray) -> np.ndarray:
    """True where an extended grapheme cluster starts, over documents laid end to end.

    ``cps``: the code points (uint32); ``doc_char_start``: where each document starts, plus the total at the
    end. Every document starts a cluster (no cluster spans two documents).
    """
    n = cps.size
    starts = np.ones(n, dtype=bool)
    if n == 0:
        return starts
    _classify(cps)
    gcb = _gcb_table[cps]
    incb = _incb_table[cps]
    bounds = doc_char_start[:-1]
    first = np.zeros(n, dtype=bool)
    first[bounds[bounds < n]] = True
    # GB9, GB9a: no break before Extend, ZWJ, SpacingMark; GB4 first: always a break after a control or LF.
    prev_gcb = np.concatenate([[CONTROL], gcb[:-1]])
    join = ((gcb == EXTEND) | (gcb == ZWJ) | (gcb == SPACING_MARK)) & (prev_gcb != CONTROL) & (prev_gcb != LF)
    linker = incb == INCB_LINKER
    if linker.any():  # GB9c; no virama in the batch, no conjunct (most non-Indic batches skip this)
        join |= _gb9c(incb, linker, first)
    starts = ~join | first
    pict = _pict_table[cps]
    complex_char = ~_SIMPLE[gcb] | pict
    if complex_char.any():
        seen = np.concatenate([[0], np.cumsum(complex_char)])
        for d in np.flatnonzero(seen[doc_char_start[1:]] > seen[doc_char_start[:-1]]).tolist():
            a, b = int(doc_char_start[d]), int(doc_char_start[d + 1])
            if a < b:
                starts[a:b] = cluster_starts_sequential(gcb[a:b], incb[a:b], pict[a:b])
    return starts


def _gb9c(incb: np.ndarray, linker: np.ndarray, first: np.ndarray) -> np.ndarray:
    """True at each consonant that GB9c joins to what precedes it.

    That is a consonant whose preceding run of InCB=Extend/Linker characters (in its document) holds at least
    one Linker and is itself preceded by an InCB=Consonant in the same document.
    """
    n = incb.size
    positions = np.arange(n)
    in_run = linker | (incb == INCB_EXTEND)
    # The last position before i that is not part of an Extend/Linker run (-1 if none).
    run_end = np.maximum.accumulate(np.where(~in_run, positions, -1))
    before = np.concatenate([[-1], run_end[:-1]])
    doc_start = np.maximum.accumulate(np.where(first, positions, 0))
    linkers = np.cumsum(linker)
    prev_linkers = np.concatenate([[0], linkers[:-1]])
    anchor = before.clip(0)
    has_linker = prev_linkers - linkers[anchor] > 0
    anchored = (before >= doc_start) & (incb[anchor] == INCB_CONSONANT)
    return (incb == INCB_CONSONANT) & anchored & has_linker


def cluster_starts_sequential(gcb: np.ndarray, incb: np.ndarray, pict: np.ndarray) -> np.ndarray:
    """The UAX #29 rules GB3-GB999 applied one code point at a time (the first character always starts)."""
    n = gcb.size
    out = np.ones(n, dtype=bool)
    gcb_l, incb_l, pict_l = gcb.tolist(), incb.tolist(), pict.tolist()
    conjunct = 0  # 0: none; 1: after Consonant [Extend|Linker]*; 2: the same with a Linker in the run
    emoji = 0  # 0: none; 1: after ExtPict Extend*; 2: the same followed by ZWJ
    ri_odd = False  # an odd number of regional indicators ends here
    prev = -1
    for i in range(n):
        g, c, p = gcb_l[i], incb_l[i], pict_l[i]
        if i:
            out[i] = _breaks(prev, g, c, p, conjunct, emoji, ri_odd)
        if c == INCB_CONSONANT:
            conjunct = 1
        elif conjunct and c in (INCB_EXTEND, INCB_LINKER):
            conjunct = 2 if c == INCB_LINKER else conjunct
        else:
            conjunct = 0
        if p or (emoji == 1 and g == EXTEND):
            emoji = 1
        elif emoji == 1 and g == ZWJ:
            emoji = 2
        else:
            emoji = 0
        ri_odd = (not ri_odd) if g == RI else False
        prev = g
    return out


def _breaks(prev: int, g: int, c: int, p: bool, conjunct: int, emoji: int, ri_odd: bool) -> bool:
    if prev == CR and g == LF:
        return False  # GB3
    if prev in (CR, LF, CONTROL) or g in (CR, LF, CONTROL):
        return True  # GB4, GB5
    if prev == L and g in (L, V, LV, LVT):
        return False  # GB6
    if prev in (LV, V) and g in (V, T):
        return False  # GB7
    if prev in (LVT, T) and g == T:
        return False  # GB8
    if g in (EXTEND, ZWJ, SPACING_MARK) or prev == PREPEND:
        return False  # GB9, GB9a, GB9b
    if conjunct == 2 and c == INCB_CONSONANT:
        return False  # GB9c
    if emoji == 2 and p:
        return False  # GB11
    return not (g == RI and ri_odd)  # GB12, GB13 (no break inside a pair); else GB999


def clusters(text: str) -> list[str]:
    """``text`` cut into extended grapheme clusters."""
    cps = np.frombuffer(text.encode("utf-32-le"), dtype=np.uint32)
    starts = np.flatnonzero(cluster_starts(cps, np.array([0, cps.size])))
    return [text[a:b] for a, b in zip(starts.tolist(), [*starts[1:].tolist(), len(text)], strict=True)]
