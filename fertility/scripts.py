"""Unicode script of every character, decided per grapheme cluster.

Every extended grapheme cluster (:mod:`fertility.graphemes`, UAX #29) takes the script of its base character.
Clusters whose base is Common or Inherited (spaces, digits, punctuation, the danda, ZWJ/ZWNJ, a stray combining mark) take the script
of the nearest preceding real-script cluster in the same document, else the nearest following one, so a
Bangla sentence with English words in it splits at the words. A document with no script at all stays Common.

Everything works on arrays over a batch of documents: code points are classified once each (lookup tables
filled lazily), so the cost per character is numpy's, not Python's.
"""

from __future__ import annotations

import unicodedata
from collections.abc import Sequence
from dataclasses import dataclass

import numpy as np
import regex

from fertility.graphemes import cluster_starts

# Unicode script names (Script property values) understood by `regex`; "Unknown" (unassigned) last.
_SCRIPT_NAMES_TEXT = """
Latin Bengali Common Inherited Devanagari Arabic Cyrillic Greek Han Hiragana Katakana Hangul Thai Tamil Telugu
Kannada Malayalam Gujarati Gurmukhi Oriya Sinhala Hebrew Armenian Georgian Ethiopic Tibetan Myanmar Khmer Lao
Adlam Ahom Anatolian_Hieroglyphs Avestan Balinese Bamum Bassa_Vah Batak Beria_Erfe Bhaiksuki Bopomofo Brahmi
Braille Buginese Buhid Canadian_Aboriginal Carian Caucasian_Albanian Chakma Cham Cherokee Chorasmian Coptic
Cuneiform Cypriot Cypro_Minoan Deseret Dives_Akuru Dogra Duployan Egyptian_Hieroglyphs Elbasan Elymaic Garay
Glagolitic Gothic Grantha Gunjala_Gondi Gurung_Khema Hanifi_Rohingya Hanunoo Hatran Imperial_Aramaic
Inscriptional_Pahlavi Inscriptional_Parthian Javanese Jurchen Kaithi Kawi Kayah_Li Kharoshthi Khitan_Small_Script
Khojki Khudawadi Kirat_Rai Lepcha Limbu Linear_A Linear_B Lisu Lycian Lydian Mahajani Makasar Mandaic Manichaean
Marchen Masaram_Gondi Medefaidrin Meetei_Mayek Mende_Kikakui Meroitic_Cursive Meroitic_Hieroglyphs Miao Modi
Mongolian Mro Multani Nabataean Nag_Mundari Nandinagari New_Tai_Lue Newa Nko Nushu Nyiakeng_Puachue_Hmong Ogham
Ol_Chiki Ol_Onal Old_Hungarian Old_Italic Old_North_Arabian Old_Permic Old_Persian Old_Sogdian Old_South_Arabian
Old_Turkic Old_Uyghur Osage Osmanya Pahawh_Hmong Palmyrene Pau_Cin_Hau Phags_Pa Phoenician Proto_Cuneiform
Psalter_Pahlavi Rejang Runic Samaritan Saurashtra Seal Sharada Shavian Siddham Sidetic SignWriting Sogdian
Sora_Sompeng Soyombo Sundanese Sunuwar Syloti_Nagri Syriac Tagalog Tagbanwa Tai_Le Tai_Tham Tai_Viet Tai_Yo Takri
Tangsa Tangut Thaana Tifinagh Tirhuta Todhri Tolong_Siki Toto Tulu_Tigalari Ugaritic Vai Vithkuqi Wancho
Warang_Citi Yezidi Yi Zanabazar_Square Unknown
"""
SCRIPT_NAMES: tuple[str, ...] = tuple(_SCRIPT_NAMES_TEXT.split())
COMMON = SCRIPT_NAMES.index("Common")
INHERITED = SCRIPT_NAMES.index("Inherited")


def _compile_classifier() -> regex.Pattern:
    parts = []
    for name in SCRIPT_NAMES:
        try:
            regex.compile(rf"\p{{sc={name}}}")
        except regex.error:  # an older `regex` without this (newly encoded) script
            continue
        parts.append(rf"(?P<{name}>\p{{sc={name}}})")
    return regex.compile("|".join(parts))


