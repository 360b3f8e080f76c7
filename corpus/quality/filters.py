"""The quality filters, one registry: each filter is one registration here, and everything else reads ``FILTERS``.

A filter (datatrove's ``BaseFilter`` is the model) has a ``name``, which is also its drop reason (a document it
drops is counted as ``drop_<name>``, so the build report's cleaning table has its column without more ado),
its ``options`` (each an attribute of :class:`CleanConfig` with its default, and a ``corpus build`` flag with
its help, unless ``flag=False``), and :meth:`Filter.drops`, which decides on a whole batch at once: it gets
the cleaned documents of one language that no earlier filter dropped (:class:`Batch`) and returns a boolean
mask, True for a document to drop. Batches keep the numpy passes over many documents that make cleaning fast.
The filters run in the order they are registered; the first that drops a document names the reason.

Adding a filter is one registration in this file. A filter on one number per document is a
:class:`PerDocument` (its measure, its option, a maximum or a minimum)::

    def digit_share(text: str) -> float:
        return sum(c.isdigit() for c in text) / max(len(text), 1)


    register(PerDocument("too_many_digits", Option(
        "max_digit_share", 0.5, cli.share, "drop documents whose characters are more than this share digits"),
        digit_share))

and one that decides on the whole batch at once (numpy over all its documents, as script purity does) is a
:class:`Filter` subclass with its ``name``, ``options`` and ``drops``, registered the same way. Either way,
``CleanConfig``, ``--max-digit-share`` (``corpus build`` and ``corpus plan``), the manifest's recorded
settings, the re-cleaning of ``corpus inspect --check-text`` and the report's ``drop_too_many_digits`` column
follow from it.
"""

from __future__ import annotations

import re
from collections import Counter
from collections.abc import Callable
from dataclasses import dataclass

import numpy as np

from common import cli
from corpus.quality.clean import (
    Words,
    canonicalize,
    ngram_hashes,
    ngram_hashes_batch,
    script_of,
    script_shares,
    words_batch,
)


@dataclass(frozen=True)
class Option:
    """One setting of a filter: a :class:`CleanConfig` attribute, and the ``--FIELD-WITH-DASHES`` flag that sets it."""

    field: str
    default: int | float
    type: Callable[[str], int | float]  # the flag's argparse type (common.cli's checked numbers)
    help: str
    flag: bool = True

    @property
    def flag_name(self) -> str:
        return "--" + self.field.replace("_", "-")


@dataclass
class Batch:
    """Cleaned documents of one language as the filters see them: the texts, their words and their word n-gram
    hashes (``CleanConfig.ngram`` words each; measured once for the batch, and reused by dedup)."""

    texts: list[str]
    language: str
    words: list[Words]
    grams: list[np.ndarray]

    def take(self, rows: np.ndarray) -> Batch:
        picked = rows.tolist()
        return Batch([self.texts[i] for i in picked], self.language, [self.words[i] for i in picked],
                     [self.grams[i] for i in picked])


class Filter:
    """A quality filter: ``name`` (its drop reason), ``options`` (its settings), :meth:`drops` (its decision)."""

    name: str
    options: tuple[Option, ...] = ()

    def drops(self, docs: Batch, config: CleanConfig) -> np.ndarray:
        """One bool per document of ``docs``: True drops it."""
        raise NotImplementedError


class PerDocument(Filter):
    """A filter on one number per document: ``measure(text)`` against the value of its one option, a maximum (a
    document above it is dropped) or, with ``at_least``, a minimum (a document below it is dropped)."""

    def __init__(self, name: str, option: Option, measure: Callable[[str], float], *, at_least: bool = False):
        self.name, self.options, self.measure, self.at_least = name, (option,), measure, at_least

    def drops(self, docs: Batch, config: CleanConfig) -> np.ndarray:
        values = np.fromiter(map(self.measure, docs.texts), dtype=np.float64, count=len(docs.texts))
        limit = config[self.options[0].field]
        return values < limit if self.at_least else values > limit


FILTERS: list[Filter] = []


def register(new: Filter) -> Filter:
    """Add a filter: it runs after those registered before it."""
    taken = {o.field for f in FILTERS for o in f.options}
    if new.name in {f.name for f in FILTERS} or any(o.field in taken for o in new.options):
        raise ValueError(f"filter {new.name!r}: its name or an option of it is already registered")
    FILTERS.append(new)
    return new


