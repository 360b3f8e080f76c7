"""Build token shards. The build is a sequence of stages, each taking the previous one's result and adding to it:

1. check (``corpus.check``): every check that needs no ingest, and what OUT holds -> :class:`~corpus.config.Checked`
2. ingest (``corpus.ingest``, datatrove pipelines): read, canonical form and cleaning, the quality filters, tokenize,
   MinHash; then exact and near dedup -> :class:`~corpus.mixture.layout.Ingested`
3. prepare (``corpus.mixture.prepare``): after --append, less every document the shard set already holds; the
   validation hold-out, the mixture planned in tokens, the training selection, where a language falls short
   (``--strict-mix`` refuses then), and their sizes -> :class:`~corpus.mixture.prepare.Prepared`, what
   ``corpus plan`` shows
4. lay out (``corpus.mixture.layout``): pack into shards -> :class:`~corpus.mixture.layout.Layout`
5. write the shards (``corpus.pack``) -> their :class:`~corpus.shards.format.ShardInfo` records, then verify their
   headers (``corpus.shards.verify``)
6. the set's document keys (``corpus.shards.keys``: what a later --append compares with) and the report
   (``corpus.report``: ``report.json``, ``report.md``, ``shares.png``, from the prepared sizes)
7. manifest (``corpus.shards.format``), last: it marks the build finished; then OUT is published in one rename.

Everything after the ingest is a deterministic function of the kept documents (in canonical order) and the
seed, so the shard layout is recomputed identically on every run, with any executor and number of tasks.
The build works in a staging folder beside OUT (``corpus.engine.staging``): shards are written there atomically
and recorded in ``.pack.json`` as they finish, the manifest last; a rerun of the same command resumes it, and
the result is byte-identical to an uninterrupted build. The finished folder becomes OUT by one rename, so OUT is
either absent (or as it was) or complete.
"""

from __future__ import annotations

import tempfile
from contextlib import ExitStack
from dataclasses import asdict, replace
from pathlib import Path

import numpy as np

from common.outdir import publish_dir
from common.writer import writing
from corpus.check import check_build, check_out, check_plan
from corpus.config import BuildConfig, BuildError, Checked, PlanError
from corpus.engine.executors import ExecutorConfig
from corpus.engine.faults import kill_or_pause_if_asked
from corpus.engine.progress import BuildStatus
from corpus.engine.staging import (
    WORK_STATUS,
    claim_work,
    link_existing,
    remove_stale_temp_files,
    remove_work,
    staged,
    staging_path,
    work_url,
)
from corpus.ingest import ingest
from corpus.mixture.layout import lay_out
from corpus.mixture.prepare import Prepared, prepare
from corpus.pack import PACK_PROGRESS, write_layout
from corpus.report import write_report
from corpus.shards.format import MANIFEST_NAME, Manifest, ShardInfo, dtype_for_vocab
from corpus.shards.keys import load_keys, save_keys
from corpus.shards.verify import check_written
from fertility.text import TextSource, input_paths

__all__ = ["BuildConfig", "BuildError", "build", "plan_only", "staging_path"]


def build(config: BuildConfig, out_dir: str | Path, *, append: bool = False, overwrite: bool = False,
          executor: ExecutorConfig | None = None, work_dir: str | None = None,
          keep_work: bool = False, strict_mix: bool = False) -> tuple[Manifest, Prepared | None]:
    """Build the shard set ``out_dir``; returns its manifest and what was prepared.

    Every check that needs no ingest comes first (stage 1). The work happens in :func:`staging_path` (the
    stages' files in its ``.work``, or in ``work_dir``, any fsspec URL), which a rerun of the same command
    resumes; the finished shard set replaces ``out_dir`` in one rename. A rerun of a finished build returns the
    manifest and ``None`` and does nothing. With ``strict_mix`` a language without validation documents, or
    whose training share misses the plan (``corpus.mixture.plan.SHARE_TOLERANCE``), stops the build before any
    shard is written (:class:`~corpus.config.PlanError`; the ingest is kept for the rerun).
    """
    executor = executor or ExecutorConfig()
    out_dir = Path(out_dir)
    checked = check_build(config, out_dir, executor, work_dir, append=append, overwrite=overwrite)
    with ExitStack() as locks:
        # One build at a time on OUT (its staging folder with it) and on a --work-dir of this machine: a second
        # is refused in one line. Taken by a finished build too, which so finishes what a killed publish left.
        # The check again under the lock: another build may have ended meanwhile.
        locks.enter_context(writing(out_dir, "corpus build", overwrite=overwrite or append))
        if work_dir and "://" not in work_dir:
            locks.enter_context(writing(work_dir, "corpus build", what="--work-dir"))
        checked.existing, checked.done = check_out(out_dir, checked.info, config.arguments(), append=append,
                                                   overwrite=overwrite, inputs=input_paths(checked.sources))
        if checked.done:
            return checked.existing, None
        return _build(config, out_dir, checked, append, executor, work_dir, keep_work, strict_mix)


