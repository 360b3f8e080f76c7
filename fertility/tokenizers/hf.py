"""HF ``tokenizers``: a ``tokenizer.json``, a GPT-2 style ``vocab.json`` + ``merges.txt`` and a WordPiece
``vocab.txt``."""

from __future__ import annotations

import functools
import json
from collections.abc import Sequence
from itertools import chain
from pathlib import Path

import numpy as np
import regex

from fertility.tokenizers.base import (
    BOS_NAMES,
    BYTE_PIECE,
    EOS_NAMES,
    WHITESPACE_PIECES,
    Format,
    Spans,
    Tokenizer,
    TokenizerLoadError,
    byte_lengths,
    char_to_byte_spans,
    close_gaps,
    first_id,
    flatten,
    realigned,
    regex_pieces,
    sha256_files,
    tile,
)
from fertility.tokenizers.pattern_pieces import gpt2_pieces

# HF tokenizers' ByteLevel(use_regex=True) split (GPT-2's pattern, as written in the tokenizers source).
GPT2_PATTERN = r"""'s|'t|'re|'ve|'m|'ll|'d| ?\p{L}+| ?\p{N}+| ?[^\s\p{L}\p{N}]+|\s+(?!\S)|\s+"""
QWEN_PATTERN = (
    r"(?i:'s|'t|'re|'ve|'m|'ll|'d)|[^\r\n\p{L}\p{N}]?\p{L}+|\p{N}| ?[^\s\p{L}\p{N}]+[\r\n]*|\s*[\r\n]+|"
    r"\s+(?!\S)|\s+"
)
_QWEN_SPECIALS = [
    "<|endoftext|>", "<|im_start|>", "<|im_end|>", "<|object_ref_start|>", "<|object_ref_end|>", "<|box_start|>",
    "<|box_end|>", "<|quad_start|>", "<|quad_end|>", "<|vision_start|>", "<|vision_end|>", "<|vision_pad|>",
    "<|image_pad|>", "<|video_pad|>", "<tool_call>", "</tool_call>", "<|fim_prefix|>", "<|fim_middle|>",
    "<|fim_suffix|>", "<|fim_pad|>", "<|repo_name|>", "<|file_sep|>",
]



def bytes_to_unicode() -> dict[int, str]:
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


