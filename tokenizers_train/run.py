"""One training run: read and balance the text, train (in targeting rounds), add the naive baseline, measure
everything with ``fertility``, and publish OUT in one rename.

Everything is written into a temporary folder beside OUT; OUT appears only when the run succeeded, so a
failure (bad input, an unmet target, an interrupt) leaves no half-written OUT and never touches an existing
one unless ``overwrite`` was asked for.
"""

from __future__ import annotations

import copy
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
    backends.check_config(config.train, len(alphabet))
    validation = {k: lt.validation for k, lt in prepared.languages.items()}
    for lang, docs in validation.items():
        if not docs:
            raise ValueError(f"{lang}: the validation slice is empty (too little text)")
    shares = sampling.resolve_shares({k: lt.train_chars for k, lt in prepared.languages.items()},
                                     config.shares, config.temperature)
    rounds: list[targeting.Round] = []
    budgets = {}
    tokenizer = None
    for index in range(1, config.goal.max_rounds + 1):
        round_start = time.time()
        budgets = sampling.sample_budgets(prepared, shares, config.sample_chars)
        _log(f"round {index}: training {config.train.backend} at {config.train.vocab_size} on "
             + ", ".join(f"{k} {v:,} chars ({shares[k]:.1%})" for k, v in budgets.items()))
        round_dir = work / f"round{index}"
        tokenizer = backends.train(config.train, lambda b=budgets: sampling.iter_sample(prepared, b), round_dir)
        measured = targeting.measure(str(tokenizer), validation)
        floor = targeting.floors(config.goal, measured)
        met = all(measured[k] >= v for k, v in floor.items())
        rounds.append(targeting.Round(index, dict(shares), measured, floor, met, time.time() - round_start))
        _log(targeting.rounds_table(rounds))
        if met or not config.goal.active:
            break
        shares = targeting.next_shares(shares, measured, floor)
    if config.goal.active and not rounds[-1].met:
        raise targeting.TargetNotMet(rounds, config.goal)

    final = tmp / tokenizer.name
    tokenizer.replace(final)
    compare = [_named(str(final), f"script-aware-{config.train.backend}")]
    if config.naive:
        _log(f"training the naive GPT-2 byte-level BPE at {config.train.vocab_size} on the same sample")
        naive = backends.train_naive(config.train.vocab_size, lambda: sampling.iter_sample(prepared, budgets),
                                     tmp / "naive", show_progress=config.train.show_progress)
        compare.append(_named(str(naive), "naive-gpt2-bpe"))
    compare.extend(config.references)
    _log("measuring " + ", ".join(t if isinstance(t, str) else t.name for t in compare) + " on the validation slice")
    report = fertility.analyze(compare, validation, tokenizer_dir=config.tokenizer_dir, progress=config.progress)
    fertility.write_report(report, tmp / "fertility")
    shutil.rmtree(work)

    training_report = {
        "schema_version": REPORT_SCHEMA_VERSION,
        "arguments": _arguments(config),
        "data": {
            "sha256": prepared.sha256,
            "sources": [asdict(s) for s in prepared.sources],
            "alphabet_size": len(alphabet),
            "validation_chars": {k: sum(map(len, v)) for k, v in validation.items()},
            "sample_chars": budgets,
        },
        "rounds": [r.to_dict() for r in rounds],
        "tokenizer": {"file": final.name, "sha256": file_sha256(final), "vocab_size": config.train.vocab_size,
                      "special_tokens": backends.SPECIAL_TOKENS},
        "comparison": {t.name: {"vocab_size": t.vocab_size,
                                "chars_per_token": {k: m.chars_per_token for k, m in t.languages.items()},
                                "traps": [trap.to_dict() for trap in t.traps]} for t in report.tokenizers},
        "seconds": round(time.time() - started, 1),
    }
    write_json(tmp / REPORT_NAME, training_report)
    return RunResult(tmp, final, rounds, training_report)


def _named(path: str, name: str) -> fertility.Tokenizer:
    # tokenizer.json files are named after their folder, which here is a temporary one: give them real names.
    tok = copy.copy(fertility.load_tokenizer(path))
    tok.name = name
    return tok


def _arguments(config: RunConfig) -> dict:
    return {
        "texts": [{"lang": t.lang, "spec": t.spec} for t in config.texts],
        "out": str(config.out),
        "train": asdict(config.train),
        "shares": config.shares,
        "temperature": config.temperature,
        "sample_chars": config.sample_chars,
        "max_chars_per_source": config.max_chars_per_source,
        "holdout": config.holdout,
        "max_validation_chars": config.max_validation_chars,
        "goal": asdict(config.goal),
        "naive": config.naive,
        "references": config.references,
    }


def _log(message: str) -> None:
    print(message, file=sys.stderr, flush=True)
