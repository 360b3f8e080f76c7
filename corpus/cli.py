"""The ``corpus`` command: ``build`` token shards, ``plan`` a mixture, ``inspect`` a shard directory."""

from __future__ import annotations

import argparse
import json
import os
import sys
from pathlib import Path

from common import cli as clihelp
from common import paths
from common.errors import InputError
from corpus.build import build, plan_only
from corpus.config import BuildConfig, BuildError, IngestConfig
from corpus.engine.executors import EXECUTORS, ExecutorConfig, SlurmConfig, StageError
from corpus.mixture.measure import corpus_tables
from corpus.mixture.plan import SHARE_TOLERANCE, format_plan, parse_mix, planned_language_tokens, share_misses
from corpus.quality.dedup import DedupConfig
from corpus.quality.filters import CleanConfig, options
from corpus.read.sources import parse_source
from corpus.shards.format import Manifest, ShardError
from corpus.shards.verify import check_decoded_text, format_summary, recount_languages, verify_shards

PROG = "corpus"


def _checked(parse):
    """An argparse type from a parser that raises InputError: the message becomes argparse's one line."""
    def convert(text: str):
        try:
            return parse(text)
        except InputError as e:
            raise argparse.ArgumentTypeError(str(e)) from None

    convert.__name__ = parse.__name__
    return convert


def _source_arg(text: str) -> str:
    """A ``--source`` as given, once it parses (its label checked) at parse time."""
    parse_source(text)
    return text


_source = paths.input_spec(_checked(_source_arg))
_mix = paths.not_a_path(_checked(parse_mix))


# FineWeb-2's published settings for Bengali (configs/ben_Beng.yml of huggingface/fineweb-2), mapped onto our
# filters where one measures the same thing: the GlotLID confidence its files carry, and the duplicated-line
# and duplicated-5-gram shares. Its other filters (stopwords, punctuation, word length) have no counterpart here.
PRESETS = {
    "fineweb2-ben": {"min_language_score": 0.872, "max_dup_line_share": 0.165, "max_dup_ngram_share": 0.099},
}


