"""Build token shards: prepare (ingest, validation hold-out, plan), select, shuffle, pack, write.

Everything after the ingest is a deterministic function of the kept documents (in canonical order) and the
seed, so the shard layout is recomputed identically on every run, with any executor and number of tasks.
The build works in a staging folder beside OUT (:func:`staging_path`, marked as this project's): shards are
written there atomically and recorded in ``.pack.json`` as they finish, the manifest last; a rerun of the same
command resumes it, and the result is byte-identical to an uninterrupted build. The finished folder becomes
OUT by one rename, so OUT is either absent (or as it was) or complete.
"""

from __future__ import annotations

import hashlib
import json
import multiprocessing as mp
import os
import shutil
import tempfile
import time
from collections.abc import Callable, Iterator
from contextlib import contextmanager
from dataclasses import asdict, dataclass, replace
from functools import lru_cache
from pathlib import Path

import numpy as np
from tqdm import tqdm

from common.errors import InputError, OutputPathError
from common.fileio import read_json, write_json
from common.outdir import MARKER, check_output_dir, is_ours, publish_dir
from corpus.executors import ExecutorConfig, worker_start
from corpus.faults import kill_or_pause_if_asked
from corpus.plan import Plan, PlanError
from corpus.prepare import (
    BuildConfig,
    BuildError,
    Checked,
    DocTable,
    Prepared,
    check_inputs,
    measure_rows,
    prepare,
    rng,
    train_mask,
)
from corpus.progress import BuildStatus, StageStatus
from corpus.report import ReportInput, write_report
from corpus.shards import (
    MANIFEST_NAME,
    Manifest,
    ShardError,
    ShardInfo,
    TokenizerInfo,
    atomic_write_bytes,
    dtype_for_vocab,
    encode_shard,
    read_header,
)
from fertility.text import TextSource, input_paths
from fertility.totals import Totals

WORK_DIR = ".work"
STAGE_SUFFIX = ".building"
PACK_PROGRESS = ".pack.json"
POOL_TOKENS = 20_000_000
__all__ = ["BuildConfig", "BuildError", "build", "plan_only", "staging_path"]


def arguments(config: BuildConfig) -> dict:
    """The build's arguments as plain JSON (what a rerun is compared against)."""
    return json.loads(json.dumps(asdict(config)))


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


@lru_cache(maxsize=8)
def _token_file(work_url: str, name: str) -> np.ndarray:
    """A task's token file: memory-mapped when the work folder is local, else read whole through fsspec."""
    if "://" not in work_url:
        path = Path(work_url) / name
        return np.memmap(path, dtype="<u4", mode="r") if path.stat().st_size else np.zeros(0, dtype="<u4")
    import fsspec

    with fsspec.open(f"{work_url}/{name}", "rb") as f:
        return np.frombuffer(f.read(), dtype="<u4")


def _shard_bytes(work_url: str, names: list[str], files: np.ndarray, starts: np.ndarray, lengths: np.ndarray,
                 bos: int, dtype: str) -> bytes:
    """A shard's bytes: each document's BOS then its tokens, read from the tasks' token files."""
    tokens = np.empty(int(lengths.sum()), dtype=np.uint32)
    at = 0
    for u, start, n in zip(files.tolist(), starts.tolist(), lengths.tolist(), strict=True):
        tokens[at] = bos
        tokens[at + 1:at + n] = _token_file(work_url, names[u])[start:start + n - 1]
        at += n
    return encode_shard(tokens, dtype)


def _write_job(out_dir: str, work_url: str, names: list[str], file: str, files: np.ndarray, starts: np.ndarray,
               lengths: np.ndarray, bos: int, dtype: str) -> tuple[str, str]:
    data = _shard_bytes(work_url, names, files, starts, lengths, bos, dtype)
    atomic_write_bytes(Path(out_dir) / file, data)
    return file, hashlib.sha256(data).hexdigest()


def _layout_hash(jobs: list[ShardJob], table: DocTable) -> str:
    h = hashlib.sha256()
    for job in jobs:
        h.update(job.file.encode())
        h.update(table.uid[job.docs].tobytes())
    return h.hexdigest()


