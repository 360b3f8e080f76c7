"""datatrove's MinHash stage 2 (``MinhashDedupBuckets``) with its merge done in numpy, block by block.

datatrove merges a band's sorted signature files through a heap of Python objects, one record at a time, and
writes a pair for every two neighbours in the merged order whose band is equal: ``(file, doc)`` of the earlier
and of the later, as ``<4I``. That loop was an eighth of a 1-task build's CPU on the shipped data (1.98 of 15.9
s at 1x, ``python -m cProfile -m corpus build ...``), growing with the documents. Here the same order (band
hashes, then file, then document: the fields datatrove's ``HashSig`` compares) is reached by sorting blocks
of records with ``np.lexsort``, and the same pairs are written in the same order, byte for byte
(``tests/corpus/engine/test_buckets.py`` compares the two on random and tied signatures).

Memory stays bounded: each file is read ``BLOCK_RECORDS`` records at a time, and a block of the merge holds the
records whose first hash is below the smallest last-read first hash of the files still open. Records with
equal bands have equal first hashes, so no pair spans two blocks; only a run of one first hash longer than a
block (many documents with one band) makes a block larger.
"""

from __future__ import annotations

import numpy as np
from datatrove.data import DocumentsPipeline
from datatrove.pipeline.dedup.minhash import MinhashDedupBuckets

BLOCK_RECORDS = 1 << 16  # records read from a file at a time (at 5 hashes a band: 2.9 MB)


class _SortedFile:
    """One task's sorted signature file of the band, read in blocks of records."""

    def __init__(self, folder, path: str, record: np.dtype, file_id: int, block: int):
        self._f, self.path = folder.open(path, "rb"), path
        self.record, self.file_id, self.block = record, file_id, block
        self.stem = int(path.rsplit("/", 1)[-1].removesuffix(".minhash.sig"))
        self.held = np.zeros(0, dtype=record)
        self.done = False
        self.read_more()

    def read_more(self) -> None:
        data = self._f.read(self.block * self.record.itemsize)
        if len(data) % self.record.itemsize:
            raise ValueError(f"{self.path}: a partial record (the file is not a whole number of records)")
        if len(data) < self.block * self.record.itemsize:
            self.done = True
            self._f.close()
        if data:
            self.held = np.concatenate([self.held, np.frombuffer(data, dtype=self.record)])

    def first_hashes(self) -> np.ndarray:
        return self.held["hashes"][:, 0]

    def take_below(self, limit: int | None) -> np.ndarray:
        """The held records whose first hash is below ``limit`` (all with None), removed from the held ones."""
        cut = len(self.held) if limit is None else int(np.searchsorted(self.first_hashes(), limit, side="left"))
        taken, self.held = self.held[:cut], self.held[cut:]
        return taken


class Buckets(MinhashDedupBuckets):
    """The pairs of documents equal in a band, as datatrove's stage 2 writes them (one task per band, no index)."""

    def __init__(self, input_folder: str, output_folder: str, config, block_records: int = BLOCK_RECORDS):
        super().__init__(input_folder, output_folder, config=config)
        self.block_records = block_records

    def run(self, data: DocumentsPipeline = None, rank: int = 0, world_size: int = 1):
        if world_size != self.config.num_buckets:
            raise ValueError(f"one task per band: {self.config.num_buckets} tasks, not {world_size}")
        record = np.dtype([("hashes", np.dtype(self.config.hash_config.np_dtype).newbyteorder("<"),
                            (self.config.hashes_per_bucket,)), ("doc", "<u4")])
        with self.track_time():
            paths = self.input_folder.list_files(subdirectory=f"bucket_{rank:03d}")
            files = [_SortedFile(self.input_folder, p, record, i, self.block_records) for i, p in enumerate(paths)]
            with self.output_folder.open(f"{rank:05d}_00.dups", mode="wb") as out:
                while files:
                    out.write(self._block_pairs(files))
                    files = [f for f in files if len(f.held) or not f.done]

    def _block_pairs(self, files: list[_SortedFile]) -> bytes:
        """Take the next block of the merge from ``files`` and return its pairs in datatrove's format."""
        open_files = [f for f in files if not f.done]
        limit = min((int(f.first_hashes()[-1]) for f in open_files if len(f.held)), default=None)
        parts = [(f, f.take_below(limit if open_files else None)) for f in files]
        if not any(len(p) for _, p in parts):
            # Every open file holds only records of the limit's first hash: read on in the one that set it.
            next(f for f in open_files if len(f.held) and int(f.first_hashes()[-1]) == limit).read_more()
            return b""
        for f in open_files:
            if not len(f.held):
                f.read_more()
        records = np.concatenate([p for _, p in parts])
        stems = np.concatenate([np.full(len(p), f.stem, dtype=np.uint32) for f, p in parts])
        ids = np.concatenate([np.full(len(p), f.file_id, dtype=np.int64) for f, p in parts])
        hashes = records["hashes"]
        order = np.lexsort((records["doc"], ids, *hashes.T[::-1]))
        hashes, docs, stems = hashes[order], records["doc"][order], stems[order]
        equal = np.flatnonzero((hashes[1:] == hashes[:-1]).all(axis=1))
        pairs = np.stack([stems[equal], docs[equal], stems[equal + 1], docs[equal + 1]], axis=1)
        self.stat_update("total_matches", value=len(equal))
        return pairs.astype("<u4").tobytes()
