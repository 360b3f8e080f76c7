"""Stage 5 of a build: write the shards of a :class:`~corpus.mixture.layout.Layout`, each document's BOS then its tokens
read from the ingest's token files, in worker processes when there is enough to write. Every shard is written
atomically and recorded in ``.pack.json`` as it finishes, so a rerun writes only the missing ones."""

from __future__ import annotations

import hashlib
import json
import multiprocessing as mp
import time
from collections.abc import Callable
from dataclasses import asdict
from functools import lru_cache
from pathlib import Path

import numpy as np
from tqdm import tqdm

from common.fileio import write_json
from corpus.engine.executors import ExecutorConfig, worker_pool
from corpus.engine.faults import kill_or_pause_if_asked
from corpus.engine.progress import BuildStatus, StageStatus
from corpus.mixture.layout import DocTable, Layout, ShardJob
from corpus.mixture.prepare import Prepared
from corpus.shards.format import (
    ShardError,
    ShardInfo,
    TokenizerInfo,
    atomic_write_bytes,
    encode_shard,
    read_header,
)

PACK_PROGRESS = ".pack.json"
POOL_TOKENS = 20_000_000


def write_layout(layout: Layout, prepared: Prepared, out_dir: Path, work_url: str, dtype: str,
                 executor: ExecutorConfig, status: BuildStatus) -> list[ShardInfo]:
    """Write (or finish writing) every shard of ``layout`` into ``out_dir``, from the documents of ``prepared``;
    their records, in layout order. ``status`` gains the packing stage."""
    table, languages = prepared.table, [s.language for s in prepared.states]
    hashes = write_shards(layout.jobs, table, out_dir, work_url, prepared.checked.info, dtype,
                          workers=executor.workers, progress=executor.progress,
                          on_shard=pack_status(status, executor.status_file, layout.jobs))
    return [_shard_info(j, table, languages, hashes[j.file]) for j in layout.jobs]


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
    # A token file is cached by its path: a second build in this process (an --append, a test) remade the files
    # at the same paths, and its shards took tokens from the first build's maps ("could not broadcast"). So the
    # cache lives for one call: cleared before, and after (its maps would hold the removed work files' space).
    _token_file.cache_clear()
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
            with worker_pool(mp.get_context("spawn"), min(workers, len(todo))) as pool:
                for file, sha in pool.imap(_star_write_job, args):
                    record(file, sha)
        else:
            for i, a in enumerate(args):
                kill_or_pause_if_asked("pack", i)
                record(*_write_job(*a))
    finally:
        bar.close()
        _token_file.cache_clear()
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