def write_shards(jobs: list[ShardJob], table: DocTable, out_dir: Path, work_url: str, tok: TokenizerInfo,
                 dtype: str, *, workers: int = 1, progress: bool = True,
                 on_shard: Callable[[int, int], None] | None = None) -> dict[str, str]:
    """Write every shard not already recorded in ``.pack.json``; returns ``{file: sha256}`` for all of them.

    ``on_shard(shards done, documents done)`` is called after each shard (the build's status file).
    """
    progress_path = out_dir / PACK_PROGRESS
    layout = _layout_hash(jobs, table)
    done: dict[str, str] = {}
    if progress_path.exists():
        saved = json.loads(progress_path.read_text(encoding="utf-8"))
        if saved["layout"] == layout:
            done = {f: sha for f, sha in saved["done"].items() if _intact(out_dir / f)}
    todo = [j for j in jobs if j.file not in done]
    args = [(str(out_dir), work_url, table.files, j.file, table.file[j.docs], table.start[j.docs], table.tokens[j.docs],
             tok.bos_id, dtype) for j in todo]
    bar = tqdm(total=int(sum(table.tokens[j.docs].sum() for j in jobs)), desc="shards", unit="tok", unit_scale=True,
               disable=not progress, dynamic_ncols=True)
    bar.update(int(sum(table.tokens[j.docs].sum() for j in jobs if j.file in done)))
    sizes = {j.file: int(table.tokens[j.docs].sum()) for j in jobs}
    documents = {j.file: len(j.docs) for j in jobs}

    def record(file: str, sha: str) -> None:
        done[file] = sha
        write_json(progress_path, {"layout": layout, "done": done})
        bar.update(sizes[file])
        if on_shard is not None:
            on_shard(len(done), sum(documents[f] for f in done))

    try:
        # Below POOL_TOKENS, starting worker processes takes longer than writing the shards here.
        if workers > 1 and len(todo) > 1 and sum(sizes[j.file] for j in todo) > POOL_TOKENS:
            with mp.get_context("spawn").Pool(min(workers, len(todo)), initializer=worker_start,
                                              initargs=(os.getpid(),)) as pool:
                for file, sha in pool.imap(_star_write_job, args):
                    record(file, sha)
        else:
            for i, a in enumerate(args):
                kill_or_pause_if_asked("pack", i)
                record(*_write_job(*a))
    finally:
        bar.close()
    return done


def _intact(path: Path) -> bool:
    try:
        read_header(path)
    except ShardError:
        return False
    return True


def _star_write_job(args: tuple) -> tuple[str, str]:
    return _write_job(*args)


def _shard_info(job: ShardJob, table: DocTable, languages: list[str], sha: str) -> ShardInfo:
    by_lang: dict[str, int] = {}
    for s, n in zip(table.source[job.docs].tolist(), table.tokens[job.docs].tolist(), strict=True):
        by_lang[languages[s]] = by_lang.get(languages[s], 0) + n
    return ShardInfo(file=job.file, split=job.split, tokens=int(table.tokens[job.docs].sum()),
                     documents=len(job.docs), tokens_by_language=dict(sorted(by_lang.items())),
                     language=job.language, chars=int(table.chars[job.docs].sum()),
                     bytes=int(table.bytes[job.docs].sum()), sha256=sha)


def _current(arguments: dict) -> dict:
    return {k: v for k, v in arguments.items() if k != "previous"}


