"""Fertility targeting: measure a trained tokenizer on the validation slice and move the language shares.

A goal is a characters-per-token floor per language: explicit (``--target bn=4.8,en=4.7``) or parity with a
reference language (``--parity en``: every language within ``tolerance`` of the reference's chars/token).
Between rounds each language's share is multiplied by ``(goal / measured) ** GAIN``: chars/token grows
slowly with a language's share of the vocabulary (roughly as share ** 0.1-0.2), so the correction is steep.
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from dataclasses import asdict, dataclass, field

import fertility

GAIN = 4.0
MIN_SHARE = 0.02


@dataclass
class Goal:
    """What targeting aims for; empty ``targets`` and no ``parity`` means a single, untargeted round."""

    targets: dict[str, float] = field(default_factory=dict)
    parity: str | None = None
    tolerance: float = 1.05
    max_rounds: int = 4

    @property
    def active(self) -> bool:
        return bool(self.targets) or self.parity is not None


@dataclass
class Round:
    """One training round: the shares it used and what the validation slice measured."""

    index: int
    shares: dict[str, float]
    chars_per_token: dict[str, float]
    floors: dict[str, float]
    met: bool
    seconds: float

    def to_dict(self) -> dict:
        return asdict(self)


class TargetNotMet(RuntimeError):
    """Targeting used every round without meeting the goal; ``rounds`` says what was tried."""

    def __init__(self, rounds: list[Round], goal: Goal) -> None:
        self.rounds = rounds
        super().__init__(f"target not met after {len(rounds)} rounds (limit {goal.max_rounds}):\n" + rounds_table(rounds))


def parse_targets(spec: str) -> dict[str, float]:
    """``"bn=4.8,en=4.7"`` -> ``{"bn": 4.8, "en": 4.7}``."""
    targets = {}
    for item in filter(None, (s.strip() for s in spec.split(","))):
        lang, sep, value = item.partition("=")
        try:
            targets[lang.strip()] = float(value)
        except ValueError:
            sep = ""
        if not sep or not lang.strip() or targets.get(lang.strip(), 0) <= 0:
            raise ValueError(f"--target: expected LANG=CHARS_PER_TOKEN[,LANG=...] with positive numbers, got {item!r}")
    return targets


def check_goal(goal: Goal, langs: Sequence[str]) -> None:
    """Raise ValueError when the goal names a language that has no text."""
    named = set(goal.targets) | ({goal.parity} if goal.parity else set())
    unknown = named - set(langs)
    if unknown:
        raise ValueError(f"targets name {sorted(unknown)}, but --text gives only {sorted(langs)}")
    if goal.max_rounds < 1:
        raise ValueError(f"the round limit must be at least 1, got {goal.max_rounds}")
    if goal.tolerance < 1:
        raise ValueError(f"parity tolerance must be >= 1, got {goal.tolerance}")


def floors(goal: Goal, measured: Mapping[str, float]) -> dict[str, float]:
    """The chars/token each language must reach, given this round's measurement (parity moves with it)."""
    out = dict(goal.targets)
    if goal.parity:
        ref = measured[goal.parity] / goal.tolerance
        for lang in measured:
            if lang != goal.parity:
                out[lang] = max(out.get(lang, 0.0), ref)
    return out


def measure(tokenizer: str, validation: Mapping[str, list[str]]) -> dict[str, float]:
    """Characters per token of ``tokenizer`` on each language's validation text (via ``fertility``)."""
    report = fertility.analyze([tokenizer], dict(validation), progress=False)
    return {lang: m.chars_per_token for lang, m in report.tokenizers[0].languages.items()}


def next_shares(shares: Mapping[str, float], measured: Mapping[str, float], floor: Mapping[str, float]) -> dict[str, float]:
    """Give more of the sample to languages under their floor, less to those comfortably over it."""
    raw = {}
    for lang, share in shares.items():
        goal = floor.get(lang, measured[lang])
        raw[lang] = max(MIN_SHARE, share * (goal / measured[lang]) ** GAIN)
    total = sum(raw.values())
    return {k: v / total for k, v in raw.items()}


def rounds_table(rounds: Sequence[Round]) -> str:
    """A plain-text table of the rounds: shares, measured chars/token and floors per language."""
    langs = list(rounds[0].shares) if rounds else []
    head = ["round"] + [f"share {k}" for k in langs] + [f"cpt {k} (floor)" for k in langs] + ["met"]
    rows = [head]
    for r in rounds:
        rows.append([str(r.index)] + [f"{r.shares[k]:.3f}" for k in langs]
                    + [f"{r.chars_per_token[k]:.3f} ({r.floors[k]:.2f})" if k in r.floors else f"{r.chars_per_token[k]:.3f}"
                       for k in langs] + ["yes" if r.met else "no"])
    widths = [max(len(row[i]) for row in rows) for i in range(len(head))]
    return "\n".join("  ".join(c.rjust(w) for c, w in zip(row, widths, strict=True)) for row in rows)