def _build(config: BuildConfig, out_dir: Path, checked: Checked, append: bool, executor: ExecutorConfig,
           work_dir: str | None, keep_work: bool, strict_mix: bool) -> tuple[Manifest, Prepared | None]:
    existing = checked.existing
    with staged(out_dir, {"arguments": config.arguments(), "append": append}) as stage:
        if existing is not None:
            link_existing(out_dir, stage)
        work, owner = work_url(stage, work_dir), claim_work(work_dir, executor.ingest_tasks)
        if (stage / MANIFEST_NAME).exists():  # finished, then stopped before it was published
            manifest, prepared = Manifest.load(stage), None
        else:
            # The documents of the set an --append adds to, from OUT itself: the staging folder's copy of the
            # keys is replaced by the new set's before the manifest is written, so a rerun after a kill would
            # read those. Only when there is work to do: a finished stage is only published.
            held = load_keys(out_dir, existing, checked.tokenizer) if existing else np.zeros((0, 16), np.uint8)
            manifest, prepared = _stages(stage, config, checked, held, executor, work, strict_mix)
        (stage / PACK_PROGRESS).unlink(missing_ok=True)
        if not keep_work:
            remove_work(stage, owner)
        publish_dir(stage, out_dir, command="corpus build")
    return manifest, prepared


def _stages(stage: Path, config: BuildConfig, checked: Checked, held: np.ndarray, executor: ExecutorConfig,
            work: str, strict_mix: bool) -> tuple[Manifest, Prepared]:
    """Stages 2 to 7 in the staging folder, each taking the previous one's result; ``held`` are the keys of the
    documents the shard set an --append adds to already holds."""
    existing = checked.existing
    if executor.status_file is None and "://" not in work:
        executor = replace(executor, status_file=str(Path(work) / WORK_STATUS))
    remove_stale_temp_files(stage)
    status = BuildStatus()
    ingested = ingest(checked.sources, config.ingest, work, checked.tokenizer.fingerprint, executor, status)
    prepared = prepare(config, checked, ingested, held)
    check_strict(prepared, strict_mix)
    layout = lay_out(prepared.table, prepared.val, prepared.train_rows, config.shard_tokens,
                     existing.shards if existing else [])
    dtype = dtype_for_vocab(checked.info.vocab_size)
    new_shards = write_layout(layout, prepared, stage, work, dtype, executor, status)
    check_written(stage, new_shards, dtype)
    manifest = _manifest(config, prepared, dtype, new_shards, existing)
    written = np.unique(np.concatenate([layout.train_rows, *prepared.val.values()]))
    save_keys(stage, np.concatenate([held, prepared.table.keys[written]]))
    # The report first, the manifest last: manifest.json is what marks the build finished (a rerun then only
    # publishes it), so everything it promises, the report and shares.png included, must already be on disk.
    write_report(stage, prepared, new_shards, len(manifest.shards))
    manifest.save(stage)
    kill_or_pause_if_asked("manifest", 0)
    return manifest, prepared


def check_strict(prepared: Prepared, strict_mix: bool) -> None:
    """Under ``--strict-mix``, refuse a selection that breaks the promise per language (one line)."""
    if strict_mix and prepared.shortfalls:
        raise PlanError("--strict-mix: " + "; ".join(prepared.shortfalls))


def _manifest(config: BuildConfig, prepared: Prepared, dtype: str, new_shards: list[ShardInfo],
              existing: Manifest | None) -> Manifest:
    """The shard set's record: an --append's earlier shards, sources, plan and arguments come first."""
    sources = [_source_record(src, state)
               for src, state in zip(prepared.checked.sources, prepared.states, strict=True)]
    return Manifest(
        tokenizer=prepared.checked.info, dtype=dtype, shards=(existing.shards if existing else []) + new_shards,
        seed=config.seed, sources=(existing.sources if existing else []) + sources,
        filters={"clean": dict(config.ingest.clean), "dedup": asdict(config.ingest.dedup),
                 "bad_utf8": config.ingest.bad_utf8, "min_language_score": config.ingest.min_language_score},
        plan=prepared.plan.to_dict() | ({"previous": existing.plan} if existing else {}),
        arguments=config.arguments() | ({"previous": existing.arguments} if existing else {}),
    )


def _source_record(source: TextSource, state) -> dict:
    return {"name": state.name, "language": state.language, "spec": source.spec, "field": source.field,
            "config": source.config, "split": source.split, "counters": dict(sorted(state.counters.items()))}


def plan_only(config: BuildConfig, out_dir: str | Path | None, *, executor: ExecutorConfig | None = None,
              work_dir: str | None = None, strict_mix: bool = False) -> Prepared:
    """Stages 1 to 3 without writing shards. With ``out_dir`` the ingest is kept in its staging folder
    (:func:`staging_path`), which a later build into ``out_dir`` resumes; with ``work_dir`` it is kept there.
    ``strict_mix`` refuses the plan as :func:`build` would."""
    executor = executor or ExecutorConfig()
    checked = check_plan(config, out_dir, executor, work_dir)
    claim_work(work_dir, executor.ingest_tasks)  # so that a later build can prove the kept ingest is ours
    if out_dir is not None:
        with staged(Path(out_dir), None) as stage:
            prepared = _prepare(config, checked, executor, work_url(stage, work_dir))
    elif work_dir is not None:
        prepared = _prepare(config, checked, executor, str(work_dir).rstrip("/"))
    else:
        with tempfile.TemporaryDirectory(prefix="corpus-plan-") as tmp:
            prepared = _prepare(config, checked, executor, tmp)
    check_strict(prepared, strict_mix)
    return prepared


def _prepare(config: BuildConfig, checked: Checked, executor: ExecutorConfig, work: str) -> Prepared:
    """Stages 2 and 3 in ``work``."""
    return prepare(config, checked, ingest(checked.sources, config.ingest, work, checked.tokenizer.fingerprint,
                                           executor))