def _published(out_dir: Path, info: TokenizerInfo, args: dict, *, append: bool, overwrite: bool,
               inputs: list[str]) -> tuple[Manifest | None, bool]:
    """Before any work, what OUT holds: ``(manifest, True)`` when it is this very build already (a rerun does
    nothing), ``(manifest, False)`` for the shard set that ``append`` adds to, else ``(None, False)``. Refuses
    an OUT the --out policy forbids (``common.outdir``), a result of other arguments without ``--overwrite``,
    and an ``--append`` to anything but a shard set of the same tokenizer."""
    check_output_dir(out_dir, overwrite=True, inputs=inputs)  # the rules no flag lifts
    existing = None
    if is_ours(out_dir) and (out_dir / MANIFEST_NAME).is_file():
        existing = Manifest.load(out_dir)
        if _current(existing.arguments) == args:
            return existing, True
    if append:
        if existing is None:
            raise BuildError(f"--append: {out_dir} is not a shard set written by `corpus build`; build one there "
                             "first, or drop --append")
        if existing.tokenizer.sha256 != info.sha256:
            raise BuildError(
                f"{out_dir / MANIFEST_NAME}: its shards were made with tokenizer {existing.tokenizer.spec} "
                f"(sha256 {existing.tokenizer.sha256[:12]}), not {info.spec} (sha256 {info.sha256[:12]}); token "
                "ids of two tokenizers cannot share a shard set. Use another --out, or the manifest's tokenizer")
        if existing.dtype != dtype_for_vocab(info.vocab_size):
            raise BuildError(f"{out_dir}: existing shards are {existing.dtype}, this tokenizer needs "
                             f"{dtype_for_vocab(info.vocab_size)}")
        return existing, False
    if existing is not None and not overwrite:
        raise OutputPathError(f"--out {out_dir}: already holds a shard set built with other arguments; pass "
                              "--append to add these shards to it, --overwrite to replace it, or choose another --out")
    check_output_dir(out_dir, overwrite=overwrite, inputs=inputs)
    return None, False


def staging_path(out_dir: str | Path) -> Path:
    """Where a build into OUT keeps its unfinished work (shards, report, and the stages' files in ``.work``): a
    folder beside OUT, marked as this project's, that a rerun of the same command resumes and that becomes OUT
    by a rename when the build is complete (``common.outdir.publish_dir``)."""
    out_dir = Path(out_dir)
    return out_dir.parent / f".{out_dir.name}{STAGE_SUFFIX}"


def _open_stage(stage: Path, record: dict | None) -> bool:
    """Create the staging folder, or resume the one there; True when it is created now. ``record`` says what
    the folder's shards are for (the build's arguments); a folder holding another build's unfinished shards
    keeps only its ingest (``.work``, checked by its own fingerprint) and packs again, which takes seconds.
    ``None`` (a plan) leaves an existing folder as it is."""
    marker = {"written_by": "bangla-tokfair", "command": "corpus build (unfinished)", "build": record}
    if stage.exists() or stage.is_symlink():
        if not stage.is_dir() or not is_ours(stage):
            raise OutputPathError(f"{stage}: is where this build keeps its unfinished work, but holds something "
                                  "this project did not write; move it away (nothing was written)")
        if record is not None and read_json(stage / MARKER).get("build") != record:
            for path in stage.iterdir():
                if path.name not in (MARKER, WORK_DIR):
                    shutil.rmtree(path) if path.is_dir() else path.unlink()
            write_json(stage / MARKER, marker)
        return False
    stage.mkdir()
    write_json(stage / MARKER, marker)
    return True


def _link_existing(out_dir: Path, stage: Path) -> None:
    """The files of the shard set an --append adds to, in the staging folder: hard links (shards are never
    rewritten in place, so OUT's files stay as they were), or copies where links are refused. Not its
    manifest: in the staging folder, a manifest marks the build finished."""
    for path in out_dir.iterdir():
        target = stage / path.name
        if path.is_file() and path.name not in (MARKER, MANIFEST_NAME) and not target.exists():
            try:
                os.link(path, target)
            except OSError:
                shutil.copy2(path, target)


@contextmanager
def _staged(out_dir: Path, record: dict | None) -> Iterator[Path]:
    """The staging folder of ``out_dir`` for the block. Bad input met before the ingest was finished removes a
    folder created by this run (its work cannot be trusted once the input is fixed): nothing is left that was
    not there before. Anything else (a signal, a bug, a plan error after a finished ingest) keeps it, marked,
    for the rerun to resume."""
    stage = staging_path(out_dir)
    created = _open_stage(stage, record)
    try:
        yield stage
    except InputError as e:
        if created and not isinstance(e, PlanError):
            shutil.rmtree(stage, ignore_errors=True)
        raise


