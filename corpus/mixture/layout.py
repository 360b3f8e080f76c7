"""Where each kept document goes, a deterministic function of the document table and the seed: the validation
hold-out per language, then, once the mixture is planned, the training selection (each source repeated per its
planned epochs), shuffled together and packed into shards. The table itself (:class:`DocTable`, with the
counters of each source, :class:`SourceIngest`) is what the ingest hands on (:class:`Ingested`)."""

from __future__ import annotations

import zlib
from dataclasses import dataclass, field

import numpy as np

from corpus.config import BuildConfig
from corpus.mixture.plan import Plan, SourceSupply, share_misses
from corpus.shards.format import ShardInfo


@dataclass
class SourceIngest:
    """A source's name, language and counters (documents in, each cleaning step, drops, bad lines, kept)."""

    name: str
    language: str
    counters: dict[str, int] = field(default_factory=dict)


@dataclass
class DocTable:
    """Every kept document, one row each, in canonical order; its tokens are in ``files[file]``."""

    source: np.ndarray  # source index
    file: np.ndarray  # index into ``files``
    uid: np.ndarray  # canonical document id (corpus.read.sources)
    start: np.ndarray  # offset of its first token in its token file
    tokens: np.ndarray  # token count including the BOS
    chars: np.ndarray
    bytes: np.ndarray
    compare: np.ndarray  # (documents, comparison tokenizers) token counts, no BOS
    keys: np.ndarray  # (documents, 16) uint8: exact-dedup keys (corpus.quality.clean.Words.key)
    files: list[str]  # token files, relative to the work folder

    def where(self, mask: np.ndarray) -> DocTable:
        """The rows where ``mask`` is true, in the same order."""
        return DocTable(**{k: v if k == "files" else v[mask] for k, v in vars(self).items()})


@dataclass
class Ingested:
    """What the ingest (``corpus.ingest``) hands on: each source's counters and the kept documents."""

    states: list[SourceIngest]
    table: DocTable


def rng(seed: int, *keys: int) -> np.random.Generator:
    return np.random.default_rng([seed, *keys])


def _lang_key(language: str) -> int:
    return zlib.crc32(language.encode())


def _language_rows(table: DocTable, states: list[SourceIngest], language: str) -> np.ndarray:
    return np.flatnonzero(np.isin(table.source, [i for i, s in enumerate(states) if s.language == language]))


def _val_budget(config: BuildConfig, tokens: int) -> int:
    return min(config.val_tokens, int(config.val_max_share * tokens))


def hold_out_validation(table: DocTable, states: list[SourceIngest], config: BuildConfig) -> dict[str, np.ndarray]:
    """Per language, the documents held out for validation: a seeded random draw of whole documents."""
    val: dict[str, np.ndarray] = {}
    for language in sorted({s.language for s in states}):
        docs = _language_rows(table, states, language)
        budget = _val_budget(config, int(table.tokens[docs].sum()))
        order = docs[rng(config.seed, 1, _lang_key(language)).permutation(len(docs))]
        # Documents in random order, each taken if it still fits: one long document cannot empty the split.
        taken, total = [], 0
        for row, n in zip(order.tolist(), table.tokens[order].tolist(), strict=True):
            if total + n <= budget:
                taken.append(row)
                total += n
            if total >= budget * 0.99:
                break
        val[language] = np.array(taken, dtype=np.int64)
    return val


def train_mask(table: DocTable, val: dict[str, np.ndarray]) -> np.ndarray:
    mask = np.ones(len(table.tokens), dtype=bool)
    for rows in val.values():
        mask[rows] = False
    return mask


def training_supply(table: DocTable, states: list[SourceIngest], val: dict[str, np.ndarray]) -> list[SourceSupply]:
    """What each source offers the plan: its documents and tokens outside the validation hold-out."""
    mask = train_mask(table, val)
    supply = []
    for i, state in enumerate(states):
        docs = (table.source == i) & mask
        supply.append(SourceSupply(state.name, state.language, int(docs.sum()), int(table.tokens[docs].sum())))
    return supply


@dataclass
class ShardJob:
    file: str
    split: str
    language: str | None
    docs: np.ndarray  # rows of the DocTable, in shard order