def _add_build_args(p: argparse.ArgumentParser, *, out_required: bool) -> None:
    d_dedup = DedupConfig()
    p.add_argument("--source", action="append", default=[], metavar="LANG=SPEC", required=True, type=_source,
                   help="a labelled source: LANG=PATH (.txt/.txt.gz one document per line, .jsonl, .parquet, a "
                        "datasets folder), LANG=PATH:FIELD, LANG=hf:NAME[:CONFIG[:SPLIT[:FIELD]]], or a file set "
                        "read through fsspec: a glob or URL such as "
                        "hf://datasets/HuggingFaceFW/fineweb-2/data/ben_Beng/train/*.parquet; repeat")
    p.add_argument("--tokenizer", required=True, type=paths.name_or_path, help="a name (gpt2, o200k_base, ...) or a path fertility can load")
    p.add_argument("--tokenizer-dir", type=paths.input_folder, help="where to look up tokenizer names first")
    mix = p.add_mutually_exclusive_group(required=True)
    mix.add_argument("--mix", type=_mix, help="language shares in tokens, e.g. bn=0.7,en=0.3 (must sum to 1)")
    mix.add_argument("--temperature", type=clihelp.positive_float, help="shares ~ available tokens ** (1/T) instead of --mix")
    p.add_argument("--tokens", type=clihelp.positive_int, required=True, help="training tokens to plan, e.g. 2e9")
    p.add_argument("--max-epochs", type=clihelp.positive_float, default=4.0, help="most repetitions of any source (default 4)")
    p.add_argument("--seed", type=clihelp.non_negative_int, default=0)
    p.add_argument("--val-tokens", type=clihelp.non_negative_int, default=100_000, help="validation tokens per language (default 1e5)")
    p.add_argument("--val-max-share", type=clihelp.share, default=0.1,
                   help="never hold out more than this share of a language (default 0.1)")
    p.add_argument("--strict-mix", action="store_true",
                   help="refuse (exit 2, before writing shards) when a language gets no validation documents or "
                        f"its training share misses the plan by more than {SHARE_TOLERANCE:g}; without it, a warning")
    p.add_argument("--shard-tokens", type=clihelp.positive_int, default=100_000_000, help="tokens per shard at most (default 1e8)")
    p.add_argument("--compare-tokenizer", action="append", default=[], metavar="SPEC", type=paths.name_or_path,
                   help="also count tokens with this tokenizer in the report (e.g. gpt2); repeat")
    p.add_argument("--bad-utf8", choices=("fail", "skip"), default="fail",
                   help="a line that is not UTF-8: stop with its file and line (default), or skip and count it")
    p.add_argument("--max-chars", type=clihelp.positive_int, help="read only the first N characters of each source (whole documents)")
    p.add_argument("--unit-docs", type=clihelp.positive_int, default=1000,
                   help="documents per block when tasks split one file between them (default 1000)")
    for option in options():  # the quality filters' settings (corpus.quality.filters)
        if option.flag:
            p.add_argument(option.flag_name, type=option.type, default=option.default, help=option.help)
    p.add_argument("--min-language-score", type=clihelp.share,
                   help="drop parquet rows whose language_score column (FineWeb-2, FineWeb-Edu) is lower")
    p.add_argument("--preset", choices=sorted(PRESETS),
                   help="filter settings published with a corpus (fineweb2-ben: FineWeb-2's Bengali thresholds); "
                        "an option set to other than its default wins")
    p.add_argument("--no-exact-dedup", action="store_true")
    p.add_argument("--no-near-dedup", action="store_true")
    p.add_argument("--near-dup-threshold", type=clihelp.fraction, default=d_dedup.threshold)
    p.add_argument("--out", required=out_required, type=paths.output_dir, help=(
        "the shard directory: a new or empty folder (or one this command wrote, with --overwrite or --append); "
        "the work happens in .OUT.building beside it, which a rerun of the same command resumes"
        if out_required else "keep the ingest in .OUT.building beside OUT, so that a later build into OUT reuses it"))
    p.add_argument("--workers", type=clihelp.positive_int, default=os.cpu_count() or 1,
                   help="tasks running at once (default: cores; 1 = in this process)")
    p.add_argument("--tasks", type=clihelp.positive_int, help="ingest tasks, the parts the sources are split into (default: --workers)")
    p.add_argument("--executor", choices=EXECUTORS, default="local",
                   help="datatrove executor: local (default, no server), ray or slurm")
    p.add_argument("--ray-address", type=paths.text, help="with --executor ray: the cluster to use (default: start a local Ray "
                                         "instance with --workers CPUs and stop it afterwards)")
    d_slurm = SlurmConfig()
    g = p.add_argument_group("slurm (--executor slurm: each stage is a job array; this command waits for it)")
    g.add_argument("--slurm-partition", type=paths.text, help="the partition to run on (required with --executor slurm)")
    g.add_argument("--slurm-time", default=d_slurm.time, type=paths.text, help="time limit of a task")
    g.add_argument("--slurm-mem-per-cpu", type=clihelp.positive_int, default=d_slurm.mem_per_cpu_gb, metavar="GB")
    g.add_argument("--slurm-qos", type=paths.text)
    g.add_argument("--slurm-env-command", metavar="CMD", type=paths.text,
                   help="run on the node before each task (default: activate this command's virtual environment)")
    g.add_argument("--slurm-sbatch-arg", action="append", default=[], metavar="KEY=VALUE", type=paths.text,
                   help="another #SBATCH option, e.g. account=myproject (repeatable)")
    g.add_argument("--slurm-poll", type=clihelp.positive_float, default=d_slurm.poll_s, metavar="SECONDS",
                   help="how often to look whether a stage has finished")
    p.add_argument("--work-dir", type=paths.work_dir, help="where the stages' files go, any fsspec URL (default: .work in the staging "
                                      "folder)")
    p.add_argument("--status-file", type=paths.output_file, help="JSON progress of every stage, rewritten while it runs "
                                         "(default: WORK_DIR/status.json for a local work folder)")
    p.add_argument("--no-progress", action="store_true", help="no progress lines")


def _apply_preset(a: argparse.Namespace) -> None:
    """A preset's values, for every option the user left at its default."""
    defaults = CleanConfig() | {"min_language_score": None}
    for key, value in PRESETS.get(a.preset or "", {}).items():
        if getattr(a, key) == defaults[key]:
            setattr(a, key, value)


