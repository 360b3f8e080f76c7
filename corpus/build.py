"""Build token shards. The build is a sequence of stages, each taking the previous one's result:

1. check (``corpus.check``): every check that needs no ingest, and what OUT holds -> :class:`~corpus.check.Checked`
2. ingest (``corpus.ingest``, datatrove pipelines): read, canonical form and cleaning, the quality filters
   (``corpus.quality.filters``), tokenize, MinHash; then exact and near dedup -> :class:`~corpus.ingest.DocTable`
   (after --append, less every document the shard set already holds: ``corpus.shards.keys``)
3. validation hold-out per language (``corpus.mixture.layout``) -> rows per language
4. plan the training mixture in tokens (``corpus.mixture.plan``) -> :class:`~corpus.mixture.plan.Plan`, select and shuffle
   the training documents, and say where a language's validation set or share falls short (``--strict-mix``
   refuses then)
   (2-4 are :func:`corpus.mixture.prepare.prepare` -> :class:`~corpus.mixture.prepare.Prepared`, what ``corpus plan`` shows)
5. pack into shards (``corpus.mixture.layout``) -> :class:`~corpus.mixture.layout.Layout`
6. write the shards (``corpus.pack``) -> their :class:`~corpus.shards.format.ShardInfo` records
7. verify what was written (``corpus.shards.verify``)
8. the set's document keys (``corpus.shards.keys``: what a later --append compares with) and the report
   (``corpus.report``: ``report.json``, ``report.md``, ``shares.png``)
9. manifest (``corpus.shards.format``), last: it marks the build finished; then OUT is published in one rename.

Everything after the ingest is a deterministic function of the kept documents (in canonical order) and the
seed, so the shard layout is recomputed identically on every run, with any executor and number of tasks.
The build works in a staging folder beside OUT (``corpus.engine.staging``): shards are written there atomically and
recorded in ``.pack.json`` as they finish, the manifest last; a rerun of the same command resumes it, and the
result is byte-identical to an uninterrupted build. The finished folder becomes OUT by one rename, so OUT is
either absent (or as it was) or complete.
"""

from __future__ import annotations

import json
import tempfile
from dataclasses import asdict, replace
from pathlib import Path

import numpy as np

from common.outdir import check_output_dir, publish_dir
from corpus.check import Checked, check_inputs, check_out, check_work_dir
from corpus.config import BuildConfig, BuildError
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
from corpus.mixture.layout import lay_out
from corpus.mixture.plan import PlanError
from corpus.mixture.prepare import Prepared, prepare
from corpus.pack import PACK_PROGRESS, write_layout
from corpus.report import report_input, write_report
from corpus.shards.format import MANIFEST_NAME, Manifest, ShardInfo, dtype_for_vocab
from corpus.shards.keys import load_keys, save_keys
from corpus.shards.verify import check_written
from fertility.text import TextSource, input_paths

__all__ = ["BuildConfig", "BuildError", "build", "plan_only", "staging_path"]


def arguments(config: BuildConfig) -> dict:
    """The build's arguments as plain JSON (what a rerun is compared against)."""
    return json.loads(json.dumps(asdict(config)))


def build(config: BuildConfig, out_dir: str | Path, *, append: bool = False, overwrite: bool = False,
          executor: ExecutorConfig | None = None, work_dir: str | None = None,
          keep_work: bool = False, strict_mix: bool = False) -> tuple[Manifest, Prepared | None]:
    """Build the shard set ``out_dir``; returns its manifest and what was prepared.

    Every check that needs no ingest comes first (stage 1). The work happens in :func:`staging_path` (the
    stages' files in its ``.work``, or in ``work_dir``, any fsspec URL), which a rerun of the same command
    resumes; the finished shard set replaces ``out_dir`` in one rename. A rerun of a finished build returns the
    manifest and ``None`` and does nothing. With ``strict_mix`` a language without validation documents, or
    whose training share misses the plan (``corpus.mixture.plan.SHARE_TOLERANCE``), stops the build before any shard
    is written (:class:`~corpus.mixture.plan.PlanError`; the ingest is kept for the rerun).
    """
    executor = executor or ExecutorConfig()
    out_dir = Path(out_dir)
    args = arguments(config)
    checked = check_inputs(config, executor)
    check_work_dir(work_dir, out_dir)
    existing, done = check_out(out_dir, checked.info, args, append=append, overwrite=overwrite,
                               inputs=input_paths(checked.sources))
    if done:
        return existing, None
    with staged(out_dir, {"arguments": args, "append": append}) as stage:
        if existing is not None:
            link_existing(out_dir, stage)
        work, owner = work_url(stage, work_dir), claim_work(work_dir, executor.ingest_tasks)
        if (stage / MANIFEST_NAME).exists():  # finished, then stopped before it was published
            manifest, prepared = Manifest.load(stage), None
        else:
            # The documents of the set an --append adds to, from OUT itself: the staging folder's copy of the
            # keys is replaced by the new set's before the manifest is written, so a rerun after a kill would
            # read those. Only when there is work to do: a finished stage is only published.
            known = load_keys(out_dir, existing, checked.tokenizer) if existing else np.zeros((0, 16), np.uint8)
            manifest, prepared = _stages(stage, config, checked, existing, known, executor, work, strict_mix)
        (stage / PACK_PROGRESS).unlink(missing_ok=True)
        if not keep_work:
            remove_work(stage, owner)
        publish_dir(stage, out_dir, command="corpus build")
    return manifest, prepared


