"""Token -> character attribution and the per-script / per-language metrics built on it.

A batch of documents is first laid out once, independently of any tokenizer (:func:`prepare_batch`: scripts,
grapheme clusters, words, all as arrays over the batch's characters and UTF-8 bytes). Each tokenizer's tokens
are then attributed to the bytes they cover (:func:`count_tokens`): a token spread over bytes of two scripts
counts fractionally, in proportion to its bytes in each. Counts are kept per script as float arrays indexed
like ``SCRIPT_NAMES``, so adding batches is adding arrays, and a language's totals are the sums over scripts.

Definitions (all counts in the :class:`Metrics` of a script or language):

* ``chars``: code points; ``graphemes``: ``\\X`` clusters; ``bytes``: UTF-8 bytes; ``tokens``: attributed tokens.
* ``words``: maximal runs of non-whitespace; ``word_tokens``: tokens overlapping each word, summed;
  ``continued_words``: words covered by more than one token (Rust et al. 2021).
* ``boundaries``: token boundaries inside documents; ``broken_boundaries``: those falling inside a grapheme
  cluster; ``split_char_boundaries``: those falling inside one character's UTF-8 bytes.
* ``pretokens``: the pre-tokenizer's pieces (no token crosses one); ``pretoken_ceiling`` = chars / pretokens,
  the best chars/token any vocabulary could reach behind that pre-tokenizer; ``mark_splits``: pieces that
  begin with a combining mark (\\p{M}), i.e. the pre-tokenizer cut a mark off its letter. A pre-tokenizer with
  fewer pieces than ``PHRASE_PIECES_PER_WORD`` per word keeps several words in a piece (phrase merges): its
  ceiling is then a phrase's length, far above what any vocabulary reaches, so it bounds nothing in practice
  (``phrase_pieces``).
* ``unk_tokens`` / ``byte_fallback_tokens``: tokens that are the UNK token / a byte-fallback piece.
* ``vocab_types_used``: distinct ids among tokens whose middle byte is in that script (or language).
"""

from __future__ import annotations

from collections.abc import Callable, Sequence
from dataclasses import dataclass, field
from functools import cached_property

import numpy as np

from fertility.scripts import SCRIPT_NAMES, ScriptedBatch, is_mark, is_space, scripted_batch
from fertility.tokenizers import Tokenizer
from fertility.tokenizers.base import SEPARATORS_IN_PIECES

N_SCRIPTS = len(SCRIPT_NAMES)
# Word pre-tokenizers give at least one piece per word (more with punctuation and spaces); phrase pre-tokenizers
# give one per several words (about 0.1 on the shipped sample).
PHRASE_PIECES_PER_WORD = 0.8
COUNT_FIELDS = (
    "chars", "graphemes", "bytes", "tokens", "words", "word_tokens", "continued_words", "boundaries",
    "broken_boundaries", "split_char_boundaries", "pretokens", "mark_splits", "unk_tokens",
    "byte_fallback_tokens",
)


