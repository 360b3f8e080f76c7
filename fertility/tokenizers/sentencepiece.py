"""sentencepiece models (any file name): byte spans from the pieces' lengths, checked against the text, else
the library's own byte offsets, computed on arrays (:mod:`~fertility.tokenizers.spm_alignment`) or, where that
does not model the text, read from the library."""

from __future__ import annotations

from collections.abc import Sequence
from itertools import chain
from pathlib import Path

import numpy as np

from fertility.tokenizers.base import (
    WHITESPACE_PIECES,
    Format,
    Spans,
    Tokenizer,
    TokenizerLoadError,
    byte_lengths,
    flatten,
    in_one_thread,
    sha256_files,
    whitespace_pieces,
)
from fertility.tokenizers.spm_alignment import Alignment

# Below this many characters the library's offsets are the cheaper: the arrays cost about 0.6 ms a call, the
# protobuf about 0.6 us a character of Bangla (benchmarks/results/2026-12-03-fertility-exact); the viewer's few
# sentences take the library's.
ALIGN_MIN_CHARS = 1000


class SentencePieceTokenizer(Tokenizer):
    """A sentencepiece model (BPE or unigram), any file name."""

    kind = "sentencepiece"
    splits_on_whitespace = True

    def __init__(self, path: Path, name: str) -> None:
        import sentencepiece as spm

        super().__init__()
        self._sp = spm.SentencePieceProcessor()
        try:
            proto = path.read_bytes()
            self._sp.LoadFromSerializedProto(proto)
        except (RuntimeError, OSError) as e:
            raise TokenizerLoadError(f"{path}: not a sentencepiece model ({e})") from None
        self.name, self.path = name, str(path)
        self.fingerprint = sha256_files([path])
        self.vocab_size = self._sp.get_piece_size()
        sp = self._sp
        self._unk_table = np.array([sp.is_unknown(i) for i in range(self.vocab_size)], dtype=bool)
        self._byte_table = np.array([sp.is_byte(i) for i in range(self.vocab_size)], dtype=bool)
        # each piece's length in the text, in UTF-8 bytes: "▁" stands for one space, a byte piece for one byte
        pieces = [sp.id_to_piece(i) for i in range(self.vocab_size)]
        self._piece_bytes = np.array([1 if self._byte_table[i] else len(p.replace("\u2581", " ").encode("utf-8"))
                                      for i, p in enumerate(pieces)], dtype=np.int64)
        self._starts_with_space = np.array([p.startswith("\u2581") for p in pieces], dtype=np.int64)
        self.bos_id = sp.bos_id() if sp.bos_id() >= 0 else None
        self.eos_id = sp.eos_id() if sp.eos_id() >= 0 else None
        self._alignment = Alignment(sp, proto)

    def encode_ids(self, texts: Sequence[str]) -> list[list[int]]:
        return self._sp.encode(list(texts), add_bos=False, add_eos=False, num_threads=1 if in_one_thread() else None)

    def encode_spans(self, texts: Sequence[str], text_bytes: np.ndarray | None = None) -> Spans:
        """Spans from each piece's byte length (``▁`` is one space byte, a byte piece one byte), laid end to
        end: exact whenever they add up to the text's bytes (plus the dummy-prefix space), i.e. when the
        normaliser changed no length and no piece is UNK. The other texts take the library's offsets: computed
        from its normaliser's tables (:class:`~fertility.tokenizers.spm_alignment.Alignment`), or read from its
        protobuf output for a text the tables do not model (several times the encoding: the exception, not the
        rule)."""
        texts = list(texts)
        ids_lists = self._sp.encode(texts, add_bos=False, add_eos=False)
        ids, counts = flatten(ids_lists)
        lengths = self._piece_bytes.take(ids)
        ends = np.cumsum(lengths)
        first = np.cumsum(counts) - counts
        base = np.zeros(counts.size, dtype=np.int64)
        nonempty = counts > 0
        base[nonempty] = ends[first[nonempty]] - lengths[first[nonempty]]
        prefix = np.zeros(counts.size, dtype=np.int64)
        prefix[nonempty] = self._starts_with_space[ids[first[nonempty]]]
        if text_bytes is None:
            text_bytes = byte_lengths(texts)
        # a leading space may be the text's or the dummy prefix's (and a normaliser may drop it): ask the library
        lead_space = np.fromiter((t[:1].isspace() for t in texts), dtype=bool, count=len(texts))
        # each text's bytes read off the running sum, and its UNK pieces found where they are, not summed per
        # piece with bincounts (1.0-1.1 ms against 3.4-4.4 ms on 1 M Bangla characters;
        # benchmarks/results/2026-12-03-fertility-exact-2/micro.txt)
        totals = np.zeros(counts.size, dtype=np.int64)
        totals[nonempty] = ends[(first + counts - 1)[nonempty]] - base[nonempty]
        unk, byte = self._flags(ids)
        has_unk = np.zeros(counts.size, dtype=bool)
        has_unk[np.searchsorted(np.cumsum(counts), np.flatnonzero(unk), "right")] = True
        bad = (totals != text_bytes + prefix) | has_unk | lead_space
        # in place, and only the begins clipped: a good text's ends are never negative (a first piece holds the
        # dummy prefix it stands for), a bad text's are replaced below; a dummy prefix on its own begins at -1
        ends -= np.repeat(base + prefix, counts)
        starts = ends - lengths
        np.maximum(starts, 0, out=starts)
        if bad.any():
            in_bad = np.repeat(bad, counts)
            starts[in_bad], ends[in_bad] = self._offsets([texts[i] for i in np.flatnonzero(bad).tolist()],
                                                         ids[in_bad], counts[bad], byte[in_bad])
        return Spans(ids, starts, ends, counts, unk, byte)

    def _offsets(self, texts: list[str], ids: np.ndarray, counts: np.ndarray,
                 byte: np.ndarray) -> tuple[np.ndarray, np.ndarray]:
        """The library's byte offsets of ``texts``' pieces (``ids``, ``counts``), byte runs spread."""
        starts, ends = np.zeros(ids.size, dtype=np.int64), np.zeros(ids.size, dtype=np.int64)
        ok = np.zeros(len(texts), dtype=bool)
        if self._alignment.supported and sum(map(len, texts)) > ALIGN_MIN_CHARS:
            starts, ends, ok = self._alignment.spans(texts, ids, counts)
        if not ok.all():
            rest = np.repeat(~ok, counts)
            _, starts[rest], ends[rest], _ = self._library_offsets([texts[i] for i in np.flatnonzero(~ok).tolist()])
        return _spread_byte_runs(starts, ends, byte, counts)

    def _library_offsets(self, texts: list[str]) -> tuple[np.ndarray, np.ndarray, np.ndarray, np.ndarray]:
        """Ids, begins and ends of ``texts``' pieces as the library's protobuf output gives them, and counts."""
        protos = self._sp.encode(texts, add_bos=False, add_eos=False, return_type="proto")
        triples = [[(p.id, p.begin, p.end) for p in proto.pieces] for proto in protos]
        counts = np.fromiter(map(len, triples), dtype=np.int64, count=len(triples))
        flat = np.fromiter(chain.from_iterable(chain.from_iterable(triples)), dtype=np.int64,
                           count=3 * int(counts.sum())).reshape(-1, 3)
        return flat[:, 0].copy(), flat[:, 1].copy(), flat[:, 2].copy(), counts

    def _library_spans(self, texts: list[str]) -> Spans:
        """Every text's spans from the library's own offsets (what :meth:`encode_spans` must equal)."""
        ids, begins, ends, counts = self._library_offsets(texts)
        unk, byte = self._flags(ids)
        starts, ends = _spread_byte_runs(begins, ends, byte, counts)
        return Spans(ids, starts, ends, counts, unk, byte)

    def decode(self, ids: Sequence[int]) -> str:
        return self._sp.decode(list(ids))

    def pretokenize(self, text: str) -> list[tuple[int, int]]:
        # sentencepiece has no regex pre-tokenizer; by default no piece crosses whitespace.
        return [m.span() for m in WHITESPACE_PIECES.finditer(text)]

    def pretokenize_batch(self, texts: Sequence[str]) -> tuple[np.ndarray, np.ndarray, np.ndarray]:
        return whitespace_pieces(texts)

    def token_to_id(self, token: str) -> int | None:
        i = self._sp.piece_to_id(token)
        return i if self._sp.id_to_piece(i) == token else None

    def id_to_token(self, i: int) -> str | None:
        return self._sp.id_to_piece(i) if 0 <= i < self.vocab_size else None


