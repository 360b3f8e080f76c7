"""The exact-dedup keys of the documents a shard set holds (``corpus.quality.clean.Words.key``: case, punctuation and
spacing do not count), kept beside its manifest in ``document_keys.npy``. An ``--append`` drops every new
document whose key the set already holds, before its validation hold-out: so no document of the set's
validation reaches the new training shards, and no document of its training reaches the new validation
shards (the dedup of one build sees only its own documents)."""

from __future__ import annotations

import io
from pathlib import Path

import numpy as np

from common.fileio import atomic_write_bytes
from corpus.quality.clean import words_batch
from corpus.shards.format import Manifest, ShardError, read_shard
from corpus.shards.verify import documents
from fertility.tokenizers import Tokenizer

KEYS_NAME = "document_keys.npy"


def _records(keys: np.ndarray) -> np.ndarray:
    """(n, 16) uint8 keys -> n 16-byte records, which sort and compare as raw bytes."""
    return np.ascontiguousarray(keys, dtype=np.uint8).view("V16").ravel()


def save_keys(directory: str | Path, keys: np.ndarray) -> None:
    """Write the set's keys, sorted and unique (the same bytes for the same documents)."""
    buf = io.BytesIO()
    np.save(buf, np.unique(_records(keys)).view(np.uint8).reshape(-1, 16), allow_pickle=False)
    atomic_write_bytes(Path(directory) / KEYS_NAME, buf.getvalue())


def load_keys(directory: str | Path, manifest: Manifest, tokenizer: Tokenizer) -> np.ndarray:
    """The keys of every document of the shard set in ``directory``, (n, 16) uint8. A set written before the
    keys were kept has no ``document_keys.npy``: its keys are computed again from the decoded documents, which
    are the cleaned text the keys were made of (the tokenizers a build accepts decode exactly)."""
    path = Path(directory) / KEYS_NAME
    if path.is_file():
        try:
            keys = np.load(path, allow_pickle=False)
        except (ValueError, OSError) as e:
            raise ShardError(f"{path}: not the .npy file of document keys `corpus build` writes ({e})") from None
        if keys.dtype != np.uint8 or keys.ndim != 2 or keys.shape[1] != 16:
            raise ShardError(f"{path}: holds a {keys.dtype} array of shape {keys.shape}; expected (documents, 16) "
                             "uint8 document keys, as `corpus build` writes them")
        return keys
    found = [np.zeros((0, 16), dtype=np.uint8)]
    for shard in manifest.shards:
        texts = [tokenizer.decode(doc.tolist())
                 for doc in documents(read_shard(Path(directory) / shard.file), manifest.tokenizer.bos_id)]
        found.append(np.frombuffer(b"".join(w.key for w in words_batch(texts)), dtype=np.uint8).reshape(-1, 16))
    return np.concatenate(found)


def known(keys: np.ndarray, held: np.ndarray) -> np.ndarray:
    """Which of ``keys`` (n, 16) are among ``held``, the keys of a shard set: a boolean mask."""
    return np.isin(_records(keys), _records(held))
