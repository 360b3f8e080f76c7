"""The sizes of a set of documents: how many, their characters, UTF-8 bytes and tokens.

The analyzer keeps one per language, exact whatever share of it is analysed in detail (``fertility.scoring.sampling``);
the corpus builder one per source, language and split, with the token counts of its comparison tokenizers
beside the build's own (``corpus.mixture.measure``).
"""

from __future__ import annotations

from dataclasses import dataclass, field


@dataclass
class Totals:
    """Sizes of a set of documents."""

    documents: int = 0
    chars: int = 0  # code points
    bytes: int = 0  # UTF-8
    tokens: int = 0  # of the tokenizer in question
    compare: dict[str, int] = field(default_factory=dict)  # of other tokenizers, by name

    def add(self, other: Totals) -> None:
        self.documents += other.documents
        self.chars += other.chars
        self.bytes += other.bytes
        self.tokens += other.tokens
        for name, n in other.compare.items():
            self.compare[name] = self.compare.get(name, 0) + n

    def units(self, tokenizer: str) -> dict[str, int]:
        """Every size of these documents, keyed by unit name (``tokens:<tokenizer>`` for token counts)."""
        out = {"documents": self.documents, "chars": self.chars, "bytes": self.bytes, f"tokens:{tokenizer}": self.tokens}
        out.update({f"tokens:{name}": n for name, n in self.compare.items()})
        return out
