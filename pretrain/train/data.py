"""Training data: memory-mapped shards, a deterministic sampler whose position is checkpointed, and the
checks that a shard set fits the model (tokenizer identity, vocabulary, token ids).

The train shards are read as one token stream cut into windows of ``seq_len + 1`` tokens at stride
``seq_len`` (so every token is a target exactly once per epoch), plus, when ``(len - 1) % seq_len`` tokens
are left over at the end, one final window aligned to the end of the stream: without it those tokens
would never be trained, in any epoch. Its first ``seq_len - (len - 1) % seq_len`` targets are also targets
of the window before it, the only overlap in an epoch. Each epoch visits the windows in a
permutation seeded by ``(seed, epoch)``. Batch ``b`` holds the global sequences ``b * B .. b * B + B - 1``
of that order, whatever the number of processes: every rank builds the same global batch and takes its
own rows, which is why a 2-process run sees exactly the data of a 1-process run.

The sampler's whole state is ``{"next_batch", "skip"}``: the next batch index and the batch ranges a
supervisor rollback ruled out. Nothing else is random, so a resumed run reads the same batches.
"""

from __future__ import annotations

import re
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import numpy as np

from common.errors import InputError
from corpus.shards.format import MANIFEST_NAME, Manifest, ShardError, read_shard


class DataError(InputError):
    """Shards that cannot be used with this model or run; the message names the file and the mismatch."""


class TokenStream:
    """Several memory-mapped shards read as one sequence of tokens (no copy until a window is taken)."""

    def __init__(self, paths: list[Path]):
        self.paths = paths
        self.shards = [read_shard(p) for p in paths]
        self.offsets = np.concatenate([[0], np.cumsum([len(s) for s in self.shards])]).astype(np.int64)

    def __len__(self) -> int:
        return int(self.offsets[-1])

    def window(self, start: int, length: int) -> np.ndarray:
        """Tokens ``start .. start + length - 1`` as int64, across shard boundaries if needed."""
        parts, pos, end = [], start, start + length
        while pos < end:
            i = int(np.searchsorted(self.offsets, pos, side="right")) - 1
            local = pos - int(self.offsets[i])
            take = min(end - pos, len(self.shards[i]) - local)
            parts.append(self.shards[i][local:local + take])
            pos += take
        return np.concatenate(parts).astype(np.int64)

    def max_token(self, chunk: int = 1 << 24) -> int:
        """The largest token id (a full scan, in chunks, of every shard)."""
        best = -1
        for s in self.shards:
            for a in range(0, len(s), chunk):
                best = max(best, int(s[a:a + chunk].max()))
        return best


@dataclass
class Dataset:
    """A shard directory opened for training: the manifest, the train stream and one stream per language."""

    path: Path
    manifest: Manifest
    train: TokenStream
    val: dict[str, TokenStream]


def check_shards(path: str, what: str = "--data") -> None:
    """A shard folder: it exists, is a folder and holds a manifest (its content is `open_dataset`'s to check)."""
    folder = Path(path)
    if not folder.exists():
        raise InputError(f"{what} {folder}: no such folder (expected the shards of `corpus build`)")
    if not folder.is_dir():
        raise InputError(f"{what} {folder}: is a file; expected the shard folder (with {MANIFEST_NAME}) of "
                         "`corpus build`")
    if not (folder / MANIFEST_NAME).is_file():
        raise InputError(f"{what} {folder}: holds no {MANIFEST_NAME}; is it a shard folder of `corpus build`?")


def open_dataset(path: str | Path) -> Dataset:
    """Load and verify the manifest in ``path`` and memory-map its shards."""
    path = Path(path)
    try:
        manifest = Manifest.load(path)
        manifest.verify(path)
    except ShardError as e:
        raise DataError(str(e)) from None
    train = manifest.split("train")
    if not train:
        raise DataError(f"{path / 'manifest.json'}: no shard with split 'train'")
    languages = sorted({s.language for s in manifest.split("val") if s.language})
    val = {lang: TokenStream([path / s.file for s in manifest.split("val", language=lang)]) for lang in languages}
    return Dataset(path=path, manifest=manifest, train=TokenStream([path / s.file for s in train]), val=val)