@dataclass
class Metrics:
    """Counts for one script or language under one tokenizer, and the rates derived from them."""

    documents: int = 0
    chars: int = 0
    graphemes: int = 0
    bytes: int = 0
    tokens: float = 0.0
    words: int = 0
    word_tokens: float = 0.0
    continued_words: int = 0
    boundaries: int = 0
    broken_boundaries: int = 0
    split_char_boundaries: int = 0
    pretokens: float = 0.0
    mark_splits: int = 0
    unk_tokens: float = 0.0
    byte_fallback_tokens: float = 0.0
    vocab_types_used: int = 0
    # Share of the characters analysed in detail (1.0: exact); below 1, the half-widths of the approximate 95%
    # intervals of the estimated rates (None: too few sampled blocks). See fertility.scoring.sampling.
    sample_share: float = 1.0
    ci95: dict[str, float | None] = field(default_factory=dict)

    @property
    def chars_per_token(self) -> float:
        return _ratio(self.chars, self.tokens)

    @property
    def graphemes_per_token(self) -> float:
        return _ratio(self.graphemes, self.tokens)

    @property
    def bytes_per_token(self) -> float:
        return _ratio(self.bytes, self.tokens)

    @property
    def tokens_per_word(self) -> float:
        return _ratio(self.word_tokens, self.words)

    @property
    def continued_word_rate(self) -> float:
        return _ratio(self.continued_words, self.words)

    @property
    def broken_grapheme_rate(self) -> float:
        return _ratio(self.broken_boundaries, self.boundaries)

    @property
    def unk_rate(self) -> float:
        return _ratio(self.unk_tokens, self.tokens)

    @property
    def byte_fallback_rate(self) -> float:
        return _ratio(self.byte_fallback_tokens, self.tokens)

    @property
    def pretoken_ceiling(self) -> float:
        return _ratio(self.chars, self.pretokens)

    @property
    def phrase_pieces(self) -> bool:
        """The pre-tokenizer keeps several words in one piece: the ceiling is a phrase's length, not a limit."""
        return 0 < self.pretokens < PHRASE_PIECES_PER_WORD * self.words

    def to_dict(self) -> dict:
        """Counts, then rates; floats rounded to 6 significant decimals for a stable, readable JSON."""
        out: dict = {}
        for name in RATE_NAMES:
            out[name] = _round(getattr(self, name))
        for name in self.__dataclass_fields__:
            out[name] = _round(getattr(self, name))
        return out


RATE_NAMES = (
    "chars_per_token", "graphemes_per_token", "bytes_per_token", "tokens_per_word", "continued_word_rate",
    "broken_grapheme_rate", "unk_rate", "byte_fallback_rate", "vocab_types_used", "pretoken_ceiling",
)


def _ratio(a: float, b: float) -> float:
    return float(a) / float(b) if b else 0.0


def _round(x):
    return round(x, 6) if isinstance(x, float) else x


@dataclass
class Batch:
    """A batch of documents laid out independently of any tokenizer.

    Token spans are UTF-8 byte offsets; a byte position is looked up through the character it falls in
    (``byte_char``), so the per-character arrays serve bytes too: one per-byte array instead of four, each a
    pass over 2.7 M bytes for 1 M Bangla characters (benchmarks/results/2026-12-03-fertility-exact).
    """

    texts: list[str]
    scripted: ScriptedBatch
    byte_char: np.ndarray | None  # per byte position (0..n_bytes): its character (n at the end); None: ASCII
    # (a byte is a character)
    char_runs: np.ndarray  # per character position (0..n): how many script changes precede it
    cluster_start_char: np.ndarray  # bool over character positions 0..n: a cluster (or document) starts here
    word_start: np.ndarray  # global character offsets of words
    word_end: np.ndarray
    word_script: np.ndarray
    static: dict[str, np.ndarray]  # tokenizer-independent per-script counts: chars, graphemes, bytes, words

    def chars(self, pos: np.ndarray) -> np.ndarray:
        """The character each byte position (0..n_bytes) falls in."""
        return pos if self.byte_char is None else self.byte_char.take(pos)

    @property
    def scripts(self) -> np.ndarray:
        """The scripts the batch's characters are in (a few)."""
        return np.flatnonzero(self.static["chars"])

    @cached_property
    def words_are_whitespace_pieces(self) -> bool:
        """The words are also ``WHITESPACE_PIECES``' matches: no character of the batch is one of the few that
        ``str.isspace`` and the pattern disagree on."""
        first, last = SEPARATORS_IN_PIECES
        cps = self.scripted.cps
        # a minimum first: text of no control characters is decided without a difference array of every code
        # point (0.06 ms against 0.21 per 1 M characters; benchmarks/results/2026-12-04-fertility-spm-2/micro.txt);
        # uint32: below ``first`` wraps round
        return not cps.size or bool(cps.min() > last) or not np.any(cps - first <= last - first)


