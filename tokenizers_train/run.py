"""One training run: read and balance the text, train (in targeting rounds), add the naive baseline, measure
everything with ``fertility``, and publish OUT in one rename.

The work (prepared text, every round) is kept in a checkpoint folder beside OUT, so that the same command
resumes after a kill (:mod:`tokenizers_train.checkpoint`); OUT is assembled in a temporary folder and appears
only when the run succeeded, so a failure (bad input, an unmet target, an interrupt) leaves no half-written
OUT and never touches an existing one unless ``overwrite`` was asked for.
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
from common.cli import check_label
from common.errors import InputError
from common.fileio import file_sha256, read_json, write_json
from common.outdir import output_dir, publish_dir, staging_dir
from fertility.length_ratios import LengthRatio, describe, english_chars_per_token, length_ratios, premiums
from fertility.premium import ParallelText, aligned
from fertility.text import TextSource, check_source, input_paths, iter_documents
from tokenizers_train import backends, checkpoint, sampling, targeting

REPORT_NAME = "training_report.json"
REPORT_SCHEMA_VERSION = 1
MARK_SHARE = 0.01
# What balance and parity equalise: the premium (the tokens the same content costs, what users pay) or each
# language's chars/token on its own text (equal only where languages need as many characters for the same content).
BALANCE_BY = ("premium", "chars-per-token")


@dataclass
class TrainingRun:
    """Everything one ``tokenizers-train`` invocation needs."""

    texts: list[TextSource]
    out: Path
    train: backends.TrainConfig = field(default_factory=backends.TrainConfig)
    shares: dict[str, float] | None = None
    temperature: float | None = None
    sample_chars: int | None = None
    max_chars_per_source: int | None = None
    # a language's text is used at most this many times in a sample (1: capped, never cycled; sampling.py)
    max_repeats: int | None = sampling.MAX_REPEATS
    holdout: float = 0.02
    max_validation_chars: int = 400_000
    goal: targeting.Goal = field(default_factory=targeting.Goal)
    # line-aligned parallel dev text per language (--parallel, --flores): when given, balance and parity are
    # judged on it (premiums against the reference language) instead of on the validation slices
    parallel: dict[str, TextSource] | None = None
    # BALANCE_BY: without a parallel dev set the premium is judged from each language's chars/token and its
    # length ratio to English (fertility.length_ratios), equal chars/token for a language without one
    balance_by: str = "premium"
    # None: whole-grapheme training, where the backend can, when some language's text has combining marks
    # (resolve_train)
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


def run(config: TrainingRun) -> RunResult:
    """Train as configured and publish OUT; raises ``TargetNotMet``, or an :class:`common.errors.InputError`
    (``TextError``, ``TrainingError``, ``TokenizerLoadError``, ``OutputPathError``) for bad input.

    Everything that can be checked before the work is checked first: OUT (the policy of
    :mod:`common.outdir`, against every input), the settings, the goal and shares against the languages, the
    head of every text (:func:`fertility.text.check_source`), and every ``references`` tokenizer is loaded. The work is kept in a checkpoint folder beside OUT
    (:mod:`tokenizers_train.checkpoint`), so the same command after a kill resumes where it stopped; OUT itself
    is assembled and renamed into place at the end.
    """
    config = dataclasses.replace(config, goal=resolve_goal(config))
    out = config.out
    sources = [*config.texts, *(config.parallel or {}).values(),
               *(r for r in [*config.references, config.tokenizer_dir] if isinstance(r, str))]
    with output_dir(out, "tokenizers-train", overwrite=config.overwrite, inputs=input_paths(sources)):
        return _run(config)


def _run(config: TrainingRun) -> RunResult:
    """:func:`run`, under the lock of OUT (which covers its checkpoint and staging folders)."""
    out = config.out
    # backend, multiple of 64, what only hf-bpe has; the alphabet is checked once read (whole graphemes "auto"
    # is decided then too)
    backends.check_config(dataclasses.replace(config.train, whole_graphemes=bool(config.whole_graphemes)), 0)
    langs = sorted({t.lang for t in config.texts})
    for lang in langs:
        check_label(lang)
    targeting.check_goal(config.goal, langs)
    if config.max_repeats is not None and config.max_repeats < 1:
        raise InputError(f"max_repeats must be at least 1 (1: a language's text is never cycled), got {config.max_repeats}")
    if config.shares:
        sampling.check_shares(config.shares, langs)
    for source in config.texts:  # missing, empty, not UTF-8 or no such field at its head: before any work
        check_source(source)
    fertility.tokenizers.check_tokenizer_dir(config.tokenizer_dir)  # else refused only after the training
    # a bad reference, or one named like the trained tokenizer (after OUT), would otherwise fail after every round
    fertility.tokenizers.check_distinct_names(
        [config.out.name, *(fertility.load_tokenizer(r, config.tokenizer_dir).name for r in config.references)],
        " (the trained one is named after --out)")
    read_dev_set(config, langs)  # missing, not aligned or lacking a language: before any work
    ckpt = checkpoint.Checkpoint(out, _resume_key(config))
    if ckpt.resumed:
        _log(f"resuming from {ckpt.root}")
    try:
        trained = _train(config, ckpt)
        with staging_dir(out) as tmp:
            result = _assemble(config, trained, tmp)
            publish_dir(tmp, out, command="tokenizers-train")
    except (InputError, targeting.TargetNotMet):
        ckpt.remove()  # the input must change, or every round was tried: nothing to resume
        raise
    ckpt.remove()
    result.out = out
    result.tokenizer = out / result.tokenizer.name
    return result


def dev_reference(config: TrainingRun, langs: list[str]) -> str:
    """The language the parallel dev set's premiums are against: the parity language, else English where
    there is one (``en`` or ``eng_Latn``), else the first language."""
    return config.goal.parity or next((k for k in ("en", "eng_Latn") if k in langs), sorted(langs)[0])


def read_dev_set(config: TrainingRun, langs: list[str]) -> ParallelText | None:
    """The parallel dev set of the --text languages (``config.parallel``), or None; an
    :class:`common.errors.InputError` naming the language for one the set lacks, the files for misaligned
    ones."""
    if not config.parallel:
        return None
    missing = sorted(set(langs) - set(config.parallel))
    if missing:
        raise InputError(f"the parallel dev set has no {', '.join(missing)} (it has {', '.join(sorted(config.parallel))}): "
                         "every --text language needs its line-aligned file (--parallel LANG=PATH, or a "
                         "FLORES file named by the label: --text ben_Beng=... with --flores)")
    sources = {k: config.parallel[k] for k in langs}
    return aligned({k: list(iter_documents(s)) for k, s in sources.items()}, {k: s.spec for k, s in sources.items()})


def judges_estimated_premium(config: TrainingRun) -> bool:
    """Whether balance or parity judge premiums estimated from length ratios, rather than a parallel dev set's
    measured premiums, chars/token (``balance_by``) or explicit chars/token targets."""
    goal = resolve_goal(config)
    return not config.parallel and config.balance_by == "premium" and (goal.balance or goal.parity)


def judging_ratios(config: TrainingRun, langs: list[str]) -> dict[str, LengthRatio] | None:
    """The length ratios that balance and parity judge premiums by, or None where they judge something else
    (:func:`judges_estimated_premium`)."""
    return length_ratios(langs) if judges_estimated_premium(config) else None


def reference_chars_per_token(chars_per_token: dict[str, float], ratios: dict[str, LengthRatio],
                              reference: str) -> dict[str, float]:
    """Each language's chars/token counted in ``reference``'s characters (:func:`english_chars_per_token`,
    scaled by the reference's ratio): the scale :func:`targeting.measure_parallel` measures on a dev set."""
    return {k: v * ratios[reference].ratio for k, v in english_chars_per_token(chars_per_token, ratios).items()}


def resolve_goal(config: TrainingRun) -> targeting.Goal:
    """``config.goal`` with ``balance=None`` decided: fair by default, i.e. balance unless targets, parity,
    shares or a temperature decide the shares."""
    goal = config.goal
    if goal.balance is None:
        goal = dataclasses.replace(goal, balance=not (goal.targets or goal.parity or config.shares or config.temperature))
    return goal


@dataclass
class _Trained:
    """What the training steps left in the checkpoint folder."""

    started: float
    prepared: sampling.PreparedText
    train_config: backends.TrainConfig
    rounds: list[targeting.Round]
    chosen: targeting.Round
    tokenizer: Path
    budgets: dict[str, int]
    naive: Path | None


def _train(config: TrainingRun, ckpt: checkpoint.Checkpoint) -> _Trained:
    started = time.time()
    prepared = ckpt.load_prepared()
    if prepared is None:
        with ckpt.staging(checkpoint.PREPARED) as staged:
            prepared = sampling.prepare_text(config.texts, staged, holdout=config.holdout,
                                             max_validation_chars=config.max_validation_chars,
                                             max_chars_per_source=config.max_chars_per_source,
                                             progress=config.progress)
            prepared = ckpt.save_prepared(prepared, staged)
    alphabet = set().union(*(lt.alphabet for lt in prepared.languages.values()))
    train_config = resolve_train(config.train, config.whole_graphemes, prepared)
    backends.check_config(train_config, len(alphabet))
    validation = {k: lt.validation for k, lt in prepared.languages.items()}  # never empty (prepare_text)
    dev = read_dev_set(config, list(prepared.languages))
    reference = dev_reference(config, list(prepared.languages))
    ratios = judging_ratios(config, list(prepared.languages))
    if ratios is not None:
        _progress(config, f"balance by premium against {reference}, judged in {reference}'s characters per token: "
                          + describe(ratios))
    shares = sampling.resolve_shares({k: lt.train_chars for k, lt in prepared.languages.items()},
                                     config.shares, config.temperature)
    rounds: list[targeting.Round] = []

    def train_round(shares: dict[str, float], sample_chars: int | None, probe: bool) -> targeting.Round:
        start = time.time()
        index = len(rounds) + 1
        budgets = _budgets(config, prepared, shares, sample_chars)
        done = ckpt.load_round(index, dict(shares), sum(budgets.values()), probe)
        if done is not None:
            _progress(config, f"round {index}: done before the interruption, taken from the checkpoint")
            rounds.append(done)
            return done
        _progress(config, f"round {index}{' (probe)' if probe else ''}: training {train_config.backend} at "
             f"{train_config.vocab_size} on " + ", ".join(f"{k} {v:,} chars ({shares[k]:.1%})" for k, v in budgets.items()))
        with ckpt.staging(f"round{index}") as staged:
            tokenizer = backends.train(train_config, lambda b=budgets: sampling.iter_sample(prepared, b), staged)
            if dev:
                measured = targeting.measure_parallel(str(tokenizer), dev, reference)
            else:
                measured = targeting.measure(str(tokenizer), validation)
                if ratios is not None:  # in the reference's characters: equal values, equal premiums
                    measured = reference_chars_per_token(measured, ratios, reference)
            floor = targeting.floors(config.goal, measured)
            met = all(measured[k] >= v for k, v in floor.items())
            rounds.append(targeting.Round(index, dict(shares), measured, floor, met, time.time() - start, probe,
                                          sum(budgets.values()), tokenizer.name))
            ckpt.complete(f"round{index}", staged, rounds[-1].to_dict())
        _progress(config, targeting.rounds_table(rounds))
        return rounds[-1]

    # parity on a parallel dev set is balance's problem (every premium to 1.00) for any number of languages:
    # the bracketed balance rounds, not the one-gain steps that --target uses
    balance = (config.goal.balance or (dev is not None and config.goal.parity is not None)) and len(shares) > 1
    if balance:
        full = sum(_budgets(config, prepared, shares, config.sample_chars).values())
        probe_chars = min(config.probe_chars, full // 4)
        targeting.balance(lambda s, probe: train_round(s, probe_chars if probe else config.sample_chars, probe),
                          shares, config.goal)
    else:
        for _ in range(config.goal.max_rounds):
            last = train_round(shares, config.sample_chars, probe=False)
            if last.met or not config.goal.active:
                break
            shares = targeting.next_shares(shares, last.chars_per_token, last.floors)
    chosen = [r for r in rounds if not r.probe][-1]  # the rounds stop at the first that meets the goal
    if balance and config.goal.balance and not chosen.met:
        # No target was asked for: publish the fairest round (largest premium the smallest), and say so.
        chosen = targeting.best_round(rounds)
        premium = targeting.fairness(chosen, targeting.flat_languages(rounds))
        _log(f"warning: no round within the balance tolerance {config.goal.tolerance}; keeping round "
             f"{chosen.index}, the fairest (largest premium {premium:.3f})")
    elif config.goal.active and not chosen.met:
        raise targeting.TargetNotMet(rounds, config.goal)
    budgets = _budgets(config, prepared, chosen.shares, config.sample_chars)
    for note in _sample_notes(config, prepared, chosen.shares):
        _progress(config, f"note: {note}")  # early, for a long run; the closing summary repeats it
    naive = None
    if config.naive:
        naive_dir = ckpt.step("naive")
        if naive_dir is None or read_json(naive_dir / checkpoint.DONE) != {"budgets": budgets}:
            _progress(config, f"training the naive GPT-2 byte-level BPE at {train_config.vocab_size} on the same sample")
            with ckpt.staging("naive") as staged:
                backends.train_naive(train_config.vocab_size, lambda: sampling.iter_sample(prepared, budgets),
                                     staged, show_progress=train_config.show_progress)
                naive_dir = ckpt.complete("naive", staged, {"budgets": budgets})
        naive = naive_dir / "tokenizer.json"
    tokenizer = ckpt.root / f"round{chosen.index}" / chosen.tokenizer_file
    return _Trained(started, prepared, train_config, rounds, chosen, tokenizer, budgets, naive)


def _assemble(config: TrainingRun, t: _Trained, tmp: Path) -> RunResult:
    """OUT's content in ``tmp``: the chosen tokenizer, the naive one, the fertility and training reports."""
    final = tmp / t.tokenizer.name
    for path in t.tokenizer.parent.iterdir():  # sentencepiece: tokenizer.model and its tokenizer.json
        if path.name != checkpoint.DONE:
            shutil.copyfile(path, tmp / path.name)
    # named as loading OUT's tokenizer.json names it (after its folder): one name in every later report
    compare = [_named(str(final), config.out.name)]
    if t.naive is not None:
        (tmp / "naive").mkdir()
        shutil.copyfile(t.naive, tmp / "naive" / t.naive.name)
        compare.append(_named(str(tmp / "naive" / t.naive.name), "naive-gpt2-bpe"))
    compare.extend(config.references)
    validation = {k: lt.validation for k, lt in t.prepared.languages.items()}
    _progress(config, "measuring " + ", ".join(x if isinstance(x, str) else x.name for x in compare) + " on the validation slice")
    parallel = ({k: config.parallel[k] for k in t.prepared.languages} if config.parallel else None)
    report = fertility.analyze(compare, validation, tokenizer_dir=config.tokenizer_dir, progress=config.progress,
                               parallel=parallel, reference=dev_reference(config, list(t.prepared.languages)),
                               source_label="held-out slice of the training text")
    fertility.write_report(report, tmp / "fertility")
    reference = dev_reference(config, list(t.prepared.languages))
    ratios = None if config.parallel else length_ratios(t.prepared.languages)
    by_source = per_source(compare, t.prepared, config.tokenizer_dir)
    if ratios is not None:
        add_source_premiums(by_source, report, ratios, reference)
    alphabet = set().union(*(lt.alphabet for lt in t.prepared.languages.values()))
    training_report = {
        "schema_version": REPORT_SCHEMA_VERSION,
        "arguments": _arguments(config, t.train_config),
        "data": {
            "sha256": t.prepared.sha256,
            "sources": [asdict(s) for s in t.prepared.sources],
            "alphabet_size": len(alphabet),
            "validation_chars": {k: sum(map(len, v)) for k, v in validation.items()},
            "sample_chars": t.budgets,
            # each language's training text beside its share of the chosen round's sample
            "languages": {k: asdict(v) for k, v in _describe(config, t.prepared, t.chosen.shares).items()},
            "notes": _sample_notes(config, t.prepared, t.chosen.shares),
        },
        # what balance and parity equalised, and how each premium below was found
        "balance": {"by": config.balance_by, "reference": reference,
                    "premium_from": "parallel dev set" if config.parallel else "length ratios",
                    "length_ratios": {k: r.to_dict() for k, r in ratios.items()} if ratios else None,
                    "judged": ("premium on the parallel dev set" if config.parallel
                               else "estimated premium" if judges_estimated_premium(config)
                               else "chars/token")},
        # chars/token (and estimated premium) of every compared tokenizer on each source's part of the validation slice
        "by_source": by_source,
        "rounds": [r.to_dict() for r in t.rounds],
        "chosen_round": t.chosen.index,
        "tokenizer": {"name": config.out.name, "file": final.name, "sha256": file_sha256(final),
                      "vocab_size": t.train_config.vocab_size,
                      "special_tokens": backends.SPECIAL_TOKENS},
        "comparison": {x.name: {"vocab_size": x.vocab_size,
                                "chars_per_token": {k: m.chars_per_token for k, m in x.languages.items()},
                                # measured on the parallel dev set, else estimated from the validation slice
                                "premium": _premiums(x, ratios, reference),
                                "traps": [trap.to_dict() for trap in x.traps]} for x in report.tokenizers},
        "seconds": round(time.time() - t.started, 1),
    }
    write_json(tmp / REPORT_NAME, training_report)
    return RunResult(tmp, final, t.rounds, training_report)


def per_source(compare: list, prepared: sampling.PreparedText, tokenizer_dir: str | None) -> list[dict]:
    """Per source, its genre (from its file name), the characters of the validation slice drawn from it, the
    held-aside documents dropped as duplicates of training lines, and each ``compare`` tokenizer's (loaded,
    or a name or path) chars/token on that part: where the balance holds (dialogue, news, encyclopedic, fiction ...)."""
    slices: dict[str, list[str]] = {}
    rows = []
    for lang, lt in prepared.languages.items():
        at = 0
        for info in (i for i in prepared.sources if i.lang == lang):
            docs = lt.validation[at:at + info.slice_documents]
            at += info.slice_documents
            key = f"{len(rows)}"
            if docs:
                slices[key] = docs
            rows.append((key, info))
    measured = fertility.analyze(compare, slices, tokenizer_dir=tokenizer_dir, progress=False) if slices else None
    out = []
    for key, info in rows:
        cpt = ({x.name: x.languages[key].chars_per_token for x in measured.tokenizers}
               if measured and key in slices else {})
        out.append({"lang": info.lang, "source": info.spec, "genre": info.genre, "slice_chars": info.slice_chars,
                    "duplicates_dropped": info.duplicates_dropped, "chars_per_token": cpt})
    return out


def _premiums(x: fertility.TokenizerReport, ratios: dict[str, LengthRatio] | None, reference: str) -> dict[str, float]:
    if ratios is None:
        return {k: m.premium for k, m in x.parallel.items()}
    return premiums({k: m.chars_per_token for k, m in x.languages.items()}, ratios, reference)


def add_source_premiums(by_source: list[dict], report: fertility.Report, ratios: dict[str, LengthRatio],
                        reference: str) -> None:
    """Each source row's estimated premium per tokenizer: what its text costs against the same content in the
    reference language, at the reference's chars/token on its whole validation slice."""
    ref_cpt = {x.name: x.languages[reference].chars_per_token for x in report.tokenizers}
    for row in by_source:
        ratio = ratios[row["lang"]].ratio / ratios[reference].ratio
        row["premium"] = {name: ratio * ref_cpt[name] / cpt for name, cpt in row["chars_per_token"].items() if cpt > 0}


def _resume_key(config: TrainingRun) -> dict:
    """Every setting and input that changes what is trained (not where it goes or how it is shown)."""
    key = _arguments(config, config.train)
    for name in ("out", "references"):
        key.pop(name)
    key["train"].pop("show_progress")
    files = []
    # The parallel dev set too: a dev file changed at the same path would resume rounds measured on the old one.
    for t in [*config.texts, *(config.parallel or {}).values()]:
        path = Path(t.spec)
        stat = path.stat() if path.is_file() else None
        files.append([t.spec, stat.st_size if stat else None, stat.st_mtime_ns if stat else None])
    key["files"] = files
    return key


def resolve_train(train: backends.TrainConfig, whole_graphemes: bool | None,
                  prepared: sampling.PreparedText) -> backends.TrainConfig:
    """The training settings with ``whole_graphemes`` decided: as asked, else on for a backend that can (its
    ``Backend.whole_graphemes``) when a language's training text is at least MARK_SHARE combining marks/ZWJ/ZWNJ
    (Bangla ~15 %, English Wikipedia ~0.01 %)."""
    if whole_graphemes is None:
        whole_graphemes = backends.backend_named(train.backend).whole_graphemes and any(
            lt.mark_chars >= MARK_SHARE * lt.train_chars for lt in prepared.languages.values())
    return dataclasses.replace(train, whole_graphemes=whole_graphemes)


def _describe(config: TrainingRun, prepared: sampling.PreparedText,
              shares: dict[str, float]) -> dict[str, sampling.LanguageSample]:
    return sampling.describe_sample(prepared, shares, config.sample_chars, config.max_repeats,
                                    sampling.MIN_CHARS_PER_ENTRY * config.train.vocab_size)


def _budgets(config: TrainingRun, prepared: sampling.PreparedText, shares: dict[str, float],
             sample_chars: int | None) -> dict[str, int]:
    """:func:`sampling.sample_budgets`, the smallest sample of the default being sized by the vocabulary."""
    return sampling.sample_budgets(prepared, shares, sample_chars, config.max_repeats,
                                   sampling.MIN_CHARS_PER_ENTRY * config.train.vocab_size)


def _sample_notes(config: TrainingRun, prepared: sampling.PreparedText, shares: dict[str, float]) -> list[str]:
    """A line for every language that was capped, cycled or bounded the sample (never silent)."""
    return [v.note for v in _describe(config, prepared, shares).values() if v.note]


def sample_summary(report: dict) -> str:
    """The human summary of a training report's sample: per language its training characters, the characters
    drawn and the share they are, then the notes (capped, cycled, bounding)."""
    rows = [["language", "training chars", "sample chars", "share", "repeats"]]
    for lang, v in report["data"]["languages"].items():
        rows.append([lang, f"{v['text_chars']:,}", f"{v['sample_chars']:,}", f"{v['share']:.1%}", f"{v['repeats']:.2f}"])
    widths = [max(len(r[i]) for r in rows) for i in range(len(rows[0]))]
    lines = ["  ".join(c.rjust(w) for c, w in zip(r, widths, strict=True)) for r in rows]
    lines += [f"note: {n}" for n in report["data"]["notes"]]
    lines.append(balance_line(report["balance"]))
    names = list(report["comparison"])
    estimated = any("premium" in row for row in report.get("by_source", []))
    rows = [["language", "source", "genre", "slice chars", "duplicates"] + [f"{n} chars/token" for n in names]
            + ([f"{n} premium" for n in names] if estimated else [])]
    for row in report.get("by_source", []):
        rows.append([row["lang"], Path(row["source"]).name, row["genre"], f"{row['slice_chars']:,}",
                     str(row["duplicates_dropped"])]
                    + [f"{row['chars_per_token'][n]:.3f}" if n in row["chars_per_token"] else "-" for n in names]
                    + ([f"~{row['premium'][n]:.3f}" if n in row["premium"] else "-" for n in names] if estimated else []))
    widths = [max(len(r[i]) for r in rows) for i in range(len(rows[0]))]
    lines += ["validation slice per source:"] + ["  ".join(c.rjust(w) for c, w in zip(r, widths, strict=True)) for r in rows]
    return "\n".join(lines)


def balance_line(balance: dict) -> str:
    """One line: what the rounds equalised and where the report's premiums come from."""
    ref = balance["reference"]
    if balance["length_ratios"] is None:
        return f"premiums against {ref}: measured on the parallel dev set; balance and parity judged by {balance['judged']}"
    ratios = {k: LengthRatio(**r) for k, r in balance["length_ratios"].items()}
    return (f"premiums against {ref} (~): estimated from each language's chars/token and its "
            + describe(ratios) + f"; balance and parity judged by {balance['judged']}")


def _named(path: str, name: str) -> fertility.Tokenizer:
    # tokenizer.json files are named after their folder, which here is a temporary one: give them real names.
    tok = copy.copy(fertility.load_tokenizer(path))
    tok.name = name
    return tok


def _arguments(config: TrainingRun, train_config: backends.TrainConfig) -> dict:
    return {
        "texts": [{"lang": t.lang, "spec": t.spec} for t in config.texts],
        "out": str(config.out),
        "train": asdict(train_config),
        "whole_graphemes": config.whole_graphemes,
        "shares": config.shares,
        "temperature": config.temperature,
        "sample_chars": config.sample_chars,
        "max_chars_per_source": config.max_chars_per_source,
        "max_repeats": config.max_repeats,
        "holdout": config.holdout,
        "max_validation_chars": config.max_validation_chars,
        "goal": asdict(config.goal),
        "parallel": {k: v.spec for k, v in config.parallel.items()} if config.parallel else None,
        "balance_by": config.balance_by,
        "probe_chars": config.probe_chars,
        "naive": config.naive,
        "references": config.references,
    }


def _log(message: str) -> None:
    print(message, file=sys.stderr, flush=True)


def _progress(config: TrainingRun, message: str) -> None:
    """A progress line (rounds as they go): shown unless the command was asked for no progress."""
    if config.progress:
        _log(message)
