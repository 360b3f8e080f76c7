"""Detail on a sample, totals on everything: how a report keeps pace with the tokenizer's own encoder.

Every document is encoded (token ids only, the encoder's own batched call), so each language's documents,
characters, bytes and tokens, hence its chars/token and bytes/token, are exact. The per-character detail
(scripts, grapheme clusters, words, token spans, pre-tokenizer pieces) costs several times the encoding, so
with ``detail_every=k`` it is computed on one block in ``k``: the text is cut into blocks of consecutive
whole documents of at least ``BLOCK_CHARS`` characters, and blocks 0, k, 2k, ... of each language are analysed
in detail (a systematic sample, the same on every run). ``detail_every=1`` analyses everything (exact).

From a sample, each count is scaled to the language's exact totals (token-like counts by tokens, bytes by
bytes, the rest by characters), so the per-script counts add up to the exact totals and every rate is a
ratio estimate. Each estimated rate carries the half-width of an approximate 95% interval from the spread
over the sampled blocks (the ratio estimator's linearised variance with the finite-population correction).
"""

from __future__ import annotations

from dataclasses import dataclass, field

import numpy as np

from fertility.scoring.metrics import COUNT_FIELDS, Counts, Metrics
from fertility.totals import Totals

BLOCK_CHARS = 8192
# rate -> (numerator count, denominator count), as Metrics defines them.
RATE_PAIRS = {
    "chars_per_token": ("chars", "tokens"),
    "graphemes_per_token": ("graphemes", "tokens"),
    "bytes_per_token": ("bytes", "tokens"),
    "tokens_per_word": ("word_tokens", "words"),
    "continued_word_rate": ("continued_words", "words"),
    "broken_grapheme_rate": ("broken_boundaries", "boundaries"),
    "unk_rate": ("unk_tokens", "tokens"),
    "byte_fallback_rate": ("byte_fallback_tokens", "tokens"),
    "pretoken_ceiling": ("chars", "pretokens"),
}
_TOKEN_LIKE = ("tokens", "unk_tokens", "byte_fallback_tokens")
_FIELDS = sorted({f for pair in RATE_PAIRS.values() for f in pair})


@dataclass
class BlockStats:
    """Sums over sampled blocks of each count and of the products a ratio's variance needs, and how many blocks
    hold each count (a script in one block has no spread to estimate: its interval is None, not 0).

    Arrays have one entry per script plus a last one for the whole language. A block's counts may come in
    several parts (a block that straddles two batches of documents): parts with the same block number are added
    up before the block enters the sums, so that it counts once.
    """

    blocks: int = 0
    sums: dict[str, np.ndarray] = field(default_factory=dict)
    products: dict[tuple[str, str], np.ndarray] = field(default_factory=dict)
    holding: dict[str, np.ndarray] = field(default_factory=dict)
    _open: tuple[int, dict[str, np.ndarray]] | None = None

    def add_block(self, counts: Counts, block: int | None = None) -> None:
        """Add the counts of sampled block number ``block`` (or of a part of it; None: a block of its own)."""
        values = {}
        for name in _FIELDS:
            arr = counts.arrays[name]
            values[name] = np.append(arr, arr.sum())
        values["tokens"][-1] = counts.token_total
        if block is not None and self._open is not None and self._open[0] == block:
            for name, v in values.items():
                self._open[1][name] = self._open[1][name] + v
            return
        self._close()
        self._open = (block, values) if block is not None else None
        if block is None:
            self._enter(values)

    def _close(self) -> None:
        if self._open is not None:
            self._enter(self._open[1])
            self._open = None

    def _enter(self, values: dict[str, np.ndarray]) -> None:
        for name, v in values.items():
            self.sums[name] = self.sums.get(name, 0) + v
            self.holding[name] = self.holding.get(name, 0) + (v > 0)
        for a, b in {(a, b) for pair in RATE_PAIRS.values() for a in pair for b in pair}:
            self.products[(a, b)] = self.products.get((a, b), 0) + values[a] * values[b]
        self.blocks += 1

    def merge(self, other: BlockStats) -> None:
        self._close()
        other._close()
        for name, v in other.sums.items():
            self.sums[name] = self.sums.get(name, 0) + v
        for name, v in other.holding.items():
            self.holding[name] = self.holding.get(name, 0) + v
        for key, v in other.products.items():
            self.products[key] = self.products.get(key, 0) + v
        self.blocks += other.blocks

    def half_width(self, rate: str, index: int, sampled_share: float) -> float | None:
        """Half-width of the approximate 95% interval of ``rate`` (script ``index``, or -1 for the language);
        None when fewer than two sampled blocks hold its denominator (one block alone gives a spread of 0)."""
        self._close()
        a, b = RATE_PAIRS[rate]
        n = self.blocks
        sa, sb = float(self.sums[a][index]), float(self.sums[b][index])
        if int(self.holding[b][index]) < 2 or sb <= 0:
            return None
        r = sa / sb
        # sum over blocks of (a_i - r b_i)^2, expanded into the kept sums of products; blocks without the script
        # add 0 to it and count in n, as the ratio estimator over all sampled blocks has it
        ss = (float(self.products[(a, a)][index]) - 2 * r * float(self.products[(a, b)][index])
              + r * r * float(self.products[(b, b)][index]))
        var = max(ss, 0.0) / (n - 1) / n / (sb / n) ** 2 * max(0.0, 1.0 - sampled_share)
        return 1.96 * var ** 0.5


def scaled(detail: Metrics, totals: Totals, sample: Metrics) -> Metrics:
    """``detail`` (a script's or the language's counts on the sample) scaled to the language's exact totals;
    ``sample`` is the language's whole sample (the scale's denominators)."""
    factor = {name: _factor(totals.chars, sample.chars) for name in COUNT_FIELDS}
    for name in _TOKEN_LIKE:
        factor[name] = _factor(totals.tokens, sample.tokens)
    factor["bytes"] = _factor(totals.bytes, sample.bytes)
    m = Metrics(documents=totals.documents, vocab_types_used=detail.vocab_types_used)
    for name in COUNT_FIELDS:
        value = getattr(detail, name) * factor[name]
        setattr(m, name, value if isinstance(getattr(m, name), float) else int(round(value)))
    return m


def _factor(total: float, sample: float) -> float:
    return total / sample if sample else 0.0


def intervals(stats: BlockStats, index: int, sampled_share: float, exact: tuple[str, ...] = ()) -> dict:
    """``{rate: half-width or None}`` for every estimated rate of one script (or the language: index -1)."""
    return {rate: _round(stats.half_width(rate, index, sampled_share)) for rate in RATE_PAIRS if rate not in exact}


def _round(x: float | None) -> float | None:
    return None if x is None else round(x, 6)