def pack_status(status: BuildStatus, path: str | None, jobs: list[ShardJob]) -> Callable[[int, int], None]:
    """The packing stage in the status file: shards as its tasks, documents written, rate and ETA."""
    stage = StageStatus("pack", len(jobs), total_documents=sum(len(j.docs) for j in jobs))
    status.stages.append(stage)
    start = time.monotonic()

    def update(shards: int, documents: int) -> None:
        stage.tasks_done, stage.documents = shards, documents
        stage.elapsed_s = time.monotonic() - start
        stage.documents_per_s = documents / stage.elapsed_s if stage.elapsed_s else 0.0
        share = documents / stage.total_documents if stage.total_documents else 1.0
        stage.done = shards == len(jobs)
        stage.eta_s = stage.elapsed_s * (1 - share) / share if share else None
        if path is not None:
            write_json(path, asdict(status))

    return update


def _check_work_dir(work_dir: str | None) -> None:
    """A local --work-dir must be a folder or a path that can become one (a URL is the filesystem's to judge)."""
    if work_dir is None or "://" in str(work_dir):
        return
    path = Path(work_dir)
    parent = next((p for p in (path, *path.parents) if p.exists()), None)
    if parent is not None and not parent.is_dir():
        raise InputError(f"--work-dir {work_dir}: {parent} is not a folder; give a folder (or a URL) for the "
                         "stages' files")


def _work_url(stage: Path, work_dir: str | None) -> str:
    return str(work_dir).rstrip("/") if work_dir else str((stage / WORK_DIR).resolve())


def _remove_work(work_url: str) -> None:
    if "://" not in work_url:
        shutil.rmtree(work_url, ignore_errors=True)
        return
    import fsspec

    fs, path = fsspec.core.url_to_fs(work_url)
    if fs.exists(path):
        fs.rm(path, recursive=True)


def build(config: BuildConfig, out_dir: str | Path, *, append: bool = False, overwrite: bool = False,
          executor: ExecutorConfig | None = None, work_dir: str | None = None,
          keep_work: bool = False) -> tuple[Manifest, Prepared | None]:
    """Build the shard set ``out_dir``; returns its manifest and what was prepared.

    Every check that needs no ingest comes first (:func:`corpus.prepare.check_inputs`, the --out policy of
    ``common.outdir``). The work happens in :func:`staging_path` (the stages' files in its ``.work``, or in
    ``work_dir``, any fsspec URL), which a rerun of the same command resumes; the finished shard set replaces
    ``out_dir`` in one rename. A rerun of a finished build returns the manifest and ``None`` and does nothing.
    """
    executor = executor or ExecutorConfig()
    out_dir = Path(out_dir)
    args = arguments(config)
    checked = check_inputs(config, executor)
    _check_work_dir(work_dir)
    existing, done = _published(out_dir, checked.info, args, append=append, overwrite=overwrite,
                                inputs=input_paths(checked.sources))
    if done:
        return existing, None
    with _staged(out_dir, {"arguments": args, "append": append}) as stage:
        if existing is not None:
            _link_existing(out_dir, stage)
        work_url = _work_url(stage, work_dir)
        if (stage / MANIFEST_NAME).exists():  # finished, then stopped before it was published
            manifest, prepared = Manifest.load(stage), None
        else:
            manifest, prepared = _build_in(stage, config, checked, existing, executor, work_url)
        (stage / PACK_PROGRESS).unlink(missing_ok=True)
        if not keep_work:
            _remove_work(work_url)
        publish_dir(stage, out_dir, command="corpus build")
    return manifest, prepared


