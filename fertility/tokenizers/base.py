"""The tokenizer interface every format implements, and the array helpers the formats share.

Offsets: every adapter reports a token's span as **UTF-8 byte offsets** into ``text.encode("utf-8")``
(``Encoded.offsets``, ``Spans.starts``/``ends``), not character offsets as HF ``Encoding.offsets``: a byte-level
token may hold part of a character, which character offsets cannot express. ``pretokenize`` returns
*character* spans (pieces never cut a character).
"""

from __future__ import annotations

import functools
import gzip
import hashlib
import os
import re
from abc import ABC, abstractmethod
from collections.abc import Callable, Iterator, Sequence
from concurrent.futures import ThreadPoolExecutor
from contextlib import contextmanager
from dataclasses import dataclass
from itertools import chain
from pathlib import Path

import numpy as np
import regex

from common.errors import InputError

# Special tokens that begin / end a document, most specific first: an adapter takes the first its vocabulary has.
BOS_NAMES = ("<|bos|>", "<|begin_of_text|>", "<bos>", "<s>", "[CLS]", "<|endoftext|>", "<|startoftext|>", "<EOT>")
EOS_NAMES = ("<|eos|>", "<|end_of_text|>", "<eos>", "</s>", "[SEP]", "<|endoftext|>", "<EOT>")
BYTE_PIECE = re.compile(r"<0x[0-9A-Fa-f]{2}>")  # a byte-fallback piece's spelling
WHITESPACE_PIECES = regex.compile(r"\S+")  # the pieces of a model with no regex pre-tokenizer
# The first and last of the only characters str.isspace takes for whitespace and WHITESPACE_PIECES takes into a
# piece (the information separators: regex's \s is Unicode's White_Space); the pieces of any text without them
# are its maximal runs of characters that are not str.isspace (tests/fertility/test_tokenizers.py checks every
# code point).
SEPARATORS_IN_PIECES = (0x1C, 0x1F)



WORKERS = max(2, min(8, len(os.sched_getaffinity(0)) if hasattr(os, "sched_getaffinity") else os.cpu_count() or 2))


@functools.cache
def worker_pool() -> ThreadPoolExecutor:
    """Threads for work that releases the GIL (tiktoken's BPE), made once."""
    return ThreadPoolExecutor(WORKERS, thread_name_prefix="fertility")


if hasattr(os, "register_at_fork"):  # a forked child has none of the parent's threads: it makes its own pool
    os.register_at_fork(after_in_child=worker_pool.cache_clear)

_one_thread = False


@contextmanager
def one_thread() -> Iterator[None]:
    """Within the block, :meth:`Tokenizer.encode_ids` runs on the calling thread only.

    For a worker that owns one core: a corpus build task (datatrove runs one task per core, Ray reserves one CPU
    per task), where the libraries' own thread pools would make N tasks fight over N cores.
    """
    global _one_thread
    saved, saved_env = _one_thread, os.environ.get("TOKENIZERS_PARALLELISM")
    _one_thread = True
    os.environ["TOKENIZERS_PARALLELISM"] = "false"  # HF tokenizers reads it at every batch call
    try:
        yield
    finally:
        _one_thread = saved
        if saved_env is None:
            os.environ.pop("TOKENIZERS_PARALLELISM", None)
        else:
            os.environ["TOKENIZERS_PARALLELISM"] = saved_env


def in_one_thread() -> bool:
    """True inside :func:`one_thread` (adapters whose libraries take a thread count ask)."""
    return _one_thread


class TokenizerLoadError(InputError):
    """A tokenizer that cannot be found or read; the message names the name or file and what was expected."""


@dataclass
class Encoded:
    """One text's tokens: ids, UTF-8 byte spans in the input, and whether each token is UNK / a byte piece."""

    ids: list[int]
    offsets: list[tuple[int, int]]
    unk: list[bool]
    byte_fallback: list[bool]


@dataclass
class Spans:
    """A batch's tokens flattened into arrays: the form the analyzer consumes without per-token Python.

    ``starts``/``ends`` are UTF-8 byte offsets local to each text; ``counts[i]`` is text i's token count.
    """

    ids: np.ndarray
    starts: np.ndarray
    ends: np.ndarray
    counts: np.ndarray
    unk: np.ndarray
    byte_fallback: np.ndarray


