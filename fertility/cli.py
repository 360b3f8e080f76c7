"""``fertility report``: measure tokenizers on labelled text and write a report.

    fertility report --tokenizer gpt2 --tokenizer o200k_base \\
        --text bn=data/sample/bn/literature-bnarchive.txt.gz --text en=data/sample/en/wiki-en-chinapedia.txt.gz \\
        --parallel bn=ben.txt.gz --parallel en=eng.txt.gz --reference en --max-chars 400000 --out out/fertility
"""

from __future__ import annotations

import argparse
import sys

from common import cli as clihelp
from common.errors import InputError, OutputPathError
from common.outdir import check_output_dir
from fertility.analysis import analyze
from fertility.premium import FLORES_REFERENCE, FLORES_SPLITS, flores_sources
from fertility.report import terminal_table, write_report
from fertility.text import TextError, parse_text_arg
from fertility.tokenizers import KNOWN_TOKENIZERS, TOKENIZER_DIR_ENV

# One block in 64 in detail keeps a report within 1.25x of the encoder's own time (benchmarks/bench_fertility.py).
DEFAULT_DETAIL_EVERY = 64


def build_parser() -> argparse.ArgumentParser:
    parser = clihelp.parser("fertility", "How tokenizers treat each script and language.")
    sub = parser.add_subparsers(dest="command", required=True, metavar="COMMAND")
    rep = sub.add_parser("report", help="measure tokenizers on labelled text; write report.json/.md/.html",
                         description="Measure tokenizers on labelled text; write report.json, report.md and "
                                     "report.html.", formatter_class=clihelp.HelpFormatter)
    rep.add_argument("--tokenizer", action="append", required=True, metavar="SPEC",
                     help=f"a known name ({', '.join(KNOWN_TOKENIZERS)}) or a path; repeat for several")
    rep.add_argument("--text", action="append", default=[], metavar="LANG=PATH",
                     help="labelled text: LANG=PATH, LANG=PATH:FIELD or LANG=hf:NAME[:CONFIG[:SPLIT[:FIELD]]]")
    rep.add_argument("--parallel", action="append", default=[], metavar="LANG=PATH",
                     help="line-aligned parallel text, one file per language (for the premium); "
                          "without --text, the parallel files are also the text measured per language")
    rep.add_argument("--flores", default=None, metavar="DIR",
                     help="a local FLORES-200 folder (DIR/devtest/LANG.devtest): every language as parallel text, "
                          "premiums against eng_Latn unless --reference names another FLORES code")
    rep.add_argument("--flores-split", default="devtest", choices=FLORES_SPLITS, help="the FLORES split to read")
    rep.add_argument("--reference", default=None,
                     help="the parallel language premiums are measured against (default en; eng_Latn with --flores)")
    rep.add_argument("--max-chars", type=int, default=None, metavar="N",
                     help="read only the first N characters (whole documents) of each source")
    rep.add_argument("--tokenizer-dir", default=None, metavar="DIR",
                     help=f"where known names are found (else ${TOKENIZER_DIR_ENV}, then data/tokenizers)")
    rep.add_argument("--out", required=True, metavar="DIR",
                     help="the report folder: new or empty (published only on success; docs/contract.md)")
    rep.add_argument("--overwrite", action="store_true", help="replace an existing report folder this project wrote")
    rep.add_argument("--detail-every", type=int, default=DEFAULT_DETAIL_EVERY, metavar="K",
                     help="analyse one block of text in K in detail (scripts, clusters, words, ceilings: estimates "
                          "with 95%% intervals) and every document for its exact chars/bytes/tokens; 1: all in detail "
                          f"(default {DEFAULT_DETAIL_EVERY})")
    rep.add_argument("--skip-bad-utf8", action="store_true",
                     help="skip lines of --text files that are not UTF-8 (counted in report.json) instead of stopping")
    rep.add_argument("--no-progress", action="store_true", help="no progress bars")
    _add_serve_parser(sub)
    return parser


def _add_serve_parser(sub) -> None:
    from fertility.serve import DEFAULT_HOST, DEFAULT_PORT, WORKERS

    srv = sub.add_parser("serve", help="the explorer: a local web app showing how tokenizers cut pasted text",
                         description="The explorer as a local web app: paste text or drop a file, choose tokenizers, "
                                     "see the tokens and the report's figures. Prints its URL; opens nothing.",
                         formatter_class=clihelp.HelpFormatter)
    srv.add_argument("--tokenizer", action="append", default=[], metavar="SPEC",
                     help="a tokenizer to offer (a known name or a path; loaded now); repeat for several. "
                          "The known names found in the tokenizer folders are offered too")
    srv.add_argument("--tokenizer-dir", default=None, metavar="DIR",
                     help=f"where known names are found (else ${TOKENIZER_DIR_ENV}, then data/tokenizers)")
    srv.add_argument("--host", default=DEFAULT_HOST,
                     help="the address to listen on; anything but loopback lets other machines in (a warning says so)")
    srv.add_argument("--port", type=clihelp.port, default=DEFAULT_PORT, help="the port; 0 picks a free one")
    srv.add_argument("--workers", type=clihelp.positive_int, default=WORKERS,
                     help="requests measured at once (each on a thread; more wait their turn)")


def run_serve(args: argparse.Namespace) -> int:
    """``fertility serve``: the tokenizers and the address are checked before it listens; runs until a signal."""
    from fertility.serve import Shelf, serve

    serve(Shelf(args.tokenizer, args.tokenizer_dir), args.host, args.port, workers=args.workers)
    return 0


def main(argv: list[str] | None = None) -> int:
    args = build_parser().parse_args(argv)
    if args.command == "serve":  # under the contract's handler (one-line errors, signals): run_command
        return clihelp.run_command("fertility", build_parser, run_serve, argv)
    try:
        # Every argument is checked before any work: the output path here, the text and tokenizers in analyze.
        texts = [parse_text_arg(a) for a in args.text]
        parallel = {}
        for arg in args.parallel:
            source = parse_text_arg(arg)
            if source.lang in parallel:
                raise TextError(f"--parallel {arg}: language {source.lang!r} given twice")
            parallel[source.lang] = source
        if args.flores:
            if parallel:
                raise TextError("--flores and --parallel: give one source of parallel text")
            parallel = flores_sources(args.flores, args.flores_split)
        inputs = [s.spec for s in [*texts, *parallel.values()]] + ([args.flores] if args.flores else [])
        check_output_dir(args.out, overwrite=args.overwrite, inputs=inputs)
        reference = args.reference or (FLORES_REFERENCE if args.flores else "en")
        if not texts and not parallel:
            raise TextError("no text: pass --text LANG=PATH, --parallel LANG=PATH or --flores DIR")
        if args.max_chars is not None and args.max_chars <= 0:
            raise TextError(f"--max-chars {args.max_chars}: expected a positive number of characters")
        report = analyze(args.tokenizer, texts or list(parallel.values()), parallel=parallel or None,
                         reference=reference, max_chars=args.max_chars, tokenizer_dir=args.tokenizer_dir,
                         progress=not args.no_progress, errors="skip" if args.skip_bad_utf8 else "strict",
                         detail_every=args.detail_every)
    except (InputError, OutputPathError) as e:  # bad input or a refused --out; not bugs
        print(f"fertility: error: {e}", file=sys.stderr)
        return 2
    print(terminal_table(report))
    out = write_report(report, args.out, overwrite=args.overwrite)
    print(f"report: {out / 'report.html'} (also report.md, report.json)")
    return 0
