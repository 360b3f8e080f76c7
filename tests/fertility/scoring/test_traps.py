"""Verdicts (fertility.scoring.traps): too little text is never OK, a large drop against the other tokenizers is
flagged, each trap states its own cause, and a phrase pre-tokenizer's ceiling is recognised."""

from __future__ import annotations

from types import SimpleNamespace

import pytest

from fertility.scoring.metrics import Metrics
from fertility.scoring.traps import MIN_CHARS, MIN_FRACTION_OF_BEST, find_drops, find_traps, verdicts


def metrics(chars: int, chars_per_token: float, ceiling: float = 5.0, words: int | None = None) -> Metrics:
    words = chars // 6 if words is None else words
    return Metrics(chars=chars, tokens=chars / chars_per_token, pretokens=chars / ceiling, words=words)


def tokenizer(name: str, scripts: dict[str, Metrics], languages: dict[str, Metrics] | None = None):
    """The parts of a TokenizerReport that verdicts reads."""
    return SimpleNamespace(name=name, scripts=scripts, languages=languages or {}, traps=find_traps(scripts))


def test_a_short_text_is_not_judged_even_when_it_looks_bad():
    # GPT-2 on one Bangla sentence: 0.52 chars/token and a 1.5 ceiling, but only 55 characters
    bengali = metrics(55, 0.52, ceiling=1.5)
    t = tokenizer("gpt2", {"Bengali": bengali, "Common": metrics(5, 1.0)}, {"bn": bengali})
    (verdict,) = verdicts([t]).values()
    assert not verdict.judged and verdict.traps == []
    assert verdict.text == f"not enough text to judge: 55 characters of Bengali (the rules need {MIN_CHARS} "\
        "characters of a script)"
    assert verdict.to_dict()["not_enough_text"] == [{"script": "Bengali", "chars": 55, "needed": MIN_CHARS}]


def test_a_short_script_beside_a_judged_one_is_named():
    t = tokenizer("tok", {"Bengali": metrics(5000, 3.0), "Latin": metrics(120, 4.0)})
    (verdict,) = verdicts([t]).values()
    assert verdict.judged
    assert verdict.text == f"Latin: not enough text to judge (120 of the {MIN_CHARS} characters needed)"
    # a script that is a sliver of a long text is incidental, not "too short"
    t = tokenizer("tok", {"Bengali": metrics(100_000, 3.0), "Latin": metrics(120, 4.0)})
    assert verdicts([t])["tok"].text == "OK"


def test_a_large_drop_against_the_best_other_tokenizer_is_flagged():
    en = {"gpt2": 4.78, "trained": 3.50, "close": 4.6}
    languages = {name: {"en": metrics(16_000, v)} for name, v in en.items()}
    (drop,) = find_drops("trained", languages)
    assert (drop.lang, drop.best_tokenizer) == ("en", "gpt2")
    assert drop.value < MIN_FRACTION_OF_BEST * drop.best and drop.to_dict()["threshold"] == pytest.approx(0.8 * 4.78)
    assert drop.cause == "27% fewer characters per token than gpt2 (3.50 against 4.78)"
    assert find_drops("close", languages) == [] and find_drops("gpt2", languages) == []
    judged = verdicts([tokenizer(name, {"Latin": m["en"]}, m) for name, m in languages.items()])
    assert judged["trained"].text == "en: 27% fewer characters per token than gpt2 (3.50 against 4.78)"
    assert judged["gpt2"].text == judged["close"].text == "OK"
    # too little text: no drop either
    short = {name: {"en": metrics(300, v)} for name, v in en.items()}
    assert find_drops("trained", short) == []


def test_each_trap_states_its_own_cause():
    latin = metrics(5000, 4.6)
    bengali = Metrics(chars=5000, tokens=10_000.0, pretokens=3400.0, mark_splits=900, words=900)
    traps = {t.rule: t for t in find_traps({"Latin": latin, "Bengali": bengali})}
    low, capped = traps["low_chars_per_token"], traps["low_pretoken_ceiling"]
    assert "combining marks" in capped.cause and "combining marks" not in low.cause
    assert "low_pretoken_ceiling" in low.cause


def test_a_phrase_pre_tokenizer_is_recognised():
    assert metrics(22_000, 3.2, ceiling=61.0, words=3970).phrase_pieces  # 361 pieces for 3,970 words
    assert not metrics(22_000, 0.5, ceiling=1.49, words=3970).phrase_pieces  # GPT-2: more pieces than words
    assert not Metrics().phrase_pieces
