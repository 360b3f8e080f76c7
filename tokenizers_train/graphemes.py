"""Whole-grapheme BPE: merges learned over grapheme units, written back as an ordinary byte-level BPE model.

Byte-level BPE starts from bytes, so nothing stops it from learning ``"ার"`` (a vowel sign glued to the next
letter): the pre-tokenizer keeps words whole, yet a merge can still cut a cluster inside the word. Here the
initial symbols are *units*: a character that is not a mark, with every combining mark (``\\p{M}``), ZWJ and
ZWNJ after it (``কা``, ``ক্``, ``য়ে``, ``র\\u200d্``). Each unit becomes one private-use character and HF's
``BpeTrainer`` runs over those, so every token it learns is a run of whole units and starts with a character
that is not a mark. The model is then translated back to bytes: first, for every unit, the merges that
build its characters from their UTF-8 bytes and then the unit from its characters, left to right; after
them the learned merges. A merge of the first kind always has a continuation byte or a mark on its right,
which only ever belongs to the same character or unit as its left side, so these merges cannot fire across
units, and the learned merges then see exactly the units they were trained on.

A unit is the legacy grapheme cluster (base + marks), not ``\\X``: ``\\X`` also joins a conjunct across the
hasanta (``ক্ষ``, GB9c), and building such a cluster left to right would race with merges of its second
consonant (``ষা``). BPE learns ``ক্`` + ``ষ`` as an ordinary merge instead.

Units seen fewer than ``min_frequency`` times, and units that start with a mark (a mark with nothing to attach
to, e.g. at the start of a line), are left out with the pieces that hold them: such a piece is rare by
definition, and keeping it would let BPE learn a token starting with a mark. At encoding time such text still
round-trips (bytes), it is only not merged.
"""

from __future__ import annotations

import json
from collections import Counter
from collections.abc import Iterable, Iterator

import regex
from tokenizers import Tokenizer, models, pre_tokenizers, trainers
from tqdm.auto import tqdm

from fertility.tokenizers.hf import bytes_to_unicode
from tokenizers_train.pretokenize import SCRIPT_AWARE_PATTERN

JOINERS = "\u200c\u200d"  # ZWNJ, ZWJ: they belong to the cluster before them
UNIT = regex.compile(rf"[^\p{{M}}{JOINERS}][\p{{M}}{JOINERS}]*|[\p{{M}}{JOINERS}]+")
MARKS = regex.compile(rf"[\p{{M}}{JOINERS}]")
# Unit symbols for the trainer: one private-use character each (plane 15).
_PUA_BASE = 0xF0000
_PUA_SIZE = 0xFFFFE - _PUA_BASE
# The trainer's input: a piece's units, then this separator (the trainer splits on it, so pieces never join).
_SEP = "\n"


_BYTE = bytes_to_unicode()  # GPT-2's printable stand-in for each byte (HF ByteLevel's alphabet)


def to_byte_level(text: str) -> str:
    """``text`` as a byte-level token string (what ``ByteLevel`` makes of its UTF-8 bytes)."""
    return "".join(_BYTE[b] for b in text.encode("utf-8"))


_UNBYTE = {c: b for b, c in _BYTE.items()}


def starts_a_cluster(token: str) -> bool:
    """True when the byte-level token string ``token`` begins with a whole character that is not a mark, ZWJ or
    ZWNJ: false for a lone mark, a continuation byte, a lead byte without its character, a special token."""
    if not token or any(c not in _UNBYTE for c in token):
        return False
    text = bytes(_UNBYTE[c] for c in token).decode("utf-8", errors="replace")
    return text[0] != "\ufffd" and not starts_with_mark(text)


def starts_with_mark(text: str) -> bool:
    """True when ``text`` begins with a combining mark, ZWJ or ZWNJ (a token that cut a cluster)."""
    return bool(text) and MARKS.match(text) is not None


def count_pieces(lines: Iterable[str], progress: bool) -> Counter:
    """How often each pre-tokenizer piece (:data:`SCRIPT_AWARE_PATTERN`) occurs in ``lines``."""
    pattern = regex.compile(SCRIPT_AWARE_PATTERN)
    counts: Counter = Counter()
    for line in tqdm(lines, desc="whole graphemes: counting pieces", unit=" lines", disable=not progress,
                     mininterval=1.0):
        counts.update(pattern.findall(line))
    return counts


