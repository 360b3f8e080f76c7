import pytest

from tokenizers_train import targeting


def test_parse_targets():
    assert targeting.parse_targets("bn=4.8, en=4.7") == {"bn": 4.8, "en": 4.7}
    for bad, message in [("bn", "LANG=CHARS_PER_TOKEN"), ("bn=x", "not a number"), ("bn=-1", "> 0"),
                         ("=4", "LANG=CHARS_PER_TOKEN"), ("bn=0", "> 0")]:
        with pytest.raises(ValueError, match=message):
            targeting.parse_targets(bad)


def test_floors_for_parity_follow_the_reference():
    goal = targeting.Goal(parity="en", tolerance=1.05)
    assert targeting.floors(goal, {"en": 4.2, "bn": 3.0}) == {"bn": pytest.approx(4.0)}
    goal = targeting.Goal(targets={"bn": 4.5}, parity="en")
    assert targeting.floors(goal, {"en": 4.2, "bn": 3.0}) == {"bn": 4.5}


def test_next_shares_moves_text_to_the_language_under_its_floor():
    shares = {"bn": 0.5, "en": 0.5}
    new = targeting.next_shares(shares, {"bn": 4.0, "en": 4.8}, {"bn": 4.7, "en": 4.7})
    assert new["bn"] > 0.5 > new["en"] and sum(new.values()) == pytest.approx(1)


def test_goal_names_only_known_languages():
    with pytest.raises(ValueError, match="xx"):
        targeting.check_goal(targeting.Goal(targets={"xx": 4.0}), ["bn", "en"])


def _round(index, shares, cpt, probe):
    return targeting.Round(index, shares, cpt, {}, False, 0.0, probe, 1000)


def test_balance_fits_the_share_curve_and_solves_it_for_equal_chars_per_token():
    def cpt(share):  # Bangla gains faster with its share than English
        return {"bn": 3.0 * share["bn"] ** 0.2, "en": 4.0 * share["en"] ** 0.1}

    s1, s2 = {"bn": 0.5, "en": 0.5}, {"bn": 0.7, "en": 0.3}
    rounds = [_round(1, s1, cpt(s1), True), _round(2, s2, cpt(s2), True)]
    curves = targeting.fit_curves(rounds)
    assert curves["bn"].slope == pytest.approx(0.2) and curves["en"].slope == pytest.approx(0.1)
    shares = targeting.balanced_shares(curves)
    assert sum(shares.values()) == pytest.approx(1)
    got = cpt(shares)
    assert got["bn"] == pytest.approx(got["en"], rel=1e-6) and shares["bn"] > 0.7
    # a full round at another level (more text): the probes' slopes stay, the level comes from the full round
    full = {k: 1.1 * v for k, v in cpt(shares).items()}
    full["en"] *= 1.05
    curves = targeting.fit_curves([*rounds, _round(3, shares, full, False)])
    assert curves["en"].slope == pytest.approx(0.1)
    assert targeting.balanced_shares(curves)["en"] < shares["en"]  # English got ahead: it gets less


def test_balance_floors_and_one_probe_uses_the_prior_slope():
    goal = targeting.Goal(balance=True, tolerance=1.05)
    assert targeting.floors(goal, {"bn": 4.0, "en": 4.2}) == {"bn": pytest.approx(4.0), "en": pytest.approx(4.0)}
    curves = targeting.fit_curves([_round(1, {"bn": 0.5, "en": 0.5}, {"bn": 4.0, "en": 5.0}, True)])
    assert curves["bn"].slope == targeting.PRIOR_SLOPE
    assert targeting.balanced_shares(curves)["bn"] > 0.5


@pytest.mark.parametrize("given, balance", [
    ({}, True),  # a bare config is fair by default, as the command with no share options is
    ({"shares": {"bn": 0.7, "en": 0.3}}, False),
    ({"temperature": 3.0}, False),
    ({"goal": targeting.Goal(parity="en")}, False),
    ({"goal": targeting.Goal(targets={"bn": 4.0})}, False),
    ({"goal": targeting.Goal(balance=False)}, False),  # an explicit choice is kept
    ({"shares": {"bn": 0.7, "en": 0.3}, "goal": targeting.Goal(balance=True)}, True),
])
def test_python_default_balances_like_the_command(tmp_path, given, balance):
    from tokenizers_train.run import TrainingRun, resolve_goal

    config = TrainingRun(texts=[], out=tmp_path / "out", **given)
    assert resolve_goal(config).balance is balance