def _executor(a: argparse.Namespace) -> ExecutorConfig:
    sbatch = {}
    for item in a.slurm_sbatch_arg:
        key, sep, value = item.partition("=")
        if not sep or not key.strip():
            raise BuildError(f"--slurm-sbatch-arg {item!r}: expected KEY=VALUE (an sbatch option without its --)")
        sbatch[key.strip().removeprefix("--")] = value.strip()
    slurm = SlurmConfig(partition=a.slurm_partition, time=a.slurm_time, mem_per_cpu_gb=a.slurm_mem_per_cpu,
                        qos=a.slurm_qos, env_command=a.slurm_env_command, sbatch_args=sbatch, poll_s=a.slurm_poll)
    return ExecutorConfig(kind=a.executor, workers=a.workers, tasks=a.tasks, ray_address=a.ray_address,
                          slurm=slurm, progress=not a.no_progress, status_file=a.status_file)


def _config(a: argparse.Namespace) -> BuildConfig:
    _apply_preset(a)
    clean = CleanConfig({o.field: getattr(a, o.field) for o in options() if o.flag})
    dedup = DedupConfig(exact=not a.no_exact_dedup, near=not a.no_near_dedup, threshold=a.near_dup_threshold)
    ingest = IngestConfig(tokenizer=a.tokenizer, tokenizer_dir=a.tokenizer_dir,
                          compare_tokenizers=a.compare_tokenizer, unit_docs=a.unit_docs, bad_utf8=a.bad_utf8,
                          max_chars=a.max_chars, min_language_score=a.min_language_score, clean=clean, dedup=dedup)
    return BuildConfig(sources=a.source, tokens=a.tokens, mix=a.mix,
                       temperature=a.temperature, max_epochs=a.max_epochs, seed=a.seed, val_tokens=a.val_tokens,
                       val_max_share=a.val_max_share, shard_tokens=a.shard_tokens, ingest=ingest)


def _cmd_build(a: argparse.Namespace) -> int:
    config = _config(a)
    manifest, prepared = build(config, a.out, append=a.append, overwrite=a.overwrite, executor=_executor(a),
                               work_dir=a.work_dir, keep_work=a.keep_work, strict_mix=a.strict_mix)
    if prepared is None:
        print(f"{a.out}: already built with these arguments; nothing to do")
    else:
        print(corpus_tables(prepared.sizes, prepared.checked.tokenizer.name))
        print()
        print(format_plan(prepared.plan))
        print()
        print(f"report: {Path(a.out) / 'report.md'}")
    print(format_summary(a.out, manifest))
    return 0


def _cmd_plan(a: argparse.Namespace) -> int:
    config = _config(a)
    prepared = plan_only(config, a.out, executor=_executor(a), work_dir=a.work_dir, strict_mix=a.strict_mix)
    print(corpus_tables(prepared.sizes, prepared.checked.tokenizer.name))
    print()
    print(format_plan(prepared.plan))
    if a.json:
        print(json.dumps(prepared.plan.to_dict(), indent=2))
    return 0