def _spread_byte_runs(starts: np.ndarray, ends: np.ndarray, byte: np.ndarray, counts: np.ndarray):
    """Give each byte-fallback piece its own byte.

    sentencepiece reports a run of k byte pieces as k-1 empty spans and one span over all k bytes; each piece
    in fact stands for one byte, which is what the broken-grapheme count needs to see.
    """
    if not byte.any():
        return starts, ends
    text_start = np.zeros(byte.size, dtype=bool)
    text_start[(np.cumsum(counts) - counts)[counts > 0]] = True
    previous = np.concatenate([[False], byte[:-1]])
    run_start = byte & (~previous | text_start)
    idx = np.flatnonzero(byte)
    run_of = np.cumsum(run_start)[idx] - 1
    first = np.flatnonzero(run_start)
    length = np.bincount(run_of)
    run_end = ends[first + length - 1]
    starts, ends = starts.copy(), ends.copy()
    starts[idx] = run_end[run_of] - length[run_of] + (idx - first[run_of])
    ends[idx] = starts[idx] + 1
    return starts, ends


def load_sentencepiece(path: Path, name: str, preset: str | None = None) -> SentencePieceTokenizer:
    """A sentencepiece model, whatever its file name."""
    return SentencePieceTokenizer(path, name)


# Any file no other format claims: sentencepiece models have no fixed name (tokenizer.gemma, bn_spm.model).
SENTENCEPIECE = Format("sentencepiece model", load_sentencepiece, in_folder=("tokenizer.model",), any_file=True)
