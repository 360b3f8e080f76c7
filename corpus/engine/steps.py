"""The ingest as datatrove pipeline steps: read -> canonical form, cleaning, filters -> tokenize and store ->
MinHash signatures (datatrove's first MinHash stage); :func:`pipelines` puts them together, with datatrove's
bucket stage after them.

One task runs the four steps over its partition of the sources (``corpus.read.sources.partition``) and leaves, in
the work folder: ``docs/RANK.tokens`` (the documents' token ids, uint32, no BOS, back to back),
``docs/RANK.meta.npz`` (per document: canonical id, source, token count, characters, UTF-8 bytes, exact-dedup
key, comparison token counts; in the order the signature step numbers them), ``counters/RANK.STEP.json``
(what reading and cleaning counted per source; the CPU seconds the task spent in its tokenizers, kept with
``--keep-work`` for ``benchmarks/bench_corpus.py``) and datatrove's signature files. Nothing here is decided
across tasks; duplicates are decided later from these files (``corpus.quality.dedup``).
"""

from __future__ import annotations

import io
import json
import time
from array import array
from collections import Counter
from collections.abc import Iterable, Iterator
from dataclasses import dataclass, field

import numpy as np
from datatrove.data import DocumentsPipeline
from datatrove.io import get_datafolder
from datatrove.pipeline.base import PipelineStep
from datatrove.pipeline.dedup.minhash import MinhashDedupSignature
from datatrove.utils.typeshelper import StatHints
from datatrove.utils.word_tokenizers import WordTokenizer

from corpus.config import IngestConfig
from corpus.engine.buckets import Buckets
from corpus.engine.faults import kill_or_pause_if_asked
from corpus.engine.progress import TaskProgress
from corpus.quality.clean import ngram_hashes, words
from corpus.quality.dedup import DedupConfig, minhash_config
from corpus.quality.filters import CleanConfig, clean_and_filter_batch
from corpus.read.sources import RawDocument, partition
from fertility.text import TextSource

BATCH_DOCS = 256  # documents cleaned / tokenized together (batched calls are much faster than one by one)
# ... and at most about this many characters: a batch is handed on once it holds BATCH_DOCS documents or
# BATCH_CHARS characters, whichever comes first, so it is at most BATCH_CHARS plus one document. The batched
# passes hold several numbers per character at once (int64 code points and word positions, uint64 word and
# n-gram hashes, the tokenizer's ids as Python ints): counting documents alone let 256 pieces of a long
# document (up to 2 MiB each) cost gigabytes where 256 ordinary documents cost megabytes. About 256 documents
# of 1,000 characters: ordinary batches stay as they were, and the 50 MB document of
# benchmarks/bench_long_record.py peaked at 3.8 GB with no cap, 590 MB at 2**20 and 428 MB at this (ordinary
# lines of the same text: 363 MB; 2**16 gained nothing, one piece alone being ~400,000 characters).
BATCH_CHARS = 1 << 18
# Shingles per block of the batched MinHash: its temporaries (block x hashes uint64, ~0.5 MB) stay in a core's
# cache (16,384 rows took twice the time).
SIGNATURE_BLOCK_ROWS = 1024
# Signature records gathered at a time when a band's file is ordered and rewritten (about 6 MB).
WRITE_BLOCK_RECORDS = 1 << 16
_MERSENNE_PRIME = np.uint64((1 << 61) - 1)  # datatrove's modulus for its 64-bit universal hashing
_SHIFT = np.uint64(61)


def _write_counters(work_url: str, rank: int, step: str, counters: list[Counter]) -> None:
    with get_datafolder(work_url).open(f"counters/{rank:05d}.{step}.json", "w") as f:
        json.dump([dict(c) for c in counters], f, sort_keys=True)


