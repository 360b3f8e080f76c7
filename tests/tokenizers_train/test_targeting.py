import pytest

from tokenizers_train import targeting


def test_parse_targets():
    assert targeting.parse_targets("bn=4.8, en=4.7") == {"bn": 4.8, "en": 4.7}
    for bad in ("bn", "bn=x", "bn=-1", "=4"):
        with pytest.raises(ValueError, match="LANG=CHARS_PER_TOKEN"):
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
