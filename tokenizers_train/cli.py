"""``tokenizers-train``: train a script-aware tokenizer, optionally to a fertility target, beside the naive one.

    tokenizers-train --text bn=bn.txt.gz --text en=en.txt.gz --vocab-size 64000 --out OUT \\
        [--backend hf-bpe|hf-unigram|spm-unigram|spm-bpe] [--naive] [--target bn=4.8,en=4.7 | --parity en]

With no --shares, --temperature, --target or --parity the shares are chosen so that every language gets the
same characters/token on its validation slice (balance; two short probe rounds fit the curve first).

Exit status: 0 trained; 2 bad input or configuration (one line, before any work where it can be checked);
3 target not met within the round limit; 130/143 stopped by SIGINT/SIGTERM (finished rounds are kept: the
same command resumes).
"""

from __future__ import annotations

import argparse
import sys
from pathlib import Path

from common import cli as clihelp
from common import paths
from common.errors import InputError
from fertility import parse_text_arg
from fertility.premium import add_parallel_arguments, parallel_sources  # as `fertility report` reads them
from tokenizers_train.backends import (
    BACKENDS,
    MAX_VOCAB_SIZE,
    VOCAB_MULTIPLE,
    TrainConfig,
    backend_named,
    padding,
)
from tokenizers_train.run import BALANCE_BY, REPORT_NAME, TrainingRun, sample_summary
from tokenizers_train.run import run as train
from tokenizers_train.sampling import AUTO_REPEATS, MAX_REPEATS, MIN_CHARS_PER_ENTRY
from tokenizers_train.targeting import PROBE_CHARS, Goal, TargetNotMet, parse_targets

PROG = "tokenizers-train"
EXIT_TARGET_NOT_MET = 3


def vocab_size(text: str) -> int:
    """argparse type: a positive multiple of 64 (the model's embedding is sized from it), at most
    ``MAX_VOCAB_SIZE``."""
    value = clihelp.positive_int(text)
    if value > MAX_VOCAB_SIZE:
        raise argparse.ArgumentTypeError(f"expected at most {MAX_VOCAB_SIZE}, got {text}")
    if value % VOCAB_MULTIPLE:
        lower = value // VOCAB_MULTIPLE * VOCAB_MULTIPLE
        nearest = f"{lower} or {lower + VOCAB_MULTIPLE}" if lower else str(VOCAB_MULTIPLE)
        raise argparse.ArgumentTypeError(f"expected a multiple of {VOCAB_MULTIPLE}, got {value}; use {nearest}")
    return value


def holdout(text: str) -> float:
    """argparse type: the fraction of each source held aside, under a half (the rest is trained on)."""
    value = clihelp.fraction(text)
    if value >= 0.5:
        raise argparse.ArgumentTypeError(f"expected a fraction under 0.5 (the rest is trained on), got {text}")
    return value


def phrase_fraction(text: str) -> float:
    """argparse type: a share of the vocabulary under 1 (the words need the rest)."""
    value = clihelp.share(text)
    if value >= 1:
        raise argparse.ArgumentTypeError(f"expected a share under 1 (the words need the rest of the vocabulary), "
                                         f"got {text}")
    return value


vocab_size.kind = int  # the help's metavar convention (N for a count, X for a number), as common.cli's types
holdout.kind = float
phrase_fraction.kind = float


