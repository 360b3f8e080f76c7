"""Document cleaning: the canonical Unicode form, control characters, whitespace and lines that are only markup
or punctuation; and what the quality filters (``corpus.quality.filters``) and dedup measure on a document: its
script, its words and their n-gram hashes.

Every cleaning step is counted in a ``collections.Counter`` the caller passes in, so the build report can say
how many documents each step touched (and how many lines the markup step dropped). The functions are pure
otherwise: the same text and language always give the same result, which is what makes a build reproducible and
resumable.
"""

from __future__ import annotations

import functools
import hashlib
import re
from collections import Counter
from dataclasses import dataclass

import numpy as np
import regex

from corpus.read.normalize import normalize

# Declared language -> Unicode script (the name the `regex` module knows) used by the script-purity filter.
LANGUAGE_SCRIPTS = {
    "bn": "Bengali", "as": "Bengali", "hi": "Devanagari", "mr": "Devanagari", "ne": "Devanagari",
    "sa": "Devanagari", "en": "Latin", "de": "Latin", "fr": "Latin", "es": "Latin", "it": "Latin",
    "pt": "Latin", "ro": "Latin", "tr": "Latin", "vi": "Latin", "id": "Latin", "ar": "Arabic", "ur": "Arabic",
    "fa": "Arabic", "ru": "Cyrillic", "uk": "Cyrillic", "el": "Greek", "th": "Thai", "zh": "Han",
    "ta": "Tamil", "te": "Telugu", "ml": "Malayalam", "kn": "Kannada", "gu": "Gujarati", "pa": "Gurmukhi",
    "or": "Oriya", "si": "Sinhala", "he": "Hebrew", "ko": "Hangul", "am": "Ethiopic", "ka": "Georgian",
    "hy": "Armenian", "my": "Myanmar",
}
# ISO 15924 codes, for language tags such as ``ben_Beng`` (the FLORES / fineweb-2 convention).
ISO15924_SCRIPTS = {
    "Beng": "Bengali", "Deva": "Devanagari", "Latn": "Latin", "Arab": "Arabic", "Cyrl": "Cyrillic",
    "Grek": "Greek", "Thai": "Thai", "Hans": "Han", "Hant": "Han", "Taml": "Tamil", "Telu": "Telugu",
    "Mlym": "Malayalam", "Knda": "Kannada", "Gujr": "Gujarati", "Guru": "Gurmukhi", "Orya": "Oriya",
    "Sinh": "Sinhala", "Hebr": "Hebrew", "Hang": "Hangul", "Kore": "Hangul", "Ethi": "Ethiopic",
    "Geor": "Georgian", "Armn": "Armenian", "Mymr": "Myanmar",
}

# Simple classes use the standard `re` engine (faster than `regex` on them); `\w` stays with `regex`, whose
# word characters include the combining marks of Indic scripts.
# C0/C1 controls (Cc) except tab and newline, plus the BOM; ZWJ/ZWNJ (also format characters) must survive.
_CONTROL = re.compile("[\x00-\x08\x0b-\x1f\x7f-\x9f\ufeff]")
# Horizontal white space: `regex`'s \s (Unicode White_Space) without the newline. Only runs that the
# canonical form changes are matched: two or more characters, or a single one that is not a plain space.
HSPACE_CHARS = "\t\x0b\x0c\r \x85\xa0\u1680\u2000-\u200a\u2028\u2029\u202f\u205f\u3000"
_HSPACE = re.compile(f"[{HSPACE_CHARS}]{{2,}}|[{HSPACE_CHARS.replace(' ', '')}]")
# A character either of the two would change; with none of them, no run of two spaces, no newline and no white
# space at its ends, a text is already canonical. (One class: an alternation of the two scans 5x slower.)
_NEEDS_WORK = re.compile(f"[{_CONTROL.pattern[1:-1]}{HSPACE_CHARS.replace(' ', '')}]")
_SPACE_AROUND_NEWLINE = re.compile(r" ?\n ?")
_BLANK_LINES = re.compile(r"\n{3,}")
# A character that keeps a line: anything but punctuation (P*), symbols (S*) and white space, of any script. A
# line with none of them is markup or a punctuation run ("```", "***", "====", "-----", "* * *", a lone "॥").
_NOT_MARKUP = regex.compile(r"[^\p{P}\p{S}\s]")
_LETTER = r"[\p{L}\p{M}]"
_WORD = regex.compile(r"\w+")
_WORD_WIDTH = 24
_WORD_POWERS = np.uint64(0x100000001B3) ** np.arange(_WORD_WIDTH, dtype=np.uint64)
_NGRAM_MULTIPLIER = np.uint64(0x9E3779B1)