@dataclass
class Docs:
    """Documents of one source that travel between the steps together: at most ``BATCH_DOCS`` of them, and
    under ``BATCH_CHARS`` characters before the last. Each step works over the whole batch (the cleaning's
    numpy passes, the tokenizer's batch encode, the signatures' matrix), and no step touches a document alone:
    handing datatrove ``Document`` objects on one at a time cost more than a second of the 1-task build on the
    shipped data (generators, per-document metadata, re-batching in each step)."""

    source: int
    uids: list[int]
    texts: list[str]
    keys: list[bytes] = field(default_factory=list)  # exact-dedup keys, from cleaning
    grams: list[np.ndarray] = field(default_factory=list)  # MinHash shingles, from cleaning

    def __len__(self) -> int:
        return len(self.texts)


class ReadSources(PipelineStep):
    """Reader: the task's partition of every source, in canonical order, as batches of one source."""

    type = "📖 - READER"
    name = "sources"

    def __init__(self, sources: list[TextSource], work_url: str, *, unit_docs: int, max_chars: int | None,
                 bad_utf8: str, min_language_score: float | None):
        super().__init__()
        self.sources, self.work_url = sources, work_url
        self.unit_docs, self.max_chars, self.bad_utf8 = unit_docs, max_chars, bad_utf8
        self.min_language_score = min_language_score

    def run(self, data: DocumentsPipeline = None, rank: int = 0, world_size: int = 1) -> Iterator[Docs]:
        counters = [Counter() for _ in self.sources]
        progress = TaskProgress(self.work_url, "ingest", rank)
        documents = partition(self.sources, rank, world_size, unit_docs=self.unit_docs, max_chars=self.max_chars,
                              bad_utf8=self.bad_utf8, min_language_score=self.min_language_score, counters=counters)
        for batch in _batches(documents, BATCH_DOCS, BATCH_CHARS):
            progress.add(len(batch), sum(d.n_bytes for d in batch), batch[-1].done)
            yield Docs(batch[0].source, [d.uid for d in batch], [d.text for d in batch])
        self.stat_update("documents", value=progress.documents)
        progress.done = 1.0
        progress.flush()
        _write_counters(self.work_url, rank, "read", counters)


class CleanAndFilter(PipelineStep):
    """The canonical form and cleaning (``corpus.quality.clean``), then the quality filters (``corpus.quality.filters``), in batches
    of one source."""

    type = "🔻 - FILTER"
    name = "clean"

    def __init__(self, languages: list[str], clean: CleanConfig, dedup_ngram: int, work_url: str):
        super().__init__()
        self.languages, self.clean, self.dedup_ngram, self.work_url = languages, clean, dedup_ngram, work_url

    def run(self, data: Iterable[Docs] = None, rank: int = 0, world_size: int = 1) -> Iterator[Docs]:
        counters = [Counter() for _ in self.languages]
        for docs in data:
            cleaned = clean_and_filter_batch(docs.texts, self.languages[docs.source], self.clean,
                                             counters[docs.source])
            kept = [i for i, c in enumerate(cleaned) if c is not None]
            self.stat_update("dropped", value=len(docs) - len(kept))
            if kept:
                yield Docs(docs.source, [docs.uids[i] for i in kept], [cleaned[i].text for i in kept],
                           [cleaned[i].words.key for i in kept],
                           [cleaned[i].grams if self.dedup_ngram == self.clean.ngram
                            else ngram_hashes(cleaned[i].words.hashes, self.dedup_ngram) for i in kept])
        _write_counters(self.work_url, rank, "clean", counters)


def _npz_bytes(**arrays: np.ndarray) -> bytes:
    buf = io.BytesIO()
    np.savez(buf, **arrays)
    return buf.getvalue()