_CLASSIFIER = _compile_classifier()
_UNCLASSIFIED = -1
# Each table says -1 for a code point not classified yet, so a lookup is one gather and its check one minimum
# (is_space of 1 M characters: 0.7 ms against 2.7 with a separate "seen" lookup;
# benchmarks/results/2026-12-04-fertility-spm/micro.txt); the 0/1 entries of the other two read as bools.
_script_table = np.full(0x110000, _UNCLASSIFIED, dtype=np.int16)
_mark_table = np.full(0x110000, _UNCLASSIFIED, dtype=np.int8)
_space_table = np.full(0x110000, _UNCLASSIFIED, dtype=np.int8)

def _classify(cps: np.ndarray) -> None:
    """Fill the lookup tables for code points seen for the first time."""
    unseen = _script_table[cps] == _UNCLASSIFIED
    if not unseen.any():
        return
    for cp in np.unique(cps[unseen]).tolist():
        ch = chr(cp)
        m = _CLASSIFIER.match(ch)
        _script_table[cp] = SCRIPT_NAMES.index(m.lastgroup) if m else SCRIPT_NAMES.index("Unknown")
        _mark_table[cp] = unicodedata.category(ch).startswith("M")
        _space_table[cp] = ch.isspace()


def codepoints(text: str) -> np.ndarray:
    """The code points of ``text`` as a uint32 array (one entry per Python character)."""
    return np.frombuffer(text.encode("utf-32-le"), dtype=np.uint32)


def _lookup(table: np.ndarray, cps: np.ndarray) -> np.ndarray:
    """``table``'s entries for ``cps``, classifying the code points seen for the first time."""
    out = table.take(cps)  # take, not table[cps]: twice as fast on uint32 code points (no intp copy of them)
    if out.size and out.min() == _UNCLASSIFIED:
        _classify(cps)
        out = table.take(cps)
    return out


def is_mark(cps: np.ndarray) -> np.ndarray:
    """True for combining marks (general category M: vowel signs, hasanta, nukta)."""
    return _lookup(_mark_table, cps).view(bool)


def is_space(cps: np.ndarray) -> np.ndarray:
    """True for whitespace (``str.isspace``)."""
    return _lookup(_space_table, cps).view(bool)


_UTF8_WIDTH = np.repeat(np.arange(1, 5, dtype=np.uint8), [0x80, 0x800 - 0x80, 0x10000 - 0x800, 0x110000 - 0x10000])


def utf8_lengths(cps: np.ndarray) -> np.ndarray:
    """UTF-8 byte length of each code point (uint8: one table lookup, the cheapest way to it; ``take``, see
    :func:`_lookup`)."""
    return _UTF8_WIDTH.take(cps)


@dataclass
class ScriptedBatch:
    """A batch of documents laid end to end, with each character's and cluster's resolved script.

    Character indices are global over the concatenation of the documents; ``doc_char_start`` and
    ``doc_byte_start`` have one extra final entry (the totals).
    """

    cps: np.ndarray
    char_script: np.ndarray
    char_bytes: np.ndarray
    char_to_byte: np.ndarray  # len n_chars + 1: byte offset of each character
    starts_cluster: np.ndarray  # bool per character: a grapheme cluster starts with it
    cluster_start: np.ndarray  # global char index where each grapheme cluster starts
    cluster_script: np.ndarray
    doc_char_start: np.ndarray
    doc_byte_start: np.ndarray


