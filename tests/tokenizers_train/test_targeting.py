import math
from itertools import pairwise

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


# --- the balance fit for N languages, on synthetic share -> chars/token curves ----------------------------------

def _synthetic(n, seed, probe_error=False, clean=False):
    """A tokenizer's chars/token as a function of the shares, for n languages: each its own level and slope,
    a weaker level and steeper slope on the probes' small sample, a coupling to the other languages' shares
    (shared digits, punctuation, Latin) and a deterministic measurement wobble of up to 0.3 %.
    ``probe_error``: the probes misjudge each language by its own factors instead of one for all (slope
    0.7-1.8 times, level 0.75-1.0 times; issue 29's probes put English's level at 0.72 times the full
    round's), so the first full round can be far from the balance. ``clean``: no coupling and no wobble,
    each language's full-round curve a pure power of its own share."""
    import random

    rng = random.Random(seed)
    langs = [f"l{i}" for i in range(n)]
    slope = {k: rng.uniform(0.05, 0.35) for k in langs}
    # a balance exists by construction: at these shares (each 0.05 or more) every curve gives 4 chars/token
    weight = {k: rng.uniform(1.0, 6.0) for k in langs}
    balanced = {k: 0.05 + (1 - 0.05 * n) * w / sum(weight.values()) for k, w in weight.items()}
    level = {k: 4.0 / balanced[k] ** slope[k] for k in langs}
    coupling = {k: {j: rng.uniform(-0.05, 0.1) for j in langs if j != k} for k in langs}
    probe_slope = {k: rng.uniform(0.7, 1.8) if probe_error else 1.25 for k in langs}
    probe_level = {k: rng.uniform(0.75, 1.0) if probe_error else 0.85 for k in langs}

    def cpt(shares, probe):
        out = {}
        for k in langs:
            b = slope[k] * (probe_slope[k] if probe else 1.0)
            a = level[k] * (probe_level[k] if probe else 1.0)
            cross = 1 if clean else 1 + sum(c * shares[j] for j, c in coupling[k].items())
            wobble = 1 if clean else 1 + 0.003 * math.sin(1000 * shares[k] + seed)
            out[k] = a * shares[k] ** b * cross * wobble
        return out

    return langs, cpt


@pytest.mark.parametrize("n", [2, 3, 7])
@pytest.mark.parametrize("seed", range(5))
def test_balance_converges_for_n_languages_with_a_probe_budget_independent_of_n(n, seed):
    langs, cpt = _synthetic(n, seed)
    goal = targeting.Goal(balance=True, tolerance=1.05, max_rounds=8)
    rounds = _run_balance(cpt, langs, goal)
    assert [r.index for r in rounds] == list(range(1, len(rounds) + 1))
    probes = [r for r in rounds if r.probe]
    full = [r for r in rounds if not r.probe]
    # two probe trainings whatever n is: each measures every language at once (n measurements per probe)
    assert len(probes) == targeting.N_PROBES == 2 and all(set(r.chars_per_token) == set(langs) for r in probes)
    assert full[-1].met, targeting.rounds_table(rounds)
    last = full[-1].chars_per_token
    assert max(last.values()) / min(last.values()) <= goal.tolerance
    # within the command's default of 4 full rounds (over 150 such problems of 2-10 languages: 1.8 on average)
    assert len(full) <= 4
    assert sum(full[-1].shares.values()) == pytest.approx(1) and min(full[-1].shares.values()) > targeting.MIN_SHARE


