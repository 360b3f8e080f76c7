"""One training run: read and balance the text, train (in targeting rounds), add the naive baseline, measure
everything with ``fertility``, and publish OUT in one rename.

Everything is written into a temporary folder beside OUT; OUT appears only when the run succeeded, so a
failure (bad input, an unmet target, an interrupt) leaves no half-written OUT and never touches an existing
one unless ``overwrite`` was asked for.
"""

from __future__ import annotations

import copy
import dataclasses
import shutil
import sys
import time
from dataclasses import asdict, dataclass, field
from pathlib import Path

import fertility
from fertility.fileio import check_output_dir, file_sha256, publish_dir, staging_dir, write_json
from fertility.text import TextSource
from tokenizers_train import backends, sampling, targeting

REPORT_NAME = "training_report.json"
REPORT_SCHEMA_VERSION = 1
MARK_SHARE = 0.01


@dataclass
class RunConfig:
    """Everything one ``tokenizers-train`` invocation needs."""

    texts: list[TextSource]
    out: Path
    train: backends.TrainConfig = field(default_factory=backends.TrainConfig)
    shares: dict[str, float] | None = None
    temperature: float | None = None
    sample_chars: int | None = None
    max_chars_per_source: int | None = None
    holdout: float = 0.02
    max_validation_chars: int = 400_000
    goal: targeting.Goal = field(default_factory=targeting.Goal)
    # None: whole-grapheme training for hf-bpe when some language's text has combining marks (resolve_train)
    whole_graphemes: bool | None = None
    probe_chars: int = targeting.PROBE_CHARS
    naive: bool = False
    references: list[str] = field(default_factory=list)
    tokenizer_dir: str | None = None
    overwrite: bool = False
    progress: bool = True


@dataclass
class RunResult:
    """Where the run put things and what it measured."""

    out: Path
    tokenizer: Path
    rounds: list[targeting.Round]
    report: dict


def run(config: RunConfig) -> RunResult:
    """Train as configured and publish OUT; raises ``TargetNotMet``, ``TrainingError``, ``TextError``, ``ValueError``."""
    out = config.out
    check_output_dir(out, overwrite=config.overwrite)
    backends.check_config(config.train, 0)  # backend, multiple of 64; the alphabet is checked once read
    langs = sorted({t.lang for t in config.texts})
    targeting.check_goal(config.goal, langs)
    with staging_dir(out) as tmp:
        result = _run_in(config, tmp)
        publish_dir(tmp, out)
    result.out = out
    result.tokenizer = out / result.tokenizer.name
    return result


