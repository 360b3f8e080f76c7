"""Exact and near-duplicate decisions, made the same way whatever the number of tasks.

* Exact: a 16-byte hash of a document's case-folded words (``corpus.quality.clean.Words.key``: case, punctuation and
  spacing do not count).
* Near: datatrove's multi-stage MinHash. Stage 1 (``corpus.engine.steps.Signatures``) writes each task's signatures,
  split into ``num_buckets`` bands of ``hashes_per_bucket`` hashes, sorted; stage 2 (datatrove's
  ``MinhashDedupBuckets``, its merge done in numpy by ``corpus.engine.buckets``, one task per band) merges the
  sorted files of a band and writes the pairs of documents whose band is equal. Stage 2 reads the files in
  blocks, so its memory does not grow with the corpus.
* The clusters and the choice of the document to keep are ours (:func:`duplicates`): datatrove numbers a
  document by (task, position in the task) and keeps whichever document its union-find leaves at the root,
  both of which change with the number of tasks. Here a pair is first mapped to the documents' canonical ids
  (``corpus.read.sources``), the clusters are the connected components of all pairs, and the document kept is the
  one with the smallest canonical id (the first in corpus order); so is the one kept among exact duplicates.
  The components of "equal in some band" do not depend on how documents were split into tasks, so the
  decisions, and with them every output byte, are the same for any number of tasks and any executor.
"""

from __future__ import annotations

import functools
from collections.abc import Iterable
from dataclasses import dataclass

import numpy as np


@dataclass
class DedupConfig:
    """Near-duplicates: word ``ngram`` shingles, ``num_perm`` MinHash hashes, Jaccard ``threshold``."""

    exact: bool = True
    near: bool = True
    threshold: float = 0.8
    num_perm: int = 64
    ngram: int = 5


@functools.lru_cache(maxsize=16)
def bands(threshold: float, num_perm: int) -> tuple[int, int]:
    """(bands b, hashes per band r) with b * r <= ``num_perm`` that minimise the mean of the false-positive
    area (similarity below ``threshold`` yet equal in a band: 1 - (1 - s^r)^b) and the false-negative area
    above it. The same choice as datasketch's LSH (``tests/corpus/quality/test_dedup.py`` compares them), computed
    here because importing ``datasketch.lsh`` costs a second of scipy start-up."""
    below, above = np.linspace(0, threshold, 1001), np.linspace(threshold, 1, 1001)
    best, error = (1, num_perm), float("inf")
    for b in range(1, num_perm + 1):
        for r in range(1, num_perm // b + 1):
            fp = np.trapezoid(1 - (1 - below**r) ** b, below)
            fn = np.trapezoid((1 - above**r) ** b, above)
            if 0.5 * fp + 0.5 * fn < error:
                best, error = (b, r), 0.5 * fp + 0.5 * fn
    return best


def minhash_config(config: DedupConfig):
    """datatrove's MinHash settings for ``config`` (64-bit hashes; our n-gram hashes are the shingles)."""
    from datatrove.pipeline.dedup.minhash import MinhashConfig
    from datatrove.utils.hashing import HashConfig

    b, r = bands(config.threshold, config.num_perm)
    return MinhashConfig(n_grams=config.ngram, num_buckets=b, hashes_per_bucket=r, seed=1,
                         hash_config=HashConfig(precision=64, hash_fc="sha1"))


def exact_duplicates(uids: np.ndarray, keys: np.ndarray) -> np.ndarray:
    """True for every document whose key an earlier document (smaller canonical id) has."""
    order = np.lexsort((uids, *keys.view(np.uint64).reshape(len(keys), 2).T[::-1]))
    sorted_keys = keys[order]
    same = np.zeros(len(uids), dtype=bool)
    same[1:] = (sorted_keys[1:] == sorted_keys[:-1]).all(axis=1)
    out = np.zeros(len(uids), dtype=bool)
    out[order] = same
    return out


def near_duplicates(uids: np.ndarray, pair_blocks: Iterable[np.ndarray]) -> np.ndarray:
    """True for every document in a cluster (connected component of all the pairs of ``pair_blocks``, each
    a block of rows of document indices) that is not the cluster's document with the smallest canonical id.

    The pairs grow with the duplicates (up to one per document per band), so they are never held whole: each
    block joins the components found so far. ``label`` maps a document to its component; a block's pairs,
    mapped to components, are the edges of a graph over the components, whose own components are those of all
    the pairs read so far."""
    label = np.arange(len(uids))
    for pairs in pair_blocks:
        if not len(pairs):
            continue
        # imported with the first pairs, not with the module: scipy costs a build with none 0.2 s of start-up
        from scipy.sparse import coo_matrix
        from scipy.sparse.csgraph import connected_components

        edges = (np.ones(len(pairs), dtype=np.int8), (label[pairs[:, 0]], label[pairs[:, 1]]))
        _, merged = connected_components(coo_matrix(edges, shape=(len(uids), len(uids))), directed=False)
        label = merged[label]
    first = np.full(len(uids), np.iinfo(np.int64).max, dtype=np.int64)
    np.minimum.at(first, label, uids)
    return uids != first[label]
