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

from collections.abc import Sequence
from dataclasses import dataclass, field

import numpy as np

from fertility.scripts import SCRIPT_NAMES, ScriptedBatch, is_mark, is_space, scripted_batch
from fertility.tokenizers import Tokenizer, worker_pool

N_SCRIPTS = len(SCRIPT_NAMES)
THREAD_MIN_BYTES = 64 * 1024
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
    """A batch of documents laid out independently of any tokenizer."""

    texts: list[str]
    scripted: ScriptedBatch
    byte_script: np.ndarray  # script of every UTF-8 byte
    byte_runs: np.ndarray  # per byte position (0..n_bytes): how many script changes precede it
    char_runs: np.ndarray  # the same over characters
    cluster_start_byte: np.ndarray  # bool over byte positions 0..n_bytes: a cluster (or document) starts here
    char_start_byte: np.ndarray  # bool over byte positions 0..n_bytes: a character starts here
    word_start: np.ndarray  # global byte offsets of words
    word_end: np.ndarray
    word_script: np.ndarray
    static: dict[str, np.ndarray]  # tokenizer-independent per-script counts: chars, graphemes, bytes, words


def prepare_batch(texts: Sequence[str]) -> Batch:
    """Scripts, clusters, characters and words of a batch, as arrays (see the module docstring)."""
    texts = list(texts)
    sb = scripted_batch(texts)
    n_bytes = int(sb.char_to_byte[-1])
    byte_script = np.repeat(sb.char_script, sb.char_bytes)
    cluster_start_byte = np.zeros(n_bytes + 1, dtype=bool)
    cluster_start_byte[sb.char_to_byte[sb.cluster_start]] = True
    cluster_start_byte[sb.doc_byte_start] = True
    char_start_byte = np.zeros(n_bytes + 1, dtype=bool)
    char_start_byte[sb.char_to_byte] = True

    space = is_space(sb.cps)
    n = sb.cps.size
    doc_first = np.zeros(n + 1, dtype=bool)
    doc_first[sb.doc_char_start] = True
    prev_space = np.concatenate([[True], space[:-1]]) | doc_first[:n]
    next_space = np.concatenate([space[1:], [True]]) | doc_first[1:]
    starts = np.flatnonzero(~space & prev_space)
    ends = np.flatnonzero(~space & next_space) + 1
    static = {
        "chars": np.bincount(sb.char_script, minlength=N_SCRIPTS).astype(np.float64),
        "graphemes": np.bincount(sb.cluster_script, minlength=N_SCRIPTS).astype(np.float64),
        "bytes": np.bincount(byte_script, minlength=N_SCRIPTS).astype(np.float64),
        "words": np.bincount(sb.char_script[starts], minlength=N_SCRIPTS).astype(np.float64),
    }
    return Batch(texts, sb, byte_script, _runs(byte_script), _runs(sb.char_script), cluster_start_byte,
                 char_start_byte, sb.char_to_byte[starts], sb.char_to_byte[ends], sb.char_script[starts], static)