def build_parser() -> argparse.ArgumentParser:
    p = clihelp.parser(PROG, __doc__)
    p.add_argument("--text", action="append", required=True, metavar="LANG=PATH", type=paths.input_spec(),
                   help="training text for a language (repeat; several per language allowed)")
    p.add_argument("--vocab-size", type=paths.not_a_path(vocab_size), default=64000, help="a multiple of 64 (default 64000)")
    p.add_argument("--out", required=True, type=paths.output_dir_type(Path), help="output folder (appears only when training succeeded)")
    p.add_argument("--backend", default=TrainConfig.backend, choices=BACKENDS,
                   help=f"the trainer (default {TrainConfig.backend})")
    p.add_argument("--phrase-fraction", type=paths.not_a_path(phrase_fraction), default=0.25,
                   help="hf-bpe: share of the vocabulary learned as multi-word merges (0 = words only; default 0.25)")
    p.add_argument("--whole-graphemes", choices=("auto", "on", "off"), default="auto",
                   help="hf-bpe: merges over whole grapheme units, so no token starts with a combining mark, ZWJ or "
                        "ZWNJ (default auto: on when a language's text has combining marks)")
    p.add_argument("--min-frequency", type=clihelp.positive_int, default=2,
                   help="a pair merged must occur at least this often")
    p.add_argument("--max-token-length", type=clihelp.positive_int, default=None,
                   help="longest token in characters (none by default)")
    mix = p.add_mutually_exclusive_group()
    mix.add_argument("--shares", default=None, metavar="LANG=W,...", type=paths.text, help="sample shares in characters, e.g. bn=0.7,en=0.3")
    mix.add_argument("--temperature", type=clihelp.positive_float, default=None,
                     help="shares proportional to chars ** (1/T)")
    p.add_argument("--sample-chars", type=clihelp.positive_int, default=None,
                   help="characters in the training sample (default: all the text, no language repeated)")
    p.add_argument("--max-chars-per-source", type=clihelp.positive_int, default=None,
                   help="read only the head of each --text")
    p.add_argument("--max-repeats", type=clihelp.positive_int, default=MAX_REPEATS,
                   help="times a language's text may be used in the sample (1: a language with too little text "
                        "for its share is capped, not cycled; default: 1, unless the sample would have fewer than "
                        f"{MIN_CHARS_PER_ENTRY} characters per vocabulary entry, then the scarce languages are "
                        f"cycled up to {AUTO_REPEATS} times towards that; the report says so)")
    p.add_argument("--holdout", type=paths.not_a_path(holdout), default=0.02, help="fraction of each source held aside for validation")
    p.add_argument("--max-validation-chars", type=clihelp.positive_int, default=400_000, help="per language")
    goal = p.add_mutually_exclusive_group()
    goal.add_argument("--target", default=None, metavar="LANG=CPT,...", type=paths.text, help="chars/token floor per language")
    goal.add_argument("--parity", default=None, metavar="LANG", type=clihelp.label,
                      help="every language within --tolerance of LANG")
    add_parallel_arguments(p, parallel_help="line-aligned parallel dev text for a language (repeat, one per --text "
                                            "language): balance and --parity are then judged on its premiums, for "
                                            "any number of languages",
                           flores_help="a FLORES-200 folder (DIR/devtest/LANG.devtest) as the parallel dev set; "
                                       "label --text with its codes (ben_Beng=..., eng_Latn=...)")
    p.add_argument("--balance-by", choices=BALANCE_BY, default="premium",
                   help="what balance and --parity equalise: premium (default: the tokens the same content costs; "
                        "measured on --parallel/--flores, else estimated from each language's chars/token and its "
                        "length ratio to English in the shipped Tatoeba sample) or chars-per-token on each "
                        "language's own text")
    p.add_argument("--tolerance", type=clihelp.at_least(1), default=1.05,
                   help="parity and balance: largest allowed ratio of premiums, or of chars/token with "
                        "--balance-by chars-per-token (default 1.05)")
    p.add_argument("--max-rounds", type=clihelp.positive_int, default=4, help="full training rounds at most (default 4)")
    p.add_argument("--probe-chars", type=clihelp.positive_int, default=PROBE_CHARS,
                   help=f"balance: characters of each short probe round (default {PROBE_CHARS:,})")
    p.add_argument("--naive", action="store_true", help="also train GPT-2's byte-level BPE on the same sample")
    p.add_argument("--reference", action="append", default=[], metavar="TOKENIZER", type=paths.name_or_path,
                   help="tokenizer to show beside the new one in the fertility report (name or path; repeat)")
    p.add_argument("--tokenizer-dir", default=None, metavar="DIR", type=paths.input_folder, help="where reference names are found (see fertility)")
    p.add_argument("--overwrite", action="store_true",
                   help="replace an OUT this project wrote (only once training succeeded)")
    p.add_argument("--no-progress", action="store_true", help="no progress bars and no per-round progress lines")
    return p


