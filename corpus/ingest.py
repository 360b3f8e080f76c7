"""Ingest: the datatrove stages that read, clean, filter, tokenize and deduplicate every source.

Stages, each a set of datatrove tasks exchanging files in the work folder (any fsspec URL):

1. ``ingest`` (``--tasks`` tasks, default ``--workers``): ``corpus.engine.steps`` read -> clean and filter ->
   tokenize and store -> MinHash signatures;
2. ``buckets`` (one task per MinHash band): datatrove's ``MinhashDedupBuckets``, its merge done in numpy
   (``corpus.engine.buckets``), finds the pairs of documents equal in a band;
3. then, in this process, a small reduce over per-document metadata: exact and near-duplicate decisions
   (``corpus.quality.dedup``, the pairs read a block at a time) and the kept documents in canonical order
   (:class:`~corpus.mixture.layout.Ingested`).

A task writes its files and then datatrove marks it complete; a rerun skips completed tasks, so a build
killed in any stage finishes the remaining tasks only. The stage folders are named after the number of ingest
tasks (``tN/``): a rerun with another ``--tasks`` starts a fresh ingest rather than mixing two partitions.
"""

from __future__ import annotations

import json
from collections import Counter
from collections.abc import Iterator
from dataclasses import asdict, replace

import numpy as np

from common.errors import InputError
from corpus.config import IngestConfig
from corpus.engine.executors import ExecutorConfig, executor_session, quiet_logger, run_pipeline
from corpus.engine.progress import BuildStatus, StageWatcher
from corpus.engine.staging import FINGERPRINT_NAME
from corpus.engine.steps import pipelines
from corpus.mixture.layout import DocTable, Ingested, SourceIngest
from corpus.quality.dedup import exact_duplicates, minhash_config, near_duplicates
from fertility.text import TextSource

IN_PROCESS_BUCKETS_BYTES = 256 * 2**20


class IngestError(InputError):
    """A work folder that belongs to another build, or a source that cannot be read."""


def source_name(source: TextSource) -> str:
    """A readable, unique-enough name: the spec, plus the field when it is not the default."""
    return source.spec + (f":{source.field}" if source.field != "text" else "")


def _check_fingerprint(work_url: str, fingerprint: dict) -> None:
    from datatrove.io import get_datafolder

    folder = get_datafolder(work_url)
    if folder.isfile(FINGERPRINT_NAME):
        with folder.open(FINGERPRINT_NAME, "r") as f:
            saved = json.load(f)
        if saved != json.loads(json.dumps(fingerprint)):
            raise IngestError(
                f"{work_url} holds the unfinished work of a build with different sources, tokenizer or cleaning "
                f"settings; rerun that build's command to finish it, or delete {work_url} to start over")
        return
    with folder.open(FINGERPRINT_NAME, "w") as f:
        json.dump(fingerprint, f, ensure_ascii=False, indent=1)


def ingest(sources: list[TextSource], config: IngestConfig, work_url: str, tokenizer_sha: str,
           executor: ExecutorConfig, status: BuildStatus | None = None) -> Ingested:
    """Run (or finish) the ingest stages in ``work_url`` on ``executor`` and reduce their files to
    :class:`~corpus.mixture.layout.Ingested`. The sources and the executor are those stage 1 checked."""
    work_url = str(work_url).rstrip("/")
    tasks = executor.ingest_tasks
    _check_fingerprint(work_url, {"sources": [asdict(s) for s in sources], "config": asdict(config),
                                  "tokenizer_sha256": tokenizer_sha})
    stage_url = f"{work_url}/t{tasks}"
    ingest_steps, bucket_steps = pipelines(sources, config, stage_url)
    status = status if status is not None else BuildStatus()
    quiet_logger()
    with executor_session(executor):
        for name, steps, n in (("ingest", ingest_steps, tasks),
                               ("buckets", bucket_steps, minhash_config(config.dedup).num_buckets)):
            if name == "buckets" and not config.dedup.near:
                continue
            logs = f"{stage_url}/logs/{name}"
            stage_executor = executor
            if name == "buckets" and _size(f"{stage_url}/minhash/signatures") < IN_PROCESS_BUCKETS_BYTES:
                # Merging small signature files takes less time than starting a worker process (or Ray task) does.
                stage_executor = replace(executor, kind="local", workers=1)
            with StageWatcher(status, executor.status_file, stage_url, name, logs, n, show=executor.progress):
                run_pipeline(stage_executor, steps, n, logs)
    return _reduce(sources, config, stage_url, tasks)


def _size(url: str) -> int:
    """Total bytes of the files under ``url``."""
    from datatrove.io import get_datafolder

    folder = get_datafolder(url)
    return sum(folder.size(path) for path in folder.list_files()) if folder.isdir("") else 0