class Tokenizer(ABC):
    """A loaded tokenizer. Subclasses set the attributes below and implement the abstract methods."""

    name: str
    kind: str  # the adapter's library or model kind: "hf", "sentencepiece", "tiktoken", "wordpiece", ...
    path: str
    vocab_size: int
    fingerprint: str  # sha256 over the tokenizer file bytes (uncompressed), in the order of its files
    # what load_tokenizer loads it from again, under the same name, from any folder: an absolute path, a Hub id,
    # NAME=SPEC; set by load_tokenizer ("" for a tokenizer made in code)
    spec: str = ""
    bos_id: int | None
    eos_id: int | None
    # its pre-tokenizer's pieces are WHITESPACE_PIECES' matches (:func:`whitespace_pieces`): the analyzer may
    # take them from the words it finds anyway
    splits_on_whitespace: bool = False

    def __init__(self) -> None:
        self._unk_table = np.zeros(0, dtype=bool)
        self._byte_table = np.zeros(0, dtype=bool)

    @abstractmethod
    def encode_ids(self, texts: Sequence[str]) -> list[list[int]]:
        """Token ids of each text (batched; no special tokens added)."""

    @abstractmethod
    def encode_spans(self, texts: Sequence[str], text_bytes: np.ndarray | None = None) -> Spans:
        """The batch's tokens with byte spans, flattened (same ids as :meth:`encode_ids`). ``text_bytes``: each
        text's UTF-8 length (int64), where the caller has it already (the analyzer's batch layout); an adapter
        that needs it counts it otherwise."""

    @abstractmethod
    def decode(self, ids: Sequence[int]) -> str:
        """The text of ``ids``."""

    @abstractmethod
    def pretokenize(self, text: str) -> list[tuple[int, int]]:
        """Character spans of the pre-tokenizer's pieces (no token crosses a piece boundary)."""

    @abstractmethod
    def token_to_id(self, token: str) -> int | None:
        """The id of ``token`` (in the vocabulary's own spelling), or None."""

    @abstractmethod
    def id_to_token(self, i: int) -> str | None:
        """The vocabulary's spelling of id ``i``, or None."""

    def pretokenize_batch(self, texts: Sequence[str]) -> tuple[np.ndarray, np.ndarray, np.ndarray]:
        """The pieces of every text, flattened: (starts, ends, pieces per text), character offsets local to each."""
        pieces = [self.pretokenize(t) for t in texts]
        counts = np.fromiter(map(len, pieces), dtype=np.int64, count=len(pieces))
        flat = np.fromiter(chain.from_iterable(chain.from_iterable(pieces)), dtype=np.int64,
                           count=2 * int(counts.sum())).reshape(-1, 2)
        return flat[:, 0], flat[:, 1], counts

    def encode_batch(self, texts: Sequence[str]) -> list[Encoded]:
        """Each text's tokens with UTF-8 byte offsets and UNK / byte-fallback flags."""
        spans = self.encode_spans(texts)
        bounds = np.concatenate([[0], np.cumsum(spans.counts)])
        out = []
        for a, b in zip(bounds[:-1], bounds[1:], strict=True):
            out.append(Encoded(
                ids=spans.ids[a:b].tolist(),
                offsets=list(zip(spans.starts[a:b].tolist(), spans.ends[a:b].tolist(), strict=True)),
                unk=spans.unk[a:b].tolist(),
                byte_fallback=spans.byte_fallback[a:b].tolist(),
            ))
        return out

    def _flags(self, ids: np.ndarray) -> tuple[np.ndarray, np.ndarray]:
        if ids.size and int(ids.max()) >= self._unk_table.size:
            size = int(ids.max()) + 1
            self._unk_table = np.pad(self._unk_table, (0, size - self._unk_table.size))
            self._byte_table = np.pad(self._byte_table, (0, size - self._byte_table.size))
        return self._unk_table.take(ids), self._byte_table.take(ids)

    def __repr__(self) -> str:
        return f"{type(self).__name__}(name={self.name!r}, kind={self.kind!r}, vocab_size={self.vocab_size})"