def prepare_batch(texts: Sequence[str]) -> Batch:
    """Scripts, clusters, characters and words of a batch, as arrays (see the module docstring)."""
    texts = list(texts)
    sb = scripted_batch(texts)
    n = sb.cps.size
    n_bytes = int(sb.char_to_byte[-1])
    byte_char = None
    if n_bytes != n:
        # a running count of the characters started before each byte: set where characters start when most
        # are multi-byte (7-9 ms against 18-21 ms for np.repeat on 1 M Bangla characters;
        # benchmarks/results/2026-12-03-fertility-exact-2/micro.txt), else cleared at the few continuation
        # bytes (English: 0.7 ms against 1.9 for np.repeat; benchmarks/results/2026-12-04-fertility-spm/micro.txt)
        if n_bytes > 3 * n // 2:
            byte_char = np.zeros(n_bytes + 1, dtype=np.int32)
            byte_char[sb.char_to_byte[1:-1]] = 1
        else:
            byte_char = np.ones(n_bytes + 1, dtype=np.int32)
            byte_char[0] = 0
            wide = np.flatnonzero(sb.char_bytes > 1)
            extra = sb.char_bytes[wide].astype(np.int64) - 1
            byte_char[np.repeat(sb.char_to_byte[wide] + 1 - (np.cumsum(extra) - extra), extra)
                      + np.arange(int(extra.sum()))] = 0
        np.cumsum(byte_char, out=byte_char)
        byte_char[-1] = n
    cluster_start_char = np.empty(n + 1, dtype=bool)
    cluster_start_char[:n] = sb.starts_cluster
    cluster_start_char[sb.doc_char_start] = True

    # words: maximal runs of non-space characters within a document
    edge = np.zeros(n + 1, dtype=bool)
    edge[sb.doc_char_start] = True
    solid = np.zeros(n + 2, dtype=bool)
    np.logical_not(is_space(sb.cps), out=solid[1:-1])
    starts = np.flatnonzero(solid[1:-1] & (~solid[:-2] | edge[:-1]))
    ends = np.flatnonzero(solid[1:-1] & (~solid[2:] | edge[1:])) + 1
    # per position 0..n, the script changes before it (equal values: one script between); chars, bytes and
    # clusters counted per run of one script, of which a batch has a few thousand (the sums are of whole
    # numbers, so the floats are those of counting character by character)
    change = sb.char_script[1:] != sb.char_script[:-1]
    runs = np.zeros(n + 1, dtype=np.int32)  # summed in the array's own type: 0.6 ms against 4.5 ms into int64
    if n:
        np.cumsum(change, dtype=np.int32, out=runs[1:n])
        runs[n] = runs[n - 1]
    bounds = np.concatenate([[0], np.flatnonzero(change) + 1, [n]]) if n else np.zeros(1, dtype=np.int64)
    run_script = sb.char_script[bounds[:-1]]
    word_script = sb.char_script.take(starts)
    clusters = np.searchsorted(sb.cluster_start, bounds)
    static = {
        "chars": np.bincount(run_script, weights=np.diff(bounds), minlength=N_SCRIPTS),
        "graphemes": np.bincount(run_script, weights=np.diff(clusters), minlength=N_SCRIPTS),
        "bytes": np.bincount(run_script, weights=np.diff(sb.char_to_byte[bounds]), minlength=N_SCRIPTS),
        "words": np.bincount(word_script, minlength=N_SCRIPTS).astype(np.float64),
    }
    return Batch(texts, sb, byte_char, runs, cluster_start_char, starts, ends, word_script, static)