# Pairs read from a band's file at a time (16 bytes each on disk): a band holds up to one pair per document.
PAIR_BLOCK = 1 << 20


def _columns(folder, path: str, names: tuple[str, ...]) -> dict[str, np.ndarray]:
    """The arrays ``names`` of one ``.npz`` file, read one by one from it (not the whole file first)."""
    with folder.open(path, "rb") as f, np.load(f, allow_pickle=False) as z:
        return {k: z[k] for k in names}


def _pair_blocks(folder, offsets: np.ndarray) -> Iterator[np.ndarray]:
    """Every pair the bucket stage wrote, as blocks of rows of global document indices, at most
    ``PAIR_BLOCK`` rows each."""
    paths = folder.list_files("minhash/buckets", glob_pattern="*.dups") if folder.isdir("minhash/buckets") else []
    for path in paths:
        with folder.open(path, "rb") as f:
            while data := f.read(PAIR_BLOCK * 16):
                rows = np.frombuffer(data, dtype="<u4").reshape(-1, 4)
                yield np.stack([offsets[rows[:, 0]] + rows[:, 1], offsets[rows[:, 2]] + rows[:, 3]], axis=1)


def _kept_columns(folder, metas: list[str], keep: list[np.ndarray]) -> dict[str, np.ndarray]:
    """The token file, first token and sizes of the rows of ``metas`` (a metadata file per task) that ``keep``
    (a mask per task) keeps, task after task."""
    parts: dict[str, list[np.ndarray]] = {name: [] for name in ("file", "start", "tokens", "chars", "bytes", "compare")}
    for rank, (path, mine) in enumerate(zip(metas, keep, strict=True)):
        m = _columns(folder, path, ("tokens", "chars", "bytes", "compare"))
        parts["file"].append(np.full(int(mine.sum()), rank, dtype=np.int64))
        parts["start"].append((np.cumsum(m["tokens"]) - m["tokens"])[mine])
        for name, column in m.items():
            parts[name].append(column[mine])
    return {name: np.concatenate(p) for name, p in parts.items()}


def _reduce(sources: list[TextSource], config: IngestConfig, stage_url: str, tasks: int) -> Ingested:
    """The duplicate decisions and the table of the kept documents. Every document read has a row in the
    tasks' metadata, dropped or not, so only what the decisions need (ids, sources, keys) is held for all of
    them; the other columns are read afterwards for the kept rows alone."""
    from datatrove.io import get_datafolder

    folder = get_datafolder(stage_url)
    counters = [Counter() for _ in sources]
    for rank in range(tasks):
        for step in ("read", "clean"):
            with folder.open(f"counters/{rank:05d}.{step}.json", "r") as f:
                for c, saved in zip(counters, json.load(f), strict=True):
                    c.update(saved)
    metas = [f"docs/{rank:05d}.meta.npz" for rank in range(tasks)]
    parts = [_columns(folder, path, ("uid", "source", "keys")) for path in metas]
    offsets = np.cumsum([0] + [len(m["uid"]) for m in parts])
    # Popped: each task's arrays are let go once joined, not held beside the joined ones.
    uid, source, keys = (np.concatenate([m.pop(name) for m in parts]) for name in ("uid", "source", "keys"))
    exact = exact_duplicates(uid, keys) if config.dedup.exact else np.zeros(len(uid), dtype=bool)
    near = near_duplicates(uid, _pair_blocks(folder, offsets)) if config.dedup.near else np.zeros_like(exact)
    near &= ~exact
    keep = ~exact & ~near
    for name, rows in (("drop_exact_duplicate", exact), ("drop_near_duplicate", near), ("documents_kept", keep)):
        for c, n in zip(counters, np.bincount(source[rows], minlength=len(sources)).tolist(), strict=True):
            c[name] += n
    kept = {"source": source[keep], "uid": uid[keep], "keys": keys[keep]}
    del uid, source, keys
    kept |= _kept_columns(folder, metas, [keep[lo:hi] for lo, hi in zip(offsets[:-1], offsets[1:], strict=True)])
    order = np.argsort(kept["uid"], kind="stable")  # the kept documents in canonical order
    columns = {name: column[order] for name, column in kept.items()}
    # A document's tokens in a shard count its BOS, which the token files do not hold.
    columns["tokens"] += 1
    states = [SourceIngest(source_name(s), s.lang, {k: v for k, v in sorted(c.items()) if v or k == "bad_utf8"})
              for s, c in zip(sources, counters, strict=True)]
    return Ingested(states, DocTable(**columns, files=[f"t{tasks}/docs/{rank:05d}.tokens" for rank in range(tasks)]))
