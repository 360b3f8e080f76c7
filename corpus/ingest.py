"""Ingest: read every source, clean, filter, deduplicate and tokenize it into work units on disk.

A work unit is ``unit_docs`` consecutive documents of one source. Units are cleaned, filtered, hashed and
tokenized in worker processes and committed by the main process in corpus order: it runs the deduplicator
(whose decisions depend on everything before), writes the unit's two files atomically and then records the
unit in ``ingest.json``. A killed ingest therefore resumes after its last committed unit, with the
deduplicator rebuilt from the committed units, and produces exactly the units an uninterrupted run would.

Per unit, ``NNN_UUUUUU.tokens.npy`` holds the kept documents' token ids (uint32, no BOS) back to back, and
``NNN_UUUUUU.meta.npz`` their offsets, characters, UTF-8 bytes, dedup keys and signatures, token counts with
the comparison tokenizers, and the unit's counters.
"""

from __future__ import annotations

import io
import json
import multiprocessing as mp
import os
from collections import Counter, deque
from collections.abc import Iterator
from concurrent.futures import ThreadPoolExecutor
from dataclasses import asdict, dataclass, field
from itertools import chain, islice
from pathlib import Path

import numpy as np
from tqdm import tqdm

from corpus.clean import CleanConfig, clean_and_filter_batch, ngram_hashes
from corpus.dedup import DedupConfig, Deduplicator, exact_key, signatures
from fertility.fileio import atomic_write_bytes
from fertility.text import TextSource, iter_documents
from fertility.tokenizers import load_tokenizer

PROGRESS_NAME = "ingest.json"


class IngestError(RuntimeError):
    """A work directory that belongs to another build, or a source that cannot be read."""


@dataclass
class IngestConfig:
    """Everything that decides the content of the work units (the number of workers does not)."""

    tokenizer: str
    tokenizer_dir: str | None = None
    compare_tokenizers: list[str] = field(default_factory=list)
    unit_docs: int = 1000
    bad_utf8: str = "fail"  # "fail" or "skip"
    max_chars: int | None = None  # per source: keep the head of each source (whole documents)
    clean: CleanConfig = field(default_factory=CleanConfig)
    dedup: DedupConfig = field(default_factory=DedupConfig)


@dataclass
class Unit:
    """One committed work unit: where its files are and how many documents it kept."""

    source: int
    index: int
    documents: int

    @property
    def stem(self) -> str:
        return f"{self.source:03d}_{self.index:06d}"


@dataclass
class SourceIngest:
    """A source's committed units and its counters (documents in, each cleaning step, drops, bad lines)."""

    name: str
    language: str
    units: list[Unit] = field(default_factory=list)
    counters: dict[str, int] = field(default_factory=dict)
    done: bool = False


def source_name(source: TextSource) -> str:
    """A readable, unique-enough name: the spec, plus the field when it is not the default."""
    return source.spec + (f":{source.field}" if source.field != "text" else "")


def _fingerprint(sources: list[TextSource], config: IngestConfig, tokenizer_sha: str) -> dict:
    return {"sources": [asdict(s) for s in sources], "config": asdict(config), "tokenizer_sha256": tokenizer_sha}


# Per-process state of the workers (and of the main process when it works alone).
_WORKER: dict = {}


def _init_worker(config: IngestConfig) -> None:
    _WORKER["config"] = config
    _WORKER["tokenizer"] = load_tokenizer(config.tokenizer, config.tokenizer_dir)
    _WORKER["compare"] = [load_tokenizer(spec, config.tokenizer_dir) for spec in config.compare_tokenizers]


def _init_pool_worker(config: IngestConfig) -> None:
    # Several worker processes already use every core: no tokenizer thread pools on top.
    os.environ.setdefault("TOKENIZERS_PARALLELISM", "false")
    _init_worker(config)