class TokenizeAndStore(PipelineStep):
    """Tokenize (and count with the comparison tokenizers), append the tokens to the task's token file, keep
    the per-document metadata, and pass every batch on to the signature step."""

    type = "🔢 - TOKENIZER"
    name = "tokenize"

    def __init__(self, tokenizer: str, tokenizer_dir: str | None, compare: list[str], work_url: str):
        super().__init__()
        self.tokenizer, self.tokenizer_dir, self.compare, self.work_url = tokenizer, tokenizer_dir, compare, work_url

    def run(self, data: Iterable[Docs] = None, rank: int = 0, world_size: int = 1) -> Iterator[Docs]:
        from fertility.tokenizers import load_tokenizer, one_thread

        tok = load_tokenizer(self.tokenizer, self.tokenizer_dir)
        compare = [load_tokenizer(spec, self.tokenizer_dir) for spec in self.compare]
        # per document read (kept or not), so in compact arrays: Python lists of ints cost ~125 bytes a document
        meta: dict[str, array | bytearray] = {k: array("q") for k in ("uid", "source", "tokens", "chars", "bytes",
                                                                      "compare")}
        meta["keys"] = bytearray()
        folder = get_datafolder(self.work_url)
        encoding = 0.0  # this thread's CPU seconds in the tokenizers: what a build costs beyond tokenization
        # A task owns one core (tasks = cores locally, one CPU per task on Ray): the tokenizer encodes on this
        # thread, between the cleaning of one batch and the next, rather than in a pool beside it.
        with one_thread(), folder.open(f"docs/{rank:05d}.tokens", "wb") as out:
            for docs in data:
                start = time.thread_time()
                ids = tok.encode_ids(docs.texts)
                counts = [[len(x) for x in c.encode_ids(docs.texts)] for c in compare]
                encoding += time.thread_time() - start
                self._store(docs, ids, counts, out, meta)
                docs.keys = []
                yield docs
        arrays = {k: np.frombuffer(v, dtype=np.int64) for k, v in meta.items() if k not in ("keys", "compare")}
        arrays["keys"] = np.frombuffer(meta["keys"], dtype=np.uint8).reshape(-1, 16)
        arrays["compare"] = np.frombuffer(meta["compare"], dtype=np.int64).reshape(len(meta["uid"]), len(compare))
        with folder.open(f"docs/{rank:05d}.meta.npz", "wb") as f:
            f.write(_npz_bytes(**arrays))
        with folder.open(f"counters/{rank:05d}.tokenize.json", "w") as f:
            json.dump({"tokenizer_cpu_seconds": encoding}, f)

    def _store(self, docs: Docs, ids: list[list[int]], counts: list[list[int]], out,
               meta: dict[str, array | bytearray]) -> None:
        flat = array("I")  # array.extend converts each list in C: faster than np.fromiter over a chain
        for tokens in ids:
            flat.extend(tokens)
        out.write(np.frombuffer(flat, dtype=np.uint32).astype("<u4", copy=False).tobytes())
        meta["uid"].extend(docs.uids)
        meta["source"].extend([docs.source] * len(docs))
        meta["tokens"].extend([len(tokens) for tokens in ids])
        meta["chars"].extend([len(text) for text in docs.texts])
        meta["bytes"].extend([len(text.encode("utf-8")) for text in docs.texts])
        meta["keys"] += b"".join(docs.keys)
        for row in zip(*counts, strict=True):  # a document's counts, one per comparison tokenizer
            meta["compare"].extend(row)
        self.stat_update("tokens", value=len(flat))


def _batches(documents: Iterable[RawDocument], size: int, chars: int) -> Iterator[list[RawDocument]]:
    """``documents`` in order, in lists of one source and at most ``size`` documents, each ended by the document
    that brings it to ``chars`` characters or more (so under ``chars`` plus one document). The limits are
    arguments, read by the caller when it starts, so that a test can change the module's."""
    batch: list[RawDocument] = []
    held = 0
    for doc in documents:
        if batch and batch[0].source != doc.source:
            yield batch
            batch, held = [], 0
        batch.append(doc)
        held += len(doc.text)
        if len(batch) >= size or held >= chars:
            yield batch
            batch, held = [], 0
    if batch:
        yield batch


class _Words(WordTokenizer):
    """Our word split (``corpus.quality.clean.words``), so that datatrove needs no language-specific tokenizer."""

    def word_tokenize(self, text: str) -> list[str]:
        return words(text)

    def sent_tokenize(self, text: str) -> list[str]:
        return [text]

    def span_tokenize(self, text: str) -> list[tuple[int, int]]:
        return [(0, len(text))]