def train_whole_grapheme_bpe(lines: Iterable[str], vocab_size: int, special_tokens: list[str], *,
                             min_frequency: int = 2, max_token_length: int | None = None,
                             show_progress: bool = True) -> tuple[dict[str, int], list]:
    """Byte-level BPE ``(vocab, merges)`` of ``vocab_size`` entries (special tokens first) whose tokens are whole
    units (at most ``max_token_length`` units each); raises ValueError when the units alone do not fit in
    ``vocab_size``."""
    pieces = count_pieces(lines, show_progress)
    unit_counts: Counter = Counter()
    split = {}
    for piece, n in pieces.items():
        units = UNIT.findall(piece)
        split[piece] = units
        for u in units:
            unit_counts[u] += n
    kept = sorted((u for u, n in unit_counts.items() if n >= min_frequency and not starts_with_mark(u)),
                  key=lambda u: (-unit_counts[u], u))
    if len(kept) > _PUA_SIZE:
        raise ValueError(f"whole graphemes: {len(kept)} distinct units, more than the {_PUA_SIZE} symbols available")
    symbol = {u: chr(_PUA_BASE + i) for i, u in enumerate(kept)}

    vocab: dict[str, int] = {}
    merges: list[tuple[str, str]] = []
    for token in special_tokens:
        vocab.setdefault(token, len(vocab))
    for b in range(256):
        vocab.setdefault(_BYTE[b], len(vocab))
    for unit in kept:
        _add_unit_chain(unit, vocab, merges)
    n_learned = vocab_size - len(vocab)
    if n_learned < 0:
        raise ValueError(f"whole graphemes: the {len(kept)} units of the text and their building blocks need "
                         f"{len(vocab)} tokens, more than the vocabulary of {vocab_size}; give a larger vocabulary "
                         "(or --whole-graphemes off)")

    def sequences() -> Iterator[str]:
        for piece, n in pieces.items():
            units = split[piece]
            if all(u in symbol for u in units):
                # the trainer counts words itself; repeating the piece n times gives it its frequency
                yield ("".join(symbol[u] for u in units) + _SEP) * n

    trainer_tok = Tokenizer(models.BPE())
    trainer_tok.pre_tokenizer = pre_tokenizers.Split(_SEP, behavior="removed")
    kwargs = {"max_token_length": max_token_length} if max_token_length else {}
    trainer = trainers.BpeTrainer(vocab_size=len(kept) + n_learned, min_frequency=min_frequency,
                                  show_progress=show_progress, **kwargs)
    trainer_tok.train_from_iterator(sequences(), trainer, length=len(pieces))
    text_of = {s: to_byte_level(u) for u, s in symbol.items()}

    def decode(symbols: str) -> str:
        return "".join(text_of[c] for c in symbols)

    for merge in json.loads(trainer_tok.to_str())["model"]["merges"]:
        if len(vocab) >= vocab_size:  # a unit seen only in left-out pieces gave the trainer a spare merge
            break
        a, b = merge if isinstance(merge, list) else merge.split(" ", 1)
        left, right = decode(a), decode(b)
        if left + right not in vocab:
            vocab[left + right] = len(vocab)
            merges.append((left, right))
    return vocab, merges


def _add_unit_chain(unit: str, vocab: dict[str, int], merges: list[tuple[str, str]]) -> None:
    """Merges that build ``unit`` from bytes: each character from its UTF-8 bytes, then the unit from its
    characters, both left to right (see the module docstring for why they cannot fire across units)."""
    for ch in unit:
        encoded = to_byte_level(ch)
        for k in range(2, len(encoded) + 1):
            _add_merge(encoded[:k - 1], encoded[k - 1], vocab, merges)
    built = to_byte_level(unit[0])
    for ch in unit[1:]:
        nxt = to_byte_level(ch)
        _add_merge(built, nxt, vocab, merges)
        built += nxt


def _add_merge(left: str, right: str, vocab: dict[str, int], merges: list[tuple[str, str]]) -> None:
    if left + right not in vocab:
        vocab[left + right] = len(vocab)
        merges.append((left, right))


def mark_chars(text: str) -> int:
    """How many combining marks, ZWJ and ZWNJ ``text`` holds (whole-grapheme training is on by default for
    text that has them)."""
    return len(MARKS.findall(text))