def _clean_unit(language: str, texts: list[str]) -> dict:
    """Clean, filter and hash one unit's documents (Python work)."""
    config: IngestConfig = _WORKER["config"]
    counters: Counter = Counter()
    kept = [d for d in clean_and_filter_batch(texts, language, config.clean, counters) if d is not None]
    shared_grams = config.dedup.ngram == config.clean.ngram
    return {
        "counters": counters,
        "texts": [d.text for d in kept],
        "chars": np.array([len(d.text) for d in kept], dtype=np.int64),
        "bytes": np.array([len(d.text.encode()) for d in kept], dtype=np.int64),
        "keys": np.array([np.frombuffer(exact_key(d.words), dtype=np.uint8) for d in kept], dtype=np.uint8).reshape(-1, 16),
        "sigs": signatures([d.grams if shared_grams else ngram_hashes(d.words, config.dedup.ngram) for d in kept],
                           config.dedup),
    }


def _tokenize_unit(unit: dict) -> dict:
    """Tokenize a cleaned unit (the tokenizers run natively, outside the GIL) and drop its texts."""
    texts = unit.pop("texts")
    ids = _WORKER["tokenizer"].encode_ids(texts) if texts else []
    unit["lengths"] = np.array([len(x) for x in ids], dtype=np.int64)
    unit["tokens"] = np.fromiter(chain.from_iterable(ids), dtype=np.uint32, count=int(unit["lengths"].sum()))
    unit["compare"] = np.array([[len(x) for x in tok.encode_ids(texts)] for tok in _WORKER["compare"]],
                               dtype=np.int64).T.reshape(len(texts), len(_WORKER["compare"]))
    return unit


def _process_unit(language: str, texts: list[str]) -> dict:
    """Everything a worker process does to one unit."""
    return _tokenize_unit(_clean_unit(language, texts))


def _npy_bytes(array: np.ndarray) -> bytes:
    buf = io.BytesIO()
    np.save(buf, array, allow_pickle=False)
    return buf.getvalue()


def _npz_bytes(**arrays: np.ndarray) -> bytes:
    buf = io.BytesIO()
    np.savez(buf, **arrays)
    return buf.getvalue()


def load_unit_meta(work_dir: Path, unit: Unit) -> dict[str, np.ndarray]:
    """The metadata arrays of a committed unit."""
    with np.load(work_dir / "units" / f"{unit.stem}.meta.npz", allow_pickle=False) as z:
        return {k: z[k] for k in z.files}


def _commit(work_dir: Path, unit: Unit, result: dict, dedup: Deduplicator) -> Counter:
    """Deduplicate a processed unit against everything before it and write it; returns its counters."""
    counters = Counter(result["counters"])
    keep = []
    for i, (key, sig) in enumerate(zip(result["keys"], result["sigs"], strict=True)):
        verdict = dedup.check(key.tobytes(), sig)
        if verdict is None:
            keep.append(i)
        else:
            counters[f"drop_{verdict}"] += 1
    mask = np.zeros(len(result["lengths"]), dtype=bool)
    mask[keep] = True
    tokens = result["tokens"][np.repeat(mask, result["lengths"])]
    offsets = np.concatenate([[0], np.cumsum(result["lengths"][mask])]).astype(np.int64)
    counters["documents_kept"] += len(keep)
    unit.documents = len(keep)
    units_dir = work_dir / "units"
    # Tokens first: a unit counts as committed only once its meta file (and then ingest.json) exists.
    atomic_write_bytes(units_dir / f"{unit.stem}.tokens.npy", _npy_bytes(tokens))
    atomic_write_bytes(units_dir / f"{unit.stem}.meta.npz", _npz_bytes(
        offsets=offsets, chars=result["chars"][keep], bytes=result["bytes"][keep], keys=result["keys"][keep],
        sigs=result["sigs"][keep], compare=result["compare"][keep],
        counters=np.array(json.dumps(dict(counters), sort_keys=True)),
    ))
    return counters


def _save_progress(work_dir: Path, fingerprint: dict, states: list[SourceIngest]) -> None:
    payload = {"fingerprint": fingerprint, "sources": [asdict(s) for s in states]}
    atomic_write_bytes(work_dir / PROGRESS_NAME, json.dumps(payload, ensure_ascii=False, indent=1).encode())