class Signatures(MinhashDedupSignature):
    """datatrove's MinHash stage 1 over our word n-gram hashes (the ones the repetition filter computed).

    A batch's signatures are computed in one numpy pass (datatrove's formula, value for value) and written to
    datatrove's bucket files in its record format, one array per bucket (datatrove's loop packs every
    document's signature with ``struct``, bucket by bucket: a third of this stage's time); each file is then
    sorted as datatrove sorts it, by hashes then document (:func:`sorted_order`).
    """

    def __init__(self, output_folder: str, dedup: DedupConfig):
        super().__init__(output_folder, minhash_config(dedup), language=_Words())

    def signatures(self, grams: list[np.ndarray]) -> tuple[np.ndarray, np.ndarray]:
        """datatrove's ``get_signature`` of the batch's documents that have shingles: their indices in the batch,
        and their signatures, one row of ``num_hashes`` values (the configured dtype) each. The same uint64
        arithmetic (wrapping products, then mod 2**61 - 1, here without division) over all shingles at once, in
        blocks of rows, and the minimum per document with ``np.minimum.reduceat``."""
        a, b = self.parameters
        sizes = np.array([len(g) for g in grams])
        nonempty = np.flatnonzero(sizes)
        dtype = self.config.hash_config.np_dtype
        if not len(nonempty):
            return nonempty, np.zeros((0, a.shape[1]), dtype=dtype)
        shingles = np.concatenate([grams[i] for i in nonempty]).astype(np.uint64)
        starts = np.concatenate(([0], np.cumsum(sizes[nonempty])[:-1]))
        ends = np.append(starts[1:], len(shingles))
        mins = np.empty((len(nonempty), a.shape[1]), dtype=np.uint64)
        mask = self.config.hash_config.max if self.config.hash_config.precision == 32 else None
        doc = 0
        while doc < len(nonempty):
            # Whole documents, about SIGNATURE_BLOCK_ROWS shingles at a time, so the temporary matrix stays small.
            last = max(doc + 1, int(np.searchsorted(starts, starts[doc] + SIGNATURE_BLOCK_ROWS, side="right")))
            lo, hi = int(starts[doc]), int(ends[last - 1])
            phv = shingles[lo:hi, None] * a
            phv += b
            # x mod (2**61 - 1) without a division: 2**61 = 1 modulo the prime, so x = (x >> 61) + (x & prime)
            # (below 2**61 + 8), less the prime once where that is still >= the prime (else x - prime wraps
            # around to a larger number, and the minimum keeps x).
            high = phv >> _SHIFT
            phv &= _MERSENNE_PRIME
            phv += high
            np.minimum(phv, phv - _MERSENNE_PRIME, out=phv)
            if mask is not None:
                phv = np.bitwise_and(phv, mask)
            mins[doc:last] = np.minimum.reduceat(phv, starts[doc:last] - lo, axis=0)
            doc = last
        return nonempty, mins.astype(dtype)

    def run(self, data: Iterable[Docs], rank: int = 0, world_size: int = 1):
        config = self.config
        per_bucket = config.hashes_per_bucket
        # datatrove's record: the bucket's hashes, then the document's index in the task (struct "<{n}QI")
        record = np.dtype([("hashes", np.dtype(config.hash_config.np_dtype).newbyteorder("<"), (per_bucket,)),
                           ("doc", "<u4")])
        with self.track_time():
            files = [self.output_folder.open(f"bucket_{bi:03d}/{rank:05d}.minhash.sig", mode="wb")
                     for bi in range(config.num_buckets)]
            n_docs = 0
            for batch in data:
                docs, rows = self.signatures(batch.grams)
                batch.grams = []
                records = np.empty(len(docs), dtype=record)
                records["doc"] = n_docs + docs
                for bi, f in enumerate(files):
                    records["hashes"] = rows[:, bi * per_bucket:(bi + 1) * per_bucket]
                    f.write(records.tobytes())
                self.stat_update(StatHints.total, value=len(batch))
                n_docs += len(batch)
            for f in files:
                f.close()
            for bi in range(config.num_buckets):
                path = f"bucket_{bi:03d}/{rank:05d}.minhash.sig"
                with self.output_folder.open(path, "rb") as f:
                    records = np.frombuffer(f.read(), dtype=record)
                order = sorted_order(records)
                # written a block at a time: a sorted copy of the whole file beside it doubled the task's peak
                with self.output_folder.open(path, "wb") as f:
                    for lo in range(0, len(order), WRITE_BLOCK_RECORDS):
                        f.write(records[order[lo:lo + WRITE_BLOCK_RECORDS]].tobytes())
                del records, order


