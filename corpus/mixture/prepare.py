"""Stages 2 to 4 of a build, what ``corpus plan`` shows and ``corpus build`` packs: ingest the sources (read,
clean, filter, tokenize, deduplicate: ``corpus.ingest``; after --append, without the documents the shard set
holds: ``corpus.shards.keys``), hold out validation documents (``corpus.mixture.layout``), plan the training mixture in tokens
(``corpus.mixture.plan``) and select the training documents, saying where a language's validation set or share falls
short. The result depends on the documents and the seed only (never on the executor or the number of tasks):
the document table is in canonical document order.
"""

from __future__ import annotations

from dataclasses import dataclass

import numpy as np

from corpus.check import Checked, check_inputs
from corpus.config import BuildConfig
from corpus.engine.executors import ExecutorConfig, executor_session, quiet_logger
from corpus.engine.progress import BuildStatus
from corpus.ingest import DocTable, SourceIngest, ingest
from corpus.mixture.layout import (
    hold_out_validation,
    select_training,
    shortfalls,
    train_mask,
    training_supply,
)
from corpus.mixture.plan import Plan, plan_mixture
from corpus.shards.format import TokenizerInfo
from corpus.shards.keys import drop_known
from fertility.text import TextSource


@dataclass
class Prepared:
    """What ``corpus plan`` shows and ``corpus build`` writes: the ingest, the hold-out, the plan and the
    training selection; ``shortfalls`` (also among the plan's warnings) are what ``--strict-mix`` refuses."""

    sources: list[TextSource]
    states: list[SourceIngest]
    table: DocTable
    val: dict[str, np.ndarray]
    plan: Plan
    train_rows: np.ndarray  # corpus.mixture.layout.select_training
    shortfalls: list[str]
    tokenizer: TokenizerInfo
    tokenizer_name: str
    compare_names: list[str]


def prepare(config: BuildConfig, work_url: str, executor: ExecutorConfig, status: BuildStatus | None = None,
            checked: Checked | None = None, known: np.ndarray | None = None) -> Prepared:
    """Ingest the sources (resuming), drop the documents whose exact-dedup key is in ``known`` (those of the
    shard set an --append adds to), hold out validation documents, plan the training mixture and select it.
    ``checked`` is :func:`corpus.check.check_inputs`'s result where the caller already has it."""
    checked = checked or check_inputs(config, executor)
    quiet_logger()
    with executor_session(executor):
        got = ingest(checked.sources, config.ingest, work_url, checked.tokenizer.fingerprint, executor, status)
    table = DocTable.of(got)
    if known is not None:
        table = drop_known(table, got.states, known)
    val = hold_out_validation(table, got.states, config)
    plan = plan_mixture(training_supply(table, got.states, val), config.tokens, mix=config.mix,
                        temperature=config.temperature, max_epochs=config.max_epochs)
    train_rows = select_training(table, plan, train_mask(table, val), config.seed)
    short = shortfalls(table, got.states, val, plan, train_rows, config)
    plan.warnings.extend(short)
    return Prepared(checked.sources, got.states, table, val, plan, train_rows, short, checked.info,
                    checked.tokenizer.name, list(config.ingest.compare_tokenizers))