@dataclass(frozen=True)
class Format:
    """One tokenizer file format: how :func:`~fertility.tokenizers.loading.load_tokenizer` finds and loads it.

    Each adapter module defines its formats; ``loading.FORMATS`` lists them, and that list is all that loading,
    detection and the messages read. A file is claimed, across all of ``FORMATS``, first by its exact name
    (``names``), then by how its name ends (``suffixes``), then by its content (``sniff``), last by the format
    that takes ``any_file``; the first format in ``FORMATS`` wins within each step. A folder holds the first
    file that the formats' ``in_folder`` patterns match, in the order of ``FORMATS``, and that file is then
    claimed as above (a ``tokenizer.model`` may be sentencepiece or tiktoken).
    """

    what: str  # the format as messages name it: "HF tokenizer.json"
    # (file, name, known name it was asked by or None) -> the tokenizer; raises TokenizerLoadError for a bad
    # file (any other exception is reported as "not a valid <what>")
    load: Callable[[Path, str, str | None], Tokenizer]
    in_folder: tuple[str, ...]  # glob patterns a folder holds it under, the first wanted first
    companions: tuple[str, ...] = ()  # files beside it that belong to it: vocab.json's merges.txt
    names: tuple[str, ...] = ()  # whole file names, lower case
    suffixes: tuple[str, ...] = ()  # file name endings, lower case
    sniff: Callable[[Path], bool] | None = None  # True for a file with this format's content
    any_file: bool = False  # takes a file no other format claims

    @property
    def layout(self) -> str:
        """How a folder holds it, as messages say: ``vocab.json + merges.txt``."""
        return " + ".join((self.in_folder[0], *self.companions))

    def generic_names(self) -> set[str]:
        """The file names that name this layout rather than a tokenizer (a tokenizer is named after its folder)."""
        return {p for p in (*self.in_folder, *self.companions) if not any(c in p for c in "*?[")}


def byte_lengths(texts: Sequence[str]) -> np.ndarray:
    """Each text's UTF-8 length (int64)."""
    return np.fromiter((len(t.encode("utf-8")) for t in texts), dtype=np.int64, count=len(texts))


def flatten(lists: Sequence[Sequence[int]]) -> tuple[np.ndarray, np.ndarray]:
    """Each text's ids in one array, and each text's count."""
    counts = np.fromiter(map(len, lists), dtype=np.int64, count=len(lists))
    flat = np.fromiter(chain.from_iterable(lists), dtype=np.int64, count=int(counts.sum()))
    return flat, counts


def tile(lengths: np.ndarray, counts: np.ndarray) -> tuple[np.ndarray, np.ndarray]:
    """Local (start, end) of tokens laid end to end within each text, from their byte lengths."""
    ends = np.cumsum(lengths)
    first = np.cumsum(counts) - counts
    base = np.zeros(counts.size, dtype=np.int64)
    nonempty = counts > 0
    base[nonempty] = ends[first[nonempty]] - lengths[first[nonempty]]
    ends = ends - np.repeat(base, counts)
    return ends - lengths, ends


def _utf8_layout(texts: Sequence[str]) -> tuple[np.ndarray, np.ndarray, np.ndarray]:
    """Over the texts laid end to end: each character's UTF-8 width, each character's byte offset (one more
    entry: the end) and each text's first character."""
    cps = np.frombuffer("".join(texts).encode("utf-32-le"), dtype=np.uint32)
    char_bytes = 1 + (cps >= 0x80) + (cps >= 0x800) + (cps >= 0x10000)
    c2b = np.concatenate([[0], np.cumsum(char_bytes, dtype=np.int64)])
    char_start = np.concatenate([[0], np.cumsum([len(t) for t in texts], dtype=np.int64)])[:-1]
    return char_bytes, c2b, char_start


def char_to_byte_spans(texts: Sequence[str], offsets: np.ndarray, counts: np.ndarray) -> tuple[np.ndarray, np.ndarray]:
    """Convert local character offsets (n, 2) of each text's tokens to local UTF-8 byte offsets."""
    _, c2b, char_start = _utf8_layout(texts)
    doc_char = np.repeat(char_start, counts)
    doc_byte = c2b[doc_char]
    starts = c2b[offsets[:, 0] + doc_char] - doc_byte
    ends = c2b[offsets[:, 1] + doc_char] - doc_byte
    return starts, ends


