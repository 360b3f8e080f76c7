"""The ingest as datatrove pipeline steps: read -> canonical form, cleaning, filters -> tokenize and store ->
MinHash signatures (datatrove's first MinHash stage); :func:`pipelines` puts them together, with datatrove's
bucket stage after them.

One task runs the four steps over its partition of the sources (``corpus.read.sources.partition``) and leaves, in
the work folder: ``docs/RANK.tokens`` (the documents' token ids, uint32, no BOS, back to back),
``docs/RANK.meta.npz`` (per document: canonical id, source, token count, characters, UTF-8 bytes, exact-dedup
key, comparison token counts; in the order the signature step numbers them), ``counters/RANK.STEP.json``
(what reading and cleaning counted per source) and datatrove's signature files. Nothing here is decided
across tasks; duplicates are decided later from these files (``corpus.quality.dedup``).
"""

from __future__ import annotations

import io
import json
from array import array
from collections import Counter
from collections.abc import Iterator

import numpy as np
from datatrove.data import Document, DocumentsPipeline
from datatrove.io import get_datafolder
from datatrove.pipeline.base import PipelineStep
from datatrove.pipeline.dedup.minhash import MinhashDedupBuckets, MinhashDedupSignature
from datatrove.utils.typeshelper import StatHints
from datatrove.utils.word_tokenizers import WordTokenizer

from corpus.config import IngestConfig
from corpus.engine.faults import kill_or_pause_if_asked
from corpus.engine.progress import TaskProgress
from corpus.quality.clean import ngram_hashes, words
from corpus.quality.dedup import DedupConfig, minhash_config
from corpus.quality.filters import CleanConfig, clean_and_filter_batch
from corpus.read.sources import partition
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
_MERSENNE_PRIME = np.uint64((1 << 61) - 1)  # datatrove's modulus for its 64-bit universal hashing
_SHIFT = np.uint64(61)


def _write_counters(work_url: str, rank: int, step: str, counters: list[Counter]) -> None:
    with get_datafolder(work_url).open(f"counters/{rank:05d}.{step}.json", "w") as f:
        json.dump([dict(c) for c in counters], f, sort_keys=True)


class ReadSources(PipelineStep):
    """Reader: the task's partition of every source, as datatrove documents in canonical order."""

    type = "📖 - READER"
    name = "sources"

    def __init__(self, sources: list[TextSource], work_url: str, *, unit_docs: int, max_chars: int | None,
                 bad_utf8: str, min_language_score: float | None):
        super().__init__()
        self.sources, self.work_url = sources, work_url
        self.unit_docs, self.max_chars, self.bad_utf8 = unit_docs, max_chars, bad_utf8
        self.min_language_score = min_language_score

    def run(self, data: DocumentsPipeline = None, rank: int = 0, world_size: int = 1) -> DocumentsPipeline:
        counters = [Counter() for _ in self.sources]
        progress = TaskProgress(self.work_url, "ingest", rank)
        for doc in partition(self.sources, rank, world_size, unit_docs=self.unit_docs, max_chars=self.max_chars,
                             bad_utf8=self.bad_utf8, min_language_score=self.min_language_score, counters=counters):
            progress.add(1, doc.n_bytes, doc.done)
            yield Document(text=doc.text, id=str(doc.uid), metadata={"source": doc.source, "uid": doc.uid})
        self.stat_update("documents", value=progress.documents)  # once: per document it costs as much as reading
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

    def _batch(self, docs: list[Document], counters: list[Counter]) -> Iterator[Document]:
        source = docs[0].metadata["source"]
        for doc, kept in zip(docs, clean_and_filter_batch([d.text for d in docs], self.languages[source],
                                                          self.clean, counters[source]), strict=True):
            if kept is None:
                self.stat_update("dropped")
                continue
            doc.text = kept.text
            doc.metadata["key"] = kept.words.key
            doc.metadata["grams"] = (kept.grams if self.dedup_ngram == self.clean.ngram
                                     else ngram_hashes(kept.words.hashes, self.dedup_ngram))
            yield doc

    def run(self, data: DocumentsPipeline = None, rank: int = 0, world_size: int = 1) -> DocumentsPipeline:
        counters = [Counter() for _ in self.languages]
        for batch in _batches(data, BATCH_DOCS, BATCH_CHARS, by_source=True):
            yield from self._batch(batch, counters)
        _write_counters(self.work_url, rank, "clean", counters)


def _npz_bytes(**arrays: np.ndarray) -> bytes:
    buf = io.BytesIO()
    np.savez(buf, **arrays)
    return buf.getvalue()


