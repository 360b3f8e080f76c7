"""Build token shards: ingest, hold out validation documents, plan the mixture, select, shuffle, pack, write.

Everything after ingest is a deterministic function of the committed work units and the seed, so the
shard layout is recomputed identically on every run. Shards are written atomically and recorded in
``pack.json`` as they finish; a rerun of the same command skips them, and the result is byte-identical to an
uninterrupted build. The manifest is written last, so a shard directory with a manifest is complete.
"""

from __future__ import annotations

import hashlib
import json
import multiprocessing as mp
import shutil
import tempfile
import zlib
from dataclasses import asdict, dataclass, field
from functools import lru_cache
from pathlib import Path

import numpy as np
from tqdm import tqdm

from corpus.ingest import IngestConfig, SourceIngest, Unit, ingest, load_unit_meta, source_name
from corpus.plan import Plan, SourceSupply, check_languages, plan_mixture
from corpus.report import write_report
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
from fertility.text import TextSource, parse_text_arg
from fertility.tokenizers import Tokenizer, load_tokenizer

WORK_DIR = ".work"
PACK_PROGRESS = "pack.json"


class BuildError(RuntimeError):
    """A build that cannot go ahead; the message says why and what to do."""


@dataclass
class BuildConfig:
    """The arguments that decide the shards' content (recorded in the manifest as ``arguments``)."""

    sources: list[str]  # "LANG=SPEC", as fertility.text.parse_text_arg reads them
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
    """Every kept document of the ingest, one row each, in corpus order."""

    source: np.ndarray  # source index
    unit: np.ndarray  # index into ``units``
    row: np.ndarray  # document's row within its unit
    start: np.ndarray  # offset of its first token in the unit's token file
    tokens: np.ndarray  # token count including the BOS
    chars: np.ndarray
    bytes: np.ndarray
    compare: np.ndarray  # (documents, comparison tokenizers) token counts, no BOS
    units: list[Unit]


@dataclass
class ShardJob:
    file: str
    split: str
    language: str | None
    docs: np.ndarray  # rows of the DocTable, in shard order


def parse_sources(args: list[str]) -> list[TextSource]:
    """``["bn=PATH", ...]`` -> sources, in order; at least one."""
    if not args:
        raise BuildError("give at least one --source LANG=SPEC")
    return [parse_text_arg(a) for a in args]


def tokenizer_info(tok: Tokenizer, spec: str) -> TokenizerInfo:
    """The manifest's tokenizer record; ``spec`` becomes the absolute path of the file that was loaded."""
    if tok.bos_id is None:
        raise BuildError(f"tokenizer {spec!r} has no BOS (or end-of-text) token; every document in a shard "
                         f"must start with one. Train or choose a tokenizer that defines it")
    path = Path(tok.path).resolve()
    return TokenizerInfo(spec=str(path) if path.exists() else spec, sha256=tok.fingerprint,
                         vocab_size=tok.vocab_size, bos_id=tok.bos_id, eos_id=tok.eos_id)


def arguments(config: BuildConfig) -> dict:
    """The build's arguments as plain JSON (what a rerun is compared against)."""
    return json.loads(json.dumps(asdict(config)))


def doc_table(work_dir: Path, states: list[SourceIngest], n_compare: int) -> DocTable:
    """Read the metadata of every committed unit into one table."""
    cols: dict[str, list[np.ndarray]] = {
        k: [] for k in ("source", "unit", "row", "start", "tokens", "chars", "bytes", "compare")}
    units: list[Unit] = []
    for state in states:
        for unit in state.units:
            meta = load_unit_meta(work_dir, unit)
            n = len(meta["chars"])
            cols["source"].append(np.full(n, unit.source, dtype=np.int32))
            cols["unit"].append(np.full(n, len(units), dtype=np.int32))
            cols["row"].append(np.arange(n, dtype=np.int32))
            cols["start"].append(meta["offsets"][:-1])
            cols["tokens"].append(np.diff(meta["offsets"]) + 1)
            cols["chars"].append(meta["chars"])
            cols["bytes"].append(meta["bytes"])
            cols["compare"].append(meta["compare"].reshape(n, n_compare))
            units.append(unit)
    empty = {"compare": np.zeros((0, n_compare), dtype=np.int64)}
    arrays = {k: (np.concatenate(v) if v else empty.get(k, np.zeros(0, dtype=np.int64))) for k, v in cols.items()}
    return DocTable(units=units, **arrays)


def _rng(seed: int, *keys: int) -> np.random.Generator:
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
        order = docs[_rng(config.seed, 1, _lang_key(language)).permutation(len(docs))]
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


def select_training(table: DocTable, plan: Plan, train_mask: np.ndarray, seed: int) -> np.ndarray:
    """Rows of the training documents, repeated per the plan's epochs, then shuffled together."""
    picked = []
    for index, source in enumerate(plan.sources):
        docs = np.flatnonzero((table.source == index) & train_mask)
        target, total, epoch = source.target_tokens, 0, 0
        while docs.size and total < target:
            order = docs[_rng(seed, 2, index, epoch).permutation(len(docs))]
            cum = total + np.cumsum(table.tokens[order])
            # Take documents while that brings the total nearer the target (overshoot at most half a document).
            take = int(np.searchsorted(cum - table.tokens[order] / 2, target, side="right"))
            picked.append(order[:take])
            total = int(cum[take - 1]) if take else total
            if take < len(order):
                break
            epoch += 1
    rows = np.concatenate(picked) if picked else np.zeros(0, dtype=np.int64)
    return rows[_rng(seed, 3).permutation(len(rows))]


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


