"""The mixture planner: how many tokens of each source go into the training split.

Budgets are in tokens of the chosen tokenizer. A language's share comes either from an explicit mixture
(``--mix bn=0.7,en=0.3``) or from a sampling temperature over the available tokens (``p ~ n**(1/T)``).
Each language's target is spread over its sources in proportion to their size, so every source of a language
is repeated the same number of times (its repetition factor, in epochs). No source is repeated more than
``max_epochs`` times (UniMax, Chung et al. 2023):

* with an explicit mixture the shares are what the user asked for, so a language over its cap shrinks the
  whole budget, keeping the shares, and the plan warns with the numbers;
* with a temperature, the tokens a capped language cannot take go to the other languages in proportion
  to their shares, and the budget only shrinks when every language is capped.
"""

from __future__ import annotations

from dataclasses import asdict, dataclass, field

from common.cli import parse_lang_numbers
from common.errors import InputError
from corpus.config import PlanError

# How far a language's share of the training tokens written may miss its planned share (absolute, as a
# fraction of the training tokens) before the build warns (``--strict-mix``: refuses) and ``corpus inspect
# --recount`` fails. Documents stay whole, so a small build misses by up to about half a document per source:
# the 40,000-token sample build of tests/corpus/test_build.py (documents of ~1% of it) misses by 0.0034.
SHARE_TOLERANCE = 0.01


@dataclass
class SourceSupply:
    """Training tokens one source offers (after cleaning, dedup and the validation hold-out)."""

    name: str
    language: str
    documents: int
    tokens: int


@dataclass
class SourcePlan:
    name: str
    language: str
    available_tokens: int
    target_tokens: int
    epochs: float  # repetition factor: target / available


@dataclass
class Plan:
    """The planned training mixture. ``shares`` are fractions of ``planned_tokens`` per language."""

    requested_tokens: int
    planned_tokens: int
    method: str  # "mix" or "temperature"
    max_epochs: float
    temperature: float | None
    shares: dict[str, float]
    sources: list[SourcePlan]
    warnings: list[str] = field(default_factory=list)

    def to_dict(self) -> dict:
        return asdict(self)

    def language_targets(self) -> dict[str, int]:
        out: dict[str, int] = {}
        for s in self.sources:
            out[s.language] = out.get(s.language, 0) + s.target_tokens
        return out


def parse_mix(text: str) -> dict[str, float]:
    """``"bn=0.7,en=0.3"`` -> ``{"bn": 0.7, "en": 0.3}``; shares must be non-negative and sum to 1."""
    try:
        mix = parse_lang_numbers(text, option="--mix", number="SHARE")
    except InputError as e:
        raise PlanError(str(e)) from None
    total = sum(mix.values())
    if abs(total - 1.0) > 1e-6:
        raise PlanError(f"--mix shares sum to {total:g}, expected 1 ({text})")
    return mix


def _check_languages(mix: dict[str, float], languages: set[str]) -> None:
    """Every --mix language must have a source and every source language a share (it may be 0)."""
    unknown = sorted(set(mix) - languages)
    if unknown:
        raise PlanError(f"--mix names {', '.join(unknown)}, which no --source provides; "
                        f"the sources' languages are {', '.join(sorted(languages))}")
    missing = sorted(languages - set(mix))
    if missing:
        raise PlanError(f"--source languages {', '.join(missing)} have no share in --mix; "
                        f"give them one (it may be 0) or drop those sources")


def _language_supply(supply: list[SourceSupply]) -> dict[str, int]:
    out: dict[str, int] = {}
    for s in supply:
        out[s.language] = out.get(s.language, 0) + s.tokens
    return out


def _temperature_shares(available: dict[str, int], temperature: float) -> dict[str, float]:
    weights = {lang: n ** (1.0 / temperature) for lang, n in available.items()}
    total = sum(weights.values())
    return {lang: w / total for lang, w in weights.items()}


def _mix_targets(shares: dict[str, float], available: dict[str, int], budget: int, max_epochs: float,
                 warnings: list[str]) -> dict[str, float]:
    """Targets honouring the shares exactly; the budget shrinks until no language exceeds its cap."""
    scale = 1.0
    for lang, share in shares.items():
        if share == 0:
            continue
        need = share * budget / available[lang]
        if need > max_epochs:
            warnings.append(
                f"{lang}: {share:.1%} of {budget:,} tokens = {share * budget:,.0f} tokens needs {need:.2f} epochs of "
                f"its {available[lang]:,} available tokens, over --max-epochs {max_epochs:g}")
            scale = min(scale, max_epochs / need)
    if scale < 1.0:
        warnings.append(f"keeping the mixture, the plan shrinks from {budget:,} to {int(budget * scale):,} tokens; "
                        f"add data, raise --max-epochs or lower --tokens")
    return {lang: share * budget * scale for lang, share in shares.items()}


