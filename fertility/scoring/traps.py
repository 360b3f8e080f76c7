"""Traps: scripts a tokenizer treats badly, each with its cause in words.

Rules, applied to every script with enough text to judge (``MIN_CHARS`` characters and ``MIN_SHARE`` of the
analysed characters):

* ``low_chars_per_token``: chars/token below ``LOW_FRACTION_OF_LATIN`` of Latin's (when Latin was analysed);
* ``low_pretoken_ceiling``: the pre-tokenizer's ceiling under ``MIN_CEILING`` characters per piece, so no
  vocabulary behind it can do better;
* ``broken_graphemes``: more than ``MAX_BROKEN_GRAPHEME_RATE`` of token boundaries inside a grapheme cluster;
* ``unk`` / ``byte_fallback``: more than ``MAX_UNK_RATE`` UNK tokens or ``MAX_BYTE_FALLBACK_RATE`` byte pieces.
"""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import asdict, dataclass

from fertility.scoring.metrics import Metrics

LOW_FRACTION_OF_LATIN = 0.5
MIN_CEILING = 2.5
MAX_BROKEN_GRAPHEME_RATE = 0.10
MAX_UNK_RATE = 0.01
MAX_BYTE_FALLBACK_RATE = 0.05
MIN_CHARS = 500
MIN_SHARE = 0.01
# A pre-tokenizer that leaves a combining mark at the start of this share of its pieces is cutting marks off.
MARK_SPLIT_SHARE = 0.05


@dataclass
class Trap:
    """One rule that fired for one script: the measured value, the threshold it crossed, and why."""

    script: str
    rule: str
    value: float
    threshold: float
    cause: str

    def to_dict(self) -> dict:
        d = asdict(self)
        d["value"], d["threshold"] = round(self.value, 6), round(self.threshold, 6)
        return d


def pretokenizer_cause(m: Metrics) -> str:
    """Why the pre-tokenizer caps this script's chars/token, in words."""
    if m.pretokens and m.mark_splits / m.pretokens >= MARK_SPLIT_SHARE:
        return (
            "the pre-tokenizer splits combining marks (\\p{M}: vowel signs, hasanta, nukta) from their letters, "
            f"so no vocabulary can merge them back: at most {m.pretoken_ceiling:.2f} characters per token"
        )
    return f"the pre-tokenizer cuts this script's words into short pieces ({m.pretoken_ceiling:.2f} characters each)"


def find_traps(scripts: Mapping[str, Metrics]) -> list[Trap]:
    """Apply the rules above to a tokenizer's per-script metrics."""
    total = sum(m.chars for m in scripts.values())
    latin = scripts.get("Latin")
    latin_cpt = latin.chars_per_token if latin and latin.chars >= MIN_CHARS else None
    traps: list[Trap] = []
    for script, m in scripts.items():
        if script in ("Common", "Inherited", "Unknown") or m.chars < MIN_CHARS or m.chars < MIN_SHARE * total:
            continue
        ceiling_low = m.pretokens > 0 and m.pretoken_ceiling < MIN_CEILING
        if latin_cpt and script != "Latin" and m.chars_per_token < LOW_FRACTION_OF_LATIN * latin_cpt:
            if ceiling_low:
                cause = pretokenizer_cause(m)
            else:
                cause = (f"the vocabulary has few tokens for this script: the pre-tokenizer allows "
                         f"{m.pretoken_ceiling:.2f} characters per token, the vocabulary reaches {m.chars_per_token:.2f}")
            traps.append(Trap(script, "low_chars_per_token", m.chars_per_token, LOW_FRACTION_OF_LATIN * latin_cpt,
                              f"{m.chars_per_token:.2f} characters per token against Latin's {latin_cpt:.2f}: {cause}"))
        if ceiling_low:
            traps.append(Trap(script, "low_pretoken_ceiling", m.pretoken_ceiling, MIN_CEILING, pretokenizer_cause(m)))
        if m.broken_grapheme_rate > MAX_BROKEN_GRAPHEME_RATE:
            if m.split_char_boundaries * 2 > m.broken_boundaries:
                cause = "tokens cut characters into raw UTF-8 bytes: the vocabulary lacks whole characters of this script"
            else:
                cause = "token boundaries separate vowel signs, hasanta or nukta from their letters"
            traps.append(Trap(script, "broken_graphemes", m.broken_grapheme_rate, MAX_BROKEN_GRAPHEME_RATE,
                              f"{m.broken_grapheme_rate:.0%} of token boundaries fall inside a grapheme cluster: {cause}"))
        if m.unk_rate > MAX_UNK_RATE:
            traps.append(Trap(script, "unk", m.unk_rate, MAX_UNK_RATE,
                              f"{m.unk_rate:.1%} of tokens are UNK: the vocabulary lacks characters of this script, "
                              "so text is lost"))
        if m.byte_fallback_rate > MAX_BYTE_FALLBACK_RATE:
            traps.append(Trap(script, "byte_fallback", m.byte_fallback_rate, MAX_BYTE_FALLBACK_RATE,
                              f"{m.byte_fallback_rate:.1%} of tokens are byte-fallback pieces: characters missing "
                              "from the vocabulary are spelled byte by byte"))
    return traps