def check_compatible(dataset: Dataset, vocab_size: int, *, tokenizer: str = "",
                     expected_sha256: str = "", expected_from: str = "", scan_tokens: bool = True) -> None:
    """Refuse shards the model cannot train on, before any step runs.

    ``tokenizer`` is what the user says the data must be tokenized with (a spec or a sha256; a spec is loaded
    and its file's hash compared, `corpus.shards.format.TokenizerInfo.load`);
    ``expected_sha256`` is the tokenizer a checkpoint was trained with (``expected_from`` names it).
    Also checks that the model's vocabulary holds the manifest's and every token id in the shards.
    """
    info = dataset.manifest.tokenizer
    where = dataset.path / "manifest.json"
    if re.fullmatch(r"[0-9a-fA-F]{64}", tokenizer):
        if tokenizer.lower() != info.sha256:
            raise DataError(f"{where}: shards were made with tokenizer {info.spec!r} (sha256 {info.sha256}), "
                            f"but --tokenizer names sha256 {tokenizer.lower()}; re-tokenize or pick matching shards")
    elif tokenizer:
        try:
            info.load(tokenizer)
        except ShardError as e:
            raise DataError(f"{where}: --tokenizer: {e}") from None
    if expected_sha256 and expected_sha256 != info.sha256:
        raise DataError(f"{where}: shards were made with tokenizer {info.spec!r} (sha256 {info.sha256}), "
                        f"but {expected_from or 'the model'} was trained with sha256 {expected_sha256}; "
                        "a model cannot continue on another tokenizer's ids")
    if info.vocab_size > vocab_size:
        raise DataError(f"{where}: tokenizer {info.spec!r} has {info.vocab_size} ids, more than the model's "
                        f"vocabulary of {vocab_size}")
    if scan_tokens:
        streams = {"train": dataset.train, **{f"val/{k}": v for k, v in dataset.val.items()}}
        for name, stream in streams.items():
            top = stream.max_token()
            if top >= info.vocab_size:
                raise DataError(f"{where}: {name} shards hold token id {top}, but tokenizer {info.spec!r} "
                                f"has only {info.vocab_size} ids (and the model {vocab_size})")


@dataclass
class SamplerState:
    next_batch: int = 0
    skip: list[list[int]] = field(default_factory=list)  # inclusive [first, last] batch indices never to use


class BatchSampler:
    """Deterministic global batches of ``batch_size`` windows of ``seq_len + 1`` tokens."""

    def __init__(self, stream: TokenStream, seq_len: int, batch_size: int, seed: int, tail: bool = True):
        self.stream, self.seq_len, self.batch_size, self.seed = stream, seq_len, batch_size, seed
        if (len(stream) - 1) // seq_len < 1:
            raise DataError(f"train shards hold {len(stream)} tokens, fewer than one sequence of {seq_len + 1}")
        self.state = SamplerState()
        self._set_tail(tail)

    def _set_tail(self, tail: bool) -> None:
        """With ``tail``, the final window aligned to the end of the stream is one of the epoch's windows (a
        checkpoint of a version before it, without ``"tail"`` in its state, resumes without it, exactly)."""
        strided = (len(self.stream) - 1) // self.seq_len
        self.tail_window = tail  # what the state records: this version's windows, whatever this stream's length
        self.tail = tail and (len(self.stream) - 1) % self.seq_len > 0
        self.n_windows = strided + self.tail
        self._perm_epoch, self._perm = -1, np.empty(0, dtype=np.int64)

    def start(self, window: int) -> int:
        """The first token of window ``window`` (``0 .. n_windows - 1``): stride ``seq_len``, and the tail window
        ending at the stream's last token."""
        if self.tail and window == self.n_windows - 1:
            return len(self.stream) - 1 - self.seq_len
        return window * self.seq_len

    def _order(self, epoch: int) -> np.ndarray:
        if epoch != self._perm_epoch:
            self._perm = np.random.default_rng([self.seed, epoch]).permutation(self.n_windows)
            self._perm_epoch = epoch
        return self._perm

    def batch(self, index: int, rows: slice = slice(None)) -> np.ndarray:
        """Rows ``rows`` of global batch ``index``: an int64 array ``(n, seq_len + 1)``."""
        seqs = range(index * self.batch_size, (index + 1) * self.batch_size)[rows]
        out = np.empty((len(seqs), self.seq_len + 1), dtype=np.int64)
        for row, g in enumerate(seqs):
            out[row] = self.stream.window(self.start(int(self._order(g // self.n_windows)[g % self.n_windows])),
                                          self.seq_len + 1)
        return out

    def next_index(self) -> int:
        """Claim the next batch index that no rollback ruled out."""
        index = self.state.next_batch
        while any(a <= index <= b for a, b in self.state.skip):
            index += 1
        self.state.next_batch = index + 1
        return index

    def state_dict(self) -> dict[str, Any]:
        return {"next_batch": self.state.next_batch, "skip": [list(r) for r in self.state.skip],
                "seed": self.seed, "seq_len": self.seq_len, "batch_size": self.batch_size, "tail": self.tail_window}

    def load_state_dict(self, state: dict[str, Any]) -> None:
        for key in ("seed", "seq_len", "batch_size"):
            if state[key] != getattr(self, key):
                raise DataError(f"checkpoint's data sampler has {key}={state[key]}, this run {getattr(self, key)}; "
                                "resuming with another batch shape or seed would not reproduce the run")
        self.state = SamplerState(next_batch=int(state["next_batch"]), skip=[list(r) for r in state["skip"]])
        self._set_tail(bool(state.get("tail", False)))