def config_from(args: argparse.Namespace) -> TrainingRun:
    """The run the arguments ask for; bad labels, shares and targets are :class:`common.errors.InputError`."""
    if args.sample_chars is not None and args.sample_chars < args.vocab_size:
        # every token past the alphabet is a merge learned from at least --min-frequency pairs of the sample
        raise InputError(f"--sample-chars {args.sample_chars}: a sample smaller than --vocab-size {args.vocab_size} "
                         "cannot train that vocabulary; give more characters or leave it out (all the text)")
    return TrainingRun(
        texts=[parse_text_arg(a) for a in args.text],
        out=args.out,
        train=TrainConfig(backend=args.backend, vocab_size=args.vocab_size, min_frequency=args.min_frequency,
                          max_token_length=args.max_token_length,
                          phrase_fraction=args.phrase_fraction if backend_named(args.backend).phrase_merges else 0.0,
                          show_progress=clihelp.bars_wanted(args)),
        shares=(clihelp.parse_lang_numbers(args.shares, option="--shares", number="WEIGHT", strict=True)
                if args.shares else None), temperature=args.temperature,
        sample_chars=args.sample_chars, max_chars_per_source=args.max_chars_per_source, holdout=args.holdout,
        max_validation_chars=args.max_validation_chars, max_repeats=args.max_repeats,
        goal=Goal(targets=parse_targets(args.target) if args.target else {}, parity=args.parity,
                  tolerance=args.tolerance, max_rounds=args.max_rounds),
        whole_graphemes={"auto": None, "on": True, "off": False}[args.whole_graphemes],
        probe_chars=args.probe_chars, parallel=parallel_sources(args.parallel, args.flores, args.flores_split) or None,
        balance_by=args.balance_by,
        naive=args.naive, references=args.reference, tokenizer_dir=args.tokenizer_dir,
        overwrite=args.overwrite, progress=not args.no_progress,
    )


def run(args: argparse.Namespace) -> int:
    try:
        result = train(config_from(args))
    except TargetNotMet as e:  # not bad input: a goal the rounds did not reach, with its own exit status
        print(f"{PROG}: {e}\nnothing was written to {args.out}", file=sys.stderr)
        return EXIT_TARGET_NOT_MET
    padded = padding(result.tokenizer.with_name("tokenizer.json"))
    if padded:  # the text ran out of pairs to merge: say how much of the vocabulary is only padding
        size = args.vocab_size
        print(f"warning: the sample gave {size - padded:,} of the {size:,} tokens; {padded:,} are padding "
              "(<|reserved_k|>): give more text (--text, --sample-chars) or a smaller --vocab-size", file=sys.stderr)
    print(f"tokenizer: {result.tokenizer}")
    print(f"training report: {result.out / REPORT_NAME}")
    print(f"fertility report: {result.out / 'fertility' / 'report.html'}")
    print(sample_summary(result.report))
    for name, row in result.report["comparison"].items():
        cpt = ", ".join(f"{k} {v:.3f}" for k, v in row["chars_per_token"].items())
        premium = ", ".join(f"{k} {v:.3f}" for k, v in row["premium"].items())
        traps = "; ".join(f"{t['script']}: {t['rule']}" for t in row["traps"]) or "none"
        print(f"  {name}: chars/token {cpt}; premium {premium}; traps: {traps}")
    return 0


def main(argv: list[str] | None = None) -> int:
    return clihelp.run_command(PROG, build_parser, run, argv)