def _runs(script: np.ndarray) -> np.ndarray:
    """For each position 0..n, the number of script changes before it: equal values = one script between."""
    runs = np.zeros(script.size + 1, dtype=np.int64)
    if script.size:
        np.cumsum(script[1:] != script[:-1], out=runs[1:script.size])
        runs[script.size] = runs[script.size - 1]
    return runs


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
    # The pre-tokenizer's pieces are found on another thread while this one encodes (both release the GIL);
    # a small batch (a sampled block) is not worth waking a thread for.
    if n_bytes >= THREAD_MIN_BYTES:
        pieces = worker_pool().submit(tok.pretokenize_batch, batch.texts).result
    else:
        found = tok.pretokenize_batch(batch.texts)
        pieces = lambda: found  # noqa: E731 (the same call shape as the future's result)
    spans = tok.encode_spans(batch.texts)
    counts.token_total = int(spans.counts.sum())
    if counts.token_total == 0 or n_bytes == 0:
        pieces()
        return counts
    doc = np.repeat(np.arange(len(batch.texts)), spans.counts)
    gs = sb.doc_byte_start[doc] + spans.starts
    ge = sb.doc_byte_start[doc] + spans.ends
    at = np.minimum(gs, sb.doc_byte_start[doc + 1] - 1).clip(0, n_bytes - 1)

    def attribute(weights: np.ndarray) -> np.ndarray:
        return _attribute(gs, ge, at, weights, batch.byte_script, batch.byte_runs)

    counts.arrays["tokens"] = attribute(np.ones(gs.size))
    if spans.unk.any():
        counts.arrays["unk_tokens"] = attribute(spans.unk.astype(np.float64))
    if spans.byte_fallback.any():
        counts.arrays["byte_fallback_tokens"] = attribute(spans.byte_fallback.astype(np.float64))

    middle = np.where(ge > gs, (gs + ge - 1) // 2, at).clip(0, n_bytes - 1)
    token_script = batch.byte_script[middle]
    for sid in np.unique(token_script).tolist():
        used = counts._used(sid, tok.vocab_size)
        ids = spans.ids[token_script == sid]
        if ids.size and int(ids.max()) >= used.size:
            used = counts._used(sid, int(ids.max()) + 1)
        used[ids] = True

    # Token boundaries inside documents: the end of every token but the last of its document.
    last = np.cumsum(spans.counts)[spans.counts > 0] - 1
    inner = np.ones(gs.size, dtype=bool)
    inner[last] = False
    pos = ge[inner]
    pos_script = batch.byte_script[pos.clip(0, n_bytes - 1)]
    counts.arrays["boundaries"] = np.bincount(pos_script, minlength=N_SCRIPTS).astype(np.float64)
    broken = ~batch.cluster_start_byte[pos]
    counts.arrays["broken_boundaries"] = np.bincount(pos_script[broken], minlength=N_SCRIPTS).astype(np.float64)
    split = ~batch.char_start_byte[pos]
    counts.arrays["split_char_boundaries"] = np.bincount(pos_script[split], minlength=N_SCRIPTS).astype(np.float64)

    # Word statistics: tokens overlapping each word [ws, we): those with start < we and end > ws.
    if batch.word_start.size:
        n_overlap = np.searchsorted(_sorted(gs), batch.word_end, "left") - np.searchsorted(
            _sorted(ge), batch.word_start, "right")
        counts.arrays["word_tokens"] = np.bincount(batch.word_script, weights=n_overlap, minlength=N_SCRIPTS)
        counts.arrays["continued_words"] = np.bincount(batch.word_script[n_overlap > 1],
                                                       minlength=N_SCRIPTS).astype(np.float64)
    _count_pretokens(batch, counts, *pieces())
    return counts


def _sorted(a: np.ndarray) -> np.ndarray:
    """``a`` sorted; spans that tile their texts (byte-level BPE) already are, and checking is cheaper."""
    return a if a.size < 2 or bool((a[1:] >= a[:-1]).all()) else np.sort(a)


def _attribute(gs, ge, at, weights, unit_script, runs) -> np.ndarray:
    """Spread each span's weight evenly over its units; an empty span gives its weight to the unit at ``at``.

    Spans inside one script (nearly all) are counted whole, exactly; only spans across a script change are
    spread, through a density over the units.
    """
    n_units = unit_script.size
    mixed = (ge > gs) & (runs[np.maximum(ge - 1, gs)] != runs[gs])
    out = np.bincount(unit_script[at[~mixed]], weights=weights[~mixed], minlength=N_SCRIPTS).astype(np.float64)
    if mixed.any():
        w = weights[mixed] / (ge[mixed] - gs[mixed])
        density = np.cumsum(np.bincount(gs[mixed], weights=w, minlength=n_units + 1)
                            - np.bincount(ge[mixed], weights=w, minlength=n_units + 1))[:n_units]
        out += np.bincount(unit_script, weights=density, minlength=N_SCRIPTS)
    return out


def _count_pretokens(batch: Batch, counts: Counts, starts: np.ndarray, ends: np.ndarray, per_doc: np.ndarray) -> None:
    sb = batch.scripted
    n_chars = sb.cps.size
    if not per_doc.sum():
        return
    offset = np.repeat(sb.doc_char_start[:-1], per_doc)
    cs, ce = starts + offset, ends + offset
    at = np.minimum(cs, n_chars - 1)
    counts.arrays["pretokens"] = _attribute(cs, ce, at, np.ones(cs.size), sb.char_script, batch.char_runs)
    first = np.zeros(n_chars + 1, dtype=bool)
    first[sb.doc_char_start] = True
    starts = cs[(cs < n_chars) & ~first[cs]]
    cut = starts[is_mark(sb.cps[starts])]
    counts.arrays["mark_splits"] = np.bincount(sb.char_script[cut], minlength=N_SCRIPTS).astype(np.float64)