def scripted_batch(texts: Sequence[str]) -> ScriptedBatch:
    """Resolve the script of every character of ``texts`` (see the module docstring for the rule)."""
    cps = codepoints("".join(texts))
    char_bytes = utf8_lengths(cps)
    # int32 when the offsets fit: a cumulative sum into a wider type (or a fresh array of it) costs several times
    # as much (5 ms against 0.5 ms for 1 M characters, numpy 2.4)
    offsets = np.int32 if 4 * cps.size < 2**31 else np.int64
    char_to_byte = np.zeros(cps.size + 1, dtype=offsets)
    np.cumsum(char_bytes, dtype=offsets, out=char_to_byte[1:])
    doc_chars = np.fromiter(map(len, texts), dtype=np.int64, count=len(texts))
    doc_char_start = np.zeros(len(texts) + 1, dtype=np.int64)
    np.cumsum(doc_chars, out=doc_char_start[1:])

    starts_cluster = cluster_starts(cps, doc_char_start)
    cluster_start = np.flatnonzero(starts_cluster)
    # a cluster's script is its base's; the others are not asked (no gather where every character starts one)
    base = _lookup(_script_table, cps if cluster_start.size == cps.size else cps[cluster_start])
    # each document's first and last cluster (every document starts one; an empty one has none)
    first = np.searchsorted(cluster_start, doc_char_start)
    nonempty = first[1:] > first[:-1]
    cluster_script = _fill_from_neighbours(base, first[:-1][nonempty], first[1:][nonempty] - 1)
    char_script = cluster_script
    if cluster_start.size != cps.size:  # each character's cluster by a running count of the clusters started
        # (1.3 ms against 3.4 for np.repeat of the clusters' lengths on 1 M Bangla characters;
        # benchmarks/results/2026-12-04-fertility-spm/micro.txt)
        cluster_of = np.cumsum(starts_cluster, dtype=offsets)
        cluster_of -= 1
        char_script = cluster_script.take(cluster_of)
    return ScriptedBatch(
        cps=cps,
        char_script=char_script,
        char_bytes=char_bytes,
        char_to_byte=char_to_byte,
        starts_cluster=starts_cluster,
        cluster_start=cluster_start,
        cluster_script=cluster_script,
        doc_char_start=doc_char_start,
        doc_byte_start=char_to_byte[doc_char_start],
    )


def _fill_from_neighbours(script: np.ndarray, doc_first: np.ndarray, doc_last: np.ndarray) -> np.ndarray:
    """Common/Inherited entries take the previous real script in their document, else the next one; a document
    runs from an index in ``doc_first`` to the one in ``doc_last`` beside it.

    Such entries come in runs (a space, ". ", a number): every entry of a run has the same neighbours, the
    entries just before and after it, unless the run starts or ends a document.
    """
    n = script.size
    fill = np.flatnonzero((script == COMMON) | (script == INHERITED))
    out = script.copy()
    if not fill.size:
        return out
    first = np.zeros(n, dtype=bool)
    first[doc_first] = True
    new_run = np.ones(fill.size, dtype=bool)
    new_run[1:] = (fill[1:] != fill[:-1] + 1) | first[fill[1:]]
    run_first = np.flatnonzero(new_run)
    starts = fill[run_first]
    # the entry before the run; for the few runs that start a document, the one after it (looked up for those
    # alone: 3.2 -> 2.3 ms per 1 M characters; benchmarks/results/2026-12-04-fertility-spm-2/micro.txt)
    run_script = script.take(starts - 1)  # a document's first run reads entry -1 here, replaced below
    opening = np.flatnonzero(first[starts])
    if opening.size:
        last = np.zeros(n, dtype=bool)
        last[doc_last] = True
        ends = fill[np.append(run_first[1:], fill.size)[opening] - 1]
        run_script[opening] = np.where(last[ends], COMMON, script[(ends + 1).clip(max=n - 1)])
    out[fill] = np.repeat(run_script, np.diff(np.append(run_first, fill.size)))
    return out


def script_runs(text: str) -> list[tuple[str, str]]:
    """``text`` cut into maximal runs of one resolved script: ``[(script, substring), ...]``."""
    batch = scripted_batch([text])
    runs: list[tuple[str, str]] = []
    for i, sid in enumerate(batch.char_script.tolist()):
        name = SCRIPT_NAMES[sid]
        if runs and runs[-1][0] == name:
            runs[-1] = (name, runs[-1][1] + text[i])
        else:
            runs.append((name, text[i]))
    return runs
