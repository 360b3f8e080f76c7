"""Stage 3 of a build, what ``corpus plan`` shows and ``corpus build`` lays out: from the ingest's kept documents
(after --append, less those the shard set holds), hold out validation documents, plan the training mixture in
tokens, select the training documents, say where a language's validation set or share falls short, and measure
it all once. The result depends on the documents and the seed only (never on the executor or the number of
tasks): the document table is in canonical document order.
"""

from __future__ import annotations

from dataclasses import dataclass

import numpy as np

from corpus.config import BuildConfig, Checked
from corpus.mixture.layout import (
    DocTable,
    Ingested,
    SourceIngest,
    hold_out_validation,
    select_training,
    shortfalls,
    train_mask,
    training_supply,
)
from corpus.mixture.measure import Sizes, measure
from corpus.mixture.plan import Plan, plan_mixture
from corpus.shards.keys import known

DROP_COUNTER = "drop_in_existing_set"


@dataclass
class Prepared:
    """Stage 1's :class:`~corpus.config.Checked`, and what this stage adds: the sources' counters, the kept
    documents, the hold-out, the plan, the training selection and their sizes. ``shortfalls`` (also among the
    plan's warnings) are what ``--strict-mix`` refuses."""

    checked: Checked
    states: list[SourceIngest]
    table: DocTable
    val: dict[str, np.ndarray]
    plan: Plan
    train_rows: np.ndarray  # corpus.mixture.layout.select_training
    shortfalls: list[str]
    sizes: Sizes


def drop_known(table: DocTable, states: list[SourceIngest], held: np.ndarray) -> DocTable:
    """``table`` without the documents whose key is in ``held`` (those of the shard set an --append adds to),
    counted per source as ``drop_in_existing_set`` (and taken off ``documents_kept``)."""
    if not len(held):
        return table
    seen = known(table.keys, held)
    for i, state in enumerate(states):
        n = int((seen & (table.source == i)).sum())
        if n:
            state.counters[DROP_COUNTER] = n
            state.counters["documents_kept"] -= n
    return table.where(~seen)


def prepare(config: BuildConfig, checked: Checked, ingested: Ingested, held: np.ndarray | None = None) -> Prepared:
    """Drop the documents whose exact-dedup key is in ``held``, hold out validation documents, plan the
    training mixture, select it and measure it."""
    states = ingested.states
    table = ingested.table if held is None else drop_known(ingested.table, states, held)
    val = hold_out_validation(table, states, config)
    plan = plan_mixture(training_supply(table, states, val), config.tokens, mix=config.mix,
                        temperature=config.temperature, max_epochs=config.max_epochs)
    train_rows = select_training(table, plan, train_mask(table, val), config.seed)
    short = shortfalls(table, states, val, plan, train_rows, config)
    plan.warnings.extend(short)
    sizes = measure(table, states, checked.compare_names, val, train_rows)
    return Prepared(checked, states, table, val, plan, train_rows, short, sizes)