def _run_in(config: RunConfig, tmp: Path) -> RunResult:
    started = time.time()
    work = tmp / "work"
    prepared = sampling.prepare_text(config.texts, work, holdout=config.holdout,
                                     max_validation_chars=config.max_validation_chars,
                                     max_chars_per_source=config.max_chars_per_source, progress=config.progress)
    alphabet = set().union(*(lt.alphabet for lt in prepared.languages.values()))
    train_config = resolve_train(config.train, config.whole_graphemes, prepared)
    backends.check_config(train_config, len(alphabet))
    validation = {k: lt.validation for k, lt in prepared.languages.items()}
    for lang, docs in validation.items():
        if not docs:
            raise ValueError(f"{lang}: the validation slice is empty (too little text)")
    shares = sampling.resolve_shares({k: lt.train_chars for k, lt in prepared.languages.items()},
                                     config.shares, config.temperature)
    rounds: list[targeting.Round] = []
    tokenizers: dict[int, Path] = {}

    def train_round(shares: dict[str, float], sample_chars: int | None, probe: bool) -> targeting.Round:
        start = time.time()
        index = len(rounds) + 1
        budgets = sampling.sample_budgets(prepared, shares, sample_chars)
        _log(f"round {index}{' (probe)' if probe else ''}: training {train_config.backend} at "
             f"{train_config.vocab_size} on " + ", ".join(f"{k} {v:,} chars ({shares[k]:.1%})" for k, v in budgets.items()))
        tokenizers[index] = backends.train(train_config, lambda b=budgets: sampling.iter_sample(prepared, b),
                                           work / f"round{index}")
        measured = targeting.measure(str(tokenizers[index]), validation)
        floor = targeting.floors(config.goal, measured)
        met = all(measured[k] >= v for k, v in floor.items())
        rounds.append(targeting.Round(index, dict(shares), measured, floor, met, time.time() - start, probe,
                                      sum(budgets.values())))
        _log(targeting.rounds_table(rounds))
        return rounds[-1]

    balance = config.goal.balance and len(shares) > 1
    if balance:
        full = sum(sampling.sample_budgets(prepared, shares, config.sample_chars).values())
        probe_chars = min(config.probe_chars, full // 4)
        for _ in range(targeting.N_PROBES):
            train_round(shares, probe_chars, probe=True)
            shares = targeting.balanced_shares(targeting.fit_curves(rounds))
    for _ in range(config.goal.max_rounds):
        last = train_round(shares, config.sample_chars, probe=False)
        if last.met or not config.goal.active:
            break
        if balance:
            shares = targeting.balanced_shares(targeting.fit_curves(rounds))
        else:
            shares = targeting.next_shares(shares, last.chars_per_token, last.floors)
    full_rounds = [r for r in rounds if not r.probe]
    chosen = full_rounds[-1]
    if balance and not chosen.met:
        # No target was asked for: publish the most even round rather than nothing, and say so.
        chosen = min(full_rounds, key=lambda r: max(r.chars_per_token.values()) / min(r.chars_per_token.values()))
        _log(f"warning: no round within the balance tolerance {config.goal.tolerance}; keeping round {chosen.index}")
    elif config.goal.active and not chosen.met:
        raise targeting.TargetNotMet(rounds, config.goal)
    tokenizer = tokenizers[chosen.index]
    budgets = sampling.sample_budgets(prepared, chosen.shares, config.sample_chars)

    final = tmp / tokenizer.name
    tokenizer.replace(final)
    compare = [_named(str(final), f"script-aware-{train_config.backend}")]
    if config.naive:
        _log(f"training the naive GPT-2 byte-level BPE at {train_config.vocab_size} on the same sample")
        naive = backends.train_naive(train_config.vocab_size, lambda: sampling.iter_sample(prepared, budgets),
                                     tmp / "naive", show_progress=train_config.show_progress)
        compare.append(_named(str(naive), "naive-gpt2-bpe"))
    compare.extend(config.references)
    _log("measuring " + ", ".join(t if isinstance(t, str) else t.name for t in compare) + " on the validation slice")
    report = fertility.analyze(compare, validation, tokenizer_dir=config.tokenizer_dir, progress=config.progress)
    fertility.write_report(report, tmp / "fertility")
    shutil.rmtree(work)

    training_report = {
        "schema_version": REPORT_SCHEMA_VERSION,
        "arguments": _arguments(config, train_config),
        "data": {
            "sha256": prepared.sha256,
            "sources": [asdict(s) for s in prepared.sources],
            "alphabet_size": len(alphabet),
            "validation_chars": {k: sum(map(len, v)) for k, v in validation.items()},
            "sample_chars": budgets,
        },
        "rounds": [r.to_dict() for r in rounds],
        "chosen_round": chosen.index,
        "tokenizer": {"file": final.name, "sha256": file_sha256(final), "vocab_size": train_config.vocab_size,
                      "special_tokens": backends.SPECIAL_TOKENS},
        "comparison": {t.name: {"vocab_size": t.vocab_size,
                                "chars_per_token": {k: m.chars_per_token for k, m in t.languages.items()},
                                "traps": [trap.to_dict() for trap in t.traps]} for t in report.tokenizers},
        "seconds": round(time.time() - started, 1),
    }
    write_json(tmp / REPORT_NAME, training_report)
    return RunResult(tmp, final, rounds, training_report)


def resolve_train(train: backends.TrainConfig, whole_graphemes: bool | None,
                  prepared: sampling.PreparedText) -> backends.TrainConfig:
    """The training settings with ``whole_graphemes`` decided: as asked, else on for hf-bpe when a language's
    training text is at least MARK_SHARE combining marks/ZWJ/ZWNJ (Bangla ~15 %, English Wikipedia ~0.01 %)."""
    if whole_graphemes is None:
        whole_graphemes = train.backend == "hf-bpe" and any(
            lt.mark_chars >= MARK_SHARE * lt.train_chars for lt in prepared.languages.values())
    return dataclasses.replace(train, whole_graphemes=whole_graphemes)


def _named(path: str, name: str) -> fertility.Tokenizer:
    # tokenizer.json files are named after their folder, which here is a temporary one: give them real names.
    tok = copy.copy(fertility.load_tokenizer(path))
    tok.name = name
    return tok


def _arguments(config: RunConfig, train_config: backends.TrainConfig) -> dict:
    return {
        "texts": [{"lang": t.lang, "spec": t.spec} for t in config.texts],
        "out": str(config.out),
        "train": asdict(train_config),
        "whole_graphemes": config.whole_graphemes,
        "shares": config.shares,
        "temperature": config.temperature,
        "sample_chars": config.sample_chars,
        "max_chars_per_source": config.max_chars_per_source,
        "holdout": config.holdout,
        "max_validation_chars": config.max_validation_chars,
        "goal": asdict(config.goal),
        "probe_chars": config.probe_chars,
        "naive": config.naive,
        "references": config.references,
    }


def _log(message: str) -> None:
    print(message, file=sys.stderr, flush=True)