def _cmd_inspect(a: argparse.Namespace) -> int:
    manifest = Manifest.load(a.dir)
    train_documents = sum(s.documents for s in manifest.split("train"))
    if a.check_text > train_documents:  # a draw of each document at most once would need no more
        raise InputError(f"--check-text {a.check_text:g}: {Path(a.dir) / 'manifest.json'} lists {train_documents:,} "
                         f"training documents; give at most that many")
    if not a.no_summary:
        print(format_summary(a.dir, manifest))
    result = verify_shards(a.dir, manifest, hashes=not a.no_hashes, progress=not a.no_progress)
    for problem in result.problems:
        print(f"FAIL {problem}")
    if result.ok:
        print(f"OK: {result.shards} shards, {result.tokens:,} tokens match the manifest "
              f"(headers, sizes, counts, BOS-delimited documents{'' if a.no_hashes else ', sha256'})")
    ok = result.ok
    if a.recount or a.check_text:
        try:
            beside = Path(a.dir) / manifest.tokenizer.spec  # a relative path in a manifest: from the shards
            tok = manifest.tokenizer.load(str(beside) if beside.exists() else None)
        except ShardError as e:
            print(f"FAIL {e}")
            return 1
    if a.check_text:
        checked, problems = check_decoded_text(a.dir, manifest, tok, a.check_text, progress=not a.no_progress)
        for problem in problems:
            print(f"FAIL {problem}")
        if not problems:
            print(f"OK: {checked} sampled training documents decode to cleaned source documents")
        ok = ok and not problems
    if a.recount:
        train = manifest.split("train")
        counts = recount_languages(a.dir, train, tok, manifest.tokenizer.bos_id, manifest.languages(),
                                   progress=not a.no_progress)
        total = sum(counts.values())
        claimed: dict[str, int] = {}
        for s in train:
            for lang, n in s.tokens_by_language.items():
                claimed[lang] = claimed.get(lang, 0) + n
        planned = planned_language_tokens(manifest.plan)  # an --append's earlier plans included
        total_planned = sum(planned.values())
        target = {lang: n / total_planned for lang, n in planned.items()} if total_planned else {}
        print("recount from decoded shard text (train):")
        for lang, n in counts.items():
            line = f"  {lang}: {n:,} tokens = {n / total:.4f}; manifest {claimed.get(lang, 0):,}"
            if lang in target:
                line += f"; plan {target[lang]:.4f} (off by {abs(n / total - target[lang]):.4f})"
            print(line)
        ok = ok and counts == claimed
        if counts != claimed:
            print("FAIL recounted per-language tokens differ from the manifest's")
        broken = share_misses(counts, target)
        if manifest.arguments.get("val_tokens"):
            broken += [f"{lang}: no validation shard, though --val-tokens is {manifest.arguments['val_tokens']:,}"
                       for lang in claimed if not manifest.split("val", language=lang)]
        for line in broken:
            print(f"FAIL {line}")
        ok = ok and not broken
    return 0 if ok else 1


def build_parser() -> argparse.ArgumentParser:
    p = clihelp.parser(PROG, __doc__)
    sub = p.add_subparsers(dest="command", required=True, metavar="COMMAND")
    b = sub.add_parser("build", help="clean, dedup, mix in tokens and write token shards + manifest + report",
                       description="Clean, dedup, mix in tokens and write token shards, their manifest and a report.",
                       formatter_class=clihelp.HelpFormatter)
    _add_build_args(b, out_required=True)
    b.add_argument("--append", action="store_true",
                   help="add shards to an existing shard directory (same tokenizer required)")
    b.add_argument("--overwrite", action="store_true",
                   help="replace OUT when it holds a result this project wrote (never anything else)")
    b.add_argument("--keep-work", action="store_true", help="keep the work folder (the stages' files) after the build")
    b.set_defaults(func=_cmd_build)
    pl = sub.add_parser("plan", help="measure the sources and print the mixture plan; writes no shards",
                        description="Measure the sources and print the mixture plan; writes no shards.",
                        formatter_class=clihelp.HelpFormatter)
    _add_build_args(pl, out_required=False)
    pl.add_argument("--json", action="store_true", help="also print the plan as JSON")
    pl.set_defaults(func=_cmd_plan)
    i = sub.add_parser("inspect", help="print a shard directory's manifest summary and verify its shards",
                       description="Print a shard directory's manifest summary and verify its shards.",
                       formatter_class=clihelp.HelpFormatter)
    i.add_argument("dir", type=paths.input_folder)
    i.add_argument("--recount", action="store_true",
                   help="decode every training document and recount tokens per language by script")
    i.add_argument("--check-text", type=clihelp.non_negative_int, default=0, metavar="N",
                   help="decode N random training documents and check each is a cleaned document of the "
                        "manifest's sources (reads and cleans the sources again)")
    i.add_argument("--no-hashes", action="store_true", help="skip the sha256 check of shard contents")
    i.add_argument("--no-summary", action="store_true",
                   help="only verify: no manifest summary (a script that just printed the build's own)")
    i.add_argument("--no-progress", action="store_true")
    i.set_defaults(func=_cmd_inspect)
    return p


def run(args: argparse.Namespace) -> int:
    try:
        return args.func(args)
    except StageError as e:  # tasks that failed or were cancelled: their logs keep the detail, a rerun retries
        print(f"{PROG}: error: {e}", file=sys.stderr)
        return 1


def main(argv: list[str] | None = None) -> int:
    return clihelp.run_command(PROG, build_parser, run, argv)