def _off_bracket_shares(rounds):
    """How many shares of the full rounds after the first leave their bracket, and how many were checked.

    A language's bracket at a level t: its shares in the earlier full rounds at which it measured under t
    (too little text for t) and those at which it measured t or more (enough). A round keeps to its brackets
    when one common level t puts every language's share strictly above each share found too little and
    below each found enough (so never at a share already measured). For each language the levels its share
    allows are ``(largest log chars/token measured at a share <= it, smallest measured at a share >= it]``,
    and a round counts the fewest languages off at any one level. Flat languages (a rule of their own) and a
    language whose own rounds contradict each other (less chars/token at more share: the coupling to the
    other languages' shares) are not checked."""
    full = [r for r in rounds if not r.probe]
    off = checked = 0
    for i in range(1, len(full)):
        flat = targeting.flat_languages(rounds[:rounds.index(full[i])])
        allowed = {}
        for k in full[i].shares:
            pts = sorted((p.shares[k], math.log(p.chars_per_token[k])) for p in full[:i])
            if k in flat or any(y2 <= y1 for (_, y1), (_, y2) in pairwise(pts)):
                continue
            s = full[i].shares[k]
            allowed[k] = (max((y for x, y in pts if x <= s * (1 + 1e-9)), default=-math.inf),
                          min((y for x, y in pts if x >= s * (1 - 1e-9)), default=math.inf))
        checked += len(allowed)
        # every level any language's interval starts, ends or spans: one of them is the best common level
        ends = sorted({v for lo, hi in allowed.values() for v in (lo, hi) if math.isfinite(v)})
        levels = [(a + b) / 2 for a, b in pairwise(ends)] + ends + [-math.inf, math.inf]
        off += min(sum(not (lo < t <= hi) for lo, hi in allowed.values()) for t in levels)
    return off, checked


@pytest.mark.parametrize("n", [2, 3, 7])
def test_no_share_leaves_its_bracket_for_any_number_of_languages(n):
    """Normalising the shares after keeping each in its bracket (a rescale) put 28 of 1012 next shares of 7
    languages (1 of 247 of 3) off their bracket on these problems; solving for the level keeps them all."""
    goal = targeting.Goal(balance=True, tolerance=1.05, max_rounds=4)
    off = checked = 0
    for seed in range(60):
        langs, cpt = _synthetic(n, seed, probe_error=True)
        o, c = _off_bracket_shares(_run_balance(cpt, langs, goal))
        off, checked = off + o, checked + c
    assert checked >= 20 * n and off == 0, f"{off} of {checked} next shares off their bracket"


def test_seven_languages_converge_as_reliably_as_two():
    """Clean power-law curves (no coupling) whose probes misjudge each language differently: within the
    command's 4 full rounds, 7 languages meet the tolerance in as many of 100 problems as 2 do (all)."""
    goal = targeting.Goal(balance=True, tolerance=1.05, max_rounds=4)
    met = {}
    for n in (2, 7):
        problems = (_synthetic(n, seed, probe_error=True, clean=True) for seed in range(100))
        met[n] = sum(_run_balance(cpt, langs, goal)[-1].met for langs, cpt in problems)
    assert met[7] >= met[2] and met[7] == 100, f"met the tolerance in 100 problems: {met}"


def test_full_rounds_refit_the_slope_the_probes_got_wrong():
    """Two full rounds at distinct shares give the slope (a secant), not the probes' steeper one."""
    probe = [_round(1, {"a": 0.5, "b": 0.5}, {"a": 3.0, "b": 4.0}, True),
             _round(2, {"a": 0.7, "b": 0.3}, {"a": 3.0 * 1.4 ** 0.5, "b": 4.0 * 0.6 ** 0.5}, True)]
    f1, f2 = {"a": 0.6, "b": 0.4}, {"a": 0.65, "b": 0.35}
    full = [_round(3, f1, {"a": 4.0 * 0.6 ** 0.1, "b": 4.0 * 0.4 ** 0.2}, False),
            _round(4, f2, {"a": 4.0 * 0.65 ** 0.1, "b": 4.0 * 0.35 ** 0.2}, False)]
    assert targeting.fit_curves([*probe, full[0]])["a"].slope == pytest.approx(0.5)
    curves = targeting.fit_curves([*probe, *full])
    assert curves["a"].slope == pytest.approx(0.1) and curves["b"].slope == pytest.approx(0.2)


# --- the curves that broke the balance on every shared bn and en source (issue 29) ------------------------------

def _run_balance(cpt, langs, goal):
    trained = []

    def train(shares, probe):
        measured = cpt(shares, probe)
        floor = targeting.floors(goal, measured)
        met = all(measured[k] >= v for k, v in floor.items())
        trained.append(targeting.Round(len(trained) + 1, dict(shares), measured, floor, met, 0.0, probe))
        return trained[-1]

    return targeting.balance(train, dict.fromkeys(langs, 1 / len(langs)), goal)


