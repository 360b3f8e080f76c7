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


def _identity(value: int) -> int:
    return value


@functools.lru_cache(maxsize=8)
def _permutations(num_perm: int) -> np.ndarray:
    # datasketch derives them from a seeded RNG on every MinHash(); computing them once is most of the cost.
    return MinHash(num_perm=num_perm).permutations


def signature(word_list: list[str], config: DedupConfig, grams: np.ndarray | None = None) -> np.ndarray:
    """The document's MinHash signature (``num_perm`` uint32 values) over its word n-grams.

    ``grams``: the 64-bit ``config.ngram`` hashes of ``word_list`` when already computed.
    """
    m = MinHash(num_perm=config.num_perm, hashfunc=_identity, permutations=_permutations(config.num_perm),
                scheme="affine32")
    m.update_batch((shingle_hashes(word_list, config.ngram) if grams is None else _fold32(grams)).tolist())
    return np.asarray(m.hashvalues, dtype=np.uint32)


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
        if self.lsh is not None and self.lsh.query(_lean(sig)):
            return "near_duplicate"
        self.remember(key, sig)
        return None

    def remember(self, key: bytes, sig: np.ndarray) -> None:
        """Add a kept document without checking it (used to rebuild the state when resuming)."""
        if self.config.exact:
            self.seen.add(key)
        if self.lsh is not None:
            self.lsh.insert(self._next_id, _lean(sig), check_duplication=False)
            self._next_id += 1