_BYTE_CHARS = set(bytes_to_unicode().values())


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
        self.fingerprint = sha256_files(files)
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
                self._byte_table[i] = bool(BYTE_PIECE.fullmatch(token))
        self._piece_pattern = _pretokenizer_regex(config.get("pre_tokenizer"))
        specials = {t.content for t in tok.get_added_tokens_decoder().values()}
        self.bos_id = first_id([n for n in BOS_NAMES if n in specials], self.token_to_id)
        self.eos_id = first_id([n for n in EOS_NAMES if n in specials], self.token_to_id)

    @functools.cached_property
    def _byte_len(self) -> np.ndarray:
        """Each token's length in UTF-8 bytes of the text (byte-level models), made on first use: encode_ids,
        all a corpus build calls, never needs it, and a process loading the tokenizer saves the vocabulary loop."""
        byte_len = np.zeros(self.vocab_size, dtype=np.int64)
        if self._byte_level:
            for token, i in self._tok.get_vocab(with_added_tokens=True).items():
                byte_chars = all(c in _BYTE_CHARS for c in token)
                byte_len[i] = len(token) if byte_chars else len(token.encode())
        return byte_len

    def to_json(self) -> str:
        """The wrapped ``tokenizers.Tokenizer`` serialised (a tokenizer.json's content), e.g. for export."""
        return self._tok.to_str()

    def encode_ids(self, texts: Sequence[str]) -> list[list[int]]:
        return [e.ids for e in self._tok.encode_batch_fast(list(texts), add_special_tokens=False)]

    def encode_spans(self, texts: Sequence[str], text_bytes: np.ndarray | None = None) -> Spans:
        texts = list(texts)
        if text_bytes is None:
            text_bytes = byte_lengths(texts)
        normed = None
        if self._byte_level:
            # The normalised text, when the normaliser changes some text's UTF-8 length (decided before
            # encoding, which spares encoding the batch twice, fast and then with offsets, when it does not).
            norm = self._tok.normalizer
            normed = [norm.normalize_str(t) for t in texts] if norm is not None else texts
            normed_bytes = byte_lengths(normed) if norm is not None else text_bytes
            if np.array_equal(normed_bytes, text_bytes):
                ids, counts = flatten(self.encode_ids(texts))
                starts, ends = tile(self._byte_len[ids], counts)
                # each text's tokens, laid end to end, must end where the text does (read off the spans: a
                # per-token sum cost 40 ms of gpt2's 1 M Bangla characters)
                totals = np.zeros(counts.size, dtype=np.int64)
                totals[counts > 0] = ends[(np.cumsum(counts) - 1)[counts > 0]]
                if np.array_equal(totals, text_bytes):
                    unk, byte = self._flags(ids)
                    return Spans(ids, starts, ends, counts, unk, byte)
                normed = None
        # A normaliser changed the text (or the model is not byte-level): use the library's alignment.
        encodings = self._tok.encode_batch(texts, add_special_tokens=False)
        ids, counts = flatten([e.ids for e in encodings])
        offsets = np.fromiter(chain.from_iterable(chain.from_iterable(e.offsets for e in encodings)),
                              dtype=np.int64, count=2 * ids.size).reshape(-1, 2)
        lengths = self._byte_len[ids] if normed is not None else None
        if lengths is not None and np.array_equal(_per_text(lengths, counts), normed_bytes):
            starts, ends = realigned(texts, normed, offsets, tile(lengths, counts)[0], counts, text_bytes)
        else:
            starts, ends = close_gaps(*char_to_byte_spans(texts, offsets, counts), counts, text_bytes)
        unk, byte = self._flags(ids)
        return Spans(ids, starts, ends, counts, unk, byte)

    def decode(self, ids: Sequence[int]) -> str:
        return self._tok.decode(list(ids), skip_special_tokens=False)

    def pretokenize(self, text: str) -> list[tuple[int, int]]:
        if self._piece_pattern is not None:
            return [m.span() for m in self._piece_pattern.finditer(text)]
        pre = self._tok.pre_tokenizer
        if pre is None:
            return [m.span() for m in WHITESPACE_PIECES.finditer(text)]
        return [span for _, span in pre.pre_tokenize_str(text)]

    def pretokenize_batch(self, texts: Sequence[str]) -> tuple[np.ndarray, np.ndarray, np.ndarray]:
        if self._piece_pattern is not None and self._piece_pattern.pattern == GPT2_PATTERN:
            return gpt2_pieces(texts, self._piece_pattern)
        found = regex_pieces(self._piece_pattern, texts) if self._piece_pattern is not None else None
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


def load_tokenizer_json(path: Path, name: str, preset: str | None = None) -> HFTokenizer:
    """An HF ``tokenizer.json`` as it is."""
    from tokenizers import Tokenizer as HFTok

    return HFTokenizer(HFTok.from_file(str(path)), name, "hf", [path])


def load_vocab_merges(vocab: Path, name: str, preset: str | None = None) -> HFTokenizer:
    """A GPT-2 style ``vocab.json`` with ``merges.txt`` beside it: GPT-2's byte-level pre-tokenizer, except the
    name ``qwen2.5`` (Qwen's regex and NFC)."""
    from tokenizers import Regex, decoders, models, normalizers, pre_tokenizers
    from tokenizers import Tokenizer as HFTok

    merges = vocab.with_name("merges.txt")
    if not merges.exists():
        raise TokenizerLoadError(f"{vocab}: expected merges.txt beside it for a GPT-2 style BPE")
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


def load_wordpiece(vocab: Path, name: str, preset: str | None = None) -> HFTokenizer:
    """A WordPiece ``vocab.txt``, one token per line."""
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


TOKENIZER_JSON = Format("HF tokenizer.json", load_tokenizer_json, in_folder=("tokenizer.json",), suffixes=(".json",))
VOCAB_MERGES = Format("GPT-2 style vocab.json + merges.txt", load_vocab_merges, in_folder=("vocab.json",),
                      companions=("merges.txt",), names=("vocab.json",))
WORDPIECE = Format("WordPiece vocab.txt", load_wordpiece, in_folder=("vocab.txt",), suffixes=(".txt",))


def _per_text(lengths: np.ndarray, counts: np.ndarray) -> np.ndarray:
    """Each text's sum of its tokens' ``lengths``."""
    return np.bincount(np.repeat(np.arange(counts.size), counts), weights=lengths, minlength=counts.size)