@dataclass
class Counts:
    """Per-script count arrays for one tokenizer and one language, summed over batches."""

    vocab_size: int
    documents: int = 0
    token_total: int = 0
    arrays: dict[str, np.ndarray] = field(default_factory=dict)
    used: dict[int, np.ndarray] = field(default_factory=dict)  # script -> bool over the vocabulary

    def __post_init__(self) -> None:
        for name in COUNT_FIELDS:
            self.arrays.setdefault(name, np.zeros(N_SCRIPTS))

    def add(self, other: Counts) -> None:
        self.documents += other.documents
        self.token_total += other.token_total
        for name in COUNT_FIELDS:
            self.arrays[name] += other.arrays[name]
        for sid, used in other.used.items():
            self._used(sid, used.size)[: used.size] |= used

    def _used(self, sid: int, size: int) -> np.ndarray:
        cur = self.used.get(sid)
        if cur is None or cur.size < size:
            grown = np.zeros(max(size, self.vocab_size), dtype=bool)
            if cur is not None:
                grown[: cur.size] = cur
            self.used[sid] = cur = grown
        return cur

    def scripts(self) -> list[int]:
        """Script indices that have any characters, most characters first."""
        chars = self.arrays["chars"]
        return [int(i) for i in np.argsort(-chars, kind="stable") if chars[i] > 0]

    def script_metrics(self, sid: int) -> Metrics:
        """The metrics of one script (documents: those of the whole group)."""
        m = Metrics(documents=self.documents)
        for name in COUNT_FIELDS:
            value = float(self.arrays[name][sid])
            setattr(m, name, value if isinstance(getattr(m, name), float) else int(round(value)))
        used = self.used.get(sid)
        m.vocab_types_used = int(used.sum()) if used is not None else 0
        return m

    def total_metrics(self) -> Metrics:
        """The metrics over all scripts; tokens is the exact token count."""
        m = Metrics(documents=self.documents)
        for name in COUNT_FIELDS:
            value = float(self.arrays[name].sum())
            setattr(m, name, value if isinstance(getattr(m, name), float) else int(round(value)))
        m.tokens = float(self.token_total)
        if self.used:
            union = np.zeros(max(u.size for u in self.used.values()), dtype=bool)
            for u in self.used.values():
                union[: u.size] |= u
            m.vocab_types_used = int(union.sum())
        return m


