"""Preparation: run the ingest, lay its kept documents out in one table, hold out validation, plan the mixture.

This is what ``corpus plan`` shows and what ``corpus build`` packs. It depends on the documents and the seed
only (never on the executor or the number of tasks): the table is in canonical document order.
"""

from __future__ import annotations

import zlib
from dataclasses import dataclass, field

import numpy as np

from common.errors import InputError
from corpus.executors import ExecutorConfig, check_executor, executor_session, quiet_logger
from corpus.ingest import IngestConfig, SourceIngest, ingest
from corpus.measure import format_table, group_totals
from corpus.plan import Plan, SourceSupply, check_budget, check_languages, plan_mixture
from corpus.progress import BuildStatus
from corpus.shards import TokenizerInfo
from corpus.sources import check_sources, parse_source
from fertility.text import TextSource
from fertility.tokenizers import Tokenizer, load_tokenizer
from fertility.totals import Totals


class BuildError(InputError):
    """A build that cannot go ahead; the message says why and what to do."""


@dataclass
class BuildConfig:
    """The arguments that decide the shards' content (recorded in the manifest as ``arguments``)."""

    sources: list[str]  # "LANG=SPEC", as corpus.sources.parse_source reads them
    tokens: int
    mix: dict[str, float] | None = None
    temperature: float | None = None
    max_epochs: float = 4.0
    seed: int = 0
    val_tokens: int = 100_000  # per language, taken out before the mixture is planned
    val_max_share: float = 0.1  # never hold out more than this share of a language's tokens
    shard_tokens: int = 100_000_000
    ingest: IngestConfig = field(default_factory=lambda: IngestConfig(tokenizer="gpt2"))


@dataclass
class DocTable:
    """Every kept document, one row each, in canonical order."""

    source: np.ndarray  # source index
    file: np.ndarray  # index into ``files``
    uid: np.ndarray  # canonical document id (corpus.sources)
    start: np.ndarray  # offset of its first token in its token file
    tokens: np.ndarray  # token count including the BOS
    chars: np.ndarray
    bytes: np.ndarray
    compare: np.ndarray  # (documents, comparison tokenizers) token counts, no BOS
    files: list[str]  # token files, relative to the work folder


@dataclass
class Prepared:
    """What ``corpus plan`` shows and ``corpus build`` writes: the ingest, the hold-out and the plan."""

    sources: list[TextSource]
    states: list[SourceIngest]
    table: DocTable
    val: dict[str, np.ndarray]
    plan: Plan
    tokenizer: TokenizerInfo
    tokenizer_name: str
    compare_names: list[str]


@dataclass
class Checked:
    """What :func:`check_inputs` found, so that the work does not load or parse it again."""

    sources: list[TextSource]
    tokenizer: Tokenizer
    info: TokenizerInfo


def check_inputs(config: BuildConfig, executor: ExecutorConfig | None = None) -> Checked:
    """Every check that needs no ingest, before any work: the sources parse (labels included) and can be read,
    the mixture names exactly their languages, the plan's numbers are sane, every tokenizer loads and the
    build's has a BOS, and the executor can be used."""
    sources = parse_sources(config.sources)
    check_budget(config.tokens, mix=config.mix, temperature=config.temperature, max_epochs=config.max_epochs)
    if config.mix is not None:
        check_languages(config.mix, {s.lang for s in sources})
    tok = load_tokenizer(config.ingest.tokenizer, config.ingest.tokenizer_dir)
    info = tokenizer_info(tok, config.ingest.tokenizer)
    for spec in config.ingest.compare_tokenizers:  # loaded again by every ingest task; fail here, not there
        load_tokenizer(spec, config.ingest.tokenizer_dir)
    check_sources(sources, config.ingest.min_language_score)
    if executor is not None:
        check_executor(executor)
    return Checked(sources, tok, info)


def parse_sources(args: list[str]) -> list[TextSource]:
    """``["bn=PATH", ...]`` -> sources, in order; at least one."""
    if not args:
        raise BuildError("give at least one --source LANG=SPEC")
    return [parse_source(a) for a in args]


def tokenizer_info(tok: Tokenizer, spec: str) -> TokenizerInfo:
    """The manifest's tokenizer record; ``spec`` becomes the absolute path of the file that was loaded."""
    from pathlib import Path

    if tok.bos_id is None:
        raise BuildError(f"tokenizer {spec!r} has no BOS (or end-of-text) token; every document in a shard "
                         f"must start with one. Train or choose a tokenizer that defines it")
    path = Path(tok.path).resolve()
    return TokenizerInfo(spec=str(path) if path.exists() else spec, sha256=tok.fingerprint,
                         vocab_size=tok.vocab_size, bos_id=tok.bos_id, eos_id=tok.eos_id)


def rng(seed: int, *keys: int) -> np.random.Generator:
    return np.random.default_rng([seed, *keys])


def _lang_key(language: str) -> int:
    return zlib.crc32(language.encode())


def hold_out_validation(table: DocTable, states: list[SourceIngest], config: BuildConfig) -> dict[str, np.ndarray]:
    """Per language, the documents held out for validation: a seeded random draw of whole documents."""
    val: dict[str, np.ndarray] = {}
    for language in sorted({s.language for s in states}):
        sources = [i for i, s in enumerate(states) if s.language == language]
        docs = np.flatnonzero(np.isin(table.source, sources))
        budget = min(config.val_tokens, int(config.val_max_share * table.tokens[docs].sum()))
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


def prepare(config: BuildConfig, work_url: str, executor: ExecutorConfig, status: BuildStatus | None = None,
            checked: Checked | None = None) -> Prepared:
    """Ingest the sources (resuming), hold out validation documents and plan the training mixture.
    ``checked`` is :func:`check_inputs`'s result where the caller already has it."""
    checked = checked or check_inputs(config, executor)
    sources, tok, info = checked.sources, checked.tokenizer, checked.info
    quiet_logger()
    with executor_session(executor):
        got = ingest(sources, config.ingest, work_url, tok.fingerprint, executor, status)
    table = DocTable(source=got.source, file=got.file, uid=got.uid, start=got.start, tokens=got.tokens + 1,
                     chars=got.chars, bytes=got.bytes, compare=got.compare, files=got.token_files)
    val = hold_out_validation(table, got.states, config)
    mask = train_mask(table, val)
    supply = []
    for i, state in enumerate(got.states):
        docs = (table.source == i) & mask
        supply.append(SourceSupply(state.name, state.language, int(docs.sum()), int(table.tokens[docs].sum())))
    plan = plan_mixture(supply, config.tokens, mix=config.mix, temperature=config.temperature,
                        max_epochs=config.max_epochs)
    return Prepared(sources, got.states, table, val, plan, info, tok.name, list(config.ingest.compare_tokenizers))


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