def _convex_english(shares, probe):
    """The issue's bn/en 64k rounds: the probes (4M characters) see English's curve nearly flat and solve for
    a 64 % English share; on the full sample English's curve is convex in log-log (templated dialogue learnt
    only at large shares): 6.1 chars/token at 64 %, 4.17 at 26 %, slope 0.09 below that, 0.42 above."""
    if probe:
        return {"bn": 4.9 * shares["bn"] ** 0.1, "en": 4.42 * (shares["en"] / 0.64) ** 0.06}
    en = shares["en"]
    return {"bn": 5.1 * shares["bn"] ** 0.1, "en": 4.17 * (en / 0.26) ** (0.089 if en < 0.26 else 0.42)}


def test_a_convex_curve_is_bracketed_not_swung_past_a_share_known_to_be_wrong():
    goal = targeting.Goal(balance=True, tolerance=1.05, max_rounds=4)
    rounds = _run_balance(_convex_english, ["bn", "en"], goal)
    full = [r for r in rounds if not r.probe]
    assert full[0].shares["en"] == pytest.approx(0.642, abs=0.01)  # the round 3: English 6.1
    assert full[-1].met, targeting.rounds_table(rounds)
    # never again a share past one already measured too large (the old secant went 64 % -> 3 % -> 22 % -> 68 %)
    for i, r in enumerate(full):
        over = [p.shares["en"] for p in full[:i] if p.chars_per_token["en"] > p.chars_per_token["bn"]]
        under = [p.shares["en"] for p in full[:i] if p.chars_per_token["en"] < p.chars_per_token["bn"]]
        assert r.shares["en"] < min(over, default=1) and r.shares["en"] > max(under, default=0)
    assert targeting.best_round(rounds) is full[-1]


def test_a_flat_language_is_not_fed_the_sample_and_the_others_are_balanced():
    """``fl`` stays at 3.0 chars/token whatever its share (all its text one template): no share balances it,
    so it must not take the sample from the others, who are balanced among themselves."""
    def cpt(shares, probe):
        scale = 0.9 if probe else 1.0
        return {"fl": 3.0, "bn": scale * 5.0 * shares["bn"] ** 0.15, "en": scale * 5.4 * shares["en"] ** 0.1}

    goal = targeting.Goal(balance=True, tolerance=1.05, max_rounds=4)
    rounds = _run_balance(cpt, ["fl", "bn", "en"], goal)
    assert not any(r.met for r in rounds)  # fl cannot be within 5 % of the others
    # a probe may try it (that is how its flatness is learnt); no full round gives it more than its start
    assert max(r.shares["fl"] for r in rounds if not r.probe) <= 1 / 3 + 1e-9, targeting.rounds_table(rounds)
    assert targeting.flat_languages(rounds) == {"fl"}
    best = targeting.best_round(rounds)
    assert not best.probe
    assert best.chars_per_token["bn"] / best.chars_per_token["en"] == pytest.approx(1, abs=0.05)
    # the fairest round among the languages a share can move: not the one that gave fl the most
    assert targeting.fairness(best, {"fl"}) == min(targeting.fairness(r, {"fl"}) for r in rounds if not r.probe)


def test_best_round_keeps_a_met_round_else_the_fairest_never_a_probe():
    # The probe is the fairest and even met: a best_round that looked at probes would keep it.
    r = [_round(1, {"a": 0.5, "b": 0.5}, {"a": 4.0, "b": 4.0}, True),
         _round(2, {"a": 0.4, "b": 0.6}, {"a": 4.4, "b": 4.0}, False),
         _round(3, {"a": 0.2, "b": 0.8}, {"a": 3.0, "b": 4.6}, False),
         _round(4, {"a": 0.3, "b": 0.7}, {"a": 4.0, "b": 4.3}, False)]
    r[0].met = True
    assert targeting.best_round(r) is r[3]  # premium 1.075, against 1.10 and 1.53
    r[1].met = True
    assert targeting.best_round(r) is r[1]
