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
import regex
from datasketch import LeanMinHash, MinHash

_WORD = regex.compile(r"\w+")
_NGRAM_MULTIPLIER = np.uint64(0x9E3779B1)
_MASK32 = np.uint64(0xFFFFFFFF)
_WORD_WIDTH = 24
_WORD_POWERS = np.uint64(0x100000001B3) ** np.arange(_WORD_WIDTH, dtype=np.uint64)


@dataclass
class DedupConfig:
    """Near-duplicates: word ``ngram`` shingles, ``num_perm`` MinHash permutations, Jaccard ``threshold``."""

    exact: bool = True
    near: bool = True
    threshold: float = 0.8
    num_perm: int = 64
    ngram: int = 5


def exact_key(text: str) -> bytes:
    """16-byte hash of the text with case, punctuation and whitespace differences removed."""
    return hashlib.blake2b(" ".join(_WORD.findall(text.casefold())).encode(), digest_size=16).digest()


def shingle_hashes(text: str, ngram: int) -> np.ndarray:
    """32-bit hashes of the document's word n-grams (the whole word sequence when shorter than n)."""
    words = _WORD.findall(text.casefold())
    if not words:
        return np.zeros(0, dtype=np.uint64)
    # Words as fixed-width code point rows (longer words truncated), hashed as polynomials in one numpy pass.
    codes = np.array(words, dtype=f"<U{_WORD_WIDTH}").view(np.uint32).reshape(len(words), _WORD_WIDTH)
    h = (codes.astype(np.uint64) * _WORD_POWERS).sum(axis=1, dtype=np.uint64)
    n = min(ngram, len(words))
    grams = np.zeros(len(words) - n + 1, dtype=np.uint64)
    for k in range(n):
        grams = grams * _NGRAM_MULTIPLIER + h[k:len(h) - n + 1 + k]
    return (grams ^ (grams >> np.uint64(32))) & _MASK32


def _identity(value: int) -> int:
    return value


@functools.lru_cache(maxsize=8)
def _permutations(num_perm: int) -> np.ndarray:
    # datasketch derives them from a seeded RNG on every MinHash(); computing them once is most of the cost.
    return MinHash(num_perm=num_perm).permutations


def signature(text: str, config: DedupConfig) -> np.ndarray:
    """The document's MinHash signature (``num_perm`` uint32 values) over its word n-grams."""
    m = MinHash(num_perm=config.num_perm, hashfunc=_identity, permutations=_permutations(config.num_perm),
                scheme="affine32")
    m.update_batch(shingle_hashes(text, config.ngram).tolist())
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