def _unimax_targets(shares: dict[str, float], available: dict[str, int], budget: int, max_epochs: float,
                    warnings: list[str]) -> dict[str, float]:
    """Targets from shares with caps; a capped language's leftover goes to the uncapped ones by share."""
    targets: dict[str, float] = {}
    open_langs = {lang for lang, s in shares.items() if s > 0}
    remaining = float(budget)
    while open_langs:
        weight = sum(shares[lang] for lang in open_langs)
        capped = {lang for lang in open_langs
                  if remaining * shares[lang] / weight > max_epochs * available[lang]}
        if not capped:
            for lang in open_langs:
                targets[lang] = remaining * shares[lang] / weight
            break
        for lang in capped:
            targets[lang] = max_epochs * available[lang]
            warnings.append(f"{lang}: capped at {max_epochs:g} epochs = {targets[lang]:,.0f} tokens; "
                            f"the rest of its share goes to the other languages")
            remaining -= targets[lang]
        open_langs -= capped
    for lang in shares:
        targets.setdefault(lang, 0.0)
    planned = sum(targets.values())
    if planned < budget - 0.5:
        warnings.append(f"every language is at its cap: the plan has {planned:,.0f} of the {budget:,} tokens requested")
    return targets


def check_mixture(tokens: int, *, mix: dict[str, float] | None, temperature: float | None, max_epochs: float,
                  languages: set[str]) -> None:
    """The plan's arguments, which a build checks before any work: one of mix and temperature, all numbers
    positive, and a mix that gives each of the sources' ``languages`` a share and no other language one."""
    if (mix is None) == (temperature is None):
        raise PlanError("give exactly one of --mix and --temperature")
    if tokens <= 0:
        raise PlanError(f"--tokens must be > 0, got {tokens}")
    if max_epochs <= 0:
        raise PlanError(f"--max-epochs must be > 0, got {max_epochs}")
    if temperature is not None and temperature <= 0:
        raise PlanError(f"--temperature must be > 0, got {temperature}")
    if mix is not None:
        _check_languages(mix, languages)


def plan_mixture(supply: list[SourceSupply], tokens: int, *, mix: dict[str, float] | None = None,
                 temperature: float | None = None, max_epochs: float = 4.0) -> Plan:
    """Plan ``tokens`` training tokens over ``supply`` by an explicit ``mix`` or a ``temperature``."""
    available = _language_supply(supply)
    check_mixture(tokens, mix=mix, temperature=temperature, max_epochs=max_epochs, languages=set(available))
    warnings: list[str] = []
    if mix is not None:
        empty = sorted(lang for lang, share in mix.items() if share > 0 and available[lang] == 0)
        if empty:
            raise PlanError(f"{', '.join(empty)}: no tokens left after cleaning and dedup, but --mix gives a share")
        shares = dict(mix)
        targets = _mix_targets(shares, available, tokens, max_epochs, warnings)
        method = "mix"
    else:
        shares = _temperature_shares(available, temperature)
        targets = _unimax_targets(shares, available, tokens, max_epochs, warnings)
        method = "temperature"
    plans = []
    for s in supply:
        lang_target = targets[s.language]
        epochs = lang_target / available[s.language] if available[s.language] else 0.0
        plans.append(SourcePlan(name=s.name, language=s.language, available_tokens=s.tokens,
                                target_tokens=round(epochs * s.tokens), epochs=epochs))
    planned = sum(p.target_tokens for p in plans)
    final_shares = {lang: sum(p.target_tokens for p in plans if p.language == lang) / planned if planned else 0.0
                    for lang in sorted(available)}
    return Plan(requested_tokens=tokens, planned_tokens=planned, method=method, max_epochs=max_epochs,
                temperature=temperature, shares=final_shares, sources=plans, warnings=warnings)


def share_misses(tokens: dict[str, int], shares: dict[str, float]) -> list[str]:
    """One line per language whose share of ``tokens`` (training tokens per language) misses its planned share
    by more than :data:`SHARE_TOLERANCE`."""
    total = sum(tokens.values())
    lines = []
    for language, planned in sorted(shares.items()):
        got = tokens.get(language, 0) / total if total else 0.0
        if abs(got - planned) > SHARE_TOLERANCE:
            lines.append(f"{language}: the training shards hold {got:.2%} of the tokens, the plan {planned:.2%} (off "
                         f"by {abs(got - planned):.4f}, over the tolerance {SHARE_TOLERANCE:g}: documents stay "
                         "whole, and few long ones miss a small target; add text or raise --tokens)")
    return lines


def planned_language_tokens(plan: dict) -> dict[str, int]:
    """Training tokens per language that a manifest's ``plan`` (and, after --append, its ``previous`` plans) targets."""
    out = planned_language_tokens(plan["previous"]) if plan.get("previous") else {}
    for source in plan.get("sources", []):
        out[source["language"]] = out.get(source["language"], 0) + source["target_tokens"]
    return out


def format_plan(plan: Plan) -> str:
    """The plan as a text table: per source, available tokens, target tokens and repetition factor."""
    width = max([len("source")] + [len(s.name) for s in plan.sources])
    lines = [f"plan ({plan.method}{'' if plan.temperature is None else f', T={plan.temperature:g}'}, "
             f"max {plan.max_epochs:g} epochs): {plan.planned_tokens:,} of {plan.requested_tokens:,} tokens requested",
             f"{'source':<{width}} {'lang':<6} {'available':>14} {'target':>14} {'epochs':>7}"]
    for s in plan.sources:
        lines.append(f"{s.name:<{width}} {s.language:<6} {s.available_tokens:>14,} {s.target_tokens:>14,} {s.epochs:>7.2f}")
    lines.append("shares: " + ", ".join(f"{lang}={share:.3f}" for lang, share in plan.shares.items()))
    lines.extend(f"WARNING: {w}" for w in plan.warnings)
    return "\n".join(lines)