def count_tokens(tok: Tokenizer, batch: Batch) -> Counts:
    """Tokenize ``batch`` with ``tok`` and attribute its tokens, boundaries and pre-token pieces to scripts."""
    sb = batch.scripted
    n_bytes = int(sb.char_to_byte[-1])
    counts = Counts(tok.vocab_size, documents=len(batch.texts))
    for name, arr in batch.static.items():
        counts.arrays[name] = arr.copy()
    # The pre-tokenizer's pieces are found on this thread: each library encodes on every core already, and a
    # thread beside it cost CPU time (gpt2 on 1 M Bangla characters: 1.88 s against 1.78 s found here; HF's
    # thread pool spins while it waits; benchmarks/results/2026-12-03-fertility-exact). Pieces between
    # whitespace are the batch's words, found once for every tokenizer (sentencepiece's pieces of 1 M characters
    # cost 5 ms; benchmarks/results/2026-12-04-fertility-spm/micro.txt).
    if tok.splits_on_whitespace and batch.words_are_whitespace_pieces:
        piece_start, piece_end = batch.word_start, batch.word_end
    else:
        starts, ends, per_doc = tok.pretokenize_batch(batch.texts)
        offset = np.repeat(sb.doc_char_start[:-1], per_doc)
        piece_start, piece_end = starts + offset, ends + offset
    # each document's UTF-8 length from the layout, not encoded again by the adapter (2.8 ms of 1 M Bangla
    # characters, 0.4 ms of English; benchmarks/results/2026-12-04-fertility-spm-2/micro.txt, as below)
    spans = tok.encode_spans(batch.texts, np.diff(sb.doc_byte_start).astype(np.int64))
    counts.token_total = int(spans.counts.sum())
    if counts.token_total == 0 or n_bytes == 0:
        return counts
    offset = np.repeat(sb.doc_byte_start[:-1], spans.counts)
    gs = offset + spans.starts
    ge = offset + spans.ends
    # (gathers by take, not indexing: twice as fast at the int32 characters that byte_char holds)
    char_script, runs = sb.char_script, batch.char_runs
    # A token counts for the script of the byte it starts at; an empty one at its document's end (there is
    # no such byte), of the document's last byte: looked up again for the empty ones alone (the one past the
    # batch's last character clipped meanwhile), not for every token (1.5 -> 0.9 ms of 1 M English characters).
    first_char = batch.chars(gs)
    script = char_script.take(first_char, mode="clip")
    empty = np.flatnonzero(ge <= gs)
    if empty.size:
        doc = np.searchsorted(np.cumsum(spans.counts), empty, "right")
        script[empty] = char_script[batch.chars(np.minimum(gs[empty], sb.doc_byte_start[doc + 1] - 1)
                                                .clip(0, n_bytes - 1))]
    last_char = batch.chars(np.maximum(ge - 1, gs))  # holding a token's last byte (an empty one's first)
    mixed = (ge > gs) & (runs.take(last_char) != runs.take(first_char))
    scripts = batch.scripts
    tokens = _Placed(gs, ge, script, mixed, lambda units: char_script.take(batch.chars(units)), n_bytes, scripts)

    counts.arrays["tokens"] = tokens.attribute()
    if spans.unk.any():
        counts.arrays["unk_tokens"] = tokens.attribute(spans.unk)
    if spans.byte_fallback.any():
        counts.arrays["byte_fallback_tokens"] = tokens.attribute(spans.byte_fallback)

    # A token's script for its vocabulary type is its middle byte's: the script it counts for, unless it
    # spans a script change.
    token_script = script
    across = np.flatnonzero(mixed)
    if across.size:
        token_script = script.copy()
        token_script[across] = char_script[batch.chars((gs[across] + ge[across] - 1) // 2)]
    for sid in scripts.tolist():
        ids = spans.ids if scripts.size == 1 else spans.ids[token_script == sid]
        if not ids.size:
            continue
        used = counts._used(sid, tok.vocab_size)
        if int(ids.max()) >= used.size:
            used = counts._used(sid, int(ids.max()) + 1)
        used[ids] = True

    # Token boundaries inside documents: the end of every token but the last of its document.
    last = np.cumsum(spans.counts)[spans.counts > 0] - 1
    inner = np.ones(gs.size, dtype=bool)
    inner[last] = False
    pos = ge[inner]
    char = batch.chars(pos)
    pos_script = char_script.take(char, mode="clip")  # a document's end at the batch's: its last character
    counts.arrays["boundaries"] = _per_script(pos_script, scripts)
    char_start = sb.char_to_byte.take(char) == pos
    broken = ~(char_start & batch.cluster_start_char.take(char))
    counts.arrays["broken_boundaries"] = _per_script(pos_script[broken], scripts)
    counts.arrays["split_char_boundaries"] = _per_script(pos_script[~char_start], scripts)

    # Word statistics: tokens overlapping each word [ws, we): those with start < we and end > ws, counted by
    # character (a word starts and ends on characters): a token starts before a word's end when the character
    # of its first byte does; it ends by the word's start when the character of its last byte (none: -1) is
    # before it.
    if batch.word_start.size:
        if empty.size:
            last_char[empty] = np.where(ge[empty] > 0, batch.chars((ge[empty] - 1).clip(0)), -1)
        n_chars = char_script.size
        n_overlap = _below(first_char, batch.word_end, n_chars) - _below(last_char, batch.word_start, n_chars)
        counts.arrays["word_tokens"] = np.bincount(batch.word_script, weights=n_overlap, minlength=N_SCRIPTS)
        counts.arrays["continued_words"] = np.bincount(batch.word_script[n_overlap > 1],
                                                       minlength=N_SCRIPTS).astype(np.float64)
    _count_pretokens(batch, counts, piece_start, piece_end)
    return counts


def _per_script(values: np.ndarray, scripts: np.ndarray) -> np.ndarray:
    """How many of ``values`` are each of ``scripts`` (all the values' scripts, a few), as floats: a comparison
    per script costs less than a bincount of millions of small integers (gpt2's 2.3 M tokens of 1 M Bangla
    characters: 4 ms against 10 ms)."""
    out = np.zeros(N_SCRIPTS)
    for sid in scripts.tolist():
        out[sid] = np.count_nonzero(values == sid)
    return out


def _below(values: np.ndarray, limits: np.ndarray, n: int) -> np.ndarray:
    """For each limit, how many of ``values`` (-1..n) are below it: a running count over the n characters, summed
    in place (2.5 ms against 4.2 with a second array of n counts, 1 M Bangla characters in exact mode;
    benchmarks/results/2026-12-04-fertility-spm/micro.txt)."""
    counts = np.bincount(values + 1, minlength=n + 2)
    np.cumsum(counts, out=counts)
    return counts[limits]


@dataclass
class _Placed:
    """Spans over a batch's units (bytes or characters), ready to be attributed to scripts.

    A span inside one script (nearly all) counts whole, exactly, for the script of one unit (``script``, the
    unit at its start); a span across a script change (``mixed``) is spread evenly over its units. Counting
    gives the same floats as summing a weight of one per span, as this was once written.
    """

    starts: np.ndarray  # global unit offsets
    ends: np.ndarray
    script: np.ndarray
    mixed: np.ndarray  # the span's units are in more than one run of one script (``Batch.char_runs``)
    unit_script: Callable[[np.ndarray], np.ndarray]  # the script of given units
    n_units: int
    scripts: np.ndarray  # the scripts there are (``Batch.scripts``)

    def attribute(self, which: np.ndarray | None = None) -> np.ndarray:
        """Per script, the spans (those where ``which``, else all) spread over their units; an empty span
        counts for the unit at its start."""
        if which is None:
            out = _per_script(self.script, self.scripts) - _per_script(self.script[self.mixed], self.scripts)
        else:
            out = _per_script(self.script[which & ~self.mixed], self.scripts)
        spread = np.flatnonzero(self.mixed if which is None else which & self.mixed)
        if spread.size:  # (a few spans: gathered, not picked twice by a mask over every span)
            out += _spread(self.starts[spread], self.ends[spread], self.unit_script, self.n_units)
        return out


def _spread(starts: np.ndarray, ends: np.ndarray, unit_script: Callable[[np.ndarray], np.ndarray],
            n_units: int) -> np.ndarray:
    """Per script, the sum over units of a density: each span adds 1/length to each of its units.

    The sums are those of the density laid over every unit (a running sum of +w at each start and -w at each
    end), added unit by unit in order; only units where that density is not exactly zero are visited, which
    gives the same floating-point sums, since adding zero changes none, at the cost of the spans' units alone.
    """
    weight = 1.0 / (ends - starts)
    events, where = np.unique(np.concatenate([starts, ends]), return_inverse=True)
    delta = (np.bincount(where[:starts.size], weights=weight, minlength=events.size)
             - np.bincount(where[starts.size:], weights=weight, minlength=events.size))
    level = np.cumsum(delta)  # the density from each event to the next
    seg_start = events.clip(max=n_units)
    seg_end = np.append(events[1:], n_units).clip(max=n_units)
    keep = (level != 0) & (seg_end > seg_start)
    lengths = seg_end[keep] - seg_start[keep]
    units = np.repeat(seg_start[keep] - (np.cumsum(lengths) - lengths), lengths) + np.arange(int(lengths.sum()))
    return np.bincount(unit_script(units), weights=np.repeat(level[keep], lengths), minlength=N_SCRIPTS)


def _count_pretokens(batch: Batch, counts: Counts, cs: np.ndarray, ce: np.ndarray) -> None:
    """The pre-tokenizer's pieces (global character offsets ``cs``, ``ce``) attributed to scripts."""
    sb = batch.scripted
    n_chars = sb.cps.size
    if not cs.size:
        return
    at = np.minimum(cs, n_chars - 1)
    char_script, runs = sb.char_script, batch.char_runs
    mixed = (ce > cs) & (runs.take(np.maximum(ce - 1, cs)) != runs.take(cs))
    pieces = _Placed(cs, ce, char_script.take(at), mixed, char_script.take, n_chars, batch.scripts)
    counts.arrays["pretokens"] = pieces.attribute()
    first = np.zeros(n_chars + 1, dtype=bool)
    first[sb.doc_char_start] = True
    starts = cs[(cs < n_chars) & ~first[cs]]
    cut = starts[is_mark(sb.cps[starts])]
    counts.arrays["mark_splits"] = np.bincount(sb.char_script[cut], minlength=N_SCRIPTS).astype(np.float64)