def close_gaps(starts: np.ndarray, ends: np.ndarray, counts: np.ndarray,
               text_bytes: np.ndarray) -> tuple[np.ndarray, np.ndarray]:
    """Local spans made to tile each text: a token ends where the next one starts, the first starts at 0 and
    the last ends at the text's end.

    A library's alignment after a normaliser leaves folded characters covered by no token: in NFD, ``ো`` is
    ``ে`` + ``া``; NFC folds them into one character, whose offset points at ``ে`` only, so ``া`` lies in a gap
    and the boundary after the token falls inside the cluster (a broken grapheme that is not one). A gap's
    characters belong to the token before it, the one that absorbed them (spaces a pre-tokenizer dropped
    take the script of the word before them anyway).

    Where two tokens overlap, both cover one character: a normaliser split it (NFC ``ো`` decomposed into
    ``ে`` + ``া``, a token boundary between them) or a byte-fallback model spelt it in byte pieces. The
    boundary is inside that character, so it is put there: one byte past the overlap's start, and one more
    for each further boundary inside the same character (three byte pieces of ``ক``: at 1 and 2).
    """
    if not starts.size:
        return starts, ends
    starts, ends = starts.copy(), ends.copy()
    bounds = np.cumsum(counts)
    nonempty = counts > 0
    first, last = (bounds - counts)[nonempty], bounds[nonempty] - 1
    starts[first] = 0
    inner = np.ones(starts.size, dtype=bool)
    inner[last] = False
    k = np.flatnonzero(inner)
    nxt, end = starts[k + 1], ends[k]
    boundary = np.maximum(end, nxt)
    over = np.flatnonzero(nxt < end)
    if over.size:
        # runs of consecutive overlapping boundaries inside the same character: the rank of each in its run
        new_run = np.ones(over.size, dtype=bool)
        new_run[1:] = (over[1:] != over[:-1] + 1) | (nxt[over[1:]] != nxt[over[:-1]])
        run_start = np.maximum.accumulate(np.where(new_run, np.arange(over.size), 0))
        rank = np.arange(over.size) - run_start
        boundary[over] = np.maximum(np.minimum(nxt[over] + 1 + rank, end[over] - 1), nxt[over])
    ends[k] = boundary
    starts[k + 1] = boundary
    ends[last] = np.maximum(ends[last], text_bytes[nonempty])
    return starts, ends


def realigned(texts: Sequence[str], normed: Sequence[str], offsets: np.ndarray, starts: np.ndarray,
              counts: np.ndarray, text_bytes: np.ndarray) -> tuple[np.ndarray, np.ndarray]:
    """Local byte spans in ``texts`` of byte-level tokens that tile the normalised ``normed`` (their local byte
    starts there: ``starts``), given the library's character ``offsets`` into ``texts``.

    The library's offsets are whole characters, so a boundary inside a character (a byte-level token ending
    in the middle of ``ন``'s three bytes) would move to the character's end and stop counting as broken: on
    NFC input, which takes the exact byte path, it counts. Here each boundary is the original position of the
    character it falls in, plus how far into that character it falls, so NFC and NFD input give the same
    boundaries relative to their clusters. The spans tile each text (see :func:`close_gaps`).
    """
    if not starts.size:
        return starts, starts.copy()
    doc = np.repeat(np.arange(len(texts)), counts)
    _, nc2b, nchar_start = _utf8_layout(normed)
    g = nc2b[nchar_start][doc] + starts
    within = g - nc2b[np.searchsorted(nc2b, g, "right") - 1]  # bytes into the normalised character
    char_bytes, c2b, char_start = _utf8_layout(texts)
    lens = np.fromiter(map(len, texts), dtype=np.int64, count=len(texts))
    oc = char_start[doc] + np.minimum(offsets[:, 0], np.maximum(lens[doc] - 1, 0))
    doc_byte = c2b[char_start][doc]
    pos = c2b[oc] + np.minimum(within, char_bytes[oc] - 1) - doc_byte
    bounds = np.cumsum(counts)
    first = (bounds - counts)[counts > 0]
    pos[first] = 0
    pos = np.maximum.accumulate(pos + doc_byte) - doc_byte  # never before the previous token's start
    new_ends = np.empty_like(pos)
    new_ends[:-1] = pos[1:]
    new_ends[bounds[counts > 0] - 1] = text_bytes[counts > 0]
    return pos, new_ends