@lru_cache(maxsize=256)
def _unit_token_map(work_dir: str, stem: str) -> np.ndarray:
    return np.load(Path(work_dir) / "units" / f"{stem}.tokens.npy", mmap_mode="r", allow_pickle=False)


def _shard_bytes(work_dir: str, stems: list[str], units: np.ndarray, starts: np.ndarray, lengths: np.ndarray,
                 bos: int, dtype: str) -> bytes:
    """A shard's bytes: each document's BOS then its tokens, read from the memory-mapped units."""
    tokens = np.empty(int(lengths.sum()), dtype=np.uint32)
    at = 0
    for u, start, n in zip(units.tolist(), starts.tolist(), lengths.tolist(), strict=True):
        tokens[at] = bos
        tokens[at + 1:at + n] = _unit_token_map(work_dir, stems[u])[start:start + n - 1]
        at += n
    return encode_shard(tokens, dtype)


def _write_job(out_dir: str, work_dir: str, stems: list[str], file: str, units: np.ndarray, starts: np.ndarray,
               lengths: np.ndarray, bos: int, dtype: str) -> tuple[str, str]:
    data = _shard_bytes(work_dir, stems, units, starts, lengths, bos, dtype)
    atomic_write_bytes(Path(out_dir) / file, data)
    return file, hashlib.sha256(data).hexdigest()


def _layout_hash(jobs: list[ShardJob], table: DocTable) -> str:
    h = hashlib.sha256()
    for job in jobs:
        h.update(job.file.encode())
        h.update(table.unit[job.docs].tobytes())
        h.update(table.row[job.docs].tobytes())
    return h.hexdigest()


def write_shards(jobs: list[ShardJob], table: DocTable, out_dir: Path, work_dir: Path, tok: TokenizerInfo,
                 dtype: str, *, workers: int = 1, progress: bool = True) -> dict[str, str]:
    """Write every shard not already recorded in ``pack.json``; returns ``{file: sha256}`` for all of them."""
    progress_path = work_dir / PACK_PROGRESS
    layout = _layout_hash(jobs, table)
    done: dict[str, str] = {}
    if progress_path.exists():
        saved = json.loads(progress_path.read_text(encoding="utf-8"))
        if saved["layout"] == layout:
            done = {f: sha for f, sha in saved["done"].items() if _intact(out_dir / f)}
    todo = [j for j in jobs if j.file not in done]
    stems = [u.stem for u in table.units]
    args = [(str(out_dir), str(work_dir), stems, j.file, table.unit[j.docs], table.start[j.docs], table.tokens[j.docs],
             tok.bos_id, dtype) for j in todo]
    bar = tqdm(total=int(sum(table.tokens[j.docs].sum() for j in jobs)), desc="shards", unit="tok", unit_scale=True,
               disable=not progress, dynamic_ncols=True)
    bar.update(int(sum(table.tokens[j.docs].sum() for j in jobs if j.file in done)))
    sizes = {j.file: int(table.tokens[j.docs].sum()) for j in jobs}

    def record(file: str, sha: str) -> None:
        done[file] = sha
        atomic_write_bytes(progress_path, json.dumps({"layout": layout, "done": done}, indent=1).encode())
        bar.update(sizes[file])

    try:
        if workers > 1 and len(todo) > 1:
            with mp.get_context("spawn").Pool(min(workers, len(todo))) as pool:
                for file, sha in pool.imap(_star_write_job, args):
                    record(file, sha)
        else:
            for a in args:
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


def prepare(config: BuildConfig, work_dir: Path, *, workers: int = 1, progress: bool = True) -> Prepared:
    """Ingest the sources (resuming), hold out validation documents and plan the training mixture."""
    sources = parse_sources(config.sources)
    if config.mix is not None:
        check_languages(config.mix, {s.lang for s in sources})
    tok = load_tokenizer(config.ingest.tokenizer, config.ingest.tokenizer_dir)
    info = tokenizer_info(tok, config.ingest.tokenizer)
    if work_dir.exists():
        _remove_stale_temp_files(work_dir, work_dir / "units")
    states = ingest(sources, config.ingest, work_dir, tok.fingerprint, workers=workers, progress=progress)
    table = doc_table(work_dir, states, len(config.ingest.compare_tokenizers))
    val = hold_out_validation(table, states, config)
    train_mask = _train_mask(table, val)
    supply = []
    for i, (source, state) in enumerate(zip(sources, states, strict=True)):
        docs = (table.source == i) & train_mask
        supply.append(SourceSupply(source_name(source), state.language, int(docs.sum()), int(table.tokens[docs].sum())))
    plan = plan_mixture(supply, config.tokens, mix=config.mix, temperature=config.temperature,
                        max_epochs=config.max_epochs)
    return Prepared(sources, states, table, val, plan, info, tok.name)