def unregister(name: str) -> None:
    """Remove the filter ``name`` (tests that register one of their own put things back with this)."""
    FILTERS[:] = [f for f in FILTERS if f.name != name]


# The order in which builds have always recorded these settings (manifest.json's ``filters.clean`` and the
# build's arguments): kept, so that the same build writes the same bytes. Other options follow, in registry order.
_RECORDED_ORDER = ("min_chars", "min_script_share", "max_dup_line_share", "max_dup_ngram_share", "ngram",
                   "max_bad_char_share")


def options() -> list[Option]:
    """Every registered filter's options, in the order :class:`CleanConfig` holds them."""
    found = [o for f in FILTERS for o in f.options]
    rank = {field: i for i, field in enumerate(_RECORDED_ORDER)}
    return sorted(found, key=lambda o: rank.get(o.field, len(rank)))  # stable: the rest in registry order


class CleanConfig(dict):
    """The filters' settings: ``{field: value}`` for every option of every registered filter (its default unless
    given), also readable as attributes (``config.min_chars``). A mapping rather than a fixed dataclass, so that
    registering a filter is all it takes to add its settings; it is recorded as the JSON object it is."""

    def __init__(self, values=(), /, **given) -> None:
        given = dict(values, **given)
        known = options()
        unknown = sorted(set(given) - {o.field for o in known})
        if unknown:
            raise TypeError(f"CleanConfig: no registered filter has the setting {', '.join(unknown)}")
        super().__init__((o.field, given.get(o.field, o.default)) for o in known)

    def __getattr__(self, name: str):
        try:
            return self[name]
        except KeyError:
            raise AttributeError(name) from None


# --- the filters, in the order they run ----------------------------------------------------------------------

register(PerDocument("too_short", Option("min_chars", 20, cli.non_negative_int,
                                         "drop documents with fewer characters (after cleaning)"), len, at_least=True))


# U+FFFD, and UTF-8 read as cp1252/Latin-1: a lead byte shown as Â/Ã/à/â followed by a continuation byte
# shown as a C1-range or cp1252 punctuation character (e.g. "à¦¬" for ব, "â€™" for ’, "Ã©" for é).
_MOJIBAKE = re.compile(
    "\uFFFD|[\u00C2\u00C3\u00E0\u00E2][\u0080-\u00BF\u0152\u0153\u0160\u0161\u0178\u017D\u017E\u0192"
    "\u02C6\u02DC\u2013\u2014\u2018-\u201E\u2020-\u2022\u2026\u2030\u2039\u203A\u20AC\u2122]"
)
_MOJIBAKE_START = re.compile("[\uFFFD\u00C2\u00C3\u00E0\u00E2]")  # one class: a quick "none here" first


def bad_char_share(text: str) -> float:
    """Share of characters that are U+FFFD or part of a mojibake sequence."""
    if not text or _MOJIBAKE_START.search(text) is None:
        return 0.0
    return sum(len(m) for m in _MOJIBAKE.findall(text)) / len(text)


register(PerDocument("mojibake", Option(
    "max_bad_char_share", 0.01, cli.share,
    "drop documents whose characters are more than this share U+FFFD or mojibake (UTF-8 read as cp1252/Latin-1)"),
    bad_char_share))


class ScriptPurity(Filter):
    name = "script_purity"
    options = (Option("min_script_share", 0.75, cli.share,
                      "drop documents whose letters are less than this share in the script of their source's "
                      "language (languages of unknown script pass)"),)

    def drops(self, docs: Batch, config: CleanConfig) -> np.ndarray:
        script = script_of(docs.language)
        if script is None:
            return np.zeros(len(docs.texts), dtype=bool)
        return script_shares(docs.texts, script) < config.min_script_share


register(ScriptPurity())


def dup_line_share(text: str) -> float:
    """Share of line characters in lines that occur more than once in the document."""
    lines = [line for line in text.split("\n") if line.strip()]
    if len(lines) < 2:
        return 0.0
    counts = Counter(lines)
    total = sum(len(line) for line in lines)
    return sum(len(line) for line in lines if counts[line] > 1) / total


register(PerDocument("repeated_lines", Option(
    "max_dup_line_share", 0.3, cli.share,
    "drop documents whose line characters are more than this share in lines that occur more than once"),
    dup_line_share))