def first_id(names: Sequence[str], lookup) -> int | None:
    """The id ``lookup`` gives the first of ``names`` it knows, or None."""
    for name in names:
        i = lookup(name)
        if i is not None:
            return i
    return None


def sha256_files(paths: Sequence[Path]) -> str:
    """A tokenizer's fingerprint: sha256 over its files' (uncompressed) bytes, in order."""
    h = hashlib.sha256()
    for p in paths:
        h.update(read_maybe_gzip(p))
    return h.hexdigest()


def read_maybe_gzip(path: Path) -> bytes:
    """A file's bytes, gunzipped when it is gzip (by its magic, whatever its name)."""
    data = path.read_bytes()
    if data[:2] == b"\x1f\x8b":
        try:
            return gzip.decompress(data)
        except (EOFError, OSError) as e:
            raise TokenizerLoadError(f"{path}: truncated or corrupt gzip ({e})") from None
    return data



_in_piece = np.zeros(0x110000, dtype=bool)  # a character WHITESPACE_PIECES takes into a piece
_in_piece_known = np.zeros(0x110000, dtype=bool)


def whitespace_pieces(texts: Sequence[str]) -> tuple[np.ndarray, np.ndarray, np.ndarray]:
    """(starts, ends, counts) of ``WHITESPACE_PIECES``' matches in every text (local character offsets), on
    arrays: its matches are the maximal runs of characters it matches one by one, so a table of which characters
    those are (filled once per code point, by the pattern itself) is all it takes, not a match object per piece
    (the sentencepiece pieces of 1 M Bangla characters: 0.1 s with ``finditer``)."""
    cps = np.frombuffer("".join(texts).encode("utf-32-le"), dtype=np.uint32)
    unseen = ~_in_piece_known[cps]
    if unseen.any():
        for cp in np.unique(cps[unseen]).tolist():
            _in_piece[cp] = WHITESPACE_PIECES.fullmatch(chr(cp)) is not None
            _in_piece_known[cp] = True
    doc_char = np.zeros(len(texts) + 1, dtype=np.int64)
    np.cumsum(np.fromiter(map(len, texts), dtype=np.int64, count=len(texts)), out=doc_char[1:])
    edge = np.zeros(cps.size + 1, dtype=bool)  # a text starts (or the last one ends) before this character
    edge[doc_char] = True
    solid = np.zeros(cps.size + 2, dtype=bool)  # padded with a non-piece character at each end
    solid[1:-1] = _in_piece[cps]
    starts = np.flatnonzero(solid[1:-1] & (~solid[:-2] | edge[:-1]))
    ends = np.flatnonzero(solid[1:-1] & (~solid[2:] | edge[1:])) + 1
    counts = np.diff(np.searchsorted(starts, doc_char))
    offset = np.repeat(doc_char[:-1], counts)
    return starts - offset, ends - offset, counts


def regex_pieces(pattern: regex.Pattern, texts: Sequence[str]):
    """(starts, ends, counts) of ``pattern``'s matches when they tile every text, else None.

    Byte-level BPE patterns match every character, so the matches' lengths are all that is needed, and
    ``findall`` is the cheapest way to get them.
    """
    pieces = [pattern.findall(t) for t in texts]
    counts = np.fromiter(map(len, pieces), dtype=np.int64, count=len(pieces))
    lengths = np.fromiter(map(len, chain.from_iterable(pieces)), dtype=np.int64, count=int(counts.sum()))
    per_text = np.bincount(np.repeat(np.arange(len(texts)), counts), weights=lengths, minlength=len(texts))
    if not np.array_equal(per_text, [len(t) for t in texts]):
        return None
    starts, ends = tile(lengths, counts)
    return starts, ends, counts