def _stages(stage: Path, config: BuildConfig, checked: Checked, existing: Manifest | None, known: np.ndarray,
            executor: ExecutorConfig, work: str, strict_mix: bool) -> tuple[Manifest, Prepared]:
    """Stages 2 to 9 in the staging folder, each taking the previous one's result."""
    if executor.status_file is None and "://" not in work:
        executor = replace(executor, status_file=str(Path(work) / WORK_STATUS))
    remove_stale_temp_files(stage)
    status = BuildStatus()
    prepared = prepare(config, work, executor, status, checked, known)  # 2-4: ingest, hold-out, plan, selection
    check_strict(prepared, strict_mix)
    layout = lay_out(prepared.table, prepared.val, prepared.train_rows, config.shard_tokens,
                     existing.shards if existing else [])
    dtype = dtype_for_vocab(checked.info.vocab_size)
    languages = [s.language for s in prepared.states]
    new_shards = write_layout(layout, prepared.table, languages, stage, work, checked.info, dtype, executor, status)
    check_written(stage, new_shards, dtype)
    manifest = _manifest(config, prepared, dtype, new_shards, existing)
    written = np.unique(np.concatenate([layout.train_rows, *prepared.val.values()]))
    save_keys(stage, np.concatenate([known, prepared.table.keys[written]]))
    # The report first, the manifest last: manifest.json is what marks the build finished (a rerun then only
    # publishes it), so everything it promises, the report and shares.png included, must already be on disk.
    write_report(stage, report_input(prepared, layout, new_shards, len(manifest.shards)))
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
    sources = [_source_record(src, state) for src, state in zip(prepared.sources, prepared.states, strict=True)]
    return Manifest(
        tokenizer=prepared.tokenizer, dtype=dtype, shards=(existing.shards if existing else []) + new_shards,
        seed=config.seed, sources=(existing.sources if existing else []) + sources,
        filters={"clean": dict(config.ingest.clean), "dedup": asdict(config.ingest.dedup),
                 "bad_utf8": config.ingest.bad_utf8, "min_language_score": config.ingest.min_language_score},
        plan=prepared.plan.to_dict() | ({"previous": existing.plan} if existing else {}),
        arguments=arguments(config) | ({"previous": existing.arguments} if existing else {}),
    )


def _source_record(source: TextSource, state) -> dict:
    return {"name": state.name, "language": state.language, "spec": source.spec, "field": source.field,
            "config": source.config, "split": source.split, "counters": dict(sorted(state.counters.items()))}


def plan_only(config: BuildConfig, out_dir: str | Path | None, *, executor: ExecutorConfig | None = None,
              work_dir: str | None = None, strict_mix: bool = False) -> Prepared:
    """Stages 1 to 4 without writing shards. With ``out_dir`` the ingest is kept in its staging folder
    (:func:`staging_path`), which a later build into ``out_dir`` resumes; with ``work_dir`` it is kept there.
    ``strict_mix`` refuses the plan as :func:`build` would."""
    executor = executor or ExecutorConfig()
    checked = check_inputs(config, executor)
    check_work_dir(work_dir, out_dir)
    if out_dir is not None:
        # The later build's --out: held to the same policy now, so that it is refused before the ingest.
        check_output_dir(out_dir, overwrite=True, inputs=input_paths(checked.sources))
    claim_work(work_dir, executor.ingest_tasks)  # so that a later build can prove the kept ingest is ours
    if out_dir is not None:
        with staged(Path(out_dir), None) as stage:
            prepared = prepare(config, work_url(stage, work_dir), executor, checked=checked)
    elif work_dir is not None:
        prepared = prepare(config, str(work_dir).rstrip("/"), executor, checked=checked)
    else:
        with tempfile.TemporaryDirectory(prefix="corpus-plan-") as tmp:
            prepared = prepare(config, tmp, executor, checked=checked)
    check_strict(prepared, strict_mix)
    return prepared