def _build_in(stage: Path, config: BuildConfig, checked: Checked, existing: Manifest | None,
              executor: ExecutorConfig, work_url: str) -> tuple[Manifest, Prepared]:
    """Ingest, plan and pack into the staging folder; the manifest is written last."""
    info, args = checked.info, arguments(config)
    if executor.status_file is None and "://" not in work_url:
        executor = replace(executor, status_file=str(Path(work_url) / "status.json"))
    _remove_stale_temp_files(stage)
    status = BuildStatus()
    prepared = prepare(config, work_url, executor, status, checked)
    table = prepared.table
    train_rows = select_training(table, prepared.plan, train_mask(table, prepared.val), config.seed)
    old_shards = existing.shards if existing else []
    jobs = shard_jobs(train_rows, prepared.val, table, config.shard_tokens, old_shards)
    dtype = dtype_for_vocab(info.vocab_size)
    hashes = write_shards(jobs, table, stage, work_url, info, dtype, workers=executor.workers,
                          progress=executor.progress, on_shard=pack_status(status, executor.status_file, jobs))
    languages = [s.language for s in prepared.states]
    new_shards = [_shard_info(j, table, languages, hashes[j.file]) for j in jobs]
    sources = [_source_record(src, state) for src, state in zip(prepared.sources, prepared.states, strict=True)]
    manifest = Manifest(
        tokenizer=info, dtype=dtype, shards=old_shards + new_shards, seed=config.seed,
        sources=(existing.sources if existing else []) + sources,
        filters={"clean": dict(config.ingest.clean), "dedup": asdict(config.ingest.dedup),
                 "bad_utf8": config.ingest.bad_utf8, "min_language_score": config.ingest.min_language_score},
        plan=prepared.plan.to_dict() | ({"previous": existing.plan} if existing else {}),
        arguments=args | ({"previous": existing.arguments} if existing else {}),
    )
    for s in new_shards:
        dtype_found, count = read_header(stage / s.file)
        if dtype_found != dtype or count != s.tokens:
            raise RuntimeError(f"{stage / s.file}: wrote {count} {dtype_found} tokens, expected {s.tokens} {dtype}")
    # The report first, the manifest last: manifest.json is what marks the build finished (a rerun then only
    # publishes it), so everything it promises, the report and shares.png included, must already be on disk.
    compare = list(config.ingest.compare_tokenizers)
    write_report(stage, ReportInput(
        tokenizer=info, tokenizer_name=prepared.tokenizer_name, compare=compare, states=prepared.states,
        corpus_by_source=measure_rows(prepared, np.arange(len(table.tokens)), "source"),
        corpus=measure_rows(prepared, np.arange(len(table.tokens)), "language"),
        train=measure_rows(prepared, train_rows, "language"),
        validation={lang: measure_rows(prepared, rows, "language").get(lang, Totals())
                    for lang, rows in prepared.val.items()},
        plan=prepared.plan, new_shards=new_shards, shards_in_manifest=len(manifest.shards)))
    manifest.save(stage)
    kill_or_pause_if_asked("manifest", 0)
    return manifest, prepared


def _remove_stale_temp_files(*directories: Path) -> None:
    """Temp files that a killed ``atomic_write_bytes`` left behind (never a committed file)."""
    for directory in directories:
        for path in directory.glob(".*.tmp"):
            path.unlink(missing_ok=True)


def _source_record(source: TextSource, state) -> dict:
    return {"name": state.name, "language": state.language, "spec": source.spec, "field": source.field,
            "config": source.config, "split": source.split, "counters": dict(sorted(state.counters.items()))}


def plan_only(config: BuildConfig, out_dir: str | Path | None, *, executor: ExecutorConfig | None = None,
              work_dir: str | None = None) -> Prepared:
    """Ingest and plan without writing shards. With ``out_dir`` the ingest is kept in its staging folder
    (:func:`staging_path`), which a later build into ``out_dir`` resumes; with ``work_dir`` it is kept there."""
    executor = executor or ExecutorConfig()
    checked = check_inputs(config, executor)
    _check_work_dir(work_dir)
    if out_dir is not None:
        # The later build's --out: held to the same policy now, so that it is refused before the ingest.
        check_output_dir(out_dir, overwrite=True, inputs=input_paths(checked.sources))
        with _staged(Path(out_dir), None) as stage:
            return prepare(config, _work_url(stage, work_dir), executor, checked=checked)
    if work_dir is not None:
        return prepare(config, str(work_dir).rstrip("/"), executor, checked=checked)
    with tempfile.TemporaryDirectory(prefix="corpus-plan-") as tmp:
        return prepare(config, tmp, executor, checked=checked)
