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

_gcb_table = np.zeros(0x110000, dtype=np.int8)
_incb_table = np.zeros(0x110000, dtype=np.int8)
_pict_table = np.zeros(0x110000, dtype=bool)
_SIMPLE = np.zeros(14, dtype=bool)
_SIMPLE[[OTHER, LF, CONTROL, EXTEND, ZWJ, SPACING_MARK]] = True
# What the array path reads of a character, one bit each, in one table (one lookup per character): GB9/GB9a,
# no break before it (Extend, ZWJ, SpacingMark); GB4, always a break after it (a control or LF); an InCB Linker
# (GB9c); outside the classes the array path handles, or Extended_Pictographic (its document goes to the
# sequential rules); an InCB Consonant; an InCB Extend; classified (the table holds it).
_JOINS, _BREAKS_AFTER, _LINKER, _COMPLEX, _CONSONANT, _EXTEND, _KNOWN = 1, 2, 4, 8, 16, 32, 128
_flags_table = np.zeros(0x110000, dtype=np.uint8)


def _classify(cps: np.ndarray) -> None:
    """Fill the property tables for code points seen for the first time (each costs a few regex matches once)."""
    unseen = _flags_table[cps] < _KNOWN
    if not unseen.any():
        return
    for cp in np.unique(cps[unseen]).tolist():
        ch = chr(cp)
        m = _GCB.match(ch)
        gcb = _gcb_table[cp] = _GCB_NAMES[m.lastgroup] if m else OTHER
        m = _INCB.match(ch)
        incb = _incb_table[cp] = _INCB_NAMES[m.lastgroup] if m else INCB_NONE
        pict = _pict_table[cp] = _PICT.match(ch) is not None
        _flags_table[cp] = (_KNOWN | _JOINS * (gcb in (EXTEND, ZWJ, SPACING_MARK))
                            | _BREAKS_AFTER * (gcb in (CONTROL, LF)) | _LINKER * (incb == INCB_LINKER)
                            | _COMPLEX * (pict or not _SIMPLE[gcb]) | _CONSONANT * (incb == INCB_CONSONANT)
                            | _EXTEND * (incb == INCB_EXTEND))


def cluster_starts(cps: np.ndarray, doc_char_start: np.ndarray) -> np.ndarray:
    """True where an extended grapheme cluster starts, over documents laid end to end.

    ``cps``: the code points (uint32); ``doc_char_start``: where each document starts, plus the total at the
    end. Every document starts a cluster (no cluster spans two documents).
    """
    n = cps.size
    starts = np.ones(n, dtype=bool)
    if n == 0:
        return starts
    flags = _flags_table.take(cps)  # take, not indexing: twice as fast on uint32 code points (no intp copy)
    if flags.min() < _KNOWN:
        _classify(cps)
        flags = _flags_table.take(cps)
    bounds = doc_char_start[:-1]
    bounds = bounds[bounds < n]
    starts[1:] = (flags[1:] & _JOINS == 0) | (flags[:-1] & _BREAKS_AFTER != 0)
    linker = flags & _LINKER != 0
    if linker.any():  # GB9c; no virama in the batch, no conjunct (most non-Indic batches skip this)
        starts[_gb9c(flags, linker, bounds)] = False
    starts[bounds] = True
    complex_char = flags & _COMPLEX != 0
    if complex_char.any():
        seen = np.concatenate([[0], np.cumsum(complex_char, dtype=np.int32)])
        for d in np.flatnonzero(seen[doc_char_start[1:]] > seen[doc_char_start[:-1]]).tolist():
            a, b = int(doc_char_start[d]), int(doc_char_start[d + 1])
            if a < b:
                starts[a:b] = cluster_starts_sequential(_gcb_table[cps[a:b]], _incb_table[cps[a:b]],
                                                        _pict_table[cps[a:b]])
    return starts


def _gb9c(flags: np.ndarray, linker: np.ndarray, doc_starts: np.ndarray) -> np.ndarray:
    """The positions of the consonants that GB9c joins to what precedes them.

    That is a consonant whose preceding run of InCB=Extend/Linker characters (in its document) holds at least
    one Linker and is itself preceded by an InCB=Consonant in the same document. Only a consonant right after
    such a run can be one, and the runs are short (a virama, a ZWJ): each is walked back from its consonant.
    """
    in_run = (flags & (_LINKER | _EXTEND)) != 0
    cand = np.flatnonzero((flags[1:] & _CONSONANT != 0) & in_run[:-1]) + 1
    before = cand - 1  # walks back to the last position before the run (-1: none)
    has_linker = np.zeros(cand.size, dtype=bool)
    live = np.arange(cand.size)
    while live.size:
        has_linker[live] |= linker[before[live]]
        before[live] -= 1
        live = live[before[live] >= 0]
        live = live[in_run[before[live]]]
    doc_start = doc_starts[np.searchsorted(doc_starts, cand, "right") - 1]
    anchored = (before >= doc_start) & (flags[before.clip(0)] & _CONSONANT != 0)
    return cand[anchored & has_linker]


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