def select_training(table: DocTable, plan: Plan, train_mask: np.ndarray, seed: int) -> np.ndarray:
    """Rows of the training documents, repeated per the plan's epochs, then shuffled together."""
    picked = []
    for index, source in enumerate(plan.sources):
        docs = np.flatnonzero((table.source == index) & train_mask)
        target, total, epoch = source.target_tokens, 0, 0
        while docs.size and total < target:
            order = docs[rng(seed, 2, index, epoch).permutation(len(docs))]
            cum = total + np.cumsum(table.tokens[order])
            # Take documents while that brings the total nearer the target (overshoot at most half a document).
            take = int(np.searchsorted(cum - table.tokens[order] / 2, target, side="right"))
            picked.append(order[:take])
            total = int(cum[take - 1]) if take else total
            if take < len(order):
                break
            epoch += 1
    rows = np.concatenate(picked) if picked else np.zeros(0, dtype=np.int64)
    return rows[rng(seed, 3).permutation(len(rows))]


def pack(rows: np.ndarray, tokens: np.ndarray, shard_tokens: int) -> list[np.ndarray]:
    """Split ``rows`` (in order) into shards of at most ``shard_tokens`` tokens; documents stay whole."""
    shards, start, size = [], 0, 0
    for i, n in enumerate(tokens[rows]):
        if size and size + n > shard_tokens:
            shards.append(rows[start:i])
            start, size = i, 0
        size += int(n)
    if size:
        shards.append(rows[start:])
    return shards


def _next_index(existing: list[ShardInfo], prefix: str) -> int:
    numbers = [int(s.file[len(prefix):-4]) for s in existing if s.file.startswith(prefix) and s.file[len(prefix):-4].isdigit()]
    return max(numbers, default=-1) + 1


def shard_jobs(train_rows: np.ndarray, val: dict[str, np.ndarray], table: DocTable, shard_tokens: int,
               existing: list[ShardInfo]) -> list[ShardJob]:
    """Name and fill every shard: training shards, then one or more validation shards per language."""
    jobs = []
    first = _next_index(existing, "train_")
    for i, docs in enumerate(pack(train_rows, table.tokens, shard_tokens)):
        jobs.append(ShardJob(f"train_{first + i:06d}.bin", "train", None, docs))
    for language, rows in val.items():
        first = _next_index(existing, f"val_{language}_")
        for i, docs in enumerate(pack(rows, table.tokens, shard_tokens)):
            jobs.append(ShardJob(f"val_{language}_{first + i:06d}.bin", "val", language, docs))
    return jobs


def shortfalls(table: DocTable, states: list[SourceIngest], val: dict[str, np.ndarray], plan: Plan,
               train_rows: np.ndarray, config: BuildConfig) -> list[str]:
    """Where the selection breaks the promise per language, one line each: a language with documents but no
    validation document (each is longer than its hold-out budget), and a language whose share of the selected
    training tokens misses the plan's by more than ``corpus.mixture.plan.SHARE_TOLERANCE``."""
    lines = []
    for language, rows in val.items():
        docs = _language_rows(table, states, language)
        if config.val_tokens and docs.size and not rows.size:
            tokens = int(table.tokens[docs].sum())
            lines.append(f"{language}: no validation documents: none of its {docs.size:,} documents (shortest "
                         f"{int(table.tokens[docs].min()):,} tokens) fits its hold-out of "
                         f"{_val_budget(config, tokens):,} tokens (--val-tokens {config.val_tokens:,}, at most "
                         f"--val-max-share {config.val_max_share:g} of its {tokens:,} tokens)")
    by_source = np.bincount(table.source[train_rows], weights=table.tokens[train_rows], minlength=len(states))
    selected: dict[str, int] = {}
    for state, n in zip(states, by_source.tolist(), strict=True):
        selected[state.language] = selected.get(state.language, 0) + int(n)
    return lines + share_misses(selected, plan.shares)


@dataclass
class Layout:
    """The shards to write: the training rows in shard order (documents repeated as planned) and every shard's job."""

    train_rows: np.ndarray
    jobs: list[ShardJob]


def lay_out(table: DocTable, val: dict[str, np.ndarray], train_rows: np.ndarray, shard_tokens: int,
            existing: list[ShardInfo]) -> Layout:
    """Pack the training rows (:func:`select_training`) and the validation documents into shards numbered
    after ``existing`` ones (an --append)."""
    return Layout(train_rows, shard_jobs(train_rows, val, table, shard_tokens, existing))
