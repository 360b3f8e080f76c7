"""Stages 2 to 4 of a build, what ``corpus plan`` shows and ``corpus build`` packs: ingest the sources (read,
clean, filter, tokenize, deduplicate: ``corpus.ingest``), hold out validation documents (``corpus.layout``), plan
the training mixture in tokens (``corpus.plan``). The result depends on the documents and the seed only (never
on the executor or the number of tasks): the document table is in canonical document order.
"""

from __future__ import annotations

from dataclasses import dataclass

import numpy as np

from corpus.check import Checked, check_inputs
from corpus.config import BuildConfig
from corpus.executors import ExecutorConfig, executor_session, quiet_logger
from corpus.ingest import DocTable, SourceIngest, ingest
from corpus.layout import hold_out_validation, training_supply
from corpus.plan import Plan, plan_mixture
from corpus.progress import BuildStatus
from corpus.shards import TokenizerInfo
from fertility.text import TextSource


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


def prepare(config: BuildConfig, work_url: str, executor: ExecutorConfig, status: BuildStatus | None = None,
            checked: Checked | None = None) -> Prepared:
    """Ingest the sources (resuming), hold out validation documents and plan the training mixture.
    ``checked`` is :func:`corpus.check.check_inputs`'s result where the caller already has it."""
    checked = checked or check_inputs(config, executor)
    quiet_logger()
    with executor_session(executor):
        got = ingest(checked.sources, config.ingest, work_url, checked.tokenizer.fingerprint, executor, status)
    table = DocTable.of(got)
    val = hold_out_validation(table, got.states, config)
    plan = plan_mixture(training_supply(table, got.states, val), config.tokens, mix=config.mix,
                        temperature=config.temperature, max_epochs=config.max_epochs)
    return Prepared(checked.sources, got.states, table, val, plan, checked.info, checked.tokenizer.name,
                    list(config.ingest.compare_tokenizers))
