"""Traps: scripts a tokenizer treats badly, each with its cause in words.

Rules, applied to every script with enough text to judge (``MIN_CHARS`` characters and ``MIN_SHARE`` of the
analysed characters):

* ``low_chars_per_token``: chars/token below ``LOW_FRACTION_OF_LATIN`` of Latin's (when Latin was analysed);
* ``low_pretoken_ceiling``: the pre-tokenizer's ceiling under ``MIN_CEILING`` characters per piece, so no
  vocabulary behind it can do better;
* ``broken_graphemes``: more than ``MAX_BROKEN_GRAPHEME_RATE`` of token boundaries inside a grapheme cluster;
* ``unk`` / ``byte_fallback``: more than ``MAX_UNK_RATE`` UNK tokens or ``MAX_BYTE_FALLBACK_RATE`` byte pieces.

A script with a share of the text but under ``MIN_CHARS`` characters is not judged: its verdict says "not enough
text to judge", never OK. Across the tokenizers of one report, a language where a tokenizer reaches under
``MIN_FRACTION_OF_BEST`` of the best other tokenizer's chars/token on the same text is a :class:`Drop`.
:func:`verdicts` puts the three together per tokenizer.
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from dataclasses import asdict, dataclass
from typing import Protocol

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
# Scripts no rule judges: punctuation, digits and marks shared by every script.
SHARED_SCRIPTS = ("Common", "Inherited", "Unknown")
# A language is flagged where a tokenizer's chars/token falls under this fraction of the best other tokenizer's
# on the same text: 0.8 is a quarter more tokens (1 / 0.8) for the same text. Comparable tokenizers differ by a
# few percent (o200k and cl100k on English); a tokenizer trained for another language mix falls further.
MIN_FRACTION_OF_BEST = 0.8


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


def _shares(scripts: Mapping[str, Metrics]) -> tuple[float, list[tuple[str, Metrics]]]:
    """The analysed characters in all, and the scripts the rules look at (a share of the text, no shared script)."""
    total = sum(m.chars for m in scripts.values())
    return total, [(s, m) for s, m in scripts.items()
                   if s not in SHARED_SCRIPTS and m.chars and m.chars >= MIN_SHARE * total]


def find_traps(scripts: Mapping[str, Metrics]) -> list[Trap]:
    """Apply the rules above to a tokenizer's per-script metrics."""
    latin = scripts.get("Latin")
    latin_cpt = latin.chars_per_token if latin and latin.chars >= MIN_CHARS else None
    traps: list[Trap] = []
    for script, m in _shares(scripts)[1]:
        if m.chars < MIN_CHARS:
            continue
        ceiling_low = m.pretokens > 0 and m.pretoken_ceiling < MIN_CEILING
        if latin_cpt and script != "Latin" and m.chars_per_token < LOW_FRACTION_OF_LATIN * latin_cpt:
            if ceiling_low:  # the low_pretoken_ceiling trap below gives the pre-tokenizer's cause
                cause = f"capped by the pre-tokenizer at {m.pretoken_ceiling:.2f} (see low_pretoken_ceiling)"
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


@dataclass
class ShortScript:
    """A script with a share of the text but fewer than ``MIN_CHARS`` characters: no rule judges it."""

    script: str
    chars: int
    needed: int = MIN_CHARS

    def to_dict(self) -> dict:
        return asdict(self)


def short_scripts(scripts: Mapping[str, Metrics]) -> list[ShortScript]:
    """The scripts the rules would look at but that have too little text to judge."""
    return [ShortScript(s, m.chars) for s, m in _shares(scripts)[1] if m.chars < MIN_CHARS]


@dataclass
class Drop:
    """A language where a tokenizer reaches under ``MIN_FRACTION_OF_BEST`` of the chars/token of the best other
    tokenizer measured on the same text."""

    lang: str
    value: float
    best: float
    best_tokenizer: str

    @property
    def cause(self) -> str:
        return (f"{1 - self.value / self.best:.0%} fewer characters per token than {self.best_tokenizer} "
                f"({self.value:.2f} against {self.best:.2f})")

    def to_dict(self) -> dict:
        return {"lang": self.lang, "value": round(self.value, 6), "best": round(self.best, 6),
                "best_tokenizer": self.best_tokenizer, "threshold": round(MIN_FRACTION_OF_BEST * self.best, 6),
                "cause": self.cause}


def find_drops(name: str, languages: Mapping[str, Mapping[str, Metrics]]) -> list[Drop]:
    """The drops of tokenizer ``name`` against the others of ``languages`` (tokenizer -> language -> metrics,
    all on the same text), in languages with at least ``MIN_CHARS`` characters."""
    drops = []
    for lang, m in languages[name].items():
        others = [(o[lang].chars_per_token, other) for other, o in languages.items()
                  if other != name and lang in o]
        if m.chars < MIN_CHARS or not others:
            continue
        best, best_name = max(others)
        if m.chars_per_token < MIN_FRACTION_OF_BEST * best:
            drops.append(Drop(lang, m.chars_per_token, best, best_name))
    return drops


@dataclass
class Verdict:
    """One tokenizer's verdict: its traps, its drops against the other tokenizers, the scripts with too little
    text to judge, and whether any script had enough (``judged``: False means nothing was judged at all)."""

    traps: list[Trap]
    drops: list[Drop]
    short: list[ShortScript]
    judged: bool

    @property
    def text(self) -> str:
        """In plain words: per script its traps ("Bengali: cuts inside letters"), per language its drop, the
        scripts with too little text; "not enough text to judge" when no script had enough; else OK."""
        if not self.judged:
            have = ", ".join(f"{s.chars:,} characters of {s.script}" for s in self.short) or "no letters of any script"
            return f"not enough text to judge: {have} (the rules need {MIN_CHARS:,} characters of a script)"
        found: dict[str, list[str]] = {}
        for trap in self.traps:
            found.setdefault(trap.script, []).append(RULE_WORDS.get(trap.rule, trap.rule))
        parts = [f"{script}: {', '.join(words)}" for script, words in found.items()]
        parts += [f"{d.lang}: {d.cause}" for d in self.drops]
        parts += [f"{s.script}: not enough text to judge ({s.chars:,} of the {s.needed:,} characters needed)"
                  for s in self.short]
        return "; ".join(parts) or "OK"

    def to_dict(self) -> dict:
        return {"verdict": self.text, "judged": self.judged, "drops": [d.to_dict() for d in self.drops], "not_enough_text": [s.to_dict() for s in self.short]}


# The trap rules in plain words, for the verdict.
RULE_WORDS = {
    "low_chars_per_token": "few characters per token",
    "low_pretoken_ceiling": "the pre-tokenizer caps it",
    "broken_graphemes": "cuts inside letters",
    "unk": "unknown tokens",
    "byte_fallback": "falls back to bytes",
}


class Judged(Protocol):
    """What a verdict reads of one tokenizer's report (``fertility.analysis.TokenizerReport``, which sits above
    this module)."""

    name: str
    scripts: Mapping[str, Metrics]
    languages: Mapping[str, Mapping[str, Metrics]]
    traps: list[Trap]


def verdicts(tokenizers: Sequence[Judged]) -> dict[str, Verdict]:
    """The verdict of each tokenizer of a report, by name (drops are against the report's other tokenizers)."""
    languages = {t.name: t.languages for t in tokenizers}
    out = {}
    for t in tokenizers:
        judged = any(m.chars >= MIN_CHARS for _, m in _shares(t.scripts)[1])
        out[t.name] = Verdict(t.traps, find_drops(t.name, languages) if judged else [], short_scripts(t.scripts),
                              judged)
    return out