def _check_existing(out_dir: Path, info: TokenizerInfo, args: dict, append: bool) -> Manifest | None:
    if not (out_dir / MANIFEST_NAME).exists():
        return None
    existing = Manifest.load(out_dir)
    if existing.tokenizer.sha256 != info.sha256:
        raise BuildError(
            f"{out_dir / MANIFEST_NAME}: its shards were made with tokenizer {existing.tokenizer.spec} "
            f"(sha256 {existing.tokenizer.sha256[:12]}), not {info.spec} (sha256 {info.sha256[:12]}); token ids of "
            f"two tokenizers cannot share a shard set. Use another --out, or the manifest's tokenizer")
    current = {k: v for k, v in existing.arguments.items() if k != "previous"}
    if not append and current != args:
        raise BuildError(f"{out_dir} already holds a shard set built with other arguments; "
                         f"pass --append to add these shards to it, or choose another --out")
    return existing


def build(config: BuildConfig, out_dir: str | Path, *, append: bool = False, workers: int = 1,
          keep_work: bool = False, progress: bool = True) -> tuple[Manifest, Prepared | None]:
    """Build (or finish building) the shard set in ``out_dir``; returns its manifest and what was prepared.

    A second run of a finished build returns the manifest and ``None`` without doing anything.
    """
    out_dir = Path(out_dir)
    out_dir.mkdir(parents=True, exist_ok=True)
    args = arguments(config)
    tok = load_tokenizer(config.ingest.tokenizer, config.ingest.tokenizer_dir)
    info = tokenizer_info(tok, config.ingest.tokenizer)
    existing = _check_existing(out_dir, info, args, append)
    if existing is not None and {k: v for k, v in existing.arguments.items() if k != "previous"} == args:
        return existing, None
    work_dir = out_dir / WORK_DIR
    _remove_stale_temp_files(out_dir)
    prepared = prepare(config, work_dir, workers=workers, progress=progress)
    table = prepared.table
    train_rows = select_training(table, prepared.plan, _train_mask(table, prepared.val), config.seed)
    old_shards = existing.shards if existing else []
    jobs = shard_jobs(train_rows, prepared.val, table, config.shard_tokens, old_shards)
    dtype = dtype_for_vocab(info.vocab_size)
    if existing is not None and existing.dtype != dtype:
        raise BuildError(f"{out_dir}: existing shards are {existing.dtype}, this tokenizer needs {dtype}")
    hashes = write_shards(jobs, table, out_dir, work_dir, info, dtype, workers=workers, progress=progress)
    languages = [s.language for s in prepared.states]
    new_shards = [_shard_info(j, table, languages, hashes[j.file]) for j in jobs]
    sources = [_source_record(src, state) for src, state in zip(prepared.sources, prepared.states, strict=True)]
    manifest = Manifest(
        tokenizer=info, dtype=dtype, shards=old_shards + new_shards, seed=config.seed,
        sources=(existing.sources if existing else []) + sources,
        filters={"clean": asdict(config.ingest.clean), "dedup": asdict(config.ingest.dedup),
                 "bad_utf8": config.ingest.bad_utf8},
        plan=prepared.plan.to_dict() | ({"previous": existing.plan} if existing else {}),
        arguments=args | ({"previous": existing.arguments} if existing else {}),
    )
    for s in new_shards:
        dtype_found, count = read_header(out_dir / s.file)
        if dtype_found != dtype or count != s.tokens:
            raise ShardError(f"{out_dir / s.file}: wrote {count} {dtype_found} tokens, expected {s.tokens} {dtype}")
    manifest.save(out_dir)
    write_report(out_dir, manifest, new_shards, prepared, train_rows, config)
    if not keep_work:
        shutil.rmtree(work_dir, ignore_errors=True)
    return manifest, prepared


def _remove_stale_temp_files(*directories: Path) -> None:
    """Temp files that a killed ``atomic_write_bytes`` left behind (never a committed file)."""
    for directory in directories:
        for path in directory.glob(".*.tmp"):
            path.unlink(missing_ok=True)


def _train_mask(table: DocTable, val: dict[str, np.ndarray]) -> np.ndarray:
    mask = np.ones(len(table.tokens), dtype=bool)
    for rows in val.values():
        mask[rows] = False
    return mask


def _source_record(source: TextSource, state: SourceIngest) -> dict:
    return {"name": state.name, "language": state.language, "spec": source.spec, "field": source.field,
            "config": source.config, "split": source.split, "counters": dict(sorted(state.counters.items()))}


def plan_only(config: BuildConfig, out_dir: str | Path | None, *, workers: int = 1, progress: bool = True) -> Prepared:
    """Ingest and plan without writing shards; with ``out_dir`` the ingest is kept for a later build there."""
    if out_dir is not None:
        return prepare(config, Path(out_dir) / WORK_DIR, workers=workers, progress=progress)
    with tempfile.TemporaryDirectory(prefix="corpus-plan-") as tmp:
        return prepare(config, Path(tmp), workers=workers, progress=progress)