def sorted_order(records: np.ndarray) -> np.ndarray:
    """The order of signature records (fields ``hashes`` and ``doc``) that datatrove's sort gives: by their
    hashes, then document. Sorted by the first hash alone, then only the runs that tie on it and are not yet in
    order by all fields: first hashes are 61-bit values that rarely tie, and datatrove's sort over every field
    (a structured sort) took 5 times as long. Runs of copies (every hash equal) come from the step in document
    order and stay as the stable sort leaves them: sorting those too took most of the step on input with many
    duplicates. Only index arrays and a block of records at a time are made, not a sorted copy of the records."""
    order = np.argsort(records["hashes"][:, 0], kind="stable")
    tied = np.flatnonzero(records["hashes"][order[1:], 0] == records["hashes"][order[:-1], 0])
    if not len(tied):
        return order
    in_order = np.empty(len(tied), dtype=bool)  # each tie already in datatrove's order
    for lo in range(0, len(tied), WRITE_BLOCK_RECORDS):
        at = tied[lo:lo + WRITE_BLOCK_RECORDS]
        a, b = records[order[at]], records[order[at + 1]]
        in_order[lo:lo + len(at)] = (a["hashes"] == b["hashes"]).all(axis=1) & (a["doc"] < b["doc"])
    run = np.cumsum(np.concatenate(([True], np.diff(tied) != 1)))  # the run of equal first hashes of each tie
    rows = np.flatnonzero(np.isin(run, run[~in_order]))  # ties in runs that need sorting
    if len(rows):
        # each such run, from its first tie to the record after its last, ordered within (it stays where it is:
        # the first hash leads the full sort)
        at = np.union1d(tied[rows], tied[rows] + 1)
        runs = records[order[at]]
        order[at] = order[at][np.lexsort((runs["doc"], *runs["hashes"].T[::-1]))]
    return order


class FaultPoint(PipelineStep):
    """A stage's first step: where ``corpus.engine.faults`` can kill a build (tests of resume)."""

    name = "fault point"
    type = "🧪 - TEST"

    def __init__(self, stage: str):
        super().__init__()
        self.stage = stage

    def run(self, data: DocumentsPipeline = None, rank: int = 0, world_size: int = 1) -> DocumentsPipeline:
        kill_or_pause_if_asked(self.stage, rank)
        return data


def pipelines(sources: list[TextSource], config: IngestConfig, stage_url: str) -> tuple[list, list]:
    """The ingest's two pipelines in ``stage_url``: one task's steps (read -> clean and filter -> tokenize and
    store -> signatures, the last without near dedup), and the bucket stage over the signatures."""
    ingest = [
        FaultPoint("ingest"),
        ReadSources(sources, stage_url, unit_docs=config.unit_docs, max_chars=config.max_chars,
                    bad_utf8=config.bad_utf8, min_language_score=config.min_language_score),
        CleanAndFilter([s.lang for s in sources], config.clean, config.dedup.ngram, stage_url),
        TokenizeAndStore(config.tokenizer, config.tokenizer_dir, list(config.compare_tokenizers), stage_url),
    ] + ([Signatures(f"{stage_url}/minhash/signatures", config.dedup)] if config.dedup.near else [])
    buckets = [FaultPoint("buckets"),
               Buckets(f"{stage_url}/minhash/signatures", f"{stage_url}/minhash/buckets", minhash_config(config.dedup))]
    return ingest, buckets