class TokenizeAndStore(PipelineStep):
    """Tokenize (and count with the comparison tokenizers), append the tokens to the task's token file, keep
    the per-document metadata, and pass every document on to the signature step."""

    type = "🔢 - TOKENIZER"
    name = "tokenize"

    def __init__(self, tokenizer: str, tokenizer_dir: str | None, compare: list[str], work_url: str):
        super().__init__()
        self.tokenizer, self.tokenizer_dir, self.compare, self.work_url = tokenizer, tokenizer_dir, compare, work_url

    def run(self, data: DocumentsPipeline = None, rank: int = 0, world_size: int = 1) -> DocumentsPipeline:
        from fertility.tokenizers import load_tokenizer, one_thread

        tok = load_tokenizer(self.tokenizer, self.tokenizer_dir)
        compare = [load_tokenizer(spec, self.tokenizer_dir) for spec in self.compare]
        meta: dict[str, list] = {k: [] for k in ("uid", "source", "tokens", "chars", "bytes", "keys", "compare")}
        folder = get_datafolder(self.work_url)
        # A task owns one core (tasks = cores locally, one CPU per task on Ray): the tokenizer encodes on this
        # thread, between the cleaning of one batch and the next, rather than in a pool beside it.
        with one_thread(), folder.open(f"docs/{rank:05d}.tokens", "wb") as out:
            for batch in _batches(data, BATCH_DOCS, BATCH_CHARS):
                texts = [d.text for d in batch]
                ids = tok.encode_ids(texts)
                counts = [[len(x) for x in c.encode_ids(texts)] for c in compare]
                yield from self._store(batch, ids, counts, out, meta)
        arrays = {k: np.array(v, dtype=np.int64) for k, v in meta.items() if k not in ("keys", "compare")}
        arrays["keys"] = np.frombuffer(b"".join(meta["keys"]), dtype=np.uint8).reshape(-1, 16)
        arrays["compare"] = np.array(meta["compare"], dtype=np.int64).reshape(len(meta["uid"]), len(compare))
        with folder.open(f"docs/{rank:05d}.meta.npz", "wb") as f:
            f.write(_npz_bytes(**arrays))

    def _store(self, docs: list[Document], ids: list[list[int]], counts: list[list[int]], out,
               meta: dict[str, list]) -> Iterator[Document]:
        flat = array("I")  # array.extend converts each list in C: faster than np.fromiter over a chain
        for tokens in ids:
            flat.extend(tokens)
        out.write(np.frombuffer(flat, dtype=np.uint32).astype("<u4", copy=False).tobytes())
        for i, (doc, tokens) in enumerate(zip(docs, ids, strict=True)):
            meta["uid"].append(doc.metadata["uid"])
            meta["source"].append(doc.metadata["source"])
            meta["tokens"].append(len(tokens))
            meta["chars"].append(len(doc.text))
            meta["bytes"].append(len(doc.text.encode("utf-8")))
            meta["keys"].append(doc.metadata.pop("key"))
            meta["compare"].append([c[i] for c in counts])
            yield doc
        self.stat_update("tokens", value=sum(len(x) for x in ids))


def _batches(data: DocumentsPipeline, size: int, chars: int, *,
             by_source: bool = False) -> Iterator[list[Document]]:
    """``data`` in order, in lists of at most ``size`` documents, each ended by the document that brings it to
    ``chars`` characters or more (so under ``chars`` plus one document); with ``by_source``, each of one source.
    The limits are arguments, read by the caller when it starts, so that a test can change the module's."""
    batch: list[Document] = []
    held = 0
    for doc in data:
        if by_source and batch and batch[0].metadata["source"] != doc.metadata["source"]:
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
    datatrove's bucket files in its record format, one array per bucket; datatrove's own ``run`` then finds the
    complete files and sorts them as always. (Its loop packs every document's signature with ``struct``, bucket
    by bucket: a third of this stage's time.)
    """

    def __init__(self, output_folder: str, dedup: DedupConfig):
        # skip_existing_sigs: datatrove's run must sort the files this step has just written, not write them again.
        super().__init__(output_folder, minhash_config(dedup), language=_Words(), skip_existing_sigs=True)

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

    def run(self, data: DocumentsPipeline, rank: int = 0, world_size: int = 1):
        config = self.config
        per_bucket = config.hashes_per_bucket
        # datatrove's record: the bucket's hashes, then the document's index in the task (struct "<{n}QI")
        record = np.dtype([("hashes", np.dtype(config.hash_config.np_dtype).newbyteorder("<"), (per_bucket,)),
                           ("doc", "<u4")])
        with self.track_time():
            files = [self.output_folder.open(f"bucket_{bi:03d}/{rank:05d}.minhash.sig", mode="wb")
                     for bi in range(config.num_buckets)]
            n_docs = 0
            for batch in _batches(data, BATCH_DOCS, BATCH_CHARS):
                docs, rows = self.signatures([doc.metadata.pop("grams") for doc in batch])
                records = np.empty(len(docs), dtype=record)
                records["doc"] = n_docs + docs
                for bi, f in enumerate(files):
                    records["hashes"] = rows[:, bi * per_bucket:(bi + 1) * per_bucket]
                    f.write(records.tobytes())
                self.stat_update(StatHints.total, value=len(batch))
                n_docs += len(batch)
            for f in files:
                f.close()
        super().run(iter(()), rank, world_size)


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
    store -> signatures, the last without near dedup), and datatrove's bucket stage over the signatures."""
    ingest = [
        FaultPoint("ingest"),
        ReadSources(sources, stage_url, unit_docs=config.unit_docs, max_chars=config.max_chars,
                    bad_utf8=config.bad_utf8, min_language_score=config.min_language_score),
        CleanAndFilter([s.lang for s in sources], config.clean, config.dedup.ngram, stage_url),
        TokenizeAndStore(config.tokenizer, config.tokenizer_dir, list(config.compare_tokenizers), stage_url),
    ] + ([Signatures(f"{stage_url}/minhash/signatures", config.dedup)] if config.dedup.near else [])
    buckets = [FaultPoint("buckets"),
               MinhashDedupBuckets(f"{stage_url}/minhash/signatures", f"{stage_url}/minhash/buckets",
                                   config=minhash_config(config.dedup))]
    return ingest, buckets