def script_of(language: str) -> str | None:
    """The script a declared language is written in (``bn`` -> Bengali, ``ben_Beng`` -> Bengali), or None."""
    if "_" in language:
        return ISO15924_SCRIPTS.get(language.split("_", 1)[1])
    return LANGUAGE_SCRIPTS.get(language.split("-", 1)[0].lower())


def canonicalize(text: str, counters: Counter | None = None) -> str:
    """Canonical form, no control characters, single spaces, at most one blank line, no line that is only markup
    or punctuation (:func:`drop_markup_lines`); counts what changed."""
    counters = Counter() if counters is None else counters
    out = normalize(text)
    if out != text:
        counters["changed_normalization"] += 1
    if (_NEEDS_WORK.search(out) is None and "  " not in out and "\n" not in out and not out[:1].isspace()
            and not out[-1:].isspace()):
        return out  # the common case, in one scan: nothing below would change it
    stripped = _CONTROL.sub("", out)
    if stripped != out:
        counters["changed_control_chars"] += 1
    spaced = _HSPACE.sub(" ", stripped.replace("\r\n", "\n").replace("\r", "\n"))
    if "\n" in spaced:
        spaced = _BLANK_LINES.sub("\n\n", _SPACE_AROUND_NEWLINE.sub("\n", spaced))
    spaced = spaced.strip()
    if spaced != stripped:
        counters["changed_whitespace"] += 1
    return drop_markup_lines(spaced, counters) if "\n" in spaced else spaced


def drop_markup_lines(text: str, counters: Counter) -> str:
    """``text`` (in canonical white space) without its lines that are only punctuation, symbols and spaces,
    counted as ``markup_lines_dropped``. A line with a letter, mark or digit stays, whatever punctuation it has;
    a document that is nothing but such lines stays as it is, for the filters to judge."""
    lines = text.split("\n")
    kept = [line for line in lines if not line or _NOT_MARKUP.search(line)]
    if len(kept) == len(lines) or not any(kept):
        return text
    counters["markup_lines_dropped"] += len(lines) - len(kept)
    return _BLANK_LINES.sub("\n\n", "\n".join(kept)).strip("\n")


def code_points(text: str) -> np.ndarray:
    """The text's code points as a uint32 array (lone surrogates kept as their values)."""
    return np.frombuffer(text.encode("utf-32-le", "surrogatepass"), dtype=np.uint32)


@functools.cache
def _all_code_points() -> str:
    # Every code point but the surrogates, as one string (what the tables below are matched against).
    cps = np.concatenate((np.arange(0xD800), np.arange(0xE000, 0x110000))).astype(np.uint32)
    return cps.tobytes().decode("utf-32-le")


def _matching_code_points(pattern: str, limit: int) -> np.ndarray:
    # One `regex` pass over every code point below ``limit``: the table then agrees with `regex` exactly.
    cps = code_points("".join(regex.findall(pattern + "+", _all_code_points(), flags=regex.V1)))
    return cps[cps < limit]


@functools.cache
def _letter_classes() -> np.ndarray:
    classes = np.zeros(0x110000, dtype=np.uint8)
    classes[_matching_code_points(_LETTER, 0x110000)] = 1
    return classes


@functools.cache
def _script_classes(script: str) -> np.ndarray:
    """Per code point: 0 not a letter or mark, 1 a letter or mark, 2 one of ``script`` (Basic Multilingual Plane)."""
    classes = _letter_classes().copy()
    classes[_matching_code_points(rf"[\p{{Script={script}}}&&{_LETTER}]", 0x10000)] = 2
    return classes


def script_share(text: str, script: str) -> float:
    """Share of letters and marks in ``text`` that belong to ``script`` (1.0 when there are no letters)."""
    return float(script_shares([text], script)[0])


def script_shares(texts: list[str], script: str) -> np.ndarray:
    """:func:`script_share` of many documents, in one numpy pass over their code points."""
    classes = _script_classes(script)[code_points("".join(texts))]
    bounds = np.cumsum([0] + [len(t) for t in texts])  # a str's length is its number of code points
    letters = np.concatenate(([0], np.cumsum(classes >= 1)))[bounds]
    in_script = np.concatenate(([0], np.cumsum(classes == 2)))[bounds]
    letters, in_script = np.diff(letters), np.diff(in_script)
    return np.where(letters > 0, in_script / np.maximum(letters, 1), 1.0)