def dup_ngram_share(text: str, n: int) -> float:
    """Share of words covered by a word n-gram that occurs more than once in the document."""
    (w,) = words_batch([text])
    return covered_share(ngram_hashes(w.hashes, n), w.count, n)


def covered_share(grams: np.ndarray, n_words: int, n: int) -> float:
    """Share of ``n_words`` words covered by an n-gram (of the hashes ``grams``) that occurs more than once."""
    if n_words < 2 * n or len(set(grams.tolist())) == len(grams):
        return 0.0
    _, inverse, counts = np.unique(grams, return_inverse=True, return_counts=True)
    starts = np.flatnonzero(counts[inverse] > 1)
    edges = np.zeros(n_words + 1, dtype=np.int64)
    np.add.at(edges, starts, 1)
    np.add.at(edges, starts + n, -1)
    return float(np.count_nonzero(np.cumsum(edges[:-1]))) / n_words


class RepeatedNgrams(Filter):
    name = "repeated_ngrams"
    options = (Option("max_dup_ngram_share", 0.3, cli.share,
                      "drop documents whose words are more than this share covered by repeated word n-grams"),
               Option("ngram", 5, cli.positive_int, "words per n-gram (of this filter, and of near-dedup's "
                      "shingles where they agree)", flag=False))

    def drops(self, docs: Batch, config: CleanConfig) -> np.ndarray:
        n = config.ngram
        out = np.zeros(len(docs.texts), dtype=bool)
        # a document of fewer than 2n words has no repeat to measure (covered_share's 0): most short ones
        counts = np.fromiter((w.count for w in docs.words), dtype=np.int64, count=len(docs.words))
        for i in np.flatnonzero(counts >= 2 * n).tolist():
            out[i] = covered_share(docs.grams[i], docs.words[i].count, n) > config.max_dup_ngram_share
        return out


register(RepeatedNgrams())


# --- cleaning, then the filters ------------------------------------------------------------------------------

def drop_reasons(docs: Batch, config: CleanConfig) -> list[str | None]:
    """Per document, the name of the first filter that drops it, or None when it passes them all."""
    reasons: list[str | None] = [None] * len(docs.texts)
    alive = np.arange(len(docs.texts))
    view = docs
    for f in FILTERS:
        if not len(alive):
            break
        dropped = np.asarray(f.drops(view, config), dtype=bool)
        if dropped.any():
            for row in alive[dropped].tolist():
                reasons[row] = f.name
            alive = alive[~dropped]
            view = docs.take(alive)
    return reasons


def quality_issue(text: str, language: str, config: CleanConfig) -> str | None:
    """The name of the first filter a cleaned ``text`` fails, or None (one document: see :func:`drop_reasons`)."""
    (w,) = words_batch([text])
    return drop_reasons(Batch([text], language, [w], [ngram_hashes(w.hashes, config.ngram)]), config)[0]


@dataclass
class CleanDocument:
    """A document that passed: its cleaned text, words and word n-gram hashes (reused by dedup)."""

    text: str
    words: Words
    grams: np.ndarray


def clean_and_filter_batch(texts: list[str], language: str, config: CleanConfig,
                           counters: Counter) -> list[CleanDocument | None]:
    """Canonicalise many documents of one language and apply the filters; None for each one dropped, counted as
    ``drop_<filter>`` in ``counters`` (with ``documents_in`` and what :func:`corpus.quality.clean.canonicalize` changed)."""
    counters["documents_in"] += len(texts)
    cleaned = [canonicalize(text, counters) for text in texts]
    doc_words = words_batch(cleaned)
    docs = Batch(cleaned, language, doc_words, ngram_hashes_batch([w.hashes for w in doc_words], config.ngram))
    out: list[CleanDocument | None] = []
    for text, w, grams, reason in zip(cleaned, doc_words, docs.grams, drop_reasons(docs, config), strict=True):
        if reason is not None:
            counters[f"drop_{reason}"] += 1
            out.append(None)
        else:
            out.append(CleanDocument(text, w, grams))
    return out


def clean_document(text: str, language: str, config: CleanConfig, counters: Counter) -> str | None:
    """The cleaned text of a document that passes the filters, else None (see :func:`clean_and_filter_batch`)."""
    (doc,) = clean_and_filter_batch([text], language, config, counters)
    return None if doc is None else doc.text
