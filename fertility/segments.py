"""One text's tokens, each marked with whether it holds whole characters and whether it starts inside a
grapheme cluster: what a person looks at to see *how* a tokenizer cuts a word (the notebooks render it)."""

from __future__ import annotations

from dataclasses import dataclass
from itertools import accumulate

from fertility.graphemes import clusters
from fertility.tokenizers import Tokenizer


@dataclass(frozen=True)
class TokenSegment:
    """A token of one text. ``label`` is its text, or its bytes in hex when it holds part of a character."""

    token_id: int
    byte_start: int
    byte_end: int
    label: str
    whole_chars: bool  # starts and ends on character boundaries
    cuts_cluster: bool  # starts inside a grapheme cluster (a vowel sign, hasanta or nukta cut from its letter)
    unk: bool = False  # the tokenizer's UNK token
    byte_fallback: bool = False  # a byte-fallback piece (<0x..>) of a sentencepiece vocabulary


def token_segments(tokenizer: Tokenizer, text: str) -> list[TokenSegment]:
    """The tokens of ``text`` under ``tokenizer`` with their byte spans, the two boundary flags and the UNK /
    byte-fallback flags."""
    data = text.encode("utf-8")
    char_bounds = set(accumulate((len(c.encode("utf-8")) for c in text), initial=0))
    cluster_bounds = set(accumulate((len(c.encode("utf-8")) for c in clusters(text)), initial=0))
    encoded = tokenizer.encode_batch([text])[0]
    segments = []
    for token_id, (start, end), unk, byte_piece in zip(encoded.ids, encoded.offsets, encoded.unk,
                                                        encoded.byte_fallback, strict=True):
        piece = data[start:end]
        whole = start in char_bounds and end in char_bounds
        segments.append(TokenSegment(
            token_id=token_id, byte_start=start, byte_end=end,
            label=piece.decode("utf-8") if whole else " ".join(f"{b:02x}" for b in piece),
            whole_chars=whole, cuts_cluster=start != 0 and start not in cluster_bounds,
            unk=bool(unk), byte_fallback=bool(byte_piece),
        ))
    return segments