def words(text: str) -> list[str]:
    """The document's words, case-folded: runs of `regex`'s word characters (what n-gram repetition and dedup
    look at; :func:`words_batch` finds the same runs without making strings)."""
    return _WORD.findall(text.casefold())


@functools.cache
def _word_characters() -> np.ndarray:
    """Per code point: whether `regex`'s ``\\w`` matches it (Indic vowel signs and viramas included)."""
    table = np.zeros(0x110000, dtype=bool)
    table[_matching_code_points(r"\w", 0x110000)] = True
    return table


@dataclass
class Words:
    """A document's case-folded words as the filters and dedup use them, without the strings: how many, a
    64-bit hash of each (its first ``_WORD_WIDTH`` code points as a polynomial), and the exact-dedup key (a
    16-byte hash of all their characters and lengths: case, punctuation and spacing do not count)."""

    count: int
    hashes: np.ndarray
    key: bytes


def words_batch(texts: list[str]) -> list[Words]:
    """The :class:`Words` of many documents, found in one numpy pass over their case-folded code points: the
    same words as :func:`words` (maximal runs of word characters), hashed as :func:`ngram_hashes` expects."""
    folded = [t.casefold() for t in texts]
    cps = code_points("\n".join(folded))  # a newline is no word character: no word spans two documents
    is_word = _word_characters()[cps]
    edges = np.diff(is_word.view(np.int8), prepend=np.int8(0), append=np.int8(0))
    starts, ends = np.flatnonzero(edges == 1), np.flatnonzero(edges == -1)
    lengths = ends - starts
    kept = np.minimum(lengths, _WORD_WIDTH)
    seg_starts = np.cumsum(kept) - kept
    position = np.arange(int(kept.sum())) - np.repeat(seg_starts, kept)
    values = cps[np.repeat(starts, kept) + position].astype(np.uint64) * _WORD_POWERS[position]
    hashes = (np.add.reduceat(values, seg_starts, dtype=np.uint64) if len(starts)
              else np.zeros(0, dtype=np.uint64))
    doc_starts = np.cumsum([0] + [len(f) + 1 for f in folded[:-1]])
    doc_of_word = np.searchsorted(doc_starts, starts, side="right") - 1
    counts = np.bincount(doc_of_word, minlength=len(texts))
    word_bounds = np.concatenate(([0], np.cumsum(counts))).tolist()
    # the key hashes the word count, the word lengths and the characters: the same words give the same bytes
    lengths_bytes = lengths.astype("<u4").tobytes()
    chars_bytes = cps[is_word].astype("<u4", copy=False).tobytes()
    char_bounds = np.concatenate(([0], np.cumsum(lengths))).tolist()
    out = []
    for d in range(len(texts)):
        a, b = word_bounds[d], word_bounds[d + 1]
        key = hashlib.blake2b(b"%d:" % (b - a) + lengths_bytes[4 * a:4 * b]
                              + chars_bytes[4 * char_bounds[a]:4 * char_bounds[b]], digest_size=16).digest()
        out.append(Words(b - a, hashes[a:b], key))
    return out


def ngram_hashes(word_hashes: np.ndarray, n: int) -> np.ndarray:
    """64-bit hashes of the word n-grams (one n-gram of all words when there are fewer than n)."""
    return ngram_hashes_batch([word_hashes], n)[0]


def ngram_hashes_batch(word_hashes: list[np.ndarray], n: int) -> list[np.ndarray]:
    """:func:`ngram_hashes` of many documents, computed in one numpy pass over all their words."""
    counts = np.array([len(h) for h in word_hashes], dtype=np.int64)
    if not counts.sum():
        return [np.zeros(0, dtype=np.uint64) for _ in word_hashes]
    h = np.concatenate(word_hashes).astype(np.uint64)
    full = _join_ngrams(h, n)  # n-grams of the concatenation; each document takes those inside it
    starts = np.concatenate(([0], np.cumsum(counts[:-1]))).tolist()
    out = []
    for start, count in zip(starts, counts.tolist(), strict=True):
        if count >= n:
            out.append(full[start:start + count - n + 1])
        else:
            out.append(_join_ngrams(h[start:start + count], count) if count else np.zeros(0, dtype=np.uint64))
    return out


def _join_ngrams(h: np.ndarray, n: int) -> np.ndarray:
    n = min(n, len(h))
    grams = np.zeros(len(h) - n + 1, dtype=np.uint64)
    for k in range(n):
        grams = grams * _NGRAM_MULTIPLIER + h[k:len(h) - n + 1 + k]
    return grams
