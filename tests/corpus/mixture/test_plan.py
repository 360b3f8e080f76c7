"""corpus.mixture.plan: mixture in tokens, epoch caps with numbers, temperature with UniMax redistribution."""

from __future__ import annotations

import pytest

from corpus.mixture.plan import PlanError, SourceSupply, format_plan, parse_mix, plan_mixture

SUPPLY = [SourceSupply("bn/a", "bn", 100, 1_000_000), SourceSupply("bn/b", "bn", 50, 3_000_000),
          SourceSupply("en/wiki", "en", 500, 20_000_000)]


def test_parse_mix():
    assert parse_mix("bn=0.7,en=0.3") == {"bn": 0.7, "en": 0.3}
    assert parse_mix(" bn = 0.5 , en=0.5 ,") == {"bn": 0.5, "en": 0.5}
    for bad, msg in [("bn=0.7,en=0.2", "sum to 0.9"), ("bn=x", "not a number"), ("bn", "LANG=SHARE"),
                     ("bn=-0.5,en=1.5", ">= 0"), ("bn=0.5,bn=0.5", "twice"), ("", "expected LANG=SHARE")]:
        with pytest.raises(PlanError, match=msg):
            parse_mix(bad)


def test_mix_hits_targets_and_splits_by_size():
    plan = plan_mixture(SUPPLY, 10_000_000, mix={"bn": 0.7, "en": 0.3})
    targets = {s.name: s.target_tokens for s in plan.sources}
    assert targets["bn/a"] + targets["bn/b"] == pytest.approx(7_000_000, abs=1)
    assert targets["bn/b"] == pytest.approx(3 * targets["bn/a"], abs=2)
    assert targets["en/wiki"] == 3_000_000
    assert plan.sources[0].epochs == pytest.approx(1.75)
    assert plan.shares["bn"] == pytest.approx(0.7)
    assert not plan.warnings


def test_mix_over_cap_warns_with_numbers_and_keeps_shares():
    plan = plan_mixture(SUPPLY, 100_000_000, mix={"bn": 0.7, "en": 0.3}, max_epochs=4)
    assert any("bn" in w and "17.50 epochs" in w and "4,000,000" in w for w in plan.warnings)
    assert plan.planned_tokens == pytest.approx(16_000_000 / 0.7, rel=1e-6)
    assert plan.shares["bn"] == pytest.approx(0.7, abs=1e-6)
    assert max(s.epochs for s in plan.sources) == pytest.approx(4.0)
    assert "WARNING" in format_plan(plan)


def test_unknown_or_missing_language():
    with pytest.raises(PlanError, match="--mix names hi"):
        plan_mixture(SUPPLY, 1000, mix={"bn": 0.5, "en": 0.3, "hi": 0.2})
    with pytest.raises(PlanError, match="en have no share"):
        plan_mixture(SUPPLY, 1000, mix={"bn": 1.0})
    with pytest.raises(PlanError, match="exactly one"):
        plan_mixture(SUPPLY, 1000)


def test_temperature_flattens_and_caps_redistribute():
    natural = plan_mixture(SUPPLY, 10_000_000, temperature=1.0)
    assert natural.shares["bn"] == pytest.approx(4 / 24, rel=1e-6)
    flat = plan_mixture(SUPPLY, 10_000_000, temperature=100.0)
    assert 0.45 < flat.shares["bn"] < 0.5
    capped = plan_mixture(SUPPLY, 40_000_000, temperature=100.0, max_epochs=2)
    bn = sum(s.target_tokens for s in capped.sources if s.language == "bn")
    assert bn == 8_000_000  # 2 epochs of 4M
    assert capped.planned_tokens == pytest.approx(40_000_000, abs=2)
    assert any("capped" in w for w in capped.warnings)
    with pytest.raises(PlanError, match="temperature"):
        plan_mixture(SUPPLY, 10, temperature=0.0)


def test_everything_capped_shrinks():
    plan = plan_mixture(SUPPLY, 10**9, temperature=1.0, max_epochs=1)
    assert plan.planned_tokens == 24_000_000
    assert any("every language" in w for w in plan.warnings)
