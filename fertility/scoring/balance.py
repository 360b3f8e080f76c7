"""The balance view: each language's share of the text in characters, bytes and tokens, side by side.

A corpus balanced in characters or bytes is not balanced in tokens: a language the tokenizer treats badly
takes a larger share of the tokens (and so of the training steps) than of the text. When one language has
more characters than another but fewer tokens, the token shares invert the character shares: a warning.
"""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass, field

from fertility.scoring.metrics import Metrics


@dataclass
class Balance:
    """Shares (0..1) per language, and the inversions found."""

    char_share: dict[str, float]
    byte_share: dict[str, float]
    token_share: dict[str, float]
    warnings: list[str] = field(default_factory=list)

    def to_dict(self) -> dict:
        def r(d):
            return {k: round(v, 6) for k, v in d.items()}

        return {"char_share": r(self.char_share), "byte_share": r(self.byte_share),
                "token_share": r(self.token_share), "warnings": list(self.warnings)}


def balance(languages: Mapping[str, Metrics]) -> Balance:
    """Shares of characters, bytes and tokens per language, with a warning for each inverted pair."""

    def shares(attr: str) -> dict[str, float]:
        total = sum(getattr(m, attr) for m in languages.values())
        return {lang: (getattr(m, attr) / total if total else 0.0) for lang, m in languages.items()}

    chars, tokens = shares("chars"), shares("tokens")
    out = Balance(chars, shares("bytes"), tokens)
    for a in languages:
        for b in languages:
            if chars[a] > chars[b] and tokens[a] < tokens[b]:
                out.warnings.append(
                    f"token shares invert character shares: {a} has {chars[a]:.1%} of the characters but "
                    f"{tokens[a]:.1%} of the tokens, {b} has {chars[b]:.1%} of the characters but {tokens[b]:.1%} "
                    f"of the tokens"
                )
    return out