def _load_progress(work_dir: Path, fingerprint: dict, sources: list[TextSource]) -> list[SourceIngest]:
    path = work_dir / PROGRESS_NAME
    if not path.exists():
        return [SourceIngest(source_name(s), s.lang) for s in sources]
    saved = json.loads(path.read_text(encoding="utf-8"))
    if saved["fingerprint"] != json.loads(json.dumps(fingerprint)):
        raise IngestError(
            f"{work_dir} holds the unfinished work of a build with different sources, tokenizer or cleaning "
            f"settings; rerun that build's command to finish it, or delete {work_dir} to start over")
    states = []
    for s in saved["sources"]:
        units = [Unit(**u) for u in s.pop("units")]
        states.append(SourceIngest(units=units, **s))
    return states


def _batches(documents: Iterator, size: int) -> Iterator[list[str]]:
    while batch := [d.text for d in islice(documents, size)]:
        yield batch


def ingest(sources: list[TextSource], config: IngestConfig, work_dir: Path, tokenizer_sha: str, *,
           workers: int = 1, progress: bool = True) -> list[SourceIngest]:
    """Bring ``work_dir`` to the fully ingested state (resuming where a previous run stopped)."""
    work_dir = Path(work_dir)
    (work_dir / "units").mkdir(parents=True, exist_ok=True)
    fingerprint = _fingerprint(sources, config, tokenizer_sha)
    states = _load_progress(work_dir, fingerprint, sources)
    if all(s.done for s in states):
        return states
    dedup = Deduplicator(config.dedup)
    pool = thread = None
    if workers > 1:
        pool = mp.get_context("spawn").Pool(workers, initializer=_init_pool_worker, initargs=(config,))
    else:
        # One process: a thread tokenizes (the tokenizer may use its own threads too) while this one reads,
        # cleans and commits; up to three cleaned units wait for it, so a slow unit on either side stalls neither.
        _init_worker(config)
        thread = ThreadPoolExecutor(max_workers=1)
    bar = tqdm(desc="ingest", unit="doc", disable=not progress, dynamic_ncols=True)
    try:
        for index, (source, state) in enumerate(zip(sources, states, strict=True)):
            for unit in state.units:
                meta = load_unit_meta(work_dir, unit)
                for key, sig in zip(meta["keys"], meta["sigs"], strict=True):
                    dedup.remember(key.tobytes(), sig)
            if state.done:
                continue
            reader_counters: dict = {}
            documents = iter_documents(source, max_chars=config.max_chars,
                                       errors="skip" if config.bad_utf8 == "skip" else "strict",
                                       counters=reader_counters)
            batches = enumerate(_batches(documents, config.unit_docs))
            skip = len(state.units)
            pending: deque = deque()

            def commit_next(pending=pending, state=state, index=index) -> None:
                unit_index, n_texts, result = pending.popleft()
                result = result.get() if pool is not None else result.result()
                unit = Unit(index, unit_index, 0)
                counters = _commit(work_dir, unit, result, dedup)
                state.units.append(unit)
                state.counters = dict(Counter(state.counters) + counters)
                _save_progress(work_dir, fingerprint, states)
                bar.update(n_texts)

            for unit_index, texts in batches:
                if unit_index < skip:
                    bar.update(len(texts))
                    continue
                if pool is not None:
                    pending.append((unit_index, len(texts), pool.apply_async(_process_unit, (source.lang, texts))))
                    if len(pending) > 2 * workers:
                        commit_next()
                else:
                    pending.append((unit_index, len(texts), thread.submit(_tokenize_unit, _clean_unit(source.lang, texts))))
                    if len(pending) > 3:
                        commit_next()
            while pending:
                commit_next()
            state.counters = dict(Counter(state.counters) + Counter({"bad_utf8": reader_counters.get("bad_utf8", 0)}))
            state.done = True
            _save_progress(work_dir, fingerprint, states)
    finally:
        bar.close()
        if pool is not None:
            pool.terminate()
        if thread is not None:
            thread.shutdown(cancel_futures=True)
    return states
