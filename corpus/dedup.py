"""Exact and near-duplicate detection: a hash of a dedup-normalised text, and MinHash LSH from `datasketch`.

Keys and signatures are computed per document (in worker processes); the decision is taken by one
:class:`Deduplicator` that sees documents in corpus order, so the result does not depend on the number of
workers. Its state can be rebuilt from the stored keys and signatures of documents already kept, which is
how a resumed build reaches exactly the state of an uninterrupted one.
"""

from __future__ import annotations

import functools
import hashlib
from dataclasses import dataclass

import numpy as np
from datasketch import LeanMinHash, MinHash

from corpus.clean import ngram_hashes

_MASK32 = np.uint64(0xFFFFFFFF)


@dataclass
class DedupConfig:
    """Near-duplicates: word ``ngram`` shingles, ``num_perm`` MinHash permutations, Jaccard ``threshold``."""

    exact: bool = True
    near: bool = True
    threshold: float = 0.8
    num_perm: int = 64
    ngram: int = 5


def exact_key(word_list: list[str]) -> bytes:
    """16-byte hash of a document's case-folded words: case, punctuation and spacing do not count."""
    return hashlib.blake2b(" ".join(word_list).encode(), digest_size=16).digest()


def shingle_hashes(word_list: list[str], ngram: int) -> np.ndarray:
    """32-bit hashes of the document's word n-grams (the whole word sequence when shorter than n)."""
    return _fold32(ngram_hashes(word_list, ngram))


def _fold32(h: np.ndarray) -> np.ndarray:
    return (h ^ (h >> np.uint64(32))) & _MASK32


@functools.lru_cache(maxsize=8)
def _permutations(num_perm: int) -> np.ndarray:
    # datasketch derives them from a seeded RNG on every MinHash(); computing them once is most of the cost.
    return MinHash(num_perm=num_perm, scheme="affine32").permutations


def _fmix32(h: np.ndarray) -> np.ndarray:
    # MurmurHash3's 32-bit finalizer, the pre-mix of datasketch's "affine32" scheme.
    h = h ^ (h >> np.uint32(16))
    h = h * np.uint32(0x85EBCA6B)
    h = h ^ (h >> np.uint32(13))
    h = h * np.uint32(0xC2B2AE35)
    return h ^ (h >> np.uint32(16))


def signatures(grams: list[np.ndarray], config: DedupConfig) -> np.ndarray:
    """MinHash signatures (``len(grams)`` x ``num_perm`` uint32) of documents given their word n-gram hashes.

    The values are those of ``datasketch.MinHash(scheme="affine32", hashfunc=identity)`` updated with each
    document's 32-bit folded n-gram hashes (a document without n-grams keeps the initial maximum), computed
    for a whole batch of documents at once (``tests/corpus/test_dedup.py`` compares the two).
    """
    a, b = _permutations(config.num_perm)
    out = np.full((len(grams), config.num_perm), np.iinfo(np.uint32).max, dtype=np.uint32)
    sizes = np.array([len(g) for g in grams], dtype=np.int64)
    rows = np.flatnonzero(sizes)
    if not len(rows):
        return out
    hv = _fmix32(_fold32(np.concatenate([grams[i] for i in rows])).astype(np.uint32))
    starts = np.concatenate(([0], np.cumsum(sizes[rows])))
    # Blocks of about a million permuted values keep the temporary array small.
    step = max(1, 2**20 // config.num_perm)
    first = 0
    while first < len(rows):
        last = max(first + 1, int(np.searchsorted(starts, starts[first] + step, side="right")) - 1)
        block = hv[starts[first]:starts[last], None] * a + b
        out[rows[first:last]] = np.minimum.reduceat(block, starts[first:last] - starts[first], axis=0)
        first = last
    return out


def signature(word_list: list[str], config: DedupConfig, grams: np.ndarray | None = None) -> np.ndarray:
    """The document's MinHash signature (``num_perm`` uint32 values) over its word n-grams.

    ``grams``: the 64-bit ``config.ngram`` hashes of ``word_list`` when already computed.
    """
    return signatures([ngram_hashes(word_list, config.ngram) if grams is None else grams], config)[0]


def _lean(sig: np.ndarray) -> LeanMinHash:
    return LeanMinHash(seed=1, hashvalues=sig, scheme="affine32")


class Deduplicator:
    """Decides, in corpus order, whether a document duplicates one already kept."""

    def __init__(self, config: DedupConfig):
        self.config = config
        self.seen: set[bytes] = set()
        self.lsh = None
        if config.near:
            # Imported here: datasketch.lsh pulls in scipy, a second of start-up that exact-only builds skip.
            from datasketch import MinHashLSH

            self.lsh = MinHashLSH(threshold=config.threshold, num_perm=config.num_perm)
        self._next_id = 0

    def check(self, key: bytes, sig: np.ndarray) -> str | None:
        """``"exact_duplicate"``, ``"near_duplicate"`` or None (then the document is kept and remembered)."""
        if self.config.exact and key in self.seen:
            return "exact_duplicate"
        lean = _lean(sig) if self.lsh is not None else None
        if lean is not None and self.lsh.query(lean):
            return "near_duplicate"
        self._remember(key, lean)
        return None

    def remember(self, key: bytes, sig: np.ndarray) -> None:
        """Add a kept document without checking it (used to rebuild the state when resuming)."""
        self._remember(key, _lean(sig) if self.lsh is not None else None)

    def _remember(self, key: bytes, lean: LeanMinHash | None) -> None:
        if self.config.exact:
            self.seen.add(key)
        if self.lsh is not None:
            self.lsh.insert(self._next_id, lean, check_duplication=False)
            self._next_id += 1
